"""The words every scenario family uses: a test point (``Point``, the
workbench's ``TestPoint``), what a scenario asks the testbed for
(``Plan``), what ``build`` hands the bench (``Built``), and one row of the
scenario table (``Scenario``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..measure.gen import GenProc, Stream
from ..sut.base import SutAdapter, Topology
from ..testbed import Testbed
from ..testpoint import TestPoint

__all__ = ["Built", "Endpoint", "Plan", "Point", "Scenario", "Unsupported", "no_check",
           "no_virtual"]


class Unsupported(Exception):
    """This scenario cannot run with this SUT/tester (the reason is the message)."""


#: a test point (turnout.testpoint: defined there, once)
Point = TestPoint


@dataclass
class Endpoint:
    """An interface of the tester or of a VNF, in a namespace."""

    name: str
    ns: str
    virtual: bool
    iface: str = ""  # kernel interface (veth end) in ns
    mac: str = ""
    memif: str = ""  # socket path when the endpoint is on memif
    memif_server: bool = False  # serves that socket (the bare wire over memif)
    vhost: str = ""  # the SUT's vhost-user socket when the endpoint is a vhost-user frontend


@dataclass
class Built:
    """A wired-up scenario: the SUT's topology and the traffic to run."""

    topology: Topology
    streams: list[Stream]
    helpers: list[GenProc] = field(default_factory=list)
    virtual_port: str = ""  # memif | vhost-user | veth | "" (no virtual port)
    #: rule_update: (source, old destination, new destination) endpoint names
    update: tuple[str, str, str] | None = None
    #: endpoint name -> its kernel interface (the tester's end of its veth)
    ifaces: dict[str, str] = field(default_factory=dict)
    #: loopback with ``vnf_kind`` "qemu": per chain VNF, its two NICs as
    #: (the SUT's vhost-user socket, the NIC's MAC), in chain order
    vms: list[list[tuple[str, str]]] = field(default_factory=list)


@dataclass
class Plan:
    """What a scenario asks of the testbed: endpoints, the links the SUT
    must connect (both ways), the flows the tester sends, and the turnout-gen
    helpers in VNF namespaces. A family's ``wire`` fills it in; ``build``
    (wiring.py) turns it into SUT ports, wires and streams."""

    tb: Testbed
    tester: str  # the tester's namespace
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    links: list[tuple[str, str]] = field(default_factory=list)
    flows: list[tuple[str, str]] = field(default_factory=list)  # (from, to) endpoint
    #: fwd VNFs: (in endpoint, out endpoint)
    helpers: list[tuple[str, str]] = field(default_factory=list)
    reflectors: list[str] = field(default_factory=list)  # reflect servers: their endpoint
    #: turnout-gen rx on a virtual port nobody else reads (mirrors)
    sinks: list[str] = field(default_factory=list)
    _ns: dict[str, str] = field(default_factory=dict)

    def ns(self, role: str) -> str:
        """The namespace of a role (created on first use; the tester's is there)."""
        if role == "tester":
            return self.tester
        if role not in self._ns:
            self._ns[role] = self.tb.namespace(role)
        return self._ns[role]

    def ep(self, name: str, role: str, virtual: bool, traffic: bool = True) -> str:
        """Add an endpoint; return its name.

        Endpoints the tester drives (``traffic``) live in the tester's
        namespace, so one txrx thread sends and receives each stream: on a
        2-core machine a separate receiver process time-shares the tester's
        core with the sender and its ring overflows while the sender runs
        (the tester, not the SUT, would drop). Chain VNFs keep their own
        namespaces. Virtual endpoints the tester drives run where VNFs run
        (here: the tester's namespace; across hosts: the SUT's host, testbed
        doc)."""
        if traffic:
            # a testbed without virtual_home: virtual endpoints where the tester is
            home: str = (getattr(self.tb, "virtual_home", None) or (lambda n: n))(self.tester) \
                if virtual else self.tester
        else:
            home = self.ns(role)
        self.endpoints[name] = Endpoint(name, home, virtual)
        return name

    def quiet(self, ns: str) -> None:
        """No IPv6 or IGMP chatter in ``ns`` (router solicitations, MLD, a
        bridge's own reports) that a SUT would flood to ports the test
        counts."""
        self.tb.run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                     "net.ipv6.conf.default.disable_ipv6=1",
                     "net.ipv4.igmp_link_local_mcast_reports=0"], netns=ns)


def no_check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    """A scenario with no conditions of its own."""


def no_virtual(point: Point) -> bool:
    """A scenario without virtual endpoints."""
    return False


@dataclass(frozen=True)
class Scenario:
    """One row of the scenario table (table.py)."""

    name: str
    #: the report section that shows it (its key: report/sections.py)
    section: str
    #: its rank on the report page; None: after the ranked ones, by name
    order: int | None
    #: adds its endpoints, links, flows and helpers; None: not built by
    #: ``build`` (overlay: two hosts, turnout.overlay)
    wire: Callable[[Plan, Point], None] | None
    #: raises Unsupported when this SUT or tester cannot run the point
    #: (besides what every scenario checks: wiring.check)
    check: Callable[[Point, SutAdapter, set[str]], None] = no_check
    #: whether the point's cell has virtual endpoints (VNF ports)
    virtual: Callable[[Point], bool] = no_virtual
    #: the cell may fall back to another virtual port kind when the SUT or
    #: the tester lacks one (False: the cell names its path, openflow v2v)
    port_fallback: bool = True
    #: the SUT's namespace quiet (Plan.quiet): the test counts frames on
    #: ports no stream is sent to
    quiet: bool = False
    #: last touches to the SUT's topology (idle ports, a rule set)
    finish: Callable[[Plan, Topology, Point], None] | None = None
    #: rule_update: (source, old destination, new destination) endpoints
    update: tuple[str, str, str] | None = None
