"""``turnout compare A B``: two campaigns side by side.

For every test point measured in both (SUT, scenario, direction, frame
size, flows/burst/VNFs/ports/pairs, method) the medians of A and B, the
ratio B/A, and a verdict:

- ``regression`` / ``improvement``: the medians differ by more than the
  measured spread (max - min over repetitions) of either side, in the bad /
  good direction (lower throughput or higher latency is worse);
- ``within noise``: they differ by no more than that;
- ``spread unknown``: a side has fewer than two repetitions, so no claim
  can be checked (never counted as a regression);
- ``only in A`` / ``only in B``.

Metrics: throughput (rate_total_pps of R+/NDR/PDR results) and latency p99 of
latency trials at each fraction of R+.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, TextIO

from ..results import ResultsDB
from .formatting import fmt, fmt_spread
from .model import Spread, spread_of, within_noise
from .points import METHOD_LABEL, CampaignData, PointKey, load_campaign, throughput_points
from .summary import format_table

__all__ = ["VERDICTS", "CompareRow", "compare_campaigns", "compare_data", "format_compare"]

VERDICTS = ("regression", "improvement", "within noise", "spread unknown", "only in A",
            "only in B")


@dataclass
class CompareRow:
    """One test point and metric in both campaigns."""

    sut: str
    scenario: str
    direction: str
    frame_size_b: int
    point: str  # non-default flows/burst/VNFs/ports/pairs
    method: str
    metric: str  # "Mpps" or "p99 µs @ 0.5×R+"
    higher_is_better: bool
    a: Spread | None
    b: Spread | None
    verdict: str

    @property
    def ratio(self) -> float | None:
        """median(B) / median(A)."""
        if self.a is None or self.b is None:
            return None
        if self.a.median == 0:
            return math.inf if self.b.median else 1.0
        return self.b.median / self.a.median


def _metrics(data: CampaignData) -> dict[tuple[Any, ...], tuple[Spread, bool]]:
    out: dict[tuple[Any, ...], tuple[Spread, bool]] = {}
    for p in throughput_points(data):
        k = p.key
        out[(k.sut_label(), k.scenario, k.point.direction, k.point.frame_size_b, k.extras(),
             METHOD_LABEL.get(k.method, k.method), "Mpps")] = (p.mpps, True)
    lat: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for t in data.ok_trials:
        if t.method != "latency" or t.load_fraction is None or t.latency_p99_ns is None:
            continue
        k = PointKey.of(t)
        lat[(k.sut_label(), k.scenario, k.point.direction, k.point.frame_size_b, k.extras(),
             "latency", f"p99 µs @ {fmt(float(t.load_fraction))}×R+")].append(
                 t.latency_p99_ns / 1e3)
    for t in data.ok_trials:  # rule-update time (measure/update.py): lower is better
        if t.method == "rule_update" and t.update_first_ns is not None:
            k = PointKey.of(t)
            lat[(k.sut_label(), k.scenario, k.point.direction, k.point.frame_size_b, k.extras(),
                 "rule update", f"ms @ {fmt(t.offered_total_pps / 1e3)} kpps")].append(
                t.update_first_ns / 1e6)
    for key, vals in lat.items():
        out[key] = (spread_of(vals), False)
    return out


def _verdict(a: Spread, b: Spread, higher_is_better: bool) -> str:
    same = within_noise(a, b)
    if same is None:
        return "spread unknown"
    if same:
        return "within noise"
    better = b.median > a.median if higher_is_better else b.median < a.median
    return "improvement" if better else "regression"


def compare_data(a: CampaignData, b: CampaignData) -> list[CompareRow]:
    """Rows for every metric of either campaign, sorted by test point."""
    ma, mb = _metrics(a), _metrics(b)
    rows = []
    for key in sorted(set(ma) | set(mb)):
        sa, sb = ma.get(key), mb.get(key)
        hib = (sa or sb)[1]  # type: ignore[index]
        if sa is None:
            verdict = "only in B"
        elif sb is None:
            verdict = "only in A"
        else:
            verdict = _verdict(sa[0], sb[0], hib)
        sut, scen, d, size, point, method, metric = key
        rows.append(CompareRow(sut, scen, d, size, point, method, metric, hib,
                               sa[0] if sa else None, sb[0] if sb else None, verdict))
    return rows


def compare_campaigns(db_a: ResultsDB, a: object, b: object,
                      db_b: ResultsDB | None = None) -> tuple[CampaignData, CampaignData,
                                                              list[CompareRow]]:
    """Load campaigns A (from db_a) and B (from db_b, default db_a) and compare them.

    Raises KeyError for a campaign that does not exist.
    """
    da = load_campaign(db_a, a)
    dbb = load_campaign(db_b or db_a, b)
    return da, dbb, compare_data(da, dbb)


def format_compare(a: CampaignData, b: CampaignData, rows: list[CompareRow],
                   file: TextIO) -> None:
    """Print the comparison table and a count per verdict."""
    ca, cb = a.campaign, b.campaign
    file.write(f"A = {ca.name} (run {ca.id})   B = {cb.name} (run {cb.id})\n")
    if not rows:
        file.write("nothing to compare: neither campaign has results\n")
        return
    table = [[r.sut, r.scenario, r.direction, str(r.frame_size_b), r.point, r.method, r.metric,
              fmt_spread(r.a), fmt_spread(r.b),
              "–" if r.ratio is None else f"{r.ratio:.3f}",
              r.verdict.upper() if r.verdict == "regression" else r.verdict]
             for r in rows]
    file.write(format_table(["SUT", "scenario", "dir", "size", "point", "method", "metric",
                             "A median [min-max]", "B median [min-max]", "B/A", "verdict"],
                            table) + "\n")
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICTS}
    file.write(", ".join(f"{n} {v}" for v, n in counts.items() if n) + "\n")
    file.write("verdict: a change is a regression/improvement only when the medians differ by "
               "more than the spread (max-min of repetitions) of either side.\n")
