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
//!   asks epoll only for the others). When every
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
//! Commands from the control plane (add a receive queue, remove a port,
//! stop) are picked up between batches.
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
use crate::counters::WorkerCounters;
use crate::drop::DropReason;
use crate::fabric::{Forwarder, PortTable};
use crate::logic::{Ctx, Logic, Verdict};
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
/// ... and a poll probe this often while it is awake (a cache line).
pub const POLL_PROBE_EVERY_NS: u64 = 5_000_000;
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

/// Holder of the current logic, swapped atomically between batches.
pub struct LogicSlot(pub Box<dyn Logic>);

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

/// Runs the worker loop until a `Stop` command.
pub fn run(
    shared: Arc<WorkerShared>,
    table: Arc<ArcSwap<PortTable>>,
    logic: Arc<ArcSwap<LogicSlot>>,
    batch_cap: usize,
    mode: WakeupMode,
    budget_us: u32,
) {
    shared.tid.store(sys::gettid(), Relaxed);
    let max_ports = table.load().capacity();
    let mut fwd = Forwarder::new(shared.id, max_ports, batch_cap);
    let mut batch = RxBatch::with_capacity(batch_cap);
    let mut verdicts = vec![Verdict::Flood; batch_cap].into_boxed_slice();
    let mut slots: Vec<RxSlot> = Vec::with_capacity(64);
    let epoll = Epoll::new().expect("epoll_create1");
    const WAKE_TOKEN: u64 = u64::MAX;
    const PROBE_TOKEN: u64 = u64::MAX - 1;
    epoll
        .add(shared.mailbox.wake.fd(), WAKE_TOKEN)
        .expect("epoll add eventfd");
    let probe = &shared.probe;
    epoll
        .add(probe.fd.fd(), PROBE_TOKEN)
        .expect("epoll add eventfd");
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let c = &shared.counters;
    let adaptive = mode == WakeupMode::Adaptive;
    let mut iter: u32 = 0;
    let mut next_token: u64 = 0;
    let mut last = sys::cycles();
    let mut policy = Policy::new(budget_us, batch_cap, sys::now_ns());
    // Armed queues are looked at, while others are busy, at least this
    // often: half the budget (they cost their first frame that much).
    let look_every_ns = (budget_us as u64 * 500).max(10_000);
    let mut looked_ns = 0u64;
    // Since when the worker has been awake (poll probes set before are
    // not samples of polling).
    let mut awake_since_ns = 0u64;
    // Transmit queues left with frames the peer refused: when to kick them
    // again, and the wait after that.
    let mut retry_at_ns = 0u64;
    let mut retry_gap_ns = KICK_RETRY_NS;
    c.publish_policy(&policy.view());
    if adaptive {
        sys::set_timer_slack_ns(1_000);
    }

    loop {
        shared
            .epoch
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Control commands, between batches.
        if shared
            .mailbox
            .pending
            .load(std::sync::atomic::Ordering::Acquire)
        {
            let cmds = std::mem::take(&mut *shared.mailbox.cmds.lock());
            shared.mailbox.pending.store(false, Relaxed);
            for cmd in cmds {
                match cmd {
                    WorkerCmd::AddRx { port, queue, rxq } => {
                        let fd = if adaptive { rxq.notify_fd() } else { None };
                        let token = next_token;
                        next_token += 1;
                        // A queue epoll does not take is polled, never armed.
                        let fd = fd.filter(|fd| epoll.add(*fd, token).is_ok());
                        let last_rx_ns = sys::now_ns();
                        slots.push(RxSlot {
                            port,
                            queue,
                            rxq,
                            last_rx_ns,
                            inflow: Inflow::default(),
                            fill_ns: u64::MAX,
                            armed: false,
                            fd,
                            token,
                        });
                    }
                    WorkerCmd::RemovePort { port, done } => {
                        for s in slots.iter().filter(|s| s.port == port) {
                            if let Some(fd) = s.fd {
                                epoll.remove(fd);
                            }
                        }
                        // The other queues keep their registrations and
                        // tokens: nothing to redo, nothing that can fail.
                        slots.retain(|s| s.port != port);
                        done.store(true, std::sync::atomic::Ordering::Release);
                    }
                    WorkerCmd::ResetCounters { done } => {
                        c.reset();
                        let t = table.load();
                        for s in &slots {
                            if let Some(e) = t.get(s.port) {
                                e.counters.reset_rx(s.queue as usize);
                            }
                        }
                        done.store(true, std::sync::atomic::Ordering::Release);
                    }
                    WorkerCmd::Stop => {
                        c.rx_queues.store(0, Relaxed);
                        return;
                    }
                }
            }
            c.rx_queues.store(slots.len() as u64, Relaxed);
        }

        // One batch per unarmed queue.
        let table_g = table.load();
        let logic_g = logic.load();
        let now_ns = sys::now_ns();
        let ctx = Ctx {
            now_ns: sys::coarse_now_ns(),
            worker: shared.id,
        };
        if fwd.has_stalled() && now_ns >= retry_at_ns {
            retry_kicks(
                &mut fwd,
                &table_g,
                now_ns,
                &mut retry_at_ns,
                &mut retry_gap_ns,
            );
        }
        // A poll probe: how long the prober's mark waited for this pass.
        if adaptive {
            let ps = probe.poll_stamp_ns.load(Acquire);
            if ps != 0 {
                probe.poll_stamp_ns.store(0, Relaxed);
                if ps >= awake_since_ns {
                    // (the prober wrote its account before the mark)
                    let run_ns = probe.sched_run_ns.load(Relaxed);
                    if run_ns != 0 {
                        policy.sched_stat(SchedStat {
                            run_ns,
                            wait_ns: probe.sched_wait_ns.load(Relaxed),
                        });
                    }
                    policy.poll_sample(now_ns.saturating_sub(ps));
                }
            }
        }
        // A queue idle this long is armed: alone where a wake-up fits in
        // the budget (the interrupt and moderate regimes), else only once
        // the whole worker idled that long (it is about to sleep). Once the
        // whole worker has, every empty queue is armed, also one whose fd
        // ended a sleep without frames (its `last_rx_ns` is that wake-up's):
        // it had nothing since the worker's last frame.
        let spin_ns = policy.spin_ns();
        let arm_alone = policy.regime() != Regime::Poll;
        let worker_idle = policy.idle_ns(now_ns) >= spin_ns;
        let mut moved = 0u64;
        let mut full = false;
        let mut fill_ns = u64::MAX;
        let mut rate_fps = 0u64;
        let mut unarmed = 0usize;
        // Unarmed queues that have notifications (they are armed once
        // idle, or frames slipped in as they were): the worker never
        // backs off blind while one is left, it polls on.
        let mut unarmed_notified = 0usize;
        for s in slots.iter_mut() {
            if s.armed {
                continue;
            }
            unarmed += 1;
            let Some(entry) = table_g.get(s.port) else {
                continue;
            };
            let mut rx = batch.receive(&mut *s.rxq, s.port, s.queue);
            let n = rx.received();
            if n == 0 {
                drop(rx);
                if adaptive {
                    s.inflow.polled(now_ns, 0, true);
                    fill_ns = fill_ns.min(s.fill_ns);
                    if s.fd.is_some()
                        && (worker_idle
                            || (arm_alone && now_ns.saturating_sub(s.last_rx_ns) >= spin_ns))
                    {
                        if s.rxq.set_notify(true) {
                            // Frames slipped in: keep polling.
                            s.rxq.set_notify(false);
                            s.last_rx_ns = now_ns;
                        } else {
                            s.armed = true;
                            unarmed -= 1;
                        }
                    }
                    if !s.armed && s.fd.is_some() {
                        unarmed_notified += 1;
                    }
                }
                continue;
            }
            s.last_rx_ns = now_ns;
            moved += n as u64;
            full |= n >= batch_cap;
            let (bytes, runts) = rx.bytes_and_runts(ETH_HDR_B);
            let runts = if runts > 0 {
                rx.retain(|p| p.len() >= ETH_HDR_B)
            } else {
                0
            };
            let m = rx.len();
            if m > 0 {
                logic_g
                    .0
                    .classify(&ctx, s.port, rx.pkts_mut(), &mut verdicts[..m]);
                fwd.forward(
                    &table_g,
                    logic_g.0.as_ref(),
                    entry,
                    rx.pkts(),
                    &verdicts[..m],
                );
                // Differently modified copies of frames (an output, a
                // header change, another output), after the batch.
                let (cp, cv) = rx.copies();
                if !cp.is_empty() {
                    fwd.forward_copies(&table_g, logic_g.0.as_ref(), entry, cp, cv);
                }
            }
            // Releases the frames to the queue.
            drop(rx);
            // Counted once the batch is done, so received = sent + drops
            // holds whenever the counters are read between batches. This
            // worker alone writes its queues' receive counters: plain
            // adds, no locked instruction ([`bump`]).
            entry.counters.add_drops(DropReason::Runt, runts as u64);
            let qc =
                &entry.counters.queues[(s.queue as usize).min(entry.counters.queues.len() - 1)];
            bump(&qc.rx_bytes, bytes);
            qc.rx_packets
                .store(qc.rx_packets.load(Relaxed).wrapping_add(n as u64), Release);
            // How full its ring was: push-back, and how long a nap it allows.
            let (filled, cap) = s.rxq.fill_level().unwrap_or((0, 0));
            if cap > 0 && filled >= cap {
                bump(&qc.rx_ring_full, 1);
                full = true;
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
                fill_ns = fill_ns.min(s.fill_ns);
                rate_fps = rate_fps.max(s.inflow.rate_fps());
            }
        }
        drop(logic_g);
        drop(table_g);

        let now = sys::cycles();
        let busy_this = now.wrapping_sub(last);
        if moved > 0 {
            bump(&c.packets, moved);
            bump(&c.batches, 1);
            bump(&c.busy_cycles, busy_this);
        } else {
            bump(&c.idle_cycles, now.wrapping_sub(last));
        }
        last = now;

        if !adaptive {
            if slots.is_empty() {
                // Nothing to poll: wait for a command instead of spinning.
                epoll.wait(&mut events, SLEEP_MS);
                shared.mailbox.wake.drain();
            }
            continue;
        }

        // Adaptive: the policy decides between polling on, a nap (the
        // moderate regime) and sleeping on notifications.
        iter = iter.wrapping_add(1);
        let any_armed = unarmed < slots.len();
        let regime = policy.regime();
        let next = policy.after_poll(
            now_ns,
            Pass {
                moved,
                full,
                fill_ns,
                rate_fps,
            },
        );
        if policy.regime() != regime || iter.is_multiple_of(4096) {
            c.publish_policy(&policy.view());
        }
        let mut look = any_armed
            && (iter.is_multiple_of(EPOLL_EVERY)
                || now_ns.saturating_sub(looked_ns) >= look_every_ns);
        if let Next::Gap(ns) = next {
            // A small batch of a flow dense enough to fill a bigger one
            // soon (poll or interrupt regime): wait, spinning, until `ns`
            // after this pass began (the policy bounds it by the budget and
            // the rings' fill time). The worker would have polled on
            // anyway; no system call.
            bump(&c.gaps, 1);
            let until = now_ns.saturating_add(ns);
            let mut t = sys::now_ns();
            while t < until {
                core::hint::spin_loop();
                t = sys::now_ns();
            }
            // Overhead, not the next pass's processing.
            policy.gapped(t);
            let now = sys::cycles();
            bump(&c.idle_cycles, now.wrapping_sub(last));
            last = now;
        }
        if let Next::Nap(ns) = next {
            bump(&c.naps, 1);
            let (cpu0, t0) = (sys::thread_cpu_ns(), sys::now_ns());
            std::thread::sleep(std::time::Duration::from_nanos(ns));
            let (cpu1, t1) = (sys::thread_cpu_ns(), sys::now_ns());
            policy.slept(Slept::Nap, ns, t1 - t0, cpu1.saturating_sub(cpu0), t1);
            c.account_sleep(t1 - t0, cpu1.saturating_sub(cpu0), &policy.view());
            let now = sys::cycles();
            bump(&c.idle_cycles, now.wrapping_sub(last));
            last = now;
            look = any_armed;
            awake_since_ns = t1;
        }
        let all_armed = unarmed == 0;
        let mut timeout = if all_armed && next == Next::Sleep {
            SLEEP_MS
        } else if all_armed {
            // armed queues only, but the policy still spins: look, don't wait
            0
        } else if next == Next::Sleep && moved == 0 && unarmed_notified == 0 {
            // Only queues without notifications are left and they are idle:
            // back off instead of spinning. Idle time, as a nap's: the pass
            // that next moves frames must not be charged for it. Never while
            // a queue with notifications is unarmed (frames slipped in as
            // it was armed): that one is polled again at once, and the
            // armed ones are looked at as usual, where a back-off would
            // look at none of them.
            bump(&c.backoffs, 1);
            let t0 = sys::now_ns();
            std::thread::sleep(std::time::Duration::from_micros(BACKOFF_US));
            let t1 = sys::now_ns();
            awake_since_ns = t1;
            policy.slept_idle(t1 - t0, 0, t1);
            bump(&c.asleep_ns, t1 - t0);
            let now = sys::cycles();
            bump(&c.idle_cycles, now.wrapping_sub(last));
            last = now;
            continue;
        } else if look {
            0
        } else {
            continue;
        };
        if timeout == 0 {
            // A look at the armed queues: from their rings where the
            // backends can tell, else through epoll as for a sleep.
            let now_ns = sys::now_ns();
            if peek_armed(&mut slots, now_ns) {
                looked_ns = now_ns;
                continue;
            }
        }
        if timeout > 0 && fwd.has_stalled() {
            // Frames the peer refused would wait for the whole sleep: kick
            // them now, and if the peer still refuses, wake up to retry.
            let now_ns = sys::now_ns();
            if retry_kicks(
                &mut fwd,
                &table.load(),
                now_ns,
                &mut retry_at_ns,
                &mut retry_gap_ns,
            ) {
                let ms = retry_at_ns.saturating_sub(now_ns).div_ceil(1_000_000);
                timeout = timeout.min(ms.max(1) as i32);
            }
        }
        let (cpu0, t0) = if timeout > 0 {
            bump(&c.sleeps, 1);
            let t0 = (sys::thread_cpu_ns(), sys::now_ns());
            probe.asleep_since_ns.store(t0.1, Release);
            t0
        } else {
            (0, 0)
        };
        let n = epoll.wait(&mut events, timeout);
        let woke_ns = sys::now_ns();
        looked_ns = woke_ns;
        if timeout > 0 {
            probe.asleep_since_ns.store(0, Release);
            awake_since_ns = woke_ns;
        }
        let (mut woken, mut probed) = (false, false);
        for ev in &events[..n] {
            let tok = ev.u64;
            if tok == WAKE_TOKEN {
                shared.mailbox.wake.drain();
            } else if tok == PROBE_TOKEN {
                probe.fd.drain();
                probed = true;
            } else if let Some(s) = slots.iter_mut().find(|s| s.token == tok) {
                s.rxq.ack_notify();
                if s.armed {
                    s.disarm(woke_ns);
                    woken = true;
                }
            }
        }
        if timeout > 0 {
            let cpu1 = sys::thread_cpu_ns();
            let cpu = cpu1.saturating_sub(cpu0);
            if probed {
                // A sample of this host's wake-up latency, also when
                // traffic ended the sleep too (wakeup::probe_sample: else
                // the slow wake-ups are never sampled under traffic).
                let stamp = probe.stamp_ns.load(Acquire);
                if let Some(ns) = probe_sample(stamp, t0, woke_ns) {
                    policy.wake_sample(ns);
                }
            }
            if woken {
                bump(&c.wakeups, 1);
                // Sleeps cut short by the 100 ms cap, a command or a probe
                // are not what a wake-up on traffic costs.
                policy.slept(Slept::Interrupt, 0, woke_ns - t0, cpu, woke_ns);
            } else {
                policy.slept_idle(woke_ns - t0, cpu, woke_ns);
            }
            c.account_sleep(woke_ns - t0, cpu, &policy.view());
            let now = sys::cycles();
            bump(&c.idle_cycles, now.wrapping_sub(last));
            last = now;
        }
    }
}

/// Looks at the armed queues without a system call: each one whose
/// backend reads from its ring that frames wait ([`RxQueue::peek`]) is
/// disarmed as a wake-up on its fd would disarm it (its notification
/// acknowledged: the peer kicked it while it was armed) and polled from the
/// next pass on; one that is still empty costs a load. Returns false when
/// some armed queue cannot be peeked: the caller then asks epoll for those
/// (the ones disarmed here it finds acknowledged, or acknowledges again).
fn peek_armed(slots: &mut [RxSlot], now_ns: u64) -> bool {
    let mut all = true;
    for s in slots.iter_mut().filter(|s| s.armed) {
        match s.rxq.peek() {
            Some(true) => {
                s.rxq.ack_notify();
                s.disarm(now_ns);
            }
            Some(false) => {}
            None => all = false,
        }
    }
    all
}

/// `c += n` for a counter this worker alone writes (its own counters,
/// the receive counters of the queues it owns): a load and a store, not a
/// locked add. A reset comes as [`WorkerCmd::ResetCounters`], done by the
/// worker itself, so no store of the control thread's is overwritten.
#[inline]
pub fn bump(c: &AtomicU64, n: u64) {
    c.store(c.load(Relaxed).wrapping_add(n), Relaxed);
}

/// Kicks again the transmit queues whose peer refused frames and schedules
/// the next retry: `KICK_RETRY_NS` after a retry that cleared them all,
/// else twice the last wait (at most `SLEEP_MS`). Returns whether some
/// still wait.
fn retry_kicks(
    fwd: &mut Forwarder,
    table: &PortTable,
    now_ns: u64,
    retry_at_ns: &mut u64,
    retry_gap_ns: &mut u64,
) -> bool {
    let pending = fwd.retry_kicks(table);
    if pending {
        *retry_at_ns = now_ns + *retry_gap_ns;
        *retry_gap_ns = (*retry_gap_ns * 2).min(SLEEP_MS as u64 * 1_000_000);
    } else {
        *retry_gap_ns = KICK_RETRY_NS;
    }
    pending
}
