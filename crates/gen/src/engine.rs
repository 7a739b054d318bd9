//! The data path of every role: the sender (pacing, warm-up, stamping,
//! reserve/write/publish), the receiver (parse, sequence accounting,
//! latency, jitter, touch) and the forwarder (reflect and fwd).
//!
//! Invariants: after construction nothing here allocates per frame (the
//! receiver allocates once per *new stream*, at most [`MAX_STREAMS`]
//! times), blocks, or makes a system call other than the vDSO clock read
//! (once per burst). A frame that is not sent or not forwarded is counted
//! under a named reason.

use fabric::{RxBatch, RxQueue, TxFill};
use serde::Serialize;
use wire::{ethernet, MacAddr};

use crate::frame::{self, FrameGen, WARMUP_BIT};
use crate::latency::{Jitter, Latency};
use crate::pacing::Pacer;
use crate::seq::{SeqTracker, DEFAULT_WINDOW, SEQ_LIMIT};
use crate::sys::{now_ns, thread_cpu_ns, OwnedTx};

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

/// Pause hints an unpaced sender spins after finding its ring full.
const FULL_BACKOFF_SPINS: u32 = 64;

/// Sender counters (`tx` in the document).
#[derive(Clone, Debug, Default, Serialize)]
pub struct TxStats {
    /// Frames handed to the port in the measured window.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames due in the measured window that did not fit (paced only).
    pub full: u64,
    /// Frames sent during the warm-up.
    pub warmup_packets: u64,
    /// Frames due during the warm-up that did not fit (paced only).
    pub warmup_full: u64,
    /// Largest number of frames the sender was behind its schedule.
    pub behind_max: u64,
    /// Bursts the sender tried to send in the measured window.
    pub attempts: u64,
    /// Of those, the ones the port had room for fewer frames than due
    /// (back-pressure: the peer did not drain the port fast enough).
    pub pushback: u64,
    /// The sending thread's CPU clock when the measured window began and
    /// ended (ns; 0 until then).
    pub cpu_start_ns: u64,
    /// See `cpu_start_ns`.
    pub cpu_end_ns: u64,
}

/// What the sender should do.
#[derive(Clone, Debug)]
pub struct SendPlan {
    /// Stream id (< 2^31).
    pub stream: u32,
    /// Frames per burst.
    pub burst: u32,
    /// Paced: whole bursts back to back when their last frame is due,
    /// instead of evenly spaced frames.
    pub bunch: bool,
    /// Offered load, 0 = as fast as possible.
    pub rate_pps: f64,
    /// Length of the warm-up.
    pub warmup_ns: u64,
    /// Length of the measured window (ignored with `count`).
    pub duration_ns: u64,
    /// Stop after this many measured frames instead.
    pub count: Option<u64>,
}

/// The sender of one stream on one transmit queue, or spread by flow over
/// several (a multi-queue port: flow `f` always on queue `f mod N`, so
/// each flow keeps its order, as RSS would).
pub struct Sender<'a> {
    tx: OwnedTx<'a>,
    /// Queues 1..N of a multi-queue sender (empty: one queue, `tx`).
    more: Vec<OwnedTx<'a>>,
    /// Per queue (sized once): free slots, slots taken by this burst, the
    /// burst's first slot, the next slot written.
    qfree: Vec<u64>,
    qused: Vec<u64>,
    qfirst: Vec<u64>,
    qnext: Vec<u64>,
    gen: FrameGen,
    nslots: Vec<u32>,
    lens: Vec<u32>,
    /// Frames are stamped in the port's own buffers (one slot each, a
    /// queue that fills in place) instead of copied from the templates.
    in_place: bool,
    plan: SendPlan,
    pacer: Pacer,
    start_ns: u64,
    seq: u64,
    warm_seq: u64,
    measure_start: Option<u64>,
    end_ns: Option<u64>,
    last_send_ns: u64,
    /// Counters.
    pub stats: TxStats,
}

/// A frame size the port cannot carry.
#[derive(Debug)]
pub struct Oversize {
    /// The size.
    pub size: usize,
    /// The port's limit.
    pub max_frame_b: u32,
}

impl<'a> Sender<'a> {
    /// A sender starting its schedule at `start_ns`.
    pub fn new(
        tx: OwnedTx<'a>,
        gen: FrameGen,
        plan: SendPlan,
        start_ns: u64,
        max_frame_b: u32,
    ) -> Result<Self, Oversize> {
        Self::multi(vec![tx], gen, plan, start_ns, max_frame_b)
    }

    /// A sender over the transmit queues `txs` (at least one): the frame
    /// of flow `f` goes to `txs[f % txs.len()]`.
    pub fn multi(
        mut txs: Vec<OwnedTx<'a>>,
        gen: FrameGen,
        plan: SendPlan,
        start_ns: u64,
        max_frame_b: u32,
    ) -> Result<Self, Oversize> {
        assert!(!txs.is_empty(), "a sender needs a transmit queue");
        let more = txs.split_off(1);
        let tx = txs.pop().expect("one queue");
        let nq = more.len() + 1;
        let lens: Vec<u32> = gen.template_sizes().iter().map(|&l| l as u32).collect();
        let mut nslots = Vec::with_capacity(lens.len());
        for &l in &lens {
            let n = tx.slots_for(l as usize);
            if n == 0 {
                return Err(Oversize {
                    size: l as usize,
                    max_frame_b,
                });
            }
            nslots.push(n);
        }
        // The queues of one port carry the same frames in as many slots.
        for q in &more {
            for (&l, &n) in lens.iter().zip(&nslots) {
                let m = q.slots_for(l as usize);
                if m == 0 {
                    return Err(Oversize {
                        size: l as usize,
                        max_frame_b,
                    });
                }
                debug_assert_eq!(m, n, "queues of one port differ");
            }
        }
        // In place when every queue fills in place and every frame takes
        // one slot; with several queues one fill per run of frames on one
        // queue.
        let in_place = tx.fills_in_place()
            && more.iter().all(|q| q.fills_in_place())
            && nslots.iter().all(|&n| n == 1);
        Ok(Self {
            tx,
            more,
            qfree: vec![0; nq],
            qused: vec![0; nq],
            qfirst: vec![0; nq],
            qnext: vec![0; nq],
            gen,
            nslots,
            lens,
            in_place,
            pacer: Pacer::new(start_ns, plan.rate_pps),
            plan,
            start_ns,
            seq: 0,
            warm_seq: 0,
            measure_start: None,
            end_ns: None,
            last_send_ns: start_ns,
            stats: TxStats::default(),
        })
    }

    /// True once the measured window is over.
    #[inline]
    pub fn done(&self) -> bool {
        self.end_ns.is_some()
    }

    /// Measured frames sent so far: the next sequence number.
    pub fn sent_seq(&self) -> u64 {
        self.seq
    }

    /// Requested rate.
    pub fn requested_pps(&self) -> f64 {
        self.plan.rate_pps
    }

    /// Start and end of the measured window (end = now if still running).
    pub fn window(&self, now: u64) -> (u64, u64) {
        let s = self.measure_start.unwrap_or(now);
        (s, self.end_ns.unwrap_or(now).max(s))
    }

    /// Ends the run now (signal).
    pub fn stop(&mut self, now: u64) {
        if self.end_ns.is_none() {
            self.end_ns = Some(now.max(self.measure_start.unwrap_or(now)));
            self.stats.cpu_end_ns = thread_cpu_ns();
        }
    }

    /// Sends one burst if one is due at `now`, which must be a fresh clock
    /// reading: it is the send timestamp the frames carry. Returns frames sent.
    #[inline]
    pub fn poll(&mut self, now: u64) -> u64 {
        if self.end_ns.is_some() || !self.pacer.due(now) {
            return 0;
        }
        let paced = self.pacer.paced();
        // Bunched: wait until a whole burst is due, then send it at once.
        if paced && self.plan.bunch && self.pacer.backlog(now) < self.plan.burst as u64 {
            return 0;
        }
        // The schedule's time of this burst decides its phase, so catching
        // up never moves frames across the warm-up boundary.
        let t = if paced {
            self.pacer.next_deadline()
        } else {
            now
        };
        let warm = self.measure_start.is_none() && t < self.start_ns + self.plan.warmup_ns;
        if !warm && self.measure_start.is_none() {
            self.measure_start = Some(t);
            self.stats.cpu_start_ns = thread_cpu_ns();
        }
        // Paced, only the frames already due go out: evenly spaced frames at
        // rates the sender keeps up with, bursts of up to `burst` when it
        // catches up (or the rate leaves less than a poll between frames).
        let mut n = if paced {
            self.pacer.backlog(now).clamp(1, self.plan.burst as u64)
        } else {
            self.plan.burst as u64
        };
        if !warm {
            let ms = self.measure_start.unwrap_or(t);
            let over = match self.plan.count {
                Some(c) => {
                    n = n.min(c - self.stats.packets);
                    n == 0
                }
                None => {
                    // A catch-up burst ends with the window: frames due
                    // after it are not sent.
                    n = n.min(self.pacer.due_before(ms + self.plan.duration_ns));
                    t >= ms + self.plan.duration_ns
                }
            };
            if over {
                let end = if paced { t.max(self.last_send_ns) } else { now };
                self.end_ns = Some(end);
                self.stats.cpu_end_ns = thread_cpu_ns();
                return 0;
            }
        }
        if paced {
            let behind = self.pacer.backlog(now);
            if behind > self.stats.behind_max {
                self.stats.behind_max = behind;
            }
        }
        // How many of the next n frames fit, each on its flow's queue
        // (one queue: all of them on it), as many as fit in order: a frame
        // whose queue is full ends the burst, so no flow overtakes itself.
        let nq = self.qfree.len();
        for q in 0..nq {
            self.qfree[q] = pick(&mut self.tx, &mut self.more, q).free_slots() as u64;
            self.qused[q] = 0;
        }
        if !warm {
            self.stats.attempts += 1;
        }
        let mut k = 0u64;
        if nq == 1 && self.in_place {
            // One slot per frame.
            k = n.min(self.qfree[0]);
            self.qused[0] = k;
        } else {
            while k < n {
                let q = if nq == 1 {
                    0
                } else {
                    self.gen.peek_flow(k as usize) as usize % nq
                };
                let s = self.nslots[self.gen.peek_template(k as usize)] as u64;
                if self.qused[q] + s > self.qfree[q] {
                    break;
                }
                self.qused[q] += s;
                k += 1;
            }
        }
        if k < n && !warm {
            self.stats.pushback += 1;
        }
        if k == 0 {
            if !paced {
                // Full ring, nothing due by a schedule: let the consumer
                // work for a moment instead of pulling its index's cache
                // line over again at once (~1 µs, about one burst of 64 B
                // frames).
                for _ in 0..FULL_BACKOFF_SPINS {
                    std::hint::spin_loop();
                }
                return 0;
            }
            self.after_burst(n, 0, warm, paced);
            return 0;
        }
        for q in 0..nq {
            let used = self.qused[q];
            if used > 0 {
                let first = pick(&mut self.tx, &mut self.more, q).reserve(used as u32);
                self.qfirst[q] = first;
                self.qnext[q] = first;
            }
        }
        // The caller read the clock just before calling: the send
        // timestamp of the whole burst (one clock read per burst).
        let ts = now;
        let (word, seq) = if warm {
            (self.plan.stream | WARMUP_BIT, &mut self.warm_seq)
        } else {
            (self.plan.stream, &mut self.seq)
        };
        let mut bytes = 0u64;
        let mut left = k;
        while left > 0 {
            // A run of frames on one queue: the whole burst on one queue,
            // else consecutive frames whose flows share a queue (with
            // flows cycling frame by frame, one frame).
            let (q, mut run) = (self.gen.peek_flow(0) as usize % nq, 1);
            if nq == 1 {
                run = left;
            } else {
                while run < left && self.gen.peek_flow(run as usize) as usize % nq == q {
                    run += 1;
                }
            }
            let tx = pick(&mut self.tx, &mut self.more, q);
            if self.in_place {
                // Stamped straight into the port's buffers: only the bytes
                // that change when a buffer still holds the template.
                let mut f = Stamp {
                    gen: &mut self.gen,
                    word,
                    seq: *seq,
                    ts,
                    bytes: 0,
                };
                tx.fill(self.qnext[q], run as u32, &mut f);
                bytes += f.bytes;
                *seq += run;
                self.qnext[q] += run;
            } else {
                for _ in 0..run {
                    let ti = self.gen.peek_template(0);
                    let f = self.gen.next(word, *seq, ts);
                    *seq += 1;
                    let ns = self.nslots[ti];
                    tx.write(self.qnext[q], ns, f);
                    self.qnext[q] += ns as u64;
                    bytes += self.lens[ti] as u64;
                }
            }
            left -= run;
        }
        for q in 0..nq {
            let used = self.qused[q];
            if used > 0 {
                let end = self.qfirst[q] + used;
                pick(&mut self.tx, &mut self.more, q).publish(end);
            }
        }
        self.last_send_ns = ts;
        if warm {
            self.stats.warmup_packets += k;
        } else {
            self.stats.packets += k;
            self.stats.bytes += bytes;
        }
        self.after_burst(n, k, warm, paced);
        k
    }

    /// Pacing counters after a burst of `k` of `n` due frames.
    #[inline]
    fn after_burst(&mut self, n: u64, k: u64, warm: bool, paced: bool) {
        if paced {
            if warm {
                self.stats.warmup_full += n - k;
            } else {
                self.stats.full += n - k;
            }
            self.pacer.advance(n);
        }
    }
}

/// Transmit queue `q` of a sender: `tx` (queue 0) or `more[q - 1]`. (A
/// function of the two fields, not a method, so that a frame borrowed from
/// the generator can be written meanwhile.)
#[inline]
fn pick<'s, 'a>(
    tx: &'s mut OwnedTx<'a>,
    more: &'s mut [OwnedTx<'a>],
    q: usize,
) -> &'s mut OwnedTx<'a> {
    if q == 0 {
        tx
    } else {
        &mut more[q - 1]
    }
}

/// One burst's frames stamped in place ([`TxFill`]): consecutive sequence
/// numbers from `seq`, one stream word and timestamp.
struct Stamp<'g> {
    gen: &'g mut FrameGen,
    word: u32,
    seq: u64,
    ts: u64,
    /// Bytes of the frames filled or skipped.
    bytes: u64,
}

impl TxFill for Stamp<'_> {
    #[inline]
    fn fill(&mut self, buf: &mut [u8], tag: &mut u64) -> usize {
        let n = self.gen.next_into(buf, tag, self.word, self.seq, self.ts);
        self.seq += 1;
        self.bytes += n as u64;
        n
    }

    fn skip(&mut self) -> usize {
        let n = self.gen.skip();
        self.seq += 1;
        self.bytes += n as u64;
        n
    }
}

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
    /// that did too: frames kept waiting, the receiver was behind its peer.
    /// (One full batch alone is no sign: a peer may publish a batch's worth
    /// at once.)
    pub backlog_bursts: u64,
    last_full: bool,
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
            last_full: false,
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
        self.last_full = false;
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
        let cap = batch.capacity();
        let rx = batch.receive(rxq, 0, 0);
        let n = rx.received();
        if n > 0 {
            self.bursts += 1;
            self.burst_no += 1;
            let full = n >= cap;
            if full && self.last_full {
                self.backlog_bursts += 1;
            }
            self.last_full = full;
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

/// How a forwarder rewrites frames.
#[derive(Clone, Copy, Debug)]
pub enum Rewrite {
    /// Swap source and destination MAC (reflect).
    SwapMacs,
    /// Set the destination MAC, or leave the frame as is.
    SetDst(Option<MacAddr>),
}

/// Forwarding counters of one direction.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FwdStats {
    /// Frames received.
    pub received: u64,
    /// Frames sent on.
    pub packets: u64,
    /// Bytes sent on.
    pub bytes: u64,
    /// Dropped: the output ring was full.
    pub dropped_tx_full: u64,
    /// Dropped: larger than the output port carries.
    pub dropped_oversize: u64,
    /// Dropped: shorter than an Ethernet header.
    pub dropped_runt: u64,
    /// Touch checksum (with --touch).
    pub touch_sum: u64,
}

impl FwdStats {
    /// All drops.
    pub fn dropped(&self) -> u64 {
        self.dropped_tx_full + self.dropped_oversize + self.dropped_runt
    }
}

/// Receives a burst on `rxq`, rewrites and sends what fits on `tx`.
#[inline]
pub fn forward_burst(
    rxq: &mut dyn RxQueue,
    batch: &mut RxBatch,
    tx: &mut OwnedTx<'_>,
    rewrite: Rewrite,
    touch: bool,
    st: &mut FwdStats,
) -> usize {
    let mut rx = batch.receive(rxq, 0, 0);
    let n = rx.received();
    if n == 0 {
        return 0;
    }
    st.received += n as u64;
    let mut free = tx.free_slots() as u64;
    // Pass 1: rewrite, decide, and count the slots of what will be sent.
    let mut slots = 0u64;
    let mut keep = 0usize;
    for mut p in rx.pkts_mut().iter_mut() {
        let len = p.len();
        if len < ethernet::HEADER_LEN {
            st.dropped_runt += 1;
            p.truncate(0);
            continue;
        }
        let ns = tx.slots_for(len) as u64;
        if ns == 0 {
            st.dropped_oversize += 1;
            p.truncate(0);
            continue;
        }
        if ns > free {
            st.dropped_tx_full += 1;
            p.truncate(0);
            continue;
        }
        free -= ns;
        slots += ns;
        keep += 1;
        let d = p.data_mut();
        let mut eth = ethernet::Frame::new_unchecked(&mut *d);
        match rewrite {
            Rewrite::SwapMacs => {
                let (s, dst) = (eth.src_addr(), eth.dst_addr());
                eth.set_src_addr(dst);
                eth.set_dst_addr(s);
            }
            Rewrite::SetDst(Some(m)) => eth.set_dst_addr(m),
            Rewrite::SetDst(None) => {}
        }
        if touch {
            st.touch_sum = frame::touch(st.touch_sum, &d[ethernet::HEADER_LEN..]);
        }
    }
    if keep > 0 {
        let first = tx.reserve(slots as u32);
        let mut slot = first;
        for p in rx.pkts().iter() {
            if p.is_empty() {
                continue;
            }
            let ns = tx.slots_for(p.len());
            tx.write(slot, ns, p.data());
            slot += ns as u64;
            st.bytes += p.len() as u64;
        }
        tx.publish(first + slots);
        st.packets += keep as u64;
    }
    drop(rx);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::VaryField;
    use crate::frame::FrameSpec;
    use fabric::{pipe, PipeConfig, Port};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    fn spec() -> FrameSpec {
        FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: "10.0.0.1".parse().unwrap(),
            dst_ip: "10.0.0.2".parse().unwrap(),
            src_port: 1000,
            dst_port: 2000,
            vlan: None,
            flows: 4,
            vary: vec![VaryField::SrcPort],
        }
    }

    fn plan(rate: f64, count: Option<u64>, duration_ns: u64, warmup_ns: u64) -> SendPlan {
        SendPlan {
            stream: 9,
            burst: 32,
            bunch: false,
            rate_pps: rate,
            warmup_ns,
            duration_ns,
            count,
        }
    }

    /// A wire on the peer side of a pipe: what the port sends comes back
    /// into it, with frame i (counting every frame) dropped when
    /// `drop(i)`, sent twice when `dup(i)`, and frames i, i+1 swapped when
    /// `swap(i)`.
    fn spawn_wire(
        mut peer: fabric::PipePeer,
        stop: Arc<AtomicBool>,
        drop: fn(u64) -> bool,
        dup: fn(u64) -> bool,
        swap: fn(u64) -> bool,
    ) -> std::thread::JoinHandle<u64> {
        std::thread::spawn(move || {
            let mut i = 0u64;
            let mut held: Option<Vec<u8>> = None;
            let mut out: Vec<Vec<u8>> = Vec::new();
            let mut idle_after_stop = 0;
            loop {
                let n = peer.recv(0, 64, |f| {
                    let f = f.to_vec();
                    let k = i;
                    i += 1;
                    if drop(k) {
                        return;
                    }
                    if let Some(h) = held.take() {
                        out.push(f.clone());
                        out.push(h);
                    } else if swap(k) {
                        held = Some(f.clone());
                    } else {
                        out.push(f.clone());
                    }
                    if dup(k) {
                        out.push(f);
                    }
                });
                while !out.is_empty() {
                    let refs: Vec<&[u8]> = out.iter().map(|v| v.as_slice()).collect();
                    let sent = peer.send(0, &refs);
                    out.drain(..sent);
                    if sent == 0 {
                        std::thread::yield_now();
                    }
                }
                if n == 0 {
                    if stop.load(Ordering::Relaxed) {
                        idle_after_stop += 1;
                        if idle_after_stop > 1000 {
                            return i;
                        }
                    }
                    std::thread::yield_now();
                }
            }
        })
    }

    /// Runs a txrx loop over the pipe until the sender is done, then drains.
    fn txrx(port: &Arc<dyn Port>, p: SendPlan, sizes: &[u32]) -> (TxStats, Receiver, (u64, u64)) {
        let gen = FrameGen::new(&spec(), sizes).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut rxq = port.take_rx(0).unwrap();
        let mut batch = RxBatch::with_capacity(64);
        let mut r = Receiver::new(true);
        let start = now_ns();
        let mut s = Sender::new(tx, gen, p, start, 2048).unwrap();
        while !s.done() {
            r.poll(rxq.as_mut(), &mut batch);
            s.poll(now_ns());
        }
        let window = s.window(now_ns());
        let end = now_ns() + 200_000_000;
        while now_ns() < end {
            r.poll(rxq.as_mut(), &mut batch);
        }
        r.finish_stream(9, s.sent_seq());
        (s.stats.clone(), r, window)
    }

    #[test]
    fn a_multi_queue_sender_keeps_each_flow_on_its_queue_in_order() {
        let (port, peer) = pipe(
            "mq",
            PipeConfig {
                queues: 2,
                ring_slots: 128,
                slot_b: 2048,
            },
        )
        .unwrap();
        let gen = FrameGen::new(&spec(), &[100, 1500]).unwrap();
        // SAFETY: the test thread is the only sender on these queues.
        let txs = unsafe { vec![OwnedTx::new(port.tx(0)), OwnedTx::new(port.tx(1))] };
        let n = 10_000u64;
        let mut s = Sender::multi(txs, gen, plan(0.0, Some(n), 0, 0), now_ns(), 2048).unwrap();
        let mut peer = peer;
        // Per queue: frames, last sequence number + 1.
        let mut got = [(0u64, 0u64); 2];
        let t0 = now_ns();
        while (got[0].0 + got[1].0 < n) && now_ns() - t0 < 20_000_000_000 {
            s.poll(now_ns());
            for (q, g) in got.iter_mut().enumerate() {
                peer.recv(q, 64, |d| {
                    let o = frame::parse(d).unwrap();
                    // flow = UDP source port - 1000 (spec: 4 flows).
                    let flow = u16::from_be_bytes([d[34], d[35]]) - 1000;
                    assert_eq!(flow as u64, o.seq % 4, "frame {} flow", o.seq);
                    assert_eq!(flow as usize % 2, q, "flow {flow} on queue {q}");
                    assert!(g.0 == 0 || o.seq >= g.1, "order on queue {q}");
                    *g = (g.0 + 1, o.seq + 1);
                });
            }
        }
        s.poll(now_ns());
        assert!(s.done());
        assert_eq!(s.stats.packets, n);
        assert_eq!(got[0].0, n / 2);
        assert_eq!(got[1].0, n / 2);
    }

    #[test]
    fn txrx_over_a_lossy_reordering_wire_counts_exactly() {
        let (port, peer) = pipe(
            "t",
            PipeConfig {
                queues: 1,
                ring_slots: 256,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let stop = Arc::new(AtomicBool::new(false));
        // Frame numbers seen by the wire include no warm-up (warmup 0).
        let w = spawn_wire(
            peer,
            stop.clone(),
            |i| i % 97 == 5,
            |i| i % 101 == 7,
            |i| i % 89 == 11,
        );
        let n = 50_000u64;
        let (tx, r, _) = txrx(&port, plan(0.0, Some(n), 0, 0), &[100, 200, 1500]);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(w.join().unwrap(), n);
        assert_eq!(tx.packets, n);
        let dropped = (0..n).filter(|i| i % 97 == 5).count() as u64;
        let dups = (0..n).filter(|i| i % 101 == 7 && i % 97 != 5).count() as u64;
        // A swap holds frame i and emits it after i+1 (after i+2 if i+1 is
        // dropped): one late frame per swap, unless i itself was dropped, or
        // duplicated (its copy goes out at once, the held one is then a
        // duplicate, not a late frame).
        let swaps = (0..n - 1)
            .filter(|i| i % 89 == 11 && i % 97 != 5 && i % 101 != 7)
            .count() as u64;
        let s = &r.stream_reports()[0];
        assert_eq!(s.id, 9);
        assert_eq!(s.lost, dropped);
        assert_eq!(s.duplicated, dups);
        assert_eq!(s.reordered, swaps);
        assert_eq!(s.received, n - dropped + dups);
        assert_eq!(r.packets, s.received);
        assert_eq!((r.foreign, r.warmup), (0, 0));
        assert_eq!(r.latency.summary().unwrap().count, r.packets);
        assert_ne!(r.touch_sum, 0);
    }

    #[test]
    fn warm_up_frames_are_marked_and_excluded() {
        let (port, peer) = pipe("t", PipeConfig::default()).unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let stop = Arc::new(AtomicBool::new(false));
        let w = spawn_wire(peer, stop.clone(), |_| false, |_| false, |_| false);
        // 100 ms of warm-up at 100 kpps, then 10 000 measured frames.
        let (tx, r, window) = txrx(&port, plan(100_000.0, Some(10_000), 0, 100_000_000), &[128]);
        stop.store(true, Ordering::Relaxed);
        let total = w.join().unwrap();
        assert_eq!(tx.packets, 10_000);
        // 100 ms at 100 kpps were scheduled as warm-up (sent or refused by
        // a full ring when the wire thread is starved of CPU).
        let warm = tx.warmup_packets + tx.warmup_full;
        assert!((9_900..=10_100).contains(&warm), "{warm}");
        assert_eq!(total, tx.packets + tx.warmup_packets);
        assert_eq!(r.warmup, tx.warmup_packets);
        assert_eq!(r.packets, 10_000);
        assert_eq!(r.lost(), 0);
        // Paced: 10 000 frames at 100 kpps take at least 100 ms (exactly
        // that when nothing was refused and the sender kept up).
        let d = (window.1 - window.0) as f64 / 1e9;
        assert!(d > 0.0999 && d < 0.5, "window {d}");
        if tx.full == 0 && tx.behind_max < 64 {
            assert!((d - 0.1).abs() < 0.001, "window {d}");
        }
        let lat = r.latency.summary().unwrap();
        assert!(lat.min > 0 && lat.max < 1_000_000_000);
    }

    #[test]
    fn a_full_port_counts_full_and_sends_no_sequence_gaps() {
        // Nobody drains the pipe: 64 slots, paced at 1 Mpps for 10 ms.
        let (port, mut peer) = pipe(
            "t",
            PipeConfig {
                queues: 1,
                ring_slots: 64,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let gen = FrameGen::new(&spec(), &[64 + 2]).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut s = Sender::new(tx, gen, plan(1e6, None, 10_000_000, 0), now_ns(), 2048).unwrap();
        while !s.done() {
            s.poll(now_ns());
        }
        assert_eq!(s.stats.packets, 64);
        let due = s.stats.packets + s.stats.full;
        assert!((9_900..=10_100).contains(&due), "{due}");
        // Paced at 1 Mpps, only due frames go out (up to 32 at a time): at
        // least one attempt per 32 frames due; once the 64 slots are taken,
        // every attempt is pushed back.
        assert!((312..=10_100).contains(&s.stats.attempts), "{:?}", s.stats);
        assert!(
            s.stats.pushback + 64 >= s.stats.attempts && s.stats.pushback < s.stats.attempts,
            "{:?}",
            s.stats
        );
        let mut seqs = Vec::new();
        peer.recv(0, 1000, |f| seqs.push(frame::parse(f).unwrap().seq));
        assert_eq!(seqs, (0..64).collect::<Vec<u64>>());
    }

    #[test]
    fn bunched_bursts_go_out_whole_at_the_average_rate() {
        // 10 kpps in bursts of 8 for 40 ms on a fake clock polled every
        // 1 µs: 50 bursts of 8, 800 µs apart, each burst in one send with
        // one timestamp.
        let (port, mut peer) = pipe(
            "b",
            PipeConfig {
                queues: 1,
                ring_slots: 1024,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let gen = FrameGen::new(&spec(), &[64 + 2]).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut p = plan(10_000.0, None, 40_000_000, 0);
        p.burst = 8;
        p.bunch = true;
        let start = 1_000_000_000;
        let mut s = Sender::new(tx, gen, p, start, 2048).unwrap();
        let (per_send, ts) = run_fake_clock(&mut s, start, &mut peer);
        assert_eq!(ts.len(), 400);
        assert!(per_send.iter().all(|&n| n == 8), "{per_send:?}");
        for (i, b) in ts.chunks(8).enumerate() {
            assert!(b.iter().all(|&t| t == b[0]));
            // the burst goes when its last frame is due: (8i + 7) × 100 µs
            assert_eq!(b[0], start + (8 * i as u64 + 7) * 100_000);
        }
    }

    /// Polls `s` on a fake clock advancing 1 µs per poll until it is done;
    /// returns the frames per send and the frames' timestamps.
    fn run_fake_clock(
        s: &mut Sender<'_>,
        start: u64,
        peer: &mut fabric::PipePeer,
    ) -> (Vec<u64>, Vec<u64>) {
        let mut per_send = Vec::new();
        let mut t = start;
        while !s.done() {
            let n = s.poll(t);
            if n > 0 {
                per_send.push(n);
            }
            t += 1_000;
        }
        let mut ts = Vec::new();
        peer.recv(0, 10_000, |f| ts.push(frame::parse(f).unwrap().ts_ns));
        (per_send, ts)
    }

    #[test]
    fn paced_frames_are_evenly_spaced_at_low_rates() {
        // 10 kpps for 50 ms, burst 32, on a fake clock polled every 1 µs:
        // every frame goes out alone at its own deadline, 100 µs apart,
        // stamped with its send time.
        let (port, mut peer) = pipe(
            "e",
            PipeConfig {
                queues: 1,
                ring_slots: 1024,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let gen = FrameGen::new(&spec(), &[64 + 2]).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        let start = 1_000_000_000;
        let mut s = Sender::new(tx, gen, plan(10_000.0, None, 50_000_000, 0), start, 2048).unwrap();
        let (per_send, ts) = run_fake_clock(&mut s, start, &mut peer);
        assert_eq!(ts.len(), 500);
        assert!(per_send.iter().all(|&n| n == 1), "{per_send:?}");
        for (i, &t) in ts.iter().enumerate() {
            assert_eq!(t, start + i as u64 * 100_000);
        }
    }

    #[test]
    fn back_pressure_is_counted_unpaced_and_a_receiver_behind_is_seen() {
        // Unpaced into a 64-slot pipe nobody drains: after two whole bursts
        // every attempt is pushed back.
        let (port, mut peer) = pipe(
            "t",
            PipeConfig {
                queues: 1,
                ring_slots: 64,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let gen = FrameGen::new(&spec(), &[64]).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut s = Sender::new(tx, gen, plan(0.0, None, 2_000_000, 0), now_ns(), 2048).unwrap();
        while !s.done() {
            s.poll(now_ns());
        }
        assert_eq!(s.stats.packets, 64);
        assert!(s.stats.attempts > 10, "{:?}", s.stats);
        assert_eq!(s.stats.pushback, s.stats.attempts - 2);
        // Drained at once: no back-pressure.
        let mut s2 = {
            let gen = FrameGen::new(&spec(), &[64]).unwrap();
            // SAFETY: as above (the first sender is done with the queue).
            let tx = unsafe { OwnedTx::new(port.tx(0)) };
            Sender::new(tx, gen, plan(0.0, Some(32 * 20), 0, 0), now_ns(), 2048).unwrap()
        };
        peer.recv(0, 1000, |_| {});
        while !s2.done() {
            s2.poll(now_ns());
            peer.recv(0, 1000, |_| {});
        }
        assert_eq!(
            (s2.stats.packets, s2.stats.pushback),
            (32 * 20, 0),
            "{:?}",
            s2.stats
        );

        // A receiver with 600 frames waiting and a 256-frame batch: two full
        // bursts in a row (behind: one backlog burst), then a partial one;
        // then one full batch alone is no backlog.
        let (port, mut peer) = pipe(
            "r",
            PipeConfig {
                queues: 1,
                ring_slots: 1024,
                slot_b: 2048,
            },
        )
        .unwrap();
        let mut rxq = port.take_rx(0).unwrap();
        let f = FrameGen::new(&spec(), &[64])
            .unwrap()
            .next(1, 0, 0)
            .to_vec();
        let put = |peer: &mut fabric::PipePeer, n: usize| {
            for _ in 0..n {
                assert_eq!(peer.send(0, &[&f]), 1);
            }
        };
        put(&mut peer, 600);
        let mut r = Receiver::new(false);
        let mut batch = RxBatch::with_capacity(256);
        assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
        assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
        assert_eq!(r.poll(rxq.as_mut(), &mut batch), 88);
        put(&mut peer, 256);
        assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
        assert_eq!(r.poll(rxq.as_mut(), &mut batch), 0);
        assert_eq!((r.bursts, r.backlog_bursts), (4, 1));
    }

    #[test]
    fn reflect_swaps_macs_and_counts_drops_by_reason() {
        let (port, mut peer) = pipe(
            "t",
            PipeConfig {
                queues: 1,
                ring_slots: 64,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let mut rxq = port.take_rx(0).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let mut tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut batch = RxBatch::with_capacity(256);
        let mut g = FrameGen::new(&spec(), &[100]).unwrap();
        let good = g.next(1, 0, 0).to_vec();
        let runt = vec![0u8; 10];
        assert_eq!(peer.send(0, &[&good, &runt, &good]), 3);
        let mut st = FwdStats::default();
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SwapMacs,
            false,
            &mut st,
        );
        assert_eq!((st.received, st.packets, st.dropped_runt), (3, 2, 1));
        let mut back = Vec::new();
        peer.recv(0, 10, |f| back.push(f.to_vec()));
        assert_eq!(back.len(), 2);
        for f in &back {
            assert_eq!(&f[0..6], &good[6..12]);
            assert_eq!(&f[6..12], &good[0..6]);
            assert_eq!(&f[12..], &good[12..]);
        }
        // Fill the output ring (64 slots): 70 in, 64 out, 6 tx_full.
        let frames: Vec<&[u8]> = (0..64).map(|_| good.as_slice()).collect();
        assert_eq!(peer.send(0, &frames), 64);
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SetDst(Some(MacAddr([2, 9, 9, 9, 9, 9]))),
            true,
            &mut st,
        );
        assert_eq!(peer.send(0, &frames[..6]), 6);
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SetDst(None),
            false,
            &mut st,
        );
        assert_eq!(st.dropped_tx_full, 6);
        assert_eq!(st.received, st.packets + st.dropped());
        let mut n = 0;
        peer.recv(0, 100, |f| {
            assert_eq!(&f[0..6], &[2, 9, 9, 9, 9, 9]);
            n += 1;
        });
        assert_eq!(n, 64);
        assert_ne!(st.touch_sum, 0);
    }

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
