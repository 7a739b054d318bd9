"""What every scenario shares: ``check`` (may this SUT and tester run the
point), ``cell_port`` and ``excluded`` (the campaign's cell), and ``build``,
which turns a family's ``Plan`` (endpoints and links) into a testbed:

- for a switch, every endpoint gets a SUT port — a veth into the SUT's
  namespace, or a memif socket served by the SUT for virtual endpoints when
  the SUT and the tester both support memif (or, with ``virtual_kind``
  ``vhost-user`` and a SUT that has vhost-user ports, a vhost-user socket
  the SUT serves and turnout-gen's frontend connects to, as a VM would) —
  and every link becomes a cross-connect the SUT is told to forward;
- for the bare wire (``direct``), every link becomes one veth pair.

``direction`` ``bi`` adds the reverse stream of every stream.
"""

from __future__ import annotations

from ..measure.gen import GenProc, Stream
from ..portkind import KERNEL, VIRTUAL, PortKind, PortKindError
from ..sut.base import SutAdapter, SutPort, Topology
from ..testbed import Testbed
from .base import Built, Endpoint, Plan, Point, Unsupported
from .table import BY_NAME

__all__ = ["build", "cell_port", "check", "excluded"]


def cell_port(point: Point, campaign_kind: PortKind | str,
              sut: SutAdapter | None = None) -> str:
    """The kind of virtual port the campaign's cell asks for: the point's own
    (``virtual_port``) or the campaign's (``campaign_kind``) when the
    scenario has virtual endpoints, else "" (none). With ``sut``: the kind
    ``build`` would give that SUT (memif for vhost-user it lacks, veth for
    memif it lacks), as a session that could not be set up never learns
    it (results store it: the report files the cell under that port)."""
    sc = BY_NAME.get(point.scenario)
    if sc is None or not sc.virtual(point):
        return ""
    kind = point.virtual_port or PortKind.parse(campaign_kind, VIRTUAL).stored
    if sut is None or not sc.port_fallback:  # openflow: no fallback (build)
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
    sc = BY_NAME.get(point.scenario)
    if sc is None:
        raise Unsupported(f"unknown scenario {point.scenario!r}")
    why = excluded(point, sut)
    if why:
        raise Unsupported(why)
    if point.direction not in ("uni", "bi"):
        raise Unsupported(f"unknown direction {point.direction!r}")
    if point.direction == "bi" and "bidir" not in tester_roles:
        raise Unsupported("bidirectional points need turnout-gen's txrx --bidir "
                          "(this tester lacks it)")
    sc.check(point, sut, tester_roles)
    if frame and point.frame_size_b > sut.max_frame_b:
        raise Unsupported(sut.max_frame_reason
                          or f"{sut.name} forwards frames up to {sut.max_frame_b} B")


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
    sc = BY_NAME[point.scenario]
    if sc.wire is None:
        raise Unsupported(f"the {sc.name} scenario is built by turnout.{sc.name} (two hosts)")
    plan = Plan(tb, tb.namespace("tester"))
    sut_ns = tb.namespace("sut")
    if sc.quiet:
        for n in (plan.tester, sut_ns):
            plan.quiet(n)
    sc.wire(plan, point)
    endpoints, links = plan.endpoints, plan.links

    use_vhost = qemu or (virtual is PortKind.VHOST_USER and sut.supports_vhost_user
                         and memif_tester and not sut.direct)
    use_memif = sut.supports_memif and memif_tester
    virtual_port = ""
    if any(e.virtual for e in endpoints.values()):
        virtual_port = "vhost-user" if use_vhost else "memif" if use_memif else "veth"
    if not sc.port_fallback and point.virtual_port and virtual_port != point.virtual_port:
        # no fallback to another port kind: the cell names its path
        raise Unsupported(f"{sc.name} v2v/{point.virtual_port}: the tester or {sut.name} "
                          f"cannot open {point.virtual_port} ports here (would be "
                          f"{virtual_port})")

    if sut.direct:
        if _wire_direct(tb, plan, use_memif) == 0 and virtual_port == "memif":
            virtual_port = "veth"
        ports: list[SutPort] = []
        xconnects: list[tuple[str, str]] = []
    else:
        ports = _sut_ports(tb, plan, sut_ns, sut_cpus, use_memif=use_memif, use_vhost=use_vhost)
        xconnects = list(links)
    streams = _streams(plan, point, tester_kind, qemu)
    vms = [[(endpoints[a].vhost, endpoints[a].mac), (endpoints[b].vhost, endpoints[b].mac)]
           for a, b in plan.helpers] if qemu else []
    helpers = _helpers(plan, point, tester_kind, vnf_interrupt, fwd=not qemu)
    topo = Topology(ns=sut_ns, ports=ports, xconnects=xconnects, cpus=sut_cpus)
    if sc.finish is not None:
        sc.finish(plan, topo, point)
    return Built(topology=topo, streams=streams, helpers=helpers, virtual_port=virtual_port,
                 update=sc.update, ifaces={e.name: e.iface for e in endpoints.values() if e.iface},
                 vms=vms)


def _wire_direct(tb: Testbed, plan: Plan, use_memif: bool) -> int:
    """The bare wire: a veth pair per link, or, when both ends are virtual
    ports and the tester speaks memif, a memif link served by one end (the
    tester's own ceiling over shared memory). Returns the memif links."""
    endpoints = plan.endpoints
    memif_links = 0
    for i, (a, b) in enumerate(plan.links):
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
    return memif_links


def _sut_ports(tb: Testbed, plan: Plan, sut_ns: str, sut_cpus: str, *, use_memif: bool,
               use_vhost: bool) -> list[SutPort]:
    """A SUT port for every endpoint: a vhost-user or memif socket the SUT
    serves for a virtual endpoint, else a veth into the SUT's namespace."""
    ports: list[SutPort] = []
    memif_dir = tb.directory("memif") if use_memif else None
    vhost_dir = tb.directory("vhost") if use_vhost else None
    for i, e in enumerate(plan.endpoints.values()):
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
    return ports


def _spec(e: Endpoint, tester_kind: PortKind) -> str:
    """turnout-gen's port argument for an endpoint."""
    if e.vhost:
        # turnout-gen's default buffers hold 9000 B frames: every frame
        # size a shared testbed retargets to fits
        return f"{PortKind.VHOST_USER}:{e.vhost}"
    if e.memif:
        return f"{PortKind.MEMIF}:{e.memif}" + (",role=server" if e.memif_server else "")
    return f"{tester_kind}:{e.iface}"


def _peers(plan: Plan) -> dict[str, str]:
    """The next hop of a frame leaving endpoint x: the endpoint linked to it."""
    return {a: b for a, b in plan.links} | {b: a for a, b in plan.links}


def _streams(plan: Plan, point: Point, tester_kind: PortKind, qemu: bool) -> list[Stream]:
    """The tester's streams. Bidirectional: every flow and its reverse, ids
    2k and 2k + 1 (the tester runs each pair as one process that opens each
    port once)."""
    endpoints, peer = plan.endpoints, _peers(plan)

    def stream(sid: int, src: str, dst: str, reverse_of: int | None = None) -> Stream:
        # a QEMU VNF is a bridge, transparent: frames go to the receiver's
        # MAC (its NICs' own MACs would make the guest's bridge take them)
        first_hop = endpoints[dst] if qemu else endpoints[peer[src]]
        return Stream(
            tx_port=_spec(endpoints[src], tester_kind), rx_port=_spec(endpoints[dst], tester_kind),
            tx_ns=endpoints[src].ns, rx_ns=endpoints[dst].ns,
            src_mac=endpoints[src].mac, dst_mac=first_hop.mac, id=sid, reverse_of=reverse_of,
            name=f"{src}>{dst}",
        )

    streams = []
    for i, (src, dst) in enumerate(plan.flows):
        if point.direction == "bi":
            streams.append(stream(2 * i, src, dst))
            streams.append(stream(2 * i + 1, dst, src, reverse_of=2 * i))
        else:
            streams.append(stream(i, src, dst))
    return streams


def _helpers(plan: Plan, point: Point, tester_kind: PortKind, vnf_interrupt: bool, *,
             fwd: bool) -> list[GenProc]:
    """The turnout-gen helpers: ``fwd`` chain VNFs (``fwd``: not QEMU
    guests), ``reflect`` servers and ``rx`` sinks. ``vnf_interrupt``: those
    whose ports are all memif sleep on their eventfds when idle."""
    endpoints, peer = plan.endpoints, _peers(plan)

    def sleeps(*es: Endpoint) -> bool:
        """A helper on these endpoints waits on eventfds (memif only)."""
        return vnf_interrupt and all(e.memif for e in es)

    def vnf_spec(e: Endpoint, irq: bool) -> str:
        return _spec(e, tester_kind) + (",mode=interrupt" if irq else "")

    out = []
    for a, b in plan.helpers if fwd else []:
        nxt = endpoints[peer[b]]
        irq = sleeps(endpoints[a], endpoints[b])
        args = ["fwd", "--port", vnf_spec(endpoints[a], irq),
                "--port2", vnf_spec(endpoints[b], irq), "--dst-mac", nxt.mac]
        if point.direction == "bi":
            # B → A: to the hop before this VNF
            args += ["--bidir", "--dst-mac2", endpoints[peer[a]].mac]
        out.append(GenProc(args=args, netns=endpoints[a].ns, name=f"fwd {a}>{b}",
                           polls=not irq))
    for r in plan.reflectors:
        irq = sleeps(endpoints[r])
        out.append(GenProc(args=["reflect", "--port", vnf_spec(endpoints[r], irq)],
                           netns=endpoints[r].ns, name=f"reflect {r}", polls=not irq))
    for r in plan.sinks:
        irq = vnf_interrupt and bool(endpoints[r].memif or endpoints[r].vhost)
        out.append(GenProc(args=["rx", "--port", vnf_spec(endpoints[r], irq)],
                           netns=endpoints[r].ns, name=f"mirror {r}", polls=not irq))
    return out
