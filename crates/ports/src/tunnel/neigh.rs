//! Underlay neighbour resolution: ARP (IPv4) and IPv6 neighbour discovery
//! frames, built and read by the tunnel's control thread (control path:
//! these allocate).

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::checksum;
use wire::MacAddr;

/// What a control frame tells the tunnel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heard {
    /// A binding IP → MAC learned from the frame (its sender), if any.
    pub binding: Option<(IpAddr, MacAddr)>,
    /// A reply to send, if the frame asked for our address.
    pub reply: Option<Vec<u8>>,
}

fn eth(dst: MacAddr, src: MacAddr, et: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(90);
    f.extend_from_slice(dst.as_bytes());
    f.extend_from_slice(src.as_bytes());
    f.extend_from_slice(&et.to_be_bytes());
    f
}

fn arp(
    oper: u16,
    smac: MacAddr,
    sip: Ipv4Addr,
    dmac: MacAddr,
    tmac: MacAddr,
    tip: Ipv4Addr,
) -> Vec<u8> {
    let mut f = eth(dmac, smac, 0x0806);
    f.extend_from_slice(&[0, 1, 8, 0, 6, 4]);
    f.extend_from_slice(&oper.to_be_bytes());
    f.extend_from_slice(smac.as_bytes());
    f.extend_from_slice(&sip.octets());
    f.extend_from_slice(tmac.as_bytes());
    f.extend_from_slice(&tip.octets());
    f.resize(60, 0);
    f
}

/// The solicited-node multicast address of `a` and its MAC.
pub fn solicited_node(a: &Ipv6Addr) -> (Ipv6Addr, MacAddr) {
    let o = a.octets();
    let ip = Ipv6Addr::new(
        0xff02,
        0,
        0,
        0,
        0,
        1,
        0xff00 | o[13] as u16,
        u16::from_be_bytes([o[14], o[15]]),
    );
    (ip, MacAddr([0x33, 0x33, 0xff, o[13], o[14], o[15]]))
}

fn icmp6(smac: MacAddr, dmac: MacAddr, src: &Ipv6Addr, dst: &Ipv6Addr, body: &[u8]) -> Vec<u8> {
    let mut f = eth(dmac, smac, 0x86dd);
    f.extend_from_slice(&[0x60, 0, 0, 0]);
    f.extend_from_slice(&(body.len() as u16).to_be_bytes());
    f.extend_from_slice(&[58, 255]);
    f.extend_from_slice(&src.octets());
    f.extend_from_slice(&dst.octets());
    let at = f.len();
    f.extend_from_slice(body);
    let sum = checksum::add(checksum::pseudo_v6(src, dst, 58, body.len() as u32), body);
    let c = !checksum::fold(sum);
    f[at + 2..at + 4].copy_from_slice(&c.to_be_bytes());
    f
}

/// A request for the MAC of `target`, from `(mac, ip)`: an ARP who-has or
/// an ICMPv6 neighbour solicitation to the solicited-node group. `None`
/// if the families differ.
pub fn request(mac: MacAddr, ip: IpAddr, target: IpAddr) -> Option<Vec<u8>> {
    match (ip, target) {
        (IpAddr::V4(s), IpAddr::V4(t)) => {
            Some(arp(1, mac, s, MacAddr::BROADCAST, MacAddr::ZERO, t))
        }
        (IpAddr::V6(s), IpAddr::V6(t)) => {
            let (dip, dmac) = solicited_node(&t);
            let mut b = vec![135, 0, 0, 0, 0, 0, 0, 0];
            b.extend_from_slice(&t.octets());
            b.extend_from_slice(&[1, 1]);
            b.extend_from_slice(mac.as_bytes());
            Some(icmp6(mac, dmac, &s, &dip, &b))
        }
        _ => None,
    }
}

/// Reads a control frame (ARP, or ICMPv6 NS/NA) received on the underlay
/// of a tunnel at `(mac, ip)`.
pub fn hear(mac: MacAddr, ip: IpAddr, f: &[u8]) -> Heard {
    let mut h = Heard {
        binding: None,
        reply: None,
    };
    if f.len() < 14 {
        return h;
    }
    let et = u16::from_be_bytes([f[12], f[13]]);
    let esrc = MacAddr::from_bytes(&f[6..12]);
    if et == 0x0806 {
        let Ok(a) = wire::arp::Packet::new_checked(&f[14..]) else {
            return h;
        };
        let (smac, sip) = (a.sender_mac(), a.sender_ip());
        if !sip.is_unspecified() && smac.is_unicast() {
            h.binding = Some((sip.into(), smac));
        }
        if a.oper() == 1 && IpAddr::V4(a.target_ip()) == ip {
            if let IpAddr::V4(me) = ip {
                h.reply = Some(arp(2, mac, me, smac, smac, sip));
            }
        }
        return h;
    }
    if et != 0x86dd || f.len() < 14 + 40 + 24 {
        return h;
    }
    let l3 = &f[14..];
    if l3[6] != 58 || l3[7] != 255 {
        return h; // not ICMPv6, or not link-local scope (RFC 4861 §7.1)
    }
    let src = Ipv6Addr::from(<[u8; 16]>::try_from(&l3[8..24]).unwrap_or_default());
    let plen = u16::from_be_bytes([l3[4], l3[5]]) as usize;
    let Some(body) = l3.get(40..40 + plen) else {
        return h;
    };
    if body.len() < 24 {
        return h;
    }
    let target = Ipv6Addr::from(<[u8; 16]>::try_from(&body[8..24]).unwrap_or_default());
    // Link-layer address option: 1 = source (in NS), 2 = target (in NA).
    let lla = |want: u8| -> Option<MacAddr> {
        let mut o = &body[24..];
        while o.len() >= 8 {
            let l = o[1] as usize * 8;
            if l == 0 || l > o.len() {
                return None;
            }
            if o[0] == want {
                return Some(MacAddr::from_bytes(&o[2..8]));
            }
            o = &o[l..];
        }
        None
    };
    match body[0] {
        135 => {
            let smac = lla(1).unwrap_or(esrc);
            if !src.is_unspecified() && smac.is_unicast() {
                h.binding = Some((src.into(), smac));
            }
            if IpAddr::V6(target) == ip && !src.is_unspecified() {
                if let IpAddr::V6(me) = ip {
                    let mut b = vec![136, 0, 0, 0, 0x60, 0, 0, 0];
                    b.extend_from_slice(&me.octets());
                    b.extend_from_slice(&[2, 1]);
                    b.extend_from_slice(mac.as_bytes());
                    h.reply = Some(icmp6(mac, esrc, &me, &src, &b));
                }
            }
        }
        136 => {
            let tmac = lla(2).unwrap_or(esrc);
            if tmac.is_unicast() {
                h.binding = Some((target.into(), tmac));
            }
        }
        _ => {}
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    const MA: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xa]);
    const MB: MacAddr = MacAddr([2, 0, 0, 0, 0, 0xb]);

    #[test]
    fn arp_request_reply_round_trip() {
        let a: IpAddr = Ipv4Addr::new(10, 9, 0, 1).into();
        let b: IpAddr = Ipv4Addr::new(10, 9, 0, 2).into();
        let req = request(MA, a, b).unwrap();
        // B hears A's request: learns A, replies.
        let hb = hear(MB, b, &req);
        assert_eq!(hb.binding, Some((a, MA)));
        let rep = hb.reply.unwrap();
        assert_eq!(&rep[0..6], MA.as_bytes());
        // A hears the reply: learns B, no reply.
        let ha = hear(MA, a, &rep);
        assert_eq!(ha.binding, Some((b, MB)));
        assert!(ha.reply.is_none());
        // A third host ignores the request but may learn.
        let c: IpAddr = Ipv4Addr::new(10, 9, 0, 3).into();
        assert!(hear(MB, c, &req).reply.is_none());
    }

    #[test]
    fn neighbour_solicitation_round_trip() {
        let a: IpAddr = "fd00:9::1".parse::<Ipv6Addr>().unwrap().into();
        let b: IpAddr = "fd00:9::2".parse::<Ipv6Addr>().unwrap().into();
        let ns = request(MA, a, b).unwrap();
        assert_eq!(&ns[0..3], &[0x33, 0x33, 0xff]);
        // The ICMPv6 checksum verifies.
        let l3 = &ns[14..];
        let body = &l3[40..];
        let (s, d) = (
            Ipv6Addr::from(<[u8; 16]>::try_from(&l3[8..24]).unwrap()),
            Ipv6Addr::from(<[u8; 16]>::try_from(&l3[24..40]).unwrap()),
        );
        let sum = checksum::add(checksum::pseudo_v6(&s, &d, 58, body.len() as u32), body);
        assert_eq!(checksum::fold(sum), 0xffff);
        let hb = hear(MB, b, &ns);
        assert_eq!(hb.binding, Some((a, MA)));
        let na = hb.reply.unwrap();
        let ha = hear(MA, a, &na);
        assert_eq!(ha.binding, Some((b, MB)));
        assert!(ha.reply.is_none());
        // Hop limit other than 255 is ignored.
        let mut bad = ns.clone();
        bad[14 + 7] = 64;
        assert_eq!(hear(MB, b, &bad).binding, None);
    }

    #[test]
    fn junk_is_ignored() {
        let a: IpAddr = Ipv4Addr::new(10, 9, 0, 1).into();
        for len in 0..100 {
            let mut f = vec![0xffu8; len];
            if len >= 14 {
                f[12] = 0x86;
                f[13] = 0xdd;
            }
            let _ = hear(MA, a, &f);
            if len >= 14 {
                f[12] = 0x08;
                f[13] = 0x06;
            }
            let _ = hear(MA, a, &f);
        }
    }
}
