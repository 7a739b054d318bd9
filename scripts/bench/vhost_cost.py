#!/usr/bin/env python3
"""CPU cost per frame of turnout-gen's vhost-user frontend, as a
figure that a loaded host moves less than a rate: turnout-gen receives from
(or sends to) a testpmd ``net_vhost`` backend in txonly (rxonly) mode, set
up as in bench_max_rate.py (testpmd forwarding on CPU 1, turnout-gen on
CPU 0, 1024-entry rings), and over a window we read

- frames: testpmd's TX (receive) or RX (send) counter;
- CPU time of the turnout-gen process, user and system, per frame
  (``/proc/PID/stat``, 10 ms ticks) and the total from schedstat (ns);
- kicks per frame (eventfd writes to the backend: system calls), from the
  frontend's ``kicks`` counter in turnout-gen's report;
- with ``--callgrind``: user-space instructions per frame, counted by
  valgrind's callgrind over the window only (``callgrind_control -i``).
  The receiver then runs ~50x slower, so its bursts are full: the figure
  is the receiver-bound cost, independent of the host's load. Kernel
  work (the kicks) is not in it.
- with ``--callgrind-backend``: the same count for the testpmd
  ``net_vhost`` backend instead (the client under test runs natively and
  keeps the backend's ring full): what the backend pays per frame for
  what the client posts (descriptor chains, features, notifications).
  ``instr_vhost`` is then the backend's vhost library (librte_vhost).
  Both include the backend's empty polls: when the client is descheduled
  (a loaded host) the slowed backend drains the ring and polls on, so
  compare runs taken together.
- the feature words negotiated (the backend's "negotiated Virtio
  features" log line), printed once per client.

GEN ``testpmd`` runs testpmd's ``net_virtio_user`` (txonly when sending,
rxonly when receiving, forwarding lcore on CPU 0) instead of turnout-gen,
under callgrind too (``--callgrind``: its counts include testpmd's main
and interrupt threads, which mostly sleep; ``instr_frontend`` is then its
``virtio_*`` functions).

A poll-mode receiver that keeps up spins between bursts, so its CPU time
per frame is an upper bound; the instruction count is what to compare
between builds. Several binaries may be given; runs are interleaved.

With ``--queues N`` both ends have N queue pairs (testpmd ``--rxq/--txq
N``, one forwarding lcore polling them all) and turnout-gen sends N flows
(flow f on queue f mod N).

usage: vhost_cost.py [--dir receive|send] [--size 64] [--window-s 4]
                     [--runs 3] [--queues 1] [--callgrind | --callgrind-backend]
                     GEN[@PORT-OPTIONS]|testpmd [GEN...]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_max_rate import Testpmd

PID = os.getpid()
TICK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid: int) -> tuple[float, float, float]:
    """(user s, system s, schedstat s over every thread) of a process."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ut, st = int(f[11]) / TICK, int(f[12]) / TICK
    run = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError, ValueError):
            run += int((t / "schedstat").read_text().split()[0])
    return ut, st, run / 1e9


FEATURES: dict[str, str] = {}


def one(gen: str, direction: str, size: int, window_s: float, warm_s: float,
        callgrind: bool, n: int, backend: bool = False, queues: int = 1) -> dict[str, float]:
    """One run; with ``backend`` the testpmd backend runs under callgrind
    (and ``callgrind`` is false). ``queues``: queue pairs of both ends."""
    prefix = f"vhc{PID}s{n}"
    sock = f"/tmp/{prefix}.sock"
    srv_out = Path(f"/tmp/{prefix}.backend.callgrind")
    st = 120 if backend else 5  # testpmd answers slowly under valgrind
    srv = Testpmd(prefix, "0,1", 0, [f"net_vhost0,iface={sock},queues={queues}"],
                  extra=[f"--txpkts={size}", f"--rxq={queues}", f"--txq={queues}"],
                  # the "negotiated Virtio features" line is a debug log
                  eal=["--log-level=lib.vhost.config:debug"],
                  wrap=(["valgrind", "--tool=callgrind", "--instr-atstart=no",
                         f"--callgrind-out-file={srv_out}"] if backend else None))
    gp = None
    pmd = None
    out_file = Path(f"/tmp/{prefix}.callgrind")
    try:
        srv._read_until(r"testpmd> ", 600 if backend else 60)
        srv.cmd("set fwd " + ("txonly" if direction == "receive" else "rxonly"))
        srv.cmd("start")
        # Under a callgrind backend testpmd answers a stats request in
        # seconds to minutes: the client runs until stopped (SIGINT).
        total = 3600 if backend else warm_s + window_s + 2
        role = (["rx"] if direction == "receive"
                else ["tx", "--size", str(size), "--cooldown-s", "0",
                      # flow f on queue f mod queues: every queue used
                      "--flows", str(max(queues, 1))])
        # GEN may carry extra port options: PATH@max-frame=1518
        path, _, opts = gen.partition("@")
        spec = (f"vhost_user:{sock},queue-size=1024,queues={queues}"
                + (f",{opts}" if opts else ""))
        cmd = [path, *role, "--duration-s", str(total), "--port", spec, "--cpu", "0",
               # a backend under valgrind takes long to answer the set-up
               "--wait-peer-s", "300" if backend else "10"]
        if callgrind:
            cmd = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                   f"--callgrind-out-file={out_file}", *cmd]
        if path == "testpmd":
            # testpmd's virtio-user on the same path as the reference
            # (forwarding lcore on CPU 0, as in bench_max_rate.py)
            wrap = (["valgrind", "--tool=callgrind", "--instr-atstart=no",
                     f"--callgrind-out-file={out_file}"] if callgrind else None)
            pmd = Testpmd(f"vhc{PID}c{n}", "0,1", 1,
                          [f"net_virtio_user0,path={sock},queues={queues},queue_size=1024"],
                          extra=[f"--txpkts={size}", f"--rxq={queues}", f"--txq={queues}"],
                          wrap=wrap)
            pmd._read_until(r"testpmd> ", 600 if callgrind else 60)
            pmd.cmd("set fwd " + ("txonly" if direction == "send" else "rxonly"))
            pmd.cmd("start")
            gpid = pmd.p.pid
        else:
            gp = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
            gpid = gp.pid
        time.sleep(warm_s)
        # Under valgrind on a loaded host turnout-gen may take longer than
        # the warm-up to connect: wait until frames flow.
        end = time.monotonic() + 60
        while time.monotonic() < end:
            with srv.lock:  # (stats() clears the buffer)
                m = re.search(r"negotiated Virtio features: (0x[0-9a-f]+)", srv.buf)
            if m and gen not in FEATURES:
                FEATURES[gen] = m.group(1)
            _, rx, tx = srv.stats(st)
            if (tx if direction == "receive" else rx) > 0:
                break
            time.sleep(0.5)
        time.sleep(1.0 if callgrind or backend else 0.0)
        if callgrind:
            subprocess.run(["callgrind_control", "-i", "on", str(gpid)], check=True,
                           capture_output=True)
        if backend:
            subprocess.run(["callgrind_control", "-i", "on", str(srv.p.pid)], check=True,
                           capture_output=True)
        _, rx0, tx0 = srv.stats(st)
        c0 = proc_cpu(gpid)
        time.sleep(window_s)
        _, rx1, tx1 = srv.stats(st)
        c1 = proc_cpu(gpid)
        if callgrind:
            subprocess.run(["callgrind_control", "-i", "off", str(gpid)], check=True,
                           capture_output=True)
        if backend:
            subprocess.run(["callgrind_control", "-i", "off", str(srv.p.pid)], check=True,
                           capture_output=True)
        frames = (tx1 - tx0) if direction == "receive" else (rx1 - rx0)
        if pmd:
            # callgrind writes its profile when testpmd exits
            pmd.close(timeout=300 if callgrind else 5)
            counters: dict[str, int] = {}
            all_frames = 1
            if frames <= 0:
                raise RuntimeError("no frames in the window (testpmd)")
        else:
            if backend:
                gp.send_signal(signal.SIGINT)
            out, err = gp.communicate(timeout=120 if callgrind else 30)
            if frames <= 0:
                raise RuntimeError(f"no frames in the window; turnout-gen said {err[-400:]}")
            doc = json.loads(out)
            sec = doc["rx"] if direction == "receive" else doc["tx"]
            counters = {}
            for p in doc.get("ports", []):
                counters.update(p.get("counters", {}))
            all_frames = sec["packets"] + sec.get("foreign", 0)
        r = {
            "mpps": frames / window_s / 1e6,
            "user_ns": (c1[0] - c0[0]) * 1e9 / frames,
            "sys_ns": (c1[1] - c0[1]) * 1e9 / frames,
            "cpu_ns": (c1[2] - c0[2]) * 1e9 / frames,
            "kicks_per_kframe": 1000 * counters.get("kicks", 0) / max(all_frames, 1),
        }
        if callgrind:
            text = out_file.read_text()
            m = re.search(r"^totals:\s+(\d+)", text, re.M)
            r["instr"] = int(m.group(1)) / frames if m else float("nan")
            # The frontend's own share: every function (with what was
            # inlined into it) of its receive or transmit queue.
            ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no",
                                  "--threshold=100", str(out_file)],
                                 capture_output=True, text=True).stdout
            q = ("virtio_" if pmd else
                 "FrontendRx" if direction == "receive" else "FrontendT")
            own = sum(int(x.group(1).replace(",", "")) for x in
                      re.finditer(r"^\s*([\d,]+) \([^)]*\)\s+\S*?:.*" + q, ann, re.M))
            r["instr_frontend"] = own / frames
        if backend:
            # callgrind writes the backend's profile when testpmd exits
            srv.close(timeout=300)
            text = srv_out.read_text()
            m = re.search(r"^totals:\s+(\d+)", text, re.M)
            r["instr_backend"] = int(m.group(1)) / frames if m else float("nan")
            ann = subprocess.run(["callgrind_annotate", "--inclusive=no", "--auto=no",
                                  "--threshold=100", str(srv_out)],
                                 capture_output=True, text=True).stdout
            # (the DPDK libraries are stripped: by object, not function)
            own = sum(int(x.group(1).replace(",", "")) for x in re.finditer(
                r"^\s*([\d,]+) \([^)]*\)\s+.*\[\S*librte_vhost\.so[^]]*\]\s*$", ann, re.M))
            r["instr_vhost"] = own / frames
        return r
    finally:
        if gp and gp.poll() is None:
            gp.kill()
            gp.wait()
        if pmd:
            pmd.close()
        srv.close()
        Path(sock).unlink(missing_ok=True)
        if not os.environ.get("VHC_KEEP"):
            out_file.unlink(missing_ok=True)
            srv_out.unlink(missing_ok=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gens", nargs="+")
    ap.add_argument("--dir", choices=["receive", "send"], default="receive")
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--window-s", type=float, default=4.0)
    ap.add_argument("--warm-s", type=float, default=1.5)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument("--queues", type=int, default=1,
                    help="queue pairs of the backend and the client (flows: as many)")
    ap.add_argument("--callgrind-backend", action="store_true",
                    help="count the testpmd net_vhost backend's instructions instead")
    a = ap.parse_args()
    if a.callgrind and a.callgrind_backend:
        ap.error("--callgrind and --callgrind-backend: one at a time")
    if os.geteuid() != 0 or not shutil.which("dpdk-testpmd"):
        print("needs root and dpdk-testpmd", file=sys.stderr)
        return 2
    res: dict[str, list[dict[str, float]]] = {g: [] for g in a.gens}
    n = 0
    for _ in range(a.runs):
        for g in a.gens:  # interleaved
            n += 1
            slow = a.callgrind or a.callgrind_backend
            r = one(g, a.dir, a.size, a.window_s, 3.0 if slow else a.warm_s,
                    a.callgrind, n, a.callgrind_backend, a.queues)
            res[g].append(r)
            print(f"  {g}: " + " ".join(f"{k}={v:.3f}" for k, v in r.items()), file=sys.stderr)
    load = os.getloadavg()
    print(f"{a.dir} {a.size} B, {a.queues} queue pair(s), {a.runs} interleaved runs, medians; "
          f"load {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}")
    for g, f in FEATURES.items():
        print(f"virtio features negotiated with {g}: {f} "
              f"(bits {', '.join(str(b) for b in range(64) if int(f, 16) >> b & 1)})")
    keys = list(next(iter(res.values()))[0].keys())
    print(f"{'binary':40} " + " ".join(f"{k:>16}" for k in keys))
    for g, rs in res.items():
        print(f"{g[-40:]:40} " + " ".join(
            f"{statistics.median(r[k] for r in rs):16.2f}" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
