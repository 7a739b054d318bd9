//! turnout-sample's command line: it says `ready`, samples until SIGINT,
//! then prints one document of every sample; a bad option exits 2.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

const SAMPLE: &str = env!("CARGO_BIN_EXE_turnout-sample");

/// Runs turnout-sample with `args` until it has woken `wakes` times (its
/// own schedstat; while this thread spins, for it to see), stops it with
/// SIGINT and returns its document.
fn sample_until(args: &[String], wakes: u64) -> serde_json::Value {
    let mut child = Command::new(SAMPLE)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn turnout-sample");
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    out.read_line(&mut line).unwrap();
    assert_eq!(line, "ready\n");
    let runs = || -> u64 {
        let s = std::fs::read_to_string(format!("/proc/{}/schedstat", child.id())).unwrap();
        s.split_whitespace().nth(2).unwrap().parse().unwrap()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while runs() < wakes {
        assert!(
            std::time::Instant::now() < deadline,
            "it woke {} times in 60 s",
            runs()
        );
        let t = std::time::Instant::now();
        while t.elapsed() < std::time::Duration::from_millis(1) {}
    }
    // SAFETY: a signal to the child we started.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGINT) }, 0);
    let mut rest = String::new();
    out.read_to_string(&mut rest).unwrap();
    assert!(child.wait().unwrap().success());
    serde_json::from_str(rest.trim()).unwrap()
}

#[test]
fn it_samples_this_process_until_sigint_and_prints_every_sample() {
    let me = std::process::id();
    let args = ["--every-ms", "2", "--stat-every", "3", &me.to_string()].map(String::from);
    let doc = sample_until(&args, 10);
    assert_eq!(doc["schema"], "turnout-sample/1");
    let samples = doc["samples"].as_array().unwrap();
    assert!(samples.len() >= 2, "{doc}");
    // [t_ns, [[pid, tid, name, utime, stime, cpu, run_ns], ...]]
    let main = |s: &serde_json::Value| {
        s[1].as_array()
            .unwrap()
            .iter()
            .find(|r| r[1] == me)
            .cloned()
            .unwrap()
    };
    let (first, last) = (main(&samples[0]), main(samples.last().unwrap()));
    assert!(first[3].as_i64().unwrap() >= 0 && last[3].as_i64().unwrap() >= 0);
    assert!(last[6].as_i64() >= first[6].as_i64());
    assert!(samples[0][0].as_u64() < samples.last().unwrap()[0].as_u64());
    assert!(doc["cpu_ns"].as_u64().unwrap() > 0);
    // no other threads asked for: no "others"
    assert!(doc.get("others").is_none(), "{doc}");
}

#[test]
fn other_threads_are_sampled_at_their_own_period() {
    let me = std::process::id();
    let tid: u32 = testpeers::this_thread_id();
    let args = [
        "--every-ms".into(),
        "2".into(),
        "--others-every-ms".into(),
        "10".into(),
        "--other".into(),
        format!("{me}:{tid}:0"),
        "--other".into(),
        format!("{me}:{}:1", u32::MAX - 1), // no such thread
        me.to_string(),
    ];
    let doc = sample_until(&args, 20);
    assert_eq!(doc["others_every_ms"], 10);
    let others = doc["others"].as_array().unwrap();
    let samples = doc["samples"].as_array().unwrap();
    // [t_ns, [[tid, run_ns, runs, cpu], ...]]: the one thread that exists
    // in each, with its last CPU
    assert!(others.len() >= 2 && others.len() <= samples.len(), "{doc}");
    for o in others {
        let rows = o[1].as_array().unwrap();
        assert_eq!(rows.len(), 1, "{o}");
        assert_eq!(rows[0][0], tid);
        assert!(rows[0][2].as_i64().unwrap() > 0 && rows[0][3].as_i64().unwrap() >= 0);
    }
    // at their own period: 10 ms apart at least, but the last (at the stop)
    let t: Vec<u64> = others.iter().map(|o| o[0].as_u64().unwrap()).collect();
    let (periodic, _) = t.split_at(t.len() - 1);
    assert!(
        periodic.windows(2).all(|w| w[1] - w[0] >= 10_000_000),
        "{t:?}"
    );
    assert!(t[t.len() - 1] > t[t.len() - 2]);
}

#[test]
fn a_bad_option_exits_2() {
    for args in [
        vec![],
        vec!["--every-ms", "0", "1"],
        vec!["x"],
        vec!["--other", "1:2", "1"],
        vec!["--other", "1:2:3", "1"],
    ] {
        let o = Command::new(SAMPLE).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
    }
}
