//! The command line (docs/turnout-gen.md). Each role is a subcommand that
//! accepts only the options that apply to it, so a misplaced option is an
//! error (exit 2), not silently ignored.

use std::net::IpAddr;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};

use wire::MacAddr;

use crate::spec::PortSpec;

/// turnout-gen: traffic generator, receiver, reflector and chain VNF.
#[derive(Parser, Debug)]
#[command(name = "turnout-gen", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub role: Role,
}

/// How a port is named on the command line, shown under every role's
/// `--help` (docs/turnout-gen.md, "PORT SPEC", has every key).
pub const PORT_SPEC_HELP: &str = "\
PORT SPEC (--port, --rx-port, --port2): KIND:TARGET[,KEY=VALUE...], KIND as in turnoutd's [[ports]]
  memif:SOCKET[,id=N][,secret=S][,rings=N][,ring-size=N][,buf-size=N][,mode=poll|interrupt][,role=server]
      memif client of the server at SOCKET (turnoutd's memif port, testpmd net_memif);
      defaults id=0 rings=1 ring-size=1024 buf-size=2048 mode=poll; role=server serves SOCKET
  vhost_user:SOCKET[,server][,queues=N][,queue-size=N][,max-frame=N][,tx-frame=N][,mode=poll|interrupt]
      vhost-user frontend (the VM side) of the backend at SOCKET (turnoutd's vhost_user port)
  af_xdp:IFACE[,queue=Q][,mode=copy|zc][,KEY=VALUE...]
      AF_XDP socket on queue Q of a kernel interface; any key of turnoutd's af_xdp ports
  af_packet:IFACE[,KEY=VALUE...]
      AF_PACKET socket on a kernel interface; any key of turnoutd's af_packet ports
  The older spellings afxdp, afpacket, vhost-user and vhost are accepted too.

Example, through the two memif ports of docs/examples/turnoutd.toml:
  turnout-gen txrx --port memif:/run/turnout/memif.sock,id=0 \\
      --rx-port memif:/run/turnout/memif.sock,id=1 --rate-pps 1000000 --duration-s 5

On a terminal it prints a short summary; the JSON document goes to stdout when stdout
is not a terminal, or to --json FILE. Every key and field: docs/turnout-gen.md.";

/// The roles.
#[derive(Subcommand, Debug)]
pub enum Role {
    /// Send frames on --port.
    #[command(after_help = PORT_SPEC_HELP)]
    Tx(TxArgs),
    /// Receive on --port, count and time them.
    #[command(after_help = PORT_SPEC_HELP)]
    Rx(RxArgs),
    /// Send on --port and receive on --rx-port (default --port) in one thread.
    #[command(after_help = PORT_SPEC_HELP)]
    Txrx(TxrxArgs),
    /// Receive on --port, swap source/destination MAC, send back on it.
    #[command(after_help = PORT_SPEC_HELP)]
    Reflect(ReflectArgs),
    /// Chain VNF: receive on --port, rewrite the destination MAC, send on --port2.
    #[command(after_help = PORT_SPEC_HELP)]
    Fwd(FwdArgs),
}

impl Role {
    /// The role's name as printed in the document.
    pub fn name(&self) -> &'static str {
        match self {
            Role::Tx(_) => "tx",
            Role::Rx(_) => "rx",
            Role::Txrx(_) => "txrx",
            Role::Reflect(_) => "reflect",
            Role::Fwd(_) => "fwd",
        }
    }

    /// The general options of any role.
    pub fn general(&self) -> &General {
        match self {
            Role::Tx(a) => &a.general,
            Role::Rx(a) => &a.general,
            Role::Txrx(a) => &a.general,
            Role::Reflect(a) => &a.general,
            Role::Fwd(a) => &a.general,
        }
    }
}

/// `tx` options.
#[derive(Args, Debug)]
pub struct TxArgs {
    /// Port to send on (PORT SPEC below).
    #[arg(long, value_name = "SPEC")]
    pub port: PortSpec,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub traffic: Traffic,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub general: General,
}

/// `rx` options.
#[derive(Args, Debug)]
pub struct RxArgs {
    /// Port to receive on (PORT SPEC below).
    #[arg(long, value_name = "SPEC")]
    pub port: PortSpec,
    /// Read every payload byte (checksum), to model a real VNF.
    #[arg(long)]
    pub touch: bool,
    /// Stop after S seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "S", value_parser = pos_f64)]
    pub duration_s: Option<f64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub general: General,
}

/// `txrx` options.
#[derive(Args, Debug)]
pub struct TxrxArgs {
    /// Port to send on (PORT SPEC below).
    #[arg(long, value_name = "SPEC")]
    pub port: PortSpec,
    /// Port to receive on (default: --port, for a peer that sends the
    /// frames back, as a reflector does; a switch never sends a frame back
    /// to the port it came from).
    #[arg(long, value_name = "SPEC")]
    pub rx_port: Option<PortSpec>,
    /// Exit 0 even when none of the frames sent came back (without it,
    /// receiving nothing is exit code 4): for a test whose switch is meant
    /// to drop everything.
    #[arg(long)]
    pub allow_no_rx: bool,
    /// Also send the reverse direction at the same rate: stream --stream + 1
    /// from --rx-port to --port, with MACs and IPs swapped (or --src-mac2,
    /// --dst-mac2); both received and reported per stream.
    #[arg(long, requires = "rx_port")]
    pub bidir: bool,
    /// Source MAC of the reverse direction (default: --dst-mac).
    #[arg(long, value_name = "MAC", value_parser = parse_mac, requires = "bidir")]
    pub src_mac2: Option<MacAddr>,
    /// Destination MAC of the reverse direction (default: --src-mac).
    #[arg(long, value_name = "MAC", value_parser = parse_mac, requires = "bidir")]
    pub dst_mac2: Option<MacAddr>,
    /// Read every payload byte (checksum), to model a real VNF.
    #[arg(long)]
    pub touch: bool,
    /// Another pair of ports this thread drives besides --port/--rx-port
    /// (repeatable): `port=SPEC;stream=N[;rx-port=SPEC][;src-mac=MAC]
    /// [;dst-mac=MAC][;src-ip=A][;dst-ip=A][;src-mac2=MAC][;dst-mac2=MAC]`.
    /// Its stream sends at --rate-pps with the other traffic options;
    /// unnamed addresses are those of the main stream; with --bidir its
    /// reverse is stream N + 1 (src-mac2/dst-mac2 as --src-mac2/--dst-mac2).
    /// One tester process per core for many pairs: no time slices between them.
    #[arg(long, value_name = "PAIR", value_parser = parse_pair)]
    pub pair: Vec<PairSpec>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub traffic: Traffic,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub general: General,
}

/// A `txrx --pair`: another pair of ports, its stream and addresses (the
/// main stream's where not named).
#[derive(Clone, Debug, PartialEq)]
pub struct PairSpec {
    /// Port to send on.
    pub port: PortSpec,
    /// Port to receive on (default: `port`).
    pub rx_port: Option<PortSpec>,
    /// Stream id of the frames sent on `port`.
    pub stream: u32,
    /// Source MAC (default: --src-mac).
    pub src_mac: Option<MacAddr>,
    /// Destination MAC (default: --dst-mac).
    pub dst_mac: Option<MacAddr>,
    /// Source IP (default: --src-ip).
    pub src_ip: Option<IpAddr>,
    /// Destination IP (default: --dst-ip).
    pub dst_ip: Option<IpAddr>,
    /// Source MAC of the reverse direction (--bidir; default: its dst-mac).
    pub src_mac2: Option<MacAddr>,
    /// Destination MAC of the reverse direction (--bidir; default: its src-mac).
    pub dst_mac2: Option<MacAddr>,
}

/// `port=SPEC;stream=N;...` (see `TxrxArgs::pair`).
pub fn parse_pair(s: &str) -> Result<PairSpec, String> {
    let (mut port, mut stream) = (None, None);
    let (mut rx_port, mut src_mac, mut dst_mac, mut src_ip, mut dst_ip) =
        (None, None, None, None, None);
    let (mut src_mac2, mut dst_mac2) = (None, None);
    for item in s.split(';').map(str::trim).filter(|i| !i.is_empty()) {
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' in --pair is not KEY=VALUE"))?;
        let ip = |v: &str| {
            v.parse::<IpAddr>()
                .map_err(|_| format!("'{v}' in --pair is not an IP address"))
        };
        match k.trim() {
            "port" => port = Some(v.parse::<PortSpec>()?),
            "rx-port" => rx_port = Some(v.parse::<PortSpec>()?),
            "stream" => {
                let n: u32 = v
                    .parse()
                    .map_err(|_| format!("stream '{v}' in --pair is not a number"))?;
                if n > 0x7FFF {
                    return Err(format!("stream {n} in --pair: at most 32767"));
                }
                stream = Some(n);
            }
            "src-mac" => src_mac = Some(parse_mac(v)?),
            "dst-mac" => dst_mac = Some(parse_mac(v)?),
            "src-mac2" => src_mac2 = Some(parse_mac(v)?),
            "dst-mac2" => dst_mac2 = Some(parse_mac(v)?),
            "src-ip" => src_ip = Some(ip(v)?),
            "dst-ip" => dst_ip = Some(ip(v)?),
            other => {
                return Err(format!(
                    "unknown key '{other}' in --pair (port, rx-port, stream, src-mac, \
                     dst-mac, src-ip, dst-ip, src-mac2, dst-mac2)"
                ))
            }
        }
    }
    Ok(PairSpec {
        port: port.ok_or("--pair needs port=SPEC")?,
        rx_port,
        stream: stream.ok_or("--pair needs stream=N (unique in the run)")?,
        src_mac,
        dst_mac,
        src_ip,
        dst_ip,
        src_mac2,
        dst_mac2,
    })
}

/// `reflect` options.
#[derive(Args, Debug)]
pub struct ReflectArgs {
    /// Port to receive on and send back on (PORT SPEC below).
    #[arg(long, value_name = "SPEC")]
    pub port: PortSpec,
    /// Stop after S seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "S", value_parser = pos_f64)]
    pub duration_s: Option<f64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub general: General,
}

/// `fwd` options.
#[derive(Args, Debug)]
pub struct FwdArgs {
    /// Port A (frames received here go to port B; PORT SPEC below).
    #[arg(long, value_name = "SPEC")]
    pub port: PortSpec,
    /// Port B.
    #[arg(long, value_name = "SPEC")]
    pub port2: PortSpec,
    /// Destination MAC written into frames going A → B (default: unchanged).
    #[arg(long, value_name = "MAC", value_parser = parse_mac)]
    pub dst_mac: Option<MacAddr>,
    /// Also forward B → A.
    #[arg(long)]
    pub bidir: bool,
    /// Destination MAC written into frames going B → A (default: unchanged).
    #[arg(long, value_name = "MAC", value_parser = parse_mac, requires = "bidir")]
    pub dst_mac2: Option<MacAddr>,
    /// Touch every payload byte of forwarded frames (checksum).
    #[arg(long)]
    pub touch: bool,
    /// Stop after S seconds (default: until SIGINT/SIGTERM).
    #[arg(long, value_name = "S", value_parser = pos_f64)]
    pub duration_s: Option<f64>,
    #[command(flatten)]
    #[allow(missing_docs)]
    pub general: General,
}

/// Header fields a flow index is added to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum VaryField {
    /// UDP source port.
    SrcPort,
    /// UDP destination port.
    DstPort,
    /// IP source address.
    SrcIp,
    /// IP destination address.
    DstIp,
    /// Ethernet source address.
    SrcMac,
    /// Ethernet destination address.
    DstMac,
}

/// Traffic options (tx, txrx).
#[derive(Args, Debug, Clone)]
#[command(group(ArgGroup::new("sizing").args(["size", "imix", "sizes"]).multiple(false)))]
pub struct Traffic {
    /// Frame size in bytes without FCS, 64..9000 [default: 64].
    #[arg(long, value_name = "B", value_parser = clap::value_parser!(u32).range(64..=9000))]
    pub size: Option<u32>,
    /// 7:4:1 mix of 64/570/1518 B.
    #[arg(long)]
    pub imix: bool,
    /// Custom mix, e.g. 64,64,570,1518 (sent in this order, repeatedly).
    #[arg(long, value_name = "LIST", value_delimiter = ',',
          value_parser = clap::value_parser!(u32).range(64..=9000))]
    pub sizes: Vec<u32>,
    /// Number of flows; frame i belongs to flow i mod N.
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=16_777_216))]
    pub flows: u32,
    /// Fields the flow index is added to [src-port, dst-port, src-ip, dst-ip, src-mac, dst-mac].
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "src-port"
    )]
    pub vary: Vec<VaryField>,
    /// Source MAC.
    #[arg(long, value_name = "MAC", value_parser = parse_mac, default_value = "02:00:00:00:00:01")]
    pub src_mac: MacAddr,
    /// Destination MAC.
    #[arg(long, value_name = "MAC", value_parser = parse_mac, default_value = "02:00:00:00:00:02")]
    pub dst_mac: MacAddr,
    /// Source IP [default: 10.0.0.1, or fd00::1 with --ipv6].
    #[arg(long, value_name = "A")]
    pub src_ip: Option<IpAddr>,
    /// Destination IP [default: 10.0.0.2, or fd00::2 with --ipv6].
    #[arg(long, value_name = "A")]
    pub dst_ip: Option<IpAddr>,
    /// UDP source port.
    #[arg(long, value_name = "P", default_value_t = 1024)]
    pub src_port: u16,
    /// UDP destination port.
    #[arg(long, value_name = "P", default_value_t = 1024)]
    pub dst_port: u16,
    /// IPv6/UDP instead of IPv4/UDP.
    #[arg(long)]
    pub ipv6: bool,
    /// Add an 802.1Q tag with this VLAN id (0..4095).
    #[arg(long, value_name = "ID", value_parser = clap::value_parser!(u16).range(0..=4095))]
    pub vlan: Option<u16>,
    /// Stream id carried in every frame.
    #[arg(long, value_name = "ID", default_value_t = 0,
          value_parser = clap::value_parser!(u32).range(0..=crate::frame::MAX_STREAM as i64))]
    pub stream: u32,
    /// Offered load in frames per second; 0 = as fast as possible.
    #[arg(long, value_name = "R", default_value_t = 0.0, value_parser = nonneg_f64)]
    pub rate_pps: f64,
    /// Frames per burst (1..1024).
    #[arg(long, value_name = "N", default_value_t = 32,
          value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub burst: u32,
    /// Paced: send every --burst frames back to back, when the last of them
    /// is due (bursts at --rate-pps / --burst per second), instead of
    /// evenly spaced frames (client/server round trips over burst sizes, as
    /// in "A Framework for Comparative Evaluation of High-Performance
    /// Virtualized Networking Mechanisms", §4.5).
    #[arg(long)]
    pub bunch: bool,
    /// How long to send, in seconds (after the warm-up).
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = pos_f64)]
    pub duration_s: f64,
    /// Stop after N measured frames instead of a duration.
    #[arg(long, value_name = "N", conflicts_with = "duration_s",
          value_parser = clap::value_parser!(u64).range(1..))]
    pub count: Option<u64>,
    /// Seconds sent first and excluded from the statistics.
    #[arg(long, value_name = "S", default_value_t = 0.0, value_parser = nonneg_f64)]
    pub warmup_s: f64,
    /// Seconds to wait for stragglers after sending stops, also when a
    /// signal stopped it (a second signal ends the wait); txrx ends it as
    /// soon as every frame sent has come back.
    #[arg(long, value_name = "S", default_value_t = 0.2, value_parser = nonneg_f64)]
    pub cooldown_s: f64,
}

impl Traffic {
    /// The size pattern the sender cycles through.
    pub fn size_pattern(&self) -> Vec<u32> {
        if self.imix {
            crate::frame::IMIX.to_vec()
        } else if !self.sizes.is_empty() {
            self.sizes.clone()
        } else {
            vec![self.size.unwrap_or(64)]
        }
    }
}

/// Options of every role.
#[derive(Args, Debug, Clone)]
pub struct General {
    /// Pin the (single) thread to CPU N.
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Also print one JSON line per interval of S seconds on stderr.
    #[arg(long, visible_alias = "interval", value_name = "S", value_parser = pos_f64)]
    pub interval_s: Option<f64>,
    /// How long to wait for the port's peer to come up (exit 3 if it does not).
    #[arg(long, value_name = "S", default_value_t = 10.0, value_parser = nonneg_f64)]
    pub wait_peer_s: f64,
    /// A sender whose port accepts no frame for S seconds ends the run
    /// (`stopped_by: "stalled"`, exit 1). Raise it when a backend restarts
    /// mid-run and may take long to come back (OVS-DPDK on a loaded host).
    #[arg(long, value_name = "S", default_value_t = 5.0, value_parser = pos_f64)]
    pub stall_s: f64,
    /// Write the final JSON document to FILE ('-' = stdout). Without it
    /// the document goes to stdout when stdout is not a terminal, and a
    /// terminal gets a short summary instead.
    #[arg(long, value_name = "FILE")]
    pub json: Option<String>,
}

fn parse_f64(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() {
        return Err(format!("'{s}' is not a finite number"));
    }
    Ok(v)
}

/// A finite number ≥ 0.
pub fn nonneg_f64(s: &str) -> Result<f64, String> {
    let v = parse_f64(s)?;
    if v < 0.0 {
        return Err(format!("{s} is negative"));
    }
    Ok(v)
}

/// A finite number > 0.
pub fn pos_f64(s: &str) -> Result<f64, String> {
    let v = parse_f64(s)?;
    if v <= 0.0 {
        return Err(format!("{s} must be greater than 0"));
    }
    Ok(v)
}

/// `aa:bb:cc:dd:ee:ff` (or with '-').
pub fn parse_mac(s: &str) -> Result<MacAddr, String> {
    s.parse()
        .map_err(|_| format!("'{s}' is not a MAC address (expected aa:bb:cc:dd:ee:ff)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("turnout-gen").chain(args.iter().copied()))
    }

    #[test]
    fn defaults_of_tx() {
        let c = parse(&["tx", "--port", "memif:/tmp/s"]).unwrap();
        let Role::Tx(a) = c.role else { panic!() };
        assert_eq!(a.traffic.size_pattern(), vec![64]);
        assert_eq!(
            (a.traffic.burst, a.traffic.flows, a.traffic.duration_s),
            (32, 1, 10.0)
        );
        assert_eq!(a.traffic.vary, vec![VaryField::SrcPort]);
        assert_eq!(a.general.json, None);
        assert_eq!(a.traffic.cooldown_s, 0.2);
    }

    #[test]
    fn mixes() {
        let c = parse(&["tx", "--port", "memif:/s", "--imix"]).unwrap();
        let Role::Tx(a) = c.role else { panic!() };
        assert_eq!(a.traffic.size_pattern().len(), 12);
        let c = parse(&["txrx", "--port", "memif:/s", "--sizes", "64,1518,9000"]).unwrap();
        let Role::Txrx(a) = c.role else { panic!() };
        assert_eq!(a.traffic.size_pattern(), vec![64, 1518, 9000]);
    }

    #[test]
    fn bad_options_are_rejected() {
        for args in [
            &["tx"][..],
            &["tx", "--port", "memif:/s", "--size", "63"],
            &["tx", "--port", "memif:/s", "--size", "9001"],
            &["tx", "--port", "memif:/s", "--size", "64", "--imix"],
            &["tx", "--port", "memif:/s", "--sizes", "64,10"],
            &["tx", "--port", "memif:/s", "--rate-pps", "-1"],
            &["tx", "--port", "memif:/s", "--rate-pps", "inf"],
            &["tx", "--port", "memif:/s", "--burst", "0"],
            &["tx", "--port", "memif:/s", "--flows", "0"],
            &["tx", "--port", "memif:/s", "--vlan", "4096"],
            &["tx", "--port", "memif:/s", "--dst-mac", "02:00:00:00:00"],
            &[
                "tx",
                "--port",
                "memif:/s",
                "--count",
                "5",
                "--duration-s",
                "1",
            ],
            &["tx", "--port", "memif:/s", "--duration-s", "0"],
            &["tx", "--port", "memif:/s", "--touch"],
            &["tx", "--port", "nic0"],
            &["rx", "--port", "memif:/s", "--rate-pps", "5"],
            &["fwd", "--port", "memif:/a"],
            &[
                "fwd",
                "--port",
                "memif:/a",
                "--port2",
                "memif:/b",
                "--dst-mac2",
                "02:00:00:00:00:01",
            ],
            &["bounce", "--port", "memif:/s"],
        ] {
            let e = parse(args).expect_err(&format!("{args:?} should fail"));
            assert_eq!(e.exit_code(), 2, "{args:?}");
        }
    }

    #[test]
    fn macs() {
        assert_eq!(
            parse_mac("02:00:0a:FF:00:01").unwrap(),
            MacAddr([2, 0, 10, 255, 0, 1])
        );
        assert_eq!(
            parse_mac("02-00-0a-ff-00-01").unwrap(),
            MacAddr([2, 0, 10, 255, 0, 1])
        );
        assert!(parse_mac("02:00:0a:ff:00").is_err());
        assert!(parse_mac("02:00:0a:ff:00:0g").is_err());
    }
}
