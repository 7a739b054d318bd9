//! What the test set-ups of every crate share: a private temporary
//! directory, a poll with a deadline, and the command line every test's
//! dpdk-testpmd starts from.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A private directory under the temporary directory, removed with its
/// contents on drop (also when the test fails).
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// `$TMPDIR/turnout-test-TAG-PID-N`, empty: unique per process and
    /// call, so tests of several processes (and engineers) never share one.
    pub fn new(tag: &str) -> TempDir {
        static N: AtomicUsize = AtomicUsize::new(0);
        let p = std::env::temp_dir().join(format!(
            "turnout-test-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("create a temporary directory");
        TempDir(p)
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }

    /// `NAME.sock` inside the directory.
    pub fn sock(&self, name: &str) -> PathBuf {
        self.0.join(format!("{name}.sock"))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Polls `f` (every 2 ms) until it holds: true; or until `timeout` has
/// passed: false (after one last look). A test waits for the event it
/// checks with this, never for a fixed time.
pub fn wait_until(timeout: Duration, mut f: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if f() {
            return true;
        }
        if Instant::now() >= deadline {
            return f();
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The start of every test's dpdk-testpmd command line: `bin` (from
/// [`crate::testpmd`]) under `stdbuf -o0` (its statistics go through
/// stdio, buffered on a pipe, while its prompt is written directly:
/// unbuffered keeps them in order; stdbuf execs it, so the PID stays
/// testpmd's), without hugepages (`--no-huge -m 1024`) or PCI, on CPUs 0
/// and 1 with `main_lcore` as the main one, its runtime files under
/// `--file-prefix=prefix` (unique per test). The caller adds its `--vdev`s,
/// then `--` and the application's options (`--total-num-mbufs=8192` or
/// more: the default pool does not fit without hugepages).
pub fn testpmd_command(bin: &Path, prefix: &str, main_lcore: u32) -> Command {
    let mut cmd = Command::new("stdbuf");
    cmd.arg("-o0").arg(bin);
    cmd.args(["--no-huge", "-m", "1024", "--no-pci", "-l", "0,1"])
        .arg("--main-lcore")
        .arg(main_lcore.to_string())
        .arg(format!("--file-prefix={prefix}"));
    cmd
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_temp_dir_is_private_and_goes_away() {
        let a = TempDir::new("kit");
        let b = TempDir::new("kit");
        assert_ne!(a.0, b.0);
        std::fs::write(a.path("f"), b"x").unwrap();
        let p = a.0.clone();
        drop(a);
        assert!(!p.exists());
    }

    #[test]
    fn wait_until_sees_the_event_or_gives_up_at_the_deadline() {
        let mut n = 0;
        assert!(wait_until(Duration::from_secs(5), || {
            n += 1;
            n == 3
        }));
        let t0 = Instant::now();
        assert!(!wait_until(Duration::from_millis(30), || false));
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }
}
