//! The memif data path: a connection's mapped state, and the receive and
//! transmit queues that work on it.
//!
//! Who owns which ring index (both roles, one implementation):
//!
//! | ring | producer       | consumer | producer moves | consumer moves |
//! |------|----------------|----------|----------------|----------------|
//! | C2S  | client         | server   | `head`         | `tail`         |
//! | S2C  | server         | client   | `tail`         | `head` (refill: offers empty buffers) |
//!
//! So a server receives frames in `[tail, head)` of a C2S ring and sends into
//! the buffers the client offered in `[tail, head)` of an S2C ring; a client
//! receives in `[last_tail, tail)` of an S2C ring and sends by moving `head`
//! of a C2S ring. Every index the peer moves is checked against the ring
//! size; indexes we move are kept locally and never read back.

use std::sync::atomic::{fence, AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use fabric::{
    DropReason, Lease, Pkt, RxFill, RxQueue, TxDrops, TxFill, TxFrames, TxLock, TxProducer, TxQueue,
};

use super::proto::{
    self, check_desc, ring_fill, Desc, Violation, COOKIE, DESC_B, DESC_FLAG_NEXT, RING_COOKIE_OFF,
    RING_FLAGS_OFF, RING_FLAG_MASK_INT, RING_HDR_B, RING_HEAD_OFF, RING_TAIL_OFF,
};
use super::sys::{self, Descs, EventFd, Region};
use super::{Core, Role, Shared};

/// One ring of a connection.
pub(crate) struct Ring {
    /// Region holding the ring header and descriptors.
    pub region: usize,
    /// Offset of the ring header in that region.
    pub off: usize,
    /// Number of descriptors (a power of two).
    pub size: u32,
    /// `size - 1`.
    pub mask: u16,
    /// The ring's interrupt line (shared with the peer).
    pub irq: EventFd,
    /// Client only: region and offset of the buffer of slot 0 (slot j's
    /// buffer follows at `j * buffer_size`).
    pub buf_region: u16,
    /// See `buf_region`.
    pub buf_base: usize,
}

impl Ring {
    #[inline]
    fn desc_off(&self, slot: u16) -> usize {
        self.off + RING_HDR_B + (slot & self.mask) as usize * DESC_B
    }
}

/// A client's transmit slot, for frames written in place: its buffer sits
/// at a fixed place, so what the last writer left there is known.
pub(crate) struct PlaceSlot {
    /// What the last in-place writer said the buffer holds
    /// ([`fabric::TxFill`]'s tag; 0: unknown, e.g. after a copy).
    tag: AtomicU64,
    /// The length the slot's descriptor was last written with by
    /// `fill_in_place` (flags 0, the slot's own buffer); `u32::MAX`: the
    /// descriptor is not known to be that (fresh, or written by a copy).
    len: AtomicU32,
}

impl PlaceSlot {
    fn new() -> Self {
        PlaceSlot {
            tag: AtomicU64::new(0),
            len: AtomicU32::new(u32::MAX),
        }
    }

    /// A copy wrote the slot: its buffer and descriptor are unknown.
    #[inline]
    fn forget(&self) {
        self.tag.store(0, Ordering::Relaxed);
        self.len.store(u32::MAX, Ordering::Relaxed);
    }
}

/// A live connection: the mapped regions and the rings. Immutable once
/// built, except for its violation flag; dropped (and unmapped) when the
/// control thread and every queue holding it let go.
pub(crate) struct Connection {
    pub gen: u64,
    pub role: Role,
    pub regions: Vec<Region>,
    pub region_lens: Vec<usize>,
    /// Rings we receive from (server: C2S; client: S2C), by queue.
    pub rx: Vec<Ring>,
    /// Rings we send on (server: S2C; client: C2S), by queue.
    pub tx: Vec<Ring>,
    /// Buffer size: the chaining unit on transmit.
    pub buffer_b: usize,
    /// Per receive ring: where the last holder of its queue stopped on
    /// this connection (the consumer position it released), written when
    /// a [`MemifRx`] is dropped and read when the next one takes the
    /// queue over. Kept here, not read back from the ring (whose indexes
    /// the peer can write), and 0 on a fresh connection.
    rx_resume: Box<[AtomicU16]>,
    /// Client only (empty for a server), per transmit ring and slot: what
    /// the slot's buffer and descriptor hold, for frames written in place
    /// ([`TxQueue::fill_in_place`]). Fresh with each connection, as its
    /// memory is.
    tx_place: Box<[Box<[PlaceSlot]>]>,
    violation: AtomicU8,
    core: Arc<Core>,
}

impl Connection {
    /// Builds a connection and hooks its receive interrupts to the queues'
    /// notify fds.
    pub fn new(
        core: Arc<Core>,
        gen: u64,
        regions: Vec<Region>,
        rx: Vec<Ring>,
        tx: Vec<Ring>,
    ) -> Result<Connection, String> {
        let region_lens = regions.iter().map(|r| r.len()).collect();
        let buffer_b = core.cfg.buffer_size as usize;
        let role = core.role;
        let rx_resume = rx.iter().map(|_| AtomicU16::new(0)).collect();
        let tx_place = match role {
            Role::Client => tx
                .iter()
                .map(|r| (0..r.size).map(|_| PlaceSlot::new()).collect())
                .collect(),
            Role::Server => Box::default(),
        };
        let c = Connection {
            gen,
            role,
            regions,
            region_lens,
            rx_resume,
            tx_place,
            rx,
            tx,
            buffer_b,
            violation: AtomicU8::new(0),
            core,
        };
        for (q, r) in c.rx.iter().enumerate() {
            if let Some(ep) = c.core.rx_epoll.get(q) {
                ep.add_events(r.irq.fd(), sys::WATCH, q as u64)
                    .map_err(|e| format!("epoll add interrupt fd: {e}"))?;
            }
        }
        Ok(c)
    }

    /// Records a shared-memory violation: counted once per connection, the
    /// link goes down at once and the control thread is woken to send the
    /// disconnect.
    #[cold]
    pub fn fail(&self, v: Violation) {
        if self
            .violation
            .compare_exchange(0, v.code(), Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            self.core.counters.violations[v.index()].fetch_add(1, Ordering::Relaxed);
            self.core.up.store(false, Ordering::Release);
            self.core.wake.signal();
        }
    }

    /// The violation that killed this connection, if any.
    #[inline]
    pub fn violated(&self) -> Option<Violation> {
        match self.violation.load(Ordering::Acquire) {
            0 => None,
            c => Violation::from_code(c),
        }
    }

    /// Offset (in the ring header) of the index the producer of our
    /// receive rings moves.
    #[inline]
    fn rx_prod_off(&self) -> usize {
        match self.role {
            Role::Server => RING_HEAD_OFF,
            Role::Client => RING_TAIL_OFF,
        }
    }
}

impl Connection {
    /// An interrupt eventfd the peer made blocking again after handing it
    /// over (it shares the file description and its `O_NONBLOCK`): which
    /// one, if any. (A worker blocked writing to it meanwhile, the peer
    /// having filled its counter too, is freed by `crate::guard`'s
    /// watchdog, its kick dropped and counted in `kicks_dropped`.) Control
    /// path.
    pub fn blocking_irq(&self) -> Option<String> {
        let (rx, tx) = (self.rx.iter(), self.tx.iter());
        let (q, dir) = rx
            .enumerate()
            .map(|(q, r)| (q, "receive", r))
            .chain(tx.enumerate().map(|(q, r)| (q, "transmit", r)))
            .find(|(_, _, r)| !r.irq.is_nonblocking())
            .map(|(q, d, _)| (q, d))?;
        Some(format!(
            "the peer made the interrupt fd of {dir} queue {q} blocking"
        ))
    }

    /// Removes our receive interrupts from the queues' notify fds (on
    /// detach: a dead connection may live on a while, e.g. pinned by a
    /// transmit queue, and a pending kick must not keep waking workers).
    pub fn unhook(&self) {
        for (q, r) in self.rx.iter().enumerate() {
            if let Some(ep) = self.core.rx_epoll.get(q) {
                ep.remove(r.irq.fd());
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        #[cfg(test)]
        DROPS_ON_THIS_THREAD.with(|n| n.set(n.get() + 1));
        self.unhook();
    }
}

#[cfg(test)]
thread_local! {
    /// Connections whose last reference went on this thread (tests: where
    /// the unmap ran).
    pub(crate) static DROPS_ON_THIS_THREAD: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// Writes the initial state of a ring header (client side, and the server's
/// reset at connect).
pub(crate) fn reset_ring(region: &Region, off: usize, flags: u16) {
    region.store_u16(off + RING_HEAD_OFF, 0, Ordering::Relaxed);
    region.store_u16(off + RING_TAIL_OFF, 0, Ordering::Relaxed);
    region.store_u16(off + RING_FLAGS_OFF, flags, Ordering::Release);
}

/// Client: offers every slot's buffer on a receive (S2C) ring.
pub(crate) fn offer_all(region: &Region, ring: &Ring, buffer_b: usize) {
    for j in 0..ring.size {
        let d = Desc {
            flags: 0,
            region: ring.buf_region,
            length: buffer_b as u32,
            offset: (ring.buf_base + j as usize * buffer_b) as u32,
            metadata: 0,
        };
        region.write16(ring.desc_off(j as u16), d.to_bytes());
    }
    region.store_u16(
        ring.off + RING_HEAD_OFF,
        ring.size as u16,
        Ordering::Release,
    );
}

// ---------------------------------------------------------------------------
// Receive
// ---------------------------------------------------------------------------

/// A receive queue, owned by one worker.
pub(crate) struct MemifRx {
    shared: Arc<Shared>,
    q: u16,
    /// The connection the frames of the last burst live in.
    held: Option<Arc<Connection>>,
    /// Generation our indexes refer to.
    gen: u64,
    /// Consumer position released to the peer.
    cons: u16,
    /// Consumer position after the last burst (not yet released).
    pending: u16,
    notify: bool,
    /// Validated pieces of the chain being linearised: (region, offset, len).
    chain: Box<[(usize, usize, usize)]>,
    max_frame: usize,
    max_chain: usize,
    /// The ring's level at the last burst: slots the peer had filled, and
    /// its size ([`RxQueue::fill_level`]).
    level: (u32, u32),
}

impl MemifRx {
    pub fn new(shared: Arc<Shared>, q: u16) -> Self {
        let cfg = &shared.core.cfg;
        let chain = vec![(0, 0, 0); cfg.max_chain as usize].into_boxed_slice();
        let (max_frame, max_chain) = (cfg.max_frame_b as usize, cfg.max_chain as usize);
        MemifRx {
            shared,
            q,
            held: None,
            gen: 0,
            cons: 0,
            pending: 0,
            notify: false,
            chain,
            max_frame,
            max_chain,
            level: (0, 0),
        }
    }

    /// Starts tracking a connection this queue object has not seen: from
    /// where the previous holder of the queue stopped on it (index 0 on a
    /// fresh connection), our notify wish written into the ring.
    fn adopt(&mut self, c: &Connection) {
        self.gen = c.gen;
        // A queue taken again while its connection is up (a port removed
        // from a switch and added again, or to another worker) continues
        // exactly where the ring is: starting from 0 would hand out the
        // frames in [0, cons) again, or fail the peer for a bad index once
        // the ring has wrapped. The previous holder stored its released
        // position before letting go of the queue (`Drop`), and that
        // happens before this take (`Core::rx_taken`'s Release/AcqRel).
        let start = c
            .rx_resume
            .get(self.q as usize)
            .map_or(0, |r| r.load(Ordering::Acquire));
        self.cons = start;
        self.pending = start;
        if let Some(ring) = c.rx.get(self.q as usize) {
            let flags = if self.notify { 0 } else { RING_FLAG_MASK_INT };
            c.regions[ring.region].store_u16(ring.off + RING_FLAGS_OFF, flags, Ordering::SeqCst);
        }
    }

    fn burst_on(&mut self, c: &Connection, batch: &mut RxFill<'_>) -> usize {
        if c.violated().is_some() {
            return 0;
        }
        let Some(ring) = c.rx.get(self.q as usize) else {
            return 0;
        };
        let region = &c.regions[ring.region];
        if region.load_u32(ring.off + RING_COOKIE_OFF) != COOKIE {
            c.fail(Violation::BadCookie);
            return 0;
        }
        let prod = region.load_u16(ring.off + c.rx_prod_off(), Ordering::Acquire);
        let filled = match ring_fill(prod, self.cons, ring.size) {
            Ok(n) => n,
            Err(v) => {
                c.fail(v);
                return 0;
            }
        };
        self.level = (filled, ring.size);
        let mut todo = prod.wrapping_sub(self.pending) as u32;
        if todo > filled {
            // The producer moved its index backwards past frames we hold.
            c.fail(Violation::BadRingIndex);
            return 0;
        }
        if todo == 0 || batch.room() == 0 {
            // An empty poll: nothing to take, nothing to count.
            return 0;
        }
        let Some(descs) = region.descs(ring.off + RING_HDR_B, ring.size) else {
            return 0;
        };
        let mut pos = self.pending;
        let (mut n, mut chained, mut oversize) = (0usize, 0u64, 0u64);
        // The batch's fields in registers for the burst.
        let mut pusher = batch.pusher();
        'frames: while todo > 0 && pusher.room() > 0 {
            // The peer core wrote these descriptors: fetch ahead.
            descs.prefetch(pos.wrapping_add(RX_PREFETCH_AHEAD));
            // Flags, region, length, offset (the unused metadata word is
            // not read): three loads, each field read once.
            let d = Desc::from_words(descs.read(pos));
            let (r, off, len) = match check_desc(&d, &c.region_lens) {
                Ok(x) => x,
                Err(v) => {
                    c.fail(v);
                    break 'frames;
                }
            };
            if !d.has_next() {
                if len > self.max_frame {
                    oversize += 1;
                } else if sys::push_region(&mut pusher, &c.regions[r], off, len) {
                    n += 1;
                }
                pos = pos.wrapping_add(1);
                todo -= 1;
                continue;
            }
            // A chain: collect its validated pieces (one read per descriptor).
            let mut k = 0usize;
            let mut total = 0usize;
            let mut piece = (r, off, len);
            let mut dk = d;
            loop {
                self.chain[k] = piece;
                total += piece.2;
                k += 1;
                if !dk.has_next() {
                    break;
                }
                if k as u32 == todo {
                    // The rest of the frame is not published yet. If nothing
                    // we hold can make room, it never will be.
                    if filled == ring.size && self.pending == self.cons {
                        c.fail(Violation::ChainTooLong);
                    }
                    break 'frames;
                }
                if k == self.max_chain {
                    c.fail(Violation::ChainTooLong);
                    break 'frames;
                }
                dk = Desc::from_words(descs.read(pos.wrapping_add(k as u16)));
                piece = match check_desc(&dk, &c.region_lens) {
                    Ok(x) => x,
                    Err(v) => {
                        c.fail(v);
                        break 'frames;
                    }
                };
            }
            if total > self.max_frame {
                oversize += 1;
            } else {
                let chain = &self.chain[..k];
                let copied = pusher.with_fill(|batch| {
                    // Scratch full: the frame waits for the next burst.
                    let dst = batch.scratch(total)?;
                    let mut at = 0;
                    for &(pr, po, pl) in chain {
                        c.regions[pr].copy_out(po, &mut dst[at..at + pl]);
                        at += pl;
                    }
                    Some(batch.push_scratch(total))
                });
                match copied {
                    None => break 'frames,
                    Some(true) => {
                        n += 1;
                        chained += 1;
                    }
                    Some(false) => {}
                }
            }
            pos = pos.wrapping_add(k as u16);
            todo -= k as u32;
        }
        drop(pusher);
        self.pending = pos;
        let ctr = &self.shared.core.counters;
        if n > 0 {
            // This queue's own counter: we are its one writer (we own the
            // queue), so a load and a store, not a locked add.
            if let Some(f) = ctr.rx_frames.get(self.q as usize) {
                fabric::worker::bump(&f.0, n as u64);
            }
        }
        if chained > 0 {
            ctr.rx_chained.fetch_add(chained, Ordering::Relaxed);
        }
        if oversize > 0 {
            ctr.rx_oversize.fetch_add(oversize, Ordering::Relaxed);
        }
        n
    }

    /// Gives the slots consumed by the last burst back to the producer.
    fn commit(&mut self, c: &Connection) {
        if c.gen != self.gen || self.pending == self.cons {
            return;
        }
        if c.violated().is_some() {
            self.cons = self.pending;
            return;
        }
        let Some(ring) = c.rx.get(self.q as usize) else {
            return;
        };
        let region = &c.regions[ring.region];
        match c.role {
            Role::Server => {
                region.store_u16(ring.off + RING_TAIL_OFF, self.pending, Ordering::Release)
            }
            Role::Client => {
                // Offer the freed buffers again, with the values we chose:
                // whatever the server wrote into these descriptors is
                // overwritten.
                let size = ring.size as u16;
                let mut s = self.cons.wrapping_add(size);
                let end = self.pending.wrapping_add(size);
                while s != end {
                    let d = Desc {
                        flags: 0,
                        region: ring.buf_region,
                        length: c.buffer_b as u32,
                        offset: (ring.buf_base + (s & ring.mask) as usize * c.buffer_b) as u32,
                        metadata: 0,
                    };
                    // The metadata word stays 0 (written at the offer,
                    // never read).
                    region.write_words(ring.desc_off(s), d.to_words());
                    s = s.wrapping_add(1);
                }
                region.store_u16(ring.off + RING_HEAD_OFF, end, Ordering::Release);
            }
        }
        self.cons = self.pending;
    }
}

impl MemifRx {
    /// Lets go of the connection kept between bursts (the fuzzing harness,
    /// before it rebuilds one).
    #[cfg(any(test, feature = "test-utils"))]
    pub(crate) fn let_go(&mut self) {
        self.release();
        self.held = None;
    }

    /// [`RxQueue::peek`] (`adopt`: a connection not adopted yet counts as
    /// something to take up) and [`RxQueue::peek_frames`] (it does not).
    fn look(&self, adopt: bool) -> Option<bool> {
        let cur;
        let c = match &self.held {
            Some(c) => c,
            None => {
                cur = self.shared.conn.load();
                match cur.as_ref() {
                    Some(c) => c,
                    // No peer: nothing waits (a peer that connects is
                    // adopted by the next look, below).
                    None => return Some(false),
                }
            }
        };
        if c.gen != self.gen {
            // A connection not adopted yet: a burst adopts it (fresh
            // rings: frames on them were signalled as it was added).
            return Some(adopt);
        }
        let Some(ring) = c.rx.get(self.q as usize) else {
            return Some(false);
        };
        let region = &c.regions[ring.region];
        Some(region.load_u16(ring.off + c.rx_prod_off(), Ordering::Acquire) != self.pending)
    }
}

impl RxQueue for MemifRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        if !self.shared.core.up.load(Ordering::Acquire) {
            // Down: let go of a departed connection at once.
            self.held = None;
            return 0;
        }
        // While frames flow, the connection of the last burst is kept
        // (released frames included: `release` does not let go of it) as
        // long as it is the current one, which a plain load tells.
        let c = match self.held.take() {
            Some(c) if self.shared.cur_gen.load(Ordering::Acquire) == c.gen => c,
            _ => {
                let Some(c) = self.shared.conn.load_full() else {
                    return 0;
                };
                if c.gen != self.gen {
                    self.adopt(&c);
                }
                c
            }
        };
        let n = self.burst_on(&c, batch);
        if n == 0 {
            // Nothing handed out: release at once (dropped frames included)
            // and let go of the connection, so an idle queue holds none.
            self.commit(&c);
        } else {
            self.held = Some(c);
        }
        n
    }

    fn release(&mut self) {
        // Moved out and back: no reference count changes.
        if let Some(c) = self.held.take() {
            self.commit(&c);
            self.held = Some(c);
        }
    }

    fn notify_fd(&self) -> Option<std::os::fd::RawFd> {
        self.shared
            .core
            .rx_epoll
            .get(self.q as usize)
            .map(|e| e.fd())
    }

    fn set_notify(&mut self, enabled: bool) -> bool {
        self.notify = enabled;
        let c = match &self.held {
            Some(c) => c.clone(),
            None => match self.shared.conn.load_full() {
                Some(c) => c,
                None => return false,
            },
        };
        if c.gen != self.gen {
            // Not adopted yet: the next burst writes the flag; poll first.
            return enabled;
        }
        let Some(ring) = c.rx.get(self.q as usize) else {
            return false;
        };
        let region = &c.regions[ring.region];
        let flags = if enabled { 0 } else { RING_FLAG_MASK_INT };
        region.store_u16(ring.off + RING_FLAGS_OFF, flags, Ordering::SeqCst);
        if !enabled {
            return false;
        }
        // Pairs with the producer's fence between moving its index and
        // reading our flags: either it sees the flag clear and kicks, or we
        // see its frames here.
        fence(Ordering::SeqCst);
        region.load_u16(ring.off + c.rx_prod_off(), Ordering::Acquire) != self.pending
    }

    fn peek(&self) -> Option<bool> {
        self.look(true)
    }

    fn peek_frames(&self) -> Option<bool> {
        self.look(false)
    }

    fn ack_notify(&mut self) {
        let c = match &self.held {
            Some(c) => Some(c.clone()),
            None => self.shared.conn.load_full(),
        };
        if let Some(ring) = c.as_ref().and_then(|c| c.rx.get(self.q as usize)) {
            ring.irq.drain_nowait();
        }
    }

    fn fill_level(&self) -> Option<(u32, u32)> {
        (self.level.1 > 0).then_some(self.level)
    }
}

impl Drop for MemifRx {
    fn drop(&mut self) {
        // Frames of the last burst go back to the peer, then where we
        // stopped is left on the connection for the queue's next holder.
        self.release();
        if let Some(c) = self.shared.conn.load().as_ref() {
            if c.gen == self.gen {
                if let Some(r) = c.rx_resume.get(self.q as usize) {
                    r.store(self.cons, Ordering::Release);
                }
            }
        }
        if let Some(t) = self.shared.core.rx_taken.get(self.q as usize) {
            t.store(false, Ordering::Release);
        }
    }
}

// ---------------------------------------------------------------------------
// Transmit
// ---------------------------------------------------------------------------

/// How many descriptors ahead a receive burst prefetches.
const RX_PREFETCH_AHEAD: u16 = 8;

/// How many ring slots ahead a client's transmit prefetches its buffers.
const TX_PREFETCH_AHEAD: u16 = 8;

/// The producer state of a transmit queue: it lives in the queue's
/// `TxLock`, so only the worker holding the lock touches it (and the
/// control thread, briefly, in [`release_pins`]).
pub(crate) struct MemifProducer {
    shared: Arc<Shared>,
    q: u16,
    /// The generation of `conn` (0: none), to tell with a plain load
    /// whether it is still the current connection.
    conn_gen: u64,
    /// Fabric slots reserved so far.
    reserved: u64,
    /// Fabric slots published so far.
    published: u64,
    /// The connection reservations write into, and the fabric slot index
    /// that maps to ring position 0 of it. Changed only when no
    /// reservation is in flight, so each lease borrows it
    /// ([`Lease::held`]).
    conn: Option<Arc<Connection>>,
    base: u64,
}

/// A transmit queue, shared by all workers (see `fabric::port`).
pub(crate) struct MemifTx {
    q: u16,
    buf_b: usize,
    max_frame: usize,
    shared: Arc<Shared>,
    /// Shared with `Shared::producers` (weakly), through which a
    /// disconnect makes the producer let go of the old connection.
    lock: Arc<TxLock<MemifProducer>>,
}

impl MemifTx {
    pub fn new(shared: Arc<Shared>, q: u16) -> Self {
        let buf_b = shared.core.cfg.buffer_size as usize;
        let max_frame = shared.core.cfg.max_frame_b as usize;
        let lock = Arc::new(TxLock::new(MemifProducer {
            shared: shared.clone(),
            q,
            conn_gen: 0,
            reserved: 0,
            published: 0,
            conn: None,
            base: 0,
        }));
        shared
            .producers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Arc::downgrade(&lock));
        MemifTx {
            q,
            buf_b,
            max_frame,
            lock,
            shared,
        }
    }

    /// Our producer index field and the peer's field that bounds it.
    #[inline]
    fn fields(role: Role) -> (usize, usize) {
        match role {
            Role::Server => (RING_TAIL_OFF, RING_HEAD_OFF),
            Role::Client => (RING_HEAD_OFF, RING_TAIL_OFF),
        }
    }
}

/// How long a disconnect waits for a reservation in flight to be published
/// before leaving the pin to the producer (which follows at its next look).
const UNPIN_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// Control path, after the connection was taken out of `Shared::conn`:
/// makes every transmit producer let go of the connection it pinned, so
/// that the departed peer's regions are unmapped now (when the last
/// reference, normally the caller's, drops) rather than when the next peer
/// connects and frames flow. A producer with a reservation in flight keeps
/// it until that is published (the lease borrows it meanwhile); the
/// wait is bounded. The pin is dropped after the lock is released, so an
/// unmap never runs under it.
pub(crate) fn release_pins(producers: &[std::sync::Weak<TxLock<MemifProducer>>]) {
    for w in producers {
        let Some(l) = w.upgrade() else { continue };
        let t0 = std::time::Instant::now();
        loop {
            let taken = {
                let mut g = l.lock();
                let p = &mut g.producer;
                if p.reserved == p.published {
                    p.conn_gen = 0;
                    Some(p.conn.take())
                } else {
                    None
                }
            };
            match taken {
                Some(c) => {
                    drop(c);
                    break;
                }
                None if t0.elapsed() < UNPIN_WAIT => std::thread::yield_now(),
                None => break,
            }
        }
    }
}

impl TxProducer for MemifProducer {
    fn free_slots(&mut self) -> u32 {
        if self.reserved == self.published
            && self.shared.cur_gen.load(Ordering::Acquire) != self.conn_gen
        {
            // No reservation in flight: follow a reconnect.
            let cur = self.shared.conn.load_full();
            // Replacing the pin drops our reference to a departed
            // connection here, under the lock: never the last one, the
            // control thread keeps one until it is (`crate::retire`), so no
            // unmap or close runs here.
            self.conn_gen = cur.as_ref().map_or(0, |c| c.gen);
            self.conn = cur;
            self.base = self.reserved;
        }
        let Some(c) = &self.conn else { return 0 };
        if c.violated().is_some() {
            return 0;
        }
        let Some(ring) = c.tx.get(self.q as usize) else {
            return 0;
        };
        let region = &c.regions[ring.region];
        if region.load_u32(ring.off + RING_COOKIE_OFF) != COOKIE {
            c.fail(Violation::BadCookie);
            return 0;
        }
        let in_flight = (self.reserved - self.published) as u32;
        let pub_pos = self.published.wrapping_sub(self.base) as u16;
        let (_, peer_off) = MemifTx::fields(c.role);
        let peer = region.load_u16(ring.off + peer_off, Ordering::Acquire);
        let room = match c.role {
            // head - tail: buffers the client offered us.
            Role::Server => ring_fill(peer, pub_pos, ring.size),
            // size - (head - tail): slots the server has not consumed.
            Role::Client => ring_fill(pub_pos, peer, ring.size).map(|used| ring.size - used),
        };
        match room {
            Ok(r) => r.saturating_sub(in_flight),
            Err(v) => {
                c.fail(v);
                0
            }
        }
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved += n as u64;
        // SAFETY: `conn` changes only while no reservation is in flight
        // (`free_slots` follows a reconnect, `release_pins` takes it, both
        // only when `reserved == published`), so this one, and the
        // connection, stay until the lease's range is published. The
        // producer lives in the queue, which the fabric's port table keeps
        // while it writes.
        unsafe { Lease::held(first, self.base, self.conn.as_deref()) }
    }

    fn publish_deferred(&mut self, tail: u64, _drops: &mut TxDrops) -> bool {
        if tail <= self.published {
            return false;
        }
        self.published = tail;
        let Some(c) = &self.conn else { return false };
        if c.violated().is_some() {
            return false;
        }
        let Some(ring) = c.tx.get(self.q as usize) else {
            return false;
        };
        let region = &c.regions[ring.region];
        let (own_off, _) = MemifTx::fields(c.role);
        region.store_u16(
            ring.off + own_off,
            tail.wrapping_sub(self.base) as u16,
            Ordering::Release,
        );
        // Pairs with the receiver's fence between clearing MASK_INT and
        // re-reading our index (no lost wake-up).
        fence(Ordering::SeqCst);
        region.load_u16(ring.off + RING_FLAGS_OFF, Ordering::Relaxed) & RING_FLAG_MASK_INT == 0
    }
}

impl TxQueue for MemifTx {
    fn slots_for(&self, len: usize) -> u32 {
        if len > self.max_frame {
            0
        } else if len <= self.buf_b {
            1
        } else {
            len.div_ceil(self.buf_b) as u32
        }
    }

    fn tx_lock(&self) -> &TxLock {
        &*self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops) {
        // SAFETY: our caller's contract.
        unsafe { self.write_frames(lease, frames, drops) };
        // The streamed copies (`Region::copy_in`) before the ring head
        // that publishes them.
        fabric::sys::store_fence();
    }

    fn kick(&self, _drops: &mut TxDrops) {
        // Without the lock: the pin may change under us, so signal the
        // current connection's ring (after a reconnect, a spurious wake-up
        // of the new one, which the receiver's re-check absorbs).
        let cur = self.shared.conn.load();
        if let Some(ring) = cur.as_ref().and_then(|c| c.tx.get(self.q as usize)) {
            let c = &self.shared.core.counters;
            if ring.irq.signal() {
                c.tx_kicks.fetch_add(1, Ordering::Relaxed);
            } else {
                // Never waited for: the peer's counter is full (it has a
                // wake-up pending anyway), or the write was interrupted
                // (the peer made the eventfd blocking: the control thread
                // is told at once).
                c.kicks_dropped.fetch_add(1, Ordering::Relaxed);
                if std::io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                    self.shared.core.wake.signal();
                }
            }
        }
    }

    /// A client's transmit buffers sit at fixed places (slot `j`'s at
    /// `j × buffer_size`): it can write frames straight into them. A
    /// server writes into the buffers the client offers, wherever they
    /// are: it copies.
    fn fills_in_place(&self) -> bool {
        self.shared.core.role == Role::Client
    }

    unsafe fn fill_in_place(
        &self,
        lease: &Lease,
        n: u32,
        fill: &mut dyn TxFill,
        drops: &mut TxDrops,
    ) {
        // SAFETY: as in `write_frames`: a held connection, an unpublished
        // range (our caller's contract).
        let Some(c) = (unsafe { lease.held_ref::<Connection>() }) else {
            return skip_all(n, fill, DropReason::TxStale, drops);
        };
        if c.violated().is_some() {
            return skip_all(n, fill, DropReason::PeerFault, drops);
        }
        let (Some(ring), Some(place)) =
            (c.tx.get(self.q as usize), c.tx_place.get(self.q as usize))
        else {
            // (a server's queue: `fills_in_place` said no)
            return skip_all(n, fill, DropReason::TxError, drops);
        };
        let region = &c.regions[ring.region];
        let bufs = &c.regions[ring.buf_region as usize];
        // A frame of one slot: up to a buffer (and the port's largest).
        let cap = c.buffer_b.min(self.max_frame);
        let mut pos = lease.first.wrapping_sub(lease.base) as u16;
        for _ in 0..n {
            // Ask for the first line of a slot a few frames ahead (the one
            // the frame's changing bytes are in) and its descriptor.
            let ahead = pos.wrapping_add(TX_PREFETCH_AHEAD);
            bufs.prefetch_write(ring.buf_base + (ahead & ring.mask) as usize * c.buffer_b);
            region.prefetch_write(ring.desc_off(ahead));
            let i = pos & ring.mask;
            let off = ring.buf_base + i as usize * c.buffer_b;
            let slot = &place[i as usize];
            // SAFETY: slot `i` is reserved by our caller and unpublished:
            // the server does not read its buffer until we publish, and no
            // other writer of ours holds it.
            let (len, ok) = match unsafe { bufs.slice_mut(off, cap) } {
                Some(buf) => {
                    let mut tag = slot.tag.load(Ordering::Relaxed);
                    let len = fill.fill(buf, &mut tag);
                    slot.tag.store(tag, Ordering::Relaxed);
                    (len, len <= cap)
                }
                // (not reached: the ring's buffers were checked to fit
                // their region when it was built)
                None => (fill.skip(), false),
            };
            // A frame that could not be written is published all the
            // same, empty (the server drops it), never as the buffer's
            // last frame.
            let dlen = if ok { len as u32 } else { 0 };
            // Only a changed descriptor is written: the server reads the
            // line for every frame, and traffic of one size leaves it alone
            // after the first lap. (A server that wrote our descriptors
            // would mislead only itself.)
            if slot.len.load(Ordering::Relaxed) != dlen {
                slot.len.store(dlen, Ordering::Relaxed);
                let d = Desc {
                    flags: 0,
                    region: ring.buf_region,
                    length: dlen,
                    offset: off as u32,
                    metadata: 0,
                };
                region.write_words(ring.desc_off(pos), d.to_words());
            }
            if !ok {
                drops.add(DropReason::TxError, len);
            }
            pos = pos.wrapping_add(1);
        }
    }
}

/// Passes `n` frames of `fill` as not delivered for `reason`.
#[cold]
fn skip_all(n: u32, fill: &mut dyn TxFill, reason: DropReason, drops: &mut TxDrops) {
    for _ in 0..n {
        drops.add(reason, fill.skip());
    }
}

/// Counts frames `j..` of `frames` as refused for `reason`.
#[cold]
fn refuse(frames: &TxFrames<'_>, j: usize, reason: DropReason, drops: &mut TxDrops) {
    for k in j..frames.len() {
        drops.add(reason, frames.get(k).0.len());
    }
}

impl MemifTx {
    /// [`TxQueue::write_burst`] but for its closing fence.
    ///
    /// # Safety
    /// As [`TxQueue::write_burst`].
    #[inline(always)]
    unsafe fn write_frames(&self, lease: &Lease, frames: &TxFrames<'_>, drops: &mut TxDrops) {
        // SAFETY: `reserve` made the lease with a held `Connection`, and
        // its range is not published yet (our caller's contract).
        let Some(c) = (unsafe { lease.held_ref::<Connection>() }) else {
            return refuse(frames, 0, DropReason::TxStale, drops);
        };
        if c.violated().is_some() {
            return refuse(frames, 0, DropReason::PeerFault, drops);
        }
        let Some(ring) = c.tx.get(self.q as usize) else {
            return refuse(frames, 0, DropReason::TxStale, drops);
        };
        if c.role == Role::Server {
            return self.write_offered(c, ring, lease, frames, drops);
        }
        let mut slot = lease.first;
        for j in 0..frames.len() {
            let (frame, nslots) = frames.get(j);
            if self
                .write_one(c, ring, lease.base, slot, nslots, frame)
                .is_err()
            {
                // The peer broke the protocol: the connection is failed and
                // nothing more of this burst can be delivered.
                return refuse(frames, j, DropReason::PeerFault, drops);
            }
            slot += nslots as u64;
        }
    }

    /// Server: writes the lease's frames into the buffers the client
    /// offered. A frame of one slot (it fits one buffer: the usual case)
    /// takes three loads of the offered descriptor, its checks, one copy
    /// and two stores (flags and region, length: the buffer stays where the
    /// client put it); a chained one goes through `write_one`.
    #[inline]
    fn write_offered(
        &self,
        c: &Connection,
        ring: &Ring,
        lease: &Lease,
        frames: &TxFrames<'_>,
        drops: &mut TxDrops,
    ) {
        let region = &c.regions[ring.region];
        let Some(descs) = region.descs(ring.off + RING_HDR_B, ring.size) else {
            return refuse(frames, 0, DropReason::PeerFault, drops);
        };
        if let Some(pkts) = frames.as_run() {
            // One slot each, in slot order: no slot count or index per frame.
            let mut pos = lease.first.wrapping_sub(lease.base) as u16;
            for (j, p) in pkts.iter().enumerate() {
                Pkt::prefetch_ahead_of_copy(pkts, j);
                if !self.offer_one(c, &descs, pos, p.data()) {
                    return refuse(frames, j, DropReason::PeerFault, drops);
                }
                pos = pos.wrapping_add(1);
            }
            return;
        }
        let mut slot = lease.first;
        for j in 0..frames.len() {
            let pos = slot.wrapping_sub(lease.base) as u16;
            let (frame, nslots) = frames.get(j);
            let ok = if nslots == 1 {
                self.offer_one(c, &descs, pos, frame)
            } else {
                self.write_one(c, ring, lease.base, slot, nslots, frame)
                    .is_ok()
            };
            if !ok {
                // The peer broke the protocol: the connection is failed and
                // nothing more of this burst can be delivered.
                return refuse(frames, j, DropReason::PeerFault, drops);
            }
            slot += nslots as u64;
        }
    }

    /// Server: writes a frame that fits one buffer (`slots_for` gave one
    /// slot) into the buffer the client offered at ring position `pos`.
    /// False when the peer broke the protocol (the connection is failed).
    #[inline(always)]
    fn offer_one(&self, c: &Connection, descs: &Descs<'_>, pos: u16, frame: &[u8]) -> bool {
        let d = Desc::from_words(descs.read(pos));
        // The offered buffer: its flags are left over from a previous use
        // and do not matter.
        match check_desc(&Desc { flags: 0, ..d }, &c.region_lens) {
            // One slot: the frame fits `buf_b`.
            Ok((r, off, cap)) if cap >= self.buf_b => {
                c.regions[r].copy_in(off, frame);
                descs.write::<2>(pos, [(r as u32) << 16, frame.len() as u32]);
                true
            }
            Ok(_) => {
                c.fail(Violation::SmallBuffer);
                false
            }
            Err(v) => {
                c.fail(v);
                false
            }
        }
    }

    /// Writes one frame into `nslots` descriptors from fabric slot `slot`.
    /// Err when the peer broke the protocol (the connection is failed).
    #[inline]
    fn write_one(
        &self,
        c: &Connection,
        ring: &Ring,
        base: u64,
        slot: u64,
        nslots: u32,
        frame: &[u8],
    ) -> Result<(), ()> {
        let region = &c.regions[ring.region];
        let mut pos = slot.wrapping_sub(base) as u16;
        let mut rest = frame;
        for i in 0..nslots.max(1) {
            let last = i + 1 >= nslots;
            let doff = ring.desc_off(pos);
            let (breg, boff, cap) = match c.role {
                Role::Server => {
                    // The client offered this buffer: check it (flags left
                    // over from a previous use are irrelevant here).
                    let d = Desc::from_words(region.read_words(doff));
                    let offered = Desc { flags: 0, ..d };
                    match check_desc(&offered, &c.region_lens) {
                        Ok((r, off, cap)) if cap >= self.buf_b => (r, off, cap),
                        Ok(_) => {
                            c.fail(Violation::SmallBuffer);
                            return Err(());
                        }
                        Err(v) => {
                            c.fail(v);
                            return Err(());
                        }
                    }
                }
                Role::Client => {
                    // A copy: what the slot holds is no template's.
                    if let Some(p) = c.tx_place.get(self.q as usize) {
                        p[(pos & ring.mask) as usize].forget();
                    }
                    // Our own buffers sit at fixed places: ask for the lines
                    // of a slot a few frames ahead now, while the peer core
                    // may still hold them from reading them last lap.
                    let ahead = pos.wrapping_add(TX_PREFETCH_AHEAD);
                    c.regions[ring.buf_region as usize]
                        .prefetch_write(ring.buf_base + (ahead & ring.mask) as usize * c.buffer_b);
                    region.prefetch_write(ring.desc_off(ahead));
                    (
                        ring.buf_region as usize,
                        ring.buf_base + (pos & ring.mask) as usize * c.buffer_b,
                        c.buffer_b,
                    )
                }
            };
            let take = if last {
                rest.len().min(cap)
            } else {
                rest.len().min(self.buf_b)
            };
            c.regions[breg].copy_in(boff, &rest[..take]);
            let d = Desc {
                flags: if last { 0 } else { DESC_FLAG_NEXT },
                region: breg as u16,
                length: take as u32,
                offset: boff as u32,
                metadata: 0,
            };
            match c.role {
                // Flags, region and length: the buffer's place is the one
                // the client offered (DPDK's server writes the same).
                Role::Server => region.write_words::<2>(doff, [d.to_words()[0], d.to_words()[1]]),
                // Our own ring: the whole descriptor but the metadata word,
                // which stays 0.
                Role::Client => region.write_words(doff, d.to_words()),
            }
            rest = &rest[take..];
            pos = pos.wrapping_add(1);
        }
        Ok(())
    }
}

/// Bytes of a ring (re-exported for the control paths).
pub(crate) fn ring_span(log2: u8) -> usize {
    proto::ring_span_b(log2)
}
