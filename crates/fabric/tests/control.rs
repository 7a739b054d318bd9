//! The control path against a worker that does not come round (stuck in a
//! logic), the worker's epoll bookkeeping when a queue's notification fd
//! cannot be (re-)registered, and its accounting of the back-off for a
//! queue that has no notification fd (and that it never backs off while a
//! queue that has one is unarmed); a counter reset under traffic; an armed
//! queue found by peeking at its ring while another keeps the worker busy;
//! a queue watched through epoll only while the worker sleeps.
//!
//! `cargo test -p fabric --test control`

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{
    pipe, Ctx, Logic, PipeConfig, PipePeer, PipePort, Pkts, Port, PortId, PortInfo, QueueId,
    RxFill, RxQueue, Switch, SwitchConfig, SwitchError, TxQueue, Verdict, WakeupMode, WorkerStats,
};

/// Floods everything; while `open` is false, the first batch it sees blocks
/// the worker (a logic stuck in a loop).
struct Gate {
    entered: Arc<AtomicBool>,
    open: Arc<AtomicBool>,
}

impl Logic for Gate {
    fn name(&self) -> &'static str {
        "gate"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut Pkts, v: &mut [Verdict]) {
        self.entered.store(true, Ordering::SeqCst);
        while !self.open.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        v.fill(Verdict::Flood);
    }
}

fn gate(open: bool) -> (Box<Gate>, Arc<AtomicBool>, Arc<AtomicBool>) {
    let entered = Arc::new(AtomicBool::new(false));
    let open = Arc::new(AtomicBool::new(open));
    (
        Box::new(Gate {
            entered: entered.clone(),
            open: open.clone(),
        }),
        entered,
        open,
    )
}

/// Opens the gate when dropped, so a failing assertion does not leave the
/// switch's drop waiting for a stuck worker forever.
struct OpenOnDrop(Arc<AtomicBool>);

impl Drop for OpenOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

fn frame() -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].fill(0xff);
    f[12] = 0x08;
    f
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "{what}: not within {timeout:?}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

fn is_timeout(r: &Result<impl std::fmt::Debug, SwitchError>) -> bool {
    matches!(r, Err(SwitchError::Timeout(_)))
}

#[test]
fn control_operations_report_a_worker_that_does_not_come_round() {
    let (logic, entered, open) = gate(false);
    // Shorter than the default 5 s, so the three timeouts below take
    // 1.5 s; a worker off its CPU still comes round well within it.
    const LIMIT: Duration = Duration::from_millis(500);
    let cfg = SwitchConfig {
        control_timeout: LIMIT,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, logic).unwrap();
    let _unstick = OpenOnDrop(open.clone());
    let (a, mut pa) = pipe("a", PipeConfig::default()).unwrap();
    let (b, _pb) = pipe("b", PipeConfig::default()).unwrap();
    sw.add_port("a", Arc::new(a), None).unwrap();
    sw.add_port("b", Arc::new(b), Some(0)).unwrap();
    assert_eq!(pa.send(0, &[&frame()]), 1);
    wait_for("worker in the logic", Duration::from_secs(5), || {
        entered.load(Ordering::SeqCst)
    });

    // The worker is stuck: every control operation says so instead of Ok.
    let t0 = Instant::now();
    let (new_logic, _, new_open) = gate(true);
    let r = sw.replace_logic(new_logic);
    assert!(is_timeout(&r), "replace_logic: {r:?}");
    assert!(t0.elapsed() >= LIMIT);
    assert!(
        r.as_ref()
            .is_err_and(|e| format!("{e:?}").contains("500ms")),
        "{r:?}"
    );
    let _ = new_open;

    let (c, _pc) = pipe("c", PipeConfig::default()).unwrap();
    let c: Arc<dyn Port> = Arc::new(c);
    let r = sw.add_port("c", c.clone(), Some(0));
    assert!(is_timeout(&r), "add_port: {r:?}");
    assert_eq!(sw.port_id("c"), None, "a timed-out add is taken out again");

    let t0 = Instant::now();
    let r = sw.remove_port("b");
    assert!(is_timeout(&r), "remove_port: {r:?}");
    assert!(t0.elapsed() >= LIMIT);
    assert_eq!(sw.port_id("b"), None, "out of the table all the same");

    // Unstuck, the worker catches up with the commands posted meanwhile:
    // the rolled-back add gave c's queue back, so c can be added again.
    open.store(true, Ordering::SeqCst);
    sw.add_port("c", c, Some(0))
        .expect("add after the worker came round");
    sw.remove_port("a")
        .expect("remove after the worker came round");
    let (l, _, _) = gate(true);
    sw.replace_logic(l)
        .expect("replace after the worker came round");
    sw.shutdown();
}

/// A receive queue whose notification fd is chosen by the test.
struct OtherFd {
    inner: Box<dyn RxQueue>,
    fd: RawFd,
    _owned: Option<OwnedFd>,
}

impl RxQueue for OtherFd {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        self.inner.burst(batch)
    }
    fn release(&mut self) {
        self.inner.release()
    }
    fn notify_fd(&self) -> Option<RawFd> {
        Some(self.fd)
    }
    fn set_notify(&mut self, enabled: bool) -> bool {
        self.inner.set_notify(enabled)
    }
    fn ack_notify(&mut self) {
        self.inner.ack_notify()
    }
}

/// A pipe port whose receive queue reports `fd` as its notification fd;
/// -1: a dup of the pipe's own (owned by the queue, its number left in `fd`).
struct WithFd {
    pipe: PipePort,
    fd: Arc<AtomicI32>,
}

impl Port for WithFd {
    fn info(&self) -> PortInfo {
        self.pipe.info()
    }
    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let inner = self.pipe.take_rx(q)?;
        let mut owned = None;
        if self.fd.load(Ordering::SeqCst) < 0 {
            // SAFETY: dup of a valid fd; the result is owned below.
            let d = unsafe { libc::dup(inner.notify_fd()?) };
            assert!(d >= 0);
            // SAFETY: a fresh descriptor nobody else owns.
            owned = Some(unsafe { OwnedFd::from_raw_fd(d) });
            self.fd.store(d, Ordering::SeqCst);
        }
        Some(Box::new(OtherFd {
            inner,
            fd: self.fd.load(Ordering::SeqCst),
            _owned: owned,
        }))
    }
    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        self.pipe.tx(q)
    }
}

/// A switch with `cfg` and a logic that forwards everything.
fn switch_with(cfg: SwitchConfig) -> Switch {
    let (logic, _, _) = gate(true);
    Switch::new(cfg, logic).unwrap()
}

fn adaptive() -> Switch {
    switch_with(SwitchConfig {
        wakeup: WakeupMode::Adaptive,
        ..SwitchConfig::default()
    })
}

/// Adaptive with budget 0: it polls while frames come and sleeps only
/// after its learned idle time (1 ms at least) without any.
/// Worker 0's counters.
fn worker0(sw: &Switch) -> WorkerStats {
    sw.worker_stats()
        .into_iter()
        .find(|w| w.id == 0)
        .expect("worker 0")
}

fn adaptive_budget_0() -> Switch {
    switch_with(SwitchConfig {
        wakeup: WakeupMode::Adaptive,
        latency_budget_us: 0,
        ..SwitchConfig::default()
    })
}

/// Sends one frame on `src` after the worker has had time to arm idle
/// queues, and waits for it at `dst`.
fn delivered_after_idle(src: &mut PipePeer, dst: &mut PipePeer) -> bool {
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(src.send(0, &[&frame()]), 1);
    let deadline = Instant::now() + Duration::from_secs(2);
    while Instant::now() < deadline {
        if dst.recv(0, 8, |_| {}) > 0 {
            return true;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    false
}

#[test]
fn a_queue_epoll_refuses_is_polled_not_armed() {
    // epoll refuses regular files (EPERM): the queue must stay polled.
    let file = File::open(std::env::current_exe().unwrap()).unwrap();
    let sw = adaptive();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    let s = WithFd {
        pipe: s,
        fd: Arc::new(AtomicI32::new(file.as_raw_fd())),
    };
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    assert!(
        delivered_after_idle(&mut ps, &mut pd),
        "an idle queue epoll refused went deaf"
    );
    sw.shutdown();
}

#[test]
fn removing_a_port_leaves_the_other_queues_registrations_alone() {
    // Queue "s" is watched through `fd`, a dup of its pipe's eventfd. Then
    // the number `fd` is made to name a regular file: a re-registration of
    // "s" under that number (what removing another port used to do, to
    // renumber tokens) fails, while epoll's existing registration of the
    // eventfd still works. Removing "x" must leave "s" able to wake up.
    let sw = adaptive();
    let (x, _px) = pipe("x", PipeConfig::default()).unwrap();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    let fd = Arc::new(AtomicI32::new(-1));
    let s = WithFd {
        pipe: s,
        fd: fd.clone(),
    };
    sw.add_port("x", Arc::new(x), Some(0)).unwrap();
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    let fd = fd.load(Ordering::SeqCst);
    assert!(fd >= 0, "the worker took s's queue");
    let file = File::open(std::env::current_exe().unwrap()).unwrap();
    // SAFETY: both fds are valid; `fd` stays owned by s's queue (now naming
    // the file, closed with the queue).
    assert!(unsafe { libc::dup2(file.as_raw_fd(), fd) } >= 0);
    sw.remove_port("x").unwrap();
    assert!(
        delivered_after_idle(&mut ps, &mut pd),
        "removing another port left an idle queue deaf"
    );
    sw.shutdown();
}

#[test]
fn a_wake_up_without_frames_arms_again_and_never_backs_off() {
    // Every queue here has notifications. A wake-up that brings no frame
    // (x's eventfd written with nothing in its ring: another virtqueue's
    // kick on an eventfd a vhost-user frontend shares, a session's
    // arrival) disarms x with its idle clock restarted. The worker, idle
    // for longer than it waits before sleeping, must arm x again at once
    // and sleep in epoll. It used to leave x unarmed for the whole
    // sleep-after time (budget 0: 1 ms at least, up to 64 ms) and loop
    // through 50 µs back-offs outside epoll meanwhile, never looking at
    // the armed queues: a frame on one of them waited that long. Counted,
    // not timed: the back-offs must stay at zero.
    let sw = adaptive_budget_0();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    let (x, _px) = pipe("x", PipeConfig::default()).unwrap();
    let xfd = Arc::new(AtomicI32::new(-1));
    let x = WithFd {
        pipe: x,
        fd: xfd.clone(),
    };
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    sw.add_port("x", Arc::new(x), Some(0)).unwrap();
    let xfd = xfd.load(Ordering::SeqCst);
    assert!(xfd >= 0, "the worker took x's queue");
    let stats = || worker0(&sw);
    // Idle long enough for every queue to be armed: the sleep-after time
    // (1 ms, or the wake-up p99 if longer) three times over.
    let idle = || {
        let after_ns = stats().policy.sleep_after_ns.max(1_000_000);
        std::thread::sleep(Duration::from_nanos(3 * after_ns).max(Duration::from_millis(5)));
    };
    for _ in 0..20 {
        idle();
        let before = stats();
        let one: u64 = 1;
        // SAFETY: 8 bytes from a local to the eventfd x's queue watches.
        let w = unsafe { libc::write(xfd, &one as *const u64 as *const libc::c_void, 8) };
        assert_eq!(w, 8);
        wait_for("the wake-up", Duration::from_secs(5), || {
            stats().wakeups > before.wakeups
        });
    }
    idle();
    assert_eq!(ps.send(0, &[&frame()]), 1);
    wait_for("the frame at d", Duration::from_secs(5), || {
        pd.recv(0, 8, |_| {}) > 0
    });
    let st = stats();
    assert!(st.sleeps >= 20, "{} sleeps", st.sleeps);
    assert_eq!(
        st.backoffs, 0,
        "backed off {} times outside epoll with queues that have notifications \
         ({} sleeps, {} wake-ups)",
        st.backoffs, st.sleeps, st.wakeups
    );
    sw.shutdown();
}

/// Floods; `id` tells instances apart, `dropped` says when it is dropped.
struct Marked {
    name: &'static str,
    id: u32,
    dropped: Arc<AtomicBool>,
}

impl Logic for Marked {
    fn name(&self) -> &'static str {
        self.name
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut Pkts, v: &mut [Verdict]) {
        v.fill(Verdict::Flood);
    }
    fn command(
        &self,
        cmd: &str,
        _: &serde_json::Value,
    ) -> Result<serde_json::Value, fabric::CommandError> {
        match cmd {
            "id" => Ok(self.id.into()),
            _ => Err(fabric::CommandError(format!("no command {cmd:?}"))),
        }
    }
}

impl Drop for Marked {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
    }
}

fn marked(name: &'static str, id: u32) -> (Box<Marked>, Arc<AtomicBool>) {
    let dropped = Arc::new(AtomicBool::new(false));
    (
        Box::new(Marked {
            name,
            id,
            dropped: dropped.clone(),
        }),
        dropped,
    )
}

fn running_id(sw: &Switch) -> (&'static str, u32) {
    sw.with_logic(|l| {
        let id = l
            .command("id", &serde_json::Value::Null)
            .ok()
            .and_then(|v| v.as_u64())
            .map_or(0, |v| v as u32);
        (l.name(), id)
    })
}

/// turnoutd's fail-standalone: a stand-in runs while the logic is parked
/// whole, the very instance comes back, and a logic replaced meanwhile is
/// not overridden by the parked one.
#[test]
fn parked_logic_comes_back_whole_unless_replaced_meanwhile() {
    let (tables, tables_dropped) = marked("flows", 7);
    let sw = Switch::new(SwitchConfig::default(), tables).unwrap();
    let (a, _pa) = pipe("a", PipeConfig::default()).unwrap();
    sw.add_port("a", Arc::new(a), None).unwrap();

    let (bridge, bridge_dropped) = marked("bridge", 1);
    let (parked, synced) = sw.park_logic(bridge);
    synced.expect("workers take the stand-in");
    assert_eq!(parked.name(), "flows");
    assert_eq!(running_id(&sw), ("bridge", 1));
    assert!(
        !tables_dropped.load(Ordering::SeqCst),
        "parked, not dropped"
    );
    assert!(sw.restore_logic(parked).expect("restored"));
    assert_eq!(running_id(&sw), ("flows", 7), "the same instance is back");
    assert!(
        bridge_dropped.load(Ordering::SeqCst),
        "the stand-in is gone"
    );
    assert!(!tables_dropped.load(Ordering::SeqCst));

    // Replaced while parked: the replacement stays, the parked one goes.
    let (bridge, _) = marked("bridge", 2);
    let (parked, synced) = sw.park_logic(bridge);
    synced.unwrap();
    let (other, other_dropped) = marked("patch", 3);
    sw.replace_logic(other).unwrap();
    assert!(!sw.restore_logic(parked).expect("nothing to sync"));
    assert_eq!(running_id(&sw), ("patch", 3));
    assert!(
        tables_dropped.load(Ordering::SeqCst),
        "the parked tables are dropped"
    );
    assert!(!other_dropped.load(Ordering::SeqCst));
    sw.shutdown();
}

/// A receive queue without a notification fd: polled, never armed.
struct Deaf(Box<dyn RxQueue>);

impl RxQueue for Deaf {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        self.0.burst(batch)
    }
    fn release(&mut self) {
        self.0.release()
    }
    fn notify_fd(&self) -> Option<RawFd> {
        None
    }
    fn fill_level(&self) -> Option<(u32, u32)> {
        self.0.fill_level()
    }
}

/// A pipe port whose receive queue is [`Deaf`].
struct DeafPort(PipePort);

impl Port for DeafPort {
    fn info(&self) -> PortInfo {
        self.0.info()
    }
    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        Some(Box::new(Deaf(self.0.take_rx(q)?)))
    }
    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        self.0.tx(q)
    }
}

#[test]
fn stats_say_what_contention_is_judged_on() {
    // The prober reads the worker's scheduler account (schedstat) and the
    // worker judges its poll epochs on it too: once one epoch (64 poll
    // probes, 20 ms apart while it is awake) is over, its stats say
    // `run_queue_wait` on a kernel that accounts run-queue wait, and keep
    // saying `late_polls` (the rule without it) on one that does not. A
    // frame every 200 µs keeps the worker awake (budget 0: it polls, and
    // sleeps only after 1 ms without frames).
    let sw = adaptive_budget_0();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, _pd) = pipe("d", PipeConfig::default()).unwrap();
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    let accounted = fabric::sys::SchedStatFile::open(fabric::sys::gettid())
        .and_then(|f| f.read())
        .is_some();
    let policy = || sw.worker_stats()[0].policy;
    let start = Instant::now();
    let deadline = start + Duration::from_secs(60);
    loop {
        let p = policy();
        if p.contention_signal == fabric::wakeup::Evidence::RunQueueWait {
            assert!(accounted, "{p:?}");
            assert!(p.rq_wait_permille <= 1_000, "{p:?}");
            break;
        }
        if !accounted && start.elapsed() > Duration::from_secs(5) {
            break;
        }
        assert!(Instant::now() < deadline, "no epoch judged: {p:?}");
        if (p.wake_samples as usize) < fabric::wakeup::MIN_SAMPLES {
            // An epoch is judged only once the worker has measured its
            // wake-ups, which takes sleeps: on a loaded machine a start-up
            // sample can be lost (15 of 16 in a CI run) and a worker kept
            // awake would never get the last. A pause longer than its
            // sleep-after lets it sleep and the prober wake it.
            std::thread::sleep(Duration::from_nanos(p.sleep_after_ns) * 2);
        }
        // (d is never read: its ring fills and the rest are tx_full drops)
        ps.send(0, &[&frame()]);
        std::thread::sleep(Duration::from_micros(200));
    }
    sw.shutdown();
}

#[test]
fn the_back_off_of_a_queue_without_notifications_is_idle_time() {
    // A queue without notifications cannot be armed: once every queue has
    // idled, the worker backs off with 50 µs sleeps between polls. Those
    // are idle time: the pass that then moves a frame is charged its own
    // cycles only (it used to be charged the sleep and its wake-up too,
    // ≥ 50 µs a frame). The median over frames sent one at a time after
    // an idle spell, so a preempted pass on a busy host cannot decide it.
    let sw = adaptive();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    sw.add_port("s", Arc::new(DeafPort(s)), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    let stats = || worker0(&sw);
    let mut busy = Vec::new();
    let mut backoffs = 0;
    for _ in 0..15 {
        // idle long enough for the worker to back off: its sleep-after
        // time (1 ms, or the wake-up p99 if longer) three times over
        let idle = stats();
        let after_ns = idle.policy.sleep_after_ns.max(1_000_000);
        std::thread::sleep(Duration::from_nanos(3 * after_ns).max(Duration::from_millis(5)));
        // On a busy host the worker may not have run through its idle
        // spell yet: wait until it has backed off (the event, not the
        // time). Whether its next sleep is still under way when the frame
        // comes is up to the scheduler, so that is not asserted.
        wait_for("a back-off", Duration::from_secs(10), || {
            stats().backoffs > idle.backoffs
        });
        let before = stats();
        assert_eq!(ps.send(0, &[&frame()]), 1);
        wait_for("the frame at d", Duration::from_secs(5), || {
            pd.recv(0, 8, |_| {}) > 0
        });
        wait_for("the frame counted", Duration::from_secs(5), || {
            stats().packets > before.packets
        });
        let now = stats();
        // the back-offs of the idle spell are time asleep
        assert!(
            now.asleep_ns > idle.asleep_ns,
            "back-offs not asleep: {now:?}"
        );
        backoffs = now.backoffs;
        busy.push(now.busy_ns - before.busy_ns);
    }
    // A queue without notifications is still backed off from (counted).
    assert!(backoffs > 0, "no back-off counted");
    busy.sort_unstable();
    let median = busy[busy.len() / 2];
    assert!(
        median < 40_000,
        "a one-frame pass after a back-off charged {median} ns busy (all: {busy:?})"
    );
    sw.shutdown();
}

#[test]
fn a_reset_under_traffic_is_never_undone_and_counting_goes_on_from_zero() {
    // The receive counters and the worker's own are written by the worker
    // alone with plain stores, the transmit counters under their queue's
    // lock: `reset_stats` has the worker zero the first itself and zeroes
    // the others under the lock, so no batch in flight writes back a
    // count from before the reset, and the counts after it are the frames
    // after it, exactly.
    let sw = switch_with(SwitchConfig {
        wakeup: WakeupMode::Poll,
        ..SwitchConfig::default()
    });
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    let f = frame();
    let four = [&f[..]; 4];
    let port = |name: &str| {
        sw.port_stats()
            .into_iter()
            .find(|p| p.name == name)
            .expect("port")
    };
    let worker = || {
        sw.worker_stats()
            .into_iter()
            .find(|w| w.id == 0)
            .expect("worker 0")
    };
    for round in 0..30 {
        // Nothing in flight: every count is 0 after a reset ...
        sw.reset_stats();
        let (s0, d0, w0) = (port("s"), port("d"), worker());
        assert_eq!(
            (
                s0.rx_packets,
                s0.rx_bytes,
                d0.tx_packets,
                d0.tx_bytes,
                w0.packets,
                w0.batches
            ),
            (0, 0, 0, 0, 0, 0),
            "round {round}: not zero after a reset"
        );
        // ... and the frames after it, exactly.
        let mut sent = 0u64;
        while sent < 512 {
            sent += ps.send(0, &four) as u64;
            pd.recv(0, usize::MAX, |_| {});
        }
        let b = sent * f.len() as u64;
        wait_for("every frame counted", Duration::from_secs(10), || {
            pd.recv(0, usize::MAX, |_| {});
            let (s, d, w) = (port("s"), port("d"), worker());
            (
                s.rx_packets,
                s.rx_bytes,
                d.tx_packets,
                d.tx_bytes,
                w.packets,
            ) == (sent, b, sent, b, sent)
        });
        // A few more, and a reset while the worker forwards them: from
        // its return on, no count from before it (>= 512) comes back.
        let more = ps.send(0, &four) as u64;
        sw.reset_stats();
        let mut got = 0u64;
        let deadline = Instant::now() + Duration::from_secs(10);
        while got < more {
            assert!(
                Instant::now() < deadline,
                "round {round}: {got} of {more} frames at d"
            );
            got += pd.recv(0, usize::MAX, |_| {}) as u64;
            let (s1, d1, w1) = (port("s"), port("d"), worker());
            assert!(
                s1.rx_packets <= more && d1.tx_packets <= more && w1.packets <= more,
                "round {round}: after a reset under traffic, more than the {more} \
                 frames sent around it: port s {s1:?}, port d {d1:?}, worker {} packets",
                w1.packets
            );
        }
        assert!(port("s").drops.is_empty() && port("d").drops.is_empty());
    }
    sw.shutdown();
}

/// What a worker opens for its whole life (its scheduler account, read by
/// its prober) is open when `Switch::new` returns: a running switch's
/// descriptors do not change later unless ports come and go.
#[test]
fn a_new_switch_has_opened_what_its_workers_hold() {
    let sw = adaptive();
    let tids: Vec<i32> = sw.worker_stats().iter().map(|w| w.tid).collect();
    assert!(tids.iter().all(|t| *t != 0), "worker thread ids: {tids:?}");
    if std::fs::metadata("/proc/self/schedstat").is_err() {
        return; // a kernel without scheduler statistics: nothing to open
    }
    let open: Vec<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .map(|p| p.display().to_string())
        .collect();
    for tid in tids {
        let want = format!("/task/{tid}/schedstat");
        assert!(
            open.iter().any(|p| p.ends_with(&want)),
            "no {want} in {open:?}"
        );
    }
}

/// A pipe receive queue that can peek at its ring, watched through `fd`:
/// an eventfd nobody ever signals (the worker can find its frames only by
/// peeking), or a dup of the pipe's own eventfd; `asleep_only` is its
/// answer to `watch_only_asleep`.
struct Peekable {
    inner: Box<dyn RxQueue>,
    fd: OwnedFd,
    asleep_only: bool,
}

impl RxQueue for Peekable {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        self.inner.burst(batch)
    }
    fn release(&mut self) {
        self.inner.release()
    }
    fn notify_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }
    fn set_notify(&mut self, enabled: bool) -> bool {
        self.inner.set_notify(enabled)
    }
    fn ack_notify(&mut self) {
        self.inner.ack_notify()
    }
    fn peek(&self) -> Option<bool> {
        self.inner.peek()
    }
    fn watch_only_asleep(&self) -> bool {
        self.asleep_only
    }
}

/// A pipe port whose queue is a [`Peekable`]: with `asleep_only`, watched
/// through a dup of the pipe's eventfd (its number left in `fd`), else
/// through a silent eventfd.
struct PeekablePort {
    pipe: PipePort,
    asleep_only: bool,
    fd: Arc<AtomicI32>,
}

impl PeekablePort {
    fn new(pipe: PipePort, asleep_only: bool) -> (Self, Arc<AtomicI32>) {
        let fd = Arc::new(AtomicI32::new(-1));
        (
            Self {
                pipe,
                asleep_only,
                fd: fd.clone(),
            },
            fd,
        )
    }
}

impl Port for PeekablePort {
    fn info(&self) -> PortInfo {
        self.pipe.info()
    }
    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let inner = self.pipe.take_rx(q)?;
        let fd = if self.asleep_only {
            // SAFETY: dup of a valid fd; the result is owned below.
            unsafe { libc::dup(inner.notify_fd()?) }
        } else {
            // SAFETY: plain syscall; the result is owned below.
            unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) }
        };
        assert!(fd >= 0);
        self.fd.store(fd, Ordering::SeqCst);
        Some(Box::new(Peekable {
            inner,
            // SAFETY: a fresh descriptor nobody else owns.
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
            asleep_only: self.asleep_only,
        }))
    }
    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        self.pipe.tx(q)
    }
}

/// Ports "b" (a plain pipe, to keep the worker busy), "s" (a
/// [`PeekablePort`]) and "d" on `sw`: their peers, and where the number of
/// s's notification fd will be.
fn busy_peekable_sink(
    sw: &Switch,
    asleep_only: bool,
) -> (PipePeer, PipePeer, PipePeer, Arc<AtomicI32>) {
    let (b, pb) = pipe("b", PipeConfig::default()).unwrap();
    let (s, ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, pd) = pipe("d", PipeConfig::default()).unwrap();
    let (s, fd) = PeekablePort::new(s, asleep_only);
    sw.add_port("b", Arc::new(b), Some(0)).unwrap();
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    (pb, ps, pd, fd)
}

/// A thread that floods a pipe peer with frames until stopped.
struct Feeder {
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
}

impl Feeder {
    fn start(mut pb: PipePeer) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let f = frame();
                while !stop.load(Ordering::Relaxed) {
                    pb.send(0, &[f.as_slice(); 8]);
                    std::thread::yield_now();
                }
            })
        };
        Self { stop, thread }
    }

    fn stop(self) {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap();
    }
}

#[test]
fn an_armed_queue_is_found_by_its_ring_while_another_keeps_the_worker_busy() {
    // "s" idles until the worker arms it; then "b" keeps the worker busy
    // (it never sleeps, so no epoll wait would return for "s"), and "s"'s
    // notification fd never fires: its frame gets through only if the
    // worker's looks at armed queues read its ring.
    let sw = adaptive();
    let (pb, mut ps, mut pd, _) = busy_peekable_sink(&sw, false);
    std::thread::sleep(Duration::from_millis(300));
    let feeder = Feeder::start(pb);
    // The busy port's floods reach "d" too: drain it, looking for the one
    // frame "s" sends (marked by its source MAC's last byte), until the
    // switch has received it from "s" — the event checked. "d" may have
    // dropped it (tx_full, counted): the flood fills its ring whenever
    // this thread is off its CPU.
    std::thread::sleep(Duration::from_millis(100));
    let mut mine = frame();
    mine[11] ^= 0x5a;
    assert_eq!(ps.send(0, &[&mine]), 1);
    let rx_of = |name: &str| {
        sw.port_stats()
            .into_iter()
            .find(|p| p.name == name)
            .map_or(0, |p| p.rx_packets)
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut found = false;
    let mut taken = false;
    while !taken && Instant::now() < deadline {
        pd.recv(0, 256, |f| found |= f == &mine[..]);
        taken = rx_of("s") == 1;
    }
    let t = Instant::now();
    while !found && t.elapsed() < Duration::from_millis(100) {
        pd.recv(0, 256, |f| found |= f == &mine[..]);
    }
    feeder.stop();
    let stats = sw.port_stats();
    assert!(
        taken,
        "an armed queue was not looked at while the worker was busy: {stats:?}"
    );
    let d_full = stats
        .iter()
        .find(|p| p.name == "d")
        .and_then(|p| p.drops.iter().find(|(r, _)| *r == "tx_full"))
        .map_or(0, |(_, n)| *n);
    assert!(
        found || d_full > 0,
        "the frame from \"s\" neither reached \"d\" nor was counted: {stats:?}"
    );
    sw.shutdown();
}

#[test]
fn frames_whose_kick_never_came_wait_for_the_sleep_not_for_ever() {
    // "s" is armed and the worker asleep; its frame comes without a kick
    // (the peer read our flag before its index store was visible, as
    // DPDK's memif transmit may). Nothing else moves: the frame gets
    // through only if the worker looks at the armed rings when a sleep
    // ends without their notification, and that look is counted.
    let sw = adaptive();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    let (s, _fd) = PeekablePort::new(s, false);
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    // Two sleeps begun after both ports were in: both queues armed.
    let first = worker0(&sw).sleeps;
    wait_for("the worker asleep", Duration::from_secs(10), || {
        worker0(&sw).sleeps >= first + 2
    });
    let before = worker0(&sw).missed_kicks;
    assert_eq!(ps.send(0, &[&frame()]), 1);
    let mut got = 0;
    wait_for("the unkicked frame at d", Duration::from_secs(5), || {
        got += pd.recv(0, 8, |_| {});
        got > 0
    });
    assert!(worker0(&sw).missed_kicks > before, "{:?}", worker0(&sw));
    sw.shutdown();
}

#[test]
fn a_bad_switch_config_is_refused_with_its_reason() {
    let bad = |cfg: SwitchConfig, what: &str| {
        let (logic, _, _) = gate(true);
        match Switch::new(cfg, logic) {
            Err(SwitchError::BadConfig(why)) => assert!(why.contains(what), "{why}"),
            Err(e) => panic!("{what}: {e:?}"),
            Ok(_) => panic!("{what}: accepted"),
        }
    };
    bad(
        SwitchConfig {
            control_timeout: Duration::ZERO,
            ..SwitchConfig::default()
        },
        "control_timeout",
    );
    bad(
        SwitchConfig {
            max_ports: 1,
            ..SwitchConfig::default()
        },
        "max_ports",
    );
    bad(
        SwitchConfig {
            workers: vec![],
            ..SwitchConfig::default()
        },
        "worker",
    );
}

/// The state a [`Stateful`] logic makes per worker: which logic made it,
/// its number among that logic's, and the batches classified with it.
struct St {
    logic: u32,
    n: u32,
    batches: u64,
}

/// A batch a [`Stateful`] logic saw: the logic, and the state it was
/// handed (its logic, number, batches so far), if any.
type Seen = (u32, Option<(u32, u32, u64)>);

/// Floods; makes a state per worker ([`St`]) and records, per batch, the
/// state it was handed, or that it had none ([`Seen`]).
struct Stateful {
    id: u32,
    made: Arc<std::sync::atomic::AtomicU32>,
    seen: Arc<std::sync::Mutex<Vec<Seen>>>,
}

impl Logic for Stateful {
    fn name(&self) -> &'static str {
        "stateful"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut Pkts, v: &mut [Verdict]) {
        self.seen.lock().unwrap().push((self.id, None));
        v.fill(Verdict::Flood);
    }
    fn worker_state(&self) -> Option<fabric::WorkerState> {
        let n = self.made.fetch_add(1, Ordering::SeqCst);
        Some(Box::new(St {
            logic: self.id,
            n,
            batches: 0,
        }))
    }
    fn classify_with(
        &self,
        st: &mut (dyn std::any::Any + Send),
        _: &Ctx,
        _: PortId,
        _: &mut Pkts,
        v: &mut [Verdict],
    ) {
        let st = st
            .downcast_mut::<St>()
            .expect("a state of this logic's type");
        st.batches += 1;
        self.seen
            .lock()
            .unwrap()
            .push((self.id, Some((st.logic, st.n, st.batches))));
        v.fill(Verdict::Flood);
    }
}

/// Each worker classifies with a state the running logic made for it when
/// it was installed: one per worker, kept across batches; a swap (replace,
/// park, restore) hands every worker the new logic's states.
#[test]
fn a_logic_swap_hands_workers_the_new_logics_states() {
    use std::sync::atomic::AtomicU32;
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stateful = |id: u32| {
        let made = Arc::new(AtomicU32::new(0));
        let l = Box::new(Stateful {
            id,
            made: made.clone(),
            seen: seen.clone(),
        });
        (l, made)
    };
    let cfg = SwitchConfig {
        workers: vec![None, None],
        ..SwitchConfig::default()
    };
    let (one, made1) = stateful(1);
    let sw = Switch::new(cfg, one).unwrap();
    assert_eq!(made1.load(Ordering::SeqCst), 2, "one state per worker");
    let (a, mut pa) = pipe("a", PipeConfig::default()).unwrap();
    let (b, mut pb) = pipe("b", PipeConfig::default()).unwrap();
    sw.add_port("a", Arc::new(a), Some(0)).unwrap();
    sw.add_port("b", Arc::new(b), Some(1)).unwrap();
    // Batches from both ports (one per worker) until `logic` saw `n` of
    // them; then what it saw.
    let traffic = |pa: &mut PipePeer, pb: &mut PipePeer, logic: u32, n: usize| {
        wait_for("batches", Duration::from_secs(10), || {
            pa.send(0, &[&frame()]);
            pb.send(0, &[&frame()]);
            pa.recv(0, 64, |_| {});
            pb.recv(0, 64, |_| {});
            let s = seen.lock().unwrap();
            s.iter().filter(|(l, _)| *l == logic).count() >= n
        });
        let mut s = seen.lock().unwrap();
        std::mem::take(&mut *s)
    };
    let check = |got: &[Seen], logic: u32| {
        let mine: Vec<(u32, u64)> = got
            .iter()
            .filter(|(l, _)| *l == logic)
            .map(|(l, st)| {
                let (sl, n, b) = st.unwrap_or_else(|| panic!("logic {l}: a batch without state"));
                assert_eq!(sl, logic, "logic {logic} handed a state of logic {sl}");
                (n, b)
            })
            .collect();
        // Both workers' states, each kept across batches (its count goes
        // on 1, 2, 3... by itself).
        for w in 0..2 {
            let b: Vec<u64> = mine.iter().filter(|(n, _)| *n == w).map(|x| x.1).collect();
            assert!(b.len() >= 2, "state {w} of logic {logic}: {b:?}");
            assert!(b.windows(2).all(|x| x[1] == x[0] + 1), "{b:?}");
        }
    };
    check(&traffic(&mut pa, &mut pb, 1, 8), 1);

    let (two, made2) = stateful(2);
    sw.replace_logic(two).unwrap();
    assert_eq!(made2.load(Ordering::SeqCst), 2);
    seen.lock().unwrap().clear();
    check(&traffic(&mut pa, &mut pb, 2, 8), 2);

    // Parked and restored: the stand-in's states, then new ones of the
    // restored logic (its workers dropped the old ones when it left).
    let (three, made3) = stateful(3);
    let (parked, synced) = sw.park_logic(three);
    synced.unwrap();
    assert_eq!(made3.load(Ordering::SeqCst), 2);
    seen.lock().unwrap().clear();
    check(&traffic(&mut pa, &mut pb, 3, 8), 3);
    assert!(sw.restore_logic(parked).unwrap());
    assert_eq!(
        made2.load(Ordering::SeqCst),
        4,
        "new states for the restored logic"
    );
    seen.lock().unwrap().clear();
    let got = traffic(&mut pa, &mut pb, 2, 8);
    for (_, st) in got.iter().filter(|(l, _)| *l == 2) {
        let (_, n, _) = st.unwrap();
        assert!(
            n >= 2,
            "a state made at the restore, not one of before: {n}"
        );
    }
    // The control path's single frame has no worker: plain `classify`.
    let mut f = frame();
    f[..6].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    sw.classify_one(0, &mut f);
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .any(|(l, st)| *l == 2 && st.is_none()));
    sw.shutdown();
}

/// Whether some epoll set of this process watches `fd` (its fdinfo lists
/// every watched descriptor as `tfd: N`).
fn watched_by_an_epoll(fd: RawFd) -> bool {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    dir.flatten().any(|e| {
        let is_epoll = std::fs::read_link(e.path())
            .is_ok_and(|l| l.to_string_lossy() == "anon_inode:[eventpoll]");
        is_epoll
            && std::fs::read_to_string(format!(
                "/proc/self/fdinfo/{}",
                e.file_name().to_string_lossy()
            ))
            .is_ok_and(|info| {
                info.lines().any(|l| {
                    let mut w = l.split_whitespace();
                    w.next() == Some("tfd:") && w.next() == Some(fd.to_string().as_str())
                })
            })
    })
}

#[test]
fn a_queue_watched_only_asleep_leaves_epoll_while_the_worker_is_awake() {
    // "s" asks to be in the worker's epoll set only for sleeps (an XDP
    // socket: its wait queue is called for every frame its transmit side
    // completes). While "b" keeps the worker awake, no epoll set may watch
    // s's fd (it used to be in the set from the moment it was added);
    // once all is idle and the worker sleeps, it must be watched, and a
    // frame on "s" must wake the worker and get through.
    let sw = adaptive();
    let (pb, mut ps, mut pd, fd) = busy_peekable_sink(&sw, true);
    let feeder = Feeder::start(pb);
    wait_for("the worker took s's queue", Duration::from_secs(5), || {
        fd.load(Ordering::SeqCst) >= 0
    });
    let fd = fd.load(Ordering::SeqCst);
    // The worker may sleep now and then when the feeder is off its CPU:
    // what is checked is that, awake, it does not keep s's fd watched.
    wait_for(
        "s's fd out of every epoll set while the worker is busy",
        Duration::from_secs(5),
        || {
            pd.recv(0, 256, |_| {});
            !watched_by_an_epoll(fd)
        },
    );
    feeder.stop();
    wait_for(
        "s's fd watched while the idle worker sleeps",
        Duration::from_secs(10),
        || {
            pd.recv(0, 256, |_| {});
            watched_by_an_epoll(fd)
        },
    );
    let mut mine = frame();
    mine[11] ^= 0x5a;
    assert_eq!(ps.send(0, &[&mine]), 1);
    let mut found = false;
    wait_for("s's frame at d", Duration::from_secs(5), || {
        pd.recv(0, 256, |f| found |= f == &mine[..]);
        found
    });
    sw.shutdown();
}

#[test]
fn kicks_are_counted_within_the_busy_cycles() {
    // A peer that asks to be notified is kicked (an eventfd write, a system
    // call) after each batch the worker sends it: those cycles are counted
    // apart in kick_cycles, as part of busy_cycles, never more. A peer that
    // does not ask is not kicked: no kick cycles.
    let sw = adaptive_budget_0();
    let (s, mut ps) = pipe("s", PipeConfig::default()).unwrap();
    let (d, mut pd) = pipe("d", PipeConfig::default()).unwrap();
    sw.add_port("s", Arc::new(s), Some(0)).unwrap();
    sw.add_port("d", Arc::new(d), Some(0)).unwrap();
    let stats = || worker0(&sw);
    let send_and_take = |ps: &mut PipePeer, pd: &mut PipePeer, n: usize| {
        let mut got = 0;
        for _ in 0..n {
            assert_eq!(ps.send(0, &[&frame()]), 1);
            wait_for("the frame at d", Duration::from_secs(5), || {
                got += pd.recv(0, 8, |_| {});
                got > 0
            });
            got = 0;
        }
    };
    send_and_take(&mut ps, &mut pd, 20);
    let quiet = stats();
    assert!(quiet.packets >= 20 && quiet.busy_cycles > 0);
    assert_eq!(quiet.kick_cycles, 0, "{quiet:?}");
    // d asks to be notified: every frame is kicked to it
    pd.set_notify(0, true);
    send_and_take(&mut ps, &mut pd, 20);
    let after = stats();
    let (busy, kicks) = (
        after.busy_cycles - quiet.busy_cycles,
        after.kick_cycles - quiet.kick_cycles,
    );
    assert!(kicks > 0 && kicks <= busy, "kicks {kicks} of busy {busy}");
    sw.shutdown();
}
