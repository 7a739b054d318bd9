//! UDP datagrams (RFC 768) with checksums over the IPv4 or IPv6
//! pseudo-header.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ipv4::proto;
use crate::{be16, put16, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const LENGTH: usize = 4;
    pub const CHECKSUM: usize = 6;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = 8;

/// A view of a UDP datagram.
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

    /// Wraps `buffer` after [`Packet::check`].
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let p = Self::new_unchecked(buffer);
        p.check()?;
        Ok(p)
    }

    /// `Truncated` if the buffer is shorter than 8 bytes or than the length
    /// field; `Malformed` if the length field is below 8.
    #[inline]
    pub fn check(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let l = self.len() as usize;
        if l < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < l {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Source port.
    #[inline]
    pub fn src_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    #[inline]
    pub fn dst_port(&self) -> u16 {
        be16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field (header + payload).
    #[inline]
    pub fn len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Whether the length field says there is no payload.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len() as usize <= HEADER_LEN
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// The payload, bounded by the length field.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.len() as usize]
    }

    /// Whether the checksum is right for an IPv4 pseudo-header. A zero
    /// checksum means "not computed" over IPv4 and is accepted.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let d = &self.buffer.as_ref()[..self.len() as usize];
        checksum::fold(checksum::add(
            checksum::pseudo_v4(src, dst, proto::UDP, self.len()),
            d,
        )) == 0xffff
    }

    /// Whether the checksum is right for an IPv6 pseudo-header (where a zero
    /// checksum is invalid).
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        if self.checksum() == 0 {
            return false;
        }
        let d = &self.buffer.as_ref()[..self.len() as usize];
        checksum::fold(checksum::add(
            checksum::pseudo_v6(src, dst, proto::UDP, self.len() as u32),
            d,
        )) == 0xffff
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    #[inline]
    pub fn set_src_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::SRC_PORT, v);
    }

    /// Sets the destination port.
    #[inline]
    pub fn set_dst_port(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::DST_PORT, v);
    }

    /// Sets the length field.
    #[inline]
    pub fn set_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// The payload, bounded by the length field, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let l = self.len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..l]
    }

    /// Computes and stores the checksum with an IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        let seed = checksum::pseudo_v4(src, dst, proto::UDP, self.len());
        self.fill_with(seed);
    }

    /// Computes and stores the checksum with an IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        let seed = checksum::pseudo_v6(src, dst, proto::UDP, self.len() as u32);
        self.fill_with(seed);
    }

    fn fill_with(&mut self, seed: u64) {
        self.set_checksum(0);
        let l = self.len() as usize;
        let c = !checksum::fold(checksum::add(seed, &self.buffer.as_ref()[..l]));
        // A computed zero is sent as all ones (RFC 768; RFC 8200 §8.1).
        self.set_checksum(if c == 0 { 0xffff } else { c });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // 10.0.0.1:1234 -> 10.0.0.2:5678, payload "abcd", checksum 0 (none);
    // the tests compare ours with a plain word-by-word RFC 768 sum.
    static UDP4: [u8; 12] = [
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd',
    ];

    fn manual_v4_checksum(src: [u8; 4], dst: [u8; 4], udp: &[u8]) -> u16 {
        // Straightforward word-by-word sum over the pseudo-header + datagram.
        let mut v = Vec::new();
        v.extend_from_slice(&src);
        v.extend_from_slice(&dst);
        v.extend_from_slice(&[0, 17]);
        v.extend_from_slice(&(udp.len() as u16).to_be_bytes());
        v.extend_from_slice(udp);
        if v.len() % 2 == 1 {
            v.push(0);
        }
        let mut s: u32 = 0;
        for w in v.chunks(2) {
            s += u16::from_be_bytes([w[0], w[1]]) as u32;
        }
        while s > 0xffff {
            s = (s & 0xffff) + (s >> 16);
        }
        !(s as u16)
    }

    #[test]
    fn parse_fields() {
        let p = Packet::new_checked(&UDP4[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port(), p.len()), (1234, 5678, 12));
        assert_eq!(p.payload(), b"abcd");
    }

    #[test]
    fn checksum_v4() {
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut b = UDP4;
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.fill_checksum_v4(s, d);
        let c = p.checksum();
        assert_eq!(c, manual_v4_checksum(s.octets(), d.octets(), &UDP4));
        assert!(Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v4(s, d));
        b[9] ^= 1;
        assert!(!Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v4(s, d));
        // Zero means "none" over IPv4.
        assert!(Packet::new_checked(&UDP4[..])
            .unwrap()
            .verify_checksum_v4(s, d));
    }

    #[test]
    fn checksum_v6() {
        let s: Ipv6Addr = "fd00::1".parse().unwrap();
        let d: Ipv6Addr = "fd00::2".parse().unwrap();
        let mut b = UDP4;
        assert!(!Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v6(&s, &d));
        Packet::new_unchecked(&mut b[..]).fill_checksum_v6(&s, &d);
        assert!(Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v6(&s, &d));
        // The v6 pseudo-header differs from v4's: the v4 check must fail.
        assert!(!Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)));
    }

    #[test]
    fn refuse_bad() {
        assert_eq!(
            Packet::new_checked(&UDP4[..7]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&UDP4[..11]).unwrap_err(),
            Error::Truncated
        );
        let mut b = UDP4;
        b[5] = 7;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
