"""The "Round-trip latency vs burst size" section (scenario ``rtt``)."""

from __future__ import annotations

from collections import defaultdict

from ..results import Trial
from .formatting import fmt, fmt_spread, trial_marks
from .model import Figure, Panel, Point, Section, Series, Table, spread_of
from .points import CampaignData, offered_pps, statistics_median, trial_label

__all__ = ["rtt_section"]


def rtt_section(data: CampaignData) -> Section:
    """Client/server round-trip latency against burst size (Virtualized networking framework §4.5,
    Fig. 5): scenario ``rtt``, mean and p99 per SUT, one panel per frame size."""
    sec = Section(
        key="rtt", title="Round-trip latency vs burst size",
        intro="A client sends bursts of N frames back to back at a low rate through the SUT "
              "to a turnout-gen reflect server, which sends each frame back (Virtualized "
              "networking framework §4.5). "
              "The latency is the round trip; mean (solid) and p99 (dashed) against the burst "
              "size, median over repetitions with min–max bars: how each switch spreads its "
              "per-burst costs over the frames of a burst.",
    )
    trials = [t for t in data.ok_trials if t.scenario == "rtt" and t.latency_mean_ns is not None]
    if not trials:
        sec.empty = "No round-trip (rtt) results in this campaign."
        return sec
    table = Table(key="rtt-table", title="Round trips",
                  columns=["SUT", "size B", "rate", "burst", "n", "mean µs [min–max]",
                           "p99 µs [min–max]"])
    panels = []
    for size in sorted({int(t.point.frame_size_b) for t in trials}):
        by: dict[tuple[str, int], list[Trial]] = defaultdict(list)
        for t in trials:
            if int(t.point.frame_size_b) == size:
                by[(trial_label(t), int(t.point.burst))].append(t)
        series = []
        for label in sorted({k[0] for k in by}):
            for pname, attr, style in (("mean", "latency_mean_ns", "-"),
                                       ("p99", "latency_p99_ns", "--")):
                pts = []
                for (lab, burst), st in sorted(by.items()):
                    vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
                    if lab == label and vals:
                        sp = spread_of(vals).scaled(1e-3)
                        pts.append(Point(burst, sp.median, sp.min, sp.max, sp.n))
                series.append(Series(f"{label} {pname}", pts, style=style))
        panels.append(Panel(f"{size} B", "burst size (frames)", "round trip (µs)", series,
                            xlog=True))
        for (label, burst), st in sorted(by.items()):
            mean = spread_of([float(t.latency_mean_ns or 0) for t in st]).scaled(1e-3)
            p99s = [float(t.latency_p99_ns) for t in st if t.latency_p99_ns is not None]
            table.rows.append([label, str(size), fmt(statistics_median(
                [offered_pps(t) for t in st])) + " pps", str(burst), str(len(st)),
                fmt_spread(mean), fmt_spread(spread_of(p99s).scaled(1e-3)) if p99s else "–"])
            table.flags.append(trial_marks(st))
    sec.figures.append(Figure(key="rtt-burst", title="Round trip vs burst size", panels=panels))
    sec.tables.append(table)
    return sec
