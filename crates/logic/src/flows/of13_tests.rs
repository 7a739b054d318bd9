//! The OpenFlow 1.3 semantics of the matches and actions added for real
//! controllers, case by case after the os-ken switch test suite
//! (os_ken/tests/switch/of13): frames built here with valid checksums, the
//! flows written in the text syntax and as flow-mods, and each frame that
//! leaves checked byte by byte (and its checksums).

use super::*;
use crate::testutil::Batch;
use openflow::{
    bac, bmc, et, fc, gc, gmfc, gt, mc, mf, mmfc, oxm, Band, Bucket, GroupMod, Instruction,
    MeterMod, OfpError, Oxm, GROUP_ANY,
};
use serde_json::json;
use std::net::{Ipv4Addr, Ipv6Addr};

// ------------------------------------------------------------ frames

const DST: [u8; 6] = [0x22, 0x22, 0x22, 0x22, 0x22, 0x22];
const SRC: [u8; 6] = [0x12, 0x11, 0x11, 0x11, 0x11, 0x11];

/// Ethernet header (with VLAN tags `tags`, TPID and TCI each) and
/// `payload` of EtherType `et`.
fn eth(tags: &[(u16, u16)], et: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = DST.to_vec();
    f.extend_from_slice(&SRC);
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&et.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// MPLS label stack entries (label, tc, ttl; bottom of stack on the
/// last) in front of `payload`.
fn mpls(lses: &[(u32, u8, u8)], payload: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for (i, &(label, tc, ttl)) in lses.iter().enumerate() {
        let bos = (i + 1 == lses.len()) as u32;
        let w = (label << 12) | ((tc as u32) << 9) | (bos << 8) | ttl as u32;
        v.extend_from_slice(&w.to_be_bytes());
    }
    v.extend_from_slice(payload);
    v
}

fn v4(a: &str) -> [u8; 4] {
    a.parse::<Ipv4Addr>().unwrap().octets()
}

fn v6(a: &str) -> [u8; 16] {
    a.parse::<Ipv6Addr>().unwrap().octets()
}

/// The L4 checksum of `l4` (protocol `proto`) under the IPv4 or IPv6
/// pseudo-header of `src`/`dst`, written at its place (SCTP: its CRC32c).
fn seal_l4(proto: u8, src: &[u8], dst: &[u8], l4: &mut [u8]) {
    use wire::checksum::{add, fold, pseudo_v4, pseudo_v6};
    let len = l4.len();
    let pseudo = |n| {
        if src.len() == 4 {
            pseudo_v4(
                <[u8; 4]>::try_from(src).unwrap().into(),
                <[u8; 4]>::try_from(dst).unwrap().into(),
                n,
                len as u16,
            )
        } else {
            pseudo_v6(
                &<[u8; 16]>::try_from(src).unwrap().into(),
                &<[u8; 16]>::try_from(dst).unwrap().into(),
                n,
                len as u32,
            )
        }
    };
    let at = match proto {
        6 => 16,
        17 => 6,
        1 | 58 => 2,
        132 => {
            l4[8..12].fill(0);
            let c = rewrite::sctp_crc(l4);
            l4[8..12].copy_from_slice(&c.to_le_bytes());
            return;
        }
        _ => return,
    };
    l4[at..at + 2].fill(0);
    let sum = if proto == 1 {
        add(0, l4)
    } else {
        add(pseudo(proto), l4)
    };
    let c = !fold(sum);
    l4[at..at + 2].copy_from_slice(&c.to_be_bytes());
}

/// An IPv4 packet (header checksum and L4 checksum valid).
fn ip4(proto: u8, tos: u8, ttl: u8, src: &str, dst: &str, mut l4: Vec<u8>) -> Vec<u8> {
    let (s, d) = (v4(src), v4(dst));
    seal_l4(proto, &s, &d, &mut l4);
    let mut h = vec![0u8; 20];
    h[0] = 0x45;
    h[1] = tos;
    h[2..4].copy_from_slice(&((20 + l4.len()) as u16).to_be_bytes());
    h[8] = ttl;
    h[9] = proto;
    h[12..16].copy_from_slice(&s);
    h[16..20].copy_from_slice(&d);
    let c = wire::checksum::checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    h.extend(l4);
    h
}

/// An IPv6 packet (L4 checksum valid).
fn ip6(nxt: u8, tc: u8, flabel: u32, hop: u8, src: &str, dst: &str, mut l4: Vec<u8>) -> Vec<u8> {
    let (s, d) = (v6(src), v6(dst));
    seal_l4(nxt, &s, &d, &mut l4);
    let mut h = vec![0u8; 40];
    let w = (6u32 << 28) | ((tc as u32) << 20) | flabel;
    h[0..4].copy_from_slice(&w.to_be_bytes());
    h[4..6].copy_from_slice(&(l4.len() as u16).to_be_bytes());
    h[6] = nxt;
    h[7] = hop;
    h[8..24].copy_from_slice(&s);
    h[24..40].copy_from_slice(&d);
    h.extend(l4);
    h
}

fn tcp(sport: u16, dport: u16) -> Vec<u8> {
    let mut t = vec![0u8; 24];
    t[0..2].copy_from_slice(&sport.to_be_bytes());
    t[2..4].copy_from_slice(&dport.to_be_bytes());
    t[12] = 6 << 4;
    t.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
    t
}

fn udp(sport: u16, dport: u16) -> Vec<u8> {
    let mut u = vec![0u8; 8];
    u[0..2].copy_from_slice(&sport.to_be_bytes());
    u[2..4].copy_from_slice(&dport.to_be_bytes());
    u[4..6].copy_from_slice(&16u16.to_be_bytes());
    u.extend_from_slice(&[9; 8]);
    u
}

fn sctp(sport: u16, dport: u16) -> Vec<u8> {
    let mut s = vec![0u8; 12];
    s[0..2].copy_from_slice(&sport.to_be_bytes());
    s[2..4].copy_from_slice(&dport.to_be_bytes());
    // A DATA chunk of 8 bytes of payload.
    s.extend_from_slice(&[0, 3, 0, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0]);
    s.extend_from_slice(&[1, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef]);
    s
}

fn icmp(t: u8, code: u8) -> Vec<u8> {
    vec![t, code, 0, 0, 0, 1, 0, 2, 0xa, 0xb, 0xc, 0xd]
}

/// An ICMPv6 neighbour solicitation (135, with a source link-layer
/// address option) or advertisement (136, target link-layer address).
fn nd(t: u8, target: &str, ll: [u8; 6]) -> Vec<u8> {
    let mut m = vec![t, 0, 0, 0, 0, 0, 0, 0];
    m.extend_from_slice(&v6(target));
    m.extend_from_slice(&[if t == 135 { 1 } else { 2 }, 1]);
    m.extend_from_slice(&ll);
    m
}

fn arp(op: u16, sha: [u8; 6], spa: &str, tha: [u8; 6], tpa: &str) -> Vec<u8> {
    let mut a = vec![0, 1, 8, 0, 6, 4];
    a.extend_from_slice(&op.to_be_bytes());
    a.extend_from_slice(&sha);
    a.extend_from_slice(&v4(spa));
    a.extend_from_slice(&tha);
    a.extend_from_slice(&v4(tpa));
    a.resize(46, 0);
    a
}

/// Untagged TCP frame `f` with its IP protocol (IPv4: and header
/// checksum) changed to `proto`; the TCP header stays where it is, its
/// checksum under the new pseudo-header.
fn reproto(mut f: Vec<u8>, proto: u8) -> Vec<u8> {
    use wire::checksum::{add, fold, pseudo_v4, pseudo_v6};
    let l4 = if f[12..14] == [0x08, 0x00] {
        f[23] = proto;
        f[24..26].fill(0);
        let c = wire::checksum::checksum(&f[14..34]);
        f[24..26].copy_from_slice(&c.to_be_bytes());
        34
    } else {
        f[20] = proto;
        54
    };
    let len = f.len() - l4;
    let pseudo = if l4 == 34 {
        let a = |i: usize| <[u8; 4]>::try_from(&f[i..i + 4]).unwrap().into();
        pseudo_v4(a(26), a(30), proto, len as u16)
    } else {
        let a = |i: usize| <[u8; 16]>::try_from(&f[i..i + 16]).unwrap().into();
        pseudo_v6(&a(22), &a(38), proto, len as u32)
    };
    f[l4 + 16..l4 + 18].fill(0);
    let c = !fold(add(pseudo, &f[l4..]));
    f[l4 + 16..l4 + 18].copy_from_slice(&c.to_be_bytes());
    f
}

/// Whether `f`'s IP header checksum (IPv4) and L4 checksum are valid.
fn checksums_ok(f: &[u8]) -> bool {
    let Some(i) = rewrite::ip(f) else {
        return true;
    };
    let l3 = i.l3;
    if !i.v6 && wire::checksum::checksum(&f[l3..l3 + 20]) != 0 {
        return false;
    }
    let Some(l4) = i.l4 else { return true };
    let seg = &f[l4..i.end];
    let (src, dst) = if i.v6 {
        (&f[l3 + 8..l3 + 24], &f[l3 + 24..l3 + 40])
    } else {
        (&f[l3 + 12..l3 + 16], &f[l3 + 16..l3 + 20])
    };
    let mut again = seg.to_vec();
    seal_l4(i.proto, src, dst, &mut again);
    again == seg
}

// ------------------------------------------------------------ helpers

fn flows(list: &[&str]) -> Flows {
    Flows::from_config(&json!({ "flows": list })).unwrap()
}

/// Every delivery of `frame` from port 0 (port or flood, and the bytes),
/// the copies first, in the order sent; and the frame's drop reason if it
/// went nowhere.
fn sent(f: &Flows, frame: &[u8]) -> (Vec<(String, Vec<u8>)>, Option<DropReason>) {
    let mut b = Batch::new(vec![frame.to_vec()]);
    let v = b.classify(f, 0, 0);
    let mut all: Vec<(Verdict, Vec<u8>)> = b.copies.clone();
    all.push((v[0], b.views[0].clone()));
    let mut out = Vec::new();
    let mut drop = None;
    for (v, bytes) in all {
        match v {
            Verdict::Port(p) => out.push((format!("{p}"), bytes)),
            Verdict::Flood => out.push(("flood".into(), bytes)),
            Verdict::Group(g) => {
                for p in f.group_members(g) {
                    if *p != 0 {
                        out.push((format!("{p}"), bytes.clone()));
                    }
                }
            }
            Verdict::Drop(r) => drop = Some(r),
        }
    }
    (out, drop)
}

/// The one frame `frame` sends to port 1 (OpenFlow port 2).
fn to1(f: &Flows, frame: &[u8]) -> Vec<u8> {
    let (s, d) = sent(f, frame);
    assert_eq!(s.len(), 1, "{s:02x?} {d:?}");
    assert_eq!(s[0].0, "1");
    s[0].1.clone()
}

// ------------------------------------------------------------ matches

#[test]
fn new_match_fields_select_their_frames() {
    let t4 = eth(
        &[],
        0x0800,
        &ip4(
            6,
            32,
            64,
            "192.168.10.10",
            "192.168.20.20",
            tcp(11111, 2222),
        ),
    );
    let t4ecn = eth(
        &[],
        0x0800,
        &ip4(
            6,
            33,
            64,
            "192.168.10.10",
            "192.168.20.20",
            tcp(11111, 2222),
        ),
    );
    let t6 = eth(
        &[],
        0x86dd,
        &ip6(6, 32, 100, 64, "10::10", "20::20", tcp(11111, 2222)),
    );
    let t6b = eth(
        &[],
        0x86dd,
        &ip6(6, 32, 203, 64, "10::10", "20::20", tcp(11111, 2222)),
    );
    let a = eth(
        &[],
        0x0806,
        &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20"),
    );
    let a2 = eth(
        &[],
        0x0806,
        &arp(1, [2; 6], "192.168.10.10", DST, "192.168.20.20"),
    );
    let ns = eth(
        &[],
        0x86dd,
        &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "20::20", DST)),
    );
    let ns2 = eth(
        &[],
        0x86dd,
        &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "b0::b0", DST)),
    );
    let na = eth(
        &[],
        0x86dd,
        &ip6(58, 0, 0, 255, "10::10", "20::20", nd(136, "20::20", SRC)),
    );
    let m100 = eth(
        &[],
        0x8847,
        &mpls(
            &[(100, 3, 64)],
            &ip4(6, 0, 64, "1.1.1.1", "2.2.2.2", tcp(1, 2)),
        ),
    );
    let m203 = eth(
        &[],
        0x8847,
        &mpls(
            &[(203, 5, 64)],
            &ip4(6, 0, 64, "1.1.1.1", "2.2.2.2", tcp(1, 2)),
        ),
    );
    let m2 = eth(&[], 0x8847, &mpls(&[(100, 3, 64), (7, 0, 1)], &[0; 20]));
    for (flow, yes, no) in [
        ("ip,ip_ecn=1", &t4ecn, &t4),
        (
            "ipv6,ip_ecn=0",
            &t6,
            &eth(
                &[],
                0x86dd,
                &ip6(6, 33, 100, 64, "10::10", "20::20", tcp(1, 2)),
            ),
        ),
        ("ip,nw_tos=32,ip_ecn=0", &t4, &t4ecn),
        ("arp,arp_sha=12:11:11:11:11:11", &a, &a2),
        ("arp,arp_sha=12:00:00:00:00:00/ff:00:00:00:00:00", &a, &a2),
        ("arp,arp_tha=22:22:22:22:22:22", &a, &t4),
        ("ipv6,ipv6_label=100", &t6, &t6b),
        ("ipv6,ipv6_label=0x64/0xff", &t6, &t6b),
        ("icmp6,icmp_type=135,nd_target=20::20", &ns, &ns2),
        ("icmp6,icmp_type=135,nd_sll=22:22:22:22:22:22", &ns, &na),
        ("icmp6,icmp_type=136,nd_tll=12:11:11:11:11:11", &na, &ns),
        ("mpls,mpls_label=100", &m100, &m203),
        ("mpls,mpls_tc=3", &m100, &m203),
        ("mpls,mpls_bos=0", &m2, &m100),
    ] {
        for cache in [0, 64] {
            let f = Flows::from_config(&json!({ "cache": cache })).unwrap();
            f.command("add", &json!({"flow": format!("{flow},actions=output:1")}))
                .unwrap();
            for _ in 0..2 {
                assert_eq!(to1(&f, yes), *yes, "{flow} cache {cache}");
                assert_eq!(
                    sent(&f, no),
                    (vec![], Some(DropReason::NoMatch)),
                    "{flow} cache {cache}"
                );
            }
            // Dumped as written (canonical) and accepted back.
            let text = f.dump(None)["flows"][0]["flow"]
                .as_str()
                .unwrap()
                .to_string();
            let g = flows(&[&text]);
            assert_eq!(g.dump(None)["flows"][0]["flow"], text.as_str(), "{flow}");
        }
    }
}

#[test]
fn metadata_and_tunnel_id_carry_from_table_to_table() {
    let t4 = eth(
        &[],
        0x0800,
        &ip4(
            6,
            32,
            64,
            "192.168.10.10",
            "192.168.20.20",
            tcp(11111, 2222),
        ),
    );
    for (first, then) in [
        ("write_metadata:255/0xffffffff", "metadata=255"),
        ("write_metadata:0xf0/0xff", "metadata=0xf0/0xff"),
        ("set_field:12345->tun_id", "tun_id=12345"),
        ("set_tunnel:12345", "tun_id=0x3039/0xffff"),
    ] {
        for cache in [0, 64] {
            let f = Flows::from_config(&json!({"cache": cache, "flows": [
                format!("in_port=0,actions={first},goto_table:1"),
                format!("table=1,priority=9,{then},actions=output:1"),
                "table=1,priority=1,actions=output:2".to_string(),
            ]}))
            .unwrap();
            for _ in 0..3 {
                assert_eq!(to1(&f, &t4), t4, "{first} {then} cache {cache}");
            }
        }
    }
    // A different value does not match; write_metadata keeps the bits
    // outside its mask.
    let f = flows(&[
        "in_port=0,actions=write_metadata:0x100/0xf00,goto_table:1",
        "table=1,actions=write_metadata:0x1/0xf,goto_table:2",
        "table=2,priority=9,metadata=0x101,actions=output:1",
        "table=2,priority=1,actions=output:2",
    ]);
    assert_eq!(to1(&f, &t4), t4);
    let g = flows(&[
        "in_port=0,actions=write_metadata:155/0xffffffff,goto_table:1",
        "table=1,priority=9,metadata=255,actions=output:1",
    ]);
    assert_eq!(sent(&g, &t4), (vec![], Some(DropReason::NoMatch)));
    // The instruction comes after the actions: not before them.
    assert!(g
        .command("add", &json!({"flow": "actions=write_metadata:1,output:1"}))
        .unwrap_err()
        .0
        .contains("after write_metadata"));
}

// ------------------------------------------------------------ set-fields

#[test]
fn set_fields_rewrite_their_field_and_keep_checksums() {
    let tc = |tos: u8, l4: Vec<u8>, p: u8| {
        eth(
            &[],
            0x0800,
            &ip4(p, tos, 64, "192.168.10.10", "192.168.20.20", l4),
        )
    };
    let t6 = |tc: u8, fl: u32, nxt: u8, l4: Vec<u8>| {
        eth(&[], 0x86dd, &ip6(nxt, tc, fl, 64, "10::10", "20::20", l4))
    };
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        ("eth_type=0x0800,actions=set_field:0x8848->eth_type", tc(32, tcp(1, 2), 6), {
            let mut f = tc(32, tcp(1, 2), 6);
            f[12..14].copy_from_slice(&[0x88, 0x48]);
            f
        }),
        ("ip,ip_dscp=8,actions=set_field:16->ip_dscp", tc(32, tcp(1, 2), 6), tc(64, tcp(1, 2), 6)),
        ("ipv6,ip_dscp=8,actions=set_field:16->ip_dscp", t6(32, 100, 6, tcp(1, 2)), t6(64, 100, 6, tcp(1, 2))),
        ("ip,ip_ecn=0,actions=set_field:1->ip_ecn", tc(32, tcp(1, 2), 6), tc(33, tcp(1, 2), 6)),
        ("ipv6,ip_ecn=0,actions=set_field:1->ip_ecn", t6(32, 100, 6, tcp(1, 2)), t6(33, 100, 6, tcp(1, 2))),
        // The protocol byte changes (and the IPv4 header checksum); the
        // L4 header stays as it was, as in OVS.
        ("ip,ip_proto=6,actions=set_field:17->ip_proto", tc(32, tcp(1, 2), 6), reproto(tc(32, tcp(1, 2), 6), 17)),
        ("ipv6,ip_proto=6,actions=set_field:17->ip_proto", t6(32, 100, 6, tcp(1, 2)), reproto(t6(32, 100, 6, tcp(1, 2)), 17)),
        ("tcp,tcp_src=11111,actions=set_field:12345->tcp_src", tc(0, tcp(11111, 2), 6), tc(0, tcp(12345, 2), 6)),
        ("tcp6,tcp_dst=2222,actions=set_field:6789->tcp_dst", t6(0, 0, 6, tcp(1, 2222)), t6(0, 0, 6, tcp(1, 6789))),
        ("tcp6,tcp_src=11111,actions=set_field:12345->tcp_src", t6(0, 0, 6, tcp(11111, 2)), t6(0, 0, 6, tcp(12345, 2))),
        ("udp6,udp_src=11111,actions=set_field:12345->udp_src", t6(0, 0, 17, udp(11111, 2)), t6(0, 0, 17, udp(12345, 2))),
        ("udp6,udp_dst=2222,actions=mod_tp_dst:6789", t6(0, 0, 17, udp(1, 2222)), t6(0, 0, 17, udp(1, 6789))),
        ("sctp,sctp_src=11111,actions=set_field:12345->sctp_src", tc(0, sctp(11111, 2), 132), tc(0, sctp(12345, 2), 132)),
        ("sctp6,sctp_dst=2222,actions=set_field:6789->sctp_dst", t6(0, 0, 132, sctp(1, 2222)), t6(0, 0, 132, sctp(1, 6789))),
        ("icmp,icmp_type=8,actions=set_field:0->icmpv4_type", tc(0, icmp(8, 0), 1), tc(0, icmp(0, 0), 1)),
        ("icmp,icmp_code=0,actions=set_field:10->icmpv4_code", tc(0, icmp(8, 0), 1), tc(0, icmp(8, 10), 1)),
        ("icmp6,icmp_type=128,actions=set_field:135->icmpv6_type", t6(0, 0, 58, icmp(128, 0)), t6(0, 0, 58, icmp(135, 0))),
        ("icmp6,icmp_code=0,actions=set_field:1->icmpv6_code", t6(0, 0, 58, icmp(128, 0)), t6(0, 0, 58, icmp(128, 1))),
        ("ipv6,ipv6_src=10::10,actions=set_field:a0::a0->ipv6_src", t6(0, 0, 6, tcp(1, 2)),
            eth(&[], 0x86dd, &ip6(6, 0, 0, 64, "a0::a0", "20::20", tcp(1, 2)))),
        ("ipv6,ipv6_dst=20::20,actions=set_field:b0::b0->ipv6_dst", t6(0, 0, 17, udp(1, 2)),
            eth(&[], 0x86dd, &ip6(17, 0, 0, 64, "10::10", "b0::b0", udp(1, 2)))),
        ("ipv6,ipv6_label=100,actions=set_field:203->ipv6_label", t6(0, 100, 6, tcp(1, 2)), t6(0, 203, 6, tcp(1, 2))),
        ("icmp6,icmp_type=135,nd_target=20::20,actions=set_field:a0::a0->nd_target",
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "20::20", DST))),
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "a0::a0", DST)))),
        ("icmp6,icmp_type=135,nd_sll=22:22:22:22:22:22,actions=set_field:aa:aa:aa:aa:aa:aa->nd_sll",
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "20::20", DST))),
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(135, "20::20", [0xaa; 6])))),
        ("icmp6,icmp_type=136,nd_tll=22:22:22:22:22:22,actions=set_field:aa:aa:aa:aa:aa:aa->nd_tll",
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(136, "20::20", DST))),
            eth(&[], 0x86dd, &ip6(58, 0, 0, 255, "10::10", "20::20", nd(136, "20::20", [0xaa; 6])))),
        ("arp,arp_op=1,actions=set_field:2->arp_op",
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20")),
            eth(&[], 0x0806, &arp(2, SRC, "192.168.10.10", DST, "192.168.20.20"))),
        ("arp,arp_spa=192.168.10.10,actions=set_field:10.10.10.10->arp_spa",
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20")),
            eth(&[], 0x0806, &arp(1, SRC, "10.10.10.10", DST, "192.168.20.20"))),
        ("arp,arp_tpa=192.168.20.20,actions=set_field:10.10.20.20->arp_tpa",
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20")),
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "10.10.20.20"))),
        ("arp,arp_sha=12:11:11:11:11:11,actions=set_field:aa:aa:aa:aa:aa:aa->arp_sha",
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20")),
            eth(&[], 0x0806, &arp(1, [0xaa; 6], "192.168.10.10", DST, "192.168.20.20"))),
        ("arp,arp_tha=22:22:22:22:22:22,actions=set_field:ba:bb:bb:bb:bb:bb->arp_tha",
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", DST, "192.168.20.20")),
            eth(&[], 0x0806, &arp(1, SRC, "192.168.10.10", [0xba, 0xbb, 0xbb, 0xbb, 0xbb, 0xbb], "192.168.20.20"))),
        ("mpls,mpls_label=100,actions=set_field:203->mpls_label",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &[0; 28])),
            eth(&[], 0x8847, &mpls(&[(203, 3, 64)], &[0; 28]))),
        ("mpls,mpls_tc=3,actions=set_field:5->mpls_tc",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &[0; 28])),
            eth(&[], 0x8847, &mpls(&[(100, 5, 64)], &[0; 28]))),
        ("mpls,mpls_bos=1,actions=set_field:0->mpls_bos",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &[0; 28])),
            {
                let mut f = eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &[0; 28]));
                f[16] &= !1;
                f
            }),
        ("actions=set_field:12345->tun_id", tc(0, tcp(1, 2), 6), tc(0, tcp(1, 2), 6)),
        ("ip,actions=set_nw_ttl:32", tc(0, tcp(1, 2), 6), eth(&[], 0x0800, &ip4(6, 0, 32, "192.168.10.10", "192.168.20.20", tcp(1, 2)))),
        ("ipv6,actions=set_nw_ttl:32", t6(0, 0, 6, tcp(1, 2)), eth(&[], 0x86dd, &ip6(6, 0, 0, 32, "10::10", "20::20", tcp(1, 2)))),
        ("ipv6,actions=dec_ttl", t6(0, 0, 6, tcp(1, 2)), eth(&[], 0x86dd, &ip6(6, 0, 0, 63, "10::10", "20::20", tcp(1, 2)))),
    ];
    for (flow, input, want) in cases {
        assert!(checksums_ok(&input), "{flow}: the input is valid");
        for cache in [0, 64] {
            let f =
                Flows::from_config(&json!({"cache": cache, "flows": [format!("{flow},output:1")]}))
                    .unwrap_or_else(|e| panic!("{flow}: {e}"));
            for _ in 0..2 {
                let got = to1(&f, &input);
                assert_eq!(got, want, "{flow} cache {cache}");
                assert!(
                    flow.ends_with("->ip_proto") || checksums_ok(&got),
                    "{flow}: checksums after"
                );
            }
        }
    }
}

/// The same set-fields through flow-mods: taken with their prerequisites
/// (from the match, or from an action before: a push), refused without.
#[test]
fn set_fields_over_openflow_need_their_prerequisites() {
    let f = crate::testutil::flows();
    let sf = |field, v: u128| openflow::Action::SetField(Oxm::exact(field, v));
    let out2 = openflow::Action::Output {
        port: 2,
        max_len: 0,
    };
    let et = |v: u128| Oxm::exact(oxm::ETH_TYPE, v);
    let proto = |v: u128| Oxm::exact(oxm::IP_PROTO, v);
    let inconsistent = OfpError::new(openflow::et::BAD_ACTION, bac::MATCH_INCONSISTENT);
    for (m, a, ok) in [
        (vec![et(0x86dd), proto(6)], sf(oxm::TCP_SRC, 1), true),
        (vec![et(0x86dd), proto(17)], sf(oxm::TCP_SRC, 1), true),
        (vec![et(0x86dd)], sf(oxm::TCP_SRC, 1), false),
        (vec![et(0x0806)], sf(oxm::ARP_SHA, 1), true),
        (vec![et(0x0800)], sf(oxm::ARP_SHA, 1), false),
        (vec![et(0x86dd)], sf(oxm::IPV6_FLABEL, 1), true),
        (
            vec![et(0x86dd), proto(58), Oxm::exact(oxm::ICMPV6_TYPE, 135)],
            sf(oxm::IPV6_ND_SLL, 1),
            true,
        ),
        (
            vec![et(0x86dd), proto(58), Oxm::exact(oxm::ICMPV6_TYPE, 136)],
            sf(oxm::IPV6_ND_SLL, 1),
            false,
        ),
        (vec![et(0x8847)], sf(oxm::MPLS_LABEL, 1), true),
        (vec![et(0x0800)], sf(oxm::MPLS_LABEL, 1), false),
        (vec![], sf(oxm::TUNNEL_ID, 1), true),
        (vec![et(0x0800)], sf(oxm::IP_ECN, 3), true),
        (vec![et(0x0806)], sf(oxm::IP_DSCP, 3), false),
        (vec![et(0x0800)], openflow::Action::SetNwTtl(3), true),
        (vec![], openflow::Action::SetNwTtl(3), false),
        (vec![et(0x0800)], openflow::Action::DecMplsTtl, false),
        (vec![et(0x8847)], openflow::Action::CopyTtlIn, true),
    ] {
        let r = f.flow_mod(&crate::testutil::fm(
            fc::ADD,
            0,
            7,
            m.clone(),
            vec![Instruction::ApplyActions(vec![a, out2])],
        ));
        if ok {
            assert_eq!(r, Ok(1), "{m:?} {a:?}");
        } else {
            assert_eq!(r, Err(inconsistent), "{m:?} {a:?}");
        }
    }
    // A push makes the frame MPLS (or tagged) for the actions after it.
    let r = f.flow_mod(&crate::testutil::fm(
        fc::ADD,
        0,
        8,
        vec![et(0x0800)],
        vec![Instruction::ApplyActions(vec![
            openflow::Action::PushMpls(0x8847),
            sf(oxm::MPLS_LABEL, 5),
            openflow::Action::SetMplsTtl(9),
            out2,
        ])],
    ));
    assert_eq!(r, Ok(1));
    // Fields set-field cannot write: BAD_SET_TYPE.
    for field in [oxm::METADATA, oxm::IN_PORT, oxm::PBB_ISID] {
        let r = f.flow_mod(&crate::testutil::fm(
            fc::ADD,
            0,
            9,
            vec![],
            vec![Instruction::ApplyActions(vec![sf(field, 1)])],
        ));
        assert_eq!(
            r,
            Err(OfpError::new(openflow::et::BAD_ACTION, bac::BAD_SET_TYPE)),
            "{field}"
        );
    }
}

// ------------------------------------------------------------ MPLS, TTL

#[test]
fn mpls_push_pop_and_ttls_follow_openflow() {
    let ip = ip4(
        6,
        32,
        64,
        "192.168.10.10",
        "192.168.20.20",
        tcp(11111, 2222),
    );
    let ip32 = ip4(
        6,
        32,
        32,
        "192.168.10.10",
        "192.168.20.20",
        tcp(11111, 2222),
    );
    let v6p = ip6(6, 32, 100, 64, "10::10", "20::20", tcp(11111, 2222));
    let ar = arp(1, SRC, "192.168.10.10", DST, "192.168.20.20");
    let cases: Vec<(&str, Vec<u8>, Vec<u8>)> = vec![
        // Onto IP: label 0, TC 0, bottom of stack, the IP TTL.
        (
            "ip,actions=push_mpls:0x8847",
            eth(&[], 0x0800, &ip),
            eth(&[], 0x8847, &mpls(&[(0, 0, 64)], &ip)),
        ),
        (
            "ipv6,actions=push_mpls:0x8847",
            eth(&[], 0x86dd, &v6p),
            eth(&[], 0x8847, &mpls(&[(0, 0, 64)], &v6p)),
        ),
        // Onto ARP: TTL 0.
        (
            "arp,actions=push_mpls:0x8847",
            eth(&[], 0x0806, &ar),
            eth(&[], 0x8847, &mpls(&[(0, 0, 0)], &ar)),
        ),
        // Onto MPLS: a copy of the outer entry, not bottom of stack.
        (
            "mpls,actions=push_mpls:0x8847",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)),
            eth(&[], 0x8847, &mpls(&[(100, 3, 64), (100, 3, 64)], &ip)),
        ),
        // Behind a VLAN tag.
        (
            "dl_vlan=5,actions=push_mpls:0x8848",
            eth(&[(0x8100, 5)], 0x0800, &ip),
            eth(&[(0x8100, 5)], 0x8848, &mpls(&[(0, 0, 64)], &ip)),
        ),
        (
            "mpls,actions=pop_mpls:0x0800",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)),
            eth(&[], 0x0800, &ip),
        ),
        (
            "mpls,actions=pop_mpls:0x86dd",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &v6p)),
            eth(&[], 0x86dd, &v6p),
        ),
        (
            "mpls,actions=set_mpls_ttl:127",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)),
            eth(&[], 0x8847, &mpls(&[(100, 3, 127)], &ip)),
        ),
        (
            "mpls,actions=dec_mpls_ttl",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)),
            eth(&[], 0x8847, &mpls(&[(100, 3, 63)], &ip)),
        ),
        (
            "mpls,actions=copy_ttl_out",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip32)),
            eth(&[], 0x8847, &mpls(&[(100, 3, 32)], &ip32)),
        ),
        (
            "mpls,actions=copy_ttl_in",
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip32)),
            eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)),
        ),
    ];
    for (flow, input, want) in cases {
        for cache in [0, 64] {
            let f =
                Flows::from_config(&json!({"cache": cache, "flows": [format!("{flow},output:1")]}))
                    .unwrap_or_else(|e| panic!("{flow}: {e}"));
            for _ in 0..2 {
                let got = to1(&f, &input);
                assert_eq!(got, want, "{flow} cache {cache}");
                assert!(checksums_ok(&got), "{flow}");
            }
        }
    }
    // An invalid MPLS TTL drops, as an invalid IP TTL does.
    let f = flows(&["mpls,actions=dec_mpls_ttl,output:1"]);
    let ttl1 = eth(&[], 0x8847, &mpls(&[(100, 3, 1)], &ip));
    assert_eq!(sent(&f, &ttl1), (vec![], Some(DropReason::Policy)));
    // The suite's MPLS-wrapped cases: pop, then the inner headers are
    // matched and rewritten in the next table.
    for cache in [0, 64] {
        let f = Flows::from_config(&json!({"cache": cache, "flows": [
            "mpls,actions=pop_mpls:0x0800,goto_table:1",
            "table=1,tcp,tcp_src=11111,actions=set_field:12345->tcp_src,output:1",
            "table=1,priority=1,actions=output:2",
        ]}))
        .unwrap();
        for _ in 0..3 {
            let got = to1(&f, &eth(&[], 0x8847, &mpls(&[(100, 3, 64)], &ip)));
            assert_eq!(
                got,
                eth(
                    &[],
                    0x0800,
                    &ip4(
                        6,
                        32,
                        64,
                        "192.168.10.10",
                        "192.168.20.20",
                        tcp(12345, 2222)
                    )
                )
            );
        }
    }
}

// ------------------------------------------------------------ outputs

/// Faucet's flood rule: a tagged copy to the trunk, then untagged copies
/// to the access ports (refused as OFPBAC_UNSUPPORTED_ORDER before); and
/// its first frame of a new host, to the controller and to the flood.
#[test]
fn outputs_and_header_changes_in_any_order_carry_the_frame_as_it_is() {
    let inner = eth(
        &[],
        0x0800,
        &ip4(17, 0, 64, "10.0.0.1", "10.0.0.2", udp(1, 2)),
    );
    let tagged = eth(
        &[(0x8100, 100)],
        0x0800,
        &ip4(17, 0, 64, "10.0.0.1", "10.0.0.2", udp(1, 2)),
    );
    for cache in [0, 64] {
        // (OpenFlow ports 4, 1, 2 are ids 3, 0, 1; the frame from id 5.)
        let f = Flows::from_config(&json!({"cache": cache, "flows": [
            "table=4,dl_vlan=100,actions=output:3,pop_vlan,output:0,output:1",
            "actions=goto_table:4",
        ]}))
        .unwrap();
        for _ in 0..2 {
            let mut b = Batch::new(vec![tagged.clone()]);
            let v = b.classify(&f, 5, 0);
            assert_eq!(b.copies, vec![(Verdict::Port(3), tagged.clone())]);
            let Verdict::Group(g) = v[0] else {
                panic!("{v:?}")
            };
            assert_eq!(f.group_members(g), &[0, 1]);
            assert_eq!(b.views[0], inner);
        }
    }
    // Over OpenFlow, as Faucet sends it.
    let f = crate::testutil::flows();
    let out = |p| openflow::Action::Output {
        port: p,
        max_len: 0,
    };
    let r = f.flow_mod(&crate::testutil::fm(
        fc::ADD,
        4,
        8192,
        vec![Oxm::exact(oxm::VLAN_VID, 0x1000 | 100)],
        vec![Instruction::ApplyActions(vec![
            out(4),
            openflow::Action::PopVlan,
            out(1),
            out(2),
        ])],
    ));
    assert_eq!(r, Ok(1));
    // apply_actions(output:CONTROLLER), goto_table: both.
    let g = Flows::from_config(&json!({"flows": [
        "actions=controller:128,goto_table:1",
        "table=1,actions=flood",
    ]}))
    .unwrap();
    Logic::punt(&g).unwrap().set_controllers(1);
    assert_eq!(
        sent(&g, &inner),
        (vec![("flood".into(), inner.clone())], None)
    );
    assert_eq!(Logic::punt(&g).unwrap().stats().queued, 1);
    // Mirroring by two tables: each output once.
    let h = flows(&[
        "actions=output:7,goto_table:1",
        "table=1,actions=mod_dl_dst:02:00:00:00:00:09,output:1",
    ]);
    let (s, _) = sent(&h, &inner);
    assert_eq!(s.len(), 2);
    assert_eq!(s[0], ("7".into(), inner.clone()));
    assert_eq!(&s[1].1[0..6], &[2, 0, 0, 0, 0, 9]);
    assert_eq!(h.dump(None)["copies"], 1);
}

// ------------------------------------------------------------ groups

fn bucket(weight: u16, watch: u32, acts: Vec<openflow::Action>) -> Bucket {
    Bucket {
        weight,
        watch_port: watch,
        watch_group: GROUP_ANY,
        actions: acts,
    }
}

/// Faucet's `group_table: true` flood groups: buckets that pop the tag
/// before their outputs (refused as OFPGMFC_BAD_BUCKET before).
#[test]
fn group_buckets_with_header_changes_send_their_own_copies() {
    let tagged = eth(
        &[(0x8100, 100)],
        0x0800,
        &ip4(17, 0, 64, "10.0.0.1", "10.0.0.2", udp(1, 2)),
    );
    let inner = eth(
        &[],
        0x0800,
        &ip4(17, 0, 64, "10.0.0.1", "10.0.0.2", udp(1, 2)),
    );
    let out = |p| openflow::Action::Output {
        port: p,
        max_len: 0,
    };
    for cache in [0, 64] {
        let f = Flows::from_config(&json!({ "cache": cache })).unwrap();
        f.group_mod(&GroupMod {
            command: gc::ADD,
            kind: gt::ALL,
            group_id: 1,
            buckets: vec![
                bucket(0, openflow::port::ANY, vec![out(4)]),
                bucket(
                    0,
                    openflow::port::ANY,
                    vec![openflow::Action::PopVlan, out(1), out(2)],
                ),
                bucket(
                    0,
                    openflow::port::ANY,
                    vec![
                        openflow::Action::SetField(Oxm::exact(oxm::VLAN_VID, 0x1000 | 7)),
                        out(3),
                    ],
                ),
            ],
        })
        .unwrap();
        f.command("add", &json!({"flow": "dl_vlan=100,actions=group:1"}))
            .unwrap();
        for _ in 0..2 {
            let (mut s, d) = sent(&f, &tagged);
            s.sort();
            let mut vid7 = tagged.clone();
            vid7[15] = 7;
            assert_eq!(
                s,
                vec![
                    ("1".into(), inner.clone()),
                    ("2".into(), vid7),
                    ("3".into(), tagged.clone()),
                ],
                "{d:?}"
            );
        }
        let st = f.group_stats(1).unwrap();
        assert_eq!(st[0].packet_count, 2);
    }
}

#[test]
fn select_groups_spread_by_flow_by_weight_among_live_buckets() {
    let out = |p| openflow::Action::Output {
        port: p,
        max_len: 0,
    };
    let f = crate::testutil::flows();
    f.group_mod(&GroupMod {
        command: gc::ADD,
        kind: gt::SELECT,
        group_id: 2,
        buckets: vec![
            bucket(1, openflow::port::ANY, vec![out(2)]),
            bucket(2, 3, vec![openflow::Action::PopVlan, out(3)]),
        ],
    })
    .unwrap();
    f.command("add", &json!({"flow": "in_port=0,actions=group:2"}))
        .unwrap();
    let frame = |i: u32| {
        let mut src = SRC;
        src[2..6].copy_from_slice(&i.to_be_bytes());
        let mut e = eth(
            &[],
            0x0800,
            &ip4(6, 0, 64, "10.0.0.1", "10.0.0.2", tcp(1, 2)),
        );
        e[6..12].copy_from_slice(&src);
        e
    };
    let count = |f: &Flows| {
        let mut n = [0u32; 3];
        for i in 0..3000 {
            let (s, _) = sent(f, &frame(i));
            assert_eq!(s.len(), 1);
            // The same flow always to the same bucket.
            assert_eq!(sent(f, &frame(i)).0, s);
            n[s[0].0.parse::<usize>().unwrap()] += 1;
        }
        n
    };
    let n = count(&f);
    // Weights 1 and 2: a third and two thirds (within 5 points).
    assert!(
        n[1].abs_diff(1000) < 150 && n[2].abs_diff(2000) < 150,
        "{n:?}"
    );
    // Bucket 2 watches OpenFlow port 3 (id 2): down, it is not chosen.
    f.set_port_live(2, false);
    assert_eq!(count(&f), [0, 3000, 0]);
    f.set_port_live(2, true);
    // The group's description is what was installed; its buckets'
    // counters are not kept apart (all ones: unavailable).
    assert_eq!(f.group_desc()[0].2[1].weight, 2);
    assert_eq!(
        f.group_stats(2).unwrap()[0].buckets[0],
        (u64::MAX, u64::MAX)
    );
    // Through the text syntax too.
    let g = crate::testutil::flows();
    g.command("add_group", &json!({"group": "group_id=3,type=select,bucket=weight:1,output:1,bucket=weight:1,watch_port:2,output:2"}))
        .unwrap();
    let d = g.command("dump_groups", &json!({})).unwrap();
    assert_eq!(
        d["groups"][0]["group"],
        "group_id=3,type=select,bucket=weight:1,output:1,bucket=weight:1,watch_port:2,output:2"
    );
}

/// os-ken's SELECT group and DSCP-remark meter throughput tests frame by
/// frame, through the exact-match cache and without it (`"cache": 0`): a
/// SELECT group sends each frame exactly once, by weight, a bucket's
/// header change with valid checksums; a DSCP-remark meter passes every
/// frame, the conforming ones as they are and the rest remarked, with a
/// valid header checksum.
#[test]
fn select_groups_and_remark_meters_lose_no_frame_cached_or_not() {
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    let mut rnd = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let big = |tos: u8, src: u32, dst: u32, sport: u16, dport: u16| {
        let (s, d) = (
            Ipv4Addr::from(src).to_string(),
            Ipv4Addr::from(dst).to_string(),
        );
        let mut e = eth(&[], 0x0800, &ip4(6, tos, 64, &s, &d, tcp(sport, dport)));
        e.resize(1500, 0x11);
        e
    };
    for config in [json!(null), json!({"cache": 0})] {
        // Weights 1:2, the second bucket raising AF21 (18) to AF22 (20).
        let f = Flows::from_config(&config).unwrap();
        f.command("add_group", &json!({"group": "group_id=1,type=select,bucket=weight:1,output:1,bucket=weight:2,mod_nw_tos:80,output:2"}))
            .unwrap();
        f.command("add", &json!({"flow": "in_port=0,actions=group:1"}))
            .unwrap();
        let mut n = [0u32; 3];
        for i in 0..3000 {
            let r = rnd();
            let mut frame = big(
                18 << 2,
                r as u32,
                (r >> 32) as u32,
                (r >> 8) as u16,
                (r >> 24) as u16,
            );
            if i % 2 == 0 {
                // os-ken's SELECT_Ether: random MAC addresses too.
                frame[0..6].copy_from_slice(&(r & !(1 << 40)).to_be_bytes()[2..]);
                frame[6..12].copy_from_slice(&((r >> 3) & !(1 << 40)).to_be_bytes()[2..]);
            }
            // Twice: the second through the cache, when there is one.
            for _ in 0..2 {
                let (s, d) = sent(&f, &frame);
                assert_eq!((s.len(), d), (1, None), "{config}: frame {i}");
                let (port, bytes) = &s[0];
                if port == "1" {
                    assert_eq!(bytes, &frame, "{config}: frame {i}");
                } else {
                    assert_eq!(port, "2", "{config}: frame {i}");
                    assert_eq!(bytes[15] >> 2, 20, "{config}: frame {i}");
                    assert!(checksums_ok(bytes), "{config}: frame {i}");
                    assert_eq!(bytes[16..24], frame[16..24]);
                    assert_eq!(bytes[26..], frame[26..]);
                }
                n[port.parse::<usize>().unwrap()] += 1;
            }
        }
        assert!(
            n[1].abs_diff(2000) < 200 && n[2].abs_diff(4000) < 200,
            "{config}: {n:?}"
        );

        // 10 Mb/s (no burst flag: a tenth of a second's worth), offered
        // 20 Mb/s for 3 s: 1750 frames of 1500 bytes a second, 17 or 18
        // every 10 ms.
        let f = Flows::from_config(&config).unwrap();
        f.command(
            "add_meter",
            &json!({"meter": "meter=1,kbps,bands=type=dscp_remark,rate=10000,prec_level=1"}),
        )
        .unwrap();
        f.command(
            "add",
            &json!({"flow": "in_port=0,actions=meter:1,output:1"}),
        )
        .unwrap();
        let frame = big(18 << 2, 0x0a00_0001, 0x0a00_0002, 1, 2);
        let (mut kept, mut remarked) = (0u32, 0u32);
        for step in 0..300u64 {
            let mut b = Batch::new(vec![frame.clone(); 17 + (step % 2) as usize]);
            let v = b.classify(&f, 0, 1_000_000_000 + step * 10_000_000);
            for (v, bytes) in v.iter().zip(&b.views) {
                assert_eq!(*v, Verdict::Port(1), "{config}: step {step}");
                if bytes == &frame {
                    kept += 1;
                } else {
                    assert_eq!(bytes[15] >> 2, 20, "{config}: step {step}");
                    assert!(checksums_ok(bytes), "{config}: step {step}");
                    remarked += 1;
                }
            }
        }
        assert_eq!(kept + remarked, 5250, "{config}");
        // 2.99 s at 10 Mb/s and the burst (0.1 s): 2575 frames of 12 kb.
        assert!(
            kept.abs_diff(2575) < 10,
            "{config}: {kept} kept, {remarked} remarked"
        );
    }
}

#[test]
fn fast_failover_groups_take_the_first_live_bucket() {
    let out = |p| openflow::Action::Output {
        port: p,
        max_len: 0,
    };
    let f = crate::testutil::flows();
    // Bucket 1 watches OpenFlow port 2 (id 1), bucket 2 port 3 (id 2) and
    // pops the tag (run on a copy), bucket 3 watches nothing (always live).
    f.group_mod(&GroupMod {
        command: gc::ADD,
        kind: gt::FF,
        group_id: 4,
        buckets: vec![
            bucket(0, 2, vec![out(2)]),
            bucket(0, 3, vec![openflow::Action::PopVlan, out(3)]),
            bucket(0, openflow::port::ANY, vec![out(4)]),
        ],
    })
    .unwrap();
    f.command("add", &json!({"flow": "in_port=0,actions=group:4"}))
        .unwrap();
    let inner = eth(
        &[],
        0x0800,
        &ip4(6, 0, 64, "10.0.0.1", "10.0.0.2", tcp(1, 2)),
    );
    let tagged = eth(
        &[(0x8100, 5)],
        0x0800,
        &ip4(6, 0, 64, "10.0.0.1", "10.0.0.2", tcp(1, 2)),
    );
    // Twice each: the second through the exact-match cache, which must
    // follow the links too.
    let twice = |want: &[(&str, &[u8])]| {
        for _ in 0..2 {
            let (s, _) = sent(&f, &tagged);
            let s: Vec<(&str, &[u8])> = s.iter().map(|(p, b)| (p.as_str(), &b[..])).collect();
            assert_eq!(s, want);
        }
    };
    twice(&[("1", &tagged)]);
    f.set_port_live(1, false);
    twice(&[("2", &inner)]);
    f.set_port_live(2, false);
    twice(&[("3", &tagged)]);
    f.set_port_live(1, true);
    twice(&[("1", &tagged)]);
    f.set_port_live(2, true);
    assert_eq!(f.group_desc()[0].0, gt::FF);
    assert_eq!(
        f.group_stats(4).unwrap()[0].buckets[2],
        (u64::MAX, u64::MAX)
    );
    // Through the text syntax too.
    let g = crate::testutil::flows();
    g.command("add_group", &json!({"group": "group_id=3,type=ff,bucket=watch_port:1,output:1,bucket=watch_port:2,output:2"}))
        .unwrap();
    g.command("add", &json!({"flow": "in_port=0,actions=group:3"}))
        .unwrap();
    assert_eq!(sent(&g, &inner).0, vec![("1".to_string(), inner.clone())]);
    g.set_port_live(1, false);
    assert_eq!(sent(&g, &inner).0, vec![("2".to_string(), inner.clone())]);
    g.set_port_live(2, false);
    assert_eq!(sent(&g, &inner), (vec![], Some(DropReason::Policy)));
    let d = g.command("dump_groups", &json!({})).unwrap();
    assert_eq!(
        d["groups"][0]["group"],
        "group_id=3,type=ff,bucket=watch_port:1,output:1,bucket=watch_port:2,output:2"
    );
}

// ------------------------------------------------------------ meters

#[test]
fn meters_drop_or_remark_over_their_rate() {
    let f = crate::testutil::flows();
    let band = |kind, rate, burst, prec| Band {
        kind,
        rate,
        burst,
        prec_level: prec,
        experimenter: 0,
    };
    // 1000 kb/s with a burst of 24 kb: 2 frames of 1500 bytes at once.
    f.meter_mod(&MeterMod {
        command: mc::ADD,
        flags: mf::KBPS | mf::BURST | mf::STATS,
        meter_id: 1,
        bands: vec![band(openflow::mbt::DROP, 1000, 24, 0)],
    })
    .unwrap();
    // A DSCP remark band at 100 packets/s, burst 1.
    f.meter_mod(&MeterMod {
        command: mc::ADD,
        flags: mf::PKTPS | mf::BURST,
        meter_id: 2,
        bands: vec![band(openflow::mbt::DSCP_REMARK, 100, 1, 1)],
    })
    .unwrap();
    let meter = |id| {
        crate::testutil::fm(
            fc::ADD,
            0,
            5,
            vec![Oxm::exact(oxm::IN_PORT, id)],
            vec![Instruction::Meter(id as u32), crate::testutil::out(5)],
        )
    };
    f.flow_mod(&meter(1)).unwrap();
    f.flow_mod(&meter(2)).unwrap();
    let big = {
        let mut e = eth(
            &[],
            0x0800,
            &ip4(6, 18 << 2, 64, "10.0.0.1", "10.0.0.2", tcp(1, 2)),
        );
        e.resize(1500, 0);
        e
    };
    let mut b = Batch::new(vec![big.clone(); 4]);
    let v = b.classify(&f, 0, 1_000_000_000);
    let m = Verdict::Drop(DropReason::Meter);
    assert_eq!(v, vec![Verdict::Port(4), Verdict::Port(4), m, m]);
    // 12 ms later, one more frame's worth (12 kb at 1000 kb/s).
    let v = Batch::new(vec![big.clone(); 2]).classify(&f, 0, 1_012_000_000);
    assert_eq!(v, vec![Verdict::Port(4), m]);
    // The remark band: the first passes as is, the rest over the rate get
    // AF21 (18) raised to AF22 (20), with a valid header checksum.
    let mut b = Batch::new(vec![big.clone(); 3]);
    let v = b.classify(&f, 1, 1_000_000_000);
    assert_eq!(v, vec![Verdict::Port(4); 3]);
    assert_eq!(b.views[0][15] >> 2, 18);
    for x in &b.views[1..] {
        assert_eq!(x[15] >> 2, 20);
        assert!(checksums_ok(x));
    }
    let s = f.meter_stats(openflow::meter_id::ALL);
    assert_eq!((s[0].packet_in_count, s[0].bands[0].0), (6, 3));
    assert_eq!((s[1].packet_in_count, s[1].bands[0].0), (3, 2));
    assert_eq!(
        f.meter_config(1)[0].2,
        vec![band(openflow::mbt::DROP, 1000, 24, 0)]
    );
    // Absurd rates and bursts, unknown bands and flags: the spec's codes.
    let mm = |flags, bands| MeterMod {
        command: mc::ADD,
        flags,
        meter_id: 9,
        bands,
    };
    let e = |c| Err(OfpError::new(et::METER_MOD_FAILED, c));
    assert_eq!(
        f.meter_mod(&mm(mf::KBPS, vec![band(openflow::mbt::DROP, 0, 0, 0)])),
        e(mmfc::BAD_RATE)
    );
    assert_eq!(
        f.meter_mod(&mm(
            mf::KBPS,
            vec![band(openflow::mbt::DROP, u32::MAX, 0, 0)]
        )),
        e(mmfc::BAD_RATE)
    );
    assert_eq!(
        f.meter_mod(&mm(
            mf::KBPS | mf::BURST,
            vec![band(openflow::mbt::DROP, 10, u32::MAX, 0)]
        )),
        e(mmfc::BAD_BURST)
    );
    assert_eq!(
        f.meter_mod(&mm(
            mf::KBPS,
            vec![band(openflow::mbt::EXPERIMENTER, 10, 0, 0)]
        )),
        e(mmfc::BAD_BAND)
    );
    assert_eq!(f.meter_mod(&mm(0x40, vec![])), e(mmfc::BAD_FLAGS));
    assert_eq!(
        f.meter_mod(&mm(mf::KBPS, vec![band(openflow::mbt::DROP, 10, 0, 0); 9])),
        e(mmfc::OUT_OF_BANDS)
    );
    assert_eq!(
        f.meter_mod(&MeterMod {
            command: 7,
            ..mm(mf::KBPS, vec![])
        }),
        e(mmfc::BAD_COMMAND)
    );
    assert_eq!(
        f.meter_mod(&MeterMod {
            command: mc::MODIFY,
            ..mm(mf::KBPS, vec![])
        }),
        e(mmfc::UNKNOWN_METER)
    );
    // A flow naming a meter that does not exist.
    let mut bad = meter(3);
    bad.instructions[0] = Instruction::Meter(77);
    assert_eq!(f.flow_mod(&bad).map(|_| ()), e(mmfc::UNKNOWN_METER));
    assert_eq!(
        f.meter_config(openflow::meter_id::ALL).len(),
        2,
        "refusals change nothing"
    );
    // A modify starts the buckets over; a delete deletes its flows.
    f.meter_mod(&MeterMod {
        command: mc::MODIFY,
        flags: mf::KBPS,
        meter_id: 1,
        bands: vec![band(openflow::mbt::DROP, 100_000, 0, 0)],
    })
    .unwrap();
    assert_eq!(
        Batch::new(vec![big.clone(); 4]).classify(&f, 0, 3_000_000_000),
        vec![Verdict::Port(4); 4]
    );
    f.meter_mod(&MeterMod {
        command: mc::DELETE,
        flags: 0,
        meter_id: 1,
        bands: vec![],
    })
    .unwrap();
    assert_eq!(f.flow_count(), 1);
    assert_eq!(f.meter_features().0, meters::MAX_METERS as u32);
}

// ------------------------------------------------------------ bad input

/// What turnoutd still lacks gets the spec's error for that flow-mod or
/// group-mod alone; the rest of the table goes on.
#[test]
fn what_is_still_missing_is_refused_with_its_code_and_nothing_else_changes() {
    let f = crate::testutil::flows();
    f.command("add", &json!({"flow": "in_port=0,actions=output:1"}))
        .unwrap();
    let u = eth(
        &[],
        0x0800,
        &ip4(17, 0, 64, "10.0.0.1", "10.0.0.2", udp(1, 2)),
    );
    let fm = |m: Vec<Oxm>, i: Vec<Instruction>| crate::testutil::fm(fc::ADD, 0, 9, m, i);
    for (m, err) in [
        (
            fm(
                vec![
                    Oxm::exact(oxm::ETH_TYPE, 0x88e7),
                    Oxm::exact(oxm::PBB_ISID, 1),
                ],
                vec![],
            ),
            OfpError::new(et::BAD_MATCH, bmc::BAD_FIELD),
        ),
        (
            fm(
                vec![
                    Oxm::exact(oxm::ETH_TYPE, 0x86dd),
                    Oxm::exact(oxm::IPV6_EXTHDR, 1),
                ],
                vec![],
            ),
            OfpError::new(et::BAD_MATCH, bmc::BAD_FIELD),
        ),
    ] {
        assert_eq!(f.flow_mod(&m), Err(err));
    }
    let g = |kind| GroupMod {
        command: gc::ADD,
        kind,
        group_id: 1,
        buckets: vec![],
    };
    // (Fast failover is taken: a type past it is not.)
    assert_eq!(
        f.group_mod(&g(gt::FF + 1)),
        Err(OfpError::new(et::GROUP_MOD_FAILED, gmfc::BAD_TYPE))
    );
    assert_eq!(f.flow_count(), 1);
    assert_eq!(to1(&f, &u), u);
}
