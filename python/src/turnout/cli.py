"""The one entry point, ``turnout``, built from a table of command modules.

Each module in ``COMMAND_MODULES`` exposes ``COMMANDS: list[Command]``. A
command name may have two words (``bench run``, ``system check``): the
first becomes a group. A module that is not there (e.g. ``turnout.ctl``
before it is written) is left out; one that fails to import for any other
reason is an error. To add a command: write a module with ``COMMANDS`` and
add its name here.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass

__all__ = [
    "COMMAND_MODULES",
    "EXIT_BROKEN_PIPE",
    "Command",
    "build_parser",
    "load_commands",
    "main",
]


@dataclass(frozen=True)
class Command:
    """One subcommand: ``configure`` adds its options, ``run`` returns the exit code."""

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


#: Modules that contribute commands, in the order they appear in --help.
COMMAND_MODULES: tuple[str, ...] = (
    "turnout.campaign.cli",  # bench run
    "turnout.system.cli",  # system check, system fingerprint
    "turnout.results.cli",  # export
    "turnout.report.cli",  # report, compare (report engineer)
    "turnout.ctl",  # ctl (later)
)


def load_commands(modules: Sequence[str] = COMMAND_MODULES) -> list[Command]:
    """Import every command module that exists and collect its COMMANDS."""
    commands: list[Command] = []
    for name in modules:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            # only the module itself (or its package) being absent is tolerated
            if e.name is not None and name.startswith(e.name):
                continue
            raise
        commands.extend(getattr(mod, "COMMANDS", []))
    return commands


def build_parser(commands: Sequence[Command]) -> argparse.ArgumentParser:
    """The argparse tree for these commands."""
    parser = argparse.ArgumentParser(
        prog="turnout", description="Turnout workbench: measure software switches."
    )
    top = parser.add_subparsers(dest="command", metavar="COMMAND")
    groups: dict[str, argparse._SubParsersAction] = {}
    for cmd in commands:
        words = cmd.name.split()
        if len(words) == 1:
            p = top.add_parser(words[0], help=cmd.help, description=cmd.help)
        elif len(words) == 2:
            if words[0] not in groups:
                g = top.add_parser(words[0], help=f"{words[0]} commands")
                groups[words[0]] = g.add_subparsers(dest="subcommand", metavar="SUBCOMMAND")
                g.set_defaults(_group=g)
            p = groups[words[0]].add_parser(words[1], help=cmd.help, description=cmd.help)
        else:
            raise ValueError(f"command name {cmd.name!r} has more than two words")
        cmd.configure(p)
        p.set_defaults(_run=cmd.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``turnout`` with these arguments; return the exit code."""
    parser = build_parser(load_commands())
    args = parser.parse_args(argv)
    run = getattr(args, "_run", None)
    if run is None:
        group = getattr(args, "_group", None)
        (group or parser).print_help()
        return 2
    try:
        rc = int(run(args) or 0)
        # what is still buffered fails here, not in the interpreter's exit
        sys.stdout.flush()
        return rc
    except KeyboardInterrupt:
        print("turnout: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # the reader went away (`turnout ctl dump-flows | head`): stop
        # quietly, as a process that SIGPIPE ended would
        _stdout_gone()
        return EXIT_BROKEN_PIPE


#: Exit code when stdout's reader went away: 128 + SIGPIPE, what a shell
#: shows for a process that SIGPIPE ended (``yes | head``).
EXIT_BROKEN_PIPE = 141


def _stdout_gone() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush of what is
    still buffered finds no closed pipe (and prints no traceback)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout (embedded, or replaced)
        pass


if __name__ == "__main__":
    sys.exit(main())
