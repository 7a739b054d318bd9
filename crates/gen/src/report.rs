//! The JSON document (docs/turnout-gen.md, schema `turnout-gen/1`) and the
//! interval lines. Fields that do not apply to a role are absent.

use serde::Serialize;

use crate::engine::{FwdStats, Receiver, StreamReport, TxStats};
use crate::latency::LatencySummary;

/// Schema of the final document.
pub const SCHEMA: &str = "turnout-gen/1";
/// Schema of the interval lines.
pub const INTERVAL_SCHEMA: &str = "turnout-gen/1-interval";

/// The final document.
#[derive(Serialize, Debug)]
pub struct Doc {
    /// `turnout-gen/1`.
    pub schema: &'static str,
    /// Role name.
    pub role: &'static str,
    /// Crate version.
    pub version: &'static str,
    /// Why the run ended: "duration", "count", "signal", "done".
    pub stopped_by: &'static str,
    /// The configuration as understood.
    pub config: serde_json::Value,
    /// Sender section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tx: Option<TxSection>,
    /// Receiver section.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rx: Option<RxSection>,
    /// Forwarder section (reflect, fwd).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fwd: Option<FwdSection>,
    /// Backend counters of every port, by port name.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub ports: Vec<PortSection>,
    /// What went wrong, when the run ended early (exit code 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// CPU time of the (single) thread since it started its loop, ns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread_cpu_ns: Option<u64>,
    /// Interrupt-mode receive loops: sleeps after which a receive ring
    /// was half full or more (the receiver then polled for a second).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub late_wakes: Option<u64>,
    /// Interrupt-mode receive loops: sleeps on the notify fds (a sender
    /// kicked to end each one, unless it timed out).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<u64>,
}

/// `tx`.
#[derive(Serialize, Debug)]
pub struct TxSection {
    /// Frames handed to the port in the measured window.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Length of the measured window.
    pub duration_s: f64,
    /// packets / duration_s.
    pub rate_pps: f64,
    /// Requested rate (0 = as fast as possible).
    pub requested_pps: f64,
    /// Frames refused by a full port (paced sending only).
    pub full: u64,
    /// Frames sent in the warm-up (not counted above).
    pub warmup_packets: u64,
    /// Frames refused by a full port during the warm-up.
    pub warmup_full: u64,
    /// Most frames the sender ever was behind its schedule.
    pub behind_max: u64,
    /// Bursts tried in the measured window.
    pub attempts: u64,
    /// Of those, bursts the port had room for fewer frames than due
    /// (back-pressure from the peer).
    pub pushback: u64,
    /// The measured window on CLOCK_MONOTONIC (ns), so others can measure
    /// over exactly the traffic (the bench samples the SUT's CPU).
    pub window_start_ns: u64,
    /// See `window_start_ns`.
    pub window_end_ns: u64,
    /// CPU time the sending thread used in the measured window, ns.
    pub cpu_ns: u64,
    /// Per direction with `txrx --bidir` (the fields above are their sums).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub directions: Vec<TxSection>,
    /// Stream id (per direction only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stream: Option<u32>,
}

impl TxSection {
    /// The sum of several directions, with each kept in `directions`.
    pub fn sum(dirs: Vec<TxSection>) -> Self {
        let start = dirs.iter().map(|d| d.window_start_ns).min().unwrap_or(0);
        let end = dirs.iter().map(|d| d.window_end_ns).max().unwrap_or(0);
        let d = end.saturating_sub(start) as f64 / 1e9;
        let sum = |f: &dyn Fn(&TxSection) -> u64| dirs.iter().map(f).sum::<u64>();
        let packets = sum(&|x| x.packets);
        TxSection {
            packets,
            bytes: sum(&|x| x.bytes),
            duration_s: d,
            rate_pps: if d > 0.0 { packets as f64 / d } else { 0.0 },
            requested_pps: dirs.iter().map(|x| x.requested_pps).sum(),
            full: sum(&|x| x.full),
            warmup_packets: sum(&|x| x.warmup_packets),
            warmup_full: sum(&|x| x.warmup_full),
            behind_max: dirs.iter().map(|x| x.behind_max).max().unwrap_or(0),
            attempts: sum(&|x| x.attempts),
            pushback: sum(&|x| x.pushback),
            window_start_ns: start,
            window_end_ns: end,
            // one thread sends every direction: its CPU over the union
            cpu_ns: dirs.iter().map(|x| x.cpu_ns).max().unwrap_or(0),
            directions: dirs,
            stream: None,
        }
    }

    /// From the sender's counters and window.
    pub fn new(st: &TxStats, window_ns: (u64, u64), requested_pps: f64) -> Self {
        let d = (window_ns.1 - window_ns.0) as f64 / 1e9;
        TxSection {
            packets: st.packets,
            bytes: st.bytes,
            duration_s: d,
            rate_pps: if d > 0.0 { st.packets as f64 / d } else { 0.0 },
            requested_pps,
            full: st.full,
            warmup_packets: st.warmup_packets,
            warmup_full: st.warmup_full,
            behind_max: st.behind_max,
            attempts: st.attempts,
            pushback: st.pushback,
            window_start_ns: window_ns.0,
            window_end_ns: window_ns.1,
            cpu_ns: st.cpu_end_ns.saturating_sub(st.cpu_start_ns),
            directions: Vec::new(),
            stream: None,
        }
    }
}

/// `rx`.
#[derive(Serialize, Debug)]
pub struct RxSection {
    /// Measured frames of ours.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Frames without the magic (or not well-formed IP/UDP).
    pub foreign: u64,
    /// Their bytes.
    pub foreign_bytes: u64,
    /// Warm-up frames (stream id with the high bit set), not counted.
    pub warmup: u64,
    /// Frames of streams beyond the tracker's capacity.
    pub untracked: u64,
    /// Frames of ours with a sequence number no sender reaches (corrupted
    /// or forged), not counted anywhere else.
    pub implausible: u64,
    /// First to last measured arrival.
    pub duration_s: f64,
    /// packets / duration_s.
    pub rate_pps: f64,
    /// Sum over streams.
    pub lost: u64,
    /// Sum over streams.
    pub reordered: u64,
    /// Sum over streams.
    pub duplicated: u64,
    /// Per stream.
    pub streams: Vec<StreamReport>,
    /// One-way latency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub latency_ns: Option<LatencySummary>,
    /// RFC 3550 jitter over the first measured frame of each receive burst.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub jitter_ns: Option<f64>,
    /// Latency samples whose send time was in the future (recorded as 0).
    pub latency_future: u64,
    /// Touch checksum (with --touch).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub touch_sum: Option<u64>,
    /// Receive bursts that brought frames (whole run, warm-up included).
    pub bursts: u64,
    /// Of those, bursts that filled the receive batch right after one that
    /// did too: frames kept waiting, the receiver was behind its peer.
    pub backlog_bursts: u64,
}

impl RxSection {
    /// From the receiver.
    pub fn new(r: &Receiver, touch: bool) -> Self {
        let streams = r.stream_reports();
        let d = match r.first_ns {
            Some(f) => (r.last_ns - f) as f64 / 1e9,
            None => 0.0,
        };
        let lat = r.latency.summary();
        RxSection {
            packets: r.packets,
            bytes: r.bytes,
            foreign: r.foreign,
            foreign_bytes: r.foreign_bytes,
            warmup: r.warmup,
            untracked: r.untracked,
            implausible: r.implausible,
            duration_s: d,
            rate_pps: if d > 0.0 { r.packets as f64 / d } else { 0.0 },
            lost: streams.iter().map(|s| s.lost).sum(),
            reordered: streams.iter().map(|s| s.reordered).sum(),
            duplicated: streams.iter().map(|s| s.duplicated).sum(),
            jitter_ns: lat.as_ref().map(|_| r.jitter.ns()),
            latency_ns: lat,
            streams,
            latency_future: r.latency.future,
            touch_sum: touch.then_some(r.touch_sum),
            bursts: r.bursts,
            backlog_bursts: r.backlog_bursts,
        }
    }
}

/// `fwd` (reflect and fwd roles).
#[derive(Serialize, Debug)]
pub struct FwdSection {
    /// Frames sent on, all directions.
    pub packets: u64,
    /// Frames dropped, all directions and reasons.
    pub dropped: u64,
    /// Frames received, all directions.
    pub received: u64,
    /// Per direction ("a_to_b", "b_to_a", or "reflect").
    pub directions: Vec<FwdDirection>,
    /// Length of the run.
    pub duration_s: f64,
}

/// One direction of a forwarder.
#[derive(Serialize, Debug)]
pub struct FwdDirection {
    /// Name.
    pub name: &'static str,
    /// Counters (drops by reason).
    #[serde(flatten)]
    pub stats: FwdStats,
}

impl FwdSection {
    /// From the directions' counters.
    pub fn new(dirs: Vec<(&'static str, FwdStats)>, duration_s: f64) -> Self {
        FwdSection {
            packets: dirs.iter().map(|d| d.1.packets).sum(),
            dropped: dirs.iter().map(|d| d.1.dropped()).sum(),
            received: dirs.iter().map(|d| d.1.received).sum(),
            directions: dirs
                .into_iter()
                .map(|(name, stats)| FwdDirection { name, stats })
                .collect(),
            duration_s,
        }
    }
}

/// Backend counters of one port.
#[derive(Serialize, Debug)]
pub struct PortSection {
    /// Which option named it: "port", "rx_port", "port2".
    pub name: String,
    /// Backend.
    pub kind: &'static str,
    /// Largest frame it carries.
    pub max_frame_b: u32,
    /// Backend-specific counters.
    pub counters: serde_json::Map<String, serde_json::Value>,
}

impl PortSection {
    /// Snapshot of `port`.
    pub fn of(name: &str, port: &dyn fabric::Port) -> Self {
        let info = port.info();
        let counters = port
            .backend_counters()
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v)))
            .collect();
        PortSection {
            name: name.to_string(),
            kind: info.kind,
            max_frame_b: info.max_frame_b,
            counters,
        }
    }
}

/// Writes the interval line for `[prev, now)` into `out` (reused buffer).
#[allow(clippy::too_many_arguments)] // one line's fields, named at the call site
pub fn interval_line(
    out: &mut String,
    t_s: f64,
    dt_s: f64,
    d_tx: u64,
    d_rx: u64,
    lost: u64,
    tx_total: u64,
    rx_total: u64,
) {
    use std::fmt::Write;
    out.clear();
    let rate = |d: u64| if dt_s > 0.0 { d as f64 / dt_s } else { 0.0 };
    let _ = write!(
        out,
        "{{\"schema\":\"{INTERVAL_SCHEMA}\",\"t_s\":{t_s:.3},\"tx_pps\":{:.1},\"rx_pps\":{:.1},\"lost\":{lost},\"tx_packets\":{tx_total},\"rx_packets\":{rx_total}}}",
        rate(d_tx),
        rate(d_rx)
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_line_is_json() {
        let mut s = String::with_capacity(256);
        interval_line(&mut s, 1.0, 0.5, 1000, 900, 3, 5000, 4000);
        let v: serde_json::Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["schema"], INTERVAL_SCHEMA);
        assert_eq!(v["tx_pps"], 2000.0);
        assert_eq!(v["rx_pps"], 1800.0);
        assert_eq!(v["lost"], 3);
    }
}
