"""SQLite schema of the results database, versioned with PRAGMA user_version.

Each entry of ``MIGRATIONS`` moves the database from version ``i`` to
``i + 1``; a database is migrated forward on open, in one transaction per
step. Never edit a released migration: append a new one. The columns of a
test point are TestPoint's fields (turnout.testpoint); v5 added the ones
the first four versions lacked; v6 the overlay's per-host costs.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from dataclasses import fields

from ..testpoint import OPENFLOW_FIELDS, TestPoint, openflow_fields
from .models import OVERLAY_HOST_COLUMNS, overlay_host_columns

__all__ = ["MIGRATIONS", "SCHEMA_VERSION", "migrate", "user_version"]

_POINT_COLUMNS = """
    sut TEXT NOT NULL,
    scenario TEXT NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('uni', 'bi')),
    frame_size_b INTEGER NOT NULL,
    flows INTEGER NOT NULL DEFAULT 1,
    burst INTEGER NOT NULL DEFAULT 32,
    vnfs INTEGER NOT NULL DEFAULT 0,
    ports INTEGER NOT NULL DEFAULT 2,
    pairs INTEGER NOT NULL DEFAULT 1,
    virtual_port TEXT NOT NULL DEFAULT '',
    method TEXT NOT NULL,
    repetition INTEGER NOT NULL DEFAULT 0,
"""

_V1 = f"""
CREATE TABLE hosts (
    id INTEGER PRIMARY KEY,
    fingerprint_hash TEXT NOT NULL UNIQUE,
    hostname TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    cores INTEGER NOT NULL,
    kernel TEXT NOT NULL,
    governor TEXT NOT NULL,
    turbo TEXT NOT NULL,
    smt TEXT NOT NULL,
    thp TEXT NOT NULL,
    git_commit TEXT NOT NULL,
    tools_json TEXT NOT NULL,
    pinning_json TEXT NOT NULL,
    extra_json TEXT NOT NULL,
    created_at REAL NOT NULL
);
CREATE TABLE campaigns (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    file TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    host_id INTEGER REFERENCES hosts(id),
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL
);
CREATE INDEX campaigns_name ON campaigns(name);
CREATE TABLE suts (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    version TEXT NOT NULL,
    config_json TEXT NOT NULL,
    UNIQUE (name, version, config_json)
);
CREATE TABLE results (
    id INTEGER PRIMARY KEY,
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    sut_id INTEGER REFERENCES suts(id),
    host_id INTEGER REFERENCES hosts(id),
    key TEXT NOT NULL,
    {_POINT_COLUMNS}
    loss_target REAL NOT NULL DEFAULT 0,
    rate_pps REAL NOT NULL DEFAULT 0,
    rx_pps REAL NOT NULL DEFAULT 0,
    gbps REAL NOT NULL DEFAULT 0,
    trials_count INTEGER NOT NULL DEFAULT 0,
    searcher TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL,
    duration_s REAL NOT NULL DEFAULT 0,
    extra_json TEXT NOT NULL DEFAULT '{{}}'
);
CREATE INDEX results_campaign ON results(campaign_id, key);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY,
    campaign_id INTEGER NOT NULL REFERENCES campaigns(id),
    sut_id INTEGER REFERENCES suts(id),
    host_id INTEGER REFERENCES hosts(id),
    result_id INTEGER REFERENCES results(id),
    key TEXT NOT NULL,
    {_POINT_COLUMNS}
    load_fraction REAL,
    offered_pps REAL NOT NULL,
    sent INTEGER NOT NULL DEFAULT 0,
    received INTEGER NOT NULL DEFAULT 0,
    lost INTEGER NOT NULL DEFAULT 0,
    loss_ratio REAL NOT NULL DEFAULT 0,
    rx_pps REAL NOT NULL DEFAULT 0,
    gbps REAL NOT NULL DEFAULT 0,
    latency_min_ns REAL,
    latency_mean_ns REAL,
    latency_p50_ns REAL,
    latency_p90_ns REAL,
    latency_p99_ns REAL,
    latency_p999_ns REAL,
    latency_max_ns REAL,
    latency_cdf_json TEXT NOT NULL DEFAULT '[]',
    jitter_ns REAL,
    cpu_json TEXT NOT NULL DEFAULT '[]',
    cycles_per_packet REAL,
    status TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    started_at REAL NOT NULL,
    duration_s REAL NOT NULL DEFAULT 0,
    extra_json TEXT NOT NULL DEFAULT '{{}}'
);
CREATE INDEX trials_campaign ON trials(campaign_id, key);
CREATE INDEX trials_result ON trials(result_id);
"""

# v2 ("every number means what it says"): every rate is the
# aggregate over all streams and says so in its name; what the tester could
# not send, what chain VNFs dropped, duplicates and reordering are stored
# apart from the switch's loss; whether the tester limited a trial; and
# which software and host a campaign run may be resumed on.
_V2 = """
ALTER TABLE trials RENAME COLUMN offered_pps TO offered_total_pps;
ALTER TABLE trials RENAME COLUMN rx_pps TO rx_total_pps;
ALTER TABLE trials ADD COLUMN tx_total_pps REAL NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN streams INTEGER NOT NULL DEFAULT 1;
ALTER TABLE trials ADD COLUMN unsent INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN duplicated INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN reordered INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN vnf_dropped INTEGER NOT NULL DEFAULT 0;
ALTER TABLE trials ADD COLUMN tester_bound INTEGER;
ALTER TABLE results RENAME COLUMN rate_pps TO rate_total_pps;
ALTER TABLE results RENAME COLUMN rx_pps TO rx_total_pps;
ALTER TABLE results ADD COLUMN tester_bound INTEGER;
ALTER TABLE campaigns ADD COLUMN resume_key TEXT NOT NULL DEFAULT '';
"""

# v3 ("a verdict that holds"): the SUT's busy cycles per frame
# from its own accounting (measure/cost.py), for trials and R+ results.
_V3 = """
ALTER TABLE trials ADD COLUMN busy_cycles_per_frame REAL;
ALTER TABLE results ADD COLUMN busy_cycles_per_frame REAL;
"""

# v4 (rule-update time, "Hard or hopeless" §3.5): a rule-update trial's times
# from the update to the first frame at the new destination and to the last
# at the old one (measure/update.py).
_V4 = """
ALTER TABLE trials ADD COLUMN update_first_ns REAL;
ALTER TABLE trials ADD COLUMN update_last_ns REAL;
"""


def _column(name: str) -> str:
    """The column of a TestPoint field: its type and default from the dataclass."""
    f = next(f for f in fields(TestPoint) if f.name == name)
    if f.type in (int, "int"):
        return f"{name} INTEGER NOT NULL DEFAULT {f.default}"
    return f"{name} TEXT NOT NULL DEFAULT '{f.default}'"


def _v5(conn: sqlite3.Connection) -> None:
    """v5 (the test point as columns): an openflow point's rule
    set (rules, masks, outputs, acl, acl_at: TestPoint's fields) in columns
    of its own, filled in from the scenario name rows stored it in
    (``openflow/r100/m8/o2/acl1000-above``, TestPoint.stored_scenario)."""
    for table in ("trials", "results"):
        for name in OPENFLOW_FIELDS:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {_column(name)}")
        rows = conn.execute(f"SELECT id, scenario FROM {table} WHERE scenario LIKE 'openflow/%'")
        for rid, scenario in rows.fetchall():
            of = openflow_fields(scenario)
            if of is None:
                continue
            conn.execute(
                f"UPDATE {table} SET {', '.join(f'{n} = ?' for n in OPENFLOW_FIELDS)}"
                " WHERE id = ?", (*(of[n] for n in OPENFLOW_FIELDS), rid))


def _v6(conn: sqlite3.Connection) -> None:
    """v6 (the overlay's fields as columns): each host's own cycles
    per frame of an overlay trial (turnout/overlay.py) in a column of trials,
    filled in from the per-host account older rows stored only in their
    extra JSON (``overlay_hosts``; the JSON stays as it was)."""
    cols = tuple(OVERLAY_HOST_COLUMNS.values())
    for col in cols:
        conn.execute(f"ALTER TABLE trials ADD COLUMN {col} REAL")
    rows = conn.execute("SELECT id, extra_json FROM trials WHERE extra_json LIKE '%overlay_hosts%'")
    for rid, text in rows.fetchall():
        values = overlay_host_columns(json.loads(text).get("overlay_hosts"))
        conn.execute(f"UPDATE trials SET {', '.join(f'{c} = ?' for c in cols)} WHERE id = ?",
                     (*(values[c] for c in cols), rid))


#: MIGRATIONS[i] takes a database at user_version i to i + 1: an SQL script,
#: or a function (run in the step's transaction).
MIGRATIONS: list[str | Callable[[sqlite3.Connection], None]] = [_V1, _V2, _V3, _V4, _v5,
                                                                  _v6]
SCHEMA_VERSION = len(MIGRATIONS)


def user_version(conn: sqlite3.Connection) -> int:
    """The schema version stored in the database file."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def migrate(conn: sqlite3.Connection) -> int:
    """Bring the database up to SCHEMA_VERSION; return the version it had.

    Raises ValueError for a database newer than this code knows.
    """
    start = user_version(conn)
    if start > SCHEMA_VERSION:
        raise ValueError(
            f"results database has schema version {start}, newer than this turnout "
            f"({SCHEMA_VERSION}); upgrade turnout"
        )
    for version in range(start, SCHEMA_VERSION):
        step = MIGRATIONS[version]
        try:  # one transaction per step: a failed step leaves the previous version
            if isinstance(step, str):
                conn.executescript(
                    "BEGIN;\n" + step + f"\nPRAGMA user_version = {version + 1};\nCOMMIT;\n")
            else:
                conn.execute("BEGIN")
                step(conn)
                conn.execute(f"PRAGMA user_version = {version + 1}")
                conn.commit()
        except BaseException:
            if conn.in_transaction:
                conn.rollback()
            raise
    return start
