//! The forwarding loop does not allocate: a counting global allocator sees
//! no allocation while a running switch forwards many batches.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fill, FromFrame};
use fabric::{pipe, PipeConfig, Switch, SwitchConfig, WakeupMode};

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: our caller upholds `GlobalAlloc::alloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: our caller upholds `GlobalAlloc::dealloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: our caller upholds `GlobalAlloc::realloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

fn forward_rounds(mode: WakeupMode, latency_budget_us: u32) {
    let group7 = vec![0, 1, 2];
    let cfg = SwitchConfig {
        batch: 64,
        max_ports: 16,
        workers: vec![None, None],
        wakeup: mode,
        latency_budget_us,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, Box::new(FromFrame { group7 })).unwrap();
    let mut peers = Vec::new();
    for i in 0..3 {
        let (p, peer) = pipe(
            &format!("p{i}"),
            PipeConfig {
                ring_slots: 256,
                ..Default::default()
            },
        )
        .unwrap();
        sw.add_port(&format!("p{i}"), Arc::new(p), None).unwrap();
        peers.push(peer);
    }
    // Every kind of verdict, from every port.
    let round = |peers: &mut Vec<fabric::PipePeer>, seq: &mut u32| {
        for src in 0..3u16 {
            let n = peers[src as usize].send_with(0, 64, |i, buf| {
                let (kind, arg) =
                    [(0, (src + 1) % 3), (1, 0), (2, 7), (3, 0), (0, src), (0, 9)][i % 6];
                fill(buf, kind, arg, src, *seq + i as u32, 64 + i)
            });
            *seq += n as u32;
        }
        for p in peers.iter_mut() {
            p.recv(0, usize::MAX, |_| {});
        }
    };
    let mut seq = 0;
    // Warm up: workers pick up their queues, first batches run.
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(300) {
        round(&mut peers, &mut seq);
    }
    let before_pkts: u64 = sw.worker_stats().iter().map(|w| w.packets).sum();
    let before = ALLOCS.load(Ordering::SeqCst);
    let t = Instant::now();
    while t.elapsed() < Duration::from_millis(700) {
        round(&mut peers, &mut seq);
    }
    let after = ALLOCS.load(Ordering::SeqCst);
    let ws = sw.worker_stats();
    let moved: u64 = ws.iter().map(|w| w.packets).sum::<u64>() - before_pkts;
    assert!(moved > 10_000, "only {moved} frames forwarded");
    assert_eq!(
        after - before,
        0,
        "{} allocations while forwarding {moved} frames",
        after - before
    );
    sw.shutdown();
}

#[test]
fn forwarding_does_not_allocate() {
    forward_rounds(WakeupMode::Poll, 0);
    // adaptive: never sleeping while traffic flows, the default budget, a long one
    for budget in [0, fabric::DEFAULT_BUDGET_US, 2_000] {
        forward_rounds(WakeupMode::Adaptive, budget);
    }
}
