//! The turnoutd switching fabric (after mSwitch §3, docs/references.md).
//!
//! - [`port`]: the contract every port backend implements (burst receive;
//!   reserve / write / publish transmit).
//! - [`logic`]: the contract every switching logic implements (classify a
//!   batch into verdicts).
//! - [`batch`]: fixed-capacity batches of packet views.
//! - [`fabric`]: the two-pass forwarding algorithm and destination-port
//!   parallelism (leases published in order).
//! - [`worker`]: the per-core loop and its wake-up model.
//! - [`switch`]: workers + port table + logic, and the control operations.
//! - [`pipe`]: the in-process port used by tests and benches.
//! - [`punt`]: the bounded queue a logic punts frames to the control
//!   plane through (OpenFlow packet-ins), with its rate limit and counters.
//! - [`lock`]: the spin lock guarding a destination's leases.
//! - [`drop`], [`counters`]: named drop reasons and counters.
//!
//! Invariants: the data path (receive, classify, forward) never allocates,
//! never blocks on anything but a destination's short reservation lock, makes
//! no system call per packet and returns no `Result`: every packet not
//! delivered is counted under one [`drop::DropReason`]. Counters add up:
//! for unicast verdicts, frames received = frames sent + drops by reason.
//!
//! Threading: each receive queue belongs to one worker; transmit queues are
//! shared by all workers through the fabric's per-queue lease lock; the port
//! table and the logic are immutable snapshots swapped atomically between
//! batches (arc-swap), never locked by workers.
#![warn(missing_docs)]
#![deny(unsafe_code)]

#[allow(unsafe_code)]
pub mod batch;
pub mod copymode;
pub mod counters;
pub mod drop;
#[allow(unsafe_code)]
pub mod fabric;
#[allow(unsafe_code)]
pub mod lock;
pub mod logic;
#[allow(unsafe_code)]
pub mod pipe;
#[allow(unsafe_code)]
pub mod port;
#[allow(unsafe_code)]
pub mod punt;
#[allow(unsafe_code)]
pub mod switch;
#[allow(unsafe_code)]
pub mod sys;
pub mod wakeup;
pub mod worker;

pub use batch::{with_frames, Burst, Pkt, PktMut, Pkts, RxBatch, RxFill, RxPusher};
pub use drop::DropReason;
pub use fabric::{Forwarder, Injector, PortEntry, PortTable};
pub use logic::{CommandError, Ctx, GroupId, Logic, Verdict, WorkerState};
pub use pipe::{pipe, PipeConfig, PipePeer, PipePort};
pub use port::{
    Lease, OwnedTx, Port, PortId, PortInfo, QueueId, RxQueue, TxDrops, TxFill, TxFrames, TxLock,
    TxProducer, TxQueue,
};
pub use punt::{Punt, PuntMeta, PuntSpec, PuntStats, Punted};
pub use switch::{PortStats, Switch, SwitchConfig, SwitchError, WorkerStats, CONTROL_WORKER};
pub use wakeup::{PolicyView, Regime, DEFAULT_BUDGET_US, MAX_BUDGET_US};
pub use worker::WakeupMode;
