"""Campaign parsing, work expansion, and resume after interruption."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from turnout.campaign import CampaignError, Session, SkipSession, load, parse, run_campaign
from turnout.measure.counts import TrialCounts
from turnout.measure.synthetic import SyntheticMeasurer
from turnout.results import Host, ResultsDB, Sut
from turnout.scenarios import Point

BASE = {
    "campaign": {"name": "t", "duration_s": 0.5, "repetitions": 2,
                 "methods": ["rplus", "ndr", "pdr", "latency", "fixed"], "search": "binary",
                 "latency_fractions": [0.1, 0.5]},
    "matrix": {"suts": ["wire", "bridge"], "scenarios": ["p2p", "loopback"],
               "directions": ["uni", "bi"], "frame_sizes_b": [64, 1518], "vnfs": [1, 2],
               "rates_pps": [1000, 2000]},
}


class Interrupt(KeyboardInterrupt):
    pass


class FakeBench:
    """Synthetic sessions: each SUT is a model with its own capacity."""

    def __init__(self, fail_after: int | None = None, missing: set[str] = frozenset(),
                 streams: int = 1, git: str = "abc123") -> None:
        self.calls = 0
        self.fail_after = fail_after
        self.missing = missing
        self.streams = streams
        self.git = git
        self.sessions: list[tuple[str, Point]] = []
        self.retargets: list[tuple[str, Point]] = []

    def host(self) -> Host:
        return Host(hostname="fake", cores=2, git_commit=self.git)

    @contextlib.contextmanager
    def session(self, sut: str, point: Point, spec) -> Iterator[Session]:
        if sut in self.missing:
            raise SkipSession(f"{sut} not installed")
        self.sessions.append((sut, point))
        model = SyntheticMeasurer(capacity_pps=1e5 if sut == "wire" else 5e4,
                                  streams=self.streams)
        bench = self

        class Counting:
            def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
                bench.calls += 1
                if bench.fail_after is not None and bench.calls > bench.fail_after:
                    raise Interrupt()
                return model.measure(duration_s, load_pps)

        def retarget(p: Point) -> None:
            bench.retargets.append((sut, p))

        yield Session(measurer=Counting(), sut=Sut(name=sut, version="1"), virtual_port="",
                      retarget=retarget)


def test_parse_expands_matrix():
    spec = parse(BASE)
    # p2p: 2 dirs x 2 sizes = 4; loopback adds vnfs 1,2 -> 8; 12 points
    assert len(spec.points) == 12
    per_point = 1 + 1 + 1 + 2 + 2  # rplus ndr pdr latency x2 fixed x2
    assert len(spec.work()) == 12 * 2 * 2 * per_point
    assert len({w.key for w in spec.work()}) == len(spec.work())
    first = spec.work()[: 4 * per_point]
    # interleaved per testbed: p2p/uni at 64 and 1518 B on wire (one set-up),
    # then the same two points on bridge
    assert [w.sut for w in first] == ["wire"] * 2 * per_point + ["bridge"] * 2 * per_point
    assert [w.point.frame_size_b for w in first[::per_point]] == [64, 1518, 64, 1518]


def test_each_repetition_rotates_the_sut_order():
    """No SUT always runs first in a testbed or right after the same other
    SUT: repetition r starts at SUT r × (n // repetitions)."""
    doc = {"campaign": {"name": "order", "methods": ["rplus"], "repetitions": 3},
           "matrix": {"suts": ["wire", "bridge", "ovs", "testpmd", "turnoutd", "turnoutd-poll",
                               "ovs-dpdk"],
                      "scenarios": ["p2p"], "frame_sizes_b": [64]}}
    spec = parse(doc)
    order = {r: [w.sut for w in spec.work() if w.repetition == r] for r in range(3)}
    assert order[0] == list(spec.suts)
    assert order[1][0] == "ovs" and order[2][0] == "turnoutd"
    for r in range(3):  # every SUT once a repetition
        assert sorted(order[r]) == sorted(spec.suts)
    # each SUT at three different positions
    for sut in spec.suts:
        assert len({order[r].index(sut) for r in range(3)}) == 3, sut
    # two SUTs alternate: A, B then B, A (make bench-ab's after and before)
    two = parse({"campaign": {"name": "ab", "methods": ["rplus"], "repetitions": 5},
                 "matrix": {"suts": ["wire", "bridge"], "scenarios": ["p2p"]}})
    firsts = [next(w.sut for w in two.work() if w.repetition == r) for r in range(5)]
    assert firsts == ["wire", "bridge", "wire", "bridge", "wire"]


def test_sessions_are_shared_across_frame_sizes(tmp_path):
    """One testbed per (SUT, scenario, direction, ...): frame sizes retarget it."""
    doc = {"campaign": {"name": "share", "duration_s": 0.5, "methods": ["rplus"]},
           "matrix": {"suts": ["wire", "bridge"], "scenarios": ["p2p"],
                      "frame_sizes_b": [64, 512, 1518]}}
    bench = FakeBench()
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(doc), db, bench)
        assert len(db.results(c.id, status="ok")) == 6
    assert [(s, p.frame_size_b) for s, p in bench.sessions] == [("wire", 64), ("bridge", 64)]
    sizes = [(s, p.frame_size_b) for s, p in bench.retargets]
    assert sizes == [("wire", 64), ("wire", 512), ("wire", 1518),
                     ("bridge", 64), ("bridge", 512), ("bridge", 1518)]


@pytest.mark.parametrize(("patch", "message"), [
    ({"campaign": {"duration_s": 1}}, "campaign.name"),
    ({"campaign": {"name": "x", "bogus": 1}}, "campaign.bogus: unknown key"),
    ({"campaign": {"name": "x"}, "matrix": {"suts": ["nope"]}}, "unknown SUT"),
    ({"campaign": {"name": "x"}, "matrix": {"frame_sizes_b": [32]}}, r"outside 64\.\.9000"),
    ({"campaign": {"name": "x"}, "matrix": {"scenarios": ["p3p"]}}, "unknown 'p3p'"),
    ({"campaign": {"name": "x", "methods": ["magic"]}}, "unknown 'magic'"),
    ({"campaign": {"name": "x", "location": "remote"}}, r"needs \[hosts\.NAME\]"),
    ({"campaign": {"name": "x", "location": "moon"}}, "campaign.location"),
    ({"campaign": {"name": "x"}, "extra": {}}, "unknown table"),
    ({"campaign": {"name": "x"}, "matrix": {"flows": ["a"]}}, "expected int"),
    ({"campaign": {"name": "x", "return_wait_s": -1}}, "campaign.return_wait_s"),
    ({"campaign": {"name": "x", "return_wait_s": "2"}}, "campaign.return_wait_s"),
    ({"campaign": {"name": "x", "return_wait_s": True}}, "campaign.return_wait_s"),
])
def test_bad_campaigns_are_named(patch, message):
    with pytest.raises(CampaignError, match=message):
        parse(patch)


def test_the_return_wait_is_the_campaigns():
    assert parse({"campaign": {"name": "x"}}).return_wait_s == 1.0
    assert parse({"campaign": {"name": "x", "return_wait_s": 2.5}}).return_wait_s == 2.5


def test_latency_implies_rplus():
    spec = parse({"campaign": {"name": "x", "methods": ["latency"]}})
    assert spec.methods == ("rplus", "latency")


SHIPPED = sorted((Path(__file__).resolve().parents[2] / "campaigns").glob("*.toml"))


def test_the_shipped_campaigns_are_there():
    assert {f.name for f in SHIPPED} >= {"smoke.toml", "default.toml"}


@pytest.mark.parametrize("f", SHIPPED, ids=lambda f: f.name)
def test_shipped_campaign_parses(f):
    """Every campaign in campaigns/ parses, has work, and each of its SUTs'
    adapters takes its [sut.NAME] options."""
    spec = load(f)
    assert spec.work()
    for name in (*spec.suts, *spec.variants):
        assert spec.make_sut(name).name == name


def test_unreadable_campaigns_are_named(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[campaign\nname=")
    with pytest.raises(CampaignError, match=r"bad\.toml"):
        load(bad)
    with pytest.raises(CampaignError, match="cannot read"):
        load(tmp_path / "missing.toml")
    bad.write_text('[campaign]\nname = "b"\nsearch = "fast"\n')
    with pytest.raises(CampaignError, match=r"bad\.toml: campaign\.search"):
        load(bad)


def _small() -> dict:
    return {
        "campaign": {"name": "r", "duration_s": 1.0, "repetitions": 2, "search": "binary",
                     "methods": ["rplus", "ndr", "pdr", "latency"], "latency_fractions": [0.5]},
        "matrix": {"suts": ["wire", "bridge"], "scenarios": ["p2p"], "frame_sizes_b": [64, 1518]},
    }


def test_campaign_stores_everything(tmp_path):
    spec = parse(_small())
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, FakeBench())
        assert c.status == "done"
        results = db.results(c.id)
        assert len(results) == 2 * 2 * 2 * 3  # reps x sizes x suts x (rplus ndr pdr)
        rp = [r for r in results if r.sut == "bridge" and r.method == "rplus"]
        assert all(r.rate_total_pps == pytest.approx(5e4) for r in rp)
        ndr = [r for r in results if r.sut == "wire" and r.method == "ndr"]
        assert all(0.95e5 <= r.rate_total_pps <= 1e5 for r in ndr)
        lat = db.trials(c.id, method="latency")
        assert len(lat) == 8 and {t.load_fraction for t in lat} == {0.5}
        assert all(t.offered_total_pps == pytest.approx(0.5 * (1e5 if t.sut == "wire" else 5e4))
                   for t in lat)
        for r in results:  # every search's trials are linked to it
            if r.extra.get("trials_of") is None:
                assert len(db.trials(result_id=r.id)) == r.trials_count > 0


def test_interrupted_campaign_resumes_without_repeating(tmp_path):
    spec = parse(_small())
    path = tmp_path / "r.db"
    full = FakeBench()
    with ResultsDB(tmp_path / "ref.db") as db:
        run_campaign(spec, db, full)
    with ResultsDB(path) as db:
        first = FakeBench(fail_after=full.calls // 2)
        with pytest.raises(Interrupt):
            run_campaign(spec, db, first)
        (c,) = db.campaigns()
        assert c.status == "interrupted"
        assert db.results(c.id, status="interrupted")  # the search cut in half
        done_before = db.done_keys(c.id)
        assert 0 < len(done_before) < len({w.key for w in spec.work()})
    with ResultsDB(path) as db:
        second = FakeBench()
        c = run_campaign(spec, db, second, resume=True)
        assert c.status == "done" and len(db.campaigns()) == 1
        # nothing finished before was measured again
        redone = {(s, p) for s, p in second.sessions}
        ok_keys = {r.key for r in db.results(c.id, status="ok")}
        assert done_before <= ok_keys | {t.key for t in db.trials(c.id, status="ok")}
        for r in db.results(c.id, status="ok"):
            assert [x.key for x in db.results(c.id, status="ok") if x.key == r.key] == [r.key]
        assert first.calls - 1 + second.calls < full.calls + 20  # only the cut search is redone
        assert redone  # and something was left to do
        # a resume of a finished campaign does nothing
        third = FakeBench()
        run_campaign(spec, db, third, resume=True)
        assert third.calls == 0


def test_resume_only_on_the_same_software_and_host(tmp_path):
    """A finished (or interrupted) run is continued only by the same
    campaign on the same commit and host; otherwise a new run starts, and
    the progress says why (was: stale results of other software reported)."""
    spec = parse(_small())
    msgs: list[str] = []

    def progress(done, total, item, msg):
        if msg:
            msgs.append(msg)

    with ResultsDB(tmp_path / "r.db") as db:
        run_campaign(spec, db, FakeBench(git="abc123"))
        same = FakeBench(git="abc123")
        c = run_campaign(spec, db, same, resume=True, progress=progress)
        assert same.calls == 0 and len(db.campaigns()) == 1
        assert any("resuming run" in m for m in msgs)
        other = FakeBench(git="def456")
        msgs.clear()
        c2 = run_campaign(spec, db, other, resume=True, progress=progress)
        assert c2.id != c.id and other.calls > 0 and len(db.campaigns()) == 2
        assert any("not resuming" in m and "starting a new run" in m for m in msgs), msgs
        # another campaign content is another run too
        doc = _small()
        doc["campaign"]["duration_s"] = 0.3
        c3 = run_campaign(parse(doc), db, FakeBench(git="def456"), resume=True)
        assert c3.id not in (c.id, c2.id)


def test_two_streams_share_the_aggregate_load(tmp_path):
    """NvsN with two pairs: R+ is the aggregate, and a latency trial at 0.99
    × R+ offers 0.99 × R+ in all (was: 0.99 × R+ per stream, 1.98 × R+,
    and the loss that goes with it)."""
    doc = _small()
    doc["campaign"]["methods"] = ["rplus", "latency"]
    doc["campaign"]["latency_fractions"] = [0.99]
    spec = parse(doc)
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, FakeBench(streams=2))
        for r in db.results(c.id, method="rplus", status="ok"):
            assert r.rate_total_pps == pytest.approx(1e5 if r.sut == "wire" else 5e4)
        lat = db.trials(c.id, method="latency", status="ok")
        assert lat
        for t in lat:
            assert t.offered_total_pps == pytest.approx(0.99 * (1e5 if t.sut == "wire" else 5e4))
            assert t.lost == 0 and t.streams == 2
            assert t.extra["per_stream_pps"] == pytest.approx(t.offered_total_pps / 2)


def test_missing_sut_is_skipped_not_failed(tmp_path):
    spec = parse(_small())
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, FakeBench(missing={"bridge"}))
        assert c.status == "done"
        skipped = db.trials(c.id, status="skipped")
        assert skipped and all(t.sut == "bridge" and "not installed" in t.reason for t in skipped)
        assert not db.trials(c.id, status="failed")
        assert db.results(c.id, sut="wire", status="ok")


def test_a_failed_trial_marks_its_search_failed_with_the_reason(tmp_path):
    """A search whose trial raises is 'failed' with the error (not 'interrupted',
    which means the run stopped), and the campaign goes on."""

    class Broken(FakeBench):
        @contextlib.contextmanager
        def session(self, sut, point, spec):
            with super().session(sut, point, spec) as s:
                if sut == "bridge":
                    class Failing:
                        def measure(self, duration_s, load_pps):
                            raise RuntimeError("peer did not come up within 5 s")
                    s.measurer = Failing()
                yield s

    spec = parse(_small())
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, Broken())
        assert c.status == "done"
        failed = db.results(c.id, sut="bridge", status="failed")
        assert failed and all("peer did not come up" in r.reason for r in failed)
        assert not db.results(c.id, status="interrupted")
        assert db.results(c.id, sut="wire", status="ok")


def test_tester_rx_cpu_is_a_cpu_other_than_the_senders():
    doc = _small()
    assert parse(doc).tester_rx_cpu is None
    doc["campaign"]["tester_rx_cpu"] = 2
    assert parse(doc).tester_rx_cpu == 2
    for bad in (0, -1, "2"):  # 0 = tester_cpu's default
        doc["campaign"]["tester_rx_cpu"] = bad
        with pytest.raises(CampaignError, match="tester_rx_cpu"):
            parse(doc)


def test_turnoutd_poll_is_turnoutd_with_busy_polling_workers():
    from turnout.sut import make_sut
    from turnout.sut.base import SutPort, Topology

    topo = Topology(ns="n", ports=[SutPort(name="a", kind="veth", iface="x"),
                                   SutPort(name="b", kind="veth", iface="y")],
                    xconnects=[("a", "b")])
    poll = make_sut("turnoutd-poll", {"kernel_port": "af_xdp"}).render_config(topo, "/s")  # type: ignore[attr-defined]
    assert 'wakeup = "poll"' in poll and 'kind = "af_xdp"' in poll
    adaptive = make_sut("turnoutd").render_config(topo, "/s")  # type: ignore[attr-defined]
    assert 'wakeup = "adaptive"' in adaptive


def test_a_sut_whose_port_stops_answering_is_restarted_once(tmp_path):
    """PeerAbsent (turnout-gen exit 3: the SUT's port never came up) makes the
    runner restart the SUT once and retry; the trial says so. A second
    PeerAbsent fails the item with the reason."""
    from turnout.measure.gen import PeerAbsent

    class Flaky:
        def __init__(self, failures: int) -> None:
            self.failures = failures
            self.recovered = 0

        def host(self) -> Host:
            return Host(hostname="fake", cores=2, git_commit="abc")

        @contextlib.contextmanager
        def session(self, sut, point, spec):
            bench = self
            model = SyntheticMeasurer(capacity_pps=5e4)

            class M:
                def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
                    if bench.failures > 0:
                        bench.failures -= 1
                        raise PeerAbsent("turnout-gen exited 3: peer did not come up")
                    return model.measure(duration_s, load_pps)

            def recover() -> str:
                bench.recovered += 1
                return f"{sut} restarted"

            yield Session(measurer=M(), sut=Sut(name=sut, version="1"), recover=recover)

    doc = {"campaign": {"name": "r", "methods": ["fixed"]},
           "matrix": {"suts": ["wire"], "scenarios": ["p2p"], "rates_pps": [1000]}}
    with ResultsDB(tmp_path / "r.db") as db:
        b = Flaky(failures=1)
        c = run_campaign(parse(doc), db, b)
        (t,) = db.trials(c.id)
        assert t.status == "ok" and b.recovered == 1
        assert "restarted after" in t.extra["recovered"]
    with ResultsDB(tmp_path / "r2.db") as db:
        b = Flaky(failures=2)
        c = run_campaign(parse(doc), db, b)
        (t,) = db.trials(c.id)
        assert t.status == "failed" and "peer did not come up" in t.reason and b.recovered == 1
