"""The verdict at a glance: one matrix and one sentence per use case.

Rows are the verdict's rows (report/verdict.py): a use case at one frame
size over one kind of port; columns are the SUTs of the campaign. Each
cell holds the SUT's value of the measure its row is ranked by (capacity
in cycles per frame, lower first, or R+ in Mpps where every SUT set its own
rate), its ratio to the row's best, and is coloured by its rank (the
verdict's overlap rule: a shared rank is a tie within the spread). A SUT
that was skipped or failed there says so (the reason on hover and under
"Not measured"); an empty cell is a SUT with no place in that row (another
kind of port, e.g. the kernel switches' veth row next to the memif one).
"""

from __future__ import annotations

from .formatting import fmt, fmt_spread
from .model import Matrix, MatrixCell, MatrixRow, Spread
from .points import CampaignData
from .verdict import MEASURE_LABEL, Entry, Verdict, _ratio, verdict_rows

__all__ = ["glance_matrix", "matrix_text", "row_label", "sentence"]

#: short names of the use cases (Software switches for NFV Table 3)
SHORT = {"p2p": "p2p", "p2v": "p2v", "v2p": "v2p", "v2v": "v2v", "loopback": "chain",
         "nvsn": "NvsN", "density": "density", "overlay": "overlay", "rtt": "rtt"}

#: the unit of each ranking measure in the matrix (and which way is better)
UNIT = {"cost": "cyc/frame ↓", "rate": "Mpps ↑"}


def _extras(extras: str) -> str:
    """"vnfs=1 pairs=2" -> "1 VNF, 2 pairs"."""
    out = []
    for part in extras.split():
        k, _, v = part.partition("=")
        if k == "vnfs":
            out.append(f"{v} VNF" + ("s" if v != "1" else ""))
        elif k in ("pairs", "ports", "flows"):
            out.append(f"{v} {k}")
        else:
            out.append(part)
    return ", ".join(out)


def _port(v: Verdict) -> str:
    if v.use_case.endswith("]") and "[" in v.use_case:
        return v.use_case.rsplit("[", 1)[1][:-1]
    return "veth"


def row_label(v: Verdict) -> str:
    """"v2v memif 64 B", "chain (1 VNF) memif 64 B", "p2p veth 1518 B bi"."""
    scen = SHORT.get(v.scenario, v.scenario)
    ex = _extras(v.extras)
    return (f"{scen}{f' ({ex})' if ex else ''} {_port(v)} {v.frame_size_b} B"
            + (" bi" if v.direction == "bi" else ""))


def _value(e: Entry, measure: str) -> Spread | None:
    return e.rate if measure == "rate" else e.cost


def _show(x: Spread, measure: str) -> str:
    return fmt(x.median / 1e6, 3) if measure == "rate" else fmt(x.median, 3)


def _ranked(v: Verdict) -> list[Entry]:
    return [e for e in v.entries if e.measured and _value(e, v.measure) is not None]


def _to_best(e: Entry, best: Entry, measure: str) -> Spread | None:
    """e's measure over the best's, repetition by repetition where both have them."""
    if measure == "rate":
        a, b = e.by_rep_rate, best.by_rep_rate
    else:
        a, b = e.by_rep_cost, best.by_rep_cost
    ev, bv = _value(e, measure), _value(best, measure)
    if ev is None or bv is None:
        return None
    return _ratio(a, b, ev.median, bv.median, invert=False)


def _ahead(best: Entry, e: Entry, measure: str) -> tuple[int, int] | None:
    """In how many of the repetitions both have the best was ahead of e
    (lower cost, higher rate), and of how many; None with fewer than 2, or
    when they were level in every one."""
    a, b = (best.by_rep_rate, e.by_rep_rate) if measure == "rate" else (
        best.by_rep_cost, e.by_rep_cost)
    common = sorted(set(a) & set(b))
    if len(common) < 2 or all(a[i] == b[i] for i in common):
        return None
    won = sum(1 for i in common if (a[i] > b[i] if measure == "rate" else a[i] < b[i]))
    return won, len(common)


def _cell(e: Entry, v: Verdict, best: Entry | None, hz: float) -> MatrixCell:
    label = MEASURE_LABEL.get(v.measure, v.measure)
    if not e.measured:
        return MatrixCell(cls="failed" if e.limit == "failed" else "skipped",
                          title=f"{e.sut}: {e.note or e.limit}")
    val = _value(e, v.measure)
    parts = [f"{e.sut}"]
    if e.rate is not None:
        parts.append(f"R+ {fmt_spread(e.rate.scaled(1e-6))} Mpps (n={e.rate.n})")
    if e.cost is not None:
        proj = f", {fmt(hz / e.cost.median / 1e6, 2)} Mpps/core" if hz and e.cost.median else ""
        parts.append(f"capacity {fmt_spread(e.cost, 0)} cycles/frame{proj}")
    if e.cpu is not None or e.cpu_pct is not None:
        parts.append("CPU at this load " + (f"{fmt_spread(e.cpu, 0)} cycles/frame"
                                            if e.cpu else "–")
                     + (f" ({fmt(e.cpu_pct.median, 2)} % of a core)" if e.cpu_pct else ""))
    parts.append(f"limited by {e.limit}" + (f": {e.note}" if e.note else ""))
    if val is None:
        return MatrixCell(value="–", cls="unranked",
                          title="; ".join(parts) + f"; no {label} figure: not ranked")
    ratio = ""
    if best is not None and best is not e:
        r = _to_best(e, best, v.measure)
        ratio = f"{fmt(r.median, 3)}×" if r is not None else ""
    elif best is e:
        ratio = "best" if e.rank == "1" else "1×"
    if e.rank == "1":
        cls = "best"
    elif e.rank == "=1":
        cls = "tie"
    elif e.rank in ("–", ""):
        cls = "unranked"
    else:
        ranks = [x.rank.lstrip("=") for x in _ranked(v) if x.rank not in ("–", "")]
        cls = "last" if e.rank.lstrip("=") == max(ranks, key=int) else "mid"
    parts.insert(1, f"rank {e.rank} by {label}" + (f", {ratio} the best" if ratio
                                                  and ratio not in ("best", "1×") else ""))
    return MatrixCell(value=_show(val, v.measure), ratio=ratio, rank=e.rank, cls=cls,
                      title="; ".join(parts))


def sentence(v: Verdict) -> str:
    """One plain sentence: "v2v over memif, 64 B: testpmd first, turnoutd
    1.36× its cost, tied within spread (testpmd ahead in 2 of 3 interleaved
    repetitions)"."""
    ex = _extras(v.extras)
    scen = SHORT.get(v.scenario, v.scenario)
    head = (f"{scen}{f' ({ex})' if ex else ''} over {_port(v)}, {v.frame_size_b} B"
            + (", both ways" if v.direction == "bi" else ""))
    ranked = _ranked(v)
    missing = [e for e in v.entries if not e.measured]
    unvalued = [e for e in v.entries if e.measured and _value(e, v.measure) is None]
    what = "cost" if v.measure == "cost" else "rate"
    tail = []
    if unvalued:
        tail.append(", ".join(e.name or e.sut for e in unvalued) + " not ranked (no "
                    + MEASURE_LABEL.get(v.measure, v.measure) + " account)")
    if missing:
        tail.append(", ".join(f"{e.name or e.sut} {e.limit}" for e in missing))
    if not ranked:
        body = "nothing measured"
    elif any(e.rank in ("–", "") for e in ranked):
        body = "not ranked (one repetition): " + ", ".join(
            f"{e.name or e.sut} {_show(_value(e, v.measure), v.measure)}"  # type: ignore[arg-type]
            for e in ranked) + (" cycles per frame" if v.measure == "cost" else " Mpps")
    else:
        best = ranked[0]
        bits = [f"{best.name or best.sut} first"]
        for e in ranked[1:]:
            r = _to_best(e, best, v.measure)
            b = f"{e.name or e.sut} {fmt(r.median, 3)}× its {what}" if r else f"{e.name}"
            if e.rank == best.rank and e.rank.startswith("="):
                b += ", tied within spread"
                if (w := _ahead(best, e, v.measure)) is not None:
                    b += (f" ({best.name or best.sut} ahead in {w[0]} of {w[1]} "
                          "interleaved repetitions)")
            bits.append(b)
        body = "; ".join(bits) if len(bits) > 2 else ", ".join(bits)
        if len(ranked) == 1:
            body = f"{best.name or best.sut} alone"
        if any(e.apart and e.apart[0] for e in ranked) and len(
                {e.apart for e in ranked}) > 1:
            # where the host put the virtual CPUs decides shared-memory costs
            # several times over (measure/placement.py): said where the SUTs
            # of the row did not all run in the same placements
            tail.append("the host placed the tester's and the SUT's vCPUs apart in "
                        + ", ".join(f"{e.name or e.sut}'s {e.apart[0]} of {e.apart[1]}"
                                    for e in ranked if e.apart)
                        + " repetitions")
    return f"{head}: {body}" + ("; " + "; ".join(tail) if tail else "") + "."


def _columns(data: CampaignData, rows: list[Verdict]) -> list[str]:
    names = {e.name or e.sut for v in rows for e in v.entries} - set(data.reference_suts)
    spec = data.campaign.spec if isinstance(data.campaign.spec, dict) else {}
    order = [s for s in (spec.get("matrix") or {}).get("suts", []) if isinstance(s, str)]

    def key(n: str) -> tuple[int, str]:
        base = n.split(" (", 1)[0]
        return (order.index(base) if base in order else len(order), n)

    return sorted(names, key=key)


def glance_matrix(data: CampaignData, rows: list[Verdict] | None = None) -> Matrix:
    """The verdict matrix of one campaign (see the module doc)."""
    from .verdict import _hz

    rows = verdict_rows(data) if rows is None else rows
    cols = _columns(data, rows)
    hz = _hz(data)
    m = Matrix(
        key="verdict-matrix", title="The verdict at a glance", columns=cols,
        note=("Each cell: the SUT's rank, its value of the row's measure (median over "
              "repetitions) and its ratio to the best. Capacity (cyc/frame ↓): the SUT's own "
              "account of the cycles it spent working on frames, idle handling left out for "
              "every SUT, ranked wherever the tester or the scheduler limited a SUT; R+ "
              "(Mpps ↑) where every SUT set its own rate. Colours: green first, light green "
              "tied first (ranges overlap), yellow between, red last, grey not ranked. An "
              "empty cell: the SUT has no place in that row (another kind of port). Hover a "
              "cell for its range, CPU at this load and what limited it; the tables below "
              "have every figure."),
    )
    order = {"veth": 0, "memif": 1, "vhost-user": 2}
    for v in sorted(rows, key=lambda v: (_rank_of(v.scenario), v.extras, order.get(_port(v), 3),
                                         v.direction, v.frame_size_b)):
        ranked = _ranked(v)
        best = ranked[0] if ranked and ranked[0].rank not in ("–", "") else None
        by = {e.name or e.sut: e for e in v.entries}
        mr = MatrixRow(label=row_label(v), measure=UNIT.get(v.measure, v.measure),
                       sentence=sentence(v))
        for c in cols:
            mr.cells.append(_cell(by[c], v, best, hz) if c in by else MatrixCell())
        m.rows.append(mr)
    return m


def _rank_of(scenario: str) -> tuple[int, str]:
    from .points import scenario_rank

    return scenario_rank(scenario)


def matrix_text(m: Matrix) -> str:
    """The matrix as plain text for the terminal, then one sentence per row."""
    from .summary import format_table

    rows = [[r.label, r.measure, *[c.text() or "·" for c in r.cells]] for r in m.rows]
    out = [m.title + " (rank value ratio-to-best; = tied within spread; · no place in the row)",
           format_table(["use case", "measure", *m.columns], rows), ""]
    out += [f"- {r.sentence}" for r in m.rows]
    return "\n".join(out)
