"""The "CPU vs throughput" section."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..results import Trial
from .formatting import fmt, fmt_spread, trial_marks
from .model import (
    Figure,
    Panel,
    Point,
    Section,
    Series,
    Spread,
    Table,
    slug,
    spread_of,
    spread_or_none,
)
from .points import CampaignData, by_scenario, cpu_util, load_bin, sut_label

__all__ = ["cpu_section"]


def cpu_section(data: CampaignData) -> Section:
    """CPU of the SUT against received throughput (Virtualized networking framework Fig. 6)."""
    sec = Section(
        key="cpu", title="CPU vs throughput",
        intro="CPU time of every SUT thread (from /proc, user + system) per second of the "
              "trial's traffic window (not its set-up or cool-down), summed, in % of one "
              "core, against the aggregate received rate (Virtualized networking framework "
              "Fig. 6). Trials of one method in the same 10 % offered-load bin are one "
              "point (median, min–max bars); saturating trials are at the right end of "
              "each line. A switch whose CPU follows load rises with throughput; a "
              "poll-mode switch is flat at 100 % per polling thread.",
    )
    trials = [t for t in data.ok_trials if t.cpu]
    if not trials:
        sec.empty = "No trials with CPU samples in this campaign."
        return sec
    table = Table(key="cpu-table", title="CPU at the lowest and highest load",
                  columns=["scenario", "dir", "size B", "SUT", "lowest Mpps", "CPU % there",
                           "highest Mpps", "CPU % there", "cycles/packet there",
                           "tester CPU % there", "VNF CPU % there"])
    by_fig: dict[tuple[str, str], list[Trial]] = defaultdict(list)
    for t in trials:
        by_fig[(t.scenario, t.point.direction)].append(t)
    for (scen, d), ts in sorted(by_fig.items(), key=by_scenario):
        panels = []
        for size in sorted({int(t.point.frame_size_b) for t in ts}):
            by: dict[tuple[Any, ...], list[Trial]] = defaultdict(list)
            for t in ts:
                if int(t.point.frame_size_b) != size:
                    continue
                label = sut_label(t.sut, t.point.virtual_port)
                p = t.point
                by[(label, t.method, t.load_fraction, load_bin(t.offered_total_pps),
                    p.flows, p.burst, p.vnfs, p.ports, p.pairs)].append(t)
            per_sut: dict[str, list[tuple[Spread, Spread, list[Trial]]]] = defaultdict(list)
            for k, st in by.items():
                rx = spread_of([t.rx_total_pps for t in st]).scaled(1e-6)
                cpu = spread_of([cpu_util(t) or 0.0 for t in st])
                per_sut[k[0]].append((rx, cpu, st))
            series = []
            for label, pts in sorted(per_sut.items()):
                pts.sort(key=lambda p: p[0].median)
                series.append(Series(label, [Point(rx.median, c.median, c.min, c.max, c.n)
                                             for rx, c, _ in pts]))
                lo, hi = pts[0], pts[-1]
                cpp = [t.cycles_per_packet for t in hi[2] if t.cycles_per_packet is not None]
                tcpu = [c for t in hi[2] if (c := cpu_util(t, "tester")) is not None]
                vcpu = [c for t in hi[2] if (c := cpu_util(t, "vnf")) is not None]
                table.rows.append([scen, d, str(size), label, fmt(lo[0].median), fmt(lo[1].median),
                                   fmt(hi[0].median), fmt(hi[1].median),
                                   fmt_spread(spread_or_none(cpp)),
                                   fmt_spread(spread_or_none(tcpu)),
                                   fmt_spread(spread_or_none(vcpu))])
                table.flags.append(trial_marks(hi[2]))
            panels.append(Panel(f"{size} B", "received Mpps", "SUT CPU (% of one core)", series,
                                kind="scatter"))
        sec.figures.append(Figure(key=slug("cpu", scen, d), title=f"CPU vs throughput: {scen} {d}",
                                  panels=panels))
    sec.tables.append(table)
    return sec
