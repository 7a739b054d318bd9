//! Running a flow's actions on one packet: outputs, header changes,
//! registers, meters and group buckets, in order, with OpenFlow 1.3's
//! semantics (5.10, 5.12): each output sends the packet as modified so
//! far, whatever follows (more outputs, header changes, later tables).
//!
//! The fabric forwards one buffer per frame, copied once per destination
//! in its second pass (mSwitch, "Switching Fabric" §3.3), so outputs of a
//! frame that are not separated by a header change share the frame itself
//! (one verdict: a port, a group of ports made when the flow was
//! installed, or the flood), as before. Only when a header change follows
//! an output that is still waiting for the frame (`Exec::out`) is the
//! frame, as it is then, copied into the batch's scratch memory as one
//! more frame of the batch with that output's verdict
//! ([`fabric::PktMut::copy_out`]); the change then applies to the frame,
//! which goes on to the outputs after it. A pipeline that ends without an
//! output after its last copy takes that copy back as the frame itself
//! ([`fabric::PktMut::take_back_copy`]): every received frame has exactly
//! one verdict, and each further copy is counted (`copies` in `dump`).
//! A list without such an order costs one test per header change (is an
//! output waiting?) and nothing else.
//!
//! Group buckets that change headers run on a copy of the frame each
//! (`Action::Bucket`), buckets that only output add their outputs to the
//! frame's; a SELECT group runs one bucket, chosen by a hash of the
//! frame's addresses and ports among the live buckets, in proportion to
//! their weights (`Action::Select`).

use std::mem::MaybeUninit;

use super::key::{self, Field, Key};
use super::rewrite as rw;
use super::{meters, Action, Flows, Rule, Snapshot};
use crate::{DropReason, PktMut, PortId, Verdict};

/// The clock the actions run by.
#[derive(Clone, Copy, Debug)]
pub(super) enum Clock {
    /// The data path's (or a packet-out's): `normal` learns, meters take
    /// tokens, `controller` sends packet-ins.
    Data { now_s: u32, now_ns: u64 },
    /// `trace`: nothing learned, no token taken, no packet-in.
    Trace,
}

/// Slots of the action set (OpenFlow 1.3, 5.10), one per action type and
/// one per set-field's field, numbered in the order the set runs:
/// copy TTL inwards, pops, push-MPLS, push-VLAN, copy TTL outwards,
/// decrements of TTL, set-fields (and the TTL sets), group, output.
pub(super) const SET_SLOTS: usize = 41;
/// The group's slot: with it, the output's is ignored.
const GROUP_SLOT: u8 = 39;
/// The output's slot (to a port, flood, all, in_port, normal, controller).
const OUTPUT_SLOT: u8 = 40;

/// The action set's slot of `a` (None: not an action the set holds:
/// an instruction, or compiled only).
pub(super) fn set_slot(a: &Action) -> Option<u8> {
    Some(match a {
        Action::CopyTtlIn => 0,
        Action::PopVlan => 1,
        Action::PopMpls(_) => 2,
        Action::PushMpls(_) => 3,
        Action::PushVlan(_) => 4,
        Action::CopyTtlOut => 5,
        Action::DecMplsTtl => 6,
        Action::DecTtl => 7,
        Action::SetMplsTtl(_) => 8,
        Action::SetNwTtl(_) => 9,
        Action::SetDlSrc(_) => 10,
        Action::SetDlDst(_) => 11,
        Action::SetEthType(_) => 12,
        Action::SetVlanVid(_) => 13,
        Action::SetVlanPcp(_) => 14,
        Action::SetIpDscp(_) => 15,
        Action::SetIpEcn(_) => 16,
        Action::SetNwProto(_) => 17,
        Action::SetNwSrc(_) => 18,
        Action::SetNwDst(_) => 19,
        Action::SetTpSrc(_) => 20,
        Action::SetTpDst(_) => 21,
        Action::SetIcmpType(_) => 22,
        Action::SetIcmpCode(_) => 23,
        Action::SetArpOp(_) => 24,
        Action::SetArpSpa(_) => 25,
        Action::SetArpTpa(_) => 26,
        Action::SetArpSha(_) => 27,
        Action::SetArpTha(_) => 28,
        Action::SetIp6Src(_) => 29,
        Action::SetIp6Dst(_) => 30,
        Action::SetIp6Flabel(_) => 31,
        Action::SetNdTarget(_) => 32,
        Action::SetNdSll(_) => 33,
        Action::SetNdTll(_) => 34,
        Action::SetMplsLabel(_) => 35,
        Action::SetMplsTc(_) => 36,
        Action::SetMplsBos(_) => 37,
        Action::SetTunnelId(_) => 38,
        Action::OfGroup(_) => GROUP_SLOT,
        Action::Output(_)
        | Action::Flood
        | Action::All
        | Action::InPort
        | Action::Normal
        | Action::Controller(_) => OUTPUT_SLOT,
        Action::Group(_)
        | Action::Meter(_)
        | Action::WriteMetadata(..)
        | Action::Bucket(_)
        | Action::Select(_)
        | Action::Failover(_)
        | Action::SelBucket { .. }
        | Action::ClearActions
        | Action::WriteActions(_)
        | Action::Write { .. } => return None,
    })
}

/// One packet's progress through the actions of the pipeline.
#[derive(Clone, Copy, Debug)]
pub(super) struct Exec {
    /// The output waiting for the frame as it is now: a port, a group or
    /// the flood; or, as a `Drop`, what becomes of the frame if nothing
    /// sends it (a packet-in, an output to the ingress).
    pub out: Option<Verdict>,
    /// Copies of the frame sent so far (each with its own verdict).
    pub copies: u32,
    /// The packet stops here (an invalid TTL, a meter's drop, no room for
    /// a copy): no more actions, no more tables.
    pub stop: Option<DropReason>,
    /// A later lookup would depend on more than the key at table 0 holds
    /// (a push, a pop, a new EtherType, protocol or ICMP type).
    pub reparse: bool,
    /// The outcome depends on headers the cache's key does not hold
    /// (`copy_ttl_in`/`copy_ttl_out`; a TTL decrement after a pop): the
    /// pipeline is not cached.
    pub nocache: bool,
    /// A `pop_mpls` exposed a header (the IPv4 packet or the next label)
    /// whose TTL the key's meta bits do not hold, so whether a later
    /// `dec_ttl` or `dec_mpls_ttl` stops the packet is not a function of
    /// the key.
    pub popped: bool,
    /// The `metadata` register.
    pub metadata: u64,
    /// The `tunnel_id` register.
    pub tunnel: u64,
    /// L4 ports (source, destination) a `set_field` gave a frame that
    /// holds no such header to write (a truncated one): the frame is left
    /// as it is and the key keeps the value for later tables, as Open
    /// vSwitch's flow does.
    pub tp: [Option<u16>; 2],
    /// The action set: a bit per slot written ([`set_slot`]).
    pub set: u64,
    /// Per slot whose bit `set` has: its `Action::Write`, followed by the
    /// entry's actions, in a flow of the snapshot the pipeline runs in
    /// (which outlives the packet's pass); the others are not initialised.
    slots: [MaybeUninit<*const Action>; SET_SLOTS],
}

impl Default for Exec {
    #[inline(always)]
    fn default() -> Exec {
        Exec {
            out: None,
            copies: 0,
            stop: None,
            reparse: false,
            nocache: false,
            popped: false,
            metadata: 0,
            tunnel: 0,
            tp: [None; 2],
            set: 0,
            slots: [MaybeUninit::uninit(); SET_SLOTS],
        }
    }
}

/// What a flow's actions come to when they send the frame, unchanged, to
/// one place (or nowhere) and end the pipeline (no `goto_table`): known
/// when the flow is installed, so that the classifier's pipeline gives a
/// packet that reaches such a flow with no output waiting (`Exec::out`,
/// the common forwarding flow `actions=output:N`) its verdict without
/// running the actions ([`Flows::run`] and [`Flows::finish`] would give
/// the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Plain {
    /// Anything else: the actions run.
    No,
    /// `output:N` alone: `Port(N)`, or a hairpin from port N.
    Port(PortId),
    /// The same verdict from every ingress: one group of outputs, the
    /// flood, `in_port` (a hairpin), or no action (`Drop(Policy)`).
    Is(Verdict),
}

impl Plain {
    /// Of a flow's compiled actions and its `goto_table`.
    pub(super) fn of(acts: &[Action], goto: Option<u8>) -> Plain {
        if goto.is_some() {
            return Plain::No;
        }
        match *acts {
            [] => Plain::Is(Verdict::Drop(DropReason::Policy)),
            [Action::Output(p)] => Plain::Port(p),
            [Action::Flood | Action::All] => Plain::Is(Verdict::Flood),
            [Action::Group(g)] => Plain::Is(Verdict::Group(g)),
            [Action::InPort] => Plain::Is(Verdict::Drop(DropReason::Hairpin)),
            _ => Plain::No,
        }
    }

    /// The verdict of a packet from `ingress` that reaches the flow with
    /// nothing output yet (`Exec` as new), and whether it is an output;
    /// None: the actions must run.
    #[inline(always)]
    pub(super) fn verdict(self, ingress: PortId) -> Option<(Verdict, bool)> {
        match self {
            Plain::No => None,
            Plain::Port(p) if p == ingress => Some((Verdict::Drop(DropReason::Hairpin), true)),
            Plain::Port(p) => Some((Verdict::Port(p), true)),
            Plain::Is(v) => Some((v, v != Verdict::Drop(DropReason::Policy))),
        }
    }
}

/// Whether a verdict sends the frame somewhere.
#[inline(always)]
fn real(v: Verdict) -> bool {
    !matches!(v, Verdict::Drop(_))
}

impl Exec {
    /// After a rewrite of port `i` (0 source, 1 destination) to `v`: the
    /// key keeps `v` where the frame holds no header to write it into
    /// ([`Exec::tp`]), and forgets it once the frame holds the value.
    #[inline]
    fn set_tp(&mut self, i: usize, done: rw::TpSet, v: u16) {
        match done {
            rw::TpSet::Written => self.tp[i] = None,
            rw::TpSet::Truncated => self.tp[i] = Some(v),
            rw::TpSet::Ignored => {}
        }
    }

    /// The frame goes to `o` as it is now.
    #[inline(always)]
    fn emit(&mut self, p: &mut PktMut<'_>, o: Verdict) {
        match self.out {
            Some(prev) if real(prev) => {
                if prev == o || !real(o) {
                    return;
                }
                // Two outputs of the same frame in different action lists
                // (or tables): the first gets a copy.
                if !p.copy_out(prev) {
                    self.no_room();
                    return;
                }
                self.copies += 1;
                self.out = Some(o);
            }
            // A packet-in or a hairpin does not replace an earlier one.
            Some(_) if !real(o) => {}
            _ => self.out = Some(o),
        }
    }

    /// A header change is next: the output waiting for the frame gets a
    /// copy of it as it is now. False if there was no room (the packet
    /// stops).
    #[inline(always)]
    fn before_change(&mut self, p: &mut PktMut<'_>) -> bool {
        if let Some(prev) = self.out {
            if real(prev) {
                if !p.copy_out(prev) {
                    self.no_room();
                    return false;
                }
                self.copies += 1;
                self.out = None;
            }
        }
        true
    }

    #[inline]
    fn no_room(&mut self) {
        self.out = None;
        self.stop = Some(DropReason::NoRoom);
    }

    /// The copy's verdict at the end of a bucket run on a copy: its
    /// output, or its last copy taken back; None: it goes nowhere.
    fn finish_copy(&mut self, c: &mut PktMut<'_>) -> Option<Verdict> {
        match self.out {
            Some(v) if real(v) => Some(v),
            _ if self.stop == Some(DropReason::NoRoom) => None,
            _ if self.copies > 0 => {
                let v = c.take_back_copy();
                self.copies -= v.is_some() as u32;
                v
            }
            _ => None,
        }
    }
}

impl Flows {
    /// The frame's verdict at the end of its pipeline: the output waiting
    /// for it; else its last copy taken back as the frame (the copy's
    /// verdict); else what stopped it, the packet-in or hairpin it went
    /// to, or `end` (a table miss, or no output).
    #[inline]
    pub(super) fn finish(&self, x: &mut Exec, p: &mut PktMut<'_>, end: DropReason) -> Verdict {
        match x.out {
            Some(v) if real(v) => return v,
            _ if x.stop == Some(DropReason::NoRoom) => return Verdict::Drop(DropReason::NoRoom),
            _ => {}
        }
        if x.copies > 0 {
            if let Some(v) = p.take_back_copy() {
                x.copies -= 1;
                return v;
            }
        }
        x.out.unwrap_or(Verdict::Drop(x.stop.unwrap_or(end)))
    }

    /// Runs `acts` (of flow `r`) on `p`; with `KEYED`, keeps `k` in step
    /// with header and register changes (the classifier's path; a cached
    /// pipeline's replay does not look anything up).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub(super) fn run<const KEYED: bool>(
        &self,
        snap: &Snapshot,
        r: &Rule,
        acts: &[Action],
        p: &mut PktMut<'_>,
        ingress: PortId,
        x: &mut Exec,
        k: &mut Key,
        clock: Clock,
    ) {
        let mut i = 0;
        while i < acts.len() {
            let a = acts[i];
            i += 1;
            match a {
                Action::Output(port) if port == ingress => {
                    x.emit(p, Verdict::Drop(DropReason::Hairpin))
                }
                Action::Output(port) => x.emit(p, Verdict::Port(port)),
                Action::Flood | Action::All => x.emit(p, Verdict::Flood),
                Action::Group(g) => x.emit(p, Verdict::Group(g)),
                Action::InPort => x.emit(p, Verdict::Drop(DropReason::Hairpin)),
                Action::Normal => self.normal_action(x, p, ingress, clock),
                Action::Controller(max_len) => {
                    let why = match clock {
                        Clock::Data { .. } => self.packet_in(r, p.data(), ingress, max_len),
                        Clock::Trace => DropReason::ToController,
                    };
                    x.emit(p, Verdict::Drop(why));
                }
                // Compiled into its buckets (never run); a bucket is run
                // by its `Select`.
                Action::OfGroup(_) | Action::SelBucket { .. } => {}
                Action::Meter(slot) => {
                    let Clock::Data { now_ns, .. } = clock else {
                        continue;
                    };
                    match self.meter_state.apply(&snap.meters, slot, p.len(), now_ns) {
                        meters::Outcome::Pass => {}
                        meters::Outcome::Drop => {
                            x.stop = Some(DropReason::Meter);
                            return;
                        }
                        meters::Outcome::Remark(prec) => {
                            if !x.before_change(p) {
                                return;
                            }
                            rw::remark_dscp(p.data_mut(), prec);
                            if KEYED {
                                rekey(p, ingress, x, k);
                            }
                        }
                    }
                }
                Action::Bucket(n) => {
                    let end = (i + n as usize).min(acts.len());
                    self.bucket(snap, r, &acts[i..end], p, ingress, x, clock);
                    i = end;
                }
                Action::Select(n) => {
                    i = self.select(snap, r, acts, i, n, false, p, ingress, x, clock)
                }
                Action::Failover(n) => {
                    i = self.select(snap, r, acts, i, n, true, p, ingress, x, clock)
                }
                Action::WriteMetadata(v, m) => {
                    x.metadata = (x.metadata & !m) | (v & m);
                    if KEYED {
                        k.set(Field::Metadata, x.metadata as u128);
                    }
                }
                Action::SetTunnelId(t) => {
                    x.tunnel = t;
                    if KEYED {
                        k.set(Field::TunnelId, t as u128);
                    }
                }
                Action::ClearActions => x.set = 0,
                Action::Write { slot, len } => {
                    // (Compiled with `slot < SET_SLOTS`: `Writer::compile`.)
                    if let Some(e) = x.slots.get_mut(slot as usize) {
                        *e = MaybeUninit::new(&acts[i - 1] as *const Action);
                        x.set |= 1u64 << slot;
                    }
                    i = (i + len as usize).min(acts.len());
                }
                // (Parsed only: compiled into `Write`s.)
                Action::WriteActions(_) => {}
                _ => {
                    if !x.before_change(p) {
                        return;
                    }
                    change::<KEYED>(a, p, ingress, x, k);
                }
            }
            if x.stop.is_some() {
                return;
            }
        }
    }

    /// The end of the pipeline of a packet whose action set is not
    /// empty, after the actions of `r`, its last flow: the header changes
    /// trimmed from the end of `r`'s actions (`tail`: nothing would have
    /// seen them without a set), then the set, in its order (OpenFlow
    /// 1.3, 5.10): its actions change the frame as the actions of a list
    /// do, each output sends the frame as it is then; with a group, the
    /// output is ignored; with neither, nothing runs (the changes would
    /// go nowhere). Nothing more runs once the packet stops.
    #[allow(clippy::too_many_arguments)]
    #[cold]
    #[inline(never)]
    pub(super) fn run_set(
        &self,
        snap: &Snapshot,
        r: &Rule,
        tail: &[Action],
        p: &mut PktMut<'_>,
        ingress: PortId,
        x: &mut Exec,
        clock: Clock,
    ) {
        let mut set = std::mem::take(&mut x.set);
        // Neither a group nor an output: the changes would go nowhere
        // (Open vSwitch leaves them out too).
        if set & (1u64 << GROUP_SLOT | 1u64 << OUTPUT_SLOT) == 0 {
            return;
        }
        if !tail.is_empty() {
            self.run::<false>(snap, r, tail, p, ingress, x, &mut Key::default(), clock);
        }
        if set & (1u64 << GROUP_SLOT) != 0 {
            set &= !(1u64 << OUTPUT_SLOT);
        }
        while set != 0 && x.stop.is_none() {
            let slot = set.trailing_zeros() as usize;
            set &= set - 1;
            // SAFETY: the bit is set only with the slot (`run`), pointing
            // at an `Action::Write` of a flow of the snapshot the caller
            // holds for the packet's whole pass, followed by `len` actions
            // of the same slice (`Writer::compile`).
            let body = unsafe {
                let w = x.slots[slot].assume_init();
                let Action::Write { len, .. } = *w else {
                    continue;
                };
                std::slice::from_raw_parts(w.add(1), len as usize)
            };
            self.run::<false>(snap, r, body, p, ingress, x, &mut Key::default(), clock);
        }
    }

    /// [`Flows::run`] not inlined, for the group buckets (which it runs).
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn run_bucket(
        &self,
        snap: &Snapshot,
        r: &Rule,
        acts: &[Action],
        p: &mut PktMut<'_>,
        ingress: PortId,
        x: &mut Exec,
        clock: Clock,
    ) {
        self.run::<false>(snap, r, acts, p, ingress, x, &mut Key::default(), clock);
    }

    /// A group bucket with header changes: `body` runs on a copy of the
    /// frame as it is now, which goes where the bucket outputs it (its
    /// own copies too); the frame is not touched.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn bucket(
        &self,
        snap: &Snapshot,
        r: &Rule,
        body: &[Action],
        p: &mut PktMut<'_>,
        ingress: PortId,
        x: &mut Exec,
        clock: Clock,
    ) {
        let regs = (x.metadata, x.tunnel);
        let mut sub = Exec::default();
        let mut kept = false;
        let made = p.copy_with(|c| {
            sub.metadata = regs.0;
            sub.tunnel = regs.1;
            self.run_bucket(snap, r, body, c, ingress, &mut sub, clock);
            let v = sub.finish_copy(c);
            kept = v.is_some();
            v
        });
        if !made || sub.stop == Some(DropReason::NoRoom) {
            x.no_room();
            return;
        }
        x.copies += sub.copies + kept as u32;
    }

    /// A SELECT group of `n` buckets starting at `acts[i]`: runs the one
    /// chosen for the frame (by a hash of its addresses and ports, among
    /// the live buckets, in proportion to their weights; none live: none);
    /// with `first_live`, a fast-failover group: runs the first live
    /// bucket (weights play no part). Returns the index after the group.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn select(
        &self,
        snap: &Snapshot,
        r: &Rule,
        acts: &[Action],
        start: usize,
        n: u16,
        first_live: bool,
        p: &mut PktMut<'_>,
        ingress: PortId,
        x: &mut Exec,
        clock: Clock,
    ) -> usize {
        // The buckets: (index of the bucket, weight if live).
        let mut total = 0u64;
        let mut j = start;
        for _ in 0..n {
            let Some(&Action::SelBucket {
                weight, watch, len, ..
            }) = acts.get(j)
            else {
                break;
            };
            if self.live(watch) {
                total += if first_live { 1 } else { weight as u64 };
            }
            j += 1 + len as usize;
        }
        let end = j.min(acts.len());
        if total == 0 {
            return end;
        }
        let pick = if first_live {
            0
        } else {
            select_hash(p.data()) % total
        };
        let mut sum = 0u64;
        let mut j = start;
        while j < end {
            let Action::SelBucket {
                weight,
                watch,
                len,
                copy,
            } = acts[j]
            else {
                break;
            };
            let body = &acts[j + 1..(j + 1 + len as usize).min(end)];
            if self.live(watch) {
                sum += if first_live { 1 } else { weight as u64 };
                if pick < sum {
                    if copy {
                        self.bucket(snap, r, body, p, ingress, x, clock);
                    } else {
                        // Outputs only: the frame itself goes there too.
                        for a in body {
                            match *a {
                                Action::Output(port) if port != ingress => {
                                    x.emit(p, Verdict::Port(port))
                                }
                                Action::Output(_) | Action::InPort => {
                                    x.emit(p, Verdict::Drop(DropReason::Hairpin))
                                }
                                Action::Flood | Action::All => x.emit(p, Verdict::Flood),
                                Action::Group(g) => x.emit(p, Verdict::Group(g)),
                                _ => {}
                            }
                        }
                    }
                    break;
                }
            }
            j += 1 + len as usize;
        }
        end
    }

    /// The `normal` action: the learning bridge's verdict, with the
    /// outputs of the same list when a group of the logic holds both
    /// (`Flows::mix`), else as one more output.
    #[inline(never)]
    fn normal_action(&self, x: &mut Exec, p: &mut PktMut<'_>, ingress: PortId, clock: Clock) {
        let n = match clock {
            Clock::Data { now_s, .. } => self.normal.learn_and_lookup(p.data(), ingress, now_s),
            Clock::Trace => self.normal.peek(p.data(), ingress),
        };
        if let Some(prev) = x.out.filter(|v| real(*v)) {
            if let Some(v) = self.mix(prev, n) {
                x.out = Some(v);
                return;
            }
        }
        x.emit(p, n);
    }
}

/// The hash a SELECT group chooses its bucket by: the frame's MACs, IP
/// (or ARP) addresses, protocol and L4 ports (not the ingress port).
#[inline]
fn select_hash(b: &[u8]) -> u64 {
    let (k, _) = super::key_meta(b, 0);
    k.hash_with(0x5e1ec7)
}

/// A header change `a` on `p` alone (a packet-out's, on the control
/// path): Err(why) if the packet must be dropped (an invalid TTL, or no
/// room to lengthen it). None of the outputs, meters, registers.
pub(super) fn apply_change(p: &mut PktMut<'_>, a: Action) -> Result<(), DropReason> {
    let mut x = Exec::default();
    change::<false>(a, p, 0, &mut x, &mut Key::default());
    match x.stop {
        Some(why) => Err(why),
        None => Ok(()),
    }
}

/// Ethernet's smallest frame without its FCS.
const MIN_FRAME: usize = 60;

/// Takes the 4 bytes at `at` (a VLAN tag, an MPLS label stack entry) out
/// of the frame, which has at least `at + 4`. A frame of Ethernet's
/// smallest size or more stays at least that long, as it would go on a
/// wire: under 64 bytes, the bytes after `at` move up and the frame ends
/// in zeros (padding) at 60 bytes; otherwise the bytes before `at` move
/// down and the view starts 4 bytes later (no copy of the rest).
#[inline]
fn pop4(p: &mut PktMut<'_>, at: usize) {
    let len = p.len();
    let b = p.data_mut();
    if len < MIN_FRAME || len - 4 >= MIN_FRAME {
        b.copy_within(0..at, 4);
        p.narrow(4, len - 4);
    } else {
        b.copy_within(at + 4..len, at);
        b[len - 4..].fill(0);
        p.narrow(0, MIN_FRAME);
    }
}

/// The key after a header change: extracted again from the frame, with
/// the pipeline's registers.
#[inline]
fn rekey(p: &PktMut<'_>, ingress: PortId, x: &Exec, k: &mut Key) {
    *k = key::extract(p.data(), ingress);
    k.set(Field::Metadata, x.metadata as u128);
    k.set(Field::TunnelId, x.tunnel as u128);
    if x.tp != [None; 2] && matches!(k.get(Field::NwProto) as u8, 6 | 17 | 132) {
        for (f, v) in [(Field::TpSrc, x.tp[0]), (Field::TpDst, x.tp[1])] {
            if let Some(v) = v {
                k.set(f, v as u128);
            }
        }
    }
}

/// A header change (`a` is none of the actions `Flows::run` handles
/// itself), the key kept in step with `KEYED`; stops the packet on an
/// invalid TTL or when a push finds no room.
#[inline(always)]
fn change<const KEYED: bool>(
    a: Action,
    p: &mut PktMut<'_>,
    ingress: PortId,
    x: &mut Exec,
    k: &mut Key,
) {
    let b = p.data_mut();
    match a {
        Action::SetDlSrc(m) => {
            rw::write_mac(b, 6, m);
            if KEYED {
                k.set(Field::DlSrc, m as u128);
            }
            return;
        }
        Action::SetDlDst(m) => {
            rw::write_mac(b, 0, m);
            if KEYED {
                k.set(Field::DlDst, m as u128);
            }
            return;
        }
        Action::DecTtl => {
            x.nocache |= x.popped;
            if !rw::dec_ttl(b) {
                x.stop = Some(DropReason::Policy);
                return;
            }
        }
        Action::DecMplsTtl => {
            x.nocache |= x.popped;
            if !rw::dec_mpls_ttl(b) {
                x.stop = Some(DropReason::Policy);
                return;
            }
        }
        Action::SetNwSrc(v) => rw::set_ip4(b, 12, v),
        Action::SetNwDst(v) => rw::set_ip4(b, 16, v),
        Action::SetTpSrc(v) => x.set_tp(0, rw::set_tp(b, 0, v), v),
        Action::SetTpDst(v) => x.set_tp(1, rw::set_tp(b, 2, v), v),
        Action::SetVlanVid(v) => rw::set_tci(b, 0x0fff, v),
        Action::SetVlanPcp(v) => rw::set_tci(b, 0xe000, (v as u16) << 13),
        Action::SetEthType(t) => {
            if let Some(h) = rw::l2(b) {
                b[h.et_at..h.et_at + 2].copy_from_slice(&t.to_be_bytes());
            }
            x.reparse = true;
        }
        Action::SetIpDscp(d) => rw::set_tos(b, 0xfc, d << 2),
        Action::SetIpEcn(e) => rw::set_tos(b, 0x03, e),
        Action::SetNwProto(v) => {
            rw::set_proto(b, v);
            x.reparse = true;
        }
        Action::SetIcmpType(t) => {
            rw::set_icmp(b, false, t);
            x.reparse = true;
        }
        Action::SetIcmpCode(c) => rw::set_icmp(b, true, c),
        Action::SetArpOp(op) => rw::set_arp_op(b, op),
        Action::SetArpSpa(v) => rw::set_arp_pa(b, 14, v),
        Action::SetArpTpa(v) => rw::set_arp_pa(b, 24, v),
        Action::SetArpSha(m) => rw::set_arp_ha(b, 8, m),
        Action::SetArpTha(m) => rw::set_arp_ha(b, 18, m),
        Action::SetIp6Src(v) => rw::set_ip6(b, 8, &v),
        Action::SetIp6Dst(v) => rw::set_ip6(b, 24, &v),
        Action::SetIp6Flabel(v) => rw::set_flabel(b, v),
        Action::SetNdTarget(v) => rw::set_nd_target(b, &v),
        Action::SetNdSll(m) => rw::set_nd_ll(b, true, m),
        Action::SetNdTll(m) => rw::set_nd_ll(b, false, m),
        Action::SetMplsLabel(l) => rw::set_lse(b, 0xffff_f000, l << 12),
        Action::SetMplsTc(t) => rw::set_lse(b, 0xe00, (t as u32) << 9),
        Action::SetMplsBos(v) => rw::set_lse(b, 0x100, (v as u32) << 8),
        Action::SetMplsTtl(t) => rw::set_lse(b, 0xff, t as u32),
        Action::SetNwTtl(t) => rw::set_nw_ttl(b, t),
        Action::CopyTtlOut => {
            rw::copy_ttl_out(b);
            x.nocache = true;
        }
        Action::CopyTtlIn => {
            rw::copy_ttl_in(b);
            x.nocache = true;
        }
        Action::PushVlan(tpid) => {
            // The key does not tell how many tags the frame had: a lookup
            // after a push is not cached (as after a pop).
            x.reparse = true;
            let tci = rw::push_vlan_tci(b);
            if !p.insert(12, 4) {
                x.no_room();
                return;
            }
            let [t0, t1] = tpid.to_be_bytes();
            let [c0, c1] = tci.to_be_bytes();
            p.data_mut()[12..16].copy_from_slice(&[t0, t1, c0, c1]);
        }
        Action::PopVlan => {
            x.reparse = true;
            if b.len() >= 18
                && wire::ethernet::EtherType::is_tpid(u16::from_be_bytes([b[12], b[13]]))
            {
                pop4(p, 12);
            }
        }
        Action::PushMpls(et) => {
            x.reparse = true;
            let Some(h) = rw::l2(b) else { return };
            let lse = rw::new_lse(b);
            if !p.insert(h.l3, 4) {
                x.no_room();
                return;
            }
            let b = p.data_mut();
            b[h.et_at..h.et_at + 2].copy_from_slice(&et.to_be_bytes());
            b[h.l3..h.l3 + 4].copy_from_slice(&lse.to_be_bytes());
        }
        Action::PopMpls(et) => {
            x.reparse = true;
            x.popped = true;
            let Some(at) = rw::lse(b) else { return };
            b[at - 2..at].copy_from_slice(&et.to_be_bytes());
            pop4(p, at);
        }
        // Not header changes: handled by `Flows::run`.
        Action::Output(_)
        | Action::Flood
        | Action::All
        | Action::InPort
        | Action::Normal
        | Action::Group(_)
        | Action::Controller(_)
        | Action::OfGroup(_)
        | Action::Meter(_)
        | Action::WriteMetadata(..)
        | Action::SetTunnelId(_)
        | Action::Bucket(_)
        | Action::Select(_)
        | Action::Failover(_)
        | Action::SelBucket { .. }
        | Action::ClearActions
        | Action::WriteActions(_)
        | Action::Write { .. } => return,
    }
    if KEYED {
        rekey(p, ingress, x, k);
    }
}
