"""Who took a thread's CPU, switch by switch (measure/schedtrace.py, the
tracefs readers of hosts/procfs.py): the parser and the summary on a
trace's text, then once for real on this kernel's tracefs (root)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import needs_root
from turnout.hosts import procfs
from turnout.measure.schedtrace import named, summarize

#: a tracefs ``trace`` of a worker (tid 100) on CPU 1 and a tester (200) on
#: CPU 0: preempted twice (by a host agent, 30 µs; by a kworker, 4 ms), to
#: sleep once and woken 25 µs after the wake-up was asked for; the tester
#: preempted once by a thread whose name has a space in it
TRACE = """\
# tracer: nop
#
# entries-in-buffer/entries-written: 12/14   #P:2
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |
      turnout-w0-100     [001] d..2. 10.000100: sched_switch: prev_comm=turnout-w0 prev_pid=100 \
prev_prio=120 prev_state=R ==> next_comm=memfd:sealed-91 next_pid=7 next_prio=120
 memfd:sealed-91-7       [001] d..2. 10.000130: sched_switch: prev_comm=memfd:sealed-91 prev_pid=7 \
prev_prio=120 prev_state=S ==> next_comm=turnout-w0 next_pid=100 next_prio=120
      turnout-w0-100     [001] d..2. 10.100000: sched_switch: prev_comm=turnout-w0 prev_pid=100 \
prev_prio=120 prev_state=R+ ==> next_comm=kworker/1:0 next_pid=8 next_prio=120
     kworker/1:0-8       [001] d..2. 10.104000: sched_switch: prev_comm=kworker/1:0 prev_pid=8 \
prev_prio=120 prev_state=I ==> next_comm=turnout-w0 next_pid=100 next_prio=120
      turnout-w0-100     [001] d..2. 10.200000: sched_switch: prev_comm=turnout-w0 prev_pid=100 \
prev_prio=120 prev_state=S ==> next_comm=swapper/1 next_pid=0 next_prio=120
     turnout-gen-200     [000] d..2. 10.202000: sched_waking: comm=turnout-w0 pid=100 prio=120 \
target_cpu=001
          <idle>-0       [001] d..2. 10.202025: sched_switch: prev_comm=swapper/1 prev_pid=0 \
prev_prio=120 prev_state=R ==> next_comm=turnout-w0 next_pid=100 next_prio=120
     turnout-gen-200     [000] d..2. 10.300000: sched_switch: prev_comm=turnout-gen prev_pid=200 \
prev_prio=120 prev_state=R ==> next_comm=turnout sample next_pid=9 next_prio=120
  turnout sample-9       [000] d..2. 10.300500: sched_switch: prev_comm=turnout sample prev_pid=9 \
prev_prio=120 prev_state=S ==> next_comm=turnout-gen next_pid=200 next_prio=120
      turnout-w0-100     [001] d..2. 11.500000: sched_switch: prev_comm=turnout-w0 prev_pid=100 \
prev_prio=120 prev_state=R ==> next_comm=late next_pid=10 next_prio=120
          late-10        [001] d..2. 11.600000: sched_switch: prev_comm=late prev_pid=10 \
prev_prio=120 prev_state=S ==> next_comm=turnout-w0 next_pid=100 next_prio=120
"""
S = 1_000_000_000


def test_the_parser_reads_switches_and_wake_ups_and_what_the_buffer_lost():
    got = procfs.parse_sched_trace(TRACE)
    assert got["lost"] == 2
    ev = got["events"]
    assert len(ev) == 11
    assert ev[0] == [10 * S + 100_000, "s", 100, "R", 7, "memfd:sealed-91"]
    assert ev[5] == [10 * S + 202_000_000, "w", 100, "turnout-w0"]
    # a name with a space in it
    assert ev[7][5] == "turnout sample"
    assert named(ev, "turnout-gen") == [200]


def test_the_summary_splits_preemptions_from_own_sleeps_inside_the_window():
    ev = procfs.parse_sched_trace(TRACE)["events"]
    w = summarize(ev, [100], 10 * S, 11 * S, lost=2)
    assert w["preempted"] == {"n": 2, "ms": 4.03, "max_us": 4000.0,
                              "by": [["kworker/1:0", 1, 4.0], ["memfd:sealed-91", 1, 0.03]]}
    # its own wake-up, from the moment it was asked for, not a preemption
    assert w["woken"] == {"n": 1, "ms": 0.025, "max_us": 25.0}
    assert w["slept"] == {"n": 1, "ms": 2.0}
    assert w["lost_events"] == 2 and w["span_s"] == 1.0
    # the preemption at 11.5 s begins after the window: not counted; a
    # wider window takes it
    assert summarize(ev, [100], 10 * S, 12 * S)["preempted"]["n"] == 3
    t = summarize(ev, [200], 10 * S, 11 * S)
    assert t["preempted"]["by"] == [["turnout sample", 1, 0.5]]
    assert t["slept"]["n"] == 0 and "lost_events" not in t
    # threads it does not know: nothing
    assert summarize(ev, [4242], 10 * S, 11 * S)["preempted"]["n"] == 0


def _spawn(code: str, cpu: int) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-c", code])
    os.sched_setaffinity(p.pid, {cpu})
    return p


@needs_root
def test_a_real_trace_names_the_thread_that_took_the_cpu_and_removes_its_instance():
    """Two processes of ours pinned to one CPU: one spins, the other wakes
    every 2 ms and spins 0.5 ms. The trace must show the spinner preempted
    by the waker (by its name) and the waker's own sleeps and wake-ups, and
    leave no tracefs instance behind; a stale instance of a gone process is
    swept."""
    root = next((r for r in procfs.TRACEFS if os.path.isdir(f"{r}/instances")), None)
    assert root is not None, "no tracefs instances here"
    cpu = max(os.sched_getaffinity(0))
    stale = f"{root}/instances/turnout-{2**22 + 17}"  # above pid_max's default: gone
    os.makedirs(stale, exist_ok=True)
    spin = _spawn("while True: pass", cpu)
    wake = _spawn("import time\nopen('/proc/self/comm', 'w').write('tt-waker')\n"
                  "while True:\n t = time.monotonic()\n"
                  " while time.monotonic() - t < 0.0005: pass\n time.sleep(0.002)\n", cpu)
    name = f"turnout-test-{os.getpid()}"
    inst = None
    try:
        deadline = time.monotonic() + 10
        while "tt-waker" not in Path(f"/proc/{wake.pid}/comm").read_text():
            assert time.monotonic() < deadline, "the waker never named itself"
            time.sleep(0.01)
        started = procfs.sched_trace_start(name, [spin.pid, wake.pid])
        assert "instance" in started, started
        inst = started["instance"]
        assert not os.path.exists(stale), "a gone process's instance was not swept"
        t0 = time.monotonic_ns()
        # wait for the events it checks, with a deadline
        deadline = time.monotonic() + 20
        while True:
            time.sleep(0.3)
            t1 = time.monotonic_ns()
            text = Path(f"{inst}/trace").read_text()
            ev = procfs.parse_sched_trace(text)["events"]
            s = summarize(ev, [spin.pid], t0, t1)
            w = summarize(ev, [wake.pid], t0, t1)
            waker = "tt-waker" in [b[0] for b in s["preempted"]["by"]]
            if (waker and s["preempted"]["n"] >= 3 and w["slept"]["n"] >= 3
                    and w["woken"]["n"] >= 3) or time.monotonic() > deadline:
                break
        got = procfs.sched_trace_stop(inst)
        inst = None
        assert not os.path.exists(f"{root}/instances/{name}")
        ev = got["events"]
        s = summarize(ev, [spin.pid], t0, t1)
        w = summarize(ev, [wake.pid], t0, t1)
        assert s["preempted"]["n"] >= 3, s
        # (on a busy machine other threads may take the CPU too)
        assert "tt-waker" in [b[0] for b in s["preempted"]["by"]], s
        assert s["slept"]["n"] == 0, s
        assert w["slept"]["n"] >= 3 and w["woken"]["n"] >= 3, w
    finally:
        for p in (spin, wake):
            p.kill()
            p.wait()
        if inst is not None:
            procfs.sched_trace_stop(inst)
        if os.path.isdir(stale):
            os.rmdir(stale)


def test_no_thread_no_trace():
    assert procfs.sched_trace_start("turnout-none", []) == {"why": "no SUT thread to trace"}
    assert "why" in procfs.sched_trace_stop("/tmp/not-an-instance")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-v"]))
