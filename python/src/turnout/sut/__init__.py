"""SUT adapters, one per file, listed in one table."""

from __future__ import annotations

from typing import Any

from .base import SutAdapter, SutError, SutPort, Topology
from .linux_bridge import LinuxBridge
from .ovs import Ovs, OvsDpdk
from .testpmd import Testpmd
from .turnoutd import Turnoutd, TurnoutdPoll
from .wire import BareWire

__all__ = ["SUTS", "SutAdapter", "SutError", "SutPort", "Topology", "make_sut"]

#: name -> adapter class. Adding a SUT: one file and one line here.
SUTS: dict[str, type[SutAdapter]] = {
    "wire": BareWire,
    "turnoutd": Turnoutd,
    "turnoutd-poll": TurnoutdPoll,
    "bridge": LinuxBridge,
    "ovs": Ovs,
    "ovs-dpdk": OvsDpdk,
    "testpmd": Testpmd,
}


def make_sut(name: str, options: dict[str, Any] | None = None,
             base: str | None = None) -> SutAdapter:
    """An adapter instance by table name; with ``base``, a named variant of
    that registered SUT (a campaign's ``[sut.NAME] base = "..."``): the
    base's adapter with these options, under the name ``name`` (its results,
    testbed directory and reports are apart from the base's)."""
    sut = SUTS[base or name](options)
    if base is not None and name != base:
        sut.name = name
    return sut
