//! The control API, version [`API_VERSION`]: JSON-RPC 2.0 request and
//! response types, error codes, and the typed parameters and results of
//! every method. This file is the one definition; docs/turnoutd.md describes
//! it and `turnout ctl` speaks it.
//!
//! Framing: one JSON object per line in each direction (at most
//! [`MAX_LINE_B`] bytes per request). A request without `"id"` is a
//! notification: it is executed and not answered. Batches (arrays) are
//! answered with an invalid-request error.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// Version of this API; bumped on incompatible changes.
pub const API_VERSION: u32 = 1;
/// Longest request line accepted, in bytes.
pub const MAX_LINE_B: usize = 1 << 20;

/// Error codes.
pub mod code {
    /// The line is not JSON.
    pub const PARSE_ERROR: i32 = -32700;
    /// Not a JSON-RPC 2.0 request object.
    pub const INVALID_REQUEST: i32 = -32600;
    /// No such method.
    pub const METHOD_NOT_FOUND: i32 = -32601;
    /// Parameters of the wrong shape, type or range.
    pub const INVALID_PARAMS: i32 = -32602;
    /// A named port does not exist.
    pub const NOT_FOUND: i32 = 1;
    /// A port with that name (or resource) exists.
    pub const ALREADY_EXISTS: i32 = 2;
    /// Refused (logic load or command failed); the running state stays.
    pub const REFUSED: i32 = 3;
    /// The port backend failed.
    pub const BACKEND: i32 = 4;
}

/// An error answer: `{code, message}` with a lower-case message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    /// One of [`code`].
    pub code: i32,
    /// What went wrong, lower case.
    pub message: String,
}

impl ApiError {
    /// An error with this code and message.
    pub fn new(code: i32, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
    /// `-32602 invalid params`.
    pub fn params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

/// Every method, with its parameters.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    /// `version`.
    Version,
    /// `config.show`.
    ConfigShow,
    /// `port.list`.
    PortList,
    /// `port.add`: a `[[ports]]` table (validated by the config parser).
    PortAdd(Value),
    /// `port.remove`.
    PortRemove(PortRemoveParams),
    /// `logic.show`.
    LogicShow,
    /// `logic.replace`: a `[logic]` table.
    LogicReplace(Value),
    /// `logic.command`.
    LogicCommand(LogicCommandParams),
    /// `stats`.
    Stats,
    /// `stats.reset`.
    StatsReset,
    /// `tunnel.show`: a vxlan / geneve port's endpoints and learned MACs.
    TunnelShow(PortRemoveParams),
    /// `switch.show`: the switch-wide settings that can change at run time.
    SwitchShow,
    /// `switch.set`: change them.
    SwitchSet(SwitchSetParams),
}

/// Method names, in documentation order.
pub const METHODS: [&str; 13] = [
    "version",
    "config.show",
    "port.list",
    "port.add",
    "port.remove",
    "logic.show",
    "logic.replace",
    "logic.command",
    "stats",
    "stats.reset",
    "tunnel.show",
    "switch.show",
    "switch.set",
];

/// One endpoint in `tunnel.show`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TunnelRemote {
    /// Its tunnel address.
    pub ip: String,
    /// Its underlay next hop's MAC is known (frames can be sent).
    pub resolved: bool,
    /// Learned from traffic (ages out) rather than configured.
    pub learned: bool,
}

/// One learned MAC in `tunnel.show`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TunnelMac {
    /// Inner MAC address.
    pub mac: String,
    /// The endpoint it is behind.
    pub remote: String,
    /// Seconds since last seen.
    pub age_s: u32,
}

/// `tunnel.show` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TunnelShowResult {
    /// Port name.
    pub name: String,
    /// "vxlan" or "geneve".
    pub kind: String,
    /// Endpoints (static and learned).
    pub remotes: Vec<TunnelRemote>,
    /// Learned MACs.
    pub macs: Vec<TunnelMac>,
}

/// `port.remove` parameters.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortRemoveParams {
    /// Port name.
    pub name: String,
}

/// `switch.set` parameters: the keys to change (at least one).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SwitchSetParams {
    /// The OpenFlow datapath id, in any form `[switch] datapath_id` takes.
    pub datapath_id: Value,
}

/// `switch.show` and `switch.set` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SwitchShowResult {
    /// The OpenFlow datapath id in use, 16 hex digits.
    pub datapath_id: String,
    /// Whether it was configured (`[switch] datapath_id` or `switch.set`)
    /// rather than derived from the control socket's path.
    pub datapath_id_configured: bool,
}

/// `logic.command` parameters.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogicCommandParams {
    /// Command name (one of `logic.show`'s commands).
    pub cmd: String,
    /// Its arguments (logic-specific), `null` if absent.
    #[serde(default)]
    pub args: Value,
}

impl Call {
    /// Types the parameters of `method`.
    pub fn parse(method: &str, params: Option<Value>) -> Result<Call, ApiError> {
        let none = |c: Call| -> Result<Call, ApiError> {
            match &params {
                None | Some(Value::Null) => Ok(c),
                Some(Value::Object(m)) if m.is_empty() => Ok(c),
                Some(Value::Array(a)) if a.is_empty() => Ok(c),
                Some(_) => Err(ApiError::params(format!("{method} takes no parameters"))),
            }
        };
        let object = |p: Option<Value>| -> Result<Value, ApiError> {
            match p {
                Some(v @ Value::Object(_)) => Ok(v),
                None | Some(Value::Null) => Err(ApiError::params(format!(
                    "{method} needs an object of parameters"
                ))),
                Some(other) => Err(ApiError::params(format!(
                    "{method}: params must be an object, found {}",
                    crate::config::kind_of(&other)
                ))),
            }
        };
        match method {
            "version" => none(Call::Version),
            "config.show" => none(Call::ConfigShow),
            "port.list" => none(Call::PortList),
            "port.add" => Ok(Call::PortAdd(object(params)?)),
            "port.remove" => Ok(Call::PortRemove(typed(method, object(params)?)?)),
            "logic.show" => none(Call::LogicShow),
            "logic.replace" => Ok(Call::LogicReplace(object(params)?)),
            "logic.command" => Ok(Call::LogicCommand(typed(method, object(params)?)?)),
            "stats" => none(Call::Stats),
            "stats.reset" => none(Call::StatsReset),
            "tunnel.show" => Ok(Call::TunnelShow(typed(method, object(params)?)?)),
            "switch.show" => none(Call::SwitchShow),
            "switch.set" => Ok(Call::SwitchSet(typed(method, object(params)?)?)),
            other => Err(ApiError::new(
                code::METHOD_NOT_FOUND,
                format!("unknown method {other:?} (methods: {})", METHODS.join(", ")),
            )),
        }
    }
}

fn typed<T: serde::de::DeserializeOwned>(method: &str, v: Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let p = e.path().to_string();
        let m = e.into_inner().to_string();
        if p == "." {
            ApiError::params(format!("{method}: {m}"))
        } else {
            ApiError::params(format!("{method}: {p}: {m}"))
        }
    })
}

/// A parsed request: its id (`None` for a notification) and call.
#[derive(Debug)]
pub struct Request {
    /// Request id to echo; `None` means notification.
    pub id: Option<Value>,
    /// Method name.
    pub method: String,
    /// Raw parameters.
    pub params: Option<Value>,
}

/// Parses one request line. On error returns the id to answer with
/// (`null` when it could not be read) and the error.
pub fn parse_request(line: &[u8]) -> Result<Request, (Value, ApiError)> {
    let v: Value = serde_json::from_slice(line).map_err(|e| {
        (
            Value::Null,
            ApiError::new(code::PARSE_ERROR, format!("parse error: {e}")),
        )
    })?;
    let mut obj = match v {
        Value::Object(m) => m,
        Value::Array(_) => {
            return Err((
                Value::Null,
                ApiError::new(code::INVALID_REQUEST, "batch requests are not supported"),
            ))
        }
        other => {
            return Err((
                Value::Null,
                ApiError::new(
                    code::INVALID_REQUEST,
                    format!(
                        "request must be an object, found {}",
                        crate::config::kind_of(&other)
                    ),
                ),
            ))
        }
    };
    let id = obj.remove("id");
    let echo = match &id {
        // A number id must be an integer that fits 64 bits: anything else
        // is parsed as a float and would be echoed with another value
        // (found by fuzzing: 866…6 with 53 digits came back as
        // 8.666666666666666e52), and the client could not match its answer.
        Some(Value::Number(n)) if !(n.is_i64() || n.is_u64()) => {
            return Err((
                Value::Null,
                ApiError::new(
                    code::INVALID_REQUEST,
                    "a number id must be an integer of at most 64 bits",
                ),
            ))
        }
        Some(v @ (Value::Null | Value::Number(_) | Value::String(_))) => v.clone(),
        Some(other) => {
            return Err((
                Value::Null,
                ApiError::new(
                    code::INVALID_REQUEST,
                    format!(
                        "id must be a number, string or null, found {}",
                        crate::config::kind_of(other)
                    ),
                ),
            ))
        }
        None => Value::Null,
    };
    match obj.remove("jsonrpc") {
        Some(Value::String(s)) if s == "2.0" => {}
        _ => {
            return Err((
                echo,
                ApiError::new(code::INVALID_REQUEST, "\"jsonrpc\" must be \"2.0\""),
            ))
        }
    }
    let method = match obj.remove("method") {
        Some(Value::String(s)) => s,
        Some(_) => {
            return Err((
                echo,
                ApiError::new(code::INVALID_REQUEST, "\"method\" must be a string"),
            ))
        }
        None => {
            return Err((
                echo,
                ApiError::new(code::INVALID_REQUEST, "missing \"method\""),
            ))
        }
    };
    let params = obj.remove("params");
    if let Some(k) = obj.keys().next() {
        return Err((
            echo,
            ApiError::new(code::INVALID_REQUEST, format!("unknown member {k:?}")),
        ));
    }
    Ok(Request { id, method, params })
}

/// A success response line (without newline).
pub fn response_ok(id: &Value, result: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()
}

/// An error response line (without newline).
pub fn response_err(id: &Value, err: &ApiError) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": err.code, "message": err.message}})
        .to_string()
}

/// `version` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct VersionResult {
    /// Daemon version.
    pub version: String,
    /// [`API_VERSION`].
    pub api: u32,
    /// Git commit the binary was built from (`unknown` outside a checkout).
    pub git: String,
}

/// One `port.list` entry.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortListEntry {
    /// Port id.
    pub id: u16,
    /// Name.
    pub name: String,
    /// Backend kind.
    pub kind: String,
    /// Queue pairs.
    pub queues: u16,
    /// Peer attached.
    pub link_up: bool,
    /// Worker owning its receive queues.
    pub worker: Option<usize>,
    /// Largest frame, bytes.
    pub max_frame_b: u32,
}

/// `port.add` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PortAddResult {
    /// The new port's id.
    pub id: u16,
}

/// `logic.show` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogicShowResult {
    /// Running logic.
    pub name: String,
    /// Its commands: `[name, help]`.
    pub commands: Vec<(String, String)>,
    /// The `[logic]` table it was built from.
    pub config: Value,
}

/// `logic.replace` result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LogicReplaceResult {
    /// The logic now running.
    pub name: String,
}

/// The `stats` result and its parts: one type, defined in [`crate::stats`]
/// with the metrics each counter is exported as.
pub use crate::stats::{
    OpenflowStats, PortStatsResult, QueueStats, StatsResult, WorkerStatsResult,
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        let r = parse_request(br#"{"jsonrpc":"2.0","id":7,"method":"stats"}"#).unwrap();
        assert_eq!(r.id, Some(json!(7)));
        assert_eq!(Call::parse(&r.method, r.params).unwrap(), Call::Stats);
        let r = parse_request(br#"{"jsonrpc":"2.0","method":"stats.reset"}"#).unwrap();
        assert_eq!(r.id, None);
        let (id, e) = parse_request(b"{nope").unwrap_err();
        assert_eq!((id, e.code), (Value::Null, code::PARSE_ERROR));
        let (id, e) = parse_request(br#"{"jsonrpc":"1.0","id":"a","method":"x"}"#).unwrap_err();
        assert_eq!((id, e.code), (json!("a"), code::INVALID_REQUEST));
        let (_, e) = parse_request(br#"[{"jsonrpc":"2.0","id":1,"method":"x"}]"#).unwrap_err();
        assert_eq!(e.message, "batch requests are not supported");
        let (_, e) = parse_request(br#"{"jsonrpc":"2.0","id":{},"method":"x"}"#).unwrap_err();
        assert_eq!(
            e.message,
            "id must be a number, string or null, found a table"
        );
        // Regression (control_json fuzz target): ids that are not 64-bit
        // integers cannot be echoed exactly; they are refused.
        for id in [
            "86666666666666666666666666666666666666666666666666666",
            "1.5",
            "1e3",
        ] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"stats"}}"#);
            let (echo, e) = parse_request(line.as_bytes()).unwrap_err();
            assert_eq!((echo, e.code), (Value::Null, code::INVALID_REQUEST), "{id}");
        }
        for id in ["-9223372036854775808", "18446744073709551615", "0"] {
            let line = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"stats"}}"#);
            let r = parse_request(line.as_bytes()).unwrap();
            assert_eq!(r.id.unwrap().to_string(), id, "echoed exactly");
        }
        let (_, e) =
            parse_request(br#"{"jsonrpc":"2.0","id":1,"method":"x","extra":1}"#).unwrap_err();
        assert_eq!(e.message, "unknown member \"extra\"");
    }

    #[test]
    fn calls() {
        assert_eq!(
            Call::parse("port.remove", Some(json!({"name": "a"}))).unwrap(),
            Call::PortRemove(PortRemoveParams { name: "a".into() })
        );
        let e = Call::parse("port.remove", Some(json!({"name": 3}))).unwrap_err();
        assert_eq!(e.code, code::INVALID_PARAMS);
        assert_eq!(
            e.message,
            "port.remove: name: invalid type: integer `3`, expected a string"
        );
        let e = Call::parse("port.remove", Some(json!({"name": "a", "force": true}))).unwrap_err();
        assert!(
            e.message
                .starts_with("port.remove: force: unknown field `force`"),
            "{}",
            e.message
        );
        let e = Call::parse("port.remove", None).unwrap_err();
        assert_eq!(e.message, "port.remove needs an object of parameters");
        let e = Call::parse("stats", Some(json!({"x": 1}))).unwrap_err();
        assert_eq!(e.message, "stats takes no parameters");
        let e = Call::parse("port.lisst", None).unwrap_err();
        assert_eq!(e.code, code::METHOD_NOT_FOUND);
        assert_eq!(
            Call::parse("logic.command", Some(json!({"cmd": "show"}))).unwrap(),
            Call::LogicCommand(LogicCommandParams {
                cmd: "show".into(),
                args: Value::Null
            })
        );
        let e = Call::parse("port.add", Some(json!([1]))).unwrap_err();
        assert_eq!(
            e.message,
            "port.add: params must be an object, found an array"
        );
    }

    #[test]
    fn responses() {
        assert_eq!(
            response_ok(&json!(1), json!({})),
            r#"{"id":1,"jsonrpc":"2.0","result":{}}"#
        );
        assert_eq!(
            response_err(&Value::Null, &ApiError::new(1, "no port \"x\"")),
            r#"{"error":{"code":1,"message":"no port \"x\""},"id":null,"jsonrpc":"2.0"}"#
        );
    }
}
