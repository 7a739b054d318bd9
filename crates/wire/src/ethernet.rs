//! Ethernet II frames and their 802.1Q (C-tag) / 802.1ad (S-tag) VLAN tags.
//!
//! [`Frame`] views the untagged 14-byte header; [`Frame::tags`] (or the free
//! function [`parse_tags`]) walks up to two tags and yields the effective
//! EtherType and the offset of the layer-3 header behind them.

use crate::mac::MacAddr;
use crate::{be16, put16, Error, Result};

/// EtherType values used by turnout (as `u16`, host order).
pub struct EtherType;

impl EtherType {
    /// IPv4.
    pub const IPV4: u16 = 0x0800;
    /// ARP.
    pub const ARP: u16 = 0x0806;
    /// IPv6.
    pub const IPV6: u16 = 0x86dd;
    /// 802.1Q customer tag (C-tag).
    pub const VLAN: u16 = 0x8100;
    /// 802.1ad service tag (S-tag, "QinQ").
    pub const QINQ: u16 = 0x88a8;
    /// Pre-standard S-tag TPID still emitted by some equipment.
    pub const QINQ_OLD: u16 = 0x9100;

    /// Whether `et` is a tag protocol identifier (a VLAN tag follows).
    #[inline]
    pub fn is_tpid(et: u16) -> bool {
        et == Self::VLAN || et == Self::QINQ || et == Self::QINQ_OLD
    }
}

mod field {
    use core::ops::{Range, RangeFrom};
    pub const DST: Range<usize> = 0..6;
    pub const SRC: Range<usize> = 6..12;
    pub const ETHERTYPE: usize = 12;
    pub const PAYLOAD: RangeFrom<usize> = 14..;
}

/// Length of the untagged Ethernet header.
pub const HEADER_LEN: usize = 14;
/// Length of one VLAN tag (TPID + TCI).
pub const TAG_LEN: usize = 4;
/// Largest number of tags [`parse_tags`] accepts.
pub const MAX_TAGS: usize = 2;
/// Smallest Ethernet frame without FCS; shorter frames are padded on the wire.
pub const MIN_FRAME_LEN: usize = 60;

/// A view of an Ethernet II frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps `buffer` without checking its length.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps `buffer` after [`Frame::check_len`].
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let f = Self::new_unchecked(buffer);
        f.check_len()?;
        Ok(f)
    }

    /// Errors with `Truncated` if the buffer cannot hold the 14-byte header.
    #[inline]
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// The wrapped buffer.
    #[inline]
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Destination address.
    #[inline]
    pub fn dst_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::DST])
    }

    /// Source address.
    #[inline]
    pub fn src_addr(&self) -> MacAddr {
        MacAddr::from_bytes(&self.buffer.as_ref()[field::SRC])
    }

    /// The EtherType field right after the addresses (a TPID if tagged).
    #[inline]
    pub fn ethertype(&self) -> u16 {
        be16(self.buffer.as_ref(), field::ETHERTYPE)
    }

    /// Everything after the untagged header (tags included, if any).
    #[inline]
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }

    /// The tag stack, effective EtherType and layer-3 offset.
    #[inline]
    pub fn tags(&self) -> Result<Tags> {
        parse_tags(self.buffer.as_ref())
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    #[inline]
    pub fn set_dst_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::DST].copy_from_slice(&a.0);
    }

    /// Sets the source address.
    #[inline]
    pub fn set_src_addr(&mut self, a: MacAddr) {
        self.buffer.as_mut()[field::SRC].copy_from_slice(&a.0);
    }

    /// Sets the EtherType (or outer TPID) field.
    #[inline]
    pub fn set_ethertype(&mut self, et: u16) {
        put16(self.buffer.as_mut(), field::ETHERTYPE, et);
    }

    /// Everything after the untagged header, writable.
    #[inline]
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

/// One VLAN tag.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tag {
    /// Tag protocol identifier (0x8100, 0x88a8 or 0x9100).
    pub tpid: u16,
    /// Priority code point (0..7).
    pub pcp: u8,
    /// Drop eligible indicator.
    pub dei: bool,
    /// VLAN identifier (0..4094).
    pub vid: u16,
}

impl Tag {
    /// The 16-bit tag control information.
    #[inline]
    pub fn tci(&self) -> u16 {
        ((self.pcp as u16 & 7) << 13) | ((self.dei as u16) << 12) | (self.vid & 0x0fff)
    }

    /// Decodes a TCI.
    #[inline]
    pub fn from_tci(tpid: u16, tci: u16) -> Tag {
        Tag {
            tpid,
            pcp: (tci >> 13) as u8,
            dei: tci & 0x1000 != 0,
            vid: tci & 0x0fff,
        }
    }
}

/// What sits between the MAC addresses and the layer-3 header.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tags {
    /// Number of tags (0..=2).
    pub count: u8,
    /// The tags, outermost first; entries past `count` are zero.
    pub tags: [Tag; MAX_TAGS],
    /// EtherType behind the tags (the one that names the layer-3 protocol).
    pub ethertype: u16,
    /// Offset of the layer-3 header from the start of the frame.
    pub l3_offset: usize,
}

impl Tags {
    /// The outermost tag's VLAN id, if tagged.
    #[inline]
    pub fn outer_vid(&self) -> Option<u16> {
        (self.count > 0).then_some(self.tags[0].vid)
    }

    /// The innermost tag's VLAN id, if tagged.
    #[inline]
    pub fn inner_vid(&self) -> Option<u16> {
        (self.count > 0).then(|| self.tags[self.count as usize - 1].vid)
    }
}

/// Walks the VLAN tags of `frame`.
///
/// Accepted: no tag; one tag of any TPID; two tags where the inner one is a
/// C-tag (0x8100). Refused with [`Error::BadTag`]: an S-tag (0x88a8/0x9100)
/// inside another tag, a third tag, and the reserved VID 0xfff.
/// [`Error::Truncated`] if the frame ends inside the header or a tag.
#[inline]
pub fn parse_tags(frame: &[u8]) -> Result<Tags> {
    if frame.len() < HEADER_LEN {
        return Err(Error::Truncated);
    }
    let mut t = Tags {
        ethertype: be16(frame, field::ETHERTYPE),
        l3_offset: HEADER_LEN,
        ..Tags::default()
    };
    while EtherType::is_tpid(t.ethertype) {
        let n = t.count as usize;
        if n == MAX_TAGS || (n > 0 && t.ethertype != EtherType::VLAN) {
            return Err(Error::BadTag);
        }
        let off = t.l3_offset;
        if frame.len() < off + TAG_LEN {
            return Err(Error::Truncated);
        }
        let tag = Tag::from_tci(t.ethertype, be16(frame, off));
        if tag.vid == 0x0fff {
            return Err(Error::BadTag);
        }
        t.tags[n] = tag;
        t.count += 1;
        t.ethertype = be16(frame, off + 2);
        t.l3_offset = off + TAG_LEN;
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    // dst 02:00:00:00:00:02, src 02:00:00:00:00:01, IPv4, 4 payload bytes.
    static UNTAGGED: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x08, 0x00, //
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    // Same with a C-tag, PCP 5, VID 100.
    static ONE_TAG: [u8; 22] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x81, 0x00, 0xa0, 0x64, //
        0x86, 0xdd, //
        0xaa, 0xbb, 0xcc, 0xdd,
    ];

    // S-tag VID 10 around a C-tag VID 20, then ARP.
    static QINQ: [u8; 22] = [
        0xff, 0xff, 0xff, 0xff, 0xff, 0xff, //
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, //
        0x88, 0xa8, 0x00, 0x0a, //
        0x81, 0x00, 0x00, 0x14, //
        0x08, 0x06,
    ];

    #[test]
    fn untagged_fields() {
        let f = Frame::new_checked(&UNTAGGED[..]).unwrap();
        assert_eq!(f.dst_addr(), MacAddr([2, 0, 0, 0, 0, 2]));
        assert_eq!(f.src_addr(), MacAddr([2, 0, 0, 0, 0, 1]));
        assert_eq!(f.ethertype(), EtherType::IPV4);
        assert_eq!(f.payload(), &[0xaa, 0xbb, 0xcc, 0xdd]);
        let t = f.tags().unwrap();
        assert_eq!(
            (t.count, t.ethertype, t.l3_offset),
            (0, EtherType::IPV4, 14)
        );
        assert_eq!(t.outer_vid(), None);
    }

    #[test]
    fn one_tag() {
        let t = parse_tags(&ONE_TAG).unwrap();
        assert_eq!(
            (t.count, t.ethertype, t.l3_offset),
            (1, EtherType::IPV6, 18)
        );
        assert_eq!(
            t.tags[0],
            Tag {
                tpid: 0x8100,
                pcp: 5,
                dei: false,
                vid: 100
            }
        );
        assert_eq!(t.tags[0].tci(), 0xa064);
        assert_eq!(t.inner_vid(), Some(100));
    }

    #[test]
    fn qinq() {
        let t = parse_tags(&QINQ).unwrap();
        assert_eq!((t.count, t.ethertype, t.l3_offset), (2, EtherType::ARP, 22));
        assert_eq!((t.outer_vid(), t.inner_vid()), (Some(10), Some(20)));
    }

    #[test]
    fn bad_tags_are_refused() {
        // S-tag inside a C-tag.
        let mut f = QINQ;
        f[12..14].copy_from_slice(&[0x81, 0x00]);
        f[16..18].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(parse_tags(&f), Err(Error::BadTag));
        // Three tags.
        let mut g = [0u8; 30];
        g[12..14].copy_from_slice(&[0x88, 0xa8]);
        g[16..18].copy_from_slice(&[0x81, 0x00]);
        g[20..22].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(parse_tags(&g), Err(Error::BadTag));
        // Reserved VID.
        let mut h = ONE_TAG;
        h[14..16].copy_from_slice(&[0x0f, 0xff]);
        assert_eq!(parse_tags(&h), Err(Error::BadTag));
    }

    #[test]
    fn truncated() {
        assert_eq!(
            Frame::new_checked(&UNTAGGED[..13]).unwrap_err(),
            Error::Truncated
        );
        assert_eq!(parse_tags(&ONE_TAG[..16]), Err(Error::Truncated));
        assert_eq!(parse_tags(&QINQ[..20]), Err(Error::Truncated));
        // Exactly the tags and no EtherType byte beyond: still truncated.
        assert_eq!(parse_tags(&QINQ[..21]), Err(Error::Truncated));
    }

    #[test]
    fn setters() {
        let mut buf = UNTAGGED;
        let mut f = Frame::new_checked(&mut buf[..]).unwrap();
        f.set_dst_addr(MacAddr::BROADCAST);
        f.set_src_addr(MacAddr([2, 0, 0, 0, 0, 9]));
        f.set_ethertype(EtherType::ARP);
        f.payload_mut()[0] = 0x11;
        assert_eq!(
            &buf[..14],
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 9, 0x08, 0x06]
        );
        assert_eq!(buf[14], 0x11);
    }
}
