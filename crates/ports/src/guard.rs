//! Guards against a peer that turns what it shares with us into a weapon:
//! memory it shrinks under our mappings, and notification descriptors it
//! makes blocking after handing them over. Every `unsafe` of the first
//! lives here, of the second in `floor::peerfd`.
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
//! (Written in `floor::peerfd`, re-exported here; `floor::EventFd` uses
//! them.)
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
//! path) looks every [`WATCHDOG_IDLE_PERIOD`], and [`WATCHDOG_PERIOD`]
//! after a look that found a thread inside a write; a thread inside the
//! same write at two looks in a row gets a signal (`SIGURG`) whose handler does nothing and does not
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

// The guards of notification descriptors are `floor`'s (`floor::peerfd`),
// where `floor::EventFd` uses them; re-exported here for the ports that
// pass raw descriptors.
pub use floor::peerfd::{
    adopt_eventfd, drain, interrupted, is_nonblocking, notify, set_nonblocking, start_watchdog,
    writers_blocked_on, MAX_WRITERS, WATCHDOG_IDLE_PERIOD, WATCHDOG_PERIOD,
};

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
}
