"""turnoutd's switch-wide OpenFlow state against real peers:

- the datapath id from `[switch] datapath_id`, as `ovs-ofctl show` and an
  os-ken controller see it, changed at run time by `turnout ctl
  datapath-id` (the controller is reconnected and sees the new one), bad
  values refused by `--check-config` and the API;
- every refused flow-, group- and meter-mod is counted by message and
  error (`stats`, `turnout ctl stats`, the Prometheus endpoint) and
  logged at warn with its cause and what it asked for, and a controller
  sending thousands of them gets them all counted but cannot flood the
  log.

Needs root, ovs-ofctl and os-ken in .venv-osken (scripts/setup.sh):
missing, they skip, or fail under TURNOUT_REQUIRE_PEERS=1. Run:
cargo build --release -p turnoutd &&
    .venv/bin/pytest -s python/tests/turnoutd/test_openflow_switch.py
"""

from __future__ import annotations

import json
import os
import random
import re
import socket
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from harness import Turnoutd, openflow_lab, recv_ofp, stop_pid, turnoutd_binary, wait_for
from osken_suite import osken_python
from threehosts import nx

from turnout import testpeers

pytestmark = pytest.mark.system

P = f"tofs{os.getpid() % 100000}-"
MAC = {1: "02:00:00:0d:00:01", 2: "02:00:00:0d:00:02", 3: "02:00:00:0d:00:03"}
APP = Path(__file__).resolve().parent / "apps" / "osken_learning.py"


def ctl(sock: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    r = subprocess.run([sys.executable, "-m", "turnout.cli", "ctl", "--socket", sock, *args],
                       capture_output=True, text=True, timeout=60, check=False)
    if check and r.returncode != 0:
        raise AssertionError(f"turnout ctl {' '.join(args)} -> {r.returncode}: {r.stderr}")
    return r


def test_bad_datapath_ids_are_refused_by_check_config(tmp_path: Path) -> None:
    try:
        binary = turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    for value, why in [("0", "0 is not a datapath id"),
                       ('"12"', '"12" is not a datapath id'),
                       ('"0x1g"', '"0x1g" is not a datapath id'),
                       ("-3", "-3 is not a datapath id"),
                       ("[1]", "expected a datapath id")]:
        f = tmp_path / "bad.toml"
        f.write_text(f"[switch]\ndatapath_id = {value}\n")
        r = subprocess.run([str(binary), "--check-config", str(f)], capture_output=True,
                           text=True, check=False)
        assert r.returncode == 2, (value, r)
        assert f"switch.datapath_id: {why}" in r.stderr, (value, r.stderr)
    f = tmp_path / "good.toml"
    f.write_text('[switch]\ndatapath_id = "00:00:00:00:00:00:0a:b1"\n')
    r = subprocess.run([str(binary), "--check-config", str(f)], capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, r


def test_datapath_id_from_the_config_and_at_run_time(tmp_path: Path) -> None:
    """ovs-ofctl show and os-ken see the configured id; `turnout ctl
    datapath-id ID` changes it, the controller's connection is ended and
    it reconnects to read the new one; a bad id is refused and changes
    nothing."""
    py = osken_python()
    testpeers.need(py, "os-ken is not installed (scripts/setup.sh: .venv-osken)")
    assert py is not None
    with openflow_lab(tmp_path, P, MAC, switch_extra='datapath_id = "0x0ab1"\n') as lab:
        assert lab.daemon is not None
        sock = lab.daemon.sock
        assert "dpid:0000000000000ab1" in lab.ofctl("show").stdout
        shown = ctl(sock, "datapath-id").stdout.strip()
        assert shown == "datapath id 0000000000000ab1 (configured)", shown
        # An os-ken controller: turnoutd connects to it as well.
        port = random.randint(20000, 60000)
        events = tmp_path / "events.jsonl"

        def connected() -> list[dict[str, Any]]:
            if not events.exists():
                return []
            return [e for e in map(json.loads, events.read_text().splitlines())
                    if e["event"] == "connected"]

        app_log = open(tmp_path / "osken.log", "wb")  # noqa: SIM115 - closed below
        app = subprocess.Popen(["ip", "netns", "exec", lab.sw, py, str(APP), "127.0.0.1",
                                str(port)], stdout=app_log, stderr=app_log,
                               env=dict(os.environ, OFPKT_EVENTS=str(events)))
        second: Turnoutd | None = None
        try:
            wait_for("os-ken listening", 30,
                     lambda: f":{port} " in nx(lab.sw, "ss", "-ltn").stdout)
            # The lab's turnoutd listens (ovs-ofctl); a second one, without
            # ports, connects to os-ken as a switch connects to its controller.
            second = Turnoutd(tmp_path / "sw2",
                              '[switch]\ncontrol_socket = "@CTL@"\n'
                              f'openflow = ["tcp:127.0.0.1:{port}"]\n'
                              "datapath_id = 0x0ab2\n\n[logic]\nname = \"flows\"\n",
                              netns=lab.sw).start()
            got = wait_for("turnoutd connected to os-ken", 30, connected)
            assert got[-1]["dpid"] == 0xAB2, got
            out = ctl(second.sock, "datapath-id", "00:00:00:00:00:00:00:42").stdout
            assert out.strip() == "datapath id 0000000000000042 (configured)", out
            got = wait_for("os-ken sees the new datapath id", 30,
                           lambda: [e for e in connected() if e["dpid"] == 0x42])
            assert "datapath id changed" in second.log(), second.log()[-2000:]
            # config.show has it, as 16 hex digits.
            cfg = json.loads(ctl(second.sock, "--json", "config").stdout)
            assert cfg["switch"]["datapath_id"] == "0000000000000042", cfg["switch"]
            # A bad id: refused, nothing changes, the controller stays.
            n = len(connected())
            r = ctl(second.sock, "datapath-id", "0", check=False)
            assert r.returncode == 1 and "0 is not a datapath id" in r.stderr, r
            r = ctl(second.sock, "call", "switch.set", '{"datapath_id": "zz"}', check=False)
            assert r.returncode == 1 and "is not a datapath id" in r.stderr, r
            r = ctl(second.sock, "call", "switch.set", '{"dpid": 5}', check=False)
            assert r.returncode == 1 and "unknown field" in r.stderr, r
            assert ctl(second.sock, "datapath-id").stdout.strip().startswith(
                "datapath id 0000000000000042")
            assert len(connected()) == n
            # The same through ovs-ofctl on the lab's daemon (a passive
            # endpoint: ovs-ofctl connects anew for each command).
            ctl(sock, "datapath-id", "4097")
            assert "dpid:0000000000001001" in lab.ofctl("show").stdout
        finally:
            if second is not None:
                second.stop()
            stop_pid(app)
            app_log.close()


def _msg(kind: int, xid: int, body: bytes) -> bytes:
    return struct.pack("!BBHI", 4, kind, 8 + len(body), xid) + body


def _recv(s: socket.socket) -> bytes:
    return recv_ofp(s)


def _errors_until_barrier(s: socket.socket, xid: int) -> list[tuple[int, int, int]]:
    s.sendall(_msg(20, xid, b""))
    errs = []
    while True:
        m = _recv(s)
        if m[1] == 21 and struct.unpack("!I", m[4:8])[0] == xid:
            return errs
        if m[1] == 1:
            errs.append(struct.unpack("!IHH", m[4:12]))


def _flow_mod_output(xid: int, port: int) -> bytes:
    """ADD, table 0, priority 100, match all, apply-actions output:port."""
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, 0, 0, 0, 100, 0xFFFFFFFF, 0xFFFFFFFF,
                       0xFFFFFFFF, 0)
    out = struct.pack("!HHIH6x", 0, 16, port, 0)
    return _msg(14, xid, body + struct.pack("!HH4x", 1, 4)
                + struct.pack("!HH4x", 4, 8 + len(out)) + out)


def _group_mod_chained(xid: int, group_id: int) -> bytes:
    """ADD an ALL group whose bucket names another group (chaining)."""
    act = struct.pack("!HHI", 22, 8, 7)  # OFPAT_GROUP 7
    bucket = struct.pack("!HHII4x", 16 + len(act), 0, 0xFFFFFFFF, 0xFFFFFFFF) + act
    return _msg(15, xid, struct.pack("!HBxI", 0, 0, group_id) + bucket)


def _meter_mod_id0(xid: int) -> bytes:
    """ADD meter 0 (not a meter id: OFPMMFC_INVALID_METER) with a drop band."""
    band = struct.pack("!HHII4x", 1, 16, 1000, 0)
    return _msg(29, xid, struct.pack("!HHI", 0, 1, 0) + band)


def _metric(text: str, name: str, **labels: str) -> float:
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.split()[-1])
    return 0.0


def test_refused_mods_are_counted_and_logged_with_a_bounded_log(tmp_path: Path) -> None:
    port = random.randint(20000, 60000)
    with openflow_lab(tmp_path, P, MAC,
                      switch_extra=f'metrics_listen = "127.0.0.1:{port}"\n') as lab:
        assert lab.daemon is not None
        d = lab.daemon
        # ovs-ofctl: a flow to the LOCAL port, which turnoutd does not have.
        r = lab.ofctl("add-flow", "priority=7,in_port=1,actions=LOCAL", check=False)
        assert r.returncode != 0 and "OFPBAC_BAD_OUT_PORT" in r.stderr, r
        log = wait_for("the refusal's log line", 10, lambda: [
            x for x in d.log().splitlines() if "openflow refused message=flow_mod" in x])
        line = log[-1]
        assert " warn " in line and "error=OFPBAC_BAD_OUT_PORT" in line, line
        assert "priority=7" in line and "in_port=0x1" in line and "output:local" in line, line
        # Raw: a chained group and meter id 0, each with its own error.
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(str(lab.tmp / "of.sock"))
        s.sendall(_msg(0, 1, b""))
        _recv(s)
        s.sendall(_group_mod_chained(0x31, 5) + _meter_mod_id0(0x32))
        errs = _errors_until_barrier(s, 0x33)
        assert [(x, t) for x, t, _ in errs] == [(0x31, 6), (0x32, 12)], errs
        st = d.rpc("stats")["openflow"]["refused"]
        assert st["flow_mod"] == {"OFPBAC_BAD_OUT_PORT": 1}, st
        assert list(st["group_mod"]) == ["OFPGMFC_CHAINING_UNSUPPORTED"], st
        assert sum(st["meter_mod"].values()) == 1, st
        assert all(k.startswith("OFPMMFC_") for k in st["meter_mod"]), st
        text = ctl(d.sock, "stats").stdout
        assert re.search(r"group_mod\s+1\s+OFPGMFC_CHAINING_UNSUPPORTED=1", text), text
        metrics = nx(lab.sw, sys.executable, "-c",
                     "import sys, urllib.request; sys.stdout.write(urllib.request.urlopen("
                     f"'http://127.0.0.1:{port}/metrics', timeout=10).read().decode())").stdout
        assert _metric(metrics, "turnout_openflow_refused_total", message="group_mod",
                       error="OFPGMFC_CHAINING_UNSUPPORTED") == 1, metrics
        assert _metric(metrics, "turnout_openflow_refused_total", message="flow_mod",
                       error="OFPBAC_BAD_OUT_PORT") == 1, metrics
        # A hostile controller: 3000 refused flow-mods in a burst. All are
        # answered and counted; the log gets a bounded number of lines.
        before = len([x for x in d.log().splitlines() if "openflow refused" in x])
        burst = b"".join(_flow_mod_output(0x1000 + i, 0xFFFFFFFE) for i in range(3000))
        s.sendall(burst)
        errs = _errors_until_barrier(s, 0x34)
        assert len(errs) == 3000 and {(t, c) for _, t, c in errs} == {(2, 4)}, errs[:3]
        st = d.rpc("stats")["openflow"]["refused"]
        assert st["flow_mod"]["OFPBAC_BAD_OUT_PORT"] == 3001, st
        lines = [x for x in d.log().splitlines() if "openflow refused" in x]
        logged = len(lines) - before
        # The burst allowance (20) plus about one a second.
        assert 1 <= logged <= 60, logged
        # Forwarding and the connection go on.
        s.sendall(_msg(2, 0x35, b"ping"))
        assert _recv(s)[1] == 3
        # A later line tells how many were left out.
        def told() -> list[str]:
            lab.ofctl("add-flow", "priority=8,actions=LOCAL", check=False)
            return [x for x in d.log().splitlines()
                    if "openflow refused" in x and int(x.split("unlogged=")[1].split()[0]) > 0]

        wait_for("a line with the unlogged count", 20, told, every_s=1.0)
        # stats.reset zeroes them.
        ctl(d.sock, "stats", "reset")
        st = d.rpc("stats")["openflow"]["refused"]
        assert st == {"flow_mod": {}, "group_mod": {}, "meter_mod": {}}, st
        s.close()

