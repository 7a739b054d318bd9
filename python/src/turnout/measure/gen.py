"""Drives turnout-gen (docs/turnout-gen.md) as a Measurer.

A ``GenMeasurer`` knows the streams of a scenario (where each one is sent
and received) and, per trial, starts receivers, then senders, waits, and
turns the JSON documents into one ``TrialCounts``. Conventions
(docs/bench.md, "What every number means"):

- ``load_total_pps`` is the aggregate over all streams, split evenly among
  them; R+, rx and tx rates are aggregates too.
- Loss is per stream from turnout-gen's sequence numbers: ``lost`` frames
  never arrived (duplicates do not cancel losses), ``duplicated`` and
  ``reordered`` are counted apart; ``received`` counts distinct frames.
  Frames the tester could not enqueue (``tx.full``) are ``unsent``: the
  tester's shortfall, never the switch's loss.
- Two streams that are each other's reverse (a bidirectional point) run in
  one ``txrx --bidir`` process, which opens each port once.
- Chain VNFs (long-running ``fwd``) are asked for a snapshot (SIGUSR1)
  before and after each trial; their drops in between are ``vnf_dropped``
  and their own report goes into ``extra["vnfs"]``.
- CPU: the SUT's and the VNFs' threads are sampled from /proc during the
  trial and cut to the traffic window turnout-gen reports
  (``measure/cpu.py``); the tester's CPU in that window comes from
  turnout-gen itself.
- Latency: every stream's histogram is merged into the trial's
  percentiles and CDF; each stream's summary stays in
  ``extra["streams"]``.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import build
from ..hosts.base import Host, LocalHost
from ..hosts.procfs import CLK_TCK
from .cost import CostSample, CostSampler, cost_in_window
from .counts import TrialCounts
from .cpu import CpuSampler, NativeCpuSampler, local_sampler, nominal_hz, off_cpus, sched_wait
from .kernel import KernelShare, kernel_share
from .others import OthersSampler, others_in_window
from .placement import probe as cpu_rtt_probe
from .schedtrace import TESTER_COMM, named
from .schedtrace import summarize as summarize_trace

__all__ = [
    "REFUSED",
    "GenError",
    "GenMeasurer",
    "GenProc",
    "PeerAbsent",
    "Stream",
    "VnfHandle",
    "find_gen",
    "gen_version",
    "load_refused",
    "merge_latency",
    "tester_bound",
]

REPO = Path(__file__).resolve().parents[4]

#: Share of send attempts the port must push back for the SUT to count as
#: the limit of a saturating trial.
PUSHBACK_MIN = 0.10
#: Share of receive bursts that filled the batch right after a full one
#: (frames kept waiting) above which the tester's receiver was behind.
RX_BEHIND_MIN = 0.10
#: A saturating trial in which the SUT lost at least this share (PDR's
#: threshold) was limited by the SUT even without push-back (kernel paths
#: drop instead of pushing back).
SUT_LOSS_MIN = 0.005
#: At a given load, a tester that sent less than this share of it without
#: being pushed back could not offer the load.
OFFERED_MIN = 0.97


def _cmdline(p: subprocess.Popen[bytes]) -> str:
    """A process's command line as text (``args`` is a string or a list)."""
    args = p.args
    if isinstance(args, (str, bytes, os.PathLike)):
        return os.fsdecode(args)
    return " ".join(os.fsdecode(a) for a in args)


class GenError(RuntimeError):
    """turnout-gen failed (exit code and stderr in the message)."""


class PeerAbsent(GenError):
    """A trial could not start: the SUT's port never answered the tester
    (turnout-gen exit 3). The campaign runner restarts the SUT once
    (``Session.recover``) and retries the item."""


def find_gen(allow_pygen: bool = True) -> list[str] | None:
    """The turnout-gen command: $TURNOUT_GEN, this checkout's build
    (``turnout.build``: target/release/turnout-gen by default),
    turnout-gen on PATH, else the Python reference tester (when allowed)."""
    env = os.environ.get("TURNOUT_GEN")
    if env:
        return env.split()
    built = build.built("turnout-gen")
    if built.exists():
        return [str(built)]
    on_path = shutil.which("turnout-gen")
    if on_path:
        return [on_path]
    if allow_pygen:
        return [sys.executable, "-m", "turnout.measure.pygen"]
    return None


def gen_version(cmd: list[str]) -> str:
    """The tester's version from a 1-frame dry run is not possible without a
    port, so: the binary's --version, or pygen's constant."""
    if cmd[-1].endswith("pygen"):
        from .pygen import VERSION

        return VERSION
    try:
        out = subprocess.run([*cmd, "--version"], capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"


@dataclass
class Stream:
    """One direction of traffic: sent on ``tx_port`` in ``tx_ns``, received
    on ``rx_port`` in ``rx_ns`` (turnout-gen port specs). ``reverse_of``:
    the id of the stream this one is the reverse of (bidirectional points;
    its id is then that id + 1)."""

    tx_port: str
    rx_port: str
    tx_ns: str | None
    rx_ns: str | None
    src_mac: str
    dst_mac: str
    id: int = 0
    tx_cpu: int | None = None
    rx_cpu: int | None = None
    reverse_of: int | None = None
    name: str = ""  # e.g. "t0>t1", for reports

    @property
    def split(self) -> bool:
        """Sent and received by separate processes: the ends are in different
        namespaces, or the receiver has a core of its own. Otherwise one
        ``txrx`` thread does both (on 2 cores a separate receiver would
        time-share the sender's core and overflow while it runs)."""
        return self.tx_ns != self.rx_ns or (self.rx_cpu is not None and self.rx_cpu != self.tx_cpu)


@dataclass
class GenProc:
    """A long-running turnout-gen helper (a ``fwd`` VNF or a reflector)."""

    args: list[str]
    netns: str | None = None
    cpu: int | None = None
    name: str = ""
    #: busy-polls its ports (False: sleeps on their memif eventfds when idle)
    polls: bool = True


class VnfHandle:
    """A running helper whose stdout carries JSON lines: its snapshots
    (answers to SIGUSR1) and, at the end, its final document."""

    def __init__(self, proc: subprocess.Popen[bytes], name: str = "",
                 cpu: int | None = None, polls: bool = True, sched: str = "other",
                 sched_why: str = "", where: str = "") -> None:
        self.proc = proc
        #: the host it runs on across hosts (``@HOST``; "" here): its CPU is that host's
        self.where = where
        self.sched = sched  # its scheduling policy: "other" or "fifo:PRIO"
        self.sched_why = sched_why
        self.name = name or _cmdline(proc)[-60:]
        self.cpu = cpu  # the CPU it is pinned to (None: not pinned)
        self.polls = polls  # False: it sleeps on its ports' eventfds when idle
        self.lines: queue.Queue[str] = queue.Queue()
        self._reader: threading.Thread | None = None
        if proc.stdout is not None:
            self._reader = threading.Thread(target=self._read, daemon=True)
            self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").strip()
            if line.startswith("{"):
                self.lines.put(line)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def snapshot(self, timeout_s: float = 2.0) -> dict[str, Any] | None:
        """Ask for a snapshot and wait for it; None if it does not answer."""
        if not self.alive() or self._reader is None:
            return None
        while not self.lines.empty():  # drop anything stale
            self.lines.get_nowait()
        self.proc.send_signal(signal.SIGUSR1)
        try:
            doc = json.loads(self.lines.get(timeout=timeout_s))
        except (queue.Empty, ValueError):
            return None
        return doc if isinstance(doc, dict) else None


def vnf_delta(before: dict[str, Any] | None, after: dict[str, Any] | None) -> dict[str, Any]:
    """What a VNF did between two snapshots: per direction received,
    forwarded and dropped by reason, and its thread's CPU."""
    if not before or not after:
        return {"error": "no snapshot"}
    out: dict[str, Any] = {"directions": []}
    bdirs = {d["name"]: d for d in before.get("fwd", {}).get("directions", [])}
    keys = ("received", "packets", "dropped_tx_full", "dropped_oversize", "dropped_runt")
    dropped = received = forwarded = 0
    for d in after.get("fwd", {}).get("directions", []):
        b = bdirs.get(d["name"], {})
        row = {"name": d["name"], **{k: int(d.get(k, 0)) - int(b.get(k, 0)) for k in keys}}
        row["dropped"] = row["dropped_tx_full"] + row["dropped_oversize"] + row["dropped_runt"]
        out["directions"].append(row)
        dropped += row["dropped"]
        received += row["received"]
        forwarded += row["packets"]
    if "rx" in after and "fwd" not in after:
        # a sink (turnout-gen rx draining a mirror port): every frame it
        # took, warm-up and foreign ones included (it forwards nothing)
        keys_rx = ("packets", "warmup", "foreign")
        b_rx = before.get("rx") or {}
        received = sum(int(after["rx"].get(k, 0)) - int(b_rx.get(k, 0)) for k in keys_rx)
    out.update(received=received, forwarded=forwarded, dropped=dropped,
               cpu_s=(int(after.get("thread_cpu_ns") or 0)
                      - int(before.get("thread_cpu_ns") or 0)) / 1e9)
    if after.get("sleeps") is not None:
        # interrupt mode: its sleeps on the notify fds (each ended by a
        # sender's kick unless it timed out)
        out["sleeps"] = int(after["sleeps"]) - int(before.get("sleeps") or 0)
    return out


Spawner = Callable[..., subprocess.Popen[bytes]]


@dataclass
class _Task:
    """One turnout-gen process of a trial."""

    role: str  # txrx | tx | rx
    streams: list[Stream]
    netns: str | None
    #: txrx: each pair's stream is followed by its reverse (``--bidir``)
    bidir: bool = False
    args: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None
    doc: dict[str, Any] | None = None


#: counters of a SUT's ``wake_state`` workers that wake_delta subtracts;
#: every other field is the state after the traffic
WAKE_COUNTERS = ("packets", "batches", "sleeps", "wakeups", "naps", "backoffs",
                 "held_ns", "wake_samples")
#: counters of a SUT's ``wake_state`` ports that wake_delta subtracts
PORT_COUNTERS = ("tx_packets", "tx_kicks")


def wake_delta(before: dict[str, Any] | None, after: dict[str, Any] | None,
               during: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """``extra.sut_wake``: per worker of the SUT, its wake-up state while
    the traffic flowed (turnoutd: the regime, why, the wake-up p99 it
    decided on; read in the traffic window, ``during``; ``state_at``
    "traffic") or, without that read, after it (``state_at`` "after": a
    worker that napped under traffic may have turned to sleeping on
    notifications once the frames stopped), and its counters over the
    traffic (sleeps, sleeps ended by frames, naps, wake-up samples
    taken...). None when the SUT keeps no such account."""
    if after is None:
        return None
    if "error" in after or before is None or "error" in before:
        return {"error": (after.get("error") or (before or {}).get("error")
                          or "no state before the traffic")}
    mid = (during.get("workers") or []) if during and "error" not in during else []
    rows = []
    for i, w in enumerate(after.get("workers", [])):
        b = (before.get("workers") or [])[i] if i < len(before.get("workers") or []) else {}
        m = mid[i] if i < len(mid) else {}
        rows.append({k: (int(v) - int(b.get(k, 0)) if k in WAKE_COUNTERS else m.get(k, v))
                     for k, v in w.items()})
    out: dict[str, Any] = {"workers": rows, "state_at": "traffic" if mid else "after"}
    if "ports" in after:
        # by name: a port added or removed between the reads counts from 0
        bports = {p.get("name"): p for p in before.get("ports") or []}
        out["ports"] = [{k: (int(v) - int(bports.get(p.get("name"), {}).get(k, 0))
                             if k in PORT_COUNTERS else v) for k, v in p.items()}
                        for p in after["ports"]]
    return out


def plan_tasks(streams: list[Stream], multi_pair: bool = True) -> list[_Task]:
    """Group streams into processes: a stream and its reverse in one
    ``txrx --bidir`` (each port opened once); other unsplit streams one
    ``txrx`` each; split streams a ``rx`` and a ``tx`` each.

    ``multi_pair`` (turnout-gen's ``txrx --pair``): the ``txrx`` processes
    pinned to the same CPU of one namespace become one, which drives all
    their pairs in one thread. Two busy-polling testers on one core take
    turns of a scheduler time slice, and a frame that returns to one
    between its slices waits for the next (docs/bench.md, "Core
    layouts")."""
    by_id = {s.id: s for s in streams}
    tasks: list[_Task] = []
    taken: set[int] = set()
    for s in streams:
        if s.id in taken:
            continue
        rev = next((r for r in streams if r.reverse_of == s.id), None)
        if rev is not None and not s.split and not rev.split and rev.id == s.id + 1 \
                and rev.tx_port == s.rx_port and rev.rx_port == s.tx_port:
            tasks.append(_Task("txrx", [s, rev], s.tx_ns, bidir=True))
            taken |= {s.id, rev.id}
        elif not s.split:
            tasks.append(_Task("txrx", [s], s.tx_ns))
            taken.add(s.id)
        else:
            tasks.append(_Task("rx", [s], s.rx_ns))
            tasks.append(_Task("tx", [s], s.tx_ns))
            taken.add(s.id)
    assert taken == set(by_id)
    return _one_per_core(tasks) if multi_pair else tasks


def _one_per_core(tasks: list[_Task]) -> list[_Task]:
    """``txrx`` tasks of one namespace pinned to one CPU, all bidirectional
    or all not and with no port in common, merged in order into the first
    of them (its first stream is the main one, the others its ``--pair`` options)."""
    out: list[_Task] = []
    into: dict[tuple[str | None, int, bool], _Task] = {}
    for t in tasks:
        cpu = t.streams[0].tx_cpu
        if t.role != "txrx" or cpu is None:
            out.append(t)
            continue
        key = (t.netns, cpu, t.bidir)
        host = into.get(key)
        ports = {p for s in t.streams for p in (s.tx_port, s.rx_port)}
        if any(";" in p for p in ports):  # a --pair cannot carry it
            out.append(t)
            continue
        if host is not None and not ports & {p for s in host.streams
                                             for p in (s.tx_port, s.rx_port)}:
            host.streams.extend(t.streams)
            continue
        into[key] = t
        out.append(t)
    return out


def pair_args(t: _Task) -> list[str]:
    """``--pair`` of each pair of a ``txrx`` task after its first (its
    reverse right after it with ``--bidir``): ports, stream id and MACs;
    the IPs and every other option are the first pair's."""
    step = 2 if t.bidir else 1
    out: list[str] = []
    for i in range(step, len(t.streams), step):
        s = t.streams[i]
        items = [f"port={s.tx_port}"]
        if s.rx_port != s.tx_port:
            items.append(f"rx-port={s.rx_port}")
        items += [f"stream={s.id}", f"src-mac={s.src_mac}", f"dst-mac={s.dst_mac}"]
        if t.bidir:
            r = t.streams[i + 1]
            items += [f"src-mac2={r.src_mac}", f"dst-mac2={r.dst_mac}"]
        out += ["--pair", ";".join(items)]
    return out


def merge_latency(hists: list[list[list[float]]]) -> dict[str, Any]:
    """Percentiles and a CDF of the union of several turnout-gen histograms
    (``latency_ns.hist``: [value_ns, count] buckets)."""
    counts: dict[float, int] = {}
    for h in hists:
        for v, c in h:
            counts[float(v)] = counts.get(float(v), 0) + int(c)
    total = sum(counts.values())
    if total == 0:
        return {}
    items = sorted(counts.items())
    out: dict[str, Any] = {}
    targets = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "p999": 0.999}
    acc = 0
    cdf: list[list[float]] = []
    step = max(1, len(items) // 190)
    for i, (v, c) in enumerate(items):
        acc += c
        for k, q in targets.items():
            if k not in out and acc >= q * total:
                out[k] = v
        if i % step == 0 or i == len(items) - 1:
            cdf.append([v, acc / total])
    out["cdf"] = cdf
    return out


def tester_bound(load_total_pps: float, duration_s: float, sent: int, lost: int, unsent: int,
                 attempts: int = 0, pushback: int = 0, bursts: int = 0, backlog_bursts: int = 0,
                 vnf_dropped: int = 0) -> tuple[bool, str]:
    """Whether the tester, not the SUT, limited a trial, and why (from the
    tester's own evidence, never from a single lost frame).

    - The receiver was behind (≥ 10 % of its bursts backlogged): tester.
    - As fast as possible (load 0): the port pushed back on ≥ 10 % of the
      sender's attempts, or the SUT lost at least 0.5 % of what was sent
      (kernel paths drop instead of pushing back): the SUT set the rate.
      Otherwise the SUT took what the tester could make: tester-bound, the
      rate a lower bound of the SUT's (parity counts as tester-bound, the
      conservative reading).
    - At a given load: the tester sent under 97 % of it and the SUT's port
      was not why (``load_refused``): it could not offer the load. When the
      port was why, the trial is not tester-bound and its reason says
      "SUT could not take the load".
    """
    if bursts > 0 and backlog_bursts >= RX_BEHIND_MIN * bursts:
        return True, f"receiver behind on {backlog_bursts}/{bursts} bursts"
    pushed = attempts > 0 and pushback >= PUSHBACK_MIN * attempts
    if load_total_pps <= 0:
        if pushed:
            return False, f"the port pushed back on {pushback}/{attempts} attempts"
        sut_lost = max(0, lost - vnf_dropped)
        if sent > 0 and sut_lost >= SUT_LOSS_MIN * sent:
            return False, f"the SUT lost {sut_lost / sent:.2%} of what was sent"
        return True, (f"the SUT kept up with the tester (lost {max(0, lost - vnf_dropped)}, "
                      f"pushback on {pushback}/{attempts} attempts)")
    refused = load_refused(load_total_pps, duration_s, sent, unsent, attempts, pushback)
    if refused:
        return False, refused
    intended = load_total_pps * duration_s
    if intended > 0 and sent < OFFERED_MIN * intended:
        return True, f"the tester offered {sent / intended:.1%} of the load ({unsent} unsent)"
    return False, ""


#: the words every report and table uses for a trial whose SUT refused part
#: of the load it was offered (``load_refused``)
REFUSED = "SUT could not take the load"


def load_refused(load_total_pps: float, duration_s: float, sent: int, unsent: int,
                 attempts: int = 0, pushback: int = 0) -> str:
    """Why the SUT could not take a given load, or "" when it took it (or
    when the tester, not the SUT, fell short).

    The tester sent less than ``OFFERED_MIN`` of the frames the load asked
    for in its window, and the SUT's port is why: it pushed back on at
    least ``PUSHBACK_MIN`` of the send attempts, or the frames that were due
    but did not fit the port (``unsent``, turnout-gen's ``full``) are at
    least half of the frames missing. A paced sender that was merely behind
    its schedule (descheduled) leaves no unsent frames: that shortfall is
    the tester's. Saturating trials (load 0) are judged by ``tester_bound``.
    """
    if load_total_pps <= 0 or duration_s <= 0:
        return ""
    intended = load_total_pps * duration_s
    if sent >= OFFERED_MIN * intended:
        return ""
    pushed = attempts > 0 and pushback >= PUSHBACK_MIN * attempts
    if not pushed and unsent < 0.5 * (intended - sent):
        return ""
    return (f"{REFUSED}: the tester sent {sent / intended:.1%} of it, {unsent} frames did "
            f"not fit the SUT's port (pushback on {pushback}/{attempts} attempts)")


@dataclass
class GenMeasurer:
    """Measurer over turnout-gen processes started with ``spawn`` (Testbed.spawn)."""

    cmd: list[str]
    streams: list[Stream]
    spawn: Spawner
    size_b: int = 64
    flows: int = 1
    burst: int = 32
    sut_pids: Callable[[], list[int]] = field(default=lambda: [])
    #: the SUT's own account of busy cycles and frames (SutAdapter.cost_sample),
    #: sampled through every trial: its cost per frame (measure/cost.py)
    sut_cost: Callable[[], CostSample | None] | None = None
    cost_source: str = ""
    #: how the SUT waits for frames, by its own account (SutAdapter.wake_state),
    #: read before and after the traffic: ``extra.sut_wake`` (wake_delta)
    sut_wake: Callable[[], dict[str, Any] | None] | None = None
    #: the SUT's drop counters, "port reason" -> frames (turnoutd's
    #: drop_counts), read before the traffic and after the receivers'
    #: cool-down: ``extra.sut_drops``, where the frames a trial lost went
    sut_drops: Callable[[], dict[str, int]] | None = None
    #: the SUT's CPUs: each own-account sample is paired with their irq +
    #: softirq ticks, the kernel share (measure/kernel.py)
    kernel_cpus: list[int] = field(default_factory=list)
    #: the SUT's CPUs, which the bench's own threads (this one, the CPU and
    #: cost samplers) leave to the SUT during a trial: on a busy-polling
    #: SUT's core they preempt its poller for ~0.5 ms a wake-up, several
    #: times a second, and every frame that arrives meanwhile waits
    #: (docs/bench.md, "Latency at low rates"); the same rule for every SUT
    avoid_cpus: list[int] = field(default_factory=list)
    #: long-running helpers (chain VNFs): a trial fails, naming the helper and
    #: its message, when one of them has exited
    helpers: list[VnfHandle] = field(default_factory=list)
    warmup_s: float = 0.0
    #: paced bursts back to back (turnout-gen --bunch): round trips over burst sizes
    bunch: bool = False
    #: after the sending: a sender's wait before it closes its port, and the
    #: wait before the receivers of split streams (``rx``) are stopped
    cooldown_s: float = 0.2
    #: a ``txrx`` tester's longest wait after the sending for the frames still
    #: in flight: it ends as soon as every frame sent is back, so only a trial
    #: that loses frames waits it all. A SUT or VNF starved for a few hundred
    #: ms on a loaded host returns its frames late, not never: with a wait of
    #: 0.2 s they were counted lost (docs/bench.md, "What every number means")
    return_wait_s: float = 1.0
    #: turnout-gen ``--vary``: the fields the flow index is added to ("" =
    #: its default, the UDP source port)
    vary: str = ""
    wait_peer_s: float = 5.0
    timeout_margin_s: float = 15.0
    #: what the campaign's ``isolate_sut_cpus`` moved off the SUT's CPUs and
    #: what it could not (system/isolate.py summary), stored on every trial;
    #: None: isolation off
    isolation: dict[str, Any] | None = None
    #: sample what else runs on the SUT's CPUs (measure/others.py)
    count_others: bool = True
    #: record the context switches and wake-ups of the SUT's pinned threads
    #: in fixed-rate trials (measure/schedtrace.py; needs tracefs and root)
    trace_sut: bool = True
    #: a cache line's round trip between the tester's and the SUT's first
    #: CPUs before and after each trial on this machine (measure/placement.py)
    probe_placement: bool = True
    #: the host the SUT runs on: its /proc (run-queue waits, placement, what
    #: else runs on the SUT's CPUs, their kernel time, its TSC rate and load)
    #: is read there (hosts/procfs.py; a remote host's agent answers). On
    #: another host ``avoid_cpus`` are that host's CPUs, and this process
    #: keeps its own CPUs (the agent there runs off the SUT's)
    sut_host: Host = field(default_factory=LocalHost)
    #: makes the CPU sampler of a trial (None: ``local_sampler``, turnout-sample
    #: when built; or one that reads another host's /proc:
    #: turnout.hosts.remote.RemoteCpuSampler)
    cpu_sampler: Callable[[dict[str, list[int]]], CpuSampler] | None = None
    #: the tester's CLOCK_MONOTONIC minus this machine's (0 when the tester
    #: runs here): its traffic windows are moved to this machine's clock,
    #: where the SUT's samples are stamped
    clock_shift_ns: int = 0
    #: the same per namespace of a sender (``@HOST`` across hosts: senders
    #: on two hosts, each window moved by its host's offset); a sender whose
    #: namespace is not here takes ``clock_shift_ns``
    clock_shifts: dict[str, int] = field(default_factory=dict)
    _hz: tuple[float, str] | None = None

    def _traffic_args(self, s: Stream, duration_s: float, per_stream_pps: float,
                      cooldown_s: float) -> list[str]:
        a = ["--size", str(self.size_b), "--flows", str(self.flows), "--burst", str(self.burst),
             "--src-mac", s.src_mac, "--dst-mac", s.dst_mac, "--stream", str(s.id),
             "--duration-s", f"{duration_s:g}", "--cooldown-s", f"{cooldown_s:g}",
             "--wait-peer-s", f"{self.wait_peer_s:g}"]
        if self.vary:
            a += ["--vary", self.vary]
        if self.warmup_s > 0:
            a += ["--warmup-s", f"{self.warmup_s:g}"]
        if per_stream_pps > 0:
            a += ["--rate-pps", f"{per_stream_pps:.0f}"]
            if self.bunch:
                a.append("--bunch")
        return a

    def check_helpers(self) -> None:
        """Raise GenError when a helper (a chain VNF) is no longer running."""
        for h in self.helpers:
            if not h.alive():
                err = h.proc.stderr.read().decode(errors="replace").strip() if h.proc.stderr else ""
                raise GenError(f"helper exited {h.proc.returncode}: {h.name}: {err[-400:]}")

    def _args(self, t: _Task, duration_s: float, per_stream_pps: float) -> list[str]:
        s = t.streams[0]
        if t.role == "rx":
            args = [*self.cmd, "rx", "--port", s.rx_port, "--wait-peer-s", f"{self.wait_peer_s:g}"]
            if s.rx_cpu is not None:
                args += ["--cpu", str(s.rx_cpu)]
            return args
        args = [*self.cmd, t.role, "--port", s.tx_port]
        if t.role == "txrx":
            # a trial in which nothing came through is a result (all lost),
            # not a failure of the tester (turnout-gen exits 4 without it)
            args.append("--allow-no-rx")
        if t.role == "txrx" and s.rx_port != s.tx_port:  # a round trip returns on --port
            args += ["--rx-port", s.rx_port]
            if t.bidir:
                r = t.streams[1]
                args += ["--bidir", "--src-mac2", r.src_mac, "--dst-mac2", r.dst_mac]
        if t.role == "txrx":
            args += pair_args(t)
        cooldown = self.return_wait_s if t.role == "txrx" else self.cooldown_s
        args += self._traffic_args(s, duration_s, per_stream_pps, cooldown)
        if s.tx_cpu is not None:
            args += ["--cpu", str(s.tx_cpu)]
        return args

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        self.check_helpers()
        here = self.sut_host.is_local
        with off_cpus(self.avoid_cpus if here else []) as cpus:
            counts = self._measure(duration_s, load_total_pps)
        if self.avoid_cpus and here:
            # where the bench's threads ran ("": on the SUT's too, no other CPU allowed)
            counts.extra["bench_cpus"] = ",".join(str(c) for c in cpus)
        return counts

    def _run_queue_wait(self, pids: list[int], tids: list[int]) -> tuple[int, int]:
        """(ns waiting for a CPU, runs) of these threads, on the SUT's host."""
        wait, runs = self.sut_host.procfs("run_queue_wait", pids=pids, tids=tids)
        return int(wait), int(runs)

    def hz(self) -> tuple[float, str]:
        """The TSC rate of the SUT's host (cycles from its CPU seconds)."""
        if self._hz is None:
            hz, src = self.sut_host.procfs("nominal_hz")
            self._hz = (float(hz), str(src))
        return self._hz

    def _measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        per_stream = load_total_pps / len(self.streams) if load_total_pps > 0 else 0.0
        # the Python reference tester has no --pair
        tasks = plan_tasks(self.streams, multi_pair=not self.cmd[-1].endswith("pygen"))
        vnf_before = [h.snapshot() for h in self.helpers]
        sut_pids = self.sut_pids()
        # the run-queue wait of the SUT's data path: its threads pinned to
        # the SUT's CPUs when it has such (its other threads live on the
        # tester's core and wait behind its busy loop: not the SUT's
        # latency); all its threads otherwise
        host = self.sut_host  # its /proc: this machine's, or the SUT host's agent's
        rq_tids = [int(t) for t in host.procfs("pinned_threads", pids=sut_pids,
                                               cpus=list(self.avoid_cpus))]
        rq_before, rq_t0 = self._run_queue_wait(sut_pids, rq_tids), time.monotonic()
        steal_cpus = sorted(self.avoid_cpus)
        steal_before = (int(host.procfs("cpu_steal_ticks", cpus=steal_cpus))
                        if steal_cpus and load_total_pps > 0 else None)
        # the tester's CPUs too, when it shares the SUT's host (this machine)
        tester_cpus = sorted({c for t in tasks for st in t.streams
                              for c in (st.tx_cpu, st.rx_cpu) if c is not None})
        tester_steal_before = (int(host.procfs("cpu_steal_ticks", cpus=tester_cpus))
                               if tester_cpus and load_total_pps > 0 and host.is_local
                               else None)
        # where the host placed the tester's and the SUT's virtual CPUs:
        # a cache line's round trip between them, before and after
        # (measure/placement.py)
        rtt_cpus = ([tester_cpus[0], sorted(self.avoid_cpus)[0]]
                    if self.probe_placement and tester_cpus and self.avoid_cpus
                    and host.is_local else None)
        rtt_before = cpu_rtt_probe(rtt_cpus[0], rtt_cpus[1]) if rtt_cpus else None
        roles = {"sut": sut_pids, "vnf": [h.proc.pid for h in self.helpers if h.alive()]}
        # not in saturating trials (R+), where the tester needs all of its CPU
        # and the figure is a rate: the samples cost ~2 ms of it per 0.1 s
        others = (OthersSampler(set(self.avoid_cpus), set(sut_pids), host=host)
                  if self.count_others and self.avoid_cpus and load_total_pps > 0 else None)
        if self.cpu_sampler is None and host.is_local:
            # turnout-sample, when built, samples the other threads too
            sampler = local_sampler(roles, others=others).start()
        else:
            sampler = (self.cpu_sampler or local_sampler)(roles).start()
        if others is not None and not others.via:
            others.start()
        kshare = (KernelShare(self.sut_cost, self.kernel_cpus, host=host)
                  if self.sut_cost else None)
        coster = CostSampler(kshare).start() if kshare is not None else None
        # who held the SUT's CPUs while its threads could run, and their own
        # wake-ups (measure/schedtrace.py): fixed-rate trials only, on this
        # machine (the tester's clock stamps the window)
        trace = (host.procfs("sched_trace_start", name=f"turnout-{os.getpid()}", tids=rq_tids,
                             comms=[TESTER_COMM])
                 if self.trace_sut and rq_tids and load_total_pps > 0 and host.is_local
                 else None)
        traced: dict[str, Any] | None = None
        wake_before = self._wake_state()
        wake_after: dict[str, Any] | None = None
        wake_during: list[dict[str, Any] | None] = []
        wake_timer: threading.Timer | None = None
        drops_before = self._drops()
        drops_after: dict[str, int] | None = None
        try:
            receivers = [t for t in tasks if t.role == "rx"]
            for t in receivers:  # receivers first, so nothing sent is missed
                t.args = self._args(t, duration_s, per_stream)
                t.proc = self.spawn(t.args, netns=t.netns)
            if receivers:
                time.sleep(0.3)  # let receivers bind
            senders = [t for t in tasks if t.role != "rx"]
            for t in senders:
                t.args = self._args(t, duration_s, per_stream)
                t.proc = self.spawn(t.args, netns=t.netns)
            # the regime a worker ran in under the traffic: read in the
            # window's last quarter (after the traffic a worker that napped
            # may sleep on notifications instead); once, from a timer
            if self.sut_wake is not None and load_total_pps > 0:
                wake_timer = threading.Timer(self.warmup_s + 0.75 * duration_s,
                                             lambda: wake_during.append(self._wake_state()))
                wake_timer.daemon = True
                wake_timer.start()
            deadline = (time.monotonic() + self.warmup_s + duration_s + self.wait_peer_s
                        + self.timeout_margin_s)
            for t in senders:
                assert t.proc is not None
                t.doc = self._collect(t.proc, deadline)
            if wake_timer is not None:
                wake_timer.cancel()  # senders done first: no read in the window
                wake_timer.join()
            wake_after = self._wake_state()
            time.sleep(self.cooldown_s)
            drops_after = self._drops()
            for t in receivers:
                assert t.proc is not None
                t.proc.send_signal(signal.SIGINT)
                t.doc = self._collect(t.proc, time.monotonic() + 5)
        finally:
            if wake_timer is not None:
                wake_timer.cancel()
            sampler.stop()
            if others is not None:
                others.stop()
            if coster is not None:
                coster.stop()
            if trace is not None and "instance" in trace:
                traced = host.procfs("sched_trace_stop", instance=trace["instance"])
            for t in tasks:
                if t.proc is not None and t.proc.poll() is None:
                    t.proc.kill()
                    t.proc.wait()
        vnf_after = [h.snapshot() for h in self.helpers]
        rq_after, rq_t1 = self._run_queue_wait(sut_pids, rq_tids), time.monotonic()
        steal_after = (int(host.procfs("cpu_steal_ticks", cpus=steal_cpus))
                       if steal_before is not None else None)
        rtt_after = cpu_rtt_probe(rtt_cpus[0], rtt_cpus[1]) if rtt_cpus else None
        counts = self._combine(tasks, duration_s, load_total_pps, sampler,
                               [vnf_delta(b, a) | {"name": h.name}
                                for h, b, a in zip(self.helpers, vnf_before, vnf_after,
                                                   strict=True)])
        if coster is not None:
            apply_cost(counts, coster.samples, self.cost_source, coster.error)
        if kshare is not None and self.kernel_cpus:
            apply_kernel_share(counts, kshare.samples, self.kernel_cpus, hz=self.hz()[0])
        counts.extra["tester_core_sharing"] = core_sharing(tasks, self.helpers)
        if isinstance(sampler, NativeCpuSampler):
            # what the CPU sampler cost the CPU it shares (the tester's), or
            # why it gave no samples
            counts.extra["cpu_sampler"] = {"kind": "turnout-sample", **sampler.cost,
                                           "samples": len(sampler.samples),
                                           **({"others_samples": len(others.samples)}
                                              if others is not None and others.via else {}),
                                           **({"error": sampler.error} if sampler.error else {})}
        wake = wake_delta(wake_before, wake_after, wake_during[0] if wake_during else None)
        if wake is not None:
            counts.extra["sut_wake"] = wake
        if drops_before is not None and drops_after is not None:
            counts.extra["sut_drops"] = {k: n - drops_before.get(k, 0)
                                         for k, n in drops_after.items()
                                         if n > drops_before.get(k, 0)}
        if others is not None:
            apply_others(counts, others)
        if trace is not None:
            apply_trace(counts, traced if traced is not None else trace, rq_tids)
        if self.isolation is not None:
            counts.extra["isolation"] = self.isolation
        if rtt_cpus:
            counts.extra["cpu_rtt_ns"] = (
                {"before": round(rtt_before, 1), "after": round(rtt_after, 1), "cpus": rtt_cpus}
                if isinstance(rtt_before, float) and isinstance(rtt_after, float)
                else {"why": next(str(w) for w in (rtt_before, rtt_after)
                                  if not isinstance(w, float))})
        # the host's 1-minute load and CPU count at the trial's end: a load at
        # or above the CPUs means the scheduler, not the SUT, sets its latency
        load, ncpu = host.procfs("loadavg")  # the SUT's host's
        counts.extra["host_load"] = [round(float(load), 2), int(ncpu)]
        # the same tester, buffers and placement for every SUT of a cell:
        # what this trial ran, comparable across SUTs (the report's set-up
        # section checks it: report/setup.py)
        counts.extra["tester_setup"] = tester_setup(self.cmd, tasks, self.helpers)
        if sut_pids and self.avoid_cpus:
            counts.extra["sut_placement"] = host.procfs("thread_placement", pids=sut_pids,
                                                        cpus=list(self.avoid_cpus))
        if sut_pids:
            # how long the SUT's threads waited for a CPU (docs/bench.md,
            # "Latency at low rates"): the latency verdict flags a large mean
            counts.extra["sut_sched"] = sched_wait(rq_before, rq_after, rq_t1 - rq_t0) | {
                "threads": f"{len(rq_tids)} pinned to the SUT's CPUs" if rq_tids else "all"}
        if tester_steal_before is not None:
            counts.extra["tester_cpu_steal"] = steal_of(
                tester_cpus, tester_steal_before,
                int(host.procfs("cpu_steal_ticks", cpus=tester_cpus)))
        if steal_before is not None and steal_after is not None:
            # time the hypervisor ran something else while the SUT's CPUs had
            # work (steal time), over the whole trial with its warm-up and
            # cool-down: a p99 of milliseconds next to milliseconds stolen is
            # the host, not the switch (docs/bench.md, "Steal time of the
            # SUT's CPUs, per trial")
            counts.extra["sut_cpu_steal"] = steal_of(steal_cpus, steal_before, steal_after) | {
                "span_s": round(rq_t1 - rq_t0, 3)}
        sleepers = [h.cpu for h in self.helpers if not h.polls]
        if sleepers:
            counts.extra["vnf_wakeup"] = "interrupt"
            counts.extra["vnf_sleepers"] = len(sleepers)
        if self.helpers:
            # how each chain VNF was scheduled, and why (campaign/layout.py vnf_sched)
            counts.extra["vnf_sched"] = [{"name": h.name, "sched": h.sched, "why": h.sched_why}
                                         for h in self.helpers]
        return counts

    def _drops(self) -> dict[str, int] | None:
        if self.sut_drops is None:
            return None
        try:
            return self.sut_drops()
        except Exception:  # the SUT may be gone: the trial says so elsewhere
            return None

    def _wake_state(self) -> dict[str, Any] | None:
        if self.sut_wake is None:
            return None
        try:
            return self.sut_wake()
        except Exception as e:  # the SUT may be gone: the trial says so elsewhere
            return {"error": f"{type(e).__name__}: {e}"}

    @staticmethod
    def _collect(p: subprocess.Popen[bytes], deadline: float) -> dict[str, Any]:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as e:
            p.kill()
            p.communicate()
            cmd = _cmdline(p)
            raise GenError(f"turnout-gen did not finish in time: {cmd}") from e
        if p.returncode != 0:
            why = err.decode(errors="replace").strip()[-500:]
            msg = f"turnout-gen exited {p.returncode}: {why}"
            if p.returncode == 3:  # its peer (the SUT's port) never came up
                raise PeerAbsent(msg)
            raise GenError(msg)
        try:
            lines = [ln for ln in out.decode().splitlines() if ln.strip()]
            doc = json.loads(lines[-1])
        except (ValueError, IndexError) as e:
            raise GenError(f"turnout-gen printed no JSON document: {out[-300:]!r}") from e
        if not str(doc.get("schema", "")).startswith("turnout-gen/1"):
            raise GenError(f"unexpected turnout-gen schema {doc.get('schema')!r}")
        return doc

    def _combine(self, tasks: list[_Task], duration_s: float, load_total_pps: float,
                 sampler: CpuSampler, vnfs: list[dict[str, Any]]) -> TrialCounts:
        return combine_docs(tasks, duration_s, load_total_pps, sampler, vnfs,
                            tester=os.path.basename(self.cmd[-1]),
                            clock_shift_ns=self.clock_shift_ns, clock_shifts=self.clock_shifts,
                            hz=self.hz())


def normalized_spec(spec: str, endpoint: str) -> str:
    """A port spec with its path or interface replaced by the endpoint's
    name ("memif:/run/…/t0.sock,role=server" -> "memif:t0,role=server"):
    what is the same for every SUT of a cell."""
    kind, _, rest = spec.partition(":")
    return ",".join([f"{kind}:{endpoint}", *rest.split(",")[1:]])


def tester_setup(cmd: list[str], tasks: list[_Task], helpers: list[VnfHandle]) -> dict[str, Any]:
    """The tester's processes of a trial as every SUT of its cell must see
    them: each process's arguments with its ports named by endpoint (paths
    and interface names differ per testbed, nothing else may), the rate
    left out (a fraction of each SUT's own R+ differs by design), and the
    chain VNFs' names, CPUs and scheduling."""
    names: dict[str, str] = {}
    for t in tasks:
        for s in t.streams:
            src, _, dst = s.name.partition(">")
            names.setdefault(s.tx_port, src)
            names.setdefault(s.rx_port, dst or src)
    procs = []
    for t in tasks:
        args = [os.path.basename(a) if i < len(cmd) else a for i, a in enumerate(t.args)]
        out: list[str] = []
        prev = ""
        for a in args:
            if a == "--rate-pps":
                pass
            elif prev == "--rate-pps":
                a = ""
            elif prev in ("--src-mac", "--dst-mac", "--src-mac2", "--dst-mac2"):
                a = "MAC"  # veth addresses are random per testbed
            elif prev == "--pair":
                a = ";".join(_normalized_pair_item(i, names) for i in a.split(";"))
            elif a in names:
                a = normalized_spec(a, names[a])
            prev = a if a.startswith("--") else ""
            if a and a != "--rate-pps":
                out.append(a)
        procs.append(" ".join(out))
    return {"processes": sorted(procs),
            "vnfs": [[h.name, h.cpu, h.sched] for h in helpers]}


def _normalized_pair_item(item: str, names: dict[str, str]) -> str:
    """One KEY=VALUE of a ``--pair`` as tester_setup shows it: ports by
    endpoint, MACs as "MAC"."""
    k, _, v = item.partition("=")
    if k in ("port", "rx-port") and v in names:
        return f"{k}={normalized_spec(v, names[v])}"
    if k.endswith(("mac", "mac2")):
        return f"{k}=MAC"
    return item


def core_sharing(tasks: list[_Task], helpers: list[VnfHandle]) -> int:
    """The most tester and VNF processes pinned to one CPU in a trial (1:
    each has a core of its own; VNFs in interrupt mode included). More than one: the scheduler, not
    the switch, sets the rate and the latency of that trial."""
    per: dict[tuple[str, int], int] = {}
    for t in tasks:
        s = t.streams[0]
        cpu = s.rx_cpu if t.role == "rx" else s.tx_cpu
        if cpu is not None:
            k = (_machine(t.netns), cpu)
            per[k] = per.get(k, 0) + 1
    for h in helpers:
        # a VNF in interrupt mode counts too: woken on its core, it waits
        # for the busy-polling tester's time slice (4 ms p99 at 10 kpps in a
        # 2-CPU loopback chain), so the scheduler still sets the
        # latency and, under load, the rate
        if h.cpu is not None:
            k = (h.where, h.cpu)
            per[k] = per.get(k, 0) + 1
    return max(per.values(), default=1)


def _machine(ns: str | None) -> str:
    """The machine a namespace is on: another host's (``@HOST``, across
    hosts), else "" (every namespace here is on this machine)."""
    return ns if ns and ns.startswith("@") else ""


def traffic_window(c: TrialCounts) -> tuple[float, float] | None:
    """The trial's traffic window in monotonic seconds: the overlap of every
    sender's window, else (when they barely overlapped) their union."""
    wins = c.extra.get("windows_ns") or []
    if not wins:
        return None
    start, end = max(w[0] for w in wins), min(w[1] for w in wins)
    if end - start < 0.1e9:  # senders barely overlapped: their union
        start, end = min(w[0] for w in wins), max(w[1] for w in wins)
    return start / 1e9, end / 1e9


def apply_cost(c: TrialCounts, samples: list[CostSample], source: str, error: str = "") -> None:
    """Set ``c.busy_cycles_per_frame`` from the SUT's cost samples inside
    the trial's traffic window (``traffic_window``), or say in
    ``c.extra["cost_why"]`` why there is none."""
    win = traffic_window(c)
    if win is not None:
        cost, why = cost_in_window(samples, win[0], win[1], source)
    else:
        cost, why = None, "the tester reported no traffic window"
    if cost is None:
        c.extra["cost_why"] = why + (f" (last probe error: {error})" if error else "")
        return
    c.busy_cycles_per_frame = cost.cycles_per_frame
    c.extra.update(cost_source=source, cost_frames=cost.frames, cost_span_s=cost.span_s)
    if cost.kick_cycles_per_frame is not None:
        # of the capacity, the SUT's kicks to peers (system calls)
        c.extra["kick_cycles_per_frame"] = cost.kick_cycles_per_frame


def apply_others(c: TrialCounts, s: OthersSampler) -> None:
    """Store what else ran on the SUT's CPUs inside the trial's traffic
    window (measure/others.py) in ``c.extra["sut_cpu_others"]``."""
    win = traffic_window(c)
    if win is None:
        c.extra["sut_cpu_others"] = {"why": "the tester reported no traffic window"}
        return
    c.extra["sut_cpu_others"] = others_in_window(s.cands, s.samples, s.sut_cpus, win[0], win[1])


def steal_of(cpus: list[int], before: int, after: int) -> dict[str, Any]:
    """The steal time of ``cpus`` between two readings of /proc/stat's
    steal ticks, in ms, with its resolution (one clock tick)."""
    return {"ms": round(max(0, after - before) * 1000 / CLK_TCK, 1), "cpus": cpus,
            "resolution_ms": round(1000 / CLK_TCK, 1)}


def apply_trace(c: TrialCounts, traced: dict[str, Any], tids: list[int]) -> None:
    """Store the switches and wake-ups of the SUT's threads and of the
    tester's in the traffic window (measure/schedtrace.py) in
    ``c.extra["sut_cpu_trace"]`` and ``["tester_cpu_trace"]``, or why not."""
    win = traffic_window(c)
    if "events" not in traced:
        c.extra["sut_cpu_trace"] = {"why": str(traced.get("why", "no events"))}
        return
    if win is None:
        c.extra["sut_cpu_trace"] = {"why": "the tester reported no traffic window"}
        return
    ev, lost = traced["events"], int(traced.get("lost", 0))
    complete = int(traced.get("complete_from", 0))
    t0, t1 = int(win[0] * 1e9), int(win[1] * 1e9)
    c.extra["sut_cpu_trace"] = summarize_trace(ev, tids, t0, t1, lost, complete)
    testers = [t for t in named(ev, TESTER_COMM) if t not in set(tids)]
    if testers:
        c.extra["tester_cpu_trace"] = summarize_trace(ev, testers, t0, t1, lost, complete)


def apply_kernel_share(c: TrialCounts, samples: list[tuple[float, float, int]],
                       cpus: list[int], hz: float | None = None) -> None:
    """Store the kernel share (measure/kernel.py) in ``c.extra``:
    ``kernel_cycles_per_frame`` and ``kernel_s`` on ``kernel_cpus``, or
    ``kernel_why``."""
    c.extra["kernel_cpus"] = ",".join(str(x) for x in cpus)
    win = traffic_window(c)
    if win is None:
        c.extra["kernel_why"] = "the tester reported no traffic window"
        return
    share, busy_s, why = kernel_share(samples, win[0], win[1], hz=hz)
    c.extra["kernel_s"] = busy_s
    if share is None:
        c.extra["kernel_why"] = why
    else:
        c.extra["kernel_cycles_per_frame"] = share


def _sent_by_stream(tasks: list[_Task]) -> dict[int, tuple[int, int]]:
    """stream id -> (frames sent, frames unsent) from the senders' documents."""
    out: dict[int, tuple[int, int]] = {}
    for t in tasks:
        if t.role == "rx" or not t.doc or "tx" not in t.doc:
            continue
        tx = t.doc["tx"]
        dirs = tx.get("directions") or []
        if dirs:
            for d in dirs:
                sid = int(d.get("stream", t.streams[0].id))
                out[sid] = (int(d["packets"]), int(d.get("full", 0)))
        else:
            out[t.streams[0].id] = (int(tx["packets"]), int(tx.get("full", 0)))
    return out


def combine_docs(tasks: list[_Task], duration_s: float, load_total_pps: float,
                 sampler: CpuSampler | None, vnfs: list[dict[str, Any]],
                 tester: str = "turnout-gen", clock_shift_ns: int = 0,
                 clock_shifts: dict[str, int] | None = None,
                 hz: tuple[float, str] | None = None) -> TrialCounts:
    """One TrialCounts from the documents of a trial's processes (see the
    module doc for the conventions). ``clock_shift_ns``: the tester's
    CLOCK_MONOTONIC minus this machine's, taken off its windows (per
    sender namespace: ``clock_shifts``). ``hz``: the SUT host's TSC rate
    (``nominal_hz`` of this machine when None)."""
    sent_of = _sent_by_stream(tasks)
    wanted = {s.id: s for t in tasks for s in t.streams}
    attempts = pushback = bursts = backlog = 0
    win_start: int | None = None
    win_end: int | None = None
    tx_dur = 0.0
    tester_cpu: list[dict[str, Any]] = []
    windows: list[list[int]] = []
    for t in tasks:
        d = t.doc or {}
        if "tx" in d and t.role != "rx":
            tx = d["tx"]
            attempts += int(tx.get("attempts", 0))
            pushback += int(tx.get("pushback", 0))
            tx_dur = max(tx_dur, float(tx.get("duration_s", 0.0)))
            ws, we = tx.get("window_start_ns"), tx.get("window_end_ns")
            shift = (clock_shifts or {}).get(t.netns or "", clock_shift_ns)
            if ws and we and shift:
                ws, we = int(ws) - shift, int(we) - shift
            if ws and we:
                windows.append([int(ws), int(we)])
                win_start = ws if win_start is None else min(win_start, ws)
                win_end = we if win_end is None else max(win_end, we)
            if "cpu_ns" in tx:
                span = max(1, int(tx.get("window_end_ns", 0)) - int(tx.get("window_start_ns", 0)))
                tester_cpu.append({"role": "tester", "pid": t.proc.pid if t.proc else 0,
                                   "name": f"turnout-gen {t.role}", "cpu_s": tx["cpu_ns"] / 1e9,
                                   "util": round(tx["cpu_ns"] / span, 4)})
        if "rx" in d:
            bursts += int(d["rx"].get("bursts", 0))
            backlog += int(d["rx"].get("backlog_bursts", 0))
    per_stream: list[dict[str, Any]] = []
    hists: list[list[list[float]]] = []
    sent = received = lost = dup = reord = 0
    jitters: list[float] = []
    lat_min: list[float] = []
    lat_max: list[float] = []
    lat_sum = 0.0
    for t in tasks:
        d = t.doc or {}
        if "rx" not in d:
            continue
        rx = d["rx"]
        for st in rx.get("streams", []):
            sid = int(st["id"])
            if sid not in wanted or all(sid != s.id for s in t.streams):
                continue
            s_sent, s_unsent = sent_of.get(sid, (0, 0))
            s_dup = int(st.get("duplicated", 0))
            s_recv = int(st.get("received", 0)) - s_dup
            # rx role: frames lost after the last arrival only show against
            # what was sent; txrx already counts them
            s_lost = max(int(st.get("lost", 0)), s_sent - s_recv)
            lat = st.get("latency_ns") or {}
            row = {"id": sid, "name": wanted[sid].name, "sent": s_sent, "unsent": s_unsent,
                   "received": s_recv, "lost": s_lost, "duplicated": s_dup,
                   "reordered": int(st.get("reordered", 0)), "jitter_ns": st.get("jitter_ns"),
                   "latency_ns": {k: v for k, v in lat.items() if k not in ("cdf", "hist")}}
            per_stream.append(row)
            sent += s_sent
            received += s_recv
            lost += s_lost
            dup += s_dup
            reord += row["reordered"]
            if st.get("jitter_ns") is not None:
                jitters.append(float(st["jitter_ns"]))
            if lat.get("hist"):
                hists.append(lat["hist"])
                lat_min.append(float(lat["min"]))
                lat_max.append(float(lat["max"]))
                lat_sum += float(lat["mean"]) * int(lat["count"])
    # streams nobody received at all (their receiver saw nothing of them)
    for sid, (s_sent, s_unsent) in sent_of.items():
        if sid in wanted and all(r["id"] != sid for r in per_stream):
            per_stream.append({"id": sid, "name": wanted[sid].name, "sent": s_sent,
                               "unsent": s_unsent, "received": 0, "lost": s_sent,
                               "duplicated": 0, "reordered": 0})
            sent += s_sent
            lost += s_sent
    unsent = sum(u for sid, (_, u) in sent_of.items() if sid in wanted)
    dur = tx_dur or duration_s
    lat_fields: dict[str, float] = {}
    cdf: list[list[float]] = []
    if not hists:
        # testers without per-stream histograms (the Python reference
        # tester): the receivers' own summaries, worst percentiles
        levels = [(t.doc or {}).get("rx", {}).get("latency_ns") for t in tasks]
        levels = [lv for lv in levels if lv]
        if levels:
            lat_fields = {k: max(float(lv[k]) for lv in levels if k in lv)
                          for k in ("min", "mean", "p50", "p90", "p99", "p999", "max")
                          if any(k in lv for lv in levels)}
            cdf = [[float(v), float(f)] for v, f in levels[0].get("cdf", [])]
    if hists:
        m = merge_latency(hists)
        n = sum(int(c) for h in hists for _, c in h)
        lat_fields = {"min": min(lat_min), "max": max(lat_max), "mean": lat_sum / max(1, n),
                      **{k: float(m[k]) for k in ("p50", "p90", "p99", "p999") if k in m}}
        cdf = [[float(v), float(f)] for v, f in m.get("cdf", [])]
    cpu_rows: list[dict[str, Any]] = []
    cpu_window = "traffic"
    if sampler is not None and (win_start is None or win_end is None) and sampler.samples:
        # a tester that reports no window: the whole trial, and say so
        win_start, win_end = sampler.samples[0][0], sampler.samples[-1][0]
        cpu_window = "whole trial (the tester reported no traffic window)"
    if sampler is not None and win_start is not None and win_end is not None:
        cpu_rows = sampler.window(win_start, win_end)
    cpu_rows += tester_cpu
    rate, hz_source = hz if hz is not None else nominal_hz()
    sut_cpu_s = sum(r["cpu_s"] for r in cpu_rows if r.get("role") == "sut")
    cycles = sut_cpu_s * rate / received if received > 0 and rate > 0 and cpu_rows else None
    vnf_dropped = sum(int(v.get("dropped", 0)) for v in vnfs)
    tb, why = tester_bound(load_total_pps, dur, sent, lost, unsent, attempts, pushback,
                           bursts, backlog, vnf_dropped)
    return TrialCounts(
        offered_total_pps=load_total_pps, duration_s=dur, sent=sent, received=received,
        lost=lost, duplicated=dup, reordered=reord, unsent=unsent, vnf_dropped=vnf_dropped,
        streams=len(wanted), latency_ns=lat_fields, latency_cdf=cdf,
        jitter_ns=max(jitters) if jitters else None, cpu=cpu_rows, cycles_per_packet=cycles,
        tester_bound=tb,
        extra={"streams": sorted(per_stream, key=lambda r: r["id"]), "tester": tester,
               "tester_bound_why": why, "tx_attempts": attempts, "tx_pushback": pushback,
               "rx_bursts": bursts, "rx_backlog_bursts": backlog, "vnfs": vnfs,
               "window_ns": [win_start, win_end], "windows_ns": windows,
               "cpu_window": cpu_window,
               "cycles_hz": rate, "cycles_hz_source": hz_source,
               "per_stream_pps": load_total_pps / max(1, len(wanted)),
               # a load the SUT pushed back on: not the tester's limit
               **({"load_refused": why} if why.startswith(REFUSED) else {})},
    )
