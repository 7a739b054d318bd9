"""turnoutd (docs/turnoutd.md): writes its TOML, starts this checkout's turnoutd
(``turnout.build``: target/release/turnoutd by default) in the SUT
namespace, checks it through the JSON-RPC control socket.

Options: ``TurnoutdOptions`` (``binary``: another build's turnoutd,
absolute or relative to this checkout; default this checkout's build:
``make bench-ab`` runs two builds side by side).

With ``logic = "flows"``, or at a point of the ``openflow`` scenario
(whatever ``logic`` says), turnoutd runs the ``flows`` logic with its
OpenFlow listener on a unix socket (``[switch] openflow = ["punix:..."]``)
and gets its rules the way OVS does, from ``ovs-ofctl -O OpenFlow13``: the
scenario's rule set with ``add-flows`` (turnout.ofrules), else the
cross-connects as ``in_port=a,actions=output:b`` flows, which the
``rule_update`` scenario changes with ``ovs-ofctl mod-flows`` as for OVS.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import build
from ..ctl.client import CtlClient, CtlConnectionError, CtlError, call, request_line, result_of
from ..hosts.base import Host, LocalHost
from ..measure.cost import CostSample, cpu_list
from ..ofrules import BULK_COOKIE, bulk_lines, dump_flows, install
from ..portkind import PortKind
from ..testbed import Testbed
from .base import SutAdapter, SutError, SutPort, Topology, command_version
from .options import KERNEL_PORTS, Choice, Int, SutOptions, Table, Text, opt
from .overlay_host import VNI, HostWiring, OverlayHost

__all__ = ["Turnoutd", "TurnoutdOptions", "TurnoutdOverlayHost", "TurnoutdPoll", "rpc"]

REPO = Path(__file__).resolve().parents[4]
BINARY = build.built("turnoutd")
#: flows per JSON-RPC call in ``bulk_flows`` (~70 B each: under the 1 MiB request limit)
BULK_CHUNK = 10_000
#: backend counters of frames the kernel dropped before turnoutd's rings
#: (AF_XDP: XDP_STATISTICS; AF_PACKET: PACKET_STATISTICS)
KERNEL_DROPS = ("kernel_rx_dropped", "kernel_rx_ring_full", "kernel_rx_drops")
#: longest one bulk install may take (ovs-ofctl add-flows, a JSON-RPC call)
BULK_TIMEOUT_S = 300.0


def rpc(sock_path: str, method: str, params: Any = None, timeout_s: float = 5.0,
        host: Host | None = None, client: CtlClient | None = None) -> Any:
    """One JSON-RPC 2.0 call over turnoutd's unix socket (on ``host``: this
    machine when None), through the workbench's one client (turnout.ctl):
    ``client``'s connection on this machine if given, else one of its own;
    raises SutError on an error answer, CtlConnectionError (an OSError)
    when turnoutd cannot be reached or answers no JSON-RPC."""
    try:
        if host is not None and not isinstance(host, LocalHost):
            line = request_line(method, params, 1).decode()
            return result_of(host.unix_call(sock_path, line.rstrip("\n"), timeout_s), 1)
        if client is not None:
            return client.call(method, params, timeout_s=timeout_s)
        return call(sock_path, method, params, timeout_s)
    except CtlError as e:
        raise SutError(f"turnoutd {method}: {e.message} (code {e.code})") from None


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return str(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    return json.dumps(str(v))


@dataclass(frozen=True)
class TurnoutdOptions(SutOptions):
    """``[sut.turnoutd]``: the keys of the TOML it gets (docs/turnoutd.md)."""

    logic: str = opt("patch", Text(), "the logic it runs (patch: the cross-connects; bridge, "
                     "flows or any logic turnoutd knows: it refuses an unknown one at start)")
    logic_options: dict[str, Any] | None = opt(None, Table(), "keys of its [logic] table")
    kernel_port: PortKind = opt(PortKind.AF_XDP, KERNEL_PORTS, "the kind of its veth ports "
                                "(af_xdp by default, as the tester's, testpmd's and OVS's)")
    kernel_port_options: dict[str, Any] | None = opt(
        None, Table(), "keys added to each veth port's [[ports]] table (e.g. "
        "{frames_per_queue = 4096} for af_xdp; docs/turnoutd.md)")
    underlay_port: PortKind | None = opt(None, KERNEL_PORTS, "the overlay scenario's tunnel "
                                         "underlay (default: kernel_port)")
    wakeup: str = opt("adaptive", Choice("adaptive", "poll"), "[switch] wakeup")
    latency_budget_us: int | None = opt(None, Int(0, 10_000, "µs"), "[switch] "
                                        "latency_budget_us (default: turnoutd's)")
    cpu_idle: str | None = opt(None, Choice("poll"), "[[workers]] cpu_idle")
    batch: int = opt(256, Int(32, 1024, "frames"), "[switch] batch")
    binary: str | None = opt(None, Text(), "another build's turnoutd (absolute or relative "
                             "to this checkout)")


@dataclass(frozen=True)
class TurnoutdPollOptions(TurnoutdOptions):
    """``[sut.turnoutd-poll]``: turnoutd's, busy-polling by default."""

    wakeup: str = opt("poll", Choice("adaptive", "poll"), "[switch] wakeup")


class TurnoutdOverlayHost(OverlayHost):
    """turnoutd on one host of the overlay: the ``patch`` logic between the
    pod and a ``vxlan`` port whose underlay is the host's end of the
    underlay veth (docs/overlay.md), on the adapter's ``underlay_port`` (or
    its ``kernel_port``)."""

    cost_source = "their workers' busy_cycles + sleep CPU (API stats)"

    def __init__(self, base: SutAdapter, host: str) -> None:
        super().__init__(base, host)
        assert isinstance(base, Turnoutd), base
        # the pod and the tunnel port cross-connected: the patch logic
        self.d = type(base)({**base.options, "logic": "patch"})
        self.d.name = f"{base.name}-host{host}"  # its work directory
        self.underlay_port = str(base.opts.underlay_port or base.opts.kernel_port)

    def setup(self, tb: Testbed, w: HostWiring, cpus: str) -> None:
        d = self.d
        topo = Topology(ns=w.ns, ports=[SutPort(name="pod", kind="veth", iface=w.pod_iface)],
                        xconnects=[("pod", "overlay")], cpus=cpus)
        # the tunnel port (docs/overlay.md), on the pod's worker
        d.extra_toml = "\n".join([
            "", "[[ports]]", 'name = "overlay"', 'kind = "vxlan"', f"vni = {VNI}",
            f'local_ip = "{w.local_ip}"', f'remotes = ["{w.remote_ip}"]',
            f'underlay = {{ kind = "{self.underlay_port}", iface = "{w.underlay_iface}" }}',
            "worker = 0", ""])
        d.setup(tb, topo)

    def tunnel(self) -> dict[str, Any]:
        for p in rpc(self.d.sock, "stats", timeout_s=2.0)["ports"]:
            if p["name"] == "overlay":
                return dict(p.get("backend", {}))
        raise SutError("turnoutd has no port 'overlay'")

    def ready(self) -> bool:
        return int(self.tunnel().get("remotes_resolved", 0)) >= 1

    def version(self) -> str:
        return self.d.version()

    def config(self) -> dict[str, Any]:
        return {"toml": getattr(self.d, "_toml", "")}

    def pids(self) -> list[int]:
        return self.d.pids()

    def sample(self) -> CostSample | None:
        return self.d.cost_sample()

    def teardown(self) -> None:
        self.d.teardown()


class Turnoutd(SutAdapter):
    name = "turnoutd"
    Options = TurnoutdOptions
    overlay_host = TurnoutdOverlayHost
    opts: TurnoutdOptions
    supports_memif = True
    supports_vhost_user = True
    takes_binary = True
    openflow = True
    #: TOML appended to the rendered config (the overlay's tunnel port)
    extra_toml = ""
    #: the connection ``stats`` is asked over (``_rpc``)
    _ctl: CtlClient | None = None

    @property
    def binary(self) -> Path:
        """The executable this adapter runs: option ``binary`` (relative to
        this checkout) or this checkout's release build."""
        b = self.opts.binary
        if not b:
            return BINARY
        p = Path(b)
        return p if p.is_absolute() else REPO / p

    def available(self) -> str | None:
        """This checkout's build (a remote campaign copies it to the SUT's
        host), and with the flows logic ovs-ofctl on the SUT's host."""
        b = self.binary
        if not b.exists():
            if b == BINARY:
                return f"{BINARY} not built (cargo build --release -p turnoutd)"
            return f"binary {b} does not exist (option binary = {self.options['binary']!r})"
        return super().available()

    def requires(self) -> list[tuple[str, str]]:
        return [("ovs-ofctl", "openvswitch-common")] if self.opts.logic == "flows" else []

    def build_version(self) -> str:
        """What the executable says of itself (``--version``: its version,
        API and the git commit it was built from), its path and when it was
        built (two builds of one commit with other uncommitted changes differ
        there only)."""
        v = command_version([str(self.binary), "--version"]) or "turnoutd"
        return f"{v} {self._where()}"

    def _where(self) -> str:
        return f"[{self.binary}, built {time.ctime(self.binary.stat().st_mtime)}]"

    def version(self) -> str:
        if getattr(self, "_version", ""):
            return str(self._version)
        return self.build_version()

    def logic(self, topo: Topology | None = None) -> str:
        """The logic it runs: ``flows`` at an openflow point."""
        t = topo or self.topo
        return "flows" if t is not None and t.openflow is not None else self.opts.logic

    def render_config(self, topo: Topology, sock: str) -> str:
        o = self.opts
        logic = self.logic(topo)
        cpus = cpu_list(topo.cpus) or [1]
        lines = ["[switch]", f"control_socket = {_toml_value(sock)}",
                 f"batch = {o.batch}",
                 f"max_ports = {max(64, len(topo.ports) + 8)}",
                 f"wakeup = {_toml_value(o.wakeup)}"]
        if o.latency_budget_us is not None:
            lines.append(f"latency_budget_us = {o.latency_budget_us}")
        if logic == "flows":
            lines.append(f"openflow = {_toml_value(['punix:' + self.of_sock(sock)])}")
        # one worker per SUT CPU; ports spread over them round robin
        for cpu in cpus:
            lines += ["", "[[workers]]", f"cpu = {cpu}"]
            if o.cpu_idle:
                lines.append(f"cpu_idle = {_toml_value(o.cpu_idle)}")
        lines += ["", "[logic]", f"name = {_toml_value(logic)}"]
        if logic == "patch":
            lines.append(f"pairs = {_toml_value([list(x) for x in topo.xconnects])}")
        if logic == o.logic:  # not the patch's options at an openflow point
            for k, v in (o.logic_options or {}).items():
                lines.append(f"{k} = {_toml_value(v)}")
        for i, p in enumerate(topo.ports):
            lines += ["", "[[ports]]", f"name = {_toml_value(p.name)}"]
            if p.kind is PortKind.MEMIF:
                lines += ['kind = "memif"', f"socket = {_toml_value(p.socket)}", "id = 0"]
            elif p.kind is PortKind.VHOST_USER:
                lines += ['kind = "vhost_user"', f"socket = {_toml_value(p.socket)}",
                          "max_frame_b = 9000"]
            else:
                lines += [f"kind = {_toml_value(str(o.kernel_port))}",
                          f"iface = {_toml_value(p.iface)}"]
                lines += [f"{k} = {_toml_value(v)}"
                          for k, v in (o.kernel_port_options or {}).items()]
            lines.append(f"worker = {i % len(cpus)}")
        return "\n".join(lines) + "\n" + self.extra_toml

    @staticmethod
    def of_sock(sock: str) -> str:
        """Its OpenFlow listener's socket, next to the control socket."""
        return str(Path(sock).with_name("openflow.sock"))

    def config(self) -> dict[str, Any]:
        c: dict[str, Any] = {"options": self.options, "toml": getattr(self, "_toml", ""),
                             "binary": str(self.binary),
                             "binary_version": getattr(self, "_built", "")}
        if getattr(self, "of_install", ""):
            c["logic"] = "flows"
            c["openflow_install"] = self.of_install
        return c

    def ofctl(self, *args: str, timeout_s: float = 60.0) -> str:
        """``ovs-ofctl -O OpenFlow13 CMD unix:SOCK ARGS`` against its
        listener, run where turnoutd runs (its socket is a file there)."""
        cmd = ["ovs-ofctl", "-O", "OpenFlow13", args[0], f"unix:{self.of_sock(self.sock)}",
               *args[1:]]
        if self.host.is_local:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
        else:
            assert self.tb is not None and self.topo is not None
            r = self.tb.run(cmd, netns=self.topo.ns, check=False, timeout_s=timeout_s)
        if r.returncode != 0:
            raise SutError(f"{' '.join(cmd)}: {r.stderr.strip()[-400:]}")
        return str(r.stdout).strip()

    def dump_flows(self) -> list[tuple[int, str, int]]:
        """Its flows as ``ovs-ofctl dump-flows`` sees them (ofrules.dump_flows)."""
        return dump_flows(f"unix:{self.of_sock(self.sock)}")

    def _install_rules(self, topo: Topology, d: Path) -> None:
        """The flows logic's rules through its OpenFlow listener (class doc)."""
        deadline = time.monotonic() + 10
        while not self.host.exists(self.of_sock(self.sock)):
            if time.monotonic() > deadline:
                raise SutError("turnoutd did not open its OpenFlow socket")
            time.sleep(0.05)
        if topo.openflow is not None:
            try:
                self.of_install = install(topo.openflow, f"unix:{self.of_sock(self.sock)}", d)
            except RuntimeError as e:
                raise SutError(str(e)) from e
            return
        ofport = {p.name: i + 1 for i, p in enumerate(topo.ports)}
        flows = [f"in_port={ofport[x]},actions=output:{ofport[y]}"
                 for a, b in topo.xconnects for x, y in ((a, b), (b, a))]
        for f in flows:
            self.ofctl("add-flow", f)
        self.of_install = "ovs-ofctl -O OpenFlow13 add-flow " + " ; ".join(flows)

    def _rpc(self, method: str, params: Any = None, timeout_s: float = 5.0) -> Any:
        """One call. ``stats`` on this machine goes over one connection kept
        for the daemon's life: the cost sampler asks for it every 50 ms
        through a trial, and a connection each time made turnoutd start and
        end a connection thread 20 times a second, whose kernel work
        (thread and socket teardown, RCU grace periods, TLB shootdowns)
        landed on the worker's CPU, where no other SUT's measurement put
        any. ``stats`` only reads, so a connection found broken (a restarted
        or idle-closing daemon) is reopened and the call made again once."""
        if method != "stats" or not self.host.is_local:
            return rpc(self.sock, method, params, timeout_s, host=self.host)
        lock = self.__dict__.setdefault("_ctl_lock", threading.Lock())
        with lock:
            for attempt in (0, 1):
                if self._ctl is None or self._ctl.path != self.sock:
                    self._close_ctl()
                    self._ctl = CtlClient(self.sock, timeout_s)
                try:
                    return rpc(self.sock, method, params, timeout_s, host=self.host,
                               client=self._ctl)
                except CtlConnectionError:
                    self._close_ctl()
                    if attempt:
                        raise
        raise AssertionError("unreachable")

    def _close_ctl(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None

    def setup(self, tb: Testbed, topo: Topology) -> None:
        self._close_ctl()
        self.attach(tb, topo)
        d = tb.directory(self.name)  # the overlay's hosts: one each
        self.sock = str(d / "turnoutd.sock")
        self._toml = self.render_config(topo, self.sock)
        cfg = d / "turnoutd.toml"
        self.host.write_text(cfg, self._toml)
        self._built = self.build_version()
        self.proc = tb.spawn([str(self.binary), "--config", str(cfg)], netns=topo.ns,
                             log=d / "turnoutd.log")
        deadline = time.monotonic() + 10
        while not self.host.exists(self.sock):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.host.read_text(d / "turnoutd.log")[-600:]
                raise SutError(f"turnoutd did not open its control socket: {tail}")
            time.sleep(0.05)
        v = self._rpc("version")
        self._version = (f"{v.get('version')} api {v.get('api')} git {v.get('git')} "
                         f"{self._where()}")
        ports = self._rpc("port.list")
        names = {p["name"] for p in ports}
        missing = [p.name for p in topo.ports if p.name not in names]
        if missing:
            raise SutError(f"turnoutd is missing ports {missing}")
        if self.logic(topo) == "flows":
            self._install_rules(topo, d)

    @property
    def has_rules(self) -> bool:  # type: ignore[override]
        return self.logic() in ("patch", "bridge", "flows")

    def move_rule(self, src: str, dst: str, to: str) -> str:
        """A logic command on the control socket: patch ``set`` (one way),
        or bridge ``add`` (a static entry for dst's MACs on ``to``); with
        the flows logic ``ovs-ofctl mod-flows`` on its OpenFlow listener,
        the same command OVS gets."""
        assert self.topo is not None
        if self.logic() == "flows":
            ofport = {p.name: i + 1 for i, p in enumerate(self.topo.ports)}
            flow = f"in_port={ofport[src]},actions=output:{ofport[to]}"
            self.ofctl("mod-flows", flow)
            return f"ovs-ofctl -O OpenFlow13 mod-flows unix:SOCK {flow}"
        if self.opts.logic == "patch":
            cmds = [{"cmd": "set", "args": {"from": src, "to": to, "bidirectional": False}}]
        else:
            cmds = [{"cmd": "add", "args": {"mac": mac, "port": to}}
                    for mac in self.topo.port(dst).macs]
        for c in cmds:
            self._rpc("logic.command", c)
        return "; ".join(f"logic.command {json.dumps(c)}" for c in cmds)

    @property
    def bulk_interfaces(self) -> tuple[str, ...]:  # type: ignore[override]
        return ("ovs-ofctl", "json-rpc") if self.logic() == "flows" else ()

    def bulk_flows(self, interface: str, n: int) -> str:
        """``ovs-ofctl -O OpenFlow13 add-flows`` of a file on the OpenFlow
        listener, or the flows logic's ``add`` command on the control socket
        (JSON-RPC ``logic.command``, ``BULK_CHUNK`` flows a call: a request
        is at most 1 MiB); removed with ``del-flows cookie=...``."""
        assert self.tb is not None
        lines = bulk_lines(n)
        if interface == "ovs-ofctl":
            f = self.tb.directory(self.name) / f"bulk{n}.txt"
            f.write_text("".join(x + "\n" for x in lines))
            self.ofctl("add-flows", str(f), timeout_s=BULK_TIMEOUT_S)
            what = f"ovs-ofctl -O OpenFlow13 add-flows unix:SOCK {f.name}"
        elif interface == "json-rpc":
            for i in range(0, n, BULK_CHUNK):
                rpc(self.sock, "logic.command",
                    {"cmd": "add", "args": {"flows": lines[i:i + BULK_CHUNK]}},
                    timeout_s=BULK_TIMEOUT_S)
            what = (f"logic.command add {{flows: [...]}} x {-(-n // BULK_CHUNK)} "
                    f"(<= {BULK_CHUNK} flows a call)")
        else:
            raise SutError(f"turnoutd: no bulk interface {interface!r}")
        return what

    def drop_counts(self, by_port: bool = False) -> dict[str, int]:
        """Frames turnoutd dropped, by reason, summed over its ports (JSON-RPC
        ``stats``), and those the kernel dropped before its receive rings
        (the backends' ``KERNEL_DROPS`` counters): where frames lost in a
        trial went, if here. ``by_port``: keyed "port reason" instead."""
        out: dict[str, int] = {}
        for p in self._rpc("stats")["ports"]:
            counts = [(k, int(n)) for k, n in p.get("drops", {}).items()]
            counts += [(k, int(n)) for k, n in p.get("backend", {}).items()
                       if k in KERNEL_DROPS]
            for k, n in counts:
                key = f"{p.get('name', '?')} {k}" if by_port else k
                out[key] = out.get(key, 0) + n
        return out

    def remove_bulk_flows(self) -> None:
        self.ofctl("del-flows", f"cookie={BULK_COOKIE:#x}/-1")

    def teardown(self) -> None:
        self._close_ctl()
        if self.tb is not None and getattr(self, "proc", None) is not None:
            self.tb.stop(self.proc)

    def pids(self) -> list[int]:
        p = getattr(self, "proc", None)
        return [p.pid] if p is not None and p.poll() is None else []

    cost_source = ("turnoutd workers: busy_cycles (TSC cycles of batches that moved frames; "
                   "empty polls, sleeps and wake-ups excluded) over frames received (API `stats`)")

    def cost_sample(self) -> CostSample | None:
        """Capacity: the workers' cycles of work on frames only, as testpmd's
        and OVS's accounts count them. What idle polling, sleeping and
        waking cost is in the CPU at this load (the threads' OS CPU time),
        never here: docs/bench.md, "Capacity and CPU at this load"."""
        if not getattr(self, "sock", "") or not self.pids():
            return None
        stats = self._rpc("stats", timeout_s=1.0)
        workers = stats.get("workers", [])
        cycles = sum(float(w["busy_cycles"]) for w in workers)
        # of them, the kicks' (their system calls); a turnoutd without the
        # counter has none
        kicks = (sum(float(w["kick_cycles"]) for w in workers)
                 if all("kick_cycles" in w for w in workers) else None)
        return CostSample(0.0, cycles, sum(int(w["packets"]) for w in workers), kicks=kicks)


    #: fields of a worker's ``policy`` (API ``stats``) kept in ``extra.sut_wake``
    #: (``budget_ns``: the budget the worker decided against, so the report can
    #: say "wake-up p99 over the budget" with both figures from the trial)
    WAKE_FIELDS = ("regime", "why", "budget_ns", "wake_p50_ns", "wake_p99_ns", "poll_p99_ns",
                   "poll_slow_epochs", "contention_signal", "rq_wait_permille",
                   "timer_p99_ns", "sleep_after_ns", "nap_ns", "nap_overshoot_ns",
                   "nap_tail_naps", "nap_pass_ns", "nap_retry_in_ns")

    def wake_state(self) -> dict[str, Any] | None:
        """Each worker's wake-up regime, why, the p99s it decided on, and
        its sleep counters (docs/turnoutd.md, "Wake-up and the latency
        budget")."""
        if not getattr(self, "sock", "") or not self.pids():
            return None
        rows = []
        st = self._rpc("stats", timeout_s=1.0)
        for w in st.get("workers", []):
            pol = w.get("policy") or {}
            rows.append({k: w.get(k, 0) for k in ("packets", "batches", "sleeps", "wakeups",
                                                  "naps", "backoffs", "held_ns")}
                        | {"wake_samples": pol.get("wake_samples", 0)}
                        | {k: pol.get(k) for k in self.WAKE_FIELDS})
        # the notifications its transmit paid for, per port that kicks
        # (memif and vhost-user eventfd writes, AF_XDP and AF_PACKET sendto)
        ports = [{"name": p.get("name", ""), "kind": p.get("kind", ""),
                  "tx_packets": p.get("tx_packets", 0),
                  "tx_kicks": (p.get("backend") or {}).get("tx_kicks", 0)}
                 for p in st.get("ports", []) if "tx_kicks" in (p.get("backend") or {})]
        return {"workers": rows, "ports": ports}


class TurnoutdPoll(Turnoutd):
    """turnoutd with its workers busy-polling (``wakeup = "poll"``): the
    latency end of its CPU-vs-latency trade-off, next to the default
    adaptive wake-up in the same campaign."""

    name = "turnoutd-poll"
    Options = TurnoutdPollOptions

    def __init__(self, options: dict[str, Any] | None = None) -> None:
        # stored with its results as before: the wake-up it runs is in its options
        super().__init__({"wakeup": "poll", **(options or {})})
