//! A hostile peer for a running switch process: it attacks one memif
//! interface or one vhost-user port of, say, turnoutd, with every lie of
//! the hostile kits, and prints what the switch must have counted.
//!
//! ```text
//! hostile_peer memif SOCKET ID [ROUNDS]   # lying memif client on interface ID
//! hostile_peer vhost SOCKET [ROUNDS]      # lying vhost-user frontend (a hostile VM)
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
//! The switch runs the data path itself, so lies that need traffic towards
//! the guest (a read-only receive buffer) rely on the switch sending to
//! this port (a bridge floods unknown destinations to it).
//!
//! Output: one JSON document on stdout, `{"lies": [{"name", "ok",
//! "detail"}...], "expected": {counter: n}, "at_least": {counter: n}}`:
//! how each lie ended from the peer's side and, per backend counter of the
//! attacked port, the increase the switch must show (exactly, or at
//! least). Exit status 0 if every lie ended as it must.
//!
//! `cargo build --release -p ports --example hostile_peer`; used by
//! `tests/turnoutd/test_hostile.py`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use fabric::Port;
use ports::memif::hostile::{self, Kit, RingLie, CONTROL_LIES, CONTROL_LIES_BEFORE_INIT};
use ports::memif::{ClientConfig, MemifConfig, MemifPort};

#[path = "../tests/vhost_common/liar.rs"]
mod liar;
use liar::{scenarios, DataPath, Frontend, Want};

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
}

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

    fn print(&self) -> bool {
        let lies: Vec<_> = self
            .lies
            .iter()
            .map(|o| serde_json::json!({"name": o.name, "ok": o.ok, "detail": o.detail}))
            .collect();
        let doc = serde_json::json!({
            "lies": lies, "expected": self.expected, "at_least": self.at_least,
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

fn usage() -> ! {
    eprintln!("usage: hostile_peer memif SOCKET ID [ROUNDS] | hostile_peer vhost SOCKET [ROUNDS]");
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
        _ => usage(),
    }
    let ok = rep.print();
    std::process::exit(if ok { 0 } else { 1 });
}
