//! Idle and hard timeouts of flows, and the flow-removed notices the
//! OpenFlow channel sends (docs/flows.md, "Timeouts and flow-removed").
//!
//! The workers keep no clocks: they only add to each flow's counters, as
//! for any flow. A control-plane timer (turnoutd's flow timer, every
//! [`SWEEP_EVERY`]) calls [`Flows::expire`], which reads the packet count
//! of every flow with a timeout (an index the writer keeps, so a sweep
//! visits those flows only, not the tables): a flow whose count did not change for
//! `idle_timeout` seconds (as the sweeps saw it), or installed
//! `hard_timeout` seconds ago, is removed. Every flow expired in one sweep
//! goes in one snapshot swap: a new generation, so no worker's exact-match
//! cache serves one of them after it (cache.rs).
//!
//! Flows installed with `SEND_FLOW_REM` leave a [`Notice`] (reason, final
//! counters, duration) in a bounded queue when they expire or a delete
//! removes them; each OpenFlow connection reads the queue from its own
//! cursor and sends `OFPT_FLOW_REMOVED`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Flows, Key, Rule};

/// How often turnoutd sweeps for expired flows.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);
/// `OFPFF_SEND_FLOW_REM`.
pub(super) const SEND_FLOW_REM: u16 = openflow::ff::SEND_FLOW_REM;
/// Flow-removed notices kept for connections that have not read them yet
/// (older ones are lost to a connection that lags this far).
pub const MAX_NOTICES: usize = 4096;

/// Why a flow went (`ofp_flow_removed_reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// No new packet for `idle_timeout` seconds.
    IdleTimeout,
    /// `hard_timeout` seconds after installation.
    HardTimeout,
    /// Deleted by a flow-mod or a `delete` command.
    Delete,
    /// Its group was deleted.
    GroupDelete,
}

impl Reason {
    /// `OFPRR_*`.
    pub fn code(self) -> u8 {
        match self {
            Reason::IdleTimeout => 0,
            Reason::HardTimeout => 1,
            Reason::Delete => 2,
            Reason::GroupDelete => 3,
        }
    }
}

/// Timeout bookkeeping (control path only): the flows with an idle or
/// hard timeout, by installation number, so that a sweep visits those
/// only. Kept by the writer as flows are installed; a flow deleted or
/// replaced since leaves its entry to the next sweep, which drops it (it
/// is no longer found under its match with its number).
#[derive(Default)]
pub(super) struct Idle {
    timed: HashMap<u64, Timed>,
    /// Index entries looked at by sweeps, over the logic's life.
    pub(super) visited: u64,
}

/// Where a timed flow is, and what the sweeps saw of it.
struct Timed {
    table: u8,
    key: Key,
    mask: Key,
    priority: u16,
    /// Its packet count when a sweep last saw it change, and when (idle
    /// timeout).
    seen: (u64, Instant),
}

impl Idle {
    /// Called for every flow installed.
    pub(super) fn installed(&mut self, r: &Rule) {
        if r.idle_timeout != 0 || r.hard_timeout != 0 {
            let t = Timed {
                table: r.table,
                key: r.key,
                mask: r.mask,
                priority: r.priority,
                seen: (r.stats.get().0, r.installed),
            };
            self.timed.insert(r.seq, t);
        }
    }

    /// Flows in the index (some may have gone since the last sweep).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.timed.len()
    }
}

/// A flow removed with `SEND_FLOW_REM`.
#[derive(Clone)]
pub(super) struct Notice {
    pub(super) reason: Reason,
    pub(super) rule: Arc<Rule>,
    pub(super) duration: Duration,
    pub(super) packets: u64,
    pub(super) bytes: u64,
}

/// The queue of notices, numbered from 0.
#[derive(Default)]
pub(super) struct Notices {
    next: u64,
    q: VecDeque<(u64, Notice)>,
}

fn secs(s: u16) -> Duration {
    Duration::from_secs(s as u64)
}

impl Flows {
    /// Removes the flows whose idle or hard timeout has passed at `now`
    /// (one snapshot swap) and queues their notices; returns how many.
    pub fn expire(&self, now: Instant) -> usize {
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        if w.idle.timed.is_empty() {
            return 0;
        }
        let snap = self.snap.load_full();
        let mut gone: Vec<Arc<Rule>> = Vec::new();
        let mut reason: HashMap<u64, Reason> = HashMap::new();
        let idle = &mut w.idle;
        idle.visited += idle.timed.len() as u64;
        idle.timed.retain(|&seq, t| {
            // The flow as installed now (a modify keeps its number).
            let Some(r) = snap.tables[t.table as usize]
                .find(&t.key, &t.mask, t.priority)
                .filter(|r| r.seq == seq)
            else {
                return false; // deleted or replaced since
            };
            let age = now.saturating_duration_since(r.installed);
            let why = if r.hard_timeout != 0 && age >= secs(r.hard_timeout) {
                Reason::HardTimeout
            } else if r.idle_timeout == 0 {
                return true;
            } else {
                let p = r.stats.get().0;
                if t.seen.0 != p {
                    t.seen = (p, now);
                    return true;
                }
                if now.saturating_duration_since(t.seen.1) < secs(r.idle_timeout) {
                    return true;
                }
                Reason::IdleTimeout
            };
            reason.insert(seq, why);
            gone.push(r.clone());
            false
        });
        if gone.is_empty() {
            return 0;
        }
        let mut next = self.begin(&mut w);
        let mut removed = Vec::new();
        next.update_rules(&gone, &|_| None, &mut removed);
        self.commit(&mut w, next, true);
        drop(w);
        for why in [Reason::IdleTimeout, Reason::HardTimeout] {
            let of: Vec<Arc<Rule>> = removed
                .iter()
                .filter(|r| reason.get(&r.seq) == Some(&why))
                .cloned()
                .collect();
            self.notify(&of, why, now);
        }
        removed.len()
    }

    /// Queues a notice for each of `removed` installed with `SEND_FLOW_REM`.
    pub(super) fn notify(&self, removed: &[Arc<Rule>], reason: Reason, now: Instant) {
        if !removed.iter().any(|r| r.flags & SEND_FLOW_REM != 0) {
            return;
        }
        let mut n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        for r in removed.iter().filter(|r| r.flags & SEND_FLOW_REM != 0) {
            let (packets, bytes) = r.stats.get();
            let x = Notice {
                reason,
                rule: r.clone(),
                duration: now.saturating_duration_since(r.installed),
                packets,
                bytes,
            };
            let i = n.next;
            n.q.push_back((i, x));
            n.next += 1;
            if n.q.len() > MAX_NOTICES {
                n.q.pop_front();
            }
        }
    }

    /// (This instance, the number of the next notice): where a new reader
    /// of [`Flows::flow_removed_since`] starts. A logic swapped in has
    /// another instance number, and its own notices.
    pub fn notice_cursor(&self) -> (u64, u64) {
        let n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        (self.instance, n.next)
    }

    /// Notices numbered `cursor` on (those still kept), and the next cursor.
    pub(super) fn notices_since(&self, cursor: u64) -> (Vec<Notice>, u64) {
        let n = self.notices.lock().unwrap_or_else(|p| p.into_inner());
        let v =
            n.q.iter()
                .filter(|(i, _)| *i >= cursor)
                .map(|(_, x)| x.clone())
                .collect();
        (v, n.next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{classify1, eth};
    use crate::{Logic, Verdict};
    use serde_json::json;

    fn flows(texts: &[&str]) -> Flows {
        Flows::from_config(&json!({ "flows": texts })).unwrap()
    }

    fn frame() -> Vec<u8> {
        eth([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], 0x0800)
    }

    #[test]
    fn hard_timeout_expires_from_installation_whatever_the_traffic() {
        let f = flows(&["priority=5,in_port=0,hard_timeout=2,send_flow_rem,actions=output:1"]);
        let t0 = f.snap.load().tables[0].rules().next().unwrap().installed;
        assert_eq!(classify1(&f, 0, 0, &frame()), Verdict::Port(1));
        assert_eq!(f.expire(t0 + Duration::from_millis(1900)), 0);
        assert_eq!(classify1(&f, 0, 0, &frame()), Verdict::Port(1));
        assert_eq!(f.expire(t0 + Duration::from_secs(2)), 1);
        assert_eq!(f.flow_count(), 0);
        // The cache entry of the flow is not served after the swap.
        assert_eq!(
            classify1(&f, 0, 0, &frame()),
            Verdict::Drop(crate::DropReason::NoMatch)
        );
        let (v, next) = f.notices_since(0);
        assert_eq!(next, 1);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].reason, Reason::HardTimeout);
        assert_eq!(v[0].packets, 2);
        assert_eq!(v[0].duration, Duration::from_secs(2));
    }

    #[test]
    fn idle_timeout_counts_from_the_last_change_a_sweep_saw() {
        let f = flows(&[
            "priority=5,in_port=0,idle_timeout=2,actions=output:1",
            "priority=4,in_port=1,actions=output:0",
        ]);
        let t0 = f.snap.load().tables[0].rules().next().unwrap().installed;
        let at = |ms| t0 + Duration::from_millis(ms);
        assert_eq!(f.expire(at(1000)), 0);
        classify1(&f, 0, 0, &frame());
        assert_eq!(f.expire(at(1500)), 0, "traffic seen at 1.5 s");
        assert_eq!(f.expire(at(3000)), 0, "idle 1.5 s only");
        assert_eq!(f.expire(at(3500)), 1, "idle 2 s");
        assert_eq!(f.flow_count(), 1, "the flow without timeout stays");
        assert_eq!(f.notices_since(0).0.len(), 0, "no send_flow_rem: no notice");
        assert_eq!(f.expire(at(100_000)), 0);
        assert_eq!(
            f.writer.lock().unwrap().idle.len(),
            0,
            "nothing timed is left"
        );
        // An idle flow never hit expires idle_timeout after installation.
        let g = flows(&["in_port=0,idle_timeout=1,actions=drop"]);
        let t1 = g.snap.load().tables[0].rules().next().unwrap().installed;
        assert_eq!(g.expire(t1 + Duration::from_millis(999)), 0);
        assert_eq!(g.expire(t1 + Duration::from_secs(1)), 1);
    }

    #[test]
    fn sweeps_visit_only_the_timed_flows_and_still_expire_on_time() {
        let untimed: Vec<String> = (0..2000)
            .map(|i| format!("priority=1,in_port={},actions=drop", i + 10))
            .collect();
        let mut texts: Vec<&str> = untimed.iter().map(|s| s.as_str()).collect();
        texts.extend([
            "priority=5,in_port=0,hard_timeout=1,send_flow_rem,actions=output:1",
            "priority=5,in_port=1,idle_timeout=2,send_flow_rem,actions=output:0",
            "priority=5,in_port=2,hard_timeout=30,actions=output:0",
        ]);
        let f = flows(&texts);
        let t0 = f.snap.load().tables[0].rules().next().unwrap().installed;
        let at = |ms| t0 + Duration::from_millis(ms);
        let visited = || f.writer.lock().unwrap().idle.visited;
        assert_eq!(f.expire(at(200)), 0);
        assert_eq!(visited(), 3, "the three timed flows, not the 2003");
        // A modify keeps a flow timed (same installation); a delete drops
        // it from the index at the next sweep.
        f.command(
            "modify",
            &json!({"flow": "priority=5,in_port=2,actions=output:1", "strict": true}),
        )
        .unwrap();
        f.command(
            "delete",
            &json!({"flow": "priority=5,in_port=1", "strict": true}),
        )
        .unwrap();
        let (_, start) = f.notice_cursor();
        assert_eq!(f.expire(at(999)), 0);
        assert_eq!(visited(), 6);
        assert_eq!(f.writer.lock().unwrap().idle.len(), 2);
        // Hard timeout of 1 s: gone at the first sweep at or after 1 s,
        // with its flow-removed.
        assert_eq!(f.expire(at(1000)), 1);
        let (n, _) = f.notices_since(start);
        assert_eq!(n.len(), 1);
        assert_eq!(
            (n[0].reason, n[0].duration),
            (Reason::HardTimeout, Duration::from_secs(1))
        );
        assert_eq!(f.flow_count(), 2001);
        assert_eq!(f.expire(at(1200)), 0);
        assert_eq!(visited(), 6 + 2 + 1);
        assert_eq!(
            f.expire(at(30_000)),
            1,
            "the modified flow kept its hard timeout"
        );
        assert_eq!(f.writer.lock().unwrap().idle.len(), 0);
        assert_eq!(f.expire(at(40_000)), 0);
        assert_eq!(visited(), 10, "an empty index: no visit");
    }

    #[test]
    fn deletes_leave_notices_and_the_queue_is_bounded() {
        let f = flows(&[]);
        let texts: Vec<String> = (0..MAX_NOTICES + 10)
            .map(|i| format!("in_port={},send_flow_rem,actions=drop", i % 60000))
            .collect();
        let refs: Vec<&str> = texts.iter().map(|s| s.as_str()).collect();
        let (_, start) = f.notice_cursor();
        f.add("test", &refs).unwrap();
        f.command("delete", &json!({})).unwrap();
        let (v, next) = f.notices_since(start);
        assert_eq!(next, start + MAX_NOTICES as u64 + 10);
        assert_eq!(v.len(), MAX_NOTICES, "the oldest are dropped");
        assert!(v.iter().all(|n| n.reason == Reason::Delete));
        assert_eq!(f.notices_since(next).0.len(), 0);
    }

    #[test]
    fn timeouts_round_trip_through_the_text() {
        let f = flows(&["table=1,idle_timeout=10,hard_timeout=20,send_flow_rem,priority=3,in_port=0,actions=drop"]);
        let d = f.command("dump", &json!({})).unwrap();
        let text = d["flows"][0]["flow"].as_str().unwrap().to_string();
        assert_eq!(
            text,
            "table=1,idle_timeout=10,hard_timeout=20,send_flow_rem,priority=3,in_port=0,actions=drop"
        );
        let g = flows(&[&text]);
        let d2 = g.command("dump", &json!({})).unwrap();
        assert_eq!(d2["flows"][0]["flow"], d["flows"][0]["flow"]);
        assert!(d["flows"][0]["duration"].as_f64().unwrap() >= 0.0);
    }
}
