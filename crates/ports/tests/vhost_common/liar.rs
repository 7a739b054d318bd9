//! A lying vhost-user frontend (a hostile VM), byte by byte over the real
//! socket: the kit shared by the in-process test (`tests/vhost_hostile.rs`,
//! against a `VhostUserPort` driven by the test) and the hostile peer
//! example (`examples/hostile_peer.rs`, against a turnoutd process).
//!
//! [`scenarios`] lists every lie with how the backend must end the
//! connection ([`Want`]); a lie runs against a [`DataPath`]: whoever runs
//! the port's data path (the test's worker, or turnoutd's own workers).
#![allow(dead_code)]

use std::fs::File;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// Whoever runs the data path of the port under attack.
pub trait DataPath {
    /// Lets the data path look at the rings for about `t`.
    fn spin(&mut self, t: Duration);
    /// Waits until the backend runs the rings; false if it never did.
    fn wait_running(&mut self) -> bool;
    /// Makes the switch transmit a frame towards the guest (its receive
    /// ring 0, where the guest offered a buffer).
    fn push_to_guest(&mut self);
}

// vhost-user requests.
pub const GET_FEATURES: u32 = 1;
pub const SET_FEATURES: u32 = 2;
pub const SET_OWNER: u32 = 3;
pub const SET_MEM_TABLE: u32 = 5;
pub const SET_VRING_NUM: u32 = 8;
pub const SET_VRING_ADDR: u32 = 9;
pub const SET_VRING_BASE: u32 = 10;
pub const SET_VRING_KICK: u32 = 12;
pub const SET_VRING_CALL: u32 = 13;
pub const GET_PROTOCOL_FEATURES: u32 = 15;
pub const SET_PROTOCOL_FEATURES: u32 = 16;
pub const SET_VRING_ENABLE: u32 = 18;

pub const F_VERSION_1: u64 = 1 << 32;
pub const F_PROTOCOL_FEATURES: u64 = 1 << 30;
pub const F_MRG_RXBUF: u64 = 1 << 15;

pub const DESC_F_NEXT: u16 = 1;
pub const DESC_F_WRITE: u16 = 2;
/// Guest-physical address of the receive buffers `refill_rx` posts.
pub const RX_BUF: u64 = 0x8_0000;
/// Receive buffers `refill_rx` keeps offered.
pub const RX_BUFS: u16 = 64;

/// Guest memory: 1 MiB at guest-physical 0, "mapped" by the frontend at
/// `UVA` (only a label for the backend).
pub const MEM_B: u64 = 1 << 20;
pub const UVA: u64 = 0x7f00_0000_0000;
pub const QSIZE: u16 = 256;
pub const HDR: usize = 12;

pub fn ring_gpa(q: u64) -> (u64, u64, u64) {
    let d = 0x1_0000 + q * 0x1_0000;
    (d, d + 0x1000, d + 0x2000)
}

pub fn memfd(len: u64) -> File {
    // SAFETY: a static NUL-terminated name; the result is checked.
    let fd = unsafe { libc::memfd_create(c"hostile-guest".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor we own.
    let f = unsafe { File::from_raw_fd(fd) };
    f.set_len(len).unwrap();
    f
}

pub fn eventfd() -> OwnedFd {
    // SAFETY: plain syscall; checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
    assert!(fd >= 0);
    // SAFETY: a fresh descriptor we own.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// Sends `bytes` with `fds` attached (SCM_RIGHTS).
pub fn send_fds(sock: RawFd, bytes: &[u8], fds: &[RawFd]) -> bool {
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    let mut cbuf = [0u64; 16];
    // SAFETY: a zeroed msghdr is valid; fields set below.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    if !fds.is_empty() {
        let n = std::mem::size_of_val(fds);
        // SAFETY: the control buffer (128 bytes) holds up to 8 fds.
        unsafe {
            mh.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
            mh.msg_controllen = libc::CMSG_SPACE(n as u32) as usize;
            let c = libc::CMSG_FIRSTHDR(&mh);
            (*c).cmsg_level = libc::SOL_SOCKET;
            (*c).cmsg_type = libc::SCM_RIGHTS;
            (*c).cmsg_len = libc::CMSG_LEN(n as u32) as usize;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr(),
                libc::CMSG_DATA(c) as *mut RawFd,
                fds.len(),
            );
        }
    }
    // SAFETY: mh points at live buffers.
    let r = unsafe { libc::sendmsg(sock, &mh, libc::MSG_NOSIGNAL) };
    r == bytes.len() as isize
}

/// One frontend connection with its guest memory.
pub struct Frontend {
    /// The control socket.
    pub sock: UnixStream,
    /// Guest memory.
    pub mem: File,
    map: *mut u8,
    /// Kick eventfds of rings 0 and 1.
    pub kicks: Vec<OwnedFd>,
    calls: Vec<OwnedFd>,
    avail: [u16; 2],
}

impl Drop for Frontend {
    fn drop(&mut self) {
        // SAFETY: exactly what mmap returned.
        unsafe { libc::munmap(self.map as *mut libc::c_void, MEM_B as usize) };
    }
}

impl Frontend {
    pub fn connect(path: &Path) -> Frontend {
        let sock = UnixStream::connect(path).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mem = memfd(MEM_B);
        // SAFETY: a fresh shared mapping of our memfd; checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM_B as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                mem.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        Frontend {
            sock,
            mem,
            map: map as *mut u8,
            kicks: (0..2).map(|_| eventfd()).collect(),
            calls: (0..2).map(|_| eventfd()).collect(),
            avail: [0; 2],
        }
    }

    /// Sends a request (header + body) with `fds`; false if the backend
    /// is gone.
    pub fn send(&self, req: u32, body: &[u8], fds: &[RawFd]) -> bool {
        self.send_sized(req, body.len() as u32, body, fds)
    }

    /// As `send`, with a header `size` that may lie about the body.
    pub fn send_sized(&self, req: u32, size: u32, body: &[u8], fds: &[RawFd]) -> bool {
        let mut m = Vec::new();
        for w in [req, 1, size] {
            m.extend_from_slice(&w.to_le_bytes());
        }
        m.extend_from_slice(body);
        send_fds(self.sock.as_raw_fd(), &m, fds)
    }

    /// Reads a reply's u64 body.
    pub fn reply_u64(&mut self) -> u64 {
        let mut h = [0u8; 20];
        self.sock.read_exact(&mut h).unwrap();
        u64::from_le_bytes(h[12..20].try_into().unwrap())
    }

    pub fn mem_table(&self) -> Vec<u8> {
        region_table(&[(0, MEM_B, UVA, 0)])
    }

    /// Features, owner, memory table: everything before the rings.
    pub fn setup_device(&mut self) {
        assert!(self.send(GET_FEATURES, &[], &[]));
        let offered = self.reply_u64();
        let want = offered & (F_VERSION_1 | F_PROTOCOL_FEATURES | F_MRG_RXBUF);
        assert!(self.send(SET_OWNER, &[], &[]));
        assert!(self.send(SET_FEATURES, &want.to_le_bytes(), &[]));
        assert!(self.send(GET_PROTOCOL_FEATURES, &[], &[]));
        let _ = self.reply_u64();
        assert!(self.send(SET_PROTOCOL_FEATURES, &0u64.to_le_bytes(), &[]));
        let t = self.mem_table();
        assert!(self.send(SET_MEM_TABLE, &t, &[self.mem.as_raw_fd()]));
    }

    /// Rings 0 (guest receive) and 1 (guest transmit), enabled.
    pub fn setup_rings(&mut self) {
        for q in 0..2u32 {
            let (d, a, u) = ring_gpa(q as u64);
            assert!(self.send(SET_VRING_NUM, &state(q, QSIZE as u32), &[]));
            assert!(self.send(SET_VRING_ADDR, &addr(q, UVA + d, UVA + u, UVA + a), &[]));
            assert!(self.send(SET_VRING_BASE, &state(q, 0), &[]));
            let call = self.calls[q as usize].as_raw_fd();
            assert!(self.send(SET_VRING_CALL, &(q as u64).to_le_bytes(), &[call]));
            let kick = self.kicks[q as usize].as_raw_fd();
            assert!(self.send(SET_VRING_KICK, &(q as u64).to_le_bytes(), &[kick]));
            assert!(self.send(SET_VRING_ENABLE, &state(q, 1), &[]));
        }
    }

    pub fn write(&self, gpa: u64, b: &[u8]) {
        assert!(gpa + b.len() as u64 <= MEM_B);
        // SAFETY: inside our mapping (checked above).
        unsafe { std::ptr::copy_nonoverlapping(b.as_ptr(), self.map.add(gpa as usize), b.len()) };
    }

    pub fn desc(&self, q: u64, i: u16, addr: u64, len: u32, flags: u16, next: u16) {
        let mut d = [0u8; 16];
        d[0..8].copy_from_slice(&addr.to_le_bytes());
        d[8..12].copy_from_slice(&len.to_le_bytes());
        d[12..14].copy_from_slice(&flags.to_le_bytes());
        d[14..16].copy_from_slice(&next.to_le_bytes());
        self.write(ring_gpa(q).0 + 16 * i as u64, &d);
    }

    /// Makes `head` available on ring `q` and kicks.
    pub fn offer(&mut self, q: usize, head: u16) {
        let (_, a, _) = ring_gpa(q as u64);
        let i = self.avail[q];
        self.write(a + 4 + 2 * (i % QSIZE) as u64, &head.to_le_bytes());
        self.avail[q] = i.wrapping_add(1);
        self.write(a + 2, &self.avail[q].to_le_bytes());
        self.kick(q);
    }

    pub fn set_avail(&mut self, q: usize, v: u16) {
        self.avail[q] = v;
        self.write(ring_gpa(q as u64).1 + 2, &v.to_le_bytes());
        self.kick(q);
    }

    pub fn kick(&self, q: usize) {
        // SAFETY: writes 8 bytes to our eventfd.
        unsafe { libc::write(self.kicks[q].as_raw_fd(), [1u64].as_ptr() as *const _, 8) };
    }

    /// Puts `n` frames of `len` bytes (`tag` in the first payload byte) on
    /// the guest transmit ring, one buffer each, reusing slots round-robin.
    pub fn send_frames(&mut self, n: usize, len: usize, tag: u8) {
        for k in 0..n {
            let slot = (self.avail[1] % QSIZE) as u64;
            let buf = 0x4_0000 + slot * 2048;
            let mut f = vec![0u8; HDR + len];
            f[HDR..HDR + 12].copy_from_slice(&[0xff; 12]);
            f[HDR + 14] = tag;
            f[HDR + 15] = k as u8;
            self.write(buf, &f);
            self.desc(1, slot as u16, buf, f.len() as u32, 0, 0);
            self.offer(1, slot as u16);
        }
    }

    /// Keeps 64 writable 2 KiB receive buffers offered on ring 0 (the
    /// guest's receive queue: where the switch transmits to): posts what
    /// the backend used since (descriptor `k % 64`, its buffer at
    /// `RX_BUF + (k % 64) * 2048`).
    pub fn refill_rx(&mut self) {
        let used = self.rx_used();
        let (_, a, _) = ring_gpa(0);
        while self.avail[0].wrapping_sub(used) < RX_BUFS {
            let k = self.avail[0];
            let id = k % RX_BUFS;
            self.desc(0, id, RX_BUF + id as u64 * 2048, 2048, DESC_F_WRITE, 0);
            self.write(a + 4 + 2 * (k % QSIZE) as u64, &id.to_le_bytes());
            self.avail[0] = k.wrapping_add(1);
        }
        self.write(a + 2, &self.avail[0].to_le_bytes());
    }

    /// The used index of ring 0 as the backend wrote it (frames it put
    /// in our receive buffers).
    pub fn rx_used(&self) -> u16 {
        let mut b = [0u8; 2];
        let off = ring_gpa(0).2 + 2;
        // SAFETY: inside our mapping (the rings are below MEM_B).
        unsafe { std::ptr::copy_nonoverlapping(self.map.add(off as usize), b.as_mut_ptr(), 2) };
        u16::from_le_bytes(b)
    }

    /// Shrinks (or grows) our memory file: the backend's mapping of it
    /// faults past the new end. Our own mapping too: touch nothing past
    /// it afterwards.
    pub fn truncate(&self, len: u64) {
        self.mem.set_len(len).unwrap();
    }

    /// Moves to a new memory file holding a copy of the memory, announced
    /// with a new memory table (a remap); returns once the backend handled
    /// it (the reply to a request sent after it arrived).
    pub fn remap(&mut self) {
        self.remap_only();
        assert!(self.send(GET_FEATURES, &[], &[]));
        let _ = self.reply_u64();
    }

    /// A remap whose new file is truncated to nothing as soon as the
    /// table is sent, while the backend maps it.
    pub fn remap_then_truncate(&mut self) {
        self.remap_only();
        self.truncate(0);
    }

    fn remap_only(&mut self) {
        let mem = memfd(MEM_B);
        // SAFETY: our whole mapping, read as bytes.
        let copy = unsafe { std::slice::from_raw_parts(self.map, MEM_B as usize) };
        std::io::Write::write_all(&mut &mem, copy).unwrap();
        // SAFETY: a fresh shared mapping of our memfd; checked.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MEM_B as usize,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                mem.as_raw_fd(),
                0,
            )
        };
        assert_ne!(map, libc::MAP_FAILED);
        let t = self.mem_table();
        assert!(self.send(SET_MEM_TABLE, &t, &[mem.as_raw_fd()]));
        // SAFETY: exactly the old mapping.
        unsafe { libc::munmap(self.map as *mut libc::c_void, MEM_B as usize) };
        self.map = map as *mut u8;
        self.mem = mem;
    }

    /// The call eventfd of ring `q` (ours; the backend shares it).
    pub fn call_fd(&self, q: usize) -> RawFd {
        self.calls[q].as_raw_fd()
    }

    /// Sends raw bytes with `fds` attached (a message in pieces).
    pub fn send_raw(&self, bytes: &[u8], fds: &[RawFd]) -> bool {
        send_fds(self.sock.as_raw_fd(), bytes, fds)
    }

    /// Whether the backend closed the connection (within `t`).
    pub fn closed_within(&mut self, t: Duration) -> bool {
        self.sock.set_read_timeout(Some(t)).unwrap();
        let mut b = [0u8; 256];
        let t0 = Instant::now();
        loop {
            match self.sock.read(&mut b) {
                Ok(0) => return true,
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return true,
                Err(_) => {}
            }
            if t0.elapsed() >= t {
                return false;
            }
        }
    }
}

pub fn state(index: u32, num: u32) -> [u8; 8] {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&index.to_le_bytes());
    b[4..].copy_from_slice(&num.to_le_bytes());
    b
}

pub fn addr(index: u32, desc: u64, used: u64, avail: u64) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&index.to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for v in [desc, used, avail, 0u64] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b
}

/// A memory table: (gpa, size, uva, mmap offset) per region.
pub fn region_table(regions: &[(u64, u64, u64, u64)]) -> Vec<u8> {
    let mut b = Vec::new();
    b.extend_from_slice(&(regions.len() as u32).to_le_bytes());
    b.extend_from_slice(&0u32.to_le_bytes());
    for &(g, s, u, o) in regions {
        for v in [g, s, u, o] {
            b.extend_from_slice(&v.to_le_bytes());
        }
    }
    b
}

/// How one hostile round must end.
#[derive(Clone, Copy, Debug)]
pub enum Want {
    /// `disconnects_protocol` (and optionally a `protocol_errors` bump).
    Protocol,
    /// `disconnects_lie` and the named lie counter.
    Lie(&'static str),
    /// `disconnects_hangup` (we hung up).
    Hangup,
}

/// What a lie does to a frontend connection, with the data path at hand.
pub type Act = fn(&mut Frontend, &mut dyn DataPath);

/// Every lie: its name, what it does, how the backend must end it.
pub fn scenarios() -> Vec<(&'static str, Act, Want)> {
    fn mem_lie(f: &mut Frontend, table: &[(u64, u64, u64, u64)], fds: &[RawFd]) {
        assert!(f.send(GET_FEATURES, &[], &[]));
        let _ = f.reply_u64();
        assert!(f.send(SET_FEATURES, &F_VERSION_1.to_le_bytes(), &[]));
        let _ = f.send(SET_MEM_TABLE, &region_table(table), fds);
    }
    vec![
        (
            "overlapping regions",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                mem_lie(
                    f,
                    &[
                        (0, 0x8_0000, UVA, 0),
                        (0x4_0000, 0x8_0000, UVA + 0x10_0000, 0),
                    ],
                    &[fd, fd],
                );
            },
            Want::Protocol,
        ),
        (
            "zero-size region",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                mem_lie(f, &[(0, 0, UVA, 0)], &[fd]);
            },
            Want::Protocol,
        ),
        (
            "huge region",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                mem_lie(f, &[(0, 1 << 62, UVA, 0)], &[fd]);
            },
            Want::Protocol,
        ),
        (
            "overflowing region",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                mem_lie(f, &[(u64::MAX - 4095, 8192, UVA, 0)], &[fd]);
            },
            Want::Protocol,
        ),
        (
            "region past the end of its file",
            |f, _| {
                // Regression: the table mapped, and the first ring access
                // past the end of the file killed the process (SIGBUS).
                let small = memfd(4096);
                mem_lie(f, &[(0, MEM_B, UVA, 0)], &[small.as_raw_fd()]);
                let (d, a, u) = ring_gpa(0);
                let _ = f.send(SET_VRING_NUM, &state(0, QSIZE as u32), &[]);
                let _ = f.send(SET_VRING_ADDR, &addr(0, UVA + d, UVA + u, UVA + a), &[]);
                let k = f.kicks[0].as_raw_fd();
                let _ = f.send(SET_VRING_KICK, &0u64.to_le_bytes(), &[k]);
            },
            Want::Protocol,
        ),
        (
            "unmappable region (eventfd)",
            |f, _| {
                let e = eventfd();
                mem_lie(f, &[(0, 4096, UVA, 0)], &[e.as_raw_fd()]);
            },
            Want::Protocol,
        ),
        (
            "memory table with fewer fds than regions",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                mem_lie(
                    f,
                    &[(0, 0x1000, UVA, 0), (0x10_0000, 0x1000, UVA + 0x10_0000, 0)],
                    &[fd],
                );
            },
            Want::Protocol,
        ),
        (
            "nine regions",
            |f, _| {
                let fd = f.mem.as_raw_fd();
                let t: Vec<_> = (0..9u64)
                    .map(|i| (i << 20, 4096, UVA + (i << 20), 0))
                    .collect();
                mem_lie(f, &t, &[fd; 8]);
            },
            Want::Protocol,
        ),
        (
            "vring outside guest memory",
            |f, _| {
                f.setup_device();
                assert!(f.send(SET_VRING_NUM, &state(1, 256), &[]));
                let _ = f.send(
                    SET_VRING_ADDR,
                    &addr(1, UVA + MEM_B, UVA + 0x2000, UVA + 0x1000),
                    &[],
                );
                let k = f.kicks[1].as_raw_fd();
                let _ = f.send(SET_VRING_KICK, &1u64.to_le_bytes(), &[k]);
                // Accepted until the ring starts: enabling it fails.
                let _ = f.send(SET_VRING_ENABLE, &state(1, 1), &[]);
            },
            Want::Protocol,
        ),
        (
            "ring size not a power of two",
            |f, _| {
                f.setup_device();
                let _ = f.send(SET_VRING_NUM, &state(1, 100), &[]);
            },
            Want::Protocol,
        ),
        (
            "kick on a ring that does not exist",
            |f, _| {
                f.setup_device();
                let k = f.kicks[0].as_raw_fd();
                let _ = f.send(SET_VRING_KICK, &7u64.to_le_bytes(), &[k]);
            },
            Want::Protocol,
        ),
        (
            "kick without an fd (polling mode)",
            |f, _| {
                f.setup_device();
                let _ = f.send(SET_VRING_KICK, &(1u64 | 1 << 8).to_le_bytes(), &[]);
            },
            Want::Protocol,
        ),
        (
            "features not offered",
            |f, _| {
                let _ = f.send(SET_FEATURES, &(1u64 << 63).to_le_bytes(), &[]);
            },
            Want::Protocol,
        ),
        (
            "messages out of order, then a ring index out of range",
            |f, p| {
                // Rings before features and memory, a base query of a
                // stopped ring: accepted (the order is not fixed), the rings
                // start once everything is there.
                f.setup_rings();
                f.setup_device();
                assert!(p.wait_running());
                assert!(f.send(11, &state(1, 0), &[])); // GET_VRING_BASE
                let _ = f.reply_u64();
                let _ = f.send(SET_VRING_ENABLE, &state(99, 1), &[]);
            },
            Want::Protocol,
        ),
        (
            "message size field lies (short body)",
            |f, _| {
                let _ = f.send_sized(SET_VRING_NUM, 4, &state(0, 256)[..4], &[]);
            },
            Want::Protocol,
        ),
        (
            "unknown request",
            |f, _| {
                let _ = f.send(0x7fff, &[0; 8], &[]);
            },
            Want::Protocol,
        ),
        (
            "descriptor loop",
            |f, w| {
                f.setup_device();
                f.setup_rings();
                f.desc(1, 0, 0x4_0000, 100, DESC_F_NEXT, 1);
                f.desc(1, 1, 0x4_1000, 100, DESC_F_NEXT, 0);
                f.offer(1, 0);
                w.spin(Duration::from_millis(200));
            },
            Want::Lie("lie_chain_too_long"),
        ),
        (
            "chain pointing outside guest memory",
            |f, w| {
                f.setup_device();
                f.setup_rings();
                f.desc(1, 0, 0x4_0000, 12, DESC_F_NEXT, 1);
                f.desc(1, 1, MEM_B + 0x1000, 100, 0, 0);
                f.offer(1, 0);
                w.spin(Duration::from_millis(200));
            },
            Want::Lie("lie_out_of_memory"),
        ),
        (
            "next index outside the table",
            |f, w| {
                f.setup_device();
                f.setup_rings();
                f.desc(1, 0, 0x4_0000, 12, DESC_F_NEXT, 9999);
                f.offer(1, 0);
                w.spin(Duration::from_millis(200));
            },
            Want::Lie("lie_desc_index"),
        ),
        (
            "available index jump",
            |f, w| {
                f.setup_device();
                f.setup_rings();
                f.set_avail(1, 1000);
                w.spin(Duration::from_millis(200));
            },
            Want::Lie("lie_avail_idx"),
        ),
        (
            "read-only buffer offered for receive",
            |f, p| {
                f.setup_device();
                f.setup_rings();
                assert!(p.wait_running());
                f.desc(0, 0, 0x8_0000, 2048, 0, 0);
                f.offer(0, 0);
                p.push_to_guest();
            },
            Want::Lie("lie_wrong_direction"),
        ),
        (
            "kicks on an unconfigured ring, then disconnect mid-setup",
            |f, w| {
                f.setup_device();
                assert!(f.send(SET_VRING_NUM, &state(1, 256), &[]));
                // A kick fd for a ring without addresses, kicked hard.
                let k = f.kicks[1].as_raw_fd();
                assert!(f.send(SET_VRING_KICK, &1u64.to_le_bytes(), &[k]));
                for _ in 0..100 {
                    f.kick(1);
                }
                w.spin(Duration::from_millis(20));
                let _ = f.sock.shutdown(std::net::Shutdown::Both);
            },
            Want::Hangup,
        ),
        (
            "disconnect mid-message",
            |f, _| {
                f.setup_device();
                let _ = f.send_sized(SET_VRING_ADDR, 40, &[0; 10], &[]);
                let _ = f.sock.shutdown(std::net::Shutdown::Both);
            },
            // The vhost crate reports a body shorter than announced as a
            // malformed message, not a hangup.
            Want::Protocol,
        ),
        (
            "disconnect mid-traffic",
            |f, w| {
                f.setup_device();
                f.setup_rings();
                f.send_frames(100, 60, 0x77);
                w.spin(Duration::from_millis(5));
                let _ = f.sock.shutdown(std::net::Shutdown::Both);
                f.send_frames(100, 60, 0x77);
                w.spin(Duration::from_millis(100));
            },
            Want::Hangup,
        ),
    ]
}

// ---------------------------------------------------------------------------
// Guests that turn what they share into a weapon: the pieces the
// in-process test (`tests/vhost_guard.rs`) and the hostile peer example
// (`examples/hostile_peer.rs guard`) share.
// ---------------------------------------------------------------------------

/// A message: header (request, flags 1, size) and body.
pub fn message(req: u32, body: &[u8]) -> Vec<u8> {
    let mut m = Vec::new();
    for w in [req, 1, body.len() as u32] {
        m.extend_from_slice(&w.to_le_bytes());
    }
    m.extend_from_slice(body);
    m
}

/// Where to cut a message and stall: (what, the bytes sent, whether the
/// guest's memfd goes with them). SET_VRING_NUM (12 + 8 bytes) after each
/// of its bytes but the last (every byte boundary of a header and a body);
/// SET_MEM_TABLE (12 + 40) in its header, at its end, and in its body,
/// with its memfd attached to the first piece.
pub fn stall_cuts() -> Vec<(String, Vec<u8>, bool)> {
    let num = message(SET_VRING_NUM, &state(1, QSIZE as u32));
    let table = message(SET_MEM_TABLE, &region_table(&[(0, MEM_B, UVA, 0)]));
    let mut cuts: Vec<(String, Vec<u8>, bool)> = (1..num.len())
        .map(|k| {
            (
                format!("SET_VRING_NUM cut after {k} bytes"),
                num[..k].to_vec(),
                false,
            )
        })
        .collect();
    for k in [5, 12, 36] {
        cuts.push((
            format!("SET_MEM_TABLE with its fd, cut after {k} bytes"),
            table[..k].to_vec(),
            true,
        ));
    }
    cuts
}

/// Sends the piece of a cut message (with the memfd if asked).
pub fn send_cut(f: &Frontend, piece: &[u8], with_fd: bool) -> bool {
    let fds = [f.mem.as_raw_fd()];
    f.send_raw(piece, if with_fd { &fds[..] } else { &[] })
}

/// Sends requests that need a reply and never reads one, until the
/// socket takes no more (or `max` were sent).
pub fn flood_unread(f: &Frontend, max: usize) {
    f.sock.set_nonblocking(true).unwrap();
    let get = message(GET_FEATURES, &[]);
    for _ in 0..max {
        if !f.send_raw(&get, &[]) {
            break;
        }
    }
}

/// Sets or clears `O_NONBLOCK` on one of our descriptors.
pub fn set_nonblocking(fd: RawFd, on: bool) {
    // SAFETY: fcntl on our descriptor; no pointers.
    unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        let fl = if on {
            fl | libc::O_NONBLOCK
        } else {
            fl & !libc::O_NONBLOCK
        };
        libc::fcntl(fd, libc::F_SETFL, fl);
    }
}

/// A pipe's write end, full, left blocking: a write to it waits until
/// someone reads the pipe (nobody will). Returns (read end, write end).
pub fn full_blocking_pipe() -> (OwnedFd, OwnedFd) {
    let (r, w) = std::io::pipe().unwrap();
    let (r, w) = (OwnedFd::from(r), OwnedFd::from(w));
    set_nonblocking(w.as_raw_fd(), true);
    let chunk = [0u8; 4096];
    // SAFETY: writes from a local buffer until the pipe is full.
    while unsafe { libc::write(w.as_raw_fd(), chunk.as_ptr().cast(), chunk.len()) } > 0 {}
    set_nonblocking(w.as_raw_fd(), false);
    (r, w)
}

/// Fills a non-blocking eventfd's counter to its maximum: a write of one
/// more fails with EAGAIN, or waits once the descriptor is blocking.
pub fn fill(fd: RawFd) {
    let max = u64::MAX - 1;
    loop {
        let mut v = 0u64;
        // SAFETY: 8 bytes into / from locals, on our non-blocking eventfd.
        unsafe { libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8) };
        // SAFETY: as above.
        if unsafe { libc::write(fd, &max as *const u64 as *const libc::c_void, 8) } == 8 {
            return;
        }
    }
}

impl Frontend {
    /// Whether the backend closed the connection within `t`, seen without
    /// reading what it sent (a guest that leaves its replies unread).
    pub fn hung_up_within(&self, t: Duration) -> bool {
        let mut p = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLRDHUP,
            revents: 0,
        };
        let ms = t.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, ms) };
        n == 1 && p.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0
    }

    /// A guest with running rings, receive buffers offered, and frames
    /// both ways: `wait_rx` waits (10 s) until the switch wrote into its
    /// receive ring (someone transmits to its port). None if that never
    /// happened.
    pub fn running(path: &Path, wait_rx: bool) -> Option<Frontend> {
        let mut f = Frontend::connect(path);
        f.setup_device();
        f.setup_rings();
        f.refill_rx();
        f.send_frames(32, 60, 0x55);
        if wait_rx {
            let t0 = Instant::now();
            while f.rx_used() == 0 {
                if t0.elapsed() > Duration::from_secs(10) {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(2));
            }
        }
        Some(f)
    }
}
