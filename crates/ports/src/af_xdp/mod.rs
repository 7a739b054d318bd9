//! AF_XDP port: kernel interfaces through XDP sockets.
//!
//! Per queue: one XDP socket bound to the interface's queue of the same
//! index, with its own UMEM of `frames_per_queue` chunks (half receive,
//! half transmit) and its fill, completion, rx and tx rings, all mmapped.
//! One XDP program, built here from six raw eBPF instructions (no clang) and
//! loaded with bpf(2), redirects every queue's frames to the socket at that
//! queue's index in an XSKMAP (frames of queues without a socket go on to the
//! stack). It is attached through a bpf link, so it is detached when the
//! port is dropped and also if the process dies.
//!
//! Receive: `burst` hands out views into the UMEM chunks named by the rx
//! ring; `release` puts the chunks back into the fill ring (and wakes the
//! driver if it asked, need_wakeup). Transmit: slot `s` is tx-ring entry `s`
//! and transmit chunk `s mod n`; `publish` moves the producer and kicks the
//! kernel with `sendto()` when the tx ring's need-wakeup flag says so (copy
//! mode sends at most 32 frames per call, so a large batch takes a few).
//!
//! Modes: native XDP (in the driver) or generic (in the stack), and
//! zero-copy or copy binding, each forced or chosen automatically with
//! fallback. veth supports native XDP in copy mode only.

#[allow(unsafe_code)]
mod sys;

use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::sync::Arc;

use fabric::{Port, PortInfo, QueueId, RxQueue, TxQueue};

use serde::{Deserialize, Serialize};

use crate::config::{self, ConfigError, KindConfig};
use crate::kind::PortKind;
use crate::netdev::{self, errno_text, KernelPortError, KernelQueues, LinkWatch};
use crate::open::Opener;

pub use sys::{RxStats, TxStats, XdpStatistics};

const BACKEND: &str = "af_xdp";

/// Most queue pairs per port (and at most the interface's receive queues).
pub const MAX_QUEUES: u16 = 64;

/// Where the XDP program runs (`attach` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpAttach {
    /// Native if the driver accepts it, else generic.
    Auto,
    /// In the driver (`XDP_FLAGS_DRV_MODE`); fails if unsupported.
    Native,
    /// In the stack (`XDP_FLAGS_SKB_MODE`); works on any interface.
    Generic,
}

/// How sockets bind to the queues (`bind` key).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum XdpBind {
    /// Zero-copy if the driver supports it, else copy.
    Auto,
    /// Copy mode (`XDP_COPY`).
    Copy,
    /// Zero-copy (`XDP_ZEROCOPY`); fails if unsupported.
    ZeroCopy,
}

/// Configuration of an AF_XDP port: the `[[ports]]` table of kind
/// `af_xdp` (docs/turnoutd.md) and turnout-gen's `afxdp:` spec.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AfXdpConfig {
    /// Kernel interface to attach to (`iface`).
    #[serde(rename = "iface")]
    pub ifname: String,
    /// Queue pairs, 1..=[`MAX_QUEUES`]; queue `i` is the interface's
    /// queue `i`.
    #[serde(default = "one")]
    pub queues: u16,
    /// UMEM chunks per queue (a power of two ≥ 16): half receive, half
    /// transmit up to [`MAX_TX_FRAMES`] (the rest is not allocated); the
    /// ring sizes follow.
    #[serde(default = "default_frames")]
    pub frames_per_queue: u32,
    /// Chunk size: 2048 or 4096 bytes.
    #[serde(default = "default_frame_size")]
    pub frame_size_b: u32,
    /// XDP program placement.
    #[serde(default = "default_attach")]
    pub attach: XdpAttach,
    /// Socket binding mode.
    #[serde(default = "default_bind")]
    pub bind: XdpBind,
}

fn one() -> u16 {
    1
}
/// Transmit chunks per queue at most. A copy-mode `sendto()` empties the
/// ring at once, so more would only hold more frames in flight toward a
/// zero-copy driver; the chunks are used in turn, and a larger transmit
/// area is that much more memory each frame is written into cold.
pub const MAX_TX_FRAMES: u32 = 2048;

/// 8192 receive chunks: 20 ms at 400 kpps, what a worker kept from its
/// CPU for milliseconds (a busy host, a vCPU taken away) needs not to
/// drop (docs/kernel-ports.md, "AF_XDP").
fn default_frames() -> u32 {
    16384
}
fn default_frame_size() -> u32 {
    2048
}
fn default_attach() -> XdpAttach {
    XdpAttach::Auto
}
fn default_bind() -> XdpBind {
    XdpBind::Auto
}

impl AfXdpConfig {
    /// Defaults for `ifname`: one queue, 16384 chunks of 2048 B, automatic
    /// modes.
    pub fn new(ifname: &str) -> Self {
        Self {
            ifname: ifname.to_string(),
            queues: 1,
            frames_per_queue: default_frames(),
            frame_size_b: default_frame_size(),
            attach: XdpAttach::Auto,
            bind: XdpBind::Auto,
        }
    }

    /// Checks every value; the error names the key and the allowed range.
    /// (Whether the interface has the queues is checked when it opens.)
    pub fn validate(&self) -> Result<(), ConfigError> {
        config::check_iface(&self.ifname)?;
        config::check_queues(self.queues, MAX_QUEUES)?;
        config::check_pow2("frames_per_queue", self.frames_per_queue, 16, 1 << 31)?;
        if self.frame_size_b != 2048 && self.frame_size_b != 4096 {
            return Err(ConfigError::new(
                "frame_size_b",
                format!("{} is not 2048 or 4096", self.frame_size_b),
            ));
        }
        Ok(())
    }
}

impl KindConfig for AfXdpConfig {
    fn queues(&self) -> u16 {
        self.queues
    }

    fn validate(&self) -> Result<(), ConfigError> {
        AfXdpConfig::validate(self)
    }

    fn exclusive_key(&self) -> (&'static str, String) {
        ("iface", format!("interface {}", self.ifname))
    }

    fn open(&self, _: PortKind, name: &str, _: &Opener) -> Result<Arc<dyn Port>, String> {
        Ok(Arc::new(
            AfXdpPort::open(name, self.clone()).map_err(|e| e.to_string())?,
        ))
    }
}

/// An AF_XDP port.
pub struct AfXdpPort {
    // Field order is drop order: detach the program first.
    _link: OwnedFd,
    _prog: OwnedFd,
    _map: OwnedFd,
    cfg: AfXdpConfig,
    native: bool,
    zero_copy: bool,
    /// Frames one copy-mode sendto() sends (0 in zero-copy mode).
    tx_budget: u32,
    base: KernelQueues<sys::XskRx, sys::XskTx>,
    socks: Vec<RawFd>,
    rx_stats: Vec<Arc<RxStats>>,
    tx_stats: Vec<Arc<TxStats>>,
}

impl AfXdpPort {
    /// Opens the port `name` on `cfg.ifname`.
    pub fn open(name: &str, cfg: AfXdpConfig) -> Result<Self, KernelPortError> {
        let ifn = cfg.ifname.clone();
        let ifn = ifn.as_str();
        let bad = |what: String| KernelPortError::msg(BACKEND, ifn, what);
        let os = |what: String, e| KernelPortError::os(BACKEND, ifn, what, e);
        cfg.validate().map_err(|e| bad(e.to_string()))?;
        let fpq = cfg.frames_per_queue;
        let ifindex = netdev::ifindex(ifn).map_err(|e| os("interface not found".into(), e))?;
        let watch =
            LinkWatch::start(ifindex).map_err(|e| os("link state query failed".into(), e))?;
        let nrxq = netdev::query_link(ifindex)
            .map_err(|e| os("link state query failed".into(), e))?
            .rx_queues
            .max(1);
        if cfg.queues as u32 > nrxq {
            return Err(bad(format!(
                "the interface has {nrxq} receive queue(s), the port asks for {}",
                cfg.queues
            )));
        }
        let map = sys::xskmap_create(nrxq)
            .map_err(|e| os("bpf(BPF_MAP_CREATE, XSKMAP) failed".into(), e))?;

        let (rx_frames, tx_frames) = (fpq / 2, (fpq / 2).min(MAX_TX_FRAMES));
        let mut rx = Vec::new();
        let mut tx = Vec::new();
        let mut socks = Vec::new();
        let mut rx_stats = Vec::new();
        let mut tx_stats = Vec::new();
        let mut zero_copy = cfg.bind != XdpBind::Copy;
        let mut tx_budget = u32::MAX;
        for q in 0..cfg.queues as u32 {
            let xsk = sys::xsk_create(cfg.frame_size_b, rx_frames, tx_frames)
                .map_err(|(what, e)| os(format!("queue {q}: {what}"), e))?;
            let mut bound = false;
            if zero_copy {
                match xsk.bind(ifindex, q, sys::XDP_ZEROCOPY) {
                    Ok(()) => bound = true,
                    Err(e) if cfg.bind == XdpBind::ZeroCopy => {
                        return Err(os(
                            format!("queue {q}: bind(AF_XDP) in zero-copy mode failed"),
                            e,
                        ))
                    }
                    Err(_) => zero_copy = false,
                }
            }
            if !bound {
                bind_retrying(&xsk, ifindex, q, sys::XDP_COPY).map_err(|e| {
                    let hint = if e.raw_os_error() == Some(libc::EBUSY) {
                        " (the queue is used by another AF_XDP socket)"
                    } else {
                        ""
                    };
                    os(
                        format!("queue {q}: bind(AF_XDP) in copy mode failed{hint}"),
                        e,
                    )
                })?;
            }
            if !zero_copy {
                // One sendto() per batch instead of one per 32 frames.
                tx_budget = tx_budget.min(sys::set_tx_budget(xsk.fd(), tx_frames));
            }
            sys::xskmap_set(&map, q, xsk.fd())
                .map_err(|e| os("bpf(BPF_MAP_UPDATE_ELEM) failed".into(), e))?;
            socks.push(xsk.fd());
            let (rs, ts) = (Arc::new(RxStats::default()), Arc::new(TxStats::default()));
            let (r, t) = xsk.split(watch.state().clone(), rs.clone(), ts.clone());
            rx.push(r);
            tx.push(t);
            rx_stats.push(rs);
            tx_stats.push(ts);
        }

        let prog = sys::prog_load(&map).map_err(|(e, log)| {
            let what = if log.is_empty() {
                "bpf(BPF_PROG_LOAD) failed".to_string()
            } else {
                format!("bpf(BPF_PROG_LOAD) failed (verifier: {log})")
            };
            os(what, e)
        })?;
        let attach = |mode: u32, label: &str| {
            sys::xdp_link(&prog, ifindex, mode).map_err(|e| {
                let hint = match e.raw_os_error() {
                    Some(libc::EBUSY) | Some(libc::EEXIST) => {
                        " (another XDP program is attached to the interface)"
                    }
                    Some(libc::ERANGE) => " (MTU too large for native XDP)",
                    _ => "",
                };
                os(
                    format!("bpf(BPF_LINK_CREATE) in {label} mode failed{hint}"),
                    e,
                )
            })
        };
        let (link, native) = match cfg.attach {
            XdpAttach::Native => (attach(sys::XDP_FLAGS_DRV_MODE, "native")?, true),
            XdpAttach::Generic => (attach(sys::XDP_FLAGS_SKB_MODE, "generic")?, false),
            XdpAttach::Auto => match attach(sys::XDP_FLAGS_DRV_MODE, "native") {
                Ok(l) => (l, true),
                Err(native_err) => match attach(sys::XDP_FLAGS_SKB_MODE, "generic") {
                    Ok(l) => (l, false),
                    Err(e) => {
                        let n = native_err
                            .source
                            .as_ref()
                            .map(errno_text)
                            .unwrap_or_default();
                        return Err(KernelPortError {
                            what: format!("{} (native mode: {n})", e.what),
                            ..e
                        });
                    }
                },
            },
        };
        Ok(Self {
            _link: link,
            _prog: prog,
            _map: map,
            cfg,
            native,
            zero_copy,
            tx_budget: if zero_copy { 0 } else { tx_budget },
            base: KernelQueues::new(name, watch, rx, tx),
            socks,
            rx_stats,
            tx_stats,
        })
    }

    /// The interface this port is attached to.
    pub fn ifname(&self) -> &str {
        &self.cfg.ifname
    }

    /// The program runs in the driver (native XDP).
    pub fn native(&self) -> bool {
        self.native
    }

    /// The sockets are bound in zero-copy mode.
    pub fn zero_copy(&self) -> bool {
        self.zero_copy
    }

    /// Frames one `sendto()` sends in copy mode: the tx ring's size where
    /// the kernel has `XDP_MAX_TX_SKB_BUDGET` (6.17), else its default 32;
    /// 0 in zero-copy mode (the driver sends, no budget).
    pub fn tx_budget(&self) -> u32 {
        self.tx_budget
    }

    /// True once the interface was removed: the port is dead.
    pub fn removed(&self) -> bool {
        self.base.removed()
    }

    /// Kernel statistics of the sockets, summed.
    pub fn xdp_statistics(&self) -> XdpStatistics {
        let mut t = XdpStatistics::default();
        for &fd in &self.socks {
            if let Ok(s) = sys::xsk_statistics(fd) {
                t.rx_dropped += s.rx_dropped;
                t.rx_invalid_descs += s.rx_invalid_descs;
                t.tx_invalid_descs += s.tx_invalid_descs;
                t.rx_ring_full += s.rx_ring_full;
                t.rx_fill_ring_empty_descs += s.rx_fill_ring_empty_descs;
                t.tx_ring_empty_descs += s.tx_ring_empty_descs;
            }
        }
        t
    }
}

/// How long [`bind_retrying`] waits for a busy queue. On a loaded 2-CPU
/// machine (a CI run, load average 9) the kworker that frees a closed
/// socket's queue ran more than a second after the close: a tester's next
/// trial then failed to bind. A queue another live socket holds fails after
/// this long, with the hint that says so.
const BIND_BUSY_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Binds, retrying for up to [`BIND_BUSY_WAIT`] while the queue is busy:
/// the kernel releases a closed socket's hold on a queue from a workqueue
/// (the buffer pool's deferred release), so a port reopened right after
/// another was dropped may find it taken until a kworker runs.
fn bind_retrying(xsk: &sys::Xsk, ifindex: u32, q: u32, mode: u16) -> std::io::Result<()> {
    let deadline = std::time::Instant::now() + BIND_BUSY_WAIT;
    loop {
        match xsk.bind(ifindex, q, mode) {
            Err(e)
                if e.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            r => return r,
        }
    }
}

impl Port for AfXdpPort {
    fn info(&self) -> PortInfo {
        let rx_max = self.cfg.frame_size_b - sys::XDP_PACKET_HEADROOM;
        self.base.info(BACKEND, rx_max)
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
        out.push(("xdp_native", self.native as u64));
        out.push(("zero_copy", self.zero_copy as u64));
        out.push(("tx_budget", self.tx_budget as u64));
        let k = self.xdp_statistics();
        out.push(("kernel_rx_dropped", k.rx_dropped));
        out.push(("kernel_rx_ring_full", k.rx_ring_full));
        out.push(("kernel_rx_fill_ring_empty", k.rx_fill_ring_empty_descs));
        out.push(("kernel_rx_invalid_descs", k.rx_invalid_descs));
        out.push(("kernel_tx_invalid_descs", k.tx_invalid_descs));
        out.push(("kernel_tx_ring_empty", k.tx_ring_empty_descs));
        let r = |f: &dyn Fn(&RxStats) -> u64| self.rx_stats.iter().map(|s| f(s)).sum::<u64>();
        out.push(("rx_frames", r(&|s| s.frames.load(Ordering::Relaxed))));
        out.push(("rx_bad_descs", r(&|s| s.bad_descs.load(Ordering::Relaxed))));
        out.push(("rx_wakeups", r(&|s| s.wakeups.load(Ordering::Relaxed))));
        let t = |f: &dyn Fn(&TxStats) -> u64| self.tx_stats.iter().map(|s| f(s)).sum::<u64>();
        out.push(("tx_frames", t(&|s| s.frames.load(Ordering::Relaxed))));
        out.push(("tx_kicks", t(&|s| s.kicks.load(Ordering::Relaxed))));
        out.push((
            "tx_kick_errors",
            t(&|s| s.kick_errors.load(Ordering::Relaxed)),
        ));
        out.push((
            "tx_kicks_refused",
            t(&|s| s.kicks_refused.load(Ordering::Relaxed)),
        ));
        out
    }
}
