"""Cost per packet and the verdict: arithmetic and ranking rules
on recorded samples and a synthetic results database. The values are
invented for the tests; nothing here is a measurement."""

from __future__ import annotations

import pytest

from synth_db import done_campaign, rplus_db
from turnout.measure.cost import (
    CostSample,
    cost_in_window,
    counter_delta,
    cpu_list,
    kernel_ticks,
    netdev_rx_packets,
)
from turnout.measure.counts import TrialCounts
from turnout.measure.gen import apply_cost
from turnout.report.model import spread_of
from turnout.report.queries import load_campaign
from turnout.report.summary import summary_text
from turnout.report.verdict import Entry, rank_entries, verdict_rows
from turnout.results import Result, ResultsDB


# ------------------------------------------------------------------ cost
def _samples(t0: float, n: int, every: float, cyc_per_s: float, fps: float) -> list[CostSample]:
    return [CostSample(t0 + i * every, cyc_per_s * i * every, int(fps * i * every))
            for i in range(n)]


def test_cost_is_taken_between_samples_inside_the_window_only():
    # 100 cycles per frame inside the window; warm-up outside it cost 10x more
    inside = _samples(10.0, 11, 0.05, 1e8, 1e6)
    before = [CostSample(9.5, -5e7, -50_000)]  # warm-up: 1000 cycles/frame
    c, why = cost_in_window(before + inside, 10.0, 10.5, "x")
    assert why == "" and c is not None
    assert c.cycles_per_frame == pytest.approx(100.0)
    assert c.span_s == pytest.approx(0.5)
    assert c.frames == 500_000


def test_cost_needs_two_samples_and_enough_frames():
    s = _samples(0.0, 5, 0.1, 1e8, 1e6)
    c, why = cost_in_window(s, 0.05, 0.12, "x")
    assert c is None and "1 of 5" in why
    idle = [CostSample(0.0, 0.0, 0), CostSample(0.5, 1e3, 10)]
    c, why = cost_in_window(idle, 0.0, 1.0, "x")
    assert c is None and "only 10 frames" in why


def test_a_coarse_account_below_its_resolution_gives_no_cost():
    # /proc/stat ticks: 3 ticks of softirq for 20k frames is not a figure, and
    # 0 ticks (the work ran between two ticks) is not "free"
    tick = 3e9 / 100
    for ticks in (0, 3, 9):
        s = [CostSample(0.0, 0.0, 0, tick), CostSample(0.5, ticks * tick, 20_000, tick)]
        c, why = cost_in_window(s, 0.0, 1.0, "x")
        assert c is None and "below its resolution" in why, (ticks, why)
    s = [CostSample(0.0, 0.0, 0, tick), CostSample(0.5, 40 * tick, 400_000, tick)]
    c, why = cost_in_window(s, 0.0, 1.0, "x")
    assert c is not None and c.cycles_per_frame == pytest.approx(3000.0)
    # a cycle-exact account has no such floor
    s = [CostSample(0.0, 0.0, 0), CostSample(0.5, 5e4, 20_000)]
    assert cost_in_window(s, 0.0, 1.0, "x")[0] is not None


def test_counters_that_wrap_or_go_backwards():
    assert counter_delta(2**64 - 10, 5) == 15  # testpmd's port totals may wrap
    s = [CostSample(0.0, 1e9, 5_000_000), CostSample(0.5, 1e6, 10)]  # restarted
    c, why = cost_in_window(s, 0.0, 1.0, "x")
    assert c is None and "backwards" in why


def test_apply_cost_uses_the_overlap_of_the_senders_windows():
    c = TrialCounts(offered_total_pps=0, duration_s=1.0, sent=1, received=1, lost=0)
    c.extra["windows_ns"] = [[int(10e9), int(11e9)], [int(10.2e9), int(11.2e9)]]
    # 200 cycles/frame while both send (10.2 .. 11.0 s), 50 elsewhere
    samples = []
    cyc = frames = 0.0
    for i in range(0, 130):
        t = 9.9 + i * 0.01
        rate = 200.0 if 10.2 <= t <= 11.0 else 50.0
        frames += 1e4
        cyc += rate * 1e4
        samples.append(CostSample(t, cyc, int(frames)))
    apply_cost(c, samples, "src")
    assert c.busy_cycles_per_frame == pytest.approx(200.0, rel=0.02)
    assert c.extra["cost_source"] == "src"
    c2 = TrialCounts(offered_total_pps=0, duration_s=1.0, sent=1, received=1, lost=0)
    apply_cost(c2, samples, "src")
    assert c2.busy_cycles_per_frame is None and "no traffic window" in c2.extra["cost_why"]


def test_kernel_accounting_parsers():
    stat = ("cpu  1 2 3 4 5 6 7 8 0 0\n"
            "cpu0 10 0 20 100 0 1 2 0 0 0\n"
            "cpu1 10 0 30 100 0 4 50 0 0 0\n")
    assert kernel_ticks([1], stat) == 4 + 50
    assert kernel_ticks([0, 1], stat) == 3 + 54
    dev = ("Inter-|   Receive  \n face |bytes    packets errs\n"
           "  tp1: 6400 100 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
           "  tp2: 640 10 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
           "    lo: 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    assert netdev_rx_packets(0, ["tp1", "tp2"], dev) == 110
    assert cpu_list("1") == [1] and cpu_list("0,2-4") == [0, 2, 3, 4]


# --------------------------------------------------------------- ranking
def _e(name: str, rates: list[float] | None = None, costs: list[float] | None = None) -> Entry:
    e = Entry(sut=name)
    if rates:
        e.by_rep_rate = dict(enumerate(rates))
        e.rate = spread_of(rates)
    if costs:
        e.by_rep_cost = dict(enumerate(costs))
        e.cost = spread_of(costs)
    return e


def test_overlapping_spreads_are_never_ranked_apart():
    out = rank_entries([_e("b", [9, 10, 11]), _e("a", [10, 12, 13]), _e("c", [5, 5.5, 6])],
                       "rate")
    assert [(e.sut, e.rank) for e in out] == [("a", "=1"), ("b", "=1"), ("c", "3")]
    # the ratio is paired by repetition: a/b per rep = 10/9, 12/10, 13/11
    assert out[0].ratio_next is not None and out[0].ratio_next.n == 3
    assert out[0].ratio_next.min == pytest.approx(10 / 9)
    assert out[1].ratio_next.median == pytest.approx(10 / 5.5)


def test_two_repetitions_never_rank_apart():
    # apart by range, but 2 repetitions each: an A/A run does that 1 time in 3
    out = rank_entries([_e("a", [10, 11]), _e("b", [5, 6])], "rate")
    assert [(e.sut, e.rank) for e in out] == [("a", "=1"), ("b", "=1")]
    assert all("n=2" in e.note for e in out)
    out = rank_entries([_e("a", [10, 11, 12]), _e("b", [5, 6, 7])], "rate")
    assert [(e.sut, e.rank) for e in out] == [("a", "1"), ("b", "2")]
    assert not any("n=" in e.note for e in out)


def test_cost_ranks_lower_first_and_one_repetition_ranks_nothing():
    out = rank_entries([_e("x", [1], [300]), _e("y", [1], [100])], "cost")
    assert [e.sut for e in out] == ["y", "x"] and all(e.rank == "–" for e in out)
    assert all("n=1" in e.note for e in out)
    out = rank_entries([_e("x", [1, 1, 1], [300, 310, 320]), _e("y", [1, 1, 1], [100, 90, 95]),
                        _e("z", [1, 1, 1])], "cost")
    assert [(e.sut, e.rank) for e in out] == [("y", "1"), ("x", "2"), ("z", "–")]
    assert out[0].ratio_next.median == pytest.approx(320 / 95)  # x/y per rep: 3.0, 3.44, 3.37
    assert "no cost account" in out[2].note


def test_within_a_tie_the_paired_order_puts_first_who_won_most_repetitions():
    # the default campaign at 7f7fdfea, v2v memif 64 B: the host's slow phase
    # fell on turnoutd in repetitions 0 and 2 and on testpmd in 2; by medians
    # testpmd (93) before turnoutd (132), though turnoutd was the cheaper
    # in two repetitions of three (paired ratio 0.49)
    out = rank_entries([_e("testpmd", None, [91, 93, 307]), _e("turnoutd", None, [132, 41, 151])],
                       "cost")
    assert [(e.sut, e.rank) for e in out] == [("turnoutd", "=1"), ("testpmd", "=1")]
    # testpmd over turnoutd, repetition by repetition: 0.69, 2.27, 2.03
    assert out[0].ratio_next.median == pytest.approx(307 / 151)
    assert out[0].ratio_next.median > 1  # the next costs more, pair by pair
    # rates: the same rule, higher first
    out = rank_entries([_e("a", [10.0, 10.0, 10.0]), _e("b", [9.0, 30.0, 11.0])], "rate")
    assert [e.sut for e in out] == ["b", "a"]
    # ranges apart keep their order whatever the pairs; without common
    # repetitions the medians decide
    out = rank_entries([_e("x", None, [300, 310, 320]), _e("y", None, [100, 90, 95])], "cost")
    assert [(e.sut, e.rank) for e in out] == [("y", "1"), ("x", "2")]
    lone = _e("p", None, [50, 60, 70])
    lone.by_rep_cost = {5: 50, 6: 60, 7: 70}
    out = rank_entries([_e("q", None, [55, 56, 300]), lone], "cost")
    assert [e.sut for e in out] == ["q", "p"]  # medians 56 < 60: no common repetition


def test_suts_linked_by_overlapping_ranges_share_one_rank():
    # a apart from b, c overlapping both: nobody is ranked apart from c, so
    # a cannot be first alone (ranking only against the neighbour said so)
    out = rank_entries([_e("b", None, [13, 14, 13.5]), _e("c", None, [11.5, 30, 40]),
                        _e("a", None, [10, 11, 12])], "cost")
    assert [(e.sut, e.rank) for e in out] == [("a", "=1"), ("b", "=1"), ("c", "=1")]
    # apart from every other: alone; the others tied behind it
    out = rank_entries([_e("b", None, [13, 14, 13.5]), _e("c", None, [13.2, 30, 40]),
                        _e("a", None, [10, 11, 12])], "cost")
    assert [(e.sut, e.rank) for e in out] == [("a", "1"), ("b", "=2"), ("c", "=2")]


def _verdict_db(tmp_path, rows):
    """R+ results of campaign v: (sut, scenario, vport, rep, rate, cost, tester_bound)."""
    return rplus_db(tmp_path / "v.db", "v", rows)


def test_tester_bound_rows_are_ranked_by_cost_not_rate(tmp_path):
    rows = []
    for r, k in enumerate((0.98, 1.0, 1.02)):
        rows += [("wire", "p2p", "", r, 1.0e6 * k, None, 1),
                 # both reach the tester's ceiling; turnoutd spends less per frame
                 ("turnoutd", "p2p", "", r, 0.99e6 * k, 400 * k, 1),
                 ("ovs", "p2p", "", r, 1.0e6 * k, 900 * k, 1),
                 # the bridge sets its own, lower rate
                 ("bridge", "p2p", "", r, 0.4e6 * k, 3000 * k, 0)]
    with _verdict_db(tmp_path, rows) as db:
        data = load_campaign(db, "v")
        (v,) = verdict_rows(data)
        assert v.measure == "cost"
        assert [(e.sut, e.rank, e.limit) for e in v.entries] == [
            ("turnoutd", "1", "tester"), ("ovs", "2", "tester"), ("bridge", "3", "SUT")]
        assert v.entries[0].headroom.median == pytest.approx(0.99)
        assert "ceiling" in v.entries[0].note
        text = summary_text(data)
        assert "Verdict" in text and text.index("Verdict") > text.index("Throughput")


def test_sut_bound_rows_are_ranked_by_rate_per_port_type(tmp_path):
    rows = []
    for r, k in enumerate((0.98, 1.0, 1.02)):
        rows += [("wire", "v2v", "veth", r, 2.0e6 * k, None, 0),
                 ("bridge", "v2v", "veth", r, 0.4e6 * k, 3000, 0),
                 ("ovs", "v2v", "veth", r, 0.6e6 * k, 2000, 0),
                 ("turnoutd", "v2v", "memif", r, 11e6 * k, 100, 0)]
    with _verdict_db(tmp_path, rows) as db:
        data = load_campaign(db, "v")
        memif, veth = verdict_rows(data)
        assert [e.sut for e in memif.entries] == ["turnoutd [memif]"]
        assert "ceiling over memif is not measured" in memif.entries[0].note
        assert veth.measure == "rate"
        assert [(e.sut, e.rank) for e in veth.entries] == [("ovs [veth]", "1"),
                                                           ("bridge [veth]", "2")]
        assert veth.entries[0].ratio_next.median == pytest.approx(1.5)


def test_shared_tester_core_means_the_scheduler_set_the_rate(tmp_path):
    """NvsN with 2 pairs on a 1-core tester: two busy-polling processes share
    it, so no rate there is the switch's; the row is ranked by cost."""
    from turnout.report.verdict import tester_cores

    rows = []
    for r, k in enumerate((0.98, 1.0, 1.02)):
        rows += [("turnoutd", "nvsn", "memif", r, 3e6 * k, 150 * k, 0),
                 ("testpmd", "nvsn", "memif", r, 4e6 * k, 600 * k, 0)]
    with rplus_db(tmp_path / "s.db", "s", rows, spec={"campaign": {"tester_cpu": 0}},
                  pairs=2) as db:
        (v,) = verdict_rows(load_campaign(db, "s"))
        assert v.measure == "cost"
        assert [(e.sut, e.limit) for e in v.entries] == [("turnoutd [memif]", "scheduler"),
                                                         ("testpmd [memif]", "scheduler")]
        assert "share a core" in v.entries[0].note
    assert tester_cores({"campaign": {"tester_cpu": 0, "tester_rx_cpu": 2}}) == 2


def test_core_sharing_counts_busy_tester_processes_per_cpu():
    from turnout.measure.gen import Stream, VnfHandle, _Task, core_sharing

    def task(role: str, cpu: int | None) -> _Task:
        s = Stream(tx_port="a", rx_port="b", tx_ns="n", rx_ns="n", src_mac="m", dst_mac="m",
                   id=0)
        s.tx_cpu = s.rx_cpu = cpu
        return _Task(role=role, streams=[s], netns="n")

    class P:  # a process handle with no output
        stdout = None
        args = ("fwd",)

    assert core_sharing([task("txrx", 0)], []) == 1
    assert core_sharing([task("txrx", 0), task("txrx", 0)], []) == 2  # NvsN, 2 pairs
    vnf = VnfHandle(P(), "fwd", cpu=0)  # type: ignore[arg-type]
    assert core_sharing([task("txrx", 0)], [vnf]) == 2  # a loopback chain
    assert core_sharing([task("txrx", 0), task("txrx", 2)], []) == 1


def test_latency_at_fixed_rates_is_ranked_with_the_wire_as_floor(tmp_path):
    from turnout.report.verdict import latency_verdict_table
    from turnout.results import Trial

    db = ResultsDB(tmp_path / "l.db")
    cid = done_campaign(db, "l")
    p99 = {"wire": (50e3, 52e3, 55e3), "turnoutd": (90e3, 100e3, 95e3),
           "ovs": (300e3, 320e3, 310e3), "bridge": (92e3, 99e3, 120e3)}
    for sut, vals in p99.items():
        for rep, v in enumerate(vals):
            db.add_trial(Trial.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut, scenario="p2p",
                               method="fixed", repetition=rep, offered_total_pps=1e4,
                               sent=4000, received=4000, latency_p99_ns=v, status="ok"))
    with db:
        t = latency_verdict_table(load_campaign(db, "l"))
    assert [(r[3], r[4]) for r in t.rows] == [("=1", "turnoutd"), ("=1", "bridge"),
                                              ("3", "ovs")]
    floor = t.columns.index("wire floor µs")
    assert all(r[floor].startswith("52") for r in t.rows)  # the wire's median p99, µs
    assert t.rows[0][2] == "10 kpps"


def _add_rplus(db, cid, sut, rep, vp="memif", rate=None, status="ok", reason="", size=1518,
               scen="v2v"):
    """One R+ result (and, when it did not finish, the failed trial the
    runner records next to it: runner._skip)."""
    from turnout.results import Trial

    key = f"{sut}/{scen}/{size}/rplus/r{rep}"
    db.add_result(Result.of(campaign_id=cid, key=key, sut=sut, scenario=scen, frame_size_b=size,
                         virtual_port=vp, method="rplus", repetition=rep,
                         rate_total_pps=rate or 0.0, rx_total_pps=rate or 0.0, status=status,
                         reason=reason, busy_cycles_per_frame=(500.0 if rate else None),
                         tester_bound=0))
    if status != "ok":
        db.add_trial(Trial.of(campaign_id=cid, key=key, sut=sut, scenario=scen,
                           frame_size_b=size, virtual_port=vp, method="rplus", repetition=rep,
                           status=status, reason=reason))


def test_a_retried_repetition_is_one_row_and_unmeasured_cells_say_why(tmp_path):
    """testpmd's memif server refused a reconnect in repetition 1: the runner
    stored that attempt as failed, restarted testpmd and stored the retry
    as ok (runner.py, PeerAbsent). OVS-DPDK failed every repetition. The
    verdict has one row per SUT, none with n=0, and ranks only data."""
    db = ResultsDB(tmp_path / "d.db")
    cid = done_campaign(db, "d")
    refused = "PeerAbsent: memif server refused the connection"
    for rep, k in enumerate((0.98, 1.0, 1.02)):
        _add_rplus(db, cid, "turnoutd", rep, rate=2e6 * k)
        if rep == 1:
            _add_rplus(db, cid, "testpmd", rep, status="failed", reason=refused)
        _add_rplus(db, cid, "testpmd", rep, rate=1e6 * k)
        _add_rplus(db, cid, "ovs-dpdk", rep, status="failed",
                   reason="RuntimeError: mbuf too small for 1518 B")
    # the bridge's session could not be set up: no virtual port known yet
    for rep in range(3):
        _add_rplus(db, cid, "bridge", rep, vp="", status="skipped",
                   reason="bridge: no memif ports")
    with db:
        data = load_campaign(db, "d")
        rows = verdict_rows(data)
        labels = [e.sut for v in rows for e in v.entries]
        assert sorted(labels) == sorted(set(labels)), labels  # one row per SUT
        (v,) = [v for v in rows if "memif" in v.use_case]
        by = {e.sut: e for e in v.entries}
        assert by["testpmd [memif]"].rate is not None and by["testpmd [memif]"].rate.n == 3
        assert [e.sut for e in v.entries[:2]] == ["turnoutd [memif]", "testpmd [memif]"]
        assert [e.rank for e in v.entries[:2]] == ["1", "2"]
        dpdk = by["ovs-dpdk [memif]"]
        assert dpdk.rank == "–" and dpdk.limit == "failed" and dpdk.rate is None
        assert "mbuf too small" in dpdk.note
        from turnout.report.verdict import verdict_table

        t = verdict_table(data, rows)
        n = t.columns.index("n")
        for row in t.rows:
            assert row[n] != "0", row  # no "n=0" row
        # the detailed table holds only SUTs with a value; the others are
        # cells of the matrix that say what happened (the reason on hover)
        # and rows of "Not measured"
        assert sorted(r[4] for r in t.rows) == ["testpmd [memif]", "turnoutd [memif]"]
        from turnout.report.glance import glance_matrix

        m = glance_matrix(data, rows)
        (row,) = m.rows
        cell = dict(zip(m.columns, row.cells, strict=True))
        assert cell["ovs-dpdk"].cls == "failed"
        assert "failed: RuntimeError: mbuf too small for 1518 B" in cell["ovs-dpdk"].title
        assert cell["bridge"].cls == "skipped" and "no memif ports" in cell["bridge"].title
        assert cell["turnoutd"].cls == "best" and cell["turnoutd"].ratio == "best"
        assert cell["testpmd"].ratio == "0.5×"  # its R+ over the best's, paired
        assert row.sentence == ("v2v over memif, 1518 B: turnoutd first, testpmd 0.5× its "
                                "rate; bridge skipped, ovs-dpdk failed.")
        text = summary_text(data)
        assert "RuntimeError: mbuf too small" in text and "=1" not in row.cells[0].rank
        # the retried attempt is listed as such, not as a missing value
        assert "Not measured: 12 (and 2 failed attempts retried with success" in text
        assert "failed, retried: ok  PeerAbsent" in text
        from turnout.report.queries import not_measured_section

        (nm,) = [t for t in not_measured_section(data).tables if t.key == "not-measured-table"]
        flagged = [f for r, f in zip(nm.rows, nm.flags, strict=True) if "refused" in r[7]]
        assert flagged and all(f == "retried: ok" for f in flagged)


def test_a_partly_failed_sut_keeps_its_data_and_says_what_failed(tmp_path):
    db = ResultsDB(tmp_path / "p.db")
    cid = done_campaign(db, "p")
    for rep, k in enumerate((0.98, 1.0, 1.02)):
        _add_rplus(db, cid, "turnoutd", rep, rate=2e6 * k)
        if rep == 2:
            _add_rplus(db, cid, "testpmd", rep, status="failed", reason="SutError: gone")
        else:
            _add_rplus(db, cid, "testpmd", rep, rate=1e6 * k)
    with db:
        (v,) = verdict_rows(load_campaign(db, "p"))
    assert [e.sut for e in v.entries] == ["turnoutd [memif]", "testpmd [memif]"]
    tp = v.entries[1]
    assert tp.rate is not None and tp.rate.n == 2
    assert "1 of 3 repetitions failed: SutError: gone" in tp.note


# ------------------------------------------------------------ kernel time
def _stat(cpu1: tuple[int, ...]) -> str:
    """/proc/stat with cpu1's user nice system idle iowait irq softirq steal."""
    return ("cpu  0 0 0 0 0 0 0 0 0 0\n"
            "cpu0 500 0 100 900 0 0 0 0 0 0\n"
            "cpu1 " + " ".join(str(x) for x in cpu1) + " 0 0\n")


def test_kernel_time_counts_interrupt_work_that_woke_an_idle_cpu():
    """NO_HZ idle, tick accounting: the bridge forwards in softirqs that
    RPS IPIs raise on an idle CPU; no tick samples them, so irq and softirq
    stay 0 while idle (kept in ns) grows by less than the wall clock. The
    missing time is the kernel's work: 0.2 s of 1 s here."""
    from turnout.measure.cost import kernel_ticks
    from turnout.measure.kernel import kernel_busy_s

    before = _stat((1000, 0, 200, 5000, 10, 0, 0, 0))
    after = _stat((1000, 0, 200, 5080, 10, 0, 0, 0))  # 0.8 s idle in 1 s, no tick
    assert kernel_ticks([1], after) - kernel_ticks([1], before) == 0  # the old account
    busy = kernel_busy_s([1], after, now=101.0) - kernel_busy_s([1], before, now=100.0)
    assert busy == pytest.approx(0.2)
    # a process on that CPU (0.3 s user + system) is not the kernel's work,
    # a sampled softirq tick (0.05 s) is
    after2 = _stat((1020, 0, 210, 5050, 10, 0, 5, 0))
    busy = kernel_busy_s([1], after2, now=101.0) - kernel_busy_s([1], before, now=100.0)
    assert busy == pytest.approx(1.0 - 0.5 - 0.3)
    assert kernel_busy_s([7], before, now=1.0) == 0.0  # no such CPU: nothing


def test_steal_ticks_are_the_eighth_column_of_the_suts_cpus():
    """Steal time: what the hypervisor ran elsewhere while these CPUs had
    work (/proc/stat), summed over the CPUs asked for, 0 for a CPU the
    host does not have."""
    from turnout.hosts.procfs import cpu_steal_ticks

    stat = ("cpu  10 0 10 100 0 0 0 9 0 0\n"
            "cpu0 5 0 5 50 0 0 0 2 0 0\n"
            "cpu1 5 0 5 50 0 0 0 7 0 0\n")
    assert cpu_steal_ticks([1], stat) == 7
    assert cpu_steal_ticks([0, 1], stat) == 9
    assert cpu_steal_ticks([5], stat) == 0
    assert cpu_steal_ticks([1], "cpu1 5 0 5 50\n") == 0  # a kernel without the column
    assert cpu_steal_ticks([0]) >= 0  # this host's


def test_kernel_share_pairs_the_suts_frames_with_its_cpus_kernel_time(monkeypatch):
    from turnout.measure import kernel
    from turnout.measure.kernel import KernelShare, kernel_share

    frames = iter(range(0, 10**9, 10_000))
    busy = iter([0.0, 0.1, 0.09, 0.3, 0.5])  # the third reading is a little behind

    monkeypatch.setattr(kernel, "kernel_busy_s", lambda cpus, stat=None, now=None: next(busy))
    ks = KernelShare(lambda: CostSample(0.0, 0.0, next(frames)), [1])
    for _ in range(5):
        assert ks() is not None
    assert [s[1] for s in ks.samples] == [0.0, 0.1, 0.1, 0.3, 0.5]  # never backwards
    t = [s[0] for s in ks.samples]
    share, busy_s, why = kernel_share(ks.samples, t[0], t[-1], hz=1e9)
    assert why == "" and busy_s == pytest.approx(0.5)
    assert share == pytest.approx(0.5 * 1e9 / 40_000)
    share, busy_s, why = kernel_share(ks.samples, t[1], t[2], hz=1e9)  # 0 s in 10k frames
    assert share is None and "below its resolution" in why and busy_s == 0.0
    # a SUT without an own account has no frames: no kernel share either
    assert KernelShare(lambda: None, [1])() is None


def test_apply_kernel_share_stores_a_figure_or_why():
    from turnout.measure.gen import apply_kernel_share

    c = TrialCounts(offered_total_pps=0, duration_s=1.0, sent=1, received=1, lost=0)
    c.extra["windows_ns"] = [[int(10e9), int(11e9)]]
    samples = [(9.9 + i * 0.05, 0.02 * i, 20_000 * i) for i in range(26)]
    apply_kernel_share(c, samples, [1, 2])
    assert c.extra["kernel_cpus"] == "1,2" and c.extra["kernel_cycles_per_frame"] > 0
    c2 = TrialCounts(offered_total_pps=0, duration_s=1.0, sent=1, received=1, lost=0)
    apply_kernel_share(c2, samples, [1])
    assert "no traffic window" in c2.extra["kernel_why"]


def test_the_kernel_share_is_shown_next_to_the_cost_never_in_it(tmp_path):
    from turnout.report.verdict import verdict_table

    db = ResultsDB(tmp_path / "k.db")
    cid = done_campaign(db, "k")
    for rep, k in enumerate((0.98, 1.0, 1.02)):
        for sut, rate, own, kern in (("turnoutd", 1.0e6, 400, 300), ("bridge", 0.4e6, 3000,
                                                                     3000)):
            db.add_result(Result.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut, scenario="p2p",
                                 method="rplus", repetition=rep, rate_total_pps=rate * k,
                                 rx_total_pps=rate * k, status="ok", tester_bound=0,
                                 busy_cycles_per_frame=own * k,
                                 extra={"kernel_cycles_per_frame": kern * k}))
    with db:
        data = load_campaign(db, "k")
        (v,) = verdict_rows(data)
        t = verdict_table(data, [v])
    by = {e.sut: e for e in v.entries}
    assert by["turnoutd"].cost.median == pytest.approx(400)  # not 400 + 300
    assert by["turnoutd"].kernel.median == pytest.approx(300)
    col = t.columns.index("kernel share cyc/frame")
    assert [r[col] for r in t.rows] == ["300 [294–306]", "3000 [2940–3060]"]


def test_the_user_space_part_is_the_capacity_less_the_kicks(tmp_path):
    """On a veth path most of a userspace switch's capacity is the kernel's
    AF_XDP copy path inside its kicks (sendto): turnoutd times them, the
    cost sampler keeps them per frame, and the verdict shows what is left
    of the capacity; SUTs that do not account their kicks show none."""
    from turnout.measure.cost import CostSample, cost_in_window
    from turnout.report.cpuload import user_space_part
    from turnout.report.verdict import verdict_table

    # cumulative (cycles, kicks, frames) as turnoutd's stats give them
    samples = [CostSample(0.1 * i, 4000.0 * 10_000 * i, 10_000 * i, kicks=3700.0 * 10_000 * i)
               for i in range(5)]
    cost, why = cost_in_window(samples, 0.05, 0.45, "turnoutd")
    assert why == "" and cost is not None
    assert (cost.cycles_per_frame, cost.kick_cycles_per_frame) == (4000.0, 3700.0)
    plain = [CostSample(s.t, s.cycles, s.frames) for s in samples]  # no kick account
    assert cost_in_window(plain, 0.05, 0.45, "testpmd")[0].kick_cycles_per_frame is None
    assert user_space_part(4000.0, {"kick_cycles_per_frame": 3700.0}) == 300.0
    assert user_space_part(4000.0, {}) is None and user_space_part(None, {"x": 1}) is None
    assert user_space_part(100.0, {"kick_cycles_per_frame": 120.0}) == 0.0  # never below 0

    db = ResultsDB(tmp_path / "u.db")
    cid = done_campaign(db, "u")
    for rep, k in enumerate((0.98, 1.0, 1.02)):
        for sut, extra in (("turnoutd", {"kick_cycles_per_frame": 3700.0 * k}),
                           ("testpmd", {})):
            db.add_result(Result.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut,
                                    scenario="p2p", method="rplus", repetition=rep,
                                    rate_total_pps=1e6, rx_total_pps=1e6, status="ok",
                                    tester_bound=0, busy_cycles_per_frame=4000.0 * k,
                                    extra=extra))
    with db:
        data = load_campaign(db, "u")
        (v,) = verdict_rows(data)
        tbl = verdict_table(data, [v])
    by = {e.sut: e for e in v.entries}
    assert by["turnoutd"].user.median == pytest.approx(300.0)
    assert by["testpmd"].user is None
    col = tbl.columns.index("of it in user space cyc/frame")
    assert {r[4]: r[col] for r in tbl.rows} == {"turnoutd": "300 [294–306]", "testpmd": "–"}


def test_two_configurations_of_one_sut_are_labelled_apart(tmp_path):
    """testpmd could not reserve its hugepages in one repetition and ran on
    4 KiB pages (its config's variant "no-huge"): that repetition is another
    SUT's, not a third value of the same spread."""
    from turnout.results import Sut
    from turnout.sut.testpmd import Testpmd

    db = ResultsDB(tmp_path / "c.db")
    cid = done_campaign(db, "c")
    huge = db.add_sut(Sut(name="testpmd", version="dpdk 22", config={"memory": "512 pages"}))
    small = db.add_sut(Sut(name="testpmd", version="dpdk 22",
                           config={"memory": "--no-huge: hugepages not available",
                                   "variant": "no-huge"}))
    for rep, sid, rate in ((0, huge, 1.0e6), (1, small, 0.5e6), (2, huge, 1.02e6)):
        db.add_result(Result.of(campaign_id=cid, sut_id=sid, key=f"t{rep}", sut="testpmd",
                             scenario="v2v", virtual_port="memif", method="rplus",
                             repetition=rep, rate_total_pps=rate, rx_total_pps=rate,
                             status="ok", tester_bound=0, busy_cycles_per_frame=500.0))
    with db:
        (v,) = verdict_rows(load_campaign(db, "c"))
    assert [(e.sut, e.rate.n if e.rate else 0) for e in v.entries] == [
        ("testpmd [memif]", 2), ("testpmd (no-huge) [memif]", 1)]
    # the adapter names the fallback, not a configuration the campaign chose
    t = Testpmd()
    t.memory = "--no-huge: hugepages not available (no memory)"
    assert t.variant() == "no-huge"
    t.memory = "--no-huge (4 KiB pages)"  # hugepages = 0, as asked
    assert t.variant() == ""


def test_latency_of_a_sut_that_waited_for_a_cpu_is_the_schedulers(tmp_path):
    # a repetition whose SUT threads waited ≥ 100 µs on average on the run
    # queue each time they were to run: the scheduler, not the SUT, set that
    # p99 (docs/bench.md, "Latency at low rates")
    from turnout.measure.cpu import sched_wait
    from turnout.report.verdict import latency_verdict_table
    from turnout.results import Trial

    db = ResultsDB(tmp_path / "l.db")
    cid = done_campaign(db, "l")
    # (wait ns, slices) readings before and after each repetition
    waits = {"turnoutd": (((0, 0), (40_000_000, 4000)), ((0, 0), (1_200_000_000, 4000))),
             "ovs": (((0, 0), (3_000_000, 30)), ((5, 1), (99_000_005, 1001))),
             "testpmd": (((0, 0), (990_000, 10)), ((0, 0), (0, 0)))}
    for sut, reps in waits.items():
        for rep, (a, b) in enumerate(reps):
            db.add_trial(Trial.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut, scenario="p2p",
                               method="fixed", repetition=rep, offered_total_pps=1e4,
                               sent=4000, received=4000, latency_p99_ns=1e5 * (rep + 1),
                               status="ok", extra={"sut_sched": sched_wait(a, b, 1.0)}))
    with db:
        t = latency_verdict_table(load_campaign(db, "l"))
    lim = t.columns.index("limited by")
    limits = {r[4]: r[lim] for r in t.rows}
    # turnoutd: 10 µs then 300 µs per run; ovs: 100 µs (≥ the flag), then 99 µs
    assert limits == {"turnoutd": "scheduler (SUT waited 300 µs per run for a CPU)",
                      "ovs": "scheduler (SUT waited 100 µs per run for a CPU)",
                      "testpmd": "SUT"}  # 99 µs, then no run at all
    assert sched_wait((0, 0), (0, 0), 1.0)["mean_wait_us"] == 0.0


def test_a_traced_sut_is_judged_by_the_threads_that_took_its_cpu_not_its_own_wake_ups(tmp_path):
    """Where the trial traced the SUT's switches (extra.sut_cpu_trace), the
    scheduler flag rests on the time other threads held its CPU per
    preemption: a worker whose schedstat wait was its own wake-ups after
    sleeps (4 ms in 40 runs: 100 µs "per run") is the SUT's; one a kworker
    held for 4.8 ms is the scheduler's. The trials table shows both the
    SUT's and the tester's account, and the tester's CPUs' steal."""
    from turnout.measure.cpu import sched_wait
    from turnout.report.verdict import latency_trials_table, latency_verdict_table
    from turnout.results import Trial

    db = ResultsDB(tmp_path / "l.db")
    cid = done_campaign(db, "l")
    own = {"preempted": {"n": 20, "ms": 0.5, "max_us": 31.0, "by": [["memfd:sealed-91", 20, 0.5]]},
           "woken": {"n": 6, "ms": 3.5, "max_us": 900.0}, "slept": {"n": 6, "ms": 9.0},
           "threads": 1, "span_s": 1.0}
    held = {"preempted": {"n": 12, "ms": 4.9, "max_us": 4817.0,
                          "by": [["kworker/1:0", 2, 4.828], ["ksoftirqd/1", 10, 0.1]]},
            "woken": {"n": 0, "ms": 0.0, "max_us": 0.0}, "slept": {"n": 0, "ms": 0.0},
            "threads": 1, "span_s": 1.0}
    tester = {"preempted": {"n": 281, "ms": 19.2, "max_us": 1303.0,
                            "by": [["turnout-sample", 47, 6.5]]},
              "woken": {"n": 0, "ms": 0.0, "max_us": 0.0}, "slept": {"n": 0, "ms": 0.0},
              "threads": 1, "span_s": 1.0}
    base = {"sut_cpu_others": {"ms": 0.5, "threads": []},
            "sut_cpu_steal": {"ms": 0.0, "cpus": [1], "resolution_ms": 10.0},
            "tester_cpu_steal": {"ms": 10.0, "cpus": [0], "resolution_ms": 10.0}}
    for sut, tr in (("turnoutd", own), ("testpmd", held)):
        db.add_trial(Trial.of(campaign_id=cid, key=sut, sut=sut, scenario="p2p",
                           method="latency", load_fraction=0.5, repetition=0,
                           offered_total_pps=4e5, sent=4000, received=4000,
                           latency_p99_ns=3e5, status="ok",
                           extra=base | {"sut_sched": sched_wait((0, 0), (4_000_000, 40), 1.0),
                                         "sut_cpu_trace": tr, "tester_cpu_trace": tester}))
        db.add_trial(Trial.of(campaign_id=cid, key=sut + "f", sut=sut, scenario="p2p",
                           method="fixed", repetition=0, offered_total_pps=1e4, sent=4000,
                           received=4000, latency_p99_ns=1e5, status="ok",
                           extra=base | {"sut_sched": sched_wait((0, 0), (4_000_000, 40), 1.0),
                                         "sut_cpu_trace": tr}))
    # the same trials without a trace: schedstat's 100 µs per run flags both
    db.add_trial(Trial.of(campaign_id=cid, key="ovsf", sut="ovs", scenario="p2p",
                       method="fixed", repetition=0, offered_total_pps=1e4, sent=4000,
                       received=4000, latency_p99_ns=1e5, status="ok",
                       extra=base | {"sut_sched": sched_wait((0, 0), (4_000_000, 40), 1.0),
                                     "sut_cpu_trace": {"why": "tracefs: Permission denied"}}))
    with db:
        data = load_campaign(db, "l")
        t = latency_verdict_table(data)
        trials = latency_trials_table(data)
    lim = t.columns.index("limited by")
    assert {r[4]: r[lim] for r in t.rows} == {
        "turnoutd": "SUT", "testpmd": "scheduler (SUT waited 408 µs per run for a CPU)",
        "ovs": "scheduler (SUT waited 100 µs per run for a CPU)"}
    col = {c: i for i, c in enumerate(trials.columns)}
    rows = {(r[0], r[col["rate"]]): r for r in trials.rows}
    r = rows[("turnoutd", "0.5×R+ (400 kpps)")]
    assert r[col["SUT thread lost its CPU ms/times"]] == (
        "0.5/20 (31 µs; memfd:sealed-91 0.5), slept 6× (woken in ≤ 900 µs)")
    assert r[col["tester thread lost its CPU ms/times"]] == "19.2/281 (1303 µs; turnout-sample 6.5)"
    assert r[col["host steal ms"]] == "0 (tester 10)"
    r = rows[("testpmd", "10 kpps")]
    assert r[col["SUT thread lost its CPU ms/times"]] == "4.9/12 (4817 µs; kworker/1:0 4.8)"
    assert r[col["tester thread lost its CPU ms/times"]] == "–"
    assert rows[("ovs", "10 kpps")][col["SUT thread lost its CPU ms/times"]] == (
        "tracefs: Permission denied")


def test_a_latency_row_whose_vcpu_the_host_took_for_milliseconds_says_so(tmp_path):
    """A repetition in which the hypervisor took the SUT's virtual CPU for
    2.5 ms at once (extra.sut_cpu_trace.stolen) flags its row "host", with
    how many repetitions and the longest; 0.3 ms at once does not. The
    trials table shows the SUT's and the tester's steal as traced."""
    from turnout.report.verdict import latency_trials_table, latency_verdict_table
    from turnout.results import Trial

    db = ResultsDB(tmp_path / "h.db")
    cid = done_campaign(db, "h")

    def traced(stolen_ms: float, longest_us: float) -> dict:
        return {"preempted": {"n": 0, "ms": 0.0, "max_us": 0.0, "by": []},
                "woken": {"n": 0, "ms": 0.0, "max_us": 0.0}, "slept": {"n": 0, "ms": 0.0},
                "threads": 1, "span_s": 0.4,
                "stolen": {"ms": stolen_ms, "n": 1 if longest_us > 100 else 0,
                           "max_us": longest_us}}
    for sut, reps in (("turnoutd", [(2.6, 2500.0), (0.2, 90.0)]),
                      ("testpmd", [(0.4, 300.0), (0.0, 0.0)])):
        for rep, (ms, us) in enumerate(reps):
            db.add_trial(Trial.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut, scenario="v2v",
                               method="fixed", repetition=rep, offered_total_pps=1e4,
                               sent=4000, received=4000, latency_p99_ns=(4e5, 9e3)[rep],
                               status="ok",
                               extra={"sut_cpu_others": {"ms": 0.1, "threads": []},
                                      "sut_cpu_trace": traced(ms, us),
                                      "tester_cpu_trace": traced(0.4, 300.0)}))
    with db:
        data = load_campaign(db, "h")
        t = latency_verdict_table(data)
        trials = latency_trials_table(data)
    lim = t.columns.index("limited by")
    assert {r[4]: r[lim] for r in t.rows} == {
        "turnoutd": "host (took the SUT's vCPU ≥ 1 ms at once in 1/2, longest 2.5 ms)",
        "testpmd": "SUT"}
    col = {c: i for i, c in enumerate(trials.columns)}
    rows = {(r[0], r[col["rep"]]): r for r in trials.rows}
    assert rows[("turnoutd", "0")][col["host steal ms"]] == (
        "2.6, longest 2.5 (tester 0.4, longest 0.3)")
    assert rows[("testpmd", "1")][col["host steal ms"]] == (
        "0.0, longest 0.0 (tester 0.4, longest 0.3)")


def test_latency_tables_show_isolation_and_other_threads_on_the_sut_cpu(tmp_path):
    from turnout.report.verdict import latency_trials_table, latency_verdict_table
    from turnout.results import Trial

    db = ResultsDB(tmp_path / "l.db")
    cid = done_campaign(db, "l")
    iso = {"sut_cpus": "1", "to_cpus": "0", "moved": ["rcu_preempt"], "not_moved": []}
    others = [{"ms": 12.5, "kernel_ms": 12.5, "kernel_threads": [["rcu_preempt", 8.0, 1]],
               "threads": [["rcu_preempt", 8.0, 1], ["ksoftirqd/1", 4.5, 9]],
               "max_interval": {"comm": "rcu_preempt", "ms": 8.0, "runs": 1}},
              {"ms": 0.5, "threads": [["ksoftirqd/1", 0.5, 3]],
               "max_interval": {"comm": "ksoftirqd/1", "ms": 0.5, "runs": 3}},
              {"why": "1 samples inside the traffic window"}]
    for rep, ot in enumerate(others):
        extra: dict = {"sut_cpu_others": ot}
        if rep:
            extra["isolation"] = iso
        if rep == 1:
            extra["sut_cpu_steal"] = {"ms": 30.0, "span_s": 1.2, "cpus": [1],
                                      "resolution_ms": 10.0}
        db.add_trial(Trial.of(campaign_id=cid, key=f"t{rep}", sut="testpmd", scenario="p2p",
                           method="fixed", repetition=rep, offered_total_pps=1e4, sent=4000,
                           received=4000, latency_p99_ns=(9e6, 95e3, 90e3)[rep],
                           latency_max_ns=11e6, status="ok", extra=extra))
    with db:
        data = load_campaign(db, "l")
        t = latency_verdict_table(data)
        trials = latency_trials_table(data)
    col = {c: i for i, c in enumerate(t.columns)}
    assert t.rows[0][col["SUT CPU isolated"]] == "off/on"  # one repetition without isolation
    # median, min, max of 12.5 and 0.5 ms
    assert t.rows[0][col["other threads on SUT CPU ms [min–max]"]] == "6 [0.5–12]"
    rows = {r[4]: r for r in trials.rows}
    assert rows["0"][5] == "9000" and rows["0"][7] == "off"
    assert rows["0"][8] == "12.5 (kernel 12.5: rcu_preempt 8.0)"
    assert rows["0"][9] == "rcu_preempt 8.0/1, ksoftirqd/1 4.5/9"
    assert rows["0"][10] == "rcu_preempt 8.0/1"
    assert rows["1"][7] == "on" and rows["1"][8] == "0.5"
    assert rows["2"][8] == "1 samples inside the traffic window"
    # the host's steal of the SUT's CPUs, where the trial measured it
    assert trials.columns[11] == "host steal ms"
    assert [rows[r][11] for r in "012"] == ["–", "30", "–"]


# ------------------------------------------------- cells of another port


def _cell(db, cid, sut, rep, vp, named, rate=None, status="ok", reason=""):
    """An R+ repetition of a v2v cell as the runner stores it: the work key
    names the port only when the point does (the vhost-user cell next to
    the campaign's memif ones: WorkItem.key)."""
    from turnout.results import Trial

    port = f"|{vp}" if named else ""
    key = f"{sut}|v2v|uni|64|f1|b32|v0|p2|s1{port}|rplus|0|r{rep}"
    db.add_result(Result.of(campaign_id=cid, key=key, sut=sut, scenario="v2v", frame_size_b=64,
                         virtual_port=vp, method="rplus", repetition=rep,
                         rate_total_pps=rate or 0.0, rx_total_pps=rate or 0.0, status=status,
                         reason=reason, busy_cycles_per_frame=(500.0 if rate else None),
                         tester_bound=0))
    if status != "ok":
        db.add_trial(Trial.of(campaign_id=cid, key=key, sut=sut, scenario="v2v",
                           frame_size_b=64, virtual_port=vp, method="rplus", repetition=rep,
                           status=status, reason=reason))


def test_a_skipped_cell_of_another_port_does_not_count_against_this_row(tmp_path):
    """This morning's default campaign (results/turnout.db): OVS-DPDK ran the
    v2v vhost-user cell and its memif cell was cut, stored with no port
    (runs before the runner recorded the cell's port). The OVS-DPDK
    vhost-user row said "3 of 6 repetitions skipped": the memif cell's skips
    counted against it. They are not that row's: they get an entry of their
    own, and the vhost-user row has its 3 of 3."""
    db = ResultsDB(tmp_path / "a.db")
    cid = done_campaign(db, "a")
    why = ("the default campaign runs OVS-DPDK only in v2v over vhost-user: its veth cells "
           "use DPDK's net_af_packet, its slow path; campaigns/full.toml runs them")
    for rep, k in enumerate((0.98, 1.0, 1.02)):
        _cell(db, cid, "turnoutd", rep, "memif", False, rate=6e6 * k)
        _cell(db, cid, "turnoutd", rep, "vhost-user", True, rate=5e6 * k)
        _cell(db, cid, "ovs-dpdk", rep, "vhost-user", True, rate=4e6 * k)
        _cell(db, cid, "ovs-dpdk", rep, "", False, status="skipped", reason=why)
    with db:
        rows = verdict_rows(load_campaign(db, "a"))
    (vh,) = [v for v in rows if v.use_case.endswith("[vhost-user]")]
    dpdk = {e.sut: e for e in vh.entries}["ovs-dpdk [vhost-user]"]
    assert dpdk.rate is not None and dpdk.rate.n == 3
    assert "skipped" not in dpdk.note, dpdk.note
    # the cut cell is still in the verdict, on its own, with its reason
    cut = [e for v in rows for e in v.entries if e.sut == "ovs-dpdk"]
    assert len(cut) == 1 and cut[0].limit == "skipped" and "net_af_packet" in cut[0].note
    assert all("skipped" not in e.note for v in rows for e in v.entries if e.rate is not None)


def test_a_cut_memif_cell_is_stored_as_memif_and_says_the_sut_has_no_memif(tmp_path,
                                                                           monkeypatch):
    """A campaign that runs OVS-DPDK only in v2v/vhost-user: its memif cell
    is cut before any set-up; the runner stores it under the memif port
    (RealBench.session names the cell's port) with the reason OVS-DPDK has
    no memif ports, not the campaign's reason about its veth cells; the
    verdict files it in the memif row as skipped, and the vhost-user row of
    OVS-DPDK has none of it."""
    from turnout import bench as bench_mod
    from turnout.bench import RealBench
    from turnout.campaign import parse, run_campaign
    from turnout.results import Host

    monkeypatch.setattr(bench_mod, "is_root", lambda: True)

    class Cut(RealBench):
        def host(self) -> Host:
            return Host(hostname="t")

    spec = parse({
        "campaign": {"name": "cut", "methods": ["rplus"], "repetitions": 2},
        "matrix": {"suts": ["ovs-dpdk"], "scenarios": ["v2v", "p2p"], "frame_sizes_b": [64]},
        "sut": {"ovs-dpdk": {"scenarios": ["v2v/vhost-user"], "scenarios_reason":
                             "its veth cells use DPDK's net_af_packet, its slow path"}},
    })
    db = ResultsDB(tmp_path / "c.db")
    with db:
        run_campaign(spec, db, Cut(["turnout-gen"]))
        data = load_campaign(db, "cut")
        by = {t.scenario: t for t in data.trials}
        assert by["v2v"].status == "skipped" and by["v2v"].point.virtual_port == "memif"
        assert by["v2v"].reason.startswith("ovs-dpdk has no memif ports")
        assert "net_af_packet" not in by["v2v"].reason
        # p2p has no virtual port: the campaign's own reason
        assert by["p2p"].point.virtual_port == "" and "net_af_packet" in by["p2p"].reason
        # with turnoutd's memif data next to it: the memif row
        for rep in range(2):
            _cell(db, data.campaign.id, "turnoutd", rep, "memif", False, rate=6e6)
        rows = verdict_rows(load_campaign(db, "cut"))
    (mem,) = [v for v in rows if v.scenario == "v2v"]
    assert mem.use_case.endswith("[memif]")
    (e,) = [e for e in mem.entries if e.sut.startswith("ovs-dpdk")]
    assert e.sut == "ovs-dpdk [memif]" and e.limit == "skipped"
    assert "no memif ports" in e.note


def test_rows_with_a_qemu_guest_as_vnf_are_labelled(tmp_path):
    """``[campaign] vnf = "qemu"``: the loopback cells' VNFs were QEMU guests
    (the session's SUT config has ``vnf``, bench.py); every table names
    those rows "(QEMU VNF kvm)" (or tcg), the same SUT's other rows stay
    unlabelled, and the summary and verdict show which is which."""
    from turnout.results import Sut

    db = ResultsDB(tmp_path / "q.db")
    cid = done_campaign(db, "q")
    plain = db.add_sut(Sut(name="turnoutd", version="1", config={"logic": "patch"}))
    guest = db.add_sut(Sut(name="turnoutd", version="1", config={
        "logic": "patch", "vnf": {"kind": "qemu", "accel": "kvm", "why": "", "guests": 1}}))
    tcg = db.add_sut(Sut(name="ovs-dpdk", version="1", config={
        "vnf": {"kind": "qemu", "accel": "tcg", "why": "no KVM", "guests": 1}}))
    for rep in range(3):
        for sid, sut, scen, vnfs, vp in ((plain, "turnoutd", "p2p", 0, ""),
                                         (guest, "turnoutd", "loopback", 1, "vhost-user"),
                                         (tcg, "ovs-dpdk", "loopback", 1, "vhost-user")):
            db.add_result(Result.of(campaign_id=cid, sut_id=sid, key=f"{sut}{scen}{rep}", sut=sut,
                                 scenario=scen, vnfs=vnfs, virtual_port=vp, method="rplus",
                                 repetition=rep, rate_total_pps=1e6, rx_total_pps=1e6,
                                 status="ok", tester_bound=0, busy_cycles_per_frame=500.0))
    with db:
        data = load_campaign(db, "q")
        rows = verdict_rows(data)
        text = summary_text(data)
    labels = {v.scenario: sorted(e.sut for e in v.entries) for v in rows}
    assert labels == {"p2p": ["turnoutd"],
                      "loopback": ["ovs-dpdk (QEMU VNF tcg) [vhost-user]",
                                   "turnoutd (QEMU VNF kvm) [vhost-user]"]}
    assert "turnoutd (QEMU VNF kvm) [vhost-user]" in text
    assert "ovs-dpdk (QEMU VNF tcg) [vhost-user]" in text


def test_a_setting_left_out_of_the_ranks_is_listed_after_them():
    best = _e("turnoutd-1000", [1, 1, 1], [50, 52, 51])
    best.ranked = False
    out = rank_entries([_e("x", [1, 1, 1], [300, 310, 320]), best,
                        _e("y", [1, 1, 1], [100, 90, 95])], "cost")
    assert [(e.sut, e.rank) for e in out] == [("y", "1"), ("x", "2"),
                                              ("turnoutd-1000", "not ranked")]
    assert out[0].ratio_next.median == pytest.approx(320 / 95)  # next ranked, not the setting
    assert out[2].ratio_next is None and "ranked = false" in out[2].note


def test_an_unranked_sut_is_drawn_but_not_judged(tmp_path):
    from turnout.report.usecases import cpu_latency_section
    from turnout.report.verdict import latency_verdict_table, verdict_section
    from turnout.results import Trial

    spec = {"sut": {"turnoutd": {"logic": "patch"},
                    "turnoutd-1000": {"base": "turnoutd", "latency_budget_us": 1000,
                                      "ranked": False}}}
    rows = [(s, "v2v", "memif", rep, rate, cost, 0)
            for rep in range(3)
            for s, rate, cost in (("turnoutd", 5e6, 300.0 + rep), ("testpmd", 4e6, 400.0 + rep),
                                  ("turnoutd-1000", 6e6, 100.0 + rep))]
    db = rplus_db(tmp_path / "u.db", "u", rows, spec=spec)
    cid = db.campaigns()[-1].id
    for sut, p99 in (("turnoutd", 60e3), ("testpmd", 20e3), ("turnoutd-1000", 900e3)):
        for rep in range(3):
            db.add_trial(Trial.of(campaign_id=cid, key=f"{sut}{rep}", sut=sut, scenario="v2v",
                               virtual_port="memif", method="fixed", repetition=rep,
                               offered_total_pps=1e4, sent=4000, received=4000,
                               latency_p99_ns=p99 + rep, status="ok"))
    with db:
        data = load_campaign(db, "u")
        assert data.unranked_suts == {"turnoutd-1000"}
        [v] = verdict_rows(data)
        assert [e.sut for e in v.entries] == ["turnoutd [memif]", "testpmd [memif]"]
        assert v.entries[0].rank == "1"
        lt = latency_verdict_table(data)
        assert [(r[3], r[4]) for r in lt.rows] == [
            ("1", "testpmd [memif]"), ("2", "turnoutd [memif]"),
            ("not ranked", "turnoutd-1000 [memif]")]
        assert "turnoutd-1000" in verdict_section(data).intro
        drawn = {r[2] for r in cpu_latency_section(data).tables[0].rows}
        assert "turnoutd-1000 [memif]" in drawn


def test_a_variant_takes_its_bases_ranked_flag(tmp_path):
    spec = {"sut": {"testpmd": {"ranked": False}, "testpmd-b": {"base": "testpmd"},
                    "turnoutd-b": {"base": "turnoutd", "ranked": True}}}
    with rplus_db(tmp_path / "b.db", "b", [], spec=spec) as db:
        data = load_campaign(db, "b")
        assert data.unranked_suts == {"testpmd", "testpmd-b"}
        assert not data.ranked("testpmd (no-huge)") and data.ranked("turnoutd-b")


def test_the_ranked_flag_is_read_from_the_options_stored_with_each_sut(tmp_path):
    # the options the runner stored (a variant's merged with its base's)
    # decide, not the campaign's tables: here the tables say nothing
    from turnout.results import Sut, Trial

    spec = {"sut": {"turnoutd": {"logic": "patch"}, "turnoutd-1000": {"base": "turnoutd"}}}
    with rplus_db(tmp_path / "s.db", "s", [], spec=spec) as db:
        cid = db.campaigns()[-1].id
        for name, ranked in (("turnoutd", True), ("turnoutd-1000", False)):
            sid = db.add_sut(Sut(name=name, version="1",
                                 config={"options": {"logic": "patch", "ranked": ranked}}))
            db.add_trial(Trial.of(campaign_id=cid, key=name, sut=name, sut_id=sid,
                                  scenario="v2v", virtual_port="memif", method="fixed",
                                  repetition=0, offered_total_pps=1e4, sent=10, received=10,
                                  status="ok"))
        data = load_campaign(db, "s")
        assert data.unranked_suts == {"turnoutd-1000"}
        assert data.ranked("turnoutd") and not data.ranked("turnoutd-1000 (b)")
