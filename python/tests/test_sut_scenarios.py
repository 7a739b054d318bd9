"""``[sut.NAME] scenarios``: a campaign runs one SUT in some scenarios only,
and the others are skipped with the campaign's reason, before any testbed."""

from __future__ import annotations

import pytest

from turnout.campaign.spec import CampaignError, parse
from turnout.scenarios import Point, Unsupported, check, excluded
from turnout.sut import make_sut


def _doc(**sut: object) -> dict:
    return {"campaign": {"name": "t"},
            "matrix": {"suts": ["wire", "ovs-dpdk"], "scenarios": ["p2p", "v2v"]},
            "sut": {"ovs-dpdk": sut}}


def test_a_sut_limited_to_some_scenarios_skips_the_others_with_the_reason() -> None:
    spec = parse(_doc(scenarios=["v2v"], scenarios_reason="slow path only here"))
    sut = make_sut("ovs-dpdk", spec.sut_options["ovs-dpdk"])
    assert excluded(Point(scenario="v2v"), sut) is None
    assert excluded(Point(scenario="p2p"), sut) == "slow path only here"
    with pytest.raises(Unsupported, match="slow path only here"):
        check(Point(scenario="p2p"), sut, set())
    # another SUT of the same campaign is not limited
    assert excluded(Point(scenario="p2p"), make_sut("wire", None)) is None


def test_without_a_reason_the_skip_names_the_key() -> None:
    spec = parse(_doc(scenarios=["v2v"]))
    sut = make_sut("ovs-dpdk", spec.sut_options["ovs-dpdk"])
    why = excluded(Point(scenario="p2p"), sut)
    assert why is not None and "[sut.ovs-dpdk] scenarios" in why and "v2v" in why


@pytest.mark.parametrize("opts, msg", [
    ({"scenarios": []}, "non-empty list"),
    ({"scenarios": "v2v"}, "non-empty list"),
    ({"scenarios": ["v2x"]}, "unknown scenario 'v2x'"),
    ({"scenarios_reason": "why"}, "with scenarios"),
    ({"scenarios": ["v2v"], "scenarios_reason": ""}, "non-empty string"),
])
def test_bad_scenario_lists_are_refused(opts: dict, msg: str) -> None:
    with pytest.raises(CampaignError, match=msg):
        parse(_doc(**opts))


def test_the_default_campaign_runs_ovs_dpdk_in_v2v_only() -> None:
    from pathlib import Path

    from turnout.campaign.spec import load

    root = Path(__file__).resolve().parents[2]
    spec = load(root / "campaigns" / "default.toml")
    sut = make_sut("ovs-dpdk", spec.sut_options["ovs-dpdk"])
    ran = {p.scenario for p in spec.points if excluded(p, sut) is None}
    assert ran == {"v2v"}
    assert any(p.virtual_port == "vhost-user" for p in spec.points)


def test_a_cut_memif_cell_names_the_missing_port_and_cell_port_says_which() -> None:
    """OVS-DPDK limited to v2v/vhost-user: its memif cells are cut with "no
    memif ports", not the campaign's reason (about its veth cells); cell_port
    is the port the runner stores with a cell that never came up: the
    cell's own kind, or with the SUT what build would give it."""
    from turnout.scenarios import cell_port

    spec = parse(_doc(scenarios=["v2v/vhost-user"], scenarios_reason="net_af_packet cells"))
    dpdk = make_sut("ovs-dpdk", spec.sut_options["ovs-dpdk"])
    why = excluded(Point(scenario="v2v"), dpdk, "memif")
    assert why is not None and why.startswith("ovs-dpdk has no memif ports")
    assert "net_af_packet" not in why and "v2v/vhost-user" in why
    # a cell without virtual ports keeps the campaign's reason
    assert excluded(Point(scenario="p2p"), dpdk, "memif") == "net_af_packet cells"
    # a vhost-user campaign's v2v cell is not a memif cell
    assert excluded(Point(scenario="v2v"), dpdk, "vhost-user") == "net_af_packet cells"
    assert excluded(Point(scenario="v2v", virtual_port="vhost-user"), dpdk) is None
    ovs, td = make_sut("ovs", None), make_sut("turnoutd", None)
    for p, kind, sut, port in (
            (Point(scenario="p2p"), "memif", None, ""),
            (Point(scenario="loopback", vnfs=0), "memif", None, ""),
            (Point(scenario="loopback", vnfs=1), "memif", None, "memif"),
            (Point(scenario="v2v"), "memif", None, "memif"),
            (Point(scenario="v2v"), "memif", td, "memif"),
            (Point(scenario="v2v"), "memif", ovs, "veth"),  # build's fallback
            (Point(scenario="v2v", virtual_port="vhost-user"), "memif", ovs, "veth"),
            (Point(scenario="v2v", virtual_port="vhost-user"), "memif", dpdk, "vhost-user"),
            (Point(scenario="v2v"), "vhost-user", td, "vhost-user"),
            (Point(scenario="openflow"), "memif", td, ""),
            (Point(scenario="openflow", virtual_port="memif"), "memif", ovs, "memif")):
        assert cell_port(p, kind, sut) == port, (p, kind, sut, port)
