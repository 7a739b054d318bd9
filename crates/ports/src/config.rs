//! One configuration per port kind, and the tagged [`PortConfig`] over all
//! of them: turnoutd's `[[ports]]` tables (TOML), its `port.add` API call
//! (JSON) and turnout-gen's compact `memif:SOCKET,key=value` specs all
//! parse into these types and are checked by the same `validate`, so a
//! limit is written once, next to the backend that has it
//! (docs/adding-a-port.md).
//!
//! Each kind's struct lives in its backend's directory
//! ([`crate::memif::MemifSpec`], [`crate::af_xdp::AfXdpConfig`],
//! [`crate::af_packet::AfPacketConfig`], [`crate::tap::TapConfig`],
//! [`crate::vhost_user::VhostUserConfig`], [`crate::tunnel::TunnelSpec`])
//! and implements [`KindConfig`] there; the enum over them is made in
//! `crate::kind` from the list of kinds. This module holds the trait, the
//! error type and the checks they share.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use fabric::Port;
use serde::de::{self, DeserializeOwned, IntoDeserializer, Visitor};
use serde::{Deserialize, Deserializer, Serialize};

use crate::kind::PortKind;
use crate::open::Opener;

/// A configuration value out of range: the key and the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// The key (`buffer_size`, `underlay.iface`); empty if the error is
    /// about the table as a whole.
    pub field: String,
    /// Lower-case reason, with the allowed range.
    pub message: String,
}

impl ConfigError {
    /// An error at `field`.
    pub fn new(field: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            message: message.into(),
        }
    }

    /// The same error one table deeper (`iface` under `underlay`).
    pub fn under(self, parent: &str) -> Self {
        let field = if self.field.is_empty() {
            parent.to_string()
        } else {
            format!("{parent}.{}", self.field)
        };
        Self { field, ..self }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "{}: {}", self.field, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

pub use crate::kind::PortConfig;

/// Every port kind, as the `kind` key spells it (whether this build has
/// its backend or not: [`PortKind::built`]); derived from [`PortKind`],
/// which also knows the older spellings.
pub const KINDS: &[&str] = &crate::kind::NAMES;

/// What a kind's configuration struct does, written in the kind's
/// directory next to the struct: the [`PortConfig`] variant of the kind
/// hands each call to it (the arms are made from the list of kinds in
/// `crate::kind`).
pub trait KindConfig: Clone + fmt::Debug + Eq + Serialize + DeserializeOwned {
    /// Configured queue pairs.
    fn queues(&self) -> u16;

    /// Checks every value against the backend's limits; the error names
    /// the key and the allowed range.
    fn validate(&self) -> Result<(), ConfigError>;

    /// What two ports must not share: the key to blame and the resource,
    /// in words (`interface veth0`, a socket, a memif id on a socket).
    fn exclusive_key(&self) -> (&'static str, String);

    /// Opens the port `name` of kind `kind` (one of the kinds whose
    /// variant holds this struct); the message says why not. What ports
    /// of a kind share (memif's servers, the tunnels by name) is kept in
    /// `opener`.
    fn open(&self, kind: PortKind, name: &str, opener: &Opener) -> Result<Arc<dyn Port>, String>;

    /// The port opened from this was removed: releases what it shared in
    /// `opener`; returns the memif socket closed, if one was. Nothing by
    /// default.
    fn closed(&self, opener: &Opener) -> Option<PathBuf> {
        let _ = opener;
        None
    }
}

impl PortConfig {
    /// The `kind` key, as turnoutd spells it.
    pub fn kind(&self) -> &'static str {
        self.port_kind().name()
    }
}

/// `value` in `1..=max` queue pairs.
pub fn check_queues(value: u16, max: u16) -> Result<(), ConfigError> {
    if value == 0 || value > max {
        return Err(ConfigError::new(
            "queues",
            format!("{value} not in 1..={max}"),
        ));
    }
    Ok(())
}

/// `value` in `lo..=hi`.
pub fn check_range<T: PartialOrd + fmt::Display>(
    field: &str,
    value: T,
    lo: T,
    hi: T,
) -> Result<(), ConfigError> {
    if value < lo || value > hi {
        return Err(ConfigError::new(
            field,
            format!("{value} not in {lo}..={hi}"),
        ));
    }
    Ok(())
}

/// `value` a power of two in `lo..=hi`.
pub fn check_pow2(field: &str, value: u32, lo: u32, hi: u32) -> Result<(), ConfigError> {
    if !value.is_power_of_two() || value < lo || value > hi {
        return Err(ConfigError::new(
            field,
            format!("{value} is not a power of two in {lo}..={hi}"),
        ));
    }
    Ok(())
}

/// A kernel interface name the kernel accepts: 1..=15 bytes (IFNAMSIZ
/// with its NUL), no '/', ':', '%' or white space, not "." or "..".
pub fn check_iface(name: &str) -> Result<(), ConfigError> {
    if name.is_empty()
        || name.len() > 15
        || name == "."
        || name == ".."
        || name.contains(['/', ':', '%', '\0'])
        || name.contains(char::is_whitespace)
    {
        return Err(ConfigError::new(
            "iface",
            format!(
                "{name:?} is not a valid interface name (1..=15 bytes, no '/', ':', '%' or spaces)"
            ),
        ));
    }
    Ok(())
}

/// A unix socket path: 1..=107 bytes (`sun_path` with its NUL).
pub fn check_socket(path: &Path) -> Result<(), ConfigError> {
    let n = path.as_os_str().len();
    if n == 0 || n > 107 {
        return Err(ConfigError::new(
            "socket",
            format!("path must be 1..=107 bytes long, is {n}"),
        ));
    }
    Ok(())
}

/// Deserializes `T` from `key=value` texts (turnout-gen's compact port
/// specs): numbers, booleans (`true`/`false`, `1`/`0`), strings, paths and
/// unit enum variants are parsed from the text as `T`'s fields ask. Unknown
/// keys, missing keys and bad values are errors naming the key.
pub fn from_pairs<'a, T: Deserialize<'a>>(pairs: &'a [(String, String)]) -> Result<T, ConfigError> {
    let map = de::value::MapDeserializer::new(pairs.iter().map(|(k, v)| {
        (
            k.as_str(),
            Text {
                key: k.as_str(),
                text: v.as_str(),
            },
        )
    }));
    T::deserialize(map).map_err(|e: de::value::Error| ConfigError::new("", e.to_string()))
}

/// One `key=value` text, deserialized as whatever type asks for it.
struct Text<'a> {
    key: &'a str,
    text: &'a str,
}

impl Text<'_> {
    fn number<N: std::str::FromStr + fmt::Display>(
        &self,
        lo: N,
        hi: N,
    ) -> Result<N, de::value::Error> {
        self.text.parse().map_err(|_| {
            de::Error::custom(format!(
                "{}={}: not a valid number (an integer in {lo}..={hi})",
                self.key, self.text
            ))
        })
    }
}

impl<'de, 'a> IntoDeserializer<'de, de::value::Error> for Text<'a> {
    type Deserializer = Self;
    fn into_deserializer(self) -> Self {
        self
    }
}

macro_rules! text_numbers {
    ($($method:ident $visit:ident $t:ty),*) => {$(
        fn $method<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
            v.$visit(self.number::<$t>(<$t>::MIN, <$t>::MAX)?)
        }
    )*};
}

impl<'de, 'a> Deserializer<'de> for Text<'a> {
    type Error = de::value::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_str(self.text)
    }

    fn deserialize_bool<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        match self.text {
            "true" | "1" | "yes" | "on" => v.visit_bool(true),
            "false" | "0" | "no" | "off" => v.visit_bool(false),
            t => Err(de::Error::custom(format!(
                "{}={t}: expected true or false",
                self.key
            ))),
        }
    }

    text_numbers!(
        deserialize_u8 visit_u8 u8,
        deserialize_u16 visit_u16 u16,
        deserialize_u32 visit_u32 u32,
        deserialize_u64 visit_u64 u64,
        deserialize_i8 visit_i8 i8,
        deserialize_i16 visit_i16 i16,
        deserialize_i32 visit_i32 i32,
        deserialize_i64 visit_i64 i64
    );

    fn deserialize_option<V: Visitor<'de>>(self, v: V) -> Result<V::Value, Self::Error> {
        v.visit_some(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        v: V,
    ) -> Result<V::Value, Self::Error> {
        v.visit_enum(self.text.into_deserializer())
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        v: V,
    ) -> Result<V::Value, Self::Error> {
        v.visit_newtype_struct(self)
    }

    serde::forward_to_deserialize_any! {
        i128 u128 f32 f64 char str string bytes byte_buf unit unit_struct
        seq tuple tuple_struct map struct identifier ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(s: &[(&str, &str)]) -> Vec<(String, String)> {
        s.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn compact_pairs_parse_into_the_kind_structs() {
        let p = pairs(&[
            ("socket", "/s"),
            ("id", "3"),
            ("secret", "abc"),
            ("ring_size", "256"),
        ]);
        let m: crate::memif::MemifSpec = from_pairs(&p).unwrap();
        assert_eq!(
            (m.id, m.ring_size, m.secret.as_deref()),
            (3, 256, Some("abc"))
        );
        let p = pairs(&[("iface", "v0"), ("bind", "zero_copy"), ("queues", "2")]);
        let x: crate::af_xdp::AfXdpConfig = from_pairs(&p).unwrap();
        assert_eq!(
            (x.ifname.as_str(), x.queues, x.bind),
            ("v0", 2, crate::af_xdp::XdpBind::ZeroCopy)
        );
        let p = pairs(&[("iface", "v0"), ("qdisc_bypass", "false"), ("fanout", "lb")]);
        let a: crate::af_packet::AfPacketConfig = from_pairs(&p).unwrap();
        assert!(!a.qdisc_bypass);
        assert_eq!(a.fanout, crate::af_packet::Fanout::LoadBalance);
        let bad = |p: &[(&str, &str)]| {
            from_pairs::<crate::memif::MemifSpec>(&pairs(p))
                .unwrap_err()
                .to_string()
        };
        assert_eq!(
            bad(&[("socket", "/s"), ("id", "x")]),
            "id=x: not a valid number (an integer in 0..=4294967295)"
        );
        assert!(bad(&[("socket", "/s"), ("rings", "2")]).starts_with("unknown field `rings`"));
        assert_eq!(bad(&[("id", "1")]), "missing field `socket`");
    }

    #[test]
    fn the_tagged_enum_round_trips() {
        let c = PortConfig::Tap(crate::tap::TapConfig::new("t0"));
        let j = serde_json::to_value(&c).unwrap();
        assert_eq!(j["kind"], "tap");
        assert_eq!(j["iface"], "t0");
        let back: PortConfig = serde_json::from_value(j).unwrap();
        assert_eq!(back, c);
        let e = serde_json::from_value::<PortConfig>(serde_json::json!({"kind": "memfi"}))
            .unwrap_err()
            .to_string();
        assert!(e.contains("unknown variant `memfi`"), "{e}");
        let e = PortConfig::from_kind("memfi", serde_json::json!({})).unwrap_err();
        assert!(
            e.to_string().starts_with("unknown port kind \"memfi\""),
            "{e}"
        );
    }

    /// A table of each kind (the least it needs), with `kind` spelled `spelling`.
    fn table(kind: PortKind, spelling: &str) -> serde_json::Value {
        use serde_json::json;
        let underlay = json!({"kind": "af_packet", "iface": "u0"});
        let mut t = match kind {
            PortKind::Memif | PortKind::VhostUser => json!({"socket": "/s"}),
            PortKind::AfXdp | PortKind::AfPacket | PortKind::Tap => json!({"iface": "v0"}),
            PortKind::Vxlan | PortKind::Geneve => {
                json!({"vni": 5, "local_ip": "192.0.2.1", "underlay": underlay})
            }
        };
        t["kind"] = spelling.into();
        t
    }

    #[test]
    fn every_spelling_of_a_kind_reads_as_the_kind() {
        for kind in crate::kind::ALL.into_iter().filter(|k| k.built()) {
            let canonical = table(kind, kind.name());
            let mut rest = canonical.clone();
            rest.as_object_mut().unwrap().remove("kind");
            let want = PortConfig::from_kind(kind.name(), rest.clone()).unwrap();
            assert_eq!(want.port_kind(), kind);
            assert_eq!(want.kind(), kind.name());
            // serde's tag and from_kind agree, for every spelling: the serde
            // aliases on the variants are PortKind's aliases
            assert_eq!(
                serde_json::from_value::<PortConfig>(canonical).unwrap(),
                want
            );
            for a in kind.aliases() {
                let got = PortConfig::from_kind(a, rest.clone()).unwrap();
                assert_eq!(got, want, "{a}");
                assert_eq!(got.kind(), kind.name(), "{a}");
                let by_serde: PortConfig = serde_json::from_value(table(kind, a)).unwrap();
                assert_eq!(by_serde, want, "{a}");
                // written back in the canonical spelling
                assert_eq!(serde_json::to_value(&got).unwrap()["kind"], kind.name());
            }
        }
        // a tunnel's underlay takes the same spellings of its two kinds
        for kind in [PortKind::AfPacket, PortKind::AfXdp] {
            let want: crate::tunnel::UnderlaySpec =
                serde_json::from_value(table(kind, kind.name())).unwrap();
            for a in kind.aliases() {
                let got: crate::tunnel::UnderlaySpec =
                    serde_json::from_value(table(kind, a)).unwrap();
                assert_eq!(got, want, "{a}");
            }
        }
        // and refuses another kind naming those spellings, aliases included
        let underlay = |kind: &str| {
            serde_json::from_value::<crate::tunnel::UnderlaySpec>(
                serde_json::json!({"kind": kind, "iface": "v0"}),
            )
            .unwrap_err()
            .to_string()
        };
        // (serde lists the aliases)
        for k in ["tap", "af-xdp"] {
            assert_eq!(
                underlay(k),
                format!(
                    "unknown variant `{k}`, expected one of `af_packet`, `afpacket`, `af_xdp`, `afxdp`"
                )
            );
        }
        // (an unknown value of the underlay's own keys keeps serde's error)
        let e = serde_json::from_value::<crate::tunnel::UnderlaySpec>(
            serde_json::json!({"kind": "af_packet", "iface": "v0", "fanout": "af_xdp"}),
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.starts_with("unknown variant `af_xdp`, expected one of `hash`"),
            "{e}"
        );
        let e = PortConfig::from_kind("af-xdp", serde_json::json!({"iface": "v0"}))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "unknown port kind \"af-xdp\" (expected one of memif, af_xdp (or afxdp), \
             af_packet (or afpacket), tap, vhost_user (or vhost-user, vhost), vxlan, geneve)"
        );
    }

    #[test]
    fn a_kind_this_build_lacks_is_refused_with_its_feature() {
        // (vhost_user without the vhost feature; nothing in a full build)
        for kind in crate::kind::ALL.into_iter().filter(|k| !k.built()) {
            let mut rest = table(kind, kind.name());
            rest.as_object_mut().unwrap().remove("kind");
            let e = PortConfig::from_kind(kind.name(), rest).unwrap_err();
            assert!(
                e.to_string().starts_with(&format!(
                    "port kind {kind} is not available in this build (the ports crate without its "
                )),
                "{e}"
            );
        }
    }

    #[test]
    fn shared_checks_name_the_key() {
        assert_eq!(
            check_iface("a/b").unwrap_err().to_string(),
            "iface: \"a/b\" is not a valid interface name (1..=15 bytes, no '/', ':', '%' or spaces)"
        );
        assert!(check_iface("veth0").is_ok());
        assert!(check_iface("..").is_err());
        assert_eq!(
            check_queues(0, 4).unwrap_err().to_string(),
            "queues: 0 not in 1..=4"
        );
        assert_eq!(
            check_pow2("ring_size", 3, 2, 8).unwrap_err().to_string(),
            "ring_size: 3 is not a power of two in 2..=8"
        );
        assert_eq!(
            ConfigError::new("iface", "x").under("underlay").to_string(),
            "underlay.iface: x"
        );
    }
}
