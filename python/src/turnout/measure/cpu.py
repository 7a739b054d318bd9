"""CPU time of every thread of the SUT's processes, from /proc."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CpuSample", "cpu_delta", "cpu_hz", "sample_threads"]

CLK_TCK = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class CpuSample:
    """utime/stime (ticks) of one thread at one moment."""

    pid: int
    tid: int
    name: str
    utime: int
    stime: int
    cpu: int


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
            out[tid] = CpuSample(pid, tid, name, int(f[11]), int(f[12]), int(f[36]))
    return out


def cpu_delta(
    before: dict[int, CpuSample], after: dict[int, CpuSample], wall_s: float
) -> list[dict[str, Any]]:
    """Per thread: user_s, sys_s and util (CPU seconds per wall second)."""
    rows = []
    for tid, a in sorted(after.items()):
        b = before.get(tid)
        du = a.utime - (b.utime if b else 0)
        ds = a.stime - (b.stime if b else 0)
        rows.append({
            "pid": a.pid, "tid": tid, "name": a.name, "cpu": a.cpu,
            "user_s": du / CLK_TCK, "sys_s": ds / CLK_TCK,
            "util": (du + ds) / CLK_TCK / wall_s if wall_s > 0 else 0.0,
        })
    return rows


def cpu_hz() -> float:
    """Nominal CPU clock from /proc/cpuinfo (for cycles per packet); 0 if unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("cpu MHz"):
                return float(line.split(":")[1]) * 1e6
    except OSError:
        pass
    return 0.0
