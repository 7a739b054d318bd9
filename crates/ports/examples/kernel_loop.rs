//! Forwards frames between two kernel interfaces through the port trait, on
//! one busy-polling thread: a minimal p2p switch to measure the AF_XDP and
//! AF_PACKET backends against the bare veth and a Linux bridge.
//!
//! ```text
//! kernel_loop --type af_xdp|af_packet|tap --a IF --b IF [--duration-s N]
//!             [--batch N] [--queues N] [--attach auto|native|generic]
//! ```
//!
//! Every frame received on A is sent to B and vice versa (queue i → queue
//! i). At the end it prints one JSON line: frames received and forwarded per
//! direction, drops by reason (tx_full, oversize, link_down), the rate and
//! both ports' backend counters.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue};
use ports::af_packet::{AfPacketConfig, AfPacketPort};
use ports::af_xdp::{AfXdpConfig, AfXdpPort, XdpAttach};
use ports::tap::{TapConfig, TapPort};

struct Args {
    kind: String,
    a: String,
    b: String,
    duration_s: f64,
    batch: usize,
    queues: u16,
    attach: XdpAttach,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        kind: "af_xdp".into(),
        a: String::new(),
        b: String::new(),
        duration_s: 10.0,
        batch: 256,
        queues: 1,
        attach: XdpAttach::Auto,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--type" => a.kind = v()?,
            "--a" => a.a = v()?,
            "--b" => a.b = v()?,
            "--duration-s" => {
                a.duration_s = v()?.parse().map_err(|e| format!("--duration-s: {e}"))?
            }
            "--batch" => a.batch = v()?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--queues" => a.queues = v()?.parse().map_err(|e| format!("--queues: {e}"))?,
            "--attach" => {
                a.attach = match v()?.as_str() {
                    "auto" => XdpAttach::Auto,
                    "native" => XdpAttach::Native,
                    "generic" => XdpAttach::Generic,
                    o => return Err(format!("--attach: unknown mode {o}")),
                }
            }
            "-h" | "--help" => return Err(
                "usage: kernel_loop --type af_xdp|af_packet|tap --a IF --b IF [--duration-s N] \
                     [--batch N] [--queues N] [--attach auto|native|generic]"
                    .into(),
            ),
            o => return Err(format!("unknown argument {o}")),
        }
    }
    if a.a.is_empty() || a.b.is_empty() {
        return Err("--a and --b are required".into());
    }
    Ok(a)
}

fn open(args: &Args, name: &str, ifname: &str) -> Result<Arc<dyn Port>, String> {
    use ports::PortKind;
    let kinds = [PortKind::AfXdp, PortKind::AfPacket, PortKind::Tap];
    let kind = PortKind::parse_among(&args.kind, &kinds).map_err(|e| format!("--type: {e}"))?;
    let r: Arc<dyn Port> = match kind {
        PortKind::AfXdp => {
            let mut c = AfXdpConfig::new(ifname);
            c.queues = args.queues;
            c.attach = args.attach;
            Arc::new(AfXdpPort::open(name, c).map_err(|e| e.to_string())?)
        }
        PortKind::AfPacket => {
            let mut c = AfPacketConfig::new(ifname);
            c.queues = args.queues;
            Arc::new(AfPacketPort::open(name, c).map_err(|e| e.to_string())?)
        }
        PortKind::Tap => {
            let mut c = TapConfig::new(ifname);
            c.queues = args.queues;
            Arc::new(TapPort::open(name, c).map_err(|e| e.to_string())?)
        }
        o => return Err(format!("--type: {o} is not a kernel port")),
    };
    Ok(r)
}

/// A receive queue, where its frames go (port, queue) and the direction.
type LoopQueue = (Box<dyn RxQueue>, Arc<dyn Port>, u16, usize);

#[derive(Default, Clone, Copy)]
struct Dir {
    rx: u64,
    fwd: u64,
    tx_full: u64,
    oversize: u64,
    link_down: u64,
}

fn forward(pkts: &fabric::Pkts, dst: &dyn Port, q: u16, d: &mut Dir) {
    d.rx += pkts.len() as u64;
    if !dst.link_up() {
        d.link_down += pkts.len() as u64;
        return;
    }
    // SAFETY: this thread is the only user of every transmit queue, so the
    // fabric's lock protocol holds trivially; each reserved slot is written
    // once before the publish that covers it.
    let mut tx = unsafe { fabric::OwnedTx::new(dst.tx(q)) };
    let mut free = tx.free_slots();
    let mut tail = None;
    for p in pkts.iter() {
        let n = tx.slots_for(p.len());
        if n == 0 {
            d.oversize += 1;
            continue;
        }
        if n > free {
            d.tx_full += 1;
            continue;
        }
        free -= n;
        let s = tx.reserve(n);
        tx.write(s, n, p.data());
        tail = Some(s + n as u64);
        d.fwd += 1;
    }
    if let Some(t) = tail {
        tx.publish(t);
    }
}

fn counters_json(p: &dyn Port) -> String {
    let items: Vec<String> = p
        .backend_counters()
        .iter()
        .map(|(k, v)| format!("\"{k}\":{v}"))
        .collect();
    format!("{{{}}}", items.join(","))
}

fn main() {
    let args = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("kernel_loop: {e}");
            std::process::exit(2);
        }
    };
    let (pa, pb) = match (open(&args, "a", &args.a), open(&args, "b", &args.b)) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("kernel_loop: {e}");
            std::process::exit(1);
        }
    };
    let stop = Arc::new(AtomicBool::new(false));
    {
        let stop = stop.clone();
        let d = Duration::from_secs_f64(args.duration_s);
        std::thread::spawn(move || {
            std::thread::sleep(d);
            stop.store(true, Ordering::Relaxed);
        });
    }
    let mut queues: Vec<LoopQueue> = Vec::new();
    for (src, dst, dir) in [(&pa, &pb, 0usize), (&pb, &pa, 1usize)] {
        for q in 0..args.queues {
            let rx = src.take_rx(q).expect("fresh port hands out its queues");
            queues.push((rx, dst.clone(), q, dir));
        }
    }
    let mut batch = RxBatch::with_capacity(args.batch);
    let mut dirs = [Dir::default(); 2];
    let start = Instant::now();
    let mut polls = 0u64;
    while !stop.load(Ordering::Relaxed) {
        for (rx, dst, q, dir) in queues.iter_mut() {
            let b = batch.receive(&mut **rx, 0, 0);
            if b.received() > 0 {
                forward(b.pkts(), &**dst, *q, &mut dirs[*dir]);
            }
        }
        polls += 1;
    }
    let secs = start.elapsed().as_secs_f64();
    let dj = |d: &Dir| {
        format!(
            "{{\"rx\":{},\"forwarded\":{},\"tx_full\":{},\"oversize\":{},\"link_down\":{},\"rate_mpps\":{:.4}}}",
            d.rx,
            d.fwd,
            d.tx_full,
            d.oversize,
            d.link_down,
            d.fwd as f64 / secs / 1e6
        )
    };
    println!(
        "{{\"type\":\"{}\",\"duration_s\":{:.3},\"polls\":{},\"a_to_b\":{},\"b_to_a\":{},\"a\":{},\"b\":{}}}",
        args.kind,
        secs,
        polls,
        dj(&dirs[0]),
        dj(&dirs[1]),
        counters_json(&*pa),
        counters_json(&*pb)
    );
}
