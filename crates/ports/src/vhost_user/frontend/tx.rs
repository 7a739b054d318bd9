//! The frontend's transmit queues: queue `q` fills the guest's transmit
//! virtqueue `2q+1`, in order (position `p` is descriptor `p % size`, one
//! descriptor per frame: the 12-byte virtio-net header, written once, and
//! the frame, copied or filled in place), under a `TxLock` whose leases
//! pin the session. Used entries are reclaimed in bulk and checked (used
//! index at most what was published, ids published and not yet returned);
//! a lie is counted and stops the queue until the control thread
//! reconnects.

use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use fabric::{DropReason, Lease, TxDrops, TxFill, TxFrames, TxLock, TxProducer, TxQueue};
use vmm_sys_util::eventfd::EventFd;

use super::{BackendLie, FrontendFault, HDR_LEN};
use crate::vhost_user::sys::{Buffers, Desc, Ring};
use crate::vhost_user::vring::{need_event, USED_F_NO_NOTIFY};

/// One running transmit virtqueue (ours to fill, the backend's to drain).
///
/// In order, like DPDK's in-order virtio-user: ring position `p` always
/// uses descriptor `p % size` and its buffer, so the available ring
/// (`avail[i] = i`), every descriptor's address and flags and every
/// virtio-net header (zero) are written once, when the session starts.
/// Per frame only the frame and its descriptor's length are written; per
/// burst the available index. Used entries are reclaimed in bulk, only
/// when the free count runs low. A backend that completes out of order is
/// still served (a position is reused once its descriptor is back and
/// every older one is), just with less room.
pub(super) struct TxSession {
    ring: Ring,
    bufs: Buffers,
    kick: Arc<EventFd>,
    /// `VIRTIO_RING_F_EVENT_IDX` negotiated: kick by `avail_event`.
    pub(super) event_idx: bool,
    /// Fabric slot that maps onto ring position 0 (`u64::MAX` until the
    /// first `free_slots`/`reserve` of the session).
    base: AtomicU64,
    /// Whether descriptor `i` is reserved or held by the backend (from
    /// `reserve` until its used entry comes back).
    held: Box<[AtomicBool]>,
    /// The length last written into descriptor `i` (writers of disjoint
    /// reserved positions touch disjoint entries).
    lens: Box<[AtomicU32]>,
    /// What buffer `i` holds, as its last in-place writer described it
    /// (`TxFill`; 0: unknown, e.g. after a copy). Fresh memory: all 0.
    tags: Box<[AtomicU64]>,
    /// Oldest position not yet back (every position before it is free).
    tail: AtomicU16,
    /// Position after the last one reserved.
    head: AtomicU16,
    last_used: AtomicU16,
    published: AtomicU16,
    broken: AtomicBool,
}

impl TxSession {
    /// Writes the descriptors, the available ring and the headers; fails if
    /// the buffers are not inside the memory.
    pub(super) fn new(
        ring: Ring,
        bufs_gpa: u64,
        buf_b: u64,
        kick: Arc<EventFd>,
    ) -> Result<Self, String> {
        let n = ring.size();
        let bufs = Buffers::new(ring.mem_arc().clone(), bufs_gpa, n as u32, buf_b as usize)
            .ok_or("transmit buffers outside the memory")?;
        for id in 0..n {
            ring.set_desc(
                id,
                Desc {
                    addr: bufs_gpa + id as u64 * buf_b,
                    len: HDR_LEN as u32,
                    flags: 0,
                    next: 0,
                },
            );
            ring.set_avail_entry(id, id);
            // The virtio-net header: no offloads, one buffer.
            bufs.write(id as u32, 0, &[0u8; HDR_LEN]);
        }
        Ok(Self {
            ring,
            bufs,
            kick,
            event_idx: false,
            base: AtomicU64::new(u64::MAX),
            held: (0..n).map(|_| AtomicBool::new(false)).collect(),
            lens: (0..n).map(|_| AtomicU32::new(HDR_LEN as u32)).collect(),
            tags: (0..n).map(|_| AtomicU64::new(0)).collect(),
            tail: AtomicU16::new(0),
            head: AtomicU16::new(0),
            last_used: AtomicU16::new(0),
            published: AtomicU16::new(0),
            broken: AtomicBool::new(false),
        })
    }

    /// Free positions (reserve may take this many).
    #[inline]
    fn free(&self) -> u32 {
        let inflight = self
            .head
            .load(Relaxed)
            .wrapping_sub(self.tail.load(Relaxed));
        self.ring.size() as u32 - inflight as u32
    }

    /// Takes back what the backend used, checking every entry: the used
    /// index may not pass what was published, and every id must be one
    /// published and not yet returned.
    fn reclaim(&self, fault: &FrontendFault) {
        if self.broken.load(Relaxed) {
            return;
        }
        let used = self.ring.used_idx_acquire();
        let last = self.last_used.load(Relaxed);
        let n = used.wrapping_sub(last);
        if n == 0 {
            return;
        }
        let published = self.published.load(Relaxed);
        if n > published.wrapping_sub(last) {
            fault.lie(BackendLie::UsedIdx, &self.broken);
            return;
        }
        let mask = self.ring.size() - 1;
        let mut tail = self.tail.load(Relaxed);
        let window = published.wrapping_sub(tail);
        for i in 0..n {
            let (id, _len) = self.ring.used_entry(last.wrapping_add(i));
            // An id is in the window if its position, counted from the
            // tail, is one published.
            let ok = id <= mask as u32
                && ((id as u16).wrapping_sub(tail) & mask) < window
                && self.held[id as usize].load(Relaxed);
            if !ok {
                fault.lie(BackendLie::UsedId, &self.broken);
                return;
            }
            self.held[id as usize].store(false, Relaxed);
        }
        // Every position up to the first one still held is free again (all
        // of them when the backend completes in order).
        while tail != published && !self.held[(tail & mask) as usize].load(Relaxed) {
            tail = tail.wrapping_add(1);
        }
        self.tail.store(tail, Relaxed);
        self.last_used.store(used, Relaxed);
    }

    fn base_or(&self, reserved: u64) -> u64 {
        let b = self.base.load(Relaxed);
        if b != u64::MAX {
            return b;
        }
        self.base.store(reserved, Relaxed);
        reserved
    }
}

/// Transmit queue `q`: the guest's transmit virtqueue `2q+1`.
///
/// Reservations are made under the queue's [`TxLock`] and pin the session
/// they were made against in the [`Lease`], so writers copy frames
/// without loading the current session per frame.
pub struct FrontendTx {
    pub(super) session: Arc<TxSlot>,
    lock: TxLock<FrontendProducer>,
    /// Largest frame transmitted (`FrontendConfig::tx_frame_b`, or
    /// `max_frame_b`): what a transmit buffer holds.
    max_frame_b: usize,
    fault: Arc<FrontendFault>,
}

/// Where the control thread puts transmit queue `q`'s current session,
/// with a generation number that changes after every store (as
/// [`RxSlot`](super::rx::RxSlot)): the producer keeps the session it loaded and loads the
/// `ArcSwap` again only when the number moved, instead of on every look
/// at free slots, reservation and publish.
#[derive(Default)]
pub(super) struct TxSlot {
    pub(super) session: ArcSwapOption<TxSession>,
    generation: AtomicU64,
    /// Frames published on this queue (`txqN_frames`; written under the
    /// queue's `TxLock` only, once per publish).
    pub(super) frames: AtomicU64,
}

impl TxSlot {
    pub(super) fn store(&self, s: Option<Arc<TxSession>>) {
        self.session.store(s);
        self.generation.fetch_add(1, Release);
    }

    pub(super) fn take(&self) -> Option<Arc<TxSession>> {
        let old = self.session.swap(None);
        self.generation.fetch_add(1, Release);
        old
    }
}

/// The reservation state of a transmit queue (inside its `TxLock`).
struct FrontendProducer {
    slot: Arc<TxSlot>,
    /// The slot's generation `held` was loaded at.
    seen: u64,
    /// The session current at `seen`. A departed session held here is
    /// never dropped last by the producer: teardown hands it to the
    /// port's `Retired` list first, which keeps it while we hold it.
    held: Option<Arc<TxSession>>,
    /// Next fabric slot.
    next_slot: u64,
    fault: Arc<FrontendFault>,
}

impl FrontendProducer {
    /// The current session: one load of the slot's generation, the
    /// `ArcSwap` only after a (re)connect or teardown.
    #[inline]
    fn current(&mut self) -> Option<&Arc<TxSession>> {
        current(&self.slot, &mut self.seen, &mut self.held)
    }
}

/// [`FrontendProducer::current`] on the producer's fields, so that its
/// other fields stay usable while the session is borrowed.
#[inline]
fn current<'a>(
    slot: &TxSlot,
    seen: &mut u64,
    held: &'a mut Option<Arc<TxSession>>,
) -> Option<&'a Arc<TxSession>> {
    let g = slot.generation.load(Acquire);
    if g != *seen {
        *seen = g;
        *held = slot.session.load_full();
    }
    held.as_ref()
}

impl FrontendTx {
    pub(super) fn new(max_frame_b: usize, fault: Arc<FrontendFault>) -> Self {
        let session = Arc::new(TxSlot::default());
        Self {
            lock: TxLock::new(FrontendProducer {
                slot: session.clone(),
                seen: u64::MAX,
                held: None,
                next_slot: 0,
                fault: fault.clone(),
            }),
            session,
            max_frame_b,
            fault,
        }
    }

    fn stale(&self, drops: &mut TxDrops, len: usize) {
        self.fault.tx_stale.fetch_add(1, Relaxed);
        drops.add(DropReason::TxStale, len);
    }

    /// Writes one frame into descriptor `id`'s buffer; false if it could
    /// not be written.
    #[inline]
    fn write_one(&self, s: &TxSession, id: u16, frame: &[u8]) -> bool {
        let ok = frame.len() <= self.max_frame_b && s.bufs.write(id as u32, HDR_LEN, frame);
        if ok {
            // A copied frame: no in-place writer's template any more.
            let tag = &s.tags[id as usize];
            if tag.load(Relaxed) != 0 {
                tag.store(0, Relaxed);
            }
        }
        self.set_len(s, id, ok, frame.len());
        ok
    }

    /// Sets descriptor `id`'s length for a frame of `frame_len` bytes
    /// written (`ok`) or not.
    #[inline]
    fn set_len(&self, s: &TxSession, id: u16, ok: bool, frame_len: usize) {
        // A frame that cannot be written is published all the same, as a
        // header alone (an empty frame the backend drops), never as the
        // buffer's last one.
        let len = if ok { HDR_LEN + frame_len } else { HDR_LEN } as u32;
        // Only a changed length is written: the descriptor table is a line
        // the backend reads for every frame, and traffic of one size
        // leaves it alone after the first lap (the shadow is ours; the
        // table is never read back).
        let shadow = &s.lens[id as usize];
        if shadow.load(Relaxed) != len {
            shadow.store(len, Relaxed);
            s.ring.set_desc_len(id, len);
        }
    }
}

/// Free positions below which `free_slots` reclaims used entries (a
/// quarter of the ring): reading the used index pulls a cache line the
/// backend writes, so it is done once per many bursts, not every one.
fn reclaim_below(size: u16) -> u32 {
    (size as u32 / 4).max(1)
}

impl TxProducer for FrontendProducer {
    fn free_slots(&mut self) -> u32 {
        let Some(s) = current(&self.slot, &mut self.seen, &mut self.held) else {
            return 0;
        };
        s.base_or(self.next_slot);
        if s.free() < reclaim_below(s.ring.size()) {
            s.reclaim(&self.fault);
        }
        if s.broken.load(Relaxed) {
            return 0;
        }
        s.free()
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.next_slot;
        self.next_slot += n as u64;
        let Some(s) = self.current().cloned() else {
            return Lease::at(first);
        };
        let base = s.base_or(first);
        // Slots map onto positions one to one from `base` on.
        debug_assert_eq!((first - base) as u16, s.head.load(Relaxed));
        if n > s.free() {
            // More than free_slots allowed (a caller breaking the
            // contract): those positions are in flight. Stop the queue
            // rather than hand the backend a buffer twice.
            s.broken.store(true, Relaxed);
            return Lease::at(first);
        }
        let mask = s.ring.size() - 1;
        let mut head = s.head.load(Relaxed);
        for _ in 0..n {
            s.held[(head & mask) as usize].store(true, Relaxed);
            head = head.wrapping_add(1);
        }
        s.head.store(head, Relaxed);
        let mut lease = Lease::at(first);
        lease.base = base;
        lease.pin = Some(s);
        lease
    }

    fn publish_deferred(&mut self, tail: u64, _drops: &mut TxDrops) -> bool {
        let Some(s) = current(&self.slot, &mut self.seen, &mut self.held) else {
            return false;
        };
        let base = s.base.load(Relaxed);
        // A session that started after the reservation has its base at or
        // past it: nothing of it to publish.
        if base == u64::MAX || tail <= base || s.broken.load(Relaxed) {
            return false;
        }
        let idx = (tail - base) as u16;
        let old = s.published.load(Relaxed);
        if idx == old {
            return false;
        }
        s.ring.set_avail_idx(idx);
        s.published.store(idx, Relaxed);
        // One slot is one frame here (`slots_for` is 0 or 1). Single
        // writer (the TxLock): a load and a store, not a locked add.
        let f = &self.slot.frames;
        f.store(f.load(Relaxed) + idx.wrapping_sub(old) as u64, Relaxed);
        // The index store before the backend's suppression is read (the
        // backend orders its side the same way).
        fence(SeqCst);
        if s.event_idx {
            need_event(s.ring.avail_event(), idx, old)
        } else {
            s.ring.used_flags() & USED_F_NO_NOTIFY == 0
        }
    }
}

impl TxQueue for FrontendTx {
    fn slots_for(&self, len: usize) -> u32 {
        (len <= self.max_frame_b) as u32
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops) {
        // The session the reservation was made against, pinned by the
        // lease (its memory stays mapped while we write).
        // Its base (the slot at ring position 0) was fixed before the
        // reservation and is in the lease; whether it broke is read once
        // per burst (frames written into a session that breaks meanwhile
        // are never published: `publish_deferred` refuses).
        let mut slot = lease.first;
        let s = match lease.pinned::<TxSession>() {
            Some(s) if slot >= lease.base && !s.broken.load(Relaxed) => s,
            _ => {
                for (f, _) in frames.iter() {
                    self.stale(drops, f.len());
                }
                return;
            }
        };
        let mask = s.ring.size() - 1;
        for (f, ns) in frames.iter() {
            let id = (slot - lease.base) as u16 & mask;
            if !self.write_one(s, id, f) {
                self.stale(drops, f.len());
            }
            slot += ns as u64;
        }
    }

    fn kick(&self, _drops: &mut TxDrops) {
        if let Some(s) = self.session.session.load().as_ref() {
            self.fault.kicks.fetch_add(1, Relaxed);
            crate::guard::notify(s.kick.as_raw_fd());
        }
    }

    fn fills_in_place(&self) -> bool {
        true
    }

    unsafe fn fill_in_place(
        &self,
        lease: &Lease,
        n: u32,
        fill: &mut dyn TxFill,
        drops: &mut TxDrops,
    ) {
        // As write_burst: the pinned session, checked once per call.
        let mut slot = lease.first;
        let s = match lease.pinned::<TxSession>() {
            Some(s) if slot >= lease.base && !s.broken.load(Relaxed) => s,
            _ => {
                for _ in 0..n {
                    let len = fill.skip();
                    self.stale(drops, len);
                }
                return;
            }
        };
        let mask = s.ring.size() - 1;
        // The frame area of a buffer: after the header, up to the largest
        // frame of the port.
        let cap = self
            .max_frame_b
            .min(s.bufs.stride().saturating_sub(HDR_LEN));
        for _ in 0..n {
            let id = (slot - lease.base) as u16 & mask;
            // SAFETY: position `id` is reserved by this caller and not yet
            // published (write_burst's contract): the backend does not hold
            // its buffer and no other writer of ours touches it.
            let (len, ok) = match unsafe { s.bufs.slice_mut(id as u32, HDR_LEN, cap) } {
                Some(buf) => {
                    let t = &s.tags[id as usize];
                    let mut tag = t.load(Relaxed);
                    let len = fill.fill(buf, &mut tag);
                    t.store(tag, Relaxed);
                    (len, len <= cap)
                }
                // (not reached: id < size and cap fits the stride)
                None => (fill.skip(), false),
            };
            self.set_len(s, id, ok, len);
            if !ok {
                self.stale(drops, len);
            }
            slot += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vhost_user::frontend::testutil::*;
    use crate::vhost_user::frontend::GPA_BASE;
    use crate::vhost_user::sys::GuestMemory;

    fn tx_queue(fault: &Arc<FrontendFault>) -> (Arc<GuestMemory>, FrontendTx, Arc<TxSession>) {
        let (mem, r) = ring();
        let s = Arc::new(TxSession::new(r, GPA_BASE + BUFS, BUF, kick()).unwrap());
        let tx = FrontendTx::new(200, fault.clone());
        tx.session.store(Some(s.clone()));
        (mem, tx, s)
    }

    /// Slots the queue's producer offers now.
    fn free(tx: &FrontendTx) -> u32 {
        tx.lock.lock().producer.free_slots()
    }

    /// Reserves, writes and publishes `k` frames of 64 bytes.
    fn send(tx: &FrontendTx, k: u64) {
        // SAFETY: the tests are the queue's only user.
        let mut o = unsafe { fabric::OwnedTx::new(tx) };
        let first = o.reserve(k as u32);
        for j in 0..k {
            o.write(first + j, 1, &[j as u8; 64]);
        }
        o.publish(first + k);
    }

    #[test]
    fn transmit_is_in_order_and_written_once() {
        let fault = Arc::new(FrontendFault::default());
        let (mem, tx, _s) = tx_queue(&fault);
        let dev = device_ring(&mem);
        assert_eq!(free(&tx), N as u32);
        send(&tx, 3);
        assert_eq!(dev.avail_idx(), 3);
        for i in 0..N {
            // Position i is descriptor i, whose buffer is buffer i.
            assert_eq!(dev.avail_entry(i), i);
            let d = dev.desc(i);
            assert_eq!(d.addr, GPA_BASE + 0x4000 + i as u64 * BUF);
            assert_eq!(d.flags, 0);
        }
        let d = dev.desc(1);
        assert_eq!(d.len as usize, HDR_LEN + 64);
        let mut got = [0u8; HDR_LEN + 64];
        assert!(mem.gpa(d.addr, got.len() as u64).unwrap().read(0, &mut got));
        assert_eq!(got[..HDR_LEN], [0u8; HDR_LEN], "zero virtio-net header");
        assert_eq!(got[HDR_LEN..], [1u8; 64]);
        // A frame that cannot be written (larger than the port's largest)
        // still takes its position, as a header alone: not the old frame.
        // SAFETY: this test is the queue's only user.
        let mut o = unsafe { fabric::OwnedTx::new(&tx) };
        let first = o.reserve(1);
        o.write(first, 1, &[7u8; 201]);
        o.publish(first + 1);
        assert_eq!(dev.avail_idx(), 4);
        assert_eq!(dev.desc(3).len as usize, HDR_LEN);
        assert_eq!(fault.tx_stale.load(Relaxed), 1);
        assert_eq!(fault.total_lies(), 0);
    }

    #[test]
    fn transmit_lengths_follow_the_frames_over_laps() {
        let fault = Arc::new(FrontendFault::default());
        let (mem, tx, _s) = tx_queue(&fault);
        let dev = device_ring(&mem);
        let mut used = 0u16;
        // Three laps of the ring: 64 B, 64 B again, then 100 B frames in
        // the odd positions; each lap returned in order by the device.
        for lap in 0..3u16 {
            // SAFETY: this test is the queue's only user.
            let mut o = unsafe { fabric::OwnedTx::new(&tx) };
            assert_eq!(o.free_slots(), N as u32, "lap {lap}");
            let first = o.reserve(N as u32);
            for j in 0..N as u64 {
                let len = if lap == 2 && j % 2 == 1 { 100 } else { 64 };
                o.write(first + j, 1, &vec![lap as u8; len]);
            }
            o.publish(first + N as u64);
            for i in 0..N {
                let d = dev.desc(i);
                let len = if lap == 2 && i % 2 == 1 { 100 } else { 64 };
                assert_eq!(d.len as usize, HDR_LEN + len, "lap {lap} position {i}");
                let mut got = vec![0u8; len];
                assert!(mem
                    .gpa(d.addr + HDR_LEN as u64, len as u64)
                    .unwrap()
                    .read(0, &mut got));
                assert!(
                    got.iter().all(|&b| b == lap as u8),
                    "lap {lap} position {i}"
                );
                dev.set_used(used, i, 0);
                used = used.wrapping_add(1);
            }
            dev.set_used_idx(used);
        }
        assert_eq!(fault.total_lies(), 0);
        assert_eq!(fault.tx_stale.load(Relaxed), 0);
    }

    /// Writes 5-byte frames `[tag, 0, 0, 0, seq]` in place: whole when the
    /// buffer's tag differs, only the last byte when it matches.
    struct Tagged {
        tag: u64,
        seq: u8,
        whole: u32,
        skipped: u32,
    }

    impl TxFill for Tagged {
        fn fill(&mut self, buf: &mut [u8], tag: &mut u64) -> usize {
            if *tag != self.tag {
                buf[..4].copy_from_slice(&[self.tag as u8, 0, 0, 0]);
                *tag = self.tag;
                self.whole += 1;
            }
            buf[4] = self.seq;
            self.seq += 1;
            5
        }

        fn skip(&mut self) -> usize {
            self.seq += 1;
            self.skipped += 1;
            5
        }
    }

    #[test]
    fn transmit_in_place_keeps_each_buffers_template_until_a_copy() {
        let fault = Arc::new(FrontendFault::default());
        let (mem, tx, s) = tx_queue(&fault);
        let dev = device_ring(&mem);
        let frame_at = |i: u16| {
            let d = dev.desc(i);
            let mut got = vec![0u8; d.len as usize - HDR_LEN];
            assert!(mem
                .gpa(d.addr + HDR_LEN as u64, got.len() as u64)
                .unwrap()
                .read(0, &mut got));
            got
        };
        let mut f = Tagged {
            tag: 9,
            seq: 0,
            whole: 0,
            skipped: 0,
        };
        let mut used = 0u16;
        // SAFETY: this test is the queue's only user.
        let mut o = unsafe { fabric::OwnedTx::new(&tx) };
        assert!(o.fills_in_place());
        for lap in 0..3u16 {
            assert_eq!(o.free_slots(), N as u32, "lap {lap}");
            let first = o.reserve(N as u32);
            if lap == 1 {
                // A copied frame in position 2: its template is unknown.
                o.fill(first, 2, &mut f);
                o.write(first + 2, 1, &[1, 2, 3, 4, 5, 6]);
                f.seq += 1;
                o.fill(first + 3, N as u32 - 3, &mut f);
            } else {
                o.fill(first, N as u32, &mut f);
            }
            o.publish(first + N as u64);
            for i in 0..N {
                let want = if lap == 1 && i == 2 {
                    vec![1, 2, 3, 4, 5, 6]
                } else {
                    vec![9, 0, 0, 0, (lap * N + i) as u8]
                };
                assert_eq!(frame_at(i), want, "lap {lap} position {i}");
                let tag = s.tags[i as usize].load(Relaxed);
                assert_eq!(tag, if lap == 1 && i == 2 { 0 } else { 9 });
                dev.set_used(used, i, 0);
                used = used.wrapping_add(1);
            }
            dev.set_used_idx(used);
        }
        // Whole on the first lap and in the copied position after it.
        assert_eq!((f.whole, f.skipped), (N as u32 + 1, 0));
        // A lease of no session: every frame skipped, counted stale.
        tx.session.store(None);
        let first = o.reserve(2);
        o.fill(first, 2, &mut f);
        assert_eq!((f.skipped, o.refused()), (2, 2));
        assert_eq!(fault.tx_stale.load(Relaxed), 2);
        assert_eq!(fault.total_lies(), 0);
    }

    #[test]
    fn transmit_reclaims_lazily_in_bulk_and_out_of_order() {
        let fault = Arc::new(FrontendFault::default());
        let (mem, tx, s) = tx_queue(&fault);
        let dev = device_ring(&mem);
        send(&tx, 5);
        // Everything back, but 3 positions are still free: not read yet.
        for i in 0..5 {
            dev.set_used(i, i, 0);
        }
        dev.set_used_idx(5);
        assert_eq!(free(&tx), 3);
        send(&tx, 2);
        // One free: under a quarter of the ring, so all 5 come back.
        assert_eq!(free(&tx), 6);
        // Out of order: 6 returned before 5; position 5 holds the tail.
        dev.set_used(5, 6, 0);
        dev.set_used_idx(6);
        s.reclaim(&fault);
        assert_eq!(s.free(), 6, "6 is back but 5 is not");
        dev.set_used(6, 5, 0);
        dev.set_used_idx(7);
        s.reclaim(&fault);
        assert_eq!(s.free(), N as u32, "both back");
        assert_eq!(fault.total_lies(), 0);
    }

    #[test]
    fn transmit_catches_a_lying_device() {
        for what in [
            "id twice",
            "id never published",
            "id out of range",
            "index jump",
        ] {
            let fault = Arc::new(FrontendFault::default());
            let (mem, tx, s) = tx_queue(&fault);
            let dev = device_ring(&mem);
            send(&tx, 3);
            let unpublished = tx.lock.lock().producer.reserve(2).first as u16;
            let lie = match what {
                "id twice" => {
                    dev.set_used(0, 1, 0);
                    dev.set_used(1, 1, 0);
                    dev.set_used_idx(2);
                    BackendLie::UsedId
                }
                "id never published" => {
                    dev.set_used(0, unpublished, 0);
                    dev.set_used_idx(1);
                    BackendLie::UsedId
                }
                "id out of range" => {
                    dev.set_used(0, N, 0);
                    dev.set_used_idx(1);
                    BackendLie::UsedId
                }
                _ => {
                    dev.set_used_idx(4);
                    BackendLie::UsedIdx
                }
            };
            s.reclaim(&fault);
            assert_eq!(fault.lies[lie as usize].load(Relaxed), 1, "{what}");
            assert!(fault.pending.load(Relaxed), "{what}: control thread told");
            assert_eq!(free(&tx), 0, "{what}: stopped");
            assert_eq!(fault.total_lies(), 1, "{what}");
        }
    }

    /// CPU time of the transmit path per frame, against an in-order
    /// device played in the same thread (the device's share is the same
    /// for any frontend). Not a pass/fail figure: run it by hand with
    /// `cargo test --release -p ports --lib tx_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn tx_cost_per_frame() {
        for len in [64usize, 1518] {
            let buf_b = COST_BUF_B;
            let mem = cost_memory(buf_b);
            let mk = || ring_at(&mem, COST_Q);
            let tx = FrontendTx::new(1518, Arc::new(FrontendFault::default()));
            let s = TxSession::new(mk(), GPA_BASE + COST_BUFS, buf_b, kick()).unwrap();
            tx.session.store(Some(Arc::new(s)));
            let dev = mk();
            // A polling backend does not want kicks.
            dev.set_used_flags(USED_F_NO_NOTIFY);
            let frame = vec![0x5au8; len];
            let (mut seen, mut used) = (0u16, 0u16);
            let frames = 4_000_000u64;
            let t0 = thread_cpu_ns();
            let mut sent = 0u64;
            let mut drops = TxDrops::default();
            while sent < frames {
                // As turnout-gen drives it: reserve under the lock, write
                // frame by frame against the lease, publish.
                let (k, first) = cost_write(&tx, &frame, &mut drops);
                // Every slot before it was written.
                if tx
                    .lock
                    .lock()
                    .producer
                    .publish_deferred(first + k as u64, &mut drops)
                {
                    tx.kick(&mut drops);
                }
                sent += k as u64;
                // The device: everything published, returned in order.
                let a = dev.avail_idx();
                while seen != a {
                    dev.set_used(used, dev.avail_entry(seen), 0);
                    seen = seen.wrapping_add(1);
                    used = used.wrapping_add(1);
                }
                dev.set_used_idx(used);
            }
            let ns = (thread_cpu_ns() - t0) as f64 / sent as f64;
            assert_eq!(tx.fault.total_lies(), 0);
            eprintln!("tx {len} B: {ns:.1} ns CPU per frame (frontend and device)");
        }
    }

    /// The cost benches' transmit step: reserves up to 32 slots under the
    /// lock and writes `frame` into each against the lease (unpublished);
    /// the number reserved and the first slot.
    fn cost_write(tx: &FrontendTx, frame: &[u8], drops: &mut TxDrops) -> (u32, u64) {
        let (k, mut lease) = {
            let mut l = tx.lock.lock();
            let k = l.producer.free_slots().min(32);
            (k, l.producer.reserve(k))
        };
        let first = lease.first;
        for j in 0..k as u64 {
            lease.first = first + j;
            // SAFETY: reserved above, not yet published.
            unsafe { tx.write_burst(&lease, &TxFrames::one(frame, 1), drops) };
        }
        (k, first)
    }

    /// CPU time per 64 B frame of the transmit path *with a device that
    /// reads every frame* (as a backend copies it out), at several
    /// transmit buffer strides: 9024 B (a buffer per 9000 B `max-frame`,
    /// what turnout-gen used before `tx_frame_b`), 2048 B (testpmd's
    /// mbufs), 128 B (sized for the frame). Same thread, so it shows the
    /// memory layout's cost (TLB, prefetch), not the lines that travel
    /// between two CPUs. `cargo test --release -p ports --lib
    /// tx_stride_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn tx_stride_cost_per_frame() {
        let len = 60usize;
        for buf_b in [9024u64, 2048, 128] {
            let mem = cost_memory(buf_b);
            let mk = || ring_at(&mem, COST_Q);
            let tx = FrontendTx::new(1518, Arc::new(FrontendFault::default()));
            let s = TxSession::new(mk(), GPA_BASE + COST_BUFS, buf_b, kick()).unwrap();
            tx.session.store(Some(Arc::new(s)));
            let dev = mk();
            dev.set_used_flags(USED_F_NO_NOTIFY);
            let frame = vec![0x5au8; len];
            let mut copy = [0u8; 128];
            let (mut seen, mut used, mut sum) = (0u16, 0u16, 0u64);
            let frames = 4_000_000u64;
            let mut sent = 0u64;
            let mut drops = TxDrops::default();
            let t0 = thread_cpu_ns();
            while sent < frames {
                let (k, first) = cost_write(&tx, &frame, &mut drops);
                tx.lock
                    .lock()
                    .producer
                    .publish_deferred(first + k as u64, &mut drops);
                sent += k as u64;
                // The device: as DPDK's dequeue, descriptor, then header
                // and frame copied out, 32 at a time, in order.
                let a = dev.avail_idx();
                let mut n = 0;
                while seen != a && n < 32 {
                    let id = dev.avail_entry(seen);
                    let d = dev.desc(id);
                    let g = dev.mem().gpa(d.addr, d.len as u64).unwrap();
                    assert!(g.read(0, &mut copy[..d.len as usize]));
                    sum += copy[HDR_LEN] as u64;
                    dev.set_used(used, id, 0);
                    seen = seen.wrapping_add(1);
                    used = used.wrapping_add(1);
                    n += 1;
                }
                dev.set_used_idx(used);
            }
            let ns = (thread_cpu_ns() - t0) as f64 / sent as f64;
            assert_eq!(
                sum,
                0x5a * sent - 0x5a * (dev.avail_idx().wrapping_sub(seen)) as u64
            );
            eprintln!("tx {len} B, buffers {buf_b} B apart: {ns:.1} ns CPU per frame (frontend and device)");
        }
    }
}
