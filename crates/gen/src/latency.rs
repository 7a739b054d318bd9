//! One-way latency (HdrHistogram) and RFC 3550 interarrival jitter.
//!
//! Latency is `receive time - send timestamp`, both CLOCK_MONOTONIC on the
//! same host. The histogram is allocated once at start (1 ns .. 60 s, three
//! significant digits); recording is a bounded array increment. Min, max and
//! mean are kept exactly beside it; percentiles and the CDF come from the
//! histogram (relative error ≤ 0.1 %).

use hdrhistogram::Histogram;
use serde::Serialize;

/// Highest latency the histogram resolves; larger values are clamped (and
/// counted in `clamped`).
pub const MAX_TRACKABLE_NS: u64 = 60_000_000_000;
/// Most points in the exported CDF.
pub const MAX_CDF_POINTS: usize = 200;
/// Significant digits of the exported histogram's buckets (`hist`).
pub const HIST_DIGITS: u32 = 3;

/// Latency accumulator.
pub struct Latency {
    hist: Histogram<u64>,
    count: u64,
    sum_ns: u128,
    min_ns: u64,
    max_ns: u64,
    /// Frames whose send timestamp lies in the receiver's future (not
    /// possible on one host unless the timestamp is bogus): recorded as 0.
    pub future: u64,
    /// Values above [`MAX_TRACKABLE_NS`], recorded at that value.
    pub clamped: u64,
}

/// Latency summary as printed in the JSON document (`rx.latency_ns`).
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct LatencySummary {
    /// Samples.
    pub count: u64,
    /// Smallest sample (exact).
    pub min: u64,
    /// Mean (exact).
    pub mean: f64,
    /// Median.
    pub p50: u64,
    /// 90th percentile.
    pub p90: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Largest sample (exact).
    pub max: u64,
    /// `[value_ns, cumulative_fraction]`, ascending, at most 200 points,
    /// ending with `[max, 1.0]`.
    pub cdf: Vec<(u64, f64)>,
    /// The whole distribution, mergeable across receivers: `[value_ns,
    /// count]` ascending, each value the upper edge of a bucket of three
    /// significant digits (a sample is at most that value and more than
    /// 0.1–1 % below it). The bench merges these to get exact percentiles
    /// over several streams or processes.
    pub hist: Vec<(u64, u64)>,
}

/// Rounds `v` up to `HIST_DIGITS` significant digits.
pub fn hist_bucket(v: u64) -> u64 {
    let limit = 10u64.pow(HIST_DIGITS);
    if v < limit {
        return v;
    }
    let mut p = 1u64;
    while v / p >= limit {
        p *= 10;
    }
    v.div_ceil(p).saturating_mul(p)
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty accumulator (allocates the histogram): 1 ns .. 60 s, three
    /// significant digits (about 27 000 buckets, 216 KiB).
    pub fn new() -> Self {
        Self::with_digits(3)
    }

    /// An empty accumulator whose histogram keeps `digits` significant
    /// digits (clamped to 1..=5; [`Latency::new`] uses 3). Fewer digits: a
    /// smaller histogram (1 digit: 512 buckets) that is cheaper to clear and
    /// to summarise, with the same code paths (a fuzz harness uses this).
    pub fn with_digits(digits: u8) -> Self {
        Self {
            hist: Histogram::new_with_bounds(1, MAX_TRACKABLE_NS, digits.clamp(1, 5))
                .expect("constant histogram bounds are valid"),
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            future: 0,
            clamped: 0,
        }
    }

    /// Empties the accumulator, keeping its histogram's allocation (the
    /// counts are cleared only if something was recorded).
    pub fn reset(&mut self) {
        if self.count > 0 {
            self.hist.reset();
        }
        self.count = 0;
        self.sum_ns = 0;
        self.min_ns = u64::MAX;
        self.max_ns = 0;
        self.future = 0;
        self.clamped = 0;
    }

    /// Records one frame sent at `sent_ns` and received at `recv_ns`.
    #[inline]
    pub fn record(&mut self, sent_ns: u64, recv_ns: u64) {
        let v = match recv_ns.checked_sub(sent_ns) {
            Some(v) => v,
            None => {
                self.future += 1;
                0
            }
        };
        self.record_value(v);
    }

    /// Records one latency value in ns.
    #[inline]
    pub fn record_value(&mut self, v: u64) {
        let h = if v > MAX_TRACKABLE_NS {
            self.clamped += 1;
            MAX_TRACKABLE_NS
        } else {
            v
        };
        // Cannot fail: 0 ..= MAX_TRACKABLE_NS is within the bounds.
        self.hist.saturating_record(h);
        self.count += 1;
        self.sum_ns += v as u128;
        self.min_ns = self.min_ns.min(v);
        self.max_ns = self.max_ns.max(v);
    }

    /// Number of samples.
    #[cfg(test)]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Summary with percentiles and a CDF, or `None` without samples.
    pub fn summary(&self) -> Option<LatencySummary> {
        if self.count == 0 {
            return None;
        }
        let q = |x: f64| {
            self.hist
                .value_at_quantile(x)
                .clamp(self.min_ns, self.max_ns)
        };
        Some(LatencySummary {
            count: self.count,
            min: self.min_ns,
            mean: self.sum_ns as f64 / self.count as f64,
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            p999: q(0.999),
            max: self.max_ns,
            cdf: self.cdf(),
            hist: self.hist_export(),
        })
    }

    /// The histogram in buckets of `HIST_DIGITS` significant digits.
    fn hist_export(&self) -> Vec<(u64, u64)> {
        let mut out: Vec<(u64, u64)> = Vec::new();
        for it in self.hist.iter_recorded() {
            let v = it.value_iterated_to().clamp(self.min_ns, self.max_ns);
            let b = hist_bucket(v);
            let c = it.count_at_value();
            match out.last_mut() {
                Some(last) if last.0 == b => last.1 += c,
                _ => out.push((b, c)),
            }
        }
        out
    }

    /// The quantiles of the CDF: 150 evenly spaced, then the tail (99 %,
    /// 99.5 %, 99.9 % ...) that a linear grid would miss; ascending.
    fn cdf_quantiles() -> Vec<f64> {
        let mut qs: Vec<f64> = (1..=150).map(|i| i as f64 / 150.0).collect();
        for k in 2..=7 {
            let t = 10f64.powi(-k);
            qs.push(1.0 - t);
            qs.push(1.0 - t / 2.0);
        }
        qs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        qs
    }

    /// CDF points: each of [`Latency::cdf_quantiles`] mapped to a recorded
    /// value and the exact fraction of samples at or below it. One pass
    /// over the recorded buckets (the same values and fractions as
    /// `value_at_quantile` and `count_between` per quantile, which scan the
    /// whole histogram twice for each of the 162 quantiles).
    fn cdf(&self) -> Vec<(u64, f64)> {
        let total_count = self.hist.len();
        let total = total_count as f64;
        let mut out: Vec<(u64, f64)> = Vec::with_capacity(MAX_CDF_POINTS);
        // The minimum first, so the curve starts where the data does: the
        // fraction in the lowest recorded bucket.
        let mut rec = self.hist.iter_recorded();
        let Some(first) = rec.next() else {
            return vec![(self.max_ns, 1.0)];
        };
        // Buckets up to the current one: its upper value, the samples at
        // or below it.
        let mut at = (first.value_iterated_to(), first.count_at_value());
        out.push((self.min_ns, at.1 as f64 / total));
        for q in Self::cdf_quantiles() {
            // As `Histogram::value_at_quantile`: the first bucket whose
            // cumulative count reaches ceil(q * n) (at least 1).
            let target = ((q * total_count as f64).ceil() as u64).max(1);
            while at.1 < target {
                match rec.next() {
                    Some(b) => at = (b.value_iterated_to(), at.1 + b.count_at_value()),
                    None => break,
                }
            }
            let shown = at.0.clamp(self.min_ns, self.max_ns);
            if out.last().is_none_or(|&(lv, _)| shown > lv) {
                out.push((shown, (at.1 as f64 / total).min(1.0)));
            }
        }
        // End exactly at the maximum with fraction 1.
        match out.last_mut() {
            Some(last) if last.0 == self.max_ns => last.1 = 1.0,
            _ => out.push((self.max_ns, 1.0)),
        }
        out.truncate(MAX_CDF_POINTS);
        out
    }

    /// The CDF as it was computed before the one-pass [`Latency::cdf`]: a
    /// quantile lookup and a count per point (the oracle of a test).
    #[cfg(test)]
    fn cdf_by_lookups(&self) -> Vec<(u64, f64)> {
        let total = self.hist.len() as f64;
        let mut out: Vec<(u64, f64)> = Vec::with_capacity(MAX_CDF_POINTS);
        let lo = self.hist.highest_equivalent(self.hist.min());
        out.push((self.min_ns, self.hist.count_between(0, lo) as f64 / total));
        for q in Self::cdf_quantiles() {
            let v = self.hist.value_at_quantile(q);
            let frac = self.hist.count_between(0, v) as f64 / total;
            let shown = v.clamp(self.min_ns, self.max_ns);
            if out.last().is_none_or(|&(lv, _)| shown > lv) {
                out.push((shown, frac.min(1.0)));
            }
        }
        match out.last_mut() {
            Some(last) if last.0 == self.max_ns => last.1 = 1.0,
            _ => out.push((self.max_ns, 1.0)),
        }
        out.truncate(MAX_CDF_POINTS);
        out
    }
}

/// RFC 3550 §6.4.1 interarrival jitter: for consecutive frames i, j the
/// transit-time difference `D = (Rj - Ri) - (Sj - Si)`, and
/// `J += (|D| - J) / 16`. Kept, as in the RFC's appendix A.8, as an
/// integer scaled by 16 (`J' += |D| - J'/16`, rounded): a float update
/// makes a chain of dependent multiply-adds across every received frame.
#[derive(Clone, Debug, Default)]
pub struct Jitter {
    last_transit: Option<i64>,
    j16: u64,
}

impl Jitter {
    /// Feeds one arrival.
    #[inline]
    pub fn record(&mut self, sent_ns: u64, recv_ns: u64) {
        let transit = recv_ns.wrapping_sub(sent_ns) as i64;
        if let Some(prev) = self.last_transit {
            // Capped (at ~18 minutes) so garbage timestamps cannot overflow.
            let d = transit.wrapping_sub(prev).unsigned_abs().min(1 << 40);
            self.j16 = self.j16 + d - ((self.j16 + 8) >> 4);
        }
        self.last_transit = Some(transit);
    }

    /// Current estimate in ns.
    pub fn ns(&self) -> f64 {
        self.j16 as f64 / 16.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_uniform_input() {
        let mut l = Latency::new();
        for v in 1..=10_000u64 {
            l.record(1_000_000, 1_000_000 + v * 100); // 100 ns .. 1 ms
        }
        let s = l.summary().unwrap();
        assert_eq!(s.count, 10_000);
        assert_eq!(s.min, 100);
        assert_eq!(s.max, 1_000_000);
        assert!((s.mean - 500_050.0).abs() < 1e-6);
        let close = |got: u64, want: u64| {
            let err = (got as f64 - want as f64).abs() / want as f64;
            assert!(err <= 0.002, "got {got}, want {want}");
        };
        close(s.p50, 500_000);
        close(s.p90, 900_000);
        close(s.p99, 990_000);
        close(s.p999, 999_000);
    }

    #[test]
    fn cdf_is_monotone_bounded_and_ends_at_max() {
        let mut l = Latency::new();
        let mut x: u64 = 12345;
        for _ in 0..100_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            l.record_value(500 + (x >> 40) % 50_000);
        }
        l.record_value(10_000_000); // one outlier
        let s = l.summary().unwrap();
        assert!(s.cdf.len() <= MAX_CDF_POINTS && s.cdf.len() > 100);
        for w in s.cdf.windows(2) {
            assert!(w[1].0 > w[0].0 && w[1].1 >= w[0].1, "{:?}", w);
        }
        assert_eq!(s.cdf[0].0, s.min);
        assert_eq!(*s.cdf.last().unwrap(), (10_000_000, 1.0));
        assert!(s.cdf[0].1 > 0.0 && s.cdf[0].1 < 0.01);
        // The outlier is 1 in 100 001: the point before it is in the bulk
        // (< 50 500 ns) at a fraction of at least 99.99 %.
        let before = s.cdf[s.cdf.len() - 2];
        assert!(
            before.0 < 50_600 && before.1 >= 0.9999 && before.1 < 1.0,
            "{before:?}"
        );
    }

    #[test]
    fn one_pass_cdf_equals_the_lookup_per_quantile() {
        // Several shapes (one sample, a few, a bulk with outliers, zeros,
        // clamped values) at 1 and 3 significant digits: the one-pass CDF
        // must give exactly the points of a lookup and a count per quantile.
        let mut x: u64 = 0x2545_F491_4F6C_DD1D;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for digits in [1u8, 3] {
            for (n, spread) in [
                (1usize, 1u64),
                (3, 10),
                (100, 1_000),
                (20_000, 50_000),
                (5_000, 1 << 40),
            ] {
                let mut l = Latency::with_digits(digits);
                for k in 0..n {
                    let v = match k % 97 {
                        0 => 0,
                        1 => MAX_TRACKABLE_NS + next() % 1000,
                        _ => 100 + next() % spread,
                    };
                    l.record_value(v);
                }
                assert_eq!(l.cdf(), l.cdf_by_lookups(), "digits {digits}, n {n}");
            }
        }
    }

    #[test]
    fn fewer_digits_same_bounds() {
        let mut l = Latency::with_digits(1);
        l.record_value(0);
        l.record_value(MAX_TRACKABLE_NS + 1);
        let s = l.summary().unwrap();
        assert_eq!(
            (s.count, s.min, s.max, l.clamped),
            (2, 0, MAX_TRACKABLE_NS + 1, 1)
        );
        assert_eq!(*s.cdf.last().unwrap(), (MAX_TRACKABLE_NS + 1, 1.0));
    }

    #[test]
    fn hist_export_counts_every_sample_in_three_digit_buckets() {
        assert_eq!(
            (
                hist_bucket(999),
                hist_bucket(1000),
                hist_bucket(1001),
                hist_bucket(123_456)
            ),
            (999, 1000, 1010, 124_000)
        );
        let mut l = Latency::new();
        let mut x: u64 = 7;
        for _ in 0..50_000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            l.record_value(800 + (x >> 40) % 2_000_000);
        }
        let s = l.summary().unwrap();
        assert_eq!(s.hist.iter().map(|h| h.1).sum::<u64>(), 50_000);
        for w in s.hist.windows(2) {
            assert!(w[1].0 > w[0].0);
        }
        assert!(s.hist.len() < 3_500, "{} buckets", s.hist.len());
        // the merged p99 from the buckets is within a bucket of the histogram's
        let mut acc = 0;
        let p99 = s.hist.iter().find(|h| {
            acc += h.1;
            acc as f64 >= 0.99 * 50_000.0
        });
        let v = p99.unwrap().0 as f64;
        assert!(
            (v - s.p99 as f64).abs() / s.p99 as f64 <= 0.011,
            "{v} vs {}",
            s.p99
        );
    }

    #[test]
    fn constant_latency() {
        let mut l = Latency::new();
        for _ in 0..1000 {
            l.record_value(2500);
        }
        let s = l.summary().unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max), (2500, 2500, 2500, 2500));
        assert_eq!(s.cdf, vec![(2500, 1.0)]);
    }

    #[test]
    fn future_timestamps_and_huge_values_are_counted() {
        let mut l = Latency::new();
        l.record(2000, 1000);
        l.record(0, MAX_TRACKABLE_NS * 2);
        assert_eq!((l.future, l.clamped, l.count()), (1, 1, 2));
        assert!(Latency::new().summary().is_none());
    }

    #[test]
    fn jitter_follows_rfc3550() {
        // Constant transit: no jitter.
        let mut j = Jitter::default();
        for i in 0..100u64 {
            j.record(i * 1000, i * 1000 + 500);
        }
        assert_eq!(j.ns(), 0.0);
        // Alternating transit 500/700: |D| = 200 every time; J converges to
        // 200 as J_n = 200 (1 - (15/16)^n).
        let mut j = Jitter::default();
        for i in 0..=64u64 {
            let t = if i % 2 == 0 { 500 } else { 700 };
            j.record(i * 1000, i * 1000 + t);
        }
        // (Integer arithmetic scaled by 16 rounds: within 1 ns.)
        let want = 200.0 * (1.0 - (15.0f64 / 16.0).powi(64));
        assert!((j.ns() - want).abs() < 1.0, "{} vs {}", j.ns(), want);
        for i in 65..=400u64 {
            let t = if i % 2 == 0 { 500 } else { 700 };
            j.record(i * 1000, i * 1000 + t);
        }
        assert!(
            (j.ns() - 200.0).abs() <= 0.5,
            "converges to |D|: {}",
            j.ns()
        );
        // Garbage timestamps neither overflow nor panic.
        let mut j = Jitter::default();
        for i in 0..1000u64 {
            j.record(if i % 2 == 0 { 0 } else { u64::MAX }, i);
        }
        assert!(j.ns().is_finite() && j.ns() > 0.0);
    }
}
