"""A test point: the parameters that select one measurement besides the
SUT, the method and the repetition, defined once.

The scenario families (turnout.scenarios) build it, the campaign expands
into it, trials and results hold it (``point``; one column per field:
results/schema.py) and the report's point keys hold it (report/points.py).
Results store an openflow point's scenario with its rule set
(``openflow/r100/m8/o2``, ``stored_scenario``) so that no report pools two
rule sets; ``from_stored`` reads that name back (also from a database from
before the rule set had columns of its own).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, fields
from typing import Any

__all__ = ["OPENFLOW_FIELDS", "POINT_FIELDS", "AtPoint", "TestPoint", "openflow_fields"]

_STORED = re.compile(r"^openflow/(?:(v2v)/)?r(\d+)/m(\d+)/o(\d+)(?:/acl(\d+)-(above|below))?$")


@dataclass(frozen=True)
class TestPoint:
    """The parameters that select one test point (besides SUT and method)."""

    __test__ = False  # not a pytest test class

    scenario: str = "p2p"
    direction: str = "uni"
    frame_size_b: int = 64
    flows: int = 1
    burst: int = 32
    vnfs: int = 0
    ports: int = 2
    pairs: int = 1
    #: what the virtual endpoints of this point are (memif | vhost-user);
    #: "" = the campaign's ``virtual_port``
    virtual_port: str = ""
    #: openflow: the rule set (turnout.ofrules) and the hit rule's outputs
    #: (0 at the other scenarios)
    rules: int = 0
    masks: int = 0
    outputs: int = 0
    #: openflow: ACL rules that tell the tester's flows apart and match none
    #: of them, "above" or "below" the hit rule (turnout.ofrules; 0, "")
    acl: int = 0
    acl_at: str = ""

    def stored_scenario(self) -> str:
        """The scenario as results store it: an openflow point names its
        rule set (``openflow/r100/m8/o2``), so the report never pools two
        rule sets as repetitions of one point; ``/acl1000-above`` when it has
        ACL rules)."""
        if self.scenario != "openflow":
            return self.scenario
        path = "v2v/" if self.virtual_port else ""
        acl = f"/acl{self.acl}-{self.acl_at}" if self.acl else ""
        return f"openflow/{path}r{self.rules}/m{self.masks}/o{self.outputs}{acl}"

    @classmethod
    def from_stored(cls, scenario: str, **columns: Any) -> TestPoint:
        """The test point of a stored row: its scenario as stored
        (``stored_scenario``) and its other fields' columns (a missing one
        takes its default). A rule set the name gives fills in columns a
        writer left at 0 (rows from before they had columns). A name that
        does not come back as it was stored (not written by
        ``stored_scenario``) is kept as the point's scenario, verbatim, so a
        row reads back and reports the same."""
        unknown = set(columns) - set(POINT_FIELDS)
        if unknown:
            raise TypeError(f"not a test point field: {', '.join(sorted(unknown))}")
        kw = {k: v for k, v in columns.items() if v is not None}
        of = openflow_fields(scenario)
        if of is not None:
            if not kw.get("rules"):
                kw.update({f: of[f] for f in OPENFLOW_FIELDS})
            point = cls(scenario="openflow", **kw)
            if point.stored_scenario() == scenario:
                return point
        return cls(scenario=scenario, **kw)


#: the fields every trial and result stores (one column each)
POINT_FIELDS: tuple[str, ...] = tuple(f.name for f in fields(TestPoint))
#: the fields only an openflow point sets
OPENFLOW_FIELDS: tuple[str, ...] = ("rules", "masks", "outputs", "acl", "acl_at")


class AtPoint:
    """Something taken at a test point (a trial, a result, the report's
    point key): its ``point``, and the scenario as results store it."""

    point: TestPoint

    @property
    def scenario(self) -> str:
        """The scenario as results store it (``TestPoint.stored_scenario``:
        an openflow point's names its rule set)."""
        return self.point.stored_scenario()


def openflow_fields(stored: str) -> dict[str, Any] | None:
    """The rule set a stored openflow scenario names (``rules``, ``masks``,
    ``outputs``, ``acl``, ``acl_at``, and ``path``: "p2p" or "v2v"), or None
    when it names none."""
    m = _STORED.match(stored)
    if not m:
        return None
    return {"path": m[1] or "p2p", "rules": int(m[2]), "masks": int(m[3]),
            "outputs": int(m[4]), "acl": int(m[5] or 0), "acl_at": m[6] or ""}
