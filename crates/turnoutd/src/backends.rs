//! Opening a port from its config: one arm per backend of the `ports`
//! crate. A kind whose backend is not built into this binary is refused
//! with "port kind X is not available in this build", never a panic.

use std::sync::Arc;

use fabric::Port;

use crate::config::{PortConfig, PortSpec};

/// Port kinds this build can open.
pub const AVAILABLE: &[&str] = &["af_packet"];

/// Whether `kind` is built in.
pub fn available(kind: &str) -> bool {
    AVAILABLE.contains(&kind)
}

/// The error for a kind that is not built in.
pub fn unavailable_message(kind: &str) -> String {
    format!("port kind {kind} is not available in this build (available: {})", AVAILABLE.join(", "))
}

/// Opens the port described by `cfg`; the message says which port and why.
pub fn open(cfg: &PortConfig) -> Result<Arc<dyn Port>, String> {
    match &cfg.spec {
        PortSpec::AfPacket(s) => {
            let mut c = ports::af_packet::AfPacketConfig::new(&s.iface);
            c.queues = s.queues;
            if let Some(b) = s.rx_blocks {
                c.rx_blocks = b;
            }
            if let Some(b) = s.rx_block_size_b {
                c.rx_block_size_b = b;
            }
            if let Some(n) = s.tx_frames {
                c.tx_frames = n;
            }
            if let Some(q) = s.qdisc_bypass {
                c.qdisc_bypass = q;
            }
            c.fanout = match s.fanout.as_deref() {
                None | Some("hash") => ports::af_packet::Fanout::Hash,
                Some("lb") => ports::af_packet::Fanout::LoadBalance,
                Some("cpu") => ports::af_packet::Fanout::Cpu,
                Some("queue") => ports::af_packet::Fanout::QueueMapping,
                Some(other) => return Err(format!("fanout {other:?} is not hash, lb, cpu or queue")),
            };
            let p = ports::af_packet::AfPacketPort::open(&cfg.name, c).map_err(|e| e.to_string())?;
            Ok(Arc::new(p))
        }
        other => Err(unavailable_message(other.kind())),
    }
}
