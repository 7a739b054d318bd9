//! `turnout-sample`: the CPU time of every thread of some processes,
//! read from /proc at a fixed period, for the bench's CPU figures
//! (python/src/turnout/measure/cpu.py reads its document).
//!
//! The bench samples on the tester's CPU while the traffic flows, so what a
//! sample costs is taken from the tester. Here a sample is one `getdents`
//! per process and one `pread` per thread of the `schedstat` file kept open
//! (ns on a CPU: the source of every CPU figure), plus `stat` (utime and
//! stime ticks, the last CPU, the name) in the first, the last and every
//! `stat_every`-th sample: tens of µs where the bench's Python sampler took
//! a few hundred.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::FileExt;

use serde_json::{json, Value};

/// A thread's files, kept open between samples, and what its last `stat`
/// said.
struct Thread {
    pid: u32,
    schedstat: File,
    stat: Option<File>,
    name: String,
    cpu: i64,
}

/// One thread at one sample: `[pid, tid, name, utime, stime, cpu, run_ns]`
/// (utime and stime -1 when `stat` was not read, run_ns -1 when schedstat
/// was unreadable).
pub type Row = (u32, u32, String, i64, i64, i64, i64);

/// The threads of some processes, sampled.
pub struct Sampler {
    pids: Vec<u32>,
    threads: HashMap<u32, Thread>,
    buf: Vec<u8>,
}

/// `stat`'s fields after the name: (utime, stime, last CPU), and the name.
pub fn parse_stat(text: &str) -> Option<(String, i64, i64, i64)> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let name = text.get(open + 1..close)?.to_string();
    let mut f = text.get(close + 2..)?.split_ascii_whitespace();
    // fields 3.. of proc_pid_stat(5); utime is the 14th, stime the 15th,
    // processor the 39th: indices 11, 12 and 36 after the state (3rd)
    let utime = f.nth(11)?.parse().ok()?;
    let stime = f.next()?.parse().ok()?;
    let cpu = f.nth(36 - 13)?.parse().ok()?;
    Some((name, utime, stime, cpu))
}

/// `schedstat`'s first field: ns on a CPU.
pub fn parse_schedstat(text: &str) -> Option<i64> {
    text.split_ascii_whitespace().next()?.parse().ok()
}

impl Sampler {
    /// A sampler of the threads of `pids`.
    pub fn new(pids: Vec<u32>) -> Sampler {
        Sampler {
            pids,
            threads: HashMap::new(),
            buf: vec![0; 4096],
        }
    }

    fn read(buf: &mut [u8], f: &File) -> Option<String> {
        let n = f.read_at(buf, 0).ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// One sample of every live thread; `full` reads `stat` too (and a
    /// thread seen for the first time always has it read).
    pub fn sample(&mut self, full: bool) -> Vec<Row> {
        let mut rows = Vec::with_capacity(self.threads.len());
        let mut live: Vec<u32> = Vec::with_capacity(self.threads.len());
        for &pid in &self.pids {
            let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
                continue;
            };
            for e in dir.flatten() {
                let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                let base = format!("/proc/{pid}/task/{tid}/");
                let new = !self.threads.contains_key(&tid);
                if new {
                    let Ok(schedstat) = File::open(format!("{base}schedstat")) else {
                        continue;
                    };
                    let t = Thread {
                        pid,
                        schedstat,
                        stat: None,
                        name: String::new(),
                        cpu: -1,
                    };
                    self.threads.insert(tid, t);
                }
                let Some(t) = self.threads.get_mut(&tid) else {
                    continue;
                };
                let (mut utime, mut stime) = (-1, -1);
                if full || new {
                    if t.stat.is_none() {
                        t.stat = File::open(format!("{base}stat")).ok();
                    }
                    let got = t
                        .stat
                        .as_ref()
                        .and_then(|f| Self::read(&mut self.buf, f))
                        .and_then(|s| parse_stat(&s));
                    match got {
                        Some((name, u, s, cpu)) => {
                            t.name = name;
                            t.cpu = cpu;
                            (utime, stime) = (u, s);
                        }
                        None => continue, // it ended
                    }
                }
                let run_ns = Self::read(&mut self.buf, &t.schedstat)
                    .and_then(|s| parse_schedstat(&s))
                    .unwrap_or(-1);
                rows.push((t.pid, tid, t.name.clone(), utime, stime, t.cpu, run_ns));
                live.push(tid);
            }
        }
        if full {
            // threads not listed any more ended: close their files
            let live: std::collections::HashSet<u32> = live.into_iter().collect();
            self.threads.retain(|tid, _| live.contains(tid));
        }
        rows
    }
}

/// The document: every sample as `[t_ns, [row, ...]]` (CLOCK_MONOTONIC ns).
pub fn document(samples: &[(u64, Vec<Row>)], every_ms: u64, stat_every: u64) -> Value {
    json!({
        "schema": "turnout-sample/1",
        "every_ms": every_ms,
        "stat_every": stat_every,
        "samples": samples
            .iter()
            .map(|(t, rows)| json!([t, rows]))
            .collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_and_schedstat_parse_as_proc_prints_them() {
        let s = "4242 (turnout w0) S 1 2 3 0 -1 4194560 10 0 0 0 17 5 0 0 20 0 3 0 \
                 100 200 300 1844674407370955 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        assert_eq!(parse_stat(s), Some(("turnout w0".into(), 17, 5, 1)));
        assert_eq!(parse_schedstat("631513848 407654 92\n"), Some(631513848));
        assert_eq!(parse_stat("garbage"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn this_process_is_sampled_and_stat_is_read_when_asked() {
        // this thread's id: /proc/thread-self is PID/task/TID
        let me: u32 = std::fs::read_link("/proc/thread-self")
            .unwrap()
            .file_name()
            .and_then(|n| n.to_str()?.parse().ok())
            .unwrap();
        let mut s = Sampler::new(vec![std::process::id()]);
        let first = s.sample(false); // new threads: stat read all the same
        assert!(first.iter().any(|r| r.1 == me));
        assert!(first
            .iter()
            .all(|r| r.3 >= 0 && r.6 >= 0 && !r.2.is_empty()));
        let second = s.sample(false);
        let mine = second.iter().find(|r| r.1 == me).unwrap();
        assert!(mine.3 == -1 && mine.6 >= 0, "{mine:?}");
        let a = first.iter().find(|r| r.1 == me).unwrap().6;
        // the run time of a running thread moves at the scheduler's ticks:
        // spin until a full sample shows it moved
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let spin = std::time::Instant::now();
            while spin.elapsed() < std::time::Duration::from_millis(5) {}
            let third = s.sample(true);
            let b = third.iter().find(|r| r.1 == me).unwrap().clone();
            assert!(b.3 >= 0, "{b:?}");
            if b.6 > a {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{a} then {b:?}");
        }
    }
}
