//! Port specifications on the command line (docs/turnout-gen.md, "PORT
//! SPEC"): `memif:SOCKET[,key=value...]`, `af_xdp:IFACE[,...]`,
//! `af_packet:IFACE[,...]`, `vhost_user:SOCKET[,...]`. The kinds are
//! spelled as turnoutd's `[[ports]] kind`; the older spellings `afxdp`,
//! `afpacket`, `vhost-user` and `vhost` are accepted as aliases (one
//! parser for turnoutd, turnout-gen and turnout-cni: `ports::PortKind`).
//!
//! The memif, AF_XDP and AF_PACKET specs are compact spellings of the port
//! configurations turnoutd's `[[ports]]` tables use (crates/ports:
//! [`MemifSpec`], [`AfXdpConfig`], [`AfPacketConfig`]): the text's keys
//! (with the short aliases below) become the struct's fields, and the same
//! `validate` checks them, so a value out of range gets the same message
//! here as in turnoutd. Only how turnout-gen drives the port (memif `mode`
//! and `role`, the `queue` it uses) is its own.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use ports::af_packet::AfPacketConfig;
use ports::af_xdp::{AfXdpConfig, XdpBind};
use ports::memif::MemifSpec;
use ports::PortKind;

/// memif wake-up mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemifMode {
    /// Busy polling, interrupts masked.
    Poll,
    /// Eventfd interrupts.
    Interrupt,
}

/// A parsed port specification.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PortSpec {
    /// memif client connecting to a server socket.
    Memif {
        /// The interface: socket, id, secret, queues, ring and buffer
        /// sizes, as turnoutd's memif ports have them.
        config: MemifSpec,
        /// Wake-up mode.
        mode: MemifMode,
        /// Serve the socket (`role=server`) instead of connecting to it: a
        /// memif link between two turnout-gen ports with no switch, the
        /// tester's own ceiling over shared memory.
        server: bool,
    },
    /// AF_XDP socket on an interface queue.
    AfXdp {
        /// The port (its `queues` cover `queue`).
        config: AfXdpConfig,
        /// Queue id turnout-gen uses.
        queue: u16,
        /// Receive loops sleep on the socket when idle (`wakeup=interrupt`;
        /// `mode` is the bind mode here).
        interrupt: bool,
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
        /// Largest frame sent (`tx-frame=N`): transmit buffers are sized
        /// for it. `None`: the traffic's largest frame in the tx and txrx
        /// roles (`PortSpec::sized_for`), `max_frame` otherwise.
        tx_frame: Option<u32>,
        /// Receive loops sleep on the call eventfd when idle (`mode=interrupt`).
        interrupt: bool,
    },
    /// AF_PACKET (TPACKET_V3) socket on an interface.
    AfPacket {
        /// The port.
        config: AfPacketConfig,
        /// Fanout queue turnout-gen uses (0).
        queue: u16,
    },
}

/// Default vhost-user virtqueue size. Receive rings absorb what arrives
/// while turnout-gen waits for a CPU (a core shared with its own sender,
/// another process, a hog): 8192 entries are 8 ms at 1 Mpps, 80 ms at
/// 100 kpps; a 1024-entry ring lost up to 10 777 of 200 000 frames at
/// 100 kpps on a quiet host. Transmit rings the same, so a
/// switch that stalls does not push the sender back as soon.
pub const VHOST_QUEUE_SIZE: u16 = 8192;
/// Default memif ring size of turnout-gen's ports (turnoutd's and the
/// memif default is 1024; the client chooses): as `VHOST_QUEUE_SIZE`.
pub const MEMIF_RING_SIZE: u32 = 8192;
/// Default UMEM chunks per AF_XDP queue of turnout-gen's ports (half
/// receive, half transmit; turnoutd's default too): a receive ring of
/// 8192, as `VHOST_QUEUE_SIZE`. Kept here so the tester's rings stay as
/// they are whatever turnoutd's default becomes.
pub const AFXDP_FRAMES_PER_QUEUE: u32 = 16384;
/// Default vhost-user largest frame (the traffic sizes' maximum).
pub const VHOST_MAX_FRAME: u32 = 9000;

/// The port kinds turnout-gen opens (read with `ports::PortKind`, so
/// turnoutd's spelling and the older ones are accepted alike).
pub const KINDS: [PortKind; 4] = [
    PortKind::Memif,
    PortKind::VhostUser,
    PortKind::AfXdp,
    PortKind::AfPacket,
];

/// Short spellings of the memif keys (`rings=2` is `queues=2`).
const MEMIF_ALIASES: &[(&str, &str)] = &[
    ("rings", "queues"),
    ("ring-size", "ring_size"),
    ("buf-size", "buffer_size"),
];

fn num<T: FromStr>(key: &str, v: &str) -> Result<T, String> {
    v.parse()
        .map_err(|_| format!("{key}={v}: not a valid number"))
}

/// The `key=value` options of a spec as the port struct's fields: the
/// target (socket or interface) under `target_key`, aliases and `-`
/// spelled as the struct's keys.
fn fields(
    target_key: &str,
    target: &str,
    kv: &[(&str, &str)],
    aliases: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut out = vec![(target_key.to_string(), target.to_string())];
    for (k, v) in kv {
        let k = aliases
            .iter()
            .find(|(a, _)| a == k)
            .map(|(_, f)| f.to_string())
            .unwrap_or_else(|| k.replace('-', "_"));
        out.push((k, v.to_string()));
    }
    out
}

/// Parses and checks a port struct exactly as turnoutd does.
fn port_config<'a, T: serde::Deserialize<'a>>(
    pairs: &'a [(String, String)],
    validate: impl Fn(&T) -> Result<(), ports::ConfigError>,
) -> Result<T, String> {
    let c: T = ports::config::from_pairs(pairs).map_err(|e| e.to_string())?;
    validate(&c).map_err(|e| e.to_string())?;
    Ok(c)
}

impl FromStr for PortSpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, rest) = s.split_once(':').ok_or_else(|| {
            format!(
                "'{s}': expected memif:SOCKET, vhost_user:SOCKET, af_xdp:IFACE or af_packet:IFACE"
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
        let kind = PortKind::parse_among(kind, &KINDS).map_err(|e| format!("'{s}': {e}"))?;
        let unknown = |k: &str, allowed: &str| {
            format!("unknown option '{k}' for {kind} ports (allowed: {allowed})")
        };
        match kind {
            PortKind::Memif => {
                let (mut mode, mut server) = (MemifMode::Poll, false);
                let mut rest = Vec::new();
                for (k, v) in kv {
                    match k {
                        "mode" => {
                            mode = match v {
                                "poll" => MemifMode::Poll,
                                "interrupt" => MemifMode::Interrupt,
                                _ => return Err(format!("mode={v}: must be poll or interrupt")),
                            }
                        }
                        "role" => {
                            server = match v {
                                "client" => false,
                                "server" => true,
                                _ => return Err(format!("role={v}: must be client or server")),
                            }
                        }
                        _ => rest.push((k, v)),
                    }
                }
                let ring = MEMIF_RING_SIZE.to_string();
                if !rest
                    .iter()
                    .any(|(k, _)| *k == "ring_size" || *k == "ring-size")
                {
                    rest.push(("ring_size", ring.as_str()));
                }
                let pairs = fields("socket", target, &rest, MEMIF_ALIASES);
                let config = port_config(&pairs, MemifSpec::validate)?;
                Ok(PortSpec::Memif {
                    config,
                    mode,
                    server,
                })
            }
            PortKind::VhostUser => {
                let (mut server, mut queues, mut queue_size, mut max_frame) =
                    (false, 1u16, VHOST_QUEUE_SIZE, VHOST_MAX_FRAME);
                let mut interrupt = false;
                let mut tx_frame = None;
                for (k, v) in kv {
                    match k {
                        "server" => server = true,
                        "mode" => {
                            interrupt = match v {
                                "poll" => false,
                                "interrupt" => true,
                                _ => return Err(format!("mode={v}: must be poll or interrupt")),
                            }
                        }
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
                        "tx-frame" => {
                            let t: u32 = num(k, v)?;
                            if !(14..=65523).contains(&t) {
                                return Err(format!("tx-frame={v}: must be 14..65523"));
                            }
                            tx_frame = Some(t);
                        }
                        _ => {
                            return Err(unknown(
                                k,
                                "server, queues, queue-size, max-frame, tx-frame, mode",
                            ))
                        }
                    }
                }
                if let Some(t) = tx_frame {
                    if t > max_frame {
                        return Err(format!("tx-frame={t}: larger than max-frame ({max_frame})"));
                    }
                }
                Ok(PortSpec::Vhost {
                    socket: PathBuf::from(target),
                    server,
                    queues,
                    queue_size,
                    max_frame,
                    tx_frame,
                    interrupt,
                })
            }
            PortKind::AfXdp => {
                let mut queue = None;
                let mut interrupt = false;
                let mut rest = Vec::new();
                for (k, v) in kv {
                    match k {
                        "queue" => queue = Some(num::<u16>(k, v)?),
                        "wakeup" => {
                            interrupt = match v {
                                "poll" => false,
                                "interrupt" => true,
                                _ => return Err(format!("wakeup={v}: must be poll or interrupt")),
                            }
                        }
                        // turnout-gen's spelling of `bind`
                        "mode" => rest.push((
                            "bind",
                            match v {
                                "copy" => "copy",
                                "zc" => "zero_copy",
                                _ => return Err(format!("mode={v}: must be copy or zc")),
                            },
                        )),
                        _ => rest.push((k, v)),
                    }
                }
                let queue = queue.unwrap_or(0);
                // Queue q of the port is the interface's queue q: open q + 1
                // queue pairs (unless told) and use the last one; copy mode
                // unless told (it works on every driver, veth included).
                let queues = (u32::from(queue) + 1).to_string();
                if !rest.iter().any(|(k, _)| *k == "queues") {
                    rest.push(("queues", queues.as_str()));
                }
                if !rest.iter().any(|(k, _)| *k == "bind") {
                    rest.push(("bind", "copy"));
                }
                let frames = AFXDP_FRAMES_PER_QUEUE.to_string();
                if !rest.iter().any(|(k, _)| *k == "frames_per_queue") {
                    rest.push(("frames_per_queue", frames.as_str()));
                }
                let pairs = fields("iface", target, &rest, &[]);
                let config = port_config(&pairs, AfXdpConfig::validate)?;
                if queue >= config.queues {
                    return Err(format!("queue={queue}: not below queues={}", config.queues));
                }
                Ok(PortSpec::AfXdp {
                    config,
                    queue,
                    interrupt,
                })
            }
            PortKind::AfPacket => {
                let mut queue = 0u16;
                let mut rest = Vec::new();
                for (k, v) in kv {
                    match k {
                        "queue" => queue = num(k, v)?,
                        _ => rest.push((k, v)),
                    }
                }
                let pairs = fields("iface", target, &rest, &[]);
                let config = port_config(&pairs, AfPacketConfig::validate)?;
                Ok(PortSpec::AfPacket { config, queue })
            }
            // parse_among took only KINDS
            other => Err(format!("'{s}': turnout-gen does not open {other} ports")),
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
            } | PortSpec::Vhost {
                interrupt: true,
                ..
            } | PortSpec::AfXdp {
                interrupt: true,
                ..
            }
        )
    }

    /// This spec for a sender whose largest frame is `largest` bytes: a
    /// vhost-user port without `tx-frame` gets its transmit buffers sized
    /// for that frame (dense buffers: docs/vhost-user.md) when it fits in
    /// `max-frame`; any other spec is returned as it is.
    pub fn sized_for(&self, largest: u32) -> PortSpec {
        let mut s = self.clone();
        if let PortSpec::Vhost {
            max_frame,
            tx_frame: t @ None,
            ..
        } = &mut s
        {
            if (14..=*max_frame).contains(&largest) {
                *t = Some(largest);
            }
        }
        s
    }

    /// The port queues turnout-gen uses on this port: every queue pair of
    /// a vhost-user port (`queues=N`), else the one [`PortSpec::queue`].
    pub fn queue_ids(&self) -> std::ops::Range<u16> {
        match self {
            PortSpec::Vhost { queues, .. } => 0..(*queues).max(1),
            _ => self.queue()..self.queue() + 1,
        }
    }

    /// The (first) port queue turnout-gen uses on this port.
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
                config: c,
                mode,
                server,
            } => {
                let d = MemifSpec::new(&c.socket);
                write!(f, "memif:{}", c.socket.display())?;
                if c.id != 0 {
                    write!(f, ",id={}", c.id)?;
                }
                if c.secret.is_some() {
                    write!(f, ",secret=***")?;
                }
                if c.queues != d.queues {
                    write!(f, ",rings={}", c.queues)?;
                }
                if c.ring_size != MEMIF_RING_SIZE {
                    write!(f, ",ring-size={}", c.ring_size)?;
                }
                if c.buffer_size != d.buffer_size {
                    write!(f, ",buf-size={}", c.buffer_size)?;
                }
                if let Some(m) = c.max_frame_b {
                    write!(f, ",max_frame_b={m}")?;
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
                tx_frame,
                interrupt,
            } => {
                write!(f, "vhost_user:{}", socket.display())?;
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
                if let Some(t) = tx_frame {
                    write!(f, ",tx-frame={t}")?;
                }
                if *interrupt {
                    write!(f, ",mode=interrupt")?;
                }
                Ok(())
            }
            PortSpec::AfXdp {
                config,
                queue,
                interrupt,
            } => {
                write!(f, "af_xdp:{}", config.ifname)?;
                if *queue != 0 {
                    write!(f, ",queue={queue}")?;
                }
                match config.bind {
                    XdpBind::Copy => {}
                    XdpBind::ZeroCopy => write!(f, ",mode=zc")?,
                    XdpBind::Auto => write!(f, ",bind=auto")?,
                }
                if *interrupt {
                    write!(f, ",wakeup=interrupt")?;
                }
                Ok(())
            }
            PortSpec::AfPacket { config, queue } => {
                write!(f, "af_packet:{}", config.ifname)?;
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
                config: MemifSpec {
                    ring_size: MEMIF_RING_SIZE,
                    ..MemifSpec::new("/run/t.sock")
                },
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
        // The struct's own key names work too, and mean the same.
        let m2: PortSpec =
            "memif:/s,id=3,secret=abc,queues=2,ring_size=4096,buffer_size=9216,mode=interrupt"
                .parse()
                .unwrap();
        assert_eq!(m2, m);
        let PortSpec::Memif { config, .. } = &m else {
            panic!("{m:?}")
        };
        assert_eq!(
            (config.queues, config.ring_size, config.buffer_size),
            (2, 4096, 9216)
        );
        let x: PortSpec = "afxdp:veth0,queue=1,mode=zc".parse().unwrap();
        assert_eq!(
            x,
            PortSpec::AfXdp {
                config: AfXdpConfig {
                    queues: 2,
                    bind: XdpBind::ZeroCopy,
                    frames_per_queue: AFXDP_FRAMES_PER_QUEUE,
                    ..AfXdpConfig::new("veth0")
                },
                queue: 1,
                interrupt: false,
            }
        );
        assert_eq!(x.to_string(), "af_xdp:veth0,queue=1,mode=zc");
        let x: PortSpec = "af_xdp:veth0,wakeup=interrupt".parse().unwrap();
        assert!(x.interrupt());
        assert_eq!(x.to_string(), "af_xdp:veth0,wakeup=interrupt");
        assert!("af_xdp:veth0,wakeup=nap".parse::<PortSpec>().is_err());
        let x: PortSpec = "afxdp:veth0".parse().unwrap();
        assert_eq!(
            x,
            PortSpec::AfXdp {
                config: AfXdpConfig {
                    bind: XdpBind::Copy,
                    frames_per_queue: AFXDP_FRAMES_PER_QUEUE,
                    ..AfXdpConfig::new("veth0")
                },
                queue: 0,
                interrupt: false,
            }
        );
        let p: PortSpec = "afpacket:eth0".parse().unwrap();
        assert_eq!(
            p,
            PortSpec::AfPacket {
                config: AfPacketConfig::new("eth0"),
                queue: 0
            }
        );
        assert_eq!(p.to_string(), "af_packet:eth0");
        let v: PortSpec = "vhost-user:/run/vu.sock".parse().unwrap();
        assert_eq!(
            v,
            PortSpec::Vhost {
                socket: "/run/vu.sock".into(),
                server: false,
                queues: 1,
                queue_size: VHOST_QUEUE_SIZE,
                max_frame: 9000,
                tx_frame: None,
                interrupt: false,
            }
        );
        assert!(!v.interrupt());
        let v: PortSpec = "vhost:/s,server,queues=2,queue-size=256,max-frame=1518,mode=interrupt"
            .parse()
            .unwrap();
        assert!(v.interrupt());
        assert_eq!(
            v.to_string(),
            "vhost_user:/s,server,queues=2,queue-size=256,max-frame=1518,mode=interrupt"
        );
        assert!("vhost-user:/s,mode=sleepy".parse::<PortSpec>().is_err());
        assert_eq!(v.to_string().parse::<PortSpec>().unwrap(), v);
        // tx-frame: kept, printed, bounded by max-frame
        let v: PortSpec = "vhost-user:/s,max-frame=1518,tx-frame=64".parse().unwrap();
        assert_eq!(v.to_string(), "vhost_user:/s,max-frame=1518,tx-frame=64");
        assert_eq!(v.to_string().parse::<PortSpec>().unwrap(), v);
        let e = "vhost-user:/s,max-frame=1518,tx-frame=2000"
            .parse::<PortSpec>()
            .unwrap_err();
        assert!(e.contains("larger than max-frame"), "{e}");
        // sized_for: the traffic's largest frame, unless the spec says
        let v: PortSpec = "vhost-user:/s".parse().unwrap();
        assert_eq!(v.sized_for(60).to_string(), "vhost_user:/s,tx-frame=60");
        let v: PortSpec = "vhost-user:/s,tx-frame=1514".parse().unwrap();
        assert_eq!(v.sized_for(60), v);
        // a frame larger than max-frame: left for the sender to refuse
        let v: PortSpec = "vhost-user:/s,max-frame=1518".parse().unwrap();
        assert_eq!(v.sized_for(9000), v);
        let m: PortSpec = "memif:/s".parse().unwrap();
        assert_eq!(m.sized_for(60), m);
    }

    #[test]
    fn turnoutds_spelling_of_a_kind_and_the_older_ones_mean_the_same() {
        for (canonical, aliases) in [
            (
                "af_xdp:veth0,queue=1,mode=zc",
                &["afxdp:veth0,queue=1,mode=zc"][..],
            ),
            ("af_packet:eth0", &["afpacket:eth0"]),
            (
                "vhost_user:/s,queues=2",
                &["vhost-user:/s,queues=2", "vhost:/s,queues=2"],
            ),
        ] {
            let c: PortSpec = canonical.parse().unwrap();
            // printed as turnoutd spells it, and read back the same
            assert!(c
                .to_string()
                .starts_with(canonical.split(':').next().unwrap()));
            assert_eq!(c.to_string().parse::<PortSpec>().unwrap(), c);
            for a in aliases {
                assert_eq!(a.parse::<PortSpec>().unwrap(), c, "{a}");
            }
        }
        assert_eq!(
            "afpacket:eth0,fanout=lb".parse::<PortSpec>().unwrap(),
            "af_packet:eth0,fanout=lb".parse::<PortSpec>().unwrap()
        );
        // every spelling of every kind turnout-gen opens (ports::PortKind's
        // list), printed back as turnoutd spells it
        for k in KINDS {
            let target = match k {
                PortKind::Memif | PortKind::VhostUser => "/s",
                _ => "v0",
            };
            let want: PortSpec = format!("{k}:{target}").parse().unwrap();
            assert!(want.to_string().starts_with(&format!("{k}:")), "{want}");
            for a in k.aliases() {
                let got: PortSpec = format!("{a}:{target}").parse().unwrap();
                assert_eq!(got, want, "{a}");
            }
        }
        let e = "af_xdp:v0,mode=native".parse::<PortSpec>().unwrap_err();
        assert!(e.contains("copy or zc"), "{e}");
    }

    #[test]
    fn rejects_bad_specs_with_a_reason() {
        for (bad, why) in [
            (
                "veth0",
                "expected memif:SOCKET, vhost_user:SOCKET, af_xdp:IFACE",
            ),
            (
                "tap:t0",
                "'tap:t0': port kind tap is not accepted here (expected one of memif, \
                 vhost_user (or vhost-user, vhost), af_xdp (or afxdp), af_packet (or afpacket))",
            ),
            ("memif:", "missing"),
            (
                "af-xdp:v0",
                "'af-xdp:v0': unknown port kind \"af-xdp\" (expected one of memif, \
                 vhost_user (or vhost-user, vhost), af_xdp (or afxdp), af_packet (or afpacket))",
            ),
            ("tapp:x", "unknown port kind \"tapp\""),
            ("memif:/s,ring-size=1000", "power of two"),
            ("memif:/s,ring-size=32768", "power of two"),
            ("memif:/s,rings=0", "queues: 0 not in 1..=256"),
            ("memif:/s,rings=257", "queues: 257 not in 1..=256"),
            ("memif:/s,buf-size=63", "buffer_size: 63 not in 64..=65535"),
            (
                "memif:/s,max_frame_b=9000,ring-size=2",
                "more than the ring's 2",
            ),
            ("memif:/s,mode=fast", "poll or interrupt"),
            ("memif:/s,id=x", "not a valid number"),
            ("memif:/s,secret=012345678901234567890123", "at most 23"),
            ("memif:/s,queue=1", "unknown field `queue`"),
            ("memif:/s,ring-size", "key=value"),
            ("afxdp:averyveryverylongname", "valid interface"),
            ("afxdp:v0,mode=native", "copy or zc"),
            ("afpacket:v0,mode=zc", "unknown field `mode`"),
            ("afpacket:v0,fanout=rr", "unknown variant `rr`"),
            ("afxdp:v0,queue=2,queues=2", "queue=2: not below queues=2"),
            ("afxdp:v0,queues=65", "queues: 65 not in 1..=64"),
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
