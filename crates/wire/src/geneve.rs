//! Geneve headers (RFC 8926 §3.4): 8 bytes plus variable-length options
//! after the outer UDP header.
//!
//! ```text
//! Ver(2) OptLen(6) | O(1) C(1) Rsvd(6) | Protocol Type (16)
//! VNI (24) | Reserved (8)
//! options: Class (16) | Type (8, high bit = critical) | R(3) Len(5) | data
//! ```
//! `OptLen` and each option's `Len` count 4-byte words.

use crate::{be16, be32, put16, put32, Error, Result};

/// Length of the fixed part of the header.
pub const HEADER_LEN: usize = 8;
/// IANA UDP destination port.
pub const PORT: u16 = 6081;
/// The only version defined.
pub const VERSION: u8 = 0;
/// Protocol type of an Ethernet payload (Transparent Ethernet Bridging).
pub const PROTO_ETHERNET: u16 = 0x6558;
/// O bit: a control (OAM) packet, not data.
pub const FLAG_OAM: u8 = 0x80;
/// C bit: at least one critical option is present.
pub const FLAG_CRITICAL: u8 = 0x40;
/// Critical bit of an option's type.
pub const OPT_TYPE_CRITICAL: u8 = 0x80;
/// Largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// A view of a Geneve header, its options and the payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

/// One Geneve option (class, type, data).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Opt<'a> {
    /// Option class.
    pub class: u16,
    /// Option type (high bit = critical).
    pub typ: u8,
    /// Option data (a multiple of 4 bytes).
    pub data: &'a [u8],
}

impl Opt<'_> {
    /// Whether the receiver must drop the packet if it does not know it.
    pub fn critical(&self) -> bool {
        self.typ & OPT_TYPE_CRITICAL != 0
    }
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checks.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds the fixed header and the
    /// options it announces (`Truncated` otherwise).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Packet { buffer };
        let len = p.buffer.as_ref().len();
        if len < HEADER_LEN || len < p.header_len() {
            return Err(Error::Truncated);
        }
        Ok(p)
    }

    /// Version (2 bits).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[0] >> 6
    }

    /// Length of the options in bytes.
    #[inline]
    pub fn options_len(&self) -> usize {
        (self.buffer.as_ref()[0] & 0x3f) as usize * 4
    }

    /// Fixed header plus options, in bytes: where the payload starts.
    #[inline]
    pub fn header_len(&self) -> usize {
        HEADER_LEN + self.options_len()
    }

    /// O bit: control packet.
    #[inline]
    pub fn oam(&self) -> bool {
        self.buffer.as_ref()[1] & FLAG_OAM != 0
    }

    /// C bit: critical options present.
    #[inline]
    pub fn critical(&self) -> bool {
        self.buffer.as_ref()[1] & FLAG_CRITICAL != 0
    }

    /// Protocol type of the payload.
    #[inline]
    pub fn protocol(&self) -> u16 {
        be16(self.buffer.as_ref(), 2)
    }

    /// The 24-bit VNI.
    #[inline]
    pub fn vni(&self) -> u32 {
        be32(self.buffer.as_ref(), 4) >> 8
    }

    /// The options area.
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The options one by one; an option running past the options area
    /// ends the walk with `Err(Malformed)`.
    pub fn opts(&self) -> Opts<'_> {
        Opts {
            rest: self.options(),
        }
    }

    /// The encapsulated frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes a version 0 header with no options, no flags, an Ethernet
    /// payload and `vni` (low 24 bits).
    #[inline]
    pub fn fill(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        b[..HEADER_LEN].fill(0);
        put16(b, 2, PROTO_ETHERNET);
        put32(b, 4, (vni & MAX_VNI) << 8);
    }
}

/// Iterator over the options of a Geneve header.
pub struct Opts<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for Opts<'a> {
    type Item = Result<Opt<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() {
            return None;
        }
        if self.rest.len() < 4 {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        }
        let b = self.rest;
        let dlen = (b[3] & 0x1f) as usize * 4;
        if b.len() < 4 + dlen {
            self.rest = &[];
            return Some(Err(Error::Malformed));
        }
        self.rest = &b[4 + dlen..];
        Some(Ok(Opt {
            class: be16(b, 0),
            typ: b[2],
            data: &b[4..4 + dlen],
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_and_parse() {
        let mut b = [0xaau8; 12];
        Packet::new_unchecked(&mut b[..]).fill(77);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.version(), 0);
        assert_eq!(p.options_len(), 0);
        assert!(!p.oam() && !p.critical());
        assert_eq!(p.protocol(), PROTO_ETHERNET);
        assert_eq!(p.vni(), 77);
        assert_eq!(p.payload().len(), 4);
        assert_eq!(p.opts().count(), 0);
    }

    #[test]
    fn options() {
        // OptLen 3 words: option (class 0x0102, type 0x85 critical, 1 word
        // of data), then a 0-data option.
        let mut b = vec![0x03, FLAG_CRITICAL, 0x65, 0x58, 0, 0, 5, 0];
        b.extend_from_slice(&[0x01, 0x02, 0x85, 0x01, 1, 2, 3, 4]);
        b.extend_from_slice(&[0x00, 0x07, 0x01, 0x00]);
        b.extend_from_slice(&[0xee; 14]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.header_len(), 20);
        let o: Vec<_> = p.opts().collect::<Result<_>>().unwrap();
        assert_eq!(o.len(), 2);
        assert!(o[0].critical() && !o[1].critical());
        assert_eq!((o[0].class, o[0].data), (0x0102, &[1u8, 2, 3, 4][..]));
        assert_eq!(p.payload().len(), 14);
        // An option whose length runs past the options area.
        let mut bad = b.clone();
        bad[11] = 0x03;
        let p = Packet::new_checked(&bad[..]).unwrap();
        assert!(p.opts().any(|r| r.is_err()));
        // Options announced beyond the buffer.
        assert_eq!(Packet::new_checked(&b[..15]), Err(Error::Truncated));
        assert_eq!(Packet::new_checked(&b[..7]), Err(Error::Truncated));
    }
}
