//! The control path: the vhost-user protocol (framing by the `vhost`
//! crate's `BackendReqHandler`, semantics here) and the per-port control
//! thread that accepts or connects, serves one frontend at a time, and
//! tears everything down when it hangs up or lies.
//!
//! A virtqueue runs (has a [`Session`] in its slot) when the memory table,
//! its size, addresses and kick eventfd are set and it is enabled
//! (`SET_VRING_ENABLE`, or implicitly when `VHOST_USER_F_PROTOCOL_FEATURES`
//! was not negotiated). Any change to a running virtqueue stops it first:
//! the slot is emptied, then we wait until no worker holds the old session
//! (workers hold it for one burst or one transmit call), and read its
//! cursor back as the ring's base. That is also what `GET_VRING_BASE`
//! answers.

use std::any::Any;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::Ordering::*;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use vhost::vhost_user::message::{
    VhostTransferStateDirection, VhostTransferStatePhase, VhostUserConfigFlags, VhostUserInflight,
    VhostUserLog, VhostUserMemoryRegion, VhostUserProtocolFeatures, VhostUserShMemConfig,
    VhostUserSharedMsg, VhostUserSingleMemoryRegion, VhostUserVringAddrFlags, VhostUserVringState,
};
use vhost::vhost_user::GpuBackend;
use vhost::vhost_user::{
    BackendReqHandler, Error as VuError, Result as VuResult, VhostUserBackendReqHandlerMut,
};
use vhost::VhostUserMemoryRegionBase;

use super::sys::{self, GuestMemory, RegionSpec, Ring};
use super::vring::{Layout, Session, USED_F_NO_NOTIFY};
use super::{Mode, Shared};

/// `VIRTIO_NET_F_MRG_RXBUF`.
pub const F_MRG_RXBUF: u64 = 1 << 15;
/// `VIRTIO_NET_F_MQ`.
pub const F_MQ: u64 = 1 << 22;
/// `VIRTIO_RING_F_EVENT_IDX`.
pub const F_EVENT_IDX: u64 = 1 << 29;
/// `VHOST_USER_F_PROTOCOL_FEATURES`.
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
/// `VIRTIO_F_VERSION_1`.
pub const F_VERSION_1: u64 = 1 << 32;
/// `VIRTIO_NET_F_GUEST_ANNOUNCE`? Not offered. `VIRTIO_F_RING_PACKED`:
/// not offered (split virtqueues only).
pub const F_RING_PACKED: u64 = 1 << 34;

/// How long a stop waits for workers to let go of a session.
const QUIESCE: Duration = Duration::from_secs(1);

/// How long a message may take to arrive whole once its first byte is
/// there, and how long a frontend may leave our reply unread (its socket
/// full): past it, the frontend is disconnected as stalled.
pub const READ_DEADLINE: Duration = Duration::from_secs(2);

#[derive(Default, Debug)]
struct VringCfg {
    num: u16,
    /// (desc, used, avail) frontend-virtual addresses.
    addr: Option<(u64, u64, u64)>,
    base: u16,
    kick: Option<Arc<File>>,
    call: Option<Arc<File>>,
    enabled: bool,
    started: bool,
}

/// The device state of one connection.
pub struct Device {
    shared: Arc<Shared>,
    /// Set by the SIGBUS guard when any memory this connection mapped
    /// faulted (the current table, or one being replaced).
    mem_fault: Arc<std::sync::atomic::AtomicBool>,
    features: u64,
    protocol: u64,
    mem: Option<Arc<GuestMemory>>,
    vrings: Vec<VringCfg>,
}

impl Device {
    /// A fresh device for a new connection.
    pub fn new(shared: Arc<Shared>) -> Self {
        let n = shared.slots.len();
        Self {
            shared,
            mem_fault: Arc::default(),
            features: 0,
            protocol: 0,
            mem: None,
            vrings: (0..n).map(|_| VringCfg::default()).collect(),
        }
    }

    /// Features offered to the frontend.
    pub fn offered(&self) -> u64 {
        let c = &self.shared.cfg;
        let mut f = F_VERSION_1 | F_PROTOCOL_FEATURES;
        if c.mrg_rxbuf {
            f |= F_MRG_RXBUF;
        }
        if c.event_idx {
            f |= F_EVENT_IDX;
        }
        if c.queues > 1 {
            f |= F_MQ;
        }
        f
    }

    fn layout(&self) -> Layout {
        let mrg = self.features & F_MRG_RXBUF != 0;
        Layout {
            hdr_len: if mrg || self.features & F_VERSION_1 != 0 {
                12
            } else {
                10
            },
            mrg_rxbuf: mrg,
            event_idx: self.features & F_EVENT_IDX != 0,
        }
    }

    fn check_index(&self, index: u32) -> VuResult<usize> {
        let i = index as usize;
        if i < self.vrings.len() {
            Ok(i)
        } else {
            Err(VuError::InvalidParam)
        }
    }

    fn live(&self, i: usize) -> bool {
        let v = &self.vrings[i];
        let enabled = v.enabled || self.features & F_PROTOCOL_FEATURES == 0;
        self.mem.is_some()
            && v.started
            && enabled
            && v.num != 0
            && v.addr.is_some()
            && v.kick.is_some()
    }

    /// Stops virtqueue `i` if it runs, and records its cursor as the base.
    fn stop(&mut self, i: usize) {
        let slot = &self.shared.slots[i];
        let Some(old) = slot.remove() else { return };
        if i.is_multiple_of(2) {
            self.count_tx_up();
        }
        if let Some(k) = &old.kick {
            slot.epoll.remove(k.as_raw_fd());
        }
        let deadline = Instant::now() + QUIESCE;
        while Arc::strong_count(&old) > 1 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
        self.vrings[i].base = if i % 2 == 1 {
            old.cur.last_avail.load(Acquire)
        } else {
            old.cur.used_shadow.load(Acquire)
        };
        // Past the quiesce a worker may still hold the session (a
        // preempted burst or lease): its drop, possibly under a transmit
        // lock, must not be the last one (unmap, close), so this thread
        // keeps a reference until it is.
        self.shared.retired.retire(old);
    }

    /// Starts virtqueue `i` if everything it needs is set.
    fn start(&mut self, i: usize) -> VuResult<()> {
        if !self.live(i) {
            return Ok(());
        }
        let v = &self.vrings[i];
        let (desc, used, avail) = v.addr.ok_or(VuError::InvalidParam)?;
        let mem = self.mem.clone().ok_or(VuError::InvalidParam)?;
        let ring = match Ring::new(mem, desc, avail, used, v.num) {
            Ok(r) => r,
            Err(_) => {
                self.shared.protocol_errors.fetch_add(1, Relaxed);
                return Err(VuError::InvalidParam);
            }
        };
        let layout = self.layout();
        let s = Session::new(
            ring,
            layout,
            v.call.clone(),
            v.kick.clone(),
            v.base,
            self.shared.fault.clone(),
        );
        let slot = &self.shared.slots[i];
        if i.is_multiple_of(2) {
            // The guest's receive queue: we never need its kicks.
            if !layout.event_idx {
                s.ring.set_used_flags(USED_F_NO_NOTIFY);
            }
            self.shared.tx[i / 2].set_layout(layout);
        } else if let Some(k) = &s.kick {
            let _ = slot.epoll.add(k.as_raw_fd(), 1);
        }
        slot.install(Arc::new(s));
        slot.wake.notify();
        if i.is_multiple_of(2) {
            self.count_tx_up();
        }
        Ok(())
    }

    /// Publishes how many transmit queues from 0 on run (the guest's
    /// receive virtqueues `0, 2, ..` with a session), for the fabric's
    /// queue choice ([`fabric::Port::tx_queues_up`]): a guest that enabled
    /// fewer queue pairs than the port has gets frames on those only.
    /// Queue pairs past a gap are not counted (Linux and DPDK enable a
    /// prefix).
    fn count_tx_up(&self) {
        let n = self
            .shared
            .slots
            .iter()
            .step_by(2)
            .take_while(|s| s.session.load().is_some())
            .count();
        self.shared.tx_up.store(n as u16, Relaxed);
    }

    fn restart(&mut self, i: usize) -> VuResult<()> {
        self.stop(i);
        self.start(i)
    }

    fn restart_all(&mut self) -> VuResult<()> {
        let mut r = Ok(());
        for i in 0..self.vrings.len() {
            if let Err(e) = self.restart(i) {
                r = Err(e);
            }
        }
        r
    }

    /// Stops every virtqueue and unmaps the memory (disconnect).
    pub fn teardown(&mut self) {
        for i in 0..self.vrings.len() {
            self.stop(i);
        }
        self.mem = None;
        self.vrings
            .iter_mut()
            .for_each(|v| *v = VringCfg::default());
    }

    /// Whether the guest's receive queue 0 runs (the port's link state).
    pub fn any_live(&self) -> bool {
        self.shared.slots.iter().any(|s| s.session.load().is_some())
    }

    /// Whether the guest memory faulted (the frontend shrank a file
    /// under us: it reads zeroes now).
    pub fn mem_faulted(&self) -> bool {
        self.mem_fault.load(Acquire)
    }

    /// A kick or call eventfd the frontend made blocking again after
    /// handing it over (it shares the file description and its
    /// `O_NONBLOCK`): which one, if any.
    pub fn blocking_notify_fd(&self) -> Option<String> {
        for (i, v) in self.vrings.iter().enumerate() {
            for (what, fd) in [("call", &v.call), ("kick", &v.kick)] {
                if let Some(f) = fd {
                    if !crate::guard::is_nonblocking(f.as_raw_fd()) {
                        return Some(format!("the {what} eventfd of virtqueue {i}"));
                    }
                }
            }
        }
        None
    }

    /// Checks a notification descriptor the frontend passed (an eventfd,
    /// made non-blocking here); refuses anything else with the reason.
    fn adopt(&self, what: &str, index: usize, fd: &File) -> VuResult<()> {
        crate::guard::adopt_eventfd(fd.as_raw_fd()).map_err(|why| {
            self.shared.protocol_errors.fetch_add(1, Relaxed);
            eprintln!(
                "vhost-user port {}: {what} fd of virtqueue {index} refused: {why}",
                self.shared.name
            );
            VuError::InvalidParam
        })
    }
}

fn unsupported<T>() -> VuResult<T> {
    Err(VuError::InvalidOperation("not supported by turnoutd"))
}

impl VhostUserBackendReqHandlerMut for Device {
    fn set_owner(&mut self) -> VuResult<()> {
        Ok(())
    }

    fn reset_owner(&mut self) -> VuResult<()> {
        self.teardown();
        Ok(())
    }

    fn reset_device(&mut self) -> VuResult<()> {
        self.teardown();
        self.features = 0;
        Ok(())
    }

    fn get_features(&mut self) -> VuResult<u64> {
        Ok(self.offered())
    }

    fn set_features(&mut self, features: u64) -> VuResult<()> {
        if features & !self.offered() != 0 {
            self.shared.protocol_errors.fetch_add(1, Relaxed);
            return Err(VuError::InvalidParam);
        }
        self.features = features;
        self.restart_all()
    }

    fn set_mem_table(
        &mut self,
        ctx: &[VhostUserMemoryRegion],
        files: Vec<File>,
        _postcopy: Option<bool>,
    ) -> VuResult<Option<Vec<VhostUserMemoryRegionBase>>> {
        if ctx.len() != files.len() {
            return Err(VuError::InvalidParam);
        }
        let specs = ctx
            .iter()
            .zip(files)
            .map(|(r, file)| RegionSpec {
                gpa: r.guest_phys_addr,
                size: r.memory_size,
                uva: r.user_addr,
                offset: r.mmap_offset,
                file,
            })
            .collect();
        // Stop every ring before the old memory may go away.
        for i in 0..self.vrings.len() {
            self.stop(i);
        }
        // The SIGBUS guard wakes this port's control thread when the
        // frontend shrinks a region under us.
        let wake = &self.shared.fault.wake;
        let keep = wake.clone() as Arc<dyn Any + Send + Sync>;
        let flag = Some(self.mem_fault.clone());
        match GuestMemory::map_guarded(specs, flag, Some((wake.fd(), keep))) {
            Ok(m) => self.mem = Some(Arc::new(m)),
            Err(e) => {
                eprintln!(
                    "vhost-user port {}: memory table refused: {e}",
                    self.shared.name
                );
                self.shared.protocol_errors.fetch_add(1, Relaxed);
                self.mem = None;
                return Err(VuError::InvalidParam);
            }
        }
        for i in 0..self.vrings.len() {
            self.start(i)?;
        }
        Ok(None)
    }

    fn set_vring_num(&mut self, index: u32, num: u32) -> VuResult<()> {
        let i = self.check_index(index)?;
        if num == 0 || num > 32768 || !num.is_power_of_two() {
            self.shared.protocol_errors.fetch_add(1, Relaxed);
            return Err(VuError::InvalidParam);
        }
        self.stop(i);
        self.vrings[i].num = num as u16;
        self.start(i)
    }

    fn set_vring_addr(
        &mut self,
        index: u32,
        _flags: VhostUserVringAddrFlags,
        descriptor: u64,
        used: u64,
        available: u64,
        _log: u64,
    ) -> VuResult<()> {
        let i = self.check_index(index)?;
        self.stop(i);
        self.vrings[i].addr = Some((descriptor, used, available));
        self.start(i)
    }

    fn set_vring_base(&mut self, index: u32, base: u32) -> VuResult<()> {
        let i = self.check_index(index)?;
        self.stop(i);
        self.vrings[i].base = base as u16;
        self.start(i)
    }

    fn get_vring_base(&mut self, index: u32) -> VuResult<VhostUserVringState> {
        let i = self.check_index(index)?;
        self.stop(i);
        self.vrings[i].started = false;
        self.vrings[i].kick = None;
        Ok(VhostUserVringState::new(index, self.vrings[i].base as u32))
    }

    fn set_vring_kick(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let i = self.check_index(index as u32)?;
        let Some(fd) = fd else {
            // Polling-mode frontends (no kick eventfd) are not supported:
            // the worker's wake-up model needs the eventfd.
            self.shared.protocol_errors.fetch_add(1, Relaxed);
            return Err(VuError::InvalidParam);
        };
        self.adopt("kick", i, &fd)?;
        self.stop(i);
        self.vrings[i].kick = Some(Arc::new(fd));
        self.vrings[i].started = true;
        self.start(i)
    }

    fn set_vring_call(&mut self, index: u8, fd: Option<File>) -> VuResult<()> {
        let i = self.check_index(index as u32)?;
        // A pipe or socket here would block the worker writing to it (a
        // full pipe froze every port of the worker): eventfds only, made
        // non-blocking; an interrupt that still cannot be written is
        // dropped and counted (`call_dropped`).
        if let Some(f) = &fd {
            self.adopt("call", i, f)?;
        }
        self.stop(i);
        self.vrings[i].call = fd.map(Arc::new);
        self.start(i)
    }

    fn set_vring_err(&mut self, index: u8, _fd: Option<File>) -> VuResult<()> {
        self.check_index(index as u32).map(|_| ())
    }

    fn get_protocol_features(&mut self) -> VuResult<VhostUserProtocolFeatures> {
        Ok(VhostUserProtocolFeatures::MQ)
    }

    fn set_protocol_features(&mut self, features: u64) -> VuResult<()> {
        let ok = (VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::REPLY_ACK).bits();
        if features & !ok != 0 {
            self.shared.protocol_errors.fetch_add(1, Relaxed);
            return Err(VuError::InvalidParam);
        }
        self.protocol = features;
        Ok(())
    }

    fn get_queue_num(&mut self) -> VuResult<u64> {
        Ok(self.shared.cfg.queues as u64)
    }

    fn set_vring_enable(&mut self, index: u32, enable: bool) -> VuResult<()> {
        let i = self.check_index(index)?;
        self.stop(i);
        self.vrings[i].enabled = enable;
        self.start(i)
    }

    fn get_config(
        &mut self,
        _offset: u32,
        _size: u32,
        _flags: VhostUserConfigFlags,
    ) -> VuResult<Vec<u8>> {
        unsupported()
    }

    fn set_config(
        &mut self,
        _offset: u32,
        _buf: &[u8],
        _flags: VhostUserConfigFlags,
    ) -> VuResult<()> {
        unsupported()
    }

    fn set_gpu_socket(&mut self, _gpu_backend: GpuBackend) -> VuResult<()> {
        unsupported()
    }

    fn get_shared_object(&mut self, _uuid: VhostUserSharedMsg) -> VuResult<File> {
        unsupported()
    }

    fn get_inflight_fd(
        &mut self,
        _inflight: &VhostUserInflight,
    ) -> VuResult<(VhostUserInflight, File)> {
        unsupported()
    }

    fn set_inflight_fd(&mut self, _inflight: &VhostUserInflight, _file: File) -> VuResult<()> {
        unsupported()
    }

    fn get_max_mem_slots(&mut self) -> VuResult<u64> {
        unsupported()
    }

    fn add_mem_region(
        &mut self,
        _region: &VhostUserSingleMemoryRegion,
        _fd: File,
        _postcopy: Option<bool>,
    ) -> VuResult<Option<VhostUserMemoryRegionBase>> {
        unsupported()
    }

    fn remove_mem_region(&mut self, _region: &VhostUserSingleMemoryRegion) -> VuResult<()> {
        unsupported()
    }

    fn set_device_state_fd(
        &mut self,
        _direction: VhostTransferStateDirection,
        _phase: VhostTransferStatePhase,
        _fd: File,
    ) -> VuResult<Option<File>> {
        unsupported()
    }

    fn check_device_state(&mut self) -> VuResult<()> {
        unsupported()
    }

    fn get_shmem_config(&mut self) -> VuResult<VhostUserShMemConfig> {
        unsupported()
    }

    fn set_log_base(&mut self, _log: &VhostUserLog, _file: File) -> VuResult<()> {
        unsupported()
    }
}

/// How a connection ended.
pub(super) enum End {
    Stop,
    HangUp,
    Lie,
    Protocol,
    /// A message stopped arriving midway, or our reply stayed unread,
    /// for [`READ_DEADLINE`].
    Stall,
    /// The guest memory faulted (a region's file shrunk under us).
    MemFault,
    /// The frontend made a notification eventfd blocking again.
    NotifyFd,
}

/// The control thread of one port: accept or connect, serve, tear down,
/// again, until the port is dropped.
pub fn run(shared: Arc<Shared>, listener: Option<UnixListener>) {
    let mut backoff = Duration::from_millis(20);
    while !shared.stop.load(Acquire) {
        // Between connections too (a session retired at the last teardown).
        shared.retired.sweep();
        let stream = match &listener {
            Some(l) => match accept(&shared, l) {
                Some(s) => s,
                None => continue,
            },
            None => match sys::connect_unix(&shared.cfg.socket) {
                Ok(s) => {
                    backoff = Duration::from_millis(20);
                    s
                }
                Err(_) => {
                    sleep_unless_stopped(&shared, backoff);
                    backoff = (backoff * 2).min(Duration::from_millis(500));
                    continue;
                }
            },
        };
        serve(&shared, stream, listener.as_ref());
    }
}

/// Counts how a connection ended.
fn count_end(shared: &Shared, end: &End) {
    match end {
        End::Stop => {}
        End::HangUp => {
            shared.disconnects_hangup.fetch_add(1, Relaxed);
        }
        End::Lie => {
            shared.disconnects_lie.fetch_add(1, Relaxed);
        }
        End::Protocol => {
            shared.disconnects_protocol.fetch_add(1, Relaxed);
        }
        End::Stall => {
            shared.disconnects_stall.fetch_add(1, Relaxed);
        }
        End::MemFault => {
            shared.disconnects_mem_fault.fetch_add(1, Relaxed);
        }
        End::NotifyFd => {
            shared.disconnects_notify_fd.fetch_add(1, Relaxed);
        }
    }
}

fn sleep_unless_stopped(shared: &Shared, d: Duration) {
    let mut ready = [false];
    let _ = sys::poll_readable(&[shared.fault.wake.fd()], d.as_millis() as i32, &mut ready);
    if ready[0] && !shared.fault.pending.load(Acquire) {
        shared.fault.wake.drain();
    }
}

fn accept(shared: &Shared, l: &UnixListener) -> Option<UnixStream> {
    let mut ready = [false, false];
    if sys::poll_readable(&[l.as_raw_fd(), shared.fault.wake.fd()], 200, &mut ready).is_err() {
        std::thread::sleep(Duration::from_millis(50));
        return None;
    }
    if ready[1] {
        shared.fault.wake.drain();
    }
    if !ready[0] {
        return None;
    }
    l.accept().ok().map(|(s, _)| s)
}

/// Serves one frontend connection until it ends, and returns how it
/// ended, already counted.
pub(super) fn serve(
    shared: &Arc<Shared>,
    stream: UnixStream,
    listener: Option<&UnixListener>,
) -> End {
    // The `vhost` crate reads a message in blocking reads and retries a
    // read that timed out, so a frontend that stops mid-message would hold
    // this thread (and the port's drop) for ever. It is therefore handed a
    // message only once all of it is in the socket (peeked), and only when
    // its reply cannot block (room in the send buffer): neither its reads
    // nor its write ever wait. A message that stays incomplete, or a reply
    // that stays unread, for READ_DEADLINE ends the connection (`Stall`).
    // The socket timeouts are a second line only.
    let _ = stream.set_read_timeout(Some(READ_DEADLINE));
    let _ = stream.set_write_timeout(Some(READ_DEADLINE));
    let _ = stream.set_nonblocking(false);
    shared.connects.fetch_add(1, Relaxed);
    shared.fault.pending.store(false, Release);
    let dev = Arc::new(Mutex::new(Device::new(shared.clone())));
    let mut h = BackendReqHandler::from_stream(stream, dev.clone());
    shared.connected.store(true, Release);
    // Since when the socket has held an incomplete message (or a complete
    // one whose reply would not fit), and whether it is the reply.
    let mut stalled: Option<(Instant, bool)> = None;
    let end = loop {
        shared.retired.sweep();
        if shared.stop.load(Acquire) {
            break End::Stop;
        }
        {
            let d = dev.lock().unwrap_or_else(|p| p.into_inner());
            if d.mem_faulted() {
                eprintln!(
                    "vhost-user port {}: frontend disconnected: its memory went away \
                     under us (a region's file shrunk)",
                    shared.name
                );
                break End::MemFault;
            }
            if let Some(which) = d.blocking_notify_fd() {
                eprintln!(
                    "vhost-user port {}: frontend disconnected: it made {which} blocking",
                    shared.name
                );
                break End::NotifyFd;
            }
        }
        if shared.fault.pending.load(Acquire) {
            break End::Lie;
        }
        let fd = h.as_raw_fd();
        let others = [
            shared.fault.wake.fd(),
            listener.map_or(-1, |l| l.as_raw_fd()),
        ];
        let mut ready = [false; 2];
        let nothers = if listener.is_some() { 2 } else { 1 };
        // While a message is incomplete the socket stays readable: watch
        // it for a hang-up only (or for room for the reply), and look
        // again every few milliseconds.
        let (events, timeout) = match stalled {
            None => (libc::POLLIN | libc::POLLRDHUP, 200),
            Some((_, false)) => (libc::POLLRDHUP, 5),
            Some((_, true)) => (libc::POLLOUT, 5),
        };
        let rev = match sys::poll_socket(fd, events, &others[..nothers], timeout, &mut ready) {
            Ok(r) => r,
            Err(_) => break End::HangUp,
        };
        if ready[0] {
            shared.fault.wake.drain();
            continue;
        }
        if ready[1] {
            // One frontend per port: refuse the others.
            if let Some(l) = listener {
                if let Ok((s, _)) = l.accept() {
                    shared.rejected.fetch_add(1, Relaxed);
                    drop(s);
                }
            }
        }
        if rev == 0 && stalled.is_none() {
            continue;
        }
        // A peer that hung up (or shut its sending side) mid-message is
        // handed to the crate as it is: its reads end at the hang-up,
        // they cannot wait.
        let hup = rev & (libc::POLLHUP | libc::POLLRDHUP | libc::POLLERR) != 0;
        let blocked = match waiting(fd) {
            Waiting::Nothing if !hup => {
                stalled = None;
                continue;
            }
            Waiting::Part if !hup => Some(false),
            Waiting::Whole if rev & libc::POLLHUP == 0 && !sys::writable(fd) => Some(true),
            _ => None,
        };
        if let Some(reply) = blocked {
            let since = match stalled {
                Some((t, r)) if r == reply => t,
                _ => Instant::now(),
            };
            if since.elapsed() >= READ_DEADLINE {
                eprintln!(
                    "vhost-user port {}: frontend disconnected: {} for {} ms",
                    shared.name,
                    if reply {
                        "it left our replies unread"
                    } else {
                        "its message stopped arriving midway"
                    },
                    READ_DEADLINE.as_millis()
                );
                break End::Stall;
            }
            stalled = Some((since, reply));
            continue;
        }
        stalled = None;
        let early = peek_vring_enable(fd);
        if let Err(e) = h.handle_request() {
            // QEMU 7.2 sends SET_VRING_ENABLE before SET_FEATURES (so
            // before PROTOCOL_FEATURES is acked): it restores the
            // enable state before starting the device and does not
            // repeat it after. The vhost crate refuses such a message
            // without replying (it was consumed whole). Keep its value
            // (as DPDK's vhost library does): it takes effect once
            // PROTOCOL_FEATURES is negotiated. Without this, QEMU's
            // rings never run.
            if let (VuError::InactiveFeature(_), Some((index, enable))) = (&e, early) {
                let mut d = dev.lock().unwrap_or_else(|p| p.into_inner());
                if d.set_vring_enable(index, enable).is_ok() {
                    shared.early_enables.fetch_add(1, Relaxed);
                    continue;
                }
            }
            if matches!(
                e,
                VuError::InactiveFeature(_) | VuError::InactiveOperation(_)
            ) {
                shared.protocol_errors.fetch_add(1, Relaxed);
                continue;
            }
            eprintln!(
                "vhost-user port {}: frontend disconnected: {e}",
                shared.name
            );
            break match e {
                VuError::Disconnected
                | VuError::PartialMessage
                | VuError::SocketBroken(_)
                | VuError::SocketError(_) => End::HangUp,
                _ => End::Protocol,
            };
        }
    };
    // Counted before `connected` clears: whoever sees the frontend gone
    // (Acquire) also sees why.
    count_end(shared, &end);
    shared.connected.store(false, Release);
    drop(h);
    let mut d = dev.lock().unwrap_or_else(|p| p.into_inner());
    d.teardown();
    shared.fault.pending.store(false, Release);
    end
}

/// `VHOST_USER_SET_VRING_ENABLE`.
const REQ_SET_VRING_ENABLE: u32 = 18;

/// Bytes of a vhost-user message header (request, flags, size).
const HDR_B: usize = 12;
/// Largest body the `vhost` crate reads (a larger size field is refused
/// from the header alone, without reading on).
const MAX_BODY_B: usize = 0x1000;

/// What the control socket holds.
enum Waiting {
    /// Nothing.
    Nothing,
    /// The start of a message.
    Part,
    /// A whole message (or a header the crate refuses by itself).
    Whole,
}

/// Looks at what waits on the control socket without consuming it.
/// A message whose descriptors came with its first bytes and whose rest
/// came in another write shows only its first part (a peek stops after
/// the bytes that carry descriptors); no frontend sends that way, and it
/// ends as a stall.
fn waiting(fd: std::os::fd::RawFd) -> Waiting {
    let mut b = [0u8; HDR_B + MAX_BODY_B];
    let n = sys::peek(fd, &mut b).unwrap_or(0);
    if n == 0 {
        return Waiting::Nothing;
    }
    if n < HDR_B {
        return Waiting::Part;
    }
    let size = u32::from_le_bytes([b[8], b[9], b[10], b[11]]) as usize;
    if size > MAX_BODY_B || n >= HDR_B + size {
        Waiting::Whole
    } else {
        Waiting::Part
    }
}

/// When the next message on the control socket is a complete
/// `SET_VRING_ENABLE` header and body (12 + 8 bytes: request, flags, size;
/// index, num), its (index, enable); `None` for anything else.
fn peek_vring_enable(fd: std::os::fd::RawFd) -> Option<(u32, bool)> {
    let mut b = [0u8; 20];
    if sys::peek(fd, &mut b).ok()? != b.len() {
        return None;
    }
    let word = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    if word(0) != REQ_SET_VRING_ENABLE || word(8) != 8 {
        return None;
    }
    match word(16) {
        0 => Some((word(12), false)),
        1 => Some((word(12), true)),
        _ => None,
    }
}

/// Creates the listening socket of a server-mode port with mode 0600
/// ([`floor::listen_unix`]): it appears at `path` already listening (a
/// frontend that sees the file can connect at once) and never with looser
/// permissions; a stale socket file is replaced, one another process (or
/// another port) listens on is an `AddrInUse` error, never taken over, and
/// any other kind of file an `AlreadyExists` one.
pub fn listen(path: &Path) -> io::Result<UnixListener> {
    floor::listen_unix(path, libc::SOCK_STREAM, 0o600).map(UnixListener::from)
}

/// Whether the configuration asks for a listening socket.
pub fn is_server(mode: Mode) -> bool {
    mode == Mode::Server
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn msg(req: u32, size: u32, body: &[u32]) -> Vec<u8> {
        let mut v = Vec::new();
        for w in [req, 1, size].iter().chain(body) {
            v.extend_from_slice(&w.to_le_bytes());
        }
        v
    }

    #[test]
    fn the_socket_appears_listening_private_and_leaves_no_temporary_name() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("vu-listen-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("port.sock");
        std::fs::write(dir.join("file"), b"").unwrap();
        let not_a_socket = listen(&dir.join("file")).unwrap_err();
        assert_eq!(not_a_socket.kind(), io::ErrorKind::AlreadyExists);
        let l = listen(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        UnixStream::connect(&path).expect("listening as soon as the file is there");
        // a port's live socket is never taken over by another listen
        let taken = listen(&path).unwrap_err();
        assert_eq!(taken.kind(), io::ErrorKind::AddrInUse, "{taken}");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 2, "{names:?}");
        drop(l);
        // a stale socket is replaced
        let again = listen(&path).unwrap();
        UnixStream::connect(&path).unwrap();
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn peeks_an_early_vring_enable_without_consuming_it() {
        let (mut a, b) = UnixStream::pair().unwrap();
        assert_eq!(peek_vring_enable(b.as_raw_fd()), None, "nothing waiting");
        a.write_all(&msg(REQ_SET_VRING_ENABLE, 8, &[1, 1])).unwrap();
        assert_eq!(peek_vring_enable(b.as_raw_fd()), Some((1, true)));
        // Still there: a second peek sees the same message.
        assert_eq!(peek_vring_enable(b.as_raw_fd()), Some((1, true)));
    }

    #[test]
    fn ignores_other_messages_and_bad_values() {
        for (m, why) in [
            (msg(REQ_SET_VRING_ENABLE, 8, &[0, 0]), "disable"),
            (msg(REQ_SET_VRING_ENABLE, 8, &[0, 2]), "num 2"),
            (msg(REQ_SET_VRING_ENABLE, 4, &[0, 1]), "wrong size"),
            (msg(REQ_SET_VRING_ENABLE, 8, &[0]), "short body"),
            (msg(8, 8, &[0, 256]), "SET_VRING_NUM"),
        ] {
            let (mut a, b) = UnixStream::pair().unwrap();
            a.write_all(&m).unwrap();
            let want = if why == "disable" {
                Some((0, false))
            } else {
                None
            };
            assert_eq!(peek_vring_enable(b.as_raw_fd()), want, "{why}");
        }
    }
}
