"""``turnout report`` of the same database gives the same numbers: the
summary and OpenFlow text of a synthetic default-like campaign
(synth_db.default_like) against the text the workbench printed for it
before its vocabulary became types (golden/report-default-like.txt,
written by ``turnout report`` of commit f2cf42f on that database)."""

from __future__ import annotations

from pathlib import Path

from synth_db import default_like
from turnout.report.openflow import openflow_text
from turnout.report.queries import load_campaign
from turnout.report.summary import summary_text
from turnout.results import ResultsDB

GOLDEN = Path(__file__).parent / "golden" / "report-default-like.txt"


def test_report_text_is_unchanged(tmp_path: Path) -> None:
    with ResultsDB(tmp_path / "r.db") as db:
        default_like(db)
        data = load_campaign(db, None)
        text = summary_text(data) + openflow_text(data)
    want = GOLDEN.read_text()
    if text != want:
        got = tmp_path / "got.txt"
        got.write_text(text)
        raise AssertionError(f"the report's text changed: diff {GOLDEN} {got}")
