"""Two-host overlay bench (issue 19): what VXLAN encapsulation costs next to
plain switching, for turnoutd and the Linux kernel, on the same veths and
tester.

Scenarios, interleaved round by round (A, B, C, D, A, B, ...):

- ``turnoutd-plain``: one host; tester t0 → host (patch) → t1;
- ``turnoutd-vxlan``: t0 → host A (patch pod0 ↔ overlay) → VXLAN over a
  veth → host B (patch overlay ↔ pod1) → t1;
- ``ovs-plain`` / ``ovs-vxlan``: the same with Open vSwitch's userspace
  datapath (``system`` ports; for the overlay ``br-phy`` on the underlay and
  a ``vxlan`` port in ``br-int``, one OVS per host);
- ``kernel-plain``: one host, a Linux bridge between the two pod veths;
- ``kernel-vxlan``: a Linux bridge + vxlan netdev on each of two hosts.

The tester is turnout-gen ``txrx`` (AF_PACKET on t0 and t1, both in the
tester's namespace: "pods" of host A and host B). For turnoutd the busy
worker CPU time per frame comes from its own counters (``stats``:
``cpu_ns``, the threads' CPU clocks, and frames received): for the
overlay, host A's (receive from the pod + encapsulate) plus host B's
(decapsulate + send to the pod), next to the single host's. The kernel
paths report delivered rates only (their CPU is softirq time on whichever
core sent). OVS: ovs-vswitchd's CPU time (all threads, /proc) per frame
delivered.

Run as root after ``cargo build --release -p turnoutd -p turnout-gen``:
    .venv/bin/python tests/turnoutd/bench_overlay.py --rounds 3 --json results/overlay.json
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import REPO
from test_overlay import VNI, Net, kernel_vtep, nx, ovs, switch_config

GEN = REPO / "target" / "release" / "turnout-gen"


def mac(ns: str, ifname: str) -> str:
    return nx(ns, "cat", f"/sys/class/net/{ifname}/address").strip()


def patch(pairs: list[tuple[str, str]]) -> str:
    return "pairs = [" + ", ".join(f'["{a}", "{b}"]' for a, b in pairs) + "]"


def plain_config(pods: list[str]) -> str:
    text = '[switch]\ncontrol_socket = "@CTL@"\n\n[logic]\nname = "patch"\n'
    text += patch([(pods[0], pods[1])]) + "\n\n"
    for p in pods:
        text += f'[[ports]]\nname = "{p}"\nkind = "af_packet"\niface = "{p}"\n\n'
    return text


def overlay_config(local: str, remote: str, pod: str) -> str:
    text = switch_config("vxlan", local, [remote], "up0", [pod])
    return text.replace('name = "bridge"\n', 'name = "patch"\n' + patch([(pod, "overlay")]) + "\n")


def gen(tester: str, size: int, rate: int, duration: float) -> dict:
    dst = mac(tester, "t1")
    out = nx(tester, str(GEN), "txrx", "--port", "afpacket:t0", "--rx-port", "afpacket:t1",
             "--size", str(size), "--rate-pps", str(rate), "--duration-s", str(duration),
             "--warmup-s", "0.5", "--dst-mac", dst, "--src-mac", mac(tester, "t0"),
             timeout=duration + 60)
    return json.loads(out)


def cpu(daemons: list) -> list[tuple[int, int]]:
    """Per daemon: (worker CPU time ns, frames received) so far."""
    out = []
    for d in daemons:
        w = d.rpc("stats")["workers"]
        out.append((sum(x["cpu_ns"] for x in w), sum(x["packets"] for x in w)))
    return out


def one(scenario: str, size: int, rate: int, duration: float) -> dict:
    tmp = Path(tempfile.mkdtemp(prefix="ovbench"))
    net = Net(tmp)
    stack = contextlib.ExitStack()
    ovs_pids: list[int] = []
    ok = False
    try:
        tester = net.netns("tester")
        two = scenario.endswith("vxlan")
        if two:
            a, b = net.netns("hA"), net.netns("hB")
            net.veth(a, "up0", b, "up0")
            for h in (a, b):
                nx(h, "ethtool", "-K", "up0", "tx-udp_tnl-segmentation", "off", check=False)
            ua, ub = "192.168.77.1", "192.168.77.2"
        else:
            a = b = net.netns("h")
        # Tester-side MTU 1500; frames up to 1464 B fit the tunnel.
        net.veth(tester, "t0", a, "pod0")
        net.veth(tester, "t1", b, "pod1")
        daemons = []
        if scenario == "turnoutd-plain":
            daemons.append(net.turnoutd(a, "h", plain_config(["pod0", "pod1"])))
        elif scenario == "turnoutd-vxlan":
            daemons.append(net.turnoutd(a, "A", overlay_config(ua, ub, "pod0")))
            daemons.append(net.turnoutd(b, "B", overlay_config(ub, ua, "pod1")))
            # The tunnels resolve each other (ARP) before traffic starts.
            end = time.monotonic() + 10
            while time.monotonic() < end and not all(
                    d.counters()["remotes_resolved"] == 1 for d in daemons):
                time.sleep(0.1)
        elif scenario == "kernel-plain":
            nx(a, "ip", "link", "add", "br0", "type", "bridge")
            for p in ("pod0", "pod1"):
                nx(a, "ip", "link", "set", p, "master", "br0")
            nx(a, "ip", "link", "set", "br0", "up")
        elif scenario == "ovs-plain":
            sw = stack.enter_context(ovs(net, a))
            sw("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev")
            for p in ("pod0", "pod1"):
                sw("add-port", "br0", p)
            ovs_pids.append(sw.pid())
        elif scenario == "ovs-vxlan":
            for h, local, remote, pod, nm in ((a, ua, ub, "pod0", "ovsA"),
                                              (b, ub, ua, "pod1", "ovsB")):
                sw = stack.enter_context(ovs(net, h, nm))
                sw("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev")
                sw("add-port", "br-phy", "up0")
                nx(h, "ip", "addr", "add", local + "/24", "dev", "br-phy")
                nx(h, "ip", "link", "set", "br-phy", "up")
                sw("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")
                sw("add-port", "br-int", pod)
                sw("add-port", "br-int", "tun0", "--", "set", "interface", "tun0", "type=vxlan",
                   f"options:remote_ip={remote}", f"options:key={VNI}")
                ovs_pids.append(sw.pid())
            # OVS resolves the remote's MAC on the first packet it tunnels:
            # prime it so the trial does not start with an ARP round trip.
            time.sleep(1)
        elif scenario == "kernel-vxlan":
            for h, local, remote, pod in ((a, ua, ub, "pod0"), (b, ub, ua, "pod1")):
                nx(h, "ip", "addr", "add", local + "/24", "dev", "up0")
                kernel_vtep(h, "vx0", "up0", local, remote, VNI, True, "10.255.255.1/32")
                nx(h, "ip", "addr", "flush", "dev", "vx0")
                nx(h, "ip", "link", "add", "br0", "type", "bridge")
                nx(h, "ip", "link", "set", "vx0", "master", "br0")
                nx(h, "ip", "link", "set", pod, "master", "br0")
                nx(h, "ip", "link", "set", "br0", "up")
        before = cpu(daemons)
        ovs_before = sum(proc_cpu_ns(p) for p in ovs_pids)
        g = gen(tester, size, rate, duration)
        after = cpu(daemons)
        ovs_cpu = sum(proc_cpu_ns(p) for p in ovs_pids) - ovs_before
        res = {
            "scenario": scenario, "size_b": size, "offered_pps": g["tx"]["rate_pps"],
            "delivered_pps": g["rx"]["rate_pps"],
            "loss": g["rx"]["lost"] / max(1, g["rx"]["lost"] + g["rx"]["packets"]),
            "p50_us": g["rx"].get("latency_ns", {}).get("p50", 0) / 1000,
        }
        if ovs_pids:
            # ovs-vswitchd's whole CPU time (user + system, all threads; no
            # PMD threads: system and tunnel ports are polled by the main
            # thread) per frame the tester received.
            frames = max(1, g["rx"]["packets"])
            res["cpu_ns_per_frame"] = [ovs_cpu / frames]
        if daemons:
            # Worker CPU time (its thread clock: only while it runs, so other
            # load on the machine does not inflate it) per frame it received.
            res["cpu_ns_per_frame"] = [(a[0] - b0[0]) / max(1, a[1] - b0[1])
                                       for a, b0 in zip(after, before, strict=True)]
        ok = True
        return res
    finally:
        stack.close()
        net.close()
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"bench_overlay: {scenario} failed; logs kept in {tmp}", file=sys.stderr)


def proc_cpu_ns(pid: int) -> int:
    """User + system CPU time of a process, ns (clock ticks from /proc)."""
    f = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1_000_000_000 // os.sysconf("SC_CLK_TCK")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--rate-pps", type=int, default=100_000)
    ap.add_argument("--duration-s", type=float, default=4)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_overlay: needs root", file=sys.stderr)
        return 2
    if not GEN.exists():
        print(f"bench_overlay: build turnout-gen first ({GEN})", file=sys.stderr)
        return 2
    scen = ["turnoutd-plain", "turnoutd-vxlan", "ovs-plain", "ovs-vxlan", "kernel-plain",
            "kernel-vxlan"]
    rows: list[dict] = []
    for r in range(a.rounds):
        for s in scen:
            res = one(s, a.size, a.rate_pps, a.duration_s)
            res["round"] = r
            rows.append(res)
            cyc = res.get("cpu_ns_per_frame")
            print(f"round {r} {s:15} offered {res['offered_pps']:9.0f} delivered "
                  f"{res['delivered_pps']:9.0f} pps loss {res['loss']:.4f} p50 "
                  f"{res['p50_us']:.0f} us"
                  + (f" switch CPU ns/frame {[round(c) for c in cyc]}" if cyc else ""), flush=True)
    print(f"\nmedians over {a.rounds} rounds, {a.size} B at {a.rate_pps} pps offered "
          f"(load average {os.getloadavg()[0]:.1f}):")
    summary = {}
    for s in scen:
        rs = [x for x in rows if x["scenario"] == s]
        d = statistics.median(x["delivered_pps"] for x in rs)
        line = f"  {s:15} delivered {d:9.0f} pps"
        summary[s] = {"delivered_pps": d}
        if "cpu_ns_per_frame" in rs[0]:
            c = statistics.median(sum(x["cpu_ns_per_frame"]) for x in rs)
            summary[s]["cpu_ns_per_frame"] = c
            line += f"  switch CPU per frame (all hosts) {c:7.0f} ns"
        print(line)
    for sw in ("turnoutd", "ovs"):
        p = summary[f"{sw}-plain"]["cpu_ns_per_frame"]
        v = summary[f"{sw}-vxlan"]["cpu_ns_per_frame"]
        print(f"  VXLAN through two {sw} hosts: {v / p:.2f}x the CPU of plain switching on one "
              f"({v - p:.0f} ns more per frame: encap + decap + one more switch pass)")
        summary[f"{sw}_ratio_vxlan_over_plain"] = v / p
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps({"rows": rows, "summary": summary,
                                      "loadavg": os.getloadavg()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
