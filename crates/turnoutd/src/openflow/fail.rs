//! Fail modes of the OpenFlow channel (docs/flows.md, "Fail modes"): what
//! the switch does while no controller of its active endpoints
//! (`tcp:HOST:PORT`) is connected.
//!
//! - `secure` (the default): nothing changes; the flow tables stay in
//!   effect (flows keep matching and expiring) and turnoutd keeps
//!   reconnecting.
//! - `standalone`: once no controller has been connected for
//!   [`STANDALONE_AFTER`], the `flows` logic is parked whole (tables,
//!   counters, groups) and a learning bridge forwards instead (as Open
//!   vSwitch's fail-open behaves as a MAC-learning switch); when a
//!   controller connects again the parked tables come back before the
//!   first message of the session is read, and the bridge (with what it
//!   learned) is dropped.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::daemon::{Daemon, ParkedLogic};
use crate::log::Level;

/// How long no controller may be connected before `standalone` forwards
/// as a bridge (Open vSwitch waits three inactivity probes; turnoutd's
/// reconnect is quicker to notice a refused connection).
pub const STANDALONE_AFTER: Duration = Duration::from_secs(3);

/// `[switch] openflow_fail_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailMode {
    /// The flow tables stay in effect: without a controller, only what
    /// they already say is forwarded.
    Secure,
    /// After [`STANDALONE_AFTER`] without a controller, a learning bridge
    /// forwards instead of the flow tables, until a controller is back.
    Standalone,
}

impl FailMode {
    /// The mode named by `s` (`secure` or `standalone`); an error naming
    /// both otherwise.
    pub fn parse(s: &str) -> Result<FailMode, String> {
        match s {
            "secure" => Ok(FailMode::Secure),
            "standalone" => Ok(FailMode::Standalone),
            _ => Err(format!(
                "{s:?}: must be \"secure\" (tables stay in effect when the controller goes) or \"standalone\" (a learning bridge forwards until it is back)"
            )),
        }
    }
}

struct State {
    /// Controller sessions up now.
    live: usize,
    /// Since when none is (None while one is).
    down_since: Option<Instant>,
    /// The `flows` logic while the bridge stands in.
    parked: Option<ParkedLogic>,
}

/// Shared by the active endpoints' threads.
pub struct FailOpen {
    mode: FailMode,
    state: Mutex<State>,
}

impl FailOpen {
    /// The state of a switch in `mode`, starting with no controller
    /// connected (the standalone clock runs from now).
    pub fn new(mode: FailMode) -> FailOpen {
        FailOpen {
            mode,
            state: Mutex::new(State {
                live: 0,
                down_since: Some(Instant::now()),
                parked: None,
            }),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether the bridge stands in now.
    pub fn standing_in(&self) -> bool {
        self.lock().parked.is_some()
    }

    /// A controller connected: the parked tables come back first.
    pub fn connected(&self, daemon: &Daemon) {
        let mut st = self.lock();
        st.live += 1;
        st.down_since = None;
        if let Some(p) = st.parked.take() {
            let name = p.name();
            match daemon.restore_logic(p) {
                Ok(true) => crate::log!(
                    Level::Warn,
                    "openflow",
                    "controller back: the flow tables forward again (fail-standalone over)",
                    logic = name
                ),
                Ok(false) => crate::log!(
                    Level::Warn,
                    "openflow",
                    "controller back, but the logic was replaced meanwhile: the parked flow tables are dropped",
                    logic = name
                ),
                Err(e) => crate::log!(
                    Level::Warn,
                    "openflow",
                    "controller back: flow tables restored, a worker is late to take them",
                    error = e
                ),
            }
        }
    }

    /// A controller session ended.
    pub fn disconnected(&self) {
        let mut st = self.lock();
        st.live = st.live.saturating_sub(1);
        if st.live == 0 {
            st.down_since = Some(Instant::now());
        }
    }

    /// Called while reconnecting: in `standalone`, parks the `flows` logic
    /// behind a learning bridge once no controller has been connected for
    /// [`STANDALONE_AFTER`].
    pub fn tick(&self, daemon: &Daemon) {
        if self.mode != FailMode::Standalone {
            return;
        }
        let mut st = self.lock();
        let due = st
            .down_since
            .is_some_and(|t| t.elapsed() >= STANDALONE_AFTER);
        if st.live > 0 || st.parked.is_some() || !due {
            return;
        }
        // Only the flow tables are the controller's to fall back from.
        if daemon.openflow_tables().is_none() {
            return;
        }
        let bridge = match logic::build("bridge", &serde_json::json!({})) {
            Ok(b) => b,
            Err(e) => {
                crate::log!(
                    Level::Warn,
                    "openflow",
                    "fail-standalone: cannot build the bridge",
                    error = e
                );
                return;
            }
        };
        let (parked, synced) = daemon.park_logic(bridge);
        crate::log!(
            Level::Warn,
            "openflow",
            "no controller: fail-standalone, a learning bridge forwards until one connects",
            after_s = STANDALONE_AFTER.as_secs()
        );
        if let Err(e) = synced {
            crate::log!(
                Level::Warn,
                "openflow",
                "fail-standalone: a worker is late to take the bridge",
                error = e
            );
        }
        st.parked = Some(parked);
    }
}
