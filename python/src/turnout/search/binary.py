"""NDR/PDR by bisection (RFC 2544 style) between 0 and a saturating load.

The interval [lo, hi] always has lo meeting the loss target (or lo = 0)
and hi failing it; each trial halves it until (hi - lo) / hi is below
``relative_width``. A trial that loses nothing when the load is above the
tester's reach (it could not send what was asked) counts by what was sent:
the loss target is checked against lost plus unsent frames over the
intended count (``base.bad_ratio``, as MLRsearch judges), and the rate a
passing trial certifies is the load it actually offered (``sent /
duration_s``). Loads and rates are aggregate over all streams.
"""

from __future__ import annotations

from ..measure.counts import Measurer, TrialCounts
from .base import LoggingMeasurer, SearchResult, bad_ratio

__all__ = ["binary_search"]


def binary_search(
    measurer: Measurer,
    *,
    loss_target: float,
    max_load_pps: float,
    min_load_pps: float = 1000.0,
    duration_s: float = 1.0,
    relative_width: float = 0.05,
    max_trials: int = 30,
) -> SearchResult:
    """Highest offered load in [min_load_pps, max_load_pps] whose loss ratio
    is ≤ ``loss_target``.

    Loads are aggregate over all streams. ``max_load_pps`` is usually R+ ×
    1.1 or the tester's maximum. Returns rate 0 when even ``min_load_pps``
    loses too much. The result is tester-bound when the lowest failing load
    failed for frames the tester could not send, not for the SUT's loss.
    """
    if max_load_pps <= 0:
        raise ValueError("binary search needs max_load_pps > 0 (run R+ first)")
    if not 0 <= loss_target < 1:
        raise ValueError(f"loss target {loss_target} outside [0, 1)")
    if not 0 < relative_width < 1:
        raise ValueError(f"relative width {relative_width} outside (0, 1)")
    log = LoggingMeasurer(measurer)
    best: TrialCounts | None = None
    best_rate = 0.0
    # Did the tester, rather than the SUT, fail the lowest failing load?
    tester_failed = False
    lowest_fail = float("inf")

    def passes(load: float) -> bool:
        nonlocal best, best_rate, tester_failed, lowest_fail
        c = log.measure(duration_s, load)
        ok = c.sent > 0 and bad_ratio(c) <= loss_target
        if ok:
            rate = min(load, c.tx_total_pps) if c.tx_total_pps > 0 else load
            if rate >= best_rate:
                best, best_rate = c, rate
        elif load < lowest_fail:
            lowest_fail = load
            tester_failed = c.lost <= loss_target * max(1, c.sent) and c.unsent > 0
        return ok

    def result(rate: float, at: TrialCounts | None) -> SearchResult:
        tb = bool(tester_failed) or bool(at is not None and at.tester_bound)
        return SearchResult(rate, loss_target, "binary", at, log.trials, tester_bound=tb)

    hi = max_load_pps
    if passes(hi):
        return result(best_rate, best)
    lo = min(min_load_pps, hi / 2)
    if not passes(lo):
        return result(0.0, None)
    while (hi - lo) / hi > relative_width and len(log.trials) < max_trials:
        mid = (lo + hi) / 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return result(best_rate, best)
