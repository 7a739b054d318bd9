"""Linux bridge in the SUT namespace, STP off, static FDB entries for the
MACs behind every port so nothing is flooded."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from ..measure.cost import CostSample, cpu_list, netdev_rx_packets
from ..measure.cpu import CLK_TCK, nominal_hz
from ..measure.kernel import KernelClock
from ..testbed import Testbed
from .base import SutAdapter, Topology
from .overlay_host import VNI, VXLAN_PORT, HostWiring, OverlayHost

__all__ = ["BridgeOverlayHost", "LinuxBridge"]


class BridgeOverlayHost(OverlayHost):
    """A Linux bridge on one host of the overlay: the pod's veth and a
    kernel ``vxlan`` netdev (nolearning, static FDB entries). A
    ``JointAccount``: the kernel's softirq time is per CPU, not per host."""

    cost_source = ("kernel time of the SUT's CPUs outside processes (both hosts' bridges "
                   "and vxlan; interrupts that woke an idle CPU included)")
    kernel_note = ("both hosts' bridge and vxlan forwarding runs in the receive softirq of "
                   "their ports, steered to the SUT's CPUs by RPS (testbed)")

    def setup(self, tb: Testbed, w: HostWiring, cpus: str) -> None:
        self.w, self.tb = w, tb
        ns = w.ns
        tb.run(["ip", "addr", "add", f"{w.local_ip}/24", "dev", w.underlay_iface], netns=ns)
        self.vx = tb.ifname("x")
        tb.run(["ip", "link", "add", self.vx, "type", "vxlan", "id", str(VNI), "local",
                w.local_ip, "remote", w.remote_ip, "dstport", str(VXLAN_PORT), "dev",
                w.underlay_iface, "nolearning"], netns=ns)
        self.br = tb.bridge(ns, [w.pod_iface, self.vx])
        for p in (w.pod_iface, self.vx):
            tb.run(["bridge", "link", "set", "dev", p, "learning", "off"], netns=ns)
        for mac, side in w.macs.items():
            tb.fdb_static(ns, mac, w.pod_iface if side == "pod" else self.vx)
        tb.link_up(self.vx, ns)
        # a process in the host's namespace: its interfaces' counters are
        # read from /proc/PID/net/dev during a trial, nothing spawned
        self.holder = tb.spawn(["sleep", "infinity"], netns=ns, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)

    def rx_frames(self) -> int:
        """Frames this host's switch received: from its pod and from the underlay."""
        return netdev_rx_packets(self.holder.pid, [self.w.pod_iface, self.w.underlay_iface])

    def version(self) -> str:
        return LinuxBridge().version()

    def config(self) -> dict[str, Any]:
        return {"bridge": getattr(self, "br", ""), "vxlan": getattr(self, "vx", ""),
                "learning": False, "fdb": "static"}

    def joint_sample(self, hosts: list[OverlayHost], cpus: list[int]) -> CostSample | None:
        """The kernel time of the SUT's CPUs, where both hosts' bridges run;
        frames carried = (received by A + received by B) / 2."""
        now = time.monotonic()
        bridges = [h for h in hosts if isinstance(h, BridgeOverlayHost)]
        if any(getattr(h, "holder", None) is None or h.holder.poll() is not None
               for h in bridges):
            return None
        if getattr(self, "kernel", None) is None:
            self.kernel = KernelClock(cpus)
        hz = nominal_hz()[0]
        tick = hz / CLK_TCK  # /proc/stat counts in these steps
        rx = [h.rx_frames() for h in bridges]
        return CostSample(now, self.kernel.read() * hz, sum(rx) // 2, tick)

    def teardown(self) -> None:
        holder = getattr(self, "holder", None)
        if holder is not None:
            self.tb.stop(holder)


class LinuxBridge(SutAdapter):
    name = "bridge"
    overlay_host = BridgeOverlayHost
    max_ports = 1024

    def requires(self) -> list[tuple[str, str]]:
        return [("bridge", "iproute2")]

    def version(self) -> str:
        return f"linux {self.host.kernel_release()}"

    def config(self) -> dict[str, Any]:
        return {"stp": False, "forward_delay": 0, "fdb": "static per port", "learning": False,
                "ports": len(self.topo.ports) if self.topo else 0, "options": self.options}

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.attach(tb, topo)
        members = [p.iface for p in topo.ports]
        self.br = tb.bridge(topo.ns, members)
        for p in topo.ports:
            # learning off: with it on, a frame a chain VNF sends on with a
            # foreign source MAC moves that MAC's *static* entry to the VNF's
            # port (the kernel lets learning move non-sticky static entries),
            # and the loopback chain delivers nothing
            tb.run(["bridge", "link", "set", "dev", p.iface, "learning", "off"], netns=topo.ns)
            for mac in p.macs:
                tb.fdb_static(topo.ns, mac, p.iface)
        # a process in the SUT's namespace, so its interfaces' counters can be
        # read from /proc/PID/net/dev during a trial without spawning anything
        self.holder = tb.spawn(["sleep", "infinity"], netns=topo.ns,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.cpus = cpu_list(topo.cpus)
        self.kernel = KernelClock(self.cpus, host=self.host)
        self.hz = float(self.host.procfs("nominal_hz")[0])  # the SUT host's TSC

    cost_source = ("kernel time of the SUT's CPUs outside processes (/proc/stat: wall - idle - "
                   "process time; interrupts that woke an idle CPU included) over frames its "
                   "ports received; RPS steers the ports' receive softirq there")

    def cost_sample(self) -> CostSample | None:
        holder = getattr(self, "holder", None)
        if holder is None or holder.poll() is not None or self.topo is None:
            return None
        busy_s = self.kernel.read()
        frames = int(self.host.procfs("netdev_rx_packets", pid=holder.pid,
                                      ifaces=[p.iface for p in self.topo.ports]))
        tick = self.hz / CLK_TCK  # /proc/stat counts in these steps
        return CostSample(0.0, busy_s * self.hz, frames, tick)

    has_rules = True

    def move_rule(self, src: str, dst: str, to: str) -> str:
        """``bridge fdb replace`` of dst's MACs onto to's port."""
        assert self.tb is not None and self.topo is not None
        dev = self.topo.port(to).iface
        cmds = [["bridge", "fdb", "replace", mac, "dev", dev, "master", "static"]
                for mac in self.topo.port(dst).macs]
        for cmd in cmds:
            self.tb.run(cmd, netns=self.topo.ns)
        return "; ".join(" ".join(c) for c in cmds)

    def teardown(self) -> None:
        holder = getattr(self, "holder", None)
        if self.tb is not None and holder is not None:
            self.tb.stop(holder)

    def kernel_threads_note(self) -> str:
        return ("bridge forwarding runs in the receive softirq of its ports, steered to the "
                "SUT's CPUs by RPS (testbed)")
