//! Counters. Hot counters are updated once per batch (not per packet) with
//! relaxed atomics; every struct is cache-line aligned so workers updating
//! different ports or queues do not share lines.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::drop::DropReason;

/// Counters of one queue pair of a port.
#[repr(align(64))]
#[derive(Default, Debug)]
pub struct QueueCounters {
    /// Frames received on this queue (including those later dropped).
    pub rx_packets: AtomicU64,
    /// Bytes received on this queue.
    pub rx_bytes: AtomicU64,
    /// Frames written to this queue's transmit ring. Written only under
    /// the queue's [`crate::TxLock`] (a load and a store, no locked add):
    /// see [`PortCounters::reset_tx`].
    pub tx_packets: AtomicU64,
    /// Bytes written to this queue's transmit ring (as `tx_packets`).
    pub tx_bytes: AtomicU64,
    /// Receive bursts that found this queue's ring full
    /// ([`crate::RxQueue::fill_level`]): the peer could add no frame until
    /// the worker drained it — the switch pushed back (or the peer
    /// dropped). 0 for kernel queues, whose ring level is not known.
    pub rx_ring_full: AtomicU64,
}

/// Counters of one port. Drops on the way in (runt, the logic's reasons,
/// hairpin, no_port) are counted on the ingress port; drops on the way out
/// (oversize, tx_full, link_down) on the destination port.
#[derive(Debug)]
pub struct PortCounters {
    /// One entry per queue pair.
    pub queues: Box<[QueueCounters]>,
    drops: Box<[DropCell]>,
}

#[repr(align(64))]
#[derive(Default, Debug)]
struct DropCell(AtomicU64);

impl PortCounters {
    /// Zeroed counters for a port with `queues` queue pairs.
    pub fn new(queues: u16) -> Self {
        Self {
            queues: (0..queues.max(1))
                .map(|_| QueueCounters::default())
                .collect(),
            drops: (0..DropReason::COUNT)
                .map(|_| DropCell::default())
                .collect(),
        }
    }

    /// Adds `n` drops for `reason`.
    #[inline]
    pub fn add_drops(&self, reason: DropReason, n: u64) {
        if n != 0 {
            self.drops[reason.index()].0.fetch_add(n, Relaxed);
        }
    }

    /// Drops counted for `reason`.
    pub fn drops(&self, reason: DropReason) -> u64 {
        self.drops[reason.index()].0.load(Relaxed)
    }

    /// Sum over all reasons.
    pub fn total_drops(&self) -> u64 {
        DropReason::ALL.iter().map(|r| self.drops(*r)).sum()
    }

    /// Sum of a queue field over all queues.
    pub fn sum(&self, f: impl Fn(&QueueCounters) -> &AtomicU64) -> u64 {
        self.queues.iter().map(|q| f(q).load(Relaxed)).sum()
    }

    /// Zeroes the receive counters of queue `q`. The worker owning the
    /// queue writes them with plain stores: it calls this itself
    /// ([`crate::worker::WorkerCmd::ResetCounters`]).
    pub fn reset_rx(&self, q: usize) {
        if let Some(c) = self.queues.get(q) {
            c.rx_packets.store(0, Relaxed);
            c.rx_bytes.store(0, Relaxed);
            c.rx_ring_full.store(0, Relaxed);
        }
    }

    /// Zeroes the transmit counters of queue `q`. Workers write them
    /// under that queue's [`crate::TxLock`] with plain stores (one sender
    /// at a time): the caller holds the lock, or a concurrent batch could
    /// write back what it read before the reset.
    pub fn reset_tx(&self, q: usize) {
        if let Some(c) = self.queues.get(q) {
            c.tx_packets.store(0, Relaxed);
            c.tx_bytes.store(0, Relaxed);
        }
    }

    /// Zeroes everything (stats.reset); see [`PortCounters::reset_tx`]
    /// for the transmit counters of a port that may be sending.
    pub fn reset(&self) {
        for q in self.queues.iter() {
            q.rx_packets.store(0, Relaxed);
            q.rx_bytes.store(0, Relaxed);
            q.tx_packets.store(0, Relaxed);
            q.tx_bytes.store(0, Relaxed);
            q.rx_ring_full.store(0, Relaxed);
        }
        for d in self.drops.iter() {
            d.0.store(0, Relaxed);
        }
    }
}

/// Counters of one worker thread. Cycles come from the TSC (see
/// `sys::cycles`); busy = loop iterations that moved at least one packet.
/// Written by the worker alone, with plain stores (no locked add): it
/// zeroes them itself on `stats.reset`
/// ([`crate::worker::WorkerCmd::ResetCounters`]).
#[repr(align(64))]
#[derive(Default, Debug)]
pub struct WorkerCounters {
    /// Frames received (before any drop).
    pub packets: AtomicU64,
    /// Non-empty bursts processed.
    pub batches: AtomicU64,
    /// Cycles spent in iterations that moved packets.
    pub busy_cycles: AtomicU64,
    /// Cycles spent polling empty queues or sleeping.
    pub idle_cycles: AtomicU64,
    /// Of `busy_cycles`, the cycles spent in kicks to peers (their system
    /// calls: eventfd writes, and AF_XDP's `sendto`, which in copy mode
    /// transmits the frames): what is left is the worker's own code.
    pub kick_cycles: AtomicU64,
    /// Times the worker slept in epoll waiting for notifications.
    pub sleeps: AtomicU64,
    /// Sleeps that ended because a queue signalled frames.
    pub wakeups: AtomicU64,
    /// Armed queues found holding frames after a sleep no notification
    /// ended (its timeout, a wake probe, a command): the peer's kick never
    /// came (a peer that reads our interrupt flag before its index store
    /// is seen, as DPDK's, VPP's and libmemif's memif transmit may). Those
    /// frames waited for the sleep's end instead of for ever.
    pub missed_kicks: AtomicU64,
    /// Naps after a batch (interrupt moderation under dense traffic).
    pub naps: AtomicU64,
    /// Gaps after a small batch of a dense flow, poll or interrupt regime
    /// (spins before the next
    /// poll, counted in `idle_cycles`).
    pub gaps: AtomicU64,
    /// Back-off sleeps (50 µs, outside epoll) between polls of idle queues
    /// that have no notifications (counted in `asleep_ns`, not `sleeps`).
    pub backoffs: AtomicU64,
    /// Wall time spent sleeping or napping, ns.
    pub asleep_ns: AtomicU64,
    /// The worker's own CPU time inside sleeps and naps, ns (the price of
    /// the wake-ups).
    pub sleep_cpu_ns: AtomicU64,
    /// Of `asleep_ns`, the time the worker, its nap over or woken by its
    /// prober, waited on a run queue for its CPU (another thread held it),
    /// ns: left out of the wake-up costs the policy judges sleeping by.
    pub held_ns: AtomicU64,
    /// Receive queues currently owned.
    pub rx_queues: AtomicU64,
    /// 1 while the worker streams its large copies into memif buffers, 0
    /// while it uses ordinary stores ([`crate::copymode`]).
    pub copy_stream_memif: AtomicU64,
    /// The same for vhost-user guests' buffers.
    pub copy_stream_vhost_user: AtomicU64,
    /// Probes of the other way of copying completed
    /// ([`crate::copymode::CopyChooser::probes`]), since the worker
    /// started.
    pub copy_probes: AtomicU64,
    /// Of those, the ones that changed the way.
    pub copy_switches: AtomicU64,
    /// The wake-up policy's state, as last published (see [`PolicyCounters`]).
    pub policy: PolicyCounters,
}

/// The adaptive policy's state, published by the worker after each sleep
/// and once per decision window (see [`crate::wakeup::PolicyView`]).
#[derive(Default, Debug)]
pub struct PolicyCounters {
    /// Latency budget, ns.
    pub budget_ns: AtomicU64,
    /// The regime ([`crate::wakeup::Regime::to_code`]).
    pub regime: AtomicU64,
    /// Why ([`crate::wakeup::Why::to_code`]).
    pub why: AtomicU64,
    /// 1 while moderating (napping after batches), else 0.
    pub moderating: AtomicU64,
    /// Current nap length, ns.
    pub nap_ns: AtomicU64,
    /// The gap chosen after the last small batch, ns (poll and interrupt
    /// regimes).
    pub gap_ns: AtomicU64,
    /// How long the queues must be idle before the worker sleeps, ns.
    pub sleep_after_ns: AtomicU64,
    /// Wake-up latency, median and p99 of the last samples, ns.
    pub wake_p50_ns: AtomicU64,
    /// See `wake_p50_ns`.
    pub wake_p99_ns: AtomicU64,
    /// Wake-up latency samples taken.
    pub wake_samples: AtomicU64,
    /// Poll latency p99 of the recent samples, ns.
    pub poll_p99_ns: AtomicU64,
    /// Slow poll epochs in a row (the evidence for `contended`).
    pub poll_slow_epochs: AtomicU64,
    /// What the last poll epoch was judged on
    /// ([`crate::wakeup::Evidence::to_code`]).
    pub contention_signal: AtomicU64,
    /// Run-queue wait over the last poll epoch, ‰ of the runnable time.
    pub rq_wait_permille: AtomicU64,
    /// Timer overshoot, median and p99 of the last samples, ns.
    pub timer_p50_ns: AtomicU64,
    /// See `timer_p50_ns`.
    pub timer_p99_ns: AtomicU64,
    /// Shortest ring fill time at the measured arrival rates, ns.
    pub ring_fill_ns: AtomicU64,
    /// Estimated CPU cost of one sleep on notifications, ns.
    pub sleep_cpu_ns: AtomicU64,
    /// Estimated CPU cost of one nap, ns.
    pub nap_cpu_ns: AtomicU64,
    /// Estimated overshoot of a nap, ns.
    pub nap_overshoot_ns: AtomicU64,
    /// Naps the frame-weighted nap bound is computed over (0: not yet).
    pub nap_tail_naps: AtomicU64,
    /// The part of the budget left for the pass before a nap, ns.
    pub nap_pass_ns: AtomicU64,
    /// Until naps vetoed by their own overshoots are tried again, ns.
    pub nap_retry_in_ns: AtomicU64,
    /// Estimated wake-up latency seen by traffic, ns.
    pub wake_latency_ns: AtomicU64,
}

impl PolicyCounters {
    /// The published state.
    pub fn view(&self) -> crate::wakeup::PolicyView {
        crate::wakeup::PolicyView {
            budget_ns: self.budget_ns.load(Relaxed),
            regime: crate::wakeup::Regime::from_code(self.regime.load(Relaxed)),
            why: crate::wakeup::Why::from_code(self.why.load(Relaxed)),
            moderating: self.moderating.load(Relaxed) != 0,
            nap_ns: self.nap_ns.load(Relaxed),
            gap_ns: self.gap_ns.load(Relaxed),
            sleep_after_ns: self.sleep_after_ns.load(Relaxed),
            wake_p50_ns: self.wake_p50_ns.load(Relaxed),
            wake_p99_ns: self.wake_p99_ns.load(Relaxed),
            wake_samples: self.wake_samples.load(Relaxed),
            poll_p99_ns: self.poll_p99_ns.load(Relaxed),
            poll_slow_epochs: self.poll_slow_epochs.load(Relaxed),
            contention_signal: crate::wakeup::Evidence::from_code(
                self.contention_signal.load(Relaxed),
            ),
            rq_wait_permille: self.rq_wait_permille.load(Relaxed),
            timer_p50_ns: self.timer_p50_ns.load(Relaxed),
            timer_p99_ns: self.timer_p99_ns.load(Relaxed),
            ring_fill_ns: self.ring_fill_ns.load(Relaxed),
            sleep_cpu_ns: self.sleep_cpu_ns.load(Relaxed),
            nap_cpu_ns: self.nap_cpu_ns.load(Relaxed),
            nap_overshoot_ns: self.nap_overshoot_ns.load(Relaxed),
            nap_tail_naps: self.nap_tail_naps.load(Relaxed),
            nap_pass_ns: self.nap_pass_ns.load(Relaxed),
            nap_retry_in_ns: self.nap_retry_in_ns.load(Relaxed),
            wake_latency_ns: self.wake_latency_ns.load(Relaxed),
        }
    }
}

impl WorkerCounters {
    /// Zeroes the counters (not `rx_queues` nor the policy's state).
    pub fn reset(&self) {
        for c in [
            &self.packets,
            &self.batches,
            &self.busy_cycles,
            &self.idle_cycles,
            &self.kick_cycles,
            &self.sleeps,
            &self.wakeups,
            &self.missed_kicks,
            &self.naps,
            &self.gaps,
            &self.backoffs,
            &self.asleep_ns,
            &self.sleep_cpu_ns,
            &self.held_ns,
        ] {
            c.store(0, Relaxed);
        }
    }

    /// Publishes the copy chooser's ways and counts.
    pub fn publish_copy(&self, c: &crate::copymode::CopyChooser) {
        use crate::sys::CopyInto;
        let w = c.streaming();
        self.copy_stream_memif
            .store(w[CopyInto::Memif as usize] as u64, Relaxed);
        self.copy_stream_vhost_user
            .store(w[CopyInto::VhostUser as usize] as u64, Relaxed);
        self.copy_probes.store(c.probes(), Relaxed);
        self.copy_switches.store(c.switches(), Relaxed);
    }

    /// Publishes the policy's state.
    pub fn publish_policy(&self, v: &crate::wakeup::PolicyView) {
        let p = &self.policy;
        p.budget_ns.store(v.budget_ns, Relaxed);
        p.regime.store(v.regime.to_code(), Relaxed);
        p.why.store(v.why.to_code(), Relaxed);
        p.moderating.store(v.moderating as u64, Relaxed);
        p.nap_ns.store(v.nap_ns, Relaxed);
        p.gap_ns.store(v.gap_ns, Relaxed);
        p.sleep_after_ns.store(v.sleep_after_ns, Relaxed);
        p.wake_p50_ns.store(v.wake_p50_ns, Relaxed);
        p.wake_p99_ns.store(v.wake_p99_ns, Relaxed);
        p.wake_samples.store(v.wake_samples, Relaxed);
        p.poll_p99_ns.store(v.poll_p99_ns, Relaxed);
        p.poll_slow_epochs.store(v.poll_slow_epochs, Relaxed);
        p.contention_signal
            .store(v.contention_signal.to_code(), Relaxed);
        p.rq_wait_permille.store(v.rq_wait_permille, Relaxed);
        p.timer_p50_ns.store(v.timer_p50_ns, Relaxed);
        p.timer_p99_ns.store(v.timer_p99_ns, Relaxed);
        p.ring_fill_ns.store(v.ring_fill_ns, Relaxed);
        p.sleep_cpu_ns.store(v.sleep_cpu_ns, Relaxed);
        p.nap_cpu_ns.store(v.nap_cpu_ns, Relaxed);
        p.nap_overshoot_ns.store(v.nap_overshoot_ns, Relaxed);
        p.nap_tail_naps.store(v.nap_tail_naps, Relaxed);
        p.nap_pass_ns.store(v.nap_pass_ns, Relaxed);
        p.nap_retry_in_ns.store(v.nap_retry_in_ns, Relaxed);
        p.wake_latency_ns.store(v.wake_latency_ns, Relaxed);
    }

    /// Accounts one sleep or nap of `wall_ns` that cost `cpu_ns`, and
    /// publishes the policy's state.
    pub fn account_sleep(&self, wall_ns: u64, cpu_ns: u64, v: &crate::wakeup::PolicyView) {
        crate::worker::bump(&self.asleep_ns, wall_ns);
        crate::worker::bump(&self.sleep_cpu_ns, cpu_ns);
        self.publish_policy(v);
    }
}
