"""Runs a campaign: work items → trials and results in the database.

Resumable: every finished work item is in the database under its key, and
a resumed run skips those keys — but only a run of the same campaign file
on the same software and host (``resume_key``: the git commit, the tools'
versions, the host's CPU, kernel and name, the campaign's content). Results
of other software or another host are never mixed into a run: a resume
across such a change starts a new run, and says why. A search interrupted
half-way is marked ``interrupted`` (its trials stay) and run again. Work
items of one test point on one SUT share one set-up of the testbed (a
*session*).

Every load and rate here is the aggregate over all streams of a point
(docs/bench.md, "Rates"): a latency trial at 0.5 × R+ offers half of R+ in
total, whatever the number of streams.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Protocol

from ..measure.counts import Measurer, TrialCounts
from ..measure.gen import PeerAbsent
from ..measure.stats import gbps
from ..results import Campaign, Result, ResultsDB, Sut, Trial
from ..results.models import overlay_host_columns
from ..scenarios import Point, Unsupported
from ..search import MlrGoals, ndr_pdr, rplus
from ..search.base import LoggingMeasurer, SearchResult
from .spec import CampaignSpec, WorkItem, topology_key

__all__ = ["Bench", "Session", "SkipSession", "resume_key", "run_campaign"]


class SkipSession(Exception):
    """The session cannot run (SUT missing, scenario unsupported): skip its
    items. ``virtual_port``: the kind of virtual port the cell has (or
    would have), stored with the skipped items, as a session that never
    came up cannot say ("" = none or unknown)."""

    def __init__(self, reason: str, virtual_port: str = "") -> None:
        super().__init__(reason)
        self.virtual_port = virtual_port


@dataclass
class Session:
    """A SUT set up for one test point. ``retarget`` (when given) moves the
    session to another point of the same testbed (``topology_key``): a new
    frame size, flow count or burst for the tester."""

    measurer: Measurer
    sut: Sut
    virtual_port: str = ""
    retarget: Callable[[Point], None] | None = None
    #: restarts the SUT on the same testbed after its ports stopped taking
    #: peers (a trial failed with ``PeerAbsent``); returns what it did
    recover: Callable[[], str] | None = None
    #: a rule-update trial (measure/update.py: ``measure(duration_s,
    #: rate_pps)``, and ``measure_bulk(interface, n, rate_pps)`` for the
    #: campaign's ``update_bulk_flows``), at points of the ``rule_update``
    #: scenario on SUTs that have rules
    rule_update: Any = None
    #: the SUT adapter (sut/), for tests that look at the switch's own state
    adapter: Any = None


class Bench(Protocol):
    """Makes sessions. ``session`` raises SkipSession with the reason."""

    def host(self) -> Any: ...

    def session(
        self, sut: str, point: Point, spec: CampaignSpec
    ) -> contextlib.AbstractContextManager[Session]: ...


Progress = Callable[[int, int, WorkItem | None, str], None]


def _at(p: Point, virtual_port: str) -> Point:
    """The point as its trials and results store it: with the kind of
    virtual port its cell really had (``Session.virtual_port``)."""
    return replace(p, virtual_port=virtual_port)


def _trial(item: WorkItem, c: TrialCounts, ctx: dict[str, Any], method: str,
           result_id: int | None = None, key: str | None = None,
           load_fraction: float | None = None) -> Trial:
    p = item.point
    lat = c.latency_ns
    extra = dict(c.extra)
    if ctx.get("recovered"):
        extra["recovered"] = ctx["recovered"]
    if "rplus_tester_bound" in ctx and load_fraction is not None:
        # a latency load is a fraction of R+: say when that R+ was the tester's
        extra["rplus_tester_bound"] = ctx["rplus_tester_bound"]
    per_host = overlay_host_columns(c.extra.get("overlay_hosts"))  # scenario overlay
    return Trial(
        campaign_id=ctx["campaign_id"], sut_id=ctx["sut_id"], host_id=ctx["host_id"],
        result_id=result_id, key=key or item.key, sut=item.sut,
        point=_at(p, ctx["virtual_port"]), method=method, load_fraction=load_fraction,
        offered_total_pps=c.offered_total_pps,
        tx_total_pps=c.tx_total_pps, streams=c.streams, repetition=item.repetition,
        sent=c.sent, received=c.received, lost=c.lost, duplicated=c.duplicated,
        reordered=c.reordered, unsent=c.unsent, vnf_dropped=c.vnf_dropped,
        loss_ratio=c.loss_ratio, rx_total_pps=c.rx_total_pps,
        gbps=gbps(c.rx_total_pps, p.frame_size_b),
        latency_min_ns=lat.get("min"), latency_mean_ns=lat.get("mean"),
        latency_p50_ns=lat.get("p50"), latency_p90_ns=lat.get("p90"),
        latency_p99_ns=lat.get("p99"), latency_p999_ns=lat.get("p999"),
        latency_max_ns=lat.get("max"), latency_cdf=c.latency_cdf, jitter_ns=c.jitter_ns,
        cpu=c.cpu, cycles_per_packet=c.cycles_per_packet,
        busy_cycles_per_frame=c.busy_cycles_per_frame,
        tester_bound=None if c.tester_bound is None else int(c.tester_bound),
        update_first_ns=c.update_first_ns, update_last_ns=c.update_last_ns,
        overlay_a_cycles_per_frame=per_host["overlay_a_cycles_per_frame"],
        overlay_b_cycles_per_frame=per_host["overlay_b_cycles_per_frame"], status="ok",
        started_at=ctx.get("t", time.time()), duration_s=c.duration_s, extra=extra,
    )


def _result(item: WorkItem, ctx: dict[str, Any], method: str, key: str) -> Result:
    p = item.point
    return Result(
        campaign_id=ctx["campaign_id"], sut_id=ctx["sut_id"], host_id=ctx["host_id"], key=key,
        sut=item.sut, point=_at(p, ctx["virtual_port"]), method=method,
        repetition=item.repetition, status="running", started_at=time.time(),
    )


def _skip(db: ResultsDB, item: WorkItem, ctx: dict[str, Any], status: str, reason: str,
          key: str | None = None, method: str | None = None,
          extra: dict[str, Any] | None = None) -> None:
    p = item.point
    db.add_trial(Trial(
        campaign_id=ctx["campaign_id"], sut_id=ctx.get("sut_id"), host_id=ctx["host_id"],
        key=key or item.key, sut=item.sut,
        point=_at(p, ctx.get("virtual_port", "") or p.virtual_port), method=method or item.method,
        load_fraction=item.arg if item.method in ("latency", "sweep") else None,
        offered_total_pps=item.arg if item.method in ("fixed", "rule_update") else 0.0,
        repetition=item.repetition,
        status=status, reason=reason, started_at=time.time(), extra=extra or {},
    ))


def _rplus_of(db: ResultsDB, campaign_id: int, item: WorkItem) -> Result | None:
    """The R+ result (aggregate rate) of this item's point and repetition."""
    key = WorkItem(item.sut, item.point, "rplus", item.repetition).key
    rs = db.results(campaign_id, key=key, status="ok")
    return rs[-1] if rs else None


def _search(db: ResultsDB, spec: CampaignSpec, item: WorkItem, session: Session,
            ctx: dict[str, Any], done: set[str]) -> None:
    """R+ or NDR/PDR for one item (NDR and PDR are searched together)."""
    cid = ctx["campaign_id"]
    if item.method == "rplus":
        methods = ["rplus"]
    else:
        methods = [m for m in ("ndr", "pdr") if m in spec.methods]
    keys = {m: WorkItem(item.sut, item.point, m, item.repetition).key for m in methods}
    results = {m: _result(item, ctx, m, keys[m]) for m in methods if keys[m] not in done}
    if not results:
        return
    for r in results.values():
        db.add_result(r)
    first = next(iter(results.values()))

    def store(c: TrialCounts) -> None:
        db.add_trial(_trial(item, c, ctx, first.method, result_id=first.id,
                            key=f"{first.key}/t{first.trials_count}"))
        first.trials_count += 1

    logm = LoggingMeasurer(session.measurer, on_trial=store)
    t0 = time.time()
    found: dict[str, SearchResult]
    try:
        if item.method == "rplus":
            found = {"rplus": rplus(logm, spec.duration_s)}
        else:
            prev = _rplus_of(db, cid, item)
            rp = prev.rate_total_pps if prev is not None else 0.0
            if rp <= 0:
                rp = rplus(logm, spec.duration_s).rate_total_pps
            # both aggregate: 1.1 × R+ over all streams
            max_load = spec.max_load_pps or max(rp * 1.1, spec.min_load_pps * 2)
            goals = MlrGoals(duration_sum_s=spec.mlr_duration_sum_s,
                             exceed_ratio=spec.mlr_exceed_ratio,
                             initial_trial_s=spec.mlr_initial_trial_s,
                             warmup_s=spec.mlr_warmup_s)
            ndr, pdr = ndr_pdr(logm, max_load_pps=max_load, duration_s=spec.duration_s,
                               min_load_pps=spec.min_load_pps, relative_width=spec.search_width,
                               strategy=spec.search, goals=goals)
            found = {"ndr": ndr, "pdr": pdr}
    except Exception as e:  # a trial failed: the search did not finish, say why
        for r in results.values():
            r.status = "failed"
            r.reason = f"{type(e).__name__}: {e}"
            r.trials_count = first.trials_count
            r.duration_s = time.time() - t0
            db.update_result(r)
        raise
    for m, r in results.items():
        f = found[m]
        r.rate_total_pps = f.rate_total_pps
        r.loss_target = f.loss_target
        r.searcher = f.searcher
        r.rx_total_pps = f.at.rx_total_pps if f.at else 0.0
        r.gbps = gbps(r.rx_total_pps if m == "rplus" else f.rate_total_pps,
                      item.point.frame_size_b)
        r.tester_bound = None if f.tester_bound is None else int(f.tester_bound)
        if m == "rplus" and f.at is not None:
            r.busy_cycles_per_frame = f.at.busy_cycles_per_frame
        r.trials_count = first.trials_count
        r.status = "ok"
        r.duration_s = time.time() - t0
        r.extra = dict(f.extra)
        if f.at is not None:
            for k in ("tester_bound_why", "cost_source", "cost_why", "kernel_cycles_per_frame",
                      "kernel_s", "kernel_why", "kernel_cpus"):
                if f.at.extra.get(k):
                    r.extra[k] = f.at.extra[k]
            if "kick_cycles_per_frame" in f.at.extra:  # 0 is a figure (no kicks)
                r.extra["kick_cycles_per_frame"] = f.at.extra["kick_cycles_per_frame"]
        if r is not first:
            r.extra["trials_of"] = first.id
        db.update_result(r)
        done.add(r.key)


def resume_key(spec: CampaignSpec, host: Any) -> str:
    """What a run may be resumed on: the campaign's content, the git commit,
    every tool's version, and the host (name, CPU, cores, kernel). Load and
    pinning are not in it: they change from minute to minute."""
    ident = {
        "spec": spec.digest(),
        "git": getattr(host, "git_commit", ""),
        "tools": getattr(host, "tools", {}),
        "host": [getattr(host, k, "") for k in ("hostname", "cpu_model", "cores", "kernel")],
    }
    return hashlib.sha256(json.dumps(ident, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _why_not_resumable(prev: Campaign, key: str, db: ResultsDB) -> str:
    """Why an earlier run cannot be continued (empty when it can)."""
    if prev.resume_key == key:
        return ""
    if not prev.resume_key:
        return "it was made by an older turnout that did not record its software and host"
    old = db.host(prev.host_id) if prev.host_id else None
    return ("it ran on other software or another host"
            + (f" (commit {old.git_commit or '?'})" if old else ""))


def run_campaign(spec: CampaignSpec, db: ResultsDB, bench: Bench, *, resume: bool = False,
                 progress: Progress | None = None) -> Campaign:
    """Run (or resume) a campaign; return its database row. ``resume``
    continues the latest run of this campaign only when it was made of the
    same campaign file on the same software and host (``resume_key``);
    otherwise a new run starts, and the progress callback says why."""
    host = bench.host()
    host_id = db.add_host(host)
    key = resume_key(spec, host)
    campaign = db.campaign(spec.name) if resume else None
    if campaign is not None:
        why = _why_not_resumable(campaign, key, db)
        if why:
            if progress:
                progress(0, 0, None, f"not resuming run {campaign.id} of {spec.name!r}: {why}; "
                         "starting a new run")
            campaign = None
        elif progress:
            progress(0, 0, None, f"resuming run {campaign.id} of {spec.name!r} "
                     "(same campaign, software and host)")
    if campaign is None:
        campaign = Campaign(name=spec.name, spec=spec.raw, file=spec.file, host_id=host_id,
                            resume_key=key)
        db.add_campaign(campaign)
    else:
        db.mark_interrupted(campaign.id or 0)
        db.set_campaign_status(campaign.id or 0, "running")
    assert campaign.id is not None
    done = db.done_keys(campaign.id)
    items = spec.work()
    todo = [i for i in items if i.key not in done]
    total = len(items)
    finished = total - len(todo)
    if progress:
        progress(finished, total, None, f"{finished} of {total} already done")
    # group consecutive items of the same (sut, point, repetition) into sessions
    groups: list[list[WorkItem]] = []
    for it in todo:
        g = groups[-1][0] if groups else None
        if g is not None and (g.sut, topology_key(g.point), g.repetition) == (
                it.sut, topology_key(it.point), it.repetition):
            groups[-1].append(it)
        else:
            groups.append([it])
    status = "interrupted"
    try:
        for group in groups:
            first = group[0]
            ctx: dict[str, Any] = {"campaign_id": campaign.id, "host_id": host_id,
                                   "virtual_port": ""}
            try:
                with bench.session(first.sut, first.point, spec) as session:
                    ctx["sut_id"] = db.add_sut(session.sut)
                    ctx["virtual_port"] = session.virtual_port
                    current: Point | None = None if session.retarget else first.point
                    for item in group:
                        if item.key in done:
                            finished += 1
                            continue
                        if progress:
                            progress(finished, total, item, "")
                        try:
                            if item.point != current:
                                if session.retarget is None:
                                    raise SkipSession("this session cannot change its point")
                                session.retarget(item.point)
                                current = item.point
                            try:
                                _run_item(db, spec, item, session, ctx, done)
                            except PeerAbsent as e:
                                if session.recover is None:
                                    raise
                                # the SUT's port stopped answering (seen with
                                # testpmd's memif server): restart it once
                                what = session.recover()
                                ctx["recovered"] = f"{what} after: {e}"
                                if progress:
                                    progress(finished, total, item, f"retrying: {what}")
                                try:
                                    _run_item(db, spec, item, session, ctx, done)
                                finally:
                                    ctx.pop("recovered", None)
                        except (Unsupported, SkipSession) as e:
                            _skip(db, item, ctx, "skipped", str(e))
                        except Exception as e:  # a failed trial is recorded, the rest goes on
                            if isinstance(e, KeyboardInterrupt):
                                raise
                            _skip(db, item, ctx, "failed", f"{type(e).__name__}: {e}")
                        done.add(item.key)
                        finished += 1
            except (SkipSession, Unsupported) as e:
                if isinstance(e, SkipSession) and e.virtual_port and not ctx["virtual_port"]:
                    ctx["virtual_port"] = e.virtual_port
                for item in group:
                    if item.key not in done:
                        _skip(db, item, ctx, "skipped", str(e))
                        done.add(item.key)
                        finished += 1
            except KeyboardInterrupt:
                raise
            except Exception as e:  # setting up the session failed
                for item in group:
                    if item.key not in done:
                        _skip(db, item, ctx, "failed", f"setup: {type(e).__name__}: {e}")
                        done.add(item.key)
                        finished += 1
            if progress:
                progress(finished, total, None, "")
        status = "done"
    finally:
        db.mark_interrupted(campaign.id)
        db.set_campaign_status(campaign.id, status)
        campaign.status = status
    return campaign


def _run_item(db: ResultsDB, spec: CampaignSpec, item: WorkItem, session: Session,
              ctx: dict[str, Any], done: set[str]) -> None:
    ctx["t"] = time.time()
    if item.method in ("rplus", "ndr", "pdr"):
        _search(db, spec, item, session, ctx, done)
        return
    if item.method in ("latency", "sweep"):
        r = _rplus_of(db, ctx["campaign_id"], item)
        if r is None or r.rate_total_pps <= 0:
            raise SkipSession("no R+ for this point (its R+ failed or was skipped)")
        load = r.rate_total_pps * item.arg  # aggregate, like R+
        ctx["rplus_tester_bound"] = r.tester_bound
        c = session.measurer.measure(spec.duration_s, load)
        db.add_trial(_trial(item, c, ctx, item.method, load_fraction=item.arg))
        return
    if item.method == "rule_update":
        if session.rule_update is None:
            raise SkipSession(f"{item.sut} has no rules to update here")
        c = session.rule_update.measure(spec.duration_s, item.arg)
        db.add_trial(_trial(item, c, ctx, "rule_update"))
        ifaces = session.adapter.bulk_interfaces if session.adapter is not None else ()
        for n in spec.update_bulk_flows:
            for iface in ifaces:
                ctx["t"] = time.time()
                key = f"{item.key}/flow_mods/{iface}/{n}"
                try:
                    c = session.rule_update.measure_bulk(iface, n, item.arg)
                except Exception as e:  # recorded; the other sizes and interfaces go on
                    if isinstance(e, KeyboardInterrupt):
                        raise
                    _skip(db, item, ctx, "failed", f"{type(e).__name__}: {e}", key=key,
                          method="flow_mods", extra={"bulk_interface": iface, "bulk_flows": n})
                    continue
                db.add_trial(_trial(item, c, ctx, "flow_mods", key=key))
        return
    if item.method == "fixed":
        c = session.measurer.measure(spec.duration_s, item.arg)
        db.add_trial(_trial(item, c, ctx, "fixed"))
        return
    raise ValueError(f"unknown method {item.method!r}")


