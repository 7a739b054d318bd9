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
     --tester DPID --dir TESTS [--wait-s S]
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
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
    app_manager.AppManager.run_apps([tester.__name__])


if __name__ == "__main__":
    main()
