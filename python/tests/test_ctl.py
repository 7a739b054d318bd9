"""turnout ctl without a daemon: argument parsing, tables, rates, and the
client against a scripted fake server (errors, hang-ups, garbage)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from turnout import cli
from turnout.ctl import (
    CtlClient,
    CtlConnectionError,
    CtlError,
    _policy_text,
    format_table,
    parse_kv,
    rates,
    worker_rates,
)


def test_parse_kv_reads_json_values_and_strings():
    assert parse_kv(
        ["id=2", "socket=/run/x.sock", "client=true", 'pairs=[["a","b"]]', "s=0600"]
    ) == {
        "id": 2,
        "socket": "/run/x.sock",
        "client": True,
        "pairs": [["a", "b"]],
        "s": "0600",
    }
    with pytest.raises(ValueError, match="expected key=value"):
        parse_kv(["novalue"])
    with pytest.raises(ValueError, match="given twice"):
        parse_kv(["a=1", "a=2"])


def test_format_table_aligns_numbers_right():
    t = format_table(["name", "n"], [["a", 1], ["bb", 100], ["c", None]]).splitlines()
    assert t == ["name    n", "----  ---", "a       1", "bb    100", "c       -"]


def _snap(t_ns: int, rx: int, drops: int = 0) -> dict:
    return {
        "time_ns": t_ns,
        "ports": [
            {
                "name": "a",
                "rx_packets": rx,
                "tx_packets": 0,
                "rx_bytes": 64 * rx,
                "tx_bytes": 0,
                "drops": {"tx_full": drops},
            },
        ],
    }


def test_rates_between_snapshots():
    r = rates(_snap(0, 1000), _snap(500_000_000, 2000, 10))
    assert len(r) == 1
    assert r[0].rx_pps == pytest.approx(2000.0)
    assert r[0].rx_bps == pytest.approx(2000.0 * 64 * 8)
    assert r[0].drops_pps == pytest.approx(20.0)
    # a reset in between counts from zero
    r = rates(_snap(0, 1000), _snap(1_000_000_000, 300))
    assert r[0].rx_pps == pytest.approx(300.0)
    assert rates(_snap(5, 1), _snap(5, 2)) == []


class FakeDaemon:
    """Answers each request line with the next scripted reply (or hangs up on None)."""

    def __init__(self, path: Path, replies: list) -> None:
        self.path = str(path)
        self.replies = list(replies)
        self.requests: list[dict] = []
        self.connections = 0
        self.srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.srv.bind(self.path)
        self.srv.listen(1)
        self.t = threading.Thread(target=self.run, daemon=True)
        self.t.start()

    def run(self) -> None:
        # One connection after another (each cli.main call connects anew),
        # until the script is used up.
        while self.replies:
            conn, _ = self.srv.accept()
            self.connections += 1
            f = conn.makefile("rwb")
            while self.replies:
                line = f.readline()
                if not line:
                    break
                req = json.loads(line)
                self.requests.append(req)
                reply = self.replies.pop(0)
                if reply is None:
                    break
                if callable(reply):
                    reply = reply(req)
                f.write((reply if isinstance(reply, bytes) else json.dumps(reply).encode()) + b"\n")
                f.flush()
            f.close()
            conn.close()
        self.srv.close()


def ok(result):
    return lambda req: {"jsonrpc": "2.0", "id": req["id"], "result": result}


def test_client_results_errors_and_hangups(tmp_path):
    fake = FakeDaemon(
        tmp_path / "s",
        [
            ok({"version": "0.1.0", "api": 1, "git": "abc"}),
            lambda req: {
                "jsonrpc": "2.0",
                "id": req["id"],
                "error": {"code": 1, "message": 'no port named "x"'},
            },
            None,
        ],
    )
    with CtlClient(fake.path, timeout_s=5) as c:
        assert c.call("version")["api"] == 1
        with pytest.raises(CtlError) as e:
            c.call("port.remove", {"name": "x"})
        assert (e.value.code, e.value.message) == (1, 'no port named "x"')
        with pytest.raises(CtlConnectionError, match="closed the connection"):
            c.call("stats")
    assert fake.requests[1] == {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "port.remove",
        "params": {"name": "x"},
    }


def test_client_rejects_garbage_and_wrong_ids(tmp_path):
    fake = FakeDaemon(tmp_path / "s", [b"this is not json"])
    with (
        CtlClient(fake.path, timeout_s=5) as c,
        pytest.raises(CtlConnectionError, match="not json"),
    ):
        c.call("version")
    fake = FakeDaemon(tmp_path / "t", [{"jsonrpc": "2.0", "id": 99, "result": {}}])
    with (
        CtlClient(fake.path, timeout_s=5) as c,
        pytest.raises(CtlConnectionError, match="does not match"),
    ):
        c.call("version")


def test_cli_exit_codes(tmp_path, capsys):
    assert cli.main(["ctl", "--socket", str(tmp_path / "missing.sock"), "ports"]) == 3
    err = capsys.readouterr().err
    assert "cannot connect to turnoutd at" in err and "is turnoutd running?" in err
    fake = FakeDaemon(
        tmp_path / "s",
        [
            lambda req: {
                "jsonrpc": "2.0",
                "id": req["id"],
                "error": {"code": 2, "message": 'a port named "a" exists'},
            }
        ],
    )
    rc = cli.main(["ctl", "--socket", fake.path, "port", "add", "a", "memif", "socket=/x", "id=1"])
    assert rc == 1
    assert capsys.readouterr().err.strip() == 'turnout ctl: error 2: a port named "a" exists'
    assert fake.requests[0]["params"] == {"name": "a", "kind": "memif", "socket": "/x", "id": 1}
    # bad key=value is a usage error before anything is sent
    fake = FakeDaemon(tmp_path / "u", [])
    assert cli.main(["ctl", "--socket", fake.path, "logic", "replace", "bridge", "aging_s"]) == 2
    assert "expected key=value" in capsys.readouterr().err


def test_cli_logic_cmd_args_forms(tmp_path, capsys):
    fake = FakeDaemon(tmp_path / "s", [ok({"n": 1}), ok({"n": 2}), ok({"n": 3})])
    for extra in (
        ['{"mac": "02:00:00:00:00:01", "port": "a"}'],
        ["mac=02:00:00:00:00:01", "port=a"],
        [],
    ):
        assert cli.main(["ctl", "--socket", fake.path, "logic", "cmd", "add", *extra]) == 0
    capsys.readouterr()
    assert fake.requests[0]["params"] == {
        "cmd": "add",
        "args": {"mac": "02:00:00:00:00:01", "port": "a"},
    }
    assert fake.requests[1]["params"] == fake.requests[0]["params"]
    assert fake.requests[2]["params"] == {"cmd": "add"}


def test_worker_rates_between_snapshots():
    def snap(t_ns, cpu_ns, sleeps, wakeups, naps, asleep_ns, moderating):
        return {"time_ns": t_ns, "ports": [], "workers": [{
            "id": 0, "cpu_ns": cpu_ns, "busy_ns": cpu_ns // 2, "sleeps": sleeps,
            "wakeups": wakeups, "naps": naps, "gaps": 2 * naps, "asleep_ns": asleep_ns,
            "policy": {"budget_ns": 100_000, "moderating": moderating, "nap_ns": 70_000,
                       "sleep_cpu_ns": 17_000, "nap_cpu_ns": 25_000,
                       "nap_overshoot_ns": 30_000}}]}

    w = worker_rates(snap(0, 0, 0, 0, 0, 0, False),
                     snap(2_000_000_000, 300_000_000, 1000, 900, 4000, 1_500_000_000, True))
    assert len(w) == 1
    assert w[0]["cpu_pct"] == 15.0 and w[0]["asleep_pct"] == 75.0
    assert (w[0]["sleeps_ps"], w[0]["wakeups_ps"], w[0]["naps_ps"]) == (500.0, 450.0, 2000.0)
    assert w[0]["gaps_ps"] == 4000.0
    assert "nap 70us" in w[0]["policy"] and "budget 100us" in w[0]["policy"]
    # naps vetoed by their own overshoot: when they are tried again
    v = snap(2_000_000_000, 300_000_000, 1000, 900, 4000, 1_500_000_000, False)
    v["workers"][0]["policy"].update(regime="interrupt", why="wake_fits",
                                     nap_pass_ns=12_000, nap_retry_in_ns=640_000_000)
    text = worker_rates(snap(0, 0, 0, 0, 0, 0, False), v)[0]["policy"]
    assert "+30us +12us pass" in text and "tried again in 640ms" in text, text
    # poll mode: no policy
    p = snap(0, 0, 0, 0, 0, 0, False)
    p["workers"][0]["policy"] = {}
    assert worker_rates(p, p) == [] or worker_rates(p, p)[0]["policy"] == "-"


def test_cli_dump_flows_and_groups_as_text(tmp_path, capsys):
    dump = {
        "flows": [
            {"flow": "table=0,priority=10,in_port=0,actions=output:1", "cookie": 26,
             "n_packets": 3, "n_bytes": 180, "duration": 1.5},
        ],
        "tables": [{"table": 0, "flows": 1, "subtables": 1, "lookups": 4, "matched": 3,
                    "missed": 1}],
    }
    groups = {"groups": [{"group": "group_id=5,type=all,bucket=output:1,bucket=output:2",
                          "group_id": 5, "type": "all", "ref_count": 1, "n_packets": 7,
                          "n_bytes": 420, "duration": 2.0,
                          "buckets": [{"n_packets": 7, "n_bytes": 420},
                                      {"n_packets": 7, "n_bytes": 420}]}]}
    meters = {"meters": [{"meter": "meter=1,kbps,bands=type=drop,rate=1000", "meter_id": 1,
                          "flow_count": 2, "n_packets": 9, "n_bytes": 540, "duration": 3.5,
                          "bands": [{"n_packets": 4, "n_bytes": 240}]}]}
    err = lambda req: {"jsonrpc": "2.0", "id": req["id"],  # noqa: E731
                       "error": {"code": 4, "message": "flows dump: table must be 0..254"}}
    ports = [{"id": 1, "name": "vnf1"}, {"id": 0, "name": "vnf0"}]
    fake = FakeDaemon(tmp_path / "s", [ok(dump), ok(ports), ok(groups), ok(ports), ok(meters),
                                       ok({"flows": [], "tables": []}), ok(ports), err])
    note = ("NOTE: port numbers below are turnoutd port ids (0=vnf0, 1=vnf1), not OpenFlow's:"
            " ovs-ofctl shows port id N as N+1 (in_port=1, output:2 for ids 0, 1)")
    assert cli.main(["ctl", "--socket", fake.path, "dump-flows"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        note,
        " cookie=0x1a, duration=1.5s, n_packets=3, n_bytes=180,"
        " table=0,priority=10,in_port=0,actions=output:1",
        "table 0: flows=1, subtables=1, lookups=4, matched=3, missed=1",
    ]
    assert cli.main(["ctl", "--socket", fake.path, "dump-groups", "5"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        note,
        " group_id=5,type=all,bucket=output:1,bucket=output:2",
        "    duration=2.0s, ref_count=1, n_packets=7, n_bytes=420,"
        " bucket0:n_packets=7,n_bytes=420,bucket1:n_packets=7,n_bytes=420",
    ]
    assert cli.main(["ctl", "--socket", fake.path, "dump-meters", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines() == [
        " meter=1,kbps,bands=type=drop,rate=1000",
        "    duration=3.5s, flow_count=2, n_packets=9, n_bytes=540,"
        " band0:n_packets=4,n_bytes=240",
    ]
    assert cli.main(["ctl", "--socket", fake.path, "dump-flows", "3"]) == 0
    assert capsys.readouterr().out.splitlines() == [note, " (no flows)"]
    assert cli.main(["ctl", "--socket", fake.path, "dump-flows", "300"]) == 1
    assert "table must be" in capsys.readouterr().err
    assert [r["method"] for r in fake.requests] == ["logic.command", "port.list"] * 2 + [
        "logic.command"] + ["logic.command", "port.list"] + ["logic.command"]
    assert [r["params"] for r in fake.requests if r["method"] == "logic.command"] == [
        {"cmd": "dump", "args": {}},
        {"cmd": "dump_groups", "args": {"group": "group_id=5"}},
        {"cmd": "dump_meters", "args": {"meter": "meter=1"}},
        {"cmd": "dump", "args": {"table": 3}},
        {"cmd": "dump", "args": {"table": 300}},
    ]


def test_policy_text_says_the_regime_and_why():
    assert _policy_text({"budget_ns": 100_000, "regime": "poll", "why": "wake_over_budget",
                         "wake_p99_ns": 140_000, "sleep_after_ns": 1_000_000}) == (
        "poll (wake-up p99 140us over half the budget; budget 100us), sleeps after 1000us idle")
    t = _policy_text({"budget_ns": 1_000_000, "regime": "moderate", "why": "naps_cheaper",
                      "moderating": True, "nap_ns": 700_000, "sleep_after_ns": 2_000})
    assert t.startswith("moderate, nap 700us (naps fit and cost less; budget 1000us)")
    t = _policy_text({"budget_ns": 100_000, "regime": "interrupt", "why": "contended",
                      "wake_p99_ns": 4_000_000, "poll_p99_ns": 30_000_000})
    assert "poll p99 30000us, wake-up p99 4000us" in t
    t = _policy_text({"budget_ns": 100_000, "regime": "interrupt", "why": "contended",
                      "wake_p99_ns": 233_000, "poll_p99_ns": 2_000_000, "poll_slow_epochs": 3})
    assert "wake-up p99 233us, 3 slow epochs of 64 poll samples in a row)" in t
    # judged on the scheduler's run-queue wait too (schedstat)
    t = _policy_text({"budget_ns": 100_000, "regime": "interrupt", "why": "contended",
                      "wake_p99_ns": 233_000, "poll_p99_ns": 2_000_000, "poll_slow_epochs": 3,
                      "contention_signal": "run_queue_wait", "rq_wait_permille": 125})
    assert "in a row, run-queue wait 12.5%)" in t
    assert _policy_text({"why": "poll_mode"}) == "-"
    # the poll regime's gap between polls after a small batch
    t = _policy_text({"budget_ns": 100_000, "regime": "poll", "why": "wake_over_budget",
                      "wake_p99_ns": 140_000, "gap_ns": 25_000})
    assert t.startswith("poll, gap 25.0us (wake-up p99 140us over half the budget")


def test_the_sut_adapter_calls_through_the_same_client(tmp_path):
    """sut/turnoutd.py's ``rpc`` is the ctl client: an error answer is a
    SutError naming the method, an unreachable daemon a CtlConnectionError
    (an OSError, as the socket's own errors were)."""
    from turnout.ctl import client
    from turnout.sut.base import SutError
    from turnout.sut.turnoutd import rpc

    err = {"jsonrpc": "2.0", "id": 1, "error": {"code": 2, "message": "no logic command 'x'"}}
    fake = FakeDaemon(tmp_path / "s", [ok({"ports": []}), err, b"not json"])
    assert rpc(fake.path, "stats") == {"ports": []}
    with pytest.raises(SutError, match=r"turnoutd logic.command: no logic command 'x' \(code 2\)"):
        rpc(fake.path, "logic.command", {"cmd": "x"})
    with pytest.raises(CtlConnectionError, match="not json"):
        rpc(fake.path, "stats")
    with pytest.raises(OSError, match="cannot connect to turnoutd"):
        rpc(str(tmp_path / "gone.sock"), "stats")
    assert issubclass(client.CtlConnectionError, OSError)


def test_the_sut_adapter_asks_stats_over_one_kept_connection(tmp_path):
    """The cost sampler's ``stats`` every 50 ms goes over one connection
    (a connection each made turnoutd start and end a thread each time, on
    the worker's CPU's account); a daemon that hung up is reconnected once,
    an error answer is still a SutError, other methods connect anew."""
    from turnout.sut.base import SutError
    from turnout.sut.turnoutd import Turnoutd

    err = {"jsonrpc": "2.0", "id": 4, "error": {"code": 2, "message": "busy"}}
    fake = FakeDaemon(tmp_path / "s", [ok({"n": 1}), ok({"n": 2}), ok({"n": 3}), None,
                                       ok({"n": 4}), err, ok({"api": 1})])
    t = Turnoutd()
    t.sock = fake.path
    assert [t._rpc("stats")["n"] for _ in range(3)] == [1, 2, 3]
    assert fake.connections == 1
    # the daemon hangs up on the next request: reconnected, asked again
    assert t._rpc("stats") == {"n": 4}
    assert fake.connections == 2
    with pytest.raises(SutError, match=r"turnoutd stats: busy \(code 2\)"):
        t._rpc("stats")
    t._close_ctl()  # the fake serves one connection at a time
    assert t._rpc("version") == {"api": 1}
    assert fake.connections == 3
    gone = Turnoutd()
    gone.sock = str(tmp_path / "gone.sock")
    with pytest.raises(CtlConnectionError, match="cannot connect to turnoutd"):
        gone._rpc("stats")


def test_the_sut_adapter_on_a_remote_host_decodes_with_the_client():
    """Across hosts the request goes through the host's unix_call; the line
    and the answer are the client's (request_line, result_of)."""
    from turnout.sut.base import SutError
    from turnout.sut.turnoutd import rpc

    class Host:
        is_local = False

        def __init__(self, answer):
            self.answer, self.sent = answer, []

        def unix_call(self, path, line, timeout_s):
            self.sent.append((path, line))
            return self.answer

    h = Host('{"jsonrpc": "2.0", "id": 1, "result": {"api": 1}}')
    assert rpc("/r/t.sock", "version", host=h) == {"api": 1}  # type: ignore[arg-type]
    assert json.loads(h.sent[0][1]) == {"jsonrpc": "2.0", "id": 1, "method": "version"}
    h = Host('{"jsonrpc": "2.0", "id": 1, "error": {"code": 3, "message": "busy"}}')
    with pytest.raises(SutError, match=r"turnoutd stats: busy \(code 3\)"):
        rpc("/r/t.sock", "stats", host=h)  # type: ignore[arg-type]
