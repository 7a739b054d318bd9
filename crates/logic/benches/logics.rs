//! Classify cost per packet of every logic on a 256-frame batch of 64-byte
//! UDP/IPv4 frames, next to `patch` measured in the same run (mSwitch
//! Fig. 16 at the logic level). `flows` is measured with 1 to 10 000 flows
//! over 1 to 16 masks, in its worst case (every subtable probed).
//!
//! Run: `cargo bench -p logic --bench logics --features bench -- --quick`.
//! Criterion reports the time per batch and the packet rate; a summary
//! table at the end gives ns/packet and the ratio to `patch` from a
//! separate timed loop (minimum and median of 15 runs of 2000 batches each;
//! the minimum is the least disturbed by other processes on a shared
//! machine).

use std::hint::black_box;
use std::time::Instant;

use criterion::{criterion_group, Criterion, Throughput};
use logic::{Ctx, Logic, Pkt, Pkts, PortId, Verdict};
use serde_json::json;
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::MacAddr;

const BATCH: usize = 256;
const FRAME_B: usize = 64;

fn mac(side: u8, i: u32) -> MacAddr {
    let b = i.to_be_bytes();
    MacAddr([0x02, side, b[0], b[1], b[2], b[3]])
}

/// `hosts` distinct source and destination MACs / IPs / ports, cycled.
fn frames(hosts: u32) -> Vec<Vec<u8>> {
    (0..BATCH as u32)
        .map(|i| {
            let h = i % hosts;
            let spec = UdpFrameSpec::new(
                mac(0, h),
                mac(1, h),
                IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
                40000 + h as u16,
                5001,
            );
            let mut b = vec![0u8; FRAME_B];
            write_udp_frame(&spec, &mut b, FRAME_B).unwrap();
            b
        })
        .collect()
}

struct Case {
    name: &'static str,
    logic: Box<dyn Logic>,
    frames: Vec<Vec<u8>>,
    ingress: PortId,
}

/// Every logic of the table with its example configuration, then the
/// scale cases: a bridge that learned 1 and 64 hosts, demux with 1001
/// entries.
fn cases(dir: &std::path::Path) -> Vec<Case> {
    let bridge = |hosts: u32| {
        let b = logic::build("bridge", &json!({"table_size": 4096})).unwrap();
        // Learn every destination on port 1 first, so all frames hit.
        let mut learn: Vec<Vec<u8>> = (0..hosts)
            .map(|h| {
                let mut f = frames(1).remove(0);
                f[6..12].copy_from_slice(&mac(1, h).0);
                f
            })
            .collect();
        classify(&*b, &mut None, 1, &mut learn);
        b
    };
    let demux_entries: Vec<_> = (0..1000u32)
        .map(|i| json!({"proto": "udp", "ip": format!("10.1.{}.{}", i / 256, i % 256), "port": 5001, "to": 3}))
        .chain([json!({"proto": "udp", "ip": "10.0.0.2", "port": 5001, "to": 3})])
        .collect();
    let mut out: Vec<Case> = logic::LOGICS
        .iter()
        .map(|e| Case {
            name: e.name,
            logic: (e.new)(&(e.example)(dir).unwrap()).unwrap().logic,
            frames: frames(64),
            ingress: 0,
        })
        .collect();
    out.extend([
        Case {
            name: "bridge/1-host",
            logic: bridge(1),
            frames: frames(1),
            ingress: 0,
        },
        Case {
            name: "bridge/64-hosts",
            logic: bridge(64),
            frames: frames(64),
            ingress: 0,
        },
        Case {
            name: "demux/1001-entries",
            logic: logic::build(
                "demux",
                &json!({"default": 1, "uplink": 0, "entries": demux_entries}),
            )
            .unwrap(),
            frames: frames(64),
            ingress: 0,
        },
        flows_case("flows/1-flow", 0, 1),
        flows_case("flows/100-flows-4-masks", 100, 4),
        flows_case("flows/10k-flows-1-mask", 10_000, 1),
        flows_case("flows/10k-flows-8-masks", 10_000, 8),
        flows_case("flows/10k-flows-16-masks", 10_000, 16),
    ]);
    out
}

/// `flows` with `n` flows over `masks` distinct masks that the frames
/// miss, plus a priority-0 flow every frame hits
/// ([`testpeers::bench_cases::many_flows`], source ports from 0): every lookup
/// probes all `masks + 1` subtables (no early exit), whatever `n`.
fn flows_case(name: &'static str, n: u32, masks: u32) -> Case {
    let texts = testpeers::bench_cases::many_flows(n, masks, 0);
    Case {
        name,
        logic: logic::build("flows", &json!({ "flows": texts })).unwrap(),
        frames: frames(64),
        ingress: 0,
    }
}

fn classify(
    l: &dyn Logic,
    st: &mut Option<logic::WorkerState>,
    ingress: PortId,
    frames: &mut [Vec<u8>],
) -> [Verdict; BATCH] {
    let mut views = views(frames, ingress);
    let mut v = [Verdict::Flood; BATCH];
    let ctx = Ctx {
        now_ns: 1_000_000_000,
        worker: 0,
    };
    run(
        l,
        st,
        &ctx,
        ingress,
        Pkts::new_mut(&mut views),
        &mut v[..frames.len()],
    );
    v
}

/// One batch as a worker classifies it: with the logic's state if it has
/// one (`Logic::worker_state`, made once per case, before timing).
#[inline]
fn run(
    l: &dyn Logic,
    st: &mut Option<logic::WorkerState>,
    ctx: &Ctx,
    ingress: PortId,
    pkts: &mut Pkts,
    v: &mut [Verdict],
) {
    match st.as_deref_mut() {
        Some(st) => l.classify_with(st, ctx, ingress, pkts, v),
        None => l.classify(ctx, ingress, pkts, v),
    }
}

/// Views over `frames`, built once per case so the loop measures classify only.
fn views(frames: &mut [Vec<u8>], ingress: PortId) -> Vec<Pkt> {
    frames
        .iter_mut()
        // SAFETY: the frames outlive the views (both live until the end of
        // the case) and are only accessed through them.
        .map(|f| unsafe { Pkt::new(f.as_mut_ptr(), f.len() as u32, ingress, 0) })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = testpeers::TempDir::new("logic-bench");
    let mut cases = cases(&dir.0);
    let ctx = Ctx {
        now_ns: 1_000_000_000,
        worker: 0,
    };

    // Every case must forward (or flood: the table's bridge has learned
    // nothing) every frame, else we would time drop paths.
    let mut states: Vec<Option<logic::WorkerState>> =
        cases.iter().map(|c| c.logic.worker_state()).collect();
    for (case, st) in cases.iter_mut().zip(&mut states) {
        let v = classify(&*case.logic, st, case.ingress, &mut case.frames);
        assert!(
            v.iter()
                .all(|v| matches!(v, Verdict::Port(_) | Verdict::Flood | Verdict::Group(_))),
            "{}: {:?}",
            case.name,
            &v[..4]
        );
    }

    let mut g = c.benchmark_group("classify_256");
    g.throughput(Throughput::Elements(BATCH as u64));
    for (case, st) in cases.iter_mut().zip(&mut states) {
        let mut pkts = views(&mut case.frames, case.ingress);
        let mut v = vec![Verdict::Flood; BATCH];
        g.bench_function(case.name, |b| {
            b.iter(|| {
                run(
                    &*case.logic,
                    st,
                    &ctx,
                    case.ingress,
                    black_box(Pkts::new_mut(&mut pkts)),
                    black_box(&mut v),
                )
            })
        });
    }
    g.finish();

    // Summary: ns/packet and ratio to patch, measured back to back.
    let mut rows = Vec::new();
    for (case, st) in cases.iter_mut().zip(&mut states) {
        let mut pkts = views(&mut case.frames, case.ingress);
        let mut v = vec![Verdict::Flood; BATCH];
        let mut runs: Vec<f64> = (0..15)
            .map(|_| {
                let t = Instant::now();
                for _ in 0..2000 {
                    run(
                        &*case.logic,
                        st,
                        &ctx,
                        case.ingress,
                        black_box(Pkts::new_mut(&mut pkts)),
                        black_box(&mut v),
                    );
                }
                t.elapsed().as_nanos() as f64 / (2000 * BATCH) as f64
            })
            .collect();
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        rows.push((case.name, runs[0], runs[runs.len() / 2]));
    }
    let (pmin, pmed) = (rows[0].1, rows[0].2);
    println!("\nns/packet over 15 runs of 2000 batches of {BATCH} x {FRAME_B} B frames (min: least disturbed run)");
    println!(
        "{:<20} {:>9} {:>9} {:>11} {:>11}",
        "logic", "min", "median", "min/patch", "med/patch"
    );
    for (name, min, med) in rows {
        println!(
            "{name:<20} {min:>9.2} {med:>9.2} {:>11.1} {:>11.1}",
            min / pmin,
            med / pmed
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
