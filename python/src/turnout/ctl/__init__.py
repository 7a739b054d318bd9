"""``turnout ctl``: the command line over turnoutd's control socket.

turnoutd speaks JSON-RPC 2.0 over a unix socket, one JSON object per line
(docs/turnoutd.md). This package is the client (``client``: :class:`CtlClient`,
the one every part of the workbench uses), what ``turnout ctl`` prints
(``views``) and its subcommands (``cli``), one per API method::

    turnout ctl [--socket PATH] [--json] version
    turnout ctl config
    turnout ctl ports
    turnout ctl port add NAME KIND [key=value ...]
    turnout ctl port remove NAME
    turnout ctl logic show
    turnout ctl logic replace NAME [key=value ...]
    turnout ctl logic cmd CMD [JSON | key=value ...]
    turnout ctl stats [--watch [SECS]]
    turnout ctl stats reset
    turnout ctl call METHOD [JSON]          (any method, raw)

``key=value`` values are read as JSON when they parse (``id=2``,
``pairs='[["a","b"]]'``, ``client=true``) and as strings otherwise.
Human-readable tables by default, ``--json`` for scripts. Exit codes:
0 done, 1 the daemon answered with an error, 2 bad usage, 3 the daemon
cannot be reached. Standard library only.
"""

from __future__ import annotations

from .cli import COMMANDS, EXIT_API_ERROR, EXIT_UNREACHABLE, EXIT_USAGE, parse_kv, parse_value
from .client import DEFAULT_SOCKET, SOCKET_ENV, CtlClient, CtlConnectionError, CtlError, call
from .views import (
    PortRate,
    _policy_text,
    flows_text,
    format_table,
    groups_text,
    meters_text,
    port_numbers_note,
    rates,
    worker_rates,
)

__all__ = [
    "COMMANDS",
    "DEFAULT_SOCKET",
    "EXIT_API_ERROR",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "SOCKET_ENV",
    "CtlClient",
    "CtlConnectionError",
    "CtlError",
    "PortRate",
    "_policy_text",
    "call",
    "flows_text",
    "format_table",
    "groups_text",
    "meters_text",
    "parse_kv",
    "parse_value",
    "port_numbers_note",
    "rates",
    "worker_rates",
]
