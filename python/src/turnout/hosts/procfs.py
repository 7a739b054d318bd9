"""What the bench reads of a host's /proc and /sys while a trial runs: the
SUT's threads (CPU time, placement, run-queue waits), the kernel time of
the SUT's CPUs, an interface's receive counter, what else runs on the
SUT's CPUs, the TSC's rate.

Python standard library only, and every answer plain JSON (lists, dicts,
numbers, strings): the same functions run here for a local campaign
(``measure/cpu.py``, ``kernel.py``, ``others.py``, ``cost.py`` call them)
and, for a remote one, in the agent on the SUT's host (``hosts/agent.py``
ships this file next to itself and answers ``{"op": "procfs", "fn": NAME,
"kw": {...}}`` with ``NAME(**kw)``; ``Host.procfs`` is the call on either).
One implementation, so a figure means the same on both.
"""

from __future__ import annotations

import contextlib
import os
import re
import resource
import subprocess
from typing import Any

__all__ = ["PUBLIC", "Kept", "candidates", "cpu_columns", "cpu_steal_ticks", "kernel_busy_s",
           "loadavg", "netdev_rx_packets", "nominal_hz", "parse_sched_trace", "pid_start_time",
           "pinned_threads", "read_threads", "run_queue_wait", "sample_threads",
           "sched_trace_start", "sched_trace_stop", "thread_placement"]

CLK_TCK = os.sysconf("SC_CLK_TCK")
PF_KTHREAD = 0x00200000


def _read(path: str, n: int = 65536, files: Kept | None = None) -> str | None:
    """A small /proc file in one read (None when it is gone or unreadable);
    through ``files`` when given (kept open and read again in place)."""
    if files is not None:
        return files.read(path, n)
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        return os.read(fd, n).decode(errors="replace")
    except OSError:
        return None
    finally:
        os.close(fd)


class Kept:
    """/proc files kept open for a sampler's life and read again with
    ``pread`` at offset 0: procfs formats a file anew at each read from its
    start, so each read is fresh, and it costs a fifth of an open, read and
    close (12 threads' schedstat: ~15 µs against ~80 µs in Python here).
    The bench samples on the tester's CPU while traffic flows: every µs a
    sample costs is taken from the tester. ``sweep`` closes the files not
    read since the last sweep (threads that ended); ``close`` closes all.
    Also keeps each thread's name and last CPU from its last ``stat``, for
    samples that read ``schedstat`` only."""

    def __init__(self) -> None:
        self.fds: dict[str, int] = {}
        #: files kept open at most: a quarter of this process's descriptor
        #: limit (the bench needs the rest); further ones are opened per read
        self.cap = max(16, resource.getrlimit(resource.RLIMIT_NOFILE)[0] // 4)
        self.touched: set[str] = set()
        #: tid -> (name, last CPU) from the thread's last stat
        self.seen: dict[str, tuple[str, int]] = {}

    def read(self, path: str, n: int) -> str | None:
        self.touched.add(path)
        fd = self.fds.get(path)
        if fd is None:
            if len(self.fds) >= self.cap:  # a SUT with very many threads:
                return _read(path, n)  # the rest are read once, as without kept files
            try:
                fd = self.fds[path] = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                return None
        try:
            b = os.pread(fd, n, 0)
        except OSError:  # the thread ended (ESRCH)
            b = b""
        if not b:
            os.close(self.fds.pop(path))
            return None
        return b.decode(errors="replace")

    def sweep(self) -> None:
        for path in [p for p in self.fds if p not in self.touched]:
            os.close(self.fds.pop(path))
        self.touched.clear()

    def close(self) -> None:
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()
        self.touched.clear()


def _tasks(pid: int) -> list[str]:
    try:
        return os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []


def cpu_set(text: str) -> set[int]:
    """"0-2,5" -> {0, 1, 2, 5}."""
    out: set[int] = set()
    for part in text.strip().split(","):
        if "-" in part:
            a, b = part.split("-")
            out.update(range(int(a), int(b) + 1))
        elif part:
            out.add(int(part))
    return out


def _allowed(pid: int, tid: str) -> set[int]:
    status = _read(f"/proc/{pid}/task/{tid}/status") or ""
    for line in status.splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return cpu_set(line.split(":", 1)[1])
    return set()


def pid_start_time(pid: int) -> int | None:
    """Start time of a process in clock ticks since boot (None if it is gone)."""
    stat = _read(f"/proc/{pid}/stat", 4096)
    if not stat:
        return None
    try:
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (IndexError, ValueError):
        return None


def sample_threads(pids: list[int], files: Kept | None = None,
                   with_stat: bool = True) -> dict[str, list[Any]]:
    """tid -> [pid, name, utime, stime, last CPU, run ns] of every thread of
    ``pids`` (gone ones skipped): utime/stime in clock ticks, run ns from
    schedstat (-1 when unreadable: a kernel without CONFIG_SCHED_INFO).

    With kept ``files`` and not ``with_stat``, only ``schedstat`` is read of
    the threads ``files`` has seen before: their utime and stime are -1
    (not read), their name and CPU those of their last ``stat``."""
    out: dict[str, list[Any]] = {}
    for pid in pids:
        for tid in _tasks(pid):
            base = f"/proc/{pid}/task/{tid}/"
            known = files.seen.get(tid) if files is not None and not with_stat else None
            if known is not None:
                name, cpu = known
                utime = stime = -1
            else:
                stat = _read(base + "stat", 4096, files)
                if not stat:
                    continue
                try:
                    name = stat[stat.index("(") + 1:stat.rindex(")")]
                    f = stat[stat.rindex(")") + 2:].split()
                    utime, stime, cpu = int(f[11]), int(f[12]), int(f[36])
                except (ValueError, IndexError):
                    continue
                if files is not None:
                    files.seen[tid] = (name, cpu)
            try:
                run_ns = int((_read(base + "schedstat", 256, files) or "").split()[0])
            except (ValueError, IndexError):
                run_ns = -1
            out[tid] = [pid, name, utime, stime, cpu, run_ns]
    return out


def pinned_threads(pids: list[int], cpus: list[int]) -> list[int]:
    """The threads of these processes that may run on ``cpus`` only (the
    SUT's data path: workers, PMD threads, forwarding lcores); empty when
    none is (nothing pinned, or no ``cpus``)."""
    if not cpus:
        return []
    want = set(cpus)
    out = []
    for pid in pids:
        for tid in _tasks(pid):
            allowed = _allowed(pid, tid)
            if allowed and allowed <= want:
                out.append(int(tid))
    return out


def thread_placement(pids: list[int], cpus: list[int]) -> dict[str, Any]:
    """Where the threads of these processes may run, against the SUT's
    ``cpus``: ``on`` the threads allowed on them only (its data path),
    ``both`` those allowed on them and elsewhere (they can preempt the data
    path), ``off`` how many are allowed elsewhere only; names with their
    counts."""
    want = set(cpus)
    on: dict[str, int] = {}
    both: dict[str, int] = {}
    off = 0
    for pid in pids:
        for tid in _tasks(pid):
            allowed = _allowed(pid, tid)
            name = (_read(f"/proc/{pid}/task/{tid}/comm", 256) or "").strip()
            if not allowed or not name:
                continue
            if allowed <= want:
                on[name] = on.get(name, 0) + 1
            elif allowed & want:
                both[name] = both.get(name, 0) + 1
            else:
                off += 1
    return {"on": on, "both": both, "off": off}


def run_queue_wait(pids: list[int], tids: list[int] | None = None) -> tuple[int, int]:
    """(ns spent runnable but waiting for a CPU, times run on a CPU) summed
    over every thread of these processes, or over the threads ``tids`` of
    them when given (schedstat; gone threads skipped)."""
    wait = slices = 0
    only = {str(t) for t in tids} if tids else None
    for pid in pids:
        for tid in _tasks(pid):
            if only is not None and tid not in only:
                continue
            f = (_read(f"/proc/{pid}/task/{tid}/schedstat", 256) or "").split()
            try:
                wait += int(f[1])
                slices += int(f[2])
            except (ValueError, IndexError):
                continue
    return wait, slices


#: where tracefs is mounted, newer path first
TRACEFS = ("/sys/kernel/tracing", "/sys/kernel/debug/tracing")
_SWITCH = re.compile(r"prev_comm=(.*) prev_pid=(\d+) prev_prio=-?\d+ prev_state=(\S+) ==> "
                     r"next_comm=(.*) next_pid=(\d+) next_prio=-?\d+")
_WAKEUP = re.compile(r"comm=(.*) pid=(\d+) prio=-?\d+")
_RUNTIME = re.compile(r"comm=(.*) pid=(\d+) runtime=(\d+)")
_LINE = re.compile(r"^\s*.*-\d+\s+\[(\d+)\]\s+\S+\s+(\d+)\.(\d+): "
                   r"(sched_switch|sched_waking|sched_stat_runtime): (.*)$")
#: the events sched_trace_start records (sched_stat_runtime where the kernel has it)
_TRACED = ("sched_switch", "sched_waking", "sched_stat_runtime")


def _put(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def sched_trace_start(name: str, tids: list[int], comms: list[str] | None = None
                      ) -> dict[str, Any]:
    """Starts recording the context switches and wake-ups of the threads
    ``tids`` in a tracefs instance of their own, ``name`` (a trace buffer
    apart from the system's, removed by ``sched_trace_stop``): the events
    ``sched_switch`` where one of them leaves or takes a CPU and
    ``sched_waking`` of them (on the waker's CPU, as the wake-up is asked
    for: a halted virtual CPU's delay in running it again is after it),
    filtered in the kernel, on every CPU, stamped with
    CLOCK_MONOTONIC (``trace_clock = mono``, the tester's clock). Threads
    named one of ``comms`` (the tester's processes, started later) are
    recorded the same way. A few events per switch and per scheduler tick
    of these threads: nothing per frame. Returns ``{"instance": PATH}``, or ``{"why": ...}``
    when it cannot (no tracefs, not root, a kernel without these events)."""
    if not tids:
        return {"why": "no SUT thread to trace"}
    root = next((r for r in TRACEFS if os.path.isdir(f"{r}/instances")), None)
    if root is None:
        return {"why": "no tracefs instances (mount tracefs on /sys/kernel/tracing)"}
    _trace_sweep(f"{root}/instances")
    inst = f"{root}/instances/{name}"
    try:
        os.mkdir(inst)
    except FileExistsError:
        pass
    except OSError as e:
        return {"why": f"tracefs: {e.strerror or e}"}
    try:
        _put(f"{inst}/tracing_on", "0")
        _put(f"{inst}/trace_clock", "mono")
        # per CPU: a worker that naps after every frame at 10 kpps and a
        # tester that sleeps make ~6 events a nap (~40 B each) over the
        # trial's ~1.7 s
        _put(f"{inst}/buffer_size_kb", "8192")
        _put(f"{inst}/trace", "")
        names = [c for c in comms or [] if re.fullmatch(r"[\w.:/-]{1,15}", c)]
        sw = " || ".join([f"prev_pid == {t} || next_pid == {t}" for t in tids]
                         + [f'prev_comm == "{c}" || next_comm == "{c}"' for c in names])
        _put(f"{inst}/events/sched/sched_switch/filter", sw)
        by_pid = " || ".join([f"pid == {t}" for t in tids] + [f'comm == "{c}"' for c in names])
        _put(f"{inst}/events/sched/sched_waking/filter", by_pid)
        _put(f"{inst}/events/sched/sched_switch/enable", "1")
        _put(f"{inst}/events/sched/sched_waking/enable", "1")
        if os.path.isdir(f"{inst}/events/sched/sched_stat_runtime"):
            _put(f"{inst}/events/sched/sched_stat_runtime/filter", by_pid)
            _put(f"{inst}/events/sched/sched_stat_runtime/enable", "1")
        _put(f"{inst}/tracing_on", "1")
    except OSError as e:
        _trace_remove(inst)
        return {"why": f"tracefs: {e.strerror or e}"}
    return {"instance": inst}


def _trace_sweep(instances: str) -> None:
    """Removes the instances ``turnout-PID`` of processes that are gone (a
    campaign killed before its trial's end)."""
    try:
        names = os.listdir(instances)
    except OSError:
        return
    for n in names:
        pid = n.removeprefix("turnout-")
        if n.startswith("turnout-") and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            _trace_remove(f"{instances}/{n}")


def _trace_remove(inst: str) -> None:
    for path in [f"{inst}/tracing_on"] + [f"{inst}/events/sched/{e}/enable" for e in _TRACED]:
        with contextlib.suppress(OSError):
            _put(path, "0")
    with contextlib.suppress(OSError):
        os.rmdir(inst)


def sched_trace_stop(instance: str, most: int = 64 << 20) -> dict[str, Any]:
    """Stops the recording ``sched_trace_start`` began, removes its
    instance and returns its events: ``{"events": [...], "lost": N}``, each
    event ``[ns, "s", prev_tid, prev_state, next_tid, next_comm]`` (a
    context switch), ``[ns, "w", tid, comm]`` (a wake-up) or ``[ns, "r",
    tid, runtime_ns, cpu]`` (CPU time charged to the thread since its last
    such event or its switch to a CPU, and the CPU that recorded the
    charge), ``lost`` the events the buffer dropped (written minus kept),
    and when it dropped some, ``complete_from``: the time from which every
    CPU's events are there (a full buffer drops its oldest)."""
    if "/instances/" not in instance:
        return {"why": f"not a trace instance: {instance}"}
    try:
        _put(f"{instance}/tracing_on", "0")
        with open(f"{instance}/trace", "rb") as f:
            text = f.read(most).decode(errors="replace")
    except OSError as e:
        _trace_remove(instance)
        return {"why": f"tracefs: {e.strerror or e}"}
    _trace_remove(instance)
    return parse_sched_trace(text)


def parse_sched_trace(text: str) -> dict[str, Any]:
    """The ``sched_switch``, ``sched_waking`` and ``sched_stat_runtime``
    events of a tracefs ``trace`` file's text, as ``sched_trace_stop``
    returns them."""
    events: list[list[Any]] = []
    lost = 0
    first: dict[str, int] = {}  # CPU -> its oldest event kept
    for line in text.splitlines():
        if line.startswith("#"):
            m = re.search(r"entries-in-buffer/entries-written: (\d+)/(\d+)", line)
            if m:
                lost = int(m.group(2)) - int(m.group(1))
            continue
        m = _LINE.match(line)
        if m is None:
            continue
        ns = int(m.group(2)) * 1_000_000_000 + int(m.group(3).ljust(9, "0")[:9])
        first.setdefault(m.group(1), ns)
        if m.group(4) == "sched_switch":
            s = _SWITCH.search(m.group(5))
            if s:
                events.append([ns, "s", int(s.group(2)), s.group(3), int(s.group(5)),
                               s.group(4)])
        elif m.group(4) == "sched_waking":
            w = _WAKEUP.search(m.group(5))
            if w:
                events.append([ns, "w", int(w.group(2)), w.group(1)])
        else:
            r = _RUNTIME.search(m.group(5))
            if r:
                events.append([ns, "r", int(r.group(2)), int(r.group(3)), int(m.group(1))])
    out: dict[str, Any] = {"events": events, "lost": max(0, lost)}
    if lost > 0 and first:
        out["complete_from"] = max(first.values())
    return out


def cpu_columns(cpus: list[int], stat: str | None = None) -> tuple[int, list[int]]:
    """How many of these CPUs /proc/stat lists, and the sums of their ten
    time columns in clock ticks: user, nice, system, idle, iowait, irq,
    softirq, steal, guest, guest_nice (columns a kernel does not print
    count 0)."""
    text = stat if stat is not None else (_read("/proc/stat", 1 << 20) or "")
    want = {f"cpu{c}" for c in cpus}
    seen = 0
    sums = [0] * 10
    for line in text.splitlines():
        f = line.split()
        if f and f[0] in want:
            seen += 1
            for i, x in enumerate(f[1:11]):
                sums[i] += int(x)
    return seen, sums


def kernel_busy_s(cpus: list[int], stat: str | None = None, now: float | None = None) -> float:
    """Seconds these CPUs were busy outside any process, cumulative: the
    monotonic clock (this host's) times the number of CPUs, minus their
    idle, iowait, user, nice, system and steal time (/proc/stat). See
    measure/kernel.py for why it is read this way."""
    import time

    t = time.monotonic() if now is None else now
    seen, v = cpu_columns(cpus, stat)
    # guest time is already inside user (and guest_nice inside nice)
    away = v[0] + v[1] + v[2] + v[3] + v[4] + v[7]
    return t * seen - away / CLK_TCK


def cpu_steal_ticks(cpus: list[int], stat: str | None = None) -> int:
    """Steal time of these CPUs, cumulative, in clock ticks (/proc/stat's
    eighth column): what the hypervisor reports it ran elsewhere while the
    guest had work for that CPU. 0 on bare metal and where the hypervisor
    does not report it."""
    return cpu_columns(cpus, stat)[1][7]


def netdev_rx_packets(pid: int, ifaces: list[str], dev: str | None = None) -> int:
    """Frames received by these interfaces, in the network namespace of
    process ``pid`` (/proc/PID/net/dev)."""
    text = dev if dev is not None else (_read(f"/proc/{pid}/net/dev", 1 << 20) or "")
    want = set(ifaces)
    total = 0
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        if name.strip() in want:
            total += int(rest.split()[1])
    return total


def _is_kthread(pid: int) -> bool:
    st = _read(f"/proc/{pid}/stat", 1024)
    if not st:
        return False
    try:
        return bool(int(st[st.rindex(")") + 2:].split()[6]) & PF_KTHREAD)
    except (ValueError, IndexError):
        return False


def candidates(sut_cpus: list[int], skip_pids: list[int]) -> list[list[Any]]:
    """[pid, tid, comm, bound, kthread] of every thread that may run on a
    SUT CPU, but the ``skip_pids``' ones (measure/others.py): ``bound``
    when its affinity is within the SUT's CPUs."""
    sut = set(sut_cpus)
    skip = set(skip_pids) | {os.getpid()}
    out: list[list[Any]] = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) in skip:
            continue
        kthread: bool | None = None
        for t in _tasks(int(p)):
            try:
                aff = os.sched_getaffinity(int(t))
            except OSError:
                continue
            if aff & sut:
                if kthread is None:
                    kthread = _is_kthread(int(p))
                comm = (_read(f"/proc/{p}/task/{t}/comm", 256) or "?").strip() or "?"
                out.append([int(p), int(t), comm, aff <= sut, kthread])
    return out


def read_thread(pid: int, tid: int, bound: bool, files: Kept | None = None) -> list[int] | None:
    """[ns on a CPU, runs, the CPU it last ran on or -1] of one thread (the
    CPU only for a thread not bound to the SUT's CPUs)."""
    s = _read(f"/proc/{pid}/task/{tid}/schedstat", 128, files)
    if not s:
        return None
    f = s.split()
    cpu = -1
    if not bound:
        st = _read(f"/proc/{pid}/task/{tid}/stat", 1024, files)
        if st:
            try:
                cpu = int(st[st.rindex(")") + 2:].split()[36])
            except (ValueError, IndexError):
                cpu = -1
    try:
        return [int(f[0]), int(f[2]), cpu]
    except (ValueError, IndexError):
        return None


def read_threads(threads: list[list[Any]]) -> dict[str, list[int]]:
    """tid -> ``read_thread`` of each [pid, tid, bound] (gone ones left out)."""
    out: dict[str, list[int]] = {}
    for pid, tid, bound in threads:
        r = read_thread(int(pid), int(tid), bool(bound))
        if r is not None:
            out[str(tid)] = r
    return out


def loadavg() -> list[float]:
    """[1-minute load average, CPUs online]."""
    return [os.getloadavg()[0], float(os.cpu_count() or 0)]


_HZ: tuple[float, str] | None = None


def nominal_hz() -> tuple[float, str]:
    """The TSC's rate in Hz and where it was read: the kernel's TSC
    calibration (dmesg), else the model name's nominal clock ("@ 2.30GHz"),
    else cpufreq's base frequency, else CPU 0's current "cpu MHz" (the
    last resort, which moves with frequency scaling: the source says so).
    (0, "unknown") when none is readable."""
    global _HZ
    if _HZ is not None:
        return _HZ
    found: tuple[float, str] = (0.0, "unknown")
    try:
        out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=5).stdout
        m = re.findall(r"tsc: Refined TSC clocksource calibration: ([\d.]+) MHz", out) or \
            re.findall(r"tsc: Detected ([\d.]+) MHz", out)
        if m:
            found = (float(m[-1]) * 1e6, "tsc (dmesg)")
    except (OSError, subprocess.SubprocessError):
        pass
    if not found[0]:
        info = _read("/proc/cpuinfo", 1 << 22) or ""
        m2 = re.search(r"model name\s*:.*@\s*([\d.]+)\s*GHz", info)
        base = _read("/sys/devices/system/cpu/cpu0/cpufreq/base_frequency", 64)
        if m2:
            found = (float(m2.group(1)) * 1e9, "model name")
        elif base:
            found = (float(base) * 1e3, "cpufreq base_frequency")
        else:
            m3 = re.search(r"cpu MHz\s*:\s*([\d.]+)", info)
            if m3:
                found = (float(m3.group(1)) * 1e6, "cpu MHz of CPU 0 (current, not nominal)")
    _HZ = found
    return found


#: what the agent answers for (``Host.procfs``): name -> function
PUBLIC = {f.__name__: f for f in (sample_threads, pinned_threads, thread_placement,
                                  run_queue_wait, kernel_busy_s, cpu_steal_ticks,
                                  netdev_rx_packets,
                                  candidates, read_threads, nominal_hz, pid_start_time,
                                  loadavg, sched_trace_start, sched_trace_stop)}
