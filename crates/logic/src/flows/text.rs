//! The flow text syntax: the subset of `ovs-ofctl`'s flow syntax (ovs-fields(7),
//! ovs-actions(7)) that `flows` implements, parsed into a match and
//! instructions, and printed back in a canonical form for `dump`.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, Ipv6Addr};

use super::key::{num, Field, Key};

/// Highest table id (tables are `0..=MAX_TABLE`).
pub const MAX_TABLE: u8 = 254;
/// Default priority of a flow without `priority=`, as in OpenFlow.
pub const DEFAULT_PRIORITY: u16 = 32768;

/// An IPv6 address (or ND target) as an action's value.
pub type Ip6 = [u8; 16];

/// One action of an apply-actions list (or one of the two instructions
/// that go with it: `meter`, first, and `write_metadata`, last).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `output:N`: to port N.
    Output(u16),
    /// `flood`: every port but the ingress.
    Flood,
    /// `all`: every port but the ingress (the fabric never sends back to the ingress).
    All,
    /// `in_port`: back to the ingress (the fabric drops it as `hairpin`).
    InPort,
    /// `normal` / `output:NORMAL` (OFPP_NORMAL): the flows logic's learning
    /// bridge learns the source MAC on the ingress port and forwards by the
    /// destination MAC (known: its port; unknown or group: flood).
    Normal,
    /// `mod_dl_src:MAC` / `set_field:MAC->eth_src`.
    SetDlSrc(u64),
    /// `mod_dl_dst:MAC` / `set_field:MAC->eth_dst`.
    SetDlDst(u64),
    /// `dec_ttl`: IPv4 TTL (checksum updated) or IPv6 hop limit minus one;
    /// a packet whose TTL would reach zero is dropped.
    DecTtl,
    /// `mod_nw_src:A` / `set_field:A->ip_src`: IPv4 source, with the IP
    /// and TCP/UDP checksums updated.
    SetNwSrc(u32),
    /// `mod_nw_dst:A` / `set_field:A->ip_dst`.
    SetNwDst(u32),
    /// `mod_tp_src:N` / `set_field:N->tcp_src|udp_src|sctp_src`: TCP, UDP
    /// or SCTP source port over IPv4 or IPv6, checksum updated.
    SetTpSrc(u16),
    /// `mod_tp_dst:N` / `set_field:N->tcp_dst|udp_dst|sctp_dst`.
    SetTpDst(u16),
    /// `strip_vlan` / `pop_vlan`: removes the outer VLAN tag, if any.
    PopVlan,
    /// `push_vlan:TPID` (0x8100 or 0x88a8): a new outer VLAN tag with the
    /// VID and PCP of the outer tag the frame has (OpenFlow 1.3), VID 0 and
    /// PCP 0 if it has none (the frame grows by 4 bytes, copied into the
    /// batch's scratch memory).
    PushVlan(u16),
    /// `set_field:V->vlan_vid` (the outer tag's VID; the frame must be
    /// tagged: by the match or a `push_vlan` before). `mod_vlan_vid:V`
    /// is this after a `push_vlan:0x8100` unless the frame is tagged, as
    /// ovs-ofctl sends it.
    SetVlanVid(u16),
    /// `set_field:P->vlan_pcp` (the outer tag's priority; tagged as for
    /// `SetVlanVid`). `mod_vlan_pcp:P` pushes a tag first likewise.
    SetVlanPcp(u8),
    /// Several outputs of one action list, compiled into a group of the
    /// logic (never parsed or printed).
    Group(u16),
    /// `controller` / `controller:MAX_LEN`: a packet-in to the OpenFlow
    /// controllers with at most MAX_LEN bytes of the frame (65535, the
    /// default: all of it, up to the queue's slot size).
    Controller(u16),
    /// `group:N`: OpenFlow group N of the group table (groups.rs),
    /// compiled into its buckets.
    OfGroup(u32),
    /// `set_field:T->eth_type`: the EtherType behind the VLAN tags.
    SetEthType(u16),
    /// `set_field:D->ip_dscp` / `mod_nw_tos:D<<2`: the DSCP (0..63) of
    /// IPv4 (checksum updated) or IPv6.
    SetIpDscp(u8),
    /// `set_field:E->ip_ecn` / `mod_nw_ecn:E`: the ECN bits (0..3).
    SetIpEcn(u8),
    /// `set_field:P->ip_proto`: the IP protocol / IPv6 next header (the
    /// IPv4 header checksum and the L4 checksum over the pseudo-header
    /// updated).
    SetNwProto(u8),
    /// `set_field:N->icmp_type|icmpv6_type`: ICMP type, checksum updated.
    SetIcmpType(u8),
    /// `set_field:N->icmp_code|icmpv6_code`.
    SetIcmpCode(u8),
    /// `set_field:N->arp_op`.
    SetArpOp(u16),
    /// `set_field:A->arp_spa`.
    SetArpSpa(u32),
    /// `set_field:A->arp_tpa`.
    SetArpTpa(u32),
    /// `set_field:MAC->arp_sha`.
    SetArpSha(u64),
    /// `set_field:MAC->arp_tha`.
    SetArpTha(u64),
    /// `set_field:A->ipv6_src` (TCP/UDP/ICMPv6 checksum updated).
    SetIp6Src(Ip6),
    /// `set_field:A->ipv6_dst`.
    SetIp6Dst(Ip6),
    /// `set_field:N->ipv6_label`: the IPv6 flow label (20 bits).
    SetIp6Flabel(u32),
    /// `set_field:A->nd_target` (ICMPv6 checksum updated).
    SetNdTarget(Ip6),
    /// `set_field:MAC->nd_sll`: a solicitation's source link-layer
    /// address option, if it has one.
    SetNdSll(u64),
    /// `set_field:MAC->nd_tll`: an advertisement's target link-layer
    /// address option, if it has one.
    SetNdTll(u64),
    /// `set_field:N->mpls_label` / `set_mpls_label:N`: the outermost
    /// MPLS label (20 bits).
    SetMplsLabel(u32),
    /// `set_field:N->mpls_tc` / `set_mpls_tc:N` (0..7).
    SetMplsTc(u8),
    /// `set_field:N->mpls_bos` (0 or 1).
    SetMplsBos(u8),
    /// `set_field:N->tun_id` / `set_tunnel:N`: the tunnel id register
    /// (turnoutd has no tunnel port: later tables match it, no frame
    /// carries it).
    SetTunnelId(u64),
    /// `set_nw_ttl:N` / `mod_nw_ttl:N`: the IPv4 TTL (checksum updated) or
    /// IPv6 hop limit.
    SetNwTtl(u8),
    /// `push_mpls:ETHERTYPE` (0x8847 or 0x8848): a new outermost MPLS
    /// label stack entry behind the VLAN tags (OpenFlow 1.3's values: a
    /// copy of the outermost entry onto MPLS, else label 0, TC 0, the IP
    /// TTL or 0); the frame grows by 4 bytes.
    PushMpls(u16),
    /// `pop_mpls:ETHERTYPE`: removes the outermost entry; the frame's
    /// EtherType becomes ETHERTYPE.
    PopMpls(u16),
    /// `set_mpls_ttl:N`.
    SetMplsTtl(u8),
    /// `dec_mpls_ttl`: minus one; a TTL that would reach zero drops.
    DecMplsTtl,
    /// `copy_ttl_out`: the next-to-outermost TTL (MPLS or IP) to the
    /// outermost MPLS entry.
    CopyTtlOut,
    /// `copy_ttl_in`: the outermost MPLS TTL to the next-to-outermost.
    CopyTtlIn,
    /// `meter:N` (the meter instruction, first): meter N's bands decide
    /// whether the packet goes on (meters.rs).
    Meter(u32),
    /// `write_metadata:V[/M]` (the instruction, last before goto): the
    /// metadata register's bits M become V's.
    WriteMetadata(u64, u64),
    /// Compiled: the next N actions are a group bucket with header
    /// changes, run on a copy of the frame (never parsed or printed).
    Bucket(u16),
    /// Compiled: a SELECT group of N buckets, each a `SelBucket` followed
    /// by its actions: one bucket is chosen per packet (groups.rs).
    Select(u16),
    /// Compiled: a fast-failover group of N buckets, each a `SelBucket`
    /// followed by its actions: the first live one runs (groups.rs).
    Failover(u16),
    /// Compiled: one bucket of a `Select` or `Failover`: its weight, watch port (or
    /// `u16::MAX`: none), the number of its actions, and whether they
    /// change headers (then run on a copy of the frame).
    SelBucket {
        /// Its share of the packets.
        weight: u16,
        /// The port id that must be up (`u16::MAX`: none).
        watch: u16,
        /// Actions after it that are its.
        len: u16,
        /// They change headers: run on a copy of the frame.
        copy: bool,
    },
    /// `clear_actions` (the instruction, after the apply-actions): the
    /// packet's action set becomes empty.
    ClearActions,
    /// `write_actions(...)` (the instruction, after `clear_actions`): the
    /// next N actions are merged into the packet's action set (one per
    /// type, one set-field per field; the last written wins), which runs
    /// when the pipeline ends (OpenFlow 1.3, 5.10).
    WriteActions(u16),
    /// Compiled: the next `len` actions are the action set's entry of
    /// `slot` (`exec::set_slot`), written there when the flow runs
    /// (never parsed or printed).
    Write {
        /// The entry's slot: its place in the set's order.
        slot: u8,
        /// Actions after it that are the entry's.
        len: u16,
    },
}

impl Action {
    /// An output (of a copy of the frame as it is then).
    #[inline]
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Action::Output(_)
                | Action::Flood
                | Action::All
                | Action::InPort
                | Action::Normal
                | Action::Group(_)
        )
    }

    /// Changes the frame or the pipeline's registers (what an output
    /// before it must not see).
    #[inline]
    pub fn is_rewrite(&self) -> bool {
        !matches!(
            self,
            Action::Output(_)
                | Action::Flood
                | Action::All
                | Action::InPort
                | Action::Normal
                | Action::Group(_)
                | Action::Controller(_)
                | Action::OfGroup(_)
                | Action::Meter(_)
                | Action::Bucket(_)
                | Action::Select(_)
                | Action::Failover(_)
                | Action::SelBucket { .. }
                | Action::ClearActions
                | Action::WriteActions(_)
                | Action::Write { .. }
        )
    }
}

/// A parsed flow: match, priority, table and instructions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowSpec {
    /// `table=N`, if given.
    pub table: Option<u8>,
    /// `priority=N`, if given.
    pub priority: Option<u16>,
    /// `cookie=N` (0 if not given).
    pub cookie: u64,
    /// Match values (already masked).
    pub key: Key,
    /// Match mask.
    pub mask: Key,
    /// Apply-actions list; `None` when no `actions=` was given.
    pub actions: Option<Vec<Action>>,
    /// `goto_table:N`.
    pub goto: Option<u8>,
    /// `idle_timeout=S` (0: none).
    pub idle_timeout: u16,
    /// `hard_timeout=S` (0: none).
    pub hard_timeout: u16,
    /// `send_flow_rem`: tell OpenFlow connections when the flow goes.
    pub send_flow_rem: bool,
}

fn num_u64(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

pub(super) fn uint(field: &str, s: &str, max: u64) -> Result<u64, String> {
    match num_u64(s) {
        Some(v) if v <= max => Ok(v),
        _ => Err(format!(
            "field {field}: {s:?} is not a number in 0..={max} (decimal or 0x hex)"
        )),
    }
}

fn parse_mac(field: &str, s: &str) -> Result<u64, String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(format!(
            "field {field}: {s:?} is not a MAC address (xx:xx:xx:xx:xx:xx)"
        ));
    }
    let mut v = 0u64;
    for p in parts {
        let b = u8::from_str_radix(p, 16).map_err(|_| {
            format!("field {field}: {s:?} is not a MAC address (xx:xx:xx:xx:xx:xx)")
        })?;
        if p.len() > 2 {
            return Err(format!("field {field}: {s:?} is not a MAC address"));
        }
        v = (v << 8) | b as u64;
    }
    Ok(v)
}

fn prefix_mask(bits: u32, len: u32) -> u128 {
    if len == 0 {
        0
    } else {
        (u128::MAX << (128 - len)) >> (128 - bits)
    }
}

/// `addr[/prefix|/mask]` of IPv4.
fn parse_ip4(field: &str, s: &str) -> Result<(u128, u128), String> {
    let (a, m) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let addr: Ipv4Addr = a
        .parse()
        .map_err(|_| format!("field {field}: {a:?} is not an IPv4 address"))?;
    let mask = match m {
        None => u32::MAX as u128,
        Some(m) => {
            if let Ok(p) = m.parse::<u32>() {
                if p > 32 {
                    return Err(format!("field {field}: prefix /{p} is longer than 32"));
                }
                prefix_mask(32, p)
            } else {
                let mm: Ipv4Addr = m
                    .parse()
                    .map_err(|_| format!("field {field}: {m:?} is not a prefix length or mask"))?;
                u32::from(mm) as u128
            }
        }
    };
    Ok((u32::from(addr) as u128 & mask, mask))
}

/// `addr[/prefix]` of IPv6.
fn parse_ip6(field: &str, s: &str) -> Result<(u128, u128), String> {
    let (a, m) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let addr: Ipv6Addr = a
        .parse()
        .map_err(|_| format!("field {field}: {a:?} is not an IPv6 address"))?;
    let mask = match m {
        None => u128::MAX,
        Some(m) => match m.parse::<u32>() {
            Ok(p) if p <= 128 => prefix_mask(128, p),
            _ => {
                return Err(format!(
                    "field {field}: {m:?} is not a prefix length in 0..=128"
                ))
            }
        },
    };
    Ok((u128::from(addr) & mask, mask))
}

/// `value[/mask]` of an integer field of `bits` bits.
fn parse_masked(field: &str, s: &str, bits: u32) -> Result<(u128, u128), String> {
    let max = if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    };
    let (v, m) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let v = uint(field, v, max)? as u128;
    let m = match m {
        None => max as u128,
        Some(m) => uint(field, m, max)? as u128,
    };
    Ok((v & m, m))
}

struct Builder {
    key: Key,
    mask: Key,
    /// IPv4/ARP and IPv6 addresses share key words (and the ARP opcode,
    /// the IPv6 flow label and the MPLS fields share bits; the ND
    /// link-layer addresses too): which were given.
    v4_addr: bool,
    v6_addr: bool,
    arp_op: bool,
    arp_ha: bool,
    flabel: bool,
    mpls: bool,
    nd_target: bool,
    nd_sll: bool,
    nd_tll: bool,
}

/// `MAC[/mask]`.
fn parse_mac_masked(k: &str, v: &str) -> Result<(u128, u128), String> {
    let (a, mk) = v.split_once('/').map_or((v, None), |(a, m)| (a, Some(m)));
    let a = parse_mac(k, a)? as u128;
    let mk = match mk {
        Some(mk) => parse_mac(k, mk)? as u128,
        None => 0xffff_ffff_ffff,
    };
    Ok((a & mk, mk))
}

impl Builder {
    fn set(&mut self, name: &str, f: Field, v: u128, m: u128) -> Result<(), String> {
        let old_m = self.mask.get(f);
        if old_m & m != 0 && (self.key.get(f) & m & old_m) != (v & m & old_m) {
            return Err(format!("field {name}: conflicts with an earlier value"));
        }
        self.mask.set(f, old_m | m);
        self.key.set(f, (self.key.get(f) & old_m) | (v & m));
        Ok(())
    }
    fn exact(&self, f: Field) -> Option<u128> {
        let full = if f.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << f.bits()) - 1
        };
        (self.mask.get(f) == full).then(|| self.key.get(f))
    }
    fn has(&self, f: Field) -> bool {
        self.mask.get(f) != 0
    }
}

fn shorthand(w: &str) -> Option<(u16, Option<u8>)> {
    Some(match w {
        "ip" => (num::IPV4, None),
        "ipv6" => (num::IPV6, None),
        "arp" => (num::ARP, None),
        "tcp" => (num::IPV4, Some(num::TCP)),
        "udp" => (num::IPV4, Some(num::UDP)),
        "sctp" => (num::IPV4, Some(num::SCTP)),
        "icmp" => (num::IPV4, Some(num::ICMP)),
        "tcp6" => (num::IPV6, Some(num::TCP)),
        "udp6" => (num::IPV6, Some(num::UDP)),
        "sctp6" => (num::IPV6, Some(num::SCTP)),
        "icmp6" => (num::IPV6, Some(num::ICMP6)),
        "mpls" => (num::MPLS, None),
        "mplsm" => (num::MPLS_MC, None),
        _ => return None,
    })
}

/// Splits `s` at commas and white space, dropping empty pieces.
pub(super) fn tokens(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| c == ',' || c.is_whitespace())
        .filter(|t| !t.is_empty())
}

/// Parses a flow in ovs-ofctl syntax. `actions=` (or `action=`), when
/// present, must come last and takes the rest of the text.
pub fn parse(text: &str) -> Result<FlowSpec, String> {
    let (m, actions) = match text.find("actions=").or_else(|| text.find("action=")) {
        Some(i) => {
            let rest = &text[i..];
            let eq = rest.find('=').unwrap_or(0);
            (&text[..i], Some(&rest[eq + 1..]))
        }
        None => (text, None),
    };
    let mut b = Builder {
        key: Key::default(),
        mask: Key::default(),
        v4_addr: false,
        v6_addr: false,
        arp_op: false,
        arp_ha: false,
        flabel: false,
        mpls: false,
        nd_target: false,
        nd_sll: false,
        nd_tll: false,
    };
    let (mut table, mut priority, mut cookie) = (None, None, 0u64);
    let (mut idle_timeout, mut hard_timeout, mut send_flow_rem) = (0u16, 0u16, false);
    for t in tokens(m) {
        let (k, v) = match t.split_once('=') {
            Some((k, v)) => (k, v),
            None if t == "send_flow_rem" => {
                send_flow_rem = true;
                continue;
            }
            None => {
                let (et, proto) = shorthand(t).ok_or_else(|| {
                    format!("unknown field or protocol {t:?} (a field needs =value)")
                })?;
                b.set(t, Field::DlType, et as u128, 0xffff)?;
                if let Some(p) = proto {
                    b.set(t, Field::NwProto, p as u128, 0xff)?;
                }
                continue;
            }
        };
        match k {
            "table" => table = Some(uint(k, v, MAX_TABLE as u64)? as u8),
            "priority" => priority = Some(uint(k, v, 65535)? as u16),
            "cookie" => cookie = uint(k, v.split('/').next().unwrap_or(v), u64::MAX)?,
            "idle_timeout" => idle_timeout = uint(k, v, 65535)? as u16,
            "hard_timeout" => hard_timeout = uint(k, v, 65535)? as u16,
            "in_port" => {
                let p = uint(k, v, 65534)?;
                b.set(k, Field::InPort, p as u128, 0xffff)?;
            }
            "dl_src" | "eth_src" | "dl_dst" | "eth_dst" => {
                let (a, mk) = parse_mac_masked(k, v)?;
                let f = if k.ends_with("src") {
                    Field::DlSrc
                } else {
                    Field::DlDst
                };
                b.set(k, f, a, mk)?;
            }
            "arp_sha" | "arp_tha" => {
                let (a, mk) = parse_mac_masked(k, v)?;
                let f = if k == "arp_sha" {
                    Field::ArpSha
                } else {
                    Field::ArpTha
                };
                b.arp_ha = true;
                b.set(k, f, a, mk)?;
            }
            "nd_sll" | "ipv6_nd_sll" | "nd_tll" | "ipv6_nd_tll" => {
                let (a, mk) = parse_mac_masked(k, v)?;
                let f = if k.ends_with("sll") {
                    b.nd_sll = true;
                    Field::NdSll
                } else {
                    b.nd_tll = true;
                    Field::NdTll
                };
                b.set(k, f, a, mk)?;
            }
            "nd_target" | "ipv6_nd_target" => {
                let (a, mk) = parse_ip6(k, v)?;
                b.nd_target = true;
                b.set(k, Field::NdTarget, a, mk)?;
            }
            "ipv6_label" | "ipv6_flabel" => {
                let (val, mk) = parse_masked(k, v, 20)?;
                b.flabel = true;
                b.set(k, Field::Ip6Flabel, val, mk)?;
            }
            "mpls_label" | "mpls_tc" | "mpls_bos" => {
                let (f, max) = match k {
                    "mpls_label" => (Field::MplsLabel, 0xf_ffff),
                    "mpls_tc" => (Field::MplsTc, 7),
                    _ => (Field::MplsBos, 1),
                };
                b.mpls = true;
                b.set(k, f, uint(k, v, max)? as u128, max as u128)?;
            }
            "metadata" => {
                let (val, mk) = parse_masked(k, v, 64)?;
                b.set(k, Field::Metadata, val, mk)?;
            }
            "tun_id" | "tunnel_id" => {
                let (val, mk) = parse_masked(k, v, 64)?;
                b.set(k, Field::TunnelId, val, mk)?;
            }
            "ip_ecn" | "nw_ecn" => b.set(k, Field::NwTos, uint(k, v, 3)? as u128, 0x03)?,
            "dl_type" | "eth_type" => {
                b.set(k, Field::DlType, uint(k, v, 0xffff)? as u128, 0xffff)?;
            }
            "dl_vlan" => {
                let vid = uint(k, v, 0xffff)?;
                if vid == 0xffff {
                    b.set(k, Field::VlanTci, 0, 0x1000)?;
                } else if vid > 4095 {
                    return Err(format!(
                        "field {k}: {v:?} is not a VLAN id (0..=4095, or 0xffff for untagged)"
                    ));
                } else {
                    b.set(k, Field::VlanTci, 0x1000 | vid as u128, 0x1fff)?;
                }
            }
            "dl_vlan_pcp" | "vlan_pcp" => {
                let pcp = uint(k, v, 7)?;
                b.set(k, Field::VlanTci, 0x1000 | (pcp as u128) << 13, 0xf000)?;
            }
            "vlan_tci" => {
                let (val, mk) = parse_masked(k, v, 16)?;
                b.set(k, Field::VlanTci, val, mk)?;
            }
            "nw_src" | "ip_src" | "nw_dst" | "ip_dst" | "arp_spa" | "arp_tpa" => {
                let (a, mk) = parse_ip4(k, v)?;
                let f = if k.ends_with("src") || k == "arp_spa" {
                    Field::Ip4Src
                } else {
                    Field::Ip4Dst
                };
                b.v4_addr = true;
                b.set(k, f, a, mk)?;
            }
            "ipv6_src" | "ipv6_dst" => {
                let (a, mk) = parse_ip6(k, v)?;
                let f = if k == "ipv6_src" {
                    Field::Ip6Src
                } else {
                    Field::Ip6Dst
                };
                b.v6_addr = true;
                b.set(k, f, a, mk)?;
            }
            "nw_proto" | "ip_proto" => b.set(k, Field::NwProto, uint(k, v, 255)? as u128, 0xff)?,
            "nw_tos" => {
                let tos = uint(k, v, 255)?;
                if tos & 3 != 0 {
                    return Err(format!(
                        "field {k}: {v:?} has ECN bits set (nw_tos takes DSCP << 2)"
                    ));
                }
                b.set(k, Field::NwTos, tos as u128, 0xfc)?;
            }
            "ip_dscp" => b.set(k, Field::NwTos, (uint(k, v, 63)? << 2) as u128, 0xfc)?,
            "tp_src" | "tcp_src" | "udp_src" | "sctp_src" | "tp_dst" | "tcp_dst" | "udp_dst"
            | "sctp_dst" => {
                let (val, mk) = parse_masked(k, v, 16)?;
                let f = if k.ends_with("src") {
                    Field::TpSrc
                } else {
                    Field::TpDst
                };
                b.set(k, f, val, mk)?;
            }
            "icmp_type" | "icmpv6_type" => {
                b.set(k, Field::TpSrc, uint(k, v, 255)? as u128, 0xffff)?
            }
            "icmp_code" | "icmpv6_code" => {
                b.set(k, Field::TpDst, uint(k, v, 255)? as u128, 0xffff)?
            }
            "arp_op" => {
                b.arp_op = true;
                b.set(k, Field::ArpOp, uint(k, v, 0xffff)? as u128, 0xffff)?
            }
            _ => return Err(format!("unknown field {k:?}")),
        }
    }
    prerequisites(&b)?;
    let (actions, goto) = match actions {
        None => (None, None),
        Some(a) => {
            let tagged =
                b.mask.get(Field::VlanTci) & 0x1000 != 0 && b.key.get(Field::VlanTci) & 0x1000 != 0;
            let (acts, goto) = parse_actions(a, table.unwrap_or(0), tagged)?;
            super::prereq::check(&acts, &b.key, &b.mask)?;
            (Some(acts), goto)
        }
    };
    Ok(FlowSpec {
        table,
        priority,
        cookie,
        key: b.key,
        mask: b.mask,
        actions,
        goto,
        idle_timeout,
        hard_timeout,
        send_flow_rem,
    })
}

fn prerequisites(b: &Builder) -> Result<(), String> {
    let et = b.exact(Field::DlType).map(|v| v as u16);
    let proto = b.exact(Field::NwProto).map(|v| v as u8);
    let ip4 = et == Some(num::IPV4);
    let ip6 = et == Some(num::IPV6);
    let arp = et == Some(num::ARP);
    let need = |ok: bool, what: &str, req: &str| -> Result<(), String> {
        if ok {
            Ok(())
        } else {
            Err(format!("{what} requires {req} (missing prerequisite)"))
        }
    };
    if b.v4_addr {
        need(
            ip4 || arp,
            "nw_src/nw_dst/arp_spa/arp_tpa",
            "dl_type=0x0800 (ip) or 0x0806 (arp)",
        )?;
    }
    if b.v6_addr {
        need(ip6, "ipv6_src/ipv6_dst", "dl_type=0x86dd (ipv6)")?;
    }
    if b.has(Field::NwProto) {
        need(ip4 || ip6 || arp, "nw_proto", "dl_type ip, ipv6 or arp")?;
    }
    if b.has(Field::NwTos) {
        need(ip4 || ip6, "nw_tos/ip_dscp/ip_ecn", "dl_type ip or ipv6")?;
    }
    if b.arp_op {
        need(arp, "arp_op", "dl_type=0x0806 (arp)")?;
    }
    let mpls = matches!(et, Some(num::MPLS | num::MPLS_MC));
    let icmp_type = b.exact(Field::TpSrc).map(|v| v as u8);
    let nd = ip6 && proto == Some(num::ICMP6);
    if b.nd_target {
        need(
            nd && matches!(icmp_type, Some(num::ND_NS | num::ND_NA)),
            "nd_target",
            "icmp6 with icmp_type=135 or 136",
        )?;
    }
    if b.nd_sll {
        need(
            nd && icmp_type == Some(num::ND_NS),
            "nd_sll",
            "icmp6 with icmp_type=135",
        )?;
    }
    if b.nd_tll {
        need(
            nd && icmp_type == Some(num::ND_NA),
            "nd_tll",
            "icmp6 with icmp_type=136",
        )?;
    }
    if b.arp_ha {
        need(arp, "arp_sha/arp_tha", "dl_type=0x0806 (arp)")?;
    }
    if b.flabel {
        need(ip6, "ipv6_label", "dl_type=0x86dd (ipv6)")?;
    }
    if b.mpls {
        need(
            mpls,
            "mpls_label/mpls_tc/mpls_bos",
            "dl_type=0x8847 or 0x8848 (mpls)",
        )?;
    }
    if b.has(Field::TpSrc) || b.has(Field::TpDst) {
        need(
            (ip4 || ip6)
                && matches!(
                    proto,
                    Some(num::TCP | num::UDP | num::SCTP | num::ICMP | num::ICMP6)
                ),
            "tp_src/tp_dst/icmp_type/icmp_code",
            "ip or ipv6 with nw_proto tcp, udp, sctp or icmp",
        )?;
    }
    Ok(())
}

fn ip4_value(what: &str, s: &str) -> Result<u32, String> {
    s.parse::<Ipv4Addr>()
        .map(u32::from)
        .map_err(|_| format!("action {what}: {s:?} is not an IPv4 address"))
}

fn ip6_value(what: &str, s: &str) -> Result<Ip6, String> {
    s.parse::<Ipv6Addr>()
        .map(|a| a.octets())
        .map_err(|_| format!("action {what}: {s:?} is not an IPv6 address"))
}

/// `V[/M]` of a 64-bit register (`write_metadata`).
fn value_mask64(what: &str, s: &str) -> Result<(u64, u64), String> {
    let (v, m) = s.split_once('/').map_or((s, None), |(a, m)| (a, Some(m)));
    let v = uint(what, v, u64::MAX)?;
    let m = match m {
        Some(m) => uint(what, m, u64::MAX)?,
        None => u64::MAX,
    };
    Ok((v & m, m))
}

/// An MPLS EtherType (push_mpls).
fn mpls_ethertype(what: &str, s: &str) -> Result<u16, String> {
    match uint(what, s, 0xffff)? as u16 {
        t @ (num::MPLS | num::MPLS_MC) => Ok(t),
        t => Err(format!(
            "action {what}:0x{t:04x}: the ethertype must be 0x8847 or 0x8848"
        )),
    }
}

/// The action `set_field:V->F` (`v` and `f` already split).
fn set_field(v: &str, f: &str) -> Result<Action, String> {
    let w = "set_field";
    let n = |max: u64| uint(w, v, max);
    Ok(match f {
        "eth_src" | "dl_src" => Action::SetDlSrc(parse_mac(w, v)?),
        "eth_dst" | "dl_dst" => Action::SetDlDst(parse_mac(w, v)?),
        "eth_type" | "dl_type" => Action::SetEthType(n(0xffff)? as u16),
        "ip_src" | "nw_src" | "ipv4_src" => Action::SetNwSrc(ip4_value(w, v)?),
        "ip_dst" | "nw_dst" | "ipv4_dst" => Action::SetNwDst(ip4_value(w, v)?),
        "tcp_src" | "udp_src" | "sctp_src" | "tp_src" => Action::SetTpSrc(n(65535)? as u16),
        "tcp_dst" | "udp_dst" | "sctp_dst" | "tp_dst" => Action::SetTpDst(n(65535)? as u16),
        // OpenFlow's value, with OFPVID_PRESENT (0x1000) or without.
        "vlan_vid" => Action::SetVlanVid(n(0x1fff)? as u16 & 0xfff),
        "vlan_pcp" => Action::SetVlanPcp(n(7)? as u8),
        "ip_dscp" => Action::SetIpDscp(n(63)? as u8),
        "ip_ecn" | "nw_ecn" => Action::SetIpEcn(n(3)? as u8),
        "ip_proto" | "nw_proto" => Action::SetNwProto(n(255)? as u8),
        "nw_ttl" => Action::SetNwTtl(n(255)? as u8),
        "icmp_type" | "icmpv4_type" | "icmpv6_type" => Action::SetIcmpType(n(255)? as u8),
        "icmp_code" | "icmpv4_code" | "icmpv6_code" => Action::SetIcmpCode(n(255)? as u8),
        "arp_op" => Action::SetArpOp(n(0xffff)? as u16),
        "arp_spa" => Action::SetArpSpa(ip4_value(w, v)?),
        "arp_tpa" => Action::SetArpTpa(ip4_value(w, v)?),
        "arp_sha" => Action::SetArpSha(parse_mac(w, v)?),
        "arp_tha" => Action::SetArpTha(parse_mac(w, v)?),
        "ipv6_src" => Action::SetIp6Src(ip6_value(w, v)?),
        "ipv6_dst" => Action::SetIp6Dst(ip6_value(w, v)?),
        "ipv6_label" | "ipv6_flabel" => Action::SetIp6Flabel(n(0xf_ffff)? as u32),
        "nd_target" | "ipv6_nd_target" => Action::SetNdTarget(ip6_value(w, v)?),
        "nd_sll" | "ipv6_nd_sll" => Action::SetNdSll(parse_mac(w, v)?),
        "nd_tll" | "ipv6_nd_tll" => Action::SetNdTll(parse_mac(w, v)?),
        "mpls_label" => Action::SetMplsLabel(n(0xf_ffff)? as u32),
        "mpls_tc" => Action::SetMplsTc(n(7)? as u8),
        "mpls_bos" => Action::SetMplsBos(n(1)? as u8),
        "mpls_ttl" => Action::SetMplsTtl(n(255)? as u8),
        "tun_id" | "tunnel_id" => Action::SetTunnelId(n(u64::MAX)?),
        _ => {
            return Err(format!(
                "action set_field: field {f:?} is not supported (docs/flows.md lists the fields)"
            ))
        }
    })
}

/// A piece of an action list: an action, or the parentheses of
/// `write_actions(...)`.
enum Tok<'a> {
    Act(&'a str),
    Open,
    Close,
}

/// The pieces of action list `s` ([`tokens`]), with `write_actions(`
/// and its `)` as pieces of their own.
fn write_tokens(s: &str) -> Result<Vec<Tok<'_>>, String> {
    const OPEN: &str = "write_actions(";
    let mut out = Vec::new();
    let mut open = false;
    for t in tokens(s) {
        let mut t = t;
        if !open
            && t.get(..OPEN.len())
                .is_some_and(|p| p.eq_ignore_ascii_case(OPEN))
        {
            out.push(Tok::Open);
            open = true;
            t = &t[OPEN.len()..];
        }
        if open {
            if let Some(x) = t.strip_suffix(')') {
                if !x.is_empty() {
                    out.push(Tok::Act(x));
                }
                out.push(Tok::Close);
                open = false;
                continue;
            }
        }
        if !t.is_empty() {
            out.push(Tok::Act(t));
        }
    }
    if open {
        return Err("write_actions( has no closing parenthesis".into());
    }
    Ok(out)
}

/// Parses an action list (and the `meter` and `write_metadata`
/// instructions that go with it, first and last, `clear_actions` and
/// `write_actions(...)` between them, and `goto_table`), in ovs-ofctl's
/// order of the instructions;
/// `tagged`: the match guarantees a VLAN tag (`mod_vlan_vid` then pushes
/// none). Prerequisites are [`super::prereq::check`]'s.
pub(super) fn parse_actions(
    s: &str,
    table: u8,
    mut tagged: bool,
) -> Result<(Vec<Action>, Option<u8>), String> {
    let mut acts = Vec::new();
    let mut goto = None;
    let mut drop = false;
    // The `WriteActions` being filled (its index in `acts`), and whether
    // a `clear_actions` or `write_actions` came (no apply action after).
    let mut writing: Option<usize> = None;
    let mut instr = false;
    for tok in write_tokens(s)? {
        let t = match tok {
            Tok::Open => {
                if goto.is_some() || acts.iter().any(|a| matches!(a, Action::WriteMetadata(..))) {
                    return Err("write_actions after write_metadata or goto_table \
                                (the order: meter, actions, clear_actions, write_actions, \
                                write_metadata, goto_table)"
                        .into());
                }
                if acts.iter().any(|a| matches!(a, Action::WriteActions(_))) {
                    return Err("write_actions given twice".into());
                }
                writing = Some(acts.len());
                instr = true;
                acts.push(Action::WriteActions(0));
                continue;
            }
            Tok::Close => {
                if let Some(w) = writing.take() {
                    let n = acts.len() - w - 1;
                    if n > u16::MAX as usize {
                        return Err("write_actions: too many actions".into());
                    }
                    acts[w] = Action::WriteActions(n as u16);
                }
                continue;
            }
            Tok::Act(t) => t,
        };
        if goto.is_some() {
            return Err(format!(
                "action {t:?} after goto_table (goto_table must be last)"
            ));
        }
        if matches!(acts.last(), Some(Action::WriteMetadata(..))) && !t.starts_with("goto_table") {
            return Err(format!(
                "action {t:?} after write_metadata (only goto_table may follow it)"
            ));
        }
        let (name, arg) = t.split_once(':').map_or((t, None), |(a, b)| (a, Some(b)));
        let lower = name.to_ascii_lowercase();
        let name = lower.as_str();
        let need = |what: &str| arg.ok_or_else(|| format!("action {name}: needs :{what}"));
        let instruction = matches!(
            name,
            "drop" | "meter" | "write_metadata" | "goto_table" | "clear_actions"
        );
        if writing.is_some() && instruction {
            return Err(format!(
                "action {t:?} inside write_actions(...) (it takes actions only)"
            ));
        }
        if writing.is_none() && instr && !instruction {
            return Err(format!(
                "action {t:?} after clear_actions or write_actions (the order: meter, \
                 actions, clear_actions, write_actions, write_metadata, goto_table)"
            ));
        }
        let a = match name {
            "drop" => {
                drop = true;
                continue;
            }
            "clear_actions" => {
                if instr {
                    return Err(
                        "clear_actions after clear_actions or write_actions (the order: \
                         meter, actions, clear_actions, write_actions, write_metadata, goto_table)"
                            .into(),
                    );
                }
                instr = true;
                Action::ClearActions
            }
            "output" => match need("port")? {
                p if p.eq_ignore_ascii_case("normal") => Action::Normal,
                p => Action::Output(uint("output", p, 65534)? as u16),
            },
            "normal" => Action::Normal,
            "flood" => Action::Flood,
            "all" => Action::All,
            "in_port" => Action::InPort,
            "controller" => Action::Controller(match arg {
                Some(a) => uint("controller", a.trim_start_matches("max_len="), 65535)? as u16,
                None => 0xffff,
            }),
            "group" => Action::OfGroup(uint(name, need("group id")?, 0xffff_ff00)? as u32),
            "meter" => {
                if !acts.is_empty() {
                    return Err(format!(
                        "action {t:?}: the meter instruction must come first"
                    ));
                }
                let id = uint(name, need("meter id")?, super::meters::MAX_METER_ID as u64)? as u32;
                if id == 0 {
                    return Err("action meter:0: meter ids start at 1".into());
                }
                Action::Meter(id)
            }
            "write_metadata" => {
                let (v, m) = value_mask64(name, need("value[/mask]")?)?;
                Action::WriteMetadata(v, m)
            }
            "mod_dl_src" => Action::SetDlSrc(parse_mac("mod_dl_src", need("mac")?)?),
            "mod_dl_dst" => Action::SetDlDst(parse_mac("mod_dl_dst", need("mac")?)?),
            "dec_ttl" | "dec_nw_ttl" => Action::DecTtl,
            "set_nw_ttl" | "mod_nw_ttl" => Action::SetNwTtl(uint(name, need("ttl")?, 255)? as u8),
            "mod_nw_tos" => {
                let tos = uint(name, need("tos")?, 255)? as u8;
                if tos & 3 != 0 {
                    return Err(format!(
                        "action {t:?}: has ECN bits set (mod_nw_tos takes DSCP << 2)"
                    ));
                }
                Action::SetIpDscp(tos >> 2)
            }
            "mod_nw_ecn" => Action::SetIpEcn(uint(name, need("ecn")?, 3)? as u8),
            "strip_vlan" | "pop_vlan" => Action::PopVlan,
            "push_vlan" => match uint(name, need("ethertype")?, 0xffff)? as u16 {
                t @ (0x8100 | 0x88a8) => Action::PushVlan(t),
                t => {
                    return Err(format!(
                        "action push_vlan:0x{t:04x}: the ethertype must be 0x8100 or 0x88a8"
                    ))
                }
            },
            "push_mpls" => Action::PushMpls(mpls_ethertype(name, need("ethertype")?)?),
            "pop_mpls" => Action::PopMpls(uint(name, need("ethertype")?, 0xffff)? as u16),
            "set_mpls_label" => Action::SetMplsLabel(uint(name, need("label")?, 0xf_ffff)? as u32),
            "set_mpls_tc" => Action::SetMplsTc(uint(name, need("tc")?, 7)? as u8),
            "set_mpls_ttl" => Action::SetMplsTtl(uint(name, need("ttl")?, 255)? as u8),
            "dec_mpls_ttl" => Action::DecMplsTtl,
            "copy_ttl_out" => Action::CopyTtlOut,
            "copy_ttl_in" => Action::CopyTtlIn,
            "set_tunnel" | "set_tunnel64" => {
                Action::SetTunnelId(uint(name, need("id")?, u64::MAX)?)
            }
            // ovs-ofctl's OpenFlow 1.0 actions: a tag is pushed first
            // unless the frame is known to have one.
            "mod_vlan_vid" | "mod_vlan_pcp" => {
                let a = if name == "mod_vlan_vid" {
                    Action::SetVlanVid(uint(name, need("vid")?, 4095)? as u16)
                } else {
                    Action::SetVlanPcp(uint(name, need("pcp")?, 7)? as u8)
                };
                if !tagged {
                    acts.push(Action::PushVlan(0x8100));
                    tagged = true;
                }
                a
            }
            "mod_nw_src" => Action::SetNwSrc(ip4_value(name, need("address")?)?),
            "mod_nw_dst" => Action::SetNwDst(ip4_value(name, need("address")?)?),
            "mod_tp_src" => Action::SetTpSrc(uint(name, need("port")?, 65535)? as u16),
            "mod_tp_dst" => Action::SetTpDst(uint(name, need("port")?, 65535)? as u16),
            "set_field" => {
                let a = need("value->field")?;
                let (v, f) = a
                    .split_once("->")
                    .ok_or_else(|| format!("action set_field: {a:?} is not value->field"))?;
                set_field(v, f)?
            }
            "goto_table" => {
                let n = uint("goto_table", need("table")?, MAX_TABLE as u64)? as u8;
                if n <= table {
                    return Err(format!(
                        "action goto_table:{n}: must go to a table after table {table}"
                    ));
                }
                goto = Some(n);
                continue;
            }
            _ if arg.is_none() && num_u64(name).is_some() => {
                Action::Output(uint("output", name, 65534)? as u16)
            }
            _ => return Err(format!("unknown or unsupported action {t:?}")),
        };
        match a {
            Action::PushVlan(_) => tagged = true,
            // The inner tag, if any, is not known.
            Action::PopVlan => tagged = false,
            _ => {}
        }
        acts.push(a);
    }
    if drop && acts.iter().any(|a| !matches!(a, Action::Meter(_))) {
        return Err("action drop must be the only action".into());
    }
    if drop && goto.is_some() {
        return Err("action drop must be the only action".into());
    }
    Ok((acts, goto))
}

fn mac_str(v: u64) -> String {
    let b = v.to_be_bytes();
    format!(
        "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
        b[2], b[3], b[4], b[5], b[6], b[7]
    )
}

fn ip4_str(out: &mut String, name: &str, v: u128, m: u128) {
    let _ = write!(out, ",{name}={}", Ipv4Addr::from(v as u32));
    let m = m as u32;
    if m != u32::MAX {
        if m.leading_ones() + m.trailing_zeros() == 32 {
            let _ = write!(out, "/{}", m.leading_ones());
        } else {
            let _ = write!(out, "/{}", Ipv4Addr::from(m));
        }
    }
}

fn ip6_str(out: &mut String, name: &str, v: u128, m: u128) {
    let _ = write!(out, ",{name}={}", Ipv6Addr::from(v));
    if m != u128::MAX {
        let _ = write!(out, "/{}", m.leading_ones());
    }
}

/// The match of `key`/`mask` in canonical ovs-ofctl syntax (no leading comma;
/// empty for match-all).
pub fn format_match(key: &Key, mask: &Key) -> String {
    let mut o = String::new();
    let g = |f: Field| (key.get(f), mask.get(f));
    let full = |f: Field| {
        if f.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << f.bits()) - 1
        }
    };
    if mask.get(Field::InPort) != 0 {
        let _ = write!(o, ",in_port={}", key.get(Field::InPort));
    }
    let (tci, tm) = g(Field::VlanTci);
    match tm {
        0 => {}
        0x1fff => {
            let _ = write!(o, ",dl_vlan={}", tci & 0xfff);
        }
        0x1000 if tci == 0 => o.push_str(",vlan_tci=0x0000/0x1000"),
        0xf000 => {
            let _ = write!(o, ",dl_vlan_pcp={}", tci >> 13);
        }
        _ => {
            let _ = write!(o, ",vlan_tci=0x{tci:04x}/0x{tm:04x}");
        }
    }
    for (name, f) in [("dl_src", Field::DlSrc), ("dl_dst", Field::DlDst)] {
        let (v, m) = g(f);
        if m != 0 {
            let _ = write!(o, ",{name}={}", mac_str(v as u64));
            if m != full(f) {
                let _ = write!(o, "/{}", mac_str(m as u64));
            }
        }
    }
    let et = (mask.get(Field::DlType) != 0).then(|| key.get(Field::DlType) as u16);
    let proto = (mask.get(Field::NwProto) != 0).then(|| key.get(Field::NwProto) as u8);
    let short = match (et, proto) {
        (Some(num::IPV4), Some(num::TCP)) => Some("tcp"),
        (Some(num::IPV4), Some(num::UDP)) => Some("udp"),
        (Some(num::IPV4), Some(num::SCTP)) => Some("sctp"),
        (Some(num::IPV4), Some(num::ICMP)) => Some("icmp"),
        (Some(num::IPV6), Some(num::TCP)) => Some("tcp6"),
        (Some(num::IPV6), Some(num::UDP)) => Some("udp6"),
        (Some(num::IPV6), Some(num::SCTP)) => Some("sctp6"),
        (Some(num::IPV6), Some(num::ICMP6)) => Some("icmp6"),
        _ => None,
    };
    match (short, et) {
        (Some(s), _) => {
            let _ = write!(o, ",{s}");
        }
        (None, Some(num::IPV4)) => o.push_str(",ip"),
        (None, Some(num::IPV6)) => o.push_str(",ipv6"),
        (None, Some(num::ARP)) => o.push_str(",arp"),
        (None, Some(num::MPLS)) => o.push_str(",mpls"),
        (None, Some(num::MPLS_MC)) => o.push_str(",mplsm"),
        (None, Some(e)) => {
            let _ = write!(o, ",dl_type=0x{e:04x}");
        }
        (None, None) => {}
    }
    let arp = et == Some(num::ARP);
    let ip6 = et == Some(num::IPV6);
    for (n4, na, f) in [
        ("nw_src", "arp_spa", Field::Ip4Src),
        ("nw_dst", "arp_tpa", Field::Ip4Dst),
    ] {
        let (v, m) = g(f);
        if m != 0 && !ip6 {
            ip4_str(&mut o, if arp { na } else { n4 }, v, m);
        }
    }
    for (n, f) in [("ipv6_src", Field::Ip6Src), ("ipv6_dst", Field::Ip6Dst)] {
        let (v, m) = g(f);
        if m != 0 && ip6 {
            ip6_str(&mut o, n, v, m);
        }
    }
    if short.is_none() {
        if let Some(p) = proto {
            if !arp {
                let _ = write!(o, ",nw_proto={p}");
            }
        }
    }
    let tm = mask.get(Field::NwTos);
    if tm & 0xfc != 0 {
        let _ = write!(o, ",nw_tos={}", key.get(Field::NwTos) & 0xfc);
    }
    if tm & 0x03 != 0 {
        let _ = write!(o, ",nw_ecn={}", key.get(Field::NwTos) & 0x03);
    }
    if arp {
        if mask.get(Field::ArpOp) != 0 {
            let _ = write!(o, ",arp_op={}", key.get(Field::ArpOp));
        }
        for (name, f) in [("arp_sha", Field::ArpSha), ("arp_tha", Field::ArpTha)] {
            let (v, m) = g(f);
            if m != 0 {
                let _ = write!(o, ",{name}={}", mac_str(v as u64));
                if m != full(f) {
                    let _ = write!(o, "/{}", mac_str(m as u64));
                }
            }
        }
    }
    if ip6 {
        let (v, m) = g(Field::Ip6Flabel);
        if m == full(Field::Ip6Flabel) {
            let _ = write!(o, ",ipv6_label=0x{v:05x}");
        } else if m != 0 {
            let _ = write!(o, ",ipv6_label=0x{v:05x}/0x{m:05x}");
        }
    }
    if matches!(et, Some(num::MPLS | num::MPLS_MC)) {
        for (name, f) in [
            ("mpls_label", Field::MplsLabel),
            ("mpls_tc", Field::MplsTc),
            ("mpls_bos", Field::MplsBos),
        ] {
            if mask.get(f) != 0 {
                let _ = write!(o, ",{name}={}", key.get(f));
            }
        }
    }
    let icmp = matches!(proto, Some(num::ICMP | num::ICMP6));
    for (nt, ni, f) in [
        ("tp_src", "icmp_type", Field::TpSrc),
        ("tp_dst", "icmp_code", Field::TpDst),
    ] {
        let (v, m) = g(f);
        if m != 0 {
            let _ = write!(o, ",{}={v}", if icmp { ni } else { nt });
            if m != 0xffff {
                let _ = write!(o, "/0x{m:04x}");
            }
        }
    }
    let (v, m) = g(Field::NdTarget);
    if m != 0 {
        ip6_str(&mut o, "nd_target", v, m);
    }
    let (v, m) = g(Field::NdSll);
    if m != 0 {
        let sll = key.get(Field::TpSrc) == num::ND_NS as u128;
        let _ = write!(
            o,
            ",{}={}",
            if sll { "nd_sll" } else { "nd_tll" },
            mac_str(v as u64)
        );
        if m != full(Field::NdSll) {
            let _ = write!(o, "/{}", mac_str(m as u64));
        }
    }
    for (name, f) in [("metadata", Field::Metadata), ("tun_id", Field::TunnelId)] {
        let (v, m) = g(f);
        if m == full(f) {
            let _ = write!(o, ",{name}=0x{v:x}");
        } else if m != 0 {
            let _ = write!(o, ",{name}=0x{v:x}/0x{m:x}");
        }
    }
    if o.starts_with(',') {
        o.remove(0);
    }
    o
}

/// Actions and goto in ovs-ofctl syntax (`drop` for none).
/// (`write_actions(...)` with the actions it writes, as ovs-ofctl
/// prints it.)
pub fn format_actions(acts: &[Action], goto: Option<u8>) -> String {
    let mut parts: Vec<String> = Vec::with_capacity(acts.len() + 1);
    let mut i = 0;
    while i < acts.len() {
        let a = &acts[i];
        i += 1;
        if let Action::WriteActions(n) = *a {
            let end = (i + n as usize).min(acts.len());
            let inner: Vec<String> = acts[i..end].iter().map(action_str).collect();
            parts.push(format!("write_actions({})", inner.join(",")));
            i = end;
        } else {
            parts.push(action_str(a));
        }
    }
    if let Some(g) = goto {
        parts.push(format!("goto_table:{g}"));
    }
    if parts.is_empty() {
        "drop".into()
    } else {
        parts.join(",")
    }
}

/// One action in ovs-ofctl syntax.
fn action_str(a: &Action) -> String {
    match a {
        Action::Output(p) => format!("output:{p}"),
        Action::Flood => "FLOOD".into(),
        Action::All => "ALL".into(),
        Action::InPort => "IN_PORT".into(),
        Action::Normal => "NORMAL".into(),
        Action::SetDlSrc(m) => format!("mod_dl_src:{}", mac_str(*m)),
        Action::SetDlDst(m) => format!("mod_dl_dst:{}", mac_str(*m)),
        Action::DecTtl => "dec_ttl".into(),
        Action::SetNwSrc(a) => format!("mod_nw_src:{}", Ipv4Addr::from(*a)),
        Action::SetNwDst(a) => format!("mod_nw_dst:{}", Ipv4Addr::from(*a)),
        Action::SetTpSrc(p) => format!("mod_tp_src:{p}"),
        Action::SetTpDst(p) => format!("mod_tp_dst:{p}"),
        Action::PopVlan => "strip_vlan".into(),
        Action::PushVlan(t) => format!("push_vlan:0x{t:04x}"),
        Action::SetVlanVid(v) => format!("set_field:{}->vlan_vid", 0x1000 | v),
        Action::SetVlanPcp(p) => format!("set_field:{p}->vlan_pcp"),
        Action::Group(g) => format!("(outputs of set {g})"),
        Action::OfGroup(g) => format!("group:{g}"),
        Action::Controller(m) => format!("CONTROLLER:{m}"),
        Action::SetEthType(t) => format!("set_field:0x{t:04x}->eth_type"),
        Action::SetIpDscp(d) => format!("set_field:{d}->ip_dscp"),
        Action::SetIpEcn(e) => format!("set_field:{e}->ip_ecn"),
        Action::SetNwProto(p) => format!("set_field:{p}->ip_proto"),
        Action::SetIcmpType(t) => format!("set_field:{t}->icmp_type"),
        Action::SetIcmpCode(c) => format!("set_field:{c}->icmp_code"),
        Action::SetArpOp(op) => format!("set_field:{op}->arp_op"),
        Action::SetArpSpa(a) => format!("set_field:{}->arp_spa", Ipv4Addr::from(*a)),
        Action::SetArpTpa(a) => format!("set_field:{}->arp_tpa", Ipv4Addr::from(*a)),
        Action::SetArpSha(m) => format!("set_field:{}->arp_sha", mac_str(*m)),
        Action::SetArpTha(m) => format!("set_field:{}->arp_tha", mac_str(*m)),
        Action::SetIp6Src(a) => format!("set_field:{}->ipv6_src", Ipv6Addr::from(*a)),
        Action::SetIp6Dst(a) => format!("set_field:{}->ipv6_dst", Ipv6Addr::from(*a)),
        Action::SetIp6Flabel(l) => format!("set_field:{l}->ipv6_label"),
        Action::SetNdTarget(a) => format!("set_field:{}->nd_target", Ipv6Addr::from(*a)),
        Action::SetNdSll(m) => format!("set_field:{}->nd_sll", mac_str(*m)),
        Action::SetNdTll(m) => format!("set_field:{}->nd_tll", mac_str(*m)),
        Action::SetMplsLabel(l) => format!("set_field:{l}->mpls_label"),
        Action::SetMplsTc(t) => format!("set_field:{t}->mpls_tc"),
        Action::SetMplsBos(b) => format!("set_field:{b}->mpls_bos"),
        Action::SetTunnelId(t) => format!("set_field:0x{t:x}->tun_id"),
        Action::SetNwTtl(t) => format!("set_nw_ttl:{t}"),
        Action::PushMpls(t) => format!("push_mpls:0x{t:04x}"),
        Action::PopMpls(t) => format!("pop_mpls:0x{t:04x}"),
        Action::SetMplsTtl(t) => format!("set_mpls_ttl:{t}"),
        Action::DecMplsTtl => "dec_mpls_ttl".into(),
        Action::CopyTtlOut => "copy_ttl_out".into(),
        Action::CopyTtlIn => "copy_ttl_in".into(),
        Action::Meter(m) => format!("meter:{m}"),
        Action::WriteMetadata(v, m) if *m == u64::MAX => format!("write_metadata:0x{v:x}"),
        Action::WriteMetadata(v, m) => format!("write_metadata:0x{v:x}/0x{m:x}"),
        Action::Bucket(n) => format!("(bucket of {n})"),
        Action::Select(n) => format!("(select of {n})"),
        Action::Failover(n) => format!("(fast failover of {n})"),
        Action::SelBucket { weight, .. } => format!("(select bucket, weight {weight})"),
        Action::ClearActions => "clear_actions".into(),
        Action::WriteActions(n) => format!("(write_actions of {n})"),
        Action::Write { slot, len } => format!("(action set slot {slot} of {len})"),
    }
}
