//! Clocks, the cycle counter and CPU pinning.

use std::io;

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
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Coarse monotonic time in nanoseconds (jiffy resolution, cheapest read).
#[inline]
pub fn coarse_now_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_COARSE)
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; the clocks used here always exist
    // on Linux.
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

/// Pins the calling thread to `cpu`. A `cpu` beyond what a `cpu_set_t`
/// holds is refused (`InvalidInput`).
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} is out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; all-zero is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `cpu` < CPU_SETSIZE was checked above, `set` is valid.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; `set` is a valid cpu_set_t of the
    // size passed.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clocks_advance_and_a_cpu_out_of_range_is_refused() {
        let (a, b) = (now_ns(), coarse_now_ns());
        std::thread::sleep(std::time::Duration::from_millis(15));
        assert!(now_ns() > a);
        assert!(coarse_now_ns() > b);
        assert!(calibrate_cycles_hz() > 0);
        let e = pin_to_cpu(libc::CPU_SETSIZE as usize).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
    }
}
