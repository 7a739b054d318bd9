//! Opening a port from its [`PortConfig`]: one arm per backend, the one
//! opener turnoutd's `[[ports]]` and `port.add` and turnout-gen's specs of
//! the same kinds go through.
//!
//! Ports of a kind may share a resource: memif interfaces share the server
//! socket they are served on. An [`Opener`] keeps one [`MemifServer`] per
//! socket path, opened with the first interface on it and closed (its
//! socket file removed) when the last one goes, and the tunnel ports it
//! opened by name (turnoutd's `tunnel.show` reads them).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use fabric::Port;

use crate::config::PortConfig;
use crate::memif::{MemifServer, ServerConfig};
use crate::netdev::errno_text;
use crate::tunnel::{Kind, TunnelPort, TunnelSpec, UnderlaySpec};

/// Opens ports and keeps what ports of a kind share (see the module
/// documentation).
#[derive(Default)]
pub struct Opener {
    /// Per socket path: the server and how many interfaces use it.
    memif: Mutex<HashMap<PathBuf, (MemifServer, usize)>>,
    /// Tunnel ports by name.
    tunnels: Mutex<HashMap<String, Arc<TunnelPort>>>,
}

impl Opener {
    /// Nothing open yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the port `name` described by `cfg`; the message says why not.
    pub fn open(&self, name: &str, cfg: &PortConfig) -> Result<Arc<dyn Port>, String> {
        match cfg {
            PortConfig::Memif(s) => {
                let mut servers = self.servers();
                if !servers.contains_key(&s.socket) {
                    create_parent(&s.socket)?;
                    let srv = MemifServer::bind(ServerConfig::new(&s.socket))
                        .map_err(|e| e.to_string())?;
                    servers.insert(s.socket.clone(), (srv, 0));
                }
                match servers[&s.socket].0.add_interface(s.interface(name)) {
                    Ok(p) => {
                        if let Some(e) = servers.get_mut(&s.socket) {
                            e.1 += 1;
                        }
                        Ok(Arc::new(p))
                    }
                    Err(e) => {
                        // Do not leave a socket behind for a port that failed.
                        release(&mut servers, &s.socket, 0);
                        Err(e.to_string())
                    }
                }
            }
            PortConfig::AfXdp(c) => open_af_xdp(name, c),
            PortConfig::AfPacket(c) => open_af_packet(name, c),
            PortConfig::Vxlan(s) | PortConfig::Geneve(s) => {
                let kind = if matches!(cfg, PortConfig::Vxlan(_)) {
                    Kind::Vxlan
                } else {
                    Kind::Geneve
                };
                let t = open_tunnel(name, kind, s)?;
                self.tunnels().insert(name.to_string(), t.clone());
                Ok(t)
            }
            PortConfig::Tap(c) => Ok(Arc::new(
                crate::tap::TapPort::open(name, c.clone()).map_err(|e| e.to_string())?,
            )),
            #[cfg(feature = "vhost")]
            PortConfig::VhostUser(c) => {
                use crate::vhost_user::{Mode, VhostUserPort};
                if c.mode == Mode::Server {
                    create_parent(&c.socket)?;
                }
                Ok(Arc::new(
                    VhostUserPort::new(name, c.clone()).map_err(|e| e.to_string())?,
                ))
            }
        }
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
        match cfg {
            PortConfig::Memif(s) => release(&mut self.servers(), &s.socket, 1),
            _ => None,
        }
    }

    /// Closes every shared resource (shutdown).
    pub fn close_all(&self) {
        self.tunnels().clear();
        self.servers().clear();
    }

    fn servers(&self) -> MutexGuard<'_, HashMap<PathBuf, (MemifServer, usize)>> {
        self.memif.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn tunnels(&self) -> MutexGuard<'_, HashMap<String, Arc<TunnelPort>>> {
        self.tunnels.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Drops `n` users of the server on `socket`; closes it at zero and
/// returns its path.
fn release(
    servers: &mut HashMap<PathBuf, (MemifServer, usize)>,
    socket: &Path,
    n: usize,
) -> Option<PathBuf> {
    let e = servers.get_mut(socket)?;
    e.1 = e.1.saturating_sub(n);
    if e.1 > 0 {
        return None;
    }
    servers.remove(socket);
    Some(socket.to_path_buf())
}

/// Creates the directory a socket is to be made in, if it is missing.
fn create_parent(socket: &Path) -> Result<(), String> {
    let Some(dir) = socket.parent() else {
        return Ok(());
    };
    if dir.as_os_str().is_empty() || dir.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("cannot create {}: {}", dir.display(), errno_text(&e)))
}

fn open_af_xdp(name: &str, c: &crate::af_xdp::AfXdpConfig) -> Result<Arc<dyn Port>, String> {
    Ok(Arc::new(
        crate::af_xdp::AfXdpPort::open(name, c.clone()).map_err(|e| e.to_string())?,
    ))
}

fn open_af_packet(
    name: &str,
    c: &crate::af_packet::AfPacketConfig,
) -> Result<Arc<dyn Port>, String> {
    Ok(Arc::new(
        crate::af_packet::AfPacketPort::open(name, c.clone()).map_err(|e| e.to_string())?,
    ))
}

/// A tunnel: its underlay port first (not in the switch's table; the
/// tunnel owns it), then the tunnel over it.
fn open_tunnel(name: &str, kind: Kind, s: &TunnelSpec) -> Result<Arc<TunnelPort>, String> {
    let c = s
        .tunnel_config(kind)
        .map_err(|e| format!("{}: {e}", kind.name()))?;
    let iface = s.underlay.iface();
    let uname = format!("{name}.underlay");
    let underlay = match &s.underlay {
        UnderlaySpec::AfPacket(u) => open_af_packet(&uname, u)?,
        UnderlaySpec::AfXdp(u) => open_af_xdp(&uname, u)?,
    };
    let mtu = crate::netdev::ifindex(iface)
        .and_then(crate::netdev::query_link)
        .map_err(|e| format!("{}: cannot read the MTU of {iface}: {e}", kind.name()))?
        .mtu;
    Ok(Arc::new(TunnelPort::open(name, c, underlay, iface, mtu)?))
}
