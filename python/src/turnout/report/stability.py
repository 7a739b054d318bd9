"""The "Performance stability" section: parameter error bars."""

from __future__ import annotations

import math
from collections import defaultdict

from .formatting import fmt
from .model import Figure, Panel, Point, Section, Series, Table, spread_of
from .points import (
    METHOD_LABEL,
    THROUGHPUT_METHODS,
    CampaignData,
    ThroughputPoint,
    base_values,
    is_base,
    scenario_rank,
)

__all__ = ["error_bar_section"]


def error_bar_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Parameter error bars (Hard or hopeless §3.2) per SUT and scenario."""
    sec = Section(
        key="stability", title="Performance stability: parameter error bars",
        intro="For each SUT and scenario, the throughput (median of repetitions) at every "
              "measured combination of frame size, flows and burst; the marker is the median "
              "over those combinations, the bar spans the minimum and maximum, all "
              "normalised to that median (Hard or hopeless §3.2). A short bar means the switch "
              "behaves the same whatever the traffic; one combination gives no bar. Uses R+ "
              "where measured, else PDR, else NDR.",
    )
    base = base_values(p.key for p in points) if points else {}
    by: dict[tuple[str, str, str], dict[str, list[ThroughputPoint]]] = defaultdict(
        lambda: defaultdict(list))
    for p in points:
        if is_base(p.key, base, "frame_size_b", "flows", "burst"):
            k = p.key
            by[(k.sut_label(), k.scenario, k.point.direction)][k.method].append(p)
    rows = []
    for (label, scen, d), methods in sorted(
        by.items(), key=lambda kv: (scenario_rank(kv[0][1]), kv[0][2], kv[0][0])
    ):
        method = next(m for m in THROUGHPUT_METHODS if m in methods)
        combos = methods[method]
        rows.append((label, scen, d, method, combos))
    if not rows:
        sec.empty = "No throughput results to build parameter error bars from."
        return sec
    t = Table(key="stability-table", title="Parameter error bars",
              columns=["SUT", "scenario", "dir", "method", "combinations", "frame sizes",
                       "flows", "bursts", "median Mpps", "min/median", "max/median",
                       "Gbps (L1) min/median", "Gbps max/median"])
    mpps_s = Series("Mpps", style="")
    gbps_s = Series("Gbps (L1)", style="")
    for label, scen, d, method, combos in rows:
        m = spread_of([p.spread.median for p in combos])
        g = spread_of([p.gbps.median for p in combos])
        x = f"{label} · {scen} {d}"
        if m.n < 2:
            pass  # one combination: nothing varied, no bar to draw (the table lists it)
        elif m.median > 0:
            mpps_s.points.append(Point(x, 1.0, m.min / m.median, m.max / m.median, m.n))
        if m.n >= 2 and g.median > 0:
            gbps_s.points.append(Point(x, 1.0, g.min / g.median, g.max / g.median, g.n))
        t.rows.append([
            label, scen, d, METHOD_LABEL[method], str(m.n),
            ",".join(str(s) for s in sorted({p.key.point.frame_size_b for p in combos})),
            ",".join(str(s) for s in sorted({p.key.point.flows for p in combos})),
            ",".join(str(s) for s in sorted({p.key.point.burst for p in combos})),
            fmt(m.median * 1e-6), fmt(m.min / m.median if m.median else math.nan),
            fmt(m.max / m.median if m.median else math.nan),
            fmt(g.min / g.median if g.median else math.nan),
            fmt(g.max / g.median if g.median else math.nan),
        ])
        t.flags.append("")
    sec.figures.append(Figure(
        key="stability", title="Parameter error bars (normalised to the median; "
        "SUTs with one combination are only in the table)",
        panels=[Panel("packet rate", "", "throughput / median", [mpps_s], kind="errbar", hline=1.0),
                Panel("line rate (L1)", "", "throughput / median", [gbps_s], kind="errbar",
                      hline=1.0)],
    ))
    sec.tables.append(t)
    return sec
