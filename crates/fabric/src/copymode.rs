//! Streamed or ordinary stores for a worker's large copies into peers'
//! memory, chosen by what the whole path costs on the host it runs on.
//!
//! A frame of [`crate::sys::STREAM_MIN_B`] or more copied into a memif or
//! vhost-user buffer can be written with non-temporal stores (no request
//! for ownership of the lines the peer's core read last) or with ordinary
//! ones (the lines stay in a cache the peer reads from next). Which costs
//! less depends on the host, not on the copy: on one host streaming made
//! vhost-user 1518 B three times cheaper per frame; on another ordinary
//! stores were 13–20 % cheaper there while streaming stayed 9 % cheaper on
//! memif, although streaming was the cheaper copy in both places (what
//! ordinary stores save is the peer's reads and the batches that follow).
//! So each worker measures the whole path, its own busy cycles per frame,
//! each way, and keeps a way per kind of peer memory
//! ([`crate::sys::CopyInto`]: memif, vhost-user), starting from
//! [`crate::sys::STREAMS_AT_FIRST`].
//!
//! What a change of way does shows slowly: for tens of milliseconds after
//! one, either way costs more than both do later, and the difference
//! between them builds up over a few hundred (vhost-user 1518 B at 4.6–6
//! Mpps, 2026-12-05). So the chooser cuts time into epochs of
//! [`EPOCH_NS`] and counts only the busy passes after the first
//! [`SETTLE_NS`] of an epoch that began with a change. An epoch judges the
//! kind at least half of its frames were copied into as large frames
//! ([`crate::sys::large_copies`]) if it counted [`MIN_FRAMES`] or more;
//! one that judges none (small frames, a trickle, frames to kernel ports)
//! leaves the ways alone and ends a probe under way. After some epochs
//! the ways chosen it probes the kind the last epoch judged:
//! [`PROBE_PAIRS`] pairs of adjacent epochs, one each way, the order
//! alternating so that a host slowing down or speeding up within a pair
//! favours neither way. The other way wins if it was cheaper in all pairs
//! but at most one and by [`SWITCH_BELOW_PERMILLE`] or more on the
//! geometric mean of the pair ratios. The epochs between probes of a kind
//! start at [`EXPLOIT_EPOCHS`] and double after each probe that kept its
//! way, up to [`EXPLOIT_EPOCHS_MAX`]: a probe costs its other-way epochs,
//! 4 of 48 at first and 4 of 168 later, so a way 20 % dearer costs 1.7 %
//! and then 0.5 % of the time. The first probe comes after
//! [`FIRST_PROBE_EPOCHS`] epochs (2 s) and takes 2 s of large frames: a
//! switch forwards its first seconds with the ways it starts with, not
//! half of them with the other way.
//!
//! No allocation, no system call: a few additions and a compare per busy
//! pass and some arithmetic per epoch.

use crate::sys::{COPY_KINDS, STREAMS_AT_FIRST};

/// An epoch's length, ns.
pub const EPOCH_NS: u64 = 250_000_000;

/// What each epoch leaves uncounted at its start, ns.
pub const SETTLE_NS: u64 = 100_000_000;

/// Frames an epoch must count to be judged.
pub const MIN_FRAMES: u64 = 20_000;

/// Epochs with frames before the first probe: a switch forwards its first
/// seconds with [`STREAMS_AT_FIRST`], unprobed.
pub const FIRST_PROBE_EPOCHS: u32 = 8;

/// Epochs the chosen way runs between probes, at first and after a
/// probe changed the way.
pub const EXPLOIT_EPOCHS: u32 = 40;

/// ... and at most, after probes that kept it.
pub const EXPLOIT_EPOCHS_MAX: u32 = 160;

/// Pairs of epochs per probe.
pub const PROBE_PAIRS: u32 = 4;

/// The other way must cost at most this many thousandths of the chosen
/// one's (geometric mean over the pairs) to be taken.
pub const SWITCH_BELOW_PERMILLE: u64 = 970;

/// Where the chooser is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Running the chosen ways; a probe after `left` more epochs.
    Exploit { left: u32 },
    /// Probing kind `kind`: pair `pair`, its first (0) or second (1) epoch.
    Probe { kind: usize, pair: u32, half: u32 },
}

/// The per-worker chooser ([module docs](self)).
#[derive(Debug)]
pub struct CopyChooser {
    /// The way chosen per kind: streamed (true) or ordinary stores.
    chosen: [bool; COPY_KINDS],
    /// The ways in force in this epoch.
    now: [bool; COPY_KINDS],
    state: State,
    /// When this epoch began and when its count begins, ns (0: not yet
    /// begun, at the first busy pass).
    began_ns: u64,
    counts_from_ns: u64,
    /// This epoch's count so far, and the large copies per kind when it
    /// began (`None` before its first counted pass).
    frames: u64,
    cycles: u64,
    large_from: Option<[u64; COPY_KINDS]>,
    /// The large copies per kind after the last pass seen (counted or
    /// skipped).
    large_last: [u64; COPY_KINDS],
    /// Epochs between probes of each kind now.
    exploit: [u32; COPY_KINDS],
    /// The probe's pair in progress: cycles per frame ×1024 of its first
    /// epoch.
    first_cpf: u64,
    /// The probe so far: pairs the other way was cheaper in, and the sum
    /// of ln(other / chosen) over the pairs.
    cheaper: u32,
    ln_sum: f64,
    /// Probes completed, and how many changed a way.
    probes: u64,
    switches: u64,
}

impl Default for CopyChooser {
    fn default() -> Self {
        Self::new()
    }
}

impl CopyChooser {
    /// The ways [`crate::sys::streams`] starts with; the first probe after
    /// [`FIRST_PROBE_EPOCHS`].
    pub fn new() -> Self {
        Self {
            chosen: STREAMS_AT_FIRST,
            now: STREAMS_AT_FIRST,
            state: State::Exploit {
                left: FIRST_PROBE_EPOCHS,
            },
            began_ns: 0,
            counts_from_ns: 0,
            frames: 0,
            cycles: 0,
            large_from: None,
            large_last: [0; COPY_KINDS],
            exploit: [EXPLOIT_EPOCHS; COPY_KINDS],
            first_cpf: 0,
            cheaper: 0,
            ln_sum: 0.0,
            probes: 0,
            switches: 0,
        }
    }

    /// The ways in force per kind: true while large copies into it are
    /// streamed.
    pub fn streaming(&self) -> [bool; COPY_KINDS] {
        self.now
    }

    /// Probes completed.
    pub fn probes(&self) -> u64 {
        self.probes
    }

    /// Probes that changed a way.
    pub fn switches(&self) -> u64 {
        self.switches
    }

    /// A pass begun at `now_ns` that moved `frames` frames in `cycles`
    /// cycles, with `large` the thread's large copies per kind so far
    /// ([`crate::sys::large_copies`], taken after the pass). At the end
    /// of an epoch, returns the ways in force for the next (the caller
    /// calls [`crate::sys::set_streaming`] and publishes the counts);
    /// else `None`.
    #[inline]
    pub fn busy_pass(
        &mut self,
        now_ns: u64,
        cycles: u64,
        frames: u64,
        large: [u64; COPY_KINDS],
    ) -> Option<[bool; COPY_KINDS]> {
        self.large_last = large;
        if now_ns < self.counts_from_ns {
            return None;
        }
        if now_ns.wrapping_sub(self.began_ns) >= EPOCH_NS {
            return Some(self.end_epoch(now_ns, large));
        }
        if self.large_from.is_none() {
            // the count begins after this pass
            self.large_from = Some(large);
            return None;
        }
        self.frames += frames;
        self.cycles += cycles;
        None
    }

    /// A busy pass the worker copied in another way than [`Self::streaming`]
    /// says (while it naps it streams into every kind): neither its
    /// cycles and frames nor its large copies count in the epoch, which
    /// then judges only passes made its way. `large` as for
    /// [`Self::busy_pass`].
    #[inline]
    pub fn skip_pass(&mut self, large: [u64; COPY_KINDS]) {
        if let Some(from) = &mut self.large_from {
            for k in 0..COPY_KINDS {
                from[k] = from[k].wrapping_add(large[k].wrapping_sub(self.large_last[k]));
            }
        }
        self.large_last = large;
    }

    #[cold]
    fn end_epoch(&mut self, now_ns: u64, large: [u64; COPY_KINDS]) -> [bool; COPY_KINDS] {
        let (frames, cycles) = (self.frames, self.cycles);
        let copies: [u64; COPY_KINDS] = match self.large_from.take() {
            Some(from) => std::array::from_fn(|k| large[k].wrapping_sub(from[k])),
            None => [0; COPY_KINDS],
        };
        (self.frames, self.cycles) = (0, 0);
        let first = self.began_ns == 0;
        self.began_ns = now_ns;
        self.counts_from_ns = now_ns.saturating_add(SETTLE_NS);
        if first {
            // the first busy pass: the first epoch begins
            return self.now;
        }
        // The kind most of the epoch's frames were copied into (large),
        // if any: the only one this epoch can judge.
        let judged = (frames >= MIN_FRAMES)
            .then(|| (0..COPY_KINDS).max_by_key(|&k| copies[k]))
            .flatten()
            .filter(|&k| copies[k].saturating_mul(2) >= frames);
        let before = self.now;
        match self.state {
            State::Exploit { left } if left > 1 => {
                self.state = State::Exploit { left: left - 1 };
            }
            State::Exploit { .. } => {
                if let Some(kind) = judged {
                    self.cheaper = 0;
                    self.ln_sum = 0.0;
                    self.start_half(kind, 0, 0);
                }
            }
            State::Probe { kind, .. } if judged != Some(kind) => {
                // Nothing to judge by, or the frames went elsewhere: the
                // probe starts again later.
                self.state = State::Exploit { left: 1 };
                self.now = self.chosen;
            }
            State::Probe {
                kind,
                pair,
                half: 0,
            } => {
                self.first_cpf = cpf(cycles, frames);
                self.start_half(kind, pair, 1);
            }
            State::Probe { kind, pair, .. } => {
                let cpf = cpf(cycles, frames);
                let (other, chosen) = if other_way(pair, 0) {
                    (self.first_cpf, cpf)
                } else {
                    (cpf, self.first_cpf)
                };
                if other < chosen {
                    self.cheaper += 1;
                }
                self.ln_sum += (other as f64 / chosen as f64).ln();
                if pair + 1 < PROBE_PAIRS {
                    self.start_half(kind, pair + 1, 0);
                } else {
                    self.decide(kind);
                }
            }
        }
        if self.now == before {
            // the same ways on: the next epoch counts from its start
            self.counts_from_ns = now_ns;
        }
        self.now
    }

    /// Puts in force the ways half `half` of pair `pair` of a probe of
    /// `kind` runs.
    fn start_half(&mut self, kind: usize, pair: u32, half: u32) {
        self.state = State::Probe { kind, pair, half };
        self.now = self.chosen;
        self.now[kind] ^= other_way(pair, half);
    }

    /// The verdict of a probe of `kind`.
    fn decide(&mut self, kind: usize) {
        self.probes += 1;
        let mean = (self.ln_sum / PROBE_PAIRS as f64).exp();
        let x = &mut self.exploit[kind];
        if self.cheaper + 1 >= PROBE_PAIRS && mean * 1000.0 <= SWITCH_BELOW_PERMILLE as f64 {
            self.chosen[kind] = !self.chosen[kind];
            self.switches += 1;
            *x = EXPLOIT_EPOCHS;
            self.state = State::Exploit { left: *x };
        } else {
            self.state = State::Exploit { left: *x };
            *x = (*x * 2).min(EXPLOIT_EPOCHS_MAX);
        }
        self.now = self.chosen;
    }
}

/// Busy cycles per frame in 1024ths (`frames` > 0).
fn cpf(cycles: u64, frames: u64) -> u64 {
    (cycles.saturating_mul(1024) / frames).max(1)
}

/// Whether half `half` of probe pair `pair` runs the other way: the second
/// half of even pairs, the first of odd ones.
fn other_way(pair: u32, half: u32) -> bool {
    (pair + half) % 2 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const MEMIF: usize = crate::sys::CopyInto::Memif as usize;
    const VHOST: usize = crate::sys::CopyInto::VhostUser as usize;

    /// A worker's passes as the chooser sees them: one of 32 frames every
    /// 100 µs, from a clock well past zero, copied into peer memory of
    /// kind `kind` (the large ones counted as `crate::sys::streams` does).
    struct Run {
        c: CopyChooser,
        now_ns: u64,
        large: [u64; COPY_KINDS],
        kind: usize,
    }

    const PASS_NS: u64 = 100_000;
    const T0: u64 = 1_000_000_000_000;

    impl Run {
        fn new(kind: usize) -> Self {
            Self {
                c: CopyChooser::new(),
                now_ns: T0,
                large: [0; COPY_KINDS],
                kind,
            }
        }

        fn way(&self) -> bool {
            self.c.streaming()[self.kind]
        }

        /// `epochs` epochs' worth of passes of `size`-byte frames, each
        /// costing what `cost(streaming, epoch)` says per frame (the way of
        /// the run's kind; the epoch counted from the run's start); returns
        /// the epochs' worth run streamed.
        fn drive(&mut self, epochs: u64, size: u64, mut cost: impl FnMut(bool, u64) -> u64) -> u64 {
            let passes = epochs * EPOCH_NS / PASS_NS;
            let mut streamed = 0;
            for _ in 0..passes {
                let ways = self.c.streaming();
                let way = ways[self.kind];
                streamed += way as u64;
                if size >= crate::sys::STREAM_MIN_B as u64 {
                    self.large[self.kind] += 32;
                }
                let e = (self.now_ns - T0) / EPOCH_NS;
                let next = self
                    .c
                    .busy_pass(self.now_ns, 32 * cost(way, e), 32, self.large);
                assert!(next.is_none_or(|n| n == self.c.streaming()));
                if next.is_none() {
                    assert_eq!(self.c.streaming(), ways, "a way changed inside an epoch");
                }
                self.now_ns += PASS_NS;
            }
            streamed * PASS_NS / EPOCH_NS
        }
    }

    /// Epochs from the start to the end of the `n`th probe with every
    /// probe keeping the way (exploit periods doubling from the first).
    fn epochs_to_probe(n: u32) -> u64 {
        let mut e = 1 + FIRST_PROBE_EPOCHS as u64 + 2 * PROBE_PAIRS as u64;
        let mut x = EXPLOIT_EPOCHS;
        for _ in 1..n {
            e += x as u64 + 2 * PROBE_PAIRS as u64;
            x = (x * 2).min(EXPLOIT_EPOCHS_MAX);
        }
        e
    }

    #[test]
    fn it_starts_streaming_into_memif_and_not_into_vhost_user() {
        assert_eq!(CopyChooser::new().streaming(), STREAMS_AT_FIRST);
        assert!(STREAMS_AT_FIRST[MEMIF]);
        assert!(!STREAMS_AT_FIRST[VHOST]);
    }

    #[test]
    fn it_settles_on_the_way_that_costs_the_path_less() {
        // memif starts streaming: ordinary stores cheaper here
        let mut r = Run::new(MEMIF);
        let n = 400;
        let streamed = r.drive(n, 1518, |s, _| if s { 400 } else { 340 });
        assert!(!r.way());
        assert!(
            !STREAMS_AT_FIRST[VHOST] && !r.c.streaming()[VHOST],
            "the other kind untouched"
        );
        assert_eq!(r.c.switches(), 1);
        assert!(r.c.probes() >= 4, "{} probes", r.c.probes());
        // the first epochs and the first probe's, then 4 of each later one
        let first = 1 + FIRST_PROBE_EPOCHS as u64 + 4;
        assert!(
            streamed <= first + 4 * r.c.probes() + 1,
            "{streamed} of {n} epochs streamed"
        );
        // vhost-user starts with ordinary stores: streaming cheaper here
        let mut r = Run::new(VHOST);
        let ordinary = n - r.drive(n, 1518, |s, _| if s { 340 } else { 400 });
        assert!(r.way());
        assert!(r.c.streaming()[MEMIF], "the other kind untouched");
        assert!(
            ordinary <= first + 4 * r.c.probes() + 1,
            "{ordinary} of {n} epochs ordinary"
        );
    }

    #[test]
    fn it_keeps_the_way_it_started_with_where_that_is_cheaper() {
        let mut r = Run::new(MEMIF);
        let n = 400;
        let streamed = r.drive(n, 1518, |s, _| if s { 362 } else { 401 });
        assert!(r.way());
        assert_eq!(r.c.switches(), 0);
        assert!(r.c.probes() >= 4, "{} probes", r.c.probes());
        assert!(
            n - streamed <= 4 * r.c.probes() + 1,
            "{} of {n} ordinary",
            n - streamed
        );
    }

    #[test]
    fn probes_back_off_while_they_keep_the_way() {
        let mut r = Run::new(VHOST);
        r.drive(epochs_to_probe(5) + 1, 1518, |_, _| 300);
        assert_eq!((r.c.probes(), r.c.switches()), (5, 0));
    }

    #[test]
    fn equal_costs_and_a_host_that_changes_speed_do_not_flip_it() {
        // Both ways cost the same, but the host halves its speed for 3
        // epochs in every 7 (phases out of step with the probes): the
        // pairs cancel what a phase does to both ways.
        let slow = |e: u64| if e % 7 < 3 { 2 } else { 1 };
        let mut r = Run::new(MEMIF);
        r.drive(epochs_to_probe(6), 1518, |_, e| 300 * slow(e));
        assert_eq!(r.c.probes(), 6);
        assert!(r.c.switches() <= 1, "{} switches", r.c.switches());
        // and a real difference under the same phases is still found
        let mut r = Run::new(MEMIF);
        r.drive(epochs_to_probe(3), 1518, |s, e| {
            (if s { 400 } else { 330 }) * slow(e)
        });
        assert!(!r.way());
    }

    #[test]
    fn a_way_that_becomes_dearer_is_left_at_a_later_probe() {
        let mut r = Run::new(MEMIF);
        let turn = epochs_to_probe(2);
        r.drive(turn + epochs_to_probe(3), 1518, |s, e| {
            match (s, e < turn) {
                (true, true) | (false, false) => 300,
                _ => 360,
            }
        });
        assert!(!r.way(), "ordinary became the cheaper way");
        assert_eq!(r.c.switches(), 1);
    }

    #[test]
    fn what_a_change_costs_at_first_is_not_counted() {
        // Ordinary stores cost less, but for the first 40 ms after any
        // change of way both cost four times as much: the settle time
        // leaves that out, and the ordinary way still wins.
        let mut r = Run::new(MEMIF);
        let mut last = (true, 0u64);
        let mut t = 0u64;
        r.drive(epochs_to_probe(1) + 1, 1518, |s, _| {
            t += PASS_NS;
            if s != last.0 {
                last = (s, t);
            }
            let base = if s { 400 } else { 340 };
            if t - last.1 < 40_000_000 {
                4 * base
            } else {
                base
            }
        });
        assert!(!r.way());
    }

    #[test]
    fn small_frames_few_frames_and_pauses_leave_the_choice_alone() {
        let mut r = Run::new(MEMIF);
        // ordinary would win, but the frames are small: nothing is probed
        r.drive(200, 64, |s, _| if s { 200 } else { 100 });
        assert!(r.way());
        assert_eq!(r.c.probes(), 0);
        // a probe cut short by small frames puts the chosen way back
        let to_other = 2 + FIRST_PROBE_EPOCHS as u64;
        let mut r = Run::new(MEMIF);
        r.drive(to_other - 1, 1518, |_, _| 300);
        assert!(r.way(), "the probe's first epoch runs the chosen way");
        r.drive(1, 1518, |_, _| 300);
        assert!(!r.way(), "the probe's first other-way epoch");
        r.drive(2, 64, |_, _| 300);
        assert!(r.way());
        assert_eq!(r.c.probes(), 0);
        // ... and so do large frames into the other kind
        let mut r = Run::new(MEMIF);
        r.drive(to_other, 1518, |_, _| 300);
        r.kind = VHOST;
        r.drive(2, 1518, |_, _| 300);
        assert_eq!(r.c.streaming(), STREAMS_AT_FIRST);
        // a pause: the epoch it ends counts what came before it
        let mut r = Run::new(MEMIF);
        r.drive(2, 1518, |_, _| 300);
        r.now_ns += 60 * 1_000_000_000;
        r.drive(epochs_to_probe(1), 1518, |s, _| if s { 400 } else { 340 });
        assert!(!r.way());
        // a trickle of frames (fewer than MIN_FRAMES an epoch) decides nothing
        let mut c = CopyChooser::new();
        let mut now = T0;
        for i in 0..100_000u64 {
            let s = c.streaming()[MEMIF];
            c.busy_pass(now, if s { 10_000 } else { 1_000 }, 1, [i, 0]);
            now += 1_000_000;
        }
        assert_eq!(c.probes(), 0);
        assert_eq!(c.streaming(), STREAMS_AT_FIRST);
    }

    #[test]
    fn passes_after_naps_are_not_judged() {
        // Passes into vhost-user, where streaming costs less; between them
        // passes after naps (streamed into every kind, skipped) copy more
        // large frames into memif at a cost that would favour the other
        // way. The chooser ends where it would without them.
        let run = |skips: bool| {
            let mut c = CopyChooser::new();
            let mut large = [0u64; COPY_KINDS];
            let mut now = T0;
            for _ in 0..epochs_to_probe(1) * EPOCH_NS / PASS_NS {
                let s = c.streaming()[VHOST];
                large[VHOST] += 32;
                c.busy_pass(now, 32 * if s { 300 } else { 400 }, 32, large);
                now += PASS_NS / 2;
                if skips {
                    large[MEMIF] += 64;
                    c.skip_pass(large);
                }
                now += PASS_NS / 2;
            }
            (c.streaming(), c.probes(), c.switches())
        };
        let without = run(false);
        assert_eq!(without, ([true, true], 1, 1));
        assert_eq!(run(true), without);
    }

    #[test]
    fn one_odd_pair_does_not_make_the_choice() {
        // The other way is cheaper in one pair only (a hiccup of the chosen
        // way's epoch): no switch.
        let mut r = Run::new(MEMIF);
        let first_pair = FIRST_PROBE_EPOCHS as u64;
        let mut hiccups = 0;
        r.drive(epochs_to_probe(1), 1518, |s, e| match (s, e) {
            (true, e) if e == first_pair => {
                // the first pair's chosen epoch
                hiccups += 1;
                900
            }
            (true, _) => 300,
            (false, _) => 330,
        });
        assert_eq!(hiccups, EPOCH_NS / PASS_NS);
        assert_eq!((r.c.probes(), r.c.switches()), (1, 0));
        assert!(r.way());
    }
}
