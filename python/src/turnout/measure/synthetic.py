"""A model of a switch for testing searches: not a measurement.

``SyntheticMeasurer`` loses what exceeds its capacity, with optional
multiplicative noise on the capacity and a small random background loss.
It is used by unit tests of the searches and statistics; the bench never
stores its output as a result.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from .counts import TrialCounts

__all__ = ["SyntheticMeasurer"]


@dataclass
class SyntheticMeasurer:
    """Capacity ``capacity_pps`` ± ``noise_rel`` (uniform, per trial);
    ``max_offered_pps`` is what the tester can send when asked for 0 (saturate);
    ``background_loss`` is a loss ratio present at any load."""

    capacity_pps: float
    noise_rel: float = 0.0
    background_loss: float = 0.0
    max_offered_pps: float | None = None
    seed: int = 1
    calls: list[tuple[float, float]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def measure(self, duration_s: float, load_pps: float) -> TrialCounts:
        self.calls.append((duration_s, load_pps))
        offered = load_pps if load_pps > 0 else (self.max_offered_pps or 4 * self.capacity_pps)
        cap = self.capacity_pps * (1 + self._rng.uniform(-self.noise_rel, self.noise_rel))
        sent = round(offered * duration_s)
        delivered = min(sent, round(cap * duration_s))
        if self.background_loss > 0:
            delivered = round(delivered * (1 - self.background_loss))
        return TrialCounts(
            offered_pps=load_pps, duration_s=duration_s, sent=sent, received=delivered,
            lost=sent - delivered,
        )
