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
//! (`Snapshot`'s `Clone` draws one), and an entry is used only while the
//! worker's loaded snapshot has the same generation. So after a swap no
//! entry of an older snapshot is served, and the flow pointers an entry
//! holds are alive whenever they are used (the worker holds the snapshot
//! they belong to).
//!
//! Behind it, on a miss, the megaflow cache (`megaflow.rs`): entries of
//! the same layout in the same mapping (a second `per` entries per
//! worker), keyed by the key under the bits the lookups consulted.
//!
//! Ownership: a worker claims its slot for a batch with an atomic flag
//! (`claim`); a second caller with the same worker index at the same time
//! (never the fabric's own workers) goes through the classifier instead. No
//! lock is waited on, nothing is allocated: the entries are one anonymous
//! mapping made when the logic is built (zero pages that take memory only
//! once a worker touches them: an unused worker's entries cost nothing).

use std::cell::UnsafeCell;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicBool, Ordering};

use super::key::{CKey, Header, HeaderMask};
use super::megaflow::Masks;
use super::Rule;
use crate::Verdict;

/// Workers with a cache (indices at or above go through the classifier).
/// (The fabric runs at most 64 workers.)
pub const WORKERS: usize = 64;
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
    pub rules: [*const Rule; MAX_RULES],
    /// The pipeline only outputs (at most once) or drops: `verdict` is its
    /// verdict, no action needs to run.
    pub pure: bool,
    /// Written whenever `pure` is (zeroed entries never read it).
    pub verdict: MaybeUninit<Verdict>,
}

const _: () = assert!(std::mem::size_of::<Entry>() == 128);

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
/// only if that entry still holds them (any write to it, by this worker
/// or a later claim of its slot, changes them) and `gen` is the loaded
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

/// A worker's claim flag, what its last batch left for the next, and its
/// megaflow masks.
#[derive(Default)]
#[repr(align(64))]
struct Flag(AtomicBool, UnsafeCell<Resume>, UnsafeCell<Masks>);

/// Every worker's entries.
pub struct Cache {
    /// `2 * WORKERS * per` entries (an anonymous mapping, or null when
    /// `per` is 0): worker `w`'s exact-match entries at `w * per ..`, its
    /// megaflow entries at `(WORKERS + w) * per ..`.
    entries: *mut Entry,
    per: usize,
    busy: Box<[Flag]>,
    /// The mapping `entries` points into (none when `per` is 0), unmapped
    /// when the cache drops; no claim outlives `self`.
    _map: Option<floor::Mmap>,
}

// SAFETY: an entry range (and a worker's `Resume`) is only accessed
// through a `Claim`, of which at most one exists per worker at a time (the `busy` flag, taken with
// Acquire and released with Release, orders successive claims). The raw
// flow pointers are only dereferenced while the snapshot holding the flows
// is loaded (see the module comment).
unsafe impl Sync for Cache {}
// SAFETY: as above; the pointers are never freed through the cache.
unsafe impl Send for Cache {}

impl Cache {
    fn bytes(&self) -> usize {
        2 * self.per * WORKERS * std::mem::size_of::<Entry>()
    }

    /// `per` entries per worker (a power of two, or 0: no cache).
    pub fn new(per: usize) -> Result<Cache, String> {
        assert!(per == 0 || per.is_power_of_two());
        let mut c = Cache {
            entries: std::ptr::null_mut(),
            per,
            busy: (0..WORKERS).map(|_| Flag::default()).collect(),
            _map: None,
        };
        if per == 0 {
            return Ok(c);
        }
        // Not reserved: only the pages workers touch take memory (the
        // largest configuration maps 16 GiB of address space). Its zero
        // pages are valid entries (integers, null pointers, false,
        // MaybeUninit), page-aligned (Entry needs 64).
        let map = floor::Mmap::anonymous(c.bytes())
            .noreserve()
            .map()
            .map_err(|e| {
                format!(
                    "cannot map {} MiB for the exact-match and megaflow caches: {e}",
                    c.bytes() >> 20
                )
            })?;
        // Huge pages where the kernel has them (transparent): a worker's
        // entries in one or two TLB entries instead of hundreds (a miss of
        // the TLB costs more than the probe). Only a hint: failure is fine.
        let _ = map.advise(libc::MADV_HUGEPAGE);
        c.entries = map.as_ptr().cast();
        c._map = Some(map);
        Ok(c)
    }

    /// Entries per worker.
    pub fn per_worker(&self) -> usize {
        self.per
    }

    /// Worker `w`'s entries for one batch; None if there is no cache, no
    /// slot for `w`, or another caller holds it right now.
    #[inline]
    pub fn claim(&self, w: u16) -> Option<Claim<'_>> {
        let w = w as usize;
        if self.per == 0 || w >= WORKERS {
            return None;
        }
        if self.busy[w].0.swap(true, Ordering::Acquire) {
            return None;
        }
        Some(Claim {
            cache: self,
            base: w * self.per,
            w,
        })
    }
}

/// Exclusive use of one worker's entries.
pub struct Claim<'a> {
    cache: &'a Cache,
    base: usize,
    w: usize,
}

impl Claim<'_> {
    /// Index of `hash` in this worker's entries.
    #[inline]
    pub fn index(&self, hash: u64) -> usize {
        (hash as usize) & (self.cache.per - 1)
    }

    /// What the worker's previous batch left for this one.
    #[inline]
    pub fn resume(&mut self) -> &mut Resume {
        // SAFETY: only a claim reads or writes a worker's `Resume`, and this
        // claim is the worker's only one (busy flag, as in `entry`).
        unsafe { &mut *self.cache.busy[self.w].1.get() }
    }

    /// Whether there are megaflow entries (there are with a cache).
    #[inline]
    pub fn has_mf(&self) -> bool {
        self.cache.per != 0
    }

    /// The worker's megaflow masks.
    #[inline]
    pub fn masks(&mut self) -> &mut Masks {
        // SAFETY: as `resume`: only this claim touches the worker's slot.
        unsafe { &mut *self.cache.busy[self.w].2.get() }
    }

    /// The megaflow entry at `i` (taken modulo the entries per worker).
    #[inline]
    pub fn mf_entry(&mut self, i: usize) -> &mut Entry {
        let i = WORKERS * self.cache.per + self.base + (i & (self.cache.per - 1));
        // SAFETY: i < 2 * WORKERS * per, inside the mapping; exclusive as in
        // `entry`.
        unsafe { &mut *self.cache.entries.add(i) }
    }

    /// The entry at `i` (taken modulo the entries per worker).
    #[inline]
    pub fn entry(&mut self, i: usize) -> &mut Entry {
        let i = self.base + (i & (self.cache.per - 1));
        // SAFETY: i < WORKERS * per (base = w * per, w < WORKERS), inside
        // the mapping; this claim is the only one of the worker (busy
        // flag), and `&mut self` makes the returned borrow unique.
        unsafe { &mut *self.cache.entries.add(i) }
    }
}

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.cache.busy[self.w].0.store(false, Ordering::Release);
    }
}
