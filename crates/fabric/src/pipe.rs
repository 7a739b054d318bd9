//! The in-process port: a pair of shared-memory slot rings between the
//! switch and a peer thread (a test, a bench, an in-process VNF). It is the
//! reference implementation of the port contract and what the tests and
//! criterion benches of the fabric run on.
//!
//! Each queue pair has two rings of fixed-size slots:
//! - *in* (peer → switch): the peer writes frames and publishes its head;
//!   the switch's [`RxQueue`] reads them and releases by moving the tail;
//! - *out* (switch → peer): the fabric reserves, writes and publishes; the
//!   peer reads and releases.
//!
//! Head and tail live on their own cache lines; each side caches the other
//! side's index (rtrb style). Notifications: a side that wants to be woken
//! sets its `want_notify` flag, then re-checks the ring; the producer
//! publishes, fences, and writes the eventfd only if the flag is set.

use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use crate::batch::RxFill;
use crate::port::{
    Lease, Port, PortInfo, QueueId, RxQueue, TxDrops, TxFrames, TxLock, TxProducer, TxQueue,
};
use crate::sys::EventFd;

#[repr(align(64))]
struct Padded<T>(T);

/// One single-producer single-consumer ring of fixed-size slots.
struct SlotRing {
    mem: *mut u8,
    mem_len: usize,
    lens: Box<[AtomicU32]>,
    mask: u64,
    slot_b: usize,
    /// Published by the producer (next slot to be written).
    head: Padded<AtomicU64>,
    /// Released by the consumer (next slot to be read).
    tail: Padded<AtomicU64>,
    /// Consumer asked to be notified.
    want_notify: Padded<AtomicBool>,
    notify: EventFd,
}

// SAFETY: `mem` is a heap buffer owned by the ring (freed in Drop), not tied
// to a thread.
unsafe impl Send for SlotRing {}
// SAFETY: the slot memory is shared by one producer and one consumer; slot
// ownership is handed over by the Acquire/Release head and tail indexes.
// The producer's reservation cursor is not in here: the switch side's
// lives in the queue's `TxLock`, the peer side's in `PipePeer` (`&mut`).
unsafe impl Sync for SlotRing {}

impl SlotRing {
    fn new(slots: usize, slot_b: usize) -> std::io::Result<Self> {
        let slots = slots.next_power_of_two().max(2);
        let mem_len = slots * slot_b;
        let mem = Box::into_raw(vec![0u8; mem_len].into_boxed_slice()) as *mut u8;
        Ok(Self {
            mem,
            mem_len,
            lens: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            mask: slots as u64 - 1,
            slot_b,
            head: Padded(AtomicU64::new(0)),
            tail: Padded(AtomicU64::new(0)),
            want_notify: Padded(AtomicBool::new(false)),
            notify: EventFd::new()?,
        })
    }

    fn size(&self) -> u64 {
        self.mask + 1
    }

    #[inline]
    fn slot_ptr(&self, idx: u64) -> *mut u8 {
        // SAFETY: (idx & mask) < slots, so the offset is inside `mem`.
        unsafe { self.mem.add((idx & self.mask) as usize * self.slot_b) }
    }

    /// Producer: make everything before `head` visible and wake the consumer
    /// if it asked.
    #[inline]
    fn publish(&self, head: u64) {
        self.head.0.store(head, Ordering::Release);
        fence(Ordering::SeqCst);
        if self.want_notify.0.load(Ordering::Relaxed) {
            self.notify.notify();
        }
    }

    /// Consumer: enable/disable notification; on enable, re-check.
    fn set_notify(&self, on: bool) -> bool {
        self.want_notify.0.store(on, Ordering::SeqCst);
        if on {
            fence(Ordering::SeqCst);
            self.head.0.load(Ordering::Acquire) != self.tail.0.load(Ordering::Relaxed)
        } else {
            false
        }
    }
}

impl Drop for SlotRing {
    fn drop(&mut self) {
        // SAFETY: mem came from Box<[u8]> of exactly mem_len bytes.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.mem,
                self.mem_len,
            )))
        };
    }
}

struct QueuePair {
    inbound: SlotRing,
    outbound: OutTx,
    rx_taken: AtomicBool,
}

/// The switch's transmit side of one queue: the outbound ring and, under
/// its lock, the producer's reservation cursor.
struct OutTx {
    ring: Arc<SlotRing>,
    lock: TxLock<OutProducer>,
}

/// Producer state of an outbound ring.
struct OutProducer {
    ring: Arc<SlotRing>,
    reserved: u64,
}

struct Shared {
    name: String,
    queues: Box<[QueuePair]>,
    slot_b: usize,
    link: AtomicBool,
}

/// Sizes of a pipe.
#[derive(Clone, Copy, Debug)]
pub struct PipeConfig {
    /// Queue pairs.
    pub queues: u16,
    /// Slots per ring (rounded up to a power of two).
    pub ring_slots: usize,
    /// Bytes per slot: the largest frame the pipe carries.
    pub slot_b: usize,
}

impl Default for PipeConfig {
    fn default() -> Self {
        Self {
            queues: 1,
            ring_slots: 1024,
            slot_b: 2048,
        }
    }
}

/// The switch side of a pipe.
pub struct PipePort(Arc<Shared>);

/// The peer side of a pipe (one per pipe; use from one thread at a time).
pub struct PipePeer {
    shared: Arc<Shared>,
    /// Per queue: cached head of the outbound ring and count read in the
    /// last `recv` (released by the next `recv`).
    out_head: Vec<u64>,
    /// Per queue: the peer's reservation cursor on the inbound ring.
    in_reserved: Vec<u64>,
}

/// Creates a pipe: the port to add to a switch and its peer.
pub fn pipe(name: &str, cfg: PipeConfig) -> std::io::Result<(PipePort, PipePeer)> {
    let queues = cfg.queues.max(1);
    let mut qs = Vec::with_capacity(queues as usize);
    for _ in 0..queues {
        let ring = Arc::new(SlotRing::new(cfg.ring_slots, cfg.slot_b)?);
        qs.push(QueuePair {
            inbound: SlotRing::new(cfg.ring_slots, cfg.slot_b)?,
            outbound: OutTx {
                lock: TxLock::new(OutProducer {
                    ring: ring.clone(),
                    reserved: 0,
                }),
                ring,
            },
            rx_taken: AtomicBool::new(false),
        });
    }
    let shared = Arc::new(Shared {
        name: name.to_string(),
        queues: qs.into_boxed_slice(),
        slot_b: cfg.slot_b,
        link: AtomicBool::new(true),
    });
    Ok((
        PipePort(shared.clone()),
        PipePeer {
            shared,
            out_head: vec![0; queues as usize],
            in_reserved: vec![0; queues as usize],
        },
    ))
}

impl Port for PipePort {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: self.0.name.clone(),
            kind: "pipe",
            queues: self.0.queues.len() as u16,
            max_frame_b: self.0.slot_b as u32,
        }
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let qp = self.0.queues.get(q as usize)?;
        if qp.rx_taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Box::new(PipeRx {
            shared: self.0.clone(),
            q: q as usize,
            head: 0,
            taken: 0,
            filled: 0,
        }))
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        let q = (q as usize).min(self.0.queues.len() - 1);
        &self.0.queues[q].outbound
    }

    fn link_up(&self) -> bool {
        self.0.link.load(Ordering::Relaxed)
    }
}

struct PipeRx {
    shared: Arc<Shared>,
    q: usize,
    /// Cached producer head.
    head: u64,
    /// Frames handed out by the last burst.
    taken: u64,
    /// Frames in the ring at the last burst.
    filled: u32,
}

impl RxQueue for PipeRx {
    fn burst(&mut self, rx: &mut RxFill<'_>) -> usize {
        let ring = &self.shared.queues[self.q].inbound;
        let tail = ring.tail.0.load(Ordering::Relaxed) + self.taken;
        if self.head == tail {
            self.head = ring.head.0.load(Ordering::Acquire);
        }
        self.filled = (self.head - (tail - self.taken)) as u32;
        let avail = (self.head - tail).min(rx.room() as u64);
        for i in 0..avail {
            let idx = tail + i;
            let len = ring.lens[(idx & ring.mask) as usize].load(Ordering::Relaxed);
            // SAFETY: slot idx was published by the producer (idx < head) and
            // stays ours until release moves the tail past it.
            unsafe { rx.push(ring.slot_ptr(idx), len) };
        }
        self.taken += avail;
        avail as usize
    }

    fn release(&mut self) {
        if self.taken != 0 {
            let ring = &self.shared.queues[self.q].inbound;
            let t = ring.tail.0.load(Ordering::Relaxed) + self.taken;
            ring.tail.0.store(t, Ordering::Release);
            self.taken = 0;
        }
    }

    fn notify_fd(&self) -> Option<std::os::fd::RawFd> {
        Some(self.shared.queues[self.q].inbound.notify.fd())
    }

    fn set_notify(&mut self, enabled: bool) -> bool {
        self.shared.queues[self.q].inbound.set_notify(enabled)
    }

    fn ack_notify(&mut self) {
        self.shared.queues[self.q].inbound.notify.drain();
    }

    fn peek(&self) -> Option<bool> {
        let ring = &self.shared.queues[self.q].inbound;
        let tail = ring.tail.0.load(Ordering::Relaxed) + self.taken;
        Some(ring.head.0.load(Ordering::Acquire) != tail)
    }

    fn fill_level(&self) -> Option<(u32, u32)> {
        let size = self.shared.queues[self.q].inbound.size() as u32;
        Some((self.filled, size))
    }
}

impl Drop for PipeRx {
    fn drop(&mut self) {
        self.release();
        self.shared.queues[self.q]
            .rx_taken
            .store(false, Ordering::Release);
    }
}

impl TxProducer for OutProducer {
    fn free_slots(&mut self) -> u32 {
        let used = self.reserved - self.ring.tail.0.load(Ordering::Acquire);
        (self.ring.size() - used) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved = first + n as u64;
        Lease::at(first)
    }

    fn publish_deferred(&mut self, tail: u64, _: &mut TxDrops) -> bool {
        self.ring.head.0.store(tail, Ordering::Release);
        // Pairs with the consumer's fence in set_notify (no lost wake-up).
        fence(Ordering::SeqCst);
        self.ring.want_notify.0.load(Ordering::Relaxed)
    }
}

impl TxQueue for OutTx {
    fn slots_for(&self, len: usize) -> u32 {
        u32::from(len <= self.ring.slot_b)
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        let r = &*self.ring;
        for (j, (frame, _)) in frames.iter().enumerate() {
            let slot = lease.first + j as u64;
            let len = frame.len().min(r.slot_b);
            // SAFETY: the caller owns slot (reserved, unpublished: trait
            // contract, one slot per frame); the slot has slot_b bytes and
            // len <= slot_b.
            unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), r.slot_ptr(slot), len) };
            r.lens[(slot & r.mask) as usize].store(len as u32, Ordering::Relaxed);
        }
    }

    fn kick(&self, _: &mut TxDrops) {
        self.ring.notify.notify();
    }
}

impl PipePeer {
    /// Number of queue pairs.
    pub fn queues(&self) -> usize {
        self.shared.queues.len()
    }

    /// Largest frame, in bytes.
    pub fn slot_b(&self) -> usize {
        self.shared.slot_b
    }

    /// Sets the link state the switch sees (a detached peer).
    pub fn set_link(&self, up: bool) {
        self.shared.link.store(up, Ordering::Relaxed);
    }

    /// Free slots in queue `q`'s inbound ring.
    pub fn send_room(&self, q: usize) -> usize {
        let r = &self.shared.queues[q].inbound;
        (r.size() - (self.in_reserved[q] - r.tail.0.load(Ordering::Acquire))) as usize
    }

    /// Sends up to `n` frames into the switch on queue `q`: `fill(i, buf)`
    /// writes frame `i` into `buf` (of `slot_b` bytes) and returns its
    /// length. Returns how many were sent (fewer when the ring is full).
    pub fn send_with(
        &mut self,
        q: usize,
        n: usize,
        mut fill: impl FnMut(usize, &mut [u8]) -> usize,
    ) -> usize {
        let r = &self.shared.queues[q].inbound;
        let n = n.min(self.send_room(q));
        let first = self.in_reserved[q];
        for i in 0..n {
            let idx = first + i as u64;
            // SAFETY: slots [first, first+n) are free (room checked) and owned
            // by this single producer until published.
            let buf = unsafe { std::slice::from_raw_parts_mut(r.slot_ptr(idx), r.slot_b) };
            let len = fill(i, buf).min(r.slot_b);
            r.lens[(idx & r.mask) as usize].store(len as u32, Ordering::Relaxed);
        }
        self.in_reserved[q] = first + n as u64;
        if n > 0 {
            r.publish(first + n as u64);
        }
        n
    }

    /// Sends copies of `frames` on queue `q`; returns how many fit.
    pub fn send(&mut self, q: usize, frames: &[&[u8]]) -> usize {
        self.send_with(q, frames.len(), |i, buf| {
            let f = frames[i];
            let len = f.len().min(buf.len());
            buf[..len].copy_from_slice(&f[..len]);
            f.len()
        })
    }

    /// Receives up to `max` frames the switch sent on queue `q`, calling
    /// `f` on each; releases them afterwards. Returns how many.
    pub fn recv(&mut self, q: usize, max: usize, mut f: impl FnMut(&[u8])) -> usize {
        let r = &*self.shared.queues[q].outbound.ring;
        let tail = r.tail.0.load(Ordering::Relaxed);
        if self.out_head[q] == tail {
            self.out_head[q] = r.head.0.load(Ordering::Acquire);
        }
        let n = (self.out_head[q] - tail).min(max as u64);
        for i in 0..n {
            let idx = tail + i;
            let len = r.lens[(idx & r.mask) as usize].load(Ordering::Relaxed) as usize;
            // SAFETY: idx < published head, so the slot is written and ours
            // to read until the tail moves past it.
            let data = unsafe { std::slice::from_raw_parts(r.slot_ptr(idx), len) };
            f(data);
        }
        if n > 0 {
            r.tail.0.store(tail + n, Ordering::Release);
        }
        n as usize
    }

    /// Frames waiting on queue `q`'s outbound ring.
    pub fn pending(&self, q: usize) -> usize {
        let r = &*self.shared.queues[q].outbound.ring;
        (r.head.0.load(Ordering::Acquire) - r.tail.0.load(Ordering::Relaxed)) as usize
    }

    /// Eventfd that becomes readable when the switch sends on queue `q`
    /// while [`PipePeer::set_notify`] is on.
    pub fn notify_fd(&self, q: usize) -> std::os::fd::RawFd {
        self.shared.queues[q].outbound.ring.notify.fd()
    }

    /// Enables notification on queue `q`; true if frames already wait.
    pub fn set_notify(&self, q: usize, on: bool) -> bool {
        self.shared.queues[q].outbound.ring.set_notify(on)
    }
}
