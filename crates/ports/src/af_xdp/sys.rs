//! System calls and mapped-ring access of the AF_XDP backend: the bpf(2)
//! calls that build and attach the redirect program (no clang: six raw eBPF
//! instructions), the XDP socket and its UMEM, the four single-producer
//! single-consumer rings shared with the kernel, and the queue types the
//! fabric drives. Every `unsafe` block of `af_xdp` lives here.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use fabric::{Lease, RxFill, RxQueue, TxDrops, TxFrames, TxLock, TxProducer, TxQueue};

use crate::netdev::LinkState;

// ---- bpf(2) ----------------------------------------------------------------

const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_PROG_LOAD: i32 = 5;
const BPF_LINK_CREATE: i32 = 28;
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
const BPF_PSEUDO_MAP_FD: u8 = 1;
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// `XDP_FLAGS_SKB_MODE`: generic XDP, in the stack, any driver.
pub const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
/// `XDP_FLAGS_DRV_MODE`: native XDP, in the driver.
pub const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;

/// `union bpf_attr`, as bytes (the kernel accepts trailing zeroes).
#[repr(C, align(8))]
struct BpfAttr([u8; 128]);

impl BpfAttr {
    fn new() -> Self {
        Self([0; 128])
    }
    fn u32(&mut self, off: usize, v: u32) -> &mut Self {
        self.0[off..off + 4].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn u64(&mut self, off: usize, v: u64) -> &mut Self {
        self.0[off..off + 8].copy_from_slice(&v.to_ne_bytes());
        self
    }
    fn bytes(&mut self, off: usize, b: &[u8]) -> &mut Self {
        self.0[off..off + b.len()].copy_from_slice(b);
        self
    }
}

fn bpf(cmd: i32, attr: &mut BpfAttr) -> io::Result<i64> {
    // SAFETY: `attr` is a valid, 8-aligned bpf_attr of the size passed; the
    // pointers inside it (instructions, license, log) outlive the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut BpfAttr,
            std::mem::size_of::<BpfAttr>(),
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn owned(fd: i64) -> OwnedFd {
    // SAFETY: `fd` is a fresh descriptor returned by the kernel to us.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

/// Creates an XSKMAP with `entries` slots (one per interface queue).
pub fn xskmap_create(entries: u32) -> io::Result<OwnedFd> {
    let mut a = BpfAttr::new();
    a.u32(0, BPF_MAP_TYPE_XSKMAP)
        .u32(4, 4)
        .u32(8, 4)
        .u32(12, entries)
        .bytes(28, b"turnout_xsks");
    bpf(BPF_MAP_CREATE, &mut a).map(owned)
}

/// Puts socket `xsk` at `key` (the queue id) of the XSKMAP.
pub fn xskmap_set(map: &OwnedFd, key: u32, xsk: RawFd) -> io::Result<()> {
    let k = key;
    let v = xsk as u32;
    let mut a = BpfAttr::new();
    a.u32(0, map.as_raw_fd() as u32)
        .u64(8, &k as *const u32 as u64)
        .u64(16, &v as *const u32 as u64)
        .u64(24, 0);
    bpf(BPF_MAP_UPDATE_ELEM, &mut a).map(|_| ())
}

#[repr(C)]
#[derive(Clone, Copy)]
struct BpfInsn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> BpfInsn {
    BpfInsn {
        code,
        regs: (src << 4) | dst,
        off,
        imm,
    }
}

/// The redirect program, for the map `map_fd`:
/// `return bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS);` — frames
/// of queues without a socket go on to the stack.
fn redirect_program(map_fd: RawFd) -> [BpfInsn; 6] {
    [
        // r2 = *(u32 *)(r1 + offsetof(struct xdp_md, rx_queue_index))
        insn(0x61, 2, 1, 16, 0),
        // r1 = map (ld_imm64, pseudo map fd)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS (action when the map has no socket at the key)
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // call bpf_redirect_map
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // exit (r0 = the helper's verdict)
        insn(0x95, 0, 0, 0, 0),
    ]
}

/// Loads the redirect program. On failure returns the error and the last
/// line of the verifier's log.
pub fn prog_load(map: &OwnedFd) -> Result<OwnedFd, (io::Error, String)> {
    let prog = redirect_program(map.as_raw_fd());
    let license = b"GPL\0";
    let mut log = vec![0u8; 64 * 1024];
    let mut a = BpfAttr::new();
    a.u32(0, BPF_PROG_TYPE_XDP)
        .u32(4, prog.len() as u32)
        .u64(8, prog.as_ptr() as u64)
        .u64(16, license.as_ptr() as u64)
        .bytes(48, b"turnout_xsk")
        .u32(68, BPF_XDP);
    match bpf(BPF_PROG_LOAD, &mut a) {
        Ok(fd) => Ok(owned(fd)),
        Err(e) => {
            // Load again with the verifier's log to say why.
            a.u32(24, 1)
                .u32(28, log.len() as u32)
                .u64(32, log.as_mut_ptr() as u64);
            let _ = bpf(BPF_PROG_LOAD, &mut a).map(owned);
            let text =
                String::from_utf8_lossy(&log[..log.iter().position(|&b| b == 0).unwrap_or(0)])
                    .into_owned();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("")
                .to_string();
            Err((e, last))
        }
    }
}

/// Attaches `prog` to `ifindex` through a bpf link (detached when the
/// returned fd is closed, also if the process dies). `mode` is
/// `XDP_FLAGS_DRV_MODE` or `XDP_FLAGS_SKB_MODE`.
pub fn xdp_link(prog: &OwnedFd, ifindex: u32, mode: u32) -> io::Result<OwnedFd> {
    let mut a = BpfAttr::new();
    a.u32(0, prog.as_raw_fd() as u32)
        .u32(4, ifindex)
        .u32(8, BPF_XDP)
        .u32(12, mode);
    bpf(BPF_LINK_CREATE, &mut a).map(owned)
}

// ---- XDP socket --------------------------------------------------------------

const SOL_XDP: i32 = 283;
const XDP_MMAP_OFFSETS: i32 = 1;
const XDP_RX_RING: i32 = 2;
const XDP_TX_RING: i32 = 3;
const XDP_UMEM_REG: i32 = 4;
const XDP_UMEM_FILL_RING: i32 = 5;
const XDP_UMEM_COMPLETION_RING: i32 = 6;
const XDP_STATISTICS: i32 = 7;
/// `XDP_MAX_TX_SKB_BUDGET` (Linux 6.17): frames one copy-mode `sendto()`
/// may send, 32 by default.
const XDP_MAX_TX_SKB_BUDGET: i32 = 9;
/// What copy mode sends per `sendto()` on kernels without that option.
pub const TX_BUDGET_DEFAULT: u32 = 32;
const XDP_PGOFF_RX_RING: i64 = 0;
const XDP_PGOFF_TX_RING: i64 = 0x8000_0000;
const XDP_UMEM_PGOFF_FILL_RING: i64 = 0x1_0000_0000;
const XDP_UMEM_PGOFF_COMPLETION_RING: i64 = 0x1_8000_0000;
const XDP_RING_NEED_WAKEUP: u32 = 1;
/// Bind flag: copy mode.
pub const XDP_COPY: u16 = 1 << 1;
/// Bind flag: zero-copy mode.
pub const XDP_ZEROCOPY: u16 = 1 << 2;
const XDP_USE_NEED_WAKEUP: u16 = 1 << 3;
/// Headroom the kernel keeps in front of received frames in a chunk.
pub const XDP_PACKET_HEADROOM: u32 = 256;

#[repr(C)]
struct XdpUmemReg {
    addr: u64,
    len: u64,
    chunk_size: u32,
    headroom: u32,
    flags: u32,
    tx_metadata_len: u32,
}

#[repr(C)]
#[derive(Default, Clone, Copy)]
struct XdpRingOffset {
    producer: u64,
    consumer: u64,
    desc: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct XdpMmapOffsets {
    rx: XdpRingOffset,
    tx: XdpRingOffset,
    fr: XdpRingOffset,
    cr: XdpRingOffset,
}

#[repr(C)]
struct SockaddrXdp {
    family: u16,
    flags: u16,
    ifindex: u32,
    queue_id: u32,
    shared_umem_fd: u32,
}

#[repr(C)]
#[derive(Clone, Copy)]
struct XdpDesc {
    addr: u64,
    len: u32,
    options: u32,
}

/// `struct xdp_statistics`.
#[repr(C)]
#[derive(Default, Clone, Copy, Debug)]
pub struct XdpStatistics {
    /// Dropped for other reasons than a full ring or no buffer (e.g. too big).
    pub rx_dropped: u64,
    /// Invalid descriptors in the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors in the tx ring.
    pub tx_invalid_descs: u64,
    /// Dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame arrived.
    pub rx_fill_ring_empty_descs: u64,
    /// Times the tx ring was empty on a kick.
    pub tx_ring_empty_descs: u64,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn setsockopt<T>(fd: RawFd, opt: i32, v: &T) -> io::Result<()> {
    // SAFETY: `v` points to a live T of the given size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            SOL_XDP,
            opt,
            (v as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    })
    .map(|_| ())
}

/// Anonymous memory for a UMEM (a `floor::Mmap`), unmapped on drop.
///
/// The kernel reads and writes its chunks (DMA in zero-copy mode); who may
/// touch which chunk is governed by the rings: each chunk is owned by
/// exactly one of the kernel, a receive queue (between the rx ring and the
/// fill ring) or a transmit slot (reserved to a lease until published, then
/// the kernel's until completed). Chunks are accessed only through
/// raw-pointer copies and views in `unsafe` blocks that argue that
/// ownership. The last `Arc` of it goes after every queue pointing into it
/// (the kernel pins the pages it registered until the socket closes).
pub struct Umem(floor::Mmap);

impl Umem {
    /// Maps `len` bytes of zeroed, populated memory, in transparent huge
    /// pages where the kernel has them: a receive ring's chunks are used in
    /// turn (the fill ring is a FIFO), so every frame touches a page of
    /// the whole UMEM, and 4 KiB pages of 20 MiB (the default) are more
    /// than the TLB holds. Advised before the first touch (populating
    /// faults it in; registering it would too), so no page is split later.
    pub fn new(len: usize) -> io::Result<Self> {
        let map = floor::Mmap::anonymous(len).map()?;
        // Neither is required: without THP (disabled, an older kernel) the
        // pages are small, and faulted in when the kernel pins them.
        let _ = map.advise(libc::MADV_HUGEPAGE);
        let _ = map.populate_write(0, len);
        Ok(Self(map))
    }

    /// The first byte.
    #[inline]
    pub fn base(&self) -> *mut u8 {
        self.0.as_ptr()
    }

    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.0.len()
    }
}

/// One mapped ring: producer, consumer and flags words and the entries.
struct Ring<T> {
    producer: *const AtomicU32,
    consumer: *const AtomicU32,
    flags: *const AtomicU32,
    desc: *mut T,
    mask: u32,
    _map: floor::Mmap,
}

// SAFETY: the pointers point into `_map`, which the ring owns and which
// lives as long as it. The producer, consumer and flags words are only
// accessed as atomics (the kernel writes them concurrently); `entry` only
// computes an address, and every write or read through it is an `unsafe`
// block arguing that the entry is owned by its thread at that moment
// (reserved to a lease and unpublished, or handed back by the kernel).
unsafe impl<T: Send> Send for Ring<T> {}
// SAFETY: as for Send.
unsafe impl<T: Send> Sync for Ring<T> {}

impl<T> Ring<T> {
    fn prod(&self) -> &AtomicU32 {
        // SAFETY: points into the live mapping at the kernel's offset.
        unsafe { &*self.producer }
    }
    fn cons(&self) -> &AtomicU32 {
        // SAFETY: as above.
        unsafe { &*self.consumer }
    }
    fn need_wakeup(&self) -> bool {
        // SAFETY: as above.
        unsafe { (*self.flags).load(Ordering::Relaxed) & XDP_RING_NEED_WAKEUP != 0 }
    }
    fn entry(&self, i: u32) -> *mut T {
        // SAFETY: masked index < ring size, inside the mapping.
        unsafe { self.desc.add((i & self.mask) as usize) }
    }
}

fn map_ring<T>(fd: RawFd, off: &XdpRingOffset, n: u32, pgoff: i64) -> io::Result<Ring<T>> {
    let len = off.desc as usize + n as usize * std::mem::size_of::<T>();
    // The socket's ring at its documented page offset, with the length the
    // kernel's offsets imply.
    let map = floor::Mmap::of_fd(fd, len).offset(pgoff).populate().map()?;
    let p = map.as_ptr();
    // SAFETY: the offsets come from the kernel and lie inside the mapping.
    unsafe {
        Ok(Ring {
            producer: p.add(off.producer as usize).cast(),
            consumer: p.add(off.consumer as usize).cast(),
            flags: p.add(off.flags as usize).cast(),
            desc: p.add(off.desc as usize).cast(),
            mask: n - 1,
            _map: map,
        })
    }
}

/// An XDP socket with its UMEM and rings, before it is split into the
/// receive and transmit halves.
pub struct Xsk {
    sock: Arc<OwnedFd>,
    umem: Arc<Umem>,
    rx: Ring<XdpDesc>,
    fill: Ring<u64>,
    tx: Ring<XdpDesc>,
    comp: Ring<u64>,
    frame_size: u32,
    rx_frames: u32,
    tx_frames: u32,
}

/// Creates an XDP socket with a UMEM of `rx_frames + tx_frames` chunks of
/// `frame_size` bytes and rings of matching sizes (powers of two). Returns
/// the step that failed with the error.
pub fn xsk_create(
    frame_size: u32,
    rx_frames: u32,
    tx_frames: u32,
) -> Result<Xsk, (&'static str, io::Error)> {
    // SAFETY: plain socket(2) call; checked below.
    let fd = cvt(unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) })
        .map_err(|e| ("socket(AF_XDP) failed", e))?;
    // SAFETY: fresh descriptor we own.
    let sock = Arc::new(unsafe { OwnedFd::from_raw_fd(fd) });
    let len = frame_size as usize * (rx_frames + tx_frames) as usize;
    let umem = Arc::new(Umem::new(len).map_err(|e| ("mmap of the UMEM failed", e))?);
    let reg = XdpUmemReg {
        addr: umem.base() as u64,
        len: len as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags: 0,
        tx_metadata_len: 0,
    };
    setsockopt(fd, XDP_UMEM_REG, &reg).map_err(|e| ("setsockopt(XDP_UMEM_REG) failed", e))?;
    setsockopt(fd, XDP_UMEM_FILL_RING, &rx_frames)
        .map_err(|e| ("setsockopt(XDP_UMEM_FILL_RING) failed", e))?;
    setsockopt(fd, XDP_UMEM_COMPLETION_RING, &tx_frames)
        .map_err(|e| ("setsockopt(XDP_UMEM_COMPLETION_RING) failed", e))?;
    setsockopt(fd, XDP_RX_RING, &rx_frames).map_err(|e| ("setsockopt(XDP_RX_RING) failed", e))?;
    setsockopt(fd, XDP_TX_RING, &tx_frames).map_err(|e| ("setsockopt(XDP_TX_RING) failed", e))?;
    let mut off = XdpMmapOffsets::default();
    let mut olen = std::mem::size_of::<XdpMmapOffsets>() as u32;
    // SAFETY: `off` is writable for `olen` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_MMAP_OFFSETS,
            (&mut off as *mut XdpMmapOffsets).cast(),
            &mut olen,
        )
    })
    .map_err(|e| ("getsockopt(XDP_MMAP_OFFSETS) failed", e))?;
    let e = |x| ("mmap of an XDP ring failed", x);
    let rx = map_ring(fd, &off.rx, rx_frames, XDP_PGOFF_RX_RING).map_err(e)?;
    let tx = map_ring(fd, &off.tx, tx_frames, XDP_PGOFF_TX_RING).map_err(e)?;
    let fill = map_ring::<u64>(fd, &off.fr, rx_frames, XDP_UMEM_PGOFF_FILL_RING).map_err(e)?;
    let comp = map_ring(fd, &off.cr, tx_frames, XDP_UMEM_PGOFF_COMPLETION_RING).map_err(e)?;
    // Every receive chunk starts in the fill ring.
    for i in 0..rx_frames {
        // SAFETY: i < ring size; nobody else uses the ring yet.
        unsafe { *fill.entry(i) = i as u64 * frame_size as u64 };
    }
    fill.prod().store(rx_frames, Ordering::Release);
    Ok(Xsk {
        sock,
        umem,
        rx,
        fill,
        tx,
        comp,
        frame_size,
        rx_frames,
        tx_frames,
    })
}

impl Xsk {
    /// The socket descriptor.
    pub fn fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }

    /// Binds to queue `queue_id` of `ifindex` with `mode` (`XDP_COPY` or
    /// `XDP_ZEROCOPY`), asking for need-wakeup.
    pub fn bind(&self, ifindex: u32, queue_id: u32, mode: u16) -> io::Result<()> {
        let sa = SockaddrXdp {
            family: libc::AF_XDP as u16,
            flags: mode | XDP_USE_NEED_WAKEUP,
            ifindex,
            queue_id,
            shared_umem_fd: 0,
        };
        // SAFETY: `sa` is a valid sockaddr_xdp of the given length.
        cvt(unsafe {
            libc::bind(
                self.fd(),
                &sa as *const SockaddrXdp as *const libc::sockaddr,
                std::mem::size_of::<SockaddrXdp>() as u32,
            )
        })
        .map(|_| ())
    }

    /// Splits into the receive half (one worker) and the transmit half
    /// (shared under the fabric's lock protocol).
    pub fn split(
        self,
        link: Arc<LinkState>,
        rx_stats: Arc<RxStats>,
        tx_stats: Arc<TxStats>,
    ) -> (XskRx, XskTx) {
        let cap = (self.rx.mask + 1).min(self.rx_frames);
        let rx = XskRx {
            sock: self.sock.clone(),
            umem: self.umem.clone(),
            cons: 0,
            fill_prod: self.rx_frames,
            pending: 0,
            filled: 0,
            cap,
            rx: self.rx,
            fill: self.fill,
            chunk_mask: !(self.frame_size as u64 - 1),
            umem_len: self.umem.len() as u64,
            stats: rx_stats,
        };
        let sh = Arc::new(XskTxShared {
            sock: self.sock,
            base: self.umem.base() as usize,
            tx_base: self.rx_frames as u64 * self.frame_size as u64,
            _umem: self.umem,
            frame_size: self.frame_size,
            n: self.tx_frames as u64,
            n_mask: {
                debug_assert!(self.tx_frames.is_power_of_two());
                self.tx_frames as u64 - 1
            },
            tx: self.tx,
            stats: tx_stats,
        });
        let tx = XskTx {
            lock: TxLock::new(XskProd {
                sh: sh.clone(),
                comp: self.comp,
                reserved: 0,
                published: 0,
                completed: 0,
                comp_cons: 0,
                left_in_ring: false,
            }),
            sh,
            link,
        };
        (rx, tx)
    }
}

/// Reads the socket's kernel statistics.
pub fn xsk_statistics(fd: RawFd) -> io::Result<XdpStatistics> {
    let mut st = XdpStatistics::default();
    let mut len = std::mem::size_of::<XdpStatistics>() as u32;
    // SAFETY: `st` is writable for `len` bytes.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            SOL_XDP,
            XDP_STATISTICS,
            (&mut st as *mut XdpStatistics).cast(),
            &mut len,
        )
    })?;
    Ok(st)
}

/// Raises how many frames one copy-mode `sendto()` sends (the kernel's
/// default is 32, so a batch of 256 took 8 calls) to `budget`, at most the
/// tx ring's size. Returns the budget in force: `budget` if the kernel took
/// it, else [`TX_BUDGET_DEFAULT`] (kernels before 6.17 do not know the
/// option). Zero-copy sockets do not use it.
pub fn set_tx_budget(fd: RawFd, budget: u32) -> u32 {
    // The kernel bounds the budget; halve until it takes one.
    let mut v = budget;
    while v > TX_BUDGET_DEFAULT {
        if setsockopt(fd, XDP_MAX_TX_SKB_BUDGET, &v).is_ok() {
            return v;
        }
        v /= 2;
    }
    TX_BUDGET_DEFAULT
}

fn kick(fd: RawFd) -> io::Result<()> {
    // SAFETY: a zero-length sendto with no buffer asks the kernel to process
    // the tx ring (and, for recvfrom below, the fill ring).
    let r = unsafe {
        libc::sendto(
            fd,
            std::ptr::null(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null(),
            0,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

fn rx_wakeup(fd: RawFd) {
    // SAFETY: a zero-length recvfrom wakes the driver to refill from the
    // fill ring; no buffer is touched.
    unsafe {
        libc::recvfrom(
            fd,
            std::ptr::null_mut(),
            0,
            libc::MSG_DONTWAIT,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
        )
    };
}

/// Data-path counters of one receive queue.
#[derive(Default, Debug)]
pub struct RxStats {
    /// Frames handed to the fabric.
    pub frames: AtomicU64,
    /// Descriptors outside the UMEM (never expected from the kernel).
    pub bad_descs: AtomicU64,
    /// Fill-ring wake-ups (need_wakeup set by the driver).
    pub wakeups: AtomicU64,
}

/// The receive half of one XDP socket.
pub struct XskRx {
    sock: Arc<OwnedFd>,
    umem: Arc<Umem>,
    rx: Ring<XdpDesc>,
    fill: Ring<u64>,
    cons: u32,
    fill_prod: u32,
    pending: u32,
    chunk_mask: u64,
    umem_len: u64,
    stats: Arc<RxStats>,
    /// Frames in the receive ring at the last burst, and how many it can
    /// hold: the kernel drops when the receive ring is full or the fill
    /// ring (our receive chunks) is empty, whichever comes first.
    filled: u32,
    cap: u32,
}

impl RxQueue for XskRx {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        debug_assert_eq!(self.pending, 0, "burst without release");
        let avail = self
            .rx
            .prod()
            .load(Ordering::Acquire)
            .wrapping_sub(self.cons);
        self.filled = avail;
        let n = (avail as usize).min(batch.room()) as u32;
        let mut bad = 0;
        for i in 0..n {
            // SAFETY: entries between our consumer and the kernel's producer
            // are written (Acquire above) and stay ours until we advance.
            let d = unsafe { *self.rx.entry(self.cons.wrapping_add(i)) };
            if d.addr.saturating_add(d.len as u64) > self.umem_len {
                bad += 1;
                continue;
            }
            // SAFETY: checked inside the UMEM; the chunk is ours until
            // release() puts it back into the fill ring.
            unsafe { batch.push(self.umem.base().add(d.addr as usize), d.len) };
        }
        self.pending = n;
        if n > 0 {
            // Only this queue's owner writes its counters (readers load
            // them): a plain add, no locked instruction per burst.
            let f = &self.stats.frames;
            f.store(
                f.load(Ordering::Relaxed) + (n - bad) as u64,
                Ordering::Relaxed,
            );
            if bad > 0 {
                self.stats
                    .bad_descs
                    .fetch_add(bad as u64, Ordering::Relaxed);
            }
        }
        (n - bad) as usize
    }

    fn release(&mut self) {
        if self.pending == 0 {
            return;
        }
        for i in 0..self.pending {
            // SAFETY: the rx entries are still ours (consumer not advanced);
            // the fill ring has room for every receive chunk (its size is
            // the number of receive chunks).
            unsafe {
                let d = *self.rx.entry(self.cons.wrapping_add(i));
                *self.fill.entry(self.fill_prod.wrapping_add(i)) = d.addr & self.chunk_mask;
            }
        }
        self.fill_prod = self.fill_prod.wrapping_add(self.pending);
        self.fill.prod().store(self.fill_prod, Ordering::Release);
        self.cons = self.cons.wrapping_add(self.pending);
        self.rx.cons().store(self.cons, Ordering::Release);
        self.pending = 0;
        if self.fill.need_wakeup() {
            self.stats.wakeups.fetch_add(1, Ordering::Relaxed);
            rx_wakeup(self.sock.as_raw_fd());
        }
    }

    fn fill_level(&self) -> Option<(u32, u32)> {
        Some((self.filled, self.cap))
    }

    fn notify_fd(&self) -> Option<RawFd> {
        Some(self.sock.as_raw_fd())
    }

    fn set_notify(&mut self, _enabled: bool) -> bool {
        // poll() on the socket is level-triggered on a non-empty rx ring.
        self.rx.prod().load(Ordering::Acquire) != self.cons
    }

    fn peek(&self) -> Option<bool> {
        // What the socket's readiness says: the rx ring is not empty.
        Some(self.rx.prod().load(Ordering::Acquire) != self.cons)
    }

    fn watch_only_asleep(&self) -> bool {
        // The socket is the transmit side's too: while it is in an epoll
        // set, every frame sent on it calls the wait queue from the
        // kernel's completion (sock_wfree), a wake-up call per frame.
        true
    }
}

/// Data-path counters of one transmit queue.
#[derive(Default, Debug)]
pub struct TxStats {
    /// Frames published to the kernel.
    pub frames: AtomicU64,
    /// `sendto()` kicks issued.
    pub kicks: AtomicU64,
    /// Kicks that failed with something else than "try again".
    pub kick_errors: AtomicU64,
    /// Kicks the kernel refused for now without taking a frame (socket
    /// buffer or the peer's ring full): the frames wait for the next kick.
    pub kicks_refused: AtomicU64,
}

/// The producer state of one XDP socket's transmit side, inside its
/// [`TxLock`]: the indexes and the completion ring (consumed only here).
struct XskProd {
    sh: Arc<XskTxShared>,
    comp: Ring<u64>,
    reserved: u64,
    published: u64,
    completed: u64,
    comp_cons: u32,
    /// The kernel left published frames in the tx ring (copy mode sends a
    /// bounded number per kick): the next publish asks for a kick.
    left_in_ring: bool,
}

/// What the producer, the writers and the kick share: slot `s` is tx ring
/// entry `s` and UMEM chunk `s mod n` of the transmit area.
struct XskTxShared {
    sock: Arc<OwnedFd>,
    /// Keeps the chunks `base` points into alive.
    _umem: Arc<Umem>,
    base: usize,
    tx_base: u64,
    frame_size: u32,
    n: u64,
    /// `n - 1`: `n` is a power of two (half of `frames_per_queue`), so a
    /// slot's chunk is `slot & n_mask` (no division per frame).
    n_mask: u64,
    tx: Ring<XdpDesc>,
    stats: Arc<TxStats>,
}

/// The transmit half of one XDP socket.
pub struct XskTx {
    sh: Arc<XskTxShared>,
    lock: TxLock<XskProd>,
    link: Arc<LinkState>,
}

/// Most kicks per publish (while each takes frames): copy mode sends at most
/// its budget per sendto(), 32 on kernels before 6.17.
const MAX_KICKS: u32 = 64;

impl XskTxShared {
    /// `sendto()` kicks until the kernel took every published frame, while
    /// it makes progress (at most `MAX_KICKS`). Never called under the
    /// transmit lock. A kick the kernel refuses for now (EAGAIN, EBUSY,
    /// ENOBUFS: socket buffer full, or the veth peer's ring full and its
    /// queue stopped until the peer polls) without taking a frame ends the
    /// loop: retrying at once only burns system calls (up to 64 per
    /// publish, 2 per frame, when the peer's NAPI runs in a thread). The
    /// frames stay in the ring; the next publisher kicks them (`free_slots`
    /// notices them), or `kick_stalled` when the ring is full.
    fn kick_until_drained(&self) {
        let mut cons = self.tx.cons().load(Ordering::Acquire);
        for _ in 0..MAX_KICKS {
            self.stats.kicks.fetch_add(1, Ordering::Relaxed);
            let refused = match kick(self.sock.as_raw_fd()) {
                Ok(()) => false,
                Err(e) => match e.raw_os_error() {
                    Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => true,
                    _ => {
                        self.stats.kick_errors.fetch_add(1, Ordering::Relaxed);
                        return;
                    }
                },
            };
            // Our producer index: what has been published so far.
            let published = self.tx.prod().load(Ordering::Relaxed);
            let now = self.tx.cons().load(Ordering::Acquire);
            if now == published {
                return;
            }
            if refused && now == cons {
                self.stats.kicks_refused.fetch_add(1, Ordering::Relaxed);
                return;
            }
            cons = now;
            // Completions free the kernel's copy budget; reap them later.
        }
    }
}

impl TxProducer for XskProd {
    fn free_slots(&mut self) -> u32 {
        let cprod = self.comp.prod().load(Ordering::Acquire);
        let k = cprod.wrapping_sub(self.comp_cons);
        if k > 0 {
            self.comp_cons = cprod;
            self.comp.cons().store(cprod, Ordering::Release);
            self.completed += k as u64;
        }
        // Frames the kernel left in the ring: the kick that sends them is
        // made after the lock, by the next publisher (or, if the ring is
        // full and nothing is published, by `kick_stalled`).
        if self.published > self.completed
            && self.sh.tx.cons().load(Ordering::Acquire) != self.published as u32
        {
            self.left_in_ring = true;
        }
        (self.sh.n - (self.reserved - self.completed)) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved += n as u64;
        Lease::at(first)
    }

    fn publish_deferred(&mut self, tail: u64, _: &mut TxDrops) -> bool {
        if tail <= self.published {
            return false;
        }
        // Under the transmit lock: one writer at a time, a plain add.
        let f = &self.sh.stats.frames;
        f.store(
            f.load(Ordering::Relaxed) + (tail - self.published),
            Ordering::Relaxed,
        );
        self.published = tail;
        self.sh.tx.prod().store(tail as u32, Ordering::Release);
        std::mem::take(&mut self.left_in_ring) || self.sh.tx.need_wakeup()
    }
}

impl TxQueue for XskTx {
    fn slots_for(&self, len: usize) -> u32 {
        let mtu_max = self.link.mtu() as usize + 14 + 4;
        (len <= self.sh.frame_size as usize && len <= mtu_max) as u32
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        let sh = &*self.sh;
        let first = lease.first;
        for j in 0..frames.len() {
            let (frame, _) = frames.get(j);
            let slot = first + j as u64;
            let len = frame.len().min(sh.frame_size as usize);
            let addr = sh.tx_base + (slot & sh.n_mask) * sh.frame_size as u64;
            // SAFETY: the slot was reserved to this caller (trait
            // contract), so its chunk was completed by the kernel and its
            // ring entry is not yet published (the kernel reads neither
            // until the producer index passes it); nobody else touches
            // either until publish; the chunk is inside the UMEM's transmit
            // area and len <= frame_size.
            unsafe {
                std::ptr::copy_nonoverlapping(
                    frame.as_ptr(),
                    (sh.base + addr as usize) as *mut u8,
                    len,
                );
                *sh.tx.entry(slot as u32) = XdpDesc {
                    addr,
                    len: len as u32,
                    options: 0,
                };
            }
        }
    }

    fn kick(&self, _: &mut TxDrops) {
        // Without the lock: reads only the ring's indexes (atomics).
        self.sh.kick_until_drained();
    }

    fn kick_stalled(&self, _: &mut TxDrops) {
        // Nothing will be published (the ring is full, or the worker goes
        // idle): if the kernel left published frames in it, only a kick
        // sends them.
        if self.kick_pending() {
            self.sh.kick_until_drained();
        }
    }

    fn kick_pending(&self) -> bool {
        // Published frames the kernel has not taken, and it wants a kick
        // to take them (always in copy mode; in zero-copy mode the driver
        // consumes on its own unless it set the flag).
        let tx = &self.sh.tx;
        tx.cons().load(Ordering::Acquire) != tx.prod().load(Ordering::Relaxed) && tx.need_wakeup()
    }
}
