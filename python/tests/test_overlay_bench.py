"""The overlay scenario's arithmetic (turnout/overlay.py, report/overlay.py)
without namespaces: the campaign keys, the summed and per-host cost per
frame from synthetic samples, and the report's encapsulation cost against
a synthetic measurer whose costs are known."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from turnout.campaign import parse, run_campaign
from turnout.campaign.runner import Session
from turnout.campaign.spec import CampaignError
from turnout.measure.cost import CostSample
from turnout.measure.counts import TrialCounts
from turnout.measure.synthetic import SyntheticMeasurer
from turnout.overlay import OverlaySut, host_cost, overlay_support
from turnout.report.overlay import encap_rows, overlay_section
from turnout.report.queries import load_campaign
from turnout.report.summary import summary_text
from turnout.results import Host, ResultsDB, Sut, Trial
from turnout.scenarios import Point
from turnout.sut import make_sut


def _doc(**matrix) -> dict:
    m = {"suts": ["turnoutd", "bridge"], "scenarios": ["p2p", "overlay"],
         "frame_sizes_b": [64, 1518], "directions": ["uni", "bi"], **matrix}
    return {"campaign": {"name": "ov", "methods": ["rplus", "fixed"], "repetitions": 3},
            "matrix": {"rates_pps": [1e5], **m}}


def test_overlay_cell_keys():
    spec = parse(_doc(overlay_frame_sizes_b=[64], overlay_directions=["uni"]))
    over = [p for p in spec.points if p.scenario == "overlay"]
    assert over == [Point(scenario="overlay", direction="uni", frame_size_b=64)]
    assert len([p for p in spec.points if p.scenario == "p2p"]) == 4
    # default: the matrix's directions and sizes
    assert len([p for p in parse(_doc()).points if p.scenario == "overlay"]) == 4


@pytest.mark.parametrize(("matrix", "words"), [
    ({"scenarios": ["overlay"]}, "needs p2p"),
    ({"overlay_frame_sizes_b": [512]}, "512 is not in matrix.frame_sizes_b"),
    ({"overlay_directions": ["bi"], "directions": ["uni"]}, "'bi' is not in matrix.directions"),
    ({"scenarios": ["p2p"], "overlay_frame_sizes_b": [64]}, "not in matrix.scenarios"),
])
def test_overlay_cell_errors(matrix, words):
    with pytest.raises(CampaignError, match=words):
        parse(_doc(**matrix))


def test_which_suts_have_an_overlay():
    for name in ("turnoutd", "turnoutd-poll", "ovs", "bridge"):
        assert overlay_support(make_sut(name)) == "", name
    for name in ("wire", "ovs-dpdk", "testpmd"):
        assert overlay_support(make_sut(name)) != "", name


def test_unsupported_points_are_said_why():
    from turnout.overlay import MAX_FRAME_B, _check
    from turnout.scenarios import Unsupported, check

    roles = {"txrx", "bidir"}
    with pytest.raises(Unsupported, match="needs a switch on each host"):
        check(Point(scenario="overlay"), make_sut("wire"), roles)
    with pytest.raises(Unsupported, match="no two-host set-up for testpmd"):
        check(Point(scenario="overlay"), make_sut("testpmd"), roles)
    _check(Point(scenario="overlay", frame_size_b=MAX_FRAME_B), make_sut("bridge"), roles)
    with pytest.raises(Unsupported, match=f"inner frames up to {MAX_FRAME_B} B"):
        _check(Point(scenario="overlay", frame_size_b=MAX_FRAME_B + 1), make_sut("bridge"),
               roles)


class _FakeHost:
    def __init__(self, frames_per_s: float, cycles_per_frame: float) -> None:
        self.rate, self.cpf, self.t = frames_per_s, cycles_per_frame, 0.0

    def sample(self) -> CostSample:
        frames = int(self.rate * self.t)
        return CostSample(self.t, frames * self.cpf, frames)


def test_summed_cost_is_per_frame_carried_and_per_host_is_each_hosts_own():
    sut = OverlaySut(make_sut("turnoutd"))
    # host A receives 1000 frames/s from its pod at 300 cycles each; host B
    # receives the same frames from the underlay at 500 cycles each
    a, b = _FakeHost(1000, 300), _FakeHost(1000, 500)
    sut.hosts = [a, b]  # type: ignore[list-item]
    sut.host_samples = [[], []]
    got = []
    for t in (0.0, 0.5, 1.0, 1.5, 2.0):
        a.t = b.t = t
        s = sut.cost_sample()
        assert s is not None
        got.append(CostSample(t, s.cycles, s.frames))
    # summed: 800 cycles per frame carried (each frame received once per host)
    assert (got[-1].cycles - got[0].cycles) / (got[-1].frames - got[0].frames) == 800
    # the stored per-host samples carry the sampler's clock: give them ours
    samples = [[CostSample(t, s.cycles, s.frames) for t, s in
                zip((0.0, 0.5, 1.0, 1.5, 2.0), hs, strict=True)] for hs in sut.host_samples]
    per = host_cost(samples, [[int(0.4e9), int(1.6e9)]])
    assert [(h["host"], h["cycles_per_frame"], h["frames"]) for h in per] == [
        ("A", 300, 1000), ("B", 500, 1000)]
    short = host_cost(samples, [[int(0.6e9), int(0.9e9)]])
    assert all("why" in h for h in short)


PLAIN = {"turnoutd": 400.0, "bridge": 2000.0}  # cycles per frame, plain p2p
ENCAP = {"turnoutd": 700.0, "bridge": 1500.0}  # what the overlay adds
REP = (0.9, 1.0, 1.2)  # per repetition: both paths drift together (interleaved)


class OverlayModelBench:
    """Sessions whose cost per frame is known: plain = PLAIN × drift,
    overlay = (PLAIN + ENCAP) × drift, host A and B splitting it 40/60."""

    def __init__(self) -> None:
        self.rep = {}

    def host(self) -> Host:
        return Host(hostname="fake", cores=2, git_commit="abc")

    @contextlib.contextmanager
    def session(self, sut: str, point: Point, spec) -> Iterator[Session]:
        k = (sut, point.scenario)
        rep = self.rep.get(k, 0)
        self.rep[k] = rep + 1
        over = point.scenario == "overlay"
        model = SyntheticMeasurer(capacity_pps=5e5 if over else 1e6)
        cost = (PLAIN[sut] + (ENCAP[sut] if over else 0)) * REP[rep]

        class M:
            def measure(self, duration_s: float, load: float) -> TrialCounts:
                c = model.measure(duration_s, load)
                c.busy_cycles_per_frame = cost
                if over and sut == "turnoutd":
                    c.extra["overlay_hosts"] = [{"host": "A", "cycles_per_frame": 0.4 * cost},
                                                {"host": "B", "cycles_per_frame": 0.6 * cost}]
                return c

        yield Session(measurer=M(), sut=Sut(name=sut, version="1"))


def test_report_gives_encap_cost_paired_by_repetition(tmp_path):
    spec = parse(_doc(frame_sizes_b=[64], directions=["uni"]))
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, OverlayModelBench())
        data = load_campaign(db, c.id)
        rows = encap_rows(data.trials)
        assert {(r.sut, r.load) for r in rows} == {
            ("turnoutd", "R+"), ("turnoutd", "100000 pps"), ("bridge", "R+"),
            ("bridge", "100000 pps")}
        for r in rows:
            assert r.n_pairs == 3
            e = ENCAP[r.sut]
            assert r.encap_cost is not None and r.encap_cost.n == 3
            assert r.encap_cost.median == pytest.approx(e)
            assert (r.encap_cost.min, r.encap_cost.max) == (pytest.approx(0.9 * e),
                                                            pytest.approx(1.2 * e))
            assert r.cost_ratio is not None
            assert r.cost_ratio.median == pytest.approx((PLAIN[r.sut] + e) / PLAIN[r.sut])
            assert r.plain_cost is not None and r.plain_cost.median == pytest.approx(PLAIN[r.sut])
            if r.load == "100000 pps":  # under both capacities: same rate, ratio 1
                assert r.rate_ratio is not None and r.rate_ratio.median == pytest.approx(1.0)
            else:
                assert r.rate_ratio is not None and r.rate_ratio.median == pytest.approx(0.5)
            if r.sut == "turnoutd":
                assert r.host_costs["A"].median == pytest.approx(0.4 * (PLAIN[r.sut] + e))
                assert r.host_costs["B"].median == pytest.approx(0.6 * (PLAIN[r.sut] + e))
            else:
                assert r.host_costs == {}
        sec = overlay_section(data)
        assert sec.has_data() and not sec.empty
        table = sec.tables[0]
        row = next(x for x in table.rows if x[0] == "turnoutd" and x[3] == "R+")
        assert row[11] == "700 [630–840]"
        (fig,) = sec.figures
        panel = next(p for p in fig.panels if p.title == "uni 64 B at R+")
        encap = next(p for p in panel.series[0].points if p.x == "turnoutd encap")
        assert (encap.y, encap.lo, encap.hi, encap.n) == (pytest.approx(700),
                                                          pytest.approx(630),
                                                          pytest.approx(840), 3)
        assert "Overlay" in summary_text(data) or "overlay" in summary_text(data)


def _trial(sut: str, scenario: str, rep: int, cost: float | None) -> Trial:
    return Trial.of(campaign_id=1, sut=sut, scenario=scenario, method="rplus", repetition=rep,
                 frame_size_b=64, rx_total_pps=1e5, busy_cycles_per_frame=cost, status="ok")


def test_encap_rows_pair_only_repetitions_measured_on_both_paths():
    trials = [_trial("x", "p2p", 0, 100), _trial("x", "p2p", 1, 110),
              _trial("x", "overlay", 1, 300), _trial("x", "overlay", 2, 500),
              _trial("y", "p2p", 0, 100)]  # no overlay: no row
    (r,) = encap_rows(trials)
    assert r.n_pairs == 1 and r.encap_cost is not None
    assert r.encap_cost.median == 190 and r.encap_cost.n == 1
    # every repetition of each side still gives its own spread
    assert r.overlay_cost is not None and r.overlay_cost.n == 2
    # no cost on one side: no encap cost, the row says so
    (r,) = encap_rows([_trial("x", "p2p", 0, None), _trial("x", "overlay", 0, 300)])
    assert r.encap_cost is None and r.n_pairs == 0
