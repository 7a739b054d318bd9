//! Fuzzing facade (not a stable API): a vhost-user port's protocol state
//! without its control thread or socket file, so a fuzz target can hand the
//! real connection handler (`device::serve`: the `vhost` crate's framing
//! and our `Device`) one stream of frontend messages per input, in the
//! calling thread.

use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use super::device::{self, End};
use super::{Error, Mode, Shared, VhostUserConfig};

/// One port's backend state, served one connection at a time.
pub struct Backend {
    shared: Arc<Shared>,
}

impl Backend {
    /// A backend offering `queues` queue pairs, mergeable buffers and the
    /// event index, 1518-byte frames.
    pub fn new(queues: u16) -> Result<Backend, Error> {
        let mut cfg = VhostUserConfig::new("/nonexistent/turnout-fuzz.sock");
        // Client mode: no socket file is created; nothing connects either,
        // since no control thread runs.
        cfg.mode = Mode::Client;
        cfg.queues = queues;
        let (shared, _) = Shared::new("fuzz", cfg)?;
        Ok(Backend { shared })
    }

    /// Serves one frontend connection until it hangs up or is refused, as
    /// the control thread does, and returns how it ended: `"hangup"`,
    /// `"lie"`, `"protocol"`, `"stall"`, `"mem_fault"`, `"notify_fd"` (or
    /// `"stop"`).
    pub fn serve(&self, stream: UnixStream) -> &'static str {
        let end = device::serve(&self.shared, stream, None);
        match end {
            End::Stop => "stop",
            End::HangUp => "hangup",
            End::Lie => "lie",
            End::Protocol => "protocol",
            End::Stall => "stall",
            End::MemFault => "mem_fault",
            End::NotifyFd => "notify_fd",
        }
    }

    /// Number of virtqueues with a running session.
    pub fn running(&self) -> usize {
        self.shared
            .slots
            .iter()
            .filter(|s| s.session.load().is_some())
            .count()
    }

    /// Whether the handler still marks a frontend as connected.
    pub fn connected(&self) -> bool {
        self.shared.connected.load(Acquire)
    }

    /// Protocol errors counted so far.
    pub fn protocol_errors(&self) -> u64 {
        self.shared.protocol_errors.load(Relaxed)
    }

    /// The port's backend counters (the same list turnoutd exports).
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        super::counters_of(&self.shared)
    }
}
