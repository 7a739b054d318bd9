//! Port specifications on the command line (docs/turnout-gen.md, "PORT
//! SPEC"): `memif:SOCKET[,key=value...]`, `afxdp:IFACE[,...]`,
//! `afpacket:IFACE[,...]`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

/// memif wake-up mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemifMode {
    /// Busy polling, interrupts masked.
    Poll,
    /// Eventfd interrupts.
    Interrupt,
}

/// AF_XDP bind mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum XdpMode {
    /// XDP_COPY (works on every driver, veth included).
    Copy,
    /// XDP_ZEROCOPY (drivers that support it).
    ZeroCopy,
}

/// A parsed port specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// memif client connecting to a server socket.
    Memif {
        /// Server's unix socket.
        socket: PathBuf,
        /// Interface id on that socket.
        id: u32,
        /// Interface secret (≤ 23 bytes).
        secret: Option<String>,
        /// Queue pairs requested.
        rings: u16,
        /// Descriptors per ring (power of two, 2..16384).
        ring_size: u32,
        /// Buffer size in bytes.
        buf_size: u32,
        /// Wake-up mode.
        mode: MemifMode,
        /// Serve the socket (`role=server`) instead of connecting to it: a
        /// memif link between two turnout-gen ports with no switch, the
        /// tester's own ceiling over shared memory.
        server: bool,
    },
    /// AF_XDP socket on an interface queue.
    AfXdp {
        /// Interface name.
        iface: String,
        /// Queue id.
        queue: u16,
        /// Bind mode.
        mode: XdpMode,
    },
    /// vhost-user frontend (the VM side) on a backend's socket.
    Vhost {
        /// The backend's unix socket.
        socket: PathBuf,
        /// Listen on the socket (for backends in client mode).
        server: bool,
        /// Queue pairs set up (turnout-gen uses the first).
        queues: u16,
        /// Entries per virtqueue (power of two, 2..32768).
        queue_size: u16,
        /// Largest frame in bytes (each buffer holds one).
        max_frame: u32,
    },
    /// AF_PACKET (TPACKET_V3) socket on an interface.
    AfPacket {
        /// Interface name.
        iface: String,
        /// Fanout queue.
        queue: u16,
    },
}

/// Default vhost-user virtqueue size.
pub const VHOST_QUEUE_SIZE: u16 = 1024;
/// Default vhost-user largest frame (the traffic sizes' maximum).
pub const VHOST_MAX_FRAME: u32 = 9000;

/// Default memif descriptors per ring.
pub const MEMIF_RING_SIZE: u32 = 1024;
/// Default memif buffer size.
pub const MEMIF_BUF_SIZE: u32 = 2048;

fn num<T: FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{key}={v}: not a valid number"))
}

fn iface_name(s: &str) -> Result<String, String> {
    // IFNAMSIZ is 16 including the terminating NUL.
    if s.is_empty() || s.len() > 15 || s.contains(['/', ' ', ',', ':']) {
        return Err(format!(
            "'{s}' is not a valid interface name (1..15 characters, no '/', ' ', ',', ':')"
        ));
    }
    Ok(s.to_string())
}

impl FromStr for PortSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            format!(
                "'{s}': expected memif:SOCKET, vhost-user:SOCKET, afxdp:IFACE or afpacket:IFACE"
            )
        })?;
        let mut parts = rest.split(',');
        let target = parts.next().unwrap_or("");
        if target.is_empty() {
            return Err(format!(
                "'{s}': missing the socket path or interface name after '{kind}:'"
            ));
        }
        let mut kv = Vec::new();
        for p in parts {
            // `server` alone: a vhost-user flag.
            if p == "server" {
                kv.push(("server", "1"));
                continue;
            }
            let (k, v) = p
                .split_once('=')
                .ok_or_else(|| format!("'{p}' in '{s}': expected key=value"))?;
            kv.push((k, v));
        }
        let unknown = |k: &str, allowed: &str| {
            format!("unknown option '{k}' for {kind} ports (allowed: {allowed})")
        };
        match kind {
            "memif" => {
                let mut spec = PortSpec::Memif {
                    socket: PathBuf::from(target),
                    id: 0,
                    secret: None,
                    rings: 1,
                    ring_size: MEMIF_RING_SIZE,
                    buf_size: MEMIF_BUF_SIZE,
                    mode: MemifMode::Poll,
                    server: false,
                };
                if let PortSpec::Memif {
                    id,
                    secret,
                    rings,
                    ring_size,
                    buf_size,
                    mode,
                    server,
                    ..
                } = &mut spec
                {
                    for (k, v) in kv {
                        match k {
                            "id" => *id = num(k, v)?,
                            "secret" => {
                                if v.is_empty() || v.len() > 23 {
                                    return Err("secret must be 1..23 bytes".into());
                                }
                                *secret = Some(v.to_string());
                            }
                            "rings" => {
                                *rings = num(k, v)?;
                                if *rings == 0 || *rings > 255 {
                                    return Err(format!("rings={v}: must be 1..255"));
                                }
                            }
                            "ring-size" => {
                                *ring_size = num(k, v)?;
                                if !ring_size.is_power_of_two() || !(2..=16384).contains(ring_size)
                                {
                                    return Err(format!(
                                        "ring-size={v}: must be a power of two in 2..16384"
                                    ));
                                }
                            }
                            "buf-size" => {
                                *buf_size = num(k, v)?;
                                if !(128..=65535).contains(buf_size) {
                                    return Err(format!("buf-size={v}: must be 128..65535"));
                                }
                            }
                            "mode" => {
                                *mode = match v {
                                    "poll" => MemifMode::Poll,
                                    "interrupt" => MemifMode::Interrupt,
                                    _ => {
                                        return Err(format!("mode={v}: must be poll or interrupt"))
                                    }
                                }
                            }
                            "role" => {
                                *server = match v {
                                    "client" => false,
                                    "server" => true,
                                    _ => return Err(format!("role={v}: must be client or server")),
                                }
                            }
                            _ => {
                                return Err(unknown(
                                    k,
                                    "id, secret, rings, ring-size, buf-size, mode, role",
                                ))
                            }
                        }
                    }
                }
                Ok(spec)
            }
            "vhost-user" | "vhost" => {
                let (mut server, mut queues, mut queue_size, mut max_frame) =
                    (false, 1u16, VHOST_QUEUE_SIZE, VHOST_MAX_FRAME);
                for (k, v) in kv {
                    match k {
                        "server" => server = true,
                        "queues" => {
                            queues = num(k, v)?;
                            if !(1..=16).contains(&queues) {
                                return Err(format!("queues={v}: must be 1..16"));
                            }
                        }
                        "queue-size" => {
                            queue_size = num(k, v)?;
                            if !queue_size.is_power_of_two() || queue_size < 2 {
                                return Err(format!(
                                    "queue-size={v}: must be a power of two in 2..32768"
                                ));
                            }
                        }
                        "max-frame" => {
                            max_frame = num(k, v)?;
                            if !(64..=65523).contains(&max_frame) {
                                return Err(format!("max-frame={v}: must be 64..65523"));
                            }
                        }
                        _ => return Err(unknown(k, "server, queues, queue-size, max-frame")),
                    }
                }
                Ok(PortSpec::Vhost {
                    socket: PathBuf::from(target),
                    server,
                    queues,
                    queue_size,
                    max_frame,
                })
            }
            "afxdp" => {
                let iface = iface_name(target)?;
                let (mut queue, mut mode) = (0u16, XdpMode::Copy);
                for (k, v) in kv {
                    match k {
                        "queue" => queue = num(k, v)?,
                        "mode" => {
                            mode = match v {
                                "copy" => XdpMode::Copy,
                                "zc" => XdpMode::ZeroCopy,
                                _ => return Err(format!("mode={v}: must be copy or zc")),
                            }
                        }
                        _ => return Err(unknown(k, "queue, mode")),
                    }
                }
                Ok(PortSpec::AfXdp { iface, queue, mode })
            }
            "afpacket" => {
                let iface = iface_name(target)?;
                let mut queue = 0u16;
                for (k, v) in kv {
                    match k {
                        "queue" => queue = num(k, v)?,
                        _ => return Err(unknown(k, "queue")),
                    }
                }
                Ok(PortSpec::AfPacket { iface, queue })
            }
            _ => Err(format!(
                "unknown port kind '{kind}' (expected memif, vhost-user, afxdp or afpacket)"
            )),
        }
    }
}

impl PortSpec {
    /// Whether receive loops sleep on the port's notification fd when idle.
    pub fn interrupt(&self) -> bool {
        matches!(
            self,
            PortSpec::Memif {
                mode: MemifMode::Interrupt,
                ..
            }
        )
    }

    /// The port queue turnout-gen uses on this port.
    pub fn queue(&self) -> u16 {
        match self {
            PortSpec::AfXdp { queue, .. } => *queue,
            _ => 0,
        }
    }
}

impl fmt::Display for PortSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortSpec::Memif {
                socket,
                id,
                secret,
                rings,
                ring_size,
                buf_size,
                mode,
                server,
            } => {
                write!(f, "memif:{}", socket.display())?;
                if *id != 0 {
                    write!(f, ",id={id}")?;
                }
                if secret.is_some() {
                    write!(f, ",secret=***")?;
                }
                if *rings != 1 {
                    write!(f, ",rings={rings}")?;
                }
                if *ring_size != MEMIF_RING_SIZE {
                    write!(f, ",ring-size={ring_size}")?;
                }
                if *buf_size != MEMIF_BUF_SIZE {
                    write!(f, ",buf-size={buf_size}")?;
                }
                if *mode == MemifMode::Interrupt {
                    write!(f, ",mode=interrupt")?;
                }
                if *server {
                    write!(f, ",role=server")?;
                }
                Ok(())
            }
            PortSpec::Vhost {
                socket,
                server,
                queues,
                queue_size,
                max_frame,
            } => {
                write!(f, "vhost-user:{}", socket.display())?;
                if *server {
                    write!(f, ",server")?;
                }
                if *queues != 1 {
                    write!(f, ",queues={queues}")?;
                }
                if *queue_size != VHOST_QUEUE_SIZE {
                    write!(f, ",queue-size={queue_size}")?;
                }
                if *max_frame != VHOST_MAX_FRAME {
                    write!(f, ",max-frame={max_frame}")?;
                }
                Ok(())
            }
            PortSpec::AfXdp { iface, queue, mode } => {
                write!(f, "afxdp:{iface}")?;
                if *queue != 0 {
                    write!(f, ",queue={queue}")?;
                }
                if *mode == XdpMode::ZeroCopy {
                    write!(f, ",mode=zc")?;
                }
                Ok(())
            }
            PortSpec::AfPacket { iface, queue } => {
                write!(f, "afpacket:{iface}")?;
                if *queue != 0 {
                    write!(f, ",queue={queue}")?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_kind_with_defaults_and_options() {
        let m: PortSpec = "memif:/run/t.sock".parse().unwrap();
        assert_eq!(
            m,
            PortSpec::Memif {
                socket: "/run/t.sock".into(),
                id: 0,
                secret: None,
                rings: 1,
                ring_size: 1024,
                buf_size: 2048,
                mode: MemifMode::Poll,
                server: false,
            }
        );
        let m: PortSpec = "memif:/s,role=server".parse().unwrap();
        assert!(matches!(m, PortSpec::Memif { server: true, .. }));
        assert_eq!(m.to_string(), "memif:/s,role=server");
        assert!("memif:/s,role=peer".parse::<PortSpec>().is_err());
        let m: PortSpec =
            "memif:/s,id=3,secret=abc,rings=2,ring-size=4096,buf-size=9216,mode=interrupt"
                .parse()
                .unwrap();
        assert_eq!(
            m.to_string(),
            "memif:/s,id=3,secret=***,rings=2,ring-size=4096,buf-size=9216,mode=interrupt"
        );
        let x: PortSpec = "afxdp:veth0,queue=1,mode=zc".parse().unwrap();
        assert_eq!(
            x,
            PortSpec::AfXdp {
                iface: "veth0".into(),
                queue: 1,
                mode: XdpMode::ZeroCopy
            }
        );
        let p: PortSpec = "afpacket:eth0".parse().unwrap();
        assert_eq!(
            p,
            PortSpec::AfPacket {
                iface: "eth0".into(),
                queue: 0
            }
        );
        assert_eq!(p.to_string(), "afpacket:eth0");
        let v: PortSpec = "vhost-user:/run/vu.sock".parse().unwrap();
        assert_eq!(
            v,
            PortSpec::Vhost {
                socket: "/run/vu.sock".into(),
                server: false,
                queues: 1,
                queue_size: 1024,
                max_frame: 9000,
            }
        );
        let v: PortSpec = "vhost:/s,server,queues=2,queue-size=256,max-frame=1518"
            .parse()
            .unwrap();
        assert_eq!(
            v.to_string(),
            "vhost-user:/s,server,queues=2,queue-size=256,max-frame=1518"
        );
        assert_eq!(v.to_string().parse::<PortSpec>().unwrap(), v);
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for (bad, why) in [
            ("veth0", "expected memif"),
            ("memif:", "missing"),
            ("tap:x", "unknown port kind"),
            ("memif:/s,ring-size=1000", "power of two"),
            ("memif:/s,ring-size=32768", "power of two"),
            ("memif:/s,rings=0", "1..255"),
            ("memif:/s,mode=fast", "poll or interrupt"),
            ("memif:/s,id=x", "not a valid number"),
            ("memif:/s,secret=012345678901234567890123", "1..23"),
            ("memif:/s,queue=1", "unknown option 'queue'"),
            ("memif:/s,ring-size", "key=value"),
            ("afxdp:averyveryverylongname", "valid interface"),
            ("afxdp:v0,mode=native", "copy or zc"),
            ("afpacket:v0,mode=zc", "unknown option"),
            ("vhost-user:/s,queues=0", "1..16"),
            ("vhost-user:/s,queue-size=1000", "power of two"),
            ("vhost-user:/s,queue-size=65536", "not a valid number"),
            ("vhost-user:/s,max-frame=10", "64..65523"),
            ("vhost-user:/s,role=server", "unknown option 'role'"),
            ("vhost-user:", "missing"),
        ] {
            let e = bad.parse::<PortSpec>().unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
