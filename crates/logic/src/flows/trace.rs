//! The `trace` command, turnoutd's `ofproto/trace`: one frame through the
//! tables by the classifier's own pipeline (`Flows::pipeline`, the code
//! `classify` runs on a cache miss), with a [`Hook`] that records the flow
//! hit in each table and the frame after its actions. Nothing is sent and
//! no counter moves (flows, tables, `copies`, cache).

use serde_json::{json, Value};

use super::{extract, Acc, Flows, Hook, Rule, Trace};
use crate::args::Args;
use crate::{DropReason, Logic as _, PortId, Verdict};

/// Largest frame `trace` takes (bytes).
pub const MAX_FRAME: usize = 65535;
/// Shortest: an Ethernet header (the fabric drops shorter frames as runts
/// before any logic sees them).
pub const MIN_FRAME: usize = 14;

/// Records each table's flow and the frame after its actions.
#[derive(Default)]
struct Recorder {
    steps: Vec<Value>,
}

impl Hook for Recorder {
    const COUNT: bool = false;

    fn hit(&mut self, r: &Rule, frame: &[u8], out: Option<Verdict>) {
        self.steps.push(json!({
            "table": r.table,
            "flow": r.text(),
            "cookie": r.cookie,
            "frame": hex(frame),
            "output": out.is_some(),
        }));
    }

    fn miss(&mut self, table: u8) {
        self.steps.push(json!({"table": table, "miss": true}));
    }
}

fn hex(b: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(b.len() * 2);
    for x in b {
        let _ = write!(s, "{x:02x}");
    }
    s
}

/// Parses a hex string (spaces, colons and a leading `0x` allowed).
fn unhex(s: &str) -> Result<Vec<u8>, String> {
    let s = s.trim();
    let s = s.strip_prefix("0x").unwrap_or(s);
    let digits: Vec<u8> = s
        .bytes()
        .filter(|c| !matches!(c, b' ' | b':' | b'\n' | b'\t'))
        .collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!("{} hex digits (an odd number)", digits.len()));
    }
    digits
        .chunks(2)
        .map(|p| {
            let d = |c: u8| (c as char).to_digit(16).map(|v| v as u8);
            match (d(p[0]), d(p[1])) {
                (Some(a), Some(b)) => Ok((a << 4) | b),
                _ => Err(format!(
                    "{:?} is not a hex byte",
                    String::from_utf8_lossy(p)
                )),
            }
        })
        .collect()
}

impl Flows {
    /// `trace {packet, in_port, ports?}`. `ports`: the switch's port ids
    /// (turnoutd adds them), to expand `flood` and to tell outputs to
    /// missing ports; without it a flood is reported as `"flood": true`.
    pub(super) fn trace_command(&self, what: &str, args: &Value) -> Result<Value, String> {
        let a = Args::new(what, args, &["packet", "in_port", "ports"])?;
        let text = a.required("packet", a.str("packet")?)?;
        let frame = unhex(text).map_err(|e| a.err("packet", &format!("is not hex: {e}")))?;
        if !(MIN_FRAME..=MAX_FRAME).contains(&frame.len()) {
            return Err(a.err(
                "packet",
                &format!(
                    "must be a frame of {MIN_FRAME}..={MAX_FRAME} bytes, got {}",
                    frame.len()
                ),
            ));
        }
        let in_port = a.required("in_port", a.port("in_port")?)?;
        let ports = match a.array("ports")? {
            None => None,
            Some(v) => Some(
                v.iter()
                    .map(|p| match p.as_u64() {
                        Some(n) if n <= crate::args::MAX_PORT => Ok(n as PortId),
                        _ => Err(a.err("ports", &format!("must hold port ids, got {p}"))),
                    })
                    .collect::<Result<Vec<PortId>, String>>()?,
            ),
        };
        Ok(self.trace(frame, in_port, ports.as_deref()))
    }

    /// Runs `frame` received on `in_port` through the pipeline.
    pub fn trace(&self, frame: Vec<u8>, in_port: PortId, ports: Option<&[PortId]>) -> Value {
        let snap = self.snap.load();
        let mut frames = vec![frame];
        let mut rec = Recorder::default();
        let mut acc = Acc::default();
        // (verdict, frame) of each copy sent on the way, then of the frame.
        let sent: Vec<(Verdict, Vec<u8>)> = fabric::with_frames(&mut frames, in_port, 0, |pkts| {
            let Some(mut p) = pkts.get_mut(0) else {
                return vec![(Verdict::Drop(DropReason::NoDestination), Vec::new())];
            };
            let k = extract(p.data(), in_port);
            let mut t = Trace::default();
            let v =
                self.pipeline::<_, false>(&snap, &mut p, in_port, k, &mut acc, 0, &mut t, &mut rec);
            let last = (v, p.data().to_vec());
            let (cp, cv) = pkts.copies();
            let mut all: Vec<(Verdict, Vec<u8>)> = cv
                .iter()
                .zip(cp)
                .map(|(v, c)| (*v, c.data().to_vec()))
                .collect();
            all.push(last);
            all
        });
        let mut outputs = Vec::new();
        let mut missing = Vec::new();
        let mut drop: Option<DropReason> = None;
        let mut flood = None;
        for (verdict, out_frame) in &sent {
            // What the fabric does with the verdict.
            let targets: Vec<PortId> = match *verdict {
                Verdict::Port(p) if p == in_port => {
                    drop = Some(DropReason::Hairpin);
                    vec![]
                }
                Verdict::Port(p) => vec![p],
                Verdict::Group(g) => self
                    .group_members(g)
                    .iter()
                    .copied()
                    .filter(|&p| p != in_port)
                    .collect(),
                Verdict::Flood => match ports {
                    Some(ps) => ps.iter().copied().filter(|&p| p != in_port).collect(),
                    None => {
                        flood = Some(json!({"frame": hex(out_frame)}));
                        vec![]
                    }
                },
                Verdict::Drop(r) => {
                    drop = Some(r);
                    vec![]
                }
            };
            for p in targets {
                if ports.is_some_and(|ps| !ps.contains(&p)) {
                    missing.push(p);
                } else {
                    outputs.push(json!({"port": p, "frame": hex(out_frame)}));
                }
            }
        }
        if !outputs.is_empty() || flood.is_some() {
            drop = None;
        } else if !missing.is_empty() && drop.is_none() {
            drop = Some(DropReason::NoPort);
        }
        let mut ans = json!({
            "in_port": in_port,
            "tables": rec.steps,
            "outputs": outputs,
            "drop": drop.map(|r| r.name()),
            "copies": sent.len() - 1,
        });
        if let Some(f) = flood {
            ans["flood"] = f;
        }
        if !missing.is_empty() {
            ans["no_port"] = json!(missing);
        }
        ans
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{udp4, Batch};
    use crate::Logic;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn flows(list: &[&str]) -> Flows {
        Flows::from_config(&json!({ "flows": list })).unwrap()
    }

    fn trace(f: &Flows, frame: &[u8], in_port: u16, ports: Option<&[u16]>) -> Value {
        let mut args = json!({"packet": hex(frame), "in_port": in_port});
        if let Some(p) = ports {
            args["ports"] = json!(p);
        }
        f.command("trace", &args).unwrap()
    }

    #[test]
    fn hex_round_trip_and_refusals() {
        assert_eq!(unhex("0x0a:FF 01").unwrap(), vec![0x0a, 0xff, 0x01]);
        assert!(unhex("abc").unwrap_err().contains("odd"));
        assert!(unhex("zz").unwrap_err().contains("not a hex byte"));
    }

    /// The trace of a two-table pipeline names both flows, and its output
    /// frame is the one `classify` forwards (same rewrites, checksums);
    /// no counter moves.
    #[test]
    fn trace_matches_classify_and_counts_nothing() {
        let f = flows(&[
            "table=0,priority=5,in_port=0,actions=mod_dl_src:02:aa:00:00:00:01,goto_table:3",
            "table=3,priority=9,udp,nw_dst=10.0.0.0/24,actions=mod_nw_dst:10.9.9.9,mod_tp_dst:99,dec_ttl,output:2",
        ]);
        let frame = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1000, 2000);
        let t = trace(&f, &frame, 0, Some(&[0, 1, 2]));
        let tables = t["tables"].as_array().unwrap();
        assert_eq!(tables.len(), 2, "{t}");
        assert_eq!(tables[0]["table"], 0);
        assert_eq!(tables[1]["table"], 3);
        assert!(tables[1]["flow"]
            .as_str()
            .unwrap()
            .contains("nw_dst=10.0.0.0/24"));
        assert_eq!(t["drop"], Value::Null);
        let mut b = Batch::new(vec![frame.clone()]);
        let v = b.classify(&f, 0, 0);
        assert_eq!(v[0], Verdict::Port(2));
        let outs = t["outputs"].as_array().unwrap();
        assert_eq!(outs.len(), 1);
        assert_eq!(outs[0]["port"], 2);
        assert_eq!(outs[0]["frame"], hex(&b.frames[0]));
        assert_ne!(b.frames[0], frame);
        // Only the classify above counted: one packet per flow.
        let d = f.dump(None);
        for fl in d["flows"].as_array().unwrap() {
            assert_eq!(fl["n_packets"], 1, "{d}");
        }
        assert_eq!(d["tables"][0]["lookups"], 1, "{d}");
    }

    #[test]
    fn miss_flood_group_hairpin_and_missing_ports() {
        let f = flows(&[
            "priority=1,in_port=0,actions=flood",
            "priority=1,in_port=1,actions=output:0,output:2,output:1",
            "priority=1,in_port=2,actions=in_port",
            "priority=1,in_port=3,actions=output:7",
            "priority=1,in_port=4,actions=output:1,goto_table:1",
            "table=1,priority=1,actions=output:2",
        ]);
        let frame = udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2);
        let ports: &[u16] = &[0, 1, 2, 3, 4];
        let t = trace(&f, &frame, 0, Some(ports));
        let outs: Vec<u64> = t["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["port"].as_u64().unwrap())
            .collect();
        assert_eq!(outs, vec![1, 2, 3, 4]);
        let t = trace(&f, &frame, 0, None);
        assert_eq!(t["outputs"], json!([]));
        assert!(t["flood"]["frame"].is_string(), "{t}");
        // A group never sends back to the ingress.
        let t = trace(&f, &frame, 1, Some(ports));
        let outs: Vec<u64> = t["outputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| o["port"].as_u64().unwrap())
            .collect();
        assert_eq!(outs, vec![0, 2]);
        assert_eq!(trace(&f, &frame, 2, Some(ports))["drop"], "hairpin");
        let t = trace(&f, &frame, 3, Some(ports));
        assert_eq!(
            (t["drop"].clone(), t["no_port"].clone()),
            (json!("no_port"), json!([7]))
        );
        // An output in table 0 and another in table 1: both, table 0's
        // as a copy.
        let t = trace(&f, &frame, 4, Some(ports));
        assert_eq!(t["outputs"][0]["port"], 1);
        assert_eq!(t["outputs"][1]["port"], 2);
        assert_eq!(t["copies"], 1);
        assert_eq!(t["tables"].as_array().unwrap().len(), 2);
        assert_eq!(f.dump(None)["copies"], 0, "trace counts nothing");
        let t = trace(&f, &frame, 5, Some(ports));
        assert_eq!(t["drop"], "no_match");
        assert_eq!(t["tables"], json!([{"table": 0, "miss": true}]));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 64, ..Default::default() })]

        /// On any frame, trace gives what `classify` does, through the
        /// classifier and through the exact-match cache (second pass): the
        /// same ports and the same bytes.
        #[test]
        fn trace_agrees_with_classify_and_its_cache(
            frames in crate::testutil::random_frames(),
            in_port in 0u16..3,
        ) {
            let f = flows(&[
                "priority=9,ip,nw_dst=0.0.0.0/1,actions=dec_ttl,mod_dl_src:02:aa:00:00:00:01,goto_table:1",
                "priority=8,vlan_tci=0x1000/0x1000,actions=strip_vlan,goto_table:2",
                "priority=7,udp,actions=mod_tp_dst:53,mod_nw_src:10.1.1.1,output:1,output:2",
                "priority=6,ipv6,actions=dec_ttl,flood",
                "priority=1,actions=output:0",
                "table=1,priority=5,tcp,actions=mod_tp_src:80,output:2",
                "table=1,priority=4,actions=mod_dl_dst:02:bb:00:00:00:01,goto_table:2",
                "table=2,priority=5,ip,actions=mod_nw_dst:192.168.1.1,output:1",
                "table=2,priority=4,arp,actions=all",
            ]);
            let ports: &[u16] = &[0, 1, 2];
            // One worker's cache for both passes: the second is served by it.
            let mut st = f.worker_state().unwrap();
            for _pass in 0..2 {
                let mut b = Batch::new(frames.clone());
                let v = b.classify_with(&f, Some(&mut *st), in_port, 0);
                for (i, fr) in frames.iter().enumerate() {
                    let t = f.trace(fr.clone(), in_port, Some(ports));
                    let want: Vec<u16> = match v[i] {
                        Verdict::Port(p) if p != in_port => vec![p],
                        Verdict::Group(g) => f.group_members(g).iter().copied().filter(|&p| p != in_port).collect(),
                        Verdict::Flood => ports.iter().copied().filter(|&p| p != in_port).collect(),
                        _ => vec![],
                    };
                    let got: Vec<u16> = t["outputs"].as_array().unwrap().iter().map(|o| o["port"].as_u64().unwrap() as u16).collect();
                    proptest::prop_assert_eq!(&got, &want, "{}", t);
                    for o in t["outputs"].as_array().unwrap() {
                        // (The frame as the view left it: a pop moves it
                        // within its buffer.)
                        let out = o["frame"].as_str().unwrap();
                        proptest::prop_assert_eq!(out, hex(&b.views[i]));
                    }
                }
            }
        }
    }

    #[test]
    fn bad_arguments_are_refused_with_the_key() {
        let f = flows(&[]);
        let e = |args: Value| f.command("trace", &args).unwrap_err().0;
        assert!(e(json!({"in_port": 0})).contains("missing key \"packet\""));
        assert!(e(json!({"packet": "00"})).contains("14..=65535 bytes"));
        assert!(e(json!({"packet": "0g".repeat(14), "in_port": 0})).contains("not hex"));
        let ok = "00".repeat(14);
        assert!(e(json!({"packet": ok})).contains("missing key \"in_port\""));
        assert!(e(json!({"packet": ok, "in_port": 70000})).contains("in_port"));
        assert!(e(json!({"packet": ok, "in_port": 0, "ports": ["a"]})).contains("ports"));
        assert!(e(json!({"packet": ok, "in_port": 0, "x": 1})).contains("unknown key"));
    }
}
