"""Drives turnout-gen (docs/turnout-gen.md) as a Measurer.

A ``GenMeasurer`` knows the streams of a scenario (where each one is sent
and received) and, per trial, starts receivers, then senders, waits, and
turns the JSON documents into one ``TrialCounts``: counts summed over
streams, ``lost = sent - received`` (clamped at 0), latency from the first
stream's receiver (all receivers' summaries are in ``extra``), CPU of the
SUT's threads over the trial. ``load_pps`` is per stream (per sending
port, as in MLRsearch); 0 means as fast as possible.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .counts import TrialCounts
from .cpu import cpu_delta, cpu_hz, sample_threads

__all__ = ["GenError", "GenMeasurer", "GenProc", "Stream", "find_gen", "gen_version",
           "tester_bound"]

REPO = Path(__file__).resolve().parents[4]


class GenError(RuntimeError):
    """turnout-gen failed (exit code and stderr in the message)."""


def find_gen(allow_pygen: bool = True) -> list[str] | None:
    """The turnout-gen command: $TURNOUT_GEN, target/release/turnout-gen,
    turnout-gen on PATH, else the Python reference tester (when allowed)."""
    env = os.environ.get("TURNOUT_GEN")
    if env:
        return env.split()
    built = REPO / "target" / "release" / "turnout-gen"
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
    on ``rx_port`` in ``rx_ns`` (turnout-gen port specs)."""

    tx_port: str
    rx_port: str
    tx_ns: str | None
    rx_ns: str | None
    src_mac: str
    dst_mac: str
    id: int = 0
    tx_cpu: int | None = None
    rx_cpu: int | None = None

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


Spawner = Callable[..., subprocess.Popen[bytes]]


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
    #: long-running helpers (chain VNFs): a trial fails, naming the helper and
    #: its message, when one of them has exited
    helpers: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cooldown_s: float = 0.2
    wait_peer_s: float = 5.0
    timeout_margin_s: float = 15.0

    def _traffic_args(self, s: Stream, duration_s: float, load_pps: float) -> list[str]:
        a = ["--size", str(self.size_b), "--flows", str(self.flows), "--burst", str(self.burst),
             "--src-mac", s.src_mac, "--dst-mac", s.dst_mac, "--stream", str(s.id),
             "--duration-s", f"{duration_s:g}", "--cooldown-s", f"{self.cooldown_s:g}",
             "--wait-peer-s", f"{self.wait_peer_s:g}"]
        if load_pps > 0:
            a += ["--rate-pps", f"{load_pps:.0f}"]
        return a

    def check_helpers(self) -> None:
        """Raise GenError when a helper (a chain VNF) is no longer running."""
        for h in self.helpers:
            if h.poll() is not None:
                err = h.stderr.read().decode(errors="replace").strip() if h.stderr else ""
                cmd = " ".join(map(str, h.args))
                raise GenError(f"helper exited {h.returncode}: {cmd}: {err[-400:]}")

    def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
        self.check_helpers()
        procs: list[tuple[str, Stream, subprocess.Popen[bytes]]] = []
        receivers = []
        pids = self.sut_pids()
        before = sample_threads(pids)
        t0 = time.monotonic()
        try:
            for s in self.streams:  # receivers first, so nothing sent is missed
                if not s.split:
                    continue
                args = [*self.cmd, "rx", "--port", s.rx_port, "--wait-peer-s",
                        f"{self.wait_peer_s:g}"]
                if s.rx_cpu is not None:
                    args += ["--cpu", str(s.rx_cpu)]
                p = self.spawn(args, netns=s.rx_ns)
                receivers.append(p)
                procs.append(("rx", s, p))
            if receivers:
                time.sleep(0.3)  # let receivers bind
            for s in self.streams:
                role = "tx" if s.split else "txrx"
                args = [*self.cmd, role, "--port", s.tx_port]
                if role == "txrx":
                    args += ["--rx-port", s.rx_port]
                args += self._traffic_args(s, duration_s, load_pps)
                if s.tx_cpu is not None:
                    args += ["--cpu", str(s.tx_cpu)]
                procs.append((role, s, self.spawn(args, netns=s.tx_ns)))
            docs: list[tuple[str, Stream, dict[str, Any]]] = []
            deadline = time.monotonic() + duration_s + self.wait_peer_s + self.timeout_margin_s
            senders = [x for x in procs if x[0] != "rx"]
            for role, s, p in senders:
                docs.append((role, s, self._collect(p, deadline)))
            wall = time.monotonic() - t0
            after = sample_threads(pids)
            time.sleep(self.cooldown_s)
            for role, s, p in procs:
                if role == "rx":
                    p.send_signal(signal.SIGINT)
                    docs.append((role, s, self._collect(p, time.monotonic() + 5)))
        finally:
            for _, _, p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        return self._combine(docs, duration_s, load_pps, before, after, wall)

    @staticmethod
    def _collect(p: subprocess.Popen[bytes], deadline: float) -> dict[str, Any]:
        try:
            out, err = p.communicate(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired as e:
            p.kill()
            p.communicate()
            cmd = " ".join(map(str, p.args))
            raise GenError(f"turnout-gen did not finish in time: {cmd}") from e
        if p.returncode != 0:
            raise GenError(
                f"turnout-gen exited {p.returncode}: {err.decode(errors='replace').strip()[-500:]}"
            )
        try:
            lines = [ln for ln in out.decode().splitlines() if ln.strip()]
            doc = json.loads(lines[-1])
        except (ValueError, IndexError) as e:
            raise GenError(f"turnout-gen printed no JSON document: {out[-300:]!r}") from e
        if not str(doc.get("schema", "")).startswith("turnout-gen/1"):
            raise GenError(f"unexpected turnout-gen schema {doc.get('schema')!r}")
        return doc

    def _combine(self, docs: list[tuple[str, Stream, dict[str, Any]]], duration_s: float,
                 load_pps: float, before: dict, after: dict, wall_s: float) -> TrialCounts:
        sent = received = tx_full = 0
        attempts = pushback = bursts = backlog_bursts = 0
        tx_dur = 0.0
        latencies = []
        jitter = None
        first_lat: dict[str, Any] | None = None
        for _role, s, doc in docs:
            if "tx" in doc:
                sent += int(doc["tx"]["packets"])
                tx_full += int(doc["tx"].get("full", 0))
                attempts += int(doc["tx"].get("attempts", 0))
                pushback += int(doc["tx"].get("pushback", 0))
                tx_dur = max(tx_dur, float(doc["tx"].get("duration_s", 0.0)))
            if "rx" in doc:
                rx = doc["rx"]
                bursts += int(rx.get("bursts", 0))
                backlog_bursts += int(rx.get("backlog_bursts", 0))
                mine = [st for st in rx.get("streams", []) if st.get("id") == s.id]
                received += int(mine[0]["received"]) if mine else int(rx["packets"])
                lat = rx.get("latency_ns")
                if lat:
                    latencies.append({"stream": s.id, **{k: v for k, v in lat.items()
                                                          if k != "cdf"}})
                    if first_lat is None:
                        first_lat, jitter = lat, rx.get("jitter_ns")
        dur = tx_dur or duration_s
        cpu = cpu_delta(before, after, wall_s) if after else []
        cycles = None
        if cpu and received > 0 and cpu_hz() > 0:
            cycles = sum(r["user_s"] + r["sys_s"] for r in cpu) * cpu_hz() / received
        lat_fields = {}
        cdf: list[list[float]] = []
        if first_lat:
            lat_fields = {k: float(first_lat[k]) for k in
                          ("min", "mean", "p50", "p90", "p99", "p999", "max") if k in first_lat}
            cdf = [[float(v), float(f)] for v, f in first_lat.get("cdf", [])]
        return TrialCounts(
            offered_pps=load_pps, duration_s=dur, sent=sent, received=received,
            lost=max(0, sent - received), latency_ns=lat_fields, latency_cdf=cdf,
            jitter_ns=jitter, cpu=cpu, cycles_per_packet=cycles,
            extra={"latency_by_stream": latencies, "streams": len(self.streams),
                   "tester": os.path.basename(self.cmd[-1]), "tx_full": tx_full,
                   "tx_attempts": attempts, "tx_pushback": pushback,
                   "rx_bursts": bursts, "rx_backlog_bursts": backlog_bursts,
                   "tester_bound": tester_bound(load_pps, dur, len(self.streams), sent,
                                                received, tx_full, attempts, pushback,
                                                bursts, backlog_bursts)},
        )


#: Share of send attempts the port must push back for the SUT to count as
#: the limit of a saturating trial.
PUSHBACK_MIN = 0.10
#: Share of receive bursts that filled the batch right after a full one
#: (frames kept waiting) above which the tester's receiver was behind.
RX_BEHIND_MIN = 0.10


def tester_bound(load_pps: float, duration_s: float, streams: int, sent: int, received: int,
                 tx_full: int, attempts: int = 0, pushback: int = 0, bursts: int = 0,
                 backlog_bursts: int = 0) -> bool:
    """Whether the tester, not the SUT, limited this trial.

    The receiver was behind when at least 10 % of its bursts filled the
    whole batch right after one that did too (``rx.backlog_bursts``: frames
    kept waiting for it): the tester limited the trial whatever else
    happened. As fast as possible (load 0): nothing was lost
    and the port rarely pushed back (under 10 % of the sender's attempts
    found less room than a burst; a memif ring the SUT does not drain fast
    enough pushes back on most), so the SUT took everything the tester could
    make: the rate is the tester's ceiling, a lower bound of the SUT's. At a
    given load: the tester sent less than 97 % of what was asked without
    being pushed back. Documents without the counters (the Python
    reference tester) are judged on loss and ``tx_full`` alone."""
    if bursts > 0 and backlog_bursts >= RX_BEHIND_MIN * bursts:
        return True
    if tx_full > 0:
        return False
    if load_pps <= 0:
        if attempts > 0 and pushback >= PUSHBACK_MIN * attempts:
            return False
        return sent > 0 and received >= sent
    return sent < 0.97 * load_pps * duration_s * streams
