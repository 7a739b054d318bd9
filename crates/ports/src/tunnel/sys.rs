//! The tunnel port's `unsafe` and system calls: the transmit staging ring
//! (written by several workers on disjoint slots, drained under the
//! fabric's lock), narrowing a received frame view to its inner frame, and
//! the control socket (ARP / neighbour discovery out, all-multicast on).

use std::cell::UnsafeCell;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// Transmit staging: `slots` buffers of `slot_b` bytes; frame i is written
/// at `headroom` into its slot so the outer header can be put in front of
/// it without moving it.
pub struct Staging {
    buf: UnsafeCell<Box<[u8]>>,
    lens: UnsafeCell<Box<[u32]>>,
    state: UnsafeCell<(u64, u64)>,
    slot_b: usize,
    mask: u64,
    headroom: usize,
}

// SAFETY: access follows the fabric's transmit protocol: `state` is only
// touched under the destination lock (reserve / publish / free), `write`
// touches only the caller's reserved, unpublished slot, and `drain` reads
// slots under the lock after every writer of them finished.
unsafe impl Sync for Staging {}
unsafe impl Send for Staging {}

impl Staging {
    /// A ring of `slots` (a power of two) frames of up to `max_frame` bytes
    /// behind `headroom` bytes of room.
    pub fn new(slots: usize, max_frame: usize, headroom: usize) -> Staging {
        let slots = slots.next_power_of_two();
        let slot_b = (headroom + max_frame).next_multiple_of(64);
        Staging {
            buf: UnsafeCell::new(vec![0u8; slots * slot_b].into_boxed_slice()),
            lens: UnsafeCell::new(vec![0u32; slots].into_boxed_slice()),
            state: UnsafeCell::new((0, 0)),
            slot_b,
            mask: slots as u64 - 1,
            headroom,
        }
    }

    /// Free slots.
    ///
    /// # Safety
    /// Caller holds the destination lock.
    #[inline]
    pub unsafe fn free(&self) -> u32 {
        let (head, drained) = *self.state.get();
        ((self.mask + 1) - (head - drained)) as u32
    }

    /// Reserves `n` slots; returns the first.
    ///
    /// # Safety
    /// Caller holds the destination lock and `n <= free()`.
    #[inline]
    pub unsafe fn reserve(&self, n: u32) -> u64 {
        let st = &mut *self.state.get();
        let first = st.0;
        st.0 += n as u64;
        first
    }

    /// Copies `frame` (at most the ring's frame size) into `slot`.
    ///
    /// # Safety
    /// `slot` was reserved by the caller and is not drained yet; nobody
    /// else writes it.
    #[inline]
    pub unsafe fn write(&self, slot: u64, frame: &[u8]) {
        let i = (slot & self.mask) as usize;
        let n = frame.len().min(self.slot_b - self.headroom);
        let base = (*self.buf.get())
            .as_mut_ptr()
            .add(i * self.slot_b + self.headroom);
        std::ptr::copy_nonoverlapping(frame.as_ptr(), base, n);
        *(*self.lens.get()).as_mut_ptr().add(i) = n as u32;
    }

    /// Calls `f(slot_bytes, frame_len)` for every slot from the last drained
    /// one up to `tail` (exclusive), in order; the frame is at
    /// `slot_bytes[headroom..headroom + frame_len]`.
    ///
    /// # Safety
    /// Caller holds the destination lock; every slot before `tail` was
    /// written.
    #[inline]
    pub unsafe fn drain(&self, tail: u64, mut f: impl FnMut(&mut [u8], usize)) {
        let st = &mut *self.state.get();
        let buf = &mut *self.buf.get();
        let lens = &*self.lens.get();
        while st.1 < tail {
            let i = (st.1 & self.mask) as usize;
            f(
                &mut buf[i * self.slot_b..(i + 1) * self.slot_b],
                lens[i] as usize,
            );
            st.1 += 1;
        }
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
