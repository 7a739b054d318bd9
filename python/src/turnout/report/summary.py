"""The terminal summary printed after every campaign and by ``turnout report``."""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path
from typing import Any, TextIO

from ..results import ResultsDB
from .campaign import wall_time
from .formatting import fmt, fmt_pct, fmt_spread
from .model import spread_of
from .points import METHOD_LABEL, CampaignData, load_campaign, retried, sut_label, throughput_points
from .units import GBPS_DEFINITION, is_ethernet_path

__all__ = ["format_table", "print_summary", "summary_text"]


def format_table(columns: list[str], rows: list[list[str]]) -> str:
    """Plain-text table with aligned columns (no colours, safe to pipe)."""
    widths = [len(c) for c in columns]
    for r in rows:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    line = "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True))
    sep = "  ".join("-" * w for w in widths)
    body = ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
    return "\n".join([line.rstrip(), sep, *body])


def summary_text(data: CampaignData) -> str:
    """The summary of one loaded campaign as text."""
    c = data.campaign
    out = [
        f"campaign {c.name} (run {c.id}, {c.status}): "
        f"{len(data.ok_results)}/{len(data.results)} searches ok, "
        f"{len(data.ok_trials)}/{len(data.trials)} trials ok, wall time {wall_time(data)}",
    ]
    points = throughput_points(data)
    if points:
        rows = []
        for p in sorted(points, key=lambda p: (p.key.group(), -p.spread.median)):
            k = p.key
            mark = []
            if p.noisy:
                mark.append("~next")
            if p.unknown:
                mark.append("?next")
            if p.ratio_noisy:
                mark.append("~ref")
            if p.spread.n < 2:
                mark.append("n=1")
            if p.tester_bound:
                mark.append(f"tester{p.tester_bound}/{p.spread.n}")
            rows.append([k.scenario, k.point.direction, str(k.point.frame_size_b), k.extras(),
                         k.sut_label(), METHOD_LABEL.get(k.method, k.method), str(p.spread.n),
                         fmt_spread(p.mpps),
                         fmt_pct(p.spread.rel) if p.spread.n >= 2 else "?",
                         fmt(p.gbps.median)
                         + ("" if is_ethernet_path(k.point.virtual_port) else " L2"),
                         fmt_spread(p.ratio), " ".join(mark)])
        out += ["", "Throughput", format_table(
            ["scenario", "dir", "size", "point", "SUT", "method", "n", "Mpps [min-max]",
             "spread", "Gbps", "x ref", "mark"], rows),
            "Rates are aggregates over all streams of a point. mark: ~next = within noise "
            "of the next SUT below; ?next = cannot be ranked against it (one side has one "
            "repetition); ~ref = ratio to the reference (same path and port type) within "
            "noise; n=1 = one repetition, spread unknown; testerK/N = the tester, not the "
            "SUT, limited K of N repetitions (the rate is a lower bound of the SUT's).",
            GBPS_DEFINITION]
    lat = [t for t in data.ok_trials if t.method == "latency" and t.load_fraction is not None
           and t.latency_p99_ns is not None]
    if lat:
        by: dict[tuple[Any, ...], dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
        fractions = sorted({round(float(t.load_fraction), 4) for t in lat
                            if t.load_fraction is not None})
        for t in lat:
            assert t.load_fraction is not None and t.latency_p99_ns is not None  # filtered above
            label = sut_label(t.sut, t.point.virtual_port)
            key = (t.scenario, t.point.direction, int(t.point.frame_size_b), label)
            by[key][round(float(t.load_fraction), 4)].append(float(t.latency_p99_ns))
        rows = []
        for key, per in sorted(by.items()):
            rows.append([key[0], key[1], str(key[2]), key[3],
                         *[fmt_spread(spread_of(per[f]).scaled(1e-3)) if f in per else "–"
                           for f in fractions]])
        from .hosts import latency_label

        mode = latency_label(data)  # a remote campaign: the mode of every figure
        out += ["", "Latency p99 (µs) at fractions of R+" + (f" [{mode}]" if mode else ""),
                format_table(
            ["scenario", "dir", "size", "SUT", *[f"{fmt(f)}xR+" for f in fractions]], rows)]
    from .overlay import overlay_section

    ov = overlay_section(data)
    if ov.tables:
        ot = ov.tables[0]
        out += ["", ot.title, format_table([*ot.columns, "mark"], [
            [*row, flag] for row, flag in zip(ot.rows, ot.flags, strict=True)])]
    again = retried(data)
    failed = [r for r in data.results if r.status != "ok"] + \
        [t for t in data.trials if t.status != "ok" and t.result_id is None]
    kind = {id(r): "result" for r in data.results} | {id(t): "trial" for t in data.trials}
    bad = [x for x in failed if (kind[id(x)], x.id or 0) not in again]
    if failed:
        out += ["", f"Not measured: {len(bad)}"
                + (f" (and {len(failed) - len(bad)} failed attempts retried with success, "
                   "marked 'retried: ok')" if len(failed) > len(bad) else "")]
        rows = [[r.sut, r.scenario, r.point.direction, str(r.point.frame_size_b),
                 METHOD_LABEL.get(r.method, r.method),
                 r.status + (", retried: ok" if (kind[id(r)], r.id or 0) in again else ""),
                 r.reason or "–"]
                for r in failed[:20]]
        out.append(format_table(["SUT", "scenario", "dir", "size", "method", "status", "reason"],
                                rows))
        if len(failed) > 20:
            out.append(f"... and {len(failed) - 20} more (see the report)")
    from .glance import glance_matrix, matrix_text
    from .methods import rule_update_verdict_table
    from .regime import regime_table
    from .verdict import (
        cost_check_table,
        latency_trials_table,
        latency_verdict_table,
        refused_table,
        verdict_rows,
        verdict_table,
    )

    ut = rule_update_verdict_table(data)
    if not points and not lat and not bad and not ut.rows:
        out.append("no results in this campaign")

    vrows = verdict_rows(data)
    vt = verdict_table(data, vrows)
    if vt.rows:
        out += ["", vt.title, format_table(vt.columns, vt.rows), vt.note]
    ct = cost_check_table(data)
    if ct.rows:  # capacity next to its second source, the OS's CPU time
        out += ["", ct.title, format_table(ct.columns, ct.rows)]
    lt = latency_verdict_table(data)
    if lt.rows:
        out += ["", lt.title, format_table(lt.columns, lt.rows), lt.note]
    wt = regime_table(data)
    if wt.rows:  # how a SUT that can sleep ran, and its CPU next to the others'
        out += ["", wt.title, format_table(wt.columns, wt.rows),
                *[f"- {x}" for x in wt.sentences]]
    tt = latency_trials_table(data)
    if tt.rows:  # each trial's p99 next to what else ran on the SUT's CPU
        out += ["", tt.title, format_table(tt.columns, tt.rows)]
    rt = refused_table(data)
    if rt.rows:
        out += ["", rt.title, format_table(rt.columns, rt.rows)]
    if ut.rows:
        out += ["", ut.title, format_table(ut.columns, ut.rows), ut.note]
    m = glance_matrix(data, vrows)
    if m.rows:  # last, where a terminal shows it after a run
        out += ["", matrix_text(m)]
    return "\n".join(out) + "\n"


def print_summary(db: ResultsDB | str | Path, campaign: Any = None,
                  file: TextIO | None = None) -> None:
    """Print the summary table of one campaign (name, id or Campaign; None = latest).

    ``db`` is an open ResultsDB or the path of a database file. Raises
    KeyError when the campaign does not exist.
    """
    if not isinstance(db, ResultsDB):
        if not Path(db).exists():
            raise FileNotFoundError(f"no results database at {db}")
        with ResultsDB(db) as opened:
            print_summary(opened, campaign, file)
            return
    text = summary_text(load_campaign(db, campaign))
    (file or sys.stdout).write(text)
