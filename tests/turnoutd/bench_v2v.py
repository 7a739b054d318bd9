#!/usr/bin/env python3
"""v2v benchmark over memif (issue 3): testpmd txonly → switch → testpmd
rxonly, the switch being turnoutd (patch, bridge; one worker pinned to
CPU 1) or testpmd io-forwarding between the same two memif links (testpmd
as both memif servers, forwarding lcore on CPU 1). Generator and sink
forward on CPU 0. Runs are interleaved (A, B, C, A, B, C, ...) and
reported as medians with ranges; the figure is the ratio to testpmd.

With --instrument gen (turnout-gen txrx, generator and sink in one thread
on CPU 0) the tool does as much work per frame as the switch, so on 2 vCPUs
the rates are usually the tool's: each run says whether it was tester-bound
(turnout-gen's push-back and receive-backlog counters) and how busy
turnoutd's worker was; the switches' cost per frame is compared as busy
cycles per forwarded frame (turnoutd's worker counters; testpmd's
--record-core-cycles), which holds whoever set the rate.

Then CPU: turnoutd `patch` carrying 10 % of its measured 64 B maximum
(turnout-gen as a paced memif generator on CPU 0), adaptive vs poll
wake-up, CPU time of every turnoutd thread from /proc/PID/task/*/stat.

    cargo build --release -p turnoutd -p turnout-gen
    python3 tests/turnoutd/bench_v2v.py [--rounds 3] [--duration-s 5] [--json out.json]

Needs root and dpdk-testpmd. Cleans up every process and DPDK prefix.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, Testpmd, Turnoutd, port_toml, stop_pid, wait_for

sys.path.insert(0, str(REPO / "python" / "src"))
from turnout.measure.gen import tester_bound

RELEASE = REPO / "target" / "release"
TICK_HZ = os.sysconf("SC_CLK_TCK")


def pmd_rx_pps(pmd: Testpmd, window_s: float) -> tuple[float, float]:
    """Average Rx-pps and Tx-pps of a testpmd port over ``window_s``
    (between two 'show port stats' commands)."""
    pmd.command("show port stats 0")
    time.sleep(window_s)
    pmd.command("show port stats 0")
    time.sleep(0.5)
    rx = re.findall(r"Rx-pps:\s*(\d+)", pmd.log())
    tx = re.findall(r"Tx-pps:\s*(\d+)", pmd.log())
    return float(rx[-1]), float(tx[-1])


def pmd_rx_total(pmd: Testpmd) -> int:
    pmd.command("show port stats 0")
    time.sleep(0.3)
    m = re.findall(r"RX-packets:\s*(\d+)", pmd.log())
    return int(m[-1]) if m else 0


def turnoutd_config(logic: str, wakeup: str = "adaptive") -> str:
    text = (
        '[switch]\ncontrol_socket = "@CTL@"\n'
        f'wakeup = "{wakeup}"\n\n[[workers]]\ncpu = 1\n\n[logic]\nname = "{logic}"\n'
    )
    if logic == "patch":
        text += 'pairs = [["vnf0", "vnf1"]]\n'
    return text + "\n" + port_toml("vnf0", "@DIR@/m.sock", 0) + port_toml("vnf1", "@DIR@/m.sock", 1)


def port_of(stats: dict, name: str) -> dict:
    return next(p for p in stats["ports"] if p["name"] == name)


def gen_args(size: int) -> dict:
    return {"extra": [f"--txpkts={size}"]}


def run_turnoutd(tmp: Path, logic: str, size: int, warm_s: float, dur_s: float) -> dict:
    with Turnoutd(tmp / "td", turnoutd_config(logic), RELEASE / "turnoutd") as d:
        sock = str(d.dir / "m.sock")
        with (
            Testpmd(tmp, "sink", [Testpmd.memif(sock, 1)], "rxonly") as sink,
            Testpmd(tmp, "gen", [Testpmd.memif(sock, 0)], "txonly", **gen_args(size)) as gen,
        ):
            wait_for("links", 30, lambda: all(p["link_up"] for p in d.rpc("port.list")))
            time.sleep(warm_s)
            s0 = d.rpc("stats")
            rx_pps, _ = pmd_rx_pps(sink, dur_s)
            s1 = d.rpc("stats")
            _, gen_pps = pmd_rx_pps(gen, 0.5)
            dt = (s1["time_ns"] - s0["time_ns"]) / 1e9
            v1 = port_of(s1, "vnf1")
            v1_0 = port_of(s0, "vnf1")
            w0, w1 = s0["workers"][0], s1["workers"][0]
            dp = w1["packets"] - w0["packets"]
            gen.stop()
            sink.stop()
    return {
        "sink_rx_pps": rx_pps,
        "switch_tx_pps": (v1["tx_packets"] - v1_0["tx_packets"]) / dt,
        "gen_tx_pps": gen_pps,
        "cycles_per_packet": (w1["busy_cycles"] - w0["busy_cycles"]) / dp if dp else None,
        "tx_full_drops_per_s": (v1["drops"]["tx_full"] - v1_0["drops"]["tx_full"]) / dt,
    }


def testpmd_switch(tmp: Path, extra: list[str] | None = None) -> tuple[Testpmd, str, str]:
    """testpmd io-forwarding between two memif servers (sockets a, b),
    forwarding lcore on CPU 1."""
    a, b = str(tmp / "a.sock"), str(tmp / "b.sock")
    sw = Testpmd(
        tmp,
        "sw",
        [Testpmd.memif(a, 0, 0, role="server"), Testpmd.memif(b, 0, 1, role="server")],
        "io",
        lcores="0,1",
        main_lcore=0,
        extra=extra,
    )
    return sw, a, b


def run_testpmd_io(tmp: Path, size: int, warm_s: float, dur_s: float) -> dict:
    sw, a, b = testpmd_switch(tmp)
    # testpmd's 'show port stats 0' is enough for the sink; the switch only forwards
    with sw:
        wait_for("server sockets", 30, lambda: os.path.exists(a) and os.path.exists(b))
        with (
            Testpmd(tmp, "sink", [Testpmd.memif(b, 0)], "rxonly") as sink,
            Testpmd(tmp, "gen", [Testpmd.memif(a, 0)], "txonly", **gen_args(size)) as gen,
        ):
            wait_for("frames at the sink", 30, lambda: pmd_rx_total(sink) > 0, every_s=0.5)
            time.sleep(warm_s)
            rx_pps, _ = pmd_rx_pps(sink, dur_s)
            _, gen_pps = pmd_rx_pps(gen, 0.5)
            gen.stop()
            sink.stop()
        sw.stop()
    return {"sink_rx_pps": rx_pps, "gen_tx_pps": gen_pps}


def gen_txrx(tx_spec: str, rx_spec: str, size: int, warm_s: float, dur_s: float) -> dict:
    """turnout-gen txrx: generator and sink in one thread on CPU 0."""
    args = [str(RELEASE / "turnout-gen"), "txrx", "--port", tx_spec, "--rx-port", rx_spec]
    args += ["--cpu", "0", "--size", str(size), "--warmup-s", str(warm_s)]
    args += ["--duration-s", str(dur_s), "--wait-peer-s", "20"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=warm_s + dur_s + 60)
    if r.returncode != 0:
        raise RuntimeError(f"turnout-gen failed ({r.returncode}): {r.stderr[-400:]}")
    doc = json.loads(r.stdout)
    tx, rx = doc["tx"], doc["rx"]
    return {
        "sink_rx_pps": rx["rate_pps"],
        "gen_tx_pps": tx["rate_pps"],
        "lost": rx["lost"],
        "latency_p50_ns": rx["latency_ns"]["p50"],
        # who limited the run (docs/bench.md, "Tester-bound trials")
        "tester_bound": tester_bound(0, tx["duration_s"], tx["packets"], rx["lost"], 0,
                                     tx["attempts"], tx["pushback"], rx["bursts"],
                                     rx["backlog_bursts"])[0],
        "tx_pushback": tx["pushback"] / max(1, tx["attempts"]),
        "rx_backlog": rx["backlog_bursts"] / max(1, rx["bursts"]),
    }


def run_turnoutd_gen(tmp: Path, logic: str, size: int, warm_s: float, dur_s: float) -> dict:
    with Turnoutd(tmp / "td", turnoutd_config(logic), RELEASE / "turnoutd") as d:
        sock = str(d.dir / "m.sock")
        s0 = d.rpc("stats")
        res = gen_txrx(f"memif:{sock},id=0", f"memif:{sock},id=1", size, warm_s, dur_s)
        s1 = d.rpc("stats")
        w0, w1 = s0["workers"][0], s1["workers"][0]
        dp = w1["packets"] - w0["packets"]
        res["cycles_per_packet"] = (w1["busy_cycles"] - w0["busy_cycles"]) / dp if dp else None
        busy = w1["busy_cycles"] - w0["busy_cycles"]
        total = busy + w1["idle_cycles"] - w0["idle_cycles"]
        res["worker_busy"] = busy / total if total else None
        return res


def run_testpmd_io_gen(tmp: Path, size: int, warm_s: float, dur_s: float) -> dict:
    # busy cycles (bursts that brought frames) per forwarded frame, the
    # counterpart of turnoutd's busy_cycles / packets
    sw, a, b = testpmd_switch(tmp, ["--record-core-cycles"])
    with sw:
        wait_for("server sockets", 30, lambda: os.path.exists(a) and os.path.exists(b))
        # testpmd's forwarding statistics must be read while the generator
        # is still connected (its memif counters reset when a client
        # leaves); its stdout is a file, read after it exits.
        ask = threading.Timer(warm_s + 0.9 * dur_s, sw.command, args=("show fwd stats all",))
        ask.start()
        try:
            res = gen_txrx(f"memif:{a},id=0", f"memif:{b},id=0", size, warm_s, dur_s)
        finally:
            ask.cancel()
        sw.stop()
    cpp = re.findall(r"CPU cycles/packet=([0-9.]+)", sw.log())
    res["cycles_per_packet"] = float(cpp[-1]) if cpp else None
    return res


def proc_cpu_ticks(pid: int) -> int:
    total = 0
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            s = (t / "stat").read_text()
        except OSError:
            continue
        f = s[s.rfind(")") + 2 :].split()
        total += int(f[11]) + int(f[12])
    return total


def run_cpu(tmp: Path, wakeup: str, rate_pps: float, dur_s: float) -> dict:
    """turnoutd patch carrying ``rate_pps`` from a paced turnout-gen txrx
    (generator and sink in one thread on CPU 0); CPU time of every turnoutd
    thread over ``dur_s``."""
    gen_bin = RELEASE / "turnout-gen"
    with Turnoutd(tmp / "td", turnoutd_config("patch", wakeup), RELEASE / "turnoutd") as d:
        sock = str(d.dir / "m.sock")
        args = ["txrx", "--port", f"memif:{sock},id=0", "--rx-port", f"memif:{sock},id=1"]
        args += ["--rate-pps", str(int(rate_pps)), "--size", "66", "--cpu", "0"]
        args += ["--duration-s", str(dur_s + 6), "--json", str(tmp / "gen.json")]
        gen = subprocess.Popen(
            [str(gen_bin), *args],
            stdout=subprocess.DEVNULL,
            stderr=open(tmp / "gen.log", "wb"),  # noqa: SIM115
        )
        try:
            wait_for("links", 20, lambda: all(p["link_up"] for p in d.rpc("port.list")))
            time.sleep(2)
            pid = d.proc.pid
            c0, s0, t0 = proc_cpu_ticks(pid), d.rpc("stats"), time.monotonic()
            time.sleep(dur_s)
            c1, s1, t1 = proc_cpu_ticks(pid), d.rpc("stats"), time.monotonic()
        finally:
            stop_pid(gen, signal.SIGINT)
    dt = (s1["time_ns"] - s0["time_ns"]) / 1e9
    delivered = port_of(s1, "vnf1")["tx_packets"] - port_of(s0, "vnf1")["tx_packets"]
    return {
        "cpu_percent": 100.0 * (c1 - c0) / TICK_HZ / (t1 - t0),
        "delivered_pps": delivered / dt,
        "worker_sleeps_per_s": (s1["workers"][0]["sleeps"] - s0["workers"][0]["sleeps"]) / dt,
    }


def summary(xs: list[float]) -> str:
    return f"{statistics.median(xs) / 1e6:.2f} Mpps [{min(xs) / 1e6:.2f}–{max(xs) / 1e6:.2f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--sizes", default="64,1518")
    ap.add_argument("--duration-s", type=float, default=5.0)
    ap.add_argument("--warmup-s", type=float, default=2.0)
    ap.add_argument("--cpu-rounds", type=int, default=3)
    ap.add_argument("--skip-cpu", action="store_true")
    ap.add_argument(
        "--cpu-rate-pps",
        type=float,
        help="load for the CPU runs (default: 10 %% of the measured patch maximum)",
    )
    ap.add_argument("--json", help="write all raw results here")
    ap.add_argument(
        "--instrument",
        choices=["testpmd", "gen"],
        default="testpmd",
        help="testpmd: txonly and rxonly processes sharing CPU 0; "
        "gen: turnout-gen txrx (generator and sink in one thread on CPU 0)",
    )
    a = ap.parse_args()
    sizes = [int(x) for x in a.sizes.split(",")]
    suts = ["patch", "bridge", "testpmd-io"]
    raw: dict = {"throughput": [], "cpu": []}
    work = Path(tempfile.mkdtemp(prefix="turnout-bench-"))
    try:
        for r in range(a.rounds):
            for size in sizes:
                for sut in suts:
                    tmp = work / f"r{r}-{size}-{sut}"
                    tmp.mkdir()
                    if a.instrument == "gen" and sut == "testpmd-io":
                        res = run_testpmd_io_gen(tmp, size, a.warmup_s, a.duration_s)
                    elif a.instrument == "gen":
                        res = run_turnoutd_gen(tmp, sut, size, a.warmup_s, a.duration_s)
                    elif sut == "testpmd-io":
                        res = run_testpmd_io(tmp, size, a.warmup_s, a.duration_s)
                    else:
                        res = run_turnoutd(tmp, sut, size, a.warmup_s, a.duration_s)
                    res.update({"round": r, "size_b": size, "sut": sut})
                    raw["throughput"].append(res)
                    print(json.dumps(res), flush=True)
        med: dict = {}
        if a.rounds:
            print("\nthroughput at the sink (median [min–max] over rounds):")
        for size in sizes if a.rounds else []:
            for sut in suts:
                runs = [x for x in raw["throughput"] if x["size_b"] == size and x["sut"] == sut]
                xs = [x["sink_rx_pps"] for x in runs]
                med[(size, sut)] = xs
                cpp = [x["cycles_per_packet"] for x in runs if x.get("cycles_per_packet")]
                extra = f"  cycles/pkt {statistics.median(cpp):.0f}" if cpp else ""
                busy = [x["worker_busy"] for x in runs if x.get("worker_busy") is not None]
                if busy:
                    extra += f"  worker busy {100 * statistics.median(busy):.0f} %"
                bound = sum(1 for x in runs if x.get("tester_bound"))
                if bound:
                    extra += f"  TESTER-BOUND in {bound}/{len(runs)} (a lower bound)"
                print(f"  {size:5d} B  {sut:10s}  {summary(xs)}{extra}")
            base = med[(size, "testpmd-io")]
            for sut in ("patch", "bridge"):
                # ratio of each round's pair (interleaved runs), then median and range
                ratios = [x / y for x, y in zip(med[(size, sut)], base, strict=True)]
                print(
                    f"  {size:5d} B  {sut}/testpmd-io ratio {statistics.median(ratios):.2f} "
                    f"[{min(ratios):.2f}–{max(ratios):.2f}]"
                )
                # Cost per frame, valid also when the tester set the rate:
                # testpmd's cycles over the switch's, round by round (> 1:
                # the switch spends fewer cycles per frame than testpmd io).
                runs_s = {x["round"]: x for x in raw["throughput"]
                          if x["size_b"] == size and x["sut"] == sut}
                runs_b = {x["round"]: x for x in raw["throughput"]
                          if x["size_b"] == size and x["sut"] == "testpmd-io"}
                cpp = "cycles_per_packet"
                cr = [runs_b[r][cpp] / runs_s[r][cpp] for r in runs_s
                      if r in runs_b and runs_s[r].get(cpp) and runs_b[r].get(cpp)]
                if cr:
                    print(
                        f"  {size:5d} B  testpmd-io/{sut} cycles per frame "
                        f"{statistics.median(cr):.2f} "
                        f"[{min(cr):.2f}–{max(cr):.2f}]"
                    )
        if not a.skip_cpu:
            small = min(sizes)
            rate = a.cpu_rate_pps or 0.1 * statistics.median(med[(small, "patch")])
            print(f"\nCPU of turnoutd carrying {rate / 1e6:.3f} Mpps of 66 B frames (patch):")
            for r in range(a.cpu_rounds):
                for wakeup in ("adaptive", "poll"):
                    tmp = work / f"cpu{r}-{wakeup}"
                    tmp.mkdir()
                    res = run_cpu(tmp, wakeup, rate, a.duration_s)
                    res.update({"round": r, "wakeup": wakeup, "rate_pps": rate})
                    raw["cpu"].append(res)
                    print(json.dumps(res), flush=True)
            for wakeup in ("adaptive", "poll"):
                xs = [x["cpu_percent"] for x in raw["cpu"] if x["wakeup"] == wakeup]
                dl = [x["delivered_pps"] for x in raw["cpu"] if x["wakeup"] == wakeup]
                cpu = f"{statistics.median(xs):.1f} % [{min(xs):.1f}–{max(xs):.1f}]"
                print(f"  {wakeup:8s}  cpu {cpu}  delivered {summary(dl)}")
    finally:
        if a.json:
            Path(a.json).write_text(json.dumps(raw, indent=1))
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
