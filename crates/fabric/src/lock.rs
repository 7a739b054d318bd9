//! The destination lease lock: a spin lock for critical sections of a few
//! instructions (reserve a slot range, publish a tail). Contended, it spins
//! briefly and then yields the CPU, so a preempted holder gets to run; it
//! never parks a thread in the kernel's wait queues and never allocates
//! (a parking mutex allocates its global wait table the first time a thread
//! parks — on the data path, that is an allocation).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};

/// A spin lock around `T`.
#[derive(Default)]
pub struct SpinLock<T: ?Sized> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: access to `value` is serialised by `locked` (Acquire on lock,
// Release on unlock), as for a mutex.
unsafe impl<T: ?Sized + Send> Sync for SpinLock<T> {}
// SAFETY: the lock owns its value.
unsafe impl<T: ?Sized + Send> Send for SpinLock<T> {}

/// Spins before yielding.
const SPINS: u32 = 64;

impl<T> SpinLock<T> {
    /// A lock around `value`.
    pub fn new(value: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            value: UnsafeCell::new(value),
        }
    }
}

impl<T: ?Sized> SpinLock<T> {
    /// Takes the lock.
    #[inline]
    pub fn lock(&self) -> SpinGuard<'_, T> {
        loop {
            if !self.locked.swap(true, Ordering::Acquire) {
                return SpinGuard { lock: self };
            }
            let mut n = 0;
            while self.locked.load(Ordering::Relaxed) {
                if n < SPINS {
                    std::hint::spin_loop();
                    n += 1;
                } else {
                    std::thread::yield_now();
                }
            }
        }
    }
}

/// Holds the lock; releases it when dropped.
pub struct SpinGuard<'a, T: ?Sized> {
    lock: &'a SpinLock<T>,
}

impl<T: ?Sized> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T: ?Sized> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: we hold the lock, exclusively.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T: ?Sized> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn serialises_increments_across_threads() {
        let l = Arc::new(SpinLock::new(0u64));
        let ts: Vec<_> = (0..4)
            .map(|_| {
                let l = l.clone();
                std::thread::spawn(move || {
                    for _ in 0..100_000 {
                        *l.lock() += 1;
                    }
                })
            })
            .collect();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(*l.lock(), 400_000);
    }
}
