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
from dataclasses import dataclass

__all__ = ["Layout", "LayoutError", "available_cpus", "plan"]


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
