"""turnout report / compare / summary on a synthetic results database.

The database is written with the results API (ResultsDB, Result, Trial...)
from known formulas, so every plotted number can be checked against the
formula it came from. The values are invented for the test; nothing here is
a measurement.
"""

from __future__ import annotations

import io
import math
import statistics
from pathlib import Path

import pytest

from synth_db import done_campaign, rplus_db
from turnout.cli import main
from turnout.report import build_report, print_summary
from turnout.report.compare import compare_campaigns
from turnout.report.model import Spread, within_noise
from turnout.report.queries import merge_cdfs
from turnout.report.units import gbps_l1, wire_bits
from turnout.results import Campaign, Host, Result, ResultsDB, Sut, Trial

# ----------------------------------------------------------------- fixture
#: median packet rate at 64 B, Mpps
BASE_MPPS = {"wire": 0.50, "turnoutd": 0.47, "ovs": 0.36, "bridge": 0.30}
VPORT = {"wire": "", "turnoutd": "memif", "ovs": "veth", "bridge": "veth"}
#: every point is measured three times, at these multiples of its median
REP_FACTORS = (0.96, 1.0, 1.04)
SIZES = (64, 512, 1518)
FRACTIONS = (0.1, 0.5, 0.99)


def rate_pps(sut: str, size: int, *, vnfs: int = 0, pairs: int = 1, ports: int = 2,
             flows: int = 1, burst: int = 32, bi: bool = False, scale: float = 1.0) -> float:
    """The synthetic median throughput of a test point."""
    r = BASE_MPPS[sut] * 1e6 * (1 - size / 6000) * scale
    r /= 1 + 0.5 * vnfs  # longer chains are slower
    r *= min(pairs, 2)  # two cores: scales up to 2 pairs
    r *= 1 - 0.02 * math.log10(ports / 2)  # idle ports cost a little
    r *= 1 + 0.01 * math.log2(flows) + (0.02 if burst == 64 else 0.0)
    return r * (1.6 if bi else 1.0)


def p99_ns(sut: str, frac: float) -> float:
    """Synthetic p99 latency."""
    return {"wire": 8e3, "turnoutd": 10e3, "ovs": 25e3, "bridge": 40e3}[sut] * (1 + 4 * frac ** 4)


def cpu_util(sut: str, load: float) -> float:
    """SUT CPU (cores) at a fraction of R+: ovs polls, turnoutd follows load."""
    return {"wire": 0.0, "turnoutd": 0.05 + 0.9 * load, "ovs": 1.0,
            "bridge": 0.1 + 0.8 * load}[sut]


def _cdf(p50: float, p99: float) -> list[list[float]]:
    return [[p50 * 0.5, 0.01], [p50, 0.5], [(p50 + p99) / 2, 0.9], [p99, 0.99],
            [p99 * 2, 1.0]]


def fill_campaign(db: ResultsDB, name: str, *, scale: dict[str, float] | None = None,
                  with_everything: bool = True) -> int:
    """One campaign with every kind of result; ``scale[sut]`` multiplies its throughput."""
    scale = scale or {}
    hid = db.add_host(Host(hostname="bench-host", cpu_model="Synthetic CPU @ 2.0GHz", cores=2,
                           kernel="6.18.0", governor="performance", turbo="off", smt="off",
                           thp="madvise", git_commit="abc1234", tools={"turnout-gen": "0.1.0"},
                           pinning={"turnoutd/100": "1"}))
    cid = db.add_campaign(Campaign(name=name, spec={"sizes": list(SIZES)}, host_id=hid,
                                   file=f"{name}.toml", started_at=1.7e9, status="done"))
    sids = {s: db.add_sut(Sut(name=s, version=f"{s}-1.0", config={"logic": "bridge", "s": s}))
            for s in BASE_MPPS}
    n = 0

    def result(sut: str, scenario: str, size: int, method: str = "rplus", **kw) -> None:
        nonlocal n
        bi = kw.pop("direction", "uni") == "bi"
        for rep, f in enumerate(REP_FACTORS):
            n += 1
            v = rate_pps(sut, size, bi=bi, scale=scale.get(sut, 1.0), **kw) * f
            if method == "pdr":
                v *= 0.9
            db.add_result(Result.of(
                campaign_id=cid, sut_id=sids[sut], host_id=hid, key=f"r{n}", sut=sut,
                scenario=scenario, direction="bi" if bi else "uni", frame_size_b=size,
                method=method, repetition=rep, rate_total_pps=v, rx_total_pps=v, status="ok",
                virtual_port=VPORT[sut] if scenario != "p2p" else "", started_at=1.7e9 + n,
                **kw))

    for sut in BASE_MPPS:
        for size in SIZES:
            for flows in (1, 16):
                for burst in (32, 64):
                    result(sut, "p2p", size, flows=flows, burst=burst)
            result(sut, "p2p", size, direction="bi")
            result(sut, "p2p", size, method="pdr")
        if not with_everything:
            continue
        if sut != "wire":
            for vnfs in (1, 2, 3):
                for size in (64, 1518):
                    result(sut, "loopback", size, vnfs=vnfs)
            for pairs in (1, 2, 4):
                result(sut, "nvsn", 64, pairs=pairs)
            for ports in (2, 10, 100, 1000):
                result(sut, "density", 64, ports=ports)
        # latency at fractions of R+ and fixed-rate trials with CPU samples, p2p 64 B
        rplus = rate_pps(sut, 64, scale=scale.get(sut, 1.0))
        for frac in FRACTIONS:
            for rep, f in enumerate(REP_FACTORS):
                p99 = p99_ns(sut, frac) * f
                p50 = p99 / 3
                db.add_trial(Trial.of(
                    campaign_id=cid, sut_id=sids[sut], host_id=hid, key=f"lat-{sut}-{frac}-{rep}",
                    sut=sut, scenario="p2p", frame_size_b=64, method="latency",
                    load_fraction=frac, offered_total_pps=frac * rplus, repetition=rep,
                    sent=int(frac * rplus * 10), received=int(frac * rplus * 10) - rep,
                    rx_total_pps=frac * rplus, latency_min_ns=p50 / 2, latency_p50_ns=p50,
                    latency_p90_ns=(p50 + p99) / 2, latency_p99_ns=p99, latency_p999_ns=p99 * 1.5,
                    latency_max_ns=p99 * 2, latency_cdf=_cdf(p50, p99), jitter_ns=p50 / 10,
                    cpu=[{"tid": 1, "name": "worker", "util": cpu_util(sut, frac)}]
                    if sut != "wire" else [],
                    duration_s=10.0, status="ok", started_at=1.7e9))
    if with_everything:
        db.add_result(Result.of(campaign_id=cid, key="skip-1", sut="ovs-dpdk", scenario="v2v",
                             method="rplus", status="skipped",
                             reason="ovs-vswitchd-dpdk not installed", started_at=1.7e9))
    return cid


@pytest.fixture(scope="module")
def synthetic_db(tmp_path_factory) -> Path:
    """A database with campaigns 'base' and 'regressed' (turnoutd 30 % slower,
    bridge 1 % slower: within its 8 % spread). Read-only for the tests."""
    path = tmp_path_factory.mktemp("db") / "results.db"
    with ResultsDB(path) as db:
        fill_campaign(db, "base")
        fill_campaign(db, "regressed", scale={"turnoutd": 0.7, "bridge": 0.99},
                      with_everything=False)
    return path


@pytest.fixture(scope="module")
def report(synthetic_db, tmp_path_factory):
    """The report of campaign 'base' (built once: drawing takes seconds)."""
    return build_report(synthetic_db, "base", tmp_path_factory.mktemp("report"))


def _fig(out, key):
    for f in out.figures():
        if f.key == key:
            return f
    raise AssertionError(f"no figure {key}; have {[f.key for f in out.figures()]}")


def _series(panel, label):
    for s in panel.series:
        if s.label == label:
            return s
    raise AssertionError(f"no series {label}; have {[s.label for s in panel.series]}")


# ----------------------------------------------------------------- units
def test_wire_bits_and_gbps_l1():
    assert wire_bits(64) == 88 * 8
    assert gbps_l1(1e6, 64) == pytest.approx(0.704)
    # 10 GbE line rate for 60 B frames without FCS (64 B with it) is 14.88 Mpps
    assert gbps_l1(14.88e6, 60) == pytest.approx(10.0, rel=1e-3)


def test_within_noise_rule():
    a = Spread(100, 96, 104, 3)
    assert within_noise(a, Spread(95, 91, 99, 3)) is True  # diff 5 < width 8
    assert within_noise(a, Spread(80, 77, 83, 3)) is False
    assert within_noise(Spread(1, 1, 1, 1), Spread(2, 2, 2, 1)) is None  # spread unknown


def test_merge_cdfs_weights_by_packets():
    a = [[10.0, 0.5], [20.0, 1.0]]
    b = [[30.0, 1.0]]
    merged = dict(merge_cdfs([(a, 3.0), (b, 1.0)]))
    assert merged[10.0] == pytest.approx(0.375)
    assert merged[20.0] == pytest.approx(0.75)
    assert merged[30.0] == pytest.approx(1.0)


# ----------------------------------------------------------------- report data
def test_every_plot_has_png_and_svg(report):
    figs = report.figures()
    assert len(figs) >= 10
    for f in figs:
        for name in (f.png, f.svg):
            p = report.page.parent / name
            assert p.exists() and p.stat().st_size > 1000, name
    html = report.page.read_text()
    for f in figs:
        assert f'src="{f.png}"' in html and f'href="{f.svg}"' in html
    assert "http://" not in html and "https://" not in html  # nothing from the network
    assert "layer-1" in html  # the Gbps definition is on the page


def test_throughput_vs_frame_size_data(report):
    f = _fig(report, "throughput-p2p-uni")
    mpps_panel, gbps_panel = f.panels
    s = _series(mpps_panel, "turnoutd R+")
    assert s.xs() == [64.0, 512.0, 1518.0]
    for p in s.points:
        med = rate_pps("turnoutd", int(p.x)) / 1e6  # base point: flows 1, burst 32
        assert p.y == pytest.approx(med)
        assert p.lo == pytest.approx(med * 0.96) and p.hi == pytest.approx(med * 1.04)
        assert p.n == 3
    g = _series(gbps_panel, "turnoutd R+")
    for p in g.points:
        assert p.y == pytest.approx(gbps_l1(rate_pps("turnoutd", int(p.x)), int(p.x)))
    # PDR is its own (dashed) series
    assert _series(mpps_panel, "turnoutd PDR").style == "--"
    # wire 0.50 vs turnoutd 0.47 differ by less than their 8 % spread: marked;
    # ovs and bridge are clearly apart: not marked
    assert all(p.noisy for p in _series(mpps_panel, "wire R+").points)
    assert all(p.noisy for p in s.points)
    assert not any(p.noisy for p in _series(mpps_panel, "bridge R+").points)
    assert not any(p.noisy for p in _series(mpps_panel, "ovs R+").points)
    assert _fig(report, "throughput-p2p-bi")
    # one frame size and its own scale section: no throughput-vs-size figure
    keys = [f.key for f in report.section("throughput").figures]
    assert "throughput-nvsn-uni" not in keys and "throughput-density-uni" not in keys
    assert keys[:2] == ["throughput-p2p-uni", "throughput-p2p-bi"] or \
        keys[:2] == ["throughput-p2p-bi", "throughput-p2p-uni"]


def test_throughput_table_marks_noise_and_ratio(report):
    t = next(t for t in report.section("throughput").tables)
    rows = {(r[0], r[1], r[2], r[3], r[4], r[5]): (r, fl) for r, fl in zip(t.rows, t.flags,
                                                                             strict=True)}
    row, flag = rows[("p2p", "uni", "64", "", "turnoutd", "R+")]
    assert "within noise" in flag
    assert row[-1].startswith("0.94")  # paired ratio to the wire, 0.47 / 0.50
    row, flag = rows[("p2p", "uni", "64", "", "bridge", "R+")]
    assert flag == ""
    assert row[-1].startswith("0.6")


def test_loopback_vs_chain_length_data(report):
    f = _fig(report, "loopback-loopback-uni")
    assert [p.title for p in f.panels] == ["64 B", "1518 B"]
    s = _series(f.panels[0], "ovs [veth] R+")
    assert s.xs() == [1.0, 2.0, 3.0]
    assert s.ys() == pytest.approx([rate_pps("ovs", 64, vnfs=v) / 1e6 for v in (1, 2, 3)])


def test_scale_curves_data(report):
    n = _fig(report, "nvsn-nvsn-uni")
    s = _series(n.panels[0], "bridge [veth] R+")
    assert s.xs() == [1.0, 2.0, 4.0]
    assert s.ys() == pytest.approx([rate_pps("bridge", 64, pairs=p) / 1e6 for p in (1, 2, 4)])
    d = _fig(report, "density-density-uni")
    assert d.panels[0].xlog
    s = _series(d.panels[0], "turnoutd [memif] R+")
    assert s.xs() == [2.0, 10.0, 100.0, 1000.0]
    assert s.ys() == pytest.approx(
        [rate_pps("turnoutd", 64, ports=p) / 1e6 for p in (2, 10, 100, 1000)])


def test_latency_cdfs_and_percentiles(report):
    f = _fig(report, "latency-cdf-p2p-uni")
    assert [p.title for p in f.panels] == ["64 B, 0.99 × R+", "64 B, 0.5 × R+", "64 B, 0.1 × R+"]
    for panel, frac in zip(f.panels, (0.99, 0.5, 0.1), strict=True):
        assert panel.kind == "cdf" and panel.xlog
        s = _series(panel, "ovs")
        ys = s.ys()
        assert ys == sorted(ys) and ys[-1] == pytest.approx(1.0)
        # the median repetition's p99 is a step of the pooled curve, in µs
        xs = s.xs()
        assert any(x == pytest.approx(p99_ns("ovs", frac) / 1e3) for x in xs)
    t = next(t for t in report.section("latency-cdf").tables)
    row = next(r for r in t.rows if r[1:3] == ["bridge", "0.5"])
    assert row[0] == "64"
    p99 = p99_ns("bridge", 0.5) / 1e3
    assert row[t.columns.index("p99")].startswith(f"{p99:.3g} [")
    # wire 8 µs vs turnoutd 10 µs at 0.1×R+: 2 µs apart, wire spread 0.69 µs,
    # turnoutd 0.8 µs: not within noise
    flags = dict(zip((r[1] + "@" + r[2] for r in t.rows), t.flags, strict=True))
    assert flags["wire@0.1"] == ""


def test_latency_vs_offered_load_data(report):
    f = _fig(report, "latency-load-p2p-uni")
    p = f.panels[0]
    assert p.title == "64 B"
    assert p.ylog
    s = _series(p, "ovs p99")
    assert len(s.points) == 3
    rplus = rate_pps("ovs", 64) / 1e6
    assert s.xs() == pytest.approx([fr * rplus for fr in FRACTIONS], rel=1e-3)
    assert s.ys() == pytest.approx([p99_ns("ovs", fr) / 1e3 for fr in FRACTIONS])
    assert _series(p, "ovs p50").style == "-" and s.style == "--"


def test_cpu_vs_throughput_data(report):
    f = _fig(report, "cpu-p2p-uni")
    panel = f.panels[0]
    s = _series(panel, "turnoutd")
    rplus = rate_pps("turnoutd", 64) / 1e6
    assert s.xs() == pytest.approx([fr * rplus for fr in FRACTIONS], rel=1e-3)
    assert s.ys() == pytest.approx([100 * cpu_util("turnoutd", fr) for fr in FRACTIONS])
    assert _series(panel, "ovs").ys() == pytest.approx([100.0] * 3)
    assert all(s.label != "wire" for s in panel.series)  # no CPU samples: no series


def test_parameter_error_bars_data(report):
    f = _fig(report, "stability")
    mp = f.panels[0]
    assert mp.kind == "errbar" and mp.hline == 1.0
    pt = next(p for p in mp.series[0].points if p.x == "turnoutd · p2p uni")
    combos = [rate_pps("turnoutd", s, flows=fl, burst=b)
              for s in SIZES for fl in (1, 16) for b in (32, 64)]
    med = statistics.median(combos)
    assert pt.n == 12 and pt.y == 1.0
    assert pt.lo == pytest.approx(min(combos) / med)
    assert pt.hi == pytest.approx(max(combos) / med)
    # one combination (nvsn, density at 64 B only): no bar, only a table row
    assert not any("nvsn" in str(p.x) for p in mp.series[0].points)
    t = report.section("stability").tables[0]
    row = next(r for r in t.rows if r[0] == "turnoutd" and r[1:3] == ["p2p", "uni"])
    assert row[5:8] == ["64,512,1518", "1,16", "32,64"]


def test_fingerprint_suts_and_not_measured(report):
    sec = report.section("setup")
    host = sec.tables[0]
    assert ["CPU", "Synthetic CPU @ 2.0GHz"] in host.rows
    suts = next(t for t in sec.tables if t.key == "suts")
    assert {r[0] for r in suts.rows} == set(BASE_MPPS)
    assert all('"logic": "bridge"' in r[2] for r in suts.rows)
    nm = report.section("not-measured").tables[0]
    assert nm.rows[0][-1] == "ovs-vswitchd-dpdk not installed"


def test_sections_without_data_say_so(synthetic_db, tmp_path):
    out = build_report(synthetic_db, "regressed", tmp_path / "r2")
    for key in ("loopback", "latency-cdf", "latency-load", "cpu", "nvsn", "density"):
        sec = out.section(key)
        assert sec.empty and not sec.figures, key
    html = out.page.read_text()
    assert "No loopback (chained VNF) results in this campaign." in html
    assert not (tmp_path / "r2" / "loopback-loopback-uni.png").exists()


def test_unknown_campaign_and_missing_db(synthetic_db, tmp_path, capsys):
    assert main(["report", "--db", str(synthetic_db), "--campaign", "nope",
                 "-o", str(tmp_path / "x")]) == 2
    assert "no campaign 'nope'" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path / "none.db"), "-o", str(tmp_path / "x")]) == 2
    assert not (tmp_path / "none.db").exists()  # not created by asking


# ----------------------------------------------------------------- summary
def test_print_summary(synthetic_db):
    buf = io.StringIO()
    print_summary(synthetic_db, "base", file=buf)
    text = buf.getvalue()
    assert "campaign base" in text
    line = next(ln for ln in text.splitlines()
                if ln.startswith("p2p") and " bridge " in ln and " R+ " in ln and " 64 " in ln
                and "uni" in ln and "flows" not in ln and "burst" not in ln)
    assert f"{rate_pps('bridge', 64) / 1e6:.3g}" in line
    assert "Latency p99" in text and "ovs-vswitchd-dpdk not installed" in text
    assert "layer-1" in text


def test_report_cli_prints_summary(synthetic_db, tmp_path, capsys):
    out = tmp_path / "cli-out"
    assert main(["report", "--db", str(synthetic_db), "--campaign", "base", "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "Throughput" in text and str((out / "index.html").resolve()) in text
    assert (out / "index.html").exists()


# ----------------------------------------------------------------- compare
def test_compare_flags_regression_not_noise(synthetic_db):
    with ResultsDB(synthetic_db) as db:
        _, _, rows = compare_campaigns(db, "base", "regressed")
    by = {(r.sut, r.scenario, r.direction, r.frame_size_b, r.point, r.method): r for r in rows}
    r = by[("turnoutd", "p2p", "uni", 64, "", "R+")]
    assert r.verdict == "regression" and r.ratio == pytest.approx(0.7)
    r = by[("bridge", "p2p", "uni", 64, "", "R+")]
    assert r.verdict == "within noise" and r.ratio == pytest.approx(0.99)
    assert by[("ovs", "p2p", "uni", 1518, "", "R+")].verdict == "within noise"
    assert by[("ovs [veth]", "loopback", "uni", 64, "vnfs=1", "R+")].verdict == "only in A"
    # B improves when B is compared as the baseline
    with ResultsDB(synthetic_db) as db:
        _, _, rows = compare_campaigns(db, "regressed", "base")
    assert any(r.verdict == "improvement" and r.sut == "turnoutd" for r in rows)
    assert not any(r.verdict == "regression" for r in rows)


def test_compare_latency_is_lower_better(tmp_path):
    path = tmp_path / "lat.db"
    with ResultsDB(path) as db:
        for name, k in (("a", 1.0), ("b", 2.0)):
            cid = db.add_campaign(Campaign(name=name))
            for rep, f in enumerate(REP_FACTORS):
                db.add_trial(Trial.of(campaign_id=cid, key=f"{name}{rep}", sut="x",
                                      method="latency", load_fraction=0.5,
                                      offered_total_pps=1e5, repetition=rep,
                                      latency_p50_ns=1e3, latency_p99_ns=5e3 * k * f))
        _, _, rows = compare_campaigns(db, "a", "b")
    assert [(r.metric, r.verdict) for r in rows] == [("p99 µs @ 0.5×R+", "regression")]


def test_compare_cli_exit_codes(synthetic_db, capsys):
    db = str(synthetic_db)
    assert main(["compare", "base", "regressed", "--db", db]) == 0
    out = capsys.readouterr().out
    assert "REGRESSION" in out and "within noise" in out
    assert main(["compare", "base", "regressed", "--db", db, "--fail-on-regression"]) == 1
    assert main(["compare", "regressed", "base", "--db", db, "--fail-on-regression"]) == 0
    assert main(["compare", "base", "missing", "--db", db]) == 2


def test_empty_database_and_empty_campaign(tmp_path, capsys):
    path = tmp_path / "empty.db"
    with ResultsDB(path):
        pass
    assert main(["report", "--db", str(path), "-o", str(tmp_path / "o")]) == 2
    assert "no campaigns" in capsys.readouterr().err
    with ResultsDB(path) as db:
        db.add_campaign(Campaign(name="nothing"))
    out = build_report(path, None, tmp_path / "o")
    assert out.figures() == [] and out.files == []
    html = out.page.read_text()
    assert "No throughput results" in html and "<img" not in html
    buf = io.StringIO()
    print_summary(path, "nothing", file=buf)
    assert "no results in this campaign" in buf.getvalue()


def test_tester_bound_searches_are_flagged_as_lower_bounds(tmp_path):
    from turnout.report.queries import load_campaign, throughput_points
    from turnout.report.summary import summary_text

    with ResultsDB(tmp_path / "r.db") as db:
        cid = done_campaign(db, "tb")
        for rep, bound in enumerate((True, False)):
            rid = db.add_result(Result.of(campaign_id=cid, key=f"r{rep}", sut="turnoutd",
                                       scenario="v2v", method="rplus", repetition=rep,
                                       rate_total_pps=13e6, rx_total_pps=13e6, status="ok",
                                       tester_bound=int(bound)))
            db.add_trial(Trial.of(campaign_id=cid, result_id=rid, key=f"t{rep}", sut="turnoutd",
                               scenario="v2v", method="rplus", repetition=rep, sent=100,
                               received=100, status="ok", tester_bound=int(bound)))
        data = load_campaign(db, "tb")
        (p,) = throughput_points(data)
        assert p.tester_bound == 1 and p.spread.n == 2
        assert "tester1/2" in summary_text(data)


def _point_db(tmp_path, rows):
    """A campaign of R+ results: rows of (sut, scenario, virtual_port, repetition, rate)."""
    return rplus_db(tmp_path / "p.db", "pts", [(*r, None, None) for r in rows], file="p.toml")


def test_one_repetition_is_spread_unknown_and_never_ranked(tmp_path):
    """n = 1 has no spread: nothing may be ranked on it (was: within_noise
    returned None, read as 'not noisy', and the ranking looked clean)."""
    from turnout.report.points import load_campaign, throughput_points
    from turnout.report.throughput import throughput_table

    with _point_db(tmp_path, [("ovs", "p2p", "", 0, 1.0e6), ("bridge", "p2p", "", 0, 0.5e6)]) as db:
        pts = throughput_points(load_campaign(db, "pts"))
        assert all(p.unknown and not p.noisy for p in pts)
        t = throughput_table("t", "t", pts)
        assert all("not ranked" in f for f in t.flags)
        assert all(r[8] == "unknown" for r in t.rows)  # the spread column


def test_two_repetitions_that_differ_are_ranked(tmp_path):
    from turnout.report.queries import load_campaign, throughput_points

    rows = [("ovs", "p2p", "", r, v) for r, v in ((0, 1.0e6), (1, 1.02e6))]
    rows += [("bridge", "p2p", "", r, v) for r, v in ((0, 0.5e6), (1, 0.51e6))]
    with _point_db(tmp_path, rows) as db:
        pts = throughput_points(load_campaign(db, "pts"))
        assert not any(p.unknown or p.noisy for p in pts)


def test_ratios_only_to_a_reference_on_the_same_port_type(tmp_path):
    """v2v turnoutd on memif is not 'N × the wire' of veths (was: 22.2 ×)."""
    from turnout.report.queries import load_campaign, throughput_points

    rows = []
    for r in (0, 1):
        rows += [("wire", "v2v", "veth", r, 0.5e6), ("turnoutd", "v2v", "memif", r, 11e6),
                 ("bridge", "v2v", "veth", r, 0.3e6)]
    with _point_db(tmp_path, rows) as db:
        by = {p.key.sut: p for p in throughput_points(load_campaign(db, "pts"))}
        assert by["turnoutd"].ratio is None
        assert by["bridge"].ratio is not None and by["bridge"].ratio.median == pytest.approx(0.6)


def test_gbps_is_layer_1_only_on_ethernet_paths(tmp_path):
    from turnout.report.points import load_campaign, throughput_points
    from turnout.report.throughput import throughput_table
    from turnout.report.units import gbps_l1

    rows = [("turnoutd", "v2v", "memif", 0, 1e6), ("bridge", "v2v", "veth", 0, 1e6)]
    with _point_db(tmp_path, rows) as db:
        by = {p.key.sut: p for p in throughput_points(load_campaign(db, "pts"))}
        assert by["bridge"].gbps.median == pytest.approx(gbps_l1(1e6, 64))
        assert by["turnoutd"].gbps.median == pytest.approx(1e6 * 64 * 8 / 1e9)  # layer 2
        t = throughput_table("t", "t", list(by.values()))
        gb = {r[4]: r[9] for r in t.rows}
        assert gb["turnoutd [memif]"].endswith("L2") and not gb["bridge [veth]"].endswith("L2")
