"""How a SUT that can sleep ran at each fixed rate, and what it cost.

turnoutd's workers choose a wake-up regime against their latency budget
(docs/turnoutd.md, "Wake-up and the latency budget"): they poll while
frames flow when the host's wake-up p99 does not fit the budget
(``wake_over_budget``), when the budget is 0 (``no_budget``) or before
they have measured a wake-up (``measuring``); they sleep on notifications
(``interrupt``) when it fits (``wake_fits``) or when polling waits longer
for the CPU than a wake-up takes (``contended``); they nap after each
batch (``moderate``) when a nap fits and a wake-up does not or costs more.
The bench stores each worker's regime, why, the wake-up p99 it decided on
and its budget as read while the traffic flowed, and its sleep counters
over the traffic, with every trial (``extra.sut_wake``: measure/gen.py
``wake_delta``).

For every fixed-rate cell (use case, frame size, rate) and every SUT that
keeps such an account, this module says which regime its workers ran in
and why, and its CPU per second of traffic (report/cpuload.py
``cpu_at_load``, in cores) next to every other SUT measured in the same
cell (busy pollers, kernel switches, the same switch with another budget):
a latency met by polling costs a core, and the report says so.

Every figure comes from the trials. The budget is the trial's
``budget_ns`` (stored since the bench kept it), else the SUT's
``latency_budget_us`` option; a trial with neither says "its default
budget" without a number.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from ..results import Trial
from .cpuload import cpu_at_load
from .formatting import fmt, fmt_spread
from .model import Spread, Table, spread_of, spread_or_none
from .points import CampaignData, PointKey, scenario_rank, sut_label

__all__ = [
    "REGIME_SHORT",
    "CellRegime",
    "SutAtCell",
    "WakeTrial",
    "fmt_cores",
    "regime_cell_text",
    "regime_cells",
    "regime_table",
    "sentence",
    "wake_of",
]

#: a regime in the tables: "poll" (keeps polling while frames flow), "wake"
#: (sleeps, woken by notifications), "nap" (naps after each batch)
REGIME_SHORT = {"poll": "poll", "interrupt": "wake", "moderate": "nap"}
#: a regime in sentences
_REGIME_WORD = {"poll": "polled", "interrupt": "slept between frames (woken by notifications)",
                "moderate": "napped after each batch"}
_SHORT_SCEN = {"loopback": "chain", "nvsn": "NvsN"}


@dataclass(frozen=True)
class WakeTrial:
    """One trial's wake-up account (``extra.sut_wake``), over its workers."""

    #: the (regime, why) pairs of its workers, sorted, each once
    regimes: tuple[tuple[str, str], ...]
    #: the largest wake-up p99 a worker decided on, ns (0: none measured)
    wake_p99_ns: float
    #: the budget it decided against, ns; None when the trial did not store it
    budget_ns: float | None
    #: the longest idle time a polling worker waited before sleeping, ns
    sleep_after_ns: float
    #: over the traffic, all workers: sleeps, and sleeps that frames ended
    sleeps: int
    wakeups: int
    #: the largest run-queue wait of a worker, ‰ of its runnable time
    rq_wait_permille: float

    @property
    def polled(self) -> bool:
        """True when some worker ran in the poll regime."""
        return any(r == "poll" for r, _ in self.regimes)


def wake_of(t: Trial) -> WakeTrial | None:
    """The trial's wake-up account, or None (a SUT without one, or an error)."""
    sw = t.extra.get("sut_wake") if isinstance(t.extra, dict) else None
    if not isinstance(sw, dict) or "error" in sw:
        return None
    ws = [w for w in sw.get("workers") or [] if isinstance(w, dict) and w.get("regime")]
    if not ws:
        return None
    budgets = [float(w["budget_ns"]) for w in ws if w.get("budget_ns") is not None]
    return WakeTrial(
        regimes=tuple(sorted({(str(w["regime"]), str(w.get("why") or "")) for w in ws})),
        wake_p99_ns=max(float(w.get("wake_p99_ns") or 0) for w in ws),
        budget_ns=max(budgets) if budgets else None,
        sleep_after_ns=max(float(w.get("sleep_after_ns") or 0) for w in ws),
        sleeps=sum(int(w.get("sleeps") or 0) for w in ws),
        wakeups=sum(int(w.get("wakeups") or 0) for w in ws),
        rq_wait_permille=max(float(w.get("rq_wait_permille") or 0) for w in ws),
    )


@dataclass
class SutAtCell:
    """One SUT's trials at one fixed-rate cell."""

    label: str
    trials: list[Trial]
    #: its CPU per second of traffic in cores, median [min–max]
    cores: Spread | None
    p99_us: Spread
    #: "kernel" when the CPU is a kernel switch's CPUs' kernel time
    source: str
    wake: list[WakeTrial] = field(default_factory=list)
    #: the budget in µs from the SUT's options when its trials stored none
    option_budget_us: float | None = None


@dataclass
class CellRegime:
    """One fixed-rate cell: every SUT measured in it, those with a wake-up account first."""

    title: str  # "v2v 64 B at 10 kpps"
    scenario: str
    frame_size_b: int
    rate_pps: float
    suts: list[SutAtCell] = field(default_factory=list)
    #: the bare wire's p99 in µs at this cell, per kind of port ("" for veths)
    floors: dict[str, Spread] = field(default_factory=dict)

    def sleepers(self) -> list[SutAtCell]:
        """The SUTs of the cell that keep a wake-up account."""
        return [s for s in self.suts if s.wake]


def _options(data: CampaignData) -> dict[int, dict[str, Any]]:
    """sut id -> its stored options."""
    out: dict[int, dict[str, Any]] = {}
    assert data.campaign.id is not None
    for s in data.db.suts(data.campaign.id):
        if s.id is not None and isinstance(s.config, dict):
            opts = s.config.get("options")
            out[s.id] = opts if isinstance(opts, dict) else {}
    return out


def regime_cells(data: CampaignData) -> list[CellRegime]:
    """Every fixed-rate cell in which some SUT kept a wake-up account, with
    every SUT measured there (the bare wire left out: it uses no CPU of its own)."""
    by: dict[tuple[Any, ...], dict[str, list[Trial]]] = defaultdict(lambda: defaultdict(list))
    wire: dict[tuple[Any, ...], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for t in data.ok_trials:
        if t.method != "fixed" or t.latency_p99_ns is None or t.offered_total_pps <= 0:
            continue
        key = (scenario_rank(t.scenario), t.point.direction, int(t.point.frame_size_b),
               round(t.offered_total_pps), PointKey.of(t).extras())
        if t.sut in data.reference_suts:
            wire[key][t.point.virtual_port].append(float(t.latency_p99_ns) / 1e3)
            continue
        by[key][sut_label(t.sut, t.point.virtual_port)].append(t)
    opts = _options(data) if by else {}
    cells = []
    for (rank, d, size, rate, extras), suts in sorted(by.items()):
        scen = rank[1]
        title = (f"{_SHORT_SCEN.get(scen, scen)}{f' ({extras})' if extras else ''} {size} B"
                 f"{' both ways' if d == 'bi' else ''} at {rate / 1e3:g} kpps")
        cell = CellRegime(title, scen, size, float(rate),
                          floors={p: spread_of(v) for p, v in
                                  wire[(rank, d, size, rate, extras)].items()})
        for label, ts in sorted(suts.items()):
            cpus = [cpu_at_load(t) for t in ts]
            s = SutAtCell(
                label=label, trials=ts,
                cores=spread_or_none([c.pct / 100 for c in cpus if c.pct is not None]),
                p99_us=spread_of([float(t.latency_p99_ns or 0) / 1e3 for t in ts]),
                source="kernel" if any(c.source == "kernel" for c in cpus) else "",
                wake=[w for t in ts if (w := wake_of(t)) is not None])
            o = opts.get(ts[0].sut_id or -1, {})
            if o.get("latency_budget_us") is not None:
                s.option_budget_us = float(o["latency_budget_us"])
            cell.suts.append(s)
        if cell.sleepers():
            cell.suts.sort(key=lambda s: (not s.wake, s.label))
            cells.append(cell)
    return cells


def _fs(x: Spread | None) -> str:
    """fmt_spread, with one figure where every repetition gave the same."""
    if x is not None and x.min == x.max:
        return fmt(x.median)
    return fmt_spread(x)


def _budget_us(s: SutAtCell) -> Spread | None:
    vals = [w.budget_ns / 1e3 for w in s.wake if w.budget_ns is not None]
    if vals:
        return spread_of(vals)
    if s.option_budget_us is not None:
        return spread_of([s.option_budget_us])
    return None


def _budget_text(s: SutAtCell) -> str:
    b = _budget_us(s)
    if b is None:
        return "its default budget (the figure is not stored in these trials)"
    return f"its {_fs(b)} µs budget"


def _groups(s: SutAtCell) -> dict[tuple[tuple[str, str], ...], list[WakeTrial]]:
    g: dict[tuple[tuple[str, str], ...], list[WakeTrial]] = defaultdict(list)
    for w in s.wake:
        g[w.regimes].append(w)
    return dict(sorted(g.items(), key=lambda kv: -len(kv[1])))


def _why_text(why: str, ws: list[WakeTrial], s: SutAtCell) -> str:
    wake = spread_or_none([w.wake_p99_ns / 1e3 for w in ws if w.wake_p99_ns > 0])
    wk = f"the host's wake-up p99 ({_fs(wake)} µs)" if wake else "the host's wake-up"
    if why == "wake_over_budget":
        # the worker sleeps only if its wake-up p99 fits in half the budget
        return f"{wk} exceeds half {_budget_text(s)}"
    if why == "wake_fits":
        return f"{wk} fits {_budget_text(s)}"
    if why == "no_budget":
        return "its budget is 0: it polls while frames flow"
    if why == "poll_mode":
        return 'wakeup = "poll": it never sleeps'
    if why == "measuring":
        return "it had not measured enough wake-ups yet"
    if why == "contended":
        rq = spread_or_none([w.rq_wait_permille for w in ws])
        return ("polling waited longer for the CPU than a wake-up takes (contended"
                + (f"; run-queue wait {_fs(rq)} ‰" if rq else "") + ")")
    if why == "naps_cheaper":
        return f"a nap fits {_budget_text(s)} and costs less than wake-ups at this rate"
    if why == "only_naps_fit":
        return f"a nap fits {_budget_text(s)}, {wk} does not"
    return why or "no reason stored"


def _regime_text(regimes: tuple[tuple[str, str], ...], ws: list[WakeTrial],
                 s: SutAtCell) -> str:
    parts = []
    for regime, why in regimes:
        parts.append(f"{_REGIME_WORD.get(regime, regime)}: {_why_text(why, ws, s)}")
    return "; ".join(parts)


def _core(x: float) -> str:
    """Cores with two decimals ("1.00", "0.74"); two significant digits below 0.1 ("0.027")."""
    return f"{x:.2f}" if x >= 0.1 or x == 0 else f"{x:.2g}"


def fmt_cores(x: Spread | None) -> str:
    """'0.99 [0.74–1.00]' ('–' for None; the median alone for one repetition or
    where every repetition gave the same)."""
    if x is None:
        return "–"
    if x.n < 2 or _core(x.min) == _core(x.max):
        return _core(x.median)
    return f"{_core(x.median)} [{_core(x.min)}–{_core(x.max)}]"


def _cores(x: Spread | None) -> str:
    return f"{fmt_cores(x)} core"


def _short(s: SutAtCell) -> str:
    """'turnoutd [memif] 0.99 core, p99 40 µs' and, for a SUT with a wake-up
    account, the regime it ran in."""
    regime = ""
    if s.wake:
        g = _groups(s)
        regime = ", ".join(f"{'/'.join(REGIME_SHORT.get(r, r) for r, _ in k)}"
                           + (f" {len(v)}/{len(s.wake)}" if len(g) > 1 else "")
                           for k, v in g.items())
        b = _budget_us(s)
        regime = f" ({regime}" + (f", budget {fmt(b.median)} µs" if b else "") + ")"
    src = ", kernel time" if s.source == "kernel" else ""
    return f"{s.label}{regime} {_cpu_text(s)}{src}, p99 {fmt(s.p99_us.median)} µs"


def _cpu_text(s: SutAtCell) -> str:
    """'0.99 [0.74–1.00] core', or why there is no figure (a kernel switch
    whose kernel time at this load was below its account's resolution)."""
    if s.cores is not None:
        return _cores(s.cores)
    if any("below its resolution" in str(t.extra.get("kernel_why", "")) for t in s.trials):
        return "CPU below its kernel-time account's resolution"
    return "CPU not measured"


def sentence(cell: CellRegime, s: SutAtCell) -> str:
    """One SUT with a wake-up account at one cell, in words: its regime and
    why, its CPU per second of traffic and p99, and every other SUT of the
    cell with theirs."""
    n = len(s.wake)
    bits = []
    for regimes, ws in _groups(s).items():
        when = "" if len(ws) == n else f" in {len(ws)} of {n} trials"
        bits.append(_regime_text(regimes, ws, s) + when)
    head = f"{cell.title}: {s.label} " + "; ".join(bits)
    cost = f"; it used {_cpu_text(s)} per second of traffic (p99 {fmt_spread(s.p99_us)} µs)"
    others = [o for o in cell.suts if o is not s]
    like = [o.label for o in others if s.cores and o.cores and not o.wake
            and abs(o.cores.median - s.cores.median) <= 0.1 * max(s.cores.median, 0.01)]
    if like:
        cost += f", as much as {', '.join(like)}"
    elif s.cores and any(o.cores and not o.wake for o in others):
        most = max((o for o in others if o.cores and not o.wake),
                   key=lambda o: o.cores.median if o.cores else 0.0)
        assert most.cores is not None
        if most.cores.median > 0:
            cost += (f", {_core(s.cores.median / most.cores.median)}× what {most.label} "
                     f"used ({_core(most.cores.median)} core)")
    tail = f". Same cell: {'; '.join(_short(o) for o in others)}" if others else ""
    return head + cost + _held(cell, s) + tail + "."


def _held(cell: CellRegime, s: SutAtCell) -> str:
    """Whether the SUT's p99 stayed within the wire's p99 plus its budget
    (the contract of issue 31), and whether polling is what held it; "" when
    the cell has no wire on its kind of port or the budget is not stored."""
    b = _budget_us(s)
    floor = cell.floors.get(s.trials[0].point.virtual_port)
    if b is None or floor is None or b.median <= 0:
        return ""
    bound = floor.median + b.median
    figures = (f"p99 {fmt(s.p99_us.median)} µs, the wire's {fmt(floor.median)} µs + "
               f"{fmt(b.median)} µs = {fmt(bound)} µs")
    if s.p99_us.median > bound:
        return f"; its budget did not hold ({figures})"
    how = (" by polling" if all(w.polled for w in s.wake) else
           " without polling" if not any(w.polled for w in s.wake) else "")
    return f"; its budget held{how} ({figures})"


def regime_cell_text(trials: list[Trial]) -> str:
    """A short cell for the latency verdict: "poll 3/3 (wake_over_budget)";
    "–" for trials without a wake-up account."""
    ws = [w for t in trials if (w := wake_of(t)) is not None]
    if not ws:
        return "–"
    g: dict[tuple[tuple[str, str], ...], int] = defaultdict(int)
    for w in ws:
        g[w.regimes] += 1
    return "; ".join(
        "/".join(REGIME_SHORT.get(r, r) for r, _ in k) + f" {c}/{len(trials)} ("
        + ", ".join(why for _, why in k) + ")"
        for k, c in sorted(g.items(), key=lambda kv: -kv[1]))


def regime_table(data: CampaignData, cells: list[CellRegime] | None = None) -> Table:
    """The wake-up regime of every SUT that keeps one, at every fixed-rate
    cell, with its CPU per second of traffic next to the other SUTs' (see the
    module doc); its sentences say the same in words."""
    cells = regime_cells(data) if cells is None else cells
    t = Table(
        key="wake-regime", title="Wake-up regime at fixed rates, and what it cost",
        columns=["cell", "SUT", "regime", "why", "wake-up p99 µs", "budget µs",
                 "idle before sleep µs", "sleeps / ended by frames", "CPU core", "p99 µs", "n",
                 "same cell: CPU core, p99"],
        note=("Regime of the SUT's workers during the trial's traffic (turnoutd: "
              "docs/turnoutd.md, \"Wake-up and the latency budget\"): poll = kept polling "
              "while frames flowed (a core, as a busy poller), wake = slept between frames "
              "and was woken by notifications, nap = napped after each batch; n/N when the "
              "repetitions differ. why: wake_over_budget (the host's wake-up p99, measured "
              "by the worker, exceeds half its latency budget), no_budget (budget 0), wake_fits, "
              "contended (polling waited longer for the CPU than a wake-up takes), "
              "naps_cheaper, only_naps_fit, measuring, poll_mode (wakeup = \"poll\"). Idle "
              "before sleep: how long a polling worker waits with every queue empty before "
              "it sleeps (idle ports cost nothing after it). CPU core: everything the SUT's "
              "threads used per second of the traffic window (OS CPU time; a kernel switch: "
              "its CPUs' kernel time), median [min–max]. Same cell: every other SUT "
              "offered the same rate in the same use case and frame size (other kinds of "
              "port included)."),
    )
    for cell in cells:
        for s in cell.sleepers():
            others = "; ".join(_short(o) for o in cell.suts if o is not s) or "–"
            for regimes, ws in _groups(s).items():
                wake = spread_or_none([w.wake_p99_ns / 1e3 for w in ws if w.wake_p99_ns > 0])
                idle = spread_or_none([w.sleep_after_ns / 1e3 for w in ws
                                       if w.sleep_after_ns > 0])
                b = _budget_us(s)
                t.rows.append([
                    cell.title, s.label,
                    "/".join(REGIME_SHORT.get(r, r) for r, _ in regimes)
                    + (f" {len(ws)}/{len(s.wake)}" if len(ws) != len(s.wake) else ""),
                    ", ".join(why for _, why in regimes), _fs(wake),
                    _fs(b) if b else "default (not stored)",
                    _fs(idle),
                    f"{sum(w.sleeps for w in ws)} / {sum(w.wakeups for w in ws)}",
                    fmt_cores(s.cores) if s.cores else _cpu_text(s), fmt_spread(s.p99_us),
                    str(len(s.trials)), others])
                t.flags.append("")
        t.sentences.extend(sentence(cell, s) for s in cell.sleepers())
    return t
