//! A small epoll set.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// An epoll set whose entries report `u64` tokens; level-triggered.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// Creates one (`EPOLL_CLOEXEC`).
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The epoll descriptor (readable when a watched fd is: a queue's
    /// stable notify fd).
    #[inline]
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Watches `fd` for readability (`EPOLLIN`) under `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        self.add_events(fd, libc::EPOLLIN as u32, token)
    }

    /// Watches `fd` for `events` (e.g. `EPOLLIN | EPOLLRDHUP`) under
    /// `token`.
    pub fn add_events(&self, fd: RawFd, events: u32, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event { events, u64: token };
        // SAFETY: ev is valid for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd` (no error if it was not watched, or is closed).
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: ev is valid for the duration of the call; errors (fd
        // already closed, not watched) are harmless here.
        unsafe { libc::epoll_ctl(self.fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Waits up to `timeout_ms` (0 = just look, -1 = forever); fills
    /// `events` and returns how many are ready. Any error (EINTR included)
    /// counts as none ready.
    #[inline]
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: events is a valid writable array of the given length.
        let n = unsafe {
            libc::epoll_wait(
                self.fd(),
                events.as_mut_ptr(),
                events.len() as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            0
        } else {
            n as usize
        }
    }

    /// Waits up to `timeout_ms` and appends `(token, events)` of at most 32
    /// ready entries to `out`. An interrupted wait (EINTR) appends nothing
    /// and is no error; other errors are returned.
    pub fn wait_into(&self, out: &mut Vec<(u64, u32)>, timeout_ms: i32) -> io::Result<()> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 32];
        // SAFETY: the buffer holds 32 events.
        let n = unsafe { libc::epoll_wait(self.fd(), evs.as_mut_ptr(), 32, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(e)
            };
        }
        for ev in &evs[..n as usize] {
            let (t, e) = (ev.u64, ev.events);
            out.push((t, e));
        }
        Ok(())
    }
}

impl AsRawFd for Epoll {
    #[inline]
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::EventFd;

    #[test]
    fn reports_the_token_of_a_readable_fd() {
        let ep = Epoll::new().unwrap();
        let e = EventFd::new().unwrap();
        ep.add(e.fd(), 7).unwrap();
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 4];
        assert_eq!(ep.wait(&mut evs, 0), 0);
        e.notify();
        assert_eq!(ep.wait(&mut evs, 1000), 1);
        let t = evs[0].u64;
        assert_eq!(t, 7);
        let mut out = Vec::new();
        ep.wait_into(&mut out, 0).unwrap();
        assert_eq!(out, vec![(7, libc::EPOLLIN as u32)]);
        ep.remove(e.fd());
        ep.wait_into(&mut out, 0).unwrap();
        assert_eq!(out.len(), 1);
    }
}
