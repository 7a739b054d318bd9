"""The test point as columns (schema v5, turnout.testpoint): every field of
a TestPoint is a column of trials and results, and a database written by
the release before (schema v4: an openflow point's rule set only in its
scenario name) reads and reports the same after the migration.

golden/flows-v4.db.gz is ``fill`` below run by the workbench at commit
e5d33d2 (schema v4), VACUUMed and gzipped; golden/report-flows-v4.txt is
``report_text`` of it by that commit."""

from __future__ import annotations

import sqlite3
from dataclasses import fields
from pathlib import Path

import pytest

from golden_db import GOLDEN, assert_kept, golden_copy, stored
from synth_db import default_like, done_campaign
from turnout.report.openflow import openflow_text
from turnout.report.points import load_campaign
from turnout.report.summary import summary_text
from turnout.results import Result, ResultsDB, Trial
from turnout.results.schema import MIGRATIONS, SCHEMA_VERSION, migrate, user_version
from turnout.testpoint import OPENFLOW_FIELDS, POINT_FIELDS, TestPoint


def fill(db: ResultsDB) -> None:
    """The campaigns of the fixture: synth_db.default_like, and "flows": R+
    results of openflow rule sets on every path, with and without ACL rules,
    CPU samples on some (values invented, nothing here is a measurement)."""
    default_like(db)
    cid = done_campaign(db, "flows", finished_at=1.7e9 + 300.0)
    rows = [  # (sut, stored scenario, flows, repetition, R+ pps, cost, virtual port, cpu)
        ("turnoutd", "openflow/r100/m1/o1", 1, 0, 2e6, 100.0, "", (0.002, 0.006)),
        ("turnoutd", "openflow/r100/m1/o1", 1, 1, 2.2e6, 120.0, "", (0.002, 0.006)),
        ("ovs", "openflow/r100/m1/o1", 1, 0, 1e6, 400.0, "", (0.004, 0.004)),
        ("ovs", "openflow/r100/m1/o1", 1, 1, 1.1e6, 440.0, "", None),
        ("turnoutd", "openflow/r10000/m8/o4", 1000, 0, 1e6, 300.0, "", None),
        ("turnoutd", "openflow/v2v/r100/m1/o2", 1, 0, 5e6, 50.0, "vhost-user", (0.001, 0.0)),
        ("ovs-dpdk", "openflow/v2v/r100/m1/o2", 1, 0, 4e6, 200.0, "vhost-user", None),
        ("turnoutd", "openflow/v2v/r100/m1/o2", 1, 0, 6e6, 40.0, "memif", None),
        ("turnoutd", "openflow/r100/m1/o1/acl1000-above", 1, 0, 1e6, 300.0, "", (0.003, 0.006)),
        ("ovs", "openflow/r100/m1/o1/acl1000-below", 1, 0, 5e5, 600.0, "", (0.012, 0.004)),
        ("bridge", "p2p", 1, 0, 1e6, 50.0, "", None),
    ]
    for i, (sut, scen, flows, rep, pps, cost, vp, cpu) in enumerate(rows):
        rid = db.add_result(Result.of(
            campaign_id=cid, key=f"f{i}", sut=sut, scenario=scen, flows=flows, repetition=rep,
            method="rplus", status="ok", rate_total_pps=pps, rx_total_pps=pps,
            busy_cycles_per_frame=cost, tester_bound=0, virtual_port=vp))
        if cpu is not None:  # 1000 frames received, a 1 GHz clock: 1 ms -> 1000 cyc/frame
            db.add_trial(Trial.of(
                campaign_id=cid, key=f"f{i}", sut=sut, scenario=scen, flows=flows,
                repetition=rep, method="rplus", status="ok", result_id=rid, received=1000,
                rx_total_pps=pps, extra={"cycles_hz": 1e9}, virtual_port=vp,
                cpu=[{"role": "sut", "user_s": cpu[0], "sys_s": cpu[1]},
                     {"role": "tester", "user_s": 9.0, "sys_s": 9.0}]))


def report_text(db: ResultsDB) -> str:
    """The summary and OpenFlow text of each campaign (as turnout report prints)."""
    text = ""
    for name in ("default", "flows"):
        data = load_campaign(db, name)
        text += summary_text(data) + openflow_text(data)
    return text


def test_every_test_point_field_is_a_field_and_a_column(tmp_path: Path) -> None:
    for cls in (Trial, Result):
        # the point is held, not repeated: no field of its own is a point field
        names = [f.name for f in fields(cls)]
        assert not set(POINT_FIELDS) & set(names), cls.__name__
        # its flat row (database columns, export) has them in the point's place
        i = names.index("point")
        assert list(cls().flat()) == [*names[:i], *POINT_FIELDS, *names[i + 1:]]
    with ResultsDB(tmp_path / "r.db") as db:
        for table in ("trials", "results"):
            cols = {r[1] for r in db.conn.execute(f"PRAGMA table_info({table})")}
            assert set(POINT_FIELDS) <= cols, table


def test_a_v4_database_reads_and_reports_the_same(tmp_path: Path) -> None:
    path = golden_copy("flows-v4", tmp_path)
    before = stored(path, 4)
    with ResultsDB(path) as db:
        assert user_version(db.conn) == SCHEMA_VERSION
        assert_kept(before, db.conn)
        # the rule sets are in their columns, and name the stored scenario again
        of = [r for r in db.results() if r.scenario.startswith("openflow/")]
        assert of, "the v4 database has openflow results"
        for r in of:
            assert r.point.rules > 0 and r.point.outputs > 0
            assert r.point.stored_scenario() == r.scenario
        assert all(r.point.rules == 0 and r.point.acl_at == "" for r in db.results()
                   if not r.scenario.startswith("openflow"))
        text = report_text(db)
    assert text == (GOLDEN / "report-flows-v4.txt").read_text()
    # and a database this release writes of the same campaigns, the same
    with ResultsDB(tmp_path / "v5.db") as db:
        fill(db)
        assert report_text(db) == text


def test_a_failed_step_leaves_the_version_before(tmp_path: Path) -> None:
    """The v5 step runs in one transaction: a failure leaves v4 whole."""
    path = golden_copy("flows-v4", tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE results ADD COLUMN acl INTEGER")  # v5's trials first, then this
    conn.commit()
    with pytest.raises(sqlite3.OperationalError, match="duplicate column"):
        migrate(conn)
    assert user_version(conn) == 4
    cols = {r[1] for r in conn.execute("PRAGMA table_info(trials)")}
    assert not set(OPENFLOW_FIELDS) & cols
    conn.close()
    assert len(MIGRATIONS) == SCHEMA_VERSION >= 5


def test_a_test_point_comes_back_from_a_stored_row() -> None:
    p = TestPoint("openflow", frame_size_b=1518, rules=100, masks=8, outputs=2, acl=1000,
                  acl_at="above", virtual_port="vhost-user")
    r = Result.of(scenario=p.stored_scenario(), frame_size_b=1518, virtual_port="vhost-user")
    # a row written with only the stored name gets the rule set from it
    q = r.point
    assert (q.rules, q.masks, q.outputs, q.acl, q.acl_at) == (100, 8, 2, 1000, "above")
    assert r.point == p
    assert Trial.of(scenario="p2p").point == TestPoint()


def test_a_stored_name_that_would_not_come_back_is_kept_verbatim() -> None:
    """A row reads back and reports as it was stored, also when its name is
    not what TestPoint.stored_scenario writes (an openflow p2p name on a row
    with a virtual port, a scenario this release does not know)."""
    r = Result.of(scenario="openflow/r100/m1/o1", virtual_port="memif")
    assert r.scenario == "openflow/r100/m1/o1" == r.flat()["scenario"]
    assert (r.point.rules, r.point.masks, r.point.outputs) == (100, 1, 1)
    assert Trial.of(scenario="zz-old", flows=7).scenario == "zz-old"
    with pytest.raises(TypeError, match="not a test point field: bogus"):
        TestPoint.from_stored("p2p", bogus=1)
