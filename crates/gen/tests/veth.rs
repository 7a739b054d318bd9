//! turnout-gen over a veth pair between two network namespaces it creates
//! (unique names with the PID, removed afterwards also on failure), on
//! AF_XDP and AF_PACKET. A system test: needs root; without it skips with
//! a message, or fails under `TURNOUT_REQUIRE_PEERS=1` (crates/testpeers).

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const GEN: &str = env!("CARGO_BIN_EXE_turnout-gen");

fn ip(args: &[&str]) {
    let st = Command::new("ip").args(args).status().expect("run ip");
    assert!(st.success(), "ip {args:?} failed");
}

/// Two namespaces joined by a veth pair `va` (in a) — `vb` (in b).
struct Wire {
    a: String,
    b: String,
}

impl Wire {
    fn new(tag: &str) -> Wire {
        let pid = std::process::id();
        let w = Wire {
            a: format!("tgen{tag}a{pid}"),
            b: format!("tgen{tag}b{pid}"),
        };
        ip(&["netns", "add", &w.a]);
        ip(&["netns", "add", &w.b]);
        ip(&[
            "-n", &w.a, "link", "add", "va", "type", "veth", "peer", "name", "vb", "netns", &w.b,
        ]);
        for (ns, dev) in [(&w.a, "va"), (&w.b, "vb")] {
            ip(&["-n", ns, "link", "set", dev, "up"]);
        }
        w
    }

    fn spawn(&self, ns: &str, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", ns, GEN])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn turnout-gen in a namespace")
    }
}

impl Drop for Wire {
    fn drop(&mut self) {
        // Deleting a namespace deletes the veth end in it, and so the pair.
        for ns in [&self.a, &self.b] {
            let _ = Command::new("ip").args(["netns", "del", ns]).status();
        }
    }
}

fn finish(mut c: Child, what: &str) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    while c.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = c.kill();
            panic!("{what} did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = c.wait_with_output().unwrap();
    assert!(
        o.status.success(),
        "{what}: {} {}",
        o.status,
        String::from_utf8_lossy(&o.stderr)
    );
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{what}: {e}"))
}

fn stop(c: &Child) {
    let _ = Command::new("kill")
        .args(["-INT", &c.id().to_string()])
        .status();
}

/// Whether a receiver in namespace `ns` is bound to `vb`: an AF_PACKET
/// socket with an interface index (`/proc/net/packet`), or, for AF_XDP, the
/// XDP program attached to `vb` (the last step of the receiver's set-up).
/// The namespace is the test's own: anything there is the receiver's.
fn receiver_bound(ns: &str, kind: &str) -> bool {
    let out = |args: &[&str]| {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default()
    };
    if kind.contains("xdp") {
        out(&["ip", "link", "show", "dev", "vb"]).contains(" xdp")
    } else {
        out(&["cat", "/proc/net/packet"])
            .lines()
            .skip(1)
            .any(|l| l.split_whitespace().nth(4).is_some_and(|i| i != "0"))
    }
}

/// tx in namespace a → veth → rx in namespace b: the receiver counts every
/// frame the sender handed to its port, with nothing lost or foreign.
fn one_way(tag: &str, kind: &str, extra: &[&str]) {
    if !testpeers::need(
        testpeers::is_root(),
        &format!("needs root for namespaces and {kind}"),
    ) {
        return;
    }
    let w = Wire::new(tag);
    let rx = w.spawn(
        &w.b,
        &["rx", "--port", &format!("{kind}:vb"), "--wait-peer-s", "5"],
    );
    // The receiver's socket bound in namespace b (waited for: a fixed
    // pause is too short on a loaded machine, and the sender's warm-up
    // frames must arrive too).
    if !testpeers::wait_until(Duration::from_secs(20), || receiver_bound(&w.b, kind)) {
        stop(&rx);
        panic!("the {kind} receiver did not bind in 20 s");
    }
    let mut args = vec![
        "tx",
        "--port",
        "",
        "--rate-pps",
        "20000",
        "--count",
        "10000",
        "--warmup-s",
        "0.1",
        "--wait-peer-s",
        "5",
    ];
    let port = format!("{kind}:va");
    args[2] = &port;
    args.extend_from_slice(extra);
    let tx = finish(w.spawn(&w.a, &args), "tx");
    std::thread::sleep(Duration::from_millis(300));
    stop(&rx);
    let rx = finish(rx, "rx");
    let (t, r) = (&tx["tx"], &rx["rx"]);
    eprintln!(
        "{kind} {extra:?}: tx {t}\nrx packets {} lost {} foreign {} warmup {}",
        r["packets"], r["lost"], r["foreign"], r["warmup"]
    );
    assert_eq!(t["packets"].as_u64().unwrap(), 10_000);
    assert_eq!(r["packets"].as_u64().unwrap(), 10_000, "{r}");
    assert_eq!(r["lost"].as_u64().unwrap(), 0);
    assert_eq!(r["duplicated"].as_u64().unwrap(), 0);
    assert_eq!(
        r["warmup"].as_u64().unwrap(),
        t["warmup_packets"].as_u64().unwrap()
    );
    assert!(r["latency_ns"]["count"].as_u64().unwrap() == 10_000);
}

#[test]
#[ignore = "system: root, veths in namespaces"]
fn af_packet_ipv4() {
    one_way("p4", "afpacket", &["--size", "64"]);
}

#[test]
#[ignore = "system: root, veths in namespaces"]
fn af_packet_ipv6_vlan_imix() {
    one_way(
        "p6",
        "afpacket",
        &[
            "--ipv6",
            "--vlan",
            "10",
            "--imix",
            "--flows",
            "8",
            "--vary",
            "src-port,dst-ip",
        ],
    );
}

#[test]
#[ignore = "system: root, veths in namespaces"]
fn af_xdp_ipv4_1518() {
    one_way("x4", "afxdp", &["--size", "1518"]);
}
