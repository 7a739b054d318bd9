"""Rule-update time on real namespaces (measure/update.py): the Linux
bridge, turnoutd (patch and bridge logic) and OVS when installed, with the
real turnout-gen. Needs root; each run takes a few seconds."""

from __future__ import annotations

import pytest

from conftest import needs_root
from turnout import testpeers
from turnout.bench import RealBench
from turnout.build import built
from turnout.campaign import parse, run_campaign
from turnout.results import ResultsDB
from turnout.sut import make_sut

# serial: the rule-update time is a measurement (the update in effect
# within a second, the counters read every < 5 ms), for a machine that runs
# nothing else (docs/testing.md)
pytestmark = pytest.mark.serial

REAL_GEN = built("turnout-gen")


@needs_root
@pytest.mark.system
@pytest.mark.parametrize(("sut", "options"), [
    ("bridge", {}), ("turnoutd", {"logic": "patch", "kernel_port": "af_xdp"}),
    ("turnoutd", {"logic": "bridge", "kernel_port": "af_packet"}),
    # the flows logic: rules and the update through ovs-ofctl, as OVS's
    ("turnoutd", {"logic": "flows", "kernel_port": "af_xdp"}), ("ovs", {})])
def test_rule_update_moves_the_stream_and_is_timed(tmp_path, sut, options):
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut, options).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = {
        "campaign": {"name": f"upd-{sut}", "duration_s": 0.3, "repetitions": 2,
                     "update_rate_pps": 10000, "layout": "auto"},
        "matrix": {"suts": [sut, "wire"], "scenarios": ["rule_update"],
                   "frame_sizes_b": [64]},
        "sut": {sut: options},
    }
    with ResultsDB(tmp_path / "u.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
    wire = [t for t in trials if t.sut == "wire"]
    assert wire and all(t.status == "skipped" and "no rules" in t.reason for t in wire)
    ts = [t for t in trials if t.sut == sut]
    bad = [t.reason for t in ts if t.status != "ok"]
    assert not bad, bad
    assert len(ts) == 2
    for t in ts:
        assert t.method == "rule_update" and t.offered_total_pps == 10000
        x = t.extra
        # traffic reached A before the update and B after it, and the
        # counters saw (about) every frame sent: nothing but our stream
        assert x["received_a"] > 0 and x["received_b"] > 1000, x
        assert x["received_a"] + x["received_b"] <= t.sent + 5, x
        assert t.lost == t.sent - t.received >= 0
        # most of the stream arrived (on a loaded host the SUT or the sender
        # may be descheduled long enough to lose a burst: a trial whose sender
        # fell behind says so), and the switch-over's own loss is the part
        # of the trial's in its window
        assert t.lost < 0.5 * t.sent, (t.lost, t.sent)
        assert bool(t.tester_bound) == (x["sender_behind_max_ns"] >= 10e6)
        window = x["switchover_window_ns"] * 1e-9 * t.offered_total_pps
        assert x["switchover_window_ns"] >= 25e6 and 0 <= x["lost_switchover"] <= window
        # the update reached the data path after it was issued, within a second
        assert t.update_first_ns is not None and 0 <= t.update_first_ns < 1e9, t.update_first_ns
        assert t.update_last_ns is not None and t.update_last_ns < 1e9
        assert x["sample_gap_ns"] < 5e6  # the counters were read often enough
        assert x["update_command"]
        if sut == "ovs" or options.get("logic") == "flows":
            assert "ovs-ofctl" in x["update_command"] and "mod-flows" in x["update_command"]


@needs_root
@pytest.mark.system
@pytest.mark.parametrize(("sut", "options"), [
    ("turnoutd", {"logic": "flows", "kernel_port": "af_xdp"}), ("ovs", {})])
def test_flow_mods_per_second_under_traffic(tmp_path, sut, options):
    """update_bulk_flows: 2,000 flows installed at once through each rule
    interface (turnoutd: ovs-ofctl and JSON-RPC; OVS: ovs-ofctl) while the
    stream flows, then removed: the next rule-update trial still moves the
    stream (the bulk flows did not get in its way, nor stayed behind)."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut, options).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = {
        "campaign": {"name": f"bulk-{sut}", "duration_s": 0.3, "repetitions": 2,
                     "update_rate_pps": 10000, "update_bulk_flows": [2000],
                     "layout": "auto"},
        "matrix": {"suts": [sut], "scenarios": ["rule_update"], "frame_sizes_b": [64]},
        "sut": {sut: options},
    }
    with ResultsDB(tmp_path / "b.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
    bad = [t.reason for t in trials if t.status != "ok"]
    assert not bad, bad
    assert len([t for t in trials if t.method == "rule_update"]) == 2
    fm = [t for t in trials if t.method == "flow_mods"]
    ifaces = {"turnoutd": {"ovs-ofctl", "json-rpc"}, "ovs": {"ovs-ofctl"}}[sut]
    assert len(fm) == 2 * len(ifaces) and {t.extra["bulk_interface"] for t in fm} == ifaces
    for t in fm:
        x = t.extra
        assert x["bulk_flows"] == 2000 and x["bulk_command_ns"] > 0
        assert x["flow_mods_per_s"] == pytest.approx(2000 / (x["bulk_command_ns"] / 1e9))
        # the stream ran over the install and stopped soon after it
        assert t.sent > 0 and t.lost == max(0, t.sent - t.received)
        assert t.received > 0.5 * t.sent, (t.received, t.sent)
        assert t.duration_s < x["bulk_command_ns"] / 1e9 + 10
        # turnoutd's own drop counters were read around the trial (OVS: none)
        assert isinstance(x["sut_drops"], dict) if sut == "turnoutd" else "sut_drops" not in x


@needs_root
@pytest.mark.system
def test_offered_load_sweep_on_the_bridge(tmp_path):
    """Method sweep: trials at fractions of the bridge's own R+, stored with
    their fraction, and the report's received-vs-offered figure drawn."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    spec = {
        "campaign": {"name": "sweep-sys", "duration_s": 0.3, "warmup_s": 0.2,
                     "methods": ["sweep"], "sweep_fractions": [0.3, 1.2], "layout": "auto"},
        "matrix": {"suts": ["bridge"], "scenarios": ["p2p"], "frame_sizes_b": [64]},
    }
    from turnout.report import build_report

    with ResultsDB(tmp_path / "s.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        (rp,) = db.results(c.id, method="rplus", status="ok")
        sw = sorted(db.trials(c.id, method="sweep"), key=lambda t: t.load_fraction or 0)
        assert [t.status for t in sw] == ["ok", "ok"], [t.reason for t in sw]
        assert [t.load_fraction for t in sw] == [0.3, 1.2]
        for t in sw:
            assert t.offered_total_pps == pytest.approx(t.load_fraction * rp.rate_total_pps)
            assert 0 < t.received <= t.sent
        out = build_report(db, c.id, tmp_path / "rep")
    (fig,) = out.section("sweep").figures
    assert (tmp_path / "rep" / fig.svg).exists()
