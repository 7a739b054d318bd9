"""A SUT's switch on one host of the overlay scenario (turnout/overlay.py,
docs/bench.md "Overlay"): what an adapter declares as its two-host set-up
(``SutAdapter.overlay_host``, a subclass of ``OverlayHost`` next to the
adapter: sut/turnoutd.py, sut/ovs.py, sut/linux_bridge.py).

Every host is wired the same (``HostWiring``: its namespace, its pod's
veth end, its underlay veth end, its tunnel address and the peer's); the
tunnel is VXLAN, ``VNI`` over UDP port ``VXLAN_PORT``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

from ..measure.cost import CostSample
from ..testbed import Testbed

if TYPE_CHECKING:
    from .base import SutAdapter

__all__ = ["VNI", "VXLAN_PORT", "HostWiring", "JointAccount", "OverlayHost"]

VNI = 100
VXLAN_PORT = 4789


@dataclass
class HostWiring:
    """One emulated host: its namespace, its pod's veth end (the switch's
    side), the underlay veth end, and its tunnel address and the peer's."""

    name: str  # "A" | "B"
    ns: str
    pod_iface: str
    underlay_iface: str
    local_ip: str
    remote_ip: str
    #: destination MAC -> which side it is behind ("pod" | "tunnel")
    macs: dict[str, str] = field(default_factory=dict)


class OverlayHost(abc.ABC):
    """A switch on one host (``host``: "A" or "B") of the SUT ``base``: set
    up, account (``sample``: this host's own cumulative cycles and received
    frames), torn down."""

    #: what its cycles are, both hosts summed (the overlay's cost source)
    cost_source: ClassVar[str] = ""
    #: where its forwarding runs when not in a process of its own ("": in
    #: its processes)
    kernel_note: ClassVar[str] = ""

    def __init__(self, base: SutAdapter, host: str) -> None:
        self.base, self.host = base, host

    @abc.abstractmethod
    def setup(self, tb: Testbed, w: HostWiring, cpus: str) -> None: ...

    def pair(self, peer: OverlayHost) -> None:  # noqa: B027  # a hook: most need nothing
        """Both hosts are set up: what one must know of the other."""

    def ready(self) -> bool:
        """The tunnel can carry frames (its remote is resolved)."""
        return True

    @abc.abstractmethod
    def version(self) -> str: ...

    def config(self) -> dict[str, Any]:
        return {}

    def pids(self) -> list[int]:
        return []

    def sample(self) -> CostSample | None:
        """This host's own cumulative cycles and received frames (None: no
        sample now). A switch whose hosts share one account is a
        ``JointAccount`` instead."""
        return None

    def teardown(self) -> None:
        return None


@runtime_checkable
class JointAccount(Protocol):
    """An ``OverlayHost`` whose hosts keep no account of their own: one
    account covers both (the kernel's time per CPU, where the Linux
    bridge's hosts both forward), read once for the pair instead of
    ``sample`` per host. Only the Linux bridge's host is one."""

    def joint_sample(self, hosts: list[OverlayHost], cpus: list[int]) -> CostSample | None:
        """Both hosts' cycles on ``cpus`` and frames carried (received by A
        + received by B) / 2; None: no sample now."""
        ...
