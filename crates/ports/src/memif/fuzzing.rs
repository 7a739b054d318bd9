//! Fuzzing facade (not a stable API): the server side of one memif
//! connection over a fake shared region, with no socket and no peer
//! process. A fuzz target writes whatever a lying client could write into
//! the region (ring headers, descriptors, indexes, buffers) and drives the
//! real receive queue ([`RxQueue::burst`] / `release`) and transmit queue
//! (`free_slots` / `reserve` / `write` / `publish`) over it.
//!
//! When the data path finds a violation the connection is rebuilt over the
//! same region (as the control thread would after a reconnect), so one
//! harness serves millions of inputs.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use arc_swap::ArcSwapOption;
use fabric::{RxBatch, RxQueue, TxQueue};

use super::proto::{Violation, COOKIE, RING_COOKIE_OFF};
use super::ring::{reset_ring, ring_span, Connection, MemifRx, MemifTx, Ring};
use super::sys::{EventFd, Region};
use super::{Core, MemifConfig, Role, Shared};

/// Size of the fake region.
pub const REGION_B: usize = 64 * 1024;
/// Offset of the receive (client → server) ring.
pub const RX_RING_OFF: usize = 0;
/// Offset of the transmit (server → client) ring.
pub const TX_RING_OFF: usize = 8 * 1024;
/// Ring size (log2) of both rings.
pub const LOG2_RING: u8 = 5;
/// Where buffers may start (the fuzzer may point anywhere, though).
pub const BUFS_OFF: usize = 16 * 1024;
/// The port's largest frame (small, so chains and oversize are reachable).
pub const MAX_FRAME_B: u32 = 4096;
/// Buffer size (the transmit chaining unit).
pub const BUFFER_B: u32 = 256;

/// One server-side memif interface over a fake region (see the module
/// documentation).
pub struct Harness {
    shared: Arc<Shared>,
    rx: MemifRx,
    tx: MemifTx,
    batch: RxBatch,
    /// Violations counted by the interface, summed over connections.
    violations_seen: u64,
    /// Connections built so far.
    pub connections: u64,
}

impl Harness {
    /// A harness with one queue pair and a fresh zeroed region.
    pub fn new() -> std::io::Result<Harness> {
        let mut cfg = MemifConfig::new("fuzz", 0);
        cfg.max_frame_b = MAX_FRAME_B;
        cfg.buffer_size = BUFFER_B;
        cfg.log2_ring_size = LOG2_RING;
        cfg.max_chain = 16;
        cfg.validate()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let wake = Arc::new(EventFd::new()?);
        let core = Arc::new(
            Core::new(cfg, Role::Server, wake).map_err(|e| std::io::Error::other(e.to_string()))?,
        );
        let shared = Arc::new(Shared {
            core,
            conn: ArcSwapOption::empty(),
            cur_gen: std::sync::atomic::AtomicU64::new(0),
            producers: Default::default(),
            retired: Default::default(),
        });
        let rx = MemifRx::new(shared.clone(), 0);
        let tx = MemifTx::new(shared.clone(), 0);
        let mut h = Harness {
            shared,
            rx,
            tx,
            batch: RxBatch::with_capacity(32),
            violations_seen: 0,
            connections: 0,
        };
        let region = Region::create("turnout-fuzz", REGION_B)?;
        let ring = |off| -> std::io::Result<Ring> {
            Ok(Ring {
                region: 0,
                off,
                size: 1 << LOG2_RING,
                mask: (1u16 << LOG2_RING) - 1,
                irq: EventFd::new()?,
                buf_region: 0,
                buf_base: 0,
            })
        };
        let (rxr, txr) = (ring(RX_RING_OFF)?, ring(TX_RING_OFF)?);
        h.install(vec![region], vec![rxr], vec![txr])?;
        Ok(h)
    }

    fn install(
        &mut self,
        regions: Vec<Region>,
        rx: Vec<Ring>,
        tx: Vec<Ring>,
    ) -> std::io::Result<()> {
        let gen = self.shared.next_gen();
        let c = Connection::new(self.shared.core.clone(), gen, regions, rx, tx)
            .map_err(std::io::Error::other)?;
        self.shared.attach(c);
        self.connections += 1;
        Ok(())
    }

    /// Zeroes the region, writes valid ring headers (cookie, indexes 0) and
    /// rebuilds the connection (a new generation: the queues start their
    /// indexes from 0), so every input starts from the state right after a
    /// connect, whatever the last one did.
    pub fn reset(&mut self) {
        self.rx.release();
        self.violations_seen = self.violations();
        self.shared.core.up.store(false, Ordering::Release);
        let old = self.shared.conn.swap(None);
        self.shared.cur_gen.store(0, Ordering::Release);
        // The receive queue keeps the connection between bursts while
        // frames flow: let it go.
        self.rx.let_go();
        // Let the transmit queue drop its pin on the old connection.
        self.tx.tx_lock().lock().producer.free_slots();
        let mut old = old.expect("a connection is installed");
        let c = Arc::get_mut(&mut old).expect("no queue holds the old connection");
        c.unhook();
        let regions = std::mem::take(&mut c.regions);
        let rx = std::mem::take(&mut c.rx);
        let tx = std::mem::take(&mut c.tx);
        drop(old);
        self.install(regions, rx, tx).expect("reinstall connection");
        let c = self.conn();
        let r = &c.regions[0];
        assert!(r.copy_in(0, &[0u8; REGION_B]));
        for off in [RX_RING_OFF, TX_RING_OFF] {
            r.store_u32(off + RING_COOKIE_OFF, COOKIE);
            reset_ring(r, off, 0);
        }
    }

    fn conn(&self) -> Arc<Connection> {
        self.shared.conn.load_full().expect("connection installed")
    }

    /// Violations counted so far (every reason).
    pub fn violations(&self) -> u64 {
        Violation::ALL
            .iter()
            .map(|v| self.shared.core.counters.violations[v.index()].load(Ordering::Relaxed))
            .sum()
    }

    /// The violation that broke the current connection, by counter name.
    pub fn violated(&self) -> Option<&'static str> {
        self.conn().violated().map(|v| v.name())
    }

    /// Whether the link is up (false once a violation was found).
    pub fn link_up(&self) -> bool {
        self.shared.core.up.load(Ordering::Acquire)
    }

    /// Writes `bytes` at `off` in the region, as a lying client may
    /// (clipped to the region).
    pub fn poke(&self, off: usize, bytes: &[u8]) {
        let c = self.conn();
        let off = off.min(REGION_B);
        let n = bytes.len().min(REGION_B - off);
        assert!(c.regions[0].copy_in(off, &bytes[..n]));
    }

    /// Reads `n` bytes at `off` from the region.
    pub fn peek(&self, off: usize, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        assert!(self.conn().regions[0].copy_out(off, &mut v));
        v
    }

    /// Writes 16 descriptor bytes into slot `slot` of the receive ring
    /// (`rx == true`) or of the transmit ring.
    pub fn put_desc(&self, rx: bool, slot: u16, d: [u8; 16]) {
        let base = if rx { RX_RING_OFF } else { TX_RING_OFF };
        let slot = (slot as usize) & ((1 << LOG2_RING) - 1);
        self.poke(
            base + super::proto::RING_HDR_B + slot * super::proto::DESC_B,
            &d,
        );
    }

    /// Sets the client-owned index (head) of a ring: frames produced on the
    /// receive ring, buffers offered on the transmit ring.
    pub fn set_head(&self, rx: bool, head: u16) {
        let base = if rx { RX_RING_OFF } else { TX_RING_OFF };
        self.poke(base + super::proto::RING_HEAD_OFF, &head.to_le_bytes());
    }

    /// The server-owned index (tail) of a ring.
    pub fn tail(&self, rx: bool) -> u16 {
        let base = if rx { RX_RING_OFF } else { TX_RING_OFF };
        let b = self.peek(base + super::proto::RING_TAIL_OFF, 2);
        u16::from_le_bytes([b[0], b[1]])
    }

    /// One receive burst and release; calls `f` on every frame handed out
    /// (before the release, while the frames are valid).
    pub fn burst(&mut self, mut f: impl FnMut(&[u8])) -> usize {
        let burst = self.batch.receive(&mut self.rx, 0, 0);
        let n = burst.received();
        assert_eq!(n, burst.len(), "burst count and batch length agree");
        for p in burst.pkts().iter() {
            f(p.data());
        }
        n
    }

    /// Transmits `frame` like a worker does; returns whether it was
    /// written (false: no room, too large, or the link broke).
    pub fn transmit(&self, frame: &[u8]) -> bool {
        // SAFETY: single-threaded harness: the only transmitter.
        let mut tx = unsafe { fabric::OwnedTx::new(&self.tx) };
        let n = tx.slots_for(frame.len());
        if n == 0 || tx.free_slots() < n {
            return false;
        }
        let s = tx.reserve(n);
        tx.write(s, n, frame);
        tx.publish(s + n as u64);
        true
    }

    /// Violations counted during the current input.
    pub fn new_violations(&self) -> u64 {
        self.violations() - self.violations_seen
    }

    /// Bytes a ring occupies (header and descriptors).
    pub fn ring_span() -> usize {
        ring_span(LOG2_RING)
    }
}

/// The server's control-message handling (`server.rs`) over one control
/// connection per input, served in the calling thread: a real server
/// socket (its own control thread idles, nobody connects to it) with two
/// interfaces, id 0 (no secret) and id 1 (secret `"fuzz"`).
pub struct Control {
    ports: Vec<super::MemifPort>,
    server: Option<super::MemifServer>,
}

/// Removes the socket's directory when dropped: on every way out of
/// [`Control::new`], failures included.
struct DirGuard(std::path::PathBuf);

impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Control {
    /// Binds the server in a fresh directory under /tmp, then removes the
    /// directory: the listening socket stays open (nobody connects to it;
    /// `serve` hands connections over directly), and a harness that dies
    /// later (libFuzzer aborts on a panic, without unwinding, and exits
    /// without running thread-local destructors) leaves nothing in /tmp.
    pub fn new() -> Result<Control, super::MemifError> {
        let dir = std::env::temp_dir().join(format!("turnout-fuzz-memif-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(super::io_err("create fuzz directory"))?;
        let _guard = DirGuard(dir.clone());
        let server = super::MemifServer::bind(super::ServerConfig::new(dir.join("memif.sock")))?;
        let mut ports = Vec::new();
        for id in 0..2u32 {
            let mut cfg = MemifConfig::new(format!("fuzz{id}"), id);
            cfg.queues = 2;
            cfg.secret = (id == 1).then(|| "fuzz".to_string());
            ports.push(server.add_interface(cfg)?);
        }
        Ok(Control {
            ports,
            server: Some(server),
        })
    }

    /// Serves one control connection (the peer already wrote its messages
    /// into `sock`'s other end) and returns why it ended.
    pub fn serve(&self, sock: std::os::fd::OwnedFd) -> String {
        self.server.as_ref().expect("server").serve_one(sock)
    }

    /// Whether interface `id` has a live connection or a claimed channel.
    pub fn busy(&self, id: usize) -> bool {
        let sh = &self.ports[id].shared;
        sh.conn.load().is_some()
            || sh.core.busy.load(Ordering::Acquire)
            || sh.core.up.load(Ordering::Acquire)
    }

    /// Counter `name` of interface `id`.
    pub fn counter(&self, id: usize, name: &str) -> u64 {
        self.ports[id].counter(name)
    }
}

impl Drop for Control {
    fn drop(&mut self) {
        self.ports.clear();
        self.server.take();
    }
}
