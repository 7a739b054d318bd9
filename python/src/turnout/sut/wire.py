"""The bare wire: no switch. Each cross-connect becomes one veth pair
between the two endpoints, or, between two virtual endpoints when the tester
speaks memif, a memif link that one tester port serves: the tester's own
ceiling on that path and port type. Every ratio is taken against this."""

from __future__ import annotations

from ..testbed import Testbed
from .base import SutAdapter, Topology

__all__ = ["BareWire"]


class BareWire(SutAdapter):
    name = "wire"
    direct = True
    supports_memif = True
    max_ports = 2

    def available(self) -> str | None:
        return None

    def version(self) -> str:
        import platform

        return f"veth linux {platform.release()}"

    def config(self) -> dict[str, object]:
        return {"kind": "veth pair per cross-connect", "options": self.options}

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.tb, self.topo = tb, topo

    def kernel_threads_note(self) -> str:
        return "veth forwarding runs in the sender's softirq"
