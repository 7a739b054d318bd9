"""DPDK testpmd io/mac forwarding: the no-logic baseline (like basicfwd in
"Virtualized networking framework", docs/references.md). Ports are vdevs —
``net_memif`` (server) for memif ports, ``net_af_packet`` (or
``net_af_xdp``) for veths — ordered so that ``--port-topology=paired``
forwards exactly the cross-connects. Its memory is on 2 MiB hugepages
(DPDK's documented configuration; the testbed's, from a campaign's pool:
testbed/state.py ``HugepageHold``); when the kernel cannot give them it
runs with ``--no-huge`` and its config says so.

Options: ``TestpmdOptions``.
"""

from __future__ import annotations

import re
import subprocess
import threading
import time
from dataclasses import dataclass
from typing import Any

from ..hosts.base import HostError
from ..measure.cost import CostSample, cpu_list
from ..portkind import PortKind
from ..testbed import Testbed
from .base import SutAdapter, SutError, Topology, command_version
from .options import KERNEL_PORTS, Choice, Int, SutOptions, opt

__all__ = ["Testpmd", "TestpmdOptions", "lcores_for", "start_failure"]

BINARY = "dpdk-testpmd"

#: How long testpmd may take to start forwarding (seconds).
START_TIMEOUT_S = 60.0

#: EAL's start-up banner: says nothing about why testpmd failed.
_EAL_BANNER = ("EAL: Detected ", "EAL: Multi-process socket", "EAL: Selected IOVA")


def start_failure(log: str, rc: int | None, waited_s: float) -> str:
    """Why testpmd did not start forwarding, in one line: whether it exited
    (and how) or is still starting after ``waited_s``, and the last lines of
    its output other than EAL's banner (or that it printed nothing else)."""
    lines = [ln.strip() for ln in log.splitlines()
             if ln.strip() and not ln.startswith(_EAL_BANNER)]
    said = " | ".join(lines[-4:])[-600:] if lines else "nothing after EAL's banner"
    if rc is None:
        return (f"testpmd did not start forwarding within {waited_s:.0f} s "
                f"(still starting; its last output: {said})")
    return f"testpmd exited with status {rc} before forwarding: {said}"


def lcores_for(cpus: list[int]) -> tuple[int, str]:
    """testpmd's main lcore and ``-l`` list: the forwarding lcores are the
    SUT's CPUs; the main lcore (the command line, asleep on its stdin) is the
    lowest CPU outside them."""
    main = next(c for c in range(max(cpus) + 2) if c not in cpus)
    return main, ",".join(str(c) for c in [main, *cpus])


@dataclass(frozen=True)
class TestpmdOptions(SutOptions):
    """``[sut.testpmd]``."""

    __test__ = False  # not a pytest class

    forward_mode: str = opt("io", Choice("io", "mac"), "testpmd's --forward-mode")
    kernel_port: PortKind = opt(PortKind.AF_XDP, KERNEL_PORTS,
                                "the PMD on veths: net_af_xdp (the kind of port the tester, "
                                "turnoutd and OVS use there by default) or net_af_packet")
    hugepages: int = opt(512, Int(0, 65536), "2 MiB pages for the run (a campaign lends "
                         "them from its pool); 0: --no-huge")


class Testpmd(SutAdapter):
    name = "testpmd"
    Options = TestpmdOptions
    opts: TestpmdOptions
    supports_memif = True
    supports_vhost_user = True
    max_ports = 16

    def requires(self) -> list[tuple[str, str]]:
        return [(BINARY, "dpdk-dev")]

    def version(self) -> str:
        try:
            out = self.host.run(["dpkg-query", "-W", "-f=${Version}", "dpdk-dev"], check=False)
        except (OSError, HostError):
            out = None
        if out is not None and out.returncode == 0:
            return f"dpdk {out.stdout.strip()}"
        return command_version([BINARY, "--version"], host=self.host)

    def config(self) -> dict[str, Any]:
        return {"options": self.options, "argv": getattr(self, "argv", []),
                "memory": getattr(self, "memory", "")}

    def vdevs(self, topo: Topology) -> list[str]:
        """Its ``--vdev`` arguments, one per port, ordered so that
        ``--port-topology=paired`` forwards exactly the cross-connects."""
        order: list[str] = []
        for a, b in topo.xconnects:
            order += [a, b]
        order += [p.name for p in topo.ports if p.name not in order]
        vdevs = []
        for i, name in enumerate(order):
            p = topo.port(name)
            if p.kind is PortKind.MEMIF:
                # socket-abstract=no: a socket *file* (turnout-gen's memif
                # client does not use the abstract namespace)
                vdevs.append(f"--vdev=net_memif{i},role=server,socket={p.socket},"
                             "socket-abstract=no,id=0")
            elif p.kind is PortKind.VHOST_USER:
                vdevs.append(f"--vdev=net_vhost{i},iface={p.socket},queues=1")
            elif self.opts.kernel_port is PortKind.AF_XDP:
                vdevs.append(f"--vdev=net_af_xdp{i},iface={p.iface},start_queue=0,queue_count=1")
            else:
                vdevs.append(f"--vdev=net_af_packet{i},iface={p.iface}")
        return vdevs

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self.attach(tb, topo)
        vdevs = self.vdevs(topo)
        prefix = f"{tb.prefix}tp"
        tb.remember("dirs", f"/var/run/dpdk/{prefix}")
        cpus = cpu_list(topo.cpus) or [1]
        main, lcores = lcores_for(cpus)
        mode = self.opts.forward_mode
        # stdbuf: testpmd's stdout is a file; line-buffered, the answers to
        # interactive commands appear when given, not at exit
        stdbuf = self.host.which("stdbuf")
        pages = self.opts.hugepages
        self.memory = "--no-huge (4 KiB pages)"
        mem = ["--no-huge", "-m", "1024"]
        if pages > 0:
            try:
                huge = tb.reserve_hugepages(pages)
                mem = [f"--huge-dir={huge}", "-m", str(pages * 2)]
                self.memory = f"{pages} hugepages of 2 MiB"
            except Exception as e:  # fall back, and say so in the config
                self.memory = f"--no-huge: hugepages not available ({e})"
        self.argv = [*([stdbuf, "-oL", "-eL"] if stdbuf else []), BINARY, "--no-pci",
                     *mem, f"--file-prefix={prefix}",
                     "-l", lcores, "--main-lcore", str(main), *vdevs, "--",
                     f"--forward-mode={mode}", "--port-topology=paired",
                     "--total-num-mbufs=16384", "--auto-start", "-i",
                     "--record-core-cycles", f"--nb-cores={len(cpus)}"]
        d = tb.directory("testpmd")
        self.log = d / "testpmd.log"
        self.proc = tb.spawn(self.argv, netns=topo.ns, log=self.log, stdin=subprocess.PIPE)
        self._cost_lock = threading.Lock()
        #: how far the log has been read (the cost probe reads what follows)
        self._log_at = 0
        # EAL's memory set-up and the ports' probes take a few seconds, tens
        # on a loaded 2-core host (a 15 s limit failed testpmd's p2v and v2p
        # vhost-user cells at load 11; started alone they came
        # up at once).
        t0 = time.monotonic()
        text = ""
        while True:
            more, self._log_at = self.host.tail(self.log, self._log_at)
            text += more
            if "Start automatic packet forwarding" in text or "io packet forwarding" in text \
                    or "mac packet forwarding" in text:
                break
            rc = self.proc.poll()
            waited = time.monotonic() - t0
            if rc is not None or waited > START_TIMEOUT_S:
                raise SutError(start_failure(text, rc, waited))
            time.sleep(0.1)
        time.sleep(0.5)

    def variant(self) -> str:
        """"no-huge" when the hugepages it was given could not be reserved."""
        return "no-huge" if getattr(self, "memory", "").startswith("--no-huge:") else ""

    def teardown(self) -> None:
        if self.tb is not None and getattr(self, "proc", None) is not None:
            self.tb.stop(self.proc)
            self.host.rmtree(f"/var/run/dpdk/{self.tb.prefix}tp")

    def pids(self) -> list[int]:
        p = getattr(self, "proc", None)
        return [p.pid] if p is not None and p.poll() is None else []

    cost_source = ("testpmd --record-core-cycles: total cycles (TSC, bursts that brought "
                   "frames) over total io packets received (show fwd stats all)")
    _CYCLES = re.compile(r"CPU cycles/packet=[\d.]+ \((?:total|busy) cycles=(\d+) / "
                         r"total \w+ packets=(\d+)\)")
    #: the accumulated block of ``show fwd stats all``, closed: its RX-packets
    _ACCUMULATED = re.compile(r"Accumulated forward statistics for all ports\+*\s*\n"
                              r"\s*RX-packets:\s*(\d+).*?\n\s*\+{20,}\s*\n", re.S)

    @classmethod
    def parse_fwd_stats(cls, text: str) -> tuple[float, int] | None:
        """(total cycles, total packets) from testpmd's answer to ``show fwd
        stats all``; (0, 0) for an answer without the cycles line because
        nothing was received yet (testpmd prints that line only once there
        are packets: the start of a trial, before the first frame); None
        while the answer is not complete."""
        if m := cls._CYCLES.search(text):
            return float(m.group(1)), int(m.group(2))
        if (m := cls._ACCUMULATED.search(text)) and int(m.group(1)) == 0:
            return 0.0, 0
        return None

    def cost_sample(self) -> CostSample | None:
        p = getattr(self, "proc", None)
        if p is None or p.poll() is not None or p.stdin is None:
            return None
        with self._cost_lock:
            _, before = self.host.tail(self.log, self._log_at)  # what came meanwhile: skipped
            p.stdin.write(b"show fwd stats all\n")
            p.stdin.flush()
            deadline = time.monotonic() + 0.5
            text = ""
            while time.monotonic() < deadline:
                more, before = self.host.tail(self.log, before)
                text += more
                got = self.parse_fwd_stats(text)
                if got is not None:
                    self._log_at = before
                    return CostSample(0.0, got[0], got[1])
                time.sleep(0.005)
            self._log_at = before
        return None
