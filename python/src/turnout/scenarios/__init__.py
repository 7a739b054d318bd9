"""Scenarios ("Software switches for NFV" §4.1, "Virtualized networking
framework" Fig. 3; docs/references.md): who sends where through the SUT.

A scenario is described as *endpoints* (interfaces of the tester or of a
VNF, each in a namespace) and *links* (pairs of endpoints the SUT must
connect, both ways). One module per family says what its scenarios wire
and check:

- ``paths``: ``p2p``, ``p2v``, ``v2p``, ``v2v``;
- ``loopback``: ``vnfs`` chained turnout-gen ``fwd`` VNFs;
- ``nvsn``: ``pairs`` sender/receiver containers;
- ``density``: p2p plus idle ports up to ``ports``;
- ``rtt``: client/server round trips through a ``reflect`` server;
- ``rule_update``: a stream the SUT's rule update moves to a third port;
- ``overlay``: two hosts joined by a VXLAN tunnel (built by
  ``turnout.overlay``, not here);
- ``openflow``: p2p or v2v through an OpenFlow rule set.

``table`` lists them all (``TABLE``: check, wiring, cell port, rank on the
report page, report section); ``wiring`` holds what they share: ``check``,
``cell_port``, ``excluded`` and ``build``, which turns a family's plan into
SUT ports, wires and streams.
"""

from .base import Built, Plan, Point, Scenario, Unsupported
from .table import SCENARIO_ORDER, SCENARIOS, TABLE, scenario_rank
from .wiring import build, cell_port, check, excluded

__all__ = ["SCENARIOS", "SCENARIO_ORDER", "TABLE", "Built", "Plan", "Point", "Scenario",
           "Unsupported", "build", "cell_port", "check", "excluded", "scenario_rank"]
