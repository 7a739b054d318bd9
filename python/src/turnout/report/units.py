"""Units of the report: packet rates and line rates.

Frame sizes in the results database (``frame_size_b``) are Ethernet frames
*without* the 4-byte FCS, as turnout-gen sends them. Every Gbps figure in the
report is a **layer-1** rate, what the same frames would occupy on an
Ethernet wire: each frame costs its bytes, plus the 4 B FCS, plus 20 B of
preamble (7), start-of-frame delimiter (1) and inter-frame gap (12). So a
64 B frame costs 88 B = 704 bit on the wire, and 1 Mpps of them is
0.704 Gbit/s. The stored ``gbps`` column (layer 2, without FCS) is not used.
"""

from __future__ import annotations

__all__ = ["FCS_B", "GBPS_DEFINITION", "L1_OVERHEAD_B", "gbps_l1", "mpps", "wire_bits"]

#: Frame check sequence, not included in ``frame_size_b``.
FCS_B = 4
#: Preamble (7) + start-of-frame delimiter (1) + inter-frame gap (12).
L1_OVERHEAD_B = 20

#: One sentence stated on the page and in the terminal summary.
GBPS_DEFINITION = (
    "Gbps is the layer-1 line rate: packets/s × (frame size + 4 B FCS + 20 B "
    "preamble, SFD and inter-frame gap) × 8 bit. Frame sizes are as turnout-gen "
    "sends them, without FCS (64 B frame = 88 B = 704 bit on the wire)."
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
