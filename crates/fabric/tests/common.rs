//! Shared by the fabric's integration tests: a logic whose verdict is
//! written in the frame itself, and frame helpers.
#![allow(dead_code)]

use fabric::{Ctx, DropReason, GroupId, Logic, Pkts, PortId, Verdict};

/// Verdict encoded in bytes 14..17: kind (0 port, 1 flood, 2 group, 3 drop)
/// and a u16 argument. Bytes 17..19 carry the source port, 19..23 a
/// sequence number; the rest is a pattern derived from both.
pub struct FromFrame {
    pub group7: Vec<PortId>,
}

impl Logic for FromFrame {
    fn name(&self) -> &'static str {
        "from-frame"
    }
    fn classify(&self, _: &Ctx, _: PortId, pkts: &mut Pkts, v: &mut [Verdict]) {
        for (p, v) in pkts.iter().zip(v.iter_mut()) {
            let d = p.data();
            let arg = u16::from_be_bytes([d[15], d[16]]);
            *v = match d[14] {
                0 => Verdict::Port(arg),
                1 => Verdict::Flood,
                2 => Verdict::Group(arg),
                _ => Verdict::Drop(DropReason::Policy),
            };
        }
    }
    fn group_members(&self, g: GroupId) -> &[PortId] {
        if g == 7 {
            &self.group7
        } else {
            &[]
        }
    }
}

pub const HDR: usize = 23;

pub fn fill(buf: &mut [u8], kind: u8, arg: u16, src: u16, seq: u32, len: usize) -> usize {
    buf[..12].fill(0xee);
    buf[12] = 0x08;
    buf[13] = 0x00;
    buf[14] = kind;
    buf[15..17].copy_from_slice(&arg.to_be_bytes());
    buf[17..19].copy_from_slice(&src.to_be_bytes());
    buf[19..23].copy_from_slice(&seq.to_be_bytes());
    for (i, b) in buf[HDR..len].iter_mut().enumerate() {
        *b = (i as u32 ^ seq ^ src as u32) as u8;
    }
    len
}

/// (src, seq) of a frame, after checking its pattern is intact.
pub fn parse(f: &[u8]) -> (u16, u32) {
    assert!(f.len() >= HDR, "short frame {}", f.len());
    let src = u16::from_be_bytes([f[17], f[18]]);
    let seq = u32::from_be_bytes([f[19], f[20], f[21], f[22]]);
    for (i, b) in f[HDR..].iter().enumerate() {
        assert_eq!(
            *b,
            (i as u32 ^ seq ^ src as u32) as u8,
            "corrupt byte {i} of frame {src}/{seq}"
        );
    }
    (src, seq)
}
