//! AF_PACKET port: any kernel interface, through mmapped packet rings.
//!
//! Per queue: one receive socket with a TPACKET_V3 ring (blocks of frames
//! the kernel fills and hands over whole; a block goes back to the kernel on
//! `release()` once every frame in it was read) or, where a block's
//! timeout would hold frames longer than the switch's latency budget, a
//! TPACKET_V2 ring (each frame handed over as the kernel writes it; see
//! [`RxHandover`]), joined to a
//! `PACKET_FANOUT` group when there are several queues, and one transmit
//! socket with a TPACKET_V2 ring (the fabric copies frames into ring slots
//! and `publish()` marks them and makes one `sendto()`).
//!
//! The receive socket sets `PACKET_IGNORE_OUTGOING`, so the port never sees
//! what it (or anyone else) transmits on the interface. Frames are passed up
//! as the kernel delivered them; a VLAN tag the kernel stripped into the
//! ring's metadata is put back in front of the payload.
//!
//! Threading: each `RxRing` belongs to one worker; `TxRing` follows the
//! fabric's lock protocol. Link state comes from a [`LinkWatch`] thread.

#[allow(unsafe_code)]
mod sys;

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};

use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};

use serde::{Deserialize, Serialize};

use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::netdev::{self, KernelPortError, KernelQueues, LinkWatch};
use crate::open::Opener;

pub use sys::{RxStats, TxStats};

const BACKEND: &str = "af_packet";

/// Most queue pairs per port (one fanout socket and one transmit socket
/// each).
pub const MAX_QUEUES: u16 = 64;

/// How frames are spread over the receive queues (`PACKET_FANOUT` mode;
/// the `fanout` key: `hash`, `lb`, `cpu`, `queue`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fanout {
    /// By flow hash: a flow stays on one queue (default).
    #[serde(rename = "hash")]
    Hash,
    /// Round robin.
    #[serde(rename = "lb")]
    LoadBalance,
    /// By the CPU the frame arrived on.
    #[serde(rename = "cpu")]
    Cpu,
    /// By the interface's receive queue.
    #[serde(rename = "queue")]
    QueueMapping,
}

impl Fanout {
    fn mode(self) -> u32 {
        match self {
            Fanout::Hash => 0,
            Fanout::LoadBalance => 1,
            Fanout::Cpu => 2,
            Fanout::QueueMapping => 7,
        }
    }
}

/// How the kernel hands received frames to the port (the `rx_ring` key).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RxHandover {
    /// `frames` where the switch lets a frame wait less than a block's
    /// timeout (`rx_block_timeout_ms`): a latency budget shorter than it
    /// (turnoutd's default 100 µs), or zero (`wakeup = "poll"`,
    /// `latency_budget_us = 0`, turnout-gen); `blocks` where the budget is
    /// at least the timeout (the power-saving `latency_budget_us = 1000`
    /// with the default 1 ms) and where no budget applies
    /// ([`AfPacketPort::open`] called directly).
    #[default]
    Auto,
    /// TPACKET_V2: one slot per frame, each handed over as soon as the
    /// kernel has written it.
    Frames,
    /// TPACKET_V3: blocks of frames, each handed over when full or
    /// `rx_block_timeout_ms` after its first frame, so a frame under light
    /// load waits up to that long; fewer hand-overs and denser packing
    /// (more small frames per byte of ring) at high rates.
    Blocks,
}

/// Configuration of an AF_PACKET port: the `[[ports]]` table of kind
/// `af_packet` (docs/turnoutd.md) and turnout-gen's `afpacket:` spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfPacketConfig {
    /// Kernel interface to attach to (`iface`).
    #[serde(rename = "iface")]
    pub ifname: String,
    /// Queue pairs (receive sockets in one fanout group, transmit sockets),
    /// 1..=[`MAX_QUEUES`].
    #[serde(default = "one")]
    pub queues: u16,
    /// How received frames are handed over: `auto` (default), `frames`
    /// (TPACKET_V2) or `blocks` (TPACKET_V3); see [`RxHandover`].
    #[serde(default)]
    pub rx_ring: RxHandover,
    /// Receive ring slots per queue with `frames` (a power of two ≥ 8);
    /// absent: as many as make [`DEFAULT_RX_RING_B`] (at least 256).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_frames: Option<u32>,
    /// Receive ring block size in bytes (a power of two, ≥ 4096, and large
    /// enough for one frame of the interface's MTU); absent:
    /// [`DEFAULT_RX_BLOCK_B`], or the smallest power of two that holds an
    /// MTU-sized frame when that is larger.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_block_size_b: Option<u32>,
    /// Receive ring blocks per queue (≥ 2); absent: as many as make
    /// [`DEFAULT_RX_RING_B`] (at least 8). Under light load the kernel
    /// hands over a block per `rx_block_timeout_ms`, so the ring holds
    /// that many milliseconds of traffic for a reader that was not
    /// scheduled: many small blocks hold longer than a few large ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rx_blocks: Option<u32>,
    /// Milliseconds after which the kernel hands over a partly filled block
    /// (0: the kernel chooses).
    #[serde(default = "default_block_timeout")]
    pub rx_block_timeout_ms: u32,
    /// Transmit ring frames per queue (a power of two ≥ 8).
    #[serde(default = "default_tx_frames")]
    pub tx_frames: u32,
    /// Transmit frame size in bytes (a power of two ≥ 2048); absent: sized
    /// for the interface's MTU at open time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tx_frame_size_b: Option<u32>,
    /// Send with `PACKET_QDISC_BYPASS` (straight to the driver).
    #[serde(default = "yes")]
    pub qdisc_bypass: bool,
    /// Spreading of received frames over queues.
    #[serde(default = "default_fanout")]
    pub fanout: Fanout,
}

fn one() -> u16 {
    1
}
fn yes() -> bool {
    true
}
/// The receive ring's block size when none is configured (and the MTU's
/// frame fits): 16 KiB, about 128 frames of 64 B, 10 of 1518 B.
pub const DEFAULT_RX_BLOCK_B: u32 = 16 * 1024;
/// The receive ring's bytes per queue when the number of blocks is not
/// configured: 256 blocks of the default size, 256 ms of light traffic
/// (a block is handed over per `rx_block_timeout_ms` however few frames
/// it holds), as many frames as before at high rates.
pub const DEFAULT_RX_RING_B: u32 = 4 * 1024 * 1024;
fn default_block_timeout() -> u32 {
    1
}
fn default_tx_frames() -> u32 {
    1024
}
fn default_fanout() -> Fanout {
    Fanout::Hash
}

impl AfPacketConfig {
    /// Defaults for interface `ifname`: one queue, 256 × 16 KiB receive
    /// blocks (larger blocks, fewer of them, for an MTU above 16 KiB),
    /// 1024 transmit frames, qdisc bypass, hash fanout.
    pub fn new(ifname: &str) -> Self {
        Self {
            ifname: ifname.to_string(),
            queues: 1,
            rx_ring: RxHandover::Auto,
            rx_frames: None,
            rx_block_size_b: None,
            rx_blocks: None,
            rx_block_timeout_ms: default_block_timeout(),
            tx_frames: default_tx_frames(),
            tx_frame_size_b: None,
            qdisc_bypass: true,
            fanout: Fanout::Hash,
        }
    }

    /// Checks every value; the error names the key and the allowed range.
    /// (Whether a block holds an MTU-sized frame is checked when it opens.)
    pub fn validate(&self) -> Result<(), ConfigError> {
        config::check_iface(&self.ifname)?;
        config::check_queues(self.queues, MAX_QUEUES)?;
        if let Some(b) = self.rx_block_size_b {
            config::check_pow2("rx_block_size_b", b, 4096, 1 << 31)?;
        }
        if let Some(n) = self.rx_blocks {
            config::check_range("rx_blocks", n, 2, u32::MAX)?;
        }
        if let Some(n) = self.rx_frames {
            config::check_pow2("rx_frames", n, 8, 1 << 24)?;
        }
        config::check_pow2("tx_frames", self.tx_frames, 8, 1 << 31)?;
        if let Some(f) = self.tx_frame_size_b {
            config::check_pow2("tx_frame_size_b", f, 2048, 1 << 31)?;
        }
        Ok(())
    }
}

impl AfPacketConfig {
    /// The hand-over `rx_ring` names under a switch that lets frames wait
    /// at most `budget` (None: no budget applies): `auto` resolved. A
    /// blocks ring holds a frame under light load for up to the block
    /// timeout before any worker sees it, so it keeps a budget only as
    /// long as that (with `rx_block_timeout_ms = 0` the kernel's choice,
    /// not known here: frames under any budget).
    pub fn handover(&self, budget: Option<std::time::Duration>) -> RxHandover {
        let timeout = std::time::Duration::from_millis(self.rx_block_timeout_ms.into());
        match (self.rx_ring, budget) {
            (RxHandover::Auto, Some(b)) if b < timeout || timeout.is_zero() => RxHandover::Frames,
            (RxHandover::Auto, _) => RxHandover::Blocks,
            (h, _) => h,
        }
    }
}

impl KindConfig for AfPacketConfig {
    fn queues(&self) -> u16 {
        self.queues
    }

    fn validate(&self) -> Result<(), ConfigError> {
        AfPacketConfig::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        ("iface", format!("interface {}", self.ifname))
    }

    fn open(&self, _: PortKind, name: &str, opener: &Opener) -> Result<Arc<dyn Port>, String> {
        let mut cfg = self.clone();
        cfg.rx_ring = cfg.handover(opener.latency_budget());
        Ok(Arc::new(
            AfPacketPort::open(name, cfg).map_err(|e| e.to_string())?,
        ))
    }
}

/// An AF_PACKET port.
pub struct AfPacketPort {
    cfg: AfPacketConfig,
    base: KernelQueues<sys::RxRing, sys::TxRing>,
    rx_socks: Vec<Arc<OwnedFd>>,
    rx_stats: Vec<Arc<RxStats>>,
    /// Kernel receive statistics, accumulated (reading them resets them).
    kstats: Mutex<[u64; 3]>,
}

static FANOUT_SEQ: AtomicU32 = AtomicU32::new(0);

impl AfPacketPort {
    /// Opens the port `name` on `cfg.ifname`.
    pub fn open(name: &str, cfg: AfPacketConfig) -> Result<Self, KernelPortError> {
        let ifn = cfg.ifname.as_str();
        let bad = |what: String| KernelPortError::msg(BACKEND, ifn, what);
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        let ifindex = netdev::ifindex(ifn)
            .map_err(|e| KernelPortError::os(BACKEND, ifn, "interface not found", e))?;
        let watch = LinkWatch::start(ifindex)
            .map_err(|e| KernelPortError::os(BACKEND, ifn, "link state query failed", e))?;
        let mtu = watch.state().mtu();
        let tx_frame = match cfg.tx_frame_size_b {
            Some(f) => f,
            None => (mtu + 18 + sys::TX_DATA_OFF as u32)
                .next_power_of_two()
                .max(2048),
        };
        // A frame of the MTU with its headers and the block's own.
        let need = mtu as u64 + 18 + 128;
        let block_b = match cfg.rx_block_size_b {
            Some(b) if (b as u64) < need => {
                return Err(bad(format!(
                    "rx_block_size_b {b} cannot hold a {mtu} B MTU frame"
                )));
            }
            Some(b) => b,
            None => (need.next_power_of_two() as u32).max(DEFAULT_RX_BLOCK_B),
        };
        let blocks = cfg
            .rx_blocks
            .unwrap_or_else(|| (DEFAULT_RX_RING_B / block_b).max(8));
        // With frames: a slot holds the kernel's header room and a frame
        // of the MTU with two VLAN tags.
        let slot_b = ((sys::RX2_NET_OFF as u32 + mtu + 8).next_power_of_two()).max(2048);
        let slots = cfg
            .rx_frames
            .unwrap_or_else(|| (DEFAULT_RX_RING_B / slot_b).max(256));
        let frames = cfg.rx_ring == RxHandover::Frames;
        let os = |what: &str, e| KernelPortError::os(BACKEND, ifn, what.to_string(), e);

        let mut fanout_id = 0u32;
        let mut rx = Vec::new();
        let mut rx_socks = Vec::new();
        let mut rx_stats = Vec::new();
        for q in 0..cfg.queues {
            let sock =
                Arc::new(sys::packet_socket().map_err(|e| os("socket(AF_PACKET) failed", e))?);
            let fd = sock.as_raw_fd();
            if frames {
                sys::set_int(fd, sys::PACKET_VERSION, sys::TPACKET_V2)
                    .map_err(|e| os("setsockopt(PACKET_VERSION, TPACKET_V2) failed", e))?;
            } else {
                sys::set_int(fd, sys::PACKET_VERSION, sys::TPACKET_V3)
                    .map_err(|e| os("setsockopt(PACKET_VERSION, TPACKET_V3) failed", e))?;
            }
            sys::set_int(fd, sys::PACKET_IGNORE_OUTGOING, 1)
                .map_err(|e| os("setsockopt(PACKET_IGNORE_OUTGOING) failed", e))?;
            let stats = Arc::new(RxStats::default());
            let ring = if frames {
                sys::rx_frame_ring(sock.clone(), slot_b, slots, stats.clone())
            } else {
                sys::rx_ring(
                    sock.clone(),
                    block_b,
                    blocks,
                    2048,
                    cfg.rx_block_timeout_ms.max(1),
                    stats.clone(),
                )
            }
            .map_err(|e| os("setsockopt(PACKET_RX_RING) or mmap failed", e))?;
            sys::bind_ll(fd, ifindex, sys::ETH_P_ALL)
                .map_err(|e| os("bind(AF_PACKET) failed", e))?;
            if cfg.queues > 1 {
                if q == 0 {
                    // Fanout ids are per network namespace: pick one that is
                    // free.
                    let mut last = None;
                    for _ in 0..64 {
                        let seq = FANOUT_SEQ.fetch_add(1, Ordering::Relaxed);
                        let id = (std::process::id().wrapping_mul(2_654_435_761)
                            ^ ifindex
                            ^ seq.wrapping_mul(40_503))
                            & 0xffff;
                        match sys::set_int(
                            fd,
                            sys::PACKET_FANOUT,
                            (id | (cfg.fanout.mode() << 16)) as i32,
                        ) {
                            Ok(()) => {
                                fanout_id = id;
                                last = None;
                                break;
                            }
                            Err(e) => last = Some(e),
                        }
                    }
                    if let Some(e) = last {
                        return Err(os("setsockopt(PACKET_FANOUT) failed", e));
                    }
                } else {
                    sys::set_int(
                        fd,
                        sys::PACKET_FANOUT,
                        (fanout_id | (cfg.fanout.mode() << 16)) as i32,
                    )
                    .map_err(|e| os("setsockopt(PACKET_FANOUT) failed", e))?;
                }
            }
            rx.push(ring);
            rx_socks.push(sock);
            rx_stats.push(stats);
        }

        let mut tx = Vec::new();
        for _ in 0..cfg.queues {
            let sock = sys::packet_socket().map_err(|e| os("socket(AF_PACKET) failed", e))?;
            let fd = sock.as_raw_fd();
            sys::set_int(fd, sys::PACKET_VERSION, sys::TPACKET_V2)
                .map_err(|e| os("setsockopt(PACKET_VERSION, TPACKET_V2) failed", e))?;
            sys::set_int(fd, sys::PACKET_LOSS, 1)
                .map_err(|e| os("setsockopt(PACKET_LOSS) failed", e))?;
            if cfg.qdisc_bypass {
                sys::set_int(fd, sys::PACKET_QDISC_BYPASS, 1)
                    .map_err(|e| os("setsockopt(PACKET_QDISC_BYPASS) failed", e))?;
            }
            let ring = sys::tx_ring(
                sock,
                tx_frame,
                cfg.tx_frames,
                watch.state().clone(),
                Arc::default(),
            )
            .map_err(|e| os("setsockopt(PACKET_TX_RING) or mmap failed", e))?;
            // Protocol 0: the transmit socket receives nothing.
            sys::bind_ll(ring_fd(&ring), ifindex, 0)
                .map_err(|e| os("bind(AF_PACKET) failed", e))?;
            tx.push(ring);
        }
        Ok(Self {
            cfg,
            base: KernelQueues::new(name, watch, rx, tx),
            rx_socks,
            rx_stats,
            kstats: Mutex::new([0; 3]),
        })
    }

    /// The interface this port is attached to.
    pub fn ifname(&self) -> &str {
        &self.cfg.ifname
    }

    /// True once the interface was removed: the port is dead and should be
    /// taken out of the switch.
    pub fn removed(&self) -> bool {
        self.base.removed()
    }
}

fn ring_fd(r: &sys::TxRing) -> std::os::fd::RawFd {
    r.fd()
}

impl Port for AfPacketPort {
    fn info(&self) -> PortInfo {
        self.base.info(BACKEND, self.base.tx[0].capacity() as u32)
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        self.base.take_rx(q)
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        self.base.tx(q)
    }

    fn link_up(&self) -> bool {
        self.base.link_up()
    }

    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        let mut out = self.base.counters();
        let mut k = self.kstats.lock().unwrap_or_else(|e| e.into_inner());
        for s in &self.rx_socks {
            if let Ok((p, d, f)) = sys::take_stats(s.as_raw_fd()) {
                k[0] += p;
                k[1] += d;
                k[2] += f;
            }
        }
        out.push(("kernel_rx_packets", k[0]));
        out.push(("kernel_rx_drops", k[1]));
        out.push(("kernel_rx_ring_freezes", k[2]));
        let sum = |f: &dyn Fn(&RxStats) -> u64| self.rx_stats.iter().map(|s| f(s)).sum::<u64>();
        out.push(("rx_frames", sum(&|s| s.frames.load(Ordering::Relaxed))));
        out.push((
            "rx_vlan_restored",
            sum(&|s| s.vlan_restored.load(Ordering::Relaxed)),
        ));
        out.push((
            "rx_truncated",
            sum(&|s| s.truncated.load(Ordering::Relaxed)),
        ));
        out.push((
            "rx_csum_not_ready",
            sum(&|s| s.csum_not_ready.load(Ordering::Relaxed)),
        ));
        out.push((
            "rx_malformed",
            sum(&|s| s.malformed.load(Ordering::Relaxed)),
        ));
        // Which hand-over `auto` chose: 1 for frames (TPACKET_V2).
        out.push((
            "rx_ring_frames",
            (self.cfg.rx_ring == RxHandover::Frames) as u64,
        ));
        let tsum =
            |f: &dyn Fn(&TxStats) -> u64| self.base.tx.iter().map(|t| f(&t.stats)).sum::<u64>();
        out.push(("tx_frames", tsum(&|s| s.frames.load(Ordering::Relaxed))));
        out.push(("tx_kicks", tsum(&|s| s.kicks.load(Ordering::Relaxed))));
        out.push((
            "tx_kick_errors",
            tsum(&|s| s.kick_errors.load(Ordering::Relaxed)),
        ));
        out.push(("tx_rejected", tsum(&|s| s.rejected.load(Ordering::Relaxed))));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn auto_hands_frames_over_one_by_one_where_a_block_would_wait_too_long() {
        let mut c = AfPacketConfig::new("v0");
        let us = Duration::from_micros;
        assert_eq!(c.rx_block_timeout_ms, 1);
        // Always polling (turnoutd's wakeup = "poll", turnout-gen), and a
        // budget shorter than the block timeout (turnoutd's default).
        assert_eq!(c.handover(Some(Duration::ZERO)), RxHandover::Frames);
        assert_eq!(c.handover(Some(us(100))), RxHandover::Frames);
        assert_eq!(c.handover(Some(us(999))), RxHandover::Frames);
        // A budget the block timeout fits in (the power-saving 1000 µs),
        // and no budget.
        assert_eq!(c.handover(Some(us(1000))), RxHandover::Blocks);
        assert_eq!(c.handover(None), RxHandover::Blocks);
        // A longer block timeout takes frames under a longer budget.
        c.rx_block_timeout_ms = 4;
        assert_eq!(c.handover(Some(us(1000))), RxHandover::Frames);
        assert_eq!(c.handover(Some(us(4000))), RxHandover::Blocks);
        // The kernel's own timeout (0): not known, so frames.
        c.rx_block_timeout_ms = 0;
        assert_eq!(c.handover(Some(us(100_000))), RxHandover::Frames);
        assert_eq!(c.handover(None), RxHandover::Blocks);
        // An explicit choice stands.
        c.rx_ring = RxHandover::Blocks;
        assert_eq!(c.handover(Some(Duration::ZERO)), RxHandover::Blocks);
        c.rx_ring = RxHandover::Frames;
        assert_eq!(c.handover(None), RxHandover::Frames);
        assert_eq!(c.handover(Some(us(100))), RxHandover::Frames);
    }

    #[test]
    fn rx_ring_and_rx_frames_are_read_and_checked() {
        let read = |v: serde_json::Value| serde_json::from_value::<AfPacketConfig>(v);
        let c = read(serde_json::json!({"iface": "v0", "rx_ring": "frames", "rx_frames": 512}))
            .unwrap();
        assert_eq!((c.rx_ring, c.rx_frames), (RxHandover::Frames, Some(512)));
        assert!(c.validate().is_ok());
        let bad = read(serde_json::json!({"iface": "v0", "rx_frames": 500})).unwrap();
        assert!(
            bad.validate()
                .unwrap_err()
                .to_string()
                .starts_with("rx_frames: 500 is not a power of two in 8..="),
            "{:?}",
            bad.validate()
        );
        assert!(read(serde_json::json!({"iface": "v0", "rx_ring": "v2"}))
            .unwrap_err()
            .to_string()
            .contains("unknown variant `v2`, expected one of `auto`, `frames`, `blocks`"));
    }
}
