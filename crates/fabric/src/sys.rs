//! The few system facilities the fabric itself needs: a cycle counter, a
//! coarse monotonic clock, eventfd and epoll, CPU pinning. All `unsafe` of
//! the crate outside the pipe port lives here.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Reads the time-stamp counter (cycles); falls back to nanoseconds where
/// there is none.
#[inline]
pub fn cycles() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        now_ns()
    }
}

/// Monotonic time in nanoseconds (vDSO, no system call).
#[inline]
pub fn now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in nanoseconds (a system call:
/// the vDSO does not serve thread clocks; about 0.3 µs).
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Coarse monotonic time in nanoseconds (jiffy resolution, cheapest read).
#[inline]
pub fn coarse_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Measures the cycle counter's frequency against the monotonic clock.
pub fn calibrate_cycles_hz() -> u64 {
    let (c0, t0) = (cycles(), now_ns());
    std::thread::sleep(std::time::Duration::from_millis(20));
    let (c1, t1) = (cycles(), now_ns());
    let dt = (t1 - t0).max(1);
    ((c1 - c0) as u128 * 1_000_000_000 / dt as u128) as u64
}

/// A non-blocking eventfd.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// Creates one.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Adds 1 to the counter (wakes a waiter).
    pub fn notify(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a valid u64 to our fd. A full counter
        // (EAGAIN) still leaves the fd readable, which is all we need.
        unsafe {
            libc::write(
                self.0.as_raw_fd(),
                &one as *const u64 as *const libc::c_void,
                8,
            )
        };
    }

    /// Reads and clears the counter; returns it (0 if nothing was pending).
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

    /// The raw descriptor (for epoll).
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// A minimal epoll set; tokens are u64.
#[derive(Debug)]
pub struct Epoll(OwnedFd);

impl Epoll {
    /// Creates one.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain syscall; the returned fd is owned below.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh descriptor we own.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// Watches `fd` for readability under `token`.
    pub fn add(&self, fd: RawFd, token: u64) -> io::Result<()> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: token,
        };
        // SAFETY: ev is valid for the duration of the call.
        let r = unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Stops watching `fd`.
    pub fn remove(&self, fd: RawFd) {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: ev is valid for the duration of the call; errors (fd
        // already closed) are harmless here.
        unsafe { libc::epoll_ctl(self.0.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
    }

    /// Waits up to `timeout_ms` (0 = just look, -1 = forever); fills
    /// `tokens` and returns how many are ready.
    pub fn wait(&self, events: &mut [libc::epoll_event], timeout_ms: i32) -> usize {
        // SAFETY: events is a valid writable array of the given length.
        let n = unsafe {
            libc::epoll_wait(
                self.0.as_raw_fd(),
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
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET and sched_setaffinity get
    // valid pointers and sizes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Linux thread id of the calling thread (for per-thread CPU accounting).
pub fn gettid() -> i32 {
    // SAFETY: no preconditions.
    unsafe { libc::gettid() }
}

/// Sets the calling thread's timer slack (how late a sleep may end), so
/// short naps are precise (the default slack is 50 µs).
pub fn set_timer_slack_ns(ns: u64) {
    // SAFETY: prctl(PR_SET_TIMERSLACK) takes a plain integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) };
}

/// A thread's scheduler account, `/proc/self/task/TID/schedstat`, opened
/// once and read again with `pread` (no allocation per read).
#[derive(Debug)]
pub struct SchedStatFile(std::fs::File);

impl SchedStatFile {
    /// Opens the account of thread `tid` of this process; `None` where the
    /// kernel has none (built without scheduler statistics).
    pub fn open(tid: i32) -> Option<Self> {
        std::fs::File::open(format!("/proc/self/task/{tid}/schedstat"))
            .ok()
            .map(Self)
    }

    /// Reads it: `None` if the read fails (the thread ended) or the kernel
    /// does not account it ([`crate::wakeup::SchedStat::parse`]).
    pub fn read(&self) -> Option<crate::wakeup::SchedStat> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 96];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        crate::wakeup::SchedStat::parse(&buf[..n])
    }
}

// ---------------------------------------------------------------------------
// Prefetch hints
// ---------------------------------------------------------------------------

/// Hints the CPU to fetch the cache line holding `p` for reading (a loop
/// over frames a peer core wrote overlaps the miss on frame i + k with the
/// work on frame i). A no-op off x86_64. Any address is fine: a prefetch
/// never faults.
#[inline]
pub fn prefetch_read(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and changes no architectural state.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Hints the CPU to fetch the cache line holding `p` for writing, so a
/// store to it a little later does not wait for another core to give the
/// line up (PREFETCHW; a no-op on CPUs without it and off x86_64).
#[inline]
pub fn prefetch_write(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `prefetch_read`; the instruction only reads its operand
    // address.
    unsafe {
        std::arch::asm!("prefetchw [{}]", in(reg) p, options(nostack, preserves_flags, readonly));
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn a_thread_sharing_its_cpu_with_a_busy_one_waits_on_the_run_queue() {
        // Two threads pinned to one CPU, both spinning: the scheduler runs
        // them in turns, and the account of one, read from this thread as
        // the prober reads the worker's, shows run-queue wait. (A kernel
        // without scheduler statistics has no account at all: then the
        // policy keeps the late-sample rule.)
        if std::fs::metadata("/proc/self/schedstat").is_err() {
            assert!(SchedStatFile::open(gettid()).is_none());
            return;
        }
        // SAFETY: no preconditions.
        let cpu = unsafe { libc::sched_getcpu() }.max(0) as usize;
        let stop = Arc::new(AtomicBool::new(false));
        let tid = Arc::new(AtomicI32::new(0));
        let spin = move |stop: Arc<AtomicBool>, tid: Option<Arc<AtomicI32>>| {
            std::thread::spawn(move || {
                pin_to_cpu(cpu).unwrap();
                if let Some(t) = tid {
                    t.store(gettid(), SeqCst);
                }
                while !stop.load(SeqCst) {
                    core::hint::spin_loop();
                }
            })
        };
        let hog = spin(stop.clone(), None);
        let worker = spin(stop.clone(), Some(tid.clone()));
        let deadline = Instant::now() + Duration::from_secs(30);
        while tid.load(SeqCst) == 0 {
            assert!(Instant::now() < deadline);
            std::thread::sleep(Duration::from_millis(1));
        }
        let f = SchedStatFile::open(tid.load(SeqCst)).expect("schedstat of the thread");
        let first = f.read().expect("an account");
        let mut last = first;
        while last.wait_ns < first.wait_ns + 10_000_000 {
            if Instant::now() >= deadline {
                stop.store(true, SeqCst);
                panic!("no run-queue wait: {first:?} then {last:?}");
            }
            std::thread::sleep(Duration::from_millis(2));
            last = f.read().expect("an account");
        }
        stop.store(true, SeqCst);
        hog.join().unwrap();
        worker.join().unwrap();
        assert!(last.run_ns > first.run_ns, "{first:?} then {last:?}");
    }
}
