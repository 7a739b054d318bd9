//! The turnoutd switching fabric (after mSwitch, seeds/002 §3).
//!
//! - [`port`]: the contract every port backend implements (burst receive;
//!   reserve / write / publish transmit).
//! - [`logic`]: the contract every switching logic implements (classify a
//!   batch into verdicts).
//! - [`batch`]: fixed-capacity batches of packet views.
//! - [`drop`]: named drop reasons.
//!
//! Invariants: the data path (receive, classify, forward) never allocates,
//! never blocks on anything but a destination's short reservation lock, makes
//! no system call per packet and returns no `Result`: every packet not
//! delivered is counted under one [`drop::DropReason`].

pub mod batch;
pub mod drop;
pub mod logic;
pub mod port;

pub use batch::{Pkt, RxBatch};
pub use drop::DropReason;
pub use logic::{CommandError, Ctx, GroupId, Logic, Verdict};
pub use port::{Port, PortId, PortInfo, QueueId, RxQueue, TxQueue};
