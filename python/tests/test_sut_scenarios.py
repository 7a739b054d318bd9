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
