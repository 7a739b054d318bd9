"""Hosts for the remote campaign's system tests: each "host" is a network
namespace with a PID, a mount and a UTS namespace of its own (its own
/proc: its processes, its PIDs; its host name lab-NAME), running its own sshd (Debian's
openssh-server) with a config, host key and authorized key this lab makes
in a temporary directory, listening on a private address of a management
veth to a controller namespace. The data wires are veth pairs between the
hosts' namespaces, named as NICs would be (ens1f0, ...). The campaign runs
in the controller namespace (``ip netns exec CTL turnout bench run``), so
every packet stays inside namespaces this lab made.

Processes of a host are looked up through that host's sshd (its own /proc),
never in this machine's process table; each host has its own install
directory, so "the build is on the host" is a file in that host's
directory. Everything is removed at ``close`` (the sshds by their PID:
each is PID 1 of its PID namespace, so stopping it ends every process
left in that namespace too).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SSHD = "/usr/sbin/sshd"
CLONE_NEWNET = 0x40000000


@dataclass
class LabHost:
    name: str
    ns: str
    index: int
    dir: Path
    hide: list[str] = field(default_factory=list)
    proc: subprocess.Popen[bytes] | None = None

    @property
    def addr(self) -> str:
        return f"10.231.{self.index}.2"

    @property
    def install_dir(self) -> str:
        return str(self.dir / "install")


def _ip(*args: str, ns: str | None = None) -> None:
    cmd = [*(["ip", "netns", "exec", ns] if ns else []), "ip", *args]
    subprocess.run(cmd, check=True, capture_output=True, timeout=30)


@contextlib.contextmanager
def in_netns(ns: str) -> Iterator[None]:
    """Run the calling thread in network namespace ``ns`` (sockets it opens
    stay there); back to this process's namespace afterwards."""
    libc = ctypes.CDLL(None, use_errno=True)
    old = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    new = os.open(f"/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(new, CLONE_NEWNET) != 0:
            raise OSError(ctypes.get_errno(), f"setns {ns}")
        yield
    finally:
        libc.setns(old, CLONE_NEWNET)
        os.close(old)
        os.close(new)


class Lab:
    """``hosts``: name -> interfaces; ``wires``: (host, iface, host, iface);
    ``hide``: name -> files that host lacks (a bind mount of /dev/null over
    them in its mount namespace: not executable there)."""

    def __init__(self, hosts: dict[str, list[str]], wires: list[tuple[str, str, str, str]],
                 hide: dict[str, list[str]] | None = None) -> None:
        self.tag = f"trh{os.getpid() % 100000}{secrets.token_hex(2)}"
        # short: unix socket paths under it must stay under 108 bytes
        self.dir = Path(tempfile.mkdtemp(prefix="trh", dir="/tmp"))
        self.ctl = f"{self.tag}-ctl"
        self.hosts = {n: LabHost(n, f"{self.tag}-{n}", i + 1, self.dir / n,
                                 (hide or {}).get(n, []))
                      for i, n in enumerate(hosts)}
        self._ifaces = hosts
        self._wires = wires
        self.key = self.dir / "id_ed25519"
        self.wrong_key = self.dir / "wrong_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self._made_run_sshd = False
        self._namespaces: list[str] = []

    # ----------------------------------------------------------------- up
    def __enter__(self) -> Lab:
        try:
            self._up()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _keygen(self, path: Path) -> str:
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", self.tag, "-f",
                        str(path)], check=True, capture_output=True, timeout=30)
        return path.with_suffix(".pub").read_text().strip() if path.suffix else \
            Path(f"{path}.pub").read_text().strip()

    def _up(self) -> None:
        pub = self._keygen(self.key)
        self._keygen(self.wrong_key)
        if not Path("/run/sshd").exists():  # sshd's privilege separation directory
            Path("/run/sshd").mkdir(mode=0o755)
            self._made_run_sshd = True
        self._netns(self.ctl)
        known = []
        for h in self.hosts.values():
            h.dir.mkdir(parents=True)
            self._netns(h.ns)
            a, b = f"{self.tag}m{h.index}", f"{self.tag}n{h.index}"
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            _ip("link", "set", a, "netns", self.ctl)
            _ip("link", "set", b, "netns", h.ns)
            _ip("link", "set", b, "name", "mgmt0", ns=h.ns)
            _ip("addr", "add", f"10.231.{h.index}.1/24", "dev", a, ns=self.ctl)
            _ip("addr", "add", f"{h.addr}/24", "dev", "mgmt0", ns=h.ns)
            _ip("link", "set", a, "up", ns=self.ctl)
            _ip("link", "set", "mgmt0", "up", ns=h.ns)
            hostkey = h.dir / "ssh_host_ed25519_key"
            hpub = self._keygen(hostkey)
            known.append(f"{h.addr} {' '.join(hpub.split()[:2])}")
            (h.dir / "authorized_keys").write_text(pub + "\n")
            (h.dir / "sshd_config").write_text("\n".join([
                "Port 22", f"ListenAddress {h.addr}", f"HostKey {hostkey}",
                f"PidFile {h.dir / 'sshd.pid'}", f"AuthorizedKeysFile {h.dir / 'authorized_keys'}",
                "PermitRootLogin prohibit-password", "PasswordAuthentication no",
                "KbdInteractiveAuthentication no", "UsePAM no", "StrictModes no",
                "PubkeyAuthentication yes", "Subsystem sftp internal-sftp", "MaxSessions 30",
                "MaxStartups 30", "LogLevel INFO", ""]))
        self.known_hosts.write_text("\n".join(known) + "\n")
        for i, (ha, ia, hb, ib) in enumerate(self._wires):
            a, b = f"{self.tag}w{i}a", f"{self.tag}w{i}b"
            _ip("link", "add", a, "type", "veth", "peer", "name", b)
            for tmp, host, name in ((a, ha, ia), (b, hb, ib)):
                ns = self.hosts[host].ns
                _ip("link", "set", tmp, "netns", ns)
                _ip("link", "set", tmp, "name", name, ns=ns)
                _ip("link", "set", name, "mtu", "3000", ns=ns)
                _ip("link", "set", name, "up", ns=ns)
        for h in self.hosts.values():
            self.start(h)

    def _netns(self, name: str) -> None:
        self._namespaces.append(name)
        _ip("netns", "add", name)
        _ip("link", "set", "lo", "up", ns=name)

    def start(self, h: LabHost) -> None:
        """Start the host's sshd as PID 1 of a new PID and mount namespace."""
        log = h.dir / "sshd.log"
        inner = f"hostname lab-{h.name} && " + "".join(
            f"mount --bind /dev/null {f} && " for f in h.hide)
        cmd = ["ip", "netns", "exec", h.ns, "unshare", "--pid", "--fork", "--mount-proc",
               "--uts", "--kill-child", "sh", "-c",
               f"{inner}exec {SSHD} -D -e -f {h.dir / 'sshd_config'}"]
        with open(log, "wb") as f:
            h.proc = subprocess.Popen(cmd, stdout=f, stderr=f, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 30
        while "Server listening" not in log.read_text(errors="replace"):
            if h.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"sshd of {h.name} did not start: {log.read_text()[-600:]}")
            time.sleep(0.05)

    def stop(self, h: LabHost) -> None:
        if h.proc is not None and h.proc.poll() is None:
            # SIGKILL: unshare --fork ignores SIGTERM while it waits for its
            # child (each host cost 10 s of waiting); --kill-child then kills
            # the namespace's init (sshd), which ends every process in it
            h.proc.kill()
            h.proc.wait(timeout=10)
        h.proc = None

    def link(self, host: str, up: bool) -> None:
        """Take every link of a host down (it drops off the network) or up."""
        h = self.hosts[host]
        names = ["mgmt0", *self._ifaces[host]]
        for n in names:
            _ip("link", "set", n, "up" if up else "down", ns=h.ns)
        if up:
            self.wait_reachable(host)

    def wait_reachable(self, host: str, deadline_s: float = 30.0) -> None:
        """Waits until the host's sshd takes a TCP connection from the
        controller: after its links came back up, the links' carrier and
        the controller's neighbour entry (failed while the host was off)
        take a moment, seconds on a busy machine, and a connection tried
        before gets "no route to host"."""
        import socket

        h = self.hosts[host]
        end = time.monotonic() + deadline_s
        while True:
            try:
                with in_netns(self.ctl):
                    s = socket.create_connection((h.addr, 22), timeout=2)
                s.close()
                return
            except OSError as e:
                if time.monotonic() > end:
                    raise AssertionError(
                        f"host {host} ({h.addr}:22) not reachable {deadline_s:.0f} s after "
                        f"its links came up: {e}") from e
                time.sleep(0.2)

    # ------------------------------------------------------------- checks
    def ssh(self, host: str, cmd: str, timeout_s: float = 20) -> str:
        """Run a shell command on a host through its sshd (paramiko, from
        the controller namespace); its stdout."""
        import paramiko

        h = self.hosts[host]
        c = paramiko.SSHClient()
        c.load_host_keys(str(self.known_hosts))
        c.set_missing_host_key_policy(paramiko.RejectPolicy())
        with in_netns(self.ctl):
            c.connect(h.addr, username="root", key_filename=str(self.key), timeout=timeout_s,
                      look_for_keys=False, allow_agent=False)
        try:
            _, out, _ = c.exec_command(cmd, timeout=timeout_s)
            return str(out.read().decode(errors="replace"))
        finally:
            c.close()

    def run_procs(self, host: str) -> list[str]:
        """Processes on the host that a bench run started (the run token in
        their environment) or that run a build from any lab host's install
        directory, or the bench's agent: "pid cmdline" lines, from the
        host's own /proc through its sshd."""
        script = (
            "for p in /proc/[0-9]*; do "
            "[ \"${p#/proc/}\" = \"$$\" ] && continue; "
            "c=$(tr '\\0' ' ' < $p/cmdline 2>/dev/null); "
            "e=$(readlink $p/exe 2>/dev/null); "
            "if tr '\\0' '\\n' < $p/environ 2>/dev/null | grep -q '^TURNOUT_RUN=' "
            f"|| case \"$e\" in {self.dir}/*) true;; *) false;; esac "
            "|| case \"$c\" in *agent.py\\ serve*) true;; *) false;; esac; "
            "then echo \"${p#/proc/} $c\"; fi; done")
        return [ln for ln in self.ssh(host, script).splitlines() if ln.strip()]

    def pid1_children(self, host: str) -> list[str]:
        """Every process of the host but its sshd (ps through its sshd)."""
        return self.ssh(host, "ps -e -o pid=,args=").splitlines()

    def exists(self, host: str, path: str) -> bool:
        return self.ssh(host, f"test -e {path} && echo yes").strip() == "yes"

    # -------------------------------------------------------------- down
    def close(self) -> None:
        for h in self.hosts.values():
            with contextlib.suppress(Exception):
                self.stop(h)
        for ns in reversed(self._namespaces):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, timeout=30)
        self._namespaces.clear()
        if self._made_run_sshd:
            with contextlib.suppress(OSError):
                Path("/run/sshd").rmdir()
        shutil.rmtree(self.dir, ignore_errors=True)

    # ------------------------------------------------------------ campaign
    def campaign(self, name: str, body: str, hosts: dict[str, dict[str, object]],
                 wires: list[tuple[str, str]]) -> Path:
        """A remote campaign file: ``body`` ([campaign] keys after name and
        location, then [matrix], [sut.*]), the hosts' tables (defaults: this
        lab's address, key, known_hosts and install dir) and the wires."""
        lines = ["[campaign]", f'name = "{name}"', 'location = "remote"',
                 "wires = [" + ", ".join(f'["{a}", "{b}"]' for a, b in wires) + "]"]
        head, _, rest = body.partition("[matrix]")
        lines += [head.strip(), "", "[matrix]" + rest if rest else ""]
        for n, t in hosts.items():
            h = self.hosts[n]
            d: dict[str, object] = {"ssh": f"root@{h.addr}", "key_file": str(self.key),
                                    "known_hosts": str(self.known_hosts),
                                    "install_dir": h.install_dir, **t}
            lines.append(f"\n[hosts.{n}]")
            for k, v in d.items():
                if isinstance(v, bool):
                    lines.append(f"{k} = {'true' if v else 'false'}")
                elif isinstance(v, int | float):
                    lines.append(f"{k} = {v}")
                elif isinstance(v, list):
                    lines.append(f"{k} = [" + ", ".join(f'"{x}"' for x in v) + "]")
                else:
                    lines.append(f'{k} = "{v}"')
        p = self.dir / f"{name}.toml"
        p.write_text("\n".join(lines) + "\n")
        return p
