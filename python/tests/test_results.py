"""Results database: schema, migration, round trips, queries, export."""

from __future__ import annotations

import csv
import io
import json
import sqlite3

import pytest

from turnout.cli import main
from turnout.results import (
    SCHEMA_VERSION,
    Campaign,
    Host,
    Result,
    ResultsDB,
    Sut,
    Trial,
    export,
    migrate,
    user_version,
)


def _fill(db: ResultsDB) -> tuple[int, int]:
    hid = db.add_host(Host(hostname="h", cpu_model="cpu", cores=2, kernel="6.18",
                           tools={"python": "3.11"}))
    cid = db.add_campaign(Campaign(name="c1", spec={"a": 1}, host_id=hid))
    sid = db.add_sut(Sut(name="bridge", version="6.18", config={"stp": False}))
    r = Result.of(campaign_id=cid, sut_id=sid, host_id=hid, key="k-ndr", sut="bridge",
               method="ndr", frame_size_b=64, started_at=1.0)
    db.add_result(r)
    for i, load in enumerate((1e5, 2e5)):
        db.add_trial(Trial.of(campaign_id=cid, sut_id=sid, host_id=hid, result_id=r.id,
                           key=f"k-ndr/{i}", sut="bridge", method="ndr", offered_total_pps=load,
                           sent=1000, received=990 + i, lost=10 - i, loss_ratio=(10 - i) / 1000,
                           latency_cdf=[[100.0, 0.5], [200.0, 1.0]],
                           cpu=[{"tid": 1, "name": "x", "util": 0.5}], started_at=2.0))
    r.status, r.rate_total_pps, r.trials_count = "ok", 1e5, 2
    db.update_result(r)
    db.add_trial(Trial.of(campaign_id=cid, key="k-fixed", sut="bridge", method="fixed",
                       offered_total_pps=5e4, status="ok"))
    return cid, hid


def test_fresh_database_has_current_schema(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        assert user_version(db.conn) == SCHEMA_VERSION
        rows = db.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        tables = {r[0] for r in rows}
        assert {"hosts", "campaigns", "suts", "trials", "results"} <= tables


def test_migrate_is_idempotent_and_refuses_newer(tmp_path):
    conn = sqlite3.connect(tmp_path / "m.db")
    assert migrate(conn) == 0
    assert migrate(conn) == SCHEMA_VERSION
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    with pytest.raises(ValueError, match="newer"):
        migrate(conn)


def test_failed_migration_rolls_back(tmp_path, monkeypatch):
    from turnout.results import schema

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, "CREATE TABLE x (a);  BOGUS;"])
    monkeypatch.setattr(schema, "SCHEMA_VERSION", len(schema.MIGRATIONS))
    conn = sqlite3.connect(tmp_path / "f.db")
    with pytest.raises(sqlite3.OperationalError):
        schema.migrate(conn)
    assert user_version(conn) == len(schema.MIGRATIONS) - 1
    assert conn.execute("SELECT name FROM sqlite_master WHERE name='x'").fetchone() is None


def test_round_trip_and_queries(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        cid, hid = _fill(db)
        # same host and same SUT deduplicate
        assert db.add_host(Host(hostname="h", cpu_model="cpu", cores=2, kernel="6.18",
                                tools={"python": "3.11"})) == hid
        assert len(db.hosts()) == 1 and db.hosts()[0].tools == {"python": "3.11"}
        assert [c.name for c in db.campaigns()] == ["c1"]
        assert db.campaign("c1").id == cid and db.campaign(cid).spec == {"a": 1}
        trials = db.trials(campaign="c1")
        assert len(trials) == 3
        assert trials[0].latency_cdf == [[100.0, 0.5], [200.0, 1.0]]
        assert trials[0].cpu[0]["util"] == 0.5
        assert len(db.trials(cid, method="ndr")) == 2
        assert len(db.trials(cid, method=["ndr", "fixed"])) == 3
        (res,) = db.results(cid)
        assert res.status == "ok" and res.rate_total_pps == 1e5
        assert [t.offered_total_pps for t in db.trials(result_id=res.id)] == [1e5, 2e5]
        assert db.done_keys(cid) == {"k-ndr", "k-fixed"}
        assert db.suts(cid)[0].config == {"stp": False}
        with pytest.raises(KeyError):
            db.trials(campaign="nope")


def test_latest_campaign_of_a_name_wins(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        a = db.add_campaign(Campaign(name="same"))
        b = db.add_campaign(Campaign(name="same"))
        assert db.campaign("same").id == b != a
        assert len(db.campaigns("same")) == 2


def test_interrupted_search_is_marked(tmp_path):
    with ResultsDB(tmp_path / "r.db") as db:
        cid = db.add_campaign(Campaign(name="c"))
        db.add_result(Result.of(campaign_id=cid, key="k", status="running"))
        assert db.mark_interrupted(cid) == 1
        assert db.results(cid)[0].status == "interrupted"
        assert db.done_keys(cid) == set()


def test_export_csv_and_json(tmp_path, capsys):
    path = tmp_path / "r.db"
    with ResultsDB(path) as db:
        _fill(db)
        rows = list(csv.DictReader(io.StringIO(export(db, "csv"))))
        assert len(rows) == 3 and rows[0]["sut"] == "bridge"
        assert json.loads(rows[0]["latency_cdf"]) == [[100.0, 0.5], [200.0, 1.0]]
        doc = json.loads(export(db, "json", "c1"))
        assert doc["schema"] == "turnout-results/1"
        assert len(doc["trials"]) == 3 and len(doc["results"]) == 1
        with pytest.raises(ValueError, match="unknown export format"):
            export(db, "xml")
    assert main(["export", "--db", str(path), "--format", "csv", "--table", "results"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("campaign_id,")
    assert len(out.splitlines()) == 2
    assert main(["export", "--db", str(tmp_path / "missing.db")]) == 2
    assert main(["export", "--db", str(path), "--campaign", "nope"]) == 2
