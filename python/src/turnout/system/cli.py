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
    if args.campaign:
        return _check_remote(args.campaign)
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


def _check_remote(path: str) -> int:
    """The pre-flight of a remote campaign's hosts (turnout.hosts.remote):
    every host's facts, or every problem that would keep it from starting."""
    import sys

    from ..campaign.cli import _turnoutd_builds
    from ..campaign.spec import CampaignError, load
    from ..hosts.remote import RemoteSetup
    from ..measure.gen import find_gen

    try:
        spec = load(path)
    except CampaignError as e:
        print(f"turnout system check: {e}", file=sys.stderr)
        return 2
    if spec.remote is None:
        print(f"turnout system check: {path} is not a remote campaign", file=sys.stderr)
        return 2
    remote = RemoteSetup(spec, find_gen(allow_pygen=False) or [], _turnoutd_builds(spec))
    problems = remote.preflight()
    for name, h in remote.summary().items():
        if not h.get("hostname"):
            continue
        print(f"host {name} ({h['ssh']}; {', '.join(h['roles'])}): {h['hostname']}, "
              f"{h['cpu_model']}, kernel {h['kernel']}, CPUs {h['online']} (isolated "
              f"{h['isolated'] or 'none'}), governor {h['governor']}, load "
              f"{h['load'][0]:.2f}")
        for i, n in sorted((h.get("nics") or {}).items()):
            if n.get("exists"):
                print(f"  {i}: {n['driver'] or 'no driver'} {n['mac']} MTU {n['mtu']}")
    for w in remote.warnings:
        print(f"WARN    {w}")
    for p in problems:
        print(f"MISSING {p}")
    print(f"\n{len(problems)} problem(s): the campaign "
          + ("would not start" if problems else "can start"))
    return 1 if problems else 0


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
    p.add_argument("--campaign", metavar="TOML",
                   help="check the hosts of this remote campaign instead (over SSH: kernel, "
                        "CPUs, packages, interfaces, builds, clock); starts nothing")


def _cfg_fp(p: argparse.ArgumentParser) -> None:
    p.add_argument("--pinning", action="store_true", help="include every process's CPU list")


COMMANDS = [
    Command("system check", "report what on this host will skew results", _cfg_check, _check),
    Command("system fingerprint", "print the host fingerprint stored with results", _cfg_fp,
            _fingerprint),
]
