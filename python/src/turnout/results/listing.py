"""``turnout bench list``: the campaign runs a results database holds, and
the hint every "no such campaign" error gives (the names that do exist)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .db import ResultsDB

__all__ = ["CampaignRow", "campaign_rows", "format_campaigns", "known_campaigns"]


@dataclass
class CampaignRow:
    """One campaign run, as ``bench list`` shows it."""

    id: int
    name: str
    status: str
    started_at: float
    finished_at: float | None
    trials: int
    results: int
    file: str


def campaign_rows(db: ResultsDB) -> list[CampaignRow]:
    """Every campaign run with its trial and result counts, oldest first."""
    counts: dict[str, dict[int, int]] = {}
    for table in ("trials", "results"):
        counts[table] = {
            int(cid): int(n)
            for cid, n in db.conn.execute(
                f"SELECT campaign_id, COUNT(*) FROM {table} GROUP BY campaign_id")
        }
    out = []
    for c in db.campaigns():
        assert c.id is not None
        out.append(CampaignRow(id=c.id, name=c.name, status=c.status, started_at=c.started_at,
                               finished_at=c.finished_at, trials=counts["trials"].get(c.id, 0),
                               results=counts["results"].get(c.id, 0), file=c.file))
    return out


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(t)) if t else "-"


def format_campaigns(rows: list[CampaignRow], db_path: str) -> str:
    """The table ``bench list`` prints, with how to use what it lists."""
    if not rows:
        return f"no campaigns in {db_path} (turnout bench run CAMPAIGN.toml --db {db_path})\n"
    headers = ["id", "name", "status", "started", "finished", "trials", "results", "file"]
    cells = [[str(r.id), r.name, r.status, _when(r.started_at), _when(r.finished_at),
              str(r.trials), str(r.results), r.file] for r in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells)) for i, h in enumerate(headers)]
    numeric = {0, 5, 6}

    def line(vals: list[str]) -> str:
        return "  ".join(v.rjust(w) if i in numeric else v.ljust(w)
                         for i, (v, w) in enumerate(zip(vals, widths, strict=True))).rstrip()

    out = [line(headers), *(line(c) for c in cells)]
    out.append(f"{len(rows)} runs in {db_path}. A name means its latest run, an id that run: "
               "turnout report --campaign NAME|ID, turnout compare A B.")
    return "\n".join(out) + "\n"


def known_campaigns(db: ResultsDB) -> str:
    """The campaigns that exist, for an error about one that does not:
    ``campaigns in DB: default (runs 1, 3), smoke (run 2)`` or ``DB holds
    no campaign``."""
    runs: dict[str, list[int]] = {}
    for c in db.campaigns():
        runs.setdefault(c.name, []).append(int(c.id or 0))
    if not runs:
        return f"{db.path} holds no campaign"
    parts = [f"{name} (run{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))})"
             for name, ids in runs.items()]
    return f"campaigns in {db.path}: {', '.join(parts)}"
