"""``turnout bench run CAMPAIGN.toml [--db F] [--resume]``."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from typing import Any

from ..cli import Command
from ..results import ResultsDB
from ..results.cli import DEFAULT_DB
from ..system.isolate import IsolationError, SutIsolation
from .runner import run_campaign
from .spec import CampaignError, WorkItem, load

__all__ = ["COMMANDS"]


def _configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("campaign", help="campaign TOML file")
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--resume", action="store_true",
                   help="continue the latest run of this campaign, skipping finished trials; "
                        "only a run of the same campaign file on the same commit and host "
                        "(otherwise a new run starts, and says why)")
    p.add_argument("--dry-run", action="store_true", help="list the work items and exit")
    p.add_argument("--no-progress", action="store_true", help="plain log lines, no bar")


def _describe(item: WorkItem) -> str:
    p = item.point
    s = f"{item.sut} {p.scenario}/{p.direction} {p.frame_size_b}B"
    if p.virtual_port:
        s += f" [{p.virtual_port}]"
    if p.scenario == "loopback":
        s += f" vnfs={p.vnfs}"
    if p.scenario == "density":
        s += f" ports={p.ports}"
    if p.scenario == "nvsn":
        s += f" pairs={p.pairs}"
    arg = f" x{item.arg:g}" if item.method == "latency" else (
        f" @{item.arg:g}pps" if item.method == "fixed" else "")
    return f"{s} {item.method}{arg} rep{item.repetition}"


def _run(args: argparse.Namespace) -> int:
    try:
        spec = load(args.campaign)
    except CampaignError as e:
        print(f"turnout bench: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        for item in spec.work():
            print(_describe(item))
        print(f"{len(spec.work())} work items")
        return 0
    from ..bench import RealBench, campaign_layout

    _recover_isolation()
    with contextlib.ExitStack() as stack:
        remote = None
        if spec.location == "remote":
            remote = _remote_setup(spec, args)
            if remote is None:
                return 2
            stack.enter_context(remote)  # bye to every agent on every way out
        bench = RealBench(spec=spec, remote=remote)
        if spec.isolate_sut_cpus and remote is not None:
            # on the SUT's host, by its agent: restored on every way out
            # (hosts/agent.py), the restore file in that host's state dir
            from ..hosts.base import HostError

            try:
                bench.isolation = remote.isolate()
            except HostError as e:
                if not spec.isolate_best_effort:
                    print(f"turnout bench: isolate_sut_cpus: {e}", file=sys.stderr)
                    return 2
                _say_not_isolated(e)
                return _run_with(args, spec, bench)
            _say_isolation(bench.isolation)
            rc = _run_with(args, spec, bench)
            try:
                problems = remote.unisolate()
            except HostError as e:  # its agent puts it back when it notices the controller gone
                problems = [str(e)]
            for p in problems:
                print(f"turnout bench: isolate_sut_cpus: could not restore {p} on host "
                      f"{remote.rs.sut_host} (its next bench agent tries again)",
                      file=sys.stderr)
            return rc
        # testpmd's and OVS-DPDK's hugepages stay in the pool between their
        # runs (testbed/state.py HugepageHold: given back to the kernel
        # after each run, they were reported to the hypervisor and cost
        # the next SUT's trial steal time)
        from ..testbed.state import holding_hugepages

        stack.enter_context(holding_hugepages())
        iso: SutIsolation | None = None
        if spec.isolate_sut_cpus:
            try:
                iso = stack.enter_context(_isolation(campaign_layout(spec).sut,
                                                     spec.isolate_processes))
            except (IsolationError, OSError, ValueError) as e:  # ValueError: LayoutError
                if not spec.isolate_best_effort or isinstance(e, ValueError):
                    print(f"turnout bench: isolate_sut_cpus: {e}", file=sys.stderr)
                    return 2
                _say_not_isolated(e)
            else:
                bench.isolation = iso.summary()
                _say_isolation(bench.isolation)
        rc = _run_with(args, spec, bench)
        if iso is not None:
            stack.close()
            for p in iso.restore_problems:  # the restore file stays: the next run retries
                print(f"turnout bench: isolate_sut_cpus: could not restore {p} (the next "
                      "`turnout bench run` or `bench cleanup` tries again)", file=sys.stderr)
        return rc


def _remote_setup(spec: Any, args: argparse.Namespace) -> Any:
    """Check every host of a remote campaign (turnout.hosts.remote); when
    one has a problem, print every problem (each names its host) and return
    None: the campaign does not start and nothing was started anywhere.
    Otherwise put the builds on the hosts, start their agents and return
    the RemoteSetup."""
    from pathlib import Path

    from ..hosts.base import HostError
    from ..hosts.remote import RemoteSetup
    from ..measure.gen import find_gen

    db = Path(args.db)
    remote = RemoteSetup(spec, find_gen(allow_pygen=False) or [], _turnoutd_builds(spec),
                         logs=db.with_name(f"{db.stem}-remote-logs"))
    problems = remote.preflight()
    if problems:
        print("turnout bench: the remote campaign does not start (nothing was started on "
              "any host):", file=sys.stderr)
        for p in problems:
            print(f"  {p}", file=sys.stderr)
        return None
    for w in remote.warnings:
        print(f"turnout bench: warning: {w}", file=sys.stderr)
    try:
        remote.prepare()
    except HostError as e:
        remote.close()
        print(f"turnout bench: preparing the hosts: {e}", file=sys.stderr)
        return None
    for w in remote.recovered():
        print(f"turnout bench: warning: {w}", file=sys.stderr)
    for name, h in remote.summary().items():
        builds = ", ".join(f"{b} {v['how']} {v['path']}" for b, v in h["builds"].items())
        print(f"host {name} ({h['ssh']}, {', '.join(h['roles'])}): {h['cpu_model']}, kernel "
              f"{h['kernel']}, CPUs {h['online']}; {builds or 'no build'}", file=sys.stderr)
    print(f"the hosts' logs go to {remote.logs_dir}", file=sys.stderr)
    return remote


def _turnoutd_builds(spec: Any) -> list[str]:
    """The turnoutd executables a campaign's SUTs run (variants may name another build)."""
    from ..sut.turnoutd import Turnoutd

    out = []
    for name in spec.suts:
        sut = spec.make_sut(name)
        if isinstance(sut, Turnoutd):
            out.append(str(sut.binary))
    return out


def _recover_isolation() -> None:
    """A run that died with the SUT's CPUs isolated left its restore file:
    warn and put everything back (system/isolate.py)."""
    from ..system.isolate import recover_stale
    from ..testbed.state import state_dir

    if os.geteuid() != 0:
        return
    for line in recover_stale(state_dir()):
        print(f"turnout bench: warning: {line}", file=sys.stderr)


def _isolation(sut: tuple[int, ...],
               processes: bool = True) -> contextlib.AbstractContextManager[SutIsolation]:
    from ..campaign.layout import available_cpus
    from ..testbed.state import state_dir

    if os.geteuid() != 0:
        raise IsolationError("needs root")
    return SutIsolation(set(sut), set(available_cpus()), state_dir(), processes=processes)


def _say_not_isolated(e: Exception) -> None:
    """``isolate_sut_cpus = "auto"`` on a machine that does not allow it."""
    print(f"turnout bench: isolate_sut_cpus = \"auto\": not isolating the SUT's CPUs ({e}); "
          "the campaign runs without (its report says isolation off)", file=sys.stderr)


def _say_isolation(s: dict[str, Any]) -> None:
    """One paragraph on stderr: what moved off the SUT's CPUs and what stayed."""
    on = f" on host {s['host']}" if s.get("host") else ""
    share = "its agent's and VNFs' share" if on else "the tester's share"
    print(f"isolate_sut_cpus{on}: moved {len(s['moved'])} items off CPU {s['sut_cpus']} onto "
          f"CPU {s['to_cpus']} ({share} of it rises): {', '.join(s['moved'][:12])}"
          + (" ..." if len(s["moved"]) > 12 else ""), file=sys.stderr)
    for n in s["not_moved"]:
        print(f"  not moved ({n['why']}): {', '.join(n['what'])}", file=sys.stderr)


def _run_with(args: argparse.Namespace, spec: Any, bench: Any) -> int:
    with ResultsDB(args.db) as db:
        if args.no_progress or not sys.stderr.isatty():
            t0 = time.monotonic()

            def progress(done: int, total: int, item: WorkItem | None, msg: str) -> None:
                if item is None and not msg:
                    return
                el = time.monotonic() - t0
                eta = el / max(done, 1) * (total - done) if done else 0
                what = msg or (_describe(item) if item is not None else "")
                print(f"[{done}/{total} eta {eta:.0f}s] {what}",
                      file=sys.stderr, flush=True)

            c = run_campaign(spec, db, bench, resume=args.resume, progress=progress)
        else:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                          TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn()) as bar:
                task = bar.add_task(spec.name, total=len(spec.work()))

                def progress(done: int, total: int, item: WorkItem | None, msg: str) -> None:
                    if msg and item is None and total == 0:
                        bar.console.print(msg)  # what the run decided (resume or not)
                    bar.update(task, completed=done,
                               description=_describe(item) if item else spec.name)

                c = run_campaign(spec, db, bench, resume=args.resume, progress=progress)
        counts: dict[str, int] = {}
        for t in db.trials(c.id):
            counts[t.status] = counts.get(t.status, 0) + 1
        print(f"campaign {c.name} (id {c.id}) {c.status}: "
              + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
              + f"; results in {args.db}")
        for t in db.trials(c.id, status=["skipped", "failed"])[:20]:
            print(f"  {t.status}: {t.sut} {t.scenario}/{t.point.direction} {t.method}: {t.reason}")
    return 0 if c.status == "done" else 1


def _configure_cleanup(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dry-run", action="store_true",
                   help="list the leftover state files and what they hold, remove nothing")


def _cleanup(args: argparse.Namespace) -> int:
    """Remove what crashed runs left (their state files in the state dir);
    runs whose owner is still alive are left alone."""
    from ..testbed.state import RunState, cleanup_stale, state_dir

    d = state_dir()
    files = sorted(d.glob("*.json")) if d.is_dir() else []
    stale = []
    for f in files:
        try:
            st = RunState.load(f)
        except (OSError, ValueError, TypeError) as e:
            print(f"turnout bench cleanup: unreadable state file {f}: {e}", file=sys.stderr)
            continue
        if st.owner_alive():
            print(f"{f.name}: run {st.prefix} is still running (pid {st.owner_pid}), left alone")
            continue
        stale.append(st)
        print(f"{f.name}: leftovers of run {st.prefix}: {len(st.netns)} namespaces, "
              f"{len(st.links)} links, {len(st.pids)} processes, {len(st.mounts)} mounts, "
              f"{len(st.hugepages)} hugepage reservations, {len(st.dirs)} dirs")
    if os.geteuid() == 0 and not args.dry_run:
        _recover_isolation()
    if args.dry_run or not stale:
        if not stale:
            print(f"nothing to clean up in {d}")
        return 0
    if os.geteuid() != 0:
        print("turnout bench cleanup: needs root", file=sys.stderr)
        return 1
    for line in cleanup_stale():
        print(f"removed {line}")
    return 0


def _configure_timing(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--campaign", help="campaign name or id (default: the latest run)")


def _timing(args: argparse.Namespace) -> int:
    """Where a campaign run's wall time went (campaign/timing.py), read-only."""
    import sqlite3

    from .timing import by_group, cells, read_db

    try:
        name, t0, t1, trials = read_db(args.db, args.campaign)
    except (KeyError, OSError, ValueError, sqlite3.Error) as e:
        print(f"turnout bench timing: {e}", file=sys.stderr)
        return 1
    cs = cells(trials, t0)
    total = sum(c.wall_s for c in cs)
    span = f"{t1 - t0:.0f} s" if t1 is not None else "unfinished"
    print(f"campaign {name}: run span {span}, sessions {total:.0f} s "
          f"({len(trials)} trials)")
    print(f"{'sut':14s} {'scenario':10s} {'port':10s} {'wall s':>7s} {'window s':>8s} "
          f"{'trials':>6s} {'sessions':>8s}")
    for c in cs:
        print(f"{c.sut:14s} {c.scenario:10s} {c.virtual_port or '-':10s} {c.wall_s:7.1f} "
              f"{c.window_s:8.1f} {c.trials:6d} {c.sessions:8d}")
    print("per scenario | port:")
    for g, w in by_group(cs).items():
        print(f"  {g:24s} {w:7.1f} s")
    return 0


def _configure_ab(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", default=DEFAULT_DB, help=f"results database (default {DEFAULT_DB})")
    p.add_argument("--campaign", help="campaign name or id (default: the latest run)")
    p.add_argument("--after", help="the SUT of this build (default: turnoutd, or the SUT "
                   "beside the campaign's one NAME-before)")
    p.add_argument("--before", help="the other build's variant (default: turnoutd-before, or "
                   "the campaign's one SUT named NAME-before)")


def _ab(args: argparse.Namespace) -> int:
    """After/before per cell of a campaign that ran two builds (report/ab.py)."""
    from ..report.ab import ab_load_table, ab_table, default_pair
    from ..report.campaign import wall_time
    from ..report.points import load_campaign
    from ..report.summary import format_table

    try:
        with ResultsDB(args.db) as db:
            data = load_campaign(db, args.campaign)
            ran = sorted({r.sut for r in data.ok_results} | {t.sut for t in data.ok_trials})
            pair = default_pair(ran) or ("turnoutd", "turnoutd-before")
            after, before = args.after or pair[0], args.before or pair[1]
            t = ab_table(data, after, before)
            lt = ab_load_table(data, after, before)
            versions = {s.name: s.version for s in db.suts(data.campaign.id)
                        if s.name in (after, before)}
            host = db.host(data.campaign.host_id) if data.campaign.host_id else None
    except (KeyError, OSError) as e:
        print(f"turnout bench ab: {e}", file=sys.stderr)
        return 1
    c = data.campaign
    load = host.extra.get("loadavg") if host is not None else None
    print(f"campaign {c.name} (run {c.id}, {c.status}), wall time {wall_time(data)}"
          + (f", load average at its start {load[0]:.2f}" if load else ""))
    for name in (after, before):
        print(f"  {name}: {versions.get(name, 'not run')}")
    if not t.rows and not lt.rows:
        print(f"turnout bench ab: nothing measured on both {after} and {before} (the "
              f"campaign ran: {', '.join(ran) or 'nothing'}; --after/--before name them)",
              file=sys.stderr)
        return 1
    if t.rows:
        print(t.title)
        print(format_table(t.columns, t.rows))
        print(t.note)
    if lt.rows:
        print(lt.title)
        print(format_table(lt.columns, lt.rows))
        print(lt.note)
    return 0


COMMANDS = [
    Command("bench run", "run (or resume) a campaign", _configure, _run),
    Command("bench cleanup", "remove what a crashed run left (namespaces, processes, "
            "hugepages, mounts)", _configure_cleanup, _cleanup),
    Command("bench ab", "after/before per cell of a campaign that ran two builds of a SUT "
            "(make bench-ab)", _configure_ab, _ab),
    Command("bench timing", "where a campaign run's wall time went, per SUT x scenario "
            "(read-only)", _configure_timing, _timing),
]
