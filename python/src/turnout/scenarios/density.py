"""``density`` (mSwitch §4.3): p2p through the SUT, plus idle ports up to
``ports`` attached to it."""

from __future__ import annotations

from ..sut.base import SutAdapter, SutPort, Topology
from .base import Plan, Point, Scenario, Unsupported
from .paths import wire_p2p

__all__ = ["DENSITY"]


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    if sut.direct:
        raise Unsupported("port density has no meaning without a switch")
    if point.ports > sut.max_ports:
        raise Unsupported(f"{sut.name} takes at most {sut.max_ports} ports")
    if point.ports < 2:
        raise Unsupported("port density needs at least 2 ports")


def _idle_ports(plan: Plan, topo: Topology, point: Point) -> None:
    idle = plan.tb.namespace("idle")
    for _ in range(point.ports - 2):
        v = plan.tb.veth(idle, topo.ns, tag="i")
        topo.ports.append(SutPort(name=v.b, kind="veth", iface=v.b, idle=True))


DENSITY = Scenario("density", section="density", order=6, wire=wire_p2p, check=_check,
                   finish=_idle_ports)
