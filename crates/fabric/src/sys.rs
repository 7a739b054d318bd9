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

// ---------------------------------------------------------------------------
// Copies into a peer's memory
// ---------------------------------------------------------------------------

/// Frames of at least this many bytes are copied into a peer's memory (a
/// memif or vhost-user buffer another core reads next) with
/// [`copy_streaming`] where the copying thread streams that kind of peer
/// ([`streams`]).
pub const STREAM_MIN_B: usize = 1024;

/// The kinds of peer memory a large copy goes into, each with its own way
/// of copying ([`streams`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CopyInto {
    /// A memif client's buffer.
    Memif = 0,
    /// A vhost-user guest's buffer.
    VhostUser = 1,
}

/// How many [`CopyInto`] kinds there are.
pub const COPY_KINDS: usize = 2;

/// Whether each [`CopyInto`] kind streams until a thread says otherwise
/// ([`set_streaming`]): memif yes, vhost-user no (ordinary stores: what
/// cost the whole path less on the last host measured; a worker's
/// [`crate::copymode`] chooser finds what does on its own).
pub const STREAMS_AT_FIRST: [bool; COPY_KINDS] = [true, false];

std::thread_local! {
    /// This thread's way per kind ([`set_streaming`]) and its large copies
    /// per kind so far ([`large_copies`]).
    static COPY_WAY: std::cell::Cell<[bool; COPY_KINDS]> =
        const { std::cell::Cell::new(STREAMS_AT_FIRST) };
    static LARGE_COPIES: std::cell::Cell<[u64; COPY_KINDS]> =
        const { std::cell::Cell::new([0; COPY_KINDS]) };
}

/// Whether a frame of `len` bytes copied into peer memory of kind `into`
/// is written with [`copy_streaming`] on this thread: it has at least
/// [`STREAM_MIN_B`] and the thread streams that kind. Counts the large
/// ones ([`large_copies`]). Either way the copy is the same bytes; only the
/// stores differ.
#[inline]
pub fn streams(into: CopyInto, len: usize) -> bool {
    if len < STREAM_MIN_B {
        return false;
    }
    let k = into as usize;
    LARGE_COPIES.with(|c| {
        let mut n = c.get();
        n[k] = n[k].wrapping_add(1);
        c.set(n);
    });
    COPY_WAY.with(|w| w.get()[k])
}

/// Sets this thread's way per kind ([`streams`]).
pub fn set_streaming(ways: [bool; COPY_KINDS]) {
    COPY_WAY.with(|w| w.set(ways));
}

/// This thread's way per kind ([`streams`]).
pub fn streaming() -> [bool; COPY_KINDS] {
    COPY_WAY.with(std::cell::Cell::get)
}

/// The frames of [`STREAM_MIN_B`] or more this thread has copied into
/// each kind of peer memory so far (wrapping).
#[inline]
pub fn large_copies() -> [u64; COPY_KINDS] {
    LARGE_COPIES.with(std::cell::Cell::get)
}

/// Copies `len` bytes from `src` to `dst`, the whole 64-byte lines of `dst`
/// with non-temporal stores: written to memory without first reading the
/// line into this core's cache (no request for ownership of a line the
/// peer's core last read). The partial lines at either end are ordinary
/// stores, so no line is written both ways. Off x86_64 a plain copy.
///
/// Non-temporal stores are weakly ordered: the caller runs
/// [`store_fence`] after its copies and before the store that tells the
/// peer they are done.
///
/// # Safety
/// As `std::ptr::copy_nonoverlapping(src, dst, len)`.
#[inline]
pub unsafe fn copy_streaming(dst: *mut u8, src: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the caller's contract covers [dst, dst + len) and
    // [src, src + len); every access below is inside them: `head` <= len,
    // the loop stores whole lines while i + 64 <= len, the tail is the
    // rest. `_mm_stream_si128` needs a 16-byte aligned address: dst + head
    // is 64-byte aligned and i advances by 64. SSE2 is part of x86_64.
    unsafe {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let head = dst.align_offset(64).min(len);
        std::ptr::copy_nonoverlapping(src, dst, head);
        let mut i = head;
        while i + 64 <= len {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let a = _mm_loadu_si128(s);
            let b = _mm_loadu_si128(s.add(1));
            let c = _mm_loadu_si128(s.add(2));
            let e = _mm_loadu_si128(s.add(3));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
            i += 64;
        }
        std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i);
    }
    #[cfg(not(target_arch = "x86_64"))]
    // SAFETY: the caller's contract.
    unsafe {
        std::ptr::copy_nonoverlapping(src, dst, len)
    };
}

/// Orders every earlier non-temporal store ([`copy_streaming`]) before any
/// later store (SFENCE). A no-op off x86_64, where `copy_streaming` uses
/// ordinary stores.
#[inline]
pub fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SFENCE has no operands and no preconditions.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_follows_the_threads_way_per_kind_and_counts_large_copies() {
        // a thread of its own: the ways and counts are per thread
        std::thread::spawn(|| {
            assert_eq!(streaming(), STREAMS_AT_FIRST);
            assert_eq!(large_copies(), [0, 0]);
            assert!(!streams(CopyInto::Memif, STREAM_MIN_B - 1));
            assert_eq!(streams(CopyInto::Memif, 1518), STREAMS_AT_FIRST[0]);
            assert_eq!(streams(CopyInto::VhostUser, 1518), STREAMS_AT_FIRST[1]);
            set_streaming([false, true]);
            assert!(!streams(CopyInto::Memif, 9000));
            assert!(streams(CopyInto::VhostUser, STREAM_MIN_B));
            assert!(!streams(CopyInto::VhostUser, 64));
            assert_eq!(large_copies(), [2, 2]);
        })
        .join()
        .unwrap();
        assert_eq!(large_copies(), [0, 0]);
    }
    use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::SeqCst};
    use std::sync::Arc;

    #[test]
    fn a_streaming_copy_writes_exactly_its_bytes_at_every_length_and_offset() {
        let src: Vec<u8> = (0..700u32).map(|i| (i * 7 + 3) as u8).collect();
        for off in [0usize, 1, 10, 12, 15, 16, 63, 64, 65] {
            for len in (0..=300).chain([511, 512, 513, 1518, 600]) {
                for src_off in [0usize, 3] {
                    // 64-byte aligned storage, so `off` is the offset from a line.
                    #[repr(align(64))]
                    struct Line([u8; 64]);
                    let mut buf: Vec<Line> = (0..16).map(|_| Line([0xAA; 64])).collect();
                    assert_eq!(buf[15].0[63], 0xAA);
                    let dst = buf.as_mut_ptr() as *mut u8;
                    let (lead, n) = (off, len.min(700 - src_off));
                    // SAFETY: the 1024-byte buffer holds off + n <= 65 + 700
                    // bytes; src holds src_off + n; they do not overlap.
                    unsafe { copy_streaming(dst.add(lead), src.as_ptr().add(src_off), n) };
                    store_fence();
                    let got: &[u8] =
                        // SAFETY: the 1024 bytes of `buf`.
                        unsafe { std::slice::from_raw_parts(dst, 1024) };
                    assert!(
                        got[..lead].iter().all(|&b| b == 0xAA),
                        "before, off {off} len {n}"
                    );
                    assert_eq!(
                        &got[lead..lead + n],
                        &src[src_off..src_off + n],
                        "off {off} len {n}"
                    );
                    assert!(
                        got[lead + n..].iter().all(|&b| b == 0xAA),
                        "after, off {off} len {n}"
                    );
                }
            }
        }
    }
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
