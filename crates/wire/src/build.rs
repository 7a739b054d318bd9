//! Builders for frame templates: a complete Ethernet [+ VLAN tags] + IPv4
//! or IPv6 + UDP header for a frame of a given total size (without FCS).
//!
//! [`write_udp_frame`] fills the headers of `buf[..frame_len]` and computes
//! both checksums over the payload bytes already in the buffer. A caller
//! that then rewrites payload bytes (a sequence number, a timestamp) calls
//! [`fill_udp_checksum`] again, or sets the UDP checksum to zero (allowed
//! over IPv4 only).

use std::net::{Ipv4Addr, Ipv6Addr};

use crate::ethernet::{self, Frame, Tag};
use crate::ipv4::proto;
use crate::mac::MacAddr;
use crate::{ipv4, ipv6, put16, udp, Error, EtherType, Result};

/// Source and destination addresses of one family.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpPair {
    /// IPv4 source, destination.
    V4(Ipv4Addr, Ipv4Addr),
    /// IPv6 source, destination.
    V6(Ipv6Addr, Ipv6Addr),
}

/// Everything the header of a generated UDP frame needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpFrameSpec {
    /// Ethernet source.
    pub src_mac: MacAddr,
    /// Ethernet destination.
    pub dst_mac: MacAddr,
    /// Outer 802.1ad S-tag VLAN id (only together with `vlan`).
    pub outer_vlan: Option<u16>,
    /// 802.1Q C-tag VLAN id.
    pub vlan: Option<u16>,
    /// IP addresses (the family chooses IPv4 or IPv6).
    pub ip: IpPair,
    /// UDP source port.
    pub src_port: u16,
    /// UDP destination port.
    pub dst_port: u16,
    /// IPv4 TTL / IPv6 hop limit.
    pub ttl: u8,
}

impl UdpFrameSpec {
    /// A spec with TTL 64 and no VLAN.
    pub fn new(
        src_mac: MacAddr,
        dst_mac: MacAddr,
        ip: IpPair,
        src_port: u16,
        dst_port: u16,
    ) -> Self {
        UdpFrameSpec {
            src_mac,
            dst_mac,
            outer_vlan: None,
            vlan: None,
            ip,
            src_port,
            dst_port,
            ttl: 64,
        }
    }

    /// Bytes of headers before the UDP payload.
    pub fn header_len(&self) -> usize {
        let tags = self.vlan.is_some() as usize
            + (self.vlan.is_some() && self.outer_vlan.is_some()) as usize;
        let ip = match self.ip {
            IpPair::V4(..) => ipv4::HEADER_LEN,
            IpPair::V6(..) => ipv6::HEADER_LEN,
        };
        ethernet::HEADER_LEN + tags * ethernet::TAG_LEN + ip + udp::HEADER_LEN
    }
}

/// Where the headers of a built frame are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Total frame length in bytes (without FCS).
    pub frame_len: usize,
    /// Offset of the IP header.
    pub l3_offset: usize,
    /// Offset of the UDP header.
    pub l4_offset: usize,
    /// Offset of the UDP payload.
    pub payload_offset: usize,
    /// The IP addresses (to recompute the UDP checksum).
    pub ip: IpPair,
}

/// Writes the headers of a `frame_len`-byte UDP frame into `buf` and returns
/// its layout. Payload bytes (`buf[payload_offset..frame_len]`) are left as
/// they are and covered by the UDP checksum.
///
/// [`Error::BadSize`] if `frame_len` is smaller than the headers, larger
/// than `buf`, or too large for the IP length field; [`Error::BadTag`] for
/// a VLAN id above 4094 or an outer tag without an inner one.
pub fn write_udp_frame(spec: &UdpFrameSpec, buf: &mut [u8], frame_len: usize) -> Result<Layout> {
    if frame_len < spec.header_len() || frame_len > buf.len() {
        return Err(Error::BadSize);
    }
    if spec.outer_vlan.is_some() && spec.vlan.is_none() {
        return Err(Error::BadTag);
    }
    for vid in [spec.outer_vlan, spec.vlan].into_iter().flatten() {
        if vid >= 0x0fff {
            return Err(Error::BadTag);
        }
    }
    let buf = &mut buf[..frame_len];

    let mut eth = Frame::new_unchecked(&mut *buf);
    eth.set_dst_addr(spec.dst_mac);
    eth.set_src_addr(spec.src_mac);
    let ip_et = match spec.ip {
        IpPair::V4(..) => EtherType::IPV4,
        IpPair::V6(..) => EtherType::IPV6,
    };
    let mut off = 12;
    if let Some(outer) = spec.outer_vlan {
        put16(buf, off, EtherType::QINQ);
        put16(
            buf,
            off + 2,
            Tag {
                tpid: EtherType::QINQ,
                pcp: 0,
                dei: false,
                vid: outer,
            }
            .tci(),
        );
        off += ethernet::TAG_LEN;
    }
    if let Some(vid) = spec.vlan {
        put16(buf, off, EtherType::VLAN);
        put16(
            buf,
            off + 2,
            Tag {
                tpid: EtherType::VLAN,
                pcp: 0,
                dei: false,
                vid,
            }
            .tci(),
        );
        off += ethernet::TAG_LEN;
    }
    put16(buf, off, ip_et);
    let l3 = off + 2;

    let l4 = match spec.ip {
        IpPair::V4(src, dst) => {
            let total = frame_len - l3;
            if total > u16::MAX as usize {
                return Err(Error::BadSize);
            }
            let mut ip = ipv4::Packet::new_unchecked(&mut buf[l3..]);
            ip.set_version_and_header_len(ipv4::HEADER_LEN);
            ip.set_dscp_ecn(0, 0);
            ip.set_total_len(total as u16);
            ip.set_ident(0);
            ip.set_frag(true, false, 0);
            ip.set_ttl(spec.ttl);
            ip.set_protocol(proto::UDP);
            ip.set_src_addr(src);
            ip.set_dst_addr(dst);
            ip.fill_checksum();
            l3 + ipv4::HEADER_LEN
        }
        IpPair::V6(src, dst) => {
            let plen = frame_len - l3 - ipv6::HEADER_LEN;
            if plen > u16::MAX as usize {
                return Err(Error::BadSize);
            }
            let mut ip = ipv6::Packet::new_unchecked(&mut buf[l3..]);
            ip.set_version_tc_flow(0, 0);
            ip.set_payload_len(plen as u16);
            ip.set_next_header(proto::UDP);
            ip.set_hop_limit(spec.ttl);
            ip.set_src_addr(&src);
            ip.set_dst_addr(&dst);
            l3 + ipv6::HEADER_LEN
        }
    };
    let mut u = udp::Packet::new_unchecked(&mut buf[l4..]);
    u.set_src_port(spec.src_port);
    u.set_dst_port(spec.dst_port);
    u.set_len((frame_len - l4) as u16);
    let layout = Layout {
        frame_len,
        l3_offset: l3,
        l4_offset: l4,
        payload_offset: l4 + udp::HEADER_LEN,
        ip: spec.ip,
    };
    fill_udp_checksum(buf, &layout);
    Ok(layout)
}

/// Recomputes the UDP checksum of a frame built by [`write_udp_frame`]
/// after its payload changed. `buf` must hold at least `layout.frame_len`
/// bytes.
pub fn fill_udp_checksum(buf: &mut [u8], layout: &Layout) {
    let mut u = udp::Packet::new_unchecked(&mut buf[layout.l4_offset..layout.frame_len]);
    match layout.ip {
        IpPair::V4(s, d) => u.fill_checksum_v4(s, d),
        IpPair::V6(s, d) => u.fill_checksum_v6(&s, &d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ethernet::parse_tags;
    use crate::flow::parse_l4;

    fn spec4() -> UdpFrameSpec {
        UdpFrameSpec::new(
            MacAddr([2, 0, 0, 0, 0, 1]),
            MacAddr([2, 0, 0, 0, 0, 2]),
            IpPair::V4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2)),
            1234,
            5678,
        )
    }

    // The expected 60-byte frame, bytes checked by hand: Ethernet, IPv4 total
    // length 46 with DF, TTL 64, checksum 0x26bd, UDP length 26.
    static EXPECTED_V4_60: [u8; 40] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0xbd, //
        10, 0, 0, 1, 10, 0, 0, 2, //
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x1a,
    ];

    #[test]
    fn ipv4_60_bytes() {
        let mut buf = [0u8; 128];
        let l = write_udp_frame(&spec4(), &mut buf, 60).unwrap();
        assert_eq!(
            (l.l3_offset, l.l4_offset, l.payload_offset, l.frame_len),
            (14, 34, 42, 60)
        );
        assert_eq!(&buf[..40], &EXPECTED_V4_60[..]);
        assert_eq!(&buf[38..40], &[0x00, 0x1a]);
        let ip = ipv4::Packet::new_checked(&buf[14..60]).unwrap();
        assert!(ip.verify_checksum());
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_ne!(u.checksum(), 0);
        assert!(u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()));
        assert!(buf[60..].iter().all(|&b| b == 0), "wrote past frame_len");
    }

    #[test]
    fn payload_change_then_refill() {
        let mut buf = [0u8; 64];
        let l = write_udp_frame(&spec4(), &mut buf, 64).unwrap();
        buf[l.payload_offset] = 0x55;
        let ok = |b: &[u8]| {
            let ip = ipv4::Packet::new_checked(&b[14..64]).unwrap();
            udp::Packet::new_checked(ip.payload())
                .unwrap()
                .verify_checksum_v4(ip.src_addr(), ip.dst_addr())
        };
        assert!(!ok(&buf));
        fill_udp_checksum(&mut buf, &l);
        assert!(ok(&buf));
    }

    #[test]
    fn ipv6_qinq() {
        let mut s = spec4();
        s.ip = IpPair::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap());
        s.outer_vlan = Some(10);
        s.vlan = Some(20);
        assert_eq!(s.header_len(), 14 + 8 + 40 + 8);
        let mut buf = [0u8; 200];
        let l = write_udp_frame(&s, &mut buf, 100).unwrap();
        assert_eq!((l.l3_offset, l.l4_offset, l.payload_offset), (22, 62, 70));
        let t = parse_tags(&buf[..100]).unwrap();
        assert_eq!(
            (t.count, t.outer_vid(), t.inner_vid(), t.ethertype),
            (2, Some(10), Some(20), EtherType::IPV6)
        );
        let ip = ipv6::Packet::new_checked(&buf[22..100]).unwrap();
        assert_eq!(ip.payload_len(), 78 - 40);
        let u = udp::Packet::new_checked(ip.payload()).unwrap();
        assert!(u.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
        let tup = parse_l4(&buf[..100]).unwrap().unwrap();
        assert_eq!((tup.src_port, tup.dst_port), (1234, 5678));
    }

    #[test]
    fn sizes_are_checked() {
        let mut buf = [0u8; 64];
        assert_eq!(write_udp_frame(&spec4(), &mut buf, 41), Err(Error::BadSize));
        assert_eq!(write_udp_frame(&spec4(), &mut buf, 65), Err(Error::BadSize));
        assert!(write_udp_frame(&spec4(), &mut buf, 42).is_ok());
        let mut s = spec4();
        s.vlan = Some(4095);
        assert_eq!(write_udp_frame(&s, &mut buf, 64), Err(Error::BadTag));
        let mut s = spec4();
        s.outer_vlan = Some(5);
        assert_eq!(write_udp_frame(&s, &mut buf, 64), Err(Error::BadTag));
        let mut big = vec![0u8; 70_000];
        assert_eq!(
            write_udp_frame(&spec4(), &mut big, 65_536 + 14),
            Err(Error::BadSize)
        );
        assert!(write_udp_frame(&spec4(), &mut big, 65_535 + 14).is_ok());
    }
}
