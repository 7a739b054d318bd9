//! turnout-sample: samples the CPU time of every thread of the given
//! processes every `--every-ms` until SIGINT or SIGTERM, then prints one
//! JSON document after the line `ready` it printed once it could be
//! stopped and its first samples were taken (crates/gen/src/sample.rs;
//! docs/bench.md, "CPU"). The
//! bench starts it on the tester's CPU for each trial instead of sampling
//! from Python. With `--other PID:TID:BOUND` it also samples those
//! threads (the others that may run on the SUT's CPUs) every
//! `--others-every-ms`.
//!
//! Exit codes: 0 success, 1 the document could not be written, 2 bad
//! command line.
#![deny(unsafe_code)]

use std::io::Write;

use clap::Parser;
use turnout_gen::sample::{document, OtherSpec, Others, Sampler};
use turnout_gen::sys;

/// Samples the threads of PIDs until SIGINT or SIGTERM; prints the samples
/// as JSON on stdout.
#[derive(Parser, Debug)]
#[command(name = "turnout-sample", version, about)]
struct Cli {
    /// Milliseconds between samples.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    every_ms: u64,
    /// Read `stat` (ticks, last CPU) in every Nth sample (and the first and
    /// the last); `schedstat` in each.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u64).range(1..=1_000))]
    stat_every: u64,
    /// Milliseconds between samples of the `--other` threads (taken at
    /// the first sample this long after the last).
    #[arg(long, default_value_t = 150, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    others_every_ms: u64,
    /// A thread of another process to sample less often: `PID:TID:BOUND`,
    /// BOUND 1 when it may run only on the SUT's CPUs (its last CPU is then
    /// not read). Repeatable.
    #[arg(long = "other", value_parser = OtherSpec::parse)]
    others: Vec<OtherSpec>,
    /// The processes whose threads are sampled.
    #[arg(required = true)]
    pids: Vec<u32>,
}

fn main() {
    let cli = Cli::parse();
    if let Err(e) = sys::install_stop_handlers() {
        eprintln!("turnout-sample: cannot install signal handlers: {e}");
        std::process::exit(1);
    }
    let mut s = Sampler::new(cli.pids);
    let mut samples = Vec::new();
    let mut o = Others::new(cli.others);
    let mut others = Vec::new();
    let others_period = cli.others_every_ms * 1_000_000;
    let period = cli.every_ms * 1_000_000;
    let mut next = sys::now_ns();
    let mut next_others = next;
    let mut i = 0u64;
    // the time spent taking samples, and the process's own CPU time: what
    // the sampler cost the CPU it shares
    let mut busy_ns = 0u64;
    while !sys::stop_requested() {
        let t = sys::now_ns();
        samples.push((t, s.sample(i.is_multiple_of(cli.stat_every))));
        if !o.is_empty() && t >= next_others {
            let at = sys::now_ns();
            others.push((at, o.sample()));
            next_others = at + others_period;
        }
        busy_ns += sys::now_ns() - t;
        if i == 0 {
            // the caller may stop us (SIGINT) once it has read this line
            // (before it, a signal would end the process without its
            // document), and the first samples are taken: what runs from
            // then on is inside the samples
            say_ready();
        }
        i += 1;
        // one sleep a period (each wake-up takes the tester's CPU); a stop
        // signal ends it early; late (descheduled): no burst of samples
        let now = sys::now_ns();
        next += period;
        if next <= now {
            next = now + period;
        }
        if !sys::stop_requested() {
            sys::sleep_interruptible_ns(next - now);
        }
    }
    if i == 0 {
        say_ready(); // stopped before the first sample: still a document
    }
    let t = sys::now_ns();
    samples.push((t, s.sample(true)));
    if !o.is_empty() {
        others.push((sys::now_ns(), o.sample()));
    }
    busy_ns += sys::now_ns() - t;
    let others_every_ms = if o.is_empty() { 0 } else { cli.others_every_ms };
    let mut doc = document(
        &samples,
        cli.every_ms,
        cli.stat_every,
        &others,
        others_every_ms,
    );
    doc["sampling_ns"] = busy_ns.into();
    doc["cpu_ns"] = sys::thread_cpu_ns().into();
    let mut out = std::io::stdout().lock();
    if writeln!(out, "{doc}").and_then(|_| out.flush()).is_err() {
        std::process::exit(1);
    }
}

/// The line the caller waits for before it stops us (module doc).
fn say_ready() {
    let mut out = std::io::stdout().lock();
    if writeln!(out, "ready").and_then(|_| out.flush()).is_err() {
        std::process::exit(1);
    }
}
