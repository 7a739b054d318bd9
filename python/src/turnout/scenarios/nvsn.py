"""``nvsn`` (Virtualized networking framework): ``pairs`` sender/receiver
containers, each pair's virtual ports cross-connected through one SUT."""

from __future__ import annotations

from .base import Plan, Point, Scenario

__all__ = ["NVSN"]


def _wire(plan: Plan, point: Point) -> None:
    for i in range(point.pairs):
        plan.links.append((plan.ep(f"s{i}", f"snd{i}", True), plan.ep(f"r{i}", f"rcv{i}", True)))
        plan.flows.append((f"s{i}", f"r{i}"))


def _virtual(point: Point) -> bool:
    return True


NVSN = Scenario("nvsn", section="nvsn", order=5, wire=_wire, virtual=_virtual)
