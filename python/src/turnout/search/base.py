"""What every search returns, and the trial log it keeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..measure.counts import Measurer, TrialCounts

__all__ = ["PDR_LOSS_RATIO", "LoggingMeasurer", "SearchResult"]

#: Partial drop rate: loss ratio allowed for PDR (0.5 %).
PDR_LOSS_RATIO = 0.005


@dataclass
class SearchResult:
    """Found rate and the trials that led to it.

    ``rate_pps``: for R+ the received rate under saturation; for NDR/PDR the
    highest offered load that met the loss target (0 when even the lowest
    load failed). ``at``: the trial taken at that load (None if none met it).
    """

    rate_pps: float
    loss_target: float
    searcher: str
    at: TrialCounts | None = None
    trials: list[TrialCounts] = field(default_factory=list)


class LoggingMeasurer:
    """Wraps a Measurer, keeps every trial and reports each to ``on_trial``."""

    def __init__(
        self, inner: Measurer, on_trial: Callable[[TrialCounts], None] | None = None
    ) -> None:
        self.inner = inner
        self.on_trial = on_trial
        self.trials: list[TrialCounts] = []

    def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
        counts = self.inner.measure(duration_s, load_pps)
        self.trials.append(counts)
        if self.on_trial is not None:
            self.on_trial(counts)
        return counts
