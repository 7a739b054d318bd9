//! Opening a port from its config, through the `ports` crate's opener
//! ([`ports::open::Opener`]: one arm per backend, memif servers shared per
//! socket). A kind whose backend is not built into this binary is refused
//! with "port kind X is not available in this build", never a panic.

use std::sync::Arc;

use fabric::Port;

use crate::config::PortConfig;

/// Whether `kind` (any spelling `ports::PortKind::parse` reads) is built
/// in: every kind of `ports::PortConfig` is opened by [`Backends::open`],
/// so this is what the `ports` crate was built with.
pub fn available(kind: &str) -> bool {
    ports::PortKind::parse(kind).is_ok_and(ports::PortKind::built)
}

/// Port kinds this build can open, derived from `ports::PortKind`.
pub fn available_kinds() -> Vec<&'static str> {
    ports::kind::ALL
        .into_iter()
        .filter(|k| k.built())
        .map(ports::PortKind::name)
        .collect()
}

/// The error for a kind that is not built in.
pub fn unavailable_message(kind: &str) -> String {
    format!(
        "port kind {kind} is not available in this build (available: {})",
        available_kinds().join(", ")
    )
}

/// The ports turnoutd opened and what they share: [`ports::open::Opener`]
/// (one arm per backend, memif servers per socket, tunnels by name), with
/// turnoutd's log line when a memif socket closes.
pub struct Backends {
    opener: ports::open::Opener,
}

impl Backends {
    /// No sockets open yet, for a switch whose workers let a frame wait at
    /// most `budget` (zero when they always poll): a port kind whose
    /// default hand-over holds frames may take another (AF_PACKET's
    /// `rx_ring = "auto"`).
    pub fn new(budget: std::time::Duration) -> Self {
        Self {
            opener: ports::open::Opener::with_latency_budget(budget),
        }
    }

    /// Opens the port described by `cfg`; the message says why not.
    pub fn open(&self, cfg: &PortConfig) -> Result<Arc<dyn Port>, String> {
        self.opener.open(&cfg.name, &cfg.spec)
    }

    /// The tunnel port named `name`, if it is one.
    pub fn tunnel(&self, name: &str) -> Option<Arc<ports::tunnel::TunnelPort>> {
        self.opener.tunnel(name)
    }

    /// A port opened by [`Backends::open`] was removed: close shared
    /// resources nobody uses any more.
    pub fn closed(&self, cfg: &PortConfig) {
        if let Some(socket) = self.opener.closed(&cfg.name, &cfg.spec) {
            crate::log!(
                crate::log::Level::Info,
                "port",
                "memif socket closed",
                socket = socket.display()
            );
        }
    }

    /// Closes every shared resource (shutdown).
    pub fn close_all(&self) {
        self.opener.close_all();
    }
}
