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
        return {"stp": False, "forward_delay": 0, "fdb": "static per port",
                "ports": len(self.topo.ports) if self.topo else 0, "options": self.options}

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.tb, self.topo = tb, topo
        members = [p.iface for p in topo.ports]
        self.br = tb.bridge(topo.ns, members)
        for p in topo.ports:
            for mac in p.macs:
                tb.fdb_static(topo.ns, mac, p.iface)

    def kernel_threads_note(self) -> str:
        return "bridge forwarding runs in softirq of the receiving veth (the sender's CPU)"
