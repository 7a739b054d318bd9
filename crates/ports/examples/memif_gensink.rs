//! Generator and sink in one thread on our memif client: sends 64 B (or
//! `--len`) frames on interface id 0 and counts what comes back on id 1 of
//! the server at `--socket` (a switch forwarding 0 -> 1). One thread, so
//! generator and sink never wait for each other's time slice.
//!
//! ```text
//! memif_gensink --socket /tmp/sw.sock --duration-s 8 --warmup-s 2 --len 64
//! ```
//! Prints `rx_mpps=<rate over the measured window> tx_mpps=<offered>`.

use std::time::{Duration, Instant};

use fabric::{Port, RxBatch};
use ports::memif::{ClientConfig, MemifConfig, MemifPort};

fn main() {
    let mut socket = String::new();
    let (mut duration_s, mut warmup_s, mut len) = (8.0f64, 2.0f64, 64usize);
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let v = it.next().unwrap_or_else(|| {
            eprintln!("memif_gensink: {k} needs a value");
            std::process::exit(2)
        });
        let num = |v: &str| -> f64 {
            v.parse().unwrap_or_else(|e| {
                eprintln!("memif_gensink: {k}: {e}");
                std::process::exit(2)
            })
        };
        match k.as_str() {
            "--socket" => socket = v,
            "--duration-s" => duration_s = num(&v),
            "--warmup-s" => warmup_s = num(&v),
            "--len" => len = num(&v) as usize,
            _ => {
                eprintln!("memif_gensink: unknown argument {k}");
                std::process::exit(2)
            }
        }
    }
    if socket.is_empty() {
        eprintln!("memif_gensink: --socket PATH is required");
        std::process::exit(2);
    }
    let mk = |name: &str, id| {
        MemifPort::client(MemifConfig::new(name, id), ClientConfig::new(&socket)).unwrap_or_else(
            |e| {
                eprintln!("memif_gensink: {e}");
                std::process::exit(1)
            },
        )
    };
    let (tx_port, rx_port) = (mk("gen", 0), mk("sink", 1));
    let t0 = Instant::now();
    while !(tx_port.link_up() && rx_port.link_up()) {
        if t0.elapsed() > Duration::from_secs(15) {
            eprintln!(
                "memif_gensink: no link: {:?} / {:?}",
                tx_port.status(),
                rx_port.status()
            );
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let mut frame = vec![0u8; len];
    frame[..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 1]);
    frame[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0]);
    frame[12..14].copy_from_slice(&[0x08, 0x00]);
    let mut rx = rx_port.take_rx(0).expect("rx queue");
    // SAFETY: this thread is the only user of the transmit queue.
    let mut tx = unsafe { fabric::OwnedTx::new(tx_port.tx(0)) };
    let k = tx.slots_for(len);
    let mut b = RxBatch::with_capacity(256);
    let start = Instant::now();
    let (w0, w1) = (
        start + Duration::from_secs_f64(warmup_s),
        start + Duration::from_secs_f64(duration_s),
    );
    let (mut sent, mut got, mut got_w, mut sent_w) = (0u64, 0u64, 0u64, 0u64);
    let mut in_window = false;
    loop {
        let free = tx.free_slots() / k.max(1);
        let n = free.min(32);
        if n > 0 {
            let first = tx.reserve(n * k);
            for i in 0..n as u64 {
                tx.write(first + i * k as u64, k, &frame);
            }
            tx.publish(first + (n * k) as u64);
            sent += n as u64;
        }
        got += b.receive(&mut *rx, 0, 0).received() as u64;
        let now = Instant::now();
        if !in_window && now >= w0 {
            in_window = true;
            got_w = got;
            sent_w = sent;
        }
        if now >= w1 {
            break;
        }
    }
    let win = duration_s - warmup_s;
    println!(
        "rx_mpps={:.4} tx_mpps={:.4} sent={sent} received={got}",
        (got - got_w) as f64 / win / 1e6,
        (sent - sent_w) as f64 / win / 1e6
    );
}
