//! The worker loop: receive a burst, drop runts, classify, forward,
//! release; and the wake-up model of DESIGN.md.
//!
//! - `Poll`: every owned receive queue is polled on every iteration; the
//!   worker never sleeps (what DPDK-style switches do).
//! - `Adaptive` (default): the policy of [`crate::wakeup`] with the
//!   worker's latency budget. A queue that stayed empty for the policy's
//!   spin time is *armed* — its notifications are enabled, with the
//!   re-check that prevents a lost wake-up — and no longer polled. Armed
//!   queues are watched through epoll (looked at without waiting every
//!   `EPOLL_EVERY` iterations while other queues are busy). When every queue
//!   is armed the worker sleeps in epoll; a queue whose fd fires is disarmed
//!   and polled again. Under dense traffic, when the policy finds naps
//!   cheaper than wake-ups, it naps after each batch for up to the latency
//!   budget (interrupt moderation). Every sleep's CPU cost is measured and
//!   fed back to the policy.
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

use std::sync::atomic::{AtomicBool, Ordering::Relaxed, Ordering::Release};
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
use crate::wakeup::{Next, Policy, Slept};

/// While some queues are busy, look at armed queues every this many loops.
pub const EPOLL_EVERY: u32 = 64;
/// Longest sleep, so commands and link changes are seen (ms).
const SLEEP_MS: i32 = 100;
/// First wait before kicking again a transmit queue whose peer refused
/// frames (ns); it doubles while the peer keeps refusing, up to
/// `SLEEP_MS`.
const KICK_RETRY_NS: u64 = 20_000;
/// Ethernet header length: anything shorter is a runt.
pub const ETH_HDR_B: usize = 14;

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
    armed: bool,
    fd: Option<i32>,
    /// Its epoll token: unique for the worker's life and never re-registered,
    /// so removing another port cannot leave this queue deaf.
    token: u64,
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
    epoll
        .add(shared.mailbox.wake.fd(), WAKE_TOKEN)
        .expect("epoll add eventfd");
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let c = &shared.counters;
    let mut iter: u32 = 0;
    let mut next_token: u64 = 0;
    let mut last = sys::cycles();
    let mut policy = Policy::new(budget_us, batch_cap, sys::now_ns());
    // Transmit queues left with frames the peer refused: when to kick them
    // again, and the wait after that.
    let mut retry_at_ns = 0u64;
    let mut retry_gap_ns = KICK_RETRY_NS;
    c.publish_policy(&policy.view());
    if mode == WakeupMode::Adaptive {
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
                        let fd = if mode == WakeupMode::Adaptive {
                            rxq.notify_fd()
                        } else {
                            None
                        };
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
        let spin_ns = policy.spin_ns();
        let mut moved = 0u64;
        let mut full = false;
        let mut unarmed = 0usize;
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
                if mode == WakeupMode::Adaptive
                    && s.fd.is_some()
                    && now_ns.saturating_sub(s.last_rx_ns) >= spin_ns
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
                continue;
            }
            s.last_rx_ns = now_ns;
            moved += n as u64;
            full |= n >= batch_cap;
            let bytes: u64 = rx.pkts().iter().map(|p| p.len() as u64).sum();
            let runts = rx.retain(|p| p.len() >= ETH_HDR_B);
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
            // holds whenever the counters are read between batches.
            entry.counters.add_drops(DropReason::Runt, runts as u64);
            let qc =
                &entry.counters.queues[(s.queue as usize).min(entry.counters.queues.len() - 1)];
            qc.rx_bytes.fetch_add(bytes, Relaxed);
            qc.rx_packets.fetch_add(n as u64, Release);
        }
        drop(logic_g);
        drop(table_g);

        let now = sys::cycles();
        let busy_this = now.wrapping_sub(last);
        if moved > 0 {
            c.packets.fetch_add(moved, Relaxed);
            c.batches.fetch_add(1, Relaxed);
            c.busy_cycles.fetch_add(busy_this, Relaxed);
        } else {
            c.idle_cycles.fetch_add(now.wrapping_sub(last), Relaxed);
        }
        last = now;

        if mode == WakeupMode::Poll {
            if slots.is_empty() {
                // Nothing to poll: wait for a command instead of spinning.
                epoll.wait(&mut events, SLEEP_MS);
                shared.mailbox.wake.drain();
            }
            continue;
        }

        // Adaptive: the policy decides between polling on, a nap (interrupt
        // moderation under dense traffic) and sleeping on notifications.
        iter = iter.wrapping_add(1);
        let any_armed = unarmed < slots.len();
        let next = policy.after_poll(now_ns, moved, full);
        let mut look = any_armed && iter.is_multiple_of(EPOLL_EVERY);
        if let Next::Nap(ns) = next {
            c.naps.fetch_add(1, Relaxed);
            let (cpu0, t0) = (sys::thread_cpu_ns(), sys::now_ns());
            std::thread::sleep(std::time::Duration::from_nanos(ns));
            let (cpu1, t1) = (sys::thread_cpu_ns(), sys::now_ns());
            policy.slept(Slept::Nap, ns, t1 - t0, cpu1.saturating_sub(cpu0), t1);
            c.account_sleep(t1 - t0, cpu1.saturating_sub(cpu0), &policy.view());
            let now = sys::cycles();
            c.idle_cycles.fetch_add(now.wrapping_sub(last), Relaxed);
            last = now;
            look = any_armed;
        }
        let all_armed = unarmed == 0;
        let mut timeout = if all_armed && next == Next::Sleep {
            SLEEP_MS
        } else if all_armed {
            // armed queues only, but the policy still spins: look, don't wait
            0
        } else if next == Next::Sleep && moved == 0 {
            // Only queues without notifications are left and they are idle:
            // back off instead of spinning.
            std::thread::sleep(std::time::Duration::from_micros(50));
            continue;
        } else if look {
            0
        } else {
            continue;
        };
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
            c.sleeps.fetch_add(1, Relaxed);
            (sys::thread_cpu_ns(), sys::now_ns())
        } else {
            (0, 0)
        };
        let n = epoll.wait(&mut events, timeout);
        let woke_ns = sys::now_ns();
        let mut woken = false;
        for ev in &events[..n] {
            let tok = ev.u64;
            if tok == WAKE_TOKEN {
                shared.mailbox.wake.drain();
            } else if let Some(s) = slots.iter_mut().find(|s| s.token == tok) {
                s.rxq.ack_notify();
                if s.armed {
                    s.rxq.set_notify(false);
                    s.armed = false;
                    s.last_rx_ns = woke_ns;
                    woken = true;
                }
            }
        }
        if timeout > 0 {
            let cpu1 = sys::thread_cpu_ns();
            let cpu = cpu1.saturating_sub(cpu0);
            if woken {
                c.wakeups.fetch_add(1, Relaxed);
                // Sleeps cut short by the 100 ms cap or a command are not
                // what a wake-up on traffic costs.
                policy.slept(Slept::Interrupt, 0, woke_ns - t0, cpu, woke_ns);
            } else {
                policy.slept_idle(woke_ns - t0, cpu, woke_ns);
            }
            c.account_sleep(woke_ns - t0, cpu, &policy.view());
            let now = sys::cycles();
            c.idle_cycles.fetch_add(now.wrapping_sub(last), Relaxed);
            last = now;
        }
    }
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
