"""turnoutd's memif ports against the real peer, DPDK testpmd (net_memif,
client role, no hugepages): txonly → rxonly through patch and bridge with
64 B and 9000 B frames in both wake-up modes, a mac-forwarding loop, and
kill -9 of one peer under load. Counts must agree with turnoutd's
counters; every drop must be one the design allows (a full or detached
destination) and counted under its reason.

Skipped with a message when dpdk-testpmd is not installed or we are not
root. Every process is ended by PID and every /var/run/dpdk/<prefix>
removed, also on failure (the harness's context managers).

Run: cargo build -p turnoutd && .venv/bin/pytest python/tests/turnoutd
"""

from __future__ import annotations

import contextlib
import os
import time

import pytest
from harness import TESTPMD, Testpmd, Turnoutd, port_toml, turnoutd_binary, wait_for

from turnout import testpeers

pytestmark = pytest.mark.system


@pytest.fixture(autouse=True)
def _peers():
    """testpmd and root: skip without them, fail under TURNOUT_REQUIRE_PEERS=1."""
    testpeers.need(TESTPMD, "dpdk-testpmd not installed (Debian dpdk-dev)")
    testpeers.need(os.geteuid() == 0, "testpmd needs root for /var/run/dpdk")

# 9000-byte frames: one 9000 B segment per mbuf on the generator side. The
# generator's memif buffers hold a whole frame (bsize=9216): DPDK 22.11's
# memif tx overruns the ring with multi-descriptor frames when it is nearly
# full (docs/memif.md), which turnoutd rightly treats as a violation. Towards
# the sink (2048 B buffers) turnoutd chains each frame over 5 descriptors.
JUMBO = {"mbuf_size": 10240, "extra": ["--txpkts=9000"]}
JUMBO_VDEV = {"bsize": 9216}


def config(logic: str, wakeup: str, ports: list[tuple[str, int]], cpu: int = 1) -> str:
    lines = [
        "[switch]",
        'control_socket = "@CTL@"',
        f'wakeup = "{wakeup}"',
        "",
        "[[workers]]",
        f"cpu = {cpu}",
        "",
        "[logic]",
        f'name = "{logic}"',
    ]
    if logic == "patch":
        names = [n for n, _ in ports]
        pairs = ", ".join(f'["{names[i]}", "{names[i + 1]}"]' for i in range(0, len(names), 2))
        lines.append(f"pairs = [{pairs}]")
    text = "\n".join(lines) + "\n\n"
    for name, ifid in ports:
        text += port_toml(name, "@DIR@/memif.sock", ifid) + "\n"
    return text


@pytest.fixture
def binary():
    try:
        return turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))


def link_up(d: Turnoutd, name: str) -> bool:
    return any(p["name"] == name and p["link_up"] for p in d.rpc("port.list"))


def links_up(d: Turnoutd, names: list[str], pmds: list[Testpmd], timeout_s: float) -> None:
    """Waits until every port in ``names`` has its link up; on timeout says
    what each side saw: each port's link and connection counters, whether
    each testpmd still runs and the end of its log, and the end of
    turnoutd's."""
    try:
        wait_for(f"memif links {', '.join(names)} up", timeout_s,
                 lambda: all(link_up(d, n) for n in names))
    except AssertionError as e:
        ports = {p["name"]: (p["link_up"], {k: v for k, v in d.port(p["name"])["backend"].items()
                                            if v and not k.startswith("rx_")})
                 for p in d.rpc("port.list") if p["name"] in names}
        pmd = [(t.name, "running" if t.alive() else f"exited {t.proc and t.proc.returncode}",
                t.log()[-1500:]) for t in pmds]
        raise AssertionError(f"{e}\nturnoutd ports: {ports}\ntestpmds: {pmd}\n"
                             f"turnoutd log: {d.log()[-2000:]}") from None


def settled(d: Turnoutd, names: list[str], quiet_s: float = 0.5) -> dict[str, dict]:
    """Waits until the ports' counters stop moving; returns them."""
    last = None
    end = time.monotonic() + 10
    while time.monotonic() < end:
        snap = {n: d.port(n) for n in names}
        key = [(p["rx_packets"], p["tx_packets"], sum(p["drops"].values())) for p in snap.values()]
        if key == last:
            return snap
        last = key
        time.sleep(quiet_s)
    raise AssertionError("turnoutd's counters did not settle")


def allowed_drops(p: dict) -> int:
    """Drops a destination may take by design; everything else must be 0."""
    other = {k: v for k, v in p["drops"].items() if v and k not in ("tx_full", "link_down")}
    assert not other, f"{p['name']}: unexpected drops {other}"
    return p["drops"]["tx_full"] + p["drops"]["link_down"]


def no_violations(p: dict) -> None:
    assert p["backend"].get("violations", 0) == 0, p["backend"]


CASES = [
    ("patch", "adaptive", 64),
    ("bridge", "adaptive", 64),
    ("patch", "poll", 64),
    ("bridge", "poll", 64),
    ("patch", "adaptive", 9000),
    ("bridge", "poll", 9000),
]


@pytest.mark.parametrize(("logic", "wakeup", "size"), CASES)
def test_txonly_to_rxonly(tmp_path, binary, logic, wakeup, size):
    cfg = config(logic, wakeup, [("vnf0", 0), ("vnf1", 1)])
    jumbo = JUMBO if size > 2000 else {}
    gen_vdev = JUMBO_VDEV if size > 2000 else {}
    with Turnoutd(tmp_path / "td", cfg, binary) as d:
        sock = str(d.dir / "memif.sock")
        with (
            Testpmd(tmp_path, "rx", [Testpmd.memif(sock, 1)], "rxonly") as rx,
            Testpmd(tmp_path, "tx", [Testpmd.memif(sock, 0, **gen_vdev)], "txonly", **jumbo) as tx,
        ):
            links_up(d, ["vnf0", "vnf1"], [rx, tx], 20)
            want = 20_000 if size < 2000 else 3_000
            wait_for(
                f"{want} frames through turnoutd",
                20,
                lambda: d.port("vnf1")["tx_packets"] >= want,
            )
            txc = tx.stop(settle=lambda: settled(d, ["vnf0", "vnf1"]))
            s = settled(d, ["vnf0", "vnf1"])
            rxc = rx.stop()
        assert txc is not None and rxc is not None, (tx.log()[-600:], rx.log()[-600:])
        v0, v1 = s["vnf0"], s["vnf1"]
        for p in (v0, v1):
            no_violations(p)
        # every frame the generator put on the ring entered the switch
        assert v0["rx_packets"] == txc.tx_packets, (v0, txc)
        assert v0["rx_bytes"] == txc.tx_bytes == txc.tx_packets * size
        # received = sent + drops by reason (on the destination)
        assert allowed_drops(v0) == 0
        assert v0["rx_packets"] == v1["tx_packets"] + allowed_drops(v1), (v0, v1)
        # every frame turnoutd sent, the sink received
        assert rxc.rx_packets == v1["tx_packets"], (rxc, v1)
        assert rxc.rx_bytes == v1["tx_bytes"] == v1["tx_packets"] * size


def test_mac_forwarding_loop(tmp_path, binary):
    """Two testpmd in mac mode bounce frames through patch: a chain whose
    every hop is counted."""
    cfg = config("patch", "adaptive", [("vnf0", 0), ("vnf1", 1)])
    with Turnoutd(tmp_path / "td", cfg, binary) as d:
        sock = str(d.dir / "memif.sock")
        with Testpmd(tmp_path, "b", [Testpmd.memif(sock, 1)], "mac") as b:
            wait_for("vnf1 up", 20, lambda: link_up(d, "vnf1"))
            with Testpmd(tmp_path, "a", [Testpmd.memif(sock, 0)], "mac", auto_start=False) as a:
                wait_for("vnf0 up", 20, lambda: link_up(d, "vnf0"))
                a.command("start tx_first 16")

                def looping() -> bool:
                    return min(d.port(n)["rx_packets"] for n in ("vnf0", "vnf1")) > 50_000

                wait_for("frames looping both ways", 20, looping)
                # a stops forwarding first: the frames in flight end on its ring
                ac = a.stop(settle=lambda: settled(d, ["vnf0", "vnf1"]))
            bc = b.stop(settle=lambda: settled(d, ["vnf0", "vnf1"]))
        s = settled(d, ["vnf0", "vnf1"])
        v0, v1 = s["vnf0"], s["vnf1"]
        assert ac is not None and bc is not None
        for p in (v0, v1):
            no_violations(p)
        assert v0["rx_packets"] == v1["tx_packets"] + allowed_drops(v1)
        assert v1["rx_packets"] == v0["tx_packets"] + allowed_drops(v0)
        # what each testpmd forwarded entered turnoutd
        assert v0["rx_packets"] == ac.tx_packets and v1["rx_packets"] == bc.tx_packets
        # each received at most what turnoutd sent it (the rest was on its ring when it stopped)
        assert 0 < ac.rx_packets <= v0["tx_packets"] and 0 < bc.rx_packets <= v1["tx_packets"]


def test_kill9_one_peer_under_load(tmp_path, binary):
    """Two txonly → rxonly pairs; kill -9 one sink: the other pair keeps
    forwarding, the killed port's frames are dropped as link_down, and a
    restarted sink reconnects and receives again."""
    cfg = config("patch", "adaptive", [("a0", 0), ("a1", 1), ("b0", 2), ("b1", 3)])
    with Turnoutd(tmp_path / "td", cfg, binary) as d:
        sock = str(d.dir / "memif.sock")
        with contextlib.ExitStack() as st:
            sink_a = st.enter_context(Testpmd(tmp_path, "sa", [Testpmd.memif(sock, 1)], "rxonly"))
            sink_b = st.enter_context(Testpmd(tmp_path, "sb", [Testpmd.memif(sock, 3)], "rxonly"))
            gen_a = st.enter_context(Testpmd(tmp_path, "ga", [Testpmd.memif(sock, 0)], "txonly"))
            gen_b = st.enter_context(Testpmd(tmp_path, "gb", [Testpmd.memif(sock, 2)], "txonly"))
            links_up(d, ["a0", "a1", "b0", "b1"], [sink_a, sink_b, gen_a, gen_b], 30)
            wait_for("traffic on a1", 20, lambda: d.port("a1")["tx_packets"] > 10_000)
            sink_a.kill9()
            wait_for("a1 down after kill -9", 10, lambda: not link_up(d, "a1"))
            before = {n: d.port(n) for n in ("a0", "b0", "b1", "a1")}

            # the other pair keeps forwarding, a0 keeps receiving (waited
            # for: on a busy machine 10,000 frames may take longer than 1 s)
            def moved() -> dict[str, dict] | None:
                now = {n: d.port(n) for n in ("a0", "b0", "b1", "a1")}
                return now if (
                    now["b1"]["tx_packets"] - before["b1"]["tx_packets"] > 10_000
                    and now["a0"]["rx_packets"] - before["a0"]["rx_packets"] > 10_000) else None

            after = wait_for("b1 forwarding and a0 receiving 10,000 more", 20, moved)
            # a0's frames now die at a1 as link_down, counted
            assert after["a1"]["drops"]["link_down"] > before["a1"]["drops"]["link_down"]
            assert after["a1"]["tx_packets"] == before["a1"]["tx_packets"]
            assert after["a1"]["backend"]["peer_hangups"] >= 1
            # restart the sink: it reconnects on the same id and receives
            st.enter_context(Testpmd(tmp_path, "sa2", [Testpmd.memif(sock, 1)], "rxonly"))
            # a testpmd starting on a loaded machine may take tens of seconds
            wait_for("a1 up again", 60, lambda: link_up(d, "a1"))
            n = d.port("a1")["tx_packets"]
            wait_for("traffic on a1 again", 20, lambda: d.port("a1")["tx_packets"] > n + 10_000)
            assert d.port("a1")["backend"]["connects"] == 2
        # nothing left of the killed process
        assert not os.path.exists(f"/var/run/dpdk/{sink_a.prefix}")
        for p in d.rpc("stats")["ports"]:
            no_violations(p)
