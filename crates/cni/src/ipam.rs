//! The delegated IPAM plugin (netconf `ipam.type`, e.g. host-local or
//! static): found in CNI_PATH and run with the runtime's environment and
//! the same network configuration on stdin (SPEC.md "Delegated plugins").

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::error::{code, CniError, Result};
use crate::version;

/// One IPAM plugin, ready to run.
pub struct Ipam {
    binary: PathBuf,
    name: String,
    /// The network configuration given to it (cniVersion possibly lowered
    /// to what the plugin speaks).
    conf: Value,
}

/// What the delegate is asked: the command and the container it is for.
pub struct Invocation<'a> {
    /// ADD, DEL, CHECK or GC.
    pub command: &'a str,
    /// CNI_CONTAINERID (empty for GC).
    pub container_id: &'a str,
    /// CNI_IFNAME (empty for GC).
    pub ifname: &'a str,
    /// CNI_NETNS (may be empty).
    pub netns: &'a str,
}

impl Ipam {
    /// The IPAM plugin named in `conf.ipam.type`, or None without `ipam`.
    /// `cni_path` is CNI_PATH (colon-separated directories).
    pub fn from_conf(conf: &Value, cni_path: &str) -> Result<Option<Ipam>> {
        let Some(ipam) = conf.get("ipam") else {
            return Ok(None);
        };
        if ipam.as_object().is_some_and(|o| o.is_empty()) {
            return Ok(None);
        }
        let name = ipam.get("type").and_then(Value::as_str).ok_or_else(|| {
            CniError::new(
                code::INVALID_CONFIG,
                "ipam: \"type\" (a plugin name) is required",
            )
        })?;
        if name.is_empty() || name.contains('/') {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("ipam.type: {name:?} is not a plugin name"),
            ));
        }
        let binary = cni_path
            .split(':')
            .filter(|d| !d.is_empty())
            .map(|d| PathBuf::from(d).join(name))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                CniError::new(
                    code::INVALID_CONFIG,
                    format!("ipam plugin {name:?} not found in CNI_PATH ({cni_path})"),
                )
            })?;
        let mut ipam = Ipam {
            binary,
            name: name.to_string(),
            conf: conf.clone(),
        };
        // Delegates are run with the configuration's version when they speak
        // it, else with the highest they speak below it (Debian 12's plugins
        // stop at 1.0.0, whose results have the same shape as 1.1.0's).
        let ours = conf
            .get("cniVersion")
            .and_then(Value::as_str)
            .unwrap_or(version::CURRENT)
            .to_string();
        let theirs = ipam.supported_versions()?;
        if !theirs.contains(&ours) {
            let best = theirs
                .iter()
                .filter(|v| version::cmp(v, &ours).is_le())
                .max_by(|a, b| version::cmp(a, b))
                .cloned()
                .ok_or_else(|| {
                    CniError::new(
                        code::INCOMPATIBLE_VERSION,
                        format!("ipam plugin {name} speaks none of the versions up to {ours}"),
                    )
                })?;
            ipam.conf["cniVersion"] = Value::String(best);
        }
        Ok(Some(ipam))
    }

    /// The plugin's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether the plugin speaks `v` (e.g. "1.1.0" for GC).
    pub fn speaks(&self, v: &str) -> bool {
        self.conf.get("cniVersion").and_then(Value::as_str) == Some(v)
    }

    fn supported_versions(&self) -> Result<Vec<String>> {
        let out = self.run_raw(
            &Invocation {
                command: "VERSION",
                container_id: "",
                ifname: "",
                netns: "",
            },
            &serde_json::json!({"cniVersion": version::CURRENT}),
        )?;
        Ok(out
            .get("supportedVersions")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default())
    }

    /// Runs the plugin; returns its result (Null when it printed nothing).
    pub fn run(&self, inv: &Invocation, extra: Option<(&str, Value)>) -> Result<Value> {
        let mut conf = self.conf.clone();
        if let Some((k, v)) = extra {
            conf[k] = v;
        }
        self.run_raw(inv, &conf)
    }

    fn run_raw(&self, inv: &Invocation, conf: &Value) -> Result<Value> {
        let mut cmd = Command::new(&self.binary);
        cmd.env("CNI_COMMAND", inv.command)
            .env("CNI_CONTAINERID", inv.container_id)
            .env("CNI_IFNAME", inv.ifname)
            .env("CNI_NETNS", inv.netns)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let spawn_err = |e: std::io::Error| {
            CniError::new(
                code::IPAM,
                format!("cannot run ipam plugin {}: {e}", self.binary.display()),
            )
        };
        let mut child = cmd.spawn().map_err(spawn_err)?;
        if let Some(mut stdin) = child.stdin.take() {
            // A plugin that exits without reading (VERSION) closes the pipe.
            let _ = stdin.write_all(conf.to_string().as_bytes());
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        let parsed: Option<Value> = serde_json::from_str(stdout.trim()).ok();
        if !out.status.success() {
            // Pass the delegate's own error through (its code and message).
            let (c, msg) = match &parsed {
                Some(e) => (
                    e.get("code")
                        .and_then(Value::as_u64)
                        .unwrap_or(code::IPAM as u64) as u32,
                    e.get("msg")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string(),
                ),
                None => (
                    code::IPAM,
                    String::from_utf8_lossy(&out.stderr).trim().to_string(),
                ),
            };
            return Err(CniError::new(
                c,
                format!("ipam plugin {} {}: {msg}", self.name, inv.command),
            ));
        }
        if stdout.trim().is_empty() {
            return Ok(Value::Null);
        }
        parsed.ok_or_else(|| {
            CniError::new(
                code::IPAM,
                format!(
                    "ipam plugin {} {}: output is not JSON",
                    self.name, inv.command
                ),
            )
        })
    }
}
