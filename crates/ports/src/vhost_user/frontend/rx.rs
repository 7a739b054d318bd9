//! The frontend's receive queues: queue `q` drains the guest's receive
//! virtqueue `2q`. Every buffer is posted; frames are handed to the caller
//! without a copy and their buffers re-posted on `release`. With
//! `VIRTIO_NET_F_MRG_RXBUF` a frame spans `num_buffers` buffers, lent in
//! place when they are adjacent, copied into the batch's scratch at the
//! ring's wrap. What the backend writes into the used ring is read once
//! and checked (used index at most the buffers it holds, ids in range and
//! held, lengths inside the buffer, `num_buffers` within the entries
//! published); a lie is counted and stops the queue until the control
//! thread reconnects.

use std::os::fd::AsRawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU64, Ordering::*};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use fabric::{RxFill, RxQueue};
use vmm_sys_util::eventfd::EventFd;

use super::{BackendLie, FrontendFault, HDR_LEN, NUM_BUFFERS_OFF};
use crate::vhost_user::sys::{push_guest, Buffers, Desc, Ring};
use crate::vhost_user::vring::{need_event, AVAIL_F_NO_INTERRUPT, DESC_F_WRITE, USED_F_NO_NOTIFY};

/// One running receive virtqueue (the backend fills, we drain).
pub(super) struct RxSession {
    ring: Ring,
    /// Buffer `i` belongs to descriptor `i`, located once.
    bufs: Buffers,
    buf_b: u64,
    /// Largest frame delivered (longer ones are `rx_oversize`).
    max_frame_b: usize,
    /// `VIRTIO_NET_F_MRG_RXBUF` negotiated: a frame spans `num_buffers`
    /// used entries.
    pub(super) mrg: bool,
    pub(super) kick: Arc<EventFd>,
    /// Whether the backend holds descriptor id `i` (owner only).
    held: Box<[AtomicBool]>,
    /// Buffers the backend holds.
    posted: AtomicU16,
    last_used: AtomicU16,
    avail: AtomicU16,
    broken: AtomicBool,
    /// `VIRTIO_RING_F_EVENT_IDX` negotiated: interrupts by `used_event`.
    pub(super) event_idx: bool,
}

impl RxSession {
    /// Posts every buffer (before the backend learns of the ring).
    pub(super) fn new(
        ring: Ring,
        bufs_gpa: u64,
        buf_b: u64,
        max_frame_b: usize,
        kick: Arc<EventFd>,
    ) -> Result<Self, String> {
        let n = ring.size();
        let bufs = Buffers::new(ring.mem_arc().clone(), bufs_gpa, n as u32, buf_b as usize)
            .ok_or("receive buffers outside the memory")?;
        for id in 0..n {
            ring.set_desc(
                id,
                Desc {
                    addr: bufs_gpa + id as u64 * buf_b,
                    len: buf_b as u32,
                    flags: DESC_F_WRITE,
                    next: 0,
                },
            );
            ring.set_avail_entry(id, id);
        }
        ring.set_avail_flags(AVAIL_F_NO_INTERRUPT);
        ring.set_avail_idx(n);
        Ok(Self {
            ring,
            bufs,
            buf_b,
            max_frame_b,
            mrg: false,
            kick,
            held: (0..n).map(|_| AtomicBool::new(true)).collect(),
            posted: AtomicU16::new(n),
            last_used: AtomicU16::new(0),
            avail: AtomicU16::new(n),
            broken: AtomicBool::new(false),
            event_idx: false,
        })
    }
}

impl RxSession {
    /// Asks the backend to interrupt (call eventfd) for the next used
    /// entry, or not; when enabling, true if entries are already waiting.
    fn set_notify(&self, on: bool) -> bool {
        let last = self.last_used.load(Relaxed);
        if self.event_idx {
            // Off: an event index just behind ours, passed again only
            // after 65536 entries.
            self.ring
                .set_used_event(if on { last } else { last.wrapping_sub(1) });
        } else {
            self.ring
                .set_avail_flags(if on { 0 } else { AVAIL_F_NO_INTERRUPT });
        }
        if !on {
            return false;
        }
        // Our flag before the backend's used index is read (it orders its
        // side the same way): no lost wake-up.
        fence(SeqCst);
        self.ring.used_idx_acquire() != last
    }
}

/// Where the control thread puts receive queue `q`'s current session.
///
/// A generation number changes after every store, so the queue's owner
/// learns of a new session by one load of a line that is written only on
/// (re)connects, instead of loading the `ArcSwap` every burst.
#[derive(Default)]
pub(super) struct RxSlot {
    pub(super) session: ArcSwapOption<RxSession>,
    generation: AtomicU64,
    /// Frames delivered by this queue (`rxqN_frames`; written by the
    /// queue's single owner, once per burst).
    pub(super) frames: AtomicU64,
}

impl RxSlot {
    pub(super) fn store(&self, s: Option<Arc<RxSession>>) {
        self.session.store(s);
        // After the store: an owner that sees the new number loads the
        // new session.
        self.generation.fetch_add(1, Release);
    }
}

/// Takes descriptor `id` from the backend (checked held): re-posted on
/// release whatever becomes of its frame. One owner: a load and a store,
/// not a locked swap.
#[inline]
fn take(heads: &mut [u16], nheads: &mut usize, s: &RxSession, id: u32) {
    s.held[id as usize].store(false, Relaxed);
    heads[*nheads] = id as u16;
    *nheads += 1;
}

/// Receive queue `q`: the guest's receive virtqueue `2q`.
pub struct FrontendRx {
    pub(super) slot: Arc<RxSlot>,
    /// The slot's generation `held` was loaded at.
    pub(super) seen: u64,
    pub(super) held: Option<Arc<RxSession>>,
    pub(super) heads: Box<[u16]>,
    pub(super) nheads: usize,
    pub(super) fault: Arc<FrontendFault>,
    pub(super) taken: Arc<AtomicBool>,
    /// The virtqueue's call eventfd (the same over reconnects).
    pub(super) call: Arc<EventFd>,
    /// Notifications asked for (`set_notify`), applied to every session.
    pub(super) notify_on: bool,
    /// Used entries waiting at the last burst, and buffers the backend
    /// held ([`RxQueue::fill_level`]).
    pub(super) level: (u32, u32),
}

impl FrontendRx {
    /// Follows the port's current session when nothing is lent out. A
    /// session that ended by a hang-up is not `broken`, and an idle queue
    /// never releases it: holding on to it would poll a dead ring forever
    /// after a reconnect.
    ///
    /// Only when the session changed: following writes the backend's
    /// notification word (`used_event` or `avail->flags`), a line the
    /// backend reads on every burst it delivers.
    #[inline]
    fn follow(&mut self) {
        if self.nheads != 0 {
            return;
        }
        let g = self.slot.generation.load(Acquire);
        if g == self.seen {
            return;
        }
        self.seen = g;
        let cur = self.slot.session.load_full();
        let current = match (&self.held, &cur) {
            (Some(h), Some(c)) => Arc::ptr_eq(h, c),
            (None, None) => true,
            _ => false,
        };
        if !current {
            self.held = cur;
            if let Some(s) = &self.held {
                s.set_notify(self.notify_on);
            }
        }
    }
}

/// What became of a frame over several mergeable buffers.
enum Merged {
    /// Left whole for the next burst (the batch's scratch is used up).
    Wait,
    /// The backend lied (counted); what it named is taken.
    Lie,
    /// Taken and re-posted on release, not delivered (counted).
    Dropped,
    /// Lent in place across adjacent buffers.
    InPlace,
    /// Copied into the batch's scratch.
    Copied,
}

/// The frame of `nb` (2 or more, all published) used entries from
/// position `at`, whose first id is checked held and first length in
/// range. Reads the entries, checks them all before taking any, then
/// takes them (entries consumed: `nb` unless `Wait`).
#[inline(never)]
fn merged(
    heads: &mut [u16],
    nheads: &mut usize,
    fault: &FrontendFault,
    s: &RxSession,
    batch: &mut RxFill<'_>,
    at: u16,
    nb: u16,
) -> Merged {
    let size = s.ring.size() as u32;
    let (id, len) = s.ring.used_entry(at);
    let mut total = len as usize;
    let mut adjacent = true;
    let (mut prev, mut prev_len) = (id, len);
    let mut lie = None;
    for k in 1..nb {
        let (idk, lenk) = s.ring.used_entry(at.wrapping_add(k));
        if idk >= size || !s.held[idk as usize].load(Relaxed) {
            lie = Some((k, BackendLie::UsedId));
            break;
        }
        if lenk as u64 > s.buf_b {
            lie = Some((k + 1, BackendLie::UsedLen));
            break;
        }
        // An empty buffer adds nothing (turnoutd's device may reserve
        // one more than it fills).
        if lenk != 0 {
            adjacent &= idk == prev + 1 && prev_len as u64 == s.buf_b;
            total += lenk as usize;
            (prev, prev_len) = (idk, lenk);
        }
    }
    let flen = total.saturating_sub(HDR_LEN);
    let copy = !adjacent && flen >= 14 && flen <= s.max_frame_b;
    if lie.is_none() && copy && batch.scratch(flen).is_none() {
        return Merged::Wait;
    }
    // Take what was named (up to the lie), each id once: a backend
    // naming one twice in a frame, or rewriting the ring meanwhile,
    // is caught here.
    let upto = lie.map_or(nb, |(k, _)| k);
    let mut twice = false;
    for k in 0..upto {
        let (idk, _) = s.ring.used_entry(at.wrapping_add(k));
        if idk < size && s.held[idk as usize].load(Relaxed) {
            take(heads, nheads, s, idk);
        } else {
            twice = true;
        }
    }
    if let Some((_, why)) = lie {
        fault.lie(why, &s.broken);
        return Merged::Lie;
    }
    if twice {
        fault.lie(BackendLie::UsedId, &s.broken);
        return Merged::Lie;
    }
    if flen > s.max_frame_b {
        fault.rx_oversize.fetch_add(1, Relaxed);
        return Merged::Dropped;
    }
    if flen < 14 {
        fault.rx_runt.fetch_add(1, Relaxed);
        return Merged::Dropped;
    }
    if !copy {
        return match s.bufs.span(id, HDR_LEN, flen) {
            Some(g) if push_guest(batch, &g, 0, flen) => Merged::InPlace,
            _ => Merged::Dropped,
        };
    }
    // Not adjacent (the ring's wrap): copy the pieces out.
    let Some(dst) = batch.scratch(flen) else {
        return Merged::Dropped;
    };
    let mut w = 0;
    for k in 0..nb {
        let (idk, lenk) = s.ring.used_entry(at.wrapping_add(k));
        let (off, l) = if k == 0 {
            (HDR_LEN, (lenk as usize).saturating_sub(HDR_LEN))
        } else {
            (0, lenk as usize)
        };
        // Lengths re-read: never past what was checked.
        let l = l.min(flen - w);
        match s.bufs.span(idk, off, l) {
            Some(g) if g.read(0, &mut dst[w..w + l]) => w += l,
            _ => break,
        }
    }
    if w == flen && batch.push_scratch(flen) {
        Merged::Copied
    } else {
        Merged::Dropped
    }
}

impl RxQueue for FrontendRx {
    fn notify_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.call.as_raw_fd())
    }

    fn set_notify(&mut self, enabled: bool) -> bool {
        self.notify_on = enabled;
        self.follow();
        match &self.held {
            Some(s) if !s.broken.load(Relaxed) => s.set_notify(enabled),
            _ => false,
        }
    }

    fn ack_notify(&mut self) {
        crate::guard::drain(self.call.as_raw_fd());
    }

    fn fill_level(&self) -> Option<(u32, u32)> {
        (self.level.1 > 0).then_some(self.level)
    }

    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        self.follow();
        let Some(s) = self.held.as_deref() else {
            return 0;
        };
        if s.broken.load(Relaxed) {
            self.held = None;
            self.nheads = 0;
            return 0;
        }
        let used = s.ring.used_idx_acquire();
        let last = s.last_used.load(Relaxed);
        let pending = used.wrapping_sub(last);
        if pending == 0 {
            return 0;
        }
        let posted = s.posted.load(Relaxed);
        if pending > posted {
            self.fault.lie(BackendLie::UsedIdx, &s.broken);
            return 0;
        }
        self.level = (pending as u32, posted as u32);
        // Entries, not frames: a frame over mergeable buffers takes
        // several, and is taken whole or not at all.
        let n = (pending as usize).min(self.heads.len() - self.nheads) as u16;
        let room = batch.room();
        let size = s.ring.size() as u32;
        let mut pushed = 0;
        let mut consumed = 0u16;
        let mut linear = 0u64;
        let nheads0 = self.nheads;
        while consumed < n && pushed < room {
            let at = last.wrapping_add(consumed);
            let (id, len) = s.ring.used_entry(at);
            if id >= size || !s.held[id as usize].load(Relaxed) {
                self.fault.lie(BackendLie::UsedId, &s.broken);
                break;
            }
            // With mergeable buffers the header says how many used
            // entries the frame spans (read once).
            let nb = if s.mrg {
                s.bufs.read_u16(id, NUM_BUFFERS_OFF).unwrap_or(0)
            } else {
                1
            };
            if nb == 1 || (len as usize) < HDR_LEN || len as u64 > s.buf_b {
                // Ours from here: re-posted on release whatever becomes
                // of the frame.
                take(&mut self.heads, &mut self.nheads, s, id);
                consumed += 1;
                if (len as usize) < HDR_LEN || len as u64 > s.buf_b {
                    self.fault.lie(BackendLie::UsedLen, &s.broken);
                    break;
                }
                // One buffer: the frame fits (buffers hold the largest
                // frame, or are smaller than it with mergeable buffers).
                let flen = len as usize - HDR_LEN;
                if flen < 14 {
                    self.fault.rx_runt.fetch_add(1, Relaxed);
                    continue;
                }
                if let Some(g) = s.bufs.span(id, HDR_LEN, flen) {
                    pushed += push_guest(batch, &g, 0, flen) as usize;
                }
                continue;
            }
            // Every entry of the frame is published with the first (as
            // Linux's virtio-net expects).
            if nb == 0 || nb > pending - consumed {
                take(&mut self.heads, &mut self.nheads, s, id);
                consumed += 1;
                self.fault.lie(BackendLie::NumBuffers, &s.broken);
                break;
            }
            if nb > n - consumed {
                // Not enough room for its heads in this burst.
                break;
            }
            match merged(
                &mut self.heads,
                &mut self.nheads,
                &self.fault,
                s,
                batch,
                at,
                nb,
            ) {
                Merged::Wait => break,
                Merged::Lie => {
                    consumed += nb;
                    break;
                }
                Merged::Dropped => consumed += nb,
                Merged::InPlace => {
                    consumed += nb;
                    pushed += 1;
                }
                Merged::Copied => {
                    consumed += nb;
                    pushed += 1;
                    linear += 1;
                }
            }
        }
        if linear != 0 {
            self.fault.rx_linearised.fetch_add(linear, Relaxed);
        }
        s.last_used.store(last.wrapping_add(consumed), Relaxed);
        // Buffers taken: used entries, less any a lying backend named twice.
        let taken = (self.nheads - nheads0) as u16;
        s.posted.store(s.posted.load(Relaxed) - taken, Relaxed);
        // One owner: a load and a store, not a locked add.
        let f = &self.slot.frames;
        f.store(f.load(Relaxed) + pushed as u64, Relaxed);
        if pushed == 0 {
            // Nothing lent out: give the buffers back now.
            self.release();
        }
        pushed
    }

    fn release(&mut self) {
        // The session stays held (`follow` replaces it when the control
        // thread does): dropping it here would make every burst load the
        // slot and rewrite the notification word.
        let Some(s) = self.held.as_deref() else {
            self.nheads = 0;
            return;
        };
        if self.nheads == 0 {
            return;
        }
        let old = s.avail.load(Relaxed);
        let mut avail = old;
        // Descriptor `id` still describes buffer `id` (written once in
        // `RxSession::new`; we never read the table back).
        for &id in &self.heads[..self.nheads] {
            s.ring.set_avail_entry(avail, id);
            s.held[id as usize].store(true, Relaxed);
            avail = avail.wrapping_add(1);
        }
        s.posted
            .store(s.posted.load(Relaxed) + self.nheads as u16, Relaxed);
        self.nheads = 0;
        s.avail.store(avail, Relaxed);
        s.ring.set_avail_idx(avail);
        // The index store before the backend's suppression is read (the
        // backend orders its side the same way).
        fence(SeqCst);
        // With EVENT_IDX the backend says when it wants a kick by
        // `avail_event` alone and never sets `NO_NOTIFY`: reading the flag
        // then would kick on every re-post, a system call per burst that a
        // polling backend never asked for.
        let wanted = if s.event_idx {
            need_event(s.ring.avail_event(), avail, old)
        } else {
            s.ring.used_flags() & USED_F_NO_NOTIFY == 0
        };
        if wanted {
            self.fault.kicks.fetch_add(1, Relaxed);
            crate::guard::notify(s.kick.as_raw_fd());
        }
    }
}

impl Drop for FrontendRx {
    fn drop(&mut self) {
        self.taken.store(false, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vhost_user::frontend::testutil::*;
    use crate::vhost_user::frontend::{GPA_BASE, RX_BUF_MRG};
    use crate::vhost_user::sys::GuestMemory;
    use fabric::batch::MAX_BATCH;
    use fabric::RxBatch;

    /// A receive queue over `ring()` with buffers of `BUF` bytes (with
    /// `mrg`, frames of up to three), and the device's view of the ring.
    fn rx_setup(
        event_idx: bool,
        mrg: bool,
    ) -> (
        Arc<GuestMemory>,
        Ring,
        Arc<RxSession>,
        FrontendRx,
        Arc<FrontendFault>,
    ) {
        let (mem, r) = ring();
        let max = if mrg { 3 * BUF } else { BUF } as usize - HDR_LEN;
        let mut s = RxSession::new(r, GPA_BASE + BUFS, BUF, max, kick()).unwrap();
        s.event_idx = event_idx;
        s.mrg = mrg;
        let s = Arc::new(s);
        let (rx, fault) = rx_queue(s.clone());
        let dev = device_ring(&mem);
        (mem, dev, s, rx, fault)
    }

    fn rx_queue(s: Arc<RxSession>) -> (FrontendRx, Arc<FrontendFault>) {
        let fault = Arc::new(FrontendFault::default());
        let rx = FrontendRx {
            slot: Arc::new(RxSlot {
                session: ArcSwapOption::new(Some(s)),
                generation: AtomicU64::new(0),
                frames: AtomicU64::new(0),
            }),
            seen: u64::MAX,
            held: None,
            heads: vec![0u16; MAX_BATCH].into_boxed_slice(),
            nheads: 0,
            fault: fault.clone(),
            taken: Arc::new(AtomicBool::new(true)),
            call: kick(),
            notify_on: false,
            level: (0, 0),
        };
        (rx, fault)
    }

    /// The device fills buffer `id` with a frame of `len` bytes.
    fn fill(mem: &GuestMemory, dev: &Ring, at: u16, id: u16, len: u32) {
        let g = mem.gpa(GPA_BASE + BUFS + id as u64 * BUF, BUF).unwrap();
        assert!(g.write(HDR_LEN, &[0xab; 64]));
        dev.set_used(at, id, len);
    }

    #[test]
    fn an_honest_device_delivers_and_buffers_come_back() {
        let (mem, dev, _s, mut rx, fault) = rx_setup(false, false);
        assert_eq!(dev.avail_idx(), N, "every buffer posted");
        fill(&mem, &dev, 0, 3, 12 + 64);
        fill(&mem, &dev, 1, 5, 12 + 60);
        dev.set_used_idx(2);
        let mut b = RxBatch::with_capacity(32);
        {
            let got = b.receive(&mut rx, 0, 0);
            assert_eq!(got.received(), 2);
            assert_eq!(
                got.pkts().iter().map(|p| p.len()).collect::<Vec<_>>(),
                [64, 60]
            );
        }
        assert_eq!(dev.avail_idx(), N + 2, "re-posted on release");
        assert_eq!(dev.avail_entry(N), 3);
        assert_eq!(dev.avail_entry(N + 1), 5);
        assert_eq!(fault.total_lies(), 0);
    }

    #[test]
    fn receive_notifications_are_asked_for_only_when_enabled() {
        for event_idx in [false, true] {
            let (mem, dev, _s, mut rx, _) = rx_setup(event_idx, false);
            // What the device decides when it moves its used index from
            // `old` to `new` (virtio 1.1, 2.7.7.2 / 2.7.10).
            let wants = |old: u16, new: u16| {
                if event_idx {
                    need_event(dev.used_event(), new, old)
                } else {
                    dev.avail_flags() & AVAIL_F_NO_INTERRUPT == 0
                }
            };
            assert!(!rx.set_notify(false));
            assert!(!wants(0, 1), "event_idx {event_idx}: off");
            assert!(!rx.set_notify(true), "nothing waiting");
            assert!(wants(0, 1), "event_idx {event_idx}: on");
            // A frame arrives: enabling again reports it (no lost wake-up).
            fill(&mem, &dev, 0, 0, 12 + 64);
            dev.set_used_idx(1);
            assert!(rx.set_notify(true), "event_idx {event_idx}: waiting");
            let mut b = RxBatch::with_capacity(32);
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
            assert!(!rx.set_notify(false));
            assert!(!wants(1, 2), "event_idx {event_idx}: off again");
            assert_eq!(rx.notify_fd(), Some(rx.call.as_raw_fd()));
        }
    }

    #[test]
    fn reposting_kicks_only_when_the_device_asks() {
        for event_idx in [false, true] {
            let (mem, dev, _s, mut rx, fault) = rx_setup(event_idx, false);
            // A polling device: with EVENT_IDX it leaves `avail_event`
            // where it is (0) and never sets NO_NOTIFY; without, it sets
            // NO_NOTIFY.
            if !event_idx {
                dev.set_used_flags(USED_F_NO_NOTIFY);
            }
            let mut b = RxBatch::with_capacity(32);
            for k in 0..3u16 {
                fill(&mem, &dev, k, k, 12 + 64);
                dev.set_used_idx(k + 1);
                assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
            }
            assert_eq!(dev.avail_idx(), N + 3);
            assert_eq!(fault.kicks.load(Relaxed), 0, "event_idx {event_idx}");
            // The device asks for a kick once the available index passes
            // N + 3 (or clears NO_NOTIFY): the next re-post kicks, once.
            if event_idx {
                dev.set_avail_event(N + 3);
            } else {
                dev.set_used_flags(0);
            }
            fill(&mem, &dev, 3, 3, 12 + 64);
            dev.set_used_idx(4);
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
            assert_eq!(fault.kicks.load(Relaxed), 1, "event_idx {event_idx}");
            if event_idx {
                fill(&mem, &dev, 4, 4, 12 + 64);
                dev.set_used_idx(5);
                assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
                assert_eq!(fault.kicks.load(Relaxed), 1, "passed already");
            }
        }
    }

    #[test]
    fn bursts_leave_the_notification_word_alone() {
        let (mem, dev, _s, mut rx, _) = rx_setup(true, false);
        let mut b = RxBatch::with_capacity(32);
        fill(&mem, &dev, 0, 0, 12 + 64);
        dev.set_used_idx(1);
        assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
        // Notifications are off (the owner never asked): the event index
        // sits just behind. It is written when the session is taken up,
        // not again every burst (the device reads that line per burst).
        assert_eq!(dev.used_event(), 0xffff);
        let drv = device_ring(&mem);
        drv.set_used_event(0x1234);
        for k in 1..4u16 {
            fill(&mem, &dev, k, k, 12 + 64);
            dev.set_used_idx(k + 1);
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 1);
        }
        assert_eq!(dev.used_event(), 0x1234);
    }

    #[test]
    fn a_lying_device_is_caught_and_nothing_is_read_outside() {
        for (what, lie) in [
            ("used index jumps", BackendLie::UsedIdx),
            ("id out of range", BackendLie::UsedId),
            ("id twice", BackendLie::UsedId),
            ("length past the buffer", BackendLie::UsedLen),
            ("length under the header", BackendLie::UsedLen),
        ] {
            let (mem, dev, _s, mut rx, fault) = rx_setup(false, false);
            match what {
                "used index jumps" => dev.set_used_idx(N + 1),
                "id out of range" => {
                    dev.set_used(0, N, 76);
                    dev.set_used_idx(1);
                }
                "id twice" => {
                    fill(&mem, &dev, 0, 2, 76);
                    fill(&mem, &dev, 1, 2, 76);
                    dev.set_used_idx(2);
                }
                "length past the buffer" => {
                    dev.set_used(0, 1, BUF as u32 + 1);
                    dev.set_used_idx(1);
                }
                _ => {
                    dev.set_used(0, 1, 11);
                    dev.set_used_idx(1);
                }
            }
            let mut b = RxBatch::with_capacity(32);
            let n = b.receive(&mut rx, 0, 0).received();
            assert!(n <= 1, "{what}: {n} frames");
            assert_eq!(fault.lies[lie as usize].load(Relaxed), 1, "{what}");
            assert!(fault.pending.load(Relaxed), "{what}: control thread told");
            // The queue stays stopped.
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 0, "{what}");
        }
    }

    /// The device writes `frame` (with a header saying how many buffers)
    /// over buffers `ids`, each filled before the next, and uses them
    /// from used position `at`. Returns the next position.
    fn deliver(mem: &GuestMemory, dev: &Ring, at: u16, ids: &[u16], frame: &[u8]) -> u16 {
        let mut bytes = vec![0u8; HDR_LEN];
        bytes[NUM_BUFFERS_OFF..HDR_LEN].copy_from_slice(&(ids.len() as u16).to_le_bytes());
        bytes.extend_from_slice(frame);
        let chunks: Vec<&[u8]> = bytes.chunks(BUF as usize).collect();
        assert_eq!(chunks.len(), ids.len(), "test: frame and buffers disagree");
        for (k, (&id, c)) in ids.iter().zip(chunks).enumerate() {
            let g = mem.gpa(GPA_BASE + BUFS + id as u64 * BUF, BUF).unwrap();
            assert!(g.write(0, c));
            dev.set_used(at + k as u16, id, c.len() as u32);
        }
        at + ids.len() as u16
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(7).wrapping_add(seed))
            .collect()
    }

    #[test]
    fn mergeable_frames_span_buffers_in_place_or_copied_at_the_wrap() {
        let (mem, dev, s, mut rx, fault) = rx_setup(false, true);
        let frames = [
            (vec![0u16, 1], pattern(300, 1)),
            (vec![2], pattern(60, 2)),
            (vec![3, 4, 5], pattern(600, 3)),
            // Not adjacent in memory (as at the ring's wrap): copied.
            (vec![7, 6], pattern(400, 4)),
        ];
        let mut at = 0;
        for (ids, f) in &frames {
            at = deliver(&mem, &dev, at, ids, f);
        }
        dev.set_used_idx(at);
        let mut b = RxBatch::with_capacity(32);
        {
            let got = b.receive(&mut rx, 0, 0);
            assert_eq!(got.received(), 4);
            for (p, (_, f)) in got.pkts().iter().zip(&frames) {
                assert_eq!(p.data(), &f[..]);
            }
        }
        assert_eq!(fault.rx_linearised.load(Relaxed), 1, "only the wrapped one");
        assert_eq!(fault.total_lies(), 0);
        // Every buffer back, in the order used.
        assert_eq!(dev.avail_idx(), 2 * N);
        let back: Vec<u16> = (0..N).map(|i| dev.avail_entry(N + i)).collect();
        assert_eq!(back, [0, 1, 2, 3, 4, 5, 7, 6]);
        assert_eq!(s.posted.load(Relaxed), N);
        // Longer than the largest frame (four buffers): consumed, counted,
        // re-posted, not delivered; the next frame still is.
        let at = deliver(
            &mem,
            &dev,
            8,
            &[0, 1, 2, 3],
            &pattern(4 * BUF as usize - 20, 5),
        );
        let at = deliver(&mem, &dev, at, &[4], &pattern(100, 6));
        dev.set_used_idx(at);
        {
            let got = b.receive(&mut rx, 0, 0);
            assert_eq!(got.received(), 1);
            assert_eq!(got.pkts()[0].data(), &pattern(100, 6)[..]);
        }
        assert_eq!(fault.rx_oversize.load(Relaxed), 1);
        assert_eq!(dev.avail_idx(), 2 * N + 5);
        assert_eq!(fault.total_lies(), 0);
    }

    #[test]
    fn a_lying_mergeable_device_is_caught() {
        for (what, lie) in [
            ("num_buffers 0", BackendLie::NumBuffers),
            ("num_buffers past the published", BackendLie::NumBuffers),
            ("an id twice in one frame", BackendLie::UsedId),
            ("a later id out of range", BackendLie::UsedId),
            ("a later length past the buffer", BackendLie::UsedLen),
        ] {
            let (mem, dev, s, mut rx, fault) = rx_setup(false, true);
            let f = pattern(300, 9);
            let at = deliver(&mem, &dev, 0, &[1, 2], &f);
            let hdr = mem.gpa(GPA_BASE + BUFS + BUF, BUF).unwrap();
            match what {
                "num_buffers 0" => assert!(hdr.write(NUM_BUFFERS_OFF, &[0, 0])),
                "num_buffers past the published" => {
                    assert!(hdr.write(NUM_BUFFERS_OFF, &[3, 0]))
                }
                "an id twice in one frame" => dev.set_used(1, 1, 56),
                "a later id out of range" => dev.set_used(1, N, 56),
                _ => dev.set_used(1, 2, BUF as u32 + 1),
            }
            dev.set_used_idx(at);
            let mut b = RxBatch::with_capacity(32);
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 0, "{what}");
            assert_eq!(fault.lies[lie as usize].load(Relaxed), 1, "{what}");
            assert_eq!(fault.total_lies(), 1, "{what}");
            assert!(fault.pending.load(Relaxed), "{what}: control thread told");
            assert_eq!(b.receive(&mut rx, 0, 0).received(), 0, "{what}: stopped");
            // What was taken is accounted for: held or back, never both.
            let held = s.held.iter().filter(|h| h.load(Relaxed)).count() as u16;
            assert_eq!(held, s.posted.load(Relaxed), "{what}");
        }
    }

    /// CPU time of the receive path per frame, against a polling device
    /// played in the same thread that delivers bursts of 32 (as DPDK's
    /// vhost does: with `EVENT_IDX` it leaves `avail_event` alone and
    /// never sets `NO_NOTIFY`; without, it sets `NO_NOTIFY`). Kicks are
    /// counted: each is a system call. The device's share is the same for
    /// any frontend. The device writes each frame's header (`num_buffers`
    /// 1 with mergeable buffers: 2 KiB, as negotiated for turnout-gen's
    /// default `max-frame=9000`), not the frame. `RX_COST_MRG=0` or `1` runs only the
    /// whole-buffer or the mergeable cases (one per process, e.g. under
    /// callgrind). Not a pass/fail figure: run it by hand with
    /// `cargo test --release -p ports --lib rx_cost -- --ignored --nocapture`.
    #[test]
    #[ignore]
    fn rx_cost_per_frame() {
        let only = std::env::var("RX_COST_MRG").ok();
        for (mrg, event_idx) in [(false, false), (false, true), (true, false), (true, true)] {
            if only.as_deref().is_some_and(|o| (o == "1") != mrg) {
                continue;
            }
            let buf_b = if mrg { RX_BUF_MRG } else { COST_BUF_B };
            let mem = cost_memory(buf_b);
            let mk = || ring_at(&mem, COST_Q);
            let mut s = RxSession::new(mk(), GPA_BASE + COST_BUFS, buf_b, 9000, kick()).unwrap();
            s.event_idx = event_idx;
            s.mrg = mrg;
            let hdrs = Buffers::new(
                mem.clone(),
                GPA_BASE + COST_BUFS,
                COST_Q as u32,
                buf_b as usize,
            )
            .unwrap();
            let (mut rx, fault) = rx_queue(Arc::new(s));
            let dev = mk();
            if !event_idx {
                dev.set_used_flags(USED_F_NO_NOTIFY);
            }
            let (mut seen, mut used, mut calls) = (0u16, 0u16, 0u64);
            let mut b = RxBatch::with_capacity(MAX_BATCH);
            let frames = 4_000_000u64;
            let mut got = 0u64;
            let t0 = thread_cpu_ns();
            while got < frames {
                // The device: up to 32 posted buffers filled (the frame
                // bytes are not written: the same for any frontend).
                let a = dev.avail_idx();
                let old = used;
                let mut k = 0;
                while seen != a && k < 32 {
                    let id = dev.avail_entry(seen);
                    // The header, as a backend writes it: a line of the
                    // buffer touched per frame in either mode.
                    assert!(hdrs.write(id as u32, NUM_BUFFERS_OFF, &[mrg as u8, 0]));
                    dev.set_used(used, id, (HDR_LEN + 64) as u32);
                    seen = seen.wrapping_add(1);
                    used = used.wrapping_add(1);
                    k += 1;
                }
                dev.set_used_idx(used);
                let call = if event_idx {
                    need_event(dev.used_event(), used, old)
                } else {
                    dev.avail_flags() & AVAIL_F_NO_INTERRUPT == 0
                };
                calls += call as u64;
                got += b.receive(&mut rx, 0, 0).received() as u64;
            }
            let ns = (thread_cpu_ns() - t0) as f64 / got as f64;
            assert_eq!(fault.total_lies(), 0);
            let kicks = fault.kicks.load(Relaxed);
            eprintln!(
                "rx 64 B, mrg {mrg}, event_idx {event_idx}: {ns:.1} ns CPU per frame \
                 (frontend and device), \
                 {kicks} kicks, {calls} calls for {got} frames"
            );
        }
    }
}
