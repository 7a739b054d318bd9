"""The NvsN and port density sections: throughput against sender/receiver
pairs and against ports attached."""

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

__all__ = ["scale_sections"]


def scale_sections(data: CampaignData, points: list[ThroughputPoint]) -> list[Section]:
    """NvsN (throughput vs sender/receiver pairs) and port density (vs ports attached)."""
    out = []
    for key, title, intro, attr, xlabel in (
        ("nvsn", "NvsN scale", "N sender/receiver pairs through one SUT (Virtualized "
         "networking framework): "
         "aggregate received throughput against N.", "pairs", "sender/receiver pairs"),
        ("density", "Port density", "Ports attached to the SUT with one pair active "
         "(mSwitch §4.3): throughput between the active pair against the number of ports "
         "attached.", "ports", "ports attached"),
    ):
        sec = Section(key=key, title=title, intro=intro + " Median with min–max bars.")
        pts = in_section(points, key)  # the scenarios the scenario table shows here
        if not pts:
            sec.empty = f"No {title.lower()} results in this campaign."
            out.append(sec)
            continue
        base = base_values(p.key for p in pts)
        by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
        for p in pts:
            if is_base(p.key, base, attr):
                by_sd[(p.key.scenario, p.key.point.direction)].append(p)
        for (scen, d), sp in sorted(by_sd.items(), key=by_scenario):
            sizes = sorted({p.key.point.frame_size_b for p in sp})
            xs = [getattr(p.key.point, attr) for p in sp]
            xlog = min(xs) > 0 and max(xs) / min(xs) >= 20
            sec.figures.append(Figure(
                key=slug(key, scen, d), title=f"{title}: {scen} {d}",
                panels=[Panel(f"{size} B", xlabel, "Mpps",
                              series_by_sut([p for p in sp if p.key.point.frame_size_b == size],
                                            attr, "mpps"), xlog=xlog)
                        for size in sizes],
            ))
        out.append(sec)
    return out
