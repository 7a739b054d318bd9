"""Dataclasses stored in the results database.

Units are in the field names: ``_pps`` packets per second, ``_ns``
nanoseconds, ``_s`` seconds, ``_b`` bytes. Counts are integers.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Self

from ..methods import METHOD_TABLE
from ..testpoint import POINT_FIELDS, AtPoint, TestPoint

__all__ = [
    "DIRECTIONS",
    "METHODS",
    "OVERLAY_HOST_COLUMNS",
    "STATUSES",
    "Campaign",
    "Host",
    "Result",
    "Sut",
    "Trial",
    "overlay_host_columns",
]

#: Directions of a scenario: one way, or both ways at once.
DIRECTIONS = ("uni", "bi")
#: Methods a trial or a result can come from.
METHODS = tuple(m.name for m in METHOD_TABLE)  # turnout/methods.py
#: ``ok`` measured; ``skipped`` not run (reason given); ``failed`` error (reason
#: given); ``running`` a search that has not finished (left by an interrupted run).
STATUSES = ("ok", "skipped", "failed", "running", "interrupted")


#: the overlay scenario's hosts (turnout/overlay.py) and the trial column
#: holding each one's own cycles per frame it received (schema v6)
OVERLAY_HOST_COLUMNS = {"A": "overlay_a_cycles_per_frame", "B": "overlay_b_cycles_per_frame"}


def overlay_host_columns(hosts: Any) -> dict[str, float | None]:
    """The per-host cost columns of a trial from the overlay's per-host
    account (``extra["overlay_hosts"]``: a ``{"host", "cycles_per_frame",
    "frames"}`` or ``{"host", "why"}`` per host; turnout/overlay.py): a
    host's figure, or None when it has none."""
    out: dict[str, float | None] = dict.fromkeys(OVERLAY_HOST_COLUMNS.values())
    for h in hosts if isinstance(hosts, list) else []:
        col = OVERLAY_HOST_COLUMNS.get(str(h.get("host"))) if isinstance(h, dict) else None
        if col is not None and h.get("cycles_per_frame") is not None:
            out[col] = float(h["cycles_per_frame"])
    return out


def _canon(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


class _AtPoint(AtPoint):
    """What trials and results share about their test point: they hold it
    (``point``, a TestPoint), stored one column per field (results/schema.py;
    the scenario as ``TestPoint.stored_scenario`` names it)."""

    @classmethod
    def of(cls, **kw: Any) -> Self:
        """A row from flat keywords, as a database row or an export has them:
        the test point's fields (``scenario`` as stored: an openflow rule
        set's name fills in its fields) and the row's own."""
        cols = {f: kw.pop(f) for f in POINT_FIELDS if f in kw}
        scenario = str(cols.pop("scenario", TestPoint.scenario))
        point = TestPoint.from_stored(scenario, **cols)
        return cls(point=point, **kw)  # type: ignore[call-arg]  # Trial, Result

    def flat(self) -> dict[str, Any]:
        """The row's fields with its test point's in its place, one each (the
        scenario as stored), in the order of the database's columns."""
        out: dict[str, Any] = {}
        for f in fields(self):  # type: ignore[arg-type]  # a dataclass: Trial, Result
            if f.name == "point":
                out.update({n: getattr(self.point, n) for n in POINT_FIELDS})
                out["scenario"] = self.scenario
            else:
                out[f.name] = getattr(self, f.name)
        return out


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
    #: the software and host a run may be resumed on (``campaign.runner.resume_key``)
    resume_key: str = ""
    id: int | None = None


@dataclass
class Sut:
    """A switch under test as it was configured for a trial."""

    name: str
    version: str = ""
    config: dict[str, Any] = field(default_factory=dict)
    id: int | None = None


@dataclass
class Trial(_AtPoint):
    """One measurement at a fixed offered load.

    Every rate is the **aggregate over all streams** of the trial (``streams``
    of them; a bidirectional point has two per link): ``offered_total_pps``
    the load asked for (0 = as fast as the tester can), ``tx_total_pps`` what
    the tester really offered (``sent / duration_s``), ``rx_total_pps`` what
    arrived (``received / duration_s``). Counts come from turnout-gen:
    ``sent`` frames handed to the ports in the measured window, ``received``
    frames of ours that arrived, ``lost`` frames that never did (per-stream
    sequence numbers: duplicates do not hide losses), ``duplicated`` and
    ``reordered`` apart; ``unsent`` frames due that the tester could not
    enqueue (its port was full: not offered, not the switch's loss);
    ``vnf_dropped`` frames the scenario's chain VNFs dropped during the
    trial, warm-up and cool-down included (a VNF cannot tell them apart), so
    it is not a subset of ``lost`` and may exceed it; not the switch's.
    ``loss_ratio = lost / sent``.
    ``gbps = rx_total_pps * frame_size_b * 8 / 1e9`` (frames without FCS).
    ``tester_bound``: 1 when the tester, not the SUT, limited the trial (its
    evidence is in ``extra``), 0 when not, None when unknown. ``cpu`` is a
    list of ``{"role", "pid", "tid", "name", "cpu_s", "util"}`` over the
    traffic window, for the SUT's threads, the tester and the VNFs; ``util``
    is CPU seconds per second of that window. ``cycles_per_packet`` is the
    SUT's CPU seconds in the window times the nominal (TSC) clock over
    ``received``. ``busy_cycles_per_frame`` is the SUT's own account of
    the cycles it spent on each frame it received (busy, not idle polling;
    measure/cost.py; its source in ``extra["cost_source"]``).
    """

    campaign_id: int | None = None
    sut_id: int | None = None
    host_id: int | None = None
    result_id: int | None = None
    key: str = ""
    sut: str = ""
    #: the test point; its ``virtual_port`` is the kind the cell really had
    #: (memif | vhost-user | veth | "": none), which a fallback may change
    point: TestPoint = field(default_factory=TestPoint)
    method: str = "fixed"
    load_fraction: float | None = None  # of R+ (aggregate), for latency trials
    offered_total_pps: float = 0.0  # requested aggregate load; 0 = as fast as possible
    tx_total_pps: float = 0.0  # achieved aggregate offered load
    streams: int = 1
    repetition: int = 0
    sent: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    reordered: int = 0
    unsent: int = 0
    vnf_dropped: int = 0
    loss_ratio: float = 0.0
    rx_total_pps: float = 0.0
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
    busy_cycles_per_frame: float | None = None
    tester_bound: int | None = None
    #: method ``rule_update`` (measure/update.py): ns from the SUT's rule
    #: update until the first frame reached the new destination, and until
    #: the last reached the old one; ``lost`` counts the switch-over's losses
    update_first_ns: float | None = None
    update_last_ns: float | None = None
    #: scenario ``overlay`` (turnout/overlay.py): each host's own busy cycles
    #: per frame it received (host A: pod in, encapsulation; host B:
    #: decapsulation, pod out); None when its switch keeps no account per
    #: host (the Linux bridge) or it could not be read (``extra.overlay_hosts``
    #: says why)
    overlay_a_cycles_per_frame: float | None = None
    overlay_b_cycles_per_frame: float | None = None
    status: str = "ok"
    reason: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None

    def overlay_host_costs(self) -> dict[str, float]:
        """Host ("A", "B") -> its own cycles per frame, for the hosts that
        have one (scenario ``overlay``)."""
        out = {}
        for host, col in OVERLAY_HOST_COLUMNS.items():
            v = getattr(self, col)
            if v is not None:
                out[host] = float(v)
        return out


@dataclass
class Result(_AtPoint):
    """The outcome of a search (R+, NDR, PDR) at one test point.

    ``rate_total_pps`` is the found rate, aggregate over all streams: for
    R+ the received rate under saturating input; for NDR/PDR the highest
    load the search certified (MLRsearch: its conditional throughput; the
    bisection: the load the tester really offered at the highest passing
    trial). ``rx_total_pps``/``gbps`` are what was received there.
    ``tester_bound`` as for trials (R+: the trial's; NDR/PDR: the tester
    could not offer the loads the search needed). Its trials have
    ``result_id`` = this id. ``busy_cycles_per_frame`` (R+): the SUT's busy
    cycles per frame in the trial that set the rate.
    """

    campaign_id: int | None = None
    sut_id: int | None = None
    host_id: int | None = None
    key: str = ""
    sut: str = ""
    #: the test point; its ``virtual_port`` is the kind the cell really had
    #: (memif | vhost-user | veth | "": none), which a fallback may change
    point: TestPoint = field(default_factory=TestPoint)
    method: str = "rplus"
    repetition: int = 0
    loss_target: float = 0.0
    rate_total_pps: float = 0.0
    rx_total_pps: float = 0.0
    gbps: float = 0.0
    tester_bound: int | None = None
    busy_cycles_per_frame: float | None = None
    trials_count: int = 0
    searcher: str = ""  # which search strategy found it
    status: str = "running"
    reason: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
