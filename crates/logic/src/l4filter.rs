//! `l4filter`: the mSwitch §5.2 middlebox filter. UDP and TCP port → switch
//! port, matching the destination port first, then the source port, so both
//! directions of a flow reach the middlebox.
//!
//! Configuration:
//! `{"rules": [{"proto": "udp", "port": 5001, "to": 2}], "uplink": 0}`.
//!
//! Verdicts, per frame:
//! - a UDP/TCP packet whose destination (else source) port has a rule goes
//!   to the rule's port;
//! - when that port is the ingress (the middlebox sending its traffic back)
//!   it goes to `uplink` if configured, else it is dropped as `Hairpin`;
//! - no rule matches: `Drop(NoMatch)`;
//! - not UDP/TCP over IPv4/IPv6 (ARP, ICMP, other EtherTypes) or an IP
//!   fragment other than the first (no ports to match): `Drop(NoMatch)`.
//!   A deployment that needs ARP through the filter uses static neighbours;
//! - headers that cannot be parsed (truncated IP/UDP/TCP, bad VLAN stack):
//!   `Drop(Malformed)`.
//!
//! State: two direct-indexed arrays (UDP, TCP) of 65536 ports each, in an
//! immutable snapshot. Commands build a new snapshot and swap it in
//! atomically (arc-swap); `classify` loads it once per batch and never
//! locks. A command may carry many rules, applied as one swap.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use serde_json::{json, Value};
use wire::flow::parse_l4;
use wire::ipv4::proto;

use crate::args::{self, Args};
use crate::{CommandError, Ctx, DropReason, Logic, LogicError, Pkts, PortId, Verdict};

const NONE: u16 = u16::MAX;

#[derive(Clone)]
struct Table {
    udp: Box<[u16]>,
    tcp: Box<[u16]>,
}

impl Table {
    fn empty() -> Table {
        Table {
            udp: vec![NONE; 1 << 16].into_boxed_slice(),
            tcp: vec![NONE; 1 << 16].into_boxed_slice(),
        }
    }

    fn array(&self, p: u8) -> &[u16] {
        if p == proto::UDP {
            &self.udp
        } else {
            &self.tcp
        }
    }

    fn array_mut(&mut self, p: u8) -> &mut [u16] {
        if p == proto::UDP {
            &mut self.udp
        } else {
            &mut self.tcp
        }
    }

    fn rules(&self) -> Vec<Value> {
        let mut out = Vec::new();
        for p in [proto::TCP, proto::UDP] {
            for (port, &to) in self.array(p).iter().enumerate() {
                if to != NONE {
                    out.push(json!({"proto": args::proto_name(p), "port": port, "to": to}));
                }
            }
        }
        out
    }
}

/// The l4filter logic.
pub struct L4Filter {
    table: ArcSwap<Table>,
    uplink: Option<PortId>,
    /// Serialises commands (control path only; never taken by `classify`).
    writer: Mutex<()>,
}

/// Table constructor.
pub fn new(config: &Value) -> Result<Box<dyn Logic>, LogicError> {
    Ok(Box::new(
        L4Filter::from_config(config).map_err(LogicError::Config)?,
    ))
}

/// One rule: (protocol, L4 port, switch port or None for removal).
type Rule = (u8, u16, Option<PortId>);

fn parse_rule(what: &str, v: &Value, with_to: bool) -> Result<Rule, String> {
    let keys: &[&str] = if with_to {
        &["proto", "port", "to"]
    } else {
        &["proto", "port"]
    };
    let a = Args::new(what, v, keys)?;
    let p = args::proto(&a, "proto").and_then(|v| a.required("proto", v))?;
    let port = a
        .u64("port", 0, 65535)
        .and_then(|v| a.required("port", v))? as u16;
    let to = if with_to {
        Some(a.port("to").and_then(|v| a.required("to", v))?)
    } else {
        None
    };
    Ok((p, port, to))
}

/// Rules from either a `rules` array or a single rule's keys at top level.
fn parse_rules(what: &str, v: &Value, with_to: bool) -> Result<Vec<Rule>, String> {
    if let Some(list) = v.get("rules") {
        let a = Args::new(what, v, &["rules"])?;
        let list = a
            .array("rules")?
            .ok_or_else(|| a.err("rules", &format!("must be an array, got {list}")))?;
        return list
            .iter()
            .enumerate()
            .map(|(i, r)| parse_rule(&format!("{what}: rules[{i}]"), r, with_to))
            .collect();
    }
    Ok(vec![parse_rule(what, v, with_to)?])
}

impl L4Filter {
    /// Builds from `{"rules": [...], "uplink": port}`.
    pub fn from_config(config: &Value) -> Result<L4Filter, String> {
        let a = Args::new("l4filter config", config, &["rules", "uplink"])?;
        let uplink = a.port("uplink")?;
        let mut t = Table::empty();
        for (i, r) in a.array("rules")?.into_iter().flatten().enumerate() {
            let (p, port, to) = parse_rule(&format!("l4filter config: rules[{i}]"), r, true)?;
            t.array_mut(p)[port as usize] = to.unwrap_or(NONE);
        }
        Ok(L4Filter {
            table: ArcSwap::from_pointee(t),
            uplink,
            writer: Mutex::new(()),
        })
    }

    /// Applies `f` to a copy of the table and swaps it in.
    fn update<R>(&self, f: impl FnOnce(&mut Table) -> Result<R, String>) -> Result<R, String> {
        let _w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut t = Table::clone(&self.table.load());
        let r = f(&mut t)?;
        self.table.store(Arc::new(t));
        Ok(r)
    }

    #[inline]
    fn verdict(&self, t: &Table, ingress: PortId, frame: &[u8]) -> Verdict {
        let tup = match parse_l4(frame) {
            Err(_) => return Verdict::Drop(DropReason::Malformed),
            Ok(None) => return Verdict::Drop(DropReason::NoMatch),
            Ok(Some(tup)) => tup,
        };
        let arr = t.array(tup.proto);
        let mut to = arr[tup.dst_port as usize];
        if to == NONE {
            to = arr[tup.src_port as usize];
        }
        if to == NONE {
            Verdict::Drop(DropReason::NoMatch)
        } else if to != ingress {
            Verdict::Port(to)
        } else {
            match self.uplink {
                Some(u) if u != ingress => Verdict::Port(u),
                _ => Verdict::Drop(DropReason::Hairpin),
            }
        }
    }
}

impl Logic for L4Filter {
    fn name(&self) -> &'static str {
        "l4filter"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let t = self.table.load();
        for (p, v) in pkts.iter().zip(verdicts.iter_mut()) {
            *v = self.verdict(&t, ingress, p.data());
        }
    }

    fn command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        let e = CommandError;
        match cmd {
            "list" => {
                Args::new("l4filter list", args, &[]).map_err(e)?;
                Ok(json!({"rules": self.table.load().rules(), "uplink": self.uplink}))
            }
            "add" => {
                let rules = parse_rules("l4filter add", args, true).map_err(e)?;
                let replaced = self
                    .update(|t| {
                        let mut replaced = 0;
                        for &(p, port, to) in &rules {
                            let slot = &mut t.array_mut(p)[port as usize];
                            replaced += (*slot != NONE) as usize;
                            *slot = to.unwrap_or(NONE);
                        }
                        Ok(replaced)
                    })
                    .map_err(e)?;
                Ok(json!({"added": rules.len() - replaced, "replaced": replaced}))
            }
            "remove" => {
                let rules = parse_rules("l4filter remove", args, false).map_err(e)?;
                self.update(|t| {
                    for &(p, port, _) in &rules {
                        if t.array(p)[port as usize] == NONE {
                            return Err(format!(
                                "l4filter remove: no rule for {} port {port}",
                                args::proto_name(p)
                            ));
                        }
                    }
                    for &(p, port, _) in &rules {
                        t.array_mut(p)[port as usize] = NONE;
                    }
                    Ok(())
                })
                .map_err(e)?;
                Ok(json!({"removed": rules.len()}))
            }
            _ => Err(e(format!("logic l4filter has no command {cmd:?}"))),
        }
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("list", "list the rules (proto, port, to) and the uplink"),
            (
                "add",
                "{proto, port, to} or {rules: [...]}: add or replace rules, applied at once",
            ),
            (
                "remove",
                "{proto, port} or {rules: [...]}: remove rules (all or none)",
            ),
        ]
    }

    fn port_removed(&self, port: PortId) {
        let _ = self.update(|t| {
            for a in [&mut t.udp, &mut t.tcp] {
                a.iter_mut().filter(|x| **x == port).for_each(|x| *x = NONE);
            }
            Ok(())
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth, random_frames, udp4, Batch};
    use proptest::prelude::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn tcp4(sport: u16, dport: u16) -> Vec<u8> {
        let mut f = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], sport, dport);
        // Turn the 60-byte UDP frame into a TCP one: protocol 6, 20-byte header.
        f[23] = proto::TCP;
        let mut ip = wire::ipv4::Packet::new_unchecked(&mut f[14..]);
        ip.fill_checksum();
        f[34 + 12] = 0x50;
        f
    }

    fn filter() -> L4Filter {
        L4Filter::from_config(&json!({"rules": [
            {"proto": "udp", "port": 5001, "to": 2},
            {"proto": "tcp", "port": 80, "to": 3},
        ]}))
        .unwrap()
    }

    #[test]
    fn both_directions_match() {
        let f = filter();
        // Client -> server on port 5001 and the server's reply from 5001.
        assert_eq!(
            classify1(
                &f,
                0,
                0,
                &udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 40000, 5001)
            ),
            Verdict::Port(2)
        );
        assert_eq!(
            classify1(
                &f,
                1,
                0,
                &udp4(B, A, [10, 0, 0, 2], [10, 0, 0, 1], 5001, 40000)
            ),
            Verdict::Port(2)
        );
        assert_eq!(classify1(&f, 0, 0, &tcp4(40000, 80)), Verdict::Port(3));
        assert_eq!(classify1(&f, 0, 0, &tcp4(80, 40000)), Verdict::Port(3));
        // Protocols have separate tables.
        assert_eq!(
            classify1(&f, 0, 0, &tcp4(40000, 5001)),
            Verdict::Drop(DropReason::NoMatch)
        );
    }

    #[test]
    fn unmatched_non_ip_and_malformed() {
        let f = filter();
        assert_eq!(
            classify1(&f, 0, 0, &udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2)),
            Verdict::Drop(DropReason::NoMatch)
        );
        assert_eq!(
            classify1(&f, 0, 0, &eth(A, B, 0x0806)),
            Verdict::Drop(DropReason::NoMatch)
        );
        let good = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 5001);
        assert_eq!(
            classify1(&f, 0, 0, &good[..40]),
            Verdict::Drop(DropReason::Malformed)
        );
        let mut bad_vlan = eth(A, B, 0x88a8);
        bad_vlan[16..18].copy_from_slice(&[0x88, 0xa8]);
        assert_eq!(
            classify1(&f, 0, 0, &bad_vlan),
            Verdict::Drop(DropReason::Malformed)
        );
    }

    #[test]
    fn middlebox_return_goes_to_uplink_or_is_a_hairpin() {
        let f = filter();
        let back = udp4(B, A, [10, 0, 0, 2], [10, 0, 0, 1], 40000, 5001);
        assert_eq!(
            classify1(&f, 2, 0, &back),
            Verdict::Drop(DropReason::Hairpin)
        );
        let f = L4Filter::from_config(
            &json!({"rules": [{"proto": "udp", "port": 5001, "to": 2}], "uplink": 0}),
        )
        .unwrap();
        assert_eq!(classify1(&f, 2, 0, &back), Verdict::Port(0));
        assert_eq!(classify1(&f, 0, 0, &back), Verdict::Port(2));
    }

    #[test]
    fn commands_swap_the_table() {
        let f = filter();
        let fr = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 53);
        assert_eq!(classify1(&f, 0, 0, &fr), Verdict::Drop(DropReason::NoMatch));
        let old = f.table.load_full();
        assert_eq!(
            f.command("add", &json!({"proto": "udp", "port": 53, "to": 4}))
                .unwrap(),
            json!({"added": 1, "replaced": 0})
        );
        assert_eq!(classify1(&f, 0, 0, &fr), Verdict::Port(4));
        assert_eq!(old.udp[53], NONE, "the old snapshot is never modified");
        let r = f.command("add", &json!({"rules": [{"proto": "udp", "port": 53, "to": 5}, {"proto": "tcp", "port": 22, "to": 5}]})).unwrap();
        assert_eq!(r, json!({"added": 1, "replaced": 1}));
        assert_eq!(classify1(&f, 0, 0, &fr), Verdict::Port(5));
        let listed = f.command("list", &Value::Null).unwrap();
        assert_eq!(listed["rules"].as_array().unwrap().len(), 4);
        assert_eq!(
            listed["rules"][0],
            json!({"proto": "tcp", "port": 22, "to": 5})
        );
        // Removal is all-or-nothing.
        let err = f
            .command(
                "remove",
                &json!({"rules": [{"proto": "udp", "port": 53}, {"proto": "udp", "port": 54}]}),
            )
            .unwrap_err();
        assert_eq!(err.0, "l4filter remove: no rule for udp port 54");
        assert_eq!(classify1(&f, 0, 0, &fr), Verdict::Port(5));
        f.command("remove", &json!({"proto": "udp", "port": 53}))
            .unwrap();
        assert_eq!(classify1(&f, 0, 0, &fr), Verdict::Drop(DropReason::NoMatch));
    }

    #[test]
    fn bad_rules_name_the_key() {
        let err = |v: Value| L4Filter::from_config(&v).err().unwrap();
        assert_eq!(
            err(json!({"rules": [{"proto": "sctp", "port": 1, "to": 1}]})),
            "l4filter config: rules[0]: key \"proto\" must be \"udp\" or \"tcp\", got \"sctp\""
        );
        assert_eq!(
            err(json!({"rules": [{"proto": "udp", "port": 70000, "to": 1}]})),
            "l4filter config: rules[0]: key \"port\" must be an integer in 0..=65535, got 70000"
        );
        assert_eq!(
            err(json!({"rules": [{"proto": "udp", "port": 1}]})),
            "l4filter config: rules[0]: missing key \"to\""
        );
        assert!(err(json!({"uplink": -1})).contains("key \"uplink\""));
        let f = filter();
        assert_eq!(
            f.command("add", &json!({"proto": "udp", "to": 1}))
                .unwrap_err()
                .0,
            "l4filter add: missing key \"port\""
        );
        assert!(f
            .command("add", &json!({"rules": 5}))
            .unwrap_err()
            .0
            .contains("key \"rules\" must be an array"));
    }

    #[test]
    fn port_removed_drops_its_rules() {
        let f = filter();
        f.port_removed(2);
        assert_eq!(
            f.command("list", &Value::Null).unwrap()["rules"],
            json!([{"proto": "tcp", "port": 80, "to": 3}])
        );
    }

    #[test]
    fn vlan_tagged_and_ipv6() {
        use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
        let f = filter();
        let mut spec = UdpFrameSpec::new(
            wire::MacAddr(A),
            wire::MacAddr(B),
            IpPair::V6("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap()),
            9,
            5001,
        );
        spec.vlan = Some(7);
        let mut b = vec![0u8; 90];
        write_udp_frame(&spec, &mut b, 90).unwrap();
        assert_eq!(classify1(&f, 0, 0, &b), Verdict::Port(2));
    }

    proptest! {
        #[test]
        fn never_panics(frames in random_frames(), ingress in 0u16..4) {
            let f = filter();
            let v = Batch::new(frames.clone()).classify(&f, ingress, 0);
            prop_assert_eq!(v.len(), frames.len());
        }
    }
}
