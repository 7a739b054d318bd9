//! Guards against a peer that turns what it shares with us into a weapon:
//! memory it shrinks under our mappings, and notification descriptors it
//! makes blocking after handing them over. Every `unsafe` of both lives
//! here.
//!
//! # Memory a peer can shrink ([`MemGuard`])
//!
//! A vhost-user frontend passes its memory as file descriptors (a memfd, a
//! hugetlbfs file); we map them shared. If it later shrinks the file
//! (`ftruncate`, or a hugetlbfs file whose pool ran dry), our next access
//! to a page past the new end raises `SIGBUS`, whose default action ends
//! the whole process: every port, every guest. A seal check cannot rule it
//! out (hugetlbfs files cannot be sealed), so every peer mapping is
//! registered here and accessed in a way that survives the shrink:
//!
//! - A process-wide `SIGBUS` handler (installed at the first
//!   registration) looks the faulting address up in a fixed-size,
//!   lock-free registry of mappings. On a hit it maps anonymous zeroed
//!   memory over the *whole* registered mapping (`MAP_FIXED`), sets the
//!   owner's flag and writes the owner's wake eventfd, and returns: the
//!   faulting access runs again, now on private memory, and completes.
//!   The owner (the port) sees the flag and disconnects that peer; the
//!   rest of the process never noticed. The memory reads zeros from then
//!   on: the peer only fools us about its own frames, which it could do
//!   anyway.
//! - A fault anywhere else (a bug, a stack overflow, a user's `kill
//!   -BUS`) goes to the handler that was there before (Rust's stack
//!   overflow handler, a fuzzer's), or to the default action: real bugs
//!   still crash.
//!
//! Correctness of the handler:
//!
//! - **Signal safety.** It reads atomics and calls `mmap`, `write` and
//!   `sigaction` (plain system calls), saves and restores `errno`, takes
//!   no lock and allocates nothing.
//! - **Concurrent registration.** Each slot is a seqlock: an owner claims
//!   a free slot (compare-and-swap), makes its sequence odd, writes the
//!   range, flag and wake fd, and makes it even again. The handler skips a
//!   slot whose sequence is odd or changed while it read it, so it never
//!   acts on a torn range.
//! - **Unmap/remap race.** A range is unregistered before it is unmapped,
//!   and both happen only when no thread can access it any more (the
//!   owner's last reference, `Arc` in the ports). A synchronous fault at an
//!   address inside a registered range therefore comes from a thread that
//!   still holds that mapping alive: the range cannot be unmapped (and its
//!   address reused by another mapping) while the handler replaces it.
//!   Only synchronous codes are handled (`BUS_ADRERR`, `BUS_MCEERR_AR`),
//!   never a signal sent by a process. A mapping replaced twice (two
//!   threads faulting at once) is replaced by zeroes twice, harmlessly.
//!   The owner's `munmap` of a replaced range unmaps the anonymous memory.
//!
//! # Notification descriptors ([`adopt_eventfd`], [`drain`], [`notify`])
//!
//! A peer's eventfd is shared with it: the file description and its
//! `O_NONBLOCK` flag are the same object in both processes. We check that
//! a notification descriptor is an eventfd and make it non-blocking when
//! it arrives ([`adopt_eventfd`]); reads use `RWF_NOWAIT`, which holds
//! whatever the flag ([`drain`]). Writes cannot (the kernel's eventfd has
//! no non-blocking write independent of the flag): a peer that clears
//! `O_NONBLOCK` later and fills the counter to its maximum would block our
//! next write for as long as it likes. So writes go through [`notify`]:
//! each writing thread has a slot in a fixed-size registry whose sequence
//! number is odd while it is inside the write (two plain stores), and a
//! watchdog thread (started by the first [`adopt_eventfd`], on the control
//! path) looks every
//! [`WATCHDOG_PERIOD`]; a thread inside the same write at two looks in a
//! row gets a signal (`SIGURG`) whose handler does nothing and does not
//! restart the call, so the write fails with `EINTR`: the notification is
//! dropped and counted by the caller. The ports' control threads also see
//! the cleared flag and disconnect such a peer.

use std::any::Any;
use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::{
    fence, AtomicBool, AtomicI32, AtomicPtr, AtomicU64, AtomicUsize, Ordering::*,
};
use std::sync::{Arc, Once, OnceLock};

/// Mappings the registry holds at most (process-wide): a vhost-user
/// frontend's memory table has at most 8 regions.
pub const MAX_MAPPINGS: usize = 4096;

/// One registered mapping (a seqlock; see the module documentation).
struct Slot {
    /// Even: stable; odd: being written.
    seq: AtomicU64,
    /// Claimed by an owner (registering, registered or unregistering).
    claimed: AtomicBool,
    start: AtomicUsize,
    /// 0: empty.
    len: AtomicUsize,
    flag: AtomicPtr<AtomicBool>,
    wake: AtomicI32,
}

impl Slot {
    // Only the initialiser of the static registry (each element a copy).
    #[allow(clippy::declare_interior_mutable_const)]
    const EMPTY: Slot = Slot {
        seq: AtomicU64::new(0),
        claimed: AtomicBool::new(false),
        start: AtomicUsize::new(0),
        len: AtomicUsize::new(0),
        flag: AtomicPtr::new(std::ptr::null_mut()),
        wake: AtomicI32::new(-1),
    };

    /// Writes the slot's fields (the caller has claimed it).
    fn write(&self, start: usize, len: usize, flag: *mut AtomicBool, wake: RawFd) {
        let s = self.seq.load(Relaxed);
        self.seq.store(s.wrapping_add(1), Relaxed);
        fence(Release);
        self.start.store(start, Relaxed);
        self.len.store(len, Relaxed);
        self.flag.store(flag, Relaxed);
        self.wake.store(wake, Relaxed);
        self.seq.store(s.wrapping_add(2), Release);
    }

    /// A consistent view of a registered slot (async-signal-safe).
    fn read(&self) -> Option<(usize, usize, *mut AtomicBool, RawFd)> {
        let s1 = self.seq.load(Acquire);
        if s1 & 1 != 0 {
            return None;
        }
        let v = (
            self.start.load(Relaxed),
            self.len.load(Relaxed),
            self.flag.load(Relaxed),
            self.wake.load(Relaxed),
        );
        fence(Acquire);
        if self.seq.load(Relaxed) != s1 || v.1 == 0 || v.2.is_null() {
            return None;
        }
        Some(v)
    }
}

static REGISTRY: [Slot; MAX_MAPPINGS] = [Slot::EMPTY; MAX_MAPPINGS];
/// Slots below this index may be in use (the handler scans no further).
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// Mappings replaced after a fault, process-wide.
static REPLACED: AtomicU64 = AtomicU64::new(0);
/// The `SIGBUS` disposition before ours (to chain to).
static PREV_SIGBUS: OnceLock<libc::sigaction> = OnceLock::new();

/// Mappings replaced by zeroes after a `SIGBUS` since the process started.
pub fn replaced() -> u64 {
    REPLACED.load(Relaxed)
}

/// The guard of one peer's memory: its mappings, registered with the
/// process-wide `SIGBUS` handler while this lives, and the flag the
/// handler sets when one of them faulted.
pub struct MemGuard {
    /// Set by the handler through a raw pointer (the `Arc` keeps its
    /// address and keeps it alive while a slot names it); may be shared by
    /// the guards of several mappings (one peer connection).
    flag: Arc<AtomicBool>,
    slots: Vec<usize>,
    /// Keeps the wake eventfd open while any slot names it.
    _wake: Option<Arc<dyn Any + Send + Sync>>,
    wake_fd: RawFd,
}

impl std::fmt::Debug for MemGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemGuard")
            .field("faulted", &self.faulted())
            .field("slots", &self.slots)
            .finish()
    }
}

impl MemGuard {
    /// A guard with no mapping yet, whose faults set `flag` (a fresh one
    /// if `None`). `wake` is a non-blocking eventfd, written when a mapping
    /// faults, and what keeps it open: the guard holds it while any mapping
    /// is registered.
    pub fn new(
        flag: Option<Arc<AtomicBool>>,
        wake: Option<(RawFd, Arc<dyn Any + Send + Sync>)>,
    ) -> MemGuard {
        let (wake_fd, keep) = match wake {
            Some((fd, keep)) => (fd, Some(keep)),
            None => (-1, None),
        };
        MemGuard {
            flag: flag.unwrap_or_default(),
            slots: Vec::new(),
            _wake: keep,
            wake_fd,
        }
    }

    /// Whether a mapping of this guard faulted (and now reads zeroes).
    #[inline]
    pub fn faulted(&self) -> bool {
        self.flag.load(Relaxed)
    }

    /// Registers the mapping `[base, base + len)`: from now until the
    /// guard drops, a `SIGBUS` inside it replaces it by anonymous memory
    /// and sets the flag instead of ending the process.
    ///
    /// # Safety
    /// `[base, base + len)` is exactly one whole mapping of the caller's
    /// (what `mmap` returned, its length rounded up to the mapping's page
    /// size), and the caller unmaps it only after dropping this guard.
    pub unsafe fn add(&mut self, base: *mut u8, len: usize) -> io::Result<()> {
        if len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        install_sigbus()?;
        let flag = Arc::as_ptr(&self.flag) as *mut AtomicBool;
        for (i, slot) in REGISTRY.iter().enumerate() {
            if slot
                .claimed
                .compare_exchange(false, true, Acquire, Relaxed)
                .is_ok()
            {
                slot.write(base as usize, len, flag, self.wake_fd);
                HIGH.fetch_max(i + 1, AcqRel);
                self.slots.push(i);
                return Ok(());
            }
        }
        Err(io::Error::new(
            io::ErrorKind::OutOfMemory,
            format!("more than {MAX_MAPPINGS} peer memory mappings in this process"),
        ))
    }
}

impl Drop for MemGuard {
    fn drop(&mut self) {
        for &i in &self.slots {
            let slot = &REGISTRY[i];
            slot.write(0, 0, std::ptr::null_mut(), -1);
            slot.claimed.store(false, Release);
        }
    }
}

fn errno() -> i32 {
    // SAFETY: __errno_location returns the calling thread's errno slot.
    unsafe { *libc::__errno_location() }
}

fn set_errno(e: i32) {
    // SAFETY: as in errno().
    unsafe { *libc::__errno_location() = e };
}

/// The process-wide `SIGBUS` handler (see the module documentation).
extern "C" fn on_sigbus(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let saved = errno();
    // SAFETY: the kernel passes a valid siginfo_t to an SA_SIGINFO handler.
    let (code, addr) = unsafe { ((*info).si_code, (*info).si_addr() as usize) };
    if code == libc::BUS_ADRERR || code == libc::BUS_MCEERR_AR {
        let high = HIGH.load(Acquire).min(MAX_MAPPINGS);
        for slot in &REGISTRY[..high] {
            let Some((start, len, flag, wake)) = slot.read() else {
                continue;
            };
            if addr.wrapping_sub(start) >= len {
                continue;
            }
            // SAFETY: [start, start+len) is a whole mapping its owner holds
            // alive (the faulting thread is accessing it; see the module
            // documentation), so replacing it touches nothing else.
            let p = unsafe {
                libc::mmap(
                    start as *mut libc::c_void,
                    len,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED | libc::MAP_NORESERVE,
                    -1,
                    0,
                )
            };
            if p as usize != start {
                break; // cannot replace it: fall through to the old handler
            }
            // SAFETY: the flag is kept alive by the owner's MemGuard while
            // the slot is registered (the owner is, see above).
            unsafe { (*flag).store(true, Release) };
            REPLACED.fetch_add(1, Relaxed);
            if wake >= 0 {
                let one: u64 = 1;
                // SAFETY: the guard keeps this non-blocking eventfd open
                // while the slot names it; write is async-signal-safe.
                unsafe { libc::write(wake, &one as *const u64 as *const libc::c_void, 8) };
            }
            set_errno(saved);
            return;
        }
    }
    set_errno(saved);
    chain(sig, info, ctx);
}

/// Hands a `SIGBUS` we do not handle to the handler before ours, or to the
/// default action (the process ends, as it would have without us).
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    if let Some(prev) = PREV_SIGBUS.get() {
        let h = prev.sa_sigaction;
        if h != libc::SIG_DFL && h != libc::SIG_IGN {
            if prev.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: an SA_SIGINFO disposition holds a three-argument
                // handler; we pass it what the kernel passed us.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(h) };
                f(sig, info, ctx);
            } else {
                // SAFETY: otherwise it holds a one-argument handler.
                let f: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(h) };
                f(sig);
            }
            return;
        }
    }
    // SAFETY: a zeroed sigaction with SIG_DFL is valid; sigaction and
    // raise are async-signal-safe.
    unsafe {
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
        // A fault runs again on return and now ends the process; a signal
        // sent by a process is raised again (pending until we return).
        if info.is_null() || (*info).si_code <= 0 {
            libc::raise(sig);
        }
    }
}

fn install_sigbus() -> io::Result<()> {
    static ONCE: Once = Once::new();
    static FAILED: AtomicI32 = AtomicI32::new(0);
    ONCE.call_once(|| {
        // SAFETY: sigaction with valid, zero-initialised structs we own.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut old) != 0 {
                FAILED.store(errno().max(1), Relaxed);
                return;
            }
            let _ = PREV_SIGBUS.set(old);
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_sigbus as *const () as usize;
            sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(libc::SIGBUS, &sa, std::ptr::null_mut()) != 0 {
                FAILED.store(errno().max(1), Relaxed);
            }
        }
    });
    match FAILED.load(Relaxed) {
        0 => Ok(()),
        e => Err(io::Error::from_raw_os_error(e)),
    }
}

// ---------------------------------------------------------------------------
// Notification descriptors
// ---------------------------------------------------------------------------

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
/// How often the watchdog looks: a write in progress at two looks in a row
/// (so for at least this long) is interrupted.
pub const WATCHDOG_PERIOD: std::time::Duration = std::time::Duration::from_millis(5);

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

/// Every [`WATCHDOG_PERIOD`]: a thread seen inside the same [`notify`]
/// write at two looks in a row is blocked there (a peer made its eventfd
/// blocking and filled it) and is interrupted.
fn watchdog() {
    let mut last = vec![0u64; MAX_WRITERS];
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    loop {
        std::thread::sleep(WATCHDOG_PERIOD);
        let high = WRITERS_HIGH.load(Acquire).min(MAX_WRITERS);
        for (i, w) in WRITERS[..high].iter().enumerate() {
            let tid = w.tid.load(Acquire);
            let seq = w.seq.load(Relaxed);
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
/// it as inside this write, and the watchdog interrupts it after one to
/// two [`WATCHDOG_PERIOD`]s (EINTR: false). Per call: two plain stores
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
    use std::time::{Duration, Instant};

    fn memfd(len: usize) -> OwnedFd {
        // SAFETY: a static NUL-terminated name; checked.
        let fd = unsafe { libc::memfd_create(c"guard-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        assert_eq!(
            // SAFETY: plain syscall on our descriptor.
            unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) },
            0
        );
        fd
    }

    fn map(fd: &OwnedFd, len: usize) -> *mut u8 {
        // SAFETY: a fresh shared mapping of our memfd; checked.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        assert_ne!(p, libc::MAP_FAILED);
        p as *mut u8
    }

    fn truncate(fd: &OwnedFd, len: usize) {
        assert_eq!(
            // SAFETY: plain syscall on our descriptor.
            unsafe { libc::ftruncate(fd.as_raw_fd(), len as libc::off_t) },
            0
        );
    }

    /// Reads every page of the mapping (volatile).
    fn touch(p: *mut u8, len: usize) -> u64 {
        let mut sum = 0u64;
        for off in (0..len).step_by(4096) {
            // SAFETY: inside the mapping (registered: a fault is survived).
            sum += unsafe { std::ptr::read_volatile(p.add(off)) } as u64;
        }
        sum
    }

    #[test]
    fn a_shrunk_mapping_reads_zeroes_and_flags_its_guard() {
        let len = 16 * 4096;
        let fd = memfd(len);
        let p = map(&fd, len);
        // SAFETY: inside the mapping, the file is whole.
        unsafe { std::ptr::write_bytes(p, 7, len) };
        let wake = Arc::new(fabric::sys::EventFd::new().unwrap());
        let mut g = MemGuard::new(
            None,
            Some((wake.fd(), wake.clone() as Arc<dyn Any + Send + Sync>)),
        );
        // SAFETY: the whole mapping; unmapped after the guard drops.
        unsafe { g.add(p, len).unwrap() };
        assert_eq!(touch(p, len), 7 * 16);
        assert!(!g.faulted());
        let before = replaced();
        truncate(&fd, 4096 * 3);
        // The first page past the end faults: the handler replaces the
        // whole mapping by zeroes, the access completes.
        // SAFETY: registered mapping.
        let v = unsafe { std::ptr::read_volatile(p.add(5 * 4096)) };
        assert_eq!(v, 0);
        assert!(g.faulted());
        assert!(replaced() > before);
        assert_eq!(wake.drain(), 1, "the owner's wake eventfd was written");
        // Every page is private zeroes now, writable too.
        assert_eq!(touch(p, len), 0);
        // SAFETY: as above.
        unsafe { std::ptr::write_volatile(p.add(9 * 4096), 3) };
        drop(g);
        // SAFETY: exactly our mapping, after its guard.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    #[test]
    fn truncated_to_zero_under_several_threads() {
        let len = 64 * 4096;
        let fd = memfd(len);
        let p = map(&fd, len) as usize;
        let mut g = MemGuard::new(None, None);
        // SAFETY: the whole mapping; unmapped after the guard drops.
        unsafe { g.add(p as *mut u8, len).unwrap() };
        let stop = Arc::new(AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(Relaxed) {
                        touch(p as *mut u8, len);
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(20));
        truncate(&fd, 0);
        let t0 = Instant::now();
        while !g.faulted() && t0.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(1));
        }
        stop.store(true, Relaxed);
        for r in readers {
            r.join().unwrap();
        }
        assert!(g.faulted());
        drop(g);
        // SAFETY: exactly our mapping, after its guard.
        unsafe { libc::munmap(p as *mut libc::c_void, len) };
    }

    /// Registration from many threads while faults are handled: a fault
    /// flags its own guard only.
    #[test]
    fn concurrent_registration_and_faults() {
        let workers: Vec<_> = (0..8)
            .map(|k| {
                std::thread::spawn(move || {
                    for round in 0..50 {
                        let len = 4 * 4096;
                        let fd = memfd(len);
                        let p = map(&fd, len);
                        let mut g = MemGuard::new(None, None);
                        // SAFETY: the whole mapping; unmapped after the guard.
                        unsafe { g.add(p, len).unwrap() };
                        if (round + k) % 3 == 0 {
                            truncate(&fd, 4096);
                            touch(p, len);
                            assert!(g.faulted());
                        } else {
                            touch(p, len);
                            assert!(!g.faulted());
                        }
                        drop(g);
                        // SAFETY: exactly our mapping, after its guard.
                        unsafe { libc::munmap(p as *mut libc::c_void, len) };
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
    }

    /// A SIGBUS outside every registered mapping still ends the process
    /// (run in a child: this test binary again, with a marker variable).
    #[test]
    fn a_fault_outside_registered_mappings_still_crashes() {
        const MARK: &str = "TURNOUT_GUARD_CHILD";
        if std::env::var_os(MARK).is_some() {
            // In the child: a registered mapping elsewhere (so the handler
            // is installed), then an unregistered one that faults.
            let fd1 = memfd(4096);
            let p1 = map(&fd1, 4096);
            let mut g = MemGuard::new(None, None);
            // SAFETY: the whole mapping; never unmapped (the process dies).
            unsafe { g.add(p1, 4096).unwrap() };
            let fd2 = memfd(2 * 4096);
            let p2 = map(&fd2, 2 * 4096);
            truncate(&fd2, 0);
            // SAFETY: deliberately past the end of an unregistered mapping.
            let v = unsafe { std::ptr::read_volatile(p2.add(4096)) };
            eprintln!("survived an unregistered fault ({v})");
            std::process::exit(0);
        }
        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new(exe)
            .args([
                "--exact",
                "guard::tests::a_fault_outside_registered_mappings_still_crashes",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(MARK, "1")
            .output()
            .unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            out.status.signal(),
            Some(libc::SIGBUS),
            "child: {:?}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }

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
        let m = memfd(4096);
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
    /// `valgrind --tool=callgrind target/release/deps/ports-* --exact
    /// guard::tests::notify_cost --ignored`, then `callgrind_annotate` for
    /// `guard::notify` and `plain_write` (each 100 000 calls).
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
