//! Encapsulation: per-remote outer headers computed once, patched per
//! frame (lengths, checksums, UDP source port), and the MTU arithmetic.
//!
//! An outer header is Ethernet (14) + IPv4 (20) or IPv6 (40) + UDP (8) +
//! VXLAN or Geneve without options (8): 50 B over IPv4, 70 B over IPv6,
//! counted from the inner frame's IP packet (the inner Ethernet header, 14
//! B, is part of the tunnel payload). An outer IP packet must fit the
//! underlay's MTU: inner frame length + 36 (IPv4) or + 56 (IPv6) ≤ MTU.
//! Frames that do not fit are dropped and counted, never fragmented (the
//! outer IPv4 header carries DF).

use std::net::IpAddr;

use wire::checksum;
use wire::MacAddr;

/// Tunnel protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// VXLAN, RFC 7348.
    Vxlan,
    /// Geneve, RFC 8926.
    Geneve,
}

impl Kind {
    /// The IANA UDP port.
    pub fn default_port(self) -> u16 {
        match self {
            Kind::Vxlan => wire::vxlan::PORT,
            Kind::Geneve => wire::geneve::PORT,
        }
    }

    /// Port kind name ("vxlan", "geneve").
    pub fn name(self) -> &'static str {
        match self {
            Kind::Vxlan => "vxlan",
            Kind::Geneve => "geneve",
        }
    }
}

/// Ethernet header length.
pub const ETH: usize = 14;
/// Tunnel header length (VXLAN, Geneve without options).
pub const TUN: usize = 8;
/// Largest outer header (Ethernet + IPv6 + UDP + tunnel header).
pub const MAX_OUTER: usize = ETH + 40 + 8 + TUN;

/// Overhead over the inner IP packet for an underlay of this IP version:
/// 50 B for IPv4, 70 B for IPv6 (outer IP + UDP + tunnel + inner Ethernet).
pub const fn overhead(v6: bool) -> usize {
    (if v6 { 40 } else { 20 }) + 8 + TUN + ETH
}

/// Bytes an inner frame adds to the outer IP packet beyond its own length:
/// 36 (IPv4) or 56 (IPv6).
pub const fn ip_overhead(v6: bool) -> usize {
    (if v6 { 40 } else { 20 }) + 8 + TUN
}

/// Largest inner frame (Ethernet header included, no FCS) an underlay
/// with IP MTU `mtu` carries.
pub const fn max_inner_frame(mtu: u32, v6: bool) -> u32 {
    mtu.saturating_sub(ip_overhead(v6) as u32)
}

/// Why a frame was not encapsulated.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EncapError {
    /// Outer IP packet would exceed the underlay MTU.
    TooBig,
    /// Inner frame shorter than an Ethernet header.
    Runt,
}

/// The precomputed outer header towards one remote endpoint.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outer {
    hdr: [u8; MAX_OUTER],
    len: u8,
    v6: bool,
    /// IPv4: sum of the header words with total length and checksum zero.
    /// IPv6: sum of the pseudo-header's addresses and next header.
    partial: u64,
    mtu: u32,
}

/// Everything that defines the outer header towards a remote.
#[derive(Clone, Copy, Debug)]
pub struct OuterSpec {
    /// Tunnel protocol.
    pub kind: Kind,
    /// VNI (24 bits).
    pub vni: u32,
    /// Local MAC (the underlay interface's).
    pub src_mac: MacAddr,
    /// Next hop's MAC (the remote or the gateway).
    pub dst_mac: MacAddr,
    /// Local tunnel address.
    pub src_ip: IpAddr,
    /// Remote tunnel address (same family as `src_ip`).
    pub dst_ip: IpAddr,
    /// UDP destination port.
    pub dst_port: u16,
    /// Underlay IP MTU.
    pub mtu: u32,
    /// Outer TTL / hop limit.
    pub ttl: u8,
}

impl Outer {
    /// Builds the template; `None` if the two addresses are of different
    /// families.
    pub fn new(s: &OuterSpec) -> Option<Outer> {
        let mut h = [0u8; MAX_OUTER];
        h[0..6].copy_from_slice(s.dst_mac.as_bytes());
        h[6..12].copy_from_slice(s.src_mac.as_bytes());
        let (v6, ip_len, partial) = match (s.src_ip, s.dst_ip) {
            (IpAddr::V4(src), IpAddr::V4(dst)) => {
                h[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
                let ip = &mut h[ETH..ETH + 20];
                ip[0] = 0x45;
                ip[6] = 0x40; // DF: never fragmented
                ip[8] = s.ttl;
                ip[9] = 17;
                ip[12..16].copy_from_slice(&src.octets());
                ip[16..20].copy_from_slice(&dst.octets());
                (false, 20, checksum::add(0, ip))
            }
            (IpAddr::V6(src), IpAddr::V6(dst)) => {
                h[12..14].copy_from_slice(&0x86ddu16.to_be_bytes());
                let ip = &mut h[ETH..ETH + 40];
                ip[0] = 0x60;
                ip[6] = 17;
                ip[7] = s.ttl;
                ip[8..24].copy_from_slice(&src.octets());
                ip[24..40].copy_from_slice(&dst.octets());
                (true, 40, checksum::pseudo_v6(&src, &dst, 17, 0))
            }
            _ => return None,
        };
        let u = ETH + ip_len;
        h[u + 2..u + 4].copy_from_slice(&s.dst_port.to_be_bytes());
        let t = &mut h[u + 8..u + 8 + TUN];
        match s.kind {
            Kind::Vxlan => wire::vxlan::Packet::new_unchecked(t).fill(s.vni),
            Kind::Geneve => wire::geneve::Packet::new_unchecked(t).fill(s.vni),
        }
        Some(Outer {
            hdr: h,
            len: (u + 8 + TUN) as u8,
            v6,
            partial,
            mtu: s.mtu,
        })
    }

    /// Length of the outer header.
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Never empty (for clippy's `len_without_is_empty`).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Whether the underlay is IPv6.
    #[inline]
    pub fn v6(&self) -> bool {
        self.v6
    }

    /// The header bytes as built (lengths and checksums zero).
    pub fn bytes(&self) -> &[u8] {
        &self.hdr[..self.len()]
    }

    /// Writes the outer header into `buf[..self.len()]` for the inner frame
    /// that already lies at `buf[self.len()..self.len() + inner_len]`, and
    /// returns the length of the whole outer frame. Only the lengths, the
    /// checksums and the UDP source port differ from the template.
    #[inline]
    pub fn write(&self, buf: &mut [u8], inner_len: usize, sport: u16) -> Result<usize, EncapError> {
        if inner_len < ETH {
            return Err(EncapError::Runt);
        }
        let hl = self.len();
        let ip_len = hl - ETH + inner_len;
        if ip_len > self.mtu as usize || buf.len() < hl + inner_len {
            return Err(EncapError::TooBig);
        }
        // Constant-size copies: inlined moves, not a memmove call.
        if self.v6 {
            buf[..70].copy_from_slice(&self.hdr[..70]);
        } else {
            buf[..50].copy_from_slice(&self.hdr[..50]);
        }
        let udp_len = inner_len + 8 + TUN;
        if !self.v6 {
            let ip = &mut buf[ETH..ETH + 20];
            ip[2..4].copy_from_slice(&(ip_len as u16).to_be_bytes());
            let c = !checksum::fold(self.partial + ip_len as u64);
            ip[10..12].copy_from_slice(&c.to_be_bytes());
            let u = &mut buf[ETH + 20..ETH + 28];
            u[0..2].copy_from_slice(&sport.to_be_bytes());
            u[4..6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            // UDP checksum 0: allowed over IPv4 (RFC 7348 §5, RFC 8926 §3.3).
        } else {
            buf[ETH + 4..ETH + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            let u0 = ETH + 40;
            buf[u0..u0 + 2].copy_from_slice(&sport.to_be_bytes());
            buf[u0 + 4..u0 + 6].copy_from_slice(&(udp_len as u16).to_be_bytes());
            // IPv6 needs a real UDP checksum (RFC 8200 §8.1; Linux drops
            // zero-checksum UDP over IPv6 by default).
            let sum = checksum::add(self.partial + udp_len as u64, &buf[u0..u0 + udp_len]);
            let mut c = !checksum::fold(sum);
            if c == 0 {
                c = 0xffff;
            }
            buf[u0 + 6..u0 + 8].copy_from_slice(&c.to_be_bytes());
        }
        Ok(hl + inner_len)
    }
}

/// The outer UDP source port for an inner frame: a hash of its flow (MAC
/// addresses, and IP addresses, protocol and ports where present) mapped
/// into 49152..=65535, so that the underlay's ECMP spreads flows and keeps
/// each one on one path (RFC 7348 §5).
#[inline]
pub fn flow_sport(f: &[u8]) -> u16 {
    let mut h: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut mix = |x: u64| {
        h = (h ^ x).wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 29;
    };
    if f.len() >= ETH {
        mix(u64::from_be_bytes([
            0, 0, f[0], f[1], f[2], f[3], f[4], f[5],
        ]));
        mix(u64::from_be_bytes([
            0, 0, f[6], f[7], f[8], f[9], f[10], f[11],
        ]));
        let et = u16::from_be_bytes([f[12], f[13]]);
        if et == 0x0800 && f.len() >= ETH + 20 {
            let ip = &f[ETH..];
            let ihl = (ip[0] & 0x0f) as usize * 4;
            mix(u64::from_be_bytes([
                ip[12], ip[13], ip[14], ip[15], ip[16], ip[17], ip[18], ip[19],
            ]));
            mix(ip[9] as u64);
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff != 0;
            if !frag && (ip[9] == 6 || ip[9] == 17) && ip.len() >= ihl + 4 && ihl >= 20 {
                mix(u32::from_be_bytes([ip[ihl], ip[ihl + 1], ip[ihl + 2], ip[ihl + 3]]) as u64);
            }
        } else if et == 0x86dd && f.len() >= ETH + 40 {
            let ip = &f[ETH..];
            for c in ip[8..40].chunks_exact(8) {
                mix(u64::from_be_bytes([
                    c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
                ]));
            }
            mix(ip[6] as u64);
            if (ip[6] == 6 || ip[6] == 17) && ip.len() >= 44 {
                mix(u32::from_be_bytes([ip[40], ip[41], ip[42], ip[43]]) as u64);
            }
        }
    }
    49152 | ((h >> 32) as u16 & 0x3fff)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::{Ipv4Addr, Ipv6Addr};

    fn spec(kind: Kind, v6: bool, mtu: u32) -> OuterSpec {
        let (s, d): (IpAddr, IpAddr) = if v6 {
            (
                "fd00::1".parse::<Ipv6Addr>().unwrap().into(),
                "fd00::2".parse::<Ipv6Addr>().unwrap().into(),
            )
        } else {
            (
                Ipv4Addr::new(192, 0, 2, 1).into(),
                Ipv4Addr::new(192, 0, 2, 2).into(),
            )
        };
        OuterSpec {
            kind,
            vni: 42,
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: s,
            dst_ip: d,
            dst_port: kind.default_port(),
            mtu,
            ttl: 64,
        }
    }

    fn inner(len: usize) -> Vec<u8> {
        let mut f: Vec<u8> = (0..len).map(|i| i as u8).collect();
        f[12] = 0x08;
        f[13] = 0x00;
        f
    }

    fn encap(o: &Outer, f: &[u8]) -> Result<Vec<u8>, EncapError> {
        let mut b = vec![0u8; o.len() + f.len()];
        b[o.len()..].copy_from_slice(f);
        let n = o.write(&mut b, f.len(), flow_sport(f))?;
        b.truncate(n);
        Ok(b)
    }

    #[test]
    fn overheads_are_50_and_70() {
        assert_eq!(overhead(false), 50);
        assert_eq!(overhead(true), 70);
        assert_eq!(max_inner_frame(1500, false), 1464);
        assert_eq!(max_inner_frame(1500, true), 1444);
        assert_eq!(
            Outer::new(&spec(Kind::Vxlan, false, 1500)).unwrap().len(),
            50
        );
        assert_eq!(
            Outer::new(&spec(Kind::Geneve, true, 1500)).unwrap().len(),
            70
        );
    }

    #[test]
    fn ipv4_vxlan_headers_and_checksum() {
        let o = Outer::new(&spec(Kind::Vxlan, false, 1500)).unwrap();
        let f = inner(100);
        let b = encap(&o, &f).unwrap();
        assert_eq!(b.len(), 150);
        let ip = wire::ipv4::Packet::new_checked(&b[ETH..]).unwrap();
        assert_eq!(ip.total_len(), 136);
        assert!(ip.verify_checksum());
        assert!(ip.dont_frag());
        let u = wire::udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(u.dst_port(), 4789);
        assert_eq!(u.len(), 116);
        assert!(u.src_port() >= 49152);
        assert_eq!(be(&b[40..42]), 0); // zero UDP checksum over IPv4
        let v = wire::vxlan::Packet::new_checked(u.payload()).unwrap();
        assert!(v.vni_valid());
        assert_eq!(v.vni(), 42);
        assert_eq!(v.payload(), &f[..]);
        // Another length: only lengths and the checksum change.
        let b2 = encap(&o, &inner(1400)).unwrap();
        let ip2 = wire::ipv4::Packet::new_checked(&b2[ETH..]).unwrap();
        assert!(ip2.verify_checksum());
        assert_eq!(ip2.total_len(), 1436);
    }

    fn be(b: &[u8]) -> u16 {
        u16::from_be_bytes([b[0], b[1]])
    }

    #[test]
    fn ipv6_geneve_has_valid_udp_checksum() {
        let o = Outer::new(&spec(Kind::Geneve, true, 1500)).unwrap();
        let f = inner(333);
        let b = encap(&o, &f).unwrap();
        let ip = wire::ipv6::Packet::new_checked(&b[ETH..]).unwrap();
        assert_eq!(ip.payload_len() as usize, 8 + 8 + 333);
        let u = wire::udp::Packet::new_checked(ip.payload()).unwrap();
        assert_ne!(be(&b[ETH + 46..]), 0);
        assert!(u.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()));
        let g = wire::geneve::Packet::new_checked(u.payload()).unwrap();
        assert_eq!((g.version(), g.vni(), g.protocol()), (0, 42, 0x6558));
        assert_eq!(g.payload(), &f[..]);
    }

    #[test]
    fn too_big_is_refused_never_fragmented() {
        for v6 in [false, true] {
            let o = Outer::new(&spec(Kind::Vxlan, v6, 1500)).unwrap();
            let max = max_inner_frame(1500, v6) as usize;
            assert!(encap(&o, &inner(max)).is_ok());
            assert_eq!(encap(&o, &inner(max + 1)), Err(EncapError::TooBig));
        }
        let o = Outer::new(&spec(Kind::Vxlan, false, 1500)).unwrap();
        assert_eq!(encap(&o, &[0u8; 13]), Err(EncapError::Runt));
    }

    #[test]
    fn mixed_families_are_refused() {
        let mut s = spec(Kind::Vxlan, false, 1500);
        s.dst_ip = "fd00::2".parse::<Ipv6Addr>().unwrap().into();
        assert!(Outer::new(&s).is_none());
    }

    #[test]
    fn sport_depends_on_the_flow_and_stays_in_range() {
        let mut seen = std::collections::HashSet::new();
        for p in 0..512u16 {
            let mut f = inner(64);
            f[14] = 0x45;
            f[20] = 0;
            f[21] = 0;
            f[23] = 17;
            f[34..36].copy_from_slice(&p.to_be_bytes());
            let s = flow_sport(&f);
            assert!(s >= 49152);
            assert_eq!(s, flow_sport(&f), "deterministic");
            seen.insert(s);
        }
        assert!(seen.len() > 400, "ports spread: {}", seen.len());
        // A truncated frame still gets a port in range.
        assert!(flow_sport(&[1, 2, 3]) >= 49152);
    }
}
