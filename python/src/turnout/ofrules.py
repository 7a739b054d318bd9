"""Deterministic OpenFlow rule sets for the ``openflow`` scenario
(turnoutd's ``flows`` logic vs OVS with the same rules).

``rule_set(rules, masks, in_port, outputs)`` returns the text of N flows in
the syntax of ``ovs-ofctl add-flows`` (one flow a line), the same bytes for
every SUT: turnoutd gets them over its OpenFlow listener, OVS and OVS-DPDK
over their bridge, each with ``ovs-ofctl -O OpenFlow13 add-flows``.

The tester's frames are IPv4/UDP from turnout-gen with its defaults
(``10.0.0.1`` → ``10.0.0.2``, UDP ports 1024 → 1024), its flows varying the
UDP source port and the source IP (turnout-gen ``--vary src-port,src-ip``).
The set:

- **one hit rule** (the known subset the tester's flows hit, all of them):
  ``udp,in_port=IN,nw_dst=10.0.0.2,tp_dst=1024`` with ``actions=`` one
  ``output:`` per entry of ``outputs`` (more than one: mirroring). Priority
  ``HIT_PRIORITY``, below every other rule, so a classifier that visits its
  subtables (masks) in priority order has to look through all of them
  before it settles on the hit rule: a worst case for the masks.
- **N − 1 miss rules** spread round robin over ``masks`` distinct masks,
  each on ``udp,in_port=IN`` and ``nw_dst`` with the mask's prefix length,
  some masks with ``nw_src`` and/or ``tp_dst`` too (``MASKS``). Their
  ``nw_dst`` prefixes lie outside 10.0.0.0/8 (from 11.0.0.0 up, wrapping to
  0.0.0.0), so no frame of the tester ever matches one. Output to ``outputs[0]``
  (never used). The hit rule's mask is mask 0 (``nw_dst/32`` with
  ``tp_dst``), so a set with ``masks`` M has exactly M distinct masks when
  N ≥ M.
- optionally **A ACL rules** (``acl``, ``acl_at``): rules that tell the
  tester's flows apart without matching any of them, so a cache keyed by
  the fields the rules look at (turnoutd's exact-match cache) or one that
  must keep the bits that ruled a rule out (OVS's megaflows) can no longer
  fold every flow into one entry. ACL rule g is
  ``udp,in_port=IN,nw_src=S/32,nw_dst=10.0.0.2,tp_src=P``, where S is the
  source address turnout-gen gives flow ``g × stride`` (stride
  ``ACL_SPAN // A``, so the sources spread over the first 2^20 flows) and P
  is the UDP source port it pairs with that address plus 2^15 (mod 2^16):
  the tester sends from S, and from P, but never from both. ``acl_at``
  ``above`` puts them at ``ACL_ABOVE_PRIORITY``, over the hit rule (every
  packet must be checked against them and found not to match); ``below``
  at ``ACL_BELOW_PRIORITY``, under it (a classifier that skips subtables
  whose rules rank below a match it already has, as OVS's does, never
  visits them). Output to ``outputs[0]``, as the miss rules.
"""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

__all__ = ["ACL_ABOVE_PRIORITY", "ACL_AT", "ACL_BELOW_PRIORITY", "ACL_SPAN", "BULK_COOKIE",
           "HIT_PRIORITY", "MASKS", "MAX_MASKS", "MISS_PRIORITY", "TESTER_VARY", "RuleSet",
           "acl_lines", "bulk_lines", "check_point", "dump_flows", "install", "mask_of", "rule_set"]

#: the tester's frames (turnout-gen's defaults)
TESTER_SRC_IP = "10.0.0.1"
TESTER_DST_IP = "10.0.0.2"
TESTER_SRC_PORT = 1024
TESTER_DST_PORT = 1024
#: turnout-gen ``--vary`` of the bench's openflow trials: flow i sends from
#: TESTER_SRC_IP + i and UDP port TESTER_SRC_PORT + i (mod 2^16)
TESTER_VARY = "src-port,src-ip"
HIT_PRIORITY = 10
MISS_PRIORITY = 100
#: the ACL rules' priorities: over every other rule, or under the hit rule
ACL_ABOVE_PRIORITY = 1000
ACL_BELOW_PRIORITY = 5
ACL_AT = ("above", "below")
#: the flow indices the ACL rules' sources spread over (2^20 > 10^6 flows)
ACL_SPAN = 1 << 20
#: masks available (16 nw_dst prefix lengths × 4 combinations of other fields)
MAX_MASKS = 64


@dataclass(frozen=True)
class Mask:
    """Which fields a rule of this mask matches, and how much of them."""

    dst_len: int  # nw_dst prefix length (17..32)
    src_len: int  # nw_src prefix length (0 = not matched)
    tp_dst: bool  # tp_dst matched exactly

    def key(self) -> tuple[int, int, bool]:
        return (self.dst_len, self.src_len, self.tp_dst)


def mask_of(k: int) -> Mask:
    """Mask number ``k`` (0..63): k = 0 is the hit rule's (nw_dst/32 +
    tp_dst); ``k % 16`` shortens the nw_dst prefix, ``k // 16`` adds nw_src/8
    and/or drops tp_dst."""
    if not 0 <= k < MAX_MASKS:
        raise ValueError(f"mask {k}: 0..{MAX_MASKS - 1}")
    extra = k // 16
    return Mask(dst_len=32 - k % 16, src_len=8 if extra & 1 else 0, tp_dst=not extra & 2)


#: every mask, in order
MASKS = tuple(mask_of(k) for k in range(MAX_MASKS))


def _capacity(m: Mask) -> int:
    """Distinct nw_dst prefixes of this length outside 10.0.0.0/8."""
    return (1 << m.dst_len) - (1 << (m.dst_len - 8))


def _miss_dst(m: Mask, j: int) -> str:
    """The j-th nw_dst prefix of mask ``m`` outside 10.0.0.0/8: from
    11.0.0.0 up in steps of the prefix size, wrapping to 0.0.0.0 (j below
    the capacity never reaches 10.0.0.0/8 again)."""
    step = 1 << (32 - m.dst_len)
    a = (0x0B000000 + j * step) & 0xFFFFFFFF
    # a /32 written as the bare address, as the hit rule's
    return f"{ipaddress.IPv4Address(a)}" + (f"/{m.dst_len}" if m.dst_len < 32 else "")


@dataclass(frozen=True)
class RuleSet:
    """A generated set: its text (``ovs-ofctl add-flows`` input) and what the
    tester's flows are expected to hit."""

    text: str
    rules: int
    masks: int
    #: the hit rule's match and priority as ``ovs-ofctl dump-flows`` filters
    #: accept them (``--strict``): how a test finds its counters
    hit_match: str
    hit_priority: int
    outputs: tuple[int, ...]
    #: ACL rules (module doc) and where they rank: "above" | "below" | ""
    acl: int = 0
    acl_at: str = ""

    def lines(self) -> list[str]:
        return self.text.splitlines()


def acl_lines(acl: int, acl_at: str, in_port: int, output: int) -> list[str]:
    """The ``acl`` ACL rules (module doc), ``acl_at`` "above" or "below" the
    hit rule; none of them matches a frame of the tester's flows."""
    if acl < 1 or acl > ACL_SPAN:
        raise ValueError(f"acl {acl}: 1..{ACL_SPAN}")
    if acl_at not in ACL_AT:
        raise ValueError(f"acl_at {acl_at!r}: above or below (the hit rule)")
    prio = ACL_ABOVE_PRIORITY if acl_at == "above" else ACL_BELOW_PRIORITY
    stride = ACL_SPAN // acl
    base = int(ipaddress.IPv4Address(TESTER_SRC_IP))
    out = []
    for g in range(acl):
        f = g * stride
        src = ipaddress.IPv4Address(base + f)
        sport = (TESTER_SRC_PORT + f + 0x8000) & 0xFFFF
        out.append(f"priority={prio},udp,in_port={in_port},nw_src={src},"
                   f"nw_dst={TESTER_DST_IP},tp_src={sport},actions=output:{output}")
    return out


def rule_set(rules: int, masks: int, in_port: int, outputs: list[int] | tuple[int, ...],
             acl: int = 0, acl_at: str = "") -> RuleSet:
    """N = ``rules`` flows over ``masks`` distinct masks (module doc), plus
    ``acl`` ACL rules ``acl_at`` "above" or "below" the hit rule. Ports
    are OpenFlow port numbers (1-based); ``outputs`` are where the hit rule
    sends the tester's frames (the first is the receiver, more are mirrors)."""
    if acl < 0 or (acl == 0) != (acl_at == ""):
        raise ValueError(f"acl {acl} acl_at {acl_at!r}: both or neither")
    if rules < 1:
        raise ValueError(f"rules {rules}: at least 1 (the hit rule)")
    if not 1 <= masks <= MAX_MASKS:
        raise ValueError(f"masks {masks}: 1..{MAX_MASKS}")
    if masks > rules:
        raise ValueError(f"masks {masks} > rules {rules}: every mask needs a rule")
    if not outputs:
        raise ValueError("outputs: at least one port")
    if in_port < 1 or any(p < 1 for p in outputs) or in_port in outputs:
        raise ValueError(f"ports in_port={in_port} outputs={list(outputs)}: OpenFlow port "
                         "numbers from 1, the input not among the outputs")
    if len(set(outputs)) != len(outputs):
        raise ValueError(f"outputs {list(outputs)}: each port once")
    hit_match = f"udp,in_port={in_port},nw_dst={TESTER_DST_IP},tp_dst={TESTER_DST_PORT}"
    actions = ",".join(f"output:{p}" for p in outputs)
    lines = [f"priority={HIT_PRIORITY},{hit_match},actions={actions}"]
    # the miss rules: rule i (1..N-1) on mask i % masks, its index within the mask
    counts = [0] * masks
    for i in range(1, rules):
        k = i % masks
        m = MASKS[k]
        j = counts[k]
        counts[k] += 1
        if j >= _capacity(m):
            raise ValueError(f"rules {rules} over masks {masks}: mask {k} holds at most "
                             f"{_capacity(m)} distinct rules")
        parts = [f"priority={MISS_PRIORITY + k}", "udp", f"in_port={in_port}"]
        if m.src_len:
            parts.append(f"nw_src=172.0.0.0/{m.src_len}")
        parts.append(f"nw_dst={_miss_dst(m, j)}")
        if m.tp_dst:
            parts.append(f"tp_dst={TESTER_DST_PORT}")
        lines.append(",".join(parts) + f",actions=output:{outputs[0]}")
    if acl:
        lines += acl_lines(acl, acl_at, in_port, outputs[0])
    return RuleSet(text="\n".join(lines) + "\n", rules=rules, masks=masks,
                   hit_match=hit_match, hit_priority=HIT_PRIORITY, outputs=tuple(outputs),
                   acl=acl, acl_at=acl_at)


def check_point(rules: int, masks: int, outputs: int, acl: int = 0, acl_at: str = ""
                ) -> str | None:
    """Why an openflow point cannot be made (None when it can)."""
    if acl < 0 or acl > ACL_SPAN:
        return f"acl {acl}: 0..{ACL_SPAN}"
    if acl and acl_at not in ACL_AT:
        return f"acl {acl}: acl_at {acl_at!r} is not above or below (the hit rule)"
    if not acl and acl_at:
        return f"acl_at {acl_at!r} without acl rules"
    if rules < 1 or masks < 1 or outputs < 1:
        return f"openflow point rules={rules} masks={masks} outputs={outputs}: each at least 1"
    if masks > MAX_MASKS:
        return f"masks {masks}: at most {MAX_MASKS}"
    if masks > rules:
        return f"masks {masks} > rules {rules}: every mask needs a rule"
    if outputs > 8:
        return f"outputs {outputs}: at most 8 (the receiver and 7 mirror ports)"
    return None


def install(rs: RuleSet, target: str, directory: Path, netns: str = "",
            env: dict[str, str] | None = None, timeout_s: float = 300.0) -> str:
    """Write the set to ``directory/flows.txt`` and install it with
    ``ovs-ofctl -O OpenFlow13 add-flows TARGET FILE`` (an OVS bridge name,
    or turnoutd's ``unix:PATH``), in ``netns`` when given. Returns the
    command; raises RuntimeError with ovs-ofctl's message when it fails."""
    f = directory / "flows.txt"
    f.write_text(rs.text)
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "add-flows", target, str(f)]
    full = (["ip", "netns", "exec", netns] if netns else []) + cmd
    r = subprocess.run(full, capture_output=True, text=True, timeout=timeout_s,
                       env=env or dict(os.environ))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-500:]}")
    return " ".join(cmd)


#: the cookie of ``bulk_lines``' flows (``del-flows cookie=0xb0b/-1`` removes them)
BULK_COOKIE = 0xB0B


def bulk_lines(n: int) -> list[str]:
    """``n`` distinct flows no frame of the bench hits, for timing flow-mods
    (``update_bulk_flows``): priority 1 (below the bench's own rules), IPv4
    destinations from 172.16.0.0 up (the tester sends to 10.0.0.0/8), drop,
    cookie ``BULK_COOKIE``; one mask (``ip,nw_dst`` exact). At most 2^20."""
    if not 1 <= n <= 1 << 20:
        raise ValueError(f"bulk of {n} flows: 1..{1 << 20}")
    return [f"cookie={BULK_COOKIE:#x},priority=1,ip,"
            f"nw_dst=172.{16 + (i >> 16)}.{(i >> 8) & 255}.{i & 255},actions=drop"
            for i in range(n)]


_N_PACKETS = re.compile(r"\bn_packets=(\d+)")


def dump_flows(target: str, netns: str = "", env: dict[str, str] | None = None
               ) -> list[tuple[int, str, int]]:
    """``ovs-ofctl -O OpenFlow13 --no-names dump-flows TARGET``: (priority,
    match, n_packets) per flow, the match as ovs-ofctl prints it."""
    cmd = ["ovs-ofctl", "-O", "OpenFlow13", "--no-names", "dump-flows", target]
    full = (["ip", "netns", "exec", netns] if netns else []) + cmd
    r = subprocess.run(full, capture_output=True, text=True, timeout=120,
                       env=env or dict(os.environ))
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()[-500:]}")
    out = []
    for line in r.stdout.splitlines():
        n = _N_PACKETS.search(line)
        if n is None or " actions=" not in line:
            continue
        last = line.split(" actions=")[0].strip().split(", ")[-1]
        prio = 32768
        if last.startswith("priority="):
            p, _, last = last.partition(",")
            prio = int(p.split("=")[1])
        out.append((prio, last, int(n.group(1))))
    return out
