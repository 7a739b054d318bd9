//! Descriptors shared with a peer process: eventfds a peer passed us (or
//! we passed it), whose file description and `O_NONBLOCK` flag the peer
//! shares and can turn against us.
//!
//! We check that a notification descriptor is an eventfd and make it
//! non-blocking when it arrives ([`adopt_eventfd`]); reads use
//! `RWF_NOWAIT`, which holds whatever the flag ([`drain`]). Writes cannot
//! (the kernel's eventfd has no non-blocking write independent of the
//! flag): a peer that clears `O_NONBLOCK` later and fills the counter to its
//! maximum would block our next write for as long as it likes. So writes go
//! through [`notify`]: each writing thread has a slot in a fixed-size
//! registry whose sequence number is odd while it is inside the write (two
//! plain stores), and a watchdog thread (started by the first
//! [`adopt_eventfd`], on the control path) looks every
//! [`WATCHDOG_IDLE_PERIOD`], and [`WATCHDOG_PERIOD`] after a look that
//! found a thread inside a write; a thread inside the same write at two
//! looks in a row gets a signal
//! (`SIGURG`) whose handler does nothing and does not restart the call, so
//! the write fails with `EINTR`: the notification is dropped and counted by
//! the caller. The ports' control threads also see the cleared flag and
//! disconnect such a peer.

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::Once;

fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

/// Checks that a descriptor a peer passed as a notification line is an
/// eventfd (a pipe or a socket could block, or be something else
/// entirely) and makes it non-blocking. The error says what it is instead.
///
/// The first adoption starts the writers' watchdog ([`notify`]), from the
/// calling control thread: the watchdog inherits its CPU affinity, never a
/// pinned worker's.
pub fn adopt_eventfd(fd: RawFd) -> Result<(), String> {
    let link = std::fs::read_link(format!("/proc/self/fd/{fd}")).map_err(|e| e.to_string())?;
    let link = link.to_string_lossy();
    if link != "anon_inode:[eventfd]" {
        return Err(format!("not an eventfd ({link})"));
    }
    start_watchdog();
    set_nonblocking(fd).map_err(|e| e.to_string())
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: fcntl on a descriptor the caller holds; no pointers.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if fl < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Whether `O_NONBLOCK` is still set on a descriptor (a peer sharing its
/// file description can clear it). An error (a closed fd) counts as set.
pub fn is_nonblocking(fd: RawFd) -> bool {
    // SAFETY: fcntl on a descriptor the caller holds; no pointers.
    let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    fl < 0 || fl & libc::O_NONBLOCK != 0
}

/// 0: unknown, 1: `RWF_NOWAIT` reads work, 2: they do not (old kernel).
static NOWAIT_READS: AtomicI32 = AtomicI32::new(0);

/// Reads and clears an eventfd without ever waiting, whatever its
/// `O_NONBLOCK` flag says (`preadv2` with `RWF_NOWAIT`; a plain read of a
/// descriptor made non-blocking on kernels without it). Returns the
/// counter (0 if it was clear).
#[inline]
pub fn drain(fd: RawFd) -> u64 {
    let mut v: u64 = 0;
    let iov = libc::iovec {
        iov_base: &mut v as *mut u64 as *mut libc::c_void,
        iov_len: 8,
    };
    if NOWAIT_READS.load(Relaxed) != 2 {
        // SAFETY: one iovec of 8 bytes pointing at a local.
        let r = unsafe { libc::preadv2(fd, &iov, 1, -1, libc::RWF_NOWAIT) };
        if r == 8 {
            return v;
        }
        if r >= 0 || errno() != libc::EOPNOTSUPP {
            return 0;
        }
        NOWAIT_READS.store(2, Relaxed);
    }
    // SAFETY: reads 8 bytes into a local.
    let r = unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
    if r == 8 {
        v
    } else {
        0
    }
}

/// The signal that interrupts a thread stuck writing to a peer's
/// descriptor: its default action is to do nothing, and our handler does
/// nothing either, without `SA_RESTART`, so the write returns `EINTR`.
const UNSTICK_SIGNAL: libc::c_int = libc::SIGURG;

extern "C" fn on_unstick(_sig: libc::c_int) {}

fn install_unstick() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: sigaction with valid structs we own. A handler someone
        // else installed is left alone (theirs also interrupts the call
        // unless it asked for SA_RESTART).
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            libc::sigaction(UNSTICK_SIGNAL, std::ptr::null(), &mut old);
            if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN {
                return;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_unstick as *const () as usize;
            sa.sa_flags = 0;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(UNSTICK_SIGNAL, &sa, std::ptr::null_mut());
        }
    });
}

/// Threads that write peers' eventfds ([`notify`]) at most: one slot each.
pub const MAX_WRITERS: usize = 512;
/// How soon the watchdog looks again after a look that found a thread
/// inside a write: a write in progress at two looks in a row (so for at
/// least this long) is interrupted.
pub const WATCHDOG_PERIOD: std::time::Duration = std::time::Duration::from_millis(5);
/// How soon the watchdog looks again after a look that found no thread
/// inside a write. A write that blocks is interrupted at most this plus
/// [`WATCHDOG_PERIOD`] after it began (and the scheduling delays of the
/// watchdog's wake-ups); the watchdog wakes 40 times a second, not 200, on
/// the control CPU it shares with the tester in a benchmark and with
/// everything else in production.
pub const WATCHDOG_IDLE_PERIOD: std::time::Duration = std::time::Duration::from_millis(25);

/// A thread that writes peers' eventfds: its id, and a sequence number
/// that is odd while it is inside such a write.
struct Writer {
    tid: AtomicI32,
    seq: AtomicU64,
}

impl Writer {
    // Only the initialiser of the static registry (each element a copy).
    #[allow(clippy::declare_interior_mutable_const)]
    const FREE: Writer = Writer {
        tid: AtomicI32::new(0),
        seq: AtomicU64::new(0),
    };
}

static WRITERS: [Writer; MAX_WRITERS] = [Writer::FREE; MAX_WRITERS];
/// Writer slots below this index may be in use.
static WRITERS_HIGH: AtomicUsize = AtomicUsize::new(0);
/// Writes the watchdog interrupted, process-wide.
static INTERRUPTED: AtomicU64 = AtomicU64::new(0);

/// Where a thread writes when every slot is taken: never looked at.
static UNWATCHED: Writer = Writer::FREE;

/// This thread's writer slot: null until its first [`notify`] claims one
/// (or [`UNWATCHED`] when none is left); freed when the thread exits.
struct Mine(std::cell::Cell<*const Writer>);

impl Mine {
    #[cold]
    fn claim(&self) -> *const Writer {
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let mut w: *const Writer = &UNWATCHED;
        for (i, slot) in WRITERS.iter().enumerate() {
            if slot.tid.compare_exchange(0, tid, AcqRel, Relaxed).is_ok() {
                WRITERS_HIGH.fetch_max(i + 1, AcqRel);
                w = slot;
                break;
            }
        }
        self.0.set(w);
        w
    }
}

impl Drop for Mine {
    fn drop(&mut self) {
        let w = self.0.get();
        if let Some(slot) = WRITERS.iter().find(|s| std::ptr::eq(*s, w)) {
            slot.seq.store(0, Relaxed);
            slot.tid.store(0, Release);
        }
    }
}

thread_local! {
    static MINE: Mine = const { Mine(std::cell::Cell::new(std::ptr::null())) };
}

/// Starts the writers' watchdog of [`notify`] (once per process; later
/// calls do nothing). Call it from a control thread: the watchdog inherits
/// the caller's CPU affinity. [`adopt_eventfd`] calls it.
pub fn start_watchdog() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        install_unstick();
        let _ = std::thread::Builder::new()
            .name("fd-watchdog".into())
            .spawn(watchdog);
    });
}

/// Every [`WATCHDOG_IDLE_PERIOD`], or [`WATCHDOG_PERIOD`] after a look
/// that found a thread inside a write: a thread seen inside the same
/// [`notify`] write at two looks in a row is blocked there (a peer made its
/// eventfd blocking and filled it) and is interrupted.
fn watchdog() {
    let mut last = vec![0u64; MAX_WRITERS];
    let mut period = WATCHDOG_IDLE_PERIOD;
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    loop {
        std::thread::sleep(period);
        period = WATCHDOG_IDLE_PERIOD;
        let high = WRITERS_HIGH.load(Acquire).min(MAX_WRITERS);
        for (i, w) in WRITERS[..high].iter().enumerate() {
            let tid = w.tid.load(Acquire);
            let seq = w.seq.load(Relaxed);
            if tid != 0 && seq & 1 == 1 {
                // inside a write now: look again soon
                period = WATCHDOG_PERIOD;
            }
            if tid != 0 && seq & 1 == 1 && seq == last[i] {
                // Counted before the signal: the interrupted thread may
                // run (and its caller read the count) before this thread
                // runs again.
                INTERRUPTED.fetch_add(1, SeqCst);
                // SAFETY: a signal to a thread of our own process, whose
                // handler does nothing. Should the thread have left the
                // write just now, a later interruptible call of it returns
                // EINTR once, which every caller handles.
                if unsafe { libc::tgkill(pid, tid, UNSTICK_SIGNAL) } != 0 {
                    // The thread is gone: nothing was interrupted.
                    INTERRUPTED.fetch_sub(1, SeqCst);
                }
            }
            last[i] = seq;
        }
    }
}

/// Writes the watchdog interrupted since the process started.
pub fn interrupted() -> u64 {
    INTERRUPTED.load(SeqCst)
}

/// Adds 1 to a peer's eventfd (a notification); false if that failed.
///
/// Never waits for long: the eventfd was made non-blocking when it
/// arrived ([`adopt_eventfd`]), so a full counter fails at once (EAGAIN;
/// the peer has a notification pending anyway). A peer that cleared
/// `O_NONBLOCK` again on the shared file description and filled the
/// counter would block the write for ever: the thread's writer slot marks
/// it as inside this write, and the watchdog interrupts it within
/// [`WATCHDOG_IDLE_PERIOD`] + [`WATCHDOG_PERIOD`] (EINTR: false). Per call: two plain stores
/// besides the system call.
#[inline]
pub fn notify(fd: RawFd) -> bool {
    let one: u64 = 1;
    let mut w = MINE.with(|m| m.0.get());
    if w.is_null() {
        w = MINE.with(|m| m.claim());
    }
    // SAFETY: w points into the static registry (or at the static
    // UNWATCHED): valid for the whole program.
    let w = unsafe { &*w };
    let s = w.seq.load(Relaxed);
    w.seq.store(s.wrapping_add(1), Relaxed);
    // SAFETY: writes 8 bytes from a local to a descriptor the caller holds.
    let r = unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) };
    w.seq.store(s.wrapping_add(2), Relaxed);
    r == 8
}

/// Threads of this process blocked in `write(fd, ...)` now (their
/// `/proc/self/task/TID/syscall`: the system call number, then the
/// arguments in hex). For tests and diagnostics.
pub fn writers_blocked_on(fd: RawFd) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return out;
    };
    for t in tasks.flatten() {
        let Some(tid) = t.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        let Ok(s) = std::fs::read_to_string(t.path().join("syscall")) else {
            continue;
        };
        let mut f = s.split_whitespace();
        let nr = f.next().and_then(|n| n.parse::<libc::c_long>().ok());
        let arg0 = f
            .next()
            .and_then(|a| i64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
        if nr == Some(libc::SYS_write) && arg0 == Some(fd as i64) {
            out.push(tid);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    #[test]
    fn only_eventfds_are_adopted_and_made_nonblocking() {
        // SAFETY: plain syscall; checked.
        let e = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(e >= 0);
        // SAFETY: a fresh descriptor we own.
        let e = unsafe { OwnedFd::from_raw_fd(e) };
        assert!(!is_nonblocking(e.as_raw_fd()));
        adopt_eventfd(e.as_raw_fd()).unwrap();
        assert!(is_nonblocking(e.as_raw_fd()));
        let (r, w) = std::io::pipe().unwrap();
        let err = adopt_eventfd(OwnedFd::from(w).as_raw_fd()).unwrap_err();
        assert!(err.contains("not an eventfd (pipe:"), "{err}");
        drop(r);
        // SAFETY: a static NUL-terminated name; checked.
        let m = unsafe { libc::memfd_create(c"peerfd-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(m >= 0);
        // SAFETY: a fresh descriptor we own.
        let m = unsafe { OwnedFd::from_raw_fd(m) };
        assert!(adopt_eventfd(m.as_raw_fd()).is_err());
    }

    /// A drain never waits, even on an eventfd someone made blocking.
    #[test]
    fn drain_never_waits() {
        // SAFETY: plain syscall; checked. Blocking on purpose.
        let e = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(e >= 0);
        // SAFETY: a fresh descriptor we own.
        let e = unsafe { OwnedFd::from_raw_fd(e) };
        let t0 = Instant::now();
        assert_eq!(drain(e.as_raw_fd()), 0);
        let one = 5u64;
        // SAFETY: 8 bytes from a local.
        unsafe { libc::write(e.as_raw_fd(), &one as *const u64 as *const libc::c_void, 8) };
        assert_eq!(drain(e.as_raw_fd()), 5);
        assert_eq!(drain(e.as_raw_fd()), 0);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    /// User-space instructions of a notification against a plain write:
    /// `valgrind --tool=callgrind target/release/deps/floor-* --exact
    /// peerfd::tests::notify_cost --ignored`, then `callgrind_annotate` for
    /// `peerfd::notify` and `plain_write` (each 100 000 calls).
    #[test]
    #[ignore]
    fn notify_cost() {
        #[inline(never)]
        fn plain_write(fd: RawFd) -> bool {
            let one: u64 = 1;
            // SAFETY: 8 bytes from a local to our eventfd.
            unsafe { libc::write(fd, &one as *const u64 as *const libc::c_void, 8) == 8 }
        }
        #[inline(never)]
        fn guarded(fd: RawFd) -> bool {
            notify(fd)
        }
        // SAFETY: plain syscall; checked.
        let e = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        assert!(e >= 0);
        // SAFETY: a fresh descriptor we own.
        let e = unsafe { OwnedFd::from_raw_fd(e) };
        for i in 0..100_000 {
            assert!(plain_write(e.as_raw_fd()));
            assert!(guarded(e.as_raw_fd()));
            if i % 1000 == 0 {
                drain(e.as_raw_fd());
            }
        }
    }

    /// A notification to a full eventfd someone made blocking is
    /// interrupted by the watchdog: it fails, it does not wait.
    #[test]
    fn a_notification_to_a_full_blocking_eventfd_fails_instead_of_waiting() {
        // SAFETY: plain syscall; checked. Blocking on purpose.
        let e = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        assert!(e >= 0);
        // SAFETY: a fresh descriptor we own.
        let e = Arc::new(unsafe { OwnedFd::from_raw_fd(e) });
        // Adopted (made non-blocking, the watchdog started), then made
        // blocking again, as a hostile peer would.
        adopt_eventfd(e.as_raw_fd()).unwrap();
        // SAFETY: fcntl on our descriptor; no pointers.
        unsafe { libc::fcntl(e.as_raw_fd(), libc::F_SETFL, 0) };
        assert!(!is_nonblocking(e.as_raw_fd()));
        assert!(notify(e.as_raw_fd()));
        assert_eq!(drain(e.as_raw_fd()), 1);
        let max = u64::MAX - 1;
        // SAFETY: 8 bytes from a local: the counter is now full.
        unsafe { libc::write(e.as_raw_fd(), &max as *const u64 as *const libc::c_void, 8) };
        let fd = e.as_raw_fd();
        let before = interrupted();
        let w = std::thread::spawn(move || {
            let t0 = Instant::now();
            let ok = notify(fd);
            (ok, t0.elapsed())
        });
        let t0 = Instant::now();
        while !w.is_finished() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the writer was never freed"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let (ok, took) = w.join().unwrap();
        assert!(!ok, "the write to a full eventfd succeeded");
        assert!(interrupted() > before);
        eprintln!("interrupted after {took:?}");
        drop(e);
    }
}
