//! 2 MiB hugepages a test reserves for the run and gives back, safe
//! beside other tests that do the same.
//!
//! `/proc/sys/vm/nr_hugepages` is one number for the whole machine. A test
//! reserves by reading it, adding its pages and writing the sum; it gives
//! them back by subtracting. Two such read-modify-writes interleaved lose
//! one of them: a test then counts fewer pages than it asked for (while
//! the kernel gave them all), or gives back the absolute value it read,
//! taking another test's pages away. Every reservation and give-back here,
//! in the Python workbench (`turnout.testbed`) and on its hosts across SSH
//! holds an exclusive `flock` on [`LOCK`] around its read-modify-write, so
//! tests of several processes (`make test` runs system tests of both
//! languages at once) never interleave. A reservation the kernel cannot
//! fill at once (memory fragmented by other work) gives back what it got,
//! compacts memory and tries again until its deadline.

use std::fs::File;
use std::path::Path;
use std::time::{Duration, Instant};

/// The lock file every hugepage reservation holds (shared by the Rust
/// tests, the Python testbed and its namespace hosts, which see this
/// machine's `/run`).
const LOCK: &str = "/run/lock/turnout-hugepages.lock";

const NR: &str = "/proc/sys/vm/nr_hugepages";
const COMPACT: &str = "/proc/sys/vm/compact_memory";

fn nr() -> u64 {
    std::fs::read_to_string(NR)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0)
}

fn set_nr(n: u64) -> std::io::Result<()> {
    std::fs::write(NR, n.to_string())
}

/// Holds [`LOCK`] (exclusively) until dropped.
fn locked() -> std::io::Result<File> {
    if let Some(dir) = Path::new(LOCK).parent() {
        std::fs::create_dir_all(dir)?;
    }
    let f = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(LOCK)?;
    f.lock()?;
    Ok(f)
}

/// Hugepages added to the machine's pool for a test; given back (only
/// these, whatever others reserved meanwhile) on drop.
pub struct Hugepages {
    pages: u64,
}

impl Hugepages {
    /// The number of pages reserved.
    pub fn pages(&self) -> u64 {
        self.pages
    }
}

/// Adds `pages` 2 MiB hugepages to the pool (needs root). The kernel may
/// give fewer than asked when memory is fragmented: then what it gave goes
/// back, memory is compacted and the reservation tried again, until
/// `timeout` has passed (an error saying how many it got).
pub fn reserve_hugepages(pages: u64, timeout: Duration) -> Result<Hugepages, String> {
    let deadline = Instant::now() + timeout;
    loop {
        let got = {
            let _lock = locked().map_err(|e| format!("hugepage lock {LOCK}: {e}"))?;
            let before = nr();
            set_nr(before + pages).map_err(|e| format!("write {NR}: {e}"))?;
            let got = nr().saturating_sub(before);
            if got >= pages {
                return Ok(Hugepages { pages });
            }
            let _ = set_nr(nr().saturating_sub(got));
            got
        };
        if Instant::now() >= deadline {
            return Err(format!(
                "asked the kernel for {pages} hugepages, got {got} (for {timeout:?})"
            ));
        }
        let _ = std::fs::write(COMPACT, "1");
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Hugepages {
    fn drop(&mut self) {
        if let Ok(_lock) = locked() {
            let _ = set_nr(nr().saturating_sub(self.pages));
        }
    }
}
