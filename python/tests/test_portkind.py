"""One port-kind type (turnout.portkind), spelled as turnoutd spells it,
the older spellings accepted where a user writes a kind: a campaign's
tester_port and virtual_port, ``[sut.NAME] kernel_port``, ``turnout ctl
port add``; the SUT's ports and the tester's port specs use it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from test_ctl import FakeDaemon, ok
from turnout import cli
from turnout.campaign.spec import CampaignError, load, parse
from turnout.portkind import ALIASES, KERNEL, VIRTUAL, PortKind, PortKindError
from turnout.sut.base import SutPort


@pytest.mark.parametrize("text, kind", [
    ("af_xdp", PortKind.AF_XDP), ("afxdp", PortKind.AF_XDP), ("AF_XDP", PortKind.AF_XDP),
    ("af_packet", PortKind.AF_PACKET), ("afpacket", PortKind.AF_PACKET),
    ("vhost_user", PortKind.VHOST_USER), ("vhost-user", PortKind.VHOST_USER),
    ("vhost", PortKind.VHOST_USER), ("memif", PortKind.MEMIF), ("tap", PortKind.TAP),
    ("vxlan", PortKind.VXLAN), ("geneve", PortKind.GENEVE),
])
def test_every_spelling_names_one_kind(text: str, kind: PortKind) -> None:
    assert PortKind.parse(text) is kind
    assert str(kind) == kind.value and f"{kind}:x" == f"{kind.value}:x"


def _rust_kinds(src: str) -> list[tuple[str, list[str]]]:
    """The lines of the ``port_kinds!`` list in kind.rs: each variant with its
    spellings, the canonical one first."""
    body = src.split("\nport_kinds! {", 1)[1].split("\n}\n", 1)[0]
    lines = re.findall(r'^\s*(\w+)\(\w+::\w+\)\s*=\s*([^;]+);', body, re.M)
    assert lines, "no line in port_kinds!"
    return [(variant, re.findall(r'"([^"]+)"', spelled)) for variant, spelled in lines]


def test_values_and_aliases_are_turnoutds() -> None:
    """The kinds and older spellings of the Rust parser turnoutd, turnout-gen
    and turnout-cni share (crates/ports/src/kind.rs, the ``port_kinds!`` list
    that makes ``PortKind``)."""
    src = (Path(__file__).resolve().parents[2] / "crates" / "ports" / "src" /
           "kind.rs").read_text()
    kinds = _rust_kinds(src)
    names = {variant: spelled[0] for variant, spelled in kinds}
    assert sorted(names.values()) == sorted(k.value for k in PortKind)
    for variant, value in names.items():
        assert PortKind[re.sub(r"(?<!^)([A-Z])", r"_\1", variant).upper()].value == value
    rust_aliases = {alias: PortKind(spelled[0]) for _, spelled in kinds for alias in spelled[1:]}
    assert rust_aliases == ALIASES


@pytest.mark.parametrize("text", ["af-xdp", "xdp", "", "veth", None, 3])
def test_anything_else_is_refused_with_the_names(text: object) -> None:
    with pytest.raises(PortKindError, match=r"is not one of memif, af_xdp \(or afxdp\)"):
        PortKind.parse(text)


def test_a_kind_not_accepted_there_is_refused() -> None:
    with pytest.raises(PortKindError, match=r"'memif' is not af_xdp \(or afxdp\) or af_packet"):
        PortKind.parse("memif", KERNEL)
    assert PortKind.parse("vhost-user", VIRTUAL).stored == "vhost-user"  # test points keep it
    assert PortKind.MEMIF.stored == "memif"


@pytest.mark.parametrize("key, value, kind", [
    ("tester_port", "afxdp", PortKind.AF_XDP), ("tester_port", "af_xdp", PortKind.AF_XDP),
    ("tester_port", "afpacket", PortKind.AF_PACKET),
    ("tester_port", "af_packet", PortKind.AF_PACKET),
    ("virtual_port", "vhost-user", PortKind.VHOST_USER),
    ("virtual_port", "vhost_user", PortKind.VHOST_USER), ("virtual_port", "memif", PortKind.MEMIF),
])
def test_campaign_port_keys_take_both_spellings(key: str, value: str, kind: PortKind) -> None:
    spec = parse({"campaign": {"name": "k", key: value}})
    assert getattr(spec, key) is kind


@pytest.mark.parametrize("key, value, message", [
    ("tester_port", "memif", r"campaign.tester_port: 'memif' is not af_xdp \(or afxdp\) or "
     r"af_packet \(or afpacket\)"),
    ("tester_port", "af-xdp", r"campaign.tester_port: 'af-xdp' is not af_xdp"),
    ("virtual_port", "af_xdp", r"campaign.virtual_port: 'af_xdp' is not memif or vhost_user "
     r"\(or vhost-user, vhost\)"),
])
def test_campaign_port_keys_refuse_others(tmp_path: Path, key: str, value: str,
                                          message: str) -> None:
    f = tmp_path / "k.toml"
    f.write_text(f'[campaign]\nname = "k"\n{key} = "{value}"\n')
    with pytest.raises(CampaignError, match=f"^{f}: {message}"):
        load(f)


def test_vhost_user_cells_with_a_vhost_user_campaign_are_refused() -> None:
    doc = {"campaign": {"name": "v", "virtual_port": "vhost_user"},
           "matrix": {"scenarios": ["v2v"], "vhost_user_scenarios": ["v2v"]}}
    with pytest.raises(CampaignError, match=r"campaign\.virtual_port is vhost-user already"):
        parse(doc)


def test_sut_ports_take_one_spelling() -> None:
    assert SutPort(name="a", kind="vhost-user").kind is PortKind.VHOST_USER
    assert SutPort(name="a", kind="memif").kind is PortKind.MEMIF
    assert SutPort(name="a", kind="veth").kind == "veth"
    with pytest.raises(PortKindError):  # never a veth by default
        SutPort(name="a", kind="vhost-usr")
    with pytest.raises(PortKindError):
        SutPort(name="a", kind="af_xdp")  # the SUT opens a veth as its options say


def test_ctl_port_add_sends_turnoutds_spelling(tmp_path: Path) -> None:
    fake = FakeDaemon(tmp_path / "s", [ok({"id": 3}), ok({"id": 4})])
    assert cli.main(["ctl", "--socket", fake.path, "port", "add", "a", "afxdp", "iface=v"]) == 0
    assert fake.requests[0]["params"] == {"name": "a", "kind": "af_xdp", "iface": "v"}
    # a kind the workbench does not know goes as it is: turnoutd's answer lists its own
    assert cli.main(["ctl", "--socket", fake.path, "port", "add", "b", "rdma", "x=1"]) == 0
    assert fake.requests[1]["params"]["kind"] == "rdma"
