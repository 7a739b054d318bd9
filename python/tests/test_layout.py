"""Core layouts against fake CPU topologies (campaign/layout.py) and how the
SUT adapters and the bench use them; no traffic."""

from __future__ import annotations

import pytest

from turnout.bench import campaign_layout
from turnout.campaign import parse
from turnout.campaign.layout import Layout, LayoutError, plan
from turnout.campaign.spec import CampaignError
from turnout.sut import make_sut
from turnout.sut.base import SutPort, Topology
from turnout.sut.testpmd import lcores_for


def test_two_cpus_share_the_tester_core_with_vnfs():
    lay = plan([0, 1])
    assert (lay.tester, lay.sut, lay.vnf) == ((0,), (1,), (0,))
    assert lay.vnfs_share_tester and "share" in lay.note


def test_three_cpus_give_every_role_a_core():
    lay = plan([0, 1, 2])
    assert (lay.tester, lay.sut, lay.vnf) == ((0,), (2,), (1,))
    assert not lay.vnfs_share_tester


@pytest.mark.parametrize("n", [4, 6, 8, 16, 64])
def test_bigger_machines_split_every_cpu_once(n):
    cpus = list(range(n))
    lay = plan(cpus)
    roles = [*lay.tester, *lay.sut, *lay.vnf]
    assert sorted(roles) == cpus  # every CPU used, none twice
    assert len(lay.sut) == max(1, n // 4)
    assert len(lay.tester) >= len(lay.vnf) >= 1
    assert max(lay.tester) < min(lay.sut)  # the SUT at the end, away from CPU 0
    # streams and VNFs spread round robin over their cores
    assert {lay.tester_cpu(i) for i in range(len(lay.tester))} == set(lay.tester)
    assert lay.vnf_cpu(len(lay.vnf)) == lay.vnf[0]


def test_sparse_cpu_sets_and_fixed_sut_share():
    lay = plan([2, 5, 7, 9, 11, 12], sut_cores=2)
    assert lay.sut == (11, 12) and lay.sut_cpus == "11,12"
    with pytest.raises(LayoutError):
        plan([0])
    with pytest.raises(LayoutError):
        plan([0, 1, 2, 3], sut_cores=3)


def _spec(extra: dict) -> dict:
    return {"campaign": {"name": "x", **extra},
            "matrix": {"suts": ["wire"], "scenarios": ["p2p"]}}


def test_campaign_layout_auto_or_named_cores(monkeypatch):
    import turnout.bench as bench

    monkeypatch.setattr(bench, "available_cpus", lambda: list(range(8)))
    lay = campaign_layout(parse(_spec({"layout": "auto"})))
    assert lay.sut == (6, 7) and lay.tester == (0, 1, 2, 3) and lay.vnf == (4, 5)
    lay = campaign_layout(parse(_spec({"layout": "auto", "sut_cores": 3})))
    assert lay.sut == (5, 6, 7)
    named = campaign_layout(parse(_spec({"tester_cpu": 0, "sut_cpus": "1"})))
    assert named == Layout((0,), (1,), (0,))
    with pytest.raises(CampaignError):
        parse(_spec({"layout": "auto", "sut_cpus": "1"}))
    with pytest.raises(CampaignError):
        parse(_spec({"layout": "manual"}))
    with pytest.raises(CampaignError):
        parse(_spec({"sut_cores": 2}))


def test_suts_use_every_sut_core():
    topo = Topology(ns="n", ports=[SutPort(name=f"p{i}", kind="veth", iface=f"v{i}")
                                   for i in range(4)],
                    xconnects=[("p0", "p1"), ("p2", "p3")], cpus="2,3")
    cfg = make_sut("turnoutd").render_config(topo, "/s")  # type: ignore[attr-defined]
    assert cfg.count("[[workers]]") == 2 and "cpu = 2" in cfg and "cpu = 3" in cfg
    assert [ln for ln in cfg.splitlines() if ln.startswith("worker")] == [
        "worker = 0", "worker = 1", "worker = 0", "worker = 1"]
    assert lcores_for([1]) == (0, "0,1")
    assert lcores_for([0]) == (1, "1,0")
    assert lcores_for([2, 3]) == (0, "0,2,3")
