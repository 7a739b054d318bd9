//! turnout-gen as a library: the roles' data path (sender, receiver,
//! forwarder), frame templates, sequence/latency accounting, pacing, the
//! command line, the JSON document and the terminal summary. The
//! `turnout-gen` binary is a thin `main` over [`run::run`]; the library
//! exists so benches and tests can drive the data path directly.
//!
//! Invariants: one thread per role; the data path never allocates per
//! frame, blocks, or makes a system call other than the vDSO clock read;
//! every frame not sent or forwarded is counted under a reason. Every
//! direct (libc) system call of the crate is in [`sys`]; elsewhere `unsafe` only states
//! that the role's thread is the sole sender on its queues
//! ([`fabric::OwnedTx::new`]).
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod cli;
pub mod engine;
pub mod frame;
pub mod latency;
pub mod pacing;
pub mod ports;
pub mod report;
#[allow(unsafe_code)]
pub mod run;
pub mod sample;
pub mod seq;
pub mod spec;
pub mod summary;
#[allow(unsafe_code)]
pub mod sys;
