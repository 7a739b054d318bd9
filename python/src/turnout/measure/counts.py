"""The one interface between a search and the traffic: ``Measurer``.

As in CSIT MLRsearch, a search only ever calls
``measure(duration_s, load_total_pps) -> TrialCounts``; the counts are
integers, ratios and rates are derived from them.

One convention everywhere (docs/bench.md, "Rates"): a load or a rate is
the **aggregate over all streams** of the trial — what a user compares
between switches. A measurer with several streams splits the load evenly
among them; R+ is the aggregate received rate, and a latency trial at
0.5 × R+ offers half that aggregate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["Measurer", "TrialCounts"]


@dataclass
class TrialCounts:
    """What one trial at a fixed offered load saw.

    ``offered_total_pps`` is the requested aggregate load (0 = as fast as
    possible); ``sent``/``received``/``lost`` are frame counts of the
    measured window summed over streams: ``lost`` from sequence numbers
    (duplicates never hide a loss), ``duplicated`` and ``reordered`` apart;
    ``unsent`` frames that were due but the tester could not enqueue (the
    tester's shortfall, not the SUT's loss); ``vnf_dropped`` frames chain
    VNFs dropped in the trial, warm-up and cool-down included (not a subset
    of ``lost``: a VNF cannot tell warm-up frames). ``duration_s`` is the measured window.
    Latency fields are in ns and None when the receiver measured none.
    ``tester_bound`` says whether the tester limited the trial (None:
    unknown).
    """

    offered_total_pps: float
    duration_s: float
    sent: int
    received: int
    lost: int
    duplicated: int = 0
    reordered: int = 0
    unsent: int = 0
    vnf_dropped: int = 0
    streams: int = 1
    latency_ns: dict[str, float] = field(default_factory=dict)  # min mean p50 p90 p99 p999 max
    latency_cdf: list[list[float]] = field(default_factory=list)
    jitter_ns: float | None = None
    cpu: list[dict[str, Any]] = field(default_factory=list)
    cycles_per_packet: float | None = None
    #: the SUT's busy cycles per frame it received, from its own accounting
    #: (measure/cost.py); None when it keeps none or it could not be read
    busy_cycles_per_frame: float | None = None
    tester_bound: bool | None = None
    #: rule-update trials (measure/update.py): ns from the update until the
    #: first frame at the new destination, and until the last at the old one
    update_first_ns: float | None = None
    update_last_ns: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def loss_ratio(self) -> float:
        """lost / sent (0 when nothing was sent)."""
        return self.lost / self.sent if self.sent > 0 else 0.0

    @property
    def rx_total_pps(self) -> float:
        """received / duration_s, over all streams."""
        return self.received / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def tx_total_pps(self) -> float:
        """sent / duration_s: the aggregate load the tester really offered."""
        return self.sent / self.duration_s if self.duration_s > 0 else 0.0

    @property
    def intended_count(self) -> int:
        """Frames the requested load meant to send in the window: what was
        sent plus what the tester reported unsent, or load × window when that
        is more by over a rounding's worth (a sender that fell behind its
        schedule). Saturating trials intended what they sent."""
        reported = self.sent + self.unsent
        if self.offered_total_pps <= 0:
            return reported
        nominal = self.offered_total_pps * self.duration_s
        if nominal - reported <= max(1.0, 1e-4 * nominal):
            return reported
        return max(reported, round(nominal))


@runtime_checkable
class Measurer(Protocol):
    """Runs one trial. ``load_total_pps`` is the aggregate over all streams;
    0 means saturating input (as fast as possible)."""

    def measure(self, duration_s: float, load_total_pps: float) -> TrialCounts: ...
