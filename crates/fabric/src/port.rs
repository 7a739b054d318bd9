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
//!   (destination-port parallelism, mSwitch §3.3). The fabric serialises
//!   [`TxQueue::free_slots`], [`TxQueue::reserve`] and [`TxQueue::publish`]
//!   under the destination's lock and calls [`TxQueue::write`] without it,
//!   on disjoint slot ranges. Those methods are `unsafe` because their
//!   correctness rests on that protocol, which only the fabric upholds.
//!
//! Slots are free-running `u64` indexes; a backend maps them onto its ring
//! with a mask. A frame may take several slots (chained descriptors, e.g.
//! jumbo frames over 2 KiB memif buffers): [`TxQueue::slots_for`] says how
//! many.

use std::os::fd::RawFd;

use crate::batch::RxFill;

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
}

/// The transmit side of one port queue, shared by all workers.
pub trait TxQueue: Send + Sync {
    /// How many slots a frame of `len` bytes occupies; 0 if this queue
    /// cannot carry it (too large: the fabric drops it as oversize).
    fn slots_for(&self, len: usize) -> u32;

    /// Number of slots that may be reserved right now.
    ///
    /// # Safety
    /// Caller holds this destination's fabric lock.
    unsafe fn free_slots(&self) -> u32;

    /// Reserves the next `n` slots (`n <= free_slots()`), returning the
    /// index of the first.
    ///
    /// # Safety
    /// Caller holds this destination's fabric lock.
    unsafe fn reserve(&self, n: u32) -> u64;

    /// Copies `frame` into the `nslots` slots starting at `slot`, chaining
    /// them if `nslots > 1`.
    ///
    /// # Safety
    /// The range was returned by `reserve` to this caller and not yet
    /// published; no other thread writes it. Called without the lock.
    unsafe fn write(&self, slot: u64, nslots: u32, frame: &[u8]);

    /// Makes every slot before `tail` visible to the peer and notifies it
    /// if it asked to be. Called with monotonically increasing `tail`, only
    /// after all slots before it were written.
    ///
    /// # Safety
    /// Caller holds this destination's fabric lock.
    unsafe fn publish(&self, tail: u64);
}
