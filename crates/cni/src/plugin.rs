//! The CNI commands.

use std::collections::HashSet;
use std::fs;
use std::path::Path;

use serde_json::{json, Value};

use crate::config::{Env, Mode, NetConf, PortType};
use crate::ctl::{CallError, Ctl};
use crate::error::{code, CniError, Result};
use crate::ipam::{Invocation, Ipam};
use crate::link::{self, Netns};
use crate::state::{self, Lock, Record};
use crate::version;

/// The port's name on turnoutd: the container id (at most 46 bytes) and the
/// interface name, so DEL and GC find it from those alone.
pub fn port_name(container_id: &str, ifname: &str) -> String {
    let cid: String = container_id.chars().take(46).collect();
    let ifn: String = ifname
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "_.-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{cid}.{ifn}")
}

fn fnv1a(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// The host end of the pod's veth (or the tap's name before it moves):
/// "tn" and 13 hex digits of a hash of container id and interface name.
pub fn host_ifname(container_id: &str, ifname: &str) -> String {
    let h = fnv1a(format!("{container_id}\0{ifname}").as_bytes());
    format!("tn{:013x}", h & ((1u64 << 52) - 1))
}

fn is_new_result(v: &str) -> bool {
    version::cmp(v, "1.1.0").is_ge()
}

/// What an ADD produced so far, undone in reverse if a later step fails.
#[derive(Default)]
struct Undo {
    ipam: bool,
    port: Option<String>,
    host_link: Option<String>,
    pod_link: bool,
    socket_dir: Option<String>,
    device_info: Option<String>,
}

struct Ctx<'a> {
    conf: &'a NetConf,
    env: &'a Env,
    ctl: Ctl,
    ipam: Option<Ipam>,
}

impl Ctx<'_> {
    fn inv<'b>(&'b self, command: &'b str) -> Invocation<'b> {
        Invocation {
            command,
            container_id: &self.env.container_id,
            ifname: &self.env.ifname,
            netns: &self.env.netns,
        }
    }
}

/// ADD.
pub fn add(conf: &NetConf, env: &Env) -> Result<Value> {
    let _lock = Lock::take(&conf.state_dir)?;
    if state::load(&conf.state_dir, &conf.name, &env.container_id, &env.ifname).is_some() {
        return Err(CniError::new(
            code::ALREADY_ATTACHED,
            format!(
                "container {} is already attached to network {} as {}",
                env.container_id, conf.name, env.ifname
            ),
        ));
    }
    let ns = Netns::open(&env.netns)?;
    let ipam = Ipam::from_conf(&conf.raw, &env.path)?;
    let ctx = Ctx {
        conf,
        env,
        ctl: Ctl::new(&conf.control_socket),
        ipam,
    };
    // turnoutd first: if it is down, nothing is created at all.
    ctx.ctl
        .call("version", None)
        .map_err(|e| e.to_cni("attach a pod"))?;
    let mut undo = Undo::default();
    match add_steps(&ctx, &ns, &mut undo) {
        Ok(v) => Ok(v),
        Err(e) => {
            rollback(&ctx, &ns, undo);
            Err(e)
        }
    }
}

fn rollback(ctx: &Ctx, ns: &Netns, undo: Undo) {
    if let Some(p) = undo.port {
        let _ = ctx.ctl.port_remove(&p);
    }
    if let Some(h) = undo.host_link {
        let _ = link::delete_if_present(None, &h);
    }
    if undo.pod_link {
        let _ = link::delete_if_present(Some(ns), &ctx.env.ifname);
    }
    if let Some(d) = undo.socket_dir {
        let _ = fs::remove_dir_all(d);
    }
    if let Some(f) = undo.device_info {
        let _ = fs::remove_file(f);
    }
    if undo.ipam {
        if let Some(ipam) = &ctx.ipam {
            let _ = ipam.run(&ctx.inv("DEL"), None);
        }
    }
}

fn add_steps(ctx: &Ctx, ns: &Netns, undo: &mut Undo) -> Result<Value> {
    let conf = ctx.conf;
    let env = ctx.env;
    let port = port_name(&env.container_id, &env.ifname);
    let host = host_ifname(&env.container_id, &env.ifname);
    let ipam_result = match &ctx.ipam {
        Some(ipam) => {
            undo.ipam = true;
            let r = ipam.run(&ctx.inv("ADD"), None)?;
            if !r.is_object() {
                return Err(CniError::new(
                    code::IPAM,
                    format!("ipam plugin {} ADD gave no result", ipam.name()),
                ));
            }
            Some(r)
        }
        None => None,
    };
    let mut result = conf
        .prev_result
        .clone()
        .unwrap_or_else(|| json!({"interfaces": [], "ips": [], "routes": []}));
    result["cniVersion"] = json!(conf.cni_version);
    for k in ["interfaces", "ips", "routes"] {
        if !result[k].is_array() {
            result[k] = json!([]);
        }
    }
    let new = is_new_result(&conf.cni_version);
    let mut rec = Record {
        network: conf.name.clone(),
        container_id: env.container_id.clone(),
        ifname: env.ifname.clone(),
        netns: env.netns.clone(),
        mode: match conf.mode {
            Mode::Kernel => "kernel".into(),
            Mode::Userspace => "userspace".into(),
        },
        port_type: conf.port_type.name().into(),
        port: port.clone(),
        host_if: String::new(),
        socket_dir: String::new(),
        socket_path: String::new(),
        device_info_file: String::new(),
        control_socket: conf.control_socket.clone(),
        conf: conf.raw.clone(),
        result: Value::Null,
    };
    let pod_index;
    match conf.mode {
        Mode::Kernel => {
            // A leftover of a crashed ADD would make the names collide.
            link::delete_if_present(None, &host)?;
            let mtu = conf.mtu.map(|m| m.to_string());
            if conf.port_type == PortType::Tap {
                undo.port = Some(port.clone());
                ctx.ctl
                    .port_add(json!({"name": port, "kind": "tap", "iface": host}))
                    .map_err(|e| e.to_cni("add the pod's tap port"))?;
                // The tap stays turnoutd's (its descriptor) when it moves; a
                // failed move or rename is undone by removing the port (the
                // tap goes with it), never by deleting a pod link of that name.
                link::ip(None, &["link", "set", "dev", &host, "netns", &ns.path])?;
                link::ip(
                    Some(ns),
                    &["link", "set", "dev", &host, "name", &env.ifname],
                )?;
                undo.pod_link = true;
            } else {
                undo.host_link = Some(host.clone());
                let mut args: Vec<&str> = vec!["link", "add", &host];
                if let Some(m) = &mtu {
                    args.extend(["mtu", m]);
                }
                args.extend(["type", "veth", "peer", "name", &env.ifname]);
                if let Some(m) = &mtu {
                    args.extend(["mtu", m]);
                }
                args.extend(["netns", &ns.path]);
                link::ip(None, &args)?;
                undo.pod_link = true;
                // No IPv6 link-local chatter from the switch side.
                let _ = fs::write(format!("/proc/sys/net/ipv6/conf/{host}/disable_ipv6"), "1");
                link::ip(None, &["link", "set", "dev", &host, "up"])?;
                rec.host_if = host.clone();
            }
            if let Some(m) = &mtu {
                link::ip(Some(ns), &["link", "set", "dev", &env.ifname, "mtu", m])?;
            }
            if let Some(mac) = &conf.mac {
                link::ip(
                    Some(ns),
                    &["link", "set", "dev", &env.ifname, "address", mac],
                )?;
            }
            if conf.port_type != PortType::Tap {
                link::offloads_off(Some(ns), &env.ifname)?;
            }
            link::ip(Some(ns), &["link", "set", "dev", &env.ifname, "up"])?;
            if conf.port_type != PortType::Tap {
                undo.port = Some(port.clone());
                ctx.ctl
                    .port_add(json!({"name": port, "kind": conf.port_type.kind(), "iface": host}))
                    .map_err(|e| e.to_cni("add the pod's port"))?;
                let hl = link::link_show(None, &host).ok_or_else(|| {
                    CniError::new(code::LINK, format!("host link {host} vanished"))
                })?;
                result["interfaces"]
                    .as_array_mut()
                    .expect("an array")
                    .push(json!({"name": host, "mac": link::mac_of(&hl)}));
            }
            let pl = link::link_show(Some(ns), &env.ifname).ok_or_else(|| {
                CniError::new(code::LINK, format!("pod link {} vanished", env.ifname))
            })?;
            let mut iface =
                json!({"name": env.ifname, "mac": link::mac_of(&pl), "sandbox": env.netns});
            if new {
                iface["mtu"] = json!(link::mtu_of(&pl));
            }
            let ifs = result["interfaces"].as_array_mut().expect("an array");
            ifs.push(iface);
            pod_index = ifs.len() - 1;
        }
        Mode::Userspace => {
            let dir = Path::new(&conf.socket_dir).join(&env.container_id);
            let sock = dir.join(format!("{}.sock", env.ifname));
            let sock_s = sock.to_string_lossy().into_owned();
            let dir_s = dir.to_string_lossy().into_owned();
            if !dir.exists() {
                fs::create_dir_all(&dir).map_err(|e| {
                    CniError::new(code::IO_FAILURE, format!("cannot create {dir_s}: {e}"))
                })?;
                undo.socket_dir = Some(dir_s.clone());
            }
            let table = match conf.port_type {
                PortType::Memif => {
                    json!({"name": port, "kind": "memif", "socket": sock_s, "id": 0})
                }
                _ => json!({"name": port, "kind": "vhost_user", "socket": sock_s, "client": false}),
            };
            undo.port = Some(port.clone());
            ctx.ctl
                .port_add(table)
                .map_err(|e| e.to_cni("add the pod's port"))?;
            rec.socket_dir = dir_s;
            rec.socket_path = sock_s.clone();
            let mut iface = json!({"name": env.ifname, "sandbox": env.netns});
            if let Some(mac) = &conf.mac {
                iface["mac"] = json!(mac);
            }
            if new {
                if let Some(m) = conf.mtu {
                    iface["mtu"] = json!(m);
                }
                iface["socketPath"] = json!(sock_s);
            }
            let ifs = result["interfaces"].as_array_mut().expect("an array");
            ifs.push(iface);
            pod_index = ifs.len() - 1;
            if let Some(f) = &conf.device_info_file {
                write_device_info(f, conf.port_type, &sock_s)?;
                undo.device_info = Some(f.clone());
                rec.device_info_file = f.clone();
            }
        }
    }
    if let Some(r) = ipam_result {
        merge_ipam(&mut result, &r, pod_index, &conf.cni_version);
        if conf.mode == Mode::Kernel {
            configure_ips(ns, &env.ifname, &r)?;
        }
    }
    rec.result = result.clone();
    state::save(&conf.state_dir, &rec)?;
    Ok(result)
}

fn write_device_info(path: &str, pt: PortType, sock: &str) -> Result<()> {
    let p = Path::new(path);
    if p.exists() {
        // A device plugin wrote it: the spec says read, not overwrite.
        return Ok(());
    }
    if let Some(dir) = p.parent() {
        fs::create_dir_all(dir).map_err(|e| {
            CniError::new(
                code::IO_FAILURE,
                format!("cannot create {}: {e}", dir.display()),
            )
        })?;
    }
    // The host (turnoutd) makes the socket and the pod attaches to it: memif
    // role "slave", vhost-user mode "client" in the device-info spec's terms.
    let info = match pt {
        PortType::Memif => json!({"type": "memif", "version": "1.1.0",
            "memif": {"role": "slave", "mode": "ethernet", "path": sock}}),
        _ => json!({"type": "vhost-user", "version": "1.1.0",
            "vhost-user": {"mode": "client", "path": sock}}),
    };
    fs::write(p, serde_json::to_string_pretty(&info).expect("json"))
        .map_err(|e| CniError::new(code::IO_FAILURE, format!("cannot write {path}: {e}")))
}

fn merge_ipam(result: &mut Value, ipam: &Value, index: usize, v: &str) {
    for ip in ipam
        .get("ips")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let mut ip = ip.clone();
        ip["interface"] = json!(index);
        let addr = ip.get("address").and_then(Value::as_str).unwrap_or("");
        if version::cmp(v, "1.0.0").is_lt() {
            ip["version"] = json!(if addr.contains(':') { "6" } else { "4" });
        } else if let Some(o) = ip.as_object_mut() {
            o.remove("version");
        }
        result["ips"].as_array_mut().expect("an array").push(ip);
    }
    for r in ipam
        .get("routes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        result["routes"]
            .as_array_mut()
            .expect("an array")
            .push(r.clone());
    }
    if let Some(dns) = ipam.get("dns") {
        if dns.as_object().is_some_and(|o| !o.is_empty()) {
            result["dns"] = dns.clone();
        }
    }
}

fn configure_ips(ns: &Netns, ifname: &str, ipam: &Value) -> Result<()> {
    let ips: Vec<&Value> = ipam
        .get("ips")
        .and_then(Value::as_array)
        .map(|a| a.iter().collect())
        .unwrap_or_default();
    for ip in &ips {
        if let Some(a) = ip.get("address").and_then(Value::as_str) {
            link::ip(Some(ns), &["addr", "add", a, "dev", ifname])?;
        }
    }
    for r in ipam
        .get("routes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let Some(dst) = r.get("dst").and_then(Value::as_str) else {
            continue;
        };
        let v6 = dst.contains(':');
        // A route without a gateway goes through the gateway of its family.
        let gw = r.get("gw").and_then(Value::as_str).or_else(|| {
            ips.iter()
                .filter_map(|ip| ip.get("gateway").and_then(Value::as_str))
                .find(|g| g.contains(':') == v6)
        });
        let mut args = vec!["route", "add", dst];
        if let Some(g) = gw {
            args.extend(["via", g]);
        }
        args.extend(["dev", ifname]);
        link::ip(Some(ns), &args)?;
    }
    Ok(())
}

/// Removes what `rec` (or, without a record, the names derived from the
/// container id and interface name) describes. Missing pieces are fine.
fn teardown(
    ctl: &Ctl,
    conf_raw: &Value,
    cni_path: &str,
    container_id: &str,
    ifname: &str,
    netns: &str,
    rec: Option<&Record>,
) -> Result<()> {
    let port = rec
        .map(|r| r.port.clone())
        .unwrap_or_else(|| port_name(container_id, ifname));
    // turnoutd down is "try again later": the port may still be there.
    ctl.port_remove(&port)
        .map_err(|e| e.to_cni("remove the pod's port"))?;
    let host = rec
        .map(|r| r.host_if.clone())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| host_ifname(container_id, ifname));
    link::delete_if_present(None, &host)?;
    let tap = rec.map(|r| r.port_type == "tap").unwrap_or(false);
    if tap && !netns.is_empty() {
        if let Ok(ns) = Netns::open(netns) {
            link::delete_if_present(Some(&ns), ifname)?;
        }
    }
    if let Some(r) = rec {
        if !r.socket_dir.is_empty() {
            let _ = fs::remove_file(&r.socket_path);
            // The per-pod directory goes when its last socket has.
            let _ = fs::remove_dir(&r.socket_dir);
        }
        if !r.device_info_file.is_empty() {
            let _ = fs::remove_file(&r.device_info_file);
        }
    }
    if let Some(ipam) = Ipam::from_conf(conf_raw, cni_path)? {
        ipam.run(
            &Invocation {
                command: "DEL",
                container_id,
                ifname,
                netns,
            },
            None,
        )?;
    }
    Ok(())
}

/// DEL: idempotent; a missing port, link, netns or record is success.
pub fn del(conf: &NetConf, env: &Env) -> Result<()> {
    let _lock = Lock::take(&conf.state_dir)?;
    let rec = state::load(&conf.state_dir, &conf.name, &env.container_id, &env.ifname);
    if rec.is_none() {
        let others =
            state::other_holders(&conf.state_dir, &conf.name, &env.container_id, &env.ifname);
        if !others.is_empty() {
            // Another network attached this interface: its port and links
            // are not ours to remove; only this network's IPAM lease is.
            if let Some(ipam) = Ipam::from_conf(&conf.raw, &env.path)? {
                ipam.run(
                    &Invocation {
                        command: "DEL",
                        container_id: &env.container_id,
                        ifname: &env.ifname,
                        netns: &env.netns,
                    },
                    None,
                )?;
            }
            return Ok(());
        }
    }
    let ctl = Ctl::new(
        rec.as_ref()
            .map(|r| r.control_socket.as_str())
            .unwrap_or(&conf.control_socket),
    );
    teardown(
        &ctl,
        &conf.raw,
        &env.path,
        &env.container_id,
        &env.ifname,
        &env.netns,
        rec.as_ref(),
    )?;
    state::remove(&conf.state_dir, &conf.name, &env.container_id, &env.ifname)
}

fn check_failed(msg: impl Into<String>) -> CniError {
    CniError::new(code::CHECK_FAILED, msg)
}

/// CHECK: the attachment is still what ADD made.
pub fn check(conf: &NetConf, env: &Env) -> Result<()> {
    let _lock = Lock::take(&conf.state_dir)?;
    let rec = state::load(&conf.state_dir, &conf.name, &env.container_id, &env.ifname).ok_or_else(
        || {
            check_failed(format!(
                "no attachment of container {} as {} on network {}",
                env.container_id, env.ifname, conf.name
            ))
        },
    )?;
    let ns = Netns::open(&env.netns)?;
    let ctl = Ctl::new(&rec.control_socket);
    let found = ctl
        .port_find(&rec.port)
        .map_err(|e| e.to_cni("check the pod's port"))?;
    let p = found.ok_or_else(|| {
        check_failed(format!(
            "port {} is not on turnoutd at {} (was turnoutd restarted?)",
            rec.port, rec.control_socket
        ))
    })?;
    let kind = PortType::parse(&rec.port_type)
        .map(PortType::kind)
        .unwrap_or("");
    if p.get("kind").and_then(Value::as_str) != Some(kind) {
        return Err(check_failed(format!(
            "port {} is a {} port, not {kind}",
            rec.port,
            p.get("kind").and_then(Value::as_str).unwrap_or("?")
        )));
    }
    if rec.mode == "kernel" {
        if !rec.host_if.is_empty() && link::link_show(None, &rec.host_if).is_none() {
            return Err(check_failed(format!("host link {} is gone", rec.host_if)));
        }
        let pl = link::link_show(Some(&ns), &env.ifname)
            .ok_or_else(|| check_failed(format!("{} is gone from {}", env.ifname, env.netns)))?;
        let want_mac = rec.result["interfaces"]
            .as_array()
            .and_then(|a| a.iter().find(|i| i["sandbox"].is_string()))
            .and_then(|i| i["mac"].as_str())
            .map(str::to_string);
        if want_mac.is_some() && link::mac_of(&pl) != want_mac {
            return Err(check_failed(format!(
                "{} has MAC {:?}, not {:?}",
                env.ifname,
                link::mac_of(&pl),
                want_mac
            )));
        }
        let have = link::addresses(Some(&ns), &env.ifname);
        for ip in rec.result["ips"].as_array().into_iter().flatten() {
            if let Some(a) = ip["address"].as_str() {
                if !have.iter().any(|h| h == a) {
                    return Err(check_failed(format!("{} lost its address {a}", env.ifname)));
                }
            }
        }
    } else if !Path::new(&rec.socket_path).exists() {
        return Err(check_failed(format!("socket {} is gone", rec.socket_path)));
    }
    if let Some(ipam) = Ipam::from_conf(&conf.raw, &env.path)? {
        let prev = conf.prev_result.clone().unwrap_or(rec.result.clone());
        ipam.run(
            &Invocation {
                command: "CHECK",
                container_id: &env.container_id,
                ifname: &env.ifname,
                netns: &env.netns,
            },
            Some(("prevResult", prev)),
        )?;
    }
    Ok(())
}

/// STATUS: whether turnoutd answers (50 when it does not).
pub fn status(conf: &NetConf) -> Result<()> {
    let ctl = Ctl::new(&conf.control_socket);
    match ctl.call("version", None) {
        Ok(_) => Ok(()),
        Err(CallError::Unreachable(why)) => Err(CniError::new(
            code::NOT_AVAILABLE,
            format!("turnoutd does not answer: {why}"),
        )),
        Err(e) => Err(CniError::new(
            code::NOT_AVAILABLE,
            format!("turnoutd answers with an error: {:?}", e),
        )),
    }
}

/// GC: every attachment of this network not in `cni.dev/valid-attachments`
/// is torn down (port, links, sockets, IPAM lease, record).
pub fn gc(conf: &NetConf, env: &Env) -> Result<Value> {
    let _lock = Lock::take(&conf.state_dir)?;
    let valid: HashSet<(String, String)> = match conf.raw.get("cni.dev/valid-attachments") {
        None | Some(Value::Null) => HashSet::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                let cid = v.get("containerID").and_then(Value::as_str);
                let ifn = v.get("ifname").and_then(Value::as_str);
                match (cid, ifn) {
                    (Some(c), Some(i)) => Ok((c.to_string(), i.to_string())),
                    _ => Err(CniError::new(
                        code::INVALID_CONFIG,
                        format!("cni.dev/valid-attachments: {v} lacks containerID or ifname"),
                    )),
                }
            })
            .collect::<Result<_>>()?,
        Some(other) => {
            return Err(CniError::new(
                code::INVALID_CONFIG,
                format!("cni.dev/valid-attachments: not an array: {other}"),
            ))
        }
    };
    let mut removed = Vec::new();
    let mut first_err = None;
    for rec in state::list(&conf.state_dir, &conf.name)? {
        if valid.contains(&(rec.container_id.clone(), rec.ifname.clone())) {
            continue;
        }
        let ctl = Ctl::new(&rec.control_socket);
        // The lease was taken with the ADD's configuration: release it so.
        let r = teardown(
            &ctl,
            &rec.conf,
            &env.path,
            &rec.container_id,
            &rec.ifname,
            &rec.netns,
            Some(&rec),
        )
        .and_then(|()| state::remove(&conf.state_dir, &conf.name, &rec.container_id, &rec.ifname));
        match r {
            Ok(()) => removed.push(rec.port.clone()),
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(e);
                }
            }
        }
    }
    // An IPAM plugin that speaks 1.1.0 sweeps leases ADD records missed.
    if let Some(ipam) = Ipam::from_conf(&conf.raw, &env.path)? {
        if ipam.speaks("1.1.0") {
            let list: Vec<Value> = valid
                .iter()
                .map(|(c, i)| json!({"containerID": c, "ifname": i}))
                .collect();
            ipam.run(
                &Invocation {
                    command: "GC",
                    container_id: "",
                    ifname: "",
                    netns: "",
                },
                Some(("cni.dev/valid-attachments", json!(list))),
            )?;
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(json!(removed)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_names_are_stable_valid_and_bounded() {
        let long = "a".repeat(64);
        let p = port_name(&long, "net1");
        assert_eq!(p, format!("{}.net1", "a".repeat(46)));
        assert!(p.len() <= 64);
        assert_eq!(port_name("c1", "eth0"), "c1.eth0");
        // turnoutd's port names: letters, digits, _ . : - only.
        assert_eq!(port_name("c1", "e@h0"), "c1.e_h0");
        assert_eq!(port_name("c1", "eth0"), port_name("c1", "eth0"));
    }

    #[test]
    fn host_ifnames_fit_and_differ() {
        let a = host_ifname("pod1", "eth0");
        assert_eq!(a.len(), 15);
        assert!(a.starts_with("tn"));
        assert_eq!(a, host_ifname("pod1", "eth0"));
        assert_ne!(a, host_ifname("pod2", "eth0"));
        assert_ne!(a, host_ifname("pod1", "eth1"));
        let names: HashSet<String> = (0..1000)
            .map(|i| host_ifname(&format!("pod{i}"), "eth0"))
            .collect();
        assert_eq!(names.len(), 1000);
    }

    #[test]
    fn ipam_results_point_at_the_pod_interface_in_the_asked_version() {
        let ipam = json!({"cniVersion": "1.0.0",
            "ips": [{"address": "10.0.0.2/24", "gateway": "10.0.0.1"},
                    {"address": "fd00::2/64"}],
            "routes": [{"dst": "0.0.0.0/0"}], "dns": {}});
        let mut r = json!({"interfaces": [{}, {}], "ips": [], "routes": []});
        merge_ipam(&mut r, &ipam, 1, "0.4.0");
        assert_eq!(r["ips"][0]["interface"], 1);
        assert_eq!(r["ips"][0]["version"], "4");
        assert_eq!(r["ips"][1]["version"], "6");
        assert_eq!(r["routes"].as_array().unwrap().len(), 1);
        assert!(r.get("dns").is_none());
        let mut r = json!({"interfaces": [{}], "ips": [], "routes": []});
        merge_ipam(&mut r, &ipam, 0, "1.1.0");
        assert!(r["ips"][0].get("version").is_none());
        assert_eq!(r["ips"][1]["interface"], 0);
    }
}
