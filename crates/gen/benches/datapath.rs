//! Per-frame cost of turnout-gen's own data path on one core, with the
//! port taken out: the sender stamping and copying frames into a sink
//! queue that drains instantly, and the receiver accounting frames from a
//! queue that hands out the same pre-built burst forever. These bound
//! turnout-gen's send and receive rate per core independently of any peer
//! (on a loaded machine the peer, not the tool, decides end-to-end rates).
//!
//! Run: cargo bench -p turnout-gen --bench datapath --features bench

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use fabric::{RxBatch, RxFill, RxQueue};
use turnout_gen::cli::VaryField;
use turnout_gen::engine::{Receiver, SendPlan, Sender};
use turnout_gen::frame::{FrameGen, FrameSpec};
use turnout_gen::sys::{now_ns, OwnedTx};
use wire::MacAddr;

#[allow(dead_code)] // the fabric benches use more of the rig than this
#[path = "../../fabric/benches/rig/mod.rs"]
mod rig;

const SLOTS: usize = 1024;
/// The rig's sink slots: the largest frame it carries.
const SLOT_B: usize = 2048;

/// A receive queue that hands out the same burst of frames every time.
struct LoopRx {
    frames: Vec<Vec<u8>>,
}

impl RxQueue for LoopRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        let n = self.frames.len().min(batch.room());
        for f in &mut self.frames[..n] {
            // SAFETY: the frames live as long as the queue and are not
            // touched elsewhere while the batch holds them.
            unsafe { batch.push(f.as_mut_ptr(), f.len() as u32) };
        }
        n
    }
    fn release(&mut self) {}
}

fn spec(flows: u32) -> FrameSpec {
    FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 1024,
        dst_port: 1024,
        vlan: None,
        flows,
        vary: vec![VaryField::SrcPort, VaryField::DstIp],
    }
}

fn send(c: &mut Criterion) {
    let mut g = c.benchmark_group("send");
    for &(size, flows) in &[(64u32, 1u32), (64, 1024), (1518, 1)] {
        g.throughput(Throughput::Elements(32));
        g.bench_with_input(
            BenchmarkId::new(format!("{size}B"), format!("{flows}flows")),
            &size,
            |b, &size| {
                // A transmit queue whose peer consumes everything at once:
                // the fabric benches' sink (a ring of 2 KiB slots, always
                // free, copied into like a real shared-memory ring).
                let q = rig::Sink::new(SLOTS);
                // SAFETY: this thread is the only sender on `q`.
                let tx = unsafe { OwnedTx::new(&*q) };
                let gen = FrameGen::new(&spec(flows), &[size]).unwrap();
                let plan = SendPlan {
                    stream: 0,
                    burst: 32,
                    bunch: false,
                    rate_pps: 0.0,
                    warmup_ns: 0,
                    duration_ns: u64::MAX / 4,
                    count: None,
                };
                let mut s = Sender::new(tx, gen, plan, now_ns(), SLOT_B as u32).unwrap();
                // One iteration = one burst of 32 (clock read included).
                b.iter(|| black_box(s.poll(now_ns())));
            },
        );
    }
    g.finish();
}

fn receive(c: &mut Criterion) {
    let mut g = c.benchmark_group("receive");
    for &(size, touch) in &[(64u32, false), (1518, false), (1518, true)] {
        g.throughput(Throughput::Elements(32));
        let name = if touch {
            format!("{size}B-touch")
        } else {
            format!("{size}B")
        };
        g.bench_function(name, |b| {
            let mut gen = FrameGen::new(&spec(1), &[size]).unwrap();
            // A burst of 32 in-order frames; re-stamped per iteration so
            // the sequence numbers keep advancing (in-order path).
            let mut seq = 0u64;
            let mut r = Receiver::new(touch);
            let mut batch = RxBatch::with_capacity(32);
            let mut q = LoopRx {
                frames: (0..32).map(|i| gen.next(0, i, 1).to_vec()).collect(),
            };
            b.iter(|| {
                for f in &mut q.frames {
                    // Sequence field: payload offset 42 + 6 (IPv4, no VLAN).
                    f[48..56].copy_from_slice(&seq.to_be_bytes());
                    seq += 1;
                }
                black_box(r.poll(&mut q, &mut batch))
            });
            assert_eq!(r.lost(), 0);
        });
    }
    g.finish();
}

criterion_group!(benches, send, receive);
criterion_main!(benches);
