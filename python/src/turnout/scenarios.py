"""Scenarios ("Software switches for NFV" §4.1, "Virtualized networking
framework" Fig. 3; docs/references.md): who sends where through the SUT.

A scenario is described as *endpoints* (interfaces of the tester or of a
VNF, each in a namespace) and *links* (pairs of endpoints the SUT must
connect, both ways). ``build`` turns that into a testbed:

- for a switch, every endpoint gets a SUT port — a veth into the SUT's
  namespace, or a memif socket served by the SUT for virtual endpoints when
  the SUT and the tester both support memif (or, with ``virtual_kind``
  ``vhost-user`` and a SUT that has vhost-user ports, a vhost-user socket
  the SUT serves and turnout-gen's frontend connects to, as a VM would) —
  and every link becomes a cross-connect the SUT is told to forward;
- for the bare wire (``direct``), every link becomes one veth pair.

Scenarios: ``p2p``, ``p2v``, ``v2p``, ``v2v``, ``loopback`` (``vnfs`` chained
turnout-gen ``fwd`` VNFs), ``nvsn`` (``pairs`` sender/receiver containers),
``density`` (p2p plus idle ports up to ``ports``), ``rtt`` (client/server
round trips, "Virtualized networking framework" §4.5: the tester sends bursts of ``burst`` frames
through the SUT to a turnout-gen ``reflect`` server in a VNF namespace,
which sends each frame back; the tester's latency is the round trip),
``rule_update`` ("Hard or hopeless" §3.5: a stream t0 → A through the SUT, and a third
port B the SUT's rule update moves it to; measure/update.py),
``overlay`` (two hosts joined by a VXLAN tunnel: built by ``turnout.overlay``,
not here), ``openflow`` (p2p through an OpenFlow rule set of ``rules`` flows
over ``masks`` masks that every SUT gets through ``ovs-ofctl -O OpenFlow13
add-flows`` — turnout.ofrules — its hit rule sending the stream to
``outputs`` ports: the receiver and ``outputs`` − 1 mirror ports, veths
into a namespace of their own where the copies end in the kernel; or, at a
point with a ``virtual_port``, the same rule set on the v2v path: VNF0 →
SUT → VNF1 over vhost-user or memif ports, the mirror ports of the same
kind, each drained by a turnout-gen ``rx`` in a namespace of its own).
``direction`` ``bi`` adds the reverse stream of every stream.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .measure.gen import GenProc, Stream
from .portkind import KERNEL, VIRTUAL, PortKind, PortKindError
from .sut.base import SutAdapter, SutPort, Topology
from .testbed import Testbed

__all__ = ["SCENARIOS", "Built", "Point", "Unsupported", "build", "cell_port", "check",
           "excluded"]

SCENARIOS = (
    "p2p", "p2v", "v2p", "v2v", "loopback", "nvsn", "density", "rtt", "rule_update", "overlay",
    "openflow",
)


class Unsupported(Exception):
    """This scenario cannot run with this SUT/tester (the reason is the message)."""


@dataclass(frozen=True)
class Point:
    """The parameters that select one test point (besides SUT and method)."""

    scenario: str = "p2p"
    direction: str = "uni"
    frame_size_b: int = 64
    flows: int = 1
    burst: int = 32
    vnfs: int = 0
    ports: int = 2
    pairs: int = 1
    #: what the virtual endpoints of this point are (memif | vhost-user);
    #: "" = the campaign's ``virtual_port``
    virtual_port: str = ""
    #: openflow: the rule set (turnout.ofrules) and the hit rule's outputs
    #: (0 at the other scenarios)
    rules: int = 0
    masks: int = 0
    outputs: int = 0
    #: openflow: ACL rules that tell the tester's flows apart and match none
    #: of them, "above" or "below" the hit rule (turnout.ofrules; 0, "")
    acl: int = 0
    acl_at: str = ""

    def stored_scenario(self) -> str:
        """The scenario as results store it: an openflow point names its
        rule set (``openflow/r100/m8/o2``), so the report never pools two
        rule sets as repetitions of one point; ``/acl1000-above`` when it has
        ACL rules)."""
        if self.scenario != "openflow":
            return self.scenario
        path = "v2v/" if self.virtual_port else ""
        acl = f"/acl{self.acl}-{self.acl_at}" if self.acl else ""
        return f"openflow/{path}r{self.rules}/m{self.masks}/o{self.outputs}{acl}"


@dataclass
class _Endpoint:
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


#: scenarios whose every point has virtual endpoints (VNF ports)
_VIRTUAL = ("p2v", "v2p", "v2v", "rtt", "nvsn")


def cell_port(point: Point, campaign_kind: PortKind | str,
              sut: SutAdapter | None = None) -> str:
    """The kind of virtual port the campaign's cell asks for: the point's own
    (``virtual_port``) or the campaign's (``campaign_kind``) when the
    scenario has virtual endpoints, else "" (none). With ``sut``: the kind
    ``build`` would give that SUT (memif for vhost-user it lacks, veth for
    memif it lacks), as a session that could not be set up never learns
    it (results store it: the report files the cell under that port)."""
    virtual = (point.scenario in _VIRTUAL or (point.scenario == "loopback" and point.vnfs > 0)
               or (point.scenario == "openflow" and bool(point.virtual_port)))
    if not virtual:
        return ""
    kind = point.virtual_port or PortKind.parse(campaign_kind, VIRTUAL).stored
    if sut is None or point.scenario == "openflow":  # openflow: no fallback (build)
        return kind
    if kind == "vhost-user" and (sut.direct or not sut.supports_vhost_user):
        kind = "memif"
    if kind == "memif" and not sut.supports_memif:
        kind = "veth"
    return kind


def excluded(point: Point, sut: SutAdapter,
             campaign_kind: PortKind | str = PortKind.MEMIF) -> str | None:
    """Why the campaign leaves this SUT out of the point's scenario
    (``[sut.NAME] scenarios``: a scenario's name runs all its cells,
    "v2v/vhost-user" only its vhost-user cell), or None. A memif cell of a
    SUT without memif ports says that, not the campaign's reason (which is
    about the cells it would run: OVS-DPDK's veths)."""
    only = sut.opts.scenarios
    if only is None or point.scenario in only or (
            point.virtual_port and f"{point.scenario}/{point.virtual_port}" in only):
        return None
    if cell_port(point, campaign_kind) == "memif" and not sut.supports_memif:
        return (f"{sut.name} has no memif ports (this campaign runs it only in "
                f"{', '.join(only)}: [sut.{sut.name}] scenarios)")
    return (sut.opts.scenarios_reason
            or f"{sut.name} runs only {', '.join(only)} in this campaign "
               f"([sut.{sut.name}] scenarios)")


def check(point: Point, sut: SutAdapter, tester_roles: set[str], *, frame: bool = True) -> None:
    """Raise Unsupported when this combination cannot run (``frame``: also
    check the frame size, which a shared testbed checks per point)."""
    if point.scenario not in SCENARIOS:
        raise Unsupported(f"unknown scenario {point.scenario!r}")
    why = excluded(point, sut)
    if why:
        raise Unsupported(why)
    if point.direction not in ("uni", "bi"):
        raise Unsupported(f"unknown direction {point.direction!r}")
    if point.direction == "bi" and "bidir" not in tester_roles:
        raise Unsupported("bidirectional points need turnout-gen's txrx --bidir "
                          "(this tester lacks it)")
    if point.scenario == "rtt":
        if "reflect" not in tester_roles:
            raise Unsupported("round trips need turnout-gen's reflect role (this tester lacks it)")
        if point.direction != "uni":
            raise Unsupported("a round trip is both ways already: direction must be uni")
    if point.scenario == "overlay":
        from .overlay import overlay_support  # two hosts: built by turnout.overlay

        why = overlay_support(sut)
        if why:
            raise Unsupported(why)
    if point.scenario == "openflow":
        if not sut.openflow:
            raise Unsupported(f"{sut.name} takes no OpenFlow rules (ovs-ofctl)")
        if point.direction != "uni":
            raise Unsupported("the rule set forwards one stream: direction must be uni")
        from .ofrules import check_point

        why = check_point(point.rules, point.masks, point.outputs, point.acl, point.acl_at)
        if why:
            raise Unsupported(why)
        if point.virtual_port == "memif" and not sut.supports_memif:
            raise Unsupported(f"{sut.name} has no memif ports (the openflow v2v/memif cell "
                              "has no row for it)")
        if point.virtual_port == "vhost-user" and not sut.supports_vhost_user:
            raise Unsupported(f"{sut.name} has no vhost-user ports (the openflow "
                              "v2v/vhost-user cell: OVS userspace without DPDK has none; "
                              "OVS-DPDK's dpdkvhostuser is the same datapath, dpif-netdev)")
        if point.virtual_port not in ("", "memif", "vhost-user"):
            raise Unsupported(f"openflow: virtual port {point.virtual_port!r} (memif, "
                              "vhost-user, or none for p2p)")
    if point.scenario == "rule_update":
        if sut.direct:
            raise Unsupported("a rule update needs a switch: the bare wire has no rules")
        if point.direction != "uni":
            raise Unsupported("a rule update moves one stream: direction must be uni")
    if point.scenario == "loopback" and point.vnfs > 0 and "fwd" not in tester_roles:
        raise Unsupported("loopback with VNFs needs turnout-gen's fwd role (this tester lacks it)")
    if frame and point.frame_size_b > sut.max_frame_b:
        raise Unsupported(sut.max_frame_reason
                          or f"{sut.name} forwards frames up to {sut.max_frame_b} B")
    if point.scenario == "density":
        if sut.direct:
            raise Unsupported("port density has no meaning without a switch")
        if point.ports > sut.max_ports:
            raise Unsupported(f"{sut.name} takes at most {sut.max_ports} ports")
        if point.ports < 2:
            raise Unsupported("port density needs at least 2 ports")


def _mac(i: int) -> str:
    return f"02:74:6e:{(i >> 16) & 0xFF:02x}:{(i >> 8) & 0xFF:02x}:{i & 0xFF:02x}"


def build(tb: Testbed, sut: SutAdapter, point: Point, *, memif_tester: bool,
          tester_roles: set[str], sut_cpus: str = "1",
          kernel_port: PortKind | str = PortKind.AF_PACKET,
          virtual_kind: PortKind | str = PortKind.MEMIF, vnf_interrupt: bool = False,
          vnf_kind: str = "gen") -> Built:
    """Create namespaces, wires and sockets for ``point`` (see module doc).

    ``kernel_port`` is how the tester and the VNFs open a veth end:
    ``af_xdp`` (turnout-gen's default in the bench) or ``af_packet``
    (turnout.portkind; the older spellings are taken too).
    ``virtual_kind`` is what a virtual endpoint prefers: ``memif`` or
    ``vhost_user`` (a SUT without vhost-user ports, or the bare wire, falls
    back to memif, then veth; ``Built.virtual_port`` says what was used).
    ``vnf_interrupt``: chain VNFs and reflectors whose ports are all memif
    sleep on the memif eventfds when idle (``mode=interrupt``) instead of
    busy polling (``GenProc.polls`` says which did). ``vnf_kind`` "qemu":
    the loopback chain's VNFs are QEMU guests (``Built.vms``, started by the
    caller: turnout.vm) on vhost-user ports of the SUT instead of
    turnout-gen ``fwd`` helpers."""
    try:
        tester_kind = PortKind.parse(kernel_port, KERNEL)
    except PortKindError as why:
        raise Unsupported(f"tester kernel port: {why}") from None
    try:
        virtual = PortKind.parse(virtual_kind, VIRTUAL)
    except PortKindError as why:
        raise Unsupported(f"virtual port kind: {why}") from None
    if vnf_kind not in ("gen", "qemu"):
        raise Unsupported(f"VNF kind {vnf_kind!r}: gen or qemu")
    qemu = vnf_kind == "qemu" and point.scenario == "loopback" and point.vnfs > 0
    if qemu and (sut.direct or not sut.supports_vhost_user):
        raise Unsupported(f"the QEMU VNF attaches over vhost-user: {sut.name} has no "
                          "vhost-user ports")
    check(point, sut, tester_roles, frame=False)
    if point.scenario == "overlay":
        raise Unsupported("the overlay scenario is built by turnout.overlay (two hosts)")
    tester = tb.namespace("tester")
    sut_ns = tb.namespace("sut")
    if point.scenario in ("rule_update", "openflow"):
        # no IPv6 or IGMP chatter (router solicitations, MLD, a bridge's own
        # reports) that the SUT would flood to both destinations; the
        # destinations' counters leave multicast out too (measure/update.py)
        for n in (tester, sut_ns):
            tb.run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                    "net.ipv4.igmp_link_local_mcast_reports=0"], netns=n)
    endpoints: dict[str, _Endpoint] = {}
    links: list[tuple[str, str]] = []
    flows: list[tuple[str, str]] = []  # (from endpoint, to endpoint)
    helpers: list[tuple[str, str, str]] = []  # fwd VNF: (in endpoint, out endpoint, next hop)
    reflectors: list[str] = []  # reflect servers: their endpoint
    sinks: list[str] = []  # turnout-gen rx on a virtual port nobody else reads (mirrors)
    ns_cache: dict[str, str] = {"tester": tester}
    virtual_home = getattr(tb, "virtual_home", lambda n: n)

    def ns(role: str) -> str:
        if role not in ns_cache:
            ns_cache[role] = tb.namespace(role)
        return ns_cache[role]

    def ep(name: str, role: str, virtual: bool, traffic: bool = True) -> str:
        # Endpoints the tester drives live in the tester's namespace, so one
        # txrx thread sends and receives each stream: on a 2-core machine a
        # separate receiver process time-shares the tester's core with the
        # sender and its ring overflows while the sender runs (the tester,
        # not the SUT, would drop). Chain VNFs keep their own namespaces.
        # Virtual endpoints the tester drives run where VNFs run (here: the
        # tester's namespace; across hosts: the SUT's host, testbed doc).
        home = (virtual_home(tester) if virtual else tester) if traffic else ns(role)
        endpoints[name] = _Endpoint(name, home, virtual)
        return name

    s = point.scenario
    if s == "p2p" or s == "density":
        links.append((ep("t0", "tester", False), ep("t1", "tester", False)))
        flows.append(("t0", "t1"))
    elif s in ("p2v", "v2p"):
        links.append((ep("t0", "tester", False), ep("v0", "vnf0", True)))
        flows.append(("t0", "v0") if s == "p2v" else ("v0", "t0"))
    elif s == "v2v":
        links.append((ep("v0", "vnf0", True), ep("v1", "vnf1", True)))
        flows.append(("v0", "v1"))
    elif s == "loopback":
        prev = ep("t0", "tester", False)
        for i in range(point.vnfs):
            a = ep(f"v{i}a", f"vnf{i}", True, traffic=False)
            b = ep(f"v{i}b", f"vnf{i}", True, traffic=False)
            links.append((prev, a))
            helpers.append((a, b, ""))
            prev = b
        links.append((prev, ep("t1", "tester", False)))
        flows.append(("t0", "t1"))
    elif s == "rtt":
        links.append((ep("t0", "tester", False), ep("v0", "vnf0", True, traffic=False)))
        flows.append(("t0", "t0"))  # out to the server and back to the same port
        reflectors.append("v0")
    elif s == "rule_update":
        # t0 → A (t1) through the SUT; B (t2) is a port with no traffic until
        # the update moves the stream there
        links.append((ep("t0", "tester", False), ep("t1", "tester", False)))
        ep("t2", "tester", False)
        flows.append(("t0", "t1"))
    elif s == "openflow" and point.virtual_port:
        # v2v: the VMs' ports and the mirror ports all of the point's kind;
        # each mirror port is drained by a turnout-gen rx (a VM that takes
        # the copies), so the SUT really copies every frame to it
        links.append((ep("t0", "vnf0", True), ep("t1", "vnf1", True)))
        flows.append(("t0", "t1"))
        for i in range(1, point.outputs):
            ep(f"m{i}", "mirror", True, traffic=False)
            sinks.append(f"m{i}")
    elif s == "openflow":
        links.append((ep("t0", "tester", False), ep("t1", "tester", False)))
        flows.append(("t0", "t1"))
        for i in range(1, point.outputs):  # mirror ports: the copies end in the kernel
            ep(f"m{i}", "mirror", False, traffic=False)
        if point.outputs > 1:
            tb.run(["sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                    "net.ipv4.igmp_link_local_mcast_reports=0"], netns=ns("mirror"))
    elif s == "nvsn":
        for i in range(point.pairs):
            links.append((ep(f"s{i}", f"snd{i}", True), ep(f"r{i}", f"rcv{i}", True)))
            flows.append((f"s{i}", f"r{i}"))

    use_vhost = qemu or (virtual is PortKind.VHOST_USER and sut.supports_vhost_user
                         and memif_tester and not sut.direct)
    use_memif = sut.supports_memif and memif_tester
    virtual_port = ""
    if any(e.virtual for e in endpoints.values()):
        virtual_port = "vhost-user" if use_vhost else "memif" if use_memif else "veth"
    if s == "openflow" and point.virtual_port and virtual_port != point.virtual_port:
        # no fallback to another port kind: the cell names its path
        raise Unsupported(f"openflow v2v/{point.virtual_port}: the tester or {sut.name} "
                          f"cannot open {point.virtual_port} ports here (would be "
                          f"{virtual_port})")

    ports: list[SutPort] = []
    xconnects: list[tuple[str, str]] = []
    if sut.direct:
        # The bare wire: a veth pair per link, or, when both ends are
        # virtual ports and the tester speaks memif, a memif link served by
        # one end (the tester's own ceiling over shared memory).
        memif_links = 0
        for i, (a, b) in enumerate(links):
            ea, eb = endpoints[a], endpoints[b]
            if use_memif and ea.virtual and eb.virtual:
                sock = str(tb.directory("memif") / f"{a}.sock")
                ea.memif = eb.memif = sock
                eb.memif_server = True
                ea.mac, eb.mac = _mac(2 * i + 1), _mac(2 * i + 2)
                memif_links += 1
                continue
            v = tb.veth(ea.ns, eb.ns, tag="w")
            ea.iface, ea.mac = v.a, v.mac_a
            eb.iface, eb.mac = v.b, v.mac_b
            # across hosts a link's ends are where its wires are
            ea.ns = getattr(v, "ns_a", None) or ea.ns
            eb.ns = getattr(v, "ns_b", None) or eb.ns
        if virtual_port == "memif" and memif_links == 0:
            virtual_port = "veth"
    else:
        memif_dir = tb.directory("memif") if use_memif else None
        vhost_dir = tb.directory("vhost") if use_vhost else None
        for i, e in enumerate(endpoints.values()):
            if e.virtual and vhost_dir is not None:
                e.vhost = str(vhost_dir / f"{e.name}.sock")
                e.mac = _mac(i + 1)
                ports.append(SutPort(name=e.name, kind=PortKind.VHOST_USER, socket=e.vhost,
                                     macs=[e.mac]))
            elif e.virtual and memif_dir is not None:
                e.memif = str(memif_dir / f"{e.name}.sock")
                e.mac = _mac(i + 1)
                ports.append(SutPort(name=e.name, kind=PortKind.MEMIF, socket=e.memif,
                                     macs=[e.mac]))
            else:
                v = tb.veth(e.ns, sut_ns, tag="p")
                # across hosts the wire says which tester host the end is on
                e.iface, e.mac, e.ns = v.a, v.mac_a, getattr(v, "ns_a", None) or e.ns
                # the SUT's kernel-side receive work on the SUT's CPUs
                tb.steer_rps(sut_ns, v.b, sut_cpus)
                ports.append(SutPort(name=e.name, kind="veth", iface=v.b, macs=[e.mac]))
        xconnects = list(links)
        if s == "density":
            idle = tb.namespace("idle")
            for _ in range(point.ports - 2):
                v = tb.veth(idle, sut_ns, tag="i")
                ports.append(SutPort(name=v.b, kind="veth", iface=v.b, idle=True))

    def spec(e: _Endpoint) -> str:
        if e.vhost:
            # turnout-gen's default buffers hold 9000 B frames: every frame
            # size a shared testbed retargets to fits
            return f"{PortKind.VHOST_USER}:{e.vhost}"
        if e.memif:
            return f"{PortKind.MEMIF}:{e.memif}" + (",role=server" if e.memif_server else "")
        return f"{tester_kind}:{e.iface}"

    # the next hop of a frame leaving endpoint x is the endpoint linked to it
    peer = {a: b for a, b in links} | {b: a for a, b in links}
    def stream(sid: int, src: str, dst: str, reverse_of: int | None = None) -> Stream:
        # a QEMU VNF is a bridge, transparent: frames go to the receiver's
        # MAC (its NICs' own MACs would make the guest's bridge take them)
        first_hop = endpoints[dst] if qemu else endpoints[peer[src]]
        return Stream(
            tx_port=spec(endpoints[src]), rx_port=spec(endpoints[dst]),
            tx_ns=endpoints[src].ns, rx_ns=endpoints[dst].ns,
            src_mac=endpoints[src].mac, dst_mac=first_hop.mac, id=sid, reverse_of=reverse_of,
            name=f"{src}>{dst}",
        )

    # Bidirectional: every flow and its reverse, ids 2k and 2k + 1 (the
    # tester runs each pair as one process that opens each port once).
    streams = []
    for i, (src, dst) in enumerate(flows):
        if point.direction == "bi":
            streams.append(stream(2 * i, src, dst))
            streams.append(stream(2 * i + 1, dst, src, reverse_of=2 * i))
        else:
            streams.append(stream(i, src, dst))
    def sleeps(*es: _Endpoint) -> bool:
        """A helper on these endpoints waits on eventfds (memif only)."""
        return vnf_interrupt and all(e.memif for e in es)

    def vnf_spec(e: _Endpoint, irq: bool) -> str:
        return spec(e) + (",mode=interrupt" if irq else "")

    gen_helpers = []
    vms = [[(endpoints[a].vhost, endpoints[a].mac), (endpoints[b].vhost, endpoints[b].mac)]
           for a, b, _ in helpers] if qemu else []
    for a, b, _ in [] if qemu else helpers:
        nxt = endpoints[peer[b]]
        irq = sleeps(endpoints[a], endpoints[b])
        args = ["fwd", "--port", vnf_spec(endpoints[a], irq),
                "--port2", vnf_spec(endpoints[b], irq), "--dst-mac", nxt.mac]
        if point.direction == "bi":
            # B → A: to the hop before this VNF
            args += ["--bidir", "--dst-mac2", endpoints[peer[a]].mac]
        gen_helpers.append(GenProc(args=args, netns=endpoints[a].ns, name=f"fwd {a}>{b}",
                                   polls=not irq))
    for r in reflectors:
        irq = sleeps(endpoints[r])
        gen_helpers.append(GenProc(args=["reflect", "--port", vnf_spec(endpoints[r], irq)],
                                   netns=endpoints[r].ns, name=f"reflect {r}", polls=not irq))
    for r in sinks:
        irq = vnf_interrupt and bool(endpoints[r].memif or endpoints[r].vhost)
        gen_helpers.append(GenProc(args=["rx", "--port", vnf_spec(endpoints[r], irq)],
                                   netns=endpoints[r].ns, name=f"mirror {r}", polls=not irq))
    topo = Topology(ns=sut_ns, ports=ports, xconnects=xconnects, cpus=sut_cpus)
    if s == "openflow":
        from .ofrules import rule_set

        # OpenFlow port N is the SUT's port N - 1 in this order (both SUTs)
        of = {p.name: i + 1 for i, p in enumerate(ports)}
        topo.openflow = rule_set(point.rules, point.masks, of["t0"],
                                 [of["t1"], *(of[f"m{i}"] for i in range(1, point.outputs))],
                                 acl=point.acl, acl_at=point.acl_at)
    return Built(topology=topo, streams=streams, helpers=gen_helpers, virtual_port=virtual_port,
                 update=("t0", "t1", "t2") if s == "rule_update" else None,
                 ifaces={e.name: e.iface for e in endpoints.values() if e.iface}, vms=vms)
