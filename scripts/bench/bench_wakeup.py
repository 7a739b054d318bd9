#!/usr/bin/env python3
"""CPU vs latency of the wake-up settings (docs/architecture.md "Wake-up").

For each path — memif v2v (turnout-gen txrx on two memif ports through
the switch) and AF_XDP p2p (turnout-gen txrx on two veths, the switch on
AF_XDP ports of the other ends) — and each load (fixed rates and fractions
of the path's R+), every switch configuration forwards 64 B frames from a
paced turnout-gen on CPU 0 while the switch runs on CPU 1 — evenly spaced
frames (--burst 1) up to 100 kpps, bursts of 32 above (one thread cannot
pace single frames much faster, least of all next to a switch polling the
same ring); the figures are the one-way latency percentiles of
every frame (turnout-gen's histogram) and the switch's CPU over the
measured window, as a share of one core:

- turnoutd: the worker thread's CPU clock (its `stats` cpu_ns, ns
  resolution) — the CPU its wake-ups cost included;
- testpmd, OVS: every thread of the process from /proc (ticks).

Configurations (--configs): `turnoutd:poll`, `turnoutd:B` (adaptive with a
latency budget of B µs), `turnoutd:B:idle` (and its CPU idling by polling,
`[[workers]] cpu_idle = "poll"`), `testpmd` (io forwarding; AF_XDP PMD on
veths), `ovs` (userspace datapath, afxdp ports, PMD on CPU 1; AF_XDP path
only). Rounds are interleaved: every configuration once per round, the
figures the median [min–max] over rounds. R+ of each path is measured
first with `turnoutd:poll` (unpaced); the fractions are of that R+.

    cargo build --release -p turnoutd -p turnout-gen
    sudo .venv/bin/python scripts/bench/bench_wakeup.py --rounds 3 \\
        [--paths memif,afxdp] [--loads 10k,100k,0.1,0.5,0.9] \\
        [--configs CONFIGS] [--json out.json] [--plot out.png]

    CONFIGS defaults to all of them:
        turnoutd:poll,turnoutd:0,turnoutd:100,turnoutd:250,turnoutd:100:idle,testpmd,ovs

Needs root (namespaces), dpdk-testpmd and Open vSwitch. Everything it
creates is removed at the end (the turnout Testbed), also on failure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))

from turnout.scenarios import Point, build  # noqa: E402
from turnout.sut import make_sut  # noqa: E402
from turnout.sut.turnoutd import rpc  # noqa: E402
from turnout.system.cpuprobe import probe_cpus  # noqa: E402
from turnout.testbed import Testbed  # noqa: E402

GEN = REPO / "target" / "release" / "turnout-gen"
TICK_HZ = os.sysconf("SC_CLK_TCK")
SIZE_B = 64
#: Loads up to this are sent as evenly spaced frames, higher ones in bursts of 32.
EVEN_MAX_PPS = 100_000


@dataclass
class Config:
    """One switch configuration."""

    label: str
    sut: str
    options: dict[str, Any] = field(default_factory=dict)


def parse_config(text: str, path: str) -> Config | None:
    parts = text.split(":")
    if parts[0] == "turnoutd":
        opts: dict[str, Any] = {"logic": "patch", "kernel_port": "af_xdp"}
        if parts[1] == "poll":
            opts["wakeup"] = "poll"
        else:
            opts["wakeup"] = "adaptive"
            opts["latency_budget_us"] = int(parts[1])
            if "idle" in parts[2:]:
                opts["cpu_idle"] = "poll"
        return Config(text, "turnoutd", opts)
    if parts[0] == "testpmd":
        return Config(text, "testpmd", {"forward_mode": "io", "kernel_port": "af_xdp"})
    if parts[0] == "ovs":
        return None if path == "memif" else Config(text, "ovs", {})
    raise SystemExit(f"unknown configuration {text!r}")


def parse_load(text: str) -> tuple[str, float]:
    """('pps', 10000.0) for '10k' / '10000'; ('frac', 0.1) for '0.1'."""
    t = text.strip().lower()
    if t.endswith("k"):
        return "pps", float(t[:-1]) * 1e3
    if t.endswith("m"):
        return "pps", float(t[:-1]) * 1e6
    v = float(t)
    return ("frac", v) if v <= 1.0 else ("pps", v)


def proc_cpu_s(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        for task in Path(f"/proc/{pid}/task").glob("*"):
            try:
                s = (task / "stat").read_text()
            except OSError:
                continue
            f = s[s.rfind(")") + 2 :].split()
            total += int(f[11]) + int(f[12])
    return total / TICK_HZ


class Session:
    """A testbed with one switch configuration on one path."""

    def __init__(self, tb: Testbed, cfg: Config, path: str) -> None:
        self.cfg = cfg
        self.sut = make_sut(cfg.sut, cfg.options)
        why = self.sut.available()
        if why:
            raise RuntimeError(f"{cfg.label}: {why}")
        point = Point(scenario="v2v" if path == "memif" else "p2p", frame_size_b=SIZE_B)
        built = build(tb, self.sut, point, memif_tester=True, tester_roles={"tx", "rx", "txrx"},
                      sut_cpus="1", kernel_port="afxdp")
        self.stream = built.streams[0]
        self.tb = tb
        self.sut.setup(tb, built.topology)

    def worker_cpu_ns(self) -> int | None:
        if self.cfg.sut != "turnoutd":
            return None
        w = rpc(self.sut.sock, "stats")["workers"][0]
        return int(w["cpu_ns"])

    def trial(self, rate_pps: float, duration_s: float, warmup_s: float) -> dict[str, Any]:
        """One paced run; the switch's CPU over the middle of the measured
        window. The host is probed before and after (turnout.system.cpuprobe):
        a trial next to which a CPU was not ours is marked ``host_slow``."""
        before = wait_for_fast_host()
        r = self._trial(rate_pps, duration_s, warmup_s)
        after = tester_cpu_probe()
        r["host_lost_pct"] = 100.0 * max(before.lost_share, after.lost_share)
        r["host_slow"] = before.slow or after.slow
        return r

    def _trial(self, rate_pps: float, duration_s: float, warmup_s: float) -> dict[str, Any]:
        s = self.stream
        args = [str(GEN), "txrx", "--port", s.tx_port, "--rx-port", s.rx_port, "--cpu", "0",
                "--size", str(SIZE_B), "--src-mac", s.src_mac, "--dst-mac", s.dst_mac,
                "--warmup-s", f"{warmup_s:g}", "--duration-s", f"{duration_s:g}",
                "--wait-peer-s", "20"]
        if rate_pps > 0:
            burst = 1 if rate_pps <= EVEN_MAX_PPS else 32
            args += ["--rate-pps", f"{rate_pps:.0f}", "--burst", str(burst)]
        p = self.tb.spawn(args, netns=s.tx_ns)
        # the traffic window starts after the peer is up and the warm-up is
        # over; sample the CPU inside it
        t_start = time.monotonic()
        time.sleep(warmup_s + 0.6)
        pids = self.sut.pids()
        c0, w0, t0 = proc_cpu_s(pids), self.worker_cpu_ns(), time.monotonic()
        time.sleep(max(0.5, duration_s - 1.0))
        c1, w1, t1 = proc_cpu_s(pids), self.worker_cpu_ns(), time.monotonic()
        out, err = p.communicate(timeout=duration_s + warmup_s + 60)
        self.tb.forget(p.pid)
        if p.returncode != 0:
            raise RuntimeError(f"turnout-gen exited {p.returncode}: {err.decode()[-400:]}")
        if t1 - t_start > warmup_s + duration_s + 20:
            raise RuntimeError("the CPU window fell outside the traffic")
        doc = json.loads(out.decode().strip().splitlines()[-1])
        rx, tx = doc["rx"], doc["tx"]
        lat = rx.get("latency_ns") or {}
        if w0 is not None and w1 is not None:
            cpu = (w1 - w0) / 1e9 / (t1 - t0)
        else:
            cpu = (c1 - c0) / (t1 - t0)
        return {
            "offered_pps": tx["rate_pps"], "rx_pps": rx["rate_pps"], "lost": rx.get("lost", 0),
            "sent": tx["packets"], "received": rx["packets"],
            "p50_us": lat.get("p50", 0) / 1e3, "p99_us": lat.get("p99", 0) / 1e3,
            "p999_us": lat.get("p999", 0) / 1e3, "cpu_pct": 100.0 * cpu,
        }

    def close(self) -> None:
        self.sut.teardown()


def tester_cpu_probe() -> Any:
    """Spin on both CPUs and judge by CPU 0's: between trials nothing of ours
    runs there, while CPU 1 may carry a polling switch (which a prober there
    shares the CPU with). With both vCPUs busy, the host's slow placement
    (both on one physical core) takes half of CPU 0 away."""
    return probe_cpus([0, 1])[0]


def wait_for_fast_host(max_wait_s: float = 60.0) -> Any:
    """Probe until CPU 0 is ours again (the host's slow placement lasts
    seconds); give up after ``max_wait_s``."""
    end = time.monotonic() + max_wait_s
    while True:
        p = tester_cpu_probe()
        if not p.slow or time.monotonic() > end:
            return p
        time.sleep(1.0)


def med(xs: list[float]) -> str:
    if not xs:
        return "-"
    return f"{statistics.median(xs):.1f} [{min(xs):.1f}–{max(xs):.1f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--paths", default="memif,afxdp")
    ap.add_argument("--loads", default="10k,100k,0.1,0.5,0.9")
    ap.add_argument("--configs",
                    default="turnoutd:poll,turnoutd:0,turnoutd:100,turnoutd:250,turnoutd:100:idle,testpmd,ovs")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--duration-s", type=float, default=3.0)
    ap.add_argument("--warmup-s", type=float, default=1.0)
    ap.add_argument("--json", help="write every trial here")
    ap.add_argument("--plot", help="write the CPU-vs-p99 curves here (PNG)")
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("needs root (namespaces, veths)", file=sys.stderr)
        return 2
    if not GEN.exists():
        print(f"{GEN} is not built (cargo build --release -p turnout-gen)", file=sys.stderr)
        return 2
    loads = [parse_load(x) for x in a.loads.split(",") if x]
    results: list[dict[str, Any]] = []
    for path in a.paths.split(","):
        configs = [c for c in (parse_config(x, path) for x in a.configs.split(",")) if c]
        # R+ of the path: turnoutd polling, unpaced
        with Testbed() as tb:
            poll = {"logic": "patch", "kernel_port": "af_xdp", "wakeup": "poll"}
            ref = Session(tb, Config("turnoutd:poll", "turnoutd", poll), path)
            try:
                rplus = ref.trial(0, a.duration_s, a.warmup_s)["rx_pps"]
            finally:
                ref.close()
        rates = [(lbl, v if kind == "pps" else v * rplus)
                 for (kind, v), lbl in zip(loads, a.loads.split(","), strict=True)]
        print(f"\n{path}: R+ {rplus / 1e6:.3f} Mpps (turnoutd poll); loads "
              + ", ".join(f"{lbl}={r / 1e3:.0f} kpps" for lbl, r in rates), flush=True)
        for rnd in range(a.rounds):
            for cfg in configs:
                with Testbed() as tb:
                    try:
                        sess = Session(tb, cfg, path)
                    except Exception as e:
                        print(f"  {cfg.label}: skipped: {e}", flush=True)
                        continue
                    try:
                        for lbl, rate in rates:
                            r = sess.trial(rate, a.duration_s, a.warmup_s)
                            r.update(path=path, config=cfg.label, load=lbl, rate_pps=rate,
                                     round=rnd)
                            results.append(r)
                            slow = (f"  HOST SLOW ({r['host_lost_pct']:.0f} % lost)"
                                    if r["host_slow"] else "")
                            print(f"  r{rnd} {cfg.label:18s} {lbl:>5s} "
                                  f"{r['offered_pps'] / 1e3:9.1f} kpps "
                                  f"p50 {r['p50_us']:8.1f} p99 {r['p99_us']:8.1f} "
                                  f"p99.9 {r['p999_us']:8.1f} µs "
                                  f"cpu {r['cpu_pct']:5.1f} % lost {r['lost']}" + slow,
                                  flush=True)
                    finally:
                        sess.close()
    # summary
    slow = sum(1 for r in results if r["host_slow"])
    print(f"\nmedian [min–max] over rounds; {slow} of {len(results)} trials left out: the host "
          "took a CPU away next to them (turnout.system.cpuprobe)")
    results_all = results
    results = [r for r in results if not r["host_slow"]]
    for path in a.paths.split(","):
        print(f"\n{path}")
        print(f"{'config':18s} {'load':>5s} {'p50 µs':>20s} {'p99 µs':>22s} {'cpu %':>20s}")
        keys = sorted({(r["config"], r["load"]) for r in results if r["path"] == path},
                      key=lambda k: (a.configs.split(",").index(k[0]),
                                     a.loads.split(",").index(k[1])))
        for cfg_label, lbl in keys:
            rs = [r for r in results
                  if r["path"] == path and r["config"] == cfg_label and r["load"] == lbl]
            print(f"{cfg_label:18s} {lbl:>5s} {med([r['p50_us'] for r in rs]):>20s} "
                  f"{med([r['p99_us'] for r in rs]):>22s} {med([r['cpu_pct'] for r in rs]):>20s}")
    if a.json:
        Path(a.json).write_text(json.dumps(results_all, indent=1))
    if a.plot:
        plot(results, a.plot, a.paths.split(","))
    return 0


def plot(results: list[dict[str, Any]], out: str, paths: list[str]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(paths), figsize=(6 * len(paths), 4.5), squeeze=False)
    for ax, path in zip(axes[0], paths, strict=True):
        rs = [r for r in results if r["path"] == path]
        for cfg_label in dict.fromkeys(r["config"] for r in rs):
            pts = []
            for lbl in dict.fromkeys(r["load"] for r in rs):
                sel = [r for r in rs if r["config"] == cfg_label and r["load"] == lbl]
                if sel:
                    pts.append((statistics.median(r["cpu_pct"] for r in sel),
                                statistics.median(r["p99_us"] for r in sel), lbl))
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=cfg_label)
            for x, y, lbl in pts:
                ax.annotate(lbl, (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        ax.set_xlabel("switch CPU, % of one core")
        ax.set_ylabel("one-way p99 latency, µs")
        ax.set_yscale("log")
        ax.set_title(f"{path}: 64 B, evenly spaced frames")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
