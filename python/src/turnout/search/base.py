"""What every search returns, and the trial log it keeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ..measure.counts import Measurer, TrialCounts

__all__ = ["PDR_LOSS_RATIO", "LoggingMeasurer", "SearchResult", "bad_ratio"]

#: Partial drop rate: loss ratio allowed for PDR (0.5 %).
PDR_LOSS_RATIO = 0.005


def bad_ratio(c: TrialCounts) -> float:
    """The loss ratio a trial is judged by, as MLRsearch judges it: frames
    lost plus frames the tester could not send, over what was intended (or
    sent, when more). A trial that could not offer its load never passes at
    that load just because nothing it did send was lost."""
    overall = max(c.sent, c.intended_count)
    bad = c.lost + max(0, c.intended_count - c.sent)
    return bad / overall if overall > 0 else 0.0


@dataclass
class SearchResult:
    """Found rate (aggregate over all streams) and the trials that led to it.

    ``rate_total_pps``: for R+ the received rate under saturation; for
    NDR/PDR the load the search certified (0 when even the lowest load
    failed). ``at``: the trial taken at that load (None if none met it).
    ``tester_bound``: the tester, not the SUT, limited the result (None:
    unknown). ``extra``: what the strategy knows besides (e.g. MLRsearch's
    bounds).
    """

    rate_total_pps: float
    loss_target: float
    searcher: str
    at: TrialCounts | None = None
    trials: list[TrialCounts] = field(default_factory=list)
    tester_bound: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class LoggingMeasurer:
    """Wraps a Measurer, keeps every trial and reports each to ``on_trial``."""

    def __init__(
        self, inner: Measurer, on_trial: Callable[[TrialCounts], None] | None = None
    ) -> None:
        self.inner = inner
        self.on_trial = on_trial
        self.trials: list[TrialCounts] = []

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        counts = self.inner.measure(duration_s, load_total_pps)
        self.trials.append(counts)
        if self.on_trial is not None:
            self.on_trial(counts)
        return counts
