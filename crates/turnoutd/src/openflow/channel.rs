//! The OpenFlow 1.3 channel: controllers (or `ovs-ofctl -O OpenFlow13`)
//! program the running logic's OpenFlow tables (the `flows` logic's,
//! reached through [`crate::Daemon::openflow_tables`]) over TCP or a unix
//! socket (docs/flows.md, "OpenFlow").
//!
//! Endpoints (`[switch] openflow = [...]`, none by default):
//! - `ptcp:PORT` / `ptcp:ADDR:PORT`: listen on TCP (`PORT` alone: 127.0.0.1);
//! - `punix:PATH`: listen on a unix socket;
//! - `tcp:HOST:PORT`: connect to a controller, reconnecting with a backoff
//!   of 1 s doubling to 30 s.
//!
//! Threading: one thread per listener or controller, one per accepted
//! connection (at most [`MAX_CONNS`] at once); every socket has read and
//! write timeouts, so a slow or hostile peer holds only its own thread,
//! and all threads look at the stop flag every [`TICK`]. Flow-mods go
//! through the logic's typed API ([`logic::flows::Flows::flow_mods`]):
//! the consecutive flow-mods already read (up to
//! [`logic::flows::ofp::MAX_FLOW_MODS`]) are one transaction and one
//! snapshot swap, applied before the next other message (a barrier sees
//! them), each with its own error: the workers never wait, and a bulk
//! load (`ovs-ofctl add-flows`, which sends a barrier after every
//! flow-mod: the barriers join the batch and are answered in order after
//! the swap) is not one swap per flow. A message that cannot be
//! framed (length below 8) closes the connection; any other bad message is
//! answered with the spec's `OFPT_ERROR` and the connection goes on.

use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use logic::flows::ofp::{of_port, port_id, MAX_FLOW_MODS};
use openflow::{
    brc, et, mp, port, t, FlowMod, FlowStatsRequest, Header, Message, MultipartRequest, OfpError,
};

use crate::daemon::Daemon;
use crate::log::Level;
use crate::openflow::async_msgs::{AsyncKind, ConnState, Hub, Registration, Writer};
use crate::openflow::fail::{FailMode, FailOpen};

/// Most connections accepted at once, over all listeners.
pub const MAX_CONNS: usize = 16;
/// How often blocked threads look at the stop flag.
pub const TICK: Duration = Duration::from_millis(200);
/// A silent peer is sent an echo request after this long...
pub const ECHO_AFTER: Duration = Duration::from_secs(15);
/// ... and dropped after this long without any message.
pub const DEAD_AFTER: Duration = Duration::from_secs(45);
/// A peer that has not sent its hello within this long is dropped: silent
/// connections would otherwise hold the [`MAX_CONNS`] slots for
/// [`DEAD_AFTER`] and lock `ovs-ofctl` out.
pub const HELLO_WITHIN: Duration = Duration::from_secs(5);
/// A peer that does not take our replies within this long is dropped.
pub const WRITE_TIMEOUT: Duration = Duration::from_secs(5);

/// A channel endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// Listen on TCP.
    PTcp(SocketAddr),
    /// Listen on a unix socket.
    PUnix(PathBuf),
    /// Connect to a controller at `host:port`.
    Tcp(String),
}

impl Endpoint {
    /// Parses `ptcp:[ADDR:]PORT`, `punix:PATH` or `tcp:HOST:PORT`.
    pub fn parse(s: &str) -> Result<Endpoint, String> {
        if let Some(r) = s.strip_prefix("ptcp:") {
            let a = if r.parse::<u16>().is_ok() {
                format!("127.0.0.1:{r}")
            } else {
                r.to_string()
            };
            return a
                .parse::<SocketAddr>()
                .map(Endpoint::PTcp)
                .map_err(|_| format!("{s:?}: ptcp: takes PORT or ADDR:PORT (numeric address)"));
        }
        if let Some(p) = s.strip_prefix("punix:") {
            if p.is_empty() {
                return Err(format!("{s:?}: punix: needs a path"));
            }
            return Ok(Endpoint::PUnix(PathBuf::from(p)));
        }
        if let Some(r) = s.strip_prefix("tcp:") {
            return match r.rsplit_once(':') {
                Some((h, p)) if !h.is_empty() && p.parse::<u16>().is_ok() => {
                    Ok(Endpoint::Tcp(r.to_string()))
                }
                _ => Err(format!("{s:?}: tcp: takes HOST:PORT")),
            };
        }
        Err(format!(
            "{s:?} is not ptcp:[ADDR:]PORT, punix:PATH or tcp:HOST:PORT"
        ))
    }
}

/// A byte stream the channel runs on.
trait Conn: Read + Write + Send {
    fn timeouts(&self, read: Duration, write: Duration) -> io::Result<()>;
    /// Who is at the other end, for logs.
    fn peer(&self) -> String;
    /// A second handle for writing (shared with the dispatcher).
    fn writer(&self) -> io::Result<Box<dyn Write + Send>>;
}

impl Conn for TcpStream {
    fn peer(&self) -> String {
        self.peer_addr()
            .map_or_else(|_| "tcp".into(), |a| format!("tcp:{a}"))
    }
    fn timeouts(&self, read: Duration, write: Duration) -> io::Result<()> {
        self.set_nodelay(true)?;
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
    }
    fn writer(&self) -> io::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.try_clone()?))
    }
}

impl Conn for UnixStream {
    fn peer(&self) -> String {
        "unix".into()
    }
    fn timeouts(&self, read: Duration, write: Duration) -> io::Result<()> {
        self.set_read_timeout(Some(read))?;
        self.set_write_timeout(Some(write))
    }
    fn writer(&self) -> io::Result<Box<dyn Write + Send>> {
        Ok(Box::new(self.try_clone()?))
    }
}

/// The running channel.
pub struct OfChannel {
    stop: Arc<AtomicBool>,
    /// Woken on stop (the dispatcher sleeps on it).
    hub: Arc<Hub>,
    threads: Vec<JoinHandle<()>>,
    unix_paths: Vec<PathBuf>,
    tcp_addrs: Vec<SocketAddr>,
}

impl OfChannel {
    /// Opens every endpoint (all or none) and starts serving `daemon`.
    pub fn start(
        endpoints: &[String],
        fail_mode: FailMode,
        daemon: Arc<Daemon>,
    ) -> io::Result<OfChannel> {
        let stop = Arc::new(AtomicBool::new(false));
        let fail = Arc::new(FailOpen::new(fail_mode));
        let conns = Arc::new(AtomicUsize::new(0));
        let hub = Arc::new(Hub::new());
        let mut ch = OfChannel {
            stop: stop.clone(),
            hub: hub.clone(),
            threads: Vec::new(),
            unix_paths: Vec::new(),
            tcp_addrs: Vec::new(),
        };
        for e in endpoints {
            let ep =
                Endpoint::parse(e).map_err(|m| io::Error::new(io::ErrorKind::InvalidInput, m))?;
            let (d, s, c, h) = (daemon.clone(), stop.clone(), conns.clone(), hub.clone());
            let name = format!("turnout-of:{e}");
            let t = match ep {
                Endpoint::PTcp(a) => {
                    let l = TcpListener::bind(a)?;
                    l.set_nonblocking(true)?;
                    ch.tcp_addrs.push(l.local_addr()?);
                    let what = e.clone();
                    let fd = l.as_raw_fd();
                    std::thread::Builder::new().name(name).spawn(move || {
                        accept_loop(&what, fd, || l.accept().map(|(s, _)| s), d, s, c, h)
                    })?
                }
                Endpoint::PUnix(p) => {
                    let l = crate::server::bind_unix(&p, 0o600)?;
                    l.set_nonblocking(true)?;
                    ch.unix_paths.push(p);
                    let what = e.clone();
                    let fd = l.as_raw_fd();
                    std::thread::Builder::new().name(name).spawn(move || {
                        accept_loop(&what, fd, || l.accept().map(|(s, _)| s), d, s, c, h)
                    })?
                }
                Endpoint::Tcp(hp) => {
                    let f = fail.clone();
                    std::thread::Builder::new()
                        .name(name)
                        .spawn(move || active_loop(&hp, d, s, h, f))?
                }
            };
            ch.threads.push(t);
        }
        if !endpoints.is_empty() {
            let (d, s) = (daemon.clone(), stop.clone());
            ch.threads.push(
                std::thread::Builder::new()
                    .name("turnout-of-async".into())
                    .spawn(move || crate::openflow::async_msgs::dispatch(d, hub, s))?,
            );
        }
        Ok(ch)
    }

    /// Local addresses of the TCP listeners (port 0 resolved).
    pub fn tcp_addrs(&self) -> &[SocketAddr] {
        &self.tcp_addrs
    }

    /// Stops every thread and removes the unix socket files.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        self.hub.changed();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        for p in self.unix_paths.drain(..) {
            let _ = std::fs::remove_file(p);
        }
    }
}

impl Drop for OfChannel {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Accepts connections on `listener` (non-blocking, `accept` takes one)
/// as soon as they arrive: waits for its readiness with `poll`, at most
/// [`TICK`] at a time to look at the stop flag. (It slept TICK / 4 when
/// there was none: each of the three connections `ovs-ofctl mod-flows`
/// opens waited up to 50 ms for its hello, about 100 ms per command.)
fn accept_loop<C: Conn + 'static>(
    what: &str,
    listener: RawFd,
    mut accept: impl FnMut() -> io::Result<C>,
    daemon: Arc<Daemon>,
    stop: Arc<AtomicBool>,
    conns: Arc<AtomicUsize>,
    hub: Arc<Hub>,
) {
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        threads.retain(|t| !t.is_finished());
        match crate::sys::poll_readable(listener, TICK.as_millis() as i32) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                crate::log!(
                    Level::Warn,
                    "openflow",
                    "poll on listener failed",
                    endpoint = what,
                    error = e
                );
                std::thread::sleep(TICK);
                continue;
            }
        }
        match accept() {
            Ok(c) => {
                if conns.fetch_add(1, Ordering::AcqRel) >= MAX_CONNS {
                    conns.fetch_sub(1, Ordering::AcqRel);
                    crate::log!(
                        Level::Warn,
                        "openflow",
                        "too many connections; refused",
                        endpoint = what
                    );
                    continue;
                }
                let (d, s, n, h) = (daemon.clone(), stop.clone(), conns.clone(), hub.clone());
                let what = what.to_string();
                let t = std::thread::Builder::new()
                    .name("turnout-of-conn".into())
                    .spawn(move || {
                        let why = Session::new(d, h).run(c, &s);
                        crate::log!(
                            Level::Info,
                            "openflow",
                            "connection ended",
                            endpoint = what,
                            reason = why
                        );
                        n.fetch_sub(1, Ordering::AcqRel);
                    });
                match t {
                    Ok(t) => threads.push(t),
                    Err(_) => {
                        conns.fetch_sub(1, Ordering::AcqRel);
                    }
                }
            }
            // Another thread's or a peer that left: wait for the next.
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                crate::log!(
                    Level::Warn,
                    "openflow",
                    "accept failed",
                    endpoint = what,
                    error = e
                );
                std::thread::sleep(TICK);
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
}

fn active_loop(
    hostport: &str,
    daemon: Arc<Daemon>,
    stop: Arc<AtomicBool>,
    hub: Arc<Hub>,
    fail: Arc<FailOpen>,
) {
    let mut backoff = Duration::from_secs(1);
    while !stop.load(Ordering::Acquire) {
        let started = Instant::now();
        let conn = hostport
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "cannot resolve"))
            .and_then(|a| TcpStream::connect_timeout(&a, Duration::from_secs(2)));
        match conn {
            Ok(c) => {
                crate::log!(
                    Level::Info,
                    "openflow",
                    "connected to controller",
                    controller = hostport
                );
                // Fail-standalone: the flow tables come back before the
                // controller's first message is read.
                fail.connected(&daemon);
                let why = Session::new(daemon.clone(), hub.clone()).run(c, &stop);
                fail.disconnected();
                crate::log!(
                    Level::Info,
                    "openflow",
                    "controller connection ended",
                    controller = hostport,
                    reason = why
                );
                if started.elapsed() > Duration::from_secs(10) {
                    backoff = Duration::from_secs(1);
                }
            }
            Err(e) => {
                crate::log!(
                    Level::Debug,
                    "openflow",
                    "cannot reach controller",
                    controller = hostport,
                    error = e
                );
            }
        }
        let until = Instant::now() + backoff;
        while Instant::now() < until && !stop.load(Ordering::Acquire) {
            fail.tick(&daemon);
            std::thread::sleep(TICK);
        }
        backoff = (backoff * 2).min(Duration::from_secs(30));
    }
}

/// One connection's state.
struct Session {
    daemon: Arc<Daemon>,
    /// Where this connection registers for packet-ins and port-status.
    hub: Arc<Hub>,
    hello: bool,
    xid: u32,
    /// Flow-removed notices: (logic instance, next notice to send).
    removed: Option<(u64, u64)>,
    /// Role and set-async configuration (shared with the dispatcher).
    conn: Arc<ConnState>,
    /// The peer, for the log lines of refusals.
    peer: String,
}

impl Session {
    fn new(daemon: Arc<Daemon>, hub: Arc<Hub>) -> Session {
        Session {
            daemon,
            hub,
            hello: false,
            xid: 1,
            removed: None,
            conn: Arc::default(),
            peer: String::new(),
        }
    }

    /// Serves `c` until the peer leaves, misbehaves or `stop`; the reason.
    fn run<C: Conn>(&mut self, mut c: C, stop: &AtomicBool) -> String {
        if let Err(e) = c.timeouts(TICK, WRITE_TIMEOUT) {
            return format!("socket setup: {e}");
        }
        self.peer = c.peer();
        // A new datapath id (`switch.set`) ends the session: the
        // controller reconnects and reads it in its features reply.
        let dpid_gen = self.daemon.openflow().generation();
        // Replies and the dispatcher's messages share one writer.
        let w: Writer = match c.writer() {
            Ok(w) => Arc::new(Mutex::new(w)),
            Err(e) => return format!("socket setup: {e}"),
        };
        let write = |b: &[u8]| w.lock().unwrap_or_else(|p| p.into_inner()).write_all(b);
        let mut registered: Option<Registration> = None;
        if let Err(e) = write(&openflow::hello(0)) {
            return format!("write: {e}");
        }
        let mut buf: Vec<u8> = Vec::with_capacity(1 << 16);
        let mut chunk = vec![0u8; 1 << 16];
        let mut last_rx = Instant::now();
        let opened = last_rx;
        let mut echo_sent = false;
        // Flows removed from now on are reported (after the hello).
        self.removed = self.with_flows(|f| f.notice_cursor());
        loop {
            if stop.load(Ordering::Acquire) {
                return "switch stopping".into();
            }
            if self.daemon.openflow().generation() != dpid_gen {
                return "datapath id changed".into();
            }
            if !self.hello && opened.elapsed() > HELLO_WITHIN {
                return format!("no hello within {} s", HELLO_WITHIN.as_secs());
            }
            if self.hello {
                if let Err(e) = self.send_flow_removed(&mut c) {
                    return format!("write: {e}");
                }
            }
            match c.read(&mut chunk) {
                Ok(0) => return "peer closed".into(),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    last_rx = Instant::now();
                    echo_sent = false;
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    let idle = last_rx.elapsed();
                    if idle > DEAD_AFTER {
                        return "peer silent (no echo reply)".into();
                    }
                    if idle > ECHO_AFTER && !echo_sent {
                        echo_sent = true;
                        self.xid = self.xid.wrapping_add(1);
                        if let Err(e) = write(&openflow::echo_request(self.xid)) {
                            return format!("write: {e}");
                        }
                    }
                    continue;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return format!("read: {e}"),
            }
            let mut off = 0;
            // Consecutive flow-mods read so far: one batch (one swap),
            // applied before any other message and at the end of the read;
            // barrier requests between them (ovs-ofctl add-flows sends one
            // after every flow-mod) join the batch, each answered after the
            // replies of the flow-mods before it (`barriers`: how many
            // flow-mods precede it, its xid).
            let mut mods: Vec<(&[u8], FlowMod)> = Vec::new();
            let mut barriers: Vec<(usize, u32)> = Vec::new();
            loop {
                let n = match openflow::frame_len(&buf[off..]) {
                    Ok(Some(n)) if buf.len() - off >= n => n,
                    Ok(_) => break,
                    Err(e) => {
                        let _ = write(&self.flush(&mods, &barriers));
                        let h = Header::peek(&buf[off..]).map_or(0, |h| h.xid);
                        let _ = write(&openflow::error(h, e.kind, e.code, &buf[off..]));
                        return "message shorter than its header: cannot frame".into();
                    }
                };
                let msg = &buf[off..off + n];
                off += n;
                // A slave's flow-mods go to handle(), which refuses them
                // (its role changes only in handle(), after a flush).
                let slave = self.conn.role() == openflow::role::SLAVE;
                let fm = match Header::peek(msg) {
                    Some(h) if self.hello && !slave && h.kind == openflow::t::FLOW_MOD => {
                        match openflow::decode(msg) {
                            Ok((_, Message::FlowMod(fm))) => Some(fm),
                            _ => None, // handle() answers with the error
                        }
                    }
                    _ => None,
                };
                let batched = fm.is_some();
                if let Some(fm) = fm {
                    mods.push((msg, fm));
                    if mods.len() < MAX_FLOW_MODS {
                        continue;
                    }
                } else if !mods.is_empty() && msg.len() == 8 {
                    // A well-formed barrier (header only, version 4) after
                    // flow-mods: answered in order at the flush.
                    if let Some(h) = Header::peek(msg) {
                        if h.kind == t::BARRIER_REQUEST && h.version == openflow::VERSION {
                            barriers.push((mods.len(), h.xid));
                            continue;
                        }
                    }
                }
                let r = self.flush(&mods, &barriers);
                if let Err(e) = write(&r) {
                    return format!("write: {e}");
                }
                mods.clear();
                barriers.clear();
                if batched {
                    continue;
                }
                let (replies, end) = self.handle(msg);
                self.daemon
                    .openflow()
                    .refused_replies(msg, &replies, &self.peer);
                for r in replies {
                    if let Err(e) = write(&r) {
                        return format!("write: {e}");
                    }
                }
                if let Some(why) = end {
                    return why;
                }
                if self.hello && registered.is_none() {
                    registered = Some(self.hub.register(w.clone(), self.conn.clone()));
                }
            }
            if let Err(e) = write(&self.flush(&mods, &barriers)) {
                return format!("write: {e}");
            }
            drop(mods);
            buf.drain(..off);
        }
    }

    /// Replies to one message, and a reason if the connection must end.
    fn handle(&mut self, b: &[u8]) -> (Vec<Vec<u8>>, Option<String>) {
        let xid = Header::peek(b).map_or(0, |h| h.xid);
        let err = |e: OfpError| vec![openflow::error(xid, e.kind, e.code, b)];
        let slave = self.conn.role() == openflow::role::SLAVE;
        let is_slave = || err(OfpError::new(et::BAD_REQUEST, brc::IS_SLAVE));
        // Port-mod and table-mod are not implemented, but a slave is told
        // first that it may not send them.
        if slave && Header::peek(b).is_some_and(|h| matches!(h.kind, t::PORT_MOD | t::TABLE_MOD)) {
            return (is_slave(), None);
        }
        if let Some(kind) = Header::peek(b)
            .map(|h| h.kind)
            .filter(|&k| self.hello && matches!(k, t::PORT_MOD | t::TABLE_MOD))
        {
            return (
                self.port_or_table_mod(kind, b).map(err).unwrap_or_default(),
                None,
            );
        }
        let (h, m) = match openflow::decode(b) {
            Ok(x) => x,
            Err(e) => {
                crate::log!(
                    Level::Debug,
                    "openflow",
                    "message refused",
                    error = e.name()
                );
                return (err(e), None);
            }
        };
        if !self.hello {
            if let Message::Hello(bitmap) = m {
                return match openflow::negotiate(h.version, bitmap) {
                    Ok(_) => {
                        self.hello = true;
                        (vec![], None)
                    }
                    Err(e) => {
                        // The spec asks for a readable reason as the data.
                        let mut v = openflow::error(xid, e.kind, e.code, &[]);
                        v.extend_from_slice(b"turnoutd speaks OpenFlow 1.3 (version 4) only");
                        let n = v.len() as u16;
                        v[2..4].copy_from_slice(&n.to_be_bytes());
                        (
                            vec![v],
                            Some("version negotiation failed: the peer has no OpenFlow 1.3".into()),
                        )
                    }
                };
            }
            // Tolerated: a peer that skips the hello speaks version 4 (checked above).
            self.hello = true;
        }
        let replies = match m {
            // A slave controller may read, not change (OpenFlow 1.3, 6.3.5).
            Message::FlowMod(_)
            | Message::GroupMod(_)
            | Message::PacketOut(_)
            | Message::MeterMod(_)
                if slave =>
            {
                is_slave()
            }
            Message::RoleRequest {
                role,
                generation_id,
            } => match self.hub.role_request(&self.conn, role, generation_id) {
                Ok((r, g)) => vec![openflow::role_reply(xid, r, g)],
                Err(e) => err(e),
            },
            Message::GetAsyncRequest => vec![openflow::get_async_reply(xid, &self.conn.config())],
            Message::SetAsync(c) => {
                self.conn.set_config(c);
                self.hub.changed();
                vec![]
            }
            Message::Hello(_) => vec![],
            Message::Error { kind, code, .. } => {
                let e = OfpError::new(kind, code);
                crate::log!(
                    Level::Info,
                    "openflow",
                    "peer sent an error",
                    error = e.name()
                );
                vec![]
            }
            Message::EchoRequest(d) => vec![openflow::echo_reply(xid, &d)],
            Message::EchoReply(_) => vec![],
            Message::FeaturesRequest => vec![openflow::features_reply(
                xid,
                self.dpid(),
                0,
                255,
                openflow::cap::FLOW_STATS
                    | openflow::cap::TABLE_STATS
                    | openflow::cap::PORT_STATS
                    | openflow::cap::GROUP_STATS,
            )],
            Message::GetConfigRequest => {
                let (flags, miss_send_len) = self.hub.switch_config();
                vec![openflow::get_config_reply(xid, flags, miss_send_len)]
            }
            // A slave has read-only access to the switch (OpenFlow 1.3,
            // 6.3.5); the configuration is the switch's (below). OVS
            // refuses it too.
            Message::SetConfig { .. } if slave => is_slave(),
            // Fragments: turnoutd matches the first fragment's L4 ports
            // and none of later ones, whatever the flags (docs/flows.md);
            // OFPC_FRAG_NORMAL (0) and OVS's nx-match (3) say so, DROP (1)
            // and REASM (2), which it does not do, are refused.
            Message::SetConfig { flags, .. } if matches!(flags & 3, 1 | 2) || flags & !3 != 0 => {
                err(OfpError::new(
                    et::SWITCH_CONFIG_FAILED,
                    openflow::scfc::BAD_FLAGS,
                ))
            }
            // One configuration for the switch, not per connection: what
            // one controller sets, another's get-config reads.
            Message::SetConfig {
                flags,
                miss_send_len,
            } => {
                self.hub.set_switch_config(flags, miss_send_len);
                vec![]
            }
            Message::FlowMod(fm) => self.flow_mods(&[(b, fm)]).into_iter().flatten().collect(),
            Message::Multipart { flags, req } => {
                if flags & mp::MORE != 0 {
                    return (
                        err(OfpError::new(et::BAD_REQUEST, brc::BAD_MULTIPART)),
                        None,
                    );
                }
                match self.multipart(xid, req) {
                    Ok(v) => v,
                    Err(e) => err(e),
                }
            }
            Message::GroupMod(g) => match self.with_flows(|f| f.group_mod(&g)) {
                Some(Ok(())) => vec![],
                Some(Err(e)) => err(e),
                None => err(OfpError::new(et::GROUP_MOD_FAILED, openflow::gmfc::EPERM)),
            },
            Message::MeterMod(m) => match self.with_flows(|f| f.meter_mod(&m)) {
                Some(Ok(())) => vec![],
                Some(Err(e)) => err(e),
                None => err(OfpError::new(et::METER_MOD_FAILED, openflow::mmfc::UNKNOWN)),
            },
            Message::BarrierRequest => vec![openflow::barrier_reply(xid)],
            Message::PacketOut(po) => {
                match crate::openflow::async_msgs::packet_out(&self.daemon, &po) {
                    Ok(()) => vec![],
                    Err(e) => err(e),
                }
            }
        };
        (replies, None)
    }

    /// The error for a port-mod or table-mod (`kind`), which turnoutd does
    /// not carry out but answers with the spec's class rather than "bad
    /// type": a port-mod of a port that does not exist `OFPPMFC_BAD_PORT`,
    /// of one that does `OFPPMFC_EPERM` (turnoutd does not change port
    /// configuration over OpenFlow); a table-mod of a table outside 0..254
    /// (and not `OFPTT_ALL`) `OFPTMFC_BAD_TABLE`, any config bit
    /// `OFPTMFC_BAD_CONFIG` (OpenFlow 1.3 defines none; 0 is accepted as
    /// the no-op it is).
    fn port_or_table_mod(&self, kind: u8, b: &[u8]) -> Option<OfpError> {
        let u32_at = |at: usize| u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        if kind == t::PORT_MOD {
            if b.len() != 40 {
                return Some(OfpError::new(et::BAD_REQUEST, brc::BAD_LEN));
            }
            let exists = port_id(u32_at(8))
                .is_some_and(|id| self.daemon.switch().port_stats().iter().any(|s| s.id == id));
            let code = if exists {
                openflow::pmfc::EPERM
            } else {
                openflow::pmfc::BAD_PORT
            };
            return Some(OfpError::new(et::PORT_MOD_FAILED, code));
        }
        if b.len() != 16 {
            return Some(OfpError::new(et::BAD_REQUEST, brc::BAD_LEN));
        }
        let table = b[8];
        if table > logic::flows::MAX_TABLE && table != 0xff {
            return Some(OfpError::new(
                et::TABLE_MOD_FAILED,
                openflow::tmfc::BAD_TABLE,
            ));
        }
        if u32_at(12) != 0 {
            return Some(OfpError::new(
                et::TABLE_MOD_FAILED,
                openflow::tmfc::BAD_CONFIG,
            ));
        }
        None
    }

    /// Runs flow-mods (each with its message) as one transaction and one
    /// swap ([`logic::flows::Flows::flow_mods`]); per flow-mod, the error reply if it was
    /// refused, with its own xid (None: applied).
    fn flow_mods(&self, batch: &[(&[u8], FlowMod)]) -> Vec<Option<Vec<u8>>> {
        if batch.is_empty() {
            return Vec::new();
        }
        let refs: Vec<&FlowMod> = batch.iter().map(|(_, m)| m).collect();
        let res = self.with_flows(|f| f.flow_mods(&refs));
        batch
            .iter()
            .enumerate()
            .map(|(i, (b, _))| {
                let e = match &res {
                    Some(r) => *r.get(i)?.as_ref().err()?,
                    None => OfpError::new(et::FLOW_MOD_FAILED, 4), // OFPFMFC_EPERM
                };
                let xid = Header::peek(b).map_or(0, |h| h.xid);
                Some(openflow::error(xid, e.kind, e.code, b))
            })
            .collect()
    }

    /// Runs `mods` as one transaction ([`Session::flow_mods`]) and returns
    /// the replies in the order processing one message at a time would
    /// send them: each refused flow-mod's error, and each barrier of
    /// `barriers` (flow-mods before it, xid) answered after the errors of
    /// the flow-mods before it. The barrier replies are written after the
    /// swap: everything before each barrier is in effect when it is read.
    /// All in one buffer, one write (ovs-ofctl add-flows: a barrier reply
    /// per flow).
    fn flush(&self, mods: &[(&[u8], FlowMod)], barriers: &[(usize, u32)]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut b = barriers.iter().peekable();
        for (i, e) in self.flow_mods(mods).into_iter().enumerate() {
            while let Some(&(_, xid)) = b.next_if(|&&(at, _)| at <= i) {
                out.extend_from_slice(&openflow::barrier_reply(xid));
            }
            if let Some(e) = e {
                self.daemon.openflow().refused_replies(
                    mods[i].0,
                    std::slice::from_ref(&e),
                    &self.peer,
                );
                out.extend_from_slice(&e);
            }
        }
        for &(_, xid) in b {
            out.extend_from_slice(&openflow::barrier_reply(xid));
        }
        out
    }

    /// Sends `OFPT_FLOW_REMOVED` for the flows removed with
    /// `OFPFF_SEND_FLOW_REM` since the last call (a logic swapped in
    /// starts a new cursor).
    fn send_flow_removed<C: Conn>(&mut self, c: &mut C) -> io::Result<()> {
        let prev = self.removed;
        let got = self.with_flows(|f| {
            let (inst, next) = f.notice_cursor();
            match prev {
                Some((i, cur)) if i == inst => {
                    let (v, next) = f.flow_removed_since(cur);
                    (inst, next, v)
                }
                _ => (inst, next, Vec::new()),
            }
        });
        let Some((inst, next, v)) = got else {
            self.removed = None;
            return Ok(());
        };
        self.removed = Some((inst, next));
        for (reason, s) in v {
            if self.conn.wants(AsyncKind::FlowRemoved, reason) {
                c.write_all(&openflow::flow_removed(0, &s, reason))?;
            }
        }
        Ok(())
    }

    /// `f` on the running logic's OpenFlow tables; None if it has none.
    fn with_flows<R>(&self, f: impl FnOnce(&logic::flows::Flows) -> R) -> Option<R> {
        self.daemon.openflow_tables().map(|t| f(&t))
    }

    /// Datapath id: `[switch] datapath_id` or `switch.set`'s, else the
    /// low 48 bits of a hash of the control socket path (stable for one
    /// configuration, distinct between instances; crate::openflow::switch).
    fn dpid(&self) -> u64 {
        self.daemon.openflow().datapath_id()
    }

    fn multipart(&self, xid: u32, req: MultipartRequest) -> Result<Vec<Vec<u8>>, OfpError> {
        let reply = |ty, parts: &[Vec<u8>]| Ok(openflow::multipart_reply(xid, ty, parts));
        let empty_flows = |r: &FlowStatsRequest| -> Result<(), OfpError> {
            logic::flows::ofp::match_to_key(&r.matches).map(|_| ())
        };
        match req {
            MultipartRequest::Desc => reply(
                mp::DESC,
                &[openflow::desc_body(
                    "Turnout",
                    "turnoutd user-space software switch",
                    &format!(
                        "turnoutd {} (git {})",
                        env!("CARGO_PKG_VERSION"),
                        crate::daemon::GIT
                    ),
                    "None",
                    "turnoutd",
                )],
            ),
            MultipartRequest::Flow(r) => {
                let stats = self.with_flows(|f| f.flow_stats(&r)).unwrap_or_else(|| {
                    empty_flows(&r)?;
                    Ok(vec![])
                })?;
                let parts: Vec<Vec<u8>> = stats.iter().map(openflow::flow_stats_entry).collect();
                reply(mp::FLOW, &parts)
            }
            MultipartRequest::Aggregate(r) => {
                let (p, b, n) = self
                    .with_flows(|f| f.aggregate_stats(&r))
                    .unwrap_or_else(|| empty_flows(&r).map(|_| (0, 0, 0)))?;
                reply(mp::AGGREGATE, &[openflow::aggregate_body(p, b, n)])
            }
            MultipartRequest::Table => {
                let t = self.with_flows(|f| f.table_stats()).unwrap_or_default();
                let parts: Vec<Vec<u8>> = t
                    .iter()
                    .map(|&(id, n, l, m)| openflow::table_stats_entry(id, n, l, m))
                    .collect();
                reply(mp::TABLE, &parts)
            }
            MultipartRequest::GroupDesc => {
                let parts: Vec<Vec<u8>> = self
                    .with_flows(|f| f.group_desc())
                    .unwrap_or_default()
                    .iter()
                    .map(|(kind, id, b)| openflow::group_desc_entry(*kind, *id, b))
                    .collect();
                reply(mp::GROUP_DESC, &parts)
            }
            MultipartRequest::Group(id) => {
                let stats = self
                    .with_flows(|f| f.group_stats(id))
                    .unwrap_or(Ok(vec![]))?;
                let parts: Vec<Vec<u8>> = stats.iter().map(openflow::group_stats_entry).collect();
                reply(mp::GROUP, &parts)
            }
            MultipartRequest::Meter(id) => {
                let parts: Vec<Vec<u8>> = self
                    .with_flows(|f| f.meter_stats(id))
                    .unwrap_or_default()
                    .iter()
                    .map(openflow::meter_stats_entry)
                    .collect();
                reply(mp::METER, &parts)
            }
            MultipartRequest::MeterConfig(id) => {
                let parts: Vec<Vec<u8>> = self
                    .with_flows(|f| f.meter_config(id))
                    .unwrap_or_default()
                    .iter()
                    .map(|(flags, id, bands)| openflow::meter_config_entry(*flags, *id, bands))
                    .collect();
                reply(mp::METER_CONFIG, &parts)
            }
            MultipartRequest::MeterFeatures => {
                let (max, types, caps, bands, colors) =
                    self.with_flows(|f| f.meter_features()).unwrap_or_default();
                reply(
                    mp::METER_FEATURES,
                    &[openflow::meter_features_body(
                        max, types, caps, bands, colors,
                    )],
                )
            }
            MultipartRequest::GroupFeatures => {
                use logic::flows::MAX_OF_GROUPS as M;
                let (all, sel, ind, ff) = (
                    openflow::gt::ALL,
                    openflow::gt::SELECT,
                    openflow::gt::INDIRECT,
                    openflow::gt::FF,
                );
                let acts = logic::flows::ofp::supported_actions()
                    .iter()
                    .filter(|&&a| a != openflow::at::GROUP)
                    .fold(0u32, |m, &a| m | 1 << a);
                reply(
                    mp::GROUP_FEATURES,
                    &[openflow::group_features_body(
                        (1 << all) | (1 << sel) | (1 << ind) | (1 << ff),
                        // OFPGFC_SELECT_WEIGHT | OFPGFC_SELECT_LIVENESS.
                        0b11,
                        [M as u32, M as u32, M as u32, M as u32],
                        [acts, acts, acts, acts],
                    )],
                )
            }
            MultipartRequest::PortStats(p) => {
                let want = match p {
                    port::ANY => None,
                    p => Some(port_id(p).ok_or(OfpError::new(et::BAD_REQUEST, brc::BAD_PORT))?),
                };
                let up = self.daemon.uptime();
                let parts: Vec<Vec<u8>> = self
                    .daemon
                    .switch()
                    .port_stats()
                    .iter()
                    .filter(|s| want.is_none_or(|w| w == s.id))
                    .map(|s| {
                        let drops: u64 = s.drops.iter().map(|(_, n)| n).sum();
                        openflow::port_stats_entry(&openflow::PortStats {
                            port_no: of_port(s.id),
                            rx_packets: s.rx_packets,
                            tx_packets: s.tx_packets,
                            rx_bytes: s.rx_bytes,
                            tx_bytes: s.tx_bytes,
                            rx_dropped: drops,
                            tx_dropped: 0,
                            duration_sec: up.as_secs() as u32,
                            duration_nsec: up.subsec_nanos(),
                        })
                    })
                    .collect();
                reply(mp::PORT_STATS, &parts)
            }
            MultipartRequest::PortDesc => {
                let parts: Vec<Vec<u8>> = self
                    .daemon
                    .switch()
                    .port_stats()
                    .iter()
                    .map(|s| {
                        openflow::port_entry(&openflow::PortDesc {
                            port_no: of_port(s.id),
                            hw_addr: [0; 6],
                            name: s.name.clone(),
                            config: 0,
                            // OFPPS_LINK_DOWN or OFPPS_LIVE.
                            state: if s.link_up { 4 } else { 1 },
                            curr_speed_kbps: 0,
                        })
                    })
                    .collect();
                reply(mp::PORT_DESC, &parts)
            }
            // Tables without properties (ovs-ofctl asks before a flow-mod).
            MultipartRequest::TableFeatures => {
                let (matches, set_fields) = logic::flows::ofp::supported_fields();
                let parts: Vec<Vec<u8>> = (0..=logic::flows::MAX_TABLE)
                    .map(|t| {
                        openflow::table_features_entry(&openflow::TableFeatures {
                            table_id: t,
                            name: String::new(),
                            max_entries: u32::MAX,
                            instructions: vec![
                                openflow::it::GOTO_TABLE,
                                openflow::it::WRITE_METADATA,
                                openflow::it::WRITE_ACTIONS,
                                openflow::it::APPLY_ACTIONS,
                                openflow::it::CLEAR_ACTIONS,
                                openflow::it::METER,
                            ],
                            next_tables: (t.saturating_add(1)..=logic::flows::MAX_TABLE)
                                .filter(|&n| n > t)
                                .collect(),
                            apply_actions: logic::flows::ofp::supported_actions().to_vec(),
                            // The action set takes the same actions.
                            write_actions: logic::flows::ofp::supported_actions().to_vec(),
                            matches: matches.to_vec(),
                            set_fields: set_fields.to_vec(),
                            write_set_fields: set_fields.to_vec(),
                        })
                    })
                    .collect();
                reply(mp::TABLE_FEATURES, &parts)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_parse() {
        assert_eq!(
            Endpoint::parse("ptcp:6653"),
            Ok(Endpoint::PTcp("127.0.0.1:6653".parse().unwrap()))
        );
        assert_eq!(
            Endpoint::parse("ptcp:0.0.0.0:6633"),
            Ok(Endpoint::PTcp("0.0.0.0:6633".parse().unwrap()))
        );
        assert_eq!(
            Endpoint::parse("punix:/run/turnout/of.sock"),
            Ok(Endpoint::PUnix("/run/turnout/of.sock".into()))
        );
        assert_eq!(
            Endpoint::parse("tcp:ctl.example:6653"),
            Ok(Endpoint::Tcp("ctl.example:6653".into()))
        );
        for bad in [
            "6653",
            "ptcp:",
            "ptcp:localhost:1",
            "punix:",
            "tcp:host",
            "tcp::1",
            "ssl:x:1",
        ] {
            assert!(Endpoint::parse(bad).is_err(), "{bad}");
        }
    }
}
