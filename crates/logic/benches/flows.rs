//! The `flows` logic alone (classify of 256 64-byte UDP/IPv4 frames),
//! "Open vSwitch throughput and latency" §5.3 (docs/references.md), each case with the exact-match cache (default size) and
//! without it (`"cache": 0`, the tuple-space classifier alone):
//!
//! - `flows_a_concurrent`: 1 .. 10^6 concurrent flows (distinct source
//!   address and port, cycled batch after batch) over a fixed rule set
//!   (3 flows, as in the fabric bench): the cache's knee, where the flows no
//!   longer fit in its entries.
//! - `flows_b_rules`: 1 .. 10^5 rules over 1, 8 and 64 distinct masks that
//!   the frames miss before a priority-0 catch-all (every subtable probed
//!   on a cache miss), 64 concurrent flows.
//!
//! - `flows_parts`: where a packet's time goes: key extraction (general
//!   and straight-line), the cache's hash, per 256 frames.
//!
//! (Mirroring, (d), goes through the fabric: `cargo bench -p fabric --bench
//! fabric --features bench -- f_mirror`.)
//!
//! Run: `cargo bench -p logic --bench flows --features bench` (about a minute and a half;
//! `-- flows_a` or `-- flows_b` for one group; FLOWS_BENCH_FULL=1 adds 10^6
//! flows to (a) and 10^5 rules to (b)). A summary of ns/packet (best sample)
//! is printed at the end and written to target/criterion/flows-summary.json.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use logic::{Ctx, Logic, Pkt, Pkts, Verdict};
use serde_json::json;
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::MacAddr;

const BATCH: usize = 256;
const FRAME_B: usize = 64;

fn frame() -> Vec<u8> {
    let spec = UdpFrameSpec::new(
        MacAddr([2, 0, 0, 0, 0, 1]),
        MacAddr([2, 0, 0, 0, 0, 2]),
        IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
        40000,
        5001,
    );
    let mut b = vec![0u8; FRAME_B];
    write_udp_frame(&spec, &mut b, FRAME_B).unwrap();
    b
}

/// A batch whose frames are set, before each classify, to flows
/// `next, next + 1, ...` modulo `flows` (source 10.128.0.0 + id / 4096,
/// source port 40000 + id % 4096): every flow recurs once per
/// `flows / 256` batches. The rewrite is the same few stores per frame for
/// every case.
struct Traffic {
    frames: Vec<Vec<u8>>,
    flows: u64,
    next: u64,
    /// The logic's worker state, once made (`Some(None)`: it has none).
    state: Option<Option<logic::WorkerState>>,
}

impl Traffic {
    fn new(flows: u64) -> Self {
        Traffic {
            frames: (0..BATCH).map(|_| frame()).collect(),
            flows,
            next: 0,
            state: None,
        }
    }

    #[inline]
    fn step(&mut self, l: &dyn Logic, v: &mut [Verdict]) {
        // The worker's state of the logic (the caches), made once, before
        // the measured steps (the first step is the check, untimed), as
        // the switch makes it when it installs the logic.
        if self.state.is_none() {
            self.state = Some(l.worker_state());
        }
        for f in self.frames.iter_mut() {
            let id = self.next;
            self.next = if id + 1 == self.flows { 0 } else { id + 1 };
            let src = 0x0a80_0000u32 + (id / 4096) as u32;
            f[26..30].copy_from_slice(&src.to_be_bytes());
            f[34..36].copy_from_slice(&(40000 + (id % 4096) as u16).to_be_bytes());
        }
        let mut pkts: [Pkt; BATCH] = std::array::from_fn(|i| {
            let f = &mut self.frames[i];
            // SAFETY: the frames outlive the views, used only in this call.
            unsafe { Pkt::new(f.as_mut_ptr(), f.len() as u32, 0, 0) }
        });
        let ctx = Ctx {
            now_ns: 0,
            worker: 0,
        };
        let pkts = std::hint::black_box(Pkts::new_mut(&mut pkts));
        let v = std::hint::black_box(v);
        match self.state.as_mut().and_then(|s| s.as_deref_mut()) {
            Some(st) => l.classify_with(st, &ctx, 0, pkts, v),
            None => l.classify(&ctx, 0, pkts, v),
        }
    }
}

static RESULTS: Mutex<Vec<(String, f64)>> = Mutex::new(Vec::new());

fn timed(name: &str, iters: u64, mut step: impl FnMut()) -> Duration {
    let t = Instant::now();
    for _ in 0..iters {
        step();
    }
    let d = t.elapsed();
    let ns = d.as_nanos() as f64 / (iters * BATCH as u64) as f64;
    let mut r = RESULTS.lock().unwrap();
    match r.iter_mut().find(|e| e.0 == name) {
        Some(e) => e.1 = e.1.min(ns),
        None => r.push((name.into(), ns)),
    }
    d
}

fn full() -> bool {
    std::env::var_os("FLOWS_BENCH_FULL").is_some()
}

fn build(flows: &[String], cache: bool) -> Box<dyn Logic> {
    let mut c = json!({ "flows": flows });
    if !cache {
        c["cache"] = json!(0);
    }
    logic::build("flows", &c).unwrap()
}

/// Runs one case with and without the cache, after checking that every
/// frame gets `want`.
fn case(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    group: &str,
    id: &str,
    rules: &[String],
    flows: u64,
    want: Verdict,
) {
    for cache in [true, false] {
        let l = build(rules, cache);
        let mut t = Traffic::new(flows);
        let mut v = vec![Verdict::Flood; BATCH];
        t.step(&*l, &mut v);
        assert!(v.iter().all(|x| *x == want), "{id}: {:?}", &v[..4]);
        let name = format!("{}/{id}", if cache { "cache" } else { "no_cache" });
        g.bench_function(
            BenchmarkId::new(if cache { "cache" } else { "no_cache" }, id),
            |b| b.iter_custom(|it| timed(&format!("{group} {name}"), it, || t.step(&*l, &mut v))),
        );
    }
}

fn few_rules() -> Vec<String> {
    vec![
        "priority=10,in_port=0,udp,nw_dst=10.0.0.2,actions=output:1".into(),
        "priority=10,in_port=1,actions=output:0".into(),
        "priority=0,actions=drop".into(),
    ]
}

fn concurrent(c: &mut Criterion) {
    let mut g = c.benchmark_group("flows_a_concurrent");
    g.throughput(Throughput::Elements(BATCH as u64));
    // patch, for scale, under the same traffic.
    {
        let patch = logic::build("patch", &json!({"pairs": [[0, 1]]})).unwrap();
        let mut t = Traffic::new(1);
        let mut v = vec![Verdict::Flood; BATCH];
        g.bench_function("patch", |b| {
            b.iter_custom(|it| timed("a patch", it, || t.step(&*patch, &mut v)))
        });
    }
    let mut counts = vec![1u64, 100, 1000, 10_000, 100_000];
    if full() {
        counts.push(1_000_000);
    }
    for n in counts {
        case(
            &mut g,
            "a",
            &format!("{n}-flows"),
            &few_rules(),
            n,
            Verdict::Port(1),
        );
    }
    g.finish();
}

/// `n` flows over `masks` masks that the frames miss, plus the catch-all.
fn many_rules(n: u32, masks: u32) -> Vec<String> {
    let mut texts: Vec<String> = (0..n)
        .map(|i| {
            let (m, j) = (i % masks, i / masks);
            format!(
                "priority={},udp,nw_src=10.1.0.0/{},nw_dst=10.{}.0.2/{},tp_src={},actions=output:2",
                1 + i % 1000,
                32 - m / 16,
                j >> 16,
                32 - m % 16,
                j & 0xffff
            )
        })
        .collect();
    texts.push("priority=0,udp,actions=output:1".into());
    texts
}

fn rules(c: &mut Criterion) {
    let mut g = c.benchmark_group("flows_b_rules");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut counts = vec![1u32, 100, 10_000];
    if full() {
        counts.push(100_000);
    }
    for masks in [1u32, 8, 64] {
        for &n in &counts {
            if n < masks {
                continue;
            }
            let texts = many_rules(n, masks);
            case(
                &mut g,
                "b",
                &format!("{n}-rules-{masks}-masks"),
                &texts,
                64,
                Verdict::Port(1),
            );
        }
    }
    g.finish();
}

fn parts(c: &mut Criterion) {
    use logic::flows::{extract_fast, extract_general};
    let mut g = c.benchmark_group("flows_parts");
    g.throughput(Throughput::Elements(BATCH as u64));
    let frames: Vec<Vec<u8>> = (0..BATCH).map(|_| frame()).collect();
    g.bench_function("extract_general", |b| {
        b.iter_custom(|it| {
            timed("parts extract_general", it, || {
                for f in &frames {
                    std::hint::black_box(extract_general(std::hint::black_box(f), 0));
                }
            })
        })
    });
    g.bench_function("extract_fast", |b| {
        b.iter_custom(|it| {
            timed("parts extract_fast", it, || {
                for f in &frames {
                    std::hint::black_box(extract_fast(std::hint::black_box(f), 0));
                }
            })
        })
    });
    let keys: Vec<_> = frames.iter().map(|f| extract_general(f, 0)).collect();
    g.bench_function("hash", |b| {
        b.iter_custom(|it| {
            timed("parts hash", it, || {
                for k in &keys {
                    std::hint::black_box(std::hint::black_box(k).hash_with(0x140));
                }
            })
        })
    });
    g.finish();
}

fn summary() {
    let r = RESULTS.lock().unwrap().clone();
    let patch = r.iter().find(|e| e.0 == "a patch").map(|e| e.1);
    eprintln!("flows summary (ns per packet, best sample; classify of 256 x {FRAME_B} B frames)");
    for (n, ns) in &r {
        match patch {
            Some(p) => eprintln!("  {n:<40} {ns:8.1} ns/pkt   ({:.2} x patch's cost)", ns / p),
            None => eprintln!("  {n:<40} {ns:8.1} ns/pkt"),
        }
    }
    let json: Vec<_> = r
        .iter()
        .map(|(n, ns)| json!({"name": n, "ns_per_pkt": ns}))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("flows-summary.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_millis(600))
        .sample_size(10);
    targets = concurrent, rules, parts
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
