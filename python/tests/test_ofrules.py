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
from turnout.ofrules import BULK_COOKIE, HIT_PRIORITY, bulk_lines, check_point, rule_set
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
    assert set(fields) <= {"udp", "in_port", "nw_src", "nw_dst", "tp_src", "tp_dst"}, fields
    assert "udp" in fields  # every rule is on UDP
    return (int(fields["in_port"]) == in_port
            and ("nw_src" not in fields or _covers(fields["nw_src"], src))
            and ("nw_dst" not in fields or _covers(fields["nw_dst"], dst))
            and ("tp_src" not in fields or int(fields["tp_src"]) == sport)
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


@pytest.mark.parametrize(("acl", "at"), [(1, "above"), (1000, "above"), (1000, "below"),
                                         (100_000, "above")])
def test_acl_rules_tell_the_flows_apart_and_match_none(acl, at):
    """The ACL option: A more rules on nw_src/32 + nw_dst + tp_src, above
    or below the hit rule, sources spread over the tester's first 2^20
    flows; no flow of the tester matches one, the hit rule still takes
    them all. (The real tester through real switches: test_openflow_system's
    ACL case counts the rules' packets.)"""
    rs = rule_set(100, 1, 1, [2], acl=acl, acl_at=at)
    lines = rs.lines()
    assert len(lines) == 100 + acl and (rs.acl, rs.acl_at) == (acl, at)
    parsed = [_parse(x) for x in lines]
    acls = parsed[100:]
    prio = ofrules.ACL_ABOVE_PRIORITY if at == "above" else ofrules.ACL_BELOW_PRIORITY
    assert {p for p, _, _ in acls} == {prio}
    if at == "above":
        assert prio > max(p for p, _, _ in parsed[:100])
    else:
        assert prio < HIT_PRIORITY
    # one more mask, the ACL's: it looks at the source address and port
    assert {_mask(f) for _, f, _ in acls} == {
        ("in_port", "nw_dst", "nw_src", "tp_src", "udp")}
    assert len({(p, tuple(sorted(f.items()))) for p, f, _ in parsed}) == 100 + acl
    # the tester's flows (turnout-gen --vary src-port,src-ip, the bench's
    # TESTER_VARY): flow i from 10.0.0.1 + i, UDP 1024 + i (mod 2^16)
    assert ofrules.TESTER_VARY == "src-port,src-ip"
    base_src = int(ipaddress.IPv4Address("10.0.0.1"))
    dst = int(ipaddress.IPv4Address("10.0.0.2"))
    srcs = {int(ipaddress.IPv4Address(f["nw_src"])) - base_src for _, f, _ in acls}
    assert len(srcs) == acl and max(srcs) < ofrules.ACL_SPAN
    # flows on and next to every ACL source (and past the port's wrap)
    idx = sorted({i + d for i in srcs for d in (-1, 0, 1) if i + d >= 0}
                 | {0, 64_511, 64_512, 65_536, 999_999})[:3000]
    by_src: dict[int, list] = {}
    for p, f, a in acls:  # an ACL rule can only match a frame from its source
        by_src.setdefault(int(ipaddress.IPv4Address(f["nw_src"])), []).append((p, f, a))
    for i in idx:
        frame = (1, base_src + i, dst, (1024 + i) & 0xFFFF, 1024)
        cand = parsed[:100] + by_src.get(base_src + i, [])
        hits = [(p, a) for p, f, a in cand if _matches(f, *frame)]
        assert hits == [(HIT_PRIORITY, ["output:2"])], (i, hits)
    # yet an ACL rule matches its source with another port (it does look)
    _, f0, _ = acls[-1]
    i = int(ipaddress.IPv4Address(f0["nw_src"])) - base_src
    assert _matches(f0, 1, base_src + i, dst, (1024 + i + 0x8000) & 0xFFFF, 1024)
    assert check_point(100, 1, 1, acl, at) is None


def test_acl_errors():
    for kw, msg in [({"acl": 10}, "both or neither"), ({"acl_at": "above"}, "both or neither"),
                    ({"acl": 10, "acl_at": "middle"}, "above or below"),
                    ({"acl": (1 << 20) + 1, "acl_at": "above"}, "1..")]:
        with pytest.raises(ValueError, match=msg):
            rule_set(10, 1, 1, [2], **kw)
    assert "not above or below" in (check_point(10, 1, 1, 5, "") or "")
    assert "without acl" in (check_point(10, 1, 1, 0, "below") or "")
    assert "0.." in (check_point(10, 1, 1, -1, "below") or "")


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


def test_campaign_openflow_paths_and_set_tables():
    """openflow_paths runs each set on p2p and v2v (vhost-user, memif); a
    set given as a table narrows the flows and paths of that set only."""
    spec = parse({"campaign": {"name": "of"},
                  "matrix": {"suts": ["turnoutd", "ovs", "ovs-dpdk"], "scenarios": ["openflow"],
                             "flows": [1, 1000],
                             "openflow_paths": ["p2p", "v2v/vhost-user", "v2v/memif"],
                             "openflow_sets": [
                                 [100, 1, 1],
                                 {"rules": 100000, "masks": 1, "outputs": 1,
                                  "flows": [1000], "paths": ["p2p"]},
                                 {"rules": 100, "masks": 1, "outputs": 2,
                                  "paths": ["v2v/vhost-user"], "flows": [1000000]}]}})
    got = {(p.rules, p.masks, p.outputs, p.flows, p.virtual_port) for p in spec.points}
    assert got == {(100, 1, 1, f, vp) for f in (1, 1000) for vp in ("", "vhost-user", "memif")} \
        | {(100000, 1, 1, 1000, ""), (100, 1, 2, 1000000, "vhost-user")}
    assert len(spec.points) == len(got)
    keys = [w.key for w in spec.work()]
    assert len(keys) == len(set(keys))
    assert Point(scenario="openflow", rules=100, masks=1, outputs=2,
                 virtual_port="vhost-user").stored_scenario() == "openflow/v2v/r100/m1/o2"
    for bad, msg in (
            ({"openflow_sets": [{"rules": 10, "masks": 1, "outputs": 1, "acl": 5}]},
             "not above or below"),
            ({"openflow_sets": [{"rules": 10, "masks": 1, "outputs": 1, "acl": "5",
                                 "acl_at": "above"}]}, "acl an integer"),
            ({"openflow_paths": ["p2v"]}, "is not one of"),
            ({"openflow_paths": ["p2p"], "openflow_sets": [
                {"rules": 10, "masks": 1, "outputs": 1, "paths": ["v2v/memif"]}]},
             "not in matrix.openflow_paths"),
            ({"openflow_sets": [{"rules": 10, "masks": 1}]}, "a table of rules"),
            ({"openflow_sets": [{"rules": 10, "masks": 1, "outputs": 1, "flows": [0]}]},
             "flows must be"),
            ({"openflow_sets": [[10, 1, 1], {"rules": 10, "masks": 1, "outputs": 1}]},
             "listed twice")):
        with pytest.raises(CampaignError, match=msg):
            parse({"campaign": {"name": "x"}, "matrix": {"scenarios": ["openflow"], **bad}})
    with pytest.raises(CampaignError, match="openflow scenario is not in"):
        parse({"campaign": {"name": "x"},
               "matrix": {"scenarios": ["p2p"], "openflow_paths": ["p2p"]}})


def test_campaign_openflow_acl_sets():
    """A set's table may add ACL rules (acl, acl_at): a point, a stored
    scenario and a work key of its own; sets may come next to the product
    of rules/masks/outputs (flows-full.toml)."""
    spec = parse({"campaign": {"name": "of"},
                  "matrix": {"suts": ["turnoutd", "ovs"], "scenarios": ["openflow"],
                             "flows": [1, 1000], "rules": [100], "masks": [1], "outputs": [1],
                             "openflow_paths": ["p2p", "v2v/vhost-user"],
                             "openflow_sets": [
                                 {"rules": 100, "masks": 1, "outputs": 1, "acl": 1000,
                                  "acl_at": "above", "flows": [1, 1000000]},
                                 {"rules": 100, "masks": 1, "outputs": 1, "acl": 1000,
                                  "acl_at": "below", "paths": ["p2p"]}]}})
    got = {(p.rules, p.acl, p.acl_at, p.flows, p.virtual_port) for p in spec.points}
    assert got == ({(100, 0, "", f, vp) for f in (1, 1000) for vp in ("", "vhost-user")}
                   | {(100, 1000, "above", f, vp) for f in (1, 1000000)
                      for vp in ("", "vhost-user")}
                   | {(100, 1000, "below", f, "") for f in (1, 1000)})
    keys = [w.key for w in spec.work()]
    assert len(keys) == len(set(keys))
    p = next(p for p in spec.points if p.acl_at == "below")
    assert p.stored_scenario() == "openflow/r100/m1/o1/acl1000-below"
    # the listed set equal to the product's: listed twice
    with pytest.raises(CampaignError, match="listed twice"):
        parse({"campaign": {"name": "x"},
               "matrix": {"scenarios": ["openflow"], "rules": [100],
                          "openflow_sets": [[100, 1, 1]]}})


def test_openflow_v2v_cells_skip_suts_without_the_ports():
    """OVS userspace has no vhost-user ports and OVS no memif: those cells
    have no row (Unsupported with the reason), never a fallback to veths."""
    from turnout.scenarios import Unsupported, check
    from turnout.sut import make_sut

    roles = {"bidir", "fwd", "reflect"}
    vh = Point(scenario="openflow", rules=10, masks=1, outputs=1, virtual_port="vhost-user")
    mf = Point(scenario="openflow", rules=10, masks=1, outputs=1, virtual_port="memif")
    check(vh, make_sut("turnoutd"), roles)
    check(mf, make_sut("turnoutd"), roles)
    check(vh, make_sut("ovs-dpdk"), roles)
    with pytest.raises(Unsupported, match="no vhost-user ports"):
        check(vh, make_sut("ovs"), roles)
    for s in ("ovs", "ovs-dpdk"):
        with pytest.raises(Unsupported, match="no memif ports"):
            check(mf, make_sut(s), roles)


def test_report_rows_cost_over_ovs():
    """The bench-flows rows: per path, rule set, flows and SUT, R+ and the
    own-account cost, with turnoutd's median cost over the same path's OVS
    (p2p: OVS userspace; v2v/vhost-user: OVS-DPDK; memif: none), and the
    SUT threads' CPU time split into user and system per frame."""
    from turnout.report.openflow import (
        openflow_table,
        openflow_text,
        parse_acl,
        parse_label,
        parse_path,
        ratio_table,
    )
    from turnout.report.queries import CampaignData
    from turnout.results import Campaign, Result, Trial

    results: list[Result] = []
    trials: list[Trial] = []

    def r(sut: str, scen: str, flows: int, rep: int, pps: float, cost: float,
          bound: int = 0, vp: str = "", cpu: tuple[float, float] | None = None) -> None:
        rid = len(results) + 1
        results.append(Result.of(sut=sut, scenario=scen, flows=flows, repetition=rep,
                              method="rplus", status="ok", rate_total_pps=pps,
                              busy_cycles_per_frame=cost, tester_bound=bound, virtual_port=vp,
                              id=rid))
        if cpu is not None:  # 1000 frames received, a 1 GHz clock: 1 ms -> 1000 cyc/frame
            trials.append(Trial.of(sut=sut, scenario=scen, method="rplus", status="ok",
                                result_id=rid, received=1000, rx_total_pps=pps,
                                extra={"cycles_hz": 1e9},
                                cpu=[{"role": "sut", "user_s": cpu[0], "sys_s": cpu[1]},
                                     {"role": "tester", "user_s": 9.0, "sys_s": 9.0}]))

    a, b = "openflow/r100/m1/o1", "openflow/r10000/m8/o4"
    v = "openflow/v2v/r100/m1/o1"
    r("turnoutd", a, 1, 0, 2e6, 100.0, cpu=(0.002, 0.006))
    r("turnoutd", a, 1, 1, 2.2e6, 120.0, bound=1, cpu=(0.002, 0.006))
    r("ovs", a, 1, 0, 1e6, 400.0, cpu=(0.004, 0.004))
    r("ovs", a, 1, 1, 1.1e6, 440.0)
    r("ovs-dpdk", a, 1, 0, 1.5e6, 210.0)
    r("turnoutd", b, 1000, 0, 1e6, 300.0)  # no OVS here: no ratio
    r("turnoutd", v, 1, 0, 5e6, 50.0, vp="vhost-user", cpu=(0.001, 0.0))
    r("ovs-dpdk", v, 1, 0, 4e6, 200.0, vp="vhost-user")
    r("turnoutd", v, 1, 0, 6e6, 40.0, vp="memif")
    # the same rules with 1000 ACL rules over the hit rule: a point of its own
    acl = "openflow/r100/m1/o1/acl1000-above"
    r("turnoutd", acl, 1, 0, 1e6, 300.0, cpu=(0.003, 0.006))
    r("ovs", acl, 1, 0, 5e5, 600.0, cpu=(0.012, 0.004))
    r("bridge", "p2p", 1, 0, 1e6, 50.0)  # not an openflow point
    data = CampaignData(db=None, campaign=Campaign(name="flows"),  # type: ignore[arg-type]
                        results=results, trials=trials)
    t = openflow_table(data)
    assert t.columns[4] == "ACL" and t.columns[14:] == ["cost ÷ OVS (total)",
                                                         "user ÷ OVS (own)"]
    assert [row[:8] for row in t.rows] == [
        ["p2p veth", "100", "1", "1", "–", "1", "64", "turnoutd"],
        ["p2p veth", "100", "1", "1", "–", "1", "64", "ovs"],
        ["p2p veth", "100", "1", "1", "–", "1", "64", "ovs-dpdk"],
        ["p2p veth", "100", "1", "1", "1000 above", "1", "64", "turnoutd"],
        ["p2p veth", "100", "1", "1", "1000 above", "1", "64", "ovs"],
        ["p2p veth", "10000", "8", "4", "–", "1000", "64", "turnoutd"],
        ["v2v vhost-user", "100", "1", "1", "–", "1", "64", "turnoutd [vhost-user]"],
        ["v2v vhost-user", "100", "1", "1", "–", "1", "64", "ovs-dpdk [vhost-user]"],
        ["v2v memif", "100", "1", "1", "–", "1", "64", "turnoutd [memif]"]]
    # p2p: turnoutd median 110 over OVS's 420, OVS-DPDK 210 / 420; with the
    # ACL: 300 / 600; v2v vhost-user: 50 over OVS-DPDK's 200; memif: nothing
    assert [row[14] for row in t.rows] == ["0.262", "–", "0.5", "0.5", "–", "–", "0.25", "–",
                                           "–"]
    # the user-space (own work) ratio next to it: turnoutd's 2000 user
    # cycles per frame over OVS's 4000; 3000 / 12000 with the ACL; "–"
    # where either has no CPU sample
    assert [row[15] for row in t.rows] == ["0.5", "–", "–", "0.25", "–", "–", "–", "–", "–"]
    assert t.rows[0][9] == "2.1 [2–2.2]" and t.rows[0][10] == "110 [100–120]"
    # user / system cycles per frame of the SUT's threads only (not the tester's)
    assert t.rows[0][11:14] == ["2000 [2000–2000]", "6000 [6000–6000]", "75"]
    assert t.rows[1][11:14] == ["4000", "4000", "50"]
    assert t.rows[2][11:14] == ["–", "–", "–"]
    assert t.rows[6][11:14] == ["1000", "0", "0"]
    assert t.flags == ["tester", "", "", "", "", "", "", "", ""]
    rt = ratio_table(data)
    assert [row[:5] for row in rt.rows] == [
        ["p2p veth", "OVS userspace (dpif-netdev, afxdp ports)", "2", "0.381 [0.262–0.5]",
         "0.375 [0.25–0.5]"],
        ["v2v vhost-user", "OVS-DPDK (dpif-netdev, dpdkvhostuser ports)", "1", "0.25", "–"],
        ["v2v memif", "no OVS row: OVS has no memif ports", "0", "–", "–"]]
    assert [row[5:] for row in rt.rows] == [["71", "38"], ["0", "–"], ["–", "–"]]
    text = openflow_text(data)
    assert "cost ÷ OVS (total)" in text and "turnoutd's cost ÷ OVS's, per path" in text
    assert "user ÷ OVS (own)" in text
    assert parse_label(acl) == (100, 1, 1) and parse_acl(acl) == "1000 above"
    assert parse_acl(a) == "–" and parse_acl("p2p") == "–"
    assert parse_acl("openflow/v2v/r1/m1/o1/acl7-below") == "7 below"
    assert parse_label(b) == (10000, 8, 4) and parse_label("p2p") is None
    assert parse_label(v) == (100, 1, 1) and parse_path(v) == "v2v" and parse_path(a) == "p2p"
    assert openflow_text(CampaignData(db=None, campaign=Campaign(name="x"),  # type: ignore[arg-type]
                                      results=results[-1:], trials=[])) == ""


def test_bulk_lines_are_distinct_low_priority_and_miss_the_tester():
    lines = bulk_lines(70_000)  # past one /16: the second octet moves on
    assert len(set(lines)) == 70_000
    for line in (lines[0], lines[65_536], lines[-1]):
        assert line.startswith(f"cookie={BULK_COOKIE:#x},priority=1,ip,nw_dst=172.")
        assert line.endswith(",actions=drop")
    assert "nw_dst=172.17.0.0," in lines[65_536]
    # every destination inside 172.16.0.0/12, none in the tester's 10.0.0.0/8
    net = ipaddress.ip_network("172.16.0.0/12")
    assert all(ipaddress.ip_address(x.split("nw_dst=")[1].split(",")[0]) in net
               for x in lines[::997])
    for bad in (0, (1 << 20) + 1):
        with pytest.raises(ValueError):
            bulk_lines(bad)
