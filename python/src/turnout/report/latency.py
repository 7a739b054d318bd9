"""The "Latency CDFs" section: one-way latency at fractions of R+."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from itertools import pairwise

from ..results import Trial
from .formatting import fmt, fmt_spread, trial_marks
from .model import Figure, Panel, Point, Section, Series, Spread, Table, spread_of, within_noise
from .points import (
    CampaignData,
    by_figure,
    group_key,
    group_title,
    offered_pps,
    trial_label,
)

__all__ = ["latency_cdf_section", "merge_cdfs"]


_PCT_FIELDS = (("p50", "latency_p50_ns"), ("p90", "latency_p90_ns"),
               ("p99", "latency_p99_ns"), ("p99.9", "latency_p999_ns"),
               ("max", "latency_max_ns"))


def _cdf_at(cdf: Sequence[Sequence[float]], x: float) -> float:
    """Right-continuous step CDF of [value, fraction] points evaluated at x."""
    f = 0.0
    for v, frac in cdf:
        if v <= x:
            f = frac
        else:
            break
    return f


def merge_cdfs(
    cdfs: Sequence[tuple[Sequence[Sequence[float]], float]],
) -> list[tuple[float, float]]:
    """Pool the CDFs of several repetitions, weighting each by its packet count.

    The pooled CDF at x is Σ wᵢ·Fᵢ(x) / Σ wᵢ, evaluated at every x of every
    input; each Fᵢ is read as a step function.
    """
    parts = [(sorted((float(v), float(f)) for v, f in c), w) for c, w in cdfs if c]
    total = sum(w for _, w in parts)
    if not parts or total <= 0:
        parts = [(c, 1.0) for c, _ in parts]
        total = float(len(parts))
    if not parts:
        return []
    xs = sorted({v for c, _ in parts for v, _ in c})
    return [(x, sum(w * _cdf_at(c, x) for c, w in parts) / total) for x in xs]


def _lat_trials(data: CampaignData) -> list[Trial]:
    return [t for t in data.ok_trials if t.method == "latency" and t.load_fraction is not None]


def _latency_rows(frac: float, at: list[Trial], table: Table) -> list[Series]:
    """CDF series of one panel (one frame size, one load) and its table rows."""
    by_sut: dict[str, list[Trial]] = defaultdict(list)
    for t in at:
        by_sut[trial_label(t)].append(t)
    series = []
    p99s: dict[str, Spread] = {}
    rows: list[tuple[float, list[str], str]] = []
    for label, st in sorted(by_sut.items()):
        merged = merge_cdfs([(t.latency_cdf, float(t.received)) for t in st])
        series.append(Series(label, [Point(v / 1e3, f) for v, f in merged], step=True))
        pct = {}
        for name, attr in _PCT_FIELDS:
            vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
            pct[name] = spread_of(vals).scaled(1e-3) if vals else None
        if pct["p99"] is not None:
            p99s[label] = pct["p99"]
        jit = [t.jitter_ns for t in st if t.jitter_ns is not None]
        rows.append((
            pct["p99"].median if pct["p99"] else math.inf,
            [str(int(st[0].point.frame_size_b)), label, fmt(frac),
             fmt_spread(spread_of([t.offered_total_pps for t in st]).scaled(1e-6)),
             fmt_spread(spread_of([offered_pps(t) for t in st]).scaled(1e-6)),
             str(len(st)), *[fmt_spread(pct[n]) for n, _ in _PCT_FIELDS],
             fmt_spread(spread_of(jit).scaled(1e-3)) if jit else "–",
             fmt_spread(spread_of([t.loss_ratio for t in st]))],
            label,
        ))
    rows.sort(key=lambda r: r[0])
    noisy: set[str] = set()
    unknown: set[str] = set()
    ranked = [r[2] for r in rows if r[2] in p99s]
    for a, b in pairwise(ranked):
        verdict = within_noise(p99s[a], p99s[b])
        if verdict is None:
            unknown |= {a, b}
        elif verdict:
            noisy |= {a, b}
    for _, row, label in rows:
        table.rows.append(row)
        marks = []
        if label in noisy:
            marks.append("p99 within noise of next SUT")
        if label in unknown:
            marks.append("p99 spread unknown (n=1): not ranked")
        m = trial_marks(by_sut[label])
        if m:
            marks.append(m)
        table.flags.append("; ".join(marks))
    return series


def latency_cdf_section(data: CampaignData) -> Section:
    """Latency CDFs at each load fraction of R+
    (Software switches for NFV Fig. 8) and percentile tables."""
    sec = Section(
        key="latency-cdf", title="Latency CDFs at 0.1, 0.5 and 0.99 × R+",
        intro="One-way latency measured by turnout-gen (send and receive timestamps on the "
              "same monotonic clock, every stream's histogram merged), at aggregate loads of "
              "0.99, 0.5 and 0.1 × the SUT's own R+; 'asked' is that load, 'offered' what "
              "the tester really sent (a flag says when R+ itself was the tester's limit) "
              "(Software switches for NFV §4.4, Fig. 8): one row of panels per frame size, one "
              "panel per "
              "load. Each curve pools the repetitions' CDFs weighted by their received "
              "packets; x is logarithmic. The tables give each percentile as the median over "
              "repetitions [min–max]; a flagged row's p99 is within noise of the next SUT's "
              "at the same frame size and load.",
    )
    trials = _lat_trials(data)
    if not trials:
        sec.empty = "No latency trials (method 'latency' at a fraction of R+) in this campaign."
        return sec
    for g, ts in by_figure(trials):
        fractions = sorted({round(float(t.load_fraction), 4) for t in ts
                            if t.load_fraction is not None}, reverse=True)
        panels = []
        table = Table(
            key=group_key("latency-pct", g), title=f"Latency percentiles (µs): {group_title(g)}",
            columns=["size B", "SUT", "× R+", "asked Mpps", "offered Mpps", "n",
                     *[f[0] for f in _PCT_FIELDS], "jitter µs", "loss ratio"],
        )
        for size in sorted({int(t.point.frame_size_b) for t in ts}):
            for frac in fractions:
                at = [t for t in ts if t.load_fraction is not None
                      and round(float(t.load_fraction), 4) == frac
                      and int(t.point.frame_size_b) == size]
                series = _latency_rows(frac, at, table) if at else []
                panels.append(Panel(f"{size} B, {fmt(frac)} × R+", "latency (µs)",
                                    "fraction of packets", series, kind="cdf", xlog=True))
        sec.figures.append(Figure(key=group_key("latency-cdf", g),
                                  title=f"Latency CDF: {group_title(g)}", panels=panels,
                                  cols=len(fractions)))
        sec.tables.append(table)
    return sec
