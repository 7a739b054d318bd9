"""Testbed objects are created, recorded and removed, also after a crash."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from conftest import needs_root
from turnout.cli import main
from turnout.testbed import Testbed, cleanup_stale, state_dir


def _netns() -> set[str]:
    from pyroute2 import netns

    return set(netns.listnetns())


def _links() -> set[str]:
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        return {str(link.get("ifname")) for link in ipr.get_links()}


@needs_root
def test_testbed_creates_and_removes_everything():
    with Testbed() as tb:
        t = tb.namespace("t")
        s = tb.namespace("s")
        w = tb.veth(t, s)
        r = tb.veth(None, s)  # one end in the root namespace
        br = tb.bridge(s, [w.b, r.b])
        p = tb.spawn(["sleep", "30"], netns=t)
        assert {t, s} <= _netns() and r.a in _links()
        assert len(w.mac_a) == 17 and w.mac_a != w.mac_b
        assert br.startswith(tb.prefix)
        state = json.loads((state_dir() / f"{tb.prefix}.json").read_text())
        assert state["netns"] == [t, s] and state["pids"][0][0] == p.pid
        workdir = tb.workdir
    assert not ({t, s} & _netns()) and r.a not in _links()
    assert p.poll() is not None and not workdir.exists()
    assert not list(state_dir().glob("*.json"))


@needs_root
def test_testbed_is_removed_on_exception():
    with pytest.raises(RuntimeError, match="boom"), Testbed() as tb:
        ns = tb.namespace("x")
        raise RuntimeError("boom")
    assert ns not in _netns()


@needs_root
@pytest.mark.parametrize("by_hand", [False, True], ids=["next-run", "bench-cleanup"])
def test_leftovers_of_a_killed_run_are_removed_by_the_next(by_hand, capsys):
    script = textwrap.dedent("""
        import sys, time
        from turnout.testbed import Testbed
        tb = Testbed()
        ns = tb.namespace("crash")
        v = tb.veth(None, ns)
        p = tb.spawn(["sleep", "60"])
        print(ns, v.a, p.pid, flush=True)
        time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    try:
        ns, link, sleeper = child.stdout.readline().split()
        assert ns in _netns() and link in _links()
    finally:
        child.send_signal(signal.SIGKILL)  # a crash: no teardown
        child.wait()
    assert ns in _netns()  # really left behind
    if by_hand:
        assert main(["bench", "cleanup", "--dry-run"]) == 0
        assert ns in _netns()  # a dry run removes nothing
        assert main(["bench", "cleanup"]) == 0
        out = capsys.readouterr().out
        assert f"removed netns {ns}" in out and f"removed link {link}" in out
    else:
        removed = cleanup_stale()
        assert f"netns {ns}" in removed and f"link {link}" in removed
    assert ns not in _netns() and link not in _links()
    time.sleep(0.1)
    stat = Path(f"/proc/{sleeper}/stat")
    assert not stat.exists() or " Z " in stat.read_text()


@needs_root
def test_sigterm_tears_down():
    script = textwrap.dedent("""
        import time
        from turnout.testbed import Testbed
        with Testbed() as tb:
            ns = tb.namespace("term")
            print(ns, flush=True)
            time.sleep(60)
    """)
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    ns = child.stdout.readline().strip()
    assert ns in _netns()
    child.terminate()
    child.wait(timeout=10)
    assert ns not in _netns()
    assert not list(state_dir().glob("*.json"))


def _nr_hugepages() -> int:
    return int(Path("/proc/sys/vm/nr_hugepages").read_text())


def test_a_hold_never_lends_pages_another_test_reserved():
    """The pool is one for the machine: a free page may be another test's
    reservation its DPDK has not mapped yet. The hold lends its own pages
    only as far as the free ones exceed every page it did not add."""
    from turnout.testbed.state import HugepageHold, _hugepage_pool

    class Pool(HugepageHold):
        def __init__(self) -> None:
            super().__init__()
            self.total = self.used = 0

        def _pool(self) -> tuple[int, int]:
            return self.total, self.total - self.used

        def _grow(self, extra: int) -> bool:
            self.total += extra
            return True

    h = Pool()
    assert h.borrow(8) and (h.total, h.pages) == (8, 8)
    h.used = 8  # its run maps them
    h.give_back(8)  # ... and is ending: still mapped
    h.total += 8  # another test reserved 8, not mapped yet: free
    assert h.borrow(8) and (h.total, h.pages, h.lent) == (24, 16, 8)  # grown, not lent the other's
    h.used = 8  # the first run let go, the second maps its 8
    h.give_back(8)
    h.used = 0
    assert h.borrow(16) and (h.total, h.pages) == (24, 16)  # all its own free: no growth
    assert _hugepage_pool("HugePages_Total:     512\nHugePages_Free:      500\n") == (512, 500)
    assert _hugepage_pool("MemTotal: 1 kB\n") == (0, 0)


@needs_root
@pytest.mark.serial  # reads the machine's hugepage pool, which other tests change
def test_a_campaigns_hugepages_stay_in_the_pool_between_runs_and_go_back_at_its_end():
    from turnout.testbed.state import holding_hugepages

    before = _nr_hugepages()
    with holding_hugepages() as hold:
        with Testbed() as tb:
            mnt = tb.reserve_hugepages(8)
            assert os.path.ismount(mnt) and _nr_hugepages() == before + 8
            (mnt / "page").write_bytes(b"")  # a file on it: the mount is used
        # the run is over: its pages went back to the hold, not to the kernel
        assert _nr_hugepages() == before + 8 and (hold.pages, hold.lent) == (8, 0)
        with Testbed() as tb:
            tb.reserve_hugepages(8)
            assert _nr_hugepages() == before + 8  # borrowed, not grown
            with Testbed() as tb2:
                tb2.reserve_hugepages(4)  # more than the hold has free
                assert _nr_hugepages() == before + 12 and hold.lent == 12
        assert (state_dir() / f"hold{os.getpid()}.json").exists()
    assert _nr_hugepages() == before
    assert not list(state_dir().glob("hold*.json"))


@needs_root
@pytest.mark.serial  # reads the machine's hugepage pool, which other tests change
def test_the_hugepages_a_killed_campaign_held_are_given_back():
    script = textwrap.dedent("""
        import time
        from turnout.testbed import Testbed
        from turnout.testbed.state import holding_hugepages
        with holding_hugepages():
            with Testbed() as tb:
                tb.reserve_hugepages(6)
            print("held", flush=True)
            time.sleep(60)
    """)
    before = _nr_hugepages()
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                             env=os.environ.copy())
    try:
        assert child.stdout.readline().strip() == "held"
        assert _nr_hugepages() == before + 6
    finally:
        child.send_signal(signal.SIGKILL)  # a crash: no teardown
        child.wait()
    assert _nr_hugepages() == before + 6  # really left behind
    removed = cleanup_stale()
    assert "hugepages /proc/sys/vm/nr_hugepages -6" in removed
    assert _nr_hugepages() == before
