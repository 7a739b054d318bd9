//! The Internet checksum (RFC 1071) and the IPv4/IPv6 pseudo-headers used by
//! UDP and TCP.

use std::net::{Ipv4Addr, Ipv6Addr};

/// Adds `data` as big-endian 16-bit words (odd tail padded with zero) to a
/// running 64-bit sum. Fold with [`fold`].
#[inline]
pub fn add(mut sum: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        // Four 16-bit words at once; the u64 sum cannot overflow for any
        // realistic frame size (2^16 words of 2^32 each would be needed).
        let w = u64::from_be_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        sum += (w >> 32) + (w & 0xffff_ffff);
    }
    let mut rest = chunks.remainder();
    while rest.len() >= 2 {
        sum += u16::from_be_bytes([rest[0], rest[1]]) as u64;
        rest = &rest[2..];
    }
    if let [last] = rest {
        sum += (*last as u64) << 8;
    }
    sum
}

/// Folds a running sum to 16 bits (ones' complement addition), not inverted.
#[inline]
pub fn fold(mut sum: u64) -> u16 {
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// The checksum of `data` as it goes in a header field (inverted fold).
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    !fold(add(0, data))
}

/// Running sum of the IPv4 pseudo-header for an upper-layer `len` bytes long.
#[inline]
pub fn pseudo_v4(src: Ipv4Addr, dst: Ipv4Addr, proto: u8, len: u16) -> u64 {
    let s = add(0, &src.octets());
    let s = add(s, &dst.octets());
    s + proto as u64 + len as u64
}

/// Running sum of the IPv6 pseudo-header (RFC 8200 §8.1).
#[inline]
pub fn pseudo_v6(src: &Ipv6Addr, dst: &Ipv6Addr, next_header: u8, len: u32) -> u64 {
    let s = add(0, &src.octets());
    let s = add(s, &dst.octets());
    s + (len >> 16) as u64 + (len & 0xffff) as u64 + next_header as u64
}

/// Incremental update (RFC 1624, eqn. 3) of a header checksum `old_csum`
/// when one 16-bit word changes from `old` to `new`.
#[inline]
pub fn update(old_csum: u16, old: u16, new: u16) -> u16 {
    let sum = (!old_csum as u64) + (!old as u64) + new as u64;
    !fold(sum)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: words 0001 f203 f4f5 f6f7 sum to ddf2 (folded).
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(fold(add(0, &data)), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
    }

    #[test]
    fn odd_length_pads_with_zero() {
        assert_eq!(fold(add(0, &[0x12, 0x34, 0x56])), 0x1234 + 0x5600);
    }

    #[test]
    fn chunked_equals_bytewise() {
        let data: Vec<u8> = (0..=255u8).cycle().take(1001).collect();
        let mut slow = 0u64;
        for w in data.chunks(2) {
            slow += if w.len() == 2 {
                u16::from_be_bytes([w[0], w[1]]) as u64
            } else {
                (w[0] as u64) << 8
            };
        }
        assert_eq!(fold(add(0, &data)), fold(slow));
    }

    #[test]
    fn incremental_update_matches_recompute() {
        let mut data = [0x45u8, 0x00, 0x00, 0x54, 0x12, 0x34, 0x40, 0x00, 0x40, 0x01];
        let c = checksum(&data);
        data[8] = 0x3f; // ttl 64 -> 63 changes word 4 from 0x4001 to 0x3f01
        assert_eq!(update(c, 0x4001, 0x3f01), checksum(&data));
    }
}
