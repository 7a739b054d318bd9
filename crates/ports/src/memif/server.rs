//! The server (master) role: one listening socket, many interfaces told
//! apart by id, one control thread running the handshake of every client.
//!
//! Per control connection: `hello` is sent on accept; then `init` (version,
//! id, mode, secret) must come first, followed by `add_region`s (memfd
//! attached) and `add_ring`s (eventfd attached), each acknowledged, and
//! `connect`, answered by `connected` once regions are mapped and rings
//! checked. Anything else, at any point, ends that control connection with a
//! `disconnect` carrying the reason; other connections are not affected.

// Safe code: what is `unsafe` of memif lives in sys.rs (and floor).
#![deny(unsafe_code)]

use std::collections::HashMap;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::proto::{self, AddRing, Disconnect, Hello, Msg, COOKIE, MSG_SIZE};
use super::ring::{reset_ring, Connection, Ring};
use super::sys::{self, EventFd, Region};
use super::{io_err, Ctl, MemifConfig, MemifError, MemifPort, Role, Shared};

/// Highest region index a client may announce.
pub const MAX_REGION_INDEX: u16 = 63;
/// Largest region a client may announce (offsets are 32-bit).
pub const MAX_REGION_B: u64 = 1 << 32;

/// Server socket configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Socket file path.
    pub socket: PathBuf,
    /// Permissions of the socket file (0600 by default: only our user).
    pub mode: u32,
    /// Application name sent in `hello`.
    pub app_name: String,
    /// A control connection not connected within this time is closed.
    pub handshake_timeout: Duration,
    /// Most control connections at once (connected or not).
    pub max_channels: usize,
    /// Unit tests: the control thread waits here once it has sent a
    /// `connected` reply (it could be preempted there for as long).
    #[cfg(test)]
    pub(crate) after_connected: Option<Arc<std::sync::Barrier>>,
}

impl ServerConfig {
    /// Defaults for a socket at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        ServerConfig {
            socket: socket.into(),
            mode: 0o600,
            app_name: "turnout".into(),
            handshake_timeout: Duration::from_secs(5),
            max_channels: 256,
            #[cfg(test)]
            after_connected: None,
        }
    }
}

#[derive(Default)]
struct ServerCounters {
    accepted: AtomicU64,
    refused: AtomicU64,
    ctrl_errors: AtomicU64,
}

pub(crate) struct Inner {
    cfg: ServerConfig,
    listener: OwnedFd,
    /// Inode of the socket file we bound.
    ino: Option<u64>,
    wake: Arc<EventFd>,
    stop: AtomicBool,
    ifaces: Mutex<HashMap<u32, Arc<Shared>>>,
    counters: ServerCounters,
}

impl Inner {
    pub(crate) fn remove_interface(&self, id: u32, shared: &Arc<Shared>) {
        if let Ok(mut m) = self.ifaces.lock() {
            if m.get(&id).is_some_and(|s| Arc::ptr_eq(s, shared)) {
                m.remove(&id);
            }
        }
        self.wake.signal();
    }

    fn lookup(&self, id: u32) -> Option<Arc<Shared>> {
        self.ifaces.lock().ok()?.get(&id).cloned()
    }

    /// Unmaps the departed connections of every interface that nobody
    /// but this control thread holds any more.
    fn sweep(&self) {
        let ifaces: Vec<Arc<Shared>> = match self.ifaces.lock() {
            Ok(m) => m.values().cloned().collect(),
            Err(_) => return,
        };
        for sh in ifaces {
            sh.sweep();
        }
    }

    fn registered(&self, sh: &Arc<Shared>) -> bool {
        self.ifaces
            .lock()
            .map(|m| m.get(&sh.core.cfg.id).is_some_and(|s| Arc::ptr_eq(s, sh)))
            .unwrap_or(false)
    }
}

/// A memif server socket and its control thread.
pub struct MemifServer {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl MemifServer {
    /// Creates the socket file (mode `cfg.mode`) and starts the control
    /// thread.
    pub fn bind(cfg: ServerConfig) -> Result<MemifServer, MemifError> {
        let listener = sys::listen(&cfg.socket, cfg.mode)
            .map_err(io_err(format!("listen on {}", cfg.socket.display())))?;
        let ino = sys::inode(&cfg.socket);
        let wake = Arc::new(EventFd::new().map_err(io_err("eventfd"))?);
        let inner = Arc::new(Inner {
            cfg,
            listener,
            ino,
            wake,
            stop: AtomicBool::new(false),
            ifaces: Mutex::new(HashMap::new()),
            counters: ServerCounters::default(),
        });
        // The control thread's epoll set is made here, not in the thread:
        // a failure is an error of `bind`, not a thread that silently never
        // serves, and once `bind` returns the server holds every descriptor
        // it keeps (the fuzz target `memif_msg` counts them).
        let ep = sys::Epoll::new().map_err(io_err("epoll_create"))?;
        ep.add_events(inner.listener.as_raw_fd(), sys::WATCH, TOKEN_LISTEN)
            .map_err(io_err("epoll_ctl (listener)"))?;
        ep.add_events(inner.wake.fd(), sys::WATCH, TOKEN_WAKE)
            .map_err(io_err("epoll_ctl (wake-up)"))?;
        let i2 = inner.clone();
        let thread = std::thread::Builder::new()
            .name("memif-server".into())
            .spawn(move || run(i2, ep))
            .map_err(io_err("spawn memif control thread"))?;
        Ok(MemifServer {
            inner,
            thread: Some(thread),
        })
    }

    /// Adds an interface with id `cfg.id`; a client presenting that id (and
    /// the secret, if set) gets it. Dropping the port removes it.
    pub fn add_interface(&self, cfg: MemifConfig) -> Result<MemifPort, MemifError> {
        let id = cfg.id;
        let port = MemifPort::build(
            cfg,
            Role::Server,
            self.inner.wake.clone(),
            Ctl::Server(Arc::downgrade(&self.inner)),
        )?;
        let mut m = self
            .inner
            .ifaces
            .lock()
            .map_err(|_| MemifError::Config("server state poisoned".into()))?;
        if m.contains_key(&id) {
            drop(m);
            // Do not let the port's Drop remove the existing interface.
            let mut port = port;
            port.ctl = Ctl::Server(std::sync::Weak::new());
            return Err(MemifError::IdInUse(id));
        }
        m.insert(id, port.shared.clone());
        Ok(port)
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.inner.cfg.socket
    }

    /// Socket-level counters: control connections accepted, refused
    /// (too many), and ended for a protocol error before naming an interface.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.inner.counters;
        vec![
            ("accepted", c.accepted.load(Ordering::Relaxed)),
            ("refused", c.refused.load(Ordering::Relaxed)),
            ("ctrl_errors", c.ctrl_errors.load(Ordering::Relaxed)),
        ]
    }
}

impl Drop for MemifServer {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.wake.signal();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        sys::unlink_if(&self.inner.cfg.socket, self.inner.ino);
    }
}

#[derive(PartialEq, Eq, Clone, Copy)]
enum St {
    AwaitInit,
    Setup,
    Connected,
}

struct PendingRing {
    region: usize,
    off: usize,
    log2: u8,
    irq: EventFd,
}

struct Channel {
    sock: OwnedFd,
    st: St,
    iface: Option<Arc<Shared>>,
    regions: Vec<Region>,
    c2s: Vec<Option<PendingRing>>,
    s2c: Vec<Option<PendingRing>>,
    created: Instant,
    peer_app: String,
}

impl Channel {
    fn new(sock: OwnedFd) -> Channel {
        Channel {
            sock,
            st: St::AwaitInit,
            iface: None,
            regions: Vec::new(),
            c2s: Vec::new(),
            s2c: Vec::new(),
            created: Instant::now(),
            peer_app: String::new(),
        }
    }
}

/// The server's first message on every control connection.
fn hello(inner: &Inner) -> Msg {
    Msg::Hello(Hello {
        name: inner.cfg.app_name.clone(),
        min_version: proto::VERSION,
        max_version: proto::VERSION,
        max_region: MAX_REGION_INDEX,
        max_s2c_ring: super::MAX_QUEUES - 1,
        max_c2s_ring: super::MAX_QUEUES - 1,
        max_log2_ring_size: proto::MAX_LOG2_RING,
    })
}

#[cfg(any(test, feature = "test-utils"))]
impl MemifServer {
    /// Fuzzing (see `memif::fuzzing`): serves one control connection in the
    /// calling thread as the control thread does (hello, then every message
    /// waiting on `sock` until the channel ends or nothing is left to read),
    /// closes it, and returns why it ended.
    pub(super) fn serve_one(&self, sock: OwnedFd) -> String {
        let inner = &self.inner;
        let Ok(ep) = sys::Epoll::new() else {
            return "epoll_create failed".into();
        };
        if sys::send_msg(sock.as_raw_fd(), &hello(inner).encode(), None).is_err() {
            return "peer hung up".into();
        }
        inner.counters.accepted.fetch_add(1, Ordering::Relaxed);
        let mut ch = Channel::new(sock);
        let end = match on_readable(inner, &mut ch) {
            Err(e) => e,
            Ok(()) => End::Local("input ended".into()),
        };
        let why = match &end {
            End::Hangup => "peer hung up".to_string(),
            End::Peer(r) => format!("peer disconnected: {r}"),
            End::Reject(r) | End::Local(r) => r.clone(),
        };
        close(inner, &ep, ch, end);
        why
    }
}

/// How a control connection ends.
pub(crate) enum End {
    /// Socket closed or failed.
    Hangup,
    /// The peer sent `disconnect`.
    Peer(String),
    /// The peer broke the control protocol: we send `disconnect`, count it.
    Reject(String),
    /// We end it (violation, removal, shutdown, timeout): we send `disconnect`.
    Local(String),
}

const TOKEN_LISTEN: u64 = 0;
const TOKEN_WAKE: u64 = 1;

fn run(inner: Arc<Inner>, ep: sys::Epoll) {
    let mut chans: HashMap<u64, Channel> = HashMap::new();
    let mut next_token = 2u64;
    let mut events = Vec::new();
    while !inner.stop.load(Ordering::Acquire) {
        events.clear();
        if ep.wait_into(&mut events, 500).is_err() {
            std::thread::sleep(Duration::from_millis(50));
        }
        for &(tok, _ev) in &events {
            match tok {
                TOKEN_LISTEN => {
                    while let Ok(Some(sock)) = sys::accept(inner.listener.as_raw_fd()) {
                        if chans.len() >= inner.cfg.max_channels {
                            inner.counters.refused.fetch_add(1, Ordering::Relaxed);
                            continue; // dropped: closed
                        }
                        if sys::send_msg(sock.as_raw_fd(), &hello(&inner).encode(), None).is_err() {
                            continue;
                        }
                        let t = next_token;
                        next_token += 1;
                        if ep.add_events(sock.as_raw_fd(), sys::WATCH, t).is_err() {
                            continue;
                        }
                        inner.counters.accepted.fetch_add(1, Ordering::Relaxed);
                        chans.insert(t, Channel::new(sock));
                    }
                }
                TOKEN_WAKE => {
                    inner.wake.drain_nowait();
                }
                t => {
                    let Some(ch) = chans.get_mut(&t) else {
                        continue;
                    };
                    if let Err(end) = on_readable(&inner, ch) {
                        if let Some(ch) = chans.remove(&t) {
                            close(&inner, &ep, ch, end);
                        }
                    }
                }
            }
        }
        // Housekeeping: violations flagged by workers, removed interfaces,
        // handshakes that take too long.
        let mut ended = Vec::new();
        for (&t, ch) in &chans {
            let end = if let Some(sh) = &ch.iface {
                if !inner.registered(sh) {
                    Some(End::Local("interface removed".into()))
                } else {
                    let c = sh.conn.load();
                    c.as_ref().and_then(|c| {
                        c.violated()
                            .map(|v| End::Local(v.reason().into()))
                            .or_else(|| {
                                let why = c.blocking_irq()?;
                                sh.core
                                    .counters
                                    .irq_made_blocking
                                    .fetch_add(1, Ordering::Relaxed);
                                Some(End::Local(why))
                            })
                    })
                }
            } else {
                None
            };
            let end = end.or_else(|| {
                (ch.st != St::Connected && ch.created.elapsed() > inner.cfg.handshake_timeout)
                    .then(|| End::Local("handshake timeout".into()))
            });
            if let Some(e) = end {
                ended.push((t, e));
            }
        }
        for (t, e) in ended {
            if let Some(ch) = chans.remove(&t) {
                close(&inner, &ep, ch, e);
            }
        }
        inner.sweep();
    }
    for (_, ch) in chans.drain() {
        close(&inner, &ep, ch, End::Local("server shutting down".into()));
    }
}

fn close(inner: &Inner, ep: &sys::Epoll, ch: Channel, end: End) {
    let (reason, send, hangup, error) = match end {
        End::Hangup => ("peer hung up".to_string(), false, true, false),
        End::Peer(r) => (format!("peer disconnected: {r}"), false, false, false),
        End::Reject(r) => (r, true, false, true),
        End::Local(r) => (r, true, false, false),
    };
    if send {
        let m = Msg::Disconnect(Disconnect {
            code: 0,
            reason: reason.clone(),
        });
        let _ = sys::send_msg(ch.sock.as_raw_fd(), &m.encode(), None);
    }
    ep.remove(ch.sock.as_raw_fd());
    match &ch.iface {
        Some(sh) => {
            if error {
                sh.core.counters.ctrl_errors.fetch_add(1, Ordering::Relaxed);
            }
            sh.detach(&reason, hangup);
            sh.core.busy.store(false, Ordering::Release);
        }
        None => {
            if error {
                inner.counters.ctrl_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    // Dropping `ch` closes the socket and unmaps regions not handed over.
}

fn on_readable(inner: &Inner, ch: &mut Channel) -> Result<(), End> {
    let mut buf = [0u8; 2 * MSG_SIZE];
    loop {
        let r = match sys::recv_msg(ch.sock.as_raw_fd(), &mut buf) {
            Ok(None) => return Ok(()),
            Ok(Some(r)) => r,
            Err(_) => return Err(End::Hangup),
        };
        if r.len == 0 && r.fd.is_none() {
            return Err(End::Hangup);
        }
        if r.truncated || r.len != MSG_SIZE {
            return Err(End::Reject(format!("invalid message size {}", r.len)));
        }
        if r.extra_fds {
            return Err(End::Reject("more than one file descriptor attached".into()));
        }
        let msg = Msg::decode(&buf[..r.len]).map_err(|e| End::Reject(e.to_string()))?;
        on_msg(inner, ch, msg, r.fd)?;
    }
}

fn ack(ch: &Channel) -> Result<(), End> {
    sys::send_msg(ch.sock.as_raw_fd(), &Msg::Ack.encode(), None).map_err(|_| End::Hangup)
}

fn on_msg(inner: &Inner, ch: &mut Channel, msg: Msg, fd: Option<OwnedFd>) -> Result<(), End> {
    let rej = |s: String| Err(End::Reject(s));
    if let Msg::Disconnect(d) = &msg {
        return Err(End::Peer(d.reason.clone()));
    }
    let needs_fd = matches!(msg, Msg::AddRegion(_) | Msg::AddRing(_));
    if fd.is_some() && !needs_fd {
        return rej(format!("unexpected file descriptor with {}", msg.name()));
    }
    match (ch.st, msg) {
        (St::AwaitInit, Msg::Init(i)) => {
            if i.version != proto::VERSION {
                return rej(format!("incompatible memif version {:#x}", i.version));
            }
            let Some(sh) = inner.lookup(i.id) else {
                return rej(format!("ID {} not found", i.id));
            };
            let cfg = &sh.core.cfg;
            // From here on errors are counted on the interface.
            if sh.core.busy.swap(true, Ordering::AcqRel) {
                sh.core.counters.ctrl_errors.fetch_add(1, Ordering::Relaxed);
                return rej("already connected".into());
            }
            ch.iface = Some(sh.clone());
            if i.mode != proto::MODE_ETHERNET {
                return rej("only ethernet mode supported".into());
            }
            if let Some(s) = &cfg.secret {
                let want = proto::secret_field(s).unwrap_or([0; proto::SECRET_SZ]);
                if i.secret.iter().all(|&b| b == 0) {
                    return rej("secret required".into());
                }
                if !proto::secret_matches(&want, &i.secret) {
                    return rej("incorrect secret".into());
                }
            }
            ch.peer_app = i.name.clone();
            let q = cfg.queues as usize;
            ch.c2s = (0..q).map(|_| None).collect();
            ch.s2c = (0..q).map(|_| None).collect();
            ch.st = St::Setup;
            ack(ch)
        }
        (St::Setup, Msg::AddRegion(ar)) => {
            let Some(fd) = fd else {
                return rej("missing region fd".into());
            };
            if ar.index as usize != ch.regions.len() || ar.index > MAX_REGION_INDEX {
                return rej(format!("invalid region index {}", ar.index));
            }
            if ar.size > MAX_REGION_B {
                return rej(format!("region size {} exceeds {}", ar.size, MAX_REGION_B));
            }
            let require = ch.iface.as_ref().is_some_and(|s| s.core.cfg.require_seal);
            let region = Region::map_peer(fd, ar.size, require).map_err(End::Reject)?;
            ch.regions.push(region);
            ack(ch)
        }
        (St::Setup, Msg::AddRing(ar)) => {
            let Some(fd) = fd else {
                return rej("missing interrupt fd".into());
            };
            add_ring(ch, &ar, fd)?;
            ack(ch)
        }
        (St::Setup, Msg::Connect(name)) => {
            let sh = ch
                .iface
                .clone()
                .ok_or_else(|| End::Reject("connect before init".into()))?;
            let conn = build_connection(ch, &sh)?;
            sh.core.set_status(|s| {
                s.peer_app = ch.peer_app.clone();
                s.peer_if = name.clone();
                s.rings = (
                    conn.rx.len(),
                    conn.tx.len(),
                    conn.rx.first().map_or(0, |r| r.size),
                );
            });
            // Link up before the reply: the client starts sending as soon
            // as it reads `connected`, and this thread may be preempted
            // right after the send (a real-time peer on its CPU) for longer
            // than a whole trial, whose frames would all be dropped as
            // link_down. If the reply cannot be sent, closing this channel
            // detaches the connection again (a connect and a disconnect).
            sh.attach(conn);
            ch.st = St::Connected;
            let reply = Msg::Connected(sh.core.cfg.name.clone());
            sys::send_msg(ch.sock.as_raw_fd(), &reply.encode(), None).map_err(|_| End::Hangup)?;
            #[cfg(test)]
            if let Some(b) = &inner.cfg.after_connected {
                b.wait();
            }
            Ok(())
        }
        (st, m) => {
            let when = match st {
                St::AwaitInit => "before init",
                St::Setup => "during setup",
                St::Connected => "while connected",
            };
            rej(format!("unexpected {} message {when}", m.name()))
        }
    }
}

fn add_ring(ch: &mut Channel, ar: &AddRing, fd: OwnedFd) -> Result<(), End> {
    let rej = |s: String| Err(End::Reject(s));
    let table = if ar.is_c2s() { &ch.c2s } else { &ch.s2c };
    if ar.flags & !proto::ADD_RING_FLAG_C2S != 0 {
        return rej(format!("unknown ring flags {:#x}", ar.flags));
    }
    let idx = ar.index as usize;
    if idx >= table.len() {
        return rej(format!(
            "invalid ring index {} (interface has {} queues)",
            ar.index,
            table.len()
        ));
    }
    if table[idx].is_some() {
        return rej(format!("ring {} added twice", ar.index));
    }
    let Some(region) = ch.regions.get(ar.region as usize) else {
        return rej(format!("ring region index {} out of range", ar.region));
    };
    proto::check_ring_placement(ar, region.len() as u64).map_err(End::Reject)?;
    let irq = EventFd::from_peer(fd).map_err(End::Reject)?;
    let p = PendingRing {
        region: ar.region as usize,
        off: ar.offset as usize,
        log2: ar.log2_ring_size,
        irq,
    };
    let table = if ar.is_c2s() {
        &mut ch.c2s
    } else {
        &mut ch.s2c
    };
    table[idx] = Some(p);
    Ok(())
}

/// Most bytes of a peer's regions [`prefault`] maps in per connection,
/// whatever the rings: what a client of 4 queue pairs of 16384-slot rings
/// of 2 KiB buffers uses (turnout-gen's memif ports: 1 pair of 8192 slots,
/// 32 MiB). A client could make us touch as much with its descriptors;
/// this only makes it happen at once.
pub const PREFAULT_MAX_B: usize = 256 << 20;

/// What a client that keeps its rings and one buffer of `buffer_b` per
/// slot in its regions (libmemif, DPDK, turnout-gen) has there, for rings
/// of `2^log2` slots: each ring's header and descriptors and its buffers,
/// at most [`PREFAULT_MAX_B`]. A client that announces more has the rest
/// faulted in where its descriptors point, frame by frame, as before.
pub fn prefault_budget(rings: impl Iterator<Item = u8>, buffer_b: usize) -> usize {
    rings
        .map(|log2| super::ring::ring_span(log2) + (1usize << log2) * buffer_b)
        .fold(0usize, usize::saturating_add)
        .min(PREFAULT_MAX_B)
}

/// Maps in the first `budget` bytes of the client's regions, in index
/// order, on the control thread before the connection is handed to the
/// workers: otherwise each buffer page costs a page fault in the worker
/// that first touches it through our mapping, a fault per frame or two
/// during the ring's first lap ([`Region::prefault`]). Best effort.
fn prefault(regions: &[Region], budget: usize) {
    let mut left = budget;
    for r in regions {
        if left == 0 {
            break;
        }
        let n = r.len().min(left);
        let _ = r.prefault(n);
        left -= n;
    }
}

/// Checks the announced rings and builds the connection (server side).
fn build_connection(ch: &mut Channel, sh: &Arc<Shared>) -> Result<Connection, End> {
    let rej = |s: String| End::Reject(s);
    if ch.regions.is_empty() {
        return Err(rej("connect without any region".into()));
    }
    let take = |v: &mut Vec<Option<PendingRing>>, dir: &str| -> Result<Vec<PendingRing>, End> {
        let n = v.iter().take_while(|r| r.is_some()).count();
        if n == 0 {
            return Err(rej(format!("connect without any {dir} ring")));
        }
        if v[n..].iter().any(|r| r.is_some()) {
            return Err(rej(format!("{dir} ring indexes are not contiguous from 0")));
        }
        Ok(v.drain(..n).flatten().collect())
    };
    let c2s = take(&mut ch.c2s, "client-to-server")?;
    let s2c = take(&mut ch.s2c, "server-to-client")?;
    let budget = prefault_budget(
        c2s.iter().chain(&s2c).map(|r| r.log2),
        sh.core.cfg.buffer_size as usize,
    );
    // Two rings on the same header would let the peer drive both.
    let mut spans: Vec<(usize, usize, usize)> = c2s
        .iter()
        .chain(&s2c)
        .map(|r| (r.region, r.off, r.off + super::ring::ring_span(r.log2)))
        .collect();
    spans.sort();
    if spans
        .windows(2)
        .any(|w| w[0].0 == w[1].0 && w[1].1 < w[0].2)
    {
        return Err(rej("rings overlap".into()));
    }
    let mk = |p: PendingRing, regions: &[Region], c2s: bool| -> Result<Ring, End> {
        let region = &regions[p.region];
        if region.load_u32(p.off) != COOKIE {
            return Err(rej(format!(
                "ring at region {} offset {} has a bad cookie",
                p.region, p.off
            )));
        }
        // Fresh indexes; our receive rings start with interrupts enabled
        // (a queue that wants to poll masks them at its first burst).
        reset_ring(
            region,
            p.off,
            if c2s {
                0
            } else {
                region.load_u16(p.off + proto::RING_FLAGS_OFF, Ordering::Relaxed)
            },
        );
        let size = 1u32 << p.log2;
        Ok(Ring {
            region: p.region,
            off: p.off,
            size,
            mask: (size - 1) as u16,
            irq: p.irq,
            buf_region: 0,
            buf_base: 0,
        })
    };
    let mut rx = Vec::new();
    for p in c2s {
        rx.push(mk(p, &ch.regions, true)?);
    }
    let mut tx = Vec::new();
    for p in s2c {
        tx.push(mk(p, &ch.regions, false)?);
    }
    prefault(&ch.regions, budget);
    let regions = std::mem::take(&mut ch.regions);
    let gen = sh.next_gen();
    Connection::new(sh.core.clone(), gen, regions, rx, tx).map_err(End::Local)
}
