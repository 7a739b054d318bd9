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

It also keeps the run's *undo journal*: before the bench changes the host
(a bridge or veth it adds, a tc redirect, an RPS mask, hugepages and their
mount, the SUT's CPUs isolated: system/isolate.py) the controller tells it
how to undo that change (``undo_push``); ``undo`` of a scope undoes that
scope's changes (a session's, latest first), and whatever is left is undone
when the agent stops, on every way out (bye, the connection gone, the grace
time, SIGTERM). The journal is also a file next to the agent
(``undo-TOKEN.json``): an agent that was killed outright leaves it, and the
next agent started in that directory undoes it first (``recovered`` in its
first line says what).

Next to it on the host: ``procfs.py`` (the /proc and /sys readers of a
trial, ``{"op": "procfs"}``) and ``isolate.py``, standard library only too.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import json
import os
import platform
import select
import shutil
import signal
import socket
import subprocess
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
        # what the campaign's SUTs need here (commands, or absolute paths)
        "needs_missing": [c for c in req.get("needs", [])
                          if not (os.path.exists(c) if c.startswith("/") else shutil.which(c))],
        "sha256": {p: sha256(p) for p in req.get("files", [])},
        "mono_ns": time.monotonic_ns(), "real_ns": time.time_ns(),
    }


def _own(path: str) -> None:
    """Give a file or directory the bench made to the owner of the agent's
    install directory (the SSH user: files it copies and reads are its)."""
    st = os.stat(os.path.dirname(os.path.abspath(__file__)))
    with contextlib.suppress(OSError):
        os.chown(path, st.st_uid, st.st_gid)


def _mkdirs(path: str) -> None:
    """A directory and its parents, each one made here given to that owner."""
    parent = os.path.dirname(path.rstrip("/"))
    if parent and parent != path and not os.path.isdir(parent):
        _mkdirs(parent)
    if not os.path.isdir(path):
        os.mkdir(path)
        _own(path)


def _tail(path: str, offset: int, most: int = 1 << 20) -> tuple[str, int]:
    """A file's text from ``offset`` and the offset after it (hosts/base.py read_from)."""
    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if offset > size:
                offset = 0
            f.seek(offset)
            data = f.read(most)
    except OSError:
        return "", 0
    return data.decode(errors="replace"), offset + len(data)


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


def unix_call(path: str, data: str, timeout_s: float, framing: str = "line") -> str:
    """One request to a Unix stream socket and its answer: a line each way,
    or (``framing`` "json") a JSON value each way without a newline."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall(data.encode() + (b"\n" if framing == "line" else b""))
        buf = b""
        dec = json.JSONDecoder()
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
            if framing == "line":
                if buf.endswith(b"\n"):
                    break
                continue
            try:
                dec.raw_decode(buf.decode(errors="replace"))
                break
            except ValueError:
                continue
    return buf.decode(errors="replace")


def shipped(name: str) -> Any:
    """A module shipped next to this file on a host (``procfs``,
    ``isolate``), or the package's own where this file is the package's
    (imported as turnout.hosts.agent, or run from a checkout)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if not __package__ and os.path.exists(os.path.join(here, f"{name}.py")):
        if here not in sys.path:
            sys.path.insert(0, here)
        return importlib.import_module(name)
    return importlib.import_module({"procfs": "turnout.hosts.procfs",
                                    "isolate": "turnout.system.isolate"}[name])


def state_dir() -> str:
    """Where an isolation's restore file lives on this host (as the bench's
    own state dir: testbed/state.py)."""
    return os.environ.get("TURNOUT_STATE_DIR", "/run/turnout-bench")


#: live isolations of this agent: state dir -> SutIsolation
ISOLATIONS: dict[str, Any] = {}


def isolate(sut_cpus: list[int], all_cpus: list[int], where: str,
            processes: bool = True) -> dict[str, Any]:
    """The SUT's CPUs isolated on this host (system/isolate.py), its restore
    file in ``where``, other processes' threads moved too with
    ``processes``; what moved and what could not."""
    mod = shipped("isolate")
    iso = mod.SutIsolation(set(sut_cpus), set(all_cpus), Path(where), processes=processes)
    iso.__enter__()
    ISOLATIONS[where] = iso
    return dict(iso.summary())


def unisolate(where: str) -> list[str]:
    """Put back this agent's isolation with its restore file in ``where``
    (or a dead one's); the problems."""
    mod = shipped("isolate")
    iso = ISOLATIONS.pop(where, None)
    if iso is not None:
        iso.__exit__(None, None, None)
        return [str(p) for p in iso.restore_problems]
    f = mod.restore_file(Path(where))
    try:
        doc = json.loads(f.read_text())
    except (OSError, ValueError):
        return []
    if int(doc.get("owner_pid") or 0) == os.getpid() or not mod._owner_alive(doc):
        problems = [str(p) for p in mod.restore(doc, mod.Sysfs())]
        if not problems:
            f.unlink(missing_ok=True)
        return problems
    return []


def undo_action(action: dict[str, Any]) -> str:
    """Undo one change (module doc); "" or the problem."""
    try:
        if "write" in action:
            with open(action["write"], "w") as f:
                f.write(str(action["value"]) + "\n")
        elif "run" in action:
            r = subprocess.run([str(x) for x in action["run"]], capture_output=True, text=True,
                               timeout=60)
            if r.returncode != 0 and not action.get("may_fail"):
                return f"{' '.join(action['run'])}: exit {r.returncode}: {r.stderr.strip()[-200:]}"
        elif "rmtree" in action:
            shutil.rmtree(action["rmtree"], ignore_errors=True)
        elif "isolation" in action:
            return "; ".join(unisolate(str(action["isolation"])))
        else:
            return f"unknown undo action {action!r}"
    except (OSError, subprocess.SubprocessError, ValueError) as e:
        return f"{action}: {type(e).__name__}: {e}"
    return ""


class Journal:
    """The run's undo journal (module doc), in memory and in ``path``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.entries: list[list[Any]] = []  # [scope, action]

    def save(self) -> None:
        if not self.entries:
            with contextlib.suppress(OSError):
                os.unlink(self.path)
            return
        me = os.getpid()
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"owner_pid": me, "owner_start": _start_time(me),
                       "entries": self.entries}, f)
        os.replace(tmp, self.path)

    def push(self, scope: str, action: dict[str, Any]) -> None:
        self.entries.append([scope, action])
        self.save()

    def undo(self, scope: str | None = None) -> list[str]:
        """Undo a scope's changes (every change when None), latest first."""
        problems = []
        for e in list(reversed(self.entries)):
            if scope is not None and e[0] != scope:
                continue
            why = undo_action(e[1])
            if why:
                problems.append(why)
            self.entries.remove(e)
            self.save()
        return problems


def _start_time(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


def recover(directory: str, token: str) -> list[str]:
    """Undo what agents that died left in their journals here (module doc)."""
    out = []
    for f in sorted(Path(directory).glob("undo-*.json")):
        if f.name == f"undo-{token}.json":
            continue
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        pid = int(doc.get("owner_pid") or 0)
        if pid > 0 and _start_time(pid) == doc.get("owner_start"):
            continue  # that agent is alive: another campaign's
        j = Journal(str(f))
        j.entries = list(doc.get("entries", []))
        n = len(j.entries)
        problems = j.undo()
        out.append(f"undid {n} changes an agent that died (pid {pid}) left ({f.name})"
                   + (f"; problems: {'; '.join(problems)}" if problems else ""))
        with contextlib.suppress(OSError):
            f.unlink()
    return out


#: this agent's journal (serve sets it)
JOURNAL: Journal | None = None


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
        return {"reply": unix_call(req["path"], req["data"], float(req.get("inner_timeout_s", 5)),
                                   str(req.get("framing", "line")))}
    if op == "threads":
        return {"threads": shipped("procfs").sample_threads([int(p) for p in req["pids"]])}
    if op == "procfs":
        fns = shipped("procfs").PUBLIC
        if req.get("fn") not in fns:
            raise ValueError(f"no procfs reader {req.get('fn')!r}")
        return {"result": fns[req["fn"]](**dict(req.get("kw") or {}))}
    if op == "tail":
        return dict(zip(("text", "size"), _tail(str(req["path"]), int(req.get("offset", 0))),
                        strict=True))
    if op == "run":
        # a short command, as root; inner_timeout_s: it is killed after that
        try:
            r = subprocess.run([str(c) for c in req["cmd"]], capture_output=True, text=True,
                               timeout=float(req.get("inner_timeout_s", 30)),
                               stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return {"timeout": True}
        except OSError as e:  # no such command: as a shell says it
            return {"rc": 127, "stdout": "", "stderr": f"{req['cmd'][0]}: {e.strerror}"}
        return {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr}
    if op == "mkdirs":
        _mkdirs(str(req["path"]))
        return {}
    if op == "write":
        path = str(req["path"])
        with open(path, "w") as f:
            f.write(str(req["text"]))
        _own(path)
        return {}
    if op == "read":
        try:
            return {"text": Path(req["path"]).read_text(errors="replace")}
        except OSError as e:
            return {"error": f"{type(e).__name__}: {e.strerror}"}
    if op == "listdir":
        try:
            return {"names": sorted(os.listdir(req["path"]))}
        except OSError:
            return {"names": []}
    if op == "which":
        c = str(req["cmd"])
        return {"path": (c if os.path.exists(c) else None) if c.startswith("/")
                else shutil.which(c)}
    if op == "undo_push":
        if JOURNAL is None:
            raise ValueError("no journal (not resident)")
        JOURNAL.push(str(req["scope"]), dict(req["action"]))
        return {}
    if op == "undo":
        if JOURNAL is None:
            raise ValueError("no journal (not resident)")
        return {"problems": JOURNAL.undo(str(req["scope"]))}
    if op == "isolate":
        where = str(req.get("state_dir") or state_dir())
        if JOURNAL is not None:  # restored on every way out, before it starts
            JOURNAL.push("campaign", {"isolation": where})
        return {"summary": isolate([int(c) for c in req["sut_cpus"]],
                                   [int(c) for c in req["all_cpus"]], where,
                                   bool(req.get("processes", True))), "state_dir": where}
    if op == "unisolate":
        where = str(req.get("state_dir") or state_dir())
        if JOURNAL is not None:
            JOURNAL.entries = [e for e in JOURNAL.entries if e[1] != {"isolation": where}]
            JOURNAL.save()
        return {"problems": unisolate(where)}
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


def _on_term(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # unwinds through serve's clean-up


def serve(token: str, grace_s: float) -> int:
    """The resident agent (module doc); returns its exit code."""
    global JOURNAL
    # its own session: the SSH session's end must not take it down before
    # it has stopped the run's processes
    with contextlib.suppress(OSError):
        os.setsid()
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _on_term)
    here = os.path.dirname(os.path.abspath(__file__))
    recovered = recover(here, token)
    JOURNAL = Journal(os.path.join(here, f"undo-{token}.json"))
    fd = sys.stdin.fileno()
    buf = b""
    out = sys.stdout
    out.write(json.dumps({"ready": True, "pid": os.getpid(), "recovered": recovered}) + "\n")
    out.flush()
    why = "bye"
    try:
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
    except SystemExit as e:
        why = f"signal {int(e.code or 0) - 128}"
    finally:
        # every way out: the run's processes first, then what they used
        stopped = stop_marked(token)
        problems = JOURNAL.undo()
        if why != "bye":
            # the controller is gone: nobody will fetch the run's files
            remove_runs(here, token)
    with contextlib.suppress(OSError):
        sys.stderr.write(f"turnout agent: {why}; stopped {len(stopped)} processes"
                         + (f"; undo problems: {'; '.join(problems)}" if problems else "") + "\n")
        out.write(json.dumps({"bye": True, "stopped": stopped, "undo_problems": problems}) + "\n")
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
