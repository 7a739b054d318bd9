//! VXLAN (RFC 7348) and Geneve (RFC 8926) tunnel ports: an L2 segment
//! stretched over an IP underlay, so turnoutd instances on several hosts,
//! the Linux kernel's `vxlan` netdev and Open vSwitch form one network.
//!
//! A tunnel port owns an underlay port (AF_PACKET or AF_XDP on the host's
//! uplink) that is not in the switch's port table. To the switch it is a
//! port like any other, so it works with every logic:
//!
//! - **Receive**: a burst of the underlay's receive queue is decapsulated
//!   in place ([`decap`]): each accepted frame's view is narrowed to the
//!   inner frame (no copy); everything else leaves the batch and is counted
//!   under its reason ([`decap::RxDrop`]). The inner source MAC is learned
//!   behind the sending endpoint ([`fdb`]). ARP and neighbour discovery
//!   frames go to the control thread over a bounded queue.
//! - **Transmit**: the fabric copies frames into a staging ring
//!   (`sys::Staging`, same reserve / write / publish protocol as every
//!   port); `publish`, under the destination lock, encapsulates each frame
//!   for its endpoint (inner destination MAC learned → one copy; unknown,
//!   broadcast or multicast → one copy per endpoint of the flood list,
//!   head-end replication) in front of the frame inside its staging slot,
//!   and copies the result into the underlay's transmit ring. Outer
//!   headers are precomputed per endpoint ([`encap::Outer`]); per frame
//!   only lengths, checksums and the UDP source port (a hash of the inner
//!   flow) are written.
//! - **Control thread** (one per tunnel): answers ARP / neighbour
//!   solicitations for the local address, resolves the next hop of every
//!   endpoint (the endpoint itself, or the configured gateway) unless a
//!   static neighbour is given, adds endpoints seen in traffic (learning),
//!   ages them out, and publishes a new endpoint snapshot ([`Remotes`])
//!   whenever something changed (arc-swap: the data path never locks).
//!
//! Frames too big for the underlay are refused by `slots_for` (the fabric
//! counts them as `oversize`), never fragmented. Underlay frames that the
//! transmit ring cannot take are counted as `tx_underlay_full`.

pub mod decap;
pub mod encap;
pub mod fdb;
pub mod neigh;
mod spec;
mod sys;

pub use spec::{NeighbourSpec, TunnelSpec, UnderlaySpec};

use std::collections::HashMap;
use std::net::IpAddr;
use std::os::fd::{OwnedFd, RawFd};
use std::sync::atomic::{
    AtomicBool, AtomicU32, AtomicU64,
    Ordering::{Acquire, Relaxed, Release},
};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use fabric::{
    DropReason, Lease, OwnedTx, Port, PortInfo, QueueId, RxFill, RxQueue, TxDrops, TxFrames,
    TxLock, TxProducer, TxQueue,
};
use wire::MacAddr;

use decap::{DecapCfg, Rx, RxDrop};
pub use encap::Kind;
use encap::{Outer, OuterSpec, MAX_OUTER};
use fdb::Fdb;

/// Most endpoints (static and learned) per tunnel.
pub const MAX_REMOTES: usize = 1024;
/// Default aging of learned MACs and endpoints, seconds.
pub const DEFAULT_AGING_S: u32 = 300;
/// Default staging ring size (frames per transmit queue).
pub const DEFAULT_STAGING: u32 = 1024;
/// Most dynamic underlay neighbours kept (control path memory bound).
const MAX_NEIGHBOURS: usize = 4096;
/// Bytes of a control frame handed to the control thread.
const CTL_FRAME: usize = 160;

/// Configuration of a tunnel port.
#[derive(Clone, Debug)]
pub struct TunnelConfig {
    /// VXLAN or Geneve.
    pub kind: Kind,
    /// Virtual network identifier (24 bits).
    pub vni: u32,
    /// Local tunnel endpoint address (not configured on the kernel
    /// interface: the tunnel answers ARP / ND for it itself).
    pub local_ip: IpAddr,
    /// UDP destination port (4789 VXLAN, 6081 Geneve).
    pub dst_port: u16,
    /// Static remote endpoints: the flood list.
    pub remotes: Vec<IpAddr>,
    /// Learn inner MACs behind endpoints, and endpoints from traffic.
    pub learning: bool,
    /// Aging of learned MACs and endpoints, seconds (0 = never).
    pub aging_s: u32,
    /// MAC table entries.
    pub fdb_size: usize,
    /// Underlay gateway; `None`: every endpoint is on link.
    pub next_hop: Option<IpAddr>,
    /// Static underlay neighbours (IP → MAC); others are resolved.
    pub neighbours: Vec<(IpAddr, MacAddr)>,
    /// Frames per transmit staging ring.
    pub staging: u32,
    /// Outer TTL / hop limit.
    pub ttl: u8,
}

impl TunnelConfig {
    /// Defaults for `kind` with `vni` at `local_ip`: the IANA port,
    /// learning on, 300 s aging, 4096 MACs, no remotes.
    pub fn new(kind: Kind, vni: u32, local_ip: IpAddr) -> Self {
        Self {
            kind,
            vni,
            local_ip,
            dst_port: kind.default_port(),
            remotes: Vec::new(),
            learning: true,
            aging_s: DEFAULT_AGING_S,
            fdb_size: 4096,
            next_hop: None,
            neighbours: Vec::new(),
            staging: DEFAULT_STAGING,
            ttl: 64,
        }
    }

    fn check(&self) -> Result<(), String> {
        if self.vni > wire::vxlan::MAX_VNI {
            return Err(format!("vni {} is over 24 bits", self.vni));
        }
        if self.local_ip.is_unspecified() || self.local_ip.is_multicast() {
            return Err(format!(
                "local_ip {} is not a unicast address",
                self.local_ip
            ));
        }
        let fam = |a: &IpAddr| a.is_ipv6() == self.local_ip.is_ipv6();
        if let Some(a) = self.remotes.iter().find(|a| !fam(a)) {
            return Err(format!("remote {a} is not of local_ip's address family"));
        }
        if let Some(a) = self.next_hop.filter(|a| !fam(a)) {
            return Err(format!("next_hop {a} is not of local_ip's address family"));
        }
        if self.remotes.len() > MAX_REMOTES / 2 {
            return Err(format!("at most {} static remotes", MAX_REMOTES / 2));
        }
        if self.dst_port == 0 {
            return Err("dst_port must not be 0".into());
        }
        Ok(())
    }
}

/// One endpoint in a snapshot.
#[derive(Clone, Debug)]
pub struct Remote {
    /// Its tunnel address.
    pub ip: IpAddr,
    /// Outer header towards it; `None` until its next hop is resolved.
    pub outer: Option<Outer>,
    /// Learned from traffic (ages out) rather than configured.
    pub learned: bool,
}

/// An immutable snapshot of the endpoints; ids are stable across
/// snapshots while the endpoint exists.
#[derive(Default)]
pub struct Remotes {
    by_id: Vec<Option<Remote>>,
    flood: Vec<u16>,
    by_ip: HashMap<IpAddr, u16>,
}

impl Remotes {
    #[inline]
    fn get(&self, id: u16) -> Option<&Remote> {
        self.by_id.get(id as usize).and_then(|r| r.as_ref())
    }
}

#[repr(align(64))]
#[derive(Default)]
struct Counters {
    rx_drop: [AtomicU64; RxDrop::COUNT],
    rx_decap: AtomicU64,
    rx_control: AtomicU64,
    rx_control_lost: AtomicU64,
    rx_unknown_remote: AtomicU64,
    tx_encap: AtomicU64,
    tx_flooded: AtomicU64,
    tx_flood_copies: AtomicU64,
    tx_no_remote: AtomicU64,
    tx_no_neighbour: AtomicU64,
    tx_too_big: AtomicU64,
    tx_underlay_full: AtomicU64,
    arp_nd_sent: AtomicU64,
    arp_nd_replies: AtomicU64,
    remotes_learned: AtomicU64,
    remotes_aged: AtomicU64,
}

enum Ctl {
    Frame([u8; CTL_FRAME], u16),
    Seen(IpAddr),
}

struct Shared {
    cfg: TunnelConfig,
    decap: DecapCfg,
    mac: MacAddr,
    mtu: u32,
    remotes: ArcSwap<Remotes>,
    /// Bumped after every new snapshot (receive queues drop their cache).
    generation: AtomicU64,
    fdb: Fdb,
    /// Last second each endpoint id sent valid traffic.
    seen: Box<[AtomicU32]>,
    epoch: Instant,
    c: Counters,
    ctl: SyncSender<Ctl>,
    stop: AtomicBool,
}

impl Shared {
    #[inline]
    fn now_s(&self) -> u32 {
        self.epoch.elapsed().as_secs() as u32 + 1
    }
}

/// A VXLAN or Geneve port over an underlay port.
pub struct TunnelPort {
    name: String,
    underlay: Arc<dyn Port>,
    shared: Arc<Shared>,
    tx: Vec<TunnelTx>,
    rx: Mutex<Vec<Option<TunnelRx>>>,
    ctl: Mutex<Option<JoinHandle<()>>>,
    max_inner: usize,
}

impl TunnelPort {
    /// Opens a tunnel named `name` over `underlay`, which is attached to
    /// kernel interface `ifname` (its MAC is the outer source MAC) with IP
    /// MTU `mtu`. Takes every receive queue of the underlay.
    pub fn open(
        name: &str,
        cfg: TunnelConfig,
        underlay: Arc<dyn Port>,
        ifname: &str,
        mtu: u32,
    ) -> Result<TunnelPort, String> {
        cfg.check()?;
        let ifindex = crate::netdev::ifindex(ifname)
            .map_err(|e| format!("{}: interface {ifname} not found: {e}", cfg.kind.name()))?;
        let mac =
            MacAddr(sys::hwaddr(ifname).map_err(|e| {
                format!("{}: cannot read the MAC of {ifname}: {e}", cfg.kind.name())
            })?);
        let sock = sys::control_socket(ifindex)
            .map_err(|e| format!("{}: control socket on {ifname}: {e}", cfg.kind.name()))?;
        Self::open_parts(name, cfg, underlay, mac, mtu, Some(sock))
    }

    /// [`TunnelPort::open`] with the parts given: the outer source `mac`,
    /// and the socket ARP / ND frames are sent on (`None`: none are sent,
    /// neighbours must be static; used with in-process underlays).
    pub fn open_parts(
        name: &str,
        cfg: TunnelConfig,
        underlay: Arc<dyn Port>,
        mac: MacAddr,
        mtu: u32,
        sock: Option<OwnedFd>,
    ) -> Result<TunnelPort, String> {
        cfg.check()?;
        let v6 = cfg.local_ip.is_ipv6();
        let max_inner = (encap::max_inner_frame(mtu, v6) as usize)
            .min((underlay.info().max_frame_b as usize).saturating_sub(encap::overhead(v6)));
        if max_inner < 64 {
            return Err(format!(
                "{}: underlay MTU {mtu} leaves no room for inner frames",
                cfg.kind.name()
            ));
        }
        let info = underlay.info();
        let mut rxq = Vec::new();
        for q in 0..info.queues {
            let r = underlay
                .take_rx(q)
                .ok_or_else(|| format!("underlay receive queue {q} is already taken"))?;
            rxq.push(r);
        }
        let (tx_ctl, rx_ctl) = sync_channel(256);
        let decap = DecapCfg {
            kind: cfg.kind,
            vni: cfg.vni,
            local: cfg.local_ip,
            port: cfg.dst_port,
        };
        let shared = Arc::new(Shared {
            decap,
            mac,
            mtu,
            remotes: ArcSwap::from_pointee(Remotes::default()),
            generation: AtomicU64::new(0),
            fdb: Fdb::new(cfg.fdb_size, cfg.aging_s),
            seen: (0..MAX_REMOTES).map(|_| AtomicU32::new(0)).collect(),
            epoch: Instant::now(),
            c: Counters::default(),
            ctl: tx_ctl,
            stop: AtomicBool::new(false),
            cfg,
        });
        let mut control = Control::new(shared.clone(), sock);
        control.publish();
        let handle = std::thread::Builder::new()
            .name(format!("tun-{}", name.chars().take(11).collect::<String>()))
            .spawn(move || control.run(rx_ctl))
            .map_err(|e| format!("cannot start the tunnel control thread: {e}"))?;
        let staging = shared.cfg.staging.max(8) as usize;
        let tx = (0..info.queues)
            .map(|q| {
                let ring = Arc::new(sys::Staging::new(staging, max_inner, MAX_OUTER));
                TunnelTx {
                    lock: TxLock::new(TunnelProd {
                        ring: ring.clone(),
                        head: 0,
                        drained: 0,
                        underlay: underlay.clone(),
                        q,
                        shared: shared.clone(),
                    }),
                    ring,
                    underlay: underlay.clone(),
                    q,
                    max_inner,
                }
            })
            .collect();
        let rx = rxq
            .into_iter()
            .map(|r| {
                Some(TunnelRx {
                    under: r,
                    shared: shared.clone(),
                    cache: None,
                })
            })
            .collect();
        Ok(TunnelPort {
            name: name.to_string(),
            underlay,
            shared,
            tx,
            rx: Mutex::new(rx),
            ctl: Mutex::new(Some(handle)),
            max_inner,
        })
    }

    /// Endpoints as (address, resolved, learned) (control path).
    pub fn remotes(&self) -> Vec<(IpAddr, bool, bool)> {
        self.shared
            .remotes
            .load()
            .by_id
            .iter()
            .flatten()
            .map(|r| (r.ip, r.outer.is_some(), r.learned))
            .collect()
    }

    /// Learned MACs as (MAC, endpoint address, age s) (control path).
    pub fn macs(&self) -> Vec<(MacAddr, IpAddr, u32)> {
        let snap = self.shared.remotes.load();
        self.shared
            .fdb
            .entries(self.shared.now_s())
            .into_iter()
            .filter_map(|(m, id, age)| snap.get(id).map(|r| (MacAddr(m), r.ip, age)))
            .collect()
    }
}

impl Drop for TunnelPort {
    fn drop(&mut self) {
        self.shared.stop.store(true, Relaxed);
        let h = self.ctl.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

impl Port for TunnelPort {
    fn info(&self) -> PortInfo {
        PortInfo {
            name: self.name.clone(),
            kind: self.shared.cfg.kind.name(),
            queues: self.tx.len() as u16,
            max_frame_b: self.max_inner as u32,
        }
    }

    fn take_rx(&self, q: QueueId) -> Option<Box<dyn RxQueue>> {
        let mut rx = self.rx.lock().unwrap_or_else(|e| e.into_inner());
        rx.get_mut(q as usize)?
            .take()
            .map(|r| Box::new(r) as Box<dyn RxQueue>)
    }

    fn tx(&self, q: QueueId) -> &dyn TxQueue {
        &self.tx[q as usize]
    }

    fn link_up(&self) -> bool {
        self.underlay.link_up()
    }

    fn backend_counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.shared.c;
        let mut out = Vec::new();
        out.push(("rx_decapsulated", c.rx_decap.load(Relaxed)));
        for r in RxDrop::ALL {
            out.push((r.name(), c.rx_drop[r as usize].load(Relaxed)));
        }
        let snap = self.shared.remotes.load();
        let n = snap.by_id.iter().flatten().count() as u64;
        let resolved = snap
            .by_id
            .iter()
            .flatten()
            .filter(|r| r.outer.is_some())
            .count() as u64;
        out.extend([
            ("rx_control", c.rx_control.load(Relaxed)),
            ("rx_control_lost", c.rx_control_lost.load(Relaxed)),
            ("rx_unknown_remote", c.rx_unknown_remote.load(Relaxed)),
            ("tx_encapsulated", c.tx_encap.load(Relaxed)),
            ("tx_flooded", c.tx_flooded.load(Relaxed)),
            ("tx_flood_copies", c.tx_flood_copies.load(Relaxed)),
            ("tx_drop_no_remote", c.tx_no_remote.load(Relaxed)),
            ("tx_drop_no_neighbour", c.tx_no_neighbour.load(Relaxed)),
            ("tx_drop_too_big", c.tx_too_big.load(Relaxed)),
            ("tx_drop_underlay_full", c.tx_underlay_full.load(Relaxed)),
            ("arp_nd_sent", c.arp_nd_sent.load(Relaxed)),
            ("arp_nd_replies", c.arp_nd_replies.load(Relaxed)),
            ("remotes", n),
            ("remotes_resolved", resolved),
            ("remotes_learned", c.remotes_learned.load(Relaxed)),
            ("remotes_aged", c.remotes_aged.load(Relaxed)),
            (
                "macs",
                self.shared.fdb.entries(self.shared.now_s()).len() as u64,
            ),
            ("underlay_mtu", self.shared.mtu as u64),
        ]);
        for (k, v) in self.underlay.backend_counters() {
            if k.starts_with("link_")
                || k.starts_with("kernel_")
                || k.starts_with("tx_k")
                || k == "rx_csum_not_ready"
            {
                out.push((k, v));
            }
        }
        out
    }
}

/// Receive side: the underlay's queue, decapsulated in place.
struct TunnelRx {
    under: Box<dyn RxQueue>,
    shared: Arc<Shared>,
    /// Last source endpoint: (address, id, snapshot generation).
    cache: Option<(IpAddr, u16, u64)>,
}

impl RxQueue for TunnelRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        let start = batch.len();
        let got = self.under.burst(batch);
        if got == 0 {
            return 0;
        }
        let sh = &*self.shared;
        let now = sh.now_s();
        let generation = sh.generation.load(Acquire);
        if self.cache.is_some_and(|c| c.2 != generation) {
            self.cache = None;
        }
        let mut snap: Option<arc_swap::Guard<Arc<Remotes>>> = None;
        let mut keep_from = usize::MAX;
        let mut drops = [0u64; RxDrop::COUNT];
        let (mut ok, mut ctl) = (0u64, 0u64);
        for (i, mut p) in batch.appended_mut(start).iter_mut().enumerate() {
            match decap::decap(&sh.decap, p.data()) {
                Ok(Rx::Frame { off, len, src }) => {
                    p.narrow(off, len);
                    ok += 1;
                    if sh.cfg.learning {
                        let id = match self.cache {
                            Some((ip, id, _)) if ip == src => Some(id),
                            _ => {
                                let s = snap.get_or_insert_with(|| sh.remotes.load());
                                let id = s.by_ip.get(&src).copied();
                                match id {
                                    Some(id) => self.cache = Some((src, id, generation)),
                                    None => {
                                        sh.c.rx_unknown_remote.fetch_add(1, Relaxed);
                                        let _ = sh.ctl.try_send(Ctl::Seen(src));
                                    }
                                }
                                id
                            }
                        };
                        if let Some(id) = id {
                            let d = p.data();
                            sh.fdb.learn(&d[6..12], id, now);
                            let s = &sh.seen[id as usize % MAX_REMOTES];
                            if s.load(Relaxed) != now {
                                s.store(now, Relaxed);
                            }
                        }
                    }
                }
                Ok(Rx::Control) => {
                    ctl += 1;
                    let d = p.data();
                    let n = d.len().min(CTL_FRAME);
                    let mut b = [0u8; CTL_FRAME];
                    b[..n].copy_from_slice(&d[..n]);
                    if let Err(TrySendError::Full(_)) = sh.ctl.try_send(Ctl::Frame(b, n as u16)) {
                        sh.c.rx_control_lost.fetch_add(1, Relaxed);
                    }
                    p.narrow(0, 0);
                    keep_from = keep_from.min(i);
                }
                Err(r) => {
                    drops[r as usize] += 1;
                    p.narrow(0, 0);
                    keep_from = keep_from.min(i);
                }
            }
        }
        if keep_from != usize::MAX {
            let mut i = 0usize;
            batch.retain_from(start, |p| {
                let k = i < keep_from || !p.is_empty();
                i += 1;
                k
            });
        }
        if ok > 0 {
            sh.c.rx_decap.fetch_add(ok, Relaxed);
        }
        if ctl > 0 {
            sh.c.rx_control.fetch_add(ctl, Relaxed);
        }
        for (i, d) in drops.iter().enumerate() {
            if *d != 0 {
                sh.c.rx_drop[i].fetch_add(*d, Relaxed);
            }
        }
        let n = batch.len() - start;
        if n == 0 {
            // Nothing of this burst stays in the batch, and a worker does
            // not release after an empty burst: give the buffers back now,
            // or a backend that re-offers unreleased frames (AF_XDP) would
            // hand us the same ones again.
            self.under.release();
        }
        n
    }

    fn release(&mut self) {
        self.under.release();
    }

    fn notify_fd(&self) -> Option<RawFd> {
        self.under.notify_fd()
    }

    fn set_notify(&mut self, enabled: bool) -> bool {
        self.under.set_notify(enabled)
    }

    fn ack_notify(&mut self) {
        self.under.ack_notify()
    }
}

/// Transmit side: staging ring drained into the underlay on publish.
struct TunnelTx {
    ring: Arc<sys::Staging>,
    lock: TxLock<TunnelProd>,
    underlay: Arc<dyn Port>,
    q: QueueId,
    max_inner: usize,
}

/// The producer state of a tunnel transmit queue (inside its lock): the
/// staging ring's cursors and what draining into the underlay needs.
struct TunnelProd {
    ring: Arc<sys::Staging>,
    /// Next slot to reserve.
    head: u64,
    /// Slots before this one were drained into the underlay (free again).
    drained: u64,
    underlay: Arc<dyn Port>,
    q: QueueId,
    shared: Arc<Shared>,
}

impl TxQueue for TunnelTx {
    fn slots_for(&self, len: usize) -> u32 {
        (len >= encap::ETH && len <= self.max_inner) as u32
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        let first = lease.first;
        for (j, (frame, _)) in frames.iter().enumerate() {
            // SAFETY: forwarded contract (one slot per frame): the slot is
            // reserved to us and unpublished.
            unsafe { self.ring.write(first + j as u64, frame) };
        }
    }

    fn kick(&self, drops: &mut TxDrops) {
        // The underlay queue belongs to this tunnel queue alone; its kick
        // runs without any lock by the TxQueue contract.
        self.underlay.tx(self.q).kick(drops);
    }
}

impl TxProducer for TunnelProd {
    fn free_slots(&mut self) -> u32 {
        (self.ring.slots() - (self.head - self.drained)) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.head;
        self.head += n as u64;
        Lease::at(first)
    }

    fn publish_deferred(&mut self, tail: u64, drops: &mut TxDrops) -> bool {
        let sh = &*self.shared;
        let utx = self.underlay.tx(self.q);
        // SAFETY: the underlay's queue `q` is used by nobody but this tunnel
        // queue (the underlay is not a switch port; one tunnel queue per
        // underlay queue), and only here, under this tunnel queue's lock:
        // the wrapper is its only sender. The underlay's own notification
        // (a system call) is deferred to `kick`, after the lock.
        let mut utx = unsafe { OwnedTx::new(utx) };
        // Without `kick_stalled` (a system call, and we hold our lock): a
        // full underlay asks for our kick instead (below).
        let mut ufree = utx.free_slots_quiet();
        let stalled = ufree == 0;
        let mut utail: Option<u64> = None;
        let snap = sh.remotes.load();
        let now = sh.now_s();
        let (mut sent, mut flooded, mut copies) = (0u64, 0u64, 0u64);
        let (mut no_remote, mut no_neigh, mut too_big, mut full) = (0u64, 0u64, 0u64, 0u64);
        let h = MAX_OUTER;
        while self.drained < tail {
            // SAFETY: we hold the lock (`&mut self`); every slot before
            // `tail` was published (its writer finished) and not drained;
            // `buf` is dropped at the end of this iteration, and nothing can
            // reserve the slot again before we return.
            let (buf, len) = unsafe { self.ring.slot(self.drained) };
            self.drained += 1;
            let inner = &buf[h..h + len];
            let sport = encap::flow_sport(inner);
            let known = if inner[0] & 1 == 0 && sh.cfg.learning {
                sh.fdb
                    .lookup(&inner[0..6], now)
                    .filter(|id| snap.get(*id).is_some())
            } else {
                None
            };
            // Encapsulates for endpoint `id` into the underlay; Ok if sent,
            // else why not.
            let mut one = |id: u16, buf: &mut [u8]| -> Result<(), DropReason> {
                let Some(o) = snap.get(id).and_then(|r| r.outer.as_ref()) else {
                    no_neigh += 1;
                    return Err(DropReason::NoDestination);
                };
                let start = h - o.len();
                let n = match o.write(&mut buf[start..], len, sport) {
                    Ok(n) => n,
                    Err(_) => {
                        too_big += 1;
                        return Err(DropReason::Oversize);
                    }
                };
                let need = utx.slots_for(n);
                if need == 0 {
                    too_big += 1;
                    return Err(DropReason::Oversize);
                }
                if need > ufree {
                    full += 1;
                    return Err(DropReason::TxFull);
                }
                let s = utx.reserve(need);
                utx.write(s, need, &buf[start..start + n]);
                ufree -= need;
                utail = Some(s + need as u64);
                Ok(())
            };
            match known {
                Some(id) => match one(id, buf) {
                    Ok(()) => sent += 1,
                    Err(r) => drops.add(r, len),
                },
                None => {
                    flooded += 1;
                    // The frame is delivered if any copy went out; else it
                    // is dropped once, under the last copy's reason.
                    let mut why = DropReason::NoDestination;
                    let mut any = false;
                    if snap.flood.is_empty() {
                        no_remote += 1;
                    }
                    for &id in &snap.flood {
                        match one(id, buf) {
                            Ok(()) => {
                                copies += 1;
                                any = true;
                            }
                            Err(r) => why = r,
                        }
                    }
                    if !any {
                        drops.add(why, len);
                    }
                }
            }
        }
        let kick = match utail {
            Some(t) => utx.publish_deferred(t, drops),
            None => false,
        };
        sent += copies;
        let c = &sh.c;
        for (ctr, v) in [
            (&c.tx_encap, sent),
            (&c.tx_flooded, flooded),
            (&c.tx_flood_copies, copies),
            (&c.tx_no_remote, no_remote),
            (&c.tx_no_neighbour, no_neigh),
            (&c.tx_too_big, too_big),
            (&c.tx_underlay_full, full),
        ] {
            if v != 0 {
                ctr.fetch_add(v, Relaxed);
            }
        }
        // A full underlay is kicked too: its last kick may have failed and
        // nothing else would retry it.
        kick || stalled
    }
}

/// The control thread's state.
struct Control {
    sh: Arc<Shared>,
    sock: Option<OwnedFd>,
    /// Endpoint id → (address, static, last activity for learned ones).
    remotes: Vec<Option<(IpAddr, bool)>>,
    /// Resolved underlay neighbours (dynamic) and when last heard.
    neigh: HashMap<IpAddr, (MacAddr, Instant)>,
    statics: HashMap<IpAddr, MacAddr>,
    asked: HashMap<IpAddr, Instant>,
    next_id: usize,
    dirty: bool,
}

impl Control {
    fn new(sh: Arc<Shared>, sock: Option<OwnedFd>) -> Control {
        let mut remotes = vec![None; MAX_REMOTES];
        let mut seen = std::collections::HashSet::new();
        let mut n = 0;
        for ip in &sh.cfg.remotes {
            if seen.insert(*ip) {
                remotes[n] = Some((*ip, true));
                n += 1;
            }
        }
        let statics = sh.cfg.neighbours.iter().copied().collect();
        Control {
            sh,
            sock,
            remotes,
            neigh: HashMap::new(),
            statics,
            asked: HashMap::new(),
            next_id: n,
            dirty: true,
        }
    }

    fn next_hop(&self, ip: IpAddr) -> IpAddr {
        self.sh.cfg.next_hop.unwrap_or(ip)
    }

    fn mac_of(&self, ip: IpAddr) -> Option<MacAddr> {
        self.statics
            .get(&ip)
            .copied()
            .or_else(|| self.neigh.get(&ip).map(|n| n.0))
    }

    /// Builds and swaps in a new endpoint snapshot.
    fn publish(&mut self) {
        let cfg = &self.sh.cfg;
        let mut snap = Remotes::default();
        for (id, r) in self.remotes.iter().enumerate() {
            let Some((ip, is_static)) = *r else {
                snap.by_id.push(None);
                continue;
            };
            let outer = self.mac_of(self.next_hop(ip)).and_then(|dst_mac| {
                Outer::new(&OuterSpec {
                    kind: cfg.kind,
                    vni: cfg.vni,
                    src_mac: self.sh.mac,
                    dst_mac,
                    src_ip: cfg.local_ip,
                    dst_ip: ip,
                    dst_port: cfg.dst_port,
                    mtu: self.sh.mtu,
                    ttl: cfg.ttl,
                })
            });
            snap.by_ip.insert(ip, id as u16);
            snap.flood.push(id as u16);
            snap.by_id.push(Some(Remote {
                ip,
                outer,
                learned: !is_static,
            }));
        }
        while matches!(snap.by_id.last(), Some(None)) {
            snap.by_id.pop();
        }
        self.sh.remotes.store(Arc::new(snap));
        self.sh.generation.fetch_add(1, Release);
        self.dirty = false;
    }

    fn send(&self, f: &[u8]) {
        if let Some(Ok(())) = self.sock.as_ref().map(|s| sys::send(s, f)) {
            self.sh.c.arp_nd_sent.fetch_add(1, Relaxed);
        }
    }

    fn handle(&mut self, m: Ctl) {
        match m {
            Ctl::Frame(b, n) => {
                let h = neigh::hear(self.sh.mac, self.sh.cfg.local_ip, &b[..n as usize]);
                if let Some(r) = &h.reply {
                    self.send(r);
                    self.sh.c.arp_nd_replies.fetch_add(1, Relaxed);
                }
                if let Some((ip, mac)) = h.binding {
                    // Keep bindings only for addresses that are (or may
                    // become) next hops: our endpoints or the gateway.
                    // Others (hosts that may become endpoints) only while
                    // learning, and at most MAX_NEIGHBOURS of them.
                    let wanted = Some(ip) == self.sh.cfg.next_hop
                        || self.remotes.iter().flatten().any(|r| r.0 == ip)
                        || (self.sh.cfg.learning
                            && (self.neigh.len() < MAX_NEIGHBOURS || self.neigh.contains_key(&ip)));
                    if wanted && !self.statics.contains_key(&ip) {
                        let old = self.neigh.insert(ip, (mac, Instant::now()));
                        if old.map(|o| o.0) != Some(mac) {
                            self.dirty = true;
                        }
                    }
                }
            }
            Ctl::Seen(ip) => {
                if !self.sh.cfg.learning
                    || ip.is_ipv6() != self.sh.cfg.local_ip.is_ipv6()
                    || self.remotes.iter().flatten().any(|r| r.0 == ip)
                {
                    return;
                }
                // Lowest free id at or after next_id (wrapping), so a freed
                // id is not reused at once.
                for k in 0..MAX_REMOTES {
                    let id = (self.next_id + k) % MAX_REMOTES;
                    if self.remotes[id].is_none() {
                        self.remotes[id] = Some((ip, false));
                        self.sh.seen[id].store(self.sh.now_s(), Relaxed);
                        self.next_id = id + 1;
                        self.sh.c.remotes_learned.fetch_add(1, Relaxed);
                        self.dirty = true;
                        return;
                    }
                }
            }
        }
    }

    fn periodic(&mut self) {
        let now_s = self.sh.now_s();
        let aging = self.sh.cfg.aging_s;
        if aging != 0 {
            for id in 0..MAX_REMOTES {
                if let Some((_, false)) = self.remotes[id] {
                    if now_s.saturating_sub(self.sh.seen[id].load(Relaxed)) >= aging {
                        self.remotes[id] = None;
                        self.sh.fdb.forget_remote(id as u16);
                        self.sh.c.remotes_aged.fetch_add(1, Relaxed);
                        self.dirty = true;
                    }
                }
            }
        }
        // Resolve next hops we have no MAC for, once a second each.
        let mut want: Vec<IpAddr> = self
            .remotes
            .iter()
            .flatten()
            .map(|r| self.next_hop(r.0))
            .filter(|ip| self.mac_of(*ip).is_none())
            .collect();
        want.sort();
        want.dedup();
        for ip in want {
            let due = self
                .asked
                .get(&ip)
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1));
            if due {
                if let Some(f) = neigh::request(self.sh.mac, self.sh.cfg.local_ip, ip) {
                    self.send(&f);
                }
                self.asked.insert(ip, Instant::now());
            }
        }
    }

    fn run(&mut self, rx: Receiver<Ctl>) {
        let mut last = Instant::now() - Duration::from_secs(2);
        while !self.sh.stop.load(Relaxed) {
            match rx.recv_timeout(Duration::from_millis(100)) {
                Ok(m) => {
                    self.handle(m);
                    while let Ok(m) = rx.try_recv() {
                        self.handle(m);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            if last.elapsed() >= Duration::from_millis(500) {
                self.periodic();
                last = Instant::now();
            }
            if self.dirty {
                self.publish();
            }
        }
    }
}

#[cfg(test)]
mod tests;
