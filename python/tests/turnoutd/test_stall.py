"""A switch kept from its CPU loses nothing its receive ring can hold.

On a busy host, or when the hypervisor takes a virtual CPU away, turnoutd's
worker stops for milliseconds at a time (docs/turnoutd.md, "Wake-up"). An
AF_XDP port's receive ring is what holds the frames meanwhile: the
default one (`frames_per_queue` 16384, a receive ring of 8192) holds
82 ms at 100 kpps. Here turnoutd (`patch` between an AF_XDP port on a
veth and a memif port, defaults otherwise) is stopped with SIGSTOP for
30 ms six times while turnout-gen sends 400,000 frames at 100 kpps into
the veth; every frame must reach the memif receiver and turnoutd must
count no drop, its kernel's included. Each stop holds about 3,000 frames:
more than the 2,048 of the receive ring before the default grew (which
lost about 1,400 frames a stop at 400 kpps, docs/kernel-ports.md). The
stops last at least 30 ms, however busy the machine; longer by up to
50 ms still fits.

About 10 s. Needs root (a namespace and a veth pair of the test's own)
and the release binaries turnoutd and turnout-gen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from harness import Turnoutd, VethNs, stop_pid, wait_for

from turnout import testpeers
from turnout.build import BIN_DIR

pytestmark = [pytest.mark.system, pytest.mark.serial]

GEN = BIN_DIR / "turnout-gen"
FRAMES = 400_000
RATE = 100_000
STOPS = 6
STOP_S = 0.03
#: the kernel's drops before an AF_XDP port's receive ring (backend
#: counters; the first two are distinct frames, an empty fill ring's are
#: also in the first)
KERNEL_DROPS = ("kernel_rx_dropped", "kernel_rx_ring_full", "kernel_rx_fill_ring_empty")


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    for b in (BIN_DIR / "turnoutd", GEN):
        testpeers.need(b.is_file(), f"{b} is not built (cargo build --release "
                                    "-p turnoutd -p turnout-gen)")


def _doc(out: str) -> dict[str, Any]:
    lines = [x for x in out.splitlines() if x.startswith("{")]
    assert lines, f"no document from turnout-gen: {out[-500:]!r}"
    return json.loads(lines[-1])


def test_af_xdp_default_ring_holds_a_stopped_worker(tmp_path):
    d = Path(tmp_path)
    allowed = sorted(os.sched_getaffinity(0))
    tester, switch = (allowed[0], allowed[1]) if len(allowed) > 1 else (None, None)
    pin = ["--cpu", str(tester)] if tester is not None else []
    worker = f"[[workers]]\ncpu = {switch}\n\n" if switch is not None else ""
    config = ('[switch]\ncontrol_socket = "@CTL@"\n\n' + worker +
              '[logic]\nname = "patch"\npairs = [["a", "b"]]\n\n'
              '[[ports]]\nname = "a"\nkind = "af_xdp"\niface = "swa"\n\n'
              f'[[ports]]\nname = "b"\nkind = "memif"\nsocket = "{d}/b.sock"\nid = 0\n')
    with VethNs("tstall", (("swa", "ga"),)) as ns:
        exe = ["ip", "netns", "exec", ns.name]
        sw = Turnoutd(d / "sw", config, binary=BIN_DIR / "turnoutd", netns=ns.name).start()
        procs: list[subprocess.Popen] = []
        try:
            rx = subprocess.Popen([str(GEN), "rx", "--port", f"memif:{d}/b.sock",
                                   "--interval-s", "0.1", *pin],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(rx)
            running = threading.Event()
            out: list[str] = []

            def watch(err: Any = rx.stderr) -> None:
                for line in err:
                    if line.startswith("{"):
                        running.set()

            def read(o: Any = rx.stdout) -> None:
                out.append(o.read())

            threading.Thread(target=watch, daemon=True).start()
            reader = threading.Thread(target=read, daemon=True)
            reader.start()
            wait_for("the receiver to run", 30, running.is_set)
            wait_for("the receiver's port", 20, lambda: sw.port("b")["link_up"])
            tx = subprocess.Popen([*exe, str(GEN), "tx", "--port", "af_xdp:ga",
                                   "--rate-pps", str(RATE), "--count", str(FRAMES), *pin],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(tx)
            wait_for("frames through turnoutd", 20,
                     lambda: sw.port("a")["rx_packets"] >= RATE // 2)
            assert sw.proc is not None
            pid = sw.proc.pid
            stopped: list[float] = []
            for _ in range(STOPS):
                t0 = time.monotonic()
                os.kill(pid, signal.SIGSTOP)
                try:
                    time.sleep(STOP_S)
                finally:
                    os.kill(pid, signal.SIGCONT)
                stopped.append(time.monotonic() - t0)
                time.sleep(0.2)
            txo, txe = tx.communicate(timeout=60)
            assert tx.returncode == 0, txe[-2000:]
            sent = _doc(txo)["tx"]["packets"]
            assert sent == FRAMES, f"sent {sent}"

            def settled() -> bool:
                # every frame sent taken or dropped by the kernel at a,
                # and every one taken sent on or dropped, counted
                a, b = sw.port("a"), sw.port("b")
                kernel = sum(a.get("backend", {}).get(k, 0) for k in KERNEL_DROPS[:2])
                passed = (b["tx_packets"] + sum(b["drops"].values())
                          + sum(a["drops"].values()))
                return a["rx_packets"] + kernel >= FRAMES and passed >= a["rx_packets"]

            stats: dict[str, Any] = {}
            try:
                wait_for("turnoutd to pass every frame on", 30, settled)
            finally:
                stats = sw.rpc("stats")
            stop_pid(rx)
            reader.join(30)
            rxd = _doc("".join(out))
        finally:
            for p in procs:
                stop_pid(p)
            sw.stop()
    ports = {p["name"]: p for p in stats["ports"]}
    lost = {n: {r: v for r, v in [*p["drops"].items(),
                                  *[(k, x) for k, x in p.get("backend", {}).items()
                                    if k in KERNEL_DROPS]] if v}
            for n, p in ports.items()}
    what = f"stops of {[round(s * 1e3, 1) for s in stopped]} ms at {RATE} pps"
    assert lost == {"a": {}, "b": {}}, f"{what}: turnoutd dropped {lost}"
    assert ports["a"]["rx_packets"] >= FRAMES, f"{what}: turnoutd received {ports['a']}"
    r = rxd["rx"]
    got = sum(s["received"] for s in r["streams"] if s["id"] == 0)
    assert (got, r["lost"]) == (FRAMES, 0), f"{what}: receiver {r}"
