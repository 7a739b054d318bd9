//! turnout-gen: the traffic generator, receiver, reflector and chain VNF of
//! turnout (docs/turnout-gen.md is the contract with the bench).
//!
//! One thread does everything (the data path of a role, pacing, stats), so
//! a run costs exactly one core, pinned with `--cpu`. The ports are the
//! project's own backends (crates/ports) used through the `fabric::Port`
//! trait. The data path never allocates or blocks; every frame not sent or
//! not forwarded is counted under a reason.
//!
//! Exit codes: 0 success, 1 error while running, 2 bad command line,
//! 3 the port's peer never came up, 4 `txrx` received none of the frames
//! it sent (unless `--allow-no-rx`).
//!
//! Output: the JSON document on stdout when stdout is not a terminal (the
//! bench reads it from a pipe), or in `--json FILE`; a terminal gets a
//! short summary instead (`summary.rs`).
#![deny(unsafe_code)]

use std::io::{IsTerminal, Write};

use clap::Parser;
use turnout_gen::cli::Role;
use turnout_gen::{cli, run, summary, sys};

fn main() {
    let cli = match cli::Cli::try_parse() {
        Ok(c) => c,
        // clap exits 0 for --help/--version and 2 for usage errors.
        Err(e) => e.exit(),
    };
    if let Some(cpu) = cli.role.general().cpu {
        if !sys::cpu_allowed(cpu) {
            eprintln!(
                "turnout-gen {}: --cpu {cpu}: not a CPU this process may run on",
                cli.role.name()
            );
            std::process::exit(2);
        }
    }
    if let Err(e) = sys::install_stop_handlers() {
        eprintln!("turnout-gen: cannot install signal handlers: {e}");
        std::process::exit(1);
    }
    let result = run::run(&cli.role);
    // memif servers (role=server) remove their sockets
    turnout_gen::ports::close_servers();
    let doc = match result {
        Ok(d) => d,
        Err(f) => {
            eprintln!("turnout-gen {}: {}", cli.role.name(), f.msg);
            std::process::exit(f.code);
        }
    };
    let text = match serde_json::to_string(&doc) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("turnout-gen: cannot encode the document: {e}");
            std::process::exit(1);
        }
    };
    let terminal = std::io::stdout().is_terminal();
    // --json FILE: there; '-' or no --json with stdout not a terminal: stdout
    let target = match cli.role.general().json.as_deref() {
        Some(t) => Some(t),
        None if !terminal => Some("-"),
        None => None,
    };
    let value = serde_json::to_value(&doc).unwrap_or_default();
    let res = match target {
        Some("-") => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}").and_then(|_| out.flush())
        }
        Some(file) => std::fs::write(file, format!("{text}\n")),
        None => Ok(()),
    };
    if let Err(e) = res {
        let to = target.unwrap_or("-");
        eprintln!("turnout-gen: cannot write the document to {to}: {e}");
        std::process::exit(1);
    }
    if terminal && target != Some("-") {
        let mut out = std::io::stdout().lock();
        let _ = out
            .write_all(summary::summary(&value).as_bytes())
            .and_then(|_| out.flush());
    }
    if let Some(e) = &doc.error {
        eprintln!("turnout-gen {}: {e}", cli.role.name());
        std::process::exit(1);
    }
    let allow_no_rx = matches!(&cli.role, Role::Txrx(a) if a.allow_no_rx);
    if !allow_no_rx {
        if let Some(why) = summary::nothing_received(&value) {
            eprintln!("turnout-gen {}: {why}", cli.role.name());
            std::process::exit(summary::EXIT_NOTHING_RECEIVED);
        }
    }
}
