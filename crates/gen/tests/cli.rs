//! The binary's command line and exit codes (docs/turnout-gen.md):
//! 0 success, 1 error while running, 2 bad option, 3 peer never came up,
//! 4 txrx received nothing; the summary on a terminal, JSON elsewhere.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

mod gen_common;

const GEN: &str = env!("CARGO_BIN_EXE_turnout-gen");

fn run(args: &[&str]) -> Output {
    Command::new(GEN)
        .args(args)
        .output()
        .expect("run turnout-gen")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn bad_options_exit_2_with_a_message() {
    let absent = format!("memif:/tmp/turnout-gen-absent-{}.sock", std::process::id());
    let pair_on_absent = format!("port={absent};stream=2");
    for (args, says) in [
        (vec!["tx"], "--port"),
        (
            vec!["transmit", "--port", &absent],
            "unrecognized subcommand",
        ),
        (vec!["tx", "--port", "nic0"], "expected memif"),
        (vec!["tx", "--port", &absent, "--size", "63"], "63"),
        (vec!["tx", "--port", &absent, "--size", "9001"], "9001"),
        (
            vec!["tx", "--port", &absent, "--rate-pps", "fast"],
            "not a number",
        ),
        (vec!["tx", "--port", &absent, "--burst", "0"], "0"),
        (vec!["tx", "--port", &absent, "--stream", "32768"], "32768"),
        (
            vec!["tx", "--port", &absent, "--imix", "--size", "64"],
            "cannot be used with",
        ),
        (
            vec!["tx", "--port", &absent, "--ipv6", "--size", "64"],
            "minimum is 84 B",
        ),
        (
            vec!["tx", "--port", &absent, "--vlan", "7", "--size", "64"],
            "minimum is 68 B",
        ),
        (
            vec![
                "tx", "--port", &absent, "--ipv6", "--src-ip", "10.0.0.1", "--size", "128",
            ],
            "not an IPv6",
        ),
        (
            vec!["tx", "--port", &absent, "--dst-ip", "fd00::2"],
            "add --ipv6",
        ),
        (
            vec!["rx", "--port", &absent, "--rate-pps", "10"],
            "--rate-pps",
        ),
        (vec!["rx", "--port", &absent, "--cpu", "4096"], "--cpu 4096"),
        (
            vec![
                "fwd",
                "--port",
                &absent,
                "--port2",
                &absent,
                "--dst-mac2",
                "02:00:00:00:00:01",
            ],
            "--bidir",
        ),
        (
            vec!["tx", "--port", "memif:/x,ring-size=1000"],
            "power of two",
        ),
        (
            vec!["txrx", "--port", &absent, "--pair", "stream=2"],
            "needs port=SPEC",
        ),
        (
            vec!["txrx", "--port", &absent, "--pair", "port=memif:/y"],
            "needs stream=N",
        ),
        (
            vec![
                "txrx",
                "--port",
                &absent,
                "--pair",
                "port=memif:/y;stream=2;vlan=3",
            ],
            "unknown key 'vlan'",
        ),
        (
            vec!["txrx", "--port", &absent, "--pair", &pair_on_absent],
            "named twice",
        ),
        (
            vec![
                "txrx",
                "--port",
                &absent,
                "--pair",
                "port=memif:/y;stream=0",
            ],
            "stream 0 is sent twice",
        ),
        (
            vec![
                "txrx",
                "--port",
                &absent,
                "--rx-port",
                "memif:/z",
                "--bidir",
                "--pair",
                "port=memif:/y;rx-port=memif:/w;stream=1",
            ],
            "its reverse takes the next id",
        ),
        (
            vec![
                "txrx",
                "--port",
                &absent,
                "--rx-port",
                "memif:/z",
                "--bidir",
                "--pair",
                "port=memif:/y;stream=2",
            ],
            "needs its rx-port",
        ),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(o.stdout.is_empty(), "{args:?} printed a document");
    }
}

#[test]
fn help_and_version_exit_0() {
    let o = run(&["--help"]);
    assert_eq!(o.status.code(), Some(0));
    for role in ["tx", "rx", "txrx", "reflect", "fwd"] {
        assert!(String::from_utf8_lossy(&o.stdout).contains(role));
    }
    let o = run(&["--version"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&o.stdout).contains(env!("CARGO_PKG_VERSION")));
}

#[test]
fn an_absent_peer_exits_3_after_the_wait() {
    let sock = format!("/tmp/turnout-gen-nobody-{}.sock", std::process::id());
    let t = Instant::now();
    let o = run(&[
        "tx",
        "--port",
        &format!("memif:{sock}"),
        "--wait-peer-s",
        "0.5",
    ]);
    let el = t.elapsed();
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(stderr(&o).contains("did not come up"), "{}", stderr(&o));
    assert!(
        el >= Duration::from_millis(500) && el < Duration::from_secs(5),
        "{el:?}"
    );
    // A vhost-user frontend with no backend says why it is down.
    let o = run(&[
        "tx",
        "--port",
        &format!("vhost-user:{sock}"),
        "--wait-peer-s",
        "0.5",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("did not come up") && stderr(&o).contains("last attempt: connect"),
        "{}",
        stderr(&o)
    );
    // `--interval` (the spelling) is an alias of `--interval-s`: an
    // option, not a bad one (that would be exit 2).
    let o = run(&[
        "rx",
        "--port",
        &format!("memif:{sock}"),
        "--interval",
        "0.1",
        "--wait-peer-s",
        "0.2",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
}

#[test]
fn a_missing_interface_is_a_run_time_error() {
    let o = run(&[
        "rx",
        "--port",
        "afpacket:tgen-none0",
        "--wait-peer-s",
        "0.2",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("tgen-none0"));
}

#[test]
#[ignore = "system: root, AF_PACKET"]
fn sigterm_ends_a_receiver_with_its_document() {
    if testpeers::need(testpeers::is_root(), "needs root for AF_PACKET") {
        // AF_PACKET on the loopback interface: needs CAP_NET_RAW.
        let child = Command::new(GEN)
            .args(["rx", "--port", "afpacket:lo", "--wait-peer-s", "2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        let st = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status()
            .unwrap();
        assert!(st.success());
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(doc["schema"], "turnout-gen/1");
        assert_eq!(doc["role"], "rx");
        assert_eq!(doc["stopped_by"], "signal");
        assert!(doc["rx"]["packets"].is_u64());
        assert!(doc.get("tx").is_none());
    }
}

/// `txrx --pair`: one thread drives two looped-back memif links both ways;
/// every stream is sent, received in full and reported as its own.
#[test]
fn one_txrx_drives_several_pairs_both_ways() {
    let (s0, s1) = (sock("pairs0"), sock("pairs1"));
    let pair = format!(
        "port=memif:{s1};rx-port=memif:{s1},role=server;stream=6;src-mac=02:00:00:00:01:01;\
         dst-mac=02:00:00:00:01:02;src-ip=10.0.1.1;dst-ip=10.0.1.2"
    );
    let o = run(&[
        "txrx",
        "--port",
        &format!("memif:{s0}"),
        "--rx-port",
        &format!("memif:{s0},role=server"),
        "--bidir",
        "--stream",
        "4",
        "--count",
        "3000",
        "--rate-pps",
        "30000",
        "--pair",
        &pair,
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["config"]["pairs"][0]["stream"], 6, "{doc}");
    assert_eq!(doc["config"]["pairs"][0]["src_mac"], "02:00:00:00:01:01");
    let dirs = doc["tx"]["directions"].as_array().expect("per stream");
    let sent: Vec<(u64, u64)> = dirs
        .iter()
        .map(|d| {
            (
                d["stream"].as_u64().unwrap(),
                d["packets"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(sent, [(4, 3000), (5, 3000), (6, 3000), (7, 3000)], "{doc}");
    assert_eq!(doc["tx"]["packets"], 12000);
    let mut got: Vec<(u64, u64, u64)> = doc["rx"]["streams"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let n = |k: &str| s[k].as_u64().unwrap();
            (n("id"), n("received"), n("lost"))
        })
        .collect();
    got.sort();
    assert_eq!(
        got,
        [(4, 3000, 0), (5, 3000, 0), (6, 3000, 0), (7, 3000, 0)],
        "{doc}"
    );
    let names: Vec<&str> = doc["ports"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["port", "rx_port", "pair1.port", "pair1.rx_port"]);
    for f in [&s0, &s1] {
        let _ = std::fs::remove_file(f);
    }
}

/// A memif socket path of this test process.
fn sock(tag: &str) -> String {
    format!("/tmp/turnout-gen-{tag}-{}.sock", std::process::id())
}

/// Runs `args` with stdout on a terminal (util-linux `script` gives the
/// command a pseudo-terminal); returns (exit code, what the terminal showed).
fn on_a_terminal(args: &[&str]) -> (Option<i32>, String) {
    let cmd = std::iter::once(GEN)
        .chain(args.iter().copied())
        .collect::<Vec<_>>()
        .join(" ");
    let o = Command::new("script")
        .args(["-qec", &cmd, "/dev/null"])
        .stdin(Stdio::null())
        .output()
        .expect("run script (util-linux)");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).replace('\r', ""),
    )
}

#[test]
fn every_roles_help_shows_how_a_port_is_named() {
    for role in ["tx", "rx", "txrx", "reflect", "fwd"] {
        let o = run(&[role, "--help"]);
        assert_eq!(o.status.code(), Some(0), "{role}");
        let out = String::from_utf8_lossy(&o.stdout);
        for says in [
            "PORT SPEC",
            "memif:SOCKET[,id=N]",
            "vhost_user:SOCKET",
            "af_xdp:IFACE[,queue=Q]",
            "af_packet:IFACE",
            "afxdp, afpacket, vhost-user and vhost are accepted",
        ] {
            assert!(out.contains(says), "{role} --help lacks {says:?}:\n{out}");
        }
    }
}

#[test]
fn turnoutds_spelling_of_a_port_kind_is_accepted() {
    // Parsed and opened (the interface is missing: a run-time error, 1),
    // not refused as a bad option (2); the older spellings alike.
    for spec in [
        "af_xdp:tgen-none0",
        "afxdp:tgen-none0",
        "af_packet:tgen-none0,fanout=lb",
        "afpacket:tgen-none0,fanout=lb",
    ] {
        let o = run(&["rx", "--port", spec, "--wait-peer-s", "0.2"]);
        assert_eq!(o.status.code(), Some(1), "{spec}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("tgen-none0: interface not found"),
            "{spec}: {}",
            stderr(&o)
        );
    }
    // A kind turnout-gen does not open, and a misspelt one: exit 2 with
    // every accepted spelling (ports::PortKind's list).
    let accepted = "(expected one of memif, vhost_user (or vhost-user, vhost), \
                    af_xdp (or afxdp), af_packet (or afpacket))";
    for (spec, says) in [
        ("tap:t0", "'tap:t0': port kind tap is not accepted here"),
        ("af-xdp:t0", "'af-xdp:t0': unknown port kind \"af-xdp\""),
    ] {
        let o = run(&["rx", "--port", spec]);
        assert_eq!(o.status.code(), Some(2), "{spec}");
        assert!(
            stderr(&o).contains(&format!("{says} {accepted}")),
            "{spec}: {}",
            stderr(&o)
        );
    }
}

#[test]
fn a_terminal_gets_a_summary_and_a_pipe_or_file_the_json() {
    // A memif link between two ports of one turnout-gen: every frame comes back.
    let s = sock("summary");
    let link = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = [
            "txrx",
            "--port",
            &format!("memif:{s}"),
            "--rx-port",
            &format!("memif:{s},role=server"),
            "--count",
            "2000",
            "--rate-pps",
            "20000",
        ]
        .iter()
        .map(|x| x.to_string())
        .collect();
        a.extend(extra.iter().map(|x| x.to_string()));
        a
    };
    // stdout a pipe: the document, nothing else
    let args = link(&[]);
    let o = run(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(doc["config"]["port"], format!("memif:{s}"));
    assert_eq!(doc["tx"]["packets"], 2000);
    let got = doc["rx"]["packets"].as_u64().unwrap();
    // a terminal: the summary, no JSON
    let (code, out) = on_a_terminal(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.starts_with(&format!(
            "turnout-gen txrx: memif:{s} -> memif:{s},role=server, 64 B frames\n"
        )),
        "{out}"
    );
    for line in ["  sent ", "  received ", "  lost ", "  latency   p50 "] {
        assert!(out.contains(line), "no {line:?} line:\n{out}");
    }
    assert!(out.contains("2 000 frames"), "{out}");
    assert!(!out.contains('{'), "JSON on a terminal:\n{out}");
    // --json FILE: the document there, the summary still on the terminal
    let file = format!("/tmp/turnout-gen-summary-{}.json", std::process::id());
    let args = link(&["--json", &file]);
    let (code, out) = on_a_terminal(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("  received "), "{out}");
    let doc: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    std::fs::remove_file(&file).unwrap();
    assert_eq!(doc["schema"], "turnout-gen/1");
    assert!(got > 0 && doc["rx"]["packets"].as_u64().unwrap() > 0);
    // --json -: the document on the terminal too
    let args = link(&["--json", "-"]);
    let (code, out) = on_a_terminal(&args.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.trim_start().starts_with('{') && !out.contains("  received "),
        "{out}"
    );
}

#[test]
fn a_txrx_that_receives_nothing_exits_4_unless_told_it_is_expected() {
    // A sink serving the socket: it takes every frame and sends none back,
    // so a txrx without --rx-port (receiving on the port it sends on, as
    // the README's old line did) gets nothing.
    let s = sock("sink");
    let sink = Command::new(GEN)
        .args(["rx", "--port", &format!("memif:{s},role=server")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !std::path::Path::new(&s).exists() {
        assert!(Instant::now() < deadline, "the sink never served {s}");
        std::thread::sleep(Duration::from_millis(10));
    }
    let port = format!("memif:{s}");
    let args = [
        "txrx",
        "--port",
        &port,
        "--count",
        "2000",
        "--rate-pps",
        "20000",
    ];
    let o = run(&args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(
        err.contains(&format!(
            "received none of the 2 000 frames it sent on {port} (no --rx-port"
        )) && err
            .trim_end()
            .ends_with("--allow-no-rx if that is expected"),
        "{err}"
    );
    // the document is still there, for whoever reads it
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        (doc["tx"]["packets"].as_u64(), doc["rx"]["packets"].as_u64()),
        (Some(2000), Some(0))
    );
    let mut told = args.to_vec();
    told.push("--allow-no-rx");
    let o = run(&told);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(stderr(&o), "");
    let st = Command::new("kill")
        .args(["-TERM", &sink.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let o = sink.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    // only txrx checks what came back: the sink (rx) exits 0
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let took = doc["rx"]["packets"].as_u64().unwrap();
    assert!(
        took > 0 && took <= 4000,
        "the sink took {took} of both runs' 4000"
    );
}

/// A signal while txrx sends ends the sending, not the cool-down: the
/// frames still in flight are received, so a stream stopped by Ctrl-C (or
/// by a test once what it checks is over) loses nothing; a second signal
/// ends the cool-down.
#[test]
fn a_signal_ends_the_sending_and_a_second_one_the_cooldown() {
    // Looped back on one memif: the cool-down receives the frames in flight
    // and ends by itself once every frame is back.
    let s = sock("signal");
    let (tx, rx) = (format!("memif:{s}"), format!("memif:{s},role=server"));
    let mut g = gen_common::Gen::spawn(&[
        "txrx",
        "--port",
        &tx,
        "--rx-port",
        &rx,
        "--rate-pps",
        "10000",
        "--cooldown-s",
        "600",
        "--interval-s",
        "0.05",
    ]);
    g.wait_running();
    g.interrupt();
    let (doc, errs) = g.finish(Duration::from_secs(30));
    assert_eq!(doc["stopped_by"], "signal", "{doc} {errs:?}");
    let sent = doc["tx"]["packets"].as_u64().unwrap();
    assert!(sent > 0, "{doc}");
    assert_eq!(
        (doc["rx"]["packets"].as_u64(), doc["rx"]["lost"].as_u64()),
        (Some(sent), Some(0)),
        "{doc}"
    );

    // Nothing comes back (the frames go to a sink, the receive port's peer
    // sends nothing): the cool-down waits until the second signal.
    let (s1, s2) = (sock("signal-sink"), sock("signal-idle"));
    let _sink = gen_common::Gen::spawn(&["rx", "--port", &format!("memif:{s1},role=server")]);
    let mut g = gen_common::Gen::spawn(&[
        "txrx",
        "--port",
        &format!("memif:{s1}"),
        "--rx-port",
        &format!("memif:{s2},role=server"),
        "--allow-no-rx",
        "--rate-pps",
        "10000",
        "--cooldown-s",
        "600",
        "--interval-s",
        "0.05",
    ]);
    let _idle = gen_common::Gen::spawn(&["rx", "--port", &format!("memif:{s2}")]);
    g.wait_running();
    g.interrupt();
    // Ended at once, it would be gone well within this; in its cool-down
    // it stays for 600 s.
    std::thread::sleep(Duration::from_secs(1));
    assert!(g.running(), "the first signal ended the cool-down too");
    g.interrupt();
    let (doc, errs) = g.finish(Duration::from_secs(30));
    assert_eq!(doc["stopped_by"], "signal", "{doc} {errs:?}");
    let sent = doc["tx"]["packets"].as_u64().unwrap();
    assert!(sent > 0, "{doc}");
    assert_eq!(doc["rx"]["packets"].as_u64(), Some(0), "{doc}");
    for f in [&s, &s1, &s2] {
        let _ = std::fs::remove_file(f);
    }
}
