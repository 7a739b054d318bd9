//! Second-level cache behind the exact-match cache: megaflows.
//!
//! A megaflow is a packet key under the mask of the bits the pipeline's
//! lookups actually consulted (what Open vSwitch's datapath keeps): for
//! every table looked up, the masks of the subtables probed before the
//! lookup stopped (the priority early exit: subtables ranked below the
//! match are never probed, so their fields stay wildcarded), and of a
//! subtable whose staged probe failed at an earlier stage only the stages
//! up to the failed one ([`super::Subtable`]); plus the ingress port and
//! the VLAN TCI (what `output` to the ingress and `mod_vlan_*` depend on),
//! as in the exact-match cache's fields in use, and the same
//! [`super::key::meta`] bits. The flows a packet hits, table after table,
//! are a function of that masked key: each lookup's result depends only on
//! the key under the masks it consulted (which subtable it stopped at
//! depends only on the matches found before), and a rewrite sets a field
//! to a constant (keeping the original bits in the mask is more than
//! needed, never less). So packets the flows do not tell apart share one
//! entry even when other flows, of lower priority or whose early stages
//! already fail, match the bits they differ in (an ACL of /32 addresses
//! and ports below the hit flow costs nothing).
//!
//! Per worker: up to [`MASKS`] distinct megaflow masks ([`Masks`], kept
//! ordered by hits, so a lookup usually probes one or two), and a two-way
//! array of entries (the exact-match cache's [`Entry`], keyed by the
//! masked key, the meta bits and the mask's slot), as many as the
//! exact-match cache has (`"cache"`), in an anonymous mapping of its own
//! (128 bytes each: 1 MiB per worker at the default 8192, taken only as
//! the worker touches it). A lookup on an exact-match miss tries each mask in
//! turn: mask the key, hash, probe two ways. A hit also fills the
//! exact-match cache (with its replacement rule), so a working set that
//! fits there is served there next time.
//!
//! Invalidation: entries carry the snapshot generation like the exact-
//! match cache's; the mask list records its generation and is emptied when
//! the worker sees a new snapshot. Bounded: when the [`MASKS`] slots are
//! taken, pipelines of a new mask are not cached here (they still are in
//! the exact-match cache). Nothing is allocated or locked on the packet
//! path: the masks and the entries live in the worker's own cache
//! ([`WorkerCache`], made on the control path when the fabric installs the
//! logic, and used by that worker alone).

use std::collections::BTreeMap;

use super::cache::{Entry, WorkerCache};
use super::key::{CKey, Field, Key};

/// Distinct megaflow masks per worker (per snapshot).
pub const MASKS: usize = 16;

/// A worker's megaflow masks for one snapshot generation.
#[derive(Clone, Copy)]
pub struct Masks {
    /// Generation the masks belong to (0: none yet).
    gen: u64,
    /// Slots in use.
    n: u8,
    /// Slots by hits, most first (a lookup tries them in this order).
    order: [u8; MASKS],
    hits: [u32; MASKS],
    masks: [CKey; MASKS],
}

impl Default for Masks {
    fn default() -> Masks {
        Masks {
            gen: 0,
            n: 0,
            order: std::array::from_fn(|i| i as u8),
            hits: [0; MASKS],
            masks: [CKey::default(); MASKS],
        }
    }
}

impl Masks {
    /// Empties the list if it belongs to another generation.
    #[inline]
    fn sync(&mut self, gen: u64) {
        if self.gen != gen {
            self.gen = gen;
            self.n = 0;
            self.hits = [0; MASKS];
            self.order = std::array::from_fn(|i| i as u8);
        }
    }

    /// The slot of `m`, added if there is room.
    fn slot_of(&mut self, m: &CKey) -> Option<u8> {
        let n = self.n as usize;
        if let Some(s) = self.masks[..n].iter().position(|x| x == m) {
            return Some(s as u8);
        }
        if n == MASKS {
            return None;
        }
        self.masks[n] = *m;
        self.hits[n] = 0;
        self.order[n] = n as u8;
        self.n += 1;
        Some(n as u8)
    }

    /// A hit on the slot at position `j` of the order: it moves up one
    /// place when it has more hits than the one before.
    #[inline]
    fn hit(&mut self, j: usize) {
        let s = self.order[j] as usize;
        self.hits[s] = self.hits[s].saturating_add(1);
        if j > 0 && self.hits[s] > self.hits[self.order[j - 1] as usize] {
            self.order.swap(j, j - 1);
        }
    }
}

/// The hash of a megaflow entry's key, meta bits and mask slot.
#[inline]
fn hash(mk: &CKey, meta: u32, slot: u8) -> u64 {
    mk.hash_with(meta as u64 | (slot as u64) << 32)
}

#[inline]
fn valid(e: &Entry, mk: &CKey, meta: u32, slot: u8, gen: u64) -> bool {
    e.gen == gen && e.mask == slot && e.meta == meta && e.key == *mk
}

impl WorkerCache {
    /// The megaflow entry serving `k` (a packet key, under any superset of
    /// the megaflow masks) with `meta` under snapshot `gen`: its index for
    /// [`WorkerCache::mf_entry`].
    #[inline]
    pub fn mf_lookup(&mut self, k: &CKey, meta: u32, gen: u64) -> Option<usize> {
        let ms = self.masks();
        ms.sync(gen);
        let n = ms.n as usize;
        for j in 0..n {
            // Re-borrowed per mask: `mf_entry` borrows the cache too.
            let ms = self.masks();
            let slot = ms.order[j];
            let mk = k.and(&ms.masks[slot as usize]);
            let at = self.index(hash(&mk, meta, slot));
            let at = if valid(self.mf_entry(at), &mk, meta, slot, gen) {
                at
            } else if valid(self.mf_entry(at ^ 1), &mk, meta, slot, gen) {
                at ^ 1
            } else {
                continue;
            };
            self.masks().hit(j);
            return Some(at);
        }
        None
    }

    /// Records the pipeline `e` (its key: the packet's, under any superset
    /// of `mask`) as the megaflow of `mask`; `turn` picks the way to
    /// replace when both hold entries of this snapshot. False if the
    /// worker's mask slots are full.
    pub fn mf_insert(&mut self, e: &Entry, mask: &CKey, turn: u64) -> bool {
        let ms = self.masks();
        ms.sync(e.gen);
        let Some(slot) = ms.slot_of(mask) else {
            return false;
        };
        let mk = e.key.and(mask);
        let at = self.index(hash(&mk, e.meta, slot));
        let at = if self.mf_entry(at).gen != e.gen {
            at
        } else if self.mf_entry(at ^ 1).gen != e.gen {
            at ^ 1
        } else {
            at ^ (turn & 1) as usize
        };
        *self.mf_entry(at) = Entry {
            key: mk,
            mask: slot,
            ..*e
        };
        true
    }
}

/// The fields a subtable keeps a [`Prefix`] index of, when its mask on
/// them is a prefix: the IPv4 addresses and the L4 ports.
const PREFIX_FIELDS: [Field; 4] = [Field::Ip4Src, Field::Ip4Dst, Field::TpSrc, Field::TpDst];

/// The distinct values of one field among a subtable's flows, in order:
/// what Open vSwitch's prefix tries give, from an ordered map. The flows'
/// values closest to a packet's (its neighbours in the order) share the
/// longest prefix with it; when that is shorter than the subtable's
/// prefix length, no flow of the subtable can match, and the packet's
/// megaflow needs only the field's bits up to the first that differs from
/// every flow (an ACL of /32 source addresses: a few top bits, not 32).
#[derive(Clone)]
pub(super) struct Prefix {
    pub(super) field: Field,
    /// Prefix length of the subtable's mask on the field.
    plen: u32,
    /// Field value (under the mask) → buckets with it.
    pub(super) values: BTreeMap<u64, u32>,
}

impl Prefix {
    /// Indices for the prefix-shaped fields of `mask`.
    pub(super) fn for_mask(mask: &Key) -> Vec<Prefix> {
        PREFIX_FIELDS
            .iter()
            .filter_map(|&field| {
                let bits = field.bits();
                let m = mask.get(field) as u64;
                let plen = m.leading_zeros().saturating_sub(64 - bits);
                let plen = bits - plen;
                // Prefix-shaped and not empty: the top `plen` bits.
                let want = ((1u64 << plen) - 1) << (bits - plen);
                (m != 0 && m == want).then(|| Prefix {
                    field,
                    plen,
                    values: BTreeMap::new(),
                })
            })
            .collect()
    }

    /// A bucket of masked key `k` was added.
    pub(super) fn add(ps: &mut [Prefix], k: &Key) {
        for p in ps {
            *p.values.entry(k.get(p.field) as u64).or_insert(0) += 1;
        }
    }

    /// The bucket of masked key `k` went.
    pub(super) fn remove(ps: &mut [Prefix], k: &Key) {
        for p in ps {
            let v = k.get(p.field) as u64;
            if let Some(n) = p.values.get_mut(&v) {
                *n -= 1;
                if *n == 0 {
                    p.values.remove(&v);
                }
            }
        }
    }

    /// If no flow's value shares this index's prefix with `k`'s: the bits
    /// of the field that tell so (its top bits down to the first that
    /// differs from every flow's value).
    #[inline]
    pub(super) fn rules_out(&self, k: &Key) -> Option<Key> {
        let bits = self.field.bits();
        let top = bits - self.plen;
        let v = (k.get(self.field) as u64) >> top << top;
        // Common prefix length within the field's `bits`.
        let lcp = |r: u64| ((r ^ v) << (64 - bits)).leading_zeros().min(bits);
        let below = self
            .values
            .range(..=v)
            .next_back()
            .map_or(0, |(&r, _)| lcp(r));
        if below >= self.plen {
            return None;
        }
        let above = self.values.range(v..).next().map_or(0, |(&r, _)| lcp(r));
        if above >= self.plen {
            return None;
        }
        let need = below.max(above) + 1;
        let mut m = Key::default();
        m.set(self.field, (((1u64 << need) - 1) << (bits - need)) as u128);
        Some(m)
    }
}
