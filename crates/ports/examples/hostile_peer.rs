//! A hostile peer for a running switch process: it attacks one memif
//! interface or one vhost-user port of, say, turnoutd, with every lie of
//! the hostile kits, and prints what the switch must have counted.
//!
//! ```text
//! hostile_peer memif SOCKET ID [ROUNDS]   # lying memif client on interface ID
//! hostile_peer vhost SOCKET [ROUNDS]      # lying vhost-user frontend (a hostile VM)
//! hostile_peer guard SOCKET...            # guests that shrink memory, block fds, stall
//! hostile_peer hold S1 S2 S3 S4           # all of it at once, held until killed
//! ```
//!
//! - memif: a client ([`MemifPort::client`]) writes each [`RingLie`] into
//!   its client-to-server ring (bad region, offset and length out of
//!   range, unknown flags, endless chains, head index jump, overwritten
//!   cookie), waits for the switch to disconnect it with the reason and
//!   reconnects for the next; then every control-message lie
//!   ([`CONTROL_LIES`]: bad sizes, types, versions, ids, regions, rings,
//!   fds) on raw connections, each answered with a disconnect.
//! - vhost: every lie of `tests/vhost_common/liar.rs` (memory tables,
//!   vring addresses, descriptor loops and chains outside guest memory,
//!   index jumps, kicks on bad rings, messages out of order or of the wrong
//!   size, disconnects mid-setup and mid-traffic), each on a fresh
//!   connection, waiting until the switch closes it (or, for our own
//!   hang-ups, a moment for it to notice).
//!
//! - guard: guests that turn what they share into a weapon, on
//!   the vhost-user ports at SOCKET...: memory truncated to zero, to the
//!   middle of a ring, under the receive buffers, after a remap (each
//!   must end in `disconnects_mem_fault`); a full blocking pipe as the
//!   call fd of each virtqueue (refused: `disconnects_protocol`), an
//!   eventfd made blocking and filled after the handover
//!   (`disconnects_notify_fd`), a full non-blocking one (`call_dropped`,
//!   the guest stays); messages cut at every byte boundary of a header
//!   and a body, and replies left unread (`disconnects_stall`, after the
//!   2 s deadline and not before), spread over all the sockets at once;
//! - hold: on four vhost-user ports at once, a message stopped after 8
//!   header bytes, a call eventfd made blocking and full, memory truncated
//!   to zero, replies left unread; prints `ready` and waits to be killed
//!   (the switch must still stop promptly on SIGTERM).
//!
//! The switch runs the data path itself, so lies that need traffic towards
//! the guest (a read-only receive buffer, the receive buffers and call fd
//! of the guard kinds) rely on the switch sending to this port (a bridge
//! floods unknown destinations to it).
//!
//! Output: one JSON document on stdout, `{"lies": [{"name", "ok",
//! "detail"}...], "expected": {counter: n}, "at_least": {counter: n}}`:
//! how each lie ended from the peer's side and, per backend counter of the
//! attacked port, the increase the switch must show (exactly, or at
//! least); in guard mode `"ports": {SOCKET: {"expected", "at_least"}}`
//! instead, per attacked port. Exit status 0 if every lie ended as it
//! must.
//!
//! `cargo build --release -p ports --example hostile_peer`; used by
//! `python/tests/turnoutd/test_hostile.py`.

use std::collections::BTreeMap;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fabric::Port;
use ports::memif::hostile::{self, Kit, RingLie, CONTROL_LIES, CONTROL_LIES_BEFORE_INIT};
use ports::memif::{ClientConfig, MemifConfig, MemifPort};

#[path = "../tests/vhost_common/liar.rs"]
mod liar;
use liar::{scenarios, DataPath, Frontend, Want};

/// The control deadline turnoutd promises (a stalled message or unread
/// replies end the connection after it).
const DEADLINE: Duration = Duration::from_secs(2);

/// One lie's outcome, seen from the peer.
struct Outcome {
    name: String,
    ok: bool,
    detail: String,
}

#[derive(Default)]
struct Report {
    lies: Vec<Outcome>,
    expected: BTreeMap<String, u64>,
    at_least: BTreeMap<String, u64>,
    /// Guard mode: per attacked socket, (expected, at_least).
    ports: BTreeMap<String, (Counts, Counts)>,
}

/// Counter increases by counter name.
type Counts = BTreeMap<String, u64>;

impl Report {
    fn add(&mut self, name: &str, res: Result<(), String>) {
        let (ok, detail) = match res {
            Ok(()) => (true, String::new()),
            Err(e) => (false, e),
        };
        if !ok {
            eprintln!("hostile_peer: {name}: {detail}");
        }
        self.lies.push(Outcome {
            name: name.to_string(),
            ok,
            detail,
        });
    }

    fn expect(&mut self, counter: &str, n: u64) {
        *self.expected.entry(counter.to_string()).or_default() += n;
    }

    fn at_least(&mut self, counter: &str, n: u64) {
        *self.at_least.entry(counter.to_string()).or_default() += n;
    }

    /// What the switch must count on the port at `socket` (guard mode).
    fn expect_on(&mut self, socket: &Path, counter: &str, n: u64, exactly: bool) {
        let p = self.ports.entry(socket.display().to_string()).or_default();
        let m = if exactly { &mut p.0 } else { &mut p.1 };
        *m.entry(counter.to_string()).or_default() += n;
    }

    fn print(&self) -> bool {
        let lies: Vec<_> = self
            .lies
            .iter()
            .map(|o| serde_json::json!({"name": o.name, "ok": o.ok, "detail": o.detail}))
            .collect();
        let ports: BTreeMap<_, _> = self
            .ports
            .iter()
            .map(|(k, (e, a))| (k.clone(), serde_json::json!({"expected": e, "at_least": a})))
            .collect();
        let doc = serde_json::json!({
            "lies": lies, "expected": self.expected, "at_least": self.at_least, "ports": ports,
        });
        println!("{doc}");
        self.lies.iter().all(|o| o.ok)
    }
}

fn wait_until(t: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < t {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    f()
}

fn memif(socket: &Path, id: u32, rounds: usize, rep: &mut Report) -> Result<(), String> {
    let client = MemifPort::client(MemifConfig::new("hostile", id), ClientConfig::new(socket))
        .map_err(|e| format!("memif client: {e}"))?;
    for round in 0..rounds {
        for l in RingLie::ALL {
            let name = format!("memif ring: {} (round {round})", l.what());
            let res = (|| {
                if !wait_until(Duration::from_secs(10), || client.link_up()) {
                    return Err(format!(
                        "never connected: {}",
                        client.status().last_disconnect
                    ));
                }
                let before = client.status().last_disconnect;
                let disconnects = client.counter("disconnects");
                hostile::lie(&client, l)?;
                let why = l.violation().reason();
                // The switch tells us why, then closes.
                if !wait_until(Duration::from_secs(5), || {
                    client.counter("disconnects") > disconnects
                        && client.status().last_disconnect.contains(why)
                }) {
                    return Err(format!(
                        "not disconnected for {why:?}: last disconnect {before:?} -> {:?}",
                        client.status().last_disconnect
                    ));
                }
                Ok(())
            })();
            rep.add(&name, res);
            rep.expect(l.violation().name(), 1);
            rep.expect("violations", 1);
        }
    }
    drop(client);
    // The interface is free again once the switch saw the hang-up.
    std::thread::sleep(Duration::from_millis(300));
    let kit = Kit::new(id).map_err(|e| format!("memif kit: {e}"))?;
    for round in 0..rounds {
        for lie in CONTROL_LIES {
            let name = format!("memif control: {} (round {round})", lie.0);
            rep.add(&name, hostile::run_control_lie(socket, &kit, lie));
        }
        rep.at_least(
            "ctrl_errors",
            (CONTROL_LIES.len() - CONTROL_LIES_BEFORE_INIT) as u64,
        );
    }
    Ok(())
}

/// turnoutd runs the data path: we only give it time.
struct Remote;

impl DataPath for Remote {
    fn spin(&mut self, t: Duration) {
        std::thread::sleep(t);
    }

    fn wait_running(&mut self) -> bool {
        std::thread::sleep(Duration::from_millis(300));
        true
    }

    fn push_to_guest(&mut self) {
        // The switch floods the honest traffic to this port too.
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn vhost(socket: &Path, rounds: usize, rep: &mut Report) {
    let scen = scenarios();
    for round in 0..rounds {
        for (what, act, want) in &scen {
            let name = format!("vhost: {what} (round {round})");
            let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let mut f = Frontend::connect(socket);
                act(&mut f, &mut Remote);
                let closed = match want {
                    Want::Hangup => true,
                    _ => f.closed_within(Duration::from_secs(5)),
                };
                // Our hang-up (or the end of a connection the switch did
                // not close): give the switch a moment to see it before
                // the next connection, which it would refuse meanwhile
                // (`rejected_frontends`: one frontend at a time).
                drop(f);
                std::thread::sleep(Duration::from_millis(
                    if closed && !matches!(want, Want::Hangup) {
                        50
                    } else {
                        300
                    },
                ));
                closed
            }));
            let res = match res {
                Ok(true) => Ok(()),
                Ok(false) => Err("the switch did not close the connection".to_string()),
                Err(_) => Err("the lie could not be told (see the panic above)".to_string()),
            };
            rep.add(&name, res);
            match want {
                Want::Protocol => rep.expect("disconnects_protocol", 1),
                Want::Lie(c) => {
                    rep.expect("disconnects_lie", 1);
                    rep.expect(c, 1);
                }
                Want::Hangup => rep.expect("disconnects_hangup", 1),
            }
        }
    }
}

/// A running guest on `socket`, or why not.
fn running(socket: &Path) -> Result<Frontend, String> {
    std::panic::catch_unwind(|| Frontend::running(socket, true))
        .map_err(|_| "the guest's set-up was refused (see the panic above)".to_string())?
        .ok_or_else(|| "the switch never wrote to the guest's receive ring".to_string())
}

/// Kicks (and `each`) until the switch closes the connection (10 s);
/// Err if it did not.
fn until_closed(f: &mut Frontend, mut each: impl FnMut(&mut Frontend)) -> Result<(), String> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        each(f);
        f.kick(1);
        if f.closed_within(Duration::from_millis(20)) {
            return Ok(());
        }
    }
    Err("the switch did not close the connection".into())
}

/// Runs one guard case on a fresh guest of `socket`.
fn guard_case(
    rep: &mut Report,
    socket: &Path,
    name: &str,
    act: impl FnOnce(Frontend) -> Result<(), String>,
) {
    let res = running(socket).and_then(act);
    rep.add(&format!("guard: {name}"), res);
    // The switch sees our hang-up before the next connection (it refuses
    // a second frontend meanwhile).
    std::thread::sleep(Duration::from_millis(300));
}

fn guard(sockets: &[PathBuf], rep: &mut Report) {
    let s0 = &sockets[0];
    // Memory that shrinks under the switch.
    for (what, len) in [
        ("memory truncated to zero", 0),
        (
            "memory truncated to the middle of a ring",
            liar::ring_gpa(1).1,
        ),
        ("memory truncated under the receive buffers", liar::RX_BUF),
    ] {
        guard_case(rep, s0, what, |mut f| {
            f.truncate(len);
            until_closed(&mut f, |f| {
                if len >= liar::RX_BUF {
                    f.refill_rx();
                }
            })
        });
        rep.expect_on(s0, "disconnects_mem_fault", 1, true);
    }
    guard_case(rep, s0, "memory truncated after a remap", |mut f| {
        f.remap();
        f.send_frames(16, 60, 0x66);
        std::thread::sleep(Duration::from_millis(50));
        f.truncate(0);
        until_closed(&mut f, |_| {})
    });
    rep.expect_on(s0, "disconnects_mem_fault", 1, true);
    // Call fds that block.
    for q in [0u64, 1] {
        guard_case(
            rep,
            s0,
            &format!("full blocking pipe as call fd {q}"),
            |mut f| {
                let (_r, w) = liar::full_blocking_pipe();
                let _ = f.send(liar::SET_VRING_CALL, &q.to_le_bytes(), &[w.as_raw_fd()]);
                until_closed(&mut f, |_| {})
            },
        );
        rep.expect_on(s0, "disconnects_protocol", 1, true);
        rep.expect_on(s0, "protocol_errors", 1, false);
        guard_case(
            rep,
            s0,
            &format!("call eventfd {q} made blocking and full"),
            |mut f| {
                let call = f.call_fd(q as usize);
                liar::fill(call);
                liar::set_nonblocking(call, false);
                f.send_frames(8, 60, 0x33);
                until_closed(&mut f, |_| {})
            },
        );
        rep.expect_on(s0, "disconnects_notify_fd", 1, true);
        guard_case(rep, s0, &format!("call eventfd {q} full"), |mut f| {
            liar::fill(f.call_fd(q as usize));
            for _ in 0..50 {
                f.send_frames(4, 60, 0x44);
                std::thread::sleep(Duration::from_millis(10));
            }
            if f.closed_within(Duration::from_millis(10)) {
                return Err("a full eventfd ended the connection".into());
            }
            Ok(())
        });
        rep.expect_on(s0, "call_dropped", 1, false);
        rep.expect_on(s0, "disconnects_hangup", 1, true);
    }
    // Messages that stop midway and replies left unread, spread over the
    // sockets, all at once.
    let mut cases: Vec<(String, Vec<u8>, bool)> = liar::stall_cuts();
    cases.push(("replies left unread".into(), Vec::new(), false));
    let per: Vec<Vec<(String, Vec<u8>, bool)>> = {
        let mut v = vec![Vec::new(); sockets.len()];
        for (i, c) in cases.into_iter().enumerate() {
            v[i % sockets.len()].push(c);
        }
        v
    };
    let threads: Vec<_> = sockets
        .iter()
        .cloned()
        .zip(per)
        .map(|(sock, cases)| {
            std::thread::spawn(move || {
                let mut out = Vec::new();
                for (what, piece, with_fd) in cases {
                    let res = running(&sock).and_then(|f| {
                        if piece.is_empty() {
                            liar::flood_unread(&f, 3000);
                        } else if !liar::send_cut(&f, &piece, with_fd) {
                            return Err("could not send".into());
                        }
                        let t0 = Instant::now();
                        if !f.hung_up_within(DEADLINE + Duration::from_secs(8)) {
                            return Err("not disconnected".into());
                        }
                        let took = t0.elapsed();
                        if took + Duration::from_millis(300) < DEADLINE {
                            return Err(format!(
                                "disconnected after {took:?}, before the deadline"
                            ));
                        }
                        Ok(())
                    });
                    std::thread::sleep(Duration::from_millis(300));
                    out.push((format!("guard: stall, {what}"), sock.clone(), res));
                }
                out
            })
        })
        .collect();
    for t in threads {
        for (name, sock, res) in t.join().unwrap() {
            rep.add(&name, res);
            rep.expect_on(&sock, "disconnects_stall", 1, true);
        }
    }
}

/// Everything at once on four ports, held until we are killed.
fn hold(sockets: &[PathBuf]) -> Result<(), String> {
    let mut guests = Vec::new();
    let f = running(&sockets[1])?;
    liar::fill(f.call_fd(0));
    liar::set_nonblocking(f.call_fd(0), false);
    guests.push(f);
    let f = running(&sockets[2])?;
    f.truncate(0);
    f.kick(1);
    guests.push(f);
    let f = running(&sockets[3])?;
    liar::flood_unread(&f, 3000);
    guests.push(f);
    let f = running(&sockets[0])?;
    let num = liar::message(liar::SET_VRING_NUM, &liar::state(1, 256));
    if !liar::send_cut(&f, &num[..8], false) {
        return Err("could not send".into());
    }
    guests.push(f);
    println!("ready");
    use std::io::Write;
    let _ = std::io::stdout().flush();
    loop {
        std::thread::sleep(Duration::from_secs(60));
    }
}

fn usage() -> ! {
    eprintln!(
        "usage: hostile_peer memif SOCKET ID [ROUNDS] | hostile_peer vhost SOCKET [ROUNDS] \
         | hostile_peer guard SOCKET... | hostile_peer hold S1 S2 S3 S4"
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |s: Option<&String>, dflt: usize| -> usize {
        s.map(|v| v.parse().unwrap_or_else(|_| usage()))
            .unwrap_or(dflt)
    };
    let mut rep = Report::default();
    match args.first().map(String::as_str) {
        Some("memif") if args.len() >= 3 => {
            let socket = PathBuf::from(&args[1]);
            let id = num(args.get(2), 0) as u32;
            if let Err(e) = memif(&socket, id, num(args.get(3), 1), &mut rep) {
                rep.add("memif setup", Err(e));
            }
        }
        Some("vhost") if args.len() >= 2 => {
            let socket = PathBuf::from(&args[1]);
            vhost(&socket, num(args.get(2), 1), &mut rep);
        }
        Some("guard") if args.len() >= 2 => {
            let sockets: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
            guard(&sockets, &mut rep);
        }
        Some("hold") if args.len() == 5 => {
            let sockets: Vec<PathBuf> = args[1..].iter().map(PathBuf::from).collect();
            if let Err(e) = hold(&sockets) {
                eprintln!("hostile_peer: hold: {e}");
                std::process::exit(1);
            }
        }
        _ => usage(),
    }
    let ok = rep.print();
    std::process::exit(if ok { 0 } else { 1 });
}
