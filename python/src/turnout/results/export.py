"""Export trials and results to CSV or JSON (for pandas and friends)."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import asdict
from typing import Any

from .db import CampaignRef, ResultsDB

__all__ = ["FORMATS", "export"]

FORMATS = ("csv", "json")


def _flat(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: json.dumps(v, sort_keys=True) if isinstance(v, dict | list) else v for k, v in d.items()
    }


def export(
    db: ResultsDB, fmt: str, campaign: CampaignRef | None = None, table: str = "trials"
) -> str:
    """Render ``table`` (trials | results) as CSV (one row per trial, JSON
    columns as JSON text) or as a JSON document with campaigns, hosts, suts,
    results and trials."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r} (expected one of {', '.join(FORMATS)})")
    if table not in ("trials", "results"):
        raise ValueError(f"unknown table {table!r} (expected trials or results)")
    if fmt == "json":
        campaigns = db.campaigns() if campaign is None else [db.campaign(campaign)]
        doc = {
            "schema": "turnout-results/1",
            "campaigns": [asdict(c) for c in campaigns if c is not None],
            "hosts": [asdict(h) for h in db.hosts()],
            "suts": [asdict(s) for s in db.suts()],
            "results": [r.flat() for r in db.results(campaign)],
            "trials": [t.flat() for t in db.trials(campaign)],
        }
        return json.dumps(doc, indent=1, sort_keys=True)
    rows = [
        _flat(x.flat())
        for x in (db.trials(campaign) if table == "trials" else db.results(campaign))
    ]
    out = io.StringIO()
    if rows:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return out.getvalue()
