"""``loopback`` ("Software switches for NFV" Fig. 7): tester → SUT → VNF₁ →
SUT → … → VNF_N → SUT → tester, the chain VNFs turnout-gen ``fwd`` helpers
(or QEMU guests: wiring.build's ``vnf_kind``)."""

from __future__ import annotations

from ..sut.base import SutAdapter
from .base import Plan, Point, Scenario, Unsupported

__all__ = ["LOOPBACK"]


def _wire(plan: Plan, point: Point) -> None:
    prev = plan.ep("t0", "tester", False)
    for i in range(point.vnfs):
        a = plan.ep(f"v{i}a", f"vnf{i}", True, traffic=False)
        b = plan.ep(f"v{i}b", f"vnf{i}", True, traffic=False)
        plan.links.append((prev, a))
        plan.helpers.append((a, b))
        prev = b
    plan.links.append((prev, plan.ep("t1", "tester", False)))
    plan.flows.append(("t0", "t1"))


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    if point.vnfs > 0 and "fwd" not in tester_roles:
        raise Unsupported("loopback with VNFs needs turnout-gen's fwd role (this tester lacks it)")


def _virtual(point: Point) -> bool:
    return point.vnfs > 0


LOOPBACK = Scenario("loopback", section="loopback", order=4, wire=_wire, check=_check,
                    virtual=_virtual)
