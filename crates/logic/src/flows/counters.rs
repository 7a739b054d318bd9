//! The flows' and tables' counters: atomics striped per worker, shared by
//! successive snapshots of a flow, and the hits on one flow that the data
//! path adds to them once per run.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

const STRIPES: usize = 4;

#[derive(Default)]
#[repr(align(64))]
struct Stripe {
    a: AtomicU64,
    b: AtomicU64,
}

/// Two counters striped per worker.
#[derive(Default)]
pub(super) struct Counters([Stripe; STRIPES]);

impl Counters {
    #[inline]
    pub(super) fn add(&self, worker: u16, a: u64, b: u64) {
        let s = &self.0[worker as usize % STRIPES];
        s.a.fetch_add(a, Relaxed);
        s.b.fetch_add(b, Relaxed);
    }
    pub(super) fn get(&self) -> (u64, u64) {
        self.0.iter().fold((0, 0), |(a, b), s| {
            (a + s.a.load(Relaxed), b + s.b.load(Relaxed))
        })
    }
}

/// Hits on one flow not yet added to its counters.
#[derive(Default)]
pub(super) struct Run<'a> {
    pub(super) stats: Option<&'a Counters>,
    pub(super) packets: u64,
    pub(super) bytes: u64,
}

impl<'a> Run<'a> {
    /// `packets` hits of `bytes` bytes in all on the flow of `c`.
    #[inline]
    pub(super) fn hit(&mut self, c: &'a Counters, packets: u64, bytes: u64, worker: u16) {
        if !self.stats.is_some_and(|s| std::ptr::eq(s, c)) {
            self.flush(worker);
            self.stats = Some(c);
        }
        self.packets += packets;
        self.bytes += bytes;
    }

    #[inline]
    pub(super) fn flush(&mut self, worker: u16) {
        if let Some(s) = self.stats.take() {
            s.add(worker, self.packets, self.bytes);
        }
        self.packets = 0;
        self.bytes = 0;
    }
}
