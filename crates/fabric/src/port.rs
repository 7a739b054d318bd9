//! The port contract: what every backend (pipe, memif, AF_XDP, AF_PACKET,
//! TAP, vhost-user) implements, and the only way the fabric touches packets.
//!
//! "Incoming" and "outgoing" are always from the switch's point of view:
//! an [`RxQueue`] hands the fabric frames that *enter* the switch, a
//! [`TxQueue`] accepts frames that *leave* it.
//!
//! Threading:
//! - each receive queue is owned by exactly one worker at a time, so
//!   [`RxQueue`] methods take `&mut self`;
//! - a transmit queue is shared by every worker that may send to it
//!   (destination-port parallelism, mSwitch §3.3). Its producer state
//!   (indexes, cached peer index, pinned session) is a [`TxProducer`] value
//!   inside the queue's [`TxLock`]: the fabric reserves and publishes
//!   through the lock guard (`&mut`), calls [`TxQueue::write_burst`]
//!   without it, once per [`Lease`], on disjoint slot ranges, and
//!   [`TxQueue::kick`] after dropping it. `write_burst` is `unsafe` only
//!   because "this range is yours" is the fabric's promise. Every backend
//!   works this way: [`TxQueue::tx_lock`] and [`TxProducer`]'s methods are
//!   required, so a backend without a producer does not compile.
//!
//! Slots are free-running `u64` indexes; a backend maps them onto its ring
//! with a mask. A frame may take several slots (chained descriptors, e.g.
//! jumbo frames over 2 KiB memif buffers): [`TxQueue::slots_for`] says how
//! many.

use std::any::Any;
use std::os::fd::RawFd;
use std::sync::Arc;

use crate::batch::{Pkt, RxFill};
use crate::drop::DropReason;
use crate::fabric::Leases;
use crate::lock::{SpinGuard, SpinLock};

/// Index of a port in the switch's port table.
pub type PortId = u16;
/// Index of a queue within a port.
pub type QueueId = u16;

/// What the control plane and stats need to know about a port.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PortInfo {
    /// Unique, user-chosen name.
    pub name: String,
    /// Backend name: "pipe", "memif", "af_xdp", "af_packet", "tap", "vhost_user".
    pub kind: &'static str,
    /// Number of queue pairs (receive queue i pairs with transmit queue i).
    pub queues: u16,
    /// Largest frame, in bytes, this port can send or receive.
    pub max_frame_b: u32,
}

/// A port: a set of queue pairs onto one backend interface.
pub trait Port: Send + Sync {
    /// Static description of the port.
    fn info(&self) -> PortInfo;

    /// Hands out receive queue `q` to its (single) owner. Returns `None` if
    /// the queue does not exist or is already owned.
    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>>;

    /// The shared transmit side of queue `q` (`q < info().queues`).
    fn tx(&self, q: QueueId) -> &dyn TxQueue;

    /// Whether the peer is attached and the link can carry frames. A port
    /// whose link is down drops outgoing frames with `DropReason::LinkDown`.
    fn link_up(&self) -> bool {
        true
    }

    /// How many transmit queues, counted from queue 0, the peer takes
    /// frames on now; senders spread over these only. A vhost-user guest
    /// may enable fewer queue pairs than the port has (a DPDK
    /// `net_virtio_user` with `queues=1`, a Linux guest after `ethtool -L
    /// combined 1`): frames put on a queue it never enabled would be
    /// dropped. Called per list sent: no allocation, no lock. Default
    /// `u16::MAX`: every queue (the caller bounds it by `info().queues`).
    fn tx_queues_up(&self) -> u16 {
        u16::MAX
    }

    /// Backend-specific counters (e.g. memif descriptors rejected), as
    /// `(name, value)` pairs for stats output. Control path only.
    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
}

/// The receive side of one port queue, owned by one worker.
pub trait RxQueue: Send {
    /// Appends up to `rx.room()` received frames to `rx` and returns how many
    /// were appended. Frames stay valid, and their buffers owned by the
    /// port, until [`RxQueue::release`]. Must not block.
    ///
    /// Called by [`crate::RxBatch::receive`], which lends the frames out as a
    /// [`crate::batch::Burst`] and calls `release` when that is dropped
    /// (not after an empty burst).
    fn burst(&mut self, rx: &mut RxFill<'_>) -> usize;

    /// Returns every buffer handed out by the last `burst` to the port.
    fn release(&mut self);

    /// A file descriptor that becomes readable when frames arrive while
    /// notifications are enabled (eventfd, socket), or `None` if the backend
    /// can only be polled.
    fn notify_fd(&self) -> Option<RawFd> {
        None
    }

    /// Enables or disables arrival notifications. When enabling, returns
    /// `true` if frames are already waiting (the re-check that prevents a
    /// lost wake-up: the caller must then poll instead of sleeping).
    fn set_notify(&mut self, _enabled: bool) -> bool {
        true
    }

    /// Clears a pending notification after the fd became readable.
    fn ack_notify(&mut self) {}

    /// Whether frames wait in the queue, read from memory the peer writes
    /// (its producer index) without a system call: how the worker looks at
    /// an armed queue while others keep it busy. `None` (the default): the
    /// backend cannot tell, and the worker asks the queue's notify fd
    /// through epoll. Must not consume anything or change the queue's
    /// notification state.
    fn peek(&self) -> Option<bool> {
        None
    }

    /// As [`RxQueue::peek`], but true only for frames: not for a change
    /// the next burst must take up although no frame waits (memif: a new
    /// connection not adopted yet). What the worker counts as a missed
    /// kick when a sleep ended without this queue's notification.
    fn peek_frames(&self) -> Option<bool> {
        self.peek()
    }

    /// Whether the worker should watch [`RxQueue::notify_fd`] through epoll
    /// only while it sleeps, and look at the armed queue with
    /// [`RxQueue::peek`] while it is awake (only honoured where `peek` can
    /// tell). True where the fd's wait queue is woken by more than this
    /// queue's arrivals: an XDP socket's is woken by every frame its own
    /// transmit side completes, and an epoll entry on it turns each of
    /// those into a wake-up call on the kernel's transmit path. The cost:
    /// two `epoll_ctl` calls per sleep.
    fn watch_only_asleep(&self) -> bool {
        false
    }

    /// How full the queue's ring was when the last [`RxQueue::burst`]
    /// looked: `(filled, capacity)` in frames the peer can put in it
    /// without our consuming any (`filled` counts those the burst took).
    /// `filled >= capacity` means the peer could add nothing: it was
    /// pushed back, or dropped. The worker uses it to count push-back
    /// (`rx_ring_full`) and to bound its naps so no ring fills during one
    /// (`crate::wakeup`). Must be cheap: a backend saves what its burst
    /// computed anyway. `None` (the default): unknown (a kernel queue).
    fn fill_level(&self) -> Option<(u32, u32)> {
        None
    }
}

/// Frames a backend refused after they were reserved (write, publish or
/// kick time), by reason, with their bytes. Filled by the backend, counted
/// by the fabric on the destination port and taken out of `tx_packets`.
#[derive(Clone, Debug, Default)]
pub struct TxDrops {
    n: [u32; DropReason::COUNT],
    frames: u32,
    bytes: u64,
}

impl TxDrops {
    /// Counts one refused frame of `len` bytes.
    #[inline]
    pub fn add(&mut self, reason: DropReason, len: usize) {
        self.n[reason.index()] += 1;
        self.frames += 1;
        self.bytes += len as u64;
    }

    /// Counts `n` refused frames of `bytes` bytes in all.
    #[inline]
    pub fn add_n(&mut self, reason: DropReason, n: u32, bytes: u64) {
        self.n[reason.index()] += n;
        self.frames += n;
        self.bytes += bytes;
    }

    /// Frames refused.
    #[inline]
    pub fn frames(&self) -> u32 {
        self.frames
    }

    /// Bytes of the frames refused.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Frames refused for `reason`.
    #[inline]
    pub fn get(&self, reason: DropReason) -> u32 {
        self.n[reason.index()]
    }
}

/// The frames of one lease, in slot order: what [`TxQueue::write_burst`]
/// copies. Frame `j` takes `nslots(j)` slots, starting where frame `j - 1`
/// ended.
#[derive(Clone, Copy)]
pub struct TxFrames<'a> {
    src: Src<'a>,
}

#[derive(Clone, Copy)]
enum Src<'a> {
    Batch {
        pkts: &'a [Pkt],
        order: &'a [u16],
        slots: &'a [u32],
    },
    /// `pkts[j]`, one slot each (a single-destination batch whose frames
    /// all fit one slot: no lists, no index per frame).
    Run {
        pkts: &'a [Pkt],
    },
    One {
        frame: &'a [u8],
        nslots: u32,
    },
}

impl<'a> TxFrames<'a> {
    /// `pkts[order[j]]` taking `slots[j]` slots (the fabric's lists).
    #[inline]
    pub(crate) fn batch(pkts: &'a [Pkt], order: &'a [u16], slots: &'a [u32]) -> Self {
        debug_assert_eq!(order.len(), slots.len());
        Self {
            src: Src::Batch { pkts, order, slots },
        }
    }

    /// `pkts[j]`, each taking one slot (the fabric's single-destination
    /// batches).
    #[inline]
    pub(crate) fn run(pkts: &'a [Pkt]) -> Self {
        Self {
            src: Src::Run { pkts },
        }
    }

    /// One frame taking `nslots` slots.
    #[inline]
    pub fn one(frame: &'a [u8], nslots: u32) -> Self {
        Self {
            src: Src::One { frame, nslots },
        }
    }

    /// Number of frames.
    #[inline]
    pub fn len(&self) -> usize {
        match self.src {
            Src::Batch { order, .. } => order.len(),
            Src::Run { pkts } => pkts.len(),
            Src::One { .. } => 1,
        }
    }

    /// True when there is no frame.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Frame `j` and the slots it takes (`j < len()`).
    #[inline]
    pub fn get(&self, j: usize) -> (&'a [u8], u32) {
        match self.src {
            Src::Batch { pkts, order, slots } => (pkts[order[j] as usize].data(), slots[j]),
            Src::Run { pkts } => (pkts[j].data(), 1),
            Src::One { frame, nslots } => (frame, nslots),
        }
    }

    /// The frames, when each takes one slot and they are a plain run of
    /// received frames (no index per frame): a backend's loop over them
    /// needs no slot count or list look-up.
    #[inline]
    pub fn as_run(&self) -> Option<&'a [Pkt]> {
        match self.src {
            Src::Run { pkts } => Some(pkts),
            _ => None,
        }
    }

    /// Hints the CPU to fetch frame `j`'s first cache line, if it exists.
    #[inline]
    pub fn prefetch(&self, j: usize) {
        match self.src {
            Src::Batch { pkts, order, .. } => {
                if let Some(&i) = order.get(j) {
                    pkts[i as usize].prefetch();
                }
            }
            Src::Run { pkts } => {
                if let Some(p) = pkts.get(j) {
                    p.prefetch();
                }
            }
            Src::One { .. } => {}
        }
    }

    /// Every frame with its slot count, in order.
    #[inline]
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], u32)> + '_ {
        (0..self.len()).map(move |j| self.get(j))
    }
}

/// What a reservation was made against, carried from [`TxProducer::reserve`]
/// to [`TxQueue::write_burst`]: the first slot and, for backends whose
/// slots map onto a session that can be replaced (a memif connection, a
/// vhost-user ring), that session. The writer uses the lease's copy and
/// never re-reads the producer's state, which may change (under the lock)
/// while the lease is being written.
///
/// The session is either pinned (`pin`, a reference of the lease's own)
/// or *held* ([`Lease::held`]): borrowed from the producer, which keeps it
/// alive and in place until every slot of the lease is published — no
/// reference count moves per batch (an `Arc` clone and drop are two locked
/// instructions on the data path).
pub struct Lease {
    /// First slot of the range.
    pub first: u64,
    /// Backend-defined value captured at reserve time (e.g. the slot index
    /// that maps to ring position 0 of `pin`).
    pub base: u64,
    /// Backend-defined session the range belongs to, if any, pinned by
    /// the lease itself.
    pub pin: Option<Arc<dyn Any + Send + Sync>>,
    /// A session the producer holds for the lease ([`Lease::held`]); null
    /// if none.
    held: *const (),
}

impl Default for Lease {
    fn default() -> Self {
        Self::at(0)
    }
}

// SAFETY: `held` points to a `Send + Sync` value (`Lease::held`'s bound)
// that outlives the lease's use (its contract); everything else is Send
// and Sync.
unsafe impl Send for Lease {}
// SAFETY: as above: shared access to the lease only reads the pointer.
unsafe impl Sync for Lease {}

impl Lease {
    /// A lease of the range starting at `first` with nothing pinned.
    #[inline]
    pub fn at(first: u64) -> Self {
        Self {
            first,
            base: 0,
            pin: None,
            held: std::ptr::null(),
        }
    }

    /// A lease of the range starting at `first` written into `session`,
    /// which the producer holds for it (no reference of the lease's own).
    ///
    /// # Safety
    /// `session` stays alive and in place until every slot of this lease
    /// is published: the producer keeps its own reference to it and does
    /// not drop or replace it while a reservation is in flight. Only
    /// [`Lease::held_ref`] with the same `T` reads it.
    #[inline]
    pub unsafe fn held<T: Send + Sync>(first: u64, base: u64, session: Option<&T>) -> Self {
        Self {
            first,
            base,
            pin: None,
            held: session.map_or(std::ptr::null(), |s| s as *const T as *const ()),
        }
    }

    /// The session the producer holds for this lease ([`Lease::held`]).
    ///
    /// # Safety
    /// The lease was made by [`Lease::held`] with this `T` (or holds
    /// nothing), and is used before its range is published (write time).
    #[inline]
    pub unsafe fn held_ref<T>(&self) -> Option<&T> {
        // SAFETY: the caller's and `Lease::held`'s contracts: a `T` alive
        // until the range is published, which it is not yet.
        unsafe { (self.held as *const T).as_ref() }
    }

    /// Forgets the session (pinned or held): nothing more is written
    /// through this lease.
    #[inline]
    pub fn clear(&mut self) {
        self.pin = None;
        self.held = std::ptr::null();
    }

    /// The pinned session as a `T`, if one of that type is pinned.
    #[inline]
    pub fn pinned<T: Any>(&self) -> Option<&T> {
        self.pin.as_deref().and_then(|p| p.downcast_ref::<T>())
    }
}

/// The producer state of one transmit queue (indexes, cached peer index,
/// pinned session): a plain value that lives inside the queue's
/// [`TxLock`], so every method has `&mut self` and no interior mutability.
pub trait TxProducer: Send {
    /// Number of slots that may be reserved right now.
    fn free_slots(&mut self) -> u32;

    /// Reserves the next `n` slots (`n <= free_slots()`).
    fn reserve(&mut self, n: u32) -> Lease;

    /// Makes every slot before `tail` visible to the peer, without a system
    /// call; returns true if the peer must be notified (then the caller
    /// calls [`TxQueue::kick`] after dropping the lock). Called with
    /// monotonically increasing `tail`, only after all slots before it were
    /// written. Frames found refused now are counted in `drops`.
    fn publish_deferred(&mut self, tail: u64, drops: &mut TxDrops) -> bool;
}

/// What the transmit lock of one queue protects: the fabric's leases (in
/// flight, published in order) and the backend's producer state.
pub struct TxState<P: ?Sized> {
    pub(crate) leases: Leases,
    /// The backend's producer state.
    pub producer: P,
}

/// The transmit lock of one queue: one per destination queue, taken once
/// to reserve and once to publish per batch (see [`TxQueue`]). A backend
/// owns a `TxLock<ItsProducer>` and hands it out as `&TxLock` (the
/// producer type erased).
#[repr(align(64))]
pub struct TxLock<P: ?Sized = dyn TxProducer>(SpinLock<TxState<P>>);

impl<P> TxLock<P> {
    /// A lock around `producer`, with no lease in flight.
    pub fn new(producer: P) -> Self {
        Self(SpinLock::new(TxState {
            leases: Leases::default(),
            producer,
        }))
    }
}

impl<P: ?Sized> TxLock<P> {
    /// Takes the lock.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, TxState<P>> {
        self.0.lock()
    }
}

/// The transmit side of one port queue, shared by all workers.
///
/// Per destination and batch the fabric makes, under the queue's
/// [`TxLock`], `free_slots` and `reserve` on its [`TxProducer`]; without
/// it, one `write_burst` for the whole lease; under the lock again
/// `publish_deferred`, which must make no system call; and, after dropping
/// the lock, `kick` if `publish_deferred` asked for it (eventfd writes,
/// `sendto` kicks, TAP writes), so that no worker waiting for the lock
/// waits for a system call.
///
/// There is one way to implement it: the backend owns a
/// `TxLock<ItsProducer>` holding all of its producer state and returns it
/// from the required [`TxQueue::tx_lock`]; the shared state the writer
/// half and the peer see (rings, buffers, mappings) lives outside the lock.
/// A tool or test driving a queue alone uses [`OwnedTx`].
pub trait TxQueue: Send + Sync {
    /// How many slots a frame of `len` bytes occupies; 0 if this queue
    /// cannot carry it (too large: the fabric drops it as oversize).
    fn slots_for(&self, len: usize) -> u32;

    /// The lock holding this queue's producer state.
    fn tx_lock(&self) -> &TxLock;

    /// Copies `frames` into the slots of `lease` from `lease.first` on
    /// (chaining a frame's slots if it takes several). A frame the backend
    /// cannot deliver after all (peer fault, stale session) is counted in
    /// `drops` and its slots still consumed.
    ///
    /// # Safety
    /// `lease` is what [`TxProducer::reserve`] of this queue's producer
    /// returned to this caller (its `first` possibly moved forward inside
    /// the reserved range) and the range is not yet published; no other
    /// thread writes it. Called without the lock.
    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops);

    /// Notifies the peer of what was published (eventfd write, `sendto`
    /// kick, TAP writes). Called without the lock, by the worker whose
    /// `publish_deferred` returned true; may run concurrently with other
    /// workers' kicks and with reservations. Frames the kernel refuses are
    /// counted in `drops`.
    fn kick(&self, _drops: &mut TxDrops) {}

    /// Called without the lock by a sender after which no publish (and no
    /// kick) follows: one that found no free slot at all, or a worker going
    /// idle while [`TxQueue::kick_pending`] said frames wait. A backend
    /// whose peer may be stalled waiting for a notification (a kick that
    /// failed, a kernel that left frames in its ring) notifies it again
    /// here, checking shared state only (no system call unless one is
    /// needed).
    fn kick_stalled(&self, _drops: &mut TxDrops) {}

    /// Whether published frames wait for a kick the peer refused or never
    /// got (the kernel left them in its ring, the last `sendto` failed):
    /// nobody sends them unless someone publishes again or calls
    /// [`TxQueue::kick_stalled`]. Shared state only, no system call; may
    /// be called without the lock at any time. False by default (backends
    /// whose notification cannot fail).
    fn kick_pending(&self) -> bool {
        false
    }

    /// Whether [`TxQueue::fill_in_place`] writes into this queue's own
    /// buffers (frames of one slot each). False by default: the caller
    /// then writes with [`TxQueue::write_burst`].
    fn fills_in_place(&self) -> bool {
        false
    }

    /// Writes `n` frames of one slot each into the slots of `lease` from
    /// `lease.first` on, in place: `fill` writes each frame straight into
    /// the slot's buffer (no copy from a buffer of the caller's), which
    /// still holds the last frame written into it in place (see
    /// [`TxFill`]). A frame the backend cannot deliver (stale session) is
    /// passed to [`TxFill::skip`] and counted in `drops`; its slot is still
    /// consumed. Only for queues whose [`TxQueue::fills_in_place`] is
    /// true; the default passes every frame to `skip` and counts it as
    /// [`DropReason::TxError`].
    ///
    /// # Safety
    /// As [`TxQueue::write_burst`], for the `n` slots from `lease.first`.
    unsafe fn fill_in_place(
        &self,
        _lease: &Lease,
        n: u32,
        fill: &mut dyn TxFill,
        drops: &mut TxDrops,
    ) {
        for _ in 0..n {
            drops.add(DropReason::TxError, fill.skip());
        }
    }
}

/// The writer of frames built in place ([`TxQueue::fill_in_place`]): a
/// sender whose frames are templates with a few bytes that change per
/// frame (turnout-gen) writes only those bytes when the slot's buffer
/// still holds the same template, instead of building each frame in a
/// buffer of its own and copying it.
///
/// A queue keeps one tag per buffer: what the last in-place writer said
/// the buffer holds (0: unknown, e.g. after a copy by `write_burst` or in
/// a new session's fresh memory). The tag describes content only a
/// malfunctioning peer would change (buffers are the peer's to read, not
/// to write, between our writes).
pub trait TxFill {
    /// Writes the next frame into `buf` (the slot's buffer, as long as the
    /// largest frame the queue carries) and returns its length. `tag` is
    /// the buffer's tag on entry; the writer sets it to describe what the
    /// buffer holds on return. A frame longer than `buf` is not written
    /// (the buffer and the tag are left alone) and its length returned:
    /// the queue counts it as not delivered.
    fn fill(&mut self, buf: &mut [u8], tag: &mut u64) -> usize;

    /// The next frame cannot be delivered: advance past it as if it had
    /// been written, and return its length (counted in the drops).
    fn skip(&mut self) -> usize;
}

/// A transmit queue driven by one sender alone (tools, tests, turnout-gen's
/// one thread per queue, a tunnel's underlay queue), frame by frame, with
/// the reserve → write → publish protocol checked at run time: a write
/// outside the reserved, unpublished range or a publish past the
/// reservation panics instead of corrupting the ring. Each call takes the
/// queue's [`TxLock`] as the fabric does (uncontended), and `write` takes
/// no lock.
pub struct OwnedTx<'a> {
    q: &'a dyn TxQueue,
    /// Everything before this index was published.
    published: u64,
    /// Everything before this index was reserved.
    reserved: u64,
    started: bool,
    /// The last reservation (what it was made against, e.g. a pinned
    /// session), reused by every write into it.
    lease: Lease,
    /// Frames the backend refused after reservation.
    refused: u64,
}

impl<'a> OwnedTx<'a> {
    /// Wraps `q`.
    ///
    /// # Safety
    /// Nobody else reserves or publishes on `q` (no fabric forwarding to
    /// it, no other `OwnedTx`) while the wrapper lives: its slot
    /// bookkeeping assumes it is the only sender.
    pub unsafe fn new(q: &'a dyn TxQueue) -> Self {
        Self {
            q,
            published: 0,
            reserved: 0,
            started: false,
            lease: Lease::default(),
            refused: 0,
        }
    }

    /// Slots a frame of `len` bytes takes (0: the port cannot carry it).
    #[inline]
    pub fn slots_for(&self, len: usize) -> u32 {
        self.q.slots_for(len)
    }

    /// Slots that may be reserved now. When there is none, lets the
    /// backend re-notify a stalled peer ([`TxQueue::kick_stalled`], which
    /// may make a system call: under a lock of its own, a caller uses
    /// [`OwnedTx::free_slots_quiet`]).
    #[inline]
    pub fn free_slots(&mut self) -> u32 {
        let n = self.free_slots_quiet();
        if n == 0 {
            let mut d = TxDrops::default();
            self.q.kick_stalled(&mut d);
            self.refused += d.frames() as u64;
        }
        n
    }

    /// Slots that may be reserved now, without any notification.
    #[inline]
    pub fn free_slots_quiet(&mut self) -> u32 {
        self.q.tx_lock().lock().producer.free_slots()
    }

    /// Reserves `n` slots (`n <= free_slots()`), returning the first index.
    #[inline]
    pub fn reserve(&mut self, n: u32) -> u64 {
        self.lease = self.q.tx_lock().lock().producer.reserve(n);
        let first = self.lease.first;
        if !self.started {
            // Backends number slots from wherever their ring starts.
            self.started = true;
            self.published = first;
        }
        assert_eq!(
            first,
            self.reserved.max(self.published),
            "reservation is not contiguous"
        );
        self.reserved = first + n as u64;
        first
    }

    /// Copies `frame` into `nslots` reserved slots starting at `slot`.
    #[inline]
    pub fn write(&mut self, slot: u64, nslots: u32, frame: &[u8]) {
        assert!(
            slot >= self.published && slot + nslots as u64 <= self.reserved,
            "write outside the reservation"
        );
        // Only the range moves; what the lease pinned stays.
        self.lease.first = slot;
        let mut d = TxDrops::default();
        // SAFETY: the range was reserved by this (only, constructor
        // contract) sender and is not yet published, checked just above;
        // the lease is that reservation's.
        unsafe {
            self.q
                .write_burst(&self.lease, &TxFrames::one(frame, nslots), &mut d)
        };
        self.refused += d.frames() as u64;
    }

    /// Whether [`OwnedTx::fill`] writes in place on this queue.
    #[inline]
    pub fn fills_in_place(&self) -> bool {
        self.q.fills_in_place()
    }

    /// Writes `n` one-slot frames from `slot` on in place through `fill`
    /// ([`TxQueue::fill_in_place`]).
    #[inline]
    pub fn fill(&mut self, slot: u64, n: u32, fill: &mut dyn TxFill) {
        assert!(
            slot >= self.published && slot + n as u64 <= self.reserved,
            "write outside the reservation"
        );
        self.lease.first = slot;
        let mut d = TxDrops::default();
        // SAFETY: as in `write`: reserved by this only sender, unpublished,
        // checked just above; the lease is that reservation's.
        unsafe { self.q.fill_in_place(&self.lease, n, fill, &mut d) };
        self.refused += d.frames() as u64;
    }

    /// Publishes every slot before `tail` and notifies the peer if the
    /// backend asks for it (after the lock).
    #[inline]
    pub fn publish(&mut self, tail: u64) {
        let mut d = TxDrops::default();
        if self.publish_deferred(tail, &mut d) {
            self.q.kick(&mut d);
        }
        self.refused += d.frames() as u64;
    }

    /// Publishes every slot before `tail` without notifying the peer;
    /// returns true if [`TxQueue::kick`] must follow (a caller that holds a
    /// lock of its own, e.g. a tunnel draining into its underlay, kicks
    /// after dropping it). Frames refused now are counted in `drops` (not
    /// in [`OwnedTx::refused`]).
    #[inline]
    pub fn publish_deferred(&mut self, tail: u64, drops: &mut TxDrops) -> bool {
        assert!(
            tail >= self.published && tail <= self.reserved,
            "publish outside the reservation"
        );
        self.published = tail;
        if tail == self.reserved {
            // Nothing in flight: let go of what the lease pinned (a stopping
            // vhost-user ring waits for its session to be released).
            self.lease.clear();
        }
        self.q
            .tx_lock()
            .lock()
            .producer
            .publish_deferred(tail, drops)
    }

    /// Kicks the peer when published frames wait in the ring for one
    /// ([`TxQueue::kick_pending`]): a sender with nothing new to publish
    /// (idle, or its sending over) calls it, or frames the kernel left in
    /// an AF_XDP ring go out only with the next traffic. Returns whether it
    /// kicked.
    #[inline]
    pub fn kick_if_pending(&mut self) -> bool {
        if !self.q.kick_pending() {
            return false;
        }
        let mut d = TxDrops::default();
        self.q.kick_stalled(&mut d);
        self.refused += d.frames() as u64;
        true
    }

    /// Frames the backend refused after they were reserved (at write,
    /// publish or kick time), since the wrapper was made.
    pub fn refused(&self) -> u64 {
        self.refused
    }
}
