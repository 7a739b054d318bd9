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
//!   [`RxFill::push_scratch`] pair, which copies into memory the batch owns;
//! - a logic that must lengthen a frame (push a VLAN tag) calls
//!   [`PktMut::insert`], which copies the frame into the unused rest of the
//!   same scratch memory and points the view at the copy. Each view records
//!   the scratch of the batch it lives in (never another batch's), and the
//!   copy stays valid until the batch is received into again, by which time
//!   the view is gone;
//! - a logic that sends differently modified copies of one frame (an
//!   output, then a header change, then another output) calls
//!   [`PktMut::copy_out`] / [`PktMut::copy_with`]: the frame as it is then
//!   is copied into the same scratch memory and becomes one more frame of
//!   the batch, with its own verdict, which the fabric forwards after the
//!   batch's own frames ([`Burst::copies`], [`Pkts::copies`]). The copies'
//!   views live in the scratch's fixed slots (allocated with the batch), so
//!   nothing is allocated on the data path.

use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;

use crate::drop::DropReason;
use crate::logic::Verdict;
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
/// Copies of frames ([`PktMut::copy_out`]) one batch can hold, per frame
/// of its capacity (a batch of 256 frames: 512 copies).
pub const COPIES_PER_FRAME: usize = 2;

/// Scratch memory of one batch: `cap` bytes at `base`, the first `used`
/// handed out (to frames a backend linearised, or a logic lengthened).
/// Owned by its [`RxBatch`] (or by [`with_frames`]) at a stable address,
/// touched only by the thread holding the batch.
///
/// It also holds the copies of frames a logic made ([`PktMut::copy_out`]):
/// `copy_cap` slots of a view and a verdict each, `copies` of them in use,
/// in the order they were made.
#[derive(Debug)]
struct Scratch {
    base: NonNull<u8>,
    cap: usize,
    used: Cell<usize>,
    copy_pkts: NonNull<Pkt>,
    copy_verdicts: NonNull<Verdict>,
    copy_cap: usize,
    copies: Cell<usize>,
}

impl Scratch {
    /// `cap` zeroed bytes and `copy_cap` copy slots, leaked until
    /// [`Scratch::free`].
    fn alloc(cap: usize, copy_cap: usize) -> NonNull<Scratch> {
        let buf: Box<[u8]> = vec![0u8; cap].into_boxed_slice();
        let raw = Box::into_raw(buf) as *mut u8;
        let pkts: Box<[Pkt]> = (0..copy_cap).map(|_| Pkt::empty()).collect();
        let verdicts: Box<[Verdict]> =
            vec![Verdict::Drop(DropReason::NoDestination); copy_cap].into_boxed_slice();
        let s = Box::new(Scratch {
            // SAFETY: Box::into_raw never returns null.
            base: unsafe { NonNull::new_unchecked(raw) },
            cap,
            used: Cell::new(0),
            // SAFETY: Box::into_raw never returns null (a dangling but
            // non-null pointer for an empty slice).
            copy_pkts: unsafe { NonNull::new_unchecked(Box::into_raw(pkts) as *mut Pkt) },
            // SAFETY: as above.
            copy_verdicts: unsafe {
                NonNull::new_unchecked(Box::into_raw(verdicts) as *mut Verdict)
            },
            copy_cap,
            copies: Cell::new(0),
        });
        // SAFETY: Box::into_raw never returns null.
        unsafe { NonNull::new_unchecked(Box::into_raw(s)) }
    }

    /// Frees what `alloc` returned.
    ///
    /// # Safety
    /// `s` came from `alloc`, is freed once, and no view into it is used
    /// afterwards.
    unsafe fn free(s: NonNull<Scratch>) {
        // SAFETY: the caller's contract; the boxes were made in `alloc`.
        unsafe {
            let s = Box::from_raw(s.as_ptr());
            let slice = std::ptr::slice_from_raw_parts_mut(s.base.as_ptr(), s.cap);
            drop(Box::from_raw(slice));
            let p = std::ptr::slice_from_raw_parts_mut(s.copy_pkts.as_ptr(), s.copy_cap);
            drop(Box::from_raw(p));
            let v = std::ptr::slice_from_raw_parts_mut(s.copy_verdicts.as_ptr(), s.copy_cap);
            drop(Box::from_raw(v));
        }
    }

    /// Empties the scratch: nothing handed out, no copies.
    #[inline]
    fn reset(&self) {
        self.used.set(0);
        self.copies.set(0);
    }

    /// The copies made so far: their views and verdicts.
    #[inline]
    fn copies(&self) -> (&[Pkt], &[Verdict]) {
        let n = self.copies.get();
        // SAFETY: slots 0..n were written by `PktMut::copy_with`; the
        // caller holds the batch (or `Pkts`) by shared reference, so no
        // `PktMut`, and with it no new copy, exists while these live.
        unsafe {
            (
                std::slice::from_raw_parts(self.copy_pkts.as_ptr(), n),
                std::slice::from_raw_parts(self.copy_verdicts.as_ptr(), n),
            )
        }
    }

    /// Bytes not handed out yet.
    #[inline]
    fn left(&self) -> usize {
        self.cap - self.used.get()
    }

    /// The next `len` bytes not handed out yet (not marked used).
    #[inline]
    fn peek(&self, len: usize) -> Option<*mut u8> {
        if len > self.left() {
            return None;
        }
        // SAFETY: [used, used+len) is inside the allocation.
        Some(unsafe { self.base.as_ptr().add(self.used.get()) })
    }
}

/// How much of a frame [`Pkt::prefetch_all`] asks for.
pub const PREFETCH_ALL_MAX_B: usize = 2048;

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
    /// The scratch memory of the batch the view lives in (null for views
    /// made with [`Pkt::new`]: those cannot be lengthened).
    scratch: *const Scratch,
}

// SAFETY: a Pkt is a view into a port buffer that the owning worker holds
// exclusively between burst and release; the batch holding it moves between
// threads only as a whole, with the worker.
unsafe impl Send for Pkt {}

impl Pkt {
    /// A view of nothing (unused slots).
    fn empty() -> Pkt {
        Pkt {
            ptr: std::ptr::null_mut(),
            len: 0,
            port: 0,
            queue: 0,
            scratch: std::ptr::null(),
        }
    }

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
            scratch: std::ptr::null(),
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

    /// Hints the CPU to fetch every cache line of the frame (of its first
    /// [`PREFETCH_ALL_MAX_B`] bytes): a copy loop over large frames asks
    /// for a frame ahead whole while it copies this one, so that the misses
    /// of the next frame overlap the work instead of waiting for the
    /// hardware prefetcher to find each new page. (Past 2 KiB, a jumbo
    /// frame's own first misses set the hardware prefetcher going, and more
    /// hints than the core has miss buffers are dropped anyway.)
    #[inline]
    pub fn prefetch_all(&self) {
        // Every line from the one holding the first byte to the one holding
        // the last (any address is fine: a prefetch never faults).
        let end = self.ptr as usize + (self.len as usize).min(PREFETCH_ALL_MAX_B);
        let mut line = self.ptr as usize & !63;
        while line < end {
            crate::sys::prefetch_read(line as *const u8);
            line += 64;
        }
    }

    /// For a copy loop over a run of frames, at frame `j`: when that frame
    /// is large (a copy that misses on every line when it came from
    /// another core or waited through a nap), asks for all of the frame two
    /// ahead (and of the next one too, at the first), so that its misses
    /// overlap this frame's copy.
    #[inline]
    pub fn prefetch_ahead_of_copy(run: &[Pkt], j: usize) {
        if run[j].len() < crate::sys::STREAM_MIN_B {
            return;
        }
        if j == 0 {
            if let Some(next) = run.get(1) {
                next.prefetch_all();
            }
        }
        if let Some(next) = run.get(j + 2) {
            next.prefetch_all();
        }
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

impl PktMut<'_> {
    /// Lengthens the frame by `n` zero bytes inserted at offset `at` (a
    /// logic pushing a VLAN tag: `insert(12, 4)`), by copying it into the
    /// unused rest of its batch's scratch memory and pointing the view at
    /// the copy; the received buffer is left as it was. A frame that is
    /// already the last thing in the scratch (lengthened before) grows in
    /// place. False, and nothing changed, when the scratch left is too
    /// small (or the view has none: [`Pkt::new`]), `at` is past the end,
    /// or the frame would exceed `u32::MAX` bytes. Never allocates; costs
    /// one copy of the frame.
    #[inline]
    pub fn insert(&mut self, at: usize, n: usize) -> bool {
        let len = self.0.len as usize;
        if self.0.scratch.is_null() || at > len {
            return false;
        }
        let Some(new_len) = len.checked_add(n).filter(|&l| l <= u32::MAX as usize) else {
            return false;
        };
        // SAFETY: a non-null `scratch` is that of the batch (or
        // `with_frames` call) the view lives in, which outlives the view.
        let s = unsafe { &*self.0.scratch };
        let end = s.peek(0).expect("0 bytes always fit");
        if len > 0 && self.0.ptr.wrapping_add(len) == end {
            // The frame ends where the used scratch does: it is scratch
            // this view alone refers to (views never share bytes), and the
            // `n` bytes after it are free.
            if s.peek(n).is_none() {
                return false;
            }
            // SAFETY: [ptr, ptr+len+n) is this view's scratch plus free
            // scratch; `copy` handles the overlap.
            unsafe {
                std::ptr::copy(self.0.ptr.add(at), self.0.ptr.add(at + n), len - at);
                std::ptr::write_bytes(self.0.ptr.add(at), 0, n);
            }
            s.used.set(s.used.get() + n);
            self.0.len = new_len as u32;
            return true;
        }
        let Some(dst) = s.peek(new_len) else {
            return false;
        };
        // SAFETY: `dst..dst+new_len` is scratch no view refers to (views
        // into scratch lie below `used`), the source is the view's own
        // frame, disjoint from it (it is received memory or scratch below
        // `used`).
        unsafe {
            std::ptr::copy_nonoverlapping(self.0.ptr, dst, at);
            std::ptr::write_bytes(dst.add(at), 0, n);
            std::ptr::copy_nonoverlapping(self.0.ptr.add(at), dst.add(at + n), len - at);
        }
        s.used.set(s.used.get() + new_len);
        self.0.ptr = dst;
        self.0.len = new_len as u32;
        true
    }
}

impl PktMut<'_> {
    /// Sends a copy of the frame as it is now with verdict `v`: the copy
    /// goes into the batch's scratch memory and is forwarded after the
    /// batch's own frames (see [`PktMut::copy_with`]). False, and nothing
    /// made, when there is no room.
    #[inline]
    pub fn copy_out(&mut self, v: Verdict) -> bool {
        self.copy_with(|_| Some(v))
    }

    /// Copies the frame as it is now into the unused rest of its batch's
    /// scratch memory, as one more frame of the batch, and lends the copy
    /// to `f`, which may rewrite, lengthen, shorten or copy it in turn, and
    /// answers its verdict: the fabric forwards the copy with it after the
    /// batch's own frames ([`Burst::copies`]). `None`: no copy after all
    /// (its slot is freed; its scratch bytes stay used until the batch is
    /// received into again). The frame itself is not touched. False, and
    /// `f` not called, when there is no room: the scratch left is too
    /// small, the batch's copy slots are taken, or the view has no scratch
    /// ([`Pkt::new`]). Never allocates; costs one copy of the frame.
    pub fn copy_with(&mut self, f: impl FnOnce(&mut PktMut<'_>) -> Option<Verdict>) -> bool {
        if self.0.scratch.is_null() {
            return false;
        }
        // SAFETY: a non-null `scratch` is that of the batch (or
        // `with_frames` call) the view lives in, which outlives the view.
        let s = unsafe { &*self.0.scratch };
        let k = s.copies.get();
        let len = self.0.len as usize;
        if k >= s.copy_cap {
            return false;
        }
        let Some(dst) = s.peek(len) else {
            return false;
        };
        // SAFETY: `dst..dst+len` is scratch no view refers to (views into
        // scratch lie below `used`); the source is this view's frame,
        // disjoint from it.
        unsafe { std::ptr::copy_nonoverlapping(self.0.ptr, dst, len) };
        s.used.set(s.used.get() + len);
        // SAFETY: k < copy_cap: slot k of the scratch's copy views, which
        // no reference points to (slots at or above `copies` are unused,
        // and shared slices of the used ones exist only while no PktMut
        // of the batch does).
        let slot = unsafe { &mut *s.copy_pkts.as_ptr().add(k) };
        *slot = Pkt {
            ptr: dst,
            len: self.0.len,
            port: self.0.port,
            queue: self.0.queue,
            scratch: self.0.scratch,
        };
        s.copies.set(k + 1);
        match f(&mut PktMut(slot)) {
            // SAFETY: k < copy_cap, a slot of the verdicts no reference
            // points to.
            Some(v) => unsafe { *s.copy_verdicts.as_ptr().add(k) = v },
            None => {
                // Copies `f` made of the copy moved down one slot.
                let n = s.copies.get();
                // SAFETY: slots k+1..n are used, k..n-1 inside the arrays;
                // `copy` handles the overlap; `slot` is no longer used.
                unsafe {
                    std::ptr::copy(
                        s.copy_pkts.as_ptr().add(k + 1),
                        s.copy_pkts.as_ptr().add(k),
                        n - k - 1,
                    );
                    std::ptr::copy(
                        s.copy_verdicts.as_ptr().add(k + 1),
                        s.copy_verdicts.as_ptr().add(k),
                        n - k - 1,
                    );
                }
                s.copies.set(n - 1);
            }
        }
        true
    }

    /// Takes back the last copy made in the batch (the caller made it of
    /// this frame, and none after it): this view becomes that copy (its
    /// bytes, as the copy's rewrites left them) and the copy's verdict is
    /// returned, the copy no longer sent on its own. None if the batch has
    /// no copy. (A logic that copied a frame for an output before a header
    /// change, and found no output after it, sends the copy as the frame
    /// itself: one frame received, one verdict.)
    pub fn take_back_copy(&mut self) -> Option<Verdict> {
        if self.0.scratch.is_null() {
            return None;
        }
        // SAFETY: as in `copy_with`.
        let s = unsafe { &*self.0.scratch };
        let n = s.copies.get();
        if n == 0 {
            return None;
        }
        // SAFETY: slot n-1 is used and no reference points to it (as in
        // `copy_with`).
        let (ptr, len, v) = unsafe {
            let p = &*s.copy_pkts.as_ptr().add(n - 1);
            (p.ptr, p.len, *s.copy_verdicts.as_ptr().add(n - 1))
        };
        self.0.ptr = ptr;
        self.0.len = len;
        s.copies.set(n - 1);
        Some(v)
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

    /// The copies a logic made of these frames ([`PktMut::copy_out`]),
    /// in the order made: their views and verdicts (none for views
    /// without scratch).
    #[inline]
    pub fn copies(&self) -> (&[Pkt], &[Verdict]) {
        match self.0.first() {
            // SAFETY: a non-null `scratch` is the batch's, alive while the
            // views are; `&self` keeps any PktMut (and new copy) away.
            Some(p) if !p.scratch.is_null() => unsafe { (*p.scratch).copies() },
            _ => (&[], &[]),
        }
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

/// Bytes of scratch memory [`with_frames`] gives each frame, beyond its
/// length, for [`PktMut::insert`].
pub const WITH_FRAMES_ROOM: usize = 64;
/// Copies ([`PktMut::copy_out`]) [`with_frames`] has room for per frame.
pub const WITH_FRAMES_COPIES: usize = 8;

/// Owned frames lent to `f` as one batch of views (tests and control-path
/// tools: allocates), with scratch memory of twice the frames' length plus
/// [`WITH_FRAMES_ROOM`] bytes per frame, and room for
/// [`WITH_FRAMES_COPIES`] copies of each frame (each as long as the frame
/// plus that room). A frame lengthened by the logic lives in that scratch:
/// read the views (not `frames`) to see it; the copies are
/// [`Pkts::copies`].
pub fn with_frames<R>(
    frames: &mut [Vec<u8>],
    port: PortId,
    queue: QueueId,
    f: impl FnOnce(&mut Pkts) -> R,
) -> R {
    /// Frees the scratch when the call ends, also on a panic in `f`.
    struct Free(NonNull<Scratch>);
    impl Drop for Free {
        fn drop(&mut self) {
            // SAFETY: allocated below, freed once; declared before the
            // views, so dropped after them.
            unsafe { Scratch::free(self.0) }
        }
    }
    let cap: usize = frames
        .iter()
        .map(|b| (2 + WITH_FRAMES_COPIES) * (b.len() + WITH_FRAMES_ROOM))
        .sum();
    let free = Free(Scratch::alloc(
        cap.max(1),
        WITH_FRAMES_COPIES * frames.len().max(1),
    ));
    let mut pkts: Vec<Pkt> = frames
        .iter_mut()
        .map(|b| {
            // SAFETY: `frames` is mutably borrowed for this whole call, so
            // the buffers outlive the views (dropped before we return) and
            // nobody else touches them meanwhile.
            let mut p = unsafe { Pkt::new(b.as_mut_ptr(), b.len() as u32, port, queue) };
            p.scratch = free.0.as_ptr();
            p
        })
        .collect();
    f(Pkts::new_mut(&mut pkts))
}

/// A fixed-capacity array of received frames plus the scratch memory where
/// backends linearise frames. Read only through [`Burst`].
pub struct RxBatch {
    pkts: Box<[Pkt]>,
    len: usize,
    /// Scratch memory (`SCRATCH_B` bytes), owned through a raw pointer so
    /// the views into it (and the views' pointers to it) stay valid while
    /// the batch is borrowed.
    scratch: NonNull<Scratch>,
}

// SAFETY: the batch owns its scratch allocation and its views are only
// dereferenced by the thread holding the batch (see Pkt).
unsafe impl Send for RxBatch {}

impl Drop for RxBatch {
    fn drop(&mut self) {
        // SAFETY: allocated in with_capacity, freed once; the views into
        // it are gone (a Burst borrows the batch).
        unsafe { Scratch::free(self.scratch) }
    }
}

impl RxBatch {
    /// Keeps, among the frames from index `from` on, those for which `keep`
    /// is true, in order; returns how many were removed.
    #[inline]
    fn retain_from(&mut self, from: usize, mut keep: impl FnMut(&Pkt) -> bool) -> usize {
        let from = from.min(self.len);
        // Frames before the first removed one stay where they are.
        let Some(first) = (from..self.len).find(|&r| !keep(&self.pkts[r])) else {
            return 0;
        };
        let mut w = first;
        for r in first + 1..self.len {
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
        let pkts = (0..cap).map(|_| Pkt::empty()).collect();
        Self {
            pkts,
            len: 0,
            scratch: Scratch::alloc(SCRATCH_B, cap * COPIES_PER_FRAME),
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
        self.clear();
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
        self.scratch().reset();
    }

    #[inline]
    fn scratch(&self) -> &Scratch {
        // SAFETY: allocated in with_capacity, freed only on drop.
        unsafe { self.scratch.as_ref() }
    }
}

/// What a backend's `RxQueue::burst` fills: append-only access to a batch.
pub struct RxFill<'b> {
    batch: &'b mut RxBatch,
    port: PortId,
    queue: QueueId,
    _not_send: PhantomData<*mut u8>,
}

impl<'b> RxFill<'b> {
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
            scratch: b.scratch.as_ptr(),
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
        let p = self.batch.scratch().peek(len)?;
        // SAFETY: [used, used+len) is inside the allocation and not viewed
        // by any pushed frame (those lie below `used`); `&mut self` keeps
        // a second slice from being handed out while this one lives.
        Some(unsafe { std::slice::from_raw_parts_mut(p, len) })
    }

    /// Appends the first `len` bytes of the scratch space last handed out
    /// by [`RxFill::scratch`] as a frame; false if the batch is full or
    /// `len` exceeds the scratch left.
    #[inline]
    pub fn push_scratch(&mut self, len: usize) -> bool {
        if len > u32::MAX as usize {
            return false;
        }
        let Some(ptr) = self.batch.scratch().peek(len) else {
            return false;
        };
        if !self.put(ptr, len as u32) {
            return false;
        }
        let s = self.batch.scratch();
        s.used.set(s.used.get() + len);
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

    /// A pusher for a run of zero-copy frames: the batch's fields (where the
    /// next view goes, how many fit, the port, queue and scratch every view
    /// records) in locals for the whole burst instead of reloaded for each
    /// frame ([`RxPusher`]).
    #[inline]
    pub fn pusher(&mut self) -> RxPusher<'_, 'b> {
        let b = &mut *self.batch;
        RxPusher {
            pkts: b.pkts.as_mut_ptr(),
            len: b.len,
            cap: b.pkts.len(),
            port: self.port,
            queue: self.queue,
            scratch: b.scratch.as_ptr(),
            fill: self,
        }
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

/// [`RxFill::push`] for a whole burst: what every push reads of the batch
/// is held here, in locals the compiler keeps in registers, and the count
/// is written back once when the pusher is dropped (or around
/// [`RxPusher::with_fill`], for the rare frame that needs the full
/// `RxFill`, such as one linearised into scratch).
pub struct RxPusher<'f, 'b> {
    fill: &'f mut RxFill<'b>,
    pkts: *mut Pkt,
    len: usize,
    cap: usize,
    port: PortId,
    queue: QueueId,
    scratch: *const Scratch,
}

impl<'b> RxPusher<'_, 'b> {
    /// How many more frames fit.
    #[inline]
    pub fn room(&self) -> usize {
        self.cap - self.len
    }

    /// [`RxFill::push`]: appends a zero-copy view of port memory; false (and
    /// nothing appended) if the batch is full.
    ///
    /// # Safety
    /// As [`RxFill::push`].
    #[inline]
    pub unsafe fn push(&mut self, ptr: *mut u8, len: u32) -> bool {
        if self.len == self.cap {
            return false;
        }
        // SAFETY: the batch is not full (checked above); the rest is our
        // caller's contract.
        unsafe { self.push_unchecked(ptr, len) };
        true
    }

    /// [`RxPusher::push`] without the room check, for a burst that sized
    /// itself by [`RxPusher::room`] (or [`RxFill::room`]) first.
    ///
    /// # Safety
    /// As [`RxFill::push`], and fewer than `room()` frames were pushed since
    /// the caller looked (the batch is not full).
    #[inline]
    pub unsafe fn push_unchecked(&mut self, ptr: *mut u8, len: u32) {
        debug_assert!(self.len < self.cap);
        // SAFETY: len < cap (our caller's contract), the length of the
        // batch's `pkts`, which `pkts` points to (derived from the batch
        // this pusher borrows mutably, after any other use of it: see
        // `with_fill`).
        unsafe {
            self.pkts.add(self.len).write(Pkt {
                ptr,
                len,
                port: self.port,
                queue: self.queue,
                scratch: self.scratch,
            });
        }
        self.len += 1;
    }

    /// Runs `f` on the [`RxFill`] itself (frames pushed so far counted in
    /// it first, and what `f` appended counted here after).
    #[inline]
    pub fn with_fill<R>(&mut self, f: impl FnOnce(&mut RxFill<'b>) -> R) -> R {
        self.fill.batch.len = self.len;
        let r = f(self.fill);
        let b = &mut *self.fill.batch;
        self.len = b.len;
        self.pkts = b.pkts.as_mut_ptr();
        r
    }
}

impl Drop for RxPusher<'_, '_> {
    #[inline]
    fn drop(&mut self) {
        self.fill.batch.len = self.len;
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

    /// The copies the logic made of the held frames ([`PktMut::copy_out`]),
    /// in the order made, with their verdicts: forwarded after the frames.
    #[inline]
    pub fn copies(&self) -> (&[Pkt], &[Verdict]) {
        self.batch.scratch().copies()
    }

    /// The held frames, writable one at a time.
    #[inline]
    pub fn pkts_mut(&mut self) -> &mut Pkts {
        let n = self.batch.len;
        Pkts::new_mut(&mut self.batch.pkts[..n])
    }

    /// The held frames' bytes, and how many are shorter than `min` bytes
    /// (one pass: the worker's receive count and its runt check).
    #[inline]
    pub fn bytes_and_runts(&self, min: usize) -> (u64, usize) {
        let (mut bytes, mut short) = (0u64, 0usize);
        for p in &self.batch.pkts[..self.batch.len] {
            bytes += p.len() as u64;
            short += (p.len() < min) as usize;
        }
        (bytes, short)
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
    fn runts_are_counted_and_removed_in_one_pass_each() {
        // Frames of 20, 3, 14, 13, 60 bytes, then Q's scratch frames of 2
        // and 3: four shorter than 14.
        let mut q = Q {
            bufs: [20usize, 3, 14, 13, 60]
                .iter()
                .enumerate()
                .map(|(i, &n)| vec![i as u8; n])
                .collect(),
            released: 0,
        };
        let mut batch = RxBatch::with_capacity(8);
        let mut b = batch.receive(&mut q, 0, 0);
        assert_eq!(b.bytes_and_runts(14), (115, 4));
        // The first removed frame is not the first frame: those before it
        // stay, those after it move up, in order.
        assert_eq!(b.retain(|p| p.len() >= 14), 4);
        let firsts: Vec<u8> = b.pkts().iter().map(|p| p.data()[0]).collect();
        assert_eq!(firsts, [0, 2, 4]);
        assert_eq!(b.bytes_and_runts(14), (94, 0));
        // Nothing to remove: nothing moves.
        assert_eq!(b.retain(|p| p.len() >= 14), 0);
        assert_eq!(b.len(), 3);
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
    fn insert_copies_into_the_batch_scratch_and_runs_out_cleanly() {
        // Two received buffers; the first view is lengthened by 4 bytes at
        // 12, the buffer itself untouched, the copy in the batch's scratch.
        struct Two(Vec<Vec<u8>>);
        impl RxQueue for Two {
            fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
                for b in self.0.iter_mut() {
                    // SAFETY: owned by self, borrowed by the Burst.
                    unsafe { rx.push(b.as_mut_ptr(), b.len() as u32) };
                }
                rx.len()
            }
            fn release(&mut self) {}
        }
        let f: Vec<u8> = (0..20u8).collect();
        let mut q = Two(vec![f.clone(), vec![7; SCRATCH_B]]);
        let mut batch = RxBatch::with_capacity(4);
        {
            let mut b = batch.receive(&mut q, 0, 0);
            let mut p = b.pkts_mut().get_mut(0).unwrap();
            assert!(p.insert(12, 4));
            p.data_mut()[12..16].copy_from_slice(&[0x81, 0, 0, 5]);
            let mut want = f[..12].to_vec();
            want.extend([0x81, 0, 0, 5]);
            want.extend(&f[12..]);
            assert_eq!(p.data(), &want[..]);
            assert!(!p.insert(25, 1), "past the end");
            // Lengthened again: the copy is the last thing in the scratch,
            // so it grows in place.
            let at = p.data().as_ptr();
            assert!(p.insert(24, 2));
            assert_eq!(p.data().as_ptr(), at);
            assert_eq!(p.len(), 26);
            assert_eq!(&p.data()[..24], &want[..]);
            assert_eq!(&p.data()[24..], &[0, 0]);
            // The other frame is the whole scratch's size: no room for it.
            let mut big = b.pkts_mut().get_mut(1).unwrap();
            assert!(!big.insert(0, 1));
            assert_eq!(big.len(), SCRATCH_B, "unchanged");
        }
        assert_eq!(q.0[0], f, "the received buffer is untouched");
        // The next burst starts with the whole scratch free again.
        let mut q = Two(vec![vec![1; SCRATCH_B - 8]]);
        let mut b = batch.receive(&mut q, 0, 0);
        assert!(b.pkts_mut().get_mut(0).unwrap().insert(0, 8));
        assert!(!b.pkts_mut().get_mut(0).unwrap().insert(0, 1));
    }

    #[test]
    fn views_without_scratch_cannot_grow_and_with_frames_views_can() {
        let mut buf = vec![1u8; 16];
        // SAFETY: `buf` outlives the view and is not touched meanwhile.
        let mut p = [unsafe { Pkt::new(buf.as_mut_ptr(), 16, 0, 0) }];
        assert!(!Pkts::new_mut(&mut p).get_mut(0).unwrap().insert(0, 4));
        let mut frames = vec![vec![2u8; 14], vec![3u8; 60]];
        let lens = with_frames(&mut frames, 0, 0, |p| {
            for mut x in p.iter_mut() {
                assert!(x.insert(12, 4));
            }
            p.iter().map(|x| x.len()).collect::<Vec<_>>()
        });
        assert_eq!(lens, vec![18, 64]);
        assert_eq!(frames[0], vec![2u8; 14], "the owned buffers are untouched");
    }

    #[test]
    fn copies_are_frames_of_the_batch_with_their_own_verdicts() {
        use crate::logic::Verdict;
        let mut frames = vec![vec![1u8; 20], vec![2u8; 30]];
        let (copies, views) = with_frames(&mut frames, 0, 0, |p| {
            assert_eq!(p.copies().0.len(), 0);
            {
                let mut a = p.get_mut(0).unwrap();
                // The frame as it is now goes to port 5; then it changes.
                assert!(a.copy_out(Verdict::Port(5)));
                a.data_mut()[0] = 9;
                // A copy that lengthens itself and copies itself in turn.
                assert!(a.copy_with(|c| {
                    assert!(c.insert(12, 4));
                    assert!(c.copy_out(Verdict::Port(7)));
                    c.data_mut()[1] = 8;
                    Some(Verdict::Flood)
                }));
                // A copy given up: its slot goes, the later ones move down.
                assert!(a.copy_with(|c| {
                    assert!(c.copy_out(Verdict::Port(6)));
                    None
                }));
            }
            {
                // The last copy taken back as the frame itself.
                let mut b = p.get_mut(1).unwrap();
                assert!(b.copy_out(Verdict::Port(3)));
                b.data_mut()[0] = 4;
                assert_eq!(b.take_back_copy(), Some(Verdict::Port(3)));
                assert_eq!(b.data(), &[2u8; 30][..], "the copy's bytes");
            }
            let (cp, cv) = p.copies();
            let copies: Vec<(Verdict, Vec<u8>)> = cv
                .iter()
                .zip(cp)
                .map(|(v, c)| (*v, c.data().to_vec()))
                .collect();
            (
                copies,
                p.iter().map(|x| x.data().to_vec()).collect::<Vec<_>>(),
            )
        });
        let mut grown = vec![1u8; 12];
        grown[0] = 9;
        grown.extend([0, 0, 0, 0]);
        grown.extend([1u8; 8]);
        let mut grown8 = grown.clone();
        grown8[1] = 8;
        assert_eq!(
            copies,
            vec![
                (Verdict::Port(5), vec![1u8; 20]),
                (Verdict::Flood, grown8),
                (Verdict::Port(7), grown),
                (Verdict::Port(6), {
                    let mut v = vec![1u8; 20];
                    v[0] = 9;
                    v
                }),
            ]
        );
        assert_eq!(views[0][0], 9);
        // (The write before the take-back went to the received buffer.)
        assert_eq!(frames[1][0], 4);
    }

    #[test]
    fn copies_run_out_cleanly_and_a_new_burst_has_none() {
        use crate::logic::Verdict;
        struct One(Vec<u8>);
        impl RxQueue for One {
            fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
                // SAFETY: owned by self, borrowed by the Burst.
                unsafe { rx.push(self.0.as_mut_ptr(), self.0.len() as u32) };
                1
            }
            fn release(&mut self) {}
        }
        let mut q = One(vec![5u8; 1000]);
        let mut batch = RxBatch::with_capacity(2);
        {
            let mut b = batch.receive(&mut q, 0, 0);
            let mut p = b.pkts_mut().get_mut(0).unwrap();
            // 2 frames of capacity: 4 copy slots.
            for _ in 0..4 {
                assert!(p.copy_out(Verdict::Port(1)));
            }
            assert!(!p.copy_out(Verdict::Port(1)), "slots taken");
            assert_eq!(b.copies().0.len(), 4);
        }
        let b = batch.receive(&mut q, 0, 0);
        assert_eq!(b.copies().0.len(), 0);
        // Views without scratch make no copy.
        let mut buf = vec![1u8; 16];
        // SAFETY: `buf` outlives the view and is not touched meanwhile.
        let mut v = [unsafe { Pkt::new(buf.as_mut_ptr(), 16, 0, 0) }];
        let pk = Pkts::new_mut(&mut v);
        assert!(!pk.get_mut(0).unwrap().copy_out(Verdict::Port(1)));
        assert_eq!(pk.get_mut(0).unwrap().take_back_copy(), None);
        assert_eq!(pk.copies().0.len(), 0);
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
