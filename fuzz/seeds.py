#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (valid inputs built the
way the unit tests build them, so the fuzzer starts past the first checks).
Re-run after changing an input format: python3 fuzz/seeds.py
The output depends only on this file and the docs (no clock, no randomness).
The config_toml seeds taken from the docs' config blocks (seed-doc-*.toml)
are not tracked: `make fuzz-replay` runs this script first, so they follow
the docs and editing the docs leaves the tree clean."""

import json
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
OUT = os.path.join(HERE, "corpus")


def put(target, name, data):
    d = os.path.join(OUT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def csum(b):
    if len(b) % 2:
        b += b"\0"
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return (~s) & 0xFFFF


MAC_A = bytes([2, 0, 0, 0, 0, 1])
MAC_B = bytes([2, 0, 0, 0, 0, 2])


def eth(et, payload, tags=()):
    h = MAC_B + MAC_A
    for tpid, vid in tags:
        h += struct.pack("!HH", tpid, vid)
    return h + struct.pack("!H", et) + payload


def ipv4(proto, payload, src=bytes([10, 0, 0, 2]), dst=bytes([10, 0, 0, 1]), frag=0x4000):
    h = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 20 + len(payload), 1, frag, 64, proto, 0, src, dst)
    h = h[:10] + struct.pack("!H", csum(h)) + h[12:]
    return h + payload


def ipv6(nh, payload, src=bytes(15) + b"\2", dst=b"\xfd" + bytes(14) + b"\1"):
    return struct.pack("!IHBB", 0x60000000, len(payload), nh, 64) + src + dst + payload


def udp(sport, dport, payload):
    return struct.pack("!HHHH", sport, dport, 8 + len(payload), 0) + payload


def tcp(sport, dport, payload):
    return struct.pack("!HHIIBBHHH", sport, dport, 1, 0, 5 << 4, 0x18, 1024, 0, 0) + payload


def gen_payload():
    # turnout-gen payload header: magic, stream, seq, timestamp.
    return struct.pack("!IIQQ", 0x54524E54, 1, 7, 123456789) + bytes(18)


inner = eth(0x0800, ipv4(17, udp(1000, 2000, gen_payload())))
vxlan = struct.pack("!BBHI", 0x08, 0, 0, 42 << 8) + inner
geneve = (
    struct.pack("!BBHI", 2, 0, 0x6558, 42 << 8)
    + struct.pack("!HBB", 0x0102, 0x01, 1)
    + b"\1\2\3\4"
    + inner
)
frames = {
    "udp4": eth(0x0800, ipv4(17, udp(1000, 2000, gen_payload()))),
    "tcp4": eth(0x0800, ipv4(6, tcp(1000, 80, b"GET /"))),
    "udp6": eth(0x86DD, ipv6(17, udp(1000, 2000, gen_payload()))),
    "tcp6-ext": eth(0x86DD, ipv6(0, bytes([6, 0]) + bytes(6) + tcp(1, 2, b""))),
    "vlan": eth(0x0800, ipv4(17, udp(1, 2, b"x" * 18)), tags=[(0x8100, 10)]),
    "qinq": eth(0x0800, ipv4(17, udp(1, 2, b"x" * 18)), tags=[(0x88A8, 100), (0x8100, 10)]),
    "arp": eth(
        0x0806,
        struct.pack(
            "!HHBBH6s4s6s4s",
            1,
            0x0800,
            6,
            4,
            1,
            MAC_A,
            bytes([10, 0, 0, 2]),
            bytes(6),
            bytes([10, 0, 0, 1]),
        ),
    ),
    "vxlan4": eth(0x0800, ipv4(17, udp(49152, 4789, vxlan))),
    "geneve6": eth(0x86DD, ipv6(17, udp(49152, 6081, geneve))),
    "frag": eth(0x0800, ipv4(17, udp(1, 2, b"abc"), frag=0x2000)),
}
for k, v in frames.items():
    put("wire_headers", k, v)

# gen_rx: [touch flag] then records (see fuzz_targets/gen_rx.rs): 0 raw
# frame (len, bytes); 1 a frame of ours (stream, seq, ts, size index), |4
# with a corruption (offset, xor); 2 the clock advances; 3 finish_stream,
# |4 a sweep of frames over streams 0..n.
def g_ours(stream, seq, ts=900_000_000, size=0, corrupt=None):
    if corrupt is None:
        return struct.pack("<BHQQB", 1, stream, seq, ts, size)
    return struct.pack("<BHQQBBB", 5, stream, seq, ts, size, *corrupt)


def g_raw(frame):
    return struct.pack("<BB", 0, len(frame)) + frame


def g_clock(ns):
    return struct.pack("<BI", 2, ns)


def g_finish(stream, end):
    return struct.pack("<BHQ", 3, stream, end)


gen_rx = {
    "in-order": b"\0" + b"".join(g_ours(1, i) + g_clock(1000) for i in range(16)) + g_finish(1, 16),
    "loss-reorder-dup": b"\1"
    + b"".join(g_ours(1, i, size=i % 4) for i in (0, 2, 1, 1, 5, 70000, 3, 4))
    + g_finish(1, 70010),
    "two-families": b"\0"
    + b"".join(g_ours(s, i, size=128 + i % 4) for s in (1, 2) for i in range(4)),
    "forged-seq": b"\0"
    + b"".join(g_ours(1, i) for i in (0, 2**64 - 1, 1, 2**48, 2**48 - 1))
    + g_ours(2, 2**64 - 2),
    "future-ts": b"\0" + g_ours(1, 0, ts=2**64 - 1) + g_clock(5) + g_ours(1, 1, ts=0),
    "warmup": b"\0" + g_ours(0x8001, 3) + g_ours(1, 0),
    "corrupt": b"\0" + b"".join(g_ours(1, i, corrupt=(i * 7, 0xFF)) for i in range(24)),
    "raw": b"\0" + b"".join(g_raw(frames[k]) for k in ("udp4", "udp6", "vlan", "tcp4", "frag")),
    "many-streams": b"\0" + struct.pack("<BH", 7, 1030) + g_ours(1029, 1) + g_ours(1030, 0),
}
for k, v in gen_rx.items():
    put("gen_rx", k, v)

# tunnel_decap: [kind/family flags][vni select] + underlay frame.
put("tunnel_decap", "vxlan4", bytes([0, 0]) + frames["vxlan4"])
put("tunnel_decap", "geneve4", bytes([1, 0]) + eth(0x0800, ipv4(17, udp(49152, 6081, geneve))))
put("tunnel_decap", "geneve6", bytes([3, 0]) + frames["geneve6"])
put("tunnel_decap", "vxlan6", bytes([2, 0]) + eth(0x86DD, ipv6(17, udp(49152, 4789, vxlan))))
put(
    "tunnel_decap",
    "vxlan4-vlan",
    bytes([0, 0]) + eth(0x0800, ipv4(17, udp(49152, 4789, vxlan)), tags=[(0x8100, 5)]),
)
put("tunnel_decap", "arp", bytes([0, 0]) + frames["arp"])
nd = bytes([135, 0, 0, 0]) + bytes(4) + b"\xfd" + bytes(14) + b"\1"
put("tunnel_decap", "nd6", bytes([2, 0]) + eth(0x86DD, ipv6(58, nd)))

# memif control messages (128 bytes each): [ctl][fd size][message].
COOKIE = 0x3E31F20


def memif_msg(t, body):
    return struct.pack("<H", t) + body.ljust(126, b"\0")


init0 = memif_msg(
    3, struct.pack("<HIB", 0x0200, 0, 0) + bytes(24) + b"fuzz-client".ljust(32, b"\0")
)
init1 = memif_msg(
    3,
    struct.pack("<HIB", 0x0200, 1, 0) + b"fuzz".ljust(24, b"\0") + b"fuzz-client".ljust(32, b"\0"),
)
add_region = memif_msg(4, struct.pack("<HQ", 0, 65536))


def add_ring(c2s, idx, off):
    return memif_msg(5, struct.pack("<HHHIBH", 1 if c2s else 0, idx, 0, off, 4, 0))


connect = memif_msg(6, b"fuzz-if".ljust(32, b"\0"))
disconnect = memif_msg(8, struct.pack("<I", 0) + b"bye".ljust(96, b"\0"))
# ctl: 1 = sealed memfd (next byte: pages), 3 = eventfd, 0 = none.
setup = bytes([0]) + init0 + bytes([1, 16]) + add_region
setup += bytes([3]) + add_ring(True, 0, 0) + bytes([3]) + add_ring(False, 0, 1024)
put("memif_msg", "connect", setup + bytes([0]) + connect)
put(
    "memif_msg",
    "connect-2q",
    setup
    + bytes([3])
    + add_ring(True, 1, 2048)
    + bytes([3])
    + add_ring(False, 1, 3072)
    + bytes([0])
    + connect,
)
put("memif_msg", "connect-disconnect", setup + bytes([0]) + connect + bytes([0]) + disconnect)
put("memif_msg", "secret", bytes([0]) + init1 + bytes([1, 16]) + add_region + bytes([0]) + connect)
put("memif_msg", "unsealed", bytes([0]) + init0 + bytes([2, 16]) + add_region)
put("memif_msg", "short", bytes([0x80, 64]) + init0[:64])
put("memif_msg", "two-fds", bytes([0]) + init0 + bytes([5, 16, 16]) + add_region)

# memif_ring ops: 0x0d = descriptor run (n, len, head) on rx; 0x02 burst;
# 0x1d = offer run on tx; 0x04 transmit (len, fill).
put("memif_ring", "rx-run", bytes([0x0D, 4]) + struct.pack("<HH", 60, 0) + bytes([0x02]))
put(
    "memif_ring",
    "rx-chain",
    bytes([0x00, 0])
    + struct.pack("<HHIII", 1, 0, 100, 16384, 0)
    + bytes([0x00, 1])
    + struct.pack("<HHIII", 0, 0, 100, 18432, 0)
    + bytes([0x01])
    + struct.pack("<H", 2)
    + bytes([0x02]),
)
put(
    "memif_ring",
    "tx",
    bytes([0x1D, 8])
    + struct.pack("<HH", 256, 0)
    + bytes([0x04])
    + struct.pack("<HB", 600, 0x33)
    + bytes([0x04])
    + struct.pack("<HB", 60, 1),
)
put(
    "memif_ring",
    "both",
    bytes([0x0D, 8])
    + struct.pack("<HH", 1500, 0)
    + bytes([0x1D, 8])
    + struct.pack("<HH", 256, 0)
    + bytes([0x03, 0x04])
    + struct.pack("<HB", 1500, 7)
    + bytes([0x02]),
)

# vhost-user messages: [ctl (nfds | 4 memfd | 8 sealed)][len u16][message]
# (memfd: one more byte, its size in pages).


def vu(req, body=b"", flags=1):
    return struct.pack("<III", req, flags, len(body)) + body


def rec(msg, ctl=0, pages=None):
    r = bytes([ctl]) + struct.pack("<H", len(msg))
    if pages is not None:
        r = bytes([ctl]) + struct.pack("<H", len(msg)) + bytes([pages])
    return r + msg


F = (1 << 32) | (1 << 30) | (1 << 15)
mem = struct.pack("<II", 1, 0) + struct.pack("<QQQQ", 0x0, 0x40000, 0x7F0000000000, 0)
seq = (
    rec(vu(1))
    + rec(vu(3))
    + rec(vu(2, struct.pack("<Q", F)))
    + rec(vu(15))
    + rec(vu(16, struct.pack("<Q", 1)))
)
# SET_MEM_TABLE with a 64-page (256 KiB) sealed memfd.
seq_mem = bytes([4 | 8 | 1]) + struct.pack("<H", len(vu(5, mem))) + bytes([64]) + vu(5, mem)
ring = b""
for i in (0, 1):
    base = 0x7F0000000000 + 0x10000 * i
    ring += rec(vu(8, struct.pack("<II", i, 256)))
    ring += rec(vu(9, struct.pack("<IIQQQQ", i, 0, base, base + 0x4000, base + 0x2000, 0)))
    ring += rec(vu(10, struct.pack("<II", i, 0)))
    ring += rec(vu(12, struct.pack("<Q", i)), ctl=1)
    ring += rec(vu(13, struct.pack("<Q", i)), ctl=1)
    ring += rec(vu(18, struct.pack("<II", i, 1)))
put("vhost_msg", "setup", seq + seq_mem + ring)
put(
    "vhost_msg",
    "setup-getbase",
    seq + seq_mem + ring + rec(vu(11, struct.pack("<II", 0, 0))) + rec(vu(6)),
)
put("vhost_msg", "early-enable", rec(vu(18, struct.pack("<II", 0, 1))) + seq + seq_mem + ring)
put("vhost_msg", "features-only", seq)
# A region larger than its file (a lying frontend).
put(
    "vhost_msg",
    "short-file",
    seq + bytes([4 | 8 | 1]) + struct.pack("<H", len(vu(5, mem))) + bytes([1]) + vu(5, mem) + ring,
)


# vhost_vring: [cfg: log2 size | flags][ops]: 0 desc (i, addr, len, flags,
# next), 1 offer (head), 4 burst+release, 6 transmit (len).
def vdesc(q, i, a, ln, fl, nx):
    return bytes([(q << 7) | 0]) + struct.pack("<HIHHH", i, a, ln, fl, nx)


rxs = vdesc(0, 0, 0, 100, 0, 0) + bytes([1]) + struct.pack("<H", 0) + bytes([4])
chain = (
    vdesc(0, 1, 0x100, 12, 1, 2)
    + vdesc(0, 2, 0x200, 500, 1, 3)
    + vdesc(0, 3, 0x800, 500, 0, 0)
    + bytes([1])
    + struct.pack("<H", 1)
    + bytes([4])
)
txs = (
    vdesc(1, 0, 0x1000, 2048, 2, 0)
    + bytes([0x81])
    + struct.pack("<H", 0)
    + bytes([6])
    + struct.pack("<H", 100)
)
put("vhost_vring", "rx", bytes([8]) + rxs)
put("vhost_vring", "rx-chain", bytes([8 | 0x20]) + chain)
put("vhost_vring", "tx", bytes([8 | 0x20]) + txs)
put(
    "vhost_vring",
    "loop",
    bytes([4])
    + vdesc(0, 0, 0, 10, 1, 1)
    + vdesc(0, 1, 0x40, 10, 1, 0)
    + bytes([1])
    + struct.pack("<H", 0)
    + bytes([4]),
)
put("vhost_vring", "event-idx", bytes([8 | 0x40]) + rxs + txs)

# config_toml: the documented examples and the config blocks of the docs.
for name in ("turnoutd.toml", "vxlan.toml"):
    with open(os.path.join(ROOT, "docs", "examples", name), "rb") as f:
        put("config_toml", name, f.read())
with open(os.path.join(ROOT, "docs", "turnoutd.md")) as f:
    for i, block in enumerate(re.findall(r"```toml\n(.*?)```", f.read(), re.S)):
        put("config_toml", f"doc-{i}.toml", block.encode())

# control_json: one request per method, and a notification.


def rpc(method, params=None, rid=1):
    r = {"jsonrpc": "2.0", "id": rid, "method": method}
    if rid is None:
        del r["id"]
    if params is not None:
        r["params"] = params
    return json.dumps(r, separators=(",", ":"))


reqs = {
    "version": rpc("version"),
    "config-show": rpc("config.show", rid="a"),
    "port-list": rpc("port.list", {}, 2),
    "port-add": rpc(
        "port.add", {"name": "m1", "kind": "memif", "socket": "/tmp/x.sock", "id": 1}, 3
    ),
    "port-add-vxlan": rpc(
        "port.add",
        {
            "name": "vx",
            "kind": "vxlan",
            "vni": 5,
            "local_ip": "10.0.0.1",
            "remotes": ["10.0.0.2"],
            "underlay": {"kind": "af_packet", "iface": "eth1"},
        },
        3,
    ),
    "port-remove": rpc("port.remove", {"name": "p9"}, 4),
    "logic-show": rpc("logic.show", rid=5),
    "logic-replace-patch": rpc("logic.replace", {"name": "patch", "pairs": [["p0", "p1"]]}, 6),
    "logic-replace-l4": rpc(
        "logic.replace",
        {"name": "l4filter", "rules": [{"proto": "udp", "dst_port": 53, "action": "drop"}]},
        6,
    ),
    "logic-command": rpc("logic.command", {"cmd": "flush", "args": None}, 7),
    "stats": rpc("stats", rid=8),
    "stats-reset": rpc("stats.reset", rid=9),
    "tunnel-show": rpc("tunnel.show", {"name": "p0"}, 10),
    "notification": rpc("stats", rid=None),
    "batch": "[" + rpc("version") + "]",
}
for k, v in reqs.items():
    put("control_json", k, v.encode())


# openflow_msg: OpenFlow 1.3 streams as ovs-ofctl sends them (a hello,
# then requests), laid out from the spec's structures.
def ofp(t, body=b"", xid=1):
    return struct.pack("!BBHI", 4, t, 8 + len(body), xid) + body


def oxm(field, value, mask=None):
    return struct.pack("!HBB", 0x8000, (field << 1) | (mask is not None),
                       len(value) * (2 if mask else 1)) + value + (mask or b"")


def ofmatch(*oxms):
    b = b"".join(oxms)
    n = 4 + len(b)
    return struct.pack("!HH", 1, n) + b + bytes((n + 7) // 8 * 8 - n)


def output(port):
    return struct.pack("!HHIH6x", 0, 16, port, 0xFFFF)


def set_field(o):
    n = 4 + len(o)
    pad = (n + 7) // 8 * 8 - n
    return struct.pack("!HH", 25, n + pad) + o + bytes(pad)


def apply(*acts):
    b = b"".join(acts)
    return struct.pack("!HH4x", 4, 8 + len(b)) + b


def goto(t):
    return struct.pack("!HHB3x", 1, 8, t)


def flowmod(cmd, table, prio, match, insts=b"", flags=0, out_port=0xFFFFFFFF):
    return ofp(14, struct.pack("!QQBBHHHIIIH2x", 0, 0, table, cmd, 0, 0, prio, 0xFFFFFFFF,
                               out_port, 0xFFFFFFFF, flags) + match + insts)


def mp_flow(t):
    return ofp(18, struct.pack("!HH4xB3xII4xQQ", t, 0, 0xFF, 0xFFFFFFFF, 0xFFFFFFFF, 0, 0)
               + ofmatch())


hello = ofp(0, struct.pack("!HHI", 1, 8, 0x10))
ip = oxm(5, b"\x08\x00")
streams = {
    "add-dump": hello + flowmod(0, 0, 10, ofmatch(oxm(0, b"\0\0\0\1"), ip,
                                                  oxm(12, bytes([10, 0, 0, 0]), b"\xff\xff\xff\0")),
                                apply(output(2)) + goto(1)) + mp_flow(1) + mp_flow(2),
    "setfield": hello + flowmod(0, 1, 5, ofmatch(ip, oxm(10, b"\x11")),
                                apply(set_field(oxm(4, MAC_A)), set_field(oxm(16, b"\0\x35")),
                                      struct.pack("!HH4x", 24, 8), output(0xFFFFFFFB))),
    "modify-delete": hello + flowmod(0, 0, 3, ofmatch(), apply(output(1)), flags=2)
    + flowmod(1, 0, 0, ofmatch(), apply(output(3))) + flowmod(3, 0xFF, 0, ofmatch(), out_port=3)
    + flowmod(4, 0, 3, ofmatch()),
    "vlan-v6": hello + flowmod(0, 0, 7, ofmatch(oxm(6, b"\x10\x05"), oxm(7, b"\x03"),
                                                oxm(5, b"\x86\xdd"),
                                                oxm(27, bytes(16), b"\xff" * 8 + bytes(8))),
                               apply(struct.pack("!HH4x", 18, 8), output(0xFFFFFFF8))),
    "misc": hello + ofp(5) + ofp(7) + ofp(9, struct.pack("!HH", 0, 128)) + ofp(2, b"echo")
    + ofp(18, struct.pack("!HH4x", 13, 0)) + ofp(18, struct.pack("!HH4xI4x", 4, 0, 0xFFFFFFFF))
    + ofp(20),
    "resubmit": hello + flowmod(0, 0, 1, ofmatch(),
                                apply(struct.pack("!HHIHH4x", 0xFFFF, 16, 0x2320, 1, 1))),
}
for k, v in streams.items():
    put("openflow_msg", k, v)

# cni_stdin: the environment lines (command, container id, ifname, netns),
# then the network configurations of python/tests/turnoutd/test_cni.py.
CNI_ENV = "ADD\nbad1\neth0\n/var/run/netns/tcni-pod\n"


def cni_conf(version="1.1.0", name="tnet", **kw):
    c = {
        "cniVersion": version,
        "name": name,
        "type": "turnout-cni",
        "controlSocket": "/run/turnout/turnoutd.sock",
        "stateDir": "/tmp/tcni/state",
        "socketDir": "/tmp/tcni/socks",
        "ipam": {
            "type": "host-local",
            "ranges": [[{"subnet": "10.99.0.0/24"}]],
            "dataDir": "/tmp/tcni/ipam",
            "routes": [{"dst": "10.99.0.0/16"}],
        },
    }
    c.update(kw)
    return json.dumps(c)


for name, env, conf in [
    ("add", CNI_ENV, cni_conf()),
    ("del", "DEL\nbad1\neth0\n\n", cni_conf()),
    ("check", CNI_ENV.replace("ADD", "CHECK"), cni_conf(version="1.0.0")),
    ("status", "STATUS\n\n\n\n", cni_conf()),
    ("gc-old", "GC\n\n\n\n", cni_conf(version="0.4.0")),
    ("version", "VERSION\n\n\n\n", ""),
    ("no-command", "\nbad1\neth0\n/x\n", cni_conf()),
    ("unknown-command", CNI_ENV.replace("ADD", "FROB"), cni_conf()),
    ("no-container-id", "ADD\n\neth0\n/x\n", cni_conf()),
    ("bad-ifname", "ADD\nbad1\na/b\n/x\n", cni_conf()),
    ("malformed", CNI_ENV, '{"cniVersion": "1.1.0", "name": '),
    ("not-an-object", CNI_ENV, "[1, 2]"),
    ("unknown-mode", CNI_ENV, cni_conf(mode="warp")),
    ("userspace-memif", CNI_ENV, cni_conf(mode="userspace", portType="memif", mtu=9000)),
    ("userspace-vhost", CNI_ENV, cni_conf(mode="userspace", portType="vhost-user")),
    ("kernel-af-xdp", CNI_ENV, cni_conf(mode="kernel", portType="af_xdp", mtu=1500)),
    ("kernel-tap", CNI_ENV, cni_conf(mode="kernel", portType="tap", mac="02:00:00:00:00:01")),
    ("other-mode", CNI_ENV, cni_conf(mode="kernel", portType="memif")),
    ("unknown-field", CNI_ENV, cni_conf(frobnicate=True)),
    ("bad-mac", CNI_ENV, cni_conf(mac="01:00:5e:00:00:01")),
    (
        "runtime-mac",
        CNI_ENV,
        cni_conf(runtimeConfig={"mac": "02:aa:bb:cc:dd:ee", "CNIDeviceInfoFile": "/tmp/x"}),
    ),
    ("prev-result", CNI_ENV, cni_conf(prevResult={"cniVersion": "1.1.0", "interfaces": []})),
    ("unsupported-version", CNI_ENV, cni_conf(version="9.0.0")),
    ("bad-mtu", CNI_ENV, cni_conf(mtu=10)),
]:
    put("cni_stdin", name, (env + conf).encode())
