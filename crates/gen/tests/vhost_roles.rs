//! turnout-gen's vhost-user port spec in the roles and options the other
//! vhost-user tests (vhost.rs, ovs_dpdk.rs) leave out, through turnoutd's
//! own vhost-user ports (a fabric in this process; no peer to install):
//! - `reflect` and `fwd` on vhost-user ports, at 64, 1518 and 9000 B: every
//!   frame sent comes back or is counted as a drop by the switch or the
//!   reflector/forwarder, the receiver's `lost` equals those drops;
//! - `queues=2` and `queues=4` against ports with as many queue pairs
//!   (8 flows: every queue pair carries its equal share, and turnout-gen's
//!   per-queue counts equal turnoutd's per-queue counts exactly),
//!   `queue-size` 256, 1024 and 4096, and a bad queue size (a clear error,
//!   exit status 2, before any socket is touched);
//! - `server` (turnout-gen listens, turnoutd's ports in client mode
//!   connect, as with OVS `dpdkvhostuserclient`);
//! - turnout-gen killed (SIGKILL) mid-run and started again: the backend
//!   takes the new frontend and counts agree exactly again.
//!
//! - a frontend enabling fewer queue pairs than the port has (turnoutd
//!   with two workers): every frame leaves on a queue it enabled.
//!
//! About 33 s here at load 12 (4 tests, before the fifth).
//! `cargo test --release -p turnout-gen --test vhost_roles -- --test-threads=1`

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Ctx, Logic, Pkts, PortId, Switch, SwitchConfig, Verdict};
use ports::vhost_user::{Mode, VhostUserConfig, VhostUserPort};

use testpeers::TempDir;

mod gen_common;
use gen_common::{serial, Gen, GEN};

/// Port 2k <-> port 2k+1.
struct Pairs;

impl Logic for Pairs {
    fn name(&self) -> &'static str {
        "pairs"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        for v in verdicts.iter_mut().take(pkts.len()) {
            *v = Verdict::Port(ingress ^ 1);
        }
    }
}

/// A switch with `names.len()` vhost-user ports (port i = names[i]).
struct Rig {
    sw: Switch,
    ports: Vec<Arc<VhostUserPort>>,
    dir: TempDir,
}

impl Rig {
    fn new(tag: &str, names: &[&str], queues: u16, mode: Mode) -> Rig {
        Rig::on_workers(tag, names, queues, mode, &[])
    }

    /// [`Rig::new`] with `owners.len()` workers (at least one), port i's
    /// receive queues on worker `owners[i]`.
    fn on_workers(tag: &str, names: &[&str], queues: u16, mode: Mode, owners: &[usize]) -> Rig {
        let dir = TempDir::new(tag);
        let cfg = SwitchConfig {
            workers: vec![None; owners.len().max(1)],
            ..SwitchConfig::default()
        };
        let sw = Switch::new(cfg, Box::new(Pairs)).unwrap();
        let mut ports = Vec::new();
        for (i, name) in names.iter().enumerate() {
            let mut c = VhostUserConfig::new(dir.sock(name));
            c.queues = queues;
            c.max_frame_b = 9000;
            c.mode = mode;
            let p = Arc::new(VhostUserPort::new(name, c).unwrap());
            let owner = owners.get(i).copied();
            assert_eq!(sw.add_port(name, p.clone(), owner).unwrap(), i as PortId);
            ports.push(p);
        }
        Rig { sw, ports, dir }
    }

    fn spec(&self, name: &str, opts: &str) -> String {
        format!("vhost-user:{}{opts}", self.dir.sock(name).display())
    }

    fn drops(&self) -> u64 {
        self.sw
            .port_stats()
            .iter()
            .flat_map(|p| p.drops.iter())
            .map(|d| d.1)
            .sum()
    }

    /// Waits (at most 10 s) until the switch has sent on or dropped every
    /// frame it received; its drops.
    fn settled_drops(&self) -> u64 {
        let t0 = Instant::now();
        loop {
            let st = self.sw.port_stats();
            let rx: u64 = st.iter().map(|p| p.rx_packets).sum();
            let tx: u64 = st.iter().map(|p| p.tx_packets).sum();
            let d = self.drops();
            if rx == tx + d || t0.elapsed() > Duration::from_secs(10) {
                return d;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// `txrx` of `count` frames at 20 kpps; its document.
/// (`rx_port` == `tx_port`: both ways on one port.)
fn txrx(tx_port: &str, rx_port: &str, size: u32, count: u64) -> serde_json::Value {
    txrx_with(tx_port, rx_port, size, count, &[])
}

/// [`txrx`] with more options.
fn txrx_with(
    tx_port: &str,
    rx_port: &str,
    size: u32,
    count: u64,
    more: &[&str],
) -> serde_json::Value {
    let mut args = vec!["txrx", "--port", tx_port];
    args.extend(more);
    if rx_port != tx_port {
        args.extend(["--rx-port", rx_port]);
    }
    Gen::spawn(
        &[
            &args[..],
            &[
                "--size",
                &size.to_string(),
                "--rate-pps",
                "20000",
                "--count",
                &count.to_string(),
                "--wait-peer-s",
                "20",
                // Stragglers of two switch hops and a middle turnout-gen on a
                // loaded host.
                "--cooldown-s",
                "2",
            ],
        ]
        .concat(),
    )
    .finish(Duration::from_secs(60))
    .0
}

/// Every frame sent is received, or counted lost, and the losses are
/// exactly what the switch and the middle turnout-gen (`mid_dropped`)
/// dropped.
fn conserved(what: &str, doc: &serde_json::Value, count: u64, drops: u64, mid_dropped: u64) {
    let (tx, rx) = (&doc["tx"], &doc["rx"]);
    let what = format!(
        "{what}: sent {} received {} lost {} foreign {} duplicated {}, switch drops {drops}, \
         middle drops {mid_dropped}",
        tx["packets"], rx["packets"], rx["lost"], rx["foreign"], rx["duplicated"]
    );
    eprintln!("{what}");
    assert_eq!(n(&tx["packets"]), count, "sent, {what}");
    // On a loaded 2-core host the switch may drop most of them (tx_full:
    // a turnout-gen descheduled with its ring full); every one is counted.
    assert!(n(&rx["packets"]) > 0, "received, {what}");
    assert_eq!(n(&rx["packets"]) + n(&rx["lost"]), count, "{what}");
    assert_eq!(n(&rx["lost"]), drops + mid_dropped, "lost vs drops, {what}");
    assert_eq!(n(&rx["foreign"]), 0, "{what}");
    assert_eq!(n(&rx["duplicated"]), 0, "{what}");
}

/// For each size: the middle turnout-gen (`mid`: reflect or fwd) started,
/// `count` frames sent from `tx` and received on `rx`, the middle one
/// stopped; every frame accounted for.
/// `mid_ports`: the rig's ports the middle one attaches to; the traffic
/// starts once it has (frames sent before would find no frontend there and
/// be dropped, each counted, and the cool-down would wait for them).
fn through_middle(what: &str, rig: &Rig, mid: &[&str], mid_ports: &[usize], tx: &str, rx: &str) {
    let mut before = rig.settled_drops();
    for size in [64u32, 1518, 9000] {
        let mut args = mid.to_vec();
        args.extend(["--duration-s", "60", "--wait-peer-s", "20"]);
        let connects: Vec<u64> = mid_ports
            .iter()
            .map(|&i| rig.ports[i].counter("connects").unwrap_or(0))
            .collect();
        let mut m = Gen::spawn(&args);
        for (&i, &c) in mid_ports.iter().zip(&connects) {
            let p = &rig.ports[i];
            assert!(
                gen_common_wait(|| p.counter("connects").unwrap_or(0) > c)
                    && p.wait_running(Duration::from_secs(10)),
                "{what} {size} B: the middle turnout-gen never attached to port {i}"
            );
        }
        let count = 10_000;
        let doc = txrx(tx, rx, size, count);
        let drops = rig.settled_drops() - before;
        before += drops;
        m.interrupt();
        let f = m.finish(Duration::from_secs(20)).0;
        let mid_dropped = n(&f["fwd"]["dropped"]);
        conserved(&format!("{what} {size} B"), &doc, count, drops, mid_dropped);
        assert_eq!(
            n(&f["fwd"]["received"]),
            n(&f["fwd"]["packets"]) + mid_dropped,
            "{what} {size} B: {}",
            f["fwd"]
        );
    }
}

#[test]
fn reflect_and_fwd_on_vhost_user_ports_count_every_frame() {
    let _g = serial();
    // txrx <-> a | b <-> reflect
    let rig = Rig::new("refl", &["a", "b"], 1, Mode::Server);
    let (a, b) = (rig.spec("a", ""), rig.spec("b", ""));
    through_middle("reflect", &rig, &["reflect", "--port", &b], &[1], &a, &a);

    // txrx -> a | b -> fwd -> c | d -> txrx
    let rig = Rig::new("fwd", &["a", "b", "c", "d"], 1, Mode::Server);
    let (a, b, c, d) = (
        rig.spec("a", ""),
        rig.spec("b", ""),
        rig.spec("c", ""),
        rig.spec("d", ""),
    );
    through_middle(
        "fwd",
        &rig,
        &["fwd", "--port", &b, "--port2", &c],
        &[1, 2],
        &a,
        &d,
    );
}

#[test]
fn queue_pairs_queue_sizes_and_server_mode_carry_exact_counts() {
    let _g = serial();
    for (queues, qsize, mode) in [
        (2u16, 256u16, Mode::Server),
        (4, 1024, Mode::Server),
        (1, 4096, Mode::Server),
        (2, 1024, Mode::Client),
    ] {
        let rig = Rig::new("q", &["a", "b"], queues, mode);
        let server = if mode == Mode::Client { ",server" } else { "" };
        let opts = format!("{server},queues={queues},queue-size={qsize}");
        let (a, b) = (rig.spec("a", &opts), rig.spec("b", &opts));
        let count = 10_000;
        // 8 flows: flow f leaves on queue f mod queues, so every queue
        // pair carries frames.
        let doc = txrx_with(&a, &b, 64, count, &["--flows", "8"]);
        let drops = rig.settled_drops();
        conserved(&format!("{opts} {mode:?}"), &doc, count, drops, 0);
        for p in doc["ports"].as_array().unwrap() {
            assert_eq!(n(&p["counters"]["connects"]), 1, "{opts}: {p}");
        }
        // Per queue, what turnout-gen says it sent on each transmit queue
        // is exactly what turnoutd's port received on that queue pair, and
        // every queue got its share (8 flows over 1, 2 or 4 queues: equal
        // shares). What turnoutd sent on each of b's queues is what
        // turnout-gen's receive queue got.
        let st = rig.sw.port_stats();
        let sent = &doc["ports"][0]["counters"];
        let got = &doc["ports"][1]["counters"];
        let all = count + n(&doc["tx"]["warmup_packets"]);
        let mut sum = 0;
        for q in 0..queues as usize {
            let tq = n(&sent[format!("txq{q}_frames")]);
            assert_eq!(st[0].queues[q][0], tq, "{opts}: a's queue {q}: {sent}");
            assert_eq!(tq, all / queues as u64, "{opts}: queue {q}'s share: {sent}");
            assert_eq!(
                st[1].queues[q][2],
                n(&got[format!("rxq{q}_frames")]),
                "{opts}: b's queue {q}: {got}"
            );
            sum += tq;
        }
        assert_eq!(sum, all, "{opts}: {sent}");
        assert!(sent.get(format!("txq{queues}_frames")).is_none(), "{sent}");
        // One worker: turnoutd sends every frame on queue 0 (worker w
        // sends on queue w mod the queues the guest enabled), so a
        // multi-queue guest gets nothing on its other queues.
        for q in 1..queues as usize {
            assert_eq!(n(&got[format!("rxq{q}_frames")]), 0, "{opts}: {got}");
        }
        for p in &rig.ports {
            assert_eq!(p.counter("disconnects_lie"), Some(0), "{opts}");
        }
    }
}

/// turnoutd with two workers and ports of 4 queue pairs, port a owned by
/// worker 1: frames from a leave b on queue `1 mod` the queue pairs b's
/// frontend enabled. A frontend with one queue pair gets them on queue 0
/// (sending on queue 1, which such a guest never enabled, would drop
/// every frame as tx_full); one with 2 or 4 on
/// queue 1. Whatever the frontend sends on, on 1..4 queues, is received.
#[test]
fn a_frontend_enabling_fewer_queue_pairs_than_the_port_gets_every_frame() {
    let _g = serial();
    for (a_queues, b_queues, out_q) in [(1u16, 1u16, 0usize), (4, 1, 0), (2, 2, 1), (4, 4, 1)] {
        let rig = Rig::on_workers("few", &["a", "b"], 4, Mode::Server, &[1, 0]);
        let a = rig.spec("a", &format!(",queues={a_queues}"));
        let b = rig.spec("b", &format!(",queues={b_queues}"));
        let what = format!("a queues={a_queues}, b queues={b_queues}");
        let count = 10_000;
        // The most transmit queues b's port saw running during the run.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let seen = {
            let (p, stop) = (rig.ports[1].clone(), stop.clone());
            std::thread::spawn(move || {
                let mut most = 0;
                while !stop.load(Ordering::Relaxed) {
                    most = most.max(p.counter("tx_queues_up").unwrap());
                    std::thread::sleep(Duration::from_millis(20));
                }
                most
            })
        };
        let doc = txrx_with(&a, &b, 64, count, &["--flows", "8"]);
        stop.store(true, Ordering::Relaxed);
        assert_eq!(seen.join().unwrap(), b_queues as u64, "{what}");
        let drops = rig.settled_drops();
        conserved(&what, &doc, count, drops, 0);
        // turnout-gen has left: no queue runs.
        for p in &rig.ports {
            assert!(
                gen_common_wait(|| p.counter("tx_queues_up") == Some(0)),
                "{what}"
            );
        }
        // Not conserved's "some": on a loaded host a few may be tx_full,
        // but a queue nobody polls would lose them all.
        let got_n = n(&doc["rx"]["packets"]);
        assert!(
            got_n >= count * 9 / 10,
            "{what}: received {got_n} of {count}"
        );
        let st = rig.sw.port_stats();
        let sent = &doc["ports"][0]["counters"];
        let got = &doc["ports"][1]["counters"];
        let all = count + n(&doc["tx"]["warmup_packets"]);
        for q in 0..4usize {
            if q < a_queues as usize {
                let tq = n(&sent[format!("txq{q}_frames")]);
                assert_eq!(st[0].queues[q][0], tq, "{what}: a's queue {q}: {sent}");
                assert_eq!(tq, all / a_queues as u64, "{what}: a's queue {q}: {sent}");
            } else {
                assert_eq!(st[0].queues[q][0], 0, "{what}: a's queue {q}");
            }
            let out = st[1].queues[q][2];
            if q == out_q {
                assert_eq!(out, st[1].tx_packets, "{what}: b's queue {q}");
                assert_eq!(out, n(&got[format!("rxq{q}_frames")]), "{what}: {got}");
            } else {
                assert_eq!(out, 0, "{what}: b's queue {q}");
            }
        }
        for p in &rig.ports {
            assert_eq!(p.counter("disconnects_lie"), Some(0), "{what}");
        }
    }
}

#[test]
fn a_bad_queue_size_is_a_clear_error() {
    for (opt, says) in [
        ("queue-size=1000", "power of two"),
        ("queue-size=1", "power of two"),
        ("queue-size=65536", "queue-size"),
        ("queues=0", "1..16"),
    ] {
        let out = std::process::Command::new(GEN)
            .args([
                "tx",
                "--port",
                &format!("vhost-user:/nonexistent/x.sock,{opt}"),
            ])
            .args(["--duration-s", "1"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{opt}: {err}");
        assert!(err.contains(says), "{opt}: {err}");
        assert!(err.lines().count() <= 3, "{opt}: a short message: {err}");
    }
}

#[test]
fn the_backend_takes_a_new_turnout_gen_after_one_is_killed() {
    let _g = serial();
    let rig = Rig::new("kill", &["a", "b"], 1, Mode::Server);
    let (a, b) = (rig.spec("a", ""), rig.spec("b", ""));
    let g = Gen::spawn(&[
        "txrx",
        "--port",
        &a,
        "--rx-port",
        &b,
        "--rate-pps",
        "20000",
        "--duration-s",
        "30",
        "--wait-peer-s",
        "20",
    ]);
    assert!(
        rig.ports[0].wait_running(Duration::from_secs(20)),
        "turnout-gen never attached"
    );
    std::thread::sleep(Duration::from_millis(1000));
    let st = rig.sw.port_stats();
    assert!(st[0].rx_packets > 5_000, "before the kill: {:?}", st[0]);
    drop(g); // SIGKILL, as a crashed VM
    for p in &rig.ports {
        assert!(
            gen_common_wait(|| p.counter("connected") == Some(0)),
            "the backend still thinks the killed frontend is attached"
        );
    }
    let base_drops = rig.settled_drops();
    let st = rig.sw.port_stats();
    let (rx0, tx1) = (st[0].rx_packets, st[1].tx_packets);
    let count = 10_000;
    let doc = txrx(&a, &b, 64, count);
    let drops = rig.settled_drops() - base_drops;
    let st = rig.sw.port_stats();
    assert_eq!(st[0].rx_packets - rx0, count, "the switch got every frame");
    assert_eq!(st[1].tx_packets - tx1 + drops, count);
    conserved("after a kill -9", &doc, count, drops, 0);
    for p in &rig.ports {
        assert_eq!(p.counter("connects"), Some(2));
        assert_eq!(p.counter("disconnects_lie"), Some(0));
    }
}

fn gen_common_wait(mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(10) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}
