//! The data path: `classify`'s exact-match hit loop and runs of one flow,
//! the caches' miss path, the pipeline of tables the classifier runs, the
//! replay of a cached pipeline, and the counters of a batch.

use std::mem::MaybeUninit;
use std::sync::atomic::Ordering::Relaxed;

use super::classifier::Rule;
use super::counters::Run;
use super::exec::{self, Exec};
use super::key::{self, CKey, Header, HeaderMask, Key};
use super::{cache, extract, Action, Flows, Snapshot, MAX_TABLE};
use crate::{Ctx, DropReason, PktMut, Pkts, PortId, Verdict};

/// Counters of one batch, added to the shared atomics once at its end
/// (atomic read-modify-writes cost more than a lookup): per table in two
/// arrays, per flow over runs of consecutive hits on the same flow.
///
/// The per-table arrays are initialised lazily, up to the highest table
/// looked up so far (`tables`): zeroing all 255 tables' counters cost more
/// per batch than the lookups of a batch of cache hits.
pub(super) struct Acc<'a> {
    pub(super) lookups: [MaybeUninit<u32>; MAX_TABLE as usize + 1],
    pub(super) misses: [MaybeUninit<u32>; MAX_TABLE as usize + 1],
    /// Tables `0..tables` have initialised counters.
    pub(super) tables: usize,
    pub(super) run: Run<'a>,
    /// Copies of frames sent (`copies` in `dump`), added once per batch.
    pub(super) copies: u32,
    /// The data-path clock in whole seconds (the `normal` action's aging).
    pub(super) now_s: u32,
    /// The data-path clock in nanoseconds (meters).
    pub(super) now_ns: u64,
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
pub(super) struct Trace {
    /// The flows hit, by slot ([`cache::Entry::rules`]).
    pub(super) rules: [u32; cache::MAX_RULES],
    pub(super) n: u8,
    pub(super) miss: u8,
    pub(super) cacheable: bool,
    /// Only output actions (and drops) ran...
    pub(super) pure: bool,
    /// ... this many outputs.
    pub(super) outputs: u32,
    /// The bits of the key the lookups consulted (the megaflow mask, but
    /// for `Key::in_use_always`), when `pipeline` tracks them.
    pub(super) mask: Key,
}

impl Default for Trace {
    fn default() -> Self {
        Trace {
            rules: [0; cache::MAX_RULES],
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
pub(super) trait Hook {
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
pub(super) fn key_meta(b: &[u8], in_port: u16) -> (CKey, u32) {
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
fn emc_way(c: &mut cache::WorkerCache, at: usize, gen: u64, misses: u64) -> Option<usize> {
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
        c: &mut cache::WorkerCache,
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
    pub(super) fn pipeline<'s, H: Hook, const MF: bool>(
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
                    t.rules[t.n as usize] = r.slot;
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
            Self::count(snap, e, acc, worker, 1, p.len() as u64);
            // SAFETY: written with `pure` (cache.rs).
            return unsafe { e.verdict.assume_init() };
        }
        self.replay_actions(snap, e, p, ingress, acc, worker)
    }

    /// The counters of `packets` frames of `bytes` bytes in all through
    /// the cached pipeline `e` (of the loaded snapshot): its flows, its
    /// tables' lookups, its miss.
    #[inline(always)]
    fn count<'s>(
        snap: &'s Snapshot,
        e: &cache::Entry,
        acc: &mut Acc<'s>,
        worker: u16,
        packets: u32,
        bytes: u64,
    ) {
        for &r in &e.rules[..e.n as usize] {
            // The entry's generation is the loaded snapshot's, which holds
            // this flow at this slot (cache.rs).
            let Some(r) = snap.rule(r) else { continue };
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
            // As in `count`.
            let Some(r) = snap.rule(r) else { continue };
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

    /// `Logic::classify` and `classify_with` (the trait's methods call it;
    /// inlined there): with the worker's cache `cache`, or through the
    /// classifier without one.
    #[inline(always)]
    pub(super) fn classify_batch(
        &self,
        cache: Option<&mut cache::WorkerCache>,
        ctx: &Ctx,
        ingress: PortId,
        pkts: &mut Pkts,
        verdicts: &mut [Verdict],
    ) {
        let snap = self.snap.load();
        let mut acc = Acc::at(ctx.now_ns);
        match cache {
            Some(c) => {
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
                            Self::count(&snap, e, &mut acc, ctx.worker, m as u32, bytes);
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
                                Self::count(
                                    &snap,
                                    c.entry(at),
                                    &mut acc,
                                    ctx.worker,
                                    m as u32,
                                    bytes,
                                );
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
                        c, &snap, &mut p, ingress, k, meta, at, misses, &mut acc, ctx.worker,
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
}
