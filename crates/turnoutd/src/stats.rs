//! The one stats type: what the `stats` call answers (its JSON is
//! `turnout ctl stats`' input and the workbench's), built from the switch's
//! counters in one place ([`StatsResult::collect`]), and the metrics the
//! Prometheus endpoint exports from it, each declared here next to the
//! field it reads ([`QUEUE_METRICS`], [`WORKER_METRICS`]).
//!
//! A worker's part is the fabric's own snapshot ([`fabric::WorkerStats`],
//! its fields flattened into the worker's JSON) plus the thread's CPU time.
//!
//! Adding a queue counter: a field here, its line in
//! [`StatsResult::collect`]; a worker counter: a field of
//! [`fabric::WorkerStats`] and its line in `Switch::worker_stats`. Either
//! way, its metric in the table (or its key in [`WORKER_NOT_EXPORTED`] with
//! the reason); the tests fail when a numeric key of the JSON is in
//! neither, or a metric does not read its key.

use std::collections::BTreeMap;
use std::time::Instant;

use fabric::{DropReason, Switch};
use serde::{Deserialize, Serialize};

/// One queue's counters in `stats`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueueStats {
    /// Queue index.
    pub queue: u16,
    /// Frames received on it.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent on it.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive bursts that found this queue's ring full: the peer could
    /// add nothing until the worker drained it (push-back).
    #[serde(default)]
    pub rx_ring_full: u64,
}

/// One port's counters in `stats`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortStatsResult {
    /// Port id.
    pub id: u16,
    /// Name.
    pub name: String,
    /// Backend kind.
    pub kind: String,
    /// Peer attached.
    pub link_up: bool,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive bursts that found a ring full, all queues (push-back: the
    /// peer could not add frames until the switch drained them).
    #[serde(default)]
    pub rx_ring_full: u64,
    /// Per queue.
    pub queues: Vec<QueueStats>,
    /// Drops by reason: every reason, zero or not.
    pub drops: BTreeMap<String, u64>,
    /// Backend counters by name.
    pub backend: BTreeMap<String, u64>,
}

/// One worker's counters in `stats`: the fabric's snapshot, its keys at
/// the top level of the worker's JSON, and the thread's CPU time.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerStatsResult {
    /// The fabric's counters ([`fabric::WorkerStats`]).
    #[serde(flatten)]
    pub worker: fabric::WorkerStats,
    /// CPU time the thread used since it started (user + system, from its
    /// per-thread CPU clock), ns; not reset by `stats.reset`.
    pub cpu_ns: u64,
}

/// `stats` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StatsResult {
    /// Per port, by id.
    pub ports: Vec<PortStatsResult>,
    /// Per worker.
    pub workers: Vec<WorkerStatsResult>,
    /// Cycle counter frequency.
    pub tsc_hz: u64,
    /// Monotonic time of the snapshot, ns since the daemon started (for rates).
    pub time_ns: u64,
    /// The OpenFlow channel's counters.
    #[serde(default)]
    pub openflow: OpenflowStats,
}

/// `stats`' `openflow`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct OpenflowStats {
    /// Refused messages: `flow_mod`, `group_mod`, `meter_mod` (each always
    /// there) → error name (`OFPBAC_BAD_TYPE`) → count.
    pub refused: BTreeMap<String, BTreeMap<String, u64>>,
}

impl StatsResult {
    /// A snapshot of every counter of `switch` (started at `started`) and
    /// of the OpenFlow channel's refusals.
    pub fn collect(
        switch: &Switch,
        started: Instant,
        openflow: &crate::openflow::switch::OfSwitch,
    ) -> StatsResult {
        let ports = switch
            .port_stats()
            .into_iter()
            .map(|p| {
                // every reason, zero or not
                let mut drops: BTreeMap<String, u64> = DropReason::ALL
                    .iter()
                    .map(|r| (r.name().to_string(), 0))
                    .collect();
                for (r, n) in p.drops {
                    drops.insert(r.to_string(), n);
                }
                PortStatsResult {
                    id: p.id,
                    name: p.name,
                    kind: p.kind.to_string(),
                    link_up: p.link_up,
                    rx_packets: p.rx_packets,
                    rx_bytes: p.rx_bytes,
                    tx_packets: p.tx_packets,
                    tx_bytes: p.tx_bytes,
                    rx_ring_full: p.rx_ring_full,
                    queues: p
                        .queues
                        .iter()
                        .enumerate()
                        .map(|(i, q)| QueueStats {
                            queue: i as u16,
                            rx_packets: q[0],
                            rx_bytes: q[1],
                            tx_packets: q[2],
                            tx_bytes: q[3],
                            rx_ring_full: q[4],
                        })
                        .collect(),
                    drops,
                    backend: p
                        .backend
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), v))
                        .collect(),
                }
            })
            .collect();
        let tick_ns = 1_000_000_000 / crate::sys::clock_ticks_hz().max(1);
        let workers = switch
            .worker_stats()
            .into_iter()
            .map(|w| WorkerStatsResult {
                cpu_ns: if w.tid > 0 {
                    crate::sys::thread_cpu_ns(w.tid)
                        .or_else(|| crate::sys::thread_cpu_ticks(w.tid).map(|t| t * tick_ns))
                        .unwrap_or(0)
                } else {
                    0
                },
                worker: w,
            })
            .collect();
        StatsResult {
            ports,
            workers,
            tsc_hz: switch.cycles_hz(),
            time_ns: started.elapsed().as_nanos() as u64,
            openflow: OpenflowStats {
                refused: openflow.refusals(),
            },
        }
    }
}

/// A Prometheus metric family read from one field of a stats part `T`.
pub struct Metric<T> {
    /// The field it reads, as the `stats` JSON names it (`policy.nap_ns`
    /// for a nested one).
    pub key: &'static str,
    /// Its family name.
    pub name: &'static str,
    /// `counter` or `gauge`.
    pub kind: &'static str,
    /// Its `# HELP` text.
    pub help: &'static str,
    /// The value: the field, in the family's unit (seconds for `_ns`
    /// fields, a code for an enum).
    pub get: fn(&T) -> f64,
}

/// Per queue, labelled `port` and `queue`.
pub const QUEUE_METRICS: [Metric<QueueStats>; 5] = [
    Metric {
        key: "rx_packets",
        name: "turnout_port_rx_packets_total",
        kind: "counter",
        help: "Frames received from the port (entering the switch), per queue.",
        get: |q| q.rx_packets as f64,
    },
    Metric {
        key: "rx_bytes",
        name: "turnout_port_rx_bytes_total",
        kind: "counter",
        help: "Bytes received from the port, per queue.",
        get: |q| q.rx_bytes as f64,
    },
    Metric {
        key: "tx_packets",
        name: "turnout_port_tx_packets_total",
        kind: "counter",
        help: "Frames sent to the port (leaving the switch), per queue.",
        get: |q| q.tx_packets as f64,
    },
    Metric {
        key: "tx_bytes",
        name: "turnout_port_tx_bytes_total",
        kind: "counter",
        help: "Bytes sent to the port, per queue.",
        get: |q| q.tx_bytes as f64,
    },
    Metric {
        key: "rx_ring_full",
        name: "turnout_port_rx_ring_full_total",
        kind: "counter",
        help: "Receive bursts that found the queue's ring full (the switch pushed the peer back).",
        get: |q| q.rx_ring_full as f64,
    },
];

/// Per worker, labelled `worker`.
pub const WORKER_METRICS: [Metric<WorkerStatsResult>; 28] = [
    Metric {
        key: "packets",
        name: "turnout_worker_packets_total",
        kind: "counter",
        help: "Frames received by the worker.",
        get: |w| w.worker.packets as f64,
    },
    Metric {
        key: "batches",
        name: "turnout_worker_batches_total",
        kind: "counter",
        help: "Non-empty batches processed by the worker.",
        get: |w| w.worker.batches as f64,
    },
    Metric {
        key: "busy_ns",
        name: "turnout_worker_busy_seconds_total",
        kind: "counter",
        help: "Time spent moving packets.",
        get: |w| w.worker.busy_ns as f64 / 1e9,
    },
    Metric {
        key: "idle_ns",
        name: "turnout_worker_idle_seconds_total",
        kind: "counter",
        help: "Time spent polling empty queues or asleep.",
        get: |w| w.worker.idle_ns as f64 / 1e9,
    },
    Metric {
        key: "busy_cycles",
        name: "turnout_worker_busy_cycles_total",
        kind: "counter",
        help: "Cycle-counter ticks spent moving packets.",
        get: |w| w.worker.busy_cycles as f64,
    },
    Metric {
        key: "idle_cycles",
        name: "turnout_worker_idle_cycles_total",
        kind: "counter",
        help: "Cycle-counter ticks spent idle.",
        get: |w| w.worker.idle_cycles as f64,
    },
    Metric {
        key: "kick_cycles",
        name: "turnout_worker_kick_cycles_total",
        kind: "counter",
        help: "Of the busy cycles, those spent in kicks to peers (system calls).",
        get: |w| w.worker.kick_cycles as f64,
    },
    Metric {
        key: "sleeps",
        name: "turnout_worker_sleeps_total",
        kind: "counter",
        help: "Times the worker went to sleep waiting for packets.",
        get: |w| w.worker.sleeps as f64,
    },
    Metric {
        key: "wakeups",
        name: "turnout_worker_wakeups_total",
        kind: "counter",
        help: "Sleeps ended by frames arriving.",
        get: |w| w.worker.wakeups as f64,
    },
    Metric {
        key: "missed_kicks",
        name: "turnout_worker_missed_kicks_total",
        kind: "counter",
        help: "Armed queues found holding frames after a sleep their notification did not end (a kick the peer did not send).",
        get: |w| w.worker.missed_kicks as f64,
    },
    Metric {
        key: "naps",
        name: "turnout_worker_naps_total",
        kind: "counter",
        help: "Naps after a batch (interrupt moderation).",
        get: |w| w.worker.naps as f64,
    },
    Metric {
        key: "gaps",
        name: "turnout_worker_gaps_total",
        kind: "counter",
        help: "Gaps after a small batch of a dense flow (spins before the next poll).",
        get: |w| w.worker.gaps as f64,
    },
    Metric {
        key: "copy_stream_memif",
        name: "turnout_worker_copy_stream_memif",
        kind: "gauge",
        help: "1 while the worker copies frames of 1 KiB or more into memif buffers with non-temporal stores, 0 with ordinary ones.",
        get: |w| w.worker.copy_stream_memif as f64,
    },
    Metric {
        key: "copy_stream_vhost_user",
        name: "turnout_worker_copy_stream_vhost_user",
        kind: "gauge",
        help: "1 while the worker copies frames of 1 KiB or more into vhost-user guests' buffers with non-temporal stores, 0 with ordinary ones.",
        get: |w| w.worker.copy_stream_vhost_user as f64,
    },
    Metric {
        key: "copy_probes",
        name: "turnout_worker_copy_probes_total",
        kind: "counter",
        help: "Probes of the other way of copying large frames into peers' memory.",
        get: |w| w.worker.copy_probes as f64,
    },
    Metric {
        key: "copy_switches",
        name: "turnout_worker_copy_switches_total",
        kind: "counter",
        help: "Probes that changed the way of copying large frames (the other way cost the worker less per frame).",
        get: |w| w.worker.copy_switches as f64,
    },
    Metric {
        key: "backoffs",
        name: "turnout_worker_backoffs_total",
        kind: "counter",
        help: "Back-off sleeps between polls of idle queues without notifications.",
        get: |w| w.worker.backoffs as f64,
    },
    Metric {
        key: "asleep_ns",
        name: "turnout_worker_asleep_seconds_total",
        kind: "counter",
        help: "Wall time the worker spent asleep or napping.",
        get: |w| w.worker.asleep_ns as f64 / 1e9,
    },
    Metric {
        key: "sleep_cpu_ns",
        name: "turnout_worker_sleep_cpu_seconds_total",
        kind: "counter",
        help: "CPU time the worker spent inside sleeps and naps.",
        get: |w| w.worker.sleep_cpu_ns as f64 / 1e9,
    },
    Metric {
        key: "held_ns",
        name: "turnout_worker_held_seconds_total",
        kind: "counter",
        help: "Of the time asleep, the wait for a CPU another thread held as naps and probed sleeps ended.",
        get: |w| w.worker.held_ns as f64 / 1e9,
    },
    Metric {
        key: "policy.budget_ns",
        name: "turnout_worker_latency_budget_seconds",
        kind: "gauge",
        help: "The adaptive wake-up policy's latency budget.",
        get: |w| w.worker.policy.budget_ns as f64 / 1e9,
    },
    Metric {
        key: "policy.nap_ns",
        name: "turnout_worker_nap_seconds",
        kind: "gauge",
        help: "Current nap length (0 unless moderating).",
        get: |w| w.worker.policy.nap_ns as f64 / 1e9,
    },
    Metric {
        key: "policy.gap_ns",
        name: "turnout_worker_gap_seconds",
        kind: "gauge",
        help:
            "Poll regime: the interval between polls chosen after the last small batch (0: none).",
        get: |w| w.worker.policy.gap_ns as f64 / 1e9,
    },
    Metric {
        key: "policy.wake_p99_ns",
        name: "turnout_worker_wake_p99_seconds",
        kind: "gauge",
        help: "Wake-up latency the worker measured on this host, p99 of the last samples.",
        get: |w| w.worker.policy.wake_p99_ns as f64 / 1e9,
    },
    Metric {
        key: "policy.regime",
        name: "turnout_worker_regime",
        kind: "gauge",
        help: "The wake-up regime in force: 0 poll, 1 interrupt, 2 moderate.",
        get: |w| w.worker.policy.regime.to_code() as f64,
    },
    Metric {
        key: "cpu_ns",
        name: "turnout_worker_cpu_seconds_total",
        kind: "counter",
        help: "CPU time (user + system) used by the worker thread.",
        get: |w| w.cpu_ns as f64 / 1e9,
    },
    Metric {
        key: "cycles_per_packet",
        name: "turnout_worker_cycles_per_packet",
        kind: "gauge",
        help: "Busy cycles per received frame since the last reset.",
        get: |w| w.worker.cycles_per_packet,
    },
    Metric {
        key: "rx_queues",
        name: "turnout_worker_rx_queues",
        kind: "gauge",
        help: "Receive queues owned by the worker.",
        get: |w| w.worker.rx_queues as f64,
    },
];

/// The keys of a worker's `stats` JSON that no metric exports: its
/// identity (the `worker` label, its CPU and thread). Of `policy` (the
/// wake-up policy's state, which `turnout ctl stats` shows as text) only
/// the keys of [`WORKER_METRICS`] are exported.
pub const WORKER_NOT_EXPORTED: &[&str] = &["id", "cpu", "tid", "policy"];

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn at<'a>(v: &'a Value, key: &str) -> &'a Value {
        key.split('.').fold(v, |v, k| &v[k])
    }

    /// A worker whose every counter has a different value.
    fn worker() -> WorkerStatsResult {
        let mut policy = fabric::PolicyView {
            budget_ns: 100_001,
            nap_ns: 100_002,
            gap_ns: 100_003,
            wake_p99_ns: 100_004,
            ..Default::default()
        };
        policy.regime = fabric::Regime::Moderate;
        WorkerStatsResult {
            worker: fabric::WorkerStats {
                id: 3,
                cpu: Some(5),
                tid: 4242,
                rx_queues: 7,
                packets: 11,
                batches: 13,
                busy_ns: 17_000_000_001,
                idle_ns: 19_000_000_002,
                busy_cycles: 23,
                idle_cycles: 29,
                kick_cycles: 71,
                sleeps: 31,
                wakeups: 37,
                missed_kicks: 79,
                naps: 41,
                gaps: 43,
                backoffs: 67,
                asleep_ns: 47_000_000_003,
                sleep_cpu_ns: 53_000_000_004,
                held_ns: 73_000_000_006,
                copy_stream_memif: 1,
                copy_stream_vhost_user: 97,
                copy_probes: 83,
                copy_switches: 89,
                cycles_per_packet: 59.5,
                policy,
            },
            cpu_ns: 61_000_000_005,
        }
    }

    #[test]
    fn each_metric_reads_the_key_the_api_names() {
        let w = worker();
        let json = serde_json::to_value(&w).unwrap();
        for m in &WORKER_METRICS {
            let v = at(&json, m.key);
            let api = match (m.key, v) {
                ("policy.regime", Value::String(s)) => {
                    let r: fabric::Regime = serde_json::from_value(Value::String(s.clone()))
                        .unwrap_or_else(|e| panic!("{}: {e}", m.key));
                    r.to_code() as f64
                }
                _ => v.as_f64().unwrap_or_else(|| panic!("{}: {v}", m.key)),
            };
            let scale = if m.key.ends_with("_ns") { 1e-9 } else { 1.0 };
            let got = (m.get)(&w);
            assert!(
                (got - api * scale).abs() <= 1e-9 * got.abs().max(1.0),
                "{}: metric {got}, api {api}",
                m.name
            );
        }
        let q = QueueStats {
            queue: 1,
            rx_packets: 2,
            rx_bytes: 3,
            tx_packets: 4,
            tx_bytes: 5,
            rx_ring_full: 6,
        };
        let json = serde_json::to_value(&q).unwrap();
        for m in &QUEUE_METRICS {
            assert_eq!((m.get)(&q), json[m.key].as_f64().unwrap(), "{}", m.name);
        }
    }

    #[test]
    fn every_counter_of_the_api_is_a_metric_or_said_not_to_be() {
        let json = serde_json::to_value(worker()).unwrap();
        let exported: Vec<&str> = WORKER_METRICS.iter().map(|m| m.key).collect();
        for (k, v) in json.as_object().unwrap() {
            if WORKER_NOT_EXPORTED.contains(&k.as_str()) {
                continue;
            }
            assert!(v.is_number(), "{k} is not a number: {v}");
            assert!(
                exported.contains(&k.as_str()),
                "worker key {k} has no metric"
            );
        }
        let q = serde_json::to_value(QueueStats {
            queue: 0,
            rx_packets: 0,
            rx_bytes: 0,
            tx_packets: 0,
            tx_bytes: 0,
            rx_ring_full: 0,
        })
        .unwrap();
        let exported: Vec<&str> = QUEUE_METRICS.iter().map(|m| m.key).collect();
        for k in q.as_object().unwrap().keys() {
            assert!(
                k == "queue" || exported.contains(&k.as_str()),
                "queue key {k}"
            );
        }
        // one family per name
        let mut names: Vec<&str> = WORKER_METRICS.iter().map(|m| m.name).collect();
        names.extend(QUEUE_METRICS.iter().map(|m| m.name));
        let n = names.len();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), n);
    }

    /// The `stats` JSON keeps the shape `turnout ctl` and the workbench read.
    #[test]
    fn the_json_shape() {
        let json = serde_json::to_value(worker()).unwrap();
        let mut keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        keys.sort();
        assert_eq!(
            keys,
            [
                "asleep_ns",
                "backoffs",
                "batches",
                "busy_cycles",
                "busy_ns",
                "copy_probes",
                "copy_stream_memif",
                "copy_stream_vhost_user",
                "copy_switches",
                "cpu",
                "cpu_ns",
                "cycles_per_packet",
                "gaps",
                "held_ns",
                "id",
                "idle_cycles",
                "idle_ns",
                "kick_cycles",
                "missed_kicks",
                "naps",
                "packets",
                "policy",
                "rx_queues",
                "sleep_cpu_ns",
                "sleeps",
                "tid",
                "wakeups"
            ]
        );
    }

    /// A worker's JSON reads back (the fabric's fields flattened beside
    /// `cpu_ns`), also one from before the fields marked default.
    #[test]
    fn the_json_reads_back() {
        let json = serde_json::to_value(worker()).unwrap();
        let back: WorkerStatsResult = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(serde_json::to_value(&back).unwrap(), json);
        let mut old = json;
        let o = old.as_object_mut().unwrap();
        for k in [
            "wakeups",
            "missed_kicks",
            "naps",
            "gaps",
            "backoffs",
            "asleep_ns",
            "sleep_cpu_ns",
            "held_ns",
            "copy_stream_memif",
            "copy_stream_vhost_user",
            "copy_probes",
            "copy_switches",
            "policy",
        ] {
            o.remove(k);
        }
        let back: WorkerStatsResult = serde_json::from_value(old).unwrap();
        assert_eq!((back.worker.packets, back.worker.naps), (11, 0));
        assert_eq!(back.cpu_ns, 61_000_000_005);
    }
}
