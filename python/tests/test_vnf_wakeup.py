"""Chain VNFs that would share a core sleep on their memif eventfds
(``vnf_wakeup``, docs/bench.md "Core layouts"): the helpers' port specs say
``mode=interrupt``, they no longer count as busy-polling processes on the
tester's core, and the trial says so. No root: a recording testbed."""

from __future__ import annotations

import pytest

from test_vhost_scenario import ROLES, FakeTestbed
from turnout.campaign.layout import Layout
from turnout.campaign.spec import CampaignError, parse
from turnout.measure.gen import Stream, VnfHandle, _Task, core_sharing
from turnout.report.formatting import trial_marks
from turnout.results import Trial
from turnout.scenarios import Point, build
from turnout.sut import make_sut


def test_campaign_key_is_checked():
    assert parse({"campaign": {"name": "x"}}).vnf_wakeup == "auto"
    assert parse({"campaign": {"name": "x", "vnf_wakeup": "poll"}}).vnf_wakeup == "poll"
    with pytest.raises(CampaignError, match="auto, poll or interrupt"):
        parse({"campaign": {"name": "x", "vnf_wakeup": "nap"}})


def test_layout_says_when_vnfs_are_crowded():
    two = Layout(tester=(0,), sut=(1,), vnf=(0,))
    assert two.vnfs_crowded(1)  # on the tester's core
    three = Layout(tester=(0,), sut=(2,), vnf=(1,))
    assert not three.vnfs_crowded(1) and three.vnfs_crowded(2)
    assert Layout(tester=(0,), sut=(1,), vnf=()).vnfs_crowded(1)  # not pinned


@pytest.mark.parametrize("irq", [False, True])
def test_memif_chain_vnfs_sleep_when_asked(tmp_path, irq):
    built = build(FakeTestbed(tmp_path), make_sut("turnoutd"), Point(scenario="loopback", vnfs=2),
                  memif_tester=True, tester_roles=ROLES, vnf_interrupt=irq)
    assert len(built.helpers) == 2
    for h in built.helpers:
        ports = [h.args[i + 1] for i, a in enumerate(h.args) if a in ("--port", "--port2")]
        assert len(ports) == 2 and all(p.startswith("memif:") for p in ports)
        assert all(p.endswith(",mode=interrupt") == irq for p in ports), ports
        assert h.polls is not irq


def test_veth_vnfs_keep_polling(tmp_path):
    # a kernel switch has no memif ports: its chain VNF sits on veths, which
    # have no eventfd to sleep on, so it polls (and the trial still says the
    # core is shared)
    built = build(FakeTestbed(tmp_path), make_sut("bridge"), Point(scenario="loopback", vnfs=1),
                  memif_tester=True, tester_roles=ROLES, vnf_interrupt=True)
    (h,) = built.helpers
    assert h.polls and not any("mode=interrupt" in a for a in h.args)
    assert any(a.startswith(("af_xdp:", "af_packet:")) for a in h.args)


def test_sleeping_vnfs_still_share_the_core_and_the_trial_says_so():
    s = Stream(tx_port="a", rx_port="b", tx_ns="n", rx_ns="n", src_mac="m", dst_mac="m", id=0)
    s.tx_cpu = s.rx_cpu = 0
    task = _Task(role="txrx", streams=[s], netns="n")

    class P:  # a process handle with no output
        stdout = None
        args = ("fwd",)

    poller = VnfHandle(P(), "fwd", cpu=0)  # type: ignore[arg-type]
    sleeper = VnfHandle(P(), "fwd", cpu=0, polls=False)  # type: ignore[arg-type]
    elsewhere = VnfHandle(P(), "fwd", cpu=1, polls=False)  # type: ignore[arg-type]
    assert core_sharing([task], [poller]) == 2
    # woken on the tester's core it waits for the tester's time slice: the
    # scheduler still sets its latency
    assert core_sharing([task], [sleeper]) == 2
    assert core_sharing([task], [elsewhere]) == 1
    t = Trial.of(campaign_id=1, sut="turnoutd", scenario="loopback", method="latency",
              status="ok", extra={"tester_core_sharing": 2, "vnf_wakeup": "interrupt"})
    marks = trial_marks([t])
    assert "interrupt mode" in marks and "scheduler:" in marks


def test_a_lossy_row_says_where_the_switch_counted_its_losses():
    """A latency or CPU row that lost frames says how many, and where the
    switch counted them (extra.sut_drops), or that it counted none."""
    def trial(lost: int, **extra: object) -> Trial:
        return Trial.of(campaign_id=1, sut="turnoutd", scenario="p2v", method="latency",
                        status="ok", sent=1000, received=1000 - lost, lost=lost, extra=extra)

    assert "lost" not in trial_marks([trial(0, sut_drops={})])
    marks = trial_marks([trial(115, sut_drops={"t0 kernel_rx_ring_full": 115}),
                         trial(0, sut_drops={})])
    assert "115 frames lost in 1/2 (switch drops: t0 kernel_rx_ring_full 115)" in marks
    assert "counted no drop" in trial_marks([trial(7, sut_drops={})])
    assert trial_marks([trial(7)]) == "7 frames lost in 1/1"  # not read: no claim
