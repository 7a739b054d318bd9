"""The report's query layer under its former name: from the results
database to the plain data of the report (``model.py``). It was one module;
it is now ``points`` (test points, loading a campaign), ``formatting``, one
module per section and the sections table (``sections``). This module keeps
the names older code and scripts import."""

from __future__ import annotations

from .campaign import campaign_section, wall_time
from .cpu import cpu_section
from .fingerprint import fingerprint_section
from .formatting import fmt, fmt_pct, fmt_spread
from .latency import latency_cdf_section, merge_cdfs
from .latency_load import latency_load_section
from .loopback import loopback_section
from .not_measured import not_measured_section
from .points import (
    LOAD_FRACTIONS,
    METHOD_LABEL,
    METHOD_STYLE,
    REFERENCE_SUTS,
    THROUGHPUT_METHODS,
    CampaignData,
    PointKey,
    ThroughputPoint,
    load_campaign,
    retried,
    scenario_rank,
    sut_label,
    throughput_points,
)
from .rtt import rtt_section
from .scale import scale_sections
from .sections import all_sections
from .stability import error_bar_section
from .throughput import throughput_section

__all__ = [
    "LOAD_FRACTIONS",
    "METHOD_LABEL",
    "METHOD_STYLE",
    "REFERENCE_SUTS",
    "THROUGHPUT_METHODS",
    "CampaignData",
    "PointKey",
    "ThroughputPoint",
    "all_sections",
    "campaign_section",
    "cpu_section",
    "error_bar_section",
    "fingerprint_section",
    "fmt",
    "fmt_pct",
    "fmt_spread",
    "latency_cdf_section",
    "latency_load_section",
    "load_campaign",
    "loopback_section",
    "merge_cdfs",
    "not_measured_section",
    "retried",
    "rtt_section",
    "scale_sections",
    "scenario_rank",
    "sut_label",
    "throughput_points",
    "throughput_section",
    "wall_time",
]
