"""What ``turnout ctl`` prints: tables, rates between two ``stats``, the
flows logic's dumps and the live ``stats --watch`` view."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .client import CtlClient

__all__ = ["PortRate", "flows_text", "format_table", "groups_text", "meters_text",
           "port_numbers_note", "rates", "worker_rates"]



def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: numbers right-aligned, everything else left."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))

    def is_num(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    numeric = [
        any(is_num(r[i]) for r in rows) and all(is_num(r[i]) or r[i] is None for r in rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def _si(x: float) -> str:
    """1234567 → '1.23M'."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def _drops_text(drops: dict[str, int]) -> str:
    nz = {k: v for k, v in sorted(drops.items()) if v}
    return ", ".join(f"{k}={v}" for k, v in nz.items()) if nz else "-"


@dataclass(frozen=True)
class PortRate:
    """Per-port rates between two ``stats`` snapshots."""

    name: str
    rx_pps: float
    tx_pps: float
    rx_bps: float
    tx_bps: float
    drops_pps: float


def rates(prev: dict[str, Any], cur: dict[str, Any]) -> list[PortRate]:
    """Per-port packet, bit and drop rates between two ``stats`` results.

    Ports that appear in only one snapshot are left out; a counter that went
    backwards (``stats.reset`` in between) counts from zero.
    """
    dt_s = (cur["time_ns"] - prev["time_ns"]) / 1e9
    if dt_s <= 0:
        return []
    before = {p["name"]: p for p in prev["ports"]}
    out = []
    for p in cur["ports"]:
        q = before.get(p["name"])
        if q is None:
            continue

        def d(key: str, p: dict[str, Any] = p, q: dict[str, Any] = q) -> float:
            a, b = q[key], p[key]
            return float((b - a if b >= a else b) / dt_s)

        dp = sum(p["drops"].values())
        dq = sum(q["drops"].values())
        out.append(
            PortRate(
                name=p["name"],
                rx_pps=d("rx_packets"),
                tx_pps=d("tx_packets"),
                rx_bps=8 * d("rx_bytes"),
                tx_bps=8 * d("tx_bytes"),
                drops_pps=(dp - dq if dp >= dq else dp) / dt_s,
            )
        )
    return out


def _print_json(v: Any) -> None:
    print(json.dumps(v, indent=2, sort_keys=True))


def _show_stats(s: dict[str, Any]) -> None:
    rows = [
        [
            p["name"],
            p["kind"],
            p["link_up"],
            p["rx_packets"],
            p["rx_bytes"],
            p["tx_packets"],
            p["tx_bytes"],
            p.get("rx_ring_full", 0),
            sum(p["drops"].values()),
            _drops_text(p["drops"]),
        ]
        for p in s["ports"]
    ]
    print(
        format_table(
            [
                "port",
                "kind",
                "up",
                "rx_pkts",
                "rx_bytes",
                "tx_pkts",
                "tx_bytes",
                "rx_full",
                "drops",
                "by reason",
            ],
            rows,
        )
    )
    queues = [
        [p["name"], q["queue"], q["rx_packets"], q["rx_bytes"], q["tx_packets"], q["tx_bytes"]]
        for p in s["ports"]
        if len(p["queues"]) > 1
        for q in p["queues"]
    ]
    if queues:
        print()
        print(format_table(["port", "queue", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes"], queues))
    backend = [
        [p["name"], ", ".join(f"{k}={v}" for k, v in sorted(p["backend"].items()) if v) or "-"]
        for p in s["ports"]
        if p.get("backend")
    ]
    if backend:
        print()
        print(format_table(["port", "backend counters (non-zero)"], backend))
    print()
    wrows = []
    for w in s["workers"]:
        total = w["busy_ns"] + w["idle_ns"]
        busy = 100.0 * w["busy_ns"] / total if total else 0.0
        wrows.append(
            [
                w["id"],
                w["cpu"],
                w["rx_queues"],
                w["packets"],
                w["batches"],
                round(busy, 1),
                round(w["cycles_per_packet"], 1),
                w["sleeps"],
                w.get("wakeups", 0),
                w.get("naps", 0),
                round(100.0 * w.get("asleep_ns", 0) / total, 1) if total else 0.0,
                round(w.get("cpu_ns", 0) / 1e9, 2),
                _policy_text(w.get("policy") or {}),
            ]
        )
    print(
        format_table(
            [
                "worker",
                "cpu",
                "queues",
                "packets",
                "batches",
                "busy_%",
                "cyc/pkt",
                "sleeps",
                "wakeups",
                "naps",
                "asleep_%",
                "cpu_s",
                "wake-up policy",
            ],
            wrows,
        )
    )
    refused = [
        [m, sum(errors.values()), ", ".join(f"{e}={n}" for e, n in sorted(errors.items())) or "-"]
        for m, errors in sorted((s.get("openflow") or {}).get("refused", {}).items())
    ]
    if any(r[1] for r in refused):
        print()
        print(format_table(["openflow refused", "count", "by error"], refused))


def worker_rates(prev: dict[str, Any], cur: dict[str, Any]) -> list[dict[str, Any]]:
    """Per worker between two ``stats`` results: CPU (its thread's CPU
    clock), busy and asleep shares of the time, sleeps, wake-ups and naps
    per second, and the wake-up policy's current state."""
    dt = (cur["time_ns"] - prev["time_ns"]) / 1e9
    if dt <= 0:
        return []
    before = {w["id"]: w for w in prev.get("workers", [])}
    out = []
    for w in cur.get("workers", []):
        b = before.get(w["id"])
        if b is None:
            continue

        def d(k: str, w: dict[str, Any] = w, b: dict[str, Any] = b) -> float:
            return float(max(0, w.get(k, 0) - b.get(k, 0)))

        out.append({
            "id": w["id"],
            "cpu_pct": 100.0 * d("cpu_ns") / 1e9 / dt,
            "busy_pct": 100.0 * d("busy_ns") / 1e9 / dt,
            "asleep_pct": 100.0 * d("asleep_ns") / 1e9 / dt,
            "sleeps_ps": d("sleeps") / dt,
            "wakeups_ps": d("wakeups") / dt,
            "naps_ps": d("naps") / dt,
            "gaps_ps": d("gaps") / dt,
            "policy": _policy_text(w.get("policy") or {}),
        })
    return out


def port_numbers_note(ports: Sequence[dict[str, Any]]) -> str:
    """The first line of ``dump-flows`` / ``dump-groups``: the numbers in
    the flow texts are turnoutd's port ids (what `add` takes back), not the
    OpenFlow port numbers ovs-ofctl shows for the same flows (id + 1)."""
    ids = ", ".join(f"{p['id']}={p['name']}" for p in sorted(ports, key=lambda p: int(p["id"])))
    return (f"NOTE: port numbers below are turnoutd port ids ({ids or 'no ports'}), not "
            "OpenFlow's: ovs-ofctl shows port id N as N+1 (in_port=1, output:2 for ids 0, 1)")


def flows_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump` answer as ovs-ofctl's dump-flows prints
    flows (one line each, the flow in the text `add` accepts back, port ids
    not OpenFlow numbers: :func:`port_numbers_note`), then one line per
    table in use."""
    lines = []
    for f in dump.get("flows", []):
        lines.append(
            f" cookie={int(f.get('cookie', 0)):#x}, duration={f.get('duration', 0)}s,"
            f" n_packets={f.get('n_packets', 0)}, n_bytes={f.get('n_bytes', 0)}, {f['flow']}"
        )
    if not lines:
        lines.append(" (no flows)")
    for t in dump.get("tables", []):
        lines.append(
            f"table {t['table']}: flows={t['flows']}, subtables={t['subtables']},"
            f" lookups={t['lookups']}, matched={t['matched']}, missed={t['missed']}"
        )
    return "\n".join(lines)


def groups_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump_groups` answer as ovs-ofctl's dump-groups and
    dump-group-stats print groups: the group's text (which `add_group`
    accepts back), then its statistics and each bucket's."""
    lines = []
    for g in dump.get("groups", []):
        lines.append(f" {g['group']}")
        buckets = ",".join(
            f"bucket{i}:n_packets={b.get('n_packets', 0)},n_bytes={b.get('n_bytes', 0)}"
            for i, b in enumerate(g.get("buckets", []))
        )
        lines.append(
            f"    duration={g.get('duration', 0)}s, ref_count={g.get('ref_count', 0)},"
            f" n_packets={g.get('n_packets', 0)}, n_bytes={g.get('n_bytes', 0)}"
            + (f", {buckets}" if buckets else "")
        )
    if not lines:
        lines.append(" (no groups)")
    return "\n".join(lines)


def meters_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump_meters` answer as ovs-ofctl's dump-meters
    and meter-stats print meters: the meter's text (which `add_meter`
    accepts back), then its statistics and each band's."""
    lines = []
    for m in dump.get("meters", []):
        lines.append(f" {m['meter']}")
        bands = ",".join(
            f"band{i}:n_packets={b.get('n_packets', 0)},n_bytes={b.get('n_bytes', 0)}"
            for i, b in enumerate(m.get("bands", []))
        )
        lines.append(
            f"    duration={m.get('duration', 0)}s, flow_count={m.get('flow_count', 0)},"
            f" n_packets={m.get('n_packets', 0)}, n_bytes={m.get('n_bytes', 0)}"
            + (f", {bands}" if bands else "")
        )
    if not lines:
        lines.append(" (no meters)")
    return "\n".join(lines)


#: why the adaptive policy is in its regime (crates/fabric/src/wakeup.rs: Why)
_WHY = {
    "measuring": "wake-ups not measured yet",
    "no_budget": "budget 0",
    "wake_over_budget": "wake-up p99 over half the budget",
    "wake_fits": "wake-up p99 fits in half the budget",
    "naps_cheaper": "naps fit and cost less",
    "only_naps_fit": "naps fit, wake-ups do not",
    "contended": "polling waits longer for the CPU than a wake-up",
}


def _policy_text(p: dict[str, Any]) -> str:
    """The adaptive policy's regime and why, in a few words ('-' in poll
    mode): e.g. "poll (wake-up p99 140us over half the budget; budget 100us),
    sleeps after 1000us idle; sleep 18.0us cpu"."""
    budget = p.get("budget_ns", 0)
    why = p.get("why", "")
    if why == "poll_mode" or (not budget and not why and not p.get("sleep_cpu_ns")
                              and not p.get("nap_cpu_ns")):
        return "-"
    regime = p.get("regime") or ("moderate" if p.get("moderating") else "interrupt")
    if regime == "moderate":
        regime = f"moderate, nap {p.get('nap_ns', 0) / 1e3:.0f}us"
    elif regime == "poll" and p.get("gap_ns"):
        regime = f"poll, gap {p['gap_ns'] / 1e3:.1f}us"
    reason = _WHY.get(why, why)
    wake = p.get("wake_p99_ns", 0)
    if wake and why in ("wake_over_budget", "wake_fits", "only_naps_fit", "naps_cheaper"):
        reason = reason.replace("wake-up p99", f"wake-up p99 {wake / 1e3:.0f}us")
    if why == "contended":
        slow = p.get("poll_slow_epochs")
        rq = (f", run-queue wait {p.get('rq_wait_permille', 0) / 10:.1f}%"
              if p.get("contention_signal") == "run_queue_wait" else "")
        reason += (f" (poll p99 {p.get('poll_p99_ns', 0) / 1e3:.0f}us,"
                   f" wake-up p99 {wake / 1e3:.0f}us"
                   + (f", {slow} slow epochs of 64 poll samples in a row" if slow else "")
                   + rq + ")")
    text = f"{regime} ({reason}; budget {budget / 1e3:.0f}us)" if reason else \
        f"{regime} (budget {budget / 1e3:.0f}us)"
    if p.get("sleep_after_ns"):
        text += f", sleeps after {p['sleep_after_ns'] / 1e3:.0f}us idle"
    sleep_us = p.get("sleep_cpu_ns", 0) / 1e3
    if sleep_us:
        text += f"; sleep {sleep_us:.1f}us cpu"
    if p.get("nap_cpu_ns"):
        text += (f", nap {p['nap_cpu_ns'] / 1e3:.1f}us cpu"
                 f" +{p.get('nap_overshoot_ns', 0) / 1e3:.0f}us")
        if p.get("nap_pass_ns"):
            text += f" +{p['nap_pass_ns'] / 1e3:.0f}us pass"
    if p.get("nap_retry_in_ns"):
        text += (f"; no nap fits (the naps' overshoot), tried again in"
                 f" {p['nap_retry_in_ns'] / 1e6:.0f}ms")
    return text


def _watch(client: CtlClient, interval_s: float, as_json: bool) -> int:
    prev = client.call("stats")
    try:
        while True:
            time.sleep(interval_s)
            cur = client.call("stats")
            rs = rates(prev, cur)
            if as_json:
                print(
                    json.dumps(
                        {
                            "time_ns": cur["time_ns"],
                            "ports": [r.__dict__ for r in rs],
                        }
                    ),
                    flush=True,
                )
            else:
                stamp = time.strftime("%H:%M:%S")
                print(f"-- {stamp} (every {interval_s:g} s, Ctrl-C to stop)")
                print(
                    format_table(
                        ["port", "rx_pps", "tx_pps", "rx_bps", "tx_bps", "drops/s"],
                        [
                            [
                                r.name,
                                _si(r.rx_pps),
                                _si(r.tx_pps),
                                _si(r.rx_bps),
                                _si(r.tx_bps),
                                _si(r.drops_pps),
                            ]
                            for r in rs
                        ],
                    ),
                    flush=True,
                )
                wr = worker_rates(prev, cur)
                if wr:
                    print(format_table(
                        ["worker", "cpu_%", "busy_%", "asleep_%", "sleeps/s", "wakeups/s", "naps/s",
                         "gaps/s", "wake-up policy"],
                        [[w["id"], round(w["cpu_pct"], 1), round(w["busy_pct"], 1),
                          round(w["asleep_pct"], 1), _si(w["sleeps_ps"]), _si(w["wakeups_ps"]),
                          _si(w["naps_ps"]), _si(w["gaps_ps"]), w["policy"]] for w in wr],
                    ), flush=True)
            prev = cur
    except KeyboardInterrupt:
        return 0
