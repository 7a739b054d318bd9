"""NDR/PDR with CSIT's MLRsearch (PyPI ``MLRsearch``), when it is installed.

Both goals are searched in one run, as MLRsearch is designed to. Every
trial passes MLRsearch the *intended* count (load × duration) besides what
was offered and lost, so a trial whose tester could not send the load is
judged by what it failed to send too (MLRsearch counts unsent frames as
bad) and never certifies a load that was not offered. The rate reported is
what MLRsearch calls the *conditional throughput* at the relevant lower
bound (the load scaled by the worst loss ratio seen there), not the bound's
load itself. Loads are aggregate over all streams (docs/bench.md, "Rates").

Goals: ``MlrGoals`` (the campaign's ``mlr_*`` keys). The default is one
trial per decision (exceed ratio 0, the duration sum equal to the trial
duration), what a quick campaign can afford; CSIT's robust goals are
several trials per load: ``duration_sum_s`` of trials at the final
duration, a share ``exceed_ratio`` of which may fail (CSIT: 0.5), after a
warm-up trial of ``warmup_s``.
"""

from __future__ import annotations

import importlib.util
import logging
from dataclasses import dataclass

from ..measure.counts import Measurer, TrialCounts
from .base import LoggingMeasurer, SearchResult

__all__ = ["MlrGoals", "available", "mlr_search"]

log = logging.getLogger(__name__)


def available() -> bool:
    """Whether the MLRsearch package can be imported."""
    return importlib.util.find_spec("MLRsearch") is not None


@dataclass(frozen=True)
class MlrGoals:
    """How much evidence each decision of the search needs.

    ``duration_sum_s``: seconds of final-duration trials per load (None:
    one trial's worth); ``exceed_ratio``: share of that time that may fail
    the loss target (0: none may); ``initial_trial_s``: the length of the
    exploratory trials (None: the final duration); ``warmup_s``: a trial of
    this length before the search, not counted; ``expansion``: how fast the
    interval grows while looking for a bound.
    """

    duration_sum_s: float | None = None
    exceed_ratio: float = 0.0
    initial_trial_s: float | None = None
    warmup_s: float = 0.0
    expansion: int = 2


def mlr_search(
    measurer: Measurer,
    *,
    loss_targets: tuple[float, ...],
    max_load_pps: float,
    min_load_pps: float = 1000.0,
    duration_s: float = 1.0,
    relative_width: float = 0.05,
    search_duration_max_s: float = 120.0,
    goals: MlrGoals | None = None,
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

    g = goals or MlrGoals()
    logm = LoggingMeasurer(measurer)
    by_load: dict[float, list[TrialCounts]] = {}

    class _Adapter(AbstractMeasurer):  # type: ignore[misc]
        def measure(self, intended_duration: float, intended_load: float) -> MeasurementResult:
            c = logm.measure(intended_duration, intended_load)
            by_load.setdefault(round(intended_load, 3), []).append(c)
            return MeasurementResult(
                intended_duration=intended_duration, intended_load=intended_load,
                offered_count=c.sent, loss_count=c.lost,
                intended_count=max(c.intended_count, c.sent),
                offered_duration=c.duration_s or intended_duration,
            )

    initial = min(g.initial_trial_s or duration_s, duration_s)
    search_goals = tuple(
        SearchGoal(
            loss_ratio=t, exceed_ratio=g.exceed_ratio, relative_width=relative_width,
            initial_trial_duration=initial, final_trial_duration=duration_s,
            duration_sum=max(duration_s, g.duration_sum_s or duration_s),
            preceding_targets=1, expansion_coefficient=g.expansion, fail_fast=False,
        )
        for t in loss_targets
    )
    config = Config()
    config.goals = search_goals
    config.min_load = min_load_pps
    config.max_load = max(max_load_pps, min_load_pps * 2)
    config.search_duration_max = search_duration_max_s
    config.warmup_duration = g.warmup_s
    out = MultipleLossRatioSearch(config=config).search(measurer=_Adapter(), debug=log.debug)
    results = []
    for goal, target in zip(search_goals, loss_targets, strict=True):
        res = out[goal]
        ct = res.conditional_throughput
        rate = float(ct.float_load) if ct is not None else 0.0
        lower = res.relevant_lower_bound
        upper = res.relevant_upper_bound
        lower_load = float(lower.float_load) if lower is not None else 0.0
        at_trials = by_load.get(round(lower_load, 3), []) if lower is not None else []
        at = at_trials[-1] if at_trials else None
        # Tester-bound: at the relevant upper bound, the trials failed for
        # frames the tester could not send rather than for the SUT's loss.
        up_trials = by_load.get(round(float(upper.float_load), 3), []) if upper is not None else []
        tester_bound = bool(up_trials) and all(
            c.unsent > 0 and c.lost <= target * max(1, c.sent) for c in up_trials
        )
        results.append(SearchResult(
            rate, target, "mlrsearch", at, list(logm.trials), tester_bound=tester_bound,
            extra={"lower_bound_pps": lower_load,
                   "upper_bound_pps": float(upper.float_load) if upper is not None else None,
                   "exceed_ratio": g.exceed_ratio,
                   "duration_sum_s": max(duration_s, g.duration_sum_s or duration_s)},
        ))
    return results
