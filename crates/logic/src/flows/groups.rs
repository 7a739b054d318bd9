//! The OpenFlow group table: groups of type ALL (every bucket gets a copy),
//! INDIRECT (one bucket), SELECT (one bucket per packet, chosen by a
//! hash of the packet's addresses and ports among the live buckets, in
//! proportion to their weights) and FF, fast failover (the first live
//! bucket; a bucket is live when its watch port's link is up, or when it
//! watches no port), programmed with `OFPT_GROUP_MOD` (and the
//! same group-mods from the logic's group commands, groupcmd.rs) and used
//! by flows with the `group:N` action (docs/flows.md, "Groups").
//!
//! A flow's `group:N` is compiled into the group's buckets
//! (`Writer::compile` in actions.rs): the outputs of buckets that only output
//! join the flow's own (one `Verdict::Group` of the fabric for them all),
//! a bucket with header changes runs on a copy of the frame
//! (`Action::Bucket`, exec.rs), a SELECT or fast-failover group becomes a
//! block of its buckets (`Action::Select`, `Action::Failover`). A group-mod that changes or deletes a group
//! recompiles or deletes the flows that use it, in one snapshot swap. The
//! data path has no group table of its own: group counters are those of
//! the flows that reference the group.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use openflow::{
    et, gc, gmfc, gt, port, Bucket, GroupMod, GroupStats, OfpError, GROUP_ALL, GROUP_ANY, GROUP_MAX,
};

use super::ofp::{actions_from_of, port_id};
use super::{Action, Flows, Reason, Rule, Snapshot};

/// Most groups in the table.
pub const MAX_OF_GROUPS: usize = 1024;
/// Most buckets in a group.
pub const MAX_BUCKETS: usize = 64;

/// One bucket as the flows' compiler takes it.
#[derive(Clone, Debug)]
pub(super) struct GBucket {
    /// SELECT: its share.
    pub(super) weight: u16,
    /// SELECT and FF: the port id whose link must be up for it to be
    /// chosen (`u16::MAX`: none).
    pub(super) watch: u16,
    /// Its actions, as the logic's.
    pub(super) acts: Vec<Action>,
}

/// One group.
pub(super) struct OfGroup {
    kind: u8,
    /// The buckets, for the compiler.
    compiled: Vec<GBucket>,
    /// As given (group desc).
    buckets: Vec<Bucket>,
    installed: Instant,
}

impl OfGroup {
    /// Its statistics at `now`: those of the flows of `snap` using it
    /// (the buckets of a SELECT group, of which each packet goes to one,
    /// are not counted apart: all ones, the spec's "unavailable").
    pub(super) fn stats(&self, gid: u32, snap: &Snapshot, now: Instant) -> GroupStats {
        let us = users(snap, &HashSet::from([gid]));
        let (p, b) = us.iter().fold((0, 0), |(p, b), r| {
            let (rp, rb) = r.stats.get();
            (p + rp, b + rb)
        });
        let d = now.saturating_duration_since(self.installed);
        let per_bucket = if self.kind == gt::SELECT || self.kind == gt::FF {
            (u64::MAX, u64::MAX)
        } else {
            (p, b)
        };
        GroupStats {
            group_id: gid,
            ref_count: us.len() as u32,
            packet_count: p,
            byte_count: b,
            duration_sec: d.as_secs() as u32,
            duration_nsec: d.subsec_nanos(),
            buckets: vec![per_bucket; self.buckets.len()],
        }
    }

    /// `OFPGT_*`.
    pub(super) fn kind(&self) -> u8 {
        self.kind
    }

    /// A SELECT group.
    pub(super) fn is_select(&self) -> bool {
        self.kind == gt::SELECT
    }

    /// A fast-failover group.
    pub(super) fn is_ff(&self) -> bool {
        self.kind == gt::FF
    }

    /// The buckets as given.
    pub(super) fn buckets(&self) -> &[Bucket] {
        &self.buckets
    }

    /// The buckets for the compiler.
    pub(super) fn compiled_buckets(&self) -> &[GBucket] {
        &self.compiled
    }
}

/// Flows of `snap` whose actions name a group of `ids`.
fn users(snap: &Snapshot, ids: &HashSet<u32>) -> Vec<Arc<Rule>> {
    snap.tables
        .iter()
        .flat_map(|t| t.rules())
        .filter(|r| {
            r.shown
                .iter()
                .any(|a| matches!(a, Action::OfGroup(g) if ids.contains(g)))
        })
        .cloned()
        .collect()
}

impl Flows {
    /// Runs an OpenFlow 1.3 group-mod (section 6.7): one snapshot swap, or
    /// nothing changed and the spec's error.
    pub fn group_mod(&self, g: &GroupMod) -> Result<(), OfpError> {
        self.group_mod_counted(g).map(|_| ())
    }

    /// [`Flows::group_mod`], answering (groups added, modified or deleted;
    /// flows recompiled or deleted with them).
    pub(super) fn group_mod_counted(&self, g: &GroupMod) -> Result<(usize, usize), OfpError> {
        let gmf = |c| OfpError::new(et::GROUP_MOD_FAILED, c);
        if g.command > gc::DELETE {
            return Err(gmf(gmfc::BAD_COMMAND));
        }
        if g.command == gc::DELETE {
            if g.group_id > GROUP_MAX && g.group_id != GROUP_ALL {
                return Err(gmf(gmfc::INVALID_GROUP));
            }
            return Ok(self.delete_groups(g.group_id));
        }
        if g.group_id > GROUP_MAX {
            return Err(gmf(gmfc::INVALID_GROUP));
        }
        match g.kind {
            gt::ALL | gt::SELECT | gt::FF => {}
            gt::INDIRECT if g.buckets.len() == 1 => {}
            gt::INDIRECT => return Err(gmf(gmfc::BAD_BUCKET)),
            _ => return Err(gmf(gmfc::BAD_TYPE)),
        }
        if g.buckets.len() > MAX_BUCKETS {
            return Err(gmf(gmfc::OUT_OF_BUCKETS));
        }
        let mut compiled = Vec::with_capacity(g.buckets.len());
        for b in &g.buckets {
            if b.actions
                .iter()
                .any(|a| matches!(a, openflow::Action::Group(_)))
            {
                return Err(gmf(gmfc::CHAINING_UNSUPPORTED));
            }
            let acts = actions_from_of(&b.actions)?;
            // The learning bridge: from flows only, not from buckets.
            if acts.contains(&Action::Normal) {
                return Err(OfpError::new(et::BAD_ACTION, openflow::bac::BAD_OUT_PORT));
            }
            let watch = if g.kind != gt::SELECT && g.kind != gt::FF {
                // Watches mean something for SELECT and fast failover
                // only (weights for SELECT only).
                u16::MAX
            } else if b.watch_group != GROUP_ANY {
                // A bucket watching a group: chained groups.
                return Err(gmf(gmfc::WATCH_UNSUPPORTED));
            } else if b.watch_port == port::ANY {
                u16::MAX
            } else {
                port_id(b.watch_port).ok_or(gmf(gmfc::BAD_WATCH))?
            };
            compiled.push(GBucket {
                weight: b.weight,
                watch,
                acts,
            });
        }
        let new = OfGroup {
            kind: g.kind,
            compiled,
            buckets: g.buckets.clone(),
            installed: Instant::now(),
        };
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let exists = w.of_groups.contains_key(&g.group_id);
        if g.command == gc::ADD {
            if exists {
                return Err(gmf(gmfc::GROUP_EXISTS));
            }
            if w.of_groups.len() >= MAX_OF_GROUPS {
                return Err(gmf(gmfc::OUT_OF_GROUPS));
            }
            // No flow can use a group before it exists: nothing to recompile.
            w.of_groups.insert(g.group_id, new);
            return Ok((1, 0));
        }
        if !exists {
            return Err(gmf(gmfc::UNKNOWN_GROUP));
        }
        // Modify: recompile the flows that use it, all or none.
        let old = w.of_groups.insert(g.group_id, new);
        let snap = self.snap.load_full();
        let mut compiled: HashMap<u64, super::Compiled> = HashMap::new();
        let using = users(&snap, &HashSet::from([g.group_id]));
        for r in &using {
            match w.compile(&self.groups, &self.mixed, &snap.meters, &r.shown, r.goto) {
                Ok(c) => {
                    compiled.insert(r.seq, c);
                }
                Err(e) => {
                    if let Some(o) = old {
                        w.of_groups.insert(g.group_id, o);
                    }
                    // The only way left: the logic's output sets ran out.
                    return Err(if e.of.kind == et::FLOW_MOD_FAILED {
                        gmf(gmfc::OUT_OF_GROUPS)
                    } else {
                        e.of
                    });
                }
            }
        }
        if compiled.is_empty() {
            return Ok((1, 0));
        }
        let mut next = self.begin(&mut w);
        next.update_rules(
            &using,
            &|r| {
                Some(r.with_actions(
                    compiled[&r.seq].clone(),
                    r.shown.clone(),
                    r.goto,
                    r.stats.clone(),
                ))
            },
            &mut Vec::new(),
        );
        self.commit(&mut w, next, true);
        Ok((1, compiled.len()))
    }

    /// Deletes group `id` (`OFPG_ALL`: every group) and the flows that use
    /// it (deleting a group that does not exist is not an error): (groups,
    /// flows) deleted.
    fn delete_groups(&self, id: u32) -> (usize, usize) {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let ids: HashSet<u32> = if id == GROUP_ALL {
            w.of_groups.keys().copied().collect()
        } else {
            w.of_groups.get(&id).map(|_| id).into_iter().collect()
        };
        if ids.is_empty() {
            return (0, 0);
        }
        w.of_groups.retain(|g, _| !ids.contains(g));
        let snap = self.snap.load_full();
        let gone = users(&snap, &ids);
        let mut removed = Vec::new();
        if !gone.is_empty() {
            let mut next = self.begin(&mut w);
            next.update_rules(&gone, &|_| None, &mut removed);
            self.commit(&mut w, next, true);
        }
        drop(w);
        self.notify(&removed, Reason::GroupDelete, Instant::now());
        (ids.len(), removed.len())
    }

    /// Every group as given: (type, id, buckets), by id.
    pub fn group_desc(&self) -> Vec<(u8, u32, Vec<Bucket>)> {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        w.of_groups
            .iter()
            .map(|(&id, g)| (g.kind, id, g.buckets.clone()))
            .collect()
    }

    /// Statistics of group `id` (`OFPG_ALL`: all). Packets and bytes are
    /// those of the flows that now use the group (each packet such a flow
    /// matches goes to every bucket); `OFPGMFC_UNKNOWN_GROUP` for a group
    /// that does not exist.
    pub fn group_stats(&self, id: u32) -> Result<Vec<GroupStats>, OfpError> {
        let w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if id != GROUP_ALL && !w.of_groups.contains_key(&id) {
            return Err(OfpError::new(et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP));
        }
        let snap = self.snap.load();
        let now = Instant::now();
        Ok(w.of_groups
            .iter()
            .filter(|(g, _)| id == GROUP_ALL || **g == id)
            .map(|(&gid, g)| g.stats(gid, &snap, now))
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth};
    use crate::{Logic, Verdict};
    use openflow::{port, GROUP_ANY};
    use serde_json::json;

    fn out(p: u32) -> openflow::Action {
        openflow::Action::Output {
            port: p,
            max_len: 0,
        }
    }

    fn bucket(acts: Vec<openflow::Action>) -> Bucket {
        Bucket {
            weight: 0,
            watch_port: port::ANY,
            watch_group: GROUP_ANY,
            actions: acts,
        }
    }

    fn gm(command: u16, kind: u8, id: u32, buckets: Vec<Bucket>) -> GroupMod {
        GroupMod {
            command,
            kind,
            group_id: id,
            buckets,
        }
    }

    fn err(c: u16) -> Result<(), OfpError> {
        Err(OfpError::new(et::GROUP_MOD_FAILED, c))
    }

    #[test]
    fn all_group_outputs_to_every_bucket_and_follows_modify_and_delete() {
        let f = Flows::from_config(&json!(null)).unwrap();
        // OpenFlow ports 2 and 3 are ids 1 and 2.
        let two = vec![bucket(vec![out(2)]), bucket(vec![out(3)])];
        f.group_mod(&gm(gc::ADD, gt::ALL, 1, two.clone())).unwrap();
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::ALL, 1, two.clone())),
            err(gmfc::GROUP_EXISTS)
        );
        assert_eq!(
            f.group_mod(&gm(gc::MODIFY, gt::ALL, 2, two.clone())),
            err(gmfc::UNKNOWN_GROUP)
        );
        f.command("add", &json!({"flows": ["send_flow_rem,in_port=0,actions=group:1", "in_port=3,actions=output:0"]}))
            .unwrap();
        let frame = eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 0x0800);
        let Verdict::Group(g) = classify1(&f, 0, 0, &frame) else {
            panic!("a group verdict")
        };
        assert_eq!(f.group_members(g), &[1, 2]);
        // Modify to one bucket: the flow now outputs to that port only.
        f.group_mod(&gm(gc::MODIFY, gt::INDIRECT, 1, vec![bucket(vec![out(3)])]))
            .unwrap();
        assert_eq!(classify1(&f, 0, 0, &frame), Verdict::Port(2));
        let st = f.group_stats(GROUP_ALL).unwrap();
        assert_eq!(
            (st[0].group_id, st[0].ref_count, st[0].packet_count),
            (1, 1, 2)
        );
        assert_eq!(f.group_desc()[0].0, gt::INDIRECT);
        // Deleting the group deletes the flow that uses it (GROUP_DELETE).
        let (_, start) = f.notice_cursor();
        f.group_mod(&gm(gc::DELETE, gt::ALL, GROUP_ALL, vec![]))
            .unwrap();
        assert_eq!(f.flow_count(), 1);
        let (n, _) = f.notices_since(start);
        assert_eq!(n.len(), 1);
        assert_eq!(n[0].reason, Reason::GroupDelete);
        assert!(f.group_desc().is_empty());
        // A flow naming a group that does not exist is refused.
        assert!(f
            .command("add", &json!({"flow": "actions=group:1"}))
            .is_err());
        assert_eq!(
            f.group_stats(1),
            Err(OfpError::new(et::GROUP_MOD_FAILED, gmfc::UNKNOWN_GROUP))
        );
    }

    #[test]
    fn refusals_carry_the_spec_codes() {
        let f = Flows::from_config(&json!(null)).unwrap();
        let one = vec![bucket(vec![out(2)])];
        assert_eq!(
            f.group_mod(&gm(3, gt::ALL, 1, one.clone())),
            err(gmfc::BAD_COMMAND)
        );
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::FF + 1, 1, one.clone())),
            err(gmfc::BAD_TYPE)
        );
        let mut watching = bucket(vec![out(2)]);
        watching.watch_group = 7;
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::SELECT, 1, vec![watching])),
            err(gmfc::WATCH_UNSUPPORTED)
        );
        let mut watching = bucket(vec![out(2)]);
        watching.watch_port = port::CONTROLLER;
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::SELECT, 1, vec![watching])),
            err(gmfc::BAD_WATCH)
        );
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::ALL, GROUP_MAX + 1, one.clone())),
            err(gmfc::INVALID_GROUP)
        );
        assert_eq!(
            f.group_mod(&gm(gc::ADD, gt::INDIRECT, 1, vec![])),
            err(gmfc::BAD_BUCKET)
        );
        assert_eq!(
            f.group_mod(&gm(
                gc::ADD,
                gt::ALL,
                1,
                vec![bucket(vec![openflow::Action::Group(2)])]
            )),
            err(gmfc::CHAINING_UNSUPPORTED)
        );
        assert_eq!(
            f.group_mod(&gm(
                gc::ADD,
                gt::ALL,
                1,
                vec![bucket(vec![out(port::NORMAL)])]
            )),
            Err(OfpError::new(et::BAD_ACTION, openflow::bac::BAD_OUT_PORT))
        );
        assert_eq!(
            f.group_mod(&gm(
                gc::ADD,
                gt::ALL,
                1,
                vec![bucket(vec![openflow::Action::SetField(
                    openflow::Oxm::exact(openflow::oxm::METADATA, 1)
                )])]
            )),
            Err(OfpError::new(et::BAD_ACTION, openflow::bac::BAD_SET_TYPE))
        );
        assert!(
            f.group_desc().is_empty(),
            "refused group-mods change nothing"
        );
        // Deleting a group that does not exist is fine.
        f.group_mod(&gm(gc::DELETE, gt::ALL, 9, vec![])).unwrap();
    }
}
