//! CNI errors: the spec's codes (SPEC.md "Error") and this plugin's own
//! (100 and up, as the spec reserves them for plugins).

use serde_json::json;

/// Error codes.
pub mod code {
    /// Incompatible CNI version.
    pub const INCOMPATIBLE_VERSION: u32 = 1;
    /// Unsupported field in network configuration.
    pub const UNSUPPORTED_FIELD: u32 = 2;
    /// Container unknown or does not exist (its network namespace is gone).
    pub const UNKNOWN_CONTAINER: u32 = 3;
    /// Invalid necessary environment variables.
    pub const INVALID_ENV: u32 = 4;
    /// I/O failure (state directory, socket directory).
    pub const IO_FAILURE: u32 = 5;
    /// Failed to decode content (stdin is not JSON of the right shape).
    pub const DECODE: u32 = 6;
    /// Invalid network configuration.
    pub const INVALID_CONFIG: u32 = 7;
    /// Try again later (turnoutd does not answer).
    pub const TRY_AGAIN: u32 = 11;
    /// STATUS: the plugin is not available (turnoutd does not answer).
    pub const NOT_AVAILABLE: u32 = 50;
    /// turnoutd answered an error (its code and message are in the details).
    pub const TURNOUTD: u32 = 100;
    /// A link / address / route operation failed (ip(8) said why).
    pub const LINK: u32 = 101;
    /// CHECK: the attachment is not as ADD left it.
    pub const CHECK_FAILED: u32 = 102;
    /// The delegated IPAM plugin could not be run or gave no usable result.
    pub const IPAM: u32 = 103;
    /// ADD for a container and interface that are already attached.
    pub const ALREADY_ATTACHED: u32 = 104;
}

/// A CNI error result.
#[derive(Debug, Clone)]
pub struct CniError {
    /// One of [`code`] (or a delegate's code, passed through).
    pub code: u32,
    /// Short message.
    pub msg: String,
    /// Longer details (may be empty).
    pub details: String,
}

impl CniError {
    /// An error with this code and message.
    pub fn new(code: u32, msg: impl Into<String>) -> Self {
        Self {
            code,
            msg: msg.into(),
            details: String::new(),
        }
    }

    /// The same error with details.
    pub fn details(mut self, details: impl Into<String>) -> Self {
        self.details = details.into();
        self
    }

    /// The error as the spec's JSON object.
    pub fn to_json(&self, cni_version: &str) -> serde_json::Value {
        let mut v = json!({"cniVersion": cni_version, "code": self.code, "msg": self.msg});
        if !self.details.is_empty() {
            v["details"] = json!(self.details);
        }
        v
    }
}

impl std::fmt::Display for CniError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.msg, self.code)?;
        if !self.details.is_empty() {
            write!(f, ": {}", self.details)?;
        }
        Ok(())
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, CniError>;
