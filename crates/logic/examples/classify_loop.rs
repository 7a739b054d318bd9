//! Runs one logic's `classify` (`classify_with` and the logic's worker
//! state, as a worker runs it, when the logic has one) on a batch of 256
//! identical 64-byte UDP/IPv4 frames (the fabric bench's `e_logic`
//! traffic and rule sets) a given number of times, for instruction counts that do not depend on
//! the machine's load (this VM has no hardware counters; valgrind counts
//! the instructions):
//!
//! ```text
//! cargo build --release -p logic --example classify_loop
//! valgrind --tool=callgrind --toggle-collect='<logic::*Logic>::classify*' \
//!     target/release/examples/classify_loop flows3 2000
//! ```
//!
//! Instructions per packet = the collected total / (batches * 256).
//! Cases (`testpeers::bench_cases`, the same set-ups as the fabric bench's
//! `e_logic`): `patch`, `bridge`, `l4filter`, `demux`, `flows3` (3 rules),
//! `flows10k` (10^4 rules over 8 masks that the frames miss, then a
//! priority-0 hit), `flows3-nocache`. `examples/fabric_loop.rs` in the
//! fabric crate counts the whole fabric path instead of classify alone.
//! An optional third argument, FLOWS (default 1), hands out the frames of
//! FLOWS concurrent flows in turn, across batches
//! (`bench_cases::flow_frame`: distinct source ports, then addresses;
//! flows interleaved: no two consecutive frames of one flow when
//! FLOWS > 1). `flows10k-src` is `flows10k` with the source address
//! matched too (every varied field in the flows' masks); `flows10k-acl`
//! and `flows10k-acl-high` add 10^4 ACL flows (nw_src/32 + tp_src) below /
//! above the hit flow (`bench_cases::acl_flows`).

use logic::{Ctx, Pkt, Pkts, Verdict};
use testpeers::bench_cases;

const BATCH: usize = 256;

fn main() -> Result<(), String> {
    let mut a = std::env::args().skip(1);
    let case = a.next().ok_or("usage: classify_loop CASE BATCHES")?;
    let batches: u64 = a
        .next()
        .ok_or("usage: classify_loop CASE BATCHES")?
        .parse()
        .map_err(|e| format!("BATCHES: {e}"))?;
    let flows: u32 = match a.next() {
        Some(f) => f.parse().map_err(|e| format!("FLOWS: {e}"))?,
        None => 1,
    };
    if flows == 0 {
        return Err("FLOWS: at least 1".into());
    }
    let l = bench_cases::build(&case)?;
    let mut frames: Vec<Vec<u8>> = (0..flows).map(|i| bench_cases::flow_frame(64, i)).collect();
    let n_frames = frames.len();
    let mut next = 0usize;
    let mut v = vec![Verdict::Flood; BATCH];
    let ctx = Ctx {
        now_ns: 0,
        worker: 0,
    };
    // The worker's state of the logic (`flows`: its caches), made as the
    // switch makes it when it installs the logic; a logic without one is
    // classified with `classify`, as the worker does.
    let mut st = l.worker_state();
    for _ in 0..batches {
        let mut pkts: [Pkt; BATCH] = std::array::from_fn(|_| {
            let f = &mut frames[next];
            next = (next + 1) % n_frames;
            // SAFETY: the frames outlive the views, used only in this call.
            unsafe { Pkt::new(f.as_mut_ptr(), f.len() as u32, 0, 0) }
        });
        let pkts = std::hint::black_box(Pkts::new_mut(&mut pkts));
        let v = std::hint::black_box(&mut v);
        match st.as_deref_mut() {
            Some(st) => l.classify_with(st, &ctx, 0, pkts, v),
            None => l.classify(&ctx, 0, pkts, v),
        }
    }
    if v.iter().any(|v| *v != Verdict::Port(1)) {
        return Err(format!(
            "{case}: not every frame went to port 1: {:?}",
            v[0]
        ));
    }
    println!("{case}: {batches} batches of {BATCH}, {flows} flows");
    Ok(())
}
