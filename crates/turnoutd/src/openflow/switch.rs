//! Switch-wide OpenFlow state the daemon keeps for the channel
//! (channel.rs): the datapath id, and the refused flow-, group- and
//! meter-mods (docs/flows.md, "OpenFlow").
//!
//! - **Datapath id**: `[switch] datapath_id` when configured, else derived
//!   from the control socket's path; `switch.set` changes it at run time.
//!   Every change bumps a generation, and each OpenFlow session ends when
//!   it sees a new one, so that controllers reconnect and read the new id
//!   in their features reply (OpenFlow has no message announcing it; Open
//!   vSwitch reconnects its controllers the same way).
//! - **Refusals**: every error the channel answers to a flow-mod,
//!   group-mod or meter-mod is counted by message and error (`stats`'
//!   `openflow`, `turnout_openflow_refused_total`) and logged at `warn`
//!   with its cause and what was refused, at most [`LOG_BURST`] lines at
//!   once and [`LOG_PER_S`] a second after that: a controller sending
//!   thousands of bad messages cannot flood the log; the lines it skipped
//!   are counted in the next line's `unlogged`.
//!
//! Control path only (the channel's threads and the control API).

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use openflow::{Action, Instruction, Message, OfpError, Oxm};
use parking_lot::Mutex;

use crate::log::Level;

/// Refusal lines logged at once before the rate applies.
pub const LOG_BURST: f64 = 20.0;
/// Refusal lines logged per second after a burst.
pub const LOG_PER_S: f64 = 1.0;
/// Longest description of a refused message in a log line, in bytes.
const MAX_WHAT_B: usize = 600;

/// The message kinds whose refusals are counted, as `stats` names them.
pub const REFUSED_KINDS: [&str; 3] = ["flow_mod", "group_mod", "meter_mod"];

/// Parses a datapath id as the config and the API take it: an integer
/// (1 to 2^64 − 1), or a string of 16 hex digits (Open vSwitch's
/// `other-config:datapath-id`, `ovs-ofctl show`'s `dpid:`), `0x` and 1 to
/// 16 hex digits, or 8 bytes of 2 hex digits separated by colons. 0 is
/// refused (OVS refuses it too; a controller cannot tell it from "unset").
pub fn parse_datapath_id(v: &serde_json::Value) -> Result<u64, String> {
    const FORMS: &str = "an integer 1..=2^64-1, 16 hex digits, 0x and 1..=16 hex digits, \
                         or 8 colon-separated hex bytes";
    let n = match v {
        serde_json::Value::Number(n) => match n.as_u64() {
            Some(n) => n,
            None => return Err(format!("{n} is not a datapath id ({FORMS})")),
        },
        serde_json::Value::String(s) => {
            let t = s.trim();
            let hex = |h: &str| {
                (!h.is_empty() && h.len() <= 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
                    .then(|| u64::from_str_radix(h, 16).ok())
                    .flatten()
            };
            let parsed = if let Some(h) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
                hex(h)
            } else if t.contains(':') {
                let parts: Vec<&str> = t.split(':').collect();
                (parts.len() == 8 && parts.iter().all(|p| p.len() == 2))
                    .then(|| hex(&parts.concat()))
                    .flatten()
            } else if t.len() == 16 {
                hex(t)
            } else {
                None
            };
            match parsed {
                Some(n) => n,
                None => return Err(format!("{s:?} is not a datapath id ({FORMS})")),
            }
        }
        other => {
            return Err(format!(
                "expected a datapath id ({FORMS}), found {}",
                crate::config::kind_of(other)
            ))
        }
    };
    if n == 0 {
        return Err("0 is not a datapath id (1..=2^64-1)".into());
    }
    Ok(n)
}

/// A datapath id as `ovs-ofctl show` prints it: 16 hex digits.
pub fn format_datapath_id(d: u64) -> String {
    format!("{d:016x}")
}

/// The datapath id turnoutd uses when none is configured: the low 48 bits
/// of a hash (FNV-1a) of the control socket's path, stable for one
/// configuration and distinct between instances.
pub fn derived_datapath_id(control_socket: &std::path::Path) -> u64 {
    let h = control_socket
        .as_os_str()
        .as_encoded_bytes()
        .iter()
        .fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
            (h ^ b as u64).wrapping_mul(0x100_0000_01b3)
        });
    (h & 0xffff_ffff_ffff).max(1)
}

struct LogBudget {
    tokens: f64,
    last: Instant,
    unlogged: u64,
}

/// The daemon's OpenFlow state (see the module's documentation).
pub struct OfSwitch {
    dpid: AtomicU64,
    generation: AtomicU64,
    /// (message kind, error name) → refusals.
    refused: Mutex<BTreeMap<(&'static str, String), u64>>,
    log: Mutex<LogBudget>,
}

impl OfSwitch {
    /// With datapath id `dpid`.
    pub fn new(dpid: u64) -> OfSwitch {
        OfSwitch {
            dpid: AtomicU64::new(dpid),
            generation: AtomicU64::new(0),
            refused: Mutex::new(BTreeMap::new()),
            log: Mutex::new(LogBudget {
                tokens: LOG_BURST,
                last: Instant::now(),
                unlogged: 0,
            }),
        }
    }

    /// The datapath id now.
    pub fn datapath_id(&self) -> u64 {
        self.dpid.load(Ordering::Acquire)
    }

    /// Bumped at every change of the datapath id.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Sets the datapath id; true if it changed (the OpenFlow sessions
    /// then end, and controllers reconnect).
    pub fn set_datapath_id(&self, d: u64) -> bool {
        let old = self.dpid.swap(d, Ordering::AcqRel);
        if old != d {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
        old != d
    }

    /// Counts and (rate-limited) logs the refusal `e` of message `msg`
    /// (raw bytes, header included) from `peer`, if `msg` is a flow-,
    /// group- or meter-mod; other messages are left alone.
    pub fn refused(&self, msg: &[u8], e: OfpError, peer: &str) {
        let Some(kind) = refused_kind(msg) else {
            return;
        };
        let name = e.name();
        *self.refused.lock().entry((kind, name.clone())).or_insert(0) += 1;
        let unlogged = {
            let mut b = self.log.lock();
            let now = Instant::now();
            let dt = now.saturating_duration_since(b.last).as_secs_f64();
            b.last = now;
            b.tokens = (b.tokens + dt * LOG_PER_S).min(LOG_BURST);
            if b.tokens < 1.0 {
                b.unlogged += 1;
                return;
            }
            b.tokens -= 1.0;
            std::mem::take(&mut b.unlogged)
        };
        if !crate::log::enabled(Level::Warn) {
            return;
        }
        let xid = openflow::Header::peek(msg).map_or(0, |h| h.xid);
        let what = describe(msg);
        crate::log!(
            Level::Warn,
            "openflow",
            "refused",
            message = kind,
            error = name,
            xid = xid,
            peer = peer,
            what = what,
            unlogged = unlogged
        );
    }

    /// [`OfSwitch::refused`] for every `OFPT_ERROR` among `replies`, the
    /// channel's answers to `msg`.
    pub fn refused_replies(&self, msg: &[u8], replies: &[Vec<u8>], peer: &str) {
        if refused_kind(msg).is_none() {
            return;
        }
        for r in replies {
            if r.len() >= 12 && r[1] == openflow::t::ERROR {
                let e = OfpError::new(u16_at(r, 8).unwrap_or(0), u16_at(r, 10).unwrap_or(0));
                self.refused(msg, e, peer);
            }
        }
    }

    /// Refusals by message kind (every kind of [`REFUSED_KINDS`]) and error.
    pub fn refusals(&self) -> BTreeMap<String, BTreeMap<String, u64>> {
        let mut out: BTreeMap<String, BTreeMap<String, u64>> = REFUSED_KINDS
            .iter()
            .map(|k| (k.to_string(), BTreeMap::new()))
            .collect();
        for ((k, e), n) in self.refused.lock().iter() {
            out.entry(k.to_string()).or_default().insert(e.clone(), *n);
        }
        out
    }

    /// Zeroes the refusal counters (`stats.reset`).
    pub fn reset(&self) {
        self.refused.lock().clear();
    }
}

/// `flow_mod`, `group_mod` or `meter_mod` for those messages.
fn refused_kind(msg: &[u8]) -> Option<&'static str> {
    match openflow::Header::peek(msg)?.kind {
        openflow::t::FLOW_MOD => Some(REFUSED_KINDS[0]),
        openflow::t::GROUP_MOD => Some(REFUSED_KINDS[1]),
        openflow::t::METER_MOD => Some(REFUSED_KINDS[2]),
        _ => None,
    }
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

/// What a refused message asked for, in a short ovs-ofctl-like form: its
/// fixed fields (read from the bytes, so a message the decoder refused is
/// described too) and, when it decodes, its match and instructions or
/// buckets. At most [`MAX_WHAT_B`] bytes.
fn describe(msg: &[u8]) -> String {
    let mut s = String::new();
    let Some(h) = openflow::Header::peek(msg) else {
        return s;
    };
    match h.kind {
        openflow::t::FLOW_MOD => {
            const CMDS: [&str; 5] = ["add", "modify", "modify_strict", "delete", "delete_strict"];
            let cmd = msg.get(25).copied().unwrap_or(0xff);
            let _ = write!(
                s,
                "cmd={} table={} priority={} cookie={:#x}",
                CMDS.get(cmd as usize).copied().unwrap_or("?"),
                msg.get(24).copied().unwrap_or(0),
                u16_at(msg, 30).unwrap_or(0),
                msg.get(8..16)
                    .and_then(|b| b.try_into().ok())
                    .map_or(0, u64::from_be_bytes)
            );
            if let Ok((_, Message::FlowMod(fm))) = openflow::decode(msg) {
                s.push_str(" match=");
                match_text(&mut s, &fm.matches);
                s.push_str(" instructions=");
                for (i, ins) in fm.instructions.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    instruction_text(&mut s, ins);
                }
            }
        }
        openflow::t::GROUP_MOD => {
            const CMDS: [&str; 3] = ["add", "modify", "delete"];
            const TYPES: [&str; 4] = ["all", "select", "indirect", "ff"];
            let cmd = u16_at(msg, 8).unwrap_or(0xffff);
            let ty = msg.get(10).copied().unwrap_or(0xff);
            let _ = write!(
                s,
                "cmd={} type={} group_id={}",
                CMDS.get(cmd as usize).copied().unwrap_or("?"),
                TYPES.get(ty as usize).copied().unwrap_or("?"),
                u32_at(msg, 12).unwrap_or(0)
            );
            if let Ok((_, Message::GroupMod(g))) = openflow::decode(msg) {
                for b in &g.buckets {
                    s.push_str(" bucket=");
                    actions_text(&mut s, &b.actions);
                }
            }
        }
        openflow::t::METER_MOD => {
            const CMDS: [&str; 3] = ["add", "modify", "delete"];
            let cmd = u16_at(msg, 8).unwrap_or(0xffff);
            let _ = write!(
                s,
                "cmd={} flags={:#x} meter_id={} bands={}",
                CMDS.get(cmd as usize).copied().unwrap_or("?"),
                u16_at(msg, 10).unwrap_or(0),
                u32_at(msg, 12).unwrap_or(0),
                msg.len().saturating_sub(16) / 16
            );
        }
        _ => {}
    }
    if s.len() > MAX_WHAT_B {
        let mut end = MAX_WHAT_B;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

/// ovs-fields(7) names of the OXM basic fields.
fn field_name(f: u8) -> Option<&'static str> {
    const NAMES: [&str; 40] = [
        "in_port",
        "in_phy_port",
        "metadata",
        "eth_dst",
        "eth_src",
        "eth_type",
        "vlan_vid",
        "vlan_pcp",
        "ip_dscp",
        "ip_ecn",
        "ip_proto",
        "ipv4_src",
        "ipv4_dst",
        "tcp_src",
        "tcp_dst",
        "udp_src",
        "udp_dst",
        "sctp_src",
        "sctp_dst",
        "icmpv4_type",
        "icmpv4_code",
        "arp_op",
        "arp_spa",
        "arp_tpa",
        "arp_sha",
        "arp_tha",
        "ipv6_src",
        "ipv6_dst",
        "ipv6_label",
        "icmpv6_type",
        "icmpv6_code",
        "nd_target",
        "nd_sll",
        "nd_tll",
        "mpls_label",
        "mpls_tc",
        "mpls_bos",
        "pbb_isid",
        "tunnel_id",
        "ipv6_exthdr",
    ];
    NAMES.get(f as usize).copied()
}

fn oxm_text(s: &mut String, o: &Oxm) {
    match field_name(o.field) {
        Some(n) => s.push_str(n),
        None => {
            let _ = write!(s, "field{}", o.field);
        }
    }
    let _ = write!(s, "={:#x}", o.value);
    if let Some(m) = o.mask {
        let _ = write!(s, "/{m:#x}");
    }
}

fn match_text(s: &mut String, m: &[Oxm]) {
    if m.is_empty() {
        s.push_str("any");
    }
    for (i, o) in m.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        oxm_text(s, o);
    }
}

fn port_text(p: u32) -> String {
    match p {
        openflow::port::IN_PORT => "in_port".into(),
        openflow::port::FLOOD => "flood".into(),
        openflow::port::ALL => "all".into(),
        openflow::port::CONTROLLER => "controller".into(),
        openflow::port::NORMAL => "normal".into(),
        openflow::port::LOCAL => "local".into(),
        openflow::port::TABLE => "table".into(),
        p => p.to_string(),
    }
}

fn actions_text(s: &mut String, acts: &[Action]) {
    if acts.is_empty() {
        s.push_str("drop");
    }
    for (i, a) in acts.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        #[allow(unreachable_patterns)] // other variants: their Debug form
        match a {
            Action::Output { port, .. } => {
                let _ = write!(s, "output:{}", port_text(*port));
            }
            Action::Group(g) => {
                let _ = write!(s, "group:{g}");
            }
            Action::SetField(o) => {
                s.push_str("set_field:");
                oxm_text(s, o);
            }
            Action::PushVlan(t) => {
                let _ = write!(s, "push_vlan:{t:#06x}");
            }
            Action::PopVlan => s.push_str("pop_vlan"),
            Action::DecNwTtl => s.push_str("dec_ttl"),
            Action::SetNwTtl(t) => {
                let _ = write!(s, "set_nw_ttl:{t}");
            }
            other => {
                let _ = write!(s, "{other:?}");
            }
        }
    }
}

fn instruction_text(s: &mut String, i: &Instruction) {
    #[allow(unreachable_patterns)] // other variants: their Debug form
    match i {
        Instruction::ApplyActions(a) => {
            s.push_str("apply(");
            actions_text(s, a);
            s.push(')');
        }
        Instruction::WriteActions(a) => {
            s.push_str("write(");
            actions_text(s, a);
            s.push(')');
        }
        Instruction::GotoTable(t) => {
            let _ = write!(s, "goto_table:{t}");
        }
        Instruction::ClearActions => s.push_str("clear_actions"),
        Instruction::WriteMetadata(v, m) => {
            let _ = write!(s, "write_metadata:{v:#x}/{m:#x}");
        }
        Instruction::Meter(m) => {
            let _ = write!(s, "meter:{m}");
        }
        other => {
            let _ = write!(s, "{other:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn datapath_ids_in_every_form_and_the_bad_ones_named() {
        for (v, want) in [
            (json!(1), 1),
            (json!(0x1234_5678_9abc_u64), 0x1234_5678_9abc),
            (json!("000000000000000a"), 10),
            (json!("0x1"), 1),
            (json!("0XfFfFfFfFfFfFfFfF"), u64::MAX),
            (json!("00:00:00:00:00:00:01:0a"), 0x10a),
            (json!(" 0x2 "), 2),
        ] {
            assert_eq!(parse_datapath_id(&v), Ok(want), "{v}");
        }
        for (v, why) in [
            (json!(0), "0 is not"),
            (json!("0x0"), "0 is not"),
            (json!(-1), "-1 is not"),
            (json!(1.5), "1.5 is not"),
            (json!("12"), "\"12\" is not"),
            (json!("0x"), "is not"),
            (json!("0x10000000000000000"), "is not"),
            (json!("00000000000000zz"), "is not"),
            (json!("00:00:00:00:00:01:0a"), "is not"),
            (json!("00:00:00:00:00:00:1:0a"), "is not"),
            (json!(true), "found a boolean"),
            (json!([1]), "found an array"),
        ] {
            let e = parse_datapath_id(&v).unwrap_err();
            assert!(e.contains(why), "{v}: {e}");
        }
        assert_eq!(format_datapath_id(0xa1), "00000000000000a1");
        let d = derived_datapath_id(std::path::Path::new("/run/turnout/turnoutd.sock"));
        assert!(d > 0 && d < 1 << 48);
    }

    #[test]
    fn generation_moves_only_on_a_change() {
        let s = OfSwitch::new(5);
        assert!(!s.set_datapath_id(5));
        assert_eq!(s.generation(), 0);
        assert!(s.set_datapath_id(6));
        assert_eq!((s.datapath_id(), s.generation()), (6, 1));
    }

    fn flow_mod_bytes(actions: Vec<Action>) -> Vec<u8> {
        let fm = openflow::FlowMod {
            cookie: 0x5adc,
            cookie_mask: 0,
            table_id: 4,
            command: 0,
            idle_timeout: 0,
            hard_timeout: 0,
            priority: 8192,
            buffer_id: openflow::NO_BUFFER,
            out_port: openflow::port::ANY,
            out_group: openflow::GROUP_ANY,
            flags: 0,
            matches: vec![Oxm::exact(openflow::oxm::VLAN_VID, 0x1064)],
            instructions: vec![Instruction::ApplyActions(actions)],
        };
        openflow::flow_mod(7, &fm)
    }

    #[test]
    fn refusals_are_counted_by_message_and_error_and_described() {
        crate::log::set_level(Level::Error); // the lines are not what is tested here
        let s = OfSwitch::new(1);
        let out = |port| Action::Output { port, max_len: 0 };
        let b = flow_mod_bytes(vec![out(4), Action::PopVlan, out(1)]);
        let e = OfpError::new(openflow::et::BAD_ACTION, openflow::bac::UNSUPPORTED_ORDER);
        s.refused(&b, e, "test");
        s.refused(&b, e, "test");
        // Not a flow-, group- or meter-mod: not counted.
        s.refused(&openflow::barrier_reply(1), e, "test");
        let r = s.refusals();
        assert_eq!(r.len(), 3);
        assert_eq!(r["flow_mod"]["OFPBAC_UNSUPPORTED_ORDER"], 2);
        assert!(r["group_mod"].is_empty() && r["meter_mod"].is_empty());
        let d = describe(&b);
        assert_eq!(
            d,
            "cmd=add table=4 priority=8192 cookie=0x5adc match=vlan_vid=0x1064 \
             instructions=apply(output:4,pop_vlan,output:1)"
        );
        s.reset();
        assert!(s.refusals()["flow_mod"].is_empty());
        // A message the decoder refuses is still described by its fields.
        let mut cut = b.clone();
        cut.truncate(56);
        cut[2..4].copy_from_slice(&56u16.to_be_bytes());
        assert!(describe(&cut).starts_with("cmd=add table=4 priority=8192"));
        // Bounded, whatever the message.
        let long = flow_mod_bytes((0..400).map(|i| out(i + 1)).collect());
        assert!(describe(&long).len() <= MAX_WHAT_B + '…'.len_utf8());
    }

    #[test]
    fn the_log_budget_bounds_lines_not_counts() {
        crate::log::set_level(Level::Error);
        let s = OfSwitch::new(1);
        let b = flow_mod_bytes(vec![]);
        let e = OfpError::new(openflow::et::FLOW_MOD_FAILED, 4); // OFPFMFC_EPERM
        for _ in 0..1000 {
            s.refused(&b, e, "test");
        }
        assert_eq!(s.refusals()["flow_mod"]["OFPFMFC_EPERM"], 1000);
        let b = s.log.lock();
        // The burst went out; (nearly) everything else was held back.
        assert!(b.unlogged >= 1000 - LOG_BURST as u64 - 2, "{}", b.unlogged);
    }
}
