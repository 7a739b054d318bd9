//! What a person at a terminal reads at the end of a run, and when the run
//! counts as a failure although it ended normally.
//!
//! The bench reads the JSON document (docs/turnout-gen.md); a person gets a
//! few lines: what was sent, received, lost and why, the rate, and the
//! latency percentiles. Both are made from the same document (as JSON), so
//! the summary never says something the document does not.

use serde_json::Value;

/// Exit code of a `txrx` run that received none of the frames it sent
/// (unless `--allow-no-rx`).
pub const EXIT_NOTHING_RECEIVED: i32 = 4;

fn u(v: &Value, k: &str) -> u64 {
    v.get(k).and_then(Value::as_u64).unwrap_or(0)
}

fn f(v: &Value, k: &str) -> f64 {
    v.get(k).and_then(Value::as_f64).unwrap_or(0.0)
}

/// `4860123` → `4 860 123`.
pub fn count(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// Frames per second with a unit: `972.0 kpps`, `1.00 Mpps`.
pub fn rate(pps: f64) -> String {
    if pps >= 1e6 {
        format!("{:.2} Mpps", pps / 1e6)
    } else if pps >= 1e3 {
        format!("{:.1} kpps", pps / 1e3)
    } else {
        format!("{pps:.0} pps")
    }
}

/// A time in ns with a unit: `850 ns`, `12.3 µs`, `1.21 ms`, `2.50 s`.
pub fn duration_ns(ns: u64) -> String {
    let x = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", x / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", x / 1e6)
    } else {
        format!("{:.2} s", x / 1e9)
    }
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "-".into();
    }
    let p = 100.0 * part as f64 / whole as f64;
    if p > 0.0 && p < 0.001 {
        "< 0.001 %".into()
    } else {
        format!("{p:.3} %")
    }
}

/// The lines on the sender's side: sent, rate, and what was not sent.
fn tx_lines(out: &mut Vec<String>, tx: &Value) {
    let sent = u(tx, "packets");
    let asked = f(tx, "requested_pps");
    let asked = if asked > 0.0 {
        format!(" (asked {})", rate(asked))
    } else {
        " (as fast as possible)".into()
    };
    out.push(format!(
        "  sent      {:>13} frames in {:.2} s, {}{asked}",
        count(sent),
        f(tx, "duration_s"),
        rate(f(tx, "rate_pps"))
    ));
    let full = u(tx, "full");
    if full > 0 {
        out.push(format!(
            "  not sent  {:>13} frames: the port was full (its peer did not take them in time)",
            count(full)
        ));
    }
    let attempts = u(tx, "attempts");
    let pushback = u(tx, "pushback");
    if attempts > 0 && pushback * 10 >= attempts {
        out.push(format!(
            "            the port pushed back on {} of the sends: its peer set the pace",
            pct(pushback, attempts)
        ));
    }
}

/// The lines on the receiver's side: received, lost with why, latency.
fn rx_lines(out: &mut Vec<String>, rx: &Value, sent: Option<u64>) {
    let got = u(rx, "packets");
    out.push(format!(
        "  received  {:>13} frames, {}",
        count(got),
        rate(f(rx, "rate_pps"))
    ));
    let lost = u(rx, "lost");
    let of = sent.map(|s| format!(" ({} of those sent)", pct(lost, s)));
    if lost > 0 {
        out.push(format!(
            "  lost      {:>13} frames{}: never arrived (dropped on the way, or still on it when \
             the run ended: a longer --cooldown-s waits for those)",
            count(lost),
            of.unwrap_or_default()
        ));
    } else {
        out.push(format!("  lost      {:>13}", 0));
    }
    let mut odd = Vec::new();
    for (k, what) in [
        ("reordered", "reordered"),
        ("duplicated", "duplicated"),
        ("foreign", "foreign (not turnout-gen's, or not its stream)"),
        ("implausible", "implausible (corrupted sequence numbers)"),
        ("untracked", "of untracked streams"),
    ] {
        let n = u(rx, k);
        if n > 0 {
            odd.push(format!("{} {what}", count(n)));
        }
    }
    if !odd.is_empty() {
        out.push(format!("  also      {}", odd.join(", ")));
    }
    match rx.get("latency_ns") {
        Some(l) if u(l, "count") > 0 => out.push(format!(
            "  latency   p50 {}, p99 {}, max {} (one way, {} frames)",
            duration_ns(u(l, "p50")),
            duration_ns(u(l, "p99")),
            duration_ns(u(l, "max")),
            count(u(l, "count"))
        )),
        _ => out.push("  latency   - (no frame received)".into()),
    }
}

/// The lines of a forwarder (reflect, fwd): received, forwarded, dropped by reason.
fn fwd_lines(out: &mut Vec<String>, fwd: &Value) {
    out.push(format!(
        "  received  {:>13} frames in {:.2} s",
        count(u(fwd, "received")),
        f(fwd, "duration_s")
    ));
    out.push(format!(
        "  forwarded {:>13} frames",
        count(u(fwd, "packets"))
    ));
    let dropped = u(fwd, "dropped");
    if dropped == 0 {
        out.push(format!("  dropped   {:>13}", 0));
        return;
    }
    let mut why = Vec::new();
    for (k, what) in [
        ("dropped_tx_full", "the out port was full"),
        ("dropped_oversize", "larger than the out port carries"),
        ("dropped_runt", "shorter than an Ethernet header"),
    ] {
        let n: u64 = fwd
            .get("directions")
            .and_then(Value::as_array)
            .map(|ds| ds.iter().map(|d| u(d, k)).sum())
            .unwrap_or(0);
        if n > 0 {
            why.push(format!("{} {what}", count(n)));
        }
    }
    out.push(format!(
        "  dropped   {:>13} frames: {}",
        count(dropped),
        why.join(", ")
    ));
}

/// The summary of a final document (as JSON), a few lines ending in '\n'.
pub fn summary(doc: &Value) -> String {
    let role = doc.get("role").and_then(Value::as_str).unwrap_or("?");
    let cfg = doc.get("config").cloned().unwrap_or(Value::Null);
    let s = |k: &str| cfg.get(k).and_then(Value::as_str).map(str::to_string);
    let mut head = format!("turnout-gen {role}");
    match (s("port"), s("rx_port"), s("port2")) {
        (Some(p), Some(r), _) if r != p => head += &format!(": {p} -> {r}"),
        (Some(p), _, Some(p2)) => head += &format!(": {p} <-> {p2}"),
        (Some(p), _, _) => head += &format!(": {p}"),
        _ => {}
    }
    if let Some(b) = cfg.get("size_b").and_then(Value::as_u64) {
        head += &format!(", {b} B frames");
    } else if cfg.get("sizes_b").is_some() {
        head += ", mixed frame sizes";
    }
    let mut out = vec![head];
    let tx = doc.get("tx");
    if let Some(tx) = tx {
        tx_lines(&mut out, tx);
    }
    if let Some(rx) = doc.get("rx") {
        rx_lines(&mut out, rx, tx.map(|t| u(t, "packets")));
    }
    if let Some(fwd) = doc.get("fwd") {
        fwd_lines(&mut out, fwd);
    }
    match doc.get("stopped_by").and_then(Value::as_str) {
        Some("stalled") => out.push("  stopped   the port took no frame for --stall-s".into()),
        Some("signal") => out.push("  stopped   by a signal".into()),
        _ => {}
    }
    out.push("  (the whole JSON document: --json FILE, or send stdout to a pipe or file)".into());
    let mut text = out.join("\n");
    text.push('\n');
    text
}

/// Why a `txrx` run whose document is `doc` failed although it ran to its
/// end: it received none of the frames it sent. None when it received some,
/// sent none, or is another role.
pub fn nothing_received(doc: &Value) -> Option<String> {
    if doc.get("role").and_then(Value::as_str) != Some("txrx") {
        return None;
    }
    let (tx, rx) = (doc.get("tx")?, doc.get("rx")?);
    let sent = u(tx, "packets");
    if sent == 0 || u(rx, "packets") > 0 {
        return None;
    }
    let cfg = doc.get("config").cloned().unwrap_or(Value::Null);
    let port = cfg.get("port").and_then(Value::as_str).unwrap_or("?");
    let rx_port = cfg.get("rx_port").and_then(Value::as_str).unwrap_or(port);
    let mut msg = format!(
        "received none of the {} frames it sent on {port}",
        count(sent)
    );
    if rx_port == port {
        msg += " (no --rx-port: it listened on the port it sent on, where a switch never \
                sends a frame back; give --rx-port the port the switch forwards to)";
    } else {
        msg += &format!(" on {rx_port}: is that where the switch forwards them?");
    }
    let foreign = u(rx, "foreign");
    if foreign > 0 {
        msg += &format!(" ({} other frames arrived)", count(foreign));
    }
    msg += "; --allow-no-rx if that is expected";
    Some(msg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn txrx(sent: u64, got: u64, lost: u64, full: u64) -> Value {
        json!({
            "schema": "turnout-gen/1", "role": "txrx", "stopped_by": "duration",
            "config": { "port": "memif:/run/turnout/memif.sock",
                        "rx_port": "memif:/run/turnout/memif.sock,id=1", "size_b": 64 },
            "tx": { "packets": sent, "duration_s": 5.0, "rate_pps": sent as f64 / 5.0,
                    "requested_pps": 1e6, "full": full, "attempts": 1000, "pushback": 3 },
            "rx": { "packets": got, "rate_pps": got as f64 / 5.0, "lost": lost,
                    "reordered": 0, "duplicated": 0, "foreign": 0,
                    "latency_ns": { "count": got, "p50": 8200, "p99": 31000, "max": 1_210_000 } }
        })
    }

    #[test]
    fn numbers_read_as_people_write_them() {
        assert_eq!(count(0), "0");
        assert_eq!(count(999), "999");
        assert_eq!(count(4_860_123), "4 860 123");
        assert_eq!(count(1_000), "1 000");
        assert_eq!(rate(972_000.0), "972.0 kpps");
        assert_eq!(rate(1_000_000.0), "1.00 Mpps");
        assert_eq!(rate(12.0), "12 pps");
        assert_eq!(duration_ns(850), "850 ns");
        assert_eq!(duration_ns(8_200), "8.2 µs");
        assert_eq!(duration_ns(1_210_000), "1.21 ms");
        assert_eq!(pct(1, 4), "25.000 %");
        assert_eq!(pct(1, 1_000_000_000), "< 0.001 %");
    }

    #[test]
    fn a_txrx_summary_has_sent_received_lost_with_why_rate_and_percentiles() {
        let s = summary(&txrx(5_000_000, 4_999_000, 1_000, 250));
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("turnout-gen txrx: memif:/run/turnout/memif.sock -> "));
        assert!(lines[0].ends_with("id=1, 64 B frames"), "{s}");
        let line = |p: &str| {
            lines
                .iter()
                .find(|l| l.trim_start().starts_with(p))
                .unwrap_or_else(|| panic!("no '{p}' line in\n{s}"))
                .to_string()
        };
        assert!(line("sent").contains("5 000 000 frames"), "{s}");
        assert!(line("sent").contains("1.00 Mpps (asked 1.00 Mpps)"), "{s}");
        assert!(
            line("not sent").contains("250 frames: the port was full"),
            "{s}"
        );
        assert!(
            line("received").contains("4 999 000 frames, 999.8 kpps"),
            "{s}"
        );
        assert!(line("lost").contains("1 000 frames (0.020 % of those sent): never arrived"));
        assert!(
            line("latency").contains("p50 8.2 µs, p99 31.0 µs, max 1.21 ms"),
            "{s}"
        );
        assert!(s.ends_with("pipe or file)\n"));
        // nothing lost, nothing refused: no reasons to give
        let s = summary(&txrx(100, 100, 0, 0));
        assert!(
            !s.contains("not sent") && !s.contains("never arrived"),
            "{s}"
        );
        assert!(s.contains("lost                  0"), "{s}");
    }

    #[test]
    fn a_forwarder_summary_gives_each_drop_reason() {
        let d = json!({
            "role": "fwd", "stopped_by": "signal",
            "config": { "port": "memif:/a", "port2": "memif:/b" },
            "fwd": { "received": 1000, "packets": 990, "dropped": 10, "duration_s": 2.0,
                     "directions": [
                        { "name": "a_to_b", "dropped_tx_full": 7, "dropped_oversize": 0,
                          "dropped_runt": 1 },
                        { "name": "b_to_a", "dropped_tx_full": 2, "dropped_oversize": 0,
                          "dropped_runt": 0 } ] }
        });
        let s = summary(&d);
        assert!(
            s.starts_with("turnout-gen fwd: memif:/a <-> memif:/b\n"),
            "{s}"
        );
        assert!(
            s.contains("10 frames: 9 the out port was full, 1 shorter than an Ethernet header"),
            "{s}"
        );
        assert!(s.contains("stopped   by a signal"), "{s}");
    }

    #[test]
    fn nothing_received_is_a_failure_of_txrx_only_and_says_where_to_look() {
        assert_eq!(nothing_received(&txrx(10, 10, 0, 0)), None);
        assert_eq!(nothing_received(&txrx(0, 0, 0, 0)), None, "sent nothing");
        let m = nothing_received(&txrx(4_860_000, 0, 4_860_000, 0)).unwrap();
        assert!(m.starts_with("received none of the 4 860 000 frames it sent on memif:"));
        assert!(m.contains("is that where the switch forwards them?"), "{m}");
        assert!(m.ends_with("--allow-no-rx if that is expected"), "{m}");
        // the README's old line: no --rx-port
        let mut d = txrx(4_860_000, 0, 4_860_000, 0);
        d["config"]["rx_port"] = d["config"]["port"].clone();
        let m = nothing_received(&d).unwrap();
        assert!(m.contains("no --rx-port"), "{m}");
        let mut d = txrx(5, 0, 5, 0);
        d["role"] = json!("tx");
        assert_eq!(nothing_received(&d), None);
    }
}
