#!/usr/bin/env python3
"""v2v cost per frame over memif, turnoutd patch vs testpmd io: a thin
wrapper around the bench.

Runs ``turnout bench run campaigns/v2v.toml`` (turnout-gen memif endpoints
through each SUT's memif server ports, R+ with every SUT's busy cycles per
forwarded frame from its own accounting — turnoutd's worker counters,
testpmd ``--record-core-cycles`` — 3 interleaved repetitions) and prints,
per frame size, each SUT's cycles per frame and the ratio testpmd /
turnoutd paired by repetition, from the results database. The rate is
printed too, with whether the tester limited it (on 2 vCPUs it does: the
cycles per frame, not the rate, compare the switches; docs/bench.md).

    cargo build --release -p turnoutd -p turnout-gen
    sudo python3 scripts/bench/bench_v2v.py [--db results/v2v.db] [--campaign FILE]
    sudo python3 scripts/bench/bench_v2v.py --report-only --db results/v2v.db

The CPU of turnoutd's adaptive vs poll wake-up at low load is the
``turnoutd`` vs ``turnoutd-poll`` rows of the bench's latency and CPU
sections (campaigns/full.toml) and of ``make bench-wakeup``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tomllib
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "python" / "src"))
from turnout.results import ResultsDB  # noqa: E402

A, B = "testpmd", "turnoutd"  # the ratio printed: A / B


def ratios(db_path: Path, campaign: str) -> list[str]:
    """Lines of the summary: per frame size, each SUT's cycles per frame and
    R+ (median [min–max] over repetitions) and A / B paired by repetition."""
    with ResultsDB(db_path) as db:
        c = db.campaign(campaign)
        if c is None:
            raise SystemExit(f"no campaign {campaign!r} in {db_path}")
        rs = db.results(c.id, method="rplus", status="ok")
        skipped = [t for t in db.trials(c.id) if t.status != "ok"]
    cyc: dict[tuple[int, str], dict[int, float]] = defaultdict(dict)
    rate: dict[tuple[int, str], list[tuple[float, int]]] = defaultdict(list)
    for r in rs:
        if r.scenario != "v2v":
            continue
        if r.busy_cycles_per_frame:
            cyc[(r.frame_size_b, r.sut)][r.repetition] = float(r.busy_cycles_per_frame)
        rate[(r.frame_size_b, r.sut)].append((r.rate_total_pps, int(r.tester_bound or 0)))

    def span(xs: list[float], digits: int = 0) -> str:
        return (f"{statistics.median(xs):.{digits}f} [{min(xs):.{digits}f}–"
                f"{max(xs):.{digits}f}] n={len(xs)}")

    out = [f"campaign {campaign!r} run {c.id} ({c.status})"]
    for size in sorted({k[0] for k in rate}):
        out.append(f"{size} B:")
        for sut in (B, A):
            rr = rate.get((size, sut), [])
            cc = list(cyc.get((size, sut), {}).values())
            if not rr:
                out.append(f"  {sut:9} not measured")
                continue
            bound = sum(b for _, b in rr)
            out.append(f"  {sut:9} R+ {span([x / 1e6 for x, _ in rr], 2)} Mpps "
                       f"(tester-bound {bound}/{len(rr)}); busy cycles/frame "
                       + (span(cc) if cc else "– (no account)"))
        a, b = cyc.get((size, A), {}), cyc.get((size, B), {})
        common = sorted(set(a) & set(b))
        if common:
            out.append(f"  {A} / {B} cycles per frame, paired by repetition: "
                       + span([a[i] / b[i] for i in common], 2))
    for t in skipped:
        out.append(f"  {t.status}: {t.sut} {t.frame_size_b} B {t.method}: {t.reason}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=str(REPO / "results" / "v2v.db"))
    ap.add_argument("--campaign", default=str(REPO / "campaigns" / "v2v.toml"))
    ap.add_argument("--report-only", action="store_true",
                    help="print the latest run in --db without measuring")
    args = ap.parse_args()
    db = Path(args.db)
    if not args.report_only:
        db.parent.mkdir(parents=True, exist_ok=True)
        rc = subprocess.call([sys.executable, "-m", "turnout.cli", "bench", "run",
                              args.campaign, "--db", str(db), "--no-progress"],
                             env={**os.environ,
                                  "PYTHONPATH": str(REPO / "python" / "src")})
        if rc != 0:
            return rc
    name = tomllib.loads(Path(args.campaign).read_text())["campaign"]["name"]
    print("\n".join(ratios(db, name)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
