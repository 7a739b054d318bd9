//! IPv4 headers (RFC 791).
//!
//! The buffer may be longer than the datagram (Ethernet padding): the
//! payload is bounded by the total-length field, not by the buffer.

use std::net::Ipv4Addr;

use crate::checksum;
use crate::{be16, put16, Error, Result};

/// IP protocol numbers used by turnout.
pub mod proto {
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
}

mod field {
    use core::ops::Range;
    pub const VER_IHL: usize = 0;
    pub const DSCP_ECN: usize = 1;
    pub const LENGTH: usize = 2;
    pub const IDENT: usize = 4;
    pub const FLG_OFF: usize = 6;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: usize = 10;
    pub const SRC: Range<usize> = 12..16;
    pub const DST: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// A view of an IPv4 packet.
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

    /// `Truncated` if the buffer is shorter than the header or the total
    /// length; `Malformed` if the version is not 4, the header length is
    /// below 20 bytes or the total length is below the header length.
    /// (The checksum is not verified here: see [`Packet::verify_checksum`].)
    #[inline]
    pub fn check(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 4 || self.header_len() < HEADER_LEN {
            return Err(Error::Malformed);
        }
        let total = self.total_len() as usize;
        if total < self.header_len() {
            return Err(Error::Malformed);
        }
        if len < self.header_len() || len < total {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version field (4).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::VER_IHL] & 0x0f) as usize) * 4
    }

    /// DSCP (upper six bits of the former TOS byte).
    #[inline]
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// ECN (lower two bits).
    #[inline]
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 3
    }

    /// Total length (header + payload) in bytes.
    #[inline]
    pub fn total_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    #[inline]
    pub fn ident(&self) -> u16 {
        be16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't-fragment flag.
    #[inline]
    pub fn dont_frag(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x4000 != 0
    }

    /// More-fragments flag.
    #[inline]
    pub fn more_frags(&self) -> bool {
        be16(self.buffer.as_ref(), field::FLG_OFF) & 0x2000 != 0
    }

    /// Fragment offset in bytes.
    #[inline]
    pub fn frag_offset(&self) -> u16 {
        (be16(self.buffer.as_ref(), field::FLG_OFF) & 0x1fff) << 3
    }

    /// Whether this is a fragment other than the first (carries no
    /// upper-layer header).
    #[inline]
    pub fn is_later_fragment(&self) -> bool {
        self.frag_offset() != 0
    }

    /// Time to live.
    #[inline]
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload (see [`proto`]).
    #[inline]
    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    /// Header checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// Whether the header checksum is correct.
    #[inline]
    pub fn verify_checksum(&self) -> bool {
        checksum::fold(checksum::add(0, &self.buffer.as_ref()[..self.header_len()])) == 0xffff
    }

    /// Options (bytes 20..header_len).
    #[inline]
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// The payload, bounded by the total length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..self.total_len() as usize]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 4 and the header length in bytes (a multiple of 4, 20..=60).
    #[inline]
    pub fn set_version_and_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | ((header_len / 4) as u8 & 0x0f);
    }

    /// Sets DSCP and ECN.
    #[inline]
    pub fn set_dscp_ecn(&mut self, dscp: u8, ecn: u8) {
        self.buffer.as_mut()[field::DSCP_ECN] = (dscp << 2) | (ecn & 3);
    }

    /// Sets the total length.
    #[inline]
    pub fn set_total_len(&mut self, len: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, len);
    }

    /// Sets the identification.
    #[inline]
    pub fn set_ident(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::IDENT, v);
    }

    /// Sets the flags and fragment offset: DF, MF, offset in bytes (multiple of 8).
    #[inline]
    pub fn set_frag(&mut self, dont_frag: bool, more_frags: bool, offset_b: u16) {
        let v =
            ((dont_frag as u16) << 14) | ((more_frags as u16) << 13) | ((offset_b >> 3) & 0x1fff);
        put16(self.buffer.as_mut(), field::FLG_OFF, v);
    }

    /// Sets the time to live.
    #[inline]
    pub fn set_ttl(&mut self, v: u8) {
        self.buffer.as_mut()[field::TTL] = v;
    }

    /// Sets the protocol.
    #[inline]
    pub fn set_protocol(&mut self, v: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = v;
    }

    /// Sets the checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// Computes and stores the header checksum.
    #[inline]
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let hl = self.header_len();
        let c = checksum::checksum(&self.buffer.as_ref()[..hl]);
        self.set_checksum(c);
    }

    /// The payload, bounded by the total length, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let (hl, tl) = (self.header_len(), self.total_len() as usize);
        &mut self.buffer.as_mut()[hl..tl]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // A UDP datagram's IPv4 header, 192.168.0.1 -> 192.168.0.199, DF,
    // TTL 64, total length 115, header checksum 0xb861.
    static ICMP_HDR: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, //
        0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    fn with_payload() -> Vec<u8> {
        let mut v = ICMP_HDR.to_vec();
        v.resize(0x73, 0xee);
        v
    }

    #[test]
    fn parse_fields_and_checksum() {
        let buf = with_payload();
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        assert_eq!(p.total_len(), 0x73);
        assert!(p.dont_frag() && !p.more_frags() && !p.is_later_fragment());
        assert_eq!(p.ttl(), 64);
        assert_eq!(p.protocol(), proto::UDP);
        assert_eq!(p.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(p.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(p.verify_checksum());
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn fill_checksum_reproduces_fixture() {
        let mut buf = with_payload();
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_checksum(0xdead);
        assert!(!p.verify_checksum());
        p.fill_checksum();
        assert_eq!(p.checksum(), 0xb861);
        assert!(p.verify_checksum());
    }

    #[test]
    fn padding_beyond_total_len_is_not_payload() {
        let mut buf = with_payload();
        buf.extend_from_slice(&[0; 10]);
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.payload().len(), 0x73 - 20);
    }

    #[test]
    fn refuse_bad_headers() {
        let buf = with_payload();
        assert_eq!(
            Packet::new_checked(&buf[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&buf[..0x72]).unwrap_err(),
            Error::Truncated
        );
        let mut b = buf.clone();
        b[0] = 0x65; // version 6
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut b = buf.clone();
        b[0] = 0x44; // IHL 16 bytes
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut b = buf.clone();
        b[2..4].copy_from_slice(&[0, 19]); // total < header
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
        let mut b = buf;
        b[0] = 0x4f; // IHL 60 bytes: still within the 115-byte datagram
        assert!(Packet::new_checked(&b[..]).is_ok());
        assert_eq!(Packet::new_checked(&b[..40]).unwrap_err(), Error::Truncated);
    }

    #[test]
    fn fragments() {
        let mut buf = with_payload();
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_frag(false, true, 1480);
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.is_later_fragment());
    }
}
