"""The host layer: where the bench runs a command, starts a process, puts or
reads a file, and signals a process by its PID (docs/bench.md, "Across
hosts").

``LocalHost`` is what the bench always did (subprocess, the local file
system, this machine's PIDs); ``turnout.hosts.ssh.SshHost`` does the same
on another machine over SSH. SUT adapters and the measurer use a host
through this interface only where a remote campaign needs it, so they
change little.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import IO, Any, Protocol

__all__ = ["Host", "HostError", "HostLost", "HostProc", "LocalHost", "read_from", "unix_request",
           "wrap"]


class HostError(RuntimeError):
    """A command or file operation on a host failed (the message names the host)."""


class HostLost(HostError):
    """The host stopped answering (SSH connection dropped, network cut): every
    later call on it fails at once with the same reason."""


class HostProc(Protocol):
    """What the bench needs of a running process (a subset of Popen)."""

    pid: int
    args: Any
    returncode: int | None
    stdout: Any
    stderr: Any

    def poll(self) -> int | None: ...

    def wait(self, timeout: float | None = None) -> int: ...

    def communicate(self, input: bytes | None = None,
                    timeout: float | None = None) -> tuple[bytes, bytes]: ...

    def send_signal(self, sig: int) -> None: ...

    def terminate(self) -> None: ...

    def kill(self) -> None: ...

    #: a pipe to its standard input (spawned with ``stdin=True``), else None
    stdin: Any


def wrap(cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None) -> list[str]:
    """The command line run in a namespace and pinned to CPUs (the same
    rule on every host)."""
    return [*(["ip", "netns", "exec", netns] if netns else []),
            *(["taskset", "-c", cpus] if cpus else []), *cmd]


class Host(ABC):
    """One machine the bench drives. SUT adapters do their file, socket and
    /proc work through their testbed's host (``Testbed.host``), and start
    processes and run commands through the testbed (which knows the
    namespaces): so one adapter runs the same here and on a remote host."""

    #: the name the campaign gives it ("local" for this machine)
    name: str = "local"

    @property
    def is_local(self) -> bool:
        """This machine (its PIDs, files and /proc are this process's)."""
        return False

    @abstractmethod
    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True, env: dict[str, str] | None = None,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion; ``env``: variables set for it
        (on top of the host's environment); ``stdin``: its input."""

    @abstractmethod
    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              log: str | PurePath | None = None, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE, env: dict[str, str] | None = None,
              stdin: bool = False) -> HostProc:
        """Start a long-running process; ``log``: its stdout and stderr go
        to that file on the host; ``env``: variables set for it; ``stdin``:
        keep a pipe to its standard input (``proc.stdin``)."""

    @abstractmethod
    def write_text(self, path: str | Path, text: str) -> None: ...

    @abstractmethod
    def read_text(self, path: str | Path) -> str: ...

    @abstractmethod
    def exists(self, path: str | Path) -> bool: ...

    @abstractmethod
    def remove(self, path: str | Path) -> None:
        """Remove a file if it is there."""

    @abstractmethod
    def kill(self, pid: int, sig: int) -> None:
        """Signal a process this host runs for us, by its PID on that host."""

    @abstractmethod
    def unix_call(self, path: str, line: str, timeout_s: float = 5.0,
                  framing: str = "line") -> str:
        """One request to a Unix stream socket on the host and its answer:
        ``framing`` "line" (a line each way: turnoutd's JSON-RPC) or "json"
        (a JSON value each way, no newline: OVS's control socket)."""

    @abstractmethod
    def mkdirs(self, path: str | PurePath) -> None:
        """A directory and its parents."""

    @abstractmethod
    def listdir(self, path: str | PurePath) -> list[str]:
        """The names in a directory ([] when it is not there)."""

    @abstractmethod
    def symlink(self, target: str | PurePath, link: str | PurePath) -> None:
        """``link`` -> ``target`` (replacing what ``link`` was)."""

    @abstractmethod
    def rmtree(self, path: str | PurePath) -> None:
        """Remove a directory tree if it is there."""

    @abstractmethod
    def which(self, cmd: str) -> str | None:
        """The command's path on the host's PATH (or an absolute path that is
        there), None when it has none."""

    @abstractmethod
    def tail(self, path: str | PurePath, offset: int) -> tuple[str, int]:
        """A file's text from byte ``offset`` on, and its size (the next
        offset); ("", 0) when it is not there."""

    @abstractmethod
    def kernel_release(self) -> str:
        """``uname -r`` of the host."""

    @abstractmethod
    def procfs(self, fn: str, **kw: Any) -> Any:
        """One reader of hosts/procfs.py on the host's /proc and /sys
        (``fn(**kw)``): here a call, on a remote host its agent's answer."""

    def describe(self) -> str:
        return self.name


class LocalHost(Host):
    """This machine: subprocess, the local files, local PIDs (today's bench)."""

    name = "local"

    @property
    def is_local(self) -> bool:
        return True

    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True, env: dict[str, str] | None = None,
            stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
        full = wrap(cmd, netns=netns)
        res = subprocess.run(full, capture_output=True, text=stdin is None, timeout=timeout_s,
                             check=False, env={**os.environ, **env} if env else None,
                             input=stdin)
        if stdin is not None:  # bytes in, text out
            res = subprocess.CompletedProcess(res.args, res.returncode,
                                              res.stdout.decode(errors="replace"),
                                              res.stderr.decode(errors="replace"))
        if check and res.returncode != 0:
            raise HostError(f"{' '.join(full)} exited {res.returncode}: "
                            f"{res.stderr.strip()[-400:]}")
        return res

    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              log: str | PurePath | None = None, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE, env: dict[str, str] | None = None,
              stdin: bool = False) -> HostProc:
        logf: IO[bytes] | None = open(log, "wb") if log is not None else None  # noqa: SIM115
        try:
            return subprocess.Popen(wrap(cmd, netns=netns, cpus=cpus),
                                    stdout=logf or stdout, stderr=logf or stderr,
                                    stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                    env={**os.environ, **env} if env else None)
        finally:
            if logf is not None:
                logf.close()  # the child holds its own descriptor

    def write_text(self, path: str | Path, text: str) -> None:
        Path(path).write_text(text)

    def read_text(self, path: str | Path) -> str:
        return Path(path).read_text(errors="replace")

    def exists(self, path: str | Path) -> bool:
        return Path(path).exists()

    def remove(self, path: str | Path) -> None:
        Path(path).unlink(missing_ok=True)

    def kill(self, pid: int, sig: int) -> None:
        os.kill(pid, sig)

    def unix_call(self, path: str, line: str, timeout_s: float = 5.0,
                  framing: str = "line") -> str:
        return unix_request(path, line, timeout_s, framing)

    def mkdirs(self, path: str | PurePath) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def listdir(self, path: str | PurePath) -> list[str]:
        try:
            return sorted(os.listdir(path))
        except OSError:
            return []

    def symlink(self, target: str | PurePath, link: str | PurePath) -> None:
        Path(link).unlink(missing_ok=True)
        Path(link).symlink_to(target)

    def rmtree(self, path: str | PurePath) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def which(self, cmd: str) -> str | None:
        if cmd.startswith("/"):
            return cmd if Path(cmd).exists() else None
        return shutil.which(cmd)

    def tail(self, path: str | PurePath, offset: int) -> tuple[str, int]:
        return read_from(str(path), offset)

    def kernel_release(self) -> str:
        return platform.release()

    def procfs(self, fn: str, **kw: Any) -> Any:
        from . import procfs

        return procfs.PUBLIC[fn](**kw)


def read_from(path: str, offset: int, most: int = 1 << 20) -> tuple[str, int]:
    """A file's text from ``offset`` (at most ``most`` bytes) and the offset
    after it; from the start when the file is shorter (it was rewritten)."""
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


def unix_request(path: str, data: str, timeout_s: float, framing: str = "line") -> str:
    """One request to a Unix stream socket and its answer: a line each way
    (``framing`` "line"), or a JSON value each way without a newline
    ("json": the answer is complete when it decodes)."""
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


def json_line(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
