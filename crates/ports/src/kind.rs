//! The port kinds and every spelling a user may type for one: turnoutd's
//! `[[ports]] kind` (and a tunnel's `underlay.kind`), its `port.add` call,
//! turnout-gen's `KIND:TARGET` port specs and turnout-cni's `portType` all
//! read a kind name through [`PortKind::parse`], so the list of kinds and
//! their older spellings is written here once.
//!
//! The canonical spelling is turnoutd's (`af_xdp`, `af_packet`,
//! `vhost_user`); the older forms (`afxdp`, `afpacket`, `vhost-user`,
//! `vhost`) are read as the kind they name, and whatever is written back
//! (`config.show`, a spec turnout-gen prints, a CNI record) uses the
//! canonical one. Anything else is refused with the accepted spellings.

use std::fmt;
use std::str::FromStr;

/// A kind of port.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PortKind {
    /// memif interface.
    Memif,
    /// AF_XDP sockets on a kernel interface.
    AfXdp,
    /// AF_PACKET (TPACKET_V3) sockets on a kernel interface.
    AfPacket,
    /// TAP device.
    Tap,
    /// vhost-user.
    VhostUser,
    /// VXLAN tunnel endpoint.
    Vxlan,
    /// Geneve tunnel endpoint.
    Geneve,
}

/// Every kind, in the order messages and docs list them.
pub const ALL: [PortKind; 7] = [
    PortKind::Memif,
    PortKind::AfXdp,
    PortKind::AfPacket,
    PortKind::Tap,
    PortKind::VhostUser,
    PortKind::Vxlan,
    PortKind::Geneve,
];

/// The canonical names of [`ALL`], in its order.
pub const NAMES: [&str; ALL.len()] = names();

const fn names() -> [&'static str; ALL.len()] {
    let mut out = [""; ALL.len()];
    let mut i = 0;
    while i < ALL.len() {
        out[i] = ALL[i].name();
        i += 1;
    }
    out
}

impl PortKind {
    /// The canonical spelling (turnoutd's `kind`).
    pub const fn name(self) -> &'static str {
        match self {
            PortKind::Memif => "memif",
            PortKind::AfXdp => "af_xdp",
            PortKind::AfPacket => "af_packet",
            PortKind::Tap => "tap",
            PortKind::VhostUser => "vhost_user",
            PortKind::Vxlan => "vxlan",
            PortKind::Geneve => "geneve",
        }
    }

    /// The older spellings read as this kind.
    pub const fn aliases(self) -> &'static [&'static str] {
        match self {
            PortKind::AfXdp => &["afxdp"],
            PortKind::AfPacket => &["afpacket"],
            PortKind::VhostUser => &["vhost-user", "vhost"],
            _ => &[],
        }
    }

    /// Whether this build of the `ports` crate has the backend (vhost-user
    /// needs the `vhost` feature; the others are always there).
    pub const fn built(self) -> bool {
        match self {
            PortKind::VhostUser => cfg!(feature = "vhost"),
            _ => true,
        }
    }

    /// The kind `text` names: its canonical spelling or an alias. An
    /// unknown name is an error listing every accepted spelling.
    pub fn parse(text: &str) -> Result<Self, KindError> {
        Self::parse_among(text, &ALL)
    }

    /// As [`PortKind::parse`], for a place that takes only the kinds in
    /// `accepted` (turnout-gen's four, a tunnel's two underlays): another
    /// kind is refused with `accepted`'s spellings.
    pub fn parse_among(text: &str, accepted: &[PortKind]) -> Result<Self, KindError> {
        let found = ALL
            .into_iter()
            .find(|k| k.name() == text || k.aliases().contains(&text));
        match found {
            Some(k) if accepted.contains(&k) => Ok(k),
            _ => Err(KindError {
                text: text.to_string(),
                known: found,
                accepted: accepted.to_vec(),
            }),
        }
    }
}

impl fmt::Display for PortKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for PortKind {
    type Err = KindError;

    fn from_str(s: &str) -> Result<Self, KindError> {
        Self::parse(s)
    }
}

/// A kind name that is not accepted where it was written.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindError {
    /// What was written.
    pub text: String,
    /// The kind it names, if it is a kind at all (one not accepted there).
    pub known: Option<PortKind>,
    /// The kinds accepted there.
    pub accepted: Vec<PortKind>,
}

impl fmt::Display for KindError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.known {
            Some(k) => write!(f, "port kind {k} is not accepted here")?,
            None => write!(f, "unknown port kind {:?}", self.text)?,
        }
        write!(f, " (expected {})", describe(&self.accepted))
    }
}

impl std::error::Error for KindError {}

/// The spellings of `kinds` for a message: `one of memif, af_xdp (or
/// afxdp), ...`, `af_xdp (or afxdp) or af_packet (or afpacket)`.
pub fn describe(kinds: &[PortKind]) -> String {
    let names: Vec<String> = kinds
        .iter()
        .map(|k| match k.aliases() {
            [] => k.name().to_string(),
            old => format!("{} (or {})", k.name(), old.join(", ")),
        })
        .collect();
    match names.as_slice() {
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        _ => format!("one of {}", names.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_names_its_kind() {
        for (text, kind) in [
            ("memif", PortKind::Memif),
            ("af_xdp", PortKind::AfXdp),
            ("afxdp", PortKind::AfXdp),
            ("af_packet", PortKind::AfPacket),
            ("afpacket", PortKind::AfPacket),
            ("tap", PortKind::Tap),
            ("vhost_user", PortKind::VhostUser),
            ("vhost-user", PortKind::VhostUser),
            ("vhost", PortKind::VhostUser),
            ("vxlan", PortKind::Vxlan),
            ("geneve", PortKind::Geneve),
        ] {
            assert_eq!(PortKind::parse(text), Ok(kind), "{text}");
            assert_eq!(text.parse::<PortKind>(), Ok(kind), "{text}");
        }
        // every kind's name and aliases, and nothing spelled twice
        let mut seen = Vec::new();
        for k in ALL {
            assert_eq!(PortKind::parse(k.name()), Ok(k));
            assert_eq!(k.to_string(), k.name());
            for a in k.aliases() {
                assert_eq!(PortKind::parse(a), Ok(k), "{a}");
            }
            seen.push(k.name());
            seen.extend(k.aliases());
        }
        let n = seen.len();
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen.len(), n, "a spelling names two kinds");
        assert_eq!(
            NAMES,
            [
                "memif",
                "af_xdp",
                "af_packet",
                "tap",
                "vhost_user",
                "vxlan",
                "geneve"
            ]
        );
    }

    #[test]
    fn a_typo_is_refused_with_the_accepted_spellings() {
        let all = "one of memif, af_xdp (or afxdp), af_packet (or afpacket), tap, \
                   vhost_user (or vhost-user, vhost), vxlan, geneve";
        for typo in ["memfi", "af-xdp", "AF_XDP", "vhostuser", "", " memif"] {
            let e = PortKind::parse(typo).unwrap_err();
            assert_eq!(e.known, None);
            assert_eq!(
                e.to_string(),
                format!("unknown port kind {typo:?} (expected {all})")
            );
        }
        let kernel = [PortKind::AfXdp, PortKind::AfPacket];
        assert_eq!(
            PortKind::parse_among("afpacket", &kernel),
            Ok(PortKind::AfPacket)
        );
        let e = PortKind::parse_among("vhost", &kernel).unwrap_err();
        assert_eq!(e.known, Some(PortKind::VhostUser));
        assert_eq!(
            e.to_string(),
            "port kind vhost_user is not accepted here \
             (expected af_xdp (or afxdp) or af_packet (or afpacket))"
        );
        assert_eq!(describe(&[PortKind::Tap]), "tap");
    }
}
