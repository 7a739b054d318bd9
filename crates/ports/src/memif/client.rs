//! The client (slave) role: connects to a server, allocates one sealed
//! memfd region holding every ring and buffer, announces them, and
//! reconnects (with fresh memory) whenever the connection ends.
//!
//! Region layout: C2S rings, then S2C rings (each a 128-byte header and
//! `2^log2` descriptors), then, 64-byte aligned, one buffer of
//! `buffer_size` bytes per slot of every ring, in ring order. Slot j of a
//! ring always uses that ring's buffer j.

// Safe code: what is `unsafe` of memif lives in sys.rs (and floor).
#![deny(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::proto::{
    self, AddRegion, AddRing, Desc, Disconnect, Init, Msg, COOKIE, MSG_SIZE, RING_COOKIE_OFF,
};
use super::ring::{offer_all, reset_ring, ring_span, Connection, Ring};
use super::server::End;
use super::sys::{self, EventFd, Region};
use super::{io_err, MemifError, Shared};

/// Client connection settings.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Server socket path.
    pub socket: PathBuf,
    /// Application name sent in `init`.
    pub app_name: String,
    /// Pause between connection attempts.
    pub retry: Duration,
    /// Longest wait for each server reply during the handshake.
    pub handshake_timeout: Duration,
}

impl ClientConfig {
    /// Defaults for a server at `socket`.
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        ClientConfig {
            socket: socket.into(),
            app_name: "turnout-gen".into(),
            retry: Duration::from_millis(200),
            handshake_timeout: Duration::from_secs(3),
        }
    }
}

/// The running control thread of a client port.
pub(crate) struct Handle {
    stop: Arc<AtomicBool>,
    wake: Arc<EventFd>,
    thread: JoinHandle<()>,
}

impl Handle {
    /// Stops the thread (it sends `disconnect` if connected) and waits.
    pub fn stop(self) {
        self.stop.store(true, Ordering::Release);
        self.wake.signal();
        let _ = self.thread.join();
    }
}

pub(crate) fn spawn(shared: Arc<Shared>, cc: ClientConfig) -> Result<Handle, MemifError> {
    let stop = Arc::new(AtomicBool::new(false));
    let wake = shared.core.wake.clone();
    let s2 = stop.clone();
    let thread = std::thread::Builder::new()
        .name(format!("memif-client-{}", shared.core.cfg.id))
        .spawn(move || run(shared, cc, s2))
        .map_err(io_err("spawn memif client thread"))?;
    Ok(Handle { stop, wake, thread })
}

fn run(shared: Arc<Shared>, cc: ClientConfig, stop: Arc<AtomicBool>) {
    let wake = shared.core.wake.clone();
    while !stop.load(Ordering::Acquire) {
        match sys::connect(&cc.socket) {
            Err(e) => {
                let msg = format!("connect to {}: {e}", cc.socket.display());
                shared.core.set_status(|s| s.last_disconnect = msg);
            }
            Ok(sock) => {
                let end = session(&shared, &cc, &stop, &sock);
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
                    let _ = sys::send_msg(sock.as_raw_fd(), &m.encode(), None);
                }
                if error {
                    shared
                        .core
                        .counters
                        .ctrl_errors
                        .fetch_add(1, Ordering::Relaxed);
                }
                shared.detach(&reason, hangup);
            }
        }
        if stop.load(Ordering::Acquire) {
            break;
        }
        let _ = sys::wait_readable(wake.fd(), cc.retry.as_millis() as i32);
        wake.drain_nowait();
        shared.sweep();
    }
}

/// Waits for the next message (or the deadline, or stop).
fn recv(sock: &OwnedFd, deadline: Instant, stop: &AtomicBool) -> Result<Msg, End> {
    let mut buf = [0u8; 2 * MSG_SIZE];
    loop {
        if stop.load(Ordering::Acquire) {
            return Err(End::Local("client shutting down".into()));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(End::Local("handshake timeout".into()));
        }
        let _ = sys::wait_readable(sock.as_raw_fd(), left.as_millis().min(100) as i32);
        match sys::recv_msg(sock.as_raw_fd(), &mut buf) {
            Ok(None) => continue,
            Err(_) => return Err(End::Hangup),
            Ok(Some(r)) => {
                if r.len == 0 {
                    return Err(End::Hangup);
                }
                if r.truncated || r.len != MSG_SIZE {
                    return Err(End::Reject(format!("invalid message size {}", r.len)));
                }
                if r.fd.is_some() {
                    return Err(End::Reject("unexpected file descriptor from server".into()));
                }
                return match Msg::decode(&buf[..r.len]) {
                    Ok(Msg::Disconnect(d)) => Err(End::Peer(d.reason)),
                    Ok(m) => Ok(m),
                    Err(e) => Err(End::Reject(e.to_string())),
                };
            }
        }
    }
}

fn send(sock: &OwnedFd, m: &Msg, fd: Option<i32>) -> Result<(), End> {
    sys::send_msg(sock.as_raw_fd(), &m.encode(), fd).map_err(|_| End::Hangup)
}

fn expect_ack(sock: &OwnedFd, cc: &ClientConfig, stop: &AtomicBool, what: &str) -> Result<(), End> {
    match recv(sock, Instant::now() + cc.handshake_timeout, stop)? {
        Msg::Ack => Ok(()),
        m => Err(End::Reject(format!(
            "expected ack to {what}, got {}",
            m.name()
        ))),
    }
}

fn session(shared: &Arc<Shared>, cc: &ClientConfig, stop: &AtomicBool, sock: &OwnedFd) -> End {
    match handshake(shared, cc, stop, sock) {
        Err(e) => e,
        Ok(()) => serve(shared, stop, sock),
    }
}

fn handshake(
    shared: &Arc<Shared>,
    cc: &ClientConfig,
    stop: &AtomicBool,
    sock: &OwnedFd,
) -> Result<(), End> {
    let cfg = &shared.core.cfg;
    let hello = match recv(sock, Instant::now() + cc.handshake_timeout, stop)? {
        Msg::Hello(h) => h,
        m => return Err(End::Reject(format!("expected hello, got {}", m.name()))),
    };
    if hello.min_version > proto::VERSION || hello.max_version < proto::VERSION {
        return Err(End::Reject("incompatible memif version".into()));
    }
    let q = cfg.queues as u32;
    let n_c2s = q.min(hello.max_c2s_ring as u32 + 1) as usize;
    let n_s2c = q.min(hello.max_s2c_ring as u32 + 1) as usize;
    let log2 = cfg.log2_ring_size.min(hello.max_log2_ring_size);
    if log2 < proto::MIN_LOG2_RING {
        return Err(End::Reject(format!(
            "server allows rings of 2^{log2} only",
            log2 = hello.max_log2_ring_size
        )));
    }
    let size = 1usize << log2;
    let bsize = cfg.buffer_size as usize;
    let span = ring_span(log2);
    let nrings = n_c2s + n_s2c;
    let buf0 = (nrings * span).next_multiple_of(64);
    let total = buf0 + nrings * size * bsize;
    if total > u32::MAX as usize {
        return Err(End::Local(format!(
            "region of {total} bytes exceeds 32-bit offsets"
        )));
    }
    let region = Region::create(&format!("memif-{}-region-0", cfg.name), total)
        .map_err(|e| End::Local(format!("create region: {e}")))?;
    // Every page now, not at the first frame through it (`Region::prefault`;
    // the server prefaults its own mapping). Best effort.
    let _ = region.prefault(total);

    // Rings: C2S first, then S2C; ring k's buffers follow buf0 in order.
    let mut rings = Vec::with_capacity(nrings);
    for k in 0..nrings {
        let off = k * span;
        region.store_u32(off + RING_COOKIE_OFF, COOKIE);
        reset_ring(&region, off, 0);
        let buf_base = buf0 + k * size * bsize;
        for j in 0..size {
            let d = Desc {
                flags: 0,
                region: 0,
                length: bsize as u32,
                offset: (buf_base + j * bsize) as u32,
                metadata: 0,
            };
            region.write16(off + proto::RING_HDR_B + j * proto::DESC_B, d.to_bytes());
        }
        let irq = EventFd::new().map_err(|e| End::Local(format!("eventfd: {e}")))?;
        rings.push(Ring {
            region: 0,
            off,
            size: size as u32,
            mask: (size - 1) as u16,
            irq,
            buf_region: 0,
            buf_base,
        });
    }

    let secret = cfg
        .secret
        .as_deref()
        .and_then(proto::secret_field)
        .unwrap_or([0; proto::SECRET_SZ]);
    send(
        sock,
        &Msg::Init(Init {
            version: proto::VERSION,
            id: cfg.id,
            mode: proto::MODE_ETHERNET,
            secret,
            name: cc.app_name.clone(),
        }),
        None,
    )?;
    expect_ack(sock, cc, stop, "init")?;
    send(
        sock,
        &Msg::AddRegion(AddRegion {
            index: 0,
            size: total as u64,
        }),
        region.raw_fd(),
    )?;
    expect_ack(sock, cc, stop, "add_region")?;
    for (k, r) in rings.iter().enumerate() {
        let c2s = k < n_c2s;
        let index = if c2s { k } else { k - n_c2s } as u16;
        let ar = AddRing {
            flags: if c2s { proto::ADD_RING_FLAG_C2S } else { 0 },
            index,
            region: 0,
            offset: r.off as u32,
            log2_ring_size: log2,
            private_hdr_size: 0,
        };
        send(sock, &Msg::AddRing(ar), Some(r.irq.fd()))?;
        expect_ack(sock, cc, stop, "add_ring")?;
    }
    send(sock, &Msg::Connect(cfg.name.clone()), None)?;
    let peer_if = match recv(sock, Instant::now() + cc.handshake_timeout, stop)? {
        Msg::Connected(n) => n,
        m => return Err(End::Reject(format!("expected connected, got {}", m.name()))),
    };

    // The server may have reset the indexes; offer every receive buffer.
    let tx: Vec<Ring> = rings.drain(..n_c2s).collect();
    let rx = rings;
    for r in &rx {
        region.store_u16(r.off + proto::RING_FLAGS_OFF, 0, Ordering::Release);
        offer_all(&region, r, bsize);
    }
    let gen = shared.next_gen();
    let (nrx, ntx) = (rx.len(), tx.len());
    let conn =
        Connection::new(shared.core.clone(), gen, vec![region], rx, tx).map_err(End::Local)?;
    shared.core.set_status(|s| {
        s.peer_app = hello.name.clone();
        s.peer_if = peer_if.clone();
        s.rings = (nrx, ntx, size as u32);
    });
    shared.attach(conn);
    Ok(())
}

/// Connected: watch the socket, violations and stop.
fn serve(shared: &Arc<Shared>, stop: &AtomicBool, sock: &OwnedFd) -> End {
    let mut buf = [0u8; 2 * MSG_SIZE];
    loop {
        if stop.load(Ordering::Acquire) {
            return End::Local("client shutting down".into());
        }
        if let Some(v) = shared.conn.load().as_ref().and_then(|c| c.violated()) {
            return End::Local(v.reason().into());
        }
        // A connection of an earlier session may still be held.
        shared.sweep();
        let _ = sys::wait_readable(sock.as_raw_fd(), 50);
        match sys::recv_msg(sock.as_raw_fd(), &mut buf) {
            Ok(None) => continue,
            Err(_) => return End::Hangup,
            Ok(Some(r)) => {
                if r.len == 0 {
                    return End::Hangup;
                }
                if r.len != MSG_SIZE || r.truncated {
                    return End::Reject(format!("invalid message size {}", r.len));
                }
                return match Msg::decode(&buf[..r.len]) {
                    Ok(Msg::Disconnect(d)) => End::Peer(d.reason),
                    Ok(m) => {
                        End::Reject(format!("unexpected {} message while connected", m.name()))
                    }
                    Err(e) => End::Reject(e.to_string()),
                };
            }
        }
    }
}
