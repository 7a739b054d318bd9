//! The shared test kit of the workspace (a dev-dependency only): the one
//! place where a Rust system test decides what a missing peer means
//! (docs/testing.md), and the set-ups every crate's tests share
//! ([`TempDir`], [`wait_until`], [`testpmd_command`], [`reserve_hugepages`])
//! and the logic set-ups of the benches and instruction-count instruments
//! ([`bench_cases`]).
//!
//! A system test needs something outside the process: root (namespaces,
//! veths, raw sockets), DPDK testpmd, QEMU with KVM. When it is missing the
//! test says why on stderr and, by default, *skips* (returns early, so
//! `cargo test` passes on a laptop). With `TURNOUT_REQUIRE_PEERS=1` — set by
//! `make test`, hence by CI — a peer that `scripts/setup.sh` installs
//! (root, testpmd, OVS-DPDK, namespaces) *fails* the test instead: a CI machine where
//! the setup did not produce it must not go green. Peers the setup does not
//! provide (a machine without KVM, the QEMU guest's assets) stay skippable
//! either way.
//!
//! ```text
//! #[test]
//! fn through_testpmd() {
//!     let Some(pmd) = testpeers::testpmd() else { return };
//!     if !testpeers::root() { return; }
//!     // ...
//! }
//! ```
#![warn(missing_docs)]

use std::path::{Path, PathBuf};

pub mod bench_cases;
mod hugepages;
mod kit;
pub use hugepages::{reserve_hugepages, Hugepages};
pub use kit::{testpmd_command, wait_until, TempDir};

/// The environment variable that turns missing required peers into
/// failures.
pub const REQUIRE_ENV: &str = "TURNOUT_REQUIRE_PEERS";

/// Whether missing peers that the setup installs fail the test
/// (`TURNOUT_REQUIRE_PEERS=1`).
pub fn required() -> bool {
    std::env::var(REQUIRE_ENV).is_ok_and(|v| v == "1")
}

/// A peer the setup installs is missing: panics when peers are required,
/// else prints `SKIP: why` and returns (the caller then returns).
pub fn missing(why: &str) {
    if required() {
        panic!("{REQUIRE_ENV}=1 and a peer the setup installs is missing: {why}");
    }
    eprintln!("SKIP: {why}");
}

/// A peer the setup does not install is missing (no KVM on this machine, a
/// VM image not built): always a skip, with the reason.
pub fn optional_missing(why: &str) {
    eprintln!("SKIP (not provided by scripts/setup.sh): {why}");
}

/// Whether `ok`; if not, [`missing`] with `why`.
pub fn need(ok: bool, why: &str) -> bool {
    if !ok {
        missing(why);
    }
    ok
}

/// The calling thread's id (`/proc/thread-self` is `PID/task/TID`).
pub fn this_thread_id() -> u32 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .expect("/proc/thread-self names this thread")
}

/// Whether the effective user is root.
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Whether we run as root (namespaces, veths, raw sockets, AF_XDP); if not,
/// [`missing`].
pub fn root() -> bool {
    need(is_root(), "needs root (namespaces, veths, raw sockets)")
}

/// `name` in `$PATH`, if there.
pub fn find_in_path(name: &str) -> Option<PathBuf> {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
}

/// dpdk-testpmd: `$TURNOUT_TESTPMD`, else `/usr/bin/dpdk-testpmd`, else
/// the first in `$PATH`; if none, [`missing`] and `None`.
pub fn testpmd() -> Option<PathBuf> {
    let found = match std::env::var("TURNOUT_TESTPMD") {
        Ok(p) => Some(PathBuf::from(p)).filter(|p| p.exists()),
        Err(_) => Some(PathBuf::from("/usr/bin/dpdk-testpmd"))
            .filter(|p| p.exists())
            .or_else(|| find_in_path("dpdk-testpmd")),
    };
    if found.is_none() {
        missing("dpdk-testpmd is not installed (Debian package dpdk-dev)");
    }
    found
}

/// The OVS-DPDK binary of Debian's openvswitch-switch-dpdk.
pub const OVS_DPDK_BINARY: &str = "/usr/lib/openvswitch-switch-dpdk/ovs-vswitchd-dpdk";

/// Open vSwitch's database schema (openvswitch-switch).
pub const OVS_SCHEMA: &str = "/usr/share/openvswitch/vswitch.ovsschema";

/// OVS-DPDK (`ovs-vswitchd-dpdk`, `$TURNOUT_OVS_DPDK` to override) with
/// the Open vSwitch tools a private instance needs (ovsdb-tool,
/// ovsdb-server, ovs-vsctl, ovs-ofctl) and the schema; if any is missing,
/// [`missing`] and `None`.
pub fn ovs_dpdk() -> Option<PathBuf> {
    let bin = std::env::var("TURNOUT_OVS_DPDK").unwrap_or_else(|_| OVS_DPDK_BINARY.into());
    let bin = PathBuf::from(bin);
    if !bin.exists() {
        missing(&format!(
            "{} is not installed (Debian package openvswitch-switch-dpdk)",
            bin.display()
        ));
        return None;
    }
    for tool in ["ovsdb-tool", "ovsdb-server", "ovs-vsctl", "ovs-ofctl"] {
        if find_in_path(tool).is_none() {
            missing(&format!(
                "{tool} is not installed (Debian package openvswitch-switch)"
            ));
            return None;
        }
    }
    if !Path::new(OVS_SCHEMA).exists() {
        missing(&format!("{OVS_SCHEMA} is missing (openvswitch-switch)"));
        return None;
    }
    Some(bin)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_present_peer_is_needed_without_a_word() {
        assert!(need(true, "never printed"));
    }

    #[test]
    fn a_missing_peer_skips_or_fails_as_the_environment_says() {
        // The variable is read on each call; run both cases in one test so
        // no other test in this binary sees it changed.
        std::env::remove_var(REQUIRE_ENV);
        assert!(!need(false, "absent peer"));
        std::env::set_var(REQUIRE_ENV, "1");
        let r = std::panic::catch_unwind(|| need(false, "absent peer"));
        std::env::remove_var(REQUIRE_ENV);
        let msg = r.expect_err("required and missing must panic");
        let msg = msg.downcast_ref::<String>().cloned().unwrap_or_default();
        assert!(msg.contains("absent peer"), "{msg}");
    }
}
