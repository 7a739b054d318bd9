"""Same tester, same buffers, same placement for every SUT of a cell: checked.

A verdict compares SUTs only when nothing in the set-up favours one of
them. Per verdict cell (use case, direction, frame size, kind of port) this
compares, over the cell's R+ trials, what every SUT got:

- the **tester**: the same turnout-gen build (the SUT rows' ``tester`` and
  ``tester_version``);
- the **tester's processes and buffers**: each process's arguments with its
  ports named by endpoint (measure/gen.py ``tester_setup``): the same ports,
  frame size, flows, burst, window, warm-up and CPUs. The buffers follow
  from them: over memif the tester is the client and allocates the rings
  (1024 slots of 2048 B) for every server alike; over vhost-user it is the
  frontend and posts the virtqueues (1024 entries, 2 KiB mergeable receive
  buffers with every backend here, which all offer mergeable buffers); on
  veth its AF_XDP UMEM is its own. What the SUT allocates on its side is
  its own configuration (its SUT row);
- the **chain VNFs**: the same helpers on the same CPUs with the same
  scheduling;
- the **placement**: the same SUT CPUs, its data path pinned there and
  none of its other threads allowed on them (measure/cpu.py
  ``thread_placement``), as turnoutd places its API threads, testpmd its
  main lcore and OVS its non-PMD threads.

Trials stored before this was recorded say "not recorded".
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from .model import Table
from .points import CampaignData, PointKey, sut_label

__all__ = ["fairness_table"]


def _placement(p: Any) -> tuple[str, bool]:
    """("turnout-w0 on the SUT's CPUs; 14 others off them", ok)."""
    if not isinstance(p, dict):
        return "not recorded", True
    on = ", ".join(f"{n}×{c}" if c > 1 else n for n, c in sorted(p.get("on", {}).items()))
    both = p.get("both", {})
    text = f"{on or 'nothing'} pinned there; {p.get('off', 0)} others off them"
    if both:
        text += "; also allowed there: " + ", ".join(
            f"{n}×{c}" if c > 1 else n for n, c in sorted(both.items()))
    return text, not both


def _same(values: dict[str, str], what: str, diffs: list[str]) -> str:
    """The one value every SUT had, or "differs: …" (and ``what`` into diffs)."""
    known = sorted({v for v in values.values() if v != "not recorded"})
    if len(known) <= 1:
        return known[0] if known else "not recorded"
    diffs.append(what)
    return "differs: " + "; ".join(f"{s}: {v}" for s, v in sorted(values.items()))


def fairness_table(data: CampaignData) -> Table:
    """One row per verdict cell: what every SUT got, and whether it was the same."""
    t = Table(
        key="fairness", title="Same tester, same buffers, same placement for every SUT",
        columns=["cell", "SUTs", "tester", "tester processes (ports by endpoint)",
                 "chain VNFs", "SUT CPUs", "SUT threads", "same for every SUT"],
        note=("Checked per verdict cell over its R+ trials (report/setup.py). The tester's "
              "buffers follow from its processes: over memif it is the client and allocates "
              "the rings (1024 slots of 2048 B) for every server alike; over vhost-user it "
              "is the frontend and posts the virtqueues (1024 entries, 2 KiB mergeable "
              "receive buffers: turnoutd, testpmd's net_vhost and OVS-DPDK all offer "
              "mergeable buffers); on veth its AF_XDP UMEM is its own. What a SUT allocates "
              "on its side is its own configuration (its row under SUTs). SUT threads: its "
              "threads pinned to the SUT's CPUs (the data path), how many are kept off "
              "them, and any that may run on them besides (they can preempt the data "
              "path). The bare wire has no SUT and is not compared."),
    )
    conf: dict[int | None, dict[str, Any]] = {}
    for s in data.db.suts(data.campaign.id):
        conf[s.id] = s.config if isinstance(s.config, dict) else {}
    cells: dict[tuple[Any, ...], dict[str, list[Any]]] = defaultdict(lambda: defaultdict(list))
    for tr in data.ok_trials:
        if tr.method != "rplus" or tr.sut in data.reference_suts:
            continue
        k = PointKey.of(tr)
        vp = tr.point.virtual_port
        cells[(k.group(), vp)][sut_label(tr.sut, vp)].append(tr)
    for (_, vp), by_sut in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        first = next(iter(by_sut.values()))[0]
        cell = (f"{first.scenario} {vp or 'veth'} {first.point.frame_size_b} B"
                + (f" {PointKey.of(first).extras()}" if PointKey.of(first).extras() else "")
                + (" bi" if first.point.direction == "bi" else ""))
        diffs: list[str] = []

        tester = {}
        procs = {}
        vnfs = {}
        cpus = {}
        threads = []
        for label, trs in sorted(by_sut.items()):
            c = conf.get(trs[0].sut_id, {})
            tester[label] = (str(c.get("tester_version") or c.get("tester", "?")).rsplit(
                "/", 1)[-1] if c else "not recorded")
            setups = {str(tr.extra.get("tester_setup", {}).get("processes"))
                      for tr in trs if tr.extra.get("tester_setup")}
            procs[label] = (" | ".join(trs[0].extra["tester_setup"]["processes"])
                            if len(setups) == 1 else "not recorded" if not setups
                            else "differs between its repetitions")
            vs = {str(tr.extra.get("tester_setup", {}).get("vnfs")) for tr in trs
                  if tr.extra.get("tester_setup")}
            v0 = trs[0].extra.get("tester_setup", {}).get("vnfs") if vs else None
            vnfs[label] = ("not recorded" if not vs else "none" if not v0 else
                           "; ".join(f"{n} on CPU {cpu} ({sched})" for n, cpu, sched in v0))
            cpus[label] = str(trs[0].extra.get("kernel_cpus") or "not recorded")
            if "sut_placement" not in trs[0].extra and not any(
                    c.get("role") == "sut" for c in trs[0].cpu if isinstance(c, dict)) \
                    and str(trs[0].extra.get("cost_source", "")).startswith("kernel"):
                # a kernel switch: no threads, its forwarding in the receive
                # softirq its ports' RPS steers to the SUT's CPUs
                text, ok = "no threads: the kernel forwards on them (RPS)", True
            else:
                text, ok = _placement(trs[0].extra.get("sut_placement"))
            threads.append(f"{label}: {text}")
            if not ok:
                diffs.append(f"{label}'s threads may share its CPUs with its data path")
        row = [cell, ", ".join(sorted(by_sut)), _same(tester, "tester", diffs),
               _same(procs, "tester processes", diffs), _same(vnfs, "chain VNFs", diffs),
               _same(cpus, "SUT CPUs", diffs), " · ".join(threads)]
        if all(v == "not recorded" for v in procs.values()):
            row.append("not recorded (trials stored before the check)")
        else:
            row.append("yes" if not diffs else "no: " + "; ".join(diffs))
        t.rows.append(row)
        t.flags.append("" if not diffs else "differs")
    return t
