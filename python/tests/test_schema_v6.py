"""The overlay's per-host costs as columns (schema v6): each host's own
cycles per frame of an overlay trial (turnout/overlay.py) is a column of
trials, and a database written by the release before (schema v5: the
figures only in the trial's extra JSON, ``overlay_hosts``) reads and
reports the same after the migration.

golden/overlay-v5.db.gz is ``fill`` below run by the workbench at commit
f3cdf0e (schema v5), VACUUMed and gzipped; golden/report-overlay-v5.txt is
``report_text`` of it by that commit."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from golden_db import GOLDEN, assert_kept, golden_copy, stored
from synth_db import done_campaign
from turnout.report.points import load_campaign
from turnout.report.summary import summary_text
from turnout.results import Result, ResultsDB, Trial
from turnout.results.models import OVERLAY_HOST_COLUMNS, overlay_host_columns
from turnout.results.schema import MIGRATIONS, SCHEMA_VERSION, migrate, user_version

#: invented cycles per frame: plain p2p, and what the overlay adds (nothing
#: here is a measurement)
PLAIN = {"turnoutd": 400.0, "ovs": 3000.0, "bridge": 2000.0}
ENCAP = {"turnoutd": 700.0, "ovs": 2500.0, "bridge": 1500.0}
DRIFT = (0.9, 1.0, 1.2)


def fill(db: ResultsDB) -> None:
    """Campaign "overlay": R+ results and their trials of p2p and overlay
    for three SUTs and three repetitions; turnoutd's and OVS's overlay
    trials have each host's own figure (OVS's host B has none in one
    repetition, with the reason), the bridge's have none (the kernel's
    softirq time is per CPU); a fixed-rate trial of turnoutd on both
    paths."""
    cid = done_campaign(db, "overlay", finished_at=1.7e9 + 600.0)
    i = 0
    for rep, drift in enumerate(DRIFT):
        for sut in PLAIN:
            for scen in ("p2p", "overlay"):
                over = scen == "overlay"
                cost = (PLAIN[sut] + (ENCAP[sut] if over else 0.0)) * drift
                pps = (5e5 if over else 1e6) * drift
                extra: dict[str, object] = {"cycles_hz": 1e9}
                if over:
                    extra["overlay_cost"] = "both hosts summed, per frame carried"
                if over and sut != "bridge":
                    b: dict[str, object] = {"host": "B", "cycles_per_frame": 0.6 * cost,
                                            "frames": 6000}
                    if sut == "ovs" and rep == 2:
                        b = {"host": "B", "why": "host B: no sample after the window"}
                    extra["overlay_hosts"] = [
                        {"host": "A", "cycles_per_frame": 0.4 * cost, "frames": 5000}, b]
                # what the runner stores (runner._trial); the release before
                # had no such columns (its figures only in the extra JSON)
                hosts = overlay_host_columns(extra.get("overlay_hosts"))
                i += 1
                rid = db.add_result(Result.of(
                    campaign_id=cid, key=f"r{i}", sut=sut, scenario=scen, repetition=rep,
                    method="rplus", status="ok", rate_total_pps=pps, rx_total_pps=pps,
                    busy_cycles_per_frame=cost, tester_bound=0))
                db.add_trial(Trial.of(
                    campaign_id=cid, key=f"r{i}", sut=sut, scenario=scen, repetition=rep,
                    method="rplus", status="ok", result_id=rid, received=int(pps),
                    sent=int(pps), rx_total_pps=pps, busy_cycles_per_frame=cost,
                    tester_bound=0, extra=dict(extra), **hosts))
                if sut == "turnoutd":
                    db.add_trial(Trial.of(
                        campaign_id=cid, key=f"f{i}", sut=sut, scenario=scen,
                        repetition=rep, method="fixed", status="ok",
                        offered_total_pps=1e5, received=100000, sent=100000,
                        rx_total_pps=1e5, busy_cycles_per_frame=cost * 1.5, tester_bound=0,
                        extra=dict(extra), **hosts))


def report_text(db: ResultsDB) -> str:
    """The summary text of the campaign (as turnout report prints it: its
    overlay table among the rest)."""
    return summary_text(load_campaign(db, "overlay"))


def test_the_overlay_host_costs_are_columns_and_fields(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "r.db") as db:
        cols = {r[1] for r in db.conn.execute("PRAGMA table_info(trials)")}
        assert set(OVERLAY_HOST_COLUMNS.values()) <= cols
        assert set(OVERLAY_HOST_COLUMNS.values()) <= set(Trial().flat())


def test_a_v5_database_reads_and_reports_the_same(tmp_path: Path) -> None:
    path = golden_copy("overlay-v5", tmp_path)
    before = stored(path, 5)
    with ResultsDB(path) as db:
        assert user_version(db.conn) == SCHEMA_VERSION
        assert_kept(before, db.conn)
        # each host's figure is in its column; none where the host had none
        over = [t for t in db.trials() if t.scenario == "overlay"]
        assert over, "the v5 database has overlay trials"
        for t in over:
            hosts = {h["host"]: h.get("cycles_per_frame") for h in t.extra.get("overlay_hosts", [])}
            assert t.overlay_host_costs() == {h: v for h, v in hosts.items() if v is not None}
        assert any(t.overlay_a_cycles_per_frame and t.overlay_b_cycles_per_frame is None
                   for t in over), "a host without a figure"
        assert all(t.overlay_host_costs() == {} for t in db.trials() if t.sut == "bridge"
                   or t.scenario != "overlay")
        text = report_text(db)
    assert text == (GOLDEN / "report-overlay-v5.txt").read_text()
    # and a database this release writes of the same campaign, the same
    with ResultsDB(tmp_path / "v6.db") as db:
        fill(db)
        assert report_text(db) == text


def test_the_runner_stores_each_hosts_figure(tmp_path: Path) -> None:
    """What the overlay's measurer reports per host (extra.overlay_hosts)
    lands in the columns of the trial the runner stores."""
    from turnout.campaign.runner import _trial
    from turnout.campaign.spec import WorkItem
    from turnout.measure.counts import TrialCounts
    from turnout.testpoint import TestPoint

    c = TrialCounts(offered_total_pps=0.0, duration_s=1.0, sent=10, received=10, lost=0)
    c.extra["overlay_hosts"] = [{"host": "A", "cycles_per_frame": 120.0, "frames": 10},
                                {"host": "B", "why": "no sample"}]
    item = WorkItem("turnoutd", TestPoint("overlay"), "rplus", 0)
    ctx = {"campaign_id": 1, "sut_id": 1, "host_id": 1, "virtual_port": ""}
    t = _trial(item, c, ctx, "rplus")
    assert (t.overlay_a_cycles_per_frame, t.overlay_b_cycles_per_frame) == (120.0, None)
    assert t.overlay_host_costs() == {"A": 120.0}


def test_a_failed_step_leaves_the_version_before(tmp_path: Path) -> None:
    """The v6 step runs in one transaction: a failure leaves v5 whole."""
    path = golden_copy("overlay-v5", tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("ALTER TABLE trials ADD COLUMN overlay_b_cycles_per_frame REAL")
    conn.commit()
    with pytest.raises(sqlite3.OperationalError, match="duplicate column"):
        migrate(conn)
    assert user_version(conn) == 5
    cols = {r[1] for r in conn.execute("PRAGMA table_info(trials)")}
    assert "overlay_a_cycles_per_frame" not in cols
    conn.close()
    assert len(MIGRATIONS) == SCHEMA_VERSION == 6
