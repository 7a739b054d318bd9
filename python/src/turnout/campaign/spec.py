"""Campaign files (TOML): the (D, L, S, V, P, R, B) tuple of "Virtualized
networking framework" Table 1 (docs/references.md) plus
flows, repetitions, methods and scenarios, expanded into work items.

See docs/bench.md for the format; campaigns/smoke.toml is the smallest one.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..methods import campaign_methods
from ..portkind import KERNEL, VIRTUAL, PortKind, PortKindError
from ..scenarios import SCENARIOS, Point

if TYPE_CHECKING:
    from ..hosts.config import RemoteSpec
    from ..sut.base import SutAdapter

__all__ = ["METHODS", "CampaignError", "CampaignSpec", "WorkItem", "load", "parse",
           "sut_options", "topology_key"]

#: methods in the order they run at a test point (latency and sweep need R+
#: first: turnout/methods.py); ``rule_update`` runs only at points of the
#: ``rule_update`` scenario, which run nothing else (measure/update.py)
METHODS = campaign_methods()
#: the offered-load sweep's default ladder, fractions of R+ ("Open vSwitch
#: throughput and latency" Fig. 8)
SWEEP_FRACTIONS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2)
DIMENSIONS = {"throughput": ("rplus", "ndr", "pdr", "fixed"), "latency": ("rplus", "latency")}


class CampaignError(ValueError):
    """The campaign file is wrong; the message names the key and why."""


@dataclass(frozen=True)
class WorkItem:
    """One unit of resumable work: a method at a point on a SUT, one repetition.

    ``arg`` is the offered load for ``fixed`` and ``rule_update`` (pps) and
    the fraction of R+ for ``latency`` and ``sweep``; 0 otherwise."""

    sut: str
    point: Point
    method: str
    repetition: int
    arg: float = 0.0

    @property
    def key(self) -> str:
        p = self.point
        vp = f"|{p.virtual_port}" if p.virtual_port else ""
        of = f"|o{p.rules}x{p.masks}x{p.outputs}" if p.scenario == "openflow" else ""
        if p.acl:
            of += f"|acl{p.acl}-{p.acl_at}"
        return (f"{self.sut}|{p.scenario}|{p.direction}|{p.frame_size_b}|f{p.flows}|b{p.burst}"
                f"|v{p.vnfs}|p{p.ports}|s{p.pairs}{vp}{of}|{self.method}|{self.arg:g}"
                f"|r{self.repetition}")


@dataclass
class CampaignSpec:
    """A parsed campaign file."""

    name: str
    file: str
    raw: dict[str, Any]
    duration_s: float = 1.0
    #: every trial starts with this much traffic that is not measured (docs/bench.md)
    warmup_s: float = 0.5
    #: a txrx tester's longest wait after the sending for frames still in
    #: flight (measure/gen.py GenMeasurer.return_wait_s)
    return_wait_s: float = 1.0
    repetitions: int = 1
    methods: tuple[str, ...] = ("rplus",)
    search: str = "auto"
    search_width: float = 0.05
    min_load_pps: float = 1000.0
    max_load_pps: float = 0.0  # aggregate; 0 = 1.1 x R+
    #: MLRsearch goals (search/mlr.py: MlrGoals); None = one trial per decision
    mlr_duration_sum_s: float | None = None
    mlr_exceed_ratio: float = 0.0
    mlr_initial_trial_s: float | None = None
    mlr_warmup_s: float = 0.0
    latency_fractions: tuple[float, ...] = (0.1, 0.5, 0.99)
    #: offered-load sweep (method ``sweep``): fractions of R+
    sweep_fractions: tuple[float, ...] = SWEEP_FRACTIONS
    #: the stream's rate in rule-update trials (scenario ``rule_update``)
    update_rate_pps: float = 10000.0
    #: rule-update points also time installing this many flows at once
    #: under the same stream (flow-mods per second, frames lost meanwhile),
    #: through each rule interface the SUT has (measure/update.py)
    update_bulk_flows: tuple[int, ...] = ()
    rates_pps: tuple[float, ...] = ()
    suts: tuple[str, ...] = ("wire",)
    sut_options: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: named variants of registered SUTs (``[sut.NAME] base = "..."``):
    #: name -> base; their options in ``sut_options`` (the base's table of
    #: this campaign with the variant's keys over it)
    variants: dict[str, str] = field(default_factory=dict)
    points: list[Point] = field(default_factory=list)
    sut_cpus: str = "1"
    tester_cpu: int | None = 0
    #: a core of its own for the tester's receivers: each stream then runs as
    #: separate tx and rx processes instead of one txrx thread (None: txrx
    #: on tester_cpu, what a 2-core machine can afford)
    tester_rx_cpu: int | None = None
    #: how turnout-gen opens veth ends: af_xdp | af_packet
    tester_port: PortKind = PortKind.AF_XDP
    #: what virtual endpoints are when the SUT has both: memif | vhost_user
    virtual_port: PortKind = PortKind.MEMIF
    #: how chain VNFs and reflectors wait for frames: "auto" (on the memif
    #: eventfd when they share a core with the tester or each other, busy
    #: polling when each has a core), "poll" or "interrupt"
    vnf_wakeup: str = "auto"
    #: how chain VNFs are scheduled: "auto" (SCHED_FIFO 1 for those in
    #: interrupt mode while RT throttling bounds them, campaign/layout.py
    #: vnf_sched) or "normal" (SCHED_OTHER)
    vnf_priority: str = "auto"
    #: what a loopback chain VNF is: "gen" (turnout-gen fwd) or "qemu" (a
    #: QEMU guest bridging its two virtio-net NICs, on the SUT's vhost-user
    #: ports: turnout/vm.py)
    vnf: str = "gen"
    #: with vnf = "qemu": "auto" (KVM when it works here, else the cell is
    #: skipped with the reason) or "tcg" (run it under TCG anyway: a
    #: functional check that measures the emulator, not the switch)
    qemu_accel: str = "auto"
    #: for the campaign's duration, move what can move off the SUT's CPUs
    #: (unbound workqueues, movable kernel threads, IRQs; system/isolate.py)
    #: and restore it afterwards
    isolate_sut_cpus: bool = False
    #: ``isolate_sut_cpus = "auto"``: isolate when this machine lets the run
    #: (root, writable sysfs, no other isolation alive, a CPU left for the
    #: rest); otherwise say why and run without (the report then says "off")
    isolate_best_effort: bool = False
    #: with isolate_sut_cpus: move other user-space processes' threads too
    #: (``isolate_processes = false``: kernel threads, IRQs, workqueues only)
    isolate_processes: bool = True
    interleave: bool = True
    #: "auto": split this machine's CPUs between tester, SUT and VNFs
    #: (campaign/layout.py) instead of tester_cpu / sut_cpus
    layout: str = ""
    sut_cores: int | None = None  # with layout = "auto": the SUT's share of the CPUs
    #: "local" (everything on this machine) or "remote" (turnout.hosts: the
    #: tester and the switch on hosts driven over SSH, ``remote``)
    location: str = "local"
    remote: RemoteSpec | None = None

    def make_sut(self, name: str) -> SutAdapter:
        """The adapter of a SUT of this campaign (a registered one or a
        variant), with the campaign's options for it."""
        from ..sut import make_sut

        return make_sut(name, self.sut_options.get(name), base=self.variants.get(name))

    def sut_latency_fractions(self, sut: str) -> tuple[float, ...]:
        """The latency loads of one SUT: its ``[sut.NAME] latency_fractions``
        or the campaign's."""
        own = self.sut_options.get(sut, {}).get("latency_fractions")
        return tuple(float(x) for x in own) if own else self.latency_fractions

    def digest(self) -> str:
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()[:12]

    def sut_order(self, rep: int) -> list[str]:
        """The SUTs in the order repetition ``rep`` runs them: the matrix's
        order rotated by ``rep`` times a stride of n // repetitions (at
        least 1), so that over the repetitions each SUT runs at positions
        spread over the whole order (two SUTs: A, B then B, A), not always
        first in a testbed or always right after the same other SUT: a host
        phase, or what one session leaves behind (a set-up's kernel work,
        a cache the last SUT filled), then falls on every SUT in turn
        instead of on one."""
        n = len(self.suts)
        k = (rep * max(1, n // max(1, self.repetitions))) % n if n else 0
        return [*self.suts[k:], *self.suts[:k]]

    def work(self) -> list[WorkItem]:
        """Every work item, in run order: repetition, testbed (points that
        differ only in frame size, flows or burst share one testbed: see
        ``topology_key``), SUT (interleaved A, B, A, B when several SUTs are
        compared, in the order of ``sut_order``), point, method."""
        items: list[WorkItem] = []
        suts_outer = not self.interleave
        topos: dict[tuple[object, ...], list[Point]] = {}
        for p in self.points:
            topos.setdefault(topology_key(p), []).append(p)
        for rep in range(self.repetitions):
            suts = self.sut_order(rep)
            groups = (
                [(s, p) for s in suts for ps in topos.values() for p in ps] if suts_outer
                else [(s, p) for ps in topos.values() for s in suts for p in ps]
            )
            for sut, point in groups:
                methods = [m for m in self.methods if m != "rule_update"]
                if point.scenario == "rule_update":
                    methods = ["rule_update"]
                for m in methods:
                    args: tuple[float, ...] = (0.0,)
                    if m == "latency":
                        args = self.sut_latency_fractions(sut)
                    elif m == "sweep":
                        args = self.sweep_fractions
                    elif m == "fixed":
                        args = self.rates_pps
                    elif m == "rule_update":
                        args = (self.update_rate_pps,)
                    items += [WorkItem(sut, point, m, rep, a) for a in args]
        return items


def topology_key(p: Point) -> tuple[object, ...]:
    """What a testbed depends on: points with the same key can share one
    set-up of the SUT (frame size, flows and burst are the tester's)."""
    return (p.scenario, p.direction, p.vnfs, p.ports, p.pairs, p.virtual_port, p.rules,
            p.masks, p.outputs, p.acl, p.acl_at)


#: matrix keys of the openflow scenario (docs/bench.md, "OpenFlow rule sets")
OPENFLOW_KEYS = {"rules", "masks", "outputs", "openflow_sets", "openflow_paths"}
#: the openflow scenario's paths: p2p over veths, or v2v over virtual ports
#: of one kind (Point.virtual_port)
OPENFLOW_PATHS = {"p2p": "", "v2v/vhost-user": "vhost-user", "v2v/memif": "memif"}


def _of_int(x: Any) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _openflow_cells(m: dict[str, Any], scenarios: list[str],
                    flows: list[int]) -> list[dict[str, Any]]:
    """The cells of the ``openflow`` scenario, each a dict of Point fields
    (rules, masks, outputs, flows, virtual_port): every (rules, masks,
    outputs) of the matrix's lists (defaults 100, 1, 1) but those with more
    masks than rules (each mask needs a rule), which are left out; or,
    instead of the product, the ``openflow_sets`` listed as [rules, masks,
    outputs] triples (cross-sections of the product) or as tables
    ``{rules, masks, outputs, flows, paths, acl, acl_at}`` whose ``flows``
    and ``paths`` narrow the matrix's for that set and whose ``acl`` (with
    ``acl_at`` "above" or "below") adds that many ACL rules
    (turnout.ofrules). With both ``openflow_sets`` and rules/masks/outputs,
    the product and the listed sets. Every set runs on every path of
    ``openflow_paths`` (default ["p2p"]) at every one of ``flows``, unless
    its table says otherwise."""
    from ..ofrules import check_point

    if "openflow" not in scenarios:
        if any(k in m for k in OPENFLOW_KEYS):
            raise CampaignError("matrix.rules/masks/outputs/openflow_sets/openflow_paths: the "
                                "openflow scenario is not in matrix.scenarios")
        return []
    paths = _list(m, "openflow_paths", ["p2p"], str, "matrix")
    for x in paths:
        if x not in OPENFLOW_PATHS:
            raise CampaignError(f"matrix.openflow_paths: {x!r} is not one of "
                                f"{', '.join(OPENFLOW_PATHS)}")
    if len(set(paths)) != len(paths):
        raise CampaignError("matrix.openflow_paths: a path is listed twice")
    sets: list[tuple[int, int, int, list[int], list[str], int, str]] = []
    if "openflow_sets" not in m or any(k in m for k in ("rules", "masks", "outputs")):
        rules = _list(m, "rules", [100], int, "matrix")
        masks = _list(m, "masks", [1], int, "matrix")
        outputs = _list(m, "outputs", [1], int, "matrix")
        sets = [(r, k, o, flows, paths, 0, "")
                for r, k, o in itertools.product(rules, masks, outputs) if k <= r]
    if "openflow_sets" in m:
        listed = m["openflow_sets"]
        if not isinstance(listed, list) or not listed:
            raise CampaignError("matrix.openflow_sets: a non-empty list of [rules, masks, "
                                "outputs] or {rules, masks, outputs, flows, paths}")
        for x in listed:
            if isinstance(x, dict):
                bad = sorted(set(x) - {"rules", "masks", "outputs", "flows", "paths", "acl",
                                       "acl_at"})
                if bad or not all(_of_int(x.get(k)) for k in ("rules", "masks", "outputs")):
                    raise CampaignError(f"matrix.openflow_sets: {x!r}: a table of rules, masks, "
                                        "outputs (integers) and optionally flows, paths, acl, "
                                        "acl_at")
                acl, acl_at = x.get("acl", 0), x.get("acl_at", "")
                if not _of_int(acl) or not isinstance(acl_at, str):
                    raise CampaignError(f"matrix.openflow_sets: {x!r}: acl an integer, acl_at "
                                        "\"above\" or \"below\"")
                fl = _list(x, "flows", flows, int, "matrix.openflow_sets")
                if min(fl) < 1:
                    raise CampaignError(f"matrix.openflow_sets: {x!r}: flows must be ≥ 1")
                ps = _list(x, "paths", paths, str, "matrix.openflow_sets")
                for pa in ps:
                    if pa not in paths:
                        raise CampaignError(f"matrix.openflow_sets: {x!r}: path {pa!r} is "
                                            "not in matrix.openflow_paths")
                trip = (x["rules"], x["masks"], x["outputs"])
            elif isinstance(x, list) and len(x) == 3 and all(_of_int(v) for v in x):
                trip, fl, ps, acl, acl_at = (x[0], x[1], x[2]), flows, paths, 0, ""
            else:
                raise CampaignError(f"matrix.openflow_sets: {x!r} is not [rules, masks, "
                                    "outputs] (integers)")
            if trip[1] > trip[0]:
                raise CampaignError(f"matrix.openflow_sets: {x!r} has more masks than rules")
            sets.append((*trip, fl, ps, acl, acl_at))
        keys = [(r, k, o, pa, a, at) for r, k, o, _, ps, a, at in sets for pa in ps]
        if len(set(keys)) != len(keys):
            raise CampaignError("matrix.openflow_sets: a set is listed twice (on one path)")
    cells = []
    for r, k, o, fl, ps, acl, acl_at in sets:
        why = check_point(r, k, o, acl, acl_at)
        if why:
            raise CampaignError(f"matrix: {why}")
        if r > 1_000_000:
            raise CampaignError(f"matrix.rules: {r} over 10^6")
        cells += [{"rules": r, "masks": k, "outputs": o, "flows": f, "acl": acl,
                   "acl_at": acl_at, "virtual_port": OPENFLOW_PATHS[pa]}
                  for pa in ps for f in fl]
    if not cells:
        raise CampaignError("matrix.rules/masks: every combination has more masks than rules")
    return cells


#: matrix keys of the overlay scenario's cell (docs/bench.md, "Overlay")
OVERLAY_KEYS = {"overlay_directions", "overlay_frame_sizes_b"}


def _overlay_cell(m: dict[str, Any], scenarios: list[str], directions: list[str],
                  sizes: list[int]) -> tuple[list[str], list[int]]:
    """The directions and frame sizes of the ``overlay`` scenario (default:
    the matrix's). Its encapsulation cost is taken against the same SUT's
    p2p figures at the same point, so p2p must be in the campaign and cover
    them."""
    odirs = _list(m, "overlay_directions", directions, str, "matrix")
    osizes = _list(m, "overlay_frame_sizes_b", sizes, int, "matrix")
    if "overlay" not in scenarios:
        if any(k in m for k in OVERLAY_KEYS):
            raise CampaignError("matrix.overlay_*: the overlay scenario is not in "
                                "matrix.scenarios")
        return odirs, osizes
    if "p2p" not in scenarios:
        raise CampaignError("matrix.scenarios: overlay needs p2p in the same campaign (its "
                            "encapsulation cost is overlay minus plain p2p)")
    for d in odirs:
        if d not in directions:
            raise CampaignError(f"matrix.overlay_directions: {d!r} is not in matrix.directions "
                                "(p2p must be measured there too)")
    for sz in osizes:
        if sz not in sizes:
            raise CampaignError(f"matrix.overlay_frame_sizes_b: {sz} is not in "
                                "matrix.frame_sizes_b (p2p must be measured there too)")
    return odirs, osizes


def _scenario_sizes(m: dict[str, Any], scenarios: list[str],
                    sizes: list[int]) -> dict[str, list[int]]:
    """``matrix.scenario_frame_sizes_b = { loopback = [64] }``: the frame
    sizes of some scenarios, a subset of ``frame_sizes_b`` (a campaign cuts a
    scenario's large frames where they rank nothing the small ones do not;
    also its vhost-user cell)."""
    t = m.get("scenario_frame_sizes_b", {})
    if not isinstance(t, dict):
        raise CampaignError("matrix.scenario_frame_sizes_b: a table scenario = [sizes]")
    out: dict[str, list[int]] = {}
    for sc in t:
        if sc not in scenarios:
            raise CampaignError(f"matrix.scenario_frame_sizes_b.{sc}: not in matrix.scenarios")
        got = _list(t, sc, [], int, "matrix.scenario_frame_sizes_b")
        for sz in got:
            if sz not in sizes:
                raise CampaignError(f"matrix.scenario_frame_sizes_b.{sc}: {sz} is not in "
                                    "matrix.frame_sizes_b")
        out[sc] = got
    return out


def _list(d: dict[str, Any], key: str, default: list[Any], typ: type, where: str) -> list[Any]:
    v = d.get(key, default)
    if not isinstance(v, list):
        v = [v]
    out = []
    for x in v:
        if typ is float and isinstance(x, int) and not isinstance(x, bool):
            x = float(x)
        if not isinstance(x, typ) or isinstance(x, bool):
            raise CampaignError(f"{where}.{key}: expected {typ.__name__} values, got {x!r}")
        out.append(x)
    if not out:
        raise CampaignError(f"{where}.{key}: must not be empty")
    return out


def parse(doc: dict[str, Any], file: str = "") -> CampaignSpec:
    """Validate a campaign document (already read from TOML)."""
    from ..sut import SUTS

    known = {"campaign", "matrix", "sut", "hosts"}
    for k in doc:
        if k not in known:
            raise CampaignError(f"unknown table [{k}] (expected campaign, matrix, sut, hosts)")
    c = doc.get("campaign", {})
    m = doc.get("matrix", {})
    if "name" not in c or not isinstance(c["name"], str) or not c["name"]:
        raise CampaignError("campaign.name: required, a non-empty string")
    ckeys = {"name", "description", "dimension", "location", "duration_s", "warmup_s",
             "return_wait_s",
             "repetitions", "methods", "search", "search_width", "min_load_pps", "max_load_pps",
             "mlr_duration_sum_s", "mlr_exceed_ratio", "mlr_initial_trial_s", "mlr_warmup_s",
             "latency_fractions", "sut_cpus", "tester_cpu", "tester_rx_cpu", "tester_port",
             "virtual_port", "vnf_wakeup", "vnf_priority", "vnf", "qemu_accel",
             "layout", "sut_cores", "sweep_fractions", "update_rate_pps",
             "update_bulk_flows", "interleave", "isolate_sut_cpus", "isolate_processes",
             "wires"}
    for k in c:
        if k not in ckeys:
            raise CampaignError(f"campaign.{k}: unknown key")
    mkeys = {"suts", "scenarios", "directions", "frame_sizes_b", "flows", "bursts", "vnfs",
             "ports", "pairs", "rates_pps", "vhost_user_scenarios",
             "scenario_frame_sizes_b"} | OVERLAY_KEYS | OPENFLOW_KEYS
    for k in m:
        if k not in mkeys:
            raise CampaignError(f"matrix.{k}: unknown key")
    location = c.get("location", "local")
    remote = _remote(c, doc, location)
    dims = _list(c, "dimension", ["throughput"], str, "campaign")
    for d in dims:
        if d not in DIMENSIONS:
            raise CampaignError(f"campaign.dimension: unknown {d!r} (throughput, latency)")
    default_methods = sorted({x for d in dims for x in DIMENSIONS[d]}, key=METHODS.index)
    methods = _list(c, "methods", default_methods, str, "campaign")
    for x in methods:
        if x not in METHODS:
            raise CampaignError(f"campaign.methods: unknown {x!r} ({', '.join(METHODS)})")
    methods = sorted(set(methods), key=METHODS.index)
    if ("latency" in methods or "sweep" in methods) and "rplus" not in methods:
        methods.insert(0, "rplus")  # latency and sweep loads are fractions of R+
    duration = float(c.get("duration_s", 1.0))
    if not 0.1 <= duration <= 600:
        raise CampaignError("campaign.duration_s: must be within 0.1..600")
    warmup = float(c.get("warmup_s", 0.5))
    if not 0 <= warmup <= 60:
        raise CampaignError("campaign.warmup_s: must be within 0..60")
    rw = c.get("return_wait_s", 1.0)
    if not isinstance(rw, int | float) or isinstance(rw, bool) or not 0 <= rw <= 60:
        raise CampaignError("campaign.return_wait_s: a number of seconds within 0..60")
    mlr: dict[str, Any] = {}
    for k in ("mlr_duration_sum_s", "mlr_initial_trial_s"):
        if k in c:
            v = c[k]
            if not isinstance(v, int | float) or isinstance(v, bool) or v <= 0:
                raise CampaignError(f"campaign.{k}: a positive number of seconds")
            mlr[k] = float(v)
    ex = c.get("mlr_exceed_ratio", 0.0)
    if not isinstance(ex, int | float) or isinstance(ex, bool) or not 0 <= ex < 1:
        raise CampaignError("campaign.mlr_exceed_ratio: within [0, 1)")
    mw = c.get("mlr_warmup_s", 0.0)
    if not isinstance(mw, int | float) or isinstance(mw, bool) or mw < 0:
        raise CampaignError("campaign.mlr_warmup_s: a number of seconds ≥ 0")
    reps = c.get("repetitions", 1)
    if not isinstance(reps, int) or reps < 1:
        raise CampaignError("campaign.repetitions: a positive integer")
    search = c.get("search", "auto")
    if search not in ("auto", "mlrsearch", "binary"):
        raise CampaignError("campaign.search: auto, mlrsearch or binary")
    sut_opts, variants = _sut_tables(doc.get("sut", {}))
    suts = _list(m, "suts", ["wire"], str, "matrix")
    for s in suts:
        if s not in SUTS and s not in variants:
            raise CampaignError(f"matrix.suts: unknown SUT {s!r} ({', '.join(SUTS)}; or a "
                                "variant: [sut.NAME] base = \"<one of those>\")")
    if len(set(suts)) != len(suts):
        raise CampaignError("matrix.suts: a SUT is named twice")
    scenarios = _list(m, "scenarios", ["p2p"], str, "matrix")
    for s in scenarios:
        if s not in SCENARIOS:
            raise CampaignError(f"matrix.scenarios: unknown {s!r} ({', '.join(SCENARIOS)})")
    directions = _list(m, "directions", ["uni"], str, "matrix")
    for d in directions:
        if d not in ("uni", "bi"):
            raise CampaignError(f"matrix.directions: {d!r} is not uni or bi")
    sizes = _list(m, "frame_sizes_b", [64], int, "matrix")
    for sz in sizes:
        if not 64 <= sz <= 9000:
            raise CampaignError(f"matrix.frame_sizes_b: {sz} outside 64..9000")
    flows = _list(m, "flows", [1], int, "matrix")
    bursts = _list(m, "bursts", [32], int, "matrix")
    vnfs = _list(m, "vnfs", [1], int, "matrix")
    ports = _list(m, "ports", [2], int, "matrix")
    pairs = _list(m, "pairs", [1], int, "matrix")
    for name, vals, lo in (("flows", flows, 1), ("bursts", bursts, 1), ("vnfs", vnfs, 0),
                           ("ports", ports, 2), ("pairs", pairs, 1)):
        if min(vals) < lo:
            raise CampaignError(f"matrix.{name}: values must be ≥ {lo}")
    rates = _list(m, "rates_pps", [1e4], float, "matrix") if "fixed" in methods else []
    fractions = _list(c, "latency_fractions", [0.1, 0.5, 0.99], float, "campaign")
    for f in fractions:
        if not 0 < f <= 1:
            raise CampaignError(f"campaign.latency_fractions: {f} outside (0, 1]")
    sweep = _list(c, "sweep_fractions", list(SWEEP_FRACTIONS), float, "campaign")
    for f in sweep:
        if not 0 < f <= 4:
            raise CampaignError(f"campaign.sweep_fractions: {f} outside (0, 4]")
    update_rate = c.get("update_rate_pps", 10000.0)
    if not isinstance(update_rate, int | float) or isinstance(update_rate, bool) \
            or update_rate <= 0:
        raise CampaignError("campaign.update_rate_pps: a positive rate (pps)")
    bulk = _list(c, "update_bulk_flows", [], int, "campaign") if "update_bulk_flows" in c else []
    for n in bulk:
        if not 1 <= n <= 1_000_000:
            raise CampaignError(f"campaign.update_bulk_flows: {n} outside 1..1000000")
    points = []
    odirs, osizes = _overlay_cell(m, scenarios, directions, sizes)
    sc_sizes = _scenario_sizes(m, scenarios, sizes)
    of_cells = _openflow_cells(m, scenarios, flows)
    for sc, d, sz, fl, b in itertools.product(scenarios, directions, sizes, flows, bursts):
        if sc == "overlay" and (d not in odirs or sz not in osizes):
            continue
        if sz not in sc_sizes.get(sc, sizes):
            continue
        extra: list[dict[str, Any]] = [{}]
        if sc == "loopback":
            extra = [{"vnfs": v} for v in vnfs]
        elif sc == "density":
            extra = [{"ports": p} for p in ports]
        elif sc == "nvsn":
            extra = [{"pairs": p} for p in pairs]
        elif sc == "openflow":
            # each cell names its own flows (a set's table may narrow them):
            # the cells at the first of the matrix's flows, once
            if fl != flows[0]:
                continue
            points += [Point(scenario=sc, direction=d, frame_size_b=sz, burst=b, **e)
                       for e in of_cells]
            continue
        points += [Point(scenario=sc, direction=d, frame_size_b=sz, flows=fl, burst=b, **e)
                   for e in extra]
    # A vhost-user cell next to the campaign's virtual_port: these scenarios
    # again with vhost-user virtual ports (SUTs without vhost-user ports
    # skip it with the reason).
    vhost_scenarios = _list(m, "vhost_user_scenarios", ["none"], str, "matrix") \
        if "vhost_user_scenarios" in m else []
    for sc in vhost_scenarios:
        if sc not in ("p2v", "v2p", "v2v", "loopback", "nvsn"):
            raise CampaignError(f"matrix.vhost_user_scenarios: {sc!r} has no virtual ports "
                                "(p2v, v2p, v2v, loopback, nvsn)")
    virtual_port = _port_kind(c, "virtual_port", PortKind.MEMIF, VIRTUAL)
    if vhost_scenarios and virtual_port is PortKind.VHOST_USER:
        raise CampaignError("matrix.vhost_user_scenarios: campaign.virtual_port is "
                            "vhost-user already")
    for sc, d, sz, fl, b in itertools.product(vhost_scenarios, directions, sizes, flows, bursts):
        if sz not in sc_sizes.get(sc, sizes):
            continue
        extra = [{}]
        if sc == "loopback":
            extra = [{"vnfs": v} for v in vnfs]
        elif sc == "nvsn":
            extra = [{"pairs": p} for p in pairs]
        points += [Point(scenario=sc, direction=d, frame_size_b=sz, flows=fl, burst=b,
                         virtual_port="vhost-user", **e) for e in extra]
    tester_cpu = c.get("tester_cpu", 0)
    tester_rx_cpu = c.get("tester_rx_cpu")
    if tester_rx_cpu is not None and (not isinstance(tester_rx_cpu, int) or tester_rx_cpu < 0):
        raise CampaignError(f"campaign.tester_rx_cpu: {tester_rx_cpu!r} is not a CPU number")
    if tester_rx_cpu is not None and tester_rx_cpu == tester_cpu:
        raise CampaignError("campaign.tester_rx_cpu: same CPU as tester_cpu "
                            "(leave it out to send and receive in one thread there)")
    layout = c.get("layout", "")
    if layout not in ("", "auto"):
        raise CampaignError(f"campaign.layout: {layout!r} is not \"auto\" (or leave it out "
                            "and name tester_cpu and sut_cpus)")
    if layout and ("sut_cpus" in c or "tester_cpu" in c):
        raise CampaignError("campaign.layout = \"auto\" chooses the cores: leave out "
                            "tester_cpu and sut_cpus")
    sut_cores = c.get("sut_cores")
    if sut_cores is not None and (not isinstance(sut_cores, int) or sut_cores < 1
                                  or not layout):
        raise CampaignError(f"campaign.sut_cores: {sut_cores!r}: a positive number of cores, "
                            "with layout = \"auto\"")
    # the tester (turnout-gen) opens veth ends with AF_XDP or AF_PACKET only
    tester_port = _port_kind(c, "tester_port", PortKind.AF_XDP, KERNEL)
    vnf_wakeup = c.get("vnf_wakeup", "auto")
    if vnf_wakeup not in ("auto", "poll", "interrupt"):
        raise CampaignError(f"campaign.vnf_wakeup: {vnf_wakeup!r} is not auto, poll or interrupt")
    vnf_priority = c.get("vnf_priority", "auto")
    if vnf_priority not in ("auto", "normal"):
        raise CampaignError(f"campaign.vnf_priority: {vnf_priority!r} is not auto or normal")
    vnf = c.get("vnf", "gen")
    if vnf not in ("gen", "qemu"):
        raise CampaignError(f"campaign.vnf: {vnf!r} is not gen or qemu")
    qemu_accel = c.get("qemu_accel", "auto")
    if qemu_accel not in ("auto", "tcg"):
        raise CampaignError(f"campaign.qemu_accel: {qemu_accel!r} is not auto or tcg")
    if "qemu_accel" in c and vnf != "qemu":
        raise CampaignError("campaign.qemu_accel: only with vnf = \"qemu\"")
    isolate = c.get("isolate_sut_cpus", False)
    isolate_best_effort = isolate == "auto"
    if isolate_best_effort:
        isolate = True
    if not isinstance(isolate, bool):
        raise CampaignError(f"campaign.isolate_sut_cpus: {isolate!r} is not true, false or "
                            "\"auto\"")
    isolate_processes = c.get("isolate_processes", True)
    if not isinstance(isolate_processes, bool):
        raise CampaignError(f"campaign.isolate_processes: {isolate_processes!r} is not true or "
                            "false")
    return CampaignSpec(
        name=c["name"], file=file, raw=doc, duration_s=duration, warmup_s=warmup,
        return_wait_s=float(rw),
        mlr_duration_sum_s=mlr.get("mlr_duration_sum_s"), mlr_exceed_ratio=float(ex),
        mlr_initial_trial_s=mlr.get("mlr_initial_trial_s"), mlr_warmup_s=float(mw),
        repetitions=reps,
        methods=tuple(methods), search=search, search_width=float(c.get("search_width", 0.05)),
        min_load_pps=float(c.get("min_load_pps", 1000.0)),
        max_load_pps=float(c.get("max_load_pps", 0.0)),
        latency_fractions=tuple(fractions), sweep_fractions=tuple(sweep),
        update_rate_pps=float(update_rate), update_bulk_flows=tuple(bulk),
        rates_pps=tuple(rates), suts=tuple(suts),
        sut_options=sut_opts, variants=variants, points=points,
        sut_cpus=str(c.get("sut_cpus", "1")),
        tester_cpu=None if tester_cpu < 0 else int(tester_cpu), tester_rx_cpu=tester_rx_cpu,
        tester_port=tester_port, virtual_port=virtual_port, vnf_wakeup=vnf_wakeup,
        vnf_priority=vnf_priority, vnf=vnf, qemu_accel=qemu_accel,
        isolate_sut_cpus=isolate, isolate_best_effort=isolate_best_effort,
        isolate_processes=isolate_processes, interleave=bool(c.get("interleave", True)),
        layout=layout,
        sut_cores=sut_cores, location=location, remote=remote,
    )


def _port_kind(c: dict[str, Any], key: str, default: PortKind,
               accepted: tuple[PortKind, ...]) -> PortKind:
    """``campaign.KEY``: a port kind (turnout.portkind: turnoutd's spelling or
    an older one) among ``accepted``."""
    try:
        return PortKind.parse(c.get(key, default), accepted)
    except PortKindError as e:
        raise CampaignError(f"campaign.{key}: {e}") from None


def _remote(c: dict[str, Any], doc: dict[str, Any], location: Any) -> RemoteSpec | None:
    """``location``: "local" (the default: everything on this machine) or
    "remote" (``[hosts.NAME]`` and ``campaign.wires``: turnout.hosts)."""
    from ..hosts.config import RemoteSpecError, parse_remote

    if location not in ("local", "remote"):
        raise CampaignError(f"campaign.location: {location!r} is not \"local\" or \"remote\"")
    if location == "local":
        if "hosts" in doc or "wires" in c:
            raise CampaignError("[hosts] and campaign.wires: only with location = \"remote\"")
        return None
    try:
        return parse_remote(c, doc.get("hosts"))
    except RemoteSpecError as e:
        raise CampaignError(str(e)) from None


def load(path: str | Path) -> CampaignSpec:
    """Read and validate a campaign file; a CampaignError names the file,
    the key and why."""
    p = Path(path)
    try:
        doc = tomllib.loads(p.read_text())
    except OSError as e:
        raise CampaignError(f"cannot read {p}: {e.strerror}") from e
    except tomllib.TOMLDecodeError as e:
        raise CampaignError(f"{p}: {e}") from e
    try:
        return parse(doc, str(p))
    except CampaignError as e:  # every error names the file
        raise CampaignError(f"{p}: {e}") from None


def _sut_tables(tables: Any) -> tuple[dict[str, dict[str, Any]], dict[str, str]]:
    """The ``[sut.NAME]`` tables: options per SUT, and the variants (NAME ->
    base). A table whose NAME is not a registered SUT is a variant and must
    say ``base = "<registered SUT>"``; it takes the base's table of this
    campaign and puts its own keys over it (a before/after pair differs only
    in what the variant says, e.g. ``binary``). ``base`` is not passed to the
    adapter."""
    from ..sut import SUTS

    if not isinstance(tables, dict):
        raise CampaignError("[sut]: tables [sut.NAME] of options")
    for k, v in tables.items():
        if not isinstance(v, dict):
            raise CampaignError(f"[sut.{k}]: a table of options")
    variants: dict[str, str] = {}
    for k, v in tables.items():
        if "base" not in v:
            if k not in SUTS:
                raise CampaignError(f"[sut.{k}]: unknown SUT ({', '.join(SUTS)}); a variant "
                                    "of one of those says base = \"<name>\"")
            continue
        b = v["base"]
        if k in SUTS:
            raise CampaignError(f"sut.{k}.base: {k} is a registered SUT; a variant needs a "
                                f"name of its own (e.g. [sut.{k}-before])")
        if not isinstance(b, str) or b not in SUTS:
            raise CampaignError(f"sut.{k}.base: {b!r} is not a registered SUT "
                                f"({', '.join(SUTS)})")
        variants[k] = b
    opts: dict[str, dict[str, Any]] = {}
    for k, v in tables.items():
        k = str(k)
        o = {**tables.get(variants[k], {}), **v} if k in variants else dict(v)
        o.pop("base", None)
        if "binary" in o:
            cls = SUTS[variants.get(k, k)]
            if not cls.takes_binary:
                raise CampaignError(f"sut.{k}.binary: {cls.name} runs the installed "
                                    "software; only SUTs built here take another build's "
                                    "binary")
            if not isinstance(o["binary"], str) or not o["binary"]:
                raise CampaignError(f"sut.{k}.binary: a path (absolute or relative to "
                                    "this checkout)")
        _sut_scenarios(k, o)
        opts[k] = _sut_options(k, SUTS[variants.get(k, k)], o)
    return opts, variants


def sut_options(tables: Any) -> dict[str, dict[str, Any]]:
    """The options of every ``[sut.NAME]`` table, a variant's merged with
    its base's and each checked (``_sut_tables``): what a campaign stores
    with each SUT, for readers of a stored spec."""
    return _sut_tables(tables)[0]


def _sut_options(name: str, cls: type[SutAdapter], opts: dict[str, Any]) -> dict[str, Any]:
    """The options of ``[sut.NAME]`` checked against the adapter's options
    dataclass (sut/options.py), each value in its canonical spelling
    (``kernel_port = "afxdp"`` is af_xdp); an unknown key or a bad value is
    refused, naming the key and what it accepts."""
    from ..sut.options import OptionError

    try:
        return cls.Options.canonical(opts)
    except OptionError as e:
        raise CampaignError(f"sut.{name}.{e.key}: {e.why}") from None


def _sut_scenarios(name: str, opts: Any) -> None:
    """``[sut.NAME] scenarios``: the scenarios this SUT runs in the campaign
    (the others are skipped with ``scenarios_reason``, stored and shown in
    the verdict), so a campaign can cut one SUT's cells without losing the
    SUT's reason."""
    if not isinstance(opts, dict):
        raise CampaignError(f"[sut.{name}]: a table of options")
    if "scenarios" in opts:
        only = opts["scenarios"]
        if not isinstance(only, list) or not only or not all(isinstance(x, str) for x in only):
            raise CampaignError(f"sut.{name}.scenarios: a non-empty list of scenario names")
        for x in only:
            sc, _, port = x.partition("/")
            if sc not in SCENARIOS:
                raise CampaignError(f"sut.{name}.scenarios: unknown scenario {sc!r} "
                                    f"({', '.join(SCENARIOS)})")
            if port and port != "vhost-user":
                raise CampaignError(f"sut.{name}.scenarios: {x!r}: a scenario, or "
                                    "SCENARIO/vhost-user for its vhost-user cell only")
    why = opts.get("scenarios_reason")
    if why is not None and (not isinstance(why, str) or not why or "scenarios" not in opts):
        raise CampaignError(f"sut.{name}.scenarios_reason: a non-empty string, with scenarios")
