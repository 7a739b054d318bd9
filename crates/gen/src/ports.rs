//! Opens a [`PortSpec`] with the project's port backends (crates/ports: the
//! same code turnoutd uses) and waits for its peer.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use fabric::Port;

use crate::spec::PortSpec;

/// Why a port could not be used.
#[derive(Debug)]
pub enum OpenError {
    /// The peer did not come up within the wait (exit code 3).
    PeerAbsent(String),
    /// The port cannot be opened (exit code 1).
    Failed(String),
    /// The specification names something this build cannot do (exit 2).
    Unsupported(String),
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenError::PeerAbsent(m) | OpenError::Failed(m) | OpenError::Unsupported(m) => {
                f.write_str(m)
            }
        }
    }
}

/// The opener turnoutd uses too ([`ports::open::Opener`]), for the kinds
/// turnout-gen opens as turnoutd does (AF_PACKET, AF_XDP, a memif server).
/// It keeps the memif servers this process opened (`role=server`, one per
/// socket): they run the control channel of their interfaces and must live
/// as long as the ports; closed (socket removed) by [`close_servers`] at
/// exit. A tester lets no frame wait: under a zero latency budget an
/// AF_PACKET receiver takes each frame as the kernel writes it
/// (`rx_ring = "auto"` chooses `frames`), not a block at a time.
fn opener() -> &'static ports::open::Opener {
    static OPENER: OnceLock<ports::open::Opener> = OnceLock::new();
    OPENER.get_or_init(|| ports::open::Opener::with_latency_budget(std::time::Duration::ZERO))
}

/// Stops the memif servers this process opened and removes their sockets.
pub fn close_servers() {
    opener().close_all();
}

/// Opens `spec` and waits until its link is up or `wait` passed.
pub fn open_and_wait(
    spec: &PortSpec,
    name: &str,
    wait: Duration,
) -> Result<Arc<dyn Port>, OpenError> {
    let mut v = open_all_and_wait(&[(spec, name)], wait)?;
    Ok(v.remove(0))
}

/// Opens every port first, then waits until all links are up (a memif
/// client and the server it connects to may be ports of this one process).
pub fn open_all_and_wait(
    specs: &[(&PortSpec, &str)],
    wait: Duration,
) -> Result<Vec<Arc<dyn Port>>, OpenError> {
    let deadline = Instant::now() + wait;
    let mut out = Vec::with_capacity(specs.len());
    let mut whys = Vec::with_capacity(specs.len());
    for (spec, name) in specs {
        let (port, why) = open(spec, name)?;
        out.push(port);
        whys.push(why);
    }
    loop {
        let down = specs
            .iter()
            .zip(&out)
            .zip(&whys)
            .find(|((_, p), _)| !p.link_up());
        let Some((((spec, _), _), why)) = down else {
            return Ok(out);
        };
        if Instant::now() >= deadline {
            // a memif client or vhost-user frontend says why its last
            // attempt ended
            let why = why
                .as_ref()
                .map(|w| w())
                .filter(|r| !r.is_empty())
                .map(|r| format!(" (last attempt: {r})"))
                .unwrap_or_default();
            return Err(OpenError::PeerAbsent(format!(
                "{spec}: the peer did not come up within {:.1} s{why}",
                wait.as_secs_f64()
            )));
        }
        if crate::sys::stop_requested() {
            return Err(OpenError::PeerAbsent(format!(
                "{spec}: stopped while waiting for the peer"
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Why a port's last connection attempt failed ("" if none did).
type WhyDown = Box<dyn Fn() -> String>;

/// The port, and for a memif client or vhost-user frontend how to say why
/// it is down.
type Opened = (Arc<dyn Port>, Option<WhyDown>);

fn open(spec: &PortSpec, name: &str) -> Result<Opened, OpenError> {
    match spec {
        PortSpec::AfPacket { config, queue } => {
            if *queue != 0 {
                return Err(OpenError::Unsupported(format!(
                    "{spec}: turnout-gen opens one AF_PACKET queue; queue must be 0"
                )));
            }
            opener()
                .open(name, &ports::PortConfig::AfPacket(config.clone()))
                .map(|p| (p, None))
                .map_err(OpenError::Failed)
        }
        PortSpec::Vhost {
            socket,
            server,
            queues,
            queue_size,
            max_frame,
            tx_frame,
            interrupt: _,
        } => {
            let mut cfg = ports::vhost_user::frontend::FrontendConfig::new(socket);
            cfg.server = *server;
            cfg.queues = *queues;
            cfg.queue_size = *queue_size;
            cfg.max_frame_b = *max_frame as usize;
            cfg.tx_frame_b = tx_frame.map(|t| t as usize);
            ports::vhost_user::frontend::VhostFrontendPort::new(name, cfg)
                .map(|p| {
                    let p = Arc::new(p);
                    let q = p.clone();
                    let why: WhyDown = Box::new(move || q.last_error());
                    (p as Arc<dyn Port>, Some(why))
                })
                .map_err(|e| OpenError::Failed(format!("{spec}: {e}")))
        }
        PortSpec::AfXdp { config, .. } => opener()
            .open(name, &ports::PortConfig::AfXdp(config.clone()))
            .map(|p| (p, None))
            .map_err(OpenError::Failed),
        PortSpec::Memif { config, server, .. } => {
            let socket = &config.socket;
            let cfg = config.interface(name);
            cfg.validate()
                .map_err(|e| OpenError::Unsupported(format!("{spec}: {e}")))?;
            if *server {
                return opener()
                    .open(name, &ports::PortConfig::Memif(config.clone()))
                    .map(|p| (p, None))
                    .map_err(|e| OpenError::Failed(format!("{spec}: {e}")));
            }
            // The client keeps retrying in the background until the
            // server answers; the link comes up when it is connected.
            let client = ports::memif::ClientConfig::new(socket);
            ports::memif::MemifPort::client(cfg, client)
                .map(|p| {
                    let p = Arc::new(p);
                    let q = p.clone();
                    let why: WhyDown = Box::new(move || q.status().last_disconnect);
                    (p as Arc<dyn Port>, Some(why))
                })
                .map_err(|e| OpenError::Failed(format!("{spec}: {e}")))
        }
    }
}
