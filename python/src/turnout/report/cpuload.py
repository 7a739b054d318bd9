"""Capacity, CPU at this load, and loads a SUT could not take, per stored trial.

Two questions, two numbers (docs/bench.md, "Capacity and CPU at this load"):

- **Capacity** is the trial's ``busy_cycles_per_frame``: the SUT's own
  account of the cycles it spent working on frames, idle handling (empty
  polls, sleeps, wake-ups) excluded for every SUT alike — what one core
  would forward at saturation (``TSC rate / capacity`` frames per second).
- **CPU at this load** is everything the SUT consumed in the trial's traffic
  window, idle handling included, from the OS: the CPU time of all its
  threads (their run time from /proc schedstat, ``cycles_per_packet``) — for a kernel
  switch, which has no threads, the kernel time of its CPUs (its own
  account, which has no idle polling to leave out). Per frame and in % of
  one core. A busy poller's CPU at a low load is a whole core over few
  frames; a switch that sleeps pays its wake-ups instead.

The **user-space part** of a capacity figure is what is left of it once the
SUT's kicks to its peers are taken out (``user_space_part``): turnoutd
times each kick's system call (its workers' ``kick_cycles``; the bench
stores them per frame as ``kick_cycles_per_frame``). On the kernel's port
paths (AF_XDP on veth) a kick is a `sendto()` that copies each frame into
an skb and runs the veth peer's receive (the tester's AF_XDP copy) before
it returns, most of the capacity; what is left is what the switch's own
code decides. None for SUTs that do not account their kicks.

The kernel share (the kernel's work on the SUT's CPUs outside any process)
stays next to both, never added: with tick-based accounting a softirq that
runs inside a thread's system call is charged to that thread's system time
*and* to the CPU's softirq time, so adding them would count it twice.

Everything here reads stored columns only, so databases written before
these figures were named (schema 4, main before this change) read the same
way; their turnoutd capacity included the CPU of its sleeps and wake-ups
(``OLD_TURNOUTD_COST``), which the report says wherever it shows it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measure.gen import REFUSED, load_refused
from ..results import Trial

__all__ = ["OLD_TURNOUTD_COST", "REFUSED", "CpuAtLoad", "capacity_note",
           "cpu_at_load", "refusal", "refused_short", "sent_share", "user_space_part"]

#: text of turnoutd's cost source before capacity and CPU at load were
#: separated: its busy cycles then included its sleeps' and wake-ups' CPU
OLD_TURNOUTD_COST = "CPU spent in sleeps and wake-ups"


@dataclass(frozen=True)
class CpuAtLoad:
    """What the SUT consumed in one trial's traffic window."""

    #: cycles per frame received (TSC rate), or None without an account
    cycles_per_frame: float | None
    #: CPU seconds per second of the window, in % of one core
    pct: float | None
    #: "threads" (OS CPU time of its threads) | "kernel" (its CPUs' kernel
    #: time: a kernel switch) | "" (none: the bare wire, or nothing sampled)
    source: str


def _sut_rows(t: Trial) -> list[dict[str, Any]]:
    return [c for c in t.cpu if isinstance(c, dict) and c.get("role", "sut") == "sut"]


def user_space_part(capacity: float | None, extra: dict[str, Any] | None) -> float | None:
    """``capacity`` less the kicks' cycles per frame stored with it
    (``extra["kick_cycles_per_frame"]``), never below 0; None without
    either."""
    kicks = (extra or {}).get("kick_cycles_per_frame")
    if capacity is None or kicks is None:
        return None
    return max(0.0, float(capacity) - float(kicks))


def cpu_at_load(t: Trial) -> CpuAtLoad:
    """The SUT's CPU at the trial's load (see the module doc)."""
    rows = _sut_rows(t)
    pct: float | None = None
    if rows and t.cycles_per_packet is not None:
        pct = 100.0 * sum(float(c.get("util", 0.0)) for c in rows)
        return CpuAtLoad(float(t.cycles_per_packet), pct, "threads")
    extra = t.extra if isinstance(t.extra, dict) else {}
    src = str(extra.get("cost_source", ""))
    if not rows and t.busy_cycles_per_frame is not None and src.startswith("kernel"):
        # a kernel switch: its account is its CPUs' kernel time, busy only
        span, busy = extra.get("cost_span_s"), extra.get("kernel_s")
        if span and busy is not None and float(span) > 0:
            pct = 100.0 * float(busy) / float(span)
        else:
            hz = float(extra.get("cycles_hz") or 0.0)
            if hz > 0:
                pct = 100.0 * float(t.busy_cycles_per_frame) * t.rx_total_pps / hz
        return CpuAtLoad(float(t.busy_cycles_per_frame), pct, "kernel")
    if rows:
        pct = 100.0 * sum(float(c.get("util", 0.0)) for c in rows)
        return CpuAtLoad(None, pct, "threads")
    return CpuAtLoad(None, None, "")


def capacity_note(extra: dict[str, Any] | None) -> str:
    """What to know about a stored capacity figure: "" for the current
    definition; a note for turnoutd figures recorded with its wake-ups."""
    src = str((extra or {}).get("cost_source", ""))
    if OLD_TURNOUTD_COST in src:
        return ("recorded before capacity and CPU at load were separated: it includes "
                "turnoutd's sleeps and wake-ups")
    return ""


def refusal(t: Trial) -> str:
    """Why the SUT could not take the load this trial offered it ("" when it
    took it, for saturating trials, and when the tester fell short first).

    Recomputed from the stored counts with the bench's own rule
    (measure/gen.py ``load_refused``), so trials stored before the rule
    existed, which carried no reason or a wrong "tester-bound", get it too.
    A receiver that was behind is the tester's, whatever else happened.
    """
    extra = t.extra if isinstance(t.extra, dict) else {}
    if extra.get("load_refused"):
        return str(extra["load_refused"])
    if t.offered_total_pps <= 0 or t.method in ("rplus", "rule_update", "flow_mods"):
        return ""
    if str(extra.get("tester_bound_why", "")).startswith("receiver behind"):
        return ""
    return load_refused(t.offered_total_pps, t.duration_s, int(t.sent), int(t.unsent),
                        int(extra.get("tx_attempts", 0)), int(extra.get("tx_pushback", 0)))


def sent_share(why: str) -> str:
    """"83.0%": the share of the load the tester sent, from a ``load_refused`` reason."""
    if "the tester sent " not in why:
        return ""
    return why.split("the tester sent ", 1)[1].split(" of it", 1)[0]


def refused_short(why: str) -> str:
    """"SUT could not take the load (sent 83.0%)" from a ``load_refused`` reason."""
    share = sent_share(why)
    return f"{REFUSED} (sent {share})" if share else REFUSED
