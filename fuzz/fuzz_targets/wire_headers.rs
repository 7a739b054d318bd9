//! Every wire header view over arbitrary bytes: a view built with
//! `new_checked` must never panic on any getter, and every slice it returns
//! must lie inside the buffer and agree with the lengths it announces.
#![no_main]

use libfuzzer_sys::fuzz_target;
use wire::{arp, ethernet, flow, geneve, ipv4, ipv6, payload, tcp, udp, vxlan, EtherType};

/// `inner` is a sub-slice of `outer` (same memory).
fn inside(outer: &[u8], inner: &[u8]) -> bool {
    let (o, i) = (outer.as_ptr() as usize, inner.as_ptr() as usize);
    i >= o && i + inner.len() <= o + outer.len()
}

fn l4(b: &[u8]) {
    if let Ok(u) = udp::Packet::new_checked(b) {
        let (_, _, _) = (u.src_port(), u.dst_port(), u.checksum());
        assert!(u.len() as usize <= b.len() && u.len() >= 8);
        assert!(inside(b, u.payload()));
        assert_eq!(u.payload().len(), u.len() as usize - 8);
        vxlan_geneve(u.payload());
    }
    if let Ok(t) = tcp::Packet::new_checked(b) {
        let _ = (
            t.src_port(),
            t.dst_port(),
            t.seq(),
            t.ack(),
            t.flags(),
            t.window(),
        );
        let _ = (t.checksum(), t.urgent(), t.has(1));
        assert!(t.header_len() >= 20 && t.header_len() <= b.len());
        assert!(inside(b, t.payload()));
        let _ = t.verify_checksum_v4([1, 2, 3, 4].into(), [5, 6, 7, 8].into());
    }
    if let Ok(h) = payload::Header::new_checked(b) {
        let _ = (h.magic(), h.stream(), h.seq(), h.timestamp_ns());
    }
}

fn vxlan_geneve(b: &[u8]) {
    if let Ok(v) = vxlan::Packet::new_checked(b) {
        let _ = (v.flags(), v.vni_valid(), v.vni());
        assert!(inside(b, v.payload()));
        eth(v.payload(), 1);
    }
    if let Ok(g) = geneve::Packet::new_checked(b) {
        let _ = (g.version(), g.oam(), g.critical(), g.protocol(), g.vni());
        assert!(g.header_len() <= b.len());
        assert_eq!(g.header_len(), geneve::HEADER_LEN + g.options_len());
        assert!(inside(b, g.options()) && inside(b, g.payload()));
        let mut n = 0;
        for o in g.opts() {
            n += 1;
            assert!(n <= 64, "option iterator must end");
            if let Ok(o) = o {
                assert!(inside(g.options(), o.data));
                let _ = o.critical();
            }
        }
        eth(g.payload(), 1);
    }
}

fn eth(b: &[u8], depth: u32) {
    if depth > 2 {
        return;
    }
    if let Ok(f) = ethernet::Frame::new_checked(b) {
        let _ = (f.dst_addr(), f.src_addr(), f.ethertype());
        assert!(inside(b, f.payload()));
        let _ = f.tags();
    }
    if let Ok(t) = ethernet::parse_tags(b) {
        assert!(t.l3_offset <= b.len(), "l3 offset inside the frame");
        assert!(t.count as usize <= ethernet::MAX_TAGS);
        assert_eq!(t.l3_offset, ethernet::HEADER_LEN + 4 * t.count as usize);
        let _ = (t.outer_vid(), t.inner_vid());
        let l3 = &b[t.l3_offset..];
        match t.ethertype {
            EtherType::IPV4 => ip4(l3),
            EtherType::IPV6 => ip6(l3),
            EtherType::ARP => {
                if let Ok(a) = arp::Packet::new_checked(l3) {
                    let _ = (a.htype(), a.ptype(), a.oper(), a.sender_ip(), a.target_ip());
                    let _ = (a.sender_mac(), a.target_mac());
                }
            }
            _ => {}
        }
    }
    // flow parsing agrees with the views: a tuple only from a valid frame.
    if let Ok(Some(t)) = flow::parse_l4(b) {
        assert!(t.proto == ipv4::proto::UDP || t.proto == ipv4::proto::TCP);
        assert!(ethernet::parse_tags(b).is_ok());
    }
}

fn ip4(b: &[u8]) {
    if let Ok(p) = ipv4::Packet::new_checked(b) {
        assert_eq!(p.version(), 4);
        let hl = p.header_len();
        assert!(hl >= 20 && hl <= p.total_len() as usize && p.total_len() as usize <= b.len());
        let _ = (
            p.dscp(),
            p.ecn(),
            p.ident(),
            p.dont_frag(),
            p.more_frags(),
            p.frag_offset(),
        );
        let _ = (
            p.ttl(),
            p.protocol(),
            p.checksum(),
            p.src_addr(),
            p.dst_addr(),
        );
        let _ = (p.is_later_fragment(), p.verify_checksum());
        assert!(inside(b, p.options()) && inside(b, p.payload()));
        assert_eq!(p.options().len(), hl - 20);
        assert_eq!(p.payload().len(), p.total_len() as usize - hl);
        l4(p.payload());
    }
}

fn ip6(b: &[u8]) {
    if let Ok(p) = ipv6::Packet::new_checked(b) {
        assert_eq!(p.version(), 6);
        let _ = (
            p.traffic_class(),
            p.flow_label(),
            p.next_header(),
            p.hop_limit(),
        );
        let _ = (p.src_addr(), p.dst_addr());
        assert!(inside(b, p.payload()));
        assert_eq!(p.payload().len(), p.payload_len() as usize);
        if let Ok(Some((_, off))) = p.upper_layer() {
            assert!(off <= p.payload().len(), "upper layer inside the payload");
            l4(&p.payload()[off..]);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    eth(data, 0);
    // Each view directly on the raw bytes too (not only behind Ethernet).
    ip4(data);
    ip6(data);
    l4(data);
    vxlan_geneve(data);
    let _ = wire::checksum::checksum(data);
});
