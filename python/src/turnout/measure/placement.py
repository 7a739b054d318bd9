"""Where the host placed the tester's and the SUT's virtual CPUs, per trial.

On a virtual machine the hypervisor may run two virtual CPUs on cores that
share a cache or on cores that do not, and move them while the guest runs
(on the 2-core development VM: seconds to minutes at a time). A cache line
then takes ~55 ns or ~330 ns to go from one to the other and back, and
every shared-memory path between a tester on one CPU and a switch on the
other (memif, vhost-user rings) costs several times more: the capacity of
testpmd and turnoutd over vhost-user at 64 B was 150 and 50 cycles per
frame in one placement, 330 and 400 in the other. A verdict that compares
a SUT measured in one placement with another measured in the other says
where the host put them, not which switch is cheaper.

``probe`` runs ``turnout-cpu-rtt`` (crates/gen/src/bin/turnout-cpu-rtt.rs)
between the tester's first CPU and the SUT's first CPU, about 5 ms; the
measurer stores it before and after each trial in ``extra.cpu_rtt_ns``
(``{"before", "after", "cpus"}`` or ``{"why"}``), and the report marks the
repetitions whose round trip was ``SLOW_FACTOR`` times the campaign's
fastest or more (report/verdict.py).
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

from .. import build

__all__ = ["SLOW_FACTOR", "fastest_placement", "find_probe", "probe", "trial_rtt"]

#: a trial whose cache-line round trip was this many times the campaign's
#: fastest or more ran with its virtual CPUs placed apart
SLOW_FACTOR = 2.0


def find_probe() -> str | None:
    """The ``turnout-cpu-rtt`` binary: this checkout's build, else on PATH."""
    return build.find("turnout-cpu-rtt")


def probe(a: int, b: int, binary: str | None = None, timeout_s: float = 5.0) -> float | str:
    """The fastest batch's mean round trip of a cache line between CPUs
    ``a`` and ``b``, ns; or why there is none (a string)."""
    exe = binary or find_probe()
    if exe is None:
        return "turnout-cpu-rtt not built (make build)"
    try:
        p = subprocess.run([exe, "--a", str(a), "--b", str(b)], capture_output=True,
                           timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"turnout-cpu-rtt: {e}"
    if p.returncode != 0:
        return f"turnout-cpu-rtt exited {p.returncode}: {p.stderr.decode(errors='replace')[-200:]}"
    try:
        doc = json.loads(p.stdout.decode().strip().splitlines()[-1])
        return float(doc["min_ns"])
    except (ValueError, KeyError, IndexError) as e:
        return f"turnout-cpu-rtt printed no document: {e}"


def fastest_placement(values: list[float]) -> float | None:
    """The round trip of the campaign's fastest placement: the smallest
    value that 1 % of the values (at least 2, itself included) lie within
    25 % above; the smallest value where none does; None without values.
    A probe or two far faster than every other (two threads the host ran
    on one core's hyperthreads for a moment: 20-30 ns twice in 462 on the
    development VM, against 55-65 and 300-340) is not a placement the
    campaign's SUTs ran in."""
    v = sorted(values)
    k = max(2, -(-len(v) // 100))
    for i, x in enumerate(v):
        if i + k <= len(v) and v[i + k - 1] <= 1.25 * x:
            return x
    return v[0] if v else None


def trial_rtt(extra: dict[str, Any]) -> float | None:
    """A trial's round trip as the report judges it: the slower of the
    probes before and after it (a placement that changed during the trial
    counts as the slower one), or None where not measured."""
    r = extra.get("cpu_rtt_ns")
    if not isinstance(r, dict):
        return None
    vals = [float(r[k]) for k in ("before", "after") if isinstance(r.get(k), (int, float))]
    return max(vals) if vals else None
