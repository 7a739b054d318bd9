"""NDR/PDR by bisection (RFC 2544 style) between 0 and a saturating load.

The interval [lo, hi] always has lo meeting the loss target (or lo = 0)
and hi failing it; each trial halves it until (hi - lo) / hi is below
``relative_width``. A trial that loses nothing when the load is above the
tester's reach (it could not send what was asked) counts by what was sent:
the loss target is checked against ``lost / sent``, and the rate a passing
trial certifies is the load it actually offered (``sent / duration_s``).
"""

from __future__ import annotations

from ..measure.counts import Measurer, TrialCounts
from .base import LoggingMeasurer, SearchResult

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

    ``max_load_pps`` is usually R+ × 1.1 or the tester's maximum. Returns
    rate 0 when even ``min_load_pps`` loses too much.
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

    def passes(load: float) -> bool:
        nonlocal best, best_rate
        c = log.measure(duration_s, load)
        ok = c.sent > 0 and c.loss_ratio <= loss_target
        if ok:
            rate = min(load, c.tx_pps) if c.tx_pps > 0 else load
            if rate >= best_rate:
                best, best_rate = c, rate
        return ok

    hi = max_load_pps
    if passes(hi):
        return SearchResult(best_rate, loss_target, "binary", best, log.trials)
    lo = min(min_load_pps, hi / 2)
    if not passes(lo):
        return SearchResult(0.0, loss_target, "binary", None, log.trials)
    while (hi - lo) / hi > relative_width and len(log.trials) < max_trials:
        mid = (lo + hi) / 2
        if passes(mid):
            lo = mid
        else:
            hi = mid
    return SearchResult(best_rate, loss_target, "binary", best, log.trials)
