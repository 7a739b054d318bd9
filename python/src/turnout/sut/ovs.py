"""Open vSwitch, userspace datapath, with a private ovsdb-server and
ovs-vswitchd (everything in the run's work dir; docs/peers.md).

``Ovs``: ``afxdp`` ports on the veths. ``OvsDpdk``: the DPDK build
(``ovs-vswitchd-dpdk``) on hugepages (the testbed's: a campaign's pool,
testbed/state.py ``HugepageHold``); kernel interfaces are DPDK
``net_af_packet`` ports, virtual ports (campaign ``virtual_port =
"vhost-user"``) ``dpdkvhostuser`` ports (OVS serves the socket,
turnout-gen connects as a VM would) at ``mtu_request`` = option
``vhost_mtu`` (default 9000, so 1518 B frames and jumbo frames pass).
OpenFlow rules ``in_port=a → output:b`` implement the cross-connects
both ways; at a point of the ``openflow`` scenario the bridge (OpenFlow
1.0 and 1.3) gets the scenario's rule set instead, with ``ovs-ofctl -O
OpenFlow13 add-flows`` (turnout.ofrules), as turnoutd does.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any, ClassVar

from ..hosts.base import Host, HostError
from ..measure.cost import CostSample, cpu_list
from ..ofrules import BULK_COOKIE, bulk_lines, dump_flows, install
from ..portkind import PortKind
from ..testbed import Testbed
from .base import SutAdapter, SutError, SutPort, Topology, command_version, off_sut_cpus
from .options import Choice, Int, SutOptions, opt
from .overlay_host import VNI, VXLAN_PORT, HostWiring, OverlayHost

__all__ = ["Ovs", "OvsDpdk", "OvsDpdkOptions", "OvsOptions", "OvsOverlayHost"]

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
DPDK_BINARY = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk"


def _mask(cpus: str) -> str:
    return hex(sum(1 << c for c in set(cpu_list(cpus))))


def appctl_at(directory: Path | PurePath, command: str, *args: str, timeout_s: float = 2.0,
              host: Host | None = None) -> str:
    """One ovs-appctl command over the control socket of the ovs-vswitchd
    whose run directory is ``directory`` (JSON-RPC, no process spawned; on
    ``host``, this machine when None); raises SutError when there is no
    socket, the connection closes or OVS answers an error."""
    if host is not None and not host.is_local:
        ctls = [n for n in host.listdir(directory) if n.startswith("ovs-vswitchd")
                and n.endswith(".ctl")]
        if not ctls:
            raise SutError("ovs-vswitchd has no control socket")
        req = json.dumps({"method": command, "params": list(args), "id": 0})
        try:
            reply = host.unix_call(str(PurePath(directory) / sorted(ctls)[-1]), req, timeout_s,
                                   framing="json")
            msg, _ = json.JSONDecoder().raw_decode(reply)
        except (HostError, ValueError) as e:
            raise SutError(f"ovs-appctl {command}: {e}") from e
        if msg.get("error"):
            raise SutError(f"ovs-appctl {command}: {msg['error']}")
        return str(msg.get("result", ""))
    ctl = sorted(Path(directory).glob("ovs-vswitchd*.ctl"))
    if not ctl:
        raise SutError("ovs-vswitchd has no control socket")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(str(ctl[-1]))
        s.sendall(json.dumps({"method": command, "params": list(args), "id": 0}).encode())
        buf = b""
        dec = json.JSONDecoder()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                raise SutError(f"ovs-appctl {command}: connection closed")
            buf += chunk
            try:
                msg, _ = dec.raw_decode(buf.decode())
                break
            except ValueError:
                continue
    if msg.get("error"):
        raise SutError(f"ovs-appctl {command}: {msg['error']}")
    return str(msg.get("result", ""))


@dataclass(frozen=True)
class OvsOptions(SutOptions):
    """``[sut.ovs]``."""

    xdp_mode: str = opt("native", Choice("native", "native-with-zerocopy", "generic",
                                         "best-effort"), "its afxdp ports' options:xdp-mode")


@dataclass(frozen=True)
class OvsDpdkOptions(SutOptions):
    """``[sut.ovs-dpdk]``."""

    vhost_mtu: int = opt(9000, Int(1500, 9702, "B"), "mtu_request of its dpdkvhostuser ports")


class OvsOverlayHost(OverlayHost):
    """Open vSwitch's userspace datapath on one host of the overlay: the
    underlay in ``br-phy`` (whose internal port holds the tunnel address),
    the pod and a ``vxlan`` port in the integration bridge with ``in_port``
    flows both ways; ports of the adapter's type."""

    cost_source = "ovs-vswitchd processing cycles (pmd-stats-show)"

    def __init__(self, base: SutAdapter, host: str) -> None:
        super().__init__(base, host)
        assert isinstance(base, Ovs), base
        self.o = type(base)(dict(base.options))
        self.o.name = f"{base.name}-host{host}"  # its work directory

    def setup(self, tb: Testbed, w: HostWiring, cpus: str) -> None:
        self.w, self.tb = w, tb
        o = self.o
        # the integration bridge with the pod (port 1), no flows yet
        o.setup(tb, Topology(ns=w.ns, ports=[SutPort(name="pod", kind="veth",
                                                     iface=w.pod_iface)],
                             xconnects=[], cpus=cpus))
        self.phy = f"{tb.prefix}y"
        o.vsctl("add-br", self.phy, "--", "set", "bridge", self.phy, "datapath_type=netdev")
        o.vsctl("add-port", self.phy, w.underlay_iface, "--", "set", "interface",
                w.underlay_iface,
                *o.port_args(1, SutPort(name="underlay", kind="veth", iface=w.underlay_iface)))
        tb.run(["ip", "addr", "add", f"{w.local_ip}/24", "dev", self.phy], netns=w.ns)
        tb.run(["ip", "link", "set", self.phy, "up"], netns=w.ns)
        o.vsctl("add-port", o.bridge, "tun0", "--", "set", "interface", "tun0", "type=vxlan",
                f"options:remote_ip={w.remote_ip}", f"options:key={VNI}",
                f"options:dst_port={VXLAN_PORT}", "ofport_request=2")
        for x, y in ((1, 2), (2, 1)):
            flow = f"in_port={x},actions=output:{y}"
            o.ofctl("add-flow", o.bridge, flow)
            o.flows.append(flow)
        assert o.topo is not None
        o._wait_ports(o.topo)

    def phy_mac(self) -> str:
        r = self.tb.run(["cat", f"/sys/class/net/{self.phy}/address"], netns=self.w.ns)
        return r.stdout.strip()

    def pair(self, peer: OverlayHost) -> None:
        """Tell OVS the remote tunnel end's MAC (its br-phy), so no trial
        starts with the tunnel's ARP round trip."""
        assert isinstance(peer, OvsOverlayHost), peer
        self.o.appctl("tnl/neigh/set", self.phy, self.w.remote_ip, peer.phy_mac())

    def version(self) -> str:
        return self.o.version()

    def config(self) -> dict[str, Any]:
        return {**self.o.config(), "underlay_bridge": getattr(self, "phy", "")}

    def pids(self) -> list[int]:
        return self.o.pids()

    def sample(self) -> CostSample | None:
        return self.o.cost_sample()

    def teardown(self) -> None:
        self.o.teardown()


class Ovs(SutAdapter):
    name = "ovs"
    Options: ClassVar[type[SutOptions]] = OvsOptions
    overlay_host: ClassVar[type[OverlayHost] | None] = OvsOverlayHost
    vswitchd = "ovs-vswitchd"
    max_ports = 1024
    openflow = True
    #: how long ovs-vsctl waits for ovs-vswitchd (its --timeout, seconds)
    vsctl_timeout_s = 20

    def requires(self) -> list[tuple[str, str]]:
        return [(t, "openvswitch-switch") for t in ("ovsdb-server", "ovsdb-tool", "ovs-vsctl",
                                                   "ovs-ofctl", self.vswitchd, SCHEMA)]

    def version(self) -> str:
        return command_version([self.vswitchd, "--version"], host=self.host)

    def config(self) -> dict[str, Any]:
        return {"datapath": "netdev", "port_type": self.port_type_name(),
                "pmd_cpu_mask": getattr(self, "mask", ""),
                "other_threads_cpus": getattr(self, "off_cpus", ""),
                "flows": getattr(self, "flows", []),
                "options": self.options}

    def port_type_name(self) -> str:
        return "afxdp"

    def _vars(self) -> dict[str, str]:
        """Its private run, log, database and config directory (every OVS tool reads these)."""
        return {k: str(self.dir) for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR",
                                           "OVS_SYSCONFDIR")}

    def _env(self) -> dict[str, str]:
        return {**os.environ, **self._vars()}

    def _tool(self, tool: str, args: list[str], timeout_s: float) -> str:
        """An OVS tool in the SUT's namespace (on its host), with its directories."""
        assert self.tb is not None and self.topo is not None
        r = self.tb.run([tool, *args], netns=self.topo.ns, env=self._vars(), check=False,
                        timeout_s=timeout_s)
        if r.returncode != 0:
            raise SutError(f"{tool} {' '.join(args)}: {r.stderr.strip()}")
        return str(r.stdout).strip()

    def vsctl(self, *args: str) -> str:
        return self._tool("ovs-vsctl", [f"--db=unix:{self.db}",
                                        f"--timeout={self.vsctl_timeout_s}", *args],
                          self.vsctl_timeout_s + 10)

    def ofctl(self, *args: str, timeout_s: float = 30.0) -> str:
        return self._tool("ovs-ofctl", list(args), timeout_s)

    def extra_config(self, tb: Testbed) -> None:
        """Hook for the DPDK build."""

    def vswitchd_started(self) -> None:
        """Hook for the DPDK build: ovs-vswitchd was just started."""

    def vswitchd_state(self) -> str:
        """Whether ovs-vswitchd runs, and the end of its log: why a command
        that waits for it did not return."""
        proc = getattr(self, "vswitchd_proc", None)
        alive = ("ovs-vswitchd is running" if proc is not None and proc.poll() is None
                 else f"ovs-vswitchd exited {proc.returncode if proc is not None else '?'}")
        try:
            log = self.host.read_text(self.dir / "ovs-vswitchd.log")
        except OSError as e:
            return f"{alive}; its log: {e}"
        tail = " | ".join(ln.strip() for ln in log.splitlines()[-6:])
        return f"{alive}; its log ends: {tail[-900:]}"

    def port_added(self, p: SutPort) -> None:
        """Hook for the DPDK build (vhost-user sockets)."""

    def port_args(self, i: int, p: SutPort) -> list[str]:
        assert isinstance(self.opts, OvsOptions)
        mode = self.opts.xdp_mode
        return ["type=afxdp", f"options:xdp-mode={mode}"]

    #: the SutPort kinds it can attach
    port_kinds: tuple[str, ...] = ("veth",)  # and PortKind values

    @staticmethod
    def iface_of(p: SutPort) -> str:
        """The OVS interface name of a port (a vhost-user port has no kernel
        interface: its name, which is also its socket's name)."""
        return p.iface or p.name

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.attach(tb, topo)
        bad = sorted({p.kind for p in topo.ports if p.kind not in self.port_kinds})
        if bad:
            raise SutError(f"{self.name} cannot attach {', '.join(bad)} ports "
                           f"(only {', '.join(self.port_kinds)})")
        self.dir = tb.directory(self.name)
        self.db = str(self.dir / "db.sock")
        # Placement as for every SUT: the data path (the PMD threads,
        # pmd-cpu-mask) on the SUT's CPUs, everything else (ovsdb-server,
        # ovs-vswitchd's main, handler, revalidator and urcu threads) off
        # them, as turnoutd keeps its API threads and testpmd its main
        # lcore. Started unpinned, those threads ran on the SUT's CPU next
        # to the PMD (each trial's cpu rows showed it). A PMD thread
        # sets its own affinity to its core, outside the process's mask.
        self.off_cpus = off_sut_cpus(topo.cpus, set(tb.allowed_cpus()))
        conf = self.dir / "conf.db"
        tb.run(["ovsdb-tool", "create", str(conf), SCHEMA])
        self.ovsdb = tb.spawn(["ovsdb-server", str(conf), f"--remote=punix:{self.db}",
                               f"--pidfile={self.dir}/ovsdb-server.pid",
                               f"--log-file={self.dir}/ovsdb-server.log", "--no-chdir"],
                              netns=topo.ns, cpus=self.off_cpus or None, env=self._env(),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while not self.host.exists(self.db):
            if self.ovsdb.poll() is not None or time.monotonic() > deadline:
                raise SutError("ovsdb-server did not start")
            time.sleep(0.05)
        self.vsctl("--no-wait", "init")
        self.mask = _mask(topo.cpus)
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                   f"other_config:pmd-cpu-mask={self.mask}")
        self.extra_config(tb)
        self.vswitchd_proc = tb.spawn(
            [self.vswitchd, f"unix:{self.db}", f"--pidfile={self.dir}/ovs-vswitchd.pid",
             f"--log-file={self.dir}/ovs-vswitchd.log", "--no-chdir"],
            netns=topo.ns, cpus=self.off_cpus or None, env=self._env(),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.bridge = f"{tb.prefix}o"
        tb.remember("ovs", [self.db, self.bridge])
        self.vswitchd_started()
        try:
            self.vsctl("add-br", self.bridge, "--", "set", "bridge", self.bridge,
                       "datapath_type=netdev", "fail_mode=secure",
                       "protocols=OpenFlow10,OpenFlow13")
        except SutError as e:
            # add-br waits for the daemon to apply it: say what the daemon did
            raise SutError(f"{e}; {self.vswitchd_state()}") from e
        ofport: dict[str, int] = {}
        self.ofport = ofport
        for i, p in enumerate(topo.ports):
            ofport[p.name] = i + 1
            iface = self.iface_of(p)
            self.vsctl("add-port", self.bridge, iface, "--", "set", "interface", iface,
                       *self.port_args(i, p), f"ofport_request={i + 1}")
            self.port_added(p)
        self.ofctl("del-flows", self.bridge)
        self.flows = []
        if topo.openflow is not None:
            try:
                self.flows = [install(topo.openflow, self.bridge, self.dir, netns=topo.ns,
                                      env=self._env()),
                              f"{topo.openflow.rules} rules, {topo.openflow.masks} masks"]
            except RuntimeError as e:
                raise SutError(str(e)) from e
            self._wait_ports(topo)
            return
        for a, b in topo.xconnects:
            for x, y in ((a, b), (b, a)):
                flow = f"in_port={ofport[x]},actions=output:{ofport[y]}"
                self.ofctl("add-flow", self.bridge, flow)
                self.flows.append(flow)
        self._wait_ports(topo)

    has_rules = True

    def dump_flows(self) -> list[tuple[int, str, int]]:
        """The bridge's flows as ``ovs-ofctl dump-flows`` sees them."""
        assert self.topo is not None
        return dump_flows(self.bridge, netns=self.topo.ns, env=self._env())

    def move_rule(self, src: str, dst: str, to: str) -> str:
        """``ovs-ofctl mod-flows``: in_port=src now outputs to ``to``."""
        flow = f"in_port={self.ofport[src]},actions=output:{self.ofport[to]}"
        self.ofctl("mod-flows", self.bridge, flow)
        return f"ovs-ofctl mod-flows {self.bridge} {flow}"

    bulk_interfaces = ("ovs-ofctl",)

    def bulk_flows(self, interface: str, n: int) -> str:
        """``ovs-ofctl -O OpenFlow13 add-flows BRIDGE FILE``, as turnoutd gets
        them; removed with ``del-flows cookie=...``."""
        if interface != "ovs-ofctl":
            raise SutError(f"{self.name}: no bulk interface {interface!r}")
        f = self.dir / f"bulk{n}.txt"
        f.write_text("".join(x + "\n" for x in bulk_lines(n)))
        self.ofctl("-O", "OpenFlow13", "add-flows", self.bridge, str(f), timeout_s=300.0)
        return f"ovs-ofctl -O OpenFlow13 add-flows {self.bridge} {f.name}"

    def remove_bulk_flows(self) -> None:
        self.ofctl("-O", "OpenFlow13", "del-flows", self.bridge, f"cookie={BULK_COOKIE:#x}/-1")

    def _wait_ports(self, topo: Topology) -> None:
        deadline = time.monotonic() + 15
        while True:
            out = self.vsctl("--columns=name,error", "list", "interface")
            errors = [ln for ln in out.splitlines() if ln.startswith("error") and '""' not in ln
                      and "[]" not in ln]
            if not errors:
                break
            if time.monotonic() > deadline:
                raise SutError(f"OVS ports not up: {errors[:3]}")
            time.sleep(0.2)
        time.sleep(0.5)

    def teardown(self) -> None:
        if self.tb is None:
            return
        try:
            if getattr(self, "bridge", None):
                self.vsctl("--if-exists", "del-br", self.bridge)
                self.tb.forget_object("ovs", [self.db, self.bridge])
        except (SutError, HostError, subprocess.TimeoutExpired):
            pass
        for attr in ("vswitchd_proc", "ovsdb"):
            p = getattr(self, attr, None)
            if p is not None:
                self.tb.stop(p, timeout_s=5)

    def pids(self) -> list[int]:
        p = getattr(self, "vswitchd_proc", None)
        return [p.pid] if p is not None and p.poll() is None else []

    cost_source = ("OVS datapath threads: processing cycles (TSC) over packets received "
                   "(dpif-netdev/pmd-stats-show)")

    def appctl(self, command: str, *args: str, timeout_s: float = 2.0) -> str:
        """One ovs-appctl command over ovs-vswitchd's control socket (JSON-RPC,
        no process spawned: cheap enough to call during a trial)."""
        return appctl_at(self.dir, command, *args, timeout_s=timeout_s, host=self.host)

    _RECEIVED = re.compile(r"packets received:\s*(\d+)")
    _PROCESSING = re.compile(r"processing cycles:\s*(\d+)")

    def cost_sample(self) -> CostSample | None:
        if not self.pids() or not getattr(self, "dir", None):
            return None
        text = self.appctl("dpif-netdev/pmd-stats-show")
        frames = sum(int(x) for x in self._RECEIVED.findall(text))
        cycles = sum(int(x) for x in self._PROCESSING.findall(text))
        return CostSample(0.0, float(cycles), frames)


class OvsDpdk(Ovs):
    name = "ovs-dpdk"
    Options = OvsDpdkOptions
    overlay_host = None
    overlay_reason = ("overlay: OVS-DPDK is not wired up for tunnels here (ovs, the same "
                      "datapath, is)")
    vswitchd = DPDK_BINARY
    max_ports = 16
    hugepages = 512  # 1 GiB of 2 MiB pages, back to the pool after the run
    # DPDK's initialisation delays the first add-br: at load 11-13 on 2 cores
    # it took over 20 s in 2 of 10 set-ups (campaigns/flows.toml)
    vsctl_timeout_s = 90
    supports_vhost_user = True
    port_kinds = ("veth", PortKind.VHOST_USER)

    def requires(self) -> list[tuple[str, str]]:
        return [(DPDK_BINARY, "openvswitch-switch-dpdk"), *super().requires()]

    def vswitchd_started(self) -> None:
        """Waits until ovs-vswitchd has initialised DPDK (``dpdk_initialized``),
        which it does before it applies any bridge: a daemon that exits
        meanwhile (hugepages it could not map, say) fails the set-up at
        once with the end of its log, where an add-br would wait for it
        until its timeout and say only that it timed out."""
        deadline = time.monotonic() + self.vsctl_timeout_s
        while True:
            if self.vswitchd_proc.poll() is not None:
                raise SutError(f"ovs-vswitchd did not initialise DPDK: {self.vswitchd_state()}")
            if self.vsctl("get", "Open_vSwitch", ".", "dpdk_initialized") == "true":
                return
            if time.monotonic() > deadline:
                raise SutError(f"ovs-vswitchd did not initialise DPDK within "
                               f"{self.vsctl_timeout_s} s: {self.vswitchd_state()}")
            time.sleep(0.1)

    def port_type_name(self) -> str:
        kinds = {p.kind for p in self.topo.ports} if self.topo is not None else {"veth"}
        names = {"veth": "dpdk net_af_packet", PortKind.VHOST_USER: "dpdkvhostuser"}
        return " + ".join(names[k] for k in sorted(kinds) if k in names)

    def vhost_mtu(self) -> int:
        assert isinstance(self.opts, OvsDpdkOptions)
        return self.opts.vhost_mtu

    def extra_config(self, tb: Testbed) -> None:
        huge = tb.reserve_hugepages(self.hugepages)
        self.prefix = f"{tb.prefix}od"
        tb.remember("dirs", f"/var/run/dpdk/{self.prefix}")
        self.vsctl("--no-wait", "set", "Open_vSwitch", ".", "other_config:dpdk-init=true",
                   "other_config:dpdk-socket-mem=1024",
                   # no more than it preallocates (its reservation): DPDK's
                   # dynamic memory would take other runs' pages of the pool
                   "other_config:dpdk-socket-limit=1024",
                   f'other_config:dpdk-extra="--huge-dir={huge} --file-prefix={self.prefix} '
                   '--no-pci --single-file-segments"')

    # DPDK 22.11's net_af_packet ports stay at MTU 1500: mtu_request=1600 is
    # refused ("could not add network device ... (Invalid argument)") and
    # without it 1518 B frames (1504 B of L3) are all dropped (measured).
    # Larger frames are skipped with this reason.
    max_frame_b = 1514
    max_frame_reason = ("OVS-DPDK's net_af_packet ports keep MTU 1500 (mtu_request=1600 is "
                        "refused with EINVAL): frames over 1514 B are dropped")

    def port_args(self, i: int, p: SutPort) -> list[str]:
        if p.kind is PortKind.VHOST_USER:
            return ["type=dpdkvhostuser", f"mtu_request={self.vhost_mtu()}"]
        return ["type=dpdk", f"options:dpdk-devargs=net_af_packet{i},iface={p.iface}"]

    def setup(self, tb: Testbed, topo: Topology) -> None:
        # Frames over 1514 B pass only when no port is a net_af_packet one.
        if all(p.kind is PortKind.VHOST_USER for p in topo.ports):
            self.max_frame_b = min(9000, self.vhost_mtu() + 14)
            self.max_frame_reason = (f"OVS-DPDK's vhost-user ports here have MTU "
                                     f"{self.vhost_mtu()} (option vhost_mtu)")
        else:
            self.max_frame_b = OvsDpdk.max_frame_b
            self.max_frame_reason = OvsDpdk.max_frame_reason
        super().setup(tb, topo)
        self._prime_vhost(topo)

    def _prime_vhost(self, topo: Topology) -> None:
        """Attach each vhost-user port once before any trial: OVS builds a
        port's memory pool (and enables its queues) on the first
        attachment, which took over 5 s on a loaded 2-core host (the first
        trial's sender stalled). A short turnout-gen ``rx`` per port, then a
        command on ovs-vswitchd's control socket, which answers once its
        main thread is done."""
        from ..measure.gen import find_gen

        vhost = [p for p in topo.ports if p.kind is PortKind.VHOST_USER]
        gen = find_gen(allow_pygen=False)
        if not vhost or not gen:
            return
        assert self.tb is not None
        # on its host (the testbed maps this checkout's turnout-gen to the host's copy)
        procs = [self.tb.spawn([*gen, "rx", "--port", f"{PortKind.VHOST_USER}:{p.socket}",
                                "--duration-s", "1", "--wait-peer-s", "60"],
                               netns=None if self.host.is_local else topo.ns,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                 for p in vhost]
        try:
            for pr in procs:
                pr.wait(timeout=90)
        except subprocess.TimeoutExpired as e:
            raise SutError("OVS-DPDK's vhost-user ports did not come up within 90 s") from e
        finally:
            for pr in procs:
                if pr.poll() is None:
                    pr.kill()
                    pr.wait()
        self.appctl("version", timeout_s=60)

    def port_added(self, p: SutPort) -> None:
        """OVS serves a ``dpdkvhostuser`` port's socket in its run directory
        under the interface's name; the scenario's socket path links to it."""
        if p.kind is not PortKind.VHOST_USER:
            return
        real = self.dir / self.iface_of(p)
        deadline = time.monotonic() + 15
        while not self.host.exists(real):
            if time.monotonic() > deadline:
                raise SutError(f"OVS did not create the vhost-user socket {real}")
            time.sleep(0.05)
        self.host.symlink(real, p.socket)

    def teardown(self) -> None:
        super().teardown()
        if self.tb is not None and getattr(self, "prefix", None):
            self.host.rmtree(f"/var/run/dpdk/{self.prefix}")
