//! The data path: split virtqueues walked directly by the fabric's workers.
//!
//! Virtqueue `2q+1` (the guest's transmit queue) is the switch's receive
//! queue `q` ([`VhostRx`]); virtqueue `2q` (the guest's receive queue) is
//! the switch's transmit queue `q` ([`VhostTx`]).
//!
//! A running virtqueue is a [`Session`]: the located [`Ring`] (which keeps
//! the guest memory mapped), the negotiated header layout, the eventfds and
//! the cursors. The control thread installs and removes sessions in a
//! [`VringSlot`] (an `ArcSwapOption`); a worker loads the session at the
//! start of `burst` and holds it until `release`, a transmitter for the
//! duration of each call, so stopping a ring or unmapping memory waits for
//! them (see `device.rs`) and never pulls memory from under a worker.
//!
//! Every descriptor is validated before use: head and `next` indexes
//! `< size`, no `INDIRECT` (not negotiated), the right direction (readable
//! for the guest's transmit queue, writable for its receive queue), at most
//! [`MAX_CHAIN`] descriptors (which also ends loops), every buffer inside
//! one memory region, and the available index at most `size` ahead of ours.
//! A violation marks the session broken, counts it, and wakes the control
//! thread, which disconnects the frontend; nothing else is touched.

use std::fs::File;
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use fabric::batch::MAX_BATCH;
use fabric::sys::EventFd;
use fabric::{
    DropReason, Lease, Pkt, RxFill, RxQueue, TxDrops, TxFrames, TxLock, TxProducer, TxQueue,
};

use super::sys::{self, Epoll, GuestSlice, MemView, Ring, RingView};

/// `VIRTQ_DESC_F_NEXT`.
pub const DESC_F_NEXT: u16 = 1;
/// `VIRTQ_DESC_F_WRITE`: device-writable buffer.
pub const DESC_F_WRITE: u16 = 2;
/// `VIRTQ_DESC_F_INDIRECT`.
pub const DESC_F_INDIRECT: u16 = 4;
/// `VIRTQ_USED_F_NO_NOTIFY`.
pub const USED_F_NO_NOTIFY: u16 = 1;
/// `VIRTQ_AVAIL_F_NO_INTERRUPT`.
pub const AVAIL_F_NO_INTERRUPT: u16 = 1;

/// `EVENT_IDX`'s test (virtio 1.1, 2.7.10): with the other side's event
/// index `event`, does moving our index from `old` to `new` pass it?
#[inline]
pub fn need_event(event: u16, new: u16, old: u16) -> bool {
    new.wrapping_sub(event).wrapping_sub(1) < new.wrapping_sub(old)
}
/// Longest descriptor chain accepted (the spec bounds it by the queue
/// size; Linux and DPDK use at most ~20 per frame).
pub const MAX_CHAIN: u32 = 256;
/// Guest receive buffers assumed when sizing a mergeable frame before the
/// port has seen any (Linux posts at least 1518 + 12 bytes, DPDK 2048 +
/// 12); once it has, it sizes by the smallest it saw ([`VhostTx`]).
pub const MRG_BUF_B: usize = 1530;
/// Smallest guest receive buffer the sizing believes: a guest posting
/// smaller ones gets frames that do not fit handed back empty
/// (`tx_buf_short`) rather than a frame spread over thousands of buffers.
pub const MIN_MRG_BUF_B: usize = 256;

/// What the frontend did wrong (one counter each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum Lie {
    /// The available index ran more than the queue size ahead.
    AvailIdx = 0,
    /// A head or `next` index outside the table.
    DescIndex,
    /// A chain longer than [`MAX_CHAIN`] (or a loop).
    ChainTooLong,
    /// A buffer outside the memory table.
    OutOfMemory,
    /// A writable buffer in a transmit chain, or read-only in a receive one.
    WrongDirection,
    /// An indirect descriptor (not negotiated).
    Indirect,
}

impl Lie {
    /// Number of kinds.
    pub const COUNT: usize = 6;
    /// Counter names, in order.
    pub const NAMES: [&'static str; Self::COUNT] = [
        "lie_avail_idx",
        "lie_desc_index",
        "lie_chain_too_long",
        "lie_out_of_memory",
        "lie_wrong_direction",
        "lie_indirect",
    ];
}

/// Port-wide fault reporting and rare-event counters, shared by sessions,
/// queues and the control thread.
#[derive(Debug)]
pub struct Fault {
    /// A session saw a lie: the control thread must disconnect.
    pub pending: AtomicBool,
    /// Wakes the control thread (shared with the `SIGBUS` guard of the
    /// port's guest memory, which writes it when that memory faults).
    pub wake: Arc<EventFd>,
    /// Lies by kind.
    pub lies: [AtomicU64; Lie::COUNT],
    /// Guest frames longer than the port's largest frame (consumed, dropped).
    pub rx_oversize: AtomicU64,
    /// Guest frames shorter than the virtio-net header (consumed, dropped).
    pub rx_short: AtomicU64,
    /// Guest frames spread over several buffers, copied into scratch.
    pub rx_linearised: AtomicU64,
    /// Frames for the guest that did not fit the buffers it posted
    /// (returned empty, the guest drops them).
    pub tx_buf_short: AtomicU64,
    /// Frames reserved on a ring that stopped before they were written.
    pub tx_stale: AtomicU64,
    /// Interrupts for the frontend that could not be delivered (its call
    /// eventfd's counter full, or the write interrupted because the
    /// frontend made the eventfd blocking): dropped, never waited for.
    pub call_dropped: AtomicU64,
}

impl Fault {
    /// Fresh counters.
    pub fn new() -> std::io::Result<Self> {
        Ok(Self {
            pending: AtomicBool::new(false),
            wake: Arc::new(EventFd::new()?),
            lies: Default::default(),
            rx_oversize: AtomicU64::new(0),
            rx_short: AtomicU64::new(0),
            rx_linearised: AtomicU64::new(0),
            tx_buf_short: AtomicU64::new(0),
            tx_stale: AtomicU64::new(0),
            call_dropped: AtomicU64::new(0),
        })
    }

    /// Total lies seen.
    pub fn total_lies(&self) -> u64 {
        self.lies.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Negotiated layout of one virtqueue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// virtio-net header length: 12 with `VERSION_1` or `MRG_RXBUF`, else 10.
    pub hdr_len: usize,
    /// `VIRTIO_NET_F_MRG_RXBUF`.
    pub mrg_rxbuf: bool,
    /// `VIRTIO_RING_F_EVENT_IDX`.
    pub event_idx: bool,
}

/// One running virtqueue.
#[derive(Debug)]
pub struct Session {
    /// Unique id (never reused within the process).
    pub id: u64,
    /// The rings.
    pub ring: Ring,
    /// Header layout and notification style.
    pub layout: Layout,
    /// Call eventfd (we signal the frontend), if any.
    pub call: Option<Arc<File>>,
    /// Kick eventfd (the frontend signals us), if any.
    pub kick: Option<Arc<File>>,
    /// Ring index at start (`SET_VRING_BASE`).
    pub start_idx: u16,
    /// Transmit side: fabric slot that maps onto `start_idx` (set by the
    /// first `free_slots` of this session; `u64::MAX` until then).
    slot_base: AtomicU64,
    broken: AtomicBool,
    fault: Arc<Fault>,
    /// The ring indexes moved per burst or per publish, on a cache line
    /// of their own.
    pub cur: Cursors,
}

/// The indexes of a [`Session`] written on the data path: by the receive
/// queue's owner once per burst (`last_avail`), by the transmit lock's
/// holder once per publish (`used_shadow`). On their own cache line
/// (`align(64)`, and so is the `Session` around them, its reference counts
/// on another line before it), so those writes do not take from other
/// workers' caches the fields they read for every frame they write
/// (`ring`, `layout`, `broken`, `start_idx`, `slot_base`, `id`).
#[derive(Debug)]
#[repr(align(64))]
pub struct Cursors {
    /// Receive side: next available entry to consume (owner only).
    pub last_avail: AtomicU16,
    /// Transmit side: used index last published (written under the
    /// queue's transmit lock only).
    pub used_shadow: AtomicU16,
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl Session {
    /// A session on `ring`, starting at ring index `start_idx`.
    pub fn new(
        ring: Ring,
        layout: Layout,
        call: Option<Arc<File>>,
        kick: Option<Arc<File>>,
        start_idx: u16,
        fault: Arc<Fault>,
    ) -> Self {
        Self {
            id: NEXT_SESSION.fetch_add(1, Relaxed),
            ring,
            layout,
            call,
            kick,
            start_idx,
            slot_base: AtomicU64::new(u64::MAX),
            broken: AtomicBool::new(false),
            fault,
            cur: Cursors {
                last_avail: AtomicU16::new(start_idx),
                used_shadow: AtomicU16::new(start_idx),
            },
        }
    }

    /// Whether a lie was seen on this session.
    pub fn is_broken(&self) -> bool {
        self.broken.load(Relaxed)
    }

    /// Records a lie: the session stops, the control thread disconnects.
    /// Memory that faulted (a file shrunk under us) reads zeroes, which
    /// look like lies: those are not counted as lies (the control thread
    /// counts the fault).
    #[cold]
    pub fn lie(&self, why: Lie) {
        if !self.ring.mem().faulted() {
            self.fault.lies[why as usize].fetch_add(1, Relaxed);
        }
        if !self.broken.swap(true, Relaxed) {
            self.fault.pending.store(true, Release);
            self.fault.wake.notify();
        }
    }

    /// Signals the frontend after the used index moved from `old` to `new`,
    /// unless it suppressed notifications.
    #[inline]
    fn notify_frontend(&self, old: u16, new: u16) {
        if self.wants_notify(old, new) {
            self.signal_call();
        }
    }

    /// Whether the frontend asked to be interrupted for used entries
    /// `old..new` (no system call).
    #[inline]
    fn wants_notify(&self, old: u16, new: u16) -> bool {
        if self.call.is_none() {
            return false;
        }
        fence(SeqCst);
        if self.layout.event_idx {
            need_event(self.ring.used_event(), new, old)
        } else {
            self.ring.avail_flags() & AVAIL_F_NO_INTERRUPT == 0
        }
    }

    /// Interrupts the frontend (eventfd write, never waited for: an
    /// interrupt that cannot be delivered is dropped and counted).
    #[inline]
    fn signal_call(&self) {
        if let Some(call) = &self.call {
            if !sys::signal(call) {
                self.call_failed();
            }
        }
    }

    #[cold]
    fn call_failed(&self) {
        self.fault.call_dropped.fetch_add(1, Relaxed);
        // Interrupted (not merely full): the frontend made its call
        // eventfd blocking and filled it, and the watchdog freed us. Tell
        // the control thread now rather than at its next look.
        if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            self.fault.wake.notify();
        }
    }

    /// Walks the chain starting at `head`, calling `seg` on every buffer;
    /// `write` is the direction the buffers must have.
    #[inline]
    fn walk<'m>(
        &'m self,
        head: u16,
        write: bool,
        mut seg: impl FnMut(GuestSlice<'m>),
    ) -> Result<(), Lie> {
        let size = self.ring.size();
        let mem = self.ring.mem();
        let mut idx = head;
        let mut n = 0u32;
        loop {
            if idx >= size {
                return Err(Lie::DescIndex);
            }
            n += 1;
            if n > MAX_CHAIN.min(size as u32) {
                return Err(Lie::ChainTooLong);
            }
            let d = self.ring.desc(idx);
            if d.flags & DESC_F_INDIRECT != 0 {
                return Err(Lie::Indirect);
            }
            if (d.flags & DESC_F_WRITE != 0) != write {
                return Err(Lie::WrongDirection);
            }
            if d.len != 0 {
                seg(mem.gpa(d.addr, d.len as u64).ok_or(Lie::OutOfMemory)?);
            }
            if d.flags & DESC_F_NEXT == 0 {
                return Ok(());
            }
            idx = d.next;
        }
    }
}

/// Where the control thread puts the running session of one virtqueue.
pub struct VringSlot {
    /// The session, `None` while the ring is stopped. Changed only through
    /// `install` and `remove`, which keep `live` in step.
    pub session: ArcSwapOption<Session>,
    /// Id of the installed session (0: none): what a transmit burst that
    /// pinned a session checks, one plain load per frame, before it touches
    /// the ring, so writes reserved before a restart never reach the next
    /// session's ring (which may be the same guest memory).
    live: AtomicU64,
    /// Stable eventfd to wake the queue's worker (a new session arrived).
    pub wake: EventFd,
    /// Stable epoll set: `wake` plus the current kick eventfd. Its fd is
    /// the receive queue's `notify_fd`, so the worker registers it once
    /// even though the frontend's kick eventfd changes on every connect.
    pub epoll: Epoll,
}

impl VringSlot {
    /// An empty slot.
    pub fn new() -> std::io::Result<Self> {
        let s = Self {
            session: ArcSwapOption::empty(),
            live: AtomicU64::new(0),
            wake: EventFd::new()?,
            epoll: Epoll::new()?,
        };
        s.epoll.add(s.wake.fd(), 0)?;
        Ok(s)
    }

    /// Installs a running session.
    pub fn install(&self, s: Arc<Session>) {
        let id = s.id;
        self.session.store(Some(s));
        self.live.store(id, SeqCst);
    }

    /// Removes the running session (stale for every later write first).
    pub fn remove(&self) -> Option<Arc<Session>> {
        self.live.store(0, SeqCst);
        self.session.swap(None)
    }

    /// Whether `s` is the installed session.
    #[inline]
    fn is_live(&self, s: &Session) -> bool {
        self.live.load(Acquire) == s.id
    }
}

/// Receive queue `q` of the port: the guest's transmit virtqueue.
pub struct VhostRx {
    slot: Arc<VringSlot>,
    /// Session held from a non-empty burst to release.
    held: Option<Arc<Session>>,
    /// Heads consumed by the held burst, in order.
    heads: Box<[u16]>,
    nheads: usize,
    notify_on: bool,
    applied: u64,
    fault: Arc<Fault>,
    max_frame_b: usize,
    /// Released on drop so the port can hand the queue out again.
    taken: Arc<AtomicBool>,
    /// Entries the guest had made available at the last burst, and the
    /// ring's size ([`RxQueue::fill_level`]).
    level: (u32, u32),
}

impl VhostRx {
    /// The receive side of `slot`.
    pub fn new(
        slot: Arc<VringSlot>,
        max_frame_b: usize,
        fault: Arc<Fault>,
        taken: Arc<AtomicBool>,
    ) -> Self {
        Self {
            slot,
            held: None,
            heads: vec![0u16; MAX_BATCH].into_boxed_slice(),
            nheads: 0,
            notify_on: false,
            applied: 0,
            fault,
            max_frame_b,
            taken,
            level: (0, 0),
        }
    }

    fn apply_notify(&self, s: &Session) {
        if s.layout.event_idx {
            if self.notify_on {
                s.ring.set_avail_event(s.cur.last_avail.load(Relaxed));
            }
        } else {
            s.ring
                .set_used_flags(if self.notify_on { 0 } else { USED_F_NO_NOTIFY });
        }
    }
}

/// How one transmit chain turned out.
enum Parsed {
    /// The frame is one guest range (pushed).
    Direct,
    /// The frame was linearised into the batch's scratch (pushed).
    Scratch,
    /// Consumed and dropped: shorter than the header (counted by the caller).
    Short,
    /// Consumed and dropped: longer than the port's largest frame.
    Oversize,
    /// Scratch is full: leave this chain for the next burst.
    NoScratch,
}

/// The slow path of [`VhostRx::burst`]: walks the chain at `head`, skips
/// the header, keeps the first payload range, and on a second one
/// linearises the frame into the batch's scratch; pushes what it keeps.
#[inline(never)]
fn parse_chain(
    s: &Session,
    head: u16,
    hdr_len: usize,
    max_b: usize,
    batch: &mut RxFill<'_>,
) -> Result<Parsed, Lie> {
    let mut skip = hdr_len;
    let mut total = 0usize;
    let mut first: Option<(GuestSlice<'_>, usize, usize)> = None;
    let mut linear_frame = false;
    let mut no_scratch = false;
    s.walk(head, false, |g| {
        let mut off = 0;
        if skip > 0 {
            let k = skip.min(g.len());
            skip -= k;
            off = k;
        }
        let len = g.len() - off;
        if len == 0 {
            return;
        }
        let new_total = total + len;
        if new_total > max_b || no_scratch {
            total = new_total;
            return;
        }
        match &first {
            None => first = Some((g, off, len)),
            Some((fg, fo, fl)) => {
                // The batch hands out the same scratch space until a
                // frame is pushed into it.
                let Some(dst) = batch.scratch(max_b) else {
                    no_scratch = true;
                    return;
                };
                if !linear_frame {
                    fg.read(*fo, &mut dst[..*fl]);
                    linear_frame = true;
                }
                g.read(off, &mut dst[total..total + len]);
            }
        }
        total = new_total;
    })?;
    Ok(if no_scratch {
        Parsed::NoScratch
    } else if skip > 0 {
        Parsed::Short
    } else if total > max_b {
        Parsed::Oversize
    } else if linear_frame {
        let ok = batch.push_scratch(total);
        debug_assert!(ok);
        Parsed::Scratch
    } else {
        // total == 0 (header only) pushes an empty frame: the worker drops
        // it as a runt and counts it.
        let ok = match &first {
            Some((g, off, len)) => sys::push_guest(batch, g, *off, *len),
            None => batch.push_scratch(0),
        };
        debug_assert!(ok);
        Parsed::Direct
    })
}

impl RxQueue for VhostRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        // The session held since an earlier burst not yet released, or the
        // installed one; moved out of `held` (no reference count change)
        // and put back below if the burst took something.
        let s = match self.held.take() {
            Some(s) => s,
            None => match self.slot.session.load_full() {
                Some(s) => s,
                None => return 0,
            },
        };
        // Once per burst: a lie, or memory that faulted (the port's
        // control thread disconnects either).
        if s.is_broken() || s.ring.mem().faulted() {
            return 0;
        }
        if s.id != self.applied {
            self.applied = s.id;
            self.apply_notify(&s);
        }
        let size = s.ring.size();
        let last = s.cur.last_avail.load(Relaxed);
        let pending = s.ring.avail_idx().wrapping_sub(last);
        if pending > size {
            s.lie(Lie::AvailIdx);
            return 0;
        }
        self.level = (pending as u32, size as u32);
        let n = (pending as usize)
            .min(batch.room())
            .min(self.heads.len() - self.nheads);
        if n == 0 && self.nheads == 0 {
            // An empty poll: nothing taken, nothing held to give back (the
            // session is let go here, as `release` would).
            return 0;
        }
        let hdr_len = s.layout.hdr_len;
        let max_b = self.max_frame_b;
        let mut pushed = 0usize;
        let (mut oversize, mut short, mut linear) = (0u64, 0u64, 0u64);
        // The ring's addresses and the largest memory region's bounds in
        // registers for the loop, and the heads this burst takes (`n`
        // fit: no bounds check per frame).
        let ring = s.ring.view();
        let mem = s.ring.mem().view();
        let heads = &mut self.heads[self.nheads..self.nheads + n];
        let mut nh = 0usize;
        // The batch's fields in registers for the burst, too.
        let mut pusher = batch.pusher();
        for i in 0..n as u16 {
            let head = ring.avail_entry(last.wrapping_add(i));
            // Fast path: the frame and its header in one device-readable
            // descriptor (DPDK, Linux and turnout-gen send that way), with
            // the checks `walk` makes on it; anything else (chains, a
            // header-only or oversize frame, a lie) takes the walk below.
            if head < size {
                let d = ring.desc(head);
                let len = d.len as usize;
                // hdr_len < len <= hdr_len + max_b, in one comparison.
                if d.flags == 0 && len.wrapping_sub(hdr_len + 1) < max_b {
                    let Some(p) = mem.gpa_ptr(d.addr, d.len as u64) else {
                        s.lie(Lie::OutOfMemory);
                        break;
                    };
                    // SAFETY: [p, p + len) is inside one mapped region
                    // (`gpa_ptr`) and hdr_len < len <= u32::MAX; the
                    // session (and so the mapping) and the descriptor are
                    // held until `release` (`push_guest`'s contract); at
                    // most n <= batch.room() frames are pushed in this
                    // loop, and this is the (i + 1)-th at most, i < n.
                    unsafe { pusher.push_unchecked(p.add(hdr_len), (len - hdr_len) as u32) };
                    pushed += 1;
                    // SAFETY: nh <= i < n = heads.len() (one head per
                    // iteration at most).
                    unsafe { *heads.get_unchecked_mut(nh) = head };
                    nh += 1;
                    continue;
                }
            }
            let parsed =
                match pusher.with_fill(|batch| parse_chain(&s, head, hdr_len, max_b, batch)) {
                    Ok(p) => p,
                    Err(lie) => {
                        s.lie(lie);
                        break;
                    }
                };
            match parsed {
                Parsed::NoScratch => break,
                Parsed::Direct => pushed += 1,
                Parsed::Scratch => {
                    pushed += 1;
                    linear += 1;
                }
                Parsed::Short => short += 1,
                Parsed::Oversize => oversize += 1,
            }
            heads[nh] = head;
            nh += 1;
        }
        drop(pusher);
        // Every chain taken (pushed or dropped) has its head recorded.
        let consumed = nh as u16;
        self.nheads += nh;
        if oversize | short | linear != 0 {
            self.fault.rx_oversize.fetch_add(oversize, Relaxed);
            self.fault.rx_short.fetch_add(short, Relaxed);
            self.fault.rx_linearised.fetch_add(linear, Relaxed);
        }
        s.cur.last_avail.store(last.wrapping_add(consumed), Relaxed);
        self.held = Some(s);
        if pushed == 0 {
            // Nothing for the worker (release is not called after an empty
            // burst): give dropped chains back now and let the session go.
            self.release();
        }
        pushed
    }

    fn release(&mut self) {
        let Some(s) = self.held.take() else { return };
        if self.nheads == 0 || s.is_broken() {
            self.nheads = 0;
            return;
        }
        let end = s.cur.last_avail.load(Relaxed);
        let start = end.wrapping_sub(self.nheads as u16);
        // Used entries in the order consumed (the frontend may rely on
        // nothing else), written before the index that publishes them.
        s.ring
            .view()
            .set_used_zero_len(start, &self.heads[..self.nheads]);
        s.ring.set_used_idx(end);
        self.nheads = 0;
        s.notify_frontend(start, end);
    }

    fn notify_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.slot.epoll_fd())
    }

    fn set_notify(&mut self, enabled: bool) -> bool {
        self.notify_on = enabled;
        let g = self.slot.session.load();
        let Some(s) = g.as_ref() else { return false };
        self.applied = s.id;
        self.apply_notify(s);
        if enabled {
            fence(SeqCst);
            return s.ring.avail_idx() != s.cur.last_avail.load(Relaxed);
        }
        false
    }

    fn ack_notify(&mut self) {
        self.slot.wake.drain();
        if let Some(s) = self.slot.session.load().as_ref() {
            if let Some(k) = &s.kick {
                use std::os::fd::AsRawFd;
                sys::drain(k.as_raw_fd());
            }
        }
    }

    fn fill_level(&self) -> Option<(u32, u32)> {
        (self.level.1 > 0).then_some(self.level)
    }
}

impl Drop for VhostRx {
    fn drop(&mut self) {
        self.release();
        self.taken.store(false, Release);
    }
}

impl VringSlot {
    fn epoll_fd(&self) -> std::os::fd::RawFd {
        self.epoll.fd()
    }
}

/// Transmit queue `q` of the port: the guest's receive virtqueue. Slots are
/// available descriptor chains (guest receive buffers).
pub struct VhostTx {
    slot: Arc<VringSlot>,
    fault: Arc<Fault>,
    max_frame_b: usize,
    /// Mergeable buffers negotiated (read per frame by `slots_for`).
    mrg: AtomicBool,
    /// With mergeable buffers: the smallest guest receive buffer (the
    /// bytes of one descriptor chain) this session has shown us, at least
    /// `MIN_MRG_BUF_B`; 0 until one is seen. `slots_for` sizes frames by
    /// it, so a frame takes as many buffers as the guest's actually need.
    buf_b: AtomicU32,
    lock: TxLock<VhostProducer>,
}

/// The reservation state of a transmit queue: it lives in the queue's
/// `TxLock`, so only the worker holding the lock touches it.
struct VhostProducer {
    slot: Arc<VringSlot>,
    /// Next slot to reserve.
    next_slot: u64,
    /// Session the slot numbering below refers to.
    cur_session: u64,
    cur_base: u64,
    cur_start: u16,
    /// Slots before this one were published.
    published: u64,
    /// The session the reservations in flight write into: taken in
    /// `reserve` when none is in flight, dropped in `publish_deferred` when
    /// the last one is published, so a stopping ring's quiesce (strong
    /// count back to 1) waits for bursts in flight. Each lease borrows it
    /// ([`Lease::held`]); writers never read this field.
    pin: Option<Arc<Session>>,
}

impl VhostTx {
    /// The transmit side of `slot`.
    pub fn new(slot: Arc<VringSlot>, max_frame_b: usize, fault: Arc<Fault>) -> Self {
        Self {
            lock: TxLock::new(VhostProducer {
                slot: slot.clone(),
                next_slot: 0,
                cur_session: 0,
                cur_base: 0,
                cur_start: 0,
                published: 0,
                pin: None,
            }),
            slot,
            fault,
            max_frame_b,
            mrg: AtomicBool::new(false),
            buf_b: AtomicU32::new(0),
        }
    }

    /// Called by the control thread when it installs a session.
    pub fn set_layout(&self, l: Layout) {
        self.mrg.store(l.mrg_rxbuf, Relaxed);
        // A new session's buffers may differ: measure again.
        self.buf_b.store(0, Relaxed);
    }

    /// Bytes of guest receive buffer `slots_for` counts per slot with
    /// mergeable buffers: the smallest seen, or a look at the next
    /// available chain, or [`MRG_BUF_B`] while the guest posted none.
    #[inline]
    fn mrg_buf_b(&self) -> usize {
        match self.buf_b.load(Relaxed) {
            0 => self.peek_buf_b().unwrap_or(MRG_BUF_B),
            b => b as usize,
        }
    }

    /// The size of the oldest available chain not yet handed back (read
    /// only: another worker may be writing into it, the guest does not
    /// touch it), remembered; `None` if there is none or it is a lie (the
    /// write that reaches it counts the lie).
    #[cold]
    fn peek_buf_b(&self) -> Option<usize> {
        let g = self.slot.session.load();
        let s = g.as_ref()?;
        if s.is_broken() || !s.layout.mrg_rxbuf {
            return None;
        }
        let used = s.cur.used_shadow.load(Relaxed);
        let ahead = s.ring.avail_idx().wrapping_sub(used);
        if ahead == 0 || ahead > s.ring.size() {
            return None;
        }
        let head = s.ring.avail_entry(used);
        let mut cap = 0usize;
        s.walk(head, true, |g| cap += g.len()).ok()?;
        self.saw_buf(cap);
        Some(cap.max(MIN_MRG_BUF_B))
    }

    /// Remembers a guest receive buffer of `cap` bytes if it is the
    /// smallest seen.
    #[inline]
    fn saw_buf(&self, cap: usize) {
        let cap = cap.clamp(MIN_MRG_BUF_B, u32::MAX as usize) as u32;
        let cur = self.buf_b.load(Relaxed);
        if cur == 0 || cap < cur {
            self.buf_b.fetch_min(cap, Relaxed);
            // fetch_min leaves 0 (unmeasured) alone: set it.
            let _ = self.buf_b.compare_exchange(0, cap, Relaxed, Relaxed);
        }
    }

    /// [`VhostTx::saw_buf`] for the smallest buffer `write_single` wrote
    /// into (`u32::MAX`: none), with mergeable buffers.
    #[inline]
    fn saw_bufs(&self, s: &Session, seen: u32) {
        if seen != u32::MAX && s.layout.mrg_rxbuf {
            self.saw_buf(seen as usize);
        }
    }

    /// The session slot.
    pub fn slot(&self) -> &Arc<VringSlot> {
        &self.slot
    }
}

impl TxProducer for VhostProducer {
    fn free_slots(&mut self) -> u32 {
        let next = self.next_slot;
        // With no reservation in flight, look at the current session without
        // pinning it: `reserve` pins. A look that reserves nothing (the
        // guest's receive ring is full, or too short for the next frame)
        // must not keep a stopping ring's session alive until its quiesce
        // times out.
        let current;
        let s = if next == self.published {
            current = self.slot.session.load();
            (*current).as_ref()
        } else {
            self.pin.as_ref()
        };
        let Some(s) = s else {
            return 0;
        };
        if s.is_broken() || s.ring.mem().faulted() {
            return 0;
        }
        if self.cur_session != s.id {
            self.cur_session = s.id;
            self.cur_base = next;
            self.cur_start = s.start_idx;
            s.slot_base.store(next, Release);
        }
        let taken = self.cur_start.wrapping_add((next - self.cur_base) as u16);
        let used = s.cur.used_shadow.load(Relaxed);
        let avail = s.ring.avail_idx();
        let outstanding = taken.wrapping_sub(used);
        let ahead = avail.wrapping_sub(used);
        if ahead > s.ring.size() {
            s.lie(Lie::AvailIdx);
            return 0;
        }
        ahead.saturating_sub(outstanding) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.next_slot;
        self.next_slot += n as u64;
        if first == self.published {
            // The first reservation in flight pins the session its writes go
            // to (until `publish_deferred` lets it go). Should the ring have
            // been restarted since `free_slots`, the new session's slot base
            // is unset and the writes count as stale.
            self.pin = self.slot.session.load_full();
        }
        // SAFETY: `pin` is replaced only here when no reservation is in
        // flight, and dropped in `publish_deferred` when none is left, so
        // it stays until this lease's range is published; the producer
        // lives in the queue, which the fabric's port table keeps while it
        // writes.
        unsafe { Lease::held(first, 0, self.pin.as_deref()) }
    }

    fn publish_deferred(&mut self, tail: u64, _drops: &mut TxDrops) -> bool {
        self.published = tail;
        let idle = tail == self.next_slot;
        let mut kick = false;
        if let Some(s) = self.pin.as_ref().filter(|s| self.slot.is_live(s)) {
            let base = s.slot_base.load(Acquire);
            if base != u64::MAX && tail > base && !s.is_broken() {
                let new = s.start_idx.wrapping_add((tail - base) as u16);
                // We hold the transmit lock, under which alone
                // `used_shadow` is written: a load and a store, not a
                // locked exchange.
                let old = s.cur.used_shadow.load(Relaxed);
                if old != new {
                    s.cur.used_shadow.store(new, Relaxed);
                    s.ring.set_used_idx(new);
                    kick = s.wants_notify(old, new);
                }
            }
        }
        if idle {
            // Nothing in flight any more: let a stopping ring's session go.
            self.pin = None;
        }
        kick
    }
}

impl TxQueue for VhostTx {
    fn slots_for(&self, len: usize) -> u32 {
        if len > self.max_frame_b {
            0
        } else if self.mrg.load(Relaxed) {
            let b = self.mrg_buf_b();
            if len + 12 <= b {
                1
            } else {
                (len + 12).div_ceil(b) as u32
            }
        } else {
            1
        }
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops) {
        // SAFETY: our caller's contract.
        unsafe { self.write_frames(lease, frames, drops) };
        // The streamed copies (`write_single`) before the used index that
        // publishes them.
        fabric::sys::store_fence();
    }

    fn kick(&self, _drops: &mut TxDrops) {
        // Without the lock: the pin may be gone, so interrupt the installed
        // session (after a restart, a spurious interrupt of the new one).
        if let Some(s) = self.slot.session.load().as_ref() {
            s.signal_call();
        }
    }
}

impl VhostTx {
    /// [`TxQueue::write_burst`] but for its closing fence.
    ///
    /// # Safety
    /// As [`TxQueue::write_burst`].
    #[inline(always)]
    unsafe fn write_frames(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops) {
        // The session the reservation was made against, pinned by the lease.
        // SAFETY: `reserve` made the lease with a held `Session`, and its
        // range is not published yet (our caller's contract).
        let Some(s) = (unsafe { lease.held_ref::<Session>() }) else {
            return refuse(frames, 0, DropReason::TxStale, drops);
        };
        let first = lease.first;
        if !self.slot.is_live(s) {
            // The ring was stopped or restarted since the reservation.
            self.fault.tx_stale.fetch_add(frames.len() as u64, Relaxed);
            return refuse(frames, 0, DropReason::TxStale, drops);
        }
        let base = s.slot_base.load(Acquire);
        if base == u64::MAX || first < base {
            self.fault.tx_stale.fetch_add(frames.len() as u64, Relaxed);
            return refuse(frames, 0, DropReason::TxStale, drops);
        }
        if let Some(pkts) = frames.as_run() {
            // One slot each, in slot order: no slot count or index per
            // frame, and `write_one` compiled for one buffer.
            let ring = s.ring.view();
            let mem = s.ring.mem().view();
            let idx0 = s.start_idx.wrapping_add((first - base) as u16);
            // The smallest buffer written into, remembered once for the run
            // (`saw_buf`) rather than per frame.
            let mut seen = u32::MAX;
            for (j, p) in pkts.iter().enumerate() {
                if s.is_broken() {
                    self.saw_bufs(s, seen);
                    return refuse(frames, j, DropReason::PeerFault, drops);
                }
                Pkt::prefetch_ahead_of_copy(pkts, j);
                if let Some(q) = pkts.get(j + TX_PREFETCH_AHEAD) {
                    q.prefetch();
                    prefetch_guest_buf(
                        s,
                        &ring,
                        &mem,
                        idx0.wrapping_add((j + TX_PREFETCH_AHEAD) as u16),
                    );
                }
                let frame = p.data();
                let slot = first + j as u64;
                let idx = idx0.wrapping_add(j as u16);
                let r = match self.write_single(s, &ring, &mem, idx, frame, &mut seen) {
                    Some(r) => r,
                    None => self.write_one(s, base, slot, 1, frame),
                };
                match r {
                    Ok(true) => {}
                    Ok(false) => drops.add(DropReason::PeerFault, frame.len()),
                    Err(lie) => {
                        s.lie(lie);
                        self.saw_bufs(s, seen);
                        return refuse(frames, j, DropReason::PeerFault, drops);
                    }
                }
            }
            self.saw_bufs(s, seen);
            return;
        }
        let mut slot = first;
        for j in 0..frames.len() {
            if s.is_broken() {
                return refuse(frames, j, DropReason::PeerFault, drops);
            }
            let (frame, nslots) = frames.get(j);
            match self.write_one(s, base, slot, nslots, frame) {
                Ok(true) => {}
                Ok(false) => drops.add(DropReason::PeerFault, frame.len()),
                Err(lie) => {
                    s.lie(lie);
                    return refuse(frames, j, DropReason::PeerFault, drops);
                }
            }
            slot += nslots as u64;
        }
    }
}

/// How many frames ahead a transmit run asks for the source frame's and
/// the guest buffer's first lines.
const TX_PREFETCH_AHEAD: usize = 4;

/// Hints the CPU to fetch, for writing, the first two lines of the guest
/// buffer behind available entry `idx`: the guest's core read them last
/// lap, and a store that finds them there waits for them one at a time.
/// Only an entry of the caller's reservation; anything `write_single` would
/// not take is left alone (a hint, never a check).
#[inline(always)]
fn prefetch_guest_buf(s: &Session, ring: &RingView<'_>, mem: &MemView<'_>, idx: u16) {
    let head = ring.avail_entry(idx);
    if head >= s.ring.size() {
        return;
    }
    let d = ring.desc(head);
    if d.flags != DESC_F_WRITE || d.len < 128 {
        return;
    }
    if let Some(p) = mem.gpa_ptr(d.addr, 128) {
        fabric::sys::prefetch_write(p);
        fabric::sys::prefetch_write(p.wrapping_add(64));
    }
}

/// Counts frames `j..` of `frames` as refused for `reason`.
#[cold]
fn refuse(frames: &TxFrames<'_>, j: usize, reason: DropReason, drops: &mut TxDrops) {
    for k in j..frames.len() {
        drops.add(reason, frames.get(k).0.len());
    }
}

impl VhostTx {
    /// The usual case of `write_one`: a frame of one slot into one guest
    /// buffer (one device-writable descriptor) that holds header and frame
    /// (Linux, DPDK and turnout-gen post buffers of 1.5 KiB or more), with
    /// the checks `walk` makes on it. None when the buffer is anything
    /// else: `write_one`'s loop takes it.
    #[inline(always)]
    fn write_single(
        &self,
        s: &Session,
        ring: &RingView<'_>,
        mem: &MemView<'_>,
        idx0: u16,
        frame: &[u8],
        seen: &mut u32,
    ) -> Option<Result<bool, Lie>> {
        let hdr_len = s.layout.hdr_len;
        let total = hdr_len + frame.len();
        let head = ring.avail_entry(idx0);
        if head >= s.ring.size() {
            return None;
        }
        let d = ring.desc(head);
        if d.flags != DESC_F_WRITE || total > d.len as usize {
            return None;
        }
        let Some(p) = mem.gpa_ptr(d.addr, d.len as u64) else {
            return Some(Err(Lie::OutOfMemory));
        };
        let mut hdr = [0u8; 12];
        if s.layout.mrg_rxbuf {
            // num_buffers: 1.
            hdr[10] = 1;
        }
        // SAFETY: [p, p + d.len) is inside one mapped region (`gpa_ptr`),
        // kept mapped by the session the lease holds, and
        // hdr_len + frame.len() = total <= d.len (checked above): the
        // header and the frame fit, without a check per write. The buffer
        // is reserved for this writer alone (write_burst's contract); the
        // frame is our own memory, so no overlap. (Constant-length header
        // copies: no memcpy call.)
        unsafe {
            if hdr_len == 12 {
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, 12);
            } else {
                std::ptr::copy_nonoverlapping(hdr.as_ptr(), p, 10);
            }
            if fabric::sys::streams(fabric::sys::CopyInto::VhostUser, frame.len()) {
                fabric::sys::copy_streaming(p.add(hdr_len), frame.as_ptr(), frame.len());
            } else {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(hdr_len), frame.len());
            }
        }
        // The caller remembers the smallest (`saw_bufs`).
        *seen = (*seen).min(d.len);
        ring.set_used(idx0, head, total as u32);
        Some(Ok(true))
    }

    /// Writes one frame into the guest buffers of `nslots` available
    /// entries from fabric slot `slot`. Ok(false) if the guest's buffers
    /// were too small (handed back empty, counted); Err on a guest lie.
    #[inline]
    fn write_one(
        &self,
        s: &Session,
        base: u64,
        slot: u64,
        nslots: u32,
        frame: &[u8],
    ) -> Result<bool, Lie> {
        let idx0 = s.start_idx.wrapping_add((slot - base) as u16);
        let hdr_len = s.layout.hdr_len;
        let mut hdr = [0u8; 12];
        if s.layout.mrg_rxbuf {
            hdr[10..12].copy_from_slice(&(nslots as u16).to_le_bytes());
        }
        let total = hdr_len + frame.len();
        if nslots == 1 {
            let (ring, mem) = (s.ring.view(), s.ring.mem().view());
            let mut seen = u32::MAX;
            if let Some(r) = self.write_single(s, &ring, &mem, idx0, frame, &mut seen) {
                self.saw_bufs(s, seen);
                return r;
            }
        }
        let hdr = &hdr[..hdr_len];
        let mut src = 0usize;
        for j in 0..nslots as u16 {
            let idx = idx0.wrapping_add(j);
            let head = s.ring.avail_entry(idx);
            let mut written = 0u32;
            let mut cap = 0usize;
            // Each buffer after this one gets at least a byte: when the
            // guest's buffers are larger than `slots_for` counted (its
            // first ones, or a guest whose sizes vary), the frame is spread
            // over every buffer it announced instead of leaving empty ones.
            let later = (nslots - 1 - j as u32) as usize;
            let end = total.saturating_sub(later).max(src);
            s.walk(head, true, |g| {
                cap += g.len();
                let mut off = 0usize;
                while off < g.len() && src < end {
                    let (part, at) = if src < hdr_len {
                        (hdr, src)
                    } else {
                        (frame, src - hdr_len)
                    };
                    let k = (part.len() - at).min(g.len() - off).min(end - src);
                    g.write(off, &part[at..at + k]);
                    off += k;
                    src += k;
                }
                written += off as u32;
            })?;
            if s.layout.mrg_rxbuf {
                self.saw_buf(cap);
            }
            s.ring.set_used(idx, head, written);
        }
        if src < total {
            // The guest's buffers were too small: hand them back empty.
            self.fault.tx_buf_short.fetch_add(1, Relaxed);
            for j in 0..nslots as u16 {
                let idx = idx0.wrapping_add(j);
                s.ring
                    .set_used(idx, s.ring.avail_entry(idx) % s.ring.size(), 0);
            }
            return Ok(false);
        }
        Ok(true)
    }
}
