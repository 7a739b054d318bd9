"""The "Not measured" section: what was skipped, failed or left
unfinished, with the reason."""

from __future__ import annotations

from collections import defaultdict

from ..results import Result, Trial
from .model import Section, Table
from .points import METHOD_LABEL, CampaignData, retried

__all__ = ["not_measured_section"]


def not_measured_section(data: CampaignData) -> Section:
    """Results and trials that were skipped, failed or left unfinished, with the reason."""
    sec = Section(key="not-measured", title="Not measured",
                  intro="Searches and standalone trials that did not produce a value, with "
                        "the reason the bench recorded. They are left out of every plot.")
    t = Table(key="not-measured-table", title="Skipped, failed or unfinished",
              columns=["kind", "SUT", "scenario", "dir", "size B", "method", "status", "reason"])
    again = retried(data)
    # the same reason for many cells once, with the cells it covers
    grouped: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    rows: list[Result | Trial] = [*data.results,
                                  *[tr for tr in data.trials if tr.result_id is None]]
    for x in rows:
        kind = "result" if isinstance(x, Result) else "trial"
        if x.status == "ok" or (kind, x.id or 0) in again:
            continue
        cell = (f"{x.scenario}{f' [{x.point.virtual_port}]' if x.point.virtual_port else ''} "
                f"{x.point.frame_size_b} B")
        cells = grouped[(x.sut, x.status, x.reason or "–")]
        if cell not in cells:
            cells.append(cell)
    if grouped:
        g = Table(key="not-measured-by-reason", title="Not measured, by SUT and reason",
                  columns=["SUT", "status", "cells", "reason"])
        for (sut, status, reason), cells in sorted(grouped.items()):
            g.rows.append([sut, status, ", ".join(cells), reason])
            g.flags.append("")
        sec.tables.append(g)
    for r in data.results:
        if r.status != "ok":
            t.rows.append(["search", r.sut, r.scenario, r.point.direction,
                           str(r.point.frame_size_b), METHOD_LABEL.get(r.method, r.method),
                           r.status, r.reason or "–"])
            t.flags.append("retried: ok" if ("result", r.id or 0) in again else "")
    for tr in data.trials:
        if tr.status != "ok" and tr.result_id is None:
            t.rows.append(["trial", tr.sut, tr.scenario, tr.point.direction,
                           str(tr.point.frame_size_b), METHOD_LABEL.get(tr.method, tr.method),
                           tr.status, tr.reason or "–"])
            t.flags.append("retried: ok" if ("trial", tr.id or 0) in again else "")
    if t.rows:
        sec.tables.append(t)
    else:
        sec.empty = "Everything in this campaign was measured."
    return sec
