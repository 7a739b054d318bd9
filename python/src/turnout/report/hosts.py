"""The hosts of a remote campaign in the report's setup section: every
host (CPU model, kernel, NICs and drivers, builds, clock) and what ran
where, and from which latency mode the latency figures come
(docs/bench.md, "Across hosts"). Self-contained: ``fingerprint_section``
appends these tables; a local campaign has none."""

from __future__ import annotations

import json
from collections import Counter
from typing import TYPE_CHECKING, Any

from .model import Table

if TYPE_CHECKING:
    from .points import CampaignData

__all__ = ["label_latency", "latency_label", "remote_host_tables"]

MODE_TEXT = {
    "same-host": "same-host: the tester sends and receives on one host (one clock): exact",
    "cross-host": "cross-host: sender and receiver on two hosts (two clocks): not taken",
}
#: words in a table's or figure's title that say it shows latency figures
LATENCY_WORDS = ("latency", "p99", "round trip")


def _is_remote(data: CampaignData) -> bool:
    hid = data.campaign.host_id
    row = data.db.host(hid) if hid is not None else None
    return row is not None and (row.extra or {}).get("location") == "remote"


def latency_label(data: CampaignData) -> str:
    """What every latency figure of a remote campaign is: the mode of the
    trials it comes from ("" for a local campaign). Cross-host trials have
    none (their latency is not taken, RemoteMeasurer), so every figure
    shown is from same-host trials; the label says how many were left out."""
    if not _is_remote(data):
        return ""
    shown = Counter(str((t.extra or {}).get("latency_mode") or "?") for t in data.ok_trials
                    if t.latency_p50_ns is not None)
    dropped = sum(1 for t in data.ok_trials if t.latency_p50_ns is None
                  and (t.extra or {}).get("latency_mode") == "cross-host")
    parts = [f"latency mode: {m}" + (" (one clock: exact)" if m == "same-host" else "")
             for m in sorted(shown)] or ["no latency figure"]
    if dropped:
        parts.append(f"{dropped} cross-host trials without latency (two clocks)")
    return "; ".join(parts)


def label_latency(data: CampaignData, sections: list[Any]) -> None:
    """Append the latency mode (``latency_label``) to the title of every
    table and figure of a remote campaign that shows latency."""
    label = latency_label(data)
    if not label:
        return
    for sec in sections:
        for x in [*sec.tables, *sec.figures]:
            if x.key.startswith("remote-") or label in x.title:
                continue  # the hosts' own tables say it already
            if any(w in x.title.lower() for w in LATENCY_WORDS):
                x.title = f"{x.title} [{label}]"


def _nics(nics: dict[str, Any] | None) -> str:
    if not nics:
        return "–"
    out = []
    for name, n in sorted(nics.items()):
        if not n.get("exists"):
            out.append(f"{name}: not found")
            continue
        speed = f", {n['speed_mbps']} Mb/s" if (n.get("speed_mbps") or 0) > 0 else ""
        out.append(f"{name}: {n.get('driver') or 'no driver'}, {n.get('mac')}, MTU "
                   f"{n.get('mtu')}{speed}, {n.get('state')}")
    return "\n".join(out)


def remote_host_tables(data: CampaignData) -> list[Table]:
    """One table listing every host of a remote campaign (none for a local one)."""
    hosts: dict[str, dict[str, Any]] = {}
    hid = data.campaign.host_id
    row = data.db.host(hid) if hid is not None else None
    if row is not None and row.extra.get("remote_hosts"):
        hosts = dict(row.extra["remote_hosts"])
    if not hosts:
        return []
    ran: dict[str, list[str]] = {}
    modes: dict[str, str] = {}
    for s in data.db.suts(data.campaign.id):
        r = (s.config or {}).get("remote") or {}
        for host, what in (r.get("ran") or {}).items():
            ran.setdefault(host, [])
            ran[host] += [f"{x}" for x in what if x not in ran[host]]
        if r.get("latency_mode"):
            modes[s.name] = str(r["latency_mode"])
    t = Table(key="remote-hosts", title="Hosts (location = remote)",
              columns=["host", "ssh, roles", "CPU", "kernel", "NICs (driver, MAC, MTU)",
                       "builds", "clock vs controller", "ran there"], mono=[1, 2, 4, 5, 6, 7])
    for name, h in sorted(hosts.items()):
        clock = h.get("clock") or {}
        builds = "\n".join(f"{b}: {v.get('how')} {v.get('path')} ({str(v.get('sha256'))[:12]})"
                           for b, v in sorted((h.get("builds") or {}).items())) or "–"
        off = clock.get("monotonic_offset_ns")
        wall = clock.get("wall_offset_ns")
        t.rows.append([
            f"{name} ({h.get('hostname')})",
            f"{h.get('ssh')}{' sudo' if h.get('sudo') else ''}\n{', '.join(h.get('roles', []))}",
            f"{h.get('cpu_model')}\nCPUs {h.get('online')} (usable "
            f"{','.join(map(str, h.get('cpus') or []))}; isolated {h.get('isolated') or 'none'})",
            str(h.get("kernel")),
            _nics(h.get("nics")),
            builds,
            "–" if off is None else (f"monotonic {off / 1e6:+.3f} ms ± "
                                     f"{(clock.get('monotonic_error_ns') or 0) / 1e6:.3f}; wall "
                                     + ("?" if wall is None else f"{wall / 1e6:+.1f} ms")),
            "\n".join(ran.get(name, [])) or "nothing",
        ])
        t.flags.append("")
    lat = Counter(str((tr.extra or {}).get("latency_mode")) for tr in data.ok_trials
                  if tr.latency_p50_ns is not None or (tr.extra or {}).get("latency_mode"))
    lat.pop("None", None)
    m = Table(key="remote-latency-mode", title="Latency mode of the figures (across hosts)",
              columns=["mode", "trials", "SUT sessions"])
    for mode, n in sorted(lat.items()):
        m.rows.append([MODE_TEXT.get(mode, mode), str(n),
                       ", ".join(sorted(k for k, v in modes.items() if v == mode)) or "–"])
        m.flags.append("")
    w = Table(key="remote-wires", title="Wires", columns=["host", "wires"], mono=[1])
    for name, h in sorted(hosts.items()):
        w.rows.append([name, json.dumps(h.get("wires") or [])])
        w.flags.append("")
    return [t, w] + ([m] if m.rows else [])
