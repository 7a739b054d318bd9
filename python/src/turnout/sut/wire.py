"""The bare wire: no switch. Each cross-connect becomes one veth pair
between the two endpoints, or, between two virtual endpoints when the tester
speaks memif, a memif link that one tester port serves: the tester's own
ceiling on that path and port type. Every ratio is taken against this.

Across hosts (docs/bench.md, "Across hosts") the testbed makes the links:
two tester ports are two wires joined on the SUT's host by a tc mirred
redirect at each one's ingress (the cables, the NICs and the SUT host's
receive and transmit, no switching); a tester port and a VNF's is the wire
itself, read by the VNF on the SUT's host."""

from __future__ import annotations

from ..testbed import Testbed
from .base import SutAdapter, Topology

__all__ = ["BareWire"]


class BareWire(SutAdapter):
    name = "wire"
    reference = True
    direct = True
    supports_memif = True
    max_ports = 2

    def requires(self) -> list[tuple[str, str]]:
        # across hosts the redirect that joins two wires is tc's
        return [] if self.host.is_local else [("tc", "iproute2")]

    def version(self) -> str:
        if self.host.is_local:
            return f"veth linux {self.host.kernel_release()}"
        return f"wires, tc mirred redirect, linux {self.host.kernel_release()}"

    def config(self) -> dict[str, object]:
        kind = "veth pair per cross-connect" if self.host.is_local else \
            "the wires, joined on the SUT's host by tc mirred redirects"
        return {"kind": kind, "options": self.options}

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.attach(tb, topo)

    def kernel_threads_note(self) -> str:
        if not self.host.is_local:
            return "the redirect runs in the receive softirq of the SUT host's NICs"
        return "veth forwarding runs in the sender's softirq"
