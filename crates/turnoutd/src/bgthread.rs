//! A named control-plane thread with a stop flag, joined when stopped or
//! dropped: what the flow timer, the metrics endpoint and the control
//! socket run on. The body looks at the flag at least once per its own
//! tick (a sleep, a poll timeout), so a stop takes at most one tick.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// A running thread and its stop flag.
pub struct BgThread {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl BgThread {
    /// Runs `body` on a thread named `name`; `body` returns once the flag
    /// it is given is set (it may hand clones to threads of its own).
    pub fn spawn(
        name: &str,
        body: impl FnOnce(Arc<AtomicBool>) + Send + 'static,
    ) -> io::Result<BgThread> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name(name.into())
            .spawn(move || body(s))?;
        Ok(BgThread {
            stop,
            thread: Some(thread),
        })
    }

    /// Runs `tick` after every sleep of `period` until stopped (a stop
    /// takes at most one period and one tick).
    pub fn every(
        name: &str,
        period: Duration,
        mut tick: impl FnMut() + Send + 'static,
    ) -> io::Result<BgThread> {
        Self::spawn(name, move |stop| {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(period);
                tick();
            }
        })
    }

    /// Sets the flag and waits for the thread; true the first time (the
    /// thread was running), false once it was already stopped.
    pub fn halt(&mut self) -> bool {
        self.stop.store(true, Ordering::Release);
        match self.thread.take() {
            Some(t) => {
                let _ = t.join();
                true
            }
            None => false,
        }
    }
}

impl Drop for BgThread {
    fn drop(&mut self) {
        self.halt();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    #[test]
    fn every_ticks_until_halted_and_halts_once() {
        let n = Arc::new(AtomicU64::new(0));
        let n2 = n.clone();
        let mut t = BgThread::every("bg-test", Duration::from_millis(5), move || {
            n2.fetch_add(1, Ordering::Relaxed);
        })
        .unwrap();
        let t0 = std::time::Instant::now();
        while n.load(Ordering::Relaxed) < 3 {
            assert!(t0.elapsed() < Duration::from_secs(10), "no ticks");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert!(t.halt());
        let after = n.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(n.load(Ordering::Relaxed), after, "ticked after halt");
        assert!(!t.halt());
    }

    #[test]
    fn drop_stops_the_body() {
        let done = Arc::new(AtomicBool::new(false));
        let d2 = done.clone();
        let t = BgThread::spawn("bg-test", move |stop| {
            while !stop.load(Ordering::Acquire) {
                std::thread::sleep(Duration::from_millis(2));
            }
            d2.store(true, Ordering::Release);
        })
        .unwrap();
        drop(t);
        assert!(
            done.load(Ordering::Acquire),
            "drop returned before the body"
        );
    }
}
