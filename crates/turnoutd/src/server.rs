//! The control socket: JSON-RPC 2.0 over a unix stream socket, one request
//! object per line, answered in order, several clients at once.
//!
//! Robustness: a line longer than [`api::MAX_LINE_B`] is answered with an
//! invalid-request error and the connection closed; a client that
//! disconnects mid-line, sends garbage or stops reading only loses its own
//! connection; at most [`MAX_CLIENTS`] connections are served at once (more
//! are told so and closed); a connection idle for [`IDLE_TIMEOUT`] is
//! closed. The data path never waits on any of this.
//!
//! Threading: one accept thread and one thread per open connection, all
//! checking a stop flag at least every [`TICK`]. A connection thread whose
//! client left waits up to [`THREAD_KEEP`] for the next connection before it
//! ends: a client that connects anew for every call (a sampler asking for
//! `stats` 20 times a second) does not make the daemon start and end a
//! thread each time, whose kernel teardown work (stack unmapping, RCU
//! grace periods) would run on any CPU, the workers' too.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::api::{self, code, ApiError};
use crate::bgthread::BgThread;
use crate::daemon::Daemon;
use crate::log::Level;

/// Most connections served at once.
pub const MAX_CLIENTS: usize = 32;
/// A connection with no complete request for this long is closed.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);
/// How often blocked threads look at the stop flag.
pub const TICK: Duration = Duration::from_millis(200);
/// How long a connection thread with no connection waits for the next.
pub const THREAD_KEEP: Duration = Duration::from_secs(30);

/// Connections handed by the accept thread to connection threads that
/// wait for one.
#[derive(Default)]
struct Handoff {
    state: Mutex<HandoffState>,
    ready: Condvar,
}

#[derive(Default)]
struct HandoffState {
    /// Connections handed over and not yet taken.
    streams: VecDeque<UnixStream>,
    /// Waiting threads no connection has been handed to yet: a hand-off
    /// counts one of them off as it queues its connection, so each queued
    /// connection has a thread that will take it.
    idle: usize,
}

impl Handoff {
    /// Queues `stream` for a waiting thread; gives it back if none waits.
    fn give(&self, stream: UnixStream) -> Option<UnixStream> {
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if st.idle == 0 {
            return Some(stream);
        }
        st.idle -= 1;
        st.streams.push_back(stream);
        drop(st);
        self.ready.notify_one();
        None
    }

    /// The next connection handed over, waiting up to [`THREAD_KEEP`];
    /// None when that passed or `stop` was set.
    fn take(&self, stop: &AtomicBool) -> Option<UnixStream> {
        let deadline = Instant::now() + THREAD_KEEP;
        let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        st.idle += 1;
        loop {
            // A queued connection first: its hand-off already counted this
            // thread (or another waiting one) off.
            if let Some(s) = st.streams.pop_front() {
                return Some(s);
            }
            if stop.load(Ordering::Acquire) || Instant::now() >= deadline {
                st.idle -= 1;
                return None;
            }
            st = self
                .ready
                .wait_timeout(st, TICK)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// The running control socket server.
pub struct ControlServer {
    path: PathBuf,
    thread: BgThread,
}

/// Binds a unix socket at `path` with permission bits `mode`, creating the
/// parent directory if needed ([`floor::listen_unix`]): it appears at
/// `path` already listening with its mode set (a client that waits for the
/// file and then connects is never refused: a loaded host's bench setup met
/// that when the file was bound in place); a stale socket file is replaced,
/// a live socket or a non-socket file there is an error.
pub fn bind_unix(path: &Path, mode: u32) -> io::Result<UnixListener> {
    if let Some(dir) = path.parent() {
        if !dir.as_os_str().is_empty() && !dir.exists() {
            std::fs::create_dir_all(dir)?;
        }
    }
    floor::listen_unix(path, libc::SOCK_STREAM, mode).map(UnixListener::from)
}

impl ControlServer {
    /// Starts serving `daemon` on `path`.
    pub fn start(path: &Path, mode: u32, daemon: Arc<Daemon>) -> io::Result<ControlServer> {
        let listener = bind_unix(path, mode)?;
        listener.set_nonblocking(true)?;
        let thread = BgThread::spawn("turnout-ctl", move |s| accept_loop(listener, daemon, s))?;
        Ok(ControlServer {
            path: path.to_path_buf(),
            thread,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Stops serving, closes every connection and removes the socket file.
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        if self.thread.halt() {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        self.halt();
    }
}

fn accept_loop(listener: UnixListener, daemon: Arc<Daemon>, stop: Arc<AtomicBool>) {
    let clients = Arc::new(AtomicUsize::new(0));
    let handoff = Arc::new(Handoff::default());
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Acquire) {
        threads.retain(|t| !t.is_finished());
        match crate::sys::poll_readable(listener.as_raw_fd(), TICK.as_millis() as i32) {
            Ok(true) => {}
            Ok(false) => continue,
            Err(e) => {
                crate::log!(
                    Level::Error,
                    "ctl",
                    "poll on control socket failed",
                    error = e
                );
                std::thread::sleep(TICK);
                continue;
            }
        }
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => {
                crate::log!(Level::Warn, "ctl", "accept failed", error = e);
                continue;
            }
        };
        if clients.load(Ordering::Acquire) >= MAX_CLIENTS {
            let _ = stream.set_nonblocking(false);
            let _ = stream.set_write_timeout(Some(TICK));
            let e = ApiError::new(
                code::REFUSED,
                format!("too many control connections (at most {MAX_CLIENTS})"),
            );
            let _ = (&stream).write_all(
                format!("{}\n", api::response_err(&serde_json::Value::Null, &e)).as_bytes(),
            );
            continue;
        }
        clients.fetch_add(1, Ordering::AcqRel);
        let Some(stream) = handoff.give(stream) else {
            continue;
        };
        let (d, s, c, h) = (
            daemon.clone(),
            stop.clone(),
            clients.clone(),
            handoff.clone(),
        );
        let spawned = std::thread::Builder::new()
            .name("turnout-ctl-c".into())
            .spawn(move || {
                let mut next = Some(stream);
                while let Some(stream) = next {
                    if let Err(e) = serve(stream, &d, &s) {
                        crate::log!(Level::Debug, "ctl", "connection closed", reason = e);
                    }
                    c.fetch_sub(1, Ordering::AcqRel);
                    next = h.take(&s);
                }
            });
        match spawned {
            Ok(t) => threads.push(t),
            Err(e) => {
                clients.fetch_sub(1, Ordering::AcqRel);
                crate::log!(
                    Level::Warn,
                    "ctl",
                    "cannot start a connection thread",
                    error = e
                );
            }
        }
    }
    for t in threads {
        let _ = t.join();
    }
}

/// Serves one connection until EOF, error, idle timeout or stop.
fn serve(mut stream: UnixStream, daemon: &Daemon, stop: &AtomicBool) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_read_timeout(Some(TICK))?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = [0u8; 16 * 1024];
    let mut last = Instant::now();
    loop {
        // Answer every complete line in the buffer.
        while let Some(nl) = buf.iter().position(|&b| b == b'\n') {
            let mut line = &buf[..nl];
            if line.last() == Some(&b'\r') {
                line = &line[..line.len() - 1];
            }
            if !line.iter().all(|b| b.is_ascii_whitespace()) {
                if let Some(mut resp) = daemon.handle_line(line) {
                    resp.push('\n');
                    stream.write_all(resp.as_bytes())?;
                }
            }
            buf.drain(..=nl);
            last = Instant::now();
        }
        if buf.len() > api::MAX_LINE_B {
            let e = ApiError::new(
                code::INVALID_REQUEST,
                format!("request longer than {} bytes", api::MAX_LINE_B),
            );
            stream.write_all(
                format!("{}\n", api::response_err(&serde_json::Value::Null, &e)).as_bytes(),
            )?;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "request too long",
            ));
        }
        if stop.load(Ordering::Acquire) {
            return Ok(());
        }
        if last.elapsed() > IDLE_TIMEOUT {
            return Err(io::Error::new(io::ErrorKind::TimedOut, "idle"));
        }
        match stream.read(&mut chunk) {
            Ok(0) => return Ok(()),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) => {}
            Err(e) => return Err(e),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn tmpdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("turnoutd-srv-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn a_connection_goes_to_a_waiting_thread_or_back_to_the_accept_loop() {
        let h = Arc::new(Handoff::default());
        let stop = Arc::new(AtomicBool::new(false));
        // Nobody waits: the accept loop keeps it (and starts a thread).
        let (a, _a_peer) = UnixStream::pair().unwrap();
        assert!(h.give(a).is_some());
        // A thread waiting: it gets the connection.
        let (h2, s2) = (h.clone(), stop.clone());
        let waiter = std::thread::spawn(move || h2.take(&s2));
        let deadline = Instant::now() + Duration::from_secs(30);
        while h.state.lock().unwrap().idle == 0 {
            assert!(Instant::now() < deadline, "the thread never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        let (b, b_peer) = UnixStream::pair().unwrap();
        let b_addr = b.as_raw_fd();
        assert!(h.give(b).is_none());
        let got = waiter.join().unwrap().expect("the handed connection");
        assert_eq!(got.as_raw_fd(), b_addr);
        drop(b_peer);
        let st = h.state.lock().unwrap();
        assert_eq!((st.idle, st.streams.len()), (0, 0));
        drop(st);
        // Stopping ends a waiting thread within a tick, counted off.
        let (h3, s3) = (h.clone(), stop.clone());
        let waiter = std::thread::spawn(move || h3.take(&s3));
        while h.state.lock().unwrap().idle == 0 {
            assert!(Instant::now() < deadline, "the thread never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Ordering::Release);
        assert!(waiter.join().unwrap().is_none());
        assert_eq!(h.state.lock().unwrap().idle, 0);
    }

    #[test]
    fn bind_creates_the_dir_sets_the_mode_and_replaces_only_stale_sockets() {
        let d = tmpdir("bind");
        let p = d.join("sub").join("ctl.sock");
        let l = bind_unix(&p, 0o600).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        // A live socket is not taken over.
        let e = bind_unix(&p, 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(
            e.to_string().ends_with("is in use by another process"),
            "{e}"
        );
        // A stale one (nobody listening) is replaced.
        drop(l);
        let l2 = bind_unix(&p, 0o660).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o660
        );
        drop(l2);
        // A regular file is never removed.
        let f = d.join("file");
        std::fs::write(&f, b"keep").unwrap();
        let e = bind_unix(&f, 0o600).unwrap_err();
        assert!(e.to_string().ends_with("exists and is not a socket"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"keep");
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn the_socket_appears_listening_and_leaves_no_temporary_name() {
        let d = tmpdir("bindtmp");
        let p = d.join("ctl.sock");
        let l = bind_unix(&p, 0o600).unwrap();
        // Connectable as soon as it is there, before any accept.
        let c = UnixStream::connect(&p).unwrap();
        let (mut a, _) = l.accept().unwrap();
        (&c).write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        a.read_exact(&mut b).unwrap();
        assert_eq!(&b, b"x");
        let names: Vec<_> = std::fs::read_dir(&d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(names, ["ctl.sock"]);
        // A path too long for a temporary name beside it is bound directly.
        let long = d.join("x".repeat(100 - d.as_os_str().len().min(90)));
        if long.as_os_str().len() < 108 {
            let l2 = bind_unix(&long, 0o600).unwrap();
            UnixStream::connect(&long).unwrap();
            drop(l2);
        }
        let _ = std::fs::remove_dir_all(&d);
    }
}
