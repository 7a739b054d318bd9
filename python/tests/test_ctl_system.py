"""System test: the real turnoutd binary with memif ports (no peers needed),
driven by ``turnout ctl``; bad clients on the control socket; the Prometheus
endpoint; clean shutdown by PID. Needs ``cargo build -p turnoutd``."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import socket
import stat
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from turnout import cli

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "tests" / "turnoutd"))
from harness import Turnoutd, turnoutd_binary, wait_for  # noqa: E402

pytestmark = pytest.mark.system

CONFIG = """
[switch]
control_socket = "@CTL@"
metrics_listen = "127.0.0.1:0"

[logic]
name = "patch"
pairs = [["vnf0", "vnf1"]]

[[ports]]
name = "vnf0"
kind = "memif"
socket = "@DIR@/memif.sock"
id = 0

[[ports]]
name = "vnf1"
kind = "memif"
socket = "@DIR@/memif.sock"
id = 1
"""


@pytest.fixture
def daemon(tmp_path):
    try:
        binary = turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    d = Turnoutd(tmp_path / "td", CONFIG, binary)
    d.start()
    try:
        yield d
    finally:
        d.stop(signal.SIGKILL)


def ctl(d: Turnoutd, capsys, *args: str) -> tuple[int, str, str]:
    rc = cli.main(["ctl", "--socket", d.sock, *args])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_ctl_drives_a_running_turnoutd(daemon, capsys):
    d = daemon
    assert stat.S_IMODE(os.stat(d.sock).st_mode) == 0o600
    rc, out, _ = ctl(d, capsys, "version")
    assert rc == 0
    assert re.match(r"turnoutd \d+\.\d+\.\d+ \(api 1, git \w+\) at ", out), out

    rc, out, _ = ctl(d, capsys, "ports")
    lines = out.splitlines()
    assert rc == 0
    assert lines[0].split() == ["id", "name", "kind", "queues", "up", "worker", "max_frame_b"]
    assert lines[2].split()[:5] == ["0", "vnf0", "memif", "1", "no"]
    assert lines[3].split()[:2] == ["1", "vnf1"]

    sock = str(d.dir / "memif.sock")
    rc, out, _ = ctl(d, capsys, "port", "add", "vnf2", "memif", f"socket={sock}", "id=2")
    assert (rc, out.strip()) == (0, "added port vnf2 (id 2)")
    rc, _, err = ctl(d, capsys, "port", "add", "vnf2", "memif", f"socket={sock}", "id=3")
    assert (rc, err.strip()) == (1, 'turnout ctl: error 2: a port named "vnf2" exists')
    rc, _, err = ctl(d, capsys, "port", "add", "vnf3", "memif", f"socket={sock}", "id=2")
    assert rc == 1
    assert f"memif id 2 on socket {sock} is already used by port" in err
    rc, _, err = ctl(d, capsys, "port", "add", "vnf3", "memif", f"socket={sock}", "ring_size=1000")
    assert (rc, err.strip()) == (
        1,
        "turnout ctl: error -32602: ring_size: 1000 is not a power of two in 2..=16384",
    )
    rc, out, _ = ctl(d, capsys, "--json", "ports")
    assert [p["name"] for p in json.loads(out)] == ["vnf0", "vnf1", "vnf2"]

    rc, out, _ = ctl(d, capsys, "logic", "show")
    assert rc == 0
    assert out.splitlines()[0] == 'logic patch {"pairs": [["vnf0", "vnf1"]]}'
    assert "show" in out
    rc, out, _ = ctl(d, capsys, "logic", "cmd", "show")
    assert json.loads(out)["pairs"] == [{"from": 0, "to": 1}, {"from": 1, "to": 0}]
    rc, out, _ = ctl(
        d, capsys, "logic", "cmd", "set", "from=vnf2", "to=vnf0", "bidirectional=false"
    )
    assert rc == 0
    assert {"from": 2, "to": 0} in json.loads(out)["pairs"]
    rc, _, err = ctl(d, capsys, "logic", "cmd", "fly")
    assert rc == 1
    assert 'error -32602: logic patch has no command "fly"' in err
    rc, _, err = ctl(d, capsys, "logic", "replace", "bridge", "aging_s=-1")
    assert rc == 1 and "error 3:" in err and "aging_s" in err
    rc, out, _ = ctl(d, capsys, "logic", "replace", "bridge", "aging_s=30")
    assert (rc, out.strip()) == (0, "logic replaced: now bridge")
    rc, out, _ = ctl(d, capsys, "--json", "logic", "show")
    assert json.loads(out)["config"] == {"name": "bridge", "aging_s": 30}

    rc, out, _ = ctl(d, capsys, "port", "remove", "vnf2")
    assert (rc, out.strip()) == (0, "removed port vnf2")
    rc, _, err = ctl(d, capsys, "port", "remove", "vnf2")
    assert (rc, err.strip()) == (1, 'turnout ctl: error 1: no port named "vnf2"')

    rc, out, _ = ctl(d, capsys, "stats")
    assert rc == 0
    assert out.splitlines()[0].split()[:3] == ["port", "kind", "up"]
    assert "worker" in out and "cyc/pkt" in out
    rc, out, _ = ctl(d, capsys, "stats", "--json")
    s = json.loads(out)
    assert [p["name"] for p in s["ports"]] == ["vnf0", "vnf1"]
    assert set(s["ports"][0]["drops"]) >= {"tx_full", "link_down", "no_port"}
    assert s["workers"][0]["tid"] > 0 and s["tsc_hz"] > 0
    rc, out, _ = ctl(d, capsys, "stats", "reset")
    assert (rc, out.strip()) == (0, "counters reset")

    rc, out, _ = ctl(d, capsys, "config")
    c = json.loads(out)
    assert c["logic"] == {"name": "bridge", "aging_s": 30}
    assert [p["name"] for p in c["ports"]] == ["vnf0", "vnf1"]
    assert c["ports"][0]["socket"] == sock
    assert c["switch"]["control_socket"] == d.sock

    rc, out, _ = ctl(d, capsys, "call", "port.list")
    assert rc == 0 and len(json.loads(out)) == 2

    # The real entry point, as a script would call it.
    r = subprocess.run(
        [sys.executable, "-m", "turnout.cli", "ctl", "--socket", d.sock, "--json", "version"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["api"] == 1


WATCH = ["stats", "--watch", "0.2"]


def test_watch_prints_rates_until_interrupted(daemon):
    p = subprocess.Popen(
        [sys.executable, "-m", "turnout.cli", "ctl", "--socket", daemon.sock, *WATCH],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 60
        # until two reports, a deadline on each read (readline alone would
        # wait for ever on a command that prints nothing)
        while sum(1 for x in lines if x.startswith("-- ")) < 2 and time.monotonic() < deadline:
            if select.select([p.stdout], [], [], 0.5)[0]:
                line = p.stdout.readline()
                assert line, f"--watch ended: {lines} {p.stderr.read()}"
                lines.append(line)
        assert sum(1 for x in lines if x.startswith("-- ")) >= 2, lines
        os.kill(p.pid, signal.SIGINT)
        _, err = p.communicate(timeout=10)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    assert p.returncode == 0, err
    text = "".join(lines)
    assert text.count("Ctrl-C to stop") >= 2
    header = next(x for x in lines if x.startswith("port")).split()
    assert header == ["port", "rx_pps", "tx_pps", "rx_bps", "tx_bps", "drops/s"]
    assert any(x.split()[:2] == ["vnf0", "0"] for x in lines)


def test_missing_socket_is_a_clear_error(tmp_path, capsys):
    rc = cli.main(["ctl", "--socket", str(tmp_path / "nope.sock"), "stats"])
    assert rc == 3
    assert "cannot connect to turnoutd at" in capsys.readouterr().err


def _raw(path: str) -> socket.socket:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(path)
    return s


def test_bad_clients_do_not_hurt_the_daemon(daemon):
    d = daemon
    # garbage, answered with a parse error, connection stays usable
    s = _raw(d.sock)
    f = s.makefile("rwb")
    f.write(b"\x00\xffgarbage\n")
    f.flush()
    assert json.loads(f.readline())["error"]["code"] == -32700
    f.write(b'{"jsonrpc":"2.0","id":5,"method":"version"}\n')
    f.flush()
    assert json.loads(f.readline())["result"]["api"] == 1
    s.close()
    # a line longer than the limit: error, then the daemon hangs up
    s = _raw(d.sock)
    try:
        s.sendall(b"[" * (1 << 20) + b"[[[[")
        s.settimeout(10)
        data = b""
        while not data.endswith(b"\n"):
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
        assert json.loads(data)["error"]["message"] == "request longer than 1048576 bytes"
    except (BrokenPipeError, ConnectionResetError):
        pass  # the daemon closed first: also a refusal
    s.close()
    # a client that disconnects mid-request, and one that connects and idles
    s = _raw(d.sock)
    s.sendall(b'{"jsonrpc":"2.0","id":1,"meth')
    s.close()
    idle = _raw(d.sock)
    # others are still served, in parallel with the idle one
    assert d.rpc("version")["api"] == 1
    assert [p["name"] for p in d.rpc("port.list")] == ["vnf0", "vnf1"]
    idle.close()
    assert "stopped" not in d.log()


def test_metrics_endpoint(daemon):
    addr = wait_for(
        "metrics address in the log",
        5,
        lambda: (m := re.search(r"metrics=(127\.0\.0\.1:\d+)", daemon.log())) and m.group(1),
    )
    body = urllib.request.urlopen(f"http://{addr}/metrics", timeout=10).read().decode()
    helps = set(re.findall(r"^# HELP (\S+) ", body, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", body, re.M))
    assert helps == set(types)
    for name in (
        "turnout_port_rx_packets_total",
        "turnout_port_tx_bytes_total",
        "turnout_port_drops_total",
        "turnout_worker_busy_seconds_total",
        "turnout_worker_cycles_per_packet",
    ):
        assert name in types
    assert types["turnout_port_drops_total"] == "counter"
    samples = [x for x in body.splitlines() if x and not x.startswith("#")]
    for x in samples:
        name = re.match(r"[a-zA-Z_:][a-zA-Z0-9_:]*", x).group(0)  # Prometheus's grammar
        assert name in types, x
        float(x.rsplit(" ", 1)[1])
    assert 'turnout_port_drops_total{port="vnf0",reason="tx_full"} 0' in samples
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(f"http://{addr}/nothing", timeout=10)
    assert e.value.code == 404


def test_sigterm_removes_the_sockets(tmp_path):
    d = Turnoutd(tmp_path / "td", CONFIG)
    d.start()
    try:
        memif = d.dir / "memif.sock"
        assert memif.exists()
        rc = d.stop(signal.SIGTERM)
    finally:
        d.stop(signal.SIGKILL)
    assert rc == 0
    assert not os.path.exists(d.sock) and not memif.exists()
    assert "shutting down signal=SIGTERM" in d.log()


def test_check_config_exit_codes(tmp_path):
    binary = turnoutd_binary()
    bad = tmp_path / "bad.toml"
    bad.write_text('[[ports]]\nname = "a"\nkind = "memfi"\n')
    r = subprocess.run([str(binary), "--check-config", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2
    assert r.stderr.strip() == (
        'config: ports[0].kind: unknown port kind "memfi" '
        "(expected one of memif, af_xdp (or afxdp), af_packet (or afpacket), tap, "
        "vhost_user (or vhost-user, vhost), vxlan, geneve)"
    )
    good = tmp_path / "good.toml"
    good.write_text(CONFIG.replace("@CTL@", "/tmp/x.sock").replace("@DIR@", str(tmp_path)))
    r = subprocess.run([str(binary), "--check-config", str(good)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "config ok: 2 port(s), 1 worker(s), logic patch"
    assert not (tmp_path / "memif.sock").exists()
    # a bad config given to --config also exits 2, before opening anything
    r = subprocess.run([str(binary), "--config", str(bad)], capture_output=True, text=True)
    assert r.returncode == 2


def test_a_client_connecting_for_every_call_does_not_start_a_thread_each_time(daemon):
    """A sampler that connects anew for every call (as the workbench did,
    20 times a second) is served by the connection threads that wait for
    the next connection: 20 calls, one after another, see a few connection
    threads (another one whenever a call came before the last thread was
    back waiting: on a busy machine that thread may wait for a CPU through
    several calls; 5 of 20 in one `make test`), not 20 that start and end."""
    from turnout.ctl.client import CtlClient

    d = daemon
    assert d.proc is not None
    task = Path(f"/proc/{d.proc.pid}/task")

    def ctl_threads() -> set[int]:
        out = set()
        for t in task.iterdir():
            try:
                if (t / "comm").read_text().strip() == "turnout-ctl-c":
                    out.add(int(t.name))
            except OSError:  # ended between the listing and the read
                pass
        return out

    seen: set[int] = set()
    for _ in range(20):
        with CtlClient(d.sock, timeout_s=10) as c:
            assert c.call("version")["api"] == 1
            seen |= ctl_threads()  # the thread serving this connection is alive
    assert 1 <= len(seen) <= 10, sorted(seen)
