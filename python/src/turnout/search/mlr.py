"""NDR/PDR with CSIT's MLRsearch (PyPI ``MLRsearch``), when it is installed.

Both goals are searched in one run, as MLRsearch is designed to.
"""

from __future__ import annotations

import importlib.util
import logging

from ..measure.counts import Measurer, TrialCounts
from .base import LoggingMeasurer, SearchResult

__all__ = ["available", "mlr_search"]

log = logging.getLogger(__name__)


def available() -> bool:
    """Whether the MLRsearch package can be imported."""
    return importlib.util.find_spec("MLRsearch") is not None


def mlr_search(
    measurer: Measurer,
    *,
    loss_targets: tuple[float, ...],
    max_load_pps: float,
    min_load_pps: float = 1000.0,
    duration_s: float = 1.0,
    relative_width: float = 0.05,
    search_duration_max_s: float = 120.0,
) -> list[SearchResult]:
    """One SearchResult per loss target (same order); rate 0 when not even
    ``min_load_pps`` met the target. All trials are attached to each."""
    from MLRsearch import (  # type: ignore[import-not-found]
        AbstractMeasurer,
        Config,
        MeasurementResult,
        MultipleLossRatioSearch,
        SearchGoal,
    )

    logm = LoggingMeasurer(measurer)
    by_load: dict[float, TrialCounts] = {}

    class _Adapter(AbstractMeasurer):  # type: ignore[misc]
        def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
            c = logm.measure(intended_duration, intended_load)
            by_load[round(intended_load, 3)] = c
            return MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=c.sent, loss_count=c.lost,
            )

    goals = tuple(
        SearchGoal(
            loss_ratio=t, exceed_ratio=0.0, relative_width=relative_width,
            initial_trial_duration=min(1.0, duration_s), final_trial_duration=duration_s,
            duration_sum=duration_s, preceding_targets=1, expansion_coefficient=2,
            fail_fast=False,
        )
        for t in loss_targets
    )
    config = Config()
    config.goals = goals
    config.min_load = min_load_pps
    config.max_load = max(max_load_pps, min_load_pps * 2)
    config.search_duration_max = search_duration_max_s
    config.warmup_duration = 0.0
    out = MultipleLossRatioSearch(config=config).search(measurer=_Adapter(), debug=log.debug)
    results = []
    for goal, target in zip(goals, loss_targets, strict=True):
        bound = out[goal].relevant_lower_bound
        rate = float(bound.float_load) if bound is not None else 0.0
        at = by_load.get(round(rate, 3)) if bound is not None else None
        results.append(SearchResult(rate, target, "mlrsearch", at, list(logm.trials)))
    return results
