"""Rule-update time under traffic ("Hard or hopeless" §3.5, docs/references.md:
"rule-update-time").

A steady stream at a fixed rate goes through the SUT to destination A; at
``t0`` the bench issues the SUT's own rule update (``SutAdapter.move_rule``:
a bridge FDB entry replaced, an OpenFlow rule modified, a turnoutd logic
command) that moves the stream to destination B. Measured:

- ``first_b``: from t0 until the first frame arrives at B (the update took
  effect in the data path);
- ``last_a``: from t0 until the last frame arrives at A (frames stopped at
  the old destination; before ``first_b`` when the switch dropped frames in
  between, after it when old and new rules overlapped);
- frames lost over the switch-over: sent − (arrived at A + arrived at B);
- ``command``: how long the update command itself took to return.

The arrivals are read from the kernel's receive counters of the two
destination interfaces (the tester's veth ends; no receiver process: the
destinations do not compete with the sender for the tester's core), sampled
every ``period_s`` by a thread of the bench. Between two samples the
arrivals of a constant-rate stream are evenly spaced, so the first frame at
B is placed ``n / rate`` before the sample that first saw ``n`` of them (not
before the previous sample), and the last frame at A likewise after the
previous sample: the error is about one frame interval plus the jitter of
the sampler, not a whole sampling period (``extra.sample_gap_ns`` says what
the period really was). ``analyze`` does that arithmetic on a list of
samples and is tested with synthetic ones.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .counts import TrialCounts

__all__ = ["SENDER_STALL_NS", "CounterPoller", "UpdateError", "UpdateMeasurer", "UpdateTimes",
           "analyze", "netdev_counts"]

#: A sender that ever fell this far behind its schedule (the host
#: descheduled it) limited the trial: its catch-up burst can overflow the
#: SUT's receive ring (frames lost that the update did not lose), and a
#: stall around t0 delays the first frame at B. Such trials are stored
#: ``tester_bound`` with the reason.
SENDER_STALL_NS = 10e6


class UpdateError(RuntimeError):
    """The update trial could not be measured (the message says why)."""


@dataclass(frozen=True)
class UpdateTimes:
    """What ``analyze`` found; times are ns after t0 (None: never)."""

    first_b_ns: float | None
    last_a_ns: float | None
    received_a: int
    received_b: int
    before_t0_a: int  # frames at A before t0 (traffic was flowing)
    before_t0_b: int  # frames at B before t0 (0: the update moved the stream)
    sample_gap_ns: float  # median time between samples
    #: the longest stretch with no arrival at A or B around the switch-over
    #: (from 2 ms before t0 to the first frame at B): the switch holding or
    #: dropping frames, or a sender the host descheduled (then lost = 0)
    idle_ns: float = 0.0
    #: frames missing around the switch-over: the stream's rate times the
    #: window [t0 - 5 ms, t0 + the later of the two times + 20 ms] minus the
    #: arrivals at A and B in it (counts interpolated at its edges); holds
    #: while the sender kept its schedule (see SENDER_STALL_NS)
    lost_switchover: int = 0
    switchover_window_ns: float = 0.0


def netdev_counts(pid: int, ifaces: list[str], dev: str | None = None) -> list[int]:
    """Unicast frames each interface received, in the network namespace of
    process ``pid`` (/proc/PID/net/dev: received packets minus multicast
    and broadcast ones — a bridge's own IGMP reports flood to every port),
    in the order of ``ifaces``."""
    text = dev if dev is not None else Path(f"/proc/{pid}/net/dev").read_text()
    found: dict[str, int] = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        found[name.strip()] = int(f[1]) - int(f[7])
    missing = [i for i in ifaces if i not in found]
    if missing:
        raise UpdateError(f"no interface {missing} in the namespace of process {pid}")
    return [found[i] for i in ifaces]


class CounterPoller:
    """Reads ``read()`` -> [count at A, count at B] every ``period_s`` on a
    thread; ``samples`` are (monotonic ns, a, b)."""

    def __init__(self, read: Callable[[], list[int]], period_s: float = 0.001) -> None:
        self.read = read
        self.period_s = period_s
        self.samples: list[tuple[int, int, int]] = []
        self.error = ""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> CounterPoller:
        self._sample()
        self._thread.start()
        return self

    def _sample(self) -> None:
        a, b = self.read()
        self.samples.append((time.monotonic_ns(), a, b))

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._sample()
            except Exception as e:  # the namespace went away: stop, say why
                self.error = f"{type(e).__name__}: {e}"
                return

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
        if not self.error:
            self._sample()

    def count_a(self) -> int:
        return self.samples[-1][1] - self.samples[0][1] if self.samples else 0


def analyze(samples: list[tuple[int, int, int]], t0_ns: int, rate_pps: float) -> UpdateTimes:
    """First arrival at B and last arrival at A relative to ``t0_ns`` from
    counter samples (monotonic ns, cumulative count at A, at B) of a stream
    at ``rate_pps`` (see the module doc for the interpolation)."""
    if len(samples) < 2:
        raise UpdateError("fewer than two counter samples")
    samples = sorted(samples)
    _, a0, b0 = samples[0]
    gap = 1e9 / rate_pps if rate_pps > 0 else 0.0
    first_b: float | None = None
    last_a: float | None = None
    before_a = 0
    b_before = 0
    for (tp, ap, bp), (ts, a_s, b_s) in itertools.pairwise(samples):
        da, db = a_s - ap, b_s - bp
        if ts <= t0_ns:
            before_a += da
            b_before += db
        if db > 0 and first_b is None and ts > t0_ns:
            # db frames evenly spaced, the last within a gap before ts: the first
            # (db - 0.5) gaps before ts on average, never before the previous
            # sample, nor before the update was issued
            first_b = max(float(tp), float(t0_ns), ts - (db - 0.5) * gap) - t0_ns
        if da > 0:
            last_a = min(float(ts), tp + (da - 0.5) * gap) - t0_ns
    gaps = sorted(b[0] - a[0] for a, b in itertools.pairwise(samples))
    idle = 0.0
    if first_b is not None:
        lo, hi = t0_ns - 2e6, t0_ns + first_b
        run: float | None = None  # start of the current stretch without arrivals
        for (tp, ap, bp), (ts, a_s, b_s) in itertools.pairwise(samples):
            if a_s == ap and b_s == bp:
                run = tp if run is None else run
                if run < hi and ts > lo:
                    idle = max(idle, min(ts, hi) - max(run, lo))
            else:
                run = None
    return UpdateTimes(
        first_b_ns=first_b, last_a_ns=last_a, received_a=samples[-1][1] - a0,
        received_b=samples[-1][2] - b0, before_t0_a=before_a, before_t0_b=b_before,
        sample_gap_ns=float(gaps[len(gaps) // 2]) if gaps else 0.0, idle_ns=idle,
        **_switchover_loss(samples, t0_ns, rate_pps, first_b, last_a))


def _switchover_loss(samples: list[tuple[int, int, int]], t0_ns: int, rate_pps: float,
                     first_b: float | None, last_a: float | None) -> dict[str, Any]:
    if first_b is None or rate_pps <= 0:
        return {}
    lo = t0_ns - 5e6
    hi = t0_ns + max(first_b, last_a or 0.0) + 20e6
    if hi > samples[-1][0] or lo < samples[0][0]:
        return {}

    def total(t: float) -> float:  # arrivals at A and B by time t, interpolated
        for (tp, ap, bp), (ts, a_s, b_s) in itertools.pairwise(samples):
            if tp <= t <= ts:
                f = (t - tp) / (ts - tp) if ts > tp else 1.0
                return ap + bp + f * (a_s + b_s - ap - bp)
        return float(samples[-1][1] + samples[-1][2])

    expected = rate_pps * (hi - lo) / 1e9
    return {"lost_switchover": max(0, round(expected - (total(hi) - total(lo)))),
            "switchover_window_ns": hi - lo}


@dataclass
class UpdateMeasurer:
    """One rule-update trial: ``start_traffic(duration_s, rate_pps)`` starts
    the sender and returns a ``finish()`` that waits for it and returns the
    frames it sent and the most frames it ever was behind its schedule
    (turnout-gen ``tx.behind_max``: a sender the host descheduled);
    ``read_counts()`` -> [arrived at A, arrived at B];
    ``move()`` issues the update (A -> B) and returns the command it ran;
    ``restore()`` moves the stream back to A before the trial;
    ``bulk(interface, n)`` installs n flows the stream does not hit at once
    and returns the command, ``unbulk()`` removes them (the SUT adapter's
    ``bulk_flows`` / ``remove_bulk_flows``, for ``measure_bulk``);
    ``stop_traffic`` (None: cannot)
    ends a stream started with ``start_traffic`` early. The real
    bench passes turnout-gen and the SUT adapter (``bench.py``); tests pass
    a model."""

    start_traffic: Callable[[float, float], Callable[[], tuple[int, int]]]
    read_counts: Callable[[], list[int]]
    move: Callable[[], str]
    restore: Callable[[], str]
    #: the switch's own drop counters by reason (None: it has none to read),
    #: read around a flow-mod trial to tell where frames lost meanwhile went
    sut_drops: Callable[[], dict[str, int]] | None = None
    bulk: Callable[[str, int], str] | None = None
    unbulk: Callable[[], None] | None = None
    stop_traffic: Callable[[], None] | None = None
    period_s: float = 0.001
    #: longest a bulk install may take (the stream runs this long at most)
    bulk_timeout_s: float = 300.0
    #: traffic must have flowed at A this long before t0
    lead_s: float = 0.3
    #: the update must take effect within this long (else the trial fails)
    settle_s: float = 0.2
    started_timeout_s: float = 5.0

    def measure(self, duration_s: float, rate_pps: float) -> TrialCounts:
        if rate_pps <= 0:
            raise UpdateError("a rule-update trial needs a fixed rate (update_rate_pps > 0)")
        self.restore()
        time.sleep(self.settle_s)  # frames in flight from an earlier trial arrive
        poller = CounterPoller(self.read_counts, self.period_s).start()
        # the update has at least a second (or the campaign's trial length) to show
        total_s = self.lead_s + max(duration_s, 1.0)
        finish = self.start_traffic(total_s, rate_pps)
        t0 = 0
        try:
            deadline = time.monotonic() + self.started_timeout_s
            while poller.count_a() == 0:
                if time.monotonic() > deadline or poller.error:
                    raise UpdateError("no frame reached destination A before the update "
                                      f"(waited {self.started_timeout_s:g} s)"
                                      + (f": {poller.error}" if poller.error else ""))
                time.sleep(0.005)
            time.sleep(self.lead_s)
            t0 = time.monotonic_ns()
            what = self.move()
            cmd_ns = time.monotonic_ns() - t0
            sent, behind = finish()
            time.sleep(self.settle_s)  # stragglers
        finally:
            poller.stop()
        if poller.error:
            raise UpdateError(f"reading the destinations' counters failed: {poller.error}")
        u = analyze(poller.samples, t0, rate_pps)
        if u.first_b_ns is None:
            raise UpdateError(f"no frame reached destination B after the update ({what}); "
                              f"{u.received_a} arrived at A")
        if u.before_t0_b:
            first = next(t for (t, _, b), (_, _, b2) in itertools.pairwise(poller.samples)
                         if b2 > b)
            raise UpdateError(f"{u.before_t0_b} frames reached destination B before the "
                              f"update (the first {(t0 - first) / 1e6:.1f} ms before it; "
                              f"{u.before_t0_a} reached A): the destinations are not told "
                              "apart")
        received = u.received_a + u.received_b
        span = (poller.samples[-1][0] - poller.samples[0][0]) / 1e9
        behind_ns = behind * 1e9 / rate_pps
        stalled = behind_ns >= SENDER_STALL_NS
        why = (f"the sender fell {behind_ns / 1e6:.1f} ms behind its schedule (the host "
               "descheduled it): its catch-up burst may have overflowed the SUT's receive "
               "ring, and a stall around the update delays the first frame at B"
               if stalled else "")
        return TrialCounts(
            offered_total_pps=rate_pps, duration_s=total_s, sent=sent, received=received,
            lost=max(0, sent - received), streams=1, tester_bound=stalled,
            update_first_ns=u.first_b_ns, update_last_ns=u.last_a_ns,
            extra={"update_command": what, "update_command_ns": cmd_ns,
                   "received_a": u.received_a, "received_b": u.received_b,
                   "extra_arrivals": max(0, received - sent),
                   "sample_gap_ns": u.sample_gap_ns, "idle_ns": u.idle_ns,
                   "sender_behind_max": behind, "sender_behind_max_ns": behind_ns,
                   # frames the window missed but that arrived later were
                   # delayed, not lost: never more than the trial lost
                   "lost_switchover": min(u.lost_switchover, max(0, sent - received)),
                   "switchover_window_ns": u.switchover_window_ns,
                   "tester_bound_why": why,
                   "samples": len(poller.samples),
                   "sampled_s": round(span, 3),
                   "method": "kernel rx counters of the destinations, interpolated at the "
                             "stream's rate (measure/update.py)"},
        )

    def measure_bulk(self, interface: str, n: int, rate_pps: float) -> TrialCounts:
        """Flow-mods per second under traffic: with the stream
        flowing to A, ``bulk(interface, n)`` installs n flows it does not hit;
        the command's time from t0 until it returned (the switch accepted
        them: ovs-ofctl waits for its barrier reply, a JSON-RPC call for its
        answer) gives n / time flow-mods per second; frames lost meanwhile:
        sent minus arrived at A and B over the whole stream, which ends
        ``lead_s`` after the command returned. The flows are removed after."""
        if self.bulk is None or self.unbulk is None or self.stop_traffic is None:
            raise UpdateError("this SUT cannot install flows in bulk")
        if rate_pps <= 0:
            raise UpdateError("a flow-mod trial needs a fixed rate (update_rate_pps > 0)")
        self.restore()
        time.sleep(self.settle_s)
        drops0 = self.sut_drops() if self.sut_drops is not None else {}
        poller = CounterPoller(self.read_counts, self.period_s).start()
        finish = self.start_traffic(self.lead_s * 2 + self.bulk_timeout_s, rate_pps)
        try:
            deadline = time.monotonic() + self.started_timeout_s
            while poller.count_a() == 0:
                if time.monotonic() > deadline or poller.error:
                    self.stop_traffic()
                    raise UpdateError("no frame reached destination A before the flow-mods "
                                      f"(waited {self.started_timeout_s:g} s)"
                                      + (f": {poller.error}" if poller.error else ""))
                time.sleep(0.005)
            time.sleep(self.lead_s)
            t0 = time.monotonic_ns()
            try:
                what = self.bulk(interface, n)
            finally:
                cmd_ns = time.monotonic_ns() - t0
                time.sleep(self.lead_s)
                self.stop_traffic()
                sent, behind = finish()
            time.sleep(self.settle_s)  # stragglers
        finally:
            poller.stop()
            self.unbulk()  # also what a failed install left
        if poller.error:
            raise UpdateError(f"reading the destinations' counters failed: {poller.error}")
        drops1 = self.sut_drops() if self.sut_drops is not None else {}
        sut_drops = {k: n - drops0.get(k, 0) for k, n in drops1.items() if n > drops0.get(k, 0)}
        first, last = poller.samples[0], poller.samples[-1]
        received = (last[1] - first[1]) + (last[2] - first[2])
        behind_ns = behind * 1e9 / rate_pps
        stalled = behind_ns >= SENDER_STALL_NS
        span_s = (last[0] - first[0]) / 1e9
        return TrialCounts(
            offered_total_pps=rate_pps, duration_s=span_s, sent=sent, received=received,
            lost=max(0, sent - received), streams=1, tester_bound=stalled,
            extra={"bulk_interface": interface, "bulk_flows": n, "bulk_command": what,
                   "bulk_command_ns": cmd_ns,
                   "flow_mods_per_s": n / (cmd_ns / 1e9) if cmd_ns > 0 else 0.0,
                   "sender_behind_max": behind, "sender_behind_max_ns": behind_ns,
                   **({"sut_drops": sut_drops} if self.sut_drops is not None else {}),
                   "tester_bound_why": (f"the sender fell {behind_ns / 1e6:.1f} ms behind its "
                                        "schedule (the host descheduled it): its catch-up "
                                        "burst may have overflowed the SUT's receive ring"
                                        if stalled else ""),
                   "method": "the install command's time; lost: sent minus the "
                             "destinations' kernel rx counters over the stream "
                             "(measure/update.py)"},
        )
