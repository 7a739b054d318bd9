//! The side-effect-free front of turnout-cni (the binary is `main.rs`):
//! reading the CNI_* environment, parsing and checking the network
//! configuration on stdin, and the error answer. Everything here is pure
//! (no file, socket, process or namespace is touched), so the fuzz target
//! `cni_stdin` drives exactly what the plugin does with its untrusted input
//! before its first side effect.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod config;
pub mod error;
pub mod version;

use config::{Env, NetConf};
use error::{code, CniError, Result};

/// Parses and checks the network configuration `stdin` for `env.command`
/// (any command but VERSION, which reads no configuration): what the
/// plugin checks before it acts.
pub fn check_request(stdin: &str, env: &Env) -> Result<NetConf> {
    let conf = NetConf::parse(stdin)?;
    let needs_11 = matches!(env.command.as_str(), "STATUS" | "GC");
    if needs_11 && version::cmp(&conf.cni_version, "1.1.0").is_lt() {
        return Err(CniError::new(
            code::INCOMPATIBLE_VERSION,
            format!(
                "{} needs cniVersion 1.1.0, not {}",
                env.command, conf.cni_version
            ),
        ));
    }
    Ok(conf)
}

/// The error object printed on stdout for `e`, in the configuration's
/// cniVersion if it names a supported one, else the current version.
pub fn error_answer(stdin: &str, e: &CniError) -> serde_json::Value {
    let v = config::version_of(stdin)
        .filter(|v| version::supported(v))
        .unwrap_or_else(|| version::CURRENT.to_string());
    e.to_json(&v)
}
