"""The real bench: a testbed per session, the SUT set up on it, turnout-gen
(or the pygen reference tester) as the Measurer."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .campaign.layout import Layout, available_cpus, plan
from .campaign.runner import Session, SkipSession
from .campaign.spec import CampaignSpec
from .measure.cost import cpu_list
from .measure.gen import GenMeasurer, VnfHandle, find_gen, gen_version
from .results.models import Host, Sut
from .scenarios import Point, build, check
from .sut import SUTS, make_sut
from .system.fingerprint import fingerprint
from .testbed import Testbed, is_root

__all__ = ["RealBench", "campaign_layout", "tester_roles", "tool_versions"]


def _is_pygen(cmd: list[str]) -> bool:
    return cmd[-1].endswith("pygen")


def tester_roles(cmd: list[str]) -> set[str]:
    """Roles the tester implements (pygen: tx, rx, txrx)."""
    if _is_pygen(cmd):
        return {"tx", "rx", "txrx"}
    return {"tx", "rx", "txrx", "reflect", "fwd", "bidir"}


def tool_versions() -> dict[str, str]:
    """Version of every tool the bench may use (empty string when absent)."""
    out: dict[str, str] = {}
    gen = find_gen()
    if gen:
        out["turnout-gen"] = gen_version(gen)
    for name, cls in SUTS.items():
        sut = cls()
        out[f"sut:{name}"] = sut.version() if sut.available() is None else ""
    return out


def campaign_layout(spec: CampaignSpec) -> Layout:
    """The campaign's cores: planned from this machine's CPUs with
    ``layout = "auto"``, else ``tester_cpu`` (tester and VNFs) and ``sut_cpus``."""
    if spec.layout == "auto":
        return plan(available_cpus(), spec.sut_cores)
    tester = () if spec.tester_cpu is None else (spec.tester_cpu,)
    return Layout(tester, tuple(cpu_list(spec.sut_cpus)), tester)


class RealBench:
    """Sessions on a fresh testbed each; needs root."""

    def __init__(self, gen_cmd: list[str] | None = None) -> None:
        self.gen = gen_cmd or find_gen() or []
        self._host: Host | None = None

    def host(self) -> Host:
        if self._host is None:
            self._host = fingerprint(tool_versions())
        return self._host

    @contextlib.contextmanager
    def session(self, sut_name: str, point: Point, spec: CampaignSpec) -> Iterator[Session]:
        if point.scenario == "overlay":  # two hosts: turnout.overlay
            from .overlay import overlay_session

            with overlay_session(self.gen, sut_name, point, spec) as ov:
                yield ov
            return
        if not is_root():
            raise SkipSession("the bench needs root (namespaces, veths)")
        sut = make_sut(sut_name, spec.sut_options.get(sut_name))
        why = sut.available()
        if why:
            raise SkipSession(f"{sut_name}: {why}")
        roles = tester_roles(self.gen)
        pygen = _is_pygen(self.gen)
        # pygen speaks AF_PACKET only; turnout-gen uses AF_XDP on veths unless
        # the campaign says otherwise (AF_PACKET's TPACKET_V3 blocks add up to
        # a block timeout of latency, and it is slower: docs/bench.md)
        kernel_port = "afpacket" if pygen else spec.tester_port
        layout = campaign_layout(spec)
        with Testbed() as tb:
            built = build(tb, sut, point, memif_tester=not pygen,
                          tester_roles=roles, sut_cpus=layout.sut_cpus, kernel_port=kernel_port)
            for i, s in enumerate(built.streams):
                # a stream and its reverse (bidirectional) run as one process
                k = i // 2 if point.direction == "bi" else i
                s.tx_cpu = s.rx_cpu = layout.tester_cpu(k) if layout.tester else None
                if spec.tester_rx_cpu is not None:
                    s.rx_cpu = spec.tester_rx_cpu  # separate rx processes (measure/gen.py)
            sut.setup(tb, built.topology)
            try:
                helpers = []
                for i, h in enumerate(built.helpers):  # chain VNFs (turnout-gen fwd)
                    args = [*self.gen, *h.args]
                    cpu = layout.vnf_cpu(i) if layout.vnf else None
                    if cpu is not None:
                        args += ["--cpu", str(cpu)]
                    # stdout: their snapshots (SIGUSR1) before and after every trial
                    helpers.append(VnfHandle(tb.spawn(args, netns=h.netns), name=h.name,
                                             cpu=cpu))
                measurer = GenMeasurer(
                    cmd=self.gen, streams=built.streams, spawn=tb.spawn,
                    size_b=point.frame_size_b, flows=point.flows, burst=point.burst,
                    sut_pids=sut.pids, helpers=helpers, warmup_s=spec.warmup_s,
                    bunch=point.scenario == "rtt",
                    sut_cost=sut.cost_sample if sut.cost_source else None,
                    cost_source=sut.cost_source,
                )
                if helpers:  # let the chain's memif/AF_XDP ports come up
                    time.sleep(1.5)
                    measurer.check_helpers()
                cfg: dict[str, Any] = dict(sut.config())
                cfg["tester"] = " ".join(self.gen[-1:])
                cfg["tester_version"] = gen_version(self.gen)
                cfg["tester_kernel_port"] = kernel_port
                cfg["layout"] = {"tester": list(layout.tester), "sut": list(layout.sut),
                                 "vnf": list(layout.vnf), "note": layout.note,
                                 "rps_cpus": layout.sut_cpus}
                if pygen:
                    cfg["tester_note"] = (
                        "pygen fallback (turnout-gen not found): one syscall per frame, "
                        "about 1e5 pps; these figures measure the tester, not the switch")

                def retarget(p: Point) -> None:
                    check(p, sut, roles)
                    measurer.size_b, measurer.flows, measurer.burst = (
                        p.frame_size_b, p.flows, p.burst)

                def recover() -> str:
                    sut.teardown()
                    for port in built.topology.ports:  # a dead server's socket files
                        if port.kind == "memif" and port.socket:
                            Path(port.socket).unlink(missing_ok=True)
                    sut.setup(tb, built.topology)
                    if helpers:
                        time.sleep(1.5)
                    return f"{sut_name} restarted"

                note = sut.kernel_threads_note()
                if note:
                    cfg["cpu_note"] = note
                yield Session(measurer=measurer,
                              sut=Sut(name=sut_name, version=sut.version(), config=cfg),
                              virtual_port=built.virtual_port, retarget=retarget,
                              recover=recover)
            finally:
                sut.teardown()


