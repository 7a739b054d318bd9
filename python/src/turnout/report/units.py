"""Units of the report: packet rates and line rates.

Frame sizes in the results database (``frame_size_b``) are Ethernet frames
*without* the 4-byte FCS, as turnout-gen sends them. Every Gbps figure in the
report for a path of Ethernet-like links (veths, NICs) is a **layer-1**
rate, what the same frames would occupy on an Ethernet wire: each frame
costs its bytes, plus the 4 B FCS, plus 20 B of preamble (7), start-of-frame
delimiter (1) and inter-frame gap (12). So a 64 B frame costs 88 B = 704 bit
on the wire, and 1 Mpps of them is 0.704 Gbit/s. Shared-memory ports (memif,
vhost-user) have no preamble, gap or FCS: for paths through them the report
gives the layer-2 rate, the frame bytes per second (``gbps_of``), and says
so.
"""

from __future__ import annotations

__all__ = ["FCS_B", "GBPS_DEFINITION", "L1_OVERHEAD_B", "SHARED_MEMORY_PORTS", "gbps_l1",
           "gbps_of", "is_ethernet_path", "mpps", "wire_bits"]

#: Virtual port kinds that are shared memory, not Ethernet-like links.
SHARED_MEMORY_PORTS = ("memif", "vhost-user", "vhost_user", "vhost")

#: Frame check sequence, not included in ``frame_size_b``.
FCS_B = 4
#: Preamble (7) + start-of-frame delimiter (1) + inter-frame gap (12).
L1_OVERHEAD_B = 20

#: One sentence stated on the page and in the terminal summary.
GBPS_DEFINITION = (
    "Gbps on Ethernet-like paths (veths) is the layer-1 line rate: packets/s × (frame "
    "size + 4 B FCS + 20 B preamble, SFD and inter-frame gap) × 8 bit (64 B frame = 88 B "
    "= 704 bit on the wire); through shared memory (memif, vhost-user), which has no "
    "preamble, gap or FCS, it is the layer-2 rate, packets/s × frame size × 8 bit, "
    "marked L2. Frame sizes are as turnout-gen sends them, without FCS."
)


def wire_bits(frame_size_b: int | float) -> float:
    """Bits one frame of this size (without FCS) occupies on an Ethernet wire."""
    return (float(frame_size_b) + FCS_B + L1_OVERHEAD_B) * 8.0


def gbps_l1(rate_pps: float, frame_size_b: int | float) -> float:
    """Layer-1 line rate in Gbit/s of rate_pps frames of frame_size_b bytes."""
    return rate_pps * wire_bits(frame_size_b) / 1e9


def mpps(rate_pps: float) -> float:
    """Packets per second to millions of packets per second."""
    return rate_pps / 1e6


def is_ethernet_path(virtual_port: str) -> bool:
    """Whether a path's ports are Ethernet-like (veth, NIC), not shared memory."""
    return virtual_port not in SHARED_MEMORY_PORTS


def gbps_of(rate_pps: float, frame_size_b: int | float, virtual_port: str = "") -> float:
    """Layer-1 Gbit/s on Ethernet-like paths, layer-2 through shared memory."""
    if is_ethernet_path(virtual_port):
        return gbps_l1(rate_pps, frame_size_b)
    return rate_pps * float(frame_size_b) * 8.0 / 1e9
