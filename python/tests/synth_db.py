"""Synthetic results databases for the report, verdict and A/B tests: a
finished campaign and its R+ results, with values the tests invent (nothing
here is a measurement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnout.results import Campaign, Result, ResultsDB

#: An R+ result: (sut, scenario, virtual_port, repetition, rate_total_pps,
#: busy_cycles_per_frame, tester_bound); rx_total_pps = rate_total_pps.
RplusRow = tuple[str, str, str, int, float, float | None, int | None]


def done_campaign(db: ResultsDB, name: str, spec: dict[str, Any] | None = None,
                  file: str | None = None, finished_at: float | None = None) -> int:
    """Add campaign ``name`` (file ``name``.toml unless given), started at
    1.7e9 and done; return its id."""
    return db.add_campaign(Campaign(name=name, spec=spec or {}, file=file or f"{name}.toml",
                                    started_at=1.7e9, finished_at=finished_at,
                                    status="done"))


def rplus_db(path: Path, name: str, rows: list[RplusRow], *, spec: dict[str, Any] | None = None,
             file: str | None = None, finished_at: float | None = None,
             pairs: int = 1) -> ResultsDB:
    """A new database at ``path`` with one done campaign ``name`` (see
    done_campaign) holding ``rows`` as R+ results of status ok, keys r0, r1,
    ... (``pairs`` stream pairs each). The caller closes it (``with``)."""
    db = ResultsDB(path)
    cid = done_campaign(db, name, spec, file, finished_at)
    for i, (sut, scen, vp, rep, rate, cost, tb) in enumerate(rows):
        db.add_result(Result(campaign_id=cid, key=f"r{i}", sut=sut, scenario=scen,
                             virtual_port=vp, method="rplus", repetition=rep, pairs=pairs,
                             rate_total_pps=rate, rx_total_pps=rate, status="ok",
                             tester_bound=tb, busy_cycles_per_frame=cost))
    return db
