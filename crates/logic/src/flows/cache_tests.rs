//! The fast path: the straight-line key extraction agrees with the general
//! one, and the exact-match cache changes nothing but the cost: same
//! verdicts, bytes and counters as the classifier alone and as a naive
//! linear-scan interpreter written here, and no stale result after any
//! command.

use super::rewrite::TpSet;
use super::*;
use crate::testutil::{udp4, udp_to};
use proptest::prelude::*;
use serde_json::json;

/// A `Flows` with the state of its worker 0 ([`Logic::worker_state`]: its
/// caches), kept across batches as a worker keeps it; [`run`] classifies
/// with it (through the classifier while another thread holds it, or
/// without a cache).
pub(super) struct Tf {
    f: Flows,
    st: std::sync::Mutex<Option<WorkerState>>,
}

impl std::ops::Deref for Tf {
    type Target = Flows;
    fn deref(&self) -> &Flows {
        &self.f
    }
}

impl Tf {
    pub(super) fn new(f: Flows) -> Tf {
        let st = std::sync::Mutex::new(f.worker_state());
        Tf { f, st }
    }
}

pub(super) fn build(cache: usize) -> Tf {
    Tf::new(Flows::from_config(&json!({ "cache": cache })).unwrap())
}

pub(super) fn add(f: &Flows, t: &str) -> bool {
    f.command("add", &json!({ "flow": t })).is_ok()
}

/// Verdicts of one batch of copies of `frames` (worker 0, with its state),
/// and the frames after (as the views show them: a popped tag is gone).
pub(super) fn run(f: &Tf, ingress: PortId, frames: &[Vec<u8>]) -> (Vec<Verdict>, Vec<Vec<u8>>) {
    let (v, after, _) = run_copies(f, ingress, frames);
    (v, after)
}

/// Copies of frames, each with its verdict and bytes.
pub(super) type Copies = Vec<(Verdict, Vec<u8>)>;

/// [`run`], with the copies the logic made of the frames (verdict and
/// bytes, in the order made).
pub(super) fn run_copies(
    f: &Tf,
    ingress: PortId,
    frames: &[Vec<u8>],
) -> (Vec<Verdict>, Vec<Vec<u8>>, Copies) {
    let mut frames = frames.to_vec();
    let mut v = vec![Verdict::Flood; frames.len()];
    let (after, copies) = fabric::with_frames(&mut frames, ingress, 0, |pkts| {
        let ctx = Ctx {
            now_ns: 0,
            worker: 0,
        };
        match f.st.try_lock().as_deref_mut() {
            Ok(Some(st)) => f.classify_with(&mut **st, &ctx, ingress, pkts, &mut v),
            _ => f.classify(&ctx, ingress, pkts, &mut v),
        }
        let (cp, cv) = pkts.copies();
        let copies: Vec<(Verdict, Vec<u8>)> = cv
            .iter()
            .zip(cp)
            .map(|(v, p)| (*v, p.data().to_vec()))
            .collect();
        (pkts.iter().map(|p| p.data().to_vec()).collect(), copies)
    });
    (v, after, copies)
}

/// Where a frame (or one of its copies) is delivered.
#[derive(Debug, PartialEq, Eq, Clone, PartialOrd, Ord)]
enum Dest {
    Port(PortId),
    Flood,
}

/// What became of one frame: every delivery (destination and bytes),
/// sorted; if none, why.
#[derive(Debug, PartialEq, Eq, Clone)]
struct Outcome {
    sent: Vec<(Dest, Vec<u8>)>,
    drop: Option<DropReason>,
}

/// The deliveries of `v` for `bytes` (a group by its members, never to
/// the ingress: the fabric's rule), or its drop reason.
fn deliveries(f: &Flows, ingress: PortId, v: Verdict, bytes: &[u8], out: &mut Outcome) {
    match v {
        Verdict::Port(p) if p == ingress => out.drop = Some(DropReason::Hairpin),
        Verdict::Port(p) => out.sent.push((Dest::Port(p), bytes.to_vec())),
        Verdict::Group(g) => {
            for &p in f.group_members(g) {
                if p != ingress {
                    out.sent.push((Dest::Port(p), bytes.to_vec()));
                }
            }
        }
        Verdict::Flood => out.sent.push((Dest::Flood, bytes.to_vec())),
        Verdict::Drop(r) => out.drop = Some(r),
    }
}

/// The outcome of one frame through `f`, alone in its batch.
fn outcome(f: &Tf, ingress: PortId, frame: &[u8]) -> Outcome {
    let (v, after, copies) = run_copies(f, ingress, &[frame.to_vec()]);
    let mut o = Outcome {
        sent: Vec::new(),
        drop: None,
    };
    for (cv, c) in &copies {
        deliveries(f, ingress, *cv, c, &mut o);
    }
    deliveries(f, ingress, v[0], &after[0], &mut o);
    o.sent.sort();
    if !o.sent.is_empty() {
        o.drop = None;
    }
    o
}

// ------------------------------------------------------------ reference

/// One flow as the reference sees it.
struct RefFlow {
    table: u8,
    priority: u16,
    key: Key,
    mask: Key,
    actions: Vec<Action>,
    goto: Option<u8>,
}

/// Naive interpreter of OpenFlow's semantics as docs/flows.md words them:
/// a linear scan per table with the general key extractor (and the
/// registers), the actions one by one on a `Vec`; each output sends the
/// frame as it is then, the outputs of one action list with no header
/// change between them are a set of destinations (a flood covers the
/// others), and a set equal to the one sent just before, with no header
/// change between, adds nothing.
fn reference(flows: &[RefFlow], ingress: PortId, frame: &mut Vec<u8>) -> Outcome {
    let mut table = 0u8;
    let mut o = Outcome {
        sent: Vec::new(),
        drop: None,
    };
    // The destinations last sent the frame as it is now (no change since).
    let mut last: Option<Vec<Dest>> = None;
    let mut soft: Option<DropReason> = None;
    let (mut metadata, mut tunnel) = (0u64, 0u64);
    // L4 ports set where the frame holds no such header: kept in the key.
    let mut tp: [Option<u16>; 2] = [None; 2];
    let mut stop: Option<DropReason> = None;
    // The action set: one action per type (every output one type), in
    // the order written.
    let mut set: Vec<Action> = Vec::new();
    let end = 'pipeline: loop {
        let mut k = key::extract_general(frame, ingress);
        k.set(Field::Metadata, metadata as u128);
        k.set(Field::TunnelId, tunnel as u128);
        if matches!(k.get(Field::NwProto) as u8, 6 | 17 | 132) {
            for (f, v) in [(Field::TpSrc, tp[0]), (Field::TpDst, tp[1])] {
                if let Some(v) = v {
                    k.set(f, v as u128);
                }
            }
        }
        // Highest priority; equal: the earliest in `flows` (installation order).
        let mut best: Option<&RefFlow> = None;
        for r in flows.iter().filter(|r| r.table == table) {
            if k.and(&r.mask) == r.key && best.is_none_or(|b| r.priority > b.priority) {
                best = Some(r);
            }
        }
        let Some(r) = best else {
            break DropReason::NoMatch;
        };
        // The destinations of the outputs since the last change.
        let mut seg: Vec<Dest> = Vec::new();
        let mut flood = false;
        let mut hairpin = false;
        let send = |seg: &mut Vec<Dest>,
                    flood: &mut bool,
                    hairpin: &mut bool,
                    frame: &[u8],
                    last: &mut Option<Vec<Dest>>,
                    o: &mut Outcome,
                    soft: &mut Option<DropReason>| {
            send_ref(seg, *flood, *hairpin, ingress, frame, last, o, soft);
            seg.clear();
            *flood = false;
            *hairpin = false;
        };
        let mut i = 0;
        while i < r.actions.len() {
            let a = &r.actions[i];
            i += 1;
            match *a {
                Action::ClearActions => set.clear(),
                Action::WriteActions(n) => {
                    for w in &r.actions[i..i + n as usize] {
                        set.retain(|x| ref_type(x) != ref_type(w));
                        set.push(*w);
                    }
                    i += n as usize;
                }
                Action::Output(p) => seg.push(Dest::Port(p)),
                Action::Flood | Action::All => flood = true,
                Action::InPort => hairpin = true,
                Action::Normal | Action::Controller(_) | Action::OfGroup(_) | Action::Meter(_) => {
                    unreachable!("not generated")
                }
                Action::WriteMetadata(v, m) => metadata = (metadata & !m) | (v & m),
                Action::SetTunnelId(t) => tunnel = t,
                _ => {
                    send(
                        &mut seg,
                        &mut flood,
                        &mut hairpin,
                        frame,
                        &mut last,
                        &mut o,
                        &mut soft,
                    );
                    last = None;
                    if !ref_change(a, frame, &mut tp) {
                        stop = Some(DropReason::Policy);
                        break 'pipeline DropReason::Policy;
                    }
                }
            }
        }
        send(
            &mut seg,
            &mut flood,
            &mut hairpin,
            frame,
            &mut last,
            &mut o,
            &mut soft,
        );
        match r.goto {
            Some(g) => table = g,
            None => break DropReason::Policy,
        }
    };
    // The pipeline ended with its last flow (not a miss, not a drop): the
    // set runs in the spec's order, if it sends the frame anywhere.
    if end == DropReason::Policy && stop.is_none() && set.iter().any(|a| ref_rank(a) == OUT) {
        set.sort_by_key(ref_rank);
        let (mut seg, mut flood, mut hairpin) = (Vec::new(), false, false);
        for a in &set {
            match *a {
                Action::Output(p) => seg.push(Dest::Port(p)),
                Action::Flood | Action::All => flood = true,
                Action::InPort => hairpin = true,
                _ => {
                    last = None;
                    if !ref_change(a, frame, &mut tp) {
                        stop = Some(DropReason::Policy);
                        break;
                    }
                }
            }
        }
        if stop.is_none() {
            send_ref(
                &mut seg, flood, hairpin, ingress, frame, &mut last, &mut o, &mut soft,
            );
        }
    }
    o.sent.sort();
    if o.sent.is_empty() {
        o.drop = Some(soft.or(stop).unwrap_or(end));
    }
    o
}

/// The type of `a` in the reference's action set: every output one.
fn ref_type(a: &Action) -> Option<std::mem::Discriminant<Action>> {
    (ref_rank(a) != OUT).then(|| std::mem::discriminant(a))
}

/// The rank of the outputs in [`ref_rank`].
const OUT: u8 = 99;

/// Where `a` runs in the action set, as OpenFlow 1.3 (5.10) orders it:
/// copy TTL inwards, pop, push-MPLS, push-VLAN, copy TTL outwards,
/// decrement TTL, set (the set-fields in turnoutd's order of fields,
/// docs/flows.md), output. Only the generated actions.
fn ref_rank(a: &Action) -> u8 {
    match a {
        Action::PopVlan => 1,
        Action::PopMpls(_) => 2,
        Action::PushMpls(_) => 3,
        Action::PushVlan(_) => 4,
        Action::DecMplsTtl => 6,
        Action::DecTtl => 7,
        Action::SetNwTtl(_) => 9,
        Action::SetDlDst(_) => 11,
        Action::SetVlanVid(_) => 13,
        Action::SetVlanPcp(_) => 14,
        Action::SetIpEcn(_) => 16,
        Action::SetNwSrc(_) => 18,
        Action::SetNwDst(_) => 19,
        Action::SetTpDst(_) => 21,
        Action::SetMplsLabel(_) => 35,
        Action::Output(_) | Action::Flood | Action::All | Action::InPort => OUT,
        other => unreachable!("not generated in a write_actions: {other:?}"),
    }
}

/// The reference's send of a list's outputs since its last header change,
/// or of the action set's (`seg`, or the flood).
#[allow(clippy::too_many_arguments)]
fn send_ref(
    seg: &mut Vec<Dest>,
    flood: bool,
    hairpin: bool,
    ingress: PortId,
    frame: &[u8],
    last: &mut Option<Vec<Dest>>,
    o: &mut Outcome,
    soft: &mut Option<DropReason>,
) {
    let mut set: Vec<Dest> = if flood {
        vec![Dest::Flood]
    } else {
        std::mem::take(seg)
    };
    set.sort();
    set.dedup();
    let all = set.clone();
    set.retain(|d| *d != Dest::Port(ingress));
    if set.is_empty() {
        if hairpin || !all.is_empty() {
            soft.get_or_insert(DropReason::Hairpin);
        }
    } else if last.as_ref() != Some(&all) {
        for d in &set {
            o.sent.push((d.clone(), frame.to_vec()));
        }
        *last = Some(all);
    }
}

/// 4 bytes out of `frame` at `at`; a frame of Ethernet's 60 bytes or more
/// padded back to 60 with zeros if it falls under.
fn pop4(frame: &mut Vec<u8>, at: usize) {
    let len = frame.len();
    frame.drain(at..at + 4);
    if len >= 60 && frame.len() < 60 {
        frame.resize(60, 0);
    }
}

/// A header change on a `Vec`, written here from the formats (not the
/// logic's code, but for the checksummed fields); false: the packet is
/// dropped (invalid TTL).
fn ref_change(a: &Action, frame: &mut Vec<u8>, tp: &mut [Option<u16>; 2]) -> bool {
    let tagged = |f: &[u8]| {
        f.len() >= 18 && wire::ethernet::EtherType::is_tpid(u16::from_be_bytes([f[12], f[13]]))
    };
    match *a {
        Action::SetDlSrc(m) => write_mac(frame, 6, m),
        Action::SetDlDst(m) => write_mac(frame, 0, m),
        Action::DecTtl => return dec_ttl(frame),
        Action::SetNwSrc(a) => set_ip4(frame, 12, a),
        Action::SetNwDst(a) => set_ip4(frame, 16, a),
        Action::SetTpSrc(p) => match set_tp(frame, 0, p) {
            TpSet::Written => tp[0] = None,
            TpSet::Truncated => tp[0] = Some(p),
            TpSet::Ignored => {}
        },
        Action::SetTpDst(p) => match set_tp(frame, 2, p) {
            TpSet::Written => tp[1] = None,
            TpSet::Truncated => tp[1] = Some(p),
            TpSet::Ignored => {}
        },
        Action::PushVlan(t) => {
            // OpenFlow 1.3: the outer tag's VID and PCP, if there is one.
            let tci = if tagged(frame) {
                u16::from_be_bytes([frame[14], frame[15]]) & 0xefff
            } else {
                0
            };
            frame.splice(
                12..12,
                [(t >> 8) as u8, t as u8, (tci >> 8) as u8, tci as u8],
            );
        }
        Action::SetVlanVid(v) if tagged(frame) => {
            frame[14] = (frame[14] & 0xf0) | (v >> 8) as u8;
            frame[15] = v as u8;
        }
        Action::SetVlanPcp(p) if tagged(frame) => frame[14] = (frame[14] & 0x1f) | (p << 5),
        Action::SetVlanVid(_) | Action::SetVlanPcp(_) => {}
        Action::PopVlan if tagged(frame) => pop4(frame, 12),
        Action::PopVlan => {}
        // (The checksummed fields by rewrite.rs's helpers, which have
        // their own tests: here the pipeline's semantics are checked.)
        Action::SetIpDscp(d) => rewrite::set_tos(frame, 0xfc, d << 2),
        Action::SetIpEcn(e) => rewrite::set_tos(frame, 0x03, e),
        Action::SetNwTtl(t) => rewrite::set_nw_ttl(frame, t),
        Action::PushMpls(et) => {
            let Ok(t) = wire::ethernet::parse_tags(frame) else {
                return true;
            };
            let l3 = t.l3_offset;
            let lse: u32 = if matches!(t.ethertype, 0x8847 | 0x8848) && frame.len() >= l3 + 4 {
                u32::from_be_bytes([frame[l3], frame[l3 + 1], frame[l3 + 2], frame[l3 + 3]])
                    & !0x100
            } else if t.ethertype == 0x0800 && frame.len() >= l3 + 20 && frame[l3] >> 4 == 4 {
                0x100 | frame[l3 + 8] as u32
            } else if t.ethertype == 0x86dd && frame.len() >= l3 + 40 && frame[l3] >> 4 == 6 {
                0x100 | frame[l3 + 7] as u32
            } else {
                0x100
            };
            frame[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
            frame.splice(l3..l3, lse.to_be_bytes());
        }
        Action::PopMpls(et) => {
            let Ok(t) = wire::ethernet::parse_tags(frame) else {
                return true;
            };
            let l3 = t.l3_offset;
            if matches!(t.ethertype, 0x8847 | 0x8848) && frame.len() >= l3 + 4 {
                frame[l3 - 2..l3].copy_from_slice(&et.to_be_bytes());
                pop4(frame, l3);
            }
        }
        Action::SetMplsTtl(_) | Action::SetMplsLabel(_) | Action::DecMplsTtl => {
            let Ok(t) = wire::ethernet::parse_tags(frame) else {
                return !matches!(a, Action::DecMplsTtl);
            };
            let l3 = t.l3_offset;
            if !matches!(t.ethertype, 0x8847 | 0x8848) || frame.len() < l3 + 4 {
                return !matches!(a, Action::DecMplsTtl);
            }
            match *a {
                Action::SetMplsTtl(v) => frame[l3 + 3] = v,
                Action::SetMplsLabel(l) => {
                    frame[l3] = (l >> 12) as u8;
                    frame[l3 + 1] = (l >> 4) as u8;
                    frame[l3 + 2] = (frame[l3 + 2] & 0x0f) | ((l as u8) << 4);
                }
                _ => {
                    if frame[l3 + 3] <= 1 {
                        return false;
                    }
                    frame[l3 + 3] -= 1;
                }
            }
        }
        ref other => unreachable!("not generated: {other:?}"),
    }
    true
}

// ------------------------------------------------------------ generators

fn match_text(shape: u8, a: u8, b: u8) -> String {
    match shape % 12 {
        0 => String::new(),
        1 => "udp".into(),
        2 => format!("udp,tp_dst={}", a % 4),
        3 => format!("ip,nw_dst=10.0.{}.0/24", a % 4),
        4 => format!("udp,nw_dst=10.0.{}.{},tp_dst={}", a % 4, b % 4, b % 3),
        5 => format!("dl_vlan={}", 1 + a % 2),
        6 => format!("in_port={}", a % 3),
        7 => format!("dl_dst=02:00:00:00:00:0{}", a % 3),
        8 => format!("metadata={}/0x3", a % 4),
        9 => format!("mpls,mpls_label={}", a % 3),
        10 => format!("ip,nw_ecn={},nw_tos={}", a % 4, (b % 2) * 4),
        _ => format!("ip,nw_src=10.9.{}.1", a % 2),
    }
}

fn action_text(kind: u8, a: u8, m: &str) -> Option<String> {
    let ip = m.starts_with("ip") || m.starts_with("udp");
    let l4 = m.starts_with("udp");
    let mpls = m.starts_with("mpls");
    Some(match kind % 20 {
        0 | 1 | 14 => format!("output:{}", a % 4),
        10 => format!("mod_vlan_vid:{}", 1 + a % 3),
        11 => format!(
            "push_vlan:{}",
            if a.is_multiple_of(2) {
                "0x8100"
            } else {
                "0x88a8"
            }
        ),
        12 => format!("mod_vlan_pcp:{}", a % 8),
        2 => "flood".into(),
        3 => format!("mod_dl_dst:02:00:00:00:00:0{}", a % 3),
        4 if ip => format!("mod_nw_dst:10.0.{}.{}", a % 4, (a / 4) % 4),
        5 if l4 => format!("mod_tp_dst:{}", a % 4),
        6 => "dec_ttl".into(),
        7 => "strip_vlan".into(),
        8 if ip => format!("mod_nw_src:10.9.{}.1", a % 2),
        9 => format!("write_metadata:{}/0x3", a % 4),
        13 if ip => format!("set_field:{}->ip_ecn", a % 4),
        15 if ip => format!("set_nw_ttl:{}", a % 3),
        16 => "push_mpls:0x8847".into(),
        17 if mpls => "pop_mpls:0x0800".into(),
        18 if mpls => format!("set_mpls_label:{}", a % 3),
        19 if mpls => "dec_mpls_ttl".into(),
        _ => return None,
    })
}

/// A flow text: table, priority, match shape and values, actions, goto.
pub(super) type FlowGen = (u8, u8, u8, u8, u8, Vec<(u8, u8)>, u8);

fn flow_text(g: &FlowGen) -> String {
    let &(table, prio, shape, a, b, ref acts, goto) = g;
    let table = table % 4;
    let m = match_text(shape, a, b);
    // Apply-actions, then clear_actions, write_actions(...) and
    // write_metadata (ovs-ofctl's order of the instructions).
    let (mut actions, mut written, mut metadata) = (Vec::new(), Vec::new(), None);
    let mut clear = false;
    for &(k, v) in acts {
        match k % 24 {
            20 => clear = true,
            21..=23 => written.extend(
                action_text(k.wrapping_add(v / 4), v, &m).filter(|t| !t.starts_with("write_")),
            ),
            k => match action_text(k, v, &m) {
                Some(t) if t.starts_with("write_metadata") => metadata = Some(t),
                t => actions.extend(t),
            },
        }
    }
    if clear {
        actions.push("clear_actions".into());
    }
    if !written.is_empty() {
        actions.push(format!("write_actions({})", written.join(",")));
    }
    actions.extend(metadata);
    if goto % 3 != 0 && table < 3 {
        actions.push(format!("goto_table:{}", table + 1 + goto % (3 - table)));
    }
    let actions = if actions.is_empty() {
        "drop".into()
    } else {
        actions.join(",")
    };
    let sep = if m.is_empty() { "" } else { "," };
    format!(
        "table={table},priority={}{sep}{m},actions={actions}",
        prio % 4
    )
}

/// A packet: in_port, dst IP bytes, dport, ttl, vlan, length cut, dst
/// MAC; and the shape (`kind`): UDP, or MPLS around it, or TOS bits.
type PktGen = (u16, u8, u8, u16, u8, u8, u8, u8);

fn packet(g: &PktGen) -> (PortId, Vec<u8>) {
    let &(in_port, c, d, dport, ttl, vlan, cut, mac) = g;
    let mut f = udp4(
        [2, 0, 0, 0, 0, 9],
        [2, 0, 0, 0, 0, mac % 3],
        [10, 0, 0, 1],
        [10, 0, c % 4, d % 4],
        1000,
        dport % 4,
    );
    f[22] = ttl % 4;
    f[15] = (mac / 3) % 8;
    if (dport >> 8) % 4 == 1 {
        // MPLS: label 0..2, bottom of stack, TTL 0..3, around the IPv4.
        let lse = (((c as u32) % 3) << 12) | 0x100 | (ttl as u32 % 4);
        f[12..14].copy_from_slice(&[0x88, 0x47]);
        f.splice(14..14, lse.to_be_bytes());
    }
    if vlan % 3 != 0 {
        let tag = [0x81, 0x00, 0x00, vlan % 3];
        f.splice(12..12, tag);
    }
    match cut % 6 {
        1 => f.truncate(30),
        2 => f.truncate(37),
        3 => f.truncate(40),
        _ => {}
    }
    (in_port % 3, f)
}

/// Up to `max - 1` flow texts' generators.
pub(super) fn flow_gens(max: usize) -> impl Strategy<Value = Vec<FlowGen>> {
    proptest::collection::vec(
        (
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            any::<u8>(),
            proptest::collection::vec((any::<u8>(), any::<u8>()), 0..5),
            any::<u8>(),
        ),
        1..max,
    )
}

/// An IPv4 header at 14 with protocol ICMP, TCP, UDP, ICMPv6 (not valid
/// in IPv4), SCTP or any, and, for some, fragment offset 0.
fn ip4_shape(b: &mut [u8], proto: u8) {
    b[12] = 0x08;
    b[13] = 0x00;
    b[14] = 0x45;
    b[23] = [1, 6, 17, 58, 132, proto][proto as usize % 6];
    if proto & 0x40 != 0 {
        b[20] &= 0xe0;
        b[21] = 0;
    }
}

/// A cached and an uncached logic with the flows of `gens` added to both
/// (each accepted by both or refused by both); `added` sees each accepted
/// flow text, in order.
pub(super) fn cached_and_plain(
    gens: &[FlowGen],
    mut added: impl FnMut(&str),
) -> Result<(Tf, Tf), TestCaseError> {
    let (cached, plain) = (build(64), build(0));
    for g in gens {
        let t = flow_text(g);
        let ok = add(&cached, &t);
        prop_assert_eq!(add(&plain, &t), ok, "{}", t);
        if ok {
            added(&t);
        }
    }
    Ok((cached, plain))
}

/// A copy's verdict with a group replaced by its ports.
fn norm_copy(f: &Flows, (v, b): &(Verdict, Vec<u8>)) -> (Result<Vec<PortId>, Verdict>, Vec<u8>) {
    let v = match *v {
        Verdict::Group(g) => Ok(f.group_members(g).to_vec()),
        v => Err(v),
    };
    (v, b.clone())
}

/// Classifies `frames` `passes` times on each logic, checks that every
/// verdict, byte and copy agrees, adds the frames classified by each to
/// `total` and returns the uncached logic's answer.
pub(super) fn agree(
    cached: &Tf,
    plain: &Tf,
    ingress: PortId,
    frames: &[Vec<u8>],
    passes: usize,
    total: &mut u64,
) -> Result<(Vec<Verdict>, Vec<Vec<u8>>), TestCaseError> {
    let first = run_copies(plain, ingress, frames);
    for pass in 0..passes {
        *total += frames.len() as u64;
        let (vp, bp, cp) = if pass == 0 {
            first.clone()
        } else {
            run_copies(plain, ingress, frames)
        };
        let (vc, bc, cc) = run_copies(cached, ingress, frames);
        for i in 0..frames.len() {
            prop_assert_eq!(
                norm_copy(cached, &(vc[i], bc[i].clone())),
                norm_copy(plain, &(vp[i], bp[i].clone())),
                "pass {} frame {}",
                pass,
                i
            );
        }
        let cc: Vec<_> = cc.iter().map(|c| norm_copy(cached, c)).collect();
        let cp: Vec<_> = cp.iter().map(|c| norm_copy(plain, c)).collect();
        prop_assert_eq!(cc, cp, "pass {} copies", pass);
    }
    Ok((first.0, first.1))
}

/// The two logics' dumps agree (flows with their counters, tables,
/// copies), and the cache saw `total` frames.
pub(super) fn same_counters(
    cached: &Flows,
    plain: &Flows,
    total: u64,
) -> Result<(), TestCaseError> {
    let (mut dc, mut dp) = (cached.dump(None), plain.dump(None));
    // Durations differ between the two instances.
    for d in [&mut dc, &mut dp] {
        for f in d["flows"].as_array_mut().into_iter().flatten() {
            f.as_object_mut().map(|o| o.remove("duration"));
        }
    }
    prop_assert_eq!(&dc["flows"], &dp["flows"]);
    prop_assert_eq!(&dc["tables"], &dp["tables"]);
    prop_assert_eq!(&dc["copies"], &dp["copies"]);
    let c = &dc["cache"];
    prop_assert_eq!(
        c["hits"].as_u64().unwrap() + c["misses"].as_u64().unwrap(),
        total,
        "{}",
        c
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn fast_key_extraction_agrees_with_the_general_one(
        frames in crate::testutil::random_frames(),
        ip4 in proptest::collection::vec((any::<[u8; 64]>(), 14usize..=64, any::<u8>()), 1..20),
    ) {
        let more = ip4.into_iter().map(|(mut b, len, proto)| {
            ip4_shape(&mut b, proto);
            b[..len].to_vec()
        });
        for f in frames.into_iter().chain(more) {
            let (general, gm) = key::extract_general_meta(&f, 7);
            prop_assert_eq!(extract(&f, 7), general);
            if let Some((k, m)) = key::extract_fast(&f, 7) {
                prop_assert_eq!(k.widen(), general);
                prop_assert_eq!(m, gm);
                // The meta bits as the rewriting actions see the frame.
                let ttl = ttl_at(&f).map_or(0, |(o, _)| f[o] as u32);
                prop_assert_eq!(m & 0xff, ttl);
                let i = rewrite::ip(&f);
                prop_assert_eq!(m & key::meta::L3 != 0, i.is_some());
                let l4 = i.filter(|i| {
                    matches!(
                        i.proto,
                        key::num::TCP | key::num::UDP | key::num::SCTP | key::num::ICMP | key::num::ICMP6
                    )
                });
                prop_assert_eq!(m & key::meta::L4 != 0, l4.and_then(|i| i.l4).is_some());
            }
        }
    }

    /// The cache (cold, then warm), the classifier alone and the naive
    /// interpreter give the same verdicts, bytes and copies; the cached
    /// and uncached logics the same counters.
    #[test]
    fn the_cache_agrees_with_the_classifier_and_a_linear_scan(
        flows in flow_gens(24),
        pkts in proptest::collection::vec(
            (any::<u16>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
            1..40),
        random in crate::testutil::random_frames(),
    ) {
        let mut refs: Vec<RefFlow> = Vec::new();
        // A third logic for the frames one at a time (the other two's
        // counters are compared).
        let single = build(0);
        let (cached, plain) = cached_and_plain(&flows, |t| {
            assert!(add(&single, t));
            let s = parse(t).unwrap();
            let (table, priority) = (s.table.unwrap_or(0), s.priority.unwrap_or(DEFAULT_PRIORITY));
            // A flow of the same table, match and priority is replaced
            // (the new one counts as installed last).
            refs.retain(|r| !(r.table == table && r.priority == priority && r.key == s.key && r.mask == s.mask));
            refs.push(RefFlow { table, priority, key: s.key, mask: s.mask, actions: s.actions.unwrap(), goto: s.goto });
        })?;
        let mut total = 0u64;
        // Packets by ingress, as batches (a batch has one ingress).
        for ingress in 0..3u16 {
            let mut frames: Vec<Vec<u8>> = pkts.iter().map(packet).filter(|(i, _)| *i == ingress).map(|(_, f)| f).collect();
            if ingress == 0 {
                frames.extend(random.iter().cloned());
            }
            if frames.is_empty() {
                continue;
            }
            agree(&cached, &plain, ingress, &frames, 3, &mut total)?;
            for (i, f) in frames.iter().enumerate() {
                let mut r = f.clone();
                let want = reference(&refs, ingress, &mut r);
                prop_assert_eq!(outcome(&single, ingress, f), want, "frame {}: {:02x?}", i, &frames[i]);
            }
        }
        same_counters(&cached, &plain, total)?;
    }
}

// ------------------------------------------------------------ runs of one flow

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Two frames with equal `Header`s, one of which the straight-line
    /// extractor takes, have equal keys and meta bits, whatever else
    /// differs (here: random bytes anywhere, random lengths).
    #[test]
    fn equal_headers_mean_equal_keys_and_meta(
        base in any::<[u8; 64]>(),
        proto in any::<u8>(),
        len in 14usize..=64,
        edits in proptest::collection::vec((0usize..64, any::<u8>()), 0..4),
        len2 in 14usize..=64,
    ) {
        let mut a = base;
        ip4_shape(&mut a, proto);
        let mut b = a;
        for &(at, x) in &edits {
            b[at] = x;
        }
        let (a, b) = (&a[..len], &b[..len2]);
        // The run loop's compares agree with comparing built headers, at
        // every length (under 38, 38..54, 54 and more).
        if let Some(ha) = Header::of(a) {
            let same = Header::of(b) == Some(ha);
            prop_assert_eq!(ha.matches(b), same);
            prop_assert_eq!(ha.for_run().matches(b), same);
            prop_assert_eq!(ha.for_run_under(&HeaderMask::ALL).matches(b), same);
            prop_assert!(ha.for_run().matches(a));
        }
        let (Some(ha), Some(hb)) = (Header::of(a), Header::of(b)) else {
            prop_assert!(a.len() < 38 || b.len() < 38);
            return Ok(());
        };
        prop_assert!(ha.is_fast());
        let fa = key::extract_fast(a, 3);
        prop_assert!(fa.is_some());
        if ha == hb {
            prop_assert!(hb.is_fast());
            prop_assert_eq!(key::extract_fast(b, 3), fa);
        }
        // The bytes a flow's frames differ in leave the header unchanged.
        let mut c = a.to_vec();
        for i in [16, 17, 18, 19, 24, 25] {
            c[i] ^= 0xa5;
        }
        c[20] ^= 0xe0;
        prop_assert_eq!(Header::of(&c), Some(ha));
    }

    /// Runs of frames of one flow (equal but for the IPv4 identification
    /// and checksum; some with another TTL or length) through the cache
    /// give the verdicts, bytes and counters of the classifier alone.
    #[test]
    fn runs_of_one_flow_agree_with_the_classifier(
        flows in flow_gens(16),
        pkts in proptest::collection::vec(
            ((any::<u16>(), any::<u8>(), any::<u8>(), any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
             1usize..9, any::<u16>(), any::<u8>()),
            1..24),
    ) {
        let (cached, plain) = cached_and_plain(&flows, |_| {})?;
        let mut total = 0u64;
        for ingress in 0..3u16 {
            let mut frames: Vec<Vec<u8>> = Vec::new();
            for (g, rep, id, odd) in &pkts {
                let (i, f) = packet(g);
                if i != ingress {
                    continue;
                }
                for r in 0..*rep {
                    let mut f = f.clone();
                    let ip = if f.len() >= 34 && f[12] == 0x08 { 14 } else { 18 };
                    if f.len() >= ip + 20 {
                        let x = id.wrapping_add(r as u16).to_be_bytes();
                        f[ip + 4..ip + 6].copy_from_slice(&x);
                        f[ip + 10..ip + 12].copy_from_slice(&[x[1], x[0]]);
                        // Per copy (two bits of `odd`): unchanged, another
                        // TTL, or the frame cut inside the UDP header.
                        match (odd >> ((r % 4) * 2)) & 3 {
                            1 => f[ip + 8] = f[ip + 8].wrapping_add(1),
                            2 => f.truncate(f.len().min(40)),
                            3 => f.truncate(f.len().min(38)),
                            _ => {}
                        }
                    }
                    frames.push(f);
                }
            }
            if frames.is_empty() {
                continue;
            }
            agree(&cached, &plain, ingress, &frames, 2, &mut total)?;
        }
        same_counters(&cached, &plain, total)?;
    }
}

/// A random set of key bits in use: per word none, all or random bits.
fn in_use_gen() -> impl Strategy<Value = CKey> {
    proptest::collection::vec((0u8..3, any::<u64>()), key::CWORDS).prop_map(|ws| {
        let mut k = CKey::default();
        for (i, (how, bits)) in ws.into_iter().enumerate() {
            k.0[i] = [0, !0, bits][how as usize];
        }
        k
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    /// Under the header mask of any fields in use, frames with equal
    /// masked headers (one of which the straight-line extractor takes)
    /// have equal keys under those fields and equal meta bits, and the
    /// run loop's compare agrees with comparing masked headers.
    #[test]
    fn equal_masked_headers_mean_equal_masked_keys_and_meta(
        base in any::<[u8; 64]>(),
        proto in any::<u8>(),
        len in 14usize..=64,
        edits in proptest::collection::vec((0usize..64, any::<u8>()), 0..6),
        len2 in 14usize..=64,
        in_use in in_use_gen(),
    ) {
        let mut a = base;
        ip4_shape(&mut a, proto);
        let mut b = a;
        for &(at, x) in &edits {
            b[at] = x;
        }
        let (a, b) = (&a[..len], &b[..len2]);
        let Some(ha) = Header::of(a) else {
            return Ok(());
        };
        let m = HeaderMask::new(&in_use, ha.proto());
        let same = Header::of(b).map(|h| h.and(&m)) == Some(ha.and(&m));
        prop_assert_eq!(ha.for_run_under(&m).matches(b), same);
        prop_assert_eq!(ha.and(&m).for_run_under(&m).matches(b), same);
        prop_assert!(ha.for_run_under(&m).matches(a));
        if same {
            let (ka, ma) = key::extract_fast(a, 3).unwrap();
            let kb = key::extract_fast(b, 3);
            prop_assert!(kb.is_some(), "{:02x?}", b);
            let (kb, mb) = kb.unwrap();
            prop_assert_eq!(ka.and(&in_use), kb.and(&in_use));
            prop_assert_eq!(ma, mb);
        }
        // The full mask is the plain header.
        prop_assert_eq!(ha.and(&HeaderMask::ALL), ha);
    }

    /// Flows interleaved frame by frame that differ in fields some flows
    /// match and others none does (source address, source port, TTL,
    /// TOS), through the cache in batches (entries shared by keys equal
    /// in the fields in use, runs under the header mask, runs carried
    /// across batches) give the verdicts, bytes and counters of the
    /// classifier alone.
    #[test]
    fn interleaved_flows_differing_in_unmatched_fields_agree_with_the_classifier(
        flows in flow_gens(12),
        variants in proptest::collection::vec((any::<u8>(), any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>()), 1..6),
        order in proptest::collection::vec(any::<prop::sample::Index>(), 1..80),
        batch in 1usize..20,
        port in any::<u16>(),
    ) {
        let (cached, plain) = cached_and_plain(&flows, |_| {})?;
        let frames: Vec<Vec<u8>> = variants.iter().map(|&(src, sport, ttl, tos, how)| {
            let mut f = udp_to(port % 4);
            // (Checksums are not checked: a frame is a key here.)
            if how & 1 != 0 {
                // 10.9.{0,1}.1 (some flows' nw_src) or 10.0.0.x.
                if src & 4 != 0 {
                    f[27..30].copy_from_slice(&[9, src % 2, 1]);
                } else {
                    f[29] = src;
                }
            }
            if how & 2 != 0 { f[34..36].copy_from_slice(&sport.to_be_bytes()); }
            if how & 4 != 0 { f[22] = ttl % 4; }
            if how & 8 != 0 { f[15] = tos; }
            if how & 16 != 0 { f[5] = src % 3; }
            f
        }).collect();
        let seq: Vec<Vec<u8>> = order.iter().map(|i| frames[i.index(frames.len())].clone()).collect();
        let mut total = 0u64;
        for chunk in seq.chunks(batch) {
            agree(&cached, &plain, 1, chunk, 1, &mut total)?;
        }
        same_counters(&cached, &plain, total)?;
    }
}

// ------------------------------------------------------------ invalidation

/// Classifies `frame` three times (the last two from the cache) and
/// checks every answer.
fn check(f: &Tf, frame: &[u8], want: Verdict, what: &str) {
    let hits = f.dump(None)["cache"]["hits"].as_u64().unwrap();
    for _ in 0..3 {
        let (v, _) = run(f, 1, &[frame.to_vec()]);
        assert_eq!(v[0], want, "{what}");
    }
    let now = f.dump(None)["cache"]["hits"].as_u64().unwrap();
    assert!(
        now >= hits + 2,
        "{what}: served from the cache ({hits} -> {now})"
    );
}

#[test]
fn every_command_kind_invalidates_the_cache() {
    let f = build(1024);
    let p = udp_to(80);
    let c = |cmd: &str, args: Value| f.command(cmd, &args).unwrap();
    c("add", json!({"flow": "priority=1,udp,actions=output:2"}));
    check(&f, &p, Verdict::Port(2), "first flow");
    // A new flow that outranks the cached one.
    c(
        "add",
        json!({"flow": "priority=5,udp,tp_dst=80,actions=output:3"}),
    );
    check(&f, &p, Verdict::Port(3), "add");
    // The same flow replaced (same match and priority).
    c(
        "add",
        json!({"flow": "priority=5,udp,tp_dst=80,actions=output:4"}),
    );
    check(&f, &p, Verdict::Port(4), "add replacing");
    // Non-strict modify of every udp flow.
    c("modify", json!({"flow": "udp,actions=output:5"}));
    check(&f, &p, Verdict::Port(5), "modify");
    // Strict modify of one flow.
    c(
        "modify",
        json!({"flow": "priority=5,udp,tp_dst=80,actions=output:6", "strict": true}),
    );
    check(&f, &p, Verdict::Port(6), "modify strict");
    // A later table reached through goto, then changed.
    c(
        "modify",
        json!({"flow": "priority=5,udp,tp_dst=80,actions=goto_table:1", "strict": true}),
    );
    check(
        &f,
        &p,
        Verdict::Drop(DropReason::NoMatch),
        "goto to an empty table",
    );
    c("add", json!({"flow": "table=1,actions=output:7"}));
    check(&f, &p, Verdict::Port(7), "add in a later table");
    c("delete", json!({"flow": "table=1"}));
    check(
        &f,
        &p,
        Verdict::Drop(DropReason::NoMatch),
        "delete in a later table",
    );
    // Strict delete: the priority-1 flow takes over.
    c(
        "delete",
        json!({"flow": "priority=5,udp,tp_dst=80", "strict": true}),
    );
    check(&f, &p, Verdict::Port(5), "delete strict");
    // Delete everything.
    c("delete", json!({}));
    check(&f, &p, Verdict::Drop(DropReason::NoMatch), "delete all");
    // A refused command changes nothing (and the cache still serves).
    assert!(f
        .command(
            "add",
            &json!({"flow": "udp,actions=mod_tp_dst:1,output:1,group:99"})
        )
        .is_err());
    check(&f, &p, Verdict::Drop(DropReason::NoMatch), "refused add");
}

#[test]
fn no_stale_result_while_a_worker_classifies_across_swaps() {
    use std::sync::atomic::{AtomicBool, AtomicU16, Ordering};
    let f = Arc::new(build(1024));
    f.command("add", &json!({"flow": "udp,actions=output:1"}))
        .unwrap();
    // The port the installed flow outputs to; a batch classified after a
    // swap that the worker observed must never see an older port.
    let current = Arc::new(AtomicU16::new(1));
    let stop = Arc::new(AtomicBool::new(false));
    let worker = {
        let (f, current, stop) = (f.clone(), current.clone(), stop.clone());
        std::thread::spawn(move || {
            let frames: Vec<Vec<u8>> = (0..32).map(|_| udp_to(80)).collect();
            let mut batches = 0u64;
            while !stop.load(Ordering::Acquire) {
                // Read before classifying: the flow installed then (or a
                // later one) must be what the batch sees.
                let floor = current.load(Ordering::Acquire);
                let (v, _) = run(&f, 1000, &frames);
                for v in v {
                    let Verdict::Port(p) = v else { panic!("{v:?}") };
                    assert!(
                        p >= floor,
                        "stale: port {p} after flow {floor} was installed"
                    );
                }
                batches += 1;
            }
            batches
        })
    };
    for port in 2..300u16 {
        f.command(
            "modify",
            &json!({"flow": format!("udp,actions=output:{port}")}),
        )
        .unwrap();
        current.store(port, Ordering::Release);
        std::thread::yield_now();
    }
    stop.store(true, Ordering::Release);
    let batches = worker.join().unwrap();
    assert!(batches > 0);
    assert!(f.dump(None)["cache"]["hits"].as_u64().unwrap() > 0);
}

#[test]
fn a_bad_cache_size_is_refused() {
    for bad in [json!(3), json!(-1), json!("big"), json!(1u64 << 21)] {
        let e = Flows::from_config(&json!({ "cache": bad }))
            .err()
            .expect("refused");
        assert!(e.contains("\"cache\""), "{e}");
    }
    assert_eq!(build(0).dump(None)["cache"]["entries_per_worker"], 0);
    let d = Flows::from_config(&json!(null)).unwrap().dump(None);
    assert_eq!(d["cache"]["entries_per_worker"], cache::DEFAULT_ENTRIES);
    assert_eq!(d["cache"]["workers_without_cache"], 0);
}

#[test]
fn pipelines_that_cannot_be_cached_still_classify_right() {
    // A lookup after pop_vlan, and a pipeline of more flows than an entry holds.
    let f = build(64);
    for t in [
        "priority=5,dl_vlan=1,actions=strip_vlan,goto_table:1",
        "table=1,priority=5,dl_vlan=2,actions=output:2",
        "table=1,priority=1,actions=output:3",
        "priority=5,udp,tp_dst=9,actions=goto_table:1",
        "table=1,priority=9,udp,tp_dst=9,actions=goto_table:2",
        "table=2,actions=goto_table:3",
        "table=3,actions=goto_table:4",
        "table=4,actions=output:4",
    ] {
        assert!(add(&f, t), "{t}");
    }
    let tagged = |inner: u16| {
        let mut p = udp_to(80);
        p.splice(12..12, [0x81, 0x00, 0x00, 0x01]);
        p.splice(16..16, [0x81, 0x00, 0x00, inner as u8]);
        p
    };
    for _ in 0..3 {
        assert_eq!(run(&f, 1, &[tagged(2)]).0[0], Verdict::Port(2));
        assert_eq!(run(&f, 1, &[tagged(3)]).0[0], Verdict::Port(3));
        assert_eq!(run(&f, 1, &[udp_to(9)]).0[0], Verdict::Port(4));
    }
    let d = f.dump(None);
    assert_eq!(d["cache"]["hits"], 0, "{}", d["cache"]);
}

/// Two frames of the same key whose pipelines differ: a TTL that makes
/// `dec_ttl` drop (the rewrite after it is skipped), and an IPv4 header cut
/// short (`mod_nw_dst` cannot rewrite it), each followed by a lookup of the
/// rewritten field. In either order in one batch, each gets its own
/// pipeline (the cache's key holds the TTL and the header bits).
#[test]
fn the_ttl_and_the_headers_rewrites_need_are_part_of_the_cache_key() {
    let f = build(1024);
    for t in [
        "priority=5,ip,actions=dec_ttl,mod_nw_dst:10.0.0.5,goto_table:1",
        "table=1,priority=5,ip,nw_dst=10.0.0.5,actions=output:2",
        "table=1,priority=1,actions=output:3",
    ] {
        assert!(add(&f, t), "{t}");
    }
    let mut ttl1 = udp_to(80);
    ttl1[22] = 1;
    let mut ttl2 = udp_to(80);
    ttl2[22] = 2;
    let policy = Verdict::Drop(DropReason::Policy);
    for _ in 0..2 {
        let v = run(&f, 1, &[ttl1.clone(), ttl2.clone(), ttl1.clone()]).0;
        assert_eq!(v, [policy, Verdict::Port(2), policy]);
        let v = run(&f, 1, &[ttl2.clone(), ttl1.clone(), ttl2.clone()]).0;
        assert_eq!(v, [Verdict::Port(2), policy, Verdict::Port(2)]);
    }

    let g = build(1024);
    for t in [
        "priority=5,ip,actions=mod_nw_dst:10.0.0.5,goto_table:1",
        "table=1,priority=5,ip,nw_dst=10.0.0.5,actions=output:2",
        "table=1,priority=1,actions=output:3",
    ] {
        assert!(add(&g, t), "{t}");
    }
    // A whole IPv4 header of all-zero fields, and one cut short: same key.
    let mut whole = udp_to(80);
    whole[15..34].fill(0);
    whole[14] = 0x45;
    whole[34..].fill(0);
    let mut cut = whole.clone();
    cut.truncate(30);
    assert_eq!(extract(&whole, 1), extract(&cut, 1));
    for _ in 0..2 {
        let v = run(&g, 1, &[cut.clone(), whole.clone()]).0;
        assert_eq!(v, [Verdict::Port(3), Verdict::Port(2)]);
        let v = run(&g, 1, &[whole.clone(), cut.clone()]).0;
        assert_eq!(v, [Verdict::Port(2), Verdict::Port(3)]);
    }
    assert!(g.dump(None)["cache"]["hits"].as_u64().unwrap() > 0);
}

/// The n_packets of the flow whose text is `text`.
fn packets_of(f: &Flows, text: &str) -> u64 {
    let d = f.dump(None);
    let flows = d["flows"].as_array().unwrap();
    let e = flows.iter().find(|e| e["flow"] == text);
    e.unwrap_or_else(|| panic!("no flow {text} in {d}"))["n_packets"]
        .as_u64()
        .unwrap()
}

/// A run of one flow that ends a batch goes on in the next batch of the
/// worker without a lookup (cache::Resume), but only for frames of that
/// flow, from the same port, under the same snapshot; its counters are
/// those of the classifier.
#[test]
fn a_run_goes_on_into_the_next_batch_only_while_nothing_changed() {
    let f = build(64);
    let low = "table=0,priority=1,udp,actions=output:2";
    let port3 = "table=0,priority=5,in_port=3,udp,actions=output:4";
    assert!(add(&f, low));
    assert!(add(&f, port3));
    let batch = vec![udp_to(80); 5];
    let all = |p: PortId| vec![Verdict::Port(p); 5];
    // Two batches from port 1: the second starts inside the first's run.
    for _ in 0..2 {
        assert_eq!(run(&f, 1, &batch).0, all(2));
    }
    assert_eq!(packets_of(&f, low), 10);
    // The same frames from port 3 hit another flow.
    assert_eq!(run(&f, 3, &batch).0, all(4));
    assert_eq!(run(&f, 3, &batch).0, all(4));
    assert_eq!(packets_of(&f, port3), 10);
    assert_eq!(run(&f, 1, &batch).0, all(2));
    // A flow-mod between batches: the run does not outlive its snapshot.
    let high = "table=0,priority=9,udp,tp_dst=80,actions=output:3";
    assert!(add(&f, high));
    assert_eq!(run(&f, 1, &batch).0, all(3));
    assert_eq!(run(&f, 1, &batch).0, all(3));
    // A frame of another flow first: the previous batch's run stops at
    // once; the rest start a run of their own.
    let mut mixed = batch.clone();
    mixed[0] = udp_to(81);
    let (v, _) = run(&f, 1, &mixed);
    assert_eq!(v[0], Verdict::Port(2));
    assert_eq!(&v[1..], &all(3)[1..]);
    // ... and a run that stops inside a batch is not carried over.
    let mut tail = batch.clone();
    tail[4] = udp_to(81);
    let (v, _) = run(&f, 1, &tail);
    assert_eq!(&v[..4], &all(3)[..4]);
    assert_eq!(v[4], Verdict::Port(2));
    assert_eq!(run(&f, 1, &[udp_to(81)]).0, vec![Verdict::Port(2)]);
    assert_eq!(packets_of(&f, low), 15 + 3);
    assert_eq!(packets_of(&f, high), 10 + 4 + 4);
    assert_eq!(packets_of(&f, port3), 10);
    let c = &f.dump(None)["cache"];
    let frames = 5 * 9 + 1;
    assert_eq!(
        c["hits"].as_u64().unwrap() + c["misses"].as_u64().unwrap(),
        frames,
        "{c}"
    );
}

// ------------------------------------------------------------ normal

fn mac(n: u8) -> [u8; 6] {
    [2, 0, 0, 0, 0, n]
}

/// A UDP frame from `mac(src)` to `mac(dst)` with the same L3/L4 headers
/// whatever the addresses (what no flow here looks at).
fn to(src: u8, dst: u8) -> Vec<u8> {
    udp4(mac(src), mac(dst), [10, 0, 0, 1], [10, 0, 0, 2], 1000, 53)
}

/// The `normal` action's verdict depends on eth src/dst and the MAC table,
/// which the cache's key (masked by the fields in use: here in_port and
/// the UDP port) does not hold: two MACs behind different ports,
/// interleaved and in runs, each go to their own port, with or without a
/// cache, within a batch and across batches (a run resumed).
#[test]
fn normal_is_never_replayed_from_a_stored_verdict() {
    for cache in [0, 64] {
        let f = build(cache);
        assert!(add(&f, "priority=0,actions=normal"));
        assert!(add(&f, "priority=10,udp,tp_dst=53,actions=normal"));
        // Learn mac 2 behind port 2, mac 3 behind port 3 (to unknown: flood).
        assert_eq!(run(&f, 2, &[to(2, 9)]).0, vec![Verdict::Flood]);
        assert_eq!(run(&f, 3, &[to(3, 9)]).0, vec![Verdict::Flood]);
        let batch = [
            to(1, 2),
            to(1, 3),
            to(1, 2),
            to(1, 3),
            to(1, 2),
            to(1, 2),
            to(1, 2),
            to(1, 3),
            to(1, 3),
            to(1, 3),
        ];
        let want: Vec<Verdict> = batch
            .iter()
            .map(|b| Verdict::Port(b[5] as PortId))
            .collect();
        for _ in 0..3 {
            assert_eq!(run(&f, 1, &batch).0, want, "cache {cache}");
        }
        // Runs across batches: all to 2, then all to 3.
        for d in [2u8, 3, 2, 3] {
            let b = vec![to(1, d); 8];
            assert_eq!(
                run(&f, 1, &b).0,
                vec![Verdict::Port(d as PortId); 8],
                "cache {cache}"
            );
        }
        // Learning goes on under cached entries: mac 1 is now behind port 1,
        // mac 2 moves to port 4, mac 3 sent to from its own port is a hairpin.
        assert_eq!(run(&f, 2, &[to(2, 1)]).0, vec![Verdict::Port(1)]);
        assert_eq!(run(&f, 4, &[to(2, 9)]).0, vec![Verdict::Flood]);
        assert_eq!(
            run(&f, 1, &[to(1, 2), to(1, 3)]).0,
            vec![Verdict::Port(4), Verdict::Port(3)]
        );
        assert_eq!(
            run(&f, 3, &[to(1, 3)]).0,
            vec![Verdict::Drop(DropReason::Hairpin)]
        );
        // Broadcast floods.
        let bcast = udp4(mac(1), [0xff; 6], [10, 0, 0, 1], [10, 0, 0, 2], 1000, 53);
        assert_eq!(run(&f, 1, &[bcast]).0, vec![Verdict::Flood]);
        if cache > 0 {
            let hits = f.dump(None)["cache"]["hits"].as_u64().unwrap();
            assert!(hits > 0, "the cache served the normal flows");
        }
    }
}

/// The same for `normal` with a mirror output (`output:7,normal`, a group
/// per learned port) and per VLAN: the VLAN id is not in the cache's key
/// here (no flow matches it), yet a MAC learned on VLAN 10 steers VLAN 10
/// frames only, batch after batch, with or without a cache.
#[test]
fn normal_with_a_mirror_and_per_vlan_is_never_replayed() {
    let tag = |vid: u16, f: Vec<u8>| {
        let mut t = f[..12].to_vec();
        t.extend_from_slice(&[0x81, 0x00]);
        t.extend_from_slice(&vid.to_be_bytes());
        t.extend_from_slice(&f[12..]);
        t
    };
    for cache in [0, 64] {
        let f = build(cache);
        assert!(add(&f, "priority=0,actions=output:7,normal"));
        // mac 2 behind port 2 on VLAN 10, behind port 3 on VLAN 20.
        run(&f, 2, &[tag(10, to(2, 9))]);
        run(&f, 3, &[tag(20, to(2, 9))]);
        let batch = [
            tag(10, to(1, 2)),
            tag(20, to(1, 2)),
            tag(30, to(1, 2)),
            tag(10, to(1, 2)),
            tag(10, to(1, 2)),
            tag(20, to(1, 2)),
        ];
        for _ in 0..3 {
            let got: Vec<Option<Vec<PortId>>> = run(&f, 1, &batch)
                .0
                .into_iter()
                .map(|v| match v {
                    Verdict::Group(g) => Some(f.group_members(g).to_vec()),
                    Verdict::Flood => None,
                    other => panic!("{other:?}"),
                })
                .collect();
            assert_eq!(
                got,
                vec![
                    Some(vec![2, 7]),
                    Some(vec![3, 7]),
                    None,
                    Some(vec![2, 7]),
                    Some(vec![2, 7]),
                    Some(vec![3, 7]),
                ],
                "cache {cache}"
            );
        }
        if cache > 0 {
            let hits = f.dump(None)["cache"]["hits"].as_u64().unwrap();
            assert!(hits > 0, "the cache served the normal flow");
        }
    }
}

// ------------------------------------------------------------ worker states

/// Two workers' states of one logic, used in turn: each keeps its own
/// entries (a frame one worker cached is a miss for the other), and a
/// state of another type is no cache at all (same verdicts, no counts).
#[test]
fn each_worker_state_keeps_its_own_cache() {
    use crate::testutil::Batch;
    let f = build(64);
    assert!(add(&f, "udp,tp_dst=80,actions=output:2"));
    assert!(add(&f, "udp,tp_dst=81,actions=output:3"));
    let mut a = f.worker_state().unwrap();
    let mut b = f.worker_state().unwrap();
    let stats = || {
        let c = &f.dump(None)["cache"];
        (c["hits"].as_u64().unwrap(), c["misses"].as_u64().unwrap())
    };
    let go = |st: &mut WorkerState, frame: Vec<u8>, want: u16, hit: bool| {
        let (h0, m0) = stats();
        let v = Batch::new(vec![frame]).classify_with(&*f, Some(&mut **st), 1, 0);
        assert_eq!(v, vec![Verdict::Port(want)]);
        let (h1, m1) = stats();
        assert_eq!((h1 - h0, m1 - m0), if hit { (1, 0) } else { (0, 1) });
    };
    go(&mut a, udp_to(80), 2, false);
    go(&mut b, udp_to(81), 3, false);
    go(&mut a, udp_to(80), 2, true);
    go(&mut b, udp_to(81), 3, true);
    go(&mut b, udp_to(80), 2, false);
    go(&mut a, udp_to(81), 3, false);
    go(&mut a, udp_to(80), 2, true);
    go(&mut b, udp_to(80), 2, true);
    // A state that is not this logic's: classified without a cache.
    let mut other: WorkerState = Box::new(7u32);
    let before = stats();
    let v = Batch::new(vec![udp_to(81)]).classify_with(&*f, Some(&mut *other), 1, 0);
    assert_eq!(v, vec![Verdict::Port(3)]);
    assert_eq!(stats(), before);
    // No cache configured: no state.
    assert!(build(0).worker_state().is_none());
}

#[test]
fn every_snapshot_holds_its_flows_in_its_arena_across_replays() {
    // Adds, replacements, modifies and deletes, one command at a time (so
    // that the spare is replayed each time) and in bundles; slots freed and
    // taken again within one command. After each: the published snapshot's
    // arena and the spare's hold exactly their flows at their slots.
    let f = build(64);
    let check = |what: &str| {
        f.snap.load().check_arena();
        if let Some(s) = &f.writer.lock().unwrap().spare {
            s.check_arena();
        }
        let _ = what;
    };
    for i in 0..20u16 {
        assert!(add(
            &f,
            &format!("priority={},udp,tp_dst={i},actions=output:1", 10 + i)
        ));
        check("add");
    }
    // Replacement (same match and priority): the same slot.
    add(&f, "priority=10,udp,tp_dst=0,actions=output:2");
    check("replace");
    f.command("modify", &json!({"flow": "udp,actions=output:3"}))
        .unwrap();
    check("modify");
    for i in (0..20u16).step_by(3) {
        f.command(
            "delete",
            &json!({"flow": format!("udp,tp_dst={i}"), "strict": false}),
        )
        .unwrap();
        check("delete");
    }
    // Freed slots taken again, several flows in one command.
    let texts: Vec<String> = (100..110u16)
        .map(|i| format!("priority=5,tcp,tp_dst={i},actions=output:4"))
        .collect();
    f.command("add", &json!({"flows": texts})).unwrap();
    check("bundle");
    f.command("delete", &json!({})).unwrap();
    check("delete all");
    assert!(add(&f, "priority=1,actions=output:5"));
    check("after all");
    // And the cache still serves: the frame goes where the one flow says.
    let (v, _) = run(&f, 0, &[udp_to(7)]);
    assert_eq!(v, vec![Verdict::Port(5)]);
}
