//! vhost-user frontend: the driver (VM / container) side of a virtio-net
//! device whose backend is another switch (turnoutd's own vhost-user port,
//! DPDK `net_vhost`, OVS-DPDK `dpdkvhostuser`). What DPDK calls
//! virtio-user; turnout-gen uses it to attach to a switch the way a VM does.
//!
//! - Protocol (`control.rs`): the rust-vmm `vhost` crate's
//!   [`Frontend`](vhost::vhost_user::Frontend) frames the messages:
//!   `SET_OWNER`, `GET/SET_FEATURES` (`VIRTIO_F_VERSION_1`,
//!   `VHOST_USER_F_PROTOCOL_FEATURES`, `VIRTIO_RING_F_EVENT_IDX`,
//!   `VIRTIO_NET_F_MQ` with several queue pairs),
//!   `GET/SET_PROTOCOL_FEATURES` (`MQ`, `REPLY_ACK`), `SET_MEM_TABLE` (one
//!   memfd region holding every ring and buffer),
//!   `SET_VRING_NUM/BASE/ADDR/CALL/KICK`, `SET_VRING_ENABLE`.
//! - Memory (`control.rs`): one memfd, mapped through
//!   [`GuestMemory`](super::sys::GuestMemory) (the same checked mapping the
//!   backend uses) under a guest-physical label ([`GPA_BASE`]) and a
//!   frontend-virtual label ([`UVA_BASE`]) that differ, so a backend that
//!   confuses the two address spaces fails at once.
//! - Data path ([`FrontendTx`] in `tx.rs`, [`FrontendRx`] in `rx.rs`):
//!   split virtqueues driven through the driver-side accessors of
//!   [`Ring`](super::sys::Ring). Transmit queue `q` is virtqueue `2q+1`,
//!   in order (position `p` is descriptor `p % size`, one descriptor per
//!   frame: 12-byte virtio-net header, written once, plus the frame),
//!   reclaimed in bulk, under a `TxLock` whose leases pin the session;
//!   receive queue `q` is virtqueue `2q` (every buffer posted, frames
//!   handed to the caller without a copy and re-posted on `release`).
//!   `EVENT_IDX` is negotiated when offered (kicks by `avail_event`);
//!   `MRG_RXBUF` when the largest frame needs more than [`RX_BUF_MRG`]
//!   bytes: receive buffers are then that size and a frame spans
//!   `num_buffers` of them, lent in place when they are adjacent, copied
//!   into the batch's scratch at the ring's wrap. Otherwise every buffer
//!   holds the largest frame. We poll.
//! - Validation (`tx.rs`, `rx.rs`): what the backend writes into the used
//!   rings is read once and checked (used index at most the entries it
//!   holds, ids in range and held by the device, lengths inside the
//!   buffer, `num_buffers` within the entries published). A lie is
//!   counted, the queue stops and the control thread disconnects. We never
//!   read our descriptor table back: buffer addresses come from our own
//!   ids.
//! - Control thread (`control.rs`): connects (or accepts, `server`), sets
//!   up, then watches the socket; when the backend hangs up or lies the
//!   sessions are removed (link down; transmit slots reserved meanwhile are
//!   dropped as `TxStale`), and it connects again with a fresh memory
//!   table.
//!
//! This file: the port ([`VhostFrontendPort`]) and its settings
//! ([`FrontendConfig`]), the state its queues and control thread share,
//! and what a backend did wrong ([`BackendLie`], counted in
//! [`FrontendFault`]). `testutil.rs`: the unit tests' fixtures.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::retire::Retired;
use fabric::batch::MAX_BATCH;
use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::{Error, MAX_QUEUES};

mod control;
mod rx;
#[cfg(test)]
#[allow(unsafe_code)]
mod testutil;
#[allow(unsafe_code)]
mod tx;

pub use rx::FrontendRx;
use rx::RxSlot;
pub use tx::FrontendTx;
use tx::TxSession;

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
            .spawn(move || control::run(s, listener))
            .map_err(Error::Os)?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Connections set up so far.
    pub fn connects(&self) -> u64 {
        self.shared.connects.load(Acquire)
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
