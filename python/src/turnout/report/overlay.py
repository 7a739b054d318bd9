"""The report's "Overlay" section: what the two-host VXLAN overlay costs
next to plain switching, per SUT (scenario ``overlay`` against ``p2p`` of
the same campaign; turnout/overlay.py, docs/bench.md "Overlay").

For every SUT, direction, frame size and load (its R+ trial, or each fixed
rate) measured on both paths:

- cost per frame, plain: the SUT's busy cycles per frame on one host (p2p);
- cost per frame, overlay: both hosts' switches summed per frame carried,
  with each host's own figure (host A: pod in, encapsulate; host B:
  decapsulate, pod out) where the SUT keeps a per-host account;
- encapsulation cost = overlay − plain, taken repetition by repetition
  (the runs are interleaved, so the host's drift cancels) and given as the
  median with its min–max over repetitions; it contains the second
  switch pass as well as encapsulation and decapsulation;
- the received rates of both paths and their ratio.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from ..results import Trial
from .model import (
    Figure,
    Panel,
    Point,
    Section,
    Series,
    Spread,
    Table,
    spread_of,
    spread_or_none,
    within_noise,
)

__all__ = ["EncapRow", "encap_rows", "overlay_section"]

_METHODS = ("rplus", "fixed")


@dataclass(frozen=True)
class EncapRow:
    """One SUT at one point and load, plain vs overlay."""

    sut: str
    direction: str
    frame_size_b: int
    load: str  # "R+" or "<pps> pps"
    plain_rate: Spread | None
    overlay_rate: Spread | None
    rate_ratio: Spread | None  # overlay / plain, paired by repetition
    plain_cost: Spread | None
    overlay_cost: Spread | None
    host_costs: dict[str, Spread]  # "A" / "B" -> each host's own cycles per frame
    encap_cost: Spread | None  # overlay - plain, paired by repetition
    cost_ratio: Spread | None  # overlay / plain, paired by repetition
    tester_bound: int  # trials (either path) the tester limited
    n_pairs: int  # repetitions measured on both paths with a cost


def _load(t: Trial) -> str:
    return "R+" if t.method == "rplus" else f"{t.offered_total_pps:g} pps"


def encap_rows(trials: list[Trial]) -> list[EncapRow]:
    """Rows of plain (p2p) vs overlay trials of the same SUT, direction,
    frame size and load (only ``ok`` trials of R+ and fixed rates; the R+
    trial of a search is its only trial)."""
    by: dict[tuple[str, str, int, str], dict[str, dict[int, Trial]]] = defaultdict(
        lambda: {"p2p": {}, "overlay": {}})
    for t in trials:
        if t.status != "ok" or t.method not in _METHODS or t.scenario not in ("p2p", "overlay"):
            continue
        if t.point.flows != 1 or t.point.virtual_port:
            continue
        key = (t.sut, t.point.direction, int(t.point.frame_size_b), _load(t))
        by[key][t.scenario][t.repetition] = t
    rows: list[EncapRow] = []
    for (sut, d, size, load), side in sorted(by.items()):
        plain, over = side["p2p"], side["overlay"]
        if not over or not plain:
            continue
        reps = sorted(set(plain) & set(over))
        pc = [plain[r].busy_cycles_per_frame for r in reps]
        oc = [over[r].busy_cycles_per_frame for r in reps]
        pairs = [(p, o) for p, o in zip(pc, oc, strict=True) if p is not None and o is not None]
        rate_pairs = [(plain[r].rx_total_pps, over[r].rx_total_pps) for r in reps]
        hosts: dict[str, list[float]] = defaultdict(list)
        for t in over.values():
            for h, cost in t.overlay_host_costs().items():
                hosts[h].append(cost)
        rows.append(EncapRow(
            sut=sut, direction=d, frame_size_b=size, load=load,
            plain_rate=spread_or_none([t.rx_total_pps for t in plain.values()]),
            overlay_rate=spread_or_none([t.rx_total_pps for t in over.values()]),
            rate_ratio=spread_or_none([o / p for p, o in rate_pairs if p > 0]),
            plain_cost=spread_or_none([t.busy_cycles_per_frame for t in plain.values()
                                if t.busy_cycles_per_frame is not None]),
            overlay_cost=spread_or_none([t.busy_cycles_per_frame for t in over.values()
                                  if t.busy_cycles_per_frame is not None]),
            host_costs={h: spread_of(v) for h, v in sorted(hosts.items())},
            encap_cost=spread_or_none([o - p for p, o in pairs]),
            cost_ratio=spread_or_none([o / p for p, o in pairs if p > 0]),
            tester_bound=sum(1 for t in [*plain.values(), *over.values()] if t.tester_bound),
            n_pairs=len(pairs),
        ))
    return rows


def _f(s: Spread | None, k: float = 1.0, digits: int = 3) -> str:
    from .formatting import fmt_spread

    return "–" if s is None else fmt_spread(s.scaled(k), digits)


def _flag(r: EncapRow) -> str:
    marks = []
    if r.n_pairs < 2:
        marks.append("spread unknown" if r.n_pairs == 1 else "no cost on both paths")
    elif r.plain_cost is not None and r.overlay_cost is not None and within_noise(
            r.plain_cost, r.overlay_cost):
        marks.append("within noise")
    if r.tester_bound:
        marks.append(f"tester-bound ×{r.tester_bound}")
    return ", ".join(marks)


def overlay_section(data: Any) -> Section:
    """The "Overlay" section (``data``: report.queries.CampaignData)."""
    sec = Section(
        key="overlay", title="Overlay: encapsulation cost per frame",
        intro="Two emulated hosts joined by a VXLAN tunnel over a veth underlay (scenario "
              "overlay: tester pod behind host A, sink behind host B, one switch per host) "
              "next to the same SUT switching plainly between two ports on one host (p2p), "
              "same campaign, frame size and load. Cost per frame is the SUT's own account "
              "(busy cycles): for the overlay both hosts' switches summed per frame carried, "
              "with each host's own figure (host A: pod in + encapsulation; host B: "
              "decapsulation + pod out) where the SUT keeps one per host (the Linux bridge's "
              "softirq time is per CPU, so it has only the sum). Encap cost = overlay − plain, "
              "paired repetition by repetition: it includes the second switch pass, not only "
              "encapsulation and decapsulation. Median [min–max] over repetitions; costs "
              "depend on load (compare at the same load).",
    )
    rows = encap_rows(data.trials)
    if not rows:
        sec.empty = ("No overlay results with p2p counterparts in this campaign "
                     "(matrix.scenarios: overlay and p2p).")
        return sec
    table = Table(key="overlay-table", title="Plain vs overlay, cost per frame and rate",
                  columns=["SUT", "dir", "size B", "load", "rate plain Mpps",
                           "rate overlay Mpps", "overlay/plain rate", "plain cyc/frame",
                           "overlay cyc/frame (both hosts)", "host A", "host B",
                           "encap cost cyc/frame", "overlay/plain cost"])
    for r in rows:
        table.rows.append([
            r.sut, r.direction, str(r.frame_size_b), r.load, _f(r.plain_rate, 1e-6),
            _f(r.overlay_rate, 1e-6), _f(r.rate_ratio), _f(r.plain_cost, digits=4),
            _f(r.overlay_cost, digits=4), _f(r.host_costs.get("A"), digits=4),
            _f(r.host_costs.get("B"), digits=4), _f(r.encap_cost, digits=4),
            _f(r.cost_ratio)])
        table.flags.append(_flag(r))
    panels = []
    for d, size, load in sorted({(r.direction, r.frame_size_b, r.load) for r in rows}):
        pts = []
        for r in rows:
            if (r.direction, r.frame_size_b, r.load) != (d, size, load):
                continue
            for what, sp in (("plain", r.plain_cost), ("overlay", r.overlay_cost),
                             ("encap", r.encap_cost)):
                if sp is not None:
                    pts.append(Point(f"{r.sut} {what}", sp.median, sp.min, sp.max, sp.n,
                                     noisy=sp.n < 2))
        panels.append(Panel(f"{d} {size} B at {load}", "", "cycles per frame",
                            [Series("cost", pts)], kind="errbar"))
    sec.figures.append(Figure(
        key="overlay-cost", title="Cost per frame: plain, overlay (both hosts), encap",
        panels=panels, caption="Median with min–max over repetitions; encap = overlay − "
                               "plain, paired by repetition."))
    table.note = ("Rates are received aggregates. A trial the tester limited (tester-bound) "
                  "gives a lower bound of the rate; its cost per frame still holds at that "
                  "load.")
    sec.tables.append(table)
    return sec
