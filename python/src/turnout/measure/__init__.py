"""Measuring: the Measurer interface, turnout-gen driver, CPU, statistics."""

from .counts import Measurer, TrialCounts
from .gen import GenError, GenMeasurer, GenProc, Stream, VnfHandle, find_gen, gen_version
from .stats import Summary, gbps, paired_ratios, percentile, summarize

__all__ = [
    "GenError",
    "GenMeasurer",
    "GenProc",
    "Measurer",
    "Stream",
    "Summary",
    "TrialCounts",
    "VnfHandle",
    "find_gen",
    "gbps",
    "gen_version",
    "paired_ratios",
    "percentile",
    "summarize",
]
