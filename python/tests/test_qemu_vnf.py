"""``[campaign] vnf = "qemu"``: the loopback scenario's VNF is a QEMU guest
bridging its two virtio-net NICs, on vhost-user ports the SUT serves
(turnout/vm.py, tests/vm/init ``turnout_mode=bridge``). Without a working
KVM the cell is skipped with the reason; ``qemu_accel = "tcg"`` runs it
anyway. The topology tests need no root; the system tests boot the guest."""

from __future__ import annotations

import pytest

from conftest import needs_root
from test_vhost_scenario import ROLES, FakeTestbed
from turnout import testpeers, vm
from turnout.bench import RealBench
from turnout.build import built
from turnout.campaign import parse, run_campaign
from turnout.campaign.spec import CampaignError
from turnout.results import ResultsDB
from turnout.scenarios import Point, Unsupported, build
from turnout.sut import make_sut

REAL_GEN = built("turnout-gen")


def test_campaign_keys_are_checked():
    spec = parse({"campaign": {"name": "x"}})
    assert (spec.vnf, spec.qemu_accel) == ("gen", "auto")
    spec = parse({"campaign": {"name": "x", "vnf": "qemu", "qemu_accel": "tcg"}})
    assert (spec.vnf, spec.qemu_accel) == ("qemu", "tcg")
    with pytest.raises(CampaignError, match="gen or qemu"):
        parse({"campaign": {"name": "x", "vnf": "vm"}})
    with pytest.raises(CampaignError, match="auto or tcg"):
        parse({"campaign": {"name": "x", "vnf": "qemu", "qemu_accel": "kvm"}})
    with pytest.raises(CampaignError, match="only with vnf"):
        parse({"campaign": {"name": "x", "qemu_accel": "tcg"}})


@pytest.mark.parametrize("sut_name", ["turnoutd", "testpmd", "ovs-dpdk"])
def test_loopback_vnfs_become_vhost_user_guests(tmp_path, sut_name):
    # even with the campaign's virtual ports on memif: the guests' NICs are
    # vhost-user, the tester's ends stay veths
    built = build(FakeTestbed(tmp_path), make_sut(sut_name), Point(scenario="loopback", vnfs=2),
                  memif_tester=True, tester_roles=ROLES, virtual_kind="memif", vnf_kind="qemu")
    assert built.helpers == [], "no turnout-gen fwd next to the guests"
    assert built.virtual_port == "vhost-user"
    ports = {p.name: p for p in built.topology.ports}
    assert [p.kind for p in built.topology.ports] == [
        "veth", "vhost_user", "vhost_user", "vhost_user", "vhost_user", "veth"]
    assert built.vms == [[(ports["v0a"].socket, ports["v0a"].macs[0]),
                          (ports["v0b"].socket, ports["v0b"].macs[0])],
                         [(ports["v1a"].socket, ports["v1a"].macs[0]),
                          (ports["v1b"].socket, ports["v1b"].macs[0])]]
    # the SUT chains tester -> vm0 -> vm1 -> tester; frames are addressed
    # to the receiver (the guests bridge; a NIC's own MAC is the guest's)
    (st,) = built.streams
    assert st.dst_mac == ports["t1"].macs[0]
    assert st.dst_mac not in {m for nics in built.vms for _, m in nics}
    assert built.topology.xconnects == [("t0", "v0a"), ("v0b", "v1a"), ("v1b", "t1")]
    # other scenarios are not touched by the key
    built = build(FakeTestbed(tmp_path), make_sut(sut_name), Point(scenario="v2v"),
                  memif_tester=True, tester_roles=ROLES, virtual_kind="memif", vnf_kind="qemu")
    assert built.vms == []


@pytest.mark.parametrize("sut_name", ["bridge", "ovs", "wire"])
def test_no_vhost_user_no_guest(tmp_path, sut_name):
    with pytest.raises(Unsupported, match="attaches over vhost-user"):
        build(FakeTestbed(tmp_path), make_sut(sut_name), Point(scenario="loopback", vnfs=1),
              memif_tester=True, tester_roles=ROLES, vnf_kind="qemu")


def test_guest_samples_are_whole_lines(tmp_path):
    """The console is shared with the guest's kernel and read while the guest
    writes: a line without its newline yet, or one a kernel message cut into,
    is not a sample (the last whole one is)."""
    serial = tmp_path / "vm0.log"
    v = vm.BridgeVm(proc=None, serial=serial, name="vm0")  # type: ignore[arg-type]
    assert v.samples() == [] and v.stats() == {}
    whole = "GUEST_STATS 10 2 0 0 3 9 0 1"
    serial.write_text(f"TURNOUT_VM_BRIDGE_UP ports 3 3\n{whole}\n"
                      "GUEST_STATS 11 2 0 [   12.3] br0: port 1 entered forwarding state\n"
                      "GUEST_STATS 12 2 0 0 3 9")
    assert v.samples() == [whole]
    assert v.stats() == {"eth0_rx": 10, "eth0_tx": 2, "eth0_rx_dropped": 0, "eth0_tx_dropped": 0,
                         "eth1_rx": 3, "eth1_tx": 9, "eth1_rx_dropped": 0, "eth1_tx_dropped": 1}
    with serial.open("a") as f:
        f.write(" 0 0\n")
    assert v.stats()["eth0_rx"] == 12


def _campaign(tmp_path, accel: str | None):
    if not REAL_GEN.exists():
        testpeers.need(False, f"{REAL_GEN} not built yet (cargo build --release -p turnout-gen)")
    why = make_sut("turnoutd").available()
    if why:
        testpeers.need(False, f"turnoutd: {why}")
    testpeers.need(vm.find_qemu(), "qemu-system-x86_64 not found (Debian package qemu-system-x86)")
    # As crates/ports/tests/vhost_qemu.rs: the guest comes from Debian's
    # archive, which the setup does not fetch; offline, skip (always).
    try:
        vm.assets()
    except vm.VmUnavailable as e:
        pytest.skip(str(e))
    c: dict = {"name": "qemu-vnf", "duration_s": 1.0, "warmup_s": 0.2, "methods": ["fixed"],
               "vnf": "qemu"}
    if accel:
        c["qemu_accel"] = accel
    spec = {"campaign": c,
            "matrix": {"suts": ["turnoutd"], "scenarios": ["loopback"], "vnfs": [1],
                       "frame_sizes_b": [64], "directions": ["uni"], "rates_pps": [1000]}}
    db = ResultsDB(tmp_path / "r.db")
    run = run_campaign(parse(spec), db, RealBench([str(REAL_GEN)]))
    assert run.status == "done"
    return db, run


@needs_root
@pytest.mark.system
def test_tcg_guest_forwards_through_turnoutd(tmp_path):
    """tester -> turnoutd -> vhost-user -> guest bridge -> vhost-user ->
    turnoutd -> tester, the guest under TCG (qemu_accel = "tcg")."""
    db, run = _campaign(tmp_path, "tcg")
    with db:
        trials = db.trials(run.id)
        assert [t.status for t in trials] == ["ok"], [t.reason for t in trials]
        (t,) = trials
        assert t.point.virtual_port == "vhost-user"
        (g,) = t.extra["guests"]
        assert t.sent >= 1000 and t.received > 0, f"{t.sent} {t.received} {g}"
        assert t.received <= t.sent and t.lost == t.sent - t.received
        # the frames went through the guest: all of them (and the warm-up)
        # reached its first NIC, and its second sent at least those that
        # came back
        assert g["eth0_rx"] >= t.sent, g
        assert g["eth1_tx"] >= t.received, g
        assert g["eth0_rx_dropped"] == 0 and g["eth1_tx_dropped"] == 0, g
        # a low rate: the guest's bridge (its ports forwarding before the
        # bench sends) loses little or nothing, even under TCG
        assert t.received >= 0.9 * t.sent, f"{t.sent} {t.received} {g}"
        (sut,) = db.suts(run.id)
        assert sut.config["vnf"]["kind"] == "qemu" and sut.config["vnf"]["accel"] == "tcg"
        assert sut.config["vnf"]["guests"] == 1


@needs_root
@pytest.mark.system
def test_default_accel_needs_kvm(tmp_path):
    """Default qemu_accel: KVM when it works, else a skipped row saying why
    (this machine: /dev/kvm is a nested KVM whose guests crawl)."""
    db, run = _campaign(tmp_path, None)
    with db:
        (t,) = db.trials(run.id)
        ok, why = vm.kvm_status(vm.find_qemu() or "", vm.assets())  # cached: the bench's probe
        if ok:
            assert t.status == "ok" and t.received > 0, t.reason
            (sut,) = db.suts(run.id)
            assert sut.config["vnf"]["accel"] == "kvm"
        else:
            assert t.status == "skipped"
            assert t.reason.startswith("QEMU VNF needs KVM: "), t.reason
            assert why in t.reason and "TCG would measure the emulator" in t.reason
            assert ("/dev/kvm is missing" in t.reason) != ("did not reach init in 8 s" in t.reason
                                                           or "failed under KVM" in t.reason)
