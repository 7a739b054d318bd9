//! Inner MAC → remote endpoint table, learned from decapsulated traffic,
//! with aging; lock-free (the bridge logic's layout, smaller).
//!
//! 4-way buckets of `AtomicU64` keys (MAC in the upper 48 bits, remote id
//! plus 1 in the lower 16; 0 = empty) and `AtomicU32` timestamps (seconds).
//! Receive queues learn, transmit queues look up, concurrently and without
//! a lock; an entry is rewritten only when it changes or its stamp is at
//! least a second old. Lookups of entries older than the aging time miss.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};

const WAYS: usize = 4;

#[repr(C, align(64))]
struct Bucket {
    keys: [AtomicU64; WAYS],
    stamps: [AtomicU32; WAYS],
}

/// The table.
pub struct Fdb {
    buckets: Box<[Bucket]>,
    mask: usize,
    aging_s: u32,
}

#[inline]
fn mac48(b: &[u8]) -> u64 {
    u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
}

#[inline]
fn hash(mac: u64) -> usize {
    (mac.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) as usize
}

impl Fdb {
    /// A table of `entries` (rounded up to a power of two ≥ 4) with aging
    /// `aging_s` seconds (0 = never).
    pub fn new(entries: usize, aging_s: u32) -> Fdb {
        let n = (entries.max(WAYS).next_power_of_two()) / WAYS;
        Fdb {
            buckets: (0..n)
                .map(|_| Bucket {
                    keys: Default::default(),
                    stamps: Default::default(),
                })
                .collect(),
            mask: n - 1,
            aging_s,
        }
    }

    fn expired(&self, stamp: u32, now: u32) -> bool {
        self.aging_s != 0 && now.saturating_sub(stamp) >= self.aging_s
    }

    /// The remote id that `mac` (6 bytes) was last seen behind.
    #[inline]
    pub fn lookup(&self, mac: &[u8], now: u32) -> Option<u16> {
        let m = mac48(mac);
        let b = &self.buckets[hash(m) & self.mask];
        for w in 0..WAYS {
            let k = b.keys[w].load(Relaxed);
            if k != 0 && k >> 16 == m {
                if self.expired(b.stamps[w].load(Relaxed), now) {
                    return None;
                }
                return Some((k & 0xffff) as u16 - 1);
            }
        }
        None
    }

    /// Records that unicast `mac` is behind remote `id`. Returns true when
    /// an entry was created or moved.
    #[inline]
    pub fn learn(&self, mac: &[u8], id: u16, now: u32) -> bool {
        if mac[0] & 1 != 0 || id == u16::MAX {
            return false;
        }
        let m = mac48(mac);
        let key = (m << 16) | (id as u64 + 1);
        let b = &self.buckets[hash(m) & self.mask];
        let mut victim = 0;
        let mut oldest = u32::MAX;
        for w in 0..WAYS {
            let k = b.keys[w].load(Relaxed);
            if k != 0 && k >> 16 == m {
                if k != key {
                    b.keys[w].store(key, Relaxed);
                    b.stamps[w].store(now, Relaxed);
                    return true;
                }
                if b.stamps[w].load(Relaxed) != now {
                    b.stamps[w].store(now, Relaxed);
                }
                return false;
            }
            let s = if k == 0 { 0 } else { b.stamps[w].load(Relaxed) };
            let s = if k != 0 && self.expired(s, now) { 0 } else { s };
            if k == 0 || s < oldest {
                oldest = if k == 0 { 0 } else { s };
                victim = w;
                if k == 0 {
                    break;
                }
            }
        }
        b.stamps[victim].store(now, Relaxed);
        b.keys[victim].store(key, Relaxed);
        true
    }

    /// Forgets every entry pointing at remote `id` (control path).
    pub fn forget_remote(&self, id: u16) {
        for b in self.buckets.iter() {
            for k in &b.keys {
                let v = k.load(Relaxed);
                if v != 0 && (v & 0xffff) as u16 == id.wrapping_add(1) {
                    let _ = k.compare_exchange(v, 0, Relaxed, Relaxed);
                }
            }
        }
    }

    /// Live entries as (MAC, remote id, age in seconds) (control path).
    pub fn entries(&self, now: u32) -> Vec<([u8; 6], u16, u32)> {
        let mut out = Vec::new();
        for b in self.buckets.iter() {
            for w in 0..WAYS {
                let k = b.keys[w].load(Relaxed);
                let s = b.stamps[w].load(Relaxed);
                if k != 0 && !self.expired(s, now) {
                    let m = (k >> 16).to_be_bytes();
                    let mut mac = [0u8; 6];
                    mac.copy_from_slice(&m[2..8]);
                    out.push((mac, (k & 0xffff) as u16 - 1, now.saturating_sub(s)));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn learn_lookup_move_age() {
        let f = Fdb::new(64, 10);
        let a = [2, 0, 0, 0, 0, 1];
        assert_eq!(f.lookup(&a, 0), None);
        assert!(f.learn(&a, 3, 100));
        assert!(!f.learn(&a, 3, 101));
        assert_eq!(f.lookup(&a, 105), Some(3));
        assert!(f.learn(&a, 4, 106)); // moved
        assert_eq!(f.lookup(&a, 106), Some(4));
        assert_eq!(f.lookup(&a, 116), None); // aged
        assert!(!f.learn(&[1, 0, 0x5e, 0, 0, 1], 1, 0)); // multicast source
        assert_eq!(f.entries(106).len(), 1);
        f.forget_remote(4);
        assert_eq!(f.lookup(&a, 106), None);
    }

    #[test]
    fn full_bucket_evicts_the_oldest() {
        let f = Fdb::new(4, 0); // one bucket
        for i in 0..4u8 {
            f.learn(&[2, 0, 0, 0, 0, i], i as u16, 10 + i as u32);
        }
        f.learn(&[2, 0, 0, 0, 0, 9], 9, 20);
        assert_eq!(f.lookup(&[2, 0, 0, 0, 0, 0], 20), None);
        assert_eq!(f.lookup(&[2, 0, 0, 0, 0, 9], 20), Some(9));
        assert_eq!(f.lookup(&[2, 0, 0, 0, 0, 3], 20), Some(3));
    }
}
