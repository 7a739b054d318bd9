"""Pictures where people would rather look than read.

- **One picture per use case** (``usecase_section``): each SUT's capacity
  (cycles of work per frame, median with its min–max bar) at every frame
  size and kind of port of the use case's verdict rows, and its p99 at
  every fixed rate every SUT was offered, with the bare wire's p99 at that
  rate drawn as a line: the floor no switch can go below.
- **CPU vs p99** (``cpu_latency_section``): at each load a SUT was
  offered (fixed rates and fractions of its R+), its p99 next to its CPU at
  that load, in a table and in one picture per path (x: CPU in % of a
  core, y: p99; a point per SUT and load, labelled with the load), so a
  reader sees the trade each switch makes: a busy poller buys its latency
  with a whole core at any load, a switch that sleeps pays wake-ups.

A trial whose SUT could not take its load (report/cpuload.py ``refusal``)
is drawn at the load it really got, hollow, and says so.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ..results import Trial
from .cpuload import capacity_note, cpu_at_load, refusal, sent_share
from .formatting import fmt, fmt_spread
from .model import Figure, Panel, Point, Section, Series, Spread, Table, slug, spread_of
from .model import spread_or_none as _sn
from .points import CampaignData, offered_pps, scenario_rank, sut_label
from .regime import regime_cell_text, wake_of
from .verdict import Verdict, verdict_rows

__all__ = ["cpu_latency_section", "usecase_section"]

SHORT = {"p2p": "p2p", "p2v": "p2v", "v2p": "v2p", "v2v": "v2v", "loopback": "chain",
         "nvsn": "NvsN", "density": "density", "overlay": "overlay"}


def _port_of(v: Verdict) -> str:
    if v.use_case.endswith("]") and "[" in v.use_case:
        return v.use_case.rsplit("[", 1)[1][:-1]
    return ""


def _p(s: Spread, noisy: bool = False) -> Point:
    return Point(0, s.median, s.min, s.max, s.n, noisy)


def _fixed(data: CampaignData) -> list[Trial]:
    return [t for t in data.ok_trials if t.method == "fixed" and t.latency_p99_ns is not None]


_PORT_ORDER = {"veth": 0, "": 0, "memif": 1, "vhost-user": 2}


def usecase_section(data: CampaignData, rows: list[Verdict] | None = None) -> Section:
    """One figure per use case (see the module doc): a capacity panel and a
    p99 panel per frame size (and fixed rate), every kind of port in it (the
    labels say which; SUTs are ranked only against SUTs on the same port)."""
    sec = Section(
        key="use-cases", title="Use cases in pictures",
        intro=("Per use case and frame size: each SUT's capacity per frame (median over "
               "repetitions with its min–max bar; lower is better; hollow: one repetition), "
               "and its p99 at each fixed rate every SUT was offered, with the bare wire's "
               "p99 at that rate on each kind of port as a dashed line — the floor (hollow: "
               "the SUT could not take that rate; its p99 is at the load it got). The label "
               "names the kind of port: SUTs are ranked only against others on the same one."),
    )
    rows = verdict_rows(data) if rows is None else rows
    fixed = _fixed(data)
    by_case: dict[tuple[Any, ...], list[Verdict]] = defaultdict(list)
    for v in rows:
        by_case[(scenario_rank(v.scenario), v.direction, v.extras)].append(v)
    for (rank, d, extras), vs in sorted(by_case.items()):
        scen = rank[1]
        panels = []
        for size in sorted({v.frame_size_b for v in vs}):
            series = []
            for v in sorted((v for v in vs if v.frame_size_b == size),
                            key=lambda v: _PORT_ORDER.get(_port_of(v), 3)):
                for e in sorted((e for e in v.entries if e.cost is not None),
                                key=lambda e: e.cost.median if e.cost else 0.0):
                    assert e.cost is not None
                    p = _p(e.cost, noisy=e.cost.n < 2)
                    p.x = e.sut
                    series.append(Series(e.sut, [p], style=""))
            if series:
                panels.append(Panel(f"capacity, {size} B", "",
                                    "cycles per frame (lower is better)", series, kind="cat"))
        at: dict[tuple[Any, ...], dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
        for t in fixed:
            if (t.scenario, t.point.direction) == (scen, d) and _extras_of(t) == extras:
                at[(int(t.point.frame_size_b), round(t.offered_total_pps))][
                    sut_label(t.sut, t.point.virtual_port)].append(t)
        for (size, rate), by_sut in sorted(at.items()):
            series = []
            hl = []
            for lab, ts in sorted(by_sut.items(),
                                  key=lambda kv: _PORT_ORDER.get(kv[1][0].point.virtual_port, 3)):
                s = spread_of([float(t.latency_p99_ns or 0) / 1e3 for t in ts])
                if ts[0].sut in data.reference_suts:
                    hl.append((s.median, f"{lab} p99 {fmt(s.median)} µs (the floor)"))
                    continue
                p = _p(s, noisy=any(refusal(t) for t in ts) or s.n < 2)
                p.x = lab
                series.append(Series(lab, [p], style=""))
            if series:
                panels.append(Panel(f"p99 at {rate / 1e3:g} kpps, {size} B", "",
                                    "p99 latency (µs)", series, kind="cat", ylog=True,
                                    hlines=hl))
        if panels:
            title = SHORT.get(scen, scen) + (f" ({extras})" if extras else "") + (
                " both ways" if d == "bi" else "")
            sec.figures.append(Figure(key=slug("usecase", scen, d, extras), title=title,
                                      panels=panels, cols=min(4, len(panels))))
    if not sec.figures:
        sec.empty = "No R+ or fixed-rate results to draw."
    return sec


def _extras_of(t: Trial) -> str:
    from .points import PointKey

    return PointKey.of(t).extras()


def _load_label(t: Trial) -> str:
    if t.method == "latency" and t.load_fraction is not None:
        return f"{fmt(t.load_fraction)}×R+"
    return f"{t.offered_total_pps / 1e3:g} kpps"


def cpu_latency_section(data: CampaignData) -> Section:
    """CPU vs p99 at every load each SUT was offered (see the module doc)."""
    sec = Section(
        key="cpu-latency", title="CPU vs p99 at fixed loads",
        intro=("At each load the SUTs were offered — fixed rates (the same for every SUT) "
               "and fractions of each SUT's own R+ — the p99 one-way latency next to the "
               "SUT's CPU at that load: everything its threads consumed in the traffic "
               "window (OS CPU time, polling and wake-ups included; a kernel switch: its "
               "CPUs' kernel time), in % of one core and per frame, with its capacity "
               "(cycles of work per frame, idle left out) for comparison. One picture per "
               "path: x the CPU, y the p99 (logarithmic), a point per SUT and load (median "
               "over repetitions, bars min–max), labelled with the load; hollow where the "
               "SUT could not take the load (drawn at the load it got, \"got N %\"). Down and "
               "to the left is better: the trade each switch makes between CPU and latency."),
    )
    trials = [t for t in data.ok_trials
              if t.method in ("fixed", "latency") and t.latency_p99_ns is not None
              and t.offered_total_pps > 0]
    if not trials:
        sec.empty = "No fixed-rate or latency trials in this campaign."
        return sec
    table = Table(
        key="cpu-latency-table", title="p99 and CPU at each load",
        columns=["path", "size B", "SUT", "load", "got kpps", "n", "p99 µs",
                 "CPU % of a core", "CPU at this load cyc/frame", "capacity cyc/frame",
                 "limited by"],
        note=("CPU at this load includes idle handling (a busy poller's empty polls, a "
              "sleeping switch's wake-ups); capacity leaves it out (what one core would "
              "forward at saturation). got: the load the tester really sent (median)."),
    )
    # a SUT that chooses how it waits for frames (turnoutd): the regime its
    # workers ran in at each load (report/regime.py), next to its CPU
    regimes = any(wake_of(t) is not None for t in trials)
    if regimes:
        table.columns.insert(len(table.columns) - 1, "wake-up regime")
        table.note += (" Wake-up regime: how a SUT that can sleep waited for frames (poll: "
                       "kept polling, a core; wake: slept and was woken; nap) and why, in K of "
                       "N repetitions; its points are labelled with it.")
    by_path: dict[tuple[Any, ...], list[Trial]] = defaultdict(list)
    for t in trials:
        by_path[(scenario_rank(t.scenario), t.point.virtual_port or "veth", t.point.direction,
                 _extras_of(t))].append(t)
    for (rank, port, d, extras), ts in sorted(by_path.items()):
        scen = rank[1]
        path = (f"{SHORT.get(scen, scen)}{f' ({extras})' if extras else ''} {port}"
                + (" bi" if d == "bi" else ""))
        panels = []
        for size in sorted({int(t.point.frame_size_b) for t in ts}):
            groups: dict[tuple[str, str], list[Trial]] = defaultdict(list)
            for t in ts:
                if int(t.point.frame_size_b) == size:
                    groups[(sut_label(t.sut, t.point.virtual_port), _load_label(t))].append(t)
            per_sut: dict[str, list[tuple[float, Point]]] = defaultdict(list)
            floors: list[tuple[float, str]] = []
            rows = []
            for (lab, load), g in sorted(groups.items()):
                p99 = spread_of([float(t.latency_p99_ns or 0) / 1e3 for t in g])
                got = spread_of([offered_pps(t) for t in g])
                cpus = [cpu_at_load(t) for t in g]
                pct = _sn([c.pct for c in cpus if c.pct is not None])
                cyc = _sn([c.cycles_per_frame for c in cpus if c.cycles_per_frame])
                cap = _sn([float(t.busy_cycles_per_frame) for t in g if t.busy_cycles_per_frame])
                why = [w for t in g if (w := refusal(t))]
                limit = _limit(g, why)
                if g[0].sut in data.reference_suts:
                    if g[0].method == "fixed":
                        floors.append((p99.median, f"wire p99 at {load}: {fmt(p99.median)} µs"))
                    continue
                regime = regime_cell_text(g)
                rows.append((lab, got.median, [
                    path, str(size), lab, load, f"{got.median / 1e3:.4g}", str(len(g)),
                    fmt_spread(p99), fmt_spread(pct, 2), fmt_spread(cyc, 0),
                    fmt_spread(cap, 0) + (" (with wake-ups)" if any(
                        capacity_note(t.extra) for t in g) else ""),
                    *([regime] if regimes else []), limit]))
                if pct is not None:
                    label = load + (f" (got {', '.join(sent_share(w) for w in why)})"
                                    if why else "")
                    if regime != "–":  # "10 kpps, poll 3/3"
                        label += ", " + regime.split(" (", 1)[0]
                    per_sut[lab].append((got.median, Point(
                        pct.median, p99.median, p99.min, p99.max, p99.n, bool(why), label,
                        pct.min, pct.max)))
            for _lab, _got, r in sorted(rows, key=lambda x: (x[0], x[1])):
                table.rows.append(r)
                table.flags.append("" if r[-1] == "SUT" else r[-1])
            series = [Series(lab, [p for _, p in sorted(pts, key=lambda x: x[0])])
                      for lab, pts in sorted(per_sut.items())]
            if series:
                panels.append(Panel(f"{size} B", "SUT CPU (% of one core)", "p99 latency (µs)",
                                    series, kind="xy", ylog=True, hlines=floors))
        if panels:
            sec.figures.append(Figure(key=slug("cpu-p99", scen, port, d, extras),
                                      title=f"CPU vs p99: {path}", panels=panels))
    sec.tables.append(table)
    return sec


def _limit(g: list[Trial], refused: list[str]) -> str:
    n = len(g)
    if refused:
        return f"SUT could not take the load in {len(refused)}/{n}"
    tb = sum(1 for t in g if t.tester_bound)
    shared = max((int(t.extra.get("tester_core_sharing", 1)) for t in g), default=1)
    if shared > 1:
        return "scheduler (tester/VNF processes share a core)"
    if tb:
        return f"tester in {tb}/{n}"
    return "SUT"
