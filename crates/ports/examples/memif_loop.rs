//! Serves two memif interfaces (ids 0 and 1) on one socket and forwards
//! frames between them through the `fabric::Port` trait: whatever arrives on
//! one is sent on the other. One thread, busy polling.
//!
//! ```text
//! cargo run --release -p ports --example memif_loop -- --socket /tmp/loop.sock --duration-s 10
//! ```
//! Then connect two memif clients (e.g. DPDK testpmd `--vdev=net_memif0,
//! role=client,socket=/tmp/loop.sock,socket-abstract=no,id=0` and another
//! with `id=1`). Prints one line per second and a summary at the end.

use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue};
use ports::memif::{MemifConfig, MemifServer, ServerConfig};

struct Args {
    socket: String,
    duration_s: f64,
    buffer_size: u32,
    batch: usize,
    quiet: bool,
}

fn parse() -> Result<Args, String> {
    let mut a = Args {
        socket: String::new(),
        duration_s: 10.0,
        buffer_size: 2048,
        batch: 256,
        quiet: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut v = || it.next().ok_or(format!("{k} needs a value"));
        match k.as_str() {
            "--socket" => a.socket = v()?,
            "--duration-s" => {
                a.duration_s = v()?.parse().map_err(|e| format!("--duration-s: {e}"))?
            }
            "--buffer-size" => {
                a.buffer_size = v()?.parse().map_err(|e| format!("--buffer-size: {e}"))?
            }
            "--batch" => a.batch = v()?.parse().map_err(|e| format!("--batch: {e}"))?,
            "--quiet" => a.quiet = true,
            _ => return Err(format!("unknown argument {k}")),
        }
    }
    if a.socket.is_empty() {
        return Err("--socket PATH is required".into());
    }
    Ok(a)
}

/// Forwards one burst from `rx` to `dst`, fabric style: reserve, write,
/// one publish. Returns (received, sent).
fn forward(rx: &mut dyn RxQueue, dst: &dyn Port, b: &mut RxBatch) -> (u64, u64) {
    let b = b.receive(rx, 0, 0);
    let n = b.received();
    if n == 0 {
        return (0, 0);
    }
    let mut sent = 0;
    if dst.link_up() {
        // SAFETY: this thread is the only user of dst's transmit queue, so
        // it trivially holds the fabric lock and owns its reservations.
        let mut tx = unsafe { fabric::OwnedTx::new(dst.tx(0)) };
        let mut free = tx.free_slots();
        let mut end = None;
        for p in b.pkts().iter() {
            let k = tx.slots_for(p.len());
            if k == 0 || k > free {
                continue;
            }
            let s = tx.reserve(k);
            tx.write(s, k, p.data());
            free -= k;
            end = Some(s + k as u64);
            sent += 1;
        }
        if let Some(e) = end {
            tx.publish(e);
        }
    }
    drop(b);
    (n as u64, sent)
}

fn main() {
    let a = match parse() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("memif_loop: {e}");
            std::process::exit(2);
        }
    };
    let server = match MemifServer::bind(ServerConfig::new(&a.socket)) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("memif_loop: {e}");
            std::process::exit(1);
        }
    };
    let mk = |name: &str, id| {
        let mut c = MemifConfig::new(name, id);
        c.buffer_size = a.buffer_size;
        server.add_interface(c)
    };
    let (p0, p1) = match (mk("loop0", 0), mk("loop1", 1)) {
        (Ok(x), Ok(y)) => (x, y),
        (Err(e), _) | (_, Err(e)) => {
            eprintln!("memif_loop: {e}");
            std::process::exit(1);
        }
    };
    let mut r0 = p0.take_rx(0).expect("rx 0");
    let mut r1 = p1.take_rx(0).expect("rx 1");
    let mut b = RxBatch::with_capacity(a.batch);
    let t0 = Instant::now();
    let mut next = t0 + Duration::from_secs(1);
    let (mut rx0, mut tx1, mut rx1, mut tx0) = (0u64, 0u64, 0u64, 0u64);
    let (mut last0, mut last1) = (0u64, 0u64);
    let end = t0 + Duration::from_secs_f64(a.duration_s);
    loop {
        for _ in 0..64 {
            let (r, s) = forward(r0.as_mut(), &p1, &mut b);
            rx0 += r;
            tx1 += s;
            let (r, s) = forward(r1.as_mut(), &p0, &mut b);
            rx1 += r;
            tx0 += s;
        }
        let now = Instant::now();
        if now >= next {
            if !a.quiet {
                println!(
                    "t={:.0}s link0={} link1={} 0->1 {:.3} Mpps (fwd {} drop {}) 1->0 {:.3} Mpps",
                    (now - t0).as_secs_f64(),
                    p0.link_up(),
                    p1.link_up(),
                    (rx0 - last0) as f64 / 1e6,
                    tx1,
                    rx0 - tx1,
                    (rx1 - last1) as f64 / 1e6,
                );
            }
            last0 = rx0;
            last1 = rx1;
            next += Duration::from_secs(1);
        }
        if now >= end {
            break;
        }
    }
    println!(
        "{{\"duration_s\": {:.3}, \"rx0\": {rx0}, \"tx1\": {tx1}, \"rx1\": {rx1}, \"tx0\": {tx0}, \"counters0\": {:?}, \"counters1\": {:?}}}",
        t0.elapsed().as_secs_f64(),
        p0.backend_counters().into_iter().filter(|(_, v)| *v > 0).collect::<Vec<_>>(),
        p1.backend_counters().into_iter().filter(|(_, v)| *v > 0).collect::<Vec<_>>(),
    );
}
