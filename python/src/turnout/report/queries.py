"""From the results database to the plain data of the report.

Every function here reads one campaign and returns dataclasses of
``model.py``: figures as lists of series of points, tables as rows of
strings. Nothing here draws. Only rows with status ``ok`` are plotted;
the others are listed in the "not measured" table with their reason.

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
from datetime import UTC, datetime
from itertools import pairwise
from typing import Any

from ..methods import labels, styles, throughput_methods
from ..results import Campaign, Result, ResultsDB, Trial
from ..scenarios import scenario_rank
from ..sut import SUTS
from .model import (
    Figure,
    Panel,
    Point,
    Section,
    Series,
    Spread,
    Table,
    slug,
    spread_of,
    spread_or_none,
)
from .model import within_noise as _within_noise
from .units import GBPS_DEFINITION, gbps_of, is_ethernet_path

__all__ = [
    "LOAD_FRACTIONS",
    "REFERENCE_SUTS",
    "THROUGHPUT_METHODS",
    "CampaignData",
    "PointKey",
    "ThroughputPoint",
    "campaign_section",
    "cpu_section",
    "error_bar_section",
    "fingerprint_section",
    "latency_cdf_section",
    "latency_load_section",
    "load_campaign",
    "loopback_section",
    "not_measured_section",
    "retried",
    "scale_sections",
    "scenario_rank",
    "sut_label",
    "throughput_points",
    "throughput_section",
    "wall_time",
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


def _by_scenario(item: tuple[tuple, Any]) -> tuple:
    """Sort key for (group tuple starting with the scenario, value) items."""
    return (scenario_rank(item[0][0]), *item[0][1:])


def sut_label(sut: str, virtual_port: str = "") -> str:
    """How every table names a SUT: its name, with the kind of its virtual
    ports when it has some ("testpmd [memif]")."""
    return f"{sut} [{virtual_port}]" if virtual_port else sut


@dataclass(frozen=True, order=True)
class PointKey:
    """A test point: everything but the repetition."""

    scenario: str
    direction: str
    frame_size_b: int
    flows: int
    burst: int
    vnfs: int
    ports: int
    pairs: int
    sut: str
    virtual_port: str
    method: str

    @classmethod
    def of(cls, r: Result | Trial) -> PointKey:
        """The test point of a stored result or trial."""
        return cls(r.scenario, r.direction, int(r.frame_size_b), int(r.flows), int(r.burst),
                   int(r.vnfs), int(r.ports), int(r.pairs), r.sut, r.virtual_port, r.method)

    def group(self) -> tuple:
        """Everything but the SUT (and its virtual port): points comparable across SUTs."""
        return (scenario_rank(self.scenario), self.direction, self.frame_size_b, self.flows,
                self.burst, self.vnfs, self.ports, self.pairs, self.method)

    def sut_label(self) -> str:
        """SUT name, with the virtual port kind when there is one."""
        return sut_label(self.sut, self.virtual_port)

    def extras(self) -> str:
        """Non-default flows/burst/VNFs/ports/pairs, compactly (for tables)."""
        parts = [f"{k}={getattr(self, k)}" for k, v in _DEFAULTS.items() if getattr(self, k) != v]
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
        return self.spread.scaled(gbps_of(1.0, self.key.frame_size_b, self.key.virtual_port))


@dataclass
class CampaignData:
    """Everything of one campaign the report reads, loaded once."""

    db: ResultsDB
    campaign: Campaign
    results: list[Result]
    trials: list[Trial]
    reference_suts: tuple[str, ...] = REFERENCE_SUTS

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


# ---------------------------------------------------------------- formatting
def fmt(x: float | None, digits: int = 3) -> str:
    """A number with `digits` significant digits; '–' for None/NaN."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "–"
    if math.isinf(x):
        return "∞"
    if x == 0:
        return "0"
    return f"{x:.{digits}g}" if abs(x) < 10 ** digits else f"{x:.0f}"


def fmt_spread(s: Spread | None, digits: int = 3) -> str:
    """'median [min–max]' (just the median when n == 1)."""
    if s is None:
        return "–"
    if s.n < 2:
        return fmt(s.median, digits)
    return f"{fmt(s.median, digits)} [{fmt(s.min, digits)}–{fmt(s.max, digits)}]"


def fmt_pct(x: float) -> str:
    """A ratio as a percentage."""
    return "∞" if math.isinf(x) else f"{100 * x:.1f} %"


def _time(ts: float | None) -> str:
    if not ts:
        return "–"
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# ---------------------------------------------------------------- throughput
def _base(points: Iterable[PointKey]) -> dict[tuple[str, str], dict[str, int]]:
    """Per (scenario, direction): the base flows/burst/vnfs/ports/pairs."""
    by: dict[tuple[str, str], list[PointKey]] = defaultdict(list)
    for k in points:
        by[(k.scenario, k.direction)].append(k)
    out = {}
    for sd, keys in by.items():
        bursts = Counter(k.burst for k in keys)
        top = max(bursts.values())
        out[sd] = {
            "flows": min(k.flows for k in keys),
            "burst": min(b for b, c in bursts.items() if c == top),
            "vnfs": min(k.vnfs for k in keys),
            "ports": min(k.ports for k in keys),
            "pairs": min(k.pairs for k in keys),
        }
    return out


def _is_base(k: PointKey, base: dict[tuple[str, str], dict[str, int]], *free: str) -> bool:
    b = base[(k.scenario, k.direction)]
    return all(getattr(k, f) == v for f, v in b.items() if f not in free)


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
    groups: dict[tuple, list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        groups[p.key.group()].append(p)
    for members in groups.values():
        ranked = sorted(members, key=lambda p: p.spread.median, reverse=True)
        for hi, lo in pairwise(ranked):
            verdict = _within_noise(hi.spread, lo.spread)
            if verdict is None:
                hi.unknown = lo.unknown = True
            elif verdict:
                hi.noisy = lo.noisy = True
        for p in members:
            # a ratio only against the reference on the same path and port type
            refs = [r for r in members if r.key.sut in data.reference_suts
                    and r.key.virtual_port == p.key.virtual_port]
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
                p.ratio_noisy = _within_noise(p.spread, ref.spread)
    return points


def _tp_point(p: ThroughputPoint, x: float, unit: str) -> Point:
    s = p.mpps if unit == "mpps" else p.gbps
    return Point(x=x, y=s.median, lo=s.min, hi=s.max, n=s.n, noisy=p.noisy or p.unknown)


def _series_by_sut(points: list[ThroughputPoint], xattr: str, unit: str) -> list[Series]:
    by: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        by[(p.key.sut_label(), p.key.method)].append(p)
    out = []
    for (label, method), pts in sorted(by.items()):
        pts.sort(key=lambda p: getattr(p.key, xattr))
        out.append(Series(
            label=f"{label} {METHOD_LABEL.get(method, method)}",
            points=[_tp_point(p, float(getattr(p.key, xattr)), unit) for p in pts],
            style=METHOD_STYLE.get(method, "-"),
        ))
    return out


def _throughput_table(key: str, title: str, points: list[ThroughputPoint]) -> Table:
    t = Table(
        key=key, title=title,
        columns=["scenario", "dir", "size B", "point", "SUT", "method", "n",
                 "Mpps median [min–max]", "spread", "Gbps", "× reference [min–max]"],
        note="Rates are the aggregate over all streams of the point. A flagged row's "
             "difference to the next SUT below it (or its ratio to the reference) is within "
             "the measured spread (max − min) of the repetitions, or cannot be judged (one "
             "repetition: spread unknown, not ranked). A ratio is only taken to the "
             "reference on the same path and port type. Gbps: layer 1 on veth paths, "
             "layer 2 (L2) through shared memory.",
    )
    for p in sorted(points, key=lambda p: (p.key.group(), -p.spread.median)):
        k = p.key
        flag = []
        if p.noisy:
            flag.append("within noise of the next SUT")
        if p.ratio_noisy:
            flag.append("ratio within noise")
        elif p.ratio is not None and p.ratio_noisy is None:
            flag.append("ratio spread unknown")
        if p.spread.n < 2:
            flag.append("n=1: spread unknown, not ranked")
        elif p.unknown:
            flag.append("next SUT has n=1: not ranked")
        if p.tester_bound:
            flag.append(f"tester-bound in {p.tester_bound}/{p.spread.n} "
                        "(the tester's limit: a lower bound of the SUT's)")
        t.rows.append([
            k.scenario, k.direction, str(k.frame_size_b), k.extras(), k.sut_label(),
            METHOD_LABEL.get(k.method, k.method), str(p.spread.n), fmt_spread(p.mpps),
            fmt_pct(p.spread.rel) if p.spread.n >= 2 else "unknown",
            fmt_spread(p.gbps) + ("" if is_ethernet_path(k.virtual_port) else " L2"),
            fmt_spread(p.ratio),
        ])
        t.flags.append("; ".join(flag))
    return t


def throughput_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Throughput in Mpps and Gbps vs frame size, one figure per scenario and direction."""
    sec = Section(
        key="throughput", title="Throughput vs frame size",
        intro="Median over repetitions of each search result (R+ solid, PDR dashed, NDR "
              "dotted), with min–max bars, at each scenario's base point (fewest flows, "
              "VNFs, ports and pairs; most common burst). " + GBPS_DEFINITION +
              " Hollow markers: the difference to the next SUT below is within noise.",
    )
    if not points:
        sec.empty = "No throughput results (R+, NDR or PDR) in this campaign."
        return sec
    base = _base(p.key for p in points)
    by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        if _is_base(p.key, base):
            by_sd[(p.key.scenario, p.key.direction)].append(p)
    scale = {p.key.scenario for p in _scale_kind(points, "pairs", ("nvsn",), 1)} | \
        {p.key.scenario for p in _scale_kind(points, "ports", ("density",), 2)}
    for (scen, d), pts in sorted(by_sd.items(), key=_by_scenario):
        if scen in scale and len({p.key.frame_size_b for p in pts}) < 2:
            continue  # one frame size: its own scale section shows it
        b = base[(scen, d)]
        extra = PointKey(scen, d, 0, b["flows"], b["burst"], b["vnfs"], b["ports"], b["pairs"],
                         "", "", "").extras()
        title = f"{scen} {d}" + (f" ({extra})" if extra else "")
        sec.figures.append(Figure(
            key=slug("throughput", scen, d), title=f"Throughput vs frame size: {title}",
            panels=[
                Panel("packet rate", "frame size (B, without FCS)", "Mpps",
                      _series_by_sut(pts, "frame_size_b", "mpps")),
                Panel("line rate", "frame size (B, without FCS)",
                      "Gbps (L1 on veth, L2 through shared memory)",
                      _series_by_sut(pts, "frame_size_b", "gbps")),
            ],
        ))
    sec.tables.append(_throughput_table("throughput-table", "Throughput at every test point",
                                        points))
    return sec


def _is_loop(scenario: str) -> bool:
    return "loop" in scenario.lower() or "chain" in scenario.lower()


def loopback_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Loopback throughput vs the number of chained VNFs, a panel per frame size."""
    sec = Section(
        key="loopback", title="Loopback throughput vs chain length",
        intro="tester → SUT → VNF₁ → SUT → … → VNF_N → SUT → tester (Software switches for NFV "
              "Fig. 7): "
              "median throughput with min–max bars against the number of chained VNFs, "
              "one panel per frame size.",
    )
    loop = [p for p in points if _is_loop(p.key.scenario) or p.key.vnfs > 0]
    if not loop:
        sec.empty = "No loopback (chained VNF) results in this campaign."
        return sec
    base = _base(p.key for p in loop)
    by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
    for p in loop:
        if _is_base(p.key, base, "vnfs"):
            by_sd[(p.key.scenario, p.key.direction)].append(p)
    for (scen, d), pts in sorted(by_sd.items(), key=_by_scenario):
        sizes = sorted({p.key.frame_size_b for p in pts})
        sec.figures.append(Figure(
            key=slug("loopback", scen, d), title=f"Loopback throughput vs chain length: {scen} {d}",
            panels=[Panel(f"{size} B", "VNFs in the chain", "Mpps",
                          _series_by_sut([p for p in pts if p.key.frame_size_b == size],
                                         "vnfs", "mpps"))
                    for size in sizes],
        ))
    return sec


def _scale_kind(points: list[ThroughputPoint], attr: str, names: tuple[str, ...],
                default: int) -> list[ThroughputPoint]:
    by_scen: dict[str, list[ThroughputPoint]] = defaultdict(list)
    for p in points:
        by_scen[p.key.scenario].append(p)
    out = []
    for scen, pts in by_scen.items():
        named = any(n in scen.lower() for n in names)
        varies = len({getattr(p.key, attr) for p in pts}) > 1
        if named or (varies and any(getattr(p.key, attr) != default for p in pts)):
            out.extend(pts)
    return out


def scale_sections(data: CampaignData, points: list[ThroughputPoint]) -> list[Section]:
    """NvsN (throughput vs sender/receiver pairs) and port density (vs ports attached)."""
    out = []
    for key, title, intro, attr, names, default, xlabel in (
        ("nvsn", "NvsN scale", "N sender/receiver pairs through one SUT (Virtualized "
         "networking framework): "
         "aggregate received throughput against N.", "pairs", ("nvsn", "pairs"), 1,
         "sender/receiver pairs"),
        ("density", "Port density", "Ports attached to the SUT with one pair active "
         "(mSwitch §4.3): throughput between the active pair against the number of ports "
         "attached.", "ports", ("density", "ports"), 2, "ports attached"),
    ):
        sec = Section(key=key, title=title, intro=intro + " Median with min–max bars.")
        pts = _scale_kind(points, attr, names, default)
        if not pts:
            sec.empty = f"No {title.lower()} results in this campaign."
            out.append(sec)
            continue
        base = _base(p.key for p in pts)
        by_sd: dict[tuple[str, str], list[ThroughputPoint]] = defaultdict(list)
        for p in pts:
            if _is_base(p.key, base, attr):
                by_sd[(p.key.scenario, p.key.direction)].append(p)
        for (scen, d), sp in sorted(by_sd.items(), key=_by_scenario):
            sizes = sorted({p.key.frame_size_b for p in sp})
            xs = [getattr(p.key, attr) for p in sp]
            xlog = min(xs) > 0 and max(xs) / min(xs) >= 20
            sec.figures.append(Figure(
                key=slug(key, scen, d), title=f"{title}: {scen} {d}",
                panels=[Panel(f"{size} B", xlabel, "Mpps",
                              _series_by_sut([p for p in sp if p.key.frame_size_b == size],
                                             attr, "mpps"), xlog=xlog)
                        for size in sizes],
            ))
        out.append(sec)
    return out


# ---------------------------------------------------------------- error bars
def error_bar_section(data: CampaignData, points: list[ThroughputPoint]) -> Section:
    """Parameter error bars (Hard or hopeless §3.2) per SUT and scenario."""
    sec = Section(
        key="stability", title="Performance stability: parameter error bars",
        intro="For each SUT and scenario, the throughput (median of repetitions) at every "
              "measured combination of frame size, flows and burst; the marker is the median "
              "over those combinations, the bar spans the minimum and maximum, all "
              "normalised to that median (Hard or hopeless §3.2). A short bar means the switch "
              "behaves the same whatever the traffic; one combination gives no bar. Uses R+ "
              "where measured, else PDR, else NDR.",
    )
    base = _base(p.key for p in points) if points else {}
    by: dict[tuple, dict[str, list[ThroughputPoint]]] = defaultdict(lambda: defaultdict(list))
    for p in points:
        if _is_base(p.key, base, "frame_size_b", "flows", "burst"):
            k = p.key
            by[(k.sut_label(), k.scenario, k.direction)][k.method].append(p)
    rows = []
    for (label, scen, d), methods in sorted(
        by.items(), key=lambda kv: (scenario_rank(kv[0][1]), kv[0][2], kv[0][0])
    ):
        method = next(m for m in THROUGHPUT_METHODS if m in methods)
        combos = methods[method]
        rows.append((label, scen, d, method, combos))
    if not rows:
        sec.empty = "No throughput results to build parameter error bars from."
        return sec
    t = Table(key="stability-table", title="Parameter error bars",
              columns=["SUT", "scenario", "dir", "method", "combinations", "frame sizes",
                       "flows", "bursts", "median Mpps", "min/median", "max/median",
                       "Gbps (L1) min/median", "Gbps max/median"])
    mpps_s = Series("Mpps", style="")
    gbps_s = Series("Gbps (L1)", style="")
    for label, scen, d, method, combos in rows:
        m = spread_of([p.spread.median for p in combos])
        g = spread_of([p.gbps.median for p in combos])
        x = f"{label} · {scen} {d}"
        if m.n < 2:
            pass  # one combination: nothing varied, no bar to draw (the table lists it)
        elif m.median > 0:
            mpps_s.points.append(Point(x, 1.0, m.min / m.median, m.max / m.median, m.n))
        if m.n >= 2 and g.median > 0:
            gbps_s.points.append(Point(x, 1.0, g.min / g.median, g.max / g.median, g.n))
        t.rows.append([
            label, scen, d, METHOD_LABEL[method], str(m.n),
            ",".join(str(s) for s in sorted({p.key.frame_size_b for p in combos})),
            ",".join(str(s) for s in sorted({p.key.flows for p in combos})),
            ",".join(str(s) for s in sorted({p.key.burst for p in combos})),
            fmt(m.median * 1e-6), fmt(m.min / m.median if m.median else math.nan),
            fmt(m.max / m.median if m.median else math.nan),
            fmt(g.min / g.median if g.median else math.nan),
            fmt(g.max / g.median if g.median else math.nan),
        ])
        t.flags.append("")
    sec.figures.append(Figure(
        key="stability", title="Parameter error bars (normalised to the median; "
        "SUTs with one combination are only in the table)",
        panels=[Panel("packet rate", "", "throughput / median", [mpps_s], kind="errbar", hline=1.0),
                Panel("line rate (L1)", "", "throughput / median", [gbps_s], kind="errbar",
                      hline=1.0)],
    ))
    sec.tables.append(t)
    return sec


# ---------------------------------------------------------------- latency
def _offered_pps(t: Trial) -> float:
    """The aggregate load the tester really offered (not the one asked for)."""
    if t.tx_total_pps > 0:
        return float(t.tx_total_pps)
    if t.duration_s > 0 and t.sent:
        return t.sent / t.duration_s
    return float(t.offered_total_pps)


def _trial_marks(st: list[Trial]) -> str:
    """What limited a group of latency or CPU trials, for table flags."""
    n = len(st)
    marks = []
    shared = max((int(t.extra.get("tester_core_sharing", 1)) for t in st), default=1)
    if shared > 1:
        marks.append(f"scheduler: {shared} busy-polling tester/VNF processes share one core "
                     "(the latency is the scheduler's, not the switch's)")
    irq = sum(1 for t in st if t.extra.get("vnf_wakeup") == "interrupt")
    if irq:
        marks.append(f"VNFs in interrupt mode on a shared core in {irq}/{n} (they sleep on their "
                     "memif eventfds; their wake-up latency is in the figures, and under load "
                     "they take the tester's CPU time)")
    fifo = sum(1 for t in st
               if any(str(v.get("sched", "")).startswith("fifo")
                      for v in t.extra.get("vnf_sched", []) if isinstance(v, dict)))
    if fifo:
        marks.append(f"VNFs at SCHED_FIFO in {fifo}/{n} (their wake-up preempts the tester)")
    tb = sum(1 for t in st if t.tester_bound)
    if tb:
        marks.append(f"tester-bound in {tb}/{n}")
    rb = sum(1 for t in st if t.extra.get("rplus_tester_bound"))
    if rb:
        marks.append(f"R+ tester-bound in {rb}/{n} (the load is a fraction of a lower bound)")
    vnf = sum(int(t.vnf_dropped) for t in st)
    if vnf:
        marks.append(f"{vnf} frames dropped by chain VNFs, not the SUT")
    unsent = sum(int(t.unsent) for t in st)
    if unsent:
        marks.append(f"{unsent} frames the tester could not send")
    return "; ".join(marks)


def _cdf_at(cdf: Sequence[Sequence[float]], x: float) -> float:
    """Right-continuous step CDF of [value, fraction] points evaluated at x."""
    f = 0.0
    for v, frac in cdf:
        if v <= x:
            f = frac
        else:
            break
    return f


def merge_cdfs(
    cdfs: Sequence[tuple[Sequence[Sequence[float]], float]],
) -> list[tuple[float, float]]:
    """Pool the CDFs of several repetitions, weighting each by its packet count.

    The pooled CDF at x is Σ wᵢ·Fᵢ(x) / Σ wᵢ, evaluated at every x of every
    input; each Fᵢ is read as a step function.
    """
    parts = [(sorted((float(v), float(f)) for v, f in c), w) for c, w in cdfs if c]
    total = sum(w for _, w in parts)
    if not parts or total <= 0:
        parts = [(c, 1.0) for c, _ in parts]
        total = float(len(parts))
    if not parts:
        return []
    xs = sorted({v for c, _ in parts for v, _ in c})
    return [(x, sum(w * _cdf_at(c, x) for c, w in parts) / total) for x in xs]


_PCT_FIELDS = (("p50", "latency_p50_ns"), ("p90", "latency_p90_ns"),
               ("p99", "latency_p99_ns"), ("p99.9", "latency_p999_ns"),
               ("max", "latency_max_ns"))


def _lat_trials(data: CampaignData) -> list[Trial]:
    return [t for t in data.ok_trials if t.method == "latency" and t.load_fraction is not None]


def _fig_group(t: Trial) -> tuple:
    """Trials drawn in one figure: all but SUT, frame size (a panel row each) and load."""
    return (t.scenario, t.direction, int(t.flows), int(t.burst), int(t.vnfs), int(t.ports),
            int(t.pairs))


def _group_extras(g: tuple) -> str:
    scen, d, flows, burst, vnfs, ports, pairs = g
    return PointKey(scen, d, 0, flows, burst, vnfs, ports, pairs, "", "", "").extras()


def _group_title(g: tuple) -> str:
    extra = _group_extras(g)
    return f"{g[0]} {g[1]}" + (f" ({extra})" if extra else "")


def _group_key(prefix: str, g: tuple) -> str:
    return slug(prefix, g[0], g[1], _group_extras(g))


def _sut_label(t: Trial) -> str:
    return sut_label(t.sut, t.virtual_port)


def _latency_rows(frac: float, at: list[Trial], table: Table) -> list[Series]:
    """CDF series of one panel (one frame size, one load) and its table rows."""
    by_sut: dict[str, list[Trial]] = defaultdict(list)
    for t in at:
        by_sut[_sut_label(t)].append(t)
    series = []
    p99s: dict[str, Spread] = {}
    rows: list[tuple[float, list[str], str]] = []
    for label, st in sorted(by_sut.items()):
        merged = merge_cdfs([(t.latency_cdf, float(t.received)) for t in st])
        series.append(Series(label, [Point(v / 1e3, f) for v, f in merged], step=True))
        pct = {}
        for name, attr in _PCT_FIELDS:
            vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
            pct[name] = spread_of(vals).scaled(1e-3) if vals else None
        if pct["p99"] is not None:
            p99s[label] = pct["p99"]
        jit = [t.jitter_ns for t in st if t.jitter_ns is not None]
        rows.append((
            pct["p99"].median if pct["p99"] else math.inf,
            [str(int(st[0].frame_size_b)), label, fmt(frac),
             fmt_spread(spread_of([t.offered_total_pps for t in st]).scaled(1e-6)),
             fmt_spread(spread_of([_offered_pps(t) for t in st]).scaled(1e-6)),
             str(len(st)), *[fmt_spread(pct[n]) for n, _ in _PCT_FIELDS],
             fmt_spread(spread_of(jit).scaled(1e-3)) if jit else "–",
             fmt_spread(spread_of([t.loss_ratio for t in st]))],
            label,
        ))
    rows.sort(key=lambda r: r[0])
    noisy: set[str] = set()
    unknown: set[str] = set()
    ranked = [r[2] for r in rows if r[2] in p99s]
    for a, b in pairwise(ranked):
        verdict = _within_noise(p99s[a], p99s[b])
        if verdict is None:
            unknown |= {a, b}
        elif verdict:
            noisy |= {a, b}
    for _, row, label in rows:
        table.rows.append(row)
        marks = []
        if label in noisy:
            marks.append("p99 within noise of next SUT")
        if label in unknown:
            marks.append("p99 spread unknown (n=1): not ranked")
        m = _trial_marks(by_sut[label])
        if m:
            marks.append(m)
        table.flags.append("; ".join(marks))
    return series


def latency_cdf_section(data: CampaignData) -> Section:
    """Latency CDFs at each load fraction of R+
    (Software switches for NFV Fig. 8) and percentile tables."""
    sec = Section(
        key="latency-cdf", title="Latency CDFs at 0.1, 0.5 and 0.99 × R+",
        intro="One-way latency measured by turnout-gen (send and receive timestamps on the "
              "same monotonic clock, every stream's histogram merged), at aggregate loads of "
              "0.99, 0.5 and 0.1 × the SUT's own R+; 'asked' is that load, 'offered' what "
              "the tester really sent (a flag says when R+ itself was the tester's limit) "
              "(Software switches for NFV §4.4, Fig. 8): one row of panels per frame size, one "
              "panel per "
              "load. Each curve pools the repetitions' CDFs weighted by their received "
              "packets; x is logarithmic. The tables give each percentile as the median over "
              "repetitions [min–max]; a flagged row's p99 is within noise of the next SUT's "
              "at the same frame size and load.",
    )
    trials = _lat_trials(data)
    if not trials:
        sec.empty = "No latency trials (method 'latency' at a fraction of R+) in this campaign."
        return sec
    by_fig: dict[tuple, list[Trial]] = defaultdict(list)
    for t in trials:
        by_fig[_fig_group(t)].append(t)
    for g, ts in sorted(by_fig.items(), key=_by_scenario):
        fractions = sorted({round(float(t.load_fraction), 4) for t in ts
                            if t.load_fraction is not None}, reverse=True)
        panels = []
        table = Table(
            key=_group_key("latency-pct", g), title=f"Latency percentiles (µs): {_group_title(g)}",
            columns=["size B", "SUT", "× R+", "asked Mpps", "offered Mpps", "n",
                     *[f[0] for f in _PCT_FIELDS], "jitter µs", "loss ratio"],
        )
        for size in sorted({int(t.frame_size_b) for t in ts}):
            for frac in fractions:
                at = [t for t in ts if t.load_fraction is not None
                      and round(float(t.load_fraction), 4) == frac and int(t.frame_size_b) == size]
                series = _latency_rows(frac, at, table) if at else []
                panels.append(Panel(f"{size} B, {fmt(frac)} × R+", "latency (µs)",
                                    "fraction of packets", series, kind="cdf", xlog=True))
        sec.figures.append(Figure(key=_group_key("latency-cdf", g),
                                  title=f"Latency CDF: {_group_title(g)}", panels=panels,
                                  cols=len(fractions)))
        sec.tables.append(table)
    return sec


#: Width of the offered-load bins of the latency-vs-load plot (log-spaced).
LOAD_BIN_RATIO = 1.1


def load_bin(offered_pps: float) -> int:
    """Index of the log-spaced bin (each LOAD_BIN_RATIO wide) holding this load:
    search trials at nearly the same load become one point."""
    return round(math.log(offered_pps) / math.log(LOAD_BIN_RATIO)) if offered_pps > 0 else 0


def latency_load_section(data: CampaignData) -> Section:
    """Latency against offered load (Open vSwitch throughput and latency
    Fig. 13), p50 and p99 per SUT."""
    sec = Section(
        key="latency-load", title="Latency vs offered load",
        intro="Median (solid) and 99th percentile (dashed) one-way latency against the "
              "aggregate load the tester really offered, for every trial that measured "
              "latency (latency trials at "
              "fractions of R+, fixed-rate trials, search trials), grouped into offered-load "
              "bins 10 % wide; the point is the median of the trials in a bin at their median "
              "load, bars span their min–max (Open vSwitch throughput and latency Fig. 13). "
              "One panel per frame "
              "size. The y axis is logarithmic: overload shows as a step up by orders of "
              "magnitude.",
    )
    trials = [t for t in data.ok_trials if t.latency_p50_ns is not None and _offered_pps(t) > 0]
    if not trials:
        sec.empty = "No trials with latency measurements in this campaign."
        return sec
    by_fig: dict[tuple, list[Trial]] = defaultdict(list)
    for t in trials:
        by_fig[_fig_group(t)].append(t)
    for g, ts in sorted(by_fig.items(), key=_by_scenario):
        panels = []
        for size in sorted({int(t.frame_size_b) for t in ts}):
            by: dict[tuple[str, float], list[Trial]] = defaultdict(list)
            for t in ts:
                if int(t.frame_size_b) == size:
                    by[(_sut_label(t), load_bin(_offered_pps(t)))].append(t)
            series = []
            for label in sorted({k[0] for k in by}):
                for pname, attr, style in (("p50", "latency_p50_ns", "-"),
                                           ("p99", "latency_p99_ns", "--")):
                    pts = []
                    for (lab, _load), st in sorted(by.items()):
                        vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
                        if lab != label or not vals:
                            continue
                        sp = spread_of(vals).scaled(1e-3)
                        x = statistics_median([_offered_pps(t) for t in st]) / 1e6
                        pts.append(Point(x, sp.median, sp.min, sp.max, sp.n))
                    pts.sort(key=lambda p: float(p.x))
                    series.append(Series(f"{label} {pname}", pts, style=style))
            panels.append(Panel(f"{size} B", "offered load (Mpps)", "latency (µs)", series,
                                ylog=True))
        sec.figures.append(Figure(
            key=_group_key("latency-load", g), title=f"Latency vs offered load: {_group_title(g)}",
            panels=panels,
        ))
    return sec


def rtt_section(data: CampaignData) -> Section:
    """Client/server round-trip latency against burst size (Virtualized networking framework §4.5,
    Fig. 5): scenario ``rtt``, mean and p99 per SUT, one panel per frame size."""
    sec = Section(
        key="rtt", title="Round-trip latency vs burst size",
        intro="A client sends bursts of N frames back to back at a low rate through the SUT "
              "to a turnout-gen reflect server, which sends each frame back (Virtualized "
              "networking framework §4.5). "
              "The latency is the round trip; mean (solid) and p99 (dashed) against the burst "
              "size, median over repetitions with min–max bars: how each switch spreads its "
              "per-burst costs over the frames of a burst.",
    )
    trials = [t for t in data.ok_trials if t.scenario == "rtt" and t.latency_mean_ns is not None]
    if not trials:
        sec.empty = "No round-trip (rtt) results in this campaign."
        return sec
    table = Table(key="rtt-table", title="Round trips",
                  columns=["SUT", "size B", "rate", "burst", "n", "mean µs [min–max]",
                           "p99 µs [min–max]"])
    panels = []
    for size in sorted({int(t.frame_size_b) for t in trials}):
        by: dict[tuple[str, int], list[Trial]] = defaultdict(list)
        for t in trials:
            if int(t.frame_size_b) == size:
                by[(_sut_label(t), int(t.burst))].append(t)
        series = []
        for label in sorted({k[0] for k in by}):
            for pname, attr, style in (("mean", "latency_mean_ns", "-"),
                                       ("p99", "latency_p99_ns", "--")):
                pts = []
                for (lab, burst), st in sorted(by.items()):
                    vals = [getattr(t, attr) for t in st if getattr(t, attr) is not None]
                    if lab == label and vals:
                        sp = spread_of(vals).scaled(1e-3)
                        pts.append(Point(burst, sp.median, sp.min, sp.max, sp.n))
                series.append(Series(f"{label} {pname}", pts, style=style))
        panels.append(Panel(f"{size} B", "burst size (frames)", "round trip (µs)", series,
                            xlog=True))
        for (label, burst), st in sorted(by.items()):
            mean = spread_of([float(t.latency_mean_ns or 0) for t in st]).scaled(1e-3)
            p99s = [float(t.latency_p99_ns) for t in st if t.latency_p99_ns is not None]
            table.rows.append([label, str(size), fmt(statistics_median(
                [_offered_pps(t) for t in st])) + " pps", str(burst), str(len(st)),
                fmt_spread(mean), fmt_spread(spread_of(p99s).scaled(1e-3)) if p99s else "–"])
            table.flags.append(_trial_marks(st))
    sec.figures.append(Figure(key="rtt-burst", title="Round trip vs burst size", panels=panels))
    sec.tables.append(table)
    return sec


def statistics_median(values: Sequence[float]) -> float:
    """Median of a non-empty sequence."""
    return spread_of(values).median


# ---------------------------------------------------------------- CPU
def cpu_util(t: Trial, role: str = "sut") -> float | None:
    """Total CPU of the threads of ``role`` (sut, tester, vnf) over a trial's
    traffic window, in % of one core."""
    rows = [c for c in t.cpu if c.get("role", "sut") == role]
    if not rows:
        return None
    return 100.0 * sum(float(c.get("util", 0.0)) for c in rows)


def cpu_section(data: CampaignData) -> Section:
    """CPU of the SUT against received throughput (Virtualized networking framework Fig. 6)."""
    sec = Section(
        key="cpu", title="CPU vs throughput",
        intro="CPU time of every SUT thread (from /proc, user + system) per second of the "
              "trial's traffic window (not its set-up or cool-down), summed, in % of one "
              "core, against the aggregate received rate (Virtualized networking framework "
              "Fig. 6). Trials of one method in the same 10 % offered-load bin are one "
              "point (median, min–max bars); saturating trials are at the right end of "
              "each line. A switch whose CPU follows load rises with throughput; a "
              "poll-mode switch is flat at 100 % per polling thread.",
    )
    trials = [t for t in data.ok_trials if t.cpu]
    if not trials:
        sec.empty = "No trials with CPU samples in this campaign."
        return sec
    table = Table(key="cpu-table", title="CPU at the lowest and highest load",
                  columns=["scenario", "dir", "size B", "SUT", "lowest Mpps", "CPU % there",
                           "highest Mpps", "CPU % there", "cycles/packet there",
                           "tester CPU % there", "VNF CPU % there"])
    by_fig: dict[tuple[str, str], list[Trial]] = defaultdict(list)
    for t in trials:
        by_fig[(t.scenario, t.direction)].append(t)
    for (scen, d), ts in sorted(by_fig.items(), key=_by_scenario):
        panels = []
        for size in sorted({int(t.frame_size_b) for t in ts}):
            by: dict[tuple, list[Trial]] = defaultdict(list)
            for t in ts:
                if int(t.frame_size_b) != size:
                    continue
                label = sut_label(t.sut, t.virtual_port)
                by[(label, t.method, t.load_fraction, load_bin(t.offered_total_pps),
                    t.flows, t.burst, t.vnfs, t.ports, t.pairs)].append(t)
            per_sut: dict[str, list[tuple[Spread, Spread, list[Trial]]]] = defaultdict(list)
            for k, st in by.items():
                rx = spread_of([t.rx_total_pps for t in st]).scaled(1e-6)
                cpu = spread_of([cpu_util(t) or 0.0 for t in st])
                per_sut[k[0]].append((rx, cpu, st))
            series = []
            for label, pts in sorted(per_sut.items()):
                pts.sort(key=lambda p: p[0].median)
                series.append(Series(label, [Point(rx.median, c.median, c.min, c.max, c.n)
                                             for rx, c, _ in pts]))
                lo, hi = pts[0], pts[-1]
                cpp = [t.cycles_per_packet for t in hi[2] if t.cycles_per_packet is not None]
                tcpu = [c for t in hi[2] if (c := cpu_util(t, "tester")) is not None]
                vcpu = [c for t in hi[2] if (c := cpu_util(t, "vnf")) is not None]
                table.rows.append([scen, d, str(size), label, fmt(lo[0].median), fmt(lo[1].median),
                                   fmt(hi[0].median), fmt(hi[1].median),
                                   fmt_spread(spread_or_none(cpp)),
                                   fmt_spread(spread_or_none(tcpu)),
                                   fmt_spread(spread_or_none(vcpu))])
                table.flags.append(_trial_marks(hi[2]))
            panels.append(Panel(f"{size} B", "received Mpps", "SUT CPU (% of one core)", series,
                                kind="scatter"))
        sec.figures.append(Figure(key=slug("cpu", scen, d), title=f"CPU vs throughput: {scen} {d}",
                                  panels=panels))
    sec.tables.append(table)
    return sec


# ---------------------------------------------------------------- context
def wall_time(data: CampaignData) -> str:
    """The campaign run's wall time from its start to its end ("14 min 6 s";
    "unfinished" while it runs or when it was interrupted before the end)."""
    c = data.campaign
    if not c.finished_at or not c.started_at:
        return "unfinished"
    s = max(0.0, c.finished_at - c.started_at)
    return f"{int(s // 60)} min {s % 60:.0f} s" if s >= 60 else f"{s:.1f} s"


def campaign_section(data: CampaignData) -> Section:
    """The campaign: name, file, times, status, and its spec."""
    import json

    c = data.campaign
    t = Table(key="campaign-table", title="Campaign", columns=["field", "value"], mono=[1])
    for k, v in (("name", c.name), ("id", str(c.id)), ("file", c.file or "–"),
                 ("started", _time(c.started_at)), ("finished", _time(c.finished_at)),
                 ("wall time", wall_time(data)), ("status", c.status),
                 ("results", f"{len(data.ok_results)} ok of {len(data.results)}"),
                 ("trials", f"{len(data.ok_trials)} ok of {len(data.trials)}"),
                 ("spec", json.dumps(c.spec, indent=2, sort_keys=True, default=str))):
        t.rows.append([k, v])
        t.flags.append("")
    return Section(key="campaign", title="Campaign", intro="", tables=[t])


def fingerprint_section(data: CampaignData) -> Section:
    """Host fingerprint(s) and every SUT's version and configuration."""
    import json

    from .setup import fairness_table

    sec = Section(
        key="setup", title="Host and SUT configuration",
        intro="First the check that nothing in the set-up favours one SUT: per verdict cell, "
              "the same tester build, the same tester processes, ports and buffers, the same "
              "chain VNFs and the same placement (the SUT's data path on its CPUs, its other "
              "threads off them) for every SUT. Then the host fingerprint stored with the "
              "results (CPU, kernel, frequency governor, turbo, SMT, THP, git commit, tool "
              "versions, CPU pinning of every process) and the version and configuration of "
              "every SUT measured.",
    )
    fair = fairness_table(data)
    if fair.rows:
        sec.tables.append(fair)
    host_ids = {data.campaign.host_id} | {r.host_id for r in data.results} | \
        {t.host_id for t in data.trials}
    for hid in sorted(h for h in host_ids if h is not None):
        h = data.db.host(hid)
        if h is None:
            continue
        t = Table(key=slug("host", hid), title=f"Host {h.hostname or hid}",
                  columns=["field", "value"], mono=[1])
        for k, v in (("hostname", h.hostname), ("CPU", h.cpu_model), ("cores", str(h.cores)),
                     ("kernel", h.kernel), ("governor", h.governor), ("turbo", h.turbo),
                     ("SMT", h.smt), ("THP", h.thp), ("git commit", h.git_commit),
                     ("tools", json.dumps(h.tools, indent=1, sort_keys=True)),
                     ("pinning", json.dumps(h.pinning, indent=1, sort_keys=True)),
                     ("other", json.dumps(h.extra, indent=1, sort_keys=True, default=str))):
            t.rows.append([k, v or "–"])
            t.flags.append("")
        sec.tables.append(t)
    from .hosts import remote_host_tables  # a remote campaign's hosts (turnout.hosts)

    sec.tables.extend(remote_host_tables(data))
    suts = data.db.suts(data.campaign.id)
    st = Table(key="suts", title="SUTs", columns=["SUT", "version", "configuration"], mono=[2])
    for s in suts:
        st.rows.append([s.name, s.version or "–",
                        json.dumps(s.config, indent=1, sort_keys=True, default=str)])
        st.flags.append("")
    sec.tables.append(st)
    if not sec.has_data():
        sec.empty = "No host fingerprint or SUT configuration stored with this campaign."
    return sec


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


def not_measured_section(data: CampaignData) -> Section:
    """Results and trials that were skipped, failed or left unfinished, with the reason."""
    sec = Section(key="not-measured", title="Not measured",
                  intro="Searches and standalone trials that did not produce a value, with "
                        "the reason the bench recorded. They are left out of every plot.")
    t = Table(key="not-measured-table", title="Skipped, failed or unfinished",
              columns=["kind", "SUT", "scenario", "dir", "size B", "method", "status", "reason"])
    again = retried(data)
    # the same reason for many cells once, with the cells it covers
    grouped: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    rows: list[Result | Trial] = [*data.results,
                                  *[tr for tr in data.trials if tr.result_id is None]]
    for x in rows:
        kind = "result" if isinstance(x, Result) else "trial"
        if x.status == "ok" or (kind, x.id or 0) in again:
            continue
        cell = (f"{x.scenario}{f' [{x.virtual_port}]' if x.virtual_port else ''} "
                f"{x.frame_size_b} B")
        cells = grouped[(x.sut, x.status, x.reason or "–")]
        if cell not in cells:
            cells.append(cell)
    if grouped:
        g = Table(key="not-measured-by-reason", title="Not measured, by SUT and reason",
                  columns=["SUT", "status", "cells", "reason"])
        for (sut, status, reason), cells in sorted(grouped.items()):
            g.rows.append([sut, status, ", ".join(cells), reason])
            g.flags.append("")
        sec.tables.append(g)
    for r in data.results:
        if r.status != "ok":
            t.rows.append(["search", r.sut, r.scenario, r.direction, str(r.frame_size_b),
                           METHOD_LABEL.get(r.method, r.method), r.status, r.reason or "–"])
            t.flags.append("retried: ok" if ("result", r.id or 0) in again else "")
    for tr in data.trials:
        if tr.status != "ok" and tr.result_id is None:
            t.rows.append(["trial", tr.sut, tr.scenario, tr.direction, str(tr.frame_size_b),
                           METHOD_LABEL.get(tr.method, tr.method), tr.status, tr.reason or "–"])
            t.flags.append("retried: ok" if ("trial", tr.id or 0) in again else "")
    if t.rows:
        sec.tables.append(t)
    else:
        sec.empty = "Everything in this campaign was measured."
    return sec


def all_sections(data: CampaignData) -> list[Section]:
    """The sections of the page, in order."""
    from .hosts import label_latency  # a remote campaign's latency mode on every figure
    from .methods import rule_update_section, sweep_section  # they build on this module
    from .openflow import openflow_section
    from .overlay import overlay_section
    from .usecases import cpu_latency_section, usecase_section
    from .verdict import verdict_section  # verdict builds on this module

    points = throughput_points(data)
    sections = [
        verdict_section(data),
        usecase_section(data),
        campaign_section(data),
        throughput_section(data, points),
        loopback_section(data, points),
        latency_cdf_section(data),
        latency_load_section(data),
        cpu_latency_section(data),
        rtt_section(data),
        overlay_section(data),
        sweep_section(data),
        rule_update_section(data),
        openflow_section(data),
        cpu_section(data),
        *scale_sections(data, points),
        error_bar_section(data, points),
        fingerprint_section(data),
        not_measured_section(data),
    ]
    label_latency(data, sections)
    return sections
