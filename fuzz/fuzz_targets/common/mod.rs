//! Helpers shared by the fuzz targets that play a peer over a unix socket:
//! socket pairs, messages with file descriptors attached, memfds and
//! eventfds the input asks for, and open-fd counting for leak checks.
#![allow(dead_code)]

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// A connected pair of unix sockets of type `ty` (`SOCK_STREAM`,
/// `SOCK_SEQPACKET`), close-on-exec.
pub fn pair(ty: i32) -> (OwnedFd, OwnedFd) {
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid array of two ints.
    let r =
        unsafe { libc::socketpair(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0, "socketpair");
    // SAFETY: fresh descriptors we own.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

/// Sends `msg` with `fds` attached (SCM_RIGHTS); false if the socket
/// refused it (full, closed).
pub fn send(sock: RawFd, msg: &[u8], fds: &[RawFd]) -> bool {
    let mut iov = libc::iovec {
        iov_base: msg.as_ptr() as *mut libc::c_void,
        iov_len: msg.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; fields are set below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if !fds.is_empty() {
        let bytes = std::mem::size_of_val(fds);
        // SAFETY: pure computations; the buffer (128 bytes) holds up to 8 fds.
        unsafe {
            mh.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            mh.msg_controllen = libc::CMSG_SPACE(bytes as u32) as usize;
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(bytes as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(c) as *mut RawFd,
                fds.len(),
            );
        }
    }
    // SAFETY: mh points at live buffers.
    let n = unsafe { libc::sendmsg(sock, &mh, libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT) };
    n == msg.len() as isize
}

/// A memfd of `len` bytes, optionally sealed against shrinking.
pub fn memfd(len: u64, seal: bool) -> OwnedFd {
    // SAFETY: a static NUL-terminated name.
    let fd = unsafe {
        libc::memfd_create(
            c"turnout-fuzz".as_ptr(),
            libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING,
        )
    };
    assert!(fd >= 0, "memfd_create");
    // SAFETY: fresh descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: plain syscalls on our descriptor.
    unsafe {
        assert_eq!(libc::ftruncate(fd.as_raw_fd(), len as libc::off_t), 0);
        if seal {
            libc::fcntl(fd.as_raw_fd(), libc::F_ADD_SEALS, libc::F_SEAL_SHRINK);
        }
    }
    fd
}

/// A non-blocking eventfd.
pub fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    assert!(fd >= 0, "eventfd");
    // SAFETY: fresh descriptor we own.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Number of open file descriptors of this process.
pub fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd")
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Reads the input as a sequence of little chunks.
pub struct Input<'a>(pub &'a [u8]);

impl<'a> Input<'a> {
    pub fn u8(&mut self) -> Option<u8> {
        let (&b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(b)
    }
    pub fn u16(&mut self) -> Option<u16> {
        Some(u16::from_le_bytes([self.u8()?, self.u8()?]))
    }
    pub fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes([
            self.u8()?,
            self.u8()?,
            self.u8()?,
            self.u8()?,
        ]))
    }
    /// Up to `n` bytes (fewer at the end of the input).
    pub fn bytes(&mut self, n: usize) -> &'a [u8] {
        let n = n.min(self.0.len());
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        a
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}
