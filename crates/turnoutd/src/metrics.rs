//! The Prometheus text exposition (format 0.0.4) of the counters `stats`
//! returns (one type, [`crate::stats`], which declares each per-queue and
//! per-worker metric next to its field), served over plain HTTP/1.0 on an optional TCP listener (loopback
//! unless configured otherwise): `GET /metrics` (or `/`).
//!
//! One thread serves connections one at a time, each bounded by a short
//! timeout and an 8 KiB request head, so a stuck scraper cannot hold it.

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::bgthread::BgThread;
use crate::daemon::Daemon;
use crate::log::Level;
use crate::stats::{StatsResult, QUEUE_METRICS, WORKER_METRICS};

/// Longest request head read.
const MAX_HEAD_B: usize = 8 * 1024;
/// Time a client has to send its request and read the answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(2);

/// Escapes a label value.
fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

struct Family<'a> {
    out: &'a mut String,
}

impl Family<'_> {
    fn head(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {help}");
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }
    fn sample(&mut self, name: &str, labels: &[(&str, &str)], v: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, x)) in labels.iter().enumerate() {
                let _ = write!(
                    self.out,
                    "{}{k}=\"{}\"",
                    if i > 0 { "," } else { "" },
                    label(x)
                );
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {v}");
    }
}

/// Renders `stats` as Prometheus text.
pub fn render(s: &StatsResult) -> String {
    let mut out = String::with_capacity(4096);
    let mut f = Family { out: &mut out };

    f.head(
        "turnout_port_up",
        "gauge",
        "Whether the port's peer is attached (1) or not (0).",
    );
    for p in &s.ports {
        f.sample(
            "turnout_port_up",
            &[("port", &p.name), ("kind", &p.kind)],
            u8::from(p.link_up),
        );
    }
    for m in &QUEUE_METRICS {
        f.head(m.name, m.kind, m.help);
        for p in &s.ports {
            for q in &p.queues {
                let qs = q.queue.to_string();
                f.sample(m.name, &[("port", &p.name), ("queue", &qs)], (m.get)(q));
            }
        }
    }
    f.head(
        "turnout_port_drops_total",
        "counter",
        "Frames (or flood copies) not delivered, by port and reason.",
    );
    for p in &s.ports {
        for (r, n) in &p.drops {
            f.sample(
                "turnout_port_drops_total",
                &[("port", &p.name), ("reason", r)],
                n,
            );
        }
    }
    f.head(
        "turnout_port_backend",
        "untyped",
        "Backend-specific counters of a port, by name.",
    );
    for p in &s.ports {
        for (k, n) in &p.backend {
            f.sample(
                "turnout_port_backend",
                &[("port", &p.name), ("counter", k)],
                n,
            );
        }
    }

    for m in &WORKER_METRICS {
        f.head(m.name, m.kind, m.help);
        for w in &s.workers {
            let id = w.worker.id.to_string();
            f.sample(m.name, &[("worker", &id)], (m.get)(w));
        }
    }
    f.head(
        "turnout_tsc_hz",
        "gauge",
        "Frequency of the cycle counter used for busy and idle cycles.",
    );
    f.sample("turnout_tsc_hz", &[], s.tsc_hz);
    f.head(
        "turnout_openflow_refused_total",
        "counter",
        "Flow-, group- and meter-mods the OpenFlow channel refused, by error.",
    );
    for (m, errors) in &s.openflow.refused {
        for (e, n) in errors {
            f.sample(
                "turnout_openflow_refused_total",
                &[("message", m), ("error", e)],
                n,
            );
        }
    }
    f.head("turnout_info", "gauge", "Version information (always 1).");
    f.sample(
        "turnout_info",
        &[
            ("version", env!("CARGO_PKG_VERSION")),
            ("api", &crate::api::API_VERSION.to_string()),
            ("git", crate::daemon::GIT),
        ],
        1,
    );
    out
}

/// The running metrics endpoint.
pub struct MetricsServer {
    addr: SocketAddr,
    thread: BgThread,
}

impl MetricsServer {
    /// Listens on `addr` and serves `daemon`'s counters.
    pub fn start(addr: SocketAddr, daemon: Arc<Daemon>) -> io::Result<MetricsServer> {
        let l = TcpListener::bind(addr)?;
        let addr = l.local_addr()?;
        l.set_nonblocking(true)?;
        let thread = BgThread::spawn("turnout-metrics", move |stop| {
            while !stop.load(Ordering::Acquire) {
                match crate::sys::poll_readable(l.as_raw_fd(), 200) {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(_) => {
                        std::thread::sleep(Duration::from_millis(200));
                        continue;
                    }
                }
                if let Ok((c, _)) = l.accept() {
                    if let Err(e) = serve(c, &daemon) {
                        crate::log!(Level::Debug, "metrics", "scrape failed", error = e);
                    }
                }
            }
        })?;
        Ok(MetricsServer { addr, thread })
    }

    /// The bound address (useful with port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.thread.halt();
    }
}

fn serve(mut c: TcpStream, daemon: &Daemon) -> io::Result<()> {
    c.set_nonblocking(false)?;
    c.set_read_timeout(Some(CLIENT_TIMEOUT))?;
    c.set_write_timeout(Some(CLIENT_TIMEOUT))?;
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && !head.windows(2).any(|w| w == b"\n\n") {
        if head.len() > MAX_HEAD_B || Instant::now() > deadline {
            return reply(
                &mut c,
                "431 Request Header Fields Too Large",
                "request head too large or too slow\n",
            );
        }
        match c.read(&mut chunk)? {
            0 => break,
            n => head.extend_from_slice(&chunk[..n]),
        }
    }
    let first = head.split(|&b| b == b'\n').next().unwrap_or(&[]);
    let first = String::from_utf8_lossy(first);
    let mut parts = first.split_whitespace();
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    if method != "GET" && method != "HEAD" {
        return reply(&mut c, "405 Method Not Allowed", "only GET\n");
    }
    let path = target.split('?').next().unwrap_or("");
    if path != "/metrics" && path != "/" {
        return reply(&mut c, "404 Not Found", "try /metrics\n");
    }
    let body = render(&daemon.stats());
    let hdr = format!(
        "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    c.write_all(hdr.as_bytes())?;
    if method == "GET" {
        c.write_all(body.as_bytes())?;
    }
    Ok(())
}

fn reply(c: &mut TcpStream, status: &str, body: &str) -> io::Result<()> {
    let r = format!(
        "HTTP/1.0 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    c.write_all(r.as_bytes())
}
