"""The SUT's threads, switch by switch: who held their CPU while they could
run, and how long their own wake-ups took.

The run-queue wait of ``extra.sut_sched`` (schedstat) is one sum: time a
thread was runnable and not running. It mixes two things a reader must
tell apart: another thread holding the CPU (the scheduler's doing: a busy
poller at SCHED_OTHER shares its CPU) and the thread's own wake-up after
it slept (a sleeping switch's choice; on a virtual machine a halted vCPU
may take milliseconds to run again, with no other thread involved). The
campaign records, per fixed-rate trial, the kernel's ``sched_switch`` and
``sched_waking`` events of the threads pinned to the SUT's CPUs in a
tracefs instance of its own (hosts/procfs.py ``sched_trace_start``,
filtered in the kernel: a few events per switch, nothing per frame), and
``summarize`` splits the wait over the traffic window:

- **preempted**: the thread left its CPU runnable (``prev_state`` R) until
  it ran again — the count, the total, the longest, and which threads took
  the CPU (the one switched in first), most time first;
- **woken**: from the moment another CPU (or an interrupt) asked to wake
  the thread to its running — the count, the total, the longest: its own
  wake-up latency, a halted virtual CPU's return included;
- **slept**: how often it left its CPU to sleep, and for how long.

``extra.sut_cpu_trace`` holds the summary, or ``{"why": ...}`` when the
host has no tracefs or the campaign runs unprivileged.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

__all__ = ["TESTER_COMM", "named", "summarize"]

#: the tester's (and chain VNFs') thread name, traced beside the SUT's
TESTER_COMM = "turnout-gen"

#: threads named in "by", most time first
TOP = 4


def named(events: list[list[Any]], comm: str) -> list[int]:
    """The threads the events name ``comm`` (as they leave or take a CPU,
    or are woken)."""
    out: set[int] = set()
    for ev in events:
        if ev[1] == "s":
            if ev[5] == comm:
                out.add(int(ev[4]))
        elif ev[1] == "w" and ev[3] == comm:
            out.add(int(ev[2]))
    return sorted(out)


def summarize(events: list[list[Any]], tids: list[int], t0_ns: int, t1_ns: int,
              lost: int = 0) -> dict[str, Any]:
    """The summary of ``events`` (hosts/procfs.py ``sched_trace_stop``) for
    the threads ``tids`` over the window [t0_ns, t1_ns]: an interval counts
    when it begins inside the window (it may end after it)."""
    want = set(tids)
    off: dict[int, tuple[int, str, str]] = {}  # tid -> (since, state, taken by)
    woke: dict[int, int] = {}  # tid -> wake-up time
    pre_n = pre_ns = pre_max = 0
    by: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    wk_n = wk_ns = wk_max = 0
    sl_n = sl_ns = 0
    for ev in sorted(events, key=lambda e: e[0]):
        ns, kind = int(ev[0]), ev[1]
        if kind == "w":
            tid = int(ev[2])
            if tid not in want:
                continue
            left = off.pop(tid, None)
            if left is not None and left[1] != "R" and t0_ns <= left[0] <= t1_ns:
                sl_ns += ns - left[0]
            woke.setdefault(tid, ns)
            continue
        prev, state, nxt, comm = int(ev[2]), str(ev[3]), int(ev[4]), str(ev[5])
        if prev in want:
            runnable = state.startswith("R")
            off[prev] = (ns, "R" if runnable else state, comm)
            woke.pop(prev, None)
            if not runnable and t0_ns <= ns <= t1_ns:
                sl_n += 1
        if nxt in want:
            left = off.pop(nxt, None)
            w = woke.pop(nxt, None)
            if left is not None and left[1] == "R" and t0_ns <= left[0] <= t1_ns:
                d = ns - left[0]
                pre_n += 1
                pre_ns += d
                pre_max = max(pre_max, d)
                by[left[2]][0] += 1
                by[left[2]][1] += d
            elif w is not None and t0_ns <= w <= t1_ns:
                d = ns - w
                wk_n += 1
                wk_ns += d
                wk_max = max(wk_max, d)
    top = sorted(by.items(), key=lambda kv: -kv[1][1])[:TOP]
    return {
        "threads": len(want),
        "span_s": round((t1_ns - t0_ns) / 1e9, 3),
        "preempted": {"n": pre_n, "ms": round(pre_ns / 1e6, 3), "max_us": round(pre_max / 1e3, 1),
                      "by": [[c, n, round(d / 1e6, 3)] for c, (n, d) in top]},
        "woken": {"n": wk_n, "ms": round(wk_ns / 1e6, 3), "max_us": round(wk_max / 1e3, 1)},
        "slept": {"n": sl_n, "ms": round(sl_ns / 1e6, 3)},
        **({"lost_events": lost} if lost else {}),
    }
