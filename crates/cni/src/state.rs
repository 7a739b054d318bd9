//! The state directory: one lock serialising every ADD, DEL, CHECK and GC
//! on this node (so concurrent calls for different pods never interleave
//! their port, link and IPAM steps), and one record per attachment
//! (`<stateDir>/<network>/<containerID>@<ifname>.json`) so DEL, CHECK and
//! GC know what ADD made.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::error::{code, CniError, Result};

fn io_err(what: &str, path: &Path, e: std::io::Error) -> CniError {
    CniError::new(code::IO_FAILURE, format!("{what} {}: {e}", path.display()))
}

/// The exclusive lock on the state directory, held until dropped.
pub struct Lock {
    _file: File,
}

impl Lock {
    /// Waits for and takes the lock.
    pub fn take(state_dir: &str) -> Result<Lock> {
        let dir = Path::new(state_dir);
        fs::create_dir_all(dir).map_err(|e| io_err("cannot create", dir, e))?;
        let path = dir.join("lock");
        let file = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| io_err("cannot open", &path, e))?;
        loop {
            // SAFETY: flock on a descriptor we own.
            if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(io_err("cannot lock", &path, e));
            }
        }
        Ok(Lock { _file: file })
    }
}

/// What ADD made for one attachment.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Record {
    /// Network name.
    pub network: String,
    /// CNI_CONTAINERID.
    pub container_id: String,
    /// CNI_IFNAME.
    pub ifname: String,
    /// CNI_NETNS at ADD.
    pub netns: String,
    /// "kernel" or "userspace".
    pub mode: String,
    /// The netconf portType.
    pub port_type: String,
    /// The port's name on turnoutd.
    pub port: String,
    /// The host end of the veth (kernel mode, veth), or "".
    #[serde(default)]
    pub host_if: String,
    /// The per-pod socket directory (userspace), or "".
    #[serde(default)]
    pub socket_dir: String,
    /// The port's socket (userspace), or "".
    #[serde(default)]
    pub socket_path: String,
    /// The device-info file written, or "".
    #[serde(default)]
    pub device_info_file: String,
    /// The control socket used.
    pub control_socket: String,
    /// The network configuration of the ADD (for IPAM DEL from GC).
    pub conf: Value,
    /// The result ADD returned.
    pub result: Value,
}

fn network_dir(state_dir: &str, network: &str) -> PathBuf {
    Path::new(state_dir).join(network)
}

/// The path of a record.
pub fn record_path(state_dir: &str, network: &str, container_id: &str, ifname: &str) -> PathBuf {
    network_dir(state_dir, network).join(format!("{container_id}@{ifname}.json"))
}

/// Reads a record, if there is one.
pub fn load(state_dir: &str, network: &str, container_id: &str, ifname: &str) -> Option<Record> {
    let text = fs::read_to_string(record_path(state_dir, network, container_id, ifname)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Writes a record (atomically: temporary file, fsync, rename).
pub fn save(state_dir: &str, rec: &Record) -> Result<()> {
    let dir = network_dir(state_dir, &rec.network);
    fs::create_dir_all(&dir).map_err(|e| io_err("cannot create", &dir, e))?;
    let path = record_path(state_dir, &rec.network, &rec.container_id, &rec.ifname);
    let tmp = path.with_extension("json.tmp");
    let text = serde_json::to_string_pretty(rec).expect("a record serialises");
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(text.as_bytes())?;
        f.sync_all()?;
        fs::rename(&tmp, &path)
    };
    write().map_err(|e| io_err("cannot write", &path, e))
}

/// Removes a record (absent is fine).
pub fn remove(state_dir: &str, network: &str, container_id: &str, ifname: &str) -> Result<()> {
    let path = record_path(state_dir, network, container_id, ifname);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("cannot remove", &path, e)),
    }
}

/// Every record of `network`.
pub fn list(state_dir: &str, network: &str) -> Result<Vec<Record>> {
    let dir = network_dir(state_dir, network);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(io_err("cannot read", &dir, e)),
    };
    let mut out = Vec::new();
    for ent in entries.flatten() {
        let p = ent.path();
        if p.extension().and_then(|x| x.to_str()) != Some("json") {
            continue;
        }
        let text = fs::read_to_string(&p).map_err(|e| io_err("cannot read", &p, e))?;
        let rec: Record = serde_json::from_str(&text).map_err(|e| {
            CniError::new(
                code::IO_FAILURE,
                format!("record {} is corrupt: {e}", p.display()),
            )
        })?;
        out.push(rec);
    }
    out.sort_by(|a, b| (&a.container_id, &a.ifname).cmp(&(&b.container_id, &b.ifname)));
    Ok(out)
}

/// The networks other than `network` that hold a record for this container
/// and interface name (a DEL without a record must not touch their port).
pub fn other_holders(
    state_dir: &str,
    network: &str,
    container_id: &str,
    ifname: &str,
) -> Vec<String> {
    let Ok(entries) = fs::read_dir(state_dir) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n != network && record_path(state_dir, n, container_id, ifname).exists())
        .collect()
}
