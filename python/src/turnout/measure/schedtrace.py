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
- **slept**: how often it left its CPU to sleep, and for how long;
- **stolen**: time the thread was on its CPU as the guest kernel saw it
  and yet did not run, because the hypervisor ran something else on that
  virtual CPU's physical CPU (steal time), at the kernel's ``sched_stat_runtime``
  events (every scheduler tick and switch): the time between two of them
  on the CPU minus the run time charged between them (the kernel charges no
  stolen time, ``CONFIG_PARAVIRT_TIME_ACCOUNTING``), where it is more than
  ``STOLEN_INTERVAL_NS`` — the total, how many, and the longest.
  /proc/stat's steal counts the same in 10 ms steps for a whole CPU; this
  is per thread, to the nanosecond, inside the window, and says whether
  the loss came at once (a p99 of milliseconds) or spread out. Absent where
  the kernel has no such event (and on a machine that is not virtual, it
  stays 0).

``extra.sut_cpu_trace`` holds the summary, or ``{"why": ...}`` when the
host has no tracefs or the campaign runs unprivileged.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import pairwise
from typing import Any

__all__ = ["STOLEN_INTERVAL_NS", "TESTER_COMM", "named", "stolen", "summarize"]

#: the tester's (and chain VNFs') thread name, traced beside the SUT's
TESTER_COMM = "turnout-gen"

#: threads named in "by", most time first
TOP = 4

#: a tick interval that lost more than this to the hypervisor is counted
STOLEN_INTERVAL_NS = 100_000


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


def stolen(events: list[list[Any]], tids: list[int], t0_ns: int, t1_ns: int
           ) -> dict[str, Any] | None:
    """Run time the hypervisor took from the threads ``tids`` while they
    were on their CPU, over [t0_ns, t1_ns]: ``{"ms", "n", "max_us"}`` (the
    total, how many losses over ``STOLEN_INTERVAL_NS``, the longest), or
    None without ``sched_stat_runtime`` events of them.

    Per stretch on its CPU, from the first charge after the thread took it
    (the kernel may fold steal from while the CPU idled into that one) to
    its last: the deficit, time on the CPU minus run time charged since, at
    each charge. A charge may come late (the kernel charges up to its
    run-queue clock, which a path may read before updating it) and the next
    one makes up for it: only what the deficit keeps to the stretch's end
    is stolen, so the losses are the steps of its lowest value from each
    charge on. Another CPU may charge a thread now and then (a remote
    update of its run time): such a charge counts like its own CPU's. Where
    a CPU's trace buffer overflowed, pass ``t0_ns`` no earlier than the
    time every CPU's events are complete from (``parse``'s
    ``complete_from``): before it a thread's switches may be gone while
    another CPU's charges of it remain."""
    want = set(tids)
    if not any(ev[1] == "r" and int(ev[2]) in want for ev in events):
        return None
    # per thread, its stretches: the deficits at its charges inside the window
    open_: dict[int, list[int]] = {}
    start: dict[int, int] = {}
    charged: dict[int, int] = {}
    stretches: list[list[int]] = []

    def close(tid: int) -> None:
        d = open_.pop(tid, None)
        if d:
            stretches.append(d)
        start.pop(tid, None)
        charged.pop(tid, None)

    for ev in sorted(events, key=lambda e: e[0]):
        ns, kind = int(ev[0]), ev[1]
        if kind == "s":
            # off its CPU, or on it again: a stretch ends
            for tid in (int(ev[2]), int(ev[4])):
                if tid in want:
                    close(tid)
        elif kind == "r" and int(ev[2]) in want:
            tid = int(ev[2])
            if not t0_ns <= ns <= t1_ns:
                close(tid)
                continue
            if tid not in start:
                start[tid], charged[tid] = ns, 0
                open_[tid] = [0]
                continue
            charged[tid] += int(ev[3])
            open_[tid].append((ns - start[tid]) - charged[tid])
    for tid in list(open_):
        close(tid)
    total = n = most = 0
    for d in stretches:
        low = d[-1]
        lows = [low]
        for x in reversed(d[:-1]):
            low = min(low, x)
            lows.append(low)
        lows.reverse()
        for a, b in pairwise(lows):
            step = b - a
            if step > STOLEN_INTERVAL_NS:
                total += step
                n += 1
                most = max(most, step)
    return {"ms": round(total / 1e6, 3), "n": n, "max_us": round(most / 1e3, 1)}


def summarize(events: list[list[Any]], tids: list[int], t0_ns: int, t1_ns: int,
              lost: int = 0, complete_from_ns: int = 0) -> dict[str, Any]:
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
        if kind == "r":
            continue
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
    st = stolen(events, tids, max(t0_ns, complete_from_ns), t1_ns)
    return {
        "threads": len(want),
        "span_s": round((t1_ns - t0_ns) / 1e9, 3),
        "preempted": {"n": pre_n, "ms": round(pre_ns / 1e6, 3), "max_us": round(pre_max / 1e3, 1),
                      "by": [[c, n, round(d / 1e6, 3)] for c, (n, d) in top]},
        "woken": {"n": wk_n, "ms": round(wk_ns / 1e6, 3), "max_us": round(wk_max / 1e3, 1)},
        "slept": {"n": sl_n, "ms": round(sl_ns / 1e6, 3)},
        **({"stolen": st} if st is not None else {}),
        **({"lost_events": lost} if lost else {}),
    }
