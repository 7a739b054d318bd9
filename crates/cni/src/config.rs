//! The network configuration on stdin and the CNI_* environment.

use ports::kind::KindError;
use ports::PortKind;
use serde_json::{Map, Value};

use crate::error::{code, CniError, Result};
use crate::version;

/// Default control socket of turnoutd.
pub const DEFAULT_SOCKET: &str = "/run/turnout/turnoutd.sock";
/// Default directory of per-pod socket directories (userspace mode).
pub const DEFAULT_SOCKET_DIR: &str = "/run/turnout/cni";
/// Default state directory (attachment records and the lock).
pub const DEFAULT_STATE_DIR: &str = "/var/lib/cni/turnout";

/// Keys of the network configuration this plugin knows: the spec's own,
/// those runtimes add, and this plugin's.
const KNOWN_KEYS: [&str; 20] = [
    "cniVersion",
    "cniVersions",
    "name",
    "type",
    "disableCheck",
    "disableGC",
    "ipam",
    "dns",
    "args",
    "capabilities",
    "runtimeConfig",
    "prevResult",
    "cni.dev/valid-attachments",
    "controlSocket",
    "mode",
    "portType",
    "mtu",
    "mac",
    "socketDir",
    "stateDir",
];

/// How a pod is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A kernel interface in the pod (veth or tap), its host side a port.
    Kernel,
    /// A shared-memory port (memif, vhost_user) whose socket the pod opens.
    Userspace,
}

/// The turnoutd port kind used.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortType {
    /// AF_XDP on the host end of a veth.
    AfXdp,
    /// AF_PACKET on the host end of a veth.
    AfPacket,
    /// A tap created by turnoutd and moved into the pod.
    Tap,
    /// memif, turnoutd the server.
    Memif,
    /// vhost-user, turnoutd the backend and socket server.
    VhostUser,
}

impl PortType {
    /// The port kinds a netconf may name, kernel mode's then userspace's.
    pub const KINDS: [PortKind; 5] = [
        PortKind::AfXdp,
        PortKind::AfPacket,
        PortKind::Tap,
        PortKind::Memif,
        PortKind::VhostUser,
    ];

    /// turnoutd's port kind.
    pub fn port_kind(self) -> PortKind {
        match self {
            PortType::AfXdp => PortKind::AfXdp,
            PortType::AfPacket => PortKind::AfPacket,
            PortType::Tap => PortKind::Tap,
            PortType::Memif => PortKind::Memif,
            PortType::VhostUser => PortKind::VhostUser,
        }
    }

    /// The spelling written back (attachment records, messages):
    /// turnoutd's.
    pub fn name(self) -> &'static str {
        self.port_kind().name()
    }

    /// turnoutd's port kind, as its `kind` key spells it.
    pub fn kind(self) -> &'static str {
        self.port_kind().name()
    }

    /// Parses the netconf spelling: turnoutd's (`af_xdp`, `vhost_user`) or
    /// an older one `ports::PortKind` reads (`afxdp`, `vhost-user`); the
    /// error lists the accepted spellings.
    pub fn parse(s: &str) -> std::result::Result<PortType, KindError> {
        Ok(match PortKind::parse_among(s, &Self::KINDS)? {
            PortKind::AfXdp => PortType::AfXdp,
            PortKind::AfPacket => PortType::AfPacket,
            PortKind::Tap => PortType::Tap,
            PortKind::Memif => PortType::Memif,
            PortKind::VhostUser => PortType::VhostUser,
            other => {
                return Err(KindError {
                    text: s.to_string(),
                    known: Some(other),
                    accepted: Self::KINDS.to_vec(),
                })
            }
        })
    }
}

/// The parsed network configuration.
#[derive(Clone, Debug)]
pub struct NetConf {
    /// The whole object (passed to IPAM, kept in records).
    pub raw: Value,
    /// cniVersion.
    pub cni_version: String,
    /// Network name.
    pub name: String,
    /// controlSocket.
    pub control_socket: String,
    /// mode.
    pub mode: Mode,
    /// portType.
    pub port_type: PortType,
    /// mtu (None: the kernel's default, 1500).
    pub mtu: Option<u32>,
    /// The pod interface's MAC: runtimeConfig.mac, else `mac`.
    pub mac: Option<String>,
    /// socketDir.
    pub socket_dir: String,
    /// stateDir.
    pub state_dir: String,
    /// runtimeConfig.CNIDeviceInfoFile.
    pub device_info_file: Option<String>,
    /// prevResult, when chained.
    pub prev_result: Option<Value>,
}

fn invalid(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_CONFIG, msg)
}

fn opt_str<'a>(o: &'a Map<String, Value>, key: &str) -> Result<Option<&'a str>> {
    match o.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(invalid(format!("{key}: expected a string, got {other}"))),
    }
}

/// Whether `mac` is six colon-separated hex bytes, unicast.
pub fn valid_mac(mac: &str) -> bool {
    let parts: Vec<&str> = mac.split(':').collect();
    parts.len() == 6
        && parts
            .iter()
            .all(|p| p.len() == 2 && p.chars().all(|c| c.is_ascii_hexdigit()))
        && u8::from_str_radix(parts[0], 16).is_ok_and(|b| b & 1 == 0)
}

/// The cniVersion of a configuration, if it can be read at all (for errors).
pub fn version_of(stdin: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stdin).ok()?;
    v.get("cniVersion")?.as_str().map(str::to_string)
}

impl NetConf {
    /// Parses and checks the configuration.
    pub fn parse(stdin: &str) -> Result<NetConf> {
        let raw: Value = serde_json::from_str(stdin).map_err(|e| {
            CniError::new(
                code::DECODE,
                format!("network configuration is not JSON: {e}"),
            )
        })?;
        let o = raw.as_object().ok_or_else(|| {
            CniError::new(code::DECODE, "network configuration is not a JSON object")
        })?;
        for k in o.keys() {
            if !KNOWN_KEYS.contains(&k.as_str()) {
                return Err(CniError::new(
                    code::UNSUPPORTED_FIELD,
                    format!("unsupported field {k:?} in network configuration"),
                )
                .details(format!("{k}: {}", o[k])));
            }
        }
        let cni_version = opt_str(o, "cniVersion")?
            .ok_or_else(|| invalid("cniVersion is required"))?
            .to_string();
        if !version::supported(&cni_version) {
            return Err(CniError::new(
                code::INCOMPATIBLE_VERSION,
                format!(
                    "cniVersion {cni_version} is not supported (supported: {})",
                    version::SUPPORTED.join(", ")
                ),
            ));
        }
        let name = opt_str(o, "name")?
            .ok_or_else(|| invalid("name is required"))?
            .to_string();
        if name.is_empty()
            || !name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c))
        {
            return Err(invalid(format!(
                "name {name:?}: letters, digits, _ . - only, not empty"
            )));
        }
        let mode = match opt_str(o, "mode")?.unwrap_or("kernel") {
            "kernel" => Mode::Kernel,
            "userspace" => Mode::Userspace,
            other => {
                return Err(invalid(format!(
                    "mode: unknown mode {other:?} (expected kernel or userspace)"
                )))
            }
        };
        let port_type = match opt_str(o, "portType")? {
            None => match mode {
                Mode::Kernel => PortType::AfPacket,
                Mode::Userspace => PortType::Memif,
            },
            Some(s) => PortType::parse(s).map_err(|e| invalid(format!("portType: {e}")))?,
        };
        let fits = match mode {
            Mode::Kernel => matches!(
                port_type,
                PortType::AfXdp | PortType::AfPacket | PortType::Tap
            ),
            Mode::Userspace => matches!(port_type, PortType::Memif | PortType::VhostUser),
        };
        if !fits {
            return Err(invalid(format!(
                "portType {} does not go with mode {}",
                port_type.name(),
                if mode == Mode::Kernel {
                    "kernel"
                } else {
                    "userspace"
                }
            )));
        }
        let mtu = match o.get("mtu") {
            None | Some(Value::Null) => None,
            Some(v) => {
                let m = v
                    .as_u64()
                    .filter(|m| (68..=65535).contains(m))
                    .ok_or_else(|| invalid(format!("mtu: expected 68..65535, got {v}")))?;
                Some(m as u32)
            }
        };
        let runtime = match o.get("runtimeConfig") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => return Err(invalid(format!("runtimeConfig: not an object: {other}"))),
        };
        let mac = match opt_str(&runtime, "mac")? {
            Some(m) => Some(m.to_string()),
            None => opt_str(o, "mac")?.map(str::to_string),
        };
        if let Some(m) = &mac {
            if !valid_mac(m) {
                return Err(invalid(format!(
                    "mac: {m:?} is not a unicast MAC address (xx:xx:xx:xx:xx:xx)"
                )));
            }
        }
        let device_info_file = opt_str(&runtime, "CNIDeviceInfoFile")?.map(str::to_string);
        let prev_result = match o.get("prevResult") {
            None | Some(Value::Null) => None,
            Some(v @ Value::Object(_)) => Some(v.clone()),
            Some(other) => return Err(invalid(format!("prevResult: not an object: {other}"))),
        };
        if let Some(ipam) = o.get("ipam") {
            if !ipam.is_object() {
                return Err(invalid(format!("ipam: not an object: {ipam}")));
            }
        }
        Ok(NetConf {
            cni_version,
            name,
            control_socket: opt_str(o, "controlSocket")?
                .unwrap_or(DEFAULT_SOCKET)
                .to_string(),
            mode,
            port_type,
            mtu,
            mac,
            socket_dir: opt_str(o, "socketDir")?
                .unwrap_or(DEFAULT_SOCKET_DIR)
                .to_string(),
            state_dir: opt_str(o, "stateDir")?
                .unwrap_or(DEFAULT_STATE_DIR)
                .to_string(),
            device_info_file,
            prev_result,
            raw,
        })
    }
}

/// The CNI_* environment of one call.
#[derive(Clone, Debug, Default)]
pub struct Env {
    /// CNI_COMMAND.
    pub command: String,
    /// CNI_CONTAINERID.
    pub container_id: String,
    /// CNI_NETNS.
    pub netns: String,
    /// CNI_IFNAME.
    pub ifname: String,
    /// CNI_PATH.
    pub path: String,
}

fn env_err(msg: impl Into<String>) -> CniError {
    CniError::new(code::INVALID_ENV, msg)
}

/// Checks a container id as the spec asks: not empty, letters, digits and
/// `_ . -`, starting with a letter or digit.
pub fn check_container_id(id: &str) -> Result<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(env_err(format!(
            "CNI_CONTAINERID {id:?}: letters, digits, _ . - only, starting with a letter or digit"
        )))
    }
}

/// Checks an interface name: 1..15 bytes, no '/', ':' or white space, not
/// "." or "..".
pub fn check_ifname(name: &str) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 15
        && name != "."
        && name != ".."
        && !name
            .chars()
            .any(|c| c == '/' || c == ':' || c.is_whitespace());
    if ok {
        Ok(())
    } else {
        Err(env_err(format!(
            "CNI_IFNAME {name:?}: 1..15 bytes, no '/', ':' or white space"
        )))
    }
}

impl Env {
    /// Reads the environment and checks what `command` needs.
    pub fn read(get: impl Fn(&str) -> Option<String>) -> Result<Env> {
        let command = get("CNI_COMMAND").ok_or_else(|| env_err("CNI_COMMAND is not set"))?;
        let env = Env {
            container_id: get("CNI_CONTAINERID").unwrap_or_default(),
            netns: get("CNI_NETNS").unwrap_or_default(),
            ifname: get("CNI_IFNAME").unwrap_or_default(),
            path: get("CNI_PATH").unwrap_or_default(),
            command,
        };
        match env.command.as_str() {
            "ADD" | "DEL" | "CHECK" => {
                if env.container_id.is_empty() {
                    return Err(env_err("CNI_CONTAINERID is not set"));
                }
                check_container_id(&env.container_id)?;
                if env.ifname.is_empty() {
                    return Err(env_err("CNI_IFNAME is not set"));
                }
                check_ifname(&env.ifname)?;
                if env.command != "DEL" && env.netns.is_empty() {
                    return Err(env_err("CNI_NETNS is not set"));
                }
            }
            "VERSION" | "STATUS" | "GC" => {}
            other => {
                return Err(env_err(format!(
                    "CNI_COMMAND {other:?} is not one of ADD, DEL, CHECK, VERSION, STATUS, GC"
                )))
            }
        }
        Ok(env)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minimal_config_gets_the_defaults() {
        let c =
            NetConf::parse(r#"{"cniVersion":"1.1.0","name":"n1","type":"turnout-cni"}"#).unwrap();
        assert_eq!(c.mode, Mode::Kernel);
        assert_eq!(c.port_type, PortType::AfPacket);
        assert_eq!(c.control_socket, DEFAULT_SOCKET);
        assert_eq!(c.state_dir, DEFAULT_STATE_DIR);
    }

    #[test]
    fn bad_configs_get_the_spec_codes() {
        let code_of = |s: &str| NetConf::parse(s).unwrap_err().code;
        assert_eq!(code_of("{not json"), code::DECODE);
        assert_eq!(code_of("[1]"), code::DECODE);
        assert_eq!(
            code_of(r#"{"cniVersion":"9.9.9","name":"n"}"#),
            code::INCOMPATIBLE_VERSION
        );
        assert_eq!(
            code_of(r#"{"cniVersion":"1.1.0","name":"n","mode":"warp"}"#),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(r#"{"cniVersion":"1.1.0","name":"n","mode":"kernel","portType":"memif"}"#),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(r#"{"cniVersion":"1.1.0","name":"n","bogus":1}"#),
            code::UNSUPPORTED_FIELD
        );
        assert_eq!(
            code_of(r#"{"cniVersion":"1.1.0","name":"n","mac":"01:00:00:00:00:01"}"#),
            code::INVALID_CONFIG
        );
        assert_eq!(
            code_of(r#"{"cniVersion":"1.1.0","name":"n","mtu":20}"#),
            code::INVALID_CONFIG
        );
        assert_eq!(code_of(r#"{"cniVersion":"1.1.0"}"#), code::INVALID_CONFIG);
    }

    #[test]
    fn every_spelling_of_a_port_type_is_read_as_turnoutds_kind() {
        let conf = |mode: &str, pt: &str| {
            NetConf::parse(&format!(
                r#"{{"cniVersion":"1.1.0","name":"n","mode":"{mode}","portType":"{pt}"}}"#
            ))
        };
        for (mode, spelling, want) in [
            ("kernel", "af_xdp", PortType::AfXdp),
            ("kernel", "afxdp", PortType::AfXdp),
            ("kernel", "af_packet", PortType::AfPacket),
            ("kernel", "afpacket", PortType::AfPacket),
            ("kernel", "tap", PortType::Tap),
            ("userspace", "memif", PortType::Memif),
            ("userspace", "vhost_user", PortType::VhostUser),
            ("userspace", "vhost-user", PortType::VhostUser),
            ("userspace", "vhost", PortType::VhostUser),
        ] {
            let c = conf(mode, spelling).unwrap();
            assert_eq!(c.port_type, want, "{spelling}");
            // what the plugin asks turnoutd for and records: one spelling
            assert_eq!(c.port_type.kind(), want.port_kind().name());
            assert_eq!(PortType::parse(c.port_type.name()), Ok(want));
        }
        assert_eq!(PortType::VhostUser.kind(), "vhost_user");
        // a record written with the older spelling still reads
        assert_eq!(PortType::parse("vhost-user"), Ok(PortType::VhostUser));
        let accepted = "one of af_xdp (or afxdp), af_packet (or afpacket), tap, memif, \
                        vhost_user (or vhost-user, vhost)";
        let e = conf("kernel", "af-xdp").unwrap_err();
        assert_eq!(e.code, code::INVALID_CONFIG);
        assert_eq!(
            e.msg,
            format!("portType: unknown port kind \"af-xdp\" (expected {accepted})")
        );
        let e = conf("kernel", "vxlan").unwrap_err();
        assert_eq!(
            e.msg,
            format!("portType: port kind vxlan is not accepted here (expected {accepted})")
        );
        let e = conf("kernel", "vhost").unwrap_err();
        assert_eq!(e.msg, "portType vhost_user does not go with mode kernel");
    }

    #[test]
    fn runtime_config_mac_wins() {
        let c = NetConf::parse(
            r#"{"cniVersion":"1.0.0","name":"n","mac":"02:00:00:00:00:01",
                "runtimeConfig":{"mac":"02:00:00:00:00:02","CNIDeviceInfoFile":"/x"}}"#,
        )
        .unwrap();
        assert_eq!(c.mac.as_deref(), Some("02:00:00:00:00:02"));
        assert_eq!(c.device_info_file.as_deref(), Some("/x"));
    }

    #[test]
    fn env_is_checked_per_command() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            Env::read(|k| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            })
        };
        assert_eq!(env(&[]).unwrap_err().code, code::INVALID_ENV);
        assert_eq!(
            env(&[("CNI_COMMAND", "FROB")]).unwrap_err().code,
            code::INVALID_ENV
        );
        assert!(env(&[("CNI_COMMAND", "VERSION")]).is_ok());
        assert_eq!(
            env(&[
                ("CNI_COMMAND", "ADD"),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_IFNAME", "eth0")
            ])
            .unwrap_err()
            .code,
            code::INVALID_ENV
        );
        assert!(env(&[
            ("CNI_COMMAND", "DEL"),
            ("CNI_CONTAINERID", "c1"),
            ("CNI_IFNAME", "eth0")
        ])
        .is_ok());
        assert_eq!(
            env(&[
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "c/1"),
                ("CNI_IFNAME", "eth0")
            ])
            .unwrap_err()
            .code,
            code::INVALID_ENV
        );
        assert_eq!(
            env(&[
                ("CNI_COMMAND", "DEL"),
                ("CNI_CONTAINERID", "c1"),
                ("CNI_IFNAME", "way-too-long-name")
            ])
            .unwrap_err()
            .code,
            code::INVALID_ENV
        );
    }
}
