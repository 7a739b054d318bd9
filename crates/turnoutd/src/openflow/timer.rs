//! The flow timer: expires the flows of the running logic's OpenFlow
//! tables ([`crate::Daemon::openflow_tables`]) whose idle or hard
//! timeout has passed ([`logic::flows::Flows::expire`], every
//! [`logic::flows::SWEEP_EVERY`]). It runs on its own control-plane
//! thread: the workers only count packets, and each sweep that removes
//! flows is one snapshot swap. A sweep visits only the flows with a
//! timeout (the logic keeps their index); with a logic without tables, or
//! no flow with a timeout, it costs a lock and an emptiness test. Each sweep
//! also tells the logic which ports' links are up
//! ([`logic::flows::Flows::set_port_live`]: the watch ports of SELECT and fast-failover
//! groups).

use std::sync::Arc;
use std::time::Instant;

use logic::flows::SWEEP_EVERY;

use crate::bgthread::BgThread;
use crate::daemon::Daemon;
use crate::log::Level;

/// The running timer.
pub struct FlowTimer(BgThread);

impl FlowTimer {
    /// Starts sweeping `daemon`'s logic.
    pub fn start(daemon: Arc<Daemon>) -> std::io::Result<FlowTimer> {
        BgThread::every("turnout-flowtimer", SWEEP_EVERY, move || {
            let n = daemon.openflow_tables().map_or(0, |f| {
                for (id, up) in daemon.switch().port_links() {
                    f.set_port_live(id, up);
                }
                f.expire(Instant::now())
            });
            if n > 0 {
                crate::log!(Level::Debug, "flows", "flows expired", count = n);
            }
        })
        .map(FlowTimer)
    }

    /// Stops the thread (at most one sweep period later).
    pub fn stop(mut self) {
        self.0.halt();
    }
}
