"""The scenario table: every scenario, its family module's wiring and check,
whether its cells have virtual ports, its rank on the report page and the
report section that shows it."""

from __future__ import annotations

from .base import Scenario
from .density import DENSITY
from .loopback import LOOPBACK
from .nvsn import NVSN
from .openflow import OPENFLOW
from .overlay import OVERLAY
from .paths import P2P, P2V, V2P, V2V
from .rtt import RTT
from .rule_update import RULE_UPDATE

__all__ = ["BY_NAME", "SCENARIOS", "SCENARIO_ORDER", "TABLE", "scenario_rank", "section_of"]

#: every scenario, in the order a campaign's error messages list them
TABLE: tuple[Scenario, ...] = (P2P, P2V, V2P, V2V, LOOPBACK, NVSN, DENSITY, RTT, RULE_UPDATE,
                               OVERLAY, OPENFLOW)
BY_NAME: dict[str, Scenario] = {s.name: s for s in TABLE}
#: the scenario names
SCENARIOS: tuple[str, ...] = tuple(BY_NAME)
#: scenarios in the order the report page shows them (others follow, by name)
SCENARIO_ORDER: tuple[str, ...] = tuple(
    s.name for s in sorted((s for s in TABLE if s.order is not None),
                           key=lambda s: s.order or 0))


def scenario_rank(scenario: str) -> tuple[int, str]:
    """Sort key putting scenarios in the order of SCENARIO_ORDER (the others
    after them, by name)."""
    try:
        return (SCENARIO_ORDER.index(scenario), scenario)
    except ValueError:
        return (len(SCENARIO_ORDER), scenario)


def section_of(scenario: str) -> str:
    """The key of the report section that shows a scenario (its row's
    ``section``; a stored name, ``openflow/r100/m8/o2``, is its family's),
    or "" for a scenario the table does not know (a database from another
    release): only the throughput section's table shows it."""
    row = BY_NAME.get(scenario.split("/", 1)[0])
    return row.section if row is not None else ""
