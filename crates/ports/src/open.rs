//! Opening a port from its [`PortConfig`]: the one opener turnoutd's
//! `[[ports]]` and `port.add` and turnout-gen's specs of the same kinds go
//! through. Each kind opens its ports in its own directory
//! ([`crate::config::KindConfig::open`]); [`PortConfig`] hands the call to
//! it.
//!
//! Ports of a kind may share a resource: memif interfaces share the server
//! socket they are served on. An [`Opener`] keeps one [`MemifServer`] per
//! socket path, opened with the first interface on it and closed (its
//! socket file removed) when the last one goes, and the tunnel ports it
//! opened by name (turnoutd's `tunnel.show` reads them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fabric::Port;

use crate::config::PortConfig;
use crate::memif::MemifServer;
use crate::netdev::errno_text;
use crate::tunnel::TunnelPort;

/// The memif servers an [`Opener`] keeps: per socket path, the server and
/// how many interfaces use it.
pub(crate) type MemifServers = HashMap<PathBuf, (MemifServer, usize)>;

/// Opens ports and keeps what ports of a kind share (see the module
/// documentation).
#[derive(Default)]
pub struct Opener {
    /// Per socket path: the server and how many interfaces use it.
    memif: Mutex<MemifServers>,
    /// Tunnel ports by name.
    tunnels: Mutex<HashMap<String, Arc<TunnelPort>>>,
    /// The longest the switch lets a frame wait (its latency budget), for
    /// backends that choose how they hand frames over by it.
    budget: Option<Duration>,
}

impl Opener {
    /// Nothing open yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Nothing open yet, for a switch that lets frames wait at most
    /// `budget`: a backend whose default hand-over holds frames (AF_PACKET's
    /// receive blocks) may take another (AF_PACKET: at a budget of 0).
    pub fn with_latency_budget(budget: Duration) -> Self {
        Self {
            budget: Some(budget),
            ..Self::default()
        }
    }

    /// The budget [`Opener::with_latency_budget`] set.
    pub fn latency_budget(&self) -> Option<Duration> {
        self.budget
    }

    /// Opens the port `name` described by `cfg`; the message says why not.
    pub fn open(&self, name: &str, cfg: &PortConfig) -> Result<Arc<dyn Port>, String> {
        cfg.open_in(name, self)
    }

    /// The tunnel port named `name`, if this opener opened one.
    pub fn tunnel(&self, name: &str) -> Option<Arc<TunnelPort>> {
        self.tunnels().get(name).cloned()
    }

    /// The port `name` opened from `cfg` was removed: closes the shared
    /// resources nobody uses any more. Returns the memif socket it closed,
    /// if it did.
    pub fn closed(&self, name: &str, cfg: &PortConfig) -> Option<PathBuf> {
        self.tunnels().remove(name);
        cfg.closed_in(self)
    }

    /// Closes every shared resource (shutdown).
    pub fn close_all(&self) {
        self.tunnels().clear();
        self.memif_servers().clear();
    }

    /// The memif servers (memif's [`crate::config::KindConfig`]).
    pub(crate) fn memif_servers(&self) -> MutexGuard<'_, MemifServers> {
        self.memif.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The tunnel ports by name (the tunnels' [`crate::config::KindConfig`]).
    pub(crate) fn tunnels(&self) -> MutexGuard<'_, HashMap<String, Arc<TunnelPort>>> {
        self.tunnels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Creates the directory a socket is to be made in, if it is missing.
pub(crate) fn create_parent(socket: &Path) -> Result<(), String> {
    let Some(dir) = socket.parent() else {
        return Ok(());
    };
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create {}: {}", dir.display(), errno_text(&e)))
}
