"""``turnout bench timing``: a campaign's wall time per SUT × scenario ×
virtual port from its trial timestamps (campaign/timing.py), read-only."""

from __future__ import annotations

import sqlite3

import pytest

from turnout.campaign.timing import TrialTime, by_group, cells, read_db


def T(sut, sc, vp, rep, start, dur=0.4, status="ok"):
    return TrialTime(sut, sc, vp, rep, status, start, dur)


def test_sessions_take_setup_and_previous_teardown():
    trials = [
        # rep 0: wire p2p set up from t=0 to 2, two trials; then turnoutd p2p
        T("wire", "p2p", "", 0, 2.0), T("wire", "p2p", "", 0, 3.0),
        T("turnoutd", "p2p", "", 0, 6.0), T("turnoutd", "p2p", "", 0, 7.0),
        # a skipped session: instant
        T("bridge", "v2v", "vhost-user", 0, 7.5, 0.0, "skipped"),
        # rep 1
        T("wire", "p2p", "", 1, 9.0), T("turnoutd", "p2p", "", 1, 12.0),
    ]
    cs = {(c.sut, c.scenario, c.virtual_port): c for c in cells(trials, started_at=0.0)}
    w, t, b = cs["wire", "p2p", ""], cs["turnoutd", "p2p", ""], cs["bridge", "v2v", "vhost-user"]
    # 0→3.4, then from the skip's end 7.5→9.4
    assert w.wall_s == pytest.approx(3.4 + (9.4 - 7.5))
    assert t.wall_s == pytest.approx((7.4 - 3.4) + (12.4 - 9.4))
    # a skip costs only the gap before it
    assert b.wall_s == pytest.approx(0.1) and b.trials == 0 and b.sessions == 1
    assert (w.trials, w.sessions, t.sessions) == (3, 2, 2)
    assert w.window_s == pytest.approx(1.2)
    # every second of the run is someone's, once
    assert sum(c.wall_s for c in cs.values()) == pytest.approx(12.4)
    assert list(by_group(list(cs.values()))) == ["p2p|-", "v2v|vhost-user"]


def test_read_db_is_read_only_and_picks_the_run(tmp_path):
    p = tmp_path / "r.db"
    conn = sqlite3.connect(p)
    conn.execute("CREATE TABLE campaigns (id INTEGER PRIMARY KEY, name TEXT, started_at REAL, "
                 "finished_at REAL)")
    conn.execute("CREATE TABLE trials (id INTEGER PRIMARY KEY, campaign_id INT, sut TEXT, "
                 "scenario TEXT, virtual_port TEXT, repetition INT, status TEXT, "
                 "started_at REAL, duration_s REAL)")
    conn.execute("INSERT INTO campaigns VALUES (1, 'default', 0, 10), (2, 'smoke', 20, NULL)")
    conn.execute("INSERT INTO trials VALUES (1, 1, 'wire', 'p2p', '', 0, 'ok', 1, 0.4), "
                 "(2, 2, 'wire', 'p2p', '', 0, 'ok', 21, 0.4)")
    conn.commit()
    conn.close()
    p.chmod(0o444)
    name, t0, t1, trials = read_db(str(p), "default")
    assert (name, t0, t1, len(trials)) == ("default", 0.0, 10.0, 1)
    assert read_db(str(p), None)[0] == "smoke" and read_db(str(p), "2")[2] is None
    with pytest.raises(KeyError, match="no campaign 'x'"):
        read_db(str(p), "x")
