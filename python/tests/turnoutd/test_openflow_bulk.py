"""Bulk flow-mods into turnoutd ("bulk changes are one swap").

turnoutd applies the consecutive flow-mods it has read as one transaction
and one snapshot swap (crates/turnoutd/src/openflow/channel.rs, Flows::flow_mods),
each with its own error. Checked here against a real turnoutd running the
flows logic in the switch namespace of test_openflow.py's three-host lab:

- `ovs-ofctl -O OpenFlow13 add-flows` of 10,000 rules over one mask
  completes and dump-flows shows every one (the time is printed, not
  asserted: it was 17.6 s, quadratic, when each flow-mod copied its
  subtable);
- flow-mods sent back to back in one write, one of them refused, then a
  barrier: only the refused one gets an error, with its own xid, before the
  barrier reply; the others (an add, and a delete that sees an earlier add
  of the same batch) are in effect;
- flow-mods each followed by a barrier (as ovs-ofctl add-flows sends them;
  the barriers join the batch): the replies in message order.

Needs root and ovs-ofctl (scripts/setup.sh installs openvswitch-switch):
missing, it skips, or fails under TURNOUT_REQUIRE_PEERS=1. Run:
cargo build --release -p turnoutd && .venv/bin/pytest -s python/tests/turnoutd/test_openflow_bulk.py
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import OpenflowLab as Lab
from harness import openflow_lab
from test_openflow import flows_of, raw_conn, recv_msg
from threehosts import nx, ping

pytestmark = pytest.mark.system

RULES = 10_000


@pytest.fixture
def bulk(tmp_path: Path) -> Iterator[Lab]:
    # Own namespace prefix: runs next to test_openflow.py's lab.
    with openflow_lab(tmp_path, f"tofb{os.getpid() % 100000}-", {
            1: "02:00:00:0f:00:01", 2: "02:00:00:0f:00:02", 3: "02:00:00:0f:00:03"}) as lab:
        yield lab


def test_add_flows_of_ten_thousand_rules_over_one_mask(bulk: Lab) -> None:
    f = bulk.tmp / "bulk.txt"
    # One mask (ip, nw_dst exact), none of them 10.0.0.0/24: the lab's
    # hosts are reached by the two rules added after.
    f.write_text("".join(
        f"priority=10,ip,nw_dst=10.{1 + (i >> 16)}.{(i >> 8) & 255}.{i & 255},actions=output:3\n"
        for i in range(RULES)))
    t0 = time.monotonic()
    nx(bulk.sw, "ovs-ofctl", "-O", "OpenFlow13", "add-flows", bulk.target, str(f))
    took = time.monotonic() - t0
    load = os.getloadavg()[0]
    print(f"\nadd-flows of {RULES} rules over 1 mask: {took:.2f} s (load average {load:.1f})")
    # (dump-flows prints a header line per multipart reply: flows only.)
    fl = [x for x in flows_of(bulk) if "priority=" in x]
    assert len(fl) == RULES, len(fl)
    assert sum("nw_dst=10.1.39.15" in x for x in fl) == 1  # i = 9999
    # The tables forward by the new rules' side too: h1 <-> h2 over the
    # lab's addresses, next to the 10,000.
    bulk.ofctl("add-flow", "priority=20,arp,actions=flood")
    bulk.ofctl("add-flow", "priority=20,ip,nw_dst=10.0.0.2,actions=output:2")
    bulk.ofctl("add-flow", "priority=20,ip,nw_dst=10.0.0.1,actions=output:1")
    assert ping(bulk.hosts[1], "10.0.0.2")
    # Non-strict delete of the whole mask's rules, by one flow-mod.
    bulk.ofctl("del-flows", "ip,nw_dst=10.0.0.0/8")
    left = flows_of(bulk)
    assert len(left) == 1 and "arp" in left[0], left


def _oxm_in_port(p: int) -> bytes:
    return struct.pack("!HBBI", 0x8000, 0 << 1, 4, p)


def _flow_mod(xid: int, command: int, priority: int, oxms: bytes, insts: bytes) -> bytes:
    body = struct.pack("!QQBBHHHIIIH2x", 0, 0, 0, command, 0, 0, priority, 0xFFFFFFFF,
                       0xFFFFFFFF, 0xFFFFFFFF, 0)
    mlen = 4 + len(oxms)
    m = struct.pack("!HH", 1, mlen) + oxms + b"\0" * ((mlen + 7) // 8 * 8 - mlen)
    msg = body + m + insts
    return struct.pack("!BBHI", 4, 14, 8 + len(msg), xid) + msg


def _output(port: int) -> bytes:
    act = struct.pack("!HHIH6x", 0, 16, port, 0)
    return struct.pack("!HH4x", 4, 8 + len(act)) + act


def _goto(table: int) -> bytes:
    return struct.pack("!HHB3x", 1, 8, table)


def test_one_write_of_flow_mods_keeps_each_error_and_order(bulk: Lab) -> None:
    s = raw_conn(bulk)
    add, delete_strict = 0, 4
    s.sendall(
        _flow_mod(21, add, 10, _oxm_in_port(1), _output(2))
        # goto_table:0 from table 0: OFPET_BAD_INSTRUCTION / OFPBIC_BAD_TABLE_ID.
        + _flow_mod(22, add, 10, _oxm_in_port(3), _output(2) + _goto(0))
        + _flow_mod(23, add, 10, _oxm_in_port(2), _output(1))
        # Sees xid 21's flow, added in the same batch.
        + _flow_mod(24, delete_strict, 10, _oxm_in_port(1), b"")
        + struct.pack("!BBHI", 4, 20, 8, 25))  # barrier request
    e = recv_msg(s)
    assert e[1] == 1 and struct.unpack("!IHH", e[4:12]) == (22, 3, 2), e.hex()
    b = recv_msg(s)
    assert b[1] == 21 and struct.unpack("!I", b[4:8])[0] == 25, b.hex()
    s.close()
    fl = flows_of(bulk)
    assert len(fl) == 1 and "in_port=2" in fl[0] and "output:1" in fl[0], fl


def test_barriers_between_flow_mods_are_answered_in_order(bulk: Lab) -> None:
    """ovs-ofctl add-flows sends a barrier after every flow-mod; turnoutd
    applies the run as one swap but answers as if one message at a time:
    each barrier after the errors of the flow-mods before it and before
    those after it, and a flow-mod after a barrier sees the ones before."""
    s = raw_conn(bulk)
    add, delete_strict = 0, 4

    def barrier(xid: int) -> bytes:
        return struct.pack("!BBHI", 4, 20, 8, xid)

    s.sendall(
        _flow_mod(31, add, 10, _oxm_in_port(1), _output(2)) + barrier(32)
        # Refused (goto_table:0 from table 0), between two barriers.
        + _flow_mod(33, add, 10, _oxm_in_port(3), _output(2) + _goto(0)) + barrier(34)
        + _flow_mod(35, add, 10, _oxm_in_port(2), _output(1)) + barrier(36)
        # Sees xid 31's flow, two barriers later.
        + _flow_mod(37, delete_strict, 10, _oxm_in_port(1), b"") + barrier(38))
    got = []
    for _ in range(5):
        m = recv_msg(s)
        xid = struct.unpack("!I", m[4:8])[0]
        got.append(("barrier" if m[1] == 21 else f"error {struct.unpack('!HH', m[8:12])}",
                    xid))
    assert got == [("barrier", 32), ("error (3, 2)", 33), ("barrier", 34), ("barrier", 36),
                   ("barrier", 38)], got
    s.close()
    fl = flows_of(bulk)
    assert len(fl) == 1 and "in_port=2" in fl[0] and "output:1" in fl[0], fl
