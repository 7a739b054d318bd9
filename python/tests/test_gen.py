"""The turnout-gen driver: which tester runs, how a trial's documents become
counts, and when the tester limited a trial (every number means
what it says). The documents here are what turnout-gen prints
(docs/turnout-gen.md); each test names the defect it guards against."""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import ClassVar

import pytest

import turnout.measure.gen as gen
from turnout import build
from turnout.measure.cpu import CpuSample, CpuSampler
from turnout.measure.gen import find_gen


def test_pygen_only_when_turnout_gen_is_missing(tmp_path, monkeypatch):
    monkeypatch.delenv("TURNOUT_GEN", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(build, "BIN_DIR", tmp_path / "target" / "release")
    assert find_gen() == [sys.executable, "-m", "turnout.measure.pygen"]
    assert find_gen(allow_pygen=False) is None
    built = tmp_path / "target" / "release" / "turnout-gen"
    built.parent.mkdir(parents=True)
    built.write_text("#!/bin/sh\n")
    built.chmod(0o755)
    assert find_gen() == [str(built)]
    monkeypatch.setenv("TURNOUT_GEN", "/opt/x/turnout-gen")
    assert find_gen() == ["/opt/x/turnout-gen"]


# ------------------------------------------------------------- tester-bound
@pytest.mark.parametrize(("load", "sent", "lost", "unsent", "attempts", "pushback", "bound"), [
    (0, 1000, 0, 0, 40, 0, True),       # saturating, nothing lost, no push-back: the tester
    (0, 1000, 1, 0, 40, 0, True),       # one frame lost is no evidence (was: SUT-bound)
    (0, 1000, 100, 0, 40, 0, False),    # the SUT lost 10 %: SUT-bound
    (0, 1000, 0, 0, 40, 5, False),      # lossless but pushed back on 12 %: the SUT
    (0, 0, 0, 0, 0, 0, True),           # nothing at all: not the SUT's doing
    (20_000, 19_900, 0, 100, 400, 0, False),  # kept (almost) the rate
    (20_000, 10_000, 0, 0, 400, 0, True),  # could not make the rate on its own (behind)
    (20_000, 10_000, 0, 10_000, 400, 0, False),  # frames did not fit the port: the SUT
    (20_000, 10_000, 0, 10_000, 400, 300, False),  # slowed by back-pressure: the SUT
])
def test_tester_bound(load, sent, lost, unsent, attempts, pushback, bound):
    tb, why = gen.tester_bound(load, 1.0, sent, lost, unsent, attempts, pushback)
    assert tb is bound and (why or not tb)


def test_tester_bound_when_the_receiver_is_behind_whatever_else():
    tb, why = gen.tester_bound(0, 1.0, 1000, 200, 0, 40, 30, bursts=100, backlog_bursts=50)
    assert tb and "receiver behind" in why
    tb, _ = gen.tester_bound(0, 1.0, 1000, 200, 0, 40, 30, bursts=100, backlog_bursts=5)
    assert not tb


def test_vnf_drops_are_not_the_suts_loss():
    # a chain VNF dropped 100 of the 100 lost frames: the SUT kept up
    tb, _ = gen.tester_bound(0, 1.0, 10_000, 100, 0, 40, 0, vnf_dropped=100)
    assert tb
    tb, _ = gen.tester_bound(0, 1.0, 10_000, 100, 0, 40, 0, vnf_dropped=0)
    assert not tb


# ------------------------------------------------------------ fake processes
def _stream_doc(sid: int, received: int, lost: int = 0, dup: int = 0,
                hist: list[list[int]] | None = None) -> dict:
    h = hist or [[2000, received]]
    n = sum(c for _, c in h)
    return {"id": sid, "received": received, "lost": lost, "duplicated": dup, "reordered": 0,
            "jitter_ns": 100.0,
            "latency_ns": {"count": n, "min": h[0][0], "max": h[-1][0],
                           "mean": sum(v * c for v, c in h) / n, "p50": h[0][0],
                           "p99": h[-1][0], "hist": h}}


class _FakeProc:
    """A finished turnout-gen process whose stdout is the document for its
    role: every stream sent ``sent`` frames, ``per_stream`` overrides what
    its receiver reports."""

    sent = 1000
    per_stream: ClassVar[dict[int, dict]] = {}
    full = 0

    def __init__(self, args: list[str]) -> None:
        self.args = args
        self.pid = 4242
        self.returncode = 0
        role = args[1]
        sid = int(args[args.index("--stream") + 1]) if "--stream" in args else 0
        mains = [sid] + [int(dict(kv.split("=", 1) for kv in a.split(";"))["stream"])
                         for p, a in itertools.pairwise(args) if p == "--pair"]
        ids = [i + d for i in mains for d in ((0, 1) if "--bidir" in args else (0,))]
        doc: dict = {"schema": "turnout-gen/1", "role": role}
        if role in ("tx", "txrx"):
            dirs = [{"stream": i, "packets": self.sent, "full": self.full} for i in ids]
            doc["tx"] = {"packets": self.sent * len(ids), "full": self.full * len(ids),
                         "attempts": 40, "pushback": 0, "duration_s": 1.0,
                         "window_start_ns": 1_000_000_000, "window_end_ns": 2_000_000_000,
                         "cpu_ns": 900_000_000,
                         **({"directions": dirs} if len(ids) > 1 else {})}
        if role in ("rx", "txrx"):
            streams = [self.per_stream.get(i, _stream_doc(i, self.sent)) for i in ids]
            doc["rx"] = {"packets": sum(s["received"] for s in streams), "bursts": 40,
                         "backlog_bursts": 0, "streams": streams}
        self.out = json.dumps(doc).encode()

    def communicate(self, timeout=None):
        return self.out, b""

    def poll(self):
        return 0

    def send_signal(self, sig):
        pass


def _stream(sid: int, tx: str, rx: str, **kw) -> gen.Stream:
    return gen.Stream(tx_port=tx, rx_port=rx, tx_ns="t", rx_ns="t", src_mac="02:00:00:00:00:01",
                      dst_mac="02:00:00:00:00:02", id=sid, tx_cpu=0, rx_cpu=0, **kw)


def _measure(streams: list[gen.Stream], load: float = 0.0, proc=_FakeProc):
    spawned: list[list[str]] = []

    def spawn(args, netns=None):
        spawned.append(list(args))
        return proc(list(args))

    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=streams, spawn=spawn, cooldown_s=0)
    return spawned, m.measure(1.0, load)


def _rates(spawned: list[list[str]]) -> list[str]:
    return [a[a.index("--rate-pps") + 1] for a in spawned if "--rate-pps" in a]


def test_one_txrx_thread_unless_the_receiver_has_a_core_of_its_own():
    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    spawned, c = _measure([s])
    assert [a[1] for a in spawned] == ["txrx"]
    assert spawned[0][spawned[0].index("--cpu") + 1] == "0"
    assert (c.sent, c.received) == (1000, 1000)

    s.rx_cpu = 2
    spawned, c = _measure([s])
    assert [a[1] for a in spawned] == ["rx", "tx"]  # receiver first
    rx, tx = spawned
    assert rx[rx.index("--port") + 1] == "memif:/a,id=1" and rx[rx.index("--cpu") + 1] == "2"
    assert tx[tx.index("--port") + 1] == "memif:/a,id=0" and tx[tx.index("--cpu") + 1] == "0"
    assert (c.sent, c.received) == (1000, 1000)


def test_a_txrx_tester_waits_longer_for_frames_in_flight_than_a_lone_sender():
    # txrx ends its cool-down once every frame is back: its long wait costs
    # only lossy trials; a tx process cannot tell, and keeps the short one
    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[s], spawn=lambda a, netns=None: None,
                        cooldown_s=0.2, return_wait_s=1.0)
    txrx = m._args(gen._Task("txrx", [s], None), 1.0, 0)
    tx = m._args(gen._Task("tx", [s], None), 1.0, 0)
    assert txrx[txrx.index("--cooldown-s") + 1] == "1"
    assert tx[tx.index("--cooldown-s") + 1] == "0.2"


def test_the_load_is_the_aggregate_split_among_streams():
    # Two pairs (NvsN): 0.99 × an aggregate R+ of 20 kpps is 19.8 kpps in
    # all, 9.9 kpps per stream (was: 19.8 kpps each, twice the load).
    a = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    b = _stream(1, "memif:/b,id=0", "memif:/b,id=1")
    spawned, c = _measure([a, b], load=19_800)
    assert _rates(spawned) == ["9900"]  # one process per core, the rate is per stream
    assert c.offered_total_pps == 19_800 and c.streams == 2
    assert c.tx_total_pps == 2000 and c.rx_total_pps == 2000  # aggregates


def test_bidirectional_runs_one_process_per_port_pair():
    # Each direction used to be its own txrx opening both ports: an AF_XDP
    # queue or a memif id takes one client, so the second failed.
    fwd = _stream(0, "afxdp:t0", "afxdp:t1", name="t0>t1")
    rev = gen.Stream(tx_port="afxdp:t1", rx_port="afxdp:t0", tx_ns="t", rx_ns="t",
                     src_mac="02:00:00:00:00:02", dst_mac="02:00:00:00:00:01", id=1,
                     tx_cpu=0, rx_cpu=0, reverse_of=0, name="t1>t0")
    spawned, c = _measure([fwd, rev], load=20_000)
    assert len(spawned) == 1
    (args,) = spawned
    assert args[1] == "txrx" and "--bidir" in args
    assert args[args.index("--src-mac2") + 1] == "02:00:00:00:00:02"
    assert _rates(spawned) == ["10000"]  # per direction
    assert c.sent == 2000 and c.received == 2000
    # loss and latency per direction
    assert [s["id"] for s in c.extra["streams"]] == [0, 1]
    assert [s["name"] for s in c.extra["streams"]] == ["t0>t1", "t1>t0"]


def _bidir_pair(sid: int, a: str, b: str, cpu: int = 0) -> list[gen.Stream]:
    mac = f"02:00:00:00:00:{sid:02x}"
    peer = f"02:00:00:00:01:{sid:02x}"
    fwd = gen.Stream(tx_port=a, rx_port=b, tx_ns="t", rx_ns="t", src_mac=mac, dst_mac=peer,
                     id=sid, tx_cpu=cpu, rx_cpu=cpu, name=f"{sid}>")
    rev = gen.Stream(tx_port=b, rx_port=a, tx_ns="t", rx_ns="t", src_mac=peer, dst_mac=mac,
                     id=sid + 1, tx_cpu=cpu, rx_cpu=cpu, reverse_of=sid, name=f"{sid}<")
    return [fwd, rev]


def test_pairs_on_one_core_are_driven_by_one_process():
    # NvsN on 2 CPUs: a txrx per pair, both busy-polling on the tester's
    # core, took turns of a time slice; a frame that came back between one's
    # slices waited for the next (ms of p99 that were the tester's)
    streams = _bidir_pair(0, "memif:/a,id=0", "memif:/a,id=1") + \
        _bidir_pair(2, "memif:/b,id=0", "memif:/b,id=1")
    spawned, c = _measure(streams, load=40_000)
    assert len(spawned) == 1
    (args,) = spawned
    assert args[args.index("--stream") + 1] == "0" and "--bidir" in args
    assert args[args.index("--pair") + 1] == (
        "port=memif:/b,id=0;rx-port=memif:/b,id=1;stream=2;src-mac=02:00:00:00:00:02;"
        "dst-mac=02:00:00:00:01:02;src-mac2=02:00:00:00:01:02;dst-mac2=02:00:00:00:00:02")
    assert _rates(spawned) == ["10000"]  # per stream, four streams
    assert c.sent == 4000 and c.received == 4000
    assert [s["id"] for s in c.extra["streams"]] == [0, 1, 2, 3]
    assert c.extra["tester_core_sharing"] == 1
    setup = c.extra["tester_setup"]["processes"]
    assert len(setup) == 1 and ";src-mac=MAC;dst-mac=MAC;src-mac2=MAC;dst-mac2=MAC" in setup[0]
    # the Python reference tester has no --pair; pairs on two cores or
    # sharing a port stay apart
    assert len(gen.plan_tasks(streams, multi_pair=False)) == 2
    apart = _bidir_pair(0, "memif:/a,id=0", "memif:/a,id=1") + \
        _bidir_pair(2, "memif:/b,id=0", "memif:/b,id=1", cpu=1)
    assert len(gen.plan_tasks(apart)) == 2
    shared = _bidir_pair(0, "memif:/a,id=0", "memif:/a,id=1") + \
        _bidir_pair(2, "memif:/a,id=0", "memif:/b,id=1")
    assert len(gen.plan_tasks(shared)) == 2
    semicolon = _bidir_pair(0, "memif:/a,id=0", "memif:/a,id=1") + \
        _bidir_pair(2, "memif:/b;c,id=0", "memif:/b;c,id=1")
    assert len(gen.plan_tasks(semicolon)) == 2
    one_way = [streams[0], streams[2]]
    (t,) = gen.plan_tasks(one_way)
    assert not t.bidir and gen.pair_args(t) == [
        "--pair", "port=memif:/b,id=0;rx-port=memif:/b,id=1;stream=2;"
        "src-mac=02:00:00:00:00:02;dst-mac=02:00:00:00:01:02"]


def test_duplicates_do_not_hide_losses_and_unsent_frames_are_the_testers(monkeypatch):
    class Lossy(_FakeProc):
        full = 50  # due but the port was full: never sent
        per_stream: ClassVar[dict[int, dict]] = {0: _stream_doc(0, 1000, lost=10, dup=10)}

    _, c = _measure([_stream(0, "afxdp:a", "afxdp:b")], load=1050, proc=Lossy)
    # 1000 sent, 990 distinct arrived (10 of the 1000 received were
    # duplicates), 10 lost (was: sent - received = 0 lost)
    assert (c.sent, c.received, c.lost, c.duplicated) == (1000, 990, 10, 10)
    assert c.unsent == 50 and c.loss_ratio == pytest.approx(0.01)


def test_frames_lost_after_the_last_arrival_count_for_split_receivers():
    class Tail(_FakeProc):
        # an rx process only sees gaps below its highest sequence number
        per_stream: ClassVar[dict[int, dict]] = {0: _stream_doc(0, received=900, lost=0)}

    s = _stream(0, "afxdp:a", "afxdp:b")
    s.rx_cpu = 3
    _, c = _measure([s], proc=Tail)
    assert (c.sent, c.received, c.lost) == (1000, 900, 100)


def test_latency_merges_every_streams_histogram():
    # Stream 1 is slow: its tail used to vanish (only the first stream's
    # latency was stored).
    class TwoLatencies(_FakeProc):
        per_stream: ClassVar[dict[int, dict]] = {
            0: _stream_doc(0, 1000, hist=[[1000, 1000]]),
            1: _stream_doc(1, 1000, hist=[[1000, 979], [50_000, 21]])}

    a = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    b = _stream(1, "memif:/b,id=0", "memif:/b,id=1")
    _, c = _measure([a, b], proc=TwoLatencies)
    assert c.latency_ns["p50"] == 1000
    assert c.latency_ns["p99"] == 50_000  # 21 of 2000 frames are slow: more than 1 %
    assert c.latency_ns["max"] == 50_000
    assert c.latency_cdf[-1] == [50_000.0, 1.0]
    assert {s["id"]: s["latency_ns"]["p99"] for s in c.extra["streams"]} == {0: 1000, 1: 50_000}


def test_merge_latency_percentiles():
    m = gen.merge_latency([[[10, 50], [20, 49], [30, 1]], [[10, 100]]])
    assert (m["p50"], m["p99"], m["p999"]) == (10.0, 20.0, 30.0)
    assert m["cdf"][-1] == [30.0, 1.0]


def test_chain_vnf_drops_are_accounted_apart():
    before = {"fwd": {"directions": [{"name": "a_to_b", "received": 100, "packets": 100,
                                      "dropped_tx_full": 0, "dropped_oversize": 0,
                                      "dropped_runt": 0}]}, "thread_cpu_ns": 10**9}
    after = {"fwd": {"directions": [{"name": "a_to_b", "received": 1100, "packets": 1070,
                                     "dropped_tx_full": 30, "dropped_oversize": 0,
                                     "dropped_runt": 0}]}, "thread_cpu_ns": 2 * 10**9}
    d = gen.vnf_delta(before, after)
    assert (d["received"], d["forwarded"], d["dropped"], d["cpu_s"]) == (1000, 970, 30, 1.0)
    assert "sleeps" not in d  # a polling VNF's document has none
    assert gen.vnf_delta(None, after) == {"error": "no snapshot"}


def test_an_interrupt_mode_vnf_counts_its_sleeps():
    """An interrupt-mode VNF's sleeps between the snapshots: each one a
    wake-up the switch paid for with a kick (unless it timed out), to set
    against the switch's kicks (extra.sut_wake.ports)."""
    fwd = {"directions": [{"name": "a_to_b", "received": 0, "packets": 0}]}
    before = {"fwd": fwd, "thread_cpu_ns": 0, "sleeps": 40}
    after = {"fwd": fwd, "thread_cpu_ns": 0, "sleeps": 1040}
    assert gen.vnf_delta(before, after)["sleeps"] == 1000


def test_sink_takes_are_counted():
    """A mirror sink (turnout-gen rx): every frame it took between the
    snapshots, warm-up and foreign frames included; it forwards and drops
    nothing."""
    before = {"rx": {"packets": 10, "warmup": 5, "foreign": 1, "lost": 3},
              "thread_cpu_ns": 0}
    after = {"rx": {"packets": 1010, "warmup": 105, "foreign": 2, "lost": 900},
             "thread_cpu_ns": 5 * 10**8}
    d = gen.vnf_delta(before, after)
    assert (d["received"], d["forwarded"], d["dropped"], d["cpu_s"]) == (1101, 0, 0, 0.5)


def test_cpu_is_cut_to_the_traffic_window():
    # The SUT thread burned 10 ticks per 100 ms for the whole trial, but the
    # traffic window is 0.5 s of the 2 s: the figure must be 0.5 s × 100 %
    # of that window, not the whole trial's CPU over its wall time.
    s = CpuSampler({"sut": [7]})
    for i in range(21):  # a sample every 100 ms over 2 s, 10 ticks each
        t = 1_000_000_000 + i * 100_000_000
        s.samples.append((t, {70: CpuSample(7, 70, "w", utime=10 * i, stime=0, cpu=1)}))
    (row,) = s.window(1_500_000_000, 2_000_000_000)
    assert row["cpu_s"] == pytest.approx(0.5) and row["util"] == pytest.approx(1.0)
    assert row["role"] == "sut"
    # interpolated between samples
    (row,) = s.window(1_050_000_000, 1_150_000_000)
    assert row["cpu_s"] == pytest.approx(0.1)


def test_cpu_counts_the_schedulers_ns_not_the_ticks():
    """A thread asleep between frames runs 2 ms in a 0.4 s window: no 10 ms
    tick of utime/stime moves, schedstat's run time does. The total comes
    from it; the ticks only split user and system time."""
    s = CpuSampler({"sut": [7]})
    for i in range(5):  # every 100 ms: 0.5 ms more on a CPU, no tick
        t = 1_000_000_000 + i * 100_000_000
        s.samples.append((t, {70: CpuSample(7, 70, "w", utime=3, stime=1, cpu=1,
                                            run_ns=5_000_000 + 500_000 * i)}))
    (row,) = s.window(1_000_000_000, 1_400_000_000)
    assert row["cpu_s"] == pytest.approx(0.002) and row["util"] == pytest.approx(0.005)
    assert row["user_s"] == 0 and row["sys_s"] == 0
    # a thread whose schedstat could not be read in one sample keeps the ticks
    s.samples[2][1][70] = CpuSample(7, 70, "w", utime=3, stime=1, cpu=1)
    (row,) = s.window(1_000_000_000, 1_400_000_000)
    assert row["cpu_s"] == 0
    # the real /proc: this thread's own run time is there and grows
    from turnout.measure.cpu import sample_threads

    me = sample_threads([os.getpid()])
    assert all(x.run_ns > 0 for x in me.values())


def test_the_cpu_sampler_keeps_its_files_and_reads_stat_only_now_and_then():
    """Samples between the first and the last read schedstat only, through
    files kept open (a sample runs on the tester's CPU); stat comes every
    STAT_EVERY-th sample and in the last; a thread that ends has its files
    closed, and the window's figures stay the scheduler's ns."""
    import threading

    from turnout.hosts.procfs import Kept

    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin)
    short = threading.Event()
    brief = threading.Thread(target=short.wait)
    busy.start()
    brief.start()
    def gone(t: threading.Thread) -> None:
        # join returns when Python is done with the thread; the kernel's
        # task may still be exiting for a moment
        t.join()
        deadline = time.monotonic() + 10
        while os.path.exists(f"/proc/{os.getpid()}/task/{t.native_id}"):
            assert time.monotonic() < deadline, "the thread's task never went"
            time.sleep(0.001)

    s = CpuSampler({"sut": [os.getpid()]}, every_s=3600)
    try:
        for i in range(2 * CpuSampler.STAT_EVERY):
            s._take()
            if i == 2:
                short.set()
                gone(brief)
        t0 = time.monotonic_ns()
        time.sleep(0.05)
        t1 = time.monotonic_ns()
        s._take()
        s._last = True
        s._take()
    finally:
        stop.set()
        gone(busy)
        s.stop()
    tid = busy.native_id
    got = [smp[tid] for _, smp in s.samples]
    read_stat = [x.utime >= 0 for x in got]
    assert read_stat[0] and read_stat[CpuSampler.STAT_EVERY] and read_stat[-1]
    assert not any(read_stat[1:CpuSampler.STAT_EVERY])
    assert all(x.run_ns > 0 and x.name == got[0].name for x in got)
    assert [x.run_ns for x in got] == sorted(x.run_ns for x in got)
    assert got[-1].run_ns > got[-3].run_ns  # a fresh read each time, not a cached one
    assert brief.native_id not in s.samples[-1][1]
    assert not s._files.fds  # closed at stop
    (row,) = [r for r in s.window(t0, t1) if r["tid"] == tid]
    assert 0.3 < row["util"] <= 1.01  # busy: most of the 50 ms, by schedstat
    # a thread gone between full samples: its kept files go at the next sweep
    k = Kept()
    assert k.read(f"/proc/{os.getpid()}/task/{tid}/stat", 4096) is None  # ended
    assert k.read(f"/proc/{os.getpid()}/stat", 4096) and len(k.fds) == 1
    k.sweep()
    assert len(k.fds) == 1
    k.sweep()
    assert not k.fds
    # past its cap (a SUT with very many threads) a file is read, not kept
    k.cap = 1
    assert k.read(f"/proc/{os.getpid()}/stat", 4096) and len(k.fds) == 1
    assert k.read(f"/proc/{os.getpid()}/status", 4096).startswith("Name:")
    assert list(k.fds) == [f"/proc/{os.getpid()}/stat"]
    k.close()


def test_the_native_sampler_gives_what_the_python_one_gives():
    """turnout-sample (a process of its own) samples the same threads the
    same way: a busy thread's run time between two samples, its name, stat
    in the first, the last and every STAT_EVERY-th sample, and what the
    sampling itself cost."""
    import threading

    from turnout import testpeers
    from turnout.measure.cpu import NativeCpuSampler, find_sampler

    binary = find_sampler()
    testpeers.need(binary, "turnout-sample is not built (scripts/setup.sh builds it)")
    assert binary is not None
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            pass

    busy = threading.Thread(target=spin, name="spinner")
    busy.start()
    s = NativeCpuSampler(binary, {"sut": [os.getpid()]}, every_s=0.005).start()
    try:
        assert s._proc is not None
        # a sample is a wake-up of the sampler: wait for 30 of them
        deadline = time.monotonic() + 60
        while True:
            with open(f"/proc/{s._proc.pid}/schedstat") as f:
                runs = int(f.read().split()[2])
            if runs >= 30:
                break
            assert time.monotonic() < deadline, f"turnout-sample ran {runs} times in 60 s"
            time.sleep(0.01)
    finally:
        stop.set()
        busy.join()
        s.stop()
    assert not s.error, s.error
    tid = busy.native_id
    got = [(t, smp[tid]) for t, smp in s.samples if tid in smp]
    assert len(got) >= 10 and all(x.name for _, x in got)
    read_stat = [x.utime >= 0 for _, x in got]
    assert read_stat[0] and read_stat[NativeCpuSampler.STAT_EVERY]
    assert not any(read_stat[1:NativeCpuSampler.STAT_EVERY])
    runs = [x.run_ns for _, x in got]
    assert runs == sorted(runs) and runs[-1] > runs[0]
    # the window between two samples is their difference, exactly
    (t0, a), (t1, b) = got[1], got[-2]
    (row,) = [r for r in s.window(t0, t1) if r["tid"] == tid]
    assert row["cpu_s"] == pytest.approx((b.run_ns - a.run_ns) / 1e9, abs=1e-6)
    assert row["cpu_s"] > 0 and row["role"] == "sut"
    assert s.cost["sampling_ns"] > 0 and s.cost["cpu_ns"] > 0
    # a process that does not exist: no rows, no error
    gone = NativeCpuSampler(binary, {"sut": [2**22 + 1]}).start()
    gone.stop()
    assert not gone.error and gone.window(t0, t1) == []


def test_a_ready_line_cut_by_starts_deadline_is_finished_by_stop(tmp_path, monkeypatch):
    """``start`` gives up on ``ready`` at its deadline, possibly mid-line;
    ``stop`` reads on from where it stopped (not from a fresh line, which
    would read "dy" and call the sampler never ready)."""
    import stat

    from turnout.measure.cpu import NativeCpuSampler

    fake = tmp_path / "turnout-sample"
    fake.write_text(
        "#!/usr/bin/env python3\n"
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, lambda *_: (print('not json'), sys.exit(3)))\n"
        "sys.stdout.write('rea'); sys.stdout.flush(); time.sleep(0.6)\n"
        "sys.stdout.write('dy\\n'); sys.stdout.flush()\n"
        "while True: time.sleep(1)\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(NativeCpuSampler, "READY_S", 0.3)
    s = NativeCpuSampler(str(fake), {"sut": [1]}).start()
    assert not s._ready and s._line == b"rea"
    monkeypatch.setattr(NativeCpuSampler, "READY_S", 10.0)
    s.stop()
    # ready, then a document that is not one: the error says so, not "before it was ready"
    assert s.error.startswith("turnout-sample exited 3:"), s.error


def test_trial_cpu_rows_name_their_role():
    _, c = _measure([_stream(0, "memif:/a,id=0", "memif:/a,id=1")])
    tester = [r for r in c.cpu if r["role"] == "tester"]
    assert tester and tester[0]["cpu_s"] == pytest.approx(0.9)
    assert tester[0]["util"] == pytest.approx(0.9)


def test_the_bench_threads_leave_the_suts_cpus_during_a_trial():
    """The bench's own threads (the one that spawns the tester, the CPU and
    cost samplers) run off the SUT's CPUs while a trial runs, and the
    caller's CPU set is back afterwards (docs/bench.md, "Latency at low
    rates": a busy-polling SUT preempted by them made frames wait)."""
    import os
    import threading

    from turnout.measure.cost import CostSample

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: nothing to keep the bench off")
    sut = cpus[-1:]
    seen: dict[str, set[int]] = {}

    def spawn(args, netns=None):
        seen["spawn"] = os.sched_getaffinity(0)
        return _FakeProc(list(args))

    def probe() -> CostSample:
        seen[threading.current_thread().name] = os.sched_getaffinity(0)
        return CostSample(0.0, 0.0, 0)

    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[s], spawn=spawn, cooldown_s=0,
                        sut_cost=probe, avoid_cpus=sut)
    c = m.measure(1.0, 0.0)
    assert sut[0] not in seen["spawn"] and seen["spawn"]
    samplers = [v for k, v in seen.items() if k != "spawn"]
    assert samplers and all(sut[0] not in v and v for v in samplers), seen
    assert c.extra["bench_cpus"] == ",".join(str(x) for x in cpus[:-1])
    assert sorted(os.sched_getaffinity(0)) == cpus


def test_the_run_queue_wait_is_the_data_paths_when_the_sut_pins_threads():
    """sut_sched counts the SUT's threads pinned to its CPUs (workers, PMD
    threads) when it has such: its other threads now share the tester's
    busy core and wait there, which is not the SUT's latency."""
    import os
    import threading

    from turnout.measure.cpu import pinned_threads, run_queue_wait

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        pytest.skip("one CPU: no thread can be pinned apart")
    ready, done = threading.Event(), threading.Event()
    tid: list[int] = []

    def worker() -> None:
        os.sched_setaffinity(0, {cpus[-1]})
        tid.append(threading.get_native_id())
        ready.set()
        done.wait(10)

    t = threading.Thread(target=worker)
    t.start()
    try:
        assert ready.wait(10)
        me = os.getpid()
        assert pinned_threads([me], [cpus[-1]]) == tid
        assert pinned_threads([me], []) == []
        # the main thread may run anywhere: it is no data path thread
        assert threading.get_native_id() not in pinned_threads([me], cpus[-1:])
        _, only = run_queue_wait([me], tid)
        _, every = run_queue_wait([me])
        assert 0 < only < every
    finally:
        done.set()
        t.join()


def test_a_trial_keeps_how_the_sut_waited():
    """extra.sut_wake: the SUT's wake-up state after the traffic (turnoutd's
    regime, why, the wake-up p99 it decided on) and its sleep counters over
    the traffic, read before and after it (the regime a trial really ran
    in, not guessed from its CPU)."""
    reads: list[int] = []

    def state() -> dict:
        n = len(reads)
        reads.append(n)
        return {"workers": [{"packets": 1000 * n, "sleeps": 7 * n, "wakeups": 5 * n,
                             "naps": 0, "batches": 3 * n, "wake_samples": 64 + 2 * n,
                             "regime": ["interrupt", "poll"][min(n, 1)],
                             "why": ["wake_fits", "wake_over_budget"][min(n, 1)],
                             "wake_p99_ns": 40_000 + 1_000_000 * n}]}

    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[s],
                        spawn=lambda args, netns=None: _FakeProc(list(args)), cooldown_s=0,
                        sut_wake=state)
    c = m.measure(1.0, 10_000)
    assert len(reads) == 2
    (w,) = c.extra["sut_wake"]["workers"]
    assert (w["packets"], w["sleeps"], w["wakeups"], w["wake_samples"]) == (1000, 7, 5, 2)
    assert (w["regime"], w["why"], w["wake_p99_ns"]) == ("poll", "wake_over_budget", 1_040_000)

    def gone() -> dict:
        raise OSError("connection refused")

    m.sut_wake = gone
    assert "connection refused" in m.measure(1.0, 10_000).extra["sut_wake"]["error"]
    m.sut_wake = None
    assert "sut_wake" not in m.measure(1.0, 10_000).extra
    assert gen.wake_delta(None, None) is None
    assert "ports" not in gen.wake_delta({"workers": []}, {"workers": []})


def test_a_trial_keeps_where_the_sut_dropped():
    """extra.sut_drops: the SUT's drop counters over the trial, read before
    the traffic and after the receivers' cool-down; only those that grew."""
    reads = iter([{"t0 kernel_rx_ring_full": 5, "v0 tx_full": 1, "v0 no_route": 2},
                  {"t0 kernel_rx_ring_full": 120, "v0 tx_full": 1, "v0 no_route": 2,
                   "v1 oversize": 3}])
    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[s],
                        spawn=lambda args, netns=None: _FakeProc(list(args)), cooldown_s=0,
                        sut_drops=lambda: next(reads))
    c = m.measure(1.0, 10_000)
    assert c.extra["sut_drops"] == {"t0 kernel_rx_ring_full": 115, "v1 oversize": 3}

    def gone() -> dict:
        raise OSError("connection refused")

    m.sut_drops = gone  # a SUT that cannot say: no claim either way
    assert "sut_drops" not in m.measure(1.0, 10_000).extra


def test_a_trial_keeps_the_kicks_the_sut_paid():
    """extra.sut_wake.ports: frames sent and kicks (eventfd writes, sendto)
    per port over the traffic; a port that appeared between the reads
    counts from 0."""
    before = {"workers": [], "ports": [
        {"name": "v0a", "kind": "memif", "tx_packets": 100, "tx_kicks": 10}]}
    after = {"workers": [], "ports": [
        {"name": "v0a", "kind": "memif", "tx_packets": 2100, "tx_kicks": 60},
        {"name": "t1", "kind": "af_xdp", "tx_packets": 2000, "tx_kicks": 40}]}
    d = gen.wake_delta(before, after)
    assert d is not None
    assert d["ports"] == [
        {"name": "v0a", "kind": "memif", "tx_packets": 2000, "tx_kicks": 50},
        {"name": "t1", "kind": "af_xdp", "tx_packets": 2000, "tx_kicks": 40}]


def test_turnoutds_wake_state_is_its_workers_policy_and_sleep_counters(monkeypatch):
    import os

    from turnout.sut import turnoutd

    stats = {"workers": [
        {"packets": 5_000, "batches": 4_000, "sleeps": 3_000, "wakeups": 2_900, "naps": 0,
         "backoffs": 7, "busy_cycles": 1, "policy": {"regime": "interrupt", "why": "wake_fits",
                                      "wake_p99_ns": 90_000, "wake_samples": 80,
                                      "budget_ns": 100_000}}],
        "ports": [{"name": "v0a", "kind": "memif", "tx_packets": 5_000,
                   "backend": {"tx_kicks": 70, "rx_frames": 0}},
                  {"name": "p", "kind": "pipe", "tx_packets": 9, "backend": {}}]}
    monkeypatch.setattr(turnoutd, "rpc", lambda sock, method, *a, **k: stats)
    t = turnoutd.Turnoutd()
    t.sock = "/nonexistent"
    monkeypatch.setattr(t, "pids", lambda: [os.getpid()])
    st = t.wake_state()
    assert st is not None
    (w,) = st["workers"]
    assert (w["packets"], w["sleeps"], w["wakeups"], w["wake_samples"]) == (5_000, 3_000,
                                                                            2_900, 80)
    assert w["backoffs"] == 7
    assert (w["regime"], w["why"], w["wake_p99_ns"], w["budget_ns"]) == (
        "interrupt", "wake_fits", 90_000, 100_000)
    assert "busy_cycles" not in w
    # the ports that kick, with their kicks (a port without the counter is left out)
    assert st["ports"] == [{"name": "v0a", "kind": "memif", "tx_packets": 5_000,
                            "tx_kicks": 70}]
    monkeypatch.setattr(t, "pids", lambda: [])
    assert t.wake_state() is None


def test_the_regime_is_read_while_the_traffic_flows():
    """A worker that napped under the traffic may sleep on notifications
    once it stopped: extra.sut_wake takes regime, why and wake-up p99 from
    a read in the traffic window's last quarter (state_at "traffic"), the
    counters from before and after; without that read (senders done
    first) from after (state_at "after")."""
    import time as _time

    reads: list[float] = []

    def state() -> dict:
        reads.append(_time.monotonic())
        n = len(reads)
        regime, why = (("moderate", "naps_cheaper") if n == 2
                       else ("interrupt", "wake_fits"))
        return {"workers": [{"packets": 1000 * (n - 1), "sleeps": 3 * (n - 1), "wakeups": 0,
                             "naps": 90 * (n - 1), "batches": 90 * (n - 1), "wake_samples": 0,
                             "regime": regime, "why": why, "wake_p99_ns": 40_000 * n}]}

    class _SlowProc(_FakeProc):
        def communicate(self, timeout=None):
            _time.sleep(0.4)
            return super().communicate(timeout)

    s = _stream(0, "memif:/a,id=0", "memif:/a,id=1")
    m = gen.GenMeasurer(cmd=["turnout-gen"], streams=[s],
                        spawn=lambda args, netns=None: _SlowProc(list(args)), cooldown_s=0,
                        sut_wake=state)
    c = m.measure(0.2, 10_000)
    assert len(reads) == 3  # before, in the window (0.15 s in), after
    d = c.extra["sut_wake"]
    (w,) = d["workers"]
    assert d["state_at"] == "traffic"
    assert (w["regime"], w["why"], w["wake_p99_ns"]) == ("moderate", "naps_cheaper", 80_000)
    assert (w["packets"], w["naps"], w["sleeps"]) == (2000, 180, 6)  # after − before
    reads.clear()
    m.spawn = lambda args, netns=None: _FakeProc(list(args))  # done at once: no read inside
    d = m.measure(5.0, 10_000).extra["sut_wake"]
    assert len(reads) == 2 and d["state_at"] == "after"
    assert d["workers"][0]["regime"] == "moderate"  # the second read, after the traffic
