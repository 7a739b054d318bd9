//! A typed, zero-initialised array in an anonymous mapping of its own.

use std::io;
use std::marker::PhantomData;

use crate::Mmap;

/// Types of which the all-zero bit pattern is a valid value.
///
/// # Safety
///
/// An implementor promises that a value whose every byte is 0 is a valid
/// value of the type: integers, floats, `bool`, raw pointers,
/// `MaybeUninit`, and arrays and `#[repr(C)]` structs made only of such
/// (padding may be anything). Not references, `NonNull`, `Box`, function
/// pointers, or enums without a variant of discriminant 0 and no fields.
pub unsafe trait Zeroable: Copy {}

/// `len` values of `T` (a power of two), every one all zero bytes at
/// first, in a private anonymous mapping (`MAP_NORESERVE`) this value owns.
///
/// Nothing writes the values when the array is made: the kernel's zero
/// pages stand for them, and a page takes memory only once it is written
/// (a large array of which only a few entries are used costs little). It
/// is reached as a slice ([`as_slice`](Self::as_slice),
/// [`as_mut_slice`](Self::as_mut_slice)) or, without a bounds check, by an
/// index taken modulo the length ([`wrap`](Self::wrap),
/// [`wrap_mut`](Self::wrap_mut)).
pub struct ZeroedArray<T: Zeroable> {
    map: Mmap,
    /// `len - 1` (`len` is a power of two).
    mask: usize,
    /// The mapping holds `T`s: `ZeroedArray<T>` is `Send` / `Sync` exactly
    /// when `T` is (the `Mmap` itself is both).
    _t: PhantomData<T>,
}

impl<T: Zeroable> ZeroedArray<T> {
    /// `len` zeroed values; `len` must be a power of two, `T` not zero
    /// sized nor aligned to more than a page.
    pub fn new(len: usize) -> io::Result<Self> {
        let bad = |m: &str| io::Error::new(io::ErrorKind::InvalidInput, m.to_string());
        if !len.is_power_of_two() {
            return Err(bad("length not a power of two"));
        }
        let size = std::mem::size_of::<T>();
        if size == 0 || std::mem::align_of::<T>() > crate::page_size() {
            return Err(bad("zero-sized or over-aligned type"));
        }
        let bytes = len
            .checked_mul(size)
            .ok_or_else(|| bad("array larger than the address space"))?;
        let map = Mmap::anonymous(bytes).noreserve().map()?;
        Ok(ZeroedArray {
            map,
            mask: len - 1,
            _t: PhantomData,
        })
    }

    /// Number of values (a power of two).
    #[inline]
    pub fn len(&self) -> usize {
        self.mask + 1
    }

    /// Never empty (an empty array cannot be made).
    #[inline]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The mapping under the values (for `madvise` hints).
    pub fn mapping(&self) -> &Mmap {
        &self.map
    }

    /// The value at `i` modulo the length.
    #[inline]
    pub fn wrap(&self, i: usize) -> &T {
        // SAFETY: `i & mask < len`, inside the mapping, which holds `len`
        // properly aligned `T`s (page aligned, `size_of::<T>()` apart) that
        // are valid: zero bytes (`T: Zeroable`) or values written through
        // `&mut`. The mapping is private and anonymous: only this value's
        // borrows reach its bytes, and `&self` excludes a `&mut` one.
        unsafe { &*self.ptr().add(i & self.mask) }
    }

    /// The value at `i` modulo the length, to change.
    #[inline]
    pub fn wrap_mut(&mut self, i: usize) -> &mut T {
        // SAFETY: as in `wrap`; `&mut self` makes the borrow unique.
        unsafe { &mut *self.ptr().add(i & self.mask) }
    }

    /// Every value.
    pub fn as_slice(&self) -> &[T] {
        // SAFETY: as in `wrap`, for the whole range.
        unsafe { std::slice::from_raw_parts(self.ptr(), self.len()) }
    }

    /// Every value, to change.
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `wrap_mut`, for the whole range.
        unsafe { std::slice::from_raw_parts_mut(self.ptr(), self.len()) }
    }

    #[inline]
    fn ptr(&self) -> *mut T {
        self.map.as_ptr().cast()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Clone, Copy)]
    #[repr(C, align(64))]
    struct E {
        a: u64,
        p: *const u8,
        b: bool,
    }
    // SAFETY: integers, a raw pointer and a bool: all valid at zero.
    unsafe impl Zeroable for E {}

    #[test]
    fn zeroed_wrapping_and_owned() {
        let mut z = ZeroedArray::<E>::new(1 << 10).unwrap();
        assert_eq!(z.len(), 1024);
        assert!(z
            .as_slice()
            .iter()
            .all(|e| e.a == 0 && e.p.is_null() && !e.b));
        z.wrap_mut(3).a = 7;
        assert_eq!(z.wrap(1024 + 3).a, 7);
        z.as_mut_slice()[1023].b = true;
        assert!(z.wrap(usize::MAX).b);
        assert!(ZeroedArray::<E>::new(3).is_err());
        assert!(ZeroedArray::<E>::new(0).is_err());
        assert!(ZeroedArray::<E>::new(1 << 60).is_err());
    }
}
