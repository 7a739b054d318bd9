"""Testbed: namespaces as containers, veth wires, memif dirs, processes.

Everything is made with netlink (pyroute2), named with a run-unique prefix
``tn<pid><letter>``, recorded in a state file before it is made, and removed
on ``close()`` — which the context manager calls on success, on failure and
on Ctrl-C / SIGTERM. A run that died leaves its state file; the next
``Testbed`` removes those leftovers first (``cleanup_stale``).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import signal
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import IO, Any

from ..hosts.base import LocalHost
from .state import (
    HugepageHold,
    RunState,
    cleanup_stale,
    hugepage_hold,
    pid_start_time,
    remove_objects,
    reserve_recorded,
    stop_pid,
)

__all__ = ["Testbed", "TestbedError", "Veth", "is_root"]

_counter = itertools.count()
CGROUP_ROOT = Path("/sys/fs/cgroup")


class TestbedError(RuntimeError):
    """Building the testbed failed (message says what and why)."""


def is_root() -> bool:
    """Whether we may create namespaces and interfaces."""
    return os.geteuid() == 0


@dataclass(frozen=True)
class Veth:
    """A veth pair: end ``a`` in namespace ``ns_a`` (None = root), end ``b`` in ``ns_b``."""

    a: str
    b: str
    ns_a: str | None
    ns_b: str | None
    mac_a: str
    mac_b: str


class _SigTerm(KeyboardInterrupt):
    """SIGTERM turned into an exception so that context managers unwind."""


class Testbed:
    """Owns every object of one run; use as a context manager."""

    __test__ = False  # not a pytest class
    #: where the SUT adapters write files and call sockets (this machine;
    #: a remote campaign's RemoteBed has the SUT's host: turnout.hosts)
    host = LocalHost()

    def __init__(self, *, cleanup_leftovers: bool = True) -> None:
        if not is_root():
            raise TestbedError("the testbed needs root (network namespaces, veths)")
        self.removed_leftovers = cleanup_stale() if cleanup_leftovers else []
        self.prefix = f"tn{os.getpid()}{chr(ord('a') + next(_counter) % 26)}"
        self.state = RunState(prefix=self.prefix)
        self.state.save()
        self._names = itertools.count()
        self._procs: list[subprocess.Popen[bytes]] = []
        #: hugepages borrowed from a campaign's hold (reserve_hugepages)
        self._borrowed: tuple[HugepageHold | None, int] = (None, 0)
        self._old_term: object = None
        self.workdir = Path(tempfile.mkdtemp(prefix=f"{self.prefix}-"))
        self.state.add("dirs", str(self.workdir))

    # ------------------------------------------------------------ lifecycle
    def __enter__(self) -> Testbed:
        owner = os.getpid()

        def on_term(signum: int, frame: FrameType | None) -> None:
            if os.getpid() != owner:  # a forked helper (pyroute2 NetNS): just die
                os._exit(128 + signum)
            raise _SigTerm()

        with contextlib.suppress(ValueError):  # not the main thread
            self._old_term = signal.signal(signal.SIGTERM, on_term)
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
        if self._old_term is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._old_term)  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop every process and remove every object, then the state file."""
        # ignore Ctrl-C while tearing down: a half-removed testbed is worse
        old_int = None
        with contextlib.suppress(ValueError):
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for p in reversed(self._procs):
                if p.poll() is None:
                    stop_pid(p.pid, None)
                with contextlib.suppress(Exception):
                    p.wait(timeout=1)
            remove_objects(self.state)
            self.state.delete()
            hold, borrowed = self._borrowed
            if hold is not None and borrowed:  # its mount is gone: the pages are free
                hold.give_back(borrowed)
                self._borrowed = (None, 0)
        finally:
            if old_int is not None:
                with contextlib.suppress(ValueError):
                    signal.signal(signal.SIGINT, old_int)

    def remember(self, kind: str, item: Any) -> None:
        """Record an object ``close`` removes (also after a crash: the state
        file), ``kind`` a RunState list: "dirs", "ovs" ([db socket, bridge])."""
        self.state.add(kind, item)

    def forget_object(self, kind: str, item: Any) -> None:
        """An object ``remember`` recorded is gone already."""
        self.state.discard(kind, item)

    def virtual_home(self, ns: str) -> str:
        """Where a virtual endpoint the tester drives runs: its own namespace
        (memif and vhost-user sockets are files of this machine); a remote
        campaign's testbed puts it on the VNFs' host."""
        return ns

    def allowed_cpus(self) -> list[int]:
        """The CPUs the bench may use on the testbed's host."""
        return sorted(os.sched_getaffinity(0))

    # ------------------------------------------------------------- naming
    def ifname(self, tag: str = "") -> str:
        """A unique interface name of at most 15 characters."""
        name = f"{self.prefix}{tag}{next(self._names)}"
        if len(name) > 15:
            raise TestbedError(f"interface name {name!r} longer than 15 characters")
        return name

    # ---------------------------------------------------------- namespaces
    def namespace(self, role: str) -> str:
        """Create a network namespace (loopback up); return its name."""
        from pyroute2 import NetNS, netns

        name = f"{self.prefix}-{role}"
        self.state.add("netns", name)
        try:
            netns.create(name)
            with NetNS(name) as ns:
                lo = ns.link_lookup(ifname="lo")
                if lo:
                    ns.link("set", index=lo[0], state="up")
        except Exception as e:
            raise TestbedError(f"creating namespace {name}: {e}") from e
        return name

    def veth(self, ns_a: str | None, ns_b: str | None, tag: str = "v",
             mtu: int = 3000) -> Veth:
        """A veth pair with end a in ns_a and end b in ns_b (None = root), both up.

        MTU 3000: room for 1518 B frames and still within native XDP on veth.
        """
        from pyroute2 import IPRoute

        a, b = self.ifname(tag), self.ifname(tag)
        self.state.add("links", a)  # deleting one end removes both
        try:
            with IPRoute() as ipr:
                ipr.link("add", ifname=a, kind="veth", peer={"ifname": b})
                for name, ns in ((a, ns_a), (b, ns_b)):
                    idx = ipr.link_lookup(ifname=name)[0]
                    ipr.link("set", index=idx, mtu=mtu)
                    if ns is not None:
                        ipr.link("set", index=idx, net_ns_fd=ns)
            if ns_a is not None and ns_b is not None:
                self.state.discard("links", a)  # goes with its namespace
            mac_a = self.link_up(a, ns_a)
            mac_b = self.link_up(b, ns_b)
        except TestbedError:
            raise
        except Exception as e:
            raise TestbedError(f"creating veth {a}/{b}: {e}") from e
        return Veth(a, b, ns_a, ns_b, mac_a, mac_b)

    @staticmethod
    def _ipr(ns: str | None):  # type: ignore[no-untyped-def]
        from pyroute2 import IPRoute, NetNS

        return NetNS(ns) if ns is not None else IPRoute()

    def link_up(self, name: str, ns: str | None) -> str:
        """Set a link up; return its MAC address."""
        with self._ipr(ns) as ipr:
            idx = ipr.link_lookup(ifname=name)
            if not idx:
                raise TestbedError(f"no interface {name} in namespace {ns or 'root'}")
            ipr.link("set", index=idx[0], state="up")
            return str(ipr.get_links(idx[0])[0].get("address"))

    def bridge(self, ns: str | None, members: Sequence[str], tag: str = "br") -> str:
        """A Linux bridge (STP off, forward delay 0) in ns with these members."""
        name = self.ifname(tag)
        if ns is None:
            self.state.add("links", name)
        with self._ipr(ns) as ipr:
            ipr.link("add", ifname=name, kind="bridge", br_stp_state=0, br_forward_delay=0)
            br = ipr.link_lookup(ifname=name)[0]
            for m in members:
                idx = ipr.link_lookup(ifname=m)[0]
                ipr.link("set", index=idx, master=br)
            ipr.link("set", index=br, state="up")
        return name

    def fdb_static(self, ns: str | None, mac: str, port: str) -> None:
        """A static bridge FDB entry: frames to mac go out of port only."""
        self.run(["bridge", "fdb", "replace", mac, "dev", port, "master", "static"], netns=ns)

    # -------------------------------------------------------------- dirs
    def directory(self, name: str) -> Path:
        """A fresh directory under the run's work dir (e.g. memif sockets)."""
        d = self.workdir / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    # ------------------------------------------------------------ sysctl
    def set_sysctl(self, path: str, value: str) -> None:
        """Write a /proc/sys or /sys value; the old value is restored at close."""
        p = Path(path)
        previous = p.read_text().strip()
        self.state.add("sysctls", [path, previous])
        p.write_text(value)

    def reserve_hugepages(self, pages: int) -> Path:
        """Reserve 2 MiB hugepages (given back at close: to the kernel, or to the
        campaign's hold they were borrowed from) and mount a hugetlbfs."""
        hold = hugepage_hold()
        if hold is not None and hold.borrow(pages):
            # a campaign's pages, back to its hold at close (HugepageHold)
            self._borrowed = (hold, self._borrowed[1] + pages)
        else:
            got = reserve_recorded(self.state, pages)
            if got < pages:  # nothing kept
                raise TestbedError(f"asked for {pages} hugepages, the kernel gave {got}")
        mnt = self.directory("huge")
        self.state.add("mounts", str(mnt))
        # size=: what this run reserved and no more; a DPDK process that grows
        # its memory past its preallocation would otherwise take pages other
        # runs (tests running beside it) reserved from the machine's one pool
        self.run(["mount", "-t", "hugetlbfs", "-o", f"pagesize=2M,size={pages * 2}M", "nodev",
                  str(mnt)])
        return mnt

    # --------------------------------------------------------- cpuset
    def cpuset(self, role: str, cpus: str) -> Path | None:
        """A cgroup v2 with this cpuset (None when cgroup v2 cpuset is not available)."""
        if "cpuset" not in (CGROUP_ROOT / "cgroup.controllers").read_text(errors="ignore"):
            return None
        with contextlib.suppress(OSError):
            (CGROUP_ROOT / "cgroup.subtree_control").write_text("+cpuset")
        cg = CGROUP_ROOT / f"{self.prefix}-{role}"
        self.state.add("cgroups", str(cg))
        cg.mkdir(exist_ok=True)
        (cg / "cpuset.cpus").write_text(cpus)
        return cg

    # -------------------------------------------------------- processes
    def steer_rps(self, ns: str | None, iface: str, cpus: str) -> str:
        """Steer the receive work of ``iface`` (its backlog softirq: a kernel
        bridge's forwarding, the stack's receive) to ``cpus`` with RPS, so a
        SUT's kernel-side work runs on the SUT's CPUs, not on the CPU of the
        process that sent the frame (veth transmit raises the receive
        softirq on the sender's CPU). Returns the mask written. Frames a
        native XDP program takes (AF_XDP ports) are not subject to RPS."""
        from ..measure.cost import cpu_list

        mask = sum(1 << c for c in set(cpu_list(cpus)))
        path = f"/sys/class/net/{iface}/queues/rx-0/rps_cpus"
        self.run(["sh", "-c", f"echo {mask:x} > {path}"], netns=ns)
        return f"{mask:x}"

    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion (in a namespace when given;
        ``env``: variables set for it on top of this process's)."""
        full = [*(["ip", "netns", "exec", netns] if netns else []), *cmd]
        res = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s, check=False,
                             env={**os.environ, **env} if env else None)
        if check and res.returncode != 0:
            raise TestbedError(
                f"{' '.join(full)} exited {res.returncode}: {res.stderr.strip()[-400:]}"
            )
        return res

    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              cgroup: Path | None = None, stdout: int | IO[Any] | None = subprocess.PIPE,
              stderr: int | IO[Any] | None = subprocess.PIPE, env: dict[str, str] | None = None,
              stdin: int | None = subprocess.DEVNULL,
              log: str | Path | None = None) -> subprocess.Popen[bytes]:
        """Start a long-running process we own (stopped at close); ``log``:
        its stdout and stderr go to that file."""
        if log is not None:
            with open(log, "wb") as f:  # the child keeps its own descriptor
                return self.spawn(cmd, netns=netns, cpus=cpus, cgroup=cgroup, stdout=f,
                                  stderr=f, env=env, stdin=stdin)
        full = [*(["ip", "netns", "exec", netns] if netns else []),
                *(["taskset", "-c", cpus] if cpus else []), *cmd]

        def pre() -> None:
            if cgroup is not None:
                (cgroup / "cgroup.procs").write_text(str(os.getpid()))

        p = subprocess.Popen(full, stdout=stdout, stderr=stderr, stdin=stdin, env=env,
                             preexec_fn=pre if cgroup else None)
        self._procs.append(p)
        self.state.add("pids", [p.pid, pid_start_time(p.pid) or 0])
        return p

    def stop(self, p: subprocess.Popen[bytes], timeout_s: float = 3.0) -> None:
        """Stop a process we started (SIGTERM, then SIGKILL)."""
        if p.poll() is None:
            p.terminate()
            try:
                p.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=timeout_s)
        self.forget(p.pid)

    def forget(self, pid: int) -> None:
        """Drop a finished process from the state."""
        for item in list(self.state.pids):
            if item[0] == pid:
                self.state.discard("pids", item)

    def adopt_pid(self, pid: int) -> None:
        """Record a process that daemonised itself (e.g. ovsdb-server --detach)."""
        self.state.add("pids", [pid, pid_start_time(pid) or 0])
