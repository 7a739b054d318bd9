//! Header rewrites of the flows logic's actions, on frame bytes: every
//! set-field, the TTL actions, and the checksums they touch, updated
//! incrementally (RFC 1624) where a checksum covers the field (the IPv4
//! header checksum; the TCP, UDP and ICMPv6 checksums, whose pseudo-header
//! holds the IP addresses and protocol; the ICMPv4 checksum), or, for SCTP,
//! whose CRC32c is not a sum, by the difference of the CRC of the packet
//! before and after (an incorrect checksum stays exactly as incorrect, as
//! Open vSwitch does). A header the frame does not have, or has cut short,
//! is left alone: the rewrite does nothing (never a panic, never an
//! allocation). The pushes and pops that lengthen or shorten the frame are
//! in exec.rs (they need the batch's scratch memory).

use super::key::num;

/// Where a frame's headers are: the offset of the EtherType field behind
/// the VLAN tags, that EtherType, and where its L3 header starts. None for
/// a tag stack the wire crate refuses (nothing past the MACs is touched).
#[derive(Clone, Copy, Debug)]
pub(super) struct L2 {
    pub et_at: usize,
    pub et: u16,
    pub l3: usize,
}

#[inline]
pub(super) fn l2(b: &[u8]) -> Option<L2> {
    let t = wire::ethernet::parse_tags(b).ok()?;
    Some(L2 {
        et_at: t.l3_offset - 2,
        et: t.ethertype,
        l3: t.l3_offset,
    })
}

/// An IP header (IPv4, version 4, whole; or IPv6, version 6, whole 40
/// bytes) and, for the first fragment of an IPv4 packet or for IPv6, its
/// L4 header if it is whole (TCP 20 bytes, UDP 8, SCTP 12, ICMP 8, as the
/// key's extraction: see `key::l4_header_len`).
#[derive(Clone, Copy, Debug)]
pub(super) struct Ip {
    pub l3: usize,
    pub v6: bool,
    pub proto: u8,
    /// The L4 header's offset, if whole.
    pub l4: Option<usize>,
    /// A later fragment of an IPv4 packet (no L4 header at all).
    pub later: bool,
    /// End of the IP packet within the frame (the IP length, bounded by
    /// the frame: Ethernet padding is not part of it).
    pub end: usize,
}

#[inline]
pub(super) fn ip(b: &[u8]) -> Option<Ip> {
    let h = l2(b)?;
    let l3 = h.l3;
    let (v6, proto, l4, end, later) = match h.et {
        num::IPV4 => {
            if b.len() < l3 + 20 || b[l3] >> 4 != 4 {
                return None;
            }
            let frag = u16::from_be_bytes([b[l3 + 6], b[l3 + 7]]) & 0x1fff;
            let tot = u16::from_be_bytes([b[l3 + 2], b[l3 + 3]]) as usize;
            let l4 = l3 + ((b[l3] & 0x0f) as usize) * 4;
            (
                false,
                b[l3 + 9],
                (frag == 0).then_some(l4),
                l3 + tot,
                frag != 0,
            )
        }
        num::IPV6 => {
            if b.len() < l3 + 40 || b[l3] >> 4 != 6 {
                return None;
            }
            let plen = u16::from_be_bytes([b[l3 + 4], b[l3 + 5]]) as usize;
            (true, b[l3 + 6], Some(l3 + 40), l3 + 40 + plen, false)
        }
        _ => return None,
    };
    let l4 = l4.filter(|&o| b.len() >= o + super::key::l4_header_len(proto));
    Some(Ip {
        l3,
        v6,
        proto,
        l4,
        later,
        end: end.min(b.len()),
    })
}

#[inline]
fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

#[inline]
fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Updates the 16-bit checksum at `off` for a word changing `old` → `new`
/// (a UDP checksum of 0, "none", stays 0; a computed 0 is sent as 0xffff).
#[inline]
pub(super) fn fix_csum(b: &mut [u8], off: usize, old: u16, new: u16, udp: bool) {
    let c = be16(b, off);
    if udp && c == 0 {
        return;
    }
    let mut c = wire::checksum::update(c, old, new);
    if udp && c == 0 {
        c = 0xffff;
    }
    put16(b, off, c);
}

/// The L4 checksum that covers the IP pseudo-header, for protocol
/// `proto` at `l4`: its offset and whether it is UDP's (0 = none).
#[inline]
fn pseudo_csum(proto: u8, l4: usize, v6: bool) -> Option<(usize, bool)> {
    match proto {
        num::TCP => Some((l4 + 16, false)),
        num::UDP => Some((l4 + 6, true)),
        num::ICMP6 if v6 => Some((l4 + 2, false)),
        _ => None,
    }
}

/// A word of the pseudo-header changed `old` → `new` (an address, the
/// protocol): the L4 checksum of `i` follows.
#[inline]
fn fix_pseudo(b: &mut [u8], i: &Ip, old: u16, new: u16) {
    if let Some(l4) = i.l4 {
        if let Some((c, udp)) = pseudo_csum(i.proto, l4, i.v6) {
            fix_csum(b, c, old, new, udp);
        }
    }
}

/// Writes the 6 bytes of MAC `m` at `off` (if the frame has them).
#[inline]
pub(super) fn write_mac(b: &mut [u8], off: usize, m: u64) {
    if let Some(d) = b.get_mut(off..off + 6) {
        d.copy_from_slice(&m.to_be_bytes()[2..]);
    }
}

/// Sets the bits `mask` of the outer VLAN tag's TCI to `v`; nothing if the
/// frame has no tag.
#[inline]
pub(super) fn set_tci(b: &mut [u8], mask: u16, v: u16) {
    if b.len() >= 18 && wire::ethernet::EtherType::is_tpid(be16(b, 12)) {
        let tci = be16(b, 14);
        put16(b, 14, (tci & !mask) | (v & mask));
    }
}

/// Offset of the IPv4 TTL (true) or IPv6 hop limit (false), if the frame
/// has an IP header.
#[inline]
pub(super) fn ttl_at(b: &[u8]) -> Option<(usize, bool)> {
    let i = ip(b)?;
    Some(if i.v6 {
        (i.l3 + 7, false)
    } else {
        (i.l3 + 8, true)
    })
}

/// Decrements the IPv4 TTL (incremental checksum, RFC 1624) or IPv6 hop
/// limit; false if the packet must be dropped (TTL ≤ 1 or no IP).
#[inline]
pub(super) fn dec_ttl(b: &mut [u8]) -> bool {
    let Some((at, v4)) = ttl_at(b) else {
        return false;
    };
    let ttl = b[at];
    if ttl <= 1 {
        return false;
    }
    if v4 {
        let l3 = at - 8;
        let old = be16(b, l3 + 8);
        b[at] = ttl - 1;
        fix_csum(b, l3 + 10, old, old - 0x0100, false);
    } else {
        b[at] = ttl - 1;
    }
    true
}

/// `set_nw_ttl`: the IPv4 TTL (checksum updated) or IPv6 hop limit.
#[inline]
pub(super) fn set_nw_ttl(b: &mut [u8], ttl: u8) {
    let Some(i) = ip(b) else { return };
    if i.v6 {
        b[i.l3 + 7] = ttl;
    } else {
        let old = be16(b, i.l3 + 8);
        b[i.l3 + 8] = ttl;
        fix_csum(b, i.l3 + 10, old, be16(b, i.l3 + 8), false);
    }
}

/// Rewrites the IPv4 address at `l3 + at` (12 source, 16 destination),
/// with the header and TCP/UDP checksums.
#[inline]
pub(super) fn set_ip4(b: &mut [u8], at: usize, a: u32) {
    let Some(i) = ip(b).filter(|i| !i.v6) else {
        return;
    };
    let l3 = i.l3;
    let old = u32::from_be_bytes([b[l3 + at], b[l3 + at + 1], b[l3 + at + 2], b[l3 + at + 3]]);
    b[l3 + at..l3 + at + 4].copy_from_slice(&a.to_be_bytes());
    for (o, n) in [
        ((old >> 16) as u16, (a >> 16) as u16),
        (old as u16, a as u16),
    ] {
        fix_csum(b, l3 + 10, o, n, false);
        fix_pseudo(b, &i, o, n);
    }
}

/// Rewrites the IPv6 address at `l3 + at` (8 source, 24 destination),
/// with the TCP/UDP/ICMPv6 checksum.
#[inline]
pub(super) fn set_ip6(b: &mut [u8], at: usize, a: &[u8; 16]) {
    let Some(i) = ip(b).filter(|i| i.v6) else {
        return;
    };
    let o = i.l3 + at;
    for w in 0..8 {
        let old = be16(b, o + 2 * w);
        let new = u16::from_be_bytes([a[2 * w], a[2 * w + 1]]);
        put16(b, o + 2 * w, new);
        fix_pseudo(b, &i, old, new);
    }
}

/// The IPv4 TOS / IPv6 traffic class: the bits `mask` set to `v`.
#[inline]
pub(super) fn set_tos(b: &mut [u8], mask: u8, v: u8) {
    let Some(i) = ip(b) else { return };
    let l3 = i.l3;
    if i.v6 {
        let tc = (b[l3] << 4) | (b[l3 + 1] >> 4);
        let tc = (tc & !mask) | (v & mask);
        b[l3] = (b[l3] & 0xf0) | (tc >> 4);
        b[l3 + 1] = (b[l3 + 1] & 0x0f) | (tc << 4);
    } else {
        let old = be16(b, l3);
        b[l3 + 1] = (b[l3 + 1] & !mask) | (v & mask);
        fix_csum(b, l3 + 10, old, be16(b, l3), false);
    }
}

/// A meter's DSCP remark band: the drop precedence of the DSCP (its bits
/// 1 and 2, as in the assured forwarding classes: AF21 is 18, AF22 20,
/// AF23 22) raised by `prec`, at most to 3 (OpenFlow 1.3, 7.3.4.4).
#[inline]
pub(super) fn remark_dscp(b: &mut [u8], prec: u8) {
    let Some(i) = ip(b) else { return };
    let tos = if i.v6 {
        (b[i.l3] << 4) | (b[i.l3 + 1] >> 4)
    } else {
        b[i.l3 + 1]
    };
    let dscp = tos >> 2;
    let dp = (((dscp >> 1) & 3) + prec).min(3);
    let dscp = (dscp & !0b110) | (dp << 1);
    set_tos(b, 0xfc, dscp << 2);
}

/// The IP protocol / IPv6 next header, with the IPv4 header checksum and
/// the L4 checksum over the pseudo-header (which holds it).
#[inline]
pub(super) fn set_proto(b: &mut [u8], p: u8) {
    let Some(i) = ip(b) else { return };
    let (old, new) = (i.proto as u16, p as u16);
    if i.v6 {
        b[i.l3 + 6] = p;
    } else {
        let ow = be16(b, i.l3 + 8);
        b[i.l3 + 9] = p;
        fix_csum(b, i.l3 + 10, ow, be16(b, i.l3 + 8), false);
    }
    fix_pseudo(b, &i, old, new);
}

/// The IPv6 flow label.
#[inline]
pub(super) fn set_flabel(b: &mut [u8], fl: u32) {
    let Some(i) = ip(b).filter(|i| i.v6) else {
        return;
    };
    let l3 = i.l3;
    b[l3 + 1] = (b[l3 + 1] & 0xf0) | ((fl >> 16) & 0x0f) as u8;
    put16(b, l3 + 2, fl as u16);
}

/// What a port rewrite ([`set_tp`]) did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum TpSet {
    /// The port and the checksum are written.
    Written,
    /// A TCP, UDP or SCTP packet (IPv4 first fragment or IPv6) whose
    /// frame is too short for the header: nothing written, but the field
    /// is there for the flow (Open vSwitch sets it in its flow and matches
    /// later tables against it).
    Truncated,
    /// Not such a packet (another protocol, a later fragment): the field's
    /// prerequisites are not met and the rewrite is ignored.
    Ignored,
}

/// Rewrites the TCP, UDP or SCTP port at `l4 + at` (0 source, 2
/// destination), over IPv4 (first fragment) or IPv6, with its checksum.
#[inline]
pub(super) fn set_tp(b: &mut [u8], at: usize, p: u16) -> TpSet {
    let Some(i) = ip(b) else {
        return TpSet::Ignored;
    };
    if !matches!(i.proto, num::TCP | num::UDP | num::SCTP) || i.later {
        return TpSet::Ignored;
    }
    let Some(l4) = i.l4 else {
        return TpSet::Truncated;
    };
    match i.proto {
        num::TCP | num::UDP => {
            let old = be16(b, l4 + at);
            put16(b, l4 + at, p);
            let (c, udp) = if i.proto == num::TCP {
                (l4 + 16, false)
            } else {
                (l4 + 6, true)
            };
            fix_csum(b, c, old, p, udp);
        }
        num::SCTP => {
            // The CRC of the packet before and after differ by the CRC
            // of their difference (`sctp_crc_change`): one pass over the
            // bytes from the port on, not two CRCs of the whole packet.
            let end = i.end.max(l4 + 12);
            let old = be16(b, l4 + at);
            put16(b, l4 + at, p);
            let d = (old ^ p).to_be_bytes();
            let change = sctp_crc_change(&d, end - (l4 + at + 2));
            let c = u32::from_le_bytes([b[l4 + 8], b[l4 + 9], b[l4 + 10], b[l4 + 11]]);
            b[l4 + 8..l4 + 12].copy_from_slice(&(c ^ change).to_le_bytes());
        }
        _ => {}
    }
    TpSet::Written
}

/// The ICMPv4 / ICMPv6 type (`code` false) or code, with the checksum.
#[inline]
pub(super) fn set_icmp(b: &mut [u8], code: bool, v: u8) {
    let Some(i) = ip(b) else { return };
    let Some(l4) = i.l4 else { return };
    if !matches!(i.proto, num::ICMP | num::ICMP6) {
        return;
    }
    let old = be16(b, l4);
    b[l4 + code as usize] = v;
    fix_csum(b, l4 + 2, old, be16(b, l4), false);
}

/// An ARP header (whole, 28 bytes): its offset.
#[inline]
fn arp(b: &[u8]) -> Option<usize> {
    let h = l2(b)?;
    (h.et == num::ARP && b.len() >= h.l3 + 28).then_some(h.l3)
}

/// The ARP opcode.
#[inline]
pub(super) fn set_arp_op(b: &mut [u8], op: u16) {
    if let Some(l3) = arp(b) {
        put16(b, l3 + 6, op);
    }
}

/// An ARP protocol address at `l3 + at` (14 sender, 24 target).
#[inline]
pub(super) fn set_arp_pa(b: &mut [u8], at: usize, a: u32) {
    if let Some(l3) = arp(b) {
        b[l3 + at..l3 + at + 4].copy_from_slice(&a.to_be_bytes());
    }
}

/// An ARP hardware address at `l3 + at` (8 sender, 18 target).
#[inline]
pub(super) fn set_arp_ha(b: &mut [u8], at: usize, m: u64) {
    if let Some(l3) = arp(b) {
        write_mac(b, l3 + at, m);
    }
}

/// An ICMPv6 neighbour solicitation or advertisement: its ICMPv6 header's
/// offset, its type, and the end of the packet.
#[inline]
fn nd(b: &[u8]) -> Option<(usize, u8, usize)> {
    let i = ip(b).filter(|i| i.v6 && i.proto == num::ICMP6)?;
    let l4 = i.l4?;
    let t = b[l4];
    ((t == num::ND_NS || t == num::ND_NA) && b.len() >= l4 + 24).then_some((
        l4,
        t,
        i.end.max(l4 + 24),
    ))
}

/// The ND target (ICMPv6 checksum updated).
#[inline]
pub(super) fn set_nd_target(b: &mut [u8], a: &[u8; 16]) {
    let Some((l4, _, _)) = nd(b) else { return };
    for w in 0..8 {
        let o = l4 + 8 + 2 * w;
        let old = be16(b, o);
        let new = u16::from_be_bytes([a[2 * w], a[2 * w + 1]]);
        put16(b, o, new);
        fix_csum(b, l4 + 2, old, new, false);
    }
}

/// The ND link-layer address option (source: true, of a solicitation;
/// target: of an advertisement): the first of its kind, if there is one
/// (ICMPv6 checksum updated). None is added.
#[inline]
pub(super) fn set_nd_ll(b: &mut [u8], source: bool, m: u64) {
    let Some((l4, t, end)) = nd(b) else { return };
    if (t == num::ND_NS) != source {
        return;
    }
    let want = if source { 1 } else { 2 };
    let end = end.min(b.len());
    let mut off = l4 + 24;
    while off + 8 <= end {
        let len = b[off + 1] as usize * 8;
        if len == 0 || off + len > end {
            return;
        }
        if b[off] == want && len == 8 {
            let new = m.to_be_bytes();
            for w in 0..3 {
                let o = off + 2 + 2 * w;
                let old = be16(b, o);
                let n = u16::from_be_bytes([new[2 + 2 * w], new[3 + 2 * w]]);
                put16(b, o, n);
                fix_csum(b, l4 + 2, old, n, false);
            }
            return;
        }
        off += len;
    }
}

/// The outermost MPLS label stack entry: its offset (an MPLS frame with
/// 4 bytes there).
#[inline]
pub(super) fn lse(b: &[u8]) -> Option<usize> {
    let h = l2(b)?;
    (matches!(h.et, num::MPLS | num::MPLS_MC) && b.len() >= h.l3 + 4).then_some(h.l3)
}

/// The outermost label stack entry's bits `mask` set to `v` (label: bits
/// 12..32, TC 9..12, bottom of stack 8, TTL 0..8).
#[inline]
pub(super) fn set_lse(b: &mut [u8], mask: u32, v: u32) {
    if let Some(at) = lse(b) {
        let old = u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        b[at..at + 4].copy_from_slice(&((old & !mask) | (v & mask)).to_be_bytes());
    }
}

/// `dec_mpls_ttl`: false if the packet must be dropped (TTL ≤ 1, or not
/// MPLS).
#[inline]
pub(super) fn dec_mpls_ttl(b: &mut [u8]) -> bool {
    let Some(at) = lse(b) else { return false };
    let ttl = b[at + 3];
    if ttl <= 1 {
        return false;
    }
    b[at + 3] = ttl - 1;
    true
}

/// What is behind the outermost label stack entry at `at`: the next entry
/// (its offset), or, at the bottom of the stack, an IP header.
enum Inner {
    Lse(usize),
    Ip(usize, bool),
    None,
}

#[inline]
fn inner(b: &[u8], at: usize) -> Inner {
    let bos = b[at + 2] & 1 != 0;
    let n = at + 4;
    if !bos {
        return if b.len() >= n + 4 {
            Inner::Lse(n)
        } else {
            Inner::None
        };
    }
    match b.get(n).map(|v| v >> 4) {
        Some(4) if b.len() >= n + 20 => Inner::Ip(n, true),
        Some(6) if b.len() >= n + 40 => Inner::Ip(n, false),
        _ => Inner::None,
    }
}

/// `copy_ttl_out`: the TTL of the next-to-outermost entry (or of the IP
/// header behind the bottom of the stack) into the outermost.
#[inline]
pub(super) fn copy_ttl_out(b: &mut [u8]) {
    let Some(at) = lse(b) else { return };
    let ttl = match inner(b, at) {
        Inner::Lse(n) => b[n + 3],
        Inner::Ip(n, true) => b[n + 8],
        Inner::Ip(n, false) => b[n + 7],
        Inner::None => return,
    };
    b[at + 3] = ttl;
}

/// `copy_ttl_in`: the outermost entry's TTL into the next-to-outermost
/// (or the IP header's, with the IPv4 checksum).
#[inline]
pub(super) fn copy_ttl_in(b: &mut [u8]) {
    let Some(at) = lse(b) else { return };
    let ttl = b[at + 3];
    match inner(b, at) {
        Inner::Lse(n) => b[n + 3] = ttl,
        Inner::Ip(n, true) => {
            let old = be16(b, n + 8);
            b[n + 8] = ttl;
            fix_csum(b, n + 10, old, be16(b, n + 8), false);
        }
        Inner::Ip(n, false) => b[n + 7] = ttl,
        Inner::None => {}
    }
}

/// The label stack entry `push_mpls` puts in front of the frame's L3
/// header (OpenFlow 1.3, 5.12.1): onto an MPLS frame, a copy of the
/// outermost entry, not bottom of stack; onto IP, label 0, TC 0, bottom of
/// stack, the IP TTL; onto anything else TTL 0.
#[inline]
pub(super) fn new_lse(b: &[u8]) -> u32 {
    if let Some(at) = lse(b) {
        return u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]) & !0x100;
    }
    match ttl_at(b) {
        Some((at, _)) => 0x100 | b[at] as u32,
        None => 0x100,
    }
}

/// The TCI of a tag pushed onto `b` (`push_vlan`): OpenFlow 1.3 gives
/// the new outer tag the VID and PCP of the outer tag the frame has, if it
/// has one (0 otherwise; the DEI bit 0 in both cases).
#[inline]
pub(super) fn push_vlan_tci(b: &[u8]) -> u16 {
    // (A tag as `pop_vlan` takes it: at least 18 bytes.)
    if b.len() >= 18 && wire::ethernet::EtherType::is_tpid(u16::from_be_bytes([b[12], b[13]])) {
        u16::from_be_bytes([b[14], b[15]]) & 0xefff
    } else {
        0
    }
}

/// CRC32c (Castagnoli, RFC 3309) of `d` as SCTP stores it (the value
/// written little-endian): for the tests (a rewrite works out the change
/// alone, `sctp_crc_change`).
#[cfg(test)]
pub(super) fn sctp_crc(d: &[u8]) -> u32 {
    // The checksum field (bytes 8..12) counts as zero.
    let mut c = !0u32;
    for (i, &x) in d.iter().enumerate() {
        let x = if (8..12).contains(&i) { 0 } else { x };
        c = (c >> 8) ^ CRC32C[((c ^ x as u32) & 0xff) as usize];
    }
    !c
}

/// `sctp_crc(a) ^ sctp_crc(b)` for two messages of the same length that
/// differ by `d` (XORed) at some offset and nowhere else, `trailing`
/// bytes before their end: CRC32c is affine, so the inversions at the
/// start and the end cancel and what is left is the CRC register of the
/// difference run from zero (its zeros before `d` leave it zero).
#[inline]
fn sctp_crc_change(d: &[u8], trailing: usize) -> u32 {
    let mut c = 0u32;
    for &x in d {
        c = (c >> 8) ^ CRC32C[((c ^ x as u32) & 0xff) as usize];
    }
    for _ in 0..trailing {
        c = (c >> 8) ^ CRC32C[(c & 0xff) as usize];
    }
    c
}

/// The CRC32c table (reflected polynomial 0x82F63B78).
const CRC32C: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 3720 B.4's test vector: 32 bytes of zeros.
    #[test]
    fn crc32c_of_the_rfc_vectors() {
        // With bytes 8..12 treated as zero, zeros are zeros.
        assert_eq!(sctp_crc(&[0u8; 32]), 0x8a91_36aa);
        let inc: Vec<u8> = (0..32u8).collect();
        let mut z = inc.clone();
        z[8..12].fill(0);
        // (The same as the CRC of the vector with the field zeroed.)
        assert_eq!(sctp_crc(&inc), sctp_crc(&z));
    }

    /// CRC32c bit by bit (not the table), the checksum field as zero.
    fn crc32c_bitwise(d: &[u8]) -> u32 {
        let mut c = !0u32;
        for (i, &x) in d.iter().enumerate() {
            c ^= if (8..12).contains(&i) { 0 } else { x as u32 };
            for _ in 0..8 {
                c = if c & 1 != 0 {
                    (c >> 1) ^ 0x82F6_3B78
                } else {
                    c >> 1
                };
            }
        }
        !c
    }

    /// The SCTP packet of os-ken's switch suite (set_field sctp_src/dst
    /// tests: ports 11111 → 2222, a DATA chunk of 8 bytes) as os-ken 4.2.2
    /// sends it, over IPv4 or IPv6, behind a VLAN tag or not.
    fn osken_sctp(v6: bool, tagged: bool) -> (Vec<u8>, usize) {
        let sctp = [
            0x2b, 0x67, 0x08, 0xae, 0, 0, 0, 0, 0xa1, 0x13, 0x70, 0x46, 0, 0, 0, 0x18, 0, 0, 0, 0,
            0, 0, 0, 0, 0, 0, 0, 0, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
        ];
        let mut f = vec![0x22; 6];
        f.extend([0x12, 0x11, 0x11, 0x11, 0x11, 0x11]);
        if tagged {
            f.extend([0x81, 0x00, 0x60, 100]);
        }
        if v6 {
            f.extend([0x86, 0xdd, 0x62, 0, 0, 100, 0, sctp.len() as u8, 132, 64]);
            f.extend([0x00, 0x10].iter().chain(&[0; 13]).chain(&[0x10]));
            f.extend([0x00, 0x20].iter().chain(&[0; 13]).chain(&[0x20]));
        } else {
            let tot = (20 + sctp.len()) as u8;
            f.extend([0x08, 0x00, 0x45, 32, 0, tot, 0, 0, 0, 0, 64, 132, 0, 0]);
            f.extend([192, 168, 10, 10, 192, 168, 20, 20]);
        }
        let l4 = f.len();
        f.extend(sctp);
        (f, l4)
    }

    /// The change of the CRC by a port rewrite, worked out from the
    /// difference alone, is the change two whole CRCs give, for SCTP
    /// packets of every length up to 300 bytes and both ports.
    #[test]
    fn the_crc_change_of_a_port_rewrite_is_that_of_two_crcs() {
        let mut x = 0x9e37_79b9u32;
        for len in 12..300usize {
            let mut m: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 17;
                    x ^= x << 5;
                    x as u8
                })
                .collect();
            for at in [0usize, 2] {
                let before = sctp_crc(&m);
                let new = [m[at] ^ 0x5a, m[at + 1].wrapping_add(len as u8)];
                let d = [m[at] ^ new[0], m[at + 1] ^ new[1]];
                m[at..at + 2].copy_from_slice(&new);
                let after = sctp_crc(&m);
                assert_eq!(
                    sctp_crc_change(&d, len - at - 2),
                    before ^ after,
                    "len {len} at {at}"
                );
            }
        }
    }

    /// A port rewrite leaves a correct CRC32c correct and an incorrect
    /// one exactly as incorrect (as Open vSwitch does): os-ken 4.2.2's
    /// SCTP serializer takes the CRC of the Python text of the bytes
    /// (`str(bytearray)`), so its suite's frames carry a wrong checksum,
    /// and its expected frames another wrong one that no switch can
    /// produce (the suite reports its 12 SCTP rewrites as a checksum
    /// mismatch).
    #[test]
    fn sctp_port_rewrites_keep_a_correct_crc_correct_and_a_wrong_one_wrong() {
        let field = |f: &[u8], l4: usize| {
            u32::from_le_bytes([f[l4 + 8], f[l4 + 9], f[l4 + 10], f[l4 + 11]])
        };
        for v6 in [false, true] {
            for tagged in [false, true] {
                let (osken, l4) = osken_sctp(v6, tagged);
                // os-ken's checksum is not the packet's CRC32c.
                assert_eq!(crc32c_bitwise(&osken[l4..]), 0xdff2_a9c2);
                assert_eq!(field(&osken, l4), 0x4670_13a1);
                let mut right = osken.clone();
                right[l4 + 8..l4 + 12].copy_from_slice(&0xdff2_a9c2u32.to_le_bytes());
                for (at, port) in [(0, 12345u16), (2, 6789)] {
                    let mut f = right.clone();
                    set_tp(&mut f, at, port);
                    assert_eq!(&f[l4 + at..l4 + at + 2], &port.to_be_bytes());
                    assert_eq!(
                        field(&f, l4),
                        crc32c_bitwise(&f[l4..]),
                        "v6 {v6} tagged {tagged}: a correct CRC stays correct"
                    );
                    let mut g = osken.clone();
                    set_tp(&mut g, at, port);
                    assert_eq!(&g[..l4 + 8], &f[..l4 + 8]);
                    assert_eq!(
                        field(&g, l4) ^ crc32c_bitwise(&g[l4..]),
                        field(&osken, l4) ^ crc32c_bitwise(&osken[l4..]),
                        "v6 {v6} tagged {tagged}: the same error as received"
                    );
                }
            }
        }
    }
}
