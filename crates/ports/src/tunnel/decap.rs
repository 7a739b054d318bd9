//! Decapsulation: from an underlay frame to the inner frame's offset, or a
//! named reason to drop it.
//!
//! Checks, in order: Ethernet (one or two VLAN tags allowed) → IPv4 (header
//! checksum, no fragments) or IPv6 (extension headers walked) addressed to
//! the local tunnel address → UDP to the tunnel port → the tunnel header:
//! VXLAN's I flag, or Geneve's version 0, O bit clear, Ethernet protocol
//! type and no critical option (none is known, so every critical option is
//! unknown) → the VNI → an inner frame of at least an Ethernet header.
//!
//! The outer UDP checksum is not verified: zero is valid (RFC 7348 §5,
//! RFC 8926 §3.3), and a veth delivers locally generated packets with a
//! partial (offloaded) checksum that only the pseudo-header sum fills, so a
//! full check would reject good frames. The inner frame carries its own
//! checksums end to end.
//!
//! ARP and IPv6 neighbour discovery frames are not tunnel traffic but are
//! reported as [`Rx::Control`], for the control thread to answer and learn
//! from.

use std::net::IpAddr;

use wire::ethernet::parse_tags;
use wire::{geneve, ipv4, ipv6, udp, vxlan, EtherType};

use super::encap::{Kind, ETH};

/// What the receive path must know to accept a frame.
#[derive(Clone, Copy, Debug)]
pub struct DecapCfg {
    /// Tunnel protocol.
    pub kind: Kind,
    /// Our VNI.
    pub vni: u32,
    /// Local tunnel address.
    pub local: IpAddr,
    /// UDP destination port.
    pub port: u16,
}

/// A frame the tunnel accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rx {
    /// Tunnel traffic: the inner frame is `frame[off..off + len]`, sent by
    /// the endpoint `src`.
    Frame {
        /// Offset of the inner Ethernet header.
        off: usize,
        /// Length of the inner frame.
        len: usize,
        /// Remote endpoint's address.
        src: IpAddr,
    },
    /// ARP, or ICMPv6 neighbour solicitation/advertisement: for the
    /// control thread.
    Control,
}

/// Why an underlay frame was dropped. Each has its own counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum RxDrop {
    /// Not tunnel traffic for us: another address, protocol or UDP port,
    /// or not IP at all.
    Foreign = 0,
    /// A header ends early (Ethernet, IP, UDP, tunnel, inner Ethernet).
    Truncated,
    /// A header field is invalid (IP version or lengths, VLAN stack).
    Malformed,
    /// Bad outer IPv4 header checksum.
    BadIpChecksum,
    /// An outer IP fragment (tunnel packets are never fragmented).
    Fragment,
    /// VXLAN without the I flag.
    BadFlags,
    /// Geneve version other than 0.
    BadVersion,
    /// Geneve control (OAM) packet.
    Oam,
    /// Geneve payload not Ethernet.
    BadProtocol,
    /// Geneve with a critical option (none is known here).
    CriticalOption,
    /// A VNI other than ours.
    UnknownVni,
}

impl RxDrop {
    /// Number of reasons.
    pub const COUNT: usize = 11;
    /// Every reason, in counter order.
    pub const ALL: [RxDrop; Self::COUNT] = [
        RxDrop::Foreign,
        RxDrop::Truncated,
        RxDrop::Malformed,
        RxDrop::BadIpChecksum,
        RxDrop::Fragment,
        RxDrop::BadFlags,
        RxDrop::BadVersion,
        RxDrop::Oam,
        RxDrop::BadProtocol,
        RxDrop::CriticalOption,
        RxDrop::UnknownVni,
    ];

    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            RxDrop::Foreign => "rx_drop_foreign",
            RxDrop::Truncated => "rx_drop_truncated",
            RxDrop::Malformed => "rx_drop_malformed",
            RxDrop::BadIpChecksum => "rx_drop_bad_ip_checksum",
            RxDrop::Fragment => "rx_drop_fragment",
            RxDrop::BadFlags => "rx_drop_bad_flags",
            RxDrop::BadVersion => "rx_drop_bad_version",
            RxDrop::Oam => "rx_drop_oam",
            RxDrop::BadProtocol => "rx_drop_bad_protocol",
            RxDrop::CriticalOption => "rx_drop_critical_option",
            RxDrop::UnknownVni => "rx_drop_unknown_vni",
        }
    }
}

fn werr(e: wire::Error) -> RxDrop {
    match e {
        wire::Error::Truncated => RxDrop::Truncated,
        _ => RxDrop::Malformed,
    }
}

const ICMPV6: u8 = 58;

/// Classifies one underlay frame.
#[inline]
pub fn decap(cfg: &DecapCfg, f: &[u8]) -> Result<Rx, RxDrop> {
    let tags = parse_tags(f).map_err(werr)?;
    let l3 = &f[tags.l3_offset..];
    // (UDP datagram bounded by the IP length, its offset in f, source.)
    let (dgram, dg_off, src): (&[u8], usize, IpAddr) = match tags.ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(l3).map_err(werr)?;
            if IpAddr::V4(ip.dst_addr()) != cfg.local || ip.protocol() != 17 {
                return Err(RxDrop::Foreign);
            }
            if !ip.verify_checksum() {
                return Err(RxDrop::BadIpChecksum);
            }
            if ip.more_frags() || ip.frag_offset() != 0 {
                return Err(RxDrop::Fragment);
            }
            let hl = ip.header_len();
            (
                &l3[hl..ip.total_len() as usize],
                tags.l3_offset + hl,
                IpAddr::V4(ip.src_addr()),
            )
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(l3).map_err(werr)?;
            let Some((nh, off)) = ip.upper_layer().map_err(werr)? else {
                return Err(if IpAddr::V6(ip.dst_addr()) == cfg.local {
                    RxDrop::Fragment
                } else {
                    RxDrop::Foreign
                });
            };
            if nh == ICMPV6 {
                let p = &ip.payload()[off..];
                if !p.is_empty() && (p[0] == 135 || p[0] == 136) {
                    return Ok(Rx::Control);
                }
                return Err(RxDrop::Foreign);
            }
            if IpAddr::V6(ip.dst_addr()) != cfg.local || nh != 17 {
                return Err(RxDrop::Foreign);
            }
            let start = ipv6::HEADER_LEN + off;
            let end = ipv6::HEADER_LEN + ip.payload_len() as usize;
            // A fragment header walked by upper_layer (first fragment).
            if has_fragment_header(&ip) {
                return Err(RxDrop::Fragment);
            }
            (
                &l3[start..end],
                tags.l3_offset + start,
                IpAddr::V6(ip.src_addr()),
            )
        }
        EtherType::ARP => return Ok(Rx::Control),
        _ => return Err(RxDrop::Foreign),
    };
    if dgram.len() >= 4 && u16::from_be_bytes([dgram[2], dgram[3]]) != cfg.port {
        return Err(RxDrop::Foreign);
    }
    let u = udp::Packet::new_checked(dgram).map_err(werr)?;
    if u.dst_port() != cfg.port {
        return Err(RxDrop::Foreign);
    }
    let payload = &dgram[udp::HEADER_LEN..u.len() as usize];
    let t_off = dg_off + udp::HEADER_LEN;
    let (hl, vni) = match cfg.kind {
        Kind::Vxlan => {
            let v = vxlan::Packet::new_checked(payload).map_err(werr)?;
            if !v.vni_valid() {
                return Err(RxDrop::BadFlags);
            }
            (vxlan::HEADER_LEN, v.vni())
        }
        Kind::Geneve => {
            if payload.is_empty() {
                return Err(RxDrop::Truncated);
            }
            // The version is in the first byte: check it before trusting
            // the option length.
            if payload[0] >> 6 != geneve::VERSION {
                return Err(RxDrop::BadVersion);
            }
            let g = geneve::Packet::new_checked(payload).map_err(werr)?;
            if g.oam() {
                return Err(RxDrop::Oam);
            }
            if g.protocol() != geneve::PROTO_ETHERNET {
                return Err(RxDrop::BadProtocol);
            }
            // Every option must be well formed; any critical one is unknown
            // to us. The C bit alone also announces one.
            if g.critical() {
                return Err(RxDrop::CriticalOption);
            }
            for o in g.opts() {
                match o {
                    Ok(o) if o.critical() => return Err(RxDrop::CriticalOption),
                    Ok(_) => {}
                    Err(_) => return Err(RxDrop::Malformed),
                }
            }
            (g.header_len(), g.vni())
        }
    };
    if vni != cfg.vni {
        return Err(RxDrop::UnknownVni);
    }
    let len = payload.len() - hl;
    if len < ETH {
        return Err(RxDrop::Truncated);
    }
    Ok(Rx::Frame {
        off: t_off + hl,
        len,
        src,
    })
}

fn has_fragment_header(ip: &ipv6::Packet<&[u8]>) -> bool {
    // Walk the chain again looking for a fragment header (44).
    let p = ip.payload();
    let mut nh = ip.next_header();
    let mut off = 0usize;
    for _ in 0..8 {
        match nh {
            0 | 43 | 60 => {
                if p.len() < off + 8 {
                    return false;
                }
                nh = p[off];
                off += (p[off + 1] as usize + 1) * 8;
            }
            44 => return true,
            _ => return false,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::super::encap::{flow_sport, Outer, OuterSpec};
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};
    use wire::MacAddr;

    const A4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 1);
    const B4: Ipv4Addr = Ipv4Addr::new(192, 0, 2, 2);

    fn cfg(kind: Kind, v6: bool) -> DecapCfg {
        DecapCfg {
            kind,
            vni: 42,
            local: if v6 {
                "fd00::2".parse::<Ipv6Addr>().unwrap().into()
            } else {
                B4.into()
            },
            port: kind.default_port(),
        }
    }

    /// A frame from A to B as the encapsulation writes it.
    fn outer(kind: Kind, v6: bool, vni: u32, inner_len: usize) -> Vec<u8> {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            (
                "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
                "fd00::2".parse::<Ipv6Addr>().unwrap().into(),
            )
        } else {
            (A4.into(), B4.into())
        };
        let o = Outer::new(&OuterSpec {
            kind,
            vni,
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: s,
            dst_ip: d,
            dst_port: kind.default_port(),
            mtu: 9000,
            ttl: 64,
        })
        .unwrap();
        let mut b = vec![0x5a; o.len() + inner_len];
        let n = o.write(&mut b, inner_len, flow_sport(&[])).unwrap();
        b.truncate(n);
        b
    }

    #[test]
    fn round_trip_all_kinds_and_families() {
        for kind in [Kind::Vxlan, Kind::Geneve] {
            for v6 in [false, true] {
                let b = outer(kind, v6, 42, 60);
                match decap(&cfg(kind, v6), &b) {
                    Ok(Rx::Frame { off, len, src }) => {
                        assert_eq!(off, if v6 { 70 } else { 50 });
                        assert_eq!(len, 60);
                        assert_eq!(src.is_ipv6(), v6);
                        assert!(b[off..off + len].iter().all(|x| *x == 0x5a));
                    }
                    other => panic!("{kind:?} v6={v6}: {other:?}"),
                }
            }
        }
    }

    #[test]
    fn ethernet_padding_is_not_taken_for_payload() {
        let mut b = outer(Kind::Vxlan, false, 42, 14);
        let n = b.len();
        b.extend_from_slice(&[0; 20]);
        assert_eq!(
            decap(&cfg(Kind::Vxlan, false), &b),
            Ok(Rx::Frame {
                off: 50,
                len: n - 50,
                src: A4.into()
            })
        );
    }

    #[test]
    fn truncated_outer_headers() {
        let c = cfg(Kind::Vxlan, false);
        let b = outer(Kind::Vxlan, false, 42, 60);
        for cut in [0, 10, 14, 20, 33, 34, 40, 45, 49] {
            let r = decap(&c, &b[..cut]);
            assert!(
                matches!(r, Err(RxDrop::Truncated) | Err(RxDrop::Malformed)),
                "cut at {cut}: {r:?}"
            );
        }
        // IP and UDP lengths consistent but too short for an inner header.
        let b = outer(Kind::Vxlan, false, 42, 14);
        let mut short = b[..50 + 10].to_vec();
        let ip_len = (short.len() - 14) as u16;
        short[16..18].copy_from_slice(&ip_len.to_be_bytes());
        short[24..26].copy_from_slice(&[0, 0]);
        let cs = wire::checksum::checksum(&short[14..34]);
        short[24..26].copy_from_slice(&cs.to_be_bytes());
        short[38..40].copy_from_slice(&(ip_len - 20).to_be_bytes());
        assert_eq!(decap(&c, &short), Err(RxDrop::Truncated));
        let g = outer(Kind::Geneve, true, 42, 60);
        assert!(decap(&cfg(Kind::Geneve, true), &g[..60]).is_err());
    }

    #[test]
    fn bad_flags_vni_version_options() {
        let c = cfg(Kind::Vxlan, false);
        let mut b = outer(Kind::Vxlan, false, 42, 60);
        b[42] = 0;
        assert_eq!(decap(&c, &b), Err(RxDrop::BadFlags));
        b[42] = 0x08 | 0x80; // reserved bits are ignored (RFC 7348 §5)
        assert!(matches!(decap(&c, &b), Ok(Rx::Frame { .. })));
        assert_eq!(
            decap(&c, &outer(Kind::Vxlan, false, 43, 60)),
            Err(RxDrop::UnknownVni)
        );

        let c = cfg(Kind::Geneve, false);
        let good = outer(Kind::Geneve, false, 42, 64);
        let mut b = good.clone();
        b[42] |= 0x40; // version 1
        assert_eq!(decap(&c, &b), Err(RxDrop::BadVersion));
        let mut b = good.clone();
        b[43] |= geneve::FLAG_OAM;
        assert_eq!(decap(&c, &b), Err(RxDrop::Oam));
        let mut b = good.clone();
        b[43] |= geneve::FLAG_CRITICAL;
        assert_eq!(decap(&c, &b), Err(RxDrop::CriticalOption));
        let mut b = good.clone();
        b[44..46].copy_from_slice(&0x0800u16.to_be_bytes());
        assert_eq!(decap(&c, &b), Err(RxDrop::BadProtocol));
        assert_eq!(
            decap(&c, &outer(Kind::Geneve, false, 7, 60)),
            Err(RxDrop::UnknownVni)
        );
        // One option word (class 0x0101, type 0x01 non-critical, no data):
        // the inner frame starts 4 bytes later. The same option with the
        // critical type bit (C bit not set by a sloppy sender) is dropped.
        let mut b = good.clone();
        b[42] = 0x01;
        b[50..54].copy_from_slice(&[0x01, 0x01, 0x01, 0x00]);
        assert!(matches!(
            decap(&c, &b),
            Ok(Rx::Frame {
                off: 54,
                len: 60,
                ..
            })
        ));
        b[52] = 0x81;
        assert_eq!(decap(&c, &b), Err(RxDrop::CriticalOption));
        b[52] = 0x01;
        b[53] = 0x05; // option longer than the options area
        assert_eq!(decap(&c, &b), Err(RxDrop::Malformed));
    }

    #[test]
    fn foreign_traffic() {
        let c = cfg(Kind::Vxlan, false);
        let mut b = outer(Kind::Vxlan, false, 42, 60);
        b[36..38].copy_from_slice(&53u16.to_be_bytes()); // another UDP port
        assert_eq!(decap(&c, &b), Err(RxDrop::Foreign));
        // Geneve arriving at a VXLAN port.
        let g = outer(Kind::Geneve, false, 42, 60);
        assert_eq!(decap(&c, &g), Err(RxDrop::Foreign));
        // Another destination address.
        let other = DecapCfg {
            local: A4.into(),
            ..c
        };
        assert_eq!(
            decap(&other, &outer(Kind::Vxlan, false, 42, 60)),
            Err(RxDrop::Foreign)
        );
        // Not IP, not ARP.
        let mut b = outer(Kind::Vxlan, false, 42, 60);
        b[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
        assert_eq!(decap(&c, &b), Err(RxDrop::Foreign));
        b[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(decap(&c, &b), Ok(Rx::Control));
    }

    #[test]
    fn ipv4_checksum_and_fragments() {
        let c = cfg(Kind::Vxlan, false);
        let mut b = outer(Kind::Vxlan, false, 42, 60);
        b[24] ^= 0xff;
        assert_eq!(decap(&c, &b), Err(RxDrop::BadIpChecksum));
        let mut b = outer(Kind::Vxlan, false, 42, 60);
        // MF set (DF cleared), checksum fixed.
        b[20] = 0x20;
        b[24..26].copy_from_slice(&[0, 0]);
        let cs = wire::checksum::checksum(&b[14..34]);
        b[24..26].copy_from_slice(&cs.to_be_bytes());
        assert_eq!(decap(&c, &b), Err(RxDrop::Fragment));
    }

    #[test]
    fn zero_and_partial_udp_checksums_are_accepted() {
        let c = cfg(Kind::Vxlan, true);
        let mut b = outer(Kind::Vxlan, true, 42, 60);
        b[14 + 46..14 + 48].copy_from_slice(&[0, 0]);
        assert!(matches!(decap(&c, &b), Ok(Rx::Frame { .. })));
        b[14 + 46..14 + 48].copy_from_slice(&[0x12, 0x34]); // pseudo-header only
        assert!(matches!(decap(&c, &b), Ok(Rx::Frame { .. })));
    }

    #[test]
    fn neighbour_discovery_is_control() {
        let c = cfg(Kind::Vxlan, true);
        let mut b = outer(Kind::Vxlan, true, 42, 60);
        b[14 + 6] = ICMPV6;
        b[14 + 40] = 135;
        assert_eq!(decap(&c, &b), Ok(Rx::Control));
        b[14 + 40] = 128; // echo request: not ours to answer
        assert_eq!(decap(&c, &b), Err(RxDrop::Foreign));
    }
}

#[cfg(test)]
mod fuzz {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn random_bytes_never_panic() {
        // Deterministic xorshift: arbitrary bytes behind a valid Ethernet +
        // IPv4/IPv6 type, all parsers reached without panicking.
        let mut x: u64 = 0x1234_5678_9abc_def1;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for kind in [Kind::Vxlan, Kind::Geneve] {
            let c = DecapCfg {
                kind,
                vni: 1,
                local: Ipv4Addr::new(10, 0, 0, 1).into(),
                port: kind.default_port(),
            };
            for i in 0..20000 {
                let len = (next() % 160) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                if len > 14 {
                    b[12..14].copy_from_slice(if i % 2 == 0 {
                        &[0x08, 0]
                    } else {
                        &[0x86, 0xdd]
                    });
                    b[14] = if i % 2 == 0 { 0x45 } else { 0x60 };
                }
                let _ = decap(&c, &b);
            }
        }
    }
}
