//! The tunnel port's `unsafe` and system calls: the transmit staging ring
//! (written by several workers on disjoint slots, drained under the
//! fabric's lock), narrowing a received frame view to its inner frame, and
//! the control socket (ARP / neighbour discovery out, all-multicast on).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU32, Ordering};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Transmit staging: `slots` buffers of `slot_b` bytes; frame i is written
/// at `headroom` into its slot so the outer header can be put in front of
/// it without moving it. The ring's cursors (reserved head, drained tail)
/// are not in here: they are the tunnel queue's producer state, inside its
/// transmit lock.
pub struct Staging {
    /// `slots * slot_b` bytes, owned (a leaked `Box<[u8]>`, freed in Drop).
    buf: *mut u8,
    lens: Box<[AtomicU32]>,
    slot_b: usize,
    mask: u64,
    headroom: usize,
}

// SAFETY: `buf` is a heap allocation this value owns (freed once, in Drop),
// not tied to a thread.
unsafe impl Send for Staging {}
// SAFETY: several workers use the ring at once, each on slots it owns under
// the fabric's lease protocol: `write` touches only a slot reserved to its
// caller and not yet published (reservation and publication happen under
// the tunnel queue's transmit lock, which the caller of `slot` holds), and
// `slot` hands out a published slot to the lock holder, who drains it
// before the producer can reserve it again. Lengths are atomics.
unsafe impl Sync for Staging {}

impl Staging {
    /// A ring of `slots` (rounded up to a power of two) frames of up to
    /// `max_frame` bytes behind `headroom` bytes of room.
    pub fn new(slots: usize, max_frame: usize, headroom: usize) -> Staging {
        let slots = slots.next_power_of_two();
        let slot_b = (headroom + max_frame).next_multiple_of(64);
        let buf = Box::into_raw(vec![0u8; slots * slot_b].into_boxed_slice()) as *mut u8;
        Staging {
            buf,
            lens: (0..slots).map(|_| AtomicU32::new(0)).collect(),
            slot_b,
            mask: slots as u64 - 1,
            headroom,
        }
    }

    /// Number of slots.
    #[inline]
    pub fn slots(&self) -> u64 {
        self.mask + 1
    }

    /// Copies `frame` (at most the ring's frame size) into `slot`.
    ///
    /// # Safety
    /// `slot` was reserved by the caller and is not published yet; nobody
    /// else writes or reads it.
    #[inline]
    pub unsafe fn write(&self, slot: u64, frame: &[u8]) {
        let i = (slot & self.mask) as usize;
        let n = frame.len().min(self.slot_b - self.headroom);
        // SAFETY: i < slots, so the slot lies inside `buf`, and headroom + n
        // <= slot_b; the caller owns the slot (contract).
        unsafe {
            let base = self.buf.add(i * self.slot_b + self.headroom);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), base, n);
        }
        self.lens[i].store(n as u32, Ordering::Relaxed);
    }

    /// Published slot `slot`, whole (`slot_b` bytes), and the length of the
    /// frame at `[headroom..headroom + len]` in it.
    ///
    /// # Safety
    /// The caller holds the transmit lock, `slot` is published (every
    /// writer of it finished) and not drained yet, and the returned slice
    /// is dropped before the slot is drained (made reservable again).
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slot(&self, slot: u64) -> (&mut [u8], usize) {
        let i = (slot & self.mask) as usize;
        let len = self.lens[i].load(Ordering::Relaxed) as usize;
        // SAFETY: the slot lies inside `buf`; by the contract only the lock
        // holder sees it until it is drained, so the `&mut` is unique.
        let b =
            unsafe { std::slice::from_raw_parts_mut(self.buf.add(i * self.slot_b), self.slot_b) };
        (b, len)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let len = self.lens.len() * self.slot_b;
        // SAFETY: `buf` came from a Box<[u8]> of exactly `len` bytes.
        unsafe {
            drop(Box::from_raw(std::ptr::slice_from_raw_parts_mut(
                self.buf, len,
            )))
        };
    }
}

/// A raw AF_PACKET socket bound to `ifindex` for sending only (protocol 0),
/// with all-multicast reception turned on for the interface while it lives
/// (IPv6 neighbour solicitations go to solicited-node multicast MACs).
pub fn control_socket(ifindex: u32) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the result is checked before use.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: fd is a fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a valid sockaddr_ll of the given length.
    cvt(unsafe {
        libc::bind(
            sock.as_raw_fd(),
            &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    })?;
    // SAFETY: packet_mreq is plain old data; all-zero is valid.
    let mut mr: libc::packet_mreq = unsafe { std::mem::zeroed() };
    mr.mr_ifindex = ifindex as i32;
    mr.mr_type = libc::PACKET_MR_ALLMULTI as u16;
    // SAFETY: `mr` is a live packet_mreq of the given size.
    cvt(unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_ADD_MEMBERSHIP,
            (&mr as *const libc::packet_mreq).cast(),
            std::mem::size_of::<libc::packet_mreq>() as u32,
        )
    })?;
    Ok(sock)
}

/// Sends one frame on the control socket.
pub fn send(sock: &OwnedFd, frame: &[u8]) -> io::Result<()> {
    // SAFETY: `frame` is a live buffer of the given length.
    let r = unsafe { libc::send(sock.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The hardware address of interface `name` (SIOCGIFHWADDR).
pub fn hwaddr(name: &str) -> io::Result<[u8; 6]> {
    if name.len() >= libc::IFNAMSIZ {
        return Err(io::Error::from_raw_os_error(libc::ENAMETOOLONG));
    }
    // SAFETY: plain socket(2); checked.
    let fd = cvt(unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: fresh descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data; all-zero is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: `req` is a valid ifreq the kernel fills.
    cvt(unsafe { libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFHWADDR, &mut req) })?;
    // SAFETY: SIOCGIFHWADDR filled the ifru_hwaddr member.
    let sa = unsafe { req.ifr_ifru.ifru_hwaddr };
    let mut mac = [0u8; 6];
    for (d, s) in mac.iter_mut().zip(sa.sa_data.iter()) {
        *d = *s as u8;
    }
    Ok(mac)
}
