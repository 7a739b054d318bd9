"""``turnout system check`` and ``turnout system fingerprint``."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from ..cli import Command
from .checks import run_checks
from .fingerprint import fingerprint

__all__ = ["COMMANDS"]


def _check(args: argparse.Namespace) -> int:
    findings = run_checks()
    if args.json:
        print(json.dumps([asdict(f) for f in findings], indent=1))
    else:
        marks = {"ok": "ok     ", "warn": "WARN   ", "missing": "MISSING"}
        for f in findings:
            print(f"{marks.get(f.level, f.level)} {f.check:<10} {f.message}")
        warn = sum(f.level == "warn" for f in findings)
        missing = sum(f.level == "missing" for f in findings)
        print(f"\n{warn} warning(s), {missing} missing; results are stamped with the host "
              "state either way.")
    return 0


def _fingerprint(args: argparse.Namespace) -> int:
    from ..bench import tool_versions

    host = fingerprint(tool_versions())
    d = asdict(host)
    if not args.pinning:
        d["pinning"] = f"{len(host.pinning)} processes (use --pinning to list)"
    print(json.dumps(d, indent=1))
    return 0


def _cfg_check(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print findings as JSON")


def _cfg_fp(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pinning", action="store_true", help="include every process's CPU list")


COMMANDS = [
    Command("system check", "report what on this host will skew results", _cfg_check, _check),
    Command("system fingerprint", "print the host fingerprint stored with results", _cfg_fp,
            _fingerprint),
]
