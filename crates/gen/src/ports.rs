//! Opens a [`PortSpec`] with the project's port backends (crates/ports: the
//! same code turnoutd uses) and waits for its peer.

use std::sync::Arc;
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
            OpenError::PeerAbsent(m) | OpenError::Failed(m) | OpenError::Unsupported(m) => f.write_str(m),
        }
    }
}

/// Opens `spec` and waits until its link is up or `wait` passed.
pub fn open_and_wait(spec: &PortSpec, name: &str, wait: Duration) -> Result<Arc<dyn Port>, OpenError> {
    let deadline = Instant::now() + wait;
    let port = open(spec, name, deadline)?;
    loop {
        if port.link_up() {
            return Ok(port);
        }
        if Instant::now() >= deadline {
            return Err(OpenError::PeerAbsent(format!(
                "{spec}: the peer did not come up within {:.1} s",
                wait.as_secs_f64()
            )));
        }
        if crate::sys::stop_requested() {
            return Err(OpenError::PeerAbsent(format!("{spec}: stopped while waiting for the peer")));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn open(spec: &PortSpec, name: &str, _deadline: Instant) -> Result<Arc<dyn Port>, OpenError> {
    match spec {
        PortSpec::AfPacket { iface, queue } => {
            if *queue != 0 {
                return Err(OpenError::Unsupported(format!(
                    "{spec}: turnout-gen opens one AF_PACKET queue; queue must be 0"
                )));
            }
            let cfg = ports::af_packet::AfPacketConfig::new(iface);
            ports::af_packet::AfPacketPort::open(name, cfg)
                .map(|p| Arc::new(p) as Arc<dyn Port>)
                .map_err(|e| OpenError::Failed(e.to_string()))
        }
        PortSpec::AfXdp { .. } => {
            Err(OpenError::Unsupported(format!("{spec}: the AF_XDP backend is not in this build of crates/ports yet")))
        }
        PortSpec::Memif { .. } => {
            Err(OpenError::Unsupported(format!("{spec}: the memif client is not in this build of crates/ports yet")))
        }
    }
}
