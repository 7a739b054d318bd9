//! Fixtures of the frontend's unit tests: a split ring in anonymous
//! memory, seen both by the queue under test and by the device the test
//! plays; eventfds; the memory and the clock of the cost benches.

use std::sync::Arc;

use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use super::{GPA_BASE, HDR_LEN};
use crate::vhost_user::sys::{GuestMemory, Ring};

pub(super) const N: u16 = 8;
pub(super) const BUF: u64 = 256;

/// Where the buffers of `ring()` start.
pub(super) const BUFS: u64 = 0x4000;

/// The split ring of `q` entries at the start of `mem`: every call is
/// another view of the same ring (ours, or the device's, played by
/// the test).
pub(super) fn ring_at(mem: &Arc<GuestMemory>, q: u16) -> Ring {
    let page = 0x1000u64;
    let avail = (16 * q as u64).div_ceil(page) * page;
    let used = avail + (6 + 2 * q as u64).div_ceil(page) * page;
    Ring::new(mem.clone(), GPA_BASE, GPA_BASE + avail, GPA_BASE + used, q).unwrap()
}

/// A ring of `N` entries in anonymous memory.
pub(super) fn ring() -> (Arc<GuestMemory>, Ring) {
    let mem = Arc::new(GuestMemory::anonymous(GPA_BASE, 0x10000).unwrap());
    let r = ring_at(&mem, N);
    (mem, r)
}

pub(super) fn device_ring(mem: &Arc<GuestMemory>) -> Ring {
    ring_at(mem, N)
}

pub(super) fn kick() -> Arc<EventFd> {
    Arc::new(EventFd::new(EFD_NONBLOCK).unwrap())
}

/// Ring size and buffer offset of the cost benches.
pub(super) const COST_Q: u16 = 1024;
pub(super) const COST_BUFS: u64 = 0x10_0000;

/// Buffer bytes for 1518-byte frames (each buffer holds one).
pub(super) const COST_BUF_B: u64 = (HDR_LEN as u64 + 1518).div_ceil(64) * 64;

/// Memory for a `COST_Q`-entry ring at 0 and its buffers of `buf_b`
/// bytes at `COST_BUFS`.
pub(super) fn cost_memory(buf_b: u64) -> Arc<GuestMemory> {
    let size = COST_BUFS + COST_Q as u64 * buf_b;
    Arc::new(GuestMemory::anonymous(GPA_BASE, size).unwrap())
}

pub(super) fn thread_cpu_ns() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
