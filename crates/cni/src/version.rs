//! CNI versions this plugin speaks.

use std::cmp::Ordering;

/// The version this plugin implements.
pub const CURRENT: &str = "1.1.0";

/// Every version accepted in a network configuration.
pub const SUPPORTED: [&str; 5] = ["0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0"];

/// Whether `v` is accepted.
pub fn supported(v: &str) -> bool {
    SUPPORTED.contains(&v)
}

fn parts(v: &str) -> [u32; 3] {
    let mut out = [0; 3];
    for (i, p) in v.split('.').take(3).enumerate() {
        out[i] = p.parse().unwrap_or(0);
    }
    out
}

/// Compares two "X.Y.Z" versions.
pub fn cmp(a: &str, b: &str) -> Ordering {
    parts(a).cmp(&parts(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        assert_eq!(cmp("0.10.0", "0.4.0"), Ordering::Greater);
        assert_eq!(cmp("1.0.0", "1.1.0"), Ordering::Less);
        assert_eq!(cmp("1.1.0", "1.1.0"), Ordering::Equal);
        assert!(supported("0.4.0") && supported("1.1.0") && !supported("0.2.0"));
    }
}
