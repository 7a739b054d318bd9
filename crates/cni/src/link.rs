//! Links, addresses and routes, through iproute2's `ip` (JSON output where
//! something is read back). Commands for the pod run inside its network
//! namespace: the child joins it (setns) between fork and exec, so the
//! plugin itself never changes namespace.

use std::fs::File;
use std::os::unix::io::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;

use serde_json::Value;

use crate::error::{code, CniError, Result};

/// statfs f_type of the namespace file system (linux/magic.h).
const NSFS_MAGIC: libc::c_long = 0x6e73_6673;

/// A pod's network namespace, opened.
pub struct Netns {
    /// Its path (CNI_NETNS).
    pub path: String,
    file: File,
}

impl Netns {
    /// Opens `path`; a namespace that does not exist is the spec's code 3.
    pub fn open(path: &str) -> Result<Netns> {
        let file = File::open(path).map_err(|e| {
            CniError::new(
                code::UNKNOWN_CONTAINER,
                format!("network namespace {path} cannot be opened: {e}"),
            )
        })?;
        // A file that is not a namespace would let commands run in the wrong
        // place (setns would refuse it later, half-way through an ADD).
        // SAFETY: fstatfs on a descriptor we own, into a zeroed struct.
        let is_ns = unsafe {
            let mut st: libc::statfs = std::mem::zeroed();
            libc::fstatfs(file.as_raw_fd(), &mut st) == 0 && st.f_type == NSFS_MAGIC
        };
        if !is_ns {
            return Err(CniError::new(
                code::UNKNOWN_CONTAINER,
                format!("{path} is not a network namespace"),
            ));
        }
        Ok(Netns {
            path: path.to_string(),
            file,
        })
    }
}

fn binary(name: &'static str) -> String {
    for d in ["/usr/sbin", "/sbin", "/usr/bin", "/bin"] {
        let p = format!("{d}/{name}");
        if Path::new(&p).exists() {
            return p;
        }
    }
    name.to_string()
}

/// Runs `ip ARGS` in the host namespace, or in `ns`; returns stdout.
pub fn ip(ns: Option<&Netns>, args: &[&str]) -> Result<String> {
    run(ns, "ip", args)
}

/// Turns transmit offloads off on `ifname`: a veth that hands the switch's
/// kernel port 64 KiB super-frames or unfinished checksums would have them
/// dropped as oversize or delivered broken (docs/kernel-ports.md).
pub fn offloads_off(ns: Option<&Netns>, ifname: &str) -> Result<()> {
    run(
        ns,
        "ethtool",
        &["-K", ifname, "tx", "off", "tso", "off", "gso", "off"],
    )
    .map(|_| ())
}

fn run(ns: Option<&Netns>, prog: &'static str, args: &[&str]) -> Result<String> {
    let bin = binary(prog);
    let mut cmd = Command::new(&bin);
    cmd.args(args);
    if let Some(ns) = ns {
        let fd = ns.file.as_raw_fd();
        // SAFETY: setns is async-signal-safe; only the child joins.
        unsafe {
            cmd.pre_exec(move || {
                if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let out = cmd
        .output()
        .map_err(|e| CniError::new(code::LINK, format!("cannot run {bin}: {e}")))?;
    if !out.status.success() {
        let where_ = ns.map(|n| format!(" in {}", n.path)).unwrap_or_default();
        return Err(CniError::new(
            code::LINK,
            format!(
                "{prog} {}{where_}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The link `name` (`ip -j link show`), if it exists.
pub fn link_show(ns: Option<&Netns>, name: &str) -> Option<Value> {
    let out = ip(ns, &["-j", "link", "show", "dev", name]).ok()?;
    let v: Value = serde_json::from_str(&out).ok()?;
    v.as_array().and_then(|a| a.first()).cloned()
}

/// The addresses of link `name` as "ADDR/PREFIX" strings.
pub fn addresses(ns: Option<&Netns>, name: &str) -> Vec<String> {
    let Ok(out) = ip(ns, &["-j", "addr", "show", "dev", name]) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    let mut addrs = Vec::new();
    for link in v.as_array().into_iter().flatten() {
        for a in link
            .get("addr_info")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            if let (Some(l), Some(p)) = (
                a.get("local").and_then(Value::as_str),
                a.get("prefixlen").and_then(Value::as_u64),
            ) {
                addrs.push(format!("{l}/{p}"));
            }
        }
    }
    addrs
}

/// Deletes link `name` if it exists (a veth takes its peer with it).
pub fn delete_if_present(ns: Option<&Netns>, name: &str) -> Result<bool> {
    if link_show(ns, name).is_none() {
        return Ok(false);
    }
    match ip(ns, &["link", "del", "dev", name]) {
        Ok(_) => Ok(true),
        // Gone in between (its peer was deleted): what we wanted.
        Err(_) if link_show(ns, name).is_none() => Ok(false),
        Err(e) => Err(e),
    }
}

/// The MAC address of a link shown by [`link_show`].
pub fn mac_of(link: &Value) -> Option<String> {
    link.get("address")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// The MTU of a link shown by [`link_show`].
pub fn mtu_of(link: &Value) -> Option<u64> {
    link.get("mtu").and_then(Value::as_u64)
}
