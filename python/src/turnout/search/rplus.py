"""R+: the average received rate under saturating input ("Software switches for
NFV" §4.4, docs/references.md)."""

from __future__ import annotations

from ..measure.counts import Measurer
from .base import LoggingMeasurer, SearchResult

__all__ = ["rplus"]


def rplus(measurer: Measurer, duration_s: float, max_load_pps: float = 0.0) -> SearchResult:
    """One trial at saturating input: ``max_load_pps`` (aggregate) or, when
    0, as fast as the tester can send. The rate is what was received per
    second over all streams."""
    log = LoggingMeasurer(measurer)
    counts = log.measure(duration_s, max_load_pps)
    return SearchResult(
        rate_total_pps=counts.rx_total_pps, loss_target=1.0, searcher="rplus", at=counts,
        trials=log.trials, tester_bound=counts.tester_bound,
    )
