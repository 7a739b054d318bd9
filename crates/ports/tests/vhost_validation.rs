//! Descriptor validation of the vhost-user data path against hand-built
//! guest memory: a well-behaved guest first (so the checks below can fail
//! for the right reason), then every kind of lie: buffers outside the
//! memory table, loops, too-long chains, head and next indexes out of
//! range, an available index running ahead, wrong buffer direction,
//! indirect descriptors. A lie stops the session, is counted, and raises
//! the port's fault flag; nothing is read or written outside the memory.
//!
//! `cargo test -p ports --test vhost_validation`

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fabric::{RxBatch, TxQueue};
use ports::vhost_user::sys::{GuestMemory, Ring};
use ports::vhost_user::vring::{
    Fault, Layout, Lie, Session, VhostRx, VhostTx, VringSlot, DESC_F_INDIRECT, DESC_F_NEXT,
    DESC_F_WRITE,
};

const BASE: u64 = 0x10_0000;
const MEM_B: u64 = 1 << 20;
const DESC: u64 = BASE;
const AVAIL: u64 = BASE + 0x4000;
const USED: u64 = BASE + 0x8000;
const BUFS: u64 = BASE + 0x1_0000;
const LAYOUT: Layout = Layout {
    hdr_len: 12,
    mrg_rxbuf: true,
    event_idx: false,
};

/// A guest: memory with one virtqueue laid out by hand.
struct Guest {
    mem: Arc<GuestMemory>,
    size: u16,
    avail_idx: u16,
    fault: Arc<Fault>,
    slot: Arc<VringSlot>,
}

impl Guest {
    fn new(size: u16) -> Guest {
        let mem = Arc::new(GuestMemory::anonymous(BASE, MEM_B).unwrap());
        let fault = Arc::new(Fault::new().unwrap());
        let ring = Ring::new(mem.clone(), DESC, AVAIL, USED, size).unwrap();
        let slot = Arc::new(VringSlot::new().unwrap());
        slot.install(Arc::new(Session::new(
            ring,
            LAYOUT,
            None,
            None,
            0,
            fault.clone(),
        )));
        Guest {
            mem,
            size,
            avail_idx: 0,
            fault,
            slot,
        }
    }

    fn write(&self, gpa: u64, b: &[u8]) {
        assert!(self.mem.gpa(gpa, b.len() as u64).unwrap().write(0, b));
    }

    fn read(&self, gpa: u64, n: usize) -> Vec<u8> {
        let mut v = vec![0u8; n];
        assert!(self.mem.gpa(gpa, n as u64).unwrap().read(0, &mut v));
        v
    }

    fn desc(&self, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.write(DESC + 16 * i as u64, &d);
    }

    /// Makes chain `head` available.
    fn offer(&mut self, head: u16) {
        let pos = (self.avail_idx % self.size) as u64;
        self.write(AVAIL + 4 + 2 * pos, &head.to_le_bytes());
        self.avail_idx = self.avail_idx.wrapping_add(1);
        self.write(AVAIL + 2, &self.avail_idx.to_le_bytes());
    }

    fn set_avail_idx(&mut self, v: u16) {
        self.avail_idx = v;
        self.write(AVAIL + 2, &v.to_le_bytes());
    }

    fn used_idx(&self) -> u16 {
        u16::from_le_bytes(self.read(USED + 2, 2).try_into().unwrap())
    }

    fn used_elem(&self, i: u16) -> (u32, u32) {
        let b = self.read(USED + 4 + 8 * (i % self.size) as u64, 8);
        (
            u32::from_le_bytes(b[0..4].try_into().unwrap()),
            u32::from_le_bytes(b[4..8].try_into().unwrap()),
        )
    }

    fn rx(&self) -> VhostRx {
        VhostRx::new(
            self.slot.clone(),
            1518,
            self.fault.clone(),
            Arc::new(AtomicBool::new(true)),
        )
    }

    fn tx(&self) -> VhostTx {
        let t = VhostTx::new(self.slot.clone(), 1518, self.fault.clone());
        t.set_layout(LAYOUT);
        t
    }

    fn broken(&self) -> bool {
        self.slot.session.load().as_ref().unwrap().is_broken()
    }

    fn lies(&self, l: Lie) -> u64 {
        self.fault.lies[l as usize].load(Ordering::Relaxed)
    }
}

fn frame(n: usize, seed: u8) -> Vec<u8> {
    (0..n).map(|i| seed.wrapping_add(i as u8)).collect()
}

/// hdr + frame in one readable buffer at `addr`.
fn put_packet(g: &Guest, addr: u64, f: &[u8]) -> u32 {
    g.write(addr, &[0u8; 12]);
    g.write(addr + 12, f);
    (12 + f.len()) as u32
}

#[test]
fn honest_guest_frames_arrive_and_buffers_come_back() {
    let mut g = Guest::new(256);
    let mut rx = g.rx();
    let mut batch = RxBatch::with_capacity(64);
    // Frame 1: one buffer (header + frame).
    let f1 = frame(60, 1);
    let l = put_packet(&g, BUFS, &f1);
    g.desc(0, BUFS, l, 0, 0);
    g.offer(0);
    // Frame 2: header alone, frame in two buffers (linearised).
    let f2 = frame(1000, 7);
    g.write(BUFS + 0x1000, &[0u8; 12]);
    g.write(BUFS + 0x2000, &f2[..300]);
    g.write(BUFS + 0x3000, &f2[300..]);
    g.desc(1, BUFS + 0x1000, 12, DESC_F_NEXT, 2);
    g.desc(2, BUFS + 0x2000, 300, DESC_F_NEXT, 3);
    g.desc(3, BUFS + 0x3000, 700, 0, 0);
    g.offer(1);
    let b = batch.receive(&mut rx, 0, 0);
    assert_eq!(b.received(), 2);
    assert_eq!(b.pkts()[0].data(), &f1[..]);
    assert_eq!(b.pkts()[1].data(), &f2[..]);
    assert_eq!(g.used_idx(), 0, "buffers are held until release");
    drop(b);
    assert_eq!(g.used_idx(), 2);
    assert_eq!(g.used_elem(0), (0, 0));
    assert_eq!(g.used_elem(1), (1, 0));
    assert_eq!(g.fault.rx_linearised.load(Ordering::Relaxed), 1);
    assert!(!g.broken());
    assert_eq!(g.fault.total_lies(), 0);
    assert!(!g.fault.pending.load(Ordering::Relaxed));
}

#[test]
fn oversize_and_header_only_frames_are_consumed_and_counted() {
    let mut g = Guest::new(256);
    let mut rx = g.rx();
    let mut batch = RxBatch::with_capacity(64);
    let big = frame(2000, 3);
    let l = put_packet(&g, BUFS, &big);
    g.desc(0, BUFS, l, 0, 0);
    g.offer(0);
    g.desc(1, BUFS + 0x1000, 8, 0, 0); // shorter than the header
    g.offer(1);
    assert_eq!(batch.receive(&mut rx, 0, 0).received(), 0);
    assert_eq!(g.used_idx(), 2, "dropped chains are returned to the guest");
    assert_eq!(g.fault.rx_oversize.load(Ordering::Relaxed), 1);
    assert_eq!(g.fault.rx_short.load(Ordering::Relaxed), 1);
    assert!(!g.broken());
}

fn lie_rx(setup: impl FnOnce(&mut Guest), want: Lie) {
    let mut g = Guest::new(256);
    // One honest frame first: it is delivered, the lie after it is not.
    let l = put_packet(&g, BUFS, &frame(60, 9));
    g.desc(10, BUFS, l, 0, 0);
    g.offer(10);
    setup(&mut g);
    let mut rx = g.rx();
    let mut batch = RxBatch::with_capacity(64);
    let n = batch.receive(&mut rx, 0, 0).received();
    assert_eq!(
        g.lies(want),
        1,
        "expected {want:?}; lies {:?}",
        g.fault.lies
    );
    assert_eq!(g.fault.total_lies(), 1);
    assert!(g.broken());
    assert!(
        g.fault.pending.load(Ordering::Relaxed),
        "the control thread is told"
    );
    assert!(n <= 1);
    // A broken session delivers nothing more, even honest frames.
    let l = put_packet(&g, BUFS + 0x8000, &frame(60, 1));
    g.desc(20, BUFS + 0x8000, l, 0, 0);
    g.offer(20);
    assert_eq!(batch.receive(&mut rx, 0, 0).received(), 0);
}

#[test]
fn buffer_outside_memory_is_a_lie() {
    lie_rx(
        |g| {
            g.desc(0, BASE + MEM_B - 8, 64, 0, 0); // runs past the end
            g.offer(0);
        },
        Lie::OutOfMemory,
    );
    lie_rx(
        |g| {
            g.desc(0, 0x1000, 64, 0, 0); // below the region
            g.offer(0);
        },
        Lie::OutOfMemory,
    );
    lie_rx(
        |g| {
            g.desc(0, u64::MAX - 10, 64, 0, 0); // wraps around
            g.offer(0);
        },
        Lie::OutOfMemory,
    );
}

#[test]
fn descriptor_loop_is_a_lie() {
    lie_rx(
        |g| {
            g.write(BUFS, &[0u8; 12]);
            g.desc(0, BUFS, 12, DESC_F_NEXT, 1);
            g.desc(1, BUFS + 0x100, 64, DESC_F_NEXT, 0);
            g.offer(0);
        },
        Lie::ChainTooLong,
    );
}

#[test]
fn too_long_chain_is_a_lie() {
    // 300 distinct descriptors in a 512-entry queue: longer than MAX_CHAIN.
    let mut g = Guest::new(512);
    for i in 0..300u16 {
        g.desc(
            i,
            BUFS + 4 * i as u64,
            4,
            if i < 299 { DESC_F_NEXT } else { 0 },
            i + 1,
        );
    }
    g.offer(0);
    let mut rx = g.rx();
    let mut batch = RxBatch::with_capacity(64);
    assert_eq!(batch.receive(&mut rx, 0, 0).received(), 0);
    assert_eq!(g.lies(Lie::ChainTooLong), 1);
    assert!(g.broken());
}

#[test]
fn bad_indexes_are_lies() {
    lie_rx(|g| g.offer(256), Lie::DescIndex); // head == size
    lie_rx(|g| g.offer(40000), Lie::DescIndex);
    lie_rx(
        |g| {
            g.write(BUFS, &[0u8; 12]);
            g.desc(0, BUFS, 12, DESC_F_NEXT, 300); // next out of range
            g.offer(0);
        },
        Lie::DescIndex,
    );
    lie_rx(|g| g.set_avail_idx(1000), Lie::AvailIdx); // 1000 ahead of 0 > 256
}

#[test]
fn wrong_direction_and_indirect_are_lies() {
    lie_rx(
        |g| {
            let l = put_packet(g, BUFS, &frame(60, 2));
            g.desc(0, BUFS, l, DESC_F_WRITE, 0);
            g.offer(0);
        },
        Lie::WrongDirection,
    );
    lie_rx(
        |g| {
            g.desc(0, BUFS, 64, DESC_F_INDIRECT, 0);
            g.offer(0);
        },
        Lie::Indirect,
    );
}

/// The guest's receive queue: the fabric's reserve / write / publish.
#[test]
fn transmit_into_guest_buffers() {
    let mut g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    for i in 0..4u16 {
        g.desc(i, BUFS + 0x1000 * i as u64, 2048, DESC_F_WRITE, 0);
        g.offer(i);
    }
    let f = frame(100, 5);
    assert_eq!(o.free_slots(), 4);
    assert_eq!(tx.slots_for(100), 1);
    assert_eq!(tx.slots_for(1519), 0, "larger than the port's max frame");
    let s = o.reserve(2);
    o.write(s, 1, &f);
    o.write(s + 1, 1, &f[..60]);
    assert_eq!(g.used_idx(), 0, "nothing visible before publish");
    o.publish(s + 2);
    assert_eq!(o.free_slots(), 2);
    assert_eq!(g.used_idx(), 2);
    assert_eq!(g.used_elem(0), (0, 112));
    assert_eq!(g.used_elem(1), (1, 72));
    let hdr = g.read(BUFS, 12);
    assert_eq!(&hdr[10..12], &1u16.to_le_bytes(), "num_buffers");
    assert_eq!(g.read(BUFS + 12, 100), f);
    assert_eq!(g.fault.total_lies(), 0);
}

#[test]
fn transmit_frame_larger_than_the_guest_buffer_is_returned_empty() {
    let mut g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    g.desc(0, BUFS, 64, DESC_F_WRITE, 0);
    g.offer(0);
    assert_eq!(o.free_slots(), 1);
    let s = o.reserve(1);
    assert_eq!(o.free_slots(), 0);
    o.write(s, 1, &frame(500, 1));
    o.publish(s + 1);
    assert_eq!(g.used_idx(), 1);
    assert_eq!(
        g.used_elem(0),
        (0, 0),
        "empty: the guest drops it as a length error"
    );
    assert_eq!(g.fault.tx_buf_short.load(Ordering::Relaxed), 1);
}

#[test]
fn transmit_lies_stop_the_queue() {
    // A read-only buffer offered for receive, then one outside memory.
    for (addr, flags, want) in [
        (BUFS, 0u16, Lie::WrongDirection),
        (BASE + MEM_B, DESC_F_WRITE, Lie::OutOfMemory),
    ] {
        let mut g = Guest::new(256);
        let tx = g.tx();
        // SAFETY: single-threaded test: this thread is the only transmitter.
        let mut o = unsafe { fabric::OwnedTx::new(&tx) };
        g.desc(0, addr, 2048, flags, 0);
        g.offer(0);
        assert_eq!(o.free_slots(), 1);
        let s = o.reserve(1);
        o.write(s, 1, &frame(60, 1));
        o.publish(s + 1);
        assert_eq!(o.free_slots(), 0, "a broken queue takes nothing");
        assert_eq!(g.lies(want), 1);
        assert_eq!(g.used_idx(), 0, "nothing is published on a broken queue");
    }
    // The available index running ahead of the used one by more than size.
    let mut g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    g.set_avail_idx(300);
    assert_eq!(o.free_slots(), 0);
    assert_eq!(g.lies(Lie::AvailIdx), 1);
}

/// A stopped ring (session removed) makes late writes stale, never
/// touching the next session's ring.
#[test]
fn writes_reserved_before_a_restart_are_stale() {
    let mut g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    g.desc(0, BUFS, 2048, DESC_F_WRITE, 0);
    g.offer(0);
    let s = {
        assert_eq!(o.free_slots(), 1);
        o.reserve(1)
    };
    // The control thread restarts the ring (e.g. SET_VRING_CALL).
    let ring = Ring::new(g.mem.clone(), DESC, AVAIL, USED, 256).unwrap();
    g.slot.install(Arc::new(Session::new(
        ring,
        LAYOUT,
        None,
        None,
        0,
        g.fault.clone(),
    )));
    o.write(s, 1, &frame(60, 1));
    o.publish(s + 1);
    assert_eq!(g.fault.tx_stale.load(Ordering::Relaxed), 1);
    assert_eq!(g.used_idx(), 0);
    // The new session works from its own base.
    assert_eq!(o.free_slots(), 1);
    let s2 = o.reserve(1);
    assert!(s2 > s);
    o.write(s2, 1, &frame(60, 1));
    o.publish(s2 + 1);
    assert_eq!(g.used_idx(), 1);
}

/// A look at a full guest receive ring (nothing reserved) leaves the
/// session unpinned: stopping the ring finds it released at once instead of
/// waiting out the control thread's quiesce timeout.
#[test]
fn a_full_guest_receive_ring_does_not_hold_a_stopping_session() {
    let g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    assert_eq!(o.free_slots(), 0, "no guest buffers offered");
    let old = g.slot.remove().expect("a running session");
    assert_eq!(
        Arc::strong_count(&old),
        1,
        "free_slots on a full ring kept the session pinned"
    );
}

/// Same when the free buffers are too few for the next frame (mergeable
/// buffers, a frame needing two): the fabric reserves nothing.
#[test]
fn a_look_that_reserves_nothing_does_not_hold_a_stopping_session() {
    let mut g = Guest::new(256);
    let tx = VhostTx::new(g.slot.clone(), 9000, g.fault.clone());
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    tx.set_layout(LAYOUT);
    g.desc(0, BUFS, 2048, DESC_F_WRITE, 0);
    g.offer(0);
    assert_eq!(o.free_slots(), 1);
    assert_eq!(tx.slots_for(3000), 2, "more than is free: not reserved");
    let old = g.slot.remove().expect("a running session");
    assert_eq!(Arc::strong_count(&old), 1);
    // A reservation does pin it, until its publish.
    g.slot.install(old);
    let old = {
        let s = {
            assert_eq!(o.free_slots(), 1);
            o.reserve(1)
        };
        let old = g.slot.remove().expect("a running session");
        assert_eq!(
            Arc::strong_count(&old),
            2,
            "pinned while in flight (by the producer; the lease borrows it)"
        );
        o.write(s, 1, &frame(60, 1));
        o.publish(s + 1);
        old
    };
    assert_eq!(Arc::strong_count(&old), 1, "let go by the publish");
    assert_eq!(g.fault.tx_stale.load(Ordering::Relaxed), 1);
}

/// With mergeable buffers a frame takes as many guest receive buffers as
/// the guest's own buffers need (the descriptors' lengths), from the first
/// frame on: 1 KiB, 2 KiB (what turnout-gen's frontend and DPDK post) and
/// 4 KiB buffers, for a 9000 B, a 1500 B and a 60 B frame. Every buffer
/// but a frame's last is full, `num_buffers` says how many, and the bytes
/// arrive intact; nothing is handed back empty or short.
#[test]
fn mergeable_frames_take_the_buffers_the_guest_posted() {
    for buf in [1024u32, 2048, 4096] {
        let mut g = Guest::new(256);
        let tx = VhostTx::new(g.slot.clone(), 9000, g.fault.clone());
        tx.set_layout(LAYOUT);
        let nbufs = 40u16;
        for i in 0..nbufs {
            g.desc(i, BUFS + buf as u64 * i as u64, buf, DESC_F_WRITE, 0);
            g.offer(i);
        }
        // SAFETY: single-threaded test: this thread is the only transmitter.
        let mut o = unsafe { fabric::OwnedTx::new(&tx) };
        let mut next = 0u16;
        for (k, len) in [9000usize, 1500, 60].into_iter().enumerate() {
            let f = frame(len, k as u8 + 1);
            let want = (len + 12).div_ceil(buf as usize) as u32;
            // Asked before anything was written into this guest's buffers.
            let n = o.slots_for(len);
            assert_eq!(n, want, "{len} B frame in {buf} B buffers");
            assert!(o.free_slots() >= n);
            let s = o.reserve(n);
            o.write(s, n, &f);
            o.publish(s + n as u64);
            assert_eq!(g.used_idx(), next + n as u16);
            let mut got = Vec::new();
            for j in 0..n as u16 {
                let (id, used) = g.used_elem(next + j);
                assert_eq!(id, (next + j) as u32);
                let full = j + 1 < n as u16;
                if full {
                    assert_eq!(used, buf, "{len} B: buffer {j} of {n} is full");
                } else {
                    assert!(used > 0, "{len} B: no empty buffer");
                }
                got.extend(g.read(BUFS + buf as u64 * id as u64, used as usize));
            }
            assert_eq!(&got[10..12], &(n as u16).to_le_bytes(), "num_buffers");
            assert_eq!(&got[12..], &f[..], "{len} B frame in {buf} B buffers");
            next += n as u16;
        }
        assert_eq!(g.fault.tx_buf_short.load(Ordering::Relaxed), 0);
        assert_eq!(g.fault.total_lies(), 0);
    }
}

/// A guest whose buffers are larger than the sizing counted (it showed a
/// 1 KiB one first, then posted 4 KiB ones) gets the frame spread over
/// every buffer `num_buffers` announces, none of them empty.
#[test]
fn mergeable_frame_in_larger_buffers_than_counted_leaves_none_empty() {
    let mut g = Guest::new(256);
    let tx = VhostTx::new(g.slot.clone(), 9000, g.fault.clone());
    tx.set_layout(LAYOUT);
    g.desc(0, BUFS, 1024, DESC_F_WRITE, 0);
    g.offer(0);
    for i in 1..8u16 {
        g.desc(i, BUFS + 4096 * i as u64, 4096, DESC_F_WRITE, 0);
        g.offer(i);
    }
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    // Sized by the 1 KiB buffer it looked at.
    assert_eq!(o.slots_for(60), 1);
    assert_eq!(o.free_slots(), 8);
    let s = o.reserve(1);
    o.write(s, 1, &frame(60, 1));
    o.publish(s + 1);
    let f = frame(3000, 2);
    let n = o.slots_for(3000);
    assert_eq!(n, 3, "3012 B in the 1 KiB buffers it saw");
    assert_eq!(o.free_slots(), 7);
    let s = o.reserve(n);
    o.write(s, n, &f);
    o.publish(s + n as u64);
    let mut got = Vec::new();
    for j in 1..=3u16 {
        let (id, used) = g.used_elem(j);
        assert!(used > 0, "buffer {j} is not empty");
        got.extend(g.read(BUFS + 4096 * id as u64, used as usize));
    }
    assert_eq!(&got[10..12], &3u16.to_le_bytes(), "num_buffers");
    assert_eq!(&got[12..], &f[..]);
    assert_eq!(g.fault.tx_buf_short.load(Ordering::Relaxed), 0);
}

/// The single-buffer fast paths (receive: header and frame in one
/// readable descriptor; transmit: one writable descriptor holds both) at
/// their edges: a frame of exactly the port's largest size is delivered and
/// one byte more is oversize; a guest buffer of exactly header + frame is
/// filled and one byte less is returned empty; a set flag the fast path
/// does not expect (NEXT on the last buffer of a chain) goes through the
/// full walk, which still counts its lie.
#[test]
fn single_buffer_frames_at_their_limits() {
    let mut g = Guest::new(256);
    let mut rx = g.rx();
    let mut batch = RxBatch::with_capacity(64);
    let max = frame(1518, 4);
    let l = put_packet(&g, BUFS, &max);
    g.desc(0, BUFS, l, 0, 0);
    g.offer(0);
    let l = put_packet(&g, BUFS + 0x1000, &frame(1519, 4));
    g.desc(1, BUFS + 0x1000, l, 0, 0);
    g.offer(1);
    let b = batch.receive(&mut rx, 0, 0);
    assert_eq!(b.received(), 1);
    assert_eq!(b.pkts()[0].data(), &max[..]);
    drop(b);
    assert_eq!(g.used_idx(), 2);
    assert_eq!(g.fault.rx_oversize.load(Ordering::Relaxed), 1);
    // A readable buffer that claims a next one outside the table.
    let l = put_packet(&g, BUFS + 0x2000, &frame(60, 4));
    g.desc(2, BUFS + 0x2000, l, DESC_F_NEXT, 999);
    g.offer(2);
    assert_eq!(batch.receive(&mut rx, 0, 0).received(), 0);
    assert_eq!(g.lies(Lie::DescIndex), 1);

    let mut g = Guest::new(256);
    let tx = g.tx();
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    let f = frame(200, 8);
    g.desc(0, BUFS, 212, DESC_F_WRITE, 0);
    g.offer(0);
    g.desc(1, BUFS + 0x1000, 211, DESC_F_WRITE, 0);
    g.offer(1);
    assert_eq!(o.free_slots(), 2);
    let s = o.reserve(2);
    o.write(s, 1, &f);
    o.write(s + 1, 1, &f);
    o.publish(s + 2);
    assert_eq!(g.used_idx(), 2);
    assert_eq!(g.used_elem(0), (0, 212));
    assert_eq!(g.read(BUFS + 12, 200), f);
    assert_eq!(g.used_elem(1), (1, 0), "one byte short: returned empty");
    assert_eq!(g.fault.tx_buf_short.load(Ordering::Relaxed), 1);
    assert_eq!(g.fault.total_lies(), 0);
}

/// Without mergeable buffers or VERSION_1 the header is 10 bytes: the
/// frame follows it directly and the used length counts 10 + frame.
#[test]
fn transmit_with_the_legacy_header() {
    let mut g = Guest::new(256);
    let layout = Layout {
        hdr_len: 10,
        mrg_rxbuf: false,
        event_idx: false,
    };
    let ring = Ring::new(g.mem.clone(), DESC, AVAIL, USED, 256).unwrap();
    g.slot.install(Arc::new(Session::new(
        ring,
        layout,
        None,
        None,
        0,
        g.fault.clone(),
    )));
    let tx = VhostTx::new(g.slot.clone(), 1518, g.fault.clone());
    tx.set_layout(layout);
    // SAFETY: single-threaded test: this thread is the only transmitter.
    let mut o = unsafe { fabric::OwnedTx::new(&tx) };
    g.write(BUFS, &[0xee; 16]);
    g.desc(0, BUFS, 2048, DESC_F_WRITE, 0);
    g.offer(0);
    assert_eq!(o.free_slots(), 1);
    let f = frame(64, 3);
    let s = o.reserve(1);
    o.write(s, 1, &f);
    o.publish(s + 1);
    assert_eq!(g.used_elem(0), (0, 74));
    assert_eq!(g.read(BUFS, 10), vec![0u8; 10], "header zeroed");
    assert_eq!(g.read(BUFS + 10, 64), f);
}
