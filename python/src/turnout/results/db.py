"""The results database: one SQLite file, schema migrated on open.

Typical use::

    with ResultsDB("results.db") as db:
        for c in db.campaigns():
            trials = db.trials(campaign=c.id, status="ok")

A ``campaign`` filter takes a database id (int), a name (str; the latest
campaign run of that name) or a :class:`Campaign`.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

from ..testpoint import POINT_FIELDS
from .models import Campaign, Host, Result, Sut, Trial
from .schema import migrate

__all__ = ["CampaignRef", "ResultsDB"]

CampaignRef = int | str | Campaign

T = TypeVar("T", Trial, Result)

# dataclass field -> column holding its JSON text
_JSON_FIELDS = {"latency_cdf": "latency_cdf_json", "cpu": "cpu_json", "extra": "extra_json"}


def _to_row(obj: Trial | Result) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for name, value in obj.flat().items():  # the test point's fields one column each
        if name == "id":
            continue
        if name in _JSON_FIELDS:
            row[_JSON_FIELDS[name]] = json.dumps(value, sort_keys=True)
        else:
            row[name] = value
    return row


def _from_row(cls: type[T], row: sqlite3.Row) -> T:
    kwargs: dict[str, Any] = {}
    keys = row.keys()
    for name in (*POINT_FIELDS, *(f.name for f in fields(cls) if f.name != "point")):
        col = _JSON_FIELDS.get(name, name)
        if col in keys:
            value = row[col]
            kwargs[name] = json.loads(value) if name in _JSON_FIELDS else value
    return cls.of(**kwargs)


class ResultsDB:
    """Access to a results database file (created and migrated on open)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.parent and not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self.conn = sqlite3.connect(str(self.path))
        self.conn.row_factory = sqlite3.Row
        self.conn.execute("PRAGMA foreign_keys = ON")
        self.conn.execute("PRAGMA journal_mode = WAL")
        migrate(self.conn)

    def close(self) -> None:
        """Close the connection (everything written is already committed)."""
        self.conn.close()

    def __enter__(self) -> ResultsDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---------------------------------------------------------------- hosts
    def add_host(self, host: Host) -> int:
        """Store a host fingerprint (deduplicated by content); return its id."""
        h = host.fingerprint_hash()
        row = self.conn.execute("SELECT id FROM hosts WHERE fingerprint_hash = ?", (h,)).fetchone()
        if row:
            host.id = int(row[0])
            return host.id
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO hosts (fingerprint_hash, hostname, cpu_model, cores, kernel, governor,"
                " turbo, smt, thp, git_commit, tools_json, pinning_json, extra_json, created_at)"
                " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                (
                    h, host.hostname, host.cpu_model, host.cores, host.kernel, host.governor,
                    host.turbo, host.smt, host.thp, host.git_commit,
                    json.dumps(host.tools, sort_keys=True),
                    json.dumps(host.pinning, sort_keys=True),
                    json.dumps(host.extra, sort_keys=True, default=str), time.time(),
                ),
            )
        host.id = int(cur.lastrowid or 0)
        return host.id

    @staticmethod
    def _host(row: sqlite3.Row) -> Host:
        return Host(
            hostname=row["hostname"], cpu_model=row["cpu_model"], cores=row["cores"],
            kernel=row["kernel"], governor=row["governor"], turbo=row["turbo"], smt=row["smt"],
            thp=row["thp"], git_commit=row["git_commit"], tools=json.loads(row["tools_json"]),
            pinning=json.loads(row["pinning_json"]), extra=json.loads(row["extra_json"]),
            id=row["id"],
        )

    def hosts(self) -> list[Host]:
        """Every stored host fingerprint, oldest first."""
        return [self._host(r) for r in self.conn.execute("SELECT * FROM hosts ORDER BY id")]

    def host(self, host_id: int) -> Host | None:
        """The host fingerprint with this id."""
        row = self.conn.execute("SELECT * FROM hosts WHERE id = ?", (host_id,)).fetchone()
        return self._host(row) if row else None

    # ------------------------------------------------------------ campaigns
    def add_campaign(self, campaign: Campaign) -> int:
        """Start a campaign run; return its id."""
        if not campaign.started_at:
            campaign.started_at = time.time()
        with self.conn:
            cur = self.conn.execute(
                "INSERT INTO campaigns (name, file, spec_json, host_id, started_at, finished_at,"
                " status, resume_key) VALUES (?,?,?,?,?,?,?,?)",
                (
                    campaign.name, campaign.file, json.dumps(campaign.spec, sort_keys=True),
                    campaign.host_id, campaign.started_at, campaign.finished_at, campaign.status,
                    campaign.resume_key,
                ),
            )
        campaign.id = int(cur.lastrowid or 0)
        return campaign.id

    def set_campaign_status(self, campaign_id: int, status: str) -> None:
        """Mark a campaign run done / interrupted / failed / running."""
        finished = None if status == "running" else time.time()
        with self.conn:
            self.conn.execute(
                "UPDATE campaigns SET status = ?, finished_at = ? WHERE id = ?",
                (status, finished, campaign_id),
            )

    @staticmethod
    def _campaign(row: sqlite3.Row) -> Campaign:
        return Campaign(
            name=row["name"], spec=json.loads(row["spec_json"]), file=row["file"],
            host_id=row["host_id"], started_at=row["started_at"],
            finished_at=row["finished_at"], status=row["status"],
            resume_key=row["resume_key"], id=row["id"],
        )

    def campaigns(self, name: str | None = None) -> list[Campaign]:
        """Every campaign run (optionally only those of one name), oldest first."""
        if name is None:
            rows = self.conn.execute("SELECT * FROM campaigns ORDER BY id")
        else:
            rows = self.conn.execute("SELECT * FROM campaigns WHERE name = ? ORDER BY id", (name,))
        return [self._campaign(r) for r in rows]

    def campaign(self, ref: CampaignRef) -> Campaign | None:
        """Resolve an id, a name (latest run of that name) or a Campaign."""
        if isinstance(ref, Campaign):
            ref = ref.id if ref.id is not None else ref.name
        if isinstance(ref, int):
            row = self.conn.execute("SELECT * FROM campaigns WHERE id = ?", (ref,)).fetchone()
        else:
            row = self.conn.execute(
                "SELECT * FROM campaigns WHERE name = ? ORDER BY id DESC LIMIT 1", (ref,)
            ).fetchone()
            if row is None and ref.isdigit():
                row = self.conn.execute(
                    "SELECT * FROM campaigns WHERE id = ?", (int(ref),)
                ).fetchone()
        return self._campaign(row) if row else None

    def _campaign_id(self, ref: CampaignRef) -> int:
        c = self.campaign(ref)
        if c is None or c.id is None:
            raise KeyError(f"no campaign {ref!r} in {self.path}")
        return c.id

    # ----------------------------------------------------------------- suts
    def add_sut(self, sut: Sut) -> int:
        """Store a SUT configuration (deduplicated); return its id."""
        cfg = json.dumps(sut.config, sort_keys=True, default=str)
        row = self.conn.execute(
            "SELECT id FROM suts WHERE name = ? AND version = ? AND config_json = ?",
            (sut.name, sut.version, cfg),
        ).fetchone()
        if row is None:
            with self.conn:
                cur = self.conn.execute(
                    "INSERT INTO suts (name, version, config_json) VALUES (?,?,?)",
                    (sut.name, sut.version, cfg),
                )
            sut.id = int(cur.lastrowid or 0)
        else:
            sut.id = int(row[0])
        return sut.id

    def suts(self, campaign: CampaignRef | None = None) -> list[Sut]:
        """Every SUT configuration (those with trials in one campaign when given)."""
        if campaign is None:
            rows = self.conn.execute("SELECT * FROM suts ORDER BY id")
        else:
            cid = self._campaign_id(campaign)
            rows = self.conn.execute(
                "SELECT * FROM suts WHERE id IN (SELECT sut_id FROM trials WHERE campaign_id = ?"
                " UNION SELECT sut_id FROM results WHERE campaign_id = ?) ORDER BY id",
                (cid, cid),
            )
        return [
            Sut(name=r["name"], version=r["version"], config=json.loads(r["config_json"]),
                id=r["id"])
            for r in rows
        ]

    # ---------------------------------------------------------- trials/results
    def _insert(self, table: str, obj: Trial | Result) -> int:
        row = _to_row(obj)
        cols = ", ".join(row)
        marks = ", ".join("?" for _ in row)
        with self.conn:
            cur = self.conn.execute(
                f"INSERT INTO {table} ({cols}) VALUES ({marks})", tuple(row.values())
            )
        obj.id = int(cur.lastrowid or 0)
        return obj.id

    def add_trial(self, trial: Trial) -> int:
        """Store one trial; return its id."""
        return self._insert("trials", trial)

    def add_result(self, result: Result) -> int:
        """Store a search result (usually with status 'running' at its start)."""
        return self._insert("results", result)

    def update_result(self, result: Result) -> None:
        """Rewrite a stored result (after its search finished)."""
        if result.id is None:
            raise ValueError("result has no id; add_result it first")
        row = _to_row(result)
        sets = ", ".join(f"{c} = ?" for c in row)
        with self.conn:
            self.conn.execute(
                f"UPDATE results SET {sets} WHERE id = ?", (*row.values(), result.id)
            )

    def _select(
        self, table: str, cls: type[T], campaign: CampaignRef | None, filters: dict[str, Any]
    ) -> list[T]:
        where: list[str] = []
        args: list[Any] = []
        if campaign is not None:
            where.append("campaign_id = ?")
            args.append(self._campaign_id(campaign))
        for col, value in filters.items():
            if value is None:
                continue
            if isinstance(value, list | tuple | set):
                where.append(f"{col} IN ({', '.join('?' for _ in value)})")
                args.extend(value)
            else:
                where.append(f"{col} = ?")
                args.append(value)
        sql = f"SELECT * FROM {table}"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY id"
        return [_from_row(cls, r) for r in self.conn.execute(sql, args)]

    def trials(
        self,
        campaign: CampaignRef | None = None,
        *,
        sut: str | None = None,
        scenario: str | None = None,
        method: str | None = None,
        status: str | list[str] | None = None,
        result_id: int | None = None,
        key: str | None = None,
    ) -> list[Trial]:
        """Trials matching every given filter, in the order they were taken."""
        return self._select(
            "trials", Trial, campaign,
            {"sut": sut, "scenario": scenario, "method": method, "status": status,
             "result_id": result_id, "key": key},
        )

    def results(
        self,
        campaign: CampaignRef | None = None,
        *,
        sut: str | None = None,
        scenario: str | None = None,
        method: str | None = None,
        status: str | list[str] | None = None,
        key: str | None = None,
    ) -> list[Result]:
        """Search results matching every given filter, oldest first."""
        return self._select(
            "results", Result, campaign,
            {"sut": sut, "scenario": scenario, "method": method, "status": status, "key": key},
        )

    def done_keys(self, campaign: CampaignRef) -> set[str]:
        """Keys of work a resumed campaign must not repeat: finished results
        and standalone trials with status ok or skipped."""
        cid = self._campaign_id(campaign)
        rows = self.conn.execute(
            "SELECT key FROM results WHERE campaign_id = ? AND status IN ('ok', 'skipped')"
            " UNION SELECT key FROM trials WHERE campaign_id = ? AND result_id IS NULL"
            " AND status IN ('ok', 'skipped')",
            (cid, cid),
        )
        return {r[0] for r in rows}

    def mark_interrupted(self, campaign: CampaignRef) -> int:
        """Mark searches left 'running' by a crashed run as 'interrupted'; their
        trials stay. Return how many were marked."""
        cid = self._campaign_id(campaign)
        with self.conn:
            cur = self.conn.execute(
                "UPDATE results SET status = 'interrupted' WHERE campaign_id = ?"
                " AND status = 'running'",
                (cid,),
            )
        return cur.rowcount
