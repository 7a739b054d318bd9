"""Rule-update time (measure/update.py) and the offered-load sweep: the
arithmetic on synthetic counter samples, the trial loop against a model
switch, the campaign keys, the runner storing both, and the report."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Iterator

import pytest

from turnout.campaign import CampaignError, Session, parse, run_campaign
from turnout.campaign.spec import SWEEP_FRACTIONS
from turnout.measure.counts import TrialCounts
from turnout.measure.synthetic import SyntheticMeasurer
from turnout.measure.update import UpdateError, UpdateMeasurer, analyze, netdev_counts
from turnout.report import build_report
from turnout.report.queries import load_campaign
from turnout.report.summary import summary_text
from turnout.results import Host, ResultsDB, Sut
from turnout.scenarios import Point


def _samples(rate: float, t_start: float, t_a_end: float, t_b_start: float, t_end: float,
             period: float, jitter: float = 0.0, seed: int = 1) -> list[tuple[int, int, int]]:
    """Counter samples (ns) of a stream at ``rate`` that arrives at A from
    t_start to t_a_end and at B from t_b_start on (seconds)."""
    rng = random.Random(seed)
    gap = 1 / rate

    def count(t: float, lo: float, hi: float) -> int:
        if t < lo:
            return 0
        return int((min(t, hi) - lo) / gap) + 1

    out, t = [], 0.0
    while t < t_end:
        out.append((round(t * 1e9), 100 + count(t, t_start, t_a_end),
                    7 + count(t, t_b_start, 1e9)))
        t += period * (1 + rng.uniform(-jitter, jitter))
    return out


def test_analyze_places_the_switch_over_within_a_frame_interval():
    rate, t0 = 10_000.0, 0.5
    # the update takes 12.34 ms to reach the data path; A stops 3 ms earlier
    s = _samples(rate, 0.1, t0 + 0.00934, t0 + 0.01234, 1.0, period=0.001, jitter=0.3)
    u = analyze(s, round(t0 * 1e9), rate)
    assert u.first_b_ns == pytest.approx(12.34e6, abs=0.15e6)
    assert u.last_a_ns == pytest.approx(9.34e6, abs=0.15e6)
    assert u.before_t0_b == 0 and u.before_t0_a > 0
    assert 0.7e6 < u.sample_gap_ns < 1.3e6
    assert u.idle_ns == pytest.approx(3e6, abs=1.5e6)  # A stopped 3 ms before B started
    # 3 ms without arrivals at 10 kpps: 30 frames lost at the switch-over
    assert u.lost_switchover == pytest.approx(30, abs=3)
    assert u.switchover_window_ns == pytest.approx(5e6 + 12.34e6 + 20e6, abs=0.2e6)
    # the counts are what the model delivered
    assert u.received_a == int((t0 + 0.00934 - 0.1) * rate) + 1
    assert u.received_b == int((1.0 - 0.001 - t0 - 0.01234) * rate) + 1 or u.received_b > 0


def test_analyze_overlapping_rules_and_a_b_that_never_receives():
    rate, t0 = 1000.0, 0.2
    # both destinations get frames for a while (a copy, not a move)
    s = _samples(rate, 0.0, t0 + 0.05, t0 + 0.02, 0.5, period=0.002)
    u = analyze(s, round(t0 * 1e9), rate)
    assert u.first_b_ns is not None and u.last_a_ns is not None
    assert u.last_a_ns > u.first_b_ns
    never = _samples(rate, 0.0, 1.0, 9.0, 0.5, period=0.002)
    assert analyze(never, round(t0 * 1e9), rate).first_b_ns is None
    with pytest.raises(UpdateError):
        analyze(never[:1], 0, rate)


def test_netdev_counts_reads_each_interface():
    dev = ("Inter-|   Receive\n face |bytes    packets errs\n"
           "    lo: 10 2 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n"
           "  tnA: 640 10 0 0 0 0 0 3 0 0 0 0 0 0 0 0\n"
           "  tnB: 64 1 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n")
    assert netdev_counts(0, ["tnB", "tnA"], dev) == [1, 7]  # multicast left out
    with pytest.raises(UpdateError, match="tnC"):
        netdev_counts(0, ["tnC"], dev)


class ModelSwitch:
    """A switch in real time: a stream at ``rate`` reaches A until an update,
    then nothing for ``gap_s``, then B, ``delay_s`` after the update call."""

    def __init__(self, delay_s: float, gap_s: float) -> None:
        self.delay_s, self.gap_s = delay_s, gap_s
        self.rate = 0.0
        self.t_start = self.t_moved = None
        self.duration = 0.0
        self.lock = threading.Lock()
        self.moves: list[str] = []

    def start(self, duration_s: float, rate: float):
        self.rate, self.duration = rate, duration_s
        self.t_start = time.monotonic()

        def finish() -> tuple[int, int]:
            time.sleep(max(0.0, self.t_start + duration_s - time.monotonic()))
            return round(duration_s * rate), 1
        return finish

    def _n(self, lo: float, hi: float) -> int:
        return max(0, int((hi - lo) * self.rate))

    def counts(self) -> list[int]:
        if self.t_start is None:
            return [0, 0]
        now = min(time.monotonic(), self.t_start + self.duration)
        if self.t_moved is None:
            return [self._n(self.t_start, now), 0]
        a_end = self.t_moved + self.delay_s - self.gap_s
        return [self._n(self.t_start, min(now, a_end)),
                self._n(self.t_moved + self.delay_s, now)]

    def move(self) -> str:
        self.t_moved = time.monotonic()
        self.moves.append("move")
        return "model move"

    def restore(self) -> str:
        self.moves.append("restore")
        return "model restore"


def test_update_measurer_against_a_model_switch():
    sw = ModelSwitch(delay_s=0.030, gap_s=0.005)
    m = UpdateMeasurer(start_traffic=sw.start, read_counts=sw.counts, move=sw.move,
                       restore=sw.restore, lead_s=0.1, settle_s=0.05)
    c = m.measure(0.4, 20_000)
    assert sw.moves == ["restore", "move"]
    assert c.update_first_ns == pytest.approx(30e6, abs=2e6)
    assert c.update_last_ns == pytest.approx(25e6, abs=2e6)
    assert c.sent == round(c.duration_s * 20_000)
    assert c.lost == pytest.approx(0.005 * 20_000, abs=30)
    assert c.extra["lost_switchover"] == pytest.approx(c.lost, abs=5)
    assert c.extra["update_command"] == "model move"
    assert c.extra["sender_behind_max_ns"] == pytest.approx(1e9 / 20_000)
    assert c.tester_bound is False and not c.extra["tester_bound_why"]
    assert c.extra["received_a"] > 0 and c.extra["received_b"] > 0


def test_a_stalled_sender_makes_the_trial_tester_bound():
    sw = ModelSwitch(delay_s=0.010, gap_s=0.0)
    start = sw.start

    def stalled(duration_s: float, rate: float):
        finish = start(duration_s, rate)
        return lambda: (finish()[0], 500)  # 500 frames behind at 20 kpps: 25 ms

    m = UpdateMeasurer(start_traffic=stalled, read_counts=sw.counts, move=sw.move,
                       restore=sw.restore, lead_s=0.05, settle_s=0.02)
    c = m.measure(0.2, 20_000)
    assert c.tester_bound is True and "25.0 ms behind" in c.extra["tester_bound_why"]


def test_update_measurer_fails_when_nothing_moves():
    sw = ModelSwitch(delay_s=10.0, gap_s=0.0)
    m = UpdateMeasurer(start_traffic=sw.start, read_counts=sw.counts, move=sw.move,
                       restore=sw.restore, lead_s=0.05, settle_s=0.02)
    with pytest.raises(UpdateError, match="no frame reached destination B"):
        m.measure(0.2, 10_000)
    dead = UpdateMeasurer(start_traffic=sw.start, read_counts=lambda: [0, 0], move=sw.move,
                          restore=sw.restore, started_timeout_s=0.1, settle_s=0.0)
    with pytest.raises(UpdateError, match="destination A"):
        dead.measure(0.2, 10_000)


def _doc(**campaign) -> dict:
    return {"campaign": {"name": "u", "duration_s": 0.5, "repetitions": 3,
                         "methods": ["rplus", "sweep"], **campaign},
            "matrix": {"suts": ["bridge", "turnoutd"], "scenarios": ["p2p", "rule_update"],
                       "frame_sizes_b": [64]}}


def test_rule_update_points_run_only_rule_updates_and_sweeps_need_rplus():
    spec = parse(_doc(update_rate_pps=5000, sweep_fractions=[0.5, 1.2]))
    items = spec.work()
    upd = [i for i in items if i.point.scenario == "rule_update"]
    assert upd and {i.method for i in upd} == {"rule_update"}
    assert {i.arg for i in upd} == {5000.0}
    p2p = [i for i in items if i.point.scenario == "p2p"]
    assert {i.method for i in p2p} == {"rplus", "sweep"}
    assert sorted({i.arg for i in p2p if i.method == "sweep"}) == [0.5, 1.2]
    assert parse(_doc()).sweep_fractions == SWEEP_FRACTIONS
    only_sweep = parse({"campaign": {"name": "s", "methods": ["sweep"]}})
    assert only_sweep.methods[0] == "rplus"
    for bad, msg in (({"update_rate_pps": 0}, "update_rate_pps"),
                     ({"sweep_fractions": [0.5, 9]}, "sweep_fractions")):
        with pytest.raises(CampaignError, match=msg):
            parse(_doc(**bad))


class UpdateBench:
    """Sessions whose rule updates take a known time per SUT."""

    def __init__(self) -> None:
        self.update_ms = {"bridge": 2.0, "turnoutd": 0.2}

    def host(self) -> Host:
        return Host(hostname="fake", cores=2, git_commit="abc")

    @contextlib.contextmanager
    def session(self, sut: str, point: Point, spec) -> Iterator[Session]:
        ms = self.update_ms[sut]

        class Upd:
            def measure(self, duration_s: float, rate: float) -> TrialCounts:
                return TrialCounts(offered_total_pps=rate, duration_s=duration_s,
                                   sent=round(rate * duration_s),
                                   received=round(rate * duration_s) - 3, lost=3,
                                   update_first_ns=ms * 1e6, update_last_ns=ms * 0.9e6,
                                   extra={"update_command": f"{sut} move"})

        yield Session(measurer=SyntheticMeasurer(capacity_pps=1e5 if sut == "turnoutd" else 5e4),
                      sut=Sut(name=sut, version="1"),
                      rule_update=Upd() if point.scenario == "rule_update" else None)


def test_campaign_stores_update_times_and_the_sweep_and_reports_them(tmp_path):
    spec = parse(_doc(sweep_fractions=[0.5, 1.0, 1.2]))
    with ResultsDB(tmp_path / "u.db") as db:
        c = run_campaign(spec, db, UpdateBench())
        upd = db.trials(c.id, method="rule_update")
        assert len(upd) == 2 * 3 and all(t.status == "ok" for t in upd)
        br = [t for t in upd if t.sut == "bridge"]
        assert {t.update_first_ns for t in br} == {2e6} and all(t.lost == 3 for t in br)
        sw = db.trials(c.id, method="sweep")
        assert len(sw) == 2 * 3 * 3
        t = next(x for x in sw if x.sut == "bridge" and x.load_fraction == 1.2)
        assert t.offered_total_pps == pytest.approx(1.2 * 5e4)
        assert t.rx_total_pps == pytest.approx(5e4, rel=0.01)  # the model's capacity
        out = build_report(db, c.id, tmp_path / "rep")
    sec = out.section("rule-update")
    rows = {r[0]: r for r in sec.tables[0].rows}
    assert set(rows) == {"bridge", "turnoutd"}
    assert rows["turnoutd"][4].startswith("0.2")  # ms, median of 3
    ranked = sec.tables[1].rows
    assert [r[1:3] for r in ranked] == [["1", "turnoutd"], ["2", "bridge"]]
    assert ranked[0][5].startswith("10")  # 0.2 ms against 2 ms, paired by repetition
    verdict = out.section("verdict").tables[-1]
    assert verdict.key == "rule-update-verdict" and verdict.rows == ranked
    fig = out.section("sweep").figures[0]
    series = {s.label: s for p in fig.panels for s in p.series}
    bridge = next(s for k, s in series.items() if k.startswith("bridge"))
    # received against offered: flat at the capacity past it
    assert [round(p.y, 3) for p in bridge.points][-2:] == [0.05, 0.05]
    assert (tmp_path / "rep" / f"{fig.key}.svg").exists()
    with ResultsDB(tmp_path / "u.db") as db:
        text = summary_text(load_campaign(db, c.id))
    # the terminal summary ends with the same ranking, after the verdict
    assert "Rule-update time under traffic" in text.split("Verdict")[-1]
    html = out.page.read_text()
    assert 'id="rule-update"' in html and 'id="sweep"' in html


def test_a_sut_without_rules_is_skipped_with_the_reason(tmp_path):
    doc = _doc()
    doc["matrix"]["scenarios"] = ["rule_update"]
    doc["campaign"]["repetitions"] = 1

    class NoRules(UpdateBench):
        @contextlib.contextmanager
        def session(self, sut, point, spec):
            yield Session(measurer=SyntheticMeasurer(capacity_pps=1e5),
                          sut=Sut(name=sut, version="1"))

    with ResultsDB(tmp_path / "n.db") as db:
        c = run_campaign(parse(doc), db, NoRules())
        ts = db.trials(c.id)
        assert ts and all(t.status == "skipped" and "no rules" in t.reason for t in ts)


def test_compare_flags_a_slower_rule_update_as_a_regression(tmp_path):
    from turnout.report.compare import compare_data

    doc = _doc()
    doc["matrix"]["scenarios"] = ["rule_update"]
    slow = UpdateBench()
    slow.update_ms = {"bridge": 2.0, "turnoutd": 5.0}  # turnoutd 25x slower
    with ResultsDB(tmp_path / "c.db") as db:
        a = run_campaign(parse(doc), db, UpdateBench())
        b = run_campaign(parse(doc), db, slow)
        rows = compare_data(load_campaign(db, a.id), load_campaign(db, b.id))
    upd = {r.sut: r for r in rows if r.method == "rule update"}
    assert upd["turnoutd"].verdict == "regression"
    assert upd["bridge"].verdict == "within noise"


class BulkModel(ModelSwitch):
    """ModelSwitch whose stream can be ended early, with a bulk install that
    takes ``install_s`` and loses ``lost`` frames (counted at A)."""

    def __init__(self, install_s: float, lost: int = 0) -> None:
        super().__init__(delay_s=0.0, gap_s=0.0)
        self.install_s, self.lost = install_s, lost
        self.installed: list[tuple[str, int]] = []
        self.removed = 0

    def start(self, duration_s: float, rate: float):
        self.rate, self.duration = rate, duration_s
        self.t_start = time.monotonic()

        def finish() -> tuple[int, int]:
            time.sleep(max(0.0, self.t_start + self.duration - time.monotonic()))
            return round(self.duration * rate), 1
        return finish

    def stop(self) -> None:
        self.duration = time.monotonic() - self.t_start

    def counts(self) -> list[int]:
        a, b = super().counts()
        return [max(0, a - (self.lost if self.installed else 0)), b]

    def bulk(self, interface: str, n: int):
        time.sleep(self.install_s)
        self.installed.append((interface, n))
        return f"model add {n}"

    def unbulk(self) -> None:
        self.removed += 1


def test_measure_bulk_times_the_install_and_counts_the_loss_meanwhile():
    sw = BulkModel(install_s=0.1, lost=7)
    drops = iter([{"tx_full": 3, "no_match": 1}, {"tx_full": 10, "no_match": 1, "runt": 2}])
    m = UpdateMeasurer(start_traffic=sw.start, read_counts=sw.counts, move=sw.move,
                       restore=sw.restore, bulk=sw.bulk, unbulk=sw.unbulk, stop_traffic=sw.stop,
                       sut_drops=lambda: next(drops),
                       lead_s=0.05, settle_s=0.02, bulk_timeout_s=30.0)
    t0 = time.monotonic()
    c = m.measure_bulk("ovs-ofctl", 1000, 20_000)
    assert time.monotonic() - t0 < 5  # the stream ended with the install, not after 30 s
    assert sw.installed == [("ovs-ofctl", 1000)] and sw.removed == 1
    assert sw.moves == ["restore"]
    assert c.extra["bulk_command_ns"] == pytest.approx(0.1e9, rel=0.5)
    assert c.extra["flow_mods_per_s"] == pytest.approx(1000 / (c.extra["bulk_command_ns"] / 1e9))
    assert c.extra["bulk_interface"] == "ovs-ofctl" and c.extra["bulk_flows"] == 1000
    assert c.lost == pytest.approx(7, abs=25)  # the model's frames, rounded at 20 kpps
    assert c.extra["sut_drops"] == {"tx_full": 7, "runt": 2}  # counted over the trial
    quiet = UpdateMeasurer(start_traffic=sw.start, read_counts=sw.counts, move=sw.move,
                           restore=sw.restore, bulk=sw.bulk, unbulk=sw.unbulk,
                           stop_traffic=sw.stop, lead_s=0.02, settle_s=0.01)
    assert "sut_drops" not in quiet.measure_bulk("json-rpc", 10, 20_000).extra  # not read
    no_bulk = UpdateMeasurer(start_traffic=sw.start, read_counts=sw.counts, move=sw.move,
                             restore=sw.restore)
    with pytest.raises(UpdateError, match="in bulk"):
        no_bulk.measure_bulk("ovs-ofctl", 10, 10_000)


def test_campaign_stores_flow_mod_trials_per_interface_and_reports_them(tmp_path):
    doc = _doc(update_bulk_flows=[100, 1000])
    doc["matrix"]["scenarios"] = ["rule_update"]
    doc["campaign"]["repetitions"] = 2
    rate = {"bridge": 1e3, "turnoutd": 1e5}

    class Adapter:
        def __init__(self, sut: str) -> None:
            self.bulk_interfaces = ("ovs-ofctl", "json-rpc") if sut == "turnoutd" else ()

    class Bulk(UpdateBench):
        @contextlib.contextmanager
        def session(self, sut, point, spec):
            with super().session(sut, point, spec) as s:
                upd = s.rule_update

                class Upd:
                    measure = upd.measure

                    def measure_bulk(self, iface: str, n: int, r: float) -> TrialCounts:
                        if (iface, n) == ("json-rpc", 1000):
                            raise UpdateError("model: install timed out")
                        ns = n / rate[sut] * 1e9
                        return TrialCounts(offered_total_pps=r, duration_s=1.0, sent=100,
                                           received=100, lost=0,
                                           extra={"bulk_interface": iface, "bulk_flows": n,
                                                  "bulk_command_ns": ns,
                                                  "bulk_command": f"{iface} add",
                                                  "sut_drops": {"tx_full": 1},
                                                  "flow_mods_per_s": n / (ns / 1e9)})
                s.rule_update = Upd()
                s.adapter = Adapter(sut)
                yield s

    with ResultsDB(tmp_path / "b.db") as db:
        c = run_campaign(parse(doc), db, Bulk())
        fm = db.trials(c.id, method="flow_mods")
        # turnoutd: 2 interfaces x 2 sizes x 2 repetitions; bridge: none
        assert len(fm) == 8 and {t.sut for t in fm} == {"turnoutd"}
        assert len({t.key for t in fm}) == 8  # one key per interface, size and repetition
        failed = [t for t in fm if t.status == "failed"]
        assert len(failed) == 2 and all("timed out" in t.reason for t in failed)
        assert all(t.extra["bulk_interface"] == "json-rpc" for t in failed)
        # the rule-update trials themselves are kept
        assert len(db.trials(c.id, method="rule_update", status="ok")) == 4
        out = build_report(db, c.id, tmp_path / "rep")
    t = next(x for x in out.section("rule-update").tables if x.key == "flow-mods")
    assert [r[1:3] for r in t.rows] == [["json-rpc", "100"], ["ovs-ofctl", "100"],
                                        ["ovs-ofctl", "1,000"]]
    assert all(r[5].startswith("100000") for r in t.rows), t.rows
    assert all(r[8] == "tx_full 2" for r in t.rows), t.rows  # over both repetitions
    for bad in ([0], [2_000_000], ["x"]):
        with pytest.raises(CampaignError, match="update_bulk_flows"):
            parse(_doc(update_bulk_flows=bad))
    assert parse(_doc()).update_bulk_flows == ()
