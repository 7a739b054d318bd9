"""Report sections of the methods Hard or hopeless and Open vSwitch throughput and latency call for:
rule-update time under traffic (scenario ``rule_update``, method
``rule_update``) and the offered-load sweep (method ``sweep``: received
against offered, Open vSwitch throughput and latency Fig. 8)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..results import Trial
from .formatting import drops_text, fmt, fmt_spread
from .model import Figure, Panel, Point, Section, Series, Table, spread_of, spread_or_none
from .points import CampaignData, fig_group, group_key, group_title, trial_label
from .verdict import Entry, _ratio_cell, rank_entries

__all__ = ["flow_mods_table", "rule_update_section", "rule_update_verdict_table",
           "sweep_section"]


def _flag(st: list[Trial]) -> str:
    """n=1, or how many trials the tester limited (its sender stalled)."""
    bound = sum(1 for t in st if t.tester_bound)
    marks = (["n=1"] if len(st) < 2 else []) + ([f"tester{bound}/{len(st)}"] if bound else [])
    return " ".join(marks)


def _updates(data: CampaignData) -> list[Trial]:
    return [t for t in data.ok_trials
            if t.method == "rule_update" and t.update_first_ns is not None]


def rule_update_verdict_table(data: CampaignData, key: str = "rule-update-verdict") -> Table:
    """SUTs in order of their update time (lower first) per frame size and
    rate, with the verdict's overlap rule: apart only when both were
    measured at least twice and their min–max ranges do not overlap."""
    t = Table(
        key=key, title="Rule-update time under traffic (t0 → first frame at the new port)",
        columns=["size B", "rank", "SUT", "update ms [min–max]", "n", "× next",
                 "lost at switch-over [min–max]"],
        note=("Hard or hopeless: at t0 the SUT's own rule interface moves a steady stream to "
              "another "
              "port (bridge fdb replace, ovs-ofctl mod-flows, a turnoutd logic command); the "
              "time includes the command's own start-up, as a user would issue it. Ranked "
              "lower first; overlapping ranges share a rank. testerK/N: in K of N trials the "
              "host descheduled the sender for 10 ms or more (its catch-up burst can lose "
              "frames the update did not, and a stall at t0 delays the first frame at B)."),
    )
    by: dict[tuple[int, float], dict[str, dict[int, Trial]]] = defaultdict(dict)
    for tr in _updates(data):
        g = (int(tr.point.frame_size_b), round(tr.offered_total_pps))
        by[g].setdefault(trial_label(tr), {})[int(tr.repetition)] = tr
    for (size, rate), suts in sorted(by.items()):
        entries = []
        for label, reps in sorted(suts.items()):
            ms = {r: float(x.update_first_ns or 0.0) / 1e6 for r, x in reps.items()}
            entries.append(Entry(sut=label, cost=spread_of(list(ms.values())),
                                 by_rep_cost=ms))
        for e in rank_entries(entries, "cost"):
            assert e.cost is not None
            lost = spread_of([float(x.extra.get("lost_switchover", x.lost))
                              for x in suts[e.sut].values()])
            t.rows.append([f"{size} ({rate / 1e3:g} kpps)", e.rank, e.sut, fmt_spread(e.cost),
                           str(e.cost.n), _ratio_cell(e.ratio_next), fmt_spread(lost, 0)])
            t.flags.append(_flag(list(suts[e.sut].values())))
    return t


def rule_update_section(data: CampaignData) -> Section:
    """Every rule-update trial's figures per SUT, and the ranking."""
    sec = Section(
        key="rule-update", title="Rule-update time under traffic",
        intro=("A stream at a fixed rate goes through the SUT to port A; at t0 the SUT's own "
               "rule interface moves it to port B. Update: t0 until the first frame reached B; "
               "A stops: t0 until the last frame reached A (earlier than the update when the "
               "switch dropped frames in between); lost at switch-over: the stream's rate over "
               "[t0 − 5 ms, the later time + 20 ms] minus what arrived at A and B in it; lost "
               "in trial: frames sent that reached neither, over the whole trial; idle: the "
               "longest stretch around the switch-over in "
               "which no frame arrived anywhere — the switch holding or dropping frames, or, "
               "with nothing lost, a sender the host descheduled (a loaded host delays the "
               "first frame at B by that much; sender behind: the longest the sender was "
               "behind its schedule anywhere in the trial, from turnout-gen). Command: "
               "until the update command returned "
               "(a process start for bridge and ovs-ofctl — turnoutd's flows logic included —, "
               "as a user would run them; one JSON-RPC call for turnoutd's other logics). "
               "Arrivals are the destinations' kernel receive "
               "counters sampled every ~1 ms and placed at the stream's rate "
               "(measure/update.py). Median [min–max] over repetitions."),
    )
    trials = _updates(data)
    bulk = flow_mods_table(data)
    if not trials:
        if bulk.rows:
            sec.tables.append(bulk)
        else:
            sec.empty = "No rule-update results in this campaign (scenario rule_update)."
        return sec
    detail = Table(key="rule-update-table", title="Rule updates",
                   columns=["SUT", "size B", "rate", "n", "update ms [min–max]",
                            "A stops ms [min–max]", "lost at switch-over [min–max]",
                            "lost in trial [min–max]", "idle ms [min–max]",
                            "sender behind ms (max)", "command ms", "command"],
                   mono=[11])
    by: dict[tuple[str, int, float], list[Trial]] = defaultdict(list)
    for tr in trials:
        by[(trial_label(tr), int(tr.point.frame_size_b), round(tr.offered_total_pps))].append(tr)
    for (label, size, rate), st in sorted(by.items()):
        first = spread_of([float(x.update_first_ns or 0) / 1e6 for x in st])
        lasts = [float(x.update_last_ns) / 1e6 for x in st if x.update_last_ns is not None]
        cmd = [float(x.extra.get("update_command_ns", 0)) / 1e6 for x in st]
        idle = spread_of([float(x.extra.get("idle_ns", 0)) / 1e6 for x in st])
        behind = max(float(x.extra.get("sender_behind_max_ns", 0)) / 1e6 for x in st)
        detail.rows.append([
            label, str(size), f"{rate / 1e3:g} kpps", str(len(st)), fmt_spread(first),
            fmt_spread(spread_or_none(lasts)),
            fmt_spread(spread_of([float(x.extra.get("lost_switchover", x.lost)) for x in st]), 0),
            fmt_spread(spread_of([float(x.lost) for x in st]), 0), fmt_spread(idle), fmt(behind),
            fmt(spread_of(cmd).median), str(st[0].extra.get("update_command", ""))[:160]])
        detail.flags.append(_flag(st))
    sec.tables += [detail, rule_update_verdict_table(data, key="rule-update-ranking")]
    if bulk.rows:
        sec.tables.append(bulk)
    return sec


def flow_mods_table(data: CampaignData) -> Table:
    """Flow-mods per second under traffic (method ``flow_mods``: campaign
    ``update_bulk_flows``), per SUT, rule interface and number of flows."""
    t = Table(
        key="flow-mods", title="Flow-mods per second under traffic",
        columns=["SUT", "interface", "flows", "rate", "n", "flow-mods/s [min–max]",
                 "install s [min–max]", "lost in trial [min–max]", "switch drops",
                 "command"],
        mono=[9],
        note=("With the rule-update stream flowing to port A, N flows that no frame hits "
              "(priority 1, IPv4 destinations in 172.16.0.0/12, one mask, a cookie) are "
              "installed at once through the SUT's rule interface, then removed: ovs-ofctl "
              "-O OpenFlow13 add-flows of a file (it returns after the switch's barrier "
              "reply: all are in effect), or, for turnoutd, the flows logic's add command "
              "through JSON-RPC (the API behind turnout ctl; 10,000 flows a call). "
              "flow-mods/s: N over the time from t0 until the command returned, a process "
              "start and parsing the file included, as a user would run it. Lost in trial: "
              "frames sent minus those that arrived at A and B over the whole stream, which "
              "ends 0.3 s after the command; switch drops: what the switch counted as dropped "
              "over the trials, by reason, with what the kernel dropped before its receive "
              "rings (turnoutd; – where they are not read). Median [min–max] over "
              "repetitions."),
    )
    by: dict[tuple[str, str, int, float], list[Trial]] = defaultdict(list)
    for tr in data.ok_trials:
        if tr.method == "flow_mods" and tr.extra.get("bulk_command_ns"):
            by[(trial_label(tr), str(tr.extra.get("bulk_interface", "")),
                int(tr.extra.get("bulk_flows", 0)), round(tr.offered_total_pps))].append(tr)
    for (label, iface, n, rate), st in sorted(by.items(), key=lambda kv: (kv[0][2], kv[0][0],
                                                                           kv[0][1])):
        t.rows.append([
            label, iface, f"{n:,}", f"{rate / 1e3:g} kpps", str(len(st)),
            fmt_spread(spread_of([float(x.extra["flow_mods_per_s"]) for x in st])),
            fmt_spread(spread_of([float(x.extra["bulk_command_ns"]) / 1e9 for x in st])),
            fmt_spread(spread_of([float(x.lost) for x in st]), 0),
            drops_text(st),
            str(st[0].extra.get("bulk_command", ""))[:160]])
        t.flags.append(_flag(st))
    return t


def sweep_section(data: CampaignData) -> Section:
    """Received against offered load per SUT, one figure per path
    (scenario, direction and the point's other parameters), one panel per
    frame size, median over repetitions with min–max bars."""
    sec = Section(
        key="sweep", title="Offered-load sweep: received vs offered",
        intro=("Trials at fixed fractions of each SUT's R+ (method sweep; Open vSwitch "
               "throughput and latency Fig. 8): "
               "the aggregate rate that arrived against the rate the tester really offered. "
               "On the diagonal the SUT forwards everything; where a curve bends away it "
               "starts to drop, and past R+ it shows whether the switch holds its rate or "
               "collapses under overload. Marked trials: the tester could not offer the load."),
    )
    trials = [t for t in data.ok_trials if t.method == "sweep"]
    if not trials:
        sec.empty = "No offered-load sweep in this campaign (method sweep)."
        return sec
    groups: dict[tuple[Any, ...], list[Trial]] = defaultdict(list)
    for t in trials:
        groups[fig_group(t)].append(t)
    table = Table(key="sweep-table", title="Received vs offered",
                  columns=["scenario", "SUT", "size B", "× R+", "n", "offered Mpps",
                           "received Mpps [min–max]", "loss % [min–max]"])
    for g, gt in sorted(groups.items()):
        panels = []
        for size in sorted({int(t.point.frame_size_b) for t in gt}):
            cells: dict[tuple[str, float], list[Trial]] = defaultdict(list)
            for t in gt:
                if int(t.point.frame_size_b) == size:
                    cells[(trial_label(t), float(t.load_fraction or 0.0))].append(t)
            series = []
            for label in sorted({k[0] for k in cells}):
                pts = []
                for (lab, frac), st in sorted(cells.items()):
                    if lab != label:
                        continue
                    off = spread_of([t.tx_total_pps for t in st]).scaled(1e-6)
                    rx = spread_of([t.rx_total_pps for t in st]).scaled(1e-6)
                    loss = spread_of([100 * t.loss_ratio for t in st])
                    pts.append(Point(off.median, rx.median, rx.min, rx.max, rx.n,
                                     noisy=any(t.tester_bound for t in st)))
                    table.rows.append([g[0], label, str(size), f"{frac:g}", str(len(st)),
                                       fmt(off.median), fmt_spread(rx), fmt_spread(loss, 2)])
                    table.flags.append("tester could not offer" if any(
                        t.tester_bound for t in st) else "")
                series.append(Series(label, sorted(pts, key=lambda p: float(p.x))))
            diag = max((float(p.x) for s in series for p in s.points), default=0.0)
            series.append(Series("offered = received", [Point(0.0, 0.0), Point(diag, diag)],
                                 style=":"))
            panels.append(Panel(f"{size} B", "offered (Mpps)", "received (Mpps)", series))
        sec.figures.append(Figure(key=group_key("sweep", g),
                                  title=f"Received vs offered: {group_title(g)}", panels=panels))
    sec.tables.append(table)
    return sec
