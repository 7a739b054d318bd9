//! turnout-cni: a CNI 1.1 plugin that attaches pods (network namespaces) to
//! turnoutd through its control socket. See docs/kubernetes.md.
//!
//! The runtime runs it with CNI_COMMAND (ADD, DEL, CHECK, VERSION, STATUS,
//! GC) and the other CNI_* variables in the environment and the network
//! configuration on stdin; it answers on stdout (a result, or an error
//! object and exit code 1).

mod config;
mod ctl;
mod error;
mod ipam;
mod link;
mod plugin;
mod state;
mod version;

use std::io::Read;

use serde_json::json;

use config::{Env, NetConf};
use error::{code, CniError, Result};

fn run(stdin: &str, env: &Env) -> Result<Option<serde_json::Value>> {
    if env.command == "VERSION" {
        return Ok(Some(json!({
            "cniVersion": version::CURRENT,
            "supportedVersions": version::SUPPORTED,
        })));
    }
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

fn main() {
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
            let v = config::version_of(&stdin)
                .filter(|v| version::supported(v))
                .unwrap_or_else(|| version::CURRENT.to_string());
            println!("{}", e.to_json(&v));
            eprintln!("turnout-cni: {e}");
            std::process::exit(1);
        }
    }
}
