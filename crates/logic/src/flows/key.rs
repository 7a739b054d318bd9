//! The flow key: every header field a flow can match, packed into 64-bit
//! words so that masking and hashing are a few word operations, and its
//! extraction from frame bytes (never panics, never allocates).
//!
//! Two widths of one layout: [`Key`], the classifier's (every field, the
//! pipeline registers `metadata` and `tunnel_id` and the IPv6 neighbour
//! discovery fields included), and [`CKey`], its first [`CWORDS`] words,
//! the caches' (the fields a frame has at the start of the pipeline; see
//! `Snapshot::nd_in_use` in `mod.rs` for why the rest is never needed
//! there).

use std::hash::{BuildHasherDefault, Hasher};

/// Number of 64-bit words in a [`Key`].
pub const WORDS: usize = 14;
/// Number of 64-bit words in a [`CKey`] (the first of a [`Key`]'s).
pub const CWORDS: usize = 8;

/// Packed header fields and pipeline registers (layout: see [`Field`]).
/// Fields a frame does not have (no VLAN tag, no IP header...) are zero.
pub type Key = Words<WORDS>;
/// The first [`CWORDS`] words of a [`Key`]: the packet fields the
/// exact-match and megaflow caches key their entries by.
pub type CKey = Words<CWORDS>;

/// `N` words of a key.
#[derive(Clone, Copy, Debug)]
pub struct Words<const N: usize>(pub [u64; N]);

impl<const N: usize> Default for Words<N> {
    #[inline]
    fn default() -> Self {
        Words([0; N])
    }
}

/// Constants, one per word, for the keys' hash ([`Words::nh`]).
const MIX: [u64; WORDS] = [
    0x9e37_79b9_7f4a_7c15,
    0xc2b2_ae3d_27d4_eb4f,
    0x1656_67b1_9e37_79f9,
    0x85eb_ca77_c2b2_ae63,
    0x27d4_eb2f_1656_67c5,
    0xff51_afd7_ed55_8ccd,
    0xc4ce_b9fe_1a85_ec53,
    0x5851_f42d_4c95_7f2d,
    0x2545_f491_4f6c_dd1d,
    0x9fb2_1c65_1e98_df25,
    0xd6e8_feb8_6659_fd93,
    0xa076_1d64_78bd_642f,
    0xe703_7ed1_a0b4_28db,
    0x8ebc_6af0_9c88_c6e3,
];

impl<const N: usize> Words<N> {
    /// The words compressed to one: NH (UMAC's universal hash), the sum
    /// of the products of the words taken in pairs, each offset by its
    /// constant, as 128-bit numbers, folded to 64 bits: N/2 widening
    /// multiplies, independent of each other (the multiply-xor of each
    /// word cost twice the instructions). Not mixed: [`KeyHasher::finish`]
    /// mixes it.
    ///
    /// The words past the [`CKey`]'s (the registers and the neighbour
    /// discovery fields) are zero in most keys: their pairs are added only
    /// when one is not (a test instead of three multiplies; the hash is
    /// still a function of the words alone).
    #[inline(always)]
    fn nh(&self) -> u64 {
        let mut acc = 0u128;
        for i in 0..N.min(CWORDS) / 2 {
            let a = self.0[2 * i].wrapping_add(MIX[2 * i]);
            let b = self.0[2 * i + 1].wrapping_add(MIX[2 * i + 1]);
            acc = acc.wrapping_add(a as u128 * b as u128);
        }
        if N > CWORDS && self.0[CWORDS.min(N)..].iter().fold(0, |a, w| a | w) != 0 {
            for i in CWORDS / 2..N / 2 {
                let a = self.0[2 * i].wrapping_add(MIX[2 * i]);
                let b = self.0[2 * i + 1].wrapping_add(MIX[2 * i + 1]);
                acc = acc.wrapping_add(a as u128 * b as u128);
            }
        }
        (acc >> 64) as u64 ^ acc as u64
    }
}

impl<const N: usize> std::hash::Hash for Words<N> {
    /// One word ([`Words::nh`]); [`KeyHasher::finish`] mixes it.
    #[inline]
    fn hash<H: Hasher>(&self, h: &mut H) {
        h.write_u64(self.nh());
    }
}

impl<const N: usize> PartialEq for Words<N> {
    /// Branch-free over the words (a derived `==` calls `memcmp`).
    #[inline]
    fn eq(&self, o: &Self) -> bool {
        self.0
            .iter()
            .zip(o.0.iter())
            .fold(0u64, |a, (x, y)| a | (x ^ y))
            == 0
    }
}

impl<const N: usize> Eq for Words<N> {}

impl<const N: usize> Words<N> {
    /// `self & mask`, word by word.
    #[inline]
    pub fn and(&self, mask: &Self) -> Self {
        let mut k = [0u64; N];
        for (i, w) in k.iter_mut().enumerate() {
            *w = self.0[i] & mask.0[i];
        }
        Words(k)
    }

    /// `self | other`, word by word.
    #[inline]
    pub fn or(&self, other: &Self) -> Self {
        let mut k = [0u64; N];
        for (i, w) in k.iter_mut().enumerate() {
            *w = self.0[i] | other.0[i];
        }
        Words(k)
    }

    /// Hash of the key and `extra` (the caches' index): the words
    /// compressed as in `Hash` ([`Words::nh`]), then murmur3's finaliser.
    #[inline]
    pub fn hash_with(&self, extra: u64) -> u64 {
        KeyHasher(self.nh() ^ extra.wrapping_mul(0x51_7c_c1_b7_27_22_0a_95)).finish()
    }

    /// Every bit of `other` is set in `self`.
    pub fn covers(&self, other: &Self) -> bool {
        self.0.iter().zip(other.0.iter()).all(|(a, b)| a & b == *b)
    }

    /// The bits of field `f` (which must lie in these words).
    pub fn get(&self, f: Field) -> u128 {
        let (w, shift, bits) = f.layout();
        if bits == 128 {
            ((self.0[w] as u128) << 64) | self.0[w + 1] as u128
        } else {
            ((self.0[w] >> shift) & ((1u64 << (bits - 1) << 1).wrapping_sub(1))) as u128
        }
    }

    /// Sets the bits of field `f` to `v` (truncated to the field's width).
    pub fn set(&mut self, f: Field, v: u128) {
        let (w, shift, bits) = f.layout();
        if bits == 128 {
            self.0[w] = (v >> 64) as u64;
            self.0[w + 1] = v as u64;
        } else {
            let m = ((1u64 << (bits - 1) << 1).wrapping_sub(1)) << shift;
            self.0[w] = (self.0[w] & !m) | (((v as u64) << shift) & m);
        }
    }

    /// The key's words below `words` (the others zero).
    pub fn words_below(&self, words: usize) -> Self {
        let mut k = *self;
        for w in k.0.iter_mut().skip(words) {
            *w = 0;
        }
        k
    }
}

impl Key {
    /// The fields the caches keep whatever the flows match: the ingress
    /// port (the verdict of `output` to it, and of `in_port`, depends on
    /// it) and the VLAN TCI (what `mod_vlan_vid`/`mod_vlan_pcp` rewrite
    /// depends on whether the frame is tagged).
    pub fn in_use_always() -> Key {
        let mut k = Key::default();
        k.set(Field::InPort, u128::MAX);
        k.set(Field::VlanTci, u128::MAX);
        k
    }

    /// Its first [`CWORDS`] words (the packet fields the caches key by).
    #[inline(always)]
    pub fn narrow(&self) -> CKey {
        let mut k = [0u64; CWORDS];
        k.copy_from_slice(&self.0[..CWORDS]);
        Words(k)
    }

    /// The first [`CWORDS`] words of `self & mask` (a masked key of a
    /// mask without bits past them: `submap.rs`'s narrow probe).
    #[inline(always)]
    pub fn and_narrow(&self, mask: &Key) -> CKey {
        let mut k = [0u64; CWORDS];
        for (i, w) in k.iter_mut().enumerate() {
            *w = self.0[i] & mask.0[i];
        }
        Words(k)
    }

    /// Whether any bit beyond the first [`CWORDS`] words is set.
    pub fn has_wide(&self) -> bool {
        self.0[CWORDS..].iter().any(|w| *w != 0)
    }
}

impl CKey {
    /// The whole [`Key`] of these words: the pipeline registers and the
    /// neighbour discovery fields zero (as at the start of the pipeline,
    /// for a frame that is not a neighbour solicitation or advertisement).
    #[inline(always)]
    pub fn widen(&self) -> Key {
        let mut k = [0u64; WORDS];
        k[..CWORDS].copy_from_slice(&self.0);
        Words(k)
    }
}

/// The stages of a staged subtable probe (`Subtable::stages` in
/// classifier.rs): stage `s` takes the key's words below `STAGE_WORDS[s]`, so
/// metadata and L2 (in_port, EtherType, VLAN, IP protocol and TOS, the
/// MACs: words 0..3), then L3 as well (the addresses: words 3..7); the
/// last stage is the whole mask (with the L4 ports, word 7).
pub const STAGE_WORDS: [usize; 2] = [3, 7];

/// A matchable field and where it sits in the [`Key`]. Some share bits:
/// those of frames of different EtherTypes (the ARP hardware addresses sit
/// where an IPv6 frame has the upper halves of its addresses; the flow
/// label, the MPLS label, TC and bottom of stack and the ARP opcode share
/// the low half of word 7), which a flow can tell apart because matching
/// one needs a match on the EtherType (OpenFlow's prerequisites); and the
/// neighbour discovery link-layer addresses (the source's in a
/// solicitation, the target's in an advertisement: the ICMPv6 type
/// tells).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Ingress port (16 bits).
    InPort,
    /// EtherType behind the VLAN tags (16 bits).
    DlType,
    /// Outer VLAN TCI as OVS has it: 0x1000 set when tagged, PCP in the top
    /// 3 bits, VID in the low 12 (16 bits).
    VlanTci,
    /// IP protocol, or the low 8 bits of the ARP opcode (8 bits).
    NwProto,
    /// IP TOS / traffic class byte: DSCP in the top 6 bits, ECN in the
    /// low 2 (8 bits).
    NwTos,
    /// Destination MAC (48 bits).
    DlDst,
    /// Source MAC (48 bits).
    DlSrc,
    /// IPv4 source or ARP sender address (32 bits).
    Ip4Src,
    /// IPv4 destination or ARP target address (32 bits).
    Ip4Dst,
    /// IPv6 source (128 bits).
    Ip6Src,
    /// IPv6 destination (128 bits).
    Ip6Dst,
    /// TCP/UDP/SCTP source port, or ICMP type (16 bits).
    TpSrc,
    /// TCP/UDP/SCTP destination port, or ICMP code (16 bits).
    TpDst,
    /// ARP opcode (16 bits).
    ArpOp,
    /// ARP sender hardware address (48 bits; ARP frames).
    ArpSha,
    /// ARP target hardware address (48 bits; ARP frames).
    ArpTha,
    /// IPv6 flow label (20 bits; IPv6 frames).
    Ip6Flabel,
    /// Outermost MPLS label (20 bits; MPLS frames).
    MplsLabel,
    /// Outermost MPLS traffic class (3 bits).
    MplsTc,
    /// Outermost MPLS bottom-of-stack bit (1 bit).
    MplsBos,
    /// The pipeline's metadata register (64 bits; 0 at table 0).
    Metadata,
    /// The tunnel id register (64 bits; 0 at table 0: no port of
    /// turnoutd is a tunnel).
    TunnelId,
    /// IPv6 neighbour discovery target (128 bits; ND frames).
    NdTarget,
    /// ND source link-layer address option (48 bits; solicitations).
    NdSll,
    /// ND target link-layer address option (48 bits; advertisements).
    NdTll,
}

impl Field {
    /// (word, shift, bits); 128-bit fields span words `w` and `w + 1`.
    pub fn layout(self) -> (usize, u32, u32) {
        match self {
            Field::InPort => (0, 48, 16),
            Field::DlType => (0, 32, 16),
            Field::VlanTci => (0, 16, 16),
            Field::NwProto => (0, 8, 8),
            Field::NwTos => (0, 0, 8),
            Field::DlDst => (1, 0, 48),
            Field::DlSrc => (2, 0, 48),
            Field::Ip6Src => (3, 0, 128),
            Field::ArpSha => (3, 0, 48),
            Field::Ip4Src => (4, 0, 32),
            Field::Ip6Dst => (5, 0, 128),
            Field::ArpTha => (5, 0, 48),
            Field::Ip4Dst => (6, 0, 32),
            Field::TpSrc => (7, 48, 16),
            Field::TpDst => (7, 32, 16),
            Field::ArpOp => (7, 16, 16),
            Field::Ip6Flabel => (7, 0, 20),
            Field::MplsLabel => (7, 4, 20),
            Field::MplsTc => (7, 1, 3),
            Field::MplsBos => (7, 0, 1),
            Field::Metadata => (8, 0, 64),
            Field::TunnelId => (9, 0, 64),
            Field::NdTarget => (10, 0, 128),
            Field::NdSll | Field::NdTll => (12, 0, 48),
        }
    }

    /// Width in bits.
    pub fn bits(self) -> u32 {
        self.layout().2
    }

    /// Every bit of the field.
    pub fn full(self) -> u128 {
        if self.bits() == 128 {
            u128::MAX
        } else {
            (1u128 << self.bits()) - 1
        }
    }
}

#[inline]
fn be16(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(off)?, *b.get(off + 1)?]))
}

#[inline]
fn be32(b: &[u8], off: usize) -> Option<u32> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
}

#[inline]
fn be64(b: &[u8], off: usize) -> Option<u64> {
    let s = b.get(off..off + 8)?;
    let mut a = [0u8; 8];
    a.copy_from_slice(s);
    Some(u64::from_be_bytes(a))
}

#[inline]
fn mac(b: &[u8], off: usize) -> u64 {
    match b.get(off..off + 6) {
        Some(s) => s.iter().fold(0u64, |a, &x| (a << 8) | x as u64),
        None => 0,
    }
}

/// EtherTypes and protocols the extractor looks into.
pub mod num {
    /// IPv4 EtherType.
    pub const IPV4: u16 = 0x0800;
    /// IPv6 EtherType.
    pub const IPV6: u16 = 0x86dd;
    /// ARP EtherType.
    pub const ARP: u16 = 0x0806;
    /// ICMP.
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// ICMPv6.
    pub const ICMP6: u8 = 58;
    /// MPLS unicast EtherType.
    pub const MPLS: u16 = 0x8847;
    /// MPLS multicast EtherType.
    pub const MPLS_MC: u16 = 0x8848;
    /// ICMPv6 neighbour solicitation.
    pub const ND_NS: u8 = 135;
    /// ICMPv6 neighbour advertisement.
    pub const ND_NA: u8 = 136;
}

/// Size of the L4 header of `proto` whose fields the key holds (ports,
/// ICMP type and code): a shorter one is cut short and leaves them zero,
/// as in Open vSwitch (TCP 20, UDP 8, SCTP 12, ICMP and ICMPv6 8 bytes).
#[inline]
pub fn l4_header_len(proto: u8) -> usize {
    match proto {
        num::TCP => 20,
        num::SCTP => 12,
        _ => 8,
    }
}

/// Extracts the key of `frame` received on `in_port`. Headers that are cut
/// short leave their fields (and the ones behind them) zero (an L4 header
/// shorter than [`l4_header_len`] included); a VLAN stack
/// the wire crate refuses leaves everything past the MACs zero. IPv4
/// fragments other than the first have no L4 fields; IPv6 extension
/// headers are not walked (the next-header value is the protocol); an
/// MPLS frame has the outermost label stack entry's fields and nothing
/// behind it (as in OpenFlow and Open vSwitch). The pipeline registers
/// (metadata, tunnel id) are zero.
#[inline]
pub fn extract(frame: &[u8], in_port: u16) -> Key {
    match extract_fast(frame, in_port) {
        Some((k, _)) => k.widen(),
        None => extract_general(frame, in_port),
    }
}

/// Bits of [`extract_fast`]'s second value (and of the caches' `meta`):
/// what the rewriting actions will find in the frame beyond its key.
pub mod meta {
    // Low 8 bits: the IPv4 TTL, IPv6 hop limit or outermost MPLS TTL that
    // `dec_ttl` / `dec_mpls_ttl` read (0: none).
    /// The L3 header the key's L3 fields come from is whole (IPv4, IPv6,
    /// ARP, or an MPLS label stack entry): what the L3 rewrites rewrite.
    pub const L3: u32 = 1 << 8;
    /// The L4 header whose fields the key holds is whole (TCP, UDP, SCTP,
    /// ICMP; of a first fragment): what the L4 rewrites rewrite.
    pub const L4: u32 = 1 << 9;
    /// An ICMPv6 neighbour solicitation or advertisement (its target and
    /// link-layer address are in the [`super::Key`]'s words beyond the
    /// [`super::CKey`]'s).
    pub const ND: u32 = 1 << 10;
    /// The TTL in the low 8 bits is an MPLS label stack entry's (an IP
    /// TTL otherwise): `dec_ttl` drops what `dec_mpls_ttl` decrements.
    pub const MPLS: u32 = 1 << 11;
}

/// The common case in straight-line code: an untagged IPv4 frame with a
/// 20-byte header, whole (at least 34 bytes). Returns the same key as
/// [`extract_general`] (its [`CKey`] part: the rest is zero for such a
/// frame) and the frame's [`meta`] bits; None for any other frame.
#[inline(always)]
pub fn extract_fast(frame: &[u8], in_port: u16) -> Option<(CKey, u32)> {
    let h: &[u8; 34] = frame.get(..34)?.try_into().ok()?;
    if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 {
        return None;
    }
    let rd = |o: usize| u64::from_be_bytes(h[o..o + 8].try_into().unwrap_or([0; 8]));
    let proto = h[23];
    let mut k = [0u64; CWORDS];
    k[0] = ((in_port as u64) << 48)
        | ((num::IPV4 as u64) << 32)
        | ((proto as u64) << 8)
        | h[15] as u64;
    k[1] = rd(0) >> 16;
    k[2] = rd(6) >> 16;
    let addrs = rd(26);
    k[4] = addrs >> 32;
    k[6] = addrs & 0xffff_ffff;
    let mut m = h[22] as u32 | meta::L3;
    let frag = u16::from_be_bytes([h[20], h[21]]) & 0x1fff;
    if frag == 0 {
        match proto {
            num::TCP | num::UDP | num::SCTP | num::ICMP | num::ICMP6 => {
                let icmp = proto == num::ICMP || proto == num::ICMP6;
                if frame.len() >= 34 + l4_header_len(proto) {
                    m |= meta::L4;
                    let p = &frame[34..38];
                    let (a, b) = if icmp {
                        (p[0] as u64, p[1] as u64)
                    } else {
                        (
                            u16::from_be_bytes([p[0], p[1]]) as u64,
                            u16::from_be_bytes([p[2], p[3]]) as u64,
                        )
                    };
                    k[7] = (a << 48) | (b << 32);
                }
            }
            _ => {}
        }
    }
    Some((Words(k), m))
}

/// The bytes of a frame that its key (for a given ingress) and its
/// [`meta`] bits depend on when [`extract_fast`] takes it (an untagged
/// IPv4 frame with a 20-byte header): bytes 0..38 without the IPv4 total
/// length, identification, flags and checksum (which change from packet to
/// packet of one flow), and the frame's length up to 54 bytes (whether the
/// L4 header is whole). Two frames of at least 38 bytes with equal headers,
/// one of which [`extract_fast`] takes, have equal keys and meta bits.
/// Comparing headers is a few word operations: the classifier uses it to
/// recognise a run of frames of one flow without extracting their keys.
#[derive(Clone, Copy, Debug, Default)]
pub struct Header([u64; 6]);

/// Of bytes 16..24: the fragment offset, the TTL and the protocol.
const HDR_MASK_16: u64 = u64::from_ne_bytes([0, 0, 0, 0, 0x1f, 0xff, 0xff, 0xff]);
/// Of bytes 24..32: all but the header checksum.
const HDR_MASK_24: u64 = u64::from_ne_bytes([0, 0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);

impl Header {
    /// The header of `frame`; None if it is shorter than 38 bytes.
    #[inline(always)]
    pub fn of(frame: &[u8]) -> Option<Header> {
        let h: &[u8; 38] = frame.get(..38)?.try_into().ok()?;
        let w = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        Some(Header([
            w(0),
            w(8),
            w(16) & HDR_MASK_16,
            w(24) & HDR_MASK_24,
            w(30),
            frame.len().min(54) as u64,
        ]))
    }

    /// Whether `frame` has this header (`Header::of(frame) == Some(*self)`),
    /// without building its header: five word loads, two masks, one length
    /// compare, no branch but the length check.
    #[inline(always)]
    pub fn matches(&self, frame: &[u8]) -> bool {
        let Some(Ok::<&[u8; 38], _>(h)) = frame.get(..38).map(TryInto::try_into) else {
            return false;
        };
        let w = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&h[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        let d = (w(0) ^ self.0[0])
            | (w(8) ^ self.0[1])
            | ((w(16) & HDR_MASK_16) ^ self.0[2])
            | ((w(24) & HDR_MASK_24) ^ self.0[3])
            | (w(30) ^ self.0[4])
            | (frame.len().min(54) as u64 ^ self.0[5]);
        d == 0
    }

    /// The header under `m` (its bits outside `m` cleared; the length
    /// word kept).
    #[inline(always)]
    pub fn and(&self, m: &HeaderMask) -> Header {
        let mut h = *self;
        for (w, m) in h.0.iter_mut().zip(m.0) {
            *w &= m;
        }
        h
    }

    /// The IP protocol byte (frame byte 23).
    #[inline(always)]
    pub fn proto(&self) -> u8 {
        self.0[2].to_ne_bytes()[7]
    }

    /// Whether [`extract_fast`] takes a frame with this header.
    #[inline]
    pub fn is_fast(&self) -> bool {
        let b = self.0[1].to_ne_bytes();
        b[4] == 0x08 && b[5] == 0x00 && b[6] == 0x45
    }
}

impl PartialEq for Header {
    /// Branch-free over the words.
    #[inline(always)]
    fn eq(&self, o: &Header) -> bool {
        self.0
            .iter()
            .zip(o.0.iter())
            .fold(0u64, |a, (x, y)| a | (x ^ y))
            == 0
    }
}

impl Eq for Header {}

/// The bits of a [`Header`] (its first five words) that matter to the
/// flows of one snapshot, for frames of one IP protocol: a run of frames
/// whose headers agree under it needs no more. Made from the snapshot's
/// fields in use (the union of its masks, see [`HeaderMask::new`]): two
/// frames that [`extract_fast`] takes, with equal headers under the mask
/// of their protocol, have equal keys under `in_use` and equal meta bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderMask([u64; 5]);

impl HeaderMask {
    /// Every bit [`Header::of`] keeps (the full key).
    pub const ALL: HeaderMask = HeaderMask([!0, !0, HDR_MASK_16, HDR_MASK_24, !0]);

    /// The header bits of frames of IP protocol `proto` that the key bits
    /// `in_use` are taken from, and those the meta bits and the shape of
    /// the key depend on whatever `in_use` is: the EtherType and version
    /// byte, the fragment offset, the TTL, the protocol (and the length
    /// word, always compared).
    pub fn new(in_use: &CKey, proto: u8) -> HeaderMask {
        let u = &in_use.0;
        let mut b = [0u8; 38];
        b[0..6].copy_from_slice(&(u[1] << 16).to_be_bytes()[..6]);
        b[6..12].copy_from_slice(&(u[2] << 16).to_be_bytes()[..6]);
        b[12..15].fill(0xff);
        b[15] = u[0] as u8;
        b[20..24].copy_from_slice(&[0x1f, 0xff, 0xff, 0xff]);
        b[26..30].copy_from_slice(&(u[4] as u32).to_be_bytes());
        b[30..34].copy_from_slice(&(u[6] as u32).to_be_bytes());
        // TpSrc at bits 48.., TpDst at 32.. of word 7.
        let tp = (u[7] >> 32) as u32;
        match proto {
            num::TCP | num::UDP | num::SCTP => b[34..38].copy_from_slice(&tp.to_be_bytes()),
            // The type (in TpSrc) and the code (in TpDst), a byte each.
            num::ICMP | num::ICMP6 => {
                b[34] = (tp >> 16) as u8;
                b[35] = tp as u8;
            }
            _ => {}
        }
        let w = |o: usize| {
            let mut a = [0u8; 8];
            a.copy_from_slice(&b[o..o + 8]);
            u64::from_ne_bytes(a)
        };
        HeaderMask([w(0), w(8), w(16), w(24), w(30)])
    }
}

/// A [`Header`] made ready ([`Header::for_run`]) to be compared with many
/// frames: the length rule as one range check, the bytes as two 16-byte
/// vector compares and one word compare (SSE2, part of every x86_64; word
/// compares elsewhere).
#[derive(Clone, Copy, Debug)]
pub struct RunHeader {
    /// Under `m`.
    h: Header,
    m: HeaderMask,
    /// Lengths `lo..=lo + span` have the header's length word; `lo` is at
    /// least 38 and `lo + span` does not wrap.
    lo: usize,
    span: usize,
    #[cfg(target_arch = "x86_64")]
    v: RunVec,
}

/// The header's bytes 0..32 (masked) and the mask of each half, as
/// vectors.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, Debug)]
struct RunVec {
    a: std::arch::x86_64::__m128i,
    b: std::arch::x86_64::__m128i,
    ma: std::arch::x86_64::__m128i,
    mb: std::arch::x86_64::__m128i,
}

impl Header {
    /// This header, ready to be compared with the frames of a run.
    #[inline]
    pub fn for_run(&self) -> RunHeader {
        self.for_run_under(&HeaderMask::ALL)
    }

    /// This header under `m`, ready to be compared with the frames of a
    /// run under `m`: [`RunHeader::matches`] is then
    /// `Header::of(frame).map(|h| h.and(m)) == Some(self.and(m))`.
    #[inline]
    pub fn for_run_under(&self, m: &HeaderMask) -> RunHeader {
        let me = self.and(m);
        // Frames of at least 54 bytes all have the length word 54; shorter
        // ones (at least 38: `of`) only their own length.
        let len = self.0[5] as usize;
        let (lo, span) = if len >= 54 {
            (54, usize::MAX - 54)
        } else if len >= 38 {
            (len, 0)
        } else {
            // No frame has this header (no slice is usize::MAX long).
            (usize::MAX, 0)
        };
        RunHeader {
            h: me,
            m: *m,
            lo,
            span,
            #[cfg(target_arch = "x86_64")]
            v: {
                use std::arch::x86_64::_mm_set_epi64x;
                let w = |i: usize| me.0[i] as i64;
                let mw = |i: usize| m.0[i] as i64;
                // SAFETY: SSE2 is part of x86_64; no memory is touched.
                unsafe {
                    RunVec {
                        a: _mm_set_epi64x(w(1), w(0)),
                        b: _mm_set_epi64x(w(3), w(2)),
                        ma: _mm_set_epi64x(mw(1), mw(0)),
                        mb: _mm_set_epi64x(mw(3), mw(2)),
                    }
                }
            },
        }
    }
}

impl RunHeader {
    /// Whether frames of `len` bytes can have this header (its length
    /// word). True only for lengths of at least 38.
    #[inline(always)]
    pub fn len_ok(&self, len: usize) -> bool {
        let ok = len.wrapping_sub(self.lo) <= self.span;
        if ok && len < 38 {
            // SAFETY: lo >= 38 and lo + span cannot wrap (`for_run`), so
            // `ok` implies len >= 38. (Tells the optimiser so.)
            unsafe { std::hint::unreachable_unchecked() }
        }
        ok
    }

    /// Same as [`Header::matches`].
    #[inline(always)]
    pub fn matches(&self, frame: &[u8]) -> bool {
        if !self.len_ok(frame.len()) {
            return false;
        }
        // Here frame.len() >= lo >= 38 (for_run).
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::*;
            let p = frame.as_ptr();
            // SAFETY: SSE2 is part of x86_64; the loads read bytes 0..16,
            // 16..32 and 30..38 of the frame, which has at least 38.
            unsafe {
                // Bytes equal under the mask: all ones.
                let x = _mm_and_si128(_mm_loadu_si128(p.cast()), self.v.ma);
                let y = _mm_and_si128(_mm_loadu_si128(p.add(16).cast()), self.v.mb);
                let eq = _mm_and_si128(_mm_cmpeq_epi8(x, self.v.a), _mm_cmpeq_epi8(y, self.v.b));
                _mm_movemask_epi8(eq) == 0xffff
                    && std::ptr::read_unaligned(p.add(30).cast::<u64>()) & self.m.0[4]
                        == self.h.0[4]
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            let Some(Ok::<&[u8; 38], _>(b)) = frame.get(..38).map(TryInto::try_into) else {
                return false;
            };
            let w = |o: usize| {
                let mut a = [0u8; 8];
                a.copy_from_slice(&b[o..o + 8]);
                u64::from_ne_bytes(a)
            };
            let (h, m) = (&self.h.0, &self.m.0);
            let d = ((w(0) & m[0]) ^ h[0])
                | ((w(8) & m[1]) ^ h[1])
                | ((w(16) & m[2]) ^ h[2])
                | ((w(24) & m[3]) ^ h[3])
                | ((w(30) & m[4]) ^ h[4]);
            d == 0
        }
    }
}

/// Any frame (the reference for [`extract_fast`]).
#[inline]
pub fn extract_general(frame: &[u8], in_port: u16) -> Key {
    extract_general_meta(frame, in_port).0
}

/// [`extract_general`] with the frame's [`meta`] bits.
pub fn extract_general_meta(frame: &[u8], in_port: u16) -> (Key, u32) {
    let mut k = [0u64; WORDS];
    k[0] = (in_port as u64) << 48;
    k[1] = mac(frame, 0);
    k[2] = mac(frame, 6);
    let tags = match wire::ethernet::parse_tags(frame) {
        Ok(t) => t,
        Err(_) => return (Words(k), 0),
    };
    let tci = if tags.count > 0 {
        (tags.tags[0].tci() & 0xefff) | 0x1000
    } else {
        0
    };
    let et = tags.ethertype;
    k[0] |= ((et as u64) << 32) | ((tci as u64) << 16);
    let l3 = tags.l3_offset;
    let mut m = 0u32;
    let (proto, l4) = match et {
        num::IPV4 => {
            let (Some(&vihl), Some(&tos)) = (frame.get(l3), frame.get(l3 + 1)) else {
                return (Words(k), m);
            };
            if vihl >> 4 != 4 || frame.len() < l3 + 20 {
                return (Words(k), m);
            }
            m = frame[l3 + 8] as u32 | meta::L3;
            let proto = frame[l3 + 9];
            k[0] |= ((proto as u64) << 8) | tos as u64;
            k[4] = be32(frame, l3 + 12).unwrap_or(0) as u64;
            k[6] = be32(frame, l3 + 16).unwrap_or(0) as u64;
            let frag = be16(frame, l3 + 6).unwrap_or(0) & 0x1fff;
            if frag != 0 {
                return (Words(k), m);
            }
            (proto, l3 + ((vihl & 0x0f) as usize) * 4)
        }
        num::IPV6 => {
            if frame.len() < l3 + 40 || frame[l3] >> 4 != 6 {
                return (Words(k), m);
            }
            m = frame[l3 + 7] as u32 | meta::L3;
            let tc = (be16(frame, l3).unwrap_or(0) >> 4) as u8;
            let proto = frame[l3 + 6];
            k[0] |= ((proto as u64) << 8) | tc as u64;
            k[3] = be64(frame, l3 + 8).unwrap_or(0);
            k[4] = be64(frame, l3 + 16).unwrap_or(0);
            k[5] = be64(frame, l3 + 24).unwrap_or(0);
            k[6] = be64(frame, l3 + 32).unwrap_or(0);
            k[7] = (be32(frame, l3).unwrap_or(0) & 0xf_ffff) as u64;
            (proto, l3 + 40)
        }
        num::ARP => {
            if frame.len() < l3 + 28 {
                return (Words(k), m);
            }
            let op = be16(frame, l3 + 6).unwrap_or(0);
            k[0] |= ((op & 0xff) as u64) << 8;
            k[3] = mac(frame, l3 + 8);
            k[4] = be32(frame, l3 + 14).unwrap_or(0) as u64;
            k[5] = mac(frame, l3 + 18);
            k[6] = be32(frame, l3 + 24).unwrap_or(0) as u64;
            k[7] = (op as u64) << 16;
            return (Words(k), meta::L3);
        }
        num::MPLS | num::MPLS_MC => {
            let Some(lse) = be32(frame, l3) else {
                return (Words(k), m);
            };
            k[7] = (lse >> 8) as u64;
            return (Words(k), (lse & 0xff) | meta::L3 | meta::MPLS);
        }
        _ => return (Words(k), m),
    };
    if frame.len() < l4 + l4_header_len(proto) {
        return (Words(k), m);
    }
    match proto {
        num::TCP | num::UDP | num::SCTP => {
            if let (Some(s), Some(d)) = (be16(frame, l4), be16(frame, l4 + 2)) {
                k[7] |= ((s as u64) << 48) | ((d as u64) << 32);
                m |= meta::L4;
            }
        }
        num::ICMP | num::ICMP6 => {
            if let (Some(&t), Some(&c)) = (frame.get(l4), frame.get(l4 + 1)) {
                k[7] |= ((t as u64) << 48) | ((c as u64) << 32);
                m |= meta::L4;
                if et == num::IPV6 && proto == num::ICMP6 {
                    m |= nd(frame, l4, t, &mut k);
                }
            }
        }
        _ => {}
    }
    (Words(k), m)
}

/// An IPv6 neighbour solicitation or advertisement whose ICMPv6 header is
/// at `l4` (type `t`): its target into the key's words 10 and 11, the
/// first link-layer address option of its kind (source in a solicitation,
/// target in an advertisement) into word 12; [`meta::ND`], or 0 for
/// another message or one cut short before the target.
fn nd(frame: &[u8], l4: usize, t: u8, k: &mut [u64; WORDS]) -> u32 {
    if t != num::ND_NS && t != num::ND_NA {
        return 0;
    }
    let (Some(hi), Some(lo)) = (be64(frame, l4 + 8), be64(frame, l4 + 16)) else {
        return 0;
    };
    k[10] = hi;
    k[11] = lo;
    let want = if t == num::ND_NS { 1 } else { 2 };
    let mut off = l4 + 24;
    // Options: type, length in units of 8 bytes (0 is invalid), value.
    while let (Some(&ot), Some(&ol)) = (frame.get(off), frame.get(off + 1)) {
        let len = ol as usize * 8;
        if len == 0 || off + len > frame.len() {
            break;
        }
        if ot == want && len == 8 {
            k[12] = mac(frame, off + 2);
            break;
        }
        off += len;
    }
    meta::ND
}

/// Hasher for keys: [`Key`]'s `Hash` hands it one pre-mixed word, which
/// `finish` runs through murmur3's finaliser (the hash table takes its
/// bucket from the low bits and its tag from the high bits; a multiply
/// alone leaves low bits of high-placed fields at zero). SipHash would cost
/// more than the rest of a lookup.
#[derive(Default, Clone, Copy)]
pub struct KeyHasher(u64);

impl Hasher for KeyHasher {
    #[inline]
    fn finish(&self) -> u64 {
        let mut h = self.0;
        h ^= h >> 33;
        h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
        h ^= h >> 33;
        h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        h ^ (h >> 33)
    }
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(b as u64);
        }
    }
    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.write_u64(i as u64);
    }
}

/// `BuildHasher` for [`KeyHasher`].
pub type BuildKeyHasher = BuildHasherDefault<KeyHasher>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::hash::BuildHasher;

    /// An L4 header cut short (TCP under 20 bytes, UDP under 8, SCTP under
    /// 12, ICMP under 8) leaves ports / type and code zero, as in OVS: the
    /// differential test found turnoutd reading the ports of a 6-byte TCP
    /// header and the type of a 2-byte ICMP header (docs/flows.md).
    #[test]
    fn cut_l4_headers_leave_ports_zero_like_ovs() {
        for (proto, full) in [
            (num::TCP, 20usize),
            (num::UDP, 8),
            (num::SCTP, 12),
            (num::ICMP, 8),
        ] {
            for vlan in [false, true] {
                let mut f = vec![0u8; 12];
                if vlan {
                    f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
                }
                f.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 0, 0, 0, 0, 0, 64, proto]);
                f.extend_from_slice(&[0; 10]);
                f.extend_from_slice(&[0x08, 0x01, 0x00, 0x35]);
                let l4 = f.len() - 4;
                f.resize(l4 + full, 0);
                for len in [l4 + 2, l4 + 4, l4 + full - 1, l4 + full] {
                    let k = extract(&f[..len], 3);
                    let want = if len == l4 + full {
                        if proto == num::ICMP {
                            (0x08, 0x01)
                        } else {
                            (0x0801, 0x35)
                        }
                    } else {
                        (0, 0)
                    };
                    assert_eq!(
                        (k.get(Field::TpSrc), k.get(Field::TpDst)),
                        want,
                        "proto {proto} vlan {vlan} l4 bytes {}",
                        len - l4
                    );
                    assert_eq!(k, extract_general(&f[..len], 3));
                }
            }
        }
    }

    /// Keys that differ only in high bits of one word (a TCP port sits at
    /// bit 48) must spread over the hash table's buckets (low bits) and
    /// tags (top 7 bits): a plain multiply chain put 10 000 such flows in
    /// one bucket (1 µs per lookup).
    #[test]
    fn keys_differing_in_high_bits_spread_over_buckets_and_tags() {
        let b = BuildKeyHasher::default();
        for f in [
            Field::TpSrc,
            Field::InPort,
            Field::DlSrc,
            Field::Ip6Dst,
            Field::NwTos,
        ] {
            let mut low = std::collections::HashSet::new();
            let mut top = std::collections::HashSet::new();
            for i in 0..4096u128 {
                let mut k = Key::default();
                let v = if f == Field::NwTos {
                    i & 0xff
                } else {
                    i << (f.bits() - 12)
                };
                k.set(f, v);
                let h = b.hash_one(k);
                low.insert(h & 0xfff);
                top.insert(h >> 57);
            }
            let distinct = if f == Field::NwTos { 256 } else { 4096 };
            // Random hashing of n keys into n buckets fills about 63% of them.
            assert!(
                low.len() * 100 >= distinct * 55,
                "{f:?}: {} buckets",
                low.len()
            );
            assert!(top.len() >= 100, "{f:?}: {} tags", top.len());
        }
    }
}
