"""The ``virtual_port = "vhost-user"`` campaign key: virtual endpoints become
vhost-user ports the SUT serves and turnout-gen's frontend connects to
(turnoutd ``kind = "vhost_user"``, testpmd ``net_vhost``); SUTs without
vhost-user ports keep memif or veth, and ``Built.virtual_port`` says which.
No root needed: a recording testbed stands in for namespaces and veths."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnout.campaign.spec import CampaignError, parse
from turnout.portkind import PortKind
from turnout.scenarios import Point, Unsupported, build
from turnout.sut import make_sut

ROLES = {"tx", "rx", "txrx", "fwd", "reflect", "bidir"}


class FakeTestbed:
    """Records what build asks for; veths get made-up names."""

    def __init__(self, root: Path) -> None:
        self.root, self.veths = root, 0

    def namespace(self, role: str) -> str:
        return f"ns-{role}"

    def directory(self, name: str) -> Path:
        d = self.root / name
        d.mkdir(exist_ok=True)
        return d

    def veth(self, ns_a, ns_b, tag="v"):
        self.veths += 1
        k = self.veths

        class V:
            a, b = f"{tag}{k}a", f"{tag}{k}b"
            mac_a, mac_b = f"02:00:00:00:{k:02x}:01", f"02:00:00:00:{k:02x}:02"

        return V()

    def steer_rps(self, ns, iface, cpus):
        return ""

    def run(self, *a, **k):
        return None


def test_campaign_key_is_checked():
    assert parse({"campaign": {"name": "x"}}).virtual_port == "memif"
    spec = parse({"campaign": {"name": "x", "virtual_port": "vhost-user"}})
    assert spec.virtual_port is PortKind.VHOST_USER
    with pytest.raises(CampaignError, match="memif or vhost_user"):
        parse({"campaign": {"name": "x", "virtual_port": "tap"}})


@pytest.mark.parametrize("sut_name", ["turnoutd", "testpmd"])
def test_v2v_over_vhost_user(tmp_path, sut_name):
    sut = make_sut(sut_name)
    tb = FakeTestbed(tmp_path)
    built = build(tb, sut, Point(scenario="v2v"), memif_tester=True, tester_roles=ROLES,
                  virtual_kind="vhost-user")
    assert built.virtual_port == "vhost-user"
    assert tb.veths == 0, "v2v needs no veth"
    ports = built.topology.ports
    assert [p.kind for p in ports] == [PortKind.VHOST_USER, PortKind.VHOST_USER]
    assert all(p.socket.startswith(str(tmp_path / "vhost")) for p in ports)
    # turnout-gen connects its frontend to the socket the SUT serves
    (s,) = built.streams
    assert s.tx_port == f"vhost_user:{ports[0].socket}"
    assert s.rx_port == f"vhost_user:{ports[1].socket}"
    if sut_name == "turnoutd":
        toml = sut.render_config(built.topology, str(tmp_path / "ctl.sock"))
        assert toml.count('kind = "vhost_user"') == 2
        assert f'socket = "{ports[0].socket}"' in toml


def test_p2v_keeps_veths_for_physical_ends(tmp_path):
    sut = make_sut("turnoutd")
    tb = FakeTestbed(tmp_path)
    built = build(tb, sut, Point(scenario="p2v"), memif_tester=True, tester_roles=ROLES,
                  virtual_kind="vhost-user")
    assert sorted(p.kind for p in built.topology.ports) == ["veth", PortKind.VHOST_USER]
    assert tb.veths == 1


def test_falls_back_where_there_is_no_vhost_user(tmp_path):
    # the bare wire has no backend to serve the socket: memif, as before
    built = build(FakeTestbed(tmp_path), make_sut("wire"), Point(scenario="v2v"),
                  memif_tester=True, tester_roles=ROLES, virtual_kind="vhost-user")
    assert built.virtual_port == "memif"
    # without turnout-gen (pygen) there is no frontend: veths
    built = build(FakeTestbed(tmp_path), make_sut("turnoutd"), Point(scenario="v2v"),
                  memif_tester=False, tester_roles=ROLES, virtual_kind="vhost-user")
    assert built.virtual_port == "veth"
    with pytest.raises(Unsupported, match="memif or vhost_user"):
        build(FakeTestbed(tmp_path), make_sut("turnoutd"), Point(scenario="v2v"),
              memif_tester=True, tester_roles=ROLES, virtual_kind="tap")


def test_ovs_dpdk_has_vhost_user_ports(tmp_path):
    sut = make_sut("ovs-dpdk")
    assert sut.supports_vhost_user
    built = build(FakeTestbed(tmp_path), sut, Point(scenario="v2v"), memif_tester=True,
                  tester_roles=ROLES, virtual_kind="vhost-user")
    assert built.virtual_port == "vhost-user"
    ports = built.topology.ports
    assert [p.kind for p in ports] == [PortKind.VHOST_USER, PortKind.VHOST_USER]
    # dpdkvhostuser ports at the MTU of the option (1518 B frames pass)
    assert sut.port_args(0, ports[0]) == ["type=dpdkvhostuser", "mtu_request=9000"]
    sut = make_sut("ovs-dpdk", {"vhost_mtu": 2000})
    assert sut.port_args(0, ports[0]) == ["type=dpdkvhostuser", "mtu_request=2000"]
    # the userspace (afxdp) build has none: memif is not there either, veths
    built = build(FakeTestbed(tmp_path), make_sut("ovs"), Point(scenario="v2v"),
                  memif_tester=True, tester_roles=ROLES, virtual_kind="vhost-user")
    assert built.virtual_port == "veth"


def test_vhost_user_cell_next_to_the_campaign_virtual_port():
    spec = parse({"campaign": {"name": "x", "methods": ["rplus"]},
                  "matrix": {"suts": ["turnoutd", "ovs-dpdk"], "scenarios": ["p2p", "v2v"],
                             "frame_sizes_b": [64, 1518],
                             "vhost_user_scenarios": ["v2v"]}})
    kinds = sorted((p.scenario, p.virtual_port, p.frame_size_b) for p in spec.points)
    assert kinds == [("p2p", "", 64), ("p2p", "", 1518), ("v2v", "", 64), ("v2v", "", 1518),
                     ("v2v", "vhost-user", 64), ("v2v", "vhost-user", 1518)]
    keys = [w.key for w in spec.work()]
    assert len(keys) == len(set(keys)), "the vhost-user cell has keys of its own"
    assert sum("|vhost-user|" in k for k in keys) == 4  # 2 SUTs x 2 sizes
    with pytest.raises(CampaignError, match="no virtual ports"):
        parse({"campaign": {"name": "x"}, "matrix": {"vhost_user_scenarios": ["p2p"]}})
    with pytest.raises(CampaignError, match="vhost-user already"):
        parse({"campaign": {"name": "x", "virtual_port": "vhost-user"},
               "matrix": {"vhost_user_scenarios": ["v2v"]}})


@pytest.mark.parametrize(("sut_name", "kind"), [
    ("turnoutd", "vhost-user"), ("ovs-dpdk", "vhost-user"), ("turnoutd", "memif")])
def test_openflow_v2v_topology(tmp_path, sut_name, kind):
    """The openflow scenario on the v2v path: the VMs' ports and the mirror
    ports all of the point's kind, each mirror drained by a turnout-gen rx
    (interrupt mode when VNFs share a core), and the rule set's in_port and
    outputs are those ports' OpenFlow numbers."""
    from turnout.ofrules import HIT_PRIORITY

    point = Point(scenario="openflow", rules=10, masks=2, outputs=3, flows=1000,
                  virtual_port=kind)
    for irq in (False, True):
        built = build(FakeTestbed(tmp_path), make_sut(sut_name), point, memif_tester=True,
                      tester_roles=ROLES, virtual_kind=kind, vnf_interrupt=irq)
        assert built.virtual_port == kind
        ports = built.topology.ports
        pk = PortKind.parse(kind)  # the SUT's ports and the tester's specs: turnoutd's spelling
        assert [(p.name, p.kind) for p in ports] == [
            ("t0", pk), ("t1", pk), ("m1", pk), ("m2", pk)]
        (s,) = built.streams
        assert s.tx_port.startswith(f"{pk}:") and s.rx_port.startswith(f"{pk}:")
        assert s.tx_ns == s.rx_ns == "ns-tester"
        sinks = [h for h in built.helpers if h.name.startswith("mirror")]
        assert [h.name for h in sinks] == ["mirror m1", "mirror m2"]
        for h, p in zip(sinks, ports[2:], strict=True):
            assert h.args[:2] == ["rx", "--port"] and h.netns == "ns-mirror"
            assert h.args[2] == f"{pk}:{p.socket}" + (",mode=interrupt" if irq else "")
            assert h.polls is not irq
        assert built.topology.openflow is not None
        hit = [ln for ln in built.topology.openflow.text.splitlines()
               if ln.startswith(f"priority={HIT_PRIORITY},")]
        assert len(hit) == 1 and "in_port=1," in hit[0]
        assert hit[0].endswith("actions=output:2,output:3,output:4")
    assert point.stored_scenario() == "openflow/v2v/r10/m2/o3"


def test_openflow_v2v_has_no_fallback(tmp_path):
    """A v2v openflow cell whose ports the SUT lacks is not run over veths."""
    for sut_name, kind in (("ovs", "vhost-user"), ("ovs-dpdk", "memif"), ("ovs", "memif")):
        with pytest.raises(Unsupported, match=f"no {kind} ports"):
            build(FakeTestbed(tmp_path), make_sut(sut_name),
                  Point(scenario="openflow", rules=10, masks=1, outputs=1, virtual_port=kind),
                  memif_tester=True, tester_roles=ROLES, virtual_kind=kind)
    # without turnout-gen (the Python tester has no vhost-user or memif)
    with pytest.raises(Unsupported, match="cannot open vhost-user ports"):
        build(FakeTestbed(tmp_path), make_sut("turnoutd"),
              Point(scenario="openflow", rules=10, masks=1, outputs=1,
                    virtual_port="vhost-user"),
              memif_tester=False, tester_roles=ROLES, virtual_kind="vhost-user")
