#!/usr/bin/env python3
"""Packet-in latency of turnoutd's OpenFlow channel (docs/flows.md,
"Packet-in latency"): how long a frame takes from entering turnoutd to the
controller's socket. Not a test: it prints figures.

turnoutd runs the `flows` logic with one table-miss flow
`priority=0,actions=controller` and an OpenFlow unix socket; this script is
the controller (a raw OpenFlow 1.3 connection) and times, for each of N
frames, the send against the arrival of its packet-in (each frame carries
its sequence number). Frames are spaced by a random 2..6 ms gap, so the
channel's dispatcher is idle (asleep) when each one comes: the figure is the
wake-up path, not a queue's throughput.

Two ways in:
  --via packet-out  (default) a packet-out with output:TABLE on the same
                    connection: the frame runs through the tables on the
                    channel thread and the packet-in comes back through the
                    dispatcher; no worker, no namespace.
  --via veth        a real frame sent with AF_PACKET on a veth pair in a
                    namespace of its own (turnoutd runs there with an
                    af_packet port on the peer end): the worker's wake-up
                    is included. Needs root; the namespace is deleted after.

Usage (root for --via veth):
  scripts/ofpktin-latency.py [--binary target/release/turnoutd] [-n 200] [--via veth]
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "python" / "tests" / "turnoutd"))
from harness import Turnoutd, wait_for  # noqa: E402

MAGIC = b"ofwake-lat"


def recv_msg(s: socket.socket) -> bytes:
    hdr = s.recv(8, socket.MSG_WAITALL)
    if len(hdr) != 8:
        raise OSError("turnoutd closed the OpenFlow connection")
    n = struct.unpack("!H", hdr[2:4])[0]
    return hdr + s.recv(n - 8, socket.MSG_WAITALL)


def frame(seq: int) -> bytes:
    # Broadcast, EtherType 0x88b5 (local experimental), the sequence number.
    return (b"\xff" * 6 + bytes.fromhex("02000000aa01") + b"\x88\xb5" + MAGIC
            + struct.pack("!I", seq)).ljust(60, b"\0")


def packet_out_table(xid: int, data: bytes) -> bytes:
    act = struct.pack("!HHIH6x", 0, 16, 0xFFFFFFF9, 0)  # output:TABLE
    body = struct.pack("!IIH6x", 0xFFFFFFFF, 1, len(act)) + act + data
    return struct.pack("!BBHI", 4, 13, 8 + len(body), xid) + body


def seq_of(pktin: bytes) -> int | None:
    i = pktin.find(MAGIC)
    if i < 0:
        return None
    return int(struct.unpack("!I", pktin[i + len(MAGIC):i + len(MAGIC) + 4])[0])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--binary", default=str(ROOT / "target" / "release" / "turnoutd"))
    ap.add_argument("-n", type=int, default=200)
    ap.add_argument("--via", choices=["packet-out", "veth"], default="packet-out")
    a = ap.parse_args()
    ns = f"ofwlat{os.getpid() % 100000}"
    tmp = Path(tempfile.mkdtemp(prefix="ofpktin-lat-"))
    ofsock = tmp / "of.sock"
    cfg = (f'[switch]\ncontrol_socket = "@CTL@"\nopenflow = ["punix:{ofsock}"]\n'
           '[logic]\nname = "flows"\nflows = ["priority=0,actions=controller"]\n'
           "packet_in_rate = 100000\npacket_in_burst = 1000\n")
    netns = None
    if a.via == "veth":
        subprocess.run(["ip", "netns", "add", ns], check=True)
        netns = ns
        for c in (["link", "add", "lat0", "type", "veth", "peer", "name", "lat1"],
                  ["link", "set", "lat0", "up"], ["link", "set", "lat1", "up"]):
            subprocess.run(["ip", "-n", ns, *c], check=True)
        cfg += '[[ports]]\nname = "lat1"\nkind = "af_packet"\niface = "lat1"\n'
    else:
        cfg += ('[[ports]]\nname = "m0"\nkind = "memif"\n'
                f'socket = "{tmp}/memif.sock"\nid = 0\n')
    d = Turnoutd(tmp / "sw", cfg, binary=Path(a.binary), netns=netns)
    try:
        d.start()
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(5)
        wait_for("the OpenFlow socket", 10, ofsock.exists)
        s.connect(str(ofsock))
        s.sendall(bytes([4, 0, 0, 8, 0, 0, 0, 1]))
        recv_msg(s)
        tx = None
        if a.via == "veth":
            # The sender lives in the namespace: a child process reading
            # sequence numbers on stdin, answering with its send time.
            tx = subprocess.Popen(
                ["ip", "netns", "exec", ns, sys.executable, "-c",
                 "import socket,sys,time\n"
                 "s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW); s.bind(('lat0',0))\n"
                 "for l in sys.stdin:\n"
                 "    f=bytes.fromhex(l.strip()); t=time.monotonic_ns(); s.send(f)\n"
                 "    print(t, flush=True)\n"],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
        lat: list[float] = []
        lost = 0
        for i in range(a.n):
            time.sleep(random.uniform(0.002, 0.006))
            if tx is not None:
                assert tx.stdin is not None and tx.stdout is not None
                tx.stdin.write(frame(i).hex() + "\n")
                tx.stdin.flush()
                t0 = int(tx.stdout.readline())
            else:
                t0 = time.monotonic_ns()
                s.sendall(packet_out_table(0x1000 + i, frame(i)))
            got = None
            deadline = time.monotonic() + 1.0
            while time.monotonic() < deadline:
                m = recv_msg(s)
                if m[1] == 10 and seq_of(m) == i:
                    got = time.monotonic_ns()
                    break
            if got is None:
                lost += 1
            else:
                lat.append((got - t0) / 1000)
        if tx is not None:
            assert tx.stdin is not None
            tx.stdin.close()
            tx.wait(5)
        lat.sort()
        load = os.getloadavg()
        q = statistics.quantiles(lat, n=100) if len(lat) > 1 else lat * 99
        print(f"via={a.via} binary={a.binary} frames={a.n} lost={lost} "
              f"load={load[0]:.2f},{load[1]:.2f},{load[2]:.2f}")
        print(f"packet-in latency us: min={lat[0]:.0f} p50={q[49]:.0f} p90={q[89]:.0f} "
              f"p99={q[98]:.0f} max={lat[-1]:.0f} mean={statistics.mean(lat):.0f}")
        return 0
    finally:
        d.stop()
        if netns:
            subprocess.run(["ip", "netns", "del", ns], check=False)


if __name__ == "__main__":
    sys.exit(main())
