//! TCP segment headers (RFC 9293): ports, sequence numbers, flags and the
//! checksum over the IPv4 or IPv6 pseudo-header.

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::checksum;
use crate::ipv4::proto;
use crate::{be16, be32, put16, put32, Error, Result};

mod field {
    pub const SRC_PORT: usize = 0;
    pub const DST_PORT: usize = 2;
    pub const SEQ: usize = 4;
    pub const ACK: usize = 8;
    pub const OFF_FLAGS: usize = 12;
    pub const WINDOW: usize = 14;
    pub const CHECKSUM: usize = 16;
    pub const URGENT: usize = 18;
}

/// Length of a TCP header without options.
pub const HEADER_LEN: usize = 20;

/// TCP flag bits (low 9 bits of the offset/flags word).
pub mod flags {
    /// No more data.
    pub const FIN: u16 = 0x001;
    /// Synchronise sequence numbers.
    pub const SYN: u16 = 0x002;
    /// Reset.
    pub const RST: u16 = 0x004;
    /// Push.
    pub const PSH: u16 = 0x008;
    /// Acknowledgement valid.
    pub const ACK: u16 = 0x010;
    /// Urgent pointer valid.
    pub const URG: u16 = 0x020;
    /// ECN echo.
    pub const ECE: u16 = 0x040;
    /// Congestion window reduced.
    pub const CWR: u16 = 0x080;
    /// Accurate ECN (formerly nonce sum).
    pub const AE: u16 = 0x100;
}

/// A view of a TCP segment.
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

    /// `Truncated` if the buffer is shorter than 20 bytes or the data
    /// offset; `Malformed` if the data offset is below 20 bytes.
    #[inline]
    pub fn check(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.header_len() < HEADER_LEN {
            return Err(Error::Malformed);
        }
        if len < self.header_len() {
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

    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u32 {
        be32(self.buffer.as_ref(), field::SEQ)
    }

    /// Acknowledgement number.
    #[inline]
    pub fn ack(&self) -> u32 {
        be32(self.buffer.as_ref(), field::ACK)
    }

    /// Header length in bytes (data offset × 4).
    #[inline]
    pub fn header_len(&self) -> usize {
        ((self.buffer.as_ref()[field::OFF_FLAGS] >> 4) as usize) * 4
    }

    /// The flag bits (see [`flags`]).
    #[inline]
    pub fn flags(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OFF_FLAGS) & 0x01ff
    }

    /// Whether every bit of `f` is set.
    #[inline]
    pub fn has(&self, f: u16) -> bool {
        self.flags() & f == f
    }

    /// Receive window.
    #[inline]
    pub fn window(&self) -> u16 {
        be16(self.buffer.as_ref(), field::WINDOW)
    }

    /// Checksum field.
    #[inline]
    pub fn checksum(&self) -> u16 {
        be16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Urgent pointer.
    #[inline]
    pub fn urgent(&self) -> u16 {
        be16(self.buffer.as_ref(), field::URGENT)
    }

    /// Everything after the header (the segment is the whole buffer: pass
    /// the IP payload, not the frame).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }

    /// Whether the checksum is right over an IPv4 pseudo-header.
    pub fn verify_checksum_v4(&self, src: Ipv4Addr, dst: Ipv4Addr) -> bool {
        let d = self.buffer.as_ref();
        checksum::fold(checksum::add(
            checksum::pseudo_v4(src, dst, proto::TCP, d.len() as u16),
            d,
        )) == 0xffff
    }

    /// Whether the checksum is right over an IPv6 pseudo-header.
    pub fn verify_checksum_v6(&self, src: &Ipv6Addr, dst: &Ipv6Addr) -> bool {
        let d = self.buffer.as_ref();
        checksum::fold(checksum::add(
            checksum::pseudo_v6(src, dst, proto::TCP, d.len() as u32),
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

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::SEQ, v);
    }

    /// Sets the acknowledgement number.
    #[inline]
    pub fn set_ack(&mut self, v: u32) {
        put32(self.buffer.as_mut(), field::ACK, v);
    }

    /// Sets the header length in bytes (multiple of 4, 20..=60) and the flags.
    #[inline]
    pub fn set_header_len_and_flags(&mut self, header_len: usize, f: u16) {
        let v = (((header_len / 4) as u16 & 0x0f) << 12) | (f & 0x01ff);
        put16(self.buffer.as_mut(), field::OFF_FLAGS, v);
    }

    /// Sets the window.
    #[inline]
    pub fn set_window(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::WINDOW, v);
    }

    /// Sets the checksum field as is.
    #[inline]
    pub fn set_checksum(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::CHECKSUM, v);
    }

    /// Sets the urgent pointer.
    #[inline]
    pub fn set_urgent(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::URGENT, v);
    }

    /// Computes and stores the checksum over an IPv4 pseudo-header.
    pub fn fill_checksum_v4(&mut self, src: Ipv4Addr, dst: Ipv4Addr) {
        self.set_checksum(0);
        let d = self.buffer.as_ref();
        let c = !checksum::fold(checksum::add(
            checksum::pseudo_v4(src, dst, proto::TCP, d.len() as u16),
            d,
        ));
        self.set_checksum(c);
    }

    /// Computes and stores the checksum over an IPv6 pseudo-header.
    pub fn fill_checksum_v6(&mut self, src: &Ipv6Addr, dst: &Ipv6Addr) {
        self.set_checksum(0);
        let d = self.buffer.as_ref();
        let c = !checksum::fold(checksum::add(
            checksum::pseudo_v6(src, dst, proto::TCP, d.len() as u32),
            d,
        ));
        self.set_checksum(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SYN from 10.0.0.1:40000 to 10.0.0.2:80, seq 1, one MSS option (1460),
    // window 64240, checksum filled by the test.
    static SYN: [u8; 24] = [
        0x9c, 0x40, 0x00, 0x50, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, //
        0x60, 0x02, 0xfa, 0xf0, 0x00, 0x00, 0x00, 0x00, //
        0x02, 0x04, 0x05, 0xb4,
    ];

    #[test]
    fn parse_fields() {
        let p = Packet::new_checked(&SYN[..]).unwrap();
        assert_eq!((p.src_port(), p.dst_port()), (40000, 80));
        assert_eq!((p.seq(), p.ack()), (1, 0));
        assert_eq!(p.header_len(), 24);
        assert_eq!(p.flags(), flags::SYN);
        assert!(p.has(flags::SYN) && !p.has(flags::SYN | flags::ACK));
        assert_eq!(p.window(), 64240);
        assert!(p.payload().is_empty());
    }

    #[test]
    fn checksum_round_trip() {
        let (s, d) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let mut b = SYN;
        Packet::new_unchecked(&mut b[..]).fill_checksum_v4(s, d);
        assert!(Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v4(s, d));
        assert!(!Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v4(s, Ipv4Addr::new(10, 0, 0, 3)));
        let (s6, d6): (Ipv6Addr, Ipv6Addr) =
            ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        Packet::new_unchecked(&mut b[..]).fill_checksum_v6(&s6, &d6);
        assert!(Packet::new_checked(&b[..])
            .unwrap()
            .verify_checksum_v6(&s6, &d6));
    }

    #[test]
    fn setters_round_trip() {
        let mut b = [0u8; 24];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_src_port(40000);
        p.set_dst_port(80);
        p.set_seq(1);
        p.set_ack(0);
        p.set_header_len_and_flags(24, flags::SYN);
        p.set_window(64240);
        p.set_urgent(0);
        b[20..].copy_from_slice(&[0x02, 0x04, 0x05, 0xb4]);
        assert_eq!(b, SYN);
    }

    #[test]
    fn refuse_bad() {
        assert_eq!(
            Packet::new_checked(&SYN[..19]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&SYN[..23]).unwrap_err(),
            Error::Truncated
        );
        let mut b = SYN;
        b[12] = 0x40; // 16-byte header
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
