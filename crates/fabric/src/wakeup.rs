//! The adaptive wake-up policy: when a worker polls, naps or sleeps.
//!
//! A pure state machine, driven by the worker loop with the current time
//! and what each poll moved, so it is tested with a fake clock. The worker
//! tells it what each sleep cost (CPU time of the sleeping thread, and how
//! far a nap overshot), and the policy keeps running estimates of those
//! costs: they differ by an order of magnitude between hosts (a nested VM
//! here pays 17–30 µs of CPU per sleep, bare metal 1–3 µs), so nothing is
//! hard-wired to one host.
//!
//! Three ways to wait, cheapest latency first (docs/architecture.md,
//! "Wake-up"):
//!
//! - **poll**: look at the rings again. No latency, a full core.
//! - **interrupt**: when a poll finds the rings empty for `SPIN_NS`, arm
//!   every queue's notification (the peer's eventfd or socket readiness)
//!   and sleep in epoll until frames arrive. Adds the host's wake-up
//!   latency; costs one wake-up per sleep, so CPU follows the rate at which
//!   the peer signals.
//! - **moderate**: after a batch, nap for `budget − overshoot` so frames
//!   gather (NIC interrupt moderation). Adds at most the budget; costs one
//!   timer wake-up per nap, however dense the traffic.
//!
//! Dense traffic makes interrupts expensive (a wake-up every few frames, or
//! no sleep at all once frames come closer than the spin time); naps then
//! cost less. Every `WINDOW_NS` the policy compares the *overhead per
//! frame* (CPU not spent processing frames: spinning, sleeping, waking) of
//! the two — measured for the regime it is in, predicted for the other from
//! the measured costs of a sleep, a nap and the observed wake-up batching —
//! and switches when the other is cheaper by `HYSTERESIS_PERMILLE`.
//! A worker that found a full batch polls on (it is behind; sleeping would
//! only add latency). A latency budget of 0 never naps and sleeps only after
//! `IDLE_NS` without frames: poll-mode latency while traffic flows.

/// Polling an empty ring this long before arming (covers the gaps inside a
/// burst; longer spins keep a dense stream from ever sleeping).
pub const SPIN_NS: u64 = 2_000;
/// With a budget of 0: sleep only after this long without frames.
pub const IDLE_NS: u64 = 1_000_000;
/// Regime decisions are taken once per window.
pub const WINDOW_NS: u64 = 1_000_000;
/// Switch regime only when the other is this much cheaper (×1000).
pub const HYSTERESIS_PERMILLE: u64 = 1_250;
/// Shortest nap worth taking (ns): below it the timer costs more than it saves.
pub const MIN_NAP_NS: u64 = 5_000;
/// Default latency budget (µs) of an adaptive worker.
pub const DEFAULT_BUDGET_US: u32 = 100;
/// Largest accepted budget (µs).
pub const MAX_BUDGET_US: u32 = 10_000;

/// What the worker should do next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Poll the rings again.
    Poll,
    /// Nap this many nanoseconds, then poll.
    Nap(u64),
    /// Arm every queue and sleep until one signals.
    Sleep,
}

/// Which way of waiting the policy uses while traffic flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Regime {
    /// Sleep on notifications when the rings run dry.
    Interrupt,
    /// Nap after each batch.
    Moderate,
}

/// Kinds of sleep the worker reports back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slept {
    /// An epoll wait for notifications (woken by a peer or the mailbox).
    Interrupt,
    /// A timed nap.
    Nap,
}

/// Running estimate: an exponentially weighted mean with weight 1/8, each
/// sample clamped to at most twice the estimate (a virtual CPU descheduled
/// for a millisecond must not make every later nap zero).
#[derive(Clone, Copy, Debug)]
struct Ewma(Option<u64>);

impl Ewma {
    fn add(&mut self, x: u64) {
        self.0 = Some(match self.0 {
            None => x,
            Some(m) => {
                let x = x.min(m.saturating_mul(2).max(1_000));
                m - m / 8 + x / 8
            }
        });
    }
    fn get(&self) -> Option<u64> {
        self.0
    }
}

/// The policy of one worker.
#[derive(Clone, Debug)]
pub struct Policy {
    budget_ns: u64,
    batch_cap: u64,
    regime: Regime,
    /// Last poll that moved frames, and the previous call's time.
    last_work_ns: u64,
    prev_ns: u64,
    /// The current decision window: start, frames, time spent processing
    /// frames, time asleep, CPU spent in sleeps, interrupt sleeps.
    win_start_ns: u64,
    win_frames: u64,
    win_busy_ns: u64,
    win_asleep_ns: u64,
    win_sleep_cpu_ns: u64,
    win_sleeps: u64,
    /// Frames an interrupt wake-up found beyond the first, per ns of
    /// rate: the host's wake-up latency as the traffic sees it (ns).
    wake_lat: Ewma,
    sleep_cpu: Ewma,
    nap_cpu: Ewma,
    nap_overshoot: Ewma,
    /// Overhead (CPU not spent on frames) per interrupt sleep and per nap,
    /// measured over whole windows in each regime: besides the sleep itself,
    /// the spin before it, arming and disarming, the kernel's wake-up path.
    int_overhead: Ewma,
    nap_overhead: Ewma,
    naps_in_window: u64,
    /// Frames per second over the last window with traffic.
    rate_fps: u64,
}

/// A snapshot for stats.
#[derive(Clone, Copy, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct PolicyView {
    /// Latency budget, ns.
    pub budget_ns: u64,
    /// True while moderating (napping after batches).
    pub moderating: bool,
    /// Current nap length, ns (0 when not moderating).
    pub nap_ns: u64,
    /// Estimated CPU cost of one interrupt sleep, ns (0 = none measured yet).
    pub sleep_cpu_ns: u64,
    /// Estimated CPU cost of one nap, ns (0 = none measured yet).
    pub nap_cpu_ns: u64,
    /// Estimated nap overshoot, ns (0 = none measured yet).
    pub nap_overshoot_ns: u64,
    /// Estimated wake-up latency seen by traffic, ns (0 = none measured yet).
    pub wake_latency_ns: u64,
}

impl Policy {
    /// A policy with a latency budget of `budget_us` for batches of up to
    /// `batch_cap` frames, starting at `now_ns`.
    pub fn new(budget_us: u32, batch_cap: usize, now_ns: u64) -> Self {
        Self {
            budget_ns: budget_us.min(MAX_BUDGET_US) as u64 * 1_000,
            batch_cap: batch_cap.max(1) as u64,
            regime: Regime::Interrupt,
            last_work_ns: now_ns,
            prev_ns: now_ns,
            win_start_ns: now_ns,
            win_frames: 0,
            win_busy_ns: 0,
            win_asleep_ns: 0,
            win_sleep_cpu_ns: 0,
            win_sleeps: 0,
            wake_lat: Ewma(None),
            sleep_cpu: Ewma(None),
            nap_cpu: Ewma(None),
            nap_overshoot: Ewma(None),
            int_overhead: Ewma(None),
            nap_overhead: Ewma(None),
            naps_in_window: 0,
            rate_fps: 0,
        }
    }

    /// How long a queue must stay empty before it is armed.
    pub fn spin_ns(&self) -> u64 {
        if self.budget_ns == 0 {
            IDLE_NS
        } else {
            SPIN_NS
        }
    }

    /// The regime in force.
    pub fn regime(&self) -> Regime {
        self.regime
    }

    /// Nap length when moderating: the budget less the expected overshoot,
    /// and no longer than it takes the current rate to bring two batches (more
    /// would only pile frames up in the rings, and overflow them); 0 when
    /// that leaves less than `MIN_NAP_NS`.
    pub fn nap_ns(&self) -> u64 {
        // Before the first nap has shown the overshoot, assume half the budget.
        let over = self.nap_overshoot.get().unwrap_or(self.budget_ns / 2);
        let mut n = self.budget_ns.saturating_sub(over);
        if self.rate_fps > 0 {
            n = n.min((2 * self.batch_cap as u128 * 1_000_000_000 / self.rate_fps as u128) as u64);
        }
        if n >= MIN_NAP_NS {
            n
        } else {
            0
        }
    }

    /// Stats view.
    pub fn view(&self) -> PolicyView {
        PolicyView {
            budget_ns: self.budget_ns,
            moderating: self.regime == Regime::Moderate,
            nap_ns: if self.regime == Regime::Moderate {
                self.nap_ns()
            } else {
                0
            },
            sleep_cpu_ns: self.sleep_cpu.get().unwrap_or(0),
            nap_cpu_ns: self.nap_cpu.get().unwrap_or(0),
            nap_overshoot_ns: self.nap_overshoot.get().unwrap_or(0),
            wake_latency_ns: self.wake_lat.get().unwrap_or(0),
        }
    }

    /// After one pass over the worker's queues that moved `moved` frames,
    /// `full` if some queue filled a whole batch.
    pub fn after_poll(&mut self, now_ns: u64, moved: u64, full: bool) -> Next {
        let took = now_ns.saturating_sub(self.prev_ns);
        self.prev_ns = now_ns;
        self.window(now_ns);
        if moved > 0 {
            self.last_work_ns = now_ns;
            self.win_frames += moved;
            self.win_busy_ns += took;
            if full || self.budget_ns == 0 || self.regime == Regime::Interrupt {
                return Next::Poll;
            }
            return match self.nap_ns() {
                0 => Next::Poll,
                n => Next::Nap(n),
            };
        }
        let quiet = now_ns.saturating_sub(self.last_work_ns);
        if quiet >= self.spin_ns() {
            Next::Sleep
        } else {
            Next::Poll
        }
    }

    /// The worker slept: `cpu_ns` of its own CPU time, `wall_ns` in all,
    /// ending at `end_ns`; a nap had asked for `asked_ns`.
    pub fn slept(&mut self, kind: Slept, asked_ns: u64, wall_ns: u64, cpu_ns: u64, end_ns: u64) {
        match kind {
            Slept::Interrupt => {
                self.sleep_cpu.add(cpu_ns);
                self.win_sleeps += 1;
            }
            Slept::Nap => {
                self.naps_in_window += 1;
                self.nap_cpu.add(cpu_ns);
                self.nap_overshoot.add(wall_ns.saturating_sub(asked_ns));
            }
        }
        self.win_asleep_ns += wall_ns;
        self.win_sleep_cpu_ns += cpu_ns;
        self.prev_ns = end_ns;
    }

    /// The worker slept without being woken by traffic (the sleep cap, a
    /// command): time asleep, not a sample of what a wake-up costs.
    pub fn slept_idle(&mut self, wall_ns: u64, cpu_ns: u64, end_ns: u64) {
        self.win_asleep_ns += wall_ns;
        self.win_sleep_cpu_ns += cpu_ns;
        self.prev_ns = end_ns;
    }

    /// Window bookkeeping and the regime decision.
    fn window(&mut self, now_ns: u64) {
        let span = now_ns.saturating_sub(self.win_start_ns);
        if span < WINDOW_NS {
            return;
        }
        let frames = self.win_frames;
        // CPU of the window: everything but the time asleep, plus what the
        // sleeps themselves cost; overhead = that less processing frames.
        let cpu = span.saturating_sub(self.win_asleep_ns) + self.win_sleep_cpu_ns;
        let overhead = cpu.saturating_sub(self.win_busy_ns);
        let sleeps = self.win_sleeps;
        let busy = self.win_busy_ns;
        let asleep = self.win_asleep_ns;
        let naps = self.naps_in_window;
        self.naps_in_window = 0;
        self.win_start_ns = now_ns;
        self.win_frames = 0;
        self.win_busy_ns = 0;
        self.win_asleep_ns = 0;
        self.win_sleep_cpu_ns = 0;
        self.win_sleeps = 0;
        if frames > 0 {
            self.rate_fps =
                (frames as u128 * 1_000_000_000 / span as u128).min(u64::MAX as u128) as u64;
        }
        let nap = self.nap_ns();
        if self.budget_ns == 0 || nap == 0 {
            // Nothing to moderate with: interrupts (or, budget 0, polling).
            self.regime = Regime::Interrupt;
            return;
        }
        if frames == 0 {
            return;
        }
        // Frame rate (per second) and processing cost per frame (ns).
        let rate = self.rate_fps as u128;
        let per_frame = busy / frames;
        // Only windows spent mostly asleep show the wake-up latency (a
        // worker that mostly polled found its frames by polling).
        if self.regime == Regime::Interrupt && sleeps > 0 && rate > 0 && asleep * 2 > span {
            // Each wake-up found frames/sleeps; those beyond the first
            // arrived during the wake-up: latency ≈ (found − 1) / rate.
            let extra =
                (frames.saturating_sub(sleeps)) as u128 * 1_000_000_000 / sleeps as u128 / rate;
            self.wake_lat.add(extra.min(u64::MAX as u128) as u64);
        }
        // What one sleep or nap really costs, all told.
        match self.regime {
            Regime::Interrupt if sleeps > 0 && asleep * 2 > span => {
                self.int_overhead.add(overhead / sleeps)
            }
            Regime::Moderate if naps > 0 => self.nap_overhead.add(overhead / naps),
            _ => {}
        }
        let measured = overhead as u128 * 1_000 / frames as u128; // ps per frame
        let (int_cost, mod_cost) = match self.regime {
            Regime::Interrupt => (measured, self.predict_moderate(rate, per_frame)),
            Regime::Moderate => (self.predict_interrupt(rate, per_frame), measured),
        };
        let h = HYSTERESIS_PERMILLE as u128;
        self.regime = match self.regime {
            Regime::Interrupt if int_cost * 1_000 > mod_cost * h => Regime::Moderate,
            Regime::Moderate if mod_cost * 1_000 > int_cost * h => Regime::Interrupt,
            r => r,
        };
    }

    /// Overhead per frame (ps) of napping at `rate` frames/s: one nap per
    /// nap period's worth of frames (at least 1, at most a batch).
    fn predict_moderate(&self, rate: u128, _per_frame: u64) -> u128 {
        let nap_cpu = self
            .nap_overhead
            .get()
            .or(self.nap_cpu.get())
            .or(self.sleep_cpu.get())
            .unwrap_or(0) as u128;
        let period = (self.nap_ns() + self.nap_overshoot.get().unwrap_or(0)) as u128;
        let per_nap = (rate * period / 1_000_000_000).clamp(1, self.batch_cap as u128);
        nap_cpu * 1_000 / per_nap
    }

    /// Overhead per frame (ps) of sleeping on notifications at `rate`
    /// frames/s: frames closer than the spin time keep the worker polling
    /// (the gap is all overhead); otherwise one sleep (and one spin) per
    /// wake-up, which finds the frames that came during its latency.
    fn predict_interrupt(&self, rate: u128, per_frame: u64) -> u128 {
        let gap = 1_000_000_000_000u128 / rate.max(1); // ps
        if gap < SPIN_NS as u128 * 1_000 {
            return gap.saturating_sub(per_frame as u128 * 1_000);
        }
        let per_sleep = match self.int_overhead.get() {
            Some(o) => o as u128,
            None => {
                self.sleep_cpu.get().or(self.nap_cpu.get()).unwrap_or(0) as u128 + SPIN_NS as u128
            }
        };
        let lat = self
            .wake_lat
            .get()
            .or(self.nap_overshoot.get())
            .unwrap_or(0) as u128;
        let per_wake = 1 + rate * lat / 1_000_000_000;
        per_sleep * 1_000 / per_wake
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: u64 = 1_000;
    const MS: u64 = 1_000_000;

    /// A fake host: each interrupt sleep costs `sleep_cpu`, each nap
    /// `nap_cpu` and overshoots by `over`. Frames arrive evenly every `gap`
    /// ns; the worker polls every `poll` ns while awake. Runs the policy for
    /// `dur` ns and returns (cpu ns, max frame wait ns, policy).
    struct Host {
        sleep_cpu: u64,
        nap_cpu: u64,
        over: u64,
        wake_lat: u64,
        poll: u64,
    }

    fn simulate(h: &Host, budget_us: u32, gap: u64, dur: u64) -> (u64, u64, Policy) {
        let mut p = Policy::new(budget_us, 256, 0);
        let (cpu, wait) = run_for(&mut p, h, |_| gap, 0, dur);
        (cpu, wait, p)
    }

    /// Runs `p` from `start` to `end` with frames every `gap(now)` ns;
    /// returns (cpu ns, max frame wait ns).
    fn run_for(
        p: &mut Policy,
        h: &Host,
        gap: impl Fn(u64) -> u64,
        start: u64,
        end: u64,
    ) -> (u64, u64) {
        let (mut now, mut next_arrival, mut cpu, mut max_wait) =
            (start, start + gap(start), 0u64, 0u64);
        let mut queued: Vec<u64> = Vec::new();
        while now < end {
            while next_arrival <= now {
                queued.push(next_arrival);
                next_arrival += gap(next_arrival);
            }
            let moved = queued.len().min(256) as u64;
            for t in queued.drain(..moved as usize) {
                max_wait = max_wait.max(now - t);
            }
            cpu += h.poll;
            now += h.poll;
            match p.after_poll(now, moved, moved == 256) {
                Next::Poll => {}
                Next::Nap(n) => {
                    now += n + h.over;
                    cpu += h.nap_cpu;
                    p.slept(Slept::Nap, n, n + h.over, h.nap_cpu, now);
                }
                Next::Sleep => {
                    // woken by the next arrival, after the wake-up latency
                    let until = next_arrival.max(now) + h.wake_lat;
                    let wall = until - now;
                    now = until;
                    cpu += h.sleep_cpu;
                    p.slept(Slept::Interrupt, 0, wall, h.sleep_cpu, now);
                }
            }
        }
        (cpu, max_wait)
    }

    const VM: Host = Host {
        sleep_cpu: 17 * US,
        nap_cpu: 25 * US,
        over: 25 * US,
        wake_lat: 40 * US,
        poll: 100,
    };
    const METAL: Host = Host {
        sleep_cpu: 2 * US,
        nap_cpu: 2 * US,
        over: 3 * US,
        wake_lat: 3 * US,
        poll: 100,
    };

    #[test]
    fn sparse_traffic_sleeps_on_interrupts() {
        // 10 kpps: a frame every 100 µs, a wake-up each.
        let (cpu, wait, p) = simulate(&VM, 100, 100 * US, 50 * MS);
        assert_eq!(p.regime(), Regime::Interrupt);
        assert!(wait <= VM.wake_lat + VM.poll * 2, "wait {wait}");
        // one sleep per frame: 17 µs of 100 µs
        let share = cpu * 100 / (50 * MS);
        assert!((15..=20).contains(&share), "cpu {share} %");
    }

    #[test]
    fn dense_traffic_moderates_when_naps_are_cheaper() {
        // 1 Mpps on the VM: interrupts would wake every ~40 frames
        // (17 µs per 40 µs); naps of 75 µs + 25 µs overshoot cost 25 µs per 100 µs.
        let (cpu, wait, p) = simulate(&VM, 100, US, 50 * MS);
        assert_eq!(p.regime(), Regime::Moderate);
        assert!(
            wait <= 100 * US + VM.poll * 4,
            "wait {wait} over the budget"
        );
        let share = cpu * 100 / (50 * MS);
        assert!(share <= 40, "cpu {share} %");
        assert!(p.view().nap_ns > 0 && p.view().moderating);
    }

    #[test]
    fn cheap_wakeups_keep_interrupts_under_dense_traffic() {
        // On metal a wake-up costs 2 µs: waking every ~3 frames at 1 Mpps
        // costs about what naps cost; nothing ever exceeds the budget.
        let (_, wait, _) = simulate(&METAL, 100, US, 50 * MS);
        assert!(wait <= 100 * US + METAL.over + 1_000, "wait {wait}");
    }

    #[test]
    fn moderation_returns_to_interrupts_when_traffic_thins() {
        let mut p = Policy::new(100, 256, 0);
        run_for(&mut p, &VM, |_| US, 0, 50 * MS);
        assert_eq!(p.regime(), Regime::Moderate);
        // 5 kpps: a nap per frame (25 µs) costs more than a wake-up (17 µs)
        let (cpu, wait) = run_for(&mut p, &VM, |_| 200 * US, 50 * MS, 100 * MS);
        assert_eq!(p.regime(), Regime::Interrupt);
        assert!(wait <= 100 * US + VM.over, "wait {wait}");
        assert!(
            cpu * 100 / (50 * MS) <= 15,
            "cpu {} %",
            cpu * 100 / (50 * MS)
        );
        // and back to moderation when it thickens again
        run_for(&mut p, &VM, |_| US, 100 * MS, 150 * MS);
        assert_eq!(p.regime(), Regime::Moderate);
    }

    #[test]
    fn a_nap_never_outlasts_a_batch_at_the_current_rate() {
        // 10 Mpps: a batch of 256 comes every 25.6 µs, so a 250 µs budget
        // must not let ten batches pile up in the rings.
        let mut p = Policy::new(250, 256, 0);
        run_for(&mut p, &VM, |_| 100, 0, 20 * MS);
        assert!(p.nap_ns() <= 52 * US, "nap {} ns", p.nap_ns());
    }

    #[test]
    fn a_full_batch_never_naps() {
        let mut p = Policy::new(100, 32, 0);
        p.regime = Regime::Moderate;
        assert_eq!(p.after_poll(10, 32, true), Next::Poll);
        // no overshoot measured yet: half the budget
        assert_eq!(p.after_poll(20, 3, false), Next::Nap(50 * US));
    }

    #[test]
    fn budget_zero_polls_while_traffic_flows() {
        let mut p = Policy::new(0, 256, 0);
        assert_eq!(p.after_poll(10 * US, 5, false), Next::Poll);
        // 500 µs without frames: still polling
        assert_eq!(p.after_poll(510 * US, 0, false), Next::Poll);
        assert_eq!(p.after_poll(10 * US + IDLE_NS, 0, false), Next::Sleep);
        // and never moderates, whatever the costs
        p.slept(Slept::Nap, 1, 100 * US, 1, 2 * MS);
        for i in 0..100 {
            p.after_poll(2 * MS + i * 20 * US, 10, false);
        }
        assert_eq!(p.regime(), Regime::Interrupt);
    }

    #[test]
    fn spin_before_arming() {
        let mut p = Policy::new(100, 256, 0);
        assert_eq!(p.after_poll(1_000, 4, false), Next::Poll);
        assert_eq!(p.after_poll(1_500, 0, false), Next::Poll);
        assert_eq!(p.after_poll(1_000 + SPIN_NS, 0, false), Next::Sleep);
    }

    #[test]
    fn nap_leaves_room_for_the_overshoot() {
        let mut p = Policy::new(100, 256, 0);
        for _ in 0..64 {
            p.slept(Slept::Nap, 50 * US, 80 * US, 20 * US, 0);
        }
        // overshoot ≈ 30 µs
        let n = p.nap_ns();
        assert!((69 * US..=71 * US).contains(&n), "nap {n}");
        // a budget below the overshoot leaves no nap: interrupts only
        let mut q = Policy::new(20, 256, 0);
        q.slept(Slept::Nap, 5 * US, 35 * US, 20 * US, 0);
        assert_eq!(q.nap_ns(), 0);
    }
}
