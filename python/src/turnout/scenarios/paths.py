"""The four paths through a switch ("Software switches for NFV" §4.1):
``p2p`` (tester → SUT → tester), ``p2v`` and ``v2p`` (between the tester and
a VNF's virtual port), ``v2v`` (between two VNFs' virtual ports)."""

from __future__ import annotations

from .base import Plan, Point, Scenario

__all__ = ["P2P", "P2V", "V2P", "V2V", "wire_p2p"]


def wire_p2p(plan: Plan, point: Point) -> None:
    """t0 → SUT → t1, both the tester's."""
    plan.links.append((plan.ep("t0", "tester", False), plan.ep("t1", "tester", False)))
    plan.flows.append(("t0", "t1"))


def _wire_p2v(plan: Plan, point: Point) -> None:
    plan.links.append((plan.ep("t0", "tester", False), plan.ep("v0", "vnf0", True)))
    plan.flows.append(("t0", "v0"))


def _wire_v2p(plan: Plan, point: Point) -> None:
    plan.links.append((plan.ep("t0", "tester", False), plan.ep("v0", "vnf0", True)))
    plan.flows.append(("v0", "t0"))


def _wire_v2v(plan: Plan, point: Point) -> None:
    plan.links.append((plan.ep("v0", "vnf0", True), plan.ep("v1", "vnf1", True)))
    plan.flows.append(("v0", "v1"))


def _virtual(point: Point) -> bool:
    return True


P2P = Scenario("p2p", section="throughput", order=0, wire=wire_p2p)
P2V = Scenario("p2v", section="throughput", order=1, wire=_wire_p2v, virtual=_virtual)
V2P = Scenario("v2p", section="throughput", order=2, wire=_wire_v2p, virtual=_virtual)
V2V = Scenario("v2v", section="throughput", order=3, wire=_wire_v2v, virtual=_virtual)
