//! Port backends.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod af_packet;
pub mod af_xdp;
pub mod config;
#[allow(unsafe_code)]
pub mod guard;
pub mod kind;
pub mod memif;
pub mod netdev;
pub mod open;
mod retire;
pub mod tap;
#[allow(unsafe_code)]
pub mod tunnel;
#[cfg(feature = "vhost")]
pub mod vhost_user;

pub use config::{ConfigError, PortConfig};
pub use kind::PortKind;
