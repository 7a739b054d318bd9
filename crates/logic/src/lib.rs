//! Switching logics for turnoutd: one file per logic, one table.
//!
//! A logic implements [`fabric::Logic`] (re-exported here as [`Logic`]): it
//! classifies a whole batch received on one port into verdicts, and the
//! fabric does the rest. [`LOGICS`] lists every logic with its name, a
//! one-line help and its constructor; [`build`] looks one up and builds it
//! from a JSON configuration. Adding a logic touches three files: its
//! module, one line of [`LOGICS`], and docs/adding-a-logic.md.
//!
//! Invariants shared by every logic here:
//! - `classify` never allocates, blocks or panics, whatever the frame bytes
//!   (malformed headers become `Drop(Malformed)` or the logic's documented
//!   fallback; proptest fuzzes every logic over random frames);
//! - state the workers share is lock-free: atomics (`bridge`, `patch`) or
//!   an immutable snapshot swapped atomically by commands (`l4filter`,
//!   `demux`); control commands never stop the data path;
//! - port 65535 (`u16::MAX`) is never a valid port (the fabric's "none").
#![warn(missing_docs)]

use std::fmt;

pub use fabric::{
    CommandError, Ctx, DropReason, GroupId, Logic, Pkt, PktMut, Pkts, PortId, Verdict,
};

pub mod bridge;
pub mod demux;
pub mod flows;
pub mod l4filter;
pub mod patch;
pub mod plugin;

mod args;
#[cfg(test)]
mod testutil;

/// Error building a logic from its configuration (control path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogicError {
    /// No logic of that name in [`LOGICS`].
    UnknownLogic(String),
    /// The configuration is invalid; the message names the bad key.
    Config(String),
    /// A plug-in library could not be loaded or was refused.
    Plugin(String),
}

impl fmt::Display for LogicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogicError::UnknownLogic(name) => {
                write!(f, "unknown logic {name:?} (known: ")?;
                for (i, e) in LOGICS.iter().enumerate() {
                    write!(f, "{}{}", if i > 0 { ", " } else { "" }, e.name)?;
                }
                f.write_str(")")
            }
            LogicError::Config(m) | LogicError::Plugin(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for LogicError {}

/// Builds a logic from its JSON configuration (`null` = defaults).
pub type Constructor = fn(&serde_json::Value) -> Result<Box<dyn Logic>, LogicError>;

/// One line of the logic table.
pub struct LogicEntry {
    /// Name used in configuration files and the control API.
    pub name: &'static str,
    /// One-line description.
    pub help: &'static str,
    /// Constructor.
    pub new: Constructor,
}

/// Name of the logic turnoutd runs when none is configured.
pub const DEFAULT_LOGIC: &str = "bridge";

/// Every logic turnoutd knows.
pub static LOGICS: &[LogicEntry] = &[
    LogicEntry {
        name: "patch",
        help: "static port-to-port cross-connect",
        new: patch::new,
    },
    LogicEntry {
        name: "bridge",
        help: "learning bridge with aging and flooding (default)",
        new: bridge::new,
    },
    LogicEntry {
        name: "l4filter",
        help: "udp/tcp port to switch port, both directions; others dropped",
        new: l4filter::new,
    },
    LogicEntry {
        name: "demux",
        help: "<proto, local ip, local port> to port, rest to the host port, output verification",
        new: demux::new,
    },
    LogicEntry {
        name: "flows",
        help: "openflow-style flow tables (ovs-ofctl flow syntax): priority match, actions, goto",
        new: flows::new,
    },
    LogicEntry {
        name: "plugin",
        help: "a shared library implementing the turnout_logic.h c abi",
        new: plugin::new,
    },
];

/// The table entry named `name`.
pub fn find(name: &str) -> Option<&'static LogicEntry> {
    LOGICS.iter().find(|e| e.name == name)
}

/// Builds logic `name` from `config`.
pub fn build(name: &str, config: &serde_json::Value) -> Result<Box<dyn Logic>, LogicError> {
    let e = find(name).ok_or_else(|| LogicError::UnknownLogic(name.to_string()))?;
    (e.new)(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_names_are_unique_and_match_the_logics() {
        let mut names: Vec<_> = LOGICS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LOGICS.len());
        for e in LOGICS {
            if e.name == "plugin" {
                continue; // needs a library; see plugin::tests
            }
            let l = (e.new)(&serde_json::Value::Null).unwrap_or_else(|_| {
                // Logics with required keys are built with a minimal config.
                (e.new)(&serde_json::json!({"default": 0})).unwrap()
            });
            assert_eq!(l.name(), e.name);
        }
        assert!(find(DEFAULT_LOGIC).is_some());
    }

    #[test]
    fn unknown_logic_lists_the_known_ones() {
        let e = build("nope", &serde_json::Value::Null).err().unwrap();
        assert_eq!(
            e.to_string(),
            "unknown logic \"nope\" (known: patch, bridge, l4filter, demux, flows, plugin)"
        );
    }

    #[test]
    fn every_logic_lists_its_commands() {
        for e in LOGICS.iter().filter(|e| e.name != "plugin") {
            let l = build(e.name, &serde_json::Value::Null)
                .or_else(|_| build(e.name, &serde_json::json!({"default": 0})))
                .unwrap();
            for (cmd, help) in l.commands() {
                assert!(!cmd.is_empty() && !help.is_empty());
            }
            let err = l
                .command("no-such-command", &serde_json::Value::Null)
                .unwrap_err();
            assert!(err.0.contains("no-such-command"), "{}", err.0);
        }
    }
}
