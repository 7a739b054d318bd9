//! VXLAN headers (RFC 7348 §5): 8 bytes after the outer UDP header.
//!
//! ```text
//! flags (8) | reserved (24) | VNI (24) | reserved (8)
//! ```
//! The I flag (0x08) says the VNI is valid and must be set; every other
//! bit is reserved, sent as zero and ignored on receipt (RFC 7348 §5).

use crate::{be32, put32, Error, Result};

/// Length of the VXLAN header.
pub const HEADER_LEN: usize = 8;
/// IANA UDP destination port.
pub const PORT: u16 = 4789;
/// The I flag: the VNI is valid.
pub const FLAG_I: u8 = 0x08;
/// Largest VNI (24 bits).
pub const MAX_VNI: u32 = (1 << 24) - 1;

/// A view of a VXLAN header and the frame it carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps `buffer` without checks.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps `buffer` after checking it holds the 8-byte header.
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        if buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(Packet { buffer })
    }

    /// The flags byte.
    #[inline]
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[0]
    }

    /// Whether the I flag is set.
    #[inline]
    pub fn vni_valid(&self) -> bool {
        self.flags() & FLAG_I != 0
    }

    /// The 24-bit VNI.
    #[inline]
    pub fn vni(&self) -> u32 {
        be32(self.buffer.as_ref(), 4) >> 8
    }

    /// The encapsulated Ethernet frame.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes a header with only the I flag and `vni` (low 24 bits).
    #[inline]
    pub fn fill(&mut self, vni: u32) {
        let b = self.buffer.as_mut();
        b[..HEADER_LEN].fill(0);
        b[0] = FLAG_I;
        put32(b, 4, (vni & MAX_VNI) << 8);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_bounds() {
        let mut b = [0xffu8; 10];
        Packet::new_unchecked(&mut b[..]).fill(0x12_3456);
        assert_eq!(&b[..8], &[0x08, 0, 0, 0, 0x12, 0x34, 0x56, 0]);
        let p = Packet::new_checked(&b[..]).unwrap();
        assert!(p.vni_valid());
        assert_eq!(p.vni(), 0x12_3456);
        assert_eq!(p.payload(), &[0xff, 0xff]);
        assert_eq!(Packet::new_checked(&b[..7]), Err(Error::Truncated));
        let mut c = b;
        c[0] = 0;
        assert!(!Packet::new_checked(&c[..]).unwrap().vni_valid());
    }
}
