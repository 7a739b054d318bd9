//! Switching logics for turnoutd: one file per logic, one table.
//!
//! A logic implements [`fabric::Logic`] (re-exported here as [`Logic`]): it
//! classifies a whole batch received on one port into verdicts, and the
//! fabric does the rest. [`LOGICS`] lists every logic with its name, a
//! one-line help and its constructor; [`build`] looks one up and builds it
//! from a JSON configuration. What a logic offers a control plane beyond
//! its JSON commands is typed and built with it ([`Services`]: `flows`'
//! OpenFlow tables, which turnoutd's OpenFlow agent attaches to); the
//! fabric only ever sees a [`Logic`]. Adding a logic touches three files: its
//! module, one line of [`LOGICS`] (constructor, the keys of its configuration
//! that name ports, an example configuration the every-logic tests and
//! benches use), and docs/adding-a-logic.md.
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
#![deny(unsafe_code)]

use std::fmt;
use std::sync::Arc;

pub use fabric::{
    CommandError, Ctx, DropReason, GroupId, Logic, Pkt, PktMut, Pkts, PortId, Verdict, WorkerState,
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

/// Builds a logic from its JSON configuration (`null` = defaults), with
/// its services.
pub type Constructor = fn(&serde_json::Value) -> Result<Built, LogicError>;

/// A logic built from the table: what the fabric runs, and the typed
/// interfaces a control plane may use on that same instance.
pub struct Built {
    /// The logic, for the fabric.
    pub logic: Box<dyn Logic>,
    /// What it offers the control plane beyond its commands.
    pub services: Services,
}

impl From<Box<dyn Logic>> for Built {
    /// A logic that offers no services.
    fn from(logic: Box<dyn Logic>) -> Built {
        Built {
            logic,
            services: Services::default(),
        }
    }
}

/// Typed control-plane interfaces of one logic instance, beyond its JSON
/// commands. turnoutd attaches an agent to each one present (and to none
/// by the logic's name): a new logic that offers one gets the agent by
/// filling it in its constructor.
#[derive(Clone, Default)]
pub struct Services {
    /// OpenFlow flow tables: turnoutd's OpenFlow agent (channel,
    /// packet-ins, packet-outs, fail-standalone) and flow timer work on
    /// them.
    pub openflow: Option<Arc<flows::Flows>>,
}

/// One line of the logic table.
pub struct LogicEntry {
    /// Name used in configuration files and the control API.
    pub name: &'static str,
    /// One-line description.
    pub help: &'static str,
    /// Constructor.
    pub new: Constructor,
    /// Keys of its configuration and command arguments whose values name
    /// ports (at any depth): turnoutd replaces port names there by ids.
    pub port_keys: &'static [&'static str],
    /// Commands to whose arguments turnoutd adds `ports`, the ids of the
    /// switch's ports, unless they give it (`flows trace`: a flood is
    /// expanded and missing ports are told with them).
    pub port_ids_for: &'static [&'static str],
    /// An example configuration over ports 0..=3 under which UDP frames
    /// 10.0.0.1 → 10.0.0.2:5001 received on port 0 are forwarded or
    /// flooded, never dropped: what the no-allocation test, the proptests
    /// and the classify bench build every logic with. The argument is a
    /// scratch directory the caller owns (the plug-in compiles its sample
    /// library there).
    pub example: Example,
}

/// See [`LogicEntry::example`].
pub type Example = fn(&std::path::Path) -> Result<serde_json::Value, String>;

/// Name of the logic turnoutd runs when none is configured.
pub const DEFAULT_LOGIC: &str = "bridge";

/// Every logic turnoutd knows.
pub static LOGICS: &[LogicEntry] = &[
    LogicEntry {
        name: "patch",
        help: "static port-to-port cross-connect",
        new: |c| patch::new(c).map(Built::from),
        port_keys: &["pairs", "from", "to", "port"],
        port_ids_for: &[],
        example: |_| Ok(serde_json::json!({"pairs": [[0, 1]]})),
    },
    LogicEntry {
        name: "bridge",
        help: "learning bridge with aging and flooding (default)",
        new: |c| bridge::new(c).map(Built::from),
        port_keys: &["port"],
        port_ids_for: &[],
        example: |_| Ok(serde_json::json!({"table_size": 64})),
    },
    LogicEntry {
        name: "l4filter",
        help: "udp/tcp port to switch port, both directions; others dropped",
        new: |c| l4filter::new(c).map(Built::from),
        port_keys: &["to", "uplink"],
        port_ids_for: &[],
        example: |_| Ok(serde_json::json!({"rules": [{"proto": "udp", "port": 5001, "to": 1}]})),
    },
    LogicEntry {
        name: "demux",
        help: "<proto, local ip, local port> to port, rest to the host port, output verification",
        new: |c| demux::new(c).map(Built::from),
        port_keys: &["to", "default", "uplink"],
        port_ids_for: &[],
        example: |_| {
            Ok(
                serde_json::json!({"default": 1, "uplink": 0, "entries": [{"proto": "udp", "ip": "10.0.0.2", "port": 5001, "to": 3}]}),
            )
        },
    },
    LogicEntry {
        name: "flows",
        help: "openflow-style flow tables (ovs-ofctl flow syntax): priority match, actions, goto",
        new: flows::new,
        port_keys: &[],
        port_ids_for: &["trace"],
        example: |_| {
            Ok(serde_json::json!({"flows": [
                "priority=5,udp,nw_dst=10.0.0.0/24,tp_dst=5001,actions=mod_dl_src:02:00:00:00:00:09,goto_table:1",
                "priority=4,dl_dst=02:01:00:00:00:03,actions=dec_ttl,output:1",
                "priority=1,actions=drop",
                "table=1,priority=1,actions=output:2,output:3",
            ]}))
        },
    },
    LogicEntry {
        name: "plugin",
        help: "a shared library implementing the turnout_logic.h c abi",
        new: |c| plugin::new(c).map(Built::from),
        port_keys: &[],
        port_ids_for: &[],
        example: plugin::example,
    },
];

/// The table entry named `name`.
pub fn find(name: &str) -> Option<&'static LogicEntry> {
    LOGICS.iter().find(|e| e.name == name)
}

/// Builds logic `name` from `config`.
pub fn build(name: &str, config: &serde_json::Value) -> Result<Box<dyn Logic>, LogicError> {
    build_with_services(name, config).map(|b| b.logic)
}

/// Builds logic `name` from `config`, with its services.
pub fn build_with_services(name: &str, config: &serde_json::Value) -> Result<Built, LogicError> {
    let e = find(name).ok_or_else(|| LogicError::UnknownLogic(name.to_string()))?;
    (e.new)(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every logic built from its table example.
    fn examples(dir: &std::path::Path) -> Vec<(&'static LogicEntry, Box<dyn Logic>)> {
        LOGICS
            .iter()
            .map(|e| {
                let cfg = (e.example)(dir).unwrap();
                let l = (e.new)(&cfg).unwrap_or_else(|err| panic!("{}: {err}", e.name));
                (e, l.logic)
            })
            .collect()
    }

    #[test]
    fn table_names_are_unique_and_match_the_logics() {
        let mut names: Vec<_> = LOGICS.iter().map(|e| e.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), LOGICS.len());
        let dir = testpeers::TempDir::new("logic-table");
        for (e, l) in examples(&dir.0) {
            assert_eq!(l.name(), e.name);
        }
        assert!(find(DEFAULT_LOGIC).is_some());
    }

    /// Only `flows` offers OpenFlow tables, and they are the instance the
    /// fabric runs: a flow added through the logic shows through them.
    #[test]
    fn openflow_tables_only_from_flows_and_the_running_instance() {
        let dir = testpeers::TempDir::new("logic-services");
        for e in LOGICS {
            let b = (e.new)(&(e.example)(&dir.0).unwrap()).unwrap();
            assert_eq!(
                b.services.openflow.is_some(),
                e.name == "flows",
                "{}",
                e.name
            );
            let Some(t) = &b.services.openflow else {
                continue;
            };
            let count = |l: &dyn Logic| {
                l.command("dump", &serde_json::Value::Null).unwrap()["flows"]
                    .as_array()
                    .unwrap()
                    .len()
            };
            let before = count(&**t);
            b.logic
                .command(
                    "add",
                    &serde_json::json!({"flow": "priority=99,actions=drop"}),
                )
                .unwrap();
            assert_eq!(count(&**t), before + 1);
        }
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
        let dir = testpeers::TempDir::new("logic-commands");
        for (_, l) in examples(&dir.0) {
            for (cmd, help) in l.commands() {
                assert!(!cmd.is_empty() && !help.is_empty());
            }
            let err = l
                .command("no-such-command", &serde_json::Value::Null)
                .unwrap_err();
            assert!(err.0.contains("no-such-command"), "{}", err.0);
        }
    }

    #[test]
    fn every_example_forwards_the_example_frames() {
        use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
        use wire::MacAddr;
        let dir = testpeers::TempDir::new("logic-example");
        let spec = UdpFrameSpec::new(
            MacAddr([2, 0, 0, 0, 0, 1]),
            MacAddr([2, 0, 0, 0, 0, 2]),
            IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
            40000,
            5001,
        );
        for (e, l) in examples(&dir.0) {
            let mut f = vec![0u8; 64];
            write_udp_frame(&spec, &mut f, 64).unwrap();
            let mut v = [Verdict::Flood];
            fabric::with_frames(std::slice::from_mut(&mut f), 0, 0, |p| {
                l.classify(
                    &Ctx {
                        now_ns: 0,
                        worker: 0,
                    },
                    0,
                    p,
                    &mut v,
                )
            });
            assert!(
                matches!(v[0], Verdict::Port(_) | Verdict::Flood | Verdict::Group(_)),
                "{}: {:?}",
                e.name,
                v[0]
            );
        }
    }
}
