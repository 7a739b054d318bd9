//! Every `unsafe` block and system call of the vhost-user backend.
//!
//! - [`GuestMemory`]: the frontend's memory regions, mapped from the file
//!   descriptors of `SET_MEM_TABLE` (or anonymous memory in tests), with
//!   checked translation of guest-physical and frontend-virtual addresses
//!   into [`GuestSlice`]s that cannot outlive the mapping.
//! - [`Ring`]: the three parts of one split virtqueue (descriptor table,
//!   available ring, used ring), located and bounds-checked once, then read
//!   and written with atomic/volatile accesses. A ring holds an
//!   `Arc<GuestMemory>`, so its memory stays mapped as long as the ring
//!   lives, whatever the control thread does meanwhile.
//! - eventfd signalling, `poll(2)` for the control thread, `O_NONBLOCK`.
//!
//! The frontend writes its memory concurrently with us: every value read
//! from it is read once into a local and validated there (descriptor
//! fields, ring indexes), never re-read after validation. It can also
//! shrink the files behind it: every mapping is registered with
//! [`crate::guard`], so an access past the new end of a file reads zeroes
//! and flags the memory ([`GuestMemory::faulted`]) instead of ending the
//! process with `SIGBUS`.

use std::any::Any;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;

use fabric::RxFill;

use crate::guard::MemGuard;

/// Most memory regions in one table (the vhost-user limit without
/// `CONFIGURE_MEM_SLOTS`).
pub const MAX_REGIONS: usize = 8;

/// One region of a `SET_MEM_TABLE` message, with its file.
#[derive(Debug)]
pub struct RegionSpec {
    /// Guest-physical start address.
    pub gpa: u64,
    /// Size in bytes.
    pub size: u64,
    /// Start address in the frontend's virtual address space.
    pub uva: u64,
    /// Offset of the region in `file`.
    pub offset: u64,
    /// The region's backing file (memfd, hugetlbfs file).
    pub file: File,
}

#[derive(Debug)]
struct Region {
    gpa: u64,
    size: u64,
    uva: u64,
    host: *mut u8,
    /// The mapping `host` points into (from file offset 0).
    map: floor::Mmap,
}

/// The frontend's memory, mapped into this process.
#[derive(Debug)]
pub struct GuestMemory {
    regions: Vec<Region>,
    /// Index of the largest region: the one [`GuestMemory::view`] checks
    /// first (where a guest's buffers almost always are).
    big: usize,
    /// The mappings' registration with the `SIGBUS` guard (none for
    /// anonymous memory). Dropped before the regions are unmapped.
    guard: MemGuard,
}

// SAFETY: GuestMemory owns the mappings (unmapped when the last owner drops
// it) and holds no other state. The memory is the guest's, which may write
// any byte at any time: every access goes through a bounds-checked
// `GuestSlice` with raw-pointer copies (never a Rust reference to the bytes)
// and ring fields are atomics or volatile copies; values read are
// validated before use. Zero-copy receive views can see the guest change a
// frame's bytes under them, never its location or length.
unsafe impl Send for GuestMemory {}
// SAFETY: as for Send.
unsafe impl Sync for GuestMemory {}

fn page_size() -> u64 {
    floor::page_size() as u64
}

fn overlaps(a: (u64, u64), b: (u64, u64)) -> bool {
    a.0 < b.0 + b.1 && b.0 < a.0 + a.1
}

/// `statfs` magic of hugetlbfs.
const HUGETLBFS_MAGIC: i64 = 0x9584_58f6;

/// Most bytes of a memory table [`GuestMemory::map`] maps in at once:
/// turnout-gen's frontend (two 8192-entry queues of buffers) whole, the
/// first 256 MiB of a larger guest (the rest is faulted in where its
/// buffers are, frame by frame).
pub const PREFAULT_MAX_B: usize = 256 << 20;

/// The unit a mapping of `file` is made of: the huge page size for a
/// hugetlbfs file (its `st_blksize`), else the page size. A mapping's
/// length is rounded up to it, so what we register, replace and unmap is
/// the whole mapping.
fn map_unit(file: &File, st: &libc::stat) -> u64 {
    // SAFETY: fstatfs fills a plain struct we own; the fd is valid.
    let mut fs: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let huge = unsafe { libc::fstatfs(file.as_raw_fd(), &mut fs) } == 0
        && fs.f_type as i64 == HUGETLBFS_MAGIC;
    if huge && st.st_blksize > 0 && (st.st_blksize as u64).is_power_of_two() {
        (st.st_blksize as u64).max(page_size())
    } else {
        page_size()
    }
}

impl GuestMemory {
    /// Maps the regions of a memory table. Regions must be non-empty, must
    /// not overflow or overlap (in guest-physical or frontend-virtual
    /// space), and there may be at most [`MAX_REGIONS`].
    ///
    /// Each region is mapped from file offset 0 to `offset + size` (as
    /// DPDK's vhost library does), so an `offset` that is not a multiple of
    /// the hugepage size of a hugetlbfs file still maps.
    ///
    /// Every mapping is registered with the `SIGBUS` guard: a frontend
    /// that shrinks a file under us makes that memory read zeroes and
    /// [`GuestMemory::faulted`] true, nothing worse.
    pub fn map(specs: Vec<RegionSpec>) -> io::Result<Self> {
        Self::map_guarded(specs, None, None)
    }

    /// As [`GuestMemory::map`]; a fault sets `flag` (shared by every
    /// memory table of one connection, so a fault in memory being replaced
    /// counts too) and writes `wake` (a non-blocking eventfd, and what
    /// keeps it open) so its owner hears of it at once.
    pub fn map_guarded(
        specs: Vec<RegionSpec>,
        flag: Option<Arc<std::sync::atomic::AtomicBool>>,
        wake: Option<(RawFd, Arc<dyn Any + Send + Sync>)>,
    ) -> io::Result<Self> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        if specs.is_empty() || specs.len() > MAX_REGIONS {
            return Err(bad("memory table must have 1..=8 regions"));
        }
        for (i, s) in specs.iter().enumerate() {
            if s.size == 0
                || s.gpa.checked_add(s.size).is_none()
                || s.uva.checked_add(s.size).is_none()
                || s.offset
                    .checked_add(s.size)
                    .is_none_or(|e| e > isize::MAX as u64)
            {
                return Err(bad("memory region is empty or overflows"));
            }
            for t in &specs[..i] {
                if overlaps((s.gpa, s.size), (t.gpa, t.size))
                    || overlaps((s.uva, s.size), (t.uva, t.size))
                {
                    return Err(bad("memory regions overlap"));
                }
            }
        }
        // A region must lie inside its file: a mapping past the end of the
        // file maps, but the first access there raises SIGBUS (found by
        // fuzzing: a frontend that announces more memory than its memfd
        // holds). A frontend that shrinks its file after this check is
        // caught by the SIGBUS guard (crate::guard): that memory reads
        // zeroes and the port disconnects it.
        let mut units = Vec::with_capacity(specs.len());
        for s in &specs {
            // SAFETY: fstat fills a plain struct we own; the fd is valid.
            let mut st: libc::stat = unsafe { std::mem::zeroed() };
            // SAFETY: as above.
            if unsafe { libc::fstat(s.file.as_raw_fd(), &mut st) } != 0 {
                return Err(io::Error::last_os_error());
            }
            if st.st_mode & libc::S_IFMT != libc::S_IFREG {
                return Err(bad("memory region file is not a regular file or memfd"));
            }
            if (st.st_size as u64) < s.offset + s.size {
                return Err(bad("memory region extends past the end of its file"));
            }
            units.push(map_unit(&s.file, &st));
        }
        let big = (0..specs.len())
            .max_by_key(|&i| (specs[i].size, std::cmp::Reverse(i)))
            .unwrap_or(0);
        let mut mem = GuestMemory {
            regions: Vec::with_capacity(specs.len()),
            big,
            guard: MemGuard::new(flag, wake),
        };
        for (s, unit) in specs.into_iter().zip(units) {
            let want = s.offset + s.size;
            let map_len = want
                .div_ceil(unit)
                .checked_mul(unit)
                .filter(|l| *l <= isize::MAX as u64)
                .ok_or_else(|| bad("memory region is empty or overflows"))?;
            // Regions mapped so far are unmapped when `mem` drops.
            let map = floor::Mmap::of_fd(s.file.as_raw_fd(), map_len as usize)
                .noreserve()
                .map()?;
            let base = map.as_ptr();
            // SAFETY: offset < map_len, so the pointer stays in the mapping.
            let host = unsafe { base.add(s.offset as usize) };
            mem.regions.push(Region {
                gpa: s.gpa,
                size: s.size,
                uva: s.uva,
                host,
                map,
            });
            // Registered before anything can touch it (the memory is not
            // handed out before this returns).
            // SAFETY: exactly the mapping just made (its length rounded to
            // the mapping's unit); Drop drops the guard before unmapping.
            unsafe { mem.guard.add(base, map_len as usize)? };
        }
        mem.prefault();
        Ok(mem)
    }

    /// Fills this process's page tables for the regions, in order, up to
    /// [`PREFAULT_MAX_B`] in all, on the control path
    /// (`MADV_POPULATE_WRITE`, Linux 5.14), as DPDK's vhost library maps
    /// guest memory with `MAP_POPULATE`: otherwise every page of the other
    /// side's buffers costs a page fault at its first touch through our
    /// mapping, in the worker, for the rings' whole first lap (~5 µs a
    /// frame on this project's nested VM: docs/vhost-user.md, "Prefaulted
    /// guest memory"). Pages nobody touched yet are allocated now. Best
    /// effort: an error (an older kernel; a file shrunk under us: EFAULT,
    /// not a SIGBUS) leaves the faults to the data path.
    fn prefault(&self) {
        let page = page_size() as usize;
        let mut left = PREFAULT_MAX_B;
        for r in &self.regions {
            if left == 0 {
                break;
            }
            let off = r.host as usize - r.map.as_ptr() as usize;
            let start = off - off % page;
            let len = (off - start + r.size as usize).min(left);
            let _ = r.map.populate_write(start, len);
            left -= len;
        }
    }

    /// Whether an access to this memory (or to another memory sharing its
    /// flag) faulted (a file shrunk under us): the memory may read zeroes
    /// now, and its frontend must be disconnected.
    #[inline]
    pub fn faulted(&self) -> bool {
        self.guard.faulted()
    }

    /// Anonymous zeroed memory at guest-physical (and frontend-virtual)
    /// address `gpa`: for tests that build rings and descriptors by hand.
    pub fn anonymous(gpa: u64, size: u64) -> io::Result<Self> {
        if size == 0 || gpa.checked_add(size).is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "bad anonymous region",
            ));
        }
        let map_len = size.div_ceil(page_size()) * page_size();
        let map = floor::Mmap::anonymous(map_len as usize).map()?;
        Ok(GuestMemory {
            regions: vec![Region {
                gpa,
                size,
                uva: gpa,
                host: map.as_ptr(),
                map,
            }],
            big: 0,
            guard: MemGuard::new(None, None),
        })
    }

    /// Number of regions.
    pub fn regions(&self) -> usize {
        self.regions.len()
    }

    /// The `len` bytes at guest-physical address `gpa`, if they lie inside
    /// one region ([`GuestMemory::gpa_ptr`], as a slice).
    #[inline]
    pub fn gpa(&self, gpa: u64, len: u64) -> Option<GuestSlice<'_>> {
        self.gpa_ptr(gpa, len).map(|ptr| GuestSlice {
            ptr,
            len: len as usize,
            _mem: std::marker::PhantomData,
        })
    }

    /// The start of the `len` bytes at guest-physical address `gpa`, if
    /// they lie inside one region (as [`GuestMemory::gpa`], without making
    /// a slice: the receive fast path knows the length it checked). The
    /// one walk of the region table by guest-physical address.
    #[inline]
    pub fn gpa_ptr(&self, gpa: u64, len: u64) -> Option<*mut u8> {
        for r in &self.regions {
            let off = gpa.wrapping_sub(r.gpa);
            if gpa >= r.gpa && off < r.size && len <= r.size - off {
                // SAFETY: off + len <= size, so the range is inside the
                // region's mapping.
                return Some(unsafe { r.host.add(off as usize) });
            }
        }
        None
    }

    /// The largest region's bounds, copied for a loop that translates
    /// many buffer addresses ([`MemView`]).
    #[inline]
    pub fn view(&self) -> MemView<'_> {
        let (gpa, size, host) = self
            .regions
            .get(self.big)
            .map_or((0, 0, std::ptr::null_mut()), |r| (r.gpa, r.size, r.host));
        MemView {
            gpa,
            size,
            host,
            mem: self,
        }
    }

    /// [`GuestMemory::gpa_ptr`], called: what [`MemView`] falls back to
    /// for an address outside the largest region.
    #[inline(never)]
    fn gpa_ptr_any(&self, gpa: u64, len: u64) -> Option<*mut u8> {
        self.gpa_ptr(gpa, len)
    }

    /// The `len` bytes at frontend-virtual address `uva` (ring addresses
    /// of `SET_VRING_ADDR`), if they lie inside one region.
    pub fn uva(&self, uva: u64, len: u64) -> Option<GuestSlice<'_>> {
        let r = self
            .regions
            .iter()
            .find(|r| uva >= r.uva && uva - r.uva < r.size)?;
        let off = uva - r.uva;
        if len > r.size - off {
            return None;
        }
        // SAFETY: off + len <= size: inside the region's mapping.
        let ptr = unsafe { r.host.add(off as usize) };
        Some(GuestSlice {
            ptr,
            len: len as usize,
            _mem: std::marker::PhantomData,
        })
    }
}

impl Drop for GuestMemory {
    fn drop(&mut self) {
        // Unregistered first: a range is never registered while unmapped.
        drop(std::mem::replace(
            &mut self.guard,
            MemGuard::new(None, None),
        ));
        // The regions' mappings are unmapped after this, when `regions`
        // drops; no GuestSlice or Ring can outlive self (lifetimes / Arc).
    }
}

/// The largest region of a [`GuestMemory`], copied for a loop over many
/// buffers ([`GuestMemory::view`]): the compiler keeps its bounds in
/// registers instead of walking the region table for every frame.
#[derive(Clone, Copy)]
pub struct MemView<'m> {
    gpa: u64,
    size: u64,
    host: *mut u8,
    mem: &'m GuestMemory,
}

impl MemView<'_> {
    /// As [`GuestMemory::gpa_ptr`]: the start of the `len` bytes at
    /// guest-physical address `gpa`, if they lie inside one region.
    #[inline(always)]
    pub fn gpa_ptr(&self, gpa: u64, len: u64) -> Option<*mut u8> {
        // gpa < self.gpa wraps `off` to at least 2^64 - self.gpa, which is
        // not below `size` (gpa + size does not overflow: checked when
        // mapped): one comparison covers both ends.
        let off = gpa.wrapping_sub(self.gpa);
        if off < self.size && len <= self.size - off {
            // SAFETY: off + len <= size: inside the region's mapping, which
            // lives as long as the borrowed GuestMemory ('m).
            return Some(unsafe { self.host.add(off as usize) });
        }
        self.mem.gpa_ptr_any(gpa, len)
    }
}

/// A bounds-checked range of guest memory, valid while the
/// [`GuestMemory`] it came from is borrowed.
#[derive(Clone, Copy, Debug)]
pub struct GuestSlice<'a> {
    ptr: *mut u8,
    len: usize,
    _mem: std::marker::PhantomData<&'a GuestMemory>,
}

impl GuestSlice<'_> {
    /// Length in bytes.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Copies `src` to offset `off`; returns false (copying nothing) if it
    /// does not fit.
    #[inline]
    pub fn write(&self, off: usize, src: &[u8]) -> bool {
        if off > self.len || src.len() > self.len - off {
            return false;
        }
        // SAFETY: [off, off+src.len()) is inside the checked range, which is
        // mapped while 'a lives; src is our own memory, so no overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), self.ptr.add(off), src.len()) };
        true
    }

    /// Copies `dst.len()` bytes from offset `off` into `dst`; returns false
    /// (copying nothing) if the range does not fit.
    #[inline]
    pub fn read(&self, off: usize, dst: &mut [u8]) -> bool {
        if off > self.len || dst.len() > self.len - off {
            return false;
        }
        // SAFETY: as in write, in the other direction.
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), dst.as_mut_ptr(), dst.len()) };
        true
    }

    /// Fills the range with `byte` (tests lay out guest memory with it).
    pub fn fill(&self, byte: u8) {
        // SAFETY: the whole checked range is mapped while 'a lives.
        unsafe { std::ptr::write_bytes(self.ptr, byte, self.len) };
    }
}

/// Appends the frame at `[off, off+len)` of `s` to `batch` without copying
/// (zero-copy receive). Returns false if the batch is full or the range
/// does not fit.
///
/// The caller must keep the memory mapped (hold the `Arc<GuestMemory>`)
/// and the descriptor unreturned to the frontend until the receive queue's
/// `release`: that is the `Pkt` contract, and [`super::vring`] upholds it by
/// holding its session from `burst` to `release`.
#[inline]
pub(crate) fn push_guest(
    batch: &mut RxFill<'_>,
    s: &GuestSlice<'_>,
    off: usize,
    len: usize,
) -> bool {
    if off > s.len || len > s.len - off || len > u32::MAX as usize {
        return false;
    }
    // SAFETY: the range is inside the mapping; the caller holds the memory
    // and the descriptor until release (see above). The frontend may write
    // the bytes concurrently; that can only change what this port's frames
    // contain, never reach outside the range.
    unsafe { batch.push(s.ptr.add(off), len as u32) }
}

/// One descriptor of a split virtqueue, as read (once) from guest memory.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Desc {
    /// Guest-physical address of the buffer.
    pub addr: u64,
    /// Buffer length.
    pub len: u32,
    /// `VRING_DESC_F_*`.
    pub flags: u16,
    /// Next descriptor when `flags & NEXT`.
    pub next: u16,
}

/// Reads descriptor `k` of the table at `table` once: two volatile 8-byte
/// loads of plain data (a volatile `[u8; 16]` compiles to 16 byte loads and
/// their reassembly: ~40 instructions per descriptor), then unpacked. The
/// guest may change the entry between the two loads; the caller validates
/// every field as read, whatever it holds.
///
/// # Safety
/// `table` is the 16-aligned descriptor table of a located [`Ring`] (so
/// both halves of an entry are 8-aligned), `k` is less than its size, and
/// the memory is mapped for the duration of the call (the caller holds the
/// ring, which holds the `Arc<GuestMemory>`).
#[inline(always)]
unsafe fn read_desc(table: *mut u8, k: usize) -> Desc {
    // SAFETY: entry k < size lies inside the 16 * size bytes `Ring::new`
    // checked, 8-aligned, mapped (the caller's contract).
    let (lo, hi) = unsafe {
        let p = table.add(16 * k) as *const u64;
        (
            u64::from_le(std::ptr::read_volatile(p)),
            u64::from_le(std::ptr::read_volatile(p.add(1))),
        )
    };
    Desc {
        addr: lo,
        len: hi as u32,
        flags: (hi >> 32) as u16,
        next: (hi >> 48) as u16,
    }
}

/// A split virtqueue in guest memory, located once and bounds-checked.
#[derive(Debug)]
pub struct Ring {
    mem: Arc<GuestMemory>,
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    size: u16,
}

// SAFETY: the pointers are into `mem`, which the ring keeps alive; all
// accesses are atomic or volatile copies of plain data, so the guest
// writing the rings concurrently (as it may, at any time) is never a data
// race on a Rust reference.
unsafe impl Send for Ring {}
// SAFETY: as for Send. Our own concurrent writers of the used ring are
// coordinated by the callers (one receive owner; transmit writers on
// disjoint reserved entries, the index under the queue's TxLock).
unsafe impl Sync for Ring {}

/// Why a ring could not be located.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingError {
    /// Size 0, larger than 32768 or not a power of two.
    BadSize,
    /// A part is not aligned as the virtio spec requires.
    Misaligned,
    /// A part is not inside one memory region.
    OutOfMemory,
}

impl Ring {
    /// Locates a ring of `size` entries from the frontend-virtual addresses
    /// of `SET_VRING_ADDR`. The used ring includes `avail_event` and the
    /// available ring `used_event` (room for `EVENT_IDX` either way).
    pub fn new(
        mem: Arc<GuestMemory>,
        desc_uva: u64,
        avail_uva: u64,
        used_uva: u64,
        size: u16,
    ) -> Result<Ring, RingError> {
        if size == 0 || size > 32768 || !size.is_power_of_two() {
            return Err(RingError::BadSize);
        }
        if !desc_uva.is_multiple_of(16)
            || !avail_uva.is_multiple_of(2)
            || !used_uva.is_multiple_of(4)
        {
            return Err(RingError::Misaligned);
        }
        let n = size as u64;
        let desc = mem.uva(desc_uva, 16 * n).ok_or(RingError::OutOfMemory)?.ptr;
        let avail = mem
            .uva(avail_uva, 6 + 2 * n)
            .ok_or(RingError::OutOfMemory)?
            .ptr;
        let used = mem
            .uva(used_uva, 6 + 8 * n)
            .ok_or(RingError::OutOfMemory)?
            .ptr;
        // The frontend-virtual alignment above does not imply the host's:
        // a region's file offset is the frontend's choice (an odd one maps
        // a ring at an odd host address). The accessors below read and
        // write aligned words, so refuse such a ring.
        if !(desc as usize).is_multiple_of(16)
            || !(avail as usize).is_multiple_of(2)
            || !(used as usize).is_multiple_of(4)
        {
            return Err(RingError::Misaligned);
        }
        Ok(Ring {
            mem,
            desc,
            avail,
            used,
            size,
        })
    }

    /// The memory the ring and its buffers live in.
    #[inline]
    pub fn mem(&self) -> &GuestMemory {
        &self.mem
    }

    /// The memory, shared (for what must keep it mapped).
    #[inline]
    pub fn mem_arc(&self) -> &Arc<GuestMemory> {
        &self.mem
    }

    /// Number of entries (a power of two).
    #[inline]
    pub fn size(&self) -> u16 {
        self.size
    }

    #[inline]
    fn u16_at(&self, p: *mut u8) -> &AtomicU16 {
        // SAFETY: p is 2-aligned (checked in new; offsets are even) and
        // inside the ring's checked range, mapped while self.mem lives.
        unsafe { &*(p as *const AtomicU16) }
    }

    /// The ring's addresses as a copy for a loop over many entries: the
    /// compiler keeps them in registers instead of loading them from the
    /// (shared) ring for every entry.
    #[inline]
    pub fn view(&self) -> RingView<'_> {
        RingView {
            desc: self.desc,
            avail: self.avail,
            used: self.used,
            mask: self.size - 1,
            _ring: std::marker::PhantomData,
        }
    }

    /// `avail->flags`.
    #[inline]
    pub fn avail_flags(&self) -> u16 {
        self.u16_at(self.avail).load(Ordering::Relaxed)
    }

    /// `avail->idx`, with Acquire: entries before it are readable after.
    #[inline]
    pub fn avail_idx(&self) -> u16 {
        self.u16_at(self.avail.wrapping_add(2))
            .load(Ordering::Acquire)
    }

    /// `avail->ring[i % size]`.
    #[inline]
    pub fn avail_entry(&self, i: u16) -> u16 {
        let k = (i & (self.size - 1)) as usize;
        self.u16_at(self.avail.wrapping_add(4 + 2 * k))
            .load(Ordering::Relaxed)
    }

    /// `used_event` (after the available ring), for `EVENT_IDX`.
    #[inline]
    pub fn used_event(&self) -> u16 {
        self.u16_at(self.avail.wrapping_add(4 + 2 * self.size as usize))
            .load(Ordering::Relaxed)
    }

    /// Descriptor `i % size`, read once.
    #[inline]
    pub fn desc(&self, i: u16) -> Desc {
        let k = (i & (self.size - 1)) as usize;
        // SAFETY: k < size: entry k of this ring's table (`read_desc`).
        unsafe { read_desc(self.desc, k) }
    }

    /// `used->flags`.
    #[inline]
    pub fn set_used_flags(&self, flags: u16) {
        self.u16_at(self.used).store(flags, Ordering::Relaxed);
    }

    /// `used->idx` as last stored by us.
    #[inline]
    pub fn used_idx(&self) -> u16 {
        self.u16_at(self.used.wrapping_add(2))
            .load(Ordering::Relaxed)
    }

    /// Publishes `used->idx` with Release: entries written before it are
    /// visible to the frontend.
    #[inline]
    pub fn set_used_idx(&self, idx: u16) {
        self.u16_at(self.used.wrapping_add(2))
            .store(idx, Ordering::Release);
    }

    /// Writes `used->ring[i % size] = {id, len}`.
    #[inline]
    pub fn set_used(&self, i: u16, id: u16, len: u32) {
        let k = (i & (self.size - 1)) as usize;
        // SAFETY: entry k < size is inside the checked used range (4-aligned
        // base + 4 + 8k, so both words are 4-aligned); two volatile 4-byte
        // writes of plain data (not one [u8; 8], which compiles to byte
        // stores).
        unsafe {
            let p = self.used.add(4 + 8 * k) as *mut u32;
            std::ptr::write_volatile(p, (id as u32).to_le());
            std::ptr::write_volatile(p.add(1), len.to_le());
        }
    }

    /// `avail_event` (after the used ring), for `EVENT_IDX`.
    #[inline]
    pub fn set_avail_event(&self, v: u16) {
        self.u16_at(self.used.wrapping_add(4 + 8 * self.size as usize))
            .store(v, Ordering::Relaxed);
    }
}

/// A [`Ring`]'s addresses, copied for a loop ([`Ring::view`]): the same
/// device-side accesses, bounds by the same mask.
#[derive(Clone, Copy)]
pub struct RingView<'r> {
    desc: *mut u8,
    avail: *mut u8,
    used: *mut u8,
    mask: u16,
    _ring: std::marker::PhantomData<&'r Ring>,
}

impl RingView<'_> {
    /// `avail->ring[i % size]`.
    #[inline]
    pub fn avail_entry(&self, i: u16) -> u16 {
        let k = (i & self.mask) as usize;
        // SAFETY: as `Ring::avail_entry`: entry k < size, 2-aligned, inside
        // the checked range, mapped while the ring ('r) lives.
        unsafe { &*(self.avail.wrapping_add(4 + 2 * k) as *const AtomicU16) }
            .load(Ordering::Relaxed)
    }

    /// Descriptor `i % size`, read once (as `Ring::desc`).
    #[inline]
    pub fn desc(&self, i: u16) -> Desc {
        let k = (i & self.mask) as usize;
        // SAFETY: k <= mask < size: entry k of the ring's table, mapped
        // while the ring ('r) lives (`read_desc`).
        unsafe { read_desc(self.desc, k) }
    }

    /// Writes `used->ring[(start + j) % size] = {ids[j], 0}` for every `j`
    /// (at most `size` entries): consumed buffers handed back, the entries
    /// written front to back in at most two runs (before and after the
    /// ring's end) with no index arithmetic per entry.
    #[inline]
    pub fn set_used_zero_len(&self, start: u16, ids: &[u16]) {
        let size = self.mask as usize + 1;
        let ids = &ids[..ids.len().min(size)];
        let k = (start & self.mask) as usize;
        let (a, b) = ids.split_at(ids.len().min(size - k));
        for (at, run) in [(k, a), (0, b)] {
            // SAFETY: entries at..at + run.len() <= size lie inside the
            // checked used ring (a: k + (size - k) at most; b: at most
            // size - (size - k) = k entries from 0), 4-aligned, mapped while
            // the ring ('r) lives; volatile 4-byte writes of plain data.
            unsafe {
                let mut p = self.used.add(4 + 8 * at) as *mut u32;
                for &id in run {
                    std::ptr::write_volatile(p, (id as u32).to_le());
                    std::ptr::write_volatile(p.add(1), 0);
                    p = p.add(2);
                }
            }
        }
    }

    /// Writes `used->ring[i % size] = {id, len}` (as `Ring::set_used`).
    #[inline]
    pub fn set_used(&self, i: u16, id: u16, len: u32) {
        let k = (i & self.mask) as usize;
        // SAFETY: as `Ring::set_used`: entry k < size inside the checked,
        // 4-aligned used ring, mapped while the ring ('r) lives.
        unsafe {
            let p = self.used.add(4 + 8 * k) as *mut u32;
            std::ptr::write_volatile(p, (id as u32).to_le());
            std::ptr::write_volatile(p.add(1), len.to_le());
        }
    }
}

/// The driver (frontend) side of the same ring: what `frontend/` writes
/// and reads. Indexes are taken modulo the size like the device side.
impl Ring {
    /// Writes descriptor `i % size`.
    #[inline]
    pub fn set_desc(&self, i: u16, d: Desc) {
        let k = (i & (self.size - 1)) as usize;
        let mut raw = [0u8; 16];
        raw[0..8].copy_from_slice(&d.addr.to_le_bytes());
        raw[8..12].copy_from_slice(&d.len.to_le_bytes());
        raw[12..14].copy_from_slice(&d.flags.to_le_bytes());
        raw[14..16].copy_from_slice(&d.next.to_le_bytes());
        // SAFETY: entry k < size is inside the checked 16*size range; a
        // volatile write of plain bytes.
        unsafe { std::ptr::write_volatile(self.desc.add(16 * k) as *mut [u8; 16], raw) };
    }

    /// Writes `avail->ring[i % size] = head`.
    #[inline]
    pub fn set_avail_entry(&self, i: u16, head: u16) {
        let k = (i & (self.size - 1)) as usize;
        self.u16_at(self.avail.wrapping_add(4 + 2 * k))
            .store(head, Ordering::Relaxed);
    }

    /// Publishes `avail->idx` with Release: entries and descriptors written
    /// before it are visible to the device.
    #[inline]
    pub fn set_avail_idx(&self, idx: u16) {
        self.u16_at(self.avail.wrapping_add(2))
            .store(idx, Ordering::Release);
    }

    /// `avail->flags`.
    #[inline]
    pub fn set_avail_flags(&self, flags: u16) {
        self.u16_at(self.avail).store(flags, Ordering::Relaxed);
    }

    /// Writes only the length of descriptor `i % size` (a transmit
    /// descriptor whose address and flags were written once).
    #[inline]
    pub fn set_desc_len(&self, i: u16, len: u32) {
        let k = (i & (self.size - 1)) as usize;
        // SAFETY: bytes 8..12 of entry k < size, inside the checked 16*size
        // range and 4-aligned (the table is 16-aligned); plain data.
        unsafe { std::ptr::write_volatile(self.desc.add(16 * k + 8) as *mut u32, len.to_le()) };
    }

    /// `avail_event` (after the used ring), written by the device with
    /// `EVENT_IDX`: kick when the available index passes it.
    #[inline]
    pub fn avail_event(&self) -> u16 {
        self.u16_at(self.used.wrapping_add(4 + 8 * self.size as usize))
            .load(Ordering::Relaxed)
    }

    /// `used_event` (after the available ring), for `EVENT_IDX`: the
    /// device interrupts when the used index passes it.
    #[inline]
    pub fn set_used_event(&self, v: u16) {
        self.u16_at(self.avail.wrapping_add(4 + 2 * self.size as usize))
            .store(v, Ordering::Relaxed);
    }

    /// `used->flags` (the device's `NO_NOTIFY`).
    #[inline]
    pub fn used_flags(&self) -> u16 {
        self.u16_at(self.used).load(Ordering::Relaxed)
    }

    /// `used->idx` as stored by the device, with Acquire: the entries before
    /// it are readable after.
    #[inline]
    pub fn used_idx_acquire(&self) -> u16 {
        self.u16_at(self.used.wrapping_add(2))
            .load(Ordering::Acquire)
    }

    /// `used->ring[i % size]` as (id, len), read once.
    #[inline]
    pub fn used_entry(&self, i: u16) -> (u32, u32) {
        let k = (i & (self.size - 1)) as usize;
        // SAFETY: entry k < size is inside the checked used range; a
        // volatile read of plain bytes.
        let raw: [u8; 8] =
            unsafe { std::ptr::read_volatile(self.used.add(4 + 8 * k) as *const [u8; 8]) };
        (
            u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]),
            u32::from_le_bytes([raw[4], raw[5], raw[6], raw[7]]),
        )
    }
}

/// `count` buffers of `stride` bytes each, back to back at one
/// guest-physical address, located and bounds-checked once (a frontend's
/// own transmit buffers: buffer `i` belongs to descriptor `i`).
#[derive(Debug)]
pub struct Buffers {
    _mem: Arc<GuestMemory>,
    ptr: *mut u8,
    count: u32,
    stride: usize,
}

// SAFETY: the pointer is into `_mem`, which is kept alive; writers of one
// buffer are coordinated by the caller (disjoint reserved slots).
unsafe impl Send for Buffers {}
// SAFETY: as above.
unsafe impl Sync for Buffers {}

impl Buffers {
    /// The area at `gpa`, if all of it lies inside one region.
    pub fn new(mem: Arc<GuestMemory>, gpa: u64, count: u32, stride: usize) -> Option<Self> {
        let len = (count as u64).checked_mul(stride as u64)?;
        let ptr = mem.gpa(gpa, len)?.ptr;
        Some(Self {
            _mem: mem,
            ptr,
            count,
            stride,
        })
    }

    /// Copies `src` to offset `off` of buffer `i`; false (copying nothing)
    /// if `i` is out of range or it does not fit in the buffer.
    #[inline]
    pub fn write(&self, i: u32, off: usize, src: &[u8]) -> bool {
        if i >= self.count || off > self.stride || src.len() > self.stride - off {
            return false;
        }
        // SAFETY: i < count and off + len <= stride: inside the checked
        // area, mapped while _mem lives; src is our own memory.
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.ptr.add(i as usize * self.stride + off),
                src.len(),
            )
        };
        true
    }

    /// Bytes per buffer.
    #[inline]
    pub fn stride(&self) -> usize {
        self.stride
    }

    /// Bytes `off..off + len` of buffer `i`, to be written in place;
    /// `None` if `i` is out of range or the range does not fit in the
    /// buffer.
    ///
    /// # Safety
    /// Nothing else of ours reads or writes that range while the slice
    /// lives (the caller holds buffer `i`: a reserved, unpublished
    /// transmit position). The peer maps the same memory: an honest peer
    /// does not touch a buffer it does not hold; a dishonest one can only
    /// change bytes of frames addressed to itself.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn slice_mut(&self, i: u32, off: usize, len: usize) -> Option<&mut [u8]> {
        if i >= self.count || off > self.stride || len > self.stride - off {
            return None;
        }
        // SAFETY: i < count and off + len <= stride: inside the checked
        // area, mapped while _mem lives; exclusive by the caller's contract.
        Some(unsafe {
            std::slice::from_raw_parts_mut(self.ptr.add(i as usize * self.stride + off), len)
        })
    }
}

impl Buffers {
    /// The `len` bytes at offset `off` of buffer `i`, running on into the
    /// buffers after it (a frame over several adjacent buffers); `None`
    /// unless all of it lies inside the area.
    #[inline]
    pub fn span(&self, i: u32, off: usize, len: usize) -> Option<GuestSlice<'_>> {
        if i >= self.count {
            return None;
        }
        // i < count: i * stride is inside the area (checked in `new`).
        let start = (i as usize * self.stride).checked_add(off)?;
        let end = start.checked_add(len)?;
        if end > self.count as usize * self.stride {
            return None;
        }
        Some(GuestSlice {
            // SAFETY: start <= end <= count * stride: inside the checked
            // area, mapped while _mem lives.
            ptr: unsafe { self.ptr.add(start) },
            len,
            _mem: std::marker::PhantomData,
        })
    }

    /// The little-endian `u16` at offset `off` of buffer `i`, read once
    /// (the peer may be writing it); `None` if it does not fit.
    #[inline]
    pub fn read_u16(&self, i: u32, off: usize) -> Option<u16> {
        if i >= self.count || off.checked_add(2)? > self.stride {
            return None;
        }
        // SAFETY: inside buffer i (checked above), mapped while _mem
        // lives; a volatile read of plain bytes, alignment 1.
        let b = unsafe {
            std::ptr::read_volatile(self.ptr.add(i as usize * self.stride + off) as *const [u8; 2])
        };
        Some(u16::from_le_bytes(b))
    }
}

/// An anonymous shared memory file (`memfd_create`) of `size` bytes,
/// sealed against shrinking: the frontend's memory, mapped here and passed
/// to the backend, which therefore cannot truncate it under us (that would
/// turn our next access into `SIGBUS`).
pub fn memfd(name: &str, size: u64) -> io::Result<File> {
    use std::os::fd::FromRawFd;
    let cname = std::ffi::CString::new(name).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: cname is a valid NUL-terminated string for the call.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh descriptor we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(size)?;
    // SAFETY: fcntl on a descriptor we own; no pointers.
    if unsafe {
        libc::fcntl(
            f.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL,
        )
    } < 0
    {
        return Err(io::Error::last_os_error());
    }
    Ok(f)
}

/// Waits up to `timeout_ms` for `fd` to hang up or become readable;
/// returns true if it did (`POLLIN`, `POLLHUP`, `POLLERR`).
pub fn poll_hangup(fd: RawFd, timeout_ms: i32) -> bool {
    let mut out = [false];
    poll_readable(&[fd], timeout_ms, &mut out).is_ok() && out[0]
}

/// Adds 1 to an eventfd (wakes the frontend); false if that failed. The
/// frontend's eventfds were made non-blocking when they arrived
/// ([`crate::guard::adopt_eventfd`]), so a full counter fails with EAGAIN
/// instead of waiting (and leaves the eventfd readable: the frontend has
/// an interrupt pending anyway); a frontend that made it blocking again
/// has the write interrupted within milliseconds ([`crate::guard::notify`]).
#[inline]
pub fn signal(fd: &File) -> bool {
    crate::guard::notify(fd.as_raw_fd())
}

/// Reads and clears an eventfd, never waiting whatever its `O_NONBLOCK`
/// flag says ([`crate::guard::drain`]).
#[inline]
pub fn drain(fd: RawFd) {
    crate::guard::drain(fd);
}

/// Sets `O_NONBLOCK` on a descriptor.
pub fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    crate::guard::set_nonblocking(fd)
}

/// Waits up to `timeout_ms` for any of `fds` to become readable (or hang
/// up); returns one flag per fd.
pub fn poll_readable(fds: &[RawFd], timeout_ms: i32, out: &mut [bool]) -> io::Result<()> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    // SAFETY: pfds is a valid array of pfds.len() entries.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            out.iter_mut().for_each(|o| *o = false);
            return Ok(());
        }
        return Err(e);
    }
    for (o, p) in out.iter_mut().zip(&pfds) {
        *o = p.revents != 0;
    }
    Ok(())
}

/// `poll(2)` of one descriptor for `events` (`POLLIN`, `POLLOUT`,
/// `POLLRDHUP`, ...) and of `others` for input, up to `timeout_ms`.
/// Returns the first one's `revents` and one readiness flag per other;
/// an interrupted wait is a timeout.
pub fn poll_socket(
    fd: RawFd,
    events: i16,
    others: &[RawFd],
    timeout_ms: i32,
    ready: &mut [bool],
) -> io::Result<i16> {
    let mut pfds = [libc::pollfd {
        fd: -1,
        events: 0,
        revents: 0,
    }; 4];
    let n = 1 + others.len().min(3);
    pfds[0] = libc::pollfd {
        fd,
        events,
        revents: 0,
    };
    for (p, &o) in pfds[1..n].iter_mut().zip(others) {
        *p = libc::pollfd {
            fd: o,
            events: libc::POLLIN,
            revents: 0,
        };
    }
    // SAFETY: pfds is a valid array of at least n entries.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), n as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::Interrupted {
            ready.iter_mut().for_each(|o| *o = false);
            return Ok(0);
        }
        return Err(e);
    }
    for (o, p) in ready.iter_mut().zip(&pfds[1..n]) {
        *o = p.revents != 0;
    }
    Ok(pfds[0].revents)
}

/// Whether a send on `fd` finds room now (`POLLOUT`: for a unix stream
/// socket, at most a quarter of the send buffer is in flight, so one
/// control reply cannot block).
pub fn writable(fd: RawFd) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLOUT,
        revents: 0,
    };
    // SAFETY: one valid pollfd.
    let n = unsafe { libc::poll(&mut p, 1, 0) };
    n == 1 && p.revents & libc::POLLOUT != 0
}

/// Connects a unix stream socket to `path` without waiting: a listener
/// whose backlog is full (a frontend that never accepts) is an error
/// (`EAGAIN`), not a wait. The stream is returned in blocking mode.
pub fn connect_unix(path: &std::path::Path) -> io::Result<std::os::unix::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(floor::connect_unix(path, libc::SOCK_STREAM)?);
    s.set_nonblocking(false)?;
    Ok(s)
}

/// Copies the start of the next message waiting on the control socket
/// into `buf` without consuming it (`MSG_PEEK`, never blocks). Returns how
/// many bytes were copied (0 when nothing is waiting). Passed descriptors
/// stay queued with the message: the peek has no control buffer.
pub fn peek(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: buf is valid for writes of buf.len() bytes for the call.
    let r = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() == io::ErrorKind::WouldBlock {
            return Ok(0);
        }
        return Err(e);
    }
    Ok(r as usize)
}

/// A small epoll set of our own: the stable `notify_fd` of a receive
/// queue (its wake eventfd plus the frontend's current kick eventfd).
/// `floor`'s.
pub use floor::Epoll;

#[cfg(test)]
mod tests {
    use super::*;

    fn memfd(len: u64) -> File {
        // SAFETY: a static NUL-terminated name; the result is checked.
        let fd = unsafe { libc::memfd_create(c"vhost-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor we own.
        let f = unsafe { <File as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        f.set_len(len).unwrap();
        f
    }

    fn spec(gpa: u64, size: u64, offset: u64, file: File) -> RegionSpec {
        RegionSpec {
            gpa,
            size,
            uva: 0x7f00_0000_0000 + gpa,
            offset,
            file,
        }
    }

    /// The memory turnout-gen's frontend shares with a backend
    /// is sealed against shrinking, so the backend (which holds the fd)
    /// cannot truncate it under the frontend; it may still grow.
    #[test]
    fn the_frontends_memory_cannot_be_shrunk_by_its_peer() {
        let f = super::memfd("seal-test", 3 * 4096).unwrap();
        // The peer's copy of the descriptor: the same file.
        let peer = f.try_clone().unwrap();
        let e = peer.set_len(4096).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPERM), "{e}");
        assert_eq!(peer.metadata().unwrap().len(), 3 * 4096);
        // SAFETY: fcntl on our descriptor; no pointers.
        let seals = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GET_SEALS) };
        assert_eq!(seals, libc::F_SEAL_SHRINK | libc::F_SEAL_SEAL);
    }

    /// Regression (found by the vhost_msg fuzz target): a region larger
    /// than its file mapped fine and the first ring access past the end of
    /// the file killed the process with SIGBUS.
    #[test]
    fn regions_must_lie_inside_their_files() {
        let e = GuestMemory::map(vec![spec(0, 1 << 20, 0, memfd(4096))]).unwrap_err();
        assert!(e.to_string().contains("past the end of its file"), "{e}");
        let e = GuestMemory::map(vec![spec(0, 4096, 4096, memfd(4096))]).unwrap_err();
        assert!(e.to_string().contains("past the end of its file"), "{e}");
        // A pipe is not memory.
        let (r, _w) = std::io::pipe().unwrap();
        let file = File::from(std::os::fd::OwnedFd::from(r));
        assert!(GuestMemory::map(vec![spec(0, 4096, 0, file)]).is_err());
        // Exactly the file: fine, and every byte is accessible.
        let m = GuestMemory::map(vec![spec(0, 8192, 4096, memfd(12288))]).unwrap();
        assert!(m.gpa(8191, 1).unwrap().write(0, &[7]));
    }

    #[test]
    fn translation_is_bounded_by_the_region() {
        let m = GuestMemory::anonymous(0x10000, 0x4000).unwrap();
        assert!(m.gpa(0x10000, 0x4000).is_some());
        assert!(m.gpa(0x13fff, 1).is_some());
        assert!(m.gpa(0x13fff, 2).is_none());
        assert!(m.gpa(0xffff, 1).is_none());
        assert!(m.gpa(0x14000, 0).is_none());
        assert!(m.gpa(u64::MAX, 2).is_none());
        assert!(m.gpa(0x10000, u64::MAX).is_none());
        let s = m.gpa(0x10010, 4).unwrap();
        assert!(s.write(0, &[1, 2, 3, 4]));
        assert!(!s.write(1, &[1, 2, 3, 4]));
        let mut b = [0u8; 4];
        assert!(s.read(0, &mut b));
        assert_eq!(b, [1, 2, 3, 4]);
    }

    /// The receive and transmit loops translate buffer addresses through
    /// a view that checks the largest region first: it must answer
    /// exactly as the region table does, for every region, edge and
    /// overflowing address or length a guest can write.
    #[test]
    fn the_view_translates_as_the_region_table_does() {
        let m = GuestMemory::map(vec![
            spec(0, 4096, 0, memfd(4096)),
            spec(0x10000, 3 * 4096, 0, memfd(3 * 4096)),
            spec(0x100000, 8192, 4096, memfd(3 * 4096)),
        ])
        .unwrap();
        assert_eq!(m.big, 1);
        let v = m.view();
        let mut probes = Vec::new();
        for base in [0u64, 0x10000, 0x100000] {
            for d in [0u64, 1, 4095, 4096, 8191, 8192, 3 * 4096 - 1, 3 * 4096] {
                for back in [false, true] {
                    let a = if back { base.wrapping_sub(d) } else { base + d };
                    for len in [0u64, 1, 2, 4096, 3 * 4096, u64::MAX] {
                        probes.push((a, len));
                    }
                }
            }
        }
        probes.extend([(u64::MAX, 1), (u64::MAX, 0), (0x10000, u64::MAX - 0xffff)]);
        let mut hits = [0usize; 2];
        for (a, len) in probes {
            let want = m.gpa_ptr(a, len);
            assert_eq!(v.gpa_ptr(a, len), want, "gpa {a:#x} len {len}");
            assert_eq!(m.gpa(a, len).map(|g| g.ptr), want, "gpa {a:#x} len {len}");
            hits[want.is_some() as usize] += 1;
        }
        assert!(hits[0] > 0 && hits[1] > 0, "{hits:?}");
        // One region (anonymous memory) and its view agree as well.
        let m = GuestMemory::anonymous(0x10000, 0x4000).unwrap();
        let v = m.view();
        for (a, len) in [
            (0x10000, 0x4000),
            (0x13fff, 1),
            (0x13fff, 2),
            (0xffff, 1),
            (0x14000, 0),
        ] {
            assert_eq!(v.gpa_ptr(a, len), m.gpa_ptr(a, len), "gpa {a:#x} len {len}");
        }
        assert!(v.gpa_ptr(0x13fff, 1).is_some() && v.gpa_ptr(0xffff, 1).is_none());
    }

    #[test]
    fn rings_must_be_aligned_sized_and_inside_memory() {
        let m = Arc::new(GuestMemory::anonymous(0, 0x10000).unwrap());
        assert!(Ring::new(m.clone(), 0, 0x1000, 0x2000, 256).is_ok());
        assert_eq!(
            Ring::new(m.clone(), 0, 0x1000, 0x2000, 100).err(),
            Some(RingError::BadSize)
        );
        assert_eq!(
            Ring::new(m.clone(), 8, 0x1000, 0x2000, 256).err(),
            Some(RingError::Misaligned)
        );
        assert_eq!(
            Ring::new(m.clone(), 0, 0x1000, 0xfff0, 256).err(),
            Some(RingError::OutOfMemory)
        );
        assert_eq!(
            Ring::new(m, 0, 0x1000, 0x2000, 0).err(),
            Some(RingError::BadSize)
        );
    }

    /// A region whose file offset is odd puts rings that are aligned in
    /// the frontend's address space at odd host addresses: refused (the
    /// accessors read aligned words), as are offsets aligned to 2 but not
    /// 16 for the descriptor table; page-aligned offsets (every real
    /// frontend) pass.
    #[test]
    fn rings_must_be_aligned_in_host_memory_too() {
        let uva = 0x7f00_0000_0000u64;
        for (offset, ok) in [
            (0u64, true),
            (4096, true),
            (1, false),
            (2, false),
            (8, false),
        ] {
            let m =
                Arc::new(GuestMemory::map(vec![spec(0, 0x4000, offset, memfd(0x8000))]).unwrap());
            let r = Ring::new(m, uva, uva + 0x1000, uva + 0x2000, 256);
            assert_eq!(r.is_ok(), ok, "offset {offset}");
            if !ok {
                assert_eq!(r.err(), Some(RingError::Misaligned), "offset {offset}");
            }
        }
    }
}
