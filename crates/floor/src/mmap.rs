//! An owned memory mapping.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;

/// The size of a page (`sysconf(_SC_PAGESIZE)`; 4096 if it fails).
pub fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// A memory mapping this value owns: `len` bytes at [`as_ptr`](Self::as_ptr),
/// readable and writable, unmapped when it drops.
///
/// It is only an address and a length: it never forms a Rust reference to
/// the bytes, which another process, the kernel or a device may write at
/// any time. Code that reads or writes through the pointer does so in its
/// own `unsafe` blocks, bounded by [`len`](Self::len) and kept alive by
/// holding the `Mmap` (or whatever holds it) for as long as it uses the
/// memory.
#[derive(Debug)]
pub struct Mmap {
    ptr: NonNull<u8>,
    len: usize,
}

// SAFETY: `Mmap` owns its mapping (unmapped once, in Drop) and is only an
// address and a length, usable from any thread; it gives no access to the
// bytes by itself (see the type's documentation).
unsafe impl Send for Mmap {}
// SAFETY: as for Send: `&Mmap` only reads the address and the length.
unsafe impl Sync for Mmap {}

/// How to map: built by [`Mmap::anonymous`] or [`Mmap::of_fd`], mapped by
/// [`MmapOptions::map`]. Always `PROT_READ | PROT_WRITE`.
#[derive(Clone, Copy, Debug)]
#[must_use = "nothing is mapped until `map` is called"]
pub struct MmapOptions {
    len: usize,
    fd: RawFd,
    offset: i64,
    flags: libc::c_int,
}

impl Mmap {
    /// `len` bytes of zeroed anonymous memory, private to this process
    /// (`MAP_PRIVATE | MAP_ANONYMOUS`).
    pub fn anonymous(len: usize) -> MmapOptions {
        MmapOptions {
            len,
            fd: -1,
            offset: 0,
            flags: libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
        }
    }

    /// `len` bytes of the file (memfd, socket ring, hugetlbfs file) `fd`,
    /// from offset 0, shared (`MAP_SHARED`): what others write we see. The
    /// descriptor may be closed once mapped.
    pub fn of_fd(fd: RawFd, len: usize) -> MmapOptions {
        MmapOptions {
            len,
            fd,
            offset: 0,
            flags: libc::MAP_SHARED,
        }
    }

    /// The first byte (page aligned).
    #[inline]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// The first byte (page aligned), never null.
    #[inline]
    pub fn as_non_null(&self) -> NonNull<u8> {
        self.ptr
    }

    /// Length of the mapping in bytes (as asked for, not rounded to pages).
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the mapping is empty (never: an empty mapping cannot be
    /// made).
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Fills this process's page tables for `len` bytes from `off` (the
    /// start rounded down to a page, the range clipped to the mapping),
    /// writable (`MADV_POPULATE_WRITE`, Linux 5.14): pages nobody touched
    /// yet are allocated now, on the caller's (control) path, instead of
    /// faulting at their first touch on the data path. Changes no byte. An
    /// error (an older kernel: EINVAL; a file shrunk under us: EFAULT, not a
    /// SIGBUS) leaves the faults to the first touches.
    pub fn populate_write(&self, off: usize, len: usize) -> io::Result<()> {
        self.advise_range(off, len, libc::MADV_POPULATE_WRITE)
    }

    /// `madvise(advice)` over the whole mapping (e.g. `MADV_HUGEPAGE`).
    pub fn advise(&self, advice: libc::c_int) -> io::Result<()> {
        self.advise_range(0, self.len, advice)
    }

    fn advise_range(&self, off: usize, len: usize, advice: libc::c_int) -> io::Result<()> {
        if off >= self.len {
            return Ok(());
        }
        let start = off - off % page_size();
        let len = (off - start).saturating_add(len).min(self.len - start);
        if len == 0 {
            return Ok(());
        }
        // SAFETY: [start, start + len) lies inside our mapping, start page
        // aligned (the mapping is); the advice used here changes no byte
        // the program relies on (populating, huge pages).
        let r = unsafe { libc::madvise(self.as_ptr().add(start).cast(), len, advice) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }
}

impl MmapOptions {
    /// Maps from `offset` in the file (a multiple of the page size; the
    /// page offset of a socket's ring).
    pub fn offset(mut self, offset: i64) -> Self {
        self.offset = offset;
        self
    }

    /// A private (copy-on-write) mapping instead of a shared one.
    pub fn private(mut self) -> Self {
        self.flags = (self.flags & !libc::MAP_SHARED) | libc::MAP_PRIVATE;
        self
    }

    /// Faults the whole mapping in now (`MAP_POPULATE`).
    pub fn populate(mut self) -> Self {
        self.flags |= libc::MAP_POPULATE;
        self
    }

    /// Reserves no swap for it (`MAP_NORESERVE`): only the pages touched
    /// take memory.
    pub fn noreserve(mut self) -> Self {
        self.flags |= libc::MAP_NORESERVE;
        self
    }

    /// Makes the mapping; the kernel picks the address.
    pub fn map(self) -> io::Result<Mmap> {
        if self.len == 0 {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty mapping"));
        }
        // SAFETY: a new mapping at an address the kernel picks (no
        // MAP_FIXED): it replaces nothing. The result is checked below.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                self.len,
                libc::PROT_READ | libc::PROT_WRITE,
                self.flags,
                self.fd,
                self.offset,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let ptr =
            NonNull::new(p.cast::<u8>()).ok_or_else(|| io::Error::from(io::ErrorKind::Other))?;
        Ok(Mmap { ptr, len: self.len })
    }
}

impl Drop for Mmap {
    fn drop(&mut self) {
        // SAFETY: ptr/len is exactly the mapping `map` made, unmapped only
        // here; whoever used the memory held this Mmap while it did.
        unsafe { libc::munmap(self.ptr.as_ptr().cast(), self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

    #[test]
    fn anonymous_memory_is_zeroed_and_writable() {
        let m = Mmap::anonymous(3 * 4096 + 5).populate().map().unwrap();
        assert_eq!(m.len(), 3 * 4096 + 5);
        assert_eq!(m.as_ptr() as usize % page_size(), 0);
        // SAFETY: inside our private mapping.
        unsafe {
            assert_eq!(*m.as_ptr().add(3 * 4096 + 4), 0);
            *m.as_ptr().add(3 * 4096 + 4) = 7;
            assert_eq!(*m.as_ptr().add(3 * 4096 + 4), 7);
        }
        assert!(Mmap::anonymous(0).map().is_err());
        // Clipped to the mapping, start rounded down.
        let _ = m.populate_write(4097, 1 << 30);
        assert!(m.populate_write(1 << 30, 1).is_ok());
        let n = Mmap::anonymous(1 << 20).noreserve().map().unwrap();
        let _ = n.advise(libc::MADV_HUGEPAGE);
    }

    #[test]
    fn two_shared_mappings_of_one_file_see_each_others_writes() {
        // SAFETY: a static NUL-terminated name; checked.
        let fd = unsafe { libc::memfd_create(c"mmap-test".as_ptr(), libc::MFD_CLOEXEC) };
        assert!(fd >= 0);
        // SAFETY: a fresh descriptor we own.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        // SAFETY: plain syscall on our descriptor.
        assert_eq!(unsafe { libc::ftruncate(fd.as_raw_fd(), 8192) }, 0);
        let a = Mmap::of_fd(fd.as_raw_fd(), 8192).map().unwrap();
        let b = Mmap::of_fd(fd.as_raw_fd(), 4096)
            .offset(4096)
            .map()
            .unwrap();
        let c = Mmap::of_fd(fd.as_raw_fd(), 8192).private().map().unwrap();
        drop(fd);
        // SAFETY: inside the mappings, which we hold.
        unsafe {
            *a.as_ptr().add(4096) = 42;
            assert_eq!(*b.as_ptr(), 42);
            assert_eq!(*c.as_ptr().add(4096), 42);
            *c.as_ptr().add(4096) = 1;
            assert_eq!(*a.as_ptr().add(4096), 42);
        }
        a.populate_write(0, 8192).ok();
    }
}
