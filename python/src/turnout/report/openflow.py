"""The report rows of the ``openflow`` scenario (issue 16, `make
bench-flows`): per rule set, concurrent flows and SUT, R+ and the SUT's own
cost per frame at R+, with each SUT's cost over OVS userspace's at the same
point (the target: turnoutd at most half).

An openflow point is stored under the scenario ``openflow/rN/mM/oK``
(``Point.stored_scenario``): N rules over M masks, the hit rule sending to
K ports (K − 1 mirrors)."""

from __future__ import annotations

import re
from collections import defaultdict

from ..results import Result
from .model import Section, Spread, Table, spread_of
from .queries import CampaignData, fmt, fmt_spread, sut_label

__all__ = ["openflow_section", "openflow_table", "openflow_text", "parse_label"]

_LABEL = re.compile(r"^openflow/r(\d+)/m(\d+)/o(\d+)$")
#: the cost every ratio is taken against
BASELINE = "ovs"


def parse_label(scenario: str) -> tuple[int, int, int] | None:
    """(rules, masks, outputs) of a stored openflow scenario, else None."""
    m = _LABEL.match(scenario)
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def _rplus(data: CampaignData) -> list[Result]:
    return [r for r in data.ok_results
            if r.method == "rplus" and parse_label(r.scenario) is not None]


def openflow_table(data: CampaignData) -> Table:
    """One row per (rule set, frame size, flows, SUT)."""
    t = Table(
        key="openflow-table", title="OpenFlow rule sets: rate and cost per frame",
        columns=["rules", "masks", "outputs", "flows", "size B", "SUT", "n",
                 "R+ Mpps [min–max]", "cost cyc/frame [min–max]", f"cost ÷ {BASELINE}"],
        note=("The same rules (turnout.ofrules) installed with ovs-ofctl -O OpenFlow13 "
              "add-flows into every SUT; the tester's flows all hit one rule of lowest "
              "priority, the others never match. Cost: the SUT's own account of busy cycles "
              "over the frames it received, at R+ (turnoutd: its workers' busy TSC cycles; "
              "OVS: the PMD threads' processing cycles); cost ÷ ovs: the median cost over OVS "
              "userspace's median at the same point (below 0.5 is issue 16's target). "
              "tester: the tester, not the SUT, set the rate in some repetition."),
    )
    by: dict[tuple[int, int, int, int, int], dict[str, list[Result]]] = defaultdict(
        lambda: defaultdict(list))
    for r in _rplus(data):
        lab = parse_label(r.scenario)
        assert lab is not None
        by[(*lab, int(r.frame_size_b), int(r.flows))][sut_label(r.sut, r.virtual_port)].append(r)
    for (rules, masks, outputs, size, flows), suts in sorted(by.items(), key=lambda x: (
            x[0][2], x[0][1], x[0][0], x[0][3], x[0][4])):
        costs: dict[str, Spread | None] = {}
        for label, rs in suts.items():
            c = [float(r.busy_cycles_per_frame) for r in rs if r.busy_cycles_per_frame]
            costs[label] = spread_of(c) if c else None
        base = costs.get(BASELINE)
        for label in sorted(suts, key=lambda s: (s != "turnoutd", s)):
            rs = suts[label]
            rate = spread_of([r.rate_total_pps / 1e6 for r in rs])
            cost = costs[label]
            ratio = (fmt(cost.median / base.median) if cost is not None and base is not None
                     and base.median > 0 and label != BASELINE else "–")
            t.rows.append([str(rules), str(masks), str(outputs), str(flows), str(size), label,
                           str(len(rs)), fmt_spread(rate), fmt_spread(cost), ratio])
            t.flags.append("tester" if any(r.tester_bound for r in rs) else "")
    return t


def openflow_section(data: CampaignData) -> Section:
    """The table above, when the campaign has openflow points."""
    sec = Section(
        key="openflow", title="OpenFlow rule sets",
        intro=("Scenario openflow (docs/bench.md, \"OpenFlow rule sets\"): p2p through N "
               "generated rules over M masks, the tester's flows (turnout-gen varying the UDP "
               "source port and source IP) all hitting one rule that outputs to K ports (the "
               "receiver and K − 1 mirror ports)."),
    )
    t = openflow_table(data)
    if t.rows:
        sec.tables.append(t)
    else:
        sec.empty = "No openflow results in this campaign."
    return sec


def openflow_text(data: CampaignData) -> str:
    """The table as plain text for the terminal ("" without openflow results)."""
    t = openflow_table(data)
    if not t.rows:
        return ""
    cols = [*t.columns, ""]
    rows = [[*r, f] for r, f in zip(t.rows, t.flags, strict=True)]
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = [t.title, "  ".join(c.ljust(w[i]) for i, c in enumerate(cols)).rstrip()]
    lines += ["  ".join(v.ljust(w[i]) for i, v in enumerate(r)).rstrip() for r in rows]
    return "\n".join(lines) + "\n"
