"""Where a campaign's wall time went, from the runner's own trial
timestamps (``turnout bench timing``): what to trim to keep a campaign
inside its budget without running it again.

Trials of one testbed session (same SUT, scenario, virtual port and
repetition, taken one after the other) share one set-up; a session's wall
time is from the end of the previous session's last trial to the end of its
own last trial, so its set-up and the previous session's teardown count to
it. Sessions are summed per SUT × scenario × virtual port, next to the
measured windows they hold (``duration_s``): the difference is set-up,
process starts, warm-up and cool-down."""

from __future__ import annotations

import sqlite3
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Cell", "TrialTime", "by_group", "cells", "read_db"]


@dataclass(frozen=True)
class TrialTime:
    sut: str
    scenario: str
    virtual_port: str
    repetition: int
    status: str
    started_at: float
    duration_s: float


@dataclass
class Cell:
    """One SUT × scenario × virtual port over every repetition."""

    sut: str
    scenario: str
    virtual_port: str
    wall_s: float = 0.0
    window_s: float = 0.0
    trials: int = 0  # that ran (not skipped)
    sessions: int = 0


def cells(trials: Iterable[TrialTime], started_at: float) -> list[Cell]:
    """The campaign's wall time per cell, largest first (module doc)."""
    rows = sorted(trials, key=lambda t: t.started_at)
    out: dict[tuple[str, str, str], Cell] = {}
    prev_end = started_at
    i = 0
    while i < len(rows):
        k = (rows[i].sut, rows[i].scenario, rows[i].virtual_port, rows[i].repetition)
        j = i
        while j < len(rows) and (rows[j].sut, rows[j].scenario, rows[j].virtual_port,
                                 rows[j].repetition) == k:
            j += 1
        sess = rows[i:j]
        end = max(prev_end, max(t.started_at + t.duration_s for t in sess))
        c = out.setdefault(k[:3], Cell(*k[:3]))
        c.wall_s += end - prev_end
        c.window_s += sum(t.duration_s for t in sess)
        c.trials += sum(1 for t in sess if t.status != "skipped")
        c.sessions += 1
        prev_end = end
        i = j
    return sorted(out.values(), key=lambda c: -c.wall_s)


def read_db(path: str, campaign: str | None) -> tuple[str, float, float | None, list[TrialTime]]:
    """A campaign run's name, start, end and trial times, read-only (the
    latest run of ``campaign``, a name or an id; default the latest run)."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        if campaign is None:
            row = conn.execute("SELECT id, name, started_at, finished_at FROM campaigns "
                               "ORDER BY id DESC LIMIT 1").fetchone()
        else:
            row = conn.execute("SELECT id, name, started_at, finished_at FROM campaigns "
                               "WHERE name = ? OR CAST(id AS TEXT) = ? ORDER BY id DESC LIMIT 1",
                               (campaign, campaign)).fetchone()
        if row is None:
            raise KeyError(f"no campaign {campaign!r} in {path}" if campaign
                           else f"no campaign in {path}")
        cid, name, t0, t1 = row
        trials = [TrialTime(*r) for r in conn.execute(
            "SELECT sut, scenario, virtual_port, repetition, status, started_at, duration_s "
            "FROM trials WHERE campaign_id = ? ORDER BY started_at, id", (cid,))]
    finally:
        conn.close()
    return str(name), float(t0), None if t1 is None else float(t1), trials


def by_group(cs: list[Cell]) -> dict[str, float]:
    """Wall time per scenario|virtual port, largest first."""
    g: dict[str, float] = defaultdict(float)
    for c in cs:
        g[f"{c.scenario}|{c.virtual_port or '-'}"] += c.wall_s
    return dict(sorted(g.items(), key=lambda x: -x[1]))
