//! A client of turnoutd's control socket (JSON-RPC 2.0, one object per
//! line; docs/turnoutd.md "Control API"): one call per connection.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::{json, Value};

use crate::error::{code, CniError};

/// turnoutd's "not found" error code (a port that does not exist).
pub const RPC_NOT_FOUND: i64 = 1;

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    /// turnoutd could not be reached or did not answer in time.
    Unreachable(String),
    /// turnoutd answered with an error.
    Rpc {
        /// Its code (docs/turnoutd.md).
        code: i64,
        /// Its message.
        message: String,
    },
}

impl CallError {
    /// As a CNI error: unreachable is "try again later" (11), an error answer
    /// is this plugin's 100 with turnoutd's code and message.
    pub fn to_cni(&self, what: &str) -> CniError {
        match self {
            CallError::Unreachable(why) => {
                CniError::new(code::TRY_AGAIN, format!("turnoutd does not answer: {why}"))
                    .details(format!("while trying to {what}"))
            }
            CallError::Rpc { code: c, message } => CniError::new(
                code::TURNOUTD,
                format!("turnoutd refused to {what}: {message} (turnoutd code {c})"),
            ),
        }
    }
}

/// A turnoutd control socket.
pub struct Ctl {
    path: String,
    timeout: Duration,
}

impl Ctl {
    /// The socket at `path`.
    pub fn new(path: &str) -> Self {
        Self {
            path: path.to_string(),
            timeout: Duration::from_secs(10),
        }
    }

    /// One call on a fresh connection.
    pub fn call(&self, method: &str, params: Option<Value>) -> Result<Value, CallError> {
        let unreachable = |e: std::io::Error| CallError::Unreachable(format!("{}: {e}", self.path));
        let mut s = UnixStream::connect(&self.path).map_err(unreachable)?;
        s.set_read_timeout(Some(self.timeout))
            .map_err(unreachable)?;
        s.set_write_timeout(Some(self.timeout))
            .map_err(unreachable)?;
        let mut req = json!({"jsonrpc": "2.0", "id": 1, "method": method});
        if let Some(p) = params {
            req["params"] = p;
        }
        let mut line = req.to_string();
        line.push('\n');
        s.write_all(line.as_bytes()).map_err(unreachable)?;
        let mut answer = String::new();
        BufReader::new(&s)
            .read_line(&mut answer)
            .map_err(unreachable)?;
        if answer.is_empty() {
            return Err(CallError::Unreachable(format!(
                "{}: connection closed without an answer",
                self.path
            )));
        }
        let resp: Value = serde_json::from_str(&answer)
            .map_err(|e| CallError::Unreachable(format!("{}: bad answer: {e}", self.path)))?;
        if let Some(err) = resp.get("error") {
            return Err(CallError::Rpc {
                code: err.get("code").and_then(Value::as_i64).unwrap_or(0),
                message: err
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
            });
        }
        Ok(resp.get("result").cloned().unwrap_or(Value::Null))
    }

    /// `port.add`; returns the port id.
    pub fn port_add(&self, table: Value) -> Result<u64, CallError> {
        let r = self.call("port.add", Some(table))?;
        Ok(r.get("id").and_then(Value::as_u64).unwrap_or(0))
    }

    /// `port.remove`; a port that does not exist is not an error (`Ok(false)`).
    pub fn port_remove(&self, name: &str) -> Result<bool, CallError> {
        match self.call("port.remove", Some(json!({"name": name}))) {
            Ok(_) => Ok(true),
            Err(CallError::Rpc { code, .. }) if code == RPC_NOT_FOUND => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `port.list`: the port named `name`, if any.
    pub fn port_find(&self, name: &str) -> Result<Option<Value>, CallError> {
        let list = self.call("port.list", None)?;
        Ok(list
            .as_array()
            .and_then(|ports| {
                ports
                    .iter()
                    .find(|p| p.get("name").and_then(Value::as_str) == Some(name))
            })
            .cloned())
    }
}
