"""The one interface between a search and the traffic: ``Measurer``.

As in CSIT MLRsearch, a search only ever calls
``measure(duration_s, load_pps) -> TrialCounts``; the counts are integers,
ratios and rates are derived from them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Measurer", "TrialCounts"]


@dataclass
class TrialCounts:
    """What one trial at a fixed offered load saw.

    ``offered_pps`` is the requested load (0 = as fast as possible);
    ``sent``/``received``/``lost`` are frame counts in the measured window;
    ``duration_s`` is the measured window. Latency fields are in ns and
    None when the receiver measured none.
    """

    offered_pps: float
    duration_s: float
    sent: int
    received: int
    lost: int
    latency_ns: dict[str, float] = field(default_factory=dict)  # min mean p50 p90 p99 p999 max
    latency_cdf: list[list[float]] = field(default_factory=list)
    jitter_ns: float | None = None
    cpu: list[dict[str, Any]] = field(default_factory=list)
    cycles_per_packet: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def loss_ratio(self) -> float:
        """lost / sent (0 when nothing was sent)."""
        return self.lost / self.sent if self.sent > 0 else 0.0

    @property
    def rx_pps(self) -> float:
        """received / duration_s."""
        return self.received / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def tx_pps(self) -> float:
        """sent / duration_s: the load the tester really offered."""
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0


@runtime_checkable
class Measurer(Protocol):
    """Runs one trial. ``load_pps`` 0 means saturating input (as fast as possible)."""

    def measure(self, duration_s: float, load_pps: float) -> TrialCounts: ...
