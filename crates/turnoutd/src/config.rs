//! The daemon's configuration: the TOML file of docs/turnoutd.md, and the
//! JSON forms of its `[[ports]]` and `[logic]` tables that the control API
//! accepts (`port.add`, `logic.replace`). One parser serves both, so a port
//! added at run time is checked exactly like one in the file.
//!
//! Every table rejects unknown keys; every error names the key (`ports[1].kind`)
//! and the reason, in lower case. Parsing is pure (no sockets, no files but
//! the config itself): whether a port kind is built in is checked separately
//! by [`Config::check_backends`].
//!
//! A port's own keys are not defined here: each kind's struct, defaults and
//! limits live next to its backend in the `ports` crate
//! ([`ports::PortConfig`], re-exported as [`PortSpec`]), shared with
//! turnout-gen's port specs (docs/adding-a-port.md).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

pub use ports::af_packet::AfPacketConfig;
pub use ports::af_xdp::AfXdpConfig;
pub use ports::memif::MemifSpec;
pub use ports::tap::TapConfig;
pub use ports::tunnel::{NeighbourSpec, TunnelSpec, UnderlaySpec};
pub use ports::vhost_user::VhostUserConfig;
/// The backend-specific part of a port: one variant per kind, tagged by
/// `kind`, defined (with its limits) in the `ports` crate.
pub use ports::PortConfig as PortSpec;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Default control socket path.
pub const DEFAULT_CONTROL_SOCKET: &str = "/run/turnout/turnoutd.sock";
/// Default control socket mode.
pub const DEFAULT_SOCKET_MODE: u32 = 0o600;
/// Default metrics port when only a port is given.
pub const DEFAULT_METRICS_PORT: u16 = 9469;
/// Port kinds the config knows, built in or not, as `kind` spells them
/// (the older spellings `ports::PortKind::parse` reads are accepted too).
pub const PORT_KINDS: &[&str] = ports::config::KINDS;
/// Longest port name.
pub const MAX_PORT_NAME: usize = 64;

/// A configuration error: which key, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path of the key (`ports[1].kind`); empty for the whole file.
    pub path: String,
    /// Lower-case reason.
    pub message: String,
}

impl ConfigError {
    /// An error at `path`.
    pub fn new(path: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            path: path.into(),
            message: message.into(),
        }
    }
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.path.is_empty() {
            write!(f, "config: {}", self.message)
        } else {
            write!(f, "config: {}: {}", self.path, self.message)
        }
    }
}

impl std::error::Error for ConfigError {}

/// The wake-up model of the workers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Wakeup {
    /// Poll recently active queues, sleep when all are idle.
    #[default]
    Adaptive,
    /// Busy-poll every queue, always.
    Poll,
}

impl SwitchSection {
    /// The longest a worker lets a frame wait: the latency budget, zero
    /// when it always polls.
    pub fn latency_budget(&self) -> std::time::Duration {
        match self.wakeup {
            Wakeup::Poll => std::time::Duration::ZERO,
            Wakeup::Adaptive => std::time::Duration::from_micros(self.latency_budget_us as u64),
        }
    }
}

impl Wakeup {
    /// The fabric's mode.
    pub fn mode(self) -> fabric::WakeupMode {
        match self {
            Wakeup::Adaptive => fabric::WakeupMode::Adaptive,
            Wakeup::Poll => fabric::WakeupMode::Poll,
        }
    }
}

/// `[switch]`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSection {
    /// Path of the JSON-RPC control socket.
    #[serde(default = "default_socket")]
    pub control_socket: PathBuf,
    /// Permission bits of the control socket. Written `0o600` in TOML;
    /// `config.show` prints it as the string `"0o600"` (JSON has no octal
    /// numbers), which a config given as JSON may use too.
    #[serde(
        default = "default_socket_mode",
        serialize_with = "octal_mode",
        deserialize_with = "mode_from"
    )]
    pub control_socket_mode: u32,
    /// Frames per batch.
    #[serde(default = "default_batch")]
    pub batch: usize,
    /// Size of the port table.
    #[serde(default = "default_max_ports")]
    pub max_ports: usize,
    /// Wake-up model.
    #[serde(default)]
    pub wakeup: Wakeup,
    /// Adaptive wake-up: the longest a worker may let frames wait to save
    /// CPU, µs (0 = never sleep while frames arrive).
    #[serde(default = "default_budget")]
    pub latency_budget_us: u32,
    /// Prometheus endpoint: `"addr:port"` or `"port"` (loopback); off if absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<String>,
    /// OpenFlow 1.3 channel endpoints (`ptcp:[ADDR:]PORT`, `punix:PATH`,
    /// `tcp:HOST:PORT`); none by default (docs/flows.md, "OpenFlow").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub openflow: Vec<String>,
    /// What the switch does while no controller of the active endpoints
    /// is connected: `secure` (default: the flow tables stay in effect)
    /// or `standalone` (a learning bridge forwards; docs/flows.md).
    #[serde(default = "default_fail_mode")]
    pub openflow_fail_mode: String,
    /// The OpenFlow datapath id (features reply): an integer, 16 hex
    /// digits, `0x…` or 8 colon-separated bytes; absent: derived from the
    /// control socket's path (docs/flows.md, "OpenFlow").
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "datapath_id_serde"
    )]
    pub datapath_id: Option<u64>,
}

/// `[switch] datapath_id` in any form [`crate::openflow::switch::parse_datapath_id`]
/// takes; written as 16 hex digits (as `ovs-ofctl show` prints it).
mod datapath_id_serde {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(v: &Option<u64>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(d) => s.serialize_str(&crate::openflow::switch::format_datapath_id(*d)),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        crate::openflow::switch::parse_datapath_id(&v)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

/// A permission mode as `"0o600"`.
fn octal_mode<S: serde::Serializer>(mode: &u32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format!("{mode:#o}"))
}

/// A permission mode: a number (`0o600` in TOML) or its octal text
/// (`"0o600"`, `"0600"`, `"600"`, as `config.show` prints it).
fn mode_from<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Mode {
        Number(u32),
        Text(String),
    }
    match Mode::deserialize(d)? {
        Mode::Number(n) => Ok(n),
        Mode::Text(t) => {
            let digits = t.strip_prefix("0o").unwrap_or(&t);
            u32::from_str_radix(digits, 8).map_err(|_| {
                serde::de::Error::custom(format!(
                    "{t:?} is not an octal permission mode (e.g. 0o600)"
                ))
            })
        }
    }
}

fn default_fail_mode() -> String {
    "secure".into()
}

fn default_socket() -> PathBuf {
    PathBuf::from(DEFAULT_CONTROL_SOCKET)
}
fn default_socket_mode() -> u32 {
    DEFAULT_SOCKET_MODE
}
fn default_batch() -> usize {
    fabric::batch::DEFAULT_BATCH
}
fn default_max_ports() -> usize {
    1024
}
fn default_budget() -> u32 {
    fabric::DEFAULT_BUDGET_US
}

impl Default for SwitchSection {
    fn default() -> Self {
        Self {
            control_socket: default_socket(),
            control_socket_mode: DEFAULT_SOCKET_MODE,
            batch: default_batch(),
            max_ports: default_max_ports(),
            wakeup: Wakeup::Adaptive,
            latency_budget_us: default_budget(),
            metrics_listen: None,
            openflow: Vec::new(),
            openflow_fail_mode: default_fail_mode(),
            datapath_id: None,
        }
    }
}

impl SwitchSection {
    /// The metrics address, parsed (validated by [`Config::parse_str`]).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.metrics_listen
            .as_deref()
            .and_then(|s| parse_listen(s).ok())
    }
}

/// `[[workers]]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerSection {
    /// CPU to pin the worker to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<usize>,
    /// What the worker's CPU does when idle while turnoutd runs: `poll`
    /// keeps it in the kernel's polling idle state (its PM QoS resume
    /// latency set to 0), so a sleeping worker wakes in a few µs instead of
    /// the tens a halted virtual CPU takes; absent = the host's setting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_idle: Option<CpuIdle>,
}

/// `[[workers]] cpu_idle`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CpuIdle {
    /// The idle CPU polls (no halt): µs wake-ups; the CPU stays available
    /// to other threads but never enters a low-power state.
    Poll,
}

/// `[logic]`: a name from the logic table and its own keys.
#[derive(Clone, Debug, PartialEq)]
pub struct LogicConfig {
    /// Logic name.
    pub name: String,
    /// Every other key, handed to the logic's constructor.
    pub params: Map<String, Value>,
}

impl Default for LogicConfig {
    fn default() -> Self {
        Self {
            name: "bridge".into(),
            params: Map::new(),
        }
    }
}

impl LogicConfig {
    /// Parses a `[logic]` table (TOML or JSON) found at `path`.
    pub fn from_json(v: &Value, path: &str) -> Result<Self, ConfigError> {
        let obj = v.as_object().ok_or_else(|| {
            ConfigError::new(path, format!("expected a table, found {}", kind_of(v)))
        })?;
        let mut params = obj.clone();
        let name = match params.remove("name") {
            Some(Value::String(s)) if !s.is_empty() => s,
            Some(Value::String(_)) => {
                return Err(ConfigError::new(join(path, "name"), "must not be empty"))
            }
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "name"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"name\"")),
        };
        Ok(Self { name, params })
    }

    /// The table as JSON (name and every parameter).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        for (k, v) in &self.params {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }
}

/// One `[[ports]]` table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortConfig {
    /// Unique name.
    pub name: String,
    /// Worker owning its receive queues (round-robin if absent).
    pub worker: Option<usize>,
    /// Backend and its settings.
    pub spec: PortSpec,
}

impl PortConfig {
    /// Parses a `[[ports]]` table (TOML or JSON) found at `path`; `workers`
    /// is the number of workers, to check `worker`.
    pub fn from_json(v: &Value, path: &str, workers: usize) -> Result<Self, ConfigError> {
        let obj = v.as_object().ok_or_else(|| {
            ConfigError::new(path, format!("expected a table, found {}", kind_of(v)))
        })?;
        let mut rest = obj.clone();
        let name = match rest.remove("name") {
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "name"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"name\"")),
        };
        validate_port_name(&name).map_err(|m| ConfigError::new(join(path, "name"), m))?;
        let kind = match rest.remove("kind") {
            Some(Value::String(s)) => s,
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "kind"),
                    format!("expected a string, found {}", kind_of(&other)),
                ))
            }
            None => return Err(ConfigError::new(path, "missing key \"kind\"")),
        };
        let worker = match rest.remove("worker") {
            None | Some(Value::Null) => None,
            Some(Value::Number(n)) if n.as_u64().is_some() => {
                let w = n.as_u64().unwrap_or(u64::MAX);
                if w >= workers as u64 {
                    return Err(ConfigError::new(
                        join(path, "worker"),
                        format!("no worker {w} ({workers} configured, numbered from 0)"),
                    ));
                }
                Some(w as usize)
            }
            Some(other) => {
                return Err(ConfigError::new(
                    join(path, "worker"),
                    format!("expected a non-negative integer, found {}", kind_of(&other)),
                ))
            }
        };
        let kind = ports::PortKind::parse(&kind)
            .map_err(|e| ConfigError::new(join(path, "kind"), e.to_string()))?;
        let mut track = serde_path_to_error::Track::new();
        let de = serde_path_to_error::Deserializer::new(Value::Object(rest), &mut track);
        let spec = PortSpec::from_kind(kind.name(), de).map_err(|e| {
            let p = track.path().to_string();
            ConfigError::new(
                if p == "." {
                    path.to_string()
                } else {
                    join(path, &p)
                },
                lower(&e.to_string()),
            )
        })?;
        spec.validate()
            .map_err(|e| ConfigError::new(join(path, &e.field), e.message))?;
        Ok(Self { name, worker, spec })
    }

    /// The table as JSON, as the API and `config.show` present it.
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert("name".into(), Value::String(self.name.clone()));
        m.insert("kind".into(), Value::String(self.spec.kind().into()));
        if let Some(w) = self.worker {
            m.insert("worker".into(), Value::from(w));
        }
        if let Ok(Value::Object(spec)) = serde_json::to_value(&self.spec) {
            m.extend(spec);
        }
        // A tunnel's unset keys print as the values it runs with (what
        // `config.show` promises: every key, defaults included).
        if let PortSpec::Vxlan(t) | PortSpec::Geneve(t) = &self.spec {
            let kind = match &self.spec {
                PortSpec::Vxlan(_) => ports::tunnel::Kind::Vxlan,
                _ => ports::tunnel::Kind::Geneve,
            };
            if let Ok(c) = t.tunnel_config(kind) {
                for (k, v) in [
                    ("dst_port", Value::from(c.dst_port)),
                    ("fdb_size", Value::from(c.fdb_size)),
                    ("staging", Value::from(c.staging)),
                    ("ttl", Value::from(c.ttl)),
                ] {
                    m.entry(k).or_insert(v);
                }
            }
        }
        Value::Object(m)
    }
}

/// Checks a port name: 1..=64 bytes of `[A-Za-z0-9_.:-]`.
pub fn validate_port_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_PORT_NAME {
        return Err(format!("must be 1..={MAX_PORT_NAME} bytes long"));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | ':' | '-')))
    {
        return Err(format!(
            "{name:?} contains {c:?} (allowed: letters, digits, '_', '.', ':', '-')"
        ));
    }
    Ok(())
}

/// Checks that `port` can join `existing` (no duplicate name or resource).
/// `path` names the new port's table in errors.
pub fn check_conflicts<'a>(
    port: &PortConfig,
    path: &str,
    existing: impl IntoIterator<Item = (&'a str, &'a PortConfig)>,
) -> Result<(), ConfigError> {
    let (key, res) = port.spec.exclusive_key();
    for (where_, other) in existing {
        if other.name == port.name {
            return Err(ConfigError::new(
                join(path, "name"),
                format!("duplicate port name {:?} (also {where_})", port.name),
            ));
        }
        if other.spec.exclusive_key().1 == res {
            return Err(ConfigError::new(
                join(path, key),
                format!("{res} is already used by port {:?}", other.name),
            ));
        }
    }
    Ok(())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawConfig {
    #[serde(default)]
    switch: SwitchSection,
    #[serde(default)]
    workers: Vec<WorkerSection>,
    #[serde(default)]
    logic: Option<Value>,
    #[serde(default)]
    ports: Vec<Value>,
}

/// The whole configuration.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// `[switch]`.
    pub switch: SwitchSection,
    /// `[[workers]]` (at least one).
    pub workers: Vec<WorkerSection>,
    /// `[logic]`.
    pub logic: LogicConfig,
    /// `[[ports]]`, in order.
    pub ports: Vec<PortConfig>,
}

impl Config {
    /// Reads and parses a config file.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new(
                "",
                format!(
                    "cannot read {}: {}",
                    path.display(),
                    ports::netdev::errno_text(&e)
                ),
            )
        })?;
        Self::parse_str(&text)
    }

    /// Parses and validates a config text.
    pub fn parse_str(text: &str) -> Result<Self, ConfigError> {
        let de = toml::Deserializer::new(text);
        let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| {
            let path = e.path().to_string();
            let inner = e.into_inner();
            let mut msg = lower(&inner.message().trim().replace('\n', "; "));
            if let Some(span) = inner.span() {
                let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
                msg = format!("{msg} (line {line})");
            }
            ConfigError::new(if path == "." { String::new() } else { path }, msg)
        })?;
        let sw = &raw.switch;
        if !(fabric::batch::MIN_BATCH..=fabric::batch::MAX_BATCH).contains(&sw.batch) {
            return Err(ConfigError::new(
                "switch.batch",
                format!(
                    "{} not in {}..={}",
                    sw.batch,
                    fabric::batch::MIN_BATCH,
                    fabric::batch::MAX_BATCH
                ),
            ));
        }
        if sw.latency_budget_us > fabric::MAX_BUDGET_US {
            return Err(ConfigError::new(
                "switch.latency_budget_us",
                format!(
                    "{} not in 0..={}",
                    sw.latency_budget_us,
                    fabric::MAX_BUDGET_US
                ),
            ));
        }
        if !(2..=65534).contains(&sw.max_ports) {
            return Err(ConfigError::new(
                "switch.max_ports",
                format!("{} not in 2..=65534", sw.max_ports),
            ));
        }
        if sw.control_socket.as_os_str().is_empty() || sw.control_socket.as_os_str().len() > 107 {
            return Err(ConfigError::new(
                "switch.control_socket",
                "path must be 1..=107 bytes long",
            ));
        }
        if sw.control_socket_mode > 0o777 {
            return Err(ConfigError::new(
                "switch.control_socket_mode",
                format!(
                    "{:#o} is not a permission mode (at most 0o777)",
                    sw.control_socket_mode
                ),
            ));
        }
        if let Some(m) = &sw.metrics_listen {
            parse_listen(m).map_err(|e| ConfigError::new("switch.metrics_listen", e))?;
        }
        for (i, e) in sw.openflow.iter().enumerate() {
            crate::openflow::channel::Endpoint::parse(e)
                .map_err(|m| ConfigError::new(format!("switch.openflow[{i}]"), m))?;
        }
        crate::openflow::fail::FailMode::parse(&sw.openflow_fail_mode)
            .map_err(|m| ConfigError::new("switch.openflow_fail_mode", m))?;
        let mut workers = raw.workers;
        if workers.is_empty() {
            workers.push(WorkerSection::default());
        }
        if workers.len() > fabric::fabric::MAX_WORKERS {
            return Err(ConfigError::new(
                "workers",
                format!(
                    "{} workers, at most {}",
                    workers.len(),
                    fabric::fabric::MAX_WORKERS
                ),
            ));
        }
        let ncpu = cpus_configured();
        for (i, w) in workers.iter().enumerate() {
            if w.cpu_idle.is_some() && w.cpu.is_none() {
                return Err(ConfigError::new(
                    format!("workers[{i}].cpu_idle"),
                    "needs the worker pinned (cpu = N)",
                ));
            }
            if let Some(c) = w.cpu {
                if c >= ncpu {
                    return Err(ConfigError::new(
                        format!("workers[{i}].cpu"),
                        format!(
                            "cpu {c} does not exist (this machine has cpus 0..={})",
                            ncpu - 1
                        ),
                    ));
                }
            }
        }
        let logic = match &raw.logic {
            Some(v) => LogicConfig::from_json(v, "logic")?,
            None => LogicConfig::default(),
        };
        if raw.ports.len() > sw.max_ports {
            return Err(ConfigError::new(
                "ports",
                format!(
                    "{} ports but switch.max_ports is {}",
                    raw.ports.len(),
                    sw.max_ports
                ),
            ));
        }
        let mut ports: Vec<PortConfig> = Vec::with_capacity(raw.ports.len());
        for (i, v) in raw.ports.iter().enumerate() {
            let path = format!("ports[{i}]");
            let p = PortConfig::from_json(v, &path, workers.len())?;
            let labels: Vec<String> = (0..ports.len()).map(|j| format!("ports[{j}]")).collect();
            check_conflicts(
                &p,
                &path,
                labels.iter().map(String::as_str).zip(ports.iter()),
            )?;
            ports.push(p);
        }
        Ok(Self {
            switch: raw.switch,
            workers,
            logic,
            ports,
        })
    }

    /// Checks that every port's backend is built in.
    pub fn check_backends(&self) -> Result<(), ConfigError> {
        for (i, p) in self.ports.iter().enumerate() {
            if !crate::backends::available(p.spec.kind()) {
                return Err(ConfigError::new(
                    format!("ports[{i}].kind"),
                    crate::backends::unavailable_message(p.spec.kind()),
                ));
            }
        }
        Ok(())
    }

    /// The fabric's settings.
    pub fn switch_config(&self) -> fabric::SwitchConfig {
        fabric::SwitchConfig {
            batch: self.switch.batch,
            max_ports: self.switch.max_ports,
            workers: self.workers.iter().map(|w| w.cpu).collect(),
            wakeup: self.switch.wakeup.mode(),
            latency_budget_us: self.switch.latency_budget_us,
            ..fabric::SwitchConfig::default()
        }
    }

    /// The whole config as JSON (what `config.show` answers).
    pub fn to_json(&self) -> Value {
        let mut m = Map::new();
        m.insert(
            "switch".into(),
            serde_json::to_value(&self.switch).unwrap_or(Value::Null),
        );
        m.insert(
            "workers".into(),
            serde_json::to_value(&self.workers).unwrap_or(Value::Null),
        );
        m.insert("logic".into(), self.logic.to_json());
        m.insert(
            "ports".into(),
            Value::Array(self.ports.iter().map(PortConfig::to_json).collect()),
        );
        Value::Object(m)
    }
}

/// Parses `"addr:port"`, `"[v6]:port"` or `"port"` (loopback).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(p) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), p));
    }
    s.parse::<SocketAddr>()
        .map_err(|_| format!("{s:?} is not \"address:port\" or \"port\""))
}

/// Name of a JSON value's type, for error messages.
pub fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "a table",
    }
}

fn join(path: &str, key: &str) -> String {
    if key.is_empty() {
        path.to_string()
    } else if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Lower-cases the first letter of a message.
fn lower(s: &str) -> String {
    let s = s.trim_end();
    let mut c = s.chars();
    match c.next() {
        Some(f)
            if f.is_ascii_uppercase()
                && !c.clone().next().is_some_and(|n| n.is_ascii_uppercase()) =>
        {
            f.to_ascii_lowercase().to_string() + c.as_str()
        }
        _ => s.to_string(),
    }
}

fn cpus_configured() -> usize {
    crate::sys::cpus_configured()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const FULL: &str = r#"
[switch]
control_socket = "/run/turnout/t.sock"
control_socket_mode = 0o660
batch = 64
max_ports = 16
wakeup = "poll"
metrics_listen = "127.0.0.1:9469"

[[workers]]
cpu = 0

[[workers]]

[logic]
name = "patch"
pairs = [["vnf0", "wire0"]]

[[ports]]
name = "vnf0"
kind = "memif"
socket = "/run/turnout/memif.sock"
id = 3
secret = "s3cret"
queues = 2
ring_size = 2048
buffer_size = 4096
worker = 1

[[ports]]
name = "wire0"
kind = "af_packet"
iface = "veth0"
fanout = "lb"

[[ports]]
name = "x0"
kind = "af_xdp"
iface = "veth1"

[[ports]]
name = "host"
kind = "tap"
iface = "turnout0"

[[ports]]
name = "vm0"
kind = "vhost_user"
socket = "/run/turnout/vm0.sock"
client = true
"#;

    #[test]
    fn full_config() {
        let c = Config::parse_str(FULL).unwrap();
        assert_eq!(
            c.switch.control_socket,
            PathBuf::from("/run/turnout/t.sock")
        );
        assert_eq!(c.switch.control_socket_mode, 0o660);
        assert_eq!(
            (c.switch.batch, c.switch.max_ports, c.switch.wakeup),
            (64, 16, Wakeup::Poll)
        );
        assert_eq!(
            c.switch.metrics_addr(),
            Some("127.0.0.1:9469".parse().unwrap())
        );
        assert_eq!(
            c.workers,
            vec![
                WorkerSection {
                    cpu: Some(0),
                    cpu_idle: None
                },
                WorkerSection {
                    cpu: None,
                    cpu_idle: None
                }
            ]
        );
        assert_eq!(c.logic.name, "patch");
        assert_eq!(
            c.logic.params.get("pairs"),
            Some(&json!([["vnf0", "wire0"]]))
        );
        assert_eq!(c.ports.len(), 5);
        assert_eq!(c.ports[0].worker, Some(1));
        assert_eq!(
            c.ports[0].spec,
            PortSpec::Memif(MemifSpec {
                socket: "/run/turnout/memif.sock".into(),
                id: 3,
                secret: Some("s3cret".into()),
                queues: 2,
                ring_size: 2048,
                buffer_size: 4096,
                max_frame_b: None
            })
        );
        assert_eq!(c.ports[1].spec.kind(), "af_packet");
        assert_eq!(
            c.ports[4].spec,
            PortSpec::VhostUser(VhostUserConfig {
                mode: ports::vhost_user::Mode::Client,
                ..VhostUserConfig::new("/run/turnout/vm0.sock")
            })
        );
        let sc = c.switch_config();
        assert_eq!(sc.workers, vec![Some(0), None]);
        assert_eq!(sc.wakeup, fabric::WakeupMode::Poll);
        // Always polling: frames wait for no wake-up (AF_PACKET ports take
        // frames one by one).
        assert_eq!(c.switch.latency_budget(), std::time::Duration::ZERO);
        // The JSON form parses back to the same config.
        let j = c.to_json();
        assert_eq!(
            j["ports"][0],
            json!({"name": "vnf0", "kind": "memif", "worker": 1, "socket": "/run/turnout/memif.sock", "id": 3, "secret": "s3cret", "queues": 2, "ring_size": 2048, "buffer_size": 4096})
        );
        for (i, p) in c.ports.iter().enumerate() {
            assert_eq!(
                &PortConfig::from_json(&p.to_json(), "", 2).unwrap(),
                p,
                "port {i}"
            );
        }
        assert_eq!(
            LogicConfig::from_json(&c.logic.to_json(), "logic").unwrap(),
            c.logic
        );
    }

    #[test]
    fn defaults() {
        let c = Config::parse_str("").unwrap();
        assert_eq!(c.switch, SwitchSection::default());
        assert_eq!(
            c.switch.control_socket,
            PathBuf::from(DEFAULT_CONTROL_SOCKET)
        );
        assert_eq!(c.switch.control_socket_mode, 0o600);
        // shown in octal, as it is written
        assert_eq!(c.to_json()["switch"]["control_socket_mode"], "0o600");
        assert_eq!(c.switch.wakeup, Wakeup::Adaptive);
        assert_eq!(
            c.switch.latency_budget(),
            std::time::Duration::from_micros(100)
        );
        assert_eq!(c.switch.metrics_addr(), None);
        assert_eq!(c.workers, vec![WorkerSection::default()]);
        assert_eq!(c.logic, LogicConfig::default());
        assert!(c.ports.is_empty());
        let c = Config::parse_str("[switch]\nmetrics_listen = \"9500\"\n[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\n").unwrap();
        assert_eq!(
            c.switch.metrics_addr(),
            Some("127.0.0.1:9500".parse().unwrap())
        );
        assert_eq!(
            c.ports[0].spec,
            PortSpec::Memif(MemifSpec {
                socket: "/s".into(),
                id: 0,
                secret: None,
                queues: 1,
                ring_size: 1024,
                buffer_size: 2048,
                max_frame_b: None
            })
        );
    }

    fn err(text: &str) -> String {
        Config::parse_str(text).unwrap_err().to_string()
    }

    #[test]
    fn bad_configs_name_the_key_and_the_reason() {
        let cases: &[(&str, &str)] = &[
            ("[switch]\nbatchh = 3\n", "config: switch.batchh: unknown field `batchh`, expected one of `control_socket`, `control_socket_mode`, `batch`, `max_ports`, `wakeup`, `latency_budget_us`, `metrics_listen`, `openflow`, `openflow_fail_mode`, `datapath_id` (line 2)"),
            ("[switch]\nwakeup = \"pol\"\n", "config: switch.wakeup: unknown variant `pol`, expected `adaptive` or `poll` (line 2)"),
            ("[switch]\nbatch = 8\n", "config: switch.batch: 8 not in 32..=1024"),
            ("[switch]\nbatch = \"big\"\n", "config: switch.batch: invalid type: string \"big\", expected usize (line 2)"),
            ("[switch]\nmax_ports = 1\n", "config: switch.max_ports: 1 not in 2..=65534"),
            ("[switch]\ncontrol_socket_mode = 0o1777\n", "config: switch.control_socket_mode: 0o1777 is not a permission mode (at most 0o777)"),
            ("[switch]\nmetrics_listen = \"localhost\"\n", "config: switch.metrics_listen: \"localhost\" is not \"address:port\" or \"port\""),
            ("[[workers]]\ncpu = 4096\n", "config: workers[0].cpu: cpu 4096 does not exist (this machine has cpus 0..="),
            ("[[workers]]\ncore = 1\n", "config: workers[0].core: unknown field `core`, expected `cpu` or `cpu_idle` (line 2)"),
            ("[switch]\nlatency_budget_us = 20000\n", "config: switch.latency_budget_us: 20000 not in 0..=10000"),
            ("[switch]\nopenflow_fail_mode = \"open\"\n", "config: switch.openflow_fail_mode: \"open\": must be \"secure\""),
            ("[switch]\ndatapath_id = 0\n", "config: switch.datapath_id: 0 is not a datapath id (1..=2^64-1)"),
            ("[switch]\ndatapath_id = -5\n", "config: switch.datapath_id: -5 is not a datapath id (an integer 1..=2^64-1, 16 hex digits, 0x and 1..=16 hex digits, or 8 colon-separated hex bytes)"),
            ("[switch]\ndatapath_id = \"12\"\n", "config: switch.datapath_id: \"12\" is not a datapath id ("),
            ("[switch]\ndatapath_id = \"0x1g\"\n", "config: switch.datapath_id: \"0x1g\" is not a datapath id ("),
            ("[switch]\ndatapath_id = \"0x10000000000000000\"\n", "config: switch.datapath_id: \"0x10000000000000000\" is not a datapath id ("),
            ("[switch]\ndatapath_id = 1.5\n", "config: switch.datapath_id: 1.5 is not a datapath id ("),
            ("[switch]\ndatapath_id = true\n", "config: switch.datapath_id: expected a datapath id ("),
            ("[[workers]]\ncpu_idle = \"poll\"\n", "config: workers[0].cpu_idle: needs the worker pinned (cpu = N)"),
            ("[[workers]]\ncpu = 0\ncpu_idle = \"halt\"\n", "config: workers[0].cpu_idle: unknown variant `halt`, expected `poll` (line 3)"),
            ("[routing]\n", "config: routing: unknown field `routing`, expected one of `switch`, `workers`, `logic`, `ports` (line 1)"),
            ("[logic]\naging_s = 3\n", "config: logic: missing key \"name\""),
            ("[logic]\nname = 3\n", "config: logic.name: expected a string, found a number"),
            ("[[ports]]\nkind = \"memif\"\n", "config: ports[0]: missing key \"name\""),
            ("[[ports]]\nname = \"a b\"\nkind = \"memif\"\n", "config: ports[0].name: \"a b\" contains ' ' (allowed: letters, digits, '_', '.', ':', '-')"),
            ("[[ports]]\nname = \"a\"\n", "config: ports[0]: missing key \"kind\""),
            ("[[ports]]\nname = \"a\"\nkind = \"memfi\"\n", "config: ports[0].kind: unknown port kind \"memfi\" (expected one of memif, af_xdp (or afxdp), af_packet (or afpacket), tap, vhost_user (or vhost-user, vhost), vxlan, geneve)"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\n", "config: ports[0]: missing field `socket`"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nrings = 4\n", "config: ports[0].rings: unknown field `rings`, expected one of `socket`, `id`, `secret`, `queues`, `ring_size`, `buffer_size`, `max_frame_b`"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 1000\n", "config: ports[0].ring_size: 1000 is not a power of two in 2..=16384"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 32768\n", "config: ports[0].ring_size: 32768 is not a power of two in 2..=16384"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nqueues = 0\n", "config: ports[0].queues: 0 not in 1..=256"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nqueues = 257\n", "config: ports[0].queues: 257 not in 1..=256"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nbuffer_size = 63\n", "config: ports[0].buffer_size: 63 not in 64..=65535"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nqueues = -1\n", "config: ports[0].queues: invalid value: integer `-1`, expected u16"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nsecret = \"012345678901234567890123\"\n", "config: ports[0].secret: 24 bytes long, at most 23 (no NUL)"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nring_size = 2\nmax_frame_b = 9000\n", "config: ports[0].max_frame_b: 9000 needs 5 buffers of 2048 B, more than the ring's 2 or 256"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_xdp\"\niface = \"v0\"\nbind = \"zc\"\n", "config: ports[0].bind: unknown variant `zc`, expected one of `auto`, `copy`, `zero_copy`"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\nworker = 1\n", "config: ports[0].worker: no worker 1 (1 configured, numbered from 0)"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"a-very-long-interface\"\n", "config: ports[0].iface: \"a-very-long-interface\" is not a valid interface name (1..=15 bytes, no '/', ':', '%' or spaces)"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"v0\"\nfanout = \"rr\"\n", "config: ports[0].fanout: unknown variant `rr`, expected one of `hash`, `lb`, `cpu`, `queue`"),
            ("[[ports]]\nname = \"a\"\nkind = \"af_xdp\"\niface = \"v0\"\n[[ports]]\nname = \"a\"\nkind = \"tap\"\niface = \"t0\"\n", "config: ports[1].name: duplicate port name \"a\" (also ports[0])"),
            ("[[ports]]\nname = \"a\"\nkind = \"memif\"\nsocket = \"/s\"\n[[ports]]\nname = \"b\"\nkind = \"memif\"\nsocket = \"/s\"\n", "config: ports[1].id: memif id 0 on socket /s is already used by port \"a\""),
            ("[[ports]]\nname = \"a\"\nkind = \"af_packet\"\niface = \"v0\"\n[[ports]]\nname = \"b\"\nkind = \"af_xdp\"\niface = \"v0\"\n", "config: ports[1].iface: interface v0 is already used by port \"a\""),
            ("[switch\n", "config: invalid table header; expected `.`, `]` (line 1)"),
            ("ports = 3\n", "config: ports: invalid type: integer `3`, expected a sequence (line 1)"),
        ];
        for (text, want) in cases {
            let got = err(text);
            assert!(
                got.starts_with(want),
                "config {text:?}\n got: {got}\nwant: {want}"
            );
        }
    }

    #[test]
    fn datapath_id_forms_and_round_trip() {
        for (v, want) in [
            ("1", 1u64),
            ("0xa1", 0xa1),
            ("\"00000000000000a1\"", 0xa1),
            ("\"0x00000000000000a1\"", 0xa1),
            ("\"00:00:00:00:00:00:00:a1\"", 0xa1),
            ("\"0xffffffffffffffff\"", u64::MAX),
        ] {
            let c = Config::parse_str(&format!("[switch]\ndatapath_id = {v}\n")).unwrap();
            assert_eq!(c.switch.datapath_id, Some(want), "{v}");
            // config.show writes it as 16 hex digits, which parse back.
            let j = serde_json::to_value(&c.switch).unwrap();
            assert_eq!(j["datapath_id"], json!(format!("{want:016x}")));
            let back: SwitchSection = serde_json::from_value(j).unwrap();
            assert_eq!(back.datapath_id, Some(want));
        }
        let c = Config::parse_str("").unwrap();
        assert_eq!(c.switch.datapath_id, None);
        assert!(serde_json::to_value(&c.switch)
            .unwrap()
            .get("datapath_id")
            .is_none());
    }

    #[test]
    fn tunnel_ports() {
        let text = r#"
[[ports]]
name = "vx0"
kind = "vxlan"
vni = 100
local_ip = "192.168.50.1"
remotes = ["192.168.50.2", "192.168.50.3"]
neighbours = [{ ip = "192.168.50.2", mac = "02:00:00:00:00:02" }]
underlay = { kind = "af_packet", iface = "uplink0" }

[[ports]]
name = "gn0"
kind = "geneve"
vni = 7
local_ip = "fd00:50::1"
learning = false
dst_port = 7000
underlay = { kind = "af_xdp", iface = "uplink1", queues = 2 }
"#;
        let c = Config::parse_str(text).unwrap();
        let PortSpec::Vxlan(v) = &c.ports[0].spec else {
            panic!("{:?}", c.ports[0].spec)
        };
        assert_eq!(
            (v.vni, v.remotes.len(), v.learning, v.aging_s),
            (100, 2, true, 300)
        );
        assert_eq!(v.underlay.iface(), "uplink0");
        assert_eq!(c.ports[1].spec.kind(), "geneve");
        assert_eq!(c.ports[1].spec.queues(), 2);
        // The JSON form (config.show) has every key, the defaults the
        // tunnel runs with included, and reads back to the same port.
        let j = c.ports[0].to_json();
        assert_eq!(
            (&j["dst_port"], &j["fdb_size"], &j["staging"], &j["ttl"]),
            (&json!(4789), &json!(4096), &json!(1024), &json!(64)),
            "{j}"
        );
        assert_eq!(
            c.ports[1].to_json()["dst_port"],
            7000,
            "given, not the default"
        );
        assert_eq!(c.ports[1].to_json()["learning"], false);
        for p in &c.ports {
            let back = PortConfig::from_json(&p.to_json(), "", 1).unwrap();
            assert_eq!(back.to_json(), p.to_json());
            assert_eq!(back.name, p.name);
        }
        let base = "[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nunderlay = { kind = \"af_packet\", iface = \"u0\" }\n";
        let cases: &[(&str, &str)] = &[
            ("vni = 16777216\nlocal_ip = \"10.0.0.1\"\n", "config: ports[0].vni: 16777216 not in 0..=16777215"),
            ("vni = 1\nlocal_ip = \"0.0.0.0\"\n", "config: ports[0].local_ip: 0.0.0.0 is not a unicast address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nremotes = [\"fd00::1\"]\n", "config: ports[0].remotes: fd00::1 is not of local_ip's family"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nremotes = [\"10.0.0.1\"]\n", "config: ports[0].remotes: 10.0.0.1 is not a remote unicast address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nneighbours = [{ ip = \"10.0.0.2\", mac = \"ff:ff:ff:ff:ff:ff\" }]\n", "config: ports[0].neighbours: \"ff:ff:ff:ff:ff:ff\" is not a unicast MAC address"),
            ("vni = 1\nlocal_ip = \"10.0.0.1\"\nstaging = 1000\n", "config: ports[0].staging: 1000 is not a power of two in 8..=65536"),
            ("vni = 1\n", "config: ports[0]: missing field `local_ip`"),
        ];
        for (extra, want) in cases {
            let got = err(&format!("{base}{extra}"));
            assert!(
                got.starts_with(want),
                "{extra:?}\n got: {got}\nwant: {want}"
            );
        }
        let got = err("[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nvni = 1\nlocal_ip = \"10.0.0.1\"\nunderlay = { kind = \"tap\", iface = \"u0\" }\n");
        assert!(
            got.contains("ports[0].underlay")
                && got.ends_with(
                    ": unknown variant `tap`, expected one of `af_packet`, `afpacket`, `af_xdp`, `afxdp`"
                ),
            "{got}"
        );
        let got = err("[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nvni = 1\nlocal_ip = \"10.0.0.1\"\nunderlay = { kind = \"af-packet\", iface = \"u0\" }\n");
        assert!(
            got.ends_with(
                ": unknown variant `af-packet`, expected one of `af_packet`, `afpacket`, `af_xdp`, `afxdp`"
            ),
            "{got}"
        );
        let got = err("[[ports]]\nname = \"t\"\nkind = \"vxlan\"\nvni = 1\nlocal_ip = \"10.0.0.1\"\nunderlay = { kind = \"af_packet\", iface = \"u0\", colour = 1 }\n");
        assert!(got.contains("unknown field `colour`"), "{got}");
        // A tunnel's underlay interface is not shared with another port.
        let got = err(&format!("{base}vni = 1\nlocal_ip = \"10.0.0.1\"\n[[ports]]\nname = \"b\"\nkind = \"af_packet\"\niface = \"u0\"\n"));
        assert!(
            got.starts_with("config: ports[1].iface: interface u0 is already used by port \"t\""),
            "{got}"
        );
    }

    #[test]
    fn socket_modes_read_as_octal_numbers_or_text_and_show_as_text() {
        for (toml, mode) in [
            ("control_socket_mode = 0o660", 0o660),
            ("control_socket_mode = 432", 0o660),
            ("control_socket_mode = \"0o660\"", 0o660),
            ("control_socket_mode = \"0660\"", 0o660),
            ("control_socket_mode = \"600\"", 0o600),
        ] {
            let c = Config::parse_str(&format!("[switch]\n{toml}\n")).unwrap();
            assert_eq!(c.switch.control_socket_mode, mode, "{toml}");
            let shown = c.to_json()["switch"]["control_socket_mode"].clone();
            assert_eq!(shown, json!(format!("{mode:#o}")));
            // what config.show prints reads back
            let back: SwitchSection =
                serde_json::from_value(c.to_json()["switch"].clone()).unwrap();
            assert_eq!(back.control_socket_mode, mode);
        }
        let e = Config::parse_str("[switch]\ncontrol_socket_mode = \"rw\"\n").unwrap_err();
        assert!(
            e.to_string().contains("not an octal permission mode"),
            "{e}"
        );
    }

    #[test]
    fn the_examples_parse() {
        for text in [
            include_str!("../../../docs/examples/turnoutd.toml"),
            include_str!("../../../docs/examples/vxlan.toml"),
            include_str!("../../../docs/examples/flows.toml"),
        ] {
            let c = Config::parse_str(text).unwrap();
            assert!(!c.ports.is_empty());
        }
    }

    #[test]
    fn api_port_tables() {
        let e = PortConfig::from_json(&json!({"name": "p", "kind": "memif", "socket": 5}), "", 1)
            .unwrap_err();
        assert_eq!(
            e,
            ConfigError::new("socket", "invalid type: integer `5`, expected path string")
        );
        let e = PortConfig::from_json(&json!(["p"]), "", 1).unwrap_err();
        assert_eq!(e.message, "expected a table, found an array");
        let e = PortConfig::from_json(
            &json!({"name": "p", "kind": "tap", "iface": "t0", "worker": "0"}),
            "",
            1,
        )
        .unwrap_err();
        assert_eq!(
            e,
            ConfigError::new("worker", "expected a non-negative integer, found a string")
        );
        let p = PortConfig::from_json(
            &json!({"name": "p", "kind": "tap", "iface": "t0", "worker": 0}),
            "",
            1,
        )
        .unwrap();
        assert_eq!(p.worker, Some(0));
        assert_eq!(
            validate_port_name(&"x".repeat(65)).unwrap_err(),
            "must be 1..=64 bytes long"
        );
    }
    #[test]
    fn older_spellings_of_a_kind_are_read_and_shown_as_turnoutd_spells_it() {
        let text = r#"
[[ports]]
name = "x"
kind = "afxdp"
iface = "v0"

[[ports]]
name = "p"
kind = "afpacket"
iface = "v1"

[[ports]]
name = "vu"
kind = "vhost-user"
socket = "/s1"

[[ports]]
name = "vh"
kind = "vhost"
socket = "/s2"

[[ports]]
name = "vx"
kind = "vxlan"
vni = 1
local_ip = "192.168.50.1"
underlay = { kind = "afpacket", iface = "u0" }

[[ports]]
name = "gn"
kind = "geneve"
vni = 2
local_ip = "192.168.50.1"
underlay = { kind = "afxdp", iface = "u1" }
"#;
        let c = Config::parse_str(text).unwrap();
        let kinds: Vec<_> = c.ports.iter().map(|p| p.spec.kind()).collect();
        assert_eq!(
            kinds,
            [
                "af_xdp",
                "af_packet",
                "vhost_user",
                "vhost_user",
                "vxlan",
                "geneve"
            ]
        );
        let shown = c.to_json();
        let shown: Vec<_> = shown["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["kind"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(shown, kinds);
        assert_eq!(c.to_json()["ports"][4]["underlay"]["kind"], "af_packet");
        assert_eq!(c.to_json()["ports"][5]["underlay"]["kind"], "af_xdp");
        // the same through the API's JSON form
        let p = PortConfig::from_json(&json!({"name": "p", "kind": "afxdp", "iface": "v0"}), "", 1)
            .unwrap();
        assert_eq!(p.spec.kind(), "af_xdp");
        assert_eq!(p.to_json()["kind"], "af_xdp");
        let e = PortConfig::from_json(&json!({"name": "p", "kind": "af-xdp"}), "", 1).unwrap_err();
        assert_eq!(
            e,
            ConfigError::new(
                "kind",
                "unknown port kind \"af-xdp\" (expected one of memif, af_xdp (or afxdp), af_packet (or afpacket), tap, vhost_user (or vhost-user, vhost), vxlan, geneve)"
            )
        );
    }
}
