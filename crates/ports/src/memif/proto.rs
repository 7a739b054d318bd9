//! memif wire formats: control messages, ring header and descriptor layouts,
//! and the pure checks applied to everything a peer sends or writes.
//!
//! Layouts follow memif version 2.0 as specified by DPDK's
//! `doc/guides/nics/memif.rst` and VPP's `memif.h`: every control message is
//! exactly 128 bytes (a little-endian `u16` type followed by a packed body),
//! a ring is a 128-byte header (cookie, flags, head on the first cache line,
//! tail on the second) followed by `2^log2` 16-byte descriptors.
//!
//! Nothing here touches memory or file descriptors; `sys.rs` does, and this
//! module decides what is acceptable.

#![forbid(unsafe_code)]
#![allow(clippy::manual_is_multiple_of)]

use std::fmt;

/// Value of every ring's `cookie` field.
pub const COOKIE: u32 = 0x3E31F20;
/// Protocol version spoken (2.0), `major << 8 | minor`.
pub const VERSION: u16 = 0x0200;
/// Size of every control message on the socket.
pub const MSG_SIZE: usize = 128;
/// Size of name fields (application and interface names).
pub const NAME_SZ: usize = 32;
/// Size of the interface secret field.
pub const SECRET_SZ: usize = 24;
/// Size of the disconnect reason field.
pub const REASON_SZ: usize = 96;

/// Size of a ring header; descriptors start right after it.
pub const RING_HDR_B: usize = 128;
/// Size of one descriptor.
pub const DESC_B: usize = 16;
/// Offset of the ring cookie (`u32`).
pub const RING_COOKIE_OFF: usize = 0;
/// Offset of the ring flags (`u16`), written by the ring's receiver.
pub const RING_FLAGS_OFF: usize = 4;
/// Offset of the ring head (`u16`).
pub const RING_HEAD_OFF: usize = 6;
/// Offset of the ring tail (`u16`), on its own cache line.
pub const RING_TAIL_OFF: usize = 64;
/// Ring flag: the receiver polls and does not want interrupts.
pub const RING_FLAG_MASK_INT: u16 = 1;
/// Descriptor flag: the frame continues in the next descriptor.
pub const DESC_FLAG_NEXT: u16 = 1;
/// `AddRing::flags` bit: the ring carries client → server traffic.
pub const ADD_RING_FLAG_C2S: u16 = 1;
/// Smallest ring size accepted (log2).
pub const MIN_LOG2_RING: u8 = 1;
/// Largest ring size accepted (log2): 16384 descriptors.
pub const MAX_LOG2_RING: u8 = 14;
/// Interface mode: Ethernet (the only one supported).
pub const MODE_ETHERNET: u8 = 0;

/// Message type codes.
pub mod msg_type {
    /// Acknowledges init, add region and add ring.
    pub const ACK: u16 = 1;
    /// Server → client, first message: the server's limits.
    pub const HELLO: u16 = 2;
    /// Client → server: interface id, secret, mode.
    pub const INIT: u16 = 3;
    /// Client → server: a shared memory region (fd attached).
    pub const ADD_REGION: u16 = 4;
    /// Client → server: a ring (interrupt eventfd attached).
    pub const ADD_RING: u16 = 5;
    /// Client → server: setup done.
    pub const CONNECT: u16 = 6;
    /// Server → client: setup accepted, traffic may flow.
    pub const CONNECTED: u16 = 7;
    /// Either way: the connection ends, with a reason.
    pub const DISCONNECT: u16 = 8;
}

/// Bytes spanned by a ring of `2^log2` descriptors, header included.
#[inline]
pub fn ring_span_b(log2: u8) -> usize {
    RING_HDR_B + (DESC_B << log2)
}

/// A fixed-size, NUL-padded byte string field; decodes lossily up to the
/// first NUL.
fn put_str(dst: &mut [u8], s: &[u8]) {
    let n = s.len().min(dst.len().saturating_sub(1));
    dst[..n].copy_from_slice(&s[..n]);
    for b in &mut dst[n..] {
        *b = 0;
    }
}

fn get_str(src: &[u8]) -> String {
    let end = src.iter().position(|&b| b == 0).unwrap_or(src.len());
    String::from_utf8_lossy(&src[..end]).into_owned()
}

fn u16_at(b: &[u8], off: usize) -> u16 {
    u16::from_le_bytes([b[off], b[off + 1]])
}
fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes([b[off], b[off + 1], b[off + 2], b[off + 3]])
}
fn u64_at(b: &[u8], off: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[off..off + 8]);
    u64::from_le_bytes(a)
}

/// Server limits, sent first on every new control connection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    /// Application name of the server.
    pub name: String,
    /// Lowest protocol version supported.
    pub min_version: u16,
    /// Highest protocol version supported.
    pub max_version: u16,
    /// Highest region index accepted.
    pub max_region: u16,
    /// Highest server → client ring index accepted.
    pub max_s2c_ring: u16,
    /// Highest client → server ring index accepted.
    pub max_c2s_ring: u16,
    /// Largest ring accepted (log2).
    pub max_log2_ring_size: u8,
}

/// The client names the interface it wants.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Init {
    /// Protocol version the client speaks.
    pub version: u16,
    /// Interface id on the socket.
    pub id: u32,
    /// Interface mode (0 = Ethernet).
    pub mode: u8,
    /// Secret, NUL-padded.
    pub secret: [u8; SECRET_SZ],
    /// Application name of the client.
    pub name: String,
}

/// A region announcement; the memfd travels as `SCM_RIGHTS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddRegion {
    /// Region index (must be the next free one).
    pub index: u16,
    /// Region size in bytes.
    pub size: u64,
}

/// A ring announcement; the interrupt eventfd travels as `SCM_RIGHTS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AddRing {
    /// `ADD_RING_FLAG_C2S` or 0 (server → client).
    pub flags: u16,
    /// Ring (queue) index in its direction.
    pub index: u16,
    /// Region holding the ring.
    pub region: u16,
    /// Offset of the ring header in the region.
    pub offset: u32,
    /// Ring size (log2).
    pub log2_ring_size: u8,
    /// Private header size (unsupported: must be 0).
    pub private_hdr_size: u16,
}

impl AddRing {
    /// True for a client → server ring.
    pub fn is_c2s(&self) -> bool {
        self.flags & ADD_RING_FLAG_C2S != 0
    }
}

/// A disconnect notice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Disconnect {
    /// Error code (0 in practice).
    pub code: u32,
    /// Human-readable reason.
    pub reason: String,
}

/// A decoded control message.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Msg {
    /// Acknowledgement.
    Ack,
    /// Server limits.
    Hello(Hello),
    /// Interface selection.
    Init(Init),
    /// Region announcement.
    AddRegion(AddRegion),
    /// Ring announcement.
    AddRing(AddRing),
    /// Client setup complete; carries the client interface name.
    Connect(String),
    /// Server accepted; carries the server interface name.
    Connected(String),
    /// Connection ends.
    Disconnect(Disconnect),
}

/// Why a control message could not be decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecodeError {
    /// Not exactly `MSG_SIZE` bytes.
    Size(usize),
    /// Unknown (or `NONE`) type code.
    Type(u16),
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DecodeError::Size(n) => write!(f, "invalid message size {n} (expected {MSG_SIZE})"),
            DecodeError::Type(t) => write!(f, "unknown message type {t}"),
        }
    }
}

impl Msg {
    /// Short name of the message type, for errors and logs.
    pub fn name(&self) -> &'static str {
        match self {
            Msg::Ack => "ack",
            Msg::Hello(_) => "hello",
            Msg::Init(_) => "init",
            Msg::AddRegion(_) => "add_region",
            Msg::AddRing(_) => "add_ring",
            Msg::Connect(_) => "connect",
            Msg::Connected(_) => "connected",
            Msg::Disconnect(_) => "disconnect",
        }
    }

    /// The 128-byte wire form.
    pub fn encode(&self) -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        let (t, body) = b.split_at_mut(2);
        let code = match self {
            Msg::Ack => msg_type::ACK,
            Msg::Hello(h) => {
                put_str(&mut body[0..32], h.name.as_bytes());
                body[32..34].copy_from_slice(&h.min_version.to_le_bytes());
                body[34..36].copy_from_slice(&h.max_version.to_le_bytes());
                body[36..38].copy_from_slice(&h.max_region.to_le_bytes());
                body[38..40].copy_from_slice(&h.max_s2c_ring.to_le_bytes());
                body[40..42].copy_from_slice(&h.max_c2s_ring.to_le_bytes());
                body[42] = h.max_log2_ring_size;
                msg_type::HELLO
            }
            Msg::Init(i) => {
                body[0..2].copy_from_slice(&i.version.to_le_bytes());
                body[2..6].copy_from_slice(&i.id.to_le_bytes());
                body[6] = i.mode;
                body[7..31].copy_from_slice(&i.secret);
                put_str(&mut body[31..63], i.name.as_bytes());
                msg_type::INIT
            }
            Msg::AddRegion(r) => {
                body[0..2].copy_from_slice(&r.index.to_le_bytes());
                body[2..10].copy_from_slice(&r.size.to_le_bytes());
                msg_type::ADD_REGION
            }
            Msg::AddRing(r) => {
                body[0..2].copy_from_slice(&r.flags.to_le_bytes());
                body[2..4].copy_from_slice(&r.index.to_le_bytes());
                body[4..6].copy_from_slice(&r.region.to_le_bytes());
                body[6..10].copy_from_slice(&r.offset.to_le_bytes());
                body[10] = r.log2_ring_size;
                body[11..13].copy_from_slice(&r.private_hdr_size.to_le_bytes());
                msg_type::ADD_RING
            }
            Msg::Connect(name) => {
                put_str(&mut body[0..32], name.as_bytes());
                msg_type::CONNECT
            }
            Msg::Connected(name) => {
                put_str(&mut body[0..32], name.as_bytes());
                msg_type::CONNECTED
            }
            Msg::Disconnect(d) => {
                body[0..4].copy_from_slice(&d.code.to_le_bytes());
                put_str(&mut body[4..100], d.reason.as_bytes());
                msg_type::DISCONNECT
            }
        };
        t.copy_from_slice(&code.to_le_bytes());
        b
    }

    /// Decodes one received message (`buf` is what `recvmsg` returned).
    pub fn decode(buf: &[u8]) -> Result<Msg, DecodeError> {
        if buf.len() != MSG_SIZE {
            return Err(DecodeError::Size(buf.len()));
        }
        let code = u16_at(buf, 0);
        let body = &buf[2..];
        Ok(match code {
            msg_type::ACK => Msg::Ack,
            msg_type::HELLO => Msg::Hello(Hello {
                name: get_str(&body[0..32]),
                min_version: u16_at(body, 32),
                max_version: u16_at(body, 34),
                max_region: u16_at(body, 36),
                max_s2c_ring: u16_at(body, 38),
                max_c2s_ring: u16_at(body, 40),
                max_log2_ring_size: body[42],
            }),
            msg_type::INIT => {
                let mut secret = [0u8; SECRET_SZ];
                secret.copy_from_slice(&body[7..31]);
                Msg::Init(Init {
                    version: u16_at(body, 0),
                    id: u32_at(body, 2),
                    mode: body[6],
                    secret,
                    name: get_str(&body[31..63]),
                })
            }
            msg_type::ADD_REGION => Msg::AddRegion(AddRegion {
                index: u16_at(body, 0),
                size: u64_at(body, 2),
            }),
            msg_type::ADD_RING => Msg::AddRing(AddRing {
                flags: u16_at(body, 0),
                index: u16_at(body, 2),
                region: u16_at(body, 4),
                offset: u32_at(body, 6),
                log2_ring_size: body[10],
                private_hdr_size: u16_at(body, 11),
            }),
            msg_type::CONNECT => Msg::Connect(get_str(&body[0..32])),
            msg_type::CONNECTED => Msg::Connected(get_str(&body[0..32])),
            msg_type::DISCONNECT => Msg::Disconnect(Disconnect {
                code: u32_at(body, 0),
                reason: get_str(&body[4..100]),
            }),
            other => return Err(DecodeError::Type(other)),
        })
    }
}

/// Encodes a secret string into its NUL-padded wire field. `None` if it does
/// not fit (at most `SECRET_SZ - 1` bytes, so the field stays a C string).
pub fn secret_field(secret: &str) -> Option<[u8; SECRET_SZ]> {
    let b = secret.as_bytes();
    if b.len() >= SECRET_SZ || b.contains(&0) {
        return None;
    }
    let mut f = [0u8; SECRET_SZ];
    f[..b.len()].copy_from_slice(b);
    Some(f)
}

/// Compares the configured secret with the one received, like DPDK and VPP
/// do (bytes up to the first NUL).
pub fn secret_matches(expected: &[u8; SECRET_SZ], got: &[u8; SECRET_SZ]) -> bool {
    let end = |s: &[u8; SECRET_SZ]| s.iter().position(|&b| b == 0).unwrap_or(SECRET_SZ);
    expected[..end(expected)] == got[..end(got)]
}

/// A buffer descriptor.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// `DESC_FLAG_NEXT` or 0.
    pub flags: u16,
    /// Region holding the buffer.
    pub region: u16,
    /// Bytes of data (or, for an offered empty buffer, its capacity).
    pub length: u32,
    /// Buffer offset in the region.
    pub offset: u32,
    /// Opaque metadata (unused).
    pub metadata: u32,
}

impl Desc {
    /// Decodes the 16-byte wire form.
    #[inline]
    pub fn from_bytes(b: [u8; DESC_B]) -> Desc {
        Desc {
            flags: u16::from_le_bytes([b[0], b[1]]),
            region: u16::from_le_bytes([b[2], b[3]]),
            length: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            offset: u32::from_le_bytes([b[8], b[9], b[10], b[11]]),
            metadata: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    /// The 16-byte wire form.
    #[inline]
    pub fn to_bytes(&self) -> [u8; DESC_B] {
        let mut b = [0u8; DESC_B];
        b[0..2].copy_from_slice(&self.flags.to_le_bytes());
        b[2..4].copy_from_slice(&self.region.to_le_bytes());
        b[4..8].copy_from_slice(&self.length.to_le_bytes());
        b[8..12].copy_from_slice(&self.offset.to_le_bytes());
        b[12..16].copy_from_slice(&self.metadata.to_le_bytes());
        b
    }

    /// Decodes the first three 4-byte words of the wire form (flags and
    /// region, length, offset: what the data path reads; `metadata` is 0).
    #[inline]
    pub fn from_words(w: [u32; 3]) -> Desc {
        Desc {
            flags: w[0] as u16,
            region: (w[0] >> 16) as u16,
            length: w[1],
            offset: w[2],
            metadata: 0,
        }
    }

    /// The first three 4-byte words of the wire form (`metadata`, the
    /// fourth, is not written by the data path: nobody reads it).
    #[inline]
    pub fn to_words(&self) -> [u32; 3] {
        [
            self.flags as u32 | (self.region as u32) << 16,
            self.length,
            self.offset,
        ]
    }

    /// True if the frame continues in the next descriptor.
    #[inline]
    pub fn has_next(&self) -> bool {
        self.flags & DESC_FLAG_NEXT != 0
    }
}

/// A peer broke the shared-memory contract. Each kind is a counter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Violation {
    /// Descriptor names a region that does not exist.
    BadRegion = 1,
    /// Descriptor's offset + length lies outside its region.
    OutOfRegion,
    /// Descriptor flags other than `NEXT`.
    BadFlags,
    /// A frame chains more descriptors than allowed, or a chain can never end.
    ChainTooLong,
    /// Producer index further ahead of the consumer than the ring size.
    BadRingIndex,
    /// A ring's cookie was overwritten.
    BadCookie,
    /// An offered (server → client) buffer is smaller than the port's buffer size.
    SmallBuffer,
}

impl Violation {
    /// Number of kinds.
    pub const COUNT: usize = 7;
    /// Every kind, in code order.
    pub const ALL: [Violation; Self::COUNT] = [
        Violation::BadRegion,
        Violation::OutOfRegion,
        Violation::BadFlags,
        Violation::ChainTooLong,
        Violation::BadRingIndex,
        Violation::BadCookie,
        Violation::SmallBuffer,
    ];

    /// Counter name.
    pub fn name(self) -> &'static str {
        match self {
            Violation::BadRegion => "violation_bad_region",
            Violation::OutOfRegion => "violation_out_of_region",
            Violation::BadFlags => "violation_bad_flags",
            Violation::ChainTooLong => "violation_chain_too_long",
            Violation::BadRingIndex => "violation_bad_ring_index",
            Violation::BadCookie => "violation_bad_cookie",
            Violation::SmallBuffer => "violation_small_buffer",
        }
    }

    /// Disconnect reason sent to the peer.
    pub fn reason(self) -> &'static str {
        match self {
            Violation::BadRegion => "descriptor region index out of range",
            Violation::OutOfRegion => "descriptor buffer outside its region",
            Violation::BadFlags => "unknown descriptor flags",
            Violation::ChainTooLong => "descriptor chain too long",
            Violation::BadRingIndex => "ring head/tail distance exceeds ring size",
            Violation::BadCookie => "ring cookie overwritten",
            Violation::SmallBuffer => "offered buffer smaller than the buffer size",
        }
    }

    /// Code stored in an atomic (never 0).
    pub fn code(self) -> u8 {
        self as u8
    }

    /// Inverse of `code`.
    pub fn from_code(c: u8) -> Option<Violation> {
        Self::ALL.get((c as usize).wrapping_sub(1)).copied()
    }

    /// Index into counter arrays.
    pub fn index(self) -> usize {
        self as usize - 1
    }
}

/// Checks a descriptor against the mapped region sizes and returns
/// `(region, offset, length)` as usable indexes.
#[inline]
pub fn check_desc(d: &Desc, region_lens: &[usize]) -> Result<(usize, usize, usize), Violation> {
    if d.flags & !DESC_FLAG_NEXT != 0 {
        return Err(Violation::BadFlags);
    }
    let r = d.region as usize;
    let Some(&rlen) = region_lens.get(r) else {
        return Err(Violation::BadRegion);
    };
    let off = d.offset as usize;
    let len = d.length as usize;
    // usize is 64-bit: u32 + u32 cannot overflow.
    if off + len > rlen {
        return Err(Violation::OutOfRegion);
    }
    Ok((r, off, len))
}

/// Checks a producer index against the consumer's: how many slots are
/// filled, or a violation if the distance exceeds the ring size.
#[inline]
pub fn ring_fill(prod: u16, cons: u16, size: u32) -> Result<u32, Violation> {
    let n = prod.wrapping_sub(cons) as u32;
    if n > size {
        Err(Violation::BadRingIndex)
    } else {
        Ok(n)
    }
}

/// Checks a ring placement announced by `AddRing` against its region.
pub fn check_ring_placement(r: &AddRing, region_len: u64) -> Result<(), String> {
    if !(MIN_LOG2_RING..=MAX_LOG2_RING).contains(&r.log2_ring_size) {
        return Err(format!(
            "ring size 2^{} outside 2^{}..2^{}",
            r.log2_ring_size, MIN_LOG2_RING, MAX_LOG2_RING
        ));
    }
    if r.private_hdr_size != 0 {
        return Err("private ring headers are not supported".into());
    }
    if r.offset % 4 != 0 {
        return Err(format!("ring offset {} is not 4-byte aligned", r.offset));
    }
    let end = r.offset as u64 + ring_span_b(r.log2_ring_size) as u64;
    if end > region_len {
        return Err(format!(
            "ring at offset {} with {} descriptors ends at {end}, past region {} of {} bytes",
            r.offset,
            1u32 << r.log2_ring_size,
            r.region,
            region_len
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// DPDK's hello as sent by 22.11: name "DPDK 22.11.11", version 2.0,
    /// max_region 255, 255 rings each way, 2^14.
    fn hello_fixture() -> [u8; MSG_SIZE] {
        let mut b = [0u8; MSG_SIZE];
        b[0] = 2; // type HELLO
        b[2..15].copy_from_slice(b"DPDK 22.11.11");
        b[34] = 0x00;
        b[35] = 0x02; // min_version 0x0200
        b[36] = 0x00;
        b[37] = 0x02; // max_version
        b[38] = 0xff; // max_region 255
        b[40] = 0xff; // max_s2c_ring
        b[42] = 0xff; // max_c2s_ring
        b[44] = 14;
        b
    }

    #[test]
    fn hello_decodes_from_fixture_and_round_trips() {
        let b = hello_fixture();
        let m = Msg::decode(&b).unwrap();
        let want = Hello {
            name: "DPDK 22.11.11".into(),
            min_version: 0x200,
            max_version: 0x200,
            max_region: 255,
            max_s2c_ring: 255,
            max_c2s_ring: 255,
            max_log2_ring_size: 14,
        };
        assert_eq!(m, Msg::Hello(want));
        assert_eq!(m.encode(), b);
    }

    #[test]
    fn init_layout_matches_packed_c_struct() {
        let mut secret = [0u8; SECRET_SZ];
        secret[..3].copy_from_slice(b"abc");
        let m = Msg::Init(Init {
            version: VERSION,
            id: 0x0102_0304,
            mode: 0,
            secret,
            name: "gen".into(),
        });
        let b = m.encode();
        assert_eq!(&b[0..2], &[3, 0]);
        assert_eq!(&b[2..4], &[0x00, 0x02]); // version
        assert_eq!(&b[4..8], &[4, 3, 2, 1]); // id
        assert_eq!(b[8], 0); // mode
        assert_eq!(&b[9..12], b"abc"); // secret at 9
        assert_eq!(&b[33..36], b"gen"); // name at 33
        assert_eq!(Msg::decode(&b).unwrap(), m);
    }

    #[test]
    fn add_region_and_add_ring_layouts() {
        let m = Msg::AddRegion(AddRegion {
            index: 1,
            size: 0x1_0000_0002,
        });
        let b = m.encode();
        assert_eq!(&b[0..12], &[4, 0, 1, 0, 2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(Msg::decode(&b).unwrap(), m);

        let r = AddRing {
            flags: 1,
            index: 2,
            region: 0,
            offset: 0x80,
            log2_ring_size: 10,
            private_hdr_size: 0,
        };
        let b = Msg::AddRing(r).encode();
        assert_eq!(
            &b[0..17],
            &[5, 0, 1, 0, 2, 0, 0, 0, 0x80, 0, 0, 0, 10, 0, 0, 0, 0]
        );
        assert_eq!(Msg::decode(&b).unwrap(), Msg::AddRing(r));
        assert!(r.is_c2s());
    }

    #[test]
    fn disconnect_connect_ack_round_trip_and_truncate() {
        let long = "x".repeat(200);
        let b = Msg::Disconnect(Disconnect {
            code: 7,
            reason: long,
        })
        .encode();
        assert_eq!(&b[0..6], &[8, 0, 7, 0, 0, 0]);
        match Msg::decode(&b).unwrap() {
            Msg::Disconnect(d) => assert_eq!(d.reason.len(), REASON_SZ - 1),
            m => panic!("{m:?}"),
        }
        for m in [
            Msg::Ack,
            Msg::Connect("memif0".into()),
            Msg::Connected("p1".into()),
        ] {
            assert_eq!(Msg::decode(&m.encode()).unwrap(), m);
        }
    }

    #[test]
    fn bad_size_and_unknown_type_are_errors() {
        assert_eq!(Msg::decode(&[0u8; 64]), Err(DecodeError::Size(64)));
        assert_eq!(Msg::decode(&[0u8; 129]), Err(DecodeError::Size(129)));
        let mut b = [0u8; MSG_SIZE];
        assert_eq!(Msg::decode(&b), Err(DecodeError::Type(0)));
        b[0] = 9;
        assert_eq!(Msg::decode(&b), Err(DecodeError::Type(9)));
        b[0] = 0xff;
        b[1] = 0xff;
        assert_eq!(Msg::decode(&b), Err(DecodeError::Type(0xffff)));
    }

    #[test]
    fn desc_layout() {
        let raw = [1, 0, 2, 0, 0x40, 0, 0, 0, 0, 0x10, 0, 0, 0xaa, 0, 0, 0];
        let d = Desc::from_bytes(raw);
        assert_eq!(
            d,
            Desc {
                flags: 1,
                region: 2,
                length: 64,
                offset: 0x1000,
                metadata: 0xaa
            }
        );
        assert!(d.has_next());
        assert_eq!(d.to_bytes(), raw);
        // The data path's words: the same fields from the same bytes.
        let words: [u32; 3] =
            std::array::from_fn(|i| u32::from_le_bytes(raw[4 * i..4 * i + 4].try_into().unwrap()));
        assert_eq!(Desc::from_words(words), Desc { metadata: 0, ..d });
        assert_eq!(d.to_words(), words);
    }

    #[test]
    fn desc_validation() {
        let lens = [4096usize, 1 << 20];
        let ok = Desc {
            flags: 0,
            region: 1,
            length: 2048,
            offset: 4096,
            metadata: 0,
        };
        assert_eq!(check_desc(&ok, &lens), Ok((1, 4096, 2048)));
        // exactly at the end is fine
        let end = Desc {
            region: 0,
            offset: 2048,
            length: 2048,
            ..ok
        };
        assert_eq!(check_desc(&end, &lens), Ok((0, 2048, 2048)));
        let bad_region = Desc { region: 2, ..ok };
        assert_eq!(check_desc(&bad_region, &lens), Err(Violation::BadRegion));
        let past = Desc {
            region: 0,
            offset: 2049,
            ..ok
        };
        assert_eq!(check_desc(&past, &lens), Err(Violation::OutOfRegion));
        let huge = Desc {
            length: u32::MAX,
            offset: u32::MAX,
            ..ok
        };
        assert_eq!(check_desc(&huge, &lens), Err(Violation::OutOfRegion));
        let flags = Desc {
            flags: 0x8001,
            ..ok
        };
        assert_eq!(check_desc(&flags, &lens), Err(Violation::BadFlags));
    }

    #[test]
    fn ring_distance_validation() {
        assert_eq!(ring_fill(10, 5, 8), Ok(5));
        assert_eq!(ring_fill(3, 0xfffe, 8), Ok(5)); // wraps
        assert_eq!(ring_fill(13, 5, 8), Ok(8));
        assert_eq!(ring_fill(14, 5, 8), Err(Violation::BadRingIndex));
        assert_eq!(ring_fill(4, 5, 8), Err(Violation::BadRingIndex)); // behind = huge
    }

    #[test]
    fn ring_placement_validation() {
        let r = AddRing {
            flags: 0,
            index: 0,
            region: 0,
            offset: 0,
            log2_ring_size: 10,
            private_hdr_size: 0,
        };
        let span = ring_span_b(10) as u64;
        assert!(check_ring_placement(&r, span).is_ok());
        assert!(check_ring_placement(&r, span - 1).is_err());
        assert!(check_ring_placement(
            &AddRing {
                log2_ring_size: 0,
                ..r
            },
            1 << 30
        )
        .is_err());
        assert!(check_ring_placement(
            &AddRing {
                log2_ring_size: 15,
                ..r
            },
            1 << 30
        )
        .is_err());
        assert!(check_ring_placement(&AddRing { offset: 2, ..r }, 1 << 30).is_err());
        assert!(check_ring_placement(
            &AddRing {
                offset: u32::MAX - 3,
                ..r
            },
            1 << 32
        )
        .is_err());
        assert!(check_ring_placement(
            &AddRing {
                private_hdr_size: 8,
                ..r
            },
            1 << 30
        )
        .is_err());
    }

    #[test]
    fn secrets() {
        let a = secret_field("s3cret").unwrap();
        let mut b = [0u8; SECRET_SZ];
        b[..6].copy_from_slice(b"s3cret");
        b[7] = b'z'; // junk after the NUL is ignored
        assert!(secret_matches(&a, &b));
        assert!(!secret_matches(&a, &secret_field("s3cre").unwrap()));
        assert!(secret_field(&"x".repeat(24)).is_none());
        assert!(secret_field(&"x".repeat(23)).is_some());
        assert!(secret_matches(&[0; SECRET_SZ], &[0; SECRET_SZ]));
    }

    #[test]
    fn violation_codes_round_trip() {
        for v in Violation::ALL {
            assert_eq!(Violation::from_code(v.code()), Some(v));
            assert_eq!(Violation::ALL[v.index()], v);
        }
        assert_eq!(Violation::from_code(0), None);
        assert_eq!(Violation::from_code(200), None);
    }
}
