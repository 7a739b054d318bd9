//! Actions as the data path runs them: compiling a flow's action list
//! ([`Writer::compile`]: outputs into groups, OpenFlow groups into their
//! buckets, `write_actions` into action-set slots), and what running them
//! asks of the logic (`normal` mixed with outputs, packet-ins, the ports'
//! liveness). exec.rs runs them, rewrite.rs changes the headers.

use std::sync::atomic::Ordering::Relaxed;
use std::sync::OnceLock;

use openflow::{et, OfpError};

use super::{
    exec, meters, pktin, text, Action, DropReason, Flows, Key, PortId, Rule, Verdict, Writer,
    MAX_GROUPS, MIXED_PORTS, MIXED_SAME,
};

impl Writer {
    /// The group of output set `ports` (sorted, deduplicated), made if new.
    fn group_of(
        &mut self,
        groups: &[OnceLock<Box<[PortId]>>],
        ports: Vec<PortId>,
    ) -> Result<u16, String> {
        if let Some(&g) = self.groups.get(ports.as_slice()) {
            return Ok(g);
        }
        let g = self.groups.len();
        if g >= MAX_GROUPS {
            return Err(format!("more than {MAX_GROUPS} distinct sets of outputs"));
        }
        let _ = groups[g].set(ports.clone().into_boxed_slice());
        self.groups.insert(ports.into_boxed_slice(), g as u16);
        Ok(g as u16)
    }

    /// Actions as run by `classify` (exec.rs), for a flow with `goto`
    /// (or a group bucket: None), the meter table being `meters`:
    ///
    /// - outputs not separated by a header change (a segment) become one
    ///   output: the flood if one floods, else a port or a group of the
    ///   logic of their ports (several outputs to one port: one copy);
    ///   `normal` with outputs of its segment (`output:3,NORMAL`) becomes
    ///   the outputs' group followed by `normal`, and the group gets a
    ///   table in `mixed` of the group of its ports plus each port below
    ///   [`MIXED_PORTS`] (filled here, read by the workers: `Flows::mix`);
    /// - `group:N` becomes its buckets: the outputs of those that only
    ///   output join the segment, a bucket with header changes becomes a
    ///   `Bucket` run on a copy of the frame, a SELECT group a `Select`
    ///   block of its buckets, a fast-failover group a `Failover` block;
    /// - `meter:N` becomes the meter's slot;
    /// - without `goto`, header changes after the last output go to
    ///   `tail` (only an action set, which runs after them, sees them);
    /// - `clear_actions` stays; `write_actions(...)` becomes a `Write` of
    ///   each slot of the action set it writes (exec.rs, `set_slot`; the
    ///   last written of a slot wins), followed by the slot's actions
    ///   (a group compiled as above).
    pub(super) fn compile(
        &mut self,
        groups: &[OnceLock<Box<[PortId]>>],
        mixed: &[OnceLock<Box<[u16]>>],
        meters: &meters::Table,
        acts: &[Action],
        goto: Option<u8>,
    ) -> Result<Compiled, Refused> {
        // The apply-actions (with the meter), then the instructions that
        // deal with the action set (and write_metadata after them).
        let split = acts
            .iter()
            .position(|a| matches!(a, Action::ClearActions | Action::WriteActions(_)))
            .unwrap_or(acts.len());
        let mut out = self.compile_list(groups, mixed, meters, &acts[..split], false)?;
        let mut tail = Vec::new();
        if goto.is_none() {
            let keep = out.len() - out.iter().rev().take_while(|a| a.is_rewrite()).count();
            tail = out.split_off(keep);
        }
        let mut i = split;
        while i < acts.len() {
            let a = acts[i];
            i += 1;
            match a {
                Action::WriteActions(n) => {
                    let end = (i + n as usize).min(acts.len());
                    self.compile_write(groups, mixed, meters, &acts[i..end], &mut out)?;
                    i = end;
                }
                _ => out.push(a),
            }
        }
        Ok(Compiled {
            actions: out.into_boxed_slice(),
            tail: tail.into_boxed_slice(),
        })
    }

    /// The `Write`s of the actions a `write_actions(...)` writes.
    fn compile_write(
        &mut self,
        groups: &[OnceLock<Box<[PortId]>>],
        mixed: &[OnceLock<Box<[u16]>>],
        meters: &meters::Table,
        written: &[Action],
        out: &mut Vec<Action>,
    ) -> Result<(), Refused> {
        let mut by_slot: Vec<(u8, Action)> = Vec::with_capacity(written.len());
        for &a in written {
            let slot = exec::set_slot(&a).ok_or_else(|| Refused {
                text: format!(
                    "action {} cannot be written to the action set",
                    text::format_actions(&[a], None)
                ),
                of: OfpError::new(et::BAD_ACTION, openflow::bac::UNSUPPORTED_ORDER),
            })?;
            by_slot.retain(|(s, _)| *s != slot);
            by_slot.push((slot, a));
        }
        by_slot.sort_by_key(|(s, _)| *s);
        for (slot, a) in by_slot {
            let body = match a {
                Action::OfGroup(_) => self.compile_list(groups, mixed, meters, &[a], true)?,
                _ => vec![a],
            };
            out.push(Action::Write {
                slot,
                len: body.len() as u16,
            });
            out.extend(body);
        }
        Ok(())
    }

    fn compile_list(
        &mut self,
        groups: &[OnceLock<Box<[PortId]>>],
        mixed: &[OnceLock<Box<[u16]>>],
        meters: &meters::Table,
        acts: &[Action],
        trim: bool,
    ) -> Result<Vec<Action>, Refused> {
        let mut out: Vec<Action> = Vec::with_capacity(acts.len());
        let mut seg = Segment::default();
        for &a in acts {
            match a {
                Action::Output(p) => seg.ports.push(p),
                Action::Flood | Action::All => seg.flood = Some(a),
                Action::Normal => seg.normal = true,
                Action::InPort => seg.in_port = true,
                Action::Meter(id) => {
                    let slot = meters.slot(id).ok_or_else(|| Refused {
                        text: format!("meter {id} does not exist"),
                        of: OfpError::new(et::METER_MOD_FAILED, openflow::mmfc::UNKNOWN_METER),
                    })?;
                    out.push(Action::Meter(slot));
                }
                Action::OfGroup(g) => {
                    let grp = self.of_groups.get(&g).ok_or_else(|| Refused {
                        text: format!("group {g} does not exist"),
                        of: OfpError::new(et::BAD_ACTION, openflow::bac::BAD_OUT_GROUP),
                    })?;
                    // SELECT and fast failover: one bucket per packet.
                    let (select, buckets) = (
                        grp.is_select() || grp.is_ff(),
                        grp.compiled_buckets().to_vec(),
                    );
                    if grp.is_ff() {
                        out.push(Action::Failover(buckets.len() as u16));
                    } else if select {
                        out.push(Action::Select(buckets.len() as u16));
                    }
                    for b in buckets {
                        let outputs_only = b.acts.iter().all(|a| {
                            matches!(
                                a,
                                Action::Output(_) | Action::InPort | Action::Flood | Action::All
                            )
                        });
                        if outputs_only && !select {
                            for &x in &b.acts {
                                match x {
                                    Action::Output(p) => seg.ports.push(p),
                                    Action::InPort => seg.in_port = true,
                                    _ => seg.flood = Some(x),
                                }
                            }
                            continue;
                        }
                        let body = self.compile_list(groups, mixed, meters, &b.acts, true)?;
                        if select {
                            out.push(Action::SelBucket {
                                weight: b.weight,
                                watch: b.watch,
                                len: body.len() as u16,
                                copy: !outputs_only,
                            });
                        } else {
                            out.push(Action::Bucket(body.len() as u16));
                        }
                        out.extend(body);
                    }
                }
                // Not header changes: the segment goes on.
                Action::Controller(_) | Action::WriteMetadata(..) | Action::SetTunnelId(_) => {
                    out.push(a)
                }
                _ => {
                    self.flush(groups, mixed, &mut seg, &mut out)?;
                    out.push(a);
                }
            }
        }
        self.flush(groups, mixed, &mut seg, &mut out)?;
        if trim {
            while out.last().is_some_and(|a| a.is_rewrite()) {
                out.pop();
            }
        }
        Ok(out)
    }

    /// The outputs of a segment as one output (see [`Writer::compile`]).
    fn flush(
        &mut self,
        groups: &[OnceLock<Box<[PortId]>>],
        mixed: &[OnceLock<Box<[u16]>>],
        seg: &mut Segment,
        out: &mut Vec<Action>,
    ) -> Result<(), Refused> {
        let seg = std::mem::take(seg);
        let full = |e: String| Refused {
            text: e,
            of: OfpError::new(et::FLOW_MOD_FAILED, openflow::fmfc::TABLE_FULL),
        };
        if let Some(f) = seg.flood {
            // Flood reaches every port the outputs name (and normal's,
            // which still learns: it runs after the flood).
            out.push(f);
            if seg.normal {
                out.push(Action::Normal);
            }
        } else {
            let mut ports = seg.ports;
            ports.sort_unstable();
            ports.dedup();
            match (ports.len(), seg.normal) {
                (0, false) => {}
                (0, true) => out.push(Action::Normal),
                (1, false) => out.push(Action::Output(ports[0])),
                (_, normal) => {
                    let g = self.group_of(groups, ports.clone()).map_err(full)?;
                    if normal && mixed[g as usize].get().is_none() {
                        let mut t = vec![MIXED_SAME; MIXED_PORTS];
                        for (p, slot) in t.iter_mut().enumerate() {
                            let p = p as PortId;
                            if ports.binary_search(&p).is_err() {
                                let mut with = ports.clone();
                                with.push(p);
                                with.sort_unstable();
                                *slot = self.group_of(groups, with).map_err(full)?;
                            }
                        }
                        let _ = mixed[g as usize].set(t.into_boxed_slice());
                    }
                    out.push(Action::Group(g));
                    if normal {
                        out.push(Action::Normal);
                    }
                }
            }
        }
        if seg.in_port {
            // A hairpin: counted as one when nothing else sends the frame.
            out.push(Action::InPort);
        }
        Ok(())
    }
}

/// The outputs of one segment of an action list (no header change
/// between them), being compiled.
#[derive(Default)]
struct Segment {
    ports: Vec<PortId>,
    flood: Option<Action>,
    normal: bool,
    in_port: bool,
}

/// A flow's compiled actions ([`Writer::compile`]).
#[derive(Clone, Debug, Default)]
pub(in crate::flows) struct Compiled {
    /// What runs (`Rule::actions`).
    pub actions: Box<[Action]>,
    /// What runs only before an action set (`Rule::tail`).
    pub tail: Box<[Action]>,
}

/// Why a flow's (or group's) actions cannot be compiled: the text
/// syntax's sentence and the OpenFlow error.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(in crate::flows) struct Refused {
    pub text: String,
    pub of: OfpError,
}

impl Flows {
    /// The verdict of outputs `prev` and then `normal`'s `n` in one list:
    /// None if no verdict holds both (`prev` a single port from an earlier
    /// table, or `n` a port beyond [`MIXED_PORTS`]).
    #[inline]
    pub(super) fn mix(&self, prev: Verdict, n: Verdict) -> Option<Verdict> {
        match (prev, n) {
            (Verdict::Flood, _) => Some(Verdict::Flood),
            (Verdict::Group(g), n) => {
                let t = self.mixed.get(g as usize)?.get()?;
                match n {
                    Verdict::Flood => Some(Verdict::Flood),
                    Verdict::Port(p) => match *t.get(p as usize)? {
                        MIXED_SAME => Some(Verdict::Group(g)),
                        h => Some(Verdict::Group(h)),
                    },
                    // Hairpin (learned on the ingress), runt: the outputs.
                    _ => Some(prev),
                }
            }
            _ => None,
        }
    }

    /// The `normal` action for a packet-out (control path): learns the
    /// source on `ingress` (None: sent by the controller, nothing learned,
    /// as OVS's `OFPP_CONTROLLER` in_port) and returns where the
    /// destination goes, at the data path's latest second.
    pub fn normal_packet_out(&self, frame: &[u8], ingress: Option<PortId>) -> Verdict {
        match ingress {
            Some(i) => self.normal.learn_now(frame, i),
            None => self.normal.peek(frame, PortId::MAX),
        }
    }

    /// Queues a packet-in for `r`'s `controller` action (data path).
    #[inline]
    pub(super) fn packet_in(
        &self,
        r: &Rule,
        frame: &[u8],
        ingress: PortId,
        max_len: u16,
    ) -> DropReason {
        // The table-miss flow (priority 0, matching everything) reports
        // OFPR_NO_MATCH, any other flow OFPR_ACTION (OpenFlow 1.3, 6.4).
        let reason = if r.priority == 0 && r.mask == Key::default() {
            pktin::REASON_NO_MATCH
        } else {
            pktin::REASON_ACTION
        };
        let meta = fabric::PuntMeta {
            ingress,
            reason,
            tag: r.table,
            cookie: r.cookie,
        };
        let cut = if max_len == pktin::NO_BUFFER {
            usize::MAX
        } else {
            max_len as usize
        };
        self.punt.push(meta, cut, frame)
    }
}

impl Flows {
    /// Tells the logic whether port `port`'s link is up (SELECT groups
    /// choose among the buckets whose watch port is live, fast-failover
    /// groups take the first of them); all are until told otherwise.
    pub fn set_port_live(&self, port: PortId, up: bool) {
        let w = &self.live[port as usize / 64];
        let bit = 1u64 << (port % 64);
        if up {
            w.fetch_or(bit, Relaxed);
        } else {
            w.fetch_and(!bit, Relaxed);
        }
    }

    /// Whether `port` (a bucket's watch port; `u16::MAX`: none) is live.
    #[inline]
    pub(super) fn live(&self, port: u16) -> bool {
        port == u16::MAX || self.live[port as usize / 64].load(Relaxed) & (1 << (port % 64)) != 0
    }
}
