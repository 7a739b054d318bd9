//! Zero-copy header views for the frames turnout switches and generates:
//! Ethernet (with 802.1Q / 802.1ad tags), ARP, IPv4, IPv6, UDP, TCP and the
//! turnout-gen payload header, VXLAN and Geneve, plus builders that write a complete
//! Ethernet[/VLAN]/IP/UDP header into a buffer.
//!
//! The design follows smoltcp's `wire` module: each header is a view
//! `Packet<T: AsRef<[u8]>>` over a byte buffer, with a private `field`
//! module of byte ranges. `new_unchecked` wraps a buffer as is;
//! `new_checked` first verifies that every getter is in bounds, so untrusted
//! input never panics. Getters need `AsRef<[u8]>`, setters `AsMut<[u8]>`.
//!
//! Invariants: no `unsafe`, no allocation, no I/O; every function is safe to
//! call on arbitrary bytes once the view was built with `new_checked`
//! (getters of a `new_unchecked` view may panic on a short buffer).
//! Multi-byte fields are big-endian (network order) on the wire.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod arp;
pub mod build;
pub mod checksum;
pub mod ethernet;
pub mod flow;
pub mod geneve;
pub mod ipv4;
pub mod ipv6;
pub mod mac;
pub mod payload;
pub mod tcp;
pub mod udp;
pub mod vxlan;

pub use ethernet::{EtherType, Tags};
pub use flow::L4Tuple;
pub use mac::MacAddr;

/// Why a buffer could not be viewed as (or built into) a header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the header (or the length it announces).
    Truncated,
    /// A field holds a value the view cannot accept (version, length...).
    Malformed,
    /// A VLAN tag stack the parser refuses (S-tag inside a tag, a third tag).
    BadTag,
    /// The requested frame is smaller than the headers it must hold, or
    /// larger than the buffer it is built in.
    BadSize,
}

impl core::fmt::Display for Error {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            Error::Truncated => "truncated header",
            Error::Malformed => "malformed header",
            Error::BadTag => "bad vlan tag stack",
            Error::BadSize => "frame size does not fit the headers or the buffer",
        })
    }
}

impl std::error::Error for Error {}

/// Result of parsing or building a header.
pub type Result<T> = core::result::Result<T, Error>;

/// Reads a big-endian u16 at `at` (caller checked bounds).
#[inline]
pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

/// Reads a big-endian u32 at `at` (caller checked bounds).
#[inline]
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// Writes a big-endian u16 at `at`.
#[inline]
pub(crate) fn put16(b: &mut [u8], at: usize, v: u16) {
    b[at..at + 2].copy_from_slice(&v.to_be_bytes());
}

/// Writes a big-endian u32 at `at`.
#[inline]
pub(crate) fn put32(b: &mut [u8], at: usize, v: u32) {
    b[at..at + 4].copy_from_slice(&v.to_be_bytes());
}
