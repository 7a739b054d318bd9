//! A subtable's hash map from masked keys to its flows, narrow when it can
//! be: a mask without bits past the first [`CWORDS`] words (no metadata,
//! tunnel id or neighbour discovery field; most tables) keys the map by
//! those words alone ([`CKey`]), so a probe masks, hashes and compares 8
//! words instead of the [`Key`]'s 14. The two differ in cost only: a
//! narrow map's keys are the masked keys' first words, whose other words
//! are zero under its mask.

use std::collections::HashMap;

use super::key::{BuildKeyHasher, CKey, Key};

/// Masked key → `V`, for the keys of one mask.
#[derive(Clone, Debug)]
pub(super) enum SubMap<V> {
    /// The mask has no bit past the first [`super::key::CWORDS`] words.
    Narrow(HashMap<CKey, V, BuildKeyHasher>),
    /// Any other mask.
    Wide(HashMap<Key, V, BuildKeyHasher>),
}

impl<V> SubMap<V> {
    /// An empty map for the keys of `mask`.
    pub(super) fn new(mask: &Key) -> SubMap<V> {
        if mask.has_wide() {
            SubMap::Wide(HashMap::default())
        } else {
            SubMap::Narrow(HashMap::default())
        }
    }

    /// The value of the key that `k` is under `mask` (the map's mask):
    /// the classifier's probe, `k` not masked.
    #[inline(always)]
    pub(super) fn probe(&self, k: &Key, mask: &Key) -> Option<&V> {
        match self {
            SubMap::Narrow(m) => m.get(&k.and_narrow(mask)),
            SubMap::Wide(m) => m.get(&k.and(mask)),
        }
    }

    /// The value of masked key `k`.
    pub(super) fn get(&self, k: &Key) -> Option<&V> {
        match self {
            SubMap::Narrow(m) => m.get(&k.narrow()),
            SubMap::Wide(m) => m.get(k),
        }
    }

    /// Sets masked key `k` to `v`; the value it had.
    pub(super) fn insert(&mut self, k: Key, v: V) -> Option<V> {
        match self {
            SubMap::Narrow(m) => {
                debug_assert!(!k.has_wide(), "a wide key in a narrow map");
                m.insert(k.narrow(), v)
            }
            SubMap::Wide(m) => m.insert(k, v),
        }
    }

    /// Removes masked key `k`; its value.
    pub(super) fn remove(&mut self, k: &Key) -> Option<V> {
        match self {
            SubMap::Narrow(m) => m.remove(&k.narrow()),
            SubMap::Wide(m) => m.remove(k),
        }
    }

    pub(super) fn is_empty(&self) -> bool {
        match self {
            SubMap::Narrow(m) => m.is_empty(),
            SubMap::Wide(m) => m.is_empty(),
        }
    }

    /// The values, in no order.
    pub(super) fn values(&self) -> Box<dyn Iterator<Item = &V> + '_> {
        match self {
            SubMap::Narrow(m) => Box::new(m.values()),
            SubMap::Wide(m) => Box::new(m.values()),
        }
    }

    /// The masked keys (as whole keys) and their values, in no order.
    #[cfg(test)]
    pub(super) fn iter(&self) -> Box<dyn Iterator<Item = (Key, &V)> + '_> {
        match self {
            SubMap::Narrow(m) => Box::new(m.iter().map(|(k, v)| (k.widen(), v))),
            SubMap::Wide(m) => Box::new(m.iter().map(|(k, v)| (*k, v))),
        }
    }

    /// The masked keys (as whole keys), in no order.
    #[cfg(test)]
    pub(super) fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Keeps the entries for which `f` (masked key, value) says so.
    pub(super) fn retain(&mut self, mut f: impl FnMut(&Key, &mut V) -> bool) {
        match self {
            SubMap::Narrow(m) => m.retain(|k, v| f(&k.widen(), v)),
            SubMap::Wide(m) => m.retain(f),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flows::key::Field;

    /// Narrow and wide maps hold, find (by the probe of an unmasked key
    /// too), list and drop the same keys.
    #[test]
    fn narrow_and_wide_maps_agree() {
        let mut narrow_mask = Key::default();
        narrow_mask.set(Field::InPort, u128::MAX);
        narrow_mask.set(Field::TpDst, u128::MAX);
        let mut wide_mask = narrow_mask;
        wide_mask.set(Field::Metadata, 0xff);
        for mask in [narrow_mask, wide_mask] {
            let mut m: SubMap<u32> = SubMap::new(&mask);
            assert_eq!(matches!(m, SubMap::Wide(_)), mask.has_wide());
            let mut pkt = Key::default();
            pkt.set(Field::InPort, 3);
            pkt.set(Field::TpDst, 80);
            pkt.set(Field::TpSrc, 1234);
            pkt.set(Field::Metadata, 0x1234);
            let k = pkt.and(&mask);
            assert!(m.is_empty());
            assert_eq!(m.insert(k, 7), None);
            assert_eq!(m.insert(k, 8), Some(7));
            assert_eq!(m.get(&k), Some(&8));
            assert_eq!(m.probe(&pkt, &mask), Some(&8));
            let mut other = pkt;
            other.set(Field::TpDst, 81);
            assert_eq!(m.probe(&other, &mask), None);
            assert_eq!(m.keys().collect::<Vec<_>>(), vec![k]);
            assert_eq!(m.iter().map(|(_, v)| *v).sum::<u32>(), 8);
            assert_eq!(m.values().count(), 1);
            m.retain(|kk, v| {
                assert_eq!(*kk, k);
                *v += 1;
                true
            });
            assert_eq!(m.get(&k), Some(&9));
            assert_eq!(m.remove(&k), Some(9));
            assert!(m.is_empty());
        }
    }
}
