"""Capacity and CPU at this load apart, loads a SUT could not take, the
verdict at a glance, its pictures and the set-up check (issues 30, 31, 32).
Stored sample rows and synthetic databases: the values are invented for
the tests, nothing here is a measurement."""

from __future__ import annotations

import os

import pytest

from synth_db import DPDK_REASON, default_like, done_campaign
from turnout.measure import gen
from turnout.measure.cpu import thread_placement
from turnout.report.cpuload import capacity_note, cpu_at_load, refusal
from turnout.report.glance import glance_matrix, matrix_text
from turnout.report.model import Matrix, MatrixCell, MatrixRow, Section, Table
from turnout.report.page import LONG_CELL, render_page
from turnout.report.queries import load_campaign, not_measured_section
from turnout.report.setup import fairness_table
from turnout.report.summary import summary_text
from turnout.report.usecases import cpu_latency_section, usecase_section
from turnout.report.verdict import latency_verdict_table, refused_table, verdict_rows
from turnout.results import Result, ResultsDB, Sut, Trial
from turnout.sut.base import off_sut_cpus


# ------------------------------------------------ loads a SUT could not take
@pytest.mark.parametrize(("sent", "unsent", "attempts", "pushback", "refused", "bound"), [
    (4000, 0, 4000, 0, False, False),        # took the load
    (3320, 680, 3400, 680, True, False),     # pushed back on 20 %: the SUT
    # pushback on 6 % of the attempts, the tester sent 67 %: the
    # 1320 frames that did not fit are the SUT's doing, not the tester's
    (2680, 1320, 2900, 174, True, False),
    (2680, 0, 2680, 0, False, True),         # behind its schedule, nothing refused
    (2680, 400, 2700, 20, False, True),      # mostly behind: the tester's shortfall
])
def test_a_load_the_sut_pushed_back_on_is_the_suts_not_the_testers(
        sent, unsent, attempts, pushback, refused, bound):
    why = gen.load_refused(10_000, 0.4, sent, unsent, attempts, pushback)
    assert bool(why) is refused
    if refused:
        assert why.startswith(gen.REFUSED) and f"{sent / 4000:.1%}" in why
    tb, why2 = gen.tester_bound(10_000, 0.4, sent, 0, unsent, attempts, pushback)
    assert tb is bound
    assert why2.startswith(gen.REFUSED) is refused
    # saturating trials are judged by tester_bound's own rule, never refused
    assert gen.load_refused(0, 0.4, sent, unsent, attempts, pushback) == ""


def test_a_receiver_behind_is_the_testers_whatever_was_refused():
    tb, why = gen.tester_bound(10_000, 0.4, 3000, 0, 1000, 3400, 900, bursts=100,
                               backlog_bursts=50)
    assert tb and "receiver behind" in why


def _trial(**kw) -> Trial:
    base = dict(sut="turnoutd", scenario="nvsn", method="latency", load_fraction=0.5,
                offered_total_pps=2.15e6, duration_s=0.4, sent=700_000, unsent=160_000,
                status="ok", extra={"tx_attempts": 40_000, "tx_pushback": 2_400,
                                    "tester_bound_why": "the tester offered 81.4% of the load"},
                tester_bound=1)
    base.update(kw)
    return Trial.of(**base)  # type: ignore[arg-type]


def test_trials_stored_before_the_rule_get_the_label_from_their_counts():
    # stored by main before the rule: "tester-bound", though 160k frames did
    # not fit turnoutd's port (NvsN at 0.5 × R+)
    why = refusal(_trial())
    assert why.startswith("SUT could not take the load: the tester sent 81.4% of it")
    assert refusal(_trial(extra={"tester_bound_why": "receiver behind on 50/100 bursts",
                                 "tx_attempts": 40_000, "tx_pushback": 9_000})) == ""
    assert refusal(_trial(method="rplus", offered_total_pps=0)) == ""
    assert refusal(_trial(sent=860_000, unsent=0)) == ""  # 100 %: took it
    # a new trial says so itself
    assert refusal(_trial(extra={"load_refused": "SUT could not take the load: x"})) \
        == "SUT could not take the load: x"


# ------------------------------------------------------- the two numbers
def test_cpu_at_load_is_every_sut_thread_or_a_kernel_switchs_cpus():
    hz = 2e9
    t = Trial.of(sut="testpmd", cycles_per_packet=2e5, busy_cycles_per_frame=300.0,
              cpu=[{"role": "sut", "util": 0.98}, {"role": "sut", "util": 0.02},
                   {"role": "tester", "util": 1.0}])
    c = cpu_at_load(t)
    assert (c.cycles_per_frame, c.pct, c.source) == (2e5, pytest.approx(100.0), "threads")
    bridge = Trial.of(sut="bridge", cycles_per_packet=0.0, busy_cycles_per_frame=5000.0,
                   rx_total_pps=1e5, cpu=[{"role": "tester", "util": 1.0}],
                   extra={"cost_source": "kernel time of the SUT's CPUs outside processes",
                          "cost_span_s": 0.4, "kernel_s": 0.1, "cycles_hz": hz})
    c = cpu_at_load(bridge)
    assert (c.cycles_per_frame, c.source) == (5000.0, "kernel")
    assert c.pct == pytest.approx(25.0)  # 0.1 s of kernel time in 0.4 s
    del bridge.extra["kernel_s"]
    assert cpu_at_load(bridge).pct == pytest.approx(100 * 5000 * 1e5 / hz)
    assert cpu_at_load(Trial.of(sut="wire", cycles_per_packet=0.0)).source == ""


def test_turnoutds_capacity_leaves_its_sleeps_and_wakeups_out(monkeypatch):
    """Its workers' busy cycles only, as testpmd's and OVS's accounts count
    theirs; sleep_cpu_ns (what waking cost) is in its CPU at this load."""
    from turnout.sut import turnoutd

    stats = {"workers": [
        {"busy_cycles": 1_000_000, "packets": 5_000, "sleep_cpu_ns": 10_000_000},
        {"busy_cycles": 500_000, "packets": 2_500, "sleep_cpu_ns": 4_000_000}]}
    monkeypatch.setattr(turnoutd, "rpc", lambda sock, method, *a, **k: stats)
    t = turnoutd.Turnoutd()
    t.sock = "/nonexistent"
    monkeypatch.setattr(t, "pids", lambda: [os.getpid()])
    s = t.cost_sample()
    assert s is not None and (s.cycles, s.frames) == (1_500_000.0, 7_500)
    assert "excluded" in t.cost_source and "sleeps and wake-ups" in t.cost_source


def test_a_capacity_recorded_with_wakeups_says_so(tmp_path):
    old = ("turnoutd workers: busy_cycles (TSC) + CPU spent in sleeps and wake-ups, "
           "over frames received (API `stats`)")
    assert "includes turnoutd's sleeps" in capacity_note({"cost_source": old})
    assert capacity_note({"cost_source": "turnoutd workers: busy_cycles"}) == ""
    with ResultsDB(tmp_path / "old.db") as db:
        cid = done_campaign(db, "old")
        for rep in range(3):
            for sut, cost in (("turnoutd", 1138.0), ("testpmd", 628.0)):
                db.add_result(Result.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut,
                                     scenario="p2v", virtual_port="memif", method="rplus",
                                     repetition=rep, rate_total_pps=1e6, rx_total_pps=1e6,
                                     status="ok", tester_bound=1, busy_cycles_per_frame=cost,
                                     extra={"cost_source": old if sut == "turnoutd" else "x"}))
        (v,) = verdict_rows(load_campaign(db, "old"))
    by = {e.name: e for e in v.entries}
    assert "includes turnoutd's sleeps and wake-ups" in by["turnoutd"].note
    assert "wake-ups" not in by["testpmd"].note


# ------------------------------------------------------------ at a glance
@pytest.fixture(scope="module")
def default_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("glance") / "results.db"
    with ResultsDB(path) as db:
        default_like(db)
    return path


def test_the_matrix_has_a_row_per_use_case_size_and_port_and_a_column_per_sut(default_db):
    with ResultsDB(default_db) as db:
        data = load_campaign(db, "default")
        m = glance_matrix(data)
    # the campaign's order, the wire (the ceiling) is no column
    assert m.columns == ["turnoutd", "bridge", "ovs", "ovs-dpdk", "testpmd"]
    labels = [r.label for r in m.rows]
    assert labels[:2] == ["p2p veth 64 B", "p2p veth 1518 B"]
    assert "v2v vhost-user 64 B" in labels and "chain (1 VNF) memif 64 B" in labels
    assert len(m.rows) == 16
    row = {r.label: r for r in m.rows}
    cells = dict(zip(m.columns, row["v2v vhost-user 64 B"].cells, strict=True))
    # 64 B rows are tester-bound here: ranked by capacity, lower first
    assert row["v2v vhost-user 64 B"].measure == "cyc/frame ↓"
    assert (cells["testpmd"].rank, cells["testpmd"].cls, cells["testpmd"].ratio) == (
        "1", "best", "best")
    assert cells["turnoutd"].value == "300" and cells["turnoutd"].ratio == "1.2×"
    assert cells["ovs-dpdk"].cls == "last" and cells["ovs-dpdk"].ratio == "1.92×"
    assert cells["bridge"].cls == "skipped" and "no vhost-user ports" in cells["bridge"].title
    assert "CPU at this load" in cells["turnoutd"].title
    # a SUT of another port type has no place in the row
    memif = dict(zip(m.columns, row["v2v memif 64 B"].cells, strict=True))
    assert memif["bridge"].cls == "" and memif["ovs-dpdk"].cls == "skipped"
    assert DPDK_REASON in memif["ovs-dpdk"].title
    # 1518 B: every SUT set its own rate: ranked by R+, higher first
    big = row["v2v memif 1518 B"]
    assert big.measure == "Mpps ↑"
    assert big.sentence == ("v2v over memif, 1518 B: testpmd first, turnoutd 0.833× its "
                            "rate; ovs-dpdk skipped.")
    assert row["p2p veth 64 B"].sentence.startswith(
        "p2p over veth, 64 B: testpmd first; turnoutd 1.2× its cost; ovs 16.4× its cost")


def test_the_terminal_prints_the_same_matrix(default_db):
    with ResultsDB(default_db) as db:
        data = load_campaign(db, "default")
        text = summary_text(data)
        m = glance_matrix(data)
    tail = text[text.index("The verdict at a glance"):]
    assert tail == matrix_text(m) + "\n"
    assert "1 250 best" in tail and "skipped" in tail
    for r in m.rows:
        assert r.label in tail and f"- {r.sentence}" in tail
    assert max(len(line) for line in tail.splitlines()[:20]) < 120  # compact


def test_tied_entries_and_one_repetition(tmp_path):
    with ResultsDB(tmp_path / "t.db") as db:
        cid = done_campaign(db, "t")
        for rep, k in enumerate((0.9, 1.0, 1.1)):
            for sut, cost in (("testpmd", 149.0), ("turnoutd", 202.0)):
                db.add_result(Result.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut,
                                     scenario="v2v", virtual_port="memif", method="rplus",
                                     repetition=rep, rate_total_pps=1e7, rx_total_pps=1e7,
                                     status="ok", tester_bound=1,
                                     busy_cycles_per_frame=cost * (k if sut == "turnoutd"
                                                                   else 1.3 * k)))
        data = load_campaign(db, "t")
        (r,) = glance_matrix(data).rows
    # the example: ranges overlap, so a tie, said in plain words,
    # with how often the first was ahead in the interleaved repetitions
    assert r.sentence == ("v2v over memif, 64 B: testpmd first, turnoutd 1.04× its cost, "
                          "tied within spread (testpmd ahead in 3 of 3 interleaved "
                          "repetitions).")
    assert [c.cls for c in r.cells] == ["tie", "tie"]


# --------------------------------------------------- pictures and tables
def test_one_picture_per_use_case_with_capacity_and_p99_over_the_wire_floor(default_db):
    with ResultsDB(default_db) as db:
        sec = usecase_section(load_campaign(db, "default"))
    figs = {f.key: f for f in sec.figures}
    assert set(figs) == {"usecase-p2p-uni", "usecase-p2v-uni", "usecase-v2v-uni",
                         "usecase-loopback-uni-vnfs-1", "usecase-nvsn-uni-pairs-2"}
    v2v = {p.title: p for p in figs["usecase-v2v-uni"].panels}
    assert sorted(v2v) == ["capacity, 1518 B", "capacity, 64 B", "p99 at 10 kpps, 1518 B",
                           "p99 at 10 kpps, 64 B"]
    cap = v2v["capacity, 64 B"]
    assert cap.kind == "cat"
    # every kind of port, veth first, each ordered lowest first
    assert [(s.label, s.points[0].y) for s in cap.series] == [
        ("ovs [veth]", 4100.0), ("bridge [veth]", 5200.0), ("testpmd [memif]", 250.0),
        ("turnoutd [memif]", 300.0), ("testpmd [vhost-user]", 250.0),
        ("turnoutd [vhost-user]", 300.0), ("ovs-dpdk [vhost-user]", 480.0)]
    assert cap.series[0].points[0].lo == pytest.approx(4100 * 0.97)
    p99 = v2v["p99 at 10 kpps, 64 B"]
    assert p99.ylog and [round(y, 3) for y, _ in p99.hlines] == [12.0]  # the wire [memif]
    assert "wire [memif]" in p99.hlines[0][1]
    bridge = next(s for s in p99.series if s.label == "bridge [veth]").points[0]
    assert bridge.noisy  # one repetition's load was refused: drawn hollow


def test_cpu_vs_p99_side_by_side_and_one_picture_per_path(default_db):
    with ResultsDB(default_db) as db:
        data = load_campaign(db, "default")
        sec = cpu_latency_section(data)
        lat = latency_verdict_table(data)
        ref = refused_table(data)
    (t,) = sec.tables
    col = {c: i for i, c in enumerate(t.columns)}
    rows = {(r[col["path"]], r[col["size B"]], r[col["SUT"]], r[col["load"]]): r
            for r in t.rows}
    tp = rows[("v2v memif", "64", "testpmd [memif]", "10 kpps")]
    assert tp[col["CPU % of a core"]] == "100 [100–100]"  # a busy poller: a whole core
    assert tp[col["CPU at this load cyc/frame"]].startswith("200000")  # 2 GHz over 10 kpps
    assert tp[col["capacity cyc/frame"]].startswith("250")
    br = rows[("v2v veth", "64", "bridge [veth]", "10 kpps")]
    assert br[col["limited by"]] == "SUT could not take the load in 1/3"
    fig = {f.key: f for f in sec.figures}["cpu-p99-v2v-memif-uni"]
    (panel,) = [p for p in fig.panels if p.title == "64 B"]
    assert panel.kind == "xy" and panel.ylog
    pts = {s.label: s.points for s in panel.series}
    assert [p.label for p in pts["turnoutd [memif]"]] == ["10 kpps", "0.5×R+"]
    assert pts["testpmd [memif]"][0].x == pytest.approx(100.0)
    assert panel.hlines and "wire p99 at 10 kpps" in panel.hlines[0][1]
    vfig = {f.key: f for f in sec.figures}["cpu-p99-v2v-veth-uni"]
    refused = [p for s in vfig.panels[0].series for p in s.points if p.noisy]
    assert refused and "got 83.0%" in refused[0].label
    # the latency verdict lists it, with the CPU next to the p99
    (row,) = [r for r in lat.rows if r[4] == "bridge [veth]" and r[:2] == ["v2v", "64"]]
    assert row[lat.columns.index("limited by")] == (
        "SUT could not take the load in 1/3 (sent 83.0%)")
    assert lat.columns[6] == "CPU at this load cyc/frame"
    (rr,) = ref.rows
    assert rr[0] == "bridge [veth]" and rr[6] == "83.0%"


def test_not_measured_groups_one_reason_for_many_cells(default_db):
    with ResultsDB(default_db) as db:
        sec = not_measured_section(load_campaign(db, "default"))
    g = {t.key: t for t in sec.tables}["not-measured-by-reason"]
    (dpdk,) = [r for r in g.rows if r[0] == "ovs-dpdk"]
    assert dpdk[3] == DPDK_REASON and "p2p 64 B" in dpdk[2] and "nvsn [memif] 64 B" in dpdk[2]


# ------------------------------------------------------- same set-up check
def _fair_db(path, placement_both: bool = False, other_args: bool = False) -> ResultsDB:
    db = ResultsDB(path)
    cid = done_campaign(db, "f")
    for sut in ("turnoutd", "testpmd"):
        sid = db.add_sut(Sut(name=sut, version="1", config={"tester_version":
                                                             "turnout-gen 0.1.0"}))
        procs = ["turnout-gen txrx --port memif:v0 --rx-port memif:v1 --size 64 --cpu 0"]
        if other_args and sut == "testpmd":
            procs = ["turnout-gen txrx --port memif:v0 --rx-port memif:v1 --size 64 --cpu 1"]
        both = {"handler4": 1} if placement_both and sut == "testpmd" else {}
        for rep in range(2):
            db.add_trial(Trial.of(campaign_id=cid, sut_id=sid, key=f"{sut}{rep}", sut=sut,
                               scenario="v2v", virtual_port="memif", method="rplus",
                               repetition=rep, status="ok",
                               extra={"tester_setup": {"processes": procs, "vnfs": []},
                                      "kernel_cpus": "1",
                                      "sut_placement": {"on": {"w0": 1}, "both": both,
                                                        "off": 5}}))
    return db


def test_the_setup_check_says_same_or_what_differs(tmp_path):
    with _fair_db(tmp_path / "a.db") as db:
        (row,) = fairness_table(load_campaign(db, "f")).rows
    assert row[-1] == "yes" and row[2] == "turnout-gen 0.1.0" and row[4] == "none"
    assert row[3].startswith("turnout-gen txrx --port memif:v0")
    with _fair_db(tmp_path / "b.db", other_args=True, placement_both=True) as db:
        t = fairness_table(load_campaign(db, "f"))
    (row,) = t.rows
    assert row[-1].startswith("no: ") and "tester processes" in row[-1]
    assert "testpmd [memif]'s threads may share its CPUs" in row[-1]
    assert row[3].startswith("differs: ") and t.flags == ["differs"]
    assert "also allowed there: handler4" in row[6]


def test_tester_setup_names_ports_by_endpoint_and_leaves_the_rate_out():
    s = gen.Stream(tx_port="memif:/run/x/tn1a/memif/v0.sock", rx_port="afxdp:tn1ap3a",
                   tx_ns=None, rx_ns=None, src_mac="02:00:00:00:00:01",
                   dst_mac="02:00:00:00:00:02", name="v0>t1")
    t = gen._Task(role="txrx", streams=[s], netns=None, args=[
        "/opt/t/turnout-gen", "txrx", "--port", s.tx_port, "--rx-port", s.rx_port,
        "--src-mac", s.src_mac, "--dst-mac", "ae:1f:00:00:00:09", "--rate-pps", "5000",
        "--size", "64", "--cpu", "0"])
    setup = gen.tester_setup(["/opt/t/turnout-gen"], [t], [])
    assert setup == {"processes": ["turnout-gen txrx --port memif:v0 --rx-port afxdp:t1 "
                                   "--src-mac MAC --dst-mac MAC --size 64 --cpu 0"],
                     "vnfs": []}
    assert gen.normalized_spec("memif:/a/b.sock,role=server,mode=interrupt", "v1") == \
        "memif:v1,role=server,mode=interrupt"


def test_thread_placement_sorts_threads_by_where_they_may_run():
    allowed = sorted(os.sched_getaffinity(0))
    p = thread_placement([os.getpid()], allowed)  # every thread of ours fits
    assert sum(p["on"].values()) >= 1 and p["both"] == {} and p["off"] == 0
    if len(allowed) > 1:
        p = thread_placement([os.getpid()], allowed[:1])
        assert sum(p["both"].values()) >= 1 and p["on"] == {}
    assert off_sut_cpus("1", {0, 1}) == "0" and off_sut_cpus("0-1", {0, 1}) == ""
    assert off_sut_cpus("2-3", {0, 1, 2, 3, 4}) == "0,1,4"


# ----------------------------------------------------------------- page
def test_long_cells_are_abbreviated_with_the_full_text_on_hover_and_a_click():
    long = "ovs-dpdk has no memif ports " * 10
    t = Table(key="x", title="X", columns=["a", "b"], rows=[[long, "short"]], flags=[""])
    m = Matrix(key="verdict-matrix", title="M", columns=["turnoutd"], rows=[
        MatrixRow("v2v memif 64 B", "cyc/frame ↓",
                  [MatrixCell("202", "best", "1", "best", "turnoutd: capacity 202")], "s.")])
    page = render_page("T", [Section(key="verdict", title="Verdict", intro="",
                                     tables=[t], matrices=[m])])
    assert len(long) > LONG_CELL
    assert f'<details title="{long}"><summary>' in page and "</details>" in page
    assert '<td class="long">' in page and "<td>short</td>" in page
    assert '<td class="v best" title="turnoutd: capacity 202"><small>1</small> <b>202</b>' \
        in page
    assert page.index('id="verdict-matrix"') < page.index('class="units"')
