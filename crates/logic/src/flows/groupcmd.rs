//! Groups through the `flows` logic's commands (`logic.command` of the
//! JSON-RPC API, `turnout ctl logic cmd`): a group in ovs-ofctl's syntax,
//! `group_id=1,type=all,bucket=output:2,bucket=output:3`, run as the
//! OpenFlow group-mod it stands for ([`Flows::group_mod`]), so that the
//! checks, refusals and effects are those of an OpenFlow group-mod, with
//! the `OFPGMFC_*` name and a sentence in the error (docs/flows.md,
//! "Groups"). Ports are port ids, as in the flow texts.

use std::time::Instant;

use openflow::{
    et, gc, gmfc, gt, port, Bucket, GroupMod, OfpError, GROUP_ALL, GROUP_ANY, GROUP_MAX,
};
use serde_json::{json, Value};

use super::ofp::{actions_from_of, actions_to_of};
use super::text::{format_actions, parse_actions, tokens, uint};
use super::{Action, Flows};
use crate::args::Args;

/// A group as parsed from text.
#[derive(Debug, PartialEq)]
pub(super) struct GroupSpec {
    /// `group_id=N` (`group_id=all`: [`GROUP_ALL`]).
    pub(super) id: Option<u32>,
    /// `type=`: `OFPGT_*`.
    pub(super) kind: Option<u8>,
    /// One per `bucket=`.
    pub(super) buckets: Vec<TextBucket>,
}

/// One `bucket=[weight:W,][watch_port:P,]ACTIONS`.
#[derive(Debug, PartialEq, Default)]
pub(super) struct TextBucket {
    /// None when not given: 1 in a SELECT group (as ovs-ofctl has it, so
    /// that `type=select,bucket=output:1,bucket=output:2` shares the
    /// frames evenly), 0 in the others (the spec's value there).
    pub(super) weight: Option<u16>,
    /// A port id.
    pub(super) watch_port: Option<u16>,
    pub(super) actions: Vec<Action>,
}

fn type_name(kind: u8) -> &'static str {
    match kind {
        gt::ALL => "all",
        gt::SELECT => "select",
        gt::INDIRECT => "indirect",
        gt::FF => "ff",
        _ => "unknown",
    }
}

/// Parses `group_id=N,type=T,bucket=ACTIONS,bucket=ACTIONS...`: a bucket
/// takes the actions up to the next `bucket=` (`bucket=actions=...` as
/// ovs-ofctl prints it is accepted too; an empty bucket or `drop` has
/// no action).
pub(super) fn parse_group(text: &str) -> Result<GroupSpec, String> {
    let mut id = None;
    let mut kind = None;
    let mut buckets: Vec<Vec<&str>> = Vec::new();
    for t in tokens(text) {
        let (k, v) = t.split_once('=').unwrap_or((t, ""));
        match k.to_ascii_lowercase().as_str() {
            "bucket" => {
                let v = v
                    .strip_prefix("actions=")
                    .or_else(|| v.strip_prefix("action="))
                    .unwrap_or(v);
                buckets.push(if v.is_empty() { vec![] } else { vec![v] });
            }
            "group_id" if buckets.is_empty() => {
                if id.is_some() {
                    return Err("group_id given twice".into());
                }
                id = Some(if v.eq_ignore_ascii_case("all") {
                    GROUP_ALL
                } else {
                    uint("group_id", v, GROUP_MAX as u64)? as u32
                });
            }
            "type" if buckets.is_empty() => {
                kind = Some(match v.to_ascii_lowercase().as_str() {
                    "all" => gt::ALL,
                    "select" => gt::SELECT,
                    "indirect" => gt::INDIRECT,
                    "ff" | "fast_failover" => gt::FF,
                    _ => return Err(format!("type={v:?}: must be all, indirect, select or ff")),
                });
            }
            _ => match buckets.last_mut() {
                Some(b) => b.push(t),
                None => {
                    return Err(format!(
                        "{t:?}: expected group_id=N, type=all|indirect|select|ff or bucket=ACTIONS"
                    ))
                }
            },
        }
    }
    let buckets = buckets
        .iter()
        .enumerate()
        .map(|(i, b)| {
            // A bucket's parameters come first (weight, watch_port; with
            // `:` or `=`), then its actions (`actions=` optional).
            let mut tb = TextBucket::default();
            let mut acts: Vec<&str> = Vec::new();
            for t in b.iter().flat_map(|x| tokens(x)) {
                if let Some(a) = t
                    .strip_prefix("actions=")
                    .or_else(|| t.strip_prefix("action="))
                {
                    if !a.is_empty() {
                        acts.push(a);
                    }
                    continue;
                }
                let (k, v) = t
                    .split_once(':')
                    .or_else(|| t.split_once('='))
                    .unwrap_or((t, ""));
                match k {
                    "weight" if acts.is_empty() => {
                        tb.weight = Some(
                            uint("weight", v, 0xffff)
                                .map_err(|e| format!("bucket {}: {e}", i + 1))?
                                as u16,
                        )
                    }
                    "watch_port" if acts.is_empty() => {
                        tb.watch_port = Some(
                            uint("watch_port", v, 65534)
                                .map_err(|e| format!("bucket {}: {e}", i + 1))?
                                as u16,
                        )
                    }
                    _ => acts.push(t),
                }
            }
            // Prerequisites do not apply: buckets run on copies, and a
            // rewrite of a header a frame lacks does nothing.
            let (actions, goto) = parse_actions(&acts.join(","), 0, true)
                .map_err(|e| format!("bucket {}: {e}", i + 1))?;
            if goto.is_some() {
                return Err(format!(
                    "bucket {}: goto_table is an instruction of flows, not an action of buckets",
                    i + 1
                ));
            }
            if let Some(a) = actions.iter().find(|a| {
                matches!(
                    a,
                    Action::Meter(_)
                        | Action::WriteMetadata(..)
                        | Action::ClearActions
                        | Action::WriteActions(_)
                )
            }) {
                return Err(format!(
                    "bucket {}: {} is an instruction of flows, not an action of buckets",
                    i + 1,
                    format_actions(std::slice::from_ref(a), None)
                ));
            }
            tb.actions = actions;
            Ok(tb)
        })
        .collect::<Result<Vec<_>, String>>()?;
    Ok(GroupSpec { id, kind, buckets })
}

/// The group in the syntax [`parse_group`] reads (ports as port ids).
fn format_group(id: u32, kind: u8, buckets: &[Bucket]) -> String {
    let mut s = format!("group_id={id},type={}", type_name(kind));
    for b in buckets {
        // Buckets were converted from these actions when installed.
        let acts = actions_from_of(&b.actions).unwrap_or_default();
        s += ",bucket=";
        if kind == gt::SELECT {
            s += &format!("weight:{},", b.weight);
        }
        if kind == gt::SELECT || kind == gt::FF {
            if let Some(p) = super::ofp::port_id(b.watch_port) {
                s += &format!("watch_port:{p},");
            }
        }
        s += &format_actions(&acts, None);
    }
    s
}

/// What a refused group-mod means, for the command's error.
fn explain(e: OfpError, g: &GroupMod) -> String {
    let id = g.group_id;
    let why = match (e.kind, e.code) {
        (et::GROUP_MOD_FAILED, gmfc::GROUP_EXISTS) => format!("group {id} already exists"),
        (et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP) => format!("group {id} does not exist"),
        (et::GROUP_MOD_FAILED, gmfc::INVALID_GROUP) => {
            format!("group id {id} is out of range (0..={GROUP_MAX})")
        }
        (et::GROUP_MOD_FAILED, gmfc::BAD_TYPE) => format!(
            "type {} is not supported (all, indirect, select, ff)",
            type_name(g.kind)
        ),
        (et::GROUP_MOD_FAILED, gmfc::BAD_WATCH) => "a bucket's watch_port is not a port".into(),
        (et::GROUP_MOD_FAILED, gmfc::BAD_BUCKET)
            if g.kind == gt::INDIRECT && g.buckets.len() != 1 =>
        {
            format!(
                "an indirect group has exactly one bucket, not {}",
                g.buckets.len()
            )
        }
        (et::GROUP_MOD_FAILED, gmfc::BAD_BUCKET) => "a bad bucket".into(),
        (et::GROUP_MOD_FAILED, gmfc::CHAINING_UNSUPPORTED) => {
            "a bucket cannot use a group (chained groups, and so loops, are not supported)".into()
        }
        (et::GROUP_MOD_FAILED, gmfc::OUT_OF_BUCKETS) => {
            format!("more than {} buckets", super::MAX_BUCKETS)
        }
        (et::GROUP_MOD_FAILED, gmfc::OUT_OF_GROUPS) => format!(
            "no room: at most {} groups and {} distinct sets of outputs",
            super::MAX_OF_GROUPS,
            super::MAX_GROUPS
        ),
        (et::BAD_ACTION, openflow::bac::BAD_OUT_PORT) => {
            "a bucket cannot output to normal (the learning bridge is for flows)".into()
        }
        _ => "refused".into(),
    };
    let name = e.name();
    format!("{why} ({name})")
}

impl Flows {
    /// The `add_group`, `mod_group`, `del_groups` and `dump_groups`
    /// commands (`args`: `{"group": text}`).
    pub(super) fn group_command(
        &self,
        what: &str,
        cmd: &str,
        args: &Value,
    ) -> Result<Value, String> {
        let a = Args::new(what, args, &["group"])?;
        let text = match a.get("group") {
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| a.err("group", "must be a string in ovs-ofctl group syntax"))?,
            ),
            None => None,
        };
        let bad = |e: String| format!("{what}: group {:?}: {e}", text.unwrap_or(""));
        let spec = match text {
            Some(t) => parse_group(t).map_err(bad)?,
            None if matches!(cmd, "del_groups" | "dump_groups") => GroupSpec {
                id: None,
                kind: None,
                buckets: Vec::new(),
            },
            None => {
                return Err(a.err(
                    "group",
                    "is required (group_id=N,type=all,bucket=output:P,...)",
                ))
            }
        };
        if matches!(cmd, "del_groups" | "dump_groups") {
            if spec.kind.is_some() || !spec.buckets.is_empty() {
                return Err(bad("takes group_id only".into()));
            }
            let id = spec.id.unwrap_or(GROUP_ALL);
            if cmd == "dump_groups" {
                return self.groups_json(id).map_err(|e| {
                    bad(explain(
                        e,
                        &GroupMod {
                            command: gc::DELETE,
                            kind: gt::ALL,
                            group_id: id,
                            buckets: Vec::new(),
                        },
                    ))
                });
            }
            let g = GroupMod {
                command: gc::DELETE,
                kind: gt::ALL,
                group_id: id,
                buckets: Vec::new(),
            };
            let (groups, flows) = self
                .group_mod_counted(&g)
                .map_err(|e| bad(explain(e, &g)))?;
            return Ok(json!({"deleted": groups, "flows_deleted": flows}));
        }
        let id = spec.id.ok_or_else(|| bad("needs group_id=N".into()))?;
        if id == GROUP_ALL {
            return Err(bad(
                "group_id=all only selects groups to delete or dump".into()
            ));
        }
        let kind = spec
            .kind
            .ok_or_else(|| bad("needs type=all, indirect, select or ff".into()))?;
        let g = GroupMod {
            command: if cmd == "add_group" {
                gc::ADD
            } else {
                gc::MODIFY
            },
            kind,
            group_id: id,
            buckets: spec
                .buckets
                .iter()
                .map(|b| Bucket {
                    weight: b.weight.unwrap_or(u16::from(kind == gt::SELECT)),
                    watch_port: b.watch_port.map_or(port::ANY, super::ofp::of_port),
                    watch_group: GROUP_ANY,
                    actions: actions_to_of(&b.actions, None, None),
                })
                .collect(),
        };
        let (_, flows) = self
            .group_mod_counted(&g)
            .map_err(|e| bad(explain(e, &g)))?;
        Ok(if cmd == "add_group" {
            json!({"added": 1})
        } else {
            json!({"modified": 1, "flows_recompiled": flows})
        })
    }

    /// Groups (`GROUP_ALL`: every one), by id, each with its text and
    /// statistics, taken under one writer lock (desc and stats agree).
    fn groups_json(&self, id: u32) -> Result<Value, OfpError> {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if id != GROUP_ALL && !w.of_groups.contains_key(&id) {
            return Err(OfpError::new(et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP));
        }
        let snap = self.snap.load();
        let now = Instant::now();
        let groups: Vec<Value> = w
            .of_groups
            .iter()
            .filter(|(g, _)| id == GROUP_ALL || **g == id)
            .map(|(&gid, g)| {
                let st = g.stats(gid, &snap, now);
                let d = st.duration_sec as f64 + st.duration_nsec as f64 / 1e9;
                json!({
                    "group": format_group(gid, g.kind(), g.buckets()),
                    "group_id": gid,
                    "type": type_name(g.kind()),
                    "ref_count": st.ref_count,
                    "n_packets": st.packet_count,
                    "n_bytes": st.byte_count,
                    "duration": (d * 1000.0).round() / 1000.0,
                    "buckets": st.buckets.iter()
                        .map(|(p, b)| json!({"n_packets": p, "n_bytes": b}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        Ok(json!({ "groups": groups }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth};
    use crate::{Logic, Verdict};

    fn cmd(f: &Flows, c: &str, group: &str) -> Result<Value, String> {
        f.command(c, &json!({ "group": group })).map_err(|e| e.0)
    }

    #[test]
    fn parse_reads_ovs_ofctl_syntax() {
        let g = parse_group(
            "group_id=7,type=all,bucket=output:1,bucket=actions=output:2,in_port,bucket=",
        )
        .unwrap();
        assert_eq!(g.id, Some(7));
        assert_eq!(g.kind, Some(gt::ALL));
        assert_eq!(
            g.buckets
                .iter()
                .map(|b| b.actions.clone())
                .collect::<Vec<_>>(),
            vec![
                vec![Action::Output(1)],
                vec![Action::Output(2), Action::InPort],
                vec![]
            ]
        );
        let s = parse_group("group_id=2,type=select,bucket=weight:2,watch_port:3,actions=output:1,bucket=weight=1,output:2").unwrap();
        assert_eq!(
            s.buckets,
            vec![
                TextBucket {
                    weight: Some(2),
                    watch_port: Some(3),
                    actions: vec![Action::Output(1)]
                },
                TextBucket {
                    weight: Some(1),
                    watch_port: None,
                    actions: vec![Action::Output(2)]
                },
            ]
        );
        assert_eq!(parse_group("group_id=all").unwrap().id, Some(GROUP_ALL));
        for (t, want) in [
            ("group_id=x", "group_id"),
            ("group_id=1,type=weird", "must be all, indirect"),
            ("group_id=1,priority=3", "expected group_id=N"),
            (
                "group_id=1,type=all,bucket=output:1,goto_table:2",
                "goto_table",
            ),
            (
                "group_id=1,type=all,bucket=resubmit:1",
                "bucket 1: unknown or unsupported action",
            ),
            ("group_id=1,group_id=2", "twice"),
        ] {
            let e = parse_group(t).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
        }
    }

    #[test]
    fn a_select_bucket_without_a_weight_weighs_one() {
        let f = Flows::from_config(&json!(null)).unwrap();
        for g in [
            "group_id=1,type=select,bucket=output:1,bucket=weight:3,output:2",
            "group_id=2,type=all,bucket=output:1,bucket=output:2",
        ] {
            assert_eq!(cmd(&f, "add_group", g).unwrap(), json!({"added": 1}));
        }
        let weights = |id: u32| -> Vec<u16> {
            let d = f.group_desc();
            let (_, _, b) = d.iter().find(|(_, i, _)| *i == id).unwrap();
            b.iter().map(|b| b.weight).collect()
        };
        assert_eq!(weights(1), [1, 3]);
        assert_eq!(weights(2), [0, 0]);
    }

    #[test]
    fn commands_run_group_mods_with_their_refusals() {
        let f = Flows::from_config(&json!(null)).unwrap();
        assert_eq!(
            cmd(
                &f,
                "add_group",
                "group_id=1,type=all,bucket=output:1,bucket=output:2"
            )
            .unwrap(),
            json!({"added": 1})
        );
        for (c, t, want) in [
            (
                "add_group",
                "group_id=1,type=all,bucket=output:1",
                "already exists (OFPGMFC_GROUP_EXISTS)",
            ),
            (
                "mod_group",
                "group_id=2,type=all,bucket=output:1",
                "group 2 does not exist (OFPGMFC_UNKNOWN_GROUP)",
            ),
            (
                "add_group",
                "group_id=3,type=indirect,bucket=output:1,bucket=output:2",
                "exactly one bucket",
            ),
            ("add_group", "group_id=3,type=all,bucket=group:1", "loops"),
            (
                "add_group",
                "group_id=3,type=all,bucket=normal",
                "OFPBAC_BAD_OUT_PORT",
            ),
            (
                "add_group",
                "group_id=3,type=all,bucket=meter:1,output:1",
                "instruction of flows",
            ),
            ("add_group", "type=all,bucket=output:1", "needs group_id"),
            ("add_group", "group_id=3,bucket=output:1", "needs type"),
            ("add_group", "group_id=all,type=all", "only selects"),
            ("del_groups", "group_id=1,type=all", "group_id only"),
            ("dump_groups", "group_id=9", "does not exist"),
        ] {
            let e = cmd(&f, c, t).unwrap_err();
            assert!(e.contains(want) && e.contains(t), "{c} {t}: {e}");
        }
        assert!(f.command("add_group", &json!({})).is_err());
        // A flow added through the API uses it.
        f.command("add", &json!({"flow": "in_port=0,actions=group:1"}))
            .unwrap();
        let frame = eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 0x0800);
        let Verdict::Group(g) = classify1(&f, 0, 0, &frame) else {
            panic!("a group verdict")
        };
        assert_eq!(f.group_members(g), &[1, 2]);
        let d = f.command("dump_groups", &json!({})).unwrap();
        let g1 = &d["groups"][0];
        assert_eq!(
            g1["group"],
            "group_id=1,type=all,bucket=output:1,bucket=output:2"
        );
        assert_eq!(
            (g1["ref_count"].as_u64(), g1["n_packets"].as_u64()),
            (Some(1), Some(1))
        );
        assert_eq!(g1["buckets"].as_array().unwrap().len(), 2);
        // The dumped text is accepted back, and the OpenFlow desc agrees.
        let text = g1["group"].as_str().unwrap().to_string();
        let f2 = Flows::from_config(&json!(null)).unwrap();
        cmd(&f2, "add_group", &text).unwrap();
        assert_eq!(f2.group_desc(), f.group_desc());
        // A group used after a rewrite: the output before gets the frame
        // as it was, the group's bucket the rewritten one; a modify follows.
        cmd(&f, "add_group", "group_id=2,type=all").unwrap();
        f.command(
            "add",
            &json!({"flow": "in_port=2,actions=output:0,mod_dl_src:02:00:00:00:00:09,group:2"}),
        )
        .unwrap();
        assert_eq!(classify1(&f, 2, 0, &frame), Verdict::Port(0));
        cmd(&f, "mod_group", "group_id=2,type=all,bucket=output:1").unwrap();
        let mut b = crate::testutil::Batch::new(vec![frame.clone()]);
        assert_eq!(b.classify(&f, 2, 0), vec![Verdict::Port(1)]);
        assert_eq!(b.copies, vec![(Verdict::Port(0), frame.clone())]);
        assert_eq!(&b.views[0][6..12], &[2, 0, 0, 0, 0, 9]);
        let m = cmd(&f, "mod_group", "group_id=1,type=indirect,bucket=output:2").unwrap();
        assert_eq!(m, json!({"modified": 1, "flows_recompiled": 1}));
        assert_eq!(classify1(&f, 0, 0, &frame), Verdict::Port(2));
        // Deleting it deletes the flow using it.
        assert_eq!(
            f.command("del_groups", &json!({})).unwrap(),
            json!({"deleted": 2, "flows_deleted": 2})
        );
        assert_eq!(f.flow_count(), 0);
        assert_eq!(
            f.command("dump_groups", &json!(null)).unwrap(),
            json!({"groups": []})
        );
        assert_eq!(
            cmd(&f, "del_groups", "group_id=5").unwrap(),
            json!({"deleted": 0, "flows_deleted": 0})
        );
    }
}
