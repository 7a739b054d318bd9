"""How the report writes numbers, spreads, times, and the flags of a
group of trials (what limited them)."""

from __future__ import annotations

import math
from collections import defaultdict
from datetime import UTC, datetime

from ..results import Trial
from .model import Spread

__all__ = ["drops_text", "fmt", "fmt_pct", "fmt_spread", "fmt_time", "trial_marks"]


def fmt(x: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits; '–' for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:.0f}"


def fmt_spread(s: Spread | None, digits: int = 3) -> str:
    """'median [min–max]' (just the median when n == 1)."""
    if s is None:
        return "–"
    if s.n < 2:
        return fmt(s.median, digits)
    return f"{fmt(s.median, digits)} [{fmt(s.min, digits)}–{fmt(s.max, digits)}]"


def fmt_pct(x: float) -> str:
    """A ratio as a percentage."""
    return "∞" if math.isinf(x) else f"{100 * x:.1f} %"


def fmt_time(ts: float | None) -> str:
    """A Unix time as UTC ("2026-11-29 13:05:00 UTC"; '–' when unset)."""
    if not ts:
        return "–"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def drops_text(st: list[Trial]) -> str:
    """The switch's drops over the trials by reason, summed ("0": none;
    "–": not read): ``extra.sut_drops``, "port reason" or "reason" -> frames."""
    seen = [x.extra["sut_drops"] for x in st if isinstance(x.extra.get("sut_drops"), dict)]
    if not seen:
        return "–"
    tot: dict[str, int] = defaultdict(int)
    for d in seen:
        for k, n in d.items():
            tot[k] += int(n)
    return ", ".join(f"{k} {n}" for k, n in sorted(tot.items())) or "0"


def _lost_mark(st: list[Trial]) -> str:
    """Frames lost in the trials and where the switch says they went."""
    lossy = [t for t in st if t.lost > 0]
    if not lossy:
        return ""
    text = f"{sum(int(t.lost) for t in lossy)} frames lost in {len(lossy)}/{len(st)}"
    drops = drops_text(lossy)
    if drops == "0":
        return text + " (the switch counted no drop: lost outside it)"
    if drops != "–":
        return text + f" (switch drops: {drops})"
    return text


def trial_marks(st: list[Trial]) -> str:
    """What limited a group of latency or CPU trials, for table flags."""
    n = len(st)
    marks = []
    shared = max((int(t.extra.get("tester_core_sharing", 1)) for t in st), default=1)
    if shared > 1:
        marks.append(f"scheduler: {shared} busy-polling tester/VNF processes share one core "
                     "(the latency is the scheduler's, not the switch's)")
    irq = sum(1 for t in st if t.extra.get("vnf_wakeup") == "interrupt")
    if irq:
        marks.append(f"VNFs in interrupt mode on a shared core in {irq}/{n} (they sleep on their "
                     "memif eventfds; their wake-up latency is in the figures, and under load "
                     "they take the tester's CPU time)")
    fifo = sum(1 for t in st
               if any(str(v.get("sched", "")).startswith("fifo")
                      for v in t.extra.get("vnf_sched", []) if isinstance(v, dict)))
    if fifo:
        marks.append(f"VNFs at SCHED_FIFO in {fifo}/{n} (their wake-up preempts the tester)")
    tb = sum(1 for t in st if t.tester_bound)
    if tb:
        marks.append(f"tester-bound in {tb}/{n}")
    rb = sum(1 for t in st if t.extra.get("rplus_tester_bound"))
    if rb:
        marks.append(f"R+ tester-bound in {rb}/{n} (the load is a fraction of a lower bound)")
    vnf = sum(int(t.vnf_dropped) for t in st)
    if vnf:
        marks.append(f"{vnf} frames dropped by chain VNFs, not the SUT")
    unsent = sum(int(t.unsent) for t in st)
    if unsent:
        marks.append(f"{unsent} frames the tester could not send")
    lost = _lost_mark(st)
    if lost:
        marks.append(lost)
    return "; ".join(marks)
