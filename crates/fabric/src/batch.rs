//! Batches of packet views. A batch is allocated once, at worker start, and
//! reused for every burst: the data path never allocates.

use crate::port::{PortId, QueueId};

/// Smallest batch capacity accepted by the configuration.
pub const MIN_BATCH: usize = 32;
/// Largest batch capacity accepted by the configuration.
pub const MAX_BATCH: usize = 1024;
/// Default batch capacity.
pub const DEFAULT_BATCH: usize = 256;

/// A view of one received frame in port-owned memory.
///
/// Valid from the `RxQueue::burst` that produced it until the matching
/// `RxQueue::release`. The logic may read it and, where it rewrites headers,
/// write it (the buffer is owned by the receiving port until release).
#[derive(Clone, Copy, Debug)]
pub struct Pkt {
    ptr: *mut u8,
    len: u32,
    /// Ingress port.
    pub port: PortId,
    /// Ingress queue.
    pub queue: QueueId,
}

// SAFETY: a Pkt is a view into a port buffer that the owning worker holds
// exclusively between burst and release; it is never shared across threads
// while live.
unsafe impl Send for Pkt {}

impl Pkt {
    /// Builds a view of `len` bytes at `ptr`.
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and not aliased by
    /// anyone else, until the receive queue releases it.
    pub unsafe fn new(ptr: *mut u8, len: u32, port: PortId, queue: QueueId) -> Self {
        Self {
            ptr,
            len,
            port,
            queue,
        }
    }

    /// Frame length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// True for a zero-length frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The frame bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        // SAFETY: guaranteed by the constructor's contract.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len as usize) }
    }

    /// Hints the CPU to fetch the frame's first cache line (its headers),
    /// so that a loop over a burst can overlap the miss on frame i + k
    /// with the work on frame i. A no-op off x86_64.
    #[inline]
    pub fn prefetch(&self) {
        crate::sys::prefetch_read(self.ptr);
    }

    /// The frame bytes, writable (header rewrites by a logic).
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        // SAFETY: guaranteed by the constructor's contract; &mut self makes
        // this the only live view through this Pkt.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len as usize) }
    }

    /// Shortens the frame (a logic popping a VLAN tag moves bytes and trims).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.len as usize {
            self.len = len as u32;
        }
    }
}

/// A fixed-capacity array of received frames.
pub struct RxBatch {
    pkts: Box<[Pkt]>,
    len: usize,
    /// Port and queue the next frames are received from (set by the worker
    /// before `burst`, read by backends to fill `Pkt::port`/`Pkt::queue`).
    pub port: PortId,
    /// See `port`.
    pub queue: QueueId,
}

impl RxBatch {
    /// A batch of `capacity` frames (clamped to `MIN_BATCH..=MAX_BATCH`).
    pub fn with_capacity(capacity: usize) -> Self {
        let cap = capacity.clamp(1, MAX_BATCH);
        let empty = Pkt {
            ptr: std::ptr::null_mut(),
            len: 0,
            port: 0,
            queue: 0,
        };
        Self {
            pkts: vec![empty; cap].into_boxed_slice(),
            len: 0,
            port: 0,
            queue: 0,
        }
    }

    /// Capacity in frames.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.pkts.len()
    }

    /// Number of frames held.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when no frame is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many more frames fit.
    #[inline]
    pub fn room(&self) -> usize {
        self.pkts.len() - self.len
    }

    /// Appends a frame view; returns false (and drops nothing) if full.
    ///
    /// # Safety
    /// Same contract as [`Pkt::new`].
    #[inline]
    pub unsafe fn push(&mut self, ptr: *mut u8, len: u32) -> bool {
        if self.len == self.pkts.len() {
            return false;
        }
        self.pkts[self.len] = Pkt {
            ptr,
            len,
            port: self.port,
            queue: self.queue,
        };
        self.len += 1;
        true
    }

    /// Empties the batch (buffers are released through the queue, not here).
    #[inline]
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// The held frames.
    #[inline]
    pub fn pkts(&self) -> &[Pkt] {
        &self.pkts[..self.len]
    }

    /// The held frames, writable.
    #[inline]
    pub fn pkts_mut(&mut self) -> &mut [Pkt] {
        &mut self.pkts[..self.len]
    }

    /// Keeps only the frames for which `keep` is true, preserving order, and
    /// returns how many were removed.
    #[inline]
    pub fn retain(&mut self, mut keep: impl FnMut(&Pkt) -> bool) -> usize {
        let mut w = 0;
        for r in 0..self.len {
            if keep(&self.pkts[r]) {
                self.pkts[w] = self.pkts[r];
                w += 1;
            }
        }
        let removed = self.len - w;
        self.len = w;
        removed
    }
}
