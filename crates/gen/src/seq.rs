//! Loss, reordering and duplication from sequence numbers, per stream.
//!
//! A stream's sequence numbers start at 0 and increase by one per frame sent
//! (docs/turnout-gen.md). The tracker keeps `next`, one past the highest
//! number seen, and a bitmap of the last `W` numbers before `next` (a ring of
//! `u64` words indexed by `seq mod W`). On arrival of `s`:
//!
//! - `s == next`: in order; set its bit.
//! - `s > next`: the `s - next` numbers skipped are counted lost for now;
//!   their bits (which still hold numbers `W` older) are cleared.
//! - `next - W <= s < next`: bit set → duplicate; bit clear → a late frame
//!   that was counted lost: reordered, and no longer lost.
//! - `s < next - W`: too old for the window to tell. If anything is counted
//!   lost it is taken as a late frame (reordered), otherwise it can only be a
//!   duplicate. Counted in `beyond_window` too, so the guess is visible.
//!
//! Invariant: `received - duplicated + lost == next` (every number below
//! `next` is either received once or lost), checked by the tests.

/// Sequence numbers a sender of ours can reach: 2^48 (a stream at
/// 100 Mpps gets there after a month). A frame with our magic and a higher
/// number was corrupted or forged (a hostile switch can hand the receiver
/// any bytes): the receiver counts it as implausible instead of tracking
/// it, so `next`, `lost` and their sums over streams cannot overflow.
pub const SEQ_LIMIT: u64 = 1 << 48;

/// Default window: 65 536 sequence numbers (8 KiB of bitmap per stream).
pub const DEFAULT_WINDOW: usize = 1 << 16;

/// Per-stream sequence accounting.
#[derive(Clone, Debug)]
pub struct SeqTracker {
    words: Box<[u64]>,
    mask: u64,
    next: u64,
    /// Frames that arrived, duplicates included.
    pub received: u64,
    /// Sequence numbers below `next` that never arrived.
    pub lost: u64,
    /// Frames that arrived after a higher sequence number.
    pub reordered: u64,
    /// Frames whose sequence number had already arrived.
    pub duplicated: u64,
    /// Frames older than the window (classified by the rule above).
    pub beyond_window: u64,
}

impl SeqTracker {
    /// A tracker with a window of `window` sequence numbers (rounded up to a
    /// power of two, at least 64).
    pub fn new(window: usize) -> Self {
        let w = window.max(64).next_power_of_two();
        Self {
            words: vec![0u64; w / 64].into_boxed_slice(),
            mask: (w - 1) as u64,
            next: 0,
            received: 0,
            lost: 0,
            reordered: 0,
            duplicated: 0,
            beyond_window: 0,
        }
    }

    /// Forgets everything seen, keeping the window's allocation (the
    /// bitmap is cleared only if something arrived).
    pub fn reset(&mut self) {
        if self.received > 0 {
            self.words.fill(0);
        }
        self.next = 0;
        self.received = 0;
        self.lost = 0;
        self.reordered = 0;
        self.duplicated = 0;
        self.beyond_window = 0;
    }

    /// Window size in sequence numbers.
    pub fn window(&self) -> u64 {
        self.mask + 1
    }

    /// One past the highest sequence number seen (0 before the first).
    #[cfg(test)]
    pub fn next(&self) -> u64 {
        self.next
    }

    #[inline]
    fn bit(&self, seq: u64) -> (usize, u64) {
        let b = seq & self.mask;
        ((b >> 6) as usize, 1u64 << (b & 63))
    }

    /// Clears the bits of `count` (< window) numbers starting at `from`.
    fn clear_range(&mut self, from: u64, count: u64) {
        let mut p = from;
        let mut left = count;
        while left > 0 {
            let b = p & self.mask;
            let word = (b >> 6) as usize;
            let off = b & 63;
            let n = (64 - off).min(left);
            let m = if n == 64 {
                !0u64
            } else {
                ((1u64 << n) - 1) << off
            };
            self.words[word] &= !m;
            p += n;
            left -= n;
        }
    }

    /// Accounts one arrival of `seq` (below [`SEQ_LIMIT`]; a higher number
    /// is ignored, the caller counts it).
    #[inline]
    pub fn record(&mut self, seq: u64) {
        if seq >= SEQ_LIMIT {
            return;
        }
        self.received += 1;
        if seq == self.next {
            let (w, m) = self.bit(seq);
            self.words[w] |= m;
            self.next = seq + 1;
        } else if seq > self.next {
            let span = seq - self.next + 1; // numbers next..=seq enter the window
            if span >= self.window() {
                self.words.iter_mut().for_each(|w| *w = 0);
            } else {
                self.clear_range(self.next, span);
            }
            self.lost += seq - self.next;
            let (w, m) = self.bit(seq);
            self.words[w] |= m;
            self.next = seq + 1;
        } else if self.next - seq <= self.window() {
            let (w, m) = self.bit(seq);
            if self.words[w] & m != 0 {
                self.duplicated += 1;
            } else {
                self.words[w] |= m;
                self.reordered += 1;
                self.lost -= 1; // it was counted lost when skipped
            }
        } else {
            self.beyond_window += 1;
            if self.lost > 0 {
                self.reordered += 1;
                self.lost -= 1;
            } else {
                self.duplicated += 1;
            }
        }
    }

    /// Counts the numbers in `next..end` as lost: called at the end of a run
    /// when the sender's count `end` is known (txrx), so frames lost after
    /// the last arrival are counted too.
    pub fn finish(&mut self, end: u64) {
        let end = end.min(SEQ_LIMIT);
        if end > self.next {
            self.lost += end - self.next;
            // Mark them as seen-missing by moving `next`; their bits are
            // irrelevant once the run is over.
            self.next = end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(window: usize, seqs: &[u64]) -> SeqTracker {
        let mut t = SeqTracker::new(window);
        for &s in seqs {
            t.record(s);
            assert_eq!(t.received - t.duplicated + t.lost, t.next(), "after {s}");
        }
        t
    }

    #[test]
    fn in_order_has_nothing_to_report() {
        let seqs: Vec<u64> = (0..1_000_000).collect();
        let t = run(64, &seqs);
        assert_eq!(
            (t.received, t.lost, t.reordered, t.duplicated),
            (1_000_000, 0, 0, 0)
        );
    }

    #[test]
    fn injected_loss_is_exact() {
        // Drop every 7th, and a run of 500 (longer than a 64-bit window).
        let seqs: Vec<u64> = (0..10_000u64)
            .filter(|s| s % 7 != 3 && !(2000..2500).contains(s))
            .collect();
        let expected_lost = 10_000 - seqs.len() as u64;
        let mut t = run(64, &seqs);
        // 9999 is itself dropped: only the sender's count reveals it.
        assert_eq!(t.lost, expected_lost - 1);
        t.finish(10_000);
        assert_eq!(t.lost, expected_lost);
        assert_eq!((t.reordered, t.duplicated), (0, 0));
    }

    #[test]
    fn loss_at_the_start_counts_from_zero() {
        let t = run(64, &[5, 6, 7]);
        assert_eq!(t.lost, 5);
    }

    #[test]
    fn swaps_are_reordered_not_lost() {
        let t = run(64, &[0, 2, 1, 3, 5, 4, 6]);
        assert_eq!(
            (t.lost, t.reordered, t.duplicated, t.received),
            (0, 2, 0, 7)
        );
    }

    #[test]
    fn duplicates_are_detected_in_and_out_of_order() {
        let t = run(64, &[0, 1, 1, 2, 0, 3, 3, 3]);
        assert_eq!(
            (t.lost, t.reordered, t.duplicated, t.received),
            (0, 0, 4, 8)
        );
    }

    #[test]
    fn late_frame_at_the_edge_of_the_window() {
        // Window 64: numbers next-64 .. next-1 are in the window.
        let mut seqs: Vec<u64> = (1..=64).collect();
        seqs.push(0); // next = 65, 65 - 0 = 65 > 64: beyond the window
        let t = run(64, &seqs);
        assert_eq!((t.lost, t.reordered, t.beyond_window), (0, 1, 1));

        let mut seqs: Vec<u64> = (1..=63).collect();
        seqs.push(0); // next = 64, exactly at the window's edge
        seqs.push(0); // and again: now a duplicate the window still sees
        let t = run(64, &seqs);
        assert_eq!(
            (t.lost, t.reordered, t.duplicated, t.beyond_window),
            (0, 1, 1, 0)
        );
    }

    #[test]
    fn window_wraps_many_times_without_stale_bits() {
        // Lose one number per window-length lap and then deliver it late
        // while it is still inside the window: after many wraps, every
        // late one must still be seen as reordered, never as a duplicate.
        let w = 256u64;
        let mut seqs = Vec::new();
        for lap in 0..200u64 {
            let base = lap * w;
            for s in base..base + w {
                if s != base + 10 {
                    seqs.push(s);
                }
            }
            seqs.push(base + 10); // arrives ~245 later, inside the window
        }
        let t = run(w as usize, &seqs);
        assert_eq!(
            (t.lost, t.reordered, t.duplicated, t.beyond_window),
            (0, 200, 0, 0)
        );
        // And a duplicate of something a full lap old is beyond the window:
        // with nothing lost it is classified as a duplicate.
        let mut t = t;
        t.record(t.next() - w - 1);
        assert_eq!((t.duplicated, t.beyond_window), (1, 1));
    }

    #[test]
    fn long_gaps_clear_the_window() {
        // A gap far larger than the window, then a late frame from just
        // before the gap (beyond the window) and one inside the new window.
        let mut seqs: Vec<u64> = (0..100).collect();
        seqs.push(1_000_000);
        seqs.push(999_990); // inside the window after the jump: reordered
        seqs.push(999_990); // now a duplicate
        seqs.push(1_000_001);
        let t = run(1024, &seqs);
        assert_eq!(t.lost, 1_000_000 - 100 - 1);
        assert_eq!((t.reordered, t.duplicated), (1, 1));
        // Bits set before the jump must not survive it: 100 + W is a number
        // that maps to a bit used before the jump.
        let mut t = t;
        t.record(1_000_002);
        assert_eq!(t.duplicated, 1);
    }

    #[test]
    fn gap_exactly_one_window_long() {
        let t = run(64, &[0, 64, 1, 1]);
        // 0 seen; 64 skips 1..63 (63 lost); 1 arrives late inside the window.
        assert_eq!((t.lost, t.reordered, t.duplicated), (62, 1, 1));
    }

    #[test]
    fn finish_counts_the_tail() {
        let mut t = run(64, &[0, 1, 2]);
        t.finish(10);
        assert_eq!(t.lost, 7);
        t.finish(5); // never goes backwards
        assert_eq!(t.lost, 7);
    }

    #[test]
    fn random_permutation_of_a_lossy_stream_matches_a_set() {
        // Reference: a HashSet over the same arrivals. Window larger than
        // any displacement, so classification must be exact.
        use std::collections::HashSet;
        let mut x: u64 = 0x9e3779b97f4a7c15;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut seqs = Vec::new();
        for s in 0..50_000u64 {
            let r = rnd() % 100;
            if r < 3 {
                continue; // lost
            }
            seqs.push(s);
            if r < 5 {
                seqs.push(s); // duplicated
            }
        }
        // Local displacement: swap neighbours within 50 positions.
        for i in 0..seqs.len() {
            if rnd() % 10 == 0 {
                let j = (i + (rnd() % 50) as usize).min(seqs.len() - 1);
                seqs.swap(i, j);
            }
        }
        let t = run(1024, &seqs);
        let uniq: HashSet<u64> = seqs.iter().copied().collect();
        let max = *seqs.iter().max().unwrap();
        assert_eq!(t.duplicated, (seqs.len() - uniq.len()) as u64);
        assert_eq!(t.lost, max + 1 - uniq.len() as u64);
        assert_eq!(t.beyond_window, 0);
        assert!(t.reordered > 0);
    }
}
