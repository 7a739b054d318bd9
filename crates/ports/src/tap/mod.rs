//! TAP port: the host-stack port (mSwitch's "host port").
//!
//! The port creates TAP interface `ifname` through `/dev/net/tun`
//! (`IFF_TAP | IFF_NO_PI`, `IFF_MULTI_QUEUE` for several queues, one
//! non-blocking descriptor per queue). Frames the host stack sends out of
//! the interface are received by the switch; frames the switch transmits
//! enter the host stack as if they arrived on the interface. The interface
//! lives as long as the port (it is not persistent); its addresses and
//! admin state are the host's business, and `link_up()` follows them.
//!
//! A TAP device has no shared ring: each frame costs one `read()` or one
//! `write()` system call. They are batched — a burst reads until the device
//! is empty or the batch is full, a publish writes every published frame —
//! but this backend is the one exception to "no per-packet system call".

#[allow(unsafe_code)]
mod sys;

use std::os::fd::OwnedFd;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};

use serde::{Deserialize, Serialize};

use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::netdev::{self, KernelPortError, KernelQueues, LinkWatch};
use crate::open::Opener;

pub use sys::{RxStats, TxStats};

const BACKEND: &str = "tap";

/// Most queues: the kernel's `MAX_TAP_QUEUES`.
pub const MAX_QUEUES: u16 = 256;
/// Largest buffer: a frame of the largest MTU (`ETH_MAX_MTU`, 65535) with
/// its Ethernet header and a VLAN tag.
pub const MAX_FRAME_B: u32 = 65535 + 18;

/// Configuration of a TAP port: the `[[ports]]` table of kind `tap`
/// (docs/turnoutd.md).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TapConfig {
    /// Name of the TAP interface to create (`iface`, ≤ 15 bytes).
    #[serde(rename = "iface")]
    pub ifname: String,
    /// Queues (`IFF_MULTI_QUEUE` when more than one), 1..=[`MAX_QUEUES`].
    #[serde(default = "one")]
    pub queues: u16,
    /// Receive buffers and transmit slots per queue (≥ 1).
    #[serde(default = "default_slots")]
    pub slots: u32,
    /// Buffer size in bytes: the largest frame carried,
    /// 64..=[`MAX_FRAME_B`].
    #[serde(default = "default_frame_size")]
    pub frame_size_b: u32,
    /// The tun device (normally `/dev/net/tun`; not a config key).
    #[serde(skip, default = "default_dev")]
    pub dev_path: String,
}

fn one() -> u16 {
    1
}
fn default_slots() -> u32 {
    256
}
fn default_frame_size() -> u32 {
    9216
}
fn default_dev() -> String {
    "/dev/net/tun".to_string()
}

impl TapConfig {
    /// Defaults for `ifname`: one queue, 256 slots of 9216 B.
    pub fn new(ifname: &str) -> Self {
        Self {
            ifname: ifname.to_string(),
            queues: 1,
            slots: default_slots(),
            frame_size_b: default_frame_size(),
            dev_path: default_dev(),
        }
    }

    /// Checks every value; the error names the key and the allowed range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        config::check_iface(&self.ifname)?;
        config::check_queues(self.queues, MAX_QUEUES)?;
        config::check_range("slots", self.slots, 1, u32::MAX)?;
        config::check_range("frame_size_b", self.frame_size_b, 64, MAX_FRAME_B)
    }
}

impl KindConfig for TapConfig {
    fn queues(&self) -> u16 {
        self.queues
    }

    fn validate(&self) -> Result<(), ConfigError> {
        TapConfig::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        ("iface", format!("interface {}", self.ifname))
    }

    fn open(&self, _: PortKind, name: &str, _: &Opener) -> Result<Arc<dyn Port>, String> {
        Ok(Arc::new(
            TapPort::open(name, self.clone()).map_err(|e| e.to_string())?,
        ))
    }
}

/// A TAP port.
pub struct TapPort {
    cfg: TapConfig,
    base: KernelQueues<sys::TapRx, sys::TapTx>,
    rx_stats: Vec<Arc<RxStats>>,
}

impl TapPort {
    /// Creates the TAP interface `cfg.ifname` and the port `name` on it.
    pub fn open(name: &str, cfg: TapConfig) -> Result<Self, KernelPortError> {
        let ifn = cfg.ifname.clone();
        let ifn = ifn.as_str();
        let bad = |what: String| KernelPortError::msg(BACKEND, ifn, what);
        let os = |what: String, e| KernelPortError::os(BACKEND, ifn, what, e);
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        let mut fds: Vec<Arc<OwnedFd>> = Vec::new();
        for _ in 0..cfg.queues {
            let fd = sys::open_queue(&cfg.dev_path, ifn, cfg.queues > 1)
                .map_err(|(what, e)| os(what.into(), e))?;
            fds.push(Arc::new(fd));
        }
        let ifindex =
            netdev::ifindex(ifn).map_err(|e| os("interface not found after creation".into(), e))?;
        let watch = LinkWatch::start_following_moves(ifindex)
            .map_err(|e| os("link state query failed".into(), e))?;
        let (slots, size) = (cfg.slots as usize, cfg.frame_size_b as usize);
        let mut rx = Vec::new();
        let mut rx_stats = Vec::new();
        let mut tx = Vec::new();
        for fd in &fds {
            let st = Arc::new(RxStats::default());
            rx.push(
                sys::tap_rx(fd.clone(), slots, size, st.clone())
                    .map_err(|e| os("buffer allocation failed".into(), e))?,
            );
            rx_stats.push(st);
            tx.push(
                sys::tap_tx(fd.clone(), slots, size, watch.state().clone())
                    .map_err(|e| os("buffer allocation failed".into(), e))?,
            );
        }
        Ok(Self {
            cfg,
            base: KernelQueues::new(name, watch, rx, tx),
            rx_stats,
        })
    }

    /// The TAP interface's name.
    pub fn ifname(&self) -> &str {
        &self.cfg.ifname
    }

    /// True once the interface was removed (or moved away): the port is dead.
    pub fn removed(&self) -> bool {
        self.base.removed()
    }
}

impl Port for TapPort {
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
        let r = |f: &dyn Fn(&RxStats) -> u64| self.rx_stats.iter().map(|s| f(s)).sum::<u64>();
        out.push(("rx_frames", r(&|s| s.frames.load(Ordering::Relaxed))));
        out.push(("rx_reads", r(&|s| s.reads.load(Ordering::Relaxed))));
        out.push(("rx_truncated", r(&|s| s.truncated.load(Ordering::Relaxed))));
        out.push(("rx_errors", r(&|s| s.errors.load(Ordering::Relaxed))));
        let t = |f: &dyn Fn(&TxStats) -> u64| self.base.tx.iter().map(|q| f(&q.stats)).sum::<u64>();
        out.push(("tx_frames", t(&|s| s.frames.load(Ordering::Relaxed))));
        out.push(("tx_errors", t(&|s| s.errors.load(Ordering::Relaxed))));
        out
    }
}
