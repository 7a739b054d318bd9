"""Linux bridge in the SUT namespace, STP off, static FDB entries for the
MACs behind every port so nothing is flooded."""

from __future__ import annotations

import platform
from typing import Any

from ..testbed import Testbed
from .base import SutAdapter, Topology

__all__ = ["LinuxBridge"]


class LinuxBridge(SutAdapter):
    name = "bridge"
    max_ports = 1024

    def available(self) -> str | None:
        return None if __import__("shutil").which("bridge") else "iproute2 'bridge' not found"

    def version(self) -> str:
        return f"linux {platform.release()}"

    def config(self) -> dict[str, Any]:
        return {"stp": False, "forward_delay": 0, "fdb": "static per port", "learning": False,
                "ports": len(self.topo.ports) if self.topo else 0, "options": self.options}

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.tb, self.topo = tb, topo
        members = [p.iface for p in topo.ports]
        self.br = tb.bridge(topo.ns, members)
        for p in topo.ports:
            # learning off: with it on, a frame a chain VNF sends on with a
            # foreign source MAC moves that MAC's *static* entry to the VNF's
            # port (the kernel lets learning move non-sticky static entries),
            # and the loopback chain delivered nothing (2026-11-21)
            tb.run(["bridge", "link", "set", "dev", p.iface, "learning", "off"], netns=topo.ns)
            for mac in p.macs:
                tb.fdb_static(topo.ns, mac, p.iface)

    def kernel_threads_note(self) -> str:
        return "bridge forwarding runs in softirq of the receiving veth (the sender's CPU)"
