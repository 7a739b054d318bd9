//! Helpers of the kernel port tests: network namespaces and veth pairs with
//! unique names (PID + counter) removed by RAII guards also when a test
//! fails, raw AF_PACKET sockets inside a namespace, test frames, and a small
//! forwarding harness (port A rx → port B tx through the `fabric::Port`
//! trait).
//!
//! The tests need root. Topology of one "wire": the switch side of a veth
//! lives in the test's switch namespace (ports are opened there), the other
//! side in an endpoint namespace with the kernel stack on it.
#![allow(dead_code)]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch};

static SEQ: AtomicU32 = AtomicU32::new(0);

/// A name unique to this process and call: `{prefix}{pid}x{n}` (≤ 15 chars
/// for a short prefix).
pub fn unique(prefix: &str) -> String {
    let n = SEQ.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}{}x{n}", std::process::id())
}

/// Whether we are root; if not, the test skips (returns) with a message,
/// or fails under `TURNOUT_REQUIRE_PEERS=1` (crates/testpeers).
pub fn require_root() -> bool {
    testpeers::need(
        testpeers::is_root(),
        "kernel port tests need root (namespaces, veth, raw sockets)",
    )
}

/// Runs a command, panicking with its output when it fails.
pub fn run(args: &[&str]) {
    let out = Command::new(args[0])
        .args(&args[1..])
        .output()
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command and returns whether it succeeded (cleanup paths).
pub fn run_quiet(args: &[&str]) -> bool {
    Command::new(args[0])
        .args(&args[1..])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

/// A network namespace, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new() -> Self {
        let name = unique("tkp");
        run(&["ip", "netns", "add", &name]);
        let ns = Self { name };
        ns.exec(&["ip", "link", "set", "lo", "up"]);
        ns
    }

    /// Runs a command inside the namespace (panics on failure).
    pub fn exec(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", &self.name];
        v.extend_from_slice(args);
        run(&v);
    }

    /// Runs a command inside the namespace and returns its output.
    pub fn output(&self, args: &[&str]) -> std::process::Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(args)
            .output()
            .expect("ip netns exec")
    }

    /// Runs `f` on a thread that joined this namespace (sockets, ports and
    /// watcher threads it creates belong to the namespace).
    pub fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let path = format!("/run/netns/{}", self.name);
        std::thread::spawn(move || {
            let f_ns = std::fs::File::open(&path).expect("open netns");
            // SAFETY: setns on this thread only, with a namespace fd we hold.
            let r = unsafe { libc::setns(f_ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(r, 0, "setns: {}", io::Error::last_os_error());
            f()
        })
        .join()
        .expect("thread in netns panicked")
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        run_quiet(&["ip", "netns", "del", &self.name]);
    }
}

/// A veth pair: `sw` end in the switch namespace, `host` end in an endpoint
/// namespace. Deleted on drop (removing one end removes both).
pub struct Veth {
    pub sw: String,
    pub host: String,
    sw_ns: String,
}

impl Veth {
    /// Creates the pair with `queues` queues each and brings both ends up.
    pub fn new(sw_ns: &Netns, host_ns: &Netns, queues: u32) -> Self {
        let sw = unique("ts");
        let host = unique("th");
        let q = queues.to_string();
        sw_ns.exec(&[
            "ip",
            "link",
            "add",
            &sw,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &host,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "netns",
            &host_ns.name,
        ]);
        let v = Self {
            sw: sw.clone(),
            host: host.clone(),
            sw_ns: sw_ns.name.clone(),
        };
        sw_ns.exec(&[
            "sysctl",
            "-qw",
            &format!("net.ipv6.conf.{sw}.disable_ipv6=1"),
        ]);
        sw_ns.exec(&["ip", "link", "set", &sw, "up"]);
        // The kernel's offloads would hand the port 64 KiB super-frames and
        // unfinished checksums; a wire carries neither.
        host_ns.exec(&[
            "ethtool", "-K", &host, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ]);
        sw_ns.exec(&[
            "ethtool", "-K", &sw, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
        ]);
        host_ns.exec(&["ip", "link", "set", &host, "up"]);
        v
    }

    pub fn set_mtu(&self, sw_ns: &Netns, host_ns: &Netns, mtu: u32) {
        let m = mtu.to_string();
        sw_ns.exec(&["ip", "link", "set", &self.sw, "mtu", &m]);
        host_ns.exec(&["ip", "link", "set", &self.host, "mtu", &m]);
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        run_quiet(&[
            "ip",
            "netns",
            "exec",
            &self.sw_ns,
            "ip",
            "link",
            "del",
            &self.sw,
        ]);
    }
}

/// A switch namespace with IPv6 off (its stack stays silent on the wires).
pub fn switch_ns() -> Netns {
    let ns = Netns::new();
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
    ns.exec(&["sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
    ns
}

/// A raw AF_PACKET socket bound to one interface of a namespace.
pub struct RawSock {
    fd: OwnedFd,
}

impl RawSock {
    /// Opens it inside `ns` on `ifname`, receiving every protocol.
    pub fn open(ns: &Netns, ifname: &str) -> Self {
        let ifname = ifname.to_string();
        ns.enter(move || {
            // SAFETY: plain socket(2) call; checked below.
            let fd = unsafe {
                libc::socket(
                    libc::AF_PACKET,
                    libc::SOCK_RAW | libc::SOCK_CLOEXEC,
                    (0x0003u16).to_be() as i32,
                )
            };
            assert!(fd >= 0, "socket: {}", io::Error::last_os_error());
            // SAFETY: fresh fd we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let c = std::ffi::CString::new(ifname.clone()).unwrap();
            // SAFETY: valid C string.
            let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
            assert!(idx > 0, "no interface {ifname}");
            // SAFETY: zeroed sockaddr_ll is valid.
            let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
            sa.sll_family = libc::AF_PACKET as u16;
            sa.sll_protocol = 0x0003u16.to_be();
            sa.sll_ifindex = idx as i32;
            // SAFETY: valid sockaddr_ll and length.
            let r = unsafe {
                libc::bind(
                    fd.as_raw_fd(),
                    &sa as *const _ as *const libc::sockaddr,
                    std::mem::size_of_val(&sa) as u32,
                )
            };
            assert_eq!(r, 0, "bind: {}", io::Error::last_os_error());
            let bufsz: libc::c_int = 8 << 20;
            // SAFETY: valid int option.
            unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_RCVBUFFORCE,
                    &bufsz as *const _ as *const _,
                    4,
                );
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_SNDBUFFORCE,
                    &bufsz as *const _ as *const _,
                    4,
                );
            }
            Self { fd }
        })
    }

    pub fn send(&self, frame: &[u8]) {
        // SAFETY: frame is valid for reads of its length.
        let n = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(
            n,
            frame.len() as isize,
            "send: {}",
            io::Error::last_os_error()
        );
    }

    /// Receives frames until `deadline`, keeping those `keep` accepts,
    /// until `want` were kept.
    pub fn recv_matching(
        &self,
        want: usize,
        timeout: Duration,
        keep: impl Fn(&[u8]) -> bool,
    ) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + timeout;
        let mut out = Vec::new();
        let mut buf = vec![0u8; 65536];
        while out.len() < want {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let mut p = libc::pollfd {
                fd: self.fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut p, 1, left.as_millis().max(1) as i32) };
            // SAFETY: buf is valid for writes of its length.
            let n = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf.as_mut_ptr().cast(),
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if n > 0 && keep(&buf[..n as usize]) {
                out.push(buf[..n as usize].to_vec());
            }
        }
        out
    }
}

/// Ethertype of test frames (IEEE local experimental).
pub const TEST_ETHERTYPE: u16 = 0x88b5;
pub const MAGIC: &[u8; 4] = b"TKPT";

/// A test frame of `len` bytes: broadcast-free unicast MACs, the test
/// ethertype, magic, a sequence number and a position-dependent pattern.
pub fn test_frame(len: usize, seq: u32) -> Vec<u8> {
    assert!(len >= 22);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&TEST_ETHERTYPE.to_be_bytes());
    f[14..18].copy_from_slice(MAGIC);
    f[18..22].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in f[22..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(31).wrapping_add(seq) as u8;
    }
    f
}

pub fn is_test_frame(f: &[u8]) -> bool {
    f.len() >= 22 && f[12..14] == TEST_ETHERTYPE.to_be_bytes() && &f[14..18] == MAGIC
}

/// A test frame carrying an 802.1Q tag (VLAN `vid`) before the ethertype.
pub fn tagged_frame(len: usize, seq: u32, vid: u16) -> Vec<u8> {
    let mut f = test_frame(len - 4, seq);
    let tag = [0x81, 0x00, (vid >> 8) as u8 & 0x0f, vid as u8];
    f.splice(12..12, tag);
    f
}

/// A test frame, tagged or not.
pub fn is_any_test_frame(f: &[u8]) -> bool {
    is_test_frame(f)
        || (f.len() >= 26
            && f[12..14] == [0x81, 0x00]
            && is_test_frame(&[&f[..12], &f[16..]].concat()))
}

/// An IPv4/UDP frame of `len` bytes whose source port varies with `flow`
/// (so flow hashing spreads them), carrying the test magic in its payload.
pub fn udp_frame(len: usize, flow: u16, seq: u32) -> Vec<u8> {
    assert!(len >= 14 + 20 + 8 + 8);
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    let ip = &mut f[14..34];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    ip[8] = 64;
    ip[9] = 17;
    ip[12..16].copy_from_slice(&[10, 99, 0, 1]);
    ip[16..20].copy_from_slice(&[10, 99, 0, 2]);
    let mut sum = 0u32;
    for c in ip.chunks(2) {
        sum += u16::from_be_bytes([c[0], c[1]]) as u32;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    ip[10..12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&(10000 + flow).to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&((len - 34) as u16).to_be_bytes());
    f[42..46].copy_from_slice(MAGIC);
    f[46..50].copy_from_slice(&seq.to_be_bytes());
    f
}

pub fn is_udp_test_frame(f: &[u8]) -> bool {
    f.len() >= 50 && f[12..14] == [0x08, 0x00] && &f[42..46] == MAGIC
}

/// Polls `q` until `want` frames accepted by `keep` arrived or `timeout`
/// passes; returns copies of them.
pub fn rx_collect(
    q: &mut dyn fabric::RxQueue,
    want: usize,
    timeout: Duration,
    keep: impl Fn(&[u8]) -> bool,
) -> Vec<Vec<u8>> {
    let mut batch = RxBatch::with_capacity(256);
    let mut out = Vec::new();
    let deadline = Instant::now() + timeout;
    while out.len() < want && Instant::now() < deadline {
        let rx = batch.receive(&mut *q, 0, 0);
        let n = rx.len();
        for p in rx.pkts().iter() {
            if keep(p.data()) {
                out.push(p.data().to_vec());
            }
        }
        drop(rx);
        if n == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }
    out
}

/// Sends `frames` through transmit queue `q` of `port` in one batch.
/// Returns how many were accepted.
pub fn tx_send(port: &dyn Port, q: u16, frames: &[Vec<u8>]) -> usize {
    // SAFETY: one thread uses this queue in the test; no switch sends to it.
    let mut tx = unsafe { fabric::OwnedTx::new(port.tx(q)) };
    let mut sent = 0;
    let free = tx.free_slots() as usize;
    let mut tail = 0;
    for f in frames.iter().take(free) {
        let n = tx.slots_for(f.len());
        if n == 0 {
            continue;
        }
        let s = tx.reserve(n);
        tx.write(s, n, f);
        tail = s + n as u64;
        sent += 1;
    }
    if sent > 0 {
        tx.publish(tail);
    }
    sent
}

/// Counters of the forwarding harness.
#[derive(Default)]
pub struct FwdStats {
    pub forwarded: AtomicU64,
    pub dropped_full: AtomicU64,
    pub dropped_size: AtomicU64,
    pub dropped_link: AtomicU64,
}

/// Forwards between two ports (queue 0 ↔ queue 0... every queue pair) on
/// one thread until stopped: rx of A → tx of B and back, through the trait,
/// as the fabric would (reserve under "the lock", write, publish once).
pub struct Forwarder {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    pub stats: Arc<FwdStats>,
}

impl Forwarder {
    pub fn start(a: Arc<dyn Port>, b: Arc<dyn Port>) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(FwdStats::default());
        let (st, sp) = (stats.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            let mut qs = Vec::new();
            for (src, dst) in [(a.clone(), b.clone()), (b.clone(), a.clone())] {
                for q in 0..src.info().queues {
                    let rx = src.take_rx(q).expect("rx queue");
                    qs.push((rx, dst.clone(), q % dst.info().queues));
                }
            }
            let mut batch = RxBatch::with_capacity(256);
            while !sp.load(Ordering::Relaxed) {
                let mut any = 0;
                for (rx, dst, dq) in qs.iter_mut() {
                    let b = batch.receive(&mut **rx, 0, 0);
                    let n = b.len();
                    any += n;
                    if n > 0 {
                        forward_batch(b.pkts(), &**dst, *dq, &st);
                    }
                }
                if any == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
        });
        Self {
            stop,
            thread: Some(thread),
            stats,
        }
    }
}

/// Forwards one batch to `dst` queue `dq`, counting drops.
pub fn forward_batch(pkts: &fabric::Pkts, dst: &dyn Port, dq: u16, st: &FwdStats) {
    if !dst.link_up() {
        st.dropped_link
            .fetch_add(pkts.len() as u64, Ordering::Relaxed);
        return;
    }
    // SAFETY: this thread is the only user of `tx` (lock protocol trivially
    // held); each reserved range is written once before publish.
    let mut tx = unsafe { fabric::OwnedTx::new(dst.tx(dq)) };
    let mut free = tx.free_slots();
    let mut tail = None;
    for p in pkts.iter() {
        let n = tx.slots_for(p.len());
        if n == 0 {
            st.dropped_size.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        if n > free {
            st.dropped_full.fetch_add(1, Ordering::Relaxed);
            continue;
        }
        free -= n;
        let s = tx.reserve(n);
        tx.write(s, n, p.data());
        tail = Some(s + n as u64);
        st.forwarded.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(t) = tail {
        tx.publish(t);
    }
}

impl Drop for Forwarder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A child process killed (by its PID) and reaped on drop.
pub struct ChildGuard(pub Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Two endpoint namespaces with addresses 10.77.0.1/2 and fd77::1/2 on
/// their veths, whose switch ends are in `sw`.
pub struct TwoHosts {
    pub a: Netns,
    pub b: Netns,
    pub va: Veth,
    pub vb: Veth,
}

impl TwoHosts {
    pub fn new(sw: &Netns, mtu: Option<u32>) -> Self {
        let a = Netns::new();
        let b = Netns::new();
        let va = Veth::new(sw, &a, 1);
        let vb = Veth::new(sw, &b, 1);
        if let Some(m) = mtu {
            va.set_mtu(sw, &a, m);
            vb.set_mtu(sw, &b, m);
        }
        a.exec(&["ip", "addr", "add", "10.77.0.1/24", "dev", &va.host]);
        b.exec(&["ip", "addr", "add", "10.77.0.2/24", "dev", &vb.host]);
        a.exec(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd77::1/64",
            "dev",
            &va.host,
            "nodad",
        ]);
        b.exec(&[
            "ip",
            "-6",
            "addr",
            "add",
            "fd77::2/64",
            "dev",
            &vb.host,
            "nodad",
        ]);
        Self { a, b, va, vb }
    }

    /// ping from a to b: IPv4 and IPv6 (neighbour discovery included).
    pub fn ping_both(&self, size: Option<u32>) {
        let sz = size.map(|s| s.to_string());
        for dst in ["10.77.0.2", "fd77::2"] {
            let mut args = vec!["ping", "-c", "3", "-i", "0.2", "-w", "10"];
            if let Some(s) = &sz {
                args.extend_from_slice(&["-s", s, "-M", "do"]);
            }
            args.push(dst);
            let out = self.a.output(&args);
            assert!(
                out.status.success(),
                "ping {dst} failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }

    /// A 3 s iperf3 TCP run from a to b; returns bits per second received.
    pub fn iperf3(&self, secs: u32) -> f64 {
        let server = Command::new("ip")
            .args([
                "netns",
                "exec",
                &self.b.name,
                "iperf3",
                "-s",
                "-1",
                "-B",
                "10.77.0.2",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 server");
        let _guard = ChildGuard(server);
        std::thread::sleep(Duration::from_millis(300));
        let t = secs.to_string();
        let out = self
            .a
            .output(&["timeout", "20", "iperf3", "-c", "10.77.0.2", "-t", &t, "-J"]);
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            out.status.success(),
            "iperf3 client failed: {text}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        // "sum_received": {... "bits_per_second": X ...}
        let i = text
            .find("\"sum_received\"")
            .expect("iperf3 JSON has sum_received");
        let rest = &text[i..];
        let j = rest.find("\"bits_per_second\":").expect("bits_per_second")
            + "\"bits_per_second\":".len();
        let num: String = rest[j..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == 'e' || *c == '+')
            .collect();
        num.parse().expect("iperf3 rate")
    }
}

/// Waits until `cond` holds or `timeout` passes.
pub fn wait_for(timeout: Duration, cond: impl Fn() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if cond() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    cond()
}

/// The value of backend counter `name`.
pub fn counter(port: &dyn Port, name: &str) -> u64 {
    port.backend_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

// ---- test bodies shared by the backends ----------------------------------

/// Opens a port of the backend under test inside the switch namespace:
/// `(switch ns, interface, queues)`.
pub type Opener = dyn Fn(&Netns, &str, u16) -> Arc<dyn Port>;

pub const SIZES: [usize; 8] = [60, 61, 64, 128, 511, 1000, 1500, 1514];

/// The shared test bodies as `#[test]`s of the calling file, each opening
/// its ports with `$open` (an [`Opener`]).
#[macro_export]
macro_rules! kernel_port_tests {
    ($open:path) => {
        #[test]
        fn rx_delivers_frames_intact() {
            check_rx_intact(&$open);
        }

        #[test]
        fn tx_frames_arrive_in_namespace() {
            check_tx_arrives(&$open);
        }

        #[test]
        fn several_queues_share_the_traffic() {
            check_two_queues(&$open);
        }

        #[test]
        fn link_down_up_and_removal_are_noticed() {
            check_link_events(&$open);
        }

        #[test]
        fn forwards_ping_and_tcp_between_namespaces() {
            check_forwarding(&$open);
        }
    };
}

/// Frames sent by a raw socket in the namespace arrive intact through rx.
pub fn check_rx_intact(open: &Opener) {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    assert!(port.take_rx(0).is_none(), "a queue is handed out once");
    let sock = RawSock::open(&h, &v.host);
    let mut frames: Vec<Vec<u8>> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &s)| test_frame(s, i as u32))
        .collect();
    // A VLAN-tagged frame arrives with its tag (AF_PACKET has the kernel's
    // stripped tag put back), and a runt as it is (the fabric drops it).
    frames.push(tagged_frame(100, 77, 42));
    frames.push(test_frame(22, 78));
    for f in &frames {
        sock.send(f);
    }
    let got = rx_collect(
        &mut *rx,
        frames.len(),
        Duration::from_secs(3),
        is_any_test_frame,
    );
    assert_eq!(got, frames, "frames arrive intact and in order");
    assert!(counter(&*port, "rx_frames") >= frames.len() as u64);
}

/// Frames written through tx arrive in the namespace; the port does not
/// receive its own transmits; frames over the MTU take no slot.
pub fn check_tx_arrives(open: &Opener) {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames: Vec<Vec<u8>> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &s)| test_frame(s, 100 + i as u32))
        .collect();
    assert_eq!(tx_send(&*port, 0, &frames), frames.len());
    let got = sock.recv_matching(frames.len(), Duration::from_secs(3), is_test_frame);
    assert_eq!(got, frames);
    let echo = rx_collect(&mut *rx, 1, Duration::from_millis(200), is_test_frame);
    assert!(echo.is_empty(), "own transmits must not be received");
    assert_eq!(port.tx(0).slots_for(1519), 0);
    assert_eq!(port.tx(0).slots_for(1514), 1);
    // A full burst (more than one kick's worth) goes out completely.
    let many: Vec<Vec<u8>> = (0..200).map(|i| test_frame(64, 1000 + i)).collect();
    assert_eq!(tx_send(&*port, 0, &many), 200);
    assert_eq!(
        sock.recv_matching(200, Duration::from_secs(3), is_test_frame)
            .len(),
        200
    );
}

/// Two queues: flows spread over both receive queues; both transmit.
pub fn check_two_queues(open: &Opener) {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 2);
    let port = open(&sw, &v.sw, 2);
    let mut q0 = port.take_rx(0).unwrap();
    let mut q1 = port.take_rx(1).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames: Vec<Vec<u8>> = (0..64u16).map(|i| udp_frame(100, i, i as u32)).collect();
    for f in &frames {
        sock.send(f);
    }
    std::thread::sleep(Duration::from_millis(50));
    let a = rx_collect(&mut *q0, 64, Duration::from_millis(500), is_udp_test_frame);
    let b = rx_collect(
        &mut *q1,
        64 - a.len(),
        Duration::from_secs(2),
        is_udp_test_frame,
    );
    assert_eq!(
        a.len() + b.len(),
        64,
        "every frame arrives on one queue ({} / {})",
        a.len(),
        b.len()
    );
    assert!(
        !a.is_empty() && !b.is_empty(),
        "64 flows spread onto both queues ({} / {})",
        a.len(),
        b.len()
    );
    assert_eq!(tx_send(&*port, 1, &frames[..8]), 8);
    assert_eq!(tx_send(&*port, 0, &frames[8..16]), 8);
    assert_eq!(
        sock.recv_matching(16, Duration::from_secs(3), is_udp_test_frame)
            .len(),
        16
    );
}

/// Peer down/up, MTU change and removal are noticed; traffic recovers.
pub fn check_link_events(open: &Opener) {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    // The host side's IPv6 (router solicitations, MLD reports after each
    // "up") would put frames in the port's ring at any time: the check
    // after the removal wants none.
    h.exec(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{}.disable_ipv6=1", v.host),
    ]);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    assert!(port.link_up());
    h.exec(&["ip", "link", "set", &v.host, "down"]);
    assert!(
        wait_for(Duration::from_secs(3), || !port.link_up()),
        "peer down → link down"
    );
    h.exec(&["ip", "link", "set", &v.host, "up"]);
    assert!(
        wait_for(Duration::from_secs(3), || port.link_up()),
        "peer up → link up"
    );
    assert!(counter(&*port, "link_changes") >= 2);
    let sock = RawSock::open(&h, &v.host);
    let f = test_frame(200, 7);
    sock.send(&f);
    assert_eq!(
        rx_collect(&mut *rx, 1, Duration::from_secs(3), is_test_frame),
        vec![f.clone()],
        "rx after up"
    );
    assert_eq!(tx_send(&*port, 0, std::slice::from_ref(&f)), 1);
    assert_eq!(
        sock.recv_matching(1, Duration::from_secs(3), is_test_frame),
        vec![f.clone()],
        "tx after up"
    );
    sw.exec(&["ip", "link", "set", &v.sw, "mtu", "1400"]);
    assert!(wait_for(Duration::from_secs(3), || counter(&*port, "mtu") == 1400));
    assert_eq!(port.tx(0).slots_for(1500), 0);
    // What came before the removal (the host's frames from before its IPv6
    // was off) is not what the check after it is about.
    let _ = rx_collect(&mut *rx, 256, Duration::from_millis(100), |_| true);
    sw.exec(&["ip", "link", "del", &v.sw]);
    assert!(
        wait_for(Duration::from_secs(3), || counter(&*port, "link_removed")
            == 1),
        "removal noticed"
    );
    assert!(!port.link_up());
    assert!(rx_collect(&mut *rx, 1, Duration::from_millis(100), |_| true).is_empty());
    // Sending into a removed interface must not panic or hang.
    tx_send(&*port, 0, std::slice::from_ref(&f));
    let _ = port.backend_counters();
}

/// ping v4/v6 and a 3 s iperf3 TCP run through a forwarding harness
/// between two namespaces.
pub fn check_forwarding(open: &Opener) {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let t = TwoHosts::new(&sw, None);
    let a = open(&sw, &t.va.sw, 1);
    let b = open(&sw, &t.vb.sw, 1);
    let fwd = Forwarder::start(a.clone(), b.clone());
    t.ping_both(None);
    let bps = t.iperf3(3);
    assert!(bps > 1e6, "iperf3 moved {bps} bit/s");
    eprintln!("iperf3 through the harness: {:.0} Mbit/s", bps / 1e6);
    assert_eq!(fwd.stats.dropped_size.load(Ordering::Relaxed), 0);
}
