"""The report says which wake-up regime turnoutd's workers ran in at each
fixed rate, why, and what it cost next to the other SUTs of the cell
(report/regime.py), from a synthetic database whose values the tests
invent (nothing here is a measurement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from synth_db import default_like, done_campaign
from turnout.report.page import render_page
from turnout.report.points import CampaignData, load_campaign
from turnout.report.regime import regime_cells, regime_table, wake_of
from turnout.report.summary import summary_text
from turnout.report.usecases import cpu_latency_section
from turnout.report.verdict import latency_verdict_table, verdict_section
from turnout.results import ResultsDB, Sut, Trial

HZ = 2.0e9
RATE = 10_000.0


def _worker(regime: str, why: str, wake_us: float, budget_us: float | None,
            sleep_after_us: float, sleeps: int, wakeups: int) -> dict[str, Any]:
    w: dict[str, Any] = {"regime": regime, "why": why, "wake_p99_ns": wake_us * 1e3,
                         "sleep_after_ns": sleep_after_us * 1e3, "sleeps": sleeps,
                         "wakeups": wakeups, "packets": 4000, "rq_wait_permille": 3}
    if budget_us is not None:
        w["budget_ns"] = budget_us * 1e3
    return w


def _trial(db: ResultsDB, cid: int, sut: str, rep: int, *, port: str = "memif",
           p99_us: float, util: float | None = None, wake: dict[str, Any] | None = None,
           sut_id: int | None = None, kernel_s: float | None = None) -> None:
    extra: dict[str, Any] = {"cycles_hz": HZ}
    if wake is not None:
        extra["sut_wake"] = {"workers": [wake]}
    frames = int(RATE * 0.4)
    busy = None
    if kernel_s is not None:  # a kernel switch: its CPUs' kernel time
        extra |= {"cost_source": "kernel time of the SUT's CPUs", "cost_span_s": 0.4,
                  "kernel_s": kernel_s}
        busy = kernel_s * HZ / frames
    cpu = [] if util is None else [{"role": "sut", "tid": 1, "name": "w0", "util": util}]
    db.add_trial(Trial.of(
        campaign_id=cid, sut_id=sut_id, key=f"{sut}|{port}|{rep}", sut=sut, scenario="v2v",
        frame_size_b=64, virtual_port=port, method="fixed", repetition=rep,
        offered_total_pps=RATE, tx_total_pps=RATE, sent=frames, received=frames,
        rx_total_pps=RATE, duration_s=0.4, latency_p50_ns=p99_us * 300,
        latency_p99_ns=p99_us * 1e3, cpu=cpu,
        cycles_per_packet=(util * HZ / RATE) if util is not None else None,
        busy_cycles_per_frame=busy, tester_bound=0, status="ok",
        extra=extra | {"tx_attempts": frames, "tx_pushback": 0}))


def _cell_db(path: Path, *, stored_budget: bool = True) -> ResultsDB:
    """v2v 64 B at 10 kpps: turnoutd (default) polled because its wake-up
    p99 is over its 100 µs budget; turnoutd-b1000 slept; testpmd polls; the
    bridge (on veths) spends kernel time; the bare wire is the floor."""
    db = ResultsDB(path)
    cid = done_campaign(db, "lb")
    b1000 = db.add_sut(Sut("turnoutd-b1000", "t", {"options": {"latency_budget_us": 1000}}))
    for rep, (wake_us, util, p99) in enumerate(((260.0, 0.97, 41.0), (310.0, 0.99, 37.0),
                                                (285.0, 0.98, 52.0))):
        _trial(db, cid, "turnoutd", rep, p99_us=p99, util=util,
               wake=_worker("poll", "wake_over_budget", wake_us,
                            100.0 if stored_budget else None, 4000.0, 2, 1))
        _trial(db, cid, "turnoutd-b1000", rep, p99_us=990.0 + 10 * rep, util=0.021 + 0.001 * rep,
               sut_id=b1000, wake=_worker("interrupt", "wake_fits", 240.0 + rep,
                                          1000.0 if stored_budget else None, 2.0, 9000, 8000))
        _trial(db, cid, "testpmd", rep, p99_us=20.0 + rep, util=1.0)
        _trial(db, cid, "bridge", rep, port="veth", p99_us=180.0, kernel_s=0.4 * 0.03)
        _trial(db, cid, "wire", rep, p99_us=15.0)
    return db


@pytest.fixture
def cell(tmp_path: Path) -> CampaignData:
    db = _cell_db(tmp_path / "r.db")
    return load_campaign(db, None)


def _row(data: CampaignData, sut: str) -> dict[str, str]:
    t = regime_table(data)
    rows = [dict(zip(t.columns, r, strict=True)) for r in t.rows if r[1] == sut]
    assert len(rows) == 1, rows
    return rows[0]


def test_a_polled_cell_names_its_regime_why_and_cpu_from_the_trials(cell: CampaignData) -> None:
    r = _row(cell, "turnoutd [memif]")
    assert (r["regime"], r["why"]) == ("poll", "wake_over_budget")
    assert r["wake-up p99 µs"] == "285 [260–310]"
    assert r["budget µs"] == "100"
    assert r["idle before sleep µs"] == "4000"
    assert r["CPU core"] == "0.98 [0.97–0.99]"
    assert r["p99 µs"] == "41 [37–52]"
    assert "testpmd [memif] 1.00 core, p99 21 µs" in r["same cell: CPU core, p99"]
    (s,) = [x for x in regime_table(cell).sentences if "turnoutd [memif] " in x.split(":")[1]]
    assert s.startswith("v2v 64 B at 10 kpps: turnoutd [memif] polled: the host's wake-up p99 "
                        "(285 [260–310] µs) exceeds half its 100 µs budget")
    assert "it used 0.98 [0.97–0.99] core per second of traffic (p99 41 [37–52] µs)" in s
    assert "as much as testpmd [memif]" in s
    # the same switch with a larger budget slept, and the sentence says at what cost
    assert "turnoutd-b1000 [memif] (wake, budget 1000 µs) 0.022 [0.021–0.023] core, p99 1000 µs" \
        in s
    # a kernel switch on veths in the same use case: its CPUs' kernel time
    assert "bridge [veth] 0.03 core, kernel time, p99 180 µs" in s
    assert "wire" not in s.split("Same cell:")[1]  # the floor, not a SUT
    # the contract: p99 within the wire's p99 plus the budget, and what held it
    assert "; its budget held by polling (p99 41 µs, the wire's 15 µs + 100 µs = 115 µs)" in s


def test_a_cell_that_woke_says_so_and_costs_a_fraction(cell: CampaignData) -> None:
    r = _row(cell, "turnoutd-b1000 [memif]")
    assert (r["regime"], r["why"], r["budget µs"]) == ("wake", "wake_fits", "1000")
    assert r["sleeps / ended by frames"] == "27000 / 24000"
    assert r["CPU core"] == "0.022 [0.021–0.023]"
    (s,) = [x for x in regime_table(cell).sentences if "turnoutd-b1000 [memif] slept" in x]
    assert "the host's wake-up p99 (241 [240–242] µs) fits its 1000 µs budget" in s
    assert "0.022× what testpmd [memif] used (1.00 core)" in s
    assert "polled" not in s.split(". Same cell")[0]
    assert "its budget held without polling (p99 1000 µs, the wire's 15 µs + 1000 µs = " \
        "1015 µs)" in s


def test_the_latency_verdict_shows_the_regime_next_to_the_cpu(cell: CampaignData) -> None:
    t = latency_verdict_table(cell)
    col = t.columns.index("wake-up regime")
    by = {r[4]: r for r in t.rows}
    assert by["turnoutd [memif]"][col] == "poll 3/3 (wake_over_budget)"
    assert by["turnoutd-b1000 [memif]"][col] == "wake 3/3 (wake_fits)"
    assert by["testpmd [memif]"][col] == "–"
    cpu = t.columns.index("CPU at this load cyc/frame")
    assert "(98 % of a core)" in by["turnoutd [memif]"][cpu]


def test_the_cpu_vs_p99_table_and_picture_name_the_regime(cell: CampaignData) -> None:
    sec = cpu_latency_section(cell)
    (t,) = sec.tables
    col = {c: i for i, c in enumerate(t.columns)}
    by = {r[col["SUT"]]: r for r in t.rows}
    assert by["turnoutd [memif]"][col["wake-up regime"]] == "poll 3/3 (wake_over_budget)"
    assert by["turnoutd [memif]"][col["CPU % of a core"]] == "98 [97–99]"
    assert by["testpmd [memif]"][col["wake-up regime"]] == "–"
    assert t.columns[-1] == "limited by"
    fig = {f.key: f for f in sec.figures}["cpu-p99-v2v-memif-uni"]
    pts = {s.label: s.points for s in fig.panels[0].series}
    assert [p.label for p in pts["turnoutd [memif]"]] == ["10 kpps, poll 3/3"]
    assert [p.label for p in pts["turnoutd-b1000 [memif]"]] == ["10 kpps, wake 3/3"]
    assert [p.label for p in pts["testpmd [memif]"]] == ["10 kpps"]


def test_the_summary_and_the_page_carry_the_sentences(cell: CampaignData) -> None:
    text = summary_text(cell)
    assert "Wake-up regime at fixed rates, and what it cost" in text
    assert "- v2v 64 B at 10 kpps: turnoutd [memif] polled: the host's wake-up p99" in text
    page = render_page("t", [verdict_section(cell)])
    assert '<ul class="sentences"><li>v2v 64 B at 10 kpps: turnoutd [memif] polled' in page
    assert 'id="tbl-wake-regime"' in page


def test_the_budget_comes_from_the_options_or_says_it_is_not_stored(tmp_path: Path) -> None:
    data = load_campaign(_cell_db(tmp_path / "r.db", stored_budget=False), None)
    assert _row(data, "turnoutd-b1000 [memif]")["budget µs"] == "1000"
    assert _row(data, "turnoutd [memif]")["budget µs"] == "default (not stored)"
    (s,) = [x for x in regime_table(data).sentences if "turnoutd [memif] polled" in x]
    assert "exceeds half its default budget (the figure is not stored in these trials)" in s
    assert "budget held" not in s  # no budget figure: no claim about it
    assert "100 µs" not in s


def test_repetitions_in_different_regimes_are_counted_apart(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "r.db")
    cid = done_campaign(db, "mixed")
    for rep in range(3):
        w = (_worker("poll", "wake_over_budget", 300.0, 100.0, 1000.0, 1, 0) if rep < 2 else
             _worker("interrupt", "contended", 300.0, 100.0, 1000.0, 500, 450))
        _trial(db, cid, "turnoutd", rep, p99_us=60.0, util=0.9 if rep < 2 else 0.3, wake=w)
        _trial(db, cid, "testpmd", rep, p99_us=20.0, util=1.0)
    data = load_campaign(db, None)
    t = regime_table(data)
    assert [(r[2], r[3]) for r in t.rows] == [("poll 2/3", "wake_over_budget"),
                                              ("wake 1/3", "contended")]
    (s,) = t.sentences
    assert "polled: the host's wake-up p99 (300 µs) exceeds half its 100 µs budget in 2 " \
           "of 3 trials" in s
    assert "slept between frames (woken by notifications): polling waited longer for the CPU " \
           "than a wake-up takes (contended; run-queue wait 3 ‰) in 1 of 3 trials" in s
    col = latency_verdict_table(data).columns.index("wake-up regime")
    (tp,) = [r for r in latency_verdict_table(data).rows if r[4] == "turnoutd [memif]"]
    assert tp[col] == "poll 2/3 (wake_over_budget); wake 1/3 (contended)"


def test_without_a_wake_up_account_nothing_changes(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "r.db") as db:
        default_like(db)
        data = load_campaign(db, None)
        assert regime_cells(data) == []
        assert not regime_table(data).rows
        assert "wake-up regime" not in latency_verdict_table(data).columns
        assert "wake-up regime" not in cpu_latency_section(data).tables[0].columns
        assert "Wake-up regime" not in summary_text(data)


def test_an_error_or_an_empty_account_is_no_regime() -> None:
    t = Trial.of(campaign_id=1, key="k", sut="turnoutd", scenario="v2v", method="fixed",
                 offered_total_pps=RATE, status="ok", started_at=0.0,
                 extra={"sut_wake": {"error": "connection refused"}})
    assert wake_of(t) is None
    t.extra = {"sut_wake": {"workers": [{"sleeps": 3}]}}
    assert wake_of(t) is None
    t.extra = {"sut_wake": {"workers": [_worker("poll", "no_budget", 0.0, 0.0, 1000.0, 0, 0)]}}
    w = wake_of(t)
    assert w is not None and w.polled and w.budget_ns == 0.0


def test_a_p99_over_the_wire_plus_the_budget_is_said_not_to_hold(tmp_path: Path) -> None:
    db = ResultsDB(tmp_path / "r.db")
    cid = done_campaign(db, "over")
    for rep in range(3):
        _trial(db, cid, "turnoutd", rep, p99_us=300.0 + rep, util=0.99,
               wake=_worker("poll", "wake_over_budget", 400.0, 100.0, 8000.0, 3, 2))
        _trial(db, cid, "wire", rep, p99_us=20.0)
    (s,) = regime_table(load_campaign(db, None)).sentences
    assert "; its budget did not hold (p99 301 µs, the wire's 20 µs + 100 µs = 120 µs)" in s
    assert "Same cell" not in s  # the wire is the floor, not another SUT
