//! `patch`: a static port-to-port cross-connect (the p2p baseline).
//!
//! Configuration: `{"pairs": [[0, 1], [2, 3]], "bidirectional": true}`.
//! Each pair `[a, b]` sends everything received on `a` to `b` (and, when
//! bidirectional, the default, `b` to `a`). Frames received on a port with
//! no mapping are dropped as `NoDestination`. A later pair overrides an
//! earlier mapping of the same ingress.
//!
//! State: one `AtomicU16` per possible ingress port (128 KiB), read once per
//! batch (every frame of a batch has the same ingress). Commands store into
//! it directly; a batch sees either the old or the new mapping.

use std::sync::atomic::{AtomicU16, Ordering};

use serde_json::{json, Value};

use crate::args::Args;
use crate::{CommandError, Ctx, DropReason, Logic, LogicError, Pkts, PortId, Verdict};

const NONE: u16 = u16::MAX;

/// The patch logic.
pub struct Patch {
    to: Box<[AtomicU16]>,
}

/// Table constructor.
pub fn new(config: &Value) -> Result<Box<dyn Logic>, LogicError> {
    Ok(Box::new(
        Patch::from_config(config).map_err(LogicError::Config)?,
    ))
}

impl Patch {
    /// An empty cross-connect.
    pub fn empty() -> Patch {
        Patch {
            to: (0..=u16::MAX as usize)
                .map(|_| AtomicU16::new(NONE))
                .collect(),
        }
    }

    /// Builds from `{"pairs": [[a, b], ...], "bidirectional": bool}`.
    pub fn from_config(config: &Value) -> Result<Patch, String> {
        let a = Args::new("patch config", config, &["pairs", "bidirectional"])?;
        let bidir = a.bool("bidirectional")?.unwrap_or(true);
        let p = Patch::empty();
        for (i, pair) in a.array("pairs")?.into_iter().flatten().enumerate() {
            let (from, to) = parse_pair(pair)
                .map_err(|m| format!("patch config: key \"pairs\": entry {i}: {m}"))?;
            p.set(from, to, bidir);
        }
        Ok(p)
    }

    /// Maps `from` to `to` (and back if `bidir`).
    pub fn set(&self, from: PortId, to: PortId, bidir: bool) {
        self.to[from as usize].store(to, Ordering::Release);
        if bidir {
            self.to[to as usize].store(from, Ordering::Release);
        }
    }

    /// The destination of frames received on `from`.
    pub fn get(&self, from: PortId) -> Option<PortId> {
        let t = self.to[from as usize].load(Ordering::Acquire);
        (t != NONE).then_some(t)
    }

    fn pairs(&self) -> Vec<Value> {
        self.to
            .iter()
            .enumerate()
            .filter_map(|(i, t)| {
                let t = t.load(Ordering::Acquire);
                (t != NONE).then(|| json!({"from": i, "to": t}))
            })
            .collect()
    }
}

fn parse_pair(v: &Value) -> Result<(PortId, PortId), String> {
    let bad = || format!("expected [from, to] with ports in 0..=65534, got {v}");
    let arr = v.as_array().ok_or_else(bad)?;
    if arr.len() != 2 {
        return Err(bad());
    }
    let p = |x: &Value| {
        x.as_u64()
            .filter(|&n| n <= crate::args::MAX_PORT)
            .map(|n| n as PortId)
            .ok_or_else(bad)
    };
    let (a, b) = (p(&arr[0])?, p(&arr[1])?);
    if a == b {
        return Err(format!("port {a} cannot be patched to itself"));
    }
    Ok((a, b))
}

impl Logic for Patch {
    fn name(&self) -> &'static str {
        "patch"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, _pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let v = match self.get(ingress) {
            Some(to) => Verdict::Port(to),
            None => Verdict::Drop(DropReason::NoDestination),
        };
        verdicts.fill(v);
    }

    fn command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        let e = CommandError;
        match cmd {
            "show" => {
                Args::new("patch show", args, &[]).map_err(e)?;
                Ok(json!({"pairs": self.pairs()}))
            }
            "set" => {
                let a =
                    Args::new("patch set", args, &["from", "to", "bidirectional"]).map_err(e)?;
                let from = a
                    .port("from")
                    .and_then(|v| a.required("from", v))
                    .map_err(e)?;
                let to = a.port("to").and_then(|v| a.required("to", v)).map_err(e)?;
                if from == to {
                    return Err(e(format!(
                        "patch set: port {from} cannot be patched to itself"
                    )));
                }
                self.set(
                    from,
                    to,
                    a.bool("bidirectional").map_err(e)?.unwrap_or(true),
                );
                Ok(json!({"pairs": self.pairs()}))
            }
            "remove" => {
                let a = Args::new("patch remove", args, &["port", "bidirectional"]).map_err(e)?;
                let port = a
                    .port("port")
                    .and_then(|v| a.required("port", v))
                    .map_err(e)?;
                let bidir = a.bool("bidirectional").map_err(e)?.unwrap_or(true);
                let Some(to) = self.get(port) else {
                    return Err(e(format!("patch remove: port {port} is not patched")));
                };
                self.to[port as usize].store(NONE, Ordering::Release);
                if bidir {
                    // Only if the reverse direction still points back here.
                    let _ = self.to[to as usize].compare_exchange(
                        port,
                        NONE,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                Ok(json!({"pairs": self.pairs()}))
            }
            _ => Err(e(format!("logic patch has no command {cmd:?}"))),
        }
    }

    fn commands(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("show", "list the port pairs"),
            (
                "set",
                "{from, to, bidirectional=true}: send frames from `from` to `to`",
            ),
            (
                "remove",
                "{port, bidirectional=true}: unmap port (and its peer's mapping back to it)",
            ),
        ]
    }

    fn port_removed(&self, port: PortId) {
        self.to[port as usize].store(NONE, Ordering::Release);
        for t in self.to.iter() {
            let _ = t.compare_exchange(port, NONE, Ordering::AcqRel, Ordering::Acquire);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, random_frames, udp4, Batch};
    use proptest::prelude::*;

    const A: [u8; 6] = [2, 0, 0, 0, 0, 1];
    const B: [u8; 6] = [2, 0, 0, 0, 0, 2];

    fn frame() -> Vec<u8> {
        udp4(A, B, [10, 0, 0, 1], [10, 0, 0, 2], 1, 2)
    }

    #[test]
    fn pairs_both_ways_and_unmapped() {
        let p = Patch::from_config(&json!({"pairs": [[0, 1], [2, 5]]})).unwrap();
        assert_eq!(classify1(&p, 0, 0, &frame()), Verdict::Port(1));
        assert_eq!(classify1(&p, 1, 0, &frame()), Verdict::Port(0));
        assert_eq!(classify1(&p, 5, 0, &frame()), Verdict::Port(2));
        assert_eq!(
            classify1(&p, 3, 0, &frame()),
            Verdict::Drop(DropReason::NoDestination)
        );
        let v = Batch::new(vec![frame(); 5]).classify(&p, 2, 0);
        assert_eq!(v, vec![Verdict::Port(5); 5]);
    }

    #[test]
    fn one_way() {
        let p = Patch::from_config(&json!({"pairs": [[0, 1]], "bidirectional": false})).unwrap();
        assert_eq!(classify1(&p, 0, 0, &frame()), Verdict::Port(1));
        assert_eq!(
            classify1(&p, 1, 0, &frame()),
            Verdict::Drop(DropReason::NoDestination)
        );
    }

    #[test]
    fn bad_config() {
        let err = |v: Value| Patch::from_config(&v).err().unwrap();
        assert_eq!(
            err(json!({"pairs": [[0, 0]]})),
            "patch config: key \"pairs\": entry 0: port 0 cannot be patched to itself"
        );
        assert!(err(json!({"pairs": [[0, 65535]]})).contains("entry 0: expected [from, to]"));
        assert!(err(json!({"pairs": [[0, 1], [1]]})).contains("entry 1"));
        assert!(err(json!({"pairs": 3})).contains("key \"pairs\" must be an array"));
        assert!(err(json!({"pair": []})).contains("unknown key \"pair\""));
        assert!(err(json!({"bidirectional": "yes"}))
            .contains("key \"bidirectional\" must be true or false"));
    }

    #[test]
    fn commands_set_remove_show() {
        let p = Patch::empty();
        p.command("set", &json!({"from": 3, "to": 4})).unwrap();
        assert_eq!(classify1(&p, 4, 0, &frame()), Verdict::Port(3));
        let shown = p.command("show", &Value::Null).unwrap();
        assert_eq!(
            shown,
            json!({"pairs": [{"from": 3, "to": 4}, {"from": 4, "to": 3}]})
        );
        p.command("remove", &json!({"port": 3})).unwrap();
        assert_eq!(
            classify1(&p, 3, 0, &frame()),
            Verdict::Drop(DropReason::NoDestination)
        );
        assert_eq!(
            classify1(&p, 4, 0, &frame()),
            Verdict::Drop(DropReason::NoDestination)
        );
        assert_eq!(
            p.command("remove", &json!({"port": 3})).unwrap_err().0,
            "patch remove: port 3 is not patched"
        );
        assert_eq!(
            p.command("set", &json!({"from": 3})).unwrap_err().0,
            "patch set: missing key \"to\""
        );
        assert!(p
            .command("set", &json!({"from": 3, "to": "x"}))
            .unwrap_err()
            .0
            .contains("key \"to\""));
    }

    #[test]
    fn port_removed_forgets_both_directions() {
        let p = Patch::from_config(&json!({"pairs": [[0, 1], [2, 1]], "bidirectional": false}))
            .unwrap();
        p.port_removed(1);
        assert_eq!(p.get(0), None);
        assert_eq!(p.get(2), None);
    }

    proptest! {
        #[test]
        fn never_panics(frames in random_frames(), ingress in 0u16..4) {
            let p = Patch::from_config(&json!({"pairs": [[0, 1]]})).unwrap();
            let v = Batch::new(frames).classify(&p, ingress, 0);
            prop_assert!(v.iter().all(|v| matches!(v, Verdict::Port(_) | Verdict::Drop(DropReason::NoDestination))));
        }
    }
}
