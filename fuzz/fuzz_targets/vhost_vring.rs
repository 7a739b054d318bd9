//! A lying guest's virtqueues over fake guest memory, against the real
//! data path (`vring.rs`): descriptor tables, available rings and indexes
//! of the guest's transmit virtqueue (our receive queue) and receive
//! virtqueue (our transmit queue), written between bursts and transmits.
//! Invariants: no panic, no access outside guest memory; frames handed out
//! are within the port's limit; every lie breaks the session and raises the fault flag,
//! and a broken session delivers and consumes nothing more.
#![no_main]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use fabric::{RxBatch, RxQueue, TxQueue};
use libfuzzer_sys::fuzz_target;
use ports::vhost_user::sys::{GuestMemory, Ring};
use ports::vhost_user::vring::{Fault, Layout, Session, VhostRx, VhostTx, VringSlot};

mod common;
use common::Input;

const BASE: u64 = 0x10_0000;
const MEM_B: u64 = 1 << 16;
const MAX_FRAME: usize = 1518;
/// Per virtqueue: descriptor table, available ring, used ring.
const RINGS: [(u64, u64, u64); 2] = [
    (BASE, BASE + 0x1000, BASE + 0x2000),
    (BASE + 0x4000, BASE + 0x5000, BASE + 0x6000),
];

struct Guest {
    mem: Arc<GuestMemory>,
    size: u16,
    slots: [Arc<VringSlot>; 2],
}

impl Guest {
    fn write(&self, gpa: u64, b: &[u8]) {
        if let Some(s) = self.mem.gpa(gpa, b.len() as u64) {
            assert!(s.write(0, b));
        }
    }
    fn u16_at(&self, gpa: u64) -> u16 {
        let mut b = [0u8; 2];
        assert!(self.mem.gpa(gpa, 2).unwrap().read(0, &mut b));
        u16::from_le_bytes(b)
    }
    fn used_idx(&self, q: usize) -> u16 {
        self.u16_at(RINGS[q].2 + 2)
    }
    fn avail_idx(&self, q: usize) -> u16 {
        self.u16_at(RINGS[q].1 + 2)
    }
    fn broken(&self, q: usize) -> bool {
        self.slots[q].session.load().as_ref().unwrap().is_broken()
    }
}

struct Fixture {
    mem: Arc<GuestMemory>,
    fault: Arc<Fault>,
    slots: [Arc<VringSlot>; 2],
    taken: Arc<AtomicBool>,
}

thread_local! {
    static FIX: Fixture = Fixture {
        mem: Arc::new(GuestMemory::anonymous(BASE, MEM_B).unwrap()),
        fault: Arc::new(Fault::new().unwrap()),
        slots: [Arc::new(VringSlot::new().unwrap()), Arc::new(VringSlot::new().unwrap())],
        taken: Arc::new(AtomicBool::new(true)),
    };
}

fuzz_target!(|data: &[u8]| FIX.with(|fx| {
    let mut inp = Input(data);
    let cfg = inp.u8().unwrap_or(0);
    let size = 1u16 << (cfg % 9);
    let layout = Layout {
        hdr_len: if cfg & 0x10 != 0 { 10 } else { 12 },
        mrg_rxbuf: cfg & 0x20 != 0,
        event_idx: cfg & 0x40 != 0,
    };
    // Fresh zeroed guest memory and sessions for every input.
    let mem = fx.mem.clone();
    mem.gpa(BASE, MEM_B).unwrap().fill(0);
    let fault = fx.fault.clone();
    fault.pending.store(false, Ordering::Release);
    for (q, slot) in fx.slots.iter().enumerate() {
        let (d, a, u) = RINGS[q];
        let ring = Ring::new(mem.clone(), d, a, u, size).unwrap();
        slot.remove();
        slot.install(Arc::new(Session::new(
            ring,
            layout,
            None,
            None,
            0,
            fault.clone(),
        )));
    }
    let g = Guest {
        mem: mem.clone(),
        size,
        slots: [fx.slots[0].clone(), fx.slots[1].clone()],
    };
    // Queue 0: the guest's transmit virtqueue (our receive queue);
    // queue 1: its receive virtqueue (our transmit queue).
    let mut rx = VhostRx::new(
        g.slots[0].clone(),
        MAX_FRAME,
        fault.clone(),
        fx.taken.clone(),
    );
    let tx = VhostTx::new(g.slots[1].clone(), MAX_FRAME, fault.clone());
    // SAFETY: single-threaded: the only transmitter.
    let mut otx = unsafe { fabric::OwnedTx::new(&tx) };
    tx.set_layout(layout);
    let mut batch = RxBatch::with_capacity(32);
    let mut lies = fault.total_lies();
    let mut ops = 0;
    while let Some(op) = inp.u8() {
        ops += 1;
        if ops > 200 {
            break;
        }
        let q = (op >> 7) as usize;
        let (desc, avail, _) = RINGS[q];
        let used_before = [g.used_idx(0), g.used_idx(1)];
        let broken_before = [g.broken(0), g.broken(1)];
        match op & 0x07 {
            0 => {
                // A descriptor: address near the buffers area or anywhere.
                let i = inp.u16().unwrap_or(0) % (2 * g.size).max(1);
                let a = inp.u32().unwrap_or(0) as u64;
                let addr = if op & 0x08 != 0 {
                    a << 16 | a
                } else {
                    BASE + 0x8000 + (a % MEM_B)
                };
                let len = inp.u16().unwrap_or(0) as u32 | ((op as u32 & 0x40) << 10);
                let flags = inp.u16().unwrap_or(0);
                let next = inp.u16().unwrap_or(0);
                let mut d = [0u8; 16];
                d[0..8].copy_from_slice(&addr.to_le_bytes());
                d[8..12].copy_from_slice(&len.to_le_bytes());
                d[12..14].copy_from_slice(&flags.to_le_bytes());
                d[14..16].copy_from_slice(&next.to_le_bytes());
                g.write(desc + 16 * i as u64, &d);
            }
            1 => {
                // Offer a head at the next available slot.
                let head = inp.u16().unwrap_or(0);
                let idx = g.avail_idx(q);
                g.write(avail + 4 + 2 * (idx % g.size) as u64, &head.to_le_bytes());
                g.write(avail + 2, &idx.wrapping_add(1).to_le_bytes());
            }
            2 => {
                let v = inp.u16().unwrap_or(0);
                g.write(avail + 2, &v.to_le_bytes());
            }
            3 => {
                // Raw bytes anywhere in guest memory (buffers, rings, flags).
                let off = inp.u32().unwrap_or(0) as u64 % MEM_B;
                let n = inp.u8().unwrap_or(0) as usize % 32;
                let b = inp.bytes(n).to_vec();
                g.write(BASE + off, &b);
            }
            4 | 5 => {
                let burst = batch.receive(&mut rx, 0, 0);
                let n = burst.received();
                assert_eq!(n, burst.len());
                for p in burst.pkts().iter() {
                    assert!(p.data().len() <= MAX_FRAME, "frame within the port's limit");
                }
                if broken_before[0] {
                    assert_eq!(n, 0, "a broken session delivers nothing");
                }
                if op & 1 == 1 {
                    // A worker that has not released yet: the frames stay
                    // out (the next burst must not hand them out again).
                    std::mem::forget(burst);
                }
            }
            _ => {
                let len = inp.u16().unwrap_or(60) as usize % 2000;
                let frame = vec![0x5a; len];
                let n = tx.slots_for(len);
                let free = otx.free_slots();
                if broken_before[1] {
                    assert_eq!(free, 0, "a broken queue takes nothing");
                }
                if n > 0 && free >= n {
                    let s = otx.reserve(n);
                    otx.write(s, n, &frame);
                    otx.publish(s + n as u64);
                }
            }
        }
        for q in 0..2 {
            // (Raw writes may change the used index themselves.)
            if broken_before[q] && op & 0x07 != 3 {
                assert_eq!(
                    g.used_idx(q),
                    used_before[q],
                    "a broken session returns nothing"
                );
            }
        }
        let now = fault.total_lies();
        if now > lies {
            assert!(g.broken(0) || g.broken(1), "a lie breaks its session");
            assert!(
                fault.pending.load(Ordering::Acquire),
                "the control thread is told"
            );
            lies = now;
        }
    }
    rx.release();
    drop(rx);
}));
