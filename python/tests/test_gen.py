"""The turnout-gen driver: which tester runs, and when it limited a trial."""

from __future__ import annotations

import json
import sys

import pytest

import turnout.measure.gen as gen
from turnout.measure.gen import find_gen


def test_pygen_only_when_turnout_gen_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("TURNOUT_GEN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(gen, "REPO", tmp_path)
    assert find_gen() == [sys.executable, "-m", "turnout.measure.pygen"]
    assert find_gen(allow_pygen=False) is None
    built = tmp_path / "target" / "release" / "turnout-gen"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert find_gen() == [str(built)]
    monkeypatch.setenv("TURNOUT_GEN", "/opt/x/turnout-gen")
    assert find_gen() == ["/opt/x/turnout-gen"]


@pytest.mark.parametrize(("load", "sent", "received", "full", "bound"), [
    (0, 1000, 1000, 0, True),     # saturating, nothing lost, never pushed back: tester's ceiling
    (0, 1000, 900, 0, False),     # the SUT lost frames: SUT-bound
    (0, 1000, 1000, 5, False),    # lossless but the SUT pushed back (memif ring full)
    (0, 0, 0, 0, False),          # nothing sent: not a ceiling
    (10_000, 9_990, 9_990, 0, False),  # kept the rate
    (10_000, 5_000, 5_000, 0, True),   # could not make the rate on its own
    (10_000, 5_000, 5_000, 3, False),  # slowed by back-pressure
])
def test_tester_bound(load, sent, received, full, bound):
    assert gen.tester_bound(load, 1.0, 1, sent, received, full) is bound


def test_tester_bound_counts_every_stream():
    # two streams at 10 kpps for 1 s: 20 000 expected
    assert not gen.tester_bound(10_000, 1.0, 2, 19_800, 19_800, 0)
    assert gen.tester_bound(10_000, 1.0, 2, 10_000, 10_000, 0)


@pytest.mark.parametrize(("attempts", "pushback", "bursts", "backlog", "bound"), [
    (10_000, 0, 5_000, 0, True),         # never pushed back, receiver kept up: tester's ceiling
    (10_000, 50, 5_000, 0, True),        # 0.5 % pushed back: still the tester
    (10_000, 6_000, 5_000, 0, False),    # the SUT did not drain the ring: SUT-bound
    (10_000, 6_000, 5_000, 4_000, True),  # ...but the receiver was behind: the tester
    (10_000, 6_000, 5_000, 400, False),  # 8 % backlog bursts: receiver not behind, SUT-bound
])
def test_tester_bound_from_back_pressure_and_receive_backlog(attempts, pushback, bursts, backlog,
                                                             bound):
    # saturating, lossless (a memif path never drops: it pushes back)
    assert gen.tester_bound(0, 1.0, 1, 1000, 1000, 0, attempts, pushback, bursts,
                            backlog) is bound


class _FakeProc:
    """A finished turnout-gen process whose stdout is the document for its role."""

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.returncode = 0
        role = args[1]
        sent = {"packets": 1000, "attempts": 40, "pushback": 0, "duration_s": 1.0}
        got = {"packets": 1000, "bursts": 40, "backlog_bursts": 0, "streams": []}
        doc: dict = {"schema": "turnout-gen/1", "role": role}
        if role in ("tx", "txrx"):
            doc["tx"] = sent
        if role in ("rx", "txrx"):
            doc["rx"] = got
        self.out = json.dumps(doc).encode()

    def communicate(self, timeout=None):
        return self.out, b""

    def poll(self):
        return 0

    def send_signal(self, sig):
        pass


def _measure(stream: gen.Stream) -> tuple[list[list[str]], object]:
    spawned: list[list[str]] = []

    def spawn(args, netns=None):
        spawned.append(list(args))
        return _FakeProc(list(args))

    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[stream], spawn=spawn, cooldown_s=0)
    return spawned, m.measure(1.0, 0)


def test_one_txrx_thread_unless_the_receiver_has_a_core_of_its_own():
    s = gen.Stream(tx_port="memif:/a,id=0", rx_port="memif:/a,id=1", tx_ns="t", rx_ns="t",
                   src_mac="02:00:00:00:00:01", dst_mac="02:00:00:00:00:02", tx_cpu=0, rx_cpu=0)
    spawned, c = _measure(s)
    assert [a[1] for a in spawned] == ["txrx"]
    assert spawned[0][spawned[0].index("--cpu") + 1] == "0"
    assert (c.sent, c.received) == (1000, 1000)

    s.rx_cpu = 2
    spawned, c = _measure(s)
    assert [a[1] for a in spawned] == ["rx", "tx"]  # receiver first
    rx, tx = spawned
    assert rx[rx.index("--port") + 1] == "memif:/a,id=1" and rx[rx.index("--cpu") + 1] == "2"
    assert tx[tx.index("--port") + 1] == "memif:/a,id=0" and tx[tx.index("--cpu") + 1] == "0"
    assert (c.sent, c.received) == (1000, 1000)
