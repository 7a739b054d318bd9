"""``turnout report`` and ``turnout compare``, registered through the CLI's
command table (``turnout.cli.COMMAND_MODULES``)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import Command
from ..results.cli import DEFAULT_DB

__all__ = ["COMMANDS", "DEFAULT_REPORT_DIR"]

#: Where the page goes unless -o says otherwise.
DEFAULT_REPORT_DIR = "results/report"


def _configure_report(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--campaign", help="campaign name (its latest run) or run id; default: "
                   "the latest run in the database")
    p.add_argument("-o", "--output", default=DEFAULT_REPORT_DIR, metavar="DIR",
                   help=f"directory for index.html and the plots (default {DEFAULT_REPORT_DIR})")
    p.add_argument("--no-summary", action="store_true",
                   help="do not print the summary table")


def _run_report(args: argparse.Namespace) -> int:
    from ..results import ResultsDB
    from .build import build_report
    from .openflow import openflow_text
    from .summary import summary_text

    if not Path(args.db).exists():
        print(f"turnout report: no results database at {args.db}", file=sys.stderr)
        return 2
    with ResultsDB(args.db) as db:
        try:
            out = build_report(db, args.campaign, args.output)
        except KeyError as e:
            print(f"turnout report: {e.args[0]}", file=sys.stderr)
            return 2
        if not args.no_summary:
            sys.stdout.write(summary_text(out.data))
            sys.stdout.write(openflow_text(out.data))
    print(f"report: {out.page.resolve()} ({len(out.figures())} plots, PNG and SVG)")
    return 0


def _configure_compare(p: argparse.ArgumentParser) -> None:
    p.add_argument("a", metavar="A", nargs="?",
                   help="baseline campaign: name (latest run) or run id; with neither A nor B: "
                        "list the campaigns in --db (as `turnout bench list` does)")
    p.add_argument("b", metavar="B", nargs="?", help="campaign compared with A: name or run id")
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--db-b", metavar="FILE", help="read B from this database instead of --db")
    p.add_argument("--fail-on-regression", action="store_true",
                   help="exit with status 1 when any regression is flagged")


def _run_compare(args: argparse.Namespace) -> int:
    from ..results import ResultsDB
    from ..results.listing import campaign_rows, format_campaigns, known_campaigns
    from .compare import compare_campaigns, format_compare

    for path in (args.db, args.db_b):
        if path is not None and not Path(path).exists():
            print(f"turnout compare: no results database at {path}", file=sys.stderr)
            return 2
    if args.a is None or args.b is None:
        with ResultsDB(args.db) as db:
            if args.a is None:
                sys.stdout.write(format_campaigns(campaign_rows(db), args.db))
                return 0
            print(f"turnout compare: compare A with what? {known_campaigns(db)}",
                  file=sys.stderr)
            return 2
    with ResultsDB(args.db) as db_a:
        db_b = ResultsDB(args.db_b) if args.db_b else None
        try:
            da, dbb, rows = compare_campaigns(db_a, args.a, args.b, db_b)
        except KeyError as e:
            # say which campaigns there are, in the database(s) asked
            known = [known_campaigns(d) for d in (db_a, db_b) if d is not None]
            print(f"turnout compare: {e.args[0]}; {'; '.join(known)}", file=sys.stderr)
            return 2
        finally:
            if db_b is not None:
                db_b.close()
    format_compare(da, dbb, rows, sys.stdout)
    if args.fail_on_regression and any(r.verdict == "regression" for r in rows):
        return 1
    return 0


COMMANDS = [
    Command("report", "write the HTML report (plots as PNG and SVG) of a campaign",
            _configure_report, _run_report),
    Command("compare", "compare two campaigns; flag changes larger than the measured spread",
            _configure_compare, _run_compare),
]
