//! The worker loop itself (`fabric::worker::run`: receive, classify,
//! forward, release, counters, the wake-up policy's bookkeeping) for
//! instruction counts per frame that do not depend on the machine's load:
//! a switch with one worker and two pipe ports, the `patch` logic (port 0
//! to port 1). Port 0's ring is filled with FRAMES 64-byte frames *before*
//! the port is added, and port 1's ring holds them all, so the worker
//! forwards them in full batches without one empty poll in between; the
//! program stops the switch once port 1 has them all.
//!
//! ```text
//! cargo build --release -p fabric --example worker_loop
//! valgrind --tool=callgrind --toggle-collect='fabric::worker::run' \
//!     --callgrind-out-file=/tmp/cg.worker \
//!     target/release/examples/worker_loop adaptive 1048576
//! callgrind_annotate /tmp/cg.worker | head -30
//! ```
//!
//! Instructions per frame = the collected total / FRAMES (the worker's
//! start, its empty polls before the port is added and after the last
//! frame, and its prober are a few thousand instructions in all: under
//! 0.01 per frame at 2^20 frames). MODE is `adaptive` (the default wake-up
//! policy) or `poll`; BATCH (default 256, the switch's default) is the
//! worker's batch size: two sizes split the loop's cost per pass from its
//! cost per frame (Ir/frame = per_frame + per_pass / BATCH).

use std::time::{Duration, Instant};

use fabric::{pipe, PipeConfig, Switch, SwitchConfig, WakeupMode};
use testpeers::bench_cases;

fn main() -> Result<(), String> {
    let usage = "usage: worker_loop adaptive|poll FRAMES [BATCH]";
    let mut a = std::env::args().skip(1);
    let wakeup = match a.next().as_deref() {
        Some("adaptive") => WakeupMode::Adaptive,
        Some("poll") => WakeupMode::Poll,
        _ => return Err(usage.into()),
    };
    let frames: usize = a
        .next()
        .ok_or(usage)?
        .parse()
        .map_err(|e| format!("FRAMES: {e}"))?;
    let batch: usize = match a.next() {
        Some(b) => b.parse().map_err(|e| format!("BATCH: {e}"))?,
        None => SwitchConfig::default().batch,
    };
    let cfg = PipeConfig {
        queues: 1,
        ring_slots: frames.next_power_of_two(),
        slot_b: 64,
    };
    let (p0, mut peer0) = pipe("p0", cfg).map_err(|e| e.to_string())?;
    let (p1, peer1) = pipe("p1", cfg).map_err(|e| e.to_string())?;
    let frame = bench_cases::flow_frame(64, 0);
    let mut sent = 0;
    while sent < frames {
        let n = peer0.send(0, &vec![&frame[..]; (frames - sent).min(256)]);
        if n == 0 {
            return Err("port 0's ring is full".into());
        }
        sent += n;
    }
    let sw = Switch::new(
        SwitchConfig {
            wakeup,
            batch,
            ..Default::default()
        },
        bench_cases::build("patch")?,
    )
    .map_err(|e| e.to_string())?;
    // Port 1 first: every frame forwarded finds its destination.
    sw.add_port("p1", std::sync::Arc::new(p1), None)
        .map_err(|e| e.to_string())?;
    sw.add_port("p0", std::sync::Arc::new(p0), None)
        .map_err(|e| e.to_string())?;
    let deadline = Instant::now() + Duration::from_secs(600);
    while peer1.pending(0) < frames {
        if Instant::now() > deadline {
            return Err(format!(
                "{} of {frames} frames reached port 1",
                peer1.pending(0)
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    sw.shutdown();
    println!(
        "{frames} frames forwarded ({wakeup:?}, batches of {batch}): instructions per frame = collected Ir / {frames}"
    );
    Ok(())
}
