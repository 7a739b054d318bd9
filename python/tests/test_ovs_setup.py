"""OVS-DPDK's set-up waits for ovs-vswitchd's DPDK initialisation and says
why it failed: an add-br that waited on a daemon that had died timed out
after 90 s in a CI run and said only "terminating with signal 14 (Alarm
clock)". No root: a fake daemon and ovs-vsctl stand in."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from turnout.hosts.base import LocalHost
from turnout.sut import make_sut
from turnout.sut.base import SutError


class _Proc:
    def __init__(self, rc: int | None) -> None:
        self.returncode = rc

    def poll(self) -> int | None:
        return self.returncode


def _dpdk(tmp_path: Path, rc: int | None, answers: list[str]):
    sut = make_sut("ovs-dpdk")
    sut.dir, sut.host = tmp_path, LocalHost()
    sut.vswitchd_proc = _Proc(rc)
    asked: list[tuple[str, ...]] = []

    def vsctl(*args: str) -> str:
        asked.append(args)
        return answers.pop(0) if answers else "false"

    sut.vsctl = vsctl
    (tmp_path / "ovs-vswitchd.log").write_text(
        "2026-12-02T11:00:00Z|00010|dpdk|INFO|EAL ARGS: ovs-vswitchd --socket-mem 1024\n"
        "2026-12-02T11:00:01Z|00011|dpdk|ERR|EAL: Cannot get hugepage information.\n"
        "2026-12-02T11:00:01Z|00012|dpdk|EMER|Unable to initialize DPDK: Permission denied\n")
    return sut, asked


def test_a_vswitchd_that_died_fails_the_setup_at_once_with_the_end_of_its_log(tmp_path):
    sut, _ = _dpdk(tmp_path, rc=134, answers=[])
    t0 = time.monotonic()
    with pytest.raises(SutError) as e:
        sut.vswitchd_started()
    assert time.monotonic() - t0 < 5  # not the 90 s of an add-br
    assert "ovs-vswitchd exited 134" in str(e.value)
    assert "Unable to initialize DPDK: Permission denied" in str(e.value)


def test_the_setup_goes_on_once_dpdk_is_initialised(tmp_path):
    sut, asked = _dpdk(tmp_path, rc=None, answers=["false", "false", "true"])
    sut.vswitchd_started()
    assert asked == [("get", "Open_vSwitch", ".", "dpdk_initialized")] * 3
    assert sut.vswitchd_state().startswith("ovs-vswitchd is running; its log ends: ")
    # a daemon that never gets there: its log in the error
    sut2, _ = _dpdk(tmp_path, rc=None, answers=[])
    sut2.vsctl_timeout_s = 0.3
    with pytest.raises(SutError, match=r"within 0.3 s: ovs-vswitchd is running; .*EMER"):
        sut2.vswitchd_started()
