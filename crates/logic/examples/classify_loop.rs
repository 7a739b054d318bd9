//! Runs one logic's `classify` on a batch of 256 identical 64-byte
//! UDP/IPv4 frames (the fabric bench's `e_logic` traffic and rule sets)
//! a given number of times, for instruction counts that do not depend on
//! the machine's load (this VM has no hardware counters; valgrind counts
//! the instructions):
//!
//! ```text
//! cargo build --release -p logic --example classify_loop
//! valgrind --tool=callgrind --toggle-collect='*Logic*classify*' \
//!     target/release/examples/classify_loop flows3 2000
//! ```
//!
//! Instructions per packet = the collected total / (batches * 256).
//! Cases: `patch`, `flows3` (3 rules), `flows10k` (10^4 rules over 8
//! masks that the frames miss, then a priority-0 hit), `flows3-nocache`.
//! An optional third argument, FLOWS (default 1), gives the frames of a
//! batch FLOWS distinct source ports in turn (flows interleaved: no two
//! consecutive frames of one flow when FLOWS > 1).

use logic::{Ctx, Logic, Pkt, Pkts, Verdict};
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::MacAddr;

const BATCH: usize = 256;

fn build(case: &str) -> Result<Box<dyn Logic>, String> {
    let few = serde_json::json!([
        "priority=10,in_port=0,udp,nw_dst=10.0.0.2,actions=output:1",
        "priority=10,in_port=1,actions=output:0",
        "priority=0,actions=drop",
    ]);
    let cfg = match case {
        "patch" => {
            return logic::build("patch", &serde_json::json!({"pairs": [[0, 1]]}))
                .map_err(|e| e.to_string())
        }
        "flows3" => serde_json::json!({ "flows": few }),
        "flows3-nocache" => serde_json::json!({ "flows": few, "cache": 0 }),
        "flows10k" => {
            let mut many: Vec<String> = (0..10_000u32)
                .map(|i| {
                    format!(
                        "priority={},udp,nw_dst=10.0.0.2/{},tp_src={},actions=output:2",
                        1 + i % 1000,
                        17 + i % 8,
                        2000 + i / 8
                    )
                })
                .collect();
            many.push("priority=0,udp,actions=output:1".into());
            serde_json::json!({ "flows": many })
        }
        _ => return Err(format!("unknown case {case:?}")),
    };
    logic::build("flows", &cfg).map_err(|e| e.to_string())
}

fn main() -> Result<(), String> {
    let mut a = std::env::args().skip(1);
    let case = a.next().ok_or("usage: classify_loop CASE BATCHES")?;
    let batches: u64 = a
        .next()
        .ok_or("usage: classify_loop CASE BATCHES")?
        .parse()
        .map_err(|e| format!("BATCHES: {e}"))?;
    let flows: u16 = match a.next() {
        Some(f) => f.parse().map_err(|e| format!("FLOWS: {e}"))?,
        None => 1,
    };
    if flows == 0 {
        return Err("FLOWS: at least 1".into());
    }
    let l = build(&case)?;
    let spec = UdpFrameSpec::new(
        MacAddr([0x02, 0, 0, 0, 0, 0x01]),
        MacAddr([0x02, 0, 0, 0, 0, 0x02]),
        IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
        1234,
        5001,
    );
    let mut frames: Vec<Vec<u8>> = (0..BATCH)
        .map(|_| {
            let mut f = vec![0u8; 64];
            write_udp_frame(&spec, &mut f, 64).map(|_| f)
        })
        .collect::<Result<_, _>>()
        .map_err(|e| format!("frame: {e:?}"))?;
    for (i, f) in frames.iter_mut().enumerate() {
        let port = 1234 + (i as u16 % flows);
        f[34..36].copy_from_slice(&port.to_be_bytes());
    }
    let mut v = vec![Verdict::Flood; BATCH];
    let ctx = Ctx {
        now_ns: 0,
        worker: 0,
    };
    for _ in 0..batches {
        let mut pkts: [Pkt; BATCH] = std::array::from_fn(|i| {
            let f = &mut frames[i];
            // SAFETY: the frames outlive the views, used only in this call.
            unsafe { Pkt::new(f.as_mut_ptr(), f.len() as u32, 0, 0) }
        });
        l.classify(
            &ctx,
            0,
            std::hint::black_box(Pkts::new_mut(&mut pkts)),
            std::hint::black_box(&mut v),
        );
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
