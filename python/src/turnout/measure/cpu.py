"""CPU time of processes over exactly a trial's traffic window, from /proc.

A trial's processes start, wait for their peers, warm up, send, cool down
and exit; only the measured window (what turnout-gen reports as
``tx.window_start_ns``..``window_end_ns`` on CLOCK_MONOTONIC) is traffic.
``CpuSampler`` reads every thread's run time of the watched processes
every ``every_s`` in a background thread, with the monotonic time of each
reading; ``window`` interpolates each thread's cumulative CPU time linearly
to the window's edges. The run time is the scheduler's own account,
``/proc/PID/task/TID/schedstat`` (ns on a CPU, exact); utime/stime of
``stat`` count in ticks (``SC_CLK_TCK``, 10 ms here) and only split it into
user and system time (a thread's split over a window of T seconds is within
±2 ticks: ±2 % of a core over 1 s). Before 2026-11-29 the total came from
the ticks too: a thread that ran under 10 ms in a 0.4 s window (turnoutd
asleep between frames at 10 kpps) read 0. Without schedstat (a kernel
without CONFIG_SCHED_INFO) the ticks are the total.

Cycles are CPU seconds times ``nominal_hz()``: the TSC's (constant) rate,
not the current clock of some CPU, so a figure does not move with
frequency scaling.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .periodic import Periodic

__all__ = ["CLK_TCK", "CpuSample", "CpuSampler", "nominal_hz", "off_cpus", "pinned_threads",
           "run_queue_wait", "sample_threads", "thread_placement"]

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    """utime/stime (ticks) of one thread at one moment, and its last CPU."""

    pid: int
    tid: int
    name: str
    utime: int
    stime: int
    cpu: int
    #: ns it ran on a CPU (schedstat's first field); -1 when unreadable
    run_ns: int = -1


def sample_threads(pids: list[int]) -> dict[int, CpuSample]:
    """tid -> sample for every thread of these processes (gone ones skipped)."""
    out: dict[int, CpuSample] = {}
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                stat = (task / "stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1 : stat.rindex(")")]
            f = stat[stat.rindex(")") + 2 :].split()
            tid = int(task.name)
            try:
                run_ns = int((task / "schedstat").read_text().split()[0])
            except (OSError, ValueError, IndexError):
                run_ns = -1
            out[tid] = CpuSample(pid, tid, name, int(f[11]), int(f[12]), int(f[36]), run_ns)
    return out


@contextmanager
def off_cpus(avoid: list[int]) -> Iterator[list[int]]:
    """Keep the calling thread, and every thread and process it starts
    meanwhile, off the CPUs ``avoid`` (the SUT's: docs/bench.md, "Latency at
    low rates"); its CPU set is restored on exit. Yields the CPUs it runs on
    (an empty list when there is nothing to avoid or no other CPU allowed:
    then it runs where it did). Processes that pin themselves (turnout-gen
    ``--cpu``) are not held by it."""
    before = os.sched_getaffinity(0)
    rest = sorted(before - set(avoid))
    if not avoid or not rest or len(rest) == len(before):
        yield rest if avoid else []
        return
    os.sched_setaffinity(0, rest)
    try:
        yield rest
    finally:
        os.sched_setaffinity(0, before)


def _cpu_list(text: str) -> set[int]:
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def pinned_threads(pids: list[int], cpus: list[int]) -> list[int]:
    """The threads of these processes that may run on ``cpus`` only (the
    SUT's data path: workers, PMD threads, forwarding lcores), from
    /proc/PID/task/TID/status; empty when none is (nothing pinned, or no
    ``cpus``)."""
    if not cpus:
        return []
    want = set(cpus)
    out = []
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                status = (task / "status").read_text()
            except OSError:
                continue
            for line in status.splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    allowed = _cpu_list(line.split(":", 1)[1])
                    if allowed and allowed <= want:
                        out.append(int(task.name))
                    break
    return out


def thread_placement(pids: list[int], cpus: list[int]) -> dict[str, Any]:
    """Where the threads of these processes may run, against the SUT's
    ``cpus``: ``on`` the threads allowed on them only (its data path),
    ``both`` those allowed on them and elsewhere (they can preempt the data
    path), ``off`` how many are allowed elsewhere only; names with their
    counts (/proc/PID/task/TID/status and comm). The same rule holds for
    every SUT (docs/bench.md, "Placement"): the report checks it."""
    want = set(cpus)
    on: dict[str, int] = {}
    both: dict[str, int] = {}
    off = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                status = (task / "status").read_text()
                name = (task / "comm").read_text().strip()
            except OSError:
                continue
            allowed: set[int] = set()
            for line in status.splitlines():
                if line.startswith("Cpus_allowed_list:"):
                    allowed = _cpu_list(line.split(":", 1)[1])
                    break
            if not allowed:
                continue
            if allowed <= want:
                on[name] = on.get(name, 0) + 1
            elif allowed & want:
                both[name] = both.get(name, 0) + 1
            else:
                off += 1
    return {"on": on, "both": both, "off": off}


def run_queue_wait(pids: list[int], tids: list[int] | None = None) -> tuple[int, int]:
    """(ns spent runnable but waiting for a CPU, times run on a CPU) summed
    over every thread of these processes, or over the threads ``tids`` of
    them when given (/proc/PID/task/TID/schedstat; gone threads skipped):
    the scheduler's delay, whatever the thread waited for."""
    wait = slices = 0
    only = set(tids) if tids else None
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            if only is not None and int(task.name) not in only:
                continue
            try:
                f = (task / "schedstat").read_text().split()
                wait += int(f[1])
                slices += int(f[2])
            except (OSError, ValueError, IndexError):
                continue
    return wait, slices


#: a SUT whose threads waited this long on average for a CPU each time they
#: were to run had its latency set by the scheduler (µs; a wake-up on an idle
#: core costs a few µs, at SCHED_FIFO on a loaded one < 100 µs at p99)
SCHED_WAIT_FLAG_US = 100.0


def sched_wait(before: tuple[int, int], after: tuple[int, int], wall_s: float) -> dict[str, float]:
    """The run-queue wait of a SUT's threads between two ``run_queue_wait``
    readings, for ``extra.sut_sched``."""
    wait_ns = max(0, after[0] - before[0])
    slices = max(0, after[1] - before[1])
    return {"run_queue_wait_ms": round(wait_ns / 1e6, 3), "slices": slices,
            "mean_wait_us": round(wait_ns / slices / 1e3, 2) if slices else 0.0,
            "wall_s": round(wall_s, 3)}


class CpuSampler:
    """Samples the threads of ``pids`` (``role`` -> pids, e.g. "sut", "vnf")
    every ``every_s`` until ``stop``; ``window`` gives CPU over an interval."""

    def __init__(self, pids_by_role: dict[str, list[int]], every_s: float = 0.02) -> None:
        self.pids_by_role = {r: list(p) for r, p in pids_by_role.items() if p}
        self.every_s = every_s
        self.samples: list[tuple[int, dict[int, CpuSample]]] = []
        self._clock: Periodic | None = None

    def _take(self) -> None:
        pids = [p for ps in self.pids_by_role.values() for p in ps]
        self.samples.append((time.monotonic_ns(), sample_threads(pids)))

    def start(self) -> CpuSampler:
        if self.pids_by_role:
            self._clock = Periodic(self._take, self.every_s, "cpu-sampler").start()
        return self

    def stop(self) -> None:
        if self._clock is not None:
            self._clock.stop()
            self._clock = None

    def _at(self, tid: int, t_ns: int, field: str) -> float:
        """Cumulative ticks of ``field`` of thread ``tid`` at ``t_ns``,
        interpolated between the samples around it."""
        before = after = None
        for ts, smp in self.samples:
            s = smp.get(tid)
            if s is None:
                continue
            if ts <= t_ns:
                before = (ts, getattr(s, field))
            else:
                after = (ts, getattr(s, field))
                break
        if before is None:
            return float(after[1]) if after else 0.0
        if after is None:
            return float(before[1])
        (t0, v0), (t1, v1) = before, after
        return v0 + (v1 - v0) * (t_ns - t0) / max(1, t1 - t0)

    def window(self, start_ns: int, end_ns: int) -> list[dict[str, Any]]:
        """Per thread: role, pid, tid, name, last CPU, user_s, sys_s, cpu_s
        and util (CPU seconds per second of the window) over [start, end]."""
        span_s = max(0, end_ns - start_ns) / 1e9
        role_of = {p: r for r, ps in self.pids_by_role.items() for p in ps}
        threads: dict[int, CpuSample] = {}
        for _, smp in self.samples:
            threads.update(smp)
        exact = {tid for tid in threads
                 if all(smp[tid].run_ns >= 0 for _, smp in self.samples if tid in smp)}
        rows = []
        for tid, s in sorted(threads.items()):
            u = (self._at(tid, end_ns, "utime") - self._at(tid, start_ns, "utime")) / CLK_TCK
            k = (self._at(tid, end_ns, "stime") - self._at(tid, start_ns, "stime")) / CLK_TCK
            cpu_s = u + k
            if tid in exact:  # the scheduler's ns, not the ticks
                cpu_s = max(0.0, self._at(tid, end_ns, "run_ns")
                            - self._at(tid, start_ns, "run_ns")) / 1e9
            rows.append({
                "role": role_of.get(s.pid, "sut"), "pid": s.pid, "tid": tid, "name": s.name,
                "cpu": s.cpu, "user_s": round(u, 6), "sys_s": round(k, 6),
                "cpu_s": round(cpu_s, 6), "util": round(cpu_s / span_s, 4) if span_s else 0.0,
            })
        return rows


_HZ: tuple[float, str] | None = None


def nominal_hz() -> tuple[float, str]:
    """The TSC's rate in Hz and where it was read: the kernel's TSC
    calibration (dmesg), else the model name's nominal clock ("@ 2.30GHz"),
    else cpufreq's base frequency, else CPU 0's current "cpu MHz" (the
    last resort, which moves with frequency scaling: the source says so).
    (0, "unknown") when none is readable."""
    global _HZ
    if _HZ is not None:
        return _HZ
    found: tuple[float, str] = (0.0, "unknown")
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
        m = re.findall(r"tsc: Refined TSC clocksource calibration: ([\d.]+) MHz", out) or \
            re.findall(r"tsc: Detected ([\d.]+) MHz", out)
        if m:
            found = (float(m[-1]) * 1e6, "tsc (dmesg)")
    except (OSError, subprocess.SubprocessError):
        pass
    if not found[0]:
        try:
            info = Path("/proc/cpuinfo").read_text()
            m2 = re.search(r"model name\s*:.*@\s*([\d.]+)\s*GHz", info)
            if m2:
                found = (float(m2.group(1)) * 1e9, "model name")
            else:
                base = Path("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency")
                if base.exists():
                    found = (float(base.read_text()) * 1e3, "cpufreq base_frequency")
                else:
                    m3 = re.search(r"cpu MHz\s*:\s*([\d.]+)", info)
                    if m3:
                        found = (float(m3.group(1)) * 1e6,
                                 "cpu MHz of CPU 0 (current, not nominal)")
        except OSError:
            pass
    _HZ = found
    return found
