"""Test points: from the results database to what every report section
groups, ranks and compares.

Grouping rules (docs/report.md has the long form):

- A *test point* is everything that defines a measurement except the
  repetition: SUT, scenario, direction, frame size, flows, burst, VNFs,
  ports, pairs, virtual port, method. Repetitions of one test point give a
  median and a range (min..max).
- Throughput is the ``rate_total_pps`` of search results (R+, NDR, PDR):
  the aggregate over every stream of the point (a bidirectional point
  counts both directions).
- The *base* of a scenario is its smallest flows, VNF, port and pair counts
  and its most common burst: the throughput-vs-frame-size plots use only
  base points; the other values have their own plots.
- A difference between two SUTs at the same test point is *within noise*
  when it is no larger than the spread (max - min) of either; such points
  are drawn hollow and flagged in tables. With one repetition the spread is
  *unknown*: such points are drawn hollow and never ranked.
- A ratio to a reference (the bare wire) is only taken on the same path and
  port type: a SUT on memif is never divided by a wire of veths.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import cached_property, total_ordering
from itertools import pairwise
from typing import Any

from ..campaign.spec import CampaignError, sut_options
from ..methods import labels, styles, throughput_methods
from ..results import Campaign, Result, ResultsDB, Trial
from ..scenarios.table import scenario_rank, section_of
from ..sut import SUTS
from ..testpoint import AtPoint, TestPoint
from .model import Spread, slug, spread_of, within_noise
from .units import gbps_of

__all__ = [
    "LOAD_BIN_RATIO",
    "LOAD_FRACTIONS",
    "METHOD_LABEL",
    "METHOD_STYLE",
    "REFERENCE_SUTS",
    "SCALE_SECTIONS",
    "THROUGHPUT_METHODS",
    "CampaignData",
    "FigGroup",
    "Group",
    "PointKey",
    "ThroughputPoint",
    "base_values",
    "by_scenario",
    "cpu_util",
    "fig_group",
    "group_extras",
    "group_key",
    "group_title",
    "in_section",
    "is_base",
    "load_bin",
    "load_campaign",
    "offered_pps",
    "retried",
    "scenario_rank",
    "statistics_median",
    "sut_label",
    "throughput_points",
    "trial_label",
]

#: Search methods whose rate_total_pps is a throughput, in order of preference.
THROUGHPUT_METHODS = throughput_methods()  # turnout/methods.py, as the two below

METHOD_LABEL = labels()

METHOD_STYLE = styles()

#: SUT names taken as the physical reference every ratio is taken against:
#: the adapters that say they are (``SutAdapter.reference``), and older
#: spellings of the bare wire a database may hold.
REFERENCE_SUTS = (*(n for n, a in SUTS.items() if a.reference), "bare-wire", "bare_wire",
                  "barewire")

#: Latency loads of Software switches for NFV §4.4, as fractions of R+.
LOAD_FRACTIONS = (0.1, 0.5, 0.99)

_DEFAULTS = {"flows": 1, "burst": 32, "vnfs": 0, "ports": 2, "pairs": 1}

#: a sort key of test points, starting with the scenario's rank (PointKey.group)
Group = tuple[Any, ...]
#: trials drawn in one figure: scenario, direction, flows, burst, VNFs, ports, pairs
FigGroup = tuple[str, str, int, int, int, int, int]


def by_scenario(item: tuple[Group, Any]) -> Group:
    """Sort key for (group tuple starting with the scenario, value) items."""
    return (scenario_rank(item[0][0]), *item[0][1:])


def sut_label(sut: str, virtual_port: str = "") -> str:
    """How every table names a SUT: its name, with the kind of its virtual
    ports when it has some ("testpmd [memif]")."""
    return f"{sut} [{virtual_port}]" if virtual_port else sut


@total_ordering
@dataclass(frozen=True)
class PointKey(AtPoint):
    """A test point: everything but the repetition (the row's TestPoint, its
    SUT and its method). Keys sort by the stored scenario name, the point's
    other fields, the SUT, the virtual port and the method (``sort_key``):
    the order of every table."""

    point: TestPoint
    sut: str
    method: str

    @classmethod
    def of(cls, r: Result | Trial) -> PointKey:
        """The test point of a stored result or trial."""
        return cls(r.point, r.sut, r.method)

    def sort_key(self) -> tuple[Any, ...]:
        """What keys sort by."""
        p = self.point
        return (self.scenario, p.direction, p.frame_size_b, p.flows, p.burst, p.vnfs, p.ports,
                p.pairs, self.sut, p.virtual_port, self.method)

    def __lt__(self, other: PointKey) -> bool:
        return self.sort_key() < other.sort_key()

    def group(self) -> Group:
        """Everything but the SUT (and its virtual port): points comparable across SUTs."""
        p = self.point
        return (scenario_rank(self.scenario), p.direction, p.frame_size_b, p.flows, p.burst,
                p.vnfs, p.ports, p.pairs, self.method)

    def sut_label(self) -> str:
        """SUT name, with the virtual port kind when there is one."""
        return sut_label(self.sut, self.point.virtual_port)

    def extras(self) -> str:
        """Non-default flows/burst/VNFs/ports/pairs, compactly (for tables)."""
        parts = [f"{k}={getattr(self.point, k)}" for k, v in _DEFAULTS.items()
                 if getattr(self.point, k) != v]
        return " ".join(parts)


@dataclass
class ThroughputPoint:
    """Repetitions of one throughput test point, and the claims made on them."""

    key: PointKey
    by_rep: dict[int, float]  # repetition -> rate_total_pps
    spread: Spread = field(init=False)
    #: the next SUT below it at the same test point is within noise of it
    noisy: bool = False
    #: its difference to the next SUT below cannot be judged: one side has
    #: a single repetition (spread unknown), so it is not ranked
    unknown: bool = False
    #: paired ratio to the reference SUT (median, min, max, n) when there is one
    ratio: Spread | None = None
    ratio_noisy: bool | None = None
    #: repetitions whose result was tester-bound (measure/gen.py:
    #: tester_bound): the rate is the tester's, a lower bound of the SUT's
    tester_bound: int = 0

    def __post_init__(self) -> None:
        self.spread = spread_of(list(self.by_rep.values()))

    @property
    def mpps(self) -> Spread:
        """The spread in Mpps."""
        return self.spread.scaled(1e-6)

    @property
    def gbps(self) -> Spread:
        """The spread in Gbps: layer 1 on Ethernet-like paths, layer 2 through
        shared memory (see units.py)."""
        return self.spread.scaled(gbps_of(1.0, self.key.point.frame_size_b,
                                              self.key.point.virtual_port))


@dataclass
class CampaignData:
    """Everything of one campaign the report reads, loaded once."""

    db: ResultsDB
    campaign: Campaign
    results: list[Result]
    trials: list[Trial]
    reference_suts: tuple[str, ...] = REFERENCE_SUTS

    @cached_property
    def unranked_suts(self) -> frozenset[str]:
        """The SUTs the campaign measures and draws but leaves out of the
        verdict's ranks (``[sut.NAME] ranked = false``: a setting of another
        SUT shown for its trade, e.g. turnoutd at a power-saving latency
        budget). Read from the options stored with each SUT (merged with its
        base's: campaign/spec.py); a database whose SUTs carry no options
        falls back to the campaign's own tables."""
        stored = [s for s in self.db.suts(self.campaign.id)
                  if isinstance(s.config.get("options"), dict)]
        if stored:
            return frozenset(s.name for s in stored if s.config["options"].get("ranked") is False)
        try:
            opts = sut_options((self.campaign.spec or {}).get("sut") or {})
        except CampaignError:  # a spec this version no longer reads: all ranked
            return frozenset()
        return frozenset(n for n, o in opts.items() if o.get("ranked") is False)

    def ranked(self, sut: str) -> bool:
        """Whether a SUT (its name or its label, "NAME (variant)") is ranked."""
        return sut.split(" (")[0] not in self.unranked_suts

    @property
    def ok_results(self) -> list[Result]:
        """Search results that finished."""
        return [r for r in self.results if r.status == "ok"]

    @property
    def ok_trials(self) -> list[Trial]:
        """Trials that were measured."""
        return [t for t in self.trials if t.status == "ok"]


def load_campaign(db: ResultsDB, campaign: Any = None) -> CampaignData:
    """Load a campaign (name, id or Campaign; default the latest run).

    Raises KeyError when there is no such campaign (or none at all).
    """
    if campaign is None:
        all_c = db.campaigns()
        if not all_c:
            raise KeyError(f"no campaigns in {db.path}")
        c = all_c[-1]
    else:
        found = db.campaign(campaign)
        if found is None:
            raise KeyError(f"no campaign {campaign!r} in {db.path}")
        c = found
    assert c.id is not None
    results, trials = db.results(c.id), db.trials(c.id)
    # a SUT that fell back to another configuration at set-up (its config's
    # ``variant``, SutAdapter.variant) is another SUT for every table:
    # "testpmd (no-huge)" is never pooled with "testpmd"; a session whose
    # chain VNFs were QEMU guests (``[campaign] vnf = "qemu"``, the config's
    # ``vnf``: turnout/vm.py) says so in every row: "turnoutd (QEMU VNF kvm)"
    variants: dict[int | None, str] = {}
    for s in db.suts(c.id):
        if not isinstance(s.config, dict):
            continue
        tags = [str(s.config["variant"])] if s.config.get("variant") else []
        vnf = s.config.get("vnf")
        if isinstance(vnf, dict) and vnf.get("kind") == "qemu":
            tags.append(f"QEMU VNF {vnf.get('accel') or '?'}")
        if tags:
            variants[s.id] = ", ".join(tags)
    rows: list[Result | Trial] = [*results, *trials]
    for x in rows:
        if x.sut_id in variants:
            x.sut = f"{x.sut} ({variants[x.sut_id]})"
    return CampaignData(db, c, results, trials)


def base_values(points: Iterable[PointKey]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (scenario, direction): the base flows/burst/vnfs/ports/pairs."""
    by: dict[tuple[str, str], list[PointKey]] = defaultdict(list)
    for k in points:
        by[(k.scenario, k.point.direction)].append(k)
    out = {}
    for sd, keys in by.items():
        bursts = Counter(k.point.burst for k in keys)
        top = max(bursts.values())
        out[sd] = {
            "flows": min(k.point.flows for k in keys),
            "burst": min(b for b, c in bursts.items() if c == top),
            "vnfs": min(k.point.vnfs for k in keys),
            "ports": min(k.point.ports for k in keys),
            "pairs": min(k.point.pairs for k in keys),
        }
    return out


def is_base(k: PointKey, base: dict[tuple[str, str], dict[str, int]], *free: str) -> bool:
    b = base[(k.scenario, k.point.direction)]
    return all(getattr(k.point, f) == v for f, v in b.items() if f not in free)


def throughput_points(data: CampaignData) -> list[ThroughputPoint]:
    """Every throughput test point of the campaign with its noise and ratio claims.

    For each group of SUTs measured at the same test point, SUTs are ranked
    by median; a SUT whose median differs from the next one below it by no
    more than either's spread is marked ``noisy`` (and so is that next one).
    The ratio to the reference SUT is taken repetition by repetition
    (interleaved runs, so host drift cancels) when both have the same
    repetition numbers, else median over median.
    """
    reps: dict[PointKey, dict[int, float]] = defaultdict(dict)
    bound: Counter[PointKey] = Counter()
    for r in data.ok_results:
        if r.method in THROUGHPUT_METHODS:
            reps[PointKey.of(r)][int(r.repetition)] = float(r.rate_total_pps)
            if r.tester_bound:
                bound[PointKey.of(r)] += 1
    points = [ThroughputPoint(k, v, tester_bound=bound[k]) for k, v in sorted(reps.items())]
    groups: dict[Group, list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        groups[p.key.group()].append(p)
    for members in groups.values():
        ranked = sorted(members, key=lambda p: p.spread.median, reverse=True)
        for hi, lo in pairwise(ranked):
            verdict = within_noise(hi.spread, lo.spread)
            if verdict is None:
                hi.unknown = lo.unknown = True
            elif verdict:
                hi.noisy = lo.noisy = True
        for p in members:
            # a ratio only against the reference on the same path and port type
            refs = [r for r in members if r.key.sut in data.reference_suts
                    and r.key.point.virtual_port == p.key.point.virtual_port]
            if not refs or refs[0] is p:
                continue
            ref = refs[0]
            common = sorted(set(p.by_rep) & set(ref.by_rep))
            pairs = [p.by_rep[i] / ref.by_rep[i] for i in common if ref.by_rep[i] > 0]
            if len(pairs) >= 2 and len(common) == len(p.by_rep) == len(ref.by_rep):
                p.ratio = spread_of(pairs)
                p.ratio_noisy = abs(p.ratio.median - 1.0) <= p.ratio.width
            elif ref.spread.median > 0:
                m = p.spread.median / ref.spread.median
                p.ratio = Spread(m, m, m, 1)
                p.ratio_noisy = within_noise(p.spread, ref.spread)
    return points


def retried(data: CampaignData) -> set[tuple[str, int]]:
    """("result" | "trial", id) of every failed or skipped attempt whose test
    point, method and repetition has an ok result or trial after all: the
    runner restarted the SUT and retried the item (runner.py, PeerAbsent).
    Such an attempt is not a missing value."""
    def at(x: Result | Trial) -> tuple[PointKey, int]:
        return (PointKey.of(x), int(x.repetition))

    ok = {at(r) for r in data.ok_results} | {at(t) for t in data.ok_trials}
    out = {("result", r.id or 0) for r in data.results if r.status != "ok" and at(r) in ok}
    out |= {("trial", t.id or 0) for t in data.trials
            if t.status != "ok" and t.result_id is None and at(t) in ok}
    return out


def offered_pps(t: Trial) -> float:
    """The aggregate load the tester really offered (not the one asked for)."""
    if t.tx_total_pps > 0:
        return float(t.tx_total_pps)
    if t.duration_s > 0 and t.sent:
        return t.sent / t.duration_s
    return float(t.offered_total_pps)


#: Width of the offered-load bins of the latency-vs-load plot (log-spaced).
LOAD_BIN_RATIO = 1.1


def load_bin(offered_pps: float) -> int:
    """Index of the log-spaced bin (each LOAD_BIN_RATIO wide) holding this load:
    search trials at nearly the same load become one point."""
    return round(math.log(offered_pps) / math.log(LOAD_BIN_RATIO)) if offered_pps > 0 else 0


def statistics_median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return spread_of(values).median


def cpu_util(t: Trial, role: str = "sut") -> float | None:
    """Total CPU of the threads of ``role`` (sut, tester, vnf) over a trial's
    traffic window, in % of one core."""
    rows = [c for c in t.cpu if c.get("role", "sut") == role]
    if not rows:
        return None
    return 100.0 * sum(float(c.get("util", 0.0)) for c in rows)


def trial_label(t: Trial) -> str:
    """A trial's SUT as every table names it (sut_label)."""
    return sut_label(t.sut, t.point.virtual_port)


def fig_group(t: Trial) -> FigGroup:
    """Trials drawn in one figure: all but SUT, frame size (a panel row each) and load."""
    p = t.point
    return (t.scenario, p.direction, int(p.flows), int(p.burst), int(p.vnfs), int(p.ports),
            int(p.pairs))


def by_figure(trials: Iterable[Trial]) -> list[tuple[FigGroup, list[Trial]]]:
    """Trials grouped by the figure that draws them (fig_group), in report order."""
    groups: dict[FigGroup, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[fig_group(t)].append(t)
    return sorted(groups.items(), key=by_scenario)


def group_extras(g: FigGroup) -> str:
    scen, d, flows, burst, vnfs, ports, pairs = g
    return PointKey(TestPoint(scen, d, 0, flows, burst, vnfs, ports, pairs), "", "").extras()


def group_title(g: FigGroup) -> str:
    extra = group_extras(g)
    return f"{g[0]} {g[1]}" + (f" ({extra})" if extra else "")


def group_key(prefix: str, g: FigGroup) -> str:
    return slug(prefix, g[0], g[1], group_extras(g))


#: the sections that show scenarios against their scale, at one frame size
#: (report/scale.py): the throughput section draws no figure of theirs
#: with a single frame size
SCALE_SECTIONS = ("nvsn", "density")


def in_section(points: list[ThroughputPoint], section: str) -> list[ThroughputPoint]:
    """The points whose scenario the scenario table gives this report
    section (scenarios.table.section_of)."""
    return [p for p in points if section_of(p.key.scenario) == section]
