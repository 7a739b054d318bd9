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
//! drains (always free): the fabric benches' rig (`crates/fabric/benches/
//! rig`, included), so the measured work is
//! the fabric's and the tunnel's. 64 B and 1400 B inner frames. A summary
//! (ns per packet, ratio to plain) is printed at the end.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Instant;

use criterion::{criterion_group, BenchmarkId, Criterion, Throughput};
use fabric::{Ctx, Forwarder, Logic, Pkts, Port, PortEntry, PortId, PortTable, RxBatch, Verdict};
use ports::tunnel::encap::{flow_sport, Outer, OuterSpec};
use ports::tunnel::{Kind, TunnelConfig, TunnelPort};
use wire::MacAddr;

#[allow(dead_code)] // the fabric benches use more of the rig than this
#[path = "../../fabric/benches/rig/mod.rs"]
mod rig;
use rig::{Sink, Source};

const BATCH: usize = 256;

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

/// The fabric benches' rig (source, sinks, forwarding step) with a logic
/// sending everything to port 1.
struct Rig {
    r: rig::Rig,
    logic: To,
}

impl Rig {
    fn new(src: Arc<dyn Port>, dst: Arc<dyn Port>) -> Rig {
        let rxq = src.take_rx(0).unwrap();
        let table = PortTable::new(4)
            .with(Arc::new(PortEntry::new(0, "src", src)))
            .with(Arc::new(PortEntry::new(1, "dst", dst)));
        let r = rig::Rig {
            table,
            rxq,
            fwd: Forwarder::new(0, 4, BATCH),
            batch: RxBatch::with_capacity(BATCH),
            verdicts: vec![Verdict::Flood; BATCH],
            state: None,
        };
        Rig { r, logic: To(1) }
    }

    #[inline]
    fn step(&mut self) -> u64 {
        self.r.step(&self.logic)
    }
}

fn rigs(len: usize) -> Vec<(&'static str, Rig)> {
    let plain = Rig::new(Source::new(&inner(len, false)), Sink::new(4096));
    let encap = Rig::new(
        Source::new(&inner(len, false)),
        tunnel(Sink::new(4096), &[REMOTE]),
    );
    let flood2 = Rig::new(
        Source::new(&inner(len, true)),
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
    let src: Arc<dyn Port> = Source::new(&outer);
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
