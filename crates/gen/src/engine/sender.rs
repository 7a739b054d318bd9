//! The sender: one stream, paced or as fast as the port takes it, over
//! one transmit queue or spread by flow over several. Per burst: how many
//! due frames fit, a reservation per queue, the frames stamped (copied from
//! the templates, or filled in place in the port's buffers) with the
//! burst's send timestamp, one publish per queue. Warm-up frames carry
//! [`WARMUP_BIT`]; frames due that did not fit are counted (`full`).

use fabric::TxFill;
use serde::Serialize;

use crate::frame::{FrameGen, WARMUP_BIT};
use crate::pacing::Pacer;
use crate::sys::{thread_cpu_ns, OwnedTx};

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

    /// Kicks the peer of every queue whose published frames wait for
    /// one ([`OwnedTx::kick_if_pending`]): after the sending, frames the
    /// kernel left in an AF_XDP ring would wait for the next traffic.
    pub fn kick_pending(&mut self) {
        self.tx.kick_if_pending();
        for t in &mut self.more {
            t.kick_if_pending();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::{plan, spec};
    use crate::frame;
    use crate::sys::now_ns;
    use fabric::{pipe, PipeConfig, Port};
    use std::sync::Arc;

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
}
