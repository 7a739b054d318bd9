"""Remote campaigns without SSH: the campaign keys (turnout.hosts.config),
the agent's dead man's switch run as a real process here, the latency
mode, the wires handed out instead of veths, and the report's host
listing. The end-to-end runs over SSH are in test_remote_system.py."""

from __future__ import annotations

import json
import os
import re
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
from turnout.hosts.remote import (
    CROSS_HOST,
    HOLD_SCOPE,
    SAME_HOST,
    RemoteBed,
    RemoteHugepageHold,
    latency_mode,
)
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
    # the SUT's CPUs isolated on the SUT's host (its agent: system/isolate.py there)
    d = doc()
    d["campaign"]["isolate_sut_cpus"] = True  # type: ignore[index]
    assert parse(d).isolate_sut_cpus


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
        self.hugepages = RemoteHugepageHold(self.hosts[self.rs.sut_host])  # type: ignore[arg-type]
        self.logs_dir = None


class _FakeHost:
    """Records what the bed asks of a host: commands, undo entries (in order)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.lost = ""
        self.made: list[str] = []
        #: ("run", command) and ("undo", action), in the order asked
        self.log: list[tuple[str, object]] = []
        self.macs = 0
        self._agent: object | None = None  # no agent: a closing bed skips its calls
        #: the host's hugepage pool: pages in it, and of those, mapped by a run
        self.nr_hugepages = 0
        self.hugepages_in_use = 0
        #: (scope, action) journalled, and the scopes undone, in order
        self.journal: list[tuple[str, dict[str, object]]] = []
        self.undone: list[str] = []

    def undo(self, scope: str) -> list[str]:
        """The pool shrinks by what the scope's journalled give-backs say."""
        self.undone.append(scope)
        for sc, a in self.journal:
            m = re.search(r"p - (\d+)", " ".join(a.get("run", [])))  # type: ignore[arg-type]
            if sc == scope and m:
                self.nr_hugepages -= int(m.group(1))
        return []

    def mkdirs(self, path: str) -> None:
        self.made.append(path)

    def describe(self) -> str:
        return f"host {self.name}"

    def undo_later(self, scope: str, action: dict[str, object]) -> None:
        self.log.append(("undo", action))
        self.journal.append((scope, action))

    def run(self, cmd: list[str], **kw: object) -> subprocess.CompletedProcess[str]:
        self.log.append(("run", list(cmd)))
        out = ""
        if cmd[0] == "cat" and cmd[-1].endswith("/flags"):
            out = "0x1003\n"  # up, not promiscuous
        if cmd[0] == "sh" and "/address" in cmd[-1]:  # a veth pair made: its two MACs
            self.macs += 2
            out = f"02:00:00:00:01:{self.macs - 1:02x}\n02:00:00:00:01:{self.macs:02x}\n"
        if cmd[0] == "grep" and cmd[1] == "^HugePages_":
            out = (f"HugePages_Total: {self.nr_hugepages}\n"
                   f"HugePages_Free: {self.nr_hugepages - self.hugepages_in_use}\n")
        if cmd[0] == "flock" and (m := re.search(r"echo \$\(\(p \+ (\d+)\)\)", cmd[-1])):
            self.nr_hugepages += int(m.group(1))  # the kernel gives all it is asked
            out = f"{m.group(1)}\n"
        return subprocess.CompletedProcess(cmd, 0, out, "")

    def runs(self) -> list[str]:
        return [" ".join(c) for k, c in self.log if k == "run"]  # type: ignore[arg-type]


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
    assert (s.tx_port, s.rx_port, s.tx_ns, s.rx_ns) == ("af_xdp:ens1f0", "af_xdp:ens1f1", "@t",
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


# ------------------------------------------------- every scenario across hosts

ALL_ROLES = {"txrx", "fwd", "tx", "rx", "bidir", "reflect"}


def _bed(d: dict[str, object] | None = None) -> tuple[RemoteBed, _FakeSetup]:
    setup = _FakeSetup(parse(d or doc()))
    return RemoteBed(setup, 1), setup  # type: ignore[arg-type]


def test_p2v_and_v2v_endpoints_on_the_sut_host() -> None:
    """p2v: the tester's port on the first wire, the VNF's endpoint (memif,
    served by turnoutd) and its receiver on the SUT's host: two hosts, so
    cross-host; v2v: both endpoints on the SUT's host, no wire, same-host."""
    bed, _ = _bed()
    built = build(bed, make_sut("turnoutd"), Point(scenario="p2v"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles=ALL_ROLES, kernel_port="afxdp")
    s = built.streams[0]
    assert (s.tx_ns, s.rx_ns) == ("@t", "@s") and s.rx_port.startswith("memif:")
    assert bed.used == ["t:ens1f0 - s:ens1f0"] and latency_mode(built.streams) == CROSS_HOST
    bed, _ = _bed()
    built = build(bed, make_sut("turnoutd"), Point(scenario="v2v"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles=ALL_ROLES, kernel_port="afxdp")
    s = built.streams[0]
    assert (s.tx_ns, s.rx_ns) == ("@s", "@s") and bed.used == []
    assert latency_mode(built.streams) == SAME_HOST
    bed, _ = _bed()
    built = build(bed, make_sut("testpmd"), Point(scenario="nvsn", pairs=3),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles=ALL_ROLES, kernel_port="afxdp")
    assert {(x.tx_ns, x.rx_ns) for x in built.streams} == {("@s", "@s")}
    assert len(built.topology.ports) == 6 and bed.used == []


def test_kernel_switch_v2v_gets_veth_pairs_on_the_sut_host() -> None:
    """A SUT without memif or vhost-user (the Linux bridge): a VNF's port is
    a veth pair made on the SUT's host, its removal journalled first."""
    bed, setup = _bed()
    built = build(bed, make_sut("bridge"), Point(scenario="v2v"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles=ALL_ROLES, kernel_port="afxdp")
    assert built.virtual_port == "veth" and bed.used == []
    log = setup.hosts["s"].log
    adds = [i for i, (k, c) in enumerate(log) if k == "run" and "type veth" in " ".join(c)]
    dels = [i for i, (k, a) in enumerate(log) if k == "undo" and a.get("run", [""])[:3] ==  # type: ignore[union-attr]
            ["ip", "link", "del"]]
    assert len(adds) == 2 and len(dels) == 2 and all(d < a for d, a in zip(dels, adds, strict=True))
    s = built.streams[0]
    assert (s.tx_ns, s.rx_ns) == ("@s", "@s") and s.tx_port.startswith("af_xdp:t")
    assert [p.kind for p in built.topology.ports] == ["veth", "veth"]
    assert all(p.iface.startswith(bed.prefix) and len(p.iface) <= 15
               for p in built.topology.ports)
    # RPS of the switch's ends steered to its CPUs, the old masks journalled
    assert any("rps_cpus" in r for r in setup.hosts["s"].runs())


def test_sessions_borrow_the_campaigns_hugepages_on_the_sut_host() -> None:
    """testpmd's hugepages on a remote SUT host stay in its pool between
    sessions (RemoteHugepageHold): the first session grows the pool, the
    next borrows the same pages, one that needs more grows it by the
    shortfall only, and pages a closing run still maps are not lent. Each
    growth's give-back is journalled under the hold's scope before the
    campaign's end undoes it."""
    bed, setup = _bed()
    host = setup.hosts["s"]

    def grows() -> list[str]:
        return [r for r in host.runs() if r.startswith("flock") and "p + " in r]

    bed.reserve_hugepages(64)
    host.hugepages_in_use = 64  # testpmd maps them
    assert host.nr_hugepages == 64 and len(grows()) == 1
    assert [sc for sc, a in host.journal if "nr_hugepages" in str(a)] == [HOLD_SCOPE]
    bed.close()
    # the pages stay, but testpmd has not let go of them yet: not lendable
    bed2 = RemoteBed(setup, 2)  # type: ignore[arg-type]
    bed2.reserve_hugepages(32)
    assert host.nr_hugepages == 96 and len(grows()) == 2
    host.hugepages_in_use = 32
    bed2.close()
    host.hugepages_in_use = 0
    bed3 = RemoteBed(setup, 3)  # type: ignore[arg-type]
    bed3.reserve_hugepages(96)  # all held, all free: no growth
    assert host.nr_hugepages == 96 and len(grows()) == 2
    bed3.close()
    bed4 = RemoteBed(setup, 4)  # type: ignore[arg-type]
    bed4.reserve_hugepages(128)  # the shortfall only
    assert host.nr_hugepages == 128 and len(grows()) == 3
    bed4.close()
    assert host.undone.count(HOLD_SCOPE) == 0  # sessions never give the hold's pages back
    host._agent = object()  # connected: the campaign's end asks its agent
    setup.hugepages.close()
    assert host.undone == [HOLD_SCOPE] and host.nr_hugepages == 0


def test_bare_wire_joins_two_wires_on_the_sut_host() -> None:
    """The bare wire's p2p: the tester's two ports, their wires joined on
    the SUT's host by a tc redirect each way (removal journalled first)."""
    bed, setup = _bed()
    built = build(bed, make_sut("wire"), Point(scenario="p2p"),  # type: ignore[arg-type]
                  memif_tester=True, tester_roles=ALL_ROLES, kernel_port="afxdp")
    s = built.streams[0]
    assert (s.tx_port, s.rx_port, s.tx_ns, s.rx_ns) == ("af_xdp:ens1f0", "af_xdp:ens1f1", "@t",
                                                       "@t")
    runs = setup.hosts["s"].runs()
    assert "tc filter add dev ens1f0 ingress protocol all u32 match u32 0 0 action mirred " \
           "egress redirect dev ens1f1" in runs
    assert "tc filter add dev ens1f1 ingress protocol all u32 match u32 0 0 action mirred " \
           "egress redirect dev ens1f0" in runs
    undo = [a for k, a in setup.hosts["s"].log if k == "undo"]
    assert {"run": ["tc", "qdisc", "del", "dev", "ens1f0", "clsact"], "may_fail": True} in undo
    # whatever XDP program was left on the wires' NICs goes at the end
    assert {"run": ["ip", "link", "set", "dev", "ens1f1", "xdp", "off"],
            "may_fail": True} in [a for k, a in setup.hosts["t"].log if k == "undo"]
    # and a NIC that was not promiscuous is not afterwards
    assert {"run": ["ip", "link", "set", "dev", "ens1f0", "promisc", "off"],
            "may_fail": True} in undo


def test_unsupported_across_hosts() -> None:
    """Which cells a remote campaign skips, and why."""
    from turnout.hosts.remote import RemoteSetup

    setup = RemoteSetup(parse(doc()), ["/bin/true"], [])
    sut = make_sut("ovs")
    assert setup.unsupported(Point(scenario="v2v"), sut) == ""
    assert setup.unsupported(Point(scenario="p2v"), sut) == ""
    assert "rule update" in setup.unsupported(Point(scenario="rule_update"), sut)
    assert "overlay" in setup.unsupported(Point(scenario="overlay"), sut)
    assert "two hosts" in setup.unsupported(Point(scenario="p2v", direction="bi"), sut)
    assert setup.unsupported(Point(scenario="v2v", direction="bi"), sut) == ""
    one = doc()
    one["campaign"]["wires"] = [["t:ens1f0", "s:ens1f0"]]  # type: ignore[index]
    setup = RemoteSetup(parse(one), ["/bin/true"], [])
    assert setup.unsupported(Point(scenario="p2p"), sut) == \
        "p2p needs 2 wires; campaign.wires has 1"
    assert setup.unsupported(Point(scenario="p2v"), sut) == ""


def test_agent_undo_journal(tmp_path: Path) -> None:
    """The agent undoes a scope's changes latest first when asked, the rest
    when the controller goes away; an agent killed outright leaves its
    journal, and the next agent in that directory undoes it."""
    import shutil

    d = tmp_path / "install"
    d.mkdir()
    shutil.copy(AGENT, d / "agent.py")
    shutil.copy(AGENT.with_name("procfs.py"), d / "procfs.py")
    order = tmp_path / "order"

    def serve(token: str) -> subprocess.Popen[bytes]:
        p = subprocess.Popen([sys.executable, "-u", str(d / "agent.py"), "serve", token, "30"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert p.stdout is not None
        p.first = json.loads(p.stdout.readline())  # type: ignore[attr-defined]
        assert p.first["ready"]  # type: ignore[attr-defined]
        return p

    def call(a: subprocess.Popen[bytes], **req: object) -> dict[str, object]:
        assert a.stdin is not None and a.stdout is not None
        a.stdin.write(json.dumps(req).encode() + b"\n")
        a.stdin.flush()
        return dict(json.loads(a.stdout.readline()))

    def mark(text: str) -> dict[str, object]:
        return {"run": ["sh", "-c", f"echo {text} >> {order}"]}

    a = serve(f"trt{os.getpid()}j")
    try:
        f = tmp_path / "value"
        f.write_text("new\n")
        for i, scope in enumerate(["s1", "s2", "s1"]):
            assert call(a, op="undo_push", scope=scope, action=mark(f"{scope}-{i}"))["ok"]
        assert call(a, op="undo_push", scope="s2", action={"write": str(f), "value": "old"})["ok"]
        assert call(a, op="undo", scope="s1")["problems"] == []
        assert order.read_text().split() == ["s1-2", "s1-0"]  # latest first, s2's kept
        assert call(a, op="undo_push", scope="s3", action={"run": ["false"]})["ok"]
        a.stdin.close()  # type: ignore[union-attr]
        assert a.wait(timeout=30) == 0
        assert order.read_text().split() == ["s1-2", "s1-0", "s2-1"] and f.read_text() == "old\n"
        assert not list(d.glob("undo-*.json"))  # undone: no journal left
    finally:
        a.kill()
        a.wait()
    b = serve(f"trt{os.getpid()}k")
    try:
        assert call(b, op="undo_push", scope="x", action=mark("left"))["ok"]
        assert list(d.glob("undo-*.json"))
        b.kill()  # SIGKILL: no clean-up
        b.wait()
    finally:
        b.kill()
        b.wait()
    c = serve(f"trt{os.getpid()}l")
    try:
        assert order.read_text().split()[-1] == "left"
        assert "undid 1 changes an agent that died" in c.first["recovered"][0]  # type: ignore[attr-defined]
    finally:
        c.stdin.close()  # type: ignore[union-attr]
        c.wait(timeout=30)


def test_agent_procfs_and_tail(tmp_path: Path) -> None:
    """The agent answers with hosts/procfs.py's readers (as this machine's
    LocalHost.procfs does: the same function) and a file's tail."""
    from turnout.hosts.base import LocalHost

    token = f"trt{os.getpid()}p"
    a = _serve(token, 30)
    assert a.stdin is not None and a.stdout is not None

    def call(**req: object) -> dict[str, object]:
        a.stdin.write(json.dumps(req).encode() + b"\n")  # type: ignore[union-attr]
        a.stdin.flush()  # type: ignore[union-attr]
        return dict(json.loads(a.stdout.readline()))  # type: ignore[union-attr]

    try:
        me = os.getpid()
        r = call(op="procfs", fn="sample_threads", kw={"pids": [me]})["result"]
        local = LocalHost().procfs("sample_threads", pids=[me])
        assert set(r) == set(local) and r[str(me)][1] == local[str(me)][1]  # type: ignore[index]
        assert r[str(me)][5] >= 0  # type: ignore[index]  # schedstat's ns, not the ticks
        busy = call(op="procfs", fn="kernel_busy_s", kw={"cpus": [0]})["result"]
        assert isinstance(busy, float)
        assert call(op="procfs", fn="nope")["ok"] is False
        f = tmp_path / "log"
        f.write_text("abc\ndef\n")
        assert call(op="tail", path=str(f), offset=4) == {"ok": True, "text": "def\n", "size": 8}
        assert call(op="which", cmd="sh")["path"]
        assert call(op="listdir", path=str(tmp_path))["names"] == ["log"]
        # short commands, directories and files, without an SSH session each
        r = call(op="run", cmd=["sh", "-c", "echo out; echo err >&2; exit 3"])
        assert (r["rc"], r["stdout"], r["stderr"]) == (3, "out\n", "err\n")
        assert call(op="run", cmd=["sleep", "5"], inner_timeout_s=0.2)["timeout"] is True
        assert call(op="run", cmd=["no-such-command-x"])["rc"] == 127
        assert call(op="mkdirs", path=str(tmp_path / "a" / "b"))["ok"]
        assert call(op="write", path=str(tmp_path / "a" / "b" / "f"), text="x=1\n")["ok"]
        assert call(op="read", path=str(tmp_path / "a" / "b" / "f"))["text"] == "x=1\n"
        assert "FileNotFoundError" in str(call(op="read", path=str(tmp_path / "nope"))["error"])
    finally:
        a.stdin.close()
        a.wait(timeout=30)


def test_preflight_says_which_suts_cannot_run_on_the_sut_host() -> None:
    """The SUT host's facts say what the campaign's SUTs lack there: a
    warning per SUT (its cells are skipped), not a refusal."""
    from turnout.hosts.remote import RemoteSetup

    d = doc()
    d["matrix"] = {"suts": ["wire", "ovs", "testpmd", "turnoutd"], "scenarios": ["p2p"]}
    setup = RemoteSetup(parse(d), ["/bin/true"], [])
    needs = setup.sut_requirements()
    assert ("tc", "iproute2") in needs["wire"] and needs["turnoutd"] == []
    assert ("dpdk-testpmd", "dpdk-dev") in needs["testpmd"]
    asked: list[dict[str, object]] = []

    class Host:
        def connect(self) -> None:
            return None

        def describe(self) -> str:
            return "host s (bench@2001:db8::1:2222)"

        def once(self, req: dict[str, object]) -> dict[str, object]:
            asked.append(req)
            nic = {"exists": True, "mac": "02:00:00:00:00:01", "mtu": 1500}
            return {"missing": [], "euid": 0, "nics": {"ens1f0": nic, "ens1f1": nic},
                    "interfaces": ["ens1f0", "ens1f1"], "cpus": [0, 1, 2, 3], "sha256": {},
                    "real_ns": time.time_ns(), "needs_missing": ["ovs-vswitchd"]}

    problems = setup._check_host(Host(), setup.rs.hosts["s"])  # type: ignore[arg-type]
    assert problems == []
    assert "ovs-vswitchd" in asked[0]["needs"] and "tc" in asked[0]["needs"]  # type: ignore[operator]
    assert setup.warnings == ["host s (bench@2001:db8::1:2222): SUT ovs cannot run there: "
                              "ovs-vswitchd not installed (apt openvswitch-switch) (its cells "
                              "are skipped with that reason)"]
