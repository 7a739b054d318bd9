//! What every family of port integration tests shares (memif_common and
//! vhost_common re-export it): a private temporary directory and a poll
//! with a deadline, both from the workspace's test kit (crates/testpeers).
#![allow(unused_imports)]

pub use testpeers::{wait_until, TempDir};

#[allow(dead_code)]
pub mod in_place;
