//! The fabric benches' rig, shared by `benches/fabric.rs`, the callgrind
//! instrument `examples/fabric_loop.rs` and the tunnel bench
//! (`crates/ports/benches/tunnel.rs`), which include it with `#[path]`:
//! synthetic source ports whose receive queue hands out the same frame
//! forever, and sinks that copy every frame into a ring of 2 KiB slots
//! that nobody drains (always free), so the measured work is the fabric's:
//! classify, lists, reserve, copy, publish, counters.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use fabric::port::{Lease, TxLock, TxProducer};
use fabric::{
    Ctx, Forwarder, Logic, Port, PortEntry, PortId, PortInfo, PortTable, QueueId, RxBatch, RxFill,
    RxQueue, TxDrops, TxFrames, TxQueue, Verdict,
};

// ---------------------------------------------------------------- ports

/// A source whose every burst is `room` views of its template frames, in
/// turn (one frame: every view is of it).
pub struct Source {
    frames: Box<[Box<[u8]>]>,
    taken: AtomicBool,
}

struct SourceRx {
    /// (start, length) of every template frame.
    frames: Box<[(*mut u8, u32)]>,
    /// The template of the next view (several frames only).
    next: usize,
}

// SAFETY: the templates are never written while views exist (logics used
// here only read), and they outlive the queue (Arc<Source> is held by the
// table).
unsafe impl Send for SourceRx {}

impl Source {
    pub fn new(frame: &[u8]) -> Arc<Self> {
        Self::with_frames(std::slice::from_ref(&frame))
    }

    /// A source of several frames, handed out in turn (at least one).
    pub fn with_frames<F: AsRef<[u8]>>(frames: &[F]) -> Arc<Self> {
        assert!(!frames.is_empty(), "a source needs a frame");
        Arc::new(Self {
            frames: frames.iter().map(|f| f.as_ref().into()).collect(),
            taken: AtomicBool::new(false),
        })
    }
}

impl Port for Source {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: "source".into(),
            kind: "bench-source",
            queues: 1,
            max_frame_b: 9216,
        }
    }
    fn take_rx(&self, _: QueueId) -> Option<Box<dyn RxQueue>> {
        if self.taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Box::new(SourceRx {
            frames: self
                .frames
                .iter()
                .map(|f| (f.as_ptr() as *mut u8, f.len() as u32))
                .collect(),
            next: 0,
        }))
    }
    fn tx(&self, _: QueueId) -> &dyn TxQueue {
        &*NOWHERE
    }
}

impl RxQueue for SourceRx {
    fn burst(&mut self, b: &mut RxFill<'_>) -> usize {
        let n = b.room();
        if let [(frame, len)] = *self.frames {
            for _ in 0..n {
                // SAFETY: see the Send impl; the frame lives as long as the
                // port. Every view aliases the one frame: the bench logics
                // only read.
                unsafe { b.push(frame, len) };
            }
            return n;
        }
        for _ in 0..n {
            let (frame, len) = self.frames[self.next];
            self.next = (self.next + 1) % self.frames.len();
            // SAFETY: as above.
            unsafe { b.push(frame, len) };
        }
        n
    }
    fn release(&mut self) {}
}

/// The source's transmit side: carries nothing (every frame is oversize),
/// so its producer never has room either.
struct Nowhere(TxLock<NoRoom>);
static NOWHERE: std::sync::LazyLock<Nowhere> =
    std::sync::LazyLock::new(|| Nowhere(TxLock::new(NoRoom)));
struct NoRoom;
impl TxProducer for NoRoom {
    fn free_slots(&mut self) -> u32 {
        0
    }
    fn reserve(&mut self, _: u32) -> Lease {
        unreachable!("no slot is ever free")
    }
    fn publish_deferred(&mut self, _: u64, _: &mut TxDrops) -> bool {
        false
    }
}
impl TxQueue for Nowhere {
    fn slots_for(&self, _: usize) -> u32 {
        0
    }
    fn tx_lock(&self) -> &TxLock {
        &self.0
    }
    unsafe fn write_burst(&self, _: &Lease, _: &TxFrames<'_>, _: &mut TxDrops) {}
}

/// A receive queue that never has a frame.
struct Empty;
impl RxQueue for Empty {
    fn burst(&mut self, _: &mut RxFill<'_>) -> usize {
        0
    }
    fn release(&mut self) {}
}

/// A destination that copies into a ring of 2 KiB slots nobody drains.
pub struct Sink {
    mem: Box<[std::cell::UnsafeCell<u8>]>,
    slots: u64,
    /// Slots published so far (a copy of the producer's tail, for the
    /// timing loop to poll without taking the lock).
    pub published: Arc<AtomicU64>,
    lock: TxLock<SinkProducer>,
}

/// The sink's producer state (inside its lock).
struct SinkProducer {
    slots: u64,
    reserved: u64,
    published: Arc<AtomicU64>,
}

impl TxProducer for SinkProducer {
    fn free_slots(&mut self) -> u32 {
        self.slots as u32
    }
    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved += n as u64;
        Lease::at(first)
    }
    fn publish_deferred(&mut self, tail: u64, _: &mut TxDrops) -> bool {
        self.published.store(tail, Ordering::Release);
        false
    }
}

// SAFETY: the ring memory is written only in slot ranges the fabric's lease
// protocol hands out, one writer each; its content is never read.
unsafe impl Sync for Sink {}

const SLOT_B: usize = 2048;

impl Sink {
    pub fn new(slots: usize) -> Arc<Self> {
        let mem = (0..slots * SLOT_B)
            .map(|_| std::cell::UnsafeCell::new(0u8))
            .collect();
        let published = Arc::new(AtomicU64::new(0));
        Arc::new(Self {
            mem,
            slots: slots as u64,
            published: published.clone(),
            lock: TxLock::new(SinkProducer {
                slots: slots as u64,
                reserved: 0,
                published,
            }),
        })
    }
}

impl Port for Sink {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: "sink".into(),
            kind: "bench-sink",
            queues: 1,
            max_frame_b: SLOT_B as u32,
        }
    }
    fn take_rx(&self, _: QueueId) -> Option<Box<dyn RxQueue>> {
        // Never receives (a tunnel bench's underlay takes its queue).
        Some(Box::new(Empty))
    }
    fn tx(&self, _: QueueId) -> &dyn TxQueue {
        self
    }
}

impl TxQueue for Sink {
    fn slots_for(&self, len: usize) -> u32 {
        u32::from(len <= SLOT_B)
    }
    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }
    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        for (j, (frame, _)) in frames.iter().enumerate() {
            let off = ((lease.first + j as u64) % self.slots) as usize * SLOT_B;
            // SAFETY: off + len <= mem.len() (len <= SLOT_B, slots_for); the
            // slot is ours by reservation (trait contract).
            unsafe {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), self.mem[off].get(), frame.len())
            };
        }
    }
}

// ---------------------------------------------------------------- rig

pub fn frame(len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]); // dst
    f[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x01]); // src
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

pub struct Rig {
    pub table: PortTable,
    pub rxq: Box<dyn RxQueue>,
    pub fwd: Forwarder,
    pub batch: RxBatch,
    pub verdicts: Vec<Verdict>,
    /// The logic's state for this (single) worker, as a worker keeps it
    /// ([`Rig::state_of`]); None: `classify` without one.
    pub state: Option<fabric::WorkerState>,
}

/// Port 0 is a source of `len`-byte frames, ports 1..=dests are sinks,
/// then `idle` idle sinks.
pub fn rig(len: usize, batch: usize, dests: usize, idle: usize) -> Rig {
    rig_with(&frame(len), batch, dests, idle)
}

/// Like `rig`, with a given source frame.
pub fn rig_with(f: &[u8], batch: usize, dests: usize, idle: usize) -> Rig {
    rig_with_frames(std::slice::from_ref(&f), batch, dests, idle)
}

/// Like `rig`, with source frames handed out in turn.
pub fn rig_with_frames<F: AsRef<[u8]>>(
    frames: &[F],
    batch: usize,
    dests: usize,
    idle: usize,
) -> Rig {
    let max = 1 + dests + idle + 1;
    let src = Source::with_frames(frames);
    let rxq = src.take_rx(0).unwrap();
    let mut table = PortTable::new(max);
    table = table.with(Arc::new(PortEntry::new(0, "src", src)));
    for i in 1..=(dests + idle) {
        let slots = if i <= dests { 1024 } else { 2 };
        table = table.with(Arc::new(PortEntry::new(
            i as PortId,
            format!("p{i}"),
            Sink::new(slots),
        )));
    }
    Rig {
        table,
        rxq,
        fwd: Forwarder::new(0, max, batch),
        batch: RxBatch::with_capacity(batch),
        verdicts: vec![Verdict::Flood; batch],
        state: None,
    }
}

impl Rig {
    /// Makes `logic`'s worker state (`Logic::worker_state`) for the
    /// batches `step` classifies with it, as a worker does when a logic is
    /// installed (outside the measured part).
    pub fn state_of(&mut self, logic: &dyn Logic) {
        self.state = logic.worker_state();
    }

    #[inline]
    pub fn step(&mut self, logic: &dyn Logic) -> u64 {
        let mut rx = self.batch.receive(&mut *self.rxq, 0, 0);
        let n = rx.len();
        let ctx = Ctx {
            now_ns: 0,
            worker: 0,
        };
        let v = &mut self.verdicts[..n];
        match &mut self.state {
            Some(st) => logic.classify_with(&mut **st, &ctx, 0, rx.pkts_mut(), v),
            None => logic.classify(&ctx, 0, rx.pkts_mut(), v),
        }
        let entry = self.table.get(0).unwrap().clone();
        let mut sent = self
            .fwd
            .forward(&self.table, logic, &entry, rx.pkts(), &self.verdicts[..n]);
        // As the worker does: the copies the logic made, after the batch.
        let (cp, cv) = rx.copies();
        if !cp.is_empty() {
            sent += self.fwd.forward_copies(&self.table, logic, &entry, cp, cv);
        }
        sent
    }
}
