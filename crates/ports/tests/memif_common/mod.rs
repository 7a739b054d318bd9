//! Helpers shared by the memif integration tests.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue};

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)]
pub use common::in_place::{pump_in_place, Templates};
pub use common::{wait_until, TempDir};

/// Sends one frame the way the fabric does (single-threaded caller, so the
/// fabric lock is trivially held). False if it does not fit now.
pub fn send(port: &dyn Port, q: u16, frame: &[u8]) -> bool {
    // SAFETY: one thread drives this queue (no switch sends to it).
    let mut tx = unsafe { fabric::OwnedTx::new(port.tx(q)) };
    let n = tx.slots_for(frame.len());
    if n == 0 {
        return false;
    }
    if tx.free_slots() < n {
        return false;
    }
    let s = tx.reserve(n);
    tx.write(s, n, frame);
    tx.publish(s + n as u64);
    true
}

/// Sends a batch of frames with one publish. Returns how many were sent.
pub fn send_batch(port: &dyn Port, q: u16, frames: &[&[u8]]) -> usize {
    // SAFETY: as in `send`.
    let mut tx = unsafe { fabric::OwnedTx::new(port.tx(q)) };
    let mut free = tx.free_slots();
    let mut first = None;
    let mut end = 0;
    let mut sent = 0;
    for f in frames {
        let n = tx.slots_for(f.len());
        if n == 0 || n > free {
            break;
        }
        let s = tx.reserve(n);
        first.get_or_insert(s);
        tx.write(s, n, f);
        end = s + n as u64;
        free -= n;
        sent += 1;
    }
    if first.is_some() {
        tx.publish(end);
    }
    sent
}

/// Receives until `want` frames arrived or `timeout`; returns copies.
pub fn recv(rx: &mut dyn RxQueue, want: usize, timeout: Duration) -> Vec<Vec<u8>> {
    let mut b = RxBatch::with_capacity(256);
    let mut out = Vec::new();
    let t0 = Instant::now();
    while out.len() < want && t0.elapsed() < timeout {
        let burst = b.receive(&mut *rx, 0, 0);
        let n = burst.len();
        for p in burst.pkts().iter() {
            out.push(p.data().to_vec());
        }
        drop(burst);
        if n == 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    out
}

/// A frame of `len` bytes whose content depends on `seq`.
pub fn frame(len: usize, seq: u32) -> Vec<u8> {
    let mut f: Vec<u8> = (0..len)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(seq) as u8)
        .collect();
    if len >= 8 {
        f[0..4].copy_from_slice(&seq.to_le_bytes());
        f[4..8].copy_from_slice(&(len as u32).to_le_bytes());
    }
    f
}

/// Value of a named backend counter.
pub fn counter(port: &dyn Port, name: &str) -> u64 {
    port.backend_counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| v)
}
