"""Searches over a Measurer: R+, NDR and PDR. One strategy per file."""

from .base import PDR_LOSS_RATIO, LoggingMeasurer, SearchResult
from .binary import binary_search
from .mlr import MlrGoals, mlr_search
from .mlr import available as mlrsearch_available
from .rplus import rplus

__all__ = [
    "PDR_LOSS_RATIO",
    "LoggingMeasurer",
    "MlrGoals",
    "SearchResult",
    "binary_search",
    "mlr_search",
    "mlrsearch_available",
    "ndr_pdr",
    "rplus",
]


def ndr_pdr(
    measurer, *, max_load_pps: float, duration_s: float, min_load_pps: float = 1000.0,
    relative_width: float = 0.05, strategy: str = "auto", goals: MlrGoals | None = None,
) -> tuple[SearchResult, SearchResult]:
    """NDR (loss 0) and PDR (loss ≤ 0.5 %): MLRsearch when ``strategy`` is
    ``mlrsearch`` or ``auto`` and it is installed, else bisection. Loads
    are aggregate over all streams; ``goals`` only apply to MLRsearch."""
    if strategy not in ("auto", "mlrsearch", "binary"):
        raise ValueError(f"unknown search strategy {strategy!r} (auto, mlrsearch, binary)")
    if strategy == "mlrsearch" or (strategy == "auto" and mlrsearch_available()):
        ndr, pdr = mlr_search(
            measurer, loss_targets=(0.0, PDR_LOSS_RATIO), max_load_pps=max_load_pps,
            min_load_pps=min_load_pps, duration_s=duration_s, relative_width=relative_width,
            goals=goals,
        )
        return ndr, pdr

    def bisect(loss_target: float) -> SearchResult:
        return binary_search(measurer, loss_target=loss_target, max_load_pps=max_load_pps,
                             min_load_pps=min_load_pps, duration_s=duration_s,
                             relative_width=relative_width)

    return bisect(0.0), bisect(PDR_LOSS_RATIO)
