//! The binary's command line and exit codes (docs/turnout-gen.md):
//! 0 success, 1 error while running, 2 bad option, 3 peer never came up.

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

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
