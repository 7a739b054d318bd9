"""Helpers for turnoutd system tests: run the real daemon and DPDK testpmd
memif clients, read their counters, and always clean up (processes by PID,
sockets, /var/run/dpdk/<prefix>) — also when a test fails.

Also the OpenFlow lab (OpenflowLab, openflow_lab): turnoutd with an OpenFlow
listener in the switch namespace of threehosts.py's three hosts.

Used by python/tests/turnoutd/test_*.py and python/tests/test_ctl_system.py.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from threehosts import ThreeHosts, nx

from turnout import testpeers
from turnout.build import PROFILE, built
from turnout.ctl.client import CtlError, call

REPO = Path(__file__).resolve().parents[3]
TESTPMD = shutil.which("dpdk-testpmd")
DPDK_RUN = Path("/var/run/dpdk")


def need_built(*binaries: Path, build: str = "-p turnoutd -p turnout-gen") -> None:
    """Each of ``binaries`` built, else the test fails (or skips outside
    CI: testpeers.need) saying how to build them (``build``: cargo's
    package arguments)."""
    for b in binaries:
        testpeers.need(b.is_file(), f"{b} is not built (cargo build --release {build})")


def turnoutd_binary() -> Path:
    """$TURNOUTD, else this checkout's build (turnout.build: target/release
    unless $TURNOUT_PROFILE names another profile)."""
    env = os.environ.get("TURNOUTD")
    candidates = [Path(env)] if env else []
    candidates += [built("turnoutd")]
    for c in candidates:
        if c.is_file() and os.access(c, os.X_OK):
            return c
    raise FileNotFoundError(
        f"turnoutd is not built: run `cargo build --profile {PROFILE} -p turnoutd`"
        " (or set $TURNOUTD)"
    )


def recv_exact(s: socket.socket, n: int) -> bytes:
    """Exactly `n` bytes from a stream socket (a socket with a timeout may
    return part of them even with MSG_WAITALL); fails on EOF."""
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        assert chunk, f"connection closed after {len(buf)} of {n} bytes"
        buf += chunk
    return buf


def recv_ofp(s: socket.socket) -> bytes:
    """One whole OpenFlow message (header and body) from a controller socket."""
    hdr = recv_exact(s, 8)
    n = struct.unpack("!H", hdr[2:4])[0]
    assert n >= 8, f"OpenFlow length {n} < 8 in {hdr.hex()}"
    return hdr + recv_exact(s, n - 8)


def wait_for(what: str, timeout_s: float, cond: Callable[[], Any], every_s: float = 0.05) -> Any:
    """Polls ``cond`` until it returns something truthy; fails after ``timeout_s``."""
    end = time.monotonic() + timeout_s
    while True:
        v = cond()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(every_s)


#: one file per live test namespace, named after it and holding the pid of
#: the test process that made it: a run killed before its close (SIGKILL,
#: a restart) leaves its namespaces behind, and the next run's set-up
#: deletes them (``sweep_dead_netns``)
NS_MARKS = Path("/run/turnout-tests/netns")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def mark_netns(name: str, marks: Path = NS_MARKS) -> None:
    """Records that this process made namespace ``name``."""
    marks.mkdir(parents=True, exist_ok=True)
    (marks / name).write_text(str(os.getpid()))


def unmark_netns(name: str, marks: Path = NS_MARKS) -> None:
    (marks / name).unlink(missing_ok=True)


def sweep_dead_netns(prefix: str, marks: Path = NS_MARKS) -> list[str]:
    """Deletes the marked namespaces starting with ``prefix`` whose process
    is gone, and their marks; returns their names."""
    gone = []
    for mark in sorted(marks.glob(f"{prefix}*")) if marks.is_dir() else []:
        try:
            pid = int(mark.read_text().strip() or 0)
        except (OSError, ValueError):
            pid = 0
        if pid > 0 and _pid_alive(pid):
            continue
        subprocess.run(["ip", "netns", "del", mark.name], check=False, capture_output=True)
        mark.unlink(missing_ok=True)
        gone.append(mark.name)
    return gone


def stop_pid(proc: subprocess.Popen, sig: int = signal.SIGTERM, timeout_s: float = 5.0) -> int:
    """Signals our own child ``proc`` by PID, escalating to SIGKILL; returns its exit code."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, sig)
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.kill(proc.pid, signal.SIGKILL)
            return proc.wait(timeout=timeout_s)
        except ProcessLookupError:
            pass
    return proc.wait()


#: A JSON-RPC error answer (``code``, ``message``): the workbench's client's
RpcError = CtlError


class VethNs:
    """A namespace of the test's own (``prefix`` + PID + random) with veth
    pairs inside it (``pairs``: (switch side, tester side) names), all up,
    IPv6 off (no stray router solicitations); removed on exit."""

    def __init__(self, prefix: str, pairs: tuple[tuple[str, str], ...]) -> None:
        self.name = f"{prefix}{os.getpid()}{uuid.uuid4().hex[:6]}"
        self.pairs = pairs

    def __enter__(self) -> VethNs:
        subprocess.run(["ip", "netns", "add", self.name], check=True)
        try:
            for a, b in self.pairs:
                self.ip("link", "add", a, "type", "veth", "peer", "name", b)
                for i in (a, b):
                    self.ip("link", "set", i, "up")
            subprocess.run(["ip", "netns", "exec", self.name, "sysctl", "-qw",
                            "net.ipv6.conf.all.disable_ipv6=1"], check=True)
        except BaseException:
            self.__exit__()
            raise
        return self

    def ip(self, *args: str) -> None:
        subprocess.run(["ip", "-n", self.name, *args], check=True)

    def __exit__(self, *exc: object) -> None:
        subprocess.run(["ip", "netns", "del", self.name], check=False)


def gen_doc(out: str) -> dict[str, Any]:
    """The JSON document turnout-gen printed last in `out`."""
    lines = [x for x in out.splitlines() if x.startswith("{")]
    assert lines, f"no document from turnout-gen: {out[-500:]!r}"
    return json.loads(lines[-1])


class GenRx:
    """A ``turnout-gen rx`` process (``cmd``: its command line, with
    ``--interval-s``): its interval lines on stderr say its port is open
    and its loop runs (``wait_running``) and how many frames it has
    received (``rx_packets``); its document (tens of KiB) is read while it
    is written, and returned by ``stop``."""

    def __init__(self, cmd: list[str]) -> None:
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)
        self.running = threading.Event()
        #: frames received by the last interval line
        self.rx_packets = 0
        self._out: list[str] = []
        threading.Thread(target=self._watch, daemon=True).start()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _watch(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if line.startswith("{"):
                self.running.set()
                with suppress(ValueError):
                    self.rx_packets = int(json.loads(line).get("rx_packets", 0))

    def _read(self) -> None:
        assert self.proc.stdout is not None
        self._out.append(self.proc.stdout.read())

    def wait_running(self, timeout_s: float = 30) -> None:
        wait_for("the receiver to run", timeout_s, self.running.is_set)

    def stop(self) -> dict[str, Any]:
        """Stops it (SIGTERM, by PID) and returns its document."""
        stop_pid(self.proc)
        self._reader.join(30)
        return gen_doc("".join(self._out))


class Turnoutd:
    """A turnoutd process with its own directory, config and sockets; in the
    network namespace ``netns`` when given (``ip netns exec`` execs the
    daemon: the same PID)."""

    def __init__(self, workdir: Path, config: str, binary: Path | None = None,
                 netns: str | None = None) -> None:
        self.netns = netns
        self.dir = workdir
        self.dir.mkdir(parents=True, exist_ok=True)
        self.sock = str(self.dir / "ctl.sock")
        self.config_path = self.dir / "turnoutd.toml"
        text = config.replace("@CTL@", self.sock).replace("@DIR@", str(self.dir))
        self.config_path.write_text(text)
        self.log_path = self.dir / "turnoutd.log"
        self.binary = binary or turnoutd_binary()
        #: run the daemon under this command (e.g. ``["chrt", "-f", "1"]``)
        self.prefix: list[str] = []
        self.proc: subprocess.Popen | None = None

    def start(self) -> Turnoutd:
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._log = log
        self.proc = subprocess.Popen(
            [*self.prefix, *(["ip", "netns", "exec", self.netns] if self.netns else []),
             str(self.binary),
             "--config", str(self.config_path), "--log-level", "debug"],
            stdout=log,
            stderr=log,
        )
        try:
            wait_for("turnoutd's control socket", 10, self._ready)
        except BaseException:
            self.stop()
            raise
        return self

    def _ready(self) -> bool:
        if self.proc is not None and self.proc.poll() is not None:
            rc = self.proc.returncode
            raise AssertionError(f"turnoutd exited with {rc}: {self.log()[-800:]}")
        if not os.path.exists(self.sock):
            return False
        try:
            self.rpc("version")
            return True
        except OSError:
            return False

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def rpc(self, method: str, params: Any = None, timeout_s: float = 10.0) -> Any:
        """One call on a fresh connection, through the workbench's client
        (turnout.ctl); raises RpcError on an error answer, an OSError
        (CtlConnectionError) when turnoutd cannot be reached or hangs up."""
        return call(self.sock, method, params, timeout_s)

    def port(self, name: str) -> dict[str, Any]:
        for p in self.rpc("stats")["ports"]:
            if p["name"] == name:
                return p
        raise KeyError(name)

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        """Stops the daemon by PID; returns its exit code."""
        rc = None
        if self.proc is not None:
            rc = stop_pid(self.proc, sig)
            self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        return rc

    def __enter__(self) -> Turnoutd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class PmdCounts:
    """A testpmd port's NIC statistics (what its memif PMD received and sent).

    These, not the forward statistics, are compared with turnoutd: testpmd
    flushes its receive queues before forwarding starts, and frames read by
    that flush count in the NIC statistics only.
    """

    rx_packets: int
    rx_missed: int
    rx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_bytes: int


_NIC_STATS = re.compile(
    r"NIC statistics for port 0\s*#+\s*"
    r"RX-packets:\s*(\d+)\s+RX-missed:\s*(\d+)\s+RX-bytes:\s*(\d+).*?"
    r"TX-packets:\s*(\d+)\s+TX-errors:\s*(\d+)\s+TX-bytes:\s*(\d+)",
    re.DOTALL,
)


class Testpmd:
    """A dpdk-testpmd memif client (no hugepages, unique file prefix)."""

    __test__ = False  # not a pytest test class

    _seq = 0

    def __init__(
        self,
        workdir: Path,
        name: str,
        vdevs: list[str],
        mode: str,
        extra: list[str] | None = None,
        lcores: str = "0,1",
        main_lcore: int = 1,
        mbuf_size: int | None = None,
        auto_start: bool = True,
    ) -> None:
        if TESTPMD is None:
            raise FileNotFoundError("dpdk-testpmd is not installed (Debian package dpdk-dev)")
        Testpmd._seq += 1
        self.prefix = f"tdt{os.getpid()}x{Testpmd._seq}{name}"
        self.log_path = workdir / f"testpmd-{name}.log"
        self.name = name
        # stdbuf: testpmd's stdout is a file, so without it the answers to
        # interactive commands would only appear when it exits.
        stdbuf = shutil.which("stdbuf")
        args = [
            *([stdbuf, "-oL", "-eL"] if stdbuf else []),
            TESTPMD,
            "-l",
            lcores,
            "--main-lcore",
            str(main_lcore),
            "--no-huge",
            "-m",
            "1024",
            "--no-pci",
            f"--file-prefix={self.prefix}",
            "--log-level=pmd.net.memif:info",
        ]
        args += [f"--vdev={v}" for v in vdevs]
        args += ["--", "-i", "--total-num-mbufs=8192", f"--forward-mode={mode}"]
        if auto_start:
            args.append("--auto-start")
        if mbuf_size:
            args.append(f"--mbuf-size={mbuf_size}")
        args += extra or []
        self.args = args
        self.proc: subprocess.Popen | None = None

    @staticmethod
    def memif(
        socket_path: str, ifid: int, vdev_index: int = 0, role: str = "client", **kw: Any
    ) -> str:
        opts = {"role": role, "socket": socket_path, "socket-abstract": "no", "id": ifid, **kw}
        return f"net_memif{vdev_index}," + ",".join(f"{k}={v}" for k, v in opts.items())

    def start(self) -> Testpmd:
        log = open(self.log_path, "wb")  # noqa: SIM115 - closed in stop()
        self._log = log
        # Interactive, commands on a pipe: stop() asks for the port's final
        # counters before quitting.
        self.proc = subprocess.Popen(self.args, stdin=subprocess.PIPE, stdout=log, stderr=log)
        return self

    def command(self, line: str) -> None:
        """Sends one interactive command."""
        if self.proc is not None and self.proc.stdin is not None:
            try:
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                pass

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, settle: Callable[[], Any] | None = None) -> PmdCounts | None:
        """Stops forwarding, waits (``settle``, or one second) so the switch
        drains what is already on the rings, reads the port's final counters,
        quits and cleans up; returns the counters (None if it died before).

        Frames still on a ring when a peer quits are lost with its memory;
        that is the peer leaving, not the switch dropping, so tests wait."""
        if self.proc is not None:
            self.command("stop")
            if settle is not None:
                settle()
            else:
                time.sleep(1.0)
            self.command("show port stats 0")
            self.command("quit")
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                stop_pid(self.proc, signal.SIGINT, timeout_s=10)
            self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        self.cleanup()
        found = _NIC_STATS.findall(self.log())
        if not found:
            return None
        return PmdCounts(*(int(x) for x in found[-1]))

    def kill9(self) -> None:
        """SIGKILL, as a crash; leaves nothing behind."""
        if self.proc is not None:
            stop_pid(self.proc, signal.SIGKILL)
            self.proc = None
        if getattr(self, "_log", None) is not None:
            self._log.close()
            self._log = None
        self.cleanup()

    def cleanup(self) -> None:
        shutil.rmtree(DPDK_RUN / self.prefix, ignore_errors=True)

    def __enter__(self) -> Testpmd:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            stop_pid(self.proc, signal.SIGKILL)
            self.proc = None
        self.cleanup()


def patch_ab_config(kind: str, d: Path, cpu: str | int | None, switch: str = "",
                    af_xdp: str = "") -> str:
    """A turnoutd config (control socket ``@CTL@``) patching ports ``a`` and
    ``b`` of one kind: "memif" and "vhost-user" (their sockets in ``d``) or
    "afxdp" (veths ``swa`` and ``swb``, with the keys ``af_xdp``); ``switch``
    adds lines to ``[switch]``, ``cpu`` pins the one worker."""
    worker = f"[[workers]]\ncpu = {cpu}\n\n" if cpu is not None else ""
    if kind == "memif":
        ports = "".join(f'[[ports]]\nname = "{n}"\nkind = "memif"\nsocket = "{d}/{n}.sock"\n'
                        f"id = 0\n\n" for n in "ab")
    elif kind == "vhost-user":
        ports = "".join(f'[[ports]]\nname = "{n}"\nkind = "vhost_user"\n'
                        f'socket = "{d}/{n}.sock"\n\n' for n in "ab")
    else:
        ports = "".join(f'[[ports]]\nname = "{n}"\nkind = "af_xdp"\niface = "sw{n}"\n'
                        f"{af_xdp}\n" for n in "ab")
    return ('[switch]\ncontrol_socket = "@CTL@"\n' + switch + "\n" + worker +
            '[logic]\nname = "patch"\npairs = [["a", "b"]]\n\n' + ports)


def port_toml(name: str, sock: str, ifid: int, **kw: Any) -> str:
    lines = ["[[ports]]", f'name = "{name}"', 'kind = "memif"', f'socket = "{sock}"']
    lines.append(f"id = {ifid}")
    lines += [f"{k} = {json.dumps(v)}" for k, v in kw.items()]
    return "\n".join(lines) + "\n"


class OpenflowLab:
    """turnoutd running the flows logic over three af_packet ports in the
    switch namespace ``sw`` of a ThreeHosts lab, listening for OpenFlow on
    127.0.0.1:``port`` inside that namespace (``target``) and on
    ``tmp``/of.sock."""

    def __init__(self, tmp: Path, prefix: str, macs: dict[int, str]) -> None:
        self.tmp = tmp
        self.net = ThreeHosts(prefix, macs)
        self.daemon: Turnoutd | None = None
        self.sw = ""
        self.target = ""
        self.port = 0
        self.hosts: dict[int, str] = {}

    def ofctl(self, cmd: str, *args: str, check: bool = True,
              opts: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
        """``ovs-ofctl -O OpenFlow13 [opts] cmd target args`` in the switch namespace."""
        return nx(self.sw, "ovs-ofctl", "-O", "OpenFlow13", *opts, cmd, self.target, *args,
                  check=check)

    def close(self) -> None:
        if self.daemon is not None:
            self.daemon.stop()
        self.net.close()


@contextmanager
def openflow_lab(tmp: Path, prefix: str, macs: dict[int, str],
                 switch_extra: str = "") -> Iterator[OpenflowLab]:
    """An OpenflowLab with namespaces named ``prefix``*, host MACs ``macs``
    (1..3), more [switch] lines ``switch_extra`` and a TCP port drawn at
    random; turnoutd is stopped by PID and the namespaces deleted on
    leaving, also after a failed set-up. Needs root,
    ovs-ofctl and a built turnoutd (missing peers: testpeers' skip or fail;
    no binary: the test fails)."""
    import pytest  # only here: soak.py and the benches use harness without it

    testpeers.need_root()
    testpeers.need(shutil.which("ovs-ofctl"), "ovs-ofctl is not installed (openvswitch-switch)")
    try:
        turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    lab = OpenflowLab(tmp, prefix, macs)
    try:
        lab.net.setup()
        lab.sw, lab.hosts = lab.net.sw, lab.net.hosts
        lab.port = random.randint(20000, 60000)
        lab.target = f"tcp:127.0.0.1:{lab.port}"
        unix = tmp / "of.sock"
        config = ThreeHosts.config(
            f'openflow = ["ptcp:{lab.port}", "punix:{unix}"]\n{switch_extra}')
        lab.daemon = Turnoutd(tmp / "sw", config, netns=lab.sw).start()
        yield lab
    finally:
        lab.close()
