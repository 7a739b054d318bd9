"""turnoutd's vxlan and geneve ports against real peers.

Every "host" is a network namespace this test creates, its underlay a veth
(two hosts) or a Linux bridge in an underlay namespace (three hosts);
"pods" are namespaces behind each host's switch. Nothing outside the
namespaces is touched; they (and every veth in them) are deleted and every
process we started is ended by PID, also on failure.

- turnoutd ↔ the Linux kernel's vxlan netdev (dstport 4789), learning on
  and off, IPv4 and IPv6 underlay: ping and iperf3 in both directions, and
  bad input (unknown VNI, I flag clear, truncated, foreign UDP, inner frames
  over the MTU), each dropped under its own counter while VNI 100 flows;
- turnoutd ↔ turnoutd across two hosts, with kernel ↔ kernel over the same
  veth for comparison (throughputs printed);
- turnoutd ↔ Open vSwitch's userspace datapath, VXLAN and Geneve;
- three turnoutd hosts: broadcast replicated head-end to both remotes.

Needs root, iperf3 and Open vSwitch (all from scripts/setup.sh): missing,
they skip the test, or fail it under TURNOUT_REQUIRE_PEERS=1
(turnout.testpeers, docs/testing.md). Run: cargo build --release -p turnoutd
&& .venv/bin/pytest -s python/tests/turnoutd/test_overlay.py
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from harness import (
    Turnoutd,
    mark_netns,
    stop_pid,
    sweep_dead_netns,
    turnoutd_binary,
    unmark_netns,
    wait_for,
)

from turnout import testpeers

pytestmark = pytest.mark.system


@pytest.fixture(autouse=True)
def _peers() -> None:
    """Root: skip without it, fail under TURNOUT_REQUIRE_PEERS=1."""
    testpeers.need_root()

P = f"tov{os.getpid() % 100000}-"
POD_MTU = 1450  # 1500 - 50 (VXLAN/Geneve over IPv4)
POD_MTU6 = 1430  # 1500 - 70 (over IPv6)
VNI = 100


def run(*cmd: str, check: bool = True, timeout: float = 60) -> str:
    r = subprocess.run(list(cmd), check=False, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def nx(ns: str, *cmd: str, check: bool = True, timeout: float = 60) -> str:
    return run("ip", "netns", "exec", ns, *cmd, check=check, timeout=timeout)


def need(tool: str) -> str:
    """A tool scripts/setup.sh installs (iperf3, Open vSwitch)."""
    path = shutil.which(tool)
    testpeers.need(path, f"{tool} is not installed (scripts/setup.sh installs it)")
    return path or tool


class Net:
    """Namespaces, veths and processes of one test; `close` removes all."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.ns: list[str] = []
        self.procs: list[subprocess.Popen] = []
        self.daemons: list[Turnoutd] = []
        self.cleanups: list = []

    def netns(self, short: str) -> str:
        name = P + short
        mark_netns(name)
        run("ip", "netns", "add", name)
        self.ns.append(name)
        nx(name, "ip", "link", "set", "lo", "up")
        return name

    def veth(self, a_ns: str, a: str, b_ns: str, b: str, mtu: int = 1500) -> None:
        run("ip", "link", "add", a, "netns", a_ns, "type", "veth", "peer", "name", b, "netns", b_ns)
        for ns, i in ((a_ns, a), (b_ns, b)):
            nx(ns, "ip", "link", "set", i, "mtu", str(mtu), "up")
            # A switch port is a wire: no super-frames, no unfinished
            # checksums (docs/kernel-ports.md).
            nx(ns, "ethtool", "-K", i, "tx", "off", "tso", "off", "gso", "off", "gro", "off",
               check=False)

    def pod(self, host: str, idx: int, ips: list[str], mtu: int) -> str:
        """A pod namespace with eth0 (addresses `ips`), veth `podN` in `host`."""
        ns = self.netns(f"p{idx}")
        self.veth(ns, "eth0", host, f"pod{idx}")
        nx(ns, "ip", "link", "set", "eth0", "mtu", str(mtu))
        nx(ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
        nx(host, "sysctl", "-qw", f"net.ipv6.conf.pod{idx}.disable_ipv6=1")
        for ip in ips:
            nx(ns, "ip", "addr", "add", ip, "dev", "eth0")
        return ns

    def spawn(self, ns: str, *cmd: str) -> subprocess.Popen:
        p = subprocess.Popen(
            ["ip", "netns", "exec", ns, *cmd],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.procs.append(p)
        return p

    def turnoutd(self, ns: str, name: str, config: str) -> Turnoutd:
        d = NsTurnoutd(ns, self.tmp / name, config)
        self.daemons.append(d)
        return d.start()

    def close(self) -> None:
        for d in self.daemons:
            d.stop()
        for p in self.procs:
            stop_pid(p, signal.SIGKILL)
        for c in reversed(self.cleanups):
            try:
                c()
            except Exception as e:  # cleanup goes on
                print(f"cleanup: {e}")
        for ns in reversed(self.ns):
            run("ip", "netns", "del", ns, check=False)
            unmark_netns(ns)


class NsTurnoutd(Turnoutd):
    """turnoutd inside a network namespace, with its overlay port's counters."""

    def __init__(self, ns: str, workdir: Path, config: str) -> None:
        super().__init__(workdir, config, netns=ns)
        self.ns = ns

    def counters(self, port: str = "overlay") -> dict[str, int]:
        p = self.port(port)
        out = dict(p["backend"])
        for k, v in p["drops"].items():
            out[f"drop_{k}"] = v
        out["rx_packets"] = p["rx_packets"]
        out["tx_packets"] = p["tx_packets"]
        return out


@pytest.fixture
def net(tmp_path: Path) -> Iterator[Net]:
    try:
        turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    sweep_dead_netns("tov")
    n = Net(tmp_path)
    try:
        yield n
    finally:
        n.close()


def switch_config(kind: str, local: str, remotes: list[str], underlay: str, pods: list[str],
                  learning: bool = True, extra: str = "", underlay_kind: str = "af_packet") -> str:
    rem = ", ".join(f'"{r}"' for r in remotes)
    text = (
        '[switch]\ncontrol_socket = "@CTL@"\n\n[logic]\nname = "bridge"\n\n'
        f'[[ports]]\nname = "overlay"\nkind = "{kind}"\nvni = {VNI}\nlocal_ip = "{local}"\n'
        f"remotes = [{rem}]\nlearning = {str(learning).lower()}\n"
        f'underlay = {{ kind = "{underlay_kind}", iface = "{underlay}" }}\n{extra}\n'
    )
    for p in pods:
        text += f'[[ports]]\nname = "{p}"\nkind = "af_packet"\niface = "{p}"\n\n'
    return text


def reachable(ns: str, ip: str, timeout_s: float = 15) -> None:
    """Waits until one ping gets through, then 5 in a row must be answered.

    The 5 wait for their replies until a deadline (``-w``): with ``-W`` alone
    ping waits for a late reply only twice the slowest round trip so far once
    one came back, and a reply a busy machine held longer counted as lost
    (seen in CI: 57 ms for the 4th, the 5th "lost" 33 ms after it left). A
    lost one is sent again, so 5 received within the deadline is the check.
    """
    wait_for(f"{ip} from {ns}", timeout_s,
             lambda: " 0% packet loss" in nx(ns, "ping", "-c", "1", "-W", "1", ip, check=False,
                                             timeout=5),
             every_s=0.2)
    out = nx(ns, "ping", "-c", "5", "-i", "0.2", "-w", "11", ip, check=False)
    assert " 5 received" in out, out


def iperf(net: Net, client_ns: str, server_ns: str, server_ip: str, reverse: bool = False,
          seconds: int = 3) -> float:
    """TCP throughput client → server (or back with reverse), Gbit/s."""
    need("iperf3")
    port = 5201 + len(net.procs)
    srv = net.spawn(server_ns, "iperf3", "-s", "-1", "-p", str(port))
    try:
        time.sleep(0.3)
        args = ["iperf3", "-c", server_ip, "-p", str(port), "-t", str(seconds), "-J"]
        if reverse:
            args.append("-R")
        out = ""
        for _ in range(20):
            r = subprocess.run(["ip", "netns", "exec", client_ns, *args], check=False,
                               capture_output=True, text=True, timeout=seconds + 30)
            out = r.stdout
            if r.returncode == 0:
                break
            if "Connection refused" not in out and "unable to connect" not in out:
                raise AssertionError(f"iperf3 failed: {out[-600:]} {r.stderr[-300:]}")
            time.sleep(0.2)
        j = json.loads(out)
        bps = j["end"]["sum_received"]["bits_per_second"]
        assert bps > 0, out[-400:]
        return bps / 1e9
    finally:
        stop_pid(srv, signal.SIGKILL)


def kernel_vtep(ns: str, dev: str, underlay: str, local: str, remote: str | None, vni: int,
                learning: bool, addr: str) -> None:
    args = ["ip", "link", "add", dev, "type", "vxlan", "id", str(vni), "local", local.split("/")[0],
            "dstport", "4789", "dev", underlay]
    if remote:
        args += ["remote", remote]
    if not learning:
        args.append("nolearning")
    nx(ns, *args)
    nx(ns, "ip", "addr", "add", addr, "dev", dev)
    nx(ns, "ip", "link", "set", dev, "up")


def udp_send(ns: str, dst: str, port: int, payloads: list[bytes]) -> None:
    """Sends UDP datagrams from inside `ns` (python3 in the namespace)."""
    fam = "socket.AF_INET6" if ":" in dst else "socket.AF_INET"
    code = (
        "import socket,sys\n"
        f"s=socket.socket({fam},socket.SOCK_DGRAM)\n"
        f"for p in {payloads!r}: s.sendto(p,({dst!r},{port}))\n"
    )
    nx(ns, "python3", "-c", code)


def inner_frame(dst: bytes, src: bytes, n: int = 60) -> bytes:
    return dst + src + b"\x08\x00" + b"\x00" * (n - 14)


def two_hosts(net: Net, v6: bool = False) -> tuple[str, str, str, str]:
    """Hosts A and B joined by a veth (up0 in each); returns the host
    namespaces and their underlay addresses."""
    a, b = net.netns("hA"), net.netns("hB")
    net.veth(a, "up0", b, "up0")
    for h in (a, b):
        nx(h, "ethtool", "-K", "up0", "tx-udp_tnl-segmentation", "off",
           "tx-udp_tnl-csum-segmentation", "off", check=False)
    if v6:
        return a, b, "fd00:77::1", "fd00:77::2"
    return a, b, "192.168.77.1", "192.168.77.2"


@pytest.mark.parametrize("learning", [True, False], ids=["learning", "nolearning"])
@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_turnoutd_and_the_kernel_vxlan(net: Net, learning: bool, family: str) -> None:
    v6 = family == "ipv6"
    a, b, ua, ub = two_hosts(net, v6)
    mtu = POD_MTU6 if v6 else POD_MTU
    pod_a = net.pod(a, 0, ["10.200.0.1/24"], mtu)
    # Host B: the kernel's VTEP, the underlay address on up0; the "pod" is
    # the vxlan netdev in B's namespace.
    plen = "/64" if v6 else "/24"
    nx(b, "ip", "addr", "add", ub + plen, "dev", "up0", *(["nodad"] if v6 else []))
    kernel_vtep(b, "vx0", "up0", ub, ua, VNI, learning, "10.200.0.2/24")
    nx(b, "ip", "link", "set", "vx0", "mtu", str(mtu))
    d = net.turnoutd(a, "A", switch_config("vxlan", ua, [ub], "up0", ["pod0"], learning))

    reachable(pod_a, "10.200.0.2")
    reachable(b, "10.200.0.1")
    up = iperf(net, pod_a, b, "10.200.0.2")
    down = iperf(net, pod_a, b, "10.200.0.2", reverse=True)
    c = d.counters()
    print(f"\nturnoutd <-> kernel vxlan ({family}, learning={learning}): "
          f"A->B {up:.2f} Gbit/s, B->A {down:.2f} Gbit/s; overlay counters "
          f"rx_decapsulated={c['rx_decapsulated']} tx_encapsulated={c['tx_encapsulated']}")
    assert c["rx_decapsulated"] > 1000 and c["tx_encapsulated"] > 1000
    assert c["remotes_resolved"] == 1
    # With learning, B's MAC is known behind B (replies go unicast);
    # without, every frame to B is flooded (one remote: still one copy).
    if learning:
        assert c["macs"] >= 1, c
    else:
        assert c["macs"] == 0, c
        lost = c["tx_drop_no_neighbour"] + c["tx_drop_underlay_full"] + c["tx_drop_too_big"]
        assert c["tx_flooded"] == c["tx_encapsulated"] + lost, c
    if v6:
        return

    # Bad input from host B's stack (a UDP socket, so the kernel builds
    # valid outer headers): each kind dropped under its own counter.
    mac_a = bytes.fromhex(nx(pod_a, "cat", "/sys/class/net/eth0/address").strip().replace(":", ""))
    inner = inner_frame(mac_a, b"\x02\x00\x00\x00\x00\x99")
    before = d.counters()
    udp_send(b, ua, 4789, [b"\x08\x00\x00\x00" + (999).to_bytes(3, "big") + b"\x00" + inner] * 5)
    udp_send(b, ua, 4789, [b"\x00\x00\x00\x00" + VNI.to_bytes(3, "big") + b"\x00" + inner] * 4)
    udp_send(b, ua, 4789, [b"\x08\x00\x00"] * 3)
    udp_send(b, ua, 9999, [b"not a tunnel"] * 7)
    # Inner frames over the MTU: pod A's MTU raised to the underlay's, a
    # 1514 B frame does not fit in 1500 - 36.
    nx(pod_a, "ip", "link", "set", "eth0", "mtu", "1500")
    nx(pod_a, "ping", "-c", "3", "-i", "0.2", "-W", "1", "-M", "do", "-s", "1472", "10.200.0.2",
       check=False)
    nx(pod_a, "ip", "link", "set", "eth0", "mtu", str(mtu))

    def delta() -> dict[str, int]:
        now = d.counters()
        return {k: now[k] - before[k] for k in now if isinstance(now[k], int)}

    wait_for("bad input counted", 5, lambda: delta()["rx_drop_foreign"] >= 7)
    dd = delta()
    assert dd["rx_drop_unknown_vni"] == 5, dd
    assert dd["rx_drop_bad_flags"] == 4, dd
    assert dd["rx_drop_truncated"] == 3, dd
    assert dd["drop_oversize"] == 3, dd
    # VNI 100 unaffected.
    reachable(pod_a, "10.200.0.2")


@pytest.mark.parametrize("underlay", ["af_packet", "af_xdp"])
def test_turnoutd_to_turnoutd_and_kernel_to_kernel(net: Net, underlay: str) -> None:
    a, b, ua, ub = two_hosts(net)
    pod_a = net.pod(a, 0, ["10.200.0.1/24"], POD_MTU)
    pod_b = net.pod(b, 1, ["10.200.0.2/24"], POD_MTU)
    # Over AF_XDP, Geneve (both ends turnoutd); over AF_PACKET, VXLAN.
    kind = "geneve" if underlay == "af_xdp" else "vxlan"
    da = net.turnoutd(a, "A", switch_config(kind, ua, [ub], "up0", ["pod0"],
                                            underlay_kind=underlay))
    db = net.turnoutd(b, "B", switch_config(kind, ub, [ua], "up0", ["pod1"],
                                            underlay_kind=underlay))
    reachable(pod_a, "10.200.0.2")
    reachable(pod_b, "10.200.0.1")
    t_ab = iperf(net, pod_a, pod_b, "10.200.0.2")
    t_ba = iperf(net, pod_a, pod_b, "10.200.0.2", reverse=True)
    for d in (da, db):
        c = d.counters()
        assert c["rx_decapsulated"] > 1000 and c["tx_encapsulated"] > 1000, c
        assert c["macs"] >= 1, c
    # tunnel.show: the static remote, resolved; pod B's MAC learned behind it.
    mac_b = nx(pod_b, "cat", "/sys/class/net/eth0/address").strip()
    t = da.rpc("tunnel.show", {"name": "overlay"})
    assert t["kind"] == kind
    assert t["remotes"] == [{"ip": ub, "resolved": True, "learned": False}], t
    assert any(m["mac"] == mac_b and m["remote"] == ub for m in t["macs"]), t
    # Removed and added back at run time: the tunnel (its control thread,
    # sockets, underlay) goes away cleanly and comes back working.
    spec = next(p for p in da.rpc("config.show")["ports"] if p["name"] == "overlay")
    da.rpc("port.remove", {"name": "overlay"})
    assert all(p["name"] != "overlay" for p in da.rpc("port.list"))
    out = nx(pod_a, "ping", "-c", "2", "-W", "1", "10.200.0.2", check=False)
    assert " 100% packet loss" in out, out
    da.rpc("port.add", spec)
    reachable(pod_a, "10.200.0.2")
    da.stop()
    db.stop()
    print(f"\nTCP over {kind}, one veth underlay ({underlay}): turnoutd<->turnoutd A->B "
          f"{t_ab:.2f} / B->A {t_ba:.2f} Gbit/s")
    if underlay != "af_packet":
        return

    # The same hosts, veth and pods with the kernel instead: a bridge with
    # the pod's veth and a vxlan netdev on each host.
    for h, local, remote, pod in ((a, ua, ub, "pod0"), (b, ub, ua, "pod1")):
        nx(h, "ip", "addr", "add", local + "/24", "dev", "up0")
        kernel_vtep(h, "vx0", "up0", local, remote, VNI, True, "10.255.255.1/32")
        nx(h, "ip", "addr", "flush", "dev", "vx0")
        nx(h, "ip", "link", "add", "br0", "type", "bridge")
        nx(h, "ip", "link", "set", "vx0", "master", "br0")
        nx(h, "ip", "link", "set", pod, "master", "br0")
        nx(h, "ip", "link", "set", "br0", "up")
    reachable(pod_a, "10.200.0.2")
    k_ab = iperf(net, pod_a, pod_b, "10.200.0.2")
    k_ba = iperf(net, pod_a, pod_b, "10.200.0.2", reverse=True)
    print(f"\nTCP over VXLAN, one veth underlay: turnoutd<->turnoutd A->B {t_ab:.2f} / B->A "
          f"{t_ba:.2f} Gbit/s; kernel<->kernel A->B {k_ab:.2f} / B->A {k_ba:.2f} Gbit/s")


@contextmanager
def ovs(net: Net, ns: str, name: str = "ovs") -> Iterator[callable]:
    """A private OVS userspace instance inside `ns` (docs/peers.md)."""
    for t in ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-appctl"):
        need(t)
    d = net.tmp / name
    d.mkdir()
    env = {"OVS_RUNDIR": str(d), "OVS_LOGDIR": str(d), "OVS_DBDIR": str(d),
           "OVS_SYSCONFDIR": str(d)}
    envargs = [f"{k}={v}" for k, v in env.items()]
    db = f"unix:{d}/db.sock"

    def x(*cmd: str, check: bool = True) -> str:
        return nx(ns, "env", *envargs, *cmd, check=check)

    x("ovsdb-tool", "create", f"{d}/conf.db", "/usr/share/openvswitch/vswitch.ovsschema")
    x("ovsdb-server", f"{d}/conf.db", f"--remote=punix:{d}/db.sock",
      f"--pidfile={d}/ovsdb-server.pid", f"--log-file={d}/ovsdb-server.log", "--detach",
      "--no-chdir")

    def kill(pidfile: str) -> None:
        f = d / pidfile
        if f.exists():
            pid = int(f.read_text().strip())
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    net.cleanups.append(lambda: kill("ovsdb-server.pid"))
    x("ovs-vsctl", f"--db={db}", "--no-wait", "init")
    x("ovs-vswitchd", db, f"--pidfile={d}/ovs-vswitchd.pid", f"--log-file={d}/ovs-vswitchd.log",
      "--detach", "--no-chdir")
    net.cleanups.append(lambda: kill("ovs-vswitchd.pid"))

    def vsctl(*a: str, check: bool = True) -> str:
        return x("ovs-vsctl", f"--db={db}", *a, check=check)

    vsctl.appctl = lambda *a: x("ovs-appctl", "-t", f"{d}/ovs-vswitchd.{ovs_pid(d)}.ctl", *a)
    vsctl.pid = lambda: int(ovs_pid(d))
    yield vsctl


def ovs_pid(d: Path) -> str:
    return (d / "ovs-vswitchd.pid").read_text().strip()


@pytest.mark.parametrize("kind", ["vxlan", "geneve"])
def test_turnoutd_and_ovs_userspace_tunnels(net: Net, kind: str) -> None:
    a, b, ua, ub = two_hosts(net)
    pod_a = net.pod(a, 0, ["10.200.0.1/24"], POD_MTU)
    pod_b = net.pod(b, 1, ["10.200.0.2/24"], POD_MTU)
    d = net.turnoutd(a, "A", switch_config(kind, ua, [ub], "up0", ["pod0"]))
    with ovs(net, b) as vsctl:
        # OVS userspace tunnelling: the underlay interface in br-phy, whose
        # internal port carries the tunnel address; br-int holds the pod
        # and the tunnel port.
        vsctl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev")
        vsctl("add-port", "br-phy", "up0")
        nx(b, "ip", "addr", "add", ub + "/24", "dev", "br-phy")
        nx(b, "ip", "link", "set", "br-phy", "up")
        vsctl("add-br", "br-int", "--", "set", "bridge", "br-int", "datapath_type=netdev")
        vsctl("add-port", "br-int", "pod1")
        vsctl("add-port", "br-int", "tun0", "--", "set", "interface", "tun0", f"type={kind}",
              f"options:remote_ip={ua}", f"options:key={VNI}")
        nx(b, "ip", "link", "set", "br-int", "up")
        reachable(pod_a, "10.200.0.2", timeout_s=30)
        reachable(pod_b, "10.200.0.1")
        up = iperf(net, pod_a, pod_b, "10.200.0.2")
        down = iperf(net, pod_a, pod_b, "10.200.0.2", reverse=True)
        c = d.counters()
        print(f"\nturnoutd <-> OVS userspace {kind}: A->B {up:.2f} B->A {down:.2f} Gbit/s")
        assert c["rx_decapsulated"] > 100 and c["tx_encapsulated"] > 100, c
        assert c["rx_drop_unknown_vni"] == 0 and c["rx_drop_critical_option"] == 0, c


def test_three_hosts_flood_is_replicated_head_end(net: Net) -> None:
    hosts = [net.netns(h) for h in ("hA", "hB", "hC")]
    under = net.netns("under")
    nx(under, "ip", "link", "add", "br0", "type", "bridge")
    nx(under, "ip", "link", "set", "br0", "up")
    ips = ["192.168.77.1", "192.168.77.2", "192.168.77.3"]
    daemons = []
    pods = []
    for i, h in enumerate(hosts):
        net.veth(h, "up0", under, f"h{i}")
        nx(under, "ip", "link", "set", f"h{i}", "master", "br0")
        pods.append(net.pod(h, i, [f"10.200.0.{i + 1}/24"], POD_MTU))
        others = [ip for j, ip in enumerate(ips) if j != i]
        daemons.append(net.turnoutd(h, f"d{i}", switch_config("vxlan", ips[i], others, "up0",
                                                                 [f"pod{i}"])))
    for i in range(3):
        for j in range(3):
            if i != j:
                reachable(pods[i], f"10.200.0.{j + 1}")
    before = [d.counters() for d in daemons]
    # Three ARP requests for an address nobody has: broadcast, flooded.
    nx(pods[0], "ping", "-c", "1", "-W", "3", "10.200.0.99", check=False)
    time.sleep(0.5)
    after = [d.counters() for d in daemons]
    flooded = after[0]["tx_flooded"] - before[0]["tx_flooded"]
    copies = after[0]["tx_flood_copies"] - before[0]["tx_flood_copies"]
    assert flooded >= 3, (before[0], after[0])
    assert copies == 2 * flooded, (flooded, copies)
    for k in (1, 2):
        got = after[k]["rx_decapsulated"] - before[k]["rx_decapsulated"]
        assert got >= flooded, (k, got, flooded)



def test_geneve_bad_input_is_counted_and_good_frames_pass(net: Net) -> None:
    """Crafted Geneve from a host's UDP socket (this kernel has no geneve):
    every kind of bad header dropped under its own counter, valid frames of
    VNI 100 delivered to the pod in between."""
    a, b, ua, ub = two_hosts(net)
    net.pod(a, 0, ["10.200.0.1/24"], POD_MTU)
    nx(b, "ip", "addr", "add", ub + "/24", "dev", "up0")
    d = net.turnoutd(a, "A", switch_config("geneve", ua, [ub], "up0", ["pod0"]))
    inner = inner_frame(b"\xff" * 6, b"\x02\x00\x00\x00\x00\x42")
    inner = inner[:12] + b"\x88\xb5" + inner[14:]  # local experimental ethertype

    def gnv(vni: int = VNI, ver: int = 0, flags: int = 0, proto: int = 0x6558,
            opts: bytes = b"") -> bytes:
        assert len(opts) % 4 == 0
        return (bytes([(ver << 6) | (len(opts) // 4), flags]) + proto.to_bytes(2, "big")
                + vni.to_bytes(3, "big") + b"\x00" + opts + inner)

    before_pod = d.port("pod0")["tx_packets"]
    before = d.counters()
    good = gnv(opts=b"\x01\x02\x03\x01" + b"\x00" * 4)  # one non-critical option
    udp_send(b, ua, 6081, [good] * 3 + [gnv(ver=1)] * 2 + [gnv(flags=0x80)] * 3
             + [gnv(flags=0x40)] * 4 + [gnv(opts=b"\x01\x02\x83\x00")] * 5
             + [gnv(proto=0x0800)] * 6 + [gnv(vni=200)] * 7 + [good] * 2)

    def delta(k: str) -> int:
        return d.counters()[k] - before[k]

    wait_for("frames counted", 5, lambda: delta("rx_drop_unknown_vni") >= 7)
    assert delta("rx_decapsulated") == 5
    assert delta("rx_drop_bad_version") == 2
    assert delta("rx_drop_oam") == 3
    assert delta("rx_drop_critical_option") == 9
    assert delta("rx_drop_bad_protocol") == 6
    wait_for("the pod got the 5 good frames", 5,
             lambda: d.port("pod0")["tx_packets"] - before_pod >= 5)


def test_a_killed_run_leaves_no_namespace_for_good(tmp_path: Path) -> None:
    """The namespaces of a run killed before its close (marked with a pid no
    process has now) go at the next run's set-up; a live run's stay."""
    marks = tmp_path / "marks"
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid is gone
    stale, mine = P + "stalecheck", P + "sweepcheck"
    for ns in (stale, mine):
        run("ip", "netns", "add", ns)
    try:
        mark_netns(mine, marks)
        (marks / stale).write_text(str(dead.pid))
        assert sweep_dead_netns("tov", marks) == [stale]
        names = run("ip", "netns", "list")
        assert stale not in names and mine in names
    finally:
        for ns in (stale, mine):
            run("ip", "netns", "del", ns, check=False)
