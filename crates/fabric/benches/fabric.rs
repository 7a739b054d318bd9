//! Criterion benches reproducing mSwitch's fabric figures in-process, each
//! next to a reference measured in the same run (mSwitch §4;
//! docs/references.md):
//!
//! - (a) `size_batch`: one source → one destination, 60/508/1514 B frames,
//!   batches 32..1024 (Fig. 5b); reference: a bare memcpy of the same
//!   frames into the same destination ring (the cost floor of copying).
//! - (b) `idle_ports`: one active pair while 0..1000 idle ports are attached
//!   (Fig. 10); reference: the 2-port figure.
//! - (c) `fanout`: one source round-robin over 1..1000 destinations, the
//!   two-pass algorithm vs a VALE-style scan of every port per batch
//!   (Fig. 11), implemented here as the reference.
//! - (d) `incast`: 1..4 workers sending into one destination at once
//!   (Fig. 12, destination-port parallelism); reference: one worker.
//! - (e) `logic`: `bridge`, `l4filter`, `demux`, `flows` (3 rules; 10 000
//!   rules over 8 masks, every subtable probed) vs `patch` cost per packet
//!   through the whole fabric, on 64 B UDP frames (Fig. 16).
//! - (f) `f_mirror`: `flows` mirroring each frame to 1, 2 and 4 ports
//!   (`actions=output:1,output:2,...`, one group per output set; "Open vSwitch
//!   throughput and latency" §5.3 (d)), cost per received frame (all copies included) vs `patch`.
//!
//! Sources are synthetic ports whose receive queue hands out the same frame
//! forever (no sender thread competing for the 2 cores); sinks copy every
//! frame into a real ring of 2 KiB slots that nobody drains (always free),
//! so the measured work is the fabric's: classify, lists, reserve, copy,
//! publish, counters.
//!
//! A summary with the ratios is printed at the end and written to
//! target/criterion/fabric-summary.json.

use std::sync::atomic::Ordering;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fabric::{Ctx, Logic, OwnedTx, PortId, Switch, SwitchConfig, Verdict, WakeupMode};
use testpeers::bench_cases;

mod rig;
use rig::{frame, rig, rig_with, Rig, Sink, Source};

// ---------------------------------------------------------------- logics

/// Every packet to one port (the cheapest possible logic).
struct To(PortId);
impl Logic for To {
    fn name(&self) -> &'static str {
        "to"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut fabric::Pkts, v: &mut [Verdict]) {
        v.fill(Verdict::Port(self.0));
    }
}

/// Packets round-robin over destinations 1..=n.
struct RoundRobin(u16);
impl Logic for RoundRobin {
    fn name(&self) -> &'static str {
        "round-robin"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut fabric::Pkts, v: &mut [Verdict]) {
        for (i, v) in v.iter_mut().enumerate() {
            *v = Verdict::Port(1 + (i as u16 % self.0));
        }
    }
}

// ---------------------------------------------------------------- references

impl Rig {
    /// VALE-style reference: for every port of the table, scan the whole
    /// batch for its packets, then reserve/copy/publish them.
    #[inline]
    fn step_scan(&mut self, logic: &dyn Logic) -> u64 {
        let mut rx = self.batch.receive(&mut *self.rxq, 0, 0);
        let n = rx.len();
        let ctx = Ctx {
            now_ns: 0,
            worker: 0,
        };
        logic.classify(&ctx, 0, rx.pkts_mut(), &mut self.verdicts[..n]);
        let mut sent = 0;
        for &p in self.table.present() {
            let Some(dst) = self.table.get(p) else {
                continue;
            };
            let txq = dst.port.tx(0);
            let mut cnt = 0u32;
            for v in &self.verdicts[..n] {
                if *v == Verdict::Port(p) {
                    cnt += 1;
                }
            }
            if cnt == 0 {
                continue;
            }
            // SAFETY: single thread, no forwarder sends to the sink here.
            let mut tx = unsafe { OwnedTx::new(txq) };
            let mut slot = tx.reserve(cnt);
            for (pk, v) in rx.pkts().iter().zip(&self.verdicts[..n]) {
                if *v == Verdict::Port(p) {
                    tx.write(slot, 1, pk.data());
                    slot += 1;
                }
            }
            tx.publish(slot);
            sent += cnt as u64;
        }
        sent
    }

    /// Reference for (a): copy the batch straight into the sink ring.
    #[inline]
    fn step_memcpy(&mut self) -> u64 {
        let rx = self.batch.receive(&mut *self.rxq, 0, 0);
        let n = rx.len();
        let dst = self.table.get(1).unwrap();
        let txq = dst.port.tx(0);
        // SAFETY: single thread, no forwarder sends to the sink here.
        let mut tx = unsafe { OwnedTx::new(txq) };
        let first = tx.reserve(n as u32);
        for (i, p) in rx.pkts().iter().enumerate() {
            tx.write(first + i as u64, 1, p.data());
        }
        tx.publish(first + n as u64);
        n as u64
    }
}

// ---------------------------------------------------------------- results

static RESULTS: Mutex<Vec<(String, String, f64)>> = Mutex::new(Vec::new());

/// Times `iters` steps, recording ns per delivered packet.
fn timed(group: &str, name: &str, iters: u64, mut step: impl FnMut() -> u64) -> Duration {
    let t = Instant::now();
    let mut pkts = 0;
    for _ in 0..iters {
        pkts += step();
    }
    let d = t.elapsed();
    if pkts > 0 {
        let ns = d.as_nanos() as f64 / pkts as f64;
        let mut r = RESULTS.lock().unwrap();
        match r.iter_mut().find(|e| e.0 == group && e.1 == name) {
            // keep the best (least disturbed) sample of this machine
            Some(e) => e.2 = e.2.min(ns),
            None => r.push((group.into(), name.into(), ns)),
        }
    }
    d
}

fn quick(c: &mut Criterion) -> &mut Criterion {
    c
}

// ---------------------------------------------------------------- (a)

fn size_batch(c: &mut Criterion) {
    let mut g = quick(c).benchmark_group("a_size_batch");
    for len in [60usize, 508, 1514] {
        for batch in [32usize, 64, 128, 256, 512, 1024] {
            g.throughput(Throughput::Elements(batch as u64));
            let mut r = rig(len, batch, 1, 0);
            let logic = To(1);
            let id = format!("{len}B/b{batch}");
            g.bench_function(BenchmarkId::new("fabric", &id), |b| {
                b.iter_custom(|it| timed("a", &format!("fabric {id}"), it, || r.step(&logic)))
            });
            if batch == 256 {
                g.bench_function(BenchmarkId::new("memcpy", &id), |b| {
                    b.iter_custom(|it| timed("a", &format!("memcpy {id}"), it, || r.step_memcpy()))
                });
            }
        }
    }
    g.finish();
}

// ---------------------------------------------------------------- (b)

fn idle_ports(c: &mut Criterion) {
    let mut g = c.benchmark_group("b_idle_ports");
    g.throughput(Throughput::Elements(256));
    for idle in [0usize, 10, 100, 1000] {
        let mut r = rig(60, 256, 1, idle);
        let logic = To(1);
        g.bench_function(BenchmarkId::new("fabric", idle), |b| {
            b.iter_custom(|it| timed("b", &format!("idle {idle}"), it, || r.step(&logic)))
        });
    }
    g.finish();
}

// ---------------------------------------------------------------- (c)

fn fanout(c: &mut Criterion) {
    let mut g = c.benchmark_group("c_fanout");
    g.throughput(Throughput::Elements(256));
    for dests in [1usize, 10, 100, 1000] {
        let mut r = rig(60, 256, dests, 0);
        let logic = RoundRobin(dests as u16);
        g.bench_function(BenchmarkId::new("two_pass", dests), |b| {
            b.iter_custom(|it| timed("c", &format!("two_pass {dests}"), it, || r.step(&logic)))
        });
        g.bench_function(BenchmarkId::new("vale_scan", dests), |b| {
            b.iter_custom(|it| {
                timed("c", &format!("vale_scan {dests}"), it, || {
                    r.step_scan(&logic)
                })
            })
        });
    }
    g.finish();
}

// ---------------------------------------------------------------- (d)

fn incast(c: &mut Criterion) {
    let mut g = c.benchmark_group("d_incast");
    g.sample_size(10);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    for workers in 1..=4usize {
        let cfg = SwitchConfig {
            batch: 256,
            max_ports: 16,
            workers: (0..workers).map(|w| Some(w % cores)).collect(),
            wakeup: WakeupMode::Poll,
            ..SwitchConfig::default()
        };
        let sw = Switch::new(cfg, Box::new(To(0))).unwrap();
        let sink = Sink::new(4096);
        sw.add_port("sink", sink.clone(), Some(0)).unwrap();
        // The sink receives nothing; sources are spread over the workers.
        for w in 0..workers {
            sw.add_port(&format!("src{w}"), Source::new(&frame(60)), Some(w))
                .unwrap();
        }
        std::thread::sleep(Duration::from_millis(50));
        g.throughput(Throughput::Elements(1_000_000));
        g.bench_function(BenchmarkId::new("workers", workers), |b| {
            b.iter_custom(|it| {
                // Time until `it` million frames reached the sink.
                let start = sink.published.load(Ordering::Acquire);
                let goal = start + it * 1_000_000;
                let t = Instant::now();
                while sink.published.load(Ordering::Acquire) < goal {
                    std::hint::spin_loop();
                }
                let d = t.elapsed();
                let ns = d.as_nanos() as f64 / (it * 1_000_000) as f64;
                let mut r = RESULTS.lock().unwrap();
                let name = format!("workers {workers}");
                match r.iter_mut().find(|e| e.0 == "d" && e.1 == name) {
                    Some(e) => e.2 = e.2.min(ns),
                    None => r.push(("d".into(), name, ns)),
                }
                d
            })
        });
        sw.shutdown();
    }
    g.finish();
}

// ---------------------------------------------------------------- (e)

fn logics(c: &mut Criterion) {
    let mut g = c.benchmark_group("e_logic");
    g.throughput(Throughput::Elements(256));
    // The cases and their rule sets are testpeers::bench_cases's (shared with
    // the callgrind instruments classify_loop and fabric_loop).
    for &(name, case) in bench_cases::E_LOGIC {
        let l = bench_cases::build(case).unwrap();
        let f = bench_cases::udp_frame(64, bench_cases::SRC_PORT);
        let mut r = rig_with(&f, 256, 2, 0);
        r.state_of(l.as_ref());
        assert_eq!(
            r.step(l.as_ref()),
            256,
            "{name} must forward every frame to port 1"
        );
        g.bench_function(BenchmarkId::new("logic", name), |b| {
            b.iter_custom(|it| timed("e", name, it, || r.step(l.as_ref())))
        });
    }
    g.finish();
}

// ---------------------------------------------------------------- (f)

fn mirror(c: &mut Criterion) {
    let mut g = c.benchmark_group("f_mirror");
    g.throughput(Throughput::Elements(256));
    let patch = logic::build("patch", &serde_json::json!({"pairs": [[0, 1]]})).unwrap();
    let mut cases: Vec<(String, Box<dyn Logic>, u64)> = vec![("patch".into(), patch, 1)];
    for outs in [1u16, 2, 4] {
        let acts: Vec<String> = (1..=outs).map(|p| format!("output:{p}")).collect();
        let l = logic::build(
            "flows",
            &serde_json::json!({"flows": [format!("in_port=0,udp,actions={}", acts.join(","))]}),
        )
        .unwrap();
        cases.push((format!("flows {outs} outputs"), l, outs as u64));
    }
    for (name, l, copies) in &cases {
        let f = bench_cases::udp_frame(64, bench_cases::SRC_PORT);
        let mut r = rig_with(&f, 256, 4, 0);
        r.state_of(l.as_ref());
        assert_eq!(
            r.step(l.as_ref()),
            256 * copies,
            "{name} must deliver {copies} copies of every frame"
        );
        // Cost per received frame, every copy included.
        g.bench_function(BenchmarkId::new("logic", name), |b| {
            b.iter_custom(|it| {
                timed("f", name, it, || {
                    r.step(l.as_ref());
                    256
                })
            })
        });
    }
    g.finish();
}

// ---------------------------------------------------------------- summary

fn summary() {
    let r = RESULTS.lock().unwrap().clone();
    let get = |g: &str, n: &str| r.iter().find(|e| e.0 == g && e.1 == n).map(|e| e.2);
    let mut out = Vec::new();
    let mut line = |s: String| {
        eprintln!("{s}");
        out.push(s);
    };
    line(
        "fabric summary (ns per packet, best sample; ratios against a reference from the same run)"
            .into(),
    );
    for (g, n, ns) in &r {
        let reference = match g.as_str() {
            "a" => {
                let id = n.split_whitespace().nth(1).unwrap_or("");
                let size = id.split('/').next().unwrap_or("");
                get("a", &format!("memcpy {size}/b256")).map(|m| ("memcpy b256", m))
            }
            "b" => get("b", "idle 0").map(|m| ("0 idle", m)),
            "c" => {
                let d = n.split_whitespace().nth(1).unwrap_or("");
                get("c", &format!("vale_scan {d}")).map(|m| ("vale_scan", m))
            }
            "d" => get("d", "workers 1").map(|m| ("1 worker", m)),
            "e" => get("e", "patch").map(|m| ("patch", m)),
            "f" => get("f", "patch").map(|m| ("patch", m)),
            _ => None,
        };
        let mpps = 1e3 / ns;
        match reference {
            Some((rn, rns)) => line(format!(
                "  ({g}) {n:<24} {ns:8.1} ns/pkt {mpps:7.2} Mpps   throughput ratio vs {rn}: {:.2}",
                rns / ns
            )),
            None => line(format!("  ({g}) {n:<24} {ns:8.1} ns/pkt {mpps:7.2} Mpps")),
        }
    }
    let json: Vec<_> = r
        .iter()
        .map(|(g, n, ns)| serde_json::json!({"group": g, "name": n, "ns_per_pkt": ns}))
        .collect();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/criterion");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("fabric-summary.json"),
        serde_json::to_string_pretty(&json).unwrap(),
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default().warm_up_time(Duration::from_millis(300)).measurement_time(Duration::from_secs(1)).sample_size(20);
    targets = size_batch, idle_ports, fanout, incast, logics, mirror
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
