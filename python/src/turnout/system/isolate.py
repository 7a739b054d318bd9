"""Keep the host's movable work off the SUT's CPUs for a campaign, and put it back.

A busy poller at SCHED_OTHER shares its CPU with every kernel thread that
runs there: on the 2-CPU VM `perf sched` saw rcu_preempt in back-to-back
8 ms slices, unbound workqueue kworkers up to 63 ms a run, kdamond and
kcompactd for tens of ms on the SUT's CPU, and every frame meanwhile waits
(docs/results/2026-11-27-kernel-threads-on-sut-cpu.md). With the campaign
option ``isolate_sut_cpus = true``, for the campaign's duration
``SutIsolation``:

- writes the unbound workqueues' cpumask
  (``/sys/devices/virtual/workqueue/cpumask``): every unbound kworker
  (``kworker/u*``) then runs on the other CPUs;
- sets the affinity of every kernel thread that allows it (rcu_preempt,
  rcuog/rcuop, kdamond, kcompactd, kswapd, khugepaged, kthreadd, ...) to
  its CPUs minus the SUT's;
- moves every IRQ whose affinity includes a SUT CPU
  (``/proc/irq/N/smp_affinity_list``) and the default affinity of new ones;
- with ``processes`` (the default), sets the affinity of every thread of
  every other user-space process that may run on a SUT CPU to its CPUs
  minus the SUT's (not the isolating process's own: the bench places
  itself, and the SUT and tester it starts later are placed explicitly).
  A daemon woken now and then (on the 2-CPU VM the sandbox's agent, PID 1,
  ran 2-10 ms at a time on the SUT's CPU in half of turnoutd's trials at
  10 kpps, never in testpmd's: a worker that had slept once left the CPU
  idle for it to settle on) preempts a busy poller as a kernel thread
  does. Threads such a process starts while isolated inherit the narrowed
  affinity; at restore those still on exactly it get their parent's back.

What cannot move is listed with the reason: per-CPU kernel threads bound
to a SUT CPU (ksoftirqd/N, kworker/N:*, migration/N, cpuhp/N), threads the
kernel keeps its own affinity for (PF_NO_SETAFFINITY: EINVAL), managed IRQs
(EIO), threads a process pinned to SUT CPUs only. Everything moved lands
on the other CPUs: on 2 CPUs the tester's.

Every original value is written to a restore file (``sut-isolation.restore`` in
the bench's state dir, testbed/state.py) *before* anything is changed, and
put back on exit, on exceptions and on SIGINT/SIGTERM; a run that died
without restoring leaves the file, and the next ``turnout bench run`` (or
``turnout bench cleanup``) warns and restores from it (``recover_stale``).
One isolation at a time: a second run that asks for it while the first
is alive is refused (its "originals" would be the first run's changes).

Standard library only (and hosts/procfs.py): a remote campaign's agent
runs it on the SUT's host (hosts/agent.py ``isolate``), with the restore
file in that host's state dir.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

try:
    from ..hosts.procfs import pid_start_time
except ImportError:  # shipped next to the bench's agent on a remote host (hosts/agent.py)
    from procfs import pid_start_time  # type: ignore[import-not-found,no-redef]

__all__ = ["IsolationBusy", "IsolationError", "SutIsolation", "Sysfs", "format_cpus",
           "parse_cpu_list", "parse_cpu_mask", "recover_stale", "restore_file"]

PF_KTHREAD = 0x00200000
WQ_CPUMASK = "sys/devices/virtual/workqueue/cpumask"
IRQ_DEFAULT = "proc/irq/default_smp_affinity"
STATE_NAME = "sut-isolation.restore"  # not *.json: those are testbed state files


class IsolationError(RuntimeError):
    """Isolation cannot start (no CPU left for the rest, not root, ...)."""


class IsolationBusy(IsolationError):
    """Another live run holds the isolation."""


def parse_cpu_list(text: str) -> set[int]:
    """"0-2,5" -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        part = part.strip()
        if not part:
            continue
        if "-" in part:
            a, b = part.split("-", 1)
            out.update(range(int(a), int(b) + 1))
        else:
            out.add(int(part))
    return out


def parse_cpu_mask(text: str) -> set[int]:
    """A kernel hex CPU mask ("3", "00000000,00000003") -> CPU numbers."""
    v = int(text.strip().replace(",", "") or "0", 16)
    return {i for i in range(v.bit_length()) if v >> i & 1}


def format_cpus(cpus: set[int] | list[int]) -> str:
    """{0, 1, 2, 5} -> "0-2,5"."""
    s = sorted(set(cpus))
    parts: list[str] = []
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and s[j + 1] == s[j] + 1:
            j += 1
        parts.append(str(s[i]) if i == j else f"{s[i]}-{s[j]}")
        i = j + 1
    return ",".join(parts)


def _mask(cpus: set[int]) -> str:
    return format(sum(1 << c for c in cpus), "x")


@dataclass
class Sysfs:
    """The files and syscalls isolation uses, under ``root`` (``/`` on the
    host, a temporary tree in the unit tests)."""

    root: Path = Path("/")
    getaff: Callable[[int], set[int]] = os.sched_getaffinity
    setaff: Callable[[int, set[int]], None] = os.sched_setaffinity

    def path(self, rel: str) -> Path:
        return self.root / rel

    def read(self, rel: str) -> str:
        return self.path(rel).read_text().strip()

    def write(self, rel: str, text: str) -> None:
        # one write(2) of the whole value, as the kernel wants it
        with open(self.path(rel), "w") as f:
            f.write(text + "\n")

    def _processes(self) -> Iterator[tuple[Path, tuple[str, int, int]]]:
        """Each /proc/PID directory with its stat's (comm, flags, start)."""
        proc = self.path("proc")
        for d in proc.iterdir() if proc.is_dir() else []:
            if d.name.isdigit() and (st := _stat(d / "stat")) is not None:
                yield d, st

    def kthreads(self) -> list[tuple[int, str, int]]:
        """(pid, comm, start time in ticks) of every kernel thread."""
        return sorted((int(d.name), st[0], st[2]) for d, st in self._processes()
                      if st[1] & PF_KTHREAD)

    def user_threads(self) -> list[tuple[int, int, str, int, int]]:
        """(pid, tid, comm, start time in ticks, parent pid) of every thread
        of every user-space process."""
        out = []
        for d, st in self._processes():
            if st[1] & PF_KTHREAD:
                continue
            ppid = _ppid(d / "stat")
            tasks = d / "task"
            for t in tasks.iterdir() if tasks.is_dir() else []:
                tst = _stat(t / "stat") if t.name.isdigit() else None
                if tst is not None:
                    out.append((int(d.name), int(t.name), tst[0], tst[2], ppid))
        return sorted(out)

    def thread_start_time(self, pid: int, tid: int) -> int | None:
        st = _stat(self.path(f"proc/{pid}/task/{tid}/stat"))
        return None if st is None else st[2]

    def uptime_ticks(self) -> int | None:
        """Clock ticks since boot (the unit of a /proc stat's start time)."""
        try:
            return int(float(self.read("proc/uptime").split()[0]) * os.sysconf("SC_CLK_TCK"))
        except (OSError, ValueError, IndexError):
            return None

    def start_time(self, pid: int) -> int | None:
        st = _stat(self.path(f"proc/{pid}/stat"))
        return None if st is None else st[2]

    def irqs(self) -> list[int]:
        d = self.path("proc/irq")
        return sorted(int(x.name) for x in (d.iterdir() if d.is_dir() else [])
                      if x.name.isdigit() and (x / "smp_affinity_list").exists())


def _stat(p: Path) -> tuple[str, int, int] | None:
    """(comm, flags, start time) from a /proc/PID/stat file."""
    try:
        text = p.read_text()
    except OSError:
        return None
    try:
        comm = text[text.index("(") + 1: text.rindex(")")]
        f = text[text.rindex(")") + 2:].split()
        return comm, int(f[6]), int(f[19])
    except (ValueError, IndexError):
        return None


def _ppid(p: Path) -> int:
    """The parent pid in a /proc/PID/stat file (0 when unreadable)."""
    try:
        text = p.read_text()
        return int(text[text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        return 0


def restore_file(state_dir: Path) -> Path:
    return state_dir / STATE_NAME


def _owner_alive(doc: dict[str, Any]) -> bool:
    """The run that wrote a restore file is still running (same pid, same start)."""
    pid, start = int(doc.get("owner_pid", 0) or 0), doc.get("owner_start")
    return pid > 0 and start is not None and pid_start_time(pid) == start


def restore(doc: dict[str, Any], fs: Sysfs) -> list[str]:
    """Put back what ``doc`` (a restore file's content) saved; returns the
    problems (an empty list: everything is back). Threads that exited are
    not a problem; a pid reused by another thread is left alone."""
    problems: list[str] = []
    problems += _widen_new_kthreads(doc, fs)
    problems += _restore_user_threads(doc, fs)
    for k in doc.get("kthreads", []):
        pid = int(k["pid"])
        if fs.start_time(pid) != k["start"]:
            continue  # exited (or the pid is someone else's now)
        try:
            if set(fs.getaff(pid)) == set(k["cpus"]):
                continue  # never moved (or already back)
            fs.setaff(pid, set(k["cpus"]))
        except OSError as e:
            if e.errno == errno.EINVAL:
                continue  # the kernel keeps its affinity: it never moved
            problems.append(f"{k['comm']} ({pid}): affinity {format_cpus(k['cpus'])}: "
                            f"{e.strerror}")
    for irq, text in sorted(doc.get("irqs", {}).items(), key=lambda x: int(x[0])):
        rel = f"proc/irq/{irq}/smp_affinity_list"
        try:
            if parse_cpu_list(fs.read(rel)) == parse_cpu_list(text):
                continue  # never moved (a managed IRQ) or already back
            fs.write(rel, text)
        except FileNotFoundError:
            continue  # the IRQ is gone (its device was removed)
        except OSError as e:
            problems.append(f"IRQ {irq}: smp_affinity_list {text}: {e.strerror}")
    for rel, key in ((IRQ_DEFAULT, "irq_default"), (WQ_CPUMASK, "workqueue_cpumask")):
        if doc.get(key) is not None:
            try:
                if parse_cpu_mask(fs.read(rel)) != parse_cpu_mask(doc[key]):
                    fs.write(rel, doc[key])
            except OSError as e:
                problems.append(f"/{rel} {doc[key]}: {e.strerror}")
    return problems


def _widen_new_kthreads(doc: dict[str, Any], fs: Sysfs) -> list[str]:
    """Kernel threads kthreadd started while it was moved inherited its
    narrowed affinity: give those still on exactly the kept CPUs kthreadd's
    original affinity back."""
    parent = next((k for k in doc.get("kthreads", []) if k["comm"] == "kthreadd"), None)
    since = doc.get("isolated_at")
    if parent is None or since is None:
        return []
    keep, known = set(doc.get("keep_cpus", [])), {int(k["pid"]) for k in doc["kthreads"]}
    problems = []
    for pid, comm, start in fs.kthreads():
        if start < since or pid in known:
            continue
        try:
            if set(fs.getaff(pid)) == keep:
                fs.setaff(pid, set(parent["cpus"]))
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ESRCH):
                problems.append(f"{comm} ({pid}, started while isolated): {e.strerror}")
    return problems


def _restore_user_threads(doc: dict[str, Any], fs: Sysfs) -> list[str]:
    """Give the user-space threads isolation moved their affinity back
    (those their owner did not set otherwise meanwhile), and threads their
    processes started while isolated, still on exactly the narrowed CPUs,
    their parent's original affinity (a new thread of a moved process, or
    a process a moved process started, and so on down)."""
    threads = doc.get("threads", [])
    if not threads:
        return []
    sut, problems = set(doc.get("sut_cpus", [])), []
    known = {(int(t["pid"]), int(t["tid"])) for t in threads}
    #: pid -> the affinity its threads had (its main thread's, else any)
    orig: dict[int, set[int]] = {}
    for t in sorted(threads, key=lambda t: t["pid"] != t["tid"]):
        orig.setdefault(int(t["pid"]), set(t["cpus"]))

    def put(pid: int, tid: int, cpus: set[int], what: str) -> None:
        try:
            if set(fs.getaff(tid)) == cpus - sut:
                fs.setaff(tid, cpus)
        except OSError as e:
            if e.errno != errno.ESRCH:
                problems.append(f"{what}: affinity {format_cpus(cpus)}: {e.strerror}")

    for t in threads:
        pid, tid = int(t["pid"]), int(t["tid"])
        if fs.thread_start_time(pid, tid) == t["start"]:
            put(pid, tid, set(t["cpus"]), f"{t['comm']} ({pid}/{tid})")
    since = doc.get("isolated_at")
    if since is None:
        return problems
    # parents before children: a pid's parent started earlier (pids wrap:
    # ordered by start time)
    for pid, tid, comm, start, ppid in sorted(fs.user_threads(), key=lambda r: r[3]):
        if start < since or (pid, tid) in known:
            continue
        parent = orig.get(pid) if pid in orig else orig.get(ppid)
        if parent is None:
            continue
        orig.setdefault(pid, parent)
        put(pid, tid, parent, f"{comm} ({pid}/{tid}, started while isolated)")
    return problems


def recover_stale(state_dir: Path, fs: Sysfs | None = None) -> list[str]:
    """Restore what a dead run's isolation left (its restore file) and
    remove the file; returns lines to warn with (none when there was
    nothing, or the owner is alive)."""
    fs = fs or Sysfs()
    f = restore_file(state_dir)
    try:
        doc = json.loads(f.read_text())
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as e:
        return [f"unreadable isolation restore file {f}: {e} (left in place)"]
    if _owner_alive(doc):
        return []
    problems = restore(doc, fs)
    lines = [f"run pid {doc.get('owner_pid')} died with the SUT's CPUs isolated: restored "
             f"the workqueue cpumask, {len(doc.get('irqs', {}))} IRQs, "
             f"{len(doc.get('kthreads', []))} kernel threads and "
             f"{len(doc.get('threads', []))} threads of other processes from {f}"]
    lines += [f"  could not restore {p}" for p in problems]
    if not problems:
        f.unlink(missing_ok=True)
    return lines


@dataclass
class SutIsolation:
    """Context manager: moves what can move off ``sut_cpus`` onto the
    other CPUs of ``all_cpus``, and restores it on exit (see the module
    doc). ``summary()`` says what moved and what could not."""

    sut_cpus: set[int]
    all_cpus: set[int]
    state_dir: Path
    fs: Sysfs = field(default_factory=Sysfs)
    #: also move the threads of other user-space processes (module doc)
    processes: bool = True
    moved: list[str] = field(default_factory=list)
    #: reason -> what could not move for it
    not_moved: dict[str, list[str]] = field(default_factory=dict)
    restore_problems: list[str] = field(default_factory=list)
    _doc: dict[str, Any] | None = None
    _old_term: Any = None

    @property
    def keep_cpus(self) -> set[int]:
        return set(self.all_cpus) - set(self.sut_cpus)

    def _cannot(self, why: str, what: str) -> None:
        self.not_moved.setdefault(why, []).append(what)

    def plan(self) -> dict[str, Any]:
        """The restore file's content: every value that will change, as it is now."""
        sut, keep = set(self.sut_cpus), self.keep_cpus
        if not sut:
            raise IsolationError("no SUT CPUs to isolate")
        if not keep:
            raise IsolationError(f"no CPU left for the rest: the SUT has all of "
                                 f"{format_cpus(self.all_cpus)}")
        me = os.getpid()
        doc: dict[str, Any] = {"owner_pid": me, "owner_start": pid_start_time(me),
                               "sut_cpus": sorted(sut), "keep_cpus": sorted(keep),
                               "workqueue_cpumask": None, "irq_default": None,
                               "irqs": {}, "kthreads": [], "threads": [],
                               # kthreads started after this (ticks since boot) were
                               # started by a moved kthreadd (_widen_new_kthreads)
                               "isolated_at": self.fs.uptime_ticks()}
        for rel, key in ((WQ_CPUMASK, "workqueue_cpumask"), (IRQ_DEFAULT, "irq_default")):
            try:
                if parse_cpu_mask(self.fs.read(rel)) & sut:
                    doc[key] = self.fs.read(rel)
            except (OSError, ValueError) as e:
                self._cannot(f"unreadable: {e}", f"/{rel}")
        for irq in self.fs.irqs():
            try:
                text = self.fs.read(f"proc/irq/{irq}/smp_affinity_list")
            except OSError:
                continue
            if parse_cpu_list(text) & sut:
                doc["irqs"][str(irq)] = text
        for pid, comm, start in self.fs.kthreads():
            try:
                cpus = set(self.fs.getaff(pid))
            except OSError:
                continue  # exited meanwhile
            if not cpus & sut:
                continue
            if cpus <= sut:
                self._cannot(f"per-CPU, bound to CPU {format_cpus(cpus)}", comm)
                continue
            doc["kthreads"].append({"pid": pid, "comm": comm, "start": start,
                                    "cpus": sorted(cpus)})
        for pid, tid, comm, start, _ in self.fs.user_threads() if self.processes else []:
            if pid == me:
                continue  # the bench places itself
            try:
                cpus = set(self.fs.getaff(tid))
            except OSError:
                continue
            if not cpus & sut:
                continue
            if cpus <= sut:
                self._cannot(f"pinned by its process to CPU {format_cpus(cpus)}",
                             f"{comm} ({pid})")
                continue
            doc["threads"].append({"pid": pid, "tid": tid, "comm": comm, "start": start,
                                   "cpus": sorted(cpus)})
        return doc

    def __enter__(self) -> SutIsolation:
        f = restore_file(self.state_dir)
        self.state_dir.mkdir(parents=True, exist_ok=True)
        if f.exists():
            try:
                other = json.loads(f.read_text())
            except (OSError, ValueError):
                other = {}
            if other and _owner_alive(other):
                raise IsolationBusy(f"run pid {other.get('owner_pid')} already isolates CPUs "
                                    f"{format_cpus(other.get('sut_cpus', []))} ({f})")
            for line in recover_stale(self.state_dir, self.fs):
                self._cannot("restored first (a dead run's isolation)", line)
        doc = self.plan()
        try:  # O_EXCL: one isolation at a time
            fd = os.open(f, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            raise IsolationBusy(f"another run created {f} meanwhile") from None
        with os.fdopen(fd, "w") as out:
            json.dump(doc, out)
            out.flush()
            os.fsync(out.fileno())
        self._doc = doc
        owner = os.getpid()

        def on_term(signum: int, frame: FrameType | None) -> None:
            if os.getpid() != owner:
                os._exit(128 + signum)
            raise SystemExit(128 + signum)  # unwinds through __exit__

        with contextlib.suppress(ValueError):  # not the main thread
            self._old_term = signal.signal(signal.SIGTERM, on_term)
        try:
            self._apply(doc)
            self._save(doc)  # only what moved now
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _save(self, doc: dict[str, Any]) -> None:
        f = restore_file(self.state_dir)
        tmp = f.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, f)

    def _apply(self, doc: dict[str, Any]) -> None:
        """Move everything ``doc`` lists; drop from it what could not move."""
        keep = self.keep_cpus
        if doc["workqueue_cpumask"] is not None:
            try:
                self.fs.write(WQ_CPUMASK, _mask(keep))
                self.moved.append(f"unbound workqueues (cpumask {doc['workqueue_cpumask']} -> "
                                  f"{_mask(keep)})")
            except OSError as e:
                self._cannot(f"write failed: {e.strerror}", f"/{WQ_CPUMASK}")
                doc["workqueue_cpumask"] = None
        if doc["irq_default"] is not None:
            try:
                self.fs.write(IRQ_DEFAULT, _mask(keep))
                self.moved.append("default IRQ affinity")
            except OSError as e:
                self._cannot(f"write failed: {e.strerror}", f"/{IRQ_DEFAULT}")
                doc["irq_default"] = None
        for irq, text in list(doc["irqs"].items()):
            rest = parse_cpu_list(text) - set(self.sut_cpus) or keep
            try:
                self.fs.write(f"proc/irq/{irq}/smp_affinity_list", format_cpus(rest))
                self.moved.append(f"IRQ {irq}")
            except OSError as e:
                why = ("a managed IRQ (EIO: the kernel sets its affinity)"
                       if e.errno == errno.EIO else f"IRQ affinity: {e.strerror}")
                self._cannot(why, f"IRQ {irq}")
                del doc["irqs"][irq]
        moved = []
        for k in doc["kthreads"]:
            try:
                self.fs.setaff(k["pid"], set(k["cpus"]) - set(self.sut_cpus))
                self.moved.append(k["comm"])
                moved.append(k)
            except ProcessLookupError:
                continue
            except OSError as e:
                why = ("the kernel keeps its affinity (EINVAL: PF_NO_SETAFFINITY; unbound "
                       "kworkers follow the workqueue cpumask)"
                       if e.errno == errno.EINVAL else f"sched_setaffinity: {e.strerror}")
                self._cannot(why, k["comm"])
        doc["kthreads"] = moved
        threads: list[dict[str, Any]] = []
        by_process: dict[int, list[dict[str, Any]]] = {}
        for t in doc.get("threads", []):
            try:
                self.fs.setaff(t["tid"], set(t["cpus"]) - set(self.sut_cpus))
            except ProcessLookupError:
                continue
            except OSError as e:
                why = ("its cgroup's cpuset does not allow the other CPUs (EINVAL)"
                       if e.errno == errno.EINVAL else f"sched_setaffinity: {e.strerror}")
                self._cannot(why, f"{t['comm']} ({t['pid']})")
                continue
            threads.append(t)
            by_process.setdefault(t["pid"], []).append(t)
        doc["threads"] = threads
        for pid, ts in sorted(by_process.items()):
            main = next((t for t in ts if t["tid"] == pid), ts[0])
            self.moved.append(f"process {main['comm']} ({pid}, {len(ts)} "
                              f"thread{'s' if len(ts) > 1 else ''})")

    def __exit__(self, *exc: object) -> None:
        if self._doc is None:
            return
        old_int = None
        with contextlib.suppress(ValueError):  # no Ctrl-C half-way through a restore
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.restore_problems = restore(self._doc, self.fs)
            if not self.restore_problems:
                restore_file(self.state_dir).unlink(missing_ok=True)
            self._doc = None
        finally:
            with contextlib.suppress(ValueError):
                if old_int is not None:
                    signal.signal(signal.SIGINT, old_int)
                if self._old_term is not None:
                    signal.signal(signal.SIGTERM, self._old_term)
                    self._old_term = None

    def summary(self) -> dict[str, Any]:
        """What moved and what could not (for the run's and every trial's record)."""
        return {"sut_cpus": format_cpus(self.sut_cpus), "to_cpus": format_cpus(self.keep_cpus),
                "moved": list(self.moved),
                "not_moved": [{"why": w, "what": sorted(set(v))}
                              for w, v in sorted(self.not_moved.items())]}
