"""A worker probes the other way of copying large frames into its peers.

turnoutd patches two ports of one kind (memif, vhost-user); turnout-gen
sends 1518-byte frames through it at its full rate and receives them. The
worker copies each frame into the receiver's buffers with streamed or with
ordinary stores, the way it keeps per kind of peer memory
(`fabric::copymode`, docs/turnoutd.md "Copies into peers' memory"): it
starts with memif streamed and vhost-user ordinary and, after 2 s of large
frames, probes the other way for the kind the frames go into. The test
waits for that probe in `stats` (`copy_probes`), then checks that the other
kind's way was left alone, that the frames arrived (the receiver counted
them and none implausible) and that turnoutd dropped none on their way out
for a reason other than the receiver's full ring.

About 15 s (a probe takes 4.25 s of traffic per kind). Needs the release
binaries turnoutd and turnout-gen; the sockets live in the test's
directory.
"""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from harness import Turnoutd, gen_doc, need_built, patch_ab_config, stop_pid, wait_for

from turnout.build import BIN_DIR

# serial: the traffic runs at the tester's full rate on both CPUs, and the
# probe needs frames every epoch
pytestmark = [pytest.mark.system, pytest.mark.serial]

GEN = BIN_DIR / "turnout-gen"
#: the stats key of each kind's way, and the way it starts with
WAY = {"memif": ("copy_stream_memif", 1), "vhost-user": ("copy_stream_vhost_user", 0)}


@pytest.fixture(autouse=True)
def _peers():
    need_built(BIN_DIR / "turnoutd", GEN)


@pytest.mark.parametrize("kind", sorted(WAY))
def test_the_worker_probes_the_other_way_for_the_kind_its_large_frames_go_into(kind, tmp_path):
    cpus = sorted(os.sched_getaffinity(0))
    tester, switch = (cpus[0], cpus[1]) if len(cpus) >= 2 else (None, None)
    d = Path(tmp_path)
    spec = "memif" if kind == "memif" else "vhost_user"
    with Turnoutd(d / "sw", patch_ab_config(kind, d, switch)) as sw:
        w0 = sw.rpc("stats")["workers"][0]
        assert (w0["copy_stream_memif"], w0["copy_stream_vhost_user"]) == (1, 0), w0
        assert w0["copy_probes"] == 0
        gen = subprocess.Popen(
            [str(GEN), "txrx", "--port", f"{spec}:{d}/a.sock", "--rx-port", f"{spec}:{d}/b.sock",
             "--size", "1518", "--duration-s", "60", "--wait-peer-s", "10",
             *(["--cpu", str(tester)] if tester is not None else [])],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            def probed() -> dict | None:
                assert gen.poll() is None, f"turnout-gen ended: {gen.communicate()[1][-1500:]}"
                w = sw.rpc("stats")["workers"][0]
                return w if w["copy_probes"] >= 1 else None
            # the first probe ends 2.25 + 2 s after the first large frames
            w = wait_for("the worker's first probe of the other way", 40, probed, every_s=0.2)
        finally:
            out, err = "", ""
            if gen.poll() is None:
                gen.send_signal(signal.SIGINT)
                try:
                    out, err = gen.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    stop_pid(gen, signal.SIGKILL)
                    raise
        stats = sw.rpc("stats")
    key, _ = WAY[kind]
    other = next(k for k in WAY if k != kind)
    okey, ostart = WAY[other]
    assert w[key] in (0, 1), w
    assert w[okey] == ostart, f"the way into {other} changed without its frames: {w}"
    assert w["copy_switches"] <= w["copy_probes"]
    doc = gen_doc(out)
    rx = doc["rx"]
    assert rx["packets"] > 100_000 and rx["implausible"] == 0, f"receiver {rx}; {err[-800:]}"
    ports = {p["name"]: p for p in stats["ports"]}
    drops = {r: v for r, v in ports["b"]["drops"].items() if v and r != "tx_full"}
    assert drops == {}, f"turnoutd dropped toward the receiver: {drops}"
