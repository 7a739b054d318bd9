//! Port backends.
pub mod af_packet;
pub mod memif;
pub mod netdev;
