//! ARP packets (RFC 826) for Ethernet / IPv4, the only kind turnout handles.

use std::net::Ipv4Addr;

use crate::mac::MacAddr;
use crate::{be16, put16, Error, Result};

mod field {
    use core::ops::Range;
    pub const HTYPE: usize = 0;
    pub const PTYPE: usize = 2;
    pub const HLEN: usize = 4;
    pub const PLEN: usize = 5;
    pub const OPER: usize = 6;
    pub const SHA: Range<usize> = 8..14;
    pub const SPA: Range<usize> = 14..18;
    pub const THA: Range<usize> = 18..24;
    pub const TPA: Range<usize> = 24..28;
}

/// Length of an Ethernet/IPv4 ARP packet.
pub const PACKET_LEN: usize = 28;
/// Hardware type Ethernet.
pub const HTYPE_ETHERNET: u16 = 1;
/// ARP request.
pub const OP_REQUEST: u16 = 1;
/// ARP reply.
pub const OP_REPLY: u16 = 2;

/// A view of an Ethernet/IPv4 ARP packet.
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

    /// `Truncated` if shorter than 28 bytes; `Malformed` unless the packet
    /// is Ethernet (htype 1, hlen 6) over IPv4 (ptype 0x0800, plen 4).
    #[inline]
    pub fn check(&self) -> Result<()> {
        let b = self.buffer.as_ref();
        if b.len() < PACKET_LEN {
            return Err(Error::Truncated);
        }
        if self.htype() != HTYPE_ETHERNET
            || self.ptype() != crate::EtherType::IPV4
            || b[field::HLEN] != 6
            || b[field::PLEN] != 4
        {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// Hardware type.
    #[inline]
    pub fn htype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::HTYPE)
    }

    /// Protocol type.
    #[inline]
    pub fn ptype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::PTYPE)
    }

    /// Operation (request 1, reply 2).
    #[inline]
    pub fn oper(&self) -> u16 {
        be16(self.buffer.as_ref(), field::OPER)
    }

    /// Sender hardware address.
    #[inline]
    pub fn sender_mac(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::SHA])
    }

    /// Sender protocol address.
    #[inline]
    pub fn sender_ip(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::SPA])
    }

    /// Target hardware address.
    #[inline]
    pub fn target_mac(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::THA])
    }

    /// Target protocol address.
    #[inline]
    pub fn target_ip(&self) -> Ipv4Addr {
        ip(&self.buffer.as_ref()[field::TPA])
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes the fixed Ethernet/IPv4 preamble (htype, ptype, hlen, plen).
    pub fn set_ethernet_ipv4(&mut self) {
        let b = self.buffer.as_mut();
        put16(b, field::HTYPE, HTYPE_ETHERNET);
        put16(b, field::PTYPE, crate::EtherType::IPV4);
        b[field::HLEN] = 6;
        b[field::PLEN] = 4;
    }

    /// Sets the operation.
    #[inline]
    pub fn set_oper(&mut self, op: u16) {
        put16(self.buffer.as_mut(), field::OPER, op);
    }

    /// Sets the sender hardware address.
    #[inline]
    pub fn set_sender_mac(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SHA].copy_from_slice(&a.0);
    }

    /// Sets the sender protocol address.
    #[inline]
    pub fn set_sender_ip(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::SPA].copy_from_slice(&a.octets());
    }

    /// Sets the target hardware address.
    #[inline]
    pub fn set_target_mac(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::THA].copy_from_slice(&a.0);
    }

    /// Sets the target protocol address.
    #[inline]
    pub fn set_target_ip(&mut self, a: Ipv4Addr) {
        self.buffer.as_mut()[field::TPA].copy_from_slice(&a.octets());
    }
}

#[inline]
fn ip(b: &[u8]) -> Ipv4Addr {
    Ipv4Addr::new(b[0], b[1], b[2], b[3])
}

#[cfg(test)]
mod tests {
    use super::*;

    // who-has 10.0.0.2 tell 10.0.0.1 (02:00:00:00:00:01)
    static REQUEST: [u8; 28] = [
        0x00, 0x01, 0x08, 0x00, 0x06, 0x04, 0x00, 0x01, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 10, 0, 0, 1, //
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 10, 0, 0, 2,
    ];

    #[test]
    fn parse_request() {
        let p = Packet::new_checked(&REQUEST[..]).unwrap();
        assert_eq!(p.oper(), OP_REQUEST);
        assert_eq!(p.sender_mac(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(p.sender_ip(), Ipv4Addr::new(10, 0, 0, 1));
        assert_eq!(p.target_mac(), MacAddr::ZERO);
        assert_eq!(p.target_ip(), Ipv4Addr::new(10, 0, 0, 2));
    }

    #[test]
    fn refuse_short_and_foreign() {
        assert_eq!(
            Packet::new_checked(&REQUEST[..27]).unwrap_err(),
            Error::Truncated
        );
        let mut b = REQUEST;
        b[5] = 16; // plen 16
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn build_reply() {
        let mut b = [0u8; 28];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_ethernet_ipv4();
        p.set_oper(OP_REPLY);
        p.set_sender_mac(MacAddr([2, 0, 0, 0, 0, 2]));
        p.set_sender_ip(Ipv4Addr::new(10, 0, 0, 2));
        p.set_target_mac(MacAddr([2, 0, 0, 0, 0, 1]));
        p.set_target_ip(Ipv4Addr::new(10, 0, 0, 1));
        let p = Packet::new_checked(&b[..]).unwrap();
        assert_eq!(p.oper(), OP_REPLY);
        assert_eq!(&b[..8], &[0, 1, 8, 0, 6, 4, 0, 2]);
        assert_eq!(&b[14..18], &[10, 0, 0, 2]);
    }
}
