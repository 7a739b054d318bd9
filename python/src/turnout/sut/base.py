"""The SUT adapter interface and the topology a scenario hands to it."""

from __future__ import annotations

import os
import shutil
import subprocess
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from ..hosts.base import Host, HostError, LocalHost
from ..measure.cost import CostSample
from ..ofrules import RuleSet
from ..portkind import VIRTUAL, PortKind
from ..testbed import Testbed
from .options import SutOptions

if TYPE_CHECKING:
    from .overlay_host import OverlayHost

__all__ = ["SutAdapter", "SutError", "SutPort", "Topology", "command_version", "off_sut_cpus"]


class SutError(RuntimeError):
    """Setting up or running a SUT failed."""


@dataclass
class SutPort:
    """A port of the SUT. ``kind`` is ``veth`` (``iface`` in the SUT's
    namespace: the SUT opens it as its options say), ``PortKind.MEMIF`` (the
    SUT is the server at ``socket``) or ``PortKind.VHOST_USER`` (the SUT is
    the vhost-user backend serving ``socket``).
    ``macs`` are the MAC addresses reachable behind it (for static FDBs)."""

    name: str
    kind: PortKind | Literal["veth"]
    iface: str = ""
    socket: str = ""
    macs: list[str] = field(default_factory=list)
    idle: bool = False

    def __post_init__(self) -> None:
        # one spelling whatever the caller wrote ("vhost-user" is vhost_user);
        # a kind no SUT port can be is an error, never a veth by default
        if self.kind != "veth":
            self.kind = PortKind.parse(self.kind, VIRTUAL)


@dataclass
class Topology:
    """What the SUT must do: ports, and the pairs it cross-connects (both ways)."""

    ns: str  # the SUT's network namespace
    ports: list[SutPort]
    xconnects: list[tuple[str, str]]
    cpus: str = "1"  # CPUs the SUT may use (taskset list)
    #: the openflow scenario: the rule set the SUT gets through ``ovs-ofctl
    #: -O OpenFlow13 add-flows`` instead of the cross-connects (OpenFlow port
    #: N = ``ports[N - 1]``)
    openflow: RuleSet | None = None

    def port(self, name: str) -> SutPort:
        for p in self.ports:
            if p.name == name:
                return p
        raise KeyError(name)


def off_sut_cpus(sut_cpus: str, allowed: set[int] | None = None) -> str:
    """The CPUs (taskset list) a SUT's threads that are not its data path
    run on: every CPU this process may use but the SUT's own, as turnoutd
    places its API threads and testpmd its main lcore (docs/bench.md,
    "Placement"); "" when the SUT has them all (then nothing is pinned)."""
    from ..measure.cost import cpu_list

    mine = set(cpu_list(sut_cpus))
    pool = allowed if allowed is not None else os.sched_getaffinity(0)
    return ",".join(str(c) for c in sorted(pool - mine))


def command_version(cmd: list[str], line: int = 0, host: Host | None = None) -> str:
    """First (or given) line of a command's version output (run on
    ``host``: this machine when None); '' when it fails."""
    if host is not None and not host.is_local:
        try:
            out = host.run(cmd, check=False, timeout_s=20)
        except (HostError, subprocess.TimeoutExpired):
            return ""
        lines = (out.stdout or out.stderr).strip().splitlines() if out.returncode == 0 else []
        return lines[line].strip() if len(lines) > line else ""
    if shutil.which(cmd[0]) is None and not cmd[0].startswith("/"):
        return ""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    lines = (out.stdout or out.stderr).strip().splitlines()
    return lines[line].strip() if len(lines) > line else ""


class SutAdapter(ABC):
    """One switch under test. ``available()`` returns None when it can run,
    else the reason it cannot (then it is skipped, never failed).

    One shape for every adapter, local or across hosts (docs/bench.md,
    "Across hosts"): it runs commands and starts processes through its
    testbed (``tb.run``, ``tb.spawn``: the testbed knows the namespaces, or
    the hosts), and does its file, socket, /proc and PID work through the
    testbed's host (``self.host``: ``write_text``, ``read_text``, ``tail``,
    ``exists``, ``unix_call``, ``procfs``, ``which``), so the same code
    drives a switch here and on a remote campaign's SUT host. ``attach``
    sets both at set-up; the bench sets ``host`` before ``available()``."""

    #: name used in campaigns and results
    name: str = ""
    #: the options it takes (``[sut.NAME]`` of a campaign), a dataclass of
    #: sut/options.py: the campaign parser refuses any other key or value
    Options: ClassVar[type[SutOptions]] = SutOptions
    #: the reference every ratio is taken against (the bare wire): the
    #: report ranks the others by it and leaves it out of the verdict
    reference: ClassVar[bool] = False
    #: its switch on each host of the overlay scenario (overlay.py): a
    #: class of sut/overlay_host.py next to the adapter; None when it has no
    #: two-host set-up, ``overlay_reason`` then says why when it is not the
    #: default one
    overlay_host: ClassVar[type[OverlayHost] | None] = None
    overlay_reason: ClassVar[str] = ""
    #: whether it can serve memif ports (virtual ports are veths otherwise)
    supports_memif: bool = False
    #: whether it can serve vhost-user ports (backend, server mode)
    supports_vhost_user: bool = False
    #: no switch at all: the scenario wires endpoints directly (bare wire)
    direct: bool = False
    #: whether a campaign may name another build's executable for it
    #: (``[sut.NAME] binary = "PATH"``, e.g. a variant built from another
    #: commit: ``make bench-ab``); the adapter then runs that file
    takes_binary: bool = False
    #: most ports it can take (port density)
    max_ports: int = 1024
    #: largest frame (without FCS) it forwards, and why when it is a limit
    max_frame_b: int = 9000
    max_frame_reason: str = ""

    #: the host the switch runs on: this machine, or a remote campaign's
    #: SUT host (turnout.hosts)
    host: Host = LocalHost()

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        #: the options the campaign gave, each in its canonical spelling (stored
        #: with every result); ``opts`` the same, typed, defaults filled in.
        #: OptionError (sut/options.py) on a key or value it does not take.
        self.options = self.Options.canonical(options)
        self.opts = self.Options.parse(self.options)
        self.tb: Testbed | None = None
        self.topo: Topology | None = None

    def attach(self, tb: Testbed, topo: Topology) -> None:
        """The testbed and topology of a set-up, and the testbed's host."""
        self.tb, self.topo, self.host = tb, topo, tb.host

    def requires(self) -> list[tuple[str, str]]:
        """What it needs on its host: (command, or an absolute path, and the
        Debian package that has it). A remote campaign's pre-flight checks
        them on the SUT's host."""
        return []

    def available(self) -> str | None:
        """None if the software is there (on ``host``), else why not."""
        for what, package in self.requires():
            if self.host.which(what) is None:
                where = "" if self.host.is_local else f" on {self.host.describe()}"
                return f"{what} not installed{where} (apt {package})"
        return None

    @abstractmethod
    def version(self) -> str:
        """Version of the switch software."""

    def config(self) -> dict[str, Any]:
        """The configuration in force (stored with every result)."""
        return {"options": self.options}

    @abstractmethod
    def setup(self, tb: Testbed, topo: Topology) -> None:
        """Start the switch and connect ``topo``; raise SutError when it cannot."""

    def teardown(self) -> None:
        """Stop it; the testbed removes whatever is left."""
        return None

    def pids(self) -> list[int]:
        """Processes whose threads are the switch (for CPU accounting)."""
        return []

    #: whether it takes an OpenFlow rule set from ovs-ofctl (the openflow
    #: scenario: ``Topology.openflow``)
    openflow: bool = False

    #: whether it forwards by rules the bench can change under traffic
    #: (``move_rule``; the ``rule_update`` scenario, measure/update.py)
    has_rules: bool = False

    def move_rule(self, src: str, dst: str, to: str) -> str:
        """Through the switch's own rule interface, send the frames that
        enter port ``src`` addressed to port ``dst`` (its MACs) out of port
        ``to`` instead (``to == dst`` puts them back); return the command.
        Synchronous: it returns when the switch's control plane accepted it."""
        raise SutError(f"{self.name} has no rules to update")

    #: rule interfaces through which ``bulk_flows`` can install flows
    #: ("ovs-ofctl", "json-rpc"); none: flow-mods per second not measured
    bulk_interfaces: tuple[str, ...] = ()

    def bulk_flows(self, interface: str, n: int) -> str:
        """Install ``n`` flows that no frame of the bench hits (lower
        priority than its rules, ``ofrules.bulk_lines``) at once through
        ``interface``; return the command when the switch accepted them."""
        raise SutError(f"{self.name} cannot install flows in bulk")

    def remove_bulk_flows(self) -> None:
        """Remove every flow ``bulk_flows`` installed (also after a failed one)."""
        raise SutError(f"{self.name} cannot install flows in bulk")

    def variant(self) -> str:
        """A short name of a configuration the SUT fell back to at set-up
        instead of the one the campaign asked for ("" when none). Stored as
        the SUT configuration's ``variant``; the report labels its results
        apart ("testpmd (no-huge)"), so two configurations are never pooled."""
        return ""

    def kernel_threads_note(self) -> str:
        """Where the switch's CPU goes when it has no process of its own."""
        return ""

    def wake_state(self) -> dict[str, Any] | None:
        """How the SUT waits for frames, by its own account: ``{"workers":
        [{...}]}`` with cumulative counters (``measure.gen.WAKE_COUNTERS``)
        and its current state (turnoutd: the wake-up regime and why). Read
        before and after a trial's traffic (``extra.sut_wake``); None when
        the SUT keeps no such account."""
        return None

    #: where ``cost_sample`` reads its account ("" when the SUT keeps none)
    cost_source: str = ""

    def cost_sample(self) -> CostSample | None:
        """The SUT's cumulative busy cycles and received frames now, from its
        own accounting (measure/cost.py; ``t`` is filled by the sampler).
        None when it keeps no such account. Called from a sampling thread
        every few tens of ms during a trial: keep it cheap, no process
        spawns."""
        return None
