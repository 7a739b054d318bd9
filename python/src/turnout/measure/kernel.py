"""Kernel share: the kernel's work on the SUT's CPUs per frame, for every SUT.

A switch's own account (measure/cost.py) counts the cycles its own threads
spent on frames. The kernel spends more on the SUT's CPUs that no
userspace switch counts: on veth paths, the transmit of every frame the
SUT sends to a tester port runs the peer veth's receive (its NAPI, and
for the tester's AF_XDP port in copy mode the copy into the tester's
socket) in the softirq of the *sending* CPU, the SUT's; and the SUT's own
AF_XDP receive copy runs in the softirq of the tester's CPU, which sent
the frame. So the kernel time on the SUT's CPUs is about one receive copy
per forwarded frame, but the tester's, not the SUT's.

That is why the kernel share is reported next to the own account and not
added to it (docs/bench.md, "Kernel share"): adding it would bill each
userspace SUT for the tester's receive and leave its own receive copy out.
For a kernel switch (Linux bridge) the kernel time on its CPUs *is* its own
account (its forwarding runs in the receive softirq its ports' RPS steers
there), so its kernel share equals its cost. Memif and vhost-user paths
have no kernel work per frame.

Read the same way for every SUT: ``KernelShare`` wraps the SUT's cost
probe, so each of the SUT's own samples is paired with the kernel busy
time of its CPUs (``kernel_busy_s``) read at the same moment; the share is
the difference between the first and the last pair inside the traffic
window, over the frames the SUT counted between them. Fewer than
``cost.MIN_STEPS`` of /proc/stat's 10 ms steps is below the account's
resolution (as for the bridge's own account): no figure, a reason.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..hosts import procfs
from .cost import CostSample, cost_in_window
from .cpu import CLK_TCK, nominal_hz

if TYPE_CHECKING:
    from ..hosts.base import Host

__all__ = ["KernelClock", "KernelShare", "kernel_busy_s", "kernel_share"]

@dataclass
class KernelClock:
    """``kernel_busy_s`` of some CPUs as a counter that never goes back: its
    parts count in 10 ms units at different moments, so two readings a
    few ms apart on an idle CPU may differ by a little less than 0."""

    cpus: list[int]
    last: float | None = None
    #: the host whose CPUs these are (this machine when None; another's
    #: agent reads them there, with its own clock: hosts/procfs.py)
    host: Host | None = None

    def read(self, now: float | None = None) -> float:
        """Kernel busy seconds of ``cpus`` so far (not below the last reading)."""
        if self.host is not None and not self.host.is_local:
            v = float(self.host.procfs("kernel_busy_s", cpus=list(self.cpus)))
        else:
            v = kernel_busy_s(self.cpus, now=now)
        self.last = v if self.last is None else max(self.last, v)
        return self.last


@dataclass
class KernelShare:
    """Pairs every own-account sample of a SUT with the kernel busy time of its CPUs."""

    probe: Callable[[], CostSample | None]
    cpus: list[int]
    #: (monotonic t, kernel busy seconds, the SUT's frames) at every probe
    samples: list[tuple[float, float, int]] = field(default_factory=list)
    clock: KernelClock | None = None
    #: the SUT's host (this machine when None)
    host: Host | None = None

    def __call__(self) -> CostSample | None:
        s = self.probe()
        if s is None or not self.cpus:
            return s
        if self.clock is None:
            self.clock = KernelClock(self.cpus, host=self.host)
        now = time.monotonic()
        self.samples.append((now, self.clock.read(now), s.frames))
        return s


def kernel_share(samples: list[tuple[float, float, int]], start: float, end: float,
                 hz: float | None = None) -> tuple[float | None, float, str]:
    """(kernel cycles per frame, kernel seconds, why none) inside [start, end].
    Below ``cost.MIN_STEPS`` steps of /proc/stat (10 ms each) there is no
    figure, as for every coarse account (measure/cost.py)."""
    hz = hz if hz is not None else nominal_hz()[0]
    as_cost = [CostSample(t, busy * hz, frames, hz / CLK_TCK) for t, busy, frames in samples]
    c, why = cost_in_window(as_cost, start, end, "kernel")
    inside = [b for t, b, _ in samples if start <= t <= end]
    busy_s = inside[-1] - inside[0] if len(inside) >= 2 else 0.0
    if c is None:
        return None, busy_s, why
    return c.cycles_per_frame, busy_s, ""


def kernel_busy_s(cpus: list[int], stat: str | None = None, now: float | None = None) -> float:
    """Seconds these CPUs were busy outside any process, cumulative: the
    monotonic clock times the number of CPUs, minus their idle, iowait,
    user, nice, system, steal and guest time (/proc/stat). Differences of
    it are the interrupt and softirq work on them, *including* the work
    done in interrupts that woke an idle CPU.

    That last part is why it exists: with tick-based CPU accounting and
    NO_HZ idle (this kernel: no IRQ_TIME_ACCOUNTING), a CPU that sleeps
    between bursts has no tick running; an RPS IPI wakes it, the softirq
    forwards a batch and the CPU sleeps again without a tick ever sampling
    it: /proc/stat's irq and softirq stay at 0 and idle stops only while
    the work runs (nohz idle time is kept in ns). A lightly loaded kernel
    switch on its own core then costs "0 cycles per frame" (CI, overlay
    bridge at 20 kpps). Idle time is exact (ns, printed in 10 ms units);
    user and system are tick samples of processes, so what other processes
    do on these CPUs is subtracted statistically. (hosts/procfs.py: on a
    remote campaign's SUT host its agent reads it, with that host's clock.)"""
    return procfs.kernel_busy_s(cpus, stat, now)
