//! The worker loop: receive a burst, drop runts, classify, forward,
//! release; and the wake-up model (docs/architecture.md, "Wake-up").
//!
//! - `Poll`: every owned receive queue is polled on every iteration; the
//!   worker never sleeps (what DPDK-style switches do).
//! - `Adaptive` (default): the policy of [`crate::wakeup`] with the
//!   worker's latency budget, in one of its regimes. A queue that stayed
//!   empty for the policy's spin time is *armed* — its notifications are
//!   enabled, with the re-check that prevents a lost wake-up — and no
//!   longer polled: one at a time in the regimes where a wake-up fits in
//!   the budget, all at once when the whole worker idled that long in the
//!   poll regime (an armed queue is only looked at now and then, which
//!   would hold its first frame back). Armed queues are watched through
//!   epoll (looked at without waiting every `EPOLL_EVERY` iterations, and
//!   at least every half budget, while other queues are busy: a look reads
//!   the rings of queues whose backend can tell, [`RxQueue::peek`], and
//!   asks epoll only for the others; a queue whose backend asks for it,
//!   [`RxQueue::watch_only_asleep`], is in the epoll set only during a
//!   sleep). When every
//!   queue is armed the worker sleeps in epoll; a queue whose fd fires is
//!   disarmed and polled again. In the moderate regime it naps after each
//!   batch; in the poll and interrupt regimes it may spin for a *gap*
//!   after a small batch of a dense flow
//!   ([`crate::wakeup::Policy::gap_for`]: no system call, counted as idle
//!   time, `gaps` in its counters) so the next batch is bigger. Every
//!   sleep's CPU cost is measured and fed back to the policy,
//!   with the naps' overshoot, each queue's arrival rate and ring level
//!   ([`RxQueue::fill_level`]), and the wake-up latency its prober measures.
//! - The prober ([`probe`], a thread of its own started with the worker):
//!   signals an eventfd in the worker's epoll set while the worker sleeps,
//!   with the time it did, so the worker measures what a wake-up costs on
//!   this host: [`CALIBRATION_PROBES`] at start, then one every
//!   [`WAKE_PROBE_EVERY_NS`] while it sleeps; while it is awake, a time it
//!   clears at its next pass every [`POLL_PROBE_EVERY_NS`] (what polling
//!   costs a frame when other threads hold its CPU). With each probe it
//!   also reads the worker's scheduler account (run-queue wait, where the
//!   kernel keeps one), so the worker tells other threads holding its CPU
//!   from a hypervisor holding the virtual CPU without a system call.
//!
//! Every busy pass also feeds the worker's [`crate::copymode`] chooser
//! (its cycles, frames and the thread's large copies per kind of peer),
//! which sets the way this thread copies large frames into memif and
//! vhost-user buffers ([`crate::sys::streams`]).
//!
//! Commands from the control plane (add a receive queue, remove a port,
//! stop) are picked up between batches.
//!
//! Per-worker state of the logic ([`crate::Logic::worker_state`]): made on
//! the control path with the [`LogicSlot`], one per worker; a worker takes
//! its own out of the slot the first time it sees that slot (told by the
//! slot's generation, never by its address: a freed slot's address may
//! come back for the next), keeps it, and classifies with it
//! ([`crate::Logic::classify_with`]) until the logic changes.
//!
//! A transmit queue whose peer refused frames after they were published
//! (an AF_XDP or AF_PACKET kick the kernel refused: the veth peer's queue
//! was stopped until it polls) keeps them until someone kicks again. The
//! next publish there does; if none comes, the worker does
//! ([`Forwarder::retry_kicks`]): between batches after a wait that starts
//! at `KICK_RETRY_NS` and doubles while the peer keeps refusing, and
//! always before it sleeps, whose timeout it then shortens to that wait.

use std::sync::atomic::{
    AtomicBool, AtomicU64, Ordering::Acquire, Ordering::Relaxed, Ordering::Release,
};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::batch::RxBatch;
use crate::copymode::CopyChooser;
use crate::counters::WorkerCounters;
use crate::drop::DropReason;
use crate::fabric::{Forwarder, PortEntry, PortTable};
use crate::logic::{Ctx, Logic, Verdict, WorkerState};
use crate::port::{PortId, QueueId, RxQueue};
use crate::sys::{self, Epoll, EventFd};
use crate::wakeup::{probe_sample, Inflow, Next, Pass, Policy, Regime, SchedStat, Slept};

/// While some queues are busy, look at armed queues every this many loops
/// (and at least every half latency budget).
pub const EPOLL_EVERY: u32 = 64;
/// Wake-up probes at a worker's start (while it has no traffic: its first
/// tens of milliseconds), spaced 200 µs – 1 ms.
pub const CALIBRATION_PROBES: u32 = 64;
/// Then a wake probe this often while the worker sleeps (each costs it a
/// wake-up: 20 a second) ...
pub const WAKE_PROBE_EVERY_NS: u64 = 50_000_000;
/// ... and a poll probe this often while it is awake (a cache line for
/// the worker; for the prober a wake-up on another CPU, where the tester or
/// the peers run: 50 a second).
pub const POLL_PROBE_EVERY_NS: u64 = 20_000_000;
/// Longest sleep, so commands and link changes are seen (ms).
const SLEEP_MS: i32 = 100;
/// First wait before kicking again a transmit queue whose peer refused
/// frames (ns); it doubles while the peer keeps refusing, up to
/// `SLEEP_MS`.
const KICK_RETRY_NS: u64 = 20_000;
/// Ethernet header length: anything shorter is a runt.
pub const ETH_HDR_B: usize = 14;
/// Back-off when the only queues left are idle and have no notifications:
/// a sleep this long between polls (µs).
const BACKOFF_US: u64 = 50;

/// How a worker waits for packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum WakeupMode {
    /// Poll active queues, sleep on notifications when idle (default).
    Adaptive,
    /// Busy-poll everything, always.
    Poll,
}

/// Generations of [`LogicSlot`]s: one per slot made, never 0 (a worker
/// that has seen none yet holds 0).
static SLOT_GENERATION: AtomicU64 = AtomicU64::new(1);

/// Holder of the current logic, swapped atomically between batches, with
/// the logic's per-worker states ([`Logic::worker_state`]), made with it
/// on the control path.
pub struct LogicSlot {
    logic: Arc<dyn Logic>,
    /// Unique per slot: how a worker tells that the logic changed.
    gen: u64,
    /// Worker `w`'s state, until worker `w` takes it. Each lock is only
    /// ever taken by its worker, once (and by no one else once the slot is
    /// published): never contended.
    states: Box<[Mutex<Option<WorkerState>>]>,
}

impl LogicSlot {
    /// `logic`, with its states for workers `0..workers` (control path:
    /// the logic may allocate and map memory for them).
    pub fn new(logic: Arc<dyn Logic>, workers: usize) -> LogicSlot {
        let states = (0..workers)
            .map(|_| Mutex::new(logic.worker_state()))
            .collect();
        LogicSlot {
            logic,
            gen: SLOT_GENERATION.fetch_add(1, Relaxed),
            states,
        }
    }

    /// The logic.
    #[inline]
    pub fn logic(&self) -> &dyn Logic {
        &*self.logic
    }

    /// The logic, shared.
    pub fn logic_arc(&self) -> &Arc<dyn Logic> {
        &self.logic
    }

    /// The slot's generation (unique per slot).
    #[inline]
    pub fn generation(&self) -> u64 {
        self.gen
    }

    /// Worker `w`'s state, taken out of the slot (None after the first
    /// call, for a logic without state, or a worker beyond those the slot
    /// was made for).
    pub fn take_state(&self, w: u16) -> Option<WorkerState> {
        self.states.get(w as usize).and_then(|s| s.lock().take())
    }
}

/// A command for a worker.
pub enum WorkerCmd {
    /// Start receiving on this queue.
    AddRx {
        /// Port id.
        port: PortId,
        /// Queue id.
        queue: QueueId,
        /// The queue, now owned by the worker.
        rxq: Box<dyn RxQueue>,
    },
    /// Drop every receive queue of this port, then signal `done`.
    RemovePort {
        /// Port id.
        port: PortId,
        /// Set when done.
        done: Arc<AtomicBool>,
    },
    /// Zero the counters this worker alone writes (its own, and the
    /// receive counters of the queues it owns: plain stores, see
    /// [`bump`]), then signal `done` (`stats.reset`).
    ResetCounters {
        /// Set when done.
        done: Arc<AtomicBool>,
    },
    /// Leave the loop.
    Stop,
}

/// The control side's handle on a worker's command queue.
pub struct Mailbox {
    cmds: Mutex<Vec<WorkerCmd>>,
    pending: AtomicBool,
    wake: EventFd,
}

impl Mailbox {
    /// An empty mailbox.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            cmds: Mutex::new(Vec::new()),
            pending: AtomicBool::new(false),
            wake: EventFd::new()?,
        })
    }

    /// Wakes the worker if it sleeps (it then starts a new iteration).
    pub fn kick(&self) {
        self.wake.notify();
    }

    /// Queues a command and wakes the worker.
    pub fn post(&self, cmd: WorkerCmd) {
        self.cmds.lock().push(cmd);
        self.pending
            .store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify();
    }
}

struct RxSlot {
    port: PortId,
    queue: QueueId,
    rxq: Box<dyn RxQueue>,
    /// When this queue last had frames (or was disarmed), ns.
    last_rx_ns: u64,
    /// Its arrival rate, and how long its ring takes to fill at that rate
    /// from the level the last burst saw, ns.
    inflow: Inflow,
    fill_ns: u64,
    armed: bool,
    fd: Option<i32>,
    /// The fd is in the epoll set only during a sleep
    /// ([`RxQueue::watch_only_asleep`]); `watched` says whether it is now.
    asleep_only: bool,
    watched: bool,
    /// Its epoll token: unique for the worker's life and never re-registered,
    /// so removing another port cannot leave this queue deaf.
    token: u64,
}

impl RxSlot {
    /// An armed queue the peer notified (its fd fired, or its ring showed
    /// frames): notifications off, polled from the next pass on, its idle
    /// clock restarted.
    fn disarm(&mut self, now_ns: u64) {
        self.rxq.set_notify(false);
        self.armed = false;
        self.last_rx_ns = now_ns;
    }
}

/// The worker's side of its prober: an eventfd in the worker's epoll set,
/// when the prober last signalled it, when the worker went to sleep, and
/// the poll probe (a time the awake worker clears when it sees it).
pub struct Probe {
    fd: EventFd,
    stamp_ns: AtomicU64,
    poll_stamp_ns: AtomicU64,
    /// When the worker went to sleep in epoll; 0 while it is awake.
    asleep_since_ns: AtomicU64,
    /// The worker's scheduler account as the prober last read it
    /// ([`crate::wakeup::SchedStat`]; run 0: none). Written before the poll
    /// mark, read by the worker when it takes the mark.
    sched_run_ns: AtomicU64,
    sched_wait_ns: AtomicU64,
    /// The worker's scheduler account file, opened by the worker thread as
    /// it starts (before the switch's constructor returns, so a running
    /// turnoutd's descriptors do not change later), else by the prober.
    sched: std::sync::OnceLock<sys::SchedStatFile>,
    stop: AtomicBool,
}

impl Probe {
    /// A probe for a new worker.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            fd: EventFd::new()?,
            stamp_ns: AtomicU64::new(0),
            poll_stamp_ns: AtomicU64::new(0),
            asleep_since_ns: AtomicU64::new(0),
            sched_run_ns: AtomicU64::new(0),
            sched_wait_ns: AtomicU64::new(0),
            sched: std::sync::OnceLock::new(),
            stop: AtomicBool::new(false),
        })
    }

    /// Opens the scheduler account of thread `tid` for the prober (once;
    /// nothing where the kernel keeps none).
    pub fn open_sched(&self, tid: i32) {
        if self.sched.get().is_none() {
            if let Some(f) = sys::SchedStatFile::open(tid) {
                let _ = self.sched.set(f);
            }
        }
    }

    /// Tells the prober to end (then unpark its thread).
    pub fn stop(&self) {
        self.stop.store(true, Release);
    }
}

/// Everything a worker thread needs, shared with the switch.
pub struct WorkerShared {
    /// Worker index.
    pub id: u16,
    /// Its counters.
    pub counters: WorkerCounters,
    /// Its commands.
    pub mailbox: Mailbox,
    /// Linux thread id once running (for CPU accounting), else 0.
    pub tid: std::sync::atomic::AtomicI32,
    /// Bumped at the top of every loop iteration, before commands are read
    /// and the port table and logic are loaded: once it has moved past a
    /// value read after a change, the worker sees the change.
    pub epoch: std::sync::atomic::AtomicU64,
    /// Its wake-up prober's side.
    pub probe: Probe,
}

/// The prober of one adaptive worker. While the worker sleeps in epoll,
/// it notes the time and signals the worker's probe eventfd, so the worker
/// measures its own wake-up latency on this host (from another thread's
/// signal to running again, what a peer's kick costs a frame): the *wake
/// probe*. While the worker is awake it notes the time in a word the
/// worker clears at its next pass: the *poll probe*, what a frame waits
/// for a polling worker (a pass, or the time other threads hold its CPU).
/// `CALIBRATION_PROBES` probes 200 µs – 1 ms apart first (wake probes:
/// the worker has no ports yet and sleeps), then a wake probe every
/// `WAKE_PROBE_EVERY_NS` while the worker sleeps and a poll probe every
/// `POLL_PROBE_EVERY_NS` while it is awake. A wake probe costs the worker
/// a wake-up, a poll probe one cache line; an idle worker and its prober
/// wake 20 times a second. Before each probe it reads the worker's
/// scheduler account (`/proc/self/task/TID/schedstat`, opened once, read
/// with `pread`) into [`Probe`], where the worker takes it with the poll
/// mark: its run-queue wait tells the policy whether late poll samples
/// were other threads of this system holding its CPU
/// ([`crate::wakeup::RQ_WAIT_PERMILLE`]). Runs on the threads' CPUs, not
/// the worker's (the caller starts it before the worker pins itself). Ends
/// when [`Probe::stop`] was called and the thread unparked.
pub fn probe(shared: Arc<WorkerShared>) {
    let p = &shared.probe;
    let mut sent = 0u32;
    // The worker's schedstat: the worker opened it as it started; if it
    // has not (the switch stopped waiting for it), once its thread id is
    // known (tried once: a kernel without it keeps the late-sample rule
    // alone).
    let mut sched_tried = false;
    // Pseudo-random gaps, so the probes keep no step with any timer.
    let mut x = sys::now_ns() | 1;
    while !p.stop.load(Acquire) {
        let gap_ns = if sent < CALIBRATION_PROBES {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            200_000 + x % 800_000
        } else if p.asleep_since_ns.load(Acquire) != 0 {
            WAKE_PROBE_EVERY_NS
        } else {
            POLL_PROBE_EVERY_NS
        };
        std::thread::park_timeout(std::time::Duration::from_nanos(gap_ns));
        if p.stop.load(Acquire) {
            break;
        }
        if !sched_tried {
            let tid = shared.tid.load(Relaxed);
            if tid != 0 {
                p.open_sched(tid);
                sched_tried = true;
            }
        }
        if let Some(s) = p.sched.get().and_then(|f| f.read()) {
            p.sched_run_ns.store(s.run_ns, Relaxed);
            p.sched_wait_ns.store(s.wait_ns, Relaxed);
        }
        if p.asleep_since_ns.load(Acquire) != 0 {
            p.stamp_ns.store(sys::now_ns(), Release);
            p.fd.notify();
        } else if p.poll_stamp_ns.load(Relaxed) == 0 {
            p.poll_stamp_ns.store(sys::now_ns(), Release);
        }
        sent = sent.saturating_add(1);
    }
}

/// Runs the worker loop until a `Stop` command: each iteration takes the
/// control commands, makes one pass over the unarmed queues, charges its
/// cycles, and then (adaptive mode) lets the wake-up policy choose between
/// polling on, a gap, a nap, a back-off, a look at the armed queues and a
/// sleep on their notifications.
pub fn run(
    shared: Arc<WorkerShared>,
    table: Arc<ArcSwap<PortTable>>,
    logic: Arc<ArcSwap<LogicSlot>>,
    batch_cap: usize,
    mode: WakeupMode,
    budget_us: u32,
) {
    shared.tid.store(sys::gettid(), Relaxed);
    let mut w = Worker::new(shared, table, logic, batch_cap, mode, budget_us);
    loop {
        w.shared
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        if w.shared.mailbox.pending.load(Acquire) && !w.take_commands() {
            return;
        }
        let pass = w.poll_pass();
        w.charge_pass(&pass);
        if w.adaptive {
            w.wait_or_poll_on(pass);
        } else if w.slots.is_empty() {
            // Nothing to poll: wait for a command instead of spinning.
            w.epoll.wait(&mut w.events, SLEEP_MS);
            w.shared.mailbox.wake.drain();
        }
    }
}

/// Epoll token of the mailbox's eventfd.
const WAKE_TOKEN: u64 = u64::MAX;
/// Epoll token of the prober's eventfd.
const PROBE_TOKEN: u64 = u64::MAX - 1;

/// What one pass over the unarmed queues found.
#[derive(Clone, Copy)]
struct PassSummary {
    /// When the pass began, ns.
    now_ns: u64,
    /// Frames received.
    moved: u64,
    /// Some queue handed out a whole batch or showed a full ring.
    full: bool,
    /// The shortest time some queue's ring takes to fill, ns.
    fill_ns: u64,
    /// The highest arrival rate among the queues, frames/s.
    rate_fps: u64,
    /// Queues left unarmed after the pass.
    unarmed: usize,
    /// Of those, the ones that have notifications: the worker never backs
    /// off blind while one is left, it polls on.
    unarmed_notified: usize,
}

/// When to decide, after a pass, whether a queue is armed.
#[derive(Clone, Copy)]
struct ArmRule {
    /// A queue idle this long is armed ...
    spin_ns: u64,
    /// ... alone (a wake-up fits in the budget: the interrupt and moderate
    /// regimes) ...
    alone: bool,
    /// ... or once the whole worker idled that long (it is about to sleep).
    worker_idle: bool,
}

/// The worker loop's state: what the worker owns and what it remembers
/// between passes. [`run`] drives it through its named steps.
struct Worker {
    shared: Arc<WorkerShared>,
    table: Arc<ArcSwap<PortTable>>,
    logic: Arc<ArcSwap<LogicSlot>>,
    batch_cap: usize,
    adaptive: bool,
    fwd: Forwarder,
    batch: RxBatch,
    verdicts: Box<[Verdict]>,
    slots: Vec<RxSlot>,
    epoll: Epoll,
    events: Vec<libc::epoll_event>,
    policy: Policy,
    /// Adaptive passes so far.
    iter: u32,
    /// The next receive queue's epoll token.
    next_token: u64,
    /// The cycle counter when time was last charged, as busy or idle.
    last_cycles: u64,
    /// Armed queues are looked at, while others are busy, at least this
    /// often: half the budget (they cost their first frame that much).
    look_every_ns: u64,
    looked_ns: u64,
    /// Some queues watched only asleep are in the epoll set (a sleep's):
    /// the pass that takes them out after the sleep has work to do.
    watching: bool,
    /// Since when the worker has been awake (poll probes set before are not
    /// samples of polling).
    awake_since_ns: u64,
    /// Transmit queues left with frames the peer refused: when to kick them
    /// again, and the wait after that.
    retry_at_ns: u64,
    retry_gap_ns: u64,
    /// The generation of the [`LogicSlot`] the worker last saw (0: none
    /// yet) and its state for that slot's logic.
    logic_gen: u64,
    state: Option<WorkerState>,
    /// Streamed or ordinary stores for large copies into peers' memory.
    copy: CopyChooser,
    /// The worker naps between its passes (the moderate regime): large
    /// copies stream into every kind of peer memory, whatever the
    /// chooser's ways ([`Worker::stream_while_napping`]).
    stream_all: bool,
}

impl Worker {
    fn new(
        shared: Arc<WorkerShared>,
        table: Arc<ArcSwap<PortTable>>,
        logic: Arc<ArcSwap<LogicSlot>>,
        batch_cap: usize,
        mode: WakeupMode,
        budget_us: u32,
    ) -> Self {
        let max_ports = table.load().capacity();
        let epoll = Epoll::new().expect("epoll_create1");
        epoll
            .add(shared.mailbox.wake.fd(), WAKE_TOKEN)
            .expect("epoll add eventfd");
        epoll
            .add(shared.probe.fd.fd(), PROBE_TOKEN)
            .expect("epoll add eventfd");
        let adaptive = mode == WakeupMode::Adaptive;
        let policy = Policy::new(budget_us, batch_cap, sys::now_ns());
        shared.counters.publish_policy(&policy.view());
        let copy = CopyChooser::new();
        sys::set_streaming(copy.streaming());
        shared.counters.publish_copy(&copy);
        if adaptive {
            sys::set_timer_slack_ns(1_000);
        }
        Self {
            fwd: Forwarder::new(shared.id, max_ports, batch_cap),
            batch: RxBatch::with_capacity(batch_cap),
            verdicts: vec![Verdict::Flood; batch_cap].into_boxed_slice(),
            slots: Vec::with_capacity(64),
            epoll,
            events: vec![libc::epoll_event { events: 0, u64: 0 }; 64],
            policy,
            iter: 0,
            next_token: 0,
            last_cycles: sys::cycles(),
            look_every_ns: (budget_us as u64 * 500).max(10_000),
            looked_ns: 0,
            watching: false,
            awake_since_ns: 0,
            retry_at_ns: 0,
            retry_gap_ns: KICK_RETRY_NS,
            logic_gen: 0,
            stream_all: false,
            copy,
            state: None,
            shared,
            table,
            logic,
            batch_cap,
            adaptive,
        }
    }

    /// Takes the control commands, between batches. False on `Stop`.
    fn take_commands(&mut self) -> bool {
        let cmds = std::mem::take(&mut *self.shared.mailbox.cmds.lock());
        self.shared.mailbox.pending.store(false, Relaxed);
        for cmd in cmds {
            match cmd {
                WorkerCmd::AddRx { port, queue, rxq } => self.add_rx(port, queue, rxq),
                WorkerCmd::RemovePort { port, done } => {
                    for s in self.slots.iter().filter(|s| s.port == port) {
                        if let Some(fd) = s.fd {
                            self.epoll.remove(fd);
                        }
                    }
                    // The other queues keep their registrations and
                    // tokens: nothing to redo, nothing that can fail.
                    self.slots.retain(|s| s.port != port);
                    done.store(true, Release);
                }
                WorkerCmd::ResetCounters { done } => {
                    self.shared.counters.reset();
                    let t = self.table.load();
                    for s in &self.slots {
                        if let Some(e) = t.get(s.port) {
                            e.counters.reset_rx(s.queue as usize);
                        }
                    }
                    done.store(true, Release);
                }
                WorkerCmd::Stop => {
                    self.shared.counters.rx_queues.store(0, Relaxed);
                    return false;
                }
            }
        }
        self.shared
            .counters
            .rx_queues
            .store(self.slots.len() as u64, Relaxed);
        true
    }

    /// Starts receiving on a queue: polled at once, armed once idle (a
    /// queue epoll does not take is polled, never armed).
    fn add_rx(&mut self, port: PortId, queue: QueueId, rxq: Box<dyn RxQueue>) {
        let fd = if self.adaptive { rxq.notify_fd() } else { None };
        let token = self.next_token;
        self.next_token += 1;
        let fd = fd.filter(|fd| self.epoll.add(*fd, token).is_ok());
        // A queue watched only asleep leaves the set until the first sleep
        // (the add above showed epoll takes its fd).
        let asleep_only = rxq.watch_only_asleep() && rxq.peek().is_some();
        let asleep_only = match fd {
            Some(fd) if asleep_only => {
                self.epoll.remove(fd);
                true
            }
            _ => false,
        };
        self.slots.push(RxSlot {
            port,
            queue,
            rxq,
            last_rx_ns: sys::now_ns(),
            inflow: Inflow::default(),
            fill_ns: u64::MAX,
            armed: false,
            fd,
            asleep_only,
            watched: false,
            token,
        });
    }

    /// The logic changed (a slot of another generation): the worker takes
    /// its state for the new logic out of the slot (an uncontended lock:
    /// only this worker ever takes it) and drops the old logic's state
    /// here, on the worker, between batches. That may free memory and
    /// unmap (a system call), which is fine: it happens once per logic
    /// change (a rare control event), under no lock any other worker
    /// waits on.
    #[cold]
    #[inline(never)]
    fn adopt_logic(&mut self, slot: &LogicSlot) {
        self.state = slot.take_state(self.shared.id);
        self.logic_gen = slot.gen;
    }

    /// One batch from every unarmed queue: receive, drop runts, classify,
    /// forward, release, count; an empty queue idle long enough is armed.
    #[inline]
    fn poll_pass(&mut self) -> PassSummary {
        let table_g = self.table.load();
        let logic_g = self.logic.load();
        if logic_g.gen != self.logic_gen {
            self.adopt_logic(&logic_g);
        }
        let now_ns = sys::now_ns();
        let ctx = Ctx {
            now_ns: sys::coarse_now_ns(),
            worker: self.shared.id,
        };
        if self.fwd.has_stalled() && now_ns >= self.retry_at_ns {
            self.retry_kicks(&table_g, now_ns);
        }
        if self.adaptive {
            self.take_poll_probe(now_ns);
        }
        // Once the whole worker has idled the spin time, every empty queue
        // is armed, also one whose fd ended a sleep without frames (its
        // `last_rx_ns` is that wake-up's): it had nothing since the
        // worker's last frame.
        let spin_ns = self.policy.spin_ns();
        let arm = ArmRule {
            spin_ns,
            alone: self.policy.regime() != Regime::Poll,
            worker_idle: self.policy.idle_ns(now_ns) >= spin_ns,
        };
        let mut p = PassSummary {
            now_ns,
            moved: 0,
            full: false,
            fill_ns: u64::MAX,
            rate_fps: 0,
            unarmed: 0,
            unarmed_notified: 0,
        };
        let (adaptive, batch_cap) = (self.adaptive, self.batch_cap);
        for s in self.slots.iter_mut() {
            if s.armed {
                continue;
            }
            p.unarmed += 1;
            let Some(entry) = table_g.get(s.port) else {
                continue;
            };
            let mut rx = self.batch.receive(&mut *s.rxq, s.port, s.queue);
            let n = rx.received();
            if n == 0 {
                drop(rx);
                if adaptive {
                    idle_queue(s, now_ns, arm, &mut p);
                }
                continue;
            }
            s.last_rx_ns = now_ns;
            p.moved += n as u64;
            p.full |= n >= batch_cap;
            let (bytes, runts) = rx.bytes_and_runts(ETH_HDR_B);
            let runts = if runts > 0 {
                rx.retain(|p| p.len() >= ETH_HDR_B)
            } else {
                0
            };
            let m = rx.len();
            if m > 0 {
                let logic = logic_g.logic();
                let v = &mut self.verdicts[..m];
                match &mut self.state {
                    Some(st) => logic.classify_with(&mut **st, &ctx, s.port, rx.pkts_mut(), v),
                    None => logic.classify(&ctx, s.port, rx.pkts_mut(), v),
                }
                self.fwd
                    .forward(&table_g, logic, entry, rx.pkts(), &self.verdicts[..m]);
                // Differently modified copies of frames (an output, a
                // header change, another output), after the batch.
                let (cp, cv) = rx.copies();
                if !cp.is_empty() {
                    self.fwd.forward_copies(&table_g, logic, entry, cp, cv);
                }
            }
            // Releases the frames to the queue.
            drop(rx);
            count_burst(
                s, entry, n, bytes, runts, now_ns, adaptive, batch_cap, &mut p,
            );
        }
        p
    }

    /// A poll probe: how long the prober's mark waited for this pass.
    #[inline]
    fn take_poll_probe(&mut self, now_ns: u64) {
        let probe = &self.shared.probe;
        let ps = probe.poll_stamp_ns.load(Acquire);
        if ps == 0 {
            return;
        }
        probe.poll_stamp_ns.store(0, Relaxed);
        if ps >= self.awake_since_ns {
            // (the prober wrote its account before the mark)
            let run_ns = probe.sched_run_ns.load(Relaxed);
            if run_ns != 0 {
                self.policy.sched_stat(SchedStat {
                    run_ns,
                    wait_ns: probe.sched_wait_ns.load(Relaxed),
                });
            }
            self.policy.poll_sample(now_ns.saturating_sub(ps));
        }
    }

    /// Charges the cycles since the last charge to the pass: busy when it
    /// moved frames, else idle.
    #[inline]
    fn charge_pass(&mut self, pass: &PassSummary) {
        let moved = pass.moved;
        let c = &self.shared.counters;
        let now = sys::cycles();
        let spent = now.wrapping_sub(self.last_cycles);
        // kicks of an idle pass (retries) are idle time like the rest of it
        let kicks = self.fwd.take_kick_cycles();
        if moved > 0 {
            bump(&c.packets, moved);
            bump(&c.batches, 1);
            bump(&c.busy_cycles, spent);
            bump(&c.kick_cycles, kicks.min(spent));
            let large = sys::large_copies();
            if self.stream_all {
                // not copied the chooser's way: not a pass it judges by
                self.copy.skip_pass(large);
            } else if let Some(ways) = self.copy.busy_pass(pass.now_ns, spent, moved, large) {
                // an epoch's end
                sys::set_streaming(ways);
                c.publish_copy(&self.copy);
            }
        } else {
            bump(&c.idle_cycles, spent);
        }
        self.last_cycles = now;
    }

    /// Charges the cycles since the last charge as idle: a gap, a nap, a
    /// back-off or a sleep is overhead, not the next pass's processing.
    #[inline]
    fn charge_idle(&mut self) {
        let now = sys::cycles();
        bump(
            &self.shared.counters.idle_cycles,
            now.wrapping_sub(self.last_cycles),
        );
        self.last_cycles = now;
    }

    /// Adaptive mode, after a pass: the policy decides between polling on,
    /// a gap, a nap (the moderate regime), a back-off, a look at the armed
    /// queues and sleeping on their notifications.
    #[inline]
    fn wait_or_poll_on(&mut self, pass: PassSummary) {
        self.iter = self.iter.wrapping_add(1);
        let any_armed = pass.unarmed < self.slots.len();
        let regime = self.policy.regime();
        let next = self.policy.after_poll(
            pass.now_ns,
            Pass {
                moved: pass.moved,
                full: pass.full,
                fill_ns: pass.fill_ns,
                rate_fps: pass.rate_fps,
            },
        );
        if self.policy.regime() != regime || self.iter.is_multiple_of(4096) {
            self.shared.counters.publish_policy(&self.policy.view());
        }
        self.stream_while_napping(next);
        let mut look = any_armed
            && (self.iter.is_multiple_of(EPOLL_EVERY)
                || pass.now_ns.saturating_sub(self.looked_ns) >= self.look_every_ns);
        match next {
            Next::Gap(ns) => self.gap(pass.now_ns, ns),
            Next::Nap(ns) => {
                self.nap(ns);
                look = any_armed;
            }
            _ => {}
        }
        let all_armed = pass.unarmed == 0;
        let timeout = if all_armed && next == Next::Sleep {
            SLEEP_MS
        } else if all_armed {
            // armed queues only, but the policy still spins: look, don't wait
            0
        } else if next == Next::Sleep && pass.moved == 0 && pass.unarmed_notified == 0 {
            // Only queues without notifications are left and they are idle:
            // back off instead of spinning. Never while a queue with
            // notifications is unarmed (frames slipped in as it was armed):
            // that one is polled again at once, and the armed ones are
            // looked at as usual, where a back-off would look at none of
            // them.
            self.back_off();
            return;
        } else if look {
            0
        } else {
            return;
        };
        if timeout == 0 {
            // A look at the armed queues: from their rings where the
            // backends can tell, else through epoll as for a sleep.
            let now_ns = sys::now_ns();
            if peek_armed(&mut self.slots, now_ns, false).all {
                self.looked_ns = now_ns;
                return;
            }
        }
        self.wait(timeout);
    }

    /// From a nap until the worker next gaps, sleeps or leaves the moderate
    /// regime, large copies stream into every kind of peer memory. A nap's
    /// frames are copied hundreds at a time, from lines the sender's core
    /// wrote long ago into buffers their reader posted long ago: streamed
    /// stores (no read for ownership) cost those passes less whichever way
    /// the chooser found cheaper for a polling worker's fresh frames (v2v
    /// vhost-user 1518 B at 0.1 x R+ under budget 1000, this host:
    /// docs/results/2026-12-06-capacity-repeated-and-naps.md).
    #[inline]
    fn stream_while_napping(&mut self, next: Next) {
        let stream_all = streams_all(self.stream_all, next, self.policy.regime());
        if stream_all != self.stream_all {
            self.stream_all = stream_all;
            sys::set_streaming(if stream_all {
                [true; sys::COPY_KINDS]
            } else {
                self.copy.streaming()
            });
        }
    }

    /// A small batch of a flow dense enough to fill a bigger one soon
    /// (poll or interrupt regime): wait, spinning, until `ns` after the
    /// pass began at `now_ns` (the policy bounds it by the budget and the
    /// rings' fill time). The worker would have polled on anyway; no
    /// system call.
    fn gap(&mut self, now_ns: u64, ns: u64) {
        bump(&self.shared.counters.gaps, 1);
        let until = now_ns.saturating_add(ns);
        let mut t = sys::now_ns();
        self.policy.pass_ended(t);
        while t < until {
            core::hint::spin_loop();
            t = sys::now_ns();
        }
        self.policy.gapped(t);
        self.charge_idle();
    }

    /// A nap of `ns` (the moderate regime), its wall and CPU time fed back
    /// to the policy.
    fn nap(&mut self, ns: u64) {
        let c = &self.shared.counters;
        bump(&c.naps, 1);
        let wait0 = self.run_queue_wait_ns();
        let (cpu0, t0) = (sys::thread_cpu_ns(), sys::now_ns());
        self.policy.pass_ended(t0);
        std::thread::sleep(std::time::Duration::from_nanos(ns));
        let (cpu1, t1) = (sys::thread_cpu_ns(), sys::now_ns());
        let cpu = cpu1.saturating_sub(cpu0);
        // What of the nap was waiting for the CPU another thread held.
        let held = match (wait0, self.run_queue_wait_ns()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        };
        bump(&c.held_ns, held);
        self.policy
            .slept_held(Slept::Nap, ns, t1 - t0, held, cpu, t1);
        c.account_sleep(t1 - t0, cpu, &self.policy.view());
        self.charge_idle();
        self.awake_since_ns = t1;
    }

    /// The worker's run-queue wait so far, from its scheduler account
    /// (one `pread`; `None` where the kernel keeps none).
    #[inline]
    fn run_queue_wait_ns(&self) -> Option<u64> {
        let f = self.shared.probe.sched.get()?;
        f.read().map(|s| s.wait_ns)
    }

    /// The only queues left are idle and have no notifications: a short
    /// sleep between polls instead of spinning. Idle time, as a nap's: the
    /// pass that next moves frames must not be charged for it.
    fn back_off(&mut self) {
        bump(&self.shared.counters.backoffs, 1);
        let t0 = sys::now_ns();
        std::thread::sleep(std::time::Duration::from_micros(BACKOFF_US));
        let t1 = sys::now_ns();
        self.awake_since_ns = t1;
        self.policy.slept_idle(t1 - t0, 0, t1);
        bump(&self.shared.counters.asleep_ns, t1 - t0);
        self.charge_idle();
    }

    /// Waits in epoll up to `timeout_ms` (0: a look without waiting) and
    /// takes what it returns: commands, a wake probe, armed queues to
    /// disarm. A real sleep is measured and fed back to the policy.
    fn wait(&mut self, mut timeout_ms: i32) {
        if timeout_ms > 0 && self.fwd.has_stalled() {
            // Frames the peer refused would wait for the whole sleep: kick
            // them now, and if the peer still refuses, wake up to retry.
            let now_ns = sys::now_ns();
            if self.retry_kicks(&self.table.load(), now_ns) {
                let ms = self.retry_at_ns.saturating_sub(now_ns).div_ceil(1_000_000);
                timeout_ms = timeout_ms.min(ms.max(1) as i32);
            }
        }
        if timeout_ms > 0 && !self.watch_asleep_only(true) {
            // A queue epoll refused is polled again: look, don't sleep.
            timeout_ms = 0;
        }
        let sleeping = timeout_ms > 0;
        let (cpu0, t0) = if sleeping {
            bump(&self.shared.counters.sleeps, 1);
            let t0 = (sys::thread_cpu_ns(), sys::now_ns());
            self.shared.probe.asleep_since_ns.store(t0.1, Release);
            t0
        } else {
            (0, 0)
        };
        let n = self.epoll.wait(&mut self.events, timeout_ms);
        let woke_ns = sys::now_ns();
        self.watch_asleep_only(false);
        self.looked_ns = woke_ns;
        if sleeping {
            self.shared.probe.asleep_since_ns.store(0, Release);
            self.awake_since_ns = woke_ns;
        }
        let (mut woken, mut probed) = (false, false);
        for ev in &self.events[..n] {
            let tok = ev.u64;
            if tok == WAKE_TOKEN {
                self.shared.mailbox.wake.drain();
            } else if tok == PROBE_TOKEN {
                self.shared.probe.fd.drain();
                probed = true;
            } else if let Some(s) = self.slots.iter_mut().find(|s| s.token == tok) {
                s.rxq.ack_notify();
                if s.armed {
                    s.disarm(woke_ns);
                    woken = true;
                }
            }
        }
        if sleeping && !woken {
            // No queue's notification ended the sleep (its timeout, a wake
            // probe or a command did): look at the armed rings all the
            // same. A peer that reads our interrupt flag before its index
            // store is visible (DPDK's and VPP's memif transmit order them
            // so, without a fence) can skip the kick its frames needed;
            // they wait for this look, not for its next burst.
            let missed = peek_armed(&mut self.slots, woke_ns, true).frames;
            bump(&self.shared.counters.missed_kicks, missed);
        }
        if sleeping {
            self.slept(t0, cpu0, woke_ns, woken, probed);
        }
    }

    /// Puts the armed queues watched only asleep into the epoll set for a
    /// sleep (`on`), or takes them out after it (`!on`: a no-op unless
    /// some are in). Adding one whose ring already holds frames makes it
    /// ready at once (epoll polls the fd as it adds it), so nothing that
    /// came after the arming is slept through. One that epoll refuses is
    /// disarmed (polled again) and the result is false: no sleep then.
    fn watch_asleep_only(&mut self, on: bool) -> bool {
        if !on && !self.watching {
            return true;
        }
        let (mut all, mut any) = (true, false);
        for s in self.slots.iter_mut().filter(|s| s.asleep_only) {
            let Some(fd) = s.fd else { continue };
            if on && s.armed && !s.watched {
                s.watched = self.epoll.add(fd, s.token).is_ok();
                if !s.watched {
                    s.disarm(sys::now_ns());
                    all = false;
                }
            } else if !on && s.watched {
                self.epoll.remove(fd);
                s.watched = false;
            }
            any |= s.watched;
        }
        self.watching = any;
        all
    }

    /// Feeds a sleep in epoll from `t0` (thread CPU `cpu0`) to `woke_ns`
    /// back to the policy and the counters: a wake probe's latency sample,
    /// and what the sleep cost.
    fn slept(&mut self, t0: u64, cpu0: u64, woke_ns: u64, woken: bool, probed: bool) {
        let cpu = sys::thread_cpu_ns().saturating_sub(cpu0);
        if probed {
            // A sample of this host's wake-up latency, also when traffic
            // ended the sleep too (wakeup::probe_sample: else the slow
            // wake-ups are never sampled under traffic).
            let probe = &self.shared.probe;
            let stamp = probe.stamp_ns.load(Acquire);
            if let Some(ns) = probe_sample(stamp, t0, woke_ns) {
                // Less what of it the worker waited for a CPU another
                // thread held (the prober read the account just before
                // it signalled): as for naps (Policy::slept_held), a
                // polling worker would have waited as long.
                let before = probe.sched_wait_ns.load(Relaxed);
                let held = match (probe.sched_run_ns.load(Relaxed), self.run_queue_wait_ns()) {
                    (r, Some(now)) if r != 0 => now.saturating_sub(before),
                    _ => 0,
                };
                bump(&self.shared.counters.held_ns, held);
                self.policy.wake_sample(ns.saturating_sub(held));
            }
        }
        if woken {
            bump(&self.shared.counters.wakeups, 1);
            // Sleeps cut short by the 100 ms cap, a command or a probe are
            // not what a wake-up on traffic costs.
            self.policy
                .slept(Slept::Interrupt, 0, woke_ns - t0, cpu, woke_ns);
        } else {
            self.policy.slept_idle(woke_ns - t0, cpu, woke_ns);
        }
        self.shared
            .counters
            .account_sleep(woke_ns - t0, cpu, &self.policy.view());
        self.charge_idle();
    }

    /// Kicks again the transmit queues whose peer refused frames and
    /// schedules the next retry: `KICK_RETRY_NS` after a retry that cleared
    /// them all, else twice the last wait (at most `SLEEP_MS`). Returns
    /// whether some still wait.
    fn retry_kicks(&mut self, table: &PortTable, now_ns: u64) -> bool {
        let pending = self.fwd.retry_kicks(table);
        if pending {
            self.retry_at_ns = now_ns + self.retry_gap_ns;
            self.retry_gap_ns = (self.retry_gap_ns * 2).min(SLEEP_MS as u64 * 1_000_000);
        } else {
            self.retry_gap_ns = KICK_RETRY_NS;
        }
        pending
    }
}

/// An unarmed queue that handed out nothing this pass (adaptive mode):
/// its arrival rate and fill time updated, and armed when it idled the
/// spin time (alone, or because the whole worker did). Arming re-checks the
/// ring: frames that slipped in keep it polled.
#[inline]
fn idle_queue(s: &mut RxSlot, now_ns: u64, arm: ArmRule, p: &mut PassSummary) {
    s.inflow.polled(now_ns, 0, true);
    p.fill_ns = p.fill_ns.min(s.fill_ns);
    if s.fd.is_some()
        && (arm.worker_idle || (arm.alone && now_ns.saturating_sub(s.last_rx_ns) >= arm.spin_ns))
    {
        if s.rxq.set_notify(true) {
            // Frames slipped in: keep polling.
            s.rxq.set_notify(false);
            s.last_rx_ns = now_ns;
        } else {
            s.armed = true;
            p.unarmed -= 1;
        }
    }
    if !s.armed && s.fd.is_some() {
        p.unarmed_notified += 1;
    }
}

/// Counts a burst of `n` frames (`bytes` bytes, `runts` of them dropped
/// as runts) on its queue once the batch is done, so received = sent +
/// drops holds whenever the counters are read between batches; then how
/// full the queue's ring was (push-back, and how long a nap it allows).
/// This worker alone writes its queues' receive counters: plain adds, no
/// locked instruction ([`bump`]).
#[allow(clippy::too_many_arguments)]
#[inline]
fn count_burst(
    s: &mut RxSlot,
    entry: &PortEntry,
    n: usize,
    bytes: u64,
    runts: usize,
    now_ns: u64,
    adaptive: bool,
    batch_cap: usize,
    p: &mut PassSummary,
) {
    entry.counters.add_drops(DropReason::Runt, runts as u64);
    let qc = &entry.counters.queues[(s.queue as usize).min(entry.counters.queues.len() - 1)];
    bump(&qc.rx_bytes, bytes);
    qc.rx_packets
        .store(qc.rx_packets.load(Relaxed).wrapping_add(n as u64), Release);
    let (filled, cap) = s.rxq.fill_level().unwrap_or((0, 0));
    if cap > 0 && filled >= cap {
        bump(&qc.rx_ring_full, 1);
        p.full = true;
    }
    if adaptive {
        let drained = n < batch_cap && (cap == 0 || filled <= n as u32);
        s.inflow.polled(now_ns, n as u64, drained);
        // Unknown rings are assumed to hold one batch.
        let room = if cap > 0 {
            cap.saturating_sub(filled.saturating_sub(n as u32))
        } else {
            batch_cap as u32
        };
        s.fill_ns = s.inflow.fill_ns(room);
        p.fill_ns = p.fill_ns.min(s.fill_ns);
        p.rate_fps = p.rate_fps.max(s.inflow.rate_fps());
    }
}

/// Looks at the armed queues without a system call: each one whose
/// backend reads from its ring that frames wait ([`RxQueue::peek`]) is
/// disarmed as a wake-up on its fd would disarm it (its notification
/// acknowledged: the peer kicked it while it was armed) and polled from the
/// next pass on; one that is still empty costs a load. Returns false when
/// some armed queue cannot be peeked: the caller then asks epoll for those
/// (the ones disarmed here it finds acknowledged, or acknowledges again).
fn peek_armed(slots: &mut [RxSlot], now_ns: u64, count_frames: bool) -> Peeked {
    let mut p = Peeked {
        all: true,
        frames: 0,
    };
    for s in slots.iter_mut().filter(|s| s.armed) {
        match s.rxq.peek() {
            Some(true) => {
                if count_frames {
                    p.frames += u64::from(s.rxq.peek_frames() == Some(true));
                }
                s.rxq.ack_notify();
                s.disarm(now_ns);
            }
            Some(false) => {}
            None => p.all = false,
        }
    }
    p
}

/// What [`peek_armed`] saw.
struct Peeked {
    /// Every armed queue could be read without epoll.
    all: bool,
    /// Of the armed queues disarmed (polled again), those that held
    /// frames ([`RxQueue::peek_frames`]; asked only with `count_frames`,
    /// after a sleep: the looks while awake count nothing).
    frames: u64,
}

/// `c += n` for a counter this worker alone writes (its own counters,
/// the receive counters of the queues it owns): a load and a store, not a
/// locked add. A reset comes as [`WorkerCmd::ResetCounters`], done by the
/// worker itself, so no store of the control thread's is overwritten.
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Whether the worker's next passes stream every large copy
/// ([`Worker::stream_while_napping`]): from a nap (`Next::Nap`), through the
/// polls between naps while the regime stays moderate, until a gap, a
/// sleep or another regime.
#[inline]
fn streams_all(streaming_all: bool, next: Next, regime: Regime) -> bool {
    match next {
        Next::Nap(_) => true,
        Next::Poll => streaming_all && regime == Regime::Moderate,
        Next::Gap(_) | Next::Sleep => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_copies_stream_from_a_nap_until_the_worker_stops_napping() {
        use Regime::{Interrupt, Moderate, Poll};
        // a nap starts it, in any regime the policy napped in
        assert!(streams_all(false, Next::Nap(300_000), Moderate));
        // the passes between naps keep it
        assert!(streams_all(true, Next::Poll, Moderate));
        assert!(streams_all(true, Next::Nap(300_000), Moderate));
        // a gap, a sleep or another regime ends it
        assert!(!streams_all(true, Next::Gap(20_000), Moderate));
        assert!(!streams_all(true, Next::Sleep, Moderate));
        assert!(!streams_all(true, Next::Poll, Poll));
        assert!(!streams_all(true, Next::Poll, Interrupt));
        // a polling worker never starts it
        assert!(!streams_all(false, Next::Poll, Moderate));
        assert!(!streams_all(false, Next::Poll, Poll));
    }
}
