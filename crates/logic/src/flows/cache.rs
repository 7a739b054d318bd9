//! Per-worker exact-match cache in front of the tuple-space classifier.
//!
//! Each worker owns a two-way array of entries (a key's entry is the one
//! its hash picks or that one's neighbour). An entry maps a packet's key
//! under the snapshot's fields in use (the union of its masks, in_port
//! and the VLAN TCI always in) plus its [`super::key::meta`] bits to the
//! flows the pipeline hit, in order (at most [`MAX_RULES`]), and the
//! table that missed, if any. A hit replays those flows' actions on the
//! packet without a single classifier lookup.
//!
//! Why the flows hit are a function of (key under the fields in use,
//! meta): a table's choice depends only on the key at that point, under
//! its subtables' masks (all part of the fields in use); `mod_dl_*` sets key fields;
//! `mod_nw_*` / `mod_tp_*` change the key's field exactly when the frame
//! has the IPv4 / TCP-UDP header they rewrite (the `IP4` / `L4` bits);
//! whether `dec_ttl` drops (after which rewrites are skipped) depends on
//! the TTL (the low 8 bits). `pop_vlan` brings in an inner tag the key does
//! not hold, so a pipeline that looks up a table after a `pop_vlan` is not
//! cached; neither is one hitting more than [`MAX_RULES`] flows.
//!
//! Invalidation: every entry carries the generation of the snapshot it
//! was filled from; every snapshot gets a new generation when it is built
//! (`Snapshot`'s `Clone` draws one, from one counter for every instance of
//! the logic), and an entry is used only while the worker's loaded
//! snapshot has the same generation. So after a swap no entry of an older
//! snapshot is served, and the flows an entry holds (slots in the arena of
//! the snapshot it was filled from, [`Rule::slot`]) are those of the
//! snapshot the worker holds for the whole batch, looked up there with a
//! bounds check ([`super::Snapshot::rule`]). That holds whichever `Flows`
//! a worker's cache is used with: a generation is never drawn twice. (Were
//! it not to, a slot would at worst name another flow or none: wrong
//! counters, never a dangling reference.)
//!
//! Behind it, on a miss, the megaflow cache (`megaflow.rs`): entries of
//! the same layout (as many again), keyed by the key under the bits the
//! lookups consulted.
//!
//! Ownership: a worker's cache ([`WorkerCache`]: both arrays of entries,
//! the megaflow masks, where its last batch left off) is one object the
//! fabric asks the logic for when it installs it, one per worker
//! ([`fabric::Logic::worker_state`]), and hands back to the worker's every
//! batch with `&mut` access ([`fabric::Logic::classify_with`]): no flag,
//! no lock, no sharing, any number of workers. A caller without one (a
//! test, the control path's packet-out) goes through the classifier. The
//! entries are anonymous mappings (`floor::ZeroedArray`), never written
//! when made: zero pages that take memory only once the worker touches
//! them.

use std::mem::MaybeUninit;

use super::key::{CKey, Header, HeaderMask};
use super::megaflow::Masks;
#[cfg(doc)]
use super::Rule;
use crate::Verdict;

/// Flows per cached pipeline.
pub const MAX_RULES: usize = 4;
/// Default entries per worker.
pub const DEFAULT_ENTRIES: usize = 8192;
/// Largest entries per worker the configuration accepts.
pub const MAX_ENTRIES: usize = 1 << 20;

/// One cached pipeline (two cache lines).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
pub struct Entry {
    pub key: CKey,
    /// Snapshot generation; 0 (never a snapshot's) = empty.
    pub gen: u64,
    pub meta: u32,
    /// Flows in `rules`.
    pub n: u8,
    /// 1 + the table that missed at the end, or 0.
    pub miss: u8,
    /// In the megaflow array: the slot of the mask `key` is under
    /// (`megaflow.rs`); 0 in the exact-match array.
    pub mask: u8,
    /// The flows, by slot in the snapshot's arena ([`Rule::slot`]; looked
    /// up only under the generation check: the module comment).
    pub rules: [u32; MAX_RULES],
    /// The pipeline only outputs (at most once) or drops: `verdict` is its
    /// verdict, no action needs to run.
    pub pure: bool,
    /// Written whenever `pure` is (zeroed entries never read it).
    pub verdict: MaybeUninit<Verdict>,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 128);

// SAFETY: `Entry` is `repr(C)` of integers (`CKey`'s words, the flows'
// slots), a `bool` and a `MaybeUninit`: all zero bytes are a valid
// entry (generation 0: empty, never read further).
unsafe impl floor::Zeroable for Entry {}

/// Where a worker's last batch left off, for the next one: the entry the
/// last frame used and, when the batch ended in a run of one flow, that
/// run (so it goes on in the next batch without a lookup).
#[derive(Clone, Copy, Default)]
pub struct Resume {
    /// The entry the batch's last frame used (the first frame of the next
    /// batch tries it first).
    pub last: usize,
    /// The run the batch ended in, if it did.
    pub run: Option<RunEnd>,
}

/// A run of one flow that reached the end of its batch: its frames had
/// header `h` under `mask` (the snapshot's, for their protocol), were received on `ingress` and served by the pure entry at
/// `at`, then holding `key`, `meta` and `gen`. The next batch continues it
/// only if that entry still holds them (any write to it changes them) and `gen` is the loaded
/// snapshot's.
#[derive(Clone, Copy)]
pub struct RunEnd {
    pub at: usize,
    pub ingress: u16,
    pub h: Header,
    pub mask: HeaderMask,
    pub key: CKey,
    pub meta: u32,
    pub gen: u64,
}

/// One worker's caches: its exact-match entries, its megaflow entries and
/// masks, and where its last batch left off. Made by
/// [`fabric::Logic::worker_state`] on the control path, used by one worker
/// at a time through `&mut` (`classify_with`).
pub struct WorkerCache {
    /// Exact-match entries.
    emc: floor::ZeroedArray<Entry>,
    /// Megaflow entries (`megaflow.rs`), as many.
    mf: floor::ZeroedArray<Entry>,
    resume: Resume,
    masks: Masks,
}

impl WorkerCache {
    /// `per` exact-match and `per` megaflow entries (a power of two).
    pub fn new(per: usize) -> Result<WorkerCache, String> {
        // Not reserved: only the pages the worker touches take memory (the
        // largest configuration maps 256 MiB of address space a worker).
        // Zero pages are valid entries (`Entry: Zeroable`), page-aligned
        // (Entry needs 64).
        let map = || {
            let a = floor::ZeroedArray::<Entry>::new(per).map_err(|e| {
                format!(
                    "cannot map {} MiB for a worker's exact-match and megaflow caches: {e}",
                    (2 * per * std::mem::size_of::<Entry>()) >> 20
                )
            })?;
            // Huge pages where the kernel has them (transparent): a
            // worker's entries in one or two TLB entries instead of
            // hundreds (a miss of the TLB costs more than the probe). Only
            // a hint: failure is fine.
            let _ = a.mapping().advise(libc::MADV_HUGEPAGE);
            Ok::<_, String>(a)
        };
        Ok(WorkerCache {
            emc: map()?,
            mf: map()?,
            resume: Resume::default(),
            masks: Masks::default(),
        })
    }

    /// Index of `hash` in the worker's entries.
    #[inline]
    pub fn index(&self, hash: u64) -> usize {
        (hash as usize) & (self.emc.len() - 1)
    }

    /// What the worker's previous batch left for this one.
    #[inline]
    pub fn resume(&mut self) -> &mut Resume {
        &mut self.resume
    }

    /// The worker's megaflow masks.
    #[inline]
    pub fn masks(&mut self) -> &mut Masks {
        &mut self.masks
    }

    /// The megaflow entry at `i` (taken modulo the entries).
    #[inline]
    pub fn mf_entry(&mut self, i: usize) -> &mut Entry {
        self.mf.wrap_mut(i)
    }

    /// The exact-match entry at `i` (taken modulo the entries).
    #[inline]
    pub fn entry(&mut self, i: usize) -> &mut Entry {
        self.emc.wrap_mut(i)
    }
}
