"""End-to-end: a tiny campaign per SUT adapter, on real namespaces.

Needs root. Each adapter whose software is missing is skipped with the
reason, or fails under TURNOUT_REQUIRE_PEERS=1 (turnout.testpeers: the
setup installs them all); turnoutd waits for target/release/turnoutd and the turnout-gen
variants for target/release/turnout-gen.
"""

from __future__ import annotations

import sys

import pytest

from conftest import needs_root
from turnout import testpeers
from turnout.bench import RealBench
from turnout.build import built
from turnout.campaign import parse, run_campaign
from turnout.results import ResultsDB
from turnout.sut import SUTS, make_sut

PYGEN = [sys.executable, "-m", "turnout.measure.pygen"]
REAL_GEN = built("turnout-gen")


def _tiny(sut: str, scenarios: list[str], methods: list[str]) -> dict:
    return {
        "campaign": {"name": f"sys-{sut}", "duration_s": 0.3, "methods": methods,
                     "search": "binary", "search_width": 0.3, "latency_fractions": [0.5]},
        "matrix": {"suts": [sut], "scenarios": scenarios, "frame_sizes_b": [128],
                   "directions": ["uni"], "ports": [6], "pairs": [2]},
    }


def _run(tmp_path, sut: str, gen: list[str], scenarios: list[str], methods: list[str]):
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = parse(_tiny(sut, scenarios, methods))
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, RealBench(gen))
        assert c.status == "done"
        trials = db.trials(c.id)
        failed = [t for t in trials if t.status == "failed"]
        assert not failed, [t.reason for t in failed]
        ok = [t for t in trials if t.status == "ok"]
        assert ok, [t.reason for t in trials]
        for t in ok:
            assert t.sent > 0 and t.received > 0, t
            assert t.received <= t.sent and t.lost == t.sent - t.received
        results = db.results(c.id, status="ok")
        assert all(r.rate_total_pps > 0 for r in results if r.method == "rplus")
        host = db.host(c.host_id)
        assert host is not None and host.kernel and host.pinning
        return db.trials(c.id, status="ok"), db.suts(c.id)


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", ["wire", "bridge"])
def test_pygen_p2p_rplus_ndr_latency(tmp_path, sut):
    trials, suts = _run(tmp_path, sut, PYGEN, ["p2p"], ["rplus", "ndr", "latency"])
    assert {t.method for t in trials} == {"rplus", "ndr", "latency"}
    lat = [t for t in trials if t.method == "latency"]
    assert lat[0].latency_p50_ns and lat[0].latency_cdf
    assert suts[0].config.get("tester", "").endswith("pygen")
    assert "measure the tester" in suts[0].config["tester_note"]
    assert suts[0].config["tester_kernel_port"] == "af_packet"


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", [s for s in SUTS if s != "wire"])
def test_adapter_scenarios(tmp_path, sut):
    """Every adapter forwards p2p, v2v on veth virtual ports and port density.

    The real turnout-gen is used when built; v2v runs on veths (pygen has no
    memif), as memif interop is tested by the port and generator suites."""
    memif = make_sut(sut).supports_memif
    gen = [str(REAL_GEN)] if REAL_GEN.exists() and not memif else PYGEN
    trials, _ = _run(tmp_path, sut, gen, ["p2p", "v2v", "density"], ["rplus"])
    scen = {t.scenario for t in trials}
    assert {"p2p", "v2v"} <= scen
    if make_sut(sut).max_ports >= 6:
        assert "density" in scen
    cpu_threads = [c for t in trials for c in t.cpu]
    if make_sut(sut).pids.__func__ is not SUTS["bridge"].pids:  # type: ignore[attr-defined]
        assert cpu_threads, "a userspace switch reports its threads' CPU"


@needs_root
@pytest.mark.system
def test_real_turnout_gen_wire(tmp_path):
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    trials, suts = _run(tmp_path, "wire", [str(REAL_GEN)], ["p2p", "p2v", "nvsn"], ["rplus"])
    assert {t.scenario for t in trials} == {"p2p", "p2v", "nvsn"}
    assert not suts[0].config["tester"].endswith("pygen")
    for t in trials:
        if t.scenario != "nvsn":
            continue
        # the pairs pinned to one tester core run in one process (--pair):
        # every stream sent and reported, one process per core
        procs = t.extra["tester_setup"]["processes"]
        assert len(procs) + sum(p.count("--pair ") for p in procs) == t.point.pairs, procs
        assert t.extra["tester_core_sharing"] == 1, procs
        assert len(t.extra["streams"]) == t.point.pairs, t.extra["streams"]
        assert all(s["sent"] > 0 for s in t.extra["streams"]), t.extra["streams"]


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", ["bridge", "turnoutd"])
# serial: it runs R+ searches through a chain. Through the bridge the
# VNF's AF_XDP ports on veth are copy mode: a sendto() the kernel refuses
# while the veth peer's ring is full leaves frames in the transmit ring,
# and turnout-gen kicked them only when it next published, i.e. with the
# next trial's traffic: frames arrived 0.24-1.7 s late, were counted in
# the next trial (a 10 kpps trial "received" 9,426 of the 3,000 it sent)
# or, beside a CPU hog, an R+ trial got none back. turnout-gen now kicks
# what is left whenever it has nothing new to send. Delivery is asserted
# at a fixed 10 kpps; an R+ trial may lose what a starved VNF drops (a
# true result) but accounts for every frame; the trials wait RFC 2544's
# 2 s for frames in flight.
@pytest.mark.serial
def test_real_turnout_gen_loopback_chain(tmp_path, sut):
    """tester -> SUT -> turnout-gen fwd VNF -> SUT -> tester delivers frames
    (bridge: veth VNF ports; turnoutd: memif VNF ports)."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = _tiny(sut, ["loopback"], ["rplus", "fixed"])
    spec["campaign"]["return_wait_s"] = 2.0
    spec["matrix"]["rates_pps"] = [10_000]
    spec["matrix"]["vnfs"] = [1]
    spec["matrix"]["frame_sizes_b"] = [64, 1518]
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        assert {t.point.frame_size_b for t in trials} == {64, 1518}
        assert {t.method for t in trials} == {"rplus", "fixed"}
        for t in trials:
            assert t.received + t.lost == t.sent, t
            assert t.received > 0 or t.method == "rplus", t
            # the campaign's wait for frames in flight reaches the tester
            assert "--cooldown-s 2 " in t.extra["tester_setup"]["processes"][0]
            assert t.point.virtual_port == ("memif" if sut == "turnoutd" else "veth")
            # the chain VNF's own report, per trial: what it received,
            # forwarded and dropped, apart from the switch's loss
            (vnf,) = t.extra["vnfs"]
            assert "error" not in vnf, vnf
            assert vnf["received"] > 0 and vnf["received"] - vnf["forwarded"] == vnf["dropped"]
            # over the whole trial, warm-up included: not a subset of lost
            assert t.vnf_dropped == vnf["dropped"]
            assert any(c["role"] == "vnf" for c in t.cpu)


@needs_root
@pytest.mark.system
@pytest.mark.parametrize(("kernel_port", "logic"), [("af_xdp", "patch"),
                                                    ("af_packet", "bridge")])
def test_turnoutd_real_gen(tmp_path, kernel_port, logic):
    """The real turnoutd with the real turnout-gen: memif virtual ports,
    af_xdp or af_packet wires, patch or bridge logic; 64 B frames."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut("turnoutd").available()
    if why:
        testpeers.need(False, why)
    spec = _tiny("turnoutd", ["p2p", "p2v", "v2v"], ["rplus", "latency"])
    spec["matrix"]["frame_sizes_b"] = [64]
    spec["sut"] = {"turnoutd": {"kernel_port": kernel_port, "logic": logic}}
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        assert {(t.scenario, t.method) for t in trials} >= {
            ("p2p", "rplus"), ("p2v", "rplus"), ("v2v", "rplus"), ("v2v", "latency")}
        for t in trials:
            assert t.received > 0 and t.cpu, t
            assert t.tester_bound is not None
            assert t.extra["tester_bound_why"] or not t.tester_bound
            # CPU over the traffic window, the tester's from turnout-gen itself
            assert t.extra["cpu_window"] == "traffic"
            roles = {c["role"] for c in t.cpu}
            assert {"sut", "tester"} <= roles, roles
            # how its workers waited, by their own account
            ws = t.extra["sut_wake"]["workers"]
            assert ws and sum(w["packets"] for w in ws) > 0, ws
            assert all(w["regime"] in ("poll", "interrupt", "moderate") for w in ws), ws
            # and the budget they decided against (the report's "over the budget")
            assert all(w["budget_ns"] > 0 for w in ws), ws
            # where its lost frames went, by its own drop counters ("port reason")
            drops = t.extra["sut_drops"]
            assert all(len(k.split()) == 2 and n > 0 for k, n in drops.items()), drops
        assert {t.point.virtual_port for t in trials if t.scenario != "p2p"} == {"memif"}
        sut = db.suts(c.id)[0]
        assert f'kind = "{kernel_port}"' in sut.config["toml"]
        assert f'name = "{logic}"' in sut.config["toml"]
        assert sut.config["tester_kernel_port"] == "af_xdp"
        assert not sut.config["tester"].endswith("pygen") and "tester_note" not in sut.config


@needs_root
@pytest.mark.system
def test_testpmd_kernel_port_afxdp_runs_af_xdp(tmp_path):
    """``[sut.testpmd] kernel_port = "afxdp"`` (the spelling of tester_port
    in the same file) runs testpmd's net_af_xdp PMD on the veths, stored as
    af_xdp; before the options were typed it silently ran net_af_packet."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut("testpmd").available()
    if why:
        testpeers.need(False, f"testpmd: {why}")
    spec = _tiny("testpmd", ["p2p"], ["rplus"])
    spec["campaign"]["tester_port"] = "afxdp"
    spec["sut"] = {"testpmd": {"kernel_port": "afxdp"}}
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        sut = db.suts(c.id)[0]
        # what the trial saw, and testpmd's own account, when nothing came back
        assert trials and all(t.received > 0 for t in trials), (
            [(t.sent, t.received, t.unsent, t.tester_bound,
              {k: t.extra.get(k) for k in ("tx_attempts", "tx_pushback", "tester_bound_why",
                                           "streams", "cost_frames")}) for t in trials],
            sut.config.get("argv"))
        vdevs = [a for a in sut.config["argv"] if a.startswith("--vdev=")]
        assert len(vdevs) == 2 and all(a.startswith("--vdev=net_af_xdp") for a in vdevs), vdevs
        assert sut.config["options"] == {"kernel_port": "af_xdp"}


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", list(SUTS))
def test_bidirectional_with_the_real_tester(tmp_path, sut):
    """Both directions at once (one turnout-gen per port pair sending both
    ways), on every SUT: counts and latency per direction."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = _tiny(sut, ["p2p"], ["rplus", "latency"])
    spec["matrix"]["directions"] = ["bi"]
    spec["matrix"]["frame_sizes_b"] = [128]
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        assert {t.method for t in trials} >= {"rplus", "latency"}
        for t in trials:
            assert t.point.direction == "bi" and t.streams == 2
            by = {s["name"]: s for s in t.extra["streams"]}
            assert set(by) == {"t0>t1", "t1>t0"}, by
            for s in by.values():
                assert s["sent"] > 0 and s["received"] > 0, (sut, s)
                assert s["received"] + s["lost"] == s["sent"]
                assert s["latency_ns"]["p50"] > 0
            assert t.sent == sum(s["sent"] for s in by.values())
        lat = [t for t in trials if t.method == "latency"]
        r = db.results(c.id, method="rplus", status="ok")[0]
        # the latency load is half the aggregate R+, split over both directions
        assert lat[0].offered_total_pps == pytest.approx(0.5 * r.rate_total_pps)


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", [s for s in SUTS if not SUTS[s].direct])
# serial: the bridge's figure is the kernel time of the SUT's CPU, which any
# other test's softirqs on that CPU would add to
@pytest.mark.serial
def test_cost_per_packet_from_the_suts_own_accounting(tmp_path, sut):
    """Every SUT's busy cycles per frame, read from its own account during the
    traffic window of a saturating trial (measure/cost.py). For the Linux
    bridge that account is the kernel time of the SUT's CPU: it only counts
    the forwarding because RPS steers the ports' receive softirq there (the
    veth would run it on the sending tester's CPU), so a bridge figure far
    above zero shows the softirq landing on the SUT core."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = _tiny(sut, ["p2p"], ["rplus"])
    # the bridge's account is kernel time in 10 ms steps, 10 of them for a
    # figure: a longer window gives its R+ that on a loaded host too
    spec["campaign"]["duration_s"] = 1.5 if sut == "bridge" else 0.5
    spec["matrix"]["frame_sizes_b"] = [64]
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        (t,) = db.trials(c.id)
        assert t.status == "ok", t.reason
        cpf = t.busy_cycles_per_frame
        assert cpf is not None, t.extra.get("cost_why")
        # a frame through any switch costs more than 50 cycles and, at the
        # rates a tester reaches here, less than a million
        assert 50 < cpf < 1e6, cpf
        assert t.extra["cost_source"] and t.extra["cost_frames"] >= 1000
        (r,) = db.results(c.id, method="rplus")
        assert r.busy_cycles_per_frame == cpf
        # the kernel share of the SUT's CPUs is a figure or says why not
        assert t.extra["kernel_cpus"]
        assert "kernel_cycles_per_frame" in t.extra or t.extra["kernel_why"], t.extra
        if sut == "bridge":
            # kernel forwarding on the SUT's CPU: hundreds of cycles a frame;
            # its own account is its kernel share
            assert cpf > 300, cpf
            assert t.extra["kernel_cycles_per_frame"] == pytest.approx(cpf, rel=0.1)


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", ["wire", "turnoutd", "bridge"])
def test_round_trips_over_burst_sizes(tmp_path, sut):
    """Scenario rtt ("Virtualized networking framework" §4.5): bursts of N
    frames to a reflect server and back; every frame returns, and the round
    trip is measured."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    spec = _tiny(sut, ["rtt"], ["fixed"])
    spec["matrix"]["bursts"] = [4, 32]
    spec["matrix"]["rates_pps"] = [1000]
    spec["campaign"]["duration_s"] = 0.5
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        assert sorted(t.point.burst for t in trials) == [4, 32]
        for t in trials:
            # 1 kpps for 0.5 s, in bursts: ~500 frames out, all of them back
            assert 400 <= t.sent <= 600 and t.received == t.sent and t.lost == 0, t
            assert t.latency_mean_ns and t.latency_min_ns and t.latency_min_ns > 0
            (vnf,) = t.extra["vnfs"]
            assert vnf["name"].startswith("reflect") and "error" not in vnf, vnf


@needs_root
@pytest.mark.system
def test_ovs_dpdk_vhost_user_v2v_cell(tmp_path):
    """The default campaign's vhost-user cell on OVS-DPDK: v2v through two
    ``dpdkvhostuser`` ports turnout-gen's frontend connects to, at 64 and
    1518 B (no longer skipped: the ports' mtu_request), next to the memif
    cell, which OVS-DPDK skips with its reason."""
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut("ovs-dpdk").available()
    if why:
        testpeers.need(False, f"ovs-dpdk: {why}")
    spec = _tiny("ovs-dpdk", ["v2v"], ["rplus"])
    spec["matrix"]["scenarios"] = ["p2p"]
    spec["matrix"]["vhost_user_scenarios"] = ["v2v"]
    spec["matrix"]["frame_sizes_b"] = [64, 1518]
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        assert c.status == "done"
        trials = [t for t in db.trials(c.id) if t.scenario == "v2v"]
        bad = [t.reason for t in trials if t.status != "ok"]
        assert not bad, bad
        assert {t.point.frame_size_b for t in trials} == {64, 1518}
        for t in trials:
            assert t.point.virtual_port == "vhost-user", t
            assert t.sent > 0 and t.received > 0, t
            assert t.received <= t.sent
        (sut,) = {s.name: s for s in db.suts(c.id)}.values()
        assert "dpdkvhostuser" in str(sut.config), sut.config


@needs_root
@pytest.mark.system
def test_every_sut_gets_the_same_tester_buffers_and_placement(tmp_path):
    """Against the real switches: in one p2p cell
    turnoutd, OVS and testpmd get the same tester processes, ports and CPUs,
    each SUT's data path is pinned to the SUT's CPU and none of its other
    threads may run there (OVS's main, handler and revalidator threads did,
    until ovsdb-server and ovs-vswitchd were started off the SUT's CPUs);
    the report's set-up check says "yes"."""
    from turnout.report.queries import load_campaign
    from turnout.report.setup import fairness_table

    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    suts = ["turnoutd", "ovs", "testpmd"]
    for sut in suts:
        why = make_sut(sut).available()
        if why:
            testpeers.need(False, f"{sut}: {why}")
    spec = _tiny("same", ["p2p"], ["rplus"])
    spec["matrix"]["suts"] = suts
    spec["matrix"]["frame_sizes_b"] = [64]
    spec["sut"] = {"turnoutd": {"kernel_port": "af_xdp"}, "testpmd": {"kernel_port": "af_xdp"}}
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        assert all(t.status == "ok" for t in trials), [t.reason for t in trials]
        assert sorted(t.sut for t in trials) == sorted(suts)
        for t in trials:
            p = t.extra["sut_placement"]
            assert p["on"] and p["both"] == {}, (t.sut, p)
            assert t.extra["tester_setup"]["processes"], t.extra
        (row,) = fairness_table(load_campaign(db, c.id)).rows
        assert row[-1] == "yes", row
