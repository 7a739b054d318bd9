//! The data path of every role: the sender (pacing, warm-up, stamping,
//! reserve/write/publish), the receiver (parse, sequence accounting,
//! latency, jitter, touch) and the forwarder (reflect and fwd).
//!
//! Invariants: after construction nothing here allocates per frame (the
//! receiver allocates once per *new stream*, at most [`MAX_STREAMS`]
//! times), blocks, or makes a system call other than the vDSO clock read
//! (once per burst). A frame that is not sent or not forwarded is counted
//! under a named reason.
//!
//! - `sender.rs`: [`Sender`], one stream over one or several transmit
//!   queues, its [`SendPlan`] and [`TxStats`].
//! - `receiver.rs`: [`Receiver`], the stream table and per-stream
//!   accounting ([`StreamReport`]) within [`ReceiverLimits`].
//! - `forwarder.rs`: [`forward_burst`], one burst of the reflect and fwd
//!   (chain VNF) roles ([`Rewrite`], [`FwdStats`]).
//! - `tests.rs`: the fixtures the three files' unit tests share, and the
//!   tests that run a sender into a receiver.

#[allow(unsafe_code)]
mod forwarder;
mod receiver;
#[allow(unsafe_code)]
mod sender;
#[cfg(test)]
#[allow(unsafe_code)]
mod tests;

pub use forwarder::{forward_burst, FwdStats, Rewrite};
pub use receiver::{
    Receiver, ReceiverLimits, StreamReport, StreamState, LATENCY_STREAMS, MAX_STREAMS,
};
pub use sender::{Oversize, SendPlan, Sender, TxStats};
