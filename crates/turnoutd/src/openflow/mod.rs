//! The OpenFlow agent: turnoutd's control plane for a logic whose table
//! entry offers OpenFlow tables ([`logic::Services::openflow`]; the
//! `flows` logic). It reaches them only through
//! [`crate::Daemon::openflow_tables`], the typed handle the logic table
//! built with the running logic: never by downcast or by the logic's name.
//! With another logic running, every part here is idle or answers that
//! there are no tables.
//!
//! One file per job:
//! - [`channel`]: the OpenFlow 1.3 channel (listeners, controllers,
//!   sessions, flow-, group- and meter-mods, multipart replies);
//! - [`async_msgs`]: its asynchronous side (packet-ins, port-status, the
//!   packet-out handler);
//! - [`fail`]: the fail modes (`secure`, `standalone`);
//! - [`switch`]: switch-wide OpenFlow state (datapath id, refusals);
//! - [`timer`]: the flow timer (idle and hard timeouts, port liveness).

pub mod async_msgs;
pub mod channel;
pub mod fail;
pub mod switch;
pub mod timer;
