//! 48-bit Ethernet (MAC) addresses.

use core::fmt;
use core::str::FromStr;

/// An Ethernet address.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct MacAddr(pub [u8; 6]);

impl MacAddr {
    /// ff:ff:ff:ff:ff:ff.
    pub const BROADCAST: MacAddr = MacAddr([0xff; 6]);
    /// 00:00:00:00:00:00.
    pub const ZERO: MacAddr = MacAddr([0; 6]);

    /// The address in the first six bytes of `b` (panics if shorter).
    #[inline]
    pub fn from_bytes(b: &[u8]) -> MacAddr {
        let mut a = [0u8; 6];
        a.copy_from_slice(&b[..6]);
        MacAddr(a)
    }

    /// The six bytes.
    #[inline]
    pub fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// ff:ff:ff:ff:ff:ff.
    #[inline]
    pub fn is_broadcast(&self) -> bool {
        self.0 == [0xff; 6]
    }

    /// Group address (I/G bit set); broadcast is multicast too.
    #[inline]
    pub fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Individual address (I/G bit clear).
    #[inline]
    pub fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }

    /// Locally administered (U/L bit set).
    #[inline]
    pub fn is_local(&self) -> bool {
        self.0[0] & 0x02 != 0
    }

    /// The address as the low 48 bits of a u64 (first byte most significant).
    #[inline]
    pub fn to_u64(&self) -> u64 {
        let b = self.0;
        u64::from_be_bytes([0, 0, b[0], b[1], b[2], b[3], b[4], b[5]])
    }

    /// The address in the low 48 bits of `v` (upper bits ignored).
    #[inline]
    pub fn from_u64(v: u64) -> MacAddr {
        let b = v.to_be_bytes();
        MacAddr([b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl fmt::Display for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

impl fmt::Debug for MacAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// Error parsing a MAC address from text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ParseMacError;

impl fmt::Display for ParseMacError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("invalid mac address (expected six hex bytes like 02:00:00:00:00:01)")
    }
}

impl std::error::Error for ParseMacError {}

impl FromStr for MacAddr {
    type Err = ParseMacError;

    /// Parses `aa:bb:cc:dd:ee:ff` (or with `-` separators).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut out = [0u8; 6];
        let mut n = 0;
        for part in s.split([':', '-']) {
            if n == 6 || part.is_empty() || part.len() > 2 {
                return Err(ParseMacError);
            }
            out[n] = u8::from_str_radix(part, 16).map_err(|_| ParseMacError)?;
            n += 1;
        }
        if n != 6 {
            return Err(ParseMacError);
        }
        Ok(MacAddr(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_print_round_trip() {
        let m: MacAddr = "02:0a:ff:00:10:01".parse().unwrap();
        assert_eq!(m.0, [0x02, 0x0a, 0xff, 0x00, 0x10, 0x01]);
        assert_eq!(m.to_string(), "02:0a:ff:00:10:01");
        assert_eq!("02-0a-ff-00-10-01".parse::<MacAddr>().unwrap(), m);
    }

    #[test]
    fn parse_rejects_bad_text() {
        for s in [
            "",
            "02:00:00:00:00",
            "02:00:00:00:00:00:00",
            "0g:00:00:00:00:00",
            "002:00:00:00:00:0",
            "02::00:00:00:00",
        ] {
            assert_eq!(s.parse::<MacAddr>(), Err(ParseMacError), "{s}");
        }
    }

    #[test]
    fn classes() {
        assert!(MacAddr::BROADCAST.is_broadcast() && MacAddr::BROADCAST.is_multicast());
        let mc = MacAddr([0x01, 0x00, 0x5e, 0, 0, 1]);
        assert!(mc.is_multicast() && !mc.is_broadcast() && !mc.is_unicast());
        let uc = MacAddr([0x02, 0, 0, 0, 0, 1]);
        assert!(uc.is_unicast() && uc.is_local());
    }

    #[test]
    fn u64_round_trip() {
        let m = MacAddr([0xde, 0xad, 0xbe, 0xef, 0x00, 0x01]);
        assert_eq!(m.to_u64(), 0xdead_beef_0001);
        assert_eq!(MacAddr::from_u64(m.to_u64() | 0xffff_0000_0000_0000), m);
    }
}
