"""The `flows` logic programmed over turnoutd's control socket, checked with
real traffic.

Three host namespaces h1, h2, h3 (10.0.0.1..3/24), each wired by a veth to
a switch namespace where turnoutd runs the `flows` logic over three
af_packet ports. The test adds, modifies and deletes flows with
`logic.command` (ovs-ofctl flow syntax) and checks each change with ping
and the flows' and ports' counters: a table miss drops as no_match, a drop
flow as policy, a higher-priority flow overrides, a strict delete restores,
a goto_table + set_field pipeline rewrites the destination MAC so a host
with a wrong static neighbour is reached, two outputs mirror, and bad flows are refused with a
clear error while the tables stay as they were.

Nothing outside the namespaces is touched; they (and their veths) are
deleted and turnoutd is ended by PID, also on failure. Needs root: missing,
it skips, or fails under TURNOUT_REQUIRE_PEERS=1 (docs/testing.md). Run:
cargo build --release -p turnoutd && .venv/bin/pytest -s python/tests/turnoutd/test_flows.py
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import RpcError, Turnoutd, turnoutd_binary
from threehosts import ThreeHosts, nx, ping, unanswered

from turnout import testpeers

pytestmark = pytest.mark.system

P = f"tof{os.getpid() % 100000}-"
MAC = {1: "02:00:00:0f:00:01", 2: "02:00:00:0f:00:02", 3: "02:00:00:0f:00:03"}


@pytest.fixture(autouse=True)
def _peers() -> None:
    testpeers.need_root()


class NsTurnoutd(Turnoutd):
    """turnoutd inside a namespace, with the flows logic's helpers."""

    def __init__(self, ns: str, workdir: Path, config: str) -> None:
        super().__init__(workdir, config, netns=ns)
        self.ns = ns

    def flows(self, cmd: str, args: object = None) -> dict:
        return self.rpc("logic.command", {"cmd": cmd, "args": args})

    def drops(self, port: str, reason: str) -> int:
        return self.port(port)["drops"].get(reason, 0)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[tuple[NsTurnoutd, dict[int, str], dict[str, int]]]:
    try:
        turnoutd_binary()
    except FileNotFoundError as e:
        pytest.fail(str(e))
    net = ThreeHosts(P, MAC)
    daemon: NsTurnoutd | None = None
    try:
        net.setup()
        daemon = NsTurnoutd(net.sw, tmp_path / "sw", ThreeHosts.config()).start()
        ids = {p["name"]: p["id"] for p in daemon.rpc("stats")["ports"]}
        yield daemon, net.hosts, ids
    finally:
        if daemon is not None:
            daemon.stop()
        net.close()


def test_flows_program_forwarding_and_drops(lab) -> None:
    d, h, ids = lab
    p1, p2, p3 = ids["p1"], ids["p2"], ids["p3"]

    # Empty tables: everything is a table miss.
    miss0 = d.drops("p1", "no_match")
    assert unanswered(h[1], "10.0.0.2", 1)
    assert d.drops("p1", "no_match") > miss0

    r = d.flows("add", {"flows": [
        "priority=10,arp,actions=flood",
        f"priority=10,ip,in_port={p1},nw_dst=10.0.0.2,actions=output:{p2}",
        f"priority=10,ip,in_port={p2},nw_dst=10.0.0.1,actions=output:{p1}",
        f"priority=10,ip,in_port={p3},nw_dst=10.0.0.1,actions=output:{p1}",
    ]})
    assert r == {"added": 4, "replaced": 0}
    assert ping(h[1], "10.0.0.2")
    # h3 resolves h1 (ARP floods) but h1 -> h3 has no flow: no_match on p1.
    miss0 = d.drops("p1", "no_match")
    assert unanswered(h[1], "10.0.0.3", 2)
    assert d.drops("p1", "no_match") >= miss0 + 2
    dump = d.flows("dump")
    by_text = {f["flow"]: f for f in dump["flows"]}
    fwd = by_text[f"table=0,priority=10,in_port={p1},ip,nw_dst=10.0.0.2,actions=output:{p2}"]
    assert fwd["n_packets"] >= 3 and fwd["n_bytes"] >= 3 * 98

    # A higher-priority drop wins; its strict delete restores forwarding.
    pol0 = d.drops("p1", "policy")
    d.flows("add", {"flow": "priority=20,icmp,nw_dst=10.0.0.2,actions=drop"})
    assert unanswered(h[1], "10.0.0.2", 2)
    assert d.drops("p1", "policy") >= pol0 + 2
    assert d.flows("delete", {"flow": "priority=10,icmp,nw_dst=10.0.0.2", "strict": True}) == \
        {"deleted": 0}
    assert d.flows("delete", {"flow": "priority=20,icmp,nw_dst=10.0.0.2", "strict": True}) == \
        {"deleted": 1}
    assert ping(h[1], "10.0.0.2")

    # goto_table + set_field: h1 believes 10.0.0.3 is at a MAC nobody has;
    # table 1 rewrites the destination to h3's real MAC.
    nx(h[1], "ip", "neigh", "replace", "10.0.0.3", "lladdr", "02:00:00:0f:00:99", "dev", "eth0")
    d.flows("add", {"flows": [
        f"table=0,priority=10,ip,in_port={p1},nw_dst=10.0.0.3,actions=goto_table:1",
        f"table=1,priority=5,dl_dst=02:00:00:0f:00:99,actions=set_field:{MAC[3]}->eth_dst,"
        f"output:{p3}",
    ]})
    assert ping(h[1], "10.0.0.3")
    t1 = [f for f in d.flows("dump", {"table": 1})["flows"]]
    assert len(t1) == 1 and t1[0]["n_packets"] >= 3

    # Non-strict modify redirects every h1 -> 10.0.0.2 flow to p3: h2 no longer answers.
    assert d.flows("modify", {"flow": "ip,nw_dst=10.0.0.2,actions=output:" + str(p3)}) == \
        {"modified": 1}
    assert unanswered(h[1], "10.0.0.2", 2)

    # Mirroring: two outputs in one action list (a group): h2 answers again
    # and p3 carries a copy of every echo request.
    assert d.flows("modify", {"flow": f"ip,nw_dst=10.0.0.2,actions=output:{p2},output:{p3}"}) == \
        {"modified": 1}
    tx3 = d.port("p3")["tx_packets"]
    assert ping(h[1], "10.0.0.2")
    assert d.port("p3")["tx_packets"] >= tx3 + 3

    # Bad flows: clear errors, nothing changes.
    def flows_now() -> list[dict]:
        # Without the durations (they grow).
        return [{k: v for k, v in f.items() if k != "duration"} for f in d.flows("dump")["flows"]]

    before = flows_now()
    for text, want in [
        ("nw_dst=10.0.0.1,actions=output:1", "missing prerequisite"),
        ("table=2,actions=goto_table:1", "must go to a table after table 2"),
        ("ip,actions=resubmit:3", "unsupported action"),
        ("ip,nw_dst=10.0.0.0/40,actions=drop", "longer than 32"),
    ]:
        with pytest.raises(RpcError) as e:
            d.flows("add", {"flows": ["priority=1,actions=drop", text]})
        assert want in e.value.message and text in e.value.message, e.value.message
    assert flows_now() == before

    # Delete everything: back to table misses.
    assert d.flows("delete")["deleted"] == len(before)
    assert unanswered(h[2], "10.0.0.1", 1)
