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
//!
//! The list below, one line per kind, is the only place a kind is named:
//! it makes [`PortKind`] (with [`ALL`], [`NAMES`], the names, aliases and
//! whether the build has the backend) and [`PortConfig`] (its serde tag
//! and aliases, and the arms that hand each call to the kind's
//! [`KindConfig`] implementation, which lives in the kind's directory;
//! docs/adding-a-port.md).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;

use fabric::Port;
use serde::{de, Deserialize, Deserializer, Serialize};

use crate::config::{ConfigError, KindConfig};
use crate::open::Opener;

/// Makes [`PortKind`] and [`PortConfig`] from the list of kinds below: a
/// line is `VARIANT(MODULE::CONFIG) = "name" | "older" | ...;`, under the
/// kind's doc comment and, if the backend needs a feature of this crate,
/// `#[cfg(feature = "...")]`.
macro_rules! port_kinds {
    ($(
        $(#[doc = $doc:literal])*
        $(#[cfg(feature = $feature:literal)])?
        $variant:ident($module:ident::$config:ident) = $name:literal $(| $alias:literal)*;
    )*) => {
        /// A kind of port.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum PortKind {
            $($(#[doc = $doc])* $variant,)*
        }

        /// Every kind, in the order messages and docs list them.
        pub const ALL: [PortKind; [$(PortKind::$variant),*].len()] = [$(PortKind::$variant),*];

        impl PortKind {
            /// The canonical spelling (turnoutd's `kind`).
            pub const fn name(self) -> &'static str {
                match self {
                    $(Self::$variant => $name,)*
                }
            }

            /// The older spellings read as this kind.
            pub const fn aliases(self) -> &'static [&'static str] {
                match self {
                    $(Self::$variant => &[$($alias),*],)*
                }
            }

            /// Whether this build of the `ports` crate has the backend
            /// (vhost-user needs the `vhost` feature; the others are always
            /// there).
            pub const fn built(self) -> bool {
                match self {
                    $(Self::$variant => true $(&& cfg!(feature = $feature))?,)*
                }
            }
        }

        /// The settings of one port, tagged by `kind`: one variant per
        /// kind, holding the kind's [`KindConfig`] struct. Read through
        /// [`PortConfig::from_kind`] (turnoutd, turnout-gen) or serde (the
        /// variants carry [`PortKind::aliases`] as serde aliases; a test
        /// checks that the two agree).
        #[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(tag = "kind")]
        pub enum PortConfig {
            $(
                $(#[doc = $doc])*
                $(#[cfg(feature = $feature)])?
                #[serde(rename = $name $(, alias = $alias)*)]
                $variant(crate::$module::$config),
            )*
        }

        impl PortConfig {
            /// Deserializes the settings of a port of kind `kind` (any
            /// spelling [`PortKind::parse`] reads) from `d` (a table
            /// without the `kind` key). An unknown kind is an error listing
            /// the accepted spellings.
            pub fn from_kind<'de, D: Deserializer<'de>>(
                kind: &str,
                d: D,
            ) -> Result<Self, D::Error> {
                let kind = PortKind::parse(kind).map_err(<D::Error as de::Error>::custom)?;
                match kind {
                    $(
                        $(#[cfg(feature = $feature)])?
                        PortKind::$variant => Ok(Self::$variant(Deserialize::deserialize(d)?)),
                    )*
                    $($(
                        #[cfg(not(feature = $feature))]
                        PortKind::$variant => Err(<D::Error as de::Error>::custom(concat!(
                            "port kind ", $name, " is not available in this build ",
                            "(the ports crate without its ", $feature, " feature)"
                        ))),
                    )?)*
                }
            }

            /// The port's kind.
            pub fn port_kind(&self) -> PortKind {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(_) => PortKind::$variant,)*
                }
            }

            /// Configured queue pairs.
            pub fn queues(&self) -> u16 {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(c) => KindConfig::queues(c),)*
                }
            }

            /// Checks every value against the backend's limits; the error
            /// names the key and the allowed range.
            pub fn validate(&self) -> Result<(), ConfigError> {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(c) => KindConfig::validate(c),)*
                }
            }

            /// What two ports must not share: the key to blame and the
            /// resource, in words (`interface veth0`).
            pub fn exclusive_key(&self) -> (&'static str, String) {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(c) => KindConfig::exclusive_key(c),)*
                }
            }

            /// Opens the port `name` ([`Opener::open`]).
            pub(crate) fn open_in(
                &self,
                name: &str,
                opener: &Opener,
            ) -> Result<Arc<dyn Port>, String> {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(c) => {
                        KindConfig::open(c, PortKind::$variant, name, opener)
                    })*
                }
            }

            /// The port opened from this was removed ([`Opener::closed`]).
            pub(crate) fn closed_in(&self, opener: &Opener) -> Option<PathBuf> {
                match self {
                    $($(#[cfg(feature = $feature)])? Self::$variant(c) => KindConfig::closed(c, opener),)*
                }
            }
        }
    };
}

// The kinds, in the order messages and docs list them: one line each
// (docs/adding-a-port.md).
port_kinds! {
    /// memif interface (turnoutd serves the socket).
    Memif(memif::MemifSpec) = "memif";
    /// AF_XDP sockets on a kernel interface.
    AfXdp(af_xdp::AfXdpConfig) = "af_xdp" | "afxdp";
    /// AF_PACKET (TPACKET_V3) sockets on a kernel interface.
    AfPacket(af_packet::AfPacketConfig) = "af_packet" | "afpacket";
    /// TAP device: the host-stack port.
    Tap(tap::TapConfig) = "tap";
    /// vhost-user backend.
    #[cfg(feature = "vhost")]
    VhostUser(vhost_user::VhostUserConfig) = "vhost_user" | "vhost-user" | "vhost";
    /// VXLAN tunnel endpoint.
    Vxlan(tunnel::TunnelSpec) = "vxlan";
    /// Geneve tunnel endpoint.
    Geneve(tunnel::TunnelSpec) = "geneve";
}

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
