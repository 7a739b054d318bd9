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
±2 ticks: ±2 % of a core over 1 s). The total does not come from the
ticks: a thread that ran under 10 ms in a 0.4 s window (turnoutd
asleep between frames at 10 kpps) would read 0. Without schedstat (a kernel
without CONFIG_SCHED_INFO) the ticks are the total.

Cycles are CPU seconds times ``nominal_hz()``: the TSC's (constant) rate,
not the current clock of some CPU, so a figure does not move with
frequency scaling.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from ..hosts import procfs
from .others import OthersSampler
from .periodic import Periodic

__all__ = ["CLK_TCK", "CpuSample", "CpuSampler", "NativeCpuSampler", "find_sampler",
           "local_sampler", "nominal_hz", "off_cpus", "pinned_threads",
           "run_queue_wait", "sample_threads", "thread_placement"]

CLK_TCK = procfs.CLK_TCK


class CpuSample(NamedTuple):
    """utime/stime (ticks) of one thread at one moment, and its last CPU.
    A named tuple, not a dataclass: a sample makes one per thread on the
    tester's CPU (0.05 µs against 1.2 µs for a frozen dataclass here)."""

    pid: int
    tid: int
    name: str
    utime: int
    stime: int
    cpu: int
    #: ns it ran on a CPU (schedstat's first field); -1 when unreadable
    run_ns: int = -1


def sample_threads(pids: list[int], files: procfs.Kept | None = None,
                   with_stat: bool = True) -> dict[int, CpuSample]:
    """tid -> sample for every thread of these processes (gone ones
    skipped); with kept ``files`` and not ``with_stat``, utime and stime are
    -1 (schedstat read only: hosts/procfs.py)."""
    return {int(tid): CpuSample(v[0], int(tid), v[1], v[2], v[3], v[4], v[5])
            for tid, v in procfs.sample_threads(pids, files, with_stat).items()}


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


_cpu_list = procfs.cpu_set
#: the threads of these processes pinned to ``cpus`` only, where their
#: threads may run, their run-queue waits (hosts/procfs.py: the same
#: readers run on a remote campaign's SUT host)
pinned_threads = procfs.pinned_threads
thread_placement = procfs.thread_placement
run_queue_wait = procfs.run_queue_wait


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
    every ``every_s`` until ``stop``; ``window`` gives CPU over an interval.

    Its files stay open (``procfs.Kept``) and most samples read only
    ``schedstat``, the run time every CPU figure comes from; ``stat``
    (utime/stime ticks, the last CPU, a new thread's name) is read in the
    first and last sample and every ``STAT_EVERY``-th between, or in every
    sample where schedstat is unreadable. A sample runs on the tester's CPU
    while traffic flows (off_cpus), so what it costs is the tester's: ~30 µs
    for a dozen threads here, against ~200 µs reading both files anew."""

    #: one sample in this many reads ``stat`` too (user/system split in
    #: 10 ms ticks: at 0.02 s spacing, every 0.1 s is finer than the ticks)
    STAT_EVERY = 5

    def __init__(self, pids_by_role: dict[str, list[int]], every_s: float = 0.02) -> None:
        self.pids_by_role = {r: list(p) for r, p in pids_by_role.items() if p}
        self.every_s = every_s
        self.samples: list[tuple[int, dict[int, CpuSample]]] = []
        self._clock: Periodic | None = None
        self._files = procfs.Kept()
        self._taken = 0
        self._last = False
        #: schedstat unreadable in a sample (no CONFIG_SCHED_INFO): stat always
        self._ticks_only = False

    def _take(self) -> None:
        pids = [p for ps in self.pids_by_role.values() for p in ps]
        full = self._last or self._ticks_only or self._taken % self.STAT_EVERY == 0
        smp = sample_threads(pids, self._files, with_stat=full)
        self.samples.append((time.monotonic_ns(), smp))
        if full:  # every file of a live thread was read: close the others
            self._files.sweep()
        self._taken += 1
        if any(s.run_ns < 0 for s in smp.values()):
            self._ticks_only = True

    def start(self) -> CpuSampler:
        if self.pids_by_role:
            self._clock = Periodic(self._take, self.every_s, "cpu-sampler").start()
        return self

    def stop(self) -> None:
        if self._clock is not None:
            self._last = True  # the last sample reads stat too
            self._clock.stop()
            self._clock = None
        self._files.close()

    def _at(self, tid: int, t_ns: int, field: str) -> float:
        """Cumulative ticks of ``field`` of thread ``tid`` at ``t_ns``,
        interpolated between the samples around it."""
        before = after = None
        for ts, smp in self.samples:
            s = smp.get(tid)
            if s is None or getattr(s, field) < 0:  # not read in this sample
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


class NativeCpuSampler(CpuSampler):
    """``CpuSampler`` through ``turnout-sample`` (crates/gen/src/sample.rs):
    a process of its own, started with the sampler and stopped with it
    (SIGINT), that reads the same files the same way (schedstat each
    sample through kept descriptors, stat every ``STAT_EVERY``-th, the
    first and the last) and prints every sample at the end. Same samples,
    same ``window``; a sample costs the CPU it shares with the tester a
    fraction of what Python's does (docs/bench.md, "CPU"). It inherits the
    caller's CPUs (the bench's ``off_cpus``). ``error`` says why it gave
    no samples (then ``window`` has no rows, as for a SUT that is gone).

    Given ``others`` (an ``OthersSampler`` of this machine, not started),
    it lists their candidates at ``start`` and samples them too, every
    ``others.every_s``, filling ``others.samples`` at ``stop``
    (``others.via`` is then "turnout-sample"; left empty when the process
    did not start, so the caller starts ``others`` itself).

    ``start`` returns once the process said ``ready``: its first samples
    are taken, so whatever runs after ``start`` is inside them (at most
    ``READY_S`` later; ``stop`` still reads the document if it is late)."""

    #: how long ``start`` and ``stop`` wait for the line ``ready``
    READY_S = 10.0

    def __init__(self, binary: str, pids_by_role: dict[str, list[int]],
                 every_s: float = 0.02, others: OthersSampler | None = None) -> None:
        super().__init__(pids_by_role, every_s)
        self.binary = binary
        self.others = others
        self.error = ""
        #: the sampler's own cost: ns inside samples and its CPU ns
        self.cost: dict[str, int] = {}
        self._proc: subprocess.Popen[bytes] | None = None
        self._ready = False
        #: what came of the first line so far (``start`` may give up mid-line)
        self._line = b""

    def start(self) -> NativeCpuSampler:
        pids = [p for ps in self.pids_by_role.values() for p in ps]
        if pids:
            extra: list[str] = []
            if self.others is not None and not self.others.prepare().cands:
                self.others = None  # nothing to sample: left to the caller
            if self.others is not None:
                extra = ["--others-every-ms", str(max(1, round(self.others.every_s * 1000)))]
                for c in self.others.cands:
                    extra += ["--other", f"{c.pid}:{c.tid}:{int(c.bound)}"]
            try:
                self._proc = subprocess.Popen(
                    [self.binary, "--every-ms", str(max(1, round(self.every_s * 1000))),
                     "--stat-every", str(self.STAT_EVERY), *extra, *(str(p) for p in pids)],
                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            except OSError as e:
                self.error = f"turnout-sample: {e}"
            else:
                if self.others is not None:
                    self.others.via = "turnout-sample"
                self._ready = self._wait_ready(self._proc, self.READY_S)
        return self

    def _wait_ready(self, proc: subprocess.Popen[bytes], within_s: float) -> bool:
        """Read its first line, ``ready`` (its signal handlers are in and its
        first samples taken), waiting at most ``within_s``; False when it
        did not come (``stop`` says why)."""
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        deadline = time.monotonic() + within_s
        while not self._line.endswith(b"\n"):
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return False
            chunk = os.read(fd, 1)  # one byte: the document that follows stays in the pipe
            if not chunk:
                return False
            self._line += chunk
        return self._line == b"ready\n"

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        # its first line says it can be stopped (its signal handlers are in)
        ready = self._ready or self._wait_ready(proc, self.READY_S)
        proc.send_signal(signal.SIGINT)
        try:
            out, err = proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            self.error = "turnout-sample did not stop in 10 s"
            return
        try:
            doc = json.loads(out)
            self.samples = [(int(t), {int(r[1]): CpuSample(*r) for r in rows})
                            for t, rows in doc["samples"]]
            self.cost = {"sampling_ns": int(doc.get("sampling_ns", 0)),
                         "cpu_ns": int(doc.get("cpu_ns", 0))}
            if self.others is not None:
                # [t_ns, [[tid, run_ns, runs, cpu], ...]] -> the Python
                # sampler's (monotonic s, tid -> (ns, runs, cpu))
                self.others.samples = [(int(t) / 1e9,
                                        {int(r[0]): (int(r[1]), int(r[2]), int(r[3]))
                                         for r in rows})
                                       for t, rows in doc["others"]]
        except (ValueError, KeyError, TypeError, IndexError) as e:
            why = err.decode(errors="replace").strip()[-300:]
            self.error = (f"turnout-sample exited {proc.returncode}"
                          f"{'' if ready else ' before it was ready'}: {why or e}")
            if self.others is not None:
                self.others.error = self.error


def find_sampler() -> str | None:
    """The ``turnout-sample`` binary: this checkout's build, else on PATH."""
    from .. import build

    return build.find("turnout-sample")


def local_sampler(pids_by_role: dict[str, list[int]],
                  others: OthersSampler | None = None) -> CpuSampler:
    """The CPU sampler of a trial on this machine: ``NativeCpuSampler`` when
    ``turnout-sample`` is built (taking ``others``' samples too), else the
    Python one (``others`` then left to the caller to start)."""
    binary = find_sampler()
    if binary is None:
        return CpuSampler(pids_by_role)
    return NativeCpuSampler(binary, pids_by_role, others=others)


#: the TSC's rate in Hz and where it was read (hosts/procfs.py)
nominal_hz = procfs.nominal_hz
