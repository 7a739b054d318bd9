"""The sections of the report page, in order: one row per module that makes
them, with the keys of the sections it makes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .campaign import campaign_section
from .cpu import cpu_section
from .fingerprint import fingerprint_section
from .hosts import label_latency
from .latency import latency_cdf_section
from .latency_load import latency_load_section
from .loopback import loopback_section
from .methods import rule_update_section, sweep_section
from .model import Section
from .not_measured import not_measured_section
from .openflow import openflow_section
from .overlay import overlay_section
from .points import SCALE_SECTIONS, CampaignData, ThroughputPoint, throughput_points
from .rtt import rtt_section
from .scale import scale_sections
from .stability import error_bar_section
from .throughput import throughput_section
from .usecases import cpu_latency_section, usecase_section
from .verdict import verdict_section

__all__ = ["SECTIONS", "SectionRow", "all_sections", "section_keys"]

#: what a row's function gets: the campaign, and its throughput points
#: (computed once: points.throughput_points)
Make = Callable[[CampaignData, list[ThroughputPoint]], list[Section]]


@dataclass(frozen=True)
class SectionRow:
    """One row of the sections table."""

    keys: tuple[str, ...]  # the keys of the sections it makes, in order
    make: Make


def _data(f: Callable[[CampaignData], Section]) -> Make:
    return lambda data, _points: [f(data)]


def _points(f: Callable[[CampaignData, list[ThroughputPoint]], Section]) -> Make:
    return lambda data, points: [f(data, points)]


#: the page, top to bottom
SECTIONS: tuple[SectionRow, ...] = (
    SectionRow(("verdict",), _data(verdict_section)),
    SectionRow(("use-cases",), _data(usecase_section)),
    SectionRow(("campaign",), _data(campaign_section)),
    SectionRow(("throughput",), _points(throughput_section)),
    SectionRow(("loopback",), _points(loopback_section)),
    SectionRow(("latency-cdf",), _data(latency_cdf_section)),
    SectionRow(("latency-load",), _data(latency_load_section)),
    SectionRow(("cpu-latency",), _data(cpu_latency_section)),
    SectionRow(("rtt",), _data(rtt_section)),
    SectionRow(("overlay",), _data(overlay_section)),
    SectionRow(("sweep",), _data(sweep_section)),
    SectionRow(("rule-update",), _data(rule_update_section)),
    SectionRow(("openflow",), _data(openflow_section)),
    SectionRow(("cpu",), _data(cpu_section)),
    SectionRow(SCALE_SECTIONS, scale_sections),
    SectionRow(("stability",), _points(error_bar_section)),
    SectionRow(("setup",), _data(fingerprint_section)),
    SectionRow(("not-measured",), _data(not_measured_section)),
)


def section_keys() -> list[str]:
    """The key of every section of the page, in order."""
    return [k for row in SECTIONS for k in row.keys]


def all_sections(data: CampaignData) -> list[Section]:
    """The sections of the page, in order (every figure and table that shows
    latency says from which latency mode it comes: hosts.label_latency)."""
    points = throughput_points(data)
    sections = [s for row in SECTIONS for s in row.make(data, points)]
    label_latency(data, sections)
    return sections
