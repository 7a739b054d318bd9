//! vhost-user frontend: the driver (VM / container) side of a virtio-net
//! device whose backend is another switch (turnoutd's own vhost-user port,
//! DPDK `net_vhost`, OVS-DPDK `dpdkvhostuser`). What DPDK calls
//! virtio-user; turnout-gen uses it to attach to a switch the way a VM does.
//!
//! - Protocol: the rust-vmm `vhost` crate's [`Frontend`] frames the
//!   messages: `SET_OWNER`, `GET/SET_FEATURES` (`VIRTIO_F_VERSION_1`,
//!   `VHOST_USER_F_PROTOCOL_FEATURES`, `VIRTIO_RING_F_EVENT_IDX`, `VIRTIO_NET_F_MQ` with several queue
//!   pairs), `GET/SET_PROTOCOL_FEATURES` (`MQ`, `REPLY_ACK`),
//!   `SET_MEM_TABLE` (one memfd region holding every ring and buffer),
//!   `SET_VRING_NUM/BASE/ADDR/CALL/KICK`, `SET_VRING_ENABLE`.
//! - Memory: one memfd, mapped here through [`GuestMemory`] (the same
//!   checked mapping the backend uses) under a guest-physical label
//!   ([`GPA_BASE`]) and a frontend-virtual label ([`UVA_BASE`]) that differ,
//!   so a backend that confuses the two address spaces fails at once.
//! - Data path ([`FrontendTx`], [`FrontendRx`]): split virtqueues driven
//!   through the driver-side accessors of [`Ring`]. Transmit queue `q` is
//!   virtqueue `2q+1`, in order (position `p` is descriptor `p % size`,
//!   one descriptor per frame: 12-byte virtio-net header, written once,
//!   plus the frame), reclaimed in bulk, under a `TxLock` whose leases pin
//!   the session; receive queue `q` is virtqueue `2q` (every buffer
//!   posted, frames handed to the caller without a copy and re-posted on
//!   `release`). `EVENT_IDX` is negotiated when offered (kicks by
//!   `avail_event`); `MRG_RXBUF` when the largest frame needs more than
//!   [`RX_BUF_MRG`] bytes: receive buffers are then that size and a frame
//!   spans `num_buffers` of them, lent in place when they are adjacent,
//!   copied into the batch's scratch at the ring's wrap. Otherwise every
//!   buffer holds the largest frame. We poll.
//! - Validation: what the backend writes into the used rings is read once
//!   and checked (used index at most the entries it holds, ids in range and
//!   held by the device, lengths inside the buffer, `num_buffers` within
//!   the entries published). A lie is counted, the
//!   queue stops and the control thread disconnects. We never read our
//!   descriptor table back: buffer addresses come from our own ids.
//! - Control thread: connects (or accepts, `server`), sets up, then watches
//!   the socket; when the backend hangs up or lies the sessions are
//!   removed (link down; transmit slots reserved meanwhile are dropped as
//!   `TxStale`), and it connects again with a fresh memory table.

use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{fence, AtomicBool, AtomicU16, AtomicU32, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwapOption;

use crate::retire::Retired;
use fabric::batch::MAX_BATCH;
use fabric::{
    DropReason, Lease, Port, PortInfo, QueueId, RxFill, RxQueue, TxDrops, TxFill, TxFrames, TxLock,
    TxProducer, TxQueue,
};
use vhost::vhost_user::message::VhostUserHeaderFlag;
use vhost::vhost_user::{
    Frontend, VhostUserFrontend, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::sys::{self, push_guest, Buffers, Desc, GuestMemory, RegionSpec, Ring};
use super::vring::{need_event, AVAIL_F_NO_INTERRUPT, DESC_F_WRITE, USED_F_NO_NOTIFY};
use super::{Error, MAX_QUEUES};

/// Bytes per receive buffer with `VIRTIO_NET_F_MRG_RXBUF` (DPDK's mbuf
/// data room): larger frames span several buffers.
pub const RX_BUF_MRG: u64 = 2048;
/// Offset of `num_buffers` in the virtio-net header.
const NUM_BUFFERS_OFF: usize = 10;

/// Guest-physical address of the frontend's memory (a label).
pub const GPA_BASE: u64 = 0x1_0000_0000;
/// Frontend-virtual address of the same memory (another label).
pub const UVA_BASE: u64 = 0x4000_0000_0000;
/// virtio-net header length with `VIRTIO_F_VERSION_1`.
pub const HDR_LEN: usize = 12;

const F_MRG_RXBUF: u64 = 1 << 15;
const F_MQ: u64 = 1 << 22;
const F_EVENT_IDX: u64 = 1 << 29;
const F_VERSION_1: u64 = 1 << 32;

/// Settings of a vhost-user frontend port.
#[derive(Clone, Debug)]
pub struct FrontendConfig {
    /// The backend's unix socket.
    pub socket: PathBuf,
    /// Listen on the socket (for backends in client mode, e.g. OVS
    /// `dpdkvhostuserclient`) instead of connecting to it.
    pub server: bool,
    /// Queue pairs (`1..=MAX_QUEUES`).
    pub queues: u16,
    /// Entries per virtqueue (power of two, 2..=32768).
    pub queue_size: u16,
    /// Largest frame in bytes (without the virtio-net header).
    pub max_frame_b: usize,
    /// Largest frame this port transmits, when smaller than `max_frame_b`
    /// (a generator that knows its frame sizes): transmit buffers are
    /// sized for it, so a 64-byte stream's 1024 buffers lie in 128 KiB
    /// instead of 9 MB at the default 9000-byte `max_frame_b` (the
    /// backend reads one buffer per frame: fewer TLB misses, and buffers
    /// in consecutive lines its prefetcher follows). Longer frames are
    /// refused by `slots_for` (0). `None`: `max_frame_b`.
    pub tx_frame_b: Option<usize>,
}

impl FrontendConfig {
    /// Client mode, one queue pair of 1024 entries, 1518-byte frames.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            server: false,
            queues: 1,
            queue_size: 1024,
            max_frame_b: 1518,
            tx_frame_b: None,
        }
    }

    /// Largest frame transmitted.
    fn tx_frame_b(&self) -> usize {
        self.tx_frame_b.unwrap_or(self.max_frame_b)
    }

    /// Bytes per transmit buffer: header plus the largest frame
    /// transmitted, 64-byte aligned (whole cache lines: a buffer shares
    /// no line with its neighbours).
    fn tx_buf_b(&self) -> u64 {
        ((HDR_LEN + self.tx_frame_b()) as u64).div_ceil(64) * 64
    }

    /// Bytes per buffer: header plus the largest frame, 64-byte aligned.
    fn buf_b(&self) -> u64 {
        ((HDR_LEN + self.max_frame_b) as u64).div_ceil(64) * 64
    }

    /// Whether to ask for `VIRTIO_NET_F_MRG_RXBUF`: only when the largest
    /// frame does not fit in [`RX_BUF_MRG`] bytes. Receive buffers then
    /// are that size, packed as densely as a DPDK guest's (a 1024-entry
    /// ring of 9000-byte buffers spreads the backend's writes over 9 MB).
    fn wants_mrg(&self) -> bool {
        self.buf_b() > RX_BUF_MRG
    }

    /// Bytes per receive buffer, with or without mergeable buffers.
    fn rx_buf_b(&self, mrg: bool) -> u64 {
        if mrg {
            RX_BUF_MRG
        } else {
            self.buf_b()
        }
    }
}

/// What a backend did wrong (one counter each).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub enum BackendLie {
    /// The used index ran ahead of the entries the backend held.
    UsedIdx = 0,
    /// A used id outside the table, or one the backend did not hold.
    UsedId,
    /// A used length longer than the buffer or shorter than the header.
    UsedLen,
    /// A `num_buffers` of 0 or more than the used entries published.
    NumBuffers,
}

impl BackendLie {
    /// Number of kinds.
    pub const COUNT: usize = 4;
    /// Counter names, in order.
    pub const NAMES: [&'static str; Self::COUNT] = [
        "lie_used_idx",
        "lie_used_id",
        "lie_used_len",
        "lie_num_buffers",
    ];
}

/// Lies and rare events, shared by the queues and the control thread.
#[derive(Debug, Default)]
pub struct FrontendFault {
    /// A queue saw a lie: the control thread must disconnect.
    pub pending: AtomicBool,
    /// Lies by kind.
    pub lies: [AtomicU64; BackendLie::COUNT],
    /// Received frames shorter than an Ethernet header (re-posted, dropped).
    pub rx_runt: AtomicU64,
    /// Received frames longer than `max_frame_b` (over mergeable buffers;
    /// re-posted, dropped).
    pub rx_oversize: AtomicU64,
    /// Received frames over several buffers that are not adjacent in
    /// memory (the ring's wrap), copied into the batch's scratch.
    pub rx_linearised: AtomicU64,
    /// Transmit slots reserved while no session ran, or on a session that
    /// ended before they were written (dropped as `TxStale`).
    pub tx_stale: AtomicU64,
    /// Kick eventfd writes (the backend had not set `NO_NOTIFY`): one
    /// system call each, on the transmit path and when re-posting buffers.
    pub kicks: AtomicU64,
}

impl FrontendFault {
    #[cold]
    fn lie(&self, why: BackendLie, broken: &AtomicBool) {
        self.lies[why as usize].fetch_add(1, Relaxed);
        if !broken.swap(true, Relaxed) {
            self.pending.store(true, Release);
        }
    }

    /// Total lies seen.
    pub fn total_lies(&self) -> u64 {
        self.lies.iter().map(|c| c.load(Relaxed)).sum()
    }
}

/// Where one virtqueue's ring and buffers live in the memfd.
#[derive(Clone, Copy, Debug)]
struct VqLayout {
    desc: u64,
    avail: u64,
    used: u64,
    bufs: u64,
}

/// Offsets of every virtqueue and the total size; receive virtqueues
/// (even) have `rx_buf_b`-byte buffers, transmit ones `cfg.tx_buf_b()`.
fn layout(cfg: &FrontendConfig, rx_buf_b: u64) -> (Vec<VqLayout>, u64) {
    let n = cfg.queue_size as u64;
    let page = 4096u64;
    let mut off = 0u64;
    let mut v = Vec::new();
    for i in 0..2 * cfg.queues {
        let desc = off;
        let avail = desc + 16 * n;
        let used = (avail + 6 + 2 * n).div_ceil(page) * page;
        let bufs = (used + 6 + 8 * n).div_ceil(page) * page;
        let buf_b = if i % 2 == 0 { rx_buf_b } else { cfg.tx_buf_b() };
        off = (bufs + n * buf_b).div_ceil(page) * page;
        v.push(VqLayout {
            desc,
            avail,
            used,
            bufs,
        });
    }
    (v, off)
}

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
struct TxSession {
    ring: Ring,
    bufs: Buffers,
    kick: Arc<EventFd>,
    /// `VIRTIO_RING_F_EVENT_IDX` negotiated: kick by `avail_event`.
    event_idx: bool,
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
    fn new(ring: Ring, bufs_gpa: u64, buf_b: u64, kick: Arc<EventFd>) -> Result<Self, String> {
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
    session: Arc<TxSlot>,
    lock: TxLock<FrontendProducer>,
    /// Largest frame transmitted (`FrontendConfig::tx_frame_b`, or
    /// `max_frame_b`): what a transmit buffer holds.
    max_frame_b: usize,
    fault: Arc<FrontendFault>,
}

/// Where the control thread puts transmit queue `q`'s current session,
/// with a generation number that changes after every store (as
/// [`RxSlot`]): the producer keeps the session it loaded and loads the
/// `ArcSwap` again only when the number moved, instead of on every look
/// at free slots, reservation and publish.
#[derive(Default)]
struct TxSlot {
    session: ArcSwapOption<TxSession>,
    generation: AtomicU64,
    /// Frames published on this queue (`txqN_frames`; written under the
    /// queue's `TxLock` only, once per publish).
    frames: AtomicU64,
}

impl TxSlot {
    fn store(&self, s: Option<Arc<TxSession>>) {
        self.session.store(s);
        self.generation.fetch_add(1, Release);
    }

    fn take(&self) -> Option<Arc<TxSession>> {
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
    fn new(max_frame_b: usize, fault: Arc<FrontendFault>) -> Self {
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

/// One running receive virtqueue (the backend fills, we drain).
struct RxSession {
    ring: Ring,
    /// Buffer `i` belongs to descriptor `i`, located once.
    bufs: Buffers,
    buf_b: u64,
    /// Largest frame delivered (longer ones are `rx_oversize`).
    max_frame_b: usize,
    /// `VIRTIO_NET_F_MRG_RXBUF` negotiated: a frame spans `num_buffers`
    /// used entries.
    mrg: bool,
    kick: Arc<EventFd>,
    /// Whether the backend holds descriptor id `i` (owner only).
    held: Box<[AtomicBool]>,
    /// Buffers the backend holds.
    posted: AtomicU16,
    last_used: AtomicU16,
    avail: AtomicU16,
    broken: AtomicBool,
    /// `VIRTIO_RING_F_EVENT_IDX` negotiated: interrupts by `used_event`.
    event_idx: bool,
}

impl RxSession {
    /// Posts every buffer (before the backend learns of the ring).
    fn new(
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
struct RxSlot {
    session: ArcSwapOption<RxSession>,
    generation: AtomicU64,
    /// Frames delivered by this queue (`rxqN_frames`; written by the
    /// queue's single owner, once per burst).
    frames: AtomicU64,
}

impl RxSlot {
    fn store(&self, s: Option<Arc<RxSession>>) {
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
    slot: Arc<RxSlot>,
    /// The slot's generation `held` was loaded at.
    seen: u64,
    held: Option<Arc<RxSession>>,
    heads: Box<[u16]>,
    nheads: usize,
    fault: Arc<FrontendFault>,
    taken: Arc<AtomicBool>,
    /// The virtqueue's call eventfd (the same over reconnects).
    call: Arc<EventFd>,
    /// Notifications asked for (`set_notify`), applied to every session.
    notify_on: bool,
    /// Used entries waiting at the last burst, and buffers the backend
    /// held ([`RxQueue::fill_level`]).
    level: (u32, u32),
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

/// State shared by the port, its queues and its control thread.
struct Shared {
    name: String,
    cfg: FrontendConfig,
    tx: Box<[FrontendTx]>,
    rx: Vec<Arc<RxSlot>>,
    rx_taken: Vec<Arc<AtomicBool>>,
    /// Call eventfd of every virtqueue, made once and handed to every
    /// connection, so a receive queue's `notify_fd` stays the same.
    calls: Vec<Arc<EventFd>>,
    fault: Arc<FrontendFault>,
    stop: AtomicBool,
    connects: AtomicU64,
    disconnects_hangup: AtomicU64,
    disconnects_lie: AtomicU64,
    /// Disconnects because the backend sent a message of its own.
    disconnects_protocol: AtomicU64,
    setup_failures: AtomicU64,
    /// Why the last setup failed (for the peer-absent message).
    last_error: Mutex<String>,
    /// Transmit sessions of past connections still pinned by a producer
    /// (`crate::retire`): their last reference is dropped here, on the
    /// control thread, never inside a producer under its `TxLock`.
    retired: Retired<TxSession>,
}

/// A vhost-user frontend port (see the module documentation).
pub struct VhostFrontendPort {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl VhostFrontendPort {
    /// Creates the port and starts its control thread (which connects,
    /// or listens when `cfg.server`, and reconnects after a hang-up).
    pub fn new(name: &str, cfg: FrontendConfig) -> Result<Self, Error> {
        if cfg.queues == 0 || cfg.queues > MAX_QUEUES {
            return Err(Error::BadConfig(format!(
                "queues {} not in 1..={MAX_QUEUES}",
                cfg.queues
            )));
        }
        if !cfg.queue_size.is_power_of_two() || cfg.queue_size < 2 || cfg.queue_size > 32768 {
            return Err(Error::BadConfig(format!(
                "queue size {} is not a power of two in 2..=32768",
                cfg.queue_size
            )));
        }
        if !(64..=65535 - HDR_LEN).contains(&cfg.max_frame_b) {
            return Err(Error::BadConfig(format!(
                "max_frame_b {} not in 64..=65523",
                cfg.max_frame_b
            )));
        }
        if !(14..=cfg.max_frame_b).contains(&cfg.tx_frame_b()) {
            return Err(Error::BadConfig(format!(
                "tx_frame_b {} not in 14..=max_frame_b ({})",
                cfg.tx_frame_b(),
                cfg.max_frame_b
            )));
        }
        let listener = if cfg.server {
            Some(super::device::listen(&cfg.socket).map_err(Error::Socket)?)
        } else {
            None
        };
        let fault = Arc::new(FrontendFault::default());
        let shared = Arc::new(Shared {
            name: name.to_string(),
            tx: (0..cfg.queues)
                .map(|_| FrontendTx::new(cfg.tx_frame_b(), fault.clone()))
                .collect(),
            rx: (0..cfg.queues)
                .map(|_| Arc::new(RxSlot::default()))
                .collect(),
            rx_taken: (0..cfg.queues)
                .map(|_| Arc::new(AtomicBool::new(false)))
                .collect(),
            calls: (0..2 * cfg.queues)
                .map(|_| EventFd::new(EFD_NONBLOCK).map(Arc::new))
                .collect::<Result<_, _>>()
                .map_err(Error::Os)?,
            cfg,
            fault,
            stop: AtomicBool::new(false),
            connects: AtomicU64::new(0),
            disconnects_hangup: AtomicU64::new(0),
            disconnects_protocol: AtomicU64::new(0),
            disconnects_lie: AtomicU64::new(0),
            setup_failures: AtomicU64::new(0),
            last_error: Mutex::new(String::new()),
            retired: Retired::default(),
        });
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!(
                "vfront-{}",
                name.chars().take(8).collect::<String>()
            ))
            .spawn(move || run(s, listener))
            .map_err(Error::Os)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Connections set up so far.
    pub fn connects(&self) -> u64 {
        self.shared.connects.load(Relaxed)
    }

    /// Why the last connection attempt failed ("" if none did).
    pub fn last_error(&self) -> String {
        self.shared
            .last_error
            .lock()
            .map(|e| e.clone())
            .unwrap_or_default()
    }

    /// A named backend counter (see [`Port::backend_counters`]).
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.backend_counters()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

impl Drop for VhostFrontendPort {
    fn drop(&mut self) {
        self.shared.stop.store(true, Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.shared.cfg.server {
            let _ = std::fs::remove_file(&self.shared.cfg.socket);
        }
    }
}

impl Port for VhostFrontendPort {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: self.shared.name.clone(),
            kind: "vhost_user_frontend",
            queues: self.shared.cfg.queues,
            max_frame_b: self.shared.cfg.max_frame_b as u32,
        }
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let taken = self.shared.rx_taken.get(q as usize)?;
        if taken.swap(true, AcqRel) {
            return None;
        }
        Some(Box::new(FrontendRx {
            slot: self.shared.rx[q as usize].clone(),
            seen: u64::MAX,
            held: None,
            // A frame over mergeable buffers can take every entry.
            heads: vec![0u16; MAX_BATCH.max(self.shared.cfg.queue_size as usize)]
                .into_boxed_slice(),
            nheads: 0,
            fault: self.shared.fault.clone(),
            taken: taken.clone(),
            call: self.shared.calls[2 * q as usize].clone(),
            notify_on: false,
            level: (0, 0),
        }))
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        let q = (q as usize).min(self.shared.tx.len() - 1);
        &self.shared.tx[q]
    }

    fn link_up(&self) -> bool {
        self.shared.tx[0].session.session.load().is_some()
            && self.shared.rx[0].session.load().is_some()
    }

    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        let s = &self.shared;
        let f = &s.fault;
        let mut v = vec![
            ("connects", s.connects.load(Relaxed)),
            ("disconnects_hangup", s.disconnects_hangup.load(Relaxed)),
            ("disconnects_lie", s.disconnects_lie.load(Relaxed)),
            ("disconnects_protocol", s.disconnects_protocol.load(Relaxed)),
            ("setup_failures", s.setup_failures.load(Acquire)),
            ("rx_runt", f.rx_runt.load(Relaxed)),
            ("rx_oversize", f.rx_oversize.load(Relaxed)),
            ("rx_linearised", f.rx_linearised.load(Relaxed)),
            ("tx_stale", f.tx_stale.load(Relaxed)),
            ("kicks", f.kicks.load(Relaxed)),
        ];
        for (i, name) in BackendLie::NAMES.iter().enumerate() {
            v.push((name, f.lies[i].load(Relaxed)));
        }
        // Per queue pair: frames each queue carried (a multi-queue
        // frontend spreads flows over them; docs/vhost-user.md).
        for (q, (tx, rx)) in s.tx.iter().zip(s.rx.iter()).enumerate() {
            v.push((TXQ_FRAMES[q], tx.session.frames.load(Relaxed)));
            v.push((RXQ_FRAMES[q], rx.frames.load(Relaxed)));
        }
        v
    }
}

/// Counter names of the frames each transmit queue published.
const TXQ_FRAMES: [&str; MAX_QUEUES as usize] = [
    "txq0_frames",
    "txq1_frames",
    "txq2_frames",
    "txq3_frames",
    "txq4_frames",
    "txq5_frames",
    "txq6_frames",
    "txq7_frames",
    "txq8_frames",
    "txq9_frames",
    "txq10_frames",
    "txq11_frames",
    "txq12_frames",
    "txq13_frames",
    "txq14_frames",
    "txq15_frames",
];
/// Counter names of the frames each receive queue delivered.
const RXQ_FRAMES: [&str; MAX_QUEUES as usize] = [
    "rxq0_frames",
    "rxq1_frames",
    "rxq2_frames",
    "rxq3_frames",
    "rxq4_frames",
    "rxq5_frames",
    "rxq6_frames",
    "rxq7_frames",
    "rxq8_frames",
    "rxq9_frames",
    "rxq10_frames",
    "rxq11_frames",
    "rxq12_frames",
    "rxq13_frames",
    "rxq14_frames",
    "rxq15_frames",
];

/// One set-up connection: what must live as long as it runs.
struct Conn {
    _fe: Frontend,
    watch: UnixStream,
}

fn stopped(s: &Shared) -> bool {
    s.stop.load(Acquire)
}

/// The control thread: connect (or accept), set up, watch, tear down,
/// again, until the port is dropped.
fn run(shared: Arc<Shared>, listener: Option<UnixListener>) {
    let mut backoff = Duration::from_millis(20);
    if let Some(l) = &listener {
        let _ = l.set_nonblocking(true);
    }
    while !stopped(&shared) {
        shared.retired.sweep();
        let stream = match &listener {
            Some(l) => match l.accept() {
                Ok((s, _)) => s,
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            },
            None => match UnixStream::connect(&shared.cfg.socket) {
                Ok(s) => s,
                Err(e) => {
                    if let Ok(mut le) = shared.last_error.lock() {
                        *le = format!("connect {}: {e}", shared.cfg.socket.display());
                    }
                    std::thread::sleep(backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    continue;
                }
            },
        };
        let _ = stream.set_nonblocking(false);
        let watchdog = SetupWatchdog::start(&stream);
        let done = setup(&shared, stream);
        let timed_out = watchdog.finish();
        let conn = match done {
            Ok(c) => c,
            Err(e) => {
                let e = if timed_out {
                    format!(
                        "{e} (the backend did not finish the set-up within {} s: \
                         connection closed)",
                        SETUP_TIMEOUT.as_secs()
                    )
                } else {
                    e
                };
                eprintln!(
                    "vhost-user {}: set-up with the backend failed: {e}",
                    shared.name
                );
                // The reason first: whoever sees the failure counted reads
                // its reason (it was written after, and read as "").
                if let Ok(mut le) = shared.last_error.lock() {
                    *le = e;
                }
                shared.setup_failures.fetch_add(1, Release);
                teardown(&shared);
                std::thread::sleep(backoff);
                backoff = (backoff * 2).min(Duration::from_millis(500));
                continue;
            }
        };
        backoff = Duration::from_millis(20);
        let n = shared.connects.fetch_add(1, Relaxed) + 1;
        if n > 1 {
            eprintln!(
                "vhost-user {}: reconnected to the backend (connection {n})",
                shared.name
            );
        }
        // Watch: the backend sends nothing on its own, so readable means
        // it hung up (or broke the protocol).
        loop {
            if stopped(&shared) {
                break;
            }
            shared.retired.sweep();
            if shared.fault.pending.load(Acquire) {
                shared.disconnects_lie.fetch_add(1, Relaxed);
                eprintln!(
                    "vhost-user {}: the backend broke the used ring ({} lies); disconnecting",
                    shared.name,
                    shared.fault.total_lies()
                );
                break;
            }
            if sys::poll_hangup(conn.watch.as_raw_fd(), 50) {
                // Bytes waiting: a message of the backend's own (backends
                // answer requests and send nothing else on this socket).
                // None: it hung up.
                let mut b = [0u8; 1];
                if matches!(sys::peek(conn.watch.as_raw_fd(), &mut b), Ok(n) if n > 0) {
                    shared.disconnects_protocol.fetch_add(1, Relaxed);
                    let e = "the backend sent a message nobody asked for".to_string();
                    eprintln!("vhost-user {}: {e}; disconnecting", shared.name);
                    if let Ok(mut le) = shared.last_error.lock() {
                        *le = e;
                    }
                } else {
                    shared.disconnects_hangup.fetch_add(1, Relaxed);
                    eprintln!(
                        "vhost-user {}: the backend went away; reconnecting",
                        shared.name
                    );
                }
                break;
            }
        }
        teardown(&shared);
        let _ = conn.watch.shutdown(std::net::Shutdown::Both);
        drop(conn);
        shared.fault.pending.store(false, Release);
    }
    teardown(&shared);
}

/// How long a backend may take to answer the whole set-up.
const SETUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Closes a connection whose set-up takes longer than [`SETUP_TIMEOUT`]: a
/// backend that accepts and never answers (or never acknowledges a
/// `REPLY_ACK` it negotiated) would otherwise hold the control thread, and
/// the port's drop, forever. A socket read timeout does not do it: the
/// `vhost` crate retries a read that timed out (`SocketRetry`). The
/// shutdown makes the blocked read return end-of-file.
struct SetupWatchdog {
    state: Arc<(Mutex<bool>, std::sync::Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl SetupWatchdog {
    fn start(stream: &UnixStream) -> SetupWatchdog {
        let state = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let thread = stream.try_clone().ok().and_then(|s| {
            let (st, f) = (state.clone(), fired.clone());
            std::thread::Builder::new()
                .name("vfront-setup".into())
                .spawn(move || {
                    let deadline = std::time::Instant::now() + SETUP_TIMEOUT;
                    let (m, cv) = &*st;
                    let Ok(mut finished) = m.lock() else {
                        return;
                    };
                    while !*finished {
                        let now = std::time::Instant::now();
                        if now >= deadline {
                            f.store(true, Relaxed);
                            let _ = s.shutdown(std::net::Shutdown::Both);
                            return;
                        }
                        finished = match cv.wait_timeout(finished, deadline - now) {
                            Ok((g, _)) => g,
                            Err(_) => return,
                        };
                    }
                })
                .ok()
        });
        SetupWatchdog {
            state,
            fired,
            thread,
        }
    }

    /// Stops the watchdog; whether it closed the connection.
    fn finish(mut self) -> bool {
        if let Ok(mut g) = self.state.0.lock() {
            *g = true;
        }
        self.state.1.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.fired.load(Relaxed)
    }
}

/// Removes every session (workers drop theirs at the next call; the memory
/// is unmapped when the last holder lets go).
fn teardown(s: &Shared) {
    for t in s.tx.iter() {
        if let Some(old) = t.session.take() {
            s.retired.retire(old);
        }
    }
    for r in &s.rx {
        r.store(None);
    }
}

fn setup(shared: &Shared, stream: UnixStream) -> Result<Conn, String> {
    let cfg = &shared.cfg;
    let e = |what: &str| {
        let what = what.to_string();
        move |err: vhost::Error| format!("{what}: {err}")
    };
    // The backend shares our eventfds and can make them blocking again:
    // kicks go through `guard::notify`, whose watchdog frees a thread
    // stuck writing one (started here, on the control thread).
    crate::guard::start_watchdog();
    // A backend that stops answering must not hold the thread forever
    // (the read timeout alone does not: see `SetupWatchdog`).
    let _ = stream.set_read_timeout(Some(SETUP_TIMEOUT));
    let watch = stream.try_clone().map_err(|x| format!("socket: {x}"))?;
    let nvq = 2 * cfg.queues as usize;
    let mut fe = Frontend::from_stream(stream, nvq as u64);
    fe.set_owner().map_err(e("SET_OWNER"))?;
    let offered = fe.get_features().map_err(e("GET_FEATURES"))?;
    if offered & F_VERSION_1 == 0 {
        return Err("the backend does not offer VIRTIO_F_VERSION_1".into());
    }
    let pf_bit = VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits();
    // EVENT_IDX when offered: kicks by the backend's avail_event. We poll
    // and leave used_event at 0, so a backend interrupts us at most once
    // per 65536 used entries.
    let event_idx = offered & F_EVENT_IDX != 0;
    let mut want = F_VERSION_1 | (offered & (pf_bit | F_EVENT_IDX));
    // Mergeable receive buffers when the largest frame needs more than
    // RX_BUF_MRG bytes and the backend offers them; else every buffer
    // holds the largest frame.
    let mrg = cfg.wants_mrg() && offered & F_MRG_RXBUF != 0;
    if mrg {
        want |= F_MRG_RXBUF;
    }
    let rx_buf_b = cfg.rx_buf_b(mrg);
    if cfg.queues > 1 {
        if offered & F_MQ == 0 {
            return Err(format!(
                "{} queue pairs asked, but the backend does not offer VIRTIO_NET_F_MQ",
                cfg.queues
            ));
        }
        want |= F_MQ;
    }
    let protocol = offered & pf_bit != 0;
    if protocol {
        let pf = fe
            .get_protocol_features()
            .map_err(e("GET_PROTOCOL_FEATURES"))?;
        if cfg.queues > 1 && !pf.contains(VhostUserProtocolFeatures::MQ) {
            return Err("the backend does not offer protocol feature MQ".into());
        }
        let ack = pf & (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK);
        fe.set_protocol_features(ack)
            .map_err(e("SET_PROTOCOL_FEATURES"))?;
        if ack.contains(VhostUserProtocolFeatures::REPLY_ACK) {
            fe.set_hdr_flags(VhostUserHeaderFlag::NEED_REPLY);
        }
    }
    fe.set_features(want).map_err(e("SET_FEATURES"))?;

    // Memory: one memfd for every ring and buffer.
    let (lay, size) = layout(cfg, rx_buf_b);
    let file = sys::memfd("turnout-vhost-frontend", size).map_err(|x| format!("memfd: {x}"))?;
    let mine = file.try_clone().map_err(|x| format!("memfd: {x}"))?;
    let mem = Arc::new(
        GuestMemory::map(vec![RegionSpec {
            gpa: GPA_BASE,
            size,
            uva: UVA_BASE,
            offset: 0,
            file: mine,
        }])
        .map_err(|x| format!("mapping the memfd: {x}"))?,
    );
    let region = VhostUserMemoryRegionInfo {
        guest_phys_addr: GPA_BASE,
        memory_size: size,
        userspace_addr: UVA_BASE,
        mmap_offset: 0,
        mmap_handle: file.as_raw_fd(),
    };
    fe.set_mem_table(&[region]).map_err(e("SET_MEM_TABLE"))?;
    drop(file);

    let buf_b = cfg.tx_buf_b();
    let mut txs = Vec::new();
    let mut rxs = Vec::new();
    for (i, l) in lay.iter().enumerate() {
        let ring = Ring::new(
            mem.clone(),
            UVA_BASE + l.desc,
            UVA_BASE + l.avail,
            UVA_BASE + l.used,
            cfg.queue_size,
        )
        .map_err(|x| format!("ring {i}: {x:?}"))?;
        let kick = Arc::new(EventFd::new(EFD_NONBLOCK).map_err(|x| format!("eventfd: {x}"))?);
        let call = &shared.calls[i];
        let bufs_gpa = GPA_BASE + l.bufs;
        // Receive buffers are posted before the backend learns the ring.
        if i % 2 == 0 {
            let mut r = RxSession::new(ring, bufs_gpa, rx_buf_b, cfg.max_frame_b, kick.clone())?;
            r.event_idx = event_idx;
            r.mrg = mrg;
            rxs.push(Arc::new(r));
        } else {
            ring.set_avail_flags(AVAIL_F_NO_INTERRUPT);
            let mut t = TxSession::new(ring, bufs_gpa, buf_b, kick.clone())?;
            t.event_idx = event_idx;
            txs.push(Arc::new(t));
        }
        fe.set_vring_num(i, cfg.queue_size)
            .map_err(e("SET_VRING_NUM"))?;
        fe.set_vring_base(i, 0).map_err(e("SET_VRING_BASE"))?;
        fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: cfg.queue_size,
                queue_size: cfg.queue_size,
                flags: 0,
                desc_table_addr: UVA_BASE + l.desc,
                used_ring_addr: UVA_BASE + l.used,
                avail_ring_addr: UVA_BASE + l.avail,
                log_addr: None,
            },
        )
        .map_err(e("SET_VRING_ADDR"))?;
        fe.set_vring_call(i, call).map_err(e("SET_VRING_CALL"))?;
        fe.set_vring_kick(i, &kick).map_err(e("SET_VRING_KICK"))?;
    }
    if protocol {
        for i in 0..nvq {
            fe.set_vring_enable(i, true)
                .map_err(e("SET_VRING_ENABLE"))?;
        }
    }
    for (q, (t, r)) in txs.into_iter().zip(rxs).enumerate() {
        // Tell the backend about the posted receive buffers.
        crate::guard::notify(r.kick.as_raw_fd());
        shared.rx[q].store(Some(r));
        shared.tx[q].session.store(Some(t));
        // A receiver asleep on the call eventfd wakes, follows the new
        // session and asks it for notifications (spurious wake-up, once).
        crate::guard::notify(shared.calls[2 * q].as_raw_fd());
    }
    Ok(Conn { _fe: fe, watch })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fabric::RxBatch;

    const N: u16 = 8;
    const BUF: u64 = 256;

    /// Where the buffers of `ring()` start.
    const BUFS: u64 = 0x4000;

    /// The split ring of `q` entries at the start of `mem`: every call is
    /// another view of the same ring (ours, or the device's, played by
    /// the test).
    fn ring_at(mem: &Arc<GuestMemory>, q: u16) -> Ring {
        let page = 0x1000u64;
        let avail = (16 * q as u64).div_ceil(page) * page;
        let used = avail + (6 + 2 * q as u64).div_ceil(page) * page;
        Ring::new(mem.clone(), GPA_BASE, GPA_BASE + avail, GPA_BASE + used, q).unwrap()
    }

    /// A ring of `N` entries in anonymous memory.
    fn ring() -> (Arc<GuestMemory>, Ring) {
        let mem = Arc::new(GuestMemory::anonymous(GPA_BASE, 0x10000).unwrap());
        let r = ring_at(&mem, N);
        (mem, r)
    }

    fn device_ring(mem: &Arc<GuestMemory>) -> Ring {
        ring_at(mem, N)
    }

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

    fn kick() -> Arc<EventFd> {
        Arc::new(EventFd::new(EFD_NONBLOCK).unwrap())
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

    /// Ring size and buffer offset of the cost benches.
    const COST_Q: u16 = 1024;
    const COST_BUFS: u64 = 0x10_0000;

    /// Buffer bytes for 1518-byte frames (each buffer holds one).
    const COST_BUF_B: u64 = (HDR_LEN as u64 + 1518).div_ceil(64) * 64;

    /// Memory for a `COST_Q`-entry ring at 0 and its buffers of `buf_b`
    /// bytes at `COST_BUFS`.
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

    fn cost_memory(buf_b: u64) -> Arc<GuestMemory> {
        let size = COST_BUFS + COST_Q as u64 * buf_b;
        Arc::new(GuestMemory::anonymous(GPA_BASE, size).unwrap())
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

    fn thread_cpu_ns() -> u64 {
        let mut t = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
        t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
    }

    #[test]
    fn layout_keeps_rings_aligned_and_apart() {
        let mut cfg = FrontendConfig::new("/x");
        cfg.queues = 2;
        cfg.queue_size = 256;
        let (l, size) = layout(&cfg, cfg.rx_buf_b(false));
        assert_eq!(l.len(), 4);
        for (i, v) in l.iter().enumerate() {
            assert_eq!(v.desc % 16, 0);
            assert_eq!(v.used % 4096, 0);
            assert!(v.avail >= v.desc + 16 * 256);
            assert!(v.used >= v.avail + 6 + 2 * 256);
            assert!(v.bufs >= v.used + 6 + 8 * 256);
            let end = v.bufs + 256 * cfg.buf_b();
            let next = l.get(i + 1).map_or(size, |n| n.desc);
            assert!(end <= next, "virtqueue {i} overlaps the next");
        }
        assert_eq!(cfg.buf_b(), 1536);
    }

    #[test]
    fn transmit_buffers_are_sized_for_the_largest_frame_sent() {
        let mut cfg = FrontendConfig::new("/x");
        cfg.queue_size = 1024;
        cfg.max_frame_b = 9000;
        // Default: every transmit buffer holds the largest frame.
        assert_eq!(cfg.tx_buf_b(), 9024);
        // A 64-byte stream (60 bytes without FCS): header and frame in two
        // whole lines, the ring's buffers in 128 KiB.
        cfg.tx_frame_b = Some(60);
        assert_eq!(cfg.tx_buf_b(), 128);
        let (l, size) = layout(&cfg, cfg.rx_buf_b(cfg.wants_mrg()));
        let tx = l[1];
        assert_eq!(tx.bufs % 64, 0);
        assert!(tx.bufs + 1024 * 128 <= size);
        // Receive buffers are not affected (mergeable, 2 KiB).
        assert_eq!(
            l[1].desc - l[0].bufs,
            (1024 * RX_BUF_MRG).div_ceil(4096) * 4096
        );
        cfg.tx_frame_b = Some(1514);
        assert_eq!(cfg.tx_buf_b(), 1536);
        // The queue carries frames up to that size, no longer ones.
        let fault = Arc::new(FrontendFault::default());
        let q = FrontendTx::new(cfg.tx_frame_b(), fault);
        assert_eq!(q.slots_for(1514), 1);
        assert_eq!(q.slots_for(1515), 0);
        // Larger than max_frame_b, or below a header's worth: refused.
        cfg.tx_frame_b = Some(9001);
        assert!(VhostFrontendPort::new("t", cfg.clone()).is_err());
        cfg.tx_frame_b = Some(10);
        assert!(VhostFrontendPort::new("t", cfg).is_err());
    }
}
