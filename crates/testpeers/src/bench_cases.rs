//! The logic set-ups the benches and the instruction-count instruments
//! share: one definition of the traffic and of the rule sets, so the
//! criterion figures (`crates/fabric/benches/fabric.rs` group `e_logic`,
//! `crates/logic/benches/logics.rs`) and the callgrind counts
//! (`crates/logic/examples/classify_loop.rs`,
//! `crates/fabric/examples/fabric_loop.rs`) measure the same thing.
//!
//! Traffic: 64-byte UDP/IPv4 frames 02:..:01 10.0.0.1:1234 → 02:..:02
//! 10.0.0.2:5001 received on port 0. Every case forwards them to port 1.

use serde_json::{json, Value};

use logic::{Ctx, Logic, Pkt, Pkts, Verdict};

/// Source port of [`udp_frame`]'s frames.
pub const SRC_PORT: u16 = 1234;
/// Destination port of [`udp_frame`]'s frames.
pub const DST_PORT: u16 = 5001;

/// The cases of [`build`], with the names the fabric bench's `e_logic`
/// group reports them under.
pub const E_LOGIC: &[(&str, &str)] = &[
    ("patch", "patch"),
    ("bridge", "bridge"),
    ("l4filter", "l4filter"),
    ("demux", "demux"),
    ("flows 3 rules", "flows3"),
    ("flows 10k rules 8 masks", "flows10k"),
];

/// Every case [`build`] knows (the `e_logic` ones and `flows3-nocache`).
pub const CASES: &[&str] = &[
    "patch",
    "bridge",
    "l4filter",
    "demux",
    "flows3",
    "flows3-nocache",
    "flows10k",
    "flows10k-src",
    "flows10k-acl",
    "flows10k-acl-high",
];

/// `flows` with a few rules: the frames hit the first one.
pub const FEW_FLOWS: [&str; 3] = [
    "priority=10,in_port=0,udp,nw_dst=10.0.0.2,actions=output:1",
    "priority=10,in_port=1,actions=output:0",
    "priority=0,actions=drop",
];

/// `n` flows over `masks` distinct masks that [`udp_frame`]'s frames miss
/// when `tp_src_base` puts their source ports past [`SRC_PORT`] (udp,
/// `tp_src` = `tp_src_base + i / masks`, nw_dst=10.0.0.2 with a prefix of
/// 17 + mask number bits), at priorities 1..=1000, plus the flow every
/// frame hits: priority 0, `udp,actions=output:1`, in a mask of its own.
/// So a lookup probes all `masks + 1` subtables (no early exit).
pub fn many_flows(n: u32, masks: u32, tp_src_base: u32) -> Vec<String> {
    let masks = masks.max(1);
    let mut texts: Vec<String> = (0..n)
        .map(|i| {
            format!(
                "priority={},udp,nw_dst=10.0.0.2/{},tp_src={},actions=output:2",
                1 + i % 1000,
                17 + i % masks,
                tp_src_base + i / masks
            )
        })
        .collect();
    texts.push("priority=0,udp,actions=output:1".into());
    texts
}

/// [`many_flows`] with every flow also on `nw_src=172.16.0.1` (which
/// no frame of [`flow_frame`] has): the flows match both fields that
/// [`flow_frame`] varies (source address and port), so concurrent flows
/// have distinct cache keys whatever the cache leaves out (every flow's
/// key a different exact-match entry: the miss path's worst case).
pub fn many_flows_src(n: u32, masks: u32, tp_src_base: u32) -> Vec<String> {
    let mut t = many_flows(n, masks, tp_src_base);
    let last = t.len() - 1;
    for f in &mut t[..last] {
        *f = f.replacen(",udp,", ",udp,nw_src=172.16.0.1,", 1);
    }
    t
}

/// Priority of the flow every frame hits in [`acl_flows`].
pub const ACL_HIT_PRIORITY: u32 = 2000;

/// The shape of a real ACL next to [`many_flows`]: `many_flows(n, masks,
/// tp_src_base)` with its unhittable flows at priorities 2001..=3000 and
/// the flow every frame hits (`udp,actions=output:1`) at
/// [`ACL_HIT_PRIORITY`], plus `acl` unhittable ACL flows matching
/// `nw_src`/32 (172.16.0.0 + i, never a source of [`flow_frame`]) and
/// `tp_src` (1024 + i % 4096), every other one `nw_dst=10.0.0.2`/32 too (two
/// masks), at priorities 1..=1000 (`higher` false: below the hit flow, so a
/// lookup that respects the priority order never needs them) or
/// 3001..=4000 (`higher`: above it, probed on every lookup).
pub fn acl_flows(n: u32, masks: u32, tp_src_base: u32, acl: u32, higher: bool) -> Vec<String> {
    let mut texts = many_flows(n, masks, tp_src_base);
    let hit = texts.pop().expect("many_flows ends with the hit flow");
    debug_assert!(hit.starts_with("priority=0,"));
    for t in &mut texts {
        let rest = t.strip_prefix("priority=").expect("priority first");
        let (p, rest) = rest.split_once(',').expect("more after the priority");
        let p: u32 = p.parse().expect("a number");
        *t = format!("priority={},{rest}", ACL_HIT_PRIORITY + p);
    }
    texts.push(format!("priority={ACL_HIT_PRIORITY},udp,actions=output:1"));
    let base = if higher { 3001 } else { 1 };
    for i in 0..acl {
        let src = 0xac10_0000u32 + i;
        let dst = if i % 2 == 1 { ",nw_dst=10.0.0.2" } else { "" };
        texts.push(format!(
            "priority={},udp,nw_src={}.{}.{}.{}{dst},tp_src={},actions=drop",
            base + i % 1000,
            src >> 24,
            (src >> 16) & 0xff,
            (src >> 8) & 0xff,
            src & 0xff,
            1024 + i % 4096,
        ));
    }
    texts
}

/// Flows of [`flow_frame`] per source address (then the next address).
pub const PORTS_PER_ADDR: u32 = 512;

/// Frame of concurrent flow `i` (0 = [`udp_frame`]'s): source port
/// [`SRC_PORT`] + `i % 512` (never one of [`many_flows`]' 2000..), source
/// address 10.0.0.1 plus `i / 512` in its third byte and up (as
/// turnout-gen's `--vary src-port,src-ip`). Distinct for `i` below 2^24.
///
/// Panics if `len` is outside 42..=1514 (bench set-up).
pub fn flow_frame(len: usize, i: u32) -> Vec<u8> {
    let mut f = udp_frame(len, SRC_PORT + (i % PORTS_PER_ADDR) as u16);
    let src = 0x0a00_0001u32 + ((i / PORTS_PER_ADDR) << 8);
    let old = u32::from_be_bytes([f[26], f[27], f[28], f[29]]);
    f[26..30].copy_from_slice(&src.to_be_bytes());
    // The IPv4 header checksum (RFC 1624), so the frame stays valid.
    let mut sum = !u16::from_be_bytes([f[24], f[25]]) as u32;
    for (o, n) in [(old >> 16, src >> 16), (old & 0xffff, src & 0xffff)] {
        sum += (!o & 0xffff) + n;
    }
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    f[24..26].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    f
}

/// The logic name and configuration of `case` (one of [`CASES`]).
pub fn config(case: &str) -> Result<(&'static str, Value), String> {
    Ok(match case {
        "patch" => ("patch", json!({"pairs": [[0, 1]]})),
        "bridge" => ("bridge", Value::Null),
        "l4filter" => (
            "l4filter",
            json!({"rules": [{"proto": "udp", "port": DST_PORT, "to": 1}]}),
        ),
        "demux" => (
            "demux",
            json!({"default": 2, "uplink": 0, "entries": [
                {"proto": "udp", "ip": "10.0.0.2", "port": DST_PORT, "to": 1}]}),
        ),
        "flows3" => ("flows", json!({ "flows": FEW_FLOWS })),
        "flows3-nocache" => ("flows", json!({ "flows": FEW_FLOWS, "cache": 0 })),
        // 10 000 rules over 8 masks (source ports 2000.., never 1234).
        "flows10k" => ("flows", json!({ "flows": many_flows(10_000, 8, 2000) })),
        // The same with the varied source address matched too.
        "flows10k-src" => ("flows", json!({ "flows": many_flows_src(10_000, 8, 2000) })),
        // The same 10^4 flows above the hit flow, and 10^4 ACL flows
        // (nw_src/32 + tp_src) below it / above it.
        "flows10k-acl" => (
            "flows",
            json!({ "flows": acl_flows(10_000, 8, 2000, 10_000, false) }),
        ),
        "flows10k-acl-high" => (
            "flows",
            json!({ "flows": acl_flows(10_000, 8, 2000, 10_000, true) }),
        ),
        _ => {
            return Err(format!(
                "unknown case {case:?} (known: {})",
                CASES.join(", ")
            ))
        }
    })
}

/// Builds `case`, ready for [`udp_frame`]'s traffic: the bridge has
/// learned that 02:..:02 is on port 1.
pub fn build(case: &str) -> Result<Box<dyn Logic>, String> {
    let (name, cfg) = config(case)?;
    let l = logic::build(name, &cfg).map_err(|e| format!("{case}: {e}"))?;
    if name == "bridge" {
        // A broadcast from 02:..:02 on port 1.
        let mut learn = udp_frame(64, SRC_PORT);
        learn[6..12].copy_from_slice(&[0x02, 0, 0, 0, 0, 0x02]);
        learn[0..6].fill(0xff);
        // SAFETY: the buffer outlives the view, used only in this call.
        let mut p = [unsafe { Pkt::new(learn.as_mut_ptr(), 64, 1, 0) }];
        let mut v = [Verdict::Flood];
        let ctx = Ctx {
            now_ns: 1,
            worker: 0,
        };
        l.classify(&ctx, 1, Pkts::new_mut(&mut p), &mut v);
    }
    Ok(l)
}

/// A `len`-byte UDP/IPv4 frame 10.0.0.1:`src_port` → 10.0.0.2:5001.
///
/// Panics if `len` is outside 42..=1514 (bench set-up, never the data path).
pub fn udp_frame(len: usize, src_port: u16) -> Vec<u8> {
    use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
    use wire::MacAddr;
    let spec = UdpFrameSpec::new(
        MacAddr([0x02, 0, 0, 0, 0, 0x01]),
        MacAddr([0x02, 0, 0, 0, 0, 0x02]),
        IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
        src_port,
        DST_PORT,
    );
    let mut f = vec![0u8; len];
    write_udp_frame(&spec, &mut f, len).expect("a UDP frame of 42..=1514 bytes");
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every case sends the bench's frames to port 1 (what the benches and
    /// instruments assume).
    #[test]
    fn every_case_forwards_to_port_1() {
        for case in CASES {
            let l = build(case).unwrap();
            let mut frames: Vec<Vec<u8>> = (0..8).map(|_| udp_frame(64, SRC_PORT)).collect();
            let mut p: Vec<Pkt> = frames
                .iter_mut()
                // SAFETY: the frames outlive the views.
                .map(|f| unsafe { Pkt::new(f.as_mut_ptr(), 64, 0, 0) })
                .collect();
            let mut v = [Verdict::Flood; 8];
            let ctx = Ctx {
                now_ns: 2,
                worker: 0,
            };
            l.classify(&ctx, 0, Pkts::new_mut(&mut p), &mut v);
            assert_eq!(v, [Verdict::Port(1); 8], "{case}");
        }
        assert!(config("nope").is_err());
        // Concurrent flows: flow 0 is the plain frame, the others differ,
        // every one with a valid IPv4 header checksum.
        assert_eq!(flow_frame(64, 0), udp_frame(64, SRC_PORT));
        let mut seen = std::collections::HashSet::new();
        for i in [0, 1, 511, 512, 513, 99_999, 1_000_000] {
            let f = flow_frame(64, i);
            let mut sum = 0u32;
            for w in f[14..34].chunks(2) {
                sum += u16::from_be_bytes([w[0], w[1]]) as u32;
            }
            while sum > 0xffff {
                sum = (sum & 0xffff) + (sum >> 16);
            }
            assert_eq!(sum, 0xffff, "flow {i}: IPv4 checksum");
            assert!(seen.insert(f[26..38].to_vec()), "flow {i} not distinct");
        }
        for (_, c) in E_LOGIC {
            assert!(CASES.contains(c));
        }
    }
}
