"""The tester absorbs the host.

turnout-gen sends 10^6 frames at 100 kpps and at 1 Mpps through turnoutd
(the `patch` logic between two ports of one kind, its default wake-up
policy, its worker on CPU 1) to a turnout-gen receiver, on each port kind
the tester receives over: memif, vhost-user and AF_XDP (two veth pairs in
a namespace of the test's own). Sender and receiver run as two processes
on CPU 0 next to a CPU hog there: each waits for the CPU for whole
scheduler slices (and longer on a machine busy with other work), which is
what a tester sharing its core meets. Every frame must arrive: the
receiver's rings hold what comes while it waits (turnout-gen's default
rings, docs/turnout-gen.md), turnoutd drops nothing toward it (`tx_full`
at its port to the receiver was the symptom: the tester's receive ring had
overflowed), and the receiver counts no loss. The sender runs with
`--count`: a port that pushes back delays frames, it loses none.

turnoutd runs at SCHED_FIFO 1, so that other work on CPU 1 does not hold
its worker (at normal priority, beside other builds at a load average of 15, it waited for
the CPU 90 % of its runnable time and lost a third of the frames at
100 kpps). Its own rings toward the sender are sized up in the test (AF_XDP
`frames_per_queue`: 65,536 receive chunks, 65 ms at 1 Mpps), because a
real-time worker busy for about a second (the 1 Mpps run, polled) starves
the normal tasks of its CPU until the kernel's fair server takes the CPU
from it for 50 ms at once (docs/turnoutd.md, "Real-time priority"), and an
AF_XDP receive ring that overflows is a kernel drop the sender never sees:
that is the switch's budget, not the tester's. With 8,192 receive chunks
that dropped about 47,000 frames (`kernel_rx_fill_ring_empty` at port a)
in about one run in ten.

About 40 s (the 100 kpps runs are 10 s each). Needs root (namespace and
veths for AF_XDP; the memif and vhost-user sockets live in the test's
directory) and the release binaries turnoutd and turnout-gen.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from harness import (
    GenRx,
    Turnoutd,
    VethNs,
    gen_doc,
    need_built,
    patch_ab_config,
    stop_pid,
    wait_for,
)

from turnout import testpeers
from turnout.build import BIN_DIR

# serial: it starts its own CPU hog and holds every frame of 10^6 at 1 Mpps
# to arriving; beside other tests it would measure their load too
pytestmark = [pytest.mark.system, pytest.mark.serial]

RELEASE = BIN_DIR
GEN = RELEASE / "turnout-gen"
FRAMES = 1_000_000
RATES = (100_000, 1_000_000)
KINDS = ("memif", "vhost-user", "afxdp")
#: the receiver's port option for interrupt mode
IRQ = {"memif": ",mode=interrupt", "vhost-user": ",mode=interrupt", "afxdp": ",wakeup=interrupt"}


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    need_built(RELEASE / "turnoutd", GEN)


def _cpus() -> tuple[str | None, str | None]:
    """(tester's CPU, turnoutd's CPU): 0 and 1 when this process may use
    both, else no pinning."""
    allowed = sorted(os.sched_getaffinity(0))
    if len(allowed) < 2:
        return None, None
    return str(allowed[0]), str(allowed[1])


def _config(kind: str, d: Path, cpu: str | None) -> str:
    return patch_ab_config(kind, d, cpu, switch="latency_budget_us = 1000\n",
                           af_xdp="frames_per_queue = 131072\n")


def _spec(kind: str, d: Path, name: str) -> str:
    if kind == "memif":
        return f"memif:{d}/{name}.sock"
    if kind == "vhost-user":
        return f"vhost_user:{d}/{name}.sock"
    return f"af_xdp:g{name}"


def _run(kind: str, rate: int, d: Path, ns: str | None) -> None:
    tester, switch = _cpus()
    pin = ["--cpu", tester] if tester is not None else []
    exe = ["ip", "netns", "exec", ns] if ns else []
    sw = Turnoutd(d / f"sw-{rate}", _config(kind, d, switch), binary=RELEASE / "turnoutd",
                  netns=ns)
    sw.prefix = ["chrt", "-f", "1"]
    sw.start()
    procs: list[subprocess.Popen] = []
    try:
        hog = subprocess.Popen([*(["taskset", "-c", tester] if tester else []), "sh", "-c",
                                "while :; do :; done"])
        procs.append(hog)
        rx = GenRx(["chrt", "-f", "1", *exe, str(GEN), "rx", "--port",
                    _spec(kind, d, "b") + IRQ[kind], "--interval-s", "0.1", *pin])
        procs.append(rx.proc)
        rx.wait_running()
        wait_for("the receiver's port", 20, lambda: sw.port("b")["link_up"])
        tx = subprocess.run([*exe, str(GEN), "tx", "--port", _spec(kind, d, "a"),
                             "--rate-pps", str(rate), "--count", str(FRAMES), "--wait-peer-s", "20",
                             *pin], capture_output=True, text=True, timeout=600)
        assert tx.returncode == 0, tx.stderr[-2000:]
        sent = gen_doc(tx.stdout)["tx"]["packets"]
        assert sent == FRAMES, f"{kind} {rate} pps: sent {sent}"
        # Everything turnoutd took has left it (or was dropped, counted).
        def settled() -> bool:
            b = sw.port("b")
            return b["tx_packets"] + sum(b["drops"].values()) >= FRAMES
        try:
            wait_for("turnoutd to pass every frame on", 30, settled)
        except AssertionError as e:
            # What was lost where: the ports' counters (a kernel drop on
            # AF_XDP shows in `backend`) and the worker's sleeps.
            st = sw.rpc("stats")
            raise AssertionError(f"{kind} at {rate} pps: {e}; ports {json.dumps(st['ports'])}; "
                                 f"workers {json.dumps(st.get('workers'))}") from None
        stats = sw.rpc("stats")
        rxd = rx.stop()
    finally:
        for p in procs:
            stop_pid(p)
        sw.stop()
    ports = {p["name"]: p for p in stats["ports"]}
    what = f"{kind} at {rate} pps"
    assert ports["a"]["rx_packets"] >= FRAMES, f"{what}: turnoutd received {ports['a']}"
    drops = {n: {r: v for r, v in p["drops"].items() if v} for n, p in ports.items()}
    # What the receiver did while frames were dropped toward it: its sleeps,
    # the wake-ups that found a ring half full, its port's counters.
    seen = {k: rxd.get(k) for k in ("late_wakes", "sleeps", "thread_cpu_ns", "ports")}
    assert drops == {"a": {}, "b": {}}, (f"{what}: turnoutd dropped {drops}; receiver {seen}; "
                                         f"workers {json.dumps(stats.get('workers'))}")
    r = rxd["rx"]
    # Only the stream's frames count (a kernel port may see others too).
    got = sum(s["received"] for s in r["streams"] if s["id"] == 0)
    assert (got, r["lost"]) == (FRAMES, 0), f"{what}: receiver {r}"


@pytest.mark.parametrize("kind", KINDS)
def test_the_receiver_takes_every_frame_next_to_a_cpu_hog(kind, tmp_path):
    d = Path(tmp_path)
    if kind == "afxdp":
        with VethNs("tabs", (("swa", "ga"), ("swb", "gb"))) as ns:
            for rate in RATES:
                _run(kind, rate, d, ns.name)
    else:
        for rate in RATES:
            _run(kind, rate, d, None)
