#!/usr/bin/env python3
"""What a shared-memory (or AF_XDP) path costs a switch per frame, on the
bench's own set-up: the testbed, ports, tester and placement of
``make bench``'s default campaign (campaigns/default.toml, through
``turnout.bench.RealBench``: the same ``scenarios.build``, SUT adapters and
``GenMeasurer``), one cell at a time, with the switch's process watched
while the tester runs.

Modes:

- ``native`` (default): the switch as the bench runs it. Over a trial at
  ``--rate`` (0: as fast as the tester sends, which is about the R+ of a
  tester-bound cell) it reads the switch's own counters before and after
  (turnoutd: worker packets, batches, busy cycles, sleeps, naps, gaps,
  wake-ups, the wake-up policy's state at the end — regime, why, gap —
  and every port's backend counters such as memif ``tx_kicks``,
  AF_XDP ``rx_wakeups``/``tx_kicks``; testpmd: ``show fwd stats all``
  with ``--record-burst-stats``), and counts the system calls of the
  switch's data-path thread (the one pinned to the SUT's CPU: turnoutd's
  worker, testpmd's forwarding lcore) in the kernel with ``perf stat`` on
  the syscall tracepoints (no ptrace, so batching is not disturbed), per
  frame and per batch.
- ``callgrind``: the switch runs under valgrind's callgrind (testpmd with
  ``--no-huge``); instructions are collected only while traffic flows
  (``callgrind_control -i on/off``) and divided by the frames the switch
  counted in that window. The switch then runs ~50x slower than the
  tester, so it is saturated: full batches (turnoutd's ``--batch``,
  testpmd's 32), no empty polls — the per-frame cost at capacity. Two
  turnoutd batch sizes (256 and 32) separate the fixed cost of a batch
  from the cost of a frame: Ir/frame = per_frame + per_batch / batch.
  The count is user space only (the kernel's side of a system call is not
  in it). It prints the data-path thread's instructions per frame, split
  by function group (turnoutd) or shared object (testpmd).

Paths (the default campaign's cells): ``p2v`` (tester AF_XDP on a veth →
switch → memif → tester), ``v2v`` (memif both ends), ``v2v-vhost``
(turnout-gen vhost-user frontends), ``nvsn`` (2 memif pairs), ``chain``
(tester → switch → turnout-gen fwd VNF over memif → switch → tester),
``p2p`` (AF_XDP on veths).

    cargo build --release -p turnoutd -p turnout-gen
    sudo .venv/bin/python scripts/bench/path_cost.py v2v --sut turnoutd --size 64
    sudo .venv/bin/python scripts/bench/path_cost.py v2v --sut testpmd --mode callgrind
    sudo .venv/bin/python scripts/bench/path_cost.py p2v --mode callgrind --batch 32 \\
        --binary /path/to/other/turnoutd

Needs root, dpdk-testpmd, valgrind (callgrind mode) and perf (native mode).
Everything it creates is removed at the end (the bench's Testbed), also on
failure. Instruction counts do not depend on the host's load; the native
mode's batch sizes and system calls per frame do (a preempted switch finds
bigger batches): say the load with the figures.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))

from turnout.bench import RealBench, campaign_layout  # noqa: E402
from turnout.campaign.spec import load  # noqa: E402
from turnout.measure.cpu import pinned_threads  # noqa: E402
from turnout.portkind import PortKind, PortKindError  # noqa: E402
from turnout.scenarios import Point  # noqa: E402
from turnout.sut import testpmd as testpmd_mod  # noqa: E402
from turnout.sut.turnoutd import rpc  # noqa: E402

PATHS: dict[str, dict[str, Any]] = {
    "p2v": {"scenario": "p2v"},
    "v2v": {"scenario": "v2v"},
    "v2v-vhost": {"scenario": "v2v", "virtual_port": "vhost-user"},
    "nvsn": {"scenario": "nvsn", "pairs": 2},
    "chain": {"scenario": "loopback", "vnfs": 1},
    "p2p": {"scenario": "p2p"},
}

#: system calls counted one by one (all of them are counted as well)
SYSCALLS = ("sendto", "recvfrom", "write", "read", "epoll_wait", "epoll_pwait", "poll",
            "ppoll", "nanosleep", "clock_nanosleep", "futex", "sched_yield", "getsockopt",
            "ioctl", "sendmsg", "recvmsg")

def wrapper(path: Path, target: str, prefix: list[str], append: list[str]) -> Path:
    """An executable that runs ``prefix target "$@" append`` (``--version``
    straight through)."""
    pre = " ".join(f"'{a}'" for a in prefix)
    app = " ".join(f"'{a}'" for a in append)
    path.write_text("#!/bin/sh\n"
                    f'[ "$1" = --version ] && exec \'{target}\' "$@"\n'
                    f"exec {pre} '{target}' \"$@\" {app}\n")
    path.chmod(0o755)
    return path


def threads_on(pid: int, cpus: list[int]) -> list[int]:
    return pinned_threads([pid], cpus)


@contextlib.contextmanager
def perf_syscalls(tid: int, out: Path) -> Iterator[None]:
    """Counts the system calls of thread ``tid`` while the block runs."""
    ev = ["raw_syscalls:sys_enter"] + [f"syscalls:sys_enter_{s}" for s in SYSCALLS]
    p = subprocess.Popen(["perf", "stat", "-x,", "-e", ",".join(ev), "-t", str(tid),
                          "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        yield
    finally:
        p.send_signal(signal.SIGINT)
        p.wait(timeout=10)


def read_perf(out: Path) -> dict[str, int]:
    sc: dict[str, int] = {}
    for line in out.read_text().splitlines():
        f = line.split(",")
        if len(f) > 2 and f[0].replace(".", "").isdigit():
            name = f[2].split(":")[-1].replace("sys_enter_", "")
            sc["all" if name == "sys_enter" else name] = int(float(f[0]))
    return sc


def turnoutd_stats(adapter: Any) -> dict[str, Any]:
    return rpc(adapter.sock, "stats", timeout_s=30.0)


def stats_delta(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Worker and port counters of b minus a (turnoutd's ``stats``)."""
    w = {}
    for k in ("packets", "batches", "busy_cycles", "sleeps", "wakeups", "naps", "gaps",
              "sleep_cpu_ns",
              "asleep_ns"):
        w[k] = sum(int(x.get(k, 0)) for x in b["workers"]) - sum(
            int(x.get(k, 0)) for x in a["workers"])
    ports = {}
    pa = {p["name"]: p for p in a["ports"]}
    for p in b["ports"]:
        q = pa.get(p["name"], {})
        d = {k: int(p.get(k, 0)) - int(q.get(k, 0)) for k in ("rx_packets", "tx_packets")}
        d["drops"] = {k: int(v) - int(q.get("drops", {}).get(k, 0))
                      for k, v in p.get("drops", {}).items()
                      if int(v) - int(q.get("drops", {}).get(k, 0))}
        d["backend"] = {k: int(v) - int(q.get("backend", {}).get(k, 0))
                        for k, v in p.get("backend", {}).items()
                        if isinstance(v, int) and int(v) - int(q.get("backend", {}).get(k, 0))}
        ports[p["name"]] = d
    # the wake-up policy's state at the end (regime, why, gap): what the
    # batch sizes above were taken under
    return {"worker": w, "policy": [x.get("policy", {}) for x in b["workers"]], "ports": ports}


_BURSTS = re.compile(r"RX-bursts\s*:\s*(\d+)\s*\[([^\]]*)\]")


def testpmd_stats(adapter: Any, timeout_s: float = 5.0) -> str:
    """The text of ``show fwd stats all`` (its answer, as printed)."""
    p = adapter.proc
    before = adapter.log.stat().st_size
    p.stdin.write(b"show fwd stats all\n")
    p.stdin.flush()
    deadline = time.monotonic() + timeout_s
    text = ""
    while time.monotonic() < deadline:
        with open(adapter.log, "rb") as f:
            f.seek(before)
            text = f.read().decode(errors="replace")
        if re.search(r"Accumulated forward statistics[^\n]*\n(?:[^\n]*\n)*?\s*\+{30,}\s*\n",
                     text):
            break
        time.sleep(0.05)
    return text


def annotate(cg: Path, inclusive: bool) -> dict[str, int]:
    """Function (or object) name -> instructions, from callgrind_annotate."""
    out = subprocess.run(["callgrind_annotate", f"--inclusive={'yes' if inclusive else 'no'}",
                          "--threshold=100", "--auto=no", str(cg)],
                         capture_output=True, text=True, check=True).stdout
    res: dict[str, int] = {}
    for line in out.splitlines():
        m = re.match(r"^\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*?)\s*$", line)
        if not m:
            continue
        n = int(m.group(1).replace(",", ""))
        name = re.sub(r"^(\?\?\?|[^ ]*?\.(rs|c|h|S|cc)):", "", m.group(2), count=1)
        if not inclusive:
            name = re.sub(r" \[[^\]]*\]$", "", name)
        # "file:function": the function's lines in one source file (code
        # inlined from other files is listed under those): its inclusive
        # count is the sum over its files
        res[name] = res.get(name, 0) + n
    return res


def cg_total(cg: Path) -> int:
    for line in cg.read_text(errors="replace").splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    return 0


def testpmd_sample(ad: Any, timeout_s: float = 5.0) -> tuple[int, list[int]]:
    """testpmd's frames received and its polls (RX bursts, empty ones
    included) per port so far."""
    text = testpmd_stats(ad, timeout_s)
    m = re.findall(r"RX-packets:\s*(\d+)", text)
    return int(m[-1]) if m else 0, [int(x[0]) for x in _BURSTS.findall(text)]


@contextlib.contextmanager
def in_traffic(meas: Any, window: float, rate: float,
               flowing: Any) -> Iterator[None]:
    """Runs a trial in the background and enters once frames flow
    (``flowing()`` grew between two looks); leaves after the trial."""
    import threading

    t = threading.Thread(target=meas.measure, args=(window, rate))
    t.start()
    t0 = time.monotonic()
    prev = flowing()
    print(f"[{time.monotonic() - t0:.1f} s] switch counted {prev} frames", file=sys.stderr)
    while t.is_alive() and time.monotonic() - t0 < window / 2:
        time.sleep(0.5)
        cur = flowing()
        print(f"[{time.monotonic() - t0:.1f} s] switch counted {cur} frames", file=sys.stderr)
        if cur > prev > 0:
            break
        prev = cur
    try:
        yield
    finally:
        t.join()


def native(a: argparse.Namespace, ad: Any, meas: Any, tid: int, window: float, tmp: Path,
           res: dict[str, Any]) -> None:
    """System calls of the data-path thread and the switch's own counters
    over a trial at the bench's rate (see the module doc); fills ``res``."""
    out = tmp / "perf.csv"
    if a.sut == "turnoutd":
        before = turnoutd_stats(ad)
        with perf_syscalls(tid, out):
            counts = meas.measure(window, a.rate)
        after = turnoutd_stats(ad)
        d = stats_delta(before, after)
        res["turnoutd"] = d
        res["tester"] = {"sent_pps": counts.sent / max(counts.duration_s, 1e-9),
                         "received": counts.received, "sent": counts.sent,
                         "lost": counts.lost, "unsent": counts.unsent,
                         "busy_cycles_per_frame": counts.busy_cycles_per_frame}
        frames = d["worker"]["packets"]
        batches = d["worker"]["batches"]
        res["busy_cycles_per_frame"] = d["worker"]["busy_cycles"] / max(frames, 1)
    else:
        # its counters reset when a memif peer connects: read them while
        # the tester is connected, syscalls counted over the same span
        with in_traffic(meas, window, a.rate, lambda: testpmd_sample(ad)[0]):
            f0, p0 = testpmd_sample(ad)
            with perf_syscalls(tid, out):
                time.sleep(window / 2)
            f1, p1 = testpmd_sample(ad)
        frames = f1 - f0
        polls = [y - x for x, y in zip(p0, p1, strict=False)]
        res["polls"] = polls
        # bursts that brought frames are not counted apart (only the two
        # commonest sizes, in %): per burst = per poll of the loaded port
        batches = polls[0] if polls else 0
    sc = read_perf(out)
    res["syscalls"] = sc
    res["frames"] = frames
    res["batches"] = batches
    res["frames_per_batch"] = frames / max(batches, 1)
    res["per_frame"] = {k: v / max(frames, 1) for k, v in sc.items() if v}
    res["per_batch"] = {k: v / max(batches, 1) for k, v in sc.items() if v}


def ctl(*args: str) -> None:
    subprocess.run(["callgrind_control", *args], check=True, capture_output=True, timeout=300)


def thread_profile(files: list[Path], turnoutd: bool) -> tuple[int, Path]:
    """The data-path thread's profile among one dump's per-thread files:
    turnoutd's worker (fabric::worker::run), testpmd's busiest thread but
    its main one (its forwarding lcore). testpmd's main thread runs the
    command line (``cmdline_*``) and can outweigh a forwarding lcore held to
    a low rate by its tester (an AF_XDP port's set-up work lands there)."""
    def wanted(f: Path) -> bool:
        text = f.read_text(errors="replace")
        return "worker::run" in text if turnoutd else "cmdline_parse" not in text

    per = sorted(((cg_total(f), f) for f in files if wanted(f)), reverse=True)
    if not per:
        raise SystemExit(f"no profile of the data-path thread in {files}")
    return per[0]


def callgrind(a: argparse.Namespace, ad: Any, meas: Any, pid: int, window: float,
              out: Path, res: dict[str, Any]) -> None:
    """Instructions per frame of the switch's data-path thread while the
    tester saturates it (see the module doc); fills ``res``."""
    if a.sut == "turnoutd":
        def sample() -> tuple[int, int, list[int]]:
            w = turnoutd_stats(ad)["workers"]
            return (sum(int(x["packets"]) for x in w), sum(int(x["batches"]) for x in w), [])

        # The whole trial, from idle to idle: frames exactly as the worker
        # counted them. In between, when idle, it sleeps (adaptive
        # wake-up): a few thousand instructions a sleep.
        time.sleep(1.0)
        ctl("-i", "on", str(pid))
        f0 = sample()
        meas.measure(window, a.rate)
        time.sleep(1.0)
        f1 = sample()
        ctl("-i", "off", str(pid))
        st = turnoutd_stats(ad)
        res["drops"] = {p["name"]: {k: v for k, v in p.get("drops", {}).items() if v}
                        for p in st["ports"]}
        ctl("-d", str(pid))
        total, prof = thread_profile(sorted(out.parent.glob(out.name + ".1-*")), True)
        frames, batches = f1[0] - f0[0], f1[1] - f0[1]
        work = total
    else:
        def sample() -> tuple[int, int, list[int]]:
            f, b = testpmd_sample(ad, 120.0)
            return f, sum(b), b

        # testpmd polls every port all the time. First, what an empty poll
        # costs: idle, no tester (a poll of an unconnected port returns a
        # little earlier than an empty one of a connected port; at
        # saturation there is about one empty poll per 32 frames, the
        # reverse port's, so the difference is about 1 Ir per frame).
        ctl("-i", "on", str(pid))
        i0 = sample()
        time.sleep(4.0)
        i1 = sample()
        ctl("-i", "off", str(pid))
        ctl("-d", str(pid))
        idle, _ = thread_profile(sorted(out.parent.glob(out.name + ".1-*")), False)
        per_poll = idle / max(i1[1] - i0[1], 1)
        res["ir_per_empty_poll"] = per_poll
        # Then a window while traffic flows; its counters reset when a memif
        # peer connects, so they are read inside the window (a few % off).
        with in_traffic(meas, window, a.rate, lambda: sample()[0]):
            ctl("-i", "on", str(pid))
            f0 = sample()
            time.sleep(window / 3)
            f1 = sample()
            ctl("-i", "off", str(pid))
            ctl("-d", str(pid))
        total, prof = thread_profile(sorted(out.parent.glob(out.name + ".2-*")), False)
        frames = f1[0] - f0[0]
        # polls that brought nothing: the reverse port's (one-way traffic)
        # and the loaded port's while the tester was descheduled; a poll
        # that brought frames brought a full burst (saturated)
        polls = [x1 - x0 for x0, x1 in zip(f0[2], f1[2], strict=False)]
        full = -(-frames // 32)
        empty = max(sum(polls) - full, 0)
        res["polls"] = polls
        res["empty_polls"] = empty
        batches = full
        work = total - empty * per_poll
    if frames <= 0:
        raise SystemExit(f"no frames in the window ({frames})")
    res.update(frames=frames, batches=batches, ir_thread=total, profile=str(prof),
               ir_per_frame=work / frames, frames_per_batch=frames / max(batches, 1))
    excl = annotate(prof, False)
    res["top"] = sorted(((round(v / frames, 1), k) for k, v in excl.items()), reverse=True)[:25]
    if a.keep:
        Path(a.keep).mkdir(parents=True, exist_ok=True)
        for f in out.parent.glob(out.name + "*"):
            shutil.copy(f, Path(a.keep) / f"{a.path}-{a.sut}-{a.size}-b{a.batch}-{f.name}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path", choices=sorted(PATHS))
    ap.add_argument("--sut", default="turnoutd", choices=["turnoutd", "testpmd", "ovs-dpdk"])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--mode", default="native", choices=["native", "callgrind"])
    ap.add_argument("--rate", type=float, default=0.0,
                    help="aggregate pps (native; 0 = as fast as the tester sends)")
    ap.add_argument("--window-s", type=float, default=0.0,
                    help="traffic window (default 3 s native, 20 s callgrind)")
    ap.add_argument("--batch", type=int, default=256, help="turnoutd's batch size")
    ap.add_argument("--binary", default="", help="another turnoutd build")
    ap.add_argument("--wakeup", default="", help="turnoutd wakeup (adaptive | poll)")
    ap.add_argument("--ring", type=int, default=-1,
                    help="the tester's memif ring size (vhost-user: queue size); default "
                         "the bench's, 16384 (32768) in callgrind mode, so that a switch "
                         "under callgrind is never left without frames while the tester "
                         "is descheduled; 0: the bench's")
    ap.add_argument("--keep", default="",
                    help="copy the callgrind file(s) here (turnoutd's with --dump-instr=yes: "
                         "per instruction)")
    ap.add_argument("--json", default="", help="append the result as a JSON line here")
    a = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("needs root (namespaces, veths)")

    spec = load(REPO / "campaigns" / "default.toml")
    point = Point(frame_size_b=a.size, **PATHS[a.path])
    tmp = Path(tempfile.mkdtemp(prefix=f"path-cost-{os.getpid()}-"))
    # removed at exit, also when the run or the teardown fails
    atexit.register(shutil.rmtree, tmp, True)
    cg_out = tmp / "cg.out"
    opts = spec.sut_options.setdefault(a.sut, {})
    if a.sut == "turnoutd":
        opts["batch"] = a.batch
        if a.wakeup:
            opts["wakeup"] = a.wakeup
        target = a.binary or str(REPO / "target" / "release" / "turnoutd")
        if a.mode == "callgrind":
            opts["binary"] = str(wrapper(tmp / "turnoutd", target, [
                "valgrind", "--tool=callgrind", "--instr-atstart=no", "--separate-threads=yes",
                *(["--dump-instr=yes"] if a.keep else []),
                f"--callgrind-out-file={cg_out}"], []))
        elif a.binary:
            opts["binary"] = a.binary
    elif a.sut == "testpmd":
        real = shutil.which("dpdk-testpmd") or "dpdk-testpmd"
        prefix = []
        if a.mode == "callgrind":
            opts["hugepages"] = 0
            # --fair-sched: its interrupt thread (the memif handshake) gets
            # turns next to the busy-polling lcore, before the tester's
            # handshake times out (3 s)
            prefix = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--fair-sched=yes",
                      "--separate-threads=yes", f"--callgrind-out-file={cg_out}"]
            testpmd_mod.START_TIMEOUT_S = 600.0
        testpmd_mod.BINARY = str(wrapper(tmp / "dpdk-testpmd", real, prefix,
                                         ["--record-burst-stats"]))
    window = a.window_s or (20.0 if a.mode == "callgrind" else 3.0)
    layout = campaign_layout(spec)
    sut_cpus = list(layout.sut)
    bench = RealBench(spec=spec)
    res: dict[str, Any] = {"path": a.path, "sut": a.sut, "size": a.size, "mode": a.mode,
                           "batch": a.batch if a.sut == "turnoutd" else 32,
                           "binary": a.binary or "", "load": os.getloadavg()[0]}
    with bench.session(a.sut, point, spec) as sess:
        ad = sess.adapter
        pid = ad.pids()[0]
        meas = sess.measurer
        if a.mode == "callgrind":
            meas.wait_peer_s = 60.0
            meas.timeout_margin_s = 120.0
            time.sleep(3.0)
        ring = a.ring if a.ring >= 0 else (16384 if a.mode == "callgrind" else 0)
        if ring:
            for st in meas.streams:
                for attr in ("tx_port", "rx_port"):
                    spec_ = getattr(st, attr)
                    # the workbench writes vhost_user:, older specs vhost-user:
                    try:
                        kind: PortKind | None = PortKind.parse(spec_.partition(":")[0])
                    except PortKindError:
                        kind = None
                    if kind is PortKind.MEMIF:
                        setattr(st, attr, f"{spec_},ring-size={min(ring, 16384)}")
                    elif kind is PortKind.VHOST_USER:
                        setattr(st, attr, f"{spec_},queue-size={min(2 * ring, 32768)}")
        res["tester_ring"] = ring
        # a first trial: the peers connect, rings fill, code is warm (not
        # testpmd under valgrind: DPDK 22.11's memif server panics in its
        # interrupt thread at a reconnect more often than not there)
        try:
            if not (a.sut == "testpmd" and a.mode == "callgrind"):
                meas.measure(1.0, a.rate)
        except Exception:
            if a.sut == "testpmd":
                print(ad.log.read_text(errors="replace")[-3000:], file=sys.stderr)
            raise
        tids = threads_on(pid, sut_cpus)
        if not tids:
            raise SystemExit(f"no thread of {a.sut} ({pid}) pinned to CPUs {sut_cpus}")
        res["threads"] = tids
        try:
            if a.mode == "native":
                native(a, ad, meas, tids[0], window, tmp, res)
            else:
                callgrind(a, ad, meas, pid, window, tmp / "cg.out", res)
        except Exception:
            if a.sut == "testpmd":
                print(f"testpmd ({ad.proc.poll()}):", ad.log.read_text(errors="replace")[-3000:],
                      file=sys.stderr)
            raise
        # The result before the teardown: a switch under valgrind on a busy
        # machine may take longer to stop than the testbed waits, and the
        # teardown's error must not lose the measurement.
        print(json.dumps(res, indent=1, default=str), flush=True)
        if a.json:
            with open(a.json, "a") as f:
                f.write(json.dumps(res, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
