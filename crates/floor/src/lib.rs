//! The floor under the ports and the fabric: the thin wrappers over the
//! operating system that several crates need, written once.
//!
//! - [`EventFd`]: a non-blocking eventfd, ours or adopted from a peer
//!   ([`EventFd::from_peer`]), with plain and peer-safe reads and writes.
//! - [`Epoll`]: a small epoll set with `u64` tokens.
//! - [`Mmap`]: an owned memory mapping (anonymous or of a descriptor,
//!   shared or private), unmapped on drop.
//! - [`ZeroedArray`]: a typed array of zeroed values ([`Zeroable`]) in an
//!   anonymous mapping of its own, taking memory only where written.
//! - [`peerfd`]: reads and writes of descriptors a peer shares with us
//!   that never wait for long, whatever the peer does to them.
//! - Clocks and the cycle counter ([`cycles`], [`now_ns`],
//!   [`coarse_now_ns`], [`thread_cpu_ns`], [`calibrate_cycles_hz`]) and
//!   CPU pinning ([`pin_to_cpu`]).
//! - [`listen_unix`]: a listening unix-domain socket that appears at its
//!   path already listening, with its mode set, never taking over a live
//!   one; [`connect_unix`]: a connect to one that never waits.
//!
//! Every wrapper is small and `#[inline]` where the data path calls it:
//! using one costs what the system call or the pointer arithmetic costs,
//! nothing more. The crates above keep their own `sys.rs` for what only
//! they need (sockets, rings, descriptor formats), built on these.

#![warn(missing_docs)]

mod epoll;
mod eventfd;
mod mmap;
pub mod peerfd;
mod time;
mod unixsock;
mod zeroed;

pub use epoll::Epoll;
pub use eventfd::EventFd;
pub use mmap::{page_size, Mmap, MmapOptions};
pub use time::{calibrate_cycles_hz, coarse_now_ns, cycles, now_ns, pin_to_cpu, thread_cpu_ns};
pub use unixsock::{connect_unix, listen_unix};
pub use zeroed::{Zeroable, ZeroedArray};
