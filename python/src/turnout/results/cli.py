"""``turnout export``: trials or results as CSV or JSON; ``turnout bench list``:
the campaign runs in a database."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ..cli import Command
from .db import ResultsDB
from .export import FORMATS, export
from .listing import campaign_rows, format_campaigns, known_campaigns

__all__ = ["COMMANDS", "DEFAULT_DB"]

#: Where results go unless --db says otherwise.
DEFAULT_DB = "results/turnout.db"


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--format", choices=FORMATS, default="csv")
    p.add_argument("--campaign", help="campaign name (latest run) or id; default all")
    p.add_argument("--table", choices=("trials", "results"), default="trials",
                   help="CSV: which table (JSON always has both)")
    p.add_argument("-o", "--output", help="file to write (default stdout)")


def _run(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        print(f"turnout export: no results database at {args.db}", file=sys.stderr)
        return 2
    with ResultsDB(args.db) as db:
        campaign = args.campaign
        if campaign is not None and db.campaign(campaign) is None:
            print(f"turnout export: no campaign {campaign!r} in {args.db}; {known_campaigns(db)}",
                  file=sys.stderr)
            return 2
        text = export(db, args.format, campaign, args.table)
    if args.output:
        Path(args.output).write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _configure_list(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB}; "
                   "`make bench` runs the campaign called `default` into it)")


def _run_list(args: argparse.Namespace) -> int:
    if not Path(args.db).exists():
        print(f"turnout bench list: no results database at {args.db}", file=sys.stderr)
        return 2
    with ResultsDB(args.db) as db:
        sys.stdout.write(format_campaigns(campaign_rows(db), args.db))
    return 0


COMMANDS = [
    Command("export", "export trials/results as CSV or JSON", _configure, _run),
    Command("bench list", "list the campaign runs in a results database (names and ids for "
            "report --campaign and compare)", _configure_list, _run_list),
]
