//! What the engine's unit tests share (a frame spec, a send plan, a wire
//! that drops, duplicates and swaps frames) and the tests that run a
//! sender into a receiver through a pipe.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fabric::{pipe, PipeConfig, Port, RxBatch};
use wire::MacAddr;

use super::{Receiver, SendPlan, Sender, TxStats};
use crate::cli::VaryField;
use crate::frame::{FrameGen, FrameSpec};
use crate::sys::{now_ns, OwnedTx};

pub(super) fn spec() -> FrameSpec {
    FrameSpec {
        src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
        dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
        src_ip: "10.0.0.1".parse().unwrap(),
        dst_ip: "10.0.0.2".parse().unwrap(),
        src_port: 1000,
        dst_port: 2000,
        vlan: None,
        flows: 4,
        vary: vec![VaryField::SrcPort],
    }
}

pub(super) fn plan(rate: f64, count: Option<u64>, duration_ns: u64, warmup_ns: u64) -> SendPlan {
    SendPlan {
        stream: 9,
        burst: 32,
        bunch: false,
        rate_pps: rate,
        warmup_ns,
        duration_ns,
        count,
    }
}

/// A wire on the peer side of a pipe: what the port sends comes back
/// into it, with frame i (counting every frame) dropped when
/// `drop(i)`, sent twice when `dup(i)`, and frames i, i+1 swapped when
/// `swap(i)`.
pub(super) fn spawn_wire(
    mut peer: fabric::PipePeer,
    stop: Arc<AtomicBool>,
    drop: fn(u64) -> bool,
    dup: fn(u64) -> bool,
    swap: fn(u64) -> bool,
) -> std::thread::JoinHandle<u64> {
    std::thread::spawn(move || {
        let mut i = 0u64;
        let mut held: Option<Vec<u8>> = None;
        let mut out: Vec<Vec<u8>> = Vec::new();
        let mut idle_after_stop = 0;
        loop {
            let n = peer.recv(0, 64, |f| {
                let f = f.to_vec();
                let k = i;
                i += 1;
                if drop(k) {
                    return;
                }
                if let Some(h) = held.take() {
                    out.push(f.clone());
                    out.push(h);
                } else if swap(k) {
                    held = Some(f.clone());
                } else {
                    out.push(f.clone());
                }
                if dup(k) {
                    out.push(f);
                }
            });
            while !out.is_empty() {
                let refs: Vec<&[u8]> = out.iter().map(|v| v.as_slice()).collect();
                let sent = peer.send(0, &refs);
                out.drain(..sent);
                if sent == 0 {
                    std::thread::yield_now();
                }
            }
            if n == 0 {
                if stop.load(Ordering::Relaxed) {
                    idle_after_stop += 1;
                    if idle_after_stop > 1000 {
                        return i;
                    }
                }
                std::thread::yield_now();
            }
        }
    })
}

/// Runs a txrx loop over the pipe until the sender is done, then drains.
fn txrx(port: &Arc<dyn Port>, p: SendPlan, sizes: &[u32]) -> (TxStats, Receiver, (u64, u64)) {
    let gen = FrameGen::new(&spec(), sizes).unwrap();
    // SAFETY: the test thread is the only sender on this queue.
    let tx = unsafe { OwnedTx::new(port.tx(0)) };
    let mut rxq = port.take_rx(0).unwrap();
    let mut batch = RxBatch::with_capacity(64);
    let mut r = Receiver::new(true);
    let start = now_ns();
    let mut s = Sender::new(tx, gen, p, start, 2048).unwrap();
    while !s.done() {
        r.poll(rxq.as_mut(), &mut batch);
        s.poll(now_ns());
    }
    let window = s.window(now_ns());
    let end = now_ns() + 200_000_000;
    while now_ns() < end {
        r.poll(rxq.as_mut(), &mut batch);
    }
    r.finish_stream(9, s.sent_seq());
    (s.stats.clone(), r, window)
}

#[test]
fn txrx_over_a_lossy_reordering_wire_counts_exactly() {
    let (port, peer) = pipe(
        "t",
        PipeConfig {
            queues: 1,
            ring_slots: 256,
            slot_b: 2048,
        },
    )
    .unwrap();
    let port: Arc<dyn Port> = Arc::new(port);
    let stop = Arc::new(AtomicBool::new(false));
    // Frame numbers seen by the wire include no warm-up (warmup 0).
    let w = spawn_wire(
        peer,
        stop.clone(),
        |i| i % 97 == 5,
        |i| i % 101 == 7,
        |i| i % 89 == 11,
    );
    let n = 50_000u64;
    let (tx, r, _) = txrx(&port, plan(0.0, Some(n), 0, 0), &[100, 200, 1500]);
    stop.store(true, Ordering::Relaxed);
    assert_eq!(w.join().unwrap(), n);
    assert_eq!(tx.packets, n);
    let dropped = (0..n).filter(|i| i % 97 == 5).count() as u64;
    let dups = (0..n).filter(|i| i % 101 == 7 && i % 97 != 5).count() as u64;
    // A swap holds frame i and emits it after i+1 (after i+2 if i+1 is
    // dropped): one late frame per swap, unless i itself was dropped, or
    // duplicated (its copy goes out at once, the held one is then a
    // duplicate, not a late frame).
    let swaps = (0..n - 1)
        .filter(|i| i % 89 == 11 && i % 97 != 5 && i % 101 != 7)
        .count() as u64;
    let s = &r.stream_reports()[0];
    assert_eq!(s.id, 9);
    assert_eq!(s.lost, dropped);
    assert_eq!(s.duplicated, dups);
    assert_eq!(s.reordered, swaps);
    assert_eq!(s.received, n - dropped + dups);
    assert_eq!(r.packets, s.received);
    assert_eq!((r.foreign, r.warmup), (0, 0));
    assert_eq!(r.latency.summary().unwrap().count, r.packets);
    assert_ne!(r.touch_sum, 0);
}

#[test]
fn warm_up_frames_are_marked_and_excluded() {
    let (port, peer) = pipe("t", PipeConfig::default()).unwrap();
    let port: Arc<dyn Port> = Arc::new(port);
    let stop = Arc::new(AtomicBool::new(false));
    let w = spawn_wire(peer, stop.clone(), |_| false, |_| false, |_| false);
    // 100 ms of warm-up at 100 kpps, then 10 000 measured frames.
    let (tx, r, window) = txrx(&port, plan(100_000.0, Some(10_000), 0, 100_000_000), &[128]);
    stop.store(true, Ordering::Relaxed);
    let total = w.join().unwrap();
    assert_eq!(tx.packets, 10_000);
    // 100 ms at 100 kpps were scheduled as warm-up (sent or refused by
    // a full ring when the wire thread is starved of CPU).
    let warm = tx.warmup_packets + tx.warmup_full;
    assert!((9_900..=10_100).contains(&warm), "{warm}");
    assert_eq!(total, tx.packets + tx.warmup_packets);
    assert_eq!(r.warmup, tx.warmup_packets);
    assert_eq!(r.packets, 10_000);
    assert_eq!(r.lost(), 0);
    // Paced: 10 000 frames at 100 kpps take at least 100 ms (exactly
    // that when nothing was refused and the sender kept up).
    let d = (window.1 - window.0) as f64 / 1e9;
    assert!(d > 0.0999 && d < 0.5, "window {d}");
    if tx.full == 0 && tx.behind_max < 64 {
        assert!((d - 0.1).abs() < 0.001, "window {d}");
    }
    let lat = r.latency.summary().unwrap();
    assert!(lat.min > 0 && lat.max < 1_000_000_000);
}

#[test]
fn back_pressure_is_counted_unpaced_and_a_receiver_behind_is_seen() {
    // Unpaced into a 64-slot pipe nobody drains: after two whole bursts
    // every attempt is pushed back.
    let (port, mut peer) = pipe(
        "t",
        PipeConfig {
            queues: 1,
            ring_slots: 64,
            slot_b: 2048,
        },
    )
    .unwrap();
    let port: Arc<dyn Port> = Arc::new(port);
    let gen = FrameGen::new(&spec(), &[64]).unwrap();
    // SAFETY: the test thread is the only sender on this queue.
    let tx = unsafe { OwnedTx::new(port.tx(0)) };
    let mut s = Sender::new(tx, gen, plan(0.0, None, 2_000_000, 0), now_ns(), 2048).unwrap();
    while !s.done() {
        s.poll(now_ns());
    }
    assert_eq!(s.stats.packets, 64);
    assert!(s.stats.attempts > 10, "{:?}", s.stats);
    assert_eq!(s.stats.pushback, s.stats.attempts - 2);
    // Drained at once: no back-pressure.
    let mut s2 = {
        let gen = FrameGen::new(&spec(), &[64]).unwrap();
        // SAFETY: as above (the first sender is done with the queue).
        let tx = unsafe { OwnedTx::new(port.tx(0)) };
        Sender::new(tx, gen, plan(0.0, Some(32 * 20), 0, 0), now_ns(), 2048).unwrap()
    };
    peer.recv(0, 1000, |_| {});
    while !s2.done() {
        s2.poll(now_ns());
        peer.recv(0, 1000, |_| {});
    }
    assert_eq!(
        (s2.stats.packets, s2.stats.pushback),
        (32 * 20, 0),
        "{:?}",
        s2.stats
    );

    // A receiver with 600 frames waiting and a 256-frame batch: two full
    // bursts in a row (behind: one backlog burst), then a partial one;
    // then one full batch alone is no backlog.
    let (port, mut peer) = pipe(
        "r",
        PipeConfig {
            queues: 1,
            ring_slots: 1024,
            slot_b: 2048,
        },
    )
    .unwrap();
    let mut rxq = port.take_rx(0).unwrap();
    let f = FrameGen::new(&spec(), &[64])
        .unwrap()
        .next(1, 0, 0)
        .to_vec();
    let put = |peer: &mut fabric::PipePeer, n: usize| {
        for _ in 0..n {
            assert_eq!(peer.send(0, &[&f]), 1);
        }
    };
    put(&mut peer, 600);
    let mut r = Receiver::new(false);
    let mut batch = RxBatch::with_capacity(256);
    assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
    assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
    assert_eq!(r.poll(rxq.as_mut(), &mut batch), 88);
    put(&mut peer, 256);
    assert_eq!(r.poll(rxq.as_mut(), &mut batch), 256);
    assert_eq!(r.poll(rxq.as_mut(), &mut batch), 0);
    assert_eq!((r.bursts, r.backlog_bursts), (4, 1));
    // Two queues polled in turn, each handing out one full batch at a
    // time: no backlog (the full bursts alternate between queues); a
    // second full batch of the same queue is one.
    let (port2, mut peer2) = pipe(
        "r2",
        PipeConfig {
            queues: 1,
            ring_slots: 1024,
            slot_b: 2048,
        },
    )
    .unwrap();
    let mut rxq2 = port2.take_rx(0).unwrap();
    let mut r = Receiver::new(false);
    for _ in 0..3 {
        put(&mut peer, 256);
        for _ in 0..256 {
            assert_eq!(peer2.send(0, &[&f]), 1);
        }
        assert_eq!(r.poll_queue(0, rxq.as_mut(), &mut batch), 256);
        assert_eq!(r.poll_queue(1, rxq2.as_mut(), &mut batch), 256);
        assert_eq!(r.poll_queue(0, rxq.as_mut(), &mut batch), 0);
        assert_eq!(r.poll_queue(1, rxq2.as_mut(), &mut batch), 0);
    }
    assert_eq!((r.bursts, r.backlog_bursts), (6, 0));
    put(&mut peer, 512);
    assert_eq!(r.poll_queue(0, rxq.as_mut(), &mut batch), 256);
    assert_eq!(r.poll_queue(1, rxq2.as_mut(), &mut batch), 0);
    assert_eq!(r.poll_queue(0, rxq.as_mut(), &mut batch), 256);
    assert_eq!((r.bursts, r.backlog_bursts), (8, 1));
}
