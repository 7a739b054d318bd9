//! `demux`: the mSwitch §5.3 protocol demultiplexer for user-space stacks
//! ("MultiStack"). Exact match on `<protocol, local IP, local port>` → the
//! port of the application that owns the tuple; everything else to the
//! default port (the host stack), with output verification.
//!
//! Configuration:
//! `{"default": 0, "uplink": 1, "entries": [{"proto": "tcp", "ip": "10.0.0.2", "port": 80, "to": 3}]}`
//! (`default` required, `uplink` optional; IPv4 and IPv6 addresses).
//!
//! Ports play three roles: the default (host) port, the optional uplink
//! (the NIC), and application ports, which own tuples. Per frame:
//! 1. From an application port (neither default nor uplink): output
//!    verification. The frame must be UDP/TCP from a tuple
//!    `<proto, source IP, source port>` owned by that port, else
//!    `Drop(Spoofed)` — this includes ARP and ICMP, so an application stack
//!    needs static neighbours.
//! 2. The destination tuple `<proto, destination IP, destination port>` is
//!    looked up: an owned tuple goes to its owner.
//! 3. Otherwise: frames from the uplink go to the default port; frames from
//!    the default port or an application go to the uplink (or, without an
//!    uplink, from an application to the default port).
//! 4. A result equal to the ingress is `Drop(Hairpin)` (the host sending
//!    to nobody, with no uplink). Headers that cannot be parsed (truncated
//!    IP/UDP/TCP, bad VLAN stack) are `Drop(Malformed)`.
//!
//! A tuple has one owner: adding a tuple owned by another port is refused.
//! State: a hash map in an immutable snapshot swapped atomically by
//! commands (arc-swap); `classify` loads it once per batch and never locks.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde_json::{json, Value};
use wire::flow::parse_l4;

use crate::args::{self, Args};
use crate::{CommandError, Ctx, DropReason, Logic, LogicError, Pkts, PortId, Verdict};

/// A local endpoint `<proto, ip, port>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tuple {
    /// `proto::UDP` or `proto::TCP`.
    pub proto: u8,
    /// Local address.
    pub ip: IpAddr,
    /// Local port.
    pub port: u16,
}

impl Hash for Tuple {
    fn hash<H: Hasher>(&self, h: &mut H) {
        let (bits, v6) = match self.ip {
            IpAddr::V4(a) => (u32::from(a) as u128, 0u64),
            IpAddr::V6(a) => (u128::from(a), 1u64),
        };
        h.write_u64((bits >> 64) as u64);
        h.write_u64(bits as u64);
        h.write_u64((v6 << 32) | ((self.proto as u64) << 16) | self.port as u64);
    }
}

impl std::fmt::Display for Tuple {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.ip {
            IpAddr::V4(a) => write!(f, "{} {a}:{}", args::proto_name(self.proto), self.port),
            IpAddr::V6(a) => write!(f, "{} [{a}]:{}", args::proto_name(self.proto), self.port),
        }
    }
}

/// A multiply-rotate hasher (FxHash's mixing): keys are inserted only by
/// the control plane, so flooding resistance is not needed and lookup speed
/// is.
#[derive(Default, Clone, Copy)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for c in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            self.write_u64(u64::from_le_bytes(w));
        }
    }

    #[inline]
    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0.rotate_left(5) ^ x).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        // Spread the high bits down: hashbrown takes the top 7 bits as the
        // tag and the low bits as the index.
        self.0 ^ (self.0 >> 29)
    }
}

type Map = HashMap<Tuple, PortId, BuildHasherDefault<FxHasher>>;

/// The demux logic.
pub struct Demux {
    table: ArcSwap<Map>,
    default: PortId,
    uplink: Option<PortId>,
    /// Serialises commands (control path only; never taken by `classify`).
    writer: Mutex<()>,
}

/// Table constructor.
pub fn new(config: &Value) -> Result<Box<dyn Logic>, LogicError> {
    Ok(Box::new(
        Demux::from_config(config).map_err(LogicError::Config)?,
    ))
}

fn parse_entry(what: &str, v: &Value, with_to: bool) -> Result<(Tuple, PortId), String> {
    let keys: &[&str] = if with_to {
        &["proto", "ip", "port", "to"]
    } else {
        &["proto", "ip", "port"]
    };
    let a = Args::new(what, v, keys)?;
    let proto = args::proto(&a, "proto").and_then(|v| a.required("proto", v))?;
    let ip_s = a.str("ip").and_then(|v| a.required("ip", v))?;
    let ip: IpAddr = ip_s.parse().map_err(|_| {
        a.err(
            "ip",
            &format!("must be an ipv4 or ipv6 address, got {ip_s:?}"),
        )
    })?;
    let port = a
        .u64("port", 0, 65535)
        .and_then(|v| a.required("port", v))? as u16;
    let to = if with_to {
        a.port("to").and_then(|v| a.required("to", v))?
    } else {
        u16::MAX
    };
    Ok((Tuple { proto, ip, port }, to))
}

fn parse_entries(what: &str, v: &Value, with_to: bool) -> Result<Vec<(Tuple, PortId)>, String> {
    if let Some(list) = v.get("entries") {
        let a = Args::new(what, v, &["entries"])?;
        let list = a
            .array("entries")?
            .ok_or_else(|| a.err("entries", &format!("must be an array, got {list}")))?;
        return list
            .iter()
            .enumerate()
            .map(|(i, e)| parse_entry(&format!("{what}: entries[{i}]"), e, with_to))
            .collect();
    }
    Ok(vec![parse_entry(what, v, with_to)?])
}

impl Demux {
    /// Builds from `{"default": p, "uplink": p, "entries": [...]}`.
    pub fn from_config(config: &Value) -> Result<Demux, String> {
        let a = Args::new("demux config", config, &["default", "uplink", "entries"])?;
        let default = a.port("default").and_then(|v| a.required("default", v))?;
        let uplink = a.port("uplink")?;
        if uplink == Some(default) {
            return Err(a.err(
                "uplink",
                &format!("must differ from the default port {default}"),
            ));
        }
        let d = Demux {
            table: ArcSwap::from_pointee(Map::default()),
            default,
            uplink,
            writer: Mutex::new(()),
        };
        if let Some(list) = a.array("entries")? {
            let entries = list
                .iter()
                .enumerate()
                .map(|(i, e)| parse_entry(&format!("demux config: entries[{i}]"), e, true))
                .collect::<Result<Vec<_>, _>>()?;
            d.add(&entries, "demux config")?;
        }
        Ok(d)
    }

    fn add(&self, entries: &[(Tuple, PortId)], what: &str) -> Result<usize, String> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut m = Map::clone(&self.table.load());
        let mut added = 0;
        for &(t, to) in entries {
            if to == self.default || Some(to) == self.uplink {
                return Err(format!("{what}: {t}: key \"to\" must be an application port, not the default or uplink port {to}"));
            }
            match m.get(&t) {
                Some(&owner) if owner != to => {
                    return Err(format!("{what}: {t} is already owned by port {owner}"))
                }
                Some(_) => {}
                None => {
                    m.insert(t, to);
                    added += 1;
                }
            }
        }
        self.table.store(Arc::new(m));
        Ok(added)
    }

    fn remove_where(&self, pred: impl Fn(&Tuple, PortId) -> bool) -> usize {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut m = Map::clone(&self.table.load());
        let before = m.len();
        m.retain(|t, p| !pred(t, *p));
        let n = before - m.len();
        if n > 0 {
            self.table.store(Arc::new(m));
        }
        n
    }

    #[inline]
    fn verdict(&self, m: &Map, ingress: PortId, frame: &[u8]) -> Verdict {
        let tup = match parse_l4(frame) {
            Err(_) => return Verdict::Drop(DropReason::Malformed),
            Ok(t) => t,
        };
        let from_app = ingress != self.default && Some(ingress) != self.uplink;
        if from_app {
            let owned = tup.is_some_and(|t| {
                m.get(&Tuple {
                    proto: t.proto,
                    ip: t.src_ip,
                    port: t.src_port,
                }) == Some(&ingress)
            });
            if !owned {
                return Verdict::Drop(DropReason::Spoofed);
            }
        }
        let hit = tup.and_then(|t| {
            m.get(&Tuple {
                proto: t.proto,
                ip: t.dst_ip,
                port: t.dst_port,
            })
            .copied()
        });
        let to = match hit {
            Some(p) => p,
            None if Some(ingress) == self.uplink => self.default,
            None => self.uplink.unwrap_or(self.default),
        };
        if to == ingress {
            Verdict::Drop(DropReason::Hairpin)
        } else {
            Verdict::Port(to)
        }
    }
}

impl Logic for Demux {
    fn name(&self) -> &'static str {
        "demux"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let m = self.table.load();
        for (p, v) in pkts.iter().zip(verdicts.iter_mut()) {
            *v = self.verdict(&m, ingress, p.data());
        }
    }

    fn command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        let e = CommandError;
        match cmd {
            "list" => {
                Args::new("demux list", args, &[]).map_err(e)?;
                let m = self.table.load();
                let mut entries: Vec<_> = m
                    .iter()
                    .map(|(t, p)| (args::proto_name(t.proto), t.ip, t.port, *p))
                    .collect();
                entries.sort();
                let entries: Vec<Value> = entries
                    .into_iter()
                    .map(|(proto, ip, port, to)| json!({"proto": proto, "ip": ip.to_string(), "port": port, "to": to}))
                    .collect();
                Ok(json!({"entries": entries, "default": self.default, "uplink": self.uplink}))
            }
            "add" => {
                let entries = parse_entries("demux add", args, true).map_err(e)?;
                let added = self.add(&entries, "demux add").map_err(e)?;
                Ok(json!({"added": added}))
            }
            "remove" => {
                let entries = parse_entries("demux remove", args, false).map_err(e)?;
                let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
                let mut m = Map::clone(&self.table.load());
                for (t, _) in &entries {
                    if m.remove(t).is_none() {
                        return Err(e(format!("demux remove: no entry for {t}")));
                    }
                }
                self.table.store(Arc::new(m));
                Ok(json!({"removed": entries.len()}))
            }
            _ => Err(e(format!("logic demux has no command {cmd:?}"))),
        }
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("list", "list the owned tuples (proto, ip, port, to), the default port and the uplink"),
            ("add", "{proto, ip, port, to} or {entries: [...]}: give tuples to an application port (all or none)"),
            ("remove", "{proto, ip, port} or {entries: [...]}: release tuples (all or none)"),
        ]
    }

    fn port_removed(&self, port: PortId) {
        self.remove_where(|_, p| p == port);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth, random_frames, udp4, Batch};
    use proptest::prelude::*;
    use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};

    const NIC: PortId = 0;
    const HOST: PortId = 1;
    const APP: PortId = 3;
    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn demux() -> Demux {
        Demux::from_config(&json!({"default": HOST, "uplink": NIC, "entries": [
            {"proto": "udp", "ip": "10.0.0.2", "port": 5001, "to": APP},
            {"proto": "udp", "ip": "fd00::2", "port": 5001, "to": APP},
        ]}))
        .unwrap()
    }

    /// 10.0.0.1:sport -> 10.0.0.2:dport.
    fn inbound(sport: u16, dport: u16) -> Vec<u8> {
        udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], sport, dport)
    }

    /// 10.0.0.2:sport -> 10.0.0.1:dport.
    fn outbound(sport: u16, dport: u16) -> Vec<u8> {
        udp4(B, A, [10, 0, 0, 2], [10, 0, 0, 1], sport, dport)
    }

    #[test]
    fn owned_tuple_goes_to_its_port_and_the_rest_to_the_host() {
        let d = demux();
        assert_eq!(
            classify1(&d, NIC, 0, &inbound(40000, 5001)),
            Verdict::Port(APP)
        );
        assert_eq!(
            classify1(&d, NIC, 0, &inbound(40000, 5002)),
            Verdict::Port(HOST)
        );
        assert_eq!(
            classify1(
                &d,
                NIC,
                0,
                &udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 3], 1, 5001)
            ),
            Verdict::Port(HOST)
        );
        assert_eq!(
            classify1(&d, NIC, 0, &eth(A, [0xff; 6], 0x0806)),
            Verdict::Port(HOST)
        );
        // TCP to the same local port is a different tuple.
        let mut tcp = inbound(40000, 5001);
        tcp[23] = wire::ipv4::proto::TCP;
        tcp[46] = 0x50;
        assert_eq!(classify1(&d, NIC, 0, &tcp), Verdict::Port(HOST));
        // The host's own traffic goes out the uplink.
        assert_eq!(
            classify1(&d, HOST, 0, &outbound(22, 40000)),
            Verdict::Port(NIC)
        );
    }

    #[test]
    fn ipv6_tuples() {
        let d = demux();
        let spec = UdpFrameSpec::new(
            wire::MacAddr(A),
            wire::MacAddr(B),
            IpPair::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
            9,
            5001,
        );
        let mut f = vec![0u8; 80];
        write_udp_frame(&spec, &mut f, 80).unwrap();
        assert_eq!(classify1(&d, NIC, 0, &f), Verdict::Port(APP));
        // The v4-mapped form of 10.0.0.2 is not the IPv4 tuple.
        let spec = UdpFrameSpec::new(
            wire::MacAddr(A),
            wire::MacAddr(B),
            IpPair::V6(
                "fd00::1".parse().unwrap(),
                "::ffff:10.0.0.2".parse().unwrap(),
            ),
            9,
            5001,
        );
        write_udp_frame(&spec, &mut f, 80).unwrap();
        assert_eq!(classify1(&d, NIC, 0, &f), Verdict::Port(HOST));
    }

    #[test]
    fn output_verification() {
        let d = demux();
        // The application sends from its tuple: out the uplink.
        assert_eq!(
            classify1(&d, APP, 0, &outbound(5001, 40000)),
            Verdict::Port(NIC)
        );
        // From a port it does not own, or another address: spoofed.
        assert_eq!(
            classify1(&d, APP, 0, &outbound(5002, 40000)),
            Verdict::Drop(DropReason::Spoofed)
        );
        assert_eq!(
            classify1(
                &d,
                APP,
                0,
                &udp4(B, A, [10, 0, 0, 9], [10, 0, 0, 1], 5001, 40000)
            ),
            Verdict::Drop(DropReason::Spoofed)
        );
        // Non-UDP/TCP from an application: spoofed too (documented).
        assert_eq!(
            classify1(&d, APP, 0, &eth(B, [0xff; 6], 0x0806)),
            Verdict::Drop(DropReason::Spoofed)
        );
        // Another application port cannot use APP's tuple.
        assert_eq!(
            classify1(&d, 4, 0, &outbound(5001, 40000)),
            Verdict::Drop(DropReason::Spoofed)
        );
        // The host and the uplink are not verified.
        assert_eq!(
            classify1(&d, HOST, 0, &outbound(5002, 40000)),
            Verdict::Port(NIC)
        );
    }

    #[test]
    fn without_uplink() {
        let d = Demux::from_config(&json!({"default": HOST, "entries": [{"proto": "udp", "ip": "10.0.0.2", "port": 5001, "to": APP}]})).unwrap();
        assert_eq!(
            classify1(&d, 7, 0, &inbound(1, 5001)),
            Verdict::Drop(DropReason::Spoofed)
        );
        assert_eq!(
            classify1(&d, HOST, 0, &inbound(1, 5001)),
            Verdict::Port(APP)
        );
        assert_eq!(
            classify1(&d, HOST, 0, &inbound(1, 5002)),
            Verdict::Drop(DropReason::Hairpin)
        );
        assert_eq!(
            classify1(&d, APP, 0, &outbound(5001, 1)),
            Verdict::Port(HOST)
        );
    }

    #[test]
    fn malformed_is_dropped() {
        let d = demux();
        let f = inbound(1, 5001);
        assert_eq!(
            classify1(&d, NIC, 0, &f[..38]),
            Verdict::Drop(DropReason::Malformed)
        );
        assert_eq!(
            classify1(&d, APP, 0, &f[..38]),
            Verdict::Drop(DropReason::Malformed)
        );
    }

    #[test]
    fn commands_and_collisions() {
        let d = demux();
        assert_eq!(
            d.command(
                "add",
                &json!({"proto": "tcp", "ip": "10.0.0.2", "port": 80, "to": 4})
            )
            .unwrap(),
            json!({"added": 1})
        );
        let mut tcp = inbound(40000, 80);
        tcp[23] = wire::ipv4::proto::TCP;
        tcp[46] = 0x50;
        assert_eq!(classify1(&d, NIC, 0, &tcp), Verdict::Port(4));
        // Same owner again: accepted, nothing added. Another owner: refused.
        assert_eq!(
            d.command(
                "add",
                &json!({"proto": "tcp", "ip": "10.0.0.2", "port": 80, "to": 4})
            )
            .unwrap(),
            json!({"added": 0})
        );
        let err = d.command("add", &json!({"entries": [{"proto": "udp", "ip": "10.0.0.2", "port": 9, "to": 5}, {"proto": "tcp", "ip": "10.0.0.2", "port": 80, "to": 5}]})).unwrap_err();
        assert_eq!(
            err.0,
            "demux add: tcp 10.0.0.2:80 is already owned by port 4"
        );
        assert_eq!(
            classify1(&d, NIC, 0, &inbound(1, 9)),
            Verdict::Port(HOST),
            "a refused batch adds nothing"
        );
        let err = d
            .command(
                "add",
                &json!({"proto": "udp", "ip": "10.0.0.2", "port": 9, "to": HOST}),
            )
            .unwrap_err();
        assert!(err.0.contains("must be an application port"), "{}", err.0);
        let err = d
            .command(
                "add",
                &json!({"proto": "udp", "ip": "10.0.0.256", "port": 9, "to": 5}),
            )
            .unwrap_err();
        assert_eq!(
            err.0,
            "demux add: key \"ip\" must be an ipv4 or ipv6 address, got \"10.0.0.256\""
        );
        let listed = d.command("list", &Value::Null).unwrap();
        assert_eq!(listed["entries"].as_array().unwrap().len(), 3);
        assert_eq!(
            (listed["default"].as_u64(), listed["uplink"].as_u64()),
            (Some(1), Some(0))
        );
        d.command(
            "remove",
            &json!({"proto": "tcp", "ip": "10.0.0.2", "port": 80}),
        )
        .unwrap();
        assert_eq!(classify1(&d, NIC, 0, &tcp), Verdict::Port(HOST));
        assert_eq!(
            d.command(
                "remove",
                &json!({"proto": "tcp", "ip": "10.0.0.2", "port": 80})
            )
            .unwrap_err()
            .0,
            "demux remove: no entry for tcp 10.0.0.2:80"
        );
        d.port_removed(APP);
        assert_eq!(
            classify1(&d, NIC, 0, &inbound(1, 5001)),
            Verdict::Port(HOST)
        );
    }

    #[test]
    fn bad_config() {
        let err = |v: Value| Demux::from_config(&v).err().unwrap();
        assert_eq!(err(json!({})), "demux config: missing key \"default\"");
        assert_eq!(
            err(json!({"default": 1, "uplink": 1})),
            "demux config: key \"uplink\" must differ from the default port 1"
        );
        assert_eq!(
            err(json!({"default": 1, "entries": [{"proto": "udp", "ip": "1.2.3.4", "port": 1}]})),
            "demux config: entries[0]: missing key \"to\""
        );
    }

    #[test]
    fn many_entries_hash_well() {
        let d = demux();
        let entries: Vec<Value> = (0..10_000u32).map(|i| json!({"proto": "udp", "ip": format!("10.1.{}.{}", i / 256, i % 256), "port": 7, "to": 10 + (i % 7)})).collect();
        assert_eq!(
            d.command("add", &json!({"entries": entries})).unwrap(),
            json!({"added": 10_000})
        );
        assert_eq!(
            classify1(&d, NIC, 0, &udp4(A, B, [10, 0, 0, 1], [10, 1, 3, 5], 1, 7)),
            Verdict::Port(10 + ((3 * 256 + 5) % 7) as PortId)
        );
    }

    proptest! {
        #[test]
        fn never_panics(frames in random_frames(), ingress in 0u16..5) {
            let d = demux();
            let v = Batch::new(frames.clone()).classify(&d, ingress, 0);
            prop_assert_eq!(v.len(), frames.len());
            prop_assert!(v.iter().all(|v| *v != Verdict::Port(ingress)));
        }
    }
}
