//! vhost-user port: turnoutd is the backend (device side) of a virtio-net
//! device whose frontend is QEMU (`-netdev vhost-user`) or a DPDK
//! application (`net_virtio_user`, container style).
//!
//! - [`device`]: the protocol (framed by the rust-vmm `vhost` crate) and
//!   one control thread per port, in server mode (turnoutd listens; one
//!   frontend at a time; a new one may connect after the old one left) or
//!   client mode (turnoutd connects to a frontend that owns the socket and
//!   reconnects after it restarts).
//! - [`vring`]: the data path. Workers walk the split virtqueues directly
//!   (no thread of our own on the data path): receive queue `q` is the
//!   guest's transmit virtqueue `2q+1`, transmit queue `q` the guest's
//!   receive virtqueue `2q`. Every descriptor is validated; a frontend that
//!   lies is disconnected and counted; one that hangs up is disconnected.
//! - [`sys`]: every system call and raw-memory access (mmap, ring
//!   accesses, eventfd); the other files' `unsafe` blocks call its
//!   `unsafe fn`s or the fabric's under their contracts.
//! - [`frontend`]: the other end, a vhost-user *frontend* (driver side,
//!   what DPDK calls virtio-user) sharing `sys`'s memory and ring code:
//!   turnout-gen attaches to a switch's vhost-user port with it.
//!
//! Threading: the control thread owns the protocol state and installs
//! immutable per-virtqueue sessions in `ArcSwapOption`s; workers load them
//! per burst / per transmit call and never block on the control thread.
//!
//! Features offered: `VIRTIO_F_VERSION_1`, `VIRTIO_NET_F_MRG_RXBUF`,
//! `VIRTIO_RING_F_EVENT_IDX`, `VHOST_USER_F_PROTOCOL_FEATURES`,
//! `VIRTIO_NET_F_MQ` (with more than one queue pair); protocol features
//! `MQ` and `REPLY_ACK`. Not offered: packed virtqueues, indirect
//! descriptors, checksum/segmentation offloads, dirty logging (migration).
//! See docs/vhost-user.md.

pub mod device;
pub mod frontend;
#[cfg(any(test, feature = "test-utils"))]
#[doc(hidden)]
pub mod fuzzing;
#[allow(unsafe_code)]
pub mod sys;
#[allow(unsafe_code)]
pub mod vring;

use std::fmt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU16, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::open::Opener;
use crate::retire::Retired;

use vring::{Fault, Lie, Session, VhostRx, VhostTx, VringSlot};

/// Most queue pairs per port.
pub const MAX_QUEUES: u16 = 16;
/// Smallest `max_frame_b`.
pub const MIN_FRAME_B: usize = 64;
/// Largest `max_frame_b`: a 64 KiB buffer less the 12-byte virtio-net
/// header.
pub const MAX_FRAME_B: usize = 65535 - 12;

/// Who owns the socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// turnoutd creates and listens on the socket; the frontend connects
    /// (QEMU `-chardev socket,path=...` without `server`, DPDK virtio-user).
    Server,
    /// The frontend listens (QEMU `-chardev socket,...,server=on`);
    /// turnoutd connects, and reconnects after it restarts.
    Client,
}

/// Settings of a vhost-user port: the `[[ports]]` table of kind
/// `vhost_user` (docs/turnoutd.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostUserConfig {
    /// Path of the unix socket.
    pub socket: PathBuf,
    /// Server or client (the `client` key: `true` for client).
    #[serde(
        rename = "client",
        default = "server",
        serialize_with = "mode_out",
        deserialize_with = "mode_in"
    )]
    pub mode: Mode,
    /// Queue pairs offered (`1..=MAX_QUEUES`); configure as many as the
    /// frontend uses.
    #[serde(default = "one")]
    pub queues: u16,
    /// Largest frame, in bytes (without the virtio-net header),
    /// [`MIN_FRAME_B`]..=[`MAX_FRAME_B`].
    #[serde(default = "default_frame")]
    pub max_frame_b: usize,
    /// Offer `VIRTIO_NET_F_MRG_RXBUF` (not a config key).
    #[serde(skip, default = "yes")]
    pub mrg_rxbuf: bool,
    /// Offer `VIRTIO_RING_F_EVENT_IDX` (not a config key).
    #[serde(skip, default = "yes")]
    pub event_idx: bool,
}

fn server() -> Mode {
    Mode::Server
}
fn one() -> u16 {
    1
}
fn yes() -> bool {
    true
}
fn default_frame() -> usize {
    1518
}
fn mode_out<S: Serializer>(m: &Mode, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_bool(*m == Mode::Client)
}
fn mode_in<'de, D: Deserializer<'de>>(d: D) -> Result<Mode, D::Error> {
    Ok(if bool::deserialize(d)? {
        Mode::Client
    } else {
        Mode::Server
    })
}

impl VhostUserConfig {
    /// Defaults: server mode, one queue pair, 1518-byte frames, mergeable
    /// buffers and event index offered.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
            mode: Mode::Server,
            queues: 1,
            max_frame_b: default_frame(),
            mrg_rxbuf: true,
            event_idx: true,
        }
    }

    /// Checks every value; the error names the key and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        config::check_socket(&self.socket)?;
        config::check_queues(self.queues, MAX_QUEUES)?;
        config::check_range("max_frame_b", self.max_frame_b, MIN_FRAME_B, MAX_FRAME_B)
    }
}

impl KindConfig for VhostUserConfig {
    fn queues(&self) -> u16 {
        self.queues
    }

    fn validate(&self) -> Result<(), ConfigError> {
        VhostUserConfig::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        (
            "socket",
            format!("vhost-user socket {}", self.socket.display()),
        )
    }

    /// A server creates the socket's directory if it is missing.
    fn open(&self, _: PortKind, name: &str, _: &Opener) -> Result<Arc<dyn Port>, String> {
        if self.mode == Mode::Server {
            crate::open::create_parent(&self.socket)?;
        }
        Ok(Arc::new(
            VhostUserPort::new(name, self.clone()).map_err(|e| e.to_string())?,
        ))
    }
}

/// Errors creating a vhost-user port.
#[derive(Debug)]
pub enum Error {
    /// A setting is out of range.
    BadConfig(String),
    /// The socket could not be created.
    Socket(std::io::Error),
    /// An eventfd, epoll set or thread could not be created.
    Os(std::io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadConfig(m) => write!(f, "bad vhost-user config: {m}"),
            Error::Socket(e) => write!(f, "vhost-user socket: {e}"),
            Error::Os(e) => write!(f, "vhost-user: {e}"),
        }
    }
}

impl std::error::Error for Error {}

/// State shared by the port, its queues and its control thread.
pub struct Shared {
    name: String,
    cfg: VhostUserConfig,
    /// One per virtqueue (`2 * queues`).
    slots: Vec<Arc<VringSlot>>,
    tx: Box<[VhostTx]>,
    rx_taken: Vec<Arc<AtomicBool>>,
    fault: Arc<Fault>,
    stop: AtomicBool,
    connected: AtomicBool,
    connects: AtomicU64,
    disconnects_hangup: AtomicU64,
    disconnects_lie: AtomicU64,
    disconnects_protocol: AtomicU64,
    /// Frontends whose message stopped midway, or who left our replies
    /// unread, for `device::READ_DEADLINE`.
    disconnects_stall: AtomicU64,
    /// Frontends whose memory faulted under us (a file shrunk).
    disconnects_mem_fault: AtomicU64,
    /// Frontends that made a kick or call eventfd blocking again.
    disconnects_notify_fd: AtomicU64,
    protocol_errors: AtomicU64,
    /// SET_VRING_ENABLE messages that came before SET_FEATURES (QEMU 7.2)
    /// and were kept (see device.rs).
    early_enables: AtomicU64,
    rejected: AtomicU64,
    /// Transmit queues `0..tx_up` run (the guest's receive virtqueues
    /// `0, 2, ..`): what [`Port::tx_queues_up`] answers. Written by the
    /// control thread after each start or stop of a virtqueue.
    tx_up: AtomicU16,
    /// Stopped sessions a worker still held when the stop's quiesce timed
    /// out: the control thread drops the last reference (see
    /// `crate::retire`), so unmapping guest memory and closing eventfds
    /// never run under a transmit lock.
    retired: Retired<Session>,
}

impl Shared {
    /// The state of a new port (checked configuration, slots, transmit
    /// queues) and, in server mode, its listening socket.
    fn new(name: &str, cfg: VhostUserConfig) -> Result<(Arc<Shared>, Option<UnixListener>), Error> {
        cfg.validate()
            .map_err(|e| Error::BadConfig(e.to_string()))?;
        let fault = Arc::new(Fault::new().map_err(Error::Os)?);
        let mut slots = Vec::new();
        for _ in 0..2 * cfg.queues {
            slots.push(Arc::new(VringSlot::new().map_err(Error::Os)?));
        }
        let tx = (0..cfg.queues as usize)
            .map(|q| VhostTx::new(slots[2 * q].clone(), cfg.max_frame_b, fault.clone()))
            .collect();
        let listener = if device::is_server(cfg.mode) {
            Some(device::listen(&cfg.socket).map_err(Error::Socket)?)
        } else {
            None
        };
        let shared = Arc::new(Shared {
            name: name.to_string(),
            rx_taken: (0..cfg.queues)
                .map(|_| Arc::new(AtomicBool::new(false)))
                .collect(),
            cfg,
            slots,
            tx,
            fault,
            stop: AtomicBool::new(false),
            connected: AtomicBool::new(false),
            connects: AtomicU64::new(0),
            disconnects_hangup: AtomicU64::new(0),
            disconnects_lie: AtomicU64::new(0),
            disconnects_protocol: AtomicU64::new(0),
            disconnects_stall: AtomicU64::new(0),
            disconnects_mem_fault: AtomicU64::new(0),
            disconnects_notify_fd: AtomicU64::new(0),
            protocol_errors: AtomicU64::new(0),
            early_enables: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            tx_up: AtomicU16::new(0),
            retired: Retired::default(),
        });
        Ok((shared, listener))
    }
}

/// A vhost-user port (see the module documentation).
pub struct VhostUserPort {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl VhostUserPort {
    /// Creates the port and starts its control thread: in server mode the
    /// socket is created (mode 0600) before this returns; in client mode
    /// the thread keeps trying to connect.
    pub fn new(name: &str, cfg: VhostUserConfig) -> Result<Self, Error> {
        let (shared, listener) = Shared::new(name, cfg)?;
        let s = shared.clone();
        let thread = std::thread::Builder::new()
            .name(format!(
                "vhost-{}",
                name.chars().take(9).collect::<String>()
            ))
            .spawn(move || device::run(s, listener))
            .map_err(Error::Os)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Whether a frontend is connected (control-path view).
    pub fn connected(&self) -> bool {
        self.shared.connected.load(Acquire)
    }

    /// Number of connections accepted or made so far.
    pub fn connects(&self) -> u64 {
        self.shared.connects.load(Relaxed)
    }

    /// Waits until the guest's receive virtqueue 0 and transmit virtqueue 0
    /// run (or `timeout` passes); returns whether they do.
    pub fn wait_running(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if self.shared.slots[0].session.load().is_some()
                && self.shared.slots[1].session.load().is_some()
            {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// A named backend counter (see [`Port::backend_counters`]).
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.backend_counters()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| v)
    }
}

impl Drop for VhostUserPort {
    fn drop(&mut self) {
        self.shared.stop.store(true, Release);
        self.shared.fault.wake.notify();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if self.shared.cfg.mode == Mode::Server {
            let _ = std::fs::remove_file(&self.shared.cfg.socket);
        }
    }
}

impl Port for VhostUserPort {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: self.shared.name.clone(),
            kind: "vhost_user",
            queues: self.shared.cfg.queues,
            max_frame_b: self.shared.cfg.max_frame_b as u32,
        }
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let taken = self.shared.rx_taken.get(q as usize)?;
        if taken.swap(true, AcqRel) {
            return None;
        }
        Some(Box::new(VhostRx::new(
            self.shared.slots[2 * q as usize + 1].clone(),
            self.shared.cfg.max_frame_b,
            self.shared.fault.clone(),
            taken.clone(),
        )))
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        let q = (q as usize).min(self.shared.tx.len() - 1);
        &self.shared.tx[q]
    }

    fn link_up(&self) -> bool {
        self.shared.slots[0].session.load().is_some()
    }

    fn tx_queues_up(&self) -> u16 {
        self.shared.tx_up.load(Relaxed)
    }

    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        counters_of(&self.shared)
    }
}

/// The counters of a port (see [`Port::backend_counters`]).
fn counters_of(s: &Shared) -> Vec<(&'static str, u64)> {
    let f = &s.fault;
    let mut v = vec![
        ("connected", s.connected.load(Relaxed) as u64),
        ("connects", s.connects.load(Relaxed)),
        ("disconnects_hangup", s.disconnects_hangup.load(Relaxed)),
        ("disconnects_lie", s.disconnects_lie.load(Relaxed)),
        ("disconnects_protocol", s.disconnects_protocol.load(Relaxed)),
        ("disconnects_stall", s.disconnects_stall.load(Relaxed)),
        (
            "disconnects_mem_fault",
            s.disconnects_mem_fault.load(Relaxed),
        ),
        (
            "disconnects_notify_fd",
            s.disconnects_notify_fd.load(Relaxed),
        ),
        ("protocol_errors", s.protocol_errors.load(Relaxed)),
        ("early_vring_enables", s.early_enables.load(Relaxed)),
        ("rejected_frontends", s.rejected.load(Relaxed)),
        ("tx_queues_up", s.tx_up.load(Relaxed) as u64),
        ("rx_oversize", f.rx_oversize.load(Relaxed)),
        ("rx_short", f.rx_short.load(Relaxed)),
        ("rx_linearised", f.rx_linearised.load(Relaxed)),
        ("tx_buf_short", f.tx_buf_short.load(Relaxed)),
        ("tx_stale", f.tx_stale.load(Relaxed)),
        ("call_dropped", f.call_dropped.load(Relaxed)),
    ];
    for (i, name) in Lie::NAMES.iter().enumerate() {
        v.push((name, f.lies[i].load(Relaxed)));
    }
    v
}
