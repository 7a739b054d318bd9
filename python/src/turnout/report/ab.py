"""Two builds of one SUT in one campaign, cell by cell (``turnout bench ab``,
``make bench-ab``).

A campaign that runs a SUT and a variant of it (``[sut.NAME] base = ...``,
e.g. turnoutd of this checkout and ``turnoutd-before`` built from another
commit) in interleaved repetitions gives, per test point, both builds' R+
and busy cycles per forwarded frame over the same repetitions. This module
pairs them by repetition: after/before of the rate and of the cost, each a
median with its min..max over the repetitions (verdict.py's paired ratio),
and says whether the two builds differ:

- ``faster`` / ``slower`` (rate), ``cheaper`` / ``costlier`` (cost): the two
  builds' ranges (min..max over repetitions) do not overlap;
- ``same within spread``: they overlap (never ranked, like the verdict);
- ``apart at n<3, not claimed``: the ranges are apart but a side has two
  repetitions only. Two builds that are the same give disjoint ranges by
  chance with probability 2 / C(n_a + n_b, n_a): 1 in 3 at 2 + 2, 1 in 10
  at 3 + 3, 1 in 126 at 5 + 5 (ab.toml's). An A/A run (one binary as
  both, loaded host) showed such a false "costlier" at 2 + 2;
- ``spread unknown``: a side has fewer than two repetitions;
- ``tester-bound``: (rate only) the tester set the rate in most repetitions
  of both builds: the rate says nothing of the switch, the cost does.

A campaign with fixed-rate trials (latency at a fraction of R+, or at set
rates) gets a second table, cell by load: one-way p99 and the SUT's CPU in
% of a core, after/before paired by repetition, under the same rule
(``lower``/``higher``, ``less CPU``/``more CPU``). At a fraction of R+ each
build is offered a fraction of its own R+: a faster build takes more load
there.

``default_pair`` picks the two SUTs when the caller names none:
turnoutd and turnoutd-before when the campaign ran both, else its two SUTs
when exactly one of them is named ``…-before`` (the build of the other
commit, e.g. turnoutd-1000 and turnoutd-1000-before).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from .formatting import fmt_spread
from .model import Spread, Table, spread_of
from .points import CampaignData, PointKey, cpu_util, scenario_rank
from .verdict import _ratio

__all__ = ["AbLoadRow", "AbRow", "ab_load_rows", "ab_load_table", "ab_rows", "ab_table",
           "compare_builds", "default_pair"]


@dataclass
class AbRow:
    """One test point measured on both builds."""

    cell: str  # "v2v/uni 64 B memif"
    rate_after: Spread | None
    rate_before: Spread | None
    rate_ratio: Spread | None  # after / before, paired by repetition
    rate_verdict: str
    cost_after: Spread | None
    cost_before: Spread | None
    cost_ratio: Spread | None  # after / before
    cost_verdict: str
    tester_bound: str  # "after K/N, before K/N" when any


def compare_builds(a: Spread | None, b: Spread | None, better: str, worse: str,
                   higher_is_better: bool) -> str:
    """``a`` (after) against ``b`` (before) by the verdict's rule (ranked only
    when the ranges do not overlap), with at least 3 repetitions a side
    (module doc)."""
    if a is None or b is None:
        return "not measured on both"
    if a.n < 2 or b.n < 2:
        return "spread unknown"
    if a.min <= b.max and b.min <= a.max:
        return "same within spread"
    if a.n < 3 or b.n < 3:
        return "apart at n<3, not claimed"
    up = a.median > b.median
    return better if up == higher_is_better else worse


def _cell(k: PointKey) -> str:
    s = f"{k.scenario}/{k.point.direction} {k.point.frame_size_b} B"
    port = k.point.virtual_port or ("-" if k.scenario in ("p2p", "overlay") else "")
    if port and port != "-":
        s += f" {port}"
    return s + (f" {k.extras()}" if k.extras() else "")


def _paired(by_sut: dict[str, dict[int, float]], after: str, before: str,
            ) -> tuple[Spread | None, Spread | None, Spread | None]:
    """One measure's spreads on each build (None where a build has none)
    and their after/before ratio paired by repetition (None unless both
    have one)."""
    a, b = by_sut.get(after, {}), by_sut.get(before, {})
    sa = spread_of(list(a.values())) if a else None
    sb = spread_of(list(b.values())) if b else None
    if sa is None or sb is None:
        return sa, sb, None
    # verdict.py's _ratio(a, b, ...) is a/b: after/before
    return sa, sb, _ratio(a, b, sa.median, sb.median, invert=False)


def ab_rows(data: CampaignData, after: str, before: str) -> list[AbRow]:
    """Every R+ point measured on both SUTs, in scenario order."""
    rate: dict[tuple[Any, ...], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict))
    cost: dict[tuple[Any, ...], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict))
    bound: dict[tuple[Any, ...], dict[str, int]] = defaultdict(lambda: defaultdict(int))
    keys: dict[tuple[Any, ...], PointKey] = {}
    for r in data.ok_results:
        if r.method != "rplus" or r.sut not in (after, before):
            continue
        k = PointKey.of(r)
        g = (k.group(), k.point.virtual_port)
        keys.setdefault(g, k)
        rate[g][r.sut][r.repetition] = r.rate_total_pps
        if r.busy_cycles_per_frame:
            cost[g][r.sut][r.repetition] = float(r.busy_cycles_per_frame)
        if r.tester_bound:
            bound[g][r.sut] += 1
    rows = []
    for g in sorted(keys, key=lambda g: (scenario_rank(keys[g].scenario), g)):
        sa, sb, rratio = _paired(rate[g], after, before)
        if sa is None or sb is None:
            continue
        csa, csb, cratio = _paired(cost[g], after, before)
        ba, bb = bound[g].get(after, 0), bound[g].get(before, 0)
        rverdict = compare_builds(sa, sb, "faster", "slower", higher_is_better=True)
        if ba * 2 >= sa.n and bb * 2 >= sb.n and (ba or bb):
            rverdict = "tester-bound"
        tb = f"after {ba}/{sa.n}, before {bb}/{sb.n}" if ba or bb else ""
        rows.append(AbRow(
            cell=_cell(keys[g]), rate_after=sa, rate_before=sb, rate_ratio=rratio,
            rate_verdict=rverdict, cost_after=csa, cost_before=csb, cost_ratio=cratio,
            cost_verdict=compare_builds(csa, csb, "cheaper", "costlier",
                                        higher_is_better=False),
            tester_bound=tb))
    return rows


def ab_table(data: CampaignData, after: str, before: str) -> Table:
    """The after/before table (terminal and tests)."""
    t = Table(
        key="ab", title=f"{after} (after) vs {before} (before)",
        columns=["cell", "n", "Mpps after", "Mpps before", "after/before", "rate",
                 "cyc/frame after", "cyc/frame before", "after/before", "cost",
                 "tester-bound"],
        note="Medians over the repetitions [min-max]; after/before is paired by "
             "repetition (interleaved: the same minute of the machine for both). A "
             "difference is claimed only when the two builds' ranges do not overlap, with "
             "3 or more repetitions a side. "
             "cyc/frame: the SUT's busy cycles per forwarded frame from its own "
             "accounting at R+ (lower is better).")
    for r in ab_rows(data, after, before):
        n = min(x.n for x in (r.rate_after, r.rate_before) if x is not None)
        t.rows.append([
            r.cell, str(n),
            fmt_spread(r.rate_after.scaled(1e-6) if r.rate_after else None),
            fmt_spread(r.rate_before.scaled(1e-6) if r.rate_before else None),
            fmt_spread(r.rate_ratio), r.rate_verdict,
            fmt_spread(r.cost_after, 4), fmt_spread(r.cost_before, 4),
            fmt_spread(r.cost_ratio), r.cost_verdict, r.tester_bound or "–"])
        t.flags.append("" if "same" in r.rate_verdict and "same" in r.cost_verdict
                       else f"{r.rate_verdict}; {r.cost_verdict}")
    if not t.rows:
        t.note = (f"No R+ point was measured on both {after} and {before} "
                  f"(a SUT missing or skipped?). " + t.note)
    return t


@dataclass
class AbLoadRow:
    """One fixed-rate point measured on both builds."""

    cell: str  # "v2v/uni 1518 B memif at 0.1 × R+"
    p99_after: Spread | None  # µs
    p99_before: Spread | None
    p99_ratio: Spread | None  # after / before, paired by repetition
    p99_verdict: str
    cpu_after: Spread | None  # % of a core
    cpu_before: Spread | None
    cpu_ratio: Spread | None
    cpu_verdict: str


def _load(method: str, fraction: float | None, offered_pps: float) -> str:
    if method == "latency" and fraction:
        return f"at {fraction:g} × R+"
    return f"at {offered_pps / 1e3:g} kpps"


def ab_load_rows(data: CampaignData, after: str, before: str) -> list[AbLoadRow]:
    """Every fixed-rate point (latency trials) measured on both SUTs, in
    scenario order, then by load."""
    p99: dict[tuple[Any, ...], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict))
    cpu: dict[tuple[Any, ...], dict[str, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict))
    keys: dict[tuple[Any, ...], tuple[PointKey, str, float]] = {}
    for t in data.ok_trials:
        if t.method not in ("latency", "fixed") or t.sut not in (after, before):
            continue
        k = PointKey.of(t)
        load = _load(t.method, t.load_fraction, t.offered_total_pps)
        g = (k.group(), k.point.virtual_port, load)
        keys.setdefault(g, (k, load, t.load_fraction or t.offered_total_pps))
        if t.latency_p99_ns is not None:
            p99[g][t.sut][t.repetition] = t.latency_p99_ns / 1e3
        u = cpu_util(t)
        if u is not None:
            cpu[g][t.sut][t.repetition] = u
    rows = []
    order = sorted(keys, key=lambda g: (scenario_rank(keys[g][0].scenario), g[:2], keys[g][2]))
    for g in order:
        k, load, _ = keys[g]
        spa, spb, pratio = _paired(p99[g], after, before)
        sca, scb, cratio = _paired(cpu[g], after, before)
        if (spa is None or spb is None) and (sca is None or scb is None):
            continue
        rows.append(AbLoadRow(
            cell=f"{_cell(k)} {load}", p99_after=spa, p99_before=spb, p99_ratio=pratio,
            p99_verdict=compare_builds(spa, spb, "lower", "higher", higher_is_better=False),
            cpu_after=sca, cpu_before=scb, cpu_ratio=cratio,
            cpu_verdict=compare_builds(sca, scb, "less CPU", "more CPU",
                                       higher_is_better=False)))
    return rows


def ab_load_table(data: CampaignData, after: str, before: str) -> Table:
    """The after/before table of the fixed-rate points (empty when the
    campaign had none measured on both)."""
    t = Table(
        key="ab-load", title=f"{after} (after) vs {before} (before) at fixed rates",
        columns=["cell", "n", "p99 µs after", "p99 µs before", "after/before", "p99",
                 "CPU % after", "CPU % before", "after/before", "CPU"],
        note="One-way p99 and the SUT's CPU (its threads over the traffic window, % of "
             "a core), medians over the repetitions [min-max], after/before paired by "
             "repetition, the same rule as above. At a fraction of R+ each build is "
             "offered that fraction of its own R+.")
    for r in ab_load_rows(data, after, before):
        n = min((x.n for x in (r.p99_after, r.p99_before, r.cpu_after, r.cpu_before)
                 if x is not None), default=0)
        t.rows.append([
            r.cell, str(n), fmt_spread(r.p99_after, 4), fmt_spread(r.p99_before, 4),
            fmt_spread(r.p99_ratio), r.p99_verdict, fmt_spread(r.cpu_after, 3),
            fmt_spread(r.cpu_before, 3), fmt_spread(r.cpu_ratio), r.cpu_verdict])
        t.flags.append("" if "same" in r.p99_verdict and "same" in r.cpu_verdict
                       else f"{r.p99_verdict}; {r.cpu_verdict}")
    return t


def default_pair(suts: list[str]) -> tuple[str, str] | None:
    """(after, before) of a campaign that ran ``suts`` (module doc), or None."""
    if "turnoutd" in suts and "turnoutd-before" in suts:
        return "turnoutd", "turnoutd-before"
    names = sorted(set(suts))
    if len(names) == 2:
        befores = [n for n in names if n.endswith("-before")]
        if len(befores) == 1:
            other = next(n for n in names if n != befores[0])
            return other, befores[0]
    return None
