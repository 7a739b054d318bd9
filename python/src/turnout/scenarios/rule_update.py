"""``rule_update`` ("Hard or hopeless" §3.5): a stream t0 → A through the
SUT, and a third port B the SUT's rule update moves it to
(measure/update.py)."""

from __future__ import annotations

from ..sut.base import SutAdapter
from .base import Plan, Point, Scenario, Unsupported

__all__ = ["RULE_UPDATE"]


def _wire(plan: Plan, point: Point) -> None:
    # t0 → A (t1) through the SUT; B (t2) is a port with no traffic until
    # the update moves the stream there
    plan.links.append((plan.ep("t0", "tester", False), plan.ep("t1", "tester", False)))
    plan.ep("t2", "tester", False)
    plan.flows.append(("t0", "t1"))


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    if sut.direct:
        raise Unsupported("a rule update needs a switch: the bare wire has no rules")
    if point.direction != "uni":
        raise Unsupported("a rule update moves one stream: direction must be uni")


# quiet: the destinations' counters leave multicast out too (measure/update.py)
RULE_UPDATE = Scenario("rule_update", section="rule-update", order=None, wire=_wire,
                       check=_check, quiet=True, update=("t0", "t1", "t2"))
