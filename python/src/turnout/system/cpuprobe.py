"""Is every CPU we measure on really ours right now?

A virtual machine's vCPUs can be descheduled by the host for tens of
µs to milliseconds, and this project's test host flips for seconds at a
time into a placement where its two vCPUs share one physical core (a
busy-polling switch then gets half a core, and every latency percentile
above the median measures the hypervisor). Steal time does not show it
there (a nested VM). What does: a thread that spins reading the clock sees
the time it was not running as gaps between consecutive reads. This probe
spins on every given CPU at once — all of them busy, as in a measurement —
for ``duration_s`` and reports, per CPU, the share of the time lost in gaps
over ``gap_ns`` and the longest gap.
"""

from __future__ import annotations

import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

__all__ = ["SLOW_LOST_SHARE", "CpuProbe", "probe_cpus"]

#: A CPU that lost more than this share of a probe was not the measurement's.
SLOW_LOST_SHARE = 0.2


@dataclass(frozen=True)
class CpuProbe:
    """What a spinning thread on ``cpu`` saw: ``lost_share`` of the time in
    gaps (descheduled), the longest gap ``worst_gap_ns``."""

    cpu: int
    lost_share: float
    worst_gap_ns: int

    @property
    def slow(self) -> bool:
        """The CPU was not ours for a large share of the probe."""
        return self.lost_share > SLOW_LOST_SHARE


def _spin(cpu: int, duration_s: float, gap_ns: int) -> CpuProbe:
    os.sched_setaffinity(0, {cpu})
    clock = time.perf_counter_ns
    start = prev = clock()
    end = start + int(duration_s * 1e9)
    lost = worst = 0
    while prev < end:
        now = clock()
        d = now - prev
        if d > gap_ns:
            lost += d
            worst = max(worst, d)
        prev = now
    return CpuProbe(cpu, lost / max(1, prev - start), worst)


def probe_cpus(cpus: list[int], duration_s: float = 0.1, gap_ns: int = 20_000) -> list[CpuProbe]:
    """Spin on every CPU of ``cpus`` at once for ``duration_s``; one result per CPU."""
    if not cpus:
        return []
    with ProcessPoolExecutor(max_workers=len(cpus)) as pool:
        futs = [pool.submit(_spin, c, duration_s, gap_ns) for c in cpus]
        return [f.result() for f in futs]
