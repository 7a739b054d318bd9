"""Linux bridge in the SUT namespace, STP off, static FDB entries for the
MACs behind every port so nothing is flooded."""

from __future__ import annotations

import subprocess
from typing import Any

from ..measure.cost import CostSample, cpu_list
from ..measure.cpu import CLK_TCK
from ..measure.kernel import KernelClock
from ..testbed import Testbed
from .base import SutAdapter, Topology

__all__ = ["LinuxBridge"]


class LinuxBridge(SutAdapter):
    name = "bridge"
    overlay_host = "bridge"
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
