//! Every fuzz target of fuzz/ over each input of its checked-in corpus
//! (fuzz/corpus/TARGET: the seeds of fuzz/seeds.py, the inputs earlier
//! campaigns grew, past crashes), once, with the target's own invariants:
//! what `fuzz/target/release/TARGET -runs=0 fuzz/corpus/TARGET` did, built
//! by the workspace's test build instead of a second build of the whole
//! workspace and libFuzzer. The target files are compiled here unchanged:
//! `fuzz_target!` below turns each target's body into a function `run`.
//! Coverage-guided fuzzing stays `make fuzz` (nightly, cargo-fuzz).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

// The targets' `use libfuzzer_sys::fuzz_target;` finds the macro of `shim`
// (exported at this crate's root).
extern crate self as libfuzzer_sys;

mod shim {
    /// `fuzz_target!(|data: &[u8]| body)`: a function `run(data)` of the
    /// target's module.
    #[macro_export]
    macro_rules! fuzz_target {
        (|$data:ident: &[u8]| $body:expr) => {
            pub fn run($data: &[u8]) {
                $body;
            }
        };
    }
}

/// Runs `run` on every file of fuzz/corpus/`target`; fails naming each
/// input that panicked.
fn replay(target: &str, run: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target);
    let mut inputs: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .collect();
    inputs.sort();
    assert!(!inputs.is_empty(), "{} is empty", dir.display());
    let mut failed = Vec::new();
    for input in &inputs {
        let data = std::fs::read(input).unwrap();
        if catch_unwind(AssertUnwindSafe(|| run(&data))).is_err() {
            failed.push(input.display().to_string());
        }
    }
    eprintln!("{target}: {} inputs, {} failed", inputs.len(), failed.len());
    assert!(
        failed.is_empty(),
        "{target}: inputs that failed: {failed:#?}"
    );
}

// Each target is a crate of its own in fuzz/ with its own `mod common;`;
// compiled together here, that module is loaded once per target.
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/cni_stdin.rs"]
mod cni_stdin;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/config_toml.rs"]
mod config_toml;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/control_json.rs"]
mod control_json;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/gen_rx.rs"]
mod gen_rx;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/memif_msg.rs"]
mod memif_msg;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/memif_ring.rs"]
mod memif_ring;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/openflow_msg.rs"]
mod openflow_msg;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/tunnel_decap.rs"]
mod tunnel_decap;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/vhost_msg.rs"]
mod vhost_msg;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/vhost_vring.rs"]
mod vhost_vring;
#[allow(unused_attributes, clippy::duplicate_mod)]
#[path = "../../../fuzz/fuzz_targets/wire_headers.rs"]
mod wire_headers;

#[test]
fn cni_stdin_corpus() {
    replay("cni_stdin", cni_stdin::run);
}

#[test]
fn config_toml_corpus() {
    replay("config_toml", config_toml::run);
}

#[test]
fn control_json_corpus() {
    replay("control_json", control_json::run);
}

#[test]
fn gen_rx_corpus() {
    replay("gen_rx", gen_rx::run);
}

#[test]
fn memif_msg_corpus() {
    replay("memif_msg", memif_msg::run);
}

#[test]
fn memif_ring_corpus() {
    replay("memif_ring", memif_ring::run);
}

#[test]
fn openflow_msg_corpus() {
    replay("openflow_msg", openflow_msg::run);
}

#[test]
fn tunnel_decap_corpus() {
    replay("tunnel_decap", tunnel_decap::run);
}

#[test]
fn vhost_msg_corpus() {
    replay("vhost_msg", vhost_msg::run);
}

#[test]
fn vhost_vring_corpus() {
    replay("vhost_vring", vhost_vring::run);
}

#[test]
fn wire_headers_corpus() {
    replay("wire_headers", wire_headers::run);
}
