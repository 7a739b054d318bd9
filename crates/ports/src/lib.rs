//! Port backends.
pub mod af_packet;
pub mod netdev;
