"""A remote campaign (``location = "remote"``): the tester on one host, the
switch and its VNFs on another, joined by the campaign's wires, all driven
over SSH from this machine (docs/bench.md, "Across hosts").

``RemoteSetup`` checks every host before anything starts (``preflight``:
reachable, the key accepted, the host key known, the commands the bench
runs, the wires' interfaces, the CPUs the layout names, root or sudo, the
builds), then puts the same builds on each (``prepare``: this checkout's
turnoutd and turnout-gen by SHA-256, copied or found) and starts each
host's agent. ``RemoteBed`` is the testbed of one session: it hands the
scenario builder the wires instead of veths, and starts every process on
the host whose "namespace" (``@HOST``) it is given, with the host's copy of
each build. ``RemoteMeasurer`` fails a trial whose host dropped off, and
says which latency mode its figures come from.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
import secrets
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from ..campaign.layout import Layout, LayoutError, plan
from ..measure.cost import cpu_list
from ..measure.counts import TrialCounts
from ..measure.cpu import CpuSample, CpuSampler
from ..scenarios import Point, Unsupported
from ..testbed.state import HUGEPAGE_LOCK, NR_HUGEPAGES, HugepageHold, _hugepage_pool
from ..testbed.testbed import Veth
from .base import HostError, HostLost, HostProc
from .config import HostSpec, RemoteSpec
from .ssh import SshHost

if TYPE_CHECKING:
    from ..campaign.spec import CampaignSpec
    from ..measure.gen import GenMeasurer, Stream
    from ..sut.base import SutAdapter

__all__ = ["RemoteBed", "RemoteCpuSampler", "RemoteMeasurer", "RemoteSetup", "latency_mode",
           "sha256_file"]

#: scenarios a remote campaign runs, and the wires each needs (the tester's
#: ports on the wires; VNF ports and the virtual endpoints the tester drives
#: on the SUT's host)
REMOTE_SCENARIOS = {"p2p": 2, "loopback": 2, "density": 2, "p2v": 1, "v2p": 1, "rtt": 1,
                    "v2v": 0, "nvsn": 0}
#: why the other scenarios do not run across hosts
LOCAL_ONLY = {
    "overlay": "the overlay scenario simulates two hosts with namespaces on this machine",
    "rule_update": "the rule update reads the destinations' counters in namespaces of this "
                   "machine",
    "openflow": "the openflow scenario's rule sets go in with ovs-ofctl from this machine's "
                "files, and its mirror ports are namespaces here",
}
#: commands the bench runs on every host, and the package that has them
COMMANDS = {"sh": "dash", "env": "coreutils", "mkdir": "coreutils", "rm": "coreutils",
            "cat": "coreutils", "ln": "coreutils", "uname": "coreutils", "ip": "iproute2",
            "taskset": "util-linux"}
#: net_device flag of a promiscuous NIC (/sys/class/net/IFACE/flags)
IFF_PROMISC = 0x100
#: one-way latency from a sender and a receiver on one host: one clock, exact
SAME_HOST = "same-host"
#: a sender and a receiver on two hosts: their CLOCK_MONOTONIC are not comparable
CROSS_HOST = "cross-host"


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def host_of(ns: str | None) -> str:
    """The host a remote "namespace" (``@HOST``) names."""
    if not ns or not ns.startswith("@"):
        raise HostError(f"not a remote host reference: {ns!r}")
    return ns[1:]


def latency_mode(streams: Sequence[Stream]) -> str:
    """``same-host`` when every stream is sent and received on one host (one
    clock: one-way latency is exact), else ``cross-host``."""
    return SAME_HOST if all(s.tx_ns == s.rx_ns for s in streams) else CROSS_HOST


@dataclass
class Build:
    """One local build and where each host has it."""

    name: str  # turnoutd | turnout-gen
    local: str
    sha256: str
    version: str = ""
    #: host -> (path on that host, "copied" | "found" | "given")
    on: dict[str, tuple[str, str]] = field(default_factory=dict)

    def remote_path(self, spec: HostSpec) -> str:
        """Where the host has it: the path the campaign gives, else the
        install directory's copy named by the build's hash."""
        given = spec.turnoutd if self.name == "turnoutd" else spec.turnout_gen
        return given or posixpath.join(spec.install_dir, self.sha256[:16], self.name)


#: the SUT host agent's undo scope of the campaign's hugepage hold
HOLD_SCOPE = "hugepage-hold"


class RemoteHugepageHold(HugepageHold):
    """The campaign's hugepages on the SUT's host (HugepageHold there):
    lent to each session's testbed in turn, so testpmd's and OVS-DPDK's
    gigabyte is not handed back to that host's kernel, and to its
    hypervisor if it is a VM with free page reporting, between runs. Each
    growth is in the agent's undo journal under its own scope, given back
    at the campaign's end (``close``) or, if the controller is gone, by
    the agent."""

    def __init__(self, host: SshHost) -> None:
        super().__init__()
        self.host = host

    def _pool(self) -> tuple[int, int]:
        r = self.host.run(["grep", "^HugePages_", "/proc/meminfo"], check=False)
        return _hugepage_pool(r.stdout)

    def _grow(self, extra: int) -> bool:
        # Added and given back under the lock of every reservation
        # (testbed/state.py: HUGEPAGE_LOCK), and only what was added: other
        # runs may reserve on the same host meanwhile. A short reservation
        # gives back what it got, compacts memory and tries again.
        nr = NR_HUGEPAGES
        lock = ["flock", HUGEPAGE_LOCK, "sh", "-c"]
        add = (f"p=$(cat {nr}); echo $((p + {extra})) > {nr}; g=$(($(cat {nr}) - p)); "
               f"[ $g -ge {extra} ] || echo $(($(cat {nr}) - g)) > {nr}; echo $g")
        deadline = time.monotonic() + 30
        while int(self.host.run([*lock, add]).stdout.strip() or 0) < extra:
            if time.monotonic() >= deadline:
                return False
            self.host.run(["sh", "-c", "echo 1 > /proc/sys/vm/compact_memory"], check=False)
            time.sleep(0.2)
        self.host.undo_later(HOLD_SCOPE, {"run": [
            *lock, f"p=$(cat {nr}); echo $((p > {extra} ? p - {extra} : 0)) > {nr}"]})
        return True

    def close(self) -> None:
        if self.pages and not self.host.lost and self.host._agent is not None:
            self.host.undo(HOLD_SCOPE)
        self.pages = self.lent = 0


class RemoteSetup:
    """The hosts of a remote campaign, from pre-flight to the last bye."""

    def __init__(self, spec: CampaignSpec, gen: list[str], turnoutd: list[str],
                 logs: Path | None = None) -> None:
        assert spec.remote is not None
        self.spec = spec
        self.rs: RemoteSpec = spec.remote
        self.token = f"tr{os.getpid()}{secrets.token_hex(4)}"
        self.hosts = {n: SshHost(h, self.token) for n, h in self.rs.hosts.items()}
        self.facts: dict[str, dict[str, Any]] = {}
        self.clock: dict[str, tuple[int, int]] = {}
        self.real_offset_ns: dict[str, int] = {}
        #: the CPUs each host's agent runs on
        self.agent_cpus: dict[str, str] = {}
        self.warnings: list[str] = []
        self.builds: list[Build] = []
        #: SUT name -> what it needs on the SUT's host (SutAdapter.requires)
        self.sut_needs: dict[str, list[tuple[str, str]]] = {}
        #: where the SUT host's agent keeps the isolation's restore file ("": none)
        self.isolated = ""
        #: the campaign's hugepages on the SUT's host, lent to each session
        self.hugepages = RemoteHugepageHold(self.hosts[self.rs.sut_host])
        self._gen = gen
        self._turnoutd = turnoutd
        self._runs = 0
        #: where each session's logs from the hosts are kept (None: not kept)
        self.logs_dir = logs / f"{spec.name}-{self.token}" if logs is not None else None

    # ------------------------------------------------------------ pre-flight
    def _needs(self, host: HostSpec) -> list[Build]:
        """The builds this host runs: turnout-gen for testers and VNFs,
        every turnoutd build of the campaign on the SUT's host."""
        return [b for b in self.builds
                if (b.name == "turnout-gen" and ("tester" in host.roles or "sut" in host.roles))
                or (b.name == "turnoutd" and "sut" in host.roles)]

    def _layout_problem(self, host: HostSpec, cpus: list[int]) -> str:
        try:
            lay = self.layout_of(host, cpus)
        except LayoutError as e:
            return f"its CPUs {cpus} cannot hold the layout: {e}"
        want = set()
        if "tester" in host.roles:
            want |= set(lay.tester)
        if "sut" in host.roles:
            want |= set(lay.sut) | set(lay.vnf)
        extra = sorted(want - set(cpus))
        if extra:
            return (f"the campaign's layout names CPU {', '.join(map(str, extra))}, which it "
                    f"does not have (CPUs {','.join(map(str, cpus))})")
        return ""

    def layout_of(self, host: HostSpec, cpus: list[int]) -> Layout:
        """The same rule as locally (campaign/layout.py), applied to this
        host's CPUs: ``layout = "auto"`` plans them, else ``tester_cpu`` and
        ``sut_cpus`` name them (VNFs with the tester's core)."""
        if self.spec.layout == "auto":
            return plan(cpus, self.spec.sut_cores)
        tester = () if self.spec.tester_cpu is None else (self.spec.tester_cpu,)
        return Layout(tester, tuple(cpu_list(self.spec.sut_cpus)), tester)

    def preflight(self) -> list[str]:
        """Check every host; return the problems (each names its host). An
        empty list: the campaign may start. Starts nothing anywhere."""
        problems: list[str] = []
        if not self._gen or self._gen[-1].endswith("pygen"):
            return ["this machine: a remote campaign needs the built turnout-gen "
                    "(cargo build --release -p turnout-gen); the Python tester is local only"]
        self.builds = []
        for name, cmd in (("turnout-gen", self._gen), *(("turnoutd", [t]) for t in
                                                         dict.fromkeys(self._turnoutd))):
            path = cmd[-1]
            if not Path(path).exists():
                problems.append(f"this machine: {name} {path} not built")
                continue
            self.builds.append(Build(name, path, sha256_file(path), _version(path)))
        if problems:
            return problems
        self.sut_requirements()
        for name, spec in self.rs.hosts.items():
            problems += self._check_host(self.hosts[name], spec)
        for h in self.hosts.values():
            h.close()
        return problems

    def sut_requirements(self) -> dict[str, list[tuple[str, str]]]:
        """What each of the campaign's SUTs needs on the SUT's host."""
        sut_host = self.hosts[self.rs.sut_host]
        for name in self.spec.suts:
            sut = self.spec.make_sut(name)
            sut.host = sut_host  # what it needs there (its requires() may depend on it)
            self.sut_needs[name] = sut.requires()
        return self.sut_needs

    def _check_host(self, host: SshHost, spec: HostSpec) -> list[str]:
        where = host.describe()
        try:
            host.connect()
        except HostError as e:
            return [str(e)]
        wires = [w for w in self.rs.wires if spec.name in (w.tester_host, w.sut_host)]
        ifaces = [w.tester_iface if w.tester_host == spec.name else w.sut_iface for w in wires]
        needs = self._needs(spec)
        cmds = list(COMMANDS) + (["sudo"] if spec.sudo else [])
        sut_needs = sorted({w for ws in self.sut_needs.values() for w, _ in ws}) \
            if "sut" in spec.roles else []
        try:
            f = host.once({"op": "facts", "nics": ifaces, "commands": cmds,
                           "files": [b.remote_path(spec) for b in needs], "needs": sut_needs})
        except HostError as e:
            return [str(e)]
        self.facts[spec.name] = f
        out: list[str] = []
        lacking = set(f.get("needs_missing") or [])
        for sut, ws in sorted(self.sut_needs.items()) if "sut" in spec.roles else []:
            miss = [f"{w} not installed (apt {pkg})" for w, pkg in ws if w in lacking]
            if miss:
                self.warnings.append(f"{where}: SUT {sut} cannot run there: {'; '.join(miss)} "
                                     "(its cells are skipped with that reason)")
        if f["missing"]:
            out.append(f"{where}: missing packages: " + ", ".join(
                f"{c} ({COMMANDS.get(c, c)})" for c in f["missing"]))
        if int(f["euid"]) != 0 and not spec.sudo:
            out.append(f"{where}: logs in as uid {f['euid']} without sudo = true (AF_XDP, "
                       "pinning and the SUT need root)")
        for w, i in zip(wires, ifaces, strict=True):
            if not f["nics"].get(i, {}).get("exists"):
                out.append(f"{where}: interface {i} of wire {w} not found (it has: "
                           f"{', '.join(f['interfaces'])})")
        why = self._layout_problem(spec, [int(c) for c in f["cpus"]])
        if why:
            out.append(f"{where}: {why}")
        for b in needs:
            path = b.remote_path(spec)
            got = f["sha256"].get(path)
            given = spec.turnoutd if b.name == "turnoutd" else spec.turnout_gen
            if given and got is None:
                out.append(f"{where}: {b.name.replace('-', '_')} = {given}: not found")
            elif given and got != b.sha256:
                out.append(f"{where}: build mismatch: {given} has SHA-256 {str(got)[:16]}…, "
                           f"this checkout's {b.name} ({b.version}) {b.sha256[:16]}…")
            elif got == b.sha256:
                b.on[spec.name] = (path, "given" if given else "found")
        real = (int(f["real_ns"]) - time.time_ns()) / 1e9
        if abs(real) > 1.0:
            self.warnings.append(f"{where}: its wall clock is {real:+.1f} s off this machine's "
                                 "(one-way latency across hosts would need synchronised "
                                 "clocks; same-host latency does not)")
        return out

    # -------------------------------------------------------------- start-up
    def prepare(self) -> None:
        """Copy the builds a host lacks, start every agent, read the clocks.
        Call after ``preflight`` returned no problem."""
        for name, spec in self.rs.hosts.items():
            host = self.hosts[name]
            host.connect()
            for b in self._needs(spec):
                if name in b.on:
                    continue
                path = b.remote_path(spec)
                host.mkdirs(posixpath.dirname(path))
                host.put(b.local, path, mode=0o755)
                got = host.once({"op": "facts", "files": [path]})["sha256"].get(path)
                if got != b.sha256:
                    raise HostError(f"{host.describe()}: the copy of {b.name} at {path} has "
                                    f"SHA-256 {got}, not {b.sha256}")
                b.on[name] = (path, "copied")
            # off the SUT's CPUs, as the bench's own samplers are locally
            cpus = [int(c) for c in self.facts[name]["cpus"]]
            sut = set(self.layout_of(spec, cpus).sut) if "sut" in spec.roles else set()
            rest = [c for c in cpus if c not in sut]
            host.start_agent(",".join(map(str, rest)) if sut and rest else None)
            self.agent_cpus[name] = ",".join(map(str, rest if sut and rest else cpus))
            self.clock[name] = host.clock()
            self.real_offset_ns[name] = int(host.call("time")["real_ns"]) - time.time_ns()

    def recovered(self) -> list[str]:
        """What each agent put back at its start that a dead run had left."""
        return [f"host {n}: {line}" for n, h in self.hosts.items() for line in h.recovered]

    def isolate(self) -> dict[str, Any]:
        """``isolate_sut_cpus`` on the SUT's host: its agent moves what can
        move off the SUT's CPUs there (system/isolate.py), the restore file
        in that host's state dir, restored by ``unisolate`` or, on any other
        way out, by the agent itself. What moved and what could not."""
        name = self.rs.sut_host
        spec = self.rs.hosts[name]
        cpus = [int(c) for c in self.facts[name]["cpus"]]
        lay = self.layout_of(spec, cpus)
        r = self.hosts[name].call("isolate", sut_cpus=list(lay.sut), all_cpus=cpus,
                                  processes=self.spec.isolate_processes, timeout_s=120)
        self.isolated = str(r["state_dir"])
        return {**r["summary"], "host": name, "restore_file_dir": self.isolated}

    def unisolate(self) -> list[str]:
        """Put the SUT host's isolation back; the problems."""
        if not self.isolated:
            return []
        h = self.hosts[self.rs.sut_host]
        problems = [str(p) for p in h.call("unisolate", state_dir=self.isolated,
                                           timeout_s=120)["problems"]]
        self.isolated = ""
        return problems

    def close(self) -> None:
        """Give back the hugepages held, bye to every agent (each stops
        what of the run is left and undoes what is left in its journal)
        and disconnect."""
        with contextlib.suppress(Exception):  # as the byes: never skip them
            self.hugepages.close()
        for h in self.hosts.values():
            with contextlib.suppress(Exception):
                h.close()

    def __enter__(self) -> RemoteSetup:
        # SIGTERM unwinds like Ctrl-C: every session stops its processes and
        # every agent gets its bye
        with contextlib.suppress(ValueError):  # not the main thread
            self._old_term = signal.signal(signal.SIGTERM, _term)
        return self

    def __exit__(self, *exc: object) -> None:
        with _no_sigint():
            self.close()
        if getattr(self, "_old_term", None) is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGTERM, self._old_term)

    # ------------------------------------------------------------- sessions
    def unsupported(self, point: Point, sut: SutAdapter) -> str:
        """Why this cell does not run across hosts ("" when it does)."""
        if point.scenario not in REMOTE_SCENARIOS:
            why = LOCAL_ONLY.get(point.scenario, "")
            return (f"{point.scenario}: not with location = remote ({why}; across hosts: "
                    f"{', '.join(REMOTE_SCENARIOS)})" if why else
                    f"{point.scenario}: not with location = remote (across hosts: "
                    f"{', '.join(REMOTE_SCENARIOS)})")
        if self.spec.vnf == "qemu" and point.vnfs > 0:
            return ("the QEMU VNF: not with location = remote (its image, KVM and vhost-user "
                    "sockets are this machine's)")
        need = self.wires_needed(point)
        if len(self.rs.wires) < need:
            return (f"{point.scenario} needs {need} wires; campaign.wires has "
                    f"{len(self.rs.wires)}")
        if point.direction == "bi" and self.cross_host(point):
            return ("bidirectional with the two ends on two hosts: each end's port would be "
                    "opened by two processes (the sender of one stream, the receiver of the "
                    "other; turnout-gen's txrx --bidir needs both ends on one host)")
        return self.frame_problem(point)

    def cross_host(self, point: Point) -> bool:
        """Whether a point's streams are sent on one host and received on
        another (its latency is then not taken: ``latency_mode``)."""
        if point.scenario in ("p2v", "v2p"):
            return True
        ends = {w.tester_host for w in self.rs.wires[:self.wires_needed(point)]}
        return point.scenario in ("p2p", "density", "loopback") and len(ends) > 1

    def wires_needed(self, point: Point) -> int:
        """The wires a point's scenario uses (the first ones of campaign.wires)."""
        return REMOTE_SCENARIOS.get(point.scenario, 2)

    def place(self, s: Stream, k: int, layout: Layout) -> None:
        """A stream's processes on the SUT's host (the virtual endpoints the
        tester drives: v2v, NvsN, a p2v receiver) take the VNFs' CPUs there,
        as the tester's take the tester's on a tester host."""
        sut = "@" + self.rs.sut_host
        vnf = layout.vnf_cpu(k) if layout.vnf else None
        if s.tx_ns == sut:
            s.tx_cpu = vnf
        if s.rx_ns == sut:
            s.rx_cpu = vnf

    def frame_problem(self, point: Point) -> str:
        """A frame larger than a wire's MTU carries (layer 2: MTU + 14)."""
        for w in self.rs.wires[:self.wires_needed(point)]:
            for h, i in ((w.tester_host, w.tester_iface), (w.sut_host, w.sut_iface)):
                mtu = int(self.facts.get(h, {}).get("nics", {}).get(i, {}).get("mtu") or 0)
                if mtu and point.frame_size_b > mtu + 14:
                    return (f"{point.frame_size_b} B frames do not fit {h}:{i} (MTU {mtu}: "
                            f"frames up to {mtu + 14} B)")
        return ""

    def layout(self) -> Layout:
        """The session's cores: the tester's from the tester host's layout,
        the SUT's and the VNFs' from the SUT host's (the same rule on each)."""
        t = self.rs.tester_hosts[0]
        s = self.rs.sut_host
        lt = self.layout_of(self.rs.hosts[t], [int(c) for c in self.facts[t]["cpus"]])
        ls = self.layout_of(self.rs.hosts[s], [int(c) for c in self.facts[s]["cpus"]])
        return RemoteLayout(lt.tester, ls.sut, ls.vnf,
                            f"tester on {t} CPUs {','.join(map(str, lt.tester))}; SUT on {s} "
                            f"CPUs {ls.sut_cpus}, VNFs on {s} CPUs "
                            f"{','.join(map(str, ls.vnf))}")

    def bed(self) -> RemoteBed:
        self._runs += 1
        return RemoteBed(self, self._runs)

    def check_alive(self) -> None:
        """Raise HostLost for the first host that does not answer."""
        for h in self.hosts.values():
            h.call("ping", timeout_s=min(5.0, h.spec.grace_s))

    def summary(self) -> dict[str, Any]:
        """Every host as the results store it (the report's setup section)."""
        out: dict[str, Any] = {}
        for name, spec in self.rs.hosts.items():
            f = self.facts.get(name, {})
            off, err = self.clock.get(name, (0, 0))
            out[name] = {
                "ssh": spec.target(), "roles": list(spec.roles), "sudo": spec.sudo,
                "hostname": f.get("hostname"), "kernel": f.get("kernel"),
                "cpu_model": f.get("cpu_model"), "cpus": f.get("cpus"),
                "online": f.get("online"), "isolated": f.get("isolated"),
                "governor": f.get("governor"), "smt": f.get("smt"), "thp": f.get("thp"),
                "load": f.get("load"), "python": f.get("python"), "nics": f.get("nics"),
                "wires": [str(w) for w in self.rs.wires if name in (w.tester_host,
                                                                     w.sut_host)],
                "builds": {b.name + ("" if b.name == "turnout-gen" else f" {b.local}"):
                           {"path": b.on[name][0], "how": b.on[name][1], "sha256": b.sha256,
                            "version": b.version}
                           for b in self.builds if name in b.on},
                "install_dir": spec.install_dir, "agent_cpus": self.agent_cpus.get(name),
                "clock": {"monotonic_offset_ns": off, "monotonic_error_ns": err,
                          "wall_offset_ns": self.real_offset_ns.get(name)},
            }
        return out

    def tools(self) -> dict[str, str]:
        """Per host, the builds it runs (the resume key: never mix builds)."""
        return {f"remote:{h}:{b.name}": f"{b.sha256[:16]} {b.on[h][0]}"
                for b in self.builds for h in sorted(b.on)}


def _term(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


@contextlib.contextmanager
def _no_sigint() -> Iterator[None]:
    """Ctrl-C is ignored while the hosts are being cleaned up (a half-done
    clean-up is worse)."""
    old = None
    with contextlib.suppress(ValueError):
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        if old is not None:
            with contextlib.suppress(ValueError):
                signal.signal(signal.SIGINT, old)


@dataclass(frozen=True)
class RemoteLayout(Layout):
    """A layout over two hosts: the VNFs run on the SUT's host, so they never
    share a core with the tester (whatever the CPU numbers say)."""

    @property
    def vnfs_share_tester(self) -> bool:
        return False


def _version(path: str) -> str:
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return (r.stdout or r.stderr).strip().splitlines()[0] if (r.stdout or r.stderr) else ""


class RemoteBed:
    """The testbed of one remote session (what ``Testbed`` is locally): the
    scenario builder and the SUT adapters ask it for the same things, and
    it answers with the campaign's hosts and wires.

    Its "namespaces" are hosts (``@HOST``): the tester's endpoints on a
    tester host, the SUT, its VNFs and the virtual endpoints the tester
    drives (``virtual_home``: memif and vhost-user are shared memory) on
    the SUT's host. A "veth" (``veth``) between a tester host and the SUT's
    is the next wire; between two tester endpoints, two wires joined on the
    SUT's host by a tc redirect (the bare wire across hosts); between two
    endpoints on the SUT's host, a veth pair made there. Every change it
    makes to a host (veths, bridges, redirects, RPS masks, hugepages and
    their mount, directories) is first written to that host's agent's undo
    journal (hosts/agent.py), undone at ``close`` and, if the controller is
    gone, by the agent itself."""

    def __init__(self, setup: RemoteSetup, n: int) -> None:
        self.setup = setup
        self.rs = setup.rs
        #: the SUT's host: the adapters write its config and talk to it here
        self.host = setup.hosts[self.rs.sut_host]
        spec = self.rs.hosts[self.rs.sut_host]
        self.workdir = PurePosixPath(spec.install_dir) / f"run-{setup.token[-8:]}-{n}"
        #: names this session gives on the hosts (interfaces, DPDK file prefixes)
        self.prefix = f"t{setup.token[-4:]}{n}"
        self._names = 0
        self._free = list(self.rs.wires)
        self.used: list[str] = []
        self._procs: list[tuple[str, HostProc]] = []
        #: host -> what ran there (program, role, CPUs), for the SUT's config
        self.ran: dict[str, list[str]] = {}
        self.notes: list[str] = []
        self._dirs: set[str] = set()
        #: hugepages borrowed from the campaign's hold (reserve_hugepages)
        self._borrowed = 0
        #: the hosts whose undo journal holds changes of this session
        self._touched: set[str] = set()

    def __enter__(self) -> RemoteBed:
        self.host.mkdirs(str(self.workdir))
        return self

    def __exit__(self, *exc: object) -> None:
        with _no_sigint():
            self.close()

    @property
    def sut_ns(self) -> str:
        return "@" + self.rs.sut_host

    # -------------------------------------------------------- what build asks
    def namespace(self, role: str) -> str:
        """A role's "namespace": the host it runs on (``@HOST``)."""
        if role == "tester":
            return "@" + self.rs.tester_hosts[0]
        return self.sut_ns  # the SUT, its VNFs, their sinks

    def virtual_home(self, ns: str) -> str:
        """Where a virtual endpoint the tester drives runs: on the VNFs' host
        (the SUT's: memif and vhost-user are shared memory with the switch)."""
        return "@" + self.rs.vnf_host()

    def ifname(self, tag: str = "") -> str:
        """A name for an interface this session makes on the SUT's host."""
        self._names += 1
        name = f"{self.prefix}{tag}{self._names}"
        if len(name) > 15:
            raise HostError(f"interface name {name!r} longer than 15 characters")
        return name

    def undo_later(self, host: str, action: dict[str, Any]) -> None:
        """Journal how to undo a change on ``host`` before making it."""
        self._touched.add(host)
        self.setup.hosts[host].undo_later(self.workdir.name, action)

    def _wire(self) -> Any:
        if not self._free:
            raise Unsupported(f"the scenario needs a wire to the SUT where campaign.wires has "
                              f"none left ({len(self.rs.wires)} wires)")
        w = self._free.pop(0)
        self.used.append(str(w))
        # whatever XDP program a SUT or the tester left on a wire's NIC is
        # gone after the session (a process killed outright leaves it), and
        # a NIC that was not promiscuous is not afterwards (DPDK's af_packet
        # PMD sets IFF_PROMISC and leaves it)
        for h, i in ((w.tester_host, w.tester_iface), (w.sut_host, w.sut_iface)):
            self.undo_later(h, {"run": ["ip", "link", "set", "dev", i, "xdp", "off"],
                                "may_fail": True})
            flags = self.setup.hosts[h].run(["cat", f"/sys/class/net/{i}/flags"],
                                            check=False).stdout.strip()
            if flags.startswith("0x") and not int(flags, 16) & IFF_PROMISC:
                self.undo_later(h, {"run": ["ip", "link", "set", "dev", i, "promisc", "off"],
                                    "may_fail": True})
        return w

    def _mac(self, host: str, iface: str) -> str:
        return str(self.setup.facts[host]["nics"][iface]["mac"])

    def veth(self, ns_a: str | None, ns_b: str | None, tag: str = "v", mtu: int = 3000) -> Veth:
        """A link between two endpoints (class doc): the next wire, two wires
        joined on the SUT's host, or a veth pair made on the SUT's host."""
        sut = self.sut_ns
        if ns_a == sut and ns_b == sut:
            return self._sut_veth(tag, mtu)
        if sut in (ns_a, ns_b):
            w = self._wire()
            t = (w.tester_iface, "@" + w.tester_host, self._mac(w.tester_host, w.tester_iface))
            u = (w.sut_iface, sut, self._mac(w.sut_host, w.sut_iface))
            a, b = (t, u) if ns_b == sut else (u, t)
            return Veth(a[0], b[0], a[1], b[1], a[2], b[2])
        # two tester endpoints (the bare wire): two wires, joined on the
        # SUT's host by a redirect each way at their ingress
        w1, w2 = self._wire(), self._wire()
        for x, y in ((w1.sut_iface, w2.sut_iface), (w2.sut_iface, w1.sut_iface)):
            self.undo_later(self.rs.sut_host, {"run": ["tc", "qdisc", "del", "dev", x,
                                                       "clsact"], "may_fail": True})
            self.host.run(["tc", "qdisc", "add", "dev", x, "clsact"])
            self.host.run(["tc", "filter", "add", "dev", x, "ingress", "protocol", "all", "u32",
                           "match", "u32", "0", "0", "action", "mirred", "egress", "redirect",
                           "dev", y])
        note = (f"bare wire: {w1.sut_host}:{w1.sut_iface} and {w2.sut_iface} joined by tc "
                "mirred redirects at their ingress (no switch)")
        if note not in self.notes:
            self.notes.append(note)
        return Veth(w1.tester_iface, w2.tester_iface, "@" + w1.tester_host,
                    "@" + w2.tester_host, self._mac(w1.tester_host, w1.tester_iface),
                    self._mac(w2.tester_host, w2.tester_iface))

    def _sut_veth(self, tag: str, mtu: int) -> Veth:
        """A veth pair on the SUT's host (a VNF's port: end a the VNF's, end
        b the switch's), both in the host's own network namespace."""
        a, b = self.ifname(tag), self.ifname(tag)
        self.undo_later(self.rs.sut_host, {"run": ["ip", "link", "del", a], "may_fail": True})
        r = self.host.run(["sh", "-c", f"ip link add {a} mtu {mtu} type veth peer name {b} mtu "
                          f"{mtu} && ip link set {a} up && ip link set {b} up && "
                          f"cat /sys/class/net/{a}/address /sys/class/net/{b}/address"])
        macs = r.stdout.split()
        return Veth(a, b, self.sut_ns, self.sut_ns, macs[0], macs[1])

    def bridge(self, ns: str | None, members: Sequence[str], tag: str = "br") -> str:
        """A Linux bridge on the SUT's host (STP off, forward delay 0) with
        these members (Testbed.bridge)."""
        name = self.ifname(tag)
        self.undo_later(self.rs.sut_host, {"run": ["ip", "link", "del", name], "may_fail": True})
        script = [f"ip link add {name} type bridge stp_state 0 forward_delay 0"]
        script += [f"ip link set {m} master {name} && ip link set {m} up" for m in members]
        script.append(f"ip link set {name} up")
        self.host.run(["sh", "-c", " && ".join(script)])
        return name

    def fdb_static(self, ns: str | None, mac: str, port: str) -> None:
        self.run(["bridge", "fdb", "replace", mac, "dev", port, "master", "static"], netns=ns)

    def steer_rps(self, ns: str | None, iface: str, cpus: str) -> str:
        """RPS of a SUT-side interface to the SUT's CPUs, as locally
        (Testbed.steer_rps): every receive queue's mask, the old one
        journalled first. Returns the mask written ("" when the NIC has none)."""
        mask = f"{sum(1 << c for c in set(cpu_list(cpus))):x}"
        host = host_of(ns) if ns else self.rs.sut_host
        h = self.setup.hosts[host]
        r = h.run(["sh", "-c", f"for q in /sys/class/net/{iface}/queues/rx-*/rps_cpus; do "
                   "[ -e \"$q\" ] && echo \"$q $(cat $q)\"; done"], check=False)
        queues = [ln.split() for ln in r.stdout.splitlines() if len(ln.split()) == 2]
        if not queues:
            note = f"RPS: {host}:{iface} has no rps_cpus (left as the host has it)"
            if note not in self.notes:
                self.notes.append(note)
            return ""
        for path, old in queues:
            self.undo_later(host, {"write": path, "value": old})
        h.run(["sh", "-c", " && ".join(f"echo {mask} > {path}" for path, _ in queues)])
        return mask

    def reserve_hugepages(self, pages: int) -> PurePosixPath:
        """2 MiB hugepages on the SUT's host, borrowed from the campaign's
        hold there (RemoteHugepageHold, back to it at close), and a
        hugetlbfs mount of them (undone at close)."""
        if not self.setup.hugepages.borrow(pages):
            raise HostError(f"{self.host.describe()}: asked for {pages} hugepages, the kernel "
                            "would not give them in 30 s")
        self._borrowed += pages
        mnt = self.directory("huge")
        self.undo_later(self.rs.sut_host, {"run": ["umount", "-l", str(mnt)], "may_fail": True})
        self.host.run(["mount", "-t", "hugetlbfs", "-o", "pagesize=2M", "nodev", str(mnt)])
        return mnt

    def remember(self, kind: str, item: Any) -> None:
        """What the local testbed records in its state file to remove at
        close (Testbed.remember), journalled on the SUT's host instead:
        ``dirs`` (a directory), ``ovs`` ([db socket, bridge]: del-br)."""
        if kind == "dirs":
            self.undo_later(self.rs.sut_host, {"rmtree": str(item)})
        elif kind == "ovs":
            db, br = item
            self.undo_later(self.rs.sut_host, {"run": [
                "ovs-vsctl", f"--db=unix:{db}", "--timeout=5", "--if-exists", "del-br", br],
                "may_fail": True})
        else:
            raise HostError(f"remote testbed: cannot remember {kind!r}")

    def forget_object(self, kind: str, item: Any) -> None:
        """Removed already (its undo may run again: harmless)."""
        return None

    def allowed_cpus(self) -> list[int]:
        """The CPUs the bench may use on the SUT's host (its pre-flight facts)."""
        return [int(c) for c in self.setup.facts[self.rs.sut_host]["cpus"]]

    def directory(self, name: str) -> PurePosixPath:
        d = self.workdir / name
        if str(d) not in self._dirs:
            self.host.mkdirs(str(d))
            self._dirs.add(str(d))
        return d

    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True, env: dict[str, str] | None = None
            ) -> subprocess.CompletedProcess[str]:
        """A command on the host ``netns`` names (``@HOST``; the SUT's when None)."""
        h = self.setup.hosts[host_of(netns)] if netns else self.host
        return h.run(cmd, timeout_s=timeout_s, check=check, env=env)

    # ---------------------------------------------------------------- procs
    def _mapped(self, host: str, cmd: Sequence[str]) -> list[str]:
        """The command with every local build replaced by the host's copy."""
        paths = {b.local: b.on[host][0] for b in self.setup.builds if host in b.on}
        return [paths.get(str(c), str(c)) for c in cmd]

    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              cgroup: Any = None, stdout: Any = subprocess.PIPE, stderr: Any = subprocess.PIPE,
              env: dict[str, str] | None = None, stdin: Any = None,
              log: str | PurePosixPath | None = None) -> HostProc:
        """Start ``cmd`` on the host ``netns`` names (``@HOST``; the SUT's
        host when None). ``env``: the variables it sets over this process's
        environment (a full environment as Testbed.spawn takes: only what
        differs goes to the host); ``stdin`` subprocess.PIPE: a pipe to it."""
        name = host_of(netns) if netns else self.rs.sut_host
        full = self._mapped(name, cmd)
        extra = {k: v for k, v in (env or {}).items() if os.environ.get(k) != v}
        p = self.setup.hosts[name].spawn(full, cpus=cpus, log=log, env=extra or None,
                                         stdin=stdin == subprocess.PIPE)
        self._procs.append((name, p))
        return p

    def record(self, host: str, what: str) -> None:
        self.ran.setdefault(host, [])
        if what not in self.ran[host]:
            self.ran[host].append(what)

    def stop(self, p: HostProc, timeout_s: float = 3.0) -> None:
        """SIGTERM, then SIGKILL; a host that dropped off is left to its agent."""
        try:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=timeout_s)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=timeout_s)
        except HostLost:
            pass

    def forget(self, pid: int) -> None:
        return None

    def close(self) -> None:
        """Stop every process of the session, check each host has none of
        the run left (the agent stops stragglers), undo the session's
        changes on every host, remove the run directory."""
        for _, p in reversed(self._procs):
            self.stop(p)
        for h in self.setup.hosts.values():
            if h.lost or h._agent is None:
                continue
            with contextlib.suppress(HostError):
                if h.call("procs")["procs"]:
                    h.call("cleanup")
        for name in sorted(self._touched):
            h = self.setup.hosts[name]
            if h.lost or h._agent is None:
                continue  # its agent undoes it when it notices the controller gone
            with contextlib.suppress(HostError):
                for why in h.undo(self.workdir.name):
                    self.notes.append(f"{name}: undo: {why}")
        self.setup.hugepages.give_back(self._borrowed)  # unmounted: free again
        self._borrowed = 0
        with contextlib.suppress(HostError):
            if not self.host.lost:
                self.fetch_logs()
                self.host.run(["rm", "-rf", "--", str(self.workdir)])

    @property
    def logs(self) -> Path | None:
        """This session's logs on this machine (None when not kept)."""
        d = self.setup.logs_dir
        return d / self.host.name / self.workdir.name if d is not None else None

    def fetch_logs(self) -> list[Path]:
        """Copy every ``*.log`` of the run directory (the SUT's) here."""
        if self.logs is None:
            return []
        out = []
        for f in self.host.files(str(self.workdir), ".log"):
            local = self.logs / posixpath.relpath(f, str(self.workdir))
            local.parent.mkdir(parents=True, exist_ok=True)
            local.write_text(self.host.read_text(f))
            out.append(local)
        return out

    def check_alive(self) -> None:
        self.setup.check_alive()

    def lost(self) -> list[str]:
        return [h.lost for h in self.setup.hosts.values() if h.lost]


class RemoteCpuSampler(CpuSampler):
    """CpuSampler over a remote host's /proc, through its agent; samples are
    stamped with this machine's CLOCK_MONOTONIC at the request's midpoint
    (the trial's window is moved to that clock: GenMeasurer.clock_shift_ns)."""

    def __init__(self, host: SshHost, pids_by_role: dict[str, list[int]],
                 every_s: float = 0.05) -> None:
        super().__init__(pids_by_role, every_s)
        self.host = host
        self.error = ""

    def _take(self) -> None:
        pids = [p for ps in self.pids_by_role.values() for p in ps]
        t0 = time.monotonic_ns()
        try:
            r = self.host.procfs("sample_threads", pids=pids)
        except HostError as e:
            self.error = str(e)
            return
        t1 = time.monotonic_ns()
        self.samples.append(((t0 + t1) // 2, {
            int(tid): CpuSample(int(v[0]), int(tid), str(v[1]), int(v[2]), int(v[3]), int(v[4]),
                                int(v[5]))
            for tid, v in r.items()}))


@dataclass
class RemoteMeasurer:
    """The session's measurer across hosts: the tester host's clock read
    before every trial (its windows moved to this machine's clock, where the
    SUT's samples are stamped), every host checked after it (a host that
    dropped off fails the trial, naming it), and the latency mode said."""

    inner: GenMeasurer
    bed: RemoteBed
    mode: str
    tester_host: str

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        self.bed.check_alive()
        off, err = self.bed.setup.hosts[self.tester_host].clock(3)
        self.inner.clock_shift_ns = off
        # senders on another host (v2v's on the SUT's, a bidirectional p2v's
        # on both): each window moved by its own host's offset
        shifts = {"@" + self.tester_host: off}
        for s in getattr(self.inner, "streams", []):
            if s.tx_ns and s.tx_ns not in shifts:
                shifts[s.tx_ns] = self.bed.setup.hosts[host_of(s.tx_ns)].clock(3)[0]
        self.inner.clock_shifts = shifts
        try:
            c = self.inner.measure(duration_s, load_total_pps)
        except Exception as e:
            if isinstance(e, KeyboardInterrupt):
                raise
            lost = self.bed.lost()
            if not lost:
                with contextlib.suppress(HostLost):
                    self.bed.check_alive()
                lost = self.bed.lost()
            if lost:
                raise HostLost("; ".join(lost)) from e
            raise
        self.bed.check_alive()
        c.extra["latency_mode"] = self.mode
        c.extra["clock"] = {"tester_host": self.tester_host, "offset_ns": off,
                            "error_ns": err}
        if self.mode == CROSS_HOST and c.latency_ns:
            c.extra["latency_why"] = ("sender and receiver on two hosts: their "
                                      "CLOCK_MONOTONIC are not comparable; latency not taken")
            c.latency_ns = {}
            c.latency_cdf = []
            c.jitter_ns = None
        return c

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def ran_on(bed: RemoteBed, streams: Sequence[Stream], layout: Layout, sut_name: str,
           helpers: int, plan_tasks: Callable[[list[Stream]], list[Any]]) -> dict[str, list[str]]:
    """What runs where in this session (stored in the SUT's config)."""
    bed.record(bed.rs.sut_host, f"{sut_name} (CPUs {layout.sut_cpus})")
    if helpers:
        bed.record(bed.rs.sut_host, f"turnout-gen fwd x{helpers} (VNF CPUs "
                                    f"{','.join(map(str, layout.vnf))})")
    for t in plan_tasks(list(streams)):
        s = t.streams[0]
        ns = s.rx_ns if t.role == "rx" else s.tx_ns
        cpu = s.rx_cpu if t.role == "rx" else s.tx_cpu
        bed.record(host_of(ns), f"turnout-gen {t.role} (tester, CPU {cpu})")
    return bed.ran


def local_name() -> str:
    return socket.gethostname()
