//! Destination-port parallelism: several workers send into one destination
//! at once. Frames of each source arrive intact and in order (gaps only
//! where the destination was full, and those are counted), and no worker
//! ever waits for room.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fill, parse, FromFrame};
use fabric::{pipe, PipeConfig, Switch, SwitchConfig, WakeupMode};

fn incast(senders: usize, workers: usize, ring_slots: usize) {
    let cfg = SwitchConfig {
        batch: 64,
        max_ports: 64,
        workers: vec![None; workers],
        wakeup: WakeupMode::Poll,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, Box::new(FromFrame { group7: vec![] })).unwrap();
    let (dst, mut dpeer) = pipe(
        "dst",
        PipeConfig {
            ring_slots,
            ..Default::default()
        },
    )
    .unwrap();
    sw.add_port("dst", Arc::new(dst), Some(0)).unwrap();
    let per = 20_000u32;
    let mut threads = Vec::new();
    for s in 0..senders {
        let (p, mut peer) = pipe(&format!("s{s}"), PipeConfig::default()).unwrap();
        let id = sw
            .add_port(&format!("s{s}"), Arc::new(p), Some(s % workers))
            .unwrap();
        threads.push(std::thread::spawn(move || {
            let mut seq = 0u32;
            let deadline = Instant::now() + Duration::from_secs(30);
            while seq < per {
                assert!(Instant::now() < deadline);
                let n = peer.send_with(0, (per - seq).min(32) as usize, |i, buf| {
                    fill(
                        buf,
                        0,
                        0,
                        id,
                        seq + i as u32,
                        60 + ((seq as usize + i) % 200),
                    )
                });
                seq += n as u32;
                if n == 0 {
                    std::thread::yield_now();
                }
            }
            peer
        }));
    }
    let mut last = vec![None::<u32>; senders + 1];
    let mut got = 0u64;
    let total = per as u64 * senders as u64;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        got += dpeer.recv(0, usize::MAX, |f| {
            let (src, seq) = parse(f);
            if let Some(prev) = last[src as usize] {
                assert!(seq > prev, "source {src}: {seq} after {prev}");
            }
            last[src as usize] = Some(seq);
        }) as u64;
        let st = sw.port_stats();
        let full: u64 = st[0]
            .drops
            .iter()
            .filter(|d| d.0 == "tx_full")
            .map(|d| d.1)
            .sum();
        if got + full == total {
            assert_eq!(st[0].tx_packets, got);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "got {got} + full {full} of {total}"
        );
        std::thread::yield_now();
    }
    for t in threads {
        t.join().unwrap();
    }
    assert!(got > 0);
}

#[test]
fn incast_two_workers_keeps_per_source_order() {
    incast(4, 2, 1024);
}

#[test]
fn incast_into_a_tiny_ring_drops_and_counts_without_blocking() {
    incast(3, 3, 16);
}
