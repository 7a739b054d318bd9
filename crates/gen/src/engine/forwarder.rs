//! The forwarder: one burst of the reflect and fwd (chain VNF) roles,
//! received, rewritten in place ([`Rewrite`]) and sent on with one
//! reservation and one publish; a frame that is not sent on is counted by
//! reason ([`FwdStats`]).

use fabric::{RxBatch, RxQueue};
use serde::Serialize;
use wire::{ethernet, MacAddr};

use crate::frame;
use crate::sys::OwnedTx;

/// How a forwarder rewrites frames.
#[derive(Clone, Copy, Debug)]
pub enum Rewrite {
    /// Swap source and destination MAC (reflect).
    SwapMacs,
    /// Set the destination MAC, or leave the frame as is.
    SetDst(Option<MacAddr>),
}

/// Forwarding counters of one direction.
#[derive(Clone, Debug, Default, Serialize)]
pub struct FwdStats {
    /// Frames received.
    pub received: u64,
    /// Frames sent on.
    pub packets: u64,
    /// Bytes sent on.
    pub bytes: u64,
    /// Dropped: the output ring was full.
    pub dropped_tx_full: u64,
    /// Dropped: larger than the output port carries.
    pub dropped_oversize: u64,
    /// Dropped: shorter than an Ethernet header.
    pub dropped_runt: u64,
    /// Touch checksum (with --touch).
    pub touch_sum: u64,
}

impl FwdStats {
    /// All drops.
    pub fn dropped(&self) -> u64 {
        self.dropped_tx_full + self.dropped_oversize + self.dropped_runt
    }
}

/// Receives a burst on `rxq`, rewrites and sends what fits on `tx`.
#[inline]
pub fn forward_burst(
    rxq: &mut dyn RxQueue,
    batch: &mut RxBatch,
    tx: &mut OwnedTx<'_>,
    rewrite: Rewrite,
    touch: bool,
    st: &mut FwdStats,
) -> usize {
    let mut rx = batch.receive(rxq, 0, 0);
    let n = rx.received();
    if n == 0 {
        return 0;
    }
    st.received += n as u64;
    let mut free = tx.free_slots() as u64;
    // Pass 1: rewrite, decide, and count the slots of what will be sent.
    let mut slots = 0u64;
    let mut keep = 0usize;
    for mut p in rx.pkts_mut().iter_mut() {
        let len = p.len();
        if len < ethernet::HEADER_LEN {
            st.dropped_runt += 1;
            p.truncate(0);
            continue;
        }
        let ns = tx.slots_for(len) as u64;
        if ns == 0 {
            st.dropped_oversize += 1;
            p.truncate(0);
            continue;
        }
        if ns > free {
            st.dropped_tx_full += 1;
            p.truncate(0);
            continue;
        }
        free -= ns;
        slots += ns;
        keep += 1;
        let d = p.data_mut();
        let mut eth = ethernet::Frame::new_unchecked(&mut *d);
        match rewrite {
            Rewrite::SwapMacs => {
                let (s, dst) = (eth.src_addr(), eth.dst_addr());
                eth.set_src_addr(dst);
                eth.set_dst_addr(s);
            }
            Rewrite::SetDst(Some(m)) => eth.set_dst_addr(m),
            Rewrite::SetDst(None) => {}
        }
        if touch {
            st.touch_sum = frame::touch(st.touch_sum, &d[ethernet::HEADER_LEN..]);
        }
    }
    if keep > 0 {
        let first = tx.reserve(slots as u32);
        let mut slot = first;
        for p in rx.pkts().iter() {
            if p.is_empty() {
                continue;
            }
            let ns = tx.slots_for(p.len());
            tx.write(slot, ns, p.data());
            slot += ns as u64;
            st.bytes += p.len() as u64;
        }
        tx.publish(first + slots);
        st.packets += keep as u64;
    }
    drop(rx);
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::tests::spec;
    use crate::frame::FrameGen;
    use fabric::{pipe, PipeConfig, Port};
    use std::sync::Arc;

    #[test]
    fn reflect_swaps_macs_and_counts_drops_by_reason() {
        let (port, mut peer) = pipe(
            "t",
            PipeConfig {
                queues: 1,
                ring_slots: 64,
                slot_b: 2048,
            },
        )
        .unwrap();
        let port: Arc<dyn Port> = Arc::new(port);
        let mut rxq = port.take_rx(0).unwrap();
        // SAFETY: the test thread is the only sender on this queue.
        let mut tx = unsafe { OwnedTx::new(port.tx(0)) };
        let mut batch = RxBatch::with_capacity(256);
        let mut g = FrameGen::new(&spec(), &[100]).unwrap();
        let good = g.next(1, 0, 0).to_vec();
        let runt = vec![0u8; 10];
        assert_eq!(peer.send(0, &[&good, &runt, &good]), 3);
        let mut st = FwdStats::default();
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SwapMacs,
            false,
            &mut st,
        );
        assert_eq!((st.received, st.packets, st.dropped_runt), (3, 2, 1));
        let mut back = Vec::new();
        peer.recv(0, 10, |f| back.push(f.to_vec()));
        assert_eq!(back.len(), 2);
        for f in &back {
            assert_eq!(&f[0..6], &good[6..12]);
            assert_eq!(&f[6..12], &good[0..6]);
            assert_eq!(&f[12..], &good[12..]);
        }
        // Fill the output ring (64 slots): 70 in, 64 out, 6 tx_full.
        let frames: Vec<&[u8]> = (0..64).map(|_| good.as_slice()).collect();
        assert_eq!(peer.send(0, &frames), 64);
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SetDst(Some(MacAddr([2, 9, 9, 9, 9, 9]))),
            true,
            &mut st,
        );
        assert_eq!(peer.send(0, &frames[..6]), 6);
        forward_burst(
            rxq.as_mut(),
            &mut batch,
            &mut tx,
            Rewrite::SetDst(None),
            false,
            &mut st,
        );
        assert_eq!(st.dropped_tx_full, 6);
        assert_eq!(st.received, st.packets + st.dropped());
        let mut n = 0;
        peer.recv(0, 100, |f| {
            assert_eq!(&f[0..6], &[2, 9, 9, 9, 9, 9]);
            n += 1;
        });
        assert_eq!(n, 64);
        assert_ne!(st.touch_sum, 0);
    }
}
