"""The "Throughput vs frame size" section, and the throughput series and
table the loopback and scale sections share."""

from __future__ import annotations

from collections import defaultdict

from ..testpoint import TestPoint
from .formatting import fmt_pct, fmt_spread
from .model import Figure, Panel, Point, Section, Series, Table, slug
from .points import (
    METHOD_LABEL,
    METHOD_STYLE,
    SCALE_SECTIONS,
    CampaignData,
    PointKey,
    ThroughputPoint,
    base_values,
    by_scenario,
    in_section,
    is_base,
)
from .units import GBPS_DEFINITION, is_ethernet_path

__all__ = ["series_by_sut", "throughput_section", "throughput_table"]


def _tp_point(p: ThroughputPoint, x: float, unit: str) -> Point:
    s = p.mpps if unit == "mpps" else p.gbps
    return Point(x=x, y=s.median, lo=s.min, hi=s.max, n=s.n, noisy=p.noisy or p.unknown)


def series_by_sut(points: list[ThroughputPoint], xattr: str, unit: str) -> list[Series]:
    by: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        by[(p.key.sut_label(), p.key.method)].append(p)
    out = []
    for (label, method), pts in sorted(by.items()):
        pts.sort(key=lambda p: getattr(p.key.point, xattr))
        out.append(Series(
            label=f"{label} {METHOD_LABEL.get(method, method)}",
            points=[_tp_point(p, float(getattr(p.key.point, xattr)), unit) for p in pts],
            style=METHOD_STYLE.get(method, "-"),
        ))
    return out


def throughput_table(key: str, title: str, points: list[ThroughputPoint]) -> Table:
    t = Table(
        key=key, title=title,
        columns=["scenario", "dir", "size B", "point", "SUT", "method", "n",
                 "Mpps median [min–max]", "spread", "Gbps", "× reference [min–max]"],
        note="Rates are the aggregate over all streams of the point. A flagged row's "
             "difference to the next SUT below it (or its ratio to the reference) is within "
             "the measured spread (max − min) of the repetitions, or cannot be judged (one "
             "repetition: spread unknown, not ranked). A ratio is only taken to the "
             "reference on the same path and port type. Gbps: layer 1 on veth paths, "
             "layer 2 (L2) through shared memory.",
    )
    for p in sorted(points, key=lambda p: (p.key.group(), -p.spread.median)):
        k = p.key
        flag = []
        if p.noisy:
            flag.append("within noise of the next SUT")
        if p.ratio_noisy:
            flag.append("ratio within noise")
        elif p.ratio is not None and p.ratio_noisy is None:
            flag.append("ratio spread unknown")
        if p.spread.n < 2:
            flag.append("n=1: spread unknown, not ranked")
        elif p.unknown:
            flag.append("next SUT has n=1: not ranked")
        if p.tester_bound:
            flag.append(f"tester-bound in {p.tester_bound}/{p.spread.n} "
                        "(the tester's limit: a lower bound of the SUT's)")
        t.rows.append([
            k.scenario, k.point.direction, str(k.point.frame_size_b), k.extras(), k.sut_label(),
            METHOD_LABEL.get(k.method, k.method), str(p.spread.n), fmt_spread(p.mpps),
            fmt_pct(p.spread.rel) if p.spread.n >= 2 else "unknown",
            fmt_spread(p.gbps) + ("" if is_ethernet_path(k.point.virtual_port) else " L2"),
            fmt_spread(p.ratio),
        ])
        t.flags.append("; ".join(flag))
    return t


def throughput_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Throughput in Mpps and Gbps vs frame size, one figure per scenario and direction."""
    sec = Section(
        key="throughput", title="Throughput vs frame size",
        intro="Median over repetitions of each search result (R+ solid, PDR dashed, NDR "
              "dotted), with min–max bars, at each scenario's base point (fewest flows, "
              "VNFs, ports and pairs; most common burst). " + GBPS_DEFINITION +
              " Hollow markers: the difference to the next SUT below is within noise.",
    )
    if not points:
        sec.empty = "No throughput results (R+, NDR or PDR) in this campaign."
        return sec
    base = base_values(p.key for p in points)
    by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        if is_base(p.key, base):
            by_sd[(p.key.scenario, p.key.point.direction)].append(p)
    scale = {p.key.scenario for sec_key in SCALE_SECTIONS for p in in_section(points, sec_key)}
    for (scen, d), pts in sorted(by_sd.items(), key=by_scenario):
        if scen in scale and len({p.key.point.frame_size_b for p in pts}) < 2:
            continue  # one frame size: its own scale section shows it
        b = base[(scen, d)]
        extra = PointKey(TestPoint(scen, d, 0, b["flows"], b["burst"], b["vnfs"], b["ports"],
                                   b["pairs"]), "", "").extras()
        title = f"{scen} {d}" + (f" ({extra})" if extra else "")
        sec.figures.append(Figure(
            key=slug("throughput", scen, d), title=f"Throughput vs frame size: {title}",
            panels=[
                Panel("packet rate", "frame size (B, without FCS)", "Mpps",
                      series_by_sut(pts, "frame_size_b", "mpps")),
                Panel("line rate", "frame size (B, without FCS)",
                      "Gbps (L1 on veth, L2 through shared memory)",
                      series_by_sut(pts, "frame_size_b", "gbps")),
            ],
        ))
    sec.tables.append(throughput_table("throughput-table", "Throughput at every test point",
                                       points))
    return sec
