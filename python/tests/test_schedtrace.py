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
from turnout.measure.schedtrace import named, stolen, summarize

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
    # a buffer that dropped events dropped its oldest: every CPU's events
    # are there from the latest of the CPUs' first ones (CPU 0's first
    # event, 10.202)
    assert got["complete_from"] == 10 * S + 202_000_000
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


#: a worker (tid 100) on CPU 1 with the scheduler's run-time charges: on
#: its CPU from 20.000, charged 4 ms at the tick of 20.004 (the first
#: charge after it took its CPU: not judged), 1 ms at 20.008 (3 ms of that
#: tick the hypervisor ran something else), 1 ms as it left its CPU at
#: 20.009; off its CPU until 20.020 (not stolen: another thread ran), 3.95
#: ms at 20.024 (again the first after a switch), 3.95 ms at 20.028 (50 µs
#: lost: under the count's threshold)
RUNTIME = """\
      turnout-w0-100     [001] d..2. 20.000000: sched_switch: prev_comm=other prev_pid=7 \
prev_prio=120 prev_state=S ==> next_comm=turnout-w0 next_pid=100 next_prio=120
      turnout-w0-100     [001] d.h2. 20.004000: sched_stat_runtime: comm=turnout-w0 pid=100 \
runtime=4000000 [ns]
      turnout-w0-100     [001] d.h2. 20.008000: sched_stat_runtime: comm=turnout-w0 pid=100 \
runtime=1000000 [ns]
      turnout-w0-100     [001] d..2. 20.009000: sched_stat_runtime: comm=turnout-w0 pid=100 \
runtime=1000000 [ns]
      turnout-w0-100     [001] d..2. 20.009000: sched_switch: prev_comm=turnout-w0 prev_pid=100 \
prev_prio=120 prev_state=R ==> next_comm=other next_pid=7 next_prio=120
           other-7       [001] d..2. 20.009000: sched_stat_runtime: comm=other pid=7 \
runtime=11000000 [ns]
           other-7       [001] d..2. 20.020000: sched_switch: prev_comm=other prev_pid=7 \
prev_prio=120 prev_state=S ==> next_comm=turnout-w0 next_pid=100 next_prio=120
      turnout-w0-100     [001] d.h2. 20.024000: sched_stat_runtime: comm=turnout-w0 pid=100 \
runtime=3950000 [ns]
      turnout-w0-100     [001] d.h2. 20.028000: sched_stat_runtime: comm=turnout-w0 pid=100 \
runtime=3950000 [ns]
"""


def test_time_on_the_cpu_the_kernel_did_not_charge_is_the_hypervisors():
    ev = procfs.parse_sched_trace(RUNTIME)["events"]
    assert ev[1] == [20 * S + 4_000_000, "r", 100, 4_000_000, 1]
    # 3 ms at once; 50 µs is noise; off its CPU is not stolen
    assert stolen(ev, [100], 20 * S, 21 * S) == {"ms": 3.0, "n": 1, "max_us": 3000.0}
    w = summarize(ev, [100], 20 * S, 21 * S)
    assert w["stolen"] == {"ms": 3.0, "n": 1, "max_us": 3000.0}
    # events before every CPU's are complete (a buffer that overflowed)
    # are not judged
    assert summarize(ev, [100], 20 * S, 21 * S, complete_from_ns=20 * S + 10_000_000
                     )["stolen"]["n"] == 0
    # the preemption by "other" is one, and its charges are not the worker's
    assert w["preempted"]["n"] == 1 and w["preempted"]["ms"] == 11.0
    # an interval counts when it begins and ends inside the window
    assert stolen(ev, [100], 20 * S, 20 * S + 7_000_000) == {"ms": 0.0, "n": 0, "max_us": 0.0}
    assert stolen(ev, [100], 20 * S + 5_000_000, 21 * S)["n"] == 0
    # a charge another CPU recorded (a remote update of its run time)
    # counts like its own CPU's: nothing stolen here
    remote = [[40 * S, "s", 7, "S", 100, "turnout-w0"],
              [40 * S + 4_000_000, "r", 100, 4_000_000, 1],
              [40 * S + 6_000_000, "r", 100, 2_000_000, 0],
              [40 * S + 8_000_000, "r", 100, 2_000_000, 1]]
    assert stolen(remote, [100], 40 * S, 41 * S) == {"ms": 0.0, "n": 0, "max_us": 0.0}
    # a charge that comes late (2 ms short at one tick, made up at the
    # next) is the kernel's clock, not the hypervisor: nothing stolen
    late = [[30 * S, "s", 7, "S", 100, "turnout-w0"],
            [30 * S + 4_000_000, "r", 100, 4_000_000, 1],
            [30 * S + 8_000_000, "r", 100, 2_000_000, 1],
            [30 * S + 12_000_000, "r", 100, 6_000_000, 1],
            [30 * S + 16_000_000, "r", 100, 1_500_000, 1]]
    assert stolen(late, [100], 30 * S, 31 * S) == {"ms": 2.5, "n": 1, "max_us": 2500.0}
    # without run-time events (a kernel without them): no figure at all
    assert stolen(procfs.parse_sched_trace(TRACE)["events"], [100], 10 * S, 11 * S) is None
    assert "stolen" not in summarize(procfs.parse_sched_trace(TRACE)["events"], [100],
                                     10 * S, 11 * S)


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
    swept. The spinner's steal, per tick, is at most what /proc/stat counted
    for its CPU (its time off the CPU is not steal)."""
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
        steal0 = procfs.cpu_steal_ticks([cpu])
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
        steal1 = procfs.cpu_steal_ticks([cpu])
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
        # the run-time charges are traced, and the spinner's steal is no
        # more than /proc/stat's (10 ms steps: one more step, and 2 ms)
        assert "stolen" in s, s
        tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
        assert 0 <= s["stolen"]["ms"] <= (steal1 - steal0 + 1) * tick_ms + 2, (s, steal0, steal1)
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
