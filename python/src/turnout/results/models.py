"""Dataclasses stored in the results database.

Units are in the field names: ``_pps`` packets per second, ``_ns``
nanoseconds, ``_s`` seconds, ``_b`` bytes. Counts are integers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = [
    "DIRECTIONS",
    "METHODS",
    "STATUSES",
    "Campaign",
    "Host",
    "Result",
    "Sut",
    "Trial",
]

#: Directions of a scenario: one way, or both ways at once.
DIRECTIONS = ("uni", "bi")
#: Methods a trial or a result can come from.
METHODS = ("fixed", "rplus", "ndr", "pdr", "latency")
#: ``ok`` measured; ``skipped`` not run (reason given); ``failed`` error (reason
#: given); ``running`` a search that has not finished (left by an interrupted run).
STATUSES = ("ok", "skipped", "failed", "running", "interrupted")


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


@dataclass
class Host:
    """Fingerprint of the machine and its state when results were taken."""

    hostname: str = ""
    cpu_model: str = ""
    cores: int = 0
    kernel: str = ""
    governor: str = ""
    turbo: str = ""
    smt: str = ""
    thp: str = ""
    #: tool name -> version string (turnoutd, turnout-gen, testpmd, ovs, python...)
    tools: dict[str, str] = field(default_factory=dict)
    #: git commit of the Turnout checkout (with ``-dirty`` when modified)
    git_commit: str = ""
    #: process name/pid -> CPU affinity list, for every process on the host
    pinning: dict[str, str] = field(default_factory=dict)
    #: anything else (load average, hugepages, ...)
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None

    def fingerprint_hash(self) -> str:
        """Stable hash over everything except the database id."""
        d = asdict(self)
        d.pop("id")
        return hashlib.sha256(_canon(d).encode()).hexdigest()[:16]


@dataclass
class Campaign:
    """One run of a campaign file."""

    name: str
    spec: dict[str, Any] = field(default_factory=dict)
    file: str = ""
    host_id: int | None = None
    started_at: float = 0.0
    finished_at: float | None = None
    status: str = "running"  # running | done | interrupted | failed
    id: int | None = None


@dataclass
class Sut:
    """A switch under test as it was configured for a trial."""

    name: str
    version: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass
class Trial:
    """One measurement at a fixed offered load.

    ``sent``/``received``/``lost`` come from turnout-gen's counters;
    ``loss_ratio = lost / sent``; ``rx_pps = received / duration_s``;
    ``gbps = rx_pps * frame_size_b * 8 / 1e9`` (frames without FCS).
    ``cpu`` is a list of ``{"tid", "name", "user_s", "sys_s", "util"}`` for
    every SUT thread; ``util`` is CPU seconds per wall second of the trial.
    """

    campaign_id: int | None = None
    sut_id: int | None = None
    host_id: int | None = None
    result_id: int | None = None
    key: str = ""
    sut: str = ""
    scenario: str = "p2p"
    direction: str = "uni"
    frame_size_b: int = 64
    flows: int = 1
    burst: int = 32
    vnfs: int = 0
    ports: int = 2
    pairs: int = 1
    virtual_port: str = ""  # memif | veth | "" (no virtual port)
    method: str = "fixed"
    load_fraction: float | None = None  # of R+, for latency trials
    offered_pps: float = 0.0  # 0 = as fast as possible (saturating)
    repetition: int = 0
    sent: int = 0
    received: int = 0
    lost: int = 0
    loss_ratio: float = 0.0
    rx_pps: float = 0.0
    gbps: float = 0.0
    latency_min_ns: float | None = None
    latency_mean_ns: float | None = None
    latency_p50_ns: float | None = None
    latency_p90_ns: float | None = None
    latency_p99_ns: float | None = None
    latency_p999_ns: float | None = None
    latency_max_ns: float | None = None
    latency_cdf: list[list[float]] = field(default_factory=list)
    jitter_ns: float | None = None
    cpu: list[dict[str, Any]] = field(default_factory=list)
    cycles_per_packet: float | None = None
    status: str = "ok"
    reason: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass
class Result:
    """The outcome of a search (R+, NDR, PDR) at one test point.

    ``rate_pps`` is the found rate: for R+ the received rate under
    saturating input, for NDR/PDR the highest offered load whose loss ratio
    stayed within ``loss_target``. ``rx_pps``/``gbps`` are what was received
    at that load. Its trials have ``result_id`` = this id.
    """

    campaign_id: int | None = None
    sut_id: int | None = None
    host_id: int | None = None
    key: str = ""
    sut: str = ""
    scenario: str = "p2p"
    direction: str = "uni"
    frame_size_b: int = 64
    flows: int = 1
    burst: int = 32
    vnfs: int = 0
    ports: int = 2
    pairs: int = 1
    virtual_port: str = ""
    method: str = "rplus"
    repetition: int = 0
    loss_target: float = 0.0
    rate_pps: float = 0.0
    rx_pps: float = 0.0
    gbps: float = 0.0
    trials_count: int = 0
    searcher: str = ""  # which search strategy found it
    status: str = "running"
    reason: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
