//! The worker loop: receive a burst, drop runts, classify, forward,
//! release; and the wake-up model of DESIGN.md.
//!
//! - `Poll`: every owned receive queue is polled on every iteration; the
//!   worker never sleeps (what DPDK-style switches do).
//! - `Adaptive` (default): a queue that stayed empty for `IDLE_POLLS`
//!   consecutive polls is *armed* — its notifications are enabled, with the
//!   re-check that prevents a lost wake-up — and no longer polled. Armed
//!   queues are watched through epoll (looked at without waiting every
//!   `EPOLL_EVERY` iterations while other queues are busy). When every queue
//!   is armed the worker sleeps in epoll. A queue whose fd fires is
//!   disarmed and polled again.
//!   Light but steady traffic never leaves a queue empty for long, so on
//!   top of that the worker moderates itself as a NIC moderates interrupts:
//!   while it was busy less than `LIGHT_UTIL_PCT` % of the last ~1 ms, it
//!   naps after each batch and lets frames gather in the rings: the nap
//!   starts at 5 µs, doubles (up to `NAP_MAX_US`) while wakes find less
//!   than half a batch, halves when they find a full one. So CPU use
//!   follows load, while a worker busy a quarter of the time or more polls
//!   (poll-mode latency); a nap adds at most `NAP_MAX_US` of latency at low
//!   load. Each sleep costs a wake-up, which on virtual machines can be
//!   tens of µs of CPU: that is why the naps aim at large batches.
//!
//! Commands from the control plane (add a receive queue, remove a port,
//! stop) are picked up between batches.

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

/// Consecutive empty polls after which an adaptive worker arms a queue.
pub const IDLE_POLLS: u32 = 2048;
/// While some queues are busy, look at armed queues every this many loops.
pub const EPOLL_EVERY: u32 = 64;
/// A worker busy less than this share of a window (%) is lightly loaded.
pub const LIGHT_UTIL_PCT: u64 = 25;
/// Utilisation window, in cycles (about a millisecond).
const WINDOW_CYCLES: u64 = 1 << 21;
/// Longest nap under light load (µs).
pub const NAP_MAX_US: u64 = 250;
/// Longest sleep, so commands and link changes are seen (ms).
const SLEEP_MS: i32 = 100;
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
        Ok(Self { cmds: Mutex::new(Vec::new()), pending: AtomicBool::new(false), wake: EventFd::new()? })
    }

    /// Wakes the worker if it sleeps (it then starts a new iteration).
    pub fn kick(&self) {
        self.wake.notify();
    }

    /// Queues a command and wakes the worker.
    pub fn post(&self, cmd: WorkerCmd) {
        self.cmds.lock().push(cmd);
        self.pending.store(true, std::sync::atomic::Ordering::Release);
        self.wake.notify();
    }
}

struct RxSlot {
    port: PortId,
    queue: QueueId,
    rxq: Box<dyn RxQueue>,
    idle: u32,
    armed: bool,
    fd: Option<i32>,
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
) {
    shared.tid.store(sys::gettid(), Relaxed);
    let max_ports = table.load().capacity();
    let mut fwd = Forwarder::new(shared.id, max_ports, batch_cap);
    let mut batch = RxBatch::with_capacity(batch_cap);
    let mut verdicts = vec![Verdict::Flood; batch_cap].into_boxed_slice();
    let mut slots: Vec<RxSlot> = Vec::with_capacity(64);
    let epoll = Epoll::new().expect("epoll_create1");
    const WAKE_TOKEN: u64 = u64::MAX;
    epoll.add(shared.mailbox.wake.fd(), WAKE_TOKEN).expect("epoll add eventfd");
    let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 64];
    let c = &shared.counters;
    let mut iter: u32 = 0;
    let mut last = sys::cycles();
    let mut nap_us = 0u64;
    let (mut light, mut win_start, mut win_cycles, mut win_busy) = (false, last, 0u64, 0u64);
    if mode == WakeupMode::Adaptive {
        sys::set_timer_slack_ns(1_000);
    }

    loop {
        shared.epoch.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        // Control commands, between batches.
        if shared.mailbox.pending.load(std::sync::atomic::Ordering::Acquire) {
            let cmds = std::mem::take(&mut *shared.mailbox.cmds.lock());
            shared.mailbox.pending.store(false, Relaxed);
            for cmd in cmds {
                match cmd {
                    WorkerCmd::AddRx { port, queue, rxq } => {
                        let fd = if mode == WakeupMode::Adaptive { rxq.notify_fd() } else { None };
                        let token = slots.len() as u64;
                        if let Some(fd) = fd {
                            if epoll.add(fd, token).is_err() {
                                // Fall back to polling this queue.
                            }
                        }
                        slots.push(RxSlot { port, queue, rxq, idle: 0, armed: false, fd });
                    }
                    WorkerCmd::RemovePort { port, done } => {
                        for s in slots.iter().filter(|s| s.port == port) {
                            if let Some(fd) = s.fd {
                                epoll.remove(fd);
                            }
                        }
                        slots.retain(|s| s.port != port);
                        // Tokens are slot indexes: re-register the rest.
                        for (i, s) in slots.iter_mut().enumerate() {
                            if let Some(fd) = s.fd {
                                epoll.remove(fd);
                                let _ = epoll.add(fd, i as u64);
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
        let ctx = Ctx { now_ns: sys::coarse_now_ns(), worker: shared.id };
        let mut moved = 0u64;
        let mut unarmed = 0usize;
        for s in slots.iter_mut() {
            if s.armed {
                continue;
            }
            unarmed += 1;
            let Some(entry) = table_g.get(s.port) else { continue };
            batch.clear();
            batch.port = s.port;
            batch.queue = s.queue;
            let n = s.rxq.burst(&mut batch);
            if n == 0 {
                s.idle += 1;
                if mode == WakeupMode::Adaptive && s.idle >= IDLE_POLLS && s.fd.is_some() {
                    if s.rxq.set_notify(true) {
                        // Frames slipped in: keep polling.
                        s.rxq.set_notify(false);
                        s.idle = 0;
                    } else {
                        s.armed = true;
                    }
                }
                continue;
            }
            s.idle = 0;
            moved += n as u64;
            let bytes: u64 = batch.pkts().iter().map(|p| p.len() as u64).sum();
            let runts = batch.retain(|p| p.len() >= ETH_HDR_B);
            let m = batch.len();
            if m > 0 {
                logic_g.0.classify(&ctx, s.port, batch.pkts_mut(), &mut verdicts[..m]);
                fwd.forward(&table_g, logic_g.0.as_ref(), entry, batch.pkts(), &verdicts[..m]);
            }
            s.rxq.release();
            // Counted once the batch is done, so received = sent + drops
            // holds whenever the counters are read between batches.
            entry.counters.add_drops(DropReason::Runt, runts as u64);
            let qc = &entry.counters.queues[(s.queue as usize).min(entry.counters.queues.len() - 1)];
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

        // Adaptive, light load: nap so frames gather (interrupt moderation).
        // Only while the worker was busy less than `LIGHT_UTIL_PCT` % of the
        // last window, so medium and high loads keep poll-mode latency. The
        // nap doubles while a wake finds less than half a batch and halves
        // when it finds a full one; below 5 µs the worker polls again.
        win_cycles += now.wrapping_sub(win_start);
        win_start = now;
        if moved > 0 {
            win_busy += busy_this;
        }
        if win_cycles >= WINDOW_CYCLES {
            light = win_busy * 100 < win_cycles * LIGHT_UTIL_PCT;
            win_cycles = 0;
            win_busy = 0;
        }
        let cap = batch_cap as u64;
        if !light {
            nap_us = 0;
        } else if moved > 0 {
            if nap_us == 0 {
                nap_us = 5;
            } else if moved >= cap {
                nap_us /= 2;
            } else if moved < cap / 2 {
                nap_us = (nap_us * 2).min(NAP_MAX_US);
            }
            if nap_us < 5 {
                nap_us = 0;
            }
        }
        let napped = moved > 0 && nap_us > 0;
        if napped {
            c.sleeps.fetch_add(1, Relaxed);
            std::thread::sleep(std::time::Duration::from_micros(nap_us));
            let now = sys::cycles();
            c.idle_cycles.fetch_add(now.wrapping_sub(last), Relaxed);
            last = now;
        }

        // Adaptive: look at armed queues now and then (and after every nap),
        // or sleep when all are armed.
        iter = iter.wrapping_add(1);
        let all_armed = unarmed == 0;
        let any_armed = slots.iter().any(|s| s.armed);
        let timeout = if all_armed {
            SLEEP_MS
        } else if any_armed && (napped || iter % EPOLL_EVERY == 0) {
            0
        } else if moved == 0 && slots.iter().all(|s| s.armed || s.fd.is_none()) && unarmed > 0
            && slots.iter().filter(|s| !s.armed).all(|s| s.idle >= IDLE_POLLS)
        {
            // Only notification-less queues left and they are idle: back off.
            std::thread::sleep(std::time::Duration::from_micros(50));
            continue;
        } else {
            continue;
        };
        if timeout > 0 {
            c.sleeps.fetch_add(1, Relaxed);
        }
        let n = epoll.wait(&mut events, timeout);
        for ev in &events[..n] {
            let tok = ev.u64;
            if tok == WAKE_TOKEN {
                shared.mailbox.wake.drain();
            } else if let Some(s) = slots.get_mut(tok as usize) {
                s.rxq.ack_notify();
                if s.armed {
                    s.rxq.set_notify(false);
                    s.armed = false;
                    s.idle = 0;
                }
            }
        }
        if timeout > 0 {
            let now = sys::cycles();
            c.idle_cycles.fetch_add(now.wrapping_sub(last), Relaxed);
            last = now;
        }
    }
}
