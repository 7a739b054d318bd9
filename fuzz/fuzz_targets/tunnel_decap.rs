//! The VXLAN / Geneve receive classifier over arbitrary underlay frames:
//! never panics; an accepted inner frame lies inside the outer one, is at
//! least an Ethernet header long, and was reached through headers that
//! the wire views accept; each drop has a named reason.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use libfuzzer_sys::fuzz_target;
use ports::tunnel::decap::{decap, DecapCfg, Rx, RxDrop};
use ports::tunnel::Kind;

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let kind = if data[0] & 1 == 0 {
        Kind::Vxlan
    } else {
        Kind::Geneve
    };
    let local = if data[0] & 2 == 0 {
        IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1))
    } else {
        IpAddr::V6(Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, 1))
    };
    let port = match kind {
        Kind::Vxlan => 4789,
        Kind::Geneve => 6081,
    };
    let cfg = DecapCfg {
        kind,
        vni: 42 + (data[1] & 1) as u32,
        local,
        port,
    };
    let f = &data[2..];
    match decap(&cfg, f) {
        Ok(Rx::Frame { off, len, src }) => {
            assert!(
                off <= f.len() && len <= f.len() - off,
                "inner frame inside the outer one"
            );
            assert!(
                len >= wire::ethernet::HEADER_LEN,
                "inner frame holds an Ethernet header"
            );
            assert_eq!(
                src.is_ipv4(),
                local.is_ipv4(),
                "same address family as ours"
            );
            let tags = wire::ethernet::parse_tags(f).expect("outer Ethernet parsed");
            assert!(tags.l3_offset < off);
        }
        Ok(Rx::Control) => {}
        Err(d) => {
            assert!(RxDrop::ALL.contains(&d));
            assert!(d.name().starts_with("rx_drop_"));
        }
    }
});
