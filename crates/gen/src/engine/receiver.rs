//! The receiver: parses each frame, finds its stream (an open-addressing
//! index over at most [`MAX_STREAMS`] streams), and accounts sequence
//! numbers (loss, reordering, duplicates), one-way latency, jitter and,
//! with `touch`, every payload byte. Frames that are not ours, warm-up
//! frames, frames of streams beyond the limit and forged sequence numbers
//! are counted apart, never in a statistic.

use fabric::{RxBatch, RxQueue};
use serde::Serialize;

use crate::frame::{self, WARMUP_BIT};
use crate::latency::{Jitter, Latency};
use crate::seq::{SeqTracker, DEFAULT_WINDOW, SEQ_LIMIT};
use crate::sys::now_ns;

/// Most distinct streams a receiver tracks; frames of further streams are
/// counted in `untracked`.
pub const MAX_STREAMS: usize = 1024;
/// The first this many streams of a receiver also get a latency histogram
/// of their own (`rx.streams[].latency_ns`).
pub const LATENCY_STREAMS: usize = 64;

/// How much a receiver tracks. [`ReceiverLimits::default`] is what
/// turnout-gen runs with; smaller limits take the same code paths with less
/// memory to clear and summarise (the `gen_rx` fuzz harness uses them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReceiverLimits {
    /// Most distinct streams tracked (1..=[`MAX_STREAMS`]); frames of
    /// further streams are counted in `untracked`.
    pub streams: usize,
    /// The first this many streams get a latency histogram of their own.
    pub latency_streams: usize,
    /// Reorder window of each stream, in sequence numbers (see
    /// [`SeqTracker::new`]).
    pub window: usize,
    /// Significant digits of the latency histograms
    /// ([`Latency::with_digits`]).
    pub latency_digits: u8,
}

impl Default for ReceiverLimits {
    fn default() -> Self {
        Self {
            streams: MAX_STREAMS,
            latency_streams: LATENCY_STREAMS,
            window: DEFAULT_WINDOW,
            latency_digits: 3,
        }
    }
}

/// The index slot a stream id hashes to (Fibonacci hashing) in an index of
/// `2^bits` slots (open addressing, linear probing; the index has at least
/// twice as many slots as streams, so a lookup probes about 1.5 slots even
/// when the stream table is full).
#[inline]
fn index_slot(id: u32, bits: u32) -> usize {
    (id.wrapping_mul(0x9E37_79B1) >> (32 - bits)) as usize
}

/// How many frames ahead the receiver prefetches.
const PREFETCH_AHEAD: usize = 4;

/// Per-stream receive state.
pub struct StreamState {
    /// Stream id.
    pub id: u32,
    /// Sequence accounting.
    pub seq: SeqTracker,
    /// Interarrival jitter of this stream (first frame of each receive burst).
    pub jitter: Jitter,
    /// Burst the jitter last took a frame from.
    jitter_burst: u64,
    /// One-way latency of this stream (the first [`LATENCY_STREAMS`] only).
    pub latency: Option<Box<Latency>>,
}

/// One stream in the document.
#[derive(Clone, Debug, Serialize)]
pub struct StreamReport {
    /// Stream id.
    pub id: u32,
    /// Frames received (duplicates included).
    pub received: u64,
    /// Lost (see seq.rs).
    pub lost: u64,
    /// Reordered.
    pub reordered: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Late frames older than the reorder window (classified by guess).
    pub beyond_window: u64,
    /// RFC 3550 jitter of this stream.
    pub jitter_ns: f64,
    /// One-way latency of this stream (absent beyond the first 64 streams
    /// or without samples).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<crate::latency::LatencySummary>,
}

/// The receiver.
pub struct Receiver {
    streams: Vec<StreamState>,
    /// The states of streams before the last [`Receiver::reset`], kept for
    /// reuse: the top of this stack is the state that stood at index
    /// `streams.len()`, so a reused state keeps its latency histogram
    /// exactly when its new index is below [`LATENCY_STREAMS`].
    spare: Vec<StreamState>,
    /// Stream id -> position in `streams` + 1 (0: free), so that finding a
    /// stream among up to [`MAX_STREAMS`] does not scan them all.
    index: Box<[u16]>,
    /// log2 of `index.len()`.
    index_bits: u32,
    limits: ReceiverLimits,
    last: usize,
    /// Latency of every measured frame.
    pub latency: Latency,
    /// Jitter over the first measured frame of each receive burst, in
    /// arrival order (frames of one burst share a receive timestamp, so
    /// pairs within a burst would measure the batching, not the path).
    pub jitter: Jitter,
    /// Receive bursts so far (identifies the current one).
    burst_no: u64,
    jitter_burst: u64,
    /// Measured frames of ours.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames that are not ours.
    pub foreign: u64,
    /// Their bytes.
    pub foreign_bytes: u64,
    /// Warm-up frames of ours (not in any statistic).
    pub warmup: u64,
    /// Frames of streams beyond [`MAX_STREAMS`].
    pub untracked: u64,
    /// Frames of ours with a sequence number no sender reaches
    /// ([`SEQ_LIMIT`]): corrupted or forged, not in any statistic.
    pub implausible: u64,
    /// First and last arrival of a measured frame.
    pub first_ns: Option<u64>,
    /// See `first_ns`.
    pub last_ns: u64,
    touch: bool,
    /// Running sum of the touched bytes (printed, so it cannot be elided).
    pub touch_sum: u64,
    /// Bursts that brought frames.
    pub bursts: u64,
    /// Of those, the ones that filled the whole batch right after a burst
    /// of the same queue that did too: frames kept waiting, the receiver
    /// was behind its peer. (One full batch alone is no sign: a peer may
    /// publish a batch's worth at once; nor is a full batch of one queue
    /// after one of another.)
    pub backlog_bursts: u64,
    /// Whether the last burst of queue `i` (bit `i % 64`, as
    /// [`Receiver::poll_queue`] numbers them) filled the batch.
    last_full: u64,
}

impl Receiver {
    /// A receiver; `touch` reads every payload byte.
    pub fn new(touch: bool) -> Self {
        Self::with_limits(touch, ReceiverLimits::default())
    }

    /// A receiver tracking at most `limits.streams` streams (clamped to
    /// 1..=[`MAX_STREAMS`]), the first `limits.latency_streams` with a
    /// latency histogram of their own.
    pub fn with_limits(touch: bool, limits: ReceiverLimits) -> Self {
        let limits = ReceiverLimits {
            streams: limits.streams.clamp(1, MAX_STREAMS),
            ..limits
        };
        let slots = (2 * limits.streams).next_power_of_two();
        Self {
            streams: Vec::with_capacity(limits.streams),
            spare: Vec::new(),
            index: vec![0u16; slots].into_boxed_slice(),
            index_bits: slots.trailing_zeros(),
            limits,
            last: 0,
            latency: Latency::with_digits(limits.latency_digits),
            jitter: Jitter::default(),
            burst_no: 0,
            jitter_burst: u64::MAX,
            packets: 0,
            bytes: 0,
            foreign: 0,
            foreign_bytes: 0,
            warmup: 0,
            untracked: 0,
            implausible: 0,
            first_ns: None,
            last_ns: 0,
            touch,
            touch_sum: 0,
            bursts: 0,
            backlog_bursts: 0,
            last_full: 0,
        }
    }

    /// The limits this receiver was built with (clamped).
    pub fn limits(&self) -> ReceiverLimits {
        self.limits
    }

    /// Back to the state of a new receiver with the same limits (and
    /// `touch`), keeping the memory of the streams seen so far (their
    /// windows and latency histograms are cleared and reused by the next
    /// streams, in order): for a process that measures several runs, or a
    /// fuzz harness, without allocating again.
    pub fn reset(&mut self, touch: bool) {
        // Highest index first, so that index 0 ends on top of the stack.
        while let Some(mut s) = self.streams.pop() {
            s.seq.reset();
            s.jitter = Jitter::default();
            s.jitter_burst = u64::MAX;
            if let Some(l) = s.latency.as_mut() {
                l.reset();
            }
            self.spare.push(s);
        }
        self.index.fill(0);
        self.last = 0;
        self.latency.reset();
        self.jitter = Jitter::default();
        self.burst_no = 0;
        self.jitter_burst = u64::MAX;
        self.packets = 0;
        self.bytes = 0;
        self.foreign = 0;
        self.foreign_bytes = 0;
        self.warmup = 0;
        self.untracked = 0;
        self.implausible = 0;
        self.first_ns = None;
        self.last_ns = 0;
        self.touch = touch;
        self.touch_sum = 0;
        self.bursts = 0;
        self.backlog_bursts = 0;
        self.last_full = 0;
    }

    #[inline]
    fn stream_index(&mut self, id: u32) -> Option<usize> {
        if let Some(s) = self.streams.get(self.last) {
            if s.id == id {
                return Some(self.last);
            }
        }
        let mask = self.index.len() - 1;
        let mut slot = index_slot(id, self.index_bits);
        let found = loop {
            match self.index[slot] {
                0 => break None,
                v if self.streams[v as usize - 1].id == id => break Some(v as usize - 1),
                _ => slot = (slot + 1) & mask,
            }
        };
        let i = match found {
            Some(i) => i,
            None if self.streams.len() < self.limits.streams => {
                // `slot` is the free slot the probe ended on; the table is
                // never more than half full, so there always is one.
                self.index[slot] = self.streams.len() as u16 + 1;
                if let Some(mut s) = self.spare.pop() {
                    // A state cleared by `reset`, from this same index.
                    s.id = id;
                    self.streams.push(s);
                } else {
                    // Once per new stream: the window bitmap (and, for the
                    // first streams, a latency histogram).
                    let latency = (self.streams.len() < self.limits.latency_streams)
                        .then(|| Box::new(Latency::with_digits(self.limits.latency_digits)));
                    self.streams.push(StreamState {
                        id,
                        seq: SeqTracker::new(self.limits.window),
                        jitter: Jitter::default(),
                        jitter_burst: u64::MAX,
                        latency,
                    });
                }
                self.streams.len() - 1
            }
            None => return None,
        };
        self.last = i;
        Some(i)
    }

    /// Accounts one frame received at `now`.
    #[inline]
    pub fn frame(&mut self, data: &[u8], now: u64) {
        let Some(o) = frame::parse(data) else {
            self.foreign += 1;
            self.foreign_bytes += data.len() as u64;
            return;
        };
        if o.stream & WARMUP_BIT != 0 {
            self.warmup += 1;
            return;
        }
        if o.seq >= SEQ_LIMIT {
            self.implausible += 1;
            return;
        }
        let Some(i) = self.stream_index(o.stream) else {
            self.untracked += 1;
            return;
        };
        let burst = self.burst_no;
        let s = &mut self.streams[i];
        s.seq.record(o.seq);
        if s.jitter_burst != burst {
            s.jitter_burst = burst;
            s.jitter.record(o.ts_ns, now);
        }
        if let Some(l) = s.latency.as_mut() {
            l.record(o.ts_ns, now);
        }
        self.latency.record(o.ts_ns, now);
        if self.jitter_burst != burst {
            self.jitter_burst = burst;
            self.jitter.record(o.ts_ns, now);
        }
        self.packets += 1;
        self.bytes += data.len() as u64;
        if self.first_ns.is_none() {
            self.first_ns = Some(now);
        }
        self.last_ns = now;
        if self.touch {
            self.touch_sum = frame::touch(self.touch_sum, &data[o.payload_offset..o.payload_end]);
        }
    }

    /// Receives one burst from `rxq` and accounts it. Returns frames seen.
    #[inline]
    pub fn poll(&mut self, rxq: &mut dyn RxQueue, batch: &mut RxBatch) -> usize {
        self.poll_queue(0, rxq, batch)
    }

    /// [`Receiver::poll`] of the receiver's queue number `i` (a receiver
    /// polling several queues in turn numbers each, so that a full burst
    /// of one after a full burst of another is not taken for a backlog).
    #[inline]
    pub fn poll_queue(&mut self, i: usize, rxq: &mut dyn RxQueue, batch: &mut RxBatch) -> usize {
        let cap = batch.capacity();
        let rx = batch.receive(rxq, 0, 0);
        let n = rx.received();
        let bit = 1u64 << (i % 64);
        if n == 0 {
            // caught up: a full burst after this one is no backlog
            self.last_full &= !bit;
        } else {
            self.bursts += 1;
            self.burst_no += 1;
            let full = n >= cap;
            if full && self.last_full & bit != 0 {
                self.backlog_bursts += 1;
            }
            if full {
                self.last_full |= bit;
            } else {
                self.last_full &= !bit;
            }
            let now = now_ns();
            let pkts = rx.pkts();
            for q in pkts.iter().take(PREFETCH_AHEAD) {
                q.prefetch();
            }
            for (i, p) in pkts.iter().enumerate() {
                // The frames were just written by a peer on another core:
                // start fetching a few ahead.
                if let Some(q) = pkts.get(i + PREFETCH_AHEAD) {
                    q.prefetch();
                }
                self.frame(p.data(), now);
            }
        }
        n
    }

    /// Counts the tail of stream `id` lost up to `end` (the sender's count).
    pub fn finish_stream(&mut self, id: u32, end: u64) {
        if end == 0 {
            return;
        }
        if let Some(i) = self.stream_index(id) {
            self.streams[i].seq.finish(end);
        }
    }

    /// Whether every one of the first `sent` frames of stream `id` has
    /// arrived (duplicates not counted): none of them is still in flight.
    pub fn all_in(&mut self, id: u32, sent: u64) -> bool {
        if sent == 0 {
            return true;
        }
        self.stream_index(id)
            .is_some_and(|i| self.streams[i].seq.received - self.streams[i].seq.duplicated >= sent)
    }

    /// Total lost over streams.
    pub fn lost(&self) -> u64 {
        self.streams.iter().map(|s| s.seq.lost).sum()
    }

    /// Each stream's id and sequence accounting, in arrival order of the
    /// streams; cheap, unlike [`Receiver::stream_reports`], which
    /// summarises every stream's latency histogram.
    pub fn seq_trackers(&self) -> impl Iterator<Item = (u32, &SeqTracker)> + '_ {
        self.streams.iter().map(|s| (s.id, &s.seq))
    }

    /// Per-stream reports, by id.
    pub fn stream_reports(&self) -> Vec<StreamReport> {
        let mut v: Vec<StreamReport> = self
            .streams
            .iter()
            .map(|s| StreamReport {
                id: s.id,
                received: s.seq.received,
                lost: s.seq.lost,
                reordered: s.seq.reordered,
                duplicated: s.seq.duplicated,
                beyond_window: s.seq.beyond_window,
                jitter_ns: s.jitter.ns(),
                latency_ns: s.latency.as_ref().and_then(|l| l.summary()),
            })
            .collect();
        v.sort_by_key(|s| s.id);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::spec;
    use crate::frame::FrameGen;

    #[test]
    fn foreign_frames_are_counted_not_parsed() {
        let mut r = Receiver::new(false);
        r.frame(&[0u8; 60], 5);
        r.frame(&[], 5);
        r.frame(&[0xff; 1500], 5);
        assert_eq!((r.foreign, r.packets), (3, 0));
        assert_eq!(r.foreign_bytes, 1560);
    }

    #[test]
    fn all_in_once_every_frame_sent_arrived_duplicates_aside() {
        let mut g = FrameGen::new(&spec(), &[64]).unwrap();
        let mut r = Receiver::new(false);
        assert!(r.all_in(7, 0), "nothing sent, nothing in flight");
        assert!(!r.all_in(7, 1), "a stream never seen");
        for seq in [0, 2, 2] {
            let f = g.next(7, seq, 5).to_vec();
            r.frame(&f, 10);
        }
        assert!(
            !r.all_in(7, 3),
            "1 is in flight; the duplicate of 2 is not it"
        );
        let f = g.next(7, 1, 5).to_vec();
        r.frame(&f, 10);
        assert!(r.all_in(7, 3));
        assert!(!r.all_in(7, 4));
    }

    #[test]
    fn forged_sequence_numbers_are_implausible_not_lost() {
        // A hostile switch stamps our magic with sequence numbers near
        // u64::MAX: before the limit `next` wrapped (seq + 1) and the
        // loss sums over streams overflowed (found by fuzz target gen_rx).
        let mut g = FrameGen::new(&spec(), &[64]).unwrap();
        let mut r = Receiver::new(false);
        for (stream, seq) in [
            (1, 0),
            (1, u64::MAX),
            (2, u64::MAX - 1),
            (1, 1),
            (1, SEQ_LIMIT),
        ] {
            let f = g.next(stream, seq, 5).to_vec();
            r.frame(&f, 10);
        }
        assert_eq!((r.packets, r.implausible), (2, 3));
        let s = r.stream_reports();
        assert_eq!(s.len(), 1, "forged frames open no stream");
        assert_eq!((s[0].received, s[0].lost), (2, 0));
        r.finish_stream(1, u64::MAX);
        assert_eq!(r.lost(), SEQ_LIMIT - 2, "the sender's count is capped too");
    }

    #[test]
    fn a_reset_receiver_reports_like_a_new_one() {
        // Reuse must leave nothing of the previous run behind: counters,
        // windows, jitter, histograms, and which streams have latency.
        let mut g = FrameGen::new(&spec(), &[64]).unwrap();
        let mut run = |r: &mut Receiver, streams: std::ops::Range<u32>, seqs: &[u64]| {
            for stream in streams {
                for (i, &seq) in seqs.iter().enumerate() {
                    let f = g.next(stream, seq, 1_000).to_vec();
                    r.frame(&f, 2_000 + 37 * i as u64 * (stream as u64 + 1));
                }
            }
            r.finish_stream(3, 40);
        };
        let json = |r: &Receiver| {
            serde_json::to_string(&(
                r.stream_reports(),
                r.latency.summary(),
                r.jitter.ns(),
                (
                    r.packets,
                    r.bytes,
                    r.foreign,
                    r.lost(),
                    r.touch_sum,
                    r.first_ns,
                    r.last_ns,
                ),
            ))
            .unwrap()
        };
        let mut used = Receiver::new(false);
        run(&mut used, 0..(LATENCY_STREAMS as u32 + 6), &[0, 5, 3, 3, 9]);
        used.frame(&[0u8; 60], 1);
        used.reset(true);
        let mut fresh = Receiver::new(true);
        for r in [&mut used, &mut fresh] {
            run(r, 100..(100 + LATENCY_STREAMS as u32 + 3), &[2, 1, 7]);
        }
        assert_eq!(json(&used), json(&fresh));
        let with_latency = |r: &Receiver| r.streams.iter().filter(|s| s.latency.is_some()).count();
        assert_eq!(with_latency(&used), LATENCY_STREAMS);
        assert_eq!(with_latency(&fresh), LATENCY_STREAMS);
        // Fewer streams than before, then more than ever: the spares are
        // used in order, then new states are allocated.
        for n in [2u32, LATENCY_STREAMS as u32 + 20] {
            used.reset(false);
            let mut fresh = Receiver::new(false);
            for r in [&mut used, &mut fresh] {
                run(r, 7..7 + n, &[0, 2]);
            }
            assert_eq!(json(&used), json(&fresh));
            assert_eq!(with_latency(&used), with_latency(&fresh));
        }
    }

    #[test]
    fn every_tracked_stream_is_found_and_the_rest_untracked() {
        // More streams than the limit, ids spread over the id space (the
        // index fills to half, with probe chains): each tracked stream
        // keeps its own count, the surplus is untracked; at the default
        // limits and at small ones (a fuzz harness's), down to one stream.
        let small = |streams| ReceiverLimits {
            streams,
            latency_streams: 2,
            window: 64,
            latency_digits: 1,
        };
        for limits in [ReceiverLimits::default(), small(5), small(1), small(0)] {
            let mut g = FrameGen::new(&spec(), &[64]).unwrap();
            let mut r = Receiver::with_limits(false, limits);
            let max = limits.streams.max(1) as u32;
            assert_eq!(r.limits().streams, max as usize);
            let n = max + 10;
            let id = |k: u32| k * 31 % (crate::frame::MAX_STREAM + 1);
            for round in 0..3u64 {
                for k in 0..n {
                    let f = g.next(id(k), round * 100, 5).to_vec();
                    r.frame(&f, 10 + round);
                }
            }
            assert_eq!(r.untracked, 3 * 10, "{limits:?}");
            assert_eq!(r.packets, 3 * max as u64);
            let seen: Vec<(u32, u64)> = r.seq_trackers().map(|(i, t)| (i, t.received)).collect();
            let want: Vec<(u32, u64)> = (0..max).map(|k| (id(k), 3)).collect();
            assert_eq!(seen, want);
            // Sequence numbers 0, 100, 200: beyond a 64-number window the
            // skipped ones are lost all the same.
            assert!(r.seq_trackers().all(|(_, t)| t.lost == 198));
            let with_latency = r.streams.iter().filter(|s| s.latency.is_some()).count();
            assert_eq!(with_latency, (max as usize).min(limits.latency_streams));
        }
    }
}
