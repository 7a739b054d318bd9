"""The measurement methods, listed once: what a campaign may name, the
order they run in at a test point, how reports label and draw them, and
which module runs them (docs/bench.md, "Methods").

The campaign parser (``campaign.spec.METHODS``), the results' vocabulary
(``results.models.METHODS``) and the report (``report.queries``:
``THROUGHPUT_METHODS``, ``METHOD_LABEL``, ``METHOD_STYLE``) take their
lists from this table.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["METHOD_TABLE", "Method", "campaign_methods", "labels", "styles",
           "throughput_methods"]


@dataclass(frozen=True)
class Method:
    """One method of measurement."""

    #: its name in campaigns, work items and results
    name: str
    #: how tables and plots name it
    label: str
    #: where it runs (the module of its runner)
    runner: str
    #: a campaign may name it in ``campaign.methods`` (``flow_mods`` results
    #: come from ``rule_update`` points)
    in_campaigns: bool = True
    #: its result is a throughput: the report's order of preference (lower
    #: first), None when it is not one
    throughput_rank: int | None = None
    #: its line style in plots ("" when it has none of its own)
    style: str = ""


#: in the order they run at a test point (latency and sweep need R+ first)
METHOD_TABLE: tuple[Method, ...] = (
    Method("rplus", "R+", "search/rplus.py: one trial at saturating input",
           throughput_rank=0, style="-"),
    Method("ndr", "NDR", "search/mlr.py or search/binary.py: loss 0", throughput_rank=2, style=":"),
    Method("pdr", "PDR", "search/mlr.py or search/binary.py: loss ≤ 0.5 %", throughput_rank=1,
           style="--"),
    Method("latency", "latency", "campaign/runner.py: trials at fractions of R+"),
    Method("sweep", "sweep", "campaign/runner.py: trials at the sweep's fractions of R+"),
    Method("fixed", "fixed", "campaign/runner.py: a trial at each rates_pps"),
    Method("rule_update", "rule_update", "measure/update.py: a rule moved under traffic"),
    Method("flow_mods", "flow_mods", "measure/update.py: flows installed in bulk",
           in_campaigns=False),
)


def campaign_methods() -> tuple[str, ...]:
    """The methods a campaign may name, in run order."""
    return tuple(m.name for m in METHOD_TABLE if m.in_campaigns)


def throughput_methods() -> tuple[str, ...]:
    """The methods whose result is a throughput, in order of preference."""
    ranked = [m for m in METHOD_TABLE if m.throughput_rank is not None]
    return tuple(m.name for m in sorted(ranked, key=lambda m: m.throughput_rank or 0))


def labels() -> dict[str, str]:
    """Method name -> label."""
    return {m.name: m.label for m in METHOD_TABLE}


def styles() -> dict[str, str]:
    """Method name -> plot line style, for the methods that have one."""
    return {m.name: m.style for m in METHOD_TABLE if m.style}
