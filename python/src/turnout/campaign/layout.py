"""Core layouts: which CPUs the tester, the SUT and the chain VNFs run on.

A campaign either names the cores (``tester_cpu``, ``sut_cpus``) or says
``layout = "auto"``: ``plan`` then splits the CPUs this process may use.
Every busy-polling process should have a core of its own; where there are
too few, the tester and the VNFs share theirs, and the bench says so on
every trial it affects (``extra.tester_core_sharing``; the verdict ranks
such rows by cost per frame, never by rate).

- 2 CPUs: tester on the first, SUT on the second, VNFs with the tester.
- 3 CPUs: tester, SUT, VNFs one each.
- 4 or more: a quarter of them (at least one) for the SUT, a quarter for
  VNFs, the rest for the tester, whose streams are spread over its cores
  (one turnout-gen process per stream): several tester streams, and a
  SUT with as many workers (turnoutd), PMD cores (OVS) or forwarding cores
  (testpmd) as it has CPUs.

The SUT's cores are taken from the end of the list, away from CPU 0 where
the system's own work tends to land.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Layout", "LayoutError", "RtBudget", "VnfSched", "available_cpus", "host_vnf_sched",
           "plan", "rt_budget", "vnf_sched"]

#: SCHED_FIFO priority of interrupt-mode VNFs: the lowest real-time one
#: (above every SCHED_OTHER thread, below every kernel RT thread)
VNF_FIFO_PRIO = 1


class LayoutError(ValueError):
    """The CPUs cannot hold a tester and a SUT."""


@dataclass(frozen=True)
class Layout:
    """CPUs of each role (``vnf`` may be the tester's: then they share)."""

    tester: tuple[int, ...]
    sut: tuple[int, ...]
    vnf: tuple[int, ...]
    note: str = ""

    @property
    def sut_cpus(self) -> str:
        """The SUT's CPUs as a taskset list."""
        return ",".join(str(c) for c in self.sut)

    @property
    def vnfs_share_tester(self) -> bool:
        return bool(set(self.vnf) & set(self.tester))

    def vnfs_crowded(self, n: int) -> bool:
        """``n`` VNFs would not each have a core of their own: they share the
        tester's, each other's, or are not pinned at all."""
        return not self.vnf or self.vnfs_share_tester or n > len(self.vnf)

    def tester_cpu(self, i: int) -> int:
        """The CPU of the tester's i-th stream process (round robin)."""
        return self.tester[i % len(self.tester)]

    def vnf_cpu(self, i: int) -> int:
        """The CPU of the i-th chain VNF (round robin)."""
        return self.vnf[i % len(self.vnf)]


def available_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def plan(cpus: list[int], sut_cores: int | None = None) -> Layout:
    """Split ``cpus`` between tester, SUT and VNFs (see the module doc).
    ``sut_cores`` fixes the SUT's share (on 4 or more CPUs)."""
    cpus = sorted(set(cpus))
    n = len(cpus)
    if n < 2:
        raise LayoutError(f"{n} CPU: the tester and the SUT need one core each at least")
    if n == 2:
        return Layout((cpus[0],), (cpus[1],), (cpus[0],),
                      "2 CPUs: chain VNFs and extra tester streams share the tester's core")
    if n == 3:
        return Layout((cpus[0],), (cpus[2],), (cpus[1],))
    s = sut_cores if sut_cores is not None else max(1, n // 4)
    if not 1 <= s <= n - 2:
        raise LayoutError(f"sut_cores = {s}: between 1 and {n - 2} on {n} CPUs")
    v = max(1, (n - s) // 3)
    t = n - s - v
    return Layout(tuple(cpus[:t]), tuple(cpus[n - s:]), tuple(cpus[t:t + v]))


@dataclass(frozen=True)
class RtBudget:
    """The kernel's real-time throttling (/proc/sys/kernel/sched_rt_*): RT
    threads may run ``runtime_us`` of every ``period_us`` on a CPU; -1 is
    unlimited (a spinning RT thread would then starve the CPU for good)."""

    runtime_us: int
    period_us: int

    @property
    def bounded(self) -> bool:
        return 0 < self.runtime_us < self.period_us


def rt_budget(proc: Path = Path("/proc/sys/kernel")) -> RtBudget | None:
    """This host's RT throttling, None when unreadable."""
    try:
        return RtBudget(int((proc / "sched_rt_runtime_us").read_text()),
                        int((proc / "sched_rt_period_us").read_text()))
    except (OSError, ValueError):
        return None


@dataclass(frozen=True)
class VnfSched:
    """How a chain VNF is scheduled: ``prefix`` goes before its command
    (``chrt -f 1``) or is empty; ``label`` is stored in the trial's extra
    (``vnf_sched``), ``why`` says why."""

    prefix: tuple[str, ...]
    label: str
    why: str


def vnf_sched(polls: bool, setting: str, budget: RtBudget | None, *,
              root: bool, chrt: str | None) -> VnfSched:
    """The scheduling of one chain VNF. ``setting`` is the campaign's
    ``vnf_priority``: "normal" keeps SCHED_OTHER; "auto" puts a VNF that
    sleeps on its ports' eventfds (interrupt mode, ``polls`` False) at
    SCHED_FIFO 1, so that its wake-up preempts the busy-polling tester it
    shares a core with instead of waiting for the end of the tester's time
    slice. Only when it is safe: a VNF that polls would hold the core as
    long as the kernel lets it, so it stays SCHED_OTHER; and only while the
    kernel's RT throttling bounds every RT thread (``budget.bounded``: by
    default 950 ms of every second), so that even a VNF that never runs dry
    leaves the tester its share. Needs root (CAP_SYS_NICE) and chrt."""
    normal = "other"
    if setting == "normal":
        return VnfSched((), normal, "vnf_priority = normal")
    if polls:
        return VnfSched((), normal, "it busy-polls: at SCHED_FIFO it would starve its core")
    if budget is None or not budget.bounded:
        rt = "unreadable" if budget is None else f"{budget.runtime_us}/{budget.period_us} µs"
        return VnfSched((), normal, f"RT throttling does not bound it (sched_rt_runtime {rt})")
    if not root:
        return VnfSched((), normal, "not root: SCHED_FIFO needs CAP_SYS_NICE")
    if chrt is None:
        return VnfSched((), normal, "chrt (util-linux) not found")
    return VnfSched((chrt, "-f", str(VNF_FIFO_PRIO)), f"fifo:{VNF_FIFO_PRIO}",
                    f"interrupt mode, RT throttled to {budget.runtime_us}/{budget.period_us} µs")


def host_vnf_sched(polls: bool, setting: str) -> VnfSched:
    """``vnf_sched`` for this host."""
    return vnf_sched(polls, setting, rt_budget(), root=os.geteuid() == 0,
                     chrt=shutil.which("chrt"))
