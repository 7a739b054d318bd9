//! What the system tests that drive turnout-gen against a peer (testpmd,
//! OVS-DPDK) share: one test at a time, the turnout-gen child with its
//! output read while it runs, and stopping a peer daemon by PID.

#![allow(dead_code)] // each test binary uses its own part

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The turnout-gen binary cargo built for these tests.
pub const GEN: &str = env!("CARGO_BIN_EXE_turnout-gen");

static SERIAL: Mutex<()> = Mutex::new(());

/// One peer test at a time: two peers and generators on this 2-core
/// machine would measure, or starve, each other. A test that failed while
/// holding it does not stop the others.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

/// The lines of `r` on a channel, read by a thread of their own.
pub fn lines(r: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// Stops a peer daemon we started: SIGTERM by its PID, SIGKILL after 5 s.
pub fn stop(child: &mut Child) {
    if let Ok(None) = child.try_wait() {
        // SAFETY: kill(2) on our own child's PID, which it still is (not
        // reaped yet).
        unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

/// A running turnout-gen; its stderr lines on a channel, its stdout read
/// while it runs (a large JSON document must not fill the pipe). Killed
/// when dropped, also when the test fails.
pub struct Gen {
    child: Child,
    /// Its stderr, line by line (interval lines, messages).
    pub err: Receiver<String>,
    out: Option<JoinHandle<String>>,
}

impl Gen {
    /// Starts turnout-gen with `args`.
    pub fn spawn(args: &[&str]) -> Gen {
        let mut child = Command::new(GEN)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn turnout-gen");
        let err = lines(child.stderr.take().unwrap());
        let mut o = child.stdout.take().unwrap();
        let out = Some(std::thread::spawn(move || {
            let mut s = String::new();
            let _ = o.read_to_string(&mut s);
            s
        }));
        Gen { child, err, out }
    }

    /// Waits for the first interval line: the port is up and the loop runs.
    pub fn wait_running(&self) {
        let l = self
            .err
            .recv_timeout(Duration::from_secs(10))
            .expect("turnout-gen never started its loop");
        assert!(
            l.contains("turnout-gen/1-interval"),
            "unexpected stderr: {l}"
        );
    }

    /// Whether it is still running (not exited yet).
    pub fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks it to stop early (SIGINT, as Ctrl-C): it reports what it did.
    pub fn interrupt(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            // SAFETY: kill(2) on our own child, not reaped yet.
            unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGINT) };
        }
    }

    /// Waits (at most `within`) for it to end successfully: its JSON
    /// document and its stderr lines other than interval lines.
    pub fn finish(mut self, within: Duration) -> (serde_json::Value, Vec<String>) {
        let t0 = Instant::now();
        let st = loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                break st;
            }
            if t0.elapsed() > within {
                let _ = self.child.kill();
                let _ = self.child.wait();
                let errs: Vec<String> = self.err.try_iter().collect();
                panic!("turnout-gen did not finish: {errs:?}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = self.out.take().unwrap().join().unwrap();
        // The stderr reader may still be passing on the last lines.
        std::thread::sleep(Duration::from_millis(50));
        let errs: Vec<String> = self
            .err
            .try_iter()
            .filter(|l| !l.contains("1-interval"))
            .collect();
        assert!(st.success(), "turnout-gen failed: {st}: {errs:?}");
        let last = out.lines().last().unwrap_or("");
        (serde_json::from_str(last).expect("a JSON document"), errs)
    }
}

impl Drop for Gen {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
