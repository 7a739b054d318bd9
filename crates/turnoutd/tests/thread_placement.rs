//! turnoutd's threads that are not workers (main, control API and its
//! connections, flow timer) stay off the CPUs its workers are pinned to:
//! a busy-polling worker that shares its CPU with them waits for it, and
//! the frames with it (docs/bench.md, "Latency at low rates"). Runs the
//! real binary and reads each thread's `Cpus_allowed_list` from /proc.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills the daemon even when an assertion fails.
struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn parse_list(s: &str) -> Vec<usize> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

fn field(status: &str, key: &str) -> String {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .unwrap_or_else(|| panic!("no {key} in {status}"))
        .trim()
        .to_string()
}

/// (thread name, CPUs it may run on) of every thread of `pid`.
fn threads(pid: u32) -> Vec<(String, Vec<usize>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let p = e.unwrap().path();
        let Ok(status) = std::fs::read_to_string(p.join("status")) else {
            continue; // a connection thread that just ended
        };
        out.push((
            field(&status, "Name:"),
            parse_list(&field(&status, "Cpus_allowed_list:")),
        ));
    }
    out
}

fn wait_for(path: &Path, child: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !path.exists() {
        if let Some(st) = child.try_wait().unwrap() {
            panic!("turnoutd exited {st} before opening {}", path.display());
        }
        assert!(
            Instant::now() < deadline,
            "turnoutd did not open {}",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn non_worker_threads_stay_off_the_worker_cpu() {
    placement("poll");
}

/// The default adaptive wake-up has one more thread per worker, its
/// prober (`turnout-p0`): it too stays off the worker's CPU (it signals
/// the worker from elsewhere; on the worker's CPU it would take the CPU
/// from the worker it measures).
#[test]
fn the_wakeup_prober_stays_off_the_worker_cpu() {
    placement("adaptive");
}

fn placement(wakeup: &str) {
    let allowed = turnoutd::sys::allowed_cpus().unwrap();
    let cpu = *allowed.last().unwrap();
    let dir: PathBuf = std::env::temp_dir().join(format!(
        "turnoutd-placement-{}-{wakeup}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let sock = dir.join("ctl.sock");
    let cfg = dir.join("turnoutd.toml");
    std::fs::write(
        &cfg,
        format!(
            "[switch]\ncontrol_socket = {:?}\nwakeup = {wakeup:?}\n\n[[workers]]\ncpu = {cpu}\n",
            sock.to_str().unwrap()
        ),
    )
    .unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_turnoutd"))
        .arg("--config")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut d = Daemon(child);
    wait_for(&sock, &mut d.0);
    // An open API connection has a thread of its own: it counts too.
    let mut conn = UnixStream::connect(&sock).unwrap();
    conn.write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"stats\"}\n")
        .unwrap();
    let mut line = String::new();
    BufReader::new(conn.try_clone().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert!(line.contains("\"result\""), "stats: {line}");

    let ts = threads(d.0.id());
    let (workers, others): (Vec<_>, Vec<_>) = ts
        .iter()
        .partition(|(name, _)| name.starts_with("turnout-w"));
    assert_eq!(workers.len(), 1, "one worker thread: {ts:?}");
    assert_eq!(workers[0].1, vec![cpu], "the worker is pinned: {ts:?}");
    assert!(
        others.len() >= 3,
        "main, control, its connection, flow timer: {ts:?}"
    );
    let probers = others
        .iter()
        .filter(|(name, _)| name.starts_with("turnout-p"))
        .count();
    assert_eq!(
        probers,
        usize::from(wakeup == "adaptive"),
        "a prober per adaptive worker: {ts:?}"
    );
    if allowed.len() >= 2 {
        for (name, cpus) in &others {
            assert!(
                !cpus.contains(&cpu) && !cpus.is_empty(),
                "thread {name} may run on the worker's CPU {cpu}: {cpus:?} (all: {ts:?})"
            );
            assert!(cpus.iter().all(|c| allowed.contains(c)), "{name}: {cpus:?}");
        }
    } else {
        // One CPU: nothing to move them to; they share it, and say so.
        for (name, cpus) in &others {
            assert_eq!(cpus, &allowed, "thread {name}");
        }
    }
    drop(conn);
    drop(d);
    let _ = std::fs::remove_dir_all(&dir);
}
