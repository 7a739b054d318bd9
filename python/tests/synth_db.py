"""Synthetic results databases for the report, verdict and A/B tests: a
finished campaign and its R+ results, with values the tests invent (nothing
here is a measurement)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from turnout.results import Campaign, Result, ResultsDB

#: An R+ result: (sut, scenario, virtual_port, repetition, rate_total_pps,
#: busy_cycles_per_frame, tester_bound); rx_total_pps = rate_total_pps.
RplusRow = tuple[str, str, str, int, float, float | None, int | None]


def done_campaign(db: ResultsDB, name: str, spec: dict[str, Any] | None = None,
                  file: str | None = None, finished_at: float | None = None) -> int:
    """Add campaign ``name`` (file ``name``.toml unless given), started at
    1.7e9 and done; return its id."""
    return db.add_campaign(Campaign(name=name, spec=spec or {}, file=file or f"{name}.toml",
                                    started_at=1.7e9, finished_at=finished_at,
                                    status="done"))


def rplus_db(path: Path, name: str, rows: list[RplusRow], *, spec: dict[str, Any] | None = None,
             file: str | None = None, finished_at: float | None = None,
             pairs: int = 1) -> ResultsDB:
    """A new database at ``path`` with one done campaign ``name`` (see
    done_campaign) holding ``rows`` as R+ results of status ok, keys r0, r1,
    ... (``pairs`` stream pairs each). The caller closes it (``with``)."""
    db = ResultsDB(path)
    cid = done_campaign(db, name, spec, file, finished_at)
    for i, (sut, scen, vp, rep, rate, cost, tb) in enumerate(rows):
        db.add_result(Result.of(campaign_id=cid, key=f"r{i}", sut=sut, scenario=scen,
                             virtual_port=vp, method="rplus", repetition=rep, pairs=pairs,
                             rate_total_pps=rate, rx_total_pps=rate, status="ok",
                             tester_bound=tb, busy_cycles_per_frame=cost))
    return db


# ------------------------------------------------ a default-sized campaign
#: the SUTs of campaigns/default.toml, in its order
DEFAULT_SUTS = ("wire", "turnoutd", "bridge", "ovs", "ovs-dpdk", "testpmd")
#: which SUT runs which cell of it: (scenario, port) -> SUTs (the kernel
#: switches take veths where the others take memif)
DEFAULT_CELLS = {
    ("p2p", ""): ("wire", "turnoutd", "bridge", "ovs", "testpmd"),
    ("p2v", "memif"): ("wire", "turnoutd", "testpmd"),
    ("p2v", "veth"): ("bridge", "ovs"),
    ("v2v", "memif"): ("wire", "turnoutd", "testpmd"),
    ("v2v", "veth"): ("bridge", "ovs"),
    ("v2v", "vhost-user"): ("turnoutd", "ovs-dpdk", "testpmd"),
    ("loopback", "memif"): ("turnoutd", "testpmd"),
    ("loopback", "veth"): ("bridge", "ovs"),
    ("nvsn", "memif"): ("wire", "turnoutd", "testpmd"),
    ("nvsn", "veth"): ("bridge", "ovs"),
}
#: invented capacities (cycles per frame) and whether each polls (a whole core)
_CAP = {"turnoutd": 300.0, "bridge": 5200.0, "ovs": 4100.0, "ovs-dpdk": 480.0, "testpmd": 250.0}
_POLLS = {"turnoutd": False, "bridge": False, "ovs": True, "ovs-dpdk": True, "testpmd": True}
DPDK_REASON = ("the default campaign runs OVS-DPDK only in v2v over vhost-user: its veth cells "
               "use DPDK's net_af_packet, its slow path; campaigns/full.toml runs them")


def default_like(db: ResultsDB, name: str = "default") -> int:
    """A campaign shaped like the default one (campaigns/default.toml): every
    use case, 64 and 1518 B (chain and NvsN at 64 B), 3 repetitions, R+ with
    capacity and CPU, latency at 0.5 × R+ and a fixed 10 kpps, OVS-DPDK in
    v2v/vhost-user only (its other cells skipped with the real reason), the
    kernel switches skipped in the vhost-user cell. One fixed-rate trial of
    the bridge was refused (the tester sent 83 % of 10 kpps). Returns its id.
    The values are invented; nothing here is a measurement."""
    from turnout.results import Trial

    hz = 2.0e9
    cid = done_campaign(db, name, spec={"matrix": {"suts": list(DEFAULT_SUTS)}},
                        finished_at=1.7e9 + 760.0)
    n = 0
    for (scen, port), suts in DEFAULT_CELLS.items():
        sizes = (64,) if scen in ("loopback", "nvsn") else (64, 1518)
        extra_kw = {"vnfs": 1} if scen == "loopback" else {"pairs": 2} if scen == "nvsn" else {}
        for size in sizes:
            for rep, f in enumerate((0.97, 1.0, 1.03)):
                for sut in suts:
                    n += 1
                    key = f"{sut}|{scen}|{port}|{size}|{rep}"
                    if sut == "wire":
                        rate = 9e6 if port == "memif" else 0.9e6
                        cost = None
                    else:
                        cost = _CAP[sut] * f * (1.4 if size == 1518 else 1.0)
                        rate = min(hz / cost, 8e6 if port else 0.8e6)
                    tb = int(sut != "wire" and rate >= (8e6 if port else 0.8e6))
                    rid = db.add_result(Result.of(
                        campaign_id=cid, key=key, sut=sut, scenario=scen, frame_size_b=size,
                        virtual_port=port, method="rplus", repetition=rep,
                        rate_total_pps=rate, rx_total_pps=rate, status="ok", tester_bound=tb,
                        busy_cycles_per_frame=cost, started_at=1.7e9 + n, **extra_kw))
                    util = 1.0 if _POLLS.get(sut) or sut == "wire" else rate * (cost or 0) / hz
                    cpu = [] if sut in ("wire", "bridge") else [
                        {"role": "sut", "tid": 1, "name": "worker", "util": round(util, 3)}]
                    db.add_trial(Trial.of(
                        campaign_id=cid, result_id=rid, key=key, sut=sut, scenario=scen,
                        frame_size_b=size, virtual_port=port, method="rplus", repetition=rep,
                        offered_total_pps=0, tx_total_pps=rate, sent=int(rate * 0.4),
                        received=int(rate * 0.4), rx_total_pps=rate, duration_s=0.4,
                        cpu=cpu, cycles_per_packet=(util * hz / rate) if cpu else 0.0,
                        busy_cycles_per_frame=cost, tester_bound=tb, status="ok",
                        extra={"cycles_hz": hz, "tester_core_sharing": 1,
                               **({"cost_source": "kernel time of the SUT's CPUs",
                                   "cost_span_s": 0.4, "kernel_s": 0.4 * rate * (cost or 0) / hz}
                                  if sut == "bridge" else {})},
                        started_at=1.7e9 + n, **extra_kw))
                    for method, load, frac in (("fixed", 1e4, None), ("latency", rate / 2, 0.5)):
                        sent = int(load * 0.4)
                        refused = sut == "bridge" and method == "fixed" and scen == "v2v" \
                            and size == 64 and rep == 1
                        if refused:
                            sent = int(sent * 0.83)
                        u = 1.0 if _POLLS.get(sut) else 0.05 + load * (cost or 0) / hz
                        p99 = {"wire": 12e3, "turnoutd": 900e3, "bridge": 300e3, "ovs": 90e3,
                               "ovs-dpdk": 200e3, "testpmd": 40e3}[sut] * f
                        db.add_trial(Trial.of(
                            campaign_id=cid, key=f"{key}|{method}", sut=sut, scenario=scen,
                            frame_size_b=size, virtual_port=port, method=method,
                            load_fraction=frac, repetition=rep, offered_total_pps=load,
                            tx_total_pps=sent / 0.4, sent=sent, received=sent,
                            unsent=(int(load * 0.4) - sent) if refused else 0,
                            rx_total_pps=sent / 0.4, duration_s=0.4, latency_p50_ns=p99 / 3,
                            latency_p99_ns=p99, latency_max_ns=p99 * 2,
                            cpu=[] if sut in ("wire", "bridge") else [
                                {"role": "sut", "tid": 1, "name": "worker", "util": u}],
                            cycles_per_packet=(u * hz / load) if sut not in ("wire", "bridge")
                            else 0.0,
                            busy_cycles_per_frame=cost, tester_bound=0, status="ok",
                            extra={"cycles_hz": hz, "tx_attempts": sent,
                                   "tx_pushback": int(sent * 0.2) if refused else 0,
                                   **({"cost_source": "kernel time of the SUT's CPUs",
                                       "cost_span_s": 0.4,
                                       "kernel_s": 0.4 * load * (cost or 0) / hz}
                                      if sut == "bridge" else {})},
                            started_at=1.7e9 + n, **extra_kw))
        for size in sizes:
            if port in ("", "memif"):
                for rep in range(3):
                    n += 1
                    db.add_result(Result.of(
                        campaign_id=cid, key=f"ovs-dpdk|{scen}|{port}|{size}|{rep}",
                        sut="ovs-dpdk", scenario=scen, frame_size_b=size,
                        virtual_port=port, method="rplus",
                        repetition=rep, status="skipped", reason=DPDK_REASON,
                        started_at=1.7e9 + n, **extra_kw))
            elif port == "vhost-user":
                for sut in ("bridge", "ovs", "wire"):
                    for rep in range(3):
                        n += 1
                        db.add_result(Result.of(
                            campaign_id=cid, key=f"{sut}|{scen}|{port}|{size}|{rep}", sut=sut,
                            scenario=scen, frame_size_b=size, virtual_port=port,
                            method="rplus", repetition=rep, status="skipped",
                            reason=f"{sut} has no vhost-user ports (the vhost-user cell)",
                            started_at=1.7e9 + n))
    return cid
