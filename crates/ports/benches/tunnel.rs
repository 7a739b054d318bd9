//! What a VXLAN / Geneve port costs per packet, next to plain forwarding
//! through the same fabric in the same run:
//!
//! - `plain`: a source port → a sink port (one copy per frame);
//! - `encap`: source → a VXLAN port whose underlay is the sink (staging
//!   copy, header write, flow hash, copy into the underlay ring);
//! - `flood2`: the same with a broadcast inner frame and two remotes
//!   (head-end replication: two encapsulated copies per frame);
//! - `decap`: a VXLAN port whose underlay hands out encapsulated frames →
//!   the sink (parse and checks, view narrowed in place, MAC learned).
//!
//! Sources hand out the same frame forever; sinks copy into a ring nobody
//! drains (always free), as in the fabric benches, so the measured work is
//! the fabric's and the tunnel's. 64 B and 1400 B inner frames. A summary
//! (ns per packet, ratio to plain) is printed at the end.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fabric::{
    Ctx, Forwarder, Logic, Pkts, Port, PortEntry, PortId, PortInfo, PortTable, QueueId, RxBatch,
    RxFill, RxQueue, TxDrops, TxFrames, TxQueue, Verdict,
};
use fabric::{Lease, TxLock, TxProducer};
use ports::tunnel::encap::{flow_sport, Outer, OuterSpec};
use ports::tunnel::{Kind, TunnelConfig, TunnelPort};
use wire::MacAddr;

const BATCH: usize = 256;
const SLOT_B: usize = 2048;

struct Source {
    frame: Box<[u8]>,
    taken: AtomicBool,
}

struct SourceRx {
    frame: *mut u8,
    len: u32,
}

// SAFETY: the template outlives the queue and is only read (decap does not
// write the frame; the logic here does not either).
unsafe impl Send for SourceRx {}

impl Port for Source {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: "source".into(),
            kind: "bench-source",
            queues: 1,
            max_frame_b: 9216,
        }
    }
    fn take_rx(&self, _: QueueId) -> Option<Box<dyn RxQueue>> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Box::new(SourceRx {
            frame: self.frame.as_ptr() as *mut u8,
            len: self.frame.len() as u32,
        }))
    }
    fn tx(&self, _: QueueId) -> &dyn TxQueue {
        &*NOWHERE
    }
}

impl RxQueue for SourceRx {
    fn burst(&mut self, b: &mut RxFill<'_>) -> usize {
        let n = b.room();
        for _ in 0..n {
            // SAFETY: see the Send impl.
            unsafe { b.push(self.frame, self.len) };
        }
        n
    }
    fn release(&mut self) {}
}

/// The source's transmit side: carries nothing (every frame is oversize),
/// so its producer never has room either.
struct Nowhere(TxLock<NoRoom>);
static NOWHERE: std::sync::LazyLock<Nowhere> =
    std::sync::LazyLock::new(|| Nowhere(TxLock::new(NoRoom)));
struct NoRoom;
impl TxProducer for NoRoom {
    fn free_slots(&mut self) -> u32 {
        0
    }
    fn reserve(&mut self, _: u32) -> Lease {
        unreachable!("no slot is ever free")
    }
    fn publish_deferred(&mut self, _: u64, _: &mut TxDrops) -> bool {
        false
    }
}
impl TxQueue for Nowhere {
    fn slots_for(&self, _: usize) -> u32 {
        0
    }
    fn tx_lock(&self) -> &TxLock {
        &self.0
    }
    unsafe fn write_burst(&self, _: &Lease, _: &TxFrames<'_>, _: &mut TxDrops) {}
}

struct Empty;
impl RxQueue for Empty {
    fn burst(&mut self, _: &mut RxFill<'_>) -> usize {
        0
    }
    fn release(&mut self) {}
}

/// Copies into a ring of 2 KiB slots nobody drains.
struct Sink {
    mem: Box<[std::cell::UnsafeCell<u8>]>,
    slots: u64,
    lock: TxLock<SinkProd>,
}

/// The sink's producer state (inside its lock).
struct SinkProd {
    slots: u64,
    reserved: u64,
}

impl TxProducer for SinkProd {
    fn free_slots(&mut self) -> u32 {
        self.slots as u32
    }
    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved += n as u64;
        Lease::at(first)
    }
    fn publish_deferred(&mut self, _: u64, _: &mut TxDrops) -> bool {
        false
    }
}

// SAFETY: the memory of a slot range is written only by the sender the
// fabric's lease protocol reserved it to (one writer per range), and never
// read.
unsafe impl Sync for Sink {}

impl Sink {
    fn new(slots: usize) -> Arc<Self> {
        Arc::new(Self {
            mem: (0..slots * SLOT_B)
                .map(|_| std::cell::UnsafeCell::new(0u8))
                .collect(),
            slots: slots as u64,
            lock: TxLock::new(SinkProd {
                slots: slots as u64,
                reserved: 0,
            }),
        })
    }
}

impl Port for Sink {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: "sink".into(),
            kind: "bench-sink",
            queues: 1,
            max_frame_b: SLOT_B as u32,
        }
    }
    fn take_rx(&self, _: QueueId) -> Option<Box<dyn RxQueue>> {
        Some(Box::new(Empty))
    }
    fn tx(&self, _: QueueId) -> &dyn TxQueue {
        self
    }
}

impl TxQueue for Sink {
    fn slots_for(&self, len: usize) -> u32 {
        u32::from(len <= SLOT_B)
    }
    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }
    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        for (j, (frame, _)) in frames.iter().enumerate() {
            let off = ((lease.first + j as u64) % self.slots) as usize * SLOT_B;
            // SAFETY: off + len <= mem.len() (len <= SLOT_B, slots_for); the
            // slot is ours by reservation (trait contract).
            unsafe {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), self.mem[off].get(), frame.len())
            };
        }
    }
}

struct To(PortId);
impl Logic for To {
    fn name(&self) -> &'static str {
        "to"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut Pkts, v: &mut [Verdict]) {
        v.fill(Verdict::Port(self.0));
    }
}

const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const REMOTE: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const REMOTE2: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

fn inner(len: usize, broadcast: bool) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(if broadcast {
        &[0xff; 6]
    } else {
        &[2, 0, 0, 0, 9, 9]
    });
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 8, 8]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = 0x45;
    f[16..18].copy_from_slice(&((len - 14) as u16).to_be_bytes());
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 1, 0, 1]);
    f[30..34].copy_from_slice(&[10, 1, 0, 2]);
    f[34..38].copy_from_slice(&[0x30, 0x39, 0x00, 0x35]);
    f
}

fn tunnel(underlay: Arc<dyn Port>, remotes: &[Ipv4Addr]) -> Arc<TunnelPort> {
    let mut c = TunnelConfig::new(Kind::Vxlan, 100, LOCAL.into());
    c.remotes = remotes.iter().map(|r| IpAddr::V4(*r)).collect();
    c.neighbours = remotes
        .iter()
        .map(|r| (IpAddr::V4(*r), MacAddr([2, 0, 0, 0, 0, r.octets()[3]])))
        .collect();
    Arc::new(TunnelPort::open_parts("vx", c, underlay, MAC, 9000, None).unwrap())
}

struct Rig {
    table: PortTable,
    rxq: Box<dyn RxQueue>,
    fwd: Forwarder,
    batch: RxBatch,
    verdicts: Vec<Verdict>,
    logic: To,
}

impl Rig {
    fn new(src: Arc<dyn Port>, dst: Arc<dyn Port>) -> Rig {
        let rxq = src.take_rx(0).unwrap();
        let table = PortTable::new(4)
            .with(Arc::new(PortEntry::new(0, "src", src)))
            .with(Arc::new(PortEntry::new(1, "dst", dst)));
        Rig {
            table,
            rxq,
            fwd: Forwarder::new(0, 4, BATCH),
            batch: RxBatch::with_capacity(BATCH),
            verdicts: vec![Verdict::Flood; BATCH],
            logic: To(1),
        }
    }

    #[inline]
    fn step(&mut self) -> u64 {
        let mut rx = self.batch.receive(&mut *self.rxq, 0, 0);
        let n = rx.len();
        let ctx = Ctx {
            now_ns: 0,
            worker: 0,
        };
        self.logic
            .classify(&ctx, 0, rx.pkts_mut(), &mut self.verdicts[..n]);
        let entry = self.table.get(0).unwrap().clone();
        self.fwd.forward(
            &self.table,
            &self.logic,
            &entry,
            rx.pkts(),
            &self.verdicts[..n],
        )
    }
}

fn rigs(len: usize) -> Vec<(&'static str, Rig)> {
    let plain = Rig::new(
        Arc::new(Source {
            frame: inner(len, false).into(),
            taken: AtomicBool::new(false),
        }),
        Sink::new(4096),
    );
    let encap = Rig::new(
        Arc::new(Source {
            frame: inner(len, false).into(),
            taken: AtomicBool::new(false),
        }),
        tunnel(Sink::new(4096), &[REMOTE]),
    );
    let flood2 = Rig::new(
        Arc::new(Source {
            frame: inner(len, true).into(),
            taken: AtomicBool::new(false),
        }),
        tunnel(Sink::new(4096), &[REMOTE, REMOTE2]),
    );
    // An encapsulated frame from REMOTE to us.
    let f = inner(len, false);
    let o = Outer::new(&OuterSpec {
        kind: Kind::Vxlan,
        vni: 100,
        src_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        dst_mac: MAC,
        src_ip: REMOTE.into(),
        dst_ip: LOCAL.into(),
        dst_port: 4789,
        mtu: 9000,
        ttl: 64,
    })
    .unwrap();
    let mut outer = vec![0u8; o.len() + f.len()];
    outer[o.len()..].copy_from_slice(&f);
    let n = o.write(&mut outer, f.len(), flow_sport(&f)).unwrap();
    outer.truncate(n);
    let src: Arc<dyn Port> = Arc::new(Source {
        frame: outer.into(),
        taken: AtomicBool::new(false),
    });
    let decap = Rig::new(tunnel(src, &[REMOTE]), Sink::new(4096));
    vec![
        ("plain", plain),
        ("encap", encap),
        ("flood2", flood2),
        ("decap", decap),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("tunnel");
    g.throughput(Throughput::Elements(BATCH as u64));
    for len in [64usize, 1400] {
        for (name, mut rig) in rigs(len) {
            assert!(rig.step() > 0, "{name} {len}: nothing delivered");
            g.bench_with_input(BenchmarkId::new(name, len), &len, |b, _| {
                b.iter(|| rig.step())
            });
        }
    }
    g.finish();
}

fn summary() {
    println!("\ntunnel cost per inner frame (median of 5 runs of 4096 batches of {BATCH}):");
    for len in [64usize, 1400] {
        let mut base = 0.0;
        for (name, mut rig) in rigs(len) {
            let mut runs = Vec::new();
            for _ in 0..5 {
                let t = Instant::now();
                let mut frames = 0u64;
                for _ in 0..4096 {
                    rig.step();
                    frames += BATCH as u64;
                }
                runs.push(t.elapsed().as_nanos() as f64 / frames as f64);
            }
            runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let ns = runs[2];
            if name == "plain" {
                base = ns;
            }
            println!(
                "  {len:>5} B {name:<7} {ns:7.1} ns/frame  {:4.2}x plain  (runs {:.1}..{:.1})",
                ns / base,
                runs[0],
                runs[4]
            );
        }
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    summary();
    criterion::Criterion::default()
        .configure_from_args()
        .final_summary();
}
