"""A learning switch for os-ken (OpenFlow 1.3), the controller of
python/tests/turnoutd/test_openflow_controller.py.

On connect it installs the table-miss flow (priority 0, everything to the
controller, whole frames). Each packet-in teaches it the source MAC's port;
a frame to a known MAC installs a flow (in_port, eth_src, eth_dst) ->
output and is sent on with a packet-out, anything else is flooded with a
packet-out. Frames from MACs whose first byte is 0x06 (the test's flood)
are only counted, never answered. Every event is appended as one JSON line
to the file named by $OFPKT_EVENTS, which the test reads.

Run: python osken_learning.py HOST PORT (os-ken 4 has no osken-manager)
"""

from __future__ import annotations

import json
import os
from typing import Any, ClassVar

from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib.packet import ethernet, packet
from os_ken.ofproto import ofproto_v1_3


class LearningSwitch(app_manager.OSKenApp):  # type: ignore[misc]
    OFP_VERSIONS: ClassVar[list[int]] = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.ports: dict[int, dict[str, int]] = {}
        self.event_log = open(os.environ["OFPKT_EVENTS"], "a", buffering=1)  # noqa: SIM115

    def note(self, **kv: Any) -> None:
        self.event_log.write(json.dumps(kv) + "\n")

    def add_flow(self, dp: Any, priority: int, match: Any, actions: list[Any]) -> None:
        p = dp.ofproto_parser
        inst = [p.OFPInstructionActions(dp.ofproto.OFPIT_APPLY_ACTIONS, actions)]
        dp.send_msg(p.OFPFlowMod(datapath=dp, priority=priority, match=match, instructions=inst))

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def on_features(self, ev: Any) -> None:
        dp = ev.msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        self.add_flow(dp, 0, p.OFPMatch(),
                      [p.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)])
        self.note(event="connected", dpid=dp.id)

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def on_packet_in(self, ev: Any) -> None:
        msg = ev.msg
        dp = msg.datapath
        ofp, p = dp.ofproto, dp.ofproto_parser
        in_port = msg.match["in_port"]
        eth = packet.Packet(msg.data).get_protocols(ethernet.ethernet)[0]
        self.note(event="packet_in", in_port=in_port, reason=msg.reason, table=msg.table_id,
                  total_len=msg.total_len, len=len(msg.data), buffer_id=msg.buffer_id,
                  src=eth.src)
        if eth.src.startswith("06:"):
            return
        macs = self.ports.setdefault(dp.id, {})
        macs[eth.src] = in_port
        out = macs.get(eth.dst, ofp.OFPP_FLOOD)
        actions = [p.OFPActionOutput(out)]
        if out != ofp.OFPP_FLOOD:
            self.add_flow(dp, 1, p.OFPMatch(in_port=in_port, eth_dst=eth.dst, eth_src=eth.src),
                          actions)
            self.note(event="flow", in_port=in_port, dst=eth.dst, out=out)
        dp.send_msg(p.OFPPacketOut(datapath=dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=in_port,
                                   actions=actions, data=msg.data))

    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def on_port_status(self, ev: Any) -> None:
        d = ev.msg.desc
        name = d.name.decode() if isinstance(d.name, bytes) else d.name
        self.note(event="port_status", reason=ev.msg.reason, port_no=d.port_no, name=name)

    @set_ev_cls(ofp_event.EventOFPErrorMsg, MAIN_DISPATCHER)
    def on_error(self, ev: Any) -> None:
        self.note(event="error", type=ev.msg.type, code=ev.msg.code)


def main() -> None:
    """Runs this app (os-ken 4 has no osken-manager): HOST PORT."""
    import logging
    import sys

    from os_ken import cfg

    logging.basicConfig(level=logging.INFO)
    host, port = sys.argv[1], sys.argv[2]
    cfg.CONF(args=["--ofp-listen-host", host, "--ofp-tcp-listen-port", port], project="os_ken")
    app_manager.AppManager.run_apps([os.path.abspath(__file__)])


if __name__ == "__main__":
    main()
