"""A switch kept from its CPU loses nothing its receive ring can hold.

On a busy host, or when the hypervisor takes a virtual CPU away, turnoutd's
worker stops for milliseconds at a time (docs/turnoutd.md, "Wake-up"). A
kernel port's receive ring is what holds the frames meanwhile
(docs/kernel-ports.md):

- AF_XDP: the default `frames_per_queue` 16384, a receive ring of 8192,
  holds 82 ms at 100 kpps. turnoutd is stopped (SIGSTOP) for 30 ms six
  times while 400,000 frames arrive at 100 kpps: each stop holds about
  3,000 frames, more than the receive ring of 2,048 before the default
  grew (with it, about 5,600 frames were lost here).
- AF_PACKET: at light load the kernel hands over a block per timeout
  (`rx_block_timeout_ms`, 1 ms, rounded up to the kernel's tick) however
  few frames it holds, so the ring holds as many timeouts as it has
  blocks: 256 by default. turnoutd is stopped for 300 ms three times while
  4,000 frames arrive at 1 kpps: the 64 blocks of 64 KiB before the
  default changed lost 877 of 1,200 frames with 400 ms stops here; 256
  held 400 ms stops whole.

`patch` between the kernel port on a veth and a memif port, defaults
otherwise; every frame must reach the memif receiver and turnoutd must
count no drop, its kernel's included. The stops last at least their
time, however busy the machine; each fits with room to spare (50 ms at
AF_XDP, more at AF_PACKET).

About 15 s. Needs root (a namespace and a veth pair of the test's own)
and the release binaries turnoutd and turnout-gen.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from harness import GenRx, Turnoutd, VethNs, gen_doc, need_built, stop_pid, wait_for

from turnout import testpeers
from turnout.build import BIN_DIR

pytestmark = [pytest.mark.system, pytest.mark.serial]

GEN = BIN_DIR / "turnout-gen"
#: kind: (frames, rate pps, stops, each stop s)
CASES = {"af_xdp": (400_000, 100_000, 6, 0.03), "af_packet": (4_000, 1_000, 3, 0.3)}
#: the kernel's drops before a kernel port's receive ring (backend
#: counters: AF_XDP's first two are distinct frames, an empty fill ring's
#: are also in the first; AF_PACKET's last)
KERNEL_DROPS = ("kernel_rx_dropped", "kernel_rx_ring_full", "kernel_rx_drops",
                "kernel_rx_fill_ring_empty")


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    need_built(BIN_DIR / "turnoutd", GEN)


@pytest.mark.parametrize("kind", sorted(CASES))
def test_the_default_receive_ring_holds_a_stopped_worker(kind, tmp_path):
    frames, rate, stops, stop_s = CASES[kind]
    d = Path(tmp_path)
    allowed = sorted(os.sched_getaffinity(0))
    tester, switch = (allowed[0], allowed[1]) if len(allowed) > 1 else (None, None)
    pin = ["--cpu", str(tester)] if tester is not None else []
    worker = f"[[workers]]\ncpu = {switch}\n\n" if switch is not None else ""
    config = ('[switch]\ncontrol_socket = "@CTL@"\n\n' + worker +
              '[logic]\nname = "patch"\npairs = [["a", "b"]]\n\n'
              f'[[ports]]\nname = "a"\nkind = "{kind}"\niface = "swa"\n\n'
              f'[[ports]]\nname = "b"\nkind = "memif"\nsocket = "{d}/b.sock"\nid = 0\n')
    with VethNs("tstall", (("swa", "ga"),)) as ns:
        exe = ["ip", "netns", "exec", ns.name]
        sw = Turnoutd(d / "sw", config, binary=BIN_DIR / "turnoutd", netns=ns.name).start()
        procs: list[subprocess.Popen] = []
        try:
            rx = GenRx([str(GEN), "rx", "--port", f"memif:{d}/b.sock", "--interval-s", "0.1",
                        *pin])
            procs.append(rx.proc)
            rx.wait_running()
            wait_for("the receiver's port", 20, lambda: sw.port("b")["link_up"])
            tx = subprocess.Popen([*exe, str(GEN), "tx", "--port", "af_xdp:ga",
                                   "--rate-pps", str(rate), "--count", str(frames), *pin],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            procs.append(tx)
            wait_for("frames through turnoutd", 20,
                     lambda: sw.port("a")["rx_packets"] >= rate // 2)
            assert sw.proc is not None
            pid = sw.proc.pid
            stopped: list[float] = []
            for _ in range(stops):
                t0 = time.monotonic()
                os.kill(pid, signal.SIGSTOP)
                try:
                    time.sleep(stop_s)
                finally:
                    os.kill(pid, signal.SIGCONT)
                stopped.append(time.monotonic() - t0)
                time.sleep(0.2)
            txo, txe = tx.communicate(timeout=60)
            assert tx.returncode == 0, txe[-2000:]
            sent = gen_doc(txo)["tx"]["packets"]
            assert sent == frames, f"sent {sent}"

            def settled() -> bool:
                # every frame sent taken or dropped by the kernel at a,
                # and every one taken sent on or dropped, counted
                a, b = sw.port("a"), sw.port("b")
                kernel = sum(a.get("backend", {}).get(k, 0) for k in KERNEL_DROPS[:3])
                passed = (b["tx_packets"] + sum(b["drops"].values())
                          + sum(a["drops"].values()))
                return a["rx_packets"] + kernel >= frames and passed >= a["rx_packets"]

            stats: dict[str, Any] = {}
            try:
                wait_for("turnoutd to pass every frame on", 30, settled)
            finally:
                stats = sw.rpc("stats")
            rxd = rx.stop()
        finally:
            for p in procs:
                stop_pid(p)
            sw.stop()
    ports = {p["name"]: p for p in stats["ports"]}
    lost = {n: {r: v for r, v in [*p["drops"].items(),
                                  *[(k, x) for k, x in p.get("backend", {}).items()
                                    if k in KERNEL_DROPS]] if v}
            for n, p in ports.items()}
    what = f"{kind}: stops of {[round(s * 1e3, 1) for s in stopped]} ms at {rate} pps"
    assert lost == {"a": {}, "b": {}}, f"{what}: turnoutd dropped {lost}"
    assert ports["a"]["rx_packets"] >= frames, f"{what}: turnoutd received {ports['a']}"
    r = rxd["rx"]
    got = sum(s["received"] for s in r["streams"] if s["id"] == 0)
    assert (got, r["lost"]) == (frames, 0), f"{what}: receiver {r}"
