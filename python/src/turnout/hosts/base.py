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
import socket
import subprocess
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import IO, Any, Protocol

__all__ = ["Host", "HostError", "HostLost", "HostProc", "LocalHost", "wrap"]


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


def wrap(cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None) -> list[str]:
    """The command line run in a namespace and pinned to CPUs (the same
    rule on every host)."""
    return [*(["ip", "netns", "exec", netns] if netns else []),
            *(["taskset", "-c", cpus] if cpus else []), *cmd]


class Host(ABC):
    """One machine the bench drives."""

    #: the name the campaign gives it ("local" for this machine)
    name: str = "local"

    @abstractmethod
    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run a short command to completion."""

    @abstractmethod
    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              log: str | PurePath | None = None, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE) -> HostProc:
        """Start a long-running process; ``log``: its stdout and stderr go
        to that file on the host."""

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
    def unix_call(self, path: str, line: str, timeout_s: float = 5.0) -> str:
        """One request line to a Unix stream socket on the host, the answer line back."""

    def describe(self) -> str:
        return self.name


class LocalHost(Host):
    """This machine: subprocess, the local files, local PIDs (today's bench)."""

    name = "local"

    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True) -> subprocess.CompletedProcess[str]:
        full = wrap(cmd, netns=netns)
        res = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s,
                             check=False)
        if check and res.returncode != 0:
            raise HostError(f"{' '.join(full)} exited {res.returncode}: "
                            f"{res.stderr.strip()[-400:]}")
        return res

    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              log: str | PurePath | None = None, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE) -> HostProc:
        logf: IO[bytes] | None = open(log, "wb") if log is not None else None  # noqa: SIM115
        try:
            return subprocess.Popen(wrap(cmd, netns=netns, cpus=cpus),
                                    stdout=logf or stdout, stderr=logf or stderr,
                                    stdin=subprocess.DEVNULL)
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

    def unix_call(self, path: str, line: str, timeout_s: float = 5.0) -> str:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(path)
            s.sendall(line.encode() + b"\n")
            buf = b""
            while not buf.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
        return buf.decode(errors="replace")


def json_line(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"))
