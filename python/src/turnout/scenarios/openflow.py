"""``openflow``: p2p through an OpenFlow rule set of ``rules`` flows over
``masks`` masks that every SUT gets through ``ovs-ofctl -O OpenFlow13
add-flows`` (turnout.ofrules), its hit rule sending the stream to ``outputs``
ports: the receiver and ``outputs`` − 1 mirror ports, veths into a namespace
of their own where the copies end in the kernel; or, at a point with a
``virtual_port``, the same rule set on the v2v path: VNF0 → SUT → VNF1 over
vhost-user or memif ports, the mirror ports of the same kind, each drained
by a turnout-gen ``rx`` in a namespace of its own."""

from __future__ import annotations

from ..sut.base import SutAdapter, Topology
from .base import Plan, Point, Scenario, Unsupported

__all__ = ["OPENFLOW"]


def _wire(plan: Plan, point: Point) -> None:
    if point.virtual_port:
        # v2v: the VMs' ports and the mirror ports all of the point's kind;
        # each mirror port is drained by a turnout-gen rx (a VM that takes
        # the copies), so the SUT really copies every frame to it
        plan.links.append((plan.ep("t0", "vnf0", True), plan.ep("t1", "vnf1", True)))
        plan.flows.append(("t0", "t1"))
        for i in range(1, point.outputs):
            plan.ep(f"m{i}", "mirror", True, traffic=False)
            plan.sinks.append(f"m{i}")
        return
    plan.links.append((plan.ep("t0", "tester", False), plan.ep("t1", "tester", False)))
    plan.flows.append(("t0", "t1"))
    for i in range(1, point.outputs):  # mirror ports: the copies end in the kernel
        plan.ep(f"m{i}", "mirror", False, traffic=False)
    if point.outputs > 1:
        plan.quiet(plan.ns("mirror"))


def _check(point: Point, sut: SutAdapter, tester_roles: set[str]) -> None:
    if not sut.openflow:
        raise Unsupported(f"{sut.name} takes no OpenFlow rules (ovs-ofctl)")
    if point.direction != "uni":
        raise Unsupported("the rule set forwards one stream: direction must be uni")
    from ..ofrules import check_point

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


def _rule_set(plan: Plan, topo: Topology, point: Point) -> None:
    from ..ofrules import rule_set

    # OpenFlow port N is the SUT's port N - 1 in this order (both SUTs)
    of = {p.name: i + 1 for i, p in enumerate(topo.ports)}
    topo.openflow = rule_set(point.rules, point.masks, of["t0"],
                             [of["t1"], *(of[f"m{i}"] for i in range(1, point.outputs))],
                             acl=point.acl, acl_at=point.acl_at)


def _virtual(point: Point) -> bool:
    return bool(point.virtual_port)


# quiet: no chatter the SUT would flood to both destinations
OPENFLOW = Scenario("openflow", section="openflow", order=None, wire=_wire, check=_check,
                    virtual=_virtual, port_fallback=False, quiet=True, finish=_rule_set)
