//! Where a departed session (a memif connection, a vhost-user virtqueue
//! session) waits until nobody but the control thread holds it, so that
//! its teardown (unmapping shared memory, closing eventfds, `epoll_ctl`)
//! runs on the control thread and never under a transmit queue's
//! `fabric::TxLock`, which other workers spin on.
//!
//! A transmit producer pins its session in a field that lives inside the
//! lock and replaces or clears that field under the lock. If it held the
//! last reference, the session's `Drop` (munmap, close) would run there.
//! The control thread therefore keeps one reference of every session it
//! takes out of service in a [`Retired`] list and drops it only once it
//! is the only one left ([`Retired::sweep`], called from the control
//! thread's loop): from then on no other holder exists and none can
//! appear (the session is no longer reachable from the slot workers load
//! it from), so every other drop — a producer's, a lease's, a receive
//! burst's, an `arc_swap` guard's — is never the last one.
//!
//! The list is a control-path `Mutex<Vec<_>>`: workers never touch it.

use std::sync::{Arc, Mutex};

/// Sessions taken out of service and still held elsewhere.
pub(crate) struct Retired<T> {
    held: Mutex<Vec<Arc<T>>>,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Self {
            held: Mutex::new(Vec::new()),
        }
    }
}

impl<T> Retired<T> {
    /// Keeps `s` (a session just taken out of the slot workers load from)
    /// until only this list holds it, and drops what is already free.
    /// Control path only.
    pub(crate) fn retire(&self, s: Arc<T>) {
        self.list().push(s);
        self.sweep();
    }

    /// Drops every kept session that nobody else holds any more (here, on
    /// the calling control thread); returns how many are still held
    /// elsewhere.
    pub(crate) fn sweep(&self) -> usize {
        // Taken out of the list first, dropped after the list's mutex is
        // released (a slow unmap holds no lock at all).
        let mut free = Vec::new();
        let left = {
            let mut l = self.list();
            let mut i = 0;
            while i < l.len() {
                // Only this list holds it, and nothing can clone it again:
                // it is ours to drop.
                if Arc::strong_count(&l[i]) == 1 {
                    free.push(l.swap_remove(i));
                } else {
                    i += 1;
                }
            }
            l.len()
        };
        drop(free);
        left
    }

    /// Sessions kept and still held elsewhere.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.list().len()
    }

    fn list(&self) -> std::sync::MutexGuard<'_, Vec<Arc<T>>> {
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Noisy<'a>(&'a AtomicUsize);
    impl Drop for Noisy<'_> {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn keeps_a_session_until_it_is_the_last_holder() {
        let drops = AtomicUsize::new(0);
        let r = Retired::default();
        let s = Arc::new(Noisy(&drops));
        let worker = s.clone();
        r.retire(s);
        assert_eq!(r.len(), 1, "a worker still holds it: kept");
        // The worker lets go: not the last reference, nothing is dropped.
        drop(worker);
        assert_eq!(drops.load(Ordering::Relaxed), 0);
        // The control thread's sweep drops it.
        assert_eq!(r.sweep(), 0);
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(r.len(), 0);
    }

    #[test]
    fn a_free_session_is_dropped_at_once() {
        let drops = AtomicUsize::new(0);
        let r = Retired::default();
        r.retire(Arc::new(Noisy(&drops)));
        assert_eq!(drops.load(Ordering::Relaxed), 1);
        assert_eq!(r.len(), 0);
    }
}
