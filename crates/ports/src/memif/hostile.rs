//! A lying memif peer (not a stable API): what the hostile-peer tests
//! (`tests.rs` in-process, `examples/hostile_peer.rs` against a turnoutd
//! process) use to attack a memif server.
//!
//! Two kinds of lies:
//! - [`RingLie`]: a connected client ([`MemifPort::client`]) writes garbage
//!   into its own client-to-server ring (descriptors naming missing
//!   regions, offsets and lengths outside the region, unknown flags,
//!   endless chains, a head index far ahead of the tail, an overwritten
//!   cookie). The server must catch each with the named [`Violation`] and
//!   disconnect.
//! - [`RawClient`] + [`CONTROL_LIES`]: a control connection speaking the
//!   protocol message by message, with bad sizes, types, versions, ids,
//!   regions, rings and fds. The server must answer with a disconnect
//!   whose reason contains the expected text, and close.
//!
//! Everything here runs on the peer's side; nothing is used by the data
//! path. All system calls go through `sys.rs`.

// Safe code: what is `unsafe` of memif lives in sys.rs (and floor).
#![deny(unsafe_code)]

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use super::proto::*;
use super::ring::Connection;
use super::sys::{self, EventFd, Region};
use super::MemifPort;

/// A lie a connected client writes into its client-to-server ring 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RingLie {
    /// A descriptor naming region 3 (only region 0 exists).
    BadRegion,
    /// A descriptor whose offset lies 10 bytes before the region's end.
    OffsetOutOfRange,
    /// A descriptor of length `u32::MAX`.
    HugeLength,
    /// A descriptor with an unknown flag (0x8000).
    UnknownFlags,
    /// 100 chained descriptors (more than `max_chain`).
    ChainTooLong,
    /// A chain over the whole ring that never ends.
    ChainOverRing,
    /// The head index 5000 ahead of the tail (more than the ring holds).
    HeadJump,
    /// The ring's cookie overwritten.
    CookieOverwritten,
}

impl RingLie {
    /// Every ring lie.
    pub const ALL: [RingLie; 8] = [
        RingLie::BadRegion,
        RingLie::OffsetOutOfRange,
        RingLie::HugeLength,
        RingLie::UnknownFlags,
        RingLie::ChainTooLong,
        RingLie::ChainOverRing,
        RingLie::HeadJump,
        RingLie::CookieOverwritten,
    ];

    /// What the lie is, in words.
    pub fn what(self) -> &'static str {
        match self {
            RingLie::BadRegion => "bad region index",
            RingLie::OffsetOutOfRange => "offset out of range",
            RingLie::HugeLength => "huge length",
            RingLie::UnknownFlags => "unknown flags",
            RingLie::ChainTooLong => "chain longer than max_chain",
            RingLie::ChainOverRing => "chain over the whole ring",
            RingLie::HeadJump => "head far ahead of tail",
            RingLie::CookieOverwritten => "cookie overwritten",
        }
    }

    /// The violation the server must count for it.
    pub fn violation(self) -> Violation {
        match self {
            RingLie::BadRegion => Violation::BadRegion,
            RingLie::OffsetOutOfRange | RingLie::HugeLength => Violation::OutOfRegion,
            RingLie::UnknownFlags => Violation::BadFlags,
            RingLie::ChainTooLong | RingLie::ChainOverRing => Violation::ChainTooLong,
            RingLie::HeadJump => Violation::BadRingIndex,
            RingLie::CookieOverwritten => Violation::BadCookie,
        }
    }

    /// Writes the lie into `c`'s transmit (client-to-server) ring 0, whose
    /// head is `h`.
    pub(crate) fn write(self, c: &Connection, h: u16) {
        let r = &c.tx[0];
        let reg = &c.regions[r.region];
        let put = |slot: u16, d: Desc| {
            let off = r.off + RING_HDR_B + (slot as usize & (r.size as usize - 1)) * DESC_B;
            reg.write16(off, d.to_bytes());
        };
        let good = Desc {
            flags: 0,
            region: 0,
            length: 64,
            offset: r.buf_base as u32,
            metadata: 0,
        };
        let head = |v: u16| reg.store_u16(r.off + RING_HEAD_OFF, v, Ordering::Release);
        let chain = |n: u16| {
            for s in 0..n {
                put(
                    h.wrapping_add(s),
                    Desc {
                        flags: DESC_FLAG_NEXT,
                        ..good
                    },
                );
            }
            head(h.wrapping_add(n));
        };
        match self {
            RingLie::BadRegion => {
                put(h, Desc { region: 3, ..good });
                head(h.wrapping_add(1));
            }
            RingLie::OffsetOutOfRange => {
                let offset = (reg.len() - 10) as u32;
                put(h, Desc { offset, ..good });
                head(h.wrapping_add(1));
            }
            RingLie::HugeLength => {
                put(
                    h,
                    Desc {
                        length: u32::MAX,
                        ..good
                    },
                );
                head(h.wrapping_add(1));
            }
            RingLie::UnknownFlags => {
                put(
                    h,
                    Desc {
                        flags: 0x8000,
                        ..good
                    },
                );
                head(h.wrapping_add(1));
            }
            RingLie::ChainTooLong => chain(100),
            RingLie::ChainOverRing => chain(r.size as u16 - 1),
            RingLie::HeadJump => head(h.wrapping_add(5000)),
            RingLie::CookieOverwritten => reg.store_u32(r.off + RING_COOKIE_OFF, 0xdead_beef),
        }
    }
}

/// Writes `lie` into the client-to-server ring 0 of `port`, a connected
/// client, at its current head, and kicks the ring's interrupt.
pub fn lie(port: &MemifPort, lie: RingLie) -> Result<(), String> {
    let c = port
        .shared
        .conn
        .load_full()
        .ok_or_else(|| "not connected".to_string())?;
    if c.role != super::Role::Client || c.tx.is_empty() {
        return Err("not a connected client".into());
    }
    let r = &c.tx[0];
    let h = c.regions[r.region].load_u16(r.off + RING_HEAD_OFF, Ordering::Acquire);
    lie.write(&c, h);
    // Kick, as a client publishing frames does: a switch whose workers
    // sleep until interrupted would otherwise never look at the ring.
    r.irq.signal();
    Ok(())
}

/// A raw control connection to a memif server, message by message.
pub struct RawClient(OwnedFd);

impl RawClient {
    /// Connects and reads the server's hello.
    pub fn connect(path: &Path) -> io::Result<RawClient> {
        Self::connect_hello(path).map(|(r, _)| r)
    }

    /// Connects; the connection and the server's hello.
    pub fn connect_hello(path: &Path) -> io::Result<(RawClient, Hello)> {
        let r = RawClient(sys::connect(path)?);
        match r.recv(Duration::from_secs(3)) {
            Some(Msg::Hello(h)) => Ok((r, h)),
            m => Err(io::Error::other(format!("expected hello, got {m:?}"))),
        }
    }

    /// Sends raw bytes (any size) with an optional descriptor.
    pub fn send_raw(&self, b: &[u8], fd: Option<RawFd>) -> bool {
        sys::send_msg(self.0.as_raw_fd(), b, fd).is_ok()
    }

    /// Sends a message with an optional descriptor.
    pub fn send(&self, m: Msg, fd: Option<RawFd>) -> bool {
        self.send_raw(&m.encode(), fd)
    }

    /// The next message; `None` on hang-up, garbage or `timeout`.
    pub fn recv(&self, timeout: Duration) -> Option<Msg> {
        let mut buf = [0u8; 256];
        let t0 = Instant::now();
        while t0.elapsed() < timeout {
            let _ = sys::wait_readable(self.0.as_raw_fd(), 100);
            match sys::recv_msg(self.0.as_raw_fd(), &mut buf) {
                Ok(Some(r)) if r.len == 0 => return None,
                Ok(Some(r)) => return Msg::decode(&buf[..r.len]).ok(),
                Ok(None) => continue,
                Err(_) => return None,
            }
        }
        None
    }

    /// Expects a disconnect whose reason contains `why`, then the hang-up.
    pub fn expect_disconnect(&self, why: &str) -> Result<(), String> {
        match self.recv(Duration::from_secs(3)) {
            Some(Msg::Disconnect(d)) if d.reason.contains(why) => {}
            m => return Err(format!("expected a disconnect ({why}), got {m:?}")),
        }
        match self.recv(Duration::from_secs(3)) {
            None => Ok(()),
            m => Err(format!("socket not closed after the disconnect: {m:?}")),
        }
    }

    /// Init for interface `id`; true if acknowledged.
    pub fn init(&self, id: u32) -> bool {
        self.send(Msg::Init(init(VERSION, id)), None);
        self.recv(Duration::from_secs(3)) == Some(Msg::Ack)
    }
}

fn init(version: u16, id: u32) -> Init {
    Init {
        version,
        id,
        mode: MODE_ETHERNET,
        secret: [0; SECRET_SZ],
        name: "hostile".into(),
    }
}

/// What a control lie uses besides its connection: a sealed 1 MiB region
/// with a cookie at 0 and 4096, an eventfd, an unsealed memfd, a full
/// blocking pipe.
pub struct Kit {
    /// Interface id the lies aim at (must be free).
    pub id: u32,
    region: Region,
    irq: EventFd,
    unsealed: OwnedFd,
    /// (read end, write end).
    pipe: (OwnedFd, OwnedFd),
}

impl Kit {
    /// A kit aiming at interface `id`.
    pub fn new(id: u32) -> io::Result<Kit> {
        let region = Region::create("hostile", 1 << 20)?;
        region.store_u32(0, COOKIE);
        Ok(Kit {
            id,
            region,
            irq: EventFd::new()?,
            unsealed: sys::memfd_unsealed(4096)?,
            pipe: sys::full_blocking_pipe()?,
        })
    }

    /// Init + the region: everything before the rings. False if refused.
    fn setup(&self, r: &RawClient) -> bool {
        r.init(self.id)
            && add_region(r, 0, 1 << 20, self.region.raw_fd())
            && r.recv(Duration::from_secs(3)) == Some(Msg::Ack)
    }

    /// Init, then region `index` of `size` bytes with `fd`: the region lie
    /// of one connection.
    fn init_then_region(&self, r: &RawClient, index: u16, size: u64, fd: Option<RawFd>) -> bool {
        r.init(self.id) && add_region(r, index, size, fd)
    }

    /// The setup, then one client-to-server ring with `irq` (the kit's
    /// eventfd, another descriptor or none): the ring lie of one connection.
    fn setup_then_ring(
        &self,
        r: &RawClient,
        region: u16,
        offset: u32,
        log2: u8,
        irq: Option<RawFd>,
    ) -> bool {
        self.setup(r) && r.send(ring(ADD_RING_FLAG_C2S, 0, region, offset, log2), irq)
    }

    /// The setup, a valid 16-slot client-to-server ring at 0, a server-to-
    /// client ring at `s2c_off`, both acknowledged, then connect: the
    /// connect-time check finds what is wrong with the second ring.
    fn setup_two_rings_then_connect(&self, r: &RawClient, s2c_off: u32) -> bool {
        let acked = |m: Msg| {
            r.send(m, Some(self.irq.fd())) && r.recv(Duration::from_secs(3)) == Some(Msg::Ack)
        };
        self.setup(r)
            && acked(ring(ADD_RING_FLAG_C2S, 0, 0, 0, 4))
            && acked(ring(0, 0, 0, s2c_off, 4))
            && r.send(Msg::Connect("hostile".into()), None)
    }
}

fn add_region(r: &RawClient, index: u16, size: u64, fd: Option<RawFd>) -> bool {
    r.send(Msg::AddRegion(AddRegion { index, size }), fd)
}

fn ring(flags: u16, index: u16, region: u16, offset: u32, log2: u8) -> Msg {
    Msg::AddRing(AddRing {
        flags,
        index,
        region,
        offset,
        log2_ring_size: log2,
        private_hdr_size: 0,
    })
}

/// One control lie: its name, the text the server's disconnect reason
/// must contain, and what the liar sends (false: the setup before the lie
/// was already refused).
pub type ControlLie = (&'static str, &'static str, fn(&RawClient, &Kit) -> bool);

/// How many of [`CONTROL_LIES`] (the first ones) are told before the
/// interface is chosen (counted by the server socket); the others count
/// as `ctrl_errors` of the interface.
pub const CONTROL_LIES_BEFORE_INIT: usize = 5;

/// Control-message lies against a free interface (`Kit::id`); each ends
/// with the server's disconnect.
pub const CONTROL_LIES: &[ControlLie] = &[
    ("short message", "invalid message size 64", |r, _| {
        r.send_raw(&[2u8; 64], None)
    }),
    ("unknown message type", "unknown message type 42", |r, _| {
        let mut b = [0u8; MSG_SIZE];
        b[0] = 42;
        r.send_raw(&b, None)
    }),
    ("old version", "incompatible memif version", |r, k| {
        r.send(Msg::Init(init(0x0100, k.id)), None)
    }),
    ("unknown interface id", "not found", |r, _| {
        r.send(Msg::Init(init(VERSION, 0xdead)), None)
    }),
    ("region before init", "before init", |r, k| {
        add_region(r, 0, 4096, k.region.raw_fd())
    }),
    ("region without fd", "missing region fd", |r, k| {
        k.init_then_region(r, 0, 4096, None)
    }),
    (
        "region index out of range",
        "invalid region index 1",
        |r, k| k.init_then_region(r, 1, 4096, k.region.raw_fd()),
    ),
    ("region larger than its file", "announced", |r, k| {
        k.init_then_region(r, 0, 2 << 20, k.region.raw_fd())
    }),
    ("unsealed region", "not sealed", |r, k| {
        k.init_then_region(r, 0, 4096, Some(k.unsealed.as_raw_fd()))
    }),
    ("ring index out of range", "invalid ring index 1", |r, k| {
        k.setup(r) && r.send(ring(ADD_RING_FLAG_C2S, 1, 0, 0, 10), Some(k.irq.fd()))
    }),
    (
        "ring in a missing region",
        "ring region index 1 out of range",
        |r, k| k.setup_then_ring(r, 1, 0, 10, Some(k.irq.fd())),
    ),
    ("ring past the region end", "past region", |r, k| {
        k.setup_then_ring(r, 0, (1 << 20) - 1024, 10, Some(k.irq.fd()))
    }),
    ("ring too large", "ring size 2^15", |r, k| {
        k.setup_then_ring(r, 0, 0, 15, Some(k.irq.fd()))
    }),
    ("interrupt fd not an eventfd", "not an eventfd", |r, k| {
        k.setup_then_ring(r, 0, 0, 10, k.region.raw_fd())
    }),
    (
        "interrupt fd a full blocking pipe",
        "not an eventfd (pipe:",
        |r, k| k.setup_then_ring(r, 0, 0, 10, Some(k.pipe.1.as_raw_fd())),
    ),
    (
        "ring without interrupt fd",
        "missing interrupt fd",
        |r, k| k.setup_then_ring(r, 0, 0, 10, None),
    ),
    (
        "connect without rings",
        "connect without any client-to-server ring",
        |r, k| k.setup(r) && r.send(Msg::Connect("hostile".into()), None),
    ),
    ("overlapping rings", "rings overlap", |r, k| {
        k.setup_two_rings_then_connect(r, 64)
    }),
    ("ring without its cookie", "bad cookie", |r, k| {
        k.setup_two_rings_then_connect(r, 8192)
    }),
];

/// Runs control lie `lie` on a fresh connection to `path`; Ok if the
/// server disconnected with the expected reason and closed.
pub fn run_control_lie(path: &Path, kit: &Kit, lie: &ControlLie) -> Result<(), String> {
    let (name, why, act) = lie;
    let r = RawClient::connect(path).map_err(|e| format!("{name}: {e}"))?;
    if !act(&r, kit) {
        return Err(format!("{name}: the setup before the lie was refused"));
    }
    r.expect_disconnect(why).map_err(|e| format!("{name}: {e}"))
}
