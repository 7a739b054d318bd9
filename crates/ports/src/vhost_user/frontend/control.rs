//! The frontend's control thread: connects to the backend (or accepts it,
//! `server`), sets the device up (features; one memfd holding every ring
//! and buffer, laid out here, as the memory table; each virtqueue's size,
//! addresses and eventfds), installs the sessions the queues follow, then
//! watches the socket. When the backend hangs up, lies (a queue set
//! [`FrontendFault::pending`](super::FrontendFault::pending)), sends a
//! message of its own or does not finish the set-up within
//! [`SETUP_TIMEOUT`], the sessions are removed (link down) and it connects
//! again with a fresh memory table.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{
    Frontend, VhostUserFrontend, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::rx::RxSession;
use super::tx::TxSession;
use super::{FrontendConfig, Shared, GPA_BASE, UVA_BASE};
use crate::vhost_user::sys::{self, GuestMemory, RegionSpec, Ring};
use crate::vhost_user::vring::AVAIL_F_NO_INTERRUPT;

const F_MRG_RXBUF: u64 = 1 << 15;
const F_MQ: u64 = 1 << 22;
const F_EVENT_IDX: u64 = 1 << 29;
const F_VERSION_1: u64 = 1 << 32;

/// Where one virtqueue's ring and buffers live in the memfd.
#[derive(Clone, Copy, Debug)]
struct VqLayout {
    desc: u64,
    avail: u64,
    used: u64,
    bufs: u64,
}

/// Offsets of every virtqueue and the total size; receive virtqueues
/// (even) have `rx_buf_b`-byte buffers, transmit ones `cfg.tx_buf_b()`.
fn layout(cfg: &FrontendConfig, rx_buf_b: u64) -> (Vec<VqLayout>, u64) {
    let n = cfg.queue_size as u64;
    let page = 4096u64;
    let mut off = 0u64;
    let mut v = Vec::new();
    for i in 0..2 * cfg.queues {
        let desc = off;
        let avail = desc + 16 * n;
        let used = (avail + 6 + 2 * n).div_ceil(page) * page;
        let bufs = (used + 6 + 8 * n).div_ceil(page) * page;
        let buf_b = if i % 2 == 0 { rx_buf_b } else { cfg.tx_buf_b() };
        off = (bufs + n * buf_b).div_ceil(page) * page;
        v.push(VqLayout {
            desc,
            avail,
            used,
            bufs,
        });
    }
    (v, off)
}

/// One set-up connection: what must live as long as it runs.
struct Conn {
    _fe: Frontend,
    watch: UnixStream,
    /// Which connection this is (1: the first).
    n: u64,
}

fn stopped(s: &Shared) -> bool {
    s.stop.load(Acquire)
}

/// The control thread: connect (or accept), set up, watch, tear down,
/// again, until the port is dropped.
pub(super) fn run(shared: Arc<Shared>, listener: Option<UnixListener>) {
    let mut backoff = Duration::from_millis(20);
    if let Some(l) = &listener {
        let _ = l.set_nonblocking(true);
    }
    while !stopped(&shared) {
        shared.retired.sweep();
        let stream = match &listener {
            Some(l) => match l.accept() {
                Ok((s, _)) => s,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
            None => match UnixStream::connect(&shared.cfg.socket) {
                Ok(s) => s,
                Err(e) => {
                    if let Ok(mut le) = shared.last_error.lock() {
                        *le = format!("connect {}: {e}", shared.cfg.socket.display());
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    continue;
                }
            },
        };
        let _ = stream.set_nonblocking(false);
        let watchdog = SetupWatchdog::start(&stream);
        let done = setup(&shared, stream);
        let timed_out = watchdog.finish();
        let conn = match done {
            Ok(c) => c,
            Err(e) => {
                let e = if timed_out {
                    format!(
                        "{e} (the backend did not finish the set-up within {} s: \
                         connection closed)",
                        SETUP_TIMEOUT.as_secs()
                    )
                } else {
                    e
                };
                eprintln!(
                    "vhost-user {}: set-up with the backend failed: {e}",
                    shared.name
                );
                // The reason first: whoever sees the failure counted reads
                // its reason (it was written after, and read as "").
                if let Ok(mut le) = shared.last_error.lock() {
                    *le = e;
                }
                shared.setup_failures.fetch_add(1, Release);
                teardown(&shared);
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        backoff = Duration::from_millis(20);
        let n = conn.n;
        if n > 1 {
            eprintln!(
                "vhost-user {}: reconnected to the backend (connection {n})",
                shared.name
            );
        }
        // Watch: the backend sends nothing on its own, so readable means
        // it hung up (or broke the protocol).
        loop {
            if stopped(&shared) {
                break;
            }
            shared.retired.sweep();
            if shared.fault.pending.load(Acquire) {
                shared.disconnects_lie.fetch_add(1, Relaxed);
                eprintln!(
                    "vhost-user {}: the backend broke the used ring ({} lies); disconnecting",
                    shared.name,
                    shared.fault.total_lies()
                );
                break;
            }
            if sys::poll_hangup(conn.watch.as_raw_fd(), 50) {
                // Bytes waiting: a message of the backend's own (backends
                // answer requests and send nothing else on this socket).
                // None: it hung up.
                let mut b = [0u8; 1];
                if matches!(sys::peek(conn.watch.as_raw_fd(), &mut b), Ok(n) if n > 0) {
                    shared.disconnects_protocol.fetch_add(1, Relaxed);
                    let e = "the backend sent a message nobody asked for".to_string();
                    eprintln!("vhost-user {}: {e}; disconnecting", shared.name);
                    if let Ok(mut le) = shared.last_error.lock() {
                        *le = e;
                    }
                } else {
                    shared.disconnects_hangup.fetch_add(1, Relaxed);
                    eprintln!(
                        "vhost-user {}: the backend went away; reconnecting",
                        shared.name
                    );
                }
                break;
            }
        }
        teardown(&shared);
        let _ = conn.watch.shutdown(std::net::Shutdown::Both);
        drop(conn);
        shared.fault.pending.store(false, Release);
    }
    teardown(&shared);
}

/// How long a backend may take to answer the whole set-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Closes a connection whose set-up takes longer than [`SETUP_TIMEOUT`]: a
/// backend that accepts and never answers (or never acknowledges a
/// `REPLY_ACK` it negotiated) would otherwise hold the control thread, and
/// the port's drop, forever. A socket read timeout does not do it: the
/// `vhost` crate retries a read that timed out (`SocketRetry`). The
/// shutdown makes the blocked read return end-of-file.
struct SetupWatchdog {
    state: Arc<(Mutex<bool>, std::sync::Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SetupWatchdog {
    fn start(stream: &UnixStream) -> SetupWatchdog {
        let state = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let thread = stream.try_clone().ok().and_then(|s| {
            let (st, f) = (state.clone(), fired.clone());
            std::thread::Builder::new()
                .name("vfront-setup".into())
                .spawn(move || {
                    let deadline = std::time::Instant::now() + SETUP_TIMEOUT;
                    let (m, cv) = &*st;
                    let Ok(mut finished) = m.lock() else {
                        return;
                    };
                    while !*finished {
                        let now = std::time::Instant::now();
                        if now >= deadline {
                            f.store(true, Relaxed);
                            let _ = s.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                        finished = match cv.wait_timeout(finished, deadline - now) {
                            Ok((g, _)) => g,
                            Err(_) => return,
                        };
                    }
                })
                .ok()
        });
        SetupWatchdog {
            state,
            fired,
            thread,
        }
    }

    /// Stops the watchdog; whether it closed the connection.
    fn finish(mut self) -> bool {
        if let Ok(mut g) = self.state.0.lock() {
            *g = true;
        }
        self.state.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.fired.load(Relaxed)
    }
}

/// Removes every session (workers drop theirs at the next call; the memory
/// is unmapped when the last holder lets go).
fn teardown(s: &Shared) {
    for t in s.tx.iter() {
        if let Some(old) = t.session.take() {
            s.retired.retire(old);
        }
    }
    for r in &s.rx {
        r.store(None);
    }
}

fn setup(shared: &Shared, stream: UnixStream) -> Result<Conn, String> {
    let cfg = &shared.cfg;
    let e = |what: &str| {
        let what = what.to_string();
        move |err: vhost::Error| format!("{what}: {err}")
    };
    // The backend shares our eventfds and can make them blocking again:
    // kicks go through `guard::notify`, whose watchdog frees a thread
    // stuck writing one (started here, on the control thread).
    crate::guard::start_watchdog();
    // A backend that stops answering must not hold the thread forever
    // (the read timeout alone does not: see `SetupWatchdog`).
    let _ = stream.set_read_timeout(Some(SETUP_TIMEOUT));
    let watch = stream.try_clone().map_err(|x| format!("socket: {x}"))?;
    let nvq = 2 * cfg.queues as usize;
    let mut fe = Frontend::from_stream(stream, nvq as u64);
    fe.set_owner().map_err(e("SET_OWNER"))?;
    let offered = fe.get_features().map_err(e("GET_FEATURES"))?;
    if offered & F_VERSION_1 == 0 {
        return Err("the backend does not offer VIRTIO_F_VERSION_1".into());
    }
    let pf_bit = VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
    // EVENT_IDX when offered: kicks by the backend's avail_event. We poll
    // and leave used_event at 0, so a backend interrupts us at most once
    // per 65536 used entries.
    let event_idx = offered & F_EVENT_IDX != 0;
    let mut want = F_VERSION_1 | (offered & (pf_bit | F_EVENT_IDX));
    // Mergeable receive buffers when the largest frame needs more than
    // RX_BUF_MRG bytes and the backend offers them; else every buffer
    // holds the largest frame.
    let mrg = cfg.wants_mrg() && offered & F_MRG_RXBUF != 0;
    if mrg {
        want |= F_MRG_RXBUF;
    }
    let rx_buf_b = cfg.rx_buf_b(mrg);
    if cfg.queues > 1 {
        if offered & F_MQ == 0 {
            return Err(format!(
                "{} queue pairs asked, but the backend does not offer VIRTIO_NET_F_MQ",
                cfg.queues
            ));
        }
        want |= F_MQ;
    }
    let protocol = offered & pf_bit != 0;
    if protocol {
        let pf = fe
            .get_protocol_features()
            .map_err(e("GET_PROTOCOL_FEATURES"))?;
        if cfg.queues > 1 && !pf.contains(VhostUserProtocolFeatures::MQ) {
            return Err("the backend does not offer protocol feature MQ".into());
        }
        let ack = pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
        fe.set_protocol_features(ack)
            .map_err(e("SET_PROTOCOL_FEATURES"))?;
        if ack.contains(VhostUserProtocolFeatures::REPLY_ACK) {
            fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
        }
    }
    fe.set_features(want).map_err(e("SET_FEATURES"))?;

    // Memory: one memfd for every ring and buffer.
    let (lay, size) = layout(cfg, rx_buf_b);
    let file = sys::memfd("turnout-vhost-frontend", size).map_err(|x| format!("memfd: {x}"))?;
    let mine = file.try_clone().map_err(|x| format!("memfd: {x}"))?;
    let mem = Arc::new(
        GuestMemory::map(vec![RegionSpec {
            gpa: GPA_BASE,
            size,
            uva: UVA_BASE,
            offset: 0,
            file: mine,
        }])
        .map_err(|x| format!("mapping the memfd: {x}"))?,
    );
    let region = VhostUserMemoryRegionInfo {
        guest_phys_addr: GPA_BASE,
        memory_size: size,
        userspace_addr: UVA_BASE,
        mmap_offset: 0,
        mmap_handle: file.as_raw_fd(),
    };
    fe.set_mem_table(&[region]).map_err(e("SET_MEM_TABLE"))?;
    drop(file);

    let buf_b = cfg.tx_buf_b();
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for (i, l) in lay.iter().enumerate() {
        let ring = Ring::new(
            mem.clone(),
            UVA_BASE + l.desc,
            UVA_BASE + l.avail,
            UVA_BASE + l.used,
            cfg.queue_size,
        )
        .map_err(|x| format!("ring {i}: {x:?}"))?;
        let kick = Arc::new(EventFd::new(EFD_NONBLOCK).map_err(|x| format!("eventfd: {x}"))?);
        let call = &shared.calls[i];
        let bufs_gpa = GPA_BASE + l.bufs;
        // Receive buffers are posted before the backend learns the ring.
        if i % 2 == 0 {
            let mut r = RxSession::new(ring, bufs_gpa, rx_buf_b, cfg.max_frame_b, kick.clone())?;
            r.event_idx = event_idx;
            r.mrg = mrg;
            rxs.push(Arc::new(r));
        } else {
            ring.set_avail_flags(AVAIL_F_NO_INTERRUPT);
            let mut t = TxSession::new(ring, bufs_gpa, buf_b, kick.clone())?;
            t.event_idx = event_idx;
            txs.push(Arc::new(t));
        }
        fe.set_vring_num(i, cfg.queue_size)
            .map_err(e("SET_VRING_NUM"))?;
        fe.set_vring_base(i, 0).map_err(e("SET_VRING_BASE"))?;
        fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: cfg.queue_size,
                queue_size: cfg.queue_size,
                flags: 0,
                desc_table_addr: UVA_BASE + l.desc,
                used_ring_addr: UVA_BASE + l.used,
                avail_ring_addr: UVA_BASE + l.avail,
                log_addr: None,
            },
        )
        .map_err(e("SET_VRING_ADDR"))?;
        fe.set_vring_call(i, call).map_err(e("SET_VRING_CALL"))?;
        fe.set_vring_kick(i, &kick).map_err(e("SET_VRING_KICK"))?;
    }
    if protocol {
        for i in 0..nvq {
            fe.set_vring_enable(i, true)
                .map_err(e("SET_VRING_ENABLE"))?;
        }
    }
    // Counted before the rings go live: whoever sees a frame of this
    // connection also sees it counted.
    let n = shared.connects.fetch_add(1, Release) + 1;
    for (q, (t, r)) in txs.into_iter().zip(rxs).enumerate() {
        // Tell the backend about the posted receive buffers.
        crate::guard::notify(r.kick.as_raw_fd());
        shared.rx[q].store(Some(r));
        shared.tx[q].session.store(Some(t));
        // A receiver asleep on the call eventfd wakes, follows the new
        // session and asks it for notifications (spurious wake-up, once).
        crate::guard::notify(shared.calls[2 * q].as_raw_fd());
    }
    Ok(Conn { _fe: fe, watch, n })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vhost_user::frontend::{FrontendFault, FrontendTx, VhostFrontendPort, RX_BUF_MRG};
    use fabric::TxQueue;

    #[test]
    fn layout_keeps_rings_aligned_and_apart() {
        let mut cfg = FrontendConfig::new("/x");
        cfg.queues = 2;
        cfg.queue_size = 256;
        let (l, size) = layout(&cfg, cfg.rx_buf_b(false));
        assert_eq!(l.len(), 4);
        for (i, v) in l.iter().enumerate() {
            assert_eq!(v.desc % 16, 0);
            assert_eq!(v.used % 4096, 0);
            assert!(v.avail >= v.desc + 16 * 256);
            assert!(v.used >= v.avail + 6 + 2 * 256);
            assert!(v.bufs >= v.used + 6 + 8 * 256);
            let end = v.bufs + 256 * cfg.buf_b();
            let next = l.get(i + 1).map_or(size, |n| n.desc);
            assert!(end <= next, "virtqueue {i} overlaps the next");
        }
        assert_eq!(cfg.buf_b(), 1536);
    }

    #[test]
    fn transmit_buffers_are_sized_for_the_largest_frame_sent() {
        let mut cfg = FrontendConfig::new("/x");
        cfg.queue_size = 1024;
        cfg.max_frame_b = 9000;
        // Default: every transmit buffer holds the largest frame.
        assert_eq!(cfg.tx_buf_b(), 9024);
        // A 64-byte stream (60 bytes without FCS): header and frame in two
        // whole lines, the ring's buffers in 128 KiB.
        cfg.tx_frame_b = Some(60);
        assert_eq!(cfg.tx_buf_b(), 128);
        let (l, size) = layout(&cfg, cfg.rx_buf_b(cfg.wants_mrg()));
        let tx = l[1];
        assert_eq!(tx.bufs % 64, 0);
        assert!(tx.bufs + 1024 * 128 <= size);
        // Receive buffers are not affected (mergeable, 2 KiB).
        assert_eq!(
            l[1].desc - l[0].bufs,
            (1024 * RX_BUF_MRG).div_ceil(4096) * 4096
        );
        cfg.tx_frame_b = Some(1514);
        assert_eq!(cfg.tx_buf_b(), 1536);
        // The queue carries frames up to that size, no longer ones.
        let fault = Arc::new(FrontendFault::default());
        let q = FrontendTx::new(cfg.tx_frame_b(), fault);
        assert_eq!(q.slots_for(1514), 1);
        assert_eq!(q.slots_for(1515), 0);
        // Larger than max_frame_b, or below a header's worth: refused.
        cfg.tx_frame_b = Some(9001);
        assert!(VhostFrontendPort::new("t", cfg.clone()).is_err());
        cfg.tx_frame_b = Some(10);
        assert!(VhostFrontendPort::new("t", cfg).is_err());
    }
}
