"""The two-host overlay scenario (docs/bench.md, "Overlay").

Two emulated hosts, namespaces ``hostA`` and ``hostB``, joined by an
underlay veth (``192.168.77.1`` ↔ ``192.168.77.2``, MTU 3000: inner frames
up to 2964 B fit a VXLAN header over IPv4). The tester's port ``t0`` is a
pod behind host A, ``t1`` a pod behind host B (both in the tester's
namespace, as in p2p: one ``txrx`` thread sends and receives each stream).
A switch instance runs on each host and joins its pod to a VXLAN tunnel
(VNI 100, UDP 4789) to the other host, as the SUT's adapter declares it
(``SutAdapter.overlay_host``, a ``sut.overlay_host.OverlayHost`` next to the
adapter):

- ``turnoutd`` (and ``turnoutd-poll``): ``patch`` logic pod ↔ a ``vxlan``
  port whose underlay is the host's end of the underlay veth
  (docs/overlay.md); pods and underlay on the adapter's ``kernel_port``
  (``underlay_port`` overrides it for the underlay);
- ``ovs``: Open vSwitch's userspace datapath, one ovs-vswitchd per host:
  the underlay in ``br-phy`` (whose internal port holds the tunnel
  address), the pod and a ``vxlan`` port in the integration bridge with
  ``in_port`` flows both ways; ports of the adapter's type (``afxdp``);
- ``bridge``: a Linux bridge with the pod veth and a kernel ``vxlan``
  netdev (nolearning, static FDB entries) on each host.

Cost per frame (measure/cost.py) is **both hosts' switches summed** over
the frames carried across the overlay: each carried frame is received once
by each host (host A from the pod, host B from the underlay; both ways
when bidirectional), so frames = (received by A + received by B) / 2 and
the figure is comparable with the plain p2p path's cost of one switch per
frame. Each trial also stores every host's own cycles per frame it
received, in its columns ``overlay_a_cycles_per_frame`` and
``overlay_b_cycles_per_frame`` (from ``extra.overlay_hosts``, which keeps
each host's frames or why it has no figure; turnoutd and OVS: the kernel's
softirq time is per CPU, not per host, so the Linux bridge has only the
sum). The report's "Overlay" section sets these next to the same SUT's
p2p figures of the same campaign (report/overlay.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .campaign.runner import Session, SkipSession
from .measure.cost import (
    CostSample,
    cost_in_window,
    cpu_list,
)
from .measure.counts import TrialCounts
from .measure.gen import GenMeasurer, Stream, gen_version
from .portkind import KERNEL, PortKind, PortKindError
from .results.models import Sut
from .scenarios import Point, Unsupported, check
from .sut.base import SutAdapter, SutError
from .sut.overlay_host import VNI, VXLAN_PORT, HostWiring, JointAccount, OverlayHost
from .testbed import Testbed, is_root

if TYPE_CHECKING:
    from .campaign.spec import CampaignSpec

__all__ = ["OVERLAY_IPS", "VNI", "VXLAN_PORT", "HostWiring", "OverlayMeasurer", "OverlaySut",
           "Wiring", "build_overlay", "host_cost", "overlay_session", "overlay_support"]

OVERLAY_IPS = ("192.168.77.1", "192.168.77.2")
UNDERLAY_MTU = 3000  # the testbed's veths
#: largest inner frame: the underlay MTU - 36 (outer IPv4 20 + UDP 8 + VXLAN 8;
#: docs/overlay.md, "MTU")
MAX_FRAME_B = UNDERLAY_MTU - 36
HOSTS = ("A", "B")


def overlay_support(sut: SutAdapter) -> str:
    """'' when this SUT can run the overlay scenario, else why not."""
    if sut.direct:
        return "the overlay scenario needs a switch on each host (the bare wire has none)"
    if sut.overlay_host is not None:  # each adapter says which (SutAdapter.overlay_host)
        return ""
    return sut.overlay_reason or (f"overlay: no two-host set-up for {sut.name} (turnoutd, "
                                  "ovs, bridge have one)")


@dataclass
class Wiring:
    """The overlay's namespaces, wires and streams."""

    hosts: list[HostWiring]
    streams: list[Stream]


def build_overlay(tb: Testbed, direction: str, *, kernel_port: PortKind | str,
                  sut_cpus: str) -> Wiring:
    """Namespaces tester, hostA, hostB; veths t0 ↔ host A's pod port, t1 ↔
    host B's pod port, host A ↔ host B (the underlay). Every host-side veth
    end gets RPS to the SUT's CPUs (a kernel switch's receive work, the
    decapsulation included, runs there: testbed.steer_rps)."""
    try:
        kind = PortKind.parse(kernel_port, KERNEL)
    except PortKindError as e:
        raise SutError(f"tester kernel port: {e}") from None
    tester = tb.namespace("tester")
    ha, hb = tb.namespace("hostA"), tb.namespace("hostB")
    t0 = tb.veth(tester, ha, tag="p")
    t1 = tb.veth(tester, hb, tag="p")
    under = tb.veth(ha, hb, tag="u", mtu=UNDERLAY_MTU)
    for ns, iface in ((ha, t0.b), (hb, t1.b), (ha, under.a), (hb, under.b)):
        tb.steer_rps(ns, iface, sut_cpus)
    for ns, iface in ((ha, under.a), (hb, under.b)):
        # segmentation of tunnelled frames is not what is measured; the
        # kernel's vxlan would otherwise hand the veth 64 KiB UDP super-frames
        tb.run(["ethtool", "-K", iface, "tx-udp_tnl-segmentation", "off",
                "tx-udp_tnl-csum-segmentation", "off"], netns=ns, check=False)
    a = HostWiring("A", ha, t0.b, under.a, OVERLAY_IPS[0], OVERLAY_IPS[1],
                   {t0.mac_a: "pod", t1.mac_a: "tunnel"})
    b = HostWiring("B", hb, t1.b, under.b, OVERLAY_IPS[1], OVERLAY_IPS[0],
                   {t1.mac_a: "pod", t0.mac_a: "tunnel"})
    spec0, spec1 = f"{kind}:{t0.a}", f"{kind}:{t1.a}"
    fwd = Stream(tx_port=spec0, rx_port=spec1, tx_ns=tester, rx_ns=tester, src_mac=t0.mac_a,
                 dst_mac=t1.mac_a, id=0, name="t0>t1")
    streams = [fwd]
    if direction == "bi":
        streams.append(Stream(tx_port=spec1, rx_port=spec0, tx_ns=tester, rx_ns=tester,
                              src_mac=t1.mac_a, dst_mac=t0.mac_a, id=1, reverse_of=0,
                              name="t1>t0"))
    return Wiring([a, b], streams)


# ------------------------------------------------------------- the SUT
class OverlaySut:
    """The switch of each host as one SUT: set-up, pids, cost (both hosts
    summed over frames carried; see the module doc)."""

    def __init__(self, base: SutAdapter) -> None:
        why = overlay_support(base)
        if why:
            raise SutError(why)
        self.base = base
        host = base.overlay_host
        assert host is not None  # overlay_support
        #: the switch of each host, as the adapter declares it
        self.hosts: list[OverlayHost] = [host(base, h) for h in HOSTS]
        #: whether each host keeps its own account (``sample``); False: one
        #: account for both, read by the first host (``JointAccount``)
        self.per_host = not issubclass(host, JointAccount)
        self.kernel_note = host.kernel_note
        self.host_source = host.cost_source
        #: every probe's per-host samples (monotonic t, cycles, frames)
        self.host_samples: list[list[CostSample]] = [[] for _ in self.hosts]
        self.cpus: list[int] = []

    @property
    def cost_source(self) -> str:
        return ("both hosts' switches summed: " + self.host_source
                + ", over frames carried = (received by A + received by B) / 2")

    def setup(self, tb: Testbed, wiring: Wiring, cpus: str) -> None:
        self.cpus = cpu_list(cpus)
        for h, w in zip(self.hosts, wiring.hosts, strict=True):
            h.setup(tb, w, cpus)
        a, b = self.hosts
        a.pair(b)
        b.pair(a)
        deadline = time.monotonic() + 15
        while not all(h.ready() for h in self.hosts):
            if time.monotonic() > deadline:
                raise SutError("overlay: the tunnel endpoints did not resolve each other "
                               "within 15 s")
            time.sleep(0.1)

    def version(self) -> str:
        return self.hosts[0].version()

    def config(self) -> dict[str, Any]:
        return {"overlay": {"encapsulation": "vxlan", "vni": VNI, "udp_port": VXLAN_PORT,
                            "underlay": "veth between namespaces hostA and hostB, IPv4, "
                                        f"MTU {UNDERLAY_MTU}",
                            "tunnel_ips": list(OVERLAY_IPS), "cost": self.cost_source},
                "options": self.base.options,
                "hosts": {n: h.config() for n, h in zip(HOSTS, self.hosts, strict=True)}}

    def pids(self) -> list[int]:
        return [p for h in self.hosts for p in h.pids()]

    def kernel_threads_note(self) -> str:
        return self.kernel_note

    def cost_sample(self) -> CostSample | None:
        """Cycles of both hosts; frames = (received by A + received by B) / 2.
        Every host's own sample is kept in ``host_samples``."""
        if not self.per_host:  # the kernel's account: per CPU, both hosts at once
            joint = self.hosts[0]
            assert isinstance(joint, JointAccount), joint
            return joint.joint_sample(self.hosts, self.cpus)
        now = time.monotonic()
        samples = [h.sample() for h in self.hosts]
        if any(s is None for s in samples):
            return None
        got = [s for s in samples if s is not None]
        now = (now + time.monotonic()) / 2  # as CostSampler times its probes
        for store, s in zip(self.host_samples, got, strict=True):
            store.append(CostSample(now, s.cycles, s.frames, s.resolution))
        return CostSample(now, sum(s.cycles for s in got), sum(s.frames for s in got) // 2,
                          max(s.resolution for s in got))

    def teardown(self) -> None:
        for h in reversed(self.hosts):
            with contextlib.suppress(Exception):  # the testbed removes what is left
                h.teardown()


def host_cost(samples: list[list[CostSample]], windows_ns: list[list[int]]) -> list[dict[str, Any]]:
    """Every host's own cycles per frame it received inside the traffic
    window (the overlap of the senders' windows), or why not."""
    if not windows_ns:
        return []
    start = max(w[0] for w in windows_ns) / 1e9
    end = min(w[1] for w in windows_ns) / 1e9
    if end - start < 0.1:
        start, end = min(w[0] for w in windows_ns) / 1e9, max(w[1] for w in windows_ns) / 1e9
    out: list[dict[str, Any]] = []
    for name, ss in zip(HOSTS, samples, strict=False):
        cost, why = cost_in_window(ss, start, end, f"host {name}")
        if cost is None:
            out.append({"host": name, "why": why})
        else:
            out.append({"host": name, "cycles_per_frame": cost.cycles_per_frame,
                        "frames": cost.frames})
    return out


@dataclass
class OverlayMeasurer:
    """turnout-gen through the overlay (a GenMeasurer), adding every host's
    own cost per frame to each trial's ``extra.overlay_hosts``."""

    gen: GenMeasurer
    sut: OverlaySut

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        for s in self.sut.host_samples:
            s.clear()
        c = self.gen.measure(duration_s, load_total_pps)
        per_host = []
        if self.sut.per_host:  # the kernel's softirq time is per CPU, not per host
            per_host = host_cost(self.sut.host_samples, c.extra.get("windows_ns") or [])
        if per_host:
            c.extra["overlay_hosts"] = per_host
        c.extra["overlay_cost"] = "both hosts summed, per frame carried"
        return c


def _check(point: Point, sut: SutAdapter, roles: set[str]) -> None:
    check(point, sut, roles)
    if point.frame_size_b > MAX_FRAME_B:
        raise Unsupported(f"overlay: inner frames up to {MAX_FRAME_B} B fit a VXLAN header on "
                          f"the {UNDERLAY_MTU} B underlay")


@contextlib.contextmanager
def overlay_session(gen_cmd: list[str], sut_name: str, point: Point,
                    spec: CampaignSpec) -> Iterator[Session]:
    """A session of the overlay scenario on a fresh testbed (RealBench
    hands ``overlay`` points here)."""
    from .bench import campaign_layout, tester_roles

    if not is_root():
        raise SkipSession("the bench needs root (namespaces, veths)")
    base = spec.make_sut(sut_name)
    why = base.available()
    if why:
        raise SkipSession(f"{sut_name}: {why}")
    if not gen_cmd or gen_cmd[-1].endswith("pygen"):
        raise SkipSession("the overlay scenario needs turnout-gen (not the pygen fallback)")
    _check(point, base, tester_roles(gen_cmd))
    layout = campaign_layout(spec)
    sut = OverlaySut(base)
    with Testbed() as tb:
        wiring = build_overlay(tb, point.direction, kernel_port=spec.tester_port,
                               sut_cpus=layout.sut_cpus)
        for s in wiring.streams:
            # a stream and its reverse run as one txrx --bidir process
            s.tx_cpu = s.rx_cpu = layout.tester_cpu(0) if layout.tester else None
        try:
            sut.setup(tb, wiring, layout.sut_cpus)
            gen = GenMeasurer(
                cmd=gen_cmd, streams=wiring.streams, spawn=tb.spawn, size_b=point.frame_size_b,
                flows=point.flows, burst=point.burst, sut_pids=sut.pids, warmup_s=spec.warmup_s,
                return_wait_s=spec.return_wait_s,
                sut_cost=sut.cost_sample, cost_source=sut.cost_source,
                kernel_cpus=cpu_list(layout.sut_cpus), avoid_cpus=list(layout.sut))
            cfg: dict[str, Any] = dict(sut.config())
            cfg["tester"] = " ".join(gen_cmd[-1:])
            cfg["tester_version"] = gen_version(gen_cmd)
            cfg["tester_kernel_port"] = str(spec.tester_port)
            cfg["layout"] = {"tester": list(layout.tester), "sut": list(layout.sut),
                             "note": layout.note, "rps_cpus": layout.sut_cpus}
            note = sut.kernel_threads_note()
            if note:
                cfg["cpu_note"] = note

            def retarget(p: Point) -> None:
                _check(p, base, tester_roles(gen_cmd))
                gen.size_b, gen.flows, gen.burst = p.frame_size_b, p.flows, p.burst

            yield Session(measurer=OverlayMeasurer(gen, sut),
                          sut=Sut(name=sut_name, version=sut.version(), config=cfg),
                          retarget=retarget)
        finally:
            sut.teardown()
