//! The typed control API of the flows logic for the OpenFlow 1.3 channel
//! (crates/openflow decodes, turnoutd's channel calls these): flow-mods
//! with all five commands, and the flow, aggregate and table statistics.
//! No text on the way: OXM matches become [`Key`]/mask pairs and OpenFlow
//! actions the logic's [`Action`]s (and back, for the statistics).
//!
//! Port numbers: OpenFlow port N is the switch port of id N − 1 (OpenFlow
//! has no port 0; ids start at 0). Errors are the spec's
//! [`OfpError`] type and code for what is refused (docs/flows.md,
//! "OpenFlow").

use std::sync::Arc;
use std::time::Instant;

use openflow::{
    bac, bic, bmc, brc, et, fc, ff, fmfc, oxm, port, FlowMod, FlowStats, FlowStatsRequest,
    Instruction, OfpError, Oxm, GROUP_ANY, NO_BUFFER, TABLE_ALL,
};

use super::key::num;
use super::{
    Action, Counters, Field, Flows, Key, Reason, Rule, Snapshot, Table, Within, Writer, MAX_TABLE,
};
use crate::PortId;

/// (OXM fields a flow can match, OXM fields set-field can write).
pub fn supported_fields() -> (&'static [u8], &'static [u8]) {
    (
        &[
            oxm::IN_PORT,
            oxm::METADATA,
            oxm::ETH_DST,
            oxm::ETH_SRC,
            oxm::ETH_TYPE,
            oxm::VLAN_VID,
            oxm::VLAN_PCP,
            oxm::IP_DSCP,
            oxm::IP_ECN,
            oxm::IP_PROTO,
            oxm::IPV4_SRC,
            oxm::IPV4_DST,
            oxm::TCP_SRC,
            oxm::TCP_DST,
            oxm::UDP_SRC,
            oxm::UDP_DST,
            oxm::SCTP_SRC,
            oxm::SCTP_DST,
            oxm::ICMPV4_TYPE,
            oxm::ICMPV4_CODE,
            oxm::ARP_OP,
            oxm::ARP_SPA,
            oxm::ARP_TPA,
            oxm::ARP_SHA,
            oxm::ARP_THA,
            oxm::IPV6_SRC,
            oxm::IPV6_DST,
            oxm::IPV6_FLABEL,
            oxm::ICMPV6_TYPE,
            oxm::ICMPV6_CODE,
            oxm::IPV6_ND_TARGET,
            oxm::IPV6_ND_SLL,
            oxm::IPV6_ND_TLL,
            oxm::MPLS_LABEL,
            oxm::MPLS_TC,
            oxm::MPLS_BOS,
            oxm::TUNNEL_ID,
        ],
        &[
            oxm::ETH_DST,
            oxm::ETH_SRC,
            oxm::ETH_TYPE,
            oxm::VLAN_VID,
            oxm::VLAN_PCP,
            oxm::IP_DSCP,
            oxm::IP_ECN,
            oxm::IP_PROTO,
            oxm::IPV4_SRC,
            oxm::IPV4_DST,
            oxm::TCP_SRC,
            oxm::TCP_DST,
            oxm::UDP_SRC,
            oxm::UDP_DST,
            oxm::SCTP_SRC,
            oxm::SCTP_DST,
            oxm::ICMPV4_TYPE,
            oxm::ICMPV4_CODE,
            oxm::ARP_OP,
            oxm::ARP_SPA,
            oxm::ARP_TPA,
            oxm::ARP_SHA,
            oxm::ARP_THA,
            oxm::IPV6_SRC,
            oxm::IPV6_DST,
            oxm::IPV6_FLABEL,
            oxm::ICMPV6_TYPE,
            oxm::ICMPV6_CODE,
            oxm::IPV6_ND_TARGET,
            oxm::IPV6_ND_SLL,
            oxm::IPV6_ND_TLL,
            oxm::MPLS_LABEL,
            oxm::MPLS_TC,
            oxm::MPLS_BOS,
            oxm::TUNNEL_ID,
        ],
    )
}

/// The action types a flow's apply-actions may hold (`OFPAT_*`).
pub fn supported_actions() -> &'static [u16] {
    use openflow::at;
    &[
        at::OUTPUT,
        at::COPY_TTL_OUT,
        at::COPY_TTL_IN,
        at::SET_MPLS_TTL,
        at::DEC_MPLS_TTL,
        at::PUSH_VLAN,
        at::POP_VLAN,
        at::PUSH_MPLS,
        at::POP_MPLS,
        at::GROUP,
        at::SET_NW_TTL,
        at::DEC_NW_TTL,
        at::SET_FIELD,
    ]
}

/// OpenFlow port number of switch port `id`.
pub fn of_port(id: PortId) -> u32 {
    id as u32 + 1
}

/// Switch port id of OpenFlow port `p` (None for reserved or out of range).
pub fn port_id(p: u32) -> Option<PortId> {
    if p == 0 || p > PortId::MAX as u32 + 1 {
        None
    } else {
        Some((p - 1) as PortId)
    }
}

fn full(f: Field) -> u128 {
    f.full()
}

/// ORs `v` under `m` into field `f` of (key, mask).
fn put(key: &mut Key, mask: &mut Key, f: Field, v: u128, m: u128) {
    mask.set(f, mask.get(f) | m);
    key.set(f, key.get(f) | (v & m));
}

/// An OXM match as the flows logic's (key, mask). (The decoder checked
/// duplicates, widths and prerequisites, which keep the fields that share
/// bits apart: each needs its EtherType or ICMPv6 type.)
pub fn match_to_key(m: &[Oxm]) -> Result<(Key, Key), OfpError> {
    let (mut key, mut mask) = (Key::default(), Key::default());
    let bad = |c| OfpError::new(et::BAD_MATCH, c);
    for o in m {
        let f = match o.field {
            oxm::IN_PORT => {
                let id = u32::try_from(o.value)
                    .ok()
                    .and_then(port_id)
                    .ok_or(bad(bmc::BAD_VALUE))?;
                put(&mut key, &mut mask, Field::InPort, id as u128, 0xffff);
                continue;
            }
            // Ethernet (namespace 0, type 0) is every packet here.
            oxm::PACKET_TYPE if o.value == 0 => continue,
            oxm::PACKET_TYPE => return Err(bad(bmc::BAD_VALUE)),
            oxm::VLAN_VID => {
                let m = o.mask.unwrap_or(0x1fff) & 0x1fff;
                put(&mut key, &mut mask, Field::VlanTci, o.value, m);
                continue;
            }
            oxm::VLAN_PCP => {
                put(&mut key, &mut mask, Field::VlanTci, o.value << 13, 0xe000);
                continue;
            }
            oxm::IP_DSCP => {
                put(&mut key, &mut mask, Field::NwTos, o.value << 2, 0xfc);
                continue;
            }
            oxm::IP_ECN => {
                put(&mut key, &mut mask, Field::NwTos, o.value, 0x03);
                continue;
            }
            oxm::METADATA => Field::Metadata,
            oxm::ETH_DST => Field::DlDst,
            oxm::ETH_SRC => Field::DlSrc,
            oxm::ETH_TYPE => Field::DlType,
            oxm::IP_PROTO => Field::NwProto,
            oxm::IPV4_SRC | oxm::ARP_SPA => Field::Ip4Src,
            oxm::IPV4_DST | oxm::ARP_TPA => Field::Ip4Dst,
            oxm::TCP_SRC | oxm::UDP_SRC | oxm::SCTP_SRC | oxm::ICMPV4_TYPE | oxm::ICMPV6_TYPE => {
                Field::TpSrc
            }
            oxm::TCP_DST | oxm::UDP_DST | oxm::SCTP_DST | oxm::ICMPV4_CODE | oxm::ICMPV6_CODE => {
                Field::TpDst
            }
            oxm::ARP_OP => Field::ArpOp,
            oxm::ARP_SHA => Field::ArpSha,
            oxm::ARP_THA => Field::ArpTha,
            oxm::IPV6_SRC => Field::Ip6Src,
            oxm::IPV6_DST => Field::Ip6Dst,
            oxm::IPV6_FLABEL => Field::Ip6Flabel,
            oxm::IPV6_ND_TARGET => Field::NdTarget,
            oxm::IPV6_ND_SLL => Field::NdSll,
            oxm::IPV6_ND_TLL => Field::NdTll,
            oxm::MPLS_LABEL => Field::MplsLabel,
            oxm::MPLS_TC => Field::MplsTc,
            oxm::MPLS_BOS => Field::MplsBos,
            oxm::TUNNEL_ID => Field::TunnelId,
            // in_phy_port (no port of turnoutd has a physical port below
            // it), PBB, IPv6 extension headers.
            _ => return Err(bad(bmc::BAD_FIELD)),
        };
        put(&mut key, &mut mask, f, o.value, o.mask.unwrap_or(full(f)));
    }
    Ok((key, mask))
}

/// The OXM match of (key, mask), in the order of the fields' numbers (as
/// os-ken orders a match, and the prerequisites' order).
pub fn key_to_match(key: &Key, mask: &Key) -> Vec<Oxm> {
    let mut out = Vec::new();
    if mask.get(Field::InPort) != 0 {
        out.push(Oxm::exact(oxm::IN_PORT, key.get(Field::InPort) + 1));
    }
    let mut field = |field: u8, f: Field, shift: u32, maskable: bool| {
        let m = mask.get(f) >> shift;
        if m == 0 {
            return;
        }
        let v = key.get(f) >> shift;
        let mut fm = full(f) >> shift;
        if f == Field::VlanTci {
            fm &= if shift == 0 { 0x1fff } else { 0x7 };
        }
        if f == Field::NwTos {
            fm &= if shift == 0 { 0x3 } else { 0x3f };
        }
        let m = m & fm;
        if m == 0 {
            return;
        }
        let mask = (maskable && m != fm).then_some(m);
        out.push(Oxm {
            field,
            value: v & fm & mask.unwrap_or(fm),
            mask,
        });
    };
    let dl_type = (mask.get(Field::DlType) == 0xffff).then(|| key.get(Field::DlType) as u16);
    let proto = (mask.get(Field::NwProto) == 0xff).then(|| key.get(Field::NwProto) as u8);
    field(oxm::METADATA, Field::Metadata, 0, true);
    field(oxm::ETH_DST, Field::DlDst, 0, true);
    field(oxm::ETH_SRC, Field::DlSrc, 0, true);
    field(oxm::ETH_TYPE, Field::DlType, 0, false);
    if mask.get(Field::VlanTci) & 0x1fff != 0 {
        field(oxm::VLAN_VID, Field::VlanTci, 0, true);
    }
    if mask.get(Field::VlanTci) & 0xe000 != 0 {
        field(oxm::VLAN_PCP, Field::VlanTci, 13, false);
    }
    field(oxm::IP_DSCP, Field::NwTos, 2, false);
    field(oxm::IP_ECN, Field::NwTos, 0, false);
    let arp = dl_type == Some(num::ARP);
    if !arp {
        field(oxm::IP_PROTO, Field::NwProto, 0, false);
    }
    // Fields that share bits: the EtherType (and ICMPv6 type) says which.
    match dl_type {
        Some(num::IPV6) => {
            field(oxm::IPV6_SRC, Field::Ip6Src, 0, true);
            field(oxm::IPV6_DST, Field::Ip6Dst, 0, true);
            field(oxm::IPV6_FLABEL, Field::Ip6Flabel, 0, true);
        }
        Some(num::MPLS | num::MPLS_MC) => {
            field(oxm::MPLS_LABEL, Field::MplsLabel, 0, false);
            field(oxm::MPLS_TC, Field::MplsTc, 0, false);
            field(oxm::MPLS_BOS, Field::MplsBos, 0, false);
        }
        _ => {
            field(
                if arp { oxm::ARP_SPA } else { oxm::IPV4_SRC },
                Field::Ip4Src,
                0,
                true,
            );
            field(
                if arp { oxm::ARP_TPA } else { oxm::IPV4_DST },
                Field::Ip4Dst,
                0,
                true,
            );
        }
    }
    if arp {
        field(oxm::ARP_OP, Field::ArpOp, 0, false);
        field(oxm::ARP_SHA, Field::ArpSha, 0, true);
        field(oxm::ARP_THA, Field::ArpTha, 0, true);
    }
    let (src, dst) = match proto {
        Some(num::UDP) => (oxm::UDP_SRC, oxm::UDP_DST),
        Some(num::SCTP) => (oxm::SCTP_SRC, oxm::SCTP_DST),
        Some(num::ICMP) => (oxm::ICMPV4_TYPE, oxm::ICMPV4_CODE),
        Some(num::ICMP6) => (oxm::ICMPV6_TYPE, oxm::ICMPV6_CODE),
        _ => (oxm::TCP_SRC, oxm::TCP_DST),
    };
    field(src, Field::TpSrc, 0, false);
    field(dst, Field::TpDst, 0, false);
    field(oxm::IPV6_ND_TARGET, Field::NdTarget, 0, false);
    let sll = key.get(Field::TpSrc) == num::ND_NS as u128;
    field(
        if sll {
            oxm::IPV6_ND_SLL
        } else {
            oxm::IPV6_ND_TLL
        },
        Field::NdSll,
        0,
        false,
    );
    field(oxm::TUNNEL_ID, Field::TunnelId, 0, true);
    out.sort_by_key(|o| o.field);
    out
}

/// The match `m` says the frame has a VLAN tag (`VLAN_VID` with
/// `OFPVID_PRESENT` in its value and mask).
pub fn match_tagged(m: &[Oxm]) -> bool {
    m.iter().any(|o| {
        o.field == oxm::VLAN_VID
            && o.value & oxm::VID_PRESENT as u128 != 0
            && o.mask.is_none_or(|k| k & oxm::VID_PRESENT as u128 != 0)
    })
}

/// An IPv6 address (or ND target) from an OXM value.
fn ip6(v: u128) -> [u8; 16] {
    v.to_be_bytes()
}

/// OpenFlow actions as the logic's. Their prerequisites are checked
/// against a flow's match by [`super::prereq::check`]
/// (`OFPBAC_MATCH_INCONSISTENT`); values are checked here: a field that
/// set-field cannot write `OFPBAC_BAD_SET_TYPE`, a value outside the
/// field `OFPBAC_BAD_SET_ARGUMENT` (the decoder checked the widths).
pub fn actions_from_of(acts: &[openflow::Action]) -> Result<Vec<Action>, OfpError> {
    let bad = |c| OfpError::new(et::BAD_ACTION, c);
    acts.iter()
        .map(|a| {
            Ok(match *a {
                openflow::Action::Output { port: p, max_len } => match p {
                    port::IN_PORT => Action::InPort,
                    port::CONTROLLER => Action::Controller(max_len),
                    port::FLOOD => Action::Flood,
                    port::ALL => Action::All,
                    port::NORMAL => Action::Normal,
                    p => Action::Output(port_id(p).ok_or(bad(bac::BAD_OUT_PORT))?),
                },
                openflow::Action::Group(g) if g <= openflow::GROUP_MAX => Action::OfGroup(g),
                openflow::Action::Group(_) => return Err(bad(bac::BAD_OUT_GROUP)),
                openflow::Action::PopVlan => Action::PopVlan,
                // Checked by the decoder: 0x8100 or 0x88a8.
                openflow::Action::PushVlan(t) => Action::PushVlan(t),
                openflow::Action::DecNwTtl => Action::DecTtl,
                openflow::Action::SetNwTtl(t) => Action::SetNwTtl(t),
                // Checked by the decoder: 0x8847 or 0x8848.
                openflow::Action::PushMpls(t) => Action::PushMpls(t),
                openflow::Action::PopMpls(t) => Action::PopMpls(t),
                openflow::Action::SetMplsTtl(t) => Action::SetMplsTtl(t),
                openflow::Action::DecMplsTtl => Action::DecMplsTtl,
                openflow::Action::CopyTtlOut => Action::CopyTtlOut,
                openflow::Action::CopyTtlIn => Action::CopyTtlIn,
                openflow::Action::SetField(o) => {
                    let v = o.value;
                    match o.field {
                        oxm::ETH_SRC => Action::SetDlSrc(v as u64),
                        oxm::ETH_DST => Action::SetDlDst(v as u64),
                        oxm::ETH_TYPE => Action::SetEthType(v as u16),
                        oxm::VLAN_VID => Action::SetVlanVid(v as u16 & 0xfff),
                        oxm::VLAN_PCP if v <= 7 => Action::SetVlanPcp(v as u8),
                        oxm::VLAN_PCP => return Err(bad(bac::BAD_SET_ARGUMENT)),
                        oxm::IP_DSCP => Action::SetIpDscp(v as u8),
                        oxm::IP_ECN => Action::SetIpEcn(v as u8),
                        oxm::IP_PROTO => Action::SetNwProto(v as u8),
                        oxm::IPV4_SRC => Action::SetNwSrc(v as u32),
                        oxm::IPV4_DST => Action::SetNwDst(v as u32),
                        oxm::TCP_SRC | oxm::UDP_SRC | oxm::SCTP_SRC => Action::SetTpSrc(v as u16),
                        oxm::TCP_DST | oxm::UDP_DST | oxm::SCTP_DST => Action::SetTpDst(v as u16),
                        oxm::ICMPV4_TYPE | oxm::ICMPV6_TYPE => Action::SetIcmpType(v as u8),
                        oxm::ICMPV4_CODE | oxm::ICMPV6_CODE => Action::SetIcmpCode(v as u8),
                        oxm::ARP_OP => Action::SetArpOp(v as u16),
                        oxm::ARP_SPA => Action::SetArpSpa(v as u32),
                        oxm::ARP_TPA => Action::SetArpTpa(v as u32),
                        oxm::ARP_SHA => Action::SetArpSha(v as u64),
                        oxm::ARP_THA => Action::SetArpTha(v as u64),
                        oxm::IPV6_SRC => Action::SetIp6Src(ip6(v)),
                        oxm::IPV6_DST => Action::SetIp6Dst(ip6(v)),
                        oxm::IPV6_FLABEL => Action::SetIp6Flabel(v as u32),
                        oxm::IPV6_ND_TARGET => Action::SetNdTarget(ip6(v)),
                        oxm::IPV6_ND_SLL => Action::SetNdSll(v as u64),
                        oxm::IPV6_ND_TLL => Action::SetNdTll(v as u64),
                        oxm::MPLS_LABEL => Action::SetMplsLabel(v as u32),
                        oxm::MPLS_TC => Action::SetMplsTc(v as u8),
                        oxm::MPLS_BOS => Action::SetMplsBos(v as u8),
                        oxm::TUNNEL_ID => Action::SetTunnelId(v as u64),
                        // in_port, in_phy_port, metadata (write-metadata
                        // writes it), PBB, IPv6 extension headers.
                        _ => return Err(bad(bac::BAD_SET_TYPE)),
                    }
                }
            })
        })
        .collect()
}

/// The logic's actions as OpenFlow's: the apply-actions list, and the
/// meter and write-metadata instructions (`dl_type` and `proto`: the
/// flow's EtherType and IP protocol, which tell TCP from UDP or SCTP port
/// rewrites and ICMPv4 from ICMPv6).
pub fn actions_to_of(
    acts: &[Action],
    dl_type: Option<u16>,
    proto: Option<u8>,
) -> Vec<openflow::Action> {
    let out = |port| openflow::Action::Output { port, max_len: 0 };
    let set = |field, v: u128| openflow::Action::SetField(Oxm::exact(field, v));
    let (tp_src, tp_dst) = match proto {
        Some(num::UDP) => (oxm::UDP_SRC, oxm::UDP_DST),
        Some(num::SCTP) => (oxm::SCTP_SRC, oxm::SCTP_DST),
        _ => (oxm::TCP_SRC, oxm::TCP_DST),
    };
    let (icmp_type, icmp_code) = if dl_type == Some(num::IPV6) {
        (oxm::ICMPV6_TYPE, oxm::ICMPV6_CODE)
    } else {
        (oxm::ICMPV4_TYPE, oxm::ICMPV4_CODE)
    };
    acts.iter()
        .filter_map(|a| {
            Some(match *a {
                Action::Output(p) => out(of_port(p)),
                Action::Flood => out(port::FLOOD),
                Action::All => out(port::ALL),
                Action::InPort => out(port::IN_PORT),
                Action::Normal => out(port::NORMAL),
                Action::SetDlSrc(m) => set(oxm::ETH_SRC, m as u128),
                Action::SetDlDst(m) => set(oxm::ETH_DST, m as u128),
                Action::DecTtl => openflow::Action::DecNwTtl,
                Action::SetNwSrc(a) => set(oxm::IPV4_SRC, a as u128),
                Action::SetNwDst(a) => set(oxm::IPV4_DST, a as u128),
                Action::SetTpSrc(p) => set(tp_src, p as u128),
                Action::SetTpDst(p) => set(tp_dst, p as u128),
                Action::PopVlan => openflow::Action::PopVlan,
                Action::PushVlan(t) => openflow::Action::PushVlan(t),
                Action::SetVlanVid(v) => set(oxm::VLAN_VID, (oxm::VID_PRESENT | v) as u128),
                Action::SetVlanPcp(p) => set(oxm::VLAN_PCP, p as u128),
                Action::Controller(m) => openflow::Action::Output {
                    port: port::CONTROLLER,
                    max_len: m,
                },
                Action::OfGroup(g) => openflow::Action::Group(g),
                Action::SetEthType(t) => set(oxm::ETH_TYPE, t as u128),
                Action::SetIpDscp(d) => set(oxm::IP_DSCP, d as u128),
                Action::SetIpEcn(e) => set(oxm::IP_ECN, e as u128),
                Action::SetNwProto(p) => set(oxm::IP_PROTO, p as u128),
                Action::SetIcmpType(t) => set(icmp_type, t as u128),
                Action::SetIcmpCode(c) => set(icmp_code, c as u128),
                Action::SetArpOp(o) => set(oxm::ARP_OP, o as u128),
                Action::SetArpSpa(a) => set(oxm::ARP_SPA, a as u128),
                Action::SetArpTpa(a) => set(oxm::ARP_TPA, a as u128),
                Action::SetArpSha(m) => set(oxm::ARP_SHA, m as u128),
                Action::SetArpTha(m) => set(oxm::ARP_THA, m as u128),
                Action::SetIp6Src(a) => set(oxm::IPV6_SRC, u128::from_be_bytes(a)),
                Action::SetIp6Dst(a) => set(oxm::IPV6_DST, u128::from_be_bytes(a)),
                Action::SetIp6Flabel(l) => set(oxm::IPV6_FLABEL, l as u128),
                Action::SetNdTarget(a) => set(oxm::IPV6_ND_TARGET, u128::from_be_bytes(a)),
                Action::SetNdSll(m) => set(oxm::IPV6_ND_SLL, m as u128),
                Action::SetNdTll(m) => set(oxm::IPV6_ND_TLL, m as u128),
                Action::SetMplsLabel(l) => set(oxm::MPLS_LABEL, l as u128),
                Action::SetMplsTc(t) => set(oxm::MPLS_TC, t as u128),
                Action::SetMplsBos(b) => set(oxm::MPLS_BOS, b as u128),
                Action::SetTunnelId(t) => set(oxm::TUNNEL_ID, t as u128),
                Action::SetNwTtl(t) => openflow::Action::SetNwTtl(t),
                Action::PushMpls(t) => openflow::Action::PushMpls(t),
                Action::PopMpls(t) => openflow::Action::PopMpls(t),
                Action::SetMplsTtl(t) => openflow::Action::SetMplsTtl(t),
                Action::DecMplsTtl => openflow::Action::DecMplsTtl,
                Action::CopyTtlOut => openflow::Action::CopyTtlOut,
                Action::CopyTtlIn => openflow::Action::CopyTtlIn,
                // Instructions (`instructions_to_of`), or compiled only.
                Action::Meter(_)
                | Action::WriteMetadata(..)
                | Action::Group(_)
                | Action::Bucket(_)
                | Action::Select(_)
                | Action::Failover(_)
                | Action::SelBucket { .. }
                | Action::ClearActions
                | Action::WriteActions(_)
                | Action::Write { .. } => return None,
            })
        })
        .collect()
}

/// A flow's instructions as OpenFlow's: its meter, apply-actions,
/// clear-actions, write-actions, write-metadata and goto-table (`dl_type`, `proto` as for
/// [`actions_to_of`]).
pub fn instructions_to_of(
    shown: &[Action],
    goto: Option<u8>,
    dl_type: Option<u16>,
    proto: Option<u8>,
) -> Vec<Instruction> {
    let mut out = Vec::new();
    for a in shown {
        if let Action::Meter(m) = a {
            out.push(Instruction::Meter(*m));
        }
    }
    // The apply-actions, then clear-actions and write-actions.
    let split = shown
        .iter()
        .position(|a| matches!(a, Action::ClearActions | Action::WriteActions(_)))
        .unwrap_or(shown.len());
    let acts = actions_to_of(&shown[..split], dl_type, proto);
    if !acts.is_empty() {
        out.push(Instruction::ApplyActions(acts));
    }
    let mut i = split;
    while i < shown.len() {
        let a = shown[i];
        i += 1;
        match a {
            Action::ClearActions => out.push(Instruction::ClearActions),
            Action::WriteActions(n) => {
                let end = (i + n as usize).min(shown.len());
                out.push(Instruction::WriteActions(actions_to_of(
                    &shown[i..end],
                    dl_type,
                    proto,
                )));
                i = end;
            }
            _ => {}
        }
    }
    for a in shown {
        if let Action::WriteMetadata(v, m) = a {
            out.push(Instruction::WriteMetadata(*v, *m));
        }
    }
    if let Some(g) = goto {
        out.push(Instruction::GotoTable(g));
    }
    out
}

/// A packet-out's header changes `acts` (in order) have their
/// prerequisites in the packet itself, `frame` (from `ingress`):
/// `OFPBAC_MATCH_INCONSISTENT` if not.
pub fn packet_out_prereqs(acts: &[Action], frame: &[u8], ingress: PortId) -> Result<(), OfpError> {
    let key = super::extract(frame, ingress);
    let mut mask = Key::default();
    mask.set(Field::DlType, u128::MAX);
    mask.set(Field::NwProto, u128::MAX);
    mask.set(Field::TpSrc, u128::MAX);
    mask.set(Field::VlanTci, 0x1000);
    super::prereq::check(acts, &key, &mask)
        .map_err(|_| OfpError::new(et::BAD_ACTION, bac::MATCH_INCONSISTENT))
}

/// Some packet could match both (key, mask) pairs.
fn overlaps(k1: &Key, m1: &Key, k2: &Key, m2: &Key) -> bool {
    (0..k1.0.len()).all(|i| (k1.0[i] ^ k2.0[i]) & m1.0[i] & m2.0[i] == 0)
}

/// A flow of `t` other than (`key`, `mask`) itself has `priority` and
/// could match a packet that (`key`, `mask`) matches (OFPFF_CHECK_OVERLAP).
/// A subtable whose best flow ranks below `priority` holds no flow of
/// that priority (its rank is never below its best flow's, even while
/// stale): skipped without a look. Keys are stored masked, so in the
/// subtable of the same mask only the identical match could overlap (and
/// it is excluded), and in a subtable whose mask `mask` covers, only the
/// flows under key `key & its mask`: hash lookups. Only the subtables of
/// more specific or crossing masks that can hold `priority` are scanned.
fn overlapping(t: &Table, key: &Key, mask: &Key, priority: u16) -> bool {
    t.subtables.iter().any(|st| {
        if st.mask == *mask || st.max_priority < priority {
            false
        } else if mask.covers(&st.mask) {
            st.map
                .get(&key.and(&st.mask))
                .is_some_and(|v| v.iter().any(|r| r.priority == priority))
        } else {
            st.map
                .values()
                .flat_map(|v| v.iter())
                .any(|r| r.priority == priority && overlaps(&r.key, &r.mask, key, mask))
        }
    })
}

/// Which flows a delete, modify or stats request selects.
struct Filter {
    key: Key,
    mask: Key,
    strict: Option<u16>,
    cookie: u64,
    cookie_mask: u64,
    out_port: u32,
    out_group: u32,
}

impl Filter {
    fn picks(&self, r: &Rule) -> bool {
        let matches = match self.strict {
            Some(p) => r.mask == self.mask && r.key == self.key && r.priority == p,
            None => r.mask.covers(&self.mask) && r.key.and(&self.mask) == self.key,
        };
        matches
            && (r.cookie ^ self.cookie) & self.cookie_mask == 0
            && (self.out_port == port::ANY
                || r.shown.iter().any(|a| match *a {
                    Action::Output(p) => of_port(p) == self.out_port,
                    Action::Flood => self.out_port == port::FLOOD,
                    Action::All => self.out_port == port::ALL,
                    Action::InPort => self.out_port == port::IN_PORT,
                    Action::Normal => self.out_port == port::NORMAL,
                    _ => false,
                }))
            && (self.out_group == GROUP_ANY || r.shown.contains(&Action::OfGroup(self.out_group)))
    }
}

/// The `max_len` of each output to a port (not to the controller, whose
/// action keeps its own) in `acts`, in order; empty when all are 0.
fn out_max_lens<'a>(acts: impl Iterator<Item = &'a openflow::Action>) -> Box<[u16]> {
    let v: Vec<u16> = acts
        .filter_map(|a| match *a {
            openflow::Action::Output { port, max_len } if port != port::CONTROLLER => Some(max_len),
            _ => None,
        })
        .collect();
    if v.iter().all(|&m| m == 0) {
        Box::default()
    } else {
        v.into_boxed_slice()
    }
}

/// A flow as OpenFlow reports it (flow stats, flow-removed).
fn rule_stats(x: &Rule, d: std::time::Duration, packets: u64, bytes: u64) -> FlowStats {
    let proto = (x.mask.get(Field::NwProto) == 0xff).then(|| x.key.get(Field::NwProto) as u8);
    let dl_type = (x.mask.get(Field::DlType) == 0xffff).then(|| x.key.get(Field::DlType) as u16);
    let mut instructions = instructions_to_of(&x.shown, x.goto, dl_type, proto);
    // Outputs echo the max_len they were installed with.
    let mut given = x.out_max_len.iter();
    for i in &mut instructions {
        if let Instruction::ApplyActions(acts) | Instruction::WriteActions(acts) = i {
            for a in acts {
                if let openflow::Action::Output { port, max_len } = a {
                    if *port != port::CONTROLLER {
                        *max_len = given.next().copied().unwrap_or(0);
                    }
                }
            }
        }
    }
    FlowStats {
        table_id: x.table,
        duration_sec: d.as_secs() as u32,
        duration_nsec: d.subsec_nanos(),
        priority: x.priority,
        idle_timeout: x.idle_timeout,
        hard_timeout: x.hard_timeout,
        flags: x.flags,
        cookie: x.cookie,
        packet_count: packets,
        byte_count: bytes,
        matches: key_to_match(&x.key, &x.mask),
        instructions,
    }
}

fn tables_of(t: u8) -> std::ops::RangeInclusive<u8> {
    if t == TABLE_ALL {
        0..=MAX_TABLE
    } else {
        t..=t
    }
}

/// One table's statistics: (table, active flows, lookups, matched).
pub type TableStats = (u8, u32, u64, u64);

/// At most this many flow-mods in one [`Flows::flow_mods`] call (the
/// OpenFlow channel's batches), so that one swap stays bounded.
pub const MAX_FLOW_MODS: usize = 4096;

impl Flows {
    /// Runs an OpenFlow 1.3 flow-mod (section 6.4): one snapshot swap, or
    /// nothing changed and the spec's error. The one-element
    /// [`Flows::flow_mods`].
    pub fn flow_mod(&self, m: &FlowMod) -> Result<usize, OfpError> {
        self.flow_mods(&[m])
            .pop()
            .unwrap_or(Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::UNKNOWN)))
    }

    /// Runs consecutive flow-mods as one transaction: the writer lock taken
    /// once, the snapshot copied once, each flow-mod applied in order on
    /// the copy, one swap at the end (bulk loads cost O(1) per flow, not a
    /// copy of the subtable each). Each is atomic on its own: a refused
    /// one changes nothing and gets its own error (in its slot of the
    /// result, one per flow-mod in order) while the others apply, and
    /// each sees the effect of those before it. Flows deleted are
    /// reported (flow-removed) after the swap, in order.
    pub fn flow_mods(&self, ms: &[&FlowMod]) -> Vec<Result<usize, OfpError>> {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut snap = self.begin(&mut w);
        let mut removed = Vec::new();
        let out: Vec<Result<usize, OfpError>> = ms
            .iter()
            .map(|m| self.apply_flow_mod(&mut w, &mut snap, m, &mut removed))
            .collect();
        let changed = out.iter().any(|r| r.is_ok());
        self.commit(&mut w, snap, changed);
        drop(w);
        self.notify(&removed, Reason::Delete, Instant::now());
        out
    }

    /// One flow-mod on `snap` (being built): every check first, so that an
    /// error leaves `snap` as it was; the number of flows changed.
    fn apply_flow_mod(
        &self,
        w: &mut Writer,
        snap: &mut Snapshot,
        m: &FlowMod,
        removed: &mut Vec<Arc<Rule>>,
    ) -> Result<usize, OfpError> {
        let fmf = |c| OfpError::new(et::FLOW_MOD_FAILED, c);
        if m.command > fc::DELETE_STRICT {
            return Err(fmf(fmfc::BAD_COMMAND));
        }
        let adds = m.command <= fc::MODIFY_STRICT;
        if adds && m.table_id > MAX_TABLE {
            return Err(fmf(fmfc::BAD_TABLE_ID));
        }
        if adds && m.buffer_id != NO_BUFFER {
            return Err(OfpError::new(et::BAD_REQUEST, brc::BUFFER_UNKNOWN));
        }
        let (key, mask) = match_to_key(&m.matches)?;
        let mut shown: Vec<Action> = Vec::new();
        let mut out_max_len: Box<[u16]> = Box::default();
        let mut goto = None;
        if adds {
            let (mut meter, mut apply, mut metadata) = (None, Vec::new(), None);
            let (mut clear, mut write) = (false, None);
            let (mut apply_of, mut write_of): (&[openflow::Action], &[openflow::Action]) =
                (&[], &[]);
            for i in &m.instructions {
                match i {
                    Instruction::Meter(id) => meter = Some(Action::Meter(*id)),
                    Instruction::ApplyActions(a) => {
                        apply = actions_from_of(a)?;
                        apply_of = a.as_slice();
                    }
                    Instruction::ClearActions => clear = true,
                    Instruction::WriteActions(a) => {
                        write = Some(actions_from_of(a)?);
                        write_of = a.as_slice();
                    }
                    Instruction::WriteMetadata(v, mk) => {
                        metadata = Some(Action::WriteMetadata(v & mk, *mk))
                    }
                    Instruction::GotoTable(t) => {
                        if *t <= m.table_id || *t > MAX_TABLE {
                            return Err(OfpError::new(et::BAD_INSTRUCTION, bic::BAD_TABLE_ID));
                        }
                        goto = Some(*t);
                    }
                }
            }
            // The instructions' order (5.9): meter, apply-actions,
            // clear-actions, write-actions, write-metadata, goto-table.
            shown.extend(meter);
            shown.extend(apply);
            if clear {
                shown.push(Action::ClearActions);
            }
            if let Some(w) = write {
                if w.len() > u16::MAX as usize {
                    return Err(OfpError::new(et::BAD_INSTRUCTION, bic::BAD_LEN));
                }
                shown.push(Action::WriteActions(w.len() as u16));
                shown.extend(w);
            }
            shown.extend(metadata);
            out_max_len = out_max_lens(apply_of.iter().chain(write_of));
            super::prereq::check(&shown, &key, &mask)
                .map_err(|_| OfpError::new(et::BAD_ACTION, bac::MATCH_INCONSISTENT))?;
        }
        let compiled = if adds {
            w.compile(&self.groups, &self.mixed, &snap.meters, &shown, goto)
                .map_err(|e| e.of)?
        } else {
            super::Compiled::default()
        };
        let n = match m.command {
            fc::ADD => {
                let t = &snap.tables[m.table_id as usize];
                let same = t.find(&key, &mask, m.priority);
                if m.flags & ff::CHECK_OVERLAP != 0 && overlapping(t, &key, &mask, m.priority) {
                    return Err(fmf(fmfc::OVERLAP));
                }
                // A flow replacing one of the same match and priority keeps
                // its counters unless OFPFF_RESET_COUNTS.
                let stats = match same {
                    Some(r) if m.flags & ff::RESET_COUNTS == 0 => r.stats.clone(),
                    _ => Arc::new(Counters::default()),
                };
                w.seq += 1;
                let r = Rule {
                    table: m.table_id,
                    priority: m.priority,
                    seq: w.seq,
                    cookie: m.cookie,
                    key,
                    mask,
                    plain: super::exec::Plain::of(&compiled.actions, goto),
                    actions: compiled.actions,
                    tail: compiled.tail,
                    shown: shown.into_boxed_slice(),
                    out_max_len,
                    goto,
                    stats,
                    idle_timeout: m.idle_timeout,
                    hard_timeout: m.hard_timeout,
                    flags: m.flags,
                    installed: Instant::now(),
                    slot: 0,
                };
                w.idle.installed(&r);
                snap.insert(r);
                1
            }
            cmd => {
                let strict = matches!(cmd, fc::MODIFY_STRICT | fc::DELETE_STRICT);
                let delete = cmd >= fc::DELETE;
                let filter = Filter {
                    key,
                    mask,
                    strict: strict.then_some(m.priority),
                    cookie: m.cookie,
                    cookie_mask: m.cookie_mask,
                    // Modify ignores out_port and out_group (section 7.3.4.1).
                    out_port: if delete { m.out_port } else { port::ANY },
                    out_group: if delete { m.out_group } else { GROUP_ANY },
                };
                let reset = m.flags & ff::RESET_COUNTS != 0;
                let f = |r: &Rule| -> Option<Rule> {
                    if delete {
                        return None;
                    }
                    let stats = if reset {
                        Arc::default()
                    } else {
                        r.stats.clone()
                    };
                    Some(Rule {
                        out_max_len: out_max_len.clone(),
                        ..r.with_actions(
                            compiled.clone(),
                            shown.clone().into_boxed_slice(),
                            goto,
                            stats,
                        )
                    })
                };
                snap.update_within(
                    tables_of(m.table_id),
                    if strict {
                        Within::Exact(&key, &mask)
                    } else {
                        Within::Covering(&key, &mask)
                    },
                    &|r| filter.picks(r),
                    &f,
                    removed,
                )
            }
        };
        Ok(n)
    }

    fn of_selected(&self, r: &FlowStatsRequest) -> Result<Vec<Arc<Rule>>, OfpError> {
        let (key, mask) = match_to_key(&r.matches)?;
        if r.table_id != TABLE_ALL && r.table_id > MAX_TABLE {
            return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_TABLE_ID));
        }
        let filter = Filter {
            key,
            mask,
            strict: None,
            cookie: r.cookie,
            cookie_mask: r.cookie_mask,
            out_port: r.out_port,
            out_group: r.out_group,
        };
        let snap = self.snap.load();
        let mut rules: Vec<Arc<Rule>> = tables_of(r.table_id)
            .flat_map(|t| snap.tables[t as usize].rules())
            .filter(|x| filter.picks(x))
            .cloned()
            .collect();
        rules.sort_by(|a, b| {
            a.table
                .cmp(&b.table)
                .then(b.priority.cmp(&a.priority))
                .then(a.seq.cmp(&b.seq))
        });
        Ok(rules)
    }

    /// Flow statistics (multipart `OFPMP_FLOW`), by table, then priority
    /// (highest first), then installation.
    pub fn flow_stats(&self, r: &FlowStatsRequest) -> Result<Vec<FlowStats>, OfpError> {
        let now = Instant::now();
        Ok(self
            .of_selected(r)?
            .iter()
            .map(|x| {
                let (packets, bytes) = x.stats.get();
                let d = now.saturating_duration_since(x.installed);
                rule_stats(x, d, packets, bytes)
            })
            .collect())
    }

    /// `OFPT_FLOW_REMOVED` contents (reason, flow) of the flows removed
    /// with `SEND_FLOW_REM` since `cursor` (from [`Flows::notice_cursor`]),
    /// and the cursor to ask from next time.
    pub fn flow_removed_since(&self, cursor: u64) -> (Vec<(u8, FlowStats)>, u64) {
        let (v, next) = self.notices_since(cursor);
        let out = v
            .iter()
            .map(|n| {
                let s = rule_stats(&n.rule, n.duration, n.packets, n.bytes);
                (n.reason.code(), s)
            })
            .collect();
        (out, next)
    }

    /// Aggregate statistics: (packets, bytes, flows).
    pub fn aggregate_stats(&self, r: &FlowStatsRequest) -> Result<(u64, u64, u32), OfpError> {
        Ok(self.of_selected(r)?.iter().fold((0, 0, 0), |(p, b, n), x| {
            let (xp, xb) = x.stats.get();
            (p + xp, b + xb, n + 1)
        }))
    }

    /// Per table (all 255): active flows, lookups, matched.
    pub fn table_stats(&self) -> Vec<TableStats> {
        let snap = self.snap.load();
        self.table_stats
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let (lookups, missed) = c.get();
                let n = snap.tables[i].rules().count() as u32;
                (i as u8, n, lookups, lookups - missed)
            })
            .collect()
    }

    /// Flows in all tables.
    pub fn flow_count(&self) -> usize {
        self.snap
            .load()
            .tables
            .iter()
            .map(|t| t.rules().count())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth, flows, fm, inp, out};
    use crate::Verdict;
    use openflow::{decode, Message};

    fn all() -> FlowStatsRequest {
        FlowStatsRequest {
            table_id: TABLE_ALL,
            out_port: port::ANY,
            out_group: GROUP_ANY,
            cookie: 0,
            cookie_mask: 0,
            matches: vec![],
        }
    }

    #[test]
    fn add_modify_delete_with_spec_semantics() {
        let f = flows();
        f.flow_mod(&fm(fc::ADD, 0, 10, inp(1), vec![out(2)]))
            .unwrap();
        f.flow_mod(&fm(fc::ADD, 0, 10, inp(2), vec![out(1)]))
            .unwrap();
        assert_eq!(f.flow_count(), 2);
        // Overlap check: same priority, a match that covers in_port=1.
        let mut o = fm(fc::ADD, 0, 10, vec![], vec![out(3)]);
        o.flags = ff::CHECK_OVERLAP;
        assert_eq!(
            f.flow_mod(&o),
            Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::OVERLAP))
        );
        o.priority = 11;
        f.flow_mod(&o).unwrap();
        // Strict modify selects only the exact match and priority.
        assert_eq!(
            f.flow_mod(&fm(fc::MODIFY_STRICT, 0, 11, inp(1), vec![out(3)])),
            Ok(0)
        );
        assert_eq!(
            f.flow_mod(&fm(fc::MODIFY_STRICT, 0, 10, inp(1), vec![out(3)])),
            Ok(1)
        );
        // Non-strict modify: every flow at least as specific as the match.
        assert_eq!(
            f.flow_mod(&fm(fc::MODIFY, 0, 0, vec![], vec![out(4)])),
            Ok(3)
        );
        // Delete by out_port: only flows outputting there (all output 4 now).
        let mut d = fm(fc::DELETE, TABLE_ALL, 0, vec![], vec![]);
        d.out_port = 5;
        assert_eq!(f.flow_mod(&d), Ok(0));
        d.out_port = 4;
        d.matches = inp(2);
        assert_eq!(f.flow_mod(&d), Ok(1));
        let st = f.flow_stats(&all()).unwrap();
        assert_eq!(st.len(), 2);
        assert_eq!(st[0].priority, 11, "highest priority first");
        assert_eq!(st[1].matches, inp(1));
        assert_eq!(st[1].instructions, vec![out(4)]);
        assert_eq!(
            f.flow_mod(&fm(fc::DELETE_STRICT, 0, 11, vec![], vec![])),
            Ok(1)
        );
        assert_eq!(f.aggregate_stats(&all()), Ok((0, 0, 1)));
    }

    #[test]
    fn counters_survive_modify_and_replace_unless_reset() {
        let f = flows();
        let m = vec![Oxm::exact(oxm::IN_PORT, 1)];
        f.flow_mod(&fm(fc::ADD, 0, 5, m.clone(), vec![out(2)]))
            .unwrap();
        let frame = eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 0x0800);
        assert_eq!(classify1(&f, 0, 0, &frame), Verdict::Port(1));
        let count = || f.aggregate_stats(&all()).unwrap().0;
        assert_eq!(count(), 1);
        f.flow_mod(&fm(fc::MODIFY, 0, 0, vec![], vec![out(3)]))
            .unwrap();
        assert_eq!(count(), 1, "modify keeps counters");
        f.flow_mod(&fm(fc::ADD, 0, 5, m.clone(), vec![out(2)]))
            .unwrap();
        assert_eq!(count(), 1, "add over the same flow copies them");
        let mut r = fm(fc::ADD, 0, 5, m, vec![out(2)]);
        r.flags = ff::RESET_COUNTS;
        f.flow_mod(&r).unwrap();
        assert_eq!(count(), 0, "RESET_COUNTS clears them");
        let ts = f.table_stats();
        assert_eq!(ts.len(), 255);
        assert_eq!(ts[0], (0, 1, 1, 1));
    }

    #[test]
    fn refusals_carry_the_spec_codes() {
        let f = flows();
        let ip = Oxm::exact(oxm::ETH_TYPE, 0x800);
        let set_ip = Instruction::ApplyActions(vec![openflow::Action::SetField(Oxm::exact(
            oxm::IPV4_DST,
            1,
        ))]);
        assert_eq!(
            f.flow_mod(&fm(fc::ADD, 0, 1, vec![], vec![set_ip.clone()])),
            Err(OfpError::new(et::BAD_ACTION, bac::MATCH_INCONSISTENT))
        );
        f.flow_mod(&fm(fc::ADD, 0, 1, vec![ip], vec![set_ip]))
            .unwrap();
        assert_eq!(
            f.flow_mod(&fm(fc::ADD, 3, 1, vec![], vec![Instruction::GotoTable(2)])),
            Err(OfpError::new(et::BAD_INSTRUCTION, bic::BAD_TABLE_ID))
        );
        let grp = Instruction::ApplyActions(vec![openflow::Action::Group(1)]);
        assert_eq!(
            f.flow_mod(&fm(fc::ADD, 0, 1, vec![], vec![grp])),
            Err(OfpError::new(et::BAD_ACTION, bac::BAD_OUT_GROUP))
        );
        assert_eq!(
            f.flow_mod(&fm(fc::ADD, 0, 1, vec![], vec![out(port::TABLE)])),
            Err(OfpError::new(et::BAD_ACTION, bac::BAD_OUT_PORT))
        );
        assert_eq!(
            actions_from_of(&[openflow::Action::Output {
                port: port::NORMAL,
                max_len: 0
            }]),
            Ok(vec![Action::Normal])
        );
        assert_eq!(
            actions_to_of(&[Action::Normal], None, None),
            vec![openflow::Action::Output {
                port: port::NORMAL,
                max_len: 0
            }]
        );
        let ctl = |max_len| openflow::Action::Output {
            port: port::CONTROLLER,
            max_len,
        };
        assert_eq!(
            actions_from_of(&[ctl(128)]),
            Ok(vec![Action::Controller(128)])
        );
        assert_eq!(
            actions_to_of(&[Action::Controller(128)], None, None),
            vec![ctl(128)]
        );
        let both = Instruction::ApplyActions(vec![
            ctl(0xffff),
            openflow::Action::Output {
                port: 2,
                max_len: 0,
            },
        ]);
        // A packet-in and an output in one list: both (Faucet's way with
        // the first frame of a new host).
        assert_eq!(f.flow_mod(&fm(fc::ADD, 0, 1, vec![], vec![both])), Ok(1));
        f.flow_mod(&fm(fc::DELETE_STRICT, 0, 1, vec![], vec![]))
            .unwrap();
        assert_eq!(
            f.flow_mod(&fm(
                fc::ADD,
                0,
                1,
                vec![
                    Oxm::exact(oxm::ETH_TYPE, 0x88e7),
                    Oxm::exact(oxm::PBB_ISID, 1)
                ],
                vec![]
            )),
            Err(OfpError::new(et::BAD_MATCH, bmc::BAD_FIELD))
        );
        assert_eq!(
            f.flow_mod(&fm(
                fc::ADD,
                0,
                1,
                vec![Oxm::exact(oxm::PACKET_TYPE, 0x1_0800)],
                vec![]
            )),
            Err(OfpError::new(et::BAD_MATCH, bmc::BAD_VALUE))
        );
        assert_eq!(f.flow_count(), 1, "refused flow-mods change nothing");
        // OVS's packet_type=(0,0) (Ethernet) matches everything.
        f.flow_mod(&fm(
            fc::ADD,
            0,
            2,
            vec![Oxm::exact(oxm::PACKET_TYPE, 0)],
            vec![],
        ))
        .unwrap();
        assert_eq!(f.flow_count(), 2);
    }

    #[test]
    fn matches_round_trip_through_the_key() {
        let ms = vec![
            Oxm::exact(oxm::IN_PORT, 3),
            Oxm {
                field: oxm::ETH_DST,
                value: 0x0100_0000_0000,
                mask: Some(0x0100_0000_0000),
            },
            Oxm::exact(oxm::ETH_TYPE, 0x800),
            Oxm::exact(oxm::VLAN_VID, 0x1005),
            Oxm::exact(oxm::VLAN_PCP, 3),
            Oxm::exact(oxm::IP_DSCP, 46),
            Oxm::exact(oxm::IP_PROTO, 17),
            Oxm {
                field: oxm::IPV4_SRC,
                value: 0x0a00_0000,
                mask: Some(0xff00_0000),
            },
            Oxm::exact(oxm::UDP_DST, 53),
        ];
        let (k, m) = match_to_key(&ms).unwrap();
        assert_eq!(key_to_match(&k, &m), ms);
        // The text syntax and OpenFlow build the same key.
        let s = super::super::parse("in_port=2,dl_vlan=5,udp,tp_dst=53,actions=drop").unwrap();
        let (k2, m2) = match_to_key(&[
            Oxm::exact(oxm::IN_PORT, 3),
            Oxm::exact(oxm::VLAN_VID, 0x1005),
            Oxm::exact(oxm::ETH_TYPE, 0x800),
            Oxm::exact(oxm::IP_PROTO, 17),
            Oxm::exact(oxm::UDP_DST, 53),
        ])
        .unwrap();
        assert_eq!((s.key, s.mask), (k2, m2));
    }

    #[test]
    fn decoded_bytes_drive_the_logic() {
        let mut b = openflow::flow_mod(
            1,
            &fm(
                fc::ADD,
                0,
                100,
                vec![Oxm::exact(oxm::IN_PORT, 1)],
                vec![out(port::FLOOD)],
            ),
        );
        let (_, Message::FlowMod(m)) = decode(&b).unwrap() else {
            panic!("flow-mod")
        };
        let f = flows();
        f.flow_mod(&m).unwrap();
        let st = f.flow_stats(&all()).unwrap();
        assert_eq!(st[0].instructions, vec![out(port::FLOOD)]);
        b[2] = 0xff;
        assert!(decode(&b).is_err());
    }

    #[test]
    fn vlan_push_and_set_fields_need_a_tag_and_round_trip() {
        use openflow::Action as A;
        let f = flows();
        let vid = |v: u128| A::SetField(Oxm::exact(oxm::VLAN_VID, 0x1000 | v));
        let pcp = |p: u128| A::SetField(Oxm::exact(oxm::VLAN_PCP, p));
        let o2 = A::Output {
            port: 2,
            max_len: 0,
        };
        let inconsistent = OfpError::new(et::BAD_ACTION, bac::MATCH_INCONSISTENT);
        // No tag in the match and none pushed: refused, nothing installed.
        for acts in [
            vec![vid(5), o2],
            vec![pcp(1), o2],
            vec![A::PushVlan(0x8100), A::PopVlan, vid(5), o2],
        ] {
            let e = f.flow_mod(&fm(
                fc::ADD,
                0,
                5,
                vec![],
                vec![Instruction::ApplyActions(acts)],
            ));
            assert_eq!(e.unwrap_err(), inconsistent);
        }
        assert!(f.flow_stats(&all()).unwrap().is_empty());
        // A PCP outside 0..=7.
        let e = f.flow_mod(&fm(
            fc::ADD,
            0,
            5,
            vec![],
            vec![Instruction::ApplyActions(vec![
                A::PushVlan(0x8100),
                pcp(8),
                o2,
            ])],
        ));
        assert_eq!(
            e.unwrap_err(),
            OfpError::new(et::BAD_ACTION, bac::BAD_SET_ARGUMENT)
        );
        // Pushed first, or tagged by the match: taken, and dumped the same.
        let pushed = vec![A::PushVlan(0x88a8), vid(7), pcp(3), o2];
        f.flow_mod(&fm(
            fc::ADD,
            0,
            5,
            vec![Oxm::exact(oxm::IN_PORT, 1)],
            vec![Instruction::ApplyActions(pushed.clone())],
        ))
        .unwrap();
        let tagged = vec![Oxm {
            field: oxm::VLAN_VID,
            value: 0x1000,
            mask: Some(0x1000),
        }];
        f.flow_mod(&fm(
            fc::ADD,
            0,
            6,
            tagged,
            vec![Instruction::ApplyActions(vec![vid(9), o2])],
        ))
        .unwrap();
        let st = f.flow_stats(&all()).unwrap();
        let acts: Vec<_> = st.iter().map(|s| s.instructions.clone()).collect();
        assert!(
            acts.contains(&vec![Instruction::ApplyActions(pushed)]),
            "{acts:?}"
        );
        assert!(
            acts.contains(&vec![Instruction::ApplyActions(vec![vid(9), o2])]),
            "{acts:?}"
        );
        // And the pushed tag is on the frame that leaves.
        let mut b =
            crate::testutil::Batch::new(vec![eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 0x88b5)]);
        assert_eq!(b.classify(&f, 0, 0), vec![Verdict::Port(1)]);
        assert_eq!(&b.views[0][12..18], &[0x88, 0xa8, 0x60, 0x07, 0x88, 0xb5]);
    }

    /// Flow statistics give back the `max_len` each output was installed
    /// with (os-ken's tester and Faucet send `OFPCML_MAX`, 0xffe5, and
    /// check the flow by its statistics), through modify too; a flow
    /// added in the text syntax shows 0, as ovs-ofctl sends it.
    #[test]
    fn flow_stats_echo_the_installed_max_len() {
        use crate::Logic as _;
        let f = flows();
        let o = |port, max_len| openflow::Action::Output { port, max_len };
        let ctl = o(port::CONTROLLER, 128);
        let acts = vec![o(2, 0xffe5), o(3, 0), o(port::FLOOD, 7)];
        f.flow_mod(&fm(
            fc::ADD,
            0,
            5,
            inp(1),
            vec![Instruction::ApplyActions(acts.clone())],
        ))
        .unwrap();
        f.flow_mod(&fm(
            fc::ADD,
            0,
            6,
            inp(2),
            vec![Instruction::ApplyActions(vec![ctl])],
        ))
        .unwrap();
        let insts = || -> Vec<Vec<Instruction>> {
            f.flow_stats(&all())
                .unwrap()
                .into_iter()
                .map(|s| s.instructions)
                .collect()
        };
        assert_eq!(
            insts(),
            vec![
                vec![Instruction::ApplyActions(vec![ctl])],
                vec![Instruction::ApplyActions(acts)],
            ]
        );
        let mut m = fm(
            fc::MODIFY_STRICT,
            0,
            5,
            inp(1),
            vec![Instruction::ApplyActions(vec![o(3, 0xffe5)])],
        );
        assert_eq!(f.flow_mod(&m), Ok(1));
        assert_eq!(
            insts()[1],
            vec![Instruction::ApplyActions(vec![o(3, 0xffe5)])]
        );
        m.instructions = vec![Instruction::ApplyActions(vec![o(4, 0)])];
        assert_eq!(f.flow_mod(&m), Ok(1));
        assert_eq!(insts()[1], vec![Instruction::ApplyActions(vec![o(4, 0)])]);
        // The text syntax replaces the actions: 0 again.
        m.instructions = vec![Instruction::ApplyActions(vec![o(4, 0xffe5)])];
        assert_eq!(f.flow_mod(&m), Ok(1));
        f.command(
            "modify",
            &serde_json::json!({"flow": "priority=5,in_port=0,actions=output:2", "strict": true}),
        )
        .unwrap();
        assert_eq!(insts()[1], vec![Instruction::ApplyActions(vec![o(3, 0)])]);
    }
}
