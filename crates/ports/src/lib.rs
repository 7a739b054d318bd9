//! Port backends.
pub mod af_packet;
pub mod af_xdp;
pub mod memif;
pub mod netdev;
pub mod tap;
#[cfg(feature = "vhost")]
pub mod vhost_user;
