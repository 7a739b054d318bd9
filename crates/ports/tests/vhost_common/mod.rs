//! Helpers shared by the vhost-user integration tests: a private temp
//! directory, a DPDK testpmd driven through its interactive prompt (with
//! `net_virtio_user`, container style), a patch logic, and a switch rig.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabric::{Ctx, Logic, Pkts, PortId, Verdict};

#[path = "../common/mod.rs"]
mod common;
#[allow(unused_imports)]
pub use common::in_place::{pump_in_place, Templates};
pub use common::{wait_until, TempDir};

/// Path of dpdk-testpmd, or None (crates/testpeers has said why: the test
/// skips, or has failed under `TURNOUT_REQUIRE_PEERS=1`).
pub fn testpmd_bin() -> Option<PathBuf> {
    testpeers::testpmd()
}

/// Skips the calling test (returns from it) when testpmd is missing; fails
/// it instead under `TURNOUT_REQUIRE_PEERS=1`.
#[macro_export]
macro_rules! need_testpmd {
    () => {
        if vhost_common::testpmd_bin().is_none() {
            return;
        }
    };
}

/// Forward statistics of one testpmd port after `stop`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stats {
    pub rx: u64,
    pub tx: u64,
}

/// A DPDK testpmd with one `net_virtio_user` port, driven interactively.
/// Killed (SIGKILL) on drop if still running; its runtime directory
/// `/var/run/dpdk/<prefix>` is removed.
pub struct Testpmd {
    child: Child,
    stdin: Option<ChildStdin>,
    out: Arc<Mutex<String>>,
    prefix: String,
}

static PREFIX_N: AtomicUsize = AtomicUsize::new(0);

impl Testpmd {
    /// Starts testpmd on `sock` in `fwd` mode (txonly, rxonly, mac, io...)
    /// with extra testpmd application arguments, and waits for its prompt.
    pub fn start(sock: &Path, fwd: &str, extra: &[&str]) -> Testpmd {
        let prefix = format!(
            "tvu{}x{}",
            std::process::id(),
            PREFIX_N.fetch_add(1, Ordering::Relaxed)
        );
        let vdev = format!(
            "net_virtio_user0,path={},queues=1,queue_size=1024",
            sock.display()
        );
        let bin = testpmd_bin().expect("dpdk-testpmd");
        let mut cmd = testpeers::testpmd_command(&bin, &prefix, 1);
        cmd.arg("--log-level=user1,6")
            .arg(format!("--vdev={vdev}"))
            .args(["--", "-i", "--total-num-mbufs=8192", "--no-lsc-interrupt"])
            .arg(format!("--forward-mode={fwd}"))
            .args(extra)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = cmd.spawn().expect("spawn dpdk-testpmd");
        let stdout = child.stdout.take().unwrap();
        let out = Arc::new(Mutex::new(String::new()));
        let o = out.clone();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = Vec::new();
            loop {
                line.clear();
                match r.read_until(b'>', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => o.lock().unwrap().push_str(&String::from_utf8_lossy(&line)),
                }
            }
        });
        let stdin = child.stdin.take();
        let t = Testpmd {
            child,
            stdin,
            out,
            prefix,
        };
        assert!(
            t.wait_for("testpmd>", 0, Duration::from_secs(60)),
            "testpmd did not start:\n{}",
            t.output()
        );
        t
    }

    /// Everything testpmd printed so far.
    pub fn output(&self) -> String {
        self.out.lock().unwrap().clone()
    }

    /// Waits until `pat` appears in the output after byte `from`.
    pub fn wait_for(&self, pat: &str, from: usize, timeout: Duration) -> bool {
        wait_until(timeout, || {
            let o = self.out.lock().unwrap();
            o.len() > from && o[from..].contains(pat)
        })
    }

    /// Sends one command and waits for the next prompt.
    pub fn cmd(&mut self, c: &str) -> String {
        let from = self.out.lock().unwrap().len();
        if let Some(s) = self.stdin.as_mut() {
            let _ = writeln!(s, "{c}");
            let _ = s.flush();
        }
        self.wait_for("testpmd>", from, Duration::from_secs(30));
        self.out.lock().unwrap()[from..].to_string()
    }

    /// `stop`, returning the accumulated forward statistics.
    pub fn stop(&mut self) -> Stats {
        let o = self.cmd("stop");
        let grab = |key: &str| -> u64 {
            o.rfind(key)
                .and_then(|i| {
                    o[i + key.len()..]
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                })
                .unwrap_or(0)
        };
        Stats {
            rx: grab("RX-packets:"),
            tx: grab("TX-packets:"),
        }
    }

    /// Port statistics (`show port stats 0`): totals since start.
    pub fn port_stats(&mut self) -> Stats {
        let o = self.cmd("show port stats 0");
        let grab = |key: &str| -> u64 {
            o.find(key)
                .and_then(|i| {
                    o[i + key.len()..]
                        .split_whitespace()
                        .next()
                        .and_then(|n| n.parse().ok())
                })
                .unwrap_or(0)
        };
        Stats {
            rx: grab("RX-packets:"),
            tx: grab("TX-packets:"),
        }
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGKILL, as a crashing VNF.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// `quit` and wait (bounded), then SIGKILL if needed.
    pub fn quit(mut self) {
        if let Some(mut s) = self.stdin.take() {
            let _ = writeln!(s, "quit");
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(10) {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Testpmd {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        let _ = std::fs::remove_dir_all(format!("/var/run/dpdk/{}", self.prefix));
    }
}

/// Static cross-connect: a <-> b; anything else is dropped.
pub struct Patch(pub PortId, pub PortId);

impl Logic for Patch {
    fn name(&self) -> &'static str {
        "patch"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let out = if ingress == self.0 {
            Verdict::Port(self.1)
        } else if ingress == self.1 {
            Verdict::Port(self.0)
        } else {
            Verdict::Drop(fabric::DropReason::NoMatch)
        };
        for v in verdicts.iter_mut().take(pkts.len()) {
            *v = out;
        }
    }
}

/// Counters of a port from the switch, by name.
pub fn port(sw: &fabric::Switch, name: &str) -> fabric::PortStats {
    sw.port_stats()
        .into_iter()
        .find(|p| p.name == name)
        .expect("port")
}

/// Asserts `a` and `b` agree within 1 %.
pub fn assert_close(what: &str, a: u64, b: u64) {
    let d = a.abs_diff(b) as f64;
    assert!(
        d <= 0.01 * a.max(b) as f64,
        "{what}: {a} vs {b} differ by more than 1 %"
    );
}
