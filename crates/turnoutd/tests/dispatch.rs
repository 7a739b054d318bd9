//! The control API's dispatcher against a running switch with in-process
//! pipe ports: every method, invalid calls, and port removal and logic
//! replacement while peer threads keep sending, checked with counters and
//! per-flow sequence numbers.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fabric::{pipe, PipeConfig, PipePeer};
use serde_json::{json, Value};
use turnoutd::api::code;
use turnoutd::config::Config;
use turnoutd::logics::Builtin;
use turnoutd::Daemon;

fn daemon(extra: &str) -> Daemon {
    turnoutd::log::set_level(turnoutd::log::Level::Warn);
    let text = format!("[switch]\ncontrol_socket = \"/nonexistent/unused.sock\"\n{extra}\n[[workers]]\n[[workers]]\n");
    let cfg = Config::parse_str(&text).unwrap();
    Daemon::start(cfg, Arc::new(Builtin)).unwrap_or_else(|e| panic!("start: {e}"))
}

/// Sends one request line through the full JSON path.
fn rpc(d: &Daemon, method: &str, params: Value) -> Result<Value, (i32, String)> {
    let line = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}).to_string();
    let resp: Value =
        serde_json::from_str(&d.handle_line(line.as_bytes()).expect("a response")).unwrap();
    assert_eq!(resp["jsonrpc"], "2.0");
    assert_eq!(resp["id"], 1);
    if let Some(e) = resp.get("error") {
        return Err((
            e["code"].as_i64().unwrap() as i32,
            e["message"].as_str().unwrap().to_string(),
        ));
    }
    Ok(resp["result"].clone())
}

fn attach(d: &Daemon, name: &str) -> (u16, PipePeer) {
    let (port, peer) = pipe(
        name,
        PipeConfig {
            queues: 1,
            ring_slots: 1024,
            slot_b: 2048,
        },
    )
    .unwrap();
    let id = d
        .attach(
            name.to_string(),
            Arc::new(port),
            None,
            json!({"name": name, "kind": "pipe"}),
            None,
        )
        .unwrap();
    (id, peer)
}

fn mac(i: usize) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, 0x10 + i as u8]
}

/// A 64-byte frame from peer `src` to peer `dst` carrying `seq`.
fn frame(buf: &mut [u8], src: usize, dst: usize, seq: u64) -> usize {
    buf[..6].copy_from_slice(&mac(dst));
    buf[6..12].copy_from_slice(&mac(src));
    buf[12..14].copy_from_slice(&[0x88, 0xb5]); // local experimental ethertype
    buf[14..22].copy_from_slice(&seq.to_le_bytes());
    buf[22] = src as u8;
    buf[23..64].fill(0);
    64
}

#[derive(Default)]
struct Counts {
    sent: AtomicU64,
    got: AtomicU64,
    /// Frames whose sequence number was below the next expected one
    /// (duplicate or reordered).
    dup: AtomicU64,
    /// Sequence numbers skipped (lost).
    gap: AtomicU64,
}

/// A peer thread: sends to `to` while fewer than `window` of its frames are
/// unreceived (closed loop, so rings never overflow), receives everything
/// and checks sequence numbers per source.
fn peer_thread(
    mut peer: PipePeer,
    me: usize,
    to: Option<usize>,
    counts: Arc<Vec<Counts>>,
    stop: Arc<AtomicBool>,
    window: u64,
) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut expect = vec![0u64; counts.len()];
        let mut seq = 0u64;
        let mut idle_since: Option<Instant> = None;
        loop {
            let c = &counts;
            let n = peer.recv(0, 256, |f| {
                let s = u64::from_le_bytes(f[14..22].try_into().unwrap());
                let src = f[22] as usize;
                if s < expect[src] {
                    c[me].dup.fetch_add(1, Ordering::Relaxed);
                } else {
                    c[me].gap.fetch_add(s - expect[src], Ordering::Relaxed);
                    expect[src] = s + 1;
                }
            });
            c[me].got.fetch_add(n as u64, Ordering::Relaxed);
            let stopping = stop.load(Ordering::Acquire);
            let mut sent = 0;
            if let (Some(to), false) = (to, stopping) {
                let inflight =
                    c[me].sent.load(Ordering::Relaxed) - c[to].got.load(Ordering::Relaxed);
                let room = window.saturating_sub(inflight).min(32) as usize;
                if room > 0 {
                    sent = peer.send_with(0, room, |_, buf| {
                        let l = frame(buf, me, to, seq);
                        seq += 1;
                        l
                    });
                    c[me].sent.fetch_add(sent as u64, Ordering::Relaxed);
                }
            }
            if n == 0 && sent == 0 {
                if stopping {
                    // Drain for a while after the stop, then leave.
                    let t = idle_since.get_or_insert_with(Instant::now);
                    if t.elapsed() > Duration::from_millis(300) {
                        return;
                    }
                }
                std::thread::yield_now();
            } else {
                idle_since = None;
            }
        }
    })
}

fn port_stats(d: &Daemon, name: &str) -> Value {
    let s = rpc(d, "stats", Value::Null).unwrap();
    s["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .cloned()
        .unwrap_or(Value::Null)
}

fn total_drops(p: &Value) -> u64 {
    p["drops"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

fn wait_until(what: &str, secs: u64, f: impl FnMut() -> bool) {
    wait_until_or(what, secs, || {}, f)
}

/// Waits for `f`; on timeout runs `diag` and fails.
fn wait_until_or(what: &str, secs: u64, diag: impl FnOnce(), mut f: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(secs);
    while !f() {
        if Instant::now() > end {
            diag();
            panic!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn every_method_and_its_errors() {
    let d = daemon("[logic]\nname = \"bridge\"\naging_s = 60\n");
    let v = rpc(&d, "version", Value::Null).unwrap();
    assert_eq!(v["api"], 1);
    assert_eq!(v["version"], env!("CARGO_PKG_VERSION"));
    assert!(v["git"].as_str().is_some_and(|g| !g.is_empty()));

    let (a, mut pa) = attach(&d, "a");
    let (b, mut pb) = attach(&d, "b");
    assert_eq!((a, b), (0, 1));

    let l = rpc(&d, "port.list", Value::Null).unwrap();
    assert_eq!(l.as_array().unwrap().len(), 2);
    assert_eq!(l[0]["name"], "a");
    assert_eq!(l[0]["kind"], "pipe");
    assert_eq!(l[0]["queues"], 1);
    assert_eq!(l[0]["link_up"], true);
    assert_eq!(l[1]["id"], 1);
    assert!(l[0]["worker"].as_u64().unwrap() < 2);

    let c = rpc(&d, "config.show", Value::Null).unwrap();
    assert_eq!(c["logic"], json!({"name": "bridge", "aging_s": 60}));
    assert_eq!(c["switch"]["batch"], 256);
    assert_eq!(c["workers"].as_array().unwrap().len(), 2);
    assert_eq!(c["ports"][1], json!({"name": "b", "kind": "pipe"}));

    let s = rpc(&d, "logic.show", Value::Null).unwrap();
    assert_eq!(s["name"], "bridge");
    assert!(s["commands"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c[0] == "show"));

    // Traffic through the bridge shows up in the counters.
    let mut buf = [0u8; 64];
    let frames: Vec<Vec<u8>> = (0..10)
        .map(|i| {
            frame(&mut buf, 0, 1, i);
            buf.to_vec()
        })
        .collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
    assert_eq!(pa.send(0, &refs), 10);
    let mut got = 0;
    wait_until("10 frames at b", 5, || {
        got += pb.recv(0, 64, |_| {});
        got == 10
    });
    wait_until("counters", 5, || port_stats(&d, "b")["tx_packets"] == 10);
    let st = rpc(&d, "stats", Value::Null).unwrap();
    let pa_s = &st["ports"][0];
    assert_eq!(
        (
            pa_s["name"].as_str(),
            pa_s["rx_packets"].as_u64(),
            pa_s["rx_bytes"].as_u64()
        ),
        (Some("a"), Some(10), Some(640))
    );
    assert_eq!(pa_s["queues"][0]["rx_packets"], 10);
    assert_eq!(pa_s["drops"]["no_port"], 0);
    assert_eq!(
        pa_s["drops"].as_object().unwrap().len(),
        fabric::DropReason::COUNT
    );
    assert_eq!(st["ports"][1]["tx_bytes"], 640);
    let w: u64 = st["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["packets"].as_u64().unwrap())
        .sum();
    assert_eq!(w, 10);
    assert!(st["tsc_hz"].as_u64().unwrap() > 0);
    assert!(st["workers"][0]["tid"].as_i64().unwrap() > 0);

    // The bridge learnt a's MAC; logic commands take port names.
    let t = rpc(&d, "logic.command", json!({"cmd": "show"})).unwrap();
    assert!(t.to_string().contains("02:00:00:00:00:10"), "{t}");
    rpc(
        &d,
        "logic.command",
        json!({"cmd": "add", "args": {"mac": "02:00:00:00:00:99", "port": "b"}}),
    )
    .unwrap();
    let t = rpc(&d, "logic.command", json!({"cmd": "show"})).unwrap();
    assert!(t.to_string().contains("02:00:00:00:00:99"), "{t}");

    assert_eq!(rpc(&d, "stats.reset", Value::Null).unwrap(), json!({}));
    assert_eq!(port_stats(&d, "a")["rx_packets"], 0);

    // Invalid calls: each a clear error, nothing changed.
    let e = |r: Result<Value, (i32, String)>| r.unwrap_err();
    assert_eq!(
        e(rpc(&d, "port.remove", json!({"name": "zz"}))),
        (code::NOT_FOUND, "no port named \"zz\"".into())
    );
    assert_eq!(
        e(rpc(&d, "port.remove", json!({"name": 7}))).0,
        code::INVALID_PARAMS
    );
    assert_eq!(
        e(rpc(&d, "port.remove", json!(["a"]))).0,
        code::INVALID_PARAMS
    );
    assert_eq!(
        e(rpc(&d, "port.lst", Value::Null)).0,
        code::METHOD_NOT_FOUND
    );
    assert_eq!(
        e(rpc(
            &d,
            "port.add",
            json!({"name": "a", "kind": "tap", "iface": "t0"})
        )),
        (code::ALREADY_EXISTS, "a port named \"a\" exists".into())
    );
    assert_eq!(
        e(rpc(&d, "port.add", json!({"name": "c", "kind": "memfi"}))),
        (code::INVALID_PARAMS, "kind: unknown port kind \"memfi\" (expected one of memif, af_xdp (or afxdp), af_packet (or afpacket), tap, vhost_user (or vhost-user, vhost), vxlan, geneve)".into())
    );
    assert_eq!(
        e(rpc(
            &d,
            "port.add",
            json!({"name": "c", "kind": "af_packet", "iface": 3})
        ))
        .0,
        code::INVALID_PARAMS
    );
    assert_eq!(
        e(rpc(
            &d,
            "port.add",
            json!({"name": "c", "kind": "af_packet", "iface": "lo", "worker": 2})
        )),
        (
            code::INVALID_PARAMS,
            "worker: no worker 2 (2 configured, numbered from 0)".into()
        )
    );
    let (c, m) = e(rpc(
        &d,
        "port.add",
        json!({"name": "c", "kind": "af_packet", "iface": "nosuchif0"}),
    ));
    assert_eq!(c, code::BACKEND, "{m}");
    assert!(m.contains("nosuchif0"), "{m}");
    // A backend that opens: a vhost-user server socket in a private directory.
    let dir = std::env::temp_dir().join(format!("turnoutd-dispatch-{}", std::process::id()));
    let vsock = dir.join("vm0.sock");
    let r = rpc(
        &d,
        "port.add",
        json!({"name": "vm0", "kind": "vhost_user", "socket": vsock}),
    );
    assert_eq!(r.unwrap(), json!({"id": 2}));
    let l = rpc(&d, "port.list", Value::Null).unwrap();
    assert_eq!(
        (
            l[2]["name"].as_str(),
            l[2]["kind"].as_str(),
            l[2]["link_up"].as_bool()
        ),
        (Some("vm0"), Some("vhost_user"), Some(false))
    );
    assert!(vsock.exists());
    assert_eq!(
        e(rpc(
            &d,
            "port.add",
            json!({"name": "vm1", "kind": "vhost_user", "socket": vsock})
        )),
        (
            code::ALREADY_EXISTS,
            format!(
                "socket: vhost-user socket {} is already used by port \"vm0\"",
                vsock.display()
            )
        )
    );
    // tunnel.show answers only for vxlan / geneve ports.
    assert_eq!(
        e(rpc(&d, "tunnel.show", json!({"name": "vm0"}))),
        (
            code::NOT_FOUND,
            "no vxlan or geneve port named \"vm0\"".into()
        )
    );
    assert_eq!(
        e(rpc(&d, "tunnel.show", Value::Null)).0,
        code::INVALID_PARAMS
    );
    rpc(&d, "port.remove", json!({"name": "vm0"})).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    for kind in turnoutd::config::PORT_KINDS
        .iter()
        .filter(|k| !turnoutd::backends::available(k))
    {
        let p = match *kind {
            "memif" | "vhost_user" => {
                json!({"name": "c", "kind": kind, "socket": "/nonexistent/x.sock"})
            }
            _ => json!({"name": "c", "kind": kind, "iface": "x0"}),
        };
        let (c, m) = e(rpc(&d, "port.add", p));
        assert_eq!(
            (
                c,
                m.starts_with(&format!("port kind {kind} is not available in this build"))
            ),
            (code::BACKEND, true),
            "{m}"
        );
    }
    assert_eq!(
        e(rpc(&d, "logic.replace", json!({"name": "brige"}))),
        (
            code::INVALID_PARAMS,
            "unknown logic \"brige\" (known: patch, bridge, l4filter, demux, flows, plugin)".into()
        )
    );
    assert_eq!(
        e(rpc(&d, "logic.replace", json!({"aging_s": 3}))),
        (code::INVALID_PARAMS, "missing key \"name\"".into())
    );
    let (c, m) = e(rpc(
        &d,
        "logic.replace",
        json!({"name": "bridge", "aging_s": "long"}),
    ));
    assert_eq!(c, code::REFUSED, "{m}");
    assert!(m.contains("aging_s"), "{m}");
    assert_eq!(
        e(rpc(
            &d,
            "logic.replace",
            json!({"name": "patch", "pairs": [["a", "nope"]]})
        )),
        (
            code::REFUSED,
            "logic.pairs[0][1]: no port named \"nope\"".into()
        )
    );
    assert_eq!(
        e(rpc(
            &d,
            "logic.replace",
            json!({"name": "plugin", "path": "/nonexistent/libx.so"})
        ))
        .0,
        code::REFUSED
    );
    // The running logic stayed.
    assert_eq!(
        rpc(&d, "logic.show", Value::Null).unwrap()["name"],
        "bridge"
    );
    assert_eq!(
        rpc(&d, "config.show", Value::Null).unwrap()["logic"]["name"],
        "bridge"
    );
    let (c, m) = e(rpc(&d, "logic.command", json!({"cmd": "frobnicate"})));
    assert_eq!(c, code::INVALID_PARAMS);
    assert!(
        m.starts_with("logic bridge has no command \"frobnicate\" (commands: show"),
        "{m}"
    );
    let (c, m) = e(rpc(
        &d,
        "logic.command",
        json!({"cmd": "add", "args": {"mac": "nonsense", "port": 0}}),
    ));
    assert_eq!(c, code::REFUSED, "{m}");
    assert_eq!(
        e(rpc(
            &d,
            "logic.command",
            json!({"cmd": "add", "args": {"mac": "02:00:00:00:00:01", "port": "zz"}})
        ))
        .0,
        code::INVALID_PARAMS
    );
    assert_eq!(
        e(rpc(&d, "logic.command", json!({"args": {}}))).0,
        code::INVALID_PARAMS
    );
    assert_eq!(
        e(rpc(&d, "stats", json!({"port": "a"}))).0,
        code::INVALID_PARAMS
    );

    // Garbage and malformed requests.
    for (line, want) in [
        (&b"{not json"[..], code::PARSE_ERROR),
        (b"\xff\xfe", code::PARSE_ERROR),
        (b"42", code::INVALID_REQUEST),
        (br#"{"id":1,"method":"version"}"#, code::INVALID_REQUEST),
        (
            br#"{"jsonrpc":"2.0","id":1,"method":7}"#,
            code::INVALID_REQUEST,
        ),
    ] {
        let r: Value = serde_json::from_str(&d.handle_line(line).unwrap()).unwrap();
        assert_eq!(
            r["error"]["code"],
            want,
            "{}",
            String::from_utf8_lossy(line)
        );
    }
    // A notification is executed and not answered.
    assert!(d
        .handle_line(br#"{"jsonrpc":"2.0","method":"stats.reset"}"#)
        .is_none());

    // Replace with patch by port names, then traffic follows it.
    assert_eq!(
        rpc(
            &d,
            "logic.replace",
            json!({"name": "patch", "pairs": [["a", "b"]]})
        )
        .unwrap(),
        json!({"name": "patch"})
    );
    let s = rpc(&d, "logic.show", Value::Null).unwrap();
    assert_eq!(
        (s["name"].as_str(), &s["config"]),
        (
            Some("patch"),
            &json!({"name": "patch", "pairs": [["a", "b"]]})
        )
    );
    let t = rpc(&d, "logic.command", json!({"cmd": "show"})).unwrap();
    assert_eq!(
        t["pairs"],
        json!([{"from": 0, "to": 1}, {"from": 1, "to": 0}])
    );
    let (c, _) = e(rpc(
        &d,
        "logic.command",
        json!({"cmd": "set", "args": {"from": "a", "to": "a"}}),
    ));
    assert_eq!(c, code::REFUSED);

    // Remove and re-add.
    assert_eq!(
        rpc(&d, "port.remove", json!({"name": "b"})).unwrap(),
        json!({})
    );
    assert_eq!(
        rpc(&d, "port.list", Value::Null)
            .unwrap()
            .as_array()
            .unwrap()
            .len(),
        1
    );
    assert_eq!(
        e(rpc(&d, "port.remove", json!({"name": "b"}))).0,
        code::NOT_FOUND
    );
    assert!(port_stats(&d, "b").is_null());
    assert_eq!(
        rpc(&d, "config.show", Value::Null).unwrap()["ports"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (b2, _pb2) = attach(&d, "b");
    assert_eq!(b2, 1);
    d.shutdown();
}

#[test]
fn removing_a_port_under_traffic_leaves_the_others_alone() {
    let d = daemon("");
    let peers: Vec<PipePeer> = ["a", "b", "c", "d"]
        .iter()
        .map(|n| attach(&d, n).1)
        .collect();
    rpc(
        &d,
        "logic.replace",
        json!({"name": "patch", "pairs": [["a", "b"], ["c", "d"]]}),
    )
    .unwrap();
    let counts: Arc<Vec<Counts>> = Arc::new((0..4).map(|_| Counts::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let to = [1, 0, 3, 2];
    let threads: Vec<_> = peers
        .into_iter()
        .enumerate()
        .map(|(i, p)| peer_thread(p, i, Some(to[i]), counts.clone(), stop.clone(), 256))
        .collect();
    wait_until("traffic on both pairs", 10, || {
        counts[1].got.load(Ordering::Relaxed) > 5000 && counts[3].got.load(Ordering::Relaxed) > 5000
    });
    rpc(&d, "port.remove", json!({"name": "d"})).unwrap();
    let at_removal = counts[1].got.load(Ordering::Relaxed);
    wait_until("a→b keeps flowing", 10, || {
        counts[1].got.load(Ordering::Relaxed) > at_removal + 20_000
    });
    // and c's frames toward the removed port are dropped (on a loaded
    // machine c's thread may not have run while a→b carried 20,000 frames;
    // its window, whatever d had not received, then fills with them)
    wait_until("c's frames to the removed port dropped", 10, || {
        let pc = port_stats(&d, "c");
        pc["drops"]["no_port"].as_u64().unwrap_or(0)
            + pc["drops"]["no_destination"].as_u64().unwrap_or(0)
            > 0
    });
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    let c = &counts;
    for i in 0..4 {
        assert_eq!(
            c[i].dup.load(Ordering::Relaxed),
            0,
            "peer {i} got duplicates"
        );
    }
    // a <-> b: nothing lost at all.
    for (s, r) in [(0, 1), (1, 0)] {
        assert_eq!(
            c[s].sent.load(Ordering::Relaxed),
            c[r].got.load(Ordering::Relaxed),
            "{s}->{r}"
        );
        assert_eq!(c[r].gap.load(Ordering::Relaxed), 0);
    }
    let (pa, pb, pc) = (
        port_stats(&d, "a"),
        port_stats(&d, "b"),
        port_stats(&d, "c"),
    );
    assert_eq!(total_drops(&pa) + total_drops(&pb), 0, "{pa} {pb}");
    assert_eq!(
        pa["rx_packets"].as_u64(),
        Some(c[0].sent.load(Ordering::Relaxed))
    );
    assert_eq!(
        pb["tx_packets"].as_u64(),
        Some(c[0].sent.load(Ordering::Relaxed))
    );
    // c -> d: every frame c sent either reached d before the removal or was
    // dropped as no_port afterwards; the tail of the stream is the loss.
    let c_sent = c[2].sent.load(Ordering::Relaxed);
    let no_port = pc["drops"]["no_port"].as_u64().unwrap();
    assert_eq!(pc["rx_packets"].as_u64(), Some(c_sent));
    // (patch forgets the removed port, so they count as no_destination;
    // frames classified before it did count as no_port.)
    let gone = no_port + pc["drops"]["no_destination"].as_u64().unwrap();
    assert!(gone > 0);
    assert_eq!(c[3].got.load(Ordering::Relaxed) + gone, c_sent, "{pc}");
    assert_eq!(total_drops(&pc), gone);
    assert_eq!(c[3].gap.load(Ordering::Relaxed), 0);
    // d -> c: d's frames after the removal never entered the switch.
    assert!(c[2].got.load(Ordering::Relaxed) <= c[3].sent.load(Ordering::Relaxed));
    d.shutdown();
}

#[test]
fn replacing_the_logic_under_traffic_loses_nothing() {
    let d = daemon("");
    let peers: Vec<PipePeer> = ["a", "b"].iter().map(|n| attach(&d, n).1).collect();
    let counts: Arc<Vec<Counts>> = Arc::new((0..2).map(|_| Counts::default()).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = peers
        .into_iter()
        .enumerate()
        .map(|(i, p)| peer_thread(p, i, Some(1 - i), counts.clone(), stop.clone(), 512))
        .collect();
    wait_until("traffic", 10, || {
        counts[0].got.load(Ordering::Relaxed) > 2000
    });
    let logics = [
        json!({"name": "patch", "pairs": [["a", "b"]]}),
        json!({"name": "bridge", "table_size": 64}),
        json!({"name": "patch", "pairs": [[0, 1]]}),
        json!({"name": "bridge"}),
    ];
    let mut last = 0;
    for i in 0..24 {
        rpc(&d, "logic.replace", logics[i % logics.len()].clone()).unwrap();
        // Let some traffic through each logic.
        let dd = &d;
        let cc = &counts;
        wait_until_or(
            "traffic under each logic",
            10,
            || {
                eprintln!("{}", rpc(dd, "stats", Value::Null).unwrap());
                for (i, c) in cc.iter().enumerate() {
                    eprintln!(
                        "peer {i}: sent {} got {} gap {} dup {}",
                        c.sent.load(Ordering::Relaxed),
                        c.got.load(Ordering::Relaxed),
                        c.gap.load(Ordering::Relaxed),
                        c.dup.load(Ordering::Relaxed)
                    );
                }
            },
            || {
                let g =
                    counts[0].got.load(Ordering::Relaxed) + counts[1].got.load(Ordering::Relaxed);
                g > last + 1000
            },
        );
        last = counts[0].got.load(Ordering::Relaxed) + counts[1].got.load(Ordering::Relaxed);
    }
    stop.store(true, Ordering::Release);
    for t in threads {
        t.join().unwrap();
    }
    let c = &counts;
    assert!(c[0].sent.load(Ordering::Relaxed) + c[1].sent.load(Ordering::Relaxed) > 24_000);
    for (s, r) in [(0, 1), (1, 0)] {
        let sent = c[s].sent.load(Ordering::Relaxed);
        assert_eq!(sent, c[r].got.load(Ordering::Relaxed), "{s}->{r}");
        assert_eq!(
            (
                c[r].gap.load(Ordering::Relaxed),
                c[r].dup.load(Ordering::Relaxed)
            ),
            (0, 0)
        );
    }
    let (pa, pb) = (port_stats(&d, "a"), port_stats(&d, "b"));
    assert_eq!(total_drops(&pa) + total_drops(&pb), 0, "{pa} {pb}");
    assert_eq!(
        pa["rx_packets"].as_u64(),
        Some(c[0].sent.load(Ordering::Relaxed))
    );
    assert_eq!(pa["rx_packets"], pb["tx_packets"]);
    assert_eq!(pb["rx_packets"], pa["tx_packets"]);

    // A logic that drops by design: patch with no pair for b. Frames from b
    // are all counted as no_destination, a's still arrive.
    rpc(&d, "stats.reset", Value::Null).unwrap();
    rpc(
        &d,
        "logic.replace",
        json!({"name": "patch", "pairs": [["a", "b"]], "bidirectional": false}),
    )
    .unwrap();
    let (_, mut pc) = attach(&d, "c");
    let mut buf = [0u8; 64];
    frame(&mut buf, 2, 0, 0);
    let mut sent = 0;
    while sent < 3000 {
        let n = (3000 - sent).min(32);
        sent += pc.send(0, &vec![&buf[..]; n]);
        std::thread::sleep(Duration::from_micros(200));
    }
    wait_until("c's frames counted", 10, || {
        port_stats(&d, "c")["drops"]["no_destination"] == 3000
    });
    let p = port_stats(&d, "c");
    assert_eq!(
        (p["rx_packets"].as_u64(), total_drops(&p)),
        (Some(3000), 3000)
    );
    d.shutdown();
}

/// The control plane reaches a logic's OpenFlow tables only through what
/// the logic table built with the running logic (never by its name): none
/// for the other logics, the very instance the switch runs for `flows`,
/// none again once it is replaced; `trace` gets the switch's port ids
/// because the table says so (a flood comes back as outputs, not as
/// `"flood"`).
#[test]
fn openflow_tables_and_trace_ports_follow_the_running_logic() {
    let d = daemon("");
    let (a, _pa) = attach(&d, "a");
    let (b, _pb) = attach(&d, "b");
    let (c, _pc) = attach(&d, "c");
    assert!(d.openflow_tables().is_none(), "bridge");
    for params in [
        json!({"name": "patch", "pairs": [["a", "b"]]}),
        json!({"name": "l4filter", "rules": [{"proto": "udp", "port": 53, "to": "b"}]}),
        json!({"name": "demux", "default": "b"}),
        json!({"name": "bridge"}),
    ] {
        rpc(&d, "logic.replace", params.clone()).unwrap();
        assert!(d.openflow_tables().is_none(), "{params}");
        assert!(d.switch().punt().is_none(), "no punt queue: {params}");
        let (_, m) = rpc(&d, "logic.command", json!({"cmd": "trace", "args": {}})).unwrap_err();
        assert!(m.contains("has no command \"trace\""), "{m}");
    }
    rpc(
        &d,
        "logic.replace",
        json!({"name": "flows", "flows": ["priority=1,actions=flood"]}),
    )
    .unwrap();
    let t = d
        .openflow_tables()
        .expect("flows offers its OpenFlow tables");
    // Its packet-in queue is the running logic's punt queue, which the
    // OpenFlow agent takes from the switch.
    let q = d.switch().punt().expect("flows punts");
    assert!(std::sync::Arc::ptr_eq(
        &q,
        &fabric::Logic::punt(&*t).unwrap()
    ));
    drop(q);
    rpc(
        &d,
        "logic.command",
        json!({"cmd": "add", "args": {"flow": "priority=9,udp,actions=drop"}}),
    )
    .unwrap();
    let dump = fabric::Logic::command(&*t, "dump", &Value::Null).unwrap();
    assert_eq!(dump["flows"].as_array().unwrap().len(), 2, "{dump}");
    let mut f = [0u8; 64];
    frame(&mut f, 0, 1, 7);
    let hex: String = f.iter().map(|x| format!("{x:02x}")).collect();
    let tr = rpc(
        &d,
        "logic.command",
        json!({"cmd": "trace", "args": {"packet": hex, "in_port": a}}),
    )
    .unwrap();
    assert!(tr.get("flood").is_none(), "{tr}");
    let outs: Vec<u64> = tr["outputs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["port"].as_u64().unwrap())
        .collect();
    assert_eq!(outs, [b as u64, c as u64], "{tr}");
    drop(t);
    rpc(&d, "logic.replace", json!({"name": "bridge"})).unwrap();
    assert!(d.openflow_tables().is_none(), "replaced by bridge");
    assert!(d.switch().punt().is_none(), "replaced by bridge");
    d.shutdown();
}
