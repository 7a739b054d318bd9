//! turnout-cni: a CNI 1.1 plugin that attaches pods (network namespaces) to
//! turnoutd through its control socket. See docs/kubernetes.md.
//!
//! The runtime runs it with CNI_COMMAND (ADD, DEL, CHECK, VERSION, STATUS,
//! GC) and the other CNI_* variables in the environment and the network
//! configuration on stdin; it answers on stdout (a result, or an error
//! object and exit code 1). Without CNI_COMMAND (run by hand) it prints
//! its version and the CNI versions it speaks on stderr and exits 0.
#![deny(unsafe_code)]

mod ctl;
mod ipam;
#[allow(unsafe_code)]
mod link;
mod plugin;
#[allow(unsafe_code)]
mod state;

// The pure front (environment, configuration, error answer) is the
// library, shared with the fuzz target `cni_stdin`.
use turnout_cni::{config, error, version};

use std::io::Read;

use serde_json::json;

use config::Env;
use error::{code, CniError, Result};

fn run(stdin: &str, env: &Env) -> Result<Option<serde_json::Value>> {
    if env.command == "VERSION" {
        return Ok(Some(json!({
            "cniVersion": version::CURRENT,
            "supportedVersions": version::SUPPORTED,
        })));
    }
    let conf = turnout_cni::check_request(stdin, env)?;
    match env.command.as_str() {
        "ADD" => plugin::add(&conf, env).map(Some),
        "DEL" => plugin::del(&conf, env).map(|()| None),
        "CHECK" => plugin::check(&conf, env).map(|()| None),
        "STATUS" => plugin::status(&conf).map(|()| None),
        "GC" => plugin::gc(&conf, env).map(|removed| {
            eprintln!("turnout-cni: GC removed {removed}");
            None
        }),
        _ => unreachable!("Env::read accepts only known commands"),
    }
}

/// What the plugin prints when it is run by hand (no CNI_COMMAND), on
/// stderr like the CNI project's reference plugins: its version and the
/// CNI versions it speaks.
fn about() -> String {
    format!(
        "CNI turnout-cni plugin v{} (attaches pods to turnoutd: docs/kubernetes.md)\n\
         CNI protocol versions supported: {}",
        env!("CARGO_PKG_VERSION"),
        version::SUPPORTED.join(", ")
    )
}

fn main() {
    // Run by hand, not by a runtime: say what this is, as the reference
    // plugins do, and touch nothing.
    if std::env::var_os("CNI_COMMAND").is_none_or(|c| c.is_empty()) {
        eprintln!("{}", about());
        return;
    }
    let env = Env::read(|k| std::env::var(k).ok());
    let mut stdin = String::new();
    let needs_stdin = env.as_ref().map(|e| e.command != "VERSION").unwrap_or(true);
    let read = if needs_stdin {
        std::io::stdin().read_to_string(&mut stdin).map(|_| ())
    } else {
        Ok(())
    };
    let out = match (env, read) {
        (Err(e), _) => Err(e),
        (Ok(_), Err(e)) => Err(CniError::new(
            code::IO_FAILURE,
            format!("cannot read stdin: {e}"),
        )),
        (Ok(env), Ok(())) => run(&stdin, &env),
    };
    match out {
        Ok(Some(v)) => println!("{v}"),
        Ok(None) => {}
        Err(e) => {
            println!("{}", turnout_cni::error_answer(&stdin, &e));
            eprintln!("turnout-cni: {e}");
            std::process::exit(1);
        }
    }
}
