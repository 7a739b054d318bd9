//! Frames written in place (`TxQueue::fill_in_place`) from templates, as
//! turnout-gen writes them: frame `seq` is its size's template with `seq`
//! in bytes 14..18, so a buffer that still holds the size's template gets
//! only those 4 bytes (`patched`), any other the whole template
//! (`whole`). `too_long` (if not 0) makes every frame whose sequence
//! number is a multiple of it claim one byte more than the buffer: not
//! written, published empty by the queue.

use std::time::{Duration, Instant};

use fabric::{RxBatch, RxQueue, TxQueue};

pub struct Templates {
    pub sizes: Vec<usize>,
    pub next: u32,
    pub whole: u32,
    pub patched: u32,
    pub skipped: u32,
    pub too_long: u32,
    /// The template of a size (one per size: its tag is the size).
    template: fn(usize) -> Vec<u8>,
}

impl Templates {
    pub fn new(sizes: &[usize], template: fn(usize) -> Vec<u8>) -> Self {
        Templates {
            sizes: sizes.to_vec(),
            next: 0,
            whole: 0,
            patched: 0,
            skipped: 0,
            too_long: 0,
            template,
        }
    }

    fn len(&self, seq: u32) -> usize {
        self.sizes[seq as usize % self.sizes.len()]
    }

    /// What is sent as frame `seq`.
    pub fn frame(&self, seq: u32) -> Vec<u8> {
        let mut f = (self.template)(self.len(seq));
        f[14..18].copy_from_slice(&seq.to_le_bytes());
        f
    }

    fn refused(&self, seq: u32) -> bool {
        self.too_long > 0 && seq.is_multiple_of(self.too_long)
    }
}

impl fabric::TxFill for Templates {
    fn fill(&mut self, buf: &mut [u8], tag: &mut u64) -> usize {
        let seq = self.next;
        self.next += 1;
        if self.refused(seq) {
            return buf.len() + 1;
        }
        let len = self.len(seq);
        assert!(len <= buf.len(), "buffer of {} B", buf.len());
        if *tag == len as u64 {
            self.patched += 1;
        } else {
            buf[..len].copy_from_slice(&(self.template)(len));
            *tag = len as u64;
            self.whole += 1;
        }
        buf[14..18].copy_from_slice(&seq.to_le_bytes());
        len
    }

    fn skip(&mut self) -> usize {
        let len = self.len(self.next);
        self.next += 1;
        self.skipped += 1;
        len
    }
}

/// Sends `n` frames from `t` through `tx` in bursts of up to 32, every
/// `copy_every`-th burst copied with `write` instead of filled in place
/// (which leaves the slots' templates unknown), and checks each frame
/// `rx` receives byte for byte (a refused one arrives empty). Returns
/// (frames received, frames the queue refused).
pub fn pump_in_place(
    tx: &dyn TxQueue,
    rx: &mut dyn RxQueue,
    t: &mut Templates,
    n: u32,
    copy_every: u32,
) -> (u32, u64) {
    // SAFETY: this thread is the queue's only user.
    let mut tx = unsafe { fabric::OwnedTx::new(tx) };
    assert!(tx.fills_in_place());
    let mut b = RxBatch::with_capacity(64);
    let (start, mut seq, mut bursts) = (t.next, t.next, 0u32);
    let t0 = Instant::now();
    while seq < start + n && t0.elapsed() < Duration::from_secs(20) {
        let free = tx.free_slots().min(32).min(start + n - t.next);
        if free > 0 {
            let first = tx.reserve(free);
            bursts += 1;
            if bursts.is_multiple_of(copy_every) {
                for k in 0..free {
                    tx.write(first + k as u64, 1, &t.frame(t.next));
                    t.next += 1;
                }
            } else {
                tx.fill(first, free, t);
            }
            tx.publish(first + free as u64);
        }
        let burst = b.receive(rx, 0, 0);
        for p in burst.pkts().iter() {
            if t.refused(seq) {
                assert!(p.data().is_empty(), "frame {seq}: {} B", p.data().len());
            } else {
                assert_eq!(p.data(), &t.frame(seq)[..], "frame {seq}");
            }
            seq += 1;
        }
    }
    (seq - start, tx.refused())
}
