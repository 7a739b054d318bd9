"""A private Open vSwitch (userspace datapath) for system tests: its own
ovsdb-server and ovs-vswitchd, every file under one directory, run inside
a network namespace the caller created (/work/shared/PEERS.md, "Open
vSwitch without systemd"). Used by osken_suite.py and test_faucet.py.

Bridges are ``datapath_type=netdev`` with ``fail_mode=secure`` and
OpenFlow 1.3; kernel interfaces are added as ``system`` ports (OVS reads
and writes them with its netdev-linux sockets; no kernel module). Both
processes are ours and are stopped by PID; ``stop`` is safe to call at
any point of a failed start.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from harness import stop_pid, wait_for

SCHEMA = "/usr/share/openvswitch/vswitch.ovsschema"
TOOLS = ("ovsdb-tool", "ovsdb-server", "ovs-vswitchd", "ovs-vsctl", "ovs-ofctl")


def missing() -> str | None:
    """Why a private OVS cannot run here, or None."""
    for t in TOOLS:
        if not shutil.which(t):
            return f"{t} is not installed (apt openvswitch-switch)"
    if not Path(SCHEMA).exists():
        return f"{SCHEMA} is missing (apt openvswitch-switch)"
    return None


class PrivateOvs:
    """ovsdb-server + ovs-vswitchd in namespace ``netns``, files in ``d``."""

    def __init__(self, d: Path, netns: str) -> None:
        self.dir = d
        self.netns = netns
        d.mkdir(parents=True, exist_ok=True)
        self.env = dict(os.environ)
        for k in ("OVS_RUNDIR", "OVS_LOGDIR", "OVS_DBDIR", "OVS_SYSCONFDIR"):
            self.env[k] = str(d)
        self.db = str(d / "db.sock")
        self.procs: list[subprocess.Popen] = []

    def _run(self, *cmd: str, timeout: float = 60) -> str:
        r = subprocess.run(["ip", "netns", "exec", self.netns, *cmd], capture_output=True,
                           text=True, env=self.env, timeout=timeout, check=False)
        if r.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()}")
        return r.stdout

    def vsctl(self, *args: str) -> str:
        return self._run("ovs-vsctl", f"--db=unix:{self.db}", "--timeout=60", *args, timeout=90)

    def ofctl(self, *args: str) -> str:
        return self._run("ovs-ofctl", "-O", "OpenFlow13", *args)

    def mgmt(self, bridge: str) -> str:
        """The bridge's management socket (ovs-ofctl's target)."""
        return f"unix:{self.dir}/{bridge}.mgmt"

    def _spawn(self, *cmd: str, log: str) -> subprocess.Popen:
        out = open(self.dir / log, "ab")  # noqa: SIM115 - lives with the process
        p = subprocess.Popen(["ip", "netns", "exec", self.netns, *cmd], env=self.env,
                             stdout=out, stderr=out)
        out.close()
        self.procs.append(p)
        return p

    def start(self) -> PrivateOvs:
        d = self.dir
        subprocess.run(["ovsdb-tool", "create", str(d / "conf.db"), SCHEMA], check=True,
                       capture_output=True, env=self.env)
        srv = self._spawn("ovsdb-server", str(d / "conf.db"), f"--remote=punix:{self.db}",
                          f"--pidfile={d}/ovsdb-server.pid",
                          f"--log-file={d}/ovsdb-server.log", "--no-chdir",
                          log="ovsdb-server.out")
        wait_for("ovsdb-server's socket", 30, lambda: self._alive(srv) and Path(self.db).exists())
        self.vsctl("--no-wait", "init")
        vs = self._spawn("ovs-vswitchd", f"unix:{self.db}", f"--pidfile={d}/ovs-vswitchd.pid",
                         f"--log-file={d}/ovs-vswitchd.log", "--no-chdir",
                         log="ovs-vswitchd.out")
        wait_for("ovs-vswitchd's control socket", 60,
                 lambda: self._alive(vs) and list(d.glob("ovs-vswitchd*.ctl")))
        return self

    @staticmethod
    def _alive(p: subprocess.Popen) -> bool:
        if p.poll() is not None:
            raise AssertionError(f"{p.args} exited with {p.returncode}")
        return True

    def add_bridge(self, name: str, dpid: int, ports: list[str],
                   controller: str | None = None) -> None:
        """A netdev bridge with datapath id ``dpid`` and kernel interfaces
        ``ports`` as OpenFlow ports 1, 2, ... in order."""
        self.vsctl("add-br", name, "--", "set", "bridge", name, "datapath_type=netdev",
                   "fail_mode=secure", "protocols=OpenFlow13",
                   f"other-config:datapath-id={dpid:016x}")
        for i, p in enumerate(ports, 1):
            self.vsctl("add-port", name, p, "--", "set", "interface", p, f"ofport_request={i}")
        if controller:
            self.vsctl("set-controller", name, controller)
            self.vsctl("set", "controller", name, "connection-mode=out-of-band")

    def log(self) -> str:
        p = self.dir / "ovs-vswitchd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def stop(self) -> None:
        for p in reversed(self.procs):
            stop_pid(p)
        self.procs = []
