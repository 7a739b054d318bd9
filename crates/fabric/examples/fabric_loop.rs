//! Runs the fabric bench's `e_logic` set-up (the same rig, logics, rule
//! sets and frames as `benches/fabric.rs`) for a given number of batches
//! of 256 64-byte UDP frames: receive from a synthetic source, classify,
//! forward (lists, reserve, copy into a sink ring, publish, counters). For
//! instruction counts of the WHOLE fabric path per packet that do not
//! depend on the machine's load (this VM has no hardware counters):
//!
//! ```text
//! cargo build --release -p fabric --example fabric_loop
//! valgrind --tool=callgrind --toggle-collect='fabric_loop::run' \
//!     --callgrind-out-file=/tmp/cg.flows3 \
//!     target/release/examples/fabric_loop flows3 2000
//! callgrind_annotate /tmp/cg.flows3 | head -30
//! ```
//!
//! Only `run` (the batches, not the set-up) is counted. Instructions per
//! packet = the collected total / (batches * 256); callgrind_annotate
//! splits them by function. The program prints the count to divide by.
//! Cases: those of `testpeers::bench_cases` (`patch`, `bridge`, `l4filter`,
//! `demux`, `flows3`, `flows3-nocache`, `flows10k`, `flows10k-src`,
//! `flows10k-acl`, `flows10k-acl-high`). An
//! optional third argument, FLOWS (default 1), makes the source hand out
//! the frames of FLOWS concurrent flows in turn (flows interleaved;
//! `bench_cases::flow_frame`: distinct source ports, then addresses).

use fabric::Logic;
use testpeers::bench_cases;

#[allow(dead_code)] // the bench uses more of the rig than this
#[path = "../benches/rig/mod.rs"]
mod rig;

const BATCH: usize = 256;

/// The measured part: `batches` batches through the fabric.
#[inline(never)]
fn run(r: &mut rig::Rig, l: &dyn Logic, batches: u64) -> u64 {
    let mut sent = 0;
    for _ in 0..batches {
        sent += r.step(std::hint::black_box(l));
    }
    sent
}

fn main() -> Result<(), String> {
    let usage = "usage: fabric_loop CASE BATCHES [FLOWS]";
    let mut a = std::env::args().skip(1);
    let case = a.next().ok_or(usage)?;
    let batches: u64 = a
        .next()
        .ok_or(usage)?
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
    let frames: Vec<Vec<u8>> = (0..flows).map(|i| bench_cases::flow_frame(64, i)).collect();
    let mut r = rig::rig_with_frames(&frames, BATCH, 2, 0);
    // The worker's state of the logic (its caches), made as the switch
    // makes it when it installs the logic: before the measured part.
    r.state_of(l.as_ref());
    let sent = run(&mut r, l.as_ref(), batches);
    let want = batches * BATCH as u64;
    if sent != want {
        return Err(format!(
            "{case}: {sent} of {want} frames reached port 1 (the case must forward all)"
        ));
    }
    println!(
        "{case}: {batches} batches of {BATCH}, {flows} flows: {want} packets \
         (instructions per packet = collected Ir / {want})"
    );
    Ok(())
}
