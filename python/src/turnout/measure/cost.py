"""Capacity: the SUT's busy CPU cycles per frame, from its own accounting.

Idle handling (empty polls, sleeps, wake-ups) is left out for every SUT
alike: the figure says what one core would forward at saturation. What the
SUT's threads really consumed at the trial's load, idle handling included,
is the *CPU at this load* (their OS CPU time, measure/cpu.py; docs/bench.md
"Capacity and CPU at this load").

When the tester, not the switch, sets the rate (a saturating trial that is
tester-bound), the rate says nothing about the switch; what it spent on each
frame does. Every SUT that keeps such an account is read the same way:

- turnoutd: its workers' ``busy_cycles`` (TSC cycles of batches that moved
  frames) over ``packets`` (frames its workers received);
- DPDK testpmd with ``--record-core-cycles``: ``total cycles`` (TSC cycles of
  bursts that brought frames) over ``total io packets`` (``show fwd stats``);
- OVS and OVS-DPDK: the PMD threads' ``processing cycles`` over ``packets
  received`` (``dpif-netdev/pmd-stats-show``);
- a kernel switch (Linux bridge): the irq + softirq time (/proc/stat) of
  the SUT's CPUs over the frames its ports received — only meaningful when
  its receive work runs on those CPUs (RPS, testbed). Tick-based: 10 ms
  granularity, so a 0.5 s window carries about ±4 % of a busy core.

A ``CostSample`` is the cumulative account at one moment. ``CostSampler``
reads it every ``every_s`` through a trial; ``cost_in_window`` takes the
difference between the first sample inside the tester's traffic window and
the last one inside it, so warm-up, process start and cool-down never enter
the figure and a SUT whose counters reset when a memif peer leaves (testpmd)
is read while the peers are connected. Cycles are TSC cycles (or CPU time at
the nominal TSC rate), frames are frames the SUT received by its own count.

The projected rate per core, ``hz / cycles_per_frame``, is what one core
would forward if it did nothing but this work at this cost: an upper bound
that ignores what changes at higher load (cache misses, batching, the
tester), stated wherever it is shown.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from ..hosts import procfs

__all__ = ["Cost", "CostSample", "CostSampler", "cost_in_window", "counter_delta"]

#: counters that are 64-bit unsigned in the SUT (testpmd's totals are
#: differences of port counters that reset when a memif peer reconnects and
#: may wrap); differences are taken modulo 2^64
U64 = 1 << 64


@dataclass(frozen=True)
class CostSample:
    """The SUT's cumulative account at monotonic time ``t`` (seconds)."""

    t: float
    cycles: float
    frames: int
    #: cycles one step of the account is worth (a /proc/stat clock tick is
    #: 1/CLK_TCK s); 0 for cycle-exact accounts
    resolution: float = 0.0
    #: of ``cycles``, those spent in kicks to peers (system calls), where
    #: the SUT accounts them (turnoutd's ``kick_cycles``); None elsewhere
    kicks: float | None = None


#: the fewest counter steps a cost is computed from: at one step the
#: quantisation error alone is up to 100 %, at ten it is under 10 %
MIN_STEPS = 10


@dataclass(frozen=True)
class Cost:
    """Busy cycles per frame over ``span_s`` of the traffic window."""

    cycles_per_frame: float
    frames: int
    cycles: float
    span_s: float
    source: str
    #: of ``cycles_per_frame``, the kicks' (CostSample.kicks), or None
    kick_cycles_per_frame: float | None = None


def counter_delta(a: int, b: int) -> int:
    """b - a for a counter that may wrap at 2^64."""
    return (b - a) % U64


def cost_in_window(samples: list[CostSample], start: float, end: float, source: str,
                   min_frames: int = 1000) -> tuple[Cost | None, str]:
    """The cost between the first and the last sample inside [start, end].

    Returns (None, why) when fewer than two samples fall inside the window,
    when the SUT counted fewer than ``min_frames`` frames between them (the
    figure would be noise), when its counters went backwards (a restart),
    or when the busy time between them is fewer than ``MIN_STEPS`` steps of
    a coarse account (clock ticks at a low rate: 0 ticks is not "free").
    """
    inside = [s for s in samples if start <= s.t <= end]
    if len(inside) < 2:
        return None, (f"{len(inside)} of {len(samples)} cost samples inside the "
                      f"{end - start:.3f} s traffic window")
    a, b = inside[0], inside[-1]
    frames = counter_delta(a.frames, b.frames)
    cycles = b.cycles - a.cycles
    if frames >= U64 // 2 or cycles < 0:
        return None, "the SUT's counters went backwards (restart?)"
    if frames < min_frames:
        return None, f"the SUT counted only {frames} frames between its samples"
    step = max(a.resolution, b.resolution)
    if step > 0 and cycles < MIN_STEPS * step:
        return None, (f"{cycles / step:.0f} steps of the SUT's account ({step:.3g} cycles each) "
                      f"for {frames} frames: below its resolution (fewer than {MIN_STEPS})")
    kicks = (b.kicks - a.kicks) / frames if a.kicks is not None and b.kicks is not None else None
    return Cost(cycles / frames, frames, cycles, b.t - a.t, source,
                kicks if kicks is None or kicks >= 0 else None), ""


class CostSampler:
    """Calls ``probe`` every ``every_s`` in a background thread and keeps
    each sample with the monotonic time of the call's midpoint. A probe that
    raises or returns None is skipped (the error of the last failure is kept
    in ``error``).

    Every 0.1 s: the cost is a ratio of two samples inside the window, so
    their spacing only sets how much of the window it covers (at least
    0.2 s of a 0.4 s one), while each sample costs the tester's CPU (a
    turnoutd ``stats`` call: ~170 µs of the bench's Python and ~100 µs of
    turnoutd's control thread, both on the tester's core)."""

    def __init__(self, probe: Callable[[], CostSample | None], every_s: float = 0.1) -> None:
        self.probe = probe
        self.every_s = every_s
        self.samples: list[CostSample] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _once(self) -> None:
        t0 = time.monotonic()
        try:
            s = self.probe()
        except Exception as e:  # a SUT may be gone: say why, keep sampling
            self.error = f"{type(e).__name__}: {e}"
            return
        if s is not None:
            mid = (t0 + time.monotonic()) / 2
            self.samples.append(CostSample(mid, s.cycles, s.frames, s.resolution, s.kicks))

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            self._once()

    def start(self) -> CostSampler:
        self._once()
        self._thread = threading.Thread(target=self._run, name="cost-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._once()


def cpu_list(spec: str) -> list[int]:
    """CPUs of a taskset-style list ("1", "0,2-3")."""
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            lo, hi = part.split("-")
            out += range(int(lo), int(hi) + 1)
        elif part:
            out.append(int(part))
    return out


def kernel_ticks(cpus: list[int], stat: str | None = None) -> int:
    """Interrupt and softirq time (irq + softirq) of these CPUs in clock ticks
    (/proc/stat): where a kernel switch forwards (the receive softirq). The
    system time of processes that happen to run there is left out."""
    v = procfs.cpu_columns(cpus, stat)[1]
    return v[5] + v[6]


def netdev_rx_packets(pid: int, ifaces: list[str], dev: str | None = None) -> int:
    """Frames received by these interfaces, in the network namespace of
    process ``pid`` (/proc/PID/net/dev; hosts/procfs.py)."""
    from ..hosts import procfs

    return procfs.netdev_rx_packets(pid, ifaces, dev)
