"""The kinds of port, spelled once, as turnoutd spells them (``[[ports]]
kind`` in docs/turnoutd.md; turnout-gen's port specs take the same names).

Every module of the workbench names a port kind with ``PortKind``; what a
user writes (a campaign's ``tester_port``, ``[sut.NAME] kernel_port``, a
command-line option) goes through ``PortKind.parse``, which also takes the
older spellings (``afxdp``, ``afpacket``, ``vhost-user``, ``vhost``) and
refuses anything else with the accepted names. The Rust side reads a kind
name with one parser too (``ports::PortKind``, crates/ports/src/kind.rs:
turnoutd, turnout-gen, turnout-cni), with the same kinds and older spellings
(test_portkind checks that they agree).

Two spellings stay as they were where they are stored rather than written:
a test point's ``virtual_port`` and the scenario cell names keep
``vhost-user`` (``PortKind.VHOST_USER.stored``), so a database written
before this type reads and reports the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

__all__ = ["ALIASES", "KERNEL", "VIRTUAL", "PortKind", "PortKindError", "describe"]


class PortKindError(ValueError):
    """A port kind nobody knows, or one not accepted where it was written."""


class PortKind(StrEnum):
    """A kind of port; the value is turnoutd's name for it."""

    MEMIF = "memif"
    AF_XDP = "af_xdp"
    AF_PACKET = "af_packet"
    TAP = "tap"
    VHOST_USER = "vhost_user"
    VXLAN = "vxlan"
    GENEVE = "geneve"

    @classmethod
    def parse(cls, text: object, accepted: Iterable[PortKind] | None = None) -> PortKind:
        """The kind ``text`` names (turnoutd's name or an older spelling);
        ``accepted`` narrows the kinds allowed where it was written. Raises
        PortKindError naming the accepted kinds."""
        allowed = tuple(accepted) if accepted is not None else tuple(cls)
        kind: PortKind | None = None
        if isinstance(text, str):
            t = text.strip().lower()
            kind = ALIASES.get(t)
            if kind is None:
                try:
                    kind = cls(t)
                except ValueError:
                    kind = None
        if kind is None or kind not in allowed:
            raise PortKindError(f"{text!r} is not {describe(allowed)}")
        return kind

    @property
    def stored(self) -> str:
        """The spelling stored in test points and scenario cells
        (``vhost-user``; the others as turnoutd spells them)."""
        return "vhost-user" if self is PortKind.VHOST_USER else self.value

    @property
    def label(self) -> str:
        """How reports and messages name it (AF_XDP, AF_PACKET, vhost-user, memif, ...)."""
        return _LABELS.get(self, self.value)


#: older spellings a user may have written (turnout-gen takes them too)
ALIASES: dict[str, PortKind] = {
    "afxdp": PortKind.AF_XDP,
    "afpacket": PortKind.AF_PACKET,
    "vhost-user": PortKind.VHOST_USER,
    "vhost": PortKind.VHOST_USER,
}

#: the kinds that open a kernel interface (a veth end)
KERNEL: tuple[PortKind, ...] = (PortKind.AF_XDP, PortKind.AF_PACKET)
#: the kinds of a virtual endpoint (shared memory with the switch)
VIRTUAL: tuple[PortKind, ...] = (PortKind.MEMIF, PortKind.VHOST_USER)

_LABELS = {PortKind.AF_XDP: "AF_XDP", PortKind.AF_PACKET: "AF_PACKET",
           PortKind.VHOST_USER: "vhost-user"}


def describe(kinds: Iterable[PortKind]) -> str:
    """``af_packet or af_xdp``, ``one of memif, af_xdp, ...``; the accepted
    names with the older spellings of each in brackets."""
    names = []
    for k in kinds:
        old = [a for a, v in ALIASES.items() if v is k]
        names.append(f"{k.value} (or {', '.join(old)})" if old else k.value)
    if len(names) == 1:
        return names[0]
    if len(names) == 2:
        return f"{names[0]} or {names[1]}"
    return "one of " + ", ".join(names)
