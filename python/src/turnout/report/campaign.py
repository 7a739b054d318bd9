"""The "Campaign" section: name, file, times, status and spec."""

from __future__ import annotations

from .formatting import fmt_time
from .model import Section, Table
from .points import CampaignData

__all__ = ["campaign_section", "wall_time"]


def wall_time(data: CampaignData) -> str:
    """The campaign run's wall time from its start to its end ("14 min 6 s";
    "unfinished" while it runs or when it was interrupted before the end)."""
    c = data.campaign
    if not c.finished_at or not c.started_at:
        return "unfinished"
    s = max(0.0, c.finished_at - c.started_at)
    return f"{int(s // 60)} min {s % 60:.0f} s" if s >= 60 else f"{s:.1f} s"


def campaign_section(data: CampaignData) -> Section:
    """The campaign: name, file, times, status, and its spec."""
    import json

    c = data.campaign
    t = Table(key="campaign-table", title="Campaign", columns=["field", "value"], mono=[1])
    for k, v in (("name", c.name), ("id", str(c.id)), ("file", c.file or "–"),
                 ("started", fmt_time(c.started_at)), ("finished", fmt_time(c.finished_at)),
                 ("wall time", wall_time(data)), ("status", c.status),
                 ("results", f"{len(data.ok_results)} ok of {len(data.results)}"),
                 ("trials", f"{len(data.ok_trials)} ok of {len(data.trials)}"),
                 ("spec", json.dumps(c.spec, indent=2, sort_keys=True, default=str))):
        t.rows.append([k, v])
        t.flags.append("")
    return Section(key="campaign", title="Campaign", intro="", tables=[t])
