//! Instructions per frame of turnoutd's whole per-batch path between two
//! real shared-memory ports, at a batch size you choose: receive a burst
//! from port 0, drop runts, classify (patch logic), forward to port 1
//! (lists, reserve, copy, publish, kick check), release, count — the
//! worker's per-batch steps (crates/fabric/src/worker.rs), with the real
//! backends (memif server ports, or vhost-user backend ports) and their
//! peers (our memif clients, or our vhost-user frontends, the ones
//! turnout-gen uses) in this one process. Each round, the peer of port 0
//! queues exactly BATCH frames, one `step` forwards them, and the peer of
//! port 1 takes them: every batch is BATCH frames, nothing is dropped, and
//! the count does not depend on the machine's load.
//!
//! ```text
//! cargo build --release -p ports --example path_loop
//! valgrind --tool=callgrind --toggle-collect='path_loop::step' \
//!     --callgrind-out-file=/tmp/cg.path target/release/examples/path_loop memif 64 256 2000
//! callgrind_annotate /tmp/cg.path | head -30
//! ```
//!
//! Only `step` is counted (not the peers, not the set-up). Instructions per
//! frame = the collected total / (ROUNDS × BATCH), which the program prints;
//! two batch sizes separate the cost of a frame from the fixed cost of a
//! batch (docs/results/2026-11-29-capacity-per-frame.md). The worker's own loop
//! (epoch, port table and logic loads, clock reads, wake-up policy, its
//! counters) is not in `step`: it is the same for every path, and is
//! counted by scripts/bench/path_cost.py, which runs turnoutd itself.
//!
//! usage: path_loop memif|vhost SIZE BATCH ROUNDS

use std::sync::atomic::Ordering::{Relaxed, Release};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{
    Ctx, DropReason, Forwarder, Logic, OwnedTx, Port, PortEntry, PortTable, RxBatch, RxQueue,
    Verdict,
};

/// One batch through the switch, as a worker does it (worker.rs: the body
/// of the loop over receive queues, and its counters).
#[inline(never)]
fn step(
    rxq: &mut dyn RxQueue,
    table: &PortTable,
    logic: &dyn Logic,
    fwd: &mut Forwarder,
    batch: &mut RxBatch,
    verdicts: &mut [Verdict],
) -> usize {
    let entry = table.get(0).expect("port 0");
    let ctx = Ctx {
        now_ns: 0,
        worker: 0,
    };
    let mut rx = batch.receive(rxq, 0, 0);
    let n = rx.received();
    if n == 0 {
        return 0;
    }
    let (bytes, runts) = rx.bytes_and_runts(fabric::worker::ETH_HDR_B);
    let runts = if runts > 0 {
        rx.retain(|p| p.len() >= fabric::worker::ETH_HDR_B)
    } else {
        0
    };
    let m = rx.len();
    if m > 0 {
        logic.classify(&ctx, 0, rx.pkts_mut(), &mut verdicts[..m]);
        fwd.forward(table, logic, entry, rx.pkts(), &verdicts[..m]);
    }
    drop(rx);
    entry.counters.add_drops(DropReason::Runt, runts as u64);
    let qc = &entry.counters.queues[0];
    fabric::worker::bump(&qc.rx_bytes, bytes);
    qc.rx_packets
        .store(qc.rx_packets.load(Relaxed).wrapping_add(n as u64), Release);
    n
}

fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

struct Rig {
    /// The switch's two ports.
    ports: [Arc<dyn Port>; 2],
    /// Their peers: port 0's sends, port 1's receives.
    peers: [Arc<dyn Port>; 2],
    /// What must live as long as the ports (memif server, temp dir).
    _keep: Vec<Box<dyn std::any::Any>>,
}

fn wait_up(ps: &[&Arc<dyn Port>]) -> Result<(), String> {
    let t0 = Instant::now();
    while !ps.iter().all(|p| p.link_up()) {
        if t0.elapsed() > Duration::from_secs(20) {
            return Err("the peers did not come up within 20 s".into());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Ok(())
}

struct TmpDir(std::path::PathBuf);
impl Drop for TmpDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn rig(kind: &str, size: usize, ring: u32) -> Result<Rig, String> {
    let dir = std::env::temp_dir().join(format!("path-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
    let tmp = TmpDir(dir.clone());
    match kind {
        "memif" => {
            use ports::memif::{ClientConfig, MemifConfig, MemifPort, MemifServer, ServerConfig};
            let sock = dir.join("m.sock");
            let srv = MemifServer::bind(ServerConfig::new(&sock)).map_err(|e| e.to_string())?;
            let a: Arc<dyn Port> = Arc::new(
                srv.add_interface(MemifConfig::new("a", 0))
                    .map_err(|e| e.to_string())?,
            );
            let b: Arc<dyn Port> = Arc::new(
                srv.add_interface(MemifConfig::new("b", 1))
                    .map_err(|e| e.to_string())?,
            );
            let client = |name: &str, id| -> Result<Arc<dyn Port>, String> {
                let mut c = MemifConfig::new(name, id);
                c.log2_ring_size = ring.trailing_zeros().min(14) as u8;
                Ok(Arc::new(
                    MemifPort::client(c, ClientConfig::new(&sock)).map_err(|e| e.to_string())?,
                ))
            };
            let (pa, pb) = (client("pa", 0)?, client("pb", 1)?);
            wait_up(&[&a, &b, &pa, &pb])?;
            Ok(Rig {
                ports: [a, b],
                peers: [pa, pb],
                _keep: vec![Box::new(srv), Box::new(tmp)],
            })
        }
        "vhost" => {
            use ports::vhost_user::frontend::{FrontendConfig, VhostFrontendPort};
            use ports::vhost_user::{VhostUserConfig, VhostUserPort};
            let backend = |name: &str| -> Result<Arc<dyn Port>, String> {
                let mut c = VhostUserConfig::new(dir.join(format!("{name}.sock")));
                // what the bench gives turnoutd's vhost-user ports
                c.max_frame_b = 9000;
                Ok(Arc::new(
                    VhostUserPort::new(name, c).map_err(|e| e.to_string())?,
                ))
            };
            let (a, b) = (backend("a")?, backend("b")?);
            let front = |name: &str, of: &str| -> Result<Arc<dyn Port>, String> {
                let mut c = FrontendConfig::new(dir.join(format!("{of}.sock")));
                c.queue_size = ring.min(32768) as u16;
                // turnout-gen's defaults: 9000 B frames (mergeable 2 KiB
                // receive buffers), transmit buffers sized to the traffic
                c.max_frame_b = 9000;
                c.tx_frame_b = Some(size);
                Ok(Arc::new(
                    VhostFrontendPort::new(name, c).map_err(|e| e.to_string())?,
                ))
            };
            let (pa, pb) = (front("pa", "a")?, front("pb", "b")?);
            wait_up(&[&a, &b, &pa, &pb])?;
            Ok(Rig {
                ports: [a, b],
                peers: [pa, pb],
                _keep: vec![Box::new(tmp)],
            })
        }
        _ => Err(format!("unknown kind {kind} (memif | vhost)")),
    }
}

fn main() -> Result<(), String> {
    let usage = "usage: path_loop memif|vhost SIZE BATCH ROUNDS";
    let a: Vec<String> = std::env::args().skip(1).collect();
    if a.len() != 4 {
        return Err(usage.into());
    }
    let num = |s: &str, what: &str| -> Result<usize, String> {
        s.parse().map_err(|e| format!("{what}: {e} ({usage})"))
    };
    let (kind, size, bsize, rounds) = (
        a[0].as_str(),
        num(&a[1], "SIZE")?,
        num(&a[2], "BATCH")?,
        num(&a[3], "ROUNDS")?,
    );
    if !(64..=9000).contains(&size) || !(1..=fabric::batch::MAX_BATCH).contains(&bsize) {
        return Err(format!("SIZE 64..=9000, BATCH 1..=1024 ({usage})"));
    }
    // rings of at least twice the batch, as the bench's 1024
    let ring = (2 * bsize).next_power_of_two().max(1024) as u32;
    let r = rig(kind, size, ring)?;
    let mut table = PortTable::new(2);
    for (i, p) in r.ports.iter().enumerate() {
        table = table.with(Arc::new(PortEntry::new(
            i as u16,
            format!("p{i}"),
            p.clone(),
        )));
    }
    let logic = logic::build("patch", &serde_json::json!({"pairs": [[0, 1]]}))
        .map_err(|e| e.to_string())?;
    let mut fwd = Forwarder::new(0, 2, bsize);
    let mut batch = RxBatch::with_capacity(bsize);
    let mut verdicts = vec![Verdict::Flood; bsize];
    let mut rxq = r.ports[0].take_rx(0).ok_or("port 0 rx")?;
    let mut peer_rx = r.peers[1].take_rx(0).ok_or("peer 1 rx")?;
    // SAFETY: this thread is the only sender on the peer's queue.
    let mut tx = unsafe { OwnedTx::new(r.peers[0].tx(0)) };
    let mut peer_batch = RxBatch::with_capacity(fabric::batch::MAX_BATCH);
    let f = frame(size);
    let k = tx.slots_for(size);
    let (mut fwd_frames, mut got) = (0u64, 0u64);
    for round in 0..rounds {
        // the peer queues exactly one batch
        let t0 = Instant::now();
        while tx.free_slots() < bsize as u32 * k {
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!("round {round}: the ring never had room"));
            }
        }
        let first = tx.reserve(bsize as u32 * k);
        for i in 0..bsize as u64 {
            tx.write(first + i * k as u64, k, &f);
        }
        tx.publish(first + bsize as u64 * k as u64);
        let n = step(
            &mut *rxq,
            &table,
            logic.as_ref(),
            &mut fwd,
            &mut batch,
            &mut verdicts,
        );
        if n != bsize {
            return Err(format!("round {round}: a burst of {n} frames, not {bsize}"));
        }
        fwd_frames += n as u64;
        // the other peer takes them (and gives its buffers back)
        let mut left = bsize;
        let t0 = Instant::now();
        while left > 0 {
            let b = peer_batch.receive(&mut *peer_rx, 1, 0);
            left = left.saturating_sub(b.received());
            got += b.received() as u64;
            drop(b);
            if t0.elapsed() > Duration::from_secs(10) {
                return Err(format!("round {round}: {left} frames never arrived"));
            }
        }
    }
    let e1 = table.get(1).expect("port 1");
    let drops = e1.counters.total_drops();
    if got != fwd_frames || drops != 0 {
        return Err(format!(
            "forwarded {fwd_frames}, the peer received {got}, port 1 dropped {drops}"
        ));
    }
    println!(
        "{kind} {size} B: {rounds} batches of {bsize}: {fwd_frames} frames \
         (instructions per frame = collected Ir / {fwd_frames})"
    );
    Ok(())
}
