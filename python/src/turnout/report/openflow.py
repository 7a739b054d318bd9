"""The report rows of the ``openflow`` scenario (`make
bench-flows`): per path, rule set, concurrent flows and SUT, R+ and the
SUT's own cost per frame at R+, with turnoutd's cost over OVS's on the same
path (the target: at most half), and where the cost goes: the SUT threads'
CPU time over the traffic window split into user and system (kernel) time
per frame, so the kernel's copy on an AF_XDP copy-mode port shows.

An openflow point is stored under the scenario ``openflow/rN/mM/oK`` (p2p
over veths) or ``openflow/v2v/rN/mM/oK`` (v2v over the result's
``virtual_port``: vhost-user or memif), ``Point.stored_scenario``: N rules
over M masks, the hit rule sending to K ports (K − 1 mirrors); with A ACL
rules above or below the hit rule, ``/aclA-above`` or ``/aclA-below`` after
it (turnout.ofrules). The rule set is also in columns of its own (``rules``,
``masks``, ``outputs``, ``acl``, ``acl_at``: TestPoint's fields; a database
from before them gets them from the name when it is opened, schema v5),
and this report reads those.

The OVS each path compares with is the one with that path's ports: OVS
userspace (dpif-netdev, ``afxdp`` ports) on p2p; OVS-DPDK (the same
dpif-netdev, ``dpdkvhostuser`` ports) on v2v/vhost-user; none on v2v/memif
(OVS has no memif ports)."""

from __future__ import annotations

from collections import defaultdict

from ..results import Result, Trial
from ..testpoint import openflow_fields
from .formatting import fmt, fmt_spread
from .model import Section, Spread, Table, spread_of
from .points import CampaignData, sut_label

__all__ = ["BASELINES", "cpu_split", "openflow_section", "openflow_table", "openflow_text",
           "parse_acl", "parse_label", "parse_path", "ratio_table"]

#: per path (the result's virtual_port; "" = p2p over veths): the SUT label
#: every cost on that path is taken against, and what it is
BASELINES: dict[str, tuple[str, str]] = {
    "": ("ovs", "OVS userspace (dpif-netdev, afxdp ports)"),
    "vhost-user": ("ovs-dpdk [vhost-user]",
                   "OVS-DPDK (dpif-netdev, dpdkvhostuser ports)"),
}
_NO_BASELINE = {"memif": "no OVS row: OVS has no memif ports"}


def parse_label(scenario: str) -> tuple[int, int, int] | None:
    """(rules, masks, outputs) of a stored openflow scenario, else None."""
    of = openflow_fields(scenario)
    return (of["rules"], of["masks"], of["outputs"]) if of else None


def _acl_text(acl: int, acl_at: str) -> str:
    return f"{acl} {acl_at}" if acl else "–"


def parse_acl(scenario: str) -> str:
    """The ACL rules of a stored openflow scenario as the report shows them:
    "1000 above", "1000 below", or "–" (none, or not an openflow scenario)."""
    of = openflow_fields(scenario)
    return _acl_text(of["acl"], of["acl_at"]) if of else "–"


def parse_path(scenario: str) -> str | None:
    """"p2p" or "v2v" of a stored openflow scenario, else None."""
    of = openflow_fields(scenario)
    return str(of["path"]) if of else None


def path_label(r: Result) -> str:
    """The row's path: "p2p veth", "v2v vhost-user", "v2v memif"."""
    path = parse_path(r.scenario) or "?"
    return f"{path} {r.point.virtual_port or 'veth'}"


def cpu_split(r: Result, trials: list[Trial]) -> tuple[float, float] | None:
    """(user, system) cycles per frame of the SUT's threads in the trial
    that set R+ (/proc utime and stime over the traffic window, at the TSC
    rate, over the frames received), or None without CPU samples."""
    ts = [t for t in trials if t.result_id == r.id and t.cpu and t.received > 0
          and float(t.extra.get("cycles_hz") or 0) > 0]
    if not ts:
        return None
    t = max(ts, key=lambda x: x.rx_total_pps)
    rows = [c for c in t.cpu if c.get("role", "sut") == "sut"]
    if not rows:
        return None
    hz = float(t.extra["cycles_hz"])
    user = sum(float(c.get("user_s", 0.0)) for c in rows) * hz / t.received
    sys = sum(float(c.get("sys_s", 0.0)) for c in rows) * hz / t.received
    return user, sys


def _rplus(data: CampaignData) -> list[Result]:
    # an openflow point's rule set is in its columns (TestPoint's fields)
    return [r for r in data.ok_results
            if r.method == "rplus" and r.point.scenario == "openflow" and r.point.outputs > 0]


_Key = tuple[str, int, int, int, str, int, int]


def _grouped(data: CampaignData) -> dict[_Key, dict[str, list[Result]]]:
    """(path, rules, masks, outputs, acl, size, flows) -> SUT label ->
    results. The path key is the virtual port ("" = p2p over veths)."""
    by: dict[_Key, dict[str, list[Result]]] = defaultdict(lambda: defaultdict(list))
    for r in _rplus(data):
        p = r.point
        path = p.virtual_port if parse_path(r.scenario) == "v2v" else ""
        by[(path, p.rules, p.masks, p.outputs, _acl_text(p.acl, p.acl_at), int(p.frame_size_b),
            int(p.flows))][sut_label(r.sut, p.virtual_port)].append(r)
    return by


def _cost(rs: list[Result]) -> Spread | None:
    c = [float(r.busy_cycles_per_frame) for r in rs if r.busy_cycles_per_frame]
    return spread_of(c) if c else None


def _order(k: _Key) -> tuple[object, ...]:
    path, rules, masks, outputs, acl, size, flows = k
    return (["", "vhost-user", "memif"].index(path) if path in ("", "vhost-user", "memif")
            else 9, path, outputs, masks, rules, acl != "–", acl, size, flows)


def _user(rs: list[Result], trials: list[Trial]) -> Spread | None:
    """The SUT threads' user-space cycles per frame over its repetitions."""
    split = [s for r in rs if (s := cpu_split(r, trials)) is not None]
    return spread_of([u for u, _ in split]) if split else None


def openflow_table(data: CampaignData) -> Table:
    """One row per (path, rule set, frame size, flows, SUT)."""
    t = Table(
        key="openflow-table", title="OpenFlow rule sets: rate and cost per frame",
        columns=["path", "rules", "masks", "outputs", "ACL", "flows", "size B", "SUT", "n",
                 "R+ Mpps [min–max]", "cost cyc/frame [min–max]", "CPU user cyc/frame",
                 "CPU sys cyc/frame", "sys %", "cost ÷ OVS (total)", "user ÷ OVS (own)"],
        note=("The same rules (turnout.ofrules) installed with ovs-ofctl -O OpenFlow13 "
              "add-flows into every SUT; the tester's flows all hit one rule of lowest "
              "priority, the others never match. Path: p2p veth (turnoutd AF_XDP, OVS "
              "userspace afxdp, OVS-DPDK net_af_packet) or v2v over vhost-user / memif "
              "ports (turnout-gen as the VMs; mirror ports of the same kind, each drained "
              "by a turnout-gen rx). Cost: the SUT's own account of busy cycles over the "
              "frames it received, at R+ (turnoutd: its workers' busy TSC cycles; OVS: the "
              "PMD threads' processing cycles). CPU user / sys: the SUT's threads' /proc "
              "utime and stime over the traffic window of the trial that set R+, at the "
              "TSC rate, per frame received (all CPU time, busy polling included, medians "
              "over repetitions); sys % = sys / (user + sys): the kernel's share, e.g. the "
              "copy of an AF_XDP copy-mode port. cost ÷ OVS: the median cost over the "
              "median of the OVS with the same path's ports — p2p: OVS userspace (ovs); "
              "v2v/vhost-user: OVS-DPDK (ovs-dpdk [vhost-user], the same dpif-netdev "
              "datapath); v2v/memif: none (OVS has no memif ports). Below 0.5 is issue "
              "16's target for turnoutd. tester: the tester, not the SUT, set the rate in "
              "some repetition. user ÷ OVS (own): the median CPU user cycles per frame over "
              "the same OVS's, the switches' own work without the kernel's (on veth the "
              "kernel's path is most of both costs, sys %); the headline ratio stays cost ÷ "
              "OVS (total). ACL: A ACL rules above or below the hit rule, which tell the "
              "tester's flows apart and match none of them (docs/bench.md)."),
    )
    for key, suts in sorted(_grouped(data).items(), key=lambda x: _order(x[0])):
        path, rules, masks, outputs, acl, size, flows = key
        base_label = BASELINES.get(path, ("", ""))[0]
        base = _cost(suts[base_label]) if base_label in suts else None
        base_user = _user(suts[base_label], data.ok_trials) if base_label in suts else None
        for label in sorted(suts, key=lambda s: (not s.startswith("turnoutd"), s)):
            rs = suts[label]
            rate = spread_of([r.rate_total_pps / 1e6 for r in rs])
            cost = _cost(rs)
            ratio = (fmt(cost.median / base.median) if cost is not None and base is not None
                     and base.median > 0 and label != base_label else "–")
            split = [s for r in rs if (s := cpu_split(r, data.ok_trials)) is not None]
            user = spread_of([u for u, _ in split]) if split else None
            sys = spread_of([k for _, k in split]) if split else None
            share = (f"{100.0 * sys.median / (user.median + sys.median):.0f}"
                     if user is not None and sys is not None
                     and user.median + sys.median > 0 else "–")
            uratio = (fmt(user.median / base_user.median) if user is not None
                      and base_user is not None and base_user.median > 0
                      and label != base_label else "–")
            t.rows.append([path_label(rs[0]), str(rules), str(masks), str(outputs), acl,
                           str(flows), str(size), label, str(len(rs)), fmt_spread(rate),
                           fmt_spread(cost), fmt_spread(user), fmt_spread(sys), share, ratio,
                           uratio])
            t.flags.append("tester" if any(r.tester_bound for r in rs) else "")
    return t


def ratio_table(data: CampaignData) -> Table:
    """Per path: turnoutd's cost over that path's OVS, over every point
    where both have a cost (median of the per-point ratios, min–max), and
    which OVS it is."""
    t = Table(
        key="openflow-ratio", title="turnoutd's cost ÷ OVS's, per path",
        columns=["path", "compared with", "points",
                 "turnoutd ÷ OVS (total) median [min–max]",
                 "turnoutd ÷ OVS (user, own) median [min–max]", "turnoutd sys %", "OVS sys %"],
        note=("Each point's total ratio is turnoutd's median own-account cost over the OVS's "
              "median at the same rule set, flows and size (table above); the target "
              "(at most 0.5) is on this headline ratio. The user ratio is the same over the "
              "SUT threads' CPU user cycles per frame: what the switches' own work compares "
              "at when the kernel's path (sys %, most of both on veth) is left out. sys %: the "
              "kernel's share of the SUT threads' CPU time, median over the points."),
    )
    per: dict[str, list[float]] = defaultdict(list)
    per_user: dict[str, list[float]] = defaultdict(list)
    shares: dict[tuple[str, str], list[float]] = defaultdict(list)
    labels: dict[str, str] = {}
    for key, suts in _grouped(data).items():
        path = key[0]
        labels.setdefault(path, path_label(next(iter(suts.values()))[0]))
        base_label = BASELINES.get(path, ("", ""))[0]
        mine = next((lab for lab in suts if lab.split(" ")[0] == "turnoutd"), None)
        for who, lab in (("turnoutd", mine), ("ovs", base_label)):
            if lab is None or lab not in suts:
                continue
            split = [s for r in suts[lab] if (s := cpu_split(r, data.ok_trials)) is not None]
            tot = sum(u + k for u, k in split)
            if tot > 0:
                shares[(path, who)].append(100.0 * sum(k for _, k in split) / tot)
        base = _cost(suts[base_label]) if base_label in suts else None
        cost = _cost(suts[mine]) if mine is not None else None
        if base is not None and cost is not None and base.median > 0:
            per[path].append(cost.median / base.median)
        else:
            per.setdefault(path, [])
        bu = _user(suts[base_label], data.ok_trials) if base_label in suts else None
        mu = _user(suts[mine], data.ok_trials) if mine is not None else None
        if bu is not None and mu is not None and bu.median > 0:
            per_user[path].append(mu.median / bu.median)

    def share(path: str, who: str) -> str:
        v = shares.get((path, who))
        return f"{spread_of(v).median:.0f}" if v else "–"

    for path in sorted(per, key=lambda p: _order((p, 0, 0, 0, "", 0, 0))):
        ref = BASELINES[path][1] if path in BASELINES else _NO_BASELINE.get(path, "no OVS row")
        ratios = per[path]
        users = per_user.get(path, [])
        t.rows.append([labels[path], ref, str(len(ratios)),
                       fmt_spread(spread_of(ratios)) if ratios else "–",
                       fmt_spread(spread_of(users)) if users else "–",
                       share(path, "turnoutd"), share(path, "ovs")])
        t.flags.append("")
    return t


def openflow_section(data: CampaignData) -> Section:
    """The tables above, when the campaign has openflow points."""
    sec = Section(
        key="openflow", title="OpenFlow rule sets",
        intro=("Scenario openflow (docs/bench.md, \"OpenFlow rule sets\"): p2p over veths or "
               "v2v over vhost-user / memif ports through N generated rules over M masks, the "
               "tester's flows (turnout-gen varying the UDP source port and source IP) all "
               "hitting one rule that outputs to K ports (the receiver and K − 1 mirror "
               "ports)."),
    )
    t = openflow_table(data)
    if t.rows:
        sec.tables.append(ratio_table(data))
        sec.tables.append(t)
    else:
        sec.empty = "No openflow results in this campaign."
    return sec


def _text(t: Table) -> list[str]:
    cols = [*t.columns, ""]
    rows = [[*r, f] for r, f in zip(t.rows, t.flags, strict=True)]
    w = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = [t.title, "  ".join(c.ljust(w[i]) for i, c in enumerate(cols)).rstrip()]
    lines += ["  ".join(v.ljust(w[i]) for i, v in enumerate(r)).rstrip() for r in rows]
    return lines


def openflow_text(data: CampaignData) -> str:
    """The tables as plain text for the terminal ("" without openflow results)."""
    t = openflow_table(data)
    if not t.rows:
        return ""
    return "\n".join([*_text(ratio_table(data)), "", *_text(t)]) + "\n"
