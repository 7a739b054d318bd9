"""The openflow scenario's rule generator (turnout.ofrules) and its campaign
keys: deterministic text, the masks asked for, exactly one rule that the
tester's flows hit, and the same text for every SUT's ovs-ofctl."""

from __future__ import annotations

import ipaddress
import subprocess
from pathlib import Path

import pytest

from turnout import ofrules
from turnout.campaign import CampaignError, parse
from turnout.ofrules import HIT_PRIORITY, check_point, rule_set
from turnout.scenarios import Point


def _parse(line: str) -> tuple[int, dict[str, str], list[str]]:
    head, actions = line.split(",actions=")
    fields: dict[str, str] = {}
    for part in head.split(","):
        k, _, v = part.partition("=")
        fields[k] = v
    return int(fields.pop("priority")), fields, actions.split(",")


def _covers(net: str, addr: int) -> bool:
    if "/" in net:  # strict: the generator writes no bits outside the mask
        return ipaddress.IPv4Address(addr) in ipaddress.IPv4Network(net, strict=True)
    return int(ipaddress.IPv4Address(net)) == addr


def _matches(fields: dict[str, str], in_port: int, src: int, dst: int, sport: int,
             dport: int) -> bool:
    """The subset of the flow syntax the generator writes, on a UDP frame."""
    assert set(fields) <= {"udp", "in_port", "nw_src", "nw_dst", "tp_dst"}, fields
    assert "udp" in fields  # every rule is on UDP
    return (int(fields["in_port"]) == in_port
            and ("nw_src" not in fields or _covers(fields["nw_src"], src))
            and ("nw_dst" not in fields or _covers(fields["nw_dst"], dst))
            and ("tp_dst" not in fields or int(fields["tp_dst"]) == dport))


def _mask(fields: dict[str, str]) -> tuple[str, ...]:
    """The mask of a rule: its fields with their prefix lengths."""
    out = []
    for k in sorted(fields):
        v = fields[k]
        out.append(f"{k}/{v.split('/')[1]}" if "/" in v else k)
    return tuple(out)


@pytest.mark.parametrize(("rules", "masks"), [(1, 1), (100, 1), (100, 8), (10_000, 8),
                                              (10_000, 64), (300, 8)])
def test_rule_set_has_the_masks_and_one_hit_rule(rules, masks):
    rs = rule_set(rules, masks, 1, [2, 3])
    assert rs == rule_set(rules, masks, 1, [2, 3])  # deterministic
    lines = rs.lines()
    assert len(lines) == rules
    parsed = [_parse(x) for x in lines]
    # distinct flows (OpenFlow would merge equal match + priority)
    assert len({(p, tuple(sorted(f.items()))) for p, f, _ in parsed}) == rules
    assert len({_mask(f) for _, f, _ in parsed}) == masks
    # the tester's frames: 10.0.0.1 + i -> 10.0.0.2, UDP 1024 + i -> 1024
    # (turnout-gen --vary src-port,src-ip), on port 1; flow indices from
    # the first to past 10^5
    base_src = int(ipaddress.IPv4Address("10.0.0.1"))
    dst = int(ipaddress.IPv4Address("10.0.0.2"))
    for i in (0, 1, 2, 999, 65535, 65536, 99_999):
        hits = [(p, a) for p, f, a in parsed
                if _matches(f, 1, base_src + i, dst, (1024 + i) & 0xFFFF, 1024)]
        assert hits == [(HIT_PRIORITY, ["output:2", "output:3"])], (i, hits[:3])
        # from another port nothing matches
        assert not [p for p, f, _ in parsed if _matches(f, 2, base_src + i, dst, 1024, 1024)]
    # the hit rule is below every other: a classifier looks through every mask
    assert all(p > HIT_PRIORITY for p, _, _ in parsed[1:])
    assert rs.hit_priority == HIT_PRIORITY and lines[0].startswith(f"priority={HIT_PRIORITY},")


def test_rule_set_outputs_and_errors():
    assert rule_set(3, 1, 1, [2]).lines()[0].endswith("actions=output:2")
    assert rule_set(3, 1, 4, [1, 2, 3, 5]).lines()[0].endswith(
        "actions=output:1,output:2,output:3,output:5")
    for args, msg in [((0, 1, 1, [2]), "at least 1"), ((4, 8, 1, [2]), "every mask needs"),
                      ((100, 65, 1, [2]), "masks 65"), ((10, 1, 1, []), "at least one port"),
                      ((10, 1, 2, [2]), "not among"), ((10, 1, 1, [2, 2]), "each port once"),
                      ((10, 1, 0, [2]), "from 1")]:
        with pytest.raises(ValueError, match=msg):
            rule_set(*args)
    assert check_point(100, 8, 4) is None
    assert "at most 8" in (check_point(100, 8, 9) or "")


def test_every_sut_gets_the_same_text(tmp_path, monkeypatch):
    """install() hands ovs-ofctl the set's text as it is, whatever the target:
    turnoutd's unix socket or an OVS bridge."""
    seen: list[tuple[list[str], str]] = []

    def fake_run(cmd, **kw):
        seen.append((cmd, Path(cmd[-1]).read_text()))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    monkeypatch.setattr(ofrules.subprocess, "run", fake_run)
    rs = rule_set(1000, 8, 1, [2, 3, 4, 5])
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    ofrules.install(rs, "unix:/run/x/openflow.sock", tmp_path / "a")
    ofrules.install(rs, "tob", tmp_path / "b", netns="tosut")
    (c1, t1), (c2, t2) = seen
    assert t1 == t2 == rs.text
    assert c1[:4] == ["ovs-ofctl", "-O", "OpenFlow13", "add-flows"]
    assert c2[:4] == ["ip", "netns", "exec", "tosut"] and c2[4:8] == c1[:4]

    def failing(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 1, "", "ovs-ofctl: OFPT_ERROR bad match")

    monkeypatch.setattr(ofrules.subprocess, "run", failing)
    with pytest.raises(RuntimeError, match="bad match"):
        ofrules.install(rs, "tob", tmp_path / "b")


def test_dump_flows_parses_ovs_ofctl(monkeypatch):
    out = (" cookie=0x0, duration=1.5s, table=0, n_packets=12, n_bytes=720, priority=10,"
           "udp,in_port=1,nw_dst=10.0.0.2,tp_dst=1024 actions=output:2,output:3\n"
           " cookie=0x0, duration=1.5s, table=0, n_packets=0, n_bytes=0, "
           "udp,in_port=1,nw_dst=11.0.0.0/31 actions=output:2\n")
    monkeypatch.setattr(ofrules.subprocess, "run",
                        lambda cmd, **kw: subprocess.CompletedProcess(cmd, 0, out, ""))
    assert ofrules.dump_flows("br") == [
        (10, "udp,in_port=1,nw_dst=10.0.0.2,tp_dst=1024", 12),
        (32768, "udp,in_port=1,nw_dst=11.0.0.0/31", 0)]


def test_campaign_openflow_cells():
    spec = parse({"campaign": {"name": "of"},
                  "matrix": {"suts": ["turnoutd", "ovs"], "scenarios": ["p2p", "openflow"],
                             "rules": [1, 100], "masks": [1, 8], "outputs": [1, 4],
                             "flows": [1, 1000]}})
    of = [p for p in spec.points if p.scenario == "openflow"]
    # (1 rule, 8 masks) is left out: each mask needs a rule
    assert {(p.rules, p.masks, p.outputs) for p in of} == {
        (1, 1, 1), (1, 1, 4), (100, 1, 1), (100, 1, 4), (100, 8, 1), (100, 8, 4)}
    assert all(p.rules == p.masks == p.outputs == 0
               for p in spec.points if p.scenario == "p2p")
    keys = [w.key for w in spec.work()]
    assert len(keys) == len(set(keys))
    assert Point(scenario="openflow", rules=100, masks=8, outputs=4).stored_scenario() == \
        "openflow/r100/m8/o4"
    assert Point().stored_scenario() == "p2p"
    with pytest.raises(CampaignError, match="openflow scenario is not in"):
        parse({"campaign": {"name": "x"}, "matrix": {"scenarios": ["p2p"], "rules": [10]}})
    with pytest.raises(CampaignError, match="at most 8"):
        parse({"campaign": {"name": "x"},
               "matrix": {"scenarios": ["openflow"], "outputs": [9]}})


def test_report_rows_cost_over_ovs():
    """The bench-flows rows: per rule set, flows and SUT, R+ and the own-account
    cost, with each SUT's median cost over OVS userspace's at the same point."""
    from turnout.report.openflow import openflow_table, openflow_text, parse_label
    from turnout.report.queries import CampaignData
    from turnout.results import Campaign, Result

    def r(sut: str, scen: str, flows: int, rep: int, pps: float, cost: float,
          bound: int = 0) -> Result:
        return Result(sut=sut, scenario=scen, flows=flows, repetition=rep, method="rplus",
                      status="ok", rate_total_pps=pps, busy_cycles_per_frame=cost,
                      tester_bound=bound)

    a, b = "openflow/r100/m1/o1", "openflow/r10000/m8/o4"
    results = [
        r("turnoutd", a, 1, 0, 2e6, 100.0), r("turnoutd", a, 1, 1, 2.2e6, 120.0, bound=1),
        r("ovs", a, 1, 0, 1e6, 400.0), r("ovs", a, 1, 1, 1.1e6, 440.0),
        r("ovs-dpdk", a, 1, 0, 1.5e6, 210.0),
        r("turnoutd", b, 1000, 0, 1e6, 300.0),  # no OVS here: no ratio
        r("bridge", "p2p", 1, 0, 1e6, 50.0),  # not an openflow point
    ]
    data = CampaignData(db=None, campaign=Campaign(name="flows"),  # type: ignore[arg-type]
                        results=results, trials=[])
    t = openflow_table(data)
    assert [row[:6] for row in t.rows] == [
        ["100", "1", "1", "1", "64", "turnoutd"], ["100", "1", "1", "1", "64", "ovs"],
        ["100", "1", "1", "1", "64", "ovs-dpdk"], ["10000", "8", "4", "1000", "64", "turnoutd"]]
    # turnoutd: median 110 over OVS's 420; OVS-DPDK 210 / 420
    assert [row[9] for row in t.rows] == ["0.262", "–", "0.5", "–"]
    assert t.rows[0][7] == "2.1 [2–2.2]" and t.rows[0][8] == "110 [100–120]"
    assert t.flags == ["tester", "", "", ""]
    assert "cost ÷ ovs" in openflow_text(data)
    assert parse_label(b) == (10000, 8, 4) and parse_label("p2p") is None
    assert openflow_text(CampaignData(db=None, campaign=Campaign(name="x"),  # type: ignore[arg-type]
                                      results=results[-1:], trials=[])) == ""
