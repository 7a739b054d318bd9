"""Interrupt-mode chain VNFs run at SCHED_FIFO 1 where that is safe
(``vnf_priority``, campaign/layout.py ``vnf_sched``): a sleeping VNF woken on
the tester's core then preempts the busy-polling tester instead of waiting
for the end of its time slice. A VNF that polls never gets it, nor any VNF
when the kernel's RT throttling is off. No root: the decision is a pure
function of the host's facts, given here."""

from __future__ import annotations

import pytest

from turnout.campaign.layout import RtBudget, rt_budget, vnf_sched
from turnout.campaign.spec import CampaignError, parse
from turnout.measure.gen import VnfHandle
from turnout.report.formatting import trial_marks
from turnout.results import Trial

DEFAULT_RT = RtBudget(950_000, 1_000_000)  # the kernel's default throttling


def test_interrupt_mode_vnf_gets_fifo_when_throttled():
    s = vnf_sched(False, "auto", DEFAULT_RT, root=True, chrt="/usr/bin/chrt")
    assert s.prefix == ("/usr/bin/chrt", "-f", "1") and s.label == "fifo:1"
    assert "950000/1000000" in s.why


def test_polling_vnf_stays_normal():
    s = vnf_sched(True, "auto", DEFAULT_RT, root=True, chrt="/usr/bin/chrt")
    assert s.prefix == () and s.label == "other" and "busy-polls" in s.why


@pytest.mark.parametrize("budget", [RtBudget(-1, 1_000_000), RtBudget(0, 1_000_000),
                                    RtBudget(1_000_000, 1_000_000), None])
def test_no_fifo_without_a_bound(budget):
    # -1: RT threads unthrottled; 0: no RT time at all; runtime = period: the
    # whole CPU; unreadable: unknown. None of them bounds a VNF at FIFO.
    s = vnf_sched(False, "auto", budget, root=True, chrt="/usr/bin/chrt")
    assert s.prefix == () and "throttling" in s.why


def test_needs_root_and_chrt_and_can_be_turned_off():
    assert vnf_sched(False, "auto", DEFAULT_RT, root=False, chrt="chrt").prefix == ()
    assert "chrt" in vnf_sched(False, "auto", DEFAULT_RT, root=True, chrt=None).why
    off = vnf_sched(False, "normal", DEFAULT_RT, root=True, chrt="chrt")
    assert off.prefix == () and off.label == "other"


def test_rt_budget_reads_the_kernel_files(tmp_path):
    (tmp_path / "sched_rt_runtime_us").write_text("950000\n")
    (tmp_path / "sched_rt_period_us").write_text("1000000\n")
    assert rt_budget(tmp_path) == DEFAULT_RT and DEFAULT_RT.bounded
    (tmp_path / "sched_rt_runtime_us").write_text("-1\n")
    assert not rt_budget(tmp_path).bounded
    assert rt_budget(tmp_path / "missing") is None


def test_campaign_key_is_checked():
    assert parse({"campaign": {"name": "x"}}).vnf_priority == "auto"
    assert parse({"campaign": {"name": "x", "vnf_priority": "normal"}}).vnf_priority == "normal"
    with pytest.raises(CampaignError, match="auto or normal"):
        parse({"campaign": {"name": "x", "vnf_priority": "fifo"}})


def test_trial_records_each_vnfs_scheduling_and_the_table_says_so():
    class P:  # a process handle with no output
        stdout = None
        args = ("fwd",)

    h = VnfHandle(P(), name="vnf0", cpu=0, polls=False, sched="fifo:1",  # type: ignore[arg-type]
                  sched_why="w")
    assert (h.sched, h.sched_why) == ("fifo:1", "w")
    assert VnfHandle(P(), name="vnf1").sched == "other"  # type: ignore[arg-type]
    fifo = Trial.of(campaign_id=1, sut="turnoutd", scenario="loopback", method="fixed",
                 status="ok", extra={"vnf_sched": [{"name": "vnf0", "sched": "fifo:1"}]})
    other = Trial.of(campaign_id=1, sut="turnoutd", scenario="loopback", method="fixed",
                  status="ok", extra={"vnf_sched": [{"name": "vnf0", "sched": "other"}]})
    assert "SCHED_FIFO in 1/2" in trial_marks([fifo, other])
    assert "SCHED_FIFO" not in trial_marks([other])
