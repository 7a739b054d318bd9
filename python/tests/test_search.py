"""Searches and statistics on synthetic measurers (clean and noisy)."""

from __future__ import annotations

import math

import pytest

from turnout import testpeers
from turnout.measure.counts import Measurer, TrialCounts
from turnout.measure.stats import gbps, paired_ratios, percentile, summarize
from turnout.measure.synthetic import SyntheticMeasurer
from turnout.search import (
    PDR_LOSS_RATIO,
    binary_search,
    mlr_search,
    mlrsearch_available,
    ndr_pdr,
    rplus,
)


def test_synthetic_is_a_measurer_and_conserves_packets():
    m = SyntheticMeasurer(capacity_pps=1e6)
    assert isinstance(m, Measurer)
    c = m.measure(2.0, 1.5e6)
    assert (c.sent, c.received, c.lost) == (3_000_000, 2_000_000, 1_000_000)
    assert c.loss_ratio == pytest.approx(1 / 3) and c.rx_total_pps == 1e6


def test_rplus_is_received_rate_under_saturation():
    m = SyntheticMeasurer(capacity_pps=7e5, max_offered_pps=2e6)
    r = rplus(m, 1.0)
    assert r.rate_total_pps == pytest.approx(7e5)
    assert m.calls == [(1.0, 0.0)]


@pytest.mark.parametrize("capacity", [5e4, 4e5, 9e6])
def test_binary_ndr_within_width(capacity):
    m = SyntheticMeasurer(capacity_pps=capacity)
    r = binary_search(m, loss_target=0.0, max_load_pps=capacity * 3, relative_width=0.01)
    assert capacity * 0.98 <= r.rate_total_pps <= capacity
    assert r.at is not None and r.at.lost == 0
    assert len(r.trials) == len(m.calls) <= 30


def test_binary_pdr_tolerates_background_loss_ndr_does_not():
    m = SyntheticMeasurer(capacity_pps=1e6, background_loss=0.001)
    ndr = binary_search(m, loss_target=0.0, max_load_pps=2e6)
    pdr = binary_search(m, loss_target=PDR_LOSS_RATIO, max_load_pps=2e6)
    assert ndr.rate_total_pps == 0.0 and ndr.at is None
    assert 0.95e6 <= pdr.rate_total_pps <= 1.01e6


def test_binary_when_max_load_passes():
    m = SyntheticMeasurer(capacity_pps=1e6)
    r = binary_search(m, loss_target=0.0, max_load_pps=5e5)
    assert r.rate_total_pps == 5e5 and len(m.calls) == 1


def test_binary_rejects_bad_arguments():
    m = SyntheticMeasurer(capacity_pps=1e6)
    with pytest.raises(ValueError, match="max_load_pps"):
        binary_search(m, loss_target=0.0, max_load_pps=0)
    with pytest.raises(ValueError, match="loss target"):
        binary_search(m, loss_target=1.5, max_load_pps=1e6)


def test_binary_on_noisy_measurer_lands_in_noise_band():
    for seed in range(5):
        m = SyntheticMeasurer(capacity_pps=1e6, noise_rel=0.1, seed=seed)
        r = binary_search(m, loss_target=PDR_LOSS_RATIO, max_load_pps=2e6)
        assert 0.85e6 <= r.rate_total_pps <= 1.12e6, (seed, r.rate_total_pps)


def test_a_load_the_tester_could_not_send_never_passes():
    """A tester capped at 3e5 pps sends that with zero loss whatever it is
    asked: a load above it must fail (the frames it could not send count
    as bad, as MLRsearch counts them), the result is at most what was sent,
    and it says the tester, not the SUT, was the limit."""

    class Capped:
        def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
            sent = int(min(load_pps, 3e5) * duration_s)
            return TrialCounts(load_pps, duration_s, sent, sent, 0,
                               unsent=int(load_pps * duration_s) - sent)

    r = binary_search(Capped(), loss_target=0.0, max_load_pps=1e6, relative_width=0.01)
    assert 0.97 * 3e5 <= r.rate_total_pps <= 3e5
    assert r.tester_bound is True
    # a SUT that really loses: not tester-bound
    r = binary_search(SyntheticMeasurer(capacity_pps=2e5), loss_target=0.0, max_load_pps=1e6)
    assert r.tester_bound is False


def test_mlrsearch_never_certifies_a_load_that_was_not_sent():
    """The tester sends half the intended load with zero loss (was: passed
    at the intended load, because no intended count was given)."""
    testpeers.need(mlrsearch_available(), "MLRsearch not installed (pip, python[dev])")

    class Half:
        def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
            sent = int(load_pps * duration_s / 2)
            return TrialCounts(load_pps, duration_s, sent, sent, 0,
                               unsent=int(load_pps * duration_s) - sent)

    (ndr,) = mlr_search(Half(), loss_targets=(0.0,), max_load_pps=1e6, min_load_pps=1e4,
                        duration_s=1.0, relative_width=0.05)
    # 50 % of every trial is unsent: no load passes a zero-loss goal
    assert ndr.rate_total_pps == 0.0


def test_mlrsearch_reports_the_conditional_throughput():
    """With loss at the lower bound, the rate is that load scaled by its
    worst loss ratio (MLRsearch's conditional throughput), not the load."""
    testpeers.need(mlrsearch_available(), "MLRsearch not installed (pip, python[dev])")
    m = SyntheticMeasurer(capacity_pps=8e5, background_loss=0.002)
    (pdr,) = mlr_search(m, loss_targets=(PDR_LOSS_RATIO,), max_load_pps=2e6,
                        min_load_pps=1e4, duration_s=1.0, relative_width=0.02)
    lower = pdr.extra["lower_bound_pps"]
    assert pdr.rate_total_pps < lower
    assert pdr.rate_total_pps == pytest.approx(lower * (1 - 0.002), rel=2e-3)


def test_mlrsearch_robust_goals_take_several_trials_per_load():
    testpeers.need(mlrsearch_available(), "MLRsearch not installed (pip, python[dev])")
    from turnout.search import MlrGoals

    m = SyntheticMeasurer(capacity_pps=5e5, noise_rel=0.05, seed=2)
    (ndr,) = mlr_search(m, loss_targets=(0.0,), max_load_pps=1e6, min_load_pps=1e4,
                        duration_s=1.0, relative_width=0.05,
                        goals=MlrGoals(duration_sum_s=3.0, exceed_ratio=0.5, warmup_s=0.5))
    loads = [round(load) for _, load in m.calls]
    assert max(loads.count(x) for x in loads) >= 2  # a decision needed more than one trial
    assert 0.4e6 <= ndr.rate_total_pps <= 5.3e5
    assert ndr.extra["exceed_ratio"] == 0.5


def test_mlrsearch_finds_ndr_and_pdr():
    testpeers.need(mlrsearch_available(), "MLRsearch not installed (pip, python[dev])")
    m = SyntheticMeasurer(capacity_pps=8e5, background_loss=0.002)
    ndr, pdr = mlr_search(m, loss_targets=(0.0, PDR_LOSS_RATIO), max_load_pps=2e6,
                          min_load_pps=1e4, duration_s=1.0, relative_width=0.02)
    assert ndr.searcher == "mlrsearch"
    assert ndr.rate_total_pps <= 1.1e4  # background loss everywhere: only the minimum may "pass"
    assert 0.75e6 <= pdr.rate_total_pps <= 8.1e5


@pytest.mark.parametrize("strategy", ["binary", "auto"])
def test_ndr_pdr_strategies(strategy):
    if strategy == "auto" and not mlrsearch_available():
        testpeers.need(False, "MLRsearch not installed (pip, python[dev])")
    m = SyntheticMeasurer(capacity_pps=5e5, noise_rel=0.02, seed=3)
    ndr, pdr = ndr_pdr(m, max_load_pps=1e6, duration_s=1.0, strategy=strategy)
    assert 0.45e6 <= ndr.rate_total_pps <= pdr.rate_total_pps * 1.0001 <= 5.2e5
    with pytest.raises(ValueError, match="strategy"):
        ndr_pdr(m, max_load_pps=1e6, duration_s=1.0, strategy="nope")


def test_summary_and_percentiles():
    s = summarize([3.0, 1.0, 2.0, 10.0])
    assert (s.n, s.median, s.min, s.max) == (4, 2.5, 1.0, 10.0)
    assert s.spread_rel == pytest.approx(9 / 2.5)
    assert percentile([1, 2, 3, 4, 5], 0.5) == 3 and percentile([1, 2], 0.25) == 1.25
    assert summarize([0.0, 0.0]).spread_rel == 0.0
    assert math.isinf(summarize([0.0, 0.0, 1.0]).spread_rel)
    with pytest.raises(ValueError):
        summarize([])
    with pytest.raises(ValueError):
        percentile([1.0], 2.0)


def test_paired_ratios_cancel_drift():
    """Host drifts 2x between pairs; A is always 1.5x B within a pair."""
    drift = [1.0, 2.0, 0.7, 1.3]
    a = [1.5e6 * d for d in drift]
    b = [1.0e6 * d for d in drift]
    ratios = paired_ratios(a, b)
    assert summarize(ratios).spread_rel == pytest.approx(0.0, abs=1e-12)
    assert summarize(a).spread_rel > 1.0
    with pytest.raises(ValueError):
        paired_ratios([1.0], [])


def test_gbps():
    assert gbps(1e6, 64) == pytest.approx(0.512)
