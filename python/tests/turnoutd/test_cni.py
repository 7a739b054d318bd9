"""turnout-cni (crates/cni) against the real turnoutd, network namespaces as
pods, Debian's containernetworking-plugins (host-local IPAM, tuning) and
the CNI project's cnitool as the runtime:

- bad input (missing env, malformed or unknown configuration, a netns that
  does not exist, turnoutd down) gives the spec's error codes and leaves
  nothing behind, also when a step after IPAM fails;
- two pods attached with cnitool (conflist chained with tuning) ping each
  other and run iperf3 through turnoutd's bridge, for af_packet, af_xdp and
  tap;
- a DPDK testpmd pod on a memif attachment answers a kernel pod's pings and
  sends it 64 B frames for a second; a virtio-user testpmd pod on a
  vhost-user attachment answers pings; sockets, results, device-info files;
- static IPAM, and CNI_ARGS reaching host-local;
- 20 parallel ADDs, then GC with half of them listed: exactly the other half
  is removed (ports, links, IPAM leases, records); cnitool gc the rest;
- DEL twice succeeds; CHECK after a turnoutd restart reports the port gone;
  CHECK and DEL after the pod's namespace is gone; a DEL for another
  network leaves this one's attachment alone.

Every test makes its own turnoutd, directories and namespaces and removes
them (processes by PID), also on failure. Needs root, the release binaries
(turnoutd, turnout-cni) and what scripts/setup.sh installs.

Run: cargo build --release -p turnoutd -p turnout-cni &&
    .venv/bin/pytest python/tests/turnoutd/test_cni.py
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from harness import REPO, TESTPMD, Testpmd, Turnoutd, stop_pid, wait_for

from turnout import testpeers
from turnout.build import BIN_DIR

pytestmark = pytest.mark.system

RELEASE = BIN_DIR
CNI_BIN = RELEASE / "turnout-cni"
TURNOUTD = RELEASE / "turnoutd"
PLUGINS = Path("/usr/lib/cni")
CNITOOL = REPO / "target" / "tools" / "cnitool"
SUBNET = "10.77.0.0/24"
CONFIG = '[switch]\ncontrol_socket = "@CTL@"\n\n[logic]\nname = "bridge"\n'


@pytest.fixture(autouse=True)
def _peers() -> None:
    testpeers.need_root()
    testpeers.need(CNI_BIN.is_file(), f"{CNI_BIN} not built (cargo build --release -p turnout-cni)")
    testpeers.need(TURNOUTD.is_file(), f"{TURNOUTD} not built (cargo build --release -p turnoutd)")
    testpeers.need(
        (PLUGINS / "host-local").is_file(),
        "containernetworking-plugins not installed (host-local IPAM)",
    )


class Lab:
    """One turnoutd, a state / IPAM / socket directory and pods (netns)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.td = Turnoutd(root / "td", CONFIG, binary=TURNOUTD)
        self.state = root / "state"
        self.ipam_dir = root / "ipam"
        self.socks = root / "socks"
        self.pods: list[str] = []
        self.procs: list[subprocess.Popen] = []

    # -- pods ---------------------------------------------------------------
    def pod(self) -> str:
        """A new network namespace; returns its path."""
        name = f"tcni{os.getpid()}-{len(self.pods)}"
        subprocess.run(["ip", "netns", "add", name], check=True)
        self.pods.append(name)
        return f"/var/run/netns/{name}"

    @staticmethod
    def in_pod(netns: str, *cmd: str, **kw: Any) -> subprocess.CompletedProcess:
        name = Path(netns).name
        return subprocess.run(
            ["ip", "netns", "exec", name, *cmd], capture_output=True, text=True, **kw
        )

    # -- configuration ------------------------------------------------------
    def conf(self, version: str = "1.1.0", name: str = "tnet", **kw: Any) -> dict[str, Any]:
        c: dict[str, Any] = {
            "cniVersion": version,
            "name": name,
            "type": "turnout-cni",
            "controlSocket": self.td.sock,
            "stateDir": str(self.state),
            "socketDir": str(self.socks),
            "ipam": {
                "type": "host-local",
                "ranges": [[{"subnet": SUBNET}]],
                "dataDir": str(self.ipam_dir),
                "routes": [{"dst": "10.99.0.0/16"}],
            },
        }
        c.update(kw)
        return c

    def cni_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
        env["CNI_PATH"] = f"{RELEASE}:{PLUGINS}"
        return env

    def cni(
        self,
        command: str | None,
        conf: dict[str, Any] | str,
        cid: str = "",
        netns: str = "",
        ifname: str = "eth0",
        cni_args: str = "",
    ) -> tuple[int, Any]:
        """Runs the plugin directly (env + stdin); returns (exit code, JSON or None)."""
        env = self.cni_env()
        if command is not None:
            env["CNI_COMMAND"] = command
        if cid:
            env["CNI_CONTAINERID"] = cid
        if netns:
            env["CNI_NETNS"] = netns
        if ifname:
            env["CNI_IFNAME"] = ifname
        if cni_args:
            env["CNI_ARGS"] = cni_args
        stdin = conf if isinstance(conf, str) else json.dumps(conf)
        p = subprocess.run(
            [str(CNI_BIN)], input=stdin, capture_output=True, text=True, env=env, timeout=60
        )
        out = json.loads(p.stdout) if p.stdout.strip() else None
        return p.returncode, out

    def add(
        self, conf: dict[str, Any], cid: str, netns: str, ifname: str = "eth0", cni_args: str = ""
    ) -> Any:
        rc, out = self.cni("ADD", conf, cid, netns, ifname, cni_args)
        assert rc == 0, out
        return out

    # -- what exists --------------------------------------------------------
    def ports(self) -> dict[str, dict[str, Any]]:
        return {p["name"]: p for p in self.td.rpc("port.list")}

    def leases(self, network: str = "tnet") -> dict[str, str]:
        """host-local's leases: IP -> container id."""
        d = self.ipam_dir / network
        out = {}
        for f in d.glob("*") if d.is_dir() else []:
            try:
                ipaddress.ip_address(f.name)
            except ValueError:
                continue
            out[f.name] = f.read_text().splitlines()[0].strip()
        return out

    def records(self, network: str = "tnet") -> list[str]:
        d = self.state / network
        return sorted(p.stem for p in d.glob("*.json")) if d.is_dir() else []

    def host_links(self) -> set[str]:
        out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True)
        return {
            link["ifname"] for link in json.loads(out.stdout) if link["ifname"].startswith("tn")
        }

    # -- clean-up -----------------------------------------------------------
    def close(self) -> None:
        for p in self.procs:
            stop_pid(p)
        self.td.stop()
        mine = set()
        for f in self.state.glob("*/*.json"):
            with contextlib.suppress(OSError, ValueError):
                mine.add(json.loads(f.read_text()).get("hostIf", ""))
        for name in self.pods:
            subprocess.run(["ip", "netns", "del", name], capture_output=True)
        for link in mine & self.host_links():
            subprocess.run(["ip", "link", "del", link], capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def lab() -> Iterator[Lab]:
    root = Path(tempfile.mkdtemp(prefix="tcni"))
    lab = Lab(root)
    try:
        lab.td.start()
        yield lab
    finally:
        lab.close()


def pod_ip(result: dict[str, Any]) -> str:
    return result["ips"][0]["address"].split("/")[0]


def rx_packets(lab: Lab, netns: str, ifname: str = "eth0") -> int:
    p = lab.in_pod(netns, "cat", f"/sys/class/net/{ifname}/statistics/rx_packets")
    return int(p.stdout)


def ping(lab: Lab, netns: str, ip: str, count: int = 3) -> tuple[int, int]:
    # -w: ping goes on until ``count`` replies or the deadline, so a reply a
    # busy machine delayed still counts (a lost ping is sent again). Every
    # ping answered: ``count`` replies or, when a late one came in with the
    # last, one more.
    p = lab.in_pod(netns, "ping", "-c", str(count), "-i", "0.2", "-w",
                   str(int(count * 0.2) + 10), ip, timeout=60)
    sent = recv = 0
    for line in p.stdout.splitlines():
        if "packets transmitted" in line:
            parts = line.split(",")
            sent = int(parts[0].split()[0])
            recv = int(parts[1].split()[0])
    return sent, recv


# ---------------------------------------------------------------------------


def test_version_and_bad_input_give_spec_errors_and_leave_nothing(lab: Lab) -> None:
    rc, out = lab.cni("VERSION", "")
    assert rc == 0 and out["cniVersion"] == "1.1.0"
    assert "1.1.0" in out["supportedVersions"] and "0.4.0" in out["supportedVersions"]
    # Run by hand (no CNI_COMMAND, or an empty one): an about line with its
    # versions on stderr, as the reference plugins print, exit 0, nothing
    # read or done.
    for env_command in (None, ""):
        env = lab.cni_env()
        if env_command is not None:
            env["CNI_COMMAND"] = env_command
        p = subprocess.run([str(CNI_BIN)], input="", capture_output=True, text=True, env=env,
                           timeout=60)
        assert (p.returncode, p.stdout) == (0, ""), (p.returncode, p.stdout, p.stderr)
        about = p.stderr.splitlines()
        assert about[0].startswith("CNI turnout-cni plugin v"), p.stderr
        assert about[1] == ("CNI protocol versions supported: "
                            + ", ".join(out["supportedVersions"])), p.stderr

    pod = lab.pod()
    good = lab.conf()
    links_before = lab.host_links()
    cases: list[tuple[str, Any, dict[str, str], int]] = [
        ("unknown command", good, {"command": "FROB"}, 4),
        ("no container id", good, {"cid": ""}, 4),
        ("bad ifname", good, {"ifname": "a/b"}, 4),
        ("malformed stdin", '{"cniVersion": "1.1.0", "name": ', {}, 6),
        ("not an object", "[1, 2]", {}, 6),
        ("unknown mode", lab.conf(mode="warp"), {}, 7),
        ("port type of the other mode", lab.conf(mode="kernel", portType="memif"), {}, 7),
        ("unknown field", lab.conf(frobnicate=True), {}, 2),
        ("bad mac", lab.conf(mac="01:00:5e:00:00:01"), {}, 7),
        ("unsupported version", lab.conf(version="9.0.0"), {}, 1),
        ("netns does not exist", good, {"netns": "/var/run/netns/tcni-none"}, 3),
    ]
    for what, conf, over, code in cases:
        command = over.get("command", "ADD")
        rc, out = lab.cni(
            command or None,
            conf,
            cid=over.get("cid", "bad1"),
            netns=over.get("netns", pod),
            ifname=over.get("ifname", "eth0"),
        )
        assert rc != 0 and out is not None, what
        assert out["code"] == code, (what, out)
        assert out["msg"] and out["cniVersion"], (what, out)
    assert lab.ports() == {} and lab.leases() == {} and lab.records() == []

    # A failure after IPAM (eth0 already exists in the pod): the lease, the
    # links and the port are taken back.
    assert (
        lab.in_pod(
            pod, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0p"
        ).returncode
        == 0
    )
    for conf in (good, lab.conf(portType="tap")):
        rc, out = lab.cni("ADD", conf, "bad2", pod)
        assert rc == 1 and out["code"] == 101, out
        assert lab.ports() == {} and lab.leases() == {} and lab.records() == []
        assert lab.host_links() == links_before
        # The pod's own eth0 is left alone.
        assert lab.in_pod(pod, "ip", "link", "show", "eth0p").returncode == 0

    # turnoutd down: ADD is "try again later" and creates nothing; STATUS 50.
    lab.td.stop()
    pod2 = lab.pod()
    rc, out = lab.cni("ADD", good, "bad3", pod2)
    assert rc == 1 and out["code"] == 11, out
    assert lab.leases() == {} and lab.records() == []
    rc, out = lab.cni("STATUS", good, ifname="")
    assert rc == 1 and out["code"] == 50, out
    # STATUS and GC need 1.1.0.
    rc, out = lab.cni("STATUS", lab.conf(version="1.0.0"), ifname="")
    assert rc == 1 and out["code"] == 1, out


def write_conflist(lab: Lab, port_type: str, version: str, chain_tuning: bool) -> Path:
    d = lab.root / "net.d"
    d.mkdir(exist_ok=True)
    plugin = lab.conf(version=version, portType=port_type)
    plugin.pop("cniVersion")
    plugin.pop("name")
    plugins = [plugin]
    if chain_tuning:
        plugins.append(
            {"type": "tuning", "promisc": True, "sysctl": {"net.ipv4.conf.eth0.arp_ignore": "1"}}
        )
    conflist = {"cniVersion": version, "name": "tnet", "plugins": plugins}
    (d / "tnet.conflist").write_text(json.dumps(conflist))
    return d


def cnitool(lab: Lab, netconf_dir: Path, *args: str) -> subprocess.CompletedProcess:
    env = lab.cni_env()
    env["NETCONFPATH"] = str(netconf_dir)
    env["CNI_IFNAME"] = "eth0"
    return subprocess.run(
        [str(CNITOOL), *args], capture_output=True, text=True, env=env, timeout=60
    )


@pytest.mark.parametrize("port_type", ["af_packet", "af_xdp", "tap"])
def test_cnitool_pods_ping_and_iperf3_through_turnoutd(lab: Lab, port_type: str) -> None:
    testpeers.need(CNITOOL.is_file(), f"{CNITOOL} not built (scripts/setup.sh)")
    testpeers.need(shutil.which("iperf3"), "iperf3 not installed")
    testpeers.need(shutil.which("ping"), "ping not installed (iputils-ping)")
    # cniVersion 1.0.0: Debian 12's tuning speaks up to 1.0.0.
    netconf = write_conflist(lab, port_type, "1.0.0", chain_tuning=True)
    a, b = lab.pod(), lab.pod()
    results = []
    for pod in (a, b):
        p = cnitool(lab, netconf, "add", "tnet", pod)
        assert p.returncode == 0, p.stdout + p.stderr
        results.append(json.loads(p.stdout))
    ra, rb = results
    assert ra["cniVersion"] == "1.0.0"
    # tuning ran after turnout-cni on the same interface.
    link = json.loads(lab.in_pod(a, "ip", "-j", "link", "show", "eth0").stdout)[0]
    assert "PROMISC" in link["flags"]
    assert lab.in_pod(a, "sysctl", "-n", "net.ipv4.conf.eth0.arp_ignore").stdout.strip() == "1"
    ports = lab.ports()
    assert len(ports) == 2 and {p["kind"] for p in ports.values()} == {port_type}

    sent, recv = ping(lab, a, pod_ip(rb), count=5)
    assert sent >= 5 and recv >= 5, (sent, recv)
    server = subprocess.Popen(
        ["ip", "netns", "exec", Path(b).name, "iperf3", "-s", "-1", "-B", pod_ip(rb)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    lab.procs.append(server)
    wait_for(
        "iperf3 to listen",
        10,
        lambda: lab.in_pod(b, "ss", "-ltnH", "sport = :5201").stdout.strip(),
    )
    c = lab.in_pod(a, "iperf3", "-c", pod_ip(rb), "-t", "2", "-J", timeout=30)
    assert c.returncode == 0, c.stdout[-500:] + c.stderr
    gbps = json.loads(c.stdout)["end"]["sum_received"]["bits_per_second"] / 1e9
    print(f"\niperf3 pod->pod through turnoutd ({port_type}): {gbps:.2f} Gbit/s")
    assert gbps > 0.01
    stop_pid(server)

    for pod in (a, b):
        p = cnitool(lab, netconf, "check", "tnet", pod)
        assert p.returncode == 0, p.stdout + p.stderr
    for pod in (a, b):
        for _ in range(2):  # DEL twice succeeds
            p = cnitool(lab, netconf, "del", "tnet", pod)
            assert p.returncode == 0, p.stdout + p.stderr
    assert lab.ports() == {} and lab.leases() == {} and lab.records() == []

    # STATUS through cnitool (1.1.0 conflist, no tuning: it speaks 1.0.0).
    netconf = write_conflist(lab, port_type, "1.1.0", chain_tuning=False)
    p = cnitool(lab, netconf, "status", "tnet", a)
    assert p.returncode == 0, p.stdout + p.stderr
    lab.td.stop()
    p = cnitool(lab, netconf, "status", "tnet", a)
    assert p.returncode != 0 and "turnoutd does not answer" in p.stderr, p.stdout + p.stderr


def test_testpmd_memif_pod_exchanges_traffic_with_a_kernel_pod(lab: Lab) -> None:
    testpeers.need(TESTPMD, "dpdk-testpmd not installed (Debian dpdk-dev)")
    kpod, mpod = lab.pod(), lab.pod()
    rk = lab.add(lab.conf(), "kpod", kpod)
    devinfo = lab.root / "devinfo" / "tnet-mpod-net1.json"
    mac = "02:00:00:00:aa:01"
    conf = lab.conf(
        mode="userspace",
        portType="memif",
        runtimeConfig={"CNIDeviceInfoFile": str(devinfo), "mac": mac},
    )
    rm = lab.add(conf, "mpod", mpod, ifname="net1")
    iface = rm["interfaces"][0]
    sock = iface["socketPath"]
    assert iface["name"] == "net1" and iface["mac"] == mac and iface["sandbox"] == mpod
    assert Path(sock).parent == lab.socks / "mpod" and Path(sock).exists()
    info = json.loads(devinfo.read_text())
    assert info["type"] == "memif" and info["memif"] == {
        "role": "slave",
        "mode": "ethernet",
        "path": sock,
    }
    port = "mpod.net1"
    assert lab.ports()[port]["kind"] == "memif"

    # The memif pod: testpmd in its namespace, answering ARP and ICMP echo
    # (icmpecho) on the attachment with the MAC the result gave it.
    tp = Testpmd(
        lab.root,
        "mpod",
        [Testpmd.memif(sock, 0, mac=mac)],
        "icmpecho",
        lcores="0,1",
        main_lcore=1,
    )
    tp.args = ["ip", "netns", "exec", Path(mpod).name, *tp.args]
    with tp:
        wait_for("testpmd to start its port", 30, lambda: "Done" in tp.log())
        wait_for("the memif pod to connect", 20, lambda: lab.ports()[port]["link_up"])
        sent, recv = ping(lab, kpod, pod_ip(rm), count=10)
        assert tp.alive(), tp.log()[-2000:]
        # The other way, at rate: testpmd txonly (64 B) to the kernel pod's
        # MAC for one second; the kernel pod's interface counts what arrived.
        kmac = next(i["mac"] for i in rk["interfaces"] if i.get("sandbox"))
        before = rx_packets(lab, kpod)
        tp.command("stop")
        tp.command("set fwd txonly")
        tp.command(f"set eth-peer 0 {kmac}")
        tp.command("start")
        time.sleep(1.0)
        tp.command("stop")
        time.sleep(0.3)
        flood = rx_packets(lab, kpod) - before
        assert tp.alive(), tp.log()[-2000:]
    assert recv >= 10, (sent, recv, tp.log()[-1500:])
    st = lab.td.port(port)
    assert st["rx_packets"] >= recv and st["tx_packets"] >= recv
    assert flood > 1000, flood
    print(
        f"\nkernel pod -> testpmd memif pod: {recv}/{sent} echo replies; "
        f"memif port {st['rx_packets']} rx {st['tx_packets']} tx; "
        f"testpmd txonly 64 B -> kernel pod for 1 s: {flood / 1e6:.3f} Mpps arrived"
    )

    for cid, pod, ifn, c in (("mpod", mpod, "net1", conf), ("kpod", kpod, "eth0", lab.conf())):
        rc, out = lab.cni("DEL", c, cid, pod, ifn)
        assert rc == 0, out
    assert not (lab.socks / "mpod").exists() and not devinfo.exists()
    assert lab.ports() == {} and lab.leases() == {} and lab.records() == []
    assert pod_ip(rk)


def test_vhost_user_attachment(lab: Lab) -> None:
    pod = lab.pod()
    devinfo = lab.root / "devinfo" / "v.json"
    conf = lab.conf(
        mode="userspace", portType="vhost-user", runtimeConfig={"CNIDeviceInfoFile": str(devinfo)}
    )
    tp: Testpmd | None = None

    def why(*what: Any) -> str:
        """What a failure needs: the values, the switch's ports, the pods'
        links, the tails of testpmd's and turnoutd's logs."""
        try:
            ports: Any = lab.ports()
        except Exception as e:
            ports = f"port.list failed: {e}"
        links = " | ".join(lab.in_pod(p, "ip", "-br", "addr").stdout.strip() for p in lab.pods)
        tp_log = tp.log()[-1000:] if tp is not None else ""
        return (f"{what}\nports: {ports}\npod links: {links}\ntestpmd: {tp_log}"
                f"\nturnoutd: {lab.td.log()[-2500:]}")

    r = lab.add(conf, "vpod", pod, ifname="net1")
    sock = r["interfaces"][0]["socketPath"]
    assert Path(sock).exists() and r["ips"][0]["interface"] == 0, why(r)
    assert json.loads(devinfo.read_text())["vhost-user"] == {"mode": "client", "path": sock}
    assert lab.ports()["vpod.net1"]["kind"] == "vhost_user", why()
    check = lab.cni("CHECK", conf, "vpod", pod, "net1")
    assert check[0] == 0, why(check)

    # A virtio-user testpmd pod on it answers a kernel pod's pings.
    testpeers.need(TESTPMD, "dpdk-testpmd not installed (Debian dpdk-dev)")
    kpod = lab.pod()
    lab.add(lab.conf(), "kpod", kpod)
    vdev = f"net_virtio_user0,path={sock},queues=1,queue_size=1024,mac=02:00:00:00:cc:01"
    tp = Testpmd(lab.root, "vpod", [vdev], "icmpecho", extra=["--no-lsc-interrupt"])
    tp.args = ["ip", "netns", "exec", Path(pod).name, *tp.args]
    with tp:
        # testpmd resets the device while it starts its port: wait for the end.
        wait_for("testpmd to start its port", 30, lambda: "Done" in tp.log())
        wait_for("the vhost-user pod to connect", 20, lambda: lab.ports()["vpod.net1"]["link_up"])
        sent, recv = ping(lab, kpod, pod_ip(r), count=5)
        assert tp.alive(), why(sent, recv)
        # ping -w stops at 5 replies; one more may come in the same moment
        # (6 of 6 on a loaded machine)
        assert recv >= 5, why(sent, recv)
    rc = lab.cni("DEL", lab.conf(), "kpod", kpod)
    assert rc[0] == 0, why(rc)
    for _ in range(2):
        rc = lab.cni("DEL", conf, "vpod", pod, "net1")
        assert rc[0] == 0, why(rc)
    assert not Path(sock).exists() and not devinfo.exists() and lab.ports() == {}, why(
        Path(sock).exists(), devinfo.exists())


def test_parallel_adds_then_gc_removes_exactly_the_unlisted_half(lab: Lab) -> None:
    n = 20
    pods = [lab.pod() for _ in range(n)]
    conf = lab.conf()
    results: dict[int, tuple[int, Any]] = {}

    def one(i: int) -> None:
        results[i] = lab.cni("ADD", conf, f"pod{i:02d}", pods[i])

    t0 = time.monotonic()
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    add_s = time.monotonic() - t0
    assert all(rc == 0 for rc, _ in results.values()), results
    ips = {pod_ip(out) for _, out in results.values()}
    assert len(ips) == n
    assert len(lab.ports()) == n and len(lab.leases()) == n and len(lab.records()) == n

    keep = {f"pod{i:02d}" for i in range(0, n, 2)}
    gc = dict(conf)
    gc["cni.dev/valid-attachments"] = [{"containerID": c, "ifname": "eth0"} for c in sorted(keep)]
    t0 = time.monotonic()
    rc, out = lab.cni("GC", gc, ifname="")
    gc_s = time.monotonic() - t0
    assert rc == 0, out
    assert set(lab.ports()) == {f"{c}.eth0" for c in keep}
    assert set(lab.leases().values()) == keep
    assert lab.records() == sorted(f"{c}@eth0" for c in keep)
    for i, pod in enumerate(pods):
        has = lab.in_pod(pod, "ip", "link", "show", "eth0").returncode == 0
        assert has == (f"pod{i:02d}" in keep), i
    print(f"\n{n} parallel ADDs: {add_s:.2f} s; GC of {n - len(keep)}: {gc_s:.2f} s")

    # cnitool gc lists no attachment: everything of the network goes.
    testpeers.need(CNITOOL.is_file(), f"{CNITOOL} not built (scripts/setup.sh)")
    netconf = write_conflist(lab, "af_packet", "1.1.0", chain_tuning=False)
    p = cnitool(lab, netconf, "gc", "tnet", pods[0])
    assert p.returncode == 0, p.stdout + p.stderr
    assert lab.ports() == {} and lab.leases() == {} and lab.records() == []


def test_del_twice_and_check_after_a_turnoutd_restart(lab: Lab) -> None:
    pod = lab.pod()
    conf = lab.conf(mtu=1400, mac="02:00:00:00:bb:01")
    r = lab.add(conf, "rpod", pod)
    pif = next(i for i in r["interfaces"] if i.get("sandbox"))
    assert pif["mac"] == "02:00:00:00:bb:01" and pif["mtu"] == 1400
    link = json.loads(lab.in_pod(pod, "ip", "-j", "link", "show", "eth0").stdout)[0]
    assert link["mtu"] == 1400 and link["address"] == "02:00:00:00:bb:01"
    routes = lab.in_pod(pod, "ip", "route").stdout
    assert "10.99.0.0/16 via 10.77.0.1" in routes
    assert lab.cni("CHECK", conf, "rpod", pod)[0] == 0
    rc, out = lab.cni("ADD", conf, "rpod", pod)
    assert rc == 1 and out["code"] == 104, out

    lab.td.stop()
    lab.td.start()
    rc, out = lab.cni("CHECK", conf, "rpod", pod)
    assert rc == 1 and out["code"] == 102 and "rpod.eth0" in out["msg"], out
    for _ in range(2):
        rc, out = lab.cni("DEL", conf, "rpod", pod)
        assert rc == 0, out
    assert lab.leases() == {} and lab.records() == []
    assert lab.in_pod(pod, "ip", "link", "show", "eth0").returncode != 0
    # DEL of something never attached, and without a netns, succeeds too.
    assert lab.cni("DEL", conf, "never", "")[0] == 0


def test_del_on_another_network_leaves_this_attachment_alone(lab: Lab) -> None:
    pod = lab.pod()
    lab.add(lab.conf(), "opod", pod)
    other = lab.conf(name="tother")
    other["ipam"]["ranges"] = [[{"subnet": "10.78.0.0/24"}]]
    # A runtime's DEL for a network whose ADD never happened (e.g. it failed
    # on the existing eth0) must not take the other network's port.
    assert lab.cni("DEL", other, "opod", pod)[0] == 0
    assert "opod.eth0" in lab.ports()
    assert lab.in_pod(pod, "ip", "link", "show", "eth0").returncode == 0
    assert lab.cni("CHECK", lab.conf(), "opod", pod)[0] == 0
    assert lab.cni("DEL", lab.conf(), "opod", pod)[0] == 0
    assert lab.ports() == {} and lab.records() == []


def test_static_ipam_and_cni_args_reach_the_delegate(lab: Lab) -> None:
    testpeers.need((PLUGINS / "static").is_file(), "static IPAM plugin not installed")
    pod = lab.pod()
    conf = lab.conf()
    conf["ipam"] = {
        "type": "static",
        "addresses": [{"address": "10.77.5.9/24", "gateway": "10.77.5.1"}],
        "routes": [{"dst": "10.98.0.0/16"}],
    }
    r = lab.add(conf, "spod", pod)
    assert r["ips"][0]["address"] == "10.77.5.9/24"
    assert "10.77.5.9/24" in lab.in_pod(pod, "ip", "-br", "addr", "show", "eth0").stdout
    assert "10.98.0.0/16 via 10.77.5.1" in lab.in_pod(pod, "ip", "route").stdout
    assert lab.cni("DEL", conf, "spod", pod)[0] == 0

    # host-local takes a requested address from CNI_ARGS (IP=...): the
    # runtime's environment reaches the delegate unchanged.
    r = lab.add(lab.conf(), "apod", pod, cni_args="IgnoreUnknown=1;IP=10.77.0.42")
    assert r["ips"][0]["address"] == "10.77.0.42/24"
    assert lab.leases() == {"10.77.0.42": "apod"}
    assert lab.cni("DEL", lab.conf(), "apod", pod)[0] == 0


def test_del_after_the_pod_namespace_is_gone(lab: Lab) -> None:
    pod = lab.pod()
    r = lab.add(lab.conf(), "gpod", pod)
    host = r["interfaces"][0]["name"]
    assert host in lab.host_links()
    subprocess.run(["ip", "netns", "del", Path(pod).name], check=True)
    lab.pods.remove(Path(pod).name)
    # The netns is gone (and the veth with it); DEL still cleans the rest.
    wait_for("the veth to go with the namespace", 5, lambda: host not in lab.host_links())
    # CHECK of a pod whose namespace is gone: the spec's "unknown container".
    rc, out = lab.cni("CHECK", lab.conf(), "gpod", pod)
    assert rc == 1 and out["code"] == 3, out
    for _ in range(2):
        rc, out = lab.cni("DEL", lab.conf(), "gpod", pod)
        assert rc == 0, out
    assert lab.ports() == {} and lab.leases() == {} and lab.records() == []


def kubernetes_md_recipe() -> str:
    """The shell block of docs/kubernetes.md's "On one machine, with cnitool"."""
    text = (REPO / "docs" / "kubernetes.md").read_text()
    section = text.split("## On one machine, with cnitool", 1)[1]
    return section.split("```sh\n", 1)[1].split("\n```", 1)[0]


def test_the_one_machine_cnitool_recipe_of_the_docs_as_written() -> None:
    """docs/kubernetes.md's recipe, as written, by `bash -e` in namespaces
    of its own: mount (a private tmpfs on /run, /tmp and /var/lib, so its
    /run/turnout, netns names, records and leases are its own), network
    (its veths) and PID (whatever it started dies with it, also when it
    fails). Checks what its comments say, and that DEL left nothing."""
    testpeers.need(CNITOOL.is_file(), f"{CNITOOL} not built (scripts/setup.sh)")
    testpeers.need(shutil.which("ping"), "ping not installed (iputils-ping)")
    # The checkout may live under one of the directories the tmpfs mounts
    # hide (a clone in /tmp): it is held open before them and bound back
    # into its place after (the fd's magic link, not its path, is the
    # source: `--no-canonicalize`).
    private = ("/run", "/tmp", "/var/lib")
    hidden = any(Path(d) == REPO or Path(d) in REPO.parents for d in private)
    script = "\n".join([
        "set -e",
        f"exec 9<{shlex.quote(str(REPO))}",
        *(f"mount -t tmpfs tmpfs {d}" for d in private),
        *([f"mkdir -p {shlex.quote(str(REPO))}",
           f"mount --no-canonicalize --bind /proc/self/fd/9 {shlex.quote(str(REPO))}"]
          if hidden else []),
        "exec 9<&-",
        "ip link set lo up",
        f"cd {shlex.quote(str(REPO))}",
        "set -x",
        # target/release as written is this run's build (turnout.build)
        kubernetes_md_recipe().replace("target/release", str(RELEASE.relative_to(REPO))),
        "set +x",
        "echo '== left behind'",
        "ls /var/lib/cni/turnout/tnet 2>/dev/null || true",
        "ls /var/lib/cni/networks/tnet",
        "ip -o link show | grep ' tn' || true",
        "ip netns list",
    ])
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("CNI_") and k not in ("TURNOUT_CTL_SOCKET", "NETCONFPATH")}
    p = subprocess.run(
        ["unshare", "--fork", "--pid", "--mount-proc", "--kill-child", "--mount",
         "--propagation", "private", "--net", "--", "bash", "-c", script],
        capture_output=True, text=True, env=env, timeout=300)
    log = p.stdout + "\n" + p.stderr[-4000:]
    assert p.returncode == 0, log
    out, left = p.stdout.split("== left behind\n")
    # cnitool add: eth0 in each pod, 10.20.0.2 and 10.20.0.3
    dec, results, at = json.JSONDecoder(), [], out.find("{")
    while at >= 0:  # cnitool ends its JSON without a newline: decode in place
        try:
            v, end = dec.raw_decode(out, at)
        except ValueError:
            v, end = None, at + 1
        if isinstance(v, dict) and "ips" in v:
            results.append(v)
        at = out.find("{", end)
    assert [r["ips"][0]["address"] for r in results] == ["10.20.0.2/24", "10.20.0.3/24"], out
    assert all(r["interfaces"][-1]["name"] == "eth0" for r in results), out
    # turnout ctl ports: the two ports turnout-cni added
    rows = [ln.split() for ln in out.splitlines() if " af_packet " in f" {ln} "]
    assert len(rows) == 2, out
    # ping pod to pod through turnoutd
    m = re.search(r"(\d+) packets transmitted, (\d+) received", out)
    assert m and m.group(1) == "3" and int(m.group(2)) >= 1, out
    # DEL left no record, no lease, no veth, and the pods went too
    lines = left.splitlines()
    assert not [n for n in lines if re.fullmatch(r"10\.20\.0\.\d+|.*@eth0\.json", n)], left
    assert not [ln for ln in lines if re.match(r"\d+: tn", ln) or ln.startswith("pod-")], left
