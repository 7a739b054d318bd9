//! memif: the shared-memory packet interface of VPP and DPDK (protocol 2.0).
//!
//! One implementation of the protocol serves both roles:
//! - **server** ([`MemifServer`]): listens on a SOCK_SEQPACKET unix socket
//!   (mode 0600 by default) and serves many interfaces on it, told apart by
//!   interface id. turnoutd uses this role.
//! - **client** ([`MemifPort::client`]): connects to a server (ours, DPDK's
//!   `net_memif` with `role=server`, VPP), allocates the shared memory
//!   (one sealed memfd holding rings and buffers) and the rings. turnout-gen
//!   uses this role.
//!
//! Both are a [`fabric::Port`]. A control thread per server socket (or per
//! client port) runs the socket protocol; the data path (receive bursts,
//! transmit reserve/write/publish) never takes a lock, never allocates and
//! makes at most one system call per publish (the eventfd kick, only when the
//! peer asked for interrupts).
//!
//! Connection state (the mapped regions and rings) lives in an immutable
//! `Connection` swapped atomically in an `ArcSwapOption`; a receive burst
//! holds its `Arc` until `release`, so a disconnect never unmaps memory a
//! worker is reading: the mapping goes away with the last reference.
//!
//! Everything the peer writes into shared memory is untrusted and validated
//! (see `docs/memif.md`); a violation disconnects that peer with a reason and
//! is counted in [`fabric::Port::backend_counters`]. Every `unsafe` block
//! and system call of the port is in `sys.rs` (the unit tests and the
//! test-only `fuzzing` facade have their own).

mod client;
#[cfg(any(test, feature = "test-utils"))]
#[doc(hidden)]
#[allow(unsafe_code)]
pub mod fuzzing;
#[cfg(any(test, feature = "test-utils"))]
#[doc(hidden)]
pub mod hostile;
pub mod proto;
#[allow(unsafe_code)]
mod ring;
mod server;
#[allow(unsafe_code)]
mod sys;

#[cfg(test)]
#[allow(unsafe_code)]
mod tests;

use std::fmt;
use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwapOption;
use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};
use serde::{Deserialize, Serialize};

use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::open::{MemifServers, Opener};
use crate::retire::Retired;

pub use client::ClientConfig;
pub use server::{MemifServer, ServerConfig};

use proto::Violation;
use ring::{Connection, MemifRx, MemifTx};

/// Default buffer size (bytes), as DPDK's `bsize`.
pub const DEFAULT_BUFFER_SIZE: u32 = 2048;
/// Default ring size (log2), as DPDK's `rsize`.
pub const DEFAULT_LOG2_RING_SIZE: u8 = 10;
/// Default largest frame (bytes): 9000-byte jumbo payloads plus headers.
pub const DEFAULT_MAX_FRAME_B: u32 = 9216;
/// Default bound on descriptors per frame.
pub const DEFAULT_MAX_CHAIN: u16 = 64;
/// Hard bound on descriptors per frame.
pub const MAX_CHAIN: u16 = 256;
/// Largest number of queue pairs per interface: ring indices 0..=255 (the
/// server's hello offers 255 as the highest ring index each way).
pub const MAX_QUEUES: u16 = 256;
/// Smallest buffer size (bytes).
pub const MIN_BUFFER_SIZE: u32 = 64;
/// Largest buffer size (bytes): DPDK's and VPP's buffer size is 16 bits.
pub const MAX_BUFFER_SIZE: u32 = 65535;
/// Smallest `max_frame_b`: a minimum Ethernet frame without FCS.
pub const MIN_FRAME_B: u32 = 60;
/// Largest `max_frame_b` (1 MiB, the batch's scratch holds it).
pub const MAX_FRAME_B: u32 = 1 << 20;

/// Which side of the protocol this port plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Receives the peer's regions (master).
    Server,
    /// Allocates the regions (slave).
    Client,
}

/// Configuration of one memif interface (either role).
#[derive(Clone, Debug)]
pub struct MemifConfig {
    /// Port name (also sent to the peer as our interface name).
    pub name: String,
    /// Interface id on the socket.
    pub id: u32,
    /// Interface secret (at most 23 bytes); the peer must present it.
    pub secret: Option<String>,
    /// Queue pairs: receive queue i pairs with transmit queue i.
    pub queues: u16,
    /// Ring size (log2, 1..=14). The client allocates rings of this size;
    /// a server accepts any size in 1..=14 (the client chooses).
    pub log2_ring_size: u8,
    /// Buffer size in bytes. The client allocates buffers of this size; the
    /// server chains transmitted frames in pieces of this size and requires
    /// the buffers the client offers to be at least this large.
    pub buffer_size: u32,
    /// Largest frame sent or received; larger received frames are dropped
    /// and counted (`rx_oversize`).
    pub max_frame_b: u32,
    /// Most descriptors one received frame may chain; more is a violation.
    pub max_chain: u16,
    /// Server: refuse regions whose memfd is not sealed against shrinking
    /// (a peer could otherwise truncate it and make our reads fault).
    pub require_seal: bool,
}

impl MemifConfig {
    /// A configuration with defaults for everything but name and id.
    pub fn new(name: impl Into<String>, id: u32) -> Self {
        MemifConfig {
            name: name.into(),
            id,
            secret: None,
            queues: 1,
            log2_ring_size: DEFAULT_LOG2_RING_SIZE,
            buffer_size: DEFAULT_BUFFER_SIZE,
            max_frame_b: DEFAULT_MAX_FRAME_B,
            max_chain: DEFAULT_MAX_CHAIN,
            require_seal: true,
        }
    }

    /// Checks every field; the error names the field and why.
    pub fn validate(&self) -> Result<(), MemifError> {
        self.check().map_err(|e| MemifError::Config(e.to_string()))
    }

    /// [`MemifConfig::validate`] with the field apart from the reason.
    pub fn check(&self) -> Result<(), ConfigError> {
        let bad = |f: &str, m: String| Err(ConfigError::new(f, m));
        if self.name.is_empty() {
            return bad("name", "must not be empty".into());
        }
        if let Some(s) = &self.secret {
            if proto::secret_field(s).is_none() {
                return bad(
                    "secret",
                    format!(
                        "{} bytes long, at most {} (no NUL)",
                        s.len(),
                        proto::SECRET_SZ - 1
                    ),
                );
            }
        }
        config::check_queues(self.queues, MAX_QUEUES)?;
        config::check_range(
            "log2_ring_size",
            self.log2_ring_size,
            proto::MIN_LOG2_RING,
            proto::MAX_LOG2_RING,
        )?;
        config::check_range(
            "buffer_size",
            self.buffer_size,
            MIN_BUFFER_SIZE,
            MAX_BUFFER_SIZE,
        )?;
        // A chained frame is linearised into the batch's scratch: the
        // largest frame must fit it.
        const _: () = assert!(MAX_FRAME_B as usize <= fabric::batch::SCRATCH_B);
        config::check_range("max_frame_b", self.max_frame_b, MIN_FRAME_B, MAX_FRAME_B)?;
        let need = self.max_frame_b.div_ceil(self.buffer_size);
        let ring = 1u32 << self.log2_ring_size;
        if need > ring || need > MAX_CHAIN as u32 {
            return bad(
                "max_frame_b",
                format!(
                    "{} needs {need} buffers of {} B, more than the ring's {ring} or {MAX_CHAIN}",
                    self.max_frame_b, self.buffer_size
                ),
            );
        }
        if self.max_chain == 0 || self.max_chain > MAX_CHAIN || (self.max_chain as u32) < need {
            return bad(
                "max_chain",
                format!("{} not in {need}..={MAX_CHAIN}", self.max_chain),
            );
        }
        Ok(())
    }
}

/// A memif interface as turnoutd's `[[ports]]` table, its `port.add` call
/// and turnout-gen's `memif:SOCKET,...` spec give it (docs/turnoutd.md);
/// [`MemifSpec::interface`] makes the backend's [`MemifConfig`] of it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemifSpec {
    /// Unix socket: the server's (turnoutd serves it; several interfaces
    /// share one).
    pub socket: PathBuf,
    /// Interface id on that socket.
    #[serde(default)]
    pub id: u32,
    /// Shared secret, at most 23 bytes; none if absent or empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Queue pairs, 1..=[`MAX_QUEUES`].
    #[serde(default = "one")]
    pub queues: u16,
    /// Descriptors per ring, a power of two in 2..=16384 (a server takes
    /// the client's size up to this).
    #[serde(default = "default_ring")]
    pub ring_size: u32,
    /// Bytes per buffer, [`MIN_BUFFER_SIZE`]..=[`MAX_BUFFER_SIZE`].
    #[serde(default = "default_buffer")]
    pub buffer_size: u32,
    /// Largest frame, bytes (default [`DEFAULT_MAX_FRAME_B`], or what the
    /// ring holds if less); larger frames are chained over buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_b: Option<u32>,
}

fn one() -> u16 {
    1
}
fn default_ring() -> u32 {
    1 << DEFAULT_LOG2_RING_SIZE
}
fn default_buffer() -> u32 {
    DEFAULT_BUFFER_SIZE
}

impl MemifSpec {
    /// Defaults for everything but the socket.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            id: 0,
            secret: None,
            queues: 1,
            ring_size: default_ring(),
            buffer_size: DEFAULT_BUFFER_SIZE,
            max_frame_b: None,
        }
    }

    /// Checks every value against the backend's limits.
    pub fn validate(&self) -> Result<(), ConfigError> {
        config::check_socket(&self.socket)?;
        config::check_pow2(
            "ring_size",
            self.ring_size,
            1 << proto::MIN_LOG2_RING,
            1 << proto::MAX_LOG2_RING,
        )?;
        self.interface("memif").check()
    }

    /// The backend's configuration of this interface, named `name`: the
    /// largest frame defaults to [`DEFAULT_MAX_FRAME_B`] or the ring's
    /// bytes if less, and the chain bound covers it.
    pub fn interface(&self, name: &str) -> MemifConfig {
        let mut c = MemifConfig::new(name, self.id);
        c.secret = self.secret.clone().filter(|s| !s.is_empty());
        c.queues = self.queues;
        c.log2_ring_size = self.ring_size.trailing_zeros() as u8;
        c.buffer_size = self.buffer_size;
        let ring_b = self.ring_size.saturating_mul(self.buffer_size);
        c.max_frame_b = self
            .max_frame_b
            .unwrap_or(DEFAULT_MAX_FRAME_B.min(ring_b).max(MIN_FRAME_B));
        let need = c.max_frame_b.div_ceil(c.buffer_size.max(1));
        c.max_chain = need.clamp(DEFAULT_MAX_CHAIN as u32, MAX_CHAIN as u32) as u16;
        c
    }
}

impl KindConfig for MemifSpec {
    fn queues(&self) -> u16 {
        self.queues
    }

    fn validate(&self) -> Result<(), ConfigError> {
        MemifSpec::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        (
            "id",
            format!("memif id {} on socket {}", self.id, self.socket.display()),
        )
    }

    /// An interface on the server of its socket, which the opener binds
    /// with the first interface on it.
    fn open(&self, _: PortKind, name: &str, opener: &Opener) -> Result<Arc<dyn Port>, String> {
        let mut servers = opener.memif_servers();
        if !servers.contains_key(&self.socket) {
            crate::open::create_parent(&self.socket)?;
            let srv =
                MemifServer::bind(ServerConfig::new(&self.socket)).map_err(|e| e.to_string())?;
            servers.insert(self.socket.clone(), (srv, 0));
        }
        match servers[&self.socket].0.add_interface(self.interface(name)) {
            Ok(p) => {
                if let Some(e) = servers.get_mut(&self.socket) {
                    e.1 += 1;
                }
                Ok(Arc::new(p))
            }
            Err(e) => {
                // Do not leave a socket behind for a port that failed.
                release(&mut servers, &self.socket, 0);
                Err(e.to_string())
            }
        }
    }

    /// Closes the socket's server with its last interface.
    fn closed(&self, opener: &Opener) -> Option<PathBuf> {
        release(&mut opener.memif_servers(), &self.socket, 1)
    }
}

/// Drops `n` users of the server on `socket`; closes it at zero and
/// returns its path.
fn release(servers: &mut MemifServers, socket: &std::path::Path, n: usize) -> Option<PathBuf> {
    let e = servers.get_mut(socket)?;
    e.1 = e.1.saturating_sub(n);
    if e.1 > 0 {
        return None;
    }
    servers.remove(socket);
    Some(socket.to_path_buf())
}

/// Errors of the memif control path.
#[derive(Debug)]
pub enum MemifError {
    /// A configuration value is invalid (the message names it).
    Config(String),
    /// A system call failed.
    Io(String, io::Error),
    /// Another interface on this server already has this id.
    IdInUse(u32),
}

impl fmt::Display for MemifError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemifError::Config(m) => write!(f, "invalid memif configuration: {m}"),
            MemifError::Io(what, e) => write!(f, "{what}: {e}"),
            MemifError::IdInUse(id) => {
                write!(f, "memif interface id {id} already exists on this socket")
            }
        }
    }
}

impl std::error::Error for MemifError {}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> MemifError {
    let w = what.into();
    move |e| MemifError::Io(w, e)
}

/// A receive queue's frame count, written by the one worker that owns the
/// queue ([`fabric::worker::bump`]: a load and a store, no locked add), on
/// a cache line of its own so queues owned by different workers do not
/// share one.
#[derive(Default)]
#[repr(align(64))]
pub(crate) struct QueueFrames(pub(crate) AtomicU64);

/// Port counters (control path reads them; the data path adds once per
/// burst or publish, never per packet).
#[derive(Default)]
pub(crate) struct Counters {
    connects: AtomicU64,
    disconnects: AtomicU64,
    peer_hangups: AtomicU64,
    ctrl_errors: AtomicU64,
    violations: [AtomicU64; Violation::COUNT],
    /// Frames received, per receive queue (summed as `rx_frames`). A queue
    /// has one owner at a time (`Core::rx_taken`, handed over with
    /// Release/Acquire), and backend counters are never reset, so a plain
    /// store loses no count.
    pub(crate) rx_frames: Box<[QueueFrames]>,
    rx_chained: AtomicU64,
    rx_oversize: AtomicU64,
    tx_kicks: AtomicU64,
    /// Kicks that could not be written (the peer's interrupt counter full,
    /// or it made the eventfd blocking): dropped, never waited for.
    kicks_dropped: AtomicU64,
    /// Connections ended because the peer made an interrupt eventfd
    /// blocking again after handing it over.
    irq_made_blocking: AtomicU64,
    rx_kicks_masked: AtomicU64,
}

impl Counters {
    /// Counters of an interface with `queues` receive queues.
    fn new(queues: usize) -> Self {
        Self {
            rx_frames: (0..queues).map(|_| QueueFrames::default()).collect(),
            ..Self::default()
        }
    }

    fn snapshot(&self) -> Vec<(&'static str, u64)> {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut v = vec![
            ("connects", g(&self.connects)),
            ("disconnects", g(&self.disconnects)),
            ("peer_hangups", g(&self.peer_hangups)),
            ("ctrl_errors", g(&self.ctrl_errors)),
        ];
        let total: u64 = self.violations.iter().map(g).sum();
        v.push(("violations", total));
        for k in Violation::ALL {
            v.push((k.name(), g(&self.violations[k.index()])));
        }
        v.extend([
            ("rx_frames", self.rx_frames.iter().map(|q| g(&q.0)).sum()),
            ("rx_chained", g(&self.rx_chained)),
            ("rx_oversize", g(&self.rx_oversize)),
            ("tx_kicks", g(&self.tx_kicks)),
            ("kicks_dropped", g(&self.kicks_dropped)),
            ("irq_made_blocking", g(&self.irq_made_blocking)),
        ]);
        let _ = &self.rx_kicks_masked;
        v
    }
}

/// Human-readable connection status (control path).
#[derive(Clone, Debug, Default)]
pub struct Status {
    /// Link is up.
    pub connected: bool,
    /// Peer application name (from hello or init).
    pub peer_app: String,
    /// Peer interface name (from connect or connected).
    pub peer_if: String,
    /// Why the last connection ended (ours or the peer's reason).
    pub last_disconnect: String,
    /// Negotiated rings (receive, transmit) and ring size.
    pub rings: (usize, usize, u32),
}

/// State of an interface that outlives connections; shared by the port,
/// its queues, the control thread and each `Connection`.
pub(crate) struct Core {
    cfg: MemifConfig,
    role: Role,
    up: AtomicBool,
    gen: AtomicU64,
    counters: Counters,
    /// Per receive queue: the stable notify fd.
    rx_epoll: Vec<sys::Epoll>,
    rx_taken: Vec<AtomicBool>,
    /// Server: a control connection has claimed this interface.
    busy: AtomicBool,
    /// Wakes the control thread (data-path violations, port removal).
    wake: Arc<sys::EventFd>,
    status: Mutex<Status>,
}

impl Core {
    fn new(cfg: MemifConfig, role: Role, wake: Arc<sys::EventFd>) -> Result<Core, MemifError> {
        let mut rx_epoll = Vec::new();
        for _ in 0..cfg.queues {
            rx_epoll.push(sys::Epoll::new().map_err(io_err("epoll_create"))?);
        }
        Ok(Core {
            rx_taken: (0..cfg.queues).map(|_| AtomicBool::new(false)).collect(),
            counters: Counters::new(cfg.queues as usize),
            cfg,
            role,
            up: AtomicBool::new(false),
            busy: AtomicBool::new(false),
            gen: AtomicU64::new(0),
            rx_epoll,
            wake,
            status: Mutex::new(Status::default()),
        })
    }

    fn set_status(&self, f: impl FnOnce(&mut Status)) {
        if let Ok(mut s) = self.status.lock() {
            f(&mut s)
        }
    }
}

/// What the queues and the control thread share: the core and the current
/// connection.
pub(crate) struct Shared {
    core: Arc<Core>,
    conn: ArcSwapOption<Connection>,
    /// The generation of the connection in `conn` (0: none), stored after
    /// it is swapped in or out: a queue that holds a connection checks it
    /// is still the current one with this plain load instead of a load of
    /// `conn` (two atomic read-modify-writes each batch).
    cur_gen: AtomicU64,
    /// The transmit queues' producers (weak: they hold this `Shared`), for
    /// `detach` to unpin the old connection.
    producers: Mutex<Vec<std::sync::Weak<fabric::TxLock<ring::MemifProducer>>>>,
    /// Departed connections still held by a producer, a lease or a burst:
    /// the control thread drops the last reference (see `crate::retire`),
    /// so an unmap never runs under a transmit lock.
    retired: Retired<Connection>,
}

impl Shared {
    /// Installs a new connection: bumps the generation, publishes it and
    /// raises the link.
    fn attach(&self, conn: Connection) {
        let gen = conn.gen;
        let stale = self.conn.swap(Some(Arc::new(conn)));
        self.cur_gen.store(gen, Ordering::Release);
        if let Some(stale) = stale {
            // Not expected (a detach comes first), but never dropped here.
            stale.unhook();
            self.retired.retire(stale);
        }
        self.core.up.store(true, Ordering::Release);
        self.core.counters.connects.fetch_add(1, Ordering::Relaxed);
        self.core.set_status(|s| s.connected = true);
    }

    /// Drops the current connection and records why. The transmit
    /// producers let go of it here; its memory is unmapped when the last
    /// other holder (a burst not yet released, a lease in flight, a
    /// producer that kept it past `release_pins`'s wait) has let go, by
    /// this control thread: here, or at a later [`Shared::sweep`].
    fn detach(&self, reason: &str, hangup: bool) {
        // Status and counters first: whoever sees the link go down sees
        // why, and the disconnect counted (release_pins below may wait for
        // a producer's reservation in flight).
        self.core.set_status(|s| {
            s.connected = false;
            s.last_disconnect = reason.to_string();
        });
        self.core.up.store(false, Ordering::Release);
        let old = self.conn.swap(None);
        self.cur_gen.store(0, Ordering::Release);
        if let Some(c) = old {
            self.core
                .counters
                .disconnects
                .fetch_add(1, Ordering::Relaxed);
            if hangup {
                self.core
                    .counters
                    .peer_hangups
                    .fetch_add(1, Ordering::Relaxed);
            }
            c.unhook();
            let producers = self
                .producers
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone();
            ring::release_pins(&producers);
            self.retired.retire(c);
        }
    }

    /// Control thread, periodically: unmaps departed connections nobody
    /// else holds any more.
    fn sweep(&self) {
        self.retired.sweep();
    }

    /// The next connection generation.
    fn next_gen(&self) -> u64 {
        self.core.gen.fetch_add(1, Ordering::AcqRel) + 1
    }
}

enum Ctl {
    Server(std::sync::Weak<server::Inner>),
    Client(Option<client::Handle>),
}

/// A memif interface as a fabric port (either role).
pub struct MemifPort {
    shared: Arc<Shared>,
    tx: Vec<MemifTx>,
    ctl: Ctl,
}

impl MemifPort {
    fn build(
        cfg: MemifConfig,
        role: Role,
        wake: Arc<sys::EventFd>,
        ctl: Ctl,
    ) -> Result<MemifPort, MemifError> {
        cfg.validate()?;
        let queues = cfg.queues;
        let core = Arc::new(Core::new(cfg, role, wake)?);
        let shared = Arc::new(Shared {
            core,
            conn: ArcSwapOption::empty(),
            cur_gen: AtomicU64::new(0),
            producers: Mutex::default(),
            retired: Retired::default(),
        });
        let tx = (0..queues)
            .map(|q| MemifTx::new(shared.clone(), q))
            .collect();
        Ok(MemifPort { shared, tx, ctl })
    }

    /// A client port that connects to the server at `client.socket` and
    /// reconnects whenever the connection ends, until dropped.
    pub fn client(cfg: MemifConfig, client: ClientConfig) -> Result<MemifPort, MemifError> {
        let wake = Arc::new(sys::EventFd::new().map_err(io_err("eventfd"))?);
        let mut port = MemifPort::build(cfg, Role::Client, wake, Ctl::Client(None))?;
        let h = client::spawn(port.shared.clone(), client)?;
        port.ctl = Ctl::Client(Some(h));
        Ok(port)
    }

    /// Current connection status.
    pub fn status(&self) -> Status {
        let mut s = self
            .shared
            .core
            .status
            .lock()
            .map(|s| s.clone())
            .unwrap_or_default();
        s.connected = self.link_up();
        s
    }

    /// Role of this port.
    pub fn role(&self) -> Role {
        self.shared.core.role
    }

    /// Interface id.
    pub fn id(&self) -> u32 {
        self.shared.core.cfg.id
    }

    /// Value of one backend counter by name (tests, stats).
    pub fn counter(&self, name: &str) -> u64 {
        self.shared
            .core
            .counters
            .snapshot()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map_or(0, |(_, v)| v)
    }
}

impl Port for MemifPort {
    fn info(&self) -> PortInfo {
        let c = &self.shared.core.cfg;
        PortInfo {
            name: c.name.clone(),
            kind: "memif",
            queues: c.queues,
            max_frame_b: c.max_frame_b,
        }
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let taken = self.shared.core.rx_taken.get(q as usize)?;
        if taken.swap(true, Ordering::AcqRel) {
            return None;
        }
        Some(Box::new(MemifRx::new(self.shared.clone(), q)))
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        // The contract says q < queues; fall back to queue 0 rather than panic.
        self.tx.get(q as usize).unwrap_or(&self.tx[0])
    }

    fn link_up(&self) -> bool {
        self.shared.core.up.load(Ordering::Acquire)
    }

    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        self.shared.core.counters.snapshot()
    }
}

impl Drop for MemifPort {
    fn drop(&mut self) {
        match &mut self.ctl {
            Ctl::Server(inner) => {
                if let Some(inner) = inner.upgrade() {
                    inner.remove_interface(self.shared.core.cfg.id, &self.shared);
                }
            }
            Ctl::Client(h) => {
                if let Some(h) = h.take() {
                    h.stop();
                }
            }
        }
        self.shared.detach("interface removed", false);
    }
}

/// Socket path type used by both roles.
pub type SocketPath = PathBuf;

/// Waits up to `timeout_ms` for a notify fd (from [`RxQueue::notify_fd`])
/// to become readable. For callers driving a single queue without their
/// own epoll loop (turnout-gen, tests).
pub fn wait_notify(fd: std::os::fd::RawFd, timeout_ms: i32) -> bool {
    sys::wait_readable(fd, timeout_ms).unwrap_or(false)
}
