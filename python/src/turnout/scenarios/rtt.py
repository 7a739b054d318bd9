"""``rtt`` (Virtualized networking framework §4.5): the tester sends bursts
of ``burst`` frames through the SUT to a turnout-gen ``reflect`` server in a
VNF namespace, which sends each frame back; the tester's latency is the
round trip."""

from __future__ import annotations

from ..sut.base import SutAdapter
from .base import Plan, Point, Scenario, Unsupported

__all__ = ["RTT"]


def _wire(plan: Plan, point: Point) -> None:
    plan.links.append((plan.ep("t0", "tester", False),
                       plan.ep("v0", "vnf0", True, traffic=False)))
    plan.flows.append(("t0", "t0"))  # out to the server and back to the same port
    plan.reflectors.append("v0")


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    if "reflect" not in tester_roles:
        raise Unsupported("round trips need turnout-gen's reflect role (this tester lacks it)")
    if point.direction != "uni":
        raise Unsupported("a round trip is both ways already: direction must be uni")


def _virtual(point: Point) -> bool:
    return True


RTT = Scenario("rtt", section="rtt", order=None, wire=_wire, check=_check, virtual=_virtual)
