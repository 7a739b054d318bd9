//! A hostile vhost-user frontend (a lying VM) against running vhost-user
//! ports, speaking the protocol byte by byte over the real socket: memory
//! tables with overlapping, zero-size, huge, unmappable or short-file
//! regions and wrong fd counts; vring addresses outside guest memory;
//! descriptor loops and chains pointing outside; available index jumps;
//! read-only buffers offered for receive; kicks on unconfigured and
//! nonexistent rings; messages out of order, with wrong sizes or wrong
//! fds; disconnects mid-setup and mid-traffic.
//!
//! After every lie the port disconnects with the reason counted, accepts
//! an honest frontend again and forwards its frames; a second port with an
//! honest frontend connected throughout loses nothing; over repeated
//! rounds the process's open fds and RSS stay flat.
//!
//! `cargo test --release -p ports --test vhost_hostile`

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue};
use ports::vhost_user::{VhostUserConfig, VhostUserPort};

mod vhost_common;
use vhost_common::{wait_until, TempDir};
#[path = "vhost_common/liar.rs"]
mod liar;
use liar::{scenarios, DataPath, Frontend, Want};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rss_kb() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// The test's worker: receive queue 0 of a port, drained by bursts.
struct Worker {
    rx: Box<dyn RxQueue>,
    batch: RxBatch,
}

impl Worker {
    fn new(p: &VhostUserPort) -> Worker {
        Worker {
            rx: p.take_rx(0).unwrap(),
            batch: RxBatch::with_capacity(64),
        }
    }

    /// Bursts until `want` frames with `tag` arrived or `t` passed; returns
    /// how many did (other frames are counted too, but not returned).
    fn collect(&mut self, want: usize, tag: u8, t: Duration) -> usize {
        let t0 = Instant::now();
        let mut got = 0;
        while got < want && t0.elapsed() < t {
            let burst = self.batch.receive(&mut *self.rx, 0, 0);
            let n = burst.received();
            for p in burst.pkts().iter() {
                if p.data().len() > 14 && p.data()[14] == tag {
                    got += 1;
                }
            }
            drop(burst);
            if n == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        got
    }

    /// A few bursts (lets the data path see what the guest wrote).
    fn spin(&mut self, t: Duration) {
        let t0 = Instant::now();
        while t0.elapsed() < t {
            drop(self.batch.receive(&mut *self.rx, 0, 0));
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn counter(p: &VhostUserPort, name: &str) -> u64 {
    p.counter(name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

/// The data path of the in-process test: its worker and the port.
struct InProcess<'a> {
    w: &'a mut Worker,
    p: &'a VhostUserPort,
}

impl DataPath for InProcess<'_> {
    fn spin(&mut self, t: Duration) {
        self.w.spin(t);
    }

    fn wait_running(&mut self) -> bool {
        self.p.wait_running(Duration::from_secs(5))
    }

    fn push_to_guest(&mut self) {
        // SAFETY: this test thread is the port's only transmitter.
        let mut tx = unsafe { fabric::OwnedTx::new(self.p.tx(0)) };
        let free = tx.free_slots();
        assert_eq!(free, 1, "the guest offered one buffer");
        let s = tx.reserve(1);
        tx.write(s, 1, &[0xee; 60]);
        tx.publish(s + 1);
    }
}

/// Connects an honest frontend, passes `n` tagged frames through the
/// port's receive queue and returns the frontend (still connected).
fn honest(path: &Path, p: &VhostUserPort, w: &mut Worker, n: usize, tag: u8) -> Frontend {
    let mut f = Frontend::connect(path);
    f.setup_device();
    f.setup_rings();
    assert!(
        p.wait_running(Duration::from_secs(5)),
        "honest frontend's rings never ran"
    );
    let mut got = 0;
    for _ in 0..(n / 64).max(1) {
        let k = n.min(64);
        f.send_frames(k, 60, tag);
        got += w.collect(k, tag, Duration::from_secs(5));
    }
    assert_eq!(
        got,
        (n / 64).max(1) * n.min(64),
        "honest frames through {tag:#x}"
    );
    f
}

#[test]
fn hostile_frontend_is_disconnected_counted_and_harmless() {
    let dir = TempDir::new("hostile");
    let (pa, pb) = (dir.path("a.sock"), dir.path("b.sock"));
    let a = Arc::new(VhostUserPort::new("hostile", VhostUserConfig::new(&pa)).unwrap());
    let b = Arc::new(VhostUserPort::new("honest", VhostUserConfig::new(&pb)).unwrap());
    let (mut wa, mut wb) = (Worker::new(&a), Worker::new(&b));
    // The other port: an honest guest connected for the whole test.
    let mut fb = honest(&pb, &b, &mut wb, 64, 0xb0);

    let scen = scenarios();
    // Descriptors of the process (both ports, the honest guest of b and
    // its worker) before any attack: every round must end with exactly
    // these (the hostile port keeps nothing of a departed frontend).
    let fds_before = open_fds();
    let mut rss_after_first = 0;
    let rounds = 4;
    for round in 0..rounds {
        for (name, act, want) in &scen {
            let before = |n: &str| counter(&a, n);
            let (proto, lie, hang) = (
                before("disconnects_protocol"),
                before("disconnects_lie"),
                before("disconnects_hangup"),
            );
            let lie_ctr = match want {
                Want::Lie(c) => before(c),
                _ => 0,
            };
            let mut f = Frontend::connect(&pa);
            act(&mut f, &mut InProcess { w: &mut wa, p: &a });
            // The backend ends the connection with the reason counted. The
            // worker keeps polling meanwhile, as turnoutd's do: a stop
            // waits (up to a second per ring) for the worker to let go of
            // the session it holds, and a worker not polled never does.
            let ended = wait_until(Duration::from_secs(10), || {
                wa.spin(Duration::from_millis(1));
                match want {
                    Want::Protocol => counter(&a, "disconnects_protocol") == proto + 1,
                    Want::Lie(c) => {
                        counter(&a, "disconnects_lie") == lie + 1 && counter(&a, c) > lie_ctr
                    }
                    Want::Hangup => counter(&a, "disconnects_hangup") == hang + 1,
                }
            });
            assert!(
                ended,
                "round {round} {name}: not ended as {want:?}: {:?}",
                a.backend_counters()
            );
            if !matches!(want, Want::Hangup) {
                assert!(
                    f.closed_within(Duration::from_secs(2)),
                    "{name}: socket still open"
                );
            }
            drop(f);
            assert!(
                wait_until(Duration::from_secs(5), || !a.connected()),
                "{name}: still connected"
            );
            // The port recovers: an honest guest gets its frames through.
            // Its hangup counted before the next scenario reads the
            // counters (else a late count lands in the next scenario's,
            // which then sees two hangups where it waits for one). The
            // backend counts how a connection ended before it clears
            // `connected`; the wait asks for the count itself all the same.
            let tag = 0x10 + (round as u8);
            let hangups = counter(&a, "disconnects_hangup");
            let fa = honest(&pa, &a, &mut wa, 32, tag);
            drop(fa);
            assert!(
                wait_until(Duration::from_secs(5), || !a.connected()
                    && counter(&a, "disconnects_hangup") > hangups),
                "{name}: honest frontend's hangup not counted: {:?}",
                a.backend_counters()
            );
            // The other port never noticed: its stream loses nothing.
            let tagb = 0xb1 + (round as u8);
            fb.send_frames(64, 60, tagb);
            assert_eq!(
                wb.collect(64, tagb, Duration::from_secs(5)),
                64,
                "{name}: other port lost frames"
            );
        }
        let settled = wait_until(Duration::from_secs(2), || open_fds() == fds_before);
        assert!(
            settled,
            "round {round}: fds {fds_before} -> {} (a departed frontend's descriptors kept)",
            open_fds()
        );
        if round == 0 {
            rss_after_first = rss_kb();
        }
    }
    let (fds, rss) = (open_fds(), rss_kb());
    eprintln!(
        "{} scenarios x {rounds} rounds: fds {fds_before} -> {fds}, rss {rss_after_first} -> {rss} KiB; counters {:?}",
        scen.len(),
        a.backend_counters()
    );
    assert_eq!(fds, fds_before, "fds: {fds_before} -> {fds}");
    assert!(
        rss < rss_after_first + 8 * 1024,
        "rss grew: {rss_after_first} -> {rss} KiB"
    );
    assert_eq!(
        counter(&b, "disconnects_lie") + counter(&b, "disconnects_protocol"),
        0
    );
    assert_eq!(
        counter(&b, "connects"),
        1,
        "the honest port's guest stayed connected"
    );
    fb.sock.flush().unwrap();
}
