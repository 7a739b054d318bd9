//! memif against the real peer: DPDK testpmd (`net_memif`), both roles.
//!
//! A system test: without /usr/bin/dpdk-testpmd (or $TURNOUT_TESTPMD) it
//! skips with a message, or fails under `TURNOUT_REQUIRE_PEERS=1`
//! (crates/testpeers). Each testpmd runs with `--no-huge`, its own `--file-prefix`
//! (removed afterwards) and is ended by its PID. Tests run one at a time
//! (two cores).

mod memif_common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch};
use memif_common::*;
use ports::memif::{ClientConfig, MemifConfig, MemifPort, MemifServer, ServerConfig};

static SERIAL: Mutex<()> = Mutex::new(());

/// $TURNOUT_TESTPMD, /usr/bin/dpdk-testpmd or the one in $PATH.
fn testpmd_path() -> PathBuf {
    testpeers::testpmd().expect("dpdk-testpmd (checked by have_testpmd)")
}

fn have_testpmd() -> bool {
    testpeers::testpmd().is_some()
}

/// A running testpmd; killed (SIGKILL) and its runtime dir removed on drop.
struct Testpmd {
    child: Option<Child>,
    prefix: String,
    log: PathBuf,
}

impl Testpmd {
    /// `vdev` is the memif vdev argument, `extra` testpmd application args.
    fn start(dir: &TempDir, tag: &str, vdev: &str, extra: &[&str]) -> Testpmd {
        let prefix = format!("turnout-memif-{}-{tag}", std::process::id());
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{prefix}"));
        let log = dir.path(&format!("testpmd-{tag}.log"));
        let out = std::fs::File::create(&log).unwrap();
        let mut args: Vec<String> = [
            "--lcores=0@0,1@0",
            "--no-huge",
            "-m",
            "256",
            "--no-pci",
            "--log-level=pmd.net.memif:debug",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        args.push(format!("--file-prefix={prefix}"));
        args.push(format!("--vdev={vdev}"));
        args.push("--".into());
        args.extend(
            ["--total-num-mbufs=8192", "-a", "--stats-period=100"]
                .iter()
                .map(|s| s.to_string()),
        );
        args.extend(extra.iter().map(|s| s.to_string()));
        let child = Command::new(testpmd_path())
            .args(&args)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("spawn testpmd");
        Testpmd {
            child: Some(child),
            prefix,
            log,
        }
    }

    fn pid(&self) -> u32 {
        self.child.as_ref().unwrap().id()
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM: testpmd stops forwarding and prints its statistics.
    /// Returns (rx, tx) packets of the accumulated statistics.
    fn stop(mut self) -> (u64, u64) {
        let mut child = self.child.take().unwrap();
        let _ = Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .status();
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
        let log = self.log();
        parse_stats(&log).unwrap_or_else(|| panic!("no statistics in testpmd output:\n{log}"))
    }

    /// SIGKILL, as a crashing VNF.
    fn kill9(mut self) {
        let mut child = self.child.take().unwrap();
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}

/// RX-packets and TX-packets of testpmd's "Accumulated forward statistics".
fn parse_stats(log: &str) -> Option<(u64, u64)> {
    let at = log.rfind("Accumulated forward statistics")?;
    let tail = &log[at..];
    let num = |key: &str| -> Option<u64> {
        let i = tail.find(key)? + key.len();
        tail[i..].split_whitespace().next()?.parse().ok()
    };
    Some((num("RX-packets:")?, num("TX-packets:")?))
}

/// Counts frames on rx queue 0 of `port` in a thread until stopped; checks
/// each has `len` bytes.
struct Counter {
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    bad: Arc<AtomicU64>,
    t: Option<std::thread::JoinHandle<()>>,
}

impl Counter {
    fn start(port: Arc<MemifPort>, len: usize) -> Counter {
        let stop = Arc::new(AtomicBool::new(false));
        let count = Arc::new(AtomicU64::new(0));
        let bad = Arc::new(AtomicU64::new(0));
        let (s, c, b) = (stop.clone(), count.clone(), bad.clone());
        let t = std::thread::spawn(move || {
            let mut rx = port.take_rx(0).unwrap();
            let mut batch = RxBatch::with_capacity(256);
            while !s.load(Ordering::Relaxed) {
                let got = batch.receive(&mut *rx, 0, 0);
                let n = got.len();
                let wrong = got.pkts().iter().filter(|p| p.len() != len).count();
                drop(got);
                c.fetch_add(n as u64, Ordering::Relaxed);
                b.fetch_add(wrong as u64, Ordering::Relaxed);
                if n == 0 {
                    std::thread::yield_now();
                }
            }
        });
        Counter {
            stop,
            count,
            bad,
            t: Some(t),
        }
    }

    fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    fn finish(mut self) -> (u64, u64) {
        std::thread::sleep(Duration::from_millis(200)); // drain what is in the ring
        self.stop.store(true, Ordering::Relaxed);
        self.t.take().unwrap().join().unwrap();
        (
            self.count.load(Ordering::Relaxed),
            self.bad.load(Ordering::Relaxed),
        )
    }
}

impl Drop for Counter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.t.take() {
            let _ = t.join();
        }
    }
}

/// Sends `n` frames of `len` bytes (retrying while the ring is full);
/// returns how many went out before `timeout`.
fn send_n(port: &MemifPort, n: u64, len: usize, timeout: Duration) -> u64 {
    let f = frame(len, 7);
    let batch: Vec<&[u8]> = vec![&f[..]; 32];
    let t0 = Instant::now();
    let mut sent = 0u64;
    while sent < n && t0.elapsed() < timeout {
        let k = ((n - sent) as usize).min(32);
        let s = send_batch(port, 0, &batch[..k]);
        sent += s as u64;
        if s == 0 {
            std::thread::yield_now();
        }
    }
    sent
}

fn within_1pct(a: u64, b: u64) -> bool {
    a.abs_diff(b) * 100 <= a.max(b)
}

fn server(dir: &TempDir, mut cfg: MemifConfig) -> (MemifServer, Arc<MemifPort>, PathBuf) {
    let path = dir.path("memif.sock");
    let s = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    cfg.name = "turnout0".into();
    let p = Arc::new(s.add_interface(cfg).unwrap());
    (s, p, path)
}

fn client_vdev(path: &Path, extra: &str) -> String {
    format!(
        "net_memif0,role=client,id=0,socket={},socket-abstract=no{extra}",
        path.display()
    )
}

fn wait_link(p: &MemifPort, tp: &Testpmd) {
    assert!(
        wait_until(Duration::from_secs(10), || p.link_up()),
        "memif link did not come up; status {:?}\ntestpmd log:\n{}",
        p.status(),
        tp.log()
    );
}

// --- testpmd is the client, we are the server ------------------------------

fn txonly_to_our_server(len: usize, tp_vdev_extra: &str, tp_extra: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have_testpmd() {
        return;
    }
    let dir = TempDir::new("tp-tx");
    let (_s, port, path) = server(&dir, MemifConfig::new("x", 0));
    let counter = Counter::start(port.clone(), len);
    let mut args = vec!["--forward-mode=txonly"];
    args.extend_from_slice(tp_extra);
    let tp = Testpmd::start(&dir, "tx", &client_vdev(&path, tp_vdev_extra), &args);
    wait_link(&port, &tp);
    assert!(
        wait_until(Duration::from_secs(5), || counter.get() > 10_000),
        "no traffic: {:?}",
        port.backend_counters()
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (_rx, tp_tx) = tp.stop();
    let (got, bad) = counter.finish();
    eprintln!("testpmd txonly {len} B: testpmd TX-packets {tp_tx}, our server received {got}");
    assert_eq!(bad, 0, "frames of the wrong length");
    assert!(tp_tx > 10_000);
    assert!(
        within_1pct(tp_tx, got),
        "testpmd sent {tp_tx}, we received {got}"
    );
    assert_eq!(
        port.counter("violations"),
        0,
        "{:?}",
        port.backend_counters()
    );
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_client_txonly_64b_into_our_server() {
    txonly_to_our_server(64, "", &[]);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_client_txonly_9000b_into_our_server() {
    // testpmd's own tx overruns the ring with multi-descriptor frames when
    // it is nearly full (see docs/memif.md), so its buffers hold a whole
    // jumbo frame here; our chained receive path is covered by the
    // in-process tests and by `our_server_sends_9000b_chained_to_testpmd`.
    txonly_to_our_server(9000, ",bsize=9216", &["--mbuf-size=10240", "--txpkts=9000"]);
}

fn our_server_to_rxonly(len: usize, tp_vdev_extra: &str, tp_extra: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have_testpmd() {
        return;
    }
    let dir = TempDir::new("tp-rx");
    let (_s, port, path) = server(&dir, MemifConfig::new("x", 0));
    let mut args = vec!["--forward-mode=rxonly"];
    args.extend_from_slice(tp_extra);
    let tp = Testpmd::start(&dir, "rx", &client_vdev(&path, tp_vdev_extra), &args);
    wait_link(&port, &tp);
    std::thread::sleep(Duration::from_millis(300)); // testpmd starts forwarding
    let n = if len > 2048 { 20_000 } else { 200_000 };
    let sent = send_n(&port, n, len, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let (tp_rx, _) = tp.stop();
    eprintln!("our server sent {sent} x {len} B, testpmd rxonly RX-packets {tp_rx}");
    assert_eq!(sent, n, "could not send everything in time");
    assert!(
        within_1pct(sent, tp_rx),
        "we sent {sent}, testpmd received {tp_rx}"
    );
    assert_eq!(
        port.counter("violations"),
        0,
        "{:?}",
        port.backend_counters()
    );
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn our_server_sends_64b_to_testpmd_rxonly() {
    our_server_to_rxonly(64, "", &[]);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn our_server_sends_9000b_chained_to_testpmd() {
    // We chain in 2048-byte pieces into testpmd's (larger) buffers.
    our_server_to_rxonly(9000, ",bsize=9216", &["--mbuf-size=10240"]);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_killed_then_restarted_reconnects() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have_testpmd() {
        return;
    }
    let dir = TempDir::new("tp-kill");
    let (_s, port, path) = server(&dir, MemifConfig::new("x", 0));
    let counter = Counter::start(port.clone(), 64);
    let tp = Testpmd::start(
        &dir,
        "k1",
        &client_vdev(&path, ""),
        &["--forward-mode=txonly"],
    );
    wait_link(&port, &tp);
    assert!(wait_until(Duration::from_secs(5), || counter.get() > 10_000));
    let pid = tp.pid();
    tp.kill9();
    assert!(
        wait_until(Duration::from_secs(3), || !port.link_up()),
        "link still up after kill -9 of testpmd {pid}"
    );
    assert_eq!(port.counter("peer_hangups"), 1);
    let before = counter.get();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(counter.get(), before, "frames while disconnected");
    // A restarted testpmd reconnects (fresh regions) and traffic flows again.
    let tp = Testpmd::start(
        &dir,
        "k2",
        &client_vdev(&path, ""),
        &["--forward-mode=txonly"],
    );
    wait_link(&port, &tp);
    assert!(
        wait_until(Duration::from_secs(5), || counter.get() > before + 10_000),
        "no traffic after reconnect"
    );
    let _ = tp.stop();
    let _ = counter.finish();
    assert_eq!(port.counter("connects"), 2);
    assert_eq!(port.counter("violations"), 0);
}

// --- testpmd is the server, we are the client ------------------------------

fn testpmd_server(
    dir: &TempDir,
    tag: &str,
    fwd: &str,
    vdev_extra: &str,
    extra: &[&str],
) -> (Testpmd, PathBuf) {
    let path = dir.path("tp-server.sock");
    let vdev = format!(
        "net_memif0,role=server,id=0,socket={},socket-abstract=no{vdev_extra}",
        path.display()
    );
    let mut args = vec![fwd];
    args.extend_from_slice(extra);
    let tp = Testpmd::start(dir, tag, &vdev, &args);
    // DPDK enables its server interface only when the port starts; a client
    // arriving before gets "ID not found" (and testpmd 22.11 then panics in
    // its interrupt thread), so wait for the start.
    assert!(
        wait_until(Duration::from_secs(10), || path.exists()
            && tp.log().contains("Checking link statuses")),
        "testpmd server did not start:\n{}",
        tp.log()
    );
    (tp, path)
}

fn our_client(path: &Path, buffer_size: u32) -> Arc<MemifPort> {
    let mut cfg = MemifConfig::new("gen0", 0);
    cfg.buffer_size = buffer_size;
    Arc::new(MemifPort::client(cfg, ClientConfig::new(path)).unwrap())
}

fn testpmd_server_txonly_to_our_client(len: usize, buffer_size: u32, extra: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have_testpmd() {
        return;
    }
    let dir = TempDir::new("tps-tx");
    let mut args = vec![];
    args.extend_from_slice(extra);
    let (tp, path) = testpmd_server(&dir, "stx", "--forward-mode=txonly", "", &args);
    let port = our_client(&path, buffer_size);
    let counter = Counter::start(port.clone(), len);
    wait_link(&port, &tp);
    assert!(
        wait_until(Duration::from_secs(5), || counter.get() > 10_000),
        "no traffic: {:?}",
        port.status()
    );
    std::thread::sleep(Duration::from_millis(1500));
    let (_, tp_tx) = tp.stop();
    let (got, bad) = counter.finish();
    eprintln!("testpmd server txonly {len} B: TX-packets {tp_tx}, our client received {got}");
    assert_eq!(bad, 0);
    assert!(
        within_1pct(tp_tx, got),
        "testpmd sent {tp_tx}, we received {got}"
    );
    assert_eq!(
        port.counter("violations"),
        0,
        "{:?}",
        port.backend_counters()
    );
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_server_txonly_64b_into_our_client() {
    testpmd_server_txonly_to_our_client(64, 2048, &[]);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn testpmd_server_txonly_9000b_into_our_client() {
    testpmd_server_txonly_to_our_client(9000, 9216, &["--mbuf-size=10240", "--txpkts=9000"]);
}

fn our_client_to_testpmd_server_rxonly(len: usize, extra: &[&str]) {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    if !have_testpmd() {
        return;
    }
    let dir = TempDir::new("tps-rx");
    let (tp, path) = testpmd_server(&dir, "srx", "--forward-mode=rxonly", "", extra);
    let port = our_client(&path, 2048);
    wait_link(&port, &tp);
    std::thread::sleep(Duration::from_millis(300));
    let n = if len > 2048 { 20_000 } else { 200_000 };
    let sent = send_n(&port, n, len, Duration::from_secs(10));
    std::thread::sleep(Duration::from_millis(300));
    let (tp_rx, _) = tp.stop();
    eprintln!("our client sent {sent} x {len} B, testpmd server rxonly RX-packets {tp_rx}");
    assert_eq!(sent, n);
    assert!(
        within_1pct(sent, tp_rx),
        "we sent {sent}, testpmd received {tp_rx}"
    );
    assert_eq!(
        port.counter("violations"),
        0,
        "{:?}",
        port.backend_counters()
    );
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn our_client_sends_64b_to_testpmd_server() {
    our_client_to_testpmd_server_rxonly(64, &[]);
}

#[test]
#[ignore = "system: dpdk-testpmd"]
fn our_client_sends_9000b_chained_to_testpmd_server() {
    our_client_to_testpmd_server_rxonly(9000, &["--mbuf-size=10240"]);
}
