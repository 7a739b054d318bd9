//! The CNI plugin's untrusted input before its first side effect
//! (`turnout_cni`, the library half of crates/cni): the CNI_* environment
//! (`Env::read`), the network configuration on stdin with the command's
//! version gate (`check_request`: JSON, known fields, cniVersion, name,
//! mode / portType, mtu, runtimeConfig, mac, prevResult, ipam) and the
//! error object printed for a refusal (`error_answer`).
//!
//! Input: UTF-8 text (the plugin refuses other stdin before parsing it).
//! The first four lines are CNI_COMMAND, CNI_CONTAINERID, CNI_IFNAME and
//! CNI_NETNS (a variable whose line is missing is unset; an empty first
//! line leaves CNI_COMMAND unset), the rest is stdin.
//!
//! Invariants: no panic; every refusal has a non-empty message and the
//! spec's code for its stage (4 for the environment; 1, 2, 6 or 7 for the
//! configuration), and its JSON answer carries that code and a supported
//! cniVersion; an accepted environment names a known command and, for
//! ADD / DEL / CHECK, a valid container id and interface name; an accepted
//! configuration has a supported cniVersion (1.1.0 at least for STATUS and
//! GC), a valid name, a mode / portType pair that fits, an mtu in
//! 68..=65535, a unicast MAC if any, and parses again from its own JSON to
//! the same configuration.
#![no_main]

use libfuzzer_sys::fuzz_target;
use turnout_cni::config::{
    check_container_id, check_ifname, valid_mac, Env, Mode, NetConf, PortType,
};
use turnout_cni::error::{code, CniError};
use turnout_cni::{check_request, error_answer, version};

fn refused(stdin: &str, e: &CniError, codes: &[u32]) {
    assert!(!e.msg.is_empty(), "a refusal says why: {e:?}");
    assert!(codes.contains(&e.code), "code of this stage: {e:?}");
    let a = error_answer(stdin, e);
    assert_eq!(a["code"].as_u64(), Some(e.code as u64));
    assert_eq!(a["msg"].as_str(), Some(e.msg.as_str()));
    let v = a["cniVersion"]
        .as_str()
        .expect("the answer names a version");
    assert!(version::supported(v), "answer in a version we speak: {v}");
    assert!(serde_json::from_str::<serde_json::Value>(&a.to_string()).is_ok());
}

fn same(a: &NetConf, b: &NetConf) -> bool {
    (
        &a.cni_version,
        &a.name,
        &a.control_socket,
        a.mode,
        a.port_type,
        a.mtu,
        &a.mac,
        &a.socket_dir,
        &a.state_dir,
        &a.device_info_file,
        &a.prev_result,
        &a.raw,
    ) == (
        &b.cni_version,
        &b.name,
        &b.control_socket,
        b.mode,
        b.port_type,
        b.mtu,
        &b.mac,
        &b.socket_dir,
        &b.state_dir,
        &b.device_info_file,
        &b.prev_result,
        &b.raw,
    )
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = text.splitn(5, '\n');
    let vars: Vec<Option<&str>> = (0..4).map(|_| parts.next()).collect();
    let stdin = parts.next().unwrap_or("");
    let names = ["CNI_COMMAND", "CNI_CONTAINERID", "CNI_IFNAME", "CNI_NETNS"];
    let get = |k: &str| -> Option<String> {
        let i = names.iter().position(|n| *n == k)?;
        match vars[i] {
            Some("") if i == 0 => None,
            v => v.map(str::to_string),
        }
    };
    let env = match Env::read(get) {
        Ok(env) => env,
        Err(e) => {
            refused(stdin, &e, &[code::INVALID_ENV]);
            return;
        }
    };
    match env.command.as_str() {
        "ADD" | "DEL" | "CHECK" => {
            assert!(check_container_id(&env.container_id).is_ok());
            assert!(check_ifname(&env.ifname).is_ok());
            assert!(env.command == "DEL" || !env.netns.is_empty());
        }
        "VERSION" => return,
        "STATUS" | "GC" => {}
        other => panic!("accepted an unknown command {other:?}"),
    }
    let conf = match check_request(stdin, &env) {
        Ok(c) => c,
        Err(e) => {
            refused(
                stdin,
                &e,
                &[
                    code::INCOMPATIBLE_VERSION,
                    code::UNSUPPORTED_FIELD,
                    code::DECODE,
                    code::INVALID_CONFIG,
                ],
            );
            return;
        }
    };
    assert!(version::supported(&conf.cni_version));
    if matches!(env.command.as_str(), "STATUS" | "GC") {
        assert!(version::cmp(&conf.cni_version, "1.1.0").is_ge());
    }
    assert!(!conf.name.is_empty());
    assert!(conf
        .name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c)));
    let fits = match conf.mode {
        Mode::Kernel => matches!(
            conf.port_type,
            PortType::AfXdp | PortType::AfPacket | PortType::Tap
        ),
        Mode::Userspace => matches!(conf.port_type, PortType::Memif | PortType::VhostUser),
    };
    assert!(fits, "{:?} with {:?}", conf.port_type, conf.mode);
    assert!(conf.mtu.is_none_or(|m| (68..=65535).contains(&m)));
    assert!(conf.mac.as_deref().is_none_or(valid_mac));
    assert!(conf.prev_result.as_ref().is_none_or(|p| p.is_object()));
    let again = NetConf::parse(&conf.raw.to_string()).expect("its own JSON parses again");
    assert!(same(&conf, &again), "{conf:?} vs {again:?}");
});
