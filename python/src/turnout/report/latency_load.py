"""The "Latency vs offered load" section."""

from __future__ import annotations

from collections import defaultdict

from ..results import Trial
from .model import Figure, Panel, Point, Section, Series, spread_of
from .points import (
    CampaignData,
    by_figure,
    group_key,
    group_title,
    load_bin,
    offered_pps,
    statistics_median,
    trial_label,
)

__all__ = ["latency_load_section"]


def latency_load_section(data: CampaignData) -> Section:
    """Latency against offered load (Open vSwitch throughput and latency
    Fig. 13), p50 and p99 per SUT."""
    sec = Section(
        key="latency-load", title="Latency vs offered load",
        intro="Median (solid) and 99th percentile (dashed) one-way latency against the "
              "aggregate load the tester really offered, for every trial that measured "
              "latency (latency trials at "
              "fractions of R+, fixed-rate trials, search trials), grouped into offered-load "
              "bins 10 % wide; the point is the median of the trials in a bin at their median "
              "load, bars span their min–max (Open vSwitch throughput and latency Fig. 13). "
              "One panel per frame "
              "size. The y axis is logarithmic: overload shows as a step up by orders of "
              "magnitude.",
    )
    trials = [t for t in data.ok_trials if t.latency_p50_ns is not None and offered_pps(t) > 0]
    if not trials:
        sec.empty = "No trials with latency measurements in this campaign."
        return sec
    for g, ts in by_figure(trials):
        panels = []
        for size in sorted({int(t.point.frame_size_b) for t in ts}):
            by: dict[tuple[str, float], list[Trial]] = defaultdict(list)
            for t in ts:
                if int(t.point.frame_size_b) == size:
                    by[(trial_label(t), load_bin(offered_pps(t)))].append(t)
            series = []
            for label in sorted({k[0] for k in by}):
                for pname, attr, style in (("p50", "latency_p50_ns", "-"),
                                           ("p99", "latency_p99_ns", "--")):
                    pts = []
                    for (lab, _load), st in sorted(by.items()):
                        vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
                        if lab != label or not vals:
                            continue
                        sp = spread_of(vals).scaled(1e-3)
                        x = statistics_median([offered_pps(t) for t in st]) / 1e6
                        pts.append(Point(x, sp.median, sp.min, sp.max, sp.n))
                    pts.sort(key=lambda p: float(p.x))
                    series.append(Series(f"{label} {pname}", pts, style=style))
            panels.append(Panel(f"{size} B", "offered load (Mpps)", "latency (µs)", series,
                                ylog=True))
        sec.figures.append(Figure(
            key=group_key("latency-load", g), title=f"Latency vs offered load: {group_title(g)}",
            panels=panels,
        ))
    return sec
