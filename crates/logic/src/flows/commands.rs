//! The flow commands: the logic's constructor, `add`, `modify`, `delete`
//! and `dump` (each a batch of flows, one snapshot swap), the command
//! table, and the writer's state they serialise on. The group and meter
//! commands: groupcmd.rs, metercmd.rs; `trace`: trace.rs.

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Instant;

use arc_swap::ArcSwap;
use serde_json::{json, Value};

use super::{
    cache, exec, expiry, groups, meters, parse, Compiled, Counters, FlowSpec, Flows, Reason, Rule,
    Snapshot, Within, DEFAULT_PRIORITY, GENERATION, MAX_GROUPS, MAX_TABLE,
};
use crate::args::Args;
use crate::{CommandError, LogicError, PortId};
use fabric::punt;

/// Control-path state.
#[derive(Default)]
pub(super) struct Writer {
    /// Flows numbered in installation order.
    pub(super) seq: u64,
    /// Output set → group id.
    pub(super) groups: HashMap<Box<[PortId]>, u16>,
    /// Idle-timeout bookkeeping (`expiry.rs`).
    pub(super) idle: expiry::Idle,
    /// The OpenFlow group table (`groups.rs`).
    pub(super) of_groups: std::collections::BTreeMap<u32, groups::OfGroup>,
    /// The snapshot retired by the last [`Flows::commit`] (left-right: it
    /// shares no subtable with the published one), for [`Flows::begin`]
    /// to bring up to date and edit in place.
    pub(super) spare: Option<Arc<Snapshot>>,
}

/// Table constructor: the fabric runs the instance whose OpenFlow tables
/// the control plane gets ([`crate::Services::openflow`]).
pub fn new(config: &Value) -> Result<crate::Built, LogicError> {
    let f = Arc::new(Flows::from_config(config).map_err(LogicError::Config)?);
    Ok(crate::Built {
        logic: Box::new(f.clone()),
        services: crate::Services { openflow: Some(f) },
    })
}

/// Flow texts from `flows` (array) or `flow` (one string) of `a`.
pub(super) fn flow_texts<'a>(a: &Args<'a>, required: bool) -> Result<Vec<&'a str>, String> {
    let mut out = Vec::new();
    if let Some(f) = a.get("flow") {
        out.push(
            f.as_str()
                .ok_or_else(|| a.err("flow", "must be a string in ovs-ofctl flow syntax"))?,
        );
    }
    for (i, f) in a.array("flows")?.into_iter().flatten().enumerate() {
        out.push(
            f.as_str()
                .ok_or_else(|| a.err("flows", &format!("[{i}] must be a string")))?,
        );
    }
    if required && out.is_empty() {
        return Err(a.err("flow", "or \"flows\" is required"));
    }
    Ok(out)
}

pub(super) fn bad(what: &str, text: &str, e: String) -> String {
    format!("{what}: flow {text:?}: {e}")
}

impl Flows {
    /// Builds from `{"flows": [text, ...]}`.
    pub fn from_config(config: &Value) -> Result<Flows, String> {
        let a = Args::new(
            "flows config",
            config,
            &[
                "flows",
                "cache",
                "packet_in_rate",
                "packet_in_burst",
                "packet_in_queue",
                "normal_table_size",
                "normal_aging_s",
            ],
        )?;
        // OVS's NORMAL with no per-port VLAN configuration: per (VLAN, MAC).
        let normal =
            crate::bridge::Bridge::from_args(&a, "normal_table_size", "normal_aging_s")?.per_vlan();
        let rate = a
            .u64("packet_in_rate", 1, punt::MAX_RATE)?
            .unwrap_or(punt::DEFAULT_RATE);
        let burst = a
            .u64("packet_in_burst", 1, punt::MAX_RATE)?
            .unwrap_or((rate / 10).max(1));
        let slots = a
            .u64("packet_in_queue", 1, punt::MAX_SLOTS as u64)?
            .map_or(punt::DEFAULT_SLOTS, |n| n as usize);
        if !slots.is_power_of_two() {
            return Err(format!(
                "packet_in_queue must be a power of two in 1..={}",
                punt::MAX_SLOTS
            ));
        }
        let punt = fabric::Punt::new(fabric::PuntSpec { slots, rate, burst })
            .map_err(|e| format!("packet-in queue: {e}"))?;
        let punt = Arc::new(punt);
        let per = a
            .u64("cache", 0, cache::MAX_ENTRIES as u64)?
            .map_or(cache::DEFAULT_ENTRIES, |n| n as usize);
        if per != 0 && !per.is_power_of_two() {
            return Err(a.err(
                "cache",
                "must be 0 (no exact-match cache) or a power of two (entries per worker)",
            ));
        }
        if per != 0 {
            // Each worker's cache is mapped when the fabric installs the
            // logic: one now tells whether it can be (then dropped).
            cache::WorkerCache::new(per)?;
        }
        let f = Flows {
            snap: ArcSwap::from_pointee(Snapshot::empty()),
            table_stats: (0..=MAX_TABLE as usize)
                .map(|_| Counters::default())
                .collect(),
            copies: AtomicU64::new(0),
            meter_state: meters::State::default(),
            live: (0..=PortId::MAX as usize / 64)
                .map(|_| AtomicU64::new(!0))
                .collect(),
            groups: (0..MAX_GROUPS).map(|_| OnceLock::new()).collect(),
            mixed: (0..MAX_GROUPS).map(|_| OnceLock::new()).collect(),
            writer: Mutex::new(Writer::default()),
            cache_per: per,
            workers_without_cache: AtomicU64::new(0),
            cache_stats: Counters::default(),
            mf_stats: Counters::default(),
            punt,
            notices: Mutex::default(),
            instance: GENERATION.fetch_add(1, Relaxed),
            normal,
        };
        let texts = flow_texts(&a, false)?;
        f.add("flows config", &texts)?;
        Ok(f)
    }

    /// Adds flows (all or none), one swap.
    pub(super) fn add(&self, what: &str, texts: &[&str]) -> Result<Value, String> {
        let specs = texts
            .iter()
            .map(|t| {
                let s = parse(t).map_err(|e| bad(what, t, e))?;
                if s.actions.is_none() {
                    return Err(bad(
                        what,
                        t,
                        "must specify actions (actions=drop to drop)".into(),
                    ));
                }
                Ok(s)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut snap = self.begin(&mut w);
        let mut replaced = 0;
        let now = Instant::now();
        for (s, t) in specs.into_iter().zip(texts) {
            w.seq += 1;
            let compiled = w
                .compile(
                    &self.groups,
                    &self.mixed,
                    &snap.meters,
                    s.actions.as_deref().unwrap_or_default(),
                    s.goto,
                )
                .map_err(|e| bad(what, t, e.text))?;
            let r = rule_of(s, w.seq, compiled, Arc::default(), now);
            w.idle.installed(&r);
            replaced += snap.insert(r) as usize;
        }
        self.commit(&mut w, snap, true);
        Ok(json!({"added": texts.len() - replaced, "replaced": replaced}))
    }

    /// Modifies or deletes the flows each text selects (strict: same match
    /// and priority; else every flow whose match is at least as specific).
    pub(super) fn change(
        &self,
        what: &str,
        texts: &[&str],
        strict: bool,
        delete: bool,
    ) -> Result<Value, String> {
        let specs = texts
            .iter()
            .map(|t| {
                let s = parse(t).map_err(|e| bad(what, t, e))?;
                if delete && s.actions.is_some() {
                    return Err(bad(
                        what,
                        t,
                        "delete takes a match only, not actions".into(),
                    ));
                }
                if !delete && s.actions.is_none() {
                    return Err(bad(what, t, "must specify actions".into()));
                }
                Ok(s)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let mut snap = self.begin(&mut w);
        let mut n = 0;
        let mut removed = Vec::new();
        for (s, t) in specs.iter().zip(texts) {
            let compiled = match &s.actions {
                Some(a) => w
                    .compile(&self.groups, &self.mixed, &snap.meters, a, s.goto)
                    .map_err(|e| bad(what, t, e.text))?,
                None => Compiled::default(),
            };
            let tables = match s.table {
                Some(t) => t..=t,
                None if strict || !delete => 0..=0,
                None => 0..=MAX_TABLE,
            };
            let prio = s.priority.unwrap_or(DEFAULT_PRIORITY);
            let pick = |r: &Rule| {
                if strict {
                    r.mask == s.mask && r.key == s.key && r.priority == prio
                } else {
                    r.mask.covers(&s.mask) && r.key.and(&s.mask) == s.key
                }
            };
            let f = |r: &Rule| -> Option<Rule> {
                let shown = s.actions.as_ref()?;
                Some(Rule {
                    out_max_len: Box::default(),
                    ..r.with_actions(
                        compiled.clone(),
                        shown.clone().into_boxed_slice(),
                        s.goto,
                        r.stats.clone(),
                    )
                })
            };
            if let Some(g) = s.goto {
                if snap.tables.iter().enumerate().any(|(ti, t)| {
                    tables.contains(&(ti as u8)) && g <= ti as u8 && t.rules().any(|r| pick(r))
                }) {
                    return Err(bad(
                        what,
                        texts[0],
                        format!("goto_table:{g} must go to a later table"),
                    ));
                }
            }
            let within = if strict {
                Within::Exact(&s.key, &s.mask)
            } else {
                Within::Covering(&s.key, &s.mask)
            };
            n += snap.update_within(tables, within, &pick, &f, &mut removed);
        }
        self.commit(&mut w, snap, true);
        drop(w);
        self.notify(&removed, Reason::Delete, Instant::now());
        Ok(if delete {
            json!({"deleted": n})
        } else {
            json!({"modified": n})
        })
    }

    pub(super) fn dump(&self, table: Option<u8>) -> Value {
        let snap = self.snap.load();
        let mut rules: Vec<&Arc<Rule>> = snap
            .tables
            .iter()
            .filter(|t| !t.subtables.is_empty())
            .flat_map(|t| t.rules())
            .filter(|r| table.is_none_or(|t| r.table == t))
            .collect();
        rules.sort_by(|a, b| {
            a.table
                .cmp(&b.table)
                .then(b.priority.cmp(&a.priority))
                .then(a.seq.cmp(&b.seq))
        });
        let flows: Vec<Value> = rules
            .iter()
            .map(|r| {
                let (p, b) = r.stats.get();
                let d = r.installed.elapsed().as_secs_f64();
                json!({"flow": r.text(), "cookie": r.cookie, "n_packets": p, "n_bytes": b,
                       "duration": (d * 1000.0).round() / 1000.0})
            })
            .collect();
        let tables: Vec<Value> = self
            .table_stats
            .iter()
            .enumerate()
            .filter_map(|(i, c)| {
                let (lookups, missed) = c.get();
                let n = snap.tables[i].rules().count();
                (lookups > 0 || n > 0).then(|| {
                    json!({"table": i, "flows": n, "subtables": snap.tables[i].subtables.len(),
                           "lookups": lookups, "matched": lookups - missed, "missed": missed})
                })
            })
            .collect();
        let (hits, misses) = self.cache_stats.get();
        let (mf_hits, mf_misses) = self.mf_stats.get();
        let cache = json!({"entries_per_worker": self.cache_per, "hits": hits,
            "misses": misses, "megaflow_hits": mf_hits, "megaflow_misses": mf_misses,
            "workers_without_cache": self.workers_without_cache.load(Relaxed)});
        let pi = self.punt.stats();
        let packet_ins = json!({"to_controller": pi.queued, "sent": pi.popped,
            "controller_queue_full": pi.queue_full, "controller_rate_limit": pi.rate_limited,
            "no_controller": pi.no_controller, "controllers": self.punt.controllers()});
        json!({"flows": flows, "tables": tables, "copies": self.copies.load(Relaxed), "cache": cache,
               "packet_ins": packet_ins})
    }

    /// A command of [`COMMANDS`] (the `Logic::command` of `flows`).
    pub(super) fn run_command(&self, cmd: &str, args: &Value) -> Result<Value, CommandError> {
        let e = CommandError;
        let what = format!("flows {cmd}");
        match cmd {
            "add" => {
                let a = Args::new(&what, args, &["flow", "flows"]).map_err(e)?;
                let texts = flow_texts(&a, true).map_err(e)?;
                self.add(&what, &texts).map_err(e)
            }
            "modify" | "delete" => {
                let a = Args::new(&what, args, &["flow", "flows", "strict"]).map_err(e)?;
                let strict = a.bool("strict").map_err(e)?.unwrap_or(false);
                let mut texts = flow_texts(&a, cmd == "modify").map_err(e)?;
                if texts.is_empty() {
                    texts.push(""); // delete everything
                }
                self.change(&what, &texts, strict, cmd == "delete")
                    .map_err(e)
            }
            "trace" => self.trace_command(&what, args).map_err(e),
            "add_group" | "mod_group" | "del_groups" | "dump_groups" => {
                self.group_command(&what, cmd, args).map_err(e)
            }
            "add_meter" | "mod_meter" | "del_meters" | "dump_meters" => {
                self.meter_command(&what, cmd, args).map_err(e)
            }
            "normal_show" => {
                Args::new(&what, args, &[]).map_err(e)?;
                Ok(self.normal.show())
            }
            "dump" => {
                let a = Args::new(&what, args, &["table"]).map_err(e)?;
                let t = a.u64("table", 0, MAX_TABLE as u64).map_err(e)?;
                Ok(self.dump(t.map(|t| t as u8)))
            }
            _ => Err(e(format!("logic flows has no command {cmd:?}"))),
        }
    }
}

pub(super) fn rule_of(
    s: FlowSpec,
    seq: u64,
    c: Compiled,
    stats: Arc<Counters>,
    installed: Instant,
) -> Rule {
    Rule {
        idle_timeout: s.idle_timeout,
        hard_timeout: s.hard_timeout,
        flags: if s.send_flow_rem {
            expiry::SEND_FLOW_REM
        } else {
            0
        },
        installed,
        slot: 0,
        table: s.table.unwrap_or(0),
        priority: s.priority.unwrap_or(DEFAULT_PRIORITY),
        seq,
        cookie: s.cookie,
        key: s.key,
        mask: s.mask,
        plain: exec::Plain::of(&c.actions, s.goto),
        actions: c.actions,
        tail: c.tail,
        shown: s.actions.unwrap_or_default().into_boxed_slice(),
        out_max_len: Box::default(),
        goto: s.goto,
        stats,
    }
}

/// The commands of `flows` and their arguments (`Logic::commands`).
pub(super) const COMMANDS: &[(&str, &str)] = &[
        ("add", "{flow: text} or {flows: [text, ...]}: add or replace flows (ovs-ofctl syntax), at once"),
        ("modify", "{flow|flows, strict?}: replace the actions of the flows the match selects"),
        ("delete", "{flow|flows, strict?}: delete the flows the match selects (none: all)"),
        ("dump", "{table?}: flows with counters, and per-table lookups/matched/missed"),
        ("add_group", "{group: \"group_id=N,type=all|indirect,bucket=ACTIONS,...\"}: add an OpenFlow group (ports are ids)"),
        ("mod_group", "{group: text}: replace a group's type and buckets; the flows using it follow"),
        ("del_groups", "{group?: \"group_id=N\"}: delete a group (none: all) and the flows using it"),
        ("dump_groups", "{group?: \"group_id=N\"}: groups with ref_count and counters"),
        ("add_meter", "{meter: \"meter=N,kbps|pktps[,burst][,stats],bands=type=drop|dscp_remark,rate=R[,burst_size=B][,prec_level=P]\"}: add an OpenFlow meter"),
        ("mod_meter", "{meter: text}: replace a meter's flags and bands"),
        ("del_meters", "{meter?: \"meter=N\"}: delete a meter (none: all) and the flows using it"),
        ("dump_meters", "{meter?: \"meter=N\"}: meters with their counters"),
        ("normal_show", "the MAC table of the normal action's learning bridge (mac, port, age_s) and its counters"),
        ("trace", "{packet: hex, in_port: N}: the flows a frame hits, its outputs and rewritten frame (nothing sent, no counters)"),
];
