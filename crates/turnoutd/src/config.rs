//! The daemon's configuration: the TOML file of docs/turnoutd.md, and the
//! JSON forms of its `[[ports]]` and `[logic]` tables that the control API
//! accepts (`port.add`, `logic.replace`). One parser serves both, so a port
//! added at run time is checked exactly like one in the file.
//!
//! Every table rejects unknown keys; every error names the key (`ports[1].kind`)
//! and the reason, in lower case. Parsing is pure (no sockets, no files but
//! the config itself): whether a port kind is built in is checked separately
//! by [`Config::check_backends`].

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Default control socket path.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/turnout/turnoutd.sock";
/// Default control socket mode.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;
/// Default metrics port when only a port is given.
pub const DEFAULT_METRICS_PORT: u16 = 9469;
/// Port kinds the config knows, built in or not.
pub const PORT_KINDS: [&str; 7] = [
    "memif",
    "af_xdp",
    "af_packet",
    "tap",
    "vhost_user",
    "vxlan",
    "geneve",
];
/// Longest port name.
pub const MAX_PORT_NAME: usize = 64;

/// A configuration error: which key, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path of the key (`ports[1].kind`); empty for the whole file.
    pub path: String,
    /// Lower-case reason.
    pub message: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "config: {}", self.message)
        } else {
            write!(f, "config: {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The wake-up model of the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wakeup {
    /// Poll recently active queues, sleep when all are idle.
    #[default]
    Adaptive,
    /// Busy-poll every queue, always.
    Poll,
}

impl Wakeup {
    /// The fabric's mode.
    pub fn mode(self) -> fabric::WakeupMode {
        match self {
            Wakeup::Adaptive => fabric::WakeupMode::Adaptive,
            Wakeup::Poll => fabric::WakeupMode::Poll,
        }
    }
}

/// `[switch]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    /// Path of the JSON-RPC control socket.
    #[serde(default = "default_socket")]
    pub control_socket: PathBuf,
    /// Permission bits of the control socket.
    #[serde(default = "default_socket_mode")]
    pub control_socket_mode: u32,
    /// Frames per batch.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Size of the port table.
    #[serde(default = "default_max_ports")]
    pub max_ports: usize,
    /// Wake-up model.
    #[serde(default)]
    pub wakeup: Wakeup,
    /// Adaptive wake-up: the longest a worker may let frames wait to save
    /// CPU, µs (0 = never sleep while frames arrive).
    #[serde(default = "default_budget")]
    pub latency_budget_us: u32,
    /// Prometheus endpoint: `"addr:port"` or `"port"` (loopback); off if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// OpenFlow 1.3 channel endpoints (`ptcp:[ADDR:]PORT`, `punix:PATH`,
    /// `tcp:HOST:PORT`); none by default (docs/flows.md, "OpenFlow").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub openflow: Vec<String>,
}

fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_CONTROL_SOCKET)
}
fn default_socket_mode() -> u32 {
    DEFAULT_SOCKET_MODE
}
fn default_batch() -> usize {
    fabric::batch::DEFAULT_BATCH
}
fn default_max_ports() -> usize {
    1024
}
fn default_budget() -> u32 {
    fabric::DEFAULT_BUDGET_US
}

impl Default for SwitchSection {
    fn default() -> Self {
        Self {
            control_socket: default_socket(),
            control_socket_mode: DEFAULT_SOCKET_MODE,
            batch: default_batch(),
            max_ports: default_max_ports(),
            wakeup: Wakeup::Adaptive,
            latency_budget_us: default_budget(),
            metrics_listen: None,
            openflow: Vec::new(),
        }
    }
}

impl SwitchSection {
    /// The metrics address, parsed (validated by [`Config::parse_str`]).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listen
            .as_deref()
            .and_then(|s| parse_listen(s).ok())
    }
}

/// `[[workers]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// CPU to pin the worker to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// What the worker's CPU does when idle while turnoutd runs: `poll`
    /// keeps it in the kernel's polling idle state (its PM QoS resume
    /// latency set to 0), so a sleeping worker wakes in a few µs instead of
    /// the tens a halted virtual CPU takes; absent = the host's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_idle: Option<CpuIdle>,
}

/// `[[workers]] cpu_idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuIdle {
    /// The idle CPU polls (no halt): µs wake-ups; the CPU stays available
    /// to other threads but never enters a low-power state.
    Poll,
}

/// `[logic]`: a name from the logic table and its own keys.
#[derive(Clone, Debug, PartialEq)]
pub struct LogicConfig {
    /// Logic name.
    pub name: String,
    /// Every other key, handed to the logic's constructor.
    pub params: Map<String, Value>,
}

impl Default for LogicConfig {
    fn default() -> Self {
        Self {
            name: "bridge".into(),
            params: Map::new(),
        }
    }
}

impl LogicConfig {
    /// Parses a `[logic]` table (TOML or JSON) found at `path`.
    pub fn from_json(v: &Value, path: &str) -> Result<Self, ConfigError> {
        let obj = v.as_object().ok_or_else(|| {
            ConfigError::new(path, format!("expected a table, found {}", kind_of(v)))
        })?;
        let mut params = obj.clone();
        let name = match params.remove("name") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::String(_)) => {
                return Err(ConfigError::new(join(path, "name"), "must not be empty"))
            }
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "name"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"name\"")),
        };
        Ok(Self { name, params })
    }

    /// The table as JSON (name and every parameter).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        for (k, v) in &self.params {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// A memif interface; turnoutd is its server.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemifSpec {
    /// Unix socket the clients connect to (shared by several interfaces).
    pub socket: PathBuf,
    /// Interface id on that socket.
    #[serde(default)]
    pub id: u32,
    /// Shared secret (at most 24 bytes); none if empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Queue pairs.
    #[serde(default = "one")]
    pub queues: u16,
    /// Descriptors per ring, a power of two in 2..=16384.
    #[serde(default = "default_ring")]
    pub ring_size: u32,
    /// Bytes per buffer.
    #[serde(default = "default_buffer")]
    pub buffer_size: u32,
    /// Largest frame, bytes (default 9216, or less if the ring is tiny);
    /// larger frames are chained over several buffers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_b: Option<u32>,
}

/// An AF_XDP socket on a kernel interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfXdpSpec {
    /// Kernel interface name.
    pub iface: String,
    /// Queues (one socket each).
    #[serde(default = "one")]
    pub queues: u16,
    /// UMEM chunks per queue (power of two, at least 16).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frames_per_queue: Option<u32>,
    /// UMEM chunk size: 2048 or 4096.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_size_b: Option<u32>,
    /// XDP program placement: auto, native, generic.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attach: Option<String>,
    /// Socket binding: auto, copy, zero_copy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bind: Option<String>,
}

/// An AF_PACKET (TPACKET_V3) socket on a kernel interface.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfPacketSpec {
    /// Kernel interface name.
    pub iface: String,
    /// Queues (fanout sockets).
    #[serde(default = "one")]
    pub queues: u16,
    /// Spreading over queues: hash (default), lb, cpu, queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fanout: Option<String>,
    /// Send straight to the driver, bypassing the qdisc (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub qdisc_bypass: Option<bool>,
    /// Receive ring blocks per queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_blocks: Option<u32>,
    /// Receive ring block size, bytes (power of two, at least a page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_block_size_b: Option<u32>,
    /// Transmit ring frames per queue (power of two).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_frames: Option<u32>,
}

/// A TAP device: the host-stack port.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapSpec {
    /// Name of the TAP interface to create.
    pub iface: String,
    /// Queues (multi-queue TAP).
    #[serde(default = "one")]
    pub queues: u16,
    /// Receive buffers and transmit slots per queue.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<u32>,
    /// Buffer size: the largest frame carried, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_size_b: Option<u32>,
}

/// A vhost-user interface; turnoutd is the backend.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VhostUserSpec {
    /// Unix socket.
    pub socket: PathBuf,
    /// Queue pairs.
    #[serde(default = "one")]
    pub queues: u16,
    /// Connect to a socket the frontend owns instead of listening.
    #[serde(default)]
    pub client: bool,
    /// Largest frame without the virtio-net header, bytes (default 1518).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_frame_b: Option<u32>,
}

/// The port a tunnel sends and receives its outer frames on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind")]
pub enum UnderlaySpec {
    /// AF_PACKET on the uplink.
    #[serde(rename = "af_packet")]
    AfPacket(AfPacketSpec),
    /// AF_XDP on the uplink.
    #[serde(rename = "af_xdp")]
    AfXdp(AfXdpSpec),
}

impl UnderlaySpec {
    /// The kernel interface.
    pub fn iface(&self) -> &str {
        match self {
            UnderlaySpec::AfPacket(s) => &s.iface,
            UnderlaySpec::AfXdp(s) => &s.iface,
        }
    }

    fn as_port(&self) -> PortSpec {
        match self {
            UnderlaySpec::AfPacket(s) => PortSpec::AfPacket(s.clone()),
            UnderlaySpec::AfXdp(s) => PortSpec::AfXdp(s.clone()),
        }
    }
}

/// A static underlay neighbour: the MAC of a next hop.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NeighbourSpec {
    /// Its IP address.
    pub ip: IpAddr,
    /// Its MAC address.
    pub mac: String,
}

/// A VXLAN or Geneve tunnel endpoint (docs/overlay.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TunnelSpec {
    /// Virtual network identifier, 0..=16777215.
    pub vni: u32,
    /// Local tunnel endpoint address (IPv4 or IPv6).
    pub local_ip: IpAddr,
    /// The uplink port the outer frames use.
    pub underlay: UnderlaySpec,
    /// Static remote endpoints (head-end replication list).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remotes: Vec<IpAddr>,
    /// Learn inner MACs and remote endpoints from traffic (default true).
    #[serde(default = "yes")]
    pub learning: bool,
    /// Aging of learned MACs and endpoints, seconds (0 = never).
    #[serde(default = "default_tunnel_aging")]
    pub aging_s: u32,
    /// UDP destination port (default 4789 VXLAN, 6081 Geneve).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dst_port: Option<u16>,
    /// Underlay gateway; absent: remotes are on the uplink's link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_hop: Option<IpAddr>,
    /// Static next-hop MACs; the others are resolved with ARP / ND.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub neighbours: Vec<NeighbourSpec>,
    /// Entries of the learned MAC table (default 4096).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fdb_size: Option<u32>,
    /// Transmit staging frames per queue (default 1024).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staging: Option<u32>,
    /// Outer TTL / hop limit (default 64).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl: Option<u8>,
}

fn yes() -> bool {
    true
}
fn default_tunnel_aging() -> u32 {
    300
}

fn one() -> u16 {
    1
}
fn default_ring() -> u32 {
    1024
}
fn default_buffer() -> u32 {
    2048
}

/// The backend-specific part of a port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// memif server interface.
    Memif(MemifSpec),
    /// AF_XDP.
    AfXdp(AfXdpSpec),
    /// AF_PACKET.
    AfPacket(AfPacketSpec),
    /// TAP.
    Tap(TapSpec),
    /// vhost-user backend.
    VhostUser(VhostUserSpec),
    /// VXLAN tunnel endpoint.
    Vxlan(TunnelSpec),
    /// Geneve tunnel endpoint.
    Geneve(TunnelSpec),
}

impl PortSpec {
    /// The `kind` key.
    pub fn kind(&self) -> &'static str {
        match self {
            PortSpec::Memif(_) => "memif",
            PortSpec::AfXdp(_) => "af_xdp",
            PortSpec::AfPacket(_) => "af_packet",
            PortSpec::Tap(_) => "tap",
            PortSpec::VhostUser(_) => "vhost_user",
            PortSpec::Vxlan(_) => "vxlan",
            PortSpec::Geneve(_) => "geneve",
        }
    }

    /// Configured queue pairs.
    pub fn queues(&self) -> u16 {
        match self {
            PortSpec::Memif(s) => s.queues,
            PortSpec::AfXdp(s) => s.queues,
            PortSpec::AfPacket(s) => s.queues,
            PortSpec::Tap(s) => s.queues,
            PortSpec::VhostUser(s) => s.queues,
            PortSpec::Vxlan(s) | PortSpec::Geneve(s) => s.underlay.as_port().queues(),
        }
    }

    fn to_map(&self) -> Map<String, Value> {
        let v = match self {
            PortSpec::Memif(s) => serde_json::to_value(s),
            PortSpec::AfXdp(s) => serde_json::to_value(s),
            PortSpec::AfPacket(s) => serde_json::to_value(s),
            PortSpec::Tap(s) => serde_json::to_value(s),
            PortSpec::VhostUser(s) => serde_json::to_value(s),
            PortSpec::Vxlan(s) | PortSpec::Geneve(s) => serde_json::to_value(s),
        };
        match v {
            Ok(Value::Object(m)) => m,
            _ => Map::new(),
        }
    }

    /// Key and reason of the first out-of-range value.
    fn validate(&self) -> Result<(), (&'static str, String)> {
        fn queues(q: u16, max: u16) -> Result<(), (&'static str, String)> {
            if q == 0 || q > max {
                return Err(("queues", format!("{q} not in 1..={max}")));
            }
            Ok(())
        }
        fn iface(name: &str) -> Result<(), (&'static str, String)> {
            if name.is_empty() || name.len() > 15 || name.contains(['/', ' ', '\0']) {
                return Err((
                    "iface",
                    format!(
                        "{name:?} is not a valid interface name (1..=15 bytes, no '/' or spaces)"
                    ),
                ));
            }
            Ok(())
        }
        fn one_of(
            key: &'static str,
            v: &Option<String>,
            allowed: &[&str],
        ) -> Result<(), (&'static str, String)> {
            match v {
                Some(x) if !allowed.contains(&x.as_str()) => {
                    Err((key, format!("{x:?} is not one of {}", allowed.join(", "))))
                }
                _ => Ok(()),
            }
        }
        fn socket(p: &Path) -> Result<(), (&'static str, String)> {
            let s = p.as_os_str().len();
            if s == 0 || s > 107 {
                return Err(("socket", format!("path must be 1..=107 bytes long, is {s}")));
            }
            Ok(())
        }
        match self {
            PortSpec::Memif(s) => {
                socket(&s.socket)?;
                queues(s.queues, 255)?;
                if !s.ring_size.is_power_of_two() || !(2..=16384).contains(&s.ring_size) {
                    return Err((
                        "ring_size",
                        format!("{} is not a power of two in 2..=16384", s.ring_size),
                    ));
                }
                if !(128..=65535).contains(&s.buffer_size) {
                    return Err((
                        "buffer_size",
                        format!("{} not in 128..=65535", s.buffer_size),
                    ));
                }
                if let Some(sec) = &s.secret {
                    if sec.len() > 23 || sec.contains('\0') {
                        return Err((
                            "secret",
                            format!("{} bytes long, at most 23 (no NUL)", sec.len()),
                        ));
                    }
                }
                if let Some(m) = s.max_frame_b {
                    if !(60..=1 << 20).contains(&m) {
                        return Err(("max_frame_b", format!("{m} not in 60..=1048576")));
                    }
                    let need = m.div_ceil(s.buffer_size);
                    if need > s.ring_size || need > 256 {
                        return Err((
                            "max_frame_b",
                            format!(
                                "{m} needs {need} buffers of {} B, more than the ring's {} or 256",
                                s.buffer_size, s.ring_size
                            ),
                        ));
                    }
                }
                Ok(())
            }
            PortSpec::AfXdp(s) => {
                iface(&s.iface)?;
                queues(s.queues, 64)?;
                one_of("attach", &s.attach, &["auto", "native", "generic"])?;
                one_of("bind", &s.bind, &["auto", "copy", "zero_copy"])?;
                if let Some(n) = s.frames_per_queue {
                    if !n.is_power_of_two() || n < 16 {
                        return Err((
                            "frames_per_queue",
                            format!("{n} is not a power of two of at least 16"),
                        ));
                    }
                }
                if let Some(n) = s.frame_size_b {
                    if n != 2048 && n != 4096 {
                        return Err(("frame_size_b", format!("{n} is not 2048 or 4096")));
                    }
                }
                Ok(())
            }
            PortSpec::AfPacket(s) => {
                iface(&s.iface)?;
                queues(s.queues, 64)?;
                one_of("fanout", &s.fanout, &["hash", "lb", "cpu", "queue"])
            }
            PortSpec::Tap(s) => {
                iface(&s.iface)?;
                queues(s.queues, 64)
            }
            PortSpec::VhostUser(s) => {
                socket(&s.socket)?;
                queues(s.queues, 16)?;
                if let Some(m) = s.max_frame_b {
                    if !(64..=65523).contains(&m) {
                        return Err(("max_frame_b", format!("{m} not in 64..=65523")));
                    }
                }
                Ok(())
            }
            PortSpec::Vxlan(s) | PortSpec::Geneve(s) => s.validate(),
        }
    }

    /// What must not be shared by two ports, as a human-readable key.
    fn exclusive_key(&self) -> (&'static str, String) {
        match self {
            PortSpec::Memif(s) => (
                "id",
                format!("memif id {} on socket {}", s.id, s.socket.display()),
            ),
            PortSpec::AfXdp(s) => ("iface", format!("interface {}", s.iface)),
            PortSpec::AfPacket(s) => ("iface", format!("interface {}", s.iface)),
            PortSpec::Tap(s) => ("iface", format!("interface {}", s.iface)),
            PortSpec::VhostUser(s) => (
                "socket",
                format!("vhost-user socket {}", s.socket.display()),
            ),
            PortSpec::Vxlan(s) | PortSpec::Geneve(s) => {
                ("underlay", format!("interface {}", s.underlay.iface()))
            }
        }
    }
}

impl TunnelSpec {
    fn validate(&self) -> Result<(), (&'static str, String)> {
        if self.vni > 0xff_ffff {
            return Err(("vni", format!("{} not in 0..=16777215", self.vni)));
        }
        let ip = self.local_ip;
        if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
            return Err(("local_ip", format!("{ip} is not a unicast address")));
        }
        let fam = |a: &IpAddr| a.is_ipv6() == ip.is_ipv6();
        if let Some(a) = self.remotes.iter().find(|a| !fam(a)) {
            return Err(("remotes", format!("{a} is not of local_ip's family")));
        }
        if let Some(a) = self
            .remotes
            .iter()
            .find(|a| **a == ip || a.is_multicast() || a.is_unspecified())
        {
            return Err(("remotes", format!("{a} is not a remote unicast address")));
        }
        if let Some(a) = self.next_hop.filter(|a| !fam(a)) {
            return Err(("next_hop", format!("{a} is not of local_ip's family")));
        }
        for n in &self.neighbours {
            n.mac
                .parse::<wire::MacAddr>()
                .ok()
                .filter(|m| m.is_unicast() && *m != wire::MacAddr::ZERO)
                .ok_or((
                    "neighbours",
                    format!("{:?} is not a unicast MAC address", n.mac),
                ))?;
        }
        if self.dst_port == Some(0) {
            return Err(("dst_port", "must not be 0".into()));
        }
        if let Some(n) = self.fdb_size {
            if !(4..=1 << 22).contains(&n) {
                return Err(("fdb_size", format!("{n} not in 4..=4194304")));
            }
        }
        if let Some(n) = self.staging {
            if !n.is_power_of_two() || !(8..=65536).contains(&n) {
                return Err(("staging", format!("{n} is not a power of two in 8..=65536")));
            }
        }
        if self.ttl == Some(0) {
            return Err(("ttl", "must not be 0".into()));
        }
        self.underlay
            .as_port()
            .validate()
            .map_err(|(k, m)| ("underlay", format!("{k}: {m}")))
    }
}

/// One `[[ports]]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Unique name.
    pub name: String,
    /// Worker owning its receive queues (round-robin if absent).
    pub worker: Option<usize>,
    /// Backend and its settings.
    pub spec: PortSpec,
}

impl PortConfig {
    /// Parses a `[[ports]]` table (TOML or JSON) found at `path`; `workers`
    /// is the number of workers, to check `worker`.
    pub fn from_json(v: &Value, path: &str, workers: usize) -> Result<Self, ConfigError> {
        let obj = v.as_object().ok_or_else(|| {
            ConfigError::new(path, format!("expected a table, found {}", kind_of(v)))
        })?;
        let mut rest = obj.clone();
        let name = match rest.remove("name") {
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "name"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"name\"")),
        };
        validate_port_name(&name).map_err(|m| ConfigError::new(join(path, "name"), m))?;
        let kind = match rest.remove("kind") {
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "kind"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"kind\"")),
        };
        let worker = match rest.remove("worker") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => {
                let w = n.as_u64().unwrap_or(u64::MAX);
                if w >= workers as u64 {
                    return Err(ConfigError::new(
                        join(path, "worker"),
                        format!("no worker {w} ({workers} configured, numbered from 0)"),
                    ));
                }
                Some(w as usize)
            }
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "worker"),
                    format!("expected a non-negative integer, found {}", kind_of(&other)),
                ))
            }
        };
        let rest = Value::Object(rest);
        let spec = match kind.as_str() {
            "memif" => PortSpec::Memif(from_value(rest, path)?),
            "af_xdp" => PortSpec::AfXdp(from_value(rest, path)?),
            "af_packet" => PortSpec::AfPacket(from_value(rest, path)?),
            "tap" => PortSpec::Tap(from_value(rest, path)?),
            "vhost_user" => PortSpec::VhostUser(from_value(rest, path)?),
            "vxlan" => PortSpec::Vxlan(from_value(rest, path)?),
            "geneve" => PortSpec::Geneve(from_value(rest, path)?),
            other => {
                return Err(ConfigError::new(
                    join(path, "kind"),
                    format!(
                        "unknown port kind {other:?} (expected one of {})",
                        PORT_KINDS.join(", ")
                    ),
                ))
            }
        };
        spec.validate()
            .map_err(|(k, m)| ConfigError::new(join(path, k), m))?;
        Ok(Self { name, worker, spec })
    }

    /// The table as JSON, as the API and `config.show` present it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("kind".into(), Value::String(self.spec.kind().into()));
        if let Some(w) = self.worker {
            m.insert("worker".into(), Value::from(w));
        }
        m.extend(self.spec.to_map());
        Value::Object(m)
    }
}

/// Checks a port name: 1..=64 bytes of `[A-Za-z0-9_.:-]`.
pub fn validate_port_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_PORT_NAME {
        return Err(format!("must be 1..={MAX_PORT_NAME} bytes long"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(format!(
            "{name:?} contains {c:?} (allowed: letters, digits, '_', '.', ':', '-')"
        ));
    }
    Ok(())
}

/// Checks that `port` can join `existing` (no duplicate name or resource).
/// `path` names the new port's table in errors.
pub fn check_conflicts<'a>(
    port: &PortConfig,
    path: &str,
    existing: impl IntoIterator<Item = (&'a str, &'a PortConfig)>,
) -> Result<(), ConfigError> {
    let (key, res) = port.spec.exclusive_key();
    for (where_, other) in existing {
        if other.name == port.name {
            return Err(ConfigError::new(
                join(path, "name"),
                format!("duplicate port name {:?} (also {where_})", port.name),
            ));
        }
        if other.spec.exclusive_key().1 == res {
            return Err(ConfigError::new(
                join(path, key),
                format!("{res} is already used by port {:?}", other.name),
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    switch: SwitchSection,
    #[serde(default)]
    workers: Vec<WorkerSection>,
    #[serde(default)]
    logic: Option<Value>,
    #[serde(default)]
    ports: Vec<Value>,
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[switch]`.
    pub switch: SwitchSection,
    /// `[[workers]]` (at least one).
    pub workers: Vec<WorkerSection>,
    /// `[logic]`.
    pub logic: LogicConfig,
    /// `[[ports]]`, in order.
    pub ports: Vec<PortConfig>,
}

impl Config {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(
                "",
                format!("cannot read {}: {}", path.display(), os_error_text(&e)),
            )
        })?;
        Self::parse_str(&text)
    }

    /// Parses and validates a config text.
    pub fn parse_str(text: &str) -> Result<Self, ConfigError> {
        let de = toml::Deserializer::new(text);
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let mut msg = lower(&inner.message().trim().replace('\n', "; "));
            if let Some(span) = inner.span() {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                msg = format!("{msg} (line {line})");
            }
            ConfigError::new(if path == "." { String::new() } else { path }, msg)
        })?;
        let sw = &raw.switch;
        if !(fabric::batch::MIN_BATCH..=fabric::batch::MAX_BATCH).contains(&sw.batch) {
            return Err(ConfigError::new(
                "switch.batch",
                format!(
                    "{} not in {}..={}",
                    sw.batch,
                    fabric::batch::MIN_BATCH,
                    fabric::batch::MAX_BATCH
                ),
            ));
        }
        if sw.latency_budget_us > fabric::MAX_BUDGET_US {
            return Err(ConfigError::new(
                "switch.latency_budget_us",
                format!(
                    "{} not in 0..={}",
                    sw.latency_budget_us,
                    fabric::MAX_BUDGET_US
                ),
            ));
        }
        if !(2..=65534).contains(&sw.max_ports) {
            return Err(ConfigError::new(
                "switch.max_ports",
                format!("{} not in 2..=65534", sw.max_ports),
            ));
        }
        if sw.control_socket.as_os_str().is_empty() || sw.control_socket.as_os_str().len() > 107 {
            return Err(ConfigError::new(
                "switch.control_socket",
                "path must be 1..=107 bytes long",
            ));
        }
        if sw.control_socket_mode > 0o777 {
            return Err(ConfigError::new(
                "switch.control_socket_mode",
                format!(
                    "{:#o} is not a permission mode (at most 0o777)",
                    sw.control_socket_mode
                ),
            ));
        }
        if let Some(m) = &sw.metrics_listen {
            parse_listen(m).map_err(|e| ConfigError::new("switch.metrics_listen", e))?;
        }
        for (i, e) in sw.openflow.iter().enumerate() {
            crate::ofchannel::Endpoint::parse(e)
                .map_err(|m| ConfigError::new(format!("switch.openflow[{i}]"), m))?;
        }
        let mut workers = raw.workers;
        if workers.is_empty() {
            workers.push(WorkerSection::default());
        }
        if workers.len() > fabric::fabric::MAX_WORKERS {
            return Err(ConfigError::new(
                "workers",
                format!(
                    "{} workers, at most {}",
                    workers.len(),
                    fabric::fabric::MAX_WORKERS
                ),
            ));
        }
        let ncpu = cpus_configured();
        for (i, w) in workers.iter().enumerate() {
            if w.cpu_idle.is_some() && w.cpu.is_none() {
                return Err(ConfigError::new(
                    format!("workers[{i}].cpu_idle"),
                    "needs the worker pinned (cpu = N)",
                ));
            }
            if let Some(c) = w.cpu {
                if c >= ncpu {
                    return Err(ConfigError::new(
                        format!("workers[{i}].cpu"),
                        format!(
                            "cpu {c} does not exist (this machine has cpus 0..={})",
                            ncpu - 1
                        ),
                    ));
                }
            }
        }
        let logic = match &raw.logic {
            Some(v) => LogicConfig::from_json(v, "logic")?,
            None => LogicConfig::default(),
        };
        if raw.ports.len() > sw.max_ports {
            return Err(ConfigError::new(
                "ports",
                format!(
                    "{} ports but switch.max_ports is {}",
                    raw.ports.len(),
                    sw.max_ports
                ),
            ));
        }
        let mut ports: Vec<PortConfig> = Vec::with_capacity(raw.ports.len());
        for (i, v) in raw.ports.iter().enumerate() {
            let path = format!("ports[{i}]");
            let p = PortConfig::from_json(v, &path, workers.len())?;
            let labels: Vec<String> = (0..ports.len()).map(|j| format!("ports[{j}]")).collect();
            check_conflicts(
                &p,
                &path,
                labels.iter().map(String::as_str).zip(ports.iter()),
            )?;
            ports.push(p);
        }
        Ok(Self {
            switch: raw.switch,
            workers,
            logic,
            ports,
        })
    }

    /// Checks that every port's backend is built in.
    pub fn check_backends(&self) -> Result<(), ConfigError> {
        for (i, p) in self.ports.iter().enumerate() {
            if !crate::backends::available(p.spec.kind()) {
                return Err(ConfigError::new(
                    format!("ports[{i}].kind"),
                    crate::backends::unavailable_message(p.spec.kind()),
                ));
            }
        }
        Ok(())
    }

    /// The fabric's settings.
    pub fn switch_config(&self) -> fabric::SwitchConfig {
        fabric::SwitchConfig {
            batch: self.switch.batch,
            max_ports: self.switch.max_ports,
            workers: self.workers.iter().map(|w| w.cpu).collect(),
            wakeup: self.switch.wakeup.mode(),
            latency_budget_us: self.switch.latency_budget_us,
        }
    }

    /// The whole config as JSON (what `config.show` answers).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "switch".into(),
            serde_json::to_value(&self.switch).unwrap_or(Value::Null),
        );
        m.insert(
            "workers".into(),
            serde_json::to_value(&self.workers).unwrap_or(Value::Null),
        );
        m.insert("logic".into(), self.logic.to_json());
        m.insert(
            "ports".into(),
            Value::Array(self.ports.iter().map(PortConfig::to_json).collect()),
        );
        Value::Object(m)
    }
}

/// Parses `"addr:port"`, `"[v6]:port"` or `"port"` (loopback).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(p) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
    }
    s.parse::<SocketAddr>()
        .map_err(|_| format!("{s:?} is not \"address:port\" or \"port\""))
}

/// Name of a JSON value's type, for error messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

fn from_value<T: serde::de::DeserializeOwned>(v: Value, path: &str) -> Result<T, ConfigError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let p = e.path().to_string();
        let msg = lower(&e.into_inner().to_string());
        ConfigError::new(
            if p == "." {
                path.to_string()
            } else {
                join(path, &p)
            },
            msg,
        )
    })
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// An I/O error as lower-case text without the "(os error N)" suffix.
pub fn os_error_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    let s = match s.find(" (os error") {
        Some(i) => &s[..i],
        None => &s,
    };
    lower(s)
}

/// Lower-cases the first letter of a message.
fn lower(s: &str) -> String {
    let s = s.trim_end();
    let mut c = s.chars();
    match c.next() {
        Some(f)
            if f.is_ascii_uppercase()
                && !c.clone().next().is_some_and(|n| n.is_ascii_uppercase()) =>
        {
            f.to_ascii_lowercase().to_string() + c.as_str()
        }
        _ => s.to_string(),
    }
}

fn cpus_configured() -> usize {
    crate::sys::cpus_configured()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FULL: &str = r#"
[switch]
control_socket = "/run/turnout/t.sock"
control_socket_mode = 0o660
batch = 64
max_ports = 16
wakeup = "poll"
metrics_listen = "127.0.0.1:9469"

[[workers]]
cpu = 0

[[workers]]

[logic]
name = "patch"
pairs = [["vnf0", "wire0"]]

[[ports]]
name = "vnf0"
kind = "memif"
socket = "/run/turnout/memif.sock"
id = 3
secret = "s3cret"
queues = 2
ring_size = 2048
buffer_size = 4096
worker = 1

[[ports]]
name = "wire0"
kind = "af_packet"
iface = "veth0"
fanout = "lb"

[[ports]]
name = "x0"
kind = "af_xdp"
iface = "veth1"

[[ports]]
name = "host"
kind = "tap"
iface = "turnout0"

[[ports]]
name = "vm0"
kind = "vhost_user"
socket = "/run/turnout/vm0.sock"
client = true
"#;

    #[test]
    fn full_config() {
        let c = Config::parse_str(FULL).unwrap();
        assert_eq!(
            c.switch.control_socket,
            PathBuf::from("/run/turnout/t.sock")
        );
        assert_eq!(c.switch.control_socket_mode, 0o660);
        assert_eq!(
            (c.switch.batch, c.switch.max_ports, c.switch.wakeup),
            (64, 16, Wakeup::Poll)
        );
        assert_eq!(
            c.switch.metrics_addr(),
            Some("127.0.0.1:9469".parse().unwrap())
        );
        assert_eq!(
            c.workers,
            vec![
                WorkerSection {
                    cpu: Some(0),
                    cpu_idle: None
                },
                WorkerSection {
                    cpu: None,
                    cpu_idle: None
                }
            ]
        );
        assert_eq!(c.logic.name, "patch");
        assert_eq!(
            c.logic.params.get("pairs"),
            Some(&json!([["vnf0", "wire0"]]))
        );
        assert_eq!(c.ports.len(), 5);
        assert_eq!(c.ports[0].worker, Some(1));
        assert_eq!(
            c.ports[0].spec,
            PortSpec::Memif(MemifSpec {
                socket: "/run/turnout/memif.sock".into(),
                id: 3,
                secret: Some("s3cret".into()),
                queues: 2,
                ring_size: 2048,
                buffer_size: 4096,
                max_frame_b: None
            })
        );
        assert_eq!(c.ports[1].spec.kind(), "af_packet");
        assert_eq!(
            c.ports[4].spec,
            PortSpec::VhostUser(VhostUserSpec {
                socket: "/run/turnout/vm0.sock".into(),
                queues: 1,
                client: true,
                max_frame_b: None
            })
        );
        let sc = c.switch_config();
        assert_eq!(sc.workers, vec![Some(0), None]);
        assert_eq!(sc.wakeup, fabric::WakeupMode::Poll);
        // The JSON form parses back to the same config.
        let j = c.to_json();
        assert_eq!(
            j["ports"][0],
            json!({"name": "vnf0", "kind": "memif", "worker": 1, "socket": "/run/turnout/memif.sock", "id": 3, "secret": "s3cret", "queues": 2, "ring_size": 2048, "buffer_size": 4096})
        );
        for (i, p) in c.ports.iter().enumerate() {
            assert_eq!(
                &PortConfig::from_json(&p.to_json(), "", 2).unwrap(),
                p,
                "port {i}"
            );
        }
        assert_eq!(
            LogicConfig::from_json(&c.logic.to_json(), "logic").unwrap(),
            c.logic
        );
    }

    #[test]
    fn defaults() {
        let c = Config::parse_str("").unwrap();
        assert_eq!(c.switch, SwitchSection::default());
        assert_eq!(
            c.switch.control_socket,
            PathBuf::from(DEFAULT_CONTROL_SOCKET)
        );
        assert_eq!(c.switch.control_socket_mode, 0o600);
        assert_eq!(c.switch.wakeup, Wakeup::Adaptive);
        assert_eq!(c.switch.metrics_addr(), None);
        assert_eq!(c.workers, vec![WorkerSection::default()]);
        assert_eq!(c.logic, LogicConfig::default());
        assert!(c.ports.is_empty());
        let c = Config::parse_str("[switch]\nmetrics_listen = \"9500\"\n[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\n").unwrap();
        assert_eq!(
            c.switch.metrics_addr(),
            Some("127.0.0.1:9500".parse().unwrap())
        );
        assert_eq!(
            c.ports[0].spec,
            PortSpec::Memif(MemifSpec {
                socket: "/s".into(),
                id: 0,
                secret: None,
                queues: 1,
                ring_size: 1024,
                buffer_size: 2048,
                max_frame_b: None
            })
        );
    }

    fn err(text: &str) -> String {
        Config::parse_str(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_configs_name_the_key_and_the_reason() {
        let cases: &[(&str, &str)] = &[
            ("[switch]\nbatchh = 3\n", "config: switch.batchh: unknown field `batchh`, expected one of `control_socket`, `control_socket_mode`, `batch`, `max_ports`, `wakeup`, `latency_budget_us`, `metrics_listen`, `openflow` (line 2)"),
            ("[switch]\nwakeup = \"pol\"\n", "config: switch.wakeup: unknown variant `pol`, expected `adaptive` or `poll` (line 2)"),
            ("[switch]\nbatch = 8\n", "config: switch.batch: 8 not in 32..=1024"),
            ("[switch]\nbatch = \"big\"\n", "config: switch.batch: invalid type: string \"big\", expected usize (line 2)"),
            ("[switch]\nmax_ports = 1\n", "config: switch.max_ports: 1 not in 2..=65534"),
            ("[switch]\ncontrol_socket_mode = 0o1777\n", "config: switch.control_socket_mode: 0o1777 is not a permission mode (at most 0o777)"),
            ("[switch]\nmetrics_listen = \"localhost\"\n", "config: switch.metrics_listen: \"localhost\" is not \"address:port\" or \"port\""),
            ("[[workers]]\ncpu = 4096\n", "config: workers[0].cpu: cpu 4096 does not exist (this machine has cpus 0..="),
            ("[[workers]]\ncore = 1\n", "config: workers[0].core: unknown field `core`, expected `cpu` or `cpu_idle` (line 2)"),
            ("[switch]\nlatency_budget_us = 20000\n", "config: switch.latency_budget_us: 20000 not in 0..=10000"),
            ("[[workers]]\ncpu_idle = \"poll\"\n", "config: workers[0].cpu_idle: needs the worker pinned (cpu = N)"),
            ("[[workers]]\ncpu = 0\ncpu_idle = \"halt\"\n", "config: workers[0].cpu_idle: unknown variant `halt`, expected `poll` (line 3)"),
            ("[routing]\n", "config: routing: unknown field `routing`, expected one of `switch`, `workers`, `logic`, `ports` (line 1)"),
            ("[logic]\naging_s = 3\n", "config: logic: missing key \"name\""),
            ("[logic]\nname = 3\n", "config: logic.name: expected a string, found a number"),
            ("[[ports]]\nkind = \"memif\"\n", "config: ports[0]: missing key \"name\""),
            ("[[ports]]\nname = \"a b\"\nkind = \"memif\"\n", "config: ports[0].name: \"a b\" contains ' ' (allowed: letters, digits, '_', '.', ':', '-')"),
            ("[[ports]]\nname = \"a\"\n", "config: ports[0]: missing key \"kind\""),
            ("[[ports]]\nname = \"a\"\nkind = \"memfi\"\n", "config: ports[0].kind: unknown port kind \"memfi\" (expected one of memif, af_xdp, af_packet, tap, vhost_user, vxlan, geneve)"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\n", "config: ports[0]: missing field `socket`"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nrings = 4\n", "config: ports[0].rings: unknown field `rings`, expected one of `socket`, `id`, `secret`, `queues`, `ring_size`, `buffer_size`, `max_frame_b`"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 1000\n", "config: ports[0].ring_size: 1000 is not a power of two in 2..=16384"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 32768\n", "config: ports[0].ring_size: 32768 is not a power of two in 2..=16384"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nqueues = 0\n", "config: ports[0].queues: 0 not in 1..=255"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nqueues = -1\n", "config: ports[0].queues: invalid value: integer `-1`, expected u16"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nsecret = \"012345678901234567890123\"\n", "config: ports[0].secret: 24 bytes long, at most 23 (no NUL)"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 2\nmax_frame_b = 9000\n", "config: ports[0].max_frame_b: 9000 needs 5 buffers of 2048 B, more than the ring's 2 or 256"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_xdp\"\niface = \"v0\"\nbind = \"zc\"\n", "config: ports[0].bind: \"zc\" is not one of auto, copy, zero_copy"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nworker = 1\n", "config: ports[0].worker: no worker 1 (1 configured, numbered from 0)"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"a-very-long-interface\"\n", "config: ports[0].iface: \"a-very-long-interface\" is not a valid interface name (1..=15 bytes, no '/' or spaces)"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"v0\"\nfanout = \"rr\"\n", "config: ports[0].fanout: \"rr\" is not one of hash, lb, cpu, queue"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_xdp\"\niface = \"v0\"\n[[ports]]\nname = \"a\"\nkind = \"tap\"\niface = \"t0\"\n", "config: ports[1].name: duplicate port name \"a\" (also ports[0])"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\n[[ports]]\nname = \"b\"\nkind = \"memif\"\nsocket = \"/s\"\n", "config: ports[1].id: memif id 0 on socket /s is already used by port \"a\""),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"v0\"\n[[ports]]\nname = \"b\"\nkind = \"af_xdp\"\niface = \"v0\"\n", "config: ports[1].iface: interface v0 is already used by port \"a\""),
            ("[switch\n", "config: invalid table header; expected `.`, `]` (line 1)"),
            ("ports = 3\n", "config: ports: invalid type: integer `3`, expected a sequence (line 1)"),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(
                got.starts_with(want),
                "config {text:?}\n got: {got}\nwant: {want}"
            );
        }
    }

    #[test]
    fn tunnel_ports() {
        let text = r#"
[[ports]]
name = "vx0"
kind = "vxlan"
vni = 100
local_ip = "192.168.50.1"
remotes = ["192.168.50.2", "192.168.50.3"]
neighbours = [{ ip = "192.168.50.2", mac = "02:00:00:00:00:02" }]
underlay = { kind = "af_packet", iface = "uplink0" }

[[ports]]
name = "gn0"
kind = "geneve"
vni = 7
local_ip = "fd00:50::1"
learning = false
dst_port = 7000
underlay = { kind = "af_xdp", iface = "uplink1", queues = 2 }
"#;
        let c = Config::parse_str(text).unwrap();
        let PortSpec::Vxlan(v) = &c.ports[0].spec else {
            panic!("{:?}", c.ports[0].spec)
        };
        assert_eq!(
            (v.vni, v.remotes.len(), v.learning, v.aging_s),
            (100, 2, true, 300)
        );
        assert_eq!(v.underlay.iface(), "uplink0");
        assert_eq!(c.ports[1].spec.kind(), "geneve");
        assert_eq!(c.ports[1].spec.queues(), 2);
        for p in &c.ports {
            assert_eq!(&PortConfig::from_json(&p.to_json(), "", 1).unwrap(), p);
        }
        let base = "[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nunderlay = { kind = \"af_packet\", iface = \"u0\" }\n";
        let cases: &[(&str, &str)] = &[
            ("vni = 16777216\nlocal_ip = \"10.0.0.1\"\n", "config: ports[0].vni: 16777216 not in 0..=16777215"),
            ("vni = 1\nlocal_ip = \"0.0.0.0\"\n", "config: ports[0].local_ip: 0.0.0.0 is not a unicast address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nremotes = [\"fd00::1\"]\n", "config: ports[0].remotes: fd00::1 is not of local_ip's family"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nremotes = [\"10.0.0.1\"]\n", "config: ports[0].remotes: 10.0.0.1 is not a remote unicast address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nneighbours = [{ ip = \"10.0.0.2\", mac = \"ff:ff:ff:ff:ff:ff\" }]\n", "config: ports[0].neighbours: \"ff:ff:ff:ff:ff:ff\" is not a unicast MAC address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nstaging = 1000\n", "config: ports[0].staging: 1000 is not a power of two in 8..=65536"),
            ("vni = 1\n", "config: ports[0]: missing field `local_ip`"),
        ];
        for (extra, want) in cases {
            let got = err(&format!("{base}{extra}"));
            assert!(
                got.starts_with(want),
                "{extra:?}\n got: {got}\nwant: {want}"
            );
        }
        let got = err("[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nvni = 1\nlocal_ip = \"10.0.0.1\"\nunderlay = { kind = \"tap\", iface = \"u0\" }\n");
        assert!(
            got.contains("ports[0].underlay") && got.contains("unknown variant `tap`"),
            "{got}"
        );
        let got = err("[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nvni = 1\nlocal_ip = \"10.0.0.1\"\nunderlay = { kind = \"af_packet\", iface = \"u0\", colour = 1 }\n");
        assert!(got.contains("unknown field `colour`"), "{got}");
        // A tunnel's underlay interface is not shared with another port.
        let got = err(&format!("{base}vni = 1\nlocal_ip = \"10.0.0.1\"\n[[ports]]\nname = \"b\"\nkind = \"af_packet\"\niface = \"u0\"\n"));
        assert!(
            got.starts_with("config: ports[1].iface: interface u0 is already used by port \"t\""),
            "{got}"
        );
    }

    #[test]
    fn the_examples_parse() {
        for text in [
            include_str!("../../../docs/examples/turnoutd.toml"),
            include_str!("../../../docs/examples/vxlan.toml"),
            include_str!("../../../docs/examples/flows.toml"),
        ] {
            let c = Config::parse_str(text).unwrap();
            assert!(!c.ports.is_empty());
        }
    }

    #[test]
    fn api_port_tables() {
        let e = PortConfig::from_json(&json!({"name": "p", "kind": "memif", "socket": 5}), "", 1)
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::new("socket", "invalid type: integer `5`, expected path string")
        );
        let e = PortConfig::from_json(&json!(["p"]), "", 1).unwrap_err();
        assert_eq!(e.message, "expected a table, found an array");
        let e = PortConfig::from_json(
            &json!({"name": "p", "kind": "tap", "iface": "t0", "worker": "0"}),
            "",
            1,
        )
        .unwrap_err();
        assert_eq!(
            e,
            ConfigError::new("worker", "expected a non-negative integer, found a string")
        );
        let p = PortConfig::from_json(
            &json!({"name": "p", "kind": "tap", "iface": "t0", "worker": 0}),
            "",
            1,
        )
        .unwrap();
        assert_eq!(p.worker, Some(0));
        assert_eq!(
            validate_port_name(&"x".repeat(65)).unwrap_err(),
            "must be 1..=64 bytes long"
        );
    }
}
