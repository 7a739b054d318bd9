//! The vhost-user port against DPDK testpmd with `net_virtio_user`
//! (container style, no hugepages): testpmd txonly into the port, the port
//! into testpmd rxonly, two ports switched between two testpmds (txonly ->
//! rxonly at 64 B and 1518 B, a mac-forwarding loop), and kill -9 of a
//! testpmd followed by a reconnect. Skipped (with a message) when
//! dpdk-testpmd is not installed.
//!
//! `cargo test -p ports --test vhost_testpmd -- --ignored --test-threads=1`
//! (the tests also serialise themselves).

mod vhost_common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fabric::{pipe, DropReason, PipeConfig, Switch, SwitchConfig};
use ports::vhost_user::{VhostUserConfig, VhostUserPort};
use vhost_common::{assert_close, port, wait_until, Patch, TempDir, Testpmd};

/// testpmd processes are heavy (1 GiB each): one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn vhost(sock: &std::path::Path, name: &str) -> Arc<VhostUserPort> {
    Arc::new(VhostUserPort::new(name, VhostUserConfig::new(sock)).expect("vhost-user port"))
}

/// Drains a pipe peer in a thread, counting frames by length.
struct Sink {
    stop: Arc<AtomicBool>,
    frames: Arc<AtomicU64>,
    bad_len: Arc<AtomicU64>,
    thread: Option<std::thread::JoinHandle<fabric::PipePeer>>,
}

impl Sink {
    fn new(mut peer: fabric::PipePeer, want_len: usize) -> Sink {
        let stop = Arc::new(AtomicBool::new(false));
        let frames = Arc::new(AtomicU64::new(0));
        let bad_len = Arc::new(AtomicU64::new(0));
        let (s, f, b) = (stop.clone(), frames.clone(), bad_len.clone());
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                let n = peer.recv(0, 256, |fr| {
                    if fr.len() != want_len {
                        b.fetch_add(1, Ordering::Relaxed);
                    }
                });
                f.fetch_add(n as u64, Ordering::Relaxed);
                if n == 0 {
                    std::thread::sleep(Duration::from_micros(50));
                }
            }
            peer
        });
        Sink {
            stop,
            frames,
            bad_len,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> (u64, u64) {
        std::thread::sleep(Duration::from_millis(100));
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.thread.take().unwrap().join();
        (
            self.frames.load(Ordering::Relaxed),
            self.bad_len.load(Ordering::Relaxed),
        )
    }
}

/// Waits until a counter stops moving (frames still in a ring get
/// processed after testpmd's `stop`).
fn settle(mut f: impl FnMut() -> u64) -> u64 {
    let mut last = f();
    for _ in 0..50 {
        std::thread::sleep(Duration::from_millis(100));
        let now = f();
        if now == last {
            return now;
        }
        last = now;
    }
    last
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_txonly_into_port() {
    need_testpmd!();
    let _g = serial();
    let dir = TempDir::new("txonly");
    let sock = dir.path("vu.sock");
    let sw = Switch::new(SwitchConfig::default(), Box::new(Patch(0, 1))).unwrap();
    let vu = vhost(&sock, "vu");
    let (pp, peer) = pipe(
        "p",
        PipeConfig {
            ring_slots: 4096,
            ..PipeConfig::default()
        },
    )
    .unwrap();
    assert_eq!(sw.add_port("vu", vu.clone(), None).unwrap(), 0);
    assert_eq!(sw.add_port("p", Arc::new(pp), None).unwrap(), 1);
    let sink = Sink::new(peer, 64);

    let mut tp = Testpmd::start(&sock, "txonly", &["--txpkts=64"]);
    assert!(
        vu.wait_running(Duration::from_secs(10)),
        "virtqueues never ran"
    );
    tp.cmd("start");
    std::thread::sleep(Duration::from_secs(2));
    let st = tp.stop();
    let rx = settle(|| port(&sw, "vu").rx_packets);
    let (got, bad_len) = sink.finish();
    eprintln!("testpmd tx {} port rx {rx} sink {got}", st.tx);
    assert!(
        st.tx > 10_000,
        "testpmd sent too little: {st:?}\n{}",
        tp.output()
    );
    assert_close("testpmd tx vs port rx", st.tx, rx);
    assert_eq!(bad_len, 0, "frames of the wrong length");
    let p = port(&sw, "p");
    assert_eq!(
        got + p.drops.iter().map(|d| d.1).sum::<u64>(),
        rx,
        "conservation: {:?}",
        p.drops
    );
    assert_eq!(vu.counter("disconnects_lie"), Some(0));
    tp.quit();
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn port_into_testpmd_rxonly() {
    need_testpmd!();
    let _g = serial();
    let dir = TempDir::new("rxonly");
    let sock = dir.path("vu.sock");
    let sw = Switch::new(SwitchConfig::default(), Box::new(Patch(0, 1))).unwrap();
    let vu = vhost(&sock, "vu");
    let (pp, mut peer) = pipe("p", PipeConfig::default()).unwrap();
    sw.add_port("vu", vu.clone(), None).unwrap();
    sw.add_port("p", Arc::new(pp), None).unwrap();

    let mut tp = Testpmd::start(&sock, "rxonly", &[]);
    assert!(vu.wait_running(Duration::from_secs(10)));
    tp.cmd("start");
    let mut frame = [0u8; 64];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    // Paced at about 100 kpps: the guest ring holds 1024 frames and
    // testpmd shares a core, so an unpaced burst would mostly be dropped.
    let n: u64 = 100_000;
    let mut sent = 0u64;
    while sent < n {
        let burst: [&[u8]; 32] = [&frame[..]; 32];
        sent += peer.send(0, &burst[..(n - sent).min(32) as usize]) as u64;
        std::thread::sleep(Duration::from_micros(300));
    }
    let tx = settle(|| port(&sw, "vu").tx_packets);
    let st = tp.stop();
    let vs = port(&sw, "vu");
    eprintln!(
        "sent {n} port tx {tx} drops {:?} testpmd rx {}",
        vs.drops, st.rx
    );
    assert_eq!(port(&sw, "p").rx_packets, n);
    assert_eq!(
        tx + vs.drops.iter().map(|d| d.1).sum::<u64>(),
        n,
        "conservation"
    );
    assert!(tx > 1000, "too many drops: {:?}", vs.drops);
    assert_close("port tx vs testpmd rx", tx, st.rx);
    tp.quit();
}

/// Two vhost-user ports patched together, testpmd txonly on one and
/// rxonly on the other.
fn two_ports_txonly_rxonly(size: usize) {
    let dir = TempDir::new("v2v");
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let sw = Switch::new(SwitchConfig::default(), Box::new(Patch(0, 1))).unwrap();
    let (a, b) = (vhost(&sa, "a"), vhost(&sb, "b"));
    sw.add_port("a", a.clone(), None).unwrap();
    sw.add_port("b", b.clone(), None).unwrap();
    let mut rx = Testpmd::start(&sb, "rxonly", &[]);
    let mut tx = Testpmd::start(&sa, "txonly", &[&format!("--txpkts={size}")]);
    assert!(a.wait_running(Duration::from_secs(10)) && b.wait_running(Duration::from_secs(10)));
    rx.cmd("start");
    tx.cmd("start");
    std::thread::sleep(Duration::from_secs(2));
    let t = tx.stop();
    let a_rx = settle(|| port(&sw, "a").rx_packets);
    let r = rx.stop();
    let bs = port(&sw, "b");
    eprintln!(
        "{size} B: testpmd tx {} a rx {a_rx} b tx {} b drops {:?} testpmd rx {}",
        t.tx, bs.tx_packets, bs.drops, r.rx
    );
    assert!(t.tx > 1000, "{t:?}");
    assert_close("testpmd tx vs a rx", t.tx, a_rx);
    assert_eq!(
        a_rx,
        bs.tx_packets + bs.drops.iter().map(|d| d.1).sum::<u64>(),
        "conservation"
    );
    assert!(bs.tx_packets > 0);
    assert_close("b tx vs testpmd rx", bs.tx_packets, r.rx);
    assert_eq!(
        bs.drops
            .iter()
            .filter(|d| d.0 != DropReason::TxFull.name())
            .count(),
        0,
        "{:?}",
        bs.drops
    );
    tx.quit();
    rx.quit();
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn two_ports_txonly_rxonly_64() {
    need_testpmd!();
    let _g = serial();
    two_ports_txonly_rxonly(64);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn two_ports_txonly_rxonly_1518() {
    need_testpmd!();
    let _g = serial();
    two_ports_txonly_rxonly(1518);
}

/// A loop: both testpmds in mac forwarding, seeded with `start tx_first`;
/// frames circulate testpmd A -> switch -> testpmd B -> switch -> A.
///
/// The 16 bursts of 32 frames A seeds are all the loop ever carries, as
/// fast as the three of them get a CPU (on a loaded host a few thousand
/// frames a second): the test waits for the traffic it checks, not for a
/// time. Once both testpmds are stopped, the switch has read everything
/// they sent (it keeps polling) and what it delivered they have received,
/// but for the frames still in their receive rings: exactly the 512 seeded.
#[test]
#[ignore = "system: dpdk-testpmd"]
fn mac_forwarding_loop() {
    const SEEDED: u64 = 16 * 32;
    need_testpmd!();
    let _g = serial();
    let dir = TempDir::new("loop");
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let sw = Switch::new(SwitchConfig::default(), Box::new(Patch(0, 1))).unwrap();
    let (a, b) = (vhost(&sa, "a"), vhost(&sb, "b"));
    sw.add_port("a", a.clone(), None).unwrap();
    sw.add_port("b", b.clone(), None).unwrap();
    let mut ta = Testpmd::start(&sa, "mac", &[]);
    let mut tb = Testpmd::start(&sb, "mac", &[]);
    assert!(a.wait_running(Duration::from_secs(10)) && b.wait_running(Duration::from_secs(10)));
    tb.cmd("start");
    ta.cmd("start tx_first 16");
    // Each testpmd has then received more than 10 000 frames.
    let carried = wait_until(Duration::from_secs(60), || {
        port(&sw, "a").tx_packets > 10_000 + SEEDED && port(&sw, "b").tx_packets > 10_000 + SEEDED
    });
    let sa_ = ta.stop();
    let sb_ = tb.stop();
    let drops = |p: &fabric::PortStats| p.drops.iter().map(|d| d.1).sum::<u64>();
    // The switch has read what the testpmds sent and passed it on.
    let settled = wait_until(Duration::from_secs(10), || {
        let (pa, pb) = (port(&sw, "a"), port(&sw, "b"));
        pa.rx_packets == sa_.tx
            && pb.rx_packets == sb_.tx
            && pa.rx_packets + pb.rx_packets
                == pa.tx_packets + pb.tx_packets + drops(&pa) + drops(&pb)
    });
    let (pa, pb) = (port(&sw, "a"), port(&sw, "b"));
    let what = format!(
        "A {sa_:?} B {sb_:?} a rx {} tx {} drops {:?} b rx {} tx {} drops {:?}",
        pa.rx_packets, pa.tx_packets, pa.drops, pb.rx_packets, pb.tx_packets, pb.drops
    );
    eprintln!("{what}");
    assert!(
        carried && sa_.rx > 10_000 && sb_.rx > 10_000,
        "the loop did not carry traffic within 60 s: {what}"
    );
    // Everything the testpmds sent the switch received, and passed on or
    // counted as dropped.
    assert!(settled, "the switch's counters do not add up: {what}");
    // What the switch delivered the testpmds received, but for the frames
    // in their receive rings when they stopped: every frame A seeded is in
    // one of them or counted as dropped (no ring of 1024 ever holds more
    // than the 512, so a testpmd never drops one).
    assert!(
        pa.tx_packets >= sa_.rx && pb.tx_packets >= sb_.rx,
        "a testpmd received more than was delivered: {what}"
    );
    let in_rings = (pa.tx_packets - sa_.rx) + (pb.tx_packets - sb_.rx);
    assert_eq!(
        in_rings + drops(&pa) + drops(&pb),
        SEEDED,
        "frames in the testpmds' receive rings + dropped vs the {SEEDED} seeded: {what}"
    );
    ta.quit();
    tb.quit();
}

/// kill -9 of the sending testpmd: its port disconnects (counted as a
/// hang-up), the other port is unaffected, and a new testpmd on the same
/// socket reconnects and carries traffic again.
#[test]
#[ignore = "system: dpdk-testpmd"]
fn kill9_and_reconnect() {
    need_testpmd!();
    let _g = serial();
    let dir = TempDir::new("kill");
    let (sa, sb) = (dir.path("a.sock"), dir.path("b.sock"));
    let sw = Switch::new(SwitchConfig::default(), Box::new(Patch(0, 1))).unwrap();
    let (a, b) = (vhost(&sa, "a"), vhost(&sb, "b"));
    sw.add_port("a", a.clone(), None).unwrap();
    sw.add_port("b", b.clone(), None).unwrap();
    let mut rx = Testpmd::start(&sb, "rxonly", &[]);
    let mut tx = Testpmd::start(&sa, "txonly", &["--txpkts=64"]);
    assert!(a.wait_running(Duration::from_secs(10)) && b.wait_running(Duration::from_secs(10)));
    rx.cmd("start");
    tx.cmd("start");
    std::thread::sleep(Duration::from_secs(1));
    tx.kill9();
    assert!(
        wait_until(Duration::from_secs(5), || a.counter("disconnects_hangup")
            == Some(1)),
        "no hang-up seen"
    );
    assert!(!a.connected());
    let before = port(&sw, "a").rx_packets;
    assert!(before > 0);
    assert!(b.connected(), "the other port was disturbed");

    let mut tx2 = Testpmd::start(&sa, "txonly", &["--txpkts=64"]);
    assert!(a.wait_running(Duration::from_secs(10)), "no reconnect");
    assert_eq!(a.connects(), 2);
    tx2.cmd("start");
    std::thread::sleep(Duration::from_secs(1));
    let t2 = tx2.stop();
    let after = settle(|| port(&sw, "a").rx_packets);
    let r = rx.stop();
    eprintln!(
        "before {before} after {after} second testpmd tx {} testpmd rx {}",
        t2.tx, r.rx
    );
    assert!(t2.tx > 1000);
    assert_close("second testpmd tx vs a rx", t2.tx, after - before);
    assert!(r.rx > 0);
    assert_eq!(b.connects(), 1);
    assert_eq!(a.counter("disconnects_lie"), Some(0));
    tx2.quit();
    rx.quit();
}
