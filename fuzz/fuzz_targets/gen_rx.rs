//! turnout-gen's receive side as a hostile switch would feed it: any
//! sequence of frames, raw bytes or frames of ours (built by the real
//! `FrameGen`) with any stream, sequence number and timestamp and bytes
//! flipped after stamping, through `Receiver::frame` (parse, stream table,
//! sequence tracking, latency, jitter, touch), the end-of-run
//! `finish_stream` and the JSON document (`RxSection`).
//!
//! Invariants: no panic; every frame is counted exactly once (measured,
//! foreign, warm-up, untracked or implausible: a sequence number no sender
//! of ours reaches); a parsed frame's payload lies inside it;
//! per stream, frames accepted minus duplicates plus lost equals one past
//! the highest sequence number accepted (or the sender's count given to
//! `finish_stream`), computed here independently of the receiver; the
//! document serialises and agrees with the counters.
//!
//! Input: records. Op byte `k`:
//! - `k % 4 == 0`: raw frame, `len` (1 byte) then `len` bytes;
//! - `1`: a frame of ours: stream (2 bytes), sequence number (8), timestamp
//!   (8), size index (1), optional corruption: offset (1) and xor byte (1)
//!   when `k & 4`;
//! - `2`: the clock advances by 4 bytes' worth of ns (it may also not);
//! - `3`: `finish_stream(stream (2), end (8))`; with `k & 4`, a sweep
//!   instead: one frame of ours (sequence number 0) for each of streams
//!   `0..n` (`n`: 2 bytes), to reach the end of the stream table compactly.
//!
//! Inputs longer than 4 KiB are skipped. The receiver is built once per
//! process with small limits (`LIMITS`: 16 streams, the first 4 with a
//! latency histogram of one significant digit, 512 buckets, and 256-number
//! reorder windows, instead of 1 024 streams, 64 histograms of 27 000
//! buckets and 65 536-number windows) and `Receiver::reset` between inputs:
//! the same code paths (untracked streams, streams without a histogram,
//! window wrap and overflow, clamped latencies are all easier to reach),
//! at a cost per input of microseconds instead of the milliseconds that
//! clearing and summarising the production sizes took. The frame
//! generators are built per input (cheap) so that an input's frames do not
//! depend on the inputs before it.
#![no_main]

use std::cell::RefCell;
use std::collections::HashMap;

use libfuzzer_sys::fuzz_target;
use turnout_gen::engine::{Receiver, ReceiverLimits};
use turnout_gen::frame::{self, FrameGen, FrameSpec, WARMUP_BIT};
use turnout_gen::report::RxSection;
use turnout_gen::seq::SEQ_LIMIT;
use wire::MacAddr;

/// The receiver's limits (see the module comment).
const LIMITS: ReceiverLimits = ReceiverLimits {
    streams: 16,
    latency_streams: 4,
    window: 256,
    latency_digits: 1,
};

// The smallest holds IPv6 + VLAN + UDP + the payload header (88 B).
const SIZES: [u32; 4] = [96, 128, 570, 1518];

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_le_bytes([b[0], b[1]]))
    }
    fn u32(&mut self) -> Option<u32> {
        self.take(4)
            .map(|b| u32::from_le_bytes(b.try_into().unwrap()))
    }
    fn u64(&mut self) -> Option<u64> {
        self.take(8)
            .map(|b| u64::from_le_bytes(b.try_into().unwrap()))
    }
}

fn gens() -> [FrameGen; 2] {
    [false, true].map(|v6| {
        let spec = FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: if v6 { "fd00::1" } else { "10.0.0.1" }.parse().unwrap(),
            dst_ip: if v6 { "fd00::2" } else { "10.0.0.2" }.parse().unwrap(),
            src_port: 1024,
            dst_port: 1025,
            vlan: v6.then_some(7),
            flows: 1,
            vary: Vec::new(),
        };
        FrameGen::new(&spec, &SIZES).expect("valid spec")
    })
}

/// What the receiver must report for one stream, tracked here.
#[derive(Default)]
struct Expect {
    accepted: u64,
    top: u64,
}

/// The streams the receiver must track (the first `LIMITS.streams` ids seen).
#[derive(Default)]
struct Model {
    streams: HashMap<u32, Expect>,
    implausible: u64,
}

impl Model {
    fn stream(&mut self, id: u32) -> Option<&mut Expect> {
        if !self.streams.contains_key(&id) && self.streams.len() < LIMITS.streams {
            self.streams.insert(id, Expect::default());
        }
        self.streams.get_mut(&id)
    }
}

fn feed(r: &mut Receiver, m: &mut Model, f: &[u8], now: u64) {
    if let Some(o) = frame::parse(f) {
        assert!(o.payload_offset <= o.payload_end && o.payload_end <= f.len());
        assert!(o.payload_end - o.payload_offset >= wire::payload::HEADER_LEN);
        if o.stream & WARMUP_BIT == 0 {
            if o.seq >= SEQ_LIMIT {
                m.implausible += 1;
            } else if let Some(e) = m.stream(o.stream) {
                e.accepted += 1;
                e.top = e.top.max(o.seq + 1);
            }
        }
    }
    r.frame(f, now);
}

thread_local! {
    /// The receiver of every input, reset before each.
    static RECEIVER: RefCell<Receiver> = RefCell::new(Receiver::with_limits(false, LIMITS));
}

fuzz_target!(|data: &[u8]| {
    if data.len() > 4096 {
        return;
    }
    RECEIVER.with(|r| one(&mut r.borrow_mut(), data));
});

fn one(r: &mut Receiver, data: &[u8]) {
    let mut gens = gens();
    r.reset(data.first().is_some_and(|b| b & 1 == 1));
    let mut inp = Input(data.get(1..).unwrap_or(&[]));
    let mut now: u64 = 1_000_000_000;
    let mut fed = 0u64;
    let mut buf = [0u8; 2048];
    let mut m = Model::default();
    while let Some(k) = inp.u8() {
        match k % 4 {
            0 => {
                let Some(n) = inp.u8() else { break };
                let Some(f) = inp.take(n as usize) else { break };
                feed(r, &mut m, f, now);
                fed += 1;
            }
            1 => {
                let (Some(stream), Some(seq), Some(ts), Some(size)) =
                    (inp.u16(), inp.u64(), inp.u64(), inp.u8())
                else {
                    break;
                };
                let g = &mut gens[(size >> 7) as usize & 1];
                // The generator cycles through SIZES; skip to the one asked.
                while g.peek_template(0) != (size as usize % SIZES.len()) {
                    let _ = g.next(0, 0, 0);
                }
                let f = g.next(stream as u32, seq, ts);
                let n = f.len();
                buf[..n].copy_from_slice(f);
                if k & 4 != 0 {
                    let (Some(off), Some(x)) = (inp.u8(), inp.u8()) else {
                        break;
                    };
                    buf[off as usize % n] ^= x;
                }
                feed(r, &mut m, &buf[..n], now);
                fed += 1;
            }
            2 => {
                let Some(d) = inp.u32() else { break };
                now = now.saturating_add(d as u64);
            }
            _ if k & 4 != 0 => {
                let Some(n) = inp.u16() else { break };
                let g = &mut gens[0];
                for stream in 0..n.min(LIMITS.streams as u16 + 8) {
                    let f = g.next(stream as u32, 0, 0);
                    let len = f.len();
                    buf[..len].copy_from_slice(f);
                    feed(r, &mut m, &buf[..len], now);
                    fed += 1;
                }
            }
            _ => {
                let (Some(stream), Some(end)) = (inp.u16(), inp.u64()) else {
                    break;
                };
                // The sender's own count: below the limit.
                let (id, end) = (stream as u32 & !WARMUP_BIT, end % SEQ_LIMIT);
                r.finish_stream(id, end);
                if end > 0 {
                    if let Some(e) = m.stream(id) {
                        e.top = e.top.max(end);
                    }
                }
            }
        }
    }
    assert_eq!(
        r.packets + r.foreign + r.warmup + r.untracked + r.implausible,
        fed,
        "every frame counted once"
    );
    assert_eq!(r.implausible, m.implausible);
    // The sequence accounting of every stream (cheap)...
    assert_eq!(r.seq_trackers().count(), m.streams.len());
    for (id, t) in r.seq_trackers() {
        let e = &m.streams[&id];
        assert!(t.duplicated <= t.received && t.reordered <= t.received);
        assert_eq!(t.received, e.accepted, "stream {id}: accepted");
        assert_eq!(
            t.received - t.duplicated + t.lost,
            e.top,
            "stream {id}: received - duplicated + lost = next"
        );
    }
    // ...and the document, latency summaries included.
    let doc = RxSection::new(r, true);
    assert_eq!(doc.streams.len(), m.streams.len());
    assert_eq!(doc.lost, r.lost());
    assert_eq!(doc.packets, r.packets);
    let with_latency = doc
        .streams
        .iter()
        .filter(|s| s.latency_ns.is_some())
        .count();
    assert!(with_latency <= LIMITS.latency_streams);
    for l in doc.streams.iter().filter_map(|s| s.latency_ns.as_ref()) {
        assert!(l.min <= l.p50 && l.p50 <= l.p90 && l.p90 <= l.p99);
        assert!(l.p99 <= l.p999 && l.p999 <= l.max);
        assert_eq!(l.hist.iter().map(|b| b.1).sum::<u64>(), l.count);
        assert!(l
            .cdf
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1));
        assert_eq!(l.cdf.last().map(|p| (p.0, p.1)), Some((l.max, 1.0)));
    }
    // serde_json writes valid JSON or fails (a non-finite float, say):
    // parsing it back would only test serde_json, at a fifth of the cost of
    // an input.
    let json = serde_json::to_string(&doc).expect("the document serialises");
    assert!(json.starts_with('{') && json.ends_with('}'));
}
