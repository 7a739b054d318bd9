"""turnoutd's AF_PACKET ports keep its latency budget: `rx_ring = "auto"`.

A TPACKET_V3 ring of blocks hands a block over when it is full or a block
timeout (1 ms) after its first frame, so under light load every frame
waits up to that long before any worker sees it: ten times turnoutd's
default budget. `auto` therefore takes the ring of frames (TPACKET_V2,
each frame handed over as the kernel writes it) under a budget shorter
than the block timeout, and blocks under one the timeout fits in (docs/
kernel-ports.md). This starts the real daemon, `patch` logic between two
`af_packet` ports on veths in a namespace of the test's own, under its
default budget, the power-saving budget of 1000 µs, `wakeup = "poll"`
and a port with `rx_ring = "blocks"` set, and checks for each the ring
each port opened (`backend.rx_ring_frames`) and that 10,000 frames at
10 kpps from turnout-gen (AF_XDP) all cross, none dropped.

About 10 s. Needs root and the release binaries turnoutd and turnout-gen.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from harness import GenRx, Turnoutd, VethNs, gen_doc, need_built, wait_for

from turnout import testpeers
from turnout.build import BIN_DIR

pytestmark = pytest.mark.system

GEN = BIN_DIR / "turnout-gen"
FRAMES = 10_000

#: (the [switch] lines, port a's extra keys, the ring each port must have
#: opened: 1 = frames)
CASES = {
    "default budget": ("", "", {"a": 1, "b": 1}),
    "power-saving budget": ("latency_budget_us = 1000\n", "", {"a": 0, "b": 0}),
    "poll": ('wakeup = "poll"\n', "", {"a": 1, "b": 1}),
    "blocks set": ("", 'rx_ring = "blocks"\n', {"a": 0, "b": 1}),
}


@pytest.fixture(autouse=True)
def _peers():
    testpeers.need_root()
    need_built(BIN_DIR / "turnoutd", GEN)


def _config(switch: str, port_a: str) -> str:
    ports = "".join(f'[[ports]]\nname = "{n}"\nkind = "af_packet"\niface = "sw{n}"\n'
                    f'{port_a if n == "a" else ""}\n' for n in "ab")
    return ('[switch]\ncontrol_socket = "@CTL@"\n' + switch + "\n"
            '[logic]\nname = "patch"\npairs = [["a", "b"]]\n\n' + ports)


@pytest.mark.parametrize("case", list(CASES))
def test_auto_takes_the_ring_that_keeps_the_budget(case, tmp_path):
    switch, port_a, rings = CASES[case]
    with VethNs("tafp", (("swa", "ga"), ("swb", "gb"))) as ns:
        exe = ["ip", "netns", "exec", ns.name]
        with Turnoutd(Path(tmp_path) / "sw", _config(switch, port_a), binary=BIN_DIR / "turnoutd",
                      netns=ns.name) as sw:
            opened = {p["name"]: p["backend"]["rx_ring_frames"] for p in sw.rpc("stats")["ports"]}
            assert opened == rings, f"{case}: rings opened {opened} (1 = frames)"
            rx = GenRx([*exe, str(GEN), "rx", "--port", "af_xdp:gb", "--interval-s", "0.1"])
            try:
                rx.wait_running()
                tx = subprocess.run([*exe, str(GEN), "tx", "--port", "af_xdp:ga", "--rate-pps",
                                     "10000", "--count", str(FRAMES), "--wait-peer-s", "20"],
                                    capture_output=True, text=True, timeout=120)
                assert tx.returncode == 0, tx.stderr[-2000:]
                assert gen_doc(tx.stdout)["tx"]["packets"] == FRAMES

                wait_for("every frame to leave turnoutd", 30,
                         lambda: sw.port("b")["tx_packets"] >= FRAMES)
                wait_for("the receiver to count them", 30, lambda: rx.rx_packets >= FRAMES)
            finally:
                got = rx.stop()
            stats = sw.rpc("stats")
    ports = {p["name"]: p for p in stats["ports"]}
    drops = {n: {r: v for r, v in p["drops"].items() if v} for n, p in ports.items()}
    assert drops == {"a": {}, "b": {}}, f"{case}: turnoutd dropped {drops}"
    assert ports["a"]["backend"]["kernel_rx_drops"] == 0, json.dumps(ports["a"]["backend"])
    r = got["rx"]
    received = sum(s["received"] for s in r["streams"] if s["id"] == 0)
    assert (received, r["lost"]) == (FRAMES, 0), f"{case}: receiver {r}"
