"""Where the host placed the tester's and the SUT's virtual CPUs
(measure/placement.py): the probe for real on this machine, and how the
verdict marks repetitions that ran with the CPUs placed apart."""

from __future__ import annotations

import os
from pathlib import Path

from synth_db import done_campaign
from turnout.measure.placement import fastest_placement, find_probe, probe, trial_rtt
from turnout.report.glance import sentence
from turnout.report.points import load_campaign
from turnout.report.verdict import verdict_rows
from turnout.results import Result, ResultsDB, Trial


def test_the_probe_measures_a_round_trip_between_two_cpus_of_this_machine():
    exe = find_probe()
    assert exe is not None, "turnout-cpu-rtt is not built (make build)"
    cpus = sorted(os.sched_getaffinity(0))
    ns = probe(cpus[0], cpus[-1], exe)
    # a cache line's round trip: more than a few ns, less than 100 µs
    assert isinstance(ns, float) and 5 < ns < 100_000, ns
    # a CPU that does not exist: the reason, not a figure
    why = probe(cpus[0], 4000, exe)
    assert isinstance(why, str) and "exited 1" in why and "4000" in why, why


def test_the_fastest_placement_is_one_several_trials_shared():
    # two probes on one core's hyperthreads in 300 do not make every other
    # slow
    many = [27.6, 40.0] + [58.0, 61.0, 64.0] * 20 + [320.0, 330.0] * 119
    assert fastest_placement(many) == 58.0
    # a small campaign: two alike are a placement
    assert fastest_placement([320.0, 64.0, 66.0, 330.0]) == 64.0
    # none alike: the smallest
    assert fastest_placement([320.0, 61.0]) == 61.0
    assert fastest_placement([61.0]) == 61.0
    assert fastest_placement([]) is None


def test_a_trial_counts_with_the_slower_of_its_two_probes():
    assert trial_rtt({"cpu_rtt_ns": {"before": 60.0, "after": 330.0, "cpus": [0, 1]}}) == 330.0
    assert trial_rtt({"cpu_rtt_ns": {"why": "turnout-cpu-rtt not built"}}) is None
    assert trial_rtt({}) is None


def _db(path: Path, rtts: dict[str, list[float]]) -> ResultsDB:
    """R+ results of two SUTs in v2v over vhost-user, 3 repetitions, each
    with the R+ trial that set it and its probes."""
    db = ResultsDB(path)
    cid = done_campaign(db, path.stem)
    cost = {"turnoutd": (49.0, 400.0), "testpmd": (150.0, 330.0)}
    for sut, reps in rtts.items():
        for rep, ns in enumerate(reps):
            c = cost[sut][0] if ns < 100 else cost[sut][1]
            rid = db.add_result(Result.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut,
                                          scenario="v2v", virtual_port="vhost-user",
                                          method="rplus", repetition=rep, rate_total_pps=5e6,
                                          rx_total_pps=5e6, status="ok", tester_bound=1,
                                          busy_cycles_per_frame=c))
            db.add_trial(Trial.of(campaign_id=cid, result_id=rid, key=f"{sut}{rep}t", sut=sut,
                                  scenario="v2v", virtual_port="vhost-user", method="rplus",
                                  repetition=rep, offered_total_pps=0, sent=2_000_000,
                                  received=2_000_000, status="ok",
                                  extra={"cpu_rtt_ns": {"before": ns, "after": ns,
                                                        "cpus": [0, 1]}}))
    return db


def test_the_verdict_says_which_repetitions_the_host_placed_apart(tmp_path):
    with _db(tmp_path / "p.db", {"turnoutd": [64.0, 320.0, 330.0],
                                 "testpmd": [65.0, 66.0, 318.0]}) as db:
        data = load_campaign(db, "p")
        rows = verdict_rows(data)
    (v,) = rows
    e = {x.name: x for x in v.entries}
    assert e["turnoutd"].apart == (2, 3) and e["testpmd"].apart == (1, 3)
    assert "vCPUs placed apart by the host in 2/3 (cache line round trip 330 ns, 64 at best)" \
        in e["turnoutd"].note
    assert sentence(v).endswith("; the host placed the tester's and the SUT's vCPUs apart in "
                                "testpmd's 1 of 3, turnoutd's 2 of 3 repetitions.") or \
        sentence(v).endswith("; the host placed the tester's and the SUT's vCPUs apart in "
                             "turnoutd's 2 of 3, testpmd's 1 of 3 repetitions."), sentence(v)


def test_the_same_placements_for_every_sut_are_not_repeated_in_the_sentence(tmp_path):
    with _db(tmp_path / "r.db", {"turnoutd": [320.0, 330.0, 64.0],
                                 "testpmd": [318.0, 325.0, 66.0]}) as db:
        (v,) = verdict_rows(load_campaign(db, "r"))
    assert all(x.apart == (2, 3) for x in v.entries)
    assert "placed" not in sentence(v)
    assert all("placed apart by the host in 2/3" in x.note for x in v.entries)


def test_one_placement_throughout_says_nothing(tmp_path):
    with _db(tmp_path / "q.db", {"turnoutd": [64.0, 70.0, 66.0],
                                 "testpmd": [65.0, 66.0, 80.0]}) as db:
        (v,) = verdict_rows(load_campaign(db, "q"))
    assert all(x.apart == (0, 3) for x in v.entries)
    assert "placed" not in sentence(v) and not any("placed" in x.note for x in v.entries)
