//! turnoutd, the daemon around the switching fabric: its configuration
//! (docs/turnoutd.md), the ports and logic it starts with, and the control
//! plane that changes them while traffic flows (JSON-RPC over a unix
//! socket, Prometheus text over TCP).
//!
//! Invariants: nothing here runs on the data path; every control operation
//! is validated before it changes anything and goes to the workers through
//! the fabric's atomic snapshot swaps; a failed call (bad parameters, a
//! logic that refuses its config, a backend that cannot open) leaves the
//! running ports and logic untouched.
//!
//! Threading: the main thread waits for SIGINT/SIGTERM; one thread accepts
//! control connections and one serves each; one thread serves metrics; the
//! daemon state behind [`daemon::Daemon`] is behind one lock that only
//! control threads take.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod api;
pub mod backends;
pub mod bgthread;
pub mod cli;
pub mod config;
pub mod daemon;
pub mod log;
pub mod logics;
pub mod metrics;
pub mod openflow;
pub mod server;
pub mod stats;
#[allow(unsafe_code)]
pub mod sys;

pub use daemon::Daemon;
