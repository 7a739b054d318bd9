"""A host on an 802.1Q trunk, in user space: answers ARP requests and ICMP
echo requests for its addresses, each on its own VLAN, with tagged frames
(python/tests/turnoutd/test_faucet.py's trunk host h4; this kernel has no VLAN
devices: no 8021q, no VLAN-filtering bridge).

It reads every frame of the interface from an AF_PACKET socket: the kernel
takes the 802.1Q tag off a received frame and hands it over beside the data
(PACKET_AUXDATA), so the VLAN comes from there; replies are written with
the tag in the frame. A request on the wrong VLAN for an address, or
untagged, is not answered.

Run: python3 vlan_host.py IFACE VID=IP [VID=IP ...]   (until killed)
"""

from __future__ import annotations

import socket
import struct
import sys

SOL_PACKET = 263
PACKET_AUXDATA = 8
TP_STATUS_VLAN_VALID = 0x10
ETH_P_ALL = 3


def csum(b: bytes) -> int:
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def vlan_of(ancdata: list[tuple[int, int, bytes]]) -> int | None:
    for level, kind, data in ancdata:
        if level == SOL_PACKET and kind == PACKET_AUXDATA and len(data) >= 20:
            status, _, _, _, _, tci, _ = struct.unpack("IIIHHHH", data[:20])
            if status & TP_STATUS_VLAN_VALID:
                return tci & 0xFFF
    return None


def reply(frame: bytes, vid: int, mine: dict[int, bytes], mac: bytes) -> bytes | None:
    """The tagged answer to ``frame`` (tag already removed) received on
    VLAN ``vid``, if it asks for our address on that VLAN."""
    if len(frame) < 14 or vid not in mine:
        return None
    ip = mine[vid]
    src, etype, body = frame[6:12], struct.unpack("!H", frame[12:14])[0], frame[14:]
    tag = struct.pack("!HH", 0x8100, vid)
    if etype == 0x0806 and len(body) >= 28:
        op = struct.unpack("!H", body[6:8])[0]
        if op != 1 or body[24:28] != ip:
            return None
        arp = body[:6] + struct.pack("!H", 2) + mac + ip + body[8:14] + body[14:18]
        return src + mac + tag + struct.pack("!H", 0x0806) + arp
    if etype == 0x0800 and len(body) >= 28 and body[9] == 1 and body[16:20] == ip:
        ihl = (body[0] & 15) * 4
        total = struct.unpack("!H", body[2:4])[0]
        icmp = body[ihl:total]
        if len(icmp) < 8 or icmp[0] != 8:
            return None
        echo = b"\0\0\0\0" + icmp[4:]
        echo = echo[:2] + struct.pack("!H", csum(echo)) + echo[4:]
        hdr = bytearray(body[:ihl])
        hdr[8] = 64
        hdr[12:16], hdr[16:20] = body[16:20], body[12:16]
        hdr[10:12] = b"\0\0"
        hdr[10:12] = struct.pack("!H", csum(bytes(hdr)))
        return src + mac + tag + struct.pack("!H", 0x0800) + bytes(hdr) + echo
    return None


def main() -> None:
    iface = sys.argv[1]
    mine = {}
    for a in sys.argv[2:]:
        vid, ip = a.split("=")
        mine[int(vid)] = socket.inet_aton(ip)
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(SOL_PACKET, PACKET_AUXDATA, 1)
    s.bind((iface, ETH_P_ALL))
    mac = s.getsockname()[4]
    print("ready", flush=True)
    while True:
        data, anc, _, addr = s.recvmsg(65536, socket.CMSG_SPACE(64))
        if addr[2] == socket.PACKET_OUTGOING:
            continue
        vid = vlan_of(anc)
        if vid is None and len(data) >= 18 and data[12:14] == b"\x81\x00":
            # A tag the kernel left in the frame.
            vid = struct.unpack("!H", data[14:16])[0] & 0xFFF
            data = data[:12] + data[16:]
        if vid is None:
            continue
        r = reply(data, vid, mine, mac)
        if r is not None:
            s.send(r)


if __name__ == "__main__":
    main()
