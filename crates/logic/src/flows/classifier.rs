//! The classifier: installed flows ([`Rule`]) and the tuple-space tables
//! they are looked up in, one hash table per distinct mask ([`Subtable`],
//! with its staged probe and prefix indices for the megaflow cache),
//! searched in order of their best flow with an early exit.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use super::actions::Compiled;
use super::counters::Counters;
use super::key::{self, CKey, Key};
use super::{exec, expiry, megaflow, submap, text, Action};

/// One installed flow.
pub(super) struct Rule {
    pub(super) table: u8,
    pub(super) priority: u16,
    /// Installation order (ties between equal priorities).
    pub(super) seq: u64,
    pub(super) cookie: u64,
    pub(super) key: Key,
    pub(super) mask: Key,
    /// Compiled (several outputs as one group).
    pub(super) actions: Box<[Action]>,
    /// Header changes after the last output of a flow that ends the
    /// pipeline, left out of `actions` (nothing would see them): run
    /// only before a non-empty action set (`Flows::run_set`).
    pub(super) tail: Box<[Action]>,
    /// What `actions` and `goto` come to if they only send the frame as
    /// it is (`Plain::of`; kept with them).
    pub(super) plain: exec::Plain,
    /// As given, for `dump`.
    pub(super) shown: Box<[Action]>,
    /// The `max_len` of each output to a port (not the controller's) of
    /// `shown`, in order, as an OpenFlow flow-mod gave them (flow stats
    /// echo them; `ovs-ofctl` sends 0, os-ken and Faucet `OFPCML_MAX`).
    /// Empty: all 0 (the text syntax).
    pub(super) out_max_len: Box<[u16]>,
    pub(super) goto: Option<u8>,
    /// packets, bytes.
    pub(super) stats: Arc<Counters>,
    /// Seconds without a new packet before the flow expires (0: never).
    pub(super) idle_timeout: u16,
    /// Seconds after installation before it expires (0: never).
    pub(super) hard_timeout: u16,
    /// `OFPFF_*` flags as given (`SEND_FLOW_REM`: reported when it goes).
    pub(super) flags: u16,
    /// Installation (durations, hard timeout); a modify keeps it.
    pub(super) installed: Instant,
    /// Its index in the arena of every snapshot that holds it
    /// ([`super::Snapshot::rules`]), set by [`super::Snapshot::insert`]
    /// (0 until then); a modify keeps it. What the caches hold.
    pub(super) slot: u32,
}

impl Rule {
    /// What a free slot of a snapshot's arena holds (one flow for all,
    /// in no table; the caches' generation check keeps them from ever
    /// looking it up).
    pub(super) fn vacant() -> Arc<Rule> {
        static VACANT: std::sync::LazyLock<Arc<Rule>> = std::sync::LazyLock::new(|| {
            Arc::new(Rule {
                table: 0,
                priority: 0,
                seq: 0,
                cookie: 0,
                key: Key::default(),
                mask: Key::default(),
                actions: Box::default(),
                tail: Box::default(),
                plain: exec::Plain::of(&[], None),
                shown: Box::default(),
                out_max_len: Box::default(),
                goto: None,
                stats: Arc::default(),
                idle_timeout: 0,
                hard_timeout: 0,
                flags: 0,
                installed: Instant::now(),
                slot: u32::MAX,
            })
        });
        VACANT.clone()
    }

    #[inline]
    pub(super) fn outranks(&self, other: &Rule) -> bool {
        self.priority > other.priority || (self.priority == other.priority && self.seq < other.seq)
    }

    /// The same flow with other actions (modify): match, priority,
    /// cookie, installation, timeouts and flags kept.
    pub(super) fn with_actions(
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

    pub(super) fn text(&self) -> String {
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
pub(super) struct Subtable {
    pub(super) mask: Key,
    /// Rank of its best flow: highest priority, then earliest installed.
    pub(super) max_priority: u16,
    /// Installation number of that flow.
    pub(super) first_seq: u64,
    /// Masked key → flows with that exact match, best first (narrow for
    /// a mask in the caches' words: submap.rs).
    pub(super) map: submap::SubMap<Box<[Arc<Rule>]>>,
    /// The staged probe's earlier stages (`key::STAGE_WORDS`: metadata
    /// and L2, then L3 too), those of them that are neither empty nor the
    /// whole mask nor the previous stage: the mask's words below the
    /// stage's end, and the number of buckets of `map` per key under it.
    /// With the megaflow cache (`megaflow.rs`), a probe checks them in
    /// turn and stops at the first with no flow: the megaflow then needs
    /// only the bits up to that stage (a packet whose source address no
    /// flow has never makes the ports part of its megaflow).
    pub(super) stages: Vec<Stage>,
    /// Ordered values of the prefix-shaped address and port fields of the
    /// mask (`megaflow::Prefix`): checked before the stages, a field whose
    /// value no flow's shares rules the subtable out with a few of its top
    /// bits in the megaflow.
    pub(super) prefixes: Vec<megaflow::Prefix>,
    /// While a snapshot is being built: its best flow went, so
    /// (`max_priority`, `first_seq`) may rank above every flow left (never
    /// below). [`Snapshot::seal`] recomputes it before the snapshot is
    /// published, once per batch rather than once per removal.
    pub(super) stale: bool,
}

impl Subtable {
    pub(super) fn recompute(&mut self) {
        let best = self
            .map
            .values()
            .map(|v| &v[0])
            .reduce(|a, b| if b.outranks(a) { b } else { a });
        (self.max_priority, self.first_seq) = best.map_or((0, 0), |r| (r.priority, r.seq));
        self.stale = false;
    }

    /// `r` is the flow the rank was taken from.
    pub(super) fn is_best(&self, r: &Rule) -> bool {
        r.priority == self.max_priority && r.seq == self.first_seq
    }
}

/// One earlier stage of a subtable's staged probe.
#[derive(Clone)]
pub(super) struct Stage {
    pub(super) mask: Key,
    /// Masked keys (of words below `key::STAGE_WORDS`' ends: all in the
    /// caches' words) → buckets of the subtable under each.
    pub(super) keys: HashMap<CKey, u32, key::BuildKeyHasher>,
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
    pub(super) fn put(&mut self, k: Key, v: Box<[Arc<Rule>]>) {
        if self.map.insert(k, v).is_none() {
            stage_add(&mut self.stages, &k);
            megaflow::Prefix::add(&mut self.prefixes, &k);
        }
    }

    /// Removes the flows of masked key `k`.
    pub(super) fn take(&mut self, k: &Key) -> Option<Box<[Arc<Rule>]>> {
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
pub(super) fn stage_remove(stages: &mut [Stage], k: &Key) {
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
pub(super) struct Table {
    /// Ordered by the rank of their best flow (`max_priority` descending,
    /// then `first_seq` ascending): once the best match so far outranks a
    /// subtable's best flow, it outranks everything in it and after it.
    pub(super) subtables: Vec<Arc<Subtable>>,
}

impl Table {
    /// The best flow matching `k`. With `MF`, adds to `consulted` the
    /// bits of `k` the result depends on: the masks of the subtables
    /// probed (not those after the early exit), for the megaflow cache
    /// (`megaflow.rs`). Always inlined: LLVM's choice for an `#[inline]`
    /// function depends on its callers in the code generation unit, which
    /// the module layout decides (moving cold code out of the file it was
    /// in left the uncached pipeline calling it, +10% instructions).
    #[inline(always)]
    pub(super) fn lookup<const MF: bool>(&self, k: &Key, consulted: &mut Key) -> Option<&Rule> {
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
    pub(super) fn subtable_index(&mut self, mask: &Key) -> usize {
        match self.subtables.iter().position(|s| s.mask == *mask) {
            Some(i) => i,
            None => {
                self.subtables.push(Arc::new(Subtable::new(*mask)));
                self.subtables.len() - 1
            }
        }
    }

    pub(super) fn sort(&mut self) {
        self.subtables.retain(|s| !s.map.is_empty());
        self.subtables
            .sort_by_key(|s| (std::cmp::Reverse(s.max_priority), s.first_seq));
    }

    pub(super) fn rules(&self) -> impl Iterator<Item = &Arc<Rule>> + '_ {
        self.subtables
            .iter()
            .flat_map(|s| s.map.values().flat_map(|v| v.iter()))
    }

    /// The flow of exactly this match (`key` masked by `mask`) and
    /// priority: one hash lookup, not a scan.
    pub(super) fn find(&self, key: &Key, mask: &Key, priority: u16) -> Option<&Arc<Rule>> {
        self.subtables
            .iter()
            .find(|s| s.mask == *mask)?
            .map
            .get(key)?
            .iter()
            .find(|r| r.priority == priority)
    }
}
