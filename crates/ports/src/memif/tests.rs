//! Lying peers: a client that writes garbage into shared memory, and raw
//! control connections that send bad messages. Each must be disconnected
//! with a reason and counted, without a crash, while another interface on
//! the same socket keeps forwarding.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch, RxQueue};

use super::proto::*;
use super::ring::Connection;
use super::sys::{EventFd, Region};
use super::*;

struct Dir(PathBuf);
impl Dir {
    fn new(tag: &str) -> Dir {
        let p = PathBuf::from(format!(
            "/tmp/turnout-memif-unit-{tag}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).unwrap();
        Dir(p)
    }
}
impl Drop for Dir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn wait(timeout_ms: u64, mut f: impl FnMut() -> bool) -> bool {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_millis(timeout_ms) {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    f()
}

fn send(port: &MemifPort, frame: &[u8]) -> bool {
    // SAFETY: single-threaded use of this transmit queue.
    let mut tx = unsafe { fabric::OwnedTx::new(port.tx(0)) };
    let n = tx.slots_for(frame.len());
    if n == 0 || tx.free_slots() < n {
        return false;
    }
    let s = tx.reserve(n);
    tx.write(s, n, frame);
    tx.publish(s + n as u64);
    true
}

fn recv_one(rx: &mut dyn RxQueue) -> Option<Vec<u8>> {
    let mut b = RxBatch::with_capacity(32);
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        let burst = b.receive(&mut *rx, 0, 0);
        let n = burst.len();
        let got = burst.pkts().first().map(|p| p.data().to_vec());
        drop(burst);
        if n > 0 {
            return got;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    None
}

/// The good interface (id 1) still carries traffic both ways.
fn healthy(
    s1: &MemifPort,
    c1: &MemifPort,
    s1rx: &mut dyn RxQueue,
    c1rx: &mut dyn RxQueue,
    tag: u8,
) {
    assert!(s1.link_up() && c1.link_up(), "good interface lost its link");
    let f = vec![tag; 3000];
    assert!(send(c1, &f));
    assert_eq!(
        recv_one(s1rx).as_deref(),
        Some(&f[..]),
        "good interface c->s"
    );
    assert!(send(s1, &f));
    assert_eq!(
        recv_one(c1rx).as_deref(),
        Some(&f[..]),
        "good interface s->c"
    );
}

fn conn_of(p: &MemifPort) -> Arc<Connection> {
    p.shared.conn.load_full().expect("connected")
}

fn desc_off(ring_off: usize, slot: u16, size: u32) -> usize {
    ring_off + RING_HDR_B + (slot as usize & (size as usize - 1)) * DESC_B
}

/// A server with interfaces 0 ("victim") and 1 ("good"), a client of each
/// ("liar" on 0, "c1" on 1), all four linked: (server, victim, good, liar,
/// c1).
fn liar_and_good(dir: &Dir) -> (MemifServer, MemifPort, MemifPort, MemifPort, MemifPort) {
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server.add_interface(MemifConfig::new("victim", 0)).unwrap();
    let s1 = server.add_interface(MemifConfig::new("good", 1)).unwrap();
    let liar = MemifPort::client(MemifConfig::new("liar", 0), ClientConfig::new(&path)).unwrap();
    let c1 = MemifPort::client(MemifConfig::new("c1", 1), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up()
        && s1.link_up()
        && liar.link_up()
        && c1.link_up()));
    (server, s0, s1, liar, c1)
}

#[test]
fn lying_client_is_disconnected_counted_and_others_keep_working() {
    let dir = Dir::new("liar");
    let (_server, s0, s1, liar, c1) = liar_and_good(&dir);
    let mut s0rx = s0.take_rx(0).unwrap();
    let mut s1rx = s1.take_rx(0).unwrap();
    let mut c1rx = c1.take_rx(0).unwrap();
    healthy(&s1, &c1, s1rx.as_mut(), c1rx.as_mut(), 1);

    // Each lie (the kit in hostile.rs, also used against a turnoutd
    // process by examples/hostile_peer.rs): what the liar writes into its
    // C2S ring, and the violation the server counts.
    let lies = hostile::RingLie::ALL;
    for (round, l) in lies.iter().enumerate() {
        let (what, kind) = (l.what(), l.violation());
        assert!(
            wait(5000, || s0.link_up() && liar.link_up()),
            "{what}: liar did not reconnect"
        );
        // The victim interface works before the lie.
        assert!(send(&liar, &[7u8; 100]), "{what}");
        assert_eq!(
            recv_one(s0rx.as_mut()).as_deref(),
            Some(&[7u8; 100][..]),
            "{what}"
        );
        let before = s0.counter(kind.name());
        hostile::lie(&liar, *l).unwrap();
        // The worker's next bursts see it; nothing bad is handed out.
        let mut b = RxBatch::with_capacity(256);
        let t0 = Instant::now();
        while s0.counter(kind.name()) == before && t0.elapsed() < Duration::from_secs(3) {
            let burst = b.receive(&mut *s0rx, 0, 0);
            assert!(
                burst.pkts().iter().all(|p| p.len() == 64 || p.len() == 100),
                "{what}: bogus frame handed out"
            );
            drop(burst);
        }
        assert_eq!(s0.counter(kind.name()), before + 1, "{what}: not counted");
        assert!(
            !s0.link_up() || s0.counter("disconnects") > round as u64,
            "{what}: link still up"
        );
        assert!(
            wait(3000, || liar
                .status()
                .last_disconnect
                .contains(kind.reason())),
            "{what}: liar was not told why: {:?}",
            liar.status()
        );
        // The server records its reason as it tears the connection down,
        // which may be after the violation is counted and after the liar
        // read the reason: waited for too.
        assert!(
            wait(3000, || s0.status().last_disconnect.contains(kind.reason())),
            "{what}: the server did not record why: {:?}",
            s0.status()
        );
        healthy(&s1, &c1, s1rx.as_mut(), c1rx.as_mut(), round as u8 + 2);
    }
    assert_eq!(s0.counter("violations"), lies.len() as u64);
    assert_eq!(s1.counter("violations"), 0);
    assert_eq!(s1.counter("disconnects"), 0);
}

#[test]
fn lying_offers_on_the_server_transmit_ring_are_caught() {
    let dir = Dir::new("liar-tx");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server.add_interface(MemifConfig::new("victim", 0)).unwrap();
    let liar = MemifPort::client(MemifConfig::new("liar", 0), ClientConfig::new(&path)).unwrap();
    type Lie = Box<dyn Fn(&Connection)>;
    let offer = |c: &Connection, d: Desc| {
        let r = &c.rx[0];
        for s in 0..r.size as u16 {
            c.regions[0].write16(desc_off(r.off, s, r.size), d.to_bytes());
        }
    };
    let lies: Vec<(&str, Violation, Lie)> = vec![
        (
            "offered buffer in a missing region",
            Violation::BadRegion,
            Box::new(move |c| {
                offer(
                    c,
                    Desc {
                        flags: 0,
                        region: 9,
                        length: 2048,
                        offset: 0,
                        metadata: 0,
                    },
                )
            }),
        ),
        (
            "offered buffer past the region end",
            Violation::OutOfRegion,
            Box::new(move |c| {
                let off = (c.regions[0].len() - 100) as u32;
                offer(
                    c,
                    Desc {
                        flags: 0,
                        region: 0,
                        length: 2048,
                        offset: off,
                        metadata: 0,
                    },
                )
            }),
        ),
        (
            "offered buffer smaller than the buffer size",
            Violation::SmallBuffer,
            Box::new(move |c| {
                offer(
                    c,
                    Desc {
                        flags: 0,
                        region: 0,
                        length: 100,
                        offset: c.rx[0].buf_base as u32,
                        metadata: 0,
                    },
                )
            }),
        ),
        (
            "head far ahead of tail",
            Violation::BadRingIndex,
            Box::new(move |c| {
                c.regions[0].store_u16(c.rx[0].off + RING_HEAD_OFF, 40_000, Ordering::Release)
            }),
        ),
    ];
    for (what, kind, lie) in &lies {
        assert!(
            wait(5000, || s0.link_up() && liar.link_up()),
            "{what}: no link"
        );
        let c = conn_of(&liar);
        lie(&c);
        drop(c);
        let before = s0.counter(kind.name());
        // The server transmits into the lying offers: caught, nothing written
        // outside the region, and the send path stops at once.
        for _ in 0..4 {
            send(&s0, &[1u8; 1000]);
        }
        assert_eq!(s0.counter(kind.name()), before + 1, "{what}");
        assert!(!s0.link_up(), "{what}: link still up");
        assert_eq!(
            s0.tx(0).tx_lock().lock().producer.free_slots(),
            0,
            "{what}: still accepting frames"
        );
        assert!(
            wait(3000, || liar
                .status()
                .last_disconnect
                .contains(kind.reason())),
            "{what}: {:?}",
            liar.status()
        );
    }
}

/// Everything to port 0.
struct ToZero;

impl fabric::Logic for ToZero {
    fn name(&self) -> &'static str {
        "to-zero"
    }
    fn classify(
        &self,
        _: &fabric::Ctx,
        _: fabric::PortId,
        _: &mut fabric::Pkts,
        v: &mut [fabric::Verdict],
    ) {
        v.fill(fabric::Verdict::Port(0));
    }
}

/// A lie in the third offered buffer while the switch forwards a run of
/// large (streamed) frames into them: caught and counted once, the two
/// frames before it written into their buffers whole and counted as sent,
/// the rest of the run dropped as the peer's fault, and the sending
/// interface unharmed.
#[test]
fn a_lie_inside_a_run_of_large_frames_is_caught_after_the_frames_before_it() {
    let dir = Dir::new("liar-run");
    let (_server, s0, s1, liar, c1) = liar_and_good(&dir);
    let (s0, s1) = (Arc::new(s0), Arc::new(s1));
    let sw = fabric::Switch::new(fabric::SwitchConfig::default(), Box::new(ToZero)).unwrap();
    sw.add_port("victim", s0.clone(), None).unwrap();
    sw.add_port("good", s1.clone(), None).unwrap();

    // The liar's offers at slots 0 and 1 as they are; slot 2 too small.
    let c = conn_of(&liar);
    let r = &c.rx[0];
    let offered = |slot: u16| {
        let mut b = [0u8; DESC_B];
        assert!(c.regions[0].copy_out(desc_off(r.off, slot, r.size), &mut b));
        Desc::from_bytes(b)
    };
    let (d0, d1, d2) = (offered(0), offered(1), offered(2));
    c.regions[0].write16(
        desc_off(r.off, 2, r.size),
        Desc { length: 100, ..d2 }.to_bytes(),
    );
    let before = s0.counter("violation_small_buffer");

    let frames: Vec<Vec<u8>> = (0..8u32)
        .map(|k| (0..1518u32).map(|i| (i * 3 + k * 101) as u8).collect())
        .collect();
    // SAFETY: this thread alone transmits on c1's queue 0.
    let mut tx = unsafe { fabric::OwnedTx::new(c1.tx(0)) };
    assert!(tx.free_slots() as usize >= frames.len());
    let s = tx.reserve(frames.len() as u32);
    for (k, f) in frames.iter().enumerate() {
        tx.write(s + k as u64, 1, f);
    }
    tx.publish(s + frames.len() as u64);
    drop(tx);

    let t0 = Instant::now();
    let accounted = || {
        let st = sw.port_stats();
        let drops: u64 = st[0].drops.iter().map(|d| d.1).sum();
        st[1].rx_packets == 8 && st[0].tx_packets + drops == 8
    };
    while !accounted() {
        assert!(
            t0.elapsed() < Duration::from_secs(5),
            "{:?}",
            sw.port_stats()
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(s0.counter("violation_small_buffer"), before + 1);
    let st = sw.port_stats();
    // The two before the lie count as sent, the six from it on as the
    // peer's fault: as one frame at a time would have.
    assert_eq!(st[0].tx_packets, 2, "{st:?}");
    assert_eq!(
        st[0].drops.iter().map(|d| (d.0, d.1)).collect::<Vec<_>>(),
        vec![("peer_fault", 6)],
        "{st:?}"
    );
    for (d, f) in [(d0, &frames[0]), (d1, &frames[1])] {
        let mut got = vec![0u8; f.len()];
        assert!(c.regions[d.region as usize].copy_out(d.offset as usize, &mut got));
        assert!(got == *f, "a frame before the lie was not written whole");
    }
    drop(c);
    // The sending interface still works.
    assert!(s1.link_up() && c1.link_up());
    sw.shutdown();
}

// --- raw control connections ----------------------------------------------

/// A raw control connection ([`hostile::RawClient`]) whose failures panic.
struct Raw(hostile::RawClient);

impl Raw {
    fn connect(path: &Path) -> Raw {
        let (r, h) = hostile::RawClient::connect_hello(path).unwrap();
        assert_eq!(h.max_log2_ring_size, MAX_LOG2_RING);
        Raw(r)
    }
    fn send(&self, m: Msg, fd: Option<i32>) {
        self.0.send(m, fd);
    }
    fn recv(&self) -> Option<Msg> {
        self.0.recv(Duration::from_secs(3))
    }
    /// Expects a disconnect whose reason contains `why`, then hang-up.
    fn expect_disconnect(&self, why: &str) {
        if let Err(e) = self.0.expect_disconnect(why) {
            panic!("{e}");
        }
    }
    fn init(&self, id: u32) {
        assert!(self.0.init(id), "init of interface {id} not acknowledged");
    }
}

#[test]
fn bad_control_messages_are_refused_with_a_reason() {
    let dir = Dir::new("ctl");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server.add_interface(MemifConfig::new("victim", 0)).unwrap();
    let s1 = server.add_interface(MemifConfig::new("good", 1)).unwrap();
    let c1 = MemifPort::client(MemifConfig::new("c1", 1), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s1.link_up() && c1.link_up()));
    let mut s1rx = s1.take_rx(0).unwrap();
    let mut c1rx = c1.take_rx(0).unwrap();

    // The control lies of the kit (hostile.rs; also run against a turnoutd
    // process by examples/hostile_peer.rs), each on a fresh connection.
    let kit = hostile::Kit::new(0).unwrap();
    for lie in hostile::CONTROL_LIES {
        hostile::run_control_lie(&path, &kit, lie).unwrap();
    }

    let region = Region::create("test", 1 << 20).unwrap();
    region.store_u32(0, COOKIE);
    let irq = EventFd::new().unwrap();
    let ring = |flags, index, region, offset, log2| {
        Msg::AddRing(AddRing {
            flags,
            index,
            region,
            offset,
            log2_ring_size: log2,
            private_hdr_size: 0,
        })
    };
    let setup = |r: &Raw| {
        r.init(0);
        r.send(
            Msg::AddRegion(AddRegion {
                index: 0,
                size: 1 << 20,
            }),
            region.raw_fd(),
        );
        assert_eq!(r.recv(), Some(Msg::Ack));
    };

    let r = Raw::connect(&path);
    // The good interface is taken.
    r.send(
        Msg::Init(Init {
            version: VERSION,
            id: 1,
            mode: 0,
            secret: [0; SECRET_SZ],
            name: "x".into(),
        }),
        None,
    );
    r.expect_disconnect("already connected");

    // A valid raw handshake connects; a second init is then refused.
    region.store_u32(4096, COOKIE);
    let r = Raw::connect(&path);
    setup(&r);
    r.send(ring(ADD_RING_FLAG_C2S, 0, 0, 0, 4), Some(irq.fd()));
    assert_eq!(r.recv(), Some(Msg::Ack));
    r.send(ring(0, 0, 0, 4096, 4), Some(irq.fd()));
    assert_eq!(r.recv(), Some(Msg::Ack));
    r.send(Msg::Connect("x".into()), None);
    assert_eq!(r.recv(), Some(Msg::Connected("victim".into())));
    assert!(wait(2000, || s0.link_up()));
    r.send(
        Msg::Init(Init {
            version: VERSION,
            id: 0,
            mode: 0,
            secret: [0; SECRET_SZ],
            name: "x".into(),
        }),
        None,
    );
    r.expect_disconnect("unexpected init message while connected");
    assert!(wait(2000, || !s0.link_up()));

    // A client that just hangs up is counted as such.
    let r = Raw::connect(&path);
    setup(&r);
    drop(r);

    healthy(&s1, &c1, s1rx.as_mut(), c1rx.as_mut(), 9);
    assert!(
        s0.counter("ctrl_errors") >= 14,
        "{:?}",
        s0.backend_counters()
    );
    let sc = server.counters();
    assert!(
        sc.iter().any(|&(n, v)| n == "ctrl_errors" && v >= 5),
        "{sc:?}"
    );
    assert_eq!(
        s1.counter("ctrl_errors"),
        1,
        "only the 'already connected' attempt"
    );
    assert_eq!(s1.counter("disconnects"), 0);
}

/// Mappings of this process whose name contains `tag` (memfd regions show
/// up as `/memfd:NAME (deleted)` in /proc/self/maps).
fn mappings(tag: &str) -> usize {
    std::fs::read_to_string("/proc/self/maps")
        .unwrap()
        .lines()
        .filter(|l| l.contains(tag))
        .count()
}

/// A departed peer's regions are unmapped when it leaves, not when the
/// next peer connects: the transmit producer, which pinned the connection
/// while frames flowed, lets go of it at the disconnect.
#[test]
fn departed_peer_memory_is_unmapped_on_disconnect() {
    let dir = Dir::new("unmap");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server
        .add_interface(MemifConfig::new("unmap-s", 0))
        .unwrap();
    let name = format!("unmap{}", std::process::id());
    let tag = format!("memif-{name}-region");
    let c0 = MemifPort::client(MemifConfig::new(&name, 0), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up() && c0.link_up()));
    let mut c0rx = c0.take_rx(0).unwrap();
    // Frames flow server -> client: the server's producer pins the
    // connection.
    for i in 0..3u8 {
        let f = [i; 200];
        assert!(send(&s0, &f));
        assert_eq!(recv_one(c0rx.as_mut()).as_deref(), Some(&f[..]));
    }
    assert_eq!(mappings(&tag), 2, "the client's and the server's mapping");
    drop(c0rx);
    drop(c0);
    assert!(wait(5000, || !s0.link_up()), "the server saw no disconnect");
    assert!(
        wait(3000, || mappings(&tag) == 0),
        "the departed peer's region is still mapped {} time(s)",
        mappings(&tag)
    );
    // A new peer connects and frames flow again.
    let c1 = MemifPort::client(MemifConfig::new(&name, 0), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up() && c1.link_up()));
    let mut c1rx = c1.take_rx(0).unwrap();
    let f = [9u8; 300];
    assert!(wait(2000, || send(&s0, &f)));
    assert_eq!(recv_one(c1rx.as_mut()).as_deref(), Some(&f[..]));
}

/// A client's regions (turnout-gen's memory, sent to the
/// server) are sealed against shrinking: a server holding the fd cannot
/// truncate them under the client.
#[test]
fn a_clients_regions_cannot_be_shrunk_by_its_peer() {
    let r = Region::create("seal-test", 3 * 4096).unwrap();
    let fd = r.raw_fd().unwrap();
    // SAFETY: plain syscall on a descriptor the region owns.
    let rc = unsafe { libc::ftruncate(fd, 4096) };
    let err = std::io::Error::last_os_error().raw_os_error();
    assert_eq!((rc, err), (-1, Some(libc::EPERM)), "a sealed region shrank");
    // SAFETY: as above.
    let seals = unsafe { libc::fcntl(fd, libc::F_GET_SEALS) };
    assert_eq!(seals & libc::F_SEAL_SHRINK, libc::F_SEAL_SHRINK);
}

/// A client that makes the interrupt eventfd of the server's
/// transmit ring blocking again after handing it over (it shares the file
/// description) and fills its counter. The server's next kick would wait
/// for ever in `write`, holding the worker (here: the test's thread). The
/// server's control thread finds the flag cleared, interrupts the writer
/// (the kick is dropped and counted) and disconnects the client; another
/// interface keeps forwarding.
#[test]
fn a_peer_that_makes_its_interrupt_fd_blocking_cannot_hold_the_worker() {
    let dir = Dir::new("irqblock");
    let (_server, s0, s1, liar, c1) = liar_and_good(&dir);
    let s0 = Arc::new(s0);
    let mut s1rx = s1.take_rx(0).unwrap();
    let mut c1rx = c1.take_rx(0).unwrap();
    healthy(&s1, &c1, s1rx.as_mut(), c1rx.as_mut(), 1);
    // The client's receive ring is the server's transmit ring: the server
    // kicks its eventfd (the client never masked its interrupts).
    let irq = conn_of(&liar).rx[0].irq.fd();
    let max = u64::MAX - 1;
    loop {
        let _ = crate::guard::drain(irq);
        // SAFETY: 8 bytes from a local to the (still non-blocking) eventfd.
        if unsafe { libc::write(irq, &max as *const u64 as *const libc::c_void, 8) } == 8 {
            break;
        }
    }
    // SAFETY: fcntl on a descriptor this process holds; no pointers.
    unsafe {
        let fl = libc::fcntl(irq, libc::F_GETFL);
        libc::fcntl(irq, libc::F_SETFL, fl & !libc::O_NONBLOCK);
    }
    let before = s0.counter("kicks_dropped");
    // The transmit (and its kick) in a thread of its own: without the
    // fix it never returns.
    let (tx, rx) = std::sync::mpsc::channel();
    let s0t = s0.clone();
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let sent = send(&s0t, &[5u8; 100]);
        let _ = tx.send((sent, t0.elapsed()));
    });
    let (sent, took) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the kick still blocks the transmitting thread after 10 s");
    assert!(
        wait(3000, || s0.counter("irq_made_blocking") == 1),
        "not disconnected: {:?}",
        s0.backend_counters()
    );
    // The server's housekeeping looks for a blocking eventfd too: on a busy
    // machine it can find this one, and end the connection, before the
    // thread above sends. Then the send finds the link down and there is
    // no kick to drop; either way the transmit returned.
    if sent {
        assert!(s0.counter("kicks_dropped") > before);
    } else {
        eprintln!("the housekeeping ended the connection before the send");
    }
    assert!(
        wait(3000, || s0.status().last_disconnect.contains("blocking")),
        "{:?}",
        s0.status()
    );
    eprintln!("the blocked kick was interrupted after {took:?}");
    healthy(&s1, &c1, s1rx.as_mut(), c1rx.as_mut(), 2);
    assert_eq!(s1.counter("irq_made_blocking"), 0);
}

/// A receive queue keeps its connection from one burst to the next while
/// frames flow (no reference count per batch), and lets go of it at its
/// first empty burst: an idle queue holds no connection, so a departed
/// peer's region is unmapped with nothing more from the worker; a busy one
/// lets go at its next burst, which sees the link down.
#[test]
fn a_receive_queue_holds_its_connection_only_while_frames_flow() {
    let dir = Dir::new("rxhold");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server
        .add_interface(MemifConfig::new("rxhold-s", 0))
        .unwrap();
    let mut s0rx = s0.take_rx(0).unwrap();
    let mut b = RxBatch::with_capacity(32);
    for (round, idle_first) in [(0u8, true), (1, false)] {
        let name = format!("rxhold{}-{round}", std::process::id());
        let tag = format!("memif-{name}-region");
        let c0 = MemifPort::client(MemifConfig::new(&name, 0), ClientConfig::new(&path)).unwrap();
        assert!(wait(5000, || s0.link_up() && c0.link_up()));
        let f = [round; 100];
        assert!(send(&c0, &f));
        assert_eq!(recv_one(s0rx.as_mut()).as_deref(), Some(&f[..]));
        if idle_first {
            // An empty burst: the queue is idle now.
            assert_eq!(b.receive(&mut *s0rx, 0, 0).received(), 0);
        }
        drop(c0);
        assert!(wait(5000, || !s0.link_up()), "the server saw no disconnect");
        if !idle_first {
            // The queue last had frames and still holds the connection;
            // its next burst sees the link down.
            assert_eq!(b.receive(&mut *s0rx, 0, 0).received(), 0);
        }
        assert!(
            wait(3000, || mappings(&tag) == 0),
            "round {round}: the departed peer's region is still mapped {} time(s)",
            mappings(&tag)
        );
    }
}

/// The race: a disconnect while a reservation is
/// in flight for longer than `release_pins` waits (a preempted worker)
/// leaves the departed connection pinned in the producer. The producer
/// lets go of it at its next look, under the transmit lock; that must not
/// be the last reference (it would unmap and close under the lock): the
/// control thread keeps one and drops it afterwards.
#[test]
fn a_producer_never_drops_the_last_reference_under_its_lock() {
    let dir = Dir::new("lastref");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s0 = server
        .add_interface(MemifConfig::new("lastref-s", 0))
        .unwrap();
    let name = format!("lastref{}", std::process::id());
    let tag = format!("memif-{name}-region");
    let c0 = MemifPort::client(MemifConfig::new(&name, 0), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up() && c0.link_up()));
    let departed = Arc::downgrade(&conn_of(&s0));

    // A reservation in flight on the server's queue: the producer pins
    // the connection and `release_pins` cannot take it.
    // SAFETY: this test is the queue's only sender.
    let mut tx = unsafe { fabric::OwnedTx::new(s0.tx(0)) };
    let f = [7u8; 100];
    let n = tx.slots_for(f.len());
    assert!(wait(2000, || tx.free_slots() >= n));
    let slot = tx.reserve(n);
    tx.write(slot, n, &f);

    // The peer leaves; the server's detach waits out `release_pins` and
    // leaves the pin to the producer.
    drop(c0);
    assert!(
        wait(5000, || s0.counter("disconnects") == 1),
        "the server saw no disconnect"
    );
    // Publish (the lease only borrowed the connection), then the
    // producer's next look follows the disconnect under the lock.
    tx.publish(slot + n as u64);
    let before = super::ring::DROPS_ON_THIS_THREAD.with(|c| c.get());
    assert_eq!(tx.free_slots_quiet(), 0, "no connection: no room");
    let after = super::ring::DROPS_ON_THIS_THREAD.with(|c| c.get());
    assert_eq!(
        after, before,
        "the producer dropped the departed connection's last reference under its lock"
    );
    // The control thread unmaps it soon after.
    assert!(
        wait(3000, || departed.upgrade().is_none()),
        "the departed connection is still held"
    );
    assert!(
        wait(3000, || mappings(&tag) == 0),
        "the departed peer's region is still mapped"
    );
    assert_eq!(s0.shared.retired.len(), 0);
}

/// Frame `seq` of the re-take tests: 64 bytes, the sequence number first.
fn seq_frame(seq: u32) -> [u8; 64] {
    let mut f = [0x5au8; 64];
    f[..4].copy_from_slice(&seq.to_le_bytes());
    f
}

/// Sends frames `seqs` from `tx` into `rx`'s ring (while it has room) and
/// receives bursts of at most 8 from `rx`, appending the sequence numbers
/// received to `got`, until every frame is sent and `got` holds `want`
/// (or 5 s passed: the caller's assertion then says what is missing).
fn pass_through(
    tx: &MemifPort,
    rx: &mut dyn RxQueue,
    seqs: std::ops::Range<u32>,
    got: &mut Vec<u32>,
    want: usize,
) {
    let mut b = RxBatch::with_capacity(8);
    let mut next = seqs.start;
    let t0 = Instant::now();
    while (next < seqs.end || got.len() < want) && t0.elapsed() < Duration::from_secs(5) {
        let sent = next;
        while next < seqs.end && send(tx, &seq_frame(next)) {
            next += 1;
        }
        let burst = b.receive(&mut *rx, 0, 0);
        let n = burst.len();
        got.extend(
            burst
                .pkts()
                .iter()
                .map(|p| u32::from_le_bytes(p.data()[..4].try_into().unwrap())),
        );
        drop(burst);
        if n == 0 && next == sent {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// Receives bursts from `rx` until one is empty, appending the sequence
/// numbers to `got`.
fn drain_seqs(rx: &mut dyn RxQueue, got: &mut Vec<u32>) {
    let mut b = RxBatch::with_capacity(8);
    loop {
        let burst = b.receive(&mut *rx, 0, 0);
        if burst.is_empty() {
            return;
        }
        got.extend(
            burst
                .pkts()
                .iter()
                .map(|p| u32::from_le_bytes(p.data()[..4].try_into().unwrap())),
        );
    }
}

/// A receive queue taken again while its connection is up (a port removed
/// from a switch and added again) continues where the ring is: frames sent
/// before, left in the ring at the hand-over, and sent after are each
/// delivered once, in order, and the receive counter adds up. A fresh
/// connection then starts the queue at index 0 again. The rings (16 slots)
/// have wrapped several times before the hand-over. Both roles receive:
/// `server_receives` picks the direction.
fn retaken_queue_continues(server_receives: bool) {
    let tag = if server_receives {
        "retake-s"
    } else {
        "retake-c"
    };
    let dir = Dir::new(tag);
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let small = |name: &str| {
        let mut c = MemifConfig::new(name, 0);
        c.log2_ring_size = 4;
        c
    };
    let mut s0 = server.add_interface(small("retake-s")).unwrap();
    let mut c0 = MemifPort::client(small("retake-c"), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up() && c0.link_up()));
    let (tx, rxp) = if server_receives {
        (&c0, &s0)
    } else {
        (&s0, &c0)
    };
    let mut got = Vec::new();

    // 40 frames through the first holder: the ring wraps.
    let mut rx1 = rxp.take_rx(0).unwrap();
    pass_through(tx, rx1.as_mut(), 0..40, &mut got, 40);
    assert_eq!(got, (0..40).collect::<Vec<_>>(), "first holder");
    // 10 more, of which the holder takes one burst of 4; it lets go of the
    // queue with 6 still in the ring.
    for s in 40..50 {
        assert!(send(tx, &seq_frame(s)), "frame {s} did not fit the ring");
    }
    let mut b4 = RxBatch::with_capacity(4);
    assert!(wait(3000, || {
        let burst = b4.receive(&mut *rx1, 0, 0);
        got.extend(
            burst
                .pkts()
                .iter()
                .map(|p| u32::from_le_bytes(p.data()[..4].try_into().unwrap())),
        );
        !burst.is_empty()
    }));
    assert_eq!(
        got,
        (0..44).collect::<Vec<_>>(),
        "the burst before the hand-over"
    );
    assert!(rxp.take_rx(0).is_none(), "the queue is taken");
    drop(rx1);

    // The next holder: the 6 left behind, then 40 more, each once.
    let mut rx2 = rxp.take_rx(0).expect("the queue is free again");
    pass_through(tx, rx2.as_mut(), 50..90, &mut got, 90);
    // Anything handed out twice would be in the ring now: look again.
    drain_seqs(rx2.as_mut(), &mut got);
    assert_eq!(got, (0..90).collect::<Vec<_>>(), "after the hand-over");
    assert_eq!(rxp.counter("rx_frames"), 90, "the receive counter");
    for p in [&s0, &c0] {
        assert_eq!(p.counter("violations"), 0, "{:?}", p.status());
        assert_eq!(p.counter("disconnects"), 0, "{:?}", p.status());
        assert!(p.link_up());
    }

    // Taken over once more, then the connection ends and a fresh one comes:
    // the holder starts that one at 0.
    drop(rx2);
    let mut rx3 = rxp.take_rx(0).expect("the queue is free again");
    // It starts on the old connection (where the last holder stopped)...
    drain_seqs(rx3.as_mut(), &mut got);
    assert_eq!(got.len(), 90);
    if server_receives {
        drop(c0);
        assert!(wait(5000, || !s0.link_up()), "the server saw no disconnect");
        c0 = MemifPort::client(small("retake-c2"), ClientConfig::new(&path)).unwrap();
    } else {
        drop(s0);
        assert!(wait(5000, || !c0.link_up()), "the client saw no disconnect");
        s0 = server.add_interface(small("retake-s2")).unwrap();
    }
    assert!(wait(5000, || s0.link_up() && c0.link_up()), "no reconnect");
    let (tx, rxp) = if server_receives {
        (&c0, &s0)
    } else {
        (&s0, &c0)
    };
    let mut fresh = Vec::new();
    pass_through(tx, rx3.as_mut(), 0..30, &mut fresh, 30);
    drain_seqs(rx3.as_mut(), &mut fresh);
    assert_eq!(
        fresh,
        (0..30).collect::<Vec<_>>(),
        "on the fresh connection"
    );
    assert_eq!(rxp.counter("violations"), 0, "{:?}", rxp.status());
    drop(rx3);
}

#[test]
fn a_server_receive_queue_taken_again_continues_where_the_ring_is() {
    retaken_queue_continues(true);
}

#[test]
fn a_client_receive_queue_taken_again_continues_where_the_ring_is() {
    retaken_queue_continues(false);
}

/// Minor page faults of the calling thread so far.
fn thread_minflt() -> i64 {
    // SAFETY: getrusage fills a plain struct we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer; RUSAGE_THREAD is this thread.
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut ru) }, 0);
    ru.ru_minflt as i64
}

/// The first lap of a fresh connection's rings takes no page fault on the
/// data path, in either role: each side maps the region's pages in when
/// it connects (`Region::prefault`), not at the first frame through each
/// buffer page of its own mapping. Without it, 1024 frames each way (two
/// 2 KiB buffers a page) took about 2048 faults here — on a nested VM
/// ~5 µs each, in the switch's worker and in turnout-gen, for the ring's
/// whole first lap (docs/memif.md, "Prefaulted regions").
#[test]
fn the_first_lap_of_a_fresh_connection_takes_no_page_fault() {
    let dir = Dir::new("prefault");
    let path = dir.0.join("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let cfg = |name: &str| {
        let mut c = MemifConfig::new(name, 0);
        c.log2_ring_size = 10;
        c
    };
    let s0 = server.add_interface(cfg("prefault-s")).unwrap();
    let c0 = MemifPort::client(cfg("prefault-c"), ClientConfig::new(&path)).unwrap();
    assert!(wait(5000, || s0.link_up() && c0.link_up()));
    let mut srx = s0.take_rx(0).unwrap();
    let mut crx = c0.take_rx(0).unwrap();
    let mut b = RxBatch::with_capacity(8);
    let mut sum = 0u64;
    // One frame each way first: this thread's code and stack pages.
    let mut one_each_way = |seq: u32, b: &mut RxBatch, sum: &mut u64| {
        for (tx, rx) in [(&c0, &mut srx), (&s0, &mut crx)] {
            assert!(
                send(tx, &seq_frame(seq)),
                "frame {seq} did not fit the ring"
            );
            let t0 = Instant::now();
            loop {
                let burst = b.receive(&mut **rx, 0, 0);
                let n = burst.len();
                *sum += burst.pkts().iter().map(|p| p.data()[0] as u64).sum::<u64>();
                drop(burst);
                if n > 0 {
                    break;
                }
                assert!(
                    t0.elapsed() < Duration::from_secs(5),
                    "frame {seq} not received"
                );
            }
        }
    };
    one_each_way(0, &mut b, &mut sum);
    let f0 = thread_minflt();
    for seq in 1..1024 {
        one_each_way(seq, &mut b, &mut sum);
    }
    let faults = thread_minflt() - f0;
    assert!(
        faults < 64,
        "{faults} page faults on the data path for 1023 frames each way (sum {sum})"
    );
    assert_eq!(s0.counter("rx_frames"), 1024);
    assert_eq!(c0.counter("rx_frames"), 1024);
}

/// The server's link is up by the time its client reads `connected`: the
/// client starts sending then, and a server control thread preempted right
/// after the reply (a real-time peer on its CPU) must not leave the link
/// down for that long (every frame a link_down drop). The server here
/// stops after sending `connected` until the test has looked.
#[test]
fn server_link_is_up_when_client_reads_connected() {
    let dir = Dir::new("upfirst");
    let path = dir.0.join("memif.sock");
    let gate = Arc::new(std::sync::Barrier::new(2));
    let mut cfg = ServerConfig::new(&path);
    cfg.after_connected = Some(gate.clone());
    let server = MemifServer::bind(cfg).unwrap();
    let s0 = server.add_interface(MemifConfig::new("s0", 0)).unwrap();
    let c0 = MemifPort::client(MemifConfig::new("c0", 0), ClientConfig::new(&path)).unwrap();
    let client_up = wait(10_000, || c0.link_up());
    let server_up = s0.link_up();
    if client_up {
        gate.wait(); // let the server's control thread go on
    }
    assert!(client_up, "client did not connect");
    assert!(
        server_up,
        "server link still down when its client read connected"
    );
    let mut s0rx = s0.take_rx(0).unwrap();
    assert!(send(&c0, &[9u8; 64]));
    assert_eq!(recv_one(s0rx.as_mut()).as_deref(), Some(&[9u8; 64][..]));
    let c = s0.backend_counters();
    let get = |k: &str| c.iter().find(|(n, _)| *n == k).map(|(_, v)| *v);
    assert_eq!((get("connects"), get("disconnects")), (Some(1), Some(0)));
}
