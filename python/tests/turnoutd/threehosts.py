"""Three host namespaces h1, h2, h3 (10.0.0.1..3/24, IPv6 off, offloads
off), each wired by a veth (eth0 <-> pI) to a switch namespace `sw` where
turnoutd runs over three af_packet ports p1..p3. Shared by
test_flows.py, test_openflow*.py (through harness.openflow_lab) and
test_openflow_controller.py.

Names start with the caller's prefix (unique per test process); close()
deletes every namespace created (their veths go with them), also after a
failed set-up.
"""

from __future__ import annotations

import subprocess


def run(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run(list(cmd), check=False, capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} -> {r.returncode}: {r.stderr.strip()}")
    return r


def nx(ns: str, *cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    return run("ip", "netns", "exec", ns, *cmd, check=check, timeout=timeout)


def ping(ns: str, ip: str, count: int = 3) -> bool:
    """All of ``count`` pings (0.2 s apart) from ``ns`` to ``ip`` answered.

    ping goes on until ``count`` replies or a deadline of 10 s more than the
    pings take (``-w``): without it ping waits for a late reply only twice
    the slowest round trip so far, and a reply a busy machine delayed longer
    than that counted as lost. A lost ping is sent again, so more than
    ``count`` may leave. For the negative check, :func:`unanswered`.
    """
    deadline = str(int(count * 0.2) + 10)
    return nx(ns, "ping", "-c", str(count), "-i", "0.2", "-w", deadline, ip, check=False,
              timeout=60).returncode == 0


def unanswered(ns: str, ip: str, count: int = 1) -> bool:
    """Not all of ``count`` pings (0.2 s apart) answered, each waited for 1 s:
    the quick check that a path is closed."""
    out = nx(ns, "ping", "-c", str(count), "-i", "0.2", "-W", "1", ip, check=False,
             timeout=30).stdout
    return f" {count} received" not in out


class ThreeHosts:
    def __init__(self, prefix: str, macs: dict[int, str]) -> None:
        self.prefix = prefix
        self.macs = macs
        self.ns: list[str] = []
        self.sw = ""
        self.hosts: dict[int, str] = {}

    def netns(self, short: str) -> str:
        name = self.prefix + short
        run("ip", "netns", "add", name)
        self.ns.append(name)
        nx(name, "ip", "link", "set", "lo", "up")
        return name

    def setup(self) -> ThreeHosts:
        self.sw = sw = self.netns("sw")
        for i in (1, 2, 3):
            h = self.netns(f"h{i}")
            self.hosts[i] = h
            run("ip", "link", "add", "eth0", "netns", h, "address", self.macs[i], "type",
                "veth", "peer", "name", f"p{i}", "netns", sw)
            nx(h, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
            nx(sw, "sysctl", "-qw", f"net.ipv6.conf.p{i}.disable_ipv6=1")
            nx(h, "ip", "addr", "add", f"10.0.0.{i}/24", "dev", "eth0")
            for ns, dev in ((h, "eth0"), (sw, f"p{i}")):
                nx(ns, "ip", "link", "set", dev, "up")
                nx(ns, "ethtool", "-K", dev, "tx", "off", "tso", "off", "gso", "off", "gro",
                   "off", check=False)
        return self

    @staticmethod
    def config(switch_extra: str = "", logic_extra: str = "") -> str:
        """turnoutd's configuration: the flows logic over p1..p3 (lines
        ``switch_extra`` and ``logic_extra`` added to [switch] and [logic])."""
        c = (f'[switch]\ncontrol_socket = "@CTL@"\n{switch_extra}\n'
             f'[logic]\nname = "flows"\n{logic_extra}\n')
        for i in (1, 2, 3):
            c += f'[[ports]]\nname = "p{i}"\nkind = "af_packet"\niface = "p{i}"\n\n'
        return c

    def close(self) -> None:
        for ns in reversed(self.ns):
            run("ip", "netns", "del", ns, check=False)
