//! An eventfd: a queue's interrupt line, a worker's wake-up.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};

use crate::peerfd;

/// A non-blocking eventfd (`EFD_NONBLOCK | EFD_CLOEXEC` when we create it;
/// made non-blocking when adopted from a peer).
///
/// Two sets of reads and writes: [`notify`](Self::notify) and
/// [`drain`](Self::drain) are one plain `write`/`read`, for an eventfd no
/// other process holds; [`signal`](Self::signal) and
/// [`drain_nowait`](Self::drain_nowait) never wait for long even if a peer
/// sharing the eventfd cleared its `O_NONBLOCK` ([`peerfd`]).
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new non-blocking eventfd, counter 0.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adopts an eventfd received from a peer: checks it really is an
    /// eventfd (a pipe or socket could block or be misused) and makes it
    /// non-blocking ([`peerfd::adopt_eventfd`], which also starts the
    /// writers' watchdog). The error says what the descriptor is instead.
    pub fn from_peer(fd: OwnedFd) -> Result<Self, String> {
        peerfd::adopt_eventfd(fd.as_raw_fd()).map_err(|e| format!("interrupt fd is {e}"))?;
        Ok(Self(fd))
    }

    /// The raw descriptor (to send it, or register it in epoll).
    #[inline]
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    /// Adds 1 to the counter (wakes a waiter): one plain `write`. A full
    /// counter (EAGAIN) still leaves the fd readable, which is all a
    /// waiter needs.
    #[inline]
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our fd.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Reads and clears the counter with one plain `read`; returns it (0
    /// if nothing was pending).
    #[inline]
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a valid u64 from our non-blocking fd.
        let r = unsafe {
            libc::read(
                self.0.as_raw_fd(),
                &mut v as *mut u64 as *mut libc::c_void,
                8,
            )
        };
        if r == 8 {
            v
        } else {
            0
        }
    }

    /// Adds 1 to the counter with a write that never waits for long, even
    /// on an eventfd a peer made blocking ([`peerfd::notify`]); false if it
    /// failed.
    #[inline]
    pub fn signal(&self) -> bool {
        peerfd::notify(self.fd())
    }

    /// Reads and clears the counter with a read that never waits, whatever
    /// a peer sharing the eventfd did to its `O_NONBLOCK`
    /// ([`peerfd::drain`]); 0 if it was clear.
    #[inline]
    pub fn drain_nowait(&self) -> u64 {
        peerfd::drain(self.fd())
    }

    /// Whether the eventfd is still non-blocking (a peer sharing it can
    /// clear the flag).
    pub fn is_nonblocking(&self) -> bool {
        peerfd::is_nonblocking(self.fd())
    }
}

impl AsRawFd for EventFd {
    #[inline]
    fn as_raw_fd(&self) -> RawFd {
        self.fd()
    }
}

impl AsFd for EventFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

impl From<EventFd> for OwnedFd {
    fn from(e: EventFd) -> OwnedFd {
        e.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_and_clears() {
        let e = EventFd::new().unwrap();
        assert!(e.is_nonblocking());
        assert_eq!(e.drain(), 0);
        e.notify();
        e.notify();
        assert_eq!(e.drain(), 2);
        assert!(e.signal());
        assert_eq!(e.drain_nowait(), 1);
        assert_eq!(e.drain_nowait(), 0);
    }

    #[test]
    fn only_an_eventfd_is_adopted_from_a_peer() {
        let e = EventFd::new().unwrap();
        let fd = OwnedFd::from(e);
        let e = EventFd::from_peer(fd).unwrap();
        e.notify();
        assert_eq!(e.drain(), 1);
        let (r, _w) = std::io::pipe().unwrap();
        let err = EventFd::from_peer(OwnedFd::from(r)).unwrap_err();
        assert!(err.starts_with("interrupt fd is not an eventfd"), "{err}");
    }
}
