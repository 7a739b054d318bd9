"""Statistics over repetitions: median with spread, pairwise ratios."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Summary", "gbps", "paired_ratios", "percentile", "summarize"]


def percentile(values: Sequence[float], q: float) -> float:
    """The q-quantile (0..1) with linear interpolation between order statistics."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} outside 0..1")
    xs = sorted(values)
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True)
class Summary:
    """Median of repetitions and their spread.

    ``spread_rel = (max - min) / median``: the relative width of the range,
    what a claimed difference must exceed to mean anything.
    """

    n: int
    median: float
    min: float
    max: float
    q1: float
    q3: float

    @property
    def spread_rel(self) -> float:
        """(max - min) / median; inf when the median is 0 and the range is not."""
        if self.median == 0:
            return 0.0 if self.max == self.min else math.inf
        return (self.max - self.min) / abs(self.median)


def summarize(values: Sequence[float]) -> Summary:
    """Median, min, max and quartiles of a non-empty sequence."""
    if not values:
        raise ValueError("summary of no values")
    return Summary(
        n=len(values),
        median=statistics.median(values),
        min=min(values),
        max=max(values),
        q1=percentile(values, 0.25),
        q3=percentile(values, 0.75),
    )


def paired_ratios(a: Sequence[float], b: Sequence[float]) -> list[float]:
    """a[i] / b[i] for interleaved repetitions (A, B, A, B…): the ratio is
    taken pair by pair so that drift of the host cancels out."""
    if len(a) != len(b):
        raise ValueError(f"paired ratios need equal lengths ({len(a)} vs {len(b)})")
    return [x / y if y else math.inf for x, y in zip(a, b, strict=True)]


def gbps(rate_pps: float, frame_size_b: int) -> float:
    """Layer-2 throughput: rate × frame size (without FCS) × 8 bits, in Gbit/s."""
    return rate_pps * frame_size_b * 8 / 1e9
