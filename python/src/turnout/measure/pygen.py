"""A slow reference tester speaking turnout-gen's command line and JSON.

Implements the ``tx``, ``rx`` and ``txrx`` roles on ``af_packet:IFACE``
ports only, with the payload header of docs/turnout-gen.md (magic, stream,
sequence, CLOCK_MONOTONIC send time). It exists so the bench can run end to
end before (or without) the Rust turnout-gen; being Python with one syscall
per frame it tops out near 10^5 pps, so results taken with it say
``tester = pygen`` and measure the tester more than the switch. Frames are
at least 66 B here (Ethernet + IPv4 + UDP + the 24-byte payload header).

Run as ``python -m turnout.measure.pygen ROLE [OPTIONS]``.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import socket
import struct
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = ["MIN_FRAME_B", "build_frame", "main"]

VERSION = "0.1.0-pygen"
MAGIC = 0x54524E54
ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4
HDR = struct.Struct("!IIQQ")  # magic, stream, seq, ts_ns
PAYLOAD_OFF = 14 + 20 + 8
MIN_FRAME_B = PAYLOAD_OFF + HDR.size
SAMPLE_CAP = 100_000


def _mac(s: str) -> bytes:
    return bytes(int(x, 16) for x in s.split(":"))


def _csum(b: bytes) -> int:
    s = sum(struct.unpack(f"!{len(b) // 2}H", b))
    while s >> 16:
        s = (s & 0xFFFF) + (s >> 16)
    return ~s & 0xFFFF


def build_frame(
    size_b: int, src_mac: str, dst_mac: str, src_port: int, dst_port: int = 9
) -> bytearray:
    """An IPv4/UDP frame of max(size_b, MIN_FRAME_B) bytes; header fields filled in per send."""
    size = max(size_b, MIN_FRAME_B)
    ip_len = size - 14
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, ip_len, 0, 0, 64, 17, 0,
                     bytes([10, 0, 0, 1]), bytes([10, 0, 0, 2]))
    ip = ip[:10] + struct.pack("!H", _csum(ip)) + ip[12:]
    udp = struct.pack("!HHHH", src_port, dst_port, ip_len - 20, 0)
    frame = bytearray(_mac(dst_mac) + _mac(src_mac) + b"\x08\x00" + ip + udp)
    frame += bytes(size - len(frame))
    return frame


def _iface(spec: str) -> str:
    kind, _, rest = spec.partition(":")
    if kind not in ("af_packet", "afpacket") or not rest:
        raise SystemExit(2)
    return rest.split(",")[0]


@dataclass
class _Rx:
    packets: int = 0
    bytes: int = 0
    foreign: int = 0
    streams: dict[int, dict[str, int]] = field(default_factory=dict)
    samples: list[int] = field(default_factory=list)
    seen: int = 0
    jitter: float = 0.0
    last_transit: int | None = None
    first_ns: int | None = None
    last_ns: int | None = None


def _all_in(rx: _Rx, stream: int, sent: int) -> bool:
    """Every frame of the ``sent`` of ``stream`` has arrived (duplicates aside)."""
    st = rx.streams.get(stream)
    return sent == 0 or (st is not None and st["received"] - st["duplicated"] >= sent)


def _receive(sock: socket.socket, stop: threading.Event, rx: _Rx, rng: random.Random) -> None:
    sock.settimeout(0.05)
    while not stop.is_set():
        try:
            data, addr = sock.recvfrom(10000)
        except TimeoutError:
            continue
        except OSError:
            break
        if addr[2] == PACKET_OUTGOING:
            continue
        now = time.monotonic_ns()
        if len(data) < MIN_FRAME_B or HDR.unpack_from(data, PAYLOAD_OFF)[0] != MAGIC:
            rx.foreign += 1
            continue
        _, stream, seq, ts = HDR.unpack_from(data, PAYLOAD_OFF)
        st = rx.streams.setdefault(stream, {"id": stream, "received": 0, "max_seq": -1,
                                            "reordered": 0, "duplicated": 0})
        if seq <= st["max_seq"]:
            st["reordered"] += 1
        st["max_seq"] = max(st["max_seq"], seq)
        st["received"] += 1
        rx.packets += 1
        rx.bytes += len(data)
        rx.first_ns = rx.first_ns or now
        rx.last_ns = now
        transit = now - ts
        if rx.last_transit is not None:
            rx.jitter += (abs(transit - rx.last_transit) - rx.jitter) / 16
        rx.last_transit = transit
        rx.seen += 1
        if len(rx.samples) < SAMPLE_CAP:
            rx.samples.append(transit)
        else:  # reservoir sampling keeps an unbiased sample
            j = rng.randrange(rx.seen)
            if j < SAMPLE_CAP:
                rx.samples[j] = transit


def _rx_doc(rx: _Rx, duration_s: float, sent_by_stream: dict[int, int] | None) -> dict[str, Any]:
    streams = []
    lost_total = 0
    for sid, st in sorted(rx.streams.items()):
        expected = sent_by_stream.get(sid) if sent_by_stream else st["max_seq"] + 1
        lost = max(0, (expected or 0) - st["received"])
        lost_total += lost
        streams.append({"id": sid, "received": st["received"], "lost": lost,
                        "reordered": st["reordered"], "duplicated": st["duplicated"]})
    if sent_by_stream:
        for sid, n in sent_by_stream.items():
            if sid not in rx.streams:
                lost_total += n
                streams.append({"id": sid, "received": 0, "lost": n, "reordered": 0,
                                "duplicated": 0})
    doc: dict[str, Any] = {
        "packets": rx.packets, "bytes": rx.bytes, "foreign": rx.foreign,
        "duration_s": duration_s, "rate_pps": rx.packets / duration_s if duration_s else 0.0,
        "lost": lost_total, "reordered": sum(s["reordered"] for s in streams),
        "duplicated": 0, "streams": streams,
    }
    if rx.samples:
        xs = sorted(rx.samples)

        def q(p: float) -> int:
            return xs[min(len(xs) - 1, int(p * len(xs)))]

        n = len(xs)
        cdf: list[list[float]] = []
        for i in range(1, 201):
            idx = max(0, min(n - 1, round(i * n / 200) - 1))
            if not cdf or cdf[-1][0] != xs[idx]:
                cdf.append([xs[idx], (idx + 1) / n])
            else:
                cdf[-1][1] = (idx + 1) / n
        doc["latency_ns"] = {"count": rx.seen, "min": xs[0], "mean": sum(xs) / n,
                             "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "p999": q(0.999),
                             "max": xs[-1], "cdf": cdf}
        doc["jitter_ns"] = rx.jitter
    return doc


def _send(sock: socket.socket, args: argparse.Namespace, stop: threading.Event) -> dict[str, Any]:
    frames = [
        build_frame(args.size, args.src_mac, args.dst_mac, 1024 + f) for f in range(args.flows)
    ]
    rate = args.rate_pps or 0.0
    burst = max(1, args.burst)
    seq = 0
    full = 0
    nbytes = 0
    start = time.monotonic()
    end = start + args.duration_s
    next_t = start
    while not stop.is_set():
        now = time.monotonic()
        if now >= end or (args.count and seq >= args.count):
            break
        if rate and now < next_t:
            time.sleep(min(next_t - now, 0.001))
            continue
        for _ in range(burst):
            f = frames[seq % len(frames)]
            HDR.pack_into(f, PAYLOAD_OFF, MAGIC, args.stream, seq, time.monotonic_ns())
            try:
                sock.send(f)
            except (BlockingIOError, OSError):
                full += 1
                continue
            seq += 1
            nbytes += len(f)
        if rate:
            next_t += burst / rate
    dur = time.monotonic() - start
    return {"packets": seq, "bytes": nbytes, "duration_s": dur,
            "rate_pps": seq / dur if dur else 0.0, "requested_pps": float(rate), "full": full}


def _sock(iface: str) -> socket.socket:
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    s.bind((iface, 0))
    return s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pygen", description=__doc__)
    p.add_argument("role", choices=("tx", "rx", "txrx"))
    p.add_argument("--port", required=True)
    p.add_argument("--rx-port")
    p.add_argument("--size", type=int, default=64)
    p.add_argument("--flows", type=int, default=1)
    p.add_argument("--src-mac", default="02:00:00:00:00:01")
    p.add_argument("--dst-mac", default="02:00:00:00:00:02")
    p.add_argument("--stream", type=int, default=0)
    p.add_argument("--rate-pps", type=float, default=0.0)
    p.add_argument("--burst", type=int, default=32)
    p.add_argument("--duration-s", type=float, default=None)
    p.add_argument("--count", type=int, default=0)
    p.add_argument("--warmup-s", type=float, default=0.0)
    p.add_argument("--cooldown-s", type=float, default=0.2)
    p.add_argument("--cpu", type=int)
    p.add_argument("--wait-peer-s", type=float, default=10)
    p.add_argument("--json", default="-")
    p.add_argument("--allow-no-rx", action="store_true",
                   help="txrx: exit 0 even when none of the frames sent came back (else 4)")
    args = p.parse_args(argv)
    if not 64 <= args.size <= 9000:
        print("pygen: --size must be 64..9000", file=sys.stderr)
        return 2
    if args.cpu is not None:
        import os

        os.sched_setaffinity(0, {args.cpu})
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    try:
        tx_sock = _sock(_iface(args.port)) if args.role in ("tx", "txrx") else None
        rx_sock = _sock(_iface(args.rx_port or args.port)) if args.role in ("rx", "txrx") else None
    except OSError as e:
        print(f"pygen: {e}", file=sys.stderr)
        return 1
    doc: dict[str, Any] = {"schema": "turnout-gen/1", "role": args.role, "version": VERSION,
                           "config": {"port": args.port, "rx_port": args.rx_port,
                                      "size_b": max(args.size, MIN_FRAME_B),
                                      "rate_pps": args.rate_pps, "burst": args.burst,
                                      "duration_s": args.duration_s, "flows": args.flows}}
    rx = _Rx()
    rx_stop = threading.Event()
    t0 = time.monotonic()
    th = None
    if rx_sock is not None:
        th = threading.Thread(target=_receive, args=(rx_sock, rx_stop, rx, random.Random(1)))
        th.start()
    sent_by_stream = None
    if tx_sock is not None:
        if args.duration_s is None:
            args.duration_s = 10.0
        doc["tx"] = _send(tx_sock, args, stop)
        sent_by_stream = {args.stream: doc["tx"]["packets"]}
        if th is not None:
            # as turnout-gen: the cool-down ends once every frame sent is back
            end = time.monotonic() + args.cooldown_s
            while time.monotonic() < end and not _all_in(rx, args.stream,
                                                         doc["tx"]["packets"]):
                time.sleep(0.005)
    elif th is not None:
        deadline = t0 + args.duration_s if args.duration_s else None
        while not stop.is_set() and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.02)
    if th is not None:
        rx_stop.set()
        th.join()
        dur = doc["tx"]["duration_s"] if "tx" in doc else time.monotonic() - t0
        doc["rx"] = _rx_doc(rx, dur, sent_by_stream)
    out = json.dumps(doc)
    if args.json == "-":
        print(out, flush=True)
    else:
        with open(args.json, "w") as f:
            f.write(out)
    if args.role == "txrx" and not args.allow_no_rx and doc["tx"]["packets"] > 0 \
            and doc["rx"]["packets"] == 0:
        print(f"pygen txrx: received none of the {doc['tx']['packets']} frames it sent "
              "(--allow-no-rx if that is expected)", file=sys.stderr)
        return 4
    return 0


if __name__ == "__main__":
    sys.exit(main())
