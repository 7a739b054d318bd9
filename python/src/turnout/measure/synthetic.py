"""A model of a switch for testing searches and the runner: not a measurement.

``SyntheticMeasurer`` has ``streams`` streams sharing a switch of capacity
``capacity_pps`` (aggregate): the requested aggregate load is split among
the streams as the real measurer splits it, what exceeds the capacity is
lost, with optional multiplicative noise on the capacity and a small random
background loss. ``max_offered_pps`` is the most the tester can offer
(aggregate); a load above it is partly unsent. The bench never stores its
output as a result.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .counts import TrialCounts

__all__ = ["SyntheticMeasurer"]


@dataclass
class SyntheticMeasurer:
    """Capacity ``capacity_pps`` ± ``noise_rel`` (uniform, per trial), aggregate
    over ``streams``; the tester offers at most ``max_offered_pps`` (aggregate;
    default 4 × capacity); ``background_loss`` is a loss ratio at any load."""

    capacity_pps: float
    noise_rel: float = 0.0
    background_loss: float = 0.0
    max_offered_pps: float | None = None
    streams: int = 1
    seed: int = 1
    calls: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts:
        self.calls.append((duration_s, load_total_pps))
        ceiling = self.max_offered_pps or 4 * self.capacity_pps
        want = load_total_pps if load_total_pps > 0 else ceiling
        per_stream = want / self.streams
        offered = min(want, ceiling)
        cap = self.capacity_pps * (1 + self._rng.uniform(-self.noise_rel, self.noise_rel))
        sent = round(offered * duration_s)
        unsent = round(want * duration_s) - sent if load_total_pps > 0 else 0
        delivered = min(sent, round(cap * duration_s))
        if self.background_loss > 0:
            delivered = round(delivered * (1 - self.background_loss))
        return TrialCounts(
            offered_total_pps=load_total_pps, duration_s=duration_s, sent=sent,
            received=delivered, lost=sent - delivered, unsent=max(0, unsent),
            streams=self.streams, tester_bound=offered >= ceiling and delivered >= sent,
            extra={"per_stream_pps": per_stream},
        )
