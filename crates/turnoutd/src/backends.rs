//! Opening a port from its config: one arm per backend of the `ports`
//! crate. A kind whose backend is not built into this binary is refused
//! with "port kind X is not available in this build", never a panic.
//!
//! memif interfaces share server sockets: [`Backends`] keeps one
//! [`MemifServer`] per socket path, opened with the first interface on it
//! and closed (its socket file removed) when the last one goes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fabric::Port;
use parking_lot::Mutex;
use ports::memif::{MemifServer, ServerConfig};

use crate::config::{PortConfig, PortSpec, TunnelSpec, UnderlaySpec};

/// Whether `kind` (any spelling `ports::PortKind::parse` reads) is built
/// in: every kind of `ports::PortConfig` is opened by [`Backends::open`],
/// so this is what the `ports` crate was built with.
pub fn available(kind: &str) -> bool {
    ports::PortKind::parse(kind).is_ok_and(ports::PortKind::built)
}

/// Port kinds this build can open, derived from `ports::PortKind`.
pub fn available_kinds() -> Vec<&'static str> {
    ports::kind::ALL
        .into_iter()
        .filter(|k| k.built())
        .map(ports::PortKind::name)
        .collect()
}

/// The error for a kind that is not built in.
pub fn unavailable_message(kind: &str) -> String {
    format!(
        "port kind {kind} is not available in this build (available: {})",
        available_kinds().join(", ")
    )
}

/// Backend resources shared between ports (memif server sockets).
#[derive(Default)]
pub struct Backends {
    /// Per socket path: the server and how many interfaces use it.
    memif: Mutex<HashMap<PathBuf, (MemifServer, usize)>>,
    /// Tunnel ports by name (for `tunnel.show`).
    tunnels: Mutex<HashMap<String, Arc<ports::tunnel::TunnelPort>>>,
}

impl Backends {
    /// No sockets open yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Opens the port described by `cfg`; the message says why not.
    pub fn open(&self, cfg: &PortConfig) -> Result<Arc<dyn Port>, String> {
        match &cfg.spec {
            PortSpec::Memif(s) => {
                let mut servers = self.memif.lock();
                if !servers.contains_key(&s.socket) {
                    if let Some(dir) = s.socket.parent() {
                        if !dir.as_os_str().is_empty() && !dir.exists() {
                            std::fs::create_dir_all(dir).map_err(|e| {
                                format!(
                                    "cannot create {}: {}",
                                    dir.display(),
                                    crate::config::os_error_text(&e)
                                )
                            })?;
                        }
                    }
                    let srv = MemifServer::bind(ServerConfig::new(&s.socket))
                        .map_err(|e| e.to_string())?;
                    servers.insert(s.socket.clone(), (srv, 0));
                }
                let srv = &servers[&s.socket].0;
                let c = s.interface(&cfg.name);
                match srv.add_interface(c) {
                    Ok(p) => {
                        if let Some(e) = servers.get_mut(&s.socket) {
                            e.1 += 1;
                        }
                        Ok(Arc::new(p))
                    }
                    Err(e) => {
                        // Do not leave a socket behind for a port that failed.
                        Self::release_locked(&mut servers, &s.socket, 0);
                        Err(e.to_string())
                    }
                }
            }
            PortSpec::AfXdp(s) => open_af_xdp(&cfg.name, s),
            PortSpec::AfPacket(s) => open_af_packet(&cfg.name, s),
            PortSpec::Vxlan(s) | PortSpec::Geneve(s) => {
                let kind = if matches!(cfg.spec, PortSpec::Vxlan(_)) {
                    ports::tunnel::Kind::Vxlan
                } else {
                    ports::tunnel::Kind::Geneve
                };
                let t = open_tunnel(&cfg.name, kind, s)?;
                self.tunnels.lock().insert(cfg.name.clone(), t.clone());
                Ok(t)
            }
            PortSpec::Tap(s) => Ok(Arc::new(
                ports::tap::TapPort::open(&cfg.name, s.clone()).map_err(|e| e.to_string())?,
            )),
            PortSpec::VhostUser(s) => {
                use ports::vhost_user::{Mode, VhostUserPort};
                if let Some(dir) = s.socket.parent() {
                    if s.mode == Mode::Server && !dir.as_os_str().is_empty() && !dir.exists() {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            format!(
                                "cannot create {}: {}",
                                dir.display(),
                                crate::config::os_error_text(&e)
                            )
                        })?;
                    }
                }
                Ok(Arc::new(
                    VhostUserPort::new(&cfg.name, s.clone()).map_err(|e| e.to_string())?,
                ))
            }
        }
    }

    /// The tunnel port named `name`, if it is one.
    pub fn tunnel(&self, name: &str) -> Option<Arc<ports::tunnel::TunnelPort>> {
        self.tunnels.lock().get(name).cloned()
    }

    /// A port opened by [`Backends::open`] was removed: close shared
    /// resources nobody uses any more.
    pub fn closed(&self, cfg: &PortConfig) {
        self.tunnels.lock().remove(&cfg.name);
        if let PortSpec::Memif(s) = &cfg.spec {
            Self::release_locked(&mut self.memif.lock(), &s.socket, 1);
        }
    }

    /// Drops `n` users of the server on `socket`; closes it at zero.
    fn release_locked(
        servers: &mut HashMap<PathBuf, (MemifServer, usize)>,
        socket: &Path,
        n: usize,
    ) {
        let Some(e) = servers.get_mut(socket) else {
            return;
        };
        e.1 = e.1.saturating_sub(n);
        if e.1 == 0 {
            servers.remove(socket);
            crate::log!(
                crate::log::Level::Info,
                "port",
                "memif socket closed",
                socket = socket.display()
            );
        }
    }

    /// Closes every shared resource (shutdown).
    pub fn close_all(&self) {
        self.tunnels.lock().clear();
        self.memif.lock().clear();
    }
}

fn open_af_xdp(name: &str, c: &ports::af_xdp::AfXdpConfig) -> Result<Arc<dyn Port>, String> {
    Ok(Arc::new(
        ports::af_xdp::AfXdpPort::open(name, c.clone()).map_err(|e| e.to_string())?,
    ))
}

fn open_af_packet(
    name: &str,
    c: &ports::af_packet::AfPacketConfig,
) -> Result<Arc<dyn Port>, String> {
    Ok(Arc::new(
        ports::af_packet::AfPacketPort::open(name, c.clone()).map_err(|e| e.to_string())?,
    ))
}

/// A tunnel: its underlay port first (not in the switch's table; the
/// tunnel owns it), then the tunnel over it.
fn open_tunnel(
    name: &str,
    kind: ports::tunnel::Kind,
    s: &TunnelSpec,
) -> Result<Arc<ports::tunnel::TunnelPort>, String> {
    use ports::tunnel::TunnelPort;
    let c = s
        .tunnel_config(kind)
        .map_err(|e| format!("{}: {e}", kind.name()))?;
    let iface = s.underlay.iface();
    let uname = format!("{name}.underlay");
    let underlay = match &s.underlay {
        UnderlaySpec::AfPacket(u) => open_af_packet(&uname, u)?,
        UnderlaySpec::AfXdp(u) => open_af_xdp(&uname, u)?,
    };
    let mtu = ports::netdev::ifindex(iface)
        .and_then(ports::netdev::query_link)
        .map_err(|e| format!("{}: cannot read the MTU of {iface}: {e}", kind.name()))?
        .mtu;
    Ok(Arc::new(TunnelPort::open(name, c, underlay, iface, mtu)?))
}
