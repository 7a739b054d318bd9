"""Remote campaigns without SSH: the campaign keys (turnout.hosts.config),
the agent's dead man's switch run as a real process here, the latency
mode, the wires handed out instead of veths, and the report's host
listing. The end-to-end runs over SSH are in test_remote_system.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from turnout.campaign.spec import CampaignError, parse
from turnout.hosts import agent
from turnout.hosts.remote import CROSS_HOST, SAME_HOST, RemoteBed, latency_mode
from turnout.measure.gen import Stream
from turnout.scenarios import Point, Unsupported, build
from turnout.sut import make_sut

AGENT = Path(agent.__file__)


def doc(**over: object) -> dict[str, object]:
    d: dict[str, object] = {
        "campaign": {"name": "r", "location": "remote",
                     "wires": [["t:ens1f0", "s:ens1f0"], ["t:ens1f1", "s:ens1f1"]]},
        "matrix": {"suts": ["turnoutd"], "scenarios": ["p2p"]},
        "hosts": {"t": {"ssh": "root@192.0.2.1", "roles": ["tester"]},
                  "s": {"ssh": "bench@[2001:db8::1]", "port": 2222, "sudo": True,
                        "roles": ["sut", "vnf"], "key_file": "/k"}},
    }
    d.update(over)
    return d


def test_remote_keys_parse() -> None:
    spec = parse(doc())
    assert spec.location == "remote" and spec.remote is not None
    s = spec.remote.hosts["s"]
    assert (s.user, s.addr, s.port, s.sudo, s.key_file) == ("bench", "2001:db8::1", 2222, True,
                                                            "/k")
    assert spec.remote.sut_host == "s" and spec.remote.tester_hosts == ("t",)
    w = spec.remote.wires[1]
    assert (w.tester_host, w.tester_iface, w.sut_host, w.sut_iface) == ("t", "ens1f1", "s",
                                                                       "ens1f1")
    # local stays the default and takes no host keys
    local = parse({"campaign": {"name": "l"}, "matrix": {"suts": ["wire"]}})
    assert local.location == "local" and local.remote is None


@pytest.mark.parametrize(("change", "message"), [
    (lambda d: d["campaign"].update(location="moon"), "campaign.location"),
    (lambda d: d["campaign"].update(location="local"), "only with location"),
    (lambda d: d["hosts"]["t"].update(ssh="nobody"), "hosts.t.ssh"),
    (lambda d: d["hosts"]["t"].update(roles=["sut"]), "exactly one host has the sut role"),
    (lambda d: d["hosts"]["t"].update(roles=["tester", "vnf"]), "vnf only on the sut host"),
    (lambda d: d["hosts"]["t"].update(colour="red"), "hosts.t.colour"),
    (lambda d: d["hosts"]["t"].update(key_file="rel/key"), "hosts.t.key_file"),
    (lambda d: d["hosts"]["t"].update(port=0), "hosts.t.port"),
    (lambda d: d["campaign"].update(wires=[["t:ens1f0", "t:ens1f1"]]), "one end on the sut"),
    (lambda d: d["campaign"].update(wires=[["x:ens1f0", "s:ens1f1"]]), "host 'x'"),
    (lambda d: d["campaign"].update(wires=[["t:ens1f0", "s:ens1f0"], ["t:ens1f0", "s:e1"]]),
     "on two wires"),
    (lambda d: d["campaign"].pop("wires"), "campaign.wires"),
    (lambda d: d.pop("hosts"), "[hosts.NAME]"),
    (lambda d: d["campaign"].update(isolate_sut_cpus=True), "isolate_sut_cpus"),
])
def test_remote_keys_refused(change, message: str) -> None:
    d = json.loads(json.dumps(doc()))
    change(d)
    with pytest.raises(CampaignError, match=message.replace("[", r"\[").replace(".", r"\.")):
        parse(d)


def test_latency_mode() -> None:
    def s(tx: str, rx: str) -> Stream:
        return Stream("a", "b", tx, rx, "", "")

    assert latency_mode([s("@t", "@t"), s("@t", "@t")]) == SAME_HOST
    assert latency_mode([s("@t", "@t"), s("@t", "@u")]) == CROSS_HOST


class _FakeSetup:
    """What RemoteBed reads of a RemoteSetup (no connection made)."""

    def __init__(self, spec) -> None:
        self.rs = spec.remote
        self.token = "trtest0000"
        self.hosts = {n: _FakeHost(n) for n in self.rs.hosts}
        self.builds: list[object] = []
        nic = {"exists": True, "mac": "02:00:00:00:00:01", "mtu": 1500}
        self.facts = {n: {"nics": {"ens1f0": nic, "ens1f1": nic}} for n in self.rs.hosts}


class _FakeHost:
    def __init__(self, name: str) -> None:
        self.name = name
        self.lost = ""
        self.made: list[str] = []

    def mkdirs(self, path: str) -> None:
        self.made.append(path)


def test_bed_hands_out_the_wires() -> None:
    """The scenario builder gets the campaign's wires in order where it asks
    for veths, and every endpoint lands on the host of its wire's end."""
    spec = parse(doc())
    bed = RemoteBed(_FakeSetup(spec), 1)  # type: ignore[arg-type]
    built = build(bed, make_sut("turnoutd"), Point(scenario="p2p"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles={"txrx", "fwd", "tx", "rx", "bidir"},
                  kernel_port="afxdp")
    assert bed.used == ["t:ens1f0 - s:ens1f0", "t:ens1f1 - s:ens1f1"]
    assert [p.iface for p in built.topology.ports] == ["ens1f0", "ens1f1"]
    assert built.topology.ns == "@s"
    s = built.streams[0]
    assert (s.tx_port, s.rx_port, s.tx_ns, s.rx_ns) == ("afxdp:ens1f0", "afxdp:ens1f1", "@t",
                                                       "@t")
    # a third wire the campaign does not have
    with pytest.raises(Unsupported, match="none left"):
        build(bed, make_sut("turnoutd"), Point(scenario="p2p"),  # type: ignore[arg-type]
              memif_tester=True, tester_roles={"txrx"}, kernel_port="afxdp")


def test_bed_loopback_vnfs_on_the_sut_host() -> None:
    spec = parse(doc())
    bed = RemoteBed(_FakeSetup(spec), 1)  # type: ignore[arg-type]
    built = build(bed, make_sut("turnoutd"), Point(scenario="loopback", vnfs=2),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles={"txrx", "fwd", "tx", "rx"},
                  kernel_port="afxdp")
    assert [h.netns for h in built.helpers] == ["@s", "@s"]
    kinds = [p.kind for p in built.topology.ports]
    assert kinds.count("memif") == 4 and kinds.count("veth") == 2
    assert all(p.socket.startswith(str(bed.workdir)) for p in built.topology.ports if p.socket)


# ----------------------------------------------------------------- the agent


def _serve(token: str, grace: float) -> subprocess.Popen[bytes]:
    p = subprocess.Popen([sys.executable, "-u", str(AGENT), "serve", token, str(grace)],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert p.stdout is not None
    assert json.loads(p.stdout.readline())["ready"]
    return p


def _marked(token: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(["sleep", "300"], env={**os.environ, agent.MARKER: token})


def _gone(p: subprocess.Popen[bytes], deadline_s: float) -> bool:
    try:
        p.wait(timeout=deadline_s)
    except subprocess.TimeoutExpired:
        return False
    return True


def test_agent_stops_the_run_when_the_controller_goes_away() -> None:
    """EOF on stdin (the SSH connection dropped): the agent stops every
    process carrying its token, and only those."""
    token = f"trt{os.getpid()}a"
    mine, other = _marked(token), _marked(token + "x")
    try:
        a = _serve(token, 30)
        assert a.stdin is not None
        a.stdin.close()
        assert _gone(mine, 10), "the run's process outlived the agent"
        assert other.poll() is None, "a process of another run was stopped"
        assert a.wait(timeout=10) == 0
    finally:
        for p in (mine, other):
            p.kill()
            p.wait()


def test_agent_grace_timeout() -> None:
    """Nothing from the controller for grace_s (a cut network): the same."""
    token = f"trt{os.getpid()}b"
    mine = _marked(token)
    try:
        a = _serve(token, 1.0)
        assert _gone(mine, 15), "the agent did not stop the run after its grace time"
        assert _gone(a, 10)  # type: ignore[arg-type]
        assert b"no word from the controller" in (a.stderr.read() if a.stderr else b"")
    finally:
        mine.kill()
        mine.wait()
        a.kill()
        a.wait()


def test_agent_requests(tmp_path: Path) -> None:
    """unix (a line server standing in for turnoutd's socket), threads,
    kill (only processes of the run), procs, bye."""
    token = f"trt{os.getpid()}c"
    sock = tmp_path / "s.sock"
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(str(sock))
    srv.listen(1)

    def answer() -> None:
        c, _ = srv.accept()
        with c:
            line = c.makefile("rb").readline()
            c.sendall(json.dumps({"echo": json.loads(line)}).encode() + b"\n")

    threading.Thread(target=answer, daemon=True).start()
    mine, other = _marked(token), _marked(token + "y")
    a = _serve(token, 30)
    assert a.stdin is not None and a.stdout is not None

    def call(**req: object) -> dict[str, object]:
        a.stdin.write(json.dumps(req).encode() + b"\n")  # type: ignore[union-attr]
        a.stdin.flush()  # type: ignore[union-attr]
        return dict(json.loads(a.stdout.readline()))  # type: ignore[union-attr]

    try:
        r = call(op="unix", path=str(sock), data='{"m":1}', inner_timeout_s=5)
        assert json.loads(str(r["reply"])) == {"echo": {"m": 1}}
        th = call(op="threads", pids=[mine.pid])["threads"]
        assert str(mine.pid) in th and th[str(mine.pid)][1] == "sleep"  # type: ignore[index]
        assert [p["pid"] for p in call(op="procs")["procs"]] == [mine.pid]  # type: ignore[union-attr]
        assert call(op="kill", pid=other.pid, sig=signal.SIGTERM)["killed"] is False
        assert other.poll() is None
        assert call(op="kill", pid=mine.pid, sig=signal.SIGTERM)["killed"] is True
        assert _gone(mine, 10)
        assert call(op="nope")["ok"] is False
        a.stdin.write(b'{"op":"bye"}\n')
        a.stdin.flush()
        assert json.loads(a.stdout.readline())["bye"]
        assert a.wait(timeout=10) == 0
    finally:
        for p in (mine, other, a):
            p.kill()
            p.wait()
        srv.close()


def test_agent_once_facts() -> None:
    """One-shot mode with the program on stdin (as the pre-flight runs it)."""
    req = {"op": "facts", "nics": ["lo", "nosuch0"], "commands": ["sh", "no-such-command-x"],
           "files": [str(AGENT)]}
    r = subprocess.run([sys.executable, "-", "once", json.dumps(req)], input=AGENT.read_bytes(),
                       capture_output=True, timeout=60, check=True)
    f = json.loads(r.stdout)
    assert f["ok"] and f["nics"]["lo"]["exists"] and not f["nics"]["nosuch0"]["exists"]
    assert f["missing"] == ["no-such-command-x"]
    assert f["sha256"][str(AGENT)] == agent.sha256(str(AGENT))
    assert f["cpus"] == sorted(os.sched_getaffinity(0))
    assert abs(f["real_ns"] - time.time_ns()) < 60e9


def test_two_tester_hosts_are_cross_host() -> None:
    """t0 on one tester host, t1 on another: separate tx and rx processes
    on their hosts, and the latency mode says their clocks differ."""
    from turnout.measure.gen import plan_tasks

    d = doc()
    d["hosts"]["u"] = {"ssh": "root@192.0.2.3", "roles": ["tester"]}  # type: ignore[index]
    d["campaign"]["wires"] = [["t:ens1f0", "s:ens1f0"], ["u:ens1f1", "s:ens1f1"]]  # type: ignore[index]
    spec = parse(d)
    setup = _FakeSetup(spec)
    bed = RemoteBed(setup, 1)  # type: ignore[arg-type]
    built = build(bed, make_sut("turnoutd"), Point(scenario="p2p"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles={"txrx", "tx", "rx"}, kernel_port="afxdp")
    s = built.streams[0]
    assert (s.tx_ns, s.rx_ns) == ("@t", "@u")
    assert latency_mode(built.streams) == CROSS_HOST
    assert [(t.role, t.netns) for t in plan_tasks(built.streams)] == [("rx", "@u"), ("tx", "@t")]


def test_cross_host_trials_keep_no_latency() -> None:
    """RemoteMeasurer: a cross-host trial keeps its rates and drops its
    latency (two clocks), saying why; a same-host one keeps it."""
    from turnout.hosts.remote import RemoteMeasurer
    from turnout.measure.counts import TrialCounts

    class Inner:
        clock_shift_ns = 0

        def measure(self, duration_s: float, load: float) -> TrialCounts:
            return TrialCounts(offered_total_pps=load, duration_s=duration_s, sent=10,
                               received=10, lost=0, latency_ns={"p50": 5.0}, jitter_ns=1.0)

    class Bed:
        def __init__(self) -> None:
            self.setup = self
            self.hosts = {"t": self}

        def check_alive(self) -> None:
            return None

        def lost(self) -> list[str]:
            return []

        def clock(self, n: int) -> tuple[int, int]:
            return 1000, 10

    for mode, kept in ((SAME_HOST, True), (CROSS_HOST, False)):
        inner = Inner()
        c = RemoteMeasurer(inner, Bed(), mode, "t").measure(1.0, 100.0)  # type: ignore[arg-type]
        assert bool(c.latency_ns) is kept and c.received == 10
        assert c.extra["latency_mode"] == mode and inner.clock_shift_ns == 1000
        assert ("latency_why" in c.extra) is not kept
