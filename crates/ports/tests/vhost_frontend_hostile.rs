//! turnout-gen's vhost-user frontend (crates/ports/src/vhost_user/frontend/)
//! against a hostile or broken *backend*, byte by byte over a real unix
//! socket (a fake backend in this file):
//! - negotiation: a backend that offers no `VIRTIO_F_VERSION_1`, one that
//!   hangs up mid-negotiation, one that negotiates `REPLY_ACK` and then
//!   never acknowledges, one that sends a message of its own (a memory
//!   table) instead of a reply: each is a clear error (`last_error`,
//!   `setup_failures`), the frontend retries, never crashes, and attaches to
//!   an honest backend (turnoutd's) once one serves the socket;
//! - a message of its own on a running connection: `disconnects_protocol`;
//! - used rings: an id outside the table, a length longer than the buffer,
//!   a used index jumping past what the backend holds: each lie is counted
//!   by kind, the frontend disconnects (`disconnects_lie`) and connects
//!   again, and no frame of the lie is delivered.
//!
//! Runs without root or peers, in 6-11 s (the unanswered-ack case waits
//! out the frontend's 5 s set-up watchdog).
//! `cargo test --release -p ports --test vhost_frontend_hostile`

mod vhost_common;

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::Duration;

use fabric::{Port, RxBatch};
use ports::vhost_user::frontend::{FrontendConfig, VhostFrontendPort};
use ports::vhost_user::{VhostUserConfig, VhostUserPort};
use vhost_common::{wait_until, TempDir};

const GET_FEATURES: u32 = 1;
const SET_MEM_TABLE: u32 = 5;
const SET_VRING_NUM: u32 = 8;
const SET_VRING_ADDR: u32 = 9;
const SET_VRING_KICK: u32 = 12;
const GET_PROTOCOL_FEATURES: u32 = 15;
const SET_VRING_ENABLE: u32 = 18;

const F_VERSION_1: u64 = 1 << 32;
const F_PROTOCOL_FEATURES: u64 = 1 << 30;
const PF_MQ: u64 = 1 << 0;
const PF_REPLY_ACK: u64 = 1 << 3;

const FLAG_VERSION: u32 = 0x1;
const FLAG_REPLY: u32 = 0x4;
const FLAG_NEED_REPLY: u32 = 0x8;

const HDR: usize = 12;

/// One message from the frontend, with the descriptors it carried.
struct Msg {
    req: u32,
    flags: u32,
    body: Vec<u8>,
    fds: Vec<OwnedFd>,
}

/// Reads one message: its 12-byte header with any attached descriptors,
/// then its body. None when the frontend hung up.
fn recv(s: &mut UnixStream) -> Option<Msg> {
    let mut hdr = [0u8; 12];
    let mut iov = libc::iovec {
        iov_base: hdr.as_mut_ptr() as *mut libc::c_void,
        iov_len: hdr.len(),
    };
    let mut cbuf = [0u64; 32];
    // SAFETY: a zeroed msghdr is valid; it points at live local buffers.
    let mut mh: libc::msghdr = unsafe { std::mem::zeroed() };
    mh.msg_iov = &mut iov;
    mh.msg_iovlen = 1;
    mh.msg_control = cbuf.as_mut_ptr() as *mut libc::c_void;
    mh.msg_controllen = std::mem::size_of_val(&cbuf);
    // SAFETY: recvmsg into the buffers above (MSG_WAITALL: all 12 bytes).
    let r = unsafe { libc::recvmsg(s.as_raw_fd(), &mut mh, libc::MSG_WAITALL) };
    if r != HDR as isize {
        return None;
    }
    let mut fds = Vec::new();
    // SAFETY: walks the control messages recvmsg filled in.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&mh);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let n = ((*c).cmsg_len - libc::CMSG_LEN(0) as usize) / 4;
                let p = libc::CMSG_DATA(c) as *const RawFd;
                for i in 0..n {
                    fds.push(OwnedFd::from_raw_fd(*p.add(i)));
                }
            }
            c = libc::CMSG_NXTHDR(&mh, c);
        }
    }
    let word = |i: usize| u32::from_le_bytes(hdr[i..i + 4].try_into().unwrap());
    let mut body = vec![0u8; word(8) as usize];
    s.read_exact(&mut body).ok()?;
    Some(Msg {
        req: word(0),
        flags: word(4),
        body,
        fds,
    })
}

/// Sends a message (a reply when `flags` says so) with a body.
fn send(s: &mut UnixStream, req: u32, flags: u32, body: &[u8]) {
    let mut m = Vec::with_capacity(HDR + body.len());
    m.extend_from_slice(&req.to_le_bytes());
    m.extend_from_slice(&flags.to_le_bytes());
    m.extend_from_slice(&(body.len() as u32).to_le_bytes());
    m.extend_from_slice(body);
    let _ = s.write_all(&m);
}

fn reply_u64(s: &mut UnixStream, req: u32, v: u64) {
    send(s, req, FLAG_VERSION | FLAG_REPLY, &v.to_le_bytes());
}

fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// How the fake backend misbehaves during negotiation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Misbehave {
    /// Answers GET_FEATURES without VIRTIO_F_VERSION_1.
    NoVersion1,
    /// Hangs up when asked for its protocol features.
    CloseMidway,
    /// Negotiates REPLY_ACK, then never acknowledges anything.
    NoAck,
    /// Sends a memory table of its own instead of its features.
    SendsMemTable,
    /// Behaves (for the used-ring lies).
    Honest,
}

/// The frontend's memory and rings, as the fake backend sees them.
struct Mapped {
    base: *mut u8,
    len: usize,
    /// (gpa, uva, offset in the mapping) of the one region.
    gpa: u64,
    uva: u64,
    /// (desc, avail, used) uva of each virtqueue.
    rings: Vec<(u64, u64, u64)>,
    qsize: u16,
    /// The kick eventfd of each virtqueue (shared with the frontend).
    kicks: Vec<Option<OwnedFd>>,
}

impl Mapped {
    fn at(&self, uva: u64) -> *mut u8 {
        let o = (uva - self.uva) as usize;
        assert!(
            o < self.len,
            "the frontend gave an address outside its memory"
        );
        // SAFETY: inside the mapping (checked above).
        unsafe { self.base.add(o) }
    }

    fn gpa_at(&self, gpa: u64) -> *mut u8 {
        self.at(gpa - self.gpa + self.uva)
    }

    /// The head of the `k`-th chain the frontend made available on `vq`.
    fn avail_head(&self, vq: usize, k: u16) -> u16 {
        let avail = self.at(self.rings[vq].1);
        // SAFETY: avail ring: flags, idx, ring[qsize] (u16 each), mapped.
        unsafe { (avail.add(4 + 2 * (k % self.qsize) as usize) as *const u16).read_volatile() }
    }

    fn avail_idx(&self, vq: usize) -> u16 {
        // SAFETY: the avail ring's idx, mapped.
        unsafe { (self.at(self.rings[vq].1).add(2) as *const u16).read_volatile() }
    }

    /// Descriptor `i` of `vq`: (gpa, len).
    fn desc(&self, vq: usize, i: u16) -> (u64, u32) {
        let d = self.at(self.rings[vq].0 + 16 * i as u64);
        // SAFETY: a 16-byte descriptor inside the mapped table.
        unsafe {
            (
                (d as *const u64).read_unaligned(),
                (d.add(8) as *const u32).read_unaligned(),
            )
        }
    }

    /// Writes used entry `slot` = (id, len) and then the used index.
    fn used(&self, vq: usize, slot: u16, id: u32, len: u32, idx: u16) {
        let u = self.at(self.rings[vq].2);
        // SAFETY: used ring: flags, idx (u16), ring[qsize] of (u32, u32).
        unsafe {
            let e = u.add(4 + 8 * (slot % self.qsize) as usize);
            (e as *mut u32).write_volatile(id);
            (e.add(4) as *mut u32).write_volatile(len);
            std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
            (u.add(2) as *mut u16).write_volatile(idx);
        }
    }
}

impl Drop for Mapped {
    fn drop(&mut self) {
        // SAFETY: our own mapping.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

/// Serves one connection as `how` says. For `Honest`, returns the mapped
/// memory once every ring is enabled, with the stream still open (the
/// connection lives as long as the returned stream).
fn serve(mut s: UnixStream, how: Misbehave) -> Option<(UnixStream, Mapped)> {
    let mut reply_ack = false;
    let mut mem: Option<(OwnedFd, u64, u64, u64, u64)> = None;
    let mut rings = vec![(0, 0, 0); 2];
    let mut kicks: Vec<Option<OwnedFd>> = vec![None, None];
    let mut qsize = 0u16;
    let mut enabled = 0;
    while let Some(m) = recv(&mut s) {
        match m.req {
            GET_FEATURES => match how {
                Misbehave::NoVersion1 => reply_u64(&mut s, m.req, F_PROTOCOL_FEATURES),
                Misbehave::SendsMemTable => {
                    // A memory table (one region) where a reply belongs.
                    let mut b = vec![0u8; 8 + 32];
                    b[0] = 1;
                    send(&mut s, SET_MEM_TABLE, FLAG_VERSION, &b);
                }
                _ => reply_u64(&mut s, m.req, F_VERSION_1 | F_PROTOCOL_FEATURES),
            },
            GET_PROTOCOL_FEATURES => {
                if how == Misbehave::CloseMidway {
                    return None;
                }
                reply_u64(&mut s, m.req, PF_MQ | PF_REPLY_ACK);
            }
            _ => {
                if m.req == 16 {
                    reply_ack = u64_at(&m.body, 0) & PF_REPLY_ACK != 0;
                }
                if m.req == SET_MEM_TABLE {
                    let b = &m.body;
                    assert_eq!(u32_at(b, 0), 1, "one region");
                    let fd = m.fds.into_iter().next().expect("a memfd");
                    mem = Some((
                        fd,
                        u64_at(b, 8),
                        u64_at(b, 16),
                        u64_at(b, 24),
                        u64_at(b, 32),
                    ));
                } else if m.req == SET_VRING_KICK {
                    let i = (u64_at(&m.body, 0) & 0xff) as usize;
                    kicks[i] = m.fds.into_iter().next();
                } else if m.req == SET_VRING_NUM {
                    qsize = u32_at(&m.body, 4) as u16;
                } else if m.req == SET_VRING_ADDR {
                    let i = u32_at(&m.body, 0) as usize;
                    let b = &m.body;
                    rings[i] = (u64_at(b, 8), u64_at(b, 24), u64_at(b, 16));
                } else if m.req == SET_VRING_ENABLE {
                    enabled += 1;
                }
                if m.flags & FLAG_NEED_REPLY != 0 && reply_ack && how != Misbehave::NoAck {
                    reply_u64(&mut s, m.req, 0);
                }
                if how == Misbehave::Honest && enabled == rings.len() {
                    let (fd, gpa, size, uva, off) = mem.take().expect("a memory table");
                    let len = (off + size) as usize;
                    // SAFETY: maps the frontend's memfd shared; checked.
                    let p = unsafe {
                        libc::mmap(
                            std::ptr::null_mut(),
                            len,
                            libc::PROT_READ | libc::PROT_WRITE,
                            libc::MAP_SHARED,
                            fd.as_raw_fd(),
                            0,
                        )
                    };
                    assert_ne!(p, libc::MAP_FAILED);
                    // The whole mapping (unmapped on drop); the region
                    // starts `off` bytes into it.
                    let m = Mapped {
                        base: p as *mut u8,
                        len,
                        uva: uva - off,
                        gpa: gpa - off,
                        rings: std::mem::take(&mut rings),
                        qsize,
                        kicks: std::mem::take(&mut kicks),
                    };
                    return Some((s, m));
                }
            }
        }
    }
    None
}

fn front(sock: &std::path::Path) -> VhostFrontendPort {
    let mut fc = FrontendConfig::new(sock);
    fc.queue_size = 256;
    VhostFrontendPort::new("front", fc).unwrap()
}

fn accept(l: &UnixListener) -> UnixStream {
    l.set_nonblocking(true).unwrap();
    let mut got = None;
    assert!(
        wait_until(Duration::from_secs(10), || {
            got = l.accept().ok().map(|(s, _)| s);
            got.is_some()
        }),
        "the frontend never connected"
    );
    let s = got.unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    s
}

/// Each broken negotiation is a clear error and a retry; an honest backend
/// on the same socket afterwards gets a working link.
#[test]
fn a_broken_negotiation_is_a_clear_error_and_the_frontend_retries() {
    let dir = TempDir::new("vfh-neg");
    let sock = dir.path("b.sock");
    let l = UnixListener::bind(&sock).unwrap();
    let f = front(&sock);
    let cases = [
        (Misbehave::NoVersion1, "does not offer VIRTIO_F_VERSION_1"),
        (Misbehave::CloseMidway, "GET_PROTOCOL_FEATURES"),
        (Misbehave::SendsMemTable, "GET_FEATURES"),
        (Misbehave::NoAck, "SET_FEATURES"),
    ];
    for (i, (how, says)) in cases.iter().enumerate() {
        assert!(serve(accept(&l), *how).is_none());
        // The frontend gives up on this connection (NoAck: after its 5 s
        // reply timeout) and says why.
        assert!(
            wait_until(Duration::from_secs(10), || f
                .counter("setup_failures")
                .unwrap()
                == i as u64 + 1),
            "{how:?}: no set-up failure counted; last error {:?}",
            f.last_error()
        );
        let e = f.last_error();
        assert!(
            e.contains(says),
            "{how:?}: last error {e:?} should name {says:?}"
        );
        assert!(!f.link_up(), "{how:?}: link up after a failed set-up");
        assert_eq!(f.connects(), 0, "{how:?}");
    }
    // An honest backend on the same socket: the frontend, still retrying,
    // attaches, and frames flow.
    drop(l);
    std::fs::remove_file(&sock).unwrap();
    let b = VhostUserPort::new("honest", VhostUserConfig::new(&sock)).unwrap();
    assert!(
        wait_until(Duration::from_secs(10), || f.link_up()
            && f.connects() == 1
            && b.wait_running(Duration::from_millis(1))),
        "no link after the failures: {} (connects {})",
        f.last_error(),
        f.connects()
    );
    // (A retry pending on the listener when it closed may count one more.)
    assert!(f.counter("setup_failures").unwrap() >= cases.len() as u64);
}

/// A lie on the used ring of the frontend's receive queue.
#[derive(Clone, Copy, Debug)]
enum Lie {
    /// An id outside the descriptor table.
    Id,
    /// A length longer than the buffer posted.
    Len,
    /// The used index jumps past every buffer the backend holds.
    Idx,
}

/// Each used-ring lie is counted by kind and disconnects; the frontend
/// connects again (to the same fake backend) and nothing of the lie is
/// delivered, while an honest frame before it is.
#[test]
fn used_ring_lies_are_counted_and_disconnect_then_the_frontend_reconnects() {
    let dir = TempDir::new("vfh-lie");
    let sock = dir.path("b.sock");
    let l = UnixListener::bind(&sock).unwrap();
    let f = front(&sock);
    let mut rx = f.take_rx(0).unwrap();
    let mut batch = RxBatch::with_capacity(64);
    let lies = [
        (Lie::Id, "lie_used_id"),
        (Lie::Len, "lie_used_len"),
        (Lie::Idx, "lie_used_idx"),
    ];
    for (i, (lie, counter)) in lies.iter().enumerate() {
        let (_s, m) = serve(accept(&l), Misbehave::Honest).expect("negotiation");
        // (The link is up a moment before the connection is counted.)
        assert!(
            wait_until(Duration::from_secs(10), || f.link_up()
                && f.connects() == i as u64 + 1),
            "{lie:?}: no link: {} (connects {})",
            f.last_error(),
            f.connects()
        );
        // The frontend posted its receive buffers on virtqueue 0.
        assert!(
            wait_until(Duration::from_secs(5), || m.avail_idx(0) > 0),
            "{lie:?}: no receive buffers posted"
        );
        // One honest 60-byte frame first: the fake backend is right.
        let head = m.avail_head(0, 0);
        let (gpa, cap) = m.desc(0, head);
        let frame: Vec<u8> = (0..60u8).collect();
        // SAFETY: the buffer the frontend posted, `cap` bytes (checked).
        unsafe {
            assert!(cap as usize >= HDR + frame.len());
            let p = m.gpa_at(gpa);
            std::ptr::write_bytes(p, 0, HDR);
            std::ptr::copy_nonoverlapping(frame.as_ptr(), p.add(HDR), frame.len());
        }
        m.used(0, 0, head as u32, (HDR + frame.len()) as u32, 1);
        let mut got = Vec::new();
        assert!(
            wait_until(Duration::from_secs(5), || {
                let b = batch.receive(rx.as_mut(), 0, 0);
                got.extend(b.pkts().iter().map(|p| p.data().to_vec()));
                !got.is_empty()
            }),
            "{lie:?}: the honest frame never arrived"
        );
        assert_eq!(got, vec![frame.clone()], "{lie:?}");
        // Then the lie, on the next used entry.
        let head1 = m.avail_head(0, 1);
        let (_, cap1) = m.desc(0, head1);
        match lie {
            Lie::Id => m.used(0, 1, m.qsize as u32 + 7, (HDR + 60) as u32, 2),
            Lie::Len => m.used(0, 1, head1 as u32, cap1 + 1, 2),
            Lie::Idx => m.used(0, 1, head1 as u32, (HDR + 60) as u32, m.qsize + 2),
        }
        let mut delivered = 0;
        assert!(
            wait_until(Duration::from_secs(5), || {
                delivered += batch.receive(rx.as_mut(), 0, 0).received();
                f.counter(counter).unwrap() == 1
            }),
            "{lie:?}: not counted as {counter}"
        );
        assert_eq!(delivered, 0, "{lie:?}: frames of a lie were delivered");
        assert!(
            wait_until(Duration::from_secs(5), || f
                .counter("disconnects_lie")
                .unwrap()
                == i as u64 + 1),
            "{lie:?}: no disconnect"
        );
        // One lie per connection so far, each counted once.
        let total: u64 = lies.iter().map(|(_, c)| f.counter(c).unwrap()).sum();
        assert_eq!(total, i as u64 + 1, "{lie:?}");
        assert_eq!(f.counter("disconnects_hangup"), Some(0), "{lie:?}");
    }
    // And it comes back once more after the last lie.
    let (_s, _m) = serve(accept(&l), Misbehave::Honest).expect("negotiation");
    assert!(
        wait_until(Duration::from_secs(10), || f.link_up()
            && f.connects() == lies.len() as u64 + 1),
        "no link after the lies (connects {})",
        f.connects()
    );
}

/// A backend that sends a message of its own on a running connection (a
/// memory table: backends never send one) is disconnected and counted as a
/// protocol break, not as a hang-up; the frontend connects again.
#[test]
fn a_message_nobody_asked_for_disconnects_and_the_frontend_reconnects() {
    let dir = TempDir::new("vfh-msg");
    let sock = dir.path("b.sock");
    let l = UnixListener::bind(&sock).unwrap();
    let f = front(&sock);
    let (mut s, _m) = serve(accept(&l), Misbehave::Honest).expect("negotiation");
    assert!(
        wait_until(Duration::from_secs(10), || f.link_up()),
        "no link: {}",
        f.last_error()
    );
    let mut b = vec![0u8; 8 + 32];
    b[0] = 1;
    send(&mut s, SET_MEM_TABLE, FLAG_VERSION, &b);
    assert!(
        wait_until(Duration::from_secs(5), || f
            .counter("disconnects_protocol")
            .unwrap()
            == 1),
        "not counted; last error {:?}",
        f.last_error()
    );
    assert!(
        f.last_error().contains("nobody asked for"),
        "{}",
        f.last_error()
    );
    assert_eq!(f.counter("disconnects_hangup"), Some(0));
    assert_eq!(f.counter("disconnects_lie"), Some(0));
    let (_s2, _m2) = serve(accept(&l), Misbehave::Honest).expect("negotiation again");
    assert!(
        wait_until(Duration::from_secs(10), || f.link_up() && f.connects() == 2),
        "no link after the disconnect (connects {})",
        f.connects()
    );
}

/// A backend that makes the frontend's transmit kick eventfd blocking again
/// (it shares the file description) and fills its counter: the frontend's
/// next kick would wait in `write` for ever, holding the transmitting
/// thread. The watchdog interrupts it; the transmit returns.
#[test]
fn a_backend_that_makes_a_kick_fd_blocking_cannot_hold_the_transmitter() {
    let dir = TempDir::new("vfh-kick");
    let sock = dir.path("b.sock");
    let l = UnixListener::bind(&sock).unwrap();
    let f = std::sync::Arc::new(front(&sock));
    let (_s, m) = serve(accept(&l), Misbehave::Honest).expect("negotiation");
    assert!(
        wait_until(Duration::from_secs(10), || f.link_up()),
        "no link: {}",
        f.last_error()
    );
    let kick = m.kicks[1].as_ref().expect("a kick fd for virtqueue 1");
    let max = u64::MAX - 1;
    // SAFETY: 8 bytes from a local to the (still non-blocking) eventfd;
    // then fcntl on it, no pointers.
    unsafe {
        libc::write(
            kick.as_raw_fd(),
            &max as *const u64 as *const libc::c_void,
            8,
        );
        let fl = libc::fcntl(kick.as_raw_fd(), libc::F_GETFL);
        libc::fcntl(kick.as_raw_fd(), libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    let freed = ports::guard::interrupted();
    let (tx, rx) = std::sync::mpsc::channel();
    let f2 = f.clone();
    std::thread::spawn(move || {
        // SAFETY: this thread is the only user of the transmit queue.
        let mut q = unsafe { fabric::OwnedTx::new(f2.tx(0)) };
        let first = q.reserve(1);
        q.write(first, 1, &[0x5a; 60]);
        q.publish(first + 1);
        let _ = tx.send(());
    });
    rx.recv_timeout(Duration::from_secs(10))
        .expect("the kick still blocks the transmitting thread after 10 s");
    assert!(
        ports::guard::interrupted() > freed,
        "no write was interrupted"
    );
}
