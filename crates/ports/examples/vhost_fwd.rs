//! A two-port forwarding harness over vhost-user: a `fabric::Switch` with
//! two vhost-user ports cross-connected by a patch logic (port 0 <-> port
//! 1). Used by the testpmd tests and the v2v benchmark.
//!
//! ```text
//! cargo run --release -p ports --example vhost_fwd -- \
//!     --sock /tmp/a.sock --sock /tmp/b.sock [--client] [--cpu 1] \
//!     [--duration-s 10] [--poll] [--max-frame-b 1518]
//! ```
//!
//! Prints one JSON line per second with each port's counters, and a final
//! line (`"final": true`) on exit (after `--duration-s`, or when stdin
//! closes if no duration is given).

use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Ctx, Logic, Pkts, PortId, Switch, SwitchConfig, Verdict, WakeupMode};
use ports::vhost_user::{Mode, VhostUserConfig, VhostUserPort};

/// Port 0 <-> port 1.
struct Patch;

impl Logic for Patch {
    fn name(&self) -> &'static str {
        "patch"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let out = Verdict::Port(if ingress == 0 { 1 } else { 0 });
        for v in verdicts.iter_mut().take(pkts.len()) {
            *v = out;
        }
    }
}

fn main() {
    let mut socks = Vec::new();
    let mut mode = Mode::Server;
    let mut cpu = None;
    let mut duration_s: Option<f64> = None;
    let mut wakeup = WakeupMode::Adaptive;
    let mut max_frame_b = 1518usize;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--sock" => socks.push(args.next().expect("--sock PATH")),
            "--client" => mode = Mode::Client,
            "--cpu" => {
                cpu = Some(
                    args.next()
                        .expect("--cpu N")
                        .parse::<usize>()
                        .expect("cpu number"),
                )
            }
            "--duration-s" => {
                duration_s = Some(
                    args.next()
                        .expect("--duration-s S")
                        .parse()
                        .expect("seconds"),
                )
            }
            "--poll" => wakeup = WakeupMode::Poll,
            "--max-frame-b" => {
                max_frame_b = args
                    .next()
                    .expect("--max-frame-b N")
                    .parse()
                    .expect("bytes")
            }
            other => {
                eprintln!("vhost_fwd: unknown argument {other:?}");
                std::process::exit(2);
            }
        }
    }
    if socks.len() != 2 {
        eprintln!("vhost_fwd: give exactly two --sock PATH");
        std::process::exit(2);
    }
    let cfg = SwitchConfig {
        workers: vec![cpu],
        wakeup,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, Box::new(Patch)).unwrap_or_else(|e| {
        eprintln!("vhost_fwd: {e}");
        std::process::exit(1)
    });
    let mut ports = Vec::new();
    for (i, s) in socks.iter().enumerate() {
        let mut c = VhostUserConfig::new(s);
        c.mode = mode;
        c.max_frame_b = max_frame_b;
        let p = Arc::new(
            VhostUserPort::new(&format!("vu{i}"), c).unwrap_or_else(|e| {
                eprintln!("vhost_fwd: {e}");
                std::process::exit(1)
            }),
        );
        sw.add_port(&format!("vu{i}"), p.clone(), Some(0))
            .expect("add port");
        ports.push(p);
    }
    println!("{{\"ready\": true}}");

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    if duration_s.is_none() {
        let st = stop.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 64];
            while let Ok(n) = std::io::stdin().read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
            st.store(true, std::sync::atomic::Ordering::Relaxed);
        });
    }
    let t0 = Instant::now();
    let mut next = t0 + Duration::from_secs(1);
    loop {
        let done = stop.load(std::sync::atomic::Ordering::Relaxed)
            || duration_s.is_some_and(|d| t0.elapsed().as_secs_f64() >= d);
        if done || Instant::now() >= next {
            print_stats(&sw, t0, done);
            next += Duration::from_secs(1);
        }
        if done {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(ports);
    sw.shutdown();
}

fn print_stats(sw: &Switch, t0: Instant, fin: bool) {
    let mut line = format!(
        "{{\"t_s\": {:.3}, \"final\": {fin}, \"ports\": [",
        t0.elapsed().as_secs_f64()
    );
    for (i, p) in sw.port_stats().iter().enumerate() {
        if i > 0 {
            line.push_str(", ");
        }
        line.push_str(&format!(
            "{{\"name\": \"{}\", \"link\": {}, \"rx\": {}, \"tx\": {}, \"drops\": {{{}}}, \"backend\": {{{}}}}}",
            p.name,
            p.link_up,
            p.rx_packets,
            p.tx_packets,
            p.drops.iter().map(|(n, v)| format!("\"{n}\": {v}")).collect::<Vec<_>>().join(", "),
            p.backend.iter().filter(|(_, v)| *v != 0).map(|(n, v)| format!("\"{n}\": {v}")).collect::<Vec<_>>().join(", "),
        ));
    }
    let w = sw.worker_stats();
    let cpp = w.first().map_or(0.0, |w| w.cycles_per_packet);
    line.push_str(&format!("], \"cycles_per_packet\": {cpp:.1}}}"));
    println!("{line}");
}
