//! Every system call turnout-gen makes itself (the ports make their own in
//! their `sys.rs`, on the `floor` crate): the monotonic clock and CPU
//! pinning (re-exported from `floor`), the CPU affinity check and the
//! SIGINT/SIGTERM flag. Every libc call of the crate is here or in `floor`;
//! the crate's other
//! `unsafe` blocks only call `fabric::OwnedTx::new`.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

/// CLOCK_MONOTONIC in nanoseconds (vDSO, no system call on Linux/x86-64),
/// `floor`'s. This is the clock of the payload header's send timestamp,
/// shared by every process on the host, so one-way latency between
/// processes is exact. Also `floor`'s: the calling thread's CPU time
/// (`thread_cpu_ns`, a system call: read once per window edge or snapshot,
/// never per frame) and CPU pinning (`pin_to_cpu`, which refuses a cpu
/// beyond `CPU_SETSIZE`).
pub use floor::{now_ns, pin_to_cpu, thread_cpu_ns};

/// Whether the calling thread may run on `cpu` (it is in its affinity
/// mask), so a bad `--cpu` is refused before any port is opened.
pub fn cpu_allowed(cpu: usize) -> bool {
    if cpu >= libc::CPU_SETSIZE as usize {
        return false;
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 is the calling thread; `set` is a valid, writable
    // cpu_set_t of the size passed.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    // SAFETY: `cpu` < CPU_SETSIZE, `set` is initialised.
    rc == 0 && unsafe { libc::CPU_ISSET(cpu, &set) }
}

/// Most fds [`wait_readable`] waits on (every receive queue of two
/// 16-queue ports).
pub const MAX_WAIT_FDS: usize = 32;

/// Waits until one of `fds` is readable or `timeout_ms` passed (idle
/// receivers in interrupt mode). Returns true if one is readable.
pub fn wait_readable(fds: &[std::os::fd::RawFd], timeout_ms: i32) -> bool {
    let mut p = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; MAX_WAIT_FDS];
    let n = fds.len().min(p.len());
    for (slot, &fd) in p.iter_mut().zip(fds) {
        *slot = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
    }
    // SAFETY: `p[..n]` are initialised pollfds owned by this frame; the
    // kernel writes only their `revents`.
    let rc = unsafe { libc::poll(p.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    rc > 0
}

/// SIGINT and SIGTERM received so far.
static STOPS: AtomicU32 = AtomicU32::new(0);
static SNAPSHOT: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(sig: libc::c_int) {
    // Only an atomic store: async-signal-safe.
    if sig == libc::SIGUSR1 {
        SNAPSHOT.store(true, Ordering::Relaxed);
    } else {
        // A lock-free atomic add: async-signal-safe too.
        STOPS.fetch_add(1, Ordering::Relaxed);
    }
}

/// Installs SIGINT and SIGTERM handlers that count the signal (the run then
/// ends normally and prints its document), and a SIGUSR1 handler that asks
/// the long-running roles for a snapshot document. A signal while sending
/// ends the sending; the cool-down that follows still receives the frames
/// in flight, and a signal during the cool-down ends it (`stops` read at
/// its start). The loops check every iteration, so they end promptly.
pub fn install_stop_handlers() -> std::io::Result<()> {
    for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGUSR1] {
        // SAFETY: sigaction is plain data; zeroed is a valid empty mask with
        // no flags.
        let mut sa: libc::sigaction = unsafe { std::mem::zeroed() };
        sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
        // SAFETY: `sa.sa_mask` is a valid sigset_t owned by us.
        unsafe { libc::sigemptyset(&mut sa.sa_mask) };
        // SAFETY: `sa` is fully initialised and the handler only does an
        // atomic store, which is async-signal-safe.
        let rc = unsafe { libc::sigaction(sig, &sa, std::ptr::null_mut()) };
        if rc != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Sleeps for `ns`, or until a signal handler ran (the stop handlers of
/// [`install_stop_handlers`]): one system call, not resumed after EINTR as
/// `std::thread::sleep` would.
pub fn sleep_interruptible_ns(ns: u64) {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: a valid timespec of ours; the remainder is not wanted.
    unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
}

/// True once SIGINT or SIGTERM arrived.
#[inline]
pub fn stop_requested() -> bool {
    stops() > 0
}

/// How many SIGINT and SIGTERM have arrived: a phase that notes it at its
/// start ends at the next one.
#[inline]
pub fn stops() -> u32 {
    STOPS.load(Ordering::Relaxed)
}

/// True (once) after SIGUSR1: print a snapshot document now.
#[inline]
pub fn snapshot_requested() -> bool {
    SNAPSHOT.load(Ordering::Relaxed) && SNAPSHOT.swap(false, Ordering::Relaxed)
}

/// A transmit queue this process is the only sender on (turnout-gen has
/// one thread per port queue), with the reserve → write → publish protocol
/// checked at run time: the fabric's [`fabric::OwnedTx`].
pub use fabric::OwnedTx;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_is_monotonic_and_in_nanoseconds() {
        let a = now_ns();
        std::thread::sleep(std::time::Duration::from_millis(20));
        let b = now_ns();
        assert!(b > a);
        let d = b - a;
        assert!(
            (20_000_000..2_000_000_000).contains(&d),
            "20 ms measured as {d} ns"
        );
    }

    #[test]
    fn pinning_to_cpu0_works_and_out_of_range_is_refused() {
        let t = std::thread::spawn(|| pin_to_cpu(0));
        t.join().unwrap().unwrap();
        assert!(pin_to_cpu(1 << 20).is_err());
        assert!(cpu_allowed(0));
        assert!(!cpu_allowed(4096));
    }
}
