"""What a run created, on disk, so a crashed run's leftovers can be removed.

Each run writes ``<state dir>/<prefix>.json`` listing every object it made
(namespaces, root-namespace interfaces, processes with their start time,
directories, mounts, hugepage reservations, OVS bridges) *before* making it.
``cleanup_stale()`` removes what runs whose owner process is gone left
behind. The state dir is ``$TURNOUT_STATE_DIR`` or ``/run/turnout-bench``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "HUGEPAGE_LOCK",
    "NR_HUGEPAGES",
    "HugepageHold",
    "RunState",
    "cleanup_stale",
    "give_back_hugepages",
    "holding_hugepages",
    "hugepage_hold",
    "pid_start_time",
    "remove_objects",
    "reserve_hugepages",
    "reserve_recorded",
    "state_dir",
    "stop_pid",
]


def state_dir() -> Path:
    """Where state files live."""
    return Path(os.environ.get("TURNOUT_STATE_DIR", "/run/turnout-bench"))


def pid_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (None if it is gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def stop_pid(pid: int, start_time: int | None, timeout_s: float = 3.0) -> bool:
    """SIGTERM then SIGKILL one process we started, only if it is still the
    same process (same start time). Return True if it is gone."""
    if start_time is not None and pid_start_time(pid) != start_time:
        return True
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            return True
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, os.WNOHANG)
            if pid_start_time(pid) != start_time or not Path(f"/proc/{pid}").exists():
                return True
            time.sleep(0.02)
    return pid_start_time(pid) is None


#: The lock every hugepage reservation and give-back holds around its
#: read-modify-write of ``nr_hugepages`` (one number for the machine): the
#: Rust tests' (crates/testpeers), this module's and the hosts' across SSH
#: (hosts/remote.py, with flock(1)), so reservations of tests running at
#: once never interleave (one would count fewer pages than the kernel gave,
#: or give back another's).
HUGEPAGE_LOCK = "/run/lock/turnout-hugepages.lock"
NR_HUGEPAGES = "/proc/sys/vm/nr_hugepages"


@contextlib.contextmanager
def _hugepage_lock() -> Iterator[None]:
    Path(HUGEPAGE_LOCK).parent.mkdir(parents=True, exist_ok=True)
    with open(HUGEPAGE_LOCK, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        yield


def _nr() -> int:
    return int(Path(NR_HUGEPAGES).read_text().strip() or 0)


def reserve_hugepages(pages: int, timeout_s: float = 30.0) -> int:
    """Adds ``pages`` 2 MiB hugepages to the machine's pool; returns how
    many the kernel gave (``pages``, or fewer when it still could not at
    the deadline: each short try gives back what it got, compacts memory
    and tries again)."""
    deadline = time.monotonic() + timeout_s
    while True:
        with _hugepage_lock():
            before = _nr()
            Path(NR_HUGEPAGES).write_text(str(before + pages))
            got = _nr() - before
            if got >= pages:
                return pages
            Path(NR_HUGEPAGES).write_text(str(max(0, _nr() - got)))
        if time.monotonic() >= deadline:
            return got
        with contextlib.suppress(OSError):
            Path("/proc/sys/vm/compact_memory").write_text("1")
        time.sleep(0.2)


def give_back_hugepages(pages: int) -> None:
    """Takes ``pages`` hugepages out of the pool (what a reservation added),
    leaving whatever other tests reserved meanwhile."""
    with _hugepage_lock():
        Path(NR_HUGEPAGES).write_text(str(max(0, _nr() - pages)))


def reserve_recorded(state: RunState, pages: int) -> int:
    """Reserve ``pages`` hugepages (reserve_hugepages) recorded in
    ``state`` first, so that a crash in between gives back what it may
    have added; when the kernel gives fewer, nothing is kept and the
    record goes. Returns what the kernel gave."""
    record = [NR_HUGEPAGES, _nr(), pages]
    state.add("hugepages", record)
    got = reserve_hugepages(pages)
    if got < pages:
        state.discard("hugepages", record)
    return got


def _hugepage_pool(meminfo: str) -> tuple[int, int]:
    """``HugePages_Total`` and ``HugePages_Free`` of /proc/meminfo's text
    (0 for a line that is missing)."""
    got = {"HugePages_Total:": 0, "HugePages_Free:": 0}
    for line in meminfo.splitlines():
        parts = line.split()
        if len(parts) > 1 and parts[0] in got and parts[1].isdigit():
            got[parts[0]] = int(parts[1])
    return got["HugePages_Total:"], got["HugePages_Free:"]


class HugepageHold:
    """Hugepages a campaign keeps in the pool from the first run that asks
    for them to its end, lent to each run's testbed in turn.

    Growing the pool before every run and shrinking it after hands the
    memory back to the kernel's free lists each time; on a VM with free
    page reporting (virtio-balloon) the guest then reports it to the
    hypervisor, which discards it two seconds later, in the next trial,
    on the same physical CPUs: this VM's two vCPUs lost 30-40 ms of each
    2 s window to steal in the trial after every testpmd run that gave
    back its 1 GiB (docs/bench.md, "Hugepages"). Held, the pages go back
    to the pool, not to the kernel, between runs.

    What it added to the pool is in a state file of its own (owner: this
    process), so a crashed campaign's pages are given back by the next
    testbed or ``turnout bench cleanup`` as a testbed's are."""

    def __init__(self) -> None:
        #: its state file, from the first time it grows the pool
        self.state: RunState | None = None
        #: pages added to the pool, and of those, lent to open testbeds
        self.pages = 0
        self.lent = 0

    def borrow(self, pages: int) -> bool:
        """Lend ``pages`` to a testbed, growing the pool by what the hold
        lacks. Its unlent pages count only as far as the pool's free pages
        exceed every page the hold did not add: a free page may be another
        test's reservation its DPDK has not mapped yet (the pool is one
        for the machine), and one of the hold's may still be mapped by a
        run that is ending. Growing more than needed costs a few pages
        until the hold closes; lending another's pages fails that test.
        False (nothing lent, nothing kept) when the kernel would not give
        the rest."""
        total, free = self._pool()
        have = min(self.pages - self.lent, max(0, free - max(0, total - self.pages)))
        if have < pages:
            extra = pages - have
            if not self._grow(extra):
                return False
            self.pages += extra
        self.lent += pages
        return True

    def _pool(self) -> tuple[int, int]:
        """The pool's hugepages and of those the free ones."""
        return _hugepage_pool(Path("/proc/meminfo").read_text())

    def _grow(self, extra: int) -> bool:
        """Add ``extra`` pages to the pool, recorded to be given back
        (close); False, nothing added, when the kernel would not give them."""
        if self.state is None:
            self.state = RunState(prefix=f"hold{os.getpid()}")
        return reserve_recorded(self.state, extra) >= extra

    def give_back(self, pages: int) -> None:
        """A testbed is done with ``pages`` it borrowed: back to the hold."""
        self.lent = max(0, self.lent - pages)

    def close(self) -> None:
        """Give every page the hold added back to the kernel."""
        if self.state is not None:
            remove_objects(self.state)
            self.state.delete()
            self.state = None
        self.pages = self.lent = 0


_hold: HugepageHold | None = None


def hugepage_hold() -> HugepageHold | None:
    """The hold of the campaign running in this process, if any."""
    return _hold


@contextlib.contextmanager
def holding_hugepages() -> Iterator[HugepageHold]:
    """For the block's duration, testbeds of this process borrow their
    hugepages from one hold (:class:`HugepageHold`), given back at the end."""
    global _hold
    if _hold is not None:  # nested: the outer hold serves
        yield _hold
        return
    hold = HugepageHold()
    _hold = hold
    try:
        yield hold
    finally:
        _hold = None
        hold.close()


@dataclass
class RunState:
    """The objects of one run; every add_* is written to disk at once."""

    prefix: str
    owner_pid: int = field(default_factory=os.getpid)
    owner_start: int | None = None
    netns: list[str] = field(default_factory=list)
    links: list[str] = field(default_factory=list)  # root-namespace interfaces
    pids: list[list[int]] = field(default_factory=list)  # [pid, start_time]
    dirs: list[str] = field(default_factory=list)
    mounts: list[str] = field(default_factory=list)
    hugepages: list[list[Any]] = field(default_factory=list)  # [sysfs path, previous, pages]
    sysctls: list[list[str]] = field(default_factory=list)  # [path, previous value]
    ovs: list[list[str]] = field(default_factory=list)  # [db socket, bridge]
    cgroups: list[str] = field(default_factory=list)  # cgroup v2 directories

    def __post_init__(self) -> None:
        if self.owner_start is None:
            self.owner_start = pid_start_time(self.owner_pid)

    @property
    def path(self) -> Path:
        return state_dir() / f"{self.prefix}.json"

    def save(self) -> None:
        state_dir().mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(self), indent=1))
        tmp.replace(self.path)

    def add(self, kind: str, item: Any) -> None:
        """Record an object before it is created (kind = a list field)."""
        getattr(self, kind).append(item)
        self.save()

    def discard(self, kind: str, item: Any) -> None:
        """Forget an object after it was removed."""
        lst = getattr(self, kind)
        if item in lst:
            lst.remove(item)
            self.save()

    def delete(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    def owner_alive(self) -> bool:
        return pid_start_time(self.owner_pid) == self.owner_start

    @classmethod
    def load(cls, path: Path) -> RunState:
        return cls(**json.loads(path.read_text()))


def _run(*cmd: str) -> None:
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)


def remove_objects(st: RunState) -> list[str]:
    """Remove everything a state lists, most dependent first; return what was
    done (for the log). Errors on one object do not stop the others."""
    from pyroute2 import IPRoute, netns

    done: list[str] = []
    for pid, start in reversed(st.pids):
        if pid_start_time(pid) == start:
            stop_pid(pid, start)
            done.append(f"process {pid}")
    for sock, bridge in st.ovs:
        if Path(sock).exists():
            _run("ovs-vsctl", f"--db=unix:{sock}", "--timeout=5", "--if-exists", "del-br", bridge)
    for name in st.links:
        with IPRoute() as ipr, contextlib.suppress(Exception):
            idx = ipr.link_lookup(ifname=name)
            if idx:
                ipr.link("del", index=idx[0])
                done.append(f"link {name}")
    existing = set(netns.listnetns())
    for name in reversed(st.netns):
        if name in existing:
            with contextlib.suppress(Exception):
                netns.remove(name)
                done.append(f"netns {name}")
    for cg in reversed(st.cgroups):
        with contextlib.suppress(OSError):
            os.rmdir(cg)
            done.append(f"cgroup {cg}")
    for m in reversed(st.mounts):
        if os.path.ismount(m):
            _run("umount", "-l", m)
            done.append(f"mount {m}")
    for path, previous, *added in reversed(st.hugepages):
        with contextlib.suppress(OSError):
            if added:  # give back what was added, not the value read before
                give_back_hugepages(int(added[0]))
                done.append(f"hugepages {path} -{added[0]}")
            else:
                Path(path).write_text(str(previous))
                done.append(f"hugepages {path}={previous}")
    for path, previous in reversed(st.sysctls):
        with contextlib.suppress(OSError):
            Path(path).write_text(previous)
            done.append(f"sysctl {path}={previous}")
    for d in reversed(st.dirs):
        if Path(d).exists():
            shutil.rmtree(d, ignore_errors=True)
            done.append(f"dir {d}")
    return done


def cleanup_stale() -> list[str]:
    """Remove leftovers of runs whose owner is dead; return what was removed."""
    removed: list[str] = []
    d = state_dir()
    if not d.is_dir():
        return removed
    for path in sorted(d.glob("*.json")):
        try:
            st = RunState.load(path)
        except (OSError, ValueError, TypeError):
            continue
        if st.owner_alive():
            continue
        removed += remove_objects(st)
        st.delete()
    return removed
