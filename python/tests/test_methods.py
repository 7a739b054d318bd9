"""The methods are listed once (turnout/methods.py): the campaign parser,
the results and the report take their lists from the table, unchanged."""

from __future__ import annotations

from turnout.campaign.spec import METHODS
from turnout.methods import METHOD_TABLE, throughput_methods
from turnout.report.queries import METHOD_LABEL, METHOD_STYLE, THROUGHPUT_METHODS
from turnout.results.models import METHODS as RESULT_METHODS


def test_the_lists_come_from_the_table() -> None:
    # the lists as they were written by hand before the table
    assert METHODS == ("rplus", "ndr", "pdr", "latency", "sweep", "fixed", "rule_update")
    assert set(RESULT_METHODS) == {"fixed", "rplus", "ndr", "pdr", "latency", "sweep",
                                   "rule_update", "flow_mods"}
    assert THROUGHPUT_METHODS == throughput_methods() == ("rplus", "pdr", "ndr")
    assert {k: METHOD_LABEL[k] for k in ("rplus", "pdr", "ndr", "fixed", "latency")} == {
        "rplus": "R+", "pdr": "PDR", "ndr": "NDR", "fixed": "fixed", "latency": "latency"}
    assert all(METHOD_LABEL.get(m.name, m.name) == m.label for m in METHOD_TABLE)
    assert METHOD_STYLE == {"rplus": "-", "pdr": "--", "ndr": ":"}


def test_every_campaign_method_is_in_the_docs() -> None:
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "bench.md").read_text()
    for m in METHODS:
        assert f"`{m}`" in doc, m
