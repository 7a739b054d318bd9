"""Campaign keys of a remote campaign (``location = "remote"``): the hosts
(``[hosts.NAME]``), the role each plays and the wires between them
(docs/bench.md, "Across hosts"). Parsing only: nothing here connects."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ROLES", "HostSpec", "RemoteSpec", "Wire", "parse_remote"]

ROLES = ("tester", "sut", "vnf")
#: where each host keeps the builds it runs (one directory per build hash)
#: and the runs' files, unless ``install_dir`` says otherwise
DEFAULT_INSTALL_DIR = "/var/tmp/turnout-bench"
HOST_KEYS = {"ssh", "port", "key_file", "known_hosts", "sudo", "roles", "install_dir",
             "turnoutd", "turnout_gen", "grace_s", "connect_timeout_s"}


class RemoteSpecError(ValueError):
    """A remote campaign key is wrong (the message names it)."""


@dataclass(frozen=True)
class HostSpec:
    """One ``[hosts.NAME]`` table."""

    name: str
    user: str
    addr: str
    port: int = 22
    key_file: str | None = None
    known_hosts: str | None = None
    sudo: bool = False
    roles: tuple[str, ...] = ()
    install_dir: str = DEFAULT_INSTALL_DIR
    #: a build already on the host to use instead of copying this checkout's
    #: (it must be the same build: same SHA-256)
    turnoutd: str | None = None
    turnout_gen: str | None = None
    #: the agent stops the run's processes after this long without a word
    #: from the controller
    grace_s: float = 10.0
    connect_timeout_s: float = 10.0

    def target(self) -> str:
        return f"{self.user}@{self.addr}:{self.port}"


@dataclass(frozen=True)
class Wire:
    """A cable: the tester host's interface and the SUT host's interface."""

    tester_host: str
    tester_iface: str
    sut_host: str
    sut_iface: str

    def __str__(self) -> str:
        return f"{self.tester_host}:{self.tester_iface} - {self.sut_host}:{self.sut_iface}"


@dataclass(frozen=True)
class RemoteSpec:
    """The hosts and wires of a remote campaign."""

    hosts: dict[str, HostSpec]
    wires: tuple[Wire, ...]
    sut_host: str
    tester_hosts: tuple[str, ...] = field(default_factory=tuple)

    def vnf_host(self) -> str:
        """Where VNFs run: they attach to the switch through shared memory
        (memif, vhost-user), so on the SUT's host."""
        return self.sut_host


_SSH = re.compile(r"^(?P<user>[^@\s]+)@(?P<addr>\[[0-9A-Fa-f:.]+\]|[^@\s:\[\]]+)$")
_IFACE = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}$")


def _host(name: str, t: Any) -> HostSpec:
    where = f"hosts.{name}"
    if not isinstance(t, dict):
        raise RemoteSpecError(f"[{where}]: a table (ssh = \"user@addr\", roles = [...])")
    bad = sorted(set(t) - HOST_KEYS)
    if bad:
        raise RemoteSpecError(f"{where}.{bad[0]}: unknown key ({', '.join(sorted(HOST_KEYS))})")
    ssh = t.get("ssh")
    m = _SSH.match(ssh) if isinstance(ssh, str) else None
    if m is None:
        raise RemoteSpecError(f"{where}.ssh: {ssh!r} is not \"user@addr\"")
    port = t.get("port", 22)
    if not isinstance(port, int) or isinstance(port, bool) or not 1 <= port <= 65535:
        raise RemoteSpecError(f"{where}.port: {port!r} is not a TCP port")
    roles = t.get("roles")
    if not isinstance(roles, list) or not roles or not all(r in ROLES for r in roles) \
            or len(set(roles)) != len(roles):
        raise RemoteSpecError(f"{where}.roles: {roles!r}: a list of {', '.join(ROLES)}")
    for k in ("key_file", "known_hosts", "turnoutd", "turnout_gen"):
        if k in t and (not isinstance(t[k], str) or not t[k].startswith("/")):
            raise RemoteSpecError(f"{where}.{k}: {t[k]!r} is not an absolute path")
    install = t.get("install_dir", DEFAULT_INSTALL_DIR)
    if not isinstance(install, str) or not install.startswith("/") or install.rstrip("/") == "":
        raise RemoteSpecError(f"{where}.install_dir: {install!r} is not an absolute path "
                              "(other than /)")
    sudo = t.get("sudo", False)
    if not isinstance(sudo, bool):
        raise RemoteSpecError(f"{where}.sudo: true or false")
    nums: dict[str, float] = {}
    for k, lo, hi in (("grace_s", 1.0, 600.0), ("connect_timeout_s", 1.0, 120.0)):
        v = t.get(k, HostSpec.__dataclass_fields__[k].default)
        if not isinstance(v, int | float) or isinstance(v, bool) or not lo <= v <= hi:
            raise RemoteSpecError(f"{where}.{k}: {v!r} outside {lo:g}..{hi:g} s")
        nums[k] = float(v)
    addr = m.group("addr").strip("[]")
    return HostSpec(name=name, user=m.group("user"), addr=addr, port=port,
                    key_file=t.get("key_file"), known_hosts=t.get("known_hosts"), sudo=sudo,
                    roles=tuple(roles), install_dir=install.rstrip("/"),
                    turnoutd=t.get("turnoutd"), turnout_gen=t.get("turnout_gen"),
                    grace_s=nums["grace_s"], connect_timeout_s=nums["connect_timeout_s"])


def _end(x: Any, i: int, hosts: dict[str, HostSpec]) -> tuple[str, str]:
    if not isinstance(x, str) or x.count(":") < 1:
        raise RemoteSpecError(f"campaign.wires[{i}]: {x!r} is not \"HOST:IFACE\"")
    h, _, iface = x.partition(":")
    if h not in hosts:
        raise RemoteSpecError(f"campaign.wires[{i}]: host {h!r} has no [hosts.{h}] table")
    if not _IFACE.match(iface):
        raise RemoteSpecError(f"campaign.wires[{i}]: {iface!r} is not an interface name")
    return h, iface


def parse_remote(campaign: dict[str, Any], hosts_doc: Any) -> RemoteSpec:
    """The ``[hosts.NAME]`` tables and ``campaign.wires`` of a remote campaign."""
    if not isinstance(hosts_doc, dict) or not hosts_doc:
        raise RemoteSpecError("location = \"remote\" needs [hosts.NAME] tables (ssh, roles)")
    hosts = {str(k): _host(str(k), v) for k, v in hosts_doc.items()}
    suts = [h.name for h in hosts.values() if "sut" in h.roles]
    if len(suts) != 1:
        raise RemoteSpecError(f"hosts: exactly one host has the sut role (found "
                              f"{', '.join(suts) or 'none'})")
    testers = tuple(h.name for h in hosts.values() if "tester" in h.roles)
    if not testers:
        raise RemoteSpecError("hosts: no host has the tester role")
    for h in hosts.values():
        if "vnf" in h.roles and "sut" not in h.roles:
            raise RemoteSpecError(f"hosts.{h.name}.roles: vnf only on the sut host (VNFs "
                                  "attach to the switch through shared memory: memif, "
                                  "vhost-user)")
    raw = campaign.get("wires")
    if not isinstance(raw, list) or not raw:
        raise RemoteSpecError("campaign.wires: a list of [\"HOST:IFACE\", \"HOST:IFACE\"] "
                              "pairs (tester end, sut end), in the order the scenario uses "
                              "them")
    wires: list[Wire] = []
    seen: set[tuple[str, str]] = set()
    for i, w in enumerate(raw):
        if not isinstance(w, list) or len(w) != 2:
            raise RemoteSpecError(f"campaign.wires[{i}]: {w!r} is not a pair of ends")
        ends = [_end(x, i, hosts) for x in w]
        for e in ends:
            if e in seen:
                raise RemoteSpecError(f"campaign.wires[{i}]: {e[0]}:{e[1]} is on two wires")
            seen.add(e)
        on_sut = [e for e in ends if e[0] == suts[0]]
        others = [e for e in ends if e[0] != suts[0]]
        if len(on_sut) != 1 or len(others) != 1 or others[0][0] not in testers:
            raise RemoteSpecError(f"campaign.wires[{i}]: one end on the sut host ({suts[0]}) "
                                  f"and the other on a tester host ({', '.join(testers)})")
        wires.append(Wire(others[0][0], others[0][1], on_sut[0][0], on_sut[0][1]))
    return RemoteSpec(hosts=hosts, wires=tuple(wires), sut_host=suts[0], tester_hosts=testers)
