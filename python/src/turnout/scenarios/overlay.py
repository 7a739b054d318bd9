"""``overlay``: two hosts joined by a VXLAN tunnel, built by turnout.overlay
(not by wiring.build): here only its check."""

from __future__ import annotations

from ..sut.base import SutAdapter
from .base import Point, Scenario, Unsupported

__all__ = ["OVERLAY"]


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    from ..overlay import overlay_support  # two hosts: built by turnout.overlay

    why = overlay_support(sut)
    if why:
        raise Unsupported(why)


OVERLAY = Scenario("overlay", section="overlay", order=None, wire=None, check=_check)
