"""``turnout ctl``: the command line over turnoutd's control socket.

turnoutd speaks JSON-RPC 2.0 over a unix socket, one JSON object per line
(docs/turnoutd.md). This module is the client (:class:`CtlClient`) and the
``turnout ctl`` subcommands, one per API method::

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

import argparse
import json
import os
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from turnout.cli import Command

__all__ = [
    "COMMANDS",
    "DEFAULT_SOCKET",
    "CtlClient",
    "CtlConnectionError",
    "CtlError",
    "flows_text",
    "format_table",
    "groups_text",
    "parse_kv",
    "port_numbers_note",
    "rates",
    "worker_rates",
]

#: Where turnoutd listens unless told otherwise (``[switch] control_socket``).
DEFAULT_SOCKET = "/run/turnout/turnoutd.sock"
#: Environment variable overriding the default socket.
SOCKET_ENV = "TURNOUT_CTL_SOCKET"

EXIT_API_ERROR = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3


class CtlError(Exception):
    """The daemon answered with a JSON-RPC error."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"{message} (code {code})")
        self.code = code
        self.message = message


class CtlConnectionError(Exception):
    """The daemon could not be reached, or hung up."""


class CtlClient:
    """One connection to turnoutd's control socket; requests are sent one at a time."""

    def __init__(self, path: str, timeout_s: float = 10.0) -> None:
        self.path = path
        self.timeout_s = timeout_s
        self._sock: socket.socket | None = None
        self._buf = b""
        self._next_id = 1

    def __enter__(self) -> CtlClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Closes the connection (reopened by the next call)."""
        if self._sock is not None:
            self._sock.close()
            self._sock = None
            self._buf = b""

    def _connect(self) -> socket.socket:
        if self._sock is None:
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(self.timeout_s)
            try:
                s.connect(self.path)
            except OSError as e:
                s.close()
                reason = e.strerror or str(e)
                raise CtlConnectionError(
                    f"cannot connect to turnoutd at {self.path}: {reason.lower()} "
                    f"(is turnoutd running? use --socket or ${SOCKET_ENV})"
                ) from e
            self._sock = s
        return self._sock

    def call(self, method: str, params: Any = None) -> Any:
        """Calls ``method``; returns its result or raises :class:`CtlError`."""
        s = self._connect()
        rid = self._next_id
        self._next_id += 1
        req: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            req["params"] = params
        try:
            s.sendall(json.dumps(req).encode() + b"\n")
            while b"\n" not in self._buf:
                chunk = s.recv(65536)
                if not chunk:
                    raise CtlConnectionError("turnoutd closed the connection")
                self._buf += chunk
        except OSError as e:
            self.close()
            raise CtlConnectionError(f"talking to turnoutd at {self.path}: {e}") from e
        line, self._buf = self._buf.split(b"\n", 1)
        try:
            resp = json.loads(line)
        except ValueError as e:
            self.close()
            raise CtlConnectionError(
                f"turnoutd sent something that is not json: {line[:80]!r}"
            ) from e
        if "error" in resp:
            err = resp["error"]
            raise CtlError(int(err.get("code", 0)), str(err.get("message", "")))
        if resp.get("id") != rid:
            self.close()
            raise CtlConnectionError(
                f"response id {resp.get('id')!r} does not match request id {rid}"
            )
        return resp.get("result")


# ---------------------------------------------------------------- formatting


def parse_value(text: str) -> Any:
    """A ``key=value`` value: JSON if it parses, else the string itself."""
    try:
        return json.loads(text)
    except ValueError:
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


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table: numbers right-aligned, everything else left."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [len(h) for h in headers]
    for row in cells:
        for i, c in enumerate(row):
            widths[i] = max(widths[i], len(c))

    def is_num(v: Any) -> bool:
        return isinstance(v, int | float) and not isinstance(v, bool)

    numeric = [
        any(is_num(r[i]) for r in rows) and all(is_num(r[i]) or r[i] is None for r in rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        parts = [
            v.rjust(widths[i]) if numeric[i] else v.ljust(widths[i]) for i, v in enumerate(values)
        ]
        return "  ".join(parts).rstrip()

    out = [line(list(headers)), line(["-" * w for w in widths])]
    out.extend(line(r) for r in cells)
    return "\n".join(out)


def _cell(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:.1f}"
    return str(v)


def _si(x: float) -> str:
    """1234567 → '1.23M'."""
    for unit, div in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= div:
            return f"{x / div:.2f}{unit}"
    return f"{x:.0f}"


def _drops_text(drops: dict[str, int]) -> str:
    nz = {k: v for k, v in sorted(drops.items()) if v}
    return ", ".join(f"{k}={v}" for k, v in nz.items()) if nz else "-"


@dataclass(frozen=True)
class PortRate:
    """Per-port rates between two ``stats`` snapshots."""

    name: str
    rx_pps: float
    tx_pps: float
    rx_bps: float
    tx_bps: float
    drops_pps: float


def rates(prev: dict[str, Any], cur: dict[str, Any]) -> list[PortRate]:
    """Per-port packet, bit and drop rates between two ``stats`` results.

    Ports that appear in only one snapshot are left out; a counter that went
    backwards (``stats.reset`` in between) counts from zero.
    """
    dt_s = (cur["time_ns"] - prev["time_ns"]) / 1e9
    if dt_s <= 0:
        return []
    before = {p["name"]: p for p in prev["ports"]}
    out = []
    for p in cur["ports"]:
        q = before.get(p["name"])
        if q is None:
            continue

        def d(key: str, p: dict[str, Any] = p, q: dict[str, Any] = q) -> float:
            a, b = q[key], p[key]
            return (b - a if b >= a else b) / dt_s

        dp = sum(p["drops"].values())
        dq = sum(q["drops"].values())
        out.append(
            PortRate(
                name=p["name"],
                rx_pps=d("rx_packets"),
                tx_pps=d("tx_packets"),
                rx_bps=8 * d("rx_bytes"),
                tx_bps=8 * d("tx_bytes"),
                drops_pps=(dp - dq if dp >= dq else dp) / dt_s,
            )
        )
    return out


def _print_json(v: Any) -> None:
    print(json.dumps(v, indent=2, sort_keys=True))


def _show_stats(s: dict[str, Any]) -> None:
    rows = [
        [
            p["name"],
            p["kind"],
            p["link_up"],
            p["rx_packets"],
            p["rx_bytes"],
            p["tx_packets"],
            p["tx_bytes"],
            p.get("rx_ring_full", 0),
            sum(p["drops"].values()),
            _drops_text(p["drops"]),
        ]
        for p in s["ports"]
    ]
    print(
        format_table(
            [
                "port",
                "kind",
                "up",
                "rx_pkts",
                "rx_bytes",
                "tx_pkts",
                "tx_bytes",
                "rx_full",
                "drops",
                "by reason",
            ],
            rows,
        )
    )
    queues = [
        [p["name"], q["queue"], q["rx_packets"], q["rx_bytes"], q["tx_packets"], q["tx_bytes"]]
        for p in s["ports"]
        if len(p["queues"]) > 1
        for q in p["queues"]
    ]
    if queues:
        print()
        print(format_table(["port", "queue", "rx_pkts", "rx_bytes", "tx_pkts", "tx_bytes"], queues))
    backend = [
        [p["name"], ", ".join(f"{k}={v}" for k, v in sorted(p["backend"].items()) if v) or "-"]
        for p in s["ports"]
        if p.get("backend")
    ]
    if backend:
        print()
        print(format_table(["port", "backend counters (non-zero)"], backend))
    print()
    wrows = []
    for w in s["workers"]:
        total = w["busy_ns"] + w["idle_ns"]
        busy = 100.0 * w["busy_ns"] / total if total else 0.0
        wrows.append(
            [
                w["id"],
                w["cpu"],
                w["rx_queues"],
                w["packets"],
                w["batches"],
                round(busy, 1),
                round(w["cycles_per_packet"], 1),
                w["sleeps"],
                w.get("wakeups", 0),
                w.get("naps", 0),
                round(100.0 * w.get("asleep_ns", 0) / total, 1) if total else 0.0,
                round(w.get("cpu_ns", 0) / 1e9, 2),
                _policy_text(w.get("policy") or {}),
            ]
        )
    print(
        format_table(
            [
                "worker",
                "cpu",
                "queues",
                "packets",
                "batches",
                "busy_%",
                "cyc/pkt",
                "sleeps",
                "wakeups",
                "naps",
                "asleep_%",
                "cpu_s",
                "wake-up policy",
            ],
            wrows,
        )
    )
    refused = [
        [m, sum(errors.values()), ", ".join(f"{e}={n}" for e, n in sorted(errors.items())) or "-"]
        for m, errors in sorted((s.get("openflow") or {}).get("refused", {}).items())
    ]
    if any(r[1] for r in refused):
        print()
        print(format_table(["openflow refused", "count", "by error"], refused))


def worker_rates(prev: dict[str, Any], cur: dict[str, Any]) -> list[dict[str, Any]]:
    """Per worker between two ``stats`` results: CPU (its thread's CPU
    clock), busy and asleep shares of the time, sleeps, wake-ups and naps
    per second, and the wake-up policy's current state."""
    dt = (cur["time_ns"] - prev["time_ns"]) / 1e9
    if dt <= 0:
        return []
    before = {w["id"]: w for w in prev.get("workers", [])}
    out = []
    for w in cur.get("workers", []):
        b = before.get(w["id"])
        if b is None:
            continue

        def d(k: str, w: dict[str, Any] = w, b: dict[str, Any] = b) -> float:
            return float(max(0, w.get(k, 0) - b.get(k, 0)))

        out.append({
            "id": w["id"],
            "cpu_pct": 100.0 * d("cpu_ns") / 1e9 / dt,
            "busy_pct": 100.0 * d("busy_ns") / 1e9 / dt,
            "asleep_pct": 100.0 * d("asleep_ns") / 1e9 / dt,
            "sleeps_ps": d("sleeps") / dt,
            "wakeups_ps": d("wakeups") / dt,
            "naps_ps": d("naps") / dt,
            "policy": _policy_text(w.get("policy") or {}),
        })
    return out


def port_numbers_note(ports: Sequence[dict[str, Any]]) -> str:
    """The first line of ``dump-flows`` / ``dump-groups``: the numbers in
    the flow texts are turnoutd's port ids (what `add` takes back), not the
    OpenFlow port numbers ovs-ofctl shows for the same flows (id + 1)."""
    ids = ", ".join(f"{p['id']}={p['name']}" for p in sorted(ports, key=lambda p: int(p["id"])))
    return (f"NOTE: port numbers below are turnoutd port ids ({ids or 'no ports'}), not "
            "OpenFlow's: ovs-ofctl shows port id N as N+1 (in_port=1, output:2 for ids 0, 1)")


def flows_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump` answer as ovs-ofctl's dump-flows prints
    flows (one line each, the flow in the text `add` accepts back, port ids
    not OpenFlow numbers: :func:`port_numbers_note`), then one line per
    table in use."""
    lines = []
    for f in dump.get("flows", []):
        lines.append(
            f" cookie={int(f.get('cookie', 0)):#x}, duration={f.get('duration', 0)}s,"
            f" n_packets={f.get('n_packets', 0)}, n_bytes={f.get('n_bytes', 0)}, {f['flow']}"
        )
    if not lines:
        lines.append(" (no flows)")
    for t in dump.get("tables", []):
        lines.append(
            f"table {t['table']}: flows={t['flows']}, subtables={t['subtables']},"
            f" lookups={t['lookups']}, matched={t['matched']}, missed={t['missed']}"
        )
    return "\n".join(lines)


def groups_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump_groups` answer as ovs-ofctl's dump-groups and
    dump-group-stats print groups: the group's text (which `add_group`
    accepts back), then its statistics and each bucket's."""
    lines = []
    for g in dump.get("groups", []):
        lines.append(f" {g['group']}")
        buckets = ",".join(
            f"bucket{i}:n_packets={b.get('n_packets', 0)},n_bytes={b.get('n_bytes', 0)}"
            for i, b in enumerate(g.get("buckets", []))
        )
        lines.append(
            f"    duration={g.get('duration', 0)}s, ref_count={g.get('ref_count', 0)},"
            f" n_packets={g.get('n_packets', 0)}, n_bytes={g.get('n_bytes', 0)}"
            + (f", {buckets}" if buckets else "")
        )
    if not lines:
        lines.append(" (no groups)")
    return "\n".join(lines)


def meters_text(dump: dict[str, Any]) -> str:
    """The flows logic's `dump_meters` answer as ovs-ofctl's dump-meters
    and meter-stats print meters: the meter's text (which `add_meter`
    accepts back), then its statistics and each band's."""
    lines = []
    for m in dump.get("meters", []):
        lines.append(f" {m['meter']}")
        bands = ",".join(
            f"band{i}:n_packets={b.get('n_packets', 0)},n_bytes={b.get('n_bytes', 0)}"
            for i, b in enumerate(m.get("bands", []))
        )
        lines.append(
            f"    duration={m.get('duration', 0)}s, flow_count={m.get('flow_count', 0)},"
            f" n_packets={m.get('n_packets', 0)}, n_bytes={m.get('n_bytes', 0)}"
            + (f", {bands}" if bands else "")
        )
    if not lines:
        lines.append(" (no meters)")
    return "\n".join(lines)


#: why the adaptive policy is in its regime (crates/fabric/src/wakeup.rs: Why)
_WHY = {
    "measuring": "wake-ups not measured yet",
    "no_budget": "budget 0",
    "wake_over_budget": "wake-up p99 over the budget",
    "wake_fits": "wake-up p99 fits the budget",
    "naps_cheaper": "naps fit and cost less",
    "only_naps_fit": "naps fit, wake-ups do not",
    "contended": "polling waits longer for the CPU than a wake-up",
}


def _policy_text(p: dict[str, Any]) -> str:
    """The adaptive policy's regime and why, in a few words ('-' in poll
    mode): e.g. "poll (wake-up p99 140us over the budget; budget 100us),
    sleeps after 1000us idle; sleep 18.0us cpu"."""
    budget = p.get("budget_ns", 0)
    why = p.get("why", "")
    if why == "poll_mode" or (not budget and not why and not p.get("sleep_cpu_ns")
                              and not p.get("nap_cpu_ns")):
        return "-"
    regime = p.get("regime") or ("moderate" if p.get("moderating") else "interrupt")
    if regime == "moderate":
        regime = f"moderate, nap {p.get('nap_ns', 0) / 1e3:.0f}us"
    reason = _WHY.get(why, why)
    wake = p.get("wake_p99_ns", 0)
    if wake and why in ("wake_over_budget", "wake_fits", "only_naps_fit", "naps_cheaper"):
        reason = reason.replace("wake-up p99", f"wake-up p99 {wake / 1e3:.0f}us")
    if why == "contended":
        reason += (f" (poll p99 {p.get('poll_p99_ns', 0) / 1e3:.0f}us,"
                   f" wake-up p99 {wake / 1e3:.0f}us)")
    text = f"{regime} ({reason}; budget {budget / 1e3:.0f}us)" if reason else \
        f"{regime} (budget {budget / 1e3:.0f}us)"
    if p.get("sleep_after_ns"):
        text += f", sleeps after {p['sleep_after_ns'] / 1e3:.0f}us idle"
    sleep_us = p.get("sleep_cpu_ns", 0) / 1e3
    if sleep_us:
        text += f"; sleep {sleep_us:.1f}us cpu"
    if p.get("nap_cpu_ns"):
        text += (f", nap {p['nap_cpu_ns'] / 1e3:.1f}us cpu"
                 f" +{p.get('nap_overshoot_ns', 0) / 1e3:.0f}us")
    return text


def _watch(client: CtlClient, interval_s: float, as_json: bool) -> int:
    prev = client.call("stats")
    try:
        while True:
            time.sleep(interval_s)
            cur = client.call("stats")
            rs = rates(prev, cur)
            if as_json:
                print(
                    json.dumps(
                        {
                            "time_ns": cur["time_ns"],
                            "ports": [r.__dict__ for r in rs],
                        }
                    ),
                    flush=True,
                )
            else:
                stamp = time.strftime("%H:%M:%S")
                print(f"-- {stamp} (every {interval_s:g} s, Ctrl-C to stop)")
                print(
                    format_table(
                        ["port", "rx_pps", "tx_pps", "rx_bps", "tx_bps", "drops/s"],
                        [
                            [
                                r.name,
                                _si(r.rx_pps),
                                _si(r.tx_pps),
                                _si(r.rx_bps),
                                _si(r.tx_bps),
                                _si(r.drops_pps),
                            ]
                            for r in rs
                        ],
                    ),
                    flush=True,
                )
                wr = worker_rates(prev, cur)
                if wr:
                    print(format_table(
                        ["worker", "cpu_%", "busy_%", "asleep_%", "sleeps/s", "wakeups/s", "naps/s",
                         "wake-up policy"],
                        [[w["id"], round(w["cpu_pct"], 1), round(w["busy_pct"], 1),
                          round(w["asleep_pct"], 1), _si(w["sleeps_ps"]), _si(w["wakeups_ps"]),
                          _si(w["naps_ps"]), w["policy"]] for w in wr],
                    ), flush=True)
            prev = cur
    except KeyboardInterrupt:
        return 0


# ------------------------------------------------------------------ commands


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
            return super().add_parser(name, **kw)

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
    add.add_argument("kind", help="memif, af_xdp, af_packet, tap, vhost_user")
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
            table = {"name": a.name, "kind": a.kind, **table}
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
