//! Rate pacing: absolute deadlines, so the rate never drifts.
//!
//! Frame `n` (counting every frame scheduled, sent or refused by a full
//! port) is due at `start + n / rate`. The sender busy-waits (polling the
//! clock, or doing receive work in txrx) until the next burst's first frame
//! is due, then sends the burst. Deadlines are computed from `start` each
//! time, never by adding periods, so rounding does not accumulate; a sender
//! that fell behind (preempted) catches up by sending the due bursts back to
//! back, keeping the long-run average at the requested rate.

/// Deadline schedule for a paced sender; `rate_pps == 0` means unpaced.
#[derive(Clone, Debug)]
pub struct Pacer {
    start_ns: u64,
    ns_per_frame: f64,
    scheduled: u64,
}

impl Pacer {
    /// A schedule starting at `start_ns` at `rate_pps` frames per second
    /// (0 = as fast as possible).
    pub fn new(start_ns: u64, rate_pps: f64) -> Self {
        let ns_per_frame = if rate_pps > 0.0 { 1e9 / rate_pps } else { 0.0 };
        Self {
            start_ns,
            ns_per_frame,
            scheduled: 0,
        }
    }

    /// Whether a rate is enforced.
    #[inline]
    pub fn paced(&self) -> bool {
        self.ns_per_frame > 0.0
    }

    /// The time frame number `n` is due.
    #[inline]
    pub fn deadline_of(&self, n: u64) -> u64 {
        self.start_ns + (n as f64 * self.ns_per_frame) as u64
    }

    /// The time the next unscheduled frame is due (always "now" if unpaced).
    #[inline]
    pub fn next_deadline(&self) -> u64 {
        self.deadline_of(self.scheduled)
    }

    /// Whether the next frame is due at `now_ns`.
    #[inline]
    pub fn due(&self, now_ns: u64) -> bool {
        !self.paced() || now_ns >= self.next_deadline()
    }

    /// Marks `n` more frames as scheduled (sent or refused).
    #[inline]
    pub fn advance(&mut self, n: u64) {
        self.scheduled += n;
    }

    /// How many of the frames not yet scheduled are due before `end_ns`
    /// (a catch-up burst must not run past the end of the traffic window).
    /// Unpaced: all of them (`u64::MAX`).
    pub fn due_before(&self, end_ns: u64) -> u64 {
        if !self.paced() {
            return u64::MAX;
        }
        if end_ns <= self.start_ns {
            return 0;
        }
        // First frame number whose deadline is at or after end_ns: the
        // estimate, corrected for deadline_of's rounding.
        let mut m = ((end_ns - self.start_ns) as f64 / self.ns_per_frame).ceil() as u64;
        while m > 0 && self.deadline_of(m - 1) >= end_ns {
            m -= 1;
        }
        while self.deadline_of(m) < end_ns {
            m += 1;
        }
        m.saturating_sub(self.scheduled)
    }

    /// Frames that are due by `now_ns` but not yet scheduled (for reports of
    /// how far behind a sender is). Unpaced: 0.
    pub fn backlog(&self, now_ns: u64) -> u64 {
        if !self.paced() || now_ns < self.start_ns {
            return 0;
        }
        let due = ((now_ns - self.start_ns) as f64 / self.ns_per_frame) as u64 + 1;
        due.saturating_sub(self.scheduled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_before_counts_the_frames_left_in_a_window() {
        // 10 kpps from t=1000: frames at 1000, 101000, 201000, ...
        let mut p = Pacer::new(1_000, 10_000.0);
        assert_eq!(p.due_before(1_000), 0);
        assert_eq!(p.due_before(1_001), 1);
        assert_eq!(p.due_before(101_000), 1);
        assert_eq!(p.due_before(101_001), 2);
        // 50 ms: exactly 500 frames, whatever was scheduled already.
        assert_eq!(p.due_before(1_000 + 50_000_000), 500);
        p.advance(499);
        assert_eq!(p.due_before(1_000 + 50_000_000), 1);
        p.advance(1);
        assert_eq!(p.due_before(1_000 + 50_000_000), 0);
        assert_eq!(Pacer::new(0, 0.0).due_before(5), u64::MAX);
    }

    #[test]
    fn deadlines_are_absolute() {
        let p = Pacer::new(1_000, 1_000_000.0); // 1 µs per frame
        assert_eq!(p.deadline_of(0), 1_000);
        assert_eq!(p.deadline_of(32), 33_000);
        assert_eq!(p.deadline_of(10_000_000_000), 1_000 + 10_000_000_000_000);
        // A rate that does not divide 1e9: 3 frames per second.
        let p = Pacer::new(0, 3.0);
        assert_eq!(p.deadline_of(3), 1_000_000_000);
        assert_eq!(p.deadline_of(3_000_000), 1_000_000_000_000_000);
    }

    #[test]
    fn simulated_sender_hits_the_rate_without_drift() {
        // A sender loop with a fake clock that advances 37 ns per poll and
        // 250 ns per burst sent: after 1 s of fake time the frames sent must
        // be rate * 1 s within one burst.
        for &(rate, burst) in &[(1e6, 32u64), (14_880_952.0, 32), (123_457.0, 1), (5e6, 256)] {
            let mut now = 0u64;
            let mut p = Pacer::new(now, rate);
            let mut sent = 0u64;
            while now < 1_000_000_000 {
                if p.due(now) {
                    p.advance(burst);
                    sent += burst;
                    now += 250;
                } else {
                    now += 37;
                }
            }
            let want = rate as u64;
            assert!(sent.abs_diff(want) <= burst, "rate {rate}: sent {sent}");
        }
    }

    #[test]
    fn a_late_sender_catches_up() {
        let mut p = Pacer::new(0, 1e6);
        // Preempted for 1 ms: 1000 frames due at once.
        let now = 1_000_000;
        assert_eq!(p.backlog(now), 1001);
        let mut bursts = 0;
        while p.due(now) {
            p.advance(32);
            bursts += 1;
        }
        assert_eq!(bursts, (1001 + 31) / 32);
        assert_eq!(p.backlog(now), 0);
    }

    #[test]
    fn unpaced_is_always_due() {
        let p = Pacer::new(5, 0.0);
        assert!(!p.paced() && p.due(0) && p.due(u64::MAX));
        assert_eq!(p.backlog(100), 0);
    }
}
