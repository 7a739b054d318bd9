//! The flow timer: expires the `flows` logic's flows whose idle or hard
//! timeout has passed ([`logic::flows::Flows::expire`], every
//! [`logic::flows::SWEEP_EVERY`]). It runs on its own control-plane
//! thread: the workers only count packets, and each sweep that removes
//! flows is one snapshot swap. With another logic, or flows without
//! timeouts, a sweep costs a lock and a flag test.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use logic::flows::{Flows, SWEEP_EVERY};

use crate::daemon::Daemon;
use crate::log::Level;

/// The running timer.
pub struct FlowTimer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl FlowTimer {
    /// Starts sweeping `daemon`'s logic.
    pub fn start(daemon: Arc<Daemon>) -> std::io::Result<FlowTimer> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::Builder::new()
            .name("turnout-flowtimer".into())
            .spawn(move || {
                while !s.load(Ordering::Acquire) {
                    std::thread::sleep(SWEEP_EVERY);
                    let n = daemon.switch().with_logic(|l| {
                        l.as_any()
                            .and_then(|a| a.downcast_ref::<Flows>())
                            .map_or(0, |f| f.expire(Instant::now()))
                    });
                    if n > 0 {
                        crate::log!(Level::Debug, "flows", "flows expired", count = n);
                    }
                }
            })?;
        Ok(FlowTimer {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops the thread (at most one sweep period later).
    pub fn stop(mut self) {
        self.halt();
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for FlowTimer {
    fn drop(&mut self) {
        self.halt();
    }
}
