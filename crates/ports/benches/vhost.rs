//! What the vhost-user backend's data path costs per frame, without a
//! frontend process or the fabric: one guest memory (anonymous), two split
//! virtqueues laid out as a frontend would (turnout-gen, DPDK: one
//! descriptor per frame holding the 12-byte header and the frame), and
//! the backend's queues driven directly:
//!
//! - `rx`: `VhostRx::burst` of 256 frames from the guest's transmit ring
//!   and `release` (used entries, used index, notification check): the
//!   dequeue path the fabric's worker calls per batch;
//! - `tx`: `free_slots`, one `reserve` of 256 slots, 256 `write`s (one
//!   frame each: header, copy, used entry) and one `publish` into the
//!   guest's receive ring of 2 KiB buffers, through `OwnedTx` (the fabric
//!   hands the backend whole lists in one `write_burst`; this is one call
//!   per frame).
//!
//! After each round the "guest" offers the same descriptors again (the
//! available index moves by 256; its entries already name them), so only
//! the backend's work is measured. 64 B and 1518 B frames. Under load the
//! times are indicative only; `crates/ports/examples/vhost_callgrind.sh`
//! counts instructions, which load does not move.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fabric::RxBatch;
use ports::vhost_user::sys::{GuestMemory, Ring};
use ports::vhost_user::vring::{Fault, Layout, Session, VhostRx, VhostTx, VringSlot, DESC_F_WRITE};

const N: u16 = 256;
const BASE: u64 = 0x10_0000;
const LAYOUT: Layout = Layout {
    hdr_len: 12,
    mrg_rxbuf: true,
    event_idx: true,
};

/// One virtqueue of `N` entries at `at` in `mem`, buffers of 2 KiB after
/// it, descriptor `i` on buffer `i` (`len` bytes, `flags`), all offered.
struct Queue {
    mem: Arc<GuestMemory>,
    at: u64,
    avail_idx: u16,
    slot: Arc<VringSlot>,
    fault: Arc<Fault>,
}

impl Queue {
    fn new(mem: &Arc<GuestMemory>, at: u64, len: u32, flags: u16, fill: &[u8]) -> Queue {
        let (desc, avail, used, bufs) = (at, at + 0x1000, at + 0x2000, at + 0x4000);
        let w = |gpa: u64, b: &[u8]| assert!(mem.gpa(gpa, b.len() as u64).unwrap().write(0, b));
        for i in 0..N {
            let buf = bufs + 2048 * i as u64;
            w(buf, fill);
            let mut d = [0u8; 16];
            d[0..8].copy_from_slice(&buf.to_le_bytes());
            d[8..12].copy_from_slice(&len.to_le_bytes());
            d[12..14].copy_from_slice(&flags.to_le_bytes());
            w(desc + 16 * i as u64, &d);
            w(avail + 4 + 2 * i as u64, &i.to_le_bytes());
        }
        let fault = Arc::new(Fault::new().unwrap());
        let ring = Ring::new(mem.clone(), desc, avail, used, N).unwrap();
        let slot = Arc::new(VringSlot::new().unwrap());
        slot.install(Arc::new(Session::new(
            ring,
            LAYOUT,
            None,
            None,
            0,
            fault.clone(),
        )));
        let mut q = Queue {
            mem: mem.clone(),
            at,
            avail_idx: 0,
            slot,
            fault,
        };
        q.offer_all();
        q
    }

    /// Offers the `N` descriptors again.
    fn offer_all(&mut self) {
        self.avail_idx = self.avail_idx.wrapping_add(N);
        let b = self.avail_idx.to_le_bytes();
        let g = self.mem.gpa(self.at + 0x1000 + 2, 2).unwrap();
        assert!(g.write(0, &b));
    }
}

fn bench(c: &mut Criterion) {
    let mem = Arc::new(GuestMemory::anonymous(BASE, 4 << 20).unwrap());
    let mut g = c.benchmark_group("vhost");
    g.throughput(Throughput::Elements(N as u64));
    for len in [64usize, 1518] {
        // The guest's transmit ring: header + frame in each buffer.
        let mut pkt = vec![0u8; 12 + len];
        for (i, b) in pkt[12..].iter_mut().enumerate() {
            *b = i as u8;
        }
        let mut txq = Queue::new(&mem, BASE, pkt.len() as u32, 0, &pkt);
        let mut rx = VhostRx::new(
            txq.slot.clone(),
            1518,
            txq.fault.clone(),
            Arc::new(AtomicBool::new(true)),
        );
        let mut batch = RxBatch::with_capacity(N as usize);
        g.bench_with_input(BenchmarkId::new("rx", len), &len, |b, _| {
            b.iter(|| {
                let r = batch.receive(&mut rx, 0, 0);
                assert_eq!(r.received(), N as usize);
                drop(r);
                txq.offer_all();
            })
        });
        assert_eq!(txq.fault.total_lies(), 0);

        // The guest's receive ring: 2 KiB writable buffers.
        let mut rxq = Queue::new(&mem, BASE + (2 << 20), 2048, DESC_F_WRITE, &[]);
        let tx = VhostTx::new(rxq.slot.clone(), 1518, rxq.fault.clone());
        tx.set_layout(LAYOUT);
        // SAFETY: this thread is the queue's only transmitter.
        let mut o = unsafe { fabric::OwnedTx::new(&tx) };
        let frame = pkt[12..].to_vec();
        g.bench_with_input(BenchmarkId::new("tx", len), &len, |b, _| {
            b.iter(|| {
                assert_eq!(o.free_slots(), N as u32);
                let s = o.reserve(N as u32);
                for k in 0..N as u64 {
                    o.write(s + k, 1, &frame);
                }
                o.publish(s + N as u64);
                rxq.offer_all();
            })
        });
        assert_eq!(rxq.fault.total_lies(), 0);
        assert_eq!(
            rxq.fault
                .tx_buf_short
                .load(std::sync::atomic::Ordering::Relaxed),
            0
        );
    }
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
