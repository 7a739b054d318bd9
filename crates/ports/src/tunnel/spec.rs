//! The configuration of a tunnel port as turnoutd's `[[ports]]` table of
//! kind `vxlan` or `geneve` gives it (docs/overlay.md): [`TunnelSpec`],
//! with the underlay port's own configuration inside.

use std::net::IpAddr;
use std::sync::Arc;

use fabric::Port;
use serde::{Deserialize, Serialize};

use super::{Kind, TunnelConfig, TunnelPort, DEFAULT_AGING_S, DEFAULT_STAGING, MAX_REMOTES};
use crate::af_packet::AfPacketConfig;
use crate::af_xdp::AfXdpConfig;
use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::open::Opener;

/// The port a tunnel sends and receives its outer frames on (`underlay`,
/// a table with its own `kind`: `af_packet` or `af_xdp`, or their older
/// spellings, the serde aliases below; `crate::config`'s tests check them
/// against [`crate::PortKind::aliases`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum UnderlaySpec {
    /// AF_PACKET on the uplink.
    #[serde(alias = "afpacket")]
    AfPacket(AfPacketConfig),
    /// AF_XDP on the uplink.
    #[serde(alias = "afxdp")]
    AfXdp(AfXdpConfig),
}

impl UnderlaySpec {
    /// The kernel interface.
    pub fn iface(&self) -> &str {
        match self {
            UnderlaySpec::AfPacket(c) => &c.ifname,
            UnderlaySpec::AfXdp(c) => &c.ifname,
        }
    }

    /// Its queue pairs (the tunnel's).
    pub fn queues(&self) -> u16 {
        match self {
            UnderlaySpec::AfPacket(c) => c.queues,
            UnderlaySpec::AfXdp(c) => c.queues,
        }
    }

    /// Checks the underlay port's values.
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            UnderlaySpec::AfPacket(c) => c.validate(),
            UnderlaySpec::AfXdp(c) => c.validate(),
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

/// A VXLAN or Geneve tunnel endpoint.
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
    #[serde(default = "default_aging")]
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
fn default_aging() -> u32 {
    DEFAULT_AGING_S
}

/// Most entries of the learned MAC table.
pub const MAX_FDB: u32 = 1 << 22;

impl TunnelSpec {
    /// Checks every value; the error names the key and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |k: &str, m: String| Err(ConfigError::new(k, m));
        config::check_range("vni", self.vni, 0, wire::vxlan::MAX_VNI)?;
        let ip = self.local_ip;
        if ip.is_unspecified() || ip.is_multicast() || ip.is_loopback() {
            return bad("local_ip", format!("{ip} is not a unicast address"));
        }
        let fam = |a: &IpAddr| a.is_ipv6() == ip.is_ipv6();
        if let Some(a) = self.remotes.iter().find(|a| !fam(a)) {
            return bad("remotes", format!("{a} is not of local_ip's family"));
        }
        if let Some(a) = self
            .remotes
            .iter()
            .find(|a| **a == ip || a.is_multicast() || a.is_unspecified())
        {
            return bad("remotes", format!("{a} is not a remote unicast address"));
        }
        if self.remotes.len() > MAX_REMOTES / 2 {
            return bad(
                "remotes",
                format!(
                    "{} static remotes, at most {}",
                    self.remotes.len(),
                    MAX_REMOTES / 2
                ),
            );
        }
        if let Some(a) = self.next_hop.filter(|a| !fam(a)) {
            return bad("next_hop", format!("{a} is not of local_ip's family"));
        }
        for n in &self.neighbours {
            if parse_mac(&n.mac).is_none() {
                return bad(
                    "neighbours",
                    format!("{:?} is not a unicast MAC address", n.mac),
                );
            }
        }
        if self.dst_port == Some(0) {
            return bad("dst_port", "must not be 0".into());
        }
        if let Some(n) = self.fdb_size {
            config::check_range("fdb_size", n, 4, MAX_FDB)?;
        }
        if let Some(n) = self.staging {
            config::check_pow2("staging", n, 8, 65536)?;
        }
        if self.ttl == Some(0) {
            return bad("ttl", "must not be 0".into());
        }
        self.underlay.validate().map_err(|e| e.under("underlay"))
    }

    /// The backend's configuration of this tunnel as a `kind` port.
    pub fn tunnel_config(&self, kind: Kind) -> Result<TunnelConfig, ConfigError> {
        self.validate()?;
        let mut c = TunnelConfig::new(kind, self.vni, self.local_ip);
        c.remotes = self.remotes.clone();
        c.learning = self.learning;
        c.aging_s = self.aging_s;
        if let Some(p) = self.dst_port {
            c.dst_port = p;
        }
        c.next_hop = self.next_hop;
        for n in &self.neighbours {
            // validate() checked every MAC
            if let Some(mac) = parse_mac(&n.mac) {
                c.neighbours.push((n.ip, mac));
            }
        }
        c.fdb_size = self.fdb_size.unwrap_or(4096) as usize;
        c.staging = self.staging.unwrap_or(DEFAULT_STAGING);
        if let Some(t) = self.ttl {
            c.ttl = t;
        }
        Ok(c)
    }
}

impl KindConfig for TunnelSpec {
    fn queues(&self) -> u16 {
        self.underlay.queues()
    }

    fn validate(&self) -> Result<(), ConfigError> {
        TunnelSpec::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        ("underlay", format!("interface {}", self.underlay.iface()))
    }

    /// Its underlay port first (not in the switch's table; the tunnel owns
    /// it), then the tunnel over it, kept in the opener by name.
    fn open(&self, kind: PortKind, name: &str, opener: &Opener) -> Result<Arc<dyn Port>, String> {
        let kind = match kind {
            PortKind::Vxlan => Kind::Vxlan,
            PortKind::Geneve => Kind::Geneve,
            other => return Err(format!("port kind {other} is not a tunnel")),
        };
        let c = self
            .tunnel_config(kind)
            .map_err(|e| format!("{}: {e}", kind.name()))?;
        let iface = self.underlay.iface();
        let uname = format!("{name}.underlay");
        let underlay = match &self.underlay {
            UnderlaySpec::AfPacket(u) => KindConfig::open(u, PortKind::AfPacket, &uname, opener)?,
            UnderlaySpec::AfXdp(u) => KindConfig::open(u, PortKind::AfXdp, &uname, opener)?,
        };
        let mtu = crate::netdev::ifindex(iface)
            .and_then(crate::netdev::query_link)
            .map_err(|e| format!("{}: cannot read the MTU of {iface}: {e}", kind.name()))?
            .mtu;
        let t = Arc::new(TunnelPort::open(name, c, underlay, iface, mtu)?);
        opener.tunnels().insert(name.to_string(), t.clone());
        Ok(t)
    }
}

fn parse_mac(s: &str) -> Option<wire::MacAddr> {
    s.parse::<wire::MacAddr>()
        .ok()
        .filter(|m| m.is_unicast() && *m != wire::MacAddr::ZERO)
}
