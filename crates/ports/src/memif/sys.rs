//! Everything of the memif backend that is `unsafe` or a system call:
//! memfd regions and their mappings (on `floor::Mmap`), eventfds and epoll
//! (`floor`'s, re-exported), SOCK_SEQPACKET unix
//! sockets with `SCM_RIGHTS`, and the two places where frame views are handed
//! to the fabric.
//!
//! The rest of the backend is safe code. Shared memory is only reached
//! through [`Region`], whose accessors check every offset against the
//! mapping's length, so no value a peer writes can make us touch memory
//! outside a mapping. The peer can still change bytes while we read them;
//! every descriptor is therefore copied out once and validated on the copy.

#![allow(clippy::manual_is_multiple_of)] // MSRV 1.75

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::{AtomicU16, AtomicU32, Ordering};

use fabric::RxPusher;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

fn cvt_isize(r: isize) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r as usize)
    }
}

fn own(fd: libc::c_int) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful syscall that creates a
    // new descriptor; nobody else owns it.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

// ---------------------------------------------------------------------------
// Shared memory regions
// ---------------------------------------------------------------------------

/// A shared memory region mapped read/write into this process.
///
/// The mapping lives as long as the `Region`; it is unmapped on drop. Every
/// accessor checks its offset and length against the mapping.
pub struct Region {
    map: floor::Mmap,
    /// The memfd, kept by the side that created it (the client) so it can be
    /// sent to the server.
    fd: Option<OwnedFd>,
}

// SAFETY: the region owns its mapping (a `floor::Mmap`, unmapped once when
// it drops) and is only an address
// and a length, usable from any thread. The memory is shared
// with the peer process, which may write any byte of it at any time, so no
// Rust reference to it is ever formed except atomics: ring indexes, flags
// and cookies are read and written as atomics, descriptors as volatile
// copies, frame bytes with raw-pointer copies (`copy_in`/`copy_out`), every
// accessor bounds-checked against the mapping, and every value read is
// validated before it is used as an offset or length. Between our own
// threads, slots are owned one at a time (receive: the queue's worker;
// transmit: the lease's worker until publish). Zero-copy receive views
// (`push_region`) can still see the peer change frame bytes under them,
// never their location or length (docs/memif.md).
unsafe impl Send for Region {}
// SAFETY: as for Send.
unsafe impl Sync for Region {}

impl Region {
    /// Creates a sealed (cannot shrink) memfd of `len` bytes and maps it.
    pub fn create(name: &str, len: usize) -> io::Result<Region> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty region"));
        }
        let cname = CString::new(name).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
        // SAFETY: cname is a valid NUL-terminated string.
        let fd = own(cvt(unsafe {
            libc::memfd_create(cname.as_ptr(), libc::MFD_ALLOW_SEALING | libc::MFD_CLOEXEC)
        })?);
        // SAFETY: plain syscalls on a descriptor we own.
        cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
        // SAFETY: as above.
        cvt(unsafe {
            libc::fcntl(
                fd.as_raw_fd(),
                libc::F_ADD_SEALS,
                libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL,
            )
        })?;
        let map = floor::Mmap::of_fd(fd.as_raw_fd(), len).map()?;
        Ok(Region { map, fd: Some(fd) })
    }

    /// Maps a region received from a peer. The file must be at least `len`
    /// bytes long and, if `require_seal`, sealed against shrinking (otherwise
    /// the peer could truncate it under us and turn our reads into SIGBUS).
    /// The descriptor is closed once mapped.
    pub fn map_peer(fd: OwnedFd, len: u64, require_seal: bool) -> Result<Region, String> {
        if len == 0 {
            return Err("region size 0".into());
        }
        let len_us = usize::try_from(len).map_err(|_| format!("region size {len} too large"))?;
        // SAFETY: fstat fills a plain struct we own.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: valid fd and pointer.
        cvt(unsafe { libc::fstat(fd.as_raw_fd(), &mut st) })
            .map_err(|e| format!("region fd: {e}"))?;
        if st.st_mode & libc::S_IFMT != libc::S_IFREG {
            return Err("region fd is not a regular file or memfd".into());
        }
        if (st.st_size as u64) < len {
            return Err(format!(
                "region file is {} bytes, announced {len}",
                st.st_size
            ));
        }
        if require_seal {
            // SAFETY: plain fcntl on a descriptor we own.
            let seals = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_GET_SEALS) };
            if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
                return Err("region memfd is not sealed against shrinking (F_SEAL_SHRINK)".into());
            }
        }
        let map = floor::Mmap::of_fd(fd.as_raw_fd(), len_us)
            .map()
            .map_err(|e| format!("mmap region of {len} bytes: {e}"))?;
        Ok(Region { map, fd: None })
    }

    /// Fills this process's page tables for the first `len` bytes of the
    /// mapping (all of it if `len` is larger), writable, on the control
    /// path: a page of a memfd mapping costs a page fault at its first
    /// touch through *each* mapping, and on the data path that is a fault
    /// per new buffer page until the ring has come round once (a 8192-slot
    /// ring of 2 KiB buffers: 8192 frames, 0.8 s at 10 kpps; ~5 µs per
    /// frame on this project's nested VM, docs/memif.md "Prefaulted
    /// regions"). `MADV_POPULATE_WRITE` (Linux 5.14): pages the peer has
    /// not touched yet are allocated now, as a lap of the ring would.
    /// Best effort: an error (an older kernel, a peer that truncated an
    /// unsealed memfd: EFAULT instead of a SIGBUS) leaves the faults to the
    /// data path, as before.
    pub fn prefault(&self, len: usize) -> io::Result<()> {
        self.map.populate_write(0, len)
    }

    /// Size of the mapping.
    #[inline]
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// The memfd, if this side created the region.
    pub fn raw_fd(&self) -> Option<RawFd> {
        self.fd.as_ref().map(|f| f.as_raw_fd())
    }

    /// Hints the CPU to fetch the cache line at `off` for writing (so a
    /// store to it a little later does not wait for the peer core to give
    /// the line up). Out of bounds: nothing.
    #[inline]
    pub fn prefetch_write(&self, off: usize) {
        if off < self.map.len() {
            fabric::sys::prefetch_write(self.map.as_ptr().wrapping_add(off));
        }
    }

    #[inline]
    fn fits(&self, off: usize, n: usize) -> bool {
        off <= self.map.len() && n <= self.map.len() - off
    }

    #[inline]
    fn atomic_u16(&self, off: usize) -> Option<&AtomicU16> {
        if !self.fits(off, 2) || off % 2 != 0 {
            return None;
        }
        // SAFETY: in bounds and 2-byte aligned (the mapping is page aligned);
        // the memory lives as long as &self; AtomicU16 has u16's layout.
        Some(unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU16) })
    }

    /// Atomic load of a ring index or flags word (0 if out of bounds, which
    /// validated ring placements rule out).
    #[inline]
    pub fn load_u16(&self, off: usize, o: Ordering) -> u16 {
        self.atomic_u16(off).map_or(0, |a| a.load(o))
    }

    /// Atomic store of a ring index or flags word (ignored if out of bounds).
    #[inline]
    pub fn store_u16(&self, off: usize, v: u16, o: Ordering) {
        if let Some(a) = self.atomic_u16(off) {
            a.store(v, o)
        }
    }

    /// Atomic load of a 32-bit word (the ring cookie).
    #[inline]
    pub fn load_u32(&self, off: usize) -> u32 {
        if !self.fits(off, 4) || off % 4 != 0 {
            return 0;
        }
        // SAFETY: in bounds, aligned, AtomicU32 has u32's layout.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }.load(Ordering::Relaxed)
    }

    /// Stores a 32-bit word.
    #[inline]
    pub fn store_u32(&self, off: usize, v: u32) {
        if !self.fits(off, 4) || off % 4 != 0 {
            return;
        }
        // SAFETY: in bounds, aligned, AtomicU32 has u32's layout.
        unsafe { &*(self.map.as_ptr().add(off) as *const AtomicU32) }.store(v, Ordering::Relaxed)
    }

    /// Reads the first `N` 4-byte little-endian words of a descriptor at
    /// `off`, each with one volatile load (so the value validated is the
    /// value used, and a descriptor costs `N` loads, not 16 byte loads and
    /// their reassembly). Zeroes if out of bounds. Descriptors lie 4-byte
    /// aligned (ring offsets are checked when a ring is added); a
    /// misaligned `off` is read byte by byte.
    #[inline]
    pub fn read_words<const N: usize>(&self, off: usize) -> [u32; N] {
        let mut w = [0u32; N];
        if !self.fits(off, 4 * N) {
            return w;
        }
        if off % 4 != 0 {
            for (i, x) in w.iter_mut().enumerate() {
                let mut b = [0u8; 4];
                for (j, y) in b.iter_mut().enumerate() {
                    // SAFETY: in bounds (checked above); u8 has alignment 1.
                    *y = unsafe { std::ptr::read_volatile(self.map.as_ptr().add(off + 4 * i + j)) };
                }
                *x = u32::from_le_bytes(b);
            }
            return w;
        }
        // SAFETY: in bounds and 4-byte aligned (the mapping is page aligned).
        let p = unsafe { self.map.as_ptr().add(off) } as *const u32;
        for (i, x) in w.iter_mut().enumerate() {
            // SAFETY: word i of the checked range.
            *x = u32::from_le(unsafe { std::ptr::read_volatile(p.add(i)) });
        }
        w
    }

    /// Writes `w` as little-endian 4-byte words at `off` (the first fields
    /// of a descriptor), one volatile store each. Ignored if out of
    /// bounds; byte by byte if `off` is misaligned (see `read_words`).
    #[inline]
    pub fn write_words<const N: usize>(&self, off: usize, w: [u32; N]) {
        if !self.fits(off, 4 * N) {
            return;
        }
        if off % 4 != 0 {
            for (i, x) in w.iter().enumerate() {
                for (j, y) in x.to_le_bytes().into_iter().enumerate() {
                    // SAFETY: in bounds (checked above); u8 has alignment 1.
                    unsafe { std::ptr::write_volatile(self.map.as_ptr().add(off + 4 * i + j), y) };
                }
            }
            return;
        }
        // SAFETY: in bounds and 4-byte aligned.
        let p = unsafe { self.map.as_ptr().add(off) } as *mut u32;
        for (i, x) in w.into_iter().enumerate() {
            // SAFETY: word i of the checked range.
            unsafe { std::ptr::write_volatile(p.add(i), x.to_le()) };
        }
    }

    /// The descriptor table of a ring: `size` (a power of two) 16-byte
    /// descriptors at `off`, checked once to lie inside the mapping and
    /// 4-byte aligned, so that a burst reads and writes them without a
    /// check per access. `None` if they do not (ring placements are
    /// validated when a ring is added: not expected).
    #[inline]
    pub fn descs(&self, off: usize, size: u32) -> Option<Descs<'_>> {
        let bytes = (size as usize).checked_mul(16)?;
        if !size.is_power_of_two() || size > 1 << 16 || off % 4 != 0 || !self.fits(off, bytes) {
            return None;
        }
        Some(Descs {
            // SAFETY: off + bytes <= len (checked above).
            base: unsafe { self.map.as_ptr().add(off) } as *mut u32,
            mask: (size - 1) as u16,
            _region: std::marker::PhantomData,
        })
    }

    /// Writes 16 bytes (a descriptor). Ignored if out of bounds.
    #[inline]
    pub fn write16(&self, off: usize, v: [u8; 16]) {
        if !self.fits(off, 16) {
            return;
        }
        // SAFETY: in bounds; [u8; 16] has alignment 1.
        unsafe { std::ptr::write_volatile(self.map.as_ptr().add(off) as *mut [u8; 16], v) }
    }

    /// The `len` bytes at `off` as a slice to write into; `None` if they
    /// do not lie inside the mapping.
    ///
    /// # Safety
    /// Nobody of ours reads or writes those bytes while the slice lives,
    /// and the protocol keeps the peer off them too (the buffer of a
    /// transmit slot we reserved and have not published). A peer that
    /// breaks the protocol and writes them meanwhile changes only frames
    /// addressed to itself.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, off: usize, len: usize) -> Option<&mut [u8]> {
        if !self.fits(off, len) {
            return None;
        }
        // SAFETY: in bounds of the mapping (checked above), which lives as
        // long as `self`; exclusive use is the caller's contract.
        Some(unsafe { std::slice::from_raw_parts_mut(self.map.as_ptr().add(off), len) })
    }

    /// Copies `src` into the region at `off`; false (nothing copied) if it
    /// does not fit. A frame `fabric::sys::streams` picks (large, on a
    /// thread that streams) is written with non-temporal stores
    /// (`fabric::sys::copy_streaming`): the caller fences
    /// (`fabric::sys::store_fence`) before it publishes the buffer.
    #[inline]
    pub fn copy_in(&self, off: usize, src: &[u8]) -> bool {
        if !self.fits(off, src.len()) {
            return false;
        }
        // SAFETY: destination in bounds of the mapping; source is a Rust
        // slice; they cannot overlap (the slice is not in this mapping's
        // slots being written, which the ring protocol reserves for us).
        unsafe {
            let dst = self.map.as_ptr().add(off);
            if fabric::sys::streams(fabric::sys::CopyInto::Memif, src.len()) {
                fabric::sys::copy_streaming(dst, src.as_ptr(), src.len())
            } else {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst, src.len())
            }
        };
        true
    }

    /// Copies `dst.len()` bytes at `off` into `dst`; false if out of bounds.
    #[inline]
    pub fn copy_out(&self, off: usize, dst: &mut [u8]) -> bool {
        if !self.fits(off, dst.len()) {
            return false;
        }
        // SAFETY: source in bounds of the mapping; destination is a Rust
        // slice in our own memory.
        unsafe {
            std::ptr::copy_nonoverlapping(self.map.as_ptr().add(off), dst.as_mut_ptr(), dst.len())
        };
        true
    }
}

/// A ring's descriptor table inside a [`Region`] (see [`Region::descs`]):
/// descriptor `i & mask` is read and written as 4-byte words with volatile
/// accesses, with no bounds check (the table was checked once). Borrows
/// the region, so it cannot outlive the mapping.
pub struct Descs<'a> {
    base: *mut u32,
    mask: u16,
    _region: std::marker::PhantomData<&'a Region>,
}

impl Descs<'_> {
    /// Word offset of descriptor `slot`'s first word.
    #[inline]
    fn at(&self, slot: u16) -> usize {
        (slot & self.mask) as usize * 4
    }

    /// The first `N` (at most 4) words of descriptor `slot`, one volatile
    /// load each (see [`Region::read_words`]).
    #[inline]
    pub fn read<const N: usize>(&self, slot: u16) -> [u32; N] {
        let mut w = [0u32; N];
        let at = self.at(slot);
        for (i, x) in w.iter_mut().enumerate().take(4) {
            // SAFETY: word at + i < 4 * (mask + 1) lies in the table checked
            // by `Region::descs` (4-byte aligned), which the borrow keeps
            // mapped.
            *x = u32::from_le(unsafe { std::ptr::read_volatile(self.base.add(at + i)) });
        }
        w
    }

    /// Writes the first `N` (at most 4) words of descriptor `slot`, one
    /// volatile store each.
    #[inline]
    pub fn write<const N: usize>(&self, slot: u16, w: [u32; N]) {
        let at = self.at(slot);
        for (i, x) in w.into_iter().enumerate().take(4) {
            // SAFETY: as in `read`.
            unsafe { std::ptr::write_volatile(self.base.add(at + i), x.to_le()) };
        }
    }

    /// Hints the CPU to fetch descriptor `slot`.
    #[inline]
    pub fn prefetch(&self, slot: u16) {
        fabric::sys::prefetch_read(self.base.wrapping_add(self.at(slot)) as *const u8);
    }
}

/// Appends a zero-copy view of `len` bytes of `region` at `off` to `batch`.
/// False if out of bounds or the batch is full.
///
/// The view stays valid because the receive queue holds the region's
/// connection (an `Arc`) until `release`, and the ring protocol gives the
/// slot to us until we move the consumer index past it.
#[inline]
pub fn push_region(batch: &mut RxPusher<'_, '_>, region: &Region, off: usize, len: usize) -> bool {
    if !region.fits(off, len) || len > u32::MAX as usize {
        return false;
    }
    // SAFETY: in bounds of a mapping kept alive until release (see above).
    unsafe { batch.push(region.map.as_ptr().add(off), len as u32) }
}

// ---------------------------------------------------------------------------
// eventfd and epoll
// ---------------------------------------------------------------------------

/// The eventfd (a ring's interrupt line, a control thread's wake-up) and
/// the epoll set (a receive queue's stable notify fd: the interrupt eventfd
/// of each connection is added to it while the connection lives, so the fd
/// the worker sleeps on never changes across reconnects) are `floor`'s.
/// The memif side of an eventfd is shared with the peer: it is read with
/// [`EventFd::drain_nowait`] and written with [`EventFd::signal`], which
/// never wait whatever the peer does to the descriptor.
pub use floor::{Epoll, EventFd};

/// What memif watches in its epoll sets: input, and a socket's peer
/// hanging up.
pub const WATCH: u32 = (libc::EPOLLIN | libc::EPOLLRDHUP) as u32;

/// Waits until `fd` is readable (or hung up) for at most `timeout_ms`.
pub fn wait_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(n > 0)
}

// ---------------------------------------------------------------------------
// SOCK_SEQPACKET unix sockets
// ---------------------------------------------------------------------------

/// Connects a non-blocking SOCK_SEQPACKET socket to `path` (never waits:
/// a full backlog is `EAGAIN`).
pub fn connect(path: &Path) -> io::Result<OwnedFd> {
    floor::connect_unix(path, libc::SOCK_SEQPACKET)
}

/// Binds and listens on `path` with permissions `mode`: a non-blocking
/// SOCK_SEQPACKET socket that appears at `path` already listening, with its
/// mode set; a stale socket file (nobody listening) is replaced, a live one
/// is an `AddrInUse` error ([`floor::listen_unix`]).
pub fn listen(path: &Path, mode: u32) -> io::Result<OwnedFd> {
    floor::listen_unix(path, libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK, mode)
}

/// Accepts one pending connection (non-blocking); `None` if none is pending.
pub fn accept(listener: RawFd) -> io::Result<Option<OwnedFd>> {
    // SAFETY: valid listening socket; we do not want the peer address.
    let r = unsafe {
        libc::accept4(
            listener,
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::ECONNABORTED) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    Ok(Some(own(r)))
}

/// Sends one message, with `pass` attached as `SCM_RIGHTS` if given. Never
/// blocks (a peer that does not read its control socket gets an error).
pub fn send_msg(fd: RawFd, msg: &[u8], pass: Option<RawFd>) -> io::Result<()> {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    // u64 array: aligned for cmsghdr.
    let mut ctl = [0u64; 8];
    // SAFETY: msghdr is plain data.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if let Some(pfd) = pass {
        // SAFETY: CMSG_SPACE is a pure computation.
        let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<RawFd>() as u32) } as usize;
        mh.msg_control = ctl.as_mut_ptr() as *mut libc::c_void;
        mh.msg_controllen = space;
        // SAFETY: the control buffer (64 bytes) holds one cmsg with one fd;
        // CMSG_FIRSTHDR returns a pointer inside it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<RawFd>() as u32) as usize;
            std::ptr::write_unaligned(libc::CMSG_DATA(c) as *mut RawFd, pfd);
        }
    }
    // SAFETY: valid socket and fully initialised msghdr.
    let n = cvt_isize(unsafe { libc::sendmsg(fd, &mh, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) })?;
    if n != msg.len() {
        return Err(io::Error::new(io::ErrorKind::WriteZero, "short send"));
    }
    Ok(())
}

/// What one `recv_msg` got.
pub struct Received {
    /// Bytes of the message (0 = the peer hung up).
    pub len: usize,
    /// The message was longer than the buffer.
    pub truncated: bool,
    /// First descriptor passed with it, if any.
    pub fd: Option<OwnedFd>,
    /// Descriptors passed beyond the first (closed), or lost to a truncated
    /// control buffer.
    pub extra_fds: bool,
}

/// Receives one message without blocking. `Ok(None)` if nothing is pending.
pub fn recv_msg(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<Received>> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr() as *mut libc::c_void,
        iov_len: buf.len(),
    };
    let mut ctl = [0u64; 16]; // room for several fds; extras are closed
                              // SAFETY: msghdr is plain data.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = ctl.as_mut_ptr() as *mut libc::c_void;
    mh.msg_controllen = std::mem::size_of_val(&ctl);
    // SAFETY: valid socket and msghdr pointing at our buffers.
    let r = unsafe { libc::recvmsg(fd, &mut mh, libc::MSG_DONTWAIT | libc::MSG_CMSG_CLOEXEC) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
            _ => Err(e),
        };
    }
    let mut out = Received {
        len: r as usize,
        truncated: mh.msg_flags & libc::MSG_TRUNC != 0,
        fd: None,
        extra_fds: mh.msg_flags & libc::MSG_CTRUNC != 0,
    };
    // SAFETY: walking the control messages the kernel wrote into `ctl`,
    // with the kernel-provided lengths; every received descriptor is taken
    // into an OwnedFd exactly once.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(c);
                let hdr = libc::CMSG_LEN(0) as usize;
                let n = ((*c).cmsg_len as usize).saturating_sub(hdr) / std::mem::size_of::<RawFd>();
                for i in 0..n {
                    let raw = std::ptr::read_unaligned((data as *const RawFd).add(i));
                    let o = OwnedFd::from_raw_fd(raw);
                    if out.fd.is_none() {
                        out.fd = Some(o);
                    } else {
                        out.extra_fds = true; // dropped = closed
                    }
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    Ok(Some(out))
}

/// Inode of a file (to recognise our own socket file later).
pub fn inode(path: &Path) -> Option<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::symlink_metadata(path).ok().map(|m| m.ino())
}

/// Removes a socket file if it is still the one we created (`ino`): a newer
/// server may have replaced it.
pub fn unlink_if(path: &Path, ino: Option<u64>) {
    if ino.is_some() && inode(path) == ino {
        let _ = std::fs::remove_file(path);
    }
}

/// A memfd without seals (what a careless or lying peer sends; tests of
/// the seal check).
#[cfg(any(test, feature = "test-utils"))]
pub fn memfd_unsealed(len: usize) -> io::Result<OwnedFd> {
    let name =
        CString::new("unsealed").map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: valid NUL-terminated name.
    let fd = own(cvt(unsafe {
        libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC)
    })?);
    // SAFETY: plain syscall on our descriptor.
    cvt(unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) })?;
    Ok(fd)
}

/// A pipe whose buffer is full, its write end left blocking: a write to
/// it waits until someone reads (what a lying peer passes as an interrupt
/// fd; tests of the eventfd check). Returns (read end, write end).
#[cfg(any(test, feature = "test-utils"))]
pub fn full_blocking_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 fills two descriptors into our array.
    cvt(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) })?;
    let (r, w) = (own(fds[0]), own(fds[1]));
    let chunk = [0u8; 4096];
    // SAFETY: writes from a local buffer until the (non-blocking) pipe is
    // full.
    while unsafe { libc::write(w.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    // SAFETY: plain fcntl calls on our descriptor.
    let fl = cvt(unsafe { libc::fcntl(w.as_raw_fd(), libc::F_GETFL) })?;
    // SAFETY: as above.
    cvt(unsafe { libc::fcntl(w.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK) })?;
    Ok((r, w))
}
