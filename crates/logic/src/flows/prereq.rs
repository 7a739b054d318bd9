//! Prerequisites of a flow's actions (OpenFlow 1.3, 7.2.5, set-field: "the
//! field's prerequisites must be met by the match"; Open vSwitch carries
//! them through the list, so a `push_mpls` makes the frame MPLS for the
//! actions after it): each rewrite needs the header it rewrites, known
//! from the match or an earlier action of the list. Checked for flows from
//! the text syntax and from flow-mods alike (`OFPBAC_MATCH_INCONSISTENT`
//! over OpenFlow). Besides giving the controller an error instead of a
//! rewrite that never happens, it is what keeps the caches right: a
//! rewrite's effect on the key depends on the EtherType and protocol,
//! which a prerequisite puts in the flow's match, so in the fields in
//! use.
//!
//! Group buckets are not checked (the flows using a group are not known
//! when it is made, as in Open vSwitch): a bucket runs on a copy of the
//! frame that no later table looks up, and a rewrite of a header the frame
//! does not have does nothing.

use super::key::{num, Field, Key};
use super::Action;

/// What the match and the actions so far say about the frame.
#[derive(Clone, Copy, Debug)]
struct Known {
    et: Option<u16>,
    proto: Option<u8>,
    icmp_type: Option<u8>,
    tagged: bool,
}

impl Known {
    fn of(key: &Key, mask: &Key) -> Known {
        let exact = |f: Field| (mask.get(f) == f.full()).then(|| key.get(f));
        let et = exact(Field::DlType).map(|v| v as u16);
        let ip = matches!(et, Some(num::IPV4 | num::IPV6));
        let proto = exact(Field::NwProto).map(|v| v as u8).filter(|_| ip);
        let icmp = matches!(proto, Some(num::ICMP | num::ICMP6));
        Known {
            et,
            proto,
            icmp_type: exact(Field::TpSrc).map(|v| v as u8).filter(|_| icmp),
            tagged: mask.get(Field::VlanTci) & 0x1000 != 0 && key.get(Field::VlanTci) & 0x1000 != 0,
        }
    }

    fn ip(&self) -> bool {
        matches!(self.et, Some(num::IPV4 | num::IPV6))
    }

    fn mpls(&self) -> bool {
        matches!(self.et, Some(num::MPLS | num::MPLS_MC))
    }
}

/// The prerequisite `a` misses, if any, as the text syntax words it.
fn missing(a: &Action, k: &Known) -> Option<&'static str> {
    let need = |ok: bool, what: &'static str| (!ok).then_some(what);
    match *a {
        Action::SetVlanVid(_) | Action::SetVlanPcp(_) => need(
            k.tagged,
            "a VLAN tag: a match on one (dl_vlan, vlan_tci=0x1000/0x1000) or a push_vlan before",
        ),
        Action::SetNwSrc(_) | Action::SetNwDst(_) => {
            need(k.et == Some(num::IPV4), "a match on ip (dl_type=0x0800)")
        }
        Action::SetIpDscp(_)
        | Action::SetIpEcn(_)
        | Action::SetNwProto(_)
        | Action::SetNwTtl(_) => need(k.ip(), "a match on ip or ipv6"),
        Action::SetTpSrc(_) | Action::SetTpDst(_) => need(
            k.ip() && matches!(k.proto, Some(num::TCP | num::UDP | num::SCTP)),
            "a match on tcp, udp or sctp (over ip or ipv6)",
        ),
        Action::SetIcmpType(_) | Action::SetIcmpCode(_) => need(
            (k.et == Some(num::IPV4) && k.proto == Some(num::ICMP))
                || (k.et == Some(num::IPV6) && k.proto == Some(num::ICMP6)),
            "a match on icmp or icmp6",
        ),
        Action::SetArpOp(_)
        | Action::SetArpSpa(_)
        | Action::SetArpTpa(_)
        | Action::SetArpSha(_)
        | Action::SetArpTha(_) => need(k.et == Some(num::ARP), "a match on arp"),
        Action::SetIp6Src(_) | Action::SetIp6Dst(_) | Action::SetIp6Flabel(_) => {
            need(k.et == Some(num::IPV6), "a match on ipv6")
        }
        Action::SetNdTarget(_) => need(
            k.et == Some(num::IPV6)
                && k.proto == Some(num::ICMP6)
                && matches!(k.icmp_type, Some(num::ND_NS | num::ND_NA)),
            "a match on icmp6 with icmp_type=135 or 136",
        ),
        Action::SetNdSll(_) => need(
            k.et == Some(num::IPV6)
                && k.proto == Some(num::ICMP6)
                && k.icmp_type == Some(num::ND_NS),
            "a match on icmp6 with icmp_type=135",
        ),
        Action::SetNdTll(_) => need(
            k.et == Some(num::IPV6)
                && k.proto == Some(num::ICMP6)
                && k.icmp_type == Some(num::ND_NA),
            "a match on icmp6 with icmp_type=136",
        ),
        Action::SetMplsLabel(_)
        | Action::SetMplsTc(_)
        | Action::SetMplsBos(_)
        | Action::SetMplsTtl(_)
        | Action::DecMplsTtl
        | Action::CopyTtlIn
        | Action::CopyTtlOut
        | Action::PopMpls(_) => need(k.mpls(), "a match on mpls (dl_type=0x8847 or 0x8848)"),
        _ => None,
    }
}

/// What `a` makes known for the actions after it.
fn after(a: &Action, k: &mut Known) {
    match *a {
        Action::PushVlan(_) => k.tagged = true,
        // The inner tag, if any, is not known.
        Action::PopVlan => k.tagged = false,
        Action::PushMpls(et) | Action::PopMpls(et) | Action::SetEthType(et) => {
            k.et = Some(et);
            k.proto = None;
            k.icmp_type = None;
        }
        Action::SetNwProto(p) => {
            k.proto = Some(p);
            k.icmp_type = None;
        }
        Action::SetIcmpType(t) => k.icmp_type = Some(t),
        _ => {}
    }
}

/// Checks that every action of a flow matching (`key`, `mask`) has its
/// prerequisites; the error names the first that does not.
/// The actions a `write_actions(...)` writes are checked in the order the
/// action set runs them (`exec::set_slot`: a push before the set-fields),
/// from what the apply-actions before leave known.
pub(super) fn check(acts: &[Action], key: &Key, mask: &Key) -> Result<(), String> {
    let mut k = Known::of(key, mask);
    let mut i = 0;
    while i < acts.len() {
        let a = &acts[i];
        i += 1;
        if let Action::WriteActions(n) = *a {
            let end = (i + n as usize).min(acts.len());
            let mut written: Vec<&Action> = acts[i..end].iter().collect();
            written.sort_by_key(|a| super::exec::set_slot(a));
            let mut w = k;
            for a in written {
                need(a, &w)?;
                after(a, &mut w);
            }
            i = end;
            continue;
        }
        need(a, &k)?;
        after(a, &mut k);
    }
    Ok(())
}

/// Err naming `a` if it misses a prerequisite.
fn need(a: &Action, k: &Known) -> Result<(), String> {
    match missing(a, k) {
        Some(what) => Err(format!(
            "action {} requires {what} (missing prerequisite)",
            super::text::format_actions(std::slice::from_ref(a), None)
        )),
        None => Ok(()),
    }
}
