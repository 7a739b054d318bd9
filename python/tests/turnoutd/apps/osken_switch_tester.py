"""Launcher of os-ken's OpenFlow switch test suite (``os_ken.tests.switch.tester``),
run by python/tests/turnoutd/osken_suite.py with the Python of .venv-osken.

os-ken 4 has no ``osken-manager``, and its default "native" hub never
fires ``hub.Timeout`` (the tester then waits forever for a reply that does
not come), so this selects the eventlet hub before os-ken is imported,
patches the standard library as ``osken-manager`` did, parses the
tester's options and runs the app. The tester prints one line per test
(``    DESCRIPTION    OK`` or ``ERROR`` and the reason on the next line)
and a report, then ends its own process with SIGTERM.

Run: python osken_switch_tester.py --host H --port P --target DPID
     --tester DPID --dir TESTS [--wait-s S] [--keep-tester-flow] [--paced-sender]
"""

from __future__ import annotations

import argparse
import logging
import os
import struct
import sys
import time
from typing import Any


def steady_tester(tester: Any) -> None:
    """Before every test the tester deletes all flows of both switches
    and adds, on the tester switch, the one flow that sends what comes
    back from the target (``in_port=2,actions=CONTROLLER``) again, then
    waits for the barrier. An Open vSwitch tester answers that barrier
    before its datapath's flow cache is revalidated, so for a moment after
    it the cached flow for port 2 still says "drop" (what the delete made
    it) and a frame the target sends back at once is counted but never
    reaches the controller ("Receiving timeout: increment in rx_packets in
    tester"); the faster the target, the more often. This replaces that
    step for the tester switch only: it deletes just the throughput flows
    (the only others the tester installs there, by their cookie) and adds
    the same flow over itself, so the table ends as before and never passes
    through "no flow". The switch under test is initialised as published."""
    cls = tester.OfTester
    published = cls._test_initialize_flow

    def initialize(self: Any, datapath: Any) -> None:
        if datapath is not self.tester_sw:
            published(self, datapath)
            return
        self.send_msg_xids.append(datapath.del_flows(cookie=tester.THROUGHPUT_COOKIE))
        self.send_msg_xids.append(datapath.add_flow(
            in_port=self.tester_recv_port_1, out_port=datapath.dp.ofproto.OFPP_CONTROLLER))
        self.send_msg_xids.append(datapath.send_barrier_request())
        self._wait()
        assert len(self.rcv_msgs) == 1
        assert isinstance(self.rcv_msgs[0], datapath.dp.ofproto_parser.OFPBarrierReply)

    cls._test_initialize_flow = initialize


#: The paced sender's tick (see paced_sender).
PACED_TICK_S = 0.002


def paced_sender(tester: Any) -> None:
    """A throughput test sends its frame at a rate (``pktps``) for a
    duration, as packet-outs to the tester switch: every 10 ms a green
    thread adds ``pktps`` x 10 ms to a counter, sleeps 10 ms, starts the
    next one and sends the counter's whole packets, one packet-out message
    and one socket write each. The rate it keeps is 10 ms divided by the
    time a tick really takes: every oversleep of the hub and every
    millisecond of serialising lowers it for good (on a busy 2-core host
    180 of 200 pktps, 11,600 of 20,000), and the suite then measures the
    tester, not the switch (a meter that marks 1 Mbps of a 2 Mbps stream
    sees 1.88 Mbps and marks 0.88). This keeps the suite's ticks but
    counts from the clock: each tick sends what the rate says is due since
    the first one, less what was sent, and writes the tick's packet-outs
    in one go (each message as the suite builds it, with its own xid,
    serialised once and copied). Its ticks are 2 ms (``PACED_TICK_S``),
    not the suite's 10 ms: the tester switch's one thread both executes a
    tick's packet-outs and reads what the target sends back on t2, whose
    socket holds 212,992 bytes (the kernel's default; a network namespace
    cannot raise it), about 90 frames of 1500 bytes. A target that
    forwards a 10 ms tick's 200 frames as they come (a meter test at
    20,000 pktps) had them back while that thread was still sending, and
    the socket dropped the tail of each burst: 1,100 frames a second,
    all of them the ones a DSCP-remark band had marked, since those come
    last in each tick (a tcpdump on t2 saw them half and half, as the
    target's meter counted them; the tester counted 8,800 of 10,000
    remarked a second). What is measured (the tester switch's flow
    counters over the tester's own window) and every expected value and
    tolerance stay as published."""
    cls = tester.OfTester

    def send_thread(self: Any, arg: dict[str, Any]) -> None:
        if self.ingress_event is None or self.ingress_event._cond:
            return
        now = time.monotonic()
        if "paced_start" not in arg:
            arg["paced_start"] = now
            arg["paced_sent"] = 0
        # The suite's progress dots, one per dot_span of its own ticks.
        ticks = int((now - arg["paced_start"]) / tester.CONTINUOUS_THREAD_INTVL)
        while arg["thread_counter"] <= ticks:
            if not arg["thread_counter"] % arg["dot_span"]:
                sys.stdout.write(".")
                sys.stdout.flush()
            arg["thread_counter"] += 1
        rate = arg["packet_counter_inc"] / tester.CONTINUOUS_THREAD_INTVL
        due = int(rate * (now - arg["paced_start"] + PACED_TICK_S))
        count = max(0, due - arg["paced_sent"])
        arg["paced_sent"] += count

        tester.hub.sleep(PACED_TICK_S)
        tid = tester.hub.spawn(send_thread, self, arg)
        self.ingress_threads.append(tid)
        tester.hub.sleep(0)
        if count == 0:
            return
        try:
            buf = bytearray()
            for _ in range(count):
                buf += packet_out(self, arg)
            self.tester_sw.dp.send(bytes(buf))
        except Exception as err:
            self.thread_msg = err
            self.ingress_event.set()

    def packet_out(self: Any, arg: dict[str, Any]) -> bytes:
        """One packet-out of the test's frame (a new one per packet for a
        randomised frame), with the datapath's next xid."""
        dp = self.tester_sw.dp
        if arg["randomize"]:
            frame = eval("/".join(arg["packet_text"]), vars(tester))
            frame.serialize()
            data = frame.data
        elif "paced_msg" in arg:
            msg = bytearray(arg["paced_msg"])
            dp.xid = (dp.xid + 1) & dp.ofproto.MAX_XID  # as Datapath.set_xid
            struct.pack_into("!I", msg, 4, dp.xid)
            return bytes(msg)
        else:
            data = arg["packet_binary"]
        parser, ofp = dp.ofproto_parser, dp.ofproto
        out = parser.OFPPacketOut(
            datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, data=data, in_port=ofp.OFPP_CONTROLLER,
            actions=[parser.OFPActionOutput(self.tester_sw.tester_send_port)])
        dp.set_xid(out)
        out.serialize()
        if not arg["randomize"]:
            arg["paced_msg"] = bytes(out.buf)
        return bytes(out.buf)

    cls._send_packet_thread = send_thread


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--target", required=True, help="the switch under test's dpid, 16 hex digits")
    p.add_argument("--tester", required=True, help="the tester switch's dpid, 16 hex digits")
    p.add_argument("--dir", required=True, help="a folder of the suite's JSON test files")
    p.add_argument("--wait-s", type=float, default=None,
                   help="the tester's wait for each reply (its WAIT_TIMER, 3 s as published)")
    p.add_argument("--keep-tester-flow", action="store_true",
                   help="between tests, delete only the tester switch's throughput flows "
                        "instead of all its flows (see steady_tester)")
    p.add_argument("--paced-sender", action="store_true",
                   help="throughput tests send at their rate by the clock, a tick's packet-outs "
                        "in one write (see paced_sender)")
    a = p.parse_args()
    # The hub is chosen when os-ken is first imported, and the standard
    # library patched before anything else of it is (as osken-manager did).
    os.environ["OSKEN_HUB_TYPE"] = "eventlet"
    from os_ken.lib import hub

    hub.patch(thread=False)
    from os_ken import (
        cfg,
        flags,  # noqa: F401 - registers the tester's options
    )
    from os_ken import log as osken_log  # registers the log options
    from os_ken.base import app_manager
    from os_ken.controller import controller  # noqa: F401 - the ofp-* options

    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(message)s")
    cfg.CONF(args=["--ofp-listen-host", a.host, "--ofp-tcp-listen-port", str(a.port),
                   "--test-switch-target", a.target, "--test-switch-tester", a.tester,
                   "--test-switch-dir", a.dir],
             project="os_ken")
    osken_log.init_log()
    from os_ken.tests.switch import tester

    if a.wait_s is not None:
        tester.WAIT_TIMER = a.wait_s
    if a.keep_tester_flow:
        steady_tester(tester)
    if a.paced_sender:
        paced_sender(tester)
    app_manager.AppManager.run_apps([tester.__name__])


if __name__ == "__main__":
    main()
