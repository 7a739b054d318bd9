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
//!
//! Files, one job each: the classifier's flows and tables (classifier.rs),
//! snapshots and their change log (snapshot.rs), the data path (pipeline.rs:
//! `classify`, the caches' miss path, the pipeline of tables), the
//! counters (counters.rs), the commands (commands.rs, groupcmd.rs,
//! metercmd.rs), compiling and running actions (actions.rs, exec.rs,
//! rewrite.rs), the caches (cache.rs, megaflow.rs), extraction (key.rs),
//! the text syntax and OpenFlow messages (text.rs, ofp.rs); this file
//! holds the module's types `Flows` and `Snapshot` and the [`Logic`]
//! glue.

mod actions;
#[allow(unsafe_code)]
mod cache;
mod classifier;
mod commands;
mod counters;
#[allow(unsafe_code)]
mod exec;
mod expiry;
mod groupcmd;
mod groups;
#[allow(unsafe_code)]
mod key;
mod megaflow;
mod metercmd;
pub mod meters;
pub mod ofp;
#[allow(unsafe_code)]
mod pipeline;
pub mod pktin;
mod prereq;
mod rewrite;
mod snapshot;
mod submap;
mod text;
mod trace;

use std::any::Any;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};

use arc_swap::ArcSwap;
use serde_json::Value;

pub use expiry::{Reason, SWEEP_EVERY};
pub use groups::{MAX_BUCKETS, MAX_OF_GROUPS};
pub use key::{extract, extract_fast, extract_general, CKey, Field, Header, HeaderMask, Key};
pub use text::{parse, Action, FlowSpec, DEFAULT_PRIORITY, MAX_TABLE};

use crate::{CommandError, Ctx, DropReason, Logic, Pkts, PortId, Verdict, WorkerState};
use actions::Compiled;
use classifier::{Rule, Table};
pub use commands::new;
use commands::{Writer, COMMANDS};
use counters::Counters;
use pipeline::{key_meta, Acc, Hook, Trace};
#[cfg(test)]
use rewrite::{dec_ttl, set_ip4, set_tp, ttl_at, write_mac};
use snapshot::{Changed, Within, GENERATION};

/// Distinct output sets of multi-output action lists, over the logic's life.
pub const MAX_GROUPS: usize = 4096;
/// `normal` in a list with outputs (`output:3,NORMAL`) can add a copy to
/// ports `0..MIXED_PORTS` (OpenFlow ports 1..=64): each output set mixed
/// with `normal` takes this many groups. A port learned beyond is not
/// sent to by the group of such a list: it gets a copy of the frame.
pub const MIXED_PORTS: usize = 64;
/// In a `mixed` table: the port is one of the outputs already.
const MIXED_SAME: u16 = u16::MAX;

/// All tables as one immutable value (snapshot.rs: building one, its
/// change log, the left-right spare). Defined here, beside [`Flows`],
/// rather than in snapshot.rs: the release build groups functions into
/// its code generation units by the module of their type, and with this
/// type (its methods, its drop) in snapshot.rs LLVM compiled `classify`
/// differently (classify_loop flows10k-acl 400 64: +2.3 % instructions
/// against one file for it all; defined here: -0.8 %).
struct Snapshot {
    tables: Vec<Arc<Table>>,
    /// The arena of its flows: every flow the tables hold, at its
    /// [`Rule::slot`] (a free slot, listed in `free`, holds
    /// [`Rule::vacant`]: no test for None on the data path). The caches
    /// refer to flows by slot, a bounds-checked index into the snapshot
    /// the batch holds ([`Snapshot::rule`]), not by address.
    rules: Vec<Arc<Rule>>,
    /// The free slots of `rules`.
    free: Vec<u32>,
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
    /// Exact-match (and megaflow) entries per worker (`cache.rs`; 0: no
    /// cache): the size of each worker's [`cache::WorkerCache`].
    cache_per: usize,
    /// Worker states asked for whose cache could not be mapped (address
    /// space gone since the configuration's check): those workers
    /// classify uncached.
    workers_without_cache: AtomicU64,
    /// Exact-match cache hits, misses.
    cache_stats: Counters,
    /// Megaflow cache (on an exact-match miss) hits, misses.
    mf_stats: Counters,
    /// Packet-ins on their way to the OpenFlow channel: the fabric's punt
    /// queue, made from the `packet_in_*` settings (`pktin.rs`).
    punt: Arc<fabric::Punt>,
    /// Flows removed with `SEND_FLOW_REM`, for the OpenFlow channel.
    notices: Mutex<expiry::Notices>,
    /// Tells this instance from a later one (a logic swap).
    instance: u64,
    /// The learning bridge of the `normal` action.
    normal: crate::bridge::Bridge,
}

impl Logic for Flows {
    fn name(&self) -> &'static str {
        "flows"
    }

    /// Through the classifier (no worker cache). Not inlined: it is the
    /// one instance of the uncached path (`classify_with` calls it for a
    /// state that is not a cache), so the pipeline of tables stays inlined
    /// in it.
    #[inline(never)]
    fn classify(&self, ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        self.classify_batch(None, ctx, ingress, pkts, verdicts)
    }

    /// The worker's exact-match and megaflow caches ([`cache::WorkerCache`];
    /// none with `"cache": 0`). The configuration mapped one to check
    /// that it can; should a later one fail all the same (address space
    /// gone since), that worker goes without a cache: it classifies
    /// through the classifier, as a caller without state does.
    fn worker_state(&self) -> Option<WorkerState> {
        if self.cache_per == 0 {
            return None;
        }
        match cache::WorkerCache::new(self.cache_per) {
            Ok(c) => Some(Box::new(c)),
            Err(_) => {
                self.workers_without_cache
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                None
            }
        }
    }

    fn classify_with(
        &self,
        state: &mut (dyn Any + Send),
        ctx: &Ctx,
        ingress: PortId,
        pkts: &mut Pkts,
        verdicts: &mut [Verdict],
    ) {
        // One type test a batch; a state of another logic: no cache.
        match state.downcast_mut::<cache::WorkerCache>() {
            Some(c) => self.classify_batch(Some(c), ctx, ingress, pkts, verdicts),
            None => Logic::classify(self, ctx, ingress, pkts, verdicts),
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

    /// The packet-in queue the OpenFlow channel reads.
    fn punt(&self) -> Option<Arc<fabric::Punt>> {
        Some(self.punt.clone())
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
#[allow(unsafe_code)]
mod tests;
