//! The vhost-user frontend (crates/ports/src/vhost_user/frontend/)
//! against turnoutd's own vhost-user backend, in one process: exact counts
//! and bytes both ways at 64, 1518 and 9000 B, several queue pairs, the
//! backend dropped and recreated (the frontend reconnects and counts it),
//! server mode (the backend connects to us).
//!
//! `cargo test -p ports --test vhost_frontend`

mod vhost_common;

use std::path::Path;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue, TxQueue};
use ports::vhost_user::frontend::{FrontendConfig, VhostFrontendPort};
use ports::vhost_user::{Mode, VhostUserConfig, VhostUserPort};
use vhost_common::{pump_in_place, Templates};
use vhost_common::{wait_until, TempDir};

fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in f[18..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_add(seq) as u8;
    }
    f
}

/// Sends `n` frames of `len` bytes on `tx` while draining `rx`; returns
/// the frames received in order, checked byte for byte.
fn pump(tx: &dyn TxQueue, rx: &mut dyn RxQueue, n: u32, len: usize) -> u32 {
    // SAFETY: this thread is the queue's only user.
    let mut tx = unsafe { fabric::OwnedTx::new(tx) };
    let mut batch = RxBatch::with_capacity(64);
    let (mut sent, mut got) = (0u32, 0u32);
    let t0 = Instant::now();
    while got < n && t0.elapsed() < Duration::from_secs(20) {
        // A frame over mergeable buffers takes several slots.
        let per = tx.slots_for(len).max(1);
        let free = (tx.free_slots().min(32) / per).min(n - sent);
        if free > 0 {
            let first = tx.reserve(free * per);
            for k in 0..free {
                tx.write(first + (k * per) as u64, per, &frame(len, sent + k));
            }
            tx.publish(first + (free * per) as u64);
            sent += free;
        }
        let b = batch.receive(rx, 0, 0);
        for p in b.pkts().iter() {
            assert_eq!(p.data(), &frame(len, got)[..], "frame {got} of {len} B");
            got += 1;
        }
    }
    got
}

/// turnoutd's vhost-user port on `sock` (server mode unless `mode`).
fn backend(sock: &Path, queues: u16, max_frame_b: usize, event_idx: bool) -> VhostUserPort {
    let mut bc = VhostUserConfig::new(sock);
    bc.queues = queues;
    bc.max_frame_b = max_frame_b;
    bc.event_idx = event_idx;
    VhostUserPort::new("backend", bc).unwrap()
}

/// Waits until the two are connected and the backend's rings run.
fn linked(backend: &VhostUserPort, front: &VhostFrontendPort, what: &str) {
    assert!(
        wait_until(Duration::from_secs(10), || front.link_up()
            && backend.wait_running(Duration::from_millis(1))),
        "{what}: {}",
        front.last_error()
    );
}

fn pair(dir: &TempDir, queues: u16, max_frame_b: usize) -> (VhostUserPort, VhostFrontendPort) {
    pair_with(dir, queues, max_frame_b, true)
}

fn pair_with(
    dir: &TempDir,
    queues: u16,
    max_frame_b: usize,
    event_idx: bool,
) -> (VhostUserPort, VhostFrontendPort) {
    let sock = dir.path("vu.sock");
    let backend = backend(&sock, queues, max_frame_b, event_idx);
    let mut fc = FrontendConfig::new(&sock);
    fc.queues = queues;
    fc.max_frame_b = max_frame_b;
    fc.queue_size = 256;
    let front = VhostFrontendPort::new("front", fc).unwrap();
    linked(&backend, &front, "no link");
    (backend, front)
}

/// Drops the backend and checks the frontend saw it go.
fn kill_backend(front: &VhostFrontendPort, old: VhostUserPort) {
    let hangups = front.counter("disconnects_hangup").unwrap();
    drop(old);
    assert!(
        wait_until(Duration::from_secs(5), || !front.link_up()),
        "link stays up after the backend died"
    );
    assert_eq!(front.counter("disconnects_hangup"), Some(hangups + 1));
}

/// A new backend on the old socket, which the frontend reconnects to.
fn restart_backend(dir: &TempDir, front: &VhostFrontendPort) -> VhostUserPort {
    let backend = backend(&dir.path("vu.sock"), 1, 1518, true);
    linked(&backend, front, "no reconnect");
    backend
}

/// `n` frames of `len` bytes each way on queue `q`, all arriving whole.
fn both_ways(backend: &VhostUserPort, front: &VhostFrontendPort, q: u16, n: u32, len: usize) {
    let mut brx = backend.take_rx(q).unwrap();
    let mut frx = front.take_rx(q).unwrap();
    assert_eq!(
        pump(front.tx(q), brx.as_mut(), n, len),
        n,
        "to the backend, queue {q}, {len} B"
    );
    assert_eq!(
        pump(backend.tx(q), frx.as_mut(), n, len),
        n,
        "from the backend, queue {q}, {len} B"
    );
}

#[test]
fn frames_cross_both_ways_exactly() {
    let dir = TempDir::new("front");
    // With and without EVENT_IDX: the frontend kicks by avail_event or by
    // NO_NOTIFY.
    // The backend copies 1518-byte frames into one guest buffer each with
    // streamed stores in one round and ordinary ones in the other (a
    // worker's copy chooser picks per thread, `fabric::copymode`).
    for (event_idx, vhost_streams) in [(true, true), (false, false)] {
        fabric::sys::set_streaming([true, vhost_streams]);
        for len in [64usize, 1518, 9000] {
            let (backend, front) = pair_with(&dir, 1, 9000, event_idx);
            both_ways(&backend, &front, 0, 20_000, len);
            for (k, v) in front.backend_counters() {
                if k.starts_with("lie") || k.starts_with("disconnects") || k == "tx_stale" {
                    assert_eq!(v, 0, "{k}");
                }
            }
            assert_eq!(backend.counter("lie_desc_index"), Some(0));
            // Counted before the rings went live: frames that crossed mean
            // the connection is counted (it once read 0 here on a loaded
            // machine, when the count came after the set-up).
            assert_eq!(front.connects(), 1);
            // 9000-byte frames arrive over mergeable 2 KiB buffers (five
            // each): in place, or copied where a frame crosses the ring's
            // wrap; smaller ones in one buffer.
            let linearised = front.counter("rx_linearised").unwrap();
            assert_eq!(linearised > 0, len > 2048 - 12, "{len} B: {linearised}");
            assert_eq!(front.counter("rx_oversize"), Some(0));
        }
    }
}

#[test]
fn without_mergeable_buffers_each_buffer_holds_the_largest_frame() {
    let dir = TempDir::new("front-nomrg");
    let sock = dir.path("vu.sock");
    let mut bc = VhostUserConfig::new(&sock);
    bc.max_frame_b = 9000;
    bc.mrg_rxbuf = false;
    let backend = VhostUserPort::new("backend", bc).unwrap();
    let mut fc = FrontendConfig::new(&sock);
    fc.max_frame_b = 9000;
    fc.queue_size = 256;
    let front = VhostFrontendPort::new("front", fc).unwrap();
    linked(&backend, &front, "no link");
    for len in [64usize, 9000] {
        both_ways(&backend, &front, 0, 5_000, len);
    }
    assert_eq!(front.counter("rx_linearised"), Some(0));
    for (k, v) in front.backend_counters() {
        if k.starts_with("lie") || k.starts_with("disconnects") {
            assert_eq!(v, 0, "{k}");
        }
    }
}

/// Transmit buffers sized for the largest frame sent (`tx_frame_b`, 128
/// bytes apart for 64-byte frames): frames cross exactly, over many laps
/// of the ring and with lengths changing, a longer frame is refused by
/// `slots_for`, and receiving still takes the port's largest frame.
#[test]
fn dense_transmit_buffers_carry_frames_exactly() {
    let dir = TempDir::new("front-dense");
    let sock = dir.path("vu.sock");
    let backend = backend(&sock, 1, 9000, true);
    let mut fc = FrontendConfig::new(&sock);
    fc.max_frame_b = 9000;
    fc.tx_frame_b = Some(64);
    fc.queue_size = 256;
    let front = VhostFrontendPort::new("front", fc).unwrap();
    linked(&backend, &front, "no link");
    let mut brx = backend.take_rx(0).unwrap();
    for len in [64usize, 60, 18, 64] {
        assert_eq!(
            pump(front.tx(0), brx.as_mut(), 3_000, len),
            3_000,
            "{len} B"
        );
    }
    assert_eq!(front.tx(0).slots_for(64), 1);
    assert_eq!(front.tx(0).slots_for(65), 0);
    drop(brx);
    let mut frx = front.take_rx(0).unwrap();
    assert_eq!(pump(backend.tx(0), frx.as_mut(), 500, 9000), 500);
    for (k, v) in front.backend_counters() {
        if k.starts_with("lie") || k.starts_with("disconnects") || k == "tx_stale" {
            assert_eq!(v, 0, "{k}");
        }
    }
}

#[test]
fn several_queue_pairs_each_carry_their_own_frames() {
    let dir = TempDir::new("frontmq");
    let (backend, front) = pair(&dir, 3, 1518);
    assert!(
        wait_until(Duration::from_secs(5), || backend.counter("connected")
            == Some(1)),
        "backend not connected"
    );
    for q in 0..3u16 {
        both_ways(&backend, &front, q, 3000, 128);
    }
}

#[test]
fn reconnects_after_the_backend_restarts() {
    let dir = TempDir::new("frontre");
    let (backend, front) = pair(&dir, 1, 1518);
    {
        let mut brx = backend.take_rx(0).unwrap();
        assert_eq!(pump(front.tx(0), brx.as_mut(), 1000, 64), 1000);
    }
    kill_backend(&front, backend);
    let backend = restart_backend(&dir, &front);
    // The control thread counts the connection after the set-up that
    // brought the link up: wait for the count, not just the link.
    assert!(
        wait_until(Duration::from_secs(10), || front.connects() == 2),
        "connects {} after the restart",
        front.connects()
    );
    both_ways(&backend, &front, 0, 5000, 1518);
}

#[test]
fn transmit_slots_go_nowhere_while_the_backend_is_down() {
    let dir = TempDir::new("frontdown");
    let (backend, front) = pair(&dir, 1, 1518);
    kill_backend(&front, backend);
    assert_eq!(front.tx(0).tx_lock().lock().producer.free_slots(), 0);
}

#[test]
fn server_mode_accepts_a_client_mode_backend() {
    let dir = TempDir::new("frontsrv");
    let sock = dir.path("srv.sock");
    let mut fc = FrontendConfig::new(&sock);
    fc.server = true;
    let front = VhostFrontendPort::new("front", fc).unwrap();
    let mut bc = VhostUserConfig::new(&sock);
    bc.mode = Mode::Client;
    let backend = VhostUserPort::new("backend", bc).unwrap();
    linked(&backend, &front, "no link");
    both_ways(&backend, &front, 0, 2000, 64);
}

#[test]
fn an_idle_receive_queue_follows_the_session_after_a_restart() {
    // The receive queue is taken (and polled, idle) before the backend
    // dies: it must not keep polling the dead session's ring afterwards
    // (found against OVS-DPDK restarting under a running turnout-gen).
    let dir = TempDir::new("frontidle");
    let (backend, front) = pair(&dir, 1, 1518);
    let mut frx = front.take_rx(0).unwrap();
    assert_eq!(pump(backend.tx(0), frx.as_mut(), 1000, 64), 1000);
    let mut batch = RxBatch::with_capacity(64);
    assert_eq!(batch.receive(frx.as_mut(), 0, 0).received(), 0, "idle");
    kill_backend(&front, backend);
    assert_eq!(batch.receive(frx.as_mut(), 0, 0).received(), 0, "down");
    let backend = restart_backend(&dir, &front);
    assert_eq!(pump(backend.tx(0), frx.as_mut(), 5000, 1518), 5000);
}

/// A template of `len` bytes for `Templates` (the frame's sequence number
/// is all that changes).
fn template(len: usize) -> Vec<u8> {
    frame(len, 0)
}

#[test]
fn frames_written_in_place_arrive_exactly() {
    let dir = TempDir::new("frontinpl");
    let (backend, front) = pair(&dir, 1, 1518);
    // Four frames per pattern over a 256-entry ring: a position gets the
    // same template on every lap (patched) unless a copied burst passed
    // through it since.
    let mut t = Templates::new(&[64, 1518, 200, 64], template);
    {
        let mut brx = backend.take_rx(0).unwrap();
        assert_eq!(
            pump_in_place(front.tx(0), brx.as_mut(), &mut t, 20_000, 7).0,
            20_000
        );
        assert!(
            t.patched > 10_000,
            "patched {} whole {}",
            t.patched,
            t.whole
        );
        assert!(t.whole > 1000, "patched {} whole {}", t.patched, t.whole);
        // Three per pattern: a position's template changes on every lap
        // (256 = 1 mod 3), whole frames over another template.
        t.sizes = vec![64, 1518, 200];
        let whole = t.whole;
        assert_eq!(
            pump_in_place(front.tx(0), brx.as_mut(), &mut t, 3000, u32::MAX).0,
            3000
        );
        assert!(t.whole - whole > 2000, "{}", t.whole - whole);
    }
    assert_eq!(t.skipped, 0);
    // A new session (new memory): every buffer's template is unknown
    // again, so the first lap writes whole frames.
    kill_backend(&front, backend);
    let backend = restart_backend(&dir, &front);
    let mut brx = backend.take_rx(0).unwrap();
    let (whole, patched) = (t.whole, t.patched);
    t.sizes = vec![64];
    assert_eq!(
        pump_in_place(front.tx(0), brx.as_mut(), &mut t, 255, u32::MAX).0,
        255
    );
    assert_eq!((t.whole - whole, t.patched - patched), (255, 0));
    for (k, v) in front.backend_counters() {
        if k.starts_with("lie") || k == "tx_stale" {
            assert_eq!(v, 0, "{k}");
        }
    }
}

/// Minor page faults of the calling thread so far.
fn thread_minflt() -> i64 {
    // SAFETY: getrusage fills a plain struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; RUSAGE_THREAD is this thread.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) }, 0);
    ru.ru_minflt as i64
}

/// The first lap of a fresh connection's queues takes no page fault on
/// the data path, on either side: both map the memory table in when they
/// get it (`GuestMemory::map` prefaults), not at the first frame through
/// each buffer page (docs/vhost-user.md, "Prefaulted guest memory").
/// Without it, 1023 frames each way through 1024-entry queues took
/// 794 faults in this thread.
#[test]
fn the_first_lap_of_a_fresh_connection_takes_no_page_fault() {
    let dir = TempDir::new("front-prefault");
    let sock = dir.path("vu.sock");
    let backend = backend(&sock, 1, 1518, true);
    let mut fc = FrontendConfig::new(&sock);
    fc.max_frame_b = 1518;
    fc.queue_size = 1024;
    let front = VhostFrontendPort::new("front", fc).unwrap();
    linked(&backend, &front, "no link");
    let mut brx = backend.take_rx(0).unwrap();
    let mut frx = front.take_rx(0).unwrap();
    let f = frame(64, 0);
    let mut batch = RxBatch::with_capacity(8);
    let mut one = |tx: &dyn TxQueue, rx: &mut dyn RxQueue| {
        // SAFETY: this thread is the queue's only user.
        let mut tx = unsafe { fabric::OwnedTx::new(tx) };
        let t0 = Instant::now();
        while tx.free_slots() == 0 {
            assert!(t0.elapsed() < Duration::from_secs(5), "no room to send");
        }
        let s = tx.reserve(1);
        tx.write(s, 1, &f);
        tx.publish(s + 1);
        loop {
            let b = batch.receive(&mut *rx, 0, 0);
            let n = b.len();
            if n > 0 {
                assert_eq!(b.pkts()[0].data(), &f[..]);
            }
            drop(b);
            if n > 0 {
                break;
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "frame not received");
        }
    };
    // One each way first: this thread's code and stack pages.
    one(front.tx(0), brx.as_mut());
    one(backend.tx(0), frx.as_mut());
    let f0 = thread_minflt();
    for _ in 1..1024 {
        one(front.tx(0), brx.as_mut());
        one(backend.tx(0), frx.as_mut());
    }
    let faults = thread_minflt() - f0;
    assert!(
        faults < 64,
        "{faults} page faults on the data path for 1023 frames each way"
    );
}
