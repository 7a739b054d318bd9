"""Host fingerprint stored with every result ("Hard or hopeless" §3.1,
docs/references.md)."""

from __future__ import annotations

import os
import platform
import socket
import subprocess
import sys
from pathlib import Path

from ..results.models import Host
from .checks import REPO, _read

__all__ = ["fingerprint", "git_commit", "process_pinning"]


def git_commit(repo: Path = REPO) -> str:
    """HEAD of the checkout, with -dirty when the tree has changes."""
    try:
        head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(repo), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=10).stdout.strip()
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return head + ("-dirty" if dirty and head else "")


def process_pinning() -> dict[str, str]:
    """'name[pid]' -> allowed CPU list, for every process on the host."""
    out: dict[str, str] = {}
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            status = (p / "status").read_text()
            comm = (p / "comm").read_text().strip()
        except OSError:
            continue
        for line in status.splitlines():
            if line.startswith("Cpus_allowed_list:"):
                out[f"{comm}[{p.name}]"] = line.split(":", 1)[1].strip()
    return out


def _cpu_model() -> str:
    for line in (_read("/proc/cpuinfo") or "").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def fingerprint(tools: dict[str, str] | None = None) -> Host:
    """The host as it is now: CPU, kernel, governor, turbo, SMT, THP, tool
    versions, git commit and the CPU affinity of every process."""
    govs = sorted({
        _read(str(p)) or "" for p in Path("/sys/devices/system/cpu").glob(
            "cpu[0-9]*/cpufreq/scaling_governor")
    })
    no_turbo = _read("/sys/devices/system/cpu/intel_pstate/no_turbo")
    boost = _read("/sys/devices/system/cpu/cpufreq/boost")
    turbo = ("off" if no_turbo == "1" else "on") if no_turbo is not None else (
        {"1": "on", "0": "off"}.get(boost or "", "not visible"))
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled") or ""
    all_tools = {"python": sys.version.split()[0], **(tools or {})}
    return Host(
        hostname=socket.gethostname(), cpu_model=_cpu_model(), cores=os.cpu_count() or 0,
        kernel=platform.release(), governor=",".join(govs) or "not visible", turbo=turbo,
        smt=_read("/sys/devices/system/cpu/smt/control") or "not visible",
        thp=thp[thp.find("[") + 1 : thp.find("]")] if "[" in thp else thp,
        tools=all_tools, git_commit=git_commit(), pinning=process_pinning(),
        extra={"loadavg": list(os.getloadavg()),
               "nr_hugepages": int(_read("/proc/sys/vm/nr_hugepages") or 0)},
    )
