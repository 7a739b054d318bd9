//! Every system call of the daemon that std does not wrap: CPU count,
//! signal masks and waiting, and readiness polling.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

/// Number of CPUs configured on this machine (online or not).
pub fn cpus_configured() -> usize {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

fn shutdown_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data; sigemptyset initialises it before use.
    let mut set: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid sigset_t we own; SIGINT/SIGTERM are valid signals.
    unsafe {
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
    }
    set
}

/// Blocks SIGINT and SIGTERM in the calling thread and every thread it
/// spawns afterwards, so they stay pending until [`wait_shutdown_signal`].
pub fn block_shutdown_signals() -> io::Result<()> {
    let set = shutdown_set();
    // SAFETY: `set` is initialised; a null old-set pointer is allowed.
    let r = unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
    if r != 0 {
        return Err(io::Error::from_raw_os_error(r));
    }
    Ok(())
}

/// Waits up to `timeout` for SIGINT or SIGTERM (blocked beforehand);
/// returns the signal number, or `None` on timeout.
pub fn wait_shutdown_signal(timeout: Duration) -> Option<i32> {
    let set = shutdown_set();
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `set` and `ts` are initialised and outlive the call; a null
    // siginfo pointer is allowed.
    let r = unsafe { libc::sigtimedwait(&set, std::ptr::null_mut(), &ts) };
    if r > 0 {
        Some(r)
    } else {
        None
    }
}

/// Name of a shutdown signal.
pub fn signal_name(sig: i32) -> &'static str {
    match sig {
        libc::SIGINT => "SIGINT",
        libc::SIGTERM => "SIGTERM",
        _ => "signal",
    }
}

/// Waits up to `timeout_ms` for `fd` to become readable.
pub fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    poll_any(&[fd], timeout_ms)
}

/// Waits until one of `fds` (at most 8) is readable or `timeout_ms`
/// passed; true if one is (an interrupted wait counts as a timeout).
pub fn poll_any(fds: &[RawFd], timeout_ms: i32) -> io::Result<bool> {
    const MAX: usize = 8;
    assert!(fds.len() <= MAX, "poll_any takes at most {MAX} fds");
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; MAX];
    for (slot, &fd) in p.iter_mut().zip(fds) {
        slot.fd = fd;
    }
    // SAFETY: `p` holds `fds.len()` valid pollfds and outlives the call.
    let r = unsafe { libc::poll(p.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            return Ok(false);
        }
        return Err(e);
    }
    Ok(r > 0)
}

/// CPU time (user + system) of thread `tid` of this process, in clock ticks,
/// read from /proc; `None` if the thread is gone.
pub fn thread_cpu_ticks(tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
    let rest = &s[s.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // fields after "(comm)": state is index 0; utime is field 14 overall → 11 here.
    Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
}

/// CPU time (user + system) a thread of this process has used, in ns, from
/// its per-thread CPU clock (nanosecond resolution, unlike /proc's ticks);
/// `None` if the thread is gone.
pub fn thread_cpu_ns(tid: i32) -> Option<u64> {
    // The kernel's clock id for a thread's scheduler CPU clock:
    // MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) = (~tid << 3) | 4 | 2.
    let id: libc::clockid_t = ((!tid) << 3) | 6;
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer; a bad clock id is an error return.
    let r = unsafe { libc::clock_gettime(id, &mut ts) };
    if r != 0 {
        return None;
    }
    Some(ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64)
}

/// Clock ticks per second for /proc times.
pub fn clock_ticks_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if n > 0 {
        n as u64
    } else {
        100
    }
}

/// Holds a CPU in the kernel's polling idle state while alive: its PM QoS
/// resume latency (`/sys/devices/system/cpu/cpuN/power/pm_qos_resume_latency_us`)
/// is set to "n/a" (0 µs allowed, so cpuidle never halts it) and restored
/// on drop.
#[derive(Debug)]
pub struct CpuIdlePoll {
    path: std::path::PathBuf,
    previous: String,
}

impl CpuIdlePoll {
    /// Puts `cpu` in polling idle; fails if the file cannot be written
    /// (not root, no cpuidle on this machine).
    pub fn hold(cpu: usize) -> io::Result<Self> {
        let path = std::path::PathBuf::from(format!(
            "/sys/devices/system/cpu/cpu{cpu}/power/pm_qos_resume_latency_us"
        ));
        let previous = std::fs::read_to_string(&path)?.trim().to_string();
        std::fs::write(&path, "n/a")?;
        Ok(Self { path, previous })
    }
}

impl Drop for CpuIdlePoll {
    fn drop(&mut self) {
        let _ = std::fs::write(&self.path, &self.previous);
    }
}

/// The CPUs the calling thread may run on (`sched_getaffinity`), in order.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; sched_getaffinity gets a valid
    // pointer and its size, CPU_ISSET reads the initialised set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok((0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect())
    }
}

/// Restricts the calling thread, and every thread it spawns afterwards, to
/// `cpus` (`sched_setaffinity`).
pub fn set_allowed_cpus(cpus: &[usize]) -> io::Result<()> {
    // SAFETY: as in `allowed_cpus`; CPU_SET is given indices below
    // CPU_SETSIZE only.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The CPUs for the daemon's threads that are not workers (main, control
/// API and its connections, flow timer, metrics, OpenFlow, link watchers):
/// `allowed` less the CPUs workers are pinned to. `None` when that leaves
/// nothing (every allowed CPU runs a worker): they then share.
pub fn housekeeping_cpus(allowed: &[usize], worker_cpus: &[usize]) -> Option<Vec<usize>> {
    let rest: Vec<usize> = allowed
        .iter()
        .copied()
        .filter(|c| !worker_cpus.contains(c))
        .collect();
    if rest.is_empty() {
        None
    } else {
        Some(rest)
    }
}

/// What [`keep_off_worker_cpus`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum Housekeeping {
    /// No worker is pinned: nothing to keep off.
    Unpinned,
    /// The calling thread (and all it spawns later) now runs on these CPUs.
    Moved(Vec<usize>),
    /// Every allowed CPU runs a worker: the other threads share them.
    Shared(Vec<usize>),
}

/// Keeps the calling thread, and every thread it spawns from now on, off
/// the CPUs the workers are pinned to (workers pin themselves, which
/// overrides the inherited set). Call before any thread starts.
pub fn keep_off_worker_cpus(worker_cpus: &[usize]) -> io::Result<Housekeeping> {
    if worker_cpus.is_empty() {
        return Ok(Housekeeping::Unpinned);
    }
    let allowed = allowed_cpus()?;
    match housekeeping_cpus(&allowed, worker_cpus) {
        Some(rest) => {
            set_allowed_cpus(&rest)?;
            Ok(Housekeeping::Moved(rest))
        }
        None => Ok(Housekeeping::Shared(allowed)),
    }
}

/// A CPU list as `0,2-3`.
pub fn cpu_list(cpus: &[usize]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        out.push(if j > i {
            format!("{}-{}", cpus[i], cpus[j])
        } else {
            cpus[i].to_string()
        });
        i = j + 1;
    }
    out.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn housekeeping_is_what_the_workers_leave() {
        assert_eq!(housekeeping_cpus(&[0, 1], &[1]), Some(vec![0]));
        assert_eq!(housekeeping_cpus(&[0, 1, 2, 3], &[2, 3]), Some(vec![0, 1]));
        assert_eq!(housekeeping_cpus(&[1], &[1]), None);
        // a worker pinned outside the allowed set takes nothing from it
        assert_eq!(housekeeping_cpus(&[0, 1], &[5]), Some(vec![0, 1]));
    }

    #[test]
    fn cpu_lists_are_compact() {
        assert_eq!(cpu_list(&[0, 2, 3, 4, 7]), "0,2-4,7");
        assert_eq!(cpu_list(&[1]), "1");
        assert_eq!(cpu_list(&[]), "");
    }
}
