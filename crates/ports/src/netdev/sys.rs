//! System calls of the shared kernel-interface helpers: interface lookup,
//! the rtnetlink link-event socket, an eventfd used to
//! stop the watcher thread. Every `unsafe` block of `netdev` lives here.

use std::ffi::CString;
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

fn cstr(name: &str) -> io::Result<CString> {
    if name.is_empty() || name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::EINVAL));
    }
    CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))
}

/// `if_nametoindex(3)`.
pub fn if_nametoindex(name: &str) -> io::Result<u32> {
    let c = cstr(name)?;
    // SAFETY: `c` is a valid NUL-terminated string for the call's duration.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    if idx == 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(idx)
    }
}

/// `if_indextoname(3)`.
pub fn if_indextoname(index: u32) -> io::Result<String> {
    let mut buf = [0 as libc::c_char; libc::IFNAMSIZ];
    // SAFETY: `buf` has IFNAMSIZ bytes, as the function requires.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(io::Error::last_os_error());
    }
    let bytes: Vec<u8> = buf
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect();
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

/// A NETLINK_ROUTE socket subscribed to link events (`RTMGRP_LINK`).
pub fn rtnl_link_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_nl is plain old data; all-zero is valid.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    sa.nl_groups = libc::RTMGRP_LINK as u32;
    // SAFETY: `sa` is a valid sockaddr_nl of the given length.
    let r = unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(owned)
}

/// Non-blocking `recv(2)` into `buf`; `Ok(None)` when nothing is queued.
pub fn recv_nonblock(fd: RawFd, buf: &mut [u8]) -> io::Result<Option<usize>> {
    // SAFETY: `buf` is valid for writes of its length.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EAGAIN) {
            return Ok(None);
        }
        return Err(e);
    }
    Ok(Some(n as usize))
}

/// A non-blocking eventfd.
pub fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: plain eventfd(2) call; the result is checked before use.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Adds one to an eventfd (wakes a poller).
pub fn eventfd_signal(fd: RawFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64 to an eventfd.
    unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
}

/// Waits until one of `fds` is readable or `timeout_ms` passes; returns a
/// readable flag per fd.
pub fn poll_readable<const N: usize>(fds: [RawFd; N], timeout_ms: i32) -> io::Result<[bool; N]> {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; N];
    for (pf, fd) in p.iter_mut().zip(fds) {
        pf.fd = fd;
    }
    // SAFETY: `p` is a valid array of N pollfd.
    let r = unsafe { libc::poll(p.as_mut_ptr(), N as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::EINTR) {
            return Ok([false; N]);
        }
        return Err(e);
    }
    let mut out = [false; N];
    for (o, pf) in out.iter_mut().zip(p.iter()) {
        *o = pf.revents & (libc::POLLIN | libc::POLLERR | libc::POLLHUP) != 0;
    }
    Ok(out)
}

/// Sends one netlink message to the kernel.
pub fn nl_send(fd: RawFd, msg: &[u8]) -> io::Result<()> {
    // SAFETY: sockaddr_nl is plain old data; all-zero addresses the kernel.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: `msg` is valid for reads of its length, `sa` is a valid
    // sockaddr_nl of the given length.
    let n = unsafe {
        libc::sendto(
            fd,
            msg.as_ptr().cast(),
            msg.len(),
            0,
            &sa as *const libc::sockaddr_nl as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
