"""The bench's agent on a remote host (docs/bench.md, "Across hosts").

Python standard library only: the controller ships this file to every
host of a remote campaign and runs it with the host's ``python3`` over
SSH. Two modes:

- one shot, ``python3 - once REQUEST`` with this program on stdin: the
  pre-flight checks (``facts``: kernel, CPUs, commands, interfaces, clock,
  build hashes) run this way, so a campaign that is refused has started
  nothing anywhere;
- resident, ``python3 agent.py serve TOKEN GRACE_S``: JSON requests one a
  line on stdin, one JSON answer a line on stdout (the Unix-socket calls to
  a SUT's control socket, /proc thread samples, signals, the clock). It is
  a dead man's switch: every process of the run carries ``TURNOUT_RUN=TOKEN``
  in its environment (the controller starts them so), and when the
  controller goes away — stdin closes (the SSH connection dropped), nothing
  arrives for GRACE_S seconds (the network is cut, the controller was
  killed), or it says ``bye`` — the agent stops every process of its token
  (SIGTERM, then SIGKILL) and exits. So a host that drops off mid-trial
  leaves nothing running once it notices.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import select
import shutil
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

#: environment variable every process of a run carries (its value: the run's token)
MARKER = "TURNOUT_RUN"


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor()


def _driver(iface: str) -> str:
    """The NIC's driver: the sysfs device link, else ETHTOOL_GDRVINFO."""
    link = Path(f"/sys/class/net/{iface}/device/driver")
    if link.exists():
        return os.path.basename(os.path.realpath(link))
    try:
        import array
        import fcntl
        import struct

        buf = array.array("B", struct.pack("I", 0x00000003) + b"\0" * 192)  # ETHTOOL_GDRVINFO
        addr, _ = buf.buffer_info()
        req = struct.pack("16sP16x", iface.encode()[:15], addr)  # struct ifreq
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            fcntl.ioctl(s.fileno(), 0x8946, req)  # SIOCETHTOOL
        return bytes(buf[4:36]).split(b"\0", 1)[0].decode(errors="replace")
    except (OSError, ImportError):
        return ""


def nic(iface: str) -> dict[str, Any]:
    """What the host says of one interface (exists, driver, MAC, MTU, speed, state)."""
    d = f"/sys/class/net/{iface}"
    if not os.path.isdir(d):
        return {"exists": False}
    speed = _read(f"{d}/speed")
    return {"exists": True, "driver": _driver(iface), "mac": _read(f"{d}/address"),
            "mtu": int(_read(f"{d}/mtu") or 0), "state": _read(f"{d}/operstate"),
            "speed_mbps": int(speed) if speed.lstrip("-").isdigit() else None}


def sha256(path: str) -> str | None:
    try:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        return h.hexdigest()
    except OSError:
        return None


def facts(req: dict[str, Any]) -> dict[str, Any]:
    """The pre-flight facts of this host (``turnout system check`` remotely)."""
    govs = sorted({_read(str(p)) for p in Path("/sys/devices/system/cpu").glob(
        "cpu[0-9]*/cpufreq/scaling_governor")} - {""})
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    ifaces = sorted(os.listdir("/sys/class/net")) if os.path.isdir("/sys/class/net") else []
    return {
        "hostname": socket.gethostname(), "kernel": platform.release(),
        "cpu_model": _cpu_model(), "cpus": sorted(os.sched_getaffinity(0)),
        "online": _read("/sys/devices/system/cpu/online"),
        "isolated": _read("/sys/devices/system/cpu/isolated"),
        "governor": ",".join(govs) or "not visible",
        "smt": _read("/sys/devices/system/cpu/smt/control") or "not visible",
        "thp": thp[thp.find("[") + 1:thp.find("]")] if "[" in thp else thp,
        "load": list(os.getloadavg()), "python": platform.python_version(),
        "euid": os.geteuid(), "interfaces": ifaces,
        "nics": {i: nic(i) for i in req.get("nics", [])},
        "missing": [c for c in req.get("commands", []) if shutil.which(c) is None],
        "sha256": {p: sha256(p) for p in req.get("files", [])},
        "mono_ns": time.monotonic_ns(), "real_ns": time.time_ns(),
    }


def threads(pids: list[int]) -> dict[str, list[Any]]:
    """tid -> [pid, name, utime, stime, last CPU] of every thread of ``pids``."""
    out: dict[str, list[Any]] = {}
    for pid in pids:
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            f = stat[stat.rindex(")") + 2:].split()
            out[tid] = [pid, name, int(f[11]), int(f[12]), int(f[36])]
    return out


def marked(token: str) -> list[dict[str, Any]]:
    """Every process whose environment carries this run's token."""
    want = f"{MARKER}={token}".encode()
    out = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            env = Path(f"/proc/{p}/environ").read_bytes().split(b"\0")
            if want not in env:
                continue
            cmd = Path(f"/proc/{p}/cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace").strip()
        except OSError:
            continue
        out.append({"pid": int(p), "cmd": cmd})
    return out


def stop_marked(token: str, grace_s: float = 2.0) -> list[dict[str, Any]]:
    """SIGTERM every process of the token, SIGKILL what is left after ``grace_s``."""
    procs = marked(token)
    for p in procs:
        with contextlib.suppress(OSError):
            os.kill(p["pid"], signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    for p in marked(token):
        with contextlib.suppress(OSError):
            os.kill(p["pid"], signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while marked(token) and time.monotonic() < deadline:
        time.sleep(0.05)
    return procs


def remove_runs(install_dir: str, token: str) -> None:
    """Remove the run directories of this token (``run-<token tail>-N``,
    turnout.hosts.remote.RemoteBed) from the install directory."""
    for d in Path(install_dir).glob(f"run-{token[-8:]}-*"):
        shutil.rmtree(d, ignore_errors=True)


def unix_call(path: str, data: str, timeout_s: float) -> str:
    """One request line to a Unix stream socket, its answer line back."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall(data.encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf.decode(errors="replace")


def handle(req: dict[str, Any], token: str) -> dict[str, Any]:
    """One request of the resident agent."""
    op = req.get("op")
    if op == "ping":
        return {}
    if op == "time":
        return {"mono_ns": time.monotonic_ns(), "real_ns": time.time_ns()}
    if op == "facts":
        return facts(req)
    if op == "exists":
        return {"exists": os.path.exists(req["path"])}
    if op == "unix":
        return {"reply": unix_call(req["path"], req["data"], float(req.get("inner_timeout_s", 5)))}
    if op == "threads":
        return {"threads": threads([int(p) for p in req["pids"]])}
    if op == "alive":
        return {"alive": [p for p in req["pids"] if os.path.exists(f"/proc/{int(p)}")]}
    if op == "kill":
        # only a process of this run: the token in its environment
        pid = int(req["pid"])
        if all(p["pid"] != pid for p in marked(token)):
            return {"killed": False}
        os.kill(pid, int(req.get("sig", signal.SIGTERM)))
        return {"killed": True}
    if op == "procs":
        return {"procs": marked(token)}
    if op == "cleanup":
        return {"stopped": stop_marked(token)}
    raise ValueError(f"unknown op {op!r}")


def serve(token: str, grace_s: float) -> int:
    """The resident agent (module doc); returns its exit code."""
    # its own session: the SSH session's end must not take it down before
    # it has stopped the run's processes
    with contextlib.suppress(OSError):
        os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    fd = sys.stdin.fileno()
    buf = b""
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid()}) + "\n")
    out.flush()
    why = "bye"
    while True:
        ready, _, _ = select.select([fd], [], [], grace_s)
        if not ready:
            why = f"no word from the controller for {grace_s:g} s"
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            why = "the controller's connection closed"
            break
        buf += chunk
        stop = False
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            try:
                req = json.loads(line)
            except ValueError:
                continue
            if req.get("op") == "bye":
                stop = True
                break
            try:
                ans = {"ok": True, **handle(req, token)}
            except Exception as e:  # answer with the error; the agent goes on
                ans = {"ok": False, "error": f"{type(e).__name__}: {e}"}
            try:
                out.write(json.dumps(ans) + "\n")
                out.flush()
            except OSError:
                stop = True
                why = "the controller's connection closed"
                break
        if stop:
            break
    stopped = stop_marked(token)
    if why != "bye":
        # the controller is gone: nobody will fetch the run's files
        remove_runs(os.path.dirname(os.path.abspath(__file__)), token)
    with contextlib.suppress(OSError):
        sys.stderr.write(f"turnout agent: {why}; stopped {len(stopped)} processes\n")
        out.write(json.dumps({"bye": True, "stopped": stopped}) + "\n")
        out.flush()
    return 0


def main(argv: list[str]) -> int:
    if len(argv) >= 3 and argv[1] == "once":
        # the program itself may come on stdin (``python3 - once REQUEST``)
        req = json.loads(argv[2])
        try:
            print(json.dumps({"ok": True, **handle(req, req.get("token", ""))}))
        except Exception as e:
            print(json.dumps({"ok": False, "error": f"{type(e).__name__}: {e}"}))
        return 0
    if len(argv) >= 4 and argv[1] == "serve":
        return serve(argv[2], float(argv[3]))
    sys.stderr.write("usage: agent.py once REQUEST | agent.py serve TOKEN GRACE_S\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
