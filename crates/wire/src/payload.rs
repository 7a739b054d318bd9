//! The turnout-gen payload header, right after the UDP header of every
//! generated frame (docs/turnout-gen.md): magic "TRNT", stream id (u16),
//! sequence number (u64, per stream, from 0), send timestamp (u64,
//! CLOCK_MONOTONIC ns). All big-endian. 22 bytes, so that a 64 B
//! Ethernet/IPv4/UDP frame (42 B of headers) carries it exactly.

use crate::{be16, be32, put16, put32, Error, Result};

mod field {
    pub const MAGIC: usize = 0;
    pub const STREAM: usize = 4;
    pub const SEQ: usize = 6;
    pub const TIMESTAMP: usize = 14;
}

/// "TRNT".
pub const MAGIC: u32 = 0x5452_4e54;
/// Length of the payload header.
pub const HEADER_LEN: usize = 22;
/// Largest stream id.
pub const MAX_STREAM: u32 = u16::MAX as u32;

/// A view of a turnout-gen payload header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Header<T> {
    /// Wraps `buffer` without checks.
    #[inline]
    pub fn new_unchecked(buffer: T) -> Header<T> {
        Header { buffer }
    }

    /// Wraps `buffer` if it holds 22 bytes (`Truncated`) starting with the
    /// magic (`Malformed`: a foreign frame).
    #[inline]
    pub fn new_checked(buffer: T) -> Result<Header<T>> {
        let h = Self::new_unchecked(buffer);
        if h.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if h.magic() != MAGIC {
            return Err(Error::Malformed);
        }
        Ok(h)
    }

    /// Magic field.
    #[inline]
    pub fn magic(&self) -> u32 {
        be32(self.buffer.as_ref(), field::MAGIC)
    }

    /// Stream id.
    #[inline]
    pub fn stream(&self) -> u32 {
        be16(self.buffer.as_ref(), field::STREAM) as u32
    }

    /// Sequence number.
    #[inline]
    pub fn seq(&self) -> u64 {
        be64(self.buffer.as_ref(), field::SEQ)
    }

    /// Send timestamp, CLOCK_MONOTONIC ns.
    #[inline]
    pub fn timestamp_ns(&self) -> u64 {
        be64(self.buffer.as_ref(), field::TIMESTAMP)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Header<T> {
    /// Writes the magic and the stream id (once per template).
    #[inline]
    pub fn init(&mut self, stream: u32) {
        let b = self.buffer.as_mut();
        put32(b, field::MAGIC, MAGIC);
        put16(b, field::STREAM, stream.min(MAX_STREAM) as u16);
    }

    /// Sets the sequence number.
    #[inline]
    pub fn set_seq(&mut self, v: u64) {
        self.buffer.as_mut()[field::SEQ..field::SEQ + 8].copy_from_slice(&v.to_be_bytes());
    }

    /// Sets the send timestamp.
    #[inline]
    pub fn set_timestamp_ns(&mut self, v: u64) {
        self.buffer.as_mut()[field::TIMESTAMP..field::TIMESTAMP + 8]
            .copy_from_slice(&v.to_be_bytes());
    }
}

#[inline]
fn be64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_be_bytes(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    static HDR: [u8; 22] = [
        0x54, 0x52, 0x4e, 0x54, 0, 3, //
        0, 0, 0, 0, 0, 0, 0x01, 0x00, //
        0, 0, 0, 0x01, 0x02, 0x03, 0x04, 0x05,
    ];

    #[test]
    fn parse() {
        let h = Header::new_checked(&HDR[..]).unwrap();
        assert_eq!(
            (h.stream(), h.seq(), h.timestamp_ns()),
            (3, 256, 0x01_0203_0405)
        );
    }

    #[test]
    fn write() {
        let mut b = [0u8; 22];
        let mut h = Header::new_unchecked(&mut b[..]);
        h.init(3);
        h.set_seq(256);
        h.set_timestamp_ns(0x01_0203_0405);
        assert_eq!(b, HDR);
    }

    #[test]
    fn foreign_and_short() {
        assert_eq!(
            Header::new_checked(&HDR[..21]).unwrap_err(),
            Error::Truncated
        );
        let mut b = HDR;
        b[0] = 0;
        assert_eq!(Header::new_checked(&b[..]).unwrap_err(), Error::Malformed);
    }
}
