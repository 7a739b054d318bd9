"""The overlay scenario on real namespaces (root): two emulated hosts, a
switch per host, VXLAN between them, next to the plain p2p path, for
turnoutd, the Linux bridge and OVS userspace. Everything is created by the
testbed and removed, also when a host's set-up fails half-way."""

from __future__ import annotations

import subprocess

import pytest

from conftest import needs_root
from turnout import testpeers
from turnout.bench import RealBench
from turnout.build import built
from turnout.campaign import parse, run_campaign
from turnout.report.overlay import encap_rows
from turnout.results import ResultsDB
from turnout.sut import make_sut

REAL_GEN = built("turnout-gen")


def _need(sut: str) -> None:
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut(sut).available()
    if why:
        testpeers.need(False, f"{sut}: {why}")
    for tool in ("ethtool", "bridge", "ip"):
        ok = subprocess.run(["which", tool], capture_output=True).returncode == 0
        testpeers.need(ok, f"{tool} not installed")


def _campaign(sut: str, scenarios: list[str]) -> dict:
    doc = {
        # the bridge's account is the kernel time of its CPUs in 10 ms steps
        # and needs 10 of them for a figure: 1.5 s windows give its R+ that
        # on a loaded host too. OVS's account is read over each host's
        # control socket (pmd-stats-show), whose main thread a loaded host
        # starves for hundreds of milliseconds: a figure needs two samples
        # inside the window, which 0.5 s did not hold beside a CPU hog
        "campaign": {"name": f"ov-{sut}", "duration_s": 0.5 if sut == "turnoutd" else 1.5,
                     "warmup_s": 0.3,
                     "methods": ["rplus", "fixed"], "layout": "auto", "repetitions": 1},
        "matrix": {"suts": [sut], "scenarios": scenarios, "frame_sizes_b": [64],
                   "directions": ["uni"], "rates_pps": [20000]},
    }
    if sut == "turnoutd":
        doc["sut"] = {"turnoutd": {"kernel_port": "af_xdp"}}
    return doc


def _leftovers() -> list[str]:
    """Namespaces and root links of this process's testbeds still present."""
    import os

    prefix = f"tn{os.getpid()}"
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    return [w for w in (ns + links).split() if w.startswith(prefix)]


@needs_root
@pytest.mark.system
@pytest.mark.parametrize("sut", ["turnoutd", "bridge", "ovs"])
def test_overlay_next_to_plain(tmp_path, sut):
    _need(sut)
    spec = parse(_campaign(sut, ["p2p", "overlay"]))
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        bad = [(t.scenario, t.method, t.reason) for t in trials if t.status != "ok"]
        assert not bad, bad
        over = [t for t in trials if t.scenario == "overlay"]
        assert {t.method for t in over} == {"rplus", "fixed"}
        for t in over:
            assert t.received > 0 and t.received <= t.sent, t
            cpf = t.busy_cycles_per_frame
            if sut == "bridge" and t.method == "fixed" and cpf is None:
                # 20 kpps for a fraction of a second is a few 10 ms steps of
                # the kernel's time: the account is too coarse, and says so —
                # never a cost of 0
                assert "below its resolution" in t.extra.get("cost_why", ""), t.extra
                continue
            # R+: every frame the overlay carried was forwarded twice, by
            # work that runs on the SUT's CPUs (RPS on every host-side veth,
            # the underlay's too; the kernel's vxlan decapsulates there);
            # kernel time counts also when it woke an idle CPU (measure/kernel.py)
            assert cpf is not None, t.extra.get("cost_why")
            assert 50 < cpf < 1e7, cpf
            assert "both hosts" in t.extra["cost_source"]
            if sut != "bridge":
                hosts = t.extra["overlay_hosts"]
                assert [h["host"] for h in hosts] == ["A", "B"]
                for h in hosts:
                    assert h.get("cycles_per_frame", 0) > 50, hosts
                    assert h["frames"] >= 1000, hosts
                # each host's figure in its column (schema v6)
                assert t.overlay_host_costs() == {h["host"]: h["cycles_per_frame"]
                                                  for h in hosts}
            else:
                assert "overlay_hosts" not in t.extra
                assert t.overlay_host_costs() == {}
        # 20 kpps crosses the overlay (a loaded 2-core host may lose a little)
        fixed = [t for t in over if t.method == "fixed"]
        assert all(t.received >= 0.9 * t.sent for t in fixed), [
            (t.sent, t.received) for t in fixed]
        (cfg,) = [s.config for s in db.suts(c.id) if "overlay" in s.config]
        assert cfg["overlay"]["vni"] == 100 and set(cfg["hosts"]) == {"A", "B"}
        rows = encap_rows(trials)
        assert {r.load for r in rows} == {"R+", "20000 pps"}
        # the bridge's 20 kpps trials may be below its tick account's resolution
        costed = [r for r in rows if sut != "bridge" or r.load == "R+"]
        assert costed and all(r.encap_cost is not None and r.n_pairs == 1 for r in costed)
    assert _leftovers() == []


@needs_root
@pytest.mark.system
def test_overlay_cleans_up_when_a_host_fails(tmp_path, monkeypatch):
    """Host B's set-up fails after host A's switch and the wires exist: the
    session is recorded as failed and every namespace, link and process is
    gone."""
    _need("bridge")
    from turnout import overlay
    from turnout.sut.linux_bridge import BridgeOverlayHost

    real = BridgeOverlayHost.setup

    def failing(self, tb, w, cpus):
        if w.name == "B":
            raise overlay.SutError("injected: host B cannot set up")
        real(self, tb, w, cpus)

    monkeypatch.setattr(BridgeOverlayHost, "setup", failing)
    spec = parse(_campaign("bridge", ["p2p", "overlay"]))
    spec.points = [p for p in spec.points if p.scenario == "overlay"]
    with ResultsDB(tmp_path / "r.db") as db:
        c = run_campaign(spec, db, RealBench([str(REAL_GEN)]))
        trials = db.trials(c.id)
        assert trials and all(t.status == "failed" for t in trials)
        assert all("injected" in (t.reason or "") for t in trials), [t.reason for t in trials]
    assert _leftovers() == []
    assert not list((tmp_path / "state").glob("*.json"))
