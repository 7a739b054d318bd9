//! turnout-cpu-rtt: how long a cache line takes to go from one CPU to
//! another and back, now. Two threads, pinned to `--a` and `--b`, hand a
//! counter back and forth through one cache line, in `--batches` batches
//! of `--rounds` round trips; the document gives the fastest batch's mean
//! (a batch one of the threads lost its CPU in is slower, not faster) and
//! the median batch's, in ns per round trip.
//!
//! On a virtual machine the host may run the two virtual CPUs on cores
//! that share a cache or on cores that do not, and change that while the
//! guest runs: every shared-memory path between a tester on one CPU and a
//! switch on the other (memif, vhost-user) then costs several times more.
//! The bench runs this before and after each trial (docs/bench.md, "Where
//! the host placed the virtual CPUs").
//!
//! Exit codes: 0 success, 1 a thread could not be pinned, 2 bad command
//! line.
#![deny(unsafe_code)]

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::Arc;

use clap::Parser;
use turnout_gen::sys;

/// Measures the round trip of a cache line between two CPUs.
#[derive(Parser, Debug)]
#[command(name = "turnout-cpu-rtt", version, about)]
struct Cli {
    /// The CPU of the first thread (this one).
    #[arg(long)]
    a: usize,
    /// The CPU of the second thread.
    #[arg(long)]
    b: usize,
    /// Batches of round trips.
    #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    batches: u32,
    /// Round trips per batch.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    rounds: u64,
}

/// One cache line of its own: the counter both threads spin on.
#[repr(align(128))]
struct Line(AtomicU64);

fn main() {
    let cli = Cli::parse();
    let line = Arc::new(Line(AtomicU64::new(0)));
    // the second thread's pinning: 0 pending, 1 done, 2 failed
    let ready = Arc::new(AtomicU8::new(0));
    let total = u64::from(cli.batches) * cli.rounds;
    let other = {
        let line = line.clone();
        let ready = ready.clone();
        let b = cli.b;
        std::thread::spawn(move || -> std::io::Result<()> {
            if let Err(e) = sys::pin_to_cpu(b) {
                ready.store(2, Ordering::Release);
                return Err(e);
            }
            ready.store(1, Ordering::Release);
            // answers every odd value with the next even one
            for i in 0..total {
                while line.0.load(Ordering::Acquire) != 2 * i + 1 {
                    std::hint::spin_loop();
                }
                line.0.store(2 * i + 2, Ordering::Release);
            }
            Ok(())
        })
    };
    if let Err(e) = sys::pin_to_cpu(cli.a) {
        eprintln!("turnout-cpu-rtt: cannot pin to CPU {}: {e}", cli.a);
        std::process::exit(1);
    }
    loop {
        match ready.load(Ordering::Acquire) {
            0 => std::thread::yield_now(),
            1 => break,
            _ => {
                let e = other.join().ok().and_then(Result::err);
                eprintln!(
                    "turnout-cpu-rtt: cannot pin to CPU {}: {}",
                    cli.b,
                    e.map_or_else(|| "failed".to_string(), |e| e.to_string())
                );
                std::process::exit(1);
            }
        }
    }
    let mut means = Vec::with_capacity(cli.batches as usize);
    let mut i = 0u64;
    for _ in 0..cli.batches {
        let t0 = sys::now_ns();
        for _ in 0..cli.rounds {
            line.0.store(2 * i + 1, Ordering::Release);
            while line.0.load(Ordering::Acquire) != 2 * i + 2 {
                std::hint::spin_loop();
            }
            i += 1;
        }
        means.push((sys::now_ns() - t0) as f64 / cli.rounds as f64);
    }
    match other.join() {
        Ok(Ok(())) => {}
        Ok(Err(e)) => {
            eprintln!("turnout-cpu-rtt: cannot pin to CPU {}: {e}", cli.b);
            std::process::exit(1);
        }
        Err(_) => {
            eprintln!("turnout-cpu-rtt: the second thread panicked");
            std::process::exit(1);
        }
    }
    means.sort_by(f64::total_cmp);
    println!(
        "{{\"schema\":\"turnout-cpu-rtt/1\",\"a\":{},\"b\":{},\"min_ns\":{:.1},\"p50_ns\":{:.1},\"batches\":{},\"rounds\":{}}}",
        cli.a,
        cli.b,
        means[0],
        means[means.len() / 2],
        cli.batches,
        cli.rounds
    );
}
