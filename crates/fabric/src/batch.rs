//! Batches of packet views. A batch is allocated once, at worker start, and
//! reused for every burst: the data path never allocates.
//!
//! Soundness: a [`Pkt`] holds a raw pointer into port-owned memory, valid
//! from the `RxQueue::burst` that produced it until the matching
//! `RxQueue::release`. The types make safe code unable to break that:
//!
//! - frames are read only through a [`Burst`], which [`RxBatch::receive`]
//!   returns after filling the batch from a queue. The burst borrows both
//!   the batch and the queue mutably and releases the queue when dropped, so
//!   no view of a frame outlives the release, and the queue can neither be
//!   dropped nor polled again while a view exists;
//! - `Pkt` is neither `Copy` nor `Clone` and `&mut Pkt` is never handed out:
//!   a logic sees the frames as [`Pkts`] (an unsized slice wrapper that
//!   cannot be swapped or moved out of) and writes one frame at a time
//!   through a [`PktMut`], so it can never hold two `&mut [u8]` onto one
//!   buffer, nor move a view from one batch into another;
//! - backends fill the batch through an [`RxFill`]: zero-copy views with the
//!   `unsafe` [`RxFill::push`] (the backend vouches for its memory), frames
//!   that must be linearised with the safe [`RxFill::scratch`] /
//!   [`RxFill::push_scratch`] pair, which copies into memory the batch owns.

use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::port::{PortId, QueueId, RxQueue};

/// Smallest batch capacity accepted by the configuration.
pub const MIN_BATCH: usize = 32;
/// Largest batch capacity accepted by the configuration.
pub const MAX_BATCH: usize = 1024;
/// Default batch capacity.
pub const DEFAULT_BATCH: usize = 256;
/// Bytes of scratch memory per batch, where backends linearise frames that
/// arrive in several buffers (113 jumbo frames of 9216 B; at least one of
/// the largest frame any backend accepts, memif's 1 MiB). A frame that does
/// not fit waits for the next burst. Allocated once per worker; pages that
/// are never written are never backed.
pub const SCRATCH_B: usize = 1 << 20;

/// A view of one received frame.
///
/// Not `Copy`, not `Clone`: it lives in its batch and is lent out by
/// reference (`&Pkt` to read, [`PktMut`] to write).
#[derive(Debug)]
pub struct Pkt {
    ptr: *mut u8,
    len: u32,
    port: PortId,
    queue: QueueId,
}

// SAFETY: a Pkt is a view into a port buffer that the owning worker holds
// exclusively between burst and release; the batch holding it moves between
// threads only as a whole, with the worker.
unsafe impl Send for Pkt {}

impl Pkt {
    /// Builds a view of `len` bytes at `ptr` (tests and benches building
    /// views over their own buffers; backends use [`RxFill`]).
    ///
    /// # Safety
    /// `ptr..ptr+len` must be valid for reads and writes, and not accessed
    /// by anyone else, for as long as the view (or any view derived from it)
    /// is used.
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

    /// Ingress port.
    #[inline]
    pub fn port(&self) -> PortId {
        self.port
    }

    /// Ingress queue.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    /// The frame bytes.
    #[inline]
    pub fn data(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the constructor's contract (RxFill for
        // backends): valid and unaliased by writers while the view lives.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len as usize) }
    }

    /// Hints the CPU to fetch the frame's first cache line (its headers),
    /// so that a loop over a burst can overlap the miss on frame i + k
    /// with the work on frame i. A no-op off x86_64.
    #[inline]
    pub fn prefetch(&self) {
        crate::sys::prefetch_read(self.ptr);
    }
}

/// Exclusive access to one frame: header rewrites by a logic.
///
/// Borrowed from [`Pkts::get_mut`] or [`Pkts::iter_mut`]; only one can
/// exist per frame at a time.
#[derive(Debug)]
pub struct PktMut<'a>(&'a mut Pkt);

impl PktMut<'_> {
    /// The frame bytes, writable.
    #[inline]
    pub fn data_mut(&mut self) -> &mut [u8] {
        if self.0.len == 0 {
            return &mut [];
        }
        // SAFETY: the constructor's contract, and this is the only view of
        // the frame (PktMut borrows its Pkt mutably; Pkt is never copied).
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len as usize) }
    }

    /// Shortens the frame (a logic popping a VLAN tag moves bytes and trims).
    #[inline]
    pub fn truncate(&mut self, len: usize) {
        if len < self.0.len as usize {
            self.0.len = len as u32;
        }
    }

    /// Narrows the view to `len` bytes starting `off` bytes into the frame
    /// (a tunnel port exposing the inner frame of a decapsulated packet).
    /// Panics if the range is not inside the frame.
    #[inline]
    pub fn narrow(&mut self, off: usize, len: usize) {
        assert!(
            off.checked_add(len)
                .is_some_and(|e| e <= self.0.len as usize),
            "narrow outside the frame"
        );
        if len == 0 {
            self.0.len = 0;
            return;
        }
        // SAFETY: `off` is inside the frame (checked above), so the pointer
        // stays within the memory the view was created over.
        self.0.ptr = unsafe { self.0.ptr.add(off) };
        self.0.len = len as u32;
    }
}

impl std::ops::Deref for PktMut<'_> {
    type Target = Pkt;
    #[inline]
    fn deref(&self) -> &Pkt {
        self.0
    }
}

/// The frames of a batch as a logic sees them: read any frame by `&Pkt`
/// (the wrapper derefs to `[Pkt]`), write one at a time by [`PktMut`].
///
/// Unsized, like `[Pkt]`: a `&mut Pkts` cannot be swapped with another, so
/// frames never move between batches.
#[repr(transparent)]
#[derive(Debug)]
pub struct Pkts([Pkt]);

impl Pkts {
    /// Wraps views built with [`Pkt::new`] (tests, benches).
    #[inline]
    pub fn new_mut(pkts: &mut [Pkt]) -> &mut Pkts {
        // SAFETY: Pkts is repr(transparent) over [Pkt].
        unsafe { &mut *(pkts as *mut [Pkt] as *mut Pkts) }
    }

    /// Wraps views built with [`Pkt::new`], read-only.
    #[inline]
    pub fn new(pkts: &[Pkt]) -> &Pkts {
        // SAFETY: Pkts is repr(transparent) over [Pkt].
        unsafe { &*(pkts as *const [Pkt] as *const Pkts) }
    }

    /// Frame `i`, writable; `None` if out of range.
    #[inline]
    pub fn get_mut(&mut self, i: usize) -> Option<PktMut<'_>> {
        self.0.get_mut(i).map(PktMut)
    }

    /// Every frame, writable, in order.
    #[inline]
    pub fn iter_mut(&mut self) -> impl ExactSizeIterator<Item = PktMut<'_>> + '_ {
        self.0.iter_mut().map(PktMut)
    }

    /// Consecutive runs of at most `n` frames, each as `Pkts` (`n > 0`).
    #[inline]
    pub fn chunks_mut(&mut self, n: usize) -> impl Iterator<Item = &mut Pkts> + '_ {
        self.0.chunks_mut(n).map(Pkts::new_mut)
    }
}

impl std::ops::Deref for Pkts {
    type Target = [Pkt];
    #[inline]
    fn deref(&self) -> &[Pkt] {
        &self.0
    }
}

/// Owned frames lent to `f` as one batch of views (tests and control-path
/// tools: allocates).
pub fn with_frames<R>(
    frames: &mut [Vec<u8>],
    port: PortId,
    queue: QueueId,
    f: impl FnOnce(&mut Pkts) -> R,
) -> R {
    let mut pkts: Vec<Pkt> = frames
        .iter_mut()
        // SAFETY: `frames` is mutably borrowed for this whole call, so the
        // buffers outlive the views (dropped before we return) and nobody
        // else touches them meanwhile.
        .map(|b| unsafe { Pkt::new(b.as_mut_ptr(), b.len() as u32, port, queue) })
        .collect();
    f(Pkts::new_mut(&mut pkts))
}

/// A fixed-capacity array of received frames plus the scratch memory where
/// backends linearise frames. Read only through [`Burst`].
pub struct RxBatch {
    pkts: Box<[Pkt]>,
    len: usize,
    /// Scratch memory (`SCRATCH_B` bytes), owned through a raw pointer so
    /// the views into it stay valid while the batch is borrowed.
    scratch: NonNull<u8>,
    scratch_len: usize,
    scratch_used: usize,
}

// SAFETY: the batch owns its scratch allocation and its views are only
// dereferenced by the thread holding the batch (see Pkt).
unsafe impl Send for RxBatch {}

impl Drop for RxBatch {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.scratch.as_ptr(), self.scratch_len);
        // SAFETY: allocated in with_capacity as a Box<[u8]> of this length.
        drop(unsafe { Box::from_raw(slice) });
    }
}

impl RxBatch {
    /// Keeps, among the frames from index `from` on, those for which `keep`
    /// is true, in order; returns how many were removed.
    #[inline]
    fn retain_from(&mut self, from: usize, mut keep: impl FnMut(&Pkt) -> bool) -> usize {
        let from = from.min(self.len);
        let mut w = from;
        for r in from..self.len {
            if keep(&self.pkts[r]) {
                self.pkts.swap(w, r);
                w += 1;
            }
        }
        let removed = self.len - w;
        self.len = w;
        removed
    }

    /// A batch of `capacity` frames (clamped to `1..=MAX_BATCH`).
    pub fn with_capacity(capacity: usize) -> Self {
        let cap = capacity.clamp(1, MAX_BATCH);
        let pkts = (0..cap)
            .map(|_| Pkt {
                ptr: std::ptr::null_mut(),
                len: 0,
                port: 0,
                queue: 0,
            })
            .collect();
        let scratch: Box<[u8]> = vec![0u8; SCRATCH_B].into_boxed_slice();
        let scratch_len = scratch.len();
        let raw = Box::into_raw(scratch) as *mut u8;
        Self {
            pkts,
            len: 0,
            // SAFETY: Box::into_raw never returns null.
            scratch: unsafe { NonNull::new_unchecked(raw) },
            scratch_len,
            scratch_used: 0,
        }
    }

    /// Capacity in frames.
    #[inline]
    pub fn capacity(&self) -> usize {
        self.pkts.len()
    }

    /// Fills the batch with one burst from `q` (frames tagged with `port`
    /// and `queue`) and lends the frames out until the returned [`Burst`]
    /// is dropped, which releases them to the queue.
    #[inline]
    pub fn receive<'a, Q: RxQueue + ?Sized>(
        &'a mut self,
        q: &'a mut Q,
        port: PortId,
        queue: QueueId,
    ) -> Burst<'a, Q> {
        self.len = 0;
        self.scratch_used = 0;
        let mut fill = RxFill {
            batch: self,
            port,
            queue,
            _not_send: PhantomData,
        };
        let n = q.burst(&mut fill);
        Burst {
            batch: self,
            q,
            received: n,
        }
    }

    #[inline]
    fn clear(&mut self) {
        self.len = 0;
        self.scratch_used = 0;
    }
}

/// What a backend's `RxQueue::burst` fills: append-only access to a batch.
pub struct RxFill<'b> {
    batch: &'b mut RxBatch,
    port: PortId,
    queue: QueueId,
    _not_send: PhantomData<*mut u8>,
}

impl RxFill<'_> {
    /// How many more frames fit.
    #[inline]
    pub fn room(&self) -> usize {
        self.batch.pkts.len() - self.batch.len
    }

    /// Frames appended so far.
    #[inline]
    pub fn len(&self) -> usize {
        self.batch.len
    }

    /// True when nothing was appended yet.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.batch.len == 0
    }

    /// The port the frames are received from.
    #[inline]
    pub fn port(&self) -> PortId {
        self.port
    }

    /// The queue the frames are received from.
    #[inline]
    pub fn queue(&self) -> QueueId {
        self.queue
    }

    #[inline]
    fn put(&mut self, ptr: *mut u8, len: u32) -> bool {
        let b = &mut *self.batch;
        if b.len == b.pkts.len() {
            return false;
        }
        b.pkts[b.len] = Pkt {
            ptr,
            len,
            port: self.port,
            queue: self.queue,
        };
        b.len += 1;
        true
    }

    /// Appends a zero-copy view of port memory; false (and nothing
    /// appended) if the batch is full.
    ///
    /// # Safety
    /// `ptr..ptr+len` must stay valid for reads and writes, and be accessed
    /// by nobody else (the port, its peer as far as the ring protocol
    /// allows), until the queue's next `release`.
    #[inline]
    pub unsafe fn push(&mut self, ptr: *mut u8, len: u32) -> bool {
        self.put(ptr, len)
    }

    /// Scratch space for one frame of up to `len` bytes, owned by the
    /// batch, or `None` if the batch's scratch is used up (the frame then
    /// waits for the next burst). Nothing is appended until
    /// [`RxFill::push_scratch`]; asking again hands out the same space.
    #[inline]
    pub fn scratch(&mut self, len: usize) -> Option<&mut [u8]> {
        let b = &mut *self.batch;
        if len > b.scratch_len - b.scratch_used {
            return None;
        }
        // SAFETY: [used, used+len) is inside the allocation and not viewed
        // by any pushed frame (those lie below `used`).
        Some(unsafe { std::slice::from_raw_parts_mut(b.scratch.as_ptr().add(b.scratch_used), len) })
    }

    /// Appends the first `len` bytes of the scratch space last handed out
    /// by [`RxFill::scratch`] as a frame; false if the batch is full or
    /// `len` exceeds the scratch left.
    #[inline]
    pub fn push_scratch(&mut self, len: usize) -> bool {
        let b = &mut *self.batch;
        if len > b.scratch_len - b.scratch_used || len > u32::MAX as usize {
            return false;
        }
        // SAFETY: in bounds (checked above).
        let ptr = unsafe { b.scratch.as_ptr().add(b.scratch_used) };
        if !self.put(ptr, len as u32) {
            return false;
        }
        self.batch.scratch_used += len;
        true
    }

    /// The frames appended from index `from` on (a wrapping queue, such as
    /// a tunnel port, rewriting what its inner queue just appended).
    #[inline]
    pub fn appended_mut(&mut self, from: usize) -> &mut Pkts {
        let n = self.batch.len;
        Pkts::new_mut(&mut self.batch.pkts[from.min(n)..n])
    }

    /// Keeps, among the frames appended from index `from` on, only those for
    /// which `keep` is true, preserving order; returns how many were
    /// removed. Frames before `from` are untouched; removed frames are still
    /// released with the rest of the burst.
    #[inline]
    pub fn retain_from(&mut self, from: usize, keep: impl FnMut(&Pkt) -> bool) -> usize {
        self.batch.retain_from(from, keep)
    }

    /// Copies `frame` into scratch and appends it: `scratch` then
    /// `push_scratch` in one call.
    #[inline]
    pub fn push_copy(&mut self, frame: &[u8]) -> bool {
        if self.room() == 0 {
            return false;
        }
        match self.scratch(frame.len()) {
            Some(s) => s.copy_from_slice(frame),
            None => return false,
        }
        self.push_scratch(frame.len())
    }
}

/// One burst of received frames, lent out of a batch; releases them to
/// their queue when dropped.
pub struct Burst<'a, Q: RxQueue + ?Sized = dyn RxQueue> {
    batch: &'a mut RxBatch,
    q: &'a mut Q,
    received: usize,
}

impl<Q: RxQueue + ?Sized> Burst<'_, Q> {
    /// How many frames the queue handed out (before any `retain`).
    #[inline]
    pub fn received(&self) -> usize {
        self.received
    }

    /// Number of frames held.
    #[inline]
    pub fn len(&self) -> usize {
        self.batch.len
    }

    /// True when no frame is held.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.batch.len == 0
    }

    /// The held frames.
    #[inline]
    pub fn pkts(&self) -> &Pkts {
        Pkts::new(&self.batch.pkts[..self.batch.len])
    }

    /// The held frames, writable one at a time.
    #[inline]
    pub fn pkts_mut(&mut self) -> &mut Pkts {
        let n = self.batch.len;
        Pkts::new_mut(&mut self.batch.pkts[..n])
    }

    /// Keeps only the frames for which `keep` is true, preserving order, and
    /// returns how many were removed. The removed frames are still released
    /// with the rest.
    #[inline]
    pub fn retain(&mut self, keep: impl FnMut(&Pkt) -> bool) -> usize {
        self.batch.retain_from(0, keep)
    }
}

impl<Q: RxQueue + ?Sized> Drop for Burst<'_, Q> {
    #[inline]
    fn drop(&mut self) {
        self.batch.clear();
        // An empty burst holds nothing: backends are not called back.
        if self.received != 0 {
            self.q.release();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A queue handing out its own buffers, then scratch copies.
    struct Q {
        bufs: Vec<Vec<u8>>,
        released: usize,
    }

    impl RxQueue for Q {
        fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
            for b in self.bufs.iter_mut() {
                // SAFETY: owned by self, which the Burst borrows until release.
                unsafe { rx.push(b.as_mut_ptr(), b.len() as u32) };
            }
            let s = rx.scratch(3).unwrap();
            s.copy_from_slice(b"abc");
            assert!(rx.push_scratch(2));
            assert!(rx.push_copy(b"xyz"));
            rx.len()
        }
        fn release(&mut self) {
            self.released += 1;
        }
    }

    #[test]
    fn burst_lends_views_and_releases_on_drop() {
        let mut q = Q {
            bufs: vec![vec![1; 20], vec![2; 10]],
            released: 0,
        };
        let mut batch = RxBatch::with_capacity(8);
        {
            let mut b = batch.receive(&mut q, 3, 1);
            assert_eq!(b.received(), 4);
            assert_eq!(b.pkts()[0].data(), &[1; 20][..]);
            assert_eq!(b.pkts()[2].data(), b"ab");
            assert_eq!(b.pkts()[3].data(), b"xyz");
            assert_eq!(b.pkts()[1].port(), 3);
            assert_eq!(b.pkts()[1].queue(), 1);
            for mut p in b.pkts_mut().iter_mut() {
                p.data_mut()[0] = 9;
                p.truncate(1);
            }
            assert_eq!(b.retain(|p| p.data() == [9]), 0);
            assert_eq!(b.len(), 4);
        }
        assert_eq!(q.released, 1);
        assert_eq!(q.bufs[0][0], 9);
        assert_eq!(q.bufs[1][0], 9);
    }

    #[test]
    fn retain_keeps_order_and_scratch_runs_out() {
        struct Big;
        impl RxQueue for Big {
            fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
                let mut n = 0;
                for i in 0..40u8 {
                    match rx.scratch(SCRATCH_B / 16) {
                        Some(s) => s[0] = i,
                        None => break,
                    }
                    assert!(rx.push_scratch(SCRATCH_B / 16 - i as usize));
                    n += 1;
                }
                n
            }
            fn release(&mut self) {}
        }
        let mut batch = RxBatch::with_capacity(64);
        let mut q = Big;
        let mut b = batch.receive(&mut q, 0, 0);
        // Frame i takes SCRATCH_B/16 - i bytes: 16 fit, and a 17th (the
        // 120 bytes left are less than asked for) does not.
        assert_eq!(b.received(), 16);
        assert_eq!(b.retain(|p| p.data()[0] % 2 == 1), 8);
        let firsts: Vec<u8> = b.pkts().iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, (0..16).filter(|i| i % 2 == 1).collect::<Vec<u8>>());
        assert_eq!(b.pkts()[0].len(), SCRATCH_B / 16 - 1);
    }

    #[test]
    fn a_wrapping_queue_narrows_and_drops_only_what_its_inner_queue_appended() {
        // An inner queue appending two frames after one already there; the
        // wrapper keeps the bytes after a 2-byte "outer header" of the first
        // and drops the second.
        struct Inner;
        impl RxQueue for Inner {
            fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
                assert!(rx.push_copy(b"hhinner"));
                assert!(rx.push_copy(b"bad"));
                2
            }
            fn release(&mut self) {}
        }
        struct Wrap(Inner);
        impl RxQueue for Wrap {
            fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
                assert!(rx.push_copy(b"earlier"));
                let start = rx.len();
                self.0.burst(rx);
                for mut p in rx.appended_mut(start).iter_mut() {
                    if p.data() == b"bad" {
                        p.narrow(0, 0);
                    } else {
                        p.narrow(2, p.len() - 2);
                    }
                }
                assert_eq!(rx.retain_from(start, |p| !p.is_empty()), 1);
                rx.len()
            }
            fn release(&mut self) {}
        }
        let mut batch = RxBatch::with_capacity(8);
        let mut q = Wrap(Inner);
        let b = batch.receive(&mut q, 0, 0);
        let got: Vec<&[u8]> = b.pkts().iter().map(|p| p.data()).collect();
        assert_eq!(got, vec![&b"earlier"[..], &b"inner"[..]]);
    }

    #[test]
    #[should_panic(expected = "narrow outside the frame")]
    fn narrowing_past_the_end_panics() {
        let mut frames = vec![vec![0u8; 4]];
        with_frames(&mut frames, 0, 0, |p| p.get_mut(0).unwrap().narrow(2, 3));
    }

    #[test]
    fn with_frames_lends_owned_buffers() {
        let mut frames = vec![vec![0u8; 4], vec![1u8; 6]];
        let lens = with_frames(&mut frames, 2, 0, |p| {
            p.get_mut(1).unwrap().data_mut()[0] = 7;
            p.iter().map(|p| p.len()).collect::<Vec<_>>()
        });
        assert_eq!(lens, vec![4, 6]);
        assert_eq!(frames[1][0], 7);
    }
}
