//! The few system facilities the fabric itself needs. The cycle counter,
//! the clocks, eventfd, epoll and CPU pinning are the `floor` crate's,
//! re-exported here; the thread id, timer slack, scheduler account and
//! prefetch hints are the fabric's own. All `unsafe` of the crate outside
//! the pipe port lives here or in `floor`.

pub use floor::{
    calibrate_cycles_hz, coarse_now_ns, cycles, now_ns, pin_to_cpu, thread_cpu_ns, Epoll, EventFd,
};

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
        // Both accounts move only when the scheduler updates them: on a busy
        // machine the thread may wait through several of the hog's slices
        // before it runs again, so wait for the run time to move as well.
        while last.wait_ns < first.wait_ns + 10_000_000 || last.run_ns == first.run_ns {
            if Instant::now() >= deadline {
                stop.store(true, SeqCst);
                panic!("no run-queue wait and run: {first:?} then {last:?}");
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
