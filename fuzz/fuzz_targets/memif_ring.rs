//! A lying memif client writing into the shared region: descriptors,
//! indexes, cookies and buffers of both rings, between receive bursts and
//! transmits of the server's real data path (`ring.rs`). Invariants: no
//! panic and no access outside the region; frames handed out are within
//! the port's limits and never more than the ring holds; a
//! violation is counted exactly once, takes the link down, and nothing is
//! received or transmitted on the connection after it.
#![no_main]

use libfuzzer_sys::fuzz_target;
use ports::memif::fuzzing::{Harness, LOG2_RING, MAX_FRAME_B};

mod common;
use common::Input;

thread_local! {
    static H: std::cell::RefCell<Harness> = std::cell::RefCell::new(Harness::new().expect("harness"));
}

fuzz_target!(|data: &[u8]| {
    H.with(|h| {
        let mut h = h.borrow_mut();
        h.reset();
        let mut inp = Input(data);
        let mut broken = false;
        let mut ops = 0;
        while let Some(op) = inp.u8() {
            ops += 1;
            if ops > 256 {
                break;
            }
            let rx = op & 0x10 == 0;
            match op & 0x0f {
                0 | 8 => {
                    let slot = inp.u8().unwrap_or(0) as u16;
                    let mut d = [0u8; 16];
                    let b = inp.bytes(16);
                    d[..b.len()].copy_from_slice(b);
                    h.put_desc(rx, slot, d);
                }
                1 | 9 => h.set_head(rx, inp.u16().unwrap_or(0)),
                2 | 3 | 10 => {
                    let tail_before = h.tail(true);
                    let n = h.burst(|f| {
                        assert!(
                            f.len() <= MAX_FRAME_B as usize,
                            "frame within the port's limit"
                        );
                    });
                    assert!(n <= 32);
                    if broken {
                        assert_eq!(n, 0, "nothing received after a violation");
                        assert_eq!(h.tail(true), tail_before, "a broken ring is not touched");
                    } else if h.new_violations() == 0 {
                        // Never more frames than the producer published
                        // (the ring holds at most its size).
                        assert!(n <= 1 << LOG2_RING);
                    }
                }
                4 | 11 => {
                    let len = inp.u16().unwrap_or(60) as usize % 6000;
                    let fill = inp.u8().unwrap_or(0xab);
                    let frame = vec![fill; len];
                    let sent = h.transmit(&frame);
                    if broken {
                        assert!(!sent, "nothing transmitted after a violation");
                    }
                    if len > MAX_FRAME_B as usize {
                        assert!(!sent, "oversize frames are refused");
                    }
                }
                5 | 12 => {
                    let off = inp.u16().unwrap_or(0) as usize;
                    let n = inp.u8().unwrap_or(0) as usize % 24;
                    let b = inp.bytes(n).to_vec();
                    h.poke(off, &b);
                }
                _ => {
                    // Write a whole descriptor run: `n` single-buffer frames
                    // of `len` bytes at the buffers area, then publish.
                    let n = inp.u8().unwrap_or(1) as u16 % 20;
                    let len = inp.u16().unwrap_or(64) as u32 % 5000;
                    let head = inp.u16().unwrap_or(0);
                    for i in 0..n {
                        let mut d = [0u8; 16];
                        // flags, region 0, length, offset, metadata.
                        d[4..8].copy_from_slice(&len.to_le_bytes());
                        d[8..12].copy_from_slice(&(16384 + 2048 * i as u32).to_le_bytes());
                        h.put_desc(rx, head.wrapping_add(i), d);
                    }
                    h.set_head(rx, head.wrapping_add(n));
                }
            }
            let v = h.new_violations();
            assert!(v <= 1, "a violation is counted once per connection");
            if v == 1 {
                assert!(h.violated().is_some());
                assert!(!h.link_up(), "a violation takes the link down");
                broken = true;
            } else {
                assert!(h.violated().is_none());
            }
        }
    });
});
