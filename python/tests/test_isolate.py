"""SUT CPU isolation (system/isolate.py): save, move, restore; on a fake
sysfs tree, and once for real (root)."""

from __future__ import annotations

import errno
import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from conftest import needs_root
from turnout.system.isolate import (
    IsolationBusy,
    IsolationError,
    SutIsolation,
    Sysfs,
    format_cpus,
    parse_cpu_list,
    parse_cpu_mask,
    recover_stale,
    restore_file,
)

PF_KTHREAD = 0x00200000


def _stat(pid: int, comm: str, flags: int, start: int, ppid: int = 2) -> str:
    # pid (comm) state ppid pgrp session tty tpgid flags ... field 22 = start
    rest = ["S", str(ppid), "0", "0", "0", "-1", str(flags)] + ["0"] * 12 + [str(start)] + ["0"] * 5
    return f"{pid} ({comm}) " + " ".join(rest) + "\n"


class FakeHost:
    """A sysfs/procfs-like tree in tmp and an affinity table."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.aff: dict[int, set[int]] = {}
        self.fixed: set[int] = set()  # PF_NO_SETAFFINITY
        (root / "sys/devices/virtual/workqueue").mkdir(parents=True)
        (root / "sys/devices/virtual/workqueue/cpumask").write_text("3\n")
        (root / "proc/irq").mkdir(parents=True)
        (root / "proc/irq/default_smp_affinity").write_text("3\n")
        for irq, aff in ((36, "0-1"), (39, "0"), (40, "1")):
            (root / f"proc/irq/{irq}").mkdir()
            (root / f"proc/irq/{irq}/smp_affinity_list").write_text(aff + "\n")
        (root / "proc/uptime").write_text("15.00 20.00\n")  # 1500 ticks
        self.thread(2, "kthreadd", {0, 1})
        self.thread(15, "rcu_preempt", {0, 1})
        self.thread(22, "ksoftirqd/1", {1})
        self.thread(35, "kcompactd0", {0, 1})
        self.thread(90, "kworker/u8:3", {0, 1}, fixed=True)
        self.thread(14, "ksoftirqd/0", {0})
        self.thread(500, "bash", {0, 1}, flags=0)  # a user process: moved

    def thread(self, pid: int, comm: str, cpus: set[int], fixed: bool = False,
               flags: int = PF_KTHREAD, start: int | None = None, ppid: int = 2) -> None:
        """A process (its main thread: tid = pid; a user process also has
        /proc/PID/task/PID)."""
        start = 1000 + pid if start is None else start
        (self.root / f"proc/{pid}").mkdir(parents=True)
        (self.root / f"proc/{pid}/stat").write_text(_stat(pid, comm, flags, start, ppid))
        self.aff[pid] = set(cpus)
        if fixed:
            self.fixed.add(pid)
        if not flags & PF_KTHREAD:
            self.task(pid, pid, comm, cpus, start)

    def task(self, pid: int, tid: int, comm: str, cpus: set[int], start: int) -> None:
        """A thread of user process ``pid``."""
        (self.root / f"proc/{pid}/task/{tid}").mkdir(parents=True)
        (self.root / f"proc/{pid}/task/{tid}/stat").write_text(_stat(tid, comm, 0, start))
        self.aff[tid] = set(cpus)

    def getaff(self, pid: int) -> set[int]:
        if pid not in self.aff:
            raise ProcessLookupError(errno.ESRCH, "No such process")
        return set(self.aff[pid])

    def setaff(self, pid: int, cpus: set[int]) -> None:
        if pid in self.fixed:
            raise OSError(errno.EINVAL, "Invalid argument")
        self.aff[pid] = set(cpus)

    def fs(self) -> Sysfs:
        return Sysfs(root=self.root, getaff=self.getaff, setaff=self.setaff)

    def snapshot(self) -> dict[str, object]:
        files = {str(p.relative_to(self.root)): p.read_text() for p in self.root.rglob("*")
                 if p.is_file() and "stat" not in p.name}
        return {"files": files, "aff": {k: sorted(v) for k, v in self.aff.items()}}


def test_other_processes_threads_move_and_come_back_with_their_children(tmp_path):
    """Every thread of another user-space process that may run on the SUT's
    CPU moves off it (not the isolating process's own; not one its process
    pinned to the SUT's CPU only); at the end each gets its affinity back
    unless its owner set another meanwhile, and threads and processes a
    moved process started while isolated get their parent's."""
    h = FakeHost(tmp_path / "root")
    h.thread(700, "process_api", {0, 1}, flags=0, ppid=0)
    h.task(700, 701, "tokio-rt-worker", {0, 1}, 1701)
    h.task(700, 702, "pinned", {1}, 1702)  # its process put it there: stays
    h.thread(800, "sshd", {0}, flags=0)  # never on the SUT's CPU
    me = os.getpid()
    h.thread(me, "turnout", {0, 1}, flags=0)  # the isolating process places itself
    state = tmp_path / "state"
    with SutIsolation({1}, {0, 1}, state, fs=h.fs()) as iso:
        assert h.aff[700] == h.aff[701] == {0} and h.aff[702] == {1} and h.aff[me] == {0, 1}
        s = iso.summary()
        assert "process process_api (700, 2 threads)" in s["moved"]
        assert not any("sshd" in m or "turnout (" in m for m in s["moved"])
        why = {w["why"]: w["what"] for w in s["not_moved"]}
        assert why["pinned by its process to CPU 1"] == ["pinned (700)"]
        doc = json.loads(restore_file(state).read_text())
        assert {(t["pid"], t["tid"]) for t in doc["threads"]} == {
            (500, 500), (700, 700), (700, 701)}
        # while isolated: a new thread of a moved process, a process it
        # started and that one's child inherit the narrowed affinity
        h.task(700, 703, "tokio-rt-worker", {0}, 2000)
        h.thread(1000, "bash", {0}, flags=0, start=2001, ppid=700)
        h.thread(1001, "sleep", {0}, flags=0, start=2002, ppid=1000)
        h.thread(1002, "gen", {0}, flags=0, start=2003, ppid=me)  # the bench's: its own
    assert h.aff[700] == h.aff[701] == h.aff[703] == {0, 1}
    assert h.aff[1000] == h.aff[1001] == {0, 1}
    assert h.aff[1002] == {0} and h.aff[702] == {1} and h.aff[800] == {0}
    assert iso.restore_problems == [] and not restore_file(state).exists()


def test_a_moved_thread_its_owner_set_otherwise_is_left(tmp_path):
    h = FakeHost(tmp_path / "root")
    h.thread(700, "app", {0, 1}, flags=0)
    with SutIsolation({1}, {0, 1}, tmp_path / "state", fs=h.fs()):
        assert h.aff[700] == {0}
        h.aff[700] = {1}  # its owner moved it to the SUT's CPU on purpose
    assert h.aff[700] == {1} and h.aff[500] == {0, 1}


def test_processes_false_moves_kernel_work_only(tmp_path):
    h = FakeHost(tmp_path / "root")
    with SutIsolation({1}, {0, 1}, tmp_path / "state", fs=h.fs(), processes=False) as iso:
        assert h.aff[500] == {0, 1} and h.aff[15] == {0}
        assert not any(m.startswith("process ") for m in iso.summary()["moved"])


def test_the_campaign_says_whether_other_processes_move():
    from turnout.campaign import CampaignError, parse

    def spec(**c: object) -> object:
        return parse({"campaign": {"name": "i", "isolate_sut_cpus": True, **c},
                      "matrix": {"suts": ["turnoutd"]}})

    assert spec().isolate_processes is True  # type: ignore[attr-defined]
    assert spec(isolate_processes=False).isolate_processes is False  # type: ignore[attr-defined]
    with pytest.raises(CampaignError, match="isolate_processes: 'no' is not true or false"):
        spec(isolate_processes="no")


def test_cpu_formats():
    assert parse_cpu_list("0-2,5") == {0, 1, 2, 5}
    assert parse_cpu_mask("00000000,00000003") == {0, 1}
    assert parse_cpu_mask("a") == {1, 3}
    assert format_cpus({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"


def test_moves_and_restores(tmp_path):
    h = FakeHost(tmp_path / "root")
    before = h.snapshot()
    state = tmp_path / "state"
    with SutIsolation({1}, {0, 1}, state, fs=h.fs()) as iso:
        # the restore file holds the originals while isolated
        doc = json.loads(restore_file(state).read_text())
        assert doc["workqueue_cpumask"] == "3" and doc["irqs"] == {"36": "0-1", "40": "1"}
        assert h.root.joinpath("sys/devices/virtual/workqueue/cpumask").read_text() == "1\n"
        assert h.root.joinpath("proc/irq/default_smp_affinity").read_text() == "1\n"
        assert h.root.joinpath("proc/irq/36/smp_affinity_list").read_text() == "0\n"
        assert h.root.joinpath("proc/irq/40/smp_affinity_list").read_text() == "0\n"
        assert h.aff[15] == {0} and h.aff[35] == {0}
        assert h.aff[22] == {1} and h.aff[500] == {0}  # bound; a user process's thread
        s = iso.summary()
        assert "rcu_preempt" in s["moved"] and "kcompactd0" in s["moved"]
        assert "process bash (500, 1 thread)" in s["moved"]
        why = {w["why"]: w["what"] for w in s["not_moved"]}
        assert why["per-CPU, bound to CPU 1"] == ["ksoftirqd/1"]
        assert any("kworker/u8:3" in v for k, v in why.items() if "EINVAL" in k)
        assert "ksoftirqd/0" not in str(s)  # never on the SUT's CPU
    assert h.snapshot() == before
    assert not restore_file(state).exists()
    assert iso.restore_problems == []


def test_kthreads_started_while_isolated_get_kthreadds_affinity_back(tmp_path):
    h = FakeHost(tmp_path / "root")
    with SutIsolation({1}, {0, 1}, tmp_path / "state", fs=h.fs()):
        assert h.aff[2] == {0}
        h.thread(1600, "kworker/R-new", {0})  # start 2600 ticks: after isolating
        h.thread(1601, "kworker/0:3", {0}, fixed=True)  # per-CPU 0 (EINVAL): left
    assert h.aff[2] == {0, 1} and h.aff[1600] == {0, 1} and h.aff[1601] == {0}
    assert h.aff[14] == {0}  # ksoftirqd/0 started before: untouched


def test_restores_when_the_body_raises(tmp_path):
    h = FakeHost(tmp_path / "root")
    before = h.snapshot()
    with pytest.raises(RuntimeError, match="boom"), \
            SutIsolation({1}, {0, 1}, tmp_path / "state", fs=h.fs()):
        assert h.aff[15] == {0}
        raise RuntimeError("boom")
    assert h.snapshot() == before
    assert not restore_file(tmp_path / "state").exists()


def test_restores_when_applying_fails_half_way(tmp_path):
    h = FakeHost(tmp_path / "root")
    before = h.snapshot()
    calls = []

    def setaff(pid: int, cpus: set[int]) -> None:
        calls.append(pid)
        if len(calls) == 2:
            raise KeyboardInterrupt  # Ctrl-C between two kthreads
        h.setaff(pid, cpus)

    fs = Sysfs(root=h.root, getaff=h.getaff, setaff=setaff)
    with pytest.raises(KeyboardInterrupt):
        SutIsolation({1}, {0, 1}, tmp_path / "state", fs=fs).__enter__()
    assert h.snapshot() == before


def test_no_cpu_left(tmp_path):
    h = FakeHost(tmp_path / "root")
    with pytest.raises(IsolationError, match="no CPU left"):
        SutIsolation({0, 1}, {0, 1}, tmp_path / "state", fs=h.fs()).__enter__()
    assert not restore_file(tmp_path / "state").exists()


def test_stale_file_is_restored_and_a_live_one_refused(tmp_path):
    h = FakeHost(tmp_path / "root")
    state = tmp_path / "state"
    before = h.snapshot()
    iso = SutIsolation({1}, {0, 1}, state, fs=h.fs())
    iso.__enter__()
    # a live owner (this process): a second isolation is refused, nothing restored
    with pytest.raises(IsolationBusy):
        SutIsolation({1}, {0, 1}, state, fs=h.fs()).__enter__()
    assert recover_stale(state, h.fs()) == []
    assert h.aff[15] == {0}
    # the owner "dies" (another pid in the file): the next start restores
    doc = json.loads(restore_file(state).read_text())
    doc["owner_pid"], doc["owner_start"] = 2**22 + 7, 1
    restore_file(state).write_text(json.dumps(doc))
    lines = recover_stale(state, h.fs())
    assert lines and "died with the SUT's CPUs isolated" in lines[0]
    assert h.snapshot() == before
    assert not restore_file(state).exists()


def test_restore_skips_a_reused_pid(tmp_path):
    h = FakeHost(tmp_path / "root")
    state = tmp_path / "state"
    with SutIsolation({1}, {0, 1}, state, fs=h.fs()):
        # kcompactd0 exits and its pid goes to another thread (another start time)
        (h.root / "proc/35/stat").write_text(_stat(35, "other", PF_KTHREAD, 9))
        h.aff[35] = {0}
    assert h.aff[35] == {0}  # left alone
    assert h.aff[15] == {0, 1}


# ---------------------------------------------------------------- for real

def _kthread(name: str) -> int | None:
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if (d / "comm").read_text().strip() == name:
                    return int(d.name)
            except OSError:
                continue
    return None


# serial: it isolates a CPU of the whole machine (kernel threads, IRQs, the
# workqueue mask), which the other tests' processes would feel
@needs_root
@pytest.mark.serial
def test_real_isolation_moves_and_restores(tmp_path):
    cpus = os.sched_getaffinity(0)
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to isolate from")
    wq = Path("/sys/devices/virtual/workqueue/cpumask")
    if not wq.exists():
        pytest.fail("no /sys/devices/virtual/workqueue/cpumask on this kernel")
    pid = next((p for n in ("kcompactd0", "rcu_preempt", "kswapd0", "khugepaged")
                if (p := _kthread(n)) is not None), None)
    assert pid is not None, "no movable kernel thread found"
    sut = {max(cpus)}
    wq_before, aff_before = wq.read_text(), os.sched_getaffinity(pid)
    irq_before = {p: p.read_text() for p in Path("/proc/irq").glob("*/smp_affinity_list")}
    state = tmp_path / "state"
    # another process (this test's child, not the isolating process) may run
    # on every CPU: moved off the SUT's, given its CPUs back
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        other_before = os.sched_getaffinity(other.pid)
        with pytest.raises(RuntimeError, match="body failed"), \
                SutIsolation(sut, set(cpus), state) as iso:
            assert not parse_cpu_mask(wq.read_text()) & sut
            if aff_before & sut and not aff_before <= sut:
                assert not os.sched_getaffinity(pid) & sut, iso.summary()
            assert os.sched_getaffinity(other.pid) == other_before - sut, iso.summary()
            assert os.sched_getaffinity(0) == cpus  # its own: the bench places itself
            assert json.loads(restore_file(state).read_text())["workqueue_cpumask"] == \
                wq_before.strip()
            time.sleep(0.05)
            raise RuntimeError("body failed")
        assert os.sched_getaffinity(other.pid) == other_before
    finally:
        other.kill()
        other.wait()
    assert wq.read_text() == wq_before
    assert os.sched_getaffinity(pid) == aff_before
    # every IRQ affinity we could change is back (a managed one never changed)
    for p, text in irq_before.items():
        if p.exists():
            assert p.read_text() == text, p
    assert not restore_file(state).exists()


# ------------------------------------------------- other threads on the SUT CPU

def test_others_in_window_counts_bound_and_unbound_on_the_sut_cpu():
    from turnout.measure.others import Candidate, others_in_window

    cands = [Candidate(22, 22, "ksoftirqd/1", True, True),
             Candidate(15, 15, "rcu_preempt", False, True),
             Candidate(90, 90, "kworker/u8:3", False, True), Candidate(7, 8, "cc1", False)]
    ms = 1_000_000
    samples = [
        (0.9, {22: (0, 0, -1), 15: (0, 0, 0), 90: (0, 0, 0)}),  # before the window
        (1.0, {22: (1 * ms, 1, -1), 15: (0, 0, 1), 90: (0, 0, 0)}),
        (1.1, {22: (2 * ms, 3, -1), 15: (8 * ms, 1, 1), 90: (5 * ms, 2, 0)}),  # u8:3 on CPU 0
        (1.2, {22: (2 * ms, 3, -1), 15: (9 * ms, 2, 0), 90: (5 * ms, 2, 0), 8: (0, 0, 1)}),
        (1.25, {22: (2 * ms, 3, -1), 15: (9 * ms, 2, 0), 8: (3 * ms, 1, 0)}),  # u8:3 exited
        (1.3, {22: (9 * ms, 4, -1), 15: (9 * ms, 2, 0)}),
    ]
    r = others_in_window(cands, samples, {1}, 1.0, 1.25)
    # ksoftirqd/1 1 ms; rcu_preempt 8 ms (on CPU 1 at both ends) + 1 ms (left at the
    # end); cc1, a user process, 3 ms (on CPU 1 at the interval's start)
    assert r["ms"] == 13.0 and r["kernel_ms"] == 10.0
    assert r["threads"][0] == ["rcu_preempt", 9.0, 2]
    assert [t[0] for t in r["kernel_threads"]] == ["rcu_preempt", "ksoftirqd/1"]
    assert r["max_interval"] == {"comm": "rcu_preempt", "ms": 8.0, "runs": 1}
    assert r["span_s"] == 0.25 and r["candidates"] == 4 and r["unbound"] == 3
    assert "why" in others_in_window(cands, samples, {1}, 1.01, 1.05)


@contextmanager
def _pinned_spinner(cpu: int) -> Iterator[subprocess.Popen[bytes]]:
    """A child process that pins itself to ``cpu`` (done when this yields)
    and spins there; killed on exit."""
    child = subprocess.Popen([sys.executable, "-c",
                              f"import os\nos.sched_setaffinity(0,{{{cpu}}})\n"
                              "while True: pass"])
    try:
        deadline = time.monotonic() + 20
        while os.sched_getaffinity(child.pid) != {cpu}:
            assert time.monotonic() < deadline, "the child did not pin itself in 20 s"
            time.sleep(0.01)
        yield child
    finally:
        child.kill()
        child.wait()


def test_others_sampler_sees_a_thread_pinned_to_a_cpu(tmp_path):
    """A real busy thread of a child process pinned to the 'SUT' CPU shows up."""
    from turnout.measure.others import OthersSampler, others_in_window

    cpu = max(os.sched_getaffinity(0))
    with _pinned_spinner(cpu) as child:
        # Pinned before the sampler lists its candidates.
        s = OthersSampler({cpu}, set(), every_s=0.05).start()
        t0 = time.monotonic()
        # It spins on that CPU, sharing it with whatever else runs there (on a
        # busy machine a small share): sample until it has run 10 ms there,
        # every thread ranked (not only the top five), with a deadline.
        deadline = t0 + 20
        while True:
            time.sleep(0.2)
            t1 = time.monotonic()
            r = others_in_window(s.cands, s.samples, {cpu}, t0, t1, top=len(s.cands))
            mine = [t for t in r.get("threads", []) if t[0].startswith("python")]
            if (mine and mine[0][1] > 10) or t1 > deadline:
                break
        s.stop()
    assert any(c.pid == child.pid for c in s.cands)
    assert mine and mine[0][1] > 10, r
    assert r["ms"] >= mine[0][1]


def test_turnout_sample_takes_the_other_threads_samples():
    """With turnout-sample built, the trial's CPU sampler samples the other
    threads too (no Python thread of its own): the same candidates, the
    same readings, the same figures."""
    from turnout import testpeers
    from turnout.measure.cpu import NativeCpuSampler, find_sampler
    from turnout.measure.others import OthersSampler, others_in_window

    binary = find_sampler()
    testpeers.need(binary, "turnout-sample is not built (scripts/setup.sh builds it)")
    assert binary is not None
    cpu = max(os.sched_getaffinity(0))

    def run_ns(pid: int) -> list[int]:
        with open(f"/proc/{pid}/schedstat") as f:
            return [int(x) for x in f.read().split()]

    with _pinned_spinner(cpu) as child:
        others = OthersSampler({cpu}, set(), every_s=0.02)
        t0 = time.monotonic()
        s = NativeCpuSampler(binary, {"sut": [os.getpid()]}, others=others).start()
        try:
            assert others.via == "turnout-sample" and s._proc is not None
            assert any(c.pid == child.pid for c in others.cands)
            # its first samples are taken (start returned once it said
            # ready), then the child runs 50 ms more on that CPU: all of
            # them between the first sample and the last (taken at stop)
            deadline = time.monotonic() + 20
            base = run_ns(child.pid)[0]
            while run_ns(child.pid)[0] - base < 50_000_000:
                assert time.monotonic() < deadline, "the child did not run 50 ms in 20 s"
                time.sleep(0.01)
        finally:
            s.stop()
        t1 = time.monotonic()
    assert not s.error and not others.error, (s.error, others.error)
    assert len(others.samples) >= 2
    # their own period: at least every_s apart (but the last, taken at stop)
    at = [t for t, _ in others.samples[:-1]]
    assert all(b - a >= others.every_s - 1e-6 for a, b in itertools.pairwise(at)), at
    r = others_in_window(others.cands, others.samples, {cpu}, t0, t1, top=len(others.cands))
    mine = [t for t in r["threads"] if t[0].startswith("python")]
    assert mine and mine[0][1] >= 50, r
    assert r["ms"] >= mine[0][1]


def test_sigterm_restores(tmp_path):
    """A run killed with SIGTERM while isolated puts everything back."""
    import signal

    h = FakeHost(tmp_path / "root")
    before = h.snapshot()
    state = tmp_path / "state"
    # the child isolates the fake tree (its affinities in a JSON file) and waits
    code = f"""
import json, sys, time
sys.path.insert(0, {str(Path(__file__).parent)!r})
from pathlib import Path
from test_isolate import FakeHost
from turnout.system.isolate import SutIsolation, Sysfs
aff = {{2: {{0, 1}}, 15: {{0, 1}}, 35: {{0, 1}}, 22: {{1}}, 90: {{0, 1}}, 14: {{0}}, 500: {{0, 1}}}}
out = Path({str(tmp_path / "aff.json")!r})
def setaff(pid, cpus):
    aff[pid] = set(cpus)
    out.write_text(json.dumps({{k: sorted(v) for k, v in aff.items()}}))
fs = Sysfs(root=Path({str(h.root)!r}), getaff=lambda p: set(aff[p]), setaff=setaff)
with SutIsolation({{1}}, {{0, 1}}, Path({str(state)!r}), fs=fs):
    print("isolated", flush=True)
    time.sleep(30)
"""
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert p.stdout is not None and p.stdout.readline().strip() == "isolated"
        assert (h.root / "sys/devices/virtual/workqueue/cpumask").read_text() == "1\n"
        assert restore_file(state).exists()
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=10) == 128 + signal.SIGTERM
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    aff = json.loads((tmp_path / "aff.json").read_text())
    assert aff["15"] == [0, 1] and aff["35"] == [0, 1]
    files = h.snapshot()["files"]
    assert files == before["files"]
    assert not restore_file(state).exists()


def _held_isolation_campaign(tmp_path: Path, value: str) -> tuple[Path, dict[str, object]]:
    """latency.toml with `isolate_sut_cpus = VALUE`, and a restore file that
    says this live process holds the isolation; returns the campaign file
    and the holder's record."""
    from turnout.testbed.state import pid_start_time, state_dir

    repo = Path(__file__).resolve().parents[2]
    toml = (repo / "campaigns/latency.toml").read_text().replace(
        "isolate_sut_cpus = true", f"isolate_sut_cpus = {value}")
    assert f"isolate_sut_cpus = {value}" in toml
    f = tmp_path / "c.toml"
    f.write_text(toml)
    d = state_dir()
    d.mkdir(parents=True)
    holder: dict[str, object] = {
        "owner_pid": os.getpid(), "owner_start": pid_start_time(os.getpid()),
        "sut_cpus": [1], "keep_cpus": [0], "kthreads": [], "irqs": {}}
    restore_file(d).write_text(json.dumps(holder))
    return f, holder


def _bench_run_beside_holder(f: Path, holder: dict[str, object], tmp_path: Path,
                             capsys) -> tuple[int, str]:
    """`turnout bench run F`; then the holder's file and the workqueue
    cpumask must be as they were. Returns the exit code and stderr."""
    from turnout.cli import main
    from turnout.testbed.state import state_dir

    wq = Path("/sys/devices/virtual/workqueue/cpumask")
    before = wq.read_text() if wq.exists() else None
    rc = main(["bench", "run", str(f), "--db", str(tmp_path / "r.db"), "--no-progress"])
    err = capsys.readouterr().err
    assert ("already isolates" in err) if os.geteuid() == 0 else ("needs root" in err)
    assert json.loads(restore_file(state_dir()).read_text()) == holder  # untouched
    if before is not None:
        assert wq.read_text() == before
    return rc, err


def test_bench_run_refuses_a_second_isolation(tmp_path, monkeypatch, capsys):
    """`turnout bench run` of a campaign with isolate_sut_cpus while another
    live run holds the isolation: exit 2 with the reason, nothing changed."""
    f, holder = _held_isolation_campaign(tmp_path, "true")
    rc, err = _bench_run_beside_holder(f, holder, tmp_path, capsys)
    assert rc == 2
    assert "isolate_sut_cpus:" in err


def test_bench_run_auto_runs_without_an_isolation_it_cannot_have(tmp_path, monkeypatch, capsys):
    """`isolate_sut_cpus = "auto"` (the default campaign's) when the
    isolation cannot be had (another live run holds it; or not root): the
    campaign runs without, says why once, and the holder's file and the
    machine stay as they were. `"auto"` parses; anything else is refused."""
    from turnout.campaign import cli as campaign_cli
    from turnout.campaign.spec import CampaignError, parse

    f, holder = _held_isolation_campaign(tmp_path, '"auto"')
    ran: list[object] = []

    def run_with(args, spec, bench):  # the campaign itself is not this test's
        ran.append(bench.isolation)
        return 0

    monkeypatch.setattr(campaign_cli, "_run_with", run_with)
    rc, err = _bench_run_beside_holder(f, holder, tmp_path, capsys)
    assert rc == 0 and ran == [None]
    assert err.count('isolate_sut_cpus = "auto": not isolating') == 1

    import tomllib

    doc = tomllib.loads(f.read_text())
    spec = parse(doc)
    assert spec.isolate_sut_cpus and spec.isolate_best_effort
    doc["campaign"]["isolate_sut_cpus"] = "yes"
    with pytest.raises(CampaignError, match='not true, false or "auto"'):
        parse(doc)
    doc["campaign"]["isolate_sut_cpus"] = True
    assert not parse(doc).isolate_best_effort
