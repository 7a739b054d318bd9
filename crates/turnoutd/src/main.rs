//! `turnoutd --config FILE` runs the switch; `turnoutd --check-config FILE`
//! validates a config and exits (0 good, 2 bad). The command line is
//! `turnoutd::cli`; see docs/turnoutd.md.
#![deny(unsafe_code)]

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use turnoutd::cli::{Cli, Mode};
use turnoutd::config::Config;
use turnoutd::daemon::{self, Daemon, StartError};
use turnoutd::log::{self, Level};
use turnoutd::logics::Builtin;
use turnoutd::metrics::MetricsServer;
use turnoutd::server::ControlServer;
use turnoutd::sys;

fn main() -> ExitCode {
    // --help, --version and a bad command line print and exit here (0, 0, 2).
    let cli = Cli::parse_or_exit();
    log::set_level(cli.log_level.0);
    match cli.mode() {
        Mode::Check(path) => {
            match Config::load(&path).and_then(|c| daemon::check_config(&c, &Builtin).map(|_| c)) {
                Ok(c) => {
                    println!(
                        "config ok: {} port(s), {} worker(s), logic {}",
                        c.ports.len(),
                        c.workers.len(),
                        c.logic.name
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("{e}");
                    ExitCode::from(2)
                }
            }
        }
        Mode::Run(path) => run(&path),
    }
}

fn run(path: &std::path::Path) -> ExitCode {
    let cfg = match Config::load(path) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
    };
    // Signals are blocked before any thread starts, so every thread inherits
    // the mask and only the main thread's sigtimedwait takes them.
    if let Err(e) = sys::block_shutdown_signals() {
        eprintln!("turnoutd: cannot block signals: {e}");
        return ExitCode::FAILURE;
    }
    // Likewise the CPU set: every thread that is not a worker (this one, the
    // control API and its connections, the flow timer, metrics, OpenFlow,
    // link watchers) stays off the workers' CPUs, so a busy-polling worker
    // never waits for a CPU behind them (docs/bench.md, "Latency at low
    // rates"). Workers pin themselves, which overrides what they inherit.
    let pinned: Vec<usize> = cfg.workers.iter().filter_map(|w| w.cpu).collect();
    // A worker CPU this process may not run on (a one-CPU host given a
    // config written for two, a cpuset): the worker cannot pin itself and
    // runs on the CPUs it inherits. Said once, at start.
    if let Ok(allowed) = sys::allowed_cpus() {
        for (i, w) in cfg.workers.iter().enumerate() {
            if let Some(cpu) = w.cpu.filter(|c| !allowed.contains(c)) {
                turnoutd::log!(
                    Level::Warn,
                    "main",
                    "a worker's cpu is not one this process may run on: it runs unpinned",
                    worker = i,
                    cpu = cpu,
                    allowed = sys::cpu_list(&allowed)
                );
            }
        }
    }
    match sys::keep_off_worker_cpus(&pinned) {
        Ok(sys::Housekeeping::Unpinned) => {}
        Ok(sys::Housekeeping::Moved(cpus)) => turnoutd::log!(
            Level::Info,
            "main",
            "non-worker threads kept off the workers' CPUs",
            cpus = sys::cpu_list(&cpus),
            workers = sys::cpu_list(&pinned)
        ),
        Ok(sys::Housekeeping::Shared(cpus)) => turnoutd::log!(
            Level::Warn,
            "main",
            "every allowed CPU runs a worker: non-worker threads share them",
            cpus = sys::cpu_list(&cpus)
        ),
        Err(e) => turnoutd::log!(
            Level::Warn,
            "main",
            "cannot keep non-worker threads off the workers' CPUs",
            error = e
        ),
    }
    let sock = cfg.switch.control_socket.clone();
    let mode = cfg.switch.control_socket_mode;
    let metrics = cfg.switch.metrics_addr();
    let openflow = cfg.switch.openflow.clone();
    let fail_mode = turnoutd::openflow::fail::FailMode::parse(&cfg.switch.openflow_fail_mode)
        .unwrap_or(turnoutd::openflow::fail::FailMode::Secure); // checked by Config::parse_str
    let (workers, wakeup) = (cfg.workers.len(), cfg.switch.wakeup);
    let d = match Daemon::start(cfg, Arc::new(Builtin)) {
        Ok(d) => Arc::new(d),
        Err(e @ StartError::Config(_)) => {
            eprintln!("{e}");
            return ExitCode::from(2);
        }
        Err(e) => {
            turnoutd::log!(Level::Error, "main", "start failed", error = e);
            return ExitCode::FAILURE;
        }
    };
    let ctl = match ControlServer::start(&sock, mode, d.clone()) {
        Ok(s) => s,
        Err(e) => {
            turnoutd::log!(
                Level::Error,
                "main",
                "cannot open the control socket",
                path = sock.display(),
                error = e
            );
            stop_daemon(d);
            return ExitCode::FAILURE;
        }
    };
    let metrics = match metrics {
        None => None,
        Some(addr) => match MetricsServer::start(addr, d.clone()) {
            Ok(m) => {
                if !addr.ip().is_loopback() {
                    turnoutd::log!(
                        Level::Warn,
                        "metrics",
                        "metrics endpoint is reachable beyond this host",
                        addr = m.addr()
                    );
                }
                Some(m)
            }
            Err(e) => {
                turnoutd::log!(
                    Level::Error,
                    "main",
                    "cannot open the metrics listener",
                    addr = addr,
                    error = e
                );
                ctl.stop();
                stop_daemon(d);
                return ExitCode::FAILURE;
            }
        },
    };
    let of = if openflow.is_empty() {
        None
    } else {
        match turnoutd::openflow::channel::OfChannel::start(&openflow, fail_mode, d.clone()) {
            Ok(c) => {
                turnoutd::log!(
                    Level::Info,
                    "openflow",
                    "OpenFlow 1.3 channel open",
                    endpoints = openflow.join(" ")
                );
                Some(c)
            }
            Err(e) => {
                turnoutd::log!(
                    Level::Error,
                    "main",
                    "cannot open the OpenFlow channel",
                    endpoints = openflow.join(" "),
                    error = e
                );
                if let Some(m) = metrics {
                    m.stop();
                }
                ctl.stop();
                stop_daemon(d);
                return ExitCode::FAILURE;
            }
        }
    };
    let timer = match turnoutd::openflow::timer::FlowTimer::start(d.clone()) {
        Ok(t) => Some(t),
        Err(e) => {
            // Flows without timeouts still work; timeouts do not expire.
            turnoutd::log!(
                Level::Error,
                "main",
                "cannot start the flow timer: flow timeouts will not expire",
                error = e
            );
            None
        }
    };
    turnoutd::log!(
        Level::Info,
        "main",
        "turnoutd running",
        pid = std::process::id(),
        control = sock.display(),
        workers = workers,
        wakeup = format!("{wakeup:?}").to_lowercase(),
        metrics = metrics
            .as_ref()
            .map(|m| m.addr().to_string())
            .unwrap_or_else(|| "off".into()),
    );
    let sig = loop {
        if let Some(s) = sys::wait_shutdown_signal(Duration::from_secs(1)) {
            break s;
        }
    };
    turnoutd::log!(
        Level::Info,
        "main",
        "shutting down",
        signal = sys::signal_name(sig)
    );
    if let Some(t) = timer {
        t.stop();
    }
    if let Some(c) = of {
        c.stop();
    }
    if let Some(m) = metrics {
        m.stop();
    }
    ctl.stop();
    stop_daemon(d);
    turnoutd::log!(Level::Info, "main", "stopped");
    ExitCode::SUCCESS
}

fn stop_daemon(d: Arc<Daemon>) {
    match Arc::try_unwrap(d) {
        Ok(d) => d.shutdown(),
        Err(_) => turnoutd::log!(
            Level::Warn,
            "main",
            "daemon still referenced at exit; workers stop with the process"
        ),
    }
}
