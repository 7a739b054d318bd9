"""The verdict: which switch for which use case, by how much, and what limited it.

For every use case (Software switches for NFV Table 3: p2p, p2v/v2p, v2v, chain, NvsN,
scale) and frame size, the SUTs measured at the same R+ test point are put
in order by the measure that holds there:

- **rate** (R+, Mpps, higher is better) when every SUT set its own rate:
  what one core forwarded at saturation, measured;
- **capacity** (the SUT's busy cycles per frame from its own accounting,
  idle handling excluded for every SUT: lower is better; ``TSC rate /
  capacity`` is what one core would forward at saturation) as soon as one
  of them was limited by the tester or the scheduler: a tester-bound rate
  is the tester's, a lower bound of the SUT's, and ranks nothing; what each
  switch spent per frame still does. The scheduler sets the rate where
  more busy-polling tester and VNF processes (a loopback chain's VNFs,
  NvsN's pairs) than the tester has cores share them.

Next to it, never ranked, each SUT's **CPU at this load** (report/cpuload.py):
everything its threads consumed in the R+ trial's traffic window per frame,
empty polls and wake-ups included, from the OS (a kernel switch: its CPUs'
kernel time).

A SUT is *tester-limited* when most of its repetitions were flagged
tester-bound (measure/gen.py ``tester_bound``) or when its rate reaches the
tester's ceiling on the same path and port type: the bare wire's R+ measured
in the same campaign (the tester back to back, no switch, as CSIT calibrates
its generator); its headroom is its rate over that ceiling.

Ranking rule: two SUTs are ranked apart only when both were measured at
least ``MIN_REPS_APART`` (3) times and their ranges (min..max over
repetitions) do not overlap; otherwise they share a rank ("="), and so do
SUTs linked through another (A overlaps B, B overlaps C), or, with a
single repetition, none is ranked at all ("–"). Three, not two: two
identical SUTs (an A/A run: one build twice) have non-overlapping ranges by
chance alone one time in three with 2 repetitions each, one in ten with 3,
one in 126 with 5. The order is the paired one when the SUTs share two or
more repetitions (``_paired_order``: each SUT's value over the best of its
repetition, median over the repetitions), else by medians; within a tie
the first is then the SUT better in most interleaved repetitions. The ratio
to the next SUT is taken repetition by repetition when both have the same
repetitions (interleaved runs: host drift cancels), with its min..max. A
SUT that was skipped or failed is listed with the reason. No row claims
more than its data supports.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..measure.cpu import SCHED_WAIT_FLAG_US
from ..measure.placement import SLOW_FACTOR, fastest_placement, trial_rtt
from ..results import Trial
from .cpuload import REFUSED, capacity_note, cpu_at_load, refusal, sent_share, user_space_part
from .formatting import fmt, fmt_spread
from .model import Section, Spread, Table, spread_of, spread_or_none
from .points import CampaignData, PointKey, scenario_rank, sut_label
from .regime import regime_cell_text, regime_table, wake_of

__all__ = ["USE_CASES", "Entry", "Verdict", "rank_entries", "verdict_rows",
           "verdict_section", "verdict_table"]

#: scenario -> use case (Software switches for NFV Table 3)
USE_CASES = {
    "p2p": "p2p: physical to physical",
    "p2v": "p2v: physical to virtual",
    "v2p": "v2p: virtual to physical",
    "v2v": "v2v: virtual to virtual",
    "loopback": "chain: loopback through VNFs",
    "nvsn": "NvsN: pairs sharing the switch",
    "density": "scale: port density",
    "overlay": "overlay: two hosts over VXLAN",
}


@dataclass
class Entry:
    """One SUT at one verdict row."""

    sut: str
    rate: Spread | None = None  # R+, frames/s
    cost: Spread | None = None  # capacity: busy cycles per frame (the ranking measure)
    #: the SUT's name without its port ("turnoutd", "testpmd (no-huge)") and
    #: the kind of its virtual ports ("" on veth-only paths)
    name: str = ""
    port: str = ""
    #: CPU at this load (R+ trial): cycles per frame and % of one core
    cpu: Spread | None = None
    cpu_pct: Spread | None = None
    #: kernel share: the kernel's cycles per frame on the SUT's CPUs, next to
    #: (never in) its own account (measure/kernel.py)
    kernel: Spread | None = None
    #: the capacity's user-space part: capacity minus its threads' kernel
    #: time per frame (report/cpuload.py ``user_space_part``)
    user: Spread | None = None
    by_rep_rate: dict[int, float] = field(default_factory=dict)
    by_rep_cost: dict[int, float] = field(default_factory=dict)
    tester_bound: int = 0
    headroom: Spread | None = None  # rate / the tester's ceiling
    limit: str = ""  # "SUT" | "tester" | "skipped: ..." | "failed: ..."
    rank: str = "–"
    ratio_next: Spread | None = None
    note: str = ""
    #: False: shown with its figures, left out of the ranks (``[sut.NAME]
    #: ranked = false``)
    ranked: bool = True
    #: repetitions whose R+ trial ran with the tester's and the SUT's vCPUs
    #: placed apart by the host, of those probed (measure/placement.py)
    apart: tuple[int, int] | None = None

    @property
    def measured(self) -> bool:
        return self.rate is not None


@dataclass
class Verdict:
    """One row group of the verdict: a use case at one frame size."""

    use_case: str
    scenario: str
    direction: str
    frame_size_b: int
    extras: str
    measure: str  # "rate" | "cost"
    ceiling: Spread | None
    entries: list[Entry]


#: Repetitions each of two SUTs needs before they are ranked apart.
MIN_REPS_APART = 3


def _overlap(a: Spread, b: Spread) -> bool:
    return a.min <= b.max and b.min <= a.max


def _ratio(a: dict[int, float], b: dict[int, float], am: float, bm: float,
           invert: bool) -> Spread | None:
    """a/b paired by repetition (b/a when ``invert``), else median over median."""
    common = sorted(set(a) & set(b))
    if len(common) >= 2 and len(common) == len(a) == len(b):
        vals = [(b[i] / a[i]) if invert else (a[i] / b[i]) for i in common
                if a[i] > 0 and b[i] > 0]
        if len(vals) == len(common):
            return spread_of(vals)
    if am > 0 and bm > 0:
        m = bm / am if invert else am / bm
        return Spread(m, m, m, 1)
    return None


def _paired_order(by_rep: list[dict[int, float]], lower_better: bool) -> list[float] | None:
    """Each SUT's measure relative to the best of its repetition (1 = the
    best of that repetition; higher = worse), the median over the
    repetitions every SUT has: the order the paired ratios give. Ranges
    that do not overlap keep their order (a SUT below another in every
    repetition stays below it); within a tie it puts first the SUT that
    was better in most of the interleaved repetitions, which the median
    of each SUT's own values can reverse when the host's phase changed
    between repetitions (the verdict then read "testpmd first, turnoutd
    0.49 × its cost"). None — order by medians — with fewer than 2 common
    repetitions or a value that is not positive."""
    if not by_rep:
        return None
    common = sorted(set.intersection(*(set(r) for r in by_rep)))
    if len(common) < 2:
        return None
    rel: list[list[float]] = [[] for _ in by_rep]
    for i in common:
        xs = [r[i] for r in by_rep]
        if min(xs) <= 0:
            return None
        best = min(xs) if lower_better else max(xs)
        for k, x in enumerate(xs):
            rel[k].append(x / best if lower_better else best / x)
    return [statistics.median(v) for v in rel]


def rank_entries(entries: list[Entry], measure: str) -> list[Entry]:
    """Order ``entries`` by ``measure`` and give each its rank and its ratio
    to the next (see the module doc). Entries without the measure (not
    measured, or no cost account) come last, unranked, with a note."""
    def value(e: Entry) -> Spread | None:
        return e.rate if measure == "rate" else e.cost

    def reps(e: Entry) -> dict[int, float]:
        return e.by_rep_rate if measure == "rate" else e.by_rep_cost

    have = [e for e in entries if value(e) is not None and e.ranked]
    shown = [e for e in entries if value(e) is not None and not e.ranked]
    rest = [e for e in entries if value(e) is None]
    lower_better = measure == "cost"
    rel = _paired_order([reps(e) for e in have], lower_better) or [0.0] * len(have)
    order = sorted(range(len(have)), key=lambda k: (
        rel[k], value(have[k]).median if lower_better else -value(have[k]).median))  # type: ignore[union-attr]
    have = [have[k] for k in order]
    unknown = any(value(e).n < 2 for e in have)  # type: ignore[union-attr]
    if unknown:
        for e in have:
            e.rank = "–"
            if value(e).n < 2:  # type: ignore[union-attr]
                e.note = _join(e.note, "n=1: spread unknown, not ranked")
    else:
        # Two SUTs are ranked apart only when their ranges do not overlap
        # and each has enough repetitions: the SUTs that cannot be told
        # apart, directly or through another (A overlaps B, B overlaps C),
        # share one rank; the groups follow the paired order of their best
        # SUT, and the paired order holds inside each.
        root = list(range(len(have)))

        def find(k: int) -> int:
            while root[k] != k:
                k = root[k]
            return k

        for i, e in enumerate(have):
            v = value(e)
            assert v is not None
            for j in range(i):
                pv = value(have[j])
                assert pv is not None
                few = min(v.n, pv.n) < MIN_REPS_APART
                if few or _overlap(v, pv):
                    a, b = find(i), find(j)
                    root[max(a, b)] = min(a, b)
                if few and not _overlap(v, pv):
                    why = (f"n={min(v.n, pv.n)}: apart from the next only with "
                           f"{MIN_REPS_APART} repetitions each")
                    for x in (e, have[j]):
                        if why not in x.note:
                            x.note = _join(x.note, why)
        group = [find(k) for k in range(len(have))]
        order = sorted(range(len(have)), key=lambda k: (group[k], k))
        have, group = [have[k] for k in order], [group[k] for k in order]
        for i, e in enumerate(have):
            first = group.index(group[i])
            e.rank = ("=" if group.count(group[i]) > 1 else "") + str(first + 1)
    for i, e in enumerate(have[:-1]):
        v, nv = value(e), value(have[i + 1])
        assert v is not None and nv is not None
        e.ratio_next = _ratio(reps(e), reps(have[i + 1]), v.median, nv.median,
                              invert=lower_better)
    shown.sort(key=lambda e: value(e).median if lower_better else -value(e).median)  # type: ignore[union-attr]
    for e in shown:
        e.rank = "not ranked"
        e.note = _join(e.note, "not ranked: a setting shown for its trade (ranked = false)")
    for e in rest:
        e.rank = "–"
        if e.measured and measure == "cost":
            e.note = _join(e.note, "no cost account: not ranked by cost")
    return have + shown + rest


def _join(a: str, b: str) -> str:
    return f"{a}; {b}" if a else b


def verdict_rows(data: CampaignData) -> list[Verdict]:
    """The verdict of one campaign, one Verdict per use case and frame size."""
    rate: dict[PointKey, dict[int, float]] = defaultdict(dict)
    cost: dict[PointKey, dict[int, float]] = defaultdict(dict)
    kernel: dict[PointKey, list[float]] = defaultdict(list)
    bound: dict[PointKey, int] = defaultdict(int)
    sharing: dict[PointKey, int] = {}
    for t in data.ok_trials:
        if t.method == "rplus" and "tester_core_sharing" in t.extra:
            k = PointKey.of(t)
            sharing[k] = max(sharing.get(k, 1), int(t.extra["tester_core_sharing"]))
    cpu: dict[PointKey, list[tuple[float | None, float | None]]] = defaultdict(list)
    user: dict[PointKey, list[float]] = defaultdict(list)
    notes: dict[PointKey, str] = {}
    #: the cache line's round trip between tester and SUT CPUs of the R+
    #: trial of each repetition, ns (measure/placement.py)
    rtt: dict[PointKey, dict[int, float]] = defaultdict(dict)
    at = rplus_trials(data)
    for r in data.ok_results:
        # a SUT left out of the ranks (``ranked = false``) is drawn, not judged
        if r.method != "rplus" or not data.ranked(r.sut):
            continue
        k = PointKey.of(r)
        rate[k][int(r.repetition)] = float(r.rate_total_pps)
        if r.busy_cycles_per_frame:
            cost[k][int(r.repetition)] = float(r.busy_cycles_per_frame)
            if capacity_note(r.extra):
                notes[k] = capacity_note(r.extra)
        elif (r.extra or {}).get("cost_why") and k not in notes:
            notes[k] = f"no capacity figure in some repetitions: {r.extra['cost_why']}"
        if r.id in at:
            c = cpu_at_load(at[r.id])
            cpu[k].append((c.cycles_per_frame, c.pct))
            if (ns := trial_rtt(at[r.id].extra)) is not None:
                rtt[k][int(r.repetition)] = ns
        if (u := user_space_part(r.busy_cycles_per_frame, r.extra)) is not None:
            user[k].append(u)
        if (r.extra or {}).get("kernel_cycles_per_frame"):
            kernel[k].append(float(r.extra["kernel_cycles_per_frame"]))
        if r.tester_bound:
            bound[k] += 1
    missing = {g: {sv: why for sv, why in m.items() if data.ranked(sv[0])}
               for g, m in unmeasured(data).items()}
    groups: dict[tuple[Any, ...], list[PointKey]] = defaultdict(list)
    for k in rate:
        groups[k.group()].append(k)
    for g in missing:
        groups.setdefault(g, [])
    out: list[Verdict] = []
    cores = tester_cores(data.campaign.spec)
    fastest = fastest_placement([ns for reps in rtt.values() for ns in reps.values()])
    for g, keys in sorted(groups.items(), key=lambda kv: kv[0]):
        ceiling_of: dict[str, Spread] = {}
        for k in keys:
            if k.sut in data.reference_suts:
                ceiling_of[k.point.virtual_port or "veth"] = spread_of(list(rate[k].values()))
        # SUTs are compared on one path with one kind of virtual port
        by_port: dict[str, list[PointKey]] = defaultdict(list)
        for k in keys:
            if k.sut not in data.reference_suts:
                by_port[k.point.virtual_port].append(k)
        todo = dict(missing.get(g, {}))
        # a session that could not be set up never learnt its virtual port
        # (results stored before the runner recorded the cell's port): its
        # label has none; it belongs with that SUT's data from a cell of the
        # campaign's own kind (not with a cell that named its port, as the
        # vhost-user cell next to memif ones: that cell's misses carry its
        # port) or, when the SUT has none here, with the only port type the
        # others used
        ports = sorted(by_port)
        named = {(r.sut, r.point.virtual_port) for r in data.ok_results
                 if r.method == "rplus" and PointKey.of(r).group() == g
                 and r.point.virtual_port in r.key.split("|")}
        for (sut, vp), why in list(todo.items()):
            if vp or sut in data.reference_suts:
                continue
            mine = [p for p in ports if any(k.sut == sut for k in by_port[p])
                    and (sut, p) not in named]
            to = mine[0] if mine else ports[0] if len(ports) == 1 else None
            if to:
                del todo[(sut, vp)]
                todo.setdefault((sut, to), []).extend(why)
        for vp, suts in sorted(by_port.items()):
            entries = [_entry(k, rate[k], cost[k], bound[k], ceiling_of.get(vp or "veth"),
                              cores, sharing.get(k), todo.pop((k.sut, vp), []), kernel[k],
                              cpu[k], notes.get(k, ""), user[k])
                       for k in suts]
            if fastest:
                for e, k in zip(entries, suts, strict=True):
                    _placement(e, rtt[k], fastest)
            measure = "rate" if all(e.limit == "SUT" for e in entries) else "cost"
            entries = rank_entries(entries, measure)
            # the bare wire is the ceiling, not a SUT: its misses are only
            # under "Not measured"
            entries += [_unmeasured(sut, v, todo.pop((sut, v)))
                        for sut, v in sorted(todo) if v == vp
                        and sut not in data.reference_suts]
            out.append(Verdict(
                use_case=USE_CASES.get(suts[0].scenario, suts[0].scenario)
                + (f" [{vp}]" if vp else ""),
                scenario=suts[0].scenario, direction=g[1], frame_size_b=int(g[2]),
                extras=suts[0].extras(), measure=measure,
                ceiling=ceiling_of.get(vp or "veth"), entries=entries))
        rest = [_unmeasured(sut, vp, why) for (sut, vp), why in sorted(todo.items())
                if sut not in data.reference_suts]
        if rest:
            scen = _scenario_of(g)
            out.append(Verdict(use_case=USE_CASES.get(scen, scen), scenario=scen,
                               direction=g[1], frame_size_b=int(g[2]), extras="",
                               measure="rate", ceiling=None, entries=rest))
    return out


#: what did not give a value at one repetition: (repetition, status, reason)
Miss = tuple[int, str, str]


def unmeasured(data: CampaignData) -> dict[tuple[Any, ...], dict[tuple[str, str], list[Miss]]]:
    """R+ repetitions that gave no value, per test point group and (SUT,
    virtual port): failed searches and skipped or failed trials, one per
    repetition. An attempt the runner retried with success (a SUT restarted
    after its port stopped taking peers: runner.py) is not missing."""
    ok = {(PointKey.of(r), int(r.repetition)) for r in data.ok_results if r.method == "rplus"}
    per: dict[tuple[PointKey, int], tuple[str, str]] = {}
    for r in data.results:
        if r.method == "rplus" and r.status != "ok":
            per.setdefault((PointKey.of(r), int(r.repetition)), (r.status, r.reason or "–"))
    for t in data.trials:
        if t.method == "rplus" and t.status != "ok" and t.result_id is None:
            per.setdefault((PointKey.of(t), int(t.repetition)), (t.status, t.reason or "–"))
    out: dict[tuple[Any, ...], dict[tuple[str, str], list[Miss]]] = defaultdict(dict)
    for (k, rep), (status, reason) in sorted(per.items()):
        if (k, rep) in ok:
            continue
        out[k.group()].setdefault((k.sut, k.point.virtual_port), []).append((rep, status, reason))
    return out


def _why(misses: list[Miss]) -> str:
    """'failed: reason' (one per distinct status and reason, in order)."""
    seen: list[str] = []
    for _, status, reason in misses:
        s = f"{status}: {reason}"
        if s not in seen:
            seen.append(s)
    return "; ".join(seen)


def _unmeasured(sut: str, vp: str, misses: list[Miss]) -> Entry:
    """The entry of a SUT with no value at a verdict row: never ranked, its
    cell says what happened and why (the stored status and reason)."""
    status = "failed" if any(m[1] == "failed" for m in misses) else misses[0][1]
    return Entry(sut=sut_label(sut, vp), name=sut, port=vp, limit=status, note=_why(misses))


def _placement(e: Entry, rtt: dict[int, float], fastest: float) -> None:
    """Marks an entry whose repetitions ran with the tester's and the SUT's
    virtual CPUs placed apart (a cache line's round trip ``SLOW_FACTOR``
    times the campaign's fastest or more), in ``e.apart`` and its note."""
    if not rtt:
        return
    slow = sorted(ns for ns in rtt.values() if ns >= SLOW_FACTOR * fastest)
    e.apart = (len(slow), len(rtt))
    if slow:
        e.note = _join(e.note, f"vCPUs placed apart by the host in {len(slow)}/{len(rtt)} "
                               f"(cache line round trip {slow[len(slow) // 2]:.0f} ns, "
                               f"{fastest:.0f} at best)")


def rplus_trials(data: CampaignData) -> dict[int, Trial]:
    """result id -> the R+ trial that set it (its CPU and cost samples)."""
    out: dict[int, Trial] = {}
    for t in data.ok_trials:
        if t.method == "rplus" and t.result_id is not None:
            out[t.result_id] = t
    return out


def tester_processes(k: PointKey) -> int:
    """Busy-polling tester and VNF processes a test point runs: one turnout-gen
    per stream (or per pair of directions) plus one per chain VNF."""
    if k.scenario == "loopback":
        return 1 + k.point.vnfs
    if k.scenario == "nvsn":
        return k.point.pairs
    return 1


def tester_cores(spec: dict[str, Any]) -> int:
    """CPUs the campaign gives its tester (and the VNFs, which share them)."""
    c = spec.get("campaign", {}) if isinstance(spec, dict) else {}
    cpus = {c.get("tester_cpu", 0)}
    if c.get("tester_rx_cpu") is not None:
        cpus.add(c["tester_rx_cpu"])
    return max(1, len(cpus))


def _entry(k: PointKey, rate: dict[int, float], cost: dict[int, float], bound: int,
           ceil: Spread | None, cores: int = 1, sharing: int | None = None,
           misses: list[Miss] | None = None, kernel: list[float] | None = None,
           cpu: list[tuple[float | None, float | None]] | None = None,
           cap_note: str = "", user: list[float] | None = None) -> Entry:
    """One SUT's entry: its rate, capacity and CPU at this load over
    repetitions, what limited it, and the repetitions that gave no value
    (``misses``) with their reason."""
    e = Entry(sut=k.sut_label(), name=k.sut, port=k.point.virtual_port, by_rep_rate=dict(rate),
              by_rep_cost=dict(cost), tester_bound=bound)
    e.rate = spread_of(list(rate.values()))
    e.cost = spread_or_none(list(cost.values()))
    e.kernel = spread_or_none(kernel or [])
    e.user = spread_or_none(user or [])
    e.cpu = spread_or_none([c for c, _ in cpu or [] if c is not None])
    e.cpu_pct = spread_or_none([p for _, p in cpu or [] if p is not None])
    limited = []
    if bound and bound * 2 >= e.rate.n:
        limited.append(f"tester-bound in {bound}/{e.rate.n}")
    if ceil is not None and ceil.median > 0:
        e.headroom = e.rate.scaled(1 / ceil.median)
        if e.rate.max >= ceil.min or e.rate.median >= 0.95 * ceil.median:
            limited.append(f"at the tester's ceiling ({fmt(e.headroom.median, 2)}×)")
    # measured: the most tester/VNF processes pinned to one core in its
    # trials; else estimated from the scenario and the tester's cores
    shared = sharing if sharing is not None else -(-tester_processes(k) // cores)
    if shared > 1:
        limited.insert(0, f"{shared} busy-polling tester/VNF processes share a core: "
                          "the scheduler sets the rate")
    e.limit = ("scheduler" if shared > 1 else "tester") if limited else "SUT"
    e.note = "; ".join(limited)
    if ceil is None and k.point.virtual_port == "memif":
        e.note = _join(e.note, "the tester's ceiling over memif is not measured")
    if misses:
        reps = len(rate) + len(misses)
        statuses = {m[1] for m in misses}
        if len(statuses) == 1:
            reasons = "; ".join(dict.fromkeys(m[2] for m in misses))
            what = f"{misses[0][1]}: {reasons}"
        else:
            what = f"without a value: {_why(misses)}"
        e.note = _join(e.note, f"{len(misses)} of {reps} repetitions {what}")
    if cap_note:
        e.note = _join(e.note, cap_note if cap_note.startswith("no capacity")
                       else f"capacity {cap_note}")
    return e


def _scenario_of(group: tuple[Any, ...]) -> str:
    """The scenario of a PointKey.group() (its first item is scenario_rank's pair)."""
    return str(group[0][1])


#: how tables name the two ranking measures
MEASURE_LABEL = {"rate": "R+", "cost": "capacity"}


def capacity_cell(e: Entry, hz: float) -> str:
    """'202 [189–275] (14.8 Mpps/core)': capacity with its projected rate per core."""
    if e.cost is None:
        return "–"
    proj = f" ({fmt(hz / e.cost.median / 1e6, 2)} Mpps/core)" if hz > 0 and e.cost.median else ""
    return fmt_spread(e.cost, 0) + proj


def cpu_cell(cyc: Spread | None, pct: Spread | None) -> str:
    """'410 [380–455] (38 %)': CPU at this load per frame and in % of a core."""
    if cyc is None and pct is None:
        return "–"
    head = fmt_spread(cyc, 0) if cyc is not None else "–"
    return head + (f" ({fmt(pct.median, 2)} % of a core)" if pct is not None else "")


def _ratio_cell(r: Spread | None) -> str:
    if r is None:
        return "–"
    return fmt_spread(r, 2) + (" (n=1)" if r.n < 2 else "")


def _hz(data: CampaignData) -> float:
    for t in data.ok_trials:
        hz = t.extra.get("cycles_hz") if isinstance(t.extra, dict) else None
        if hz:
            return float(hz)
    return 0.0


VERDICT_NOTE = (
    "Ranked by R+ where every SUT set its own rate; by capacity as soon as one of them was "
    "limited by the tester or the scheduler. Capacity: the SUT's own account of the cycles "
    "it spent working on frames, per frame, with idle handling (empty polls, sleeps, "
    "wake-ups) left out for every SUT alike — lower is better; Mpps/core is the TSC rate "
    "over it, what one core would forward at saturation doing only this work (an upper "
    "bound). CPU at this load: everything the SUT's threads consumed in the same R+ trial's "
    "traffic window per frame, empty polls and wake-ups included (OS CPU time; a kernel "
    "switch: its CPUs' kernel time), and in % of a core; not ranked. Two SUTs share a rank "
    "(=) when their min–max ranges overlap; with one repetition nothing is ranked (–). "
    "× next: how many times better than the next SUT, repetition by repetition. of "
    "ceiling: R+ over the bare wire's on the same path and port type (the tester's own "
    "ceiling). Of it in user space: the capacity less the SUT's kicks to its peers per "
    "frame (their system calls, timed by turnoutd; – for SUTs that do not account "
    "them): on veth a kick is AF_XDP's sendto(), which copies every frame and runs the "
    "tester's receive, most of the capacity there; what is left is the switch's own "
    "code. Kernel share: the kernel's work on the SUT's CPUs per frame outside any "
    "process (on veth, the receive its transmits cause, the tester's AF_XDP copy "
    "included), next to the others, never added (docs/bench.md, \"Kernel share\"). SUTs "
    "without a value are in the matrix above and under \"Not measured\".")


def verdict_table(data: CampaignData, rows: list[Verdict] | None = None) -> Table:
    """The verdict in detail: one row per SUT with a value at each verdict row
    (SUTs without one are in the matrix and under "Not measured")."""
    rows = verdict_rows(data) if rows is None else rows
    hz = _hz(data)
    t = Table(
        key="verdict-table", title="Verdict in detail",
        columns=["use case", "dir", "size B", "rank", "SUT", "ranked by", "R+ Mpps",
                 "capacity cyc/frame", "of it in user space cyc/frame",
                 "CPU at this load cyc/frame", "kernel share cyc/frame",
                 "n", "× next", "of ceiling", "limited by", "why"],
        note=VERDICT_NOTE,
    )
    for v in rows:
        for e in v.entries:
            if not e.measured:
                continue
            t.rows.append([
                v.use_case, v.direction, str(v.frame_size_b) + (f" {v.extras}" if v.extras else ""),
                e.rank, e.sut, MEASURE_LABEL.get(v.measure, v.measure),
                fmt_spread(e.rate.scaled(1e-6)) if e.rate else "–",
                capacity_cell(e, hz), fmt_spread(e.user, 0) if e.user else "–",
                cpu_cell(e.cpu, e.cpu_pct),
                fmt_spread(e.kernel, 0) if e.kernel else "–",
                str(e.rate.n) if e.rate else "–",
                _ratio_cell(e.ratio_next),
                fmt_spread(e.headroom, 2) if e.headroom else "–",
                e.limit or "–", e.note or "–",
            ])
            t.flags.append("" if e.limit == "SUT" else (e.limit or ""))
    return t


def latency_verdict_table(data: CampaignData) -> Table:
    """p99 latency at the fixed rates every SUT was offered (method
    ``fixed``), SUTs in order (lower first) with the overlap rule, the bare
    wire's p99 at the same rate as the floor, and what set each figure."""
    t = Table(
        key="latency-verdict", title="Latency at fixed rates (p99; one way, round trip for rtt)",
        columns=["scenario", "size B", "rate", "rank", "SUT", "p99 µs [min–max]",
                 "CPU at this load cyc/frame", "n", "× next", "wire floor µs", "limited by",
                 "SUT CPU isolated", "other threads on SUT CPU ms [min–max]"],
        note=("Every SUT offered the same absolute rate, below every tester ceiling. "
              "Ranked by p99 (lower first) with the overlap rule of the verdict. The wire "
              "floor is the bare wire's p99 at that rate on the same path: what the tester "
              "and the kernel add without any switch. Scheduler: more busy-polling tester/VNF "
              "processes than tester cores, or the SUT's threads waited on average "
              f"≥ {SCHED_WAIT_FLAG_US:g} µs for a CPU each time another thread took it from "
              "them in a repetition (the kernel's context switches in the traffic window; "
              "where not traced, each time they were to run, own wake-ups included, from "
              "/proc schedstat): the latency is the scheduler's. Host: in a repetition the "
              f"hypervisor ran something else for ≥ {HOST_STOLEN_FLAG_US / 1e3:g} ms at once "
              "on the physical CPU under the SUT's virtual CPU while its thread was on it (steal, "
              "traced per scheduler tick: the Latency trials table): frames waited that long "
              "whatever the switch. SUT CPU isolated: "
              "whether the campaign moved the movable kernel work (unbound workqueues, "
              "kernel threads, IRQs) off the SUT's CPUs (isolate_sut_cpus); other threads: "
              "the CPU time other threads ran on the SUT's CPUs inside each repetition's "
              "traffic window, per trial in the next table (docs/bench.md, \"What else runs "
              "on the SUT's CPU\"). CPU at this load: everything the SUT's threads consumed "
              "in the traffic window per frame, polling and wake-ups included, and in % of a "
              "core (a kernel switch: its CPUs' kernel time). SUT could not take the load: "
              "the SUT pushed back so that the tester sent less than the rate (the share it "
              "sent in brackets); its p99 is at the load it got."),
    )
    lat: dict[tuple[Any, ...], dict[int, float]] = defaultdict(dict)
    cpu: dict[tuple[Any, ...], list[tuple[float | None, float | None]]] = defaultdict(list)
    refused: dict[tuple[Any, ...], list[str]] = defaultdict(list)
    iso: dict[tuple[Any, ...], set[str]] = defaultdict(set)
    others: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    shared: dict[tuple[Any, ...], int] = defaultdict(lambda: 1)
    #: the SUT's largest mean run-queue wait ≥ the flag, µs
    waited: dict[tuple[Any, ...], float] = {}
    #: the longest the hypervisor took the SUT's vCPU at once, µs, per repetition
    stole: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    trials: dict[tuple[Any, ...], list[Trial]] = defaultdict(list)
    for tr in data.ok_trials:
        if tr.method != "fixed" or tr.latency_p99_ns is None:
            continue
        label = sut_label(tr.sut, tr.point.virtual_port)
        key = (scenario_rank(tr.scenario), int(tr.point.frame_size_b), round(tr.offered_total_pps),
               int(tr.point.burst), tr.point.virtual_port or "veth", tr.sut, label)
        lat[key][int(tr.repetition)] = float(tr.latency_p99_ns)
        trials[key].append(tr)
        c = cpu_at_load(tr)
        cpu[key].append((c.cycles_per_frame, c.pct))
        if why := refusal(tr):
            refused[key].append(why)
        shared[key] = max(shared[key], int(tr.extra.get("tester_core_sharing", 1)))
        iso[key].add(isolation_of(tr.extra))
        ot = tr.extra.get("sut_cpu_others")
        if isinstance(ot, dict) and "ms" in ot:
            others[key].append(float(ot["ms"]))
        if (w := sched_wait_us(tr.extra)) is not None and w >= SCHED_WAIT_FLAG_US:
            waited[key] = max(waited.get(key, 0.0), w)
        if (st := stolen_of(tr.extra)) is not None:
            stole[key].append(float(st["max_us"]))
    # a SUT that chooses how it waits for frames (turnoutd): the regime its
    # workers ran in, next to its CPU (report/regime.py), so a p99 bought by
    # polling shows what it cost
    if any(wake_of(tr) is not None for ts in trials.values() for tr in ts):
        t.columns.insert(7, "wake-up regime")
        t.note += (" Wake-up regime: how a SUT that can sleep waited for frames in each "
                   "repetition (poll: kept polling, a core like a busy poller; wake: slept "
                   "and was woken; nap) and why; the table \"Wake-up regime at fixed rates\" "
                   "below has the figures.")
    if any(not data.ranked(k[5]) for k in lat):
        t.note += (" Not ranked: a setting of another SUT the campaign shows for its trade "
                   "([sut.NAME] ranked = false), listed after the ranked SUTs.")
    groups: dict[tuple[Any, ...], list[tuple[Any, ...]]] = defaultdict(list)
    for key in lat:
        groups[key[:5]].append(key)
    for g, keys in sorted(groups.items()):
        floor = [k for k in keys if k[5] in data.reference_suts]
        suts = [k for k in keys if k[5] not in data.reference_suts]
        floor_s = spread_of(list(lat[floor[0]].values())) if floor else None
        entries = []
        for k in suts:
            e = Entry(sut=k[6], by_rep_cost=dict(lat[k]), cost=spread_of(list(lat[k].values())),
                      ranked=data.ranked(k[5]))
            e.limit = "scheduler" if shared[k] > 1 else "SUT"
            if k in waited:
                e.limit = f"scheduler (SUT waited {waited[k]:.0f} µs per run for a CPU)"
            elif (hit := [u for u in stole[k] if u >= HOST_STOLEN_FLAG_US]) and shared[k] == 1:
                e.limit = (f"host (took the SUT's vCPU ≥ {HOST_STOLEN_FLAG_US / 1e3:g} ms at once "
                           f"in {len(hit)}/{len(lat[k])}, longest {max(hit) / 1e3:.1f} ms)")
            if refused[k]:
                shares = ", ".join(sent_share(w) or "?" for w in refused[k])
                e.limit = (f"SUT could not take the load in {len(refused[k])}/{len(lat[k])} "
                           f"(sent {shares})")
            e.cpu = spread_or_none([c for c, _ in cpu[k] if c is not None])
            e.cpu_pct = spread_or_none([p for _, p in cpu[k] if p is not None])
            entries.append(e)
        by_label = {k[6]: k for k in suts}
        for e in rank_entries(entries, "cost"):
            assert e.cost is not None
            rate = f"{g[2] / 1e3:g} kpps" + (f", bursts of {g[3]}" if g[0][1] == "rtt" else "")
            row = [g[0][1], str(g[1]), rate, e.rank, e.sut,
                   fmt_spread(e.cost.scaled(1e-3)), cpu_cell(e.cpu, e.cpu_pct),
                   str(e.cost.n),
                   _ratio_cell(e.ratio_next),
                   fmt_spread(floor_s.scaled(1e-3)) if floor_s else "–", e.limit,
                   "/".join(sorted(iso[by_label[e.sut]])),
                   fmt_spread(spread_or_none(others[by_label[e.sut]]), 1)
                   if others[by_label[e.sut]] else "–"]
            if "wake-up regime" in t.columns:
                row.insert(7, regime_cell_text(trials[by_label[e.sut]]))
            t.rows.append(row)
            t.flags.append("" if e.limit == "SUT" else e.limit)
    return t


#: a latency row is flagged "host" when the hypervisor took the SUT's
#: virtual CPU this long at once in one of its repetitions, µs
HOST_STOLEN_FLAG_US = 1000.0


def sched_wait_us(extra: dict[str, Any]) -> float | None:
    """The SUT's mean wait for a CPU another thread held, µs per preemption
    in the traffic window (``extra.sut_cpu_trace``, measure/schedtrace.py);
    in trials without it, its run-queue wait per run over the trial
    (``extra.sut_sched``: own wake-ups included); None when neither."""
    tr = extra.get("sut_cpu_trace")
    if isinstance(tr, dict) and isinstance(tr.get("preempted"), dict):
        n = int(tr["preempted"].get("n", 0))
        return float(tr["preempted"].get("ms", 0.0)) * 1e3 / n if n else 0.0
    ss = extra.get("sut_sched")
    if isinstance(ss, dict) and "mean_wait_us" in ss:
        return float(ss["mean_wait_us"])
    return None


def trace_cell(extra: dict[str, Any], key: str) -> str:
    """Who took a traced thread's CPU in the traffic window
    (``extra.sut_cpu_trace`` / ``tester_cpu_trace``): "ms/times (longest µs;
    most: thread ms)", the SUT's sleeps after it; "–" where not traced, the
    reason where it could not be."""
    tr = extra.get(key)
    if not isinstance(tr, dict):
        return "–"
    p = tr.get("preempted")
    if not isinstance(p, dict):
        return str(tr.get("why", "–"))
    by = p.get("by") or []
    cell = f"{float(p['ms']):.1f}/{int(p['n'])}"
    if int(p["n"]):
        cell += f" ({float(p['max_us']):.0f} µs"
        cell += f"; {by[0][0]} {float(by[0][2]):.1f})" if by else ")"
    sl, wk = tr.get("slept") or {}, tr.get("woken") or {}
    if key == "sut_cpu_trace" and int(sl.get("n", 0)):
        cell += (f", slept {int(sl['n'])}× (woken in ≤ {float(wk.get('max_us', 0)):.0f} µs)")
    return cell


def stolen_of(extra: dict[str, Any], key: str = "sut_cpu_trace") -> dict[str, Any] | None:
    """What the hypervisor took from a traced thread's virtual CPU in the
    traffic window (``extra[key]["stolen"]``, measure/schedtrace.py), or
    None where not traced to the nanosecond."""
    tr = extra.get(key)
    st = tr.get("stolen") if isinstance(tr, dict) else None
    return st if isinstance(st, dict) and "ms" in st else None


def steal_cell(extra: dict[str, Any]) -> str:
    """The time the hypervisor took from the SUT's threads on their CPUs in
    the traffic window and the longest single loss, "ms (longest ms)"
    (``sut_cpu_trace.stolen``), and the tester's in brackets; in trials
    without it, the SUT's CPUs' /proc/stat steal over the whole trial
    (``extra.sut_cpu_steal``, 10 ms steps) and the tester's CPUs'; "–"
    where neither (older databases, R+ trials, a SUT without CPUs of its
    own)."""
    st = stolen_of(extra)
    if st is not None:
        te = stolen_of(extra, "tester_cpu_trace")
        tester = (f" (tester {float(te['ms']):.1f}, longest {float(te['max_us']) / 1e3:.1f})"
                  if te is not None else "")
        return f"{float(st['ms']):.1f}, longest {float(st['max_us']) / 1e3:.1f}{tester}"
    old = extra.get("sut_cpu_steal")
    if not isinstance(old, dict) or "ms" not in old:
        return "–"
    te = extra.get("tester_cpu_steal")
    tester = f" (tester {float(te['ms']):.0f})" if isinstance(te, dict) and "ms" in te else ""
    return f"{float(old['ms']):.0f}{tester}"


def isolation_of(extra: dict[str, Any]) -> str:
    """"on" when the trial ran with the SUT's CPUs isolated (system/isolate.py), else "off"."""
    return "on" if isinstance(extra.get("isolation"), dict) else "off"


def latency_trials_table(data: CampaignData) -> Table:
    """Every fixed-rate latency trial's p99 (at an absolute rate or a
    fraction of R+) next to what else ran on the SUT's CPUs in its traffic
    window (measure/others.py) and what took the SUT's and the tester's
    threads off their CPUs (measure/schedtrace.py), so a reader sees why a
    p99 is what it is."""
    t = Table(
        key="latency-trials",
        title="Latency trials: p99 next to what else ran on the SUT's CPU",
        columns=["SUT", "scenario", "size B", "rate", "rep", "p99 µs", "max µs",
                 "SUT CPU isolated", "other threads ms (kernel threads)", "most (ms/runs)",
                 "most in one sample interval (ms/runs)", "host steal ms",
                 "SUT thread lost its CPU ms/times", "tester thread lost its CPU ms/times"],
        note=("Other threads: CPU time of every thread but the SUT's own that ran on the SUT's CPUs"
              " inside the trial's traffic window (/proc schedstat, sampled every 0.15 s, older "
              "databases every 0.1 s; a thread that may also run elsewhere counts for the intervals"
              " it was seen on a SUT CPU). A busy poller at SCHED_OTHER shares its CPU with them, "
              "and frames wait while they run: a p99 of milliseconds next to a thread's run of "
              "milliseconds is that thread, not the switch. Host steal: the time the hypervisor ran"
              " something else on the physical CPU while the SUT's threads were on their virtual "
              "CPU in the traffic window, and the longest single loss (the kernel's "
              "sched_stat_runtime events: time on the CPU minus run time charged, per scheduler "
              "tick), in brackets the tester's thread's; older databases: the SUT's CPUs' "
              "/proc/stat steal over the whole trial in 10 ms steps. A p99 of milliseconds next to "
              "a loss of milliseconds at once is the host. Lost its CPU: the kernel's context "
              "switches of the SUT's threads pinned to its CPUs and of the tester's (turnout-gen) "
              "inside the traffic window (tracefs): the time another thread held the CPU while the "
              "thread could run, how often, the longest, and the thread that held it longest; for "
              "the SUT also how often it went to sleep and the longest of its own wake-ups (from "
              "the wake-up being asked to the thread running). A p99 next to a tester that lost its"
              " CPU for milliseconds is the tester's. Isolated: the campaign moved the movable "
              "kernel work and other processes' threads elsewhere (isolate_sut_cpus); what "
              "could not move (per-CPU ksoftirqd, kworker/N:*, managed IRQs, threads pinned to "
              "the SUT's CPUs) still runs there."),
    )
    rows = []
    for tr in data.ok_trials:
        ot = tr.extra.get("sut_cpu_others")
        if (tr.method not in ("fixed", "latency") or tr.latency_p99_ns is None
                or not isinstance(ot, dict)):
            continue
        if "ms" in ot:
            top = ot.get("threads") or []
            most = ", ".join(f"{c} {ms:.1f}/{n}" for c, ms, n in top[:2]) or "–"
            mi = ot.get("max_interval") or {}
            one = f"{mi.get('comm')} {float(mi.get('ms', 0)):.1f}/{mi.get('runs')}" if mi.get(
                "comm") else "–"
            kt = ot.get("kernel_threads") or []
            total = f"{float(ot['ms']):.1f}" + (
                f" (kernel {float(ot['kernel_ms']):.1f}"
                + (f": {kt[0][0]} {float(kt[0][1]):.1f}" if kt else "") + ")"
                if "kernel_ms" in ot else "")
        else:
            most, one, total = "–", "–", str(ot.get("why", "–"))
        rows.append((tr.sut, tr.scenario, int(tr.point.frame_size_b), tr.offered_total_pps,
                     int(tr.repetition), [
                         sut_label(tr.sut, tr.point.virtual_port), tr.scenario,
                         str(tr.point.frame_size_b),
                         (f"{tr.load_fraction:g}×R+ ({tr.offered_total_pps / 1e3:.0f} kpps)"
                          if tr.method == "latency" and tr.load_fraction
                          else f"{tr.offered_total_pps / 1e3:g} kpps"), str(tr.repetition),
                         f"{tr.latency_p99_ns / 1e3:.0f}",
                         f"{tr.latency_max_ns / 1e3:.0f}" if tr.latency_max_ns else "–",
                         isolation_of(tr.extra), total, most, one, steal_cell(tr.extra),
                         trace_cell(tr.extra, "sut_cpu_trace"),
                         trace_cell(tr.extra, "tester_cpu_trace")]))
    for *_, r in sorted(rows, key=lambda x: x[:5]):
        t.rows.append(r)
        t.flags.append("")
    return t


def cost_check_table(data: CampaignData) -> Table:
    """Capacity (the SUT's own account of its busy cycles per frame) next to
    its second source: the CPU time the OS gave its threads in the same R+
    traffic window, at the same TSC rate, per frame received (its CPU at
    this load)."""
    t = Table(
        key="cost-check",
        title="Capacity and CPU at this load: the SUT's own account vs the OS's CPU time",
        columns=["SUT", "scenario", "size B", "n", "capacity cyc/frame (own account)",
                 "CPU at this load cyc/frame (OS)", "CPU % of a core", "capacity ÷ CPU",
                 "limited by", "kernel share cyc/frame"],
        note=("R+ trials. Capacity: busy cycles (work on frames) per frame the SUT received, "
              "from its own counters, idle handling left out. CPU at this load: CPU time of "
              "all its threads in the traffic window × the TSC rate per frame the tester "
              "received (a kernel switch has no threads: its CPUs' kernel time, which is "
              "also its capacity). capacity ÷ CPU is the share of its CPU that was work on "
              "frames: ≈ 1 when the SUT was busy all the time (it set the rate) or sleeps "
              "when idle; a busy-polling SUT the tester held back spends the rest polling, "
              "which the OS counts and its own account does not (< 1); above 1 where the "
              "host preempted it inside a batch (TSC cycles count wall time). This host's "
              "PMU gives perf no cycle counter, so the OS's accounting is the second "
              "source. Kernel share: the kernel's work on the SUT's CPUs per frame outside "
              "any process, in neither figure."),
    )
    by: dict[tuple[Any, ...], list[tuple[float, float | None, float | None, bool]]] = \
        defaultdict(list)
    kern: dict[tuple[Any, ...], list[float]] = defaultdict(list)
    for tr in data.ok_trials:
        if tr.method != "rplus" or not tr.busy_cycles_per_frame:
            continue
        label = sut_label(tr.sut, tr.point.virtual_port)
        key = (label, tr.scenario, int(tr.point.frame_size_b))
        c = cpu_at_load(tr)
        by[key].append((float(tr.busy_cycles_per_frame), c.cycles_per_frame, c.pct,
                        bool(tr.tester_bound)))
        if tr.extra.get("kernel_cycles_per_frame"):
            kern[key].append(float(tr.extra["kernel_cycles_per_frame"]))
    for (label, scen, size), vals in sorted(by.items()):
        ks = kern.get((label, scen, size))
        own = spread_of([v[0] for v in vals])
        os_vals = [v[1] for v in vals if v[1]]
        pct = [v[2] for v in vals if v[2] is not None]
        ratio = spread_or_none([v[0] / v[1] for v in vals if v[1]])
        bound = sum(v[3] for v in vals)
        t.rows.append([label, scen, str(size), str(len(vals)), fmt_spread(own, 0),
                       fmt_spread(spread_or_none(os_vals), 0),
                       fmt_spread(spread_or_none(pct), 2),
                       fmt_spread(ratio, 2) if ratio else "–",
                       f"tester in {bound}/{len(vals)}" if bound else "SUT",
                       fmt_spread(spread_or_none(ks or []), 0)])
        t.flags.append("")
    return t


def refused_table(data: CampaignData) -> Table:
    """Every trial at a given load (fixed rate or a fraction of R+) in which
    the SUT pushed back so that the tester sent less than the load."""
    t = Table(
        key="refused", title="Loads a SUT could not take",
        columns=["SUT", "scenario", "dir", "size B", "load asked", "sent kpps", "share sent",
                 "rep", "p99 µs", "why"],
        note=("The SUT pushed back (its port was full) so that the tester sent less than "
              "97 % of the load it asked for: not the tester's limit. Its latency and CPU "
              "figures are at the load it really got, and plots draw it there (hollow)."),
    )
    rows = []
    for tr in data.ok_trials:
        why = refusal(tr)
        if not why:
            continue
        asked = (f"{fmt(tr.load_fraction)} × R+ ({tr.offered_total_pps / 1e3:.4g} kpps)"
                 if tr.load_fraction is not None else f"{tr.offered_total_pps / 1e3:.4g} kpps")
        sent_pps = tr.tx_total_pps or (tr.sent / tr.duration_s if tr.duration_s else 0.0)
        rows.append(((scenario_rank(tr.scenario), tr.sut, int(tr.point.frame_size_b),
                      tr.offered_total_pps, int(tr.repetition)), [
            sut_label(tr.sut, tr.point.virtual_port), tr.scenario, tr.point.direction,
            str(tr.point.frame_size_b), asked, f"{sent_pps / 1e3:.4g}", sent_share(why) or "–",
            str(tr.repetition),
            f"{tr.latency_p99_ns / 1e3:.0f}" if tr.latency_p99_ns else "–", why]))
    for _, r in sorted(rows, key=lambda x: x[0]):
        t.rows.append(r)
        t.flags.append(REFUSED)
    return t


def verdict_section(data: CampaignData) -> Section:
    """The report's first section (HTML id ``verdict``): the matrix at a
    glance with a sentence per use case, then the tables in detail."""
    from .glance import glance_matrix
    from .methods import rule_update_verdict_table  # builds on this module

    rows = verdict_rows(data)
    updates = rule_update_verdict_table(data)
    refused = refused_table(data)
    regimes = regime_table(data)
    sec = Section(
        key="verdict", title="Verdict",
        intro=("Which switch for which use case, by how much, and what limited each number "
               "(use cases of Software switches for NFV Table 3; tables in detail below)."
               + (f" Not ranked ({', '.join(sorted(data.unranked_suts))}): measured and "
                  "drawn in the latency tables and the CPU vs p99 pictures, left out of the "
                  "ranks as a setting of another SUT shown for the trade it makes "
                  "([sut.NAME] ranked = false)." if data.unranked_suts else "")),
        matrices=[m] if (m := glance_matrix(data, rows)).rows else [],
        tables=[verdict_table(data, rows), latency_verdict_table(data),
                *([regimes] if regimes.rows else []),
                *([refused] if refused.rows else []),
                *([lt] if (lt := latency_trials_table(data)).rows else []),
                cost_check_table(data), *([updates] if updates.rows else [])],
    )
    if not rows and not any(t.rows for t in sec.tables):
        # a fixed-rate latency campaign has no R+ but its latency tables
        sec.empty = "No R+ result in this campaign: nothing to rank."
    return sec
