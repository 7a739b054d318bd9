//! Rule-update time under traffic ("Hard or hopeless" §3.5,
//! docs/references.md; CSIT's "reconf"): how
//! long until N new `l4filter` or `demux` entries are in effect while
//! traffic flows, for N = 1, 100, 10 000.
//!
//! A running switch (one worker, adaptive wake-up) has three pipe ports:
//! 0 = traffic source, 1 = where unmatched traffic goes (demux's default
//! port; l4filter drops it as no_match), 2 = where the new entries send.
//! A sender thread sends, without pause, UDP frames to the destination
//! port of the *last* entry to be added. At t0 the control side adds the N
//! entries — as one command (one snapshot swap) and as N single commands —
//! and the time is taken until the first frame reaches port 2: every entry
//! is then in effect, since entries are applied in order. Reported: the
//! command time (control side) and the time to effect, median and range
//! of 7 repetitions; the resolution is the 20 µs polling sleep of the
//! measuring thread plus the sender's frame interval.
//!
//! Run: `cargo bench -p fabric --bench rule_update`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{pipe, PipeConfig, Switch, SwitchConfig, WakeupMode};
use serde_json::{json, Value};
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::mac::MacAddr;

const BASE_PORT: u16 = 20_000;
const REPS: usize = 7;

fn frame(dst_port: u16) -> Vec<u8> {
    let spec = UdpFrameSpec::new(
        MacAddr([0x02, 0, 0, 0, 0, 0x01]),
        MacAddr([0x02, 0, 0, 0, 0, 0x02]),
        IpPair::V4("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap()),
        1234,
        dst_port,
    );
    let mut f = vec![0u8; 64];
    write_udp_frame(&spec, &mut f, 64).unwrap();
    f
}

fn entry(logic: &str, i: usize) -> Value {
    let port = BASE_PORT as usize + i;
    match logic {
        "l4filter" => json!({"proto": "udp", "port": port, "to": 2}),
        _ => json!({"proto": "udp", "ip": "10.0.0.2", "port": port, "to": 2}),
    }
}

fn config(logic: &str) -> Value {
    match logic {
        // One unrelated rule so the table is not empty.
        "l4filter" => json!({"rules": [{"proto": "udp", "port": 9, "to": 1}]}),
        _ => json!({"default": 1, "uplink": 0, "entries": []}),
    }
}

/// One measurement: (command time, time to effect).
fn once(logic: &str, n: usize, bulk: bool) -> (Duration, Duration) {
    let cfg = SwitchConfig {
        batch: 64,
        max_ports: 8,
        workers: vec![None],
        wakeup: WakeupMode::Adaptive,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, logic::build(logic, &config(logic)).unwrap()).unwrap();
    let (p0, mut src) = pipe("src", PipeConfig::default()).unwrap();
    let (p1, mut other) = pipe("other", PipeConfig::default()).unwrap();
    let (p2, mut target) = pipe("target", PipeConfig::default()).unwrap();
    sw.add_port("src", Arc::new(p0), None).unwrap();
    sw.add_port("other", Arc::new(p1), None).unwrap();
    sw.add_port("target", Arc::new(p2), None).unwrap();

    // Traffic for the last entry, flowing before, during and after.
    let f = frame(BASE_PORT + n as u16 - 1);
    let stop = Arc::new(AtomicBool::new(false));
    let s2 = stop.clone();
    let sender = std::thread::spawn(move || {
        while !s2.load(Ordering::Relaxed) {
            if src.send(0, &[f.as_slice(); 32]) == 0 {
                std::thread::yield_now();
            }
            other.recv(0, usize::MAX, |_| {});
        }
    });
    // Let traffic settle: nothing reaches the target yet.
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(
        target.recv(0, usize::MAX, |_| {}),
        0,
        "target got traffic before the entries existed"
    );

    let entries: Vec<Value> = (0..n).map(|i| entry(logic, i)).collect();
    let key = if logic == "l4filter" {
        "rules"
    } else {
        "entries"
    };
    let t0 = Instant::now();
    if bulk {
        sw.with_logic(|l| l.command("add", &json!({ key: entries })))
            .unwrap();
    } else {
        for e in &entries {
            sw.with_logic(|l| l.command("add", e)).unwrap();
        }
    }
    let t_cmd = t0.elapsed();
    let deadline = t0 + Duration::from_secs(10);
    // Poll with short sleeps: a third spinning thread (next to the worker
    // and the sender) on a 2-core machine would measure time slices.
    while target.recv(0, usize::MAX, |_| {}) == 0 {
        assert!(
            Instant::now() < deadline,
            "{logic}: entries never took effect"
        );
        std::thread::sleep(Duration::from_micros(20));
    }
    let t_eff = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    sender.join().unwrap();
    sw.shutdown();
    (t_cmd, t_eff)
}

fn us(d: Duration) -> f64 {
    d.as_secs_f64() * 1e6
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs a smoke pass.
    let quick = !std::env::args().any(|a| a == "--bench");
    let ns: &[usize] = if quick { &[1, 100] } else { &[1, 100, 10_000] };
    let reps = if quick { 1 } else { REPS };
    println!("rule-update time under traffic (µs; median [min-max] of {reps})");
    println!(
        "{:<9} {:>6} {:<6} {:>24} {:>24}",
        "logic", "N", "mode", "command", "in effect"
    );
    for logic in ["l4filter", "demux"] {
        for &n in ns {
            for bulk in [true, false] {
                let mut cmd = Vec::new();
                let mut eff = Vec::new();
                for _ in 0..reps {
                    let (c, e) = once(logic, n, bulk);
                    cmd.push(us(c));
                    eff.push(us(e));
                }
                let fmt = |v: &mut Vec<f64>| {
                    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
                    format!("{:.1} [{:.1}-{:.1}]", v[v.len() / 2], v[0], v[v.len() - 1])
                };
                println!(
                    "{logic:<9} {n:>6} {:<6} {:>24} {:>24}",
                    if bulk { "bulk" } else { "single" },
                    fmt(&mut cmd),
                    fmt(&mut eff)
                );
            }
        }
    }
}
