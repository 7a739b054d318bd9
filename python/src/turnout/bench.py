"""The real bench: a testbed per session, the SUT set up on it, turnout-gen
(or the pygen reference tester) as the Measurer."""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from typing import Any

from .campaign.layout import Layout, available_cpus, host_vnf_sched, plan
from .campaign.runner import Session, SkipSession
from .campaign.spec import CampaignSpec
from .hosts.remote import (
    RemoteBed,
    RemoteCpuSampler,
    RemoteMeasurer,
    RemoteSetup,
    host_of,
    latency_mode,
    ran_on,
)
from .measure.cost import cpu_list
from .measure.gen import GenMeasurer, Stream, VnfHandle, find_gen, gen_version, plan_tasks
from .measure.update import UpdateMeasurer, netdev_counts
from .ofrules import TESTER_VARY
from .portkind import VIRTUAL, PortKind
from .results.models import Host, Sut
from .scenarios import Built, Point, Unsupported, build, cell_port, check, excluded
from .sut import SUTS
from .sut.base import SutAdapter
from .system.fingerprint import fingerprint
from .testbed import Testbed, is_root
from .vm import BridgeVm, GuestCounting, VmPlan, VmUnavailable, require_vm, start_bridge_vm

__all__ = ["RealBench", "campaign_layout", "tester_roles", "tool_versions"]


def _is_pygen(cmd: list[str]) -> bool:
    return cmd[-1].endswith("pygen")


def tester_roles(cmd: list[str]) -> set[str]:
    """Roles the tester implements (pygen: tx, rx, txrx)."""
    if _is_pygen(cmd):
        return {"tx", "rx", "txrx"}
    return {"tx", "rx", "txrx", "reflect", "fwd", "bidir"}


def tool_versions(spec: CampaignSpec | None = None) -> dict[str, str]:
    """Version of every tool the bench may use (empty string when absent),
    and of the campaign's SUT variants (another build's binary: its
    ``--version`` and path), so a run is resumed only on the same builds."""
    out: dict[str, str] = {}
    gen = find_gen()
    if gen:
        out["turnout-gen"] = gen_version(gen)
    suts: list[tuple[str, SutAdapter]] = [(name, cls()) for name, cls in SUTS.items()]
    if spec is not None:
        suts += [(name, spec.make_sut(name)) for name in spec.variants]
    for name, sut in suts:
        out[f"sut:{name}"] = sut.version() if sut.available() is None else ""
    return out


def sut_drops_by_port(sut: SutAdapter) -> Callable[[], dict[str, int]] | None:
    """The SUT's drop counters keyed "port reason", for every trial's
    ``extra.sut_drops`` (None when it keeps none: only turnoutd does)."""
    counts = getattr(sut, "drop_counts", None)
    if counts is None:
        return None
    return lambda: counts(by_port=True)


def campaign_layout(spec: CampaignSpec) -> Layout:
    """The campaign's cores: planned from this machine's CPUs with
    ``layout = "auto"``, else ``tester_cpu`` (tester and VNFs) and ``sut_cpus``."""
    if spec.layout == "auto":
        return plan(available_cpus(), spec.sut_cores)
    tester = () if spec.tester_cpu is None else (spec.tester_cpu,)
    return Layout(tester, tuple(cpu_list(spec.sut_cpus)), tester)


class RealBench:
    """Sessions on a fresh testbed each; needs root. ``spec``: the campaign
    it runs, whose SUT variants the host fingerprint records."""

    def __init__(self, gen_cmd: list[str] | None = None,
                 spec: CampaignSpec | None = None, remote: RemoteSetup | None = None) -> None:
        self.gen = gen_cmd or find_gen() or []
        self.spec = spec
        #: the hosts of a ``location = "remote"`` campaign, checked and
        #: prepared (turnout.hosts.remote); None: everything here
        self.remote = remote
        self._host: Host | None = None
        #: what the campaign's isolate_sut_cpus moved (system/isolate.py
        #: summary), set by the caller for the campaign's duration
        self.isolation: dict[str, Any] | None = None

    def host(self) -> Host:
        if self._host is None:
            tools = tool_versions(self.spec)
            if self.remote is not None:
                tools |= self.remote.tools()
            self._host = fingerprint(tools)
            if self.remote is not None:
                # every host of the campaign (the report's setup section)
                self._host.extra["location"] = "remote"
                self._host.extra["remote_hosts"] = self.remote.summary()
        return self._host

    @contextlib.contextmanager
    def session(self, sut_name: str, point: Point, spec: CampaignSpec) -> Iterator[Session]:
        if point.scenario == "overlay" and self.remote is None:  # two hosts: turnout.overlay
            from .overlay import overlay_session

            with overlay_session(self.gen, sut_name, point, spec) as ov:
                yield ov
            return
        if self.remote is None and not is_root():
            raise SkipSession("the bench needs root (namespaces, veths)")
        sut = spec.make_sut(sut_name)
        if self.remote is not None:  # it runs on the SUT's host: it is checked there
            sut.host = self.remote.hosts[self.remote.rs.sut_host]
        why = excluded(point, sut, spec.virtual_port)
        if why:  # before anything is set up: the campaign cut this cell
            raise SkipSession(why, cell_port(point, spec.virtual_port))
        if point.virtual_port == "vhost-user" and not sut.supports_vhost_user:
            raise SkipSession(f"{sut_name} has no vhost-user ports (the vhost-user cell)",
                              "vhost-user")
        why = sut.available()
        if why:
            raise SkipSession(f"{sut_name}: {why}", cell_port(point, spec.virtual_port, sut))
        if self.remote is not None:
            why = self.remote.unsupported(point, sut)
            if why:
                raise SkipSession(why, cell_port(point, spec.virtual_port, sut))
        vm_plan: VmPlan | None = None
        if spec.vnf == "qemu" and point.scenario == "loopback" and point.vnfs > 0:
            # before the testbed: a cell without KVM is skipped with the reason
            if sut.direct or not sut.supports_vhost_user:
                raise SkipSession(f"the QEMU VNF attaches over vhost-user: {sut_name} has no "
                                  "vhost-user ports")
            try:
                vm_plan = require_vm(spec.qemu_accel)
            except VmUnavailable as e:
                raise SkipSession(str(e)) from None
        roles = tester_roles(self.gen)
        pygen = _is_pygen(self.gen)
        # pygen speaks AF_PACKET only; turnout-gen uses AF_XDP on veths unless
        # the campaign says otherwise (AF_PACKET's TPACKET_V3 blocks add up to
        # a block timeout of latency, and it is slower: docs/bench.md)
        kernel_port = PortKind.AF_PACKET if pygen else spec.tester_port
        layout = campaign_layout(spec) if self.remote is None else self.remote.layout()
        # VNFs that share a core with the tester (or with each other) busy
        # polling would let the scheduler set the rate: they sleep on their
        # memif eventfds instead, and the trial says so (campaign/layout.py)
        vnf_interrupt = spec.vnf_wakeup == "interrupt" or (
            spec.vnf_wakeup == "auto" and layout.vnfs_crowded(max(point.vnfs, 1)))
        # this machine's namespaces, or the remote campaign's hosts (RemoteBed)
        bed: Any = Testbed() if self.remote is None else self.remote.bed()
        with bed as tb:
            built = build(tb, sut, point, memif_tester=not pygen,
                          tester_roles=roles, sut_cpus=layout.sut_cpus, kernel_port=kernel_port,
                          virtual_kind=point.virtual_port or spec.virtual_port,
                          vnf_interrupt=vnf_interrupt,
                          vnf_kind="qemu" if vm_plan else "gen")
            for i, s in enumerate(built.streams):
                # a stream and its reverse (bidirectional) run as one process
                k = i // 2 if point.direction == "bi" else i
                s.tx_cpu = s.rx_cpu = layout.tester_cpu(k) if layout.tester else None
                if spec.tester_rx_cpu is not None:
                    s.rx_cpu = spec.tester_rx_cpu  # separate rx processes (measure/gen.py)
                if self.remote is not None:  # ends on the SUT's host: the VNFs' CPUs there
                    self.remote.place(s, k, layout)
            sut.setup(tb, built.topology)
            try:
                helpers = []
                for i, h in enumerate(built.helpers):  # chain VNFs (turnout-gen fwd)
                    # interrupt-mode VNFs at SCHED_FIFO 1 where that is safe, so
                    # their wake-up preempts the tester (campaign/layout.py)
                    sched = host_vnf_sched(h.polls, spec.vnf_priority)
                    args = [*sched.prefix, *self.gen, *h.args]
                    cpu = layout.vnf_cpu(i) if layout.vnf else None
                    if cpu is not None:
                        args += ["--cpu", str(cpu)]
                    # stdout: their snapshots (SIGUSR1) before and after every trial
                    # (across hosts its CPU is the SUT host's: ``where`` says so)
                    where = (h.netns or "") if self.remote is not None else ""
                    helpers.append(VnfHandle(tb.spawn(args, netns=h.netns), name=h.name,
                                             cpu=cpu, polls=h.polls, sched=sched.label,
                                             sched_why=sched.why, where=where))
                vms: list[BridgeVm] = []
                if vm_plan is not None:  # QEMU guests bridging their two NICs (turnout/vm.py)
                    for i, nics in enumerate(built.vms):
                        vms.append(start_bridge_vm(
                            tb, vm_plan, nics, f"vm{i}",
                            cpu=layout.vnf_cpu(i) if layout.vnf else None))
                measurer = GenMeasurer(
                    cmd=self.gen, streams=built.streams, spawn=tb.spawn,
                    size_b=point.frame_size_b, flows=point.flows, burst=point.burst,
                    sut_pids=sut.pids, helpers=helpers, warmup_s=spec.warmup_s,
                    return_wait_s=spec.return_wait_s,
                    bunch=point.scenario == "rtt",
                    sut_cost=sut.cost_sample if sut.cost_source else None,
                    cost_source=sut.cost_source, sut_wake=sut.wake_state,
                    sut_drops=sut_drops_by_port(sut),
                    # the SUT host's /proc/stat and CPUs (this machine's, or
                    # read by the SUT host's agent: measure/gen.py sut_host)
                    kernel_cpus=cpu_list(layout.sut_cpus),
                    avoid_cpus=list(layout.sut), sut_host=tb.host,
                    isolation=self.isolation,
                    # openflow: more than 65536 distinct 5-tuples (the source
                    # IP too), none of which the hit rule looks at
                    vary=TESTER_VARY if point.scenario == "openflow" else "",
                )
                session_measurer: Any = measurer
                if isinstance(tb, RemoteBed):
                    session_measurer, remote_cfg = self._remote_session(
                        tb, measurer, built, layout, sut_name, len(helpers))
                if helpers:  # let the chain's memif/AF_XDP ports come up
                    time.sleep(1.5)
                    measurer.check_helpers()
                cfg: dict[str, Any] = dict(sut.config())
                cfg["tester"] = " ".join(self.gen[-1:])
                cfg["tester_version"] = gen_version(self.gen)
                cfg["tester_kernel_port"] = str(kernel_port)
                cfg["layout"] = {"tester": list(layout.tester), "sut": list(layout.sut),
                                 "vnf": list(layout.vnf), "note": layout.note,
                                 "rps_cpus": layout.sut_cpus}
                if self.isolation is not None:
                    cfg["isolation"] = self.isolation
                if isinstance(tb, RemoteBed):
                    cfg["remote"] = remote_cfg
                if vm_plan is not None:
                    cfg["vnf"] = {"kind": "qemu", "accel": vm_plan.accel, "why": vm_plan.why,
                                  "guests": len(vms)}
                if pygen:
                    cfg["tester_note"] = (
                        "pygen fallback (turnout-gen not found): one syscall per frame, "
                        "about 1e5 pps; these figures measure the tester, not the switch")

                def retarget(p: Point) -> None:
                    check(p, sut, roles)
                    if self.remote is not None and self.remote.frame_problem(p):
                        raise Unsupported(self.remote.frame_problem(p))
                    measurer.size_b, measurer.flows, measurer.burst = (
                        p.frame_size_b, p.flows, p.burst)

                def recover() -> str:
                    sut.teardown()
                    for port in built.topology.ports:  # a dead server's socket files
                        if port.kind in VIRTUAL and port.socket:
                            tb.host.remove(port.socket)
                    sut.setup(tb, built.topology)
                    if helpers:
                        time.sleep(1.5)
                    return f"{sut_name} restarted"

                note = sut.kernel_threads_note()
                if note:
                    cfg["cpu_note"] = note
                if sut.variant():
                    cfg["variant"] = sut.variant()
                if sut_name in spec.variants:  # a named variant ([sut.NAME] base)
                    cfg["base"] = spec.variants[sut_name]
                updater = None
                if built.update is not None and sut.has_rules:
                    updater = self.update_measurer(tb, sut, built, measurer)
                yield Session(measurer=GuestCounting(measurer, vms) if vms else session_measurer,
                              sut=Sut(name=sut_name, version=sut.version(), config=cfg),
                              virtual_port=built.virtual_port, retarget=retarget,
                              recover=recover, rule_update=updater, adapter=sut)
            finally:
                sut.teardown()

    def _remote_session(self, bed: RemoteBed, measurer: GenMeasurer, built: Built,
                        layout: Layout, sut_name: str,
                        helpers: int) -> tuple[RemoteMeasurer, dict[str, Any]]:
        """A session across hosts: the SUT's threads sampled on its host,
        the trial checked against hosts that dropped off, and what ran where
        (the SUT's configuration ``remote``)."""
        assert self.remote is not None
        rs = self.remote.rs
        sut_host = self.remote.hosts[rs.sut_host]
        measurer.cpu_sampler = lambda pids: RemoteCpuSampler(sut_host, pids)
        mode = latency_mode(built.streams)
        tester = host_of(built.streams[0].tx_ns)
        ran = ran_on(bed, built.streams, layout, sut_name, helpers, plan_tasks)
        cfg = {"location": "remote", "sut_host": rs.sut_host, "tester_host": tester,
               "wires": list(bed.used), "ran": ran, "latency_mode": mode,
               "layout_note": layout.note, "notes": list(bed.notes),
               "logs": str(bed.logs) if bed.logs is not None else "",
               "hosts": {n: h.spec.target() for n, h in self.remote.hosts.items()}}
        return RemoteMeasurer(measurer, bed, mode, tester), cfg

    def update_measurer(self, tb: Testbed, sut: SutAdapter, built: Built,
                        gen: GenMeasurer) -> UpdateMeasurer:
        """The rule-update trial of a ``rule_update`` testbed: turnout-gen tx
        at a fixed rate from the source, the destinations' kernel receive
        counters read from a process in their namespace, the SUT's own rule
        update (measure/update.py)."""
        assert built.update is not None
        src, old, new = built.update
        s: Stream = built.streams[0]
        holder = tb.spawn(["sleep", "infinity"], netns=s.rx_ns, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
        ifaces = [built.ifaces[old], built.ifaces[new]]
        running: list[subprocess.Popen[bytes]] = []  # the stream of the trial under way

        def start(duration_s: float, rate_pps: float) -> Callable[[], tuple[int, int]]:
            args = [*self.gen, "tx", "--port", s.tx_port, "--size", str(gen.size_b),
                    "--src-mac", s.src_mac, "--dst-mac", s.dst_mac, "--stream", str(s.id),
                    "--rate-pps", f"{rate_pps:.0f}", "--burst", str(gen.burst),
                    "--duration-s", f"{duration_s:g}", "--cooldown-s", "0",
                    "--wait-peer-s", f"{gen.wait_peer_s:g}"]
            if s.tx_cpu is not None:
                args += ["--cpu", str(s.tx_cpu)]
            proc = tb.spawn(args, netns=s.tx_ns)
            running[:] = [proc]

            def finish() -> tuple[int, int]:
                doc = gen._collect(proc, time.monotonic() + duration_s + gen.timeout_margin_s)
                tx = doc.get("tx", {})
                # every frame counts here: the destinations' counters see warm-up too
                return (int(tx.get("packets", 0)) + int(tx.get("warmup_packets", 0)),
                        int(tx.get("behind_max", 0)))
            return finish

        def stop() -> None:
            """Ends the stream now (turnout-gen reports what it sent on SIGINT)."""
            for p in running:
                if p.poll() is None:
                    p.send_signal(signal.SIGINT)

        return UpdateMeasurer(
            start_traffic=start, read_counts=lambda: netdev_counts(holder.pid, ifaces),
            move=lambda: sut.move_rule(src, old, new), restore=lambda: sut.move_rule(src, old, old),
            sut_drops=getattr(sut, "drop_counts", None),
            bulk=sut.bulk_flows if sut.bulk_interfaces else None,
            unbulk=sut.remove_bulk_flows if sut.bulk_interfaces else None, stop_traffic=stop)
