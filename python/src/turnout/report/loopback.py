"""The "Loopback throughput vs chain length" section."""

from __future__ import annotations

from collections import defaultdict

from .model import Figure, Panel, Section, slug
from .points import (
    CampaignData,
    ThroughputPoint,
    base_values,
    by_scenario,
    in_section,
    is_base,
)
from .throughput import series_by_sut

__all__ = ["loopback_section"]


def loopback_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Loopback throughput vs the number of chained VNFs, a panel per frame size."""
    sec = Section(
        key="loopback", title="Loopback throughput vs chain length",
        intro="tester → SUT → VNF₁ → SUT → … → VNF_N → SUT → tester (Software switches for NFV "
              "Fig. 7): "
              "median throughput with min–max bars against the number of chained VNFs, "
              "one panel per frame size.",
    )
    loop = in_section(points, "loopback")  # the scenario table's section
    if not loop:
        sec.empty = "No loopback (chained VNF) results in this campaign."
        return sec
    base = base_values(p.key for p in loop)
    by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in loop:
        if is_base(p.key, base, "vnfs"):
            by_sd[(p.key.scenario, p.key.point.direction)].append(p)
    for (scen, d), pts in sorted(by_sd.items(), key=by_scenario):
        sizes = sorted({p.key.point.frame_size_b for p in pts})
        sec.figures.append(Figure(
            key=slug("loopback", scen, d), title=f"Loopback throughput vs chain length: {scen} {d}",
            panels=[Panel(f"{size} B", "VNFs in the chain", "Mpps",
                          series_by_sut([p for p in pts if p.key.point.frame_size_b == size],
                                        "vnfs", "mpps"))
                    for size in sizes],
        ))
    return sec
