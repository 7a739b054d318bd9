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
use ports::memif::{MemifConfig, MemifServer, ServerConfig};

use crate::config::{AfPacketSpec, AfXdpSpec, PortConfig, PortSpec, TunnelSpec, UnderlaySpec};

/// Port kinds this build can open.
pub const AVAILABLE: &[&str] = &[
    "memif",
    "af_xdp",
    "af_packet",
    "tap",
    "vhost_user",
    "vxlan",
    "geneve",
];

/// Whether `kind` is built in.
pub fn available(kind: &str) -> bool {
    AVAILABLE.contains(&kind)
}

/// The error for a kind that is not built in.
pub fn unavailable_message(kind: &str) -> String {
    format!(
        "port kind {kind} is not available in this build (available: {})",
        AVAILABLE.join(", ")
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
                let mut c = MemifConfig::new(&cfg.name, s.id);
                c.secret = s.secret.clone().filter(|x| !x.is_empty());
                c.queues = s.queues;
                c.log2_ring_size = s.ring_size.trailing_zeros() as u8;
                c.buffer_size = s.buffer_size;
                let ring_b = s.ring_size.saturating_mul(s.buffer_size);
                c.max_frame_b = s
                    .max_frame_b
                    .unwrap_or(ports::memif::DEFAULT_MAX_FRAME_B.min(ring_b));
                let need = c.max_frame_b.div_ceil(c.buffer_size);
                c.max_chain = (need.max(ports::memif::DEFAULT_MAX_CHAIN as u32))
                    .min(ports::memif::MAX_CHAIN as u32) as u16;
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
            PortSpec::Tap(s) => {
                use ports::tap::{TapConfig, TapPort};
                let mut c = TapConfig::new(&s.iface);
                c.queues = s.queues;
                if let Some(n) = s.slots {
                    c.slots = n;
                }
                if let Some(n) = s.frame_size_b {
                    c.frame_size_b = n;
                }
                Ok(Arc::new(
                    TapPort::open(&cfg.name, c).map_err(|e| e.to_string())?,
                ))
            }
            PortSpec::VhostUser(s) => {
                use ports::vhost_user::{Mode, VhostUserConfig, VhostUserPort};
                if let Some(dir) = s.socket.parent() {
                    if !s.client && !dir.as_os_str().is_empty() && !dir.exists() {
                        std::fs::create_dir_all(dir).map_err(|e| {
                            format!(
                                "cannot create {}: {}",
                                dir.display(),
                                crate::config::os_error_text(&e)
                            )
                        })?;
                    }
                }
                let mut c = VhostUserConfig::new(&s.socket);
                c.mode = if s.client { Mode::Client } else { Mode::Server };
                c.queues = s.queues;
                if let Some(m) = s.max_frame_b {
                    c.max_frame_b = m as usize;
                }
                Ok(Arc::new(
                    VhostUserPort::new(&cfg.name, c).map_err(|e| e.to_string())?,
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

fn open_af_xdp(name: &str, s: &AfXdpSpec) -> Result<Arc<dyn Port>, String> {
    use ports::af_xdp::{AfXdpConfig, AfXdpPort, XdpAttach, XdpBind};
    let mut c = AfXdpConfig::new(&s.iface);
    c.queues = s.queues;
    if let Some(n) = s.frames_per_queue {
        c.frames_per_queue = n;
    }
    if let Some(n) = s.frame_size_b {
        c.frame_size_b = n;
    }
    c.attach = match s.attach.as_deref() {
        None | Some("auto") => XdpAttach::Auto,
        Some("native") => XdpAttach::Native,
        Some("generic") => XdpAttach::Generic,
        Some(o) => return Err(format!("attach {o:?} is not auto, native or generic")),
    };
    c.bind = match s.bind.as_deref() {
        None | Some("auto") => XdpBind::Auto,
        Some("copy") => XdpBind::Copy,
        Some("zero_copy") => XdpBind::ZeroCopy,
        Some(o) => return Err(format!("bind {o:?} is not auto, copy or zero_copy")),
    };
    Ok(Arc::new(
        AfXdpPort::open(name, c).map_err(|e| e.to_string())?,
    ))
}

fn open_af_packet(name: &str, s: &AfPacketSpec) -> Result<Arc<dyn Port>, String> {
    use ports::af_packet::{AfPacketConfig, AfPacketPort, Fanout};
    let mut c = AfPacketConfig::new(&s.iface);
    c.queues = s.queues;
    if let Some(b) = s.rx_blocks {
        c.rx_blocks = b;
    }
    if let Some(b) = s.rx_block_size_b {
        c.rx_block_size_b = b;
    }
    if let Some(n) = s.tx_frames {
        c.tx_frames = n;
    }
    if let Some(q) = s.qdisc_bypass {
        c.qdisc_bypass = q;
    }
    c.fanout = match s.fanout.as_deref() {
        None | Some("hash") => Fanout::Hash,
        Some("lb") => Fanout::LoadBalance,
        Some("cpu") => Fanout::Cpu,
        Some("queue") => Fanout::QueueMapping,
        Some(o) => return Err(format!("fanout {o:?} is not hash, lb, cpu or queue")),
    };
    Ok(Arc::new(
        AfPacketPort::open(name, c).map_err(|e| e.to_string())?,
    ))
}

/// A tunnel: its underlay port first (not in the switch's table; the
/// tunnel owns it), then the tunnel over it.
fn open_tunnel(
    name: &str,
    kind: ports::tunnel::Kind,
    s: &TunnelSpec,
) -> Result<Arc<ports::tunnel::TunnelPort>, String> {
    use ports::tunnel::{TunnelConfig, TunnelPort};
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
    let mut c = TunnelConfig::new(kind, s.vni, s.local_ip);
    c.remotes = s.remotes.clone();
    c.learning = s.learning;
    c.aging_s = s.aging_s;
    if let Some(p) = s.dst_port {
        c.dst_port = p;
    }
    c.next_hop = s.next_hop;
    for n in &s.neighbours {
        let mac = n
            .mac
            .parse::<wire::MacAddr>()
            .map_err(|e| format!("neighbour {}: {e}", n.ip))?;
        c.neighbours.push((n.ip, mac));
    }
    if let Some(n) = s.fdb_size {
        c.fdb_size = n as usize;
    }
    if let Some(n) = s.staging {
        c.staging = n;
    }
    if let Some(t) = s.ttl {
        c.ttl = t;
    }
    Ok(Arc::new(TunnelPort::open(name, c, underlay, iface, mtu)?))
}
