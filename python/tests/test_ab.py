"""Two builds of one SUT in one campaign: ``[sut.NAME] base``/``binary``
variants, their interleaving, and the after/before table (report/ab.py)."""

from __future__ import annotations

import os
import stat

import pytest

from conftest import needs_root
from synth_db import done_campaign, rplus_db
from test_campaign import FakeBench
from turnout.build import built
from turnout.campaign import CampaignError, parse, run_campaign
from turnout.report.ab import (
    ab_load_rows,
    ab_load_table,
    ab_rows,
    ab_table,
    compare_builds,
    default_pair,
)
from turnout.report.model import Spread
from turnout.report.queries import load_campaign, wall_time
from turnout.results import ResultsDB, Trial
from turnout.sut.base import SutPort, Topology
from turnout.sut.turnoutd import REPO, Turnoutd


def _ab(**before: object) -> dict:
    return {
        "campaign": {"name": "ab", "duration_s": 0.2, "repetitions": 3, "methods": ["rplus"]},
        "matrix": {"suts": ["turnoutd", "turnoutd-before"], "scenarios": ["p2p", "v2v"],
                   "frame_sizes_b": [64]},
        "sut": {"turnoutd": {"logic": "patch", "kernel_port": "af_xdp"},
                "turnoutd-before": {"base": "turnoutd", **before}},
    }


def test_a_variant_takes_its_bases_options_and_its_own_binary():
    spec = parse(_ab(binary="target/bench-ab/turnoutd-before"))
    assert spec.variants == {"turnoutd-before": "turnoutd"}
    # the base's table of this campaign, the variant's keys over it, no ``base``
    assert spec.sut_options["turnoutd-before"] == {
        "logic": "patch", "kernel_port": "af_xdp", "binary": "target/bench-ab/turnoutd-before"}
    before, after = spec.make_sut("turnoutd-before"), spec.make_sut("turnoutd")
    assert isinstance(before, Turnoutd) and before.name == "turnoutd-before"
    assert after.name == "turnoutd" and Turnoutd.name == "turnoutd"  # the class is untouched
    assert before.binary == REPO / "target/bench-ab/turnoutd-before"  # type: ignore[attr-defined]
    assert after.binary == built("turnoutd")  # type: ignore[attr-defined]
    topo = Topology(ns="n", ports=[SutPort(name="a", kind="veth", iface="x"),
                                   SutPort(name="b", kind="veth", iface="y")],
                    xconnects=[("a", "b")])
    assert 'kind = "af_xdp"' in before.render_config(topo, "/s")  # type: ignore[attr-defined]


def test_a_variant_of_a_variant_class_keeps_its_behaviour():
    spec = parse({"campaign": {"name": "p"},
                  "matrix": {"suts": ["turnoutd-poll", "poll-old"]},
                  "sut": {"poll-old": {"base": "turnoutd-poll", "binary": "/x/turnoutd"}}})
    old = spec.make_sut("poll-old")
    assert old.options["wakeup"] == "poll" and old.name == "poll-old"


@pytest.mark.parametrize("sut,message", [
    ({"turnoutd-x": {"binary": "a"}}, r"\[sut.turnoutd-x\]: unknown SUT"),
    ({"turnoutd-x": {"base": "nope"}}, r"sut.turnoutd-x.base: 'nope' is not a registered"),
    ({"turnoutd-x": {"base": 3}}, r"sut.turnoutd-x.base: 3 is not a registered"),
    ({"turnoutd": {"base": "turnoutd"}}, r"turnoutd is a registered SUT; a variant needs"),
    ({"bridge-x": {"base": "bridge", "binary": "/usr/sbin/x"}},
     r"sut.bridge-x.binary: bridge runs the installed software"),
    ({"testpmd": {"binary": "/x"}}, r"sut.testpmd.binary: testpmd runs the installed"),
    ({"turnoutd-x": {"base": "turnoutd", "binary": ""}}, r"sut.turnoutd-x.binary: a path"),
    ({"turnoutd-x": {"base": "turnoutd", "scenarios": []}}, r"sut.turnoutd-x.scenarios"),
    ({"turnoutd-x": 1}, r"\[sut.turnoutd-x\]: a table of options"),
])
def test_bad_variants_are_named(sut, message):
    doc = {"campaign": {"name": "b"}, "matrix": {"suts": ["turnoutd"]}, "sut": sut}
    with pytest.raises(CampaignError, match=message):
        parse(doc)


def test_matrix_names_only_registered_suts_or_variants_once():
    with pytest.raises(CampaignError, match="unknown SUT 'turnoutd-before'"):
        parse({"campaign": {"name": "m"}, "matrix": {"suts": ["turnoutd", "turnoutd-before"]}})
    with pytest.raises(CampaignError, match="named twice"):
        parse({"campaign": {"name": "m"}, "matrix": {"suts": ["turnoutd", "turnoutd"]}})


def test_a_missing_binary_is_a_reason_not_a_crash(tmp_path):
    sut = parse(_ab(binary=str(tmp_path / "gone"))).make_sut("turnoutd-before")
    why = sut.available()
    assert why is not None and str(tmp_path / "gone") in why and "binary" in why


def test_the_variant_reports_its_builds_version_and_path(tmp_path):
    exe = tmp_path / "turnoutd"
    exe.write_text("#!/bin/sh\necho 'turnoutd 0.1.0 (api 1, git 0123456789ab)'\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    sut = parse(_ab(binary=str(exe))).make_sut("turnoutd-before")
    assert sut.available() is None
    v = sut.version()
    assert "git 0123456789ab" in v and str(exe) in v
    assert sut.config()["binary"] == str(exe)


def test_the_two_builds_interleave_repetition_by_repetition(tmp_path):
    spec = parse(_ab(binary=os.devnull))
    order = [(i.repetition, i.point.scenario, i.sut) for i in spec.work()]
    # A, B at every testbed of every repetition: the same minute for both
    assert order[:4] == [(0, "p2p", "turnoutd"), (0, "p2p", "turnoutd-before"),
                         (0, "v2v", "turnoutd"), (0, "v2v", "turnoutd-before")]
    assert len(order) == 3 * 2 * 2
    with ResultsDB(tmp_path / "ab.db") as db:
        c = run_campaign(spec, db, FakeBench())
        assert c.status == "done"
        assert {r.sut for r in db.results(c.id)} == {"turnoutd", "turnoutd-before"}


def _db(tmp_path, rows, finished: float | None = 1.7e9 + 754):
    """R+ results of campaign ab: (sut, scenario, vport, rep, rate, cost, tester_bound)."""
    return rplus_db(tmp_path / "v.db", "ab", rows, finished_at=finished)


def test_after_before_is_paired_by_repetition_and_claims_only_outside_the_spread(tmp_path):
    rows = []
    for r, k in enumerate((0.9, 1.0, 1.1)):  # the machine's minute moves both builds
        # v2v memif: after is 10 % cheaper in every pair, the rates overlap
        rows += [("turnoutd", "v2v", "memif", r, 2.0e6 * k, 90.0 * k, 0),
                 ("turnoutd-before", "v2v", "memif", r, 2.0e6 * k, 100.0 * k, 0),
                 # p2p: both at the tester's ceiling, the costs overlap
                 ("turnoutd", "p2p", "", r, 1.0e6, 300.0 + r, 1),
                 ("turnoutd-before", "p2p", "", r, 1.0e6, 301.0 + r, 1),
                 # another SUT is not part of the comparison
                 ("testpmd", "v2v", "memif", r, 9e6, 10.0, 0)]
    with _db(tmp_path, rows) as db:
        data = load_campaign(db)
        got = {r.cell: r for r in ab_rows(data, "turnoutd", "turnoutd-before")}
        t = ab_table(data, "turnoutd", "turnoutd-before")
    assert set(got) == {"p2p/uni 64 B", "v2v/uni 64 B memif"}
    v2v = got["v2v/uni 64 B memif"]
    # paired: exactly 0.9 in each repetition, although the ranges overlap
    assert v2v.cost_ratio == Spread(pytest.approx(0.9), pytest.approx(0.9),  # type: ignore[arg-type]
                                    pytest.approx(0.9), 3)
    assert v2v.cost_verdict == "same within spread"  # 81..99 vs 90..110 overlap
    assert v2v.rate_verdict == "same within spread" and v2v.rate_ratio is not None
    assert v2v.rate_ratio.median == pytest.approx(1.0)
    p2p = got["p2p/uni 64 B"]
    assert p2p.rate_verdict == "tester-bound" and p2p.tester_bound == "after 3/3, before 3/3"
    assert p2p.cost_verdict == "same within spread"
    assert [r[0] for r in t.rows] == ["p2p/uni 64 B", "v2v/uni 64 B memif"]  # scenario order


def test_build_comparison_rule():
    a, b = Spread(90, 88, 92, 3), Spread(100, 97, 103, 3)
    assert compare_builds(a, b, "cheaper", "costlier", higher_is_better=False) == "cheaper"
    assert compare_builds(b, a, "cheaper", "costlier", higher_is_better=False) == "costlier"
    assert compare_builds(a, b, "faster", "slower", higher_is_better=True) == "slower"
    assert compare_builds(Spread(90, 90, 90, 1), b, "x", "y", True) == "spread unknown"
    # apart, but two repetitions are apart by chance one time in three
    assert compare_builds(Spread(90, 89, 91, 2), b, "x", "y", True) == \
        "apart at n<3, not claimed"
    assert compare_builds(Spread(98, 96, 99, 3), b, "x", "y", True) == "same within spread"
    assert compare_builds(None, b, "x", "y", True) == "not measured on both"


def test_nothing_in_common_says_so_and_the_wall_time_is_stated(tmp_path):
    with _db(tmp_path, [("turnoutd", "p2p", "", 0, 1e6, 300.0, 0)]) as db:
        data = load_campaign(db)
        t = ab_table(data, "turnoutd", "turnoutd-before")
        assert not t.rows and "No R+ point was measured on both" in t.note
        assert wall_time(data) == "12 min 34 s"
    (tmp_path / "u").mkdir()
    with _db(tmp_path / "u", [], finished=None) as db:
        assert wall_time(load_campaign(db)) == "unfinished"


def test_a_scenario_may_run_fewer_frame_sizes():
    spec = parse({"campaign": {"name": "s"},
                  "matrix": {"suts": ["wire"], "scenarios": ["p2p", "loopback", "v2v"],
                             "frame_sizes_b": [64, 1518], "vhost_user_scenarios": ["v2v"],
                             "scenario_frame_sizes_b": {"loopback": [64], "v2v": [1518]}}})
    got = sorted({(p.scenario, p.virtual_port, p.frame_size_b) for p in spec.points})
    assert got == [("loopback", "", 64), ("p2p", "", 64), ("p2p", "", 1518),
                   ("v2v", "", 1518), ("v2v", "vhost-user", 1518)]
    for bad, msg in (({"nvsn": [64]}, "nvsn: not in matrix.scenarios"),
                     ({"p2p": [128]}, "128 is not in matrix.frame_sizes_b"),
                     ({"p2p": []}, "must not be empty"), ([64], "a table")):
        with pytest.raises(CampaignError, match=msg):
            parse({"campaign": {"name": "s"},
                   "matrix": {"scenarios": ["p2p"], "frame_sizes_b": [64, 1518],
                              "scenario_frame_sizes_b": bad}})


def test_a_sut_may_run_only_a_scenarios_vhost_user_cell():
    from turnout.scenarios import Point, excluded

    spec = parse({"campaign": {"name": "o"},
                  "matrix": {"suts": ["ovs-dpdk"], "scenarios": ["p2p", "v2v"],
                             "vhost_user_scenarios": ["v2v"]},
                  "sut": {"ovs-dpdk": {"scenarios": ["v2v/vhost-user"],
                                       "scenarios_reason": "slow path"}}})
    sut = spec.make_sut("ovs-dpdk")
    ran = {(p.scenario, p.virtual_port) for p in spec.points if excluded(p, sut) is None}
    assert ran == {("v2v", "vhost-user")}
    # The campaign's reason is about the cells it would run (p2p); v2v's
    # memif cell is left out because OVS-DPDK has no memif ports.
    assert excluded(Point(scenario="p2p"), sut) == "slow path"
    assert (excluded(Point(scenario="v2v"), sut) or "").startswith("ovs-dpdk has no memif ports")
    with pytest.raises(CampaignError, match="SCENARIO/vhost-user"):
        parse({"campaign": {"name": "o"}, "matrix": {"suts": ["ovs-dpdk"]},
               "sut": {"ovs-dpdk": {"scenarios": ["v2v/memif"]}}})


@needs_root
@pytest.mark.system
def test_two_builds_of_turnoutd_run_interleaved_on_real_namespaces(tmp_path):
    """A variant running a copy of turnoutd from another path next to the
    checkout's build: both measured, the copy's path and build recorded."""
    import shutil

    from turnout import testpeers
    from turnout.bench import RealBench
    gen, td = built("turnout-gen"), built("turnoutd")
    testpeers.need(td.exists() and gen.exists(), f"{td} and {gen} (scripts/setup.sh)")
    other = tmp_path / "build" / "turnoutd"
    other.parent.mkdir()
    shutil.copy2(td, other)
    doc = _ab(binary=str(other))
    doc["campaign"].update(repetitions=2, warmup_s=0.2)
    doc["matrix"]["scenarios"] = ["p2p"]
    spec = parse(doc)
    with ResultsDB(tmp_path / "ab.db") as db:
        c = run_campaign(spec, db, RealBench([str(gen)], spec=spec))
        assert c.status == "done"
        bad = [t.reason for t in db.trials(c.id) if t.status != "ok"]
        assert not bad, bad
        suts = {s.name: s for s in db.suts(c.id)}
        assert set(suts) == {"turnoutd", "turnoutd-before"}
        before = suts["turnoutd-before"]
        assert before.config["binary"] == str(other) and before.config["base"] == "turnoutd"
        assert str(other) in before.version and "git" in before.version
        assert suts["turnoutd"].config["binary"] == str(td)
        host = db.host(c.host_id)
        assert host is not None and str(other) in host.tools["sut:turnoutd-before"]
        reps = sorted((r.repetition, r.sut) for r in db.results(c.id, status="ok"))
        assert reps == [(0, "turnoutd"), (0, "turnoutd-before"),
                        (1, "turnoutd"), (1, "turnoutd-before")]
        rows = ab_rows(load_campaign(db, c.id), "turnoutd", "turnoutd-before")
        assert [r.cell for r in rows] == ["p2p/uni 64 B"]
        assert rows[0].rate_ratio is not None and rows[0].rate_ratio.n == 2


def _latency_db(tmp_path, rows):
    """Latency trials of campaign ab: (sut, scenario, vport, rep, fraction,
    offered pps, p99 µs, CPU share of a core or None)."""
    db = ResultsDB(tmp_path / "l.db")
    cid = done_campaign(db, "ab")
    for i, (sut, scen, vp, rep, frac, pps, p99, util) in enumerate(rows):
        cpu = [] if util is None else [{"role": "sut", "name": "turnout-w0", "util": util},
                                       {"role": "tester", "name": "gen", "util": 1.0}]
        db.add_trial(Trial.of(campaign_id=cid, key=f"t{i}", sut=sut, scenario=scen,
                              virtual_port=vp, repetition=rep,
                              method="latency" if frac else "fixed", load_fraction=frac,
                              offered_total_pps=pps, tx_total_pps=pps, rx_total_pps=pps,
                              latency_p99_ns=p99 * 1e3, cpu=cpu, status="ok"))
    return db


def test_fixed_rate_points_pair_p99_and_cpu_by_repetition_and_load(tmp_path):
    rows = []
    for r, k in enumerate((0.9, 1.0, 1.1)):
        # 0.1 x R+: after's p99 lower in every pair and outside before's range,
        # its CPU the same within spread; each build at its own R+'s tenth
        rows += [("turnoutd-1000", "v2v", "memif", r, 0.1, 1.0e6, 500.0 * k, 0.20 * k),
                 ("turnoutd-1000-before", "v2v", "memif", r, 0.1, 0.8e6, 900.0 * k, 0.21 * k),
                 # 10 kpps: no CPU account on one side: p99 only
                 ("turnoutd-1000", "v2v", "memif", r, None, 1e4, 800.0 * k, 0.03),
                 ("turnoutd-1000-before", "v2v", "memif", r, None, 1e4, 810.0 * k, None),
                 # another SUT and a cell only one build ran are left out
                 ("testpmd", "v2v", "memif", r, 0.1, 1e6, 10.0, 1.0),
                 ("turnoutd-1000", "p2p", "", r, 0.1, 1e5, 50.0, 1.0)]
    with _latency_db(tmp_path, rows) as db:
        data = load_campaign(db)
        got = {r.cell: r for r in ab_load_rows(data, "turnoutd-1000", "turnoutd-1000-before")}
        t = ab_load_table(data, "turnoutd-1000", "turnoutd-1000-before")
    assert list(got) == ["v2v/uni 64 B memif at 10 kpps", "v2v/uni 64 B memif at 0.1 × R+"]
    tenth = got["v2v/uni 64 B memif at 0.1 × R+"]
    assert tenth.p99_verdict == "lower" and tenth.p99_after is not None
    assert tenth.p99_after.median == pytest.approx(500.0)
    assert tenth.p99_ratio is not None and tenth.p99_ratio.median == pytest.approx(500 / 900)
    # the SUT's threads only, in % of a core; paired 0.2k / 0.21k in each
    assert tenth.cpu_after is not None and tenth.cpu_after.median == pytest.approx(20.0)
    assert tenth.cpu_verdict == "same within spread"
    assert tenth.cpu_ratio is not None and tenth.cpu_ratio.max == pytest.approx(0.2 / 0.21)
    kpps = got["v2v/uni 64 B memif at 10 kpps"]
    assert kpps.p99_verdict == "same within spread"
    assert kpps.cpu_before is None and kpps.cpu_verdict == "not measured on both"
    assert [r[0] for r in t.rows] == list(got) and t.rows[1][5] == "lower"


def test_the_pair_is_found_by_its_before_name():
    assert default_pair(["turnoutd", "turnoutd-before", "testpmd"]) == \
        ("turnoutd", "turnoutd-before")
    assert default_pair(["turnoutd-1000-before", "turnoutd-1000"]) == \
        ("turnoutd-1000", "turnoutd-1000-before")
    # ambiguous or none: the caller names them
    assert default_pair(["a-before", "b-before"]) is None
    assert default_pair(["turnoutd", "testpmd"]) is None
    assert default_pair(["x", "x-before", "y"]) is None


def test_bench_ab_pairs_a_campaigns_before_variant_by_itself(tmp_path, capsys):
    from turnout.cli import main

    rows = [(sut, "v2v", "memif", r, 0.1, 1e6, p99, 0.1)
            for r in range(3) for sut, p99 in (("turnoutd-1000", 500.0),
                                               ("turnoutd-1000-before", 900.0))]
    with _latency_db(tmp_path, rows):
        pass
    assert main(["bench", "ab", "--db", str(tmp_path / "l.db")]) == 0
    out = capsys.readouterr().out
    assert "turnoutd-1000 (after) vs turnoutd-1000-before (before) at fixed rates" in out
    assert "v2v/uni 64 B memif at 0.1 × R+" in out
    # a pair the campaign did not run: an error that names what it ran
    assert main(["bench", "ab", "--db", str(tmp_path / "l.db"), "--after", "turnoutd"]) == 1
    err = capsys.readouterr().err
    assert "nothing measured on both turnoutd and turnoutd-1000-before" in err
    assert "turnoutd-1000, turnoutd-1000-before" in err
