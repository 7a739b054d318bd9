//! IPv6 headers (RFC 8200) and a bounded walk over extension headers to the
//! upper-layer protocol.

use std::net::Ipv6Addr;

use crate::{be16, be32, put16, put32, Error, Result};

mod field {
    use core::ops::Range;
    pub const VER_TC_FLOW: usize = 0;
    pub const LENGTH: usize = 4;
    pub const NXT_HDR: usize = 6;
    pub const HOP_LIMIT: usize = 7;
    pub const SRC: Range<usize> = 8..24;
    pub const DST: Range<usize> = 24..40;
}

/// Length of the fixed IPv6 header.
pub const HEADER_LEN: usize = 40;

/// Extension header numbers [`Packet::upper_layer`] walks over.
pub mod ext {
    /// Hop-by-hop options.
    pub const HOP_BY_HOP: u8 = 0;
    /// Routing.
    pub const ROUTING: u8 = 43;
    /// Fragment.
    pub const FRAGMENT: u8 = 44;
    /// Destination options.
    pub const DEST_OPTS: u8 = 60;
    /// No next header.
    pub const NONE: u8 = 59;
}

/// Most extension headers [`Packet::upper_layer`] skips before giving up.
pub const MAX_EXT_HEADERS: usize = 4;

/// A view of an IPv6 packet.
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

    /// `Truncated` if shorter than 40 bytes plus the payload length;
    /// `Malformed` if the version is not 6. (Jumbograms, payload length 0
    /// with a hop-by-hop jumbo option, are seen as an empty payload.)
    #[inline]
    pub fn check(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if self.version() != 6 {
            return Err(Error::Malformed);
        }
        if len < HEADER_LEN + self.payload_len() as usize {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Version field (6).
    #[inline]
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_TC_FLOW] >> 4
    }

    /// Traffic class.
    #[inline]
    pub fn traffic_class(&self) -> u8 {
        (be32(self.buffer.as_ref(), field::VER_TC_FLOW) >> 20) as u8
    }

    /// Flow label (20 bits).
    #[inline]
    pub fn flow_label(&self) -> u32 {
        be32(self.buffer.as_ref(), field::VER_TC_FLOW) & 0x000f_ffff
    }

    /// Payload length in bytes (everything after the fixed header).
    #[inline]
    pub fn payload_len(&self) -> u16 {
        be16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Next header (first extension header or upper-layer protocol).
    #[inline]
    pub fn next_header(&self) -> u8 {
        self.buffer.as_ref()[field::NXT_HDR]
    }

    /// Hop limit.
    #[inline]
    pub fn hop_limit(&self) -> u8 {
        self.buffer.as_ref()[field::HOP_LIMIT]
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::SRC])
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> Ipv6Addr {
        addr(&self.buffer.as_ref()[field::DST])
    }

    /// The payload (extension headers included), bounded by the payload length.
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..HEADER_LEN + self.payload_len() as usize]
    }

    /// The upper-layer protocol and its offset within [`Packet::payload`],
    /// skipping at most [`MAX_EXT_HEADERS`] hop-by-hop, routing, fragment
    /// and destination-options headers.
    ///
    /// Returns `Ok(None)` when there is no upper-layer header to read: a
    /// fragment other than the first, "no next header", or more extension
    /// headers than the limit. `Truncated` if an extension header runs past
    /// the payload.
    pub fn upper_layer(&self) -> Result<Option<(u8, usize)>> {
        let p = self.payload();
        let mut nh = self.next_header();
        let mut off = 0usize;
        for _ in 0..=MAX_EXT_HEADERS {
            match nh {
                ext::HOP_BY_HOP | ext::ROUTING | ext::DEST_OPTS => {
                    if p.len() < off + 8 {
                        return Err(Error::Truncated);
                    }
                    let len = (p[off + 1] as usize + 1) * 8;
                    nh = p[off];
                    off += len;
                    if p.len() < off {
                        return Err(Error::Truncated);
                    }
                }
                ext::FRAGMENT => {
                    if p.len() < off + 8 {
                        return Err(Error::Truncated);
                    }
                    if be16(p, off + 2) & 0xfff8 != 0 {
                        return Ok(None); // a later fragment: no L4 header here
                    }
                    nh = p[off];
                    off += 8;
                }
                ext::NONE => return Ok(None),
                _ => return Ok(Some((nh, off))),
            }
        }
        Ok(None)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets version 6, traffic class and flow label.
    #[inline]
    pub fn set_version_tc_flow(&mut self, traffic_class: u8, flow_label: u32) {
        let v = (6u32 << 28) | ((traffic_class as u32) << 20) | (flow_label & 0x000f_ffff);
        put32(self.buffer.as_mut(), field::VER_TC_FLOW, v);
    }

    /// Sets the payload length.
    #[inline]
    pub fn set_payload_len(&mut self, v: u16) {
        put16(self.buffer.as_mut(), field::LENGTH, v);
    }

    /// Sets the next header.
    #[inline]
    pub fn set_next_header(&mut self, v: u8) {
        self.buffer.as_mut()[field::NXT_HDR] = v;
    }

    /// Sets the hop limit.
    #[inline]
    pub fn set_hop_limit(&mut self, v: u8) {
        self.buffer.as_mut()[field::HOP_LIMIT] = v;
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.octets());
    }

    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: &Ipv6Addr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.octets());
    }

    /// The payload, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let end = HEADER_LEN + self.payload_len() as usize;
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }
}

#[inline]
fn addr(b: &[u8]) -> Ipv6Addr {
    let mut a = [0u8; 16];
    a.copy_from_slice(b);
    Ipv6Addr::from(a)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipv4::proto;

    // fd00::1 -> fd00::2, UDP, 8-byte payload, TC 0xb8, flow 0x12345, hop 64.
    static UDP6: [u8; 48] = [
        0x6b, 0x81, 0x23, 0x45, 0x00, 0x08, 0x11, 0x40, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x08, 0x00, 0x00,
    ];

    #[test]
    fn parse_fields() {
        let p = Packet::new_checked(&UDP6[..]).unwrap();
        assert_eq!(p.version(), 6);
        assert_eq!(p.traffic_class(), 0xb8);
        assert_eq!(p.flow_label(), 0x12345);
        assert_eq!(p.payload_len(), 8);
        assert_eq!(p.next_header(), proto::UDP);
        assert_eq!(p.hop_limit(), 64);
        assert_eq!(p.src_addr(), "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.dst_addr(), "fd00::2".parse::<Ipv6Addr>().unwrap());
        assert_eq!(p.upper_layer(), Ok(Some((proto::UDP, 0))));
    }

    #[test]
    fn refuse_bad() {
        assert_eq!(
            Packet::new_checked(&UDP6[..39]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(
            Packet::new_checked(&UDP6[..47]).unwrap_err(),
            Error::Truncated
        );
        let mut b = UDP6;
        b[0] = 0x4b;
        assert_eq!(Packet::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }

    #[test]
    fn setters_round_trip() {
        let mut b = [0u8; 48];
        let mut p = Packet::new_unchecked(&mut b[..]);
        p.set_version_tc_flow(0xb8, 0x12345);
        p.set_payload_len(8);
        p.set_next_header(proto::UDP);
        p.set_hop_limit(64);
        p.set_src_addr(&"fd00::1".parse().unwrap());
        p.set_dst_addr(&"fd00::2".parse().unwrap());
        p.payload_mut().copy_from_slice(&UDP6[40..]);
        assert_eq!(b, UDP6);
    }

    fn with_ext(exts: &[(u8, &[u8])], last: u8, l4: &[u8]) -> Vec<u8> {
        // exts: (this header's type, its bytes without the next-header byte)
        let mut payload = Vec::new();
        for (i, (_, body)) in exts.iter().enumerate() {
            let next = exts.get(i + 1).map(|e| e.0).unwrap_or(last);
            payload.push(next);
            payload.extend_from_slice(body);
        }
        payload.extend_from_slice(l4);
        let mut v = UDP6[..40].to_vec();
        v[4..6].copy_from_slice(&(payload.len() as u16).to_be_bytes());
        v[6] = exts.first().map(|e| e.0).unwrap_or(last);
        v.extend_from_slice(&payload);
        v
    }

    #[test]
    fn walks_extension_headers() {
        let hbh: &[u8] = &[0, 1, 4, 0, 0, 0, 0]; // len 0 => 8 bytes, PadN
        let dst: &[u8] = &[1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]; // 16 bytes
        let buf = with_ext(
            &[(ext::HOP_BY_HOP, hbh), (ext::DEST_OPTS, dst)],
            proto::TCP,
            &[0; 20],
        );
        let p = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(p.upper_layer(), Ok(Some((proto::TCP, 24))));
    }

    #[test]
    fn fragments() {
        let first: &[u8] = &[0, 0x00, 0x01, 0, 0, 0, 7]; // offset 0, M=1
        let buf = with_ext(&[(ext::FRAGMENT, first)], proto::UDP, &[0; 8]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().upper_layer(),
            Ok(Some((proto::UDP, 8)))
        );
        let later: &[u8] = &[0, 0x05, 0x28, 0, 0, 0, 7]; // offset 165*8
        let buf = with_ext(&[(ext::FRAGMENT, later)], proto::UDP, &[0; 8]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().upper_layer(),
            Ok(None)
        );
    }

    #[test]
    fn truncated_and_too_many_ext_headers() {
        let hbh: &[u8] = &[2, 0, 0, 0, 0, 0, 0]; // claims 24 bytes, has 8
        let buf = with_ext(&[(ext::HOP_BY_HOP, hbh)], proto::UDP, &[]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().upper_layer(),
            Err(Error::Truncated)
        );
        let d: &[u8] = &[0; 7];
        let many = [(ext::DEST_OPTS, d); MAX_EXT_HEADERS + 1];
        let buf = with_ext(&many, proto::UDP, &[0; 8]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().upper_layer(),
            Ok(None)
        );
        let ok = [(ext::DEST_OPTS, d); MAX_EXT_HEADERS];
        let buf = with_ext(&ok, proto::UDP, &[0; 8]);
        assert_eq!(
            Packet::new_checked(&buf[..]).unwrap().upper_layer(),
            Ok(Some((proto::UDP, 32)))
        );
    }
}
