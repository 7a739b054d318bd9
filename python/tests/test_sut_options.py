"""``[sut.NAME]`` options are typed (sut/options.py): the campaign parser
refuses an unknown key or a bad value, naming the file, the key and what it
accepts; accepted spellings are stored in their canonical form."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnout.campaign.spec import CampaignError, load, parse
from turnout.portkind import PortKind
from turnout.report.queries import REFERENCE_SUTS
from turnout.sut import SUTS, make_sut
from turnout.sut.base import SutPort, Topology
from turnout.sut.options import OptionError

REPO = Path(__file__).resolve().parents[2]


def _campaign(sut: str, table: dict[str, object]) -> dict[str, object]:
    return {"campaign": {"name": "o"}, "matrix": {"suts": [sut]}, "sut": {sut: table}}


def _veth_topo() -> Topology:
    return Topology(ns="n", ports=[SutPort(name="a", kind="veth", iface="va"),
                                   SutPort(name="b", kind="veth", iface="vb")],
                    xconnects=[("a", "b")])


@pytest.mark.parametrize("spelling", ["af_xdp", "afxdp"])
def test_testpmd_kernel_port_afxdp_runs_af_xdp(spelling: str) -> None:
    """The spelling the same file uses for tester_port is af_xdp, not a
    silent fall-back to AF_PACKET."""
    spec = parse(_campaign("testpmd", {"kernel_port": spelling}))
    assert spec.sut_options["testpmd"] == {"kernel_port": "af_xdp"}
    sut = spec.make_sut("testpmd")
    assert sut.options == {"kernel_port": "af_xdp"}  # stored with its results
    vdevs = sut.vdevs(_veth_topo())  # type: ignore[attr-defined]
    assert vdevs and all(v.startswith("--vdev=net_af_xdp") for v in vdevs), vdevs


def test_kernel_port_default_is_af_xdp_for_every_sut_that_has_one() -> None:
    """A campaign that names no kernel_port puts testpmd and turnoutd on the
    kind of port the tester and OVS use on veths: nothing in the set-up
    favours one SUT."""
    vdevs = parse(_campaign("testpmd", {})).make_sut("testpmd").vdevs(  # type: ignore[attr-defined]
        _veth_topo())
    assert vdevs and all(v.startswith("--vdev=net_af_xdp") for v in vdevs), vdevs
    td = make_sut("turnoutd", {})
    assert td.opts.kernel_port is PortKind.AF_XDP  # type: ignore[attr-defined]
    toml = td.render_config(_veth_topo(), "/s")  # type: ignore[attr-defined]
    assert toml.count('kind = "af_xdp"') == 2 and "af_packet" not in toml, toml


@pytest.mark.parametrize("typo", ["af-xdp", "afxpd", "AF_XDPP", "xdp", "", 1])
def test_testpmd_kernel_port_typo_is_refused(tmp_path: Path, typo: object) -> None:
    f = tmp_path / "typo.toml"
    value = f'"{typo}"' if isinstance(typo, str) else str(typo)
    f.write_text(f'[campaign]\nname = "t"\ntester_port = "afxdp"\n[matrix]\nsuts = ["testpmd"]\n'
                 f"[sut.testpmd]\nkernel_port = {value}\n")
    with pytest.raises(CampaignError) as e:
        load(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: sut.testpmd.kernel_port: "), msg
    assert "af_xdp (or afxdp)" in msg and "af_packet (or afpacket)" in msg, msg


def test_unknown_key_is_refused_with_the_accepted_keys(tmp_path: Path) -> None:
    f = tmp_path / "key.toml"
    f.write_text('[campaign]\nname = "t"\n[matrix]\nsuts = ["testpmd"]\n'
                 '[sut.testpmd]\nkernel_prot = "af_xdp"\n')
    with pytest.raises(CampaignError) as e:
        load(f)
    msg = str(e.value)
    assert msg.startswith(f"{f}: sut.testpmd.kernel_prot: unknown option (accepted: "), msg
    for k in ("forward_mode", "kernel_port", "hugepages", "scenarios", "scenarios_reason"):
        assert k in msg


@pytest.mark.parametrize("sut, table, message", [
    ("testpmd", {"forward_mode": "rxonly"}, r"testpmd.forward_mode: 'rxonly' is not io or mac"),
    ("testpmd", {"hugepages": -1}, r"testpmd.hugepages: -1 is not an integer within 0..65536"),
    ("testpmd", {"hugepages": "512"}, r"testpmd.hugepages: '512' is not an integer"),
    ("testpmd", {"hugepages": True}, r"testpmd.hugepages: True is not an integer"),
    ("testpmd", {"logic": "patch"}, r"testpmd.logic: unknown option"),
    ("turnoutd", {"kernel_port": "memif"}, r"turnoutd.kernel_port: 'memif' is not af_xdp"),
    ("turnoutd", {"kernel_port": "vhost-user"}, r"turnoutd.kernel_port: 'vhost-user' is not"),
    ("turnoutd", {"underlay_port": "tap"}, r"turnoutd.underlay_port: 'tap' is not af_xdp"),
    ("turnoutd", {"wakeup": "sleep"}, r"turnoutd.wakeup: 'sleep' is not adaptive or poll"),
    ("turnoutd", {"latency_budget_us": 20000},
     r"turnoutd.latency_budget_us: 20000 is not an integer within 0..10000 µs"),
    ("turnoutd", {"batch": 16}, r"turnoutd.batch: 16 is not an integer within 32..1024"),
    ("turnoutd", {"cpu_idle": "halt"}, r"turnoutd.cpu_idle: 'halt' is not poll"),
    ("turnoutd", {"logic": ""}, r"turnoutd.logic: '' is not a non-empty string"),
    ("turnoutd", {"logic_options": 3}, r"turnoutd.logic_options: 3 is not a table"),
    ("turnoutd", {"kernelport": "af_xdp"}, r"turnoutd.kernelport: unknown option"),
    ("turnoutd-poll", {"wakeup": "busy"}, r"turnoutd-poll.wakeup: 'busy' is not adaptive"),
    ("ovs", {"xdp_mode": "zerocopy"}, r"ovs.xdp_mode: 'zerocopy' is not one of native, "),
    ("ovs", {"vhost_mtu": 2000}, r"ovs.vhost_mtu: unknown option"),
    ("ovs-dpdk", {"vhost_mtu": 1000}, r"ovs-dpdk.vhost_mtu: 1000 is not an integer within "
     r"1500..9702 B"),
    ("ovs-dpdk", {"xdp_mode": "native"}, r"ovs-dpdk.xdp_mode: unknown option"),
    ("bridge", {"kernel_port": "af_xdp"}, r"bridge.kernel_port: unknown option \(accepted: "
     r"scenarios, scenarios_reason, latency_fractions, ranked\)"),
    ("bridge", {"ranked": "no"}, r"bridge.ranked: 'no' is not true or false"),
    ("testpmd", {"latency_fractions": [0.1, 0]},
     r"testpmd.latency_fractions: \[0.1, 0\] is not a non-empty list of numbers within"),
    ("testpmd", {"latency_fractions": [1.5]}, r"testpmd.latency_fractions: \[1.5\] is not"),
    ("testpmd", {"latency_fractions": []}, r"testpmd.latency_fractions: \[\] is not"),
    ("testpmd", {"latency_fractions": [True]}, r"testpmd.latency_fractions: \[True\] is not"),
    ("wire", {"forward_mode": "io"}, r"wire.forward_mode: unknown option"),
])
def test_bad_options_are_refused(sut: str, table: dict[str, object], message: str) -> None:
    with pytest.raises(CampaignError, match=message):
        parse(_campaign(sut, table))


def test_a_variant_is_checked_as_its_base() -> None:
    doc = {"campaign": {"name": "v"}, "matrix": {"suts": ["turnoutd", "td-x"]},
           "sut": {"turnoutd": {"kernel_port": "afxdp"},
                   "td-x": {"base": "turnoutd", "wakeup": "poll"}}}
    spec = parse(doc)
    assert spec.sut_options["td-x"] == {"kernel_port": "af_xdp", "wakeup": "poll"}
    doc["sut"]["td-x"]["wakeup"] = "spin"  # type: ignore[index]
    with pytest.raises(CampaignError, match=r"sut.td-x.wakeup: 'spin' is not adaptive or poll"):
        parse(doc)


def test_a_sut_can_have_its_own_latency_loads() -> None:
    doc = {"campaign": {"name": "f", "methods": ["latency"], "latency_fractions": [0.5]},
           "matrix": {"suts": ["turnoutd", "td-1000", "testpmd"], "scenarios": ["v2v"],
                      "frame_sizes_b": [64]},
           "sut": {"turnoutd": {},
                   "td-1000": {"base": "turnoutd", "latency_budget_us": 1000,
                               "latency_fractions": [0.1, 0.5], "ranked": False}}}
    spec = parse(doc)
    lat = [(w.sut, w.arg) for w in spec.work() if w.method == "latency"]
    assert lat == [("turnoutd", 0.5), ("td-1000", 0.1), ("td-1000", 0.5), ("testpmd", 0.5)]
    assert spec.sut_options["td-1000"]["ranked"] is False
    assert next(w.method for w in spec.work() if w.sut == "td-1000") == "rplus"


def test_turnoutd_renders_the_canonical_kind() -> None:
    sut = make_sut("turnoutd", {"kernel_port": "afpacket", "underlay_port": "afxdp"})
    assert sut.opts.kernel_port is PortKind.AF_PACKET  # type: ignore[attr-defined]
    assert sut.opts.underlay_port is PortKind.AF_XDP  # type: ignore[attr-defined]
    toml = sut.render_config(_veth_topo(), "/s")  # type: ignore[attr-defined]
    assert toml.count('kind = "af_packet"') == 2, toml


def test_turnoutd_kernel_port_options_go_to_every_veth_port() -> None:
    sut = make_sut("turnoutd", {"kernel_port": "af_xdp",
                                "kernel_port_options": {"frames_per_queue": 4096}})
    toml = sut.render_config(_veth_topo(), "/s")  # type: ignore[attr-defined]
    assert toml.count('kind = "af_xdp"') == toml.count("frames_per_queue = 4096") == 2, toml
    with pytest.raises(OptionError, match="kernel_port_options"):
        make_sut("turnoutd", {"kernel_port_options": 3})


def test_adapters_refuse_bad_options_built_directly() -> None:
    with pytest.raises(OptionError, match="kernel_port"):
        make_sut("testpmd", {"kernel_port": "afxpd"})


def test_every_option_is_documented() -> None:
    """docs/bench.md's SUT options table names every key of every adapter."""
    doc = (REPO / "docs" / "bench.md").read_text()
    for name, cls in SUTS.items():
        for key in cls.Options.names():
            assert f"`{key}`" in doc, f"{name}: option {key} not in docs/bench.md"


def test_the_reference_is_declared_by_its_adapter() -> None:
    refs = [n for n, c in SUTS.items() if c.reference]
    assert refs == ["wire"]
    assert REFERENCE_SUTS[0] == "wire"


def test_each_adapter_declares_its_overlay_host() -> None:
    """overlay.py takes the two-host set-up from the adapter's declaration
    (no list of classes of its own); the reasons are those it gave before."""
    from turnout.overlay import overlay_support
    from turnout.sut.linux_bridge import BridgeOverlayHost
    from turnout.sut.ovs import OvsOverlayHost
    from turnout.sut.turnoutd import TurnoutdOverlayHost

    assert {n: c.overlay_host for n, c in SUTS.items()} == {
        "wire": None, "turnoutd": TurnoutdOverlayHost, "turnoutd-poll": TurnoutdOverlayHost,
        "bridge": BridgeOverlayHost, "ovs": OvsOverlayHost, "ovs-dpdk": None, "testpmd": None}
    assert overlay_support(make_sut("ovs-dpdk")) == (
        "overlay: OVS-DPDK is not wired up for tunnels here (ovs, the same datapath, is)")
    assert overlay_support(make_sut("testpmd")) == (
        "overlay: no two-host set-up for testpmd (turnoutd, ovs, bridge have one)")
    assert "bare wire has none" in overlay_support(make_sut("wire"))
