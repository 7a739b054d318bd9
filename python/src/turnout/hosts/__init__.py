"""Hosts the bench drives: this machine (``LocalHost``) or others over SSH
(``hosts.ssh.SshHost``) for a campaign with ``location = "remote"``
(docs/bench.md, "Across hosts")."""

from .base import Host, HostError, HostLost, HostProc, LocalHost

__all__ = ["Host", "HostError", "HostLost", "HostProc", "LocalHost"]
