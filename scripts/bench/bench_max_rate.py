#!/usr/bin/env python3
"""Maximum send and receive rate of turnout-gen per core, next to DPDK
testpmd on the same path.

memif: a testpmd memif server on CPU 1 is the counterpart and the
instrument: its port counters, read twice over a window while the client
runs, give the rate. Send rate = frames the server receives per second
(rxonly) from the client under test (turnout-gen tx, or testpmd txonly as
a client); receive rate = frames the server manages to put into the ring
per second (txonly) while the client under test (turnout-gen rx, or testpmd
rxonly) drains it. The client runs on CPU 0.

vhost-user: the same with a testpmd ``net_vhost`` backend on CPU 1 as the
counterpart and instrument, and as the client under test turnout-gen's
vhost-user frontend (``vhost_user:SOCK``) or testpmd's virtio-user
(``net_virtio_user``), both with 1024-entry rings, on CPU 0.

AF_XDP on a veth between two namespaces: send rate = turnout-gen tx's own
rate (vs testpmd txonly on net_af_xdp, read from its counters); receive
rate = frames turnout-gen rx counts per second while testpmd txonly sends
from the other end.

Runs are interleaved (gen, testpmd, gen, ...) and reported as medians with
min and max. Needs root, dpdk-testpmd, and target/release/turnout-gen.

turnout-gen's vhost-user transmit buffers hold its largest frame sent
(128 B apart at 64 B), its receive buffers 2 KiB (mergeable, at the
default ``max-frame=9000``); testpmd's virtio-user uses 2 KiB mbufs.
``--gen-port-opts`` adds port options (e.g. ``tx-frame=9000`` for the old
transmit layout).

The window opens a second after frames flow (for both clients), not at a
fixed time after launch: turnout-gen's start-up takes ~1 s on a loaded host.

usage: bench_max_rate.py [--runs N] [--window-s S] [--sizes 64,1518]
                         [--only memif|vhost|afxdp] [--gen-port-opts OPTS]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GEN = os.environ.get("TURNOUT_GEN", str(REPO / "target" / "release" / "turnout-gen"))
PID = os.getpid()


class Testpmd:
    """An interactive testpmd whose statistics are read from its stdout."""

    def __init__(self, prefix: str, lcores: str, main: int, vdevs: list[str],
                 netns: str | None = None, extra: list[str] | None = None,
                 wrap: list[str] | None = None, eal: list[str] | None = None) -> None:
        self.prefix = prefix
        # wrap: a command testpmd runs under (e.g. valgrind's callgrind)
        cmd = ["stdbuf", "-oL", *(wrap or []), "dpdk-testpmd", "--no-huge", "-m", "1024",
               "--no-pci", "-l", lcores, "--main-lcore", str(main), f"--file-prefix={prefix}"]
        cmd += [f"--vdev={v}" for v in vdevs] + (eal or [])
        cmd += ["--", "--total-num-mbufs=16384", "-i", *(extra or [])]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, text=True, bufsize=1)
        self.buf = ""
        self.lock = threading.Lock()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        while True:
            chunk = self.p.stdout.read(1)
            if not chunk:
                return
            with self.lock:
                self.buf += chunk

    def cmd(self, c: str) -> None:
        self.p.stdin.write(c + "\n")
        self.p.stdin.flush()

    def _read_until(self, pat: str, timeout: float) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self.lock:
                m = re.search(pat, self.buf, re.S)
                if m:
                    out = self.buf[: m.end()]
                    self.buf = self.buf[m.end():]
                    return out
            time.sleep(0.02)
        raise RuntimeError(f"testpmd {self.prefix}: no {pat!r} in output: {self.buf[-500:]}")

    def stats(self, timeout: float = 5) -> tuple[float, int, int]:
        """(time, RX-packets, TX-packets) of port 0."""
        with self.lock:
            self.buf = ""
        self.cmd("show port stats 0")
        out = self._read_until(r"TX-packets:\s+\d+", timeout)
        t = time.monotonic()
        rx = int(re.search(r"RX-packets:\s+(\d+)", out).group(1))
        tx = int(re.search(r"TX-packets:\s+(\d+)", out).group(1))
        return t, rx, tx

    def close(self, timeout: float = 5) -> None:
        # "quit" lets testpmd close its ports (and detach an AF_XDP
        # program); kill only if it does not exit.
        if self.p.poll() is None:
            try:
                self.cmd("stop")
                self.cmd("quit")
                self.p.wait(timeout=timeout)
            except (OSError, subprocess.TimeoutExpired):
                self.p.kill()
                self.p.wait()
        shutil.rmtree(f"/var/run/dpdk/{self.prefix}", ignore_errors=True)


def wait_flowing(pmd: Testpmd, field: int, timeout: float,
                 cli: subprocess.Popen | None = None) -> None:
    """Waits until port 0's counter ``field`` (0 RX, 1 TX) moves."""
    _, *a = pmd.stats()
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        time.sleep(0.05)
        _, *b = pmd.stats()
        if b[field] != a[field]:
            return
        if cli is not None and cli.poll() is not None:
            err = cli.stderr.read().decode(errors="replace") if cli.stderr else ""
            raise RuntimeError(f"the client exited before frames flowed: {err[-300:]}")
    raise RuntimeError(f"no frames flowed within {timeout:.0f} s")


def window_rate(pmd: Testpmd, window_s: float, field: int) -> float:
    t0, *a = pmd.stats()
    time.sleep(window_s)
    t1, *b = pmd.stats()
    return (b[field] - a[field]) / (t1 - t0)


def shm_run(path: str, client: str, direction: str, size: int, window_s: float,
            n: int, gen_opts: str = "") -> float:
    """Rate (pps) through a testpmd server port over shared memory (path
    'memif' or 'vhost'); client 'gen' or 'testpmd'."""
    prefix = f"tgb{PID}s{n}"
    sock = f"/tmp/{prefix}.sock"
    server_mode = "rxonly" if direction == "send" else "txonly"
    if path == "memif":
        srv_vdev = f"net_memif0,role=server,socket={sock},socket-abstract=no"
        cli_vdev = f"net_memif0,role=client,socket={sock},socket-abstract=no"
        gen_port = f"memif:{sock}"
    else:
        srv_vdev = f"net_vhost0,iface={sock},queues=1"
        cli_vdev = f"net_virtio_user0,path={sock},queues=1,queue_size=1024"
        gen_port = f"vhost_user:{sock},queue-size=1024" + (f",{gen_opts}" if gen_opts else "")
    srv = Testpmd(prefix, "0,1", 0, [srv_vdev], extra=[f"--txpkts={size}"])
    cli = None
    cli_pmd = None
    try:
        srv._read_until(r"testpmd> ", 60)
        srv.cmd(f"set fwd {server_mode}")
        srv.cmd("start")
        if client == "gen":
            # runs until killed after the window (start-up time varies)
            dur = str(window_s + 120)
            role = (["tx", "--size", str(size), "--duration-s", dur, "--cooldown-s", "0"]
                    if direction == "send" else ["rx", "--duration-s", dur])
            cli = subprocess.Popen([GEN, *role, "--port", gen_port, "--cpu", "0"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        else:
            cli_pmd = Testpmd(f"tgb{PID}c{n}", "0,1", 1, [cli_vdev],
                              extra=[f"--txpkts={size}"])
            # virtio-user sets its device up with the backend before the
            # prompt: seconds on a loaded host
            cli_pmd._read_until(r"testpmd> ", 60)
            cli_pmd.cmd("set fwd " + ("txonly" if direction == "send" else "rxonly"))
            cli_pmd.cmd("start")
        field = 0 if direction == "send" else 1
        # The window starts once frames flow, plus a second, for both
        # clients alike: testpmd's client is up when its prompt comes,
        # turnout-gen only after exec, connection and set-up, which took
        # ~1 s at load 10 (a fixed 1 s wait would put gen's start-up into
        # its window: low, scattered rates).
        wait_flowing(srv, field, 60, cli)
        time.sleep(1.0)
        r = window_rate(srv, window_s, field)
        if cli is not None and cli.poll() is not None:
            # a client that ended inside the window is a failed run, not a rate
            err = cli.stderr.read().decode(errors="replace") if cli.stderr else ""
            raise RuntimeError(f"turnout-gen exited (code {cli.returncode}): {err[-300:]}")
        return r
    finally:
        if cli:
            cli.kill()
            cli.wait()
        if cli_pmd:
            cli_pmd.close()
        srv.close()
        Path(sock).unlink(missing_ok=True)


class Veth:
    def __init__(self) -> None:
        self.a, self.b = f"tgba{PID}", f"tgbb{PID}"
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "add", ns], check=True)
        subprocess.run(["ip", "-n", self.a, "link", "add", "va", "type", "veth",
                        "peer", "name", "vb", "netns", self.b], check=True)
        subprocess.run(["ip", "-n", self.a, "link", "set", "va", "up"], check=True)
        subprocess.run(["ip", "-n", self.b, "link", "set", "vb", "up"], check=True)

    def detach(self) -> None:
        """Removes any XDP program left on the veth ends."""
        for ns, dev in ((self.a, "va"), (self.b, "vb")):
            for mode in ("xdp", "xdpgeneric"):
                subprocess.run(["ip", "-n", ns, "link", "set", "dev", dev, mode, "off"],
                               check=False, stderr=subprocess.DEVNULL)

    def close(self) -> None:
        for ns in (self.a, self.b):
            subprocess.run(["ip", "netns", "del", ns], check=False)


def afxdp_run(v: Veth, client: str, direction: str, size: int, window_s: float, n: int) -> float:
    if direction == "send":
        if client == "gen":
            out = subprocess.run(["ip", "netns", "exec", v.a, GEN, "tx", "--port", "af_xdp:va",
                                  "--size", str(size), "--duration-s", str(window_s),
                                  "--warmup-s", "0.5", "--cpu", "0", "--cooldown-s", "0"],
                                 capture_output=True, text=True, timeout=60)
            return json.loads(out.stdout)["tx"]["rate_pps"]
        pmd = Testpmd(f"tgbx{PID}{n}", "0,1", 1, ["net_af_xdp0,iface=va"], netns=v.a,
                      extra=[f"--txpkts={size}"])
        try:
            pmd._read_until(r"testpmd> ", 15)
            pmd.cmd("set fwd txonly")
            pmd.cmd("start")
            time.sleep(0.5)
            return window_rate(pmd, window_s, 1)
        finally:
            pmd.close()
    # receive: testpmd txonly in a sends; the receiver under test in b
    snd = Testpmd(f"tgbx{PID}{n}", "0,1", 0, ["net_af_xdp0,iface=va"], netns=v.a,
                  extra=[f"--txpkts={size}"])
    try:
        snd._read_until(r"testpmd> ", 15)
        if client == "gen":
            rx = subprocess.Popen(["ip", "netns", "exec", v.b, GEN, "rx", "--port", "af_xdp:vb",
                                   "--cpu", "0", "--duration-s", str(window_s + 0.5)],
                                  stdout=subprocess.PIPE, text=True)
            time.sleep(0.5)
            snd.cmd("set fwd txonly")
            snd.cmd("start")
            out, _ = rx.communicate(timeout=60)
            r = json.loads(out)["rx"]
            return (r["foreign"] + r["packets"]) / window_s
        rcv = Testpmd(f"tgby{PID}{n}", "0,1", 1, ["net_af_xdp0,iface=vb"], netns=v.b)
        try:
            rcv._read_until(r"testpmd> ", 15)
            rcv.cmd("set fwd rxonly")
            rcv.cmd("start")
            snd.cmd("set fwd txonly")
            snd.cmd("start")
            time.sleep(0.5)
            return window_rate(rcv, window_s, 0)
        finally:
            rcv.close()
    finally:
        snd.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--window-s", type=float, default=2.0)
    ap.add_argument("--sizes", default="64,1518")
    ap.add_argument("--only", choices=["memif", "vhost", "afxdp"])
    ap.add_argument("--gen-port-opts", default="",
                    help="extra options of turnout-gen's vhost-user port, e.g. max-frame=1518")
    a = ap.parse_args()
    if os.geteuid() != 0 or not shutil.which("dpdk-testpmd") or not Path(GEN).exists():
        print("needs root, dpdk-testpmd and " + GEN, file=sys.stderr)
        return 2
    sizes = [int(s) for s in a.sizes.split(",")]
    results: dict[str, list[float]] = {}
    pairs: dict[str, dict[int, dict[str, float]]] = {}
    n = 0
    v = None
    try:
        for path in ("memif", "vhost", "afxdp"):
            if a.only and path != a.only:
                continue
            if path == "afxdp":
                v = Veth()
            for size in sizes:
                for direction in ("send", "receive"):
                    for run in range(a.runs):
                        for client in ("gen", "testpmd"):  # interleaved
                            n += 1
                            try:
                                if path in ("memif", "vhost"):
                                    r = shm_run(path, client, direction, size, a.window_s, n,
                                                a.gen_port_opts if path == "vhost" else "")
                                else:
                                    v.detach()
                                    r = afxdp_run(v, client, direction, size, a.window_s, n)
                            except Exception as e:
                                print(f"  {path} {client} {direction} {size}: failed: {e}",
                                  file=sys.stderr)
                                continue
                            key = f"{path} {direction} {size}B {client}"
                            results.setdefault(key, []).append(r)
                            pair = pairs.setdefault(f"{path} {direction} {size}B", {})
                            pair.setdefault(run, {})[client] = r
                            print(f"  {key}: {r / 1e6:.3f} Mpps", file=sys.stderr)
    finally:
        if v:
            v.close()
    print(f"{'path':6} {'dir':8} {'size':>5} {'tool':8} {'median Mpps':>11} {'min':>7} {'max':>7}")
    for k, vals in results.items():
        path, d, size, tool = k.split()
        print(f"{path:6} {d:8} {size:>5} {tool:8} {statistics.median(vals) / 1e6:11.3f} "
              f"{min(vals) / 1e6:7.3f} {max(vals) / 1e6:7.3f}")
    # Ratios pair by pair (the runs are interleaved gen, testpmd, gen, ...),
    # so the host's drift between runs mostly cancels.
    print(f"\n{'path':6} {'dir':8} {'size':>5} {'gen/testpmd median':>18} "
          f"{'min':>6} {'max':>6} {'pairs':>5}")
    for k, runs in pairs.items():
        path, d, size = k.split()
        ratios = [x["gen"] / x["testpmd"] for x in runs.values() if x.get("testpmd") and "gen" in x]
        if ratios:
            print(f"{path:6} {d:8} {size:>5} {statistics.median(ratios):18.2f} {min(ratios):6.2f} "
                  f"{max(ratios):6.2f} {len(ratios):5d}")
    print(json.dumps({k: v for k, v in results.items()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
