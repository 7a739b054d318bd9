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
//!
//! It also samples the bench's *other threads* ([`Others`]): threads of
//! other processes that may run on the SUT's CPUs (the bench lists them at
//! the trial's start, python/src/turnout/measure/others.py), read less
//! often (`schedstat`'s run time and runs, and for a thread not bound to
//! those CPUs `stat`'s last CPU), so that what else held the SUT's CPU is
//! known without a Python thread on the tester's.

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

/// A thread of another process that may run on the SUT's CPUs, as the
/// command line gives it: `PID:TID:BOUND`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OtherSpec {
    /// its process
    pub pid: u32,
    /// the thread
    pub tid: u32,
    /// affinity within the SUT's CPUs: its last CPU is not read
    pub bound: bool,
}

impl OtherSpec {
    /// `PID:TID:BOUND` (BOUND 1 or 0).
    pub fn parse(arg: &str) -> Result<OtherSpec, String> {
        let f: Vec<&str> = arg.split(':').collect();
        let num = |s: &str| {
            s.parse::<u32>()
                .map_err(|_| format!("{arg}: not PID:TID:BOUND"))
        };
        match f.as_slice() {
            [p, t, b @ ("0" | "1")] => Ok(OtherSpec {
                pid: num(p)?,
                tid: num(t)?,
                bound: *b == "1",
            }),
            _ => Err(format!("{arg}: not PID:TID:BOUND (BOUND 0 or 1)")),
        }
    }
}

/// An other thread being sampled; its files are opened at its first
/// sample and kept (read by path when an open failed, e.g. out of
/// descriptors).
struct Other {
    spec: OtherSpec,
    /// `/proc/PID/task/TID/schedstat` and `stat`
    schedstat_path: String,
    stat_path: String,
    schedstat: Option<File>,
    stat: Option<File>,
    /// its files were opened (or tried) once
    opened: bool,
}

/// One other thread at one sample: `[tid, run_ns, runs, cpu]` (cpu -1 for
/// a bound thread or an unreadable `stat`).
pub type OtherRow = (u32, i64, i64, i64);

impl Other {
    fn read(buf: &mut [u8], kept: Option<&File>, path: &str) -> Option<String> {
        match kept {
            Some(f) => Sampler::read(buf, f),
            None => std::fs::read_to_string(path).ok().filter(|s| !s.is_empty()),
        }
    }

    /// Its row now; None when it is gone.
    fn sample(&mut self, buf: &mut [u8]) -> Option<OtherRow> {
        let OtherSpec { tid, bound, .. } = self.spec;
        if !self.opened {
            self.opened = true;
            self.schedstat = File::open(&self.schedstat_path).ok();
            if !bound {
                self.stat = File::open(&self.stat_path).ok();
            }
        }
        let ss = Self::read(buf, self.schedstat.as_ref(), &self.schedstat_path)?;
        let (ns, runs) = parse_schedstat_runs(&ss)?;
        let mut cpu = -1;
        if !bound {
            if let Some(st) = Self::read(buf, self.stat.as_ref(), &self.stat_path) {
                cpu = parse_stat(&st).map_or(-1, |(_, _, _, c)| c);
            }
        }
        Some((tid, ns, runs, cpu))
    }
}

/// The other threads, sampled.
pub struct Others {
    threads: Vec<Other>,
    buf: Vec<u8>,
}

impl Others {
    /// A sampler of these threads.
    pub fn new(threads: Vec<OtherSpec>) -> Others {
        Others {
            threads: threads
                .into_iter()
                .map(|spec| Other {
                    spec,
                    schedstat_path: format!("/proc/{}/task/{}/schedstat", spec.pid, spec.tid),
                    stat_path: format!("/proc/{}/task/{}/stat", spec.pid, spec.tid),
                    schedstat: None,
                    stat: None,
                    opened: false,
                })
                .collect(),
            buf: vec![0; 4096],
        }
    }

    /// Whether there is any thread to sample.
    pub fn is_empty(&self) -> bool {
        self.threads.is_empty()
    }

    /// One sample of every thread still there.
    pub fn sample(&mut self) -> Vec<OtherRow> {
        let buf = &mut self.buf;
        self.threads
            .iter_mut()
            .filter_map(|t| t.sample(buf))
            .collect()
    }
}

/// `schedstat`'s first and third fields: ns on a CPU and runs (times it
/// was scheduled in).
pub fn parse_schedstat_runs(text: &str) -> Option<(i64, i64)> {
    let mut f = text.split_ascii_whitespace();
    let ns = f.next()?.parse().ok()?;
    let runs = f.nth(1)?.parse().ok()?;
    Some((ns, runs))
}

/// The document: every sample as `[t_ns, [row, ...]]` (CLOCK_MONOTONIC ns).
/// With other threads sampled (`others_every_ms` > 0), also
/// `others_every_ms` and `others`: every sample of them as
/// `[t_ns, [[tid, run_ns, runs, cpu], ...]]`.
pub fn document(
    samples: &[(u64, Vec<Row>)],
    every_ms: u64,
    stat_every: u64,
    others: &[(u64, Vec<OtherRow>)],
    others_every_ms: u64,
) -> Value {
    let mut doc = json!({
        "schema": "turnout-sample/1",
        "every_ms": every_ms,
        "stat_every": stat_every,
        "samples": samples
            .iter()
            .map(|(t, rows)| json!([t, rows]))
            .collect::<Vec<_>>(),
    });
    if others_every_ms > 0 {
        doc["others_every_ms"] = others_every_ms.into();
        doc["others"] = others
            .iter()
            .map(|(t, rows)| json!([t, rows]))
            .collect::<Vec<_>>()
            .into();
    }
    doc
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
        assert_eq!(
            parse_schedstat_runs("631513848 407654 92\n"),
            Some((631513848, 92))
        );
        assert_eq!(parse_schedstat_runs("631513848 407654"), None);
    }

    #[test]
    fn other_threads_are_given_as_pid_tid_bound() {
        let o = OtherSpec::parse("12:34:1").unwrap();
        assert_eq!((o.pid, o.tid, o.bound), (12, 34, true));
        assert!(!OtherSpec::parse("12:34:0").unwrap().bound);
        for bad in ["12:34", "12:34:2", "x:34:1", "12:34:1:0", ""] {
            assert!(OtherSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_other_thread_is_read_and_a_gone_one_left_out() {
        let me = std::process::id();
        let tid: u32 = testpeers::this_thread_id();
        // an unbound thread has its last CPU read, a bound one not; a
        // thread that does not exist gives no row
        let mut o = Others::new(vec![
            OtherSpec::parse(&format!("{me}:{tid}:0")).unwrap(),
            OtherSpec::parse(&format!("{me}:{tid}:1")).unwrap(),
            OtherSpec::parse(&format!("{me}:{}:0", u32::MAX - 1)).unwrap(),
        ]);
        let rows = o.sample();
        assert_eq!(rows.len(), 2, "{rows:?}");
        assert!(
            rows[0].1 >= 0 && rows[0].2 > 0 && rows[0].3 >= 0,
            "{rows:?}"
        );
        assert_eq!(rows[1].3, -1);
        // this thread's run time moves as it runs (schedstat is updated at
        // the scheduler's events): spin until a sample shows it
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        loop {
            let spin = std::time::Instant::now();
            while spin.elapsed() < std::time::Duration::from_millis(5) {}
            let again = o.sample();
            if again[0].1 > rows[0].1 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{rows:?} then {again:?}"
            );
        }
    }

    #[test]
    fn this_process_is_sampled_and_stat_is_read_when_asked() {
        let me: u32 = testpeers::this_thread_id();
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
