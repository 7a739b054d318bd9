"""What else ran on the SUT's CPUs during a trial's traffic window.

A busy poller at SCHED_OTHER shares its CPU with every thread the
scheduler puts there; while one of them runs, every frame waits, so a p99
of milliseconds at 10 kpps may be a kernel thread's 8 ms slice, not the
switch (docs/results/2026-11-27-kernel-threads-on-sut-cpu.md). ``OthersSampler``
says so for each trial, cheaply and without perf:

- at the trial's start it lists every thread whose CPU affinity includes
  a SUT CPU, except the SUT's own (its processes' threads) and the bench's:
  those are the candidates;
- every ``every_s`` (0.15 s: at least two samples in a 0.4 s window) it reads each candidate's
  ``/proc/PID/task/TID/schedstat`` (ns on a CPU, number of runs) and, for
  a thread that may also run elsewhere, ``stat``'s "processor" (the CPU it
  last ran on), through files kept open between samples (hosts/procfs.py
  ``Kept``);
- ``others_in_window`` sums, between the first and the last sample inside
  the traffic window, the time of the threads bound to the SUT's CPUs and,
  for the others, of each interval at whose start or end /proc said they
  were on a SUT CPU (an approximation: such a thread's interval may have
  been partly elsewhere). With ``isolate_sut_cpus`` (system/isolate.py)
  only bound threads and strays are left, and the figure is exact.

Threads started during the trial are not counted (the list is made once,
at its start, so the samples stay cheap: about 0.6 ms for 73 threads
here, on the tester's CPU). On this machine, where ``turnout-sample`` is
built, the trial's ``NativeCpuSampler`` takes these samples too (the
same files, read the same way, from its process instead of a Python
thread: measure/cpu.py); ``via`` then says so.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..hosts import procfs
from .periodic import Periodic

if TYPE_CHECKING:
    from ..hosts.base import Host

__all__ = ["Candidate", "OthersSampler", "candidates", "others_in_window"]


@dataclass(frozen=True)
class Candidate:
    pid: int
    tid: int
    comm: str
    #: affinity within the SUT's CPUs only (a per-CPU kthread there, or a
    #: thread pinned there): all its time is on them
    bound: bool
    #: a kernel thread (PF_KTHREAD), not a process's
    kthread: bool = False


def candidates(sut_cpus: set[int], skip_pids: set[int]) -> list[Candidate]:
    """Every thread that may run on a SUT CPU, but the ``skip_pids``' ones
    (and this process's: hosts/procfs.py)."""
    return [Candidate(int(p), int(t), str(c), bool(b), bool(k))
            for p, t, c, b, k in procfs.candidates(sorted(sut_cpus), sorted(skip_pids))]


#: one reading of a thread: (ns on a CPU, runs, the CPU it last ran on or -1)
Reading = tuple[int, int, int]


def read_thread(c: Candidate, files: procfs.Kept | None = None) -> Reading | None:
    r = procfs.read_thread(c.pid, c.tid, c.bound, files)
    return None if r is None else (r[0], r[1], r[2])


@dataclass
class OthersSampler:
    """Samples the candidates every ``every_s`` from a thread of its own
    (which inherits the caller's CPUs: the bench keeps itself off the
    SUT's, measure/cpu.py off_cpus)."""

    sut_cpus: set[int]
    skip_pids: set[int]
    every_s: float = 0.15
    cands: list[Candidate] = field(default_factory=list)
    #: (monotonic s, tid -> Reading)
    samples: list[tuple[float, dict[int, Reading]]] = field(default_factory=list)
    _clock: Periodic | None = None
    #: the SUT's host (this machine when None): a remote one's agent lists
    #: and reads its threads (hosts/procfs.py); the samples are stamped with
    #: this machine's clock at the request's midpoint, as RemoteCpuSampler's
    host: Host | None = None
    #: the last error of a remote read ("" when none)
    error: str = ""
    #: the candidates' files, kept open between samples (hosts/procfs.py)
    _files: procfs.Kept = field(default_factory=procfs.Kept)
    #: who takes the samples when not this sampler's thread
    #: ("turnout-sample": measure/cpu.py NativeCpuSampler fills ``samples``)
    via: str = ""

    def _take(self) -> None:
        if self.host is not None and not self.host.is_local:
            t0 = time.monotonic()
            try:
                r = self.host.procfs("read_threads",
                                     threads=[[c.pid, c.tid, c.bound] for c in self.cands])
            except Exception as e:  # a host that dropped off: the trial says so
                self.error = f"{type(e).__name__}: {e}"
                return
            mid = (t0 + time.monotonic()) / 2
            self.samples.append((mid, {int(t): (int(v[0]), int(v[1]), int(v[2]))
                                       for t, v in r.items()}))
            return
        got = {}
        for c in self.cands:
            rd = read_thread(c, self._files)
            if rd is not None:
                got[c.tid] = rd
        self.samples.append((time.monotonic(), got))

    def prepare(self) -> OthersSampler:
        """List the candidates (at the trial's start), without sampling."""
        if self.host is not None and not self.host.is_local:
            self.cands = [Candidate(int(p), int(t), str(c), bool(b), bool(k))
                          for p, t, c, b, k in self.host.procfs(
                              "candidates", sut_cpus=sorted(self.sut_cpus),
                              skip_pids=sorted(self.skip_pids))]
        else:
            self.cands = candidates(self.sut_cpus, self.skip_pids | {os.getpid()})
        return self

    def start(self) -> OthersSampler:
        """List the candidates and sample them from a thread of its own."""
        self.prepare()
        self._clock = Periodic(self._take, self.every_s, "others-sampler").start()
        return self

    def stop(self) -> None:
        if self._clock is not None:
            self._clock.stop()
            self._clock = None
        self._files.close()

def others_in_window(cands: list[Candidate], samples: list[tuple[float, dict[int, Reading]]],
                     sut_cpus: set[int], start: float, end: float,
                     top: int = 5) -> dict[str, Any]:
    """What the candidates ran on the SUT's CPUs between the first and the
    last sample inside [start, end] (module doc): total ms, the threads
    with the most, and the most one thread ran in one sample interval;
    ``kernel_ms`` is the kernel threads' part of the total."""
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2:
        return {"why": f"{len(inside)} samples inside the traffic window"}
    by_tid = {c.tid: c for c in cands}
    per: dict[int, list[float]] = {}  # tid -> [ns, runs]
    worst: tuple[float, int, str] = (0.0, 0, "")
    for (_, a), (_, b) in itertools.pairwise(inside):
        for tid, (ns1, runs1, cpu1) in b.items():
            if tid not in a:
                continue
            ns0, runs0, cpu0 = a[tid]
            c = by_tid[tid]
            if not c.bound and cpu0 not in sut_cpus and cpu1 not in sut_cpus:
                continue
            dns, druns = ns1 - ns0, runs1 - runs0
            if dns <= 0:
                continue
            acc = per.setdefault(tid, [0.0, 0])
            acc[0] += dns
            acc[1] += druns
            if dns > worst[0]:
                worst = (dns, druns, c.comm)
    total = sum(v[0] for v in per.values())
    kernel = sum(v[0] for t, v in per.items() if by_tid[t].kthread)
    ranked = sorted(per.items(), key=lambda kv: -kv[1][0])[:top]
    return {
        "ms": round(total / 1e6, 3),
        # of which kernel threads (the part isolate_sut_cpus can act on)
        "kernel_ms": round(kernel / 1e6, 3),
        "span_s": round(inside[-1][0] - inside[0][0], 3),
        "threads": [[by_tid[t].comm, round(v[0] / 1e6, 3), int(v[1])] for t, v in ranked],
        "kernel_threads": [[by_tid[t].comm, round(v[0] / 1e6, 3), int(v[1])]
                           for t, v in sorted(per.items(), key=lambda kv: -kv[1][0])
                           if by_tid[t].kthread][:top],
        # the most one thread ran in one interval, and in how many runs
        "max_interval": {"comm": worst[2], "ms": round(worst[0] / 1e6, 3), "runs": worst[1]},
        "interval_s": round((inside[-1][0] - inside[0][0]) / (len(inside) - 1), 3),
        "candidates": len(cands),
        "unbound": sum(1 for c in cands if not c.bound),
    }
