//! Snapshots: all tables as one immutable value that commands build anew
//! and swap in (arc-swap), their change log, and the left-right spare a
//! command edits in place ([`Flows::begin`], [`Flows::commit`]).

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::classifier::{stage_remove, Rule, Subtable, Table};
use super::commands::Writer;
use super::key::{self, CKey, Field, HeaderMask, Key};
use super::{megaflow, Flows, Snapshot, MAX_TABLE};

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
pub(super) enum Changed {
    /// The flows of (table, mask, key).
    Bucket(u8, Key, Key),
    /// Any flows of the subtable (table, mask): a pass over it.
    Subtable(u8, Key),
}

/// Which flows of a table [`Snapshot::update_within`] looks at (`pick`
/// selects among them).
#[derive(Clone, Copy)]
pub(super) enum Within<'a> {
    /// Flows whose mask covers this mask and whose key under it is this
    /// key (a non-strict match): subtables of other masks are skipped.
    Covering(&'a Key, &'a Key),
    /// Flows of exactly this match (key under mask; strict): one bucket.
    Exact(&'a Key, &'a Key),
}

/// Longest change log kept in a snapshot (beyond: `log_full`).
const MAX_LOG: usize = 8192;

/// Generations of every snapshot of every `Flows`, in building order.
pub(super) static GENERATION: AtomicU64 = AtomicU64::new(1);

impl Clone for Snapshot {
    /// The copy a command edits: a new generation, so that swapping it in
    /// invalidates every worker's cached pipelines.
    fn clone(&self) -> Snapshot {
        Snapshot {
            tables: self.tables.clone(),
            rules: self.rules.clone(),
            free: self.free.clone(),
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
    pub(super) fn empty() -> Snapshot {
        Snapshot {
            tables: (0..=MAX_TABLE)
                .map(|_| Arc::new(Table::default()))
                .collect(),
            rules: Vec::new(),
            free: Vec::new(),
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
        // The arena: the flows of the buckets about to change leave it
        // first, then the flows copied in take their slots (a slot freed
        // and taken again within `cur`'s changes ends up with the flow
        // that took it); the free slots are then `cur`'s.
        for c in &cur.log {
            let (ti, mask) = match c {
                Changed::Bucket(ti, mask, _) | Changed::Subtable(ti, mask) => (*ti, mask),
            };
            let Some(st) = self.tables[ti as usize]
                .subtables
                .iter()
                .find(|s| s.mask == *mask)
            else {
                continue;
            };
            let old: Box<dyn Iterator<Item = &Arc<Rule>>> = match c {
                Changed::Bucket(_, _, key) => {
                    Box::new(st.map.get(key).into_iter().flat_map(|v| v.iter()))
                }
                Changed::Subtable(..) => Box::new(st.map.values().flat_map(|v| v.iter())),
            };
            for r in old {
                if let Some(x) = self.rules.get_mut(r.slot as usize) {
                    *x = Rule::vacant();
                }
            }
        }
        self.rules
            .resize_with(self.rules.len().max(cur.rules.len()), Rule::vacant);
        self.free.clone_from(&cur.free);
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
                    for r in bucket.iter().flat_map(|v| v.iter()) {
                        self.rules[r.slot as usize] = r.clone();
                    }
                    let i = t.subtable_index(mask);
                    let st = Arc::make_mut(&mut t.subtables[i]);
                    match bucket {
                        Some(b) => st.put(*key, b),
                        None => drop(st.take(key)),
                    };
                }
                (Changed::Subtable(..), Some(s)) => {
                    for r in s.map.values().flat_map(|v| v.iter()) {
                        self.rules[r.slot as usize] = r.clone();
                    }
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
    pub(super) fn insert(&mut self, mut r: Rule) -> bool {
        let t = Arc::make_mut(&mut self.tables[r.table as usize]);
        let idx = t.subtable_index(&r.mask);
        let st = Arc::make_mut(&mut t.subtables[idx]);
        let mut v: Vec<Arc<Rule>> = st.take(&r.key).map(Vec::from).unwrap_or_default();
        let replaced = v.iter().position(|x| x.priority == r.priority);
        // Its slot: the replaced flow's, else a free one.
        r.slot = match replaced {
            Some(i) => {
                let old = v.remove(i);
                if st.is_best(&old) {
                    st.stale = true;
                }
                old.slot
            }
            None => self.free.pop().unwrap_or_else(|| {
                self.rules.push(Rule::vacant());
                u32::try_from(self.rules.len() - 1).expect("fewer than 2^32 flows")
            }),
        };
        if (st.map.is_empty() && v.is_empty())
            || r.priority > st.max_priority
            || (r.priority == st.max_priority && r.seq < st.first_seq)
        {
            (st.max_priority, st.first_seq) = (r.priority, r.seq);
        }
        let r = Arc::new(r);
        self.rules[r.slot as usize] = r.clone();
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
    pub(super) fn update_rules(
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
    pub(super) fn update_within(
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
            let (arena, free) = (&mut self.rules, &mut self.free);
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
                                Some(nr) => {
                                    // The same flow: its slot.
                                    let nr = Arc::new(Rule { slot: r.slot, ..nr });
                                    arena[r.slot as usize] = nr.clone();
                                    out.push(nr)
                                }
                                None => {
                                    lost_best |= (r.priority, r.seq) == best;
                                    arena[r.slot as usize] = Rule::vacant();
                                    free.push(r.slot);
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
    pub(super) fn header_mask(&self, proto: u8) -> &HeaderMask {
        let i = match proto {
            key::num::TCP | key::num::UDP | key::num::SCTP => 0,
            key::num::ICMP | key::num::ICMP6 => 1,
            _ => 2,
        };
        &self.header_masks[i]
    }

    /// The flow at `slot` of this snapshot's arena (what the caches hold:
    /// a flow's [`Rule::slot`]). A bounds-checked index: a slot of
    /// another snapshot (which the caches' generation check keeps from
    /// here) is at worst another flow, [`Rule::vacant`] or none, never a
    /// dangling reference.
    #[inline(always)]
    pub(super) fn rule(&self, slot: u32) -> Option<&Rule> {
        self.rules.get(slot as usize).map(|r| &**r)
    }

    /// The arena holds exactly the tables' flows, each at its slot, and
    /// `free` lists exactly its other slots (tests).
    #[cfg(test)]
    pub(super) fn check_arena(&self) {
        let mut seen = vec![false; self.rules.len()];
        for r in self.tables.iter().flat_map(|t| t.rules()) {
            let s = r.slot as usize;
            assert!(Arc::ptr_eq(&self.rules[s], r), "flow not at its slot {s}");
            assert!(!std::mem::replace(&mut seen[s], true), "slot {s} twice");
        }
        let mut free = self.free.clone();
        free.sort_unstable();
        let want: Vec<u32> = (0..seen.len() as u32)
            .filter(|&s| !seen[s as usize])
            .collect();
        assert_eq!(free, want, "free slots");
        for &s in &self.free {
            assert!(Arc::ptr_eq(&self.rules[s as usize], &Rule::vacant()));
        }
    }

    #[cfg(test)]
    pub(super) fn count(&self) -> usize {
        self.tables.iter().map(|t| t.rules().count()).sum()
    }
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
    pub(super) fn begin(&self, w: &mut Writer) -> Snapshot {
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
    pub(super) fn commit(&self, w: &mut Writer, mut next: Snapshot, changed: bool) {
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
