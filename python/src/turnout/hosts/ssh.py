"""A host reached over SSH (paramiko): commands, processes, files and the
resident agent (hosts/agent.py) that answers Unix-socket calls, samples
/proc and stops every process of the run when the controller goes away.

Each process is started on its own SSH session channel as ``sh -c 'echo
$$; exec env TURNOUT_RUN=TOKEN "$@"'``: the first line of its stdout is its
PID on that host, and the token in its environment lets the agent find
every process of the run whatever happened to the channel (a host that
dropped off, a controller killed with SIGKILL). Signals go through the
agent, by PID on that host, and only to processes that carry the token.
"""

from __future__ import annotations

import contextlib
import json
import posixpath
import shlex
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path, PurePath
from typing import Any

from .base import Host, HostError, HostLost, HostProc, json_line, wrap
from .config import HostSpec

__all__ = ["SshHost", "SshProc", "agent_source"]

AGENT = Path(__file__).with_name("agent.py")
#: the standard-library modules the resident agent imports, shipped next to
#: it (name on the host -> this checkout's file)
AGENT_MODULES = {"procfs.py": Path(__file__).with_name("procfs.py"),
                 "isolate.py": Path(__file__).parents[1] / "system" / "isolate.py"}


def agent_source() -> bytes:
    return AGENT.read_bytes()


def _join(cmd: Sequence[str]) -> str:
    return " ".join(shlex.quote(str(c)) for c in cmd)


def _env(env: dict[str, str] | None) -> list[str]:
    """``env K=V ...`` before a command that sets variables (none: nothing)."""
    return ["env", *(f"{k}={v}" for k, v in env.items())] if env else []


class SshProc:
    """A process on a remote host, Popen-like (what GenMeasurer, VnfHandle
    and the SUT adapters use): ``pid`` is its PID on that host."""

    def __init__(self, host: SshHost, chan: Any, args: list[str], start_timeout_s: float,
                 stdin: bool = False) -> None:
        self.host = host
        self.chan = chan
        self.args = args
        self.returncode: int | None = None
        #: its standard input (spawned with stdin=True): the channel's write side
        self.stdin: Any = chan.makefile("wb") if stdin else None
        self.stdout = chan.makefile("rb")
        self.stderr = chan.makefile_stderr("rb")
        chan.settimeout(start_timeout_s)
        try:
            first = self.stdout.readline()
        except (OSError, EOFError) as e:
            chan.close()
            raise host.lose(f"starting {args[0]}: {e}") from e
        chan.settimeout(None)
        try:
            self.pid = int(first)
        except ValueError:
            err = self.stderr.read().decode(errors="replace").strip()[-400:]
            chan.close()
            raise HostError(f"host {host.name}: could not start {_join(args)}: {err}") from None
        self._out = b""
        self._err = b""
        self._readers: list[threading.Thread] | None = None

    def _status(self) -> int:
        rc = int(self.chan.recv_exit_status())
        self.chan.close()
        return rc

    def poll(self) -> int | None:
        if self.returncode is None and self.chan.exit_status_ready():
            self.returncode = self._status()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
            if self.host.lost:
                raise HostLost(self.host.lost)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, input: bytes | None = None,
                    timeout: float | None = None) -> tuple[bytes, bytes]:
        if self._readers is None:
            def out() -> None:
                with contextlib.suppress(OSError, EOFError):
                    self._out = self.stdout.read()

            def err() -> None:
                with contextlib.suppress(OSError, EOFError):
                    self._err = self.stderr.read()

            self._readers = [threading.Thread(target=f, daemon=True) for f in (out, err)]
            for t in self._readers:
                t.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._readers:
            while t.is_alive():
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
                t.join(0.1 if left is None else min(0.1, left))
                if self.host.lost and t.is_alive():
                    raise HostLost(self.host.lost)
        if self.returncode is None:
            self.returncode = self._status()
        return self._out, self._err

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            self.host.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(15)

    def kill(self) -> None:
        self.send_signal(9)


class SshHost(Host):
    """One remote host of a campaign (``[hosts.NAME]``), over paramiko."""

    def __init__(self, spec: HostSpec, token: str) -> None:
        self.spec = spec
        self.name = spec.name
        self.token = token
        self.client: Any = None
        self.lost = ""
        self._lock = threading.Lock()
        self._agent: Any = None
        self._ain: Any = None
        self._aout: Any = None
        self._beat: threading.Thread | None = None
        self._stop = threading.Event()
        self.agent_path = posixpath.join(spec.install_dir, "agent.py")
        self._which: dict[str, str | None] = {}
        self.recovered: list[str] = []
        #: the agent's last answer: (its request, when) — said when it stops answering
        self._answered: tuple[str, float] = ("", 0.0)
        self._release = ""

    def describe(self) -> str:
        return f"host {self.name} ({self.spec.target()})"

    def lose(self, why: str) -> HostLost:
        """Mark the host lost (every later call fails with this) and return the error."""
        if not self.lost:
            self.lost = f"{self.describe()} dropped off at {time.strftime('%H:%M:%S')}: {why}"
        return HostLost(self.lost)

    # ------------------------------------------------------------ connection
    def connect(self) -> None:
        """Open the SSH connection; HostError says what failed (unreachable,
        the key refused, the host key unknown)."""
        import paramiko

        s = self.spec
        c = paramiko.SSHClient()
        c.load_system_host_keys()
        if s.known_hosts:
            try:
                c.load_host_keys(s.known_hosts)
            except OSError as e:
                raise HostError(f"{self.describe()}: known_hosts {s.known_hosts}: {e}") from e
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        try:
            c.connect(s.addr, port=s.port, username=s.user, key_filename=s.key_file,
                      timeout=s.connect_timeout_s, banner_timeout=s.connect_timeout_s,
                      auth_timeout=s.connect_timeout_s, look_for_keys=s.key_file is None,
                      allow_agent=s.key_file is None)
        except paramiko.BadHostKeyException as e:
            raise HostError(f"{self.describe()}: its host key does not match known_hosts "
                            f"({e})") from e
        except paramiko.AuthenticationException as e:
            key = f"key {s.key_file}" if s.key_file else "the default keys and agent"
            raise HostError(f"{self.describe()}: authentication failed with {key} "
                            f"({e})") from e
        except paramiko.SSHException as e:
            raise HostError(f"{self.describe()}: SSH: {e}") from e
        except (OSError, TimeoutError) as e:
            raise HostError(f"{self.describe()}: unreachable: {str(e) or type(e).__name__}") from e
        t = c.get_transport()
        if t is not None:
            t.set_keepalive(2)
        self.client = c

    def _session(self, timeout_s: float = 15.0) -> Any:
        if self.lost:
            raise HostLost(self.lost)
        t = self.client.get_transport() if self.client is not None else None
        if t is None or not t.is_active():
            raise self.lose("the SSH connection is closed")
        try:
            return t.open_session(timeout=timeout_s)
        except Exception as e:
            raise self.lose(f"cannot open an SSH session: {e}") from e

    def _sudo(self) -> list[str]:
        return ["sudo", "-n"] if self.spec.sudo else []

    def close(self) -> None:
        """Say bye to the agent (it stops whatever of the run is left) and disconnect."""
        self._stop.set()
        if self._agent is not None and not self.lost:
            with contextlib.suppress(Exception), self._lock:
                self._agent.settimeout(10)
                self._ain.write(json_line({"op": "bye"}) + "\n")
                self._ain.flush()
                self._aout.readline()  # its last word: what it stopped
        if self._beat is not None:
            self._beat.join(timeout=5)
        if self.client is not None:
            with contextlib.suppress(Exception):
                self.client.close()
        self.client = None
        self._agent = None

    # ------------------------------------------------------------- commands
    def run(self, cmd: Sequence[str], *, netns: str | None = None, timeout_s: float = 30,
            check: bool = True, env: dict[str, str] | None = None, stdin: bytes | None = None,
            sudo: bool = True) -> subprocess.CompletedProcess[str]:
        """A short command: through the resident agent when it runs (as root:
        a process of its own, no SSH session to open: an SSH exec costs
        0.1-0.5 s on a loaded host), else on an SSH session of its own."""
        if self._agent is not None and sudo and stdin is None:
            full = [*_env(env), *wrap(cmd, netns=netns)]
            r = self.call("run", timeout_s=timeout_s + self.spec.grace_s, cmd=full,
                          inner_timeout_s=timeout_s)
            if r.get("timeout"):
                raise HostError(f"{self.describe()}: {_join(full)}: no answer in "
                                f"{timeout_s:g} s")
            res = subprocess.CompletedProcess(full, int(r["rc"]), str(r["stdout"]),
                                              str(r["stderr"]))
            if check and res.returncode != 0:
                raise HostError(f"{self.describe()}: {_join(full)} exited {res.returncode}: "
                                f"{res.stderr.strip()[-400:]}")
            return res
        full = [*(self._sudo() if sudo else []), *_env(env), *wrap(cmd, netns=netns)]
        chan = self._session()
        try:
            chan.settimeout(timeout_s)
            chan.exec_command(_join(full))
            if stdin is not None:
                chan.sendall(stdin)
            chan.shutdown_write()
            out = chan.makefile("rb")
            err = chan.makefile_stderr("rb")
            errs: list[bytes] = []
            reader = threading.Thread(target=lambda: errs.append(err.read()), daemon=True)
            reader.start()
            data = out.read()
            reader.join(timeout_s)
            rc = int(chan.recv_exit_status())
        except (TimeoutError, OSError, EOFError) as e:
            raise HostError(f"{self.describe()}: {_join(full)}: no answer in "
                            f"{timeout_s:g} s ({str(e) or type(e).__name__})") from e
        finally:
            chan.close()
        res = subprocess.CompletedProcess(full, rc, data.decode(errors="replace"),
                                          b"".join(errs).decode(errors="replace"))
        if check and rc != 0:
            raise HostError(f"{self.describe()}: {_join(full)} exited {rc}: "
                            f"{res.stderr.strip()[-400:]}")
        return res

    def once(self, req: dict[str, Any], timeout_s: float = 30) -> dict[str, Any]:
        """One agent request without leaving anything behind: the agent's
        program goes on stdin (``python3 - once REQUEST``)."""
        r = self.run(["python3", "-", "once", json.dumps(req)], timeout_s=timeout_s,
                     check=False, stdin=agent_source())
        if r.returncode == 127 or ("not found" in r.stderr and not r.stdout):
            raise HostError(f"{self.describe()}: python3 not found (package python3): the "
                            "bench's agent needs it")
        try:
            ans = json.loads(r.stdout.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise HostError(f"{self.describe()}: the agent failed (exit {r.returncode}): "
                            f"{r.stderr.strip()[-400:]}") from None
        if not ans.get("ok"):
            raise HostError(f"{self.describe()}: agent: {ans.get('error')}")
        return dict(ans)

    def spawn(self, cmd: Sequence[str], *, netns: str | None = None, cpus: str | None = None,
              log: str | PurePath | None = None, stdout: Any = subprocess.PIPE,
              stderr: Any = subprocess.PIPE, env: dict[str, str] | None = None,
              stdin: bool = False) -> HostProc:
        script = (f'echo $$; exec env TURNOUT_RUN={self.token} '
                  + "".join(f"{shlex.quote(f'{k}={v}')} " for k, v in (env or {}).items())
                  + '"$@"')
        if log is not None:
            script += f" >{shlex.quote(str(log))} 2>&1"
        args = [str(c) for c in wrap(cmd, netns=netns, cpus=cpus)]
        chan = self._session()
        chan.exec_command(_join([*self._sudo(), "sh", "-c", script, "sh", *args]))
        if not stdin:
            chan.shutdown_write()
        return SshProc(self, chan, args, self.spec.connect_timeout_s, stdin=stdin)

    # ---------------------------------------------------------------- files
    def _sftp(self) -> Any:
        if self.lost:
            raise HostLost(self.lost)
        try:
            return self.client.open_sftp()
        except Exception as e:
            raise HostError(f"{self.describe()}: SFTP: {e}") from e

    def mkdirs(self, path: str | PurePath) -> None:
        """A directory and its parents, the SSH user's (the agent makes them
        and gives them the owner of its install directory)."""
        if self._agent is not None:
            self.call("mkdirs", path=str(path))
            return
        self.run(["mkdir", "-p", str(path)], sudo=False)

    def listdir(self, path: str | PurePath) -> list[str]:
        return [str(x) for x in self.call("listdir", path=str(path))["names"]]

    def symlink(self, target: str | PurePath, link: str | PurePath) -> None:
        self.run(["ln", "-sfn", str(target), str(link)])

    def rmtree(self, path: str | PurePath) -> None:
        self.run(["rm", "-rf", "--", str(path)])

    def which(self, cmd: str) -> str | None:
        if cmd not in self._which:
            found = self.call("which", cmd=cmd)["path"]
            self._which[cmd] = str(found) if found else None
        return self._which[cmd]

    def tail(self, path: str | PurePath, offset: int) -> tuple[str, int]:
        r = self.call("tail", path=str(path), offset=int(offset))
        return str(r["text"]), int(r["size"])

    def kernel_release(self) -> str:
        if not self._release:
            self._release = self.run(["uname", "-r"], sudo=False).stdout.strip()
        return self._release

    def procfs(self, fn: str, **kw: Any) -> Any:
        return self.call("procfs", fn=fn, kw=kw)["result"]

    def undo_later(self, scope: str, action: dict[str, Any]) -> None:
        """Tell the agent how to undo a change to the host before making it
        (a ``write`` of a file's old value, a ``run`` of a command, an
        ``rmtree``): it undoes the scope's changes when asked (``undo``) and
        every change left when the controller goes away (hosts/agent.py)."""
        self.call("undo_push", scope=scope, action=action)

    def undo(self, scope: str) -> list[str]:
        """Undo a scope's changes (latest first); the problems."""
        return [str(p) for p in self.call("undo", scope=scope, timeout_s=120)["problems"]]

    def put(self, local: str | Path, remote: str, mode: int = 0o644) -> None:
        """Copy a local file to the host (atomically: a temporary name, then renamed)."""
        sftp = self._sftp()
        try:
            tmp = f"{remote}.part"
            sftp.put(str(local), tmp)
            sftp.chmod(tmp, mode)
            sftp.posix_rename(tmp, remote)
        except OSError as e:
            raise HostError(f"{self.describe()}: copying {local} to {remote}: {e}") from e
        finally:
            sftp.close()

    def files(self, top: str, suffix: str = "") -> list[str]:
        """Every file under ``top`` whose name ends with ``suffix`` (SFTP walk)."""
        import stat as st

        sftp = self._sftp()
        out: list[str] = []
        try:
            todo = [top]
            while todo:
                d = todo.pop()
                for a in sftp.listdir_attr(d):
                    p = posixpath.join(d, a.filename)
                    if st.S_ISDIR(a.st_mode or 0):
                        todo.append(p)
                    elif a.filename.endswith(suffix):
                        out.append(p)
        except OSError as e:
            raise HostError(f"{self.describe()}: listing {top}: {e}") from e
        finally:
            sftp.close()
        return sorted(out)

    def write_text(self, path: str | Path, text: str) -> None:
        if self._agent is not None:  # the install directory's owner's, as over SFTP
            self.call("write", path=str(path), text=text)
            return
        sftp = self._sftp()
        try:
            with sftp.open(str(path), "w") as f:
                f.write(text.encode())
        except OSError as e:
            raise HostError(f"{self.describe()}: writing {path}: {e}") from e
        finally:
            sftp.close()

    def read_text(self, path: str | Path) -> str:
        if self._agent is not None:
            r = self.call("read", path=str(path))
            if r.get("error"):
                raise HostError(f"{self.describe()}: reading {path}: {r['error']}")
            return str(r["text"])
        sftp = self._sftp()
        try:
            with sftp.open(str(path), "r") as f:
                return bytes(f.read()).decode(errors="replace")
        except OSError as e:
            raise HostError(f"{self.describe()}: reading {path}: {e}") from e
        finally:
            sftp.close()

    def exists(self, path: str | Path) -> bool:
        return bool(self.call("exists", path=str(path))["exists"])

    def remove(self, path: str | Path) -> None:
        self.run(["rm", "-f", str(path)])

    # ---------------------------------------------------------------- agent
    def start_agent(self, cpus: str | None = None) -> None:
        """Put the agent in the install directory and start it resident
        (module doc), on ``cpus`` when given (off the SUT's: its /proc
        reads and socket calls must not preempt a busy-polling switch); a
        heartbeat thread keeps it from timing out."""
        self.mkdirs(self.spec.install_dir)
        sftp = self._sftp()
        try:
            with sftp.open(self.agent_path, "w") as f:
                f.write(agent_source())
            for name, src in AGENT_MODULES.items():
                with sftp.open(posixpath.join(self.spec.install_dir, name), "w") as f:
                    f.write(src.read_bytes())
        finally:
            sftp.close()
        chan = self._session()
        chan.exec_command(_join([*self._sudo(), *wrap(
            ["python3", "-u", self.agent_path, "serve", self.token, f"{self.spec.grace_s:g}"],
            cpus=cpus)]))
        self._agent = chan
        self._ain = chan.makefile("wb")
        self._aout = chan.makefile("rb")
        chan.settimeout(self.spec.connect_timeout_s)
        try:
            first = json.loads(self._aout.readline() or b"{}")
        except (OSError, ValueError) as e:
            raise HostError(f"{self.describe()}: the agent did not start: {e}") from e
        if not first.get("ready"):
            err = chan.makefile_stderr("rb").read().decode(errors="replace")[-400:]
            raise HostError(f"{self.describe()}: the agent did not start: {err}")
        #: what the agent put back at its start that a dead run had left
        #: changed (its undo journal, an isolation's restore file)
        self.recovered = [str(x) for x in first.get("recovered", [])]
        self._stop = threading.Event()  # a new one: close() set the last
        self._beat = threading.Thread(target=self._heartbeat, name=f"beat-{self.name}",
                                      daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        every = max(0.2, self.spec.grace_s / 4)
        while not self._stop.wait(every):
            if self.lost:
                return
            with contextlib.suppress(HostError):
                self.call("ping")

    def call(self, op: str, timeout_s: float | None = None, **kw: Any) -> dict[str, Any]:
        """One request to the resident agent; HostLost when it does not answer."""
        if self.lost:
            raise HostLost(self.lost)
        if self._agent is None:
            raise HostError(f"{self.describe()}: the agent is not running")
        wait = timeout_s if timeout_s is not None else self.spec.grace_s
        with self._lock:
            t0 = time.monotonic()
            try:
                self._agent.settimeout(wait)
                self._ain.write(json_line({"op": op, **kw}) + "\n")
                self._ain.flush()
                line = self._aout.readline()
            except (TimeoutError, OSError, EOFError) as e:
                op0, t = self._answered
                last = f"; its last answer: {op0}, {t0 - t:.1f} s before" if op0 else ""
                raise self.lose(f"its agent did not answer {op} in {wait:g} s "
                                f"({str(e) or type(e).__name__}{last})") from e
            except Exception as e:  # paramiko.SSHException and kin
                raise self.lose(f"{op}: {type(e).__name__}: {e}") from e
            self._answered = (op, time.monotonic())
        if not line:
            raise self.lose("its agent's connection closed")
        ans = json.loads(line)
        if not ans.get("ok"):
            raise HostError(f"{self.describe()}: {op}: {ans.get('error')}")
        return dict(ans)

    def kill(self, pid: int, sig: int) -> None:
        self.call("kill", pid=pid, sig=int(sig))

    def unix_call(self, path: str, line: str, timeout_s: float = 5.0,
                  framing: str = "line") -> str:
        return str(self.call("unix", timeout_s=timeout_s + self.spec.grace_s, path=path,
                             data=line, inner_timeout_s=timeout_s, framing=framing)["reply"])

    def clock(self, samples: int = 5) -> tuple[int, int]:
        """(this host's CLOCK_MONOTONIC − the controller's, ± half the best
        round trip), in ns, by Cristian's method over ``samples`` requests."""
        best: tuple[int, int] | None = None
        for _ in range(samples):
            t0 = time.monotonic_ns()
            r = self.call("time")
            t1 = time.monotonic_ns()
            off, err = int(r["mono_ns"]) - (t0 + t1) // 2, (t1 - t0) // 2
            if best is None or err < best[1]:
                best = (off, err)
        assert best is not None
        return best
