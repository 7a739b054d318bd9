//! `flows`: OpenFlow-style flow tables programmed with ovs-ofctl's flow
//! syntax (docs/flows.md).
//!
//! Tables `0..=254`. A packet starts in table 0; the flow of highest
//! priority whose match covers it wins (equal priorities: the flow
//! installed first). Its apply-actions run in order, then its `goto_table`
//! (always to a later table) continues the pipeline with the packet as
//! modified so far.
//!
//! Verdicts, per frame (exec.rs runs the actions, OpenFlow 1.3 5.10/5.12):
//! - the first `output:N` of the pipeline: `Port(N)`; `output:N` with N the
//!   ingress: `Drop(Hairpin)` (OpenFlow sends back only with `in_port`);
//! - outputs not separated by a header change share the frame: several
//!   `output:N` in one action list (mirroring) become `Group(g)`, a group
//!   of those ports the logic keeps for the action list (the fabric skips
//!   the ingress); `flood`/`all` in the same list win over the outputs;
//! - an output followed by a header change, or by an output of another
//!   list or table, gets a copy of the frame as it is then (one more frame
//!   of the batch with its own verdict, counted in `dump`'s `copies`); the
//!   frame goes on, changed, to the outputs after;
//! - `flood` / `all`: `Flood` (every port but the ingress);
//! - `normal`: the logic's learning bridge (bridge.rs, one per logic)
//!   learns the source MAC on the ingress port and forwards by the
//!   destination MAC: known: `Port(p)` (`Drop(Hairpin)` if p is the
//!   ingress), unknown or group address: `Flood`. Its verdict depends
//!   on the MAC table and on addresses the cache key may not hold, so the
//!   exact-match cache keeps the flows of such a pipeline but reruns its
//!   actions (and with them the bridge) for every packet, never a stored
//!   verdict or a run;
//! - `in_port`: `Port(ingress)`, which the fabric counts as a `hairpin` drop;
//! - header changes (rewrite.rs: MACs, VLAN and MPLS push/pop/set, IPv4
//!   and IPv6 fields with incremental checksums, ARP and ND fields, TTLs)
//!   apply in place, and later tables match the changed packet; meters
//!   (meters.rs) drop or remark;
//! - `write_actions(...)` / `clear_actions` fill and empty the packet's
//!   action set (OpenFlow 1.3, 5.10), which runs in the spec's order when
//!   the pipeline ends with a flow without `goto_table` (exec.rs,
//!   `Flows::run_set`); a table miss drops it with the packet;
//! - the pipeline ends without an output (`actions=drop`, an empty list, a
//!   `dec_ttl` of a TTL of 1 or 0): `Drop(Policy)`;
//! - no flow matches in a table (table miss) and nothing was output yet:
//!   `Drop(NoMatch)`, counted in that table's `missed`.
//!
//! Frames are never `Malformed` here: headers cut short leave their
//! fields zero (they match only flows that do not look at them, or match 0).
//!
//! Configuration: `{"flows": ["table=0,priority=10,in_port=1,actions=output:2", ...]}`
//! (optional; `null` = empty tables), `"cache": N` (entries per worker of
//! the exact-match cache, a power of two; 0 = none; default 8192),
//! `"normal_table_size"` and `"normal_aging_s"` (the `normal` action's
//! bridge: as the bridge logic's `table_size` and `aging_s`).
//!
//! Commands (commands.rs): `add`, `modify`, `delete`, `dump`, `trace`,
//! `normal_show`
//! (the `normal` action's MAC table), the group
//! table's `add_group`, `mod_group`, `del_groups`, `dump_groups`
//! (groupcmd.rs) and the meter table's `add_meter`, `mod_meter`,
//! `del_meters`, `dump_meters` (metercmd.rs; docs/flows.md).
//!
//! Idle and hard timeouts and flow-removed notices: `expiry.rs` (swept by
//! a control-plane timer, never by the workers). The OpenFlow group table
//! (ALL, INDIRECT, SELECT, FAST_FAILOVER): `groups.rs`; meters: `meters.rs`.
//!
//! Fast path: each table is a tuple-space classifier: one hash table per
//! distinct mask (subtable), keyed by the masked packet key; subtables are
//! searched in order of their best flow (priority, then installation) and
//! the search stops when the best match so far outranks every remaining
//! subtable. All tables form
//! one immutable snapshot; commands build a new one (copying only the
//! subtables they change) and swap it in with arc-swap, so a flow change
//! never waits for or blocks a worker, and a command carrying many flows is
//! one swap. Counters are atomics striped per worker (four stripes, each on
//! its own cache line), shared by successive snapshots of a flow, and added
//! once per batch (per table) or per run of hits on one flow. In front of
//! the classifier, a per-worker exact-match cache (`cache.rs`) maps a
//! packet's key to the flows its pipeline hits, valid for one snapshot;
//! after a hit on the previous packet's entry that only outputs or drops,
//! the following packets with the same [`Header`] (a run of one flow) take
//! its verdict without extraction or probe, counted once per run. On an
//! exact-match miss, the megaflow cache (`megaflow.rs`) keys the pipeline
//! by the bits the lookups consulted (early exit, prefix indices, staged
//! probes), so flows the rules do not tell apart share an entry.

mod actions;
mod cache;
mod commands;
mod exec;
mod expiry;
mod groupcmd;
mod groups;
mod key;
mod megaflow;
mod metercmd;
pub mod meters;
pub mod ofp;
pub mod pktin;
mod prereq;
mod rewrite;
mod submap;
mod text;
mod trace;

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use serde_json::Value;

pub use expiry::{Reason, SWEEP_EVERY};
pub use groups::{MAX_BUCKETS, MAX_OF_GROUPS};
pub use key::{extract, extract_fast, extract_general, CKey, Field, Header, HeaderMask, Key};
pub use text::{parse, Action, FlowSpec, DEFAULT_PRIORITY, MAX_TABLE};

use crate::{CommandError, Ctx, DropReason, Logic, PktMut, Pkts, PortId, Verdict};
use actions::Compiled;
pub use commands::new;
use commands::{Writer, COMMANDS};
use exec::Exec;
#[cfg(test)]
use rewrite::{dec_ttl, set_ip4, set_tp, ttl_at, write_mac};

const STRIPES: usize = 4;
/// Distinct output sets of multi-output action lists, over the logic's life.
pub const MAX_GROUPS: usize = 4096;
/// `normal` in a list with outputs (`output:3,NORMAL`) can add a copy to
/// ports `0..MIXED_PORTS` (OpenFlow ports 1..=64): each output set mixed
/// with `normal` takes this many groups. A port learned beyond is not
/// sent to by the group of such a list: it gets a copy of the frame.
pub const MIXED_PORTS: usize = 64;
/// In a `mixed` table: the port is one of the outputs already.
const MIXED_SAME: u16 = u16::MAX;

#[derive(Default)]
#[repr(align(64))]
struct Stripe {
    a: AtomicU64,
    b: AtomicU64,
}

/// Two counters striped per worker.
#[derive(Default)]
struct Counters([Stripe; STRIPES]);

impl Counters {
    #[inline]
    fn add(&self, worker: u16, a: u64, b: u64) {
        let s = &self.0[worker as usize % STRIPES];
        s.a.fetch_add(a, Relaxed);
        s.b.fetch_add(b, Relaxed);
    }
    fn get(&self) -> (u64, u64) {
        self.0.iter().fold((0, 0), |(a, b), s| {
            (a + s.a.load(Relaxed), b + s.b.load(Relaxed))
        })
    }
}

/// Hits on one flow not yet added to its counters.
#[derive(Default)]
struct Run<'a> {
    stats: Option<&'a Counters>,
    packets: u64,
    bytes: u64,
}

impl<'a> Run<'a> {
    /// `packets` hits of `bytes` bytes in all on the flow of `c`.
    #[inline]
    fn hit(&mut self, c: &'a Counters, packets: u64, bytes: u64, worker: u16) {
        if !self.stats.is_some_and(|s| std::ptr::eq(s, c)) {
            self.flush(worker);
            self.stats = Some(c);
        }
        self.packets += packets;
        self.bytes += bytes;
    }

    #[inline]
    fn flush(&mut self, worker: u16) {
        if let Some(s) = self.stats.take() {
            s.add(worker, self.packets, self.bytes);
        }
        self.packets = 0;
        self.bytes = 0;
    }
}

/// One installed flow.
struct Rule {
    table: u8,
    priority: u16,
    /// Installation order (ties between equal priorities).
    seq: u64,
    cookie: u64,
    key: Key,
    mask: Key,
    /// Compiled (several outputs as one group).
    actions: Box<[Action]>,
    /// Header changes after the last output of a flow that ends the
    /// pipeline, left out of `actions` (nothing would see them): run
    /// only before a non-empty action set (`Flows::run_set`).
    tail: Box<[Action]>,
    /// What `actions` and `goto` come to if they only send the frame as
    /// it is (`Plain::of`; kept with them).
    plain: exec::Plain,
    /// As given, for `dump`.
    shown: Box<[Action]>,
    /// The `max_len` of each output to a port (not the controller's) of
    /// `shown`, in order, as an OpenFlow flow-mod gave them (flow stats
    /// echo them; `ovs-ofctl` sends 0, os-ken and Faucet `OFPCML_MAX`).
    /// Empty: all 0 (the text syntax).
    out_max_len: Box<[u16]>,
    goto: Option<u8>,
    /// packets, bytes.
    stats: Arc<Counters>,
    /// Seconds without a new packet before the flow expires (0: never).
    idle_timeout: u16,
    /// Seconds after installation before it expires (0: never).
    hard_timeout: u16,
    /// `OFPFF_*` flags as given (`SEND_FLOW_REM`: reported when it goes).
    flags: u16,
    /// Installation (durations, hard timeout); a modify keeps it.
    installed: Instant,
}

impl Rule {
    #[inline]
    fn outranks(&self, other: &Rule) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }

    /// The same flow with other actions (modify): match, priority,
    /// cookie, installation, timeouts and flags kept.
    fn with_actions(
        &self,
        c: Compiled,
        shown: Box<[Action]>,
        goto: Option<u8>,
        stats: Arc<Counters>,
    ) -> Rule {
        Rule {
            plain: exec::Plain::of(&c.actions, goto),
            actions: c.actions,
            tail: c.tail,
            shown,
            goto,
            stats,
            out_max_len: self.out_max_len.clone(),
            ..*self
        }
    }

    fn text(&self) -> String {
        let m = text::format_match(&self.key, &self.mask);
        let mut t = String::new();
        if self.idle_timeout != 0 {
            t += &format!(",idle_timeout={}", self.idle_timeout);
        }
        if self.hard_timeout != 0 {
            t += &format!(",hard_timeout={}", self.hard_timeout);
        }
        if self.flags & expiry::SEND_FLOW_REM != 0 {
            t += ",send_flow_rem";
        }
        format!(
            "table={}{t},priority={}{}{},actions={}",
            self.table,
            self.priority,
            if m.is_empty() { "" } else { "," },
            m,
            text::format_actions(&self.shown, self.goto)
        )
    }
}

/// Flows of one mask in one table.
#[derive(Clone)]
struct Subtable {
    mask: Key,
    /// Rank of its best flow: highest priority, then earliest installed.
    max_priority: u16,
    /// Installation number of that flow.
    first_seq: u64,
    /// Masked key → flows with that exact match, best first (narrow for
    /// a mask in the caches' words: submap.rs).
    map: submap::SubMap<Box<[Arc<Rule>]>>,
    /// The staged probe's earlier stages (`key::STAGE_WORDS`: metadata
    /// and L2, then L3 too), those of them that are neither empty nor the
    /// whole mask nor the previous stage: the mask's words below the
    /// stage's end, and the number of buckets of `map` per key under it.
    /// With the megaflow cache (`megaflow.rs`), a probe checks them in
    /// turn and stops at the first with no flow: the megaflow then needs
    /// only the bits up to that stage (a packet whose source address no
    /// flow has never makes the ports part of its megaflow).
    stages: Vec<Stage>,
    /// Ordered values of the prefix-shaped address and port fields of the
    /// mask (`megaflow::Prefix`): checked before the stages, a field whose
    /// value no flow's shares rules the subtable out with a few of its top
    /// bits in the megaflow.
    prefixes: Vec<megaflow::Prefix>,
    /// While a snapshot is being built: its best flow went, so
    /// (`max_priority`, `first_seq`) may rank above every flow left (never
    /// below). [`Snapshot::seal`] recomputes it before the snapshot is
    /// published, once per batch rather than once per removal.
    stale: bool,
}

impl Subtable {
    fn recompute(&mut self) {
        let best = self
            .map
            .values()
            .map(|v| &v[0])
            .reduce(|a, b| if b.outranks(a) { b } else { a });
        (self.max_priority, self.first_seq) = best.map_or((0, 0), |r| (r.priority, r.seq));
        self.stale = false;
    }

    /// `r` is the flow the rank was taken from.
    fn is_best(&self, r: &Rule) -> bool {
        r.priority == self.max_priority && r.seq == self.first_seq
    }
}

/// One earlier stage of a subtable's staged probe.
#[derive(Clone)]
struct Stage {
    mask: Key,
    /// Masked keys (of words below `key::STAGE_WORDS`' ends: all in the
    /// caches' words) → buckets of the subtable under each.
    keys: HashMap<CKey, u32, key::BuildKeyHasher>,
}

impl Subtable {
    /// An empty subtable of `mask`.
    fn new(mask: Key) -> Subtable {
        let mut stages: Vec<Stage> = Vec::new();
        for w in key::STAGE_WORDS {
            let m = mask.words_below(w);
            let prev = stages.last().map_or(Key::default(), |s| s.mask);
            // (Metadata alone, without the MACs, is seldom what tells
            // flows apart: not worth a probe.)
            let macs = m.0[1] | m.0[2] != 0;
            if m != Key::default() && m != mask && m != prev && (w > key::STAGE_WORDS[0] || macs) {
                stages.push(Stage {
                    mask: m,
                    keys: HashMap::default(),
                });
            }
        }
        Subtable {
            mask,
            max_priority: 0,
            first_seq: 0,
            map: submap::SubMap::new(&mask),
            stages,
            prefixes: megaflow::Prefix::for_mask(&mask),
            stale: false,
        }
    }

    /// Sets the flows of masked key `k` (`v` not empty).
    fn put(&mut self, k: Key, v: Box<[Arc<Rule>]>) {
        if self.map.insert(k, v).is_none() {
            stage_add(&mut self.stages, &k);
            megaflow::Prefix::add(&mut self.prefixes, &k);
        }
    }

    /// Removes the flows of masked key `k`.
    fn take(&mut self, k: &Key) -> Option<Box<[Arc<Rule>]>> {
        let v = self.map.remove(k);
        if v.is_some() {
            stage_remove(&mut self.stages, k);
            megaflow::Prefix::remove(&mut self.prefixes, k);
        }
        v
    }
}

/// A bucket of masked key `k` was added: counted in every stage.
fn stage_add(stages: &mut [Stage], k: &Key) {
    for s in stages {
        *s.keys.entry(k.and_narrow(&s.mask)).or_insert(0) += 1;
    }
}

/// The bucket of masked key `k` went.
fn stage_remove(stages: &mut [Stage], k: &Key) {
    for s in stages {
        let sk = k.and_narrow(&s.mask);
        if let Some(n) = s.keys.get_mut(&sk) {
            *n -= 1;
            if *n == 0 {
                s.keys.remove(&sk);
            }
        }
    }
}

#[derive(Clone, Default)]
struct Table {
    /// Ordered by the rank of their best flow (`max_priority` descending,
    /// then `first_seq` ascending): once the best match so far outranks a
    /// subtable's best flow, it outranks everything in it and after it.
    subtables: Vec<Arc<Subtable>>,
}

impl Table {
    /// The best flow matching `k`. With `MF`, adds to `consulted` the
    /// bits of `k` the result depends on: the masks of the subtables
    /// probed (not those after the early exit), for the megaflow cache
    /// (`megaflow.rs`). Always inlined: LLVM's choice for an `#[inline]`
    /// function depends on its callers in the code generation unit, which
    /// the module layout decides (moving cold code out of this file left
    /// the uncached pipeline calling it, +10% instructions).
    #[inline(always)]
    fn lookup<const MF: bool>(&self, k: &Key, consulted: &mut Key) -> Option<&Rule> {
        let mut best: Option<&Rule> = None;
        for st in &self.subtables {
            if let Some(b) = best {
                if b.priority > st.max_priority
                    || (b.priority == st.max_priority && b.seq < st.first_seq)
                {
                    break;
                }
            }
            if MF {
                // A field whose value no flow here shares: the subtable is
                // ruled out by a few top bits of it.
                if let Some(m) = st.prefixes.iter().find_map(|p| p.rules_out(k)) {
                    *consulted = consulted.or(&m);
                    continue;
                }
                // Staged: the first stage with no flow for the key ends
                // the probe, and the megaflow needs the bits up to it.
                let failed = st
                    .stages
                    .iter()
                    .find(|s| !s.keys.contains_key(&k.and_narrow(&s.mask)));
                if let Some(s) = failed {
                    *consulted = consulted.or(&s.mask);
                    continue;
                }
                *consulted = consulted.or(&st.mask);
            }
            if let Some(rs) = st.map.probe(k, &st.mask) {
                let r = &*rs[0];
                if best.is_none_or(|b| r.outranks(b)) {
                    best = Some(r);
                }
            }
        }
        best
    }

    /// The index of the subtable of `mask`, added empty if there is none
    /// (the table is to be sorted after the edit).
    fn subtable_index(&mut self, mask: &Key) -> usize {
        match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                self.subtables.push(Arc::new(Subtable::new(*mask)));
                self.subtables.len() - 1
            }
        }
    }

    fn sort(&mut self) {
        self.subtables.retain(|s| !s.map.is_empty());
        self.subtables
            .sort_by_key(|s| (std::cmp::Reverse(s.max_priority), s.first_seq));
    }

    fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> + '_ {
        self.subtables
            .iter()
            .flat_map(|s| s.map.values().flat_map(|v| v.iter()))
    }

    /// The flow of exactly this match (`key` masked by `mask`) and
    /// priority: one hash lookup, not a scan.
    fn find(&self, key: &Key, mask: &Key, priority: u16) -> Option<&Arc<Rule>> {
        self.subtables
            .iter()
            .find(|s| s.mask == *mask)?
            .map
            .get(key)?
            .iter()
            .find(|r| r.priority == priority)
    }
}

struct Snapshot {
    tables: Vec<Arc<Table>>,
    /// Unique per snapshot (never 0): the exact-match cache serves only
    /// entries filled from the snapshot it sees loaded.
    gen: u64,
    /// Built by [`Flows::begin`]: the generation of the snapshot it was
    /// built from, and the (table, mask, key) of every bucket it changed
    /// or every subtable it changed by a pass over it (`log_full`: too
    /// many), which is what [`Flows::begin`] replays on the spare copy.
    parent: Option<u64>,
    log: Vec<Changed>,
    log_full: bool,
    /// The bits of the key any lookup of this snapshot can depend on: the
    /// union of every subtable's mask, with the ingress port (`output` to
    /// it is a hairpin) and the VLAN TCI (what `mod_vlan_*` find) always
    /// in (set by [`Snapshot::seal`]). The exact-match cache keys its
    /// entries by the packet key under it (a coarse megaflow): packets
    /// that differ only in bits no flow looks at share one entry.
    in_use: Key,
    /// `in_use`'s words the caches key by ([`CKey`]).
    in_use_c: CKey,
    /// Some flow matches an IPv6 neighbour discovery field (target,
    /// link-layer address). Those are beyond the caches' key words: a
    /// solicitation or advertisement (`key::meta::ND`) then goes through
    /// the classifier and is never cached. (The other fields beyond them,
    /// the metadata and tunnel id registers, are 0 when the pipeline
    /// starts and written with constants: functions of the key at table 0,
    /// which the caches hold.)
    nd_in_use: bool,
    /// [`HeaderMask`]s of `in_use` for TCP/UDP/SCTP, ICMP and any other
    /// IP protocol ([`Snapshot::header_mask`]): what a run of one flow
    /// compares.
    header_masks: [HeaderMask; 3],
    /// The meter table's configuration (meters.rs).
    meters: Arc<meters::Table>,
}

/// The [`HeaderMask`]s of [`Snapshot::header_masks`] for the fields
/// `in_use`.
fn header_masks(in_use: &CKey) -> [HeaderMask; 3] {
    [
        HeaderMask::new(in_use, key::num::UDP),
        HeaderMask::new(in_use, key::num::ICMP),
        HeaderMask::new(in_use, 0),
    ]
}

/// What a snapshot being built changed, for the replay on the spare.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Changed {
    /// The flows of (table, mask, key).
    Bucket(u8, Key, Key),
    /// Any flows of the subtable (table, mask): a pass over it.
    Subtable(u8, Key),
}

/// Which flows of a table [`Snapshot::update_within`] looks at (`pick`
/// selects among them).
#[derive(Clone, Copy)]
enum Within<'a> {
    /// Flows whose mask covers this mask and whose key under it is this
    /// key (a non-strict match): subtables of other masks are skipped.
    Covering(&'a Key, &'a Key),
    /// Flows of exactly this match (key under mask; strict): one bucket.
    Exact(&'a Key, &'a Key),
}

/// Longest change log kept in a snapshot (beyond: `log_full`).
const MAX_LOG: usize = 8192;

/// Generations of every snapshot of every `Flows`, in building order.
static GENERATION: AtomicU64 = AtomicU64::new(1);

impl Clone for Snapshot {
    /// The copy a command edits: a new generation, so that swapping it in
    /// invalidates every worker's cached pipelines.
    fn clone(&self) -> Snapshot {
        Snapshot {
            tables: self.tables.clone(),
            gen: GENERATION.fetch_add(1, Relaxed),
            parent: None,
            log: Vec::new(),
            log_full: false,
            in_use: self.in_use,
            in_use_c: self.in_use_c,
            nd_in_use: self.nd_in_use,
            header_masks: self.header_masks,
            meters: self.meters.clone(),
        }
    }
}

impl Snapshot {
    fn empty() -> Snapshot {
        Snapshot {
            tables: (0..=MAX_TABLE)
                .map(|_| Arc::new(Table::default()))
                .collect(),
            gen: GENERATION.fetch_add(1, Relaxed),
            parent: None,
            log: Vec::new(),
            log_full: false,
            in_use: Key::in_use_always(),
            in_use_c: Key::in_use_always().narrow(),
            nd_in_use: false,
            header_masks: header_masks(&Key::in_use_always().narrow()),
            meters: Arc::default(),
        }
    }

    /// A copy that shares no table or subtable with `self` (only the
    /// immutable flows): O(flows), done when there is no spare to replay.
    fn deep_clone(&self) -> Snapshot {
        let tables = self
            .tables
            .iter()
            .map(|t| {
                let mut nt = Table::clone(t);
                for st in nt.subtables.iter_mut() {
                    *st = Arc::new(Subtable::clone(st));
                }
                Arc::new(nt)
            })
            .collect();
        Snapshot {
            tables,
            ..Snapshot::clone(self)
        }
    }

    /// Notes a change for the replay.
    fn logged(&mut self, c: Changed) {
        if self.log.len() >= MAX_LOG {
            self.log_full = true;
        }
        if !self.log_full {
            self.log.push(c);
        }
    }

    /// Makes `self`, which holds what `cur`'s parent held, hold what `cur`
    /// holds: the buckets (and subtables) `cur` changed copied over, and
    /// the changed tables' subtables ranked and ordered as in `cur`.
    /// O(changes); a subtable changed by a pass over it is copied whole,
    /// O(its flows), as that pass cost.
    fn replay(&mut self, cur: &Snapshot) {
        let mut dirty: Vec<u8> = Vec::new();
        for c in &cur.log {
            let (ti, mask) = match c {
                Changed::Bucket(ti, mask, _) | Changed::Subtable(ti, mask) => (*ti, mask),
            };
            let src = cur.tables[ti as usize]
                .subtables
                .iter()
                .find(|s| s.mask == *mask);
            let t = Arc::make_mut(&mut self.tables[ti as usize]);
            match (c, src) {
                (Changed::Bucket(_, _, key), _) => {
                    let bucket = src.and_then(|s| s.map.get(key)).cloned();
                    let i = t.subtable_index(mask);
                    let st = Arc::make_mut(&mut t.subtables[i]);
                    match bucket {
                        Some(b) => st.put(*key, b),
                        None => drop(st.take(key)),
                    };
                }
                (Changed::Subtable(..), Some(s)) => {
                    let i = t.subtable_index(mask);
                    // A copy: the spare shares no subtable with the published.
                    t.subtables[i] = Arc::new(Subtable::clone(s));
                }
                (Changed::Subtable(..), None) => t.subtables.retain(|s| s.mask != *mask),
            }
            if !dirty.contains(&ti) {
                dirty.push(ti);
            }
        }
        for ti in dirty {
            let src = &cur.tables[ti as usize];
            let t = Arc::make_mut(&mut self.tables[ti as usize]);
            for st in t.subtables.iter_mut() {
                if let Some(s) = src.subtables.iter().find(|s| s.mask == st.mask) {
                    if (st.max_priority, st.first_seq) != (s.max_priority, s.first_seq) {
                        let st = Arc::make_mut(st);
                        (st.max_priority, st.first_seq) = (s.max_priority, s.first_seq);
                    }
                }
            }
            // Subtables `cur` no longer has are empty here too.
            t.sort();
        }
    }

    /// Installs `r`, replacing a flow of the same table, match and priority
    /// (whose counters it takes over when `keep_stats`). True if replaced.
    /// Costs one hash update and a sort of the table's subtables, not a
    /// pass over the subtable's flows: the rank is raised at once, and a
    /// replaced best flow leaves it for [`Snapshot::seal`].
    fn insert(&mut self, r: Rule) -> bool {
        let t = Arc::make_mut(&mut self.tables[r.table as usize]);
        let idx = t.subtable_index(&r.mask);
        let st = Arc::make_mut(&mut t.subtables[idx]);
        let mut v: Vec<Arc<Rule>> = st.take(&r.key).map(Vec::from).unwrap_or_default();
        let replaced = v.iter().position(|x| x.priority == r.priority);
        if let Some(i) = replaced {
            let old = v.remove(i);
            if st.is_best(&old) {
                st.stale = true;
            }
        }
        if (st.map.is_empty() && v.is_empty())
            || r.priority > st.max_priority
            || (r.priority == st.max_priority && r.seq < st.first_seq)
        {
            (st.max_priority, st.first_seq) = (r.priority, r.seq);
        }
        let r = Arc::new(r);
        let pos = v.iter().position(|x| r.outranks(x)).unwrap_or(v.len());
        v.insert(pos, r.clone());
        st.put(r.key, v.into_boxed_slice());
        t.sort();
        self.logged(Changed::Bucket(r.table, r.mask, r.key));
        replaced.is_some()
    }

    /// [`Snapshot::update_within`] of the flows `rules` (as installed in
    /// this snapshot or a modify ago), each found by its exact match: one
    /// hash lookup each, not a pass over the tables.
    fn update_rules(
        &mut self,
        rules: &[Arc<Rule>],
        f: &dyn Fn(&Rule) -> Option<Rule>,
        removed: &mut Vec<Arc<Rule>>,
    ) -> usize {
        rules
            .iter()
            .map(|r| {
                self.update_within(
                    r.table..=r.table,
                    Within::Exact(&r.key, &r.mask),
                    &|x| x.seq == r.seq,
                    f,
                    removed,
                )
            })
            .sum()
    }

    /// Removes (`f` returns None; pushed on `removed`) or replaces (Some)
    /// every flow of the tables `tables` that `within` and `pick` select
    /// (`within`: the non-strict and strict matches of modify and delete);
    /// returns how many. Only the flows `within` selects are looked at:
    /// subtables of other masks are skipped, and in the subtable of
    /// exactly that mask only that key's flows are looked at (one hash
    /// lookup, so a modify or delete of one flow costs O(1), not a pass
    /// over the table). Every bucket changed, or subtable passed over, is
    /// logged for the replay. Ranks a removal may lower are left for
    /// [`Snapshot::seal`].
    fn update_within(
        &mut self,
        tables: std::ops::RangeInclusive<u8>,
        within: Within,
        pick: &dyn Fn(&Rule) -> bool,
        f: &dyn Fn(&Rule) -> Option<Rule>,
        removed: &mut Vec<Arc<Rule>>,
    ) -> usize {
        let mut n = 0;
        for ti in tables {
            let t = &mut self.tables[ti as usize];
            // (subtable, Some(the one key to look at) or None: all).
            let hits: Vec<(usize, Option<Key>)> = t
                .subtables
                .iter()
                .enumerate()
                .filter_map(|(i, st)| match within {
                    Within::Exact(k, m) | Within::Covering(k, m) if st.mask == *m => {
                        let k = k.and(m);
                        let v = st.map.get(&k)?;
                        v.iter().any(|r| pick(r)).then_some((i, Some(k)))
                    }
                    Within::Exact(..) => None,
                    Within::Covering(_, m) if !st.mask.covers(m) => None,
                    Within::Covering(..) => st
                        .map
                        .values()
                        .any(|v| v.iter().any(|r| pick(r)))
                        .then_some((i, None)),
                })
                .collect();
            if hits.is_empty() {
                continue;
            }
            let changes: Vec<Changed> = hits
                .iter()
                .map(|&(i, only)| {
                    let mask = t.subtables[i].mask;
                    match only {
                        Some(k) => Changed::Bucket(ti, mask, k),
                        None => Changed::Subtable(ti, mask),
                    }
                })
                .collect();
            for c in changes {
                self.logged(c);
            }
            let t = Arc::make_mut(&mut self.tables[ti as usize]);
            for (i, only) in hits {
                let st = Arc::make_mut(&mut t.subtables[i]);
                let best = (st.max_priority, st.first_seq);
                let mut lost_best = false;
                let mut edit = |v: &[Arc<Rule>]| -> Box<[Arc<Rule>]> {
                    let mut out: Vec<Arc<Rule>> = Vec::with_capacity(v.len());
                    for r in v.iter() {
                        if pick(r) {
                            n += 1;
                            match f(r) {
                                Some(nr) => out.push(Arc::new(nr)),
                                None => {
                                    lost_best |= (r.priority, r.seq) == best;
                                    removed.push(r.clone());
                                }
                            }
                        } else {
                            out.push(r.clone());
                        }
                    }
                    out.into_boxed_slice()
                };
                match only {
                    Some(k) => {
                        let v = st.take(&k).unwrap_or_default();
                        let out = edit(&v);
                        if !out.is_empty() {
                            st.put(k, out);
                        }
                        st.stale |= lost_best;
                    }
                    None => {
                        // A pass over the subtable anyway: rank it now.
                        let (stages, prefixes) = (&mut st.stages, &mut st.prefixes);
                        st.map.retain(|k, v| {
                            *v = edit(v);
                            if v.is_empty() {
                                stage_remove(stages, k);
                                megaflow::Prefix::remove(prefixes, k);
                            }
                            !v.is_empty()
                        });
                        st.recompute();
                    }
                }
            }
            t.sort();
        }
        n
    }

    /// Recomputes the ranks left stale by [`Snapshot::insert`] and
    /// [`Snapshot::update_within`] and reorders those tables: once per
    /// built snapshot, before it is published.
    fn seal(&mut self) {
        for t in self.tables.iter_mut() {
            if !t.subtables.iter().any(|s| s.stale) {
                continue;
            }
            let t = Arc::make_mut(t);
            for st in t.subtables.iter_mut().filter(|s| s.stale) {
                Arc::make_mut(st).recompute();
            }
            t.sort();
        }
        // (A pass over every table's subtables, not over the flows: it
        // does not grow with the number of flows.)
        let mut u = Key::in_use_always();
        for st in self.tables.iter().flat_map(|t| t.subtables.iter()) {
            u = u.or(&st.mask);
        }
        self.in_use = u;
        self.in_use_c = u.narrow();
        let mut nd = Key::default();
        nd.set(Field::NdTarget, u128::MAX);
        nd.set(Field::NdSll, u128::MAX);
        self.nd_in_use = u.and(&nd) != Key::default();
        self.header_masks = header_masks(&self.in_use_c);
    }

    /// The [`HeaderMask`] of this snapshot for frames of IP protocol
    /// `proto`.
    #[inline(always)]
    fn header_mask(&self, proto: u8) -> &HeaderMask {
        let i = match proto {
            key::num::TCP | key::num::UDP | key::num::SCTP => 0,
            key::num::ICMP | key::num::ICMP6 => 1,
            _ => 2,
        };
        &self.header_masks[i]
    }

    #[cfg(test)]
    fn count(&self) -> usize {
        self.tables.iter().map(|t| t.rules().count()).sum()
    }
}

/// The flows logic.
pub struct Flows {
    snap: ArcSwap<Snapshot>,
    /// Per table: lookups, misses.
    table_stats: Box<[Counters]>,
    /// Copies of frames sent beyond the frames themselves (an output
    /// before a header change, outputs in two tables, group buckets with
    /// header changes).
    copies: AtomicU64,
    /// The meters' running state (meters.rs).
    meter_state: meters::State,
    /// Per port id, a bit: its link is up (the watch ports of SELECT and
    /// fast-failover groups; all up until told otherwise, [`Flows::set_port_live`]).
    live: Box<[AtomicU64]>,
    /// Output sets of multi-output action lists, by group id; set once,
    /// never changed (so `group_members` can lend them out).
    groups: Box<[OnceLock<Box<[PortId]>>]>,
    /// Per group made for a list of outputs and `normal`: the group of its
    /// ports plus port `p`, by `p` (`MIXED_SAME`: `p` is one of them).
    mixed: Box<[OnceLock<Box<[u16]>>]>,
    /// Serialises commands (never taken by `classify`).
    writer: Mutex<Writer>,
    /// Per-worker exact-match cache (`cache.rs`).
    cache: cache::Cache,
    /// Exact-match cache hits, misses.
    cache_stats: Counters,
    /// Megaflow cache (on an exact-match miss) hits, misses.
    mf_stats: Counters,
    /// Packet-ins on their way to the OpenFlow channel (`pktin.rs`).
    packet_ins: Arc<pktin::PacketIns>,
    /// Flows removed with `SEND_FLOW_REM`, for the OpenFlow channel.
    notices: Mutex<expiry::Notices>,
    /// Tells this instance from a later one (a logic swap).
    instance: u64,
    /// The learning bridge of the `normal` action.
    normal: crate::bridge::Bridge,
}

impl Flows {
    /// The snapshot a command edits, with the writer lock held: a copy of
    /// the published one that shares no table or subtable with it, so
    /// that the edits are in place (O(1) per flow) rather than a copy of
    /// the subtable each (which made `ovs-ofctl add-flows`, one flow-mod
    /// and one barrier at a time, quadratic). Left-right: the spare copy
    /// retired by the last commit is brought up to date by replaying the
    /// buckets the published one changed; when there is none (first use,
    /// a worker still holding it, another writer published since, or a
    /// change by a pass over a table) it is a deep copy, O(flows).
    fn begin(&self, w: &mut Writer) -> Snapshot {
        let cur = self.snap.load_full();
        let mut next = match w.spare.take().map(Arc::try_unwrap) {
            Some(Ok(s)) if s.gen == cur.gen => s,
            Some(Ok(mut s)) if cur.parent == Some(s.gen) && !cur.log_full => {
                s.replay(&cur);
                s
            }
            _ => cur.deep_clone(),
        };
        next.gen = GENERATION.fetch_add(1, Relaxed);
        next.parent = Some(cur.gen);
        next.log.clear();
        next.log_full = false;
        // (The replay brings the flows up to date; the meters are taken as
        // they are.)
        next.meters = cur.meters.clone();
        next
    }

    /// Publishes `next` (from [`Flows::begin`]) if `changed`, keeping the
    /// snapshot it replaces as the spare; else keeps `next` itself as the
    /// spare (it holds what the published one holds).
    fn commit(&self, w: &mut Writer, mut next: Snapshot, changed: bool) {
        if !changed {
            if let Some(p) = next.parent {
                next.gen = p;
                w.spare = Some(Arc::new(next));
            }
            return;
        }
        next.seal();
        w.spare = Some(self.snap.swap(Arc::new(next)));
    }
}

/// Counters of one batch, added to the shared atomics once at its end
/// (atomic read-modify-writes cost more than a lookup): per table in two
/// arrays, per flow over runs of consecutive hits on the same flow.
///
/// The per-table arrays are initialised lazily, up to the highest table
/// looked up so far (`tables`): zeroing all 255 tables' counters cost more
/// per batch than the lookups of a batch of cache hits.
struct Acc<'a> {
    lookups: [MaybeUninit<u32>; MAX_TABLE as usize + 1],
    misses: [MaybeUninit<u32>; MAX_TABLE as usize + 1],
    /// Tables `0..tables` have initialised counters.
    tables: usize,
    run: Run<'a>,
    /// Copies of frames sent (`copies` in `dump`), added once per batch.
    copies: u32,
    /// The data-path clock in whole seconds (the `normal` action's aging).
    now_s: u32,
    /// The data-path clock in nanoseconds (meters).
    now_ns: u64,
}

impl Default for Acc<'_> {
    fn default() -> Self {
        Acc::at(0)
    }
}

impl Acc<'_> {
    /// Empty counters of a batch at `now_ns` (the data-path clock).
    #[inline]
    fn at(now_ns: u64) -> Self {
        Acc {
            // SAFETY: an array of `MaybeUninit` needs no initialisation;
            // only `0..tables` is ever read.
            lookups: unsafe { MaybeUninit::uninit().assume_init() },
            // SAFETY: as above.
            misses: unsafe { MaybeUninit::uninit().assume_init() },
            tables: 0,
            run: Run::default(),
            copies: 0,
            now_s: (now_ns / 1_000_000_000) as u32,
            now_ns,
        }
    }

    /// The clock the actions see (`normal` learns, meters take tokens).
    #[inline(always)]
    fn clock(&self) -> exec::Clock {
        exec::Clock::Data {
            now_s: self.now_s,
            now_ns: self.now_ns,
        }
    }
}

impl Acc<'_> {
    /// `n` lookups in `table`.
    #[inline]
    fn lookup(&mut self, table: usize, n: u32) {
        if table >= self.tables {
            for t in self.tables..=table {
                self.lookups[t] = MaybeUninit::new(0);
                self.misses[t] = MaybeUninit::new(0);
            }
            self.tables = table + 1;
        }
        // SAFETY: initialised above (table < tables).
        unsafe { *self.lookups[table].assume_init_mut() += n };
    }

    /// `n` misses in `table` (after `lookup` of it).
    #[inline]
    fn miss(&mut self, table: usize, n: u32) {
        debug_assert!(table < self.tables);
        // SAFETY: `lookup(table)` came first (table < tables).
        unsafe { *self.misses[table].assume_init_mut() += n };
    }

    /// Per table with lookups: (table, lookups, misses).
    fn tables(&self) -> impl Iterator<Item = (usize, u32, u32)> + '_ {
        (0..self.tables).filter_map(|t| {
            // SAFETY: t < tables: initialised.
            let (l, m) = unsafe { (self.lookups[t].assume_init(), self.misses[t].assume_init()) };
            (l > 0).then_some((t, l, m))
        })
    }
}

/// What the classifier's pipeline did, for the exact-match cache.
struct Trace {
    rules: [*const Rule; cache::MAX_RULES],
    n: u8,
    miss: u8,
    cacheable: bool,
    /// Only output actions (and drops) ran...
    pure: bool,
    /// ... this many outputs.
    outputs: u32,
    /// The bits of the key the lookups consulted (the megaflow mask, but
    /// for `Key::in_use_always`), when `pipeline` tracks them.
    mask: Key,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            rules: [std::ptr::null(); cache::MAX_RULES],
            n: 0,
            miss: 0,
            cacheable: true,
            pure: true,
            outputs: 0,
            mask: Key::default(),
        }
    }
}

/// Observer of the classifier's pipeline: `()` on the data path (no
/// cost), the `trace` command's recorder otherwise (trace.rs).
trait Hook {
    /// Whether the flows hit count in their `n_packets`/`n_bytes`.
    const COUNT: bool = true;
    /// `r` matched in its table and its actions ran; `frame` is the packet
    /// after them, `out` the verdict so far.
    #[inline(always)]
    fn hit(&mut self, _r: &Rule, _frame: &[u8], _out: Option<Verdict>) {}
    /// No flow matched in `table`.
    #[inline(always)]
    fn miss(&mut self, _table: u8) {}
}

impl Hook for () {}

/// The frame's cache key and its [`key::meta`] bits.
#[inline(always)]
fn key_meta(b: &[u8], in_port: u16) -> (CKey, u32) {
    if let Some(x) = key::extract_fast(b, in_port) {
        return x;
    }
    let (k, m) = key::extract_general_meta(b, in_port);
    (k.narrow(), m)
}

/// The exact-match way to fill after the `misses`-th miss of a batch at
/// hash index `at`: a free or stale way of the two first; else an entry
/// of the current snapshot, by one miss in 8 only (the two ways in turn):
/// more flows than entries would otherwise evict each other on every
/// packet (a 128-byte write per packet, and no hits at all).
#[inline(always)]
fn emc_way(c: &mut cache::Claim<'_>, at: usize, gen: u64, misses: u64) -> Option<usize> {
    if c.entry(at).gen != gen {
        Some(at)
    } else if c.entry(at ^ 1).gen != gen {
        Some(at ^ 1)
    } else if misses % 8 == 1 {
        Some(at ^ ((misses >> 3) & 1) as usize)
    } else {
        None
    }
}

/// The frames at the start of `pkts` with header `h` under `m` (a run of
/// one flow, as far as the snapshot's flows can tell): their number and
/// their bytes in all. Not inlined: called once per run, it keeps its
/// loop in registers.
#[inline(never)]
fn run_of(pkts: &[crate::Pkt], h: &Header, m: &HeaderMask) -> (usize, u64) {
    let h = h.for_run_under(m);
    let mut bytes = 0u64;
    let mut it = pkts.iter();
    while let Some(p) = it.next() {
        // The length first: a frame of the right length is not empty,
        // which `data` then need not check.
        let len = p.len();
        if !h.len_ok(len) || !h.matches(p.data()) {
            return (pkts.len() - it.len() - 1, bytes);
        }
        bytes += len as u64;
    }
    (pkts.len(), bytes)
}

impl Flows {
    /// A packet whose key `k` (under the fields in use) and `meta` missed
    /// the exact-match cache at hash index `at`, on the `misses`-th miss of
    /// the batch: served by the megaflow cache (megaflow.rs) or else by the
    /// classifier, whose pipeline then fills both caches. Its verdict, and
    /// the exact-match entry filled, if any. `mf`: megaflow hits, misses.
    /// Not inlined: the exact-match hits' loop keeps its registers.
    #[allow(clippy::too_many_arguments)]
    #[inline(never)]
    fn cache_miss<'s>(
        &self,
        c: &mut cache::Claim<'_>,
        snap: &'s Snapshot,
        p: &mut PktMut<'_>,
        ingress: PortId,
        k: CKey,
        meta: u32,
        at: usize,
        misses: u64,
        acc: &mut Acc<'s>,
        worker: u16,
        mf: &mut [u64; 2],
    ) -> (Verdict, Option<usize>) {
        if meta & key::meta::ND != 0 && snap.nd_in_use {
            // A neighbour solicitation or advertisement whose ND fields
            // some flow matches: those are not in the caches' key, so it
            // goes through the classifier, and fills nothing.
            let k = extract(p.data(), ingress).and(&snap.in_use);
            let mut t = Trace::default();
            // (The megaflow's instance of the pipeline: the other is the
            // uncached logic's, inlined there.)
            let v = self.pipeline::<_, true>(snap, p, ingress, k, acc, worker, &mut t, &mut ());
            return (v, None);
        }
        if let Some(mi) = c.mf_lookup(&k, meta, snap.gen) {
            mf[0] += 1;
            let v = self.replay(snap, c.mf_entry(mi), p, ingress, acc, worker);
            let filled = emc_way(c, at, snap.gen, misses);
            if let Some(at) = filled {
                let e = *c.mf_entry(mi);
                *c.entry(at) = cache::Entry {
                    key: k,
                    mask: 0,
                    ..e
                };
            }
            return (v, filled);
        }
        mf[1] += 1;
        let mut t = Trace::default();
        let v = self.pipeline::<_, true>(snap, p, ingress, k.widen(), acc, worker, &mut t, &mut ());
        if !t.cacheable {
            return (v, None);
        }
        let e = cache::Entry {
            key: k,
            gen: snap.gen,
            meta,
            n: t.n,
            miss: t.miss,
            mask: 0,
            rules: t.rules,
            pure: t.pure && t.outputs <= 1,
            verdict: std::mem::MaybeUninit::new(v),
        };
        // The megaflow: the bits consulted in the caches' words (those of
        // the registers are functions of them: a register is 0 at table 0
        // and written with constants).
        c.mf_insert(&e, &t.mask.or(&Key::in_use_always()).narrow(), mf[1]);
        let filled = emc_way(c, at, snap.gen, misses);
        if let Some(at) = filled {
            *c.entry(at) = e;
        }
        (v, filled)
    }

    /// Runs the tables on one packet from table 0 with the classifier;
    /// with `MF` (the caches' miss path), records in `t` what the caches
    /// need (the flows hit, the megaflow's bits); without, `t` is left as
    /// it is (the uncached logic, `trace`).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn pipeline<'s, H: Hook, const MF: bool>(
        &self,
        snap: &'s Snapshot,
        p: &mut PktMut<'_>,
        ingress: PortId,
        mut k: Key,
        acc: &mut Acc<'s>,
        worker: u16,
        t: &mut Trace,
        h: &mut H,
    ) -> Verdict {
        let len = p.len() as u64;
        let mut table = 0usize;
        let mut x = Exec::default();
        let clock = if H::COUNT {
            acc.clock()
        } else {
            exec::Clock::Trace
        };
        let v = loop {
            acc.lookup(table, 1);
            // A lookup after a pop, a push or a change of EtherType or
            // protocol depends on more than the key at table 0 holds: not
            // cacheable.
            if MF {
                t.cacheable &= !x.reparse;
            }
            let Some(r) = snap.tables[table].lookup::<MF>(&k, &mut t.mask) else {
                acc.miss(table, 1);
                if MF {
                    t.miss = table as u8 + 1;
                }
                h.miss(table as u8);
                break self.finish(&mut x, p, DropReason::NoMatch);
            };
            if MF {
                if (t.n as usize) < cache::MAX_RULES {
                    t.rules[t.n as usize] = r;
                    t.n += 1;
                } else {
                    t.cacheable = false;
                }
            }
            if H::COUNT {
                acc.run.hit(&r.stats, 1, len, worker);
            }
            // A flow that only sends the frame as it is, reached with
            // nothing output yet: its verdict, known at installation.
            // (No copy made and an empty action set: one test.)
            if x.out.is_none() && (x.copies as u64 | x.set) == 0 {
                if let Some((v, output)) = r.plain.verdict(ingress) {
                    if MF {
                        t.outputs += output as u32;
                    }
                    h.hit(r, p.data(), output.then_some(v));
                    break v;
                }
            }
            if MF {
                for a in r.actions.iter() {
                    match a {
                        Action::Output(_)
                        | Action::Flood
                        | Action::All
                        | Action::InPort
                        | Action::Group(_) => t.outputs += 1,
                        _ => t.pure = false,
                    }
                }
            }
            self.run::<true>(snap, r, &r.actions, p, ingress, &mut x, &mut k, clock);
            if r.goto.is_none() && x.set != 0 && x.stop.is_none() {
                self.run_set(snap, r, &r.tail, p, ingress, &mut x, clock);
            }
            h.hit(r, p.data(), x.out);
            if let Some(why) = x.stop {
                // A meter's drop or a batch out of room is not a function
                // of the key: never cached (an invalid TTL is: the TTL is
                // in the meta bits).
                if MF && matches!(why, DropReason::Meter | DropReason::NoRoom) {
                    t.cacheable = false;
                }
                break self.finish(&mut x, p, DropReason::Policy);
            }
            match r.goto {
                Some(g) => table = g as usize,
                None => break self.finish(&mut x, p, DropReason::Policy),
            }
        };
        if MF {
            t.cacheable &= !x.nocache;
        }
        acc.copies += x.copies;
        v
    }

    /// Replays a cached pipeline: the same counters and actions as
    /// `pipeline`, without lookups. `e` is from the loaded snapshot.
    #[inline(always)]
    fn replay<'s>(
        &self,
        snap: &'s Snapshot,
        e: &cache::Entry,
        p: &mut PktMut<'_>,
        ingress: PortId,
        acc: &mut Acc<'s>,
        worker: u16,
    ) -> Verdict {
        if e.pure {
            Self::count(e, acc, worker, 1, p.len() as u64);
            // SAFETY: written with `pure` (cache.rs).
            return unsafe { e.verdict.assume_init() };
        }
        self.replay_actions(snap, e, p, ingress, acc, worker)
    }

    /// The counters of `packets` frames of `bytes` bytes in all through
    /// the cached pipeline `e` (of the loaded snapshot): its flows, its
    /// tables' lookups, its miss.
    #[inline(always)]
    fn count<'s>(e: &cache::Entry, acc: &mut Acc<'s>, worker: u16, packets: u32, bytes: u64) {
        for &r in &e.rules[..e.n as usize] {
            // SAFETY: the entry's generation is the loaded snapshot's, which
            // holds this flow (cache.rs); the caller holds that snapshot
            // for the whole batch, longer than `acc` lives.
            let r: &'s Rule = unsafe { &*r };
            acc.lookup(r.table as usize, packets);
            acc.run.hit(&r.stats, packets as u64, bytes, worker);
        }
        if e.miss != 0 {
            let t = (e.miss - 1) as usize;
            acc.lookup(t, packets);
            acc.miss(t, packets);
        }
    }

    /// `replay` of a pipeline with actions to run. A packet stopped on the
    /// way (an invalid TTL, a meter) is not counted on the flows after.
    #[inline(never)]
    fn replay_actions<'s>(
        &self,
        snap: &'s Snapshot,
        e: &cache::Entry,
        p: &mut PktMut<'_>,
        ingress: PortId,
        acc: &mut Acc<'s>,
        worker: u16,
    ) -> Verdict {
        let len = p.len() as u64;
        let mut x = Exec::default();
        let mut k = Key::default();
        let clock = acc.clock();
        let mut stopped = false;
        for &r in &e.rules[..e.n as usize] {
            // SAFETY: as in `count`.
            let r: &'s Rule = unsafe { &*r };
            acc.lookup(r.table as usize, 1);
            acc.run.hit(&r.stats, 1, len, worker);
            self.run::<false>(snap, r, &r.actions, p, ingress, &mut x, &mut k, clock);
            // The pipeline's end (its last flow, and no miss after).
            if r.goto.is_none() && x.set != 0 && x.stop.is_none() {
                self.run_set(snap, r, &r.tail, p, ingress, &mut x, clock);
            }
            if x.stop.is_some() {
                stopped = true;
                break;
            }
        }
        let end = if e.miss != 0 && !stopped {
            let t = (e.miss - 1) as usize;
            acc.lookup(t, 1);
            acc.miss(t, 1);
            DropReason::NoMatch
        } else {
            DropReason::Policy
        };
        let v = self.finish(&mut x, p, end);
        acc.copies += x.copies;
        v
    }
}

impl Logic for Flows {
    fn name(&self) -> &'static str {
        "flows"
    }

    fn classify(&self, ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let snap = self.snap.load();
        let mut acc = Acc::at(ctx.now_ns);
        match self.cache.claim(ctx.worker) {
            Some(mut c) => {
                let (mut hits, mut misses) = (0u64, 0u64);
                // Megaflow hits, misses.
                let mut mf = [0u64; 2];
                let n = pkts.len().min(verdicts.len());
                let verdicts = &mut verdicts[..n];
                let mut i = 0usize;
                let resume = std::mem::take(c.resume());
                // The entry of the previous frame (of the previous batch,
                // for the first) is tried first: a burst of one flow skips
                // the hash.
                let mut last = resume.last;
                // The previous batch ended in a run of one flow: it goes on
                // while the frames have its header, if its entry still
                // holds what served it (same snapshot, same key) and the
                // frames come from the same port.
                if let Some(r) = resume.run {
                    let e = c.entry(r.at);
                    if r.ingress == ingress
                        && r.gen == snap.gen
                        && e.gen == r.gen
                        && e.pure
                        && e.meta == r.meta
                        && e.key == r.key
                    {
                        let (m, bytes) = run_of(&pkts[..n], &r.h, &r.mask);
                        if m > 0 {
                            // SAFETY: written with `pure` (cache.rs), which
                            // a run's entry is.
                            let v = unsafe { e.verdict.assume_init() };
                            verdicts[..m].fill(v);
                            Self::count(e, &mut acc, ctx.worker, m as u32, bytes);
                            hits += m as u64;
                            i = m;
                            if m == n {
                                *c.resume() = resume;
                            }
                        }
                    }
                }
                while i < n {
                    let Some(mut p) = pkts.get_mut(i) else { break };
                    let (k, meta) = key_meta(p.data(), ingress);
                    // Only the bits a lookup of this snapshot can look at (a
                    // coarse megaflow: flows that differ elsewhere share an
                    // entry).
                    let k = k.and(&snap.in_use_c);
                    // (The L4 ports first: flows interleaved mostly differ
                    // there, so the previous frame's entry fails early.)
                    let valid = |e: &cache::Entry| {
                        e.gen == snap.gen && e.key.0[7] == k.0[7] && e.meta == meta && e.key == k
                    };
                    let mut at = last;
                    // The previous frame's entry serves this one: a run may
                    // be starting (with flows interleaved, no header is
                    // taken or compared).
                    let again = valid(c.entry(at));
                    let mut hit = again;
                    if !again {
                        // Two ways: the entry of the hash and its neighbour
                        // (a direct-mapped cache had two of 64 flows evict
                        // each other on one seed in four).
                        at = c.index(k.hash_with(meta as u64));
                        hit = valid(c.entry(at));
                        if !hit && valid(c.entry(at ^ 1)) {
                            at ^= 1;
                            hit = true;
                        }
                        last = at;
                    }
                    if hit {
                        let e = c.entry(at);
                        let v = self.replay(&snap, e, &mut p, ingress, &mut acc, ctx.worker);
                        verdicts[i] = v;
                        hits += 1;
                        i += 1;
                        // A run of one flow: after a frame that a pure entry
                        // (only an output or a drop; it left the frame
                        // unchanged) served, the frames that follow with the
                        // same `Header` have its key and meta bits, so the
                        // same entry would serve them: they take its verdict
                        // (written as one range), and its counters are added
                        // once for the whole run.
                        // Under the snapshot's header mask: frames of flows
                        // that differ only in bits no flow looks at (whose
                        // keys the cache does not tell apart) make one run.
                        let run = if again && e.pure {
                            Header::of(p.data()).filter(Header::is_fast).map(|h| {
                                let mask = *snap.header_mask(h.proto());
                                (h.and(&mask), mask)
                            })
                        } else {
                            None
                        };
                        if let Some((h, mask)) = run {
                            let (m, bytes) = run_of(&pkts[i..n], &h, &mask);
                            if m > 0 {
                                verdicts[i..i + m].fill(v);
                                Self::count(c.entry(at), &mut acc, ctx.worker, m as u32, bytes);
                                hits += m as u64;
                                i += m;
                            }
                            if i == n {
                                // The batch ends in this run: the next one
                                // may go on with it.
                                c.resume().run = Some(cache::RunEnd {
                                    at,
                                    ingress,
                                    h,
                                    mask,
                                    key: k,
                                    meta,
                                    gen: snap.gen,
                                });
                            }
                        }
                        continue;
                    }
                    misses += 1;
                    let (v, filled) = self.cache_miss(
                        &mut c, &snap, &mut p, ingress, k, meta, at, misses, &mut acc, ctx.worker,
                        &mut mf,
                    );
                    verdicts[i] = v;
                    i += 1;
                    if let Some(at) = filled {
                        last = at;
                    }
                }
                c.resume().last = last;
                self.cache_stats.add(ctx.worker, hits, misses);
                if mf != [0, 0] {
                    self.mf_stats.add(ctx.worker, mf[0], mf[1]);
                }
            }
            None => {
                // (Not written without `MF`.)
                let mut t = Trace::default();
                for (mut p, v) in pkts.iter_mut().zip(verdicts.iter_mut()) {
                    let k = extract(p.data(), ingress);
                    *v = self.pipeline::<_, false>(
                        &snap,
                        &mut p,
                        ingress,
                        k,
                        &mut acc,
                        ctx.worker,
                        &mut t,
                        &mut (),
                    );
                }
            }
        }
        acc.run.flush(ctx.worker);
        if acc.copies > 0 {
            self.copies.fetch_add(acc.copies as u64, Relaxed);
        }
        for (t, lookups, misses) in acc.tables() {
            self.table_stats[t].add(ctx.worker, lookups as u64, misses as u64);
        }
    }

    fn command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        self.run_command(cmd, args)
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        COMMANDS
    }
    fn group_members(&self, g: fabric::GroupId) -> &[PortId] {
        self.groups
            .get(g as usize)
            .and_then(|c| c.get())
            .map_or(&[], |b| b)
    }

    fn port_removed(&self, port: PortId) {
        self.normal.forget_port(port);
        self.set_port_live(port, false);
    }
}

#[cfg(test)]
mod actset_tests;
#[cfg(test)]
mod bulk_tests;
#[cfg(test)]
mod cache_tests;
#[cfg(test)]
mod megaflow_tests;
#[cfg(test)]
mod of13_tests;
#[cfg(test)]
mod pktin_tests;
#[cfg(test)]
mod tests;
