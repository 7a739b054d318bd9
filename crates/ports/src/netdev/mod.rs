//! Shared helpers of the kernel-facing ports (AF_XDP, AF_PACKET, TAP):
//! interface lookup, the error type naming backend, interface and cause, and
//! a link watcher that follows an interface's state off the data path.
//!
//! The watcher is one thread per port listening to rtnetlink link events
//! (`RTM_NEWLINK`/`RTM_DELLINK`), plus a resynchronising `RTM_GETLINK` once a
//! second in case an event was lost. It publishes what it learns in a
//! [`LinkState`] of atomics that the port's `link_up()`, `slots_for()` (MTU)
//! and `backend_counters()` read without any system call.

#[allow(unsafe_code)]
mod sys;

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fabric::{PortInfo, QueueId, RxQueue, TxQueue};

/// A control-path failure of a kernel port, naming the backend, the
/// interface and the reason, e.g.
/// `af_xdp on veth0: bpf(BPF_PROG_LOAD) failed: operation not permitted`.
#[derive(Debug)]
pub struct KernelPortError {
    /// Backend: "af_xdp", "af_packet", "tap".
    pub backend: &'static str,
    /// Interface the port was opened on.
    pub ifname: String,
    /// What failed, e.g. "setsockopt(PACKET_RX_RING) failed".
    pub what: String,
    /// The operating-system error, if one caused it.
    pub source: Option<io::Error>,
}

impl KernelPortError {
    /// An error caused by an OS error.
    pub fn os(backend: &'static str, ifname: &str, what: impl Into<String>, e: io::Error) -> Self {
        Self {
            backend,
            ifname: ifname.to_string(),
            what: what.into(),
            source: Some(e),
        }
    }

    /// An error without an OS cause (bad configuration, unsupported case).
    pub fn msg(backend: &'static str, ifname: &str, what: impl Into<String>) -> Self {
        Self {
            backend,
            ifname: ifname.to_string(),
            what: what.into(),
            source: None,
        }
    }

    /// The errno, if an OS error caused this.
    pub fn raw_os_error(&self) -> Option<i32> {
        self.source.as_ref().and_then(|e| e.raw_os_error())
    }
}

impl fmt::Display for KernelPortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} on {}: {}", self.backend, self.ifname, self.what)?;
        if let Some(e) = &self.source {
            write!(f, ": {}", errno_text(e))?;
        }
        Ok(())
    }
}

impl std::error::Error for KernelPortError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_ref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// An OS error as a lower-case message without the "(os error N)" suffix:
/// "operation not permitted".
pub fn errno_text(e: &io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s[..],
    };
    let mut c = s.chars();
    match c.next() {
        Some(first) => first.to_lowercase().chain(c).collect(),
        None => String::new(),
    }
}

/// The index of interface `name`.
pub fn ifindex(name: &str) -> io::Result<u32> {
    sys::if_nametoindex(name)
}

/// The current name of interface `index`.
pub fn ifname(index: u32) -> io::Result<String> {
    sys::if_indextoname(index)
}

/// One snapshot of an interface's state, from rtnetlink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkInfo {
    /// Administratively up (`IFF_UP`).
    pub admin_up: bool,
    /// Carrier present (`IFF_LOWER_UP`).
    pub carrier: bool,
    /// MTU in bytes.
    pub mtu: u32,
    /// Number of receive queues (0 if the kernel did not say).
    pub rx_queues: u32,
}

impl LinkInfo {
    /// Up and with carrier: frames can flow.
    pub fn up(&self) -> bool {
        self.admin_up && self.carrier
    }
}

/// State of one interface shared between the watcher and the port.
#[derive(Debug, Default)]
pub struct LinkState {
    up: AtomicBool,
    removed: AtomicBool,
    /// Moved to another network namespace and followed there (TAP): up
    /// from then on, as the port's descriptors still reach the device.
    moved: AtomicBool,
    mtu: AtomicU32,
    /// Number of up/down transitions seen.
    changes: AtomicU64,
    /// Number of MTU changes seen.
    mtu_changes: AtomicU64,
}

impl LinkState {
    /// Up, with carrier, and not removed.
    #[inline]
    pub fn up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }

    /// The interface was deleted (or moved to another namespace).
    #[inline]
    pub fn removed(&self) -> bool {
        self.removed.load(Ordering::Relaxed)
    }

    /// Current MTU in bytes.
    #[inline]
    pub fn mtu(&self) -> u32 {
        self.mtu.load(Ordering::Relaxed)
    }

    /// Counters for `backend_counters()`.
    pub fn counters(&self) -> [(&'static str, u64); 5] {
        [
            ("link_up", self.up() as u64),
            ("link_removed", self.removed() as u64),
            ("link_changes", self.changes.load(Ordering::Relaxed)),
            ("mtu", self.mtu() as u64),
            ("mtu_changes", self.mtu_changes.load(Ordering::Relaxed)),
        ]
    }

    /// Moved to another network namespace and followed (see
    /// [`LinkWatch::start_following_moves`]).
    #[inline]
    pub fn moved(&self) -> bool {
        self.moved.load(Ordering::Relaxed)
    }

    fn apply(&self, info: &LinkInfo) {
        if self.removed() || self.moved() {
            return;
        }
        let up = info.up();
        if self.up.swap(up, Ordering::Relaxed) != up {
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
        let old = self.mtu.swap(info.mtu, Ordering::Relaxed);
        if old != 0 && old != info.mtu {
            self.mtu_changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn mark_moved(&self) {
        if self.removed.load(Ordering::Relaxed) || self.moved.swap(true, Ordering::Relaxed) {
            return;
        }
        if !self.up.swap(true, Ordering::Relaxed) {
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn mark_removed(&self) {
        if self.moved() {
            // Its index in this namespace now means nothing (or another link).
            return;
        }
        if !self.removed.swap(true, Ordering::Relaxed) && self.up.swap(false, Ordering::Relaxed) {
            self.changes.fetch_add(1, Ordering::Relaxed);
        }
    }
}

const RTM_NEWLINK: u16 = 16;
const RTM_DELLINK: u16 = 17;
const RTM_GETLINK: u16 = 18;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const IFLA_MTU: u16 = 4;
const IFLA_NUM_RX_QUEUES: u16 = 32;
/// In an RTM_DELLINK: the link moved to the namespace with this id.
const IFLA_NEW_NETNSID: u16 = 45;
const IFF_UP: u32 = 0x1;
const IFF_LOWER_UP: u32 = 0x1_0000;
const NLMSG_HDRLEN: usize = 16;
const IFINFOMSG_LEN: usize = 16;

/// What one netlink message says about interface `ifindex`.
#[derive(Debug, PartialEq, Eq)]
enum Event {
    Info(LinkInfo),
    Removed,
    /// Moved to another network namespace (RTM_DELLINK with IFLA_NEW_NETNSID).
    Moved,
    /// The kernel answered our query with an error (e.g. ENODEV).
    Error(i32),
}

fn rd_u16(b: &[u8], at: usize) -> u16 {
    u16::from_ne_bytes([b[at], b[at + 1]])
}
fn rd_u32(b: &[u8], at: usize) -> u32 {
    u32::from_ne_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Parses a buffer of netlink messages, calling `f` for each one concerning
/// `ifindex` (link messages) or answering sequence number `seq` (errors).
fn parse_messages(buf: &[u8], ifindex: u32, seq: u32, mut f: impl FnMut(Event)) {
    let mut off = 0;
    while off + NLMSG_HDRLEN <= buf.len() {
        let len = rd_u32(buf, off) as usize;
        if len < NLMSG_HDRLEN || off + len > buf.len() {
            return;
        }
        let ty = rd_u16(buf, off + 4);
        let mseq = rd_u32(buf, off + 8);
        let body = &buf[off + NLMSG_HDRLEN..off + len];
        match ty {
            RTM_NEWLINK | RTM_DELLINK if body.len() >= IFINFOMSG_LEN => {
                let index = rd_u32(body, 4);
                if index == ifindex {
                    if ty == RTM_DELLINK {
                        let mut a = IFINFOMSG_LEN;
                        let mut moved = false;
                        while a + 4 <= body.len() {
                            let alen = rd_u16(body, a) as usize;
                            if alen < 4 || a + alen > body.len() {
                                break;
                            }
                            moved |= rd_u16(body, a + 2) & 0x3fff == IFLA_NEW_NETNSID;
                            a += (alen + 3) & !3;
                        }
                        f(if moved { Event::Moved } else { Event::Removed });
                    } else {
                        let flags = rd_u32(body, 8);
                        let mut mtu = 0;
                        let mut rx_queues = 0;
                        let mut a = IFINFOMSG_LEN;
                        while a + 4 <= body.len() {
                            let alen = rd_u16(body, a) as usize;
                            let aty = rd_u16(body, a + 2) & 0x3fff;
                            if alen < 4 || a + alen > body.len() {
                                break;
                            }
                            if aty == IFLA_MTU && alen >= 8 {
                                mtu = rd_u32(body, a + 4);
                            }
                            if aty == IFLA_NUM_RX_QUEUES && alen >= 8 {
                                rx_queues = rd_u32(body, a + 4);
                            }
                            a += (alen + 3) & !3;
                        }
                        f(Event::Info(LinkInfo {
                            admin_up: flags & IFF_UP != 0,
                            carrier: flags & IFF_LOWER_UP != 0,
                            mtu,
                            rx_queues,
                        }));
                    }
                }
            }
            NLMSG_ERROR if body.len() >= 4 && mseq == seq => {
                let err = rd_u32(body, 0) as i32;
                if err != 0 {
                    f(Event::Error(-err));
                }
            }
            _ => {}
        }
        off += (len + 3) & !3;
    }
}

fn getlink_request(ifindex: u32, seq: u32) -> [u8; NLMSG_HDRLEN + IFINFOMSG_LEN] {
    let mut m = [0u8; NLMSG_HDRLEN + IFINFOMSG_LEN];
    m[0..4].copy_from_slice(&((NLMSG_HDRLEN + IFINFOMSG_LEN) as u32).to_ne_bytes());
    m[4..6].copy_from_slice(&RTM_GETLINK.to_ne_bytes());
    m[6..8].copy_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    m[8..12].copy_from_slice(&seq.to_ne_bytes());
    m[NLMSG_HDRLEN] = libc::AF_UNSPEC as u8;
    m[NLMSG_HDRLEN + 4..NLMSG_HDRLEN + 8].copy_from_slice(&ifindex.to_ne_bytes());
    m
}

/// Asks the kernel for interface `ifindex`'s state and waits up to one
/// second for the answer. `ENODEV` means the interface does not exist.
pub fn query_link(ifindex: u32) -> io::Result<LinkInfo> {
    let sock = sys::rtnl_link_socket()?;
    let seq = 1;
    sys::nl_send(sock.as_raw_fd(), &getlink_request(ifindex, seq))?;
    let deadline = Instant::now() + Duration::from_secs(1);
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(io::Error::from_raw_os_error(libc::ETIMEDOUT));
        }
        sys::poll_readable([sock.as_raw_fd()], left.as_millis().max(1) as i32)?;
        while let Some(n) = sys::recv_nonblock(sock.as_raw_fd(), &mut buf)? {
            let mut out = None;
            parse_messages(&buf[..n], ifindex, seq, |e| {
                out = Some(e);
            });
            match out {
                Some(Event::Info(i)) => return Ok(i),
                Some(Event::Removed | Event::Moved) => {
                    return Err(io::Error::from_raw_os_error(libc::ENODEV))
                }
                Some(Event::Error(e)) => return Err(io::Error::from_raw_os_error(e)),
                None => {}
            }
        }
    }
}

/// What the kernel-interface ports (AF_PACKET, AF_XDP, TAP) have and do
/// alike: the port's name, its interface's link watch, its receive queues
/// until the workers take them, and its transmit queues. Each of those
/// ports hands `Port::info`, `take_rx`, `tx` and `link_up` to it, and adds
/// its own counters to [`KernelQueues::counters`].
pub struct KernelQueues<R, T> {
    name: String,
    rx: Mutex<Vec<Option<R>>>,
    /// The transmit queues, by queue id.
    pub tx: Vec<T>,
    watch: LinkWatch,
}

impl<R: RxQueue + 'static, T: TxQueue> KernelQueues<R, T> {
    /// The port `name`'s queues (`rx[q]` and `tx[q]` are queue `q`'s) on
    /// the interface `watch` follows.
    pub fn new(name: &str, watch: LinkWatch, rx: Vec<R>, tx: Vec<T>) -> Self {
        Self {
            name: name.to_string(),
            rx: Mutex::new(rx.into_iter().map(Some).collect()),
            tx,
            watch,
        }
    }

    /// The port's description: `max_frame_b` is the most the backend's
    /// buffers take, capped by the interface's MTU plus an Ethernet header,
    /// a VLAN tag and the FCS (18 bytes).
    pub fn info(&self, kind: &'static str, max_frame_b: u32) -> PortInfo {
        let mtu_max = self.watch.state().mtu() + 18;
        PortInfo {
            name: self.name.clone(),
            kind,
            queues: self.tx.len() as u16,
            max_frame_b: mtu_max.min(max_frame_b),
        }
    }

    /// Receive queue `q`, once (a worker owns it from then on).
    pub fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let mut rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        rx.get_mut(q as usize)?
            .take()
            .map(|r| Box::new(r) as Box<dyn RxQueue>)
    }

    /// Transmit queue `q`.
    pub fn tx(&self, q: QueueId) -> &dyn TxQueue {
        &self.tx[q as usize]
    }

    /// Whether the interface is up.
    pub fn link_up(&self) -> bool {
        self.watch.state().up()
    }

    /// True once the interface was removed (or moved away): the port is
    /// dead.
    pub fn removed(&self) -> bool {
        self.watch.state().removed()
    }

    /// The link watch's counters, to which the port adds its own.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        self.watch.state().counters().to_vec()
    }
}

/// Follows one interface's state in a background thread; stopped on drop.
pub struct LinkWatch {
    state: Arc<LinkState>,
    stop: Arc<OwnedFd>,
    thread: Option<JoinHandle<()>>,
}

impl LinkWatch {
    /// Starts watching interface `ifindex` (reads its current state first).
    pub fn start(ifindex: u32) -> io::Result<Self> {
        Self::start_with(ifindex, false)
    }

    /// Like [`LinkWatch::start`], but a move of the interface to another
    /// network namespace leaves it up instead of removed: for a TAP port,
    /// whose queue descriptors keep reaching the device wherever it is (a
    /// pod's namespace: docs/kubernetes.md). Its state there is not seen.
    pub fn start_following_moves(ifindex: u32) -> io::Result<Self> {
        Self::start_with(ifindex, true)
    }

    fn start_with(ifindex: u32, follow_moves: bool) -> io::Result<Self> {
        let sock = sys::rtnl_link_socket()?;
        let state = Arc::new(LinkState::default());
        state.apply(&query_link(ifindex)?);
        let stop = Arc::new(sys::eventfd()?);
        let (st, sp) = (state.clone(), stop.clone());
        let thread = std::thread::Builder::new()
            .name(format!("linkwatch-{ifindex}"))
            .spawn(move || watch_loop(sock, ifindex, follow_moves, st, sp))?;
        Ok(Self {
            state,
            stop,
            thread: Some(thread),
        })
    }

    /// The shared state the watcher updates.
    pub fn state(&self) -> &Arc<LinkState> {
        &self.state
    }
}

impl Drop for LinkWatch {
    fn drop(&mut self) {
        sys::eventfd_signal(self.stop.as_raw_fd());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn watch_loop(
    sock: OwnedFd,
    ifindex: u32,
    follow_moves: bool,
    state: Arc<LinkState>,
    stop: Arc<OwnedFd>,
) {
    let mut buf = vec![0u8; 64 * 1024];
    let mut seq = 100u32;
    let mut last_query = Instant::now();
    loop {
        let ready = match sys::poll_readable([sock.as_raw_fd(), stop.as_raw_fd()], 1000) {
            Ok(r) => r,
            Err(_) => {
                std::thread::sleep(Duration::from_millis(100));
                [false, false]
            }
        };
        if ready[1] {
            return;
        }
        loop {
            match sys::recv_nonblock(sock.as_raw_fd(), &mut buf) {
                Ok(Some(n)) => parse_messages(&buf[..n], ifindex, seq, |e| match e {
                    Event::Info(i) => state.apply(&i),
                    Event::Removed => state.mark_removed(),
                    Event::Moved if follow_moves => state.mark_moved(),
                    Event::Moved => state.mark_removed(),
                    Event::Error(e) if e == libc::ENODEV => state.mark_removed(),
                    Event::Error(_) => {}
                }),
                Ok(None) => break,
                // ENOBUFS: events were lost; the resync below catches up.
                Err(_) => {
                    last_query = Instant::now() - Duration::from_secs(2);
                    break;
                }
            }
        }
        if state.removed() || state.moved() {
            // A removed interface never comes back under the same index; a
            // moved one is no longer visible from here.
            continue;
        }
        if last_query.elapsed() >= Duration::from_secs(1) {
            seq = seq.wrapping_add(1);
            let _ = sys::nl_send(sock.as_raw_fd(), &getlink_request(ifindex, seq));
            last_query = Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn newlink(ty: u16, index: u32, flags: u32, mtu: Option<u32>) -> Vec<u8> {
        let mut body = vec![0u8; IFINFOMSG_LEN];
        body[4..8].copy_from_slice(&index.to_ne_bytes());
        body[8..12].copy_from_slice(&flags.to_ne_bytes());
        // an unrelated attribute (IFLA_IFNAME "ab\0", padded) first
        body.extend_from_slice(&7u16.to_ne_bytes());
        body.extend_from_slice(&3u16.to_ne_bytes());
        body.extend_from_slice(b"ab\0\0");
        if let Some(m) = mtu {
            body.extend_from_slice(&8u16.to_ne_bytes());
            body.extend_from_slice(&IFLA_MTU.to_ne_bytes());
            body.extend_from_slice(&m.to_ne_bytes());
        }
        let mut m = Vec::new();
        m.extend_from_slice(&((NLMSG_HDRLEN + body.len()) as u32).to_ne_bytes());
        m.extend_from_slice(&ty.to_ne_bytes());
        m.extend_from_slice(&[0u8; 10]);
        m.extend_from_slice(&body);
        m
    }

    #[test]
    fn parses_newlink_for_our_index_only() {
        let mut buf = newlink(RTM_NEWLINK, 7, IFF_UP | IFF_LOWER_UP, Some(9000));
        buf.extend(newlink(RTM_NEWLINK, 8, IFF_UP, Some(1500)));
        let mut ev = Vec::new();
        parse_messages(&buf, 7, 0, |e| ev.push(e));
        assert_eq!(
            ev,
            vec![Event::Info(LinkInfo {
                admin_up: true,
                carrier: true,
                mtu: 9000,
                rx_queues: 0
            })]
        );
    }

    #[test]
    fn parses_dellink_and_down() {
        let mut buf = newlink(RTM_NEWLINK, 3, IFF_UP, Some(1500));
        buf.extend(newlink(RTM_DELLINK, 3, 0, None));
        let mut ev = Vec::new();
        parse_messages(&buf, 3, 0, |e| ev.push(e));
        assert_eq!(ev.len(), 2);
        assert_eq!(
            ev[0],
            Event::Info(LinkInfo {
                admin_up: true,
                carrier: false,
                mtu: 1500,
                rx_queues: 0
            })
        );
        assert_eq!(ev[1], Event::Removed);
    }

    #[test]
    fn a_dellink_naming_a_new_namespace_is_a_move() {
        // The 4-byte attribute after IFLA_IFNAME, retyped as IFLA_NEW_NETNSID.
        let mut buf = newlink(RTM_DELLINK, 3, 0, Some(7));
        let at = NLMSG_HDRLEN + IFINFOMSG_LEN + 8 + 2;
        buf[at..at + 2].copy_from_slice(&IFLA_NEW_NETNSID.to_ne_bytes());
        let mut ev = Vec::new();
        parse_messages(&buf, 3, 0, |e| ev.push(e));
        assert_eq!(ev, vec![Event::Moved]);
    }

    #[test]
    fn a_moved_link_stays_up_and_ignores_later_news() {
        let st = LinkState::default();
        st.mark_moved();
        assert!(st.up() && st.moved() && !st.removed());
        st.mark_removed();
        st.apply(&LinkInfo {
            admin_up: false,
            carrier: false,
            mtu: 1500,
            rx_queues: 1,
        });
        assert!(st.up() && !st.removed());
        let gone = LinkState::default();
        gone.mark_removed();
        gone.mark_moved();
        assert!(!gone.up() && gone.removed() && !gone.moved());
    }

    #[test]
    fn truncated_messages_are_ignored() {
        let buf = newlink(RTM_NEWLINK, 3, IFF_UP, Some(1500));
        for cut in 0..buf.len() {
            let mut n = 0;
            parse_messages(&buf[..cut], 3, 0, |_| n += 1);
            assert_eq!(n, 0, "cut at {cut}");
        }
    }

    #[test]
    fn state_counts_transitions_and_removal() {
        let s = LinkState::default();
        s.apply(&LinkInfo {
            admin_up: true,
            carrier: true,
            mtu: 1500,
            rx_queues: 0,
        });
        s.apply(&LinkInfo {
            admin_up: false,
            carrier: true,
            mtu: 1500,
            rx_queues: 0,
        });
        s.apply(&LinkInfo {
            admin_up: true,
            carrier: true,
            mtu: 9000,
            rx_queues: 0,
        });
        assert!(s.up());
        assert_eq!(s.changes.load(Ordering::Relaxed), 3);
        assert_eq!(s.mtu_changes.load(Ordering::Relaxed), 1);
        s.mark_removed();
        assert!(!s.up() && s.removed());
        s.apply(&LinkInfo {
            admin_up: true,
            carrier: true,
            mtu: 9000,
            rx_queues: 0,
        });
        assert!(!s.up(), "a removed link stays down");
    }

    #[test]
    fn errno_text_is_lower_case_without_suffix() {
        let e = io::Error::from_raw_os_error(libc::EPERM);
        assert_eq!(errno_text(&e), "operation not permitted");
    }

    #[test]
    fn a_missing_interface_is_named_in_the_error() {
        let e = crate::af_packet::AfPacketPort::open(
            "p",
            crate::af_packet::AfPacketConfig::new("nosuch0"),
        )
        .err()
        .unwrap();
        assert_eq!(
            e.to_string(),
            "af_packet on nosuch0: interface not found: no such device"
        );
    }

    #[test]
    fn loopback_is_found_and_up() {
        let idx = ifindex("lo").unwrap();
        let info = query_link(idx).unwrap();
        assert!(info.admin_up);
        assert!(info.mtu >= 1500);
        assert!(info.rx_queues >= 1);
        let e = query_link(999_999).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENODEV));
    }
}
