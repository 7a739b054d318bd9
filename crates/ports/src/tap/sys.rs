//! System calls of the TAP backend: opening `/dev/net/tun` and attaching a
//! queue with `TUNSETIFF`, and the per-frame `read()`/`write()` that a TAP
//! device requires (batched per burst and per publish). Every `unsafe` block
//! of `tap` lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use fabric::{DropReason, Lease, RxFill, RxQueue, TxDrops, TxFrames, TxLock, TxProducer, TxQueue};

use crate::netdev::LinkState;

const IFF_TAP: i16 = 0x0002;
const IFF_NO_PI: i16 = 0x1000;
const IFF_MULTI_QUEUE: i16 = 0x0100;
const TUNSETIFF: libc::c_ulong = 0x4004_54ca;

#[repr(C)]
struct IfReqFlags {
    name: [u8; 16],
    flags: i16,
    pad: [u8; 22],
}

/// Opens `dev` (normally `/dev/net/tun`) non-blocking. Returns the step that
/// failed with the error.
pub fn open_queue(
    dev: &str,
    ifname: &str,
    multi_queue: bool,
) -> Result<OwnedFd, (&'static str, io::Error)> {
    let path = CString::new(dev).map_err(|_| {
        (
            "open of the tun device failed",
            io::Error::from_raw_os_error(libc::EINVAL),
        )
    })?;
    // SAFETY: `path` is a valid C string; the result is checked.
    let fd = unsafe {
        libc::open(
            path.as_ptr(),
            libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    };
    if fd < 0 {
        return Err(("open of the tun device failed", io::Error::last_os_error()));
    }
    // SAFETY: fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReqFlags {
        name: [0; 16],
        flags: IFF_TAP | IFF_NO_PI,
        pad: [0; 22],
    };
    if multi_queue {
        req.flags |= IFF_MULTI_QUEUE;
    }
    let n = ifname.len().min(15);
    req.name[..n].copy_from_slice(&ifname.as_bytes()[..n]);
    // SAFETY: `req` is a valid ifreq-shaped buffer of 40 bytes.
    let r = unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF as _, &mut req) };
    if r < 0 {
        return Err(("ioctl(TUNSETIFF) failed", io::Error::last_os_error()));
    }
    Ok(fd)
}

/// A block of anonymous memory (a `floor::Mmap`) holding `n` buffers of
/// `size` bytes. Buffer contents are accessed through `buf()`'s raw
/// pointers, each in an `unsafe` block that argues which thread owns that
/// buffer at that moment (the receive queue's single owner; on transmit,
/// the lease's worker until publish, then the flusher).
struct Buffers {
    map: floor::Mmap,
    size: usize,
    n: usize,
}

impl Buffers {
    fn new(n: usize, size: usize) -> io::Result<Self> {
        let map = floor::Mmap::anonymous(n * size).map()?;
        Ok(Self { map, size, n })
    }

    #[inline]
    fn buf(&self, i: usize) -> *mut u8 {
        // SAFETY: i % n < n, inside the mapping.
        unsafe { self.map.as_ptr().add((i % self.n) * self.size) }
    }
}

/// Data-path counters of one receive queue.
#[derive(Default, Debug)]
pub struct RxStats {
    /// Frames handed to the fabric.
    pub frames: AtomicU64,
    /// `read()` calls (frames + the one that found the queue empty).
    pub reads: AtomicU64,
    /// Frames longer than a buffer (the kernel cut them; passed up as read).
    pub truncated: AtomicU64,
    /// Reads that failed with something else than "empty".
    pub errors: AtomicU64,
}

/// The receive side of one TAP queue: up to `n` frames read per burst into
/// preallocated buffers.
pub struct TapRx {
    fd: Arc<OwnedFd>,
    bufs: Buffers,
    stats: Arc<RxStats>,
}

/// A receive queue with `n` buffers of `size` bytes.
pub fn tap_rx(fd: Arc<OwnedFd>, n: usize, size: usize, stats: Arc<RxStats>) -> io::Result<TapRx> {
    Ok(TapRx {
        fd,
        bufs: Buffers::new(n, size)?,
        stats,
    })
}

impl RxQueue for TapRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        let want = batch.room().min(self.bufs.n);
        let mut n = 0;
        let mut reads = 0;
        while n < want {
            let b = self.bufs.buf(n);
            reads += 1;
            // SAFETY: `b` is a buffer of `size` bytes owned by this queue and
            // not handed out (buffers 0..n are, this one is the next).
            let r = unsafe { libc::read(self.fd.as_raw_fd(), b.cast(), self.bufs.size) };
            if r <= 0 {
                if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EAGAIN) {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                }
                break;
            }
            if r as usize == self.bufs.size {
                self.stats.truncated.fetch_add(1, Ordering::Relaxed);
            }
            // SAFETY: the buffer holds `r` bytes and stays ours until the
            // next burst (release() has nothing to give back).
            unsafe { batch.push(b, r as u32) };
            n += 1;
        }
        self.stats.reads.fetch_add(reads, Ordering::Relaxed);
        if n > 0 {
            self.stats.frames.fetch_add(n as u64, Ordering::Relaxed);
        }
        n
    }

    fn release(&mut self) {}

    fn notify_fd(&self) -> Option<RawFd> {
        Some(self.fd.as_raw_fd())
    }

    fn set_notify(&mut self, _enabled: bool) -> bool {
        let mut p = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, zero timeout.
        unsafe { libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLIN != 0 }
    }
}

/// Data-path counters of one transmit queue.
#[derive(Default, Debug)]
pub struct TxStats {
    /// Frames written to the device.
    pub frames: AtomicU64,
    /// Frames the device refused (EAGAIN: its queue is full; EIO: down...).
    pub errors: AtomicU64,
}

/// The transmit side of one TAP queue: the fabric copies into a ring of
/// buffers; the worker that published writes each published frame with one
/// `write()`, after the fabric's lock is dropped (`kick`).
///
/// Slots move reserved (under the lock, [`TapProd`]) → written (by the
/// lease's worker) → published (under the lock) → flushed (by whichever
/// worker holds the `flushing` flag, without the lock) → free again.
pub struct TapTx {
    sh: Arc<TapShared>,
    lock: TxLock<TapProd>,
    link: Arc<LinkState>,
    /// Counters, shared with the port.
    pub stats: Arc<TxStats>,
}

/// What the producer, the writers and the flusher share.
struct TapShared {
    fd: Arc<OwnedFd>,
    bufs: Buffers,
    lens: Box<[AtomicU32]>,
    /// Slots before this one are published (stored under the lock).
    published: AtomicU64,
    /// Slots before this one were written to the device (free again).
    flushed: AtomicU64,
    /// A worker is writing published frames to the device.
    flushing: AtomicBool,
    stats: Arc<TxStats>,
}

/// The producer state of a TAP transmit queue, inside its [`TxLock`].
struct TapProd {
    sh: Arc<TapShared>,
    /// Next slot to reserve.
    reserved: u64,
}

/// A transmit queue with `n` slots of `size` bytes.
pub fn tap_tx(fd: Arc<OwnedFd>, n: usize, size: usize, link: Arc<LinkState>) -> io::Result<TapTx> {
    let stats: Arc<TxStats> = Arc::default();
    let sh = Arc::new(TapShared {
        fd,
        bufs: Buffers::new(n, size)?,
        lens: (0..n).map(|_| AtomicU32::new(0)).collect(),
        published: AtomicU64::new(0),
        flushed: AtomicU64::new(0),
        flushing: AtomicBool::new(false),
        stats: stats.clone(),
    });
    Ok(TapTx {
        lock: TxLock::new(TapProd {
            sh: sh.clone(),
            reserved: 0,
        }),
        sh,
        link,
        stats,
    })
}

impl TapTx {
    /// Largest frame a slot holds.
    pub fn capacity(&self) -> usize {
        self.sh.bufs.size
    }
}

impl TxProducer for TapProd {
    fn free_slots(&mut self) -> u32 {
        let flushed = self.sh.flushed.load(Ordering::Acquire);
        (self.sh.bufs.n as u64 - (self.reserved - flushed)) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved = first + n as u64;
        Lease::at(first)
    }

    fn publish_deferred(&mut self, tail: u64, _: &mut TxDrops) -> bool {
        if tail <= self.sh.published.load(Ordering::Relaxed) {
            return false;
        }
        // SeqCst: pairs with the flusher's re-check in kick.
        self.sh.published.store(tail, Ordering::SeqCst);
        // The device writes are made by `kick`, after the lock.
        true
    }
}

impl TxQueue for TapTx {
    fn slots_for(&self, len: usize) -> u32 {
        let mtu_max = self.link.mtu() as usize + 14 + 4;
        (len <= self.sh.bufs.size && len <= mtu_max) as u32
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        let sh = &*self.sh;
        let first = lease.first;
        for (j, (frame, _)) in frames.iter().enumerate() {
            let i = ((first + j as u64) % sh.bufs.n as u64) as usize;
            let len = frame.len().min(sh.bufs.size);
            // SAFETY: slot reserved to this caller and not published (trait
            // contract): nobody else touches its buffer (the flusher reads
            // it only once published, and it was flushed before the
            // producer handed it out again); len <= the buffer's size.
            unsafe { std::ptr::copy_nonoverlapping(frame.as_ptr(), sh.bufs.buf(i), len) };
            sh.lens[i].store(len as u32, Ordering::Relaxed);
        }
    }

    fn kick(&self, drops: &mut TxDrops) {
        self.sh.flush(drops);
    }
}

impl TapShared {
    /// Writes every published, unflushed frame to the device, one `write()`
    /// each; never under the transmit lock. One worker flushes at a time;
    /// another that finds the flag taken leaves its frames to it.
    fn flush(&self, drops: &mut TxDrops) {
        loop {
            if self.flushing.swap(true, Ordering::SeqCst) {
                // Another worker is flushing; it re-checks `published`
                // after letting go, so it writes our frames too.
                return;
            }
            let from = self.flushed.load(Ordering::Relaxed);
            let to = self.published.load(Ordering::Acquire);
            let (mut ok, mut err) = (0, 0);
            for s in from..to {
                let i = (s % self.bufs.n as u64) as usize;
                let len = self.lens[i].load(Ordering::Relaxed) as usize;
                // SAFETY: slot s is published (written, Acquire above) and
                // not yet flushed, so no writer touches it; the buffer holds
                // `len` bytes.
                let r = unsafe { libc::write(self.fd.as_raw_fd(), self.bufs.buf(i).cast(), len) };
                if r < 0 {
                    err += 1;
                    drops.add(DropReason::TxError, len);
                } else {
                    ok += 1;
                }
            }
            self.flushed.store(to, Ordering::Release);
            self.flushing.store(false, Ordering::SeqCst);
            self.stats.frames.fetch_add(ok, Ordering::Relaxed);
            if err > 0 {
                self.stats.errors.fetch_add(err, Ordering::Relaxed);
            }
            if self.published.load(Ordering::SeqCst) == to {
                return;
            }
        }
    }
}
