"""``turnout ctl``: the subcommands over turnoutd's control socket (the
package's docstring lists them), their arguments and exit codes."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from ..cli import Command
from ..portkind import PortKind, PortKindError
from .client import DEFAULT_SOCKET, SOCKET_ENV, CtlClient, CtlConnectionError, CtlError
from .views import (
    _print_json,
    _show_stats,
    _watch,
    flows_text,
    format_table,
    groups_text,
    meters_text,
    port_numbers_note,
)

__all__ = ["COMMANDS", "EXIT_API_ERROR", "EXIT_UNREACHABLE", "EXIT_USAGE", "parse_kv",
           "parse_value"]

EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3

def parse_value(text: str) -> Any:
    """A ``key=value`` value: JSON if it parses, else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
        return text


def _port_kind(text: str) -> str:
    """A port kind as turnoutd spells it (turnout.portkind; ``afxdp`` is
    ``af_xdp``). A name the workbench does not know goes as it is: the
    daemon's answer lists the kinds it has."""
    try:
        return str(PortKind.parse(text))
    except PortKindError:
        return text


def parse_kv(items: Sequence[str]) -> dict[str, Any]:
    """``["a=1", "b=x"]`` → ``{"a": 1, "b": "x"}``; raises ValueError on a bad item."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"expected key=value, got {item!r}")
        if key in out:
            raise ValueError(f"key {key!r} given twice")
        out[key] = parse_value(value)
    return out



def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--socket",
        default=os.environ.get(SOCKET_ENV, DEFAULT_SOCKET),
        help=f"turnoutd control socket (default ${SOCKET_ENV} or {DEFAULT_SOCKET})",
    )
    p.add_argument("--json", action="store_true", help="print the raw JSON result")
    p.add_argument("--timeout", type=float, default=10.0, help="seconds to wait for an answer")
    # --json is also accepted after the subcommand (turnout ctl ports --json).
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="print the raw JSON result"
    )

    class _Sub(argparse._SubParsersAction):  # type: ignore[type-arg]
        def add_parser(self, name: str, **kw: Any) -> argparse.ArgumentParser:
            kw.setdefault("parents", [common])
            parser: argparse.ArgumentParser = super().add_parser(name, **kw)
            return parser

    p.register("action", "parsers", _Sub)
    sub = p.add_subparsers(dest="ctl_cmd", metavar="CMD")
    sub.add_parser("version", help="daemon and API version")
    sub.add_parser("config", help="the running configuration")
    sub.add_parser("ports", help="list ports")

    port = sub.add_parser("port", help="add or remove a port")
    port.register("action", "parsers", _Sub)
    psub = port.add_subparsers(dest="port_cmd", metavar="add|remove")
    add = psub.add_parser("add", help="add a port: NAME KIND key=value…")
    add.add_argument("name")
    add.add_argument("kind", help="memif, af_xdp, af_packet, tap, vhost_user, vxlan, geneve "
                     "(afxdp, afpacket, vhost-user, vhost: the older spellings)")
    add.add_argument("keys", nargs="*", metavar="key=value", help="the rest of its [[ports]] table")
    rm = psub.add_parser("remove", help="remove a port")
    rm.add_argument("name")

    logic = sub.add_parser("logic", help="show or replace the logic, run its commands")
    logic.register("action", "parsers", _Sub)
    lsub = logic.add_subparsers(dest="logic_cmd", metavar="show|replace|cmd")
    lsub.add_parser("show", help="the running logic and its commands")
    rep = lsub.add_parser("replace", help="replace the logic: NAME key=value…")
    rep.add_argument("name")
    rep.add_argument("keys", nargs="*", metavar="key=value", help="the rest of its [logic] table")
    cmd = lsub.add_parser("cmd", help="run a logic command: CMD [JSON | key=value…]")
    cmd.add_argument("cmd")
    cmd.add_argument("args", nargs="*", help="a JSON object, or key=value pairs")

    dflows = sub.add_parser(
        "dump-flows", help="the flows logic's flows and tables, as ovs-ofctl dump-flows prints them"
    )
    dflows.add_argument("table", nargs="?", type=int, help="only this table (0-254)")
    dgroups = sub.add_parser(
        "dump-groups", help="the flows logic's OpenFlow groups with their statistics"
    )
    dgroups.add_argument("group_id", nargs="?", type=int, help="only this group")
    dmeters = sub.add_parser(
        "dump-meters", help="the flows logic's OpenFlow meters with their statistics"
    )
    dmeters.add_argument("meter_id", nargs="?", type=int, help="only this meter")

    dpid = sub.add_parser(
        "datapath-id", help="the OpenFlow datapath id; with ID, set it (controllers reconnect)"
    )
    dpid.add_argument(
        "id",
        nargs="?",
        help="an integer, 16 hex digits, 0x… or 8 colon-separated hex bytes",
    )

    stats = sub.add_parser("stats", help="counters; 'stats reset' zeroes them")
    stats.add_argument("action", nargs="?", choices=["reset"], help="zero every counter")
    stats.add_argument(
        "--watch",
        nargs="?",
        const=1.0,
        type=float,
        metavar="SECS",
        help="print live rates every SECS (default 1) until Ctrl-C",
    )

    call = sub.add_parser("call", help="call any API method with raw JSON params")
    call.add_argument("method")
    call.add_argument("params", nargs="?", help="JSON params")
    p.set_defaults(_ctl_parser=p)


class _Usage(Exception):
    pass


def _args_json(items: Sequence[str]) -> Any:
    if len(items) == 1 and items[0].lstrip().startswith(("{", "[")):
        try:
            return json.loads(items[0])
        except ValueError as e:
            raise _Usage(f"not valid JSON: {e}") from e
    try:
        return parse_kv(items) if items else None
    except ValueError as e:
        raise _Usage(str(e)) from e


def _run(args: argparse.Namespace) -> int:
    try:
        with CtlClient(args.socket, args.timeout) as c:
            return _dispatch(c, args)
    except _Usage as e:
        print(f"turnout ctl: {e}", file=sys.stderr)
        return EXIT_USAGE
    except CtlError as e:
        print(f"turnout ctl: error {e.code}: {e.message}", file=sys.stderr)
        return EXIT_API_ERROR
    except CtlConnectionError as e:
        print(f"turnout ctl: {e}", file=sys.stderr)
        return EXIT_UNREACHABLE


def _dispatch(c: CtlClient, a: argparse.Namespace) -> int:
    cmd = a.ctl_cmd
    if cmd is None:
        a._ctl_parser.print_help()
        return EXIT_USAGE
    if cmd == "version":
        v = c.call("version")
        if a.json:
            _print_json(v)
        else:
            print(f"turnoutd {v['version']} (api {v['api']}, git {v['git']}) at {c.path}")
        return 0
    if cmd == "config":
        _print_json(c.call("config.show"))
        return 0
    if cmd == "ports":
        ports = c.call("port.list")
        if a.json:
            _print_json(ports)
        else:
            print(
                format_table(
                    ["id", "name", "kind", "queues", "up", "worker", "max_frame_b"],
                    [
                        [
                            p["id"],
                            p["name"],
                            p["kind"],
                            p["queues"],
                            p["link_up"],
                            p["worker"],
                            p["max_frame_b"],
                        ]
                        for p in ports
                    ],
                )
            )
        return 0
    if cmd == "port":
        if a.port_cmd == "add":
            try:
                table = parse_kv(a.keys)
            except ValueError as e:
                raise _Usage(str(e)) from e
            table = {"name": a.name, "kind": _port_kind(a.kind), **table}
            r = c.call("port.add", table)
            if a.json:
                _print_json(r)
            else:
                print(f"added port {a.name} (id {r['id']})")
            return 0
        if a.port_cmd == "remove":
            r = c.call("port.remove", {"name": a.name})
            if a.json:
                _print_json(r)
            else:
                print(f"removed port {a.name}")
            return 0
        raise _Usage("port needs add or remove")
    if cmd == "logic":
        if a.logic_cmd == "show":
            r = c.call("logic.show")
            if a.json:
                _print_json(r)
            else:
                shown = {k: v for k, v in r.get("config", {}).items() if k != "name"}
                print(f"logic {r['name']}" + (f" {json.dumps(shown)}" if shown else ""))
                if r["commands"]:
                    print()
                    print(format_table(["command", "help"], r["commands"]))
            return 0
        if a.logic_cmd == "replace":
            try:
                table = parse_kv(a.keys)
            except ValueError as e:
                raise _Usage(str(e)) from e
            r = c.call("logic.replace", {"name": a.name, **table})
            if a.json:
                _print_json(r)
            else:
                print(f"logic replaced: now {r['name']}")
            return 0
        if a.logic_cmd == "cmd":
            params: dict[str, Any] = {"cmd": a.cmd}
            args_v = _args_json(a.args)
            if args_v is not None:
                params["args"] = args_v
            _print_json(c.call("logic.command", params))
            return 0
        raise _Usage("logic needs show, replace or cmd")
    if cmd == "dump-flows":
        fargs: dict[str, Any] = {} if a.table is None else {"table": a.table}
        r = c.call("logic.command", {"cmd": "dump", "args": fargs})
        if a.json:
            _print_json(r)
        else:
            print(port_numbers_note(c.call("port.list")))
            print(flows_text(r))
        return 0
    if cmd == "dump-groups":
        gargs: dict[str, Any] = {} if a.group_id is None else {"group": f"group_id={a.group_id}"}
        r = c.call("logic.command", {"cmd": "dump_groups", "args": gargs})
        if a.json:
            _print_json(r)
        else:
            print(port_numbers_note(c.call("port.list")))
            print(groups_text(r))
        return 0
    if cmd == "dump-meters":
        margs: dict[str, Any] = {} if a.meter_id is None else {"meter": f"meter={a.meter_id}"}
        r = c.call("logic.command", {"cmd": "dump_meters", "args": margs})
        if a.json:
            _print_json(r)
        else:
            print(meters_text(r))
        return 0
    if cmd == "datapath-id":
        if a.id is None:
            r = c.call("switch.show")
        else:
            # Decimal digits are an integer; anything else goes as text.
            dp: Any = int(a.id) if a.id.isdigit() and len(a.id) != 16 else a.id
            r = c.call("switch.set", {"datapath_id": dp})
        if a.json:
            _print_json(r)
        else:
            how = "configured" if r["datapath_id_configured"] else "derived from the control socket"
            print(f"datapath id {r['datapath_id']} ({how})")
        return 0
    if cmd == "stats":
        if a.action == "reset":
            if a.watch is not None:
                raise _Usage("stats reset does not take --watch")
            r = c.call("stats.reset")
            if a.json:
                _print_json(r)
            else:
                print("counters reset")
            return 0
        if a.watch is not None:
            if a.watch <= 0:
                raise _Usage("--watch needs a positive interval")
            return _watch(c, a.watch, a.json)
        s = c.call("stats")
        if a.json:
            _print_json(s)
        else:
            _show_stats(s)
        return 0
    if cmd == "call":
        params_v = None
        if a.params is not None:
            try:
                params_v = json.loads(a.params)
            except ValueError as e:
                raise _Usage(f"params: not valid JSON: {e}") from e
        _print_json(c.call(a.method, params_v))
        return 0
    raise _Usage(f"unknown command {cmd!r}")


COMMANDS = [
    Command(
        name="ctl",
        help="control a running turnoutd (ports, logic, stats) over its socket",
        configure=_configure,
        run=_run,
    )
]
