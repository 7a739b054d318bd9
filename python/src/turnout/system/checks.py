"""``turnout system check``: what on this host will skew results.

One small class per check (as pyperf's ``system`` command); each returns
a list of findings with a level: ``ok``, ``warn`` (will add noise or bias)
or ``missing`` (a SUT or tool cannot run).
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import build

__all__ = ["CHECKS", "Check", "Finding", "run_checks"]

REPO = Path(__file__).resolve().parents[4]


@dataclass(frozen=True)
class Finding:
    """One line of the check's report."""

    check: str
    level: str  # ok | warn | missing
    message: str


def _read(path: str) -> str | None:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return None


class Check:
    """Base: ``run()`` returns findings."""

    name = ""

    def run(self) -> list[Finding]:
        raise NotImplementedError

    def f(self, level: str, message: str) -> Finding:
        return Finding(self.name, level, message)


class Governor(Check):
    name = "governor"

    def run(self) -> list[Finding]:
        govs = {
            _read(str(p)) for p in Path("/sys/devices/system/cpu").glob(
                "cpu[0-9]*/cpufreq/scaling_governor")
        }
        govs.discard(None)
        if not govs:
            return [self.f("ok", "no cpufreq here (virtual machine?): frequency not controllable")]
        if govs != {"performance"}:
            return [self.f("warn", f"governor {', '.join(sorted(map(str, govs)))}: "
                                   "set 'performance' for stable clocks")]
        return [self.f("ok", "governor performance")]


class Turbo(Check):
    name = "turbo"

    def run(self) -> list[Finding]:
        no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
        boost = _read("/sys/devices/system/cpu/cpufreq/boost")
        if no_turbo is None and boost is None:
            return [self.f("ok", "turbo not visible from this host")]
        on = (no_turbo == "0") if no_turbo is not None else (boost == "1")
        if on:
            return [self.f("warn", "turbo/boost on: clocks vary with load and temperature")]
        return [self.f("ok", "turbo off")]


class Smt(Check):
    name = "smt"

    def run(self) -> list[Finding]:
        active = _read("/sys/devices/system/cpu/smt/active")
        if active == "1":
            return [self.f("warn", "SMT active: sibling hyperthreads share a core")]
        return [self.f("ok", f"SMT {'inactive' if active == '0' else 'not visible'}")]


class Thp(Check):
    name = "thp"

    def run(self) -> list[Finding]:
        v = _read("/sys/kernel/mm/transparent_hugepage/enabled") or ""
        mode = v[v.find("[") + 1 : v.find("]")] if "[" in v else v
        if mode == "always":
            return [self.f("warn", "transparent hugepages 'always': compaction adds jitter")]
        return [self.f("ok", f"transparent hugepages {mode or 'unknown'}")]


class Load(Check):
    name = "load"

    def run(self) -> list[Finding]:
        load1 = os.getloadavg()[0]
        cpus = os.cpu_count() or 1
        busy = _busy_processes()
        msg = f"load average {load1:.2f} on {cpus} CPUs"
        if busy:
            msg += "; busy: " + ", ".join(busy[:5])
        level = "warn" if load1 > 0.5 or busy else "ok"
        return [self.f(level, msg + (" — other work will steal cycles" if level == "warn"
                                     else ""))]


def _busy_processes(threshold: float = 0.2) -> list[str]:
    """Processes that used more than ``threshold`` of a CPU over 0.2 s."""
    import time

    def snap() -> dict[int, tuple[str, int]]:
        out = {}
        for p in Path("/proc").iterdir():
            if not p.name.isdigit() or int(p.name) == os.getpid():
                continue
            try:
                s = (p / "stat").read_text()
            except OSError:
                continue
            f = s[s.rindex(")") + 2 :].split()
            out[int(p.name)] = (s[s.index("(") + 1 : s.rindex(")")], int(f[11]) + int(f[12]))
        return out

    a = snap()
    time.sleep(0.2)
    b = snap()
    tck = os.sysconf("SC_CLK_TCK")
    busy = []
    for pid, (name, t) in b.items():
        if pid in a and (t - a[pid][1]) / tck / 0.2 > threshold:
            busy.append(f"{name}[{pid}]")
    return busy


class Pinning(Check):
    name = "pinning"

    def run(self) -> list[Finding]:
        cpus = os.cpu_count() or 1
        isolated = _read("/sys/devices/system/cpu/isolated") or ""
        msg = f"{cpus} CPUs; isolated: {isolated or 'none'}"
        if cpus < 3:
            return [self.f("warn", msg + " — tester and SUT share the machine's only cores; "
                                         "the bench pins tester to CPU 0 and SUT to CPU 1")]
        return [self.f("ok", msg)]


class Hugepages(Check):
    name = "hugepages"

    def run(self) -> list[Finding]:
        total = int(_read("/proc/sys/vm/nr_hugepages") or 0)
        free = 0
        for line in (_read("/proc/meminfo") or "").splitlines():
            if line.startswith("HugePages_Free"):
                free = int(line.split()[1])
        if total:
            return [self.f("warn", f"{total} hugepages reserved ({free} free) outside the bench")]
        return [self.f("ok", "no hugepages reserved (the bench reserves them per run)")]


class Software(Check):
    name = "software"

    def run(self) -> list[Finding]:
        out = []
        tools = {
            "turnoutd": build.built("turnoutd"),
            "turnout-gen": build.built("turnout-gen"),
        }
        for name, path in tools.items():
            if path.exists():
                out.append(self.f("ok", f"{name} built ({path})"))
            else:
                out.append(self.f(
                    "missing", f"{name} not built (cargo build --profile {build.PROFILE} -p ...)"))
        for name, cmd in (("dpdk-testpmd", "dpdk-testpmd"), ("ovs-vswitchd", "ovs-vswitchd"),
                          ("ovsdb-server", "ovsdb-server"),
                          ("ovs-vswitchd-dpdk",
                           "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"),
                          ("bridge (iproute2)", "bridge")):
            found = shutil.which(cmd) or (Path(cmd).exists() and cmd)
            out.append(self.f("ok" if found else "missing",
                              f"{name} {'found' if found else 'not installed'}"))
        return out


CHECKS: tuple[type[Check], ...] = (Governor, Turbo, Smt, Thp, Load, Pinning, Hugepages, Software)


def run_checks() -> list[Finding]:
    """Every check's findings, in table order."""
    out: list[Finding] = []
    for cls in CHECKS:
        try:
            out += cls().run()
        except Exception as e:  # a check must never stop the others
            out.append(Finding(cls.name, "warn", f"check failed: {e}"))
    return out
