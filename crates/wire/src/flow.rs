//! One-call parse of a frame down to its transport tuple, for logics that
//! switch on <protocol, addresses, ports> (l4filter, demux).

use std::net::IpAddr;

use crate::ethernet::parse_tags;
use crate::ipv4::proto;
use crate::{ipv4, ipv6, tcp, udp, EtherType, Result};

/// The transport 5-tuple of a UDP or TCP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct L4Tuple {
    /// `proto::UDP` or `proto::TCP`.
    pub proto: u8,
    /// Source address.
    pub src_ip: IpAddr,
    /// Destination address.
    pub dst_ip: IpAddr,
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
}

/// Parses Ethernet (up to two VLAN tags), IPv4 or IPv6 (walking extension
/// headers), and a UDP or TCP header.
///
/// - `Ok(Some(t))`: a UDP or TCP packet with its tuple;
/// - `Ok(None)`: well formed but carrying no port numbers: not IP, another
///   IP protocol (ICMP...), or an IP fragment other than the first;
/// - `Err(_)`: a header that is truncated or malformed (bad VLAN stack,
///   wrong IP version, a UDP length or TCP offset past the datagram).
#[inline]
pub fn parse_l4(frame: &[u8]) -> Result<Option<L4Tuple>> {
    let tags = parse_tags(frame)?;
    let l3 = &frame[tags.l3_offset..];
    let (proto, src_ip, dst_ip, l4): (u8, IpAddr, IpAddr, &[u8]) = match tags.ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(l3)?;
            if ip.is_later_fragment() {
                return Ok(None);
            }
            let (hl, tl) = (ip.header_len(), ip.total_len() as usize);
            (
                ip.protocol(),
                ip.src_addr().into(),
                ip.dst_addr().into(),
                &l3[hl..tl],
            )
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(l3)?;
            let Some((nh, off)) = ip.upper_layer()? else {
                return Ok(None);
            };
            let end = ipv6::HEADER_LEN + ip.payload_len() as usize;
            (
                nh,
                ip.src_addr().into(),
                ip.dst_addr().into(),
                &l3[ipv6::HEADER_LEN + off..end],
            )
        }
        _ => return Ok(None),
    };
    let (src_port, dst_port) = match proto {
        proto::UDP => {
            let u = udp::Packet::new_checked(l4)?;
            (u.src_port(), u.dst_port())
        }
        proto::TCP => {
            let t = tcp::Packet::new_checked(l4)?;
            (t.src_port(), t.dst_port())
        }
        _ => return Ok(None),
    };
    Ok(Some(L4Tuple {
        proto,
        src_ip,
        dst_ip,
        src_port,
        dst_port,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Error;
    use std::net::{Ipv4Addr, Ipv6Addr};

    // Ethernet + IPv4 (10.0.0.1 -> 10.0.0.2, UDP) + UDP 1234 -> 5678, 4 B.
    static UDP4_FRAME: [u8; 46] = [
        0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01, 0x08, 0x00, //
        0x45, 0x00, 0x00, 0x20, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, //
        10, 0, 0, 1, 10, 0, 0, 2, //
        0x04, 0xd2, 0x16, 0x2e, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd',
    ];

    // Ethernet + C-tag 7 + IPv6 (fd00::1 -> fd00::2, TCP) + TCP 80 -> 40000 SYN|ACK.
    static TCP6_FRAME: [u8; 78] = [
        0x02, 0, 0, 0, 0, 0x01, 0x02, 0, 0, 0, 0, 0x02, 0x81, 0x00, 0x00, 0x07, 0x86, 0xdd, //
        0x60, 0, 0, 0, 0x00, 0x14, 0x06, 0x40, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x01, //
        0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x02, //
        0x00, 0x50, 0x9c, 0x40, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x12, 0xff, 0xff, 0, 0, 0, 0,
    ];

    #[test]
    fn udp_over_ipv4() {
        let t = parse_l4(&UDP4_FRAME).unwrap().unwrap();
        assert_eq!(t.proto, proto::UDP);
        assert_eq!(t.src_ip, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(t.dst_ip, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!((t.src_port, t.dst_port), (1234, 5678));
    }

    #[test]
    fn tcp_over_tagged_ipv6() {
        let t = parse_l4(&TCP6_FRAME).unwrap().unwrap();
        assert_eq!(t.proto, proto::TCP);
        assert_eq!(t.src_ip, "fd00::1".parse::<Ipv6Addr>().unwrap());
        assert_eq!((t.src_port, t.dst_port), (80, 40000));
    }

    #[test]
    fn no_ports() {
        let mut f = UDP4_FRAME;
        f[23] = proto::ICMP;
        assert_eq!(parse_l4(&f), Ok(None));
        let mut f = UDP4_FRAME;
        f[20..22].copy_from_slice(&[0x00, 0x10]); // offset 128 B
        assert_eq!(parse_l4(&f), Ok(None));
        let mut f = UDP4_FRAME;
        f[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_l4(&f), Ok(None));
    }

    #[test]
    fn malformed() {
        assert_eq!(parse_l4(&UDP4_FRAME[..40]), Err(Error::Truncated)); // IP total 32 > 26
        let mut f = UDP4_FRAME;
        f[16..18].copy_from_slice(&[0x00, 0x1b]); // IP total 27: UDP header cut at 7 B
        assert_eq!(parse_l4(&f), Err(Error::Truncated));
        let mut f = UDP4_FRAME;
        f[38..40].copy_from_slice(&[0x00, 0x40]); // UDP length 64 > datagram
        assert_eq!(parse_l4(&f), Err(Error::Truncated));
        let mut f = TCP6_FRAME;
        f[14..16].copy_from_slice(&[0x0f, 0xff]); // reserved VID
        assert_eq!(parse_l4(&f), Err(Error::BadTag));
        let mut f = TCP6_FRAME;
        f[70] = 0x60; // TCP offset 24 > 20 bytes present
        assert_eq!(parse_l4(&f), Err(Error::Truncated));
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;
    use std::net::Ipv4Addr;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(4096))]

        /// Random bytes never panic any view.
        #[test]
        fn random_bytes_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = parse_l4(&b);
            let _ = crate::ethernet::parse_tags(&b);
            if let Ok(p) = ipv4::Packet::new_checked(&b[..]) { let _ = (p.payload(), p.options(), p.verify_checksum()); }
            if let Ok(p) = ipv6::Packet::new_checked(&b[..]) { let _ = (p.payload(), p.upper_layer()); }
            if let Ok(p) = udp::Packet::new_checked(&b[..]) { let _ = (p.payload(), p.verify_checksum_v4(Ipv4Addr::LOCALHOST, Ipv4Addr::LOCALHOST)); }
            if let Ok(p) = tcp::Packet::new_checked(&b[..]) { let _ = (p.payload(), p.flags()); }
            if let Ok(p) = crate::arp::Packet::new_checked(&b[..]) { let _ = p.target_ip(); }
        }

        /// Random bytes behind a valid Ethernet/IPv4 or IPv6 prefix (so the
        /// deeper parsers are reached) never panic either.
        #[test]
        fn random_ip_headers_never_panic(v6 in any::<bool>(), tag in 0u8..3, b in proptest::collection::vec(any::<u8>(), 0..120)) {
            let mut f = vec![0u8; 12];
            if tag > 0 { f.extend_from_slice(&[0x88, 0xa8, 0, 1]); }
            if tag > 1 { f.extend_from_slice(&[0x81, 0x00, 0, 2]); }
            f.extend_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
            let mut body = b.clone();
            if let Some(x) = body.first_mut() { *x = if v6 { 0x60 | (*x & 0x0f) } else { 0x40 | (*x & 0x0f) }; }
            f.extend_from_slice(&body);
            let _ = parse_l4(&f);
        }
    }
}
