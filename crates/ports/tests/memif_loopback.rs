//! Our memif client against our memif server, in one process.

mod memif_common;

use std::time::Duration;

use fabric::{Port, RxBatch};
use memif_common::*;
use ports::memif::{wait_notify, ClientConfig, MemifConfig, MemifPort, MemifServer, ServerConfig};

const T: Duration = Duration::from_secs(5);

struct Pair {
    _dir: TempDir,
    _server: MemifServer,
    s: MemifPort,
    c: MemifPort,
}

fn pair(tag: &str, scfg: MemifConfig, ccfg: MemifConfig) -> Pair {
    let dir = TempDir::new(tag);
    let server = MemifServer::bind(ServerConfig::new(dir.path("memif.sock"))).unwrap();
    let s = server.add_interface(scfg).unwrap();
    let c = MemifPort::client(ccfg, ClientConfig::new(dir.path("memif.sock"))).unwrap();
    assert!(
        wait_until(T, || s.link_up() && c.link_up()),
        "no link: {:?} / {:?}",
        s.status(),
        c.status()
    );
    Pair {
        _dir: dir,
        _server: server,
        s,
        c,
    }
}

const SIZES: &[usize] = &[
    60, 61, 64, 65, 128, 1500, 1518, 2047, 2048, 2049, 4095, 4096, 4097, 8191, 8999, 9000,
];

fn round_trip(from: &MemifPort, to: &MemifPort) {
    let mut rx = to.take_rx(0).unwrap();
    let frames: Vec<Vec<u8>> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &l)| frame(l, i as u32))
        .collect();
    for f in &frames {
        assert!(send(from, 0, f), "send {} B", f.len());
    }
    let got = recv(rx.as_mut(), frames.len(), T);
    assert_eq!(got.len(), frames.len());
    for (g, f) in got.iter().zip(&frames) {
        assert_eq!(g.len(), f.len());
        assert!(g == f, "frame of {} B corrupted", f.len());
    }
}

#[test]
fn client_to_server_60_to_9000_bytes_intact() {
    let p = pair("c2s", MemifConfig::new("s0", 0), MemifConfig::new("c0", 0));
    round_trip(&p.c, &p.s);
    assert!(p.s.counter("rx_chained") == 7);
    assert_eq!(p.s.counter("violations"), 0);
}

#[test]
fn server_to_client_60_to_9000_bytes_intact() {
    // The server copies the large frames into the client's buffers with
    // streamed and with ordinary stores (a worker's copy chooser picks one
    // per thread, `fabric::copymode`): the same bytes either way.
    for memif_streams in [true, false] {
        fabric::sys::set_streaming([memif_streams, false]);
        let before = fabric::sys::large_copies()[fabric::sys::CopyInto::Memif as usize];
        let p = pair("s2c", MemifConfig::new("s0", 0), MemifConfig::new("c0", 0));
        round_trip(&p.s, &p.c);
        assert!(p.c.counter("rx_chained") == 7);
        assert_eq!(p.c.counter("violations"), 0);
        let large = fabric::sys::large_copies()[fabric::sys::CopyInto::Memif as usize] - before;
        assert!(large > 0, "no large frame copied on this thread");
    }
}

#[test]
fn small_buffers_and_rings_wrap_many_times() {
    // 256-byte buffers, 16-slot rings: a 9000 B frame is a 36-descriptor
    // chain; 70 000 frames wrap the 16-bit ring indexes.
    let mut sc = MemifConfig::new("s0", 0);
    sc.buffer_size = 256;
    sc.log2_ring_size = 6;
    let mut cc = sc.clone();
    cc.name = "c0".into();
    let p = pair("wrap", sc, cc);
    for (from, to) in [(&p.c, &p.s), (&p.s, &p.c)] {
        let mut rx = to.take_rx(0).unwrap();
        let mut b = RxBatch::with_capacity(64);
        let (mut sent, mut got) = (0u32, 0u32);
        let total = 70_000u32;
        let t0 = std::time::Instant::now();
        while got < total && t0.elapsed() < Duration::from_secs(20) {
            while sent < total {
                let len = if sent % 997 == 0 {
                    9000
                } else {
                    60 + (sent as usize * 7) % 300
                };
                if !send(from, 0, &frame(len, sent)) {
                    break;
                }
                sent += 1;
            }
            let burst = b.receive(&mut *rx, 0, 0);
            for pkt in burst.pkts().iter() {
                let len = if got % 997 == 0 {
                    9000
                } else {
                    60 + (got as usize * 7) % 300
                };
                assert_eq!(pkt.data(), &frame(len, got)[..], "frame {got}");
                got += 1;
            }
            drop(burst);
        }
        assert_eq!(got, total);
    }
    assert_eq!(p.s.counter("violations") + p.c.counter("violations"), 0);
}

#[test]
fn interrupt_mode_wakes_and_poll_mode_masks() {
    let p = pair("irq", MemifConfig::new("s0", 0), MemifConfig::new("c0", 0));
    for (from, to) in [(&p.c, &p.s), (&p.s, &p.c)] {
        let mut rx = to.take_rx(0).unwrap();
        let fd = rx.notify_fd().unwrap();
        // Interrupt mode: nothing waiting, then a frame wakes us.
        let mut b = RxBatch::with_capacity(32);
        drop(b.receive(&mut *rx, 0, 0)); // adopt the connection
        assert!(!rx.set_notify(true), "nothing should be waiting");
        assert!(!wait_notify(fd, 0));
        assert_eq!(rx.peek(), Some(false), "peek: an empty ring");
        let kicks = from.counter("tx_kicks");
        assert!(send(from, 0, &frame(100, 1)));
        assert!(wait_notify(fd, 1000), "no wake-up in interrupt mode");
        assert_eq!(rx.peek(), Some(true), "peek: a frame waits");
        assert_eq!(from.counter("tx_kicks"), kicks + 1);
        rx.ack_notify();
        assert!(!wait_notify(fd, 0), "ack_notify did not clear");
        // Re-check: enabling while a frame waits reports it.
        assert!(rx.set_notify(true));
        assert_eq!(b.receive(&mut *rx, 0, 0).received(), 1);
        assert_eq!(rx.peek(), Some(false), "peek: taken");
        // Poll mode: the sender sees the mask and does not kick.
        rx.set_notify(false);
        let kicks = from.counter("tx_kicks");
        for i in 0..10 {
            assert!(send(from, 0, &frame(64, i)));
        }
        assert!(!wait_notify(fd, 50), "woken in poll mode");
        assert_eq!(from.counter("tx_kicks"), kicks);
        assert_eq!(recv(rx.as_mut(), 10, T).len(), 10);
    }
}

#[test]
fn several_queue_pairs_are_independent() {
    let mut sc = MemifConfig::new("s0", 3);
    sc.queues = 3;
    let mut cc = sc.clone();
    cc.name = "c0".into();
    let p = pair("mq", sc, cc);
    assert_eq!(p.s.status().rings.0, 3);
    for q in 0..3u16 {
        let mut srx = p.s.take_rx(q).unwrap();
        let mut crx = p.c.take_rx(q).unwrap();
        assert!(send(&p.c, q, &frame(200 + q as usize, q as u32)));
        assert!(send(&p.s, q, &frame(300 + q as usize, q as u32)));
        assert_eq!(
            recv(srx.as_mut(), 1, T)[0],
            frame(200 + q as usize, q as u32)
        );
        assert_eq!(
            recv(crx.as_mut(), 1, T)[0],
            frame(300 + q as usize, q as u32)
        );
    }
    assert!(
        p.s.take_rx(0).is_some(),
        "dropped rx queue can be taken again"
    );
    let _held = p.s.take_rx(1).unwrap();
    assert!(p.s.take_rx(1).is_none(), "rx queue handed out twice");
    assert!(p.s.take_rx(3).is_none());
}

#[test]
fn batch_publish_and_full_ring() {
    let mut sc = MemifConfig::new("s0", 0);
    sc.log2_ring_size = 4;
    let mut cc = sc.clone();
    cc.name = "c0".into();
    let p = pair("full", sc, cc);
    let frames: Vec<Vec<u8>> = (0..40).map(|i| frame(100, i)).collect();
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    // The ring holds 16 slots: only 16 frames fit until the server reads.
    assert_eq!(send_batch(&p.c, 0, &refs), 16);
    assert_eq!(send_batch(&p.c, 0, &refs[16..]), 0);
    let mut rx = p.s.take_rx(0).unwrap();
    let got = recv(rx.as_mut(), 16, T);
    assert_eq!(got.len(), 16);
    assert_eq!(send_batch(&p.c, 0, &refs[16..]), 16);
    assert_eq!(recv(rx.as_mut(), 16, T)[0], frames[16]);
}

#[test]
fn oversize_frames_are_refused_on_send() {
    let p = pair("big", MemifConfig::new("s0", 0), MemifConfig::new("c0", 0));
    assert_eq!(p.c.tx(0).slots_for(9216), 5);
    assert_eq!(p.c.tx(0).slots_for(9217), 0);
    assert_eq!(p.c.tx(0).slots_for(0), 1);
    assert_eq!(p.c.tx(0).slots_for(2048), 1);
    assert_eq!(p.c.tx(0).slots_for(2049), 2);
}

#[test]
fn client_reconnects_with_fresh_memory_and_server_sees_link_changes() {
    let dir = TempDir::new("recon");
    let path = dir.path("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s = server.add_interface(MemifConfig::new("s0", 7)).unwrap();
    let mut srx = s.take_rx(0).unwrap();
    for round in 0..3u32 {
        let c = MemifPort::client(MemifConfig::new("c0", 7), ClientConfig::new(&path)).unwrap();
        assert!(
            wait_until(T, || s.link_up() && c.link_up()),
            "round {round}"
        );
        // The worker keeps its rx queue across connections.
        assert!(send(&c, 0, &frame(1000, round)));
        assert_eq!(recv(srx.as_mut(), 1, T), vec![frame(1000, round)]);
        let mut crx = c.take_rx(0).unwrap();
        assert!(send(&s, 0, &frame(3000, round)));
        assert_eq!(recv(crx.as_mut(), 1, T), vec![frame(3000, round)]);
        drop(crx);
        drop(c); // clean disconnect
        assert!(
            wait_until(T, || !s.link_up()),
            "server did not see the disconnect"
        );
        let mut b = RxBatch::with_capacity(32);
        assert_eq!(
            b.receive(&mut *srx, 0, 0).received(),
            0,
            "burst while disconnected"
        );
        assert_eq!(s.counter("connects"), round as u64 + 1);
        assert!(
            s.status().last_disconnect.contains("client shutting down"),
            "{:?}",
            s.status()
        );
    }
    assert_eq!(s.counter("disconnects"), 3);
    // The socket file is private.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    drop(s);
    drop(server);
    assert!(!path.exists(), "socket file left behind");
}

#[test]
fn secret_and_unknown_id_are_refused() {
    let dir = TempDir::new("secret");
    let path = dir.path("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let mut sc = MemifConfig::new("s0", 1);
    sc.secret = Some("open sesame".into());
    let s = server.add_interface(sc).unwrap();
    let mut wrong = MemifConfig::new("c0", 1);
    wrong.secret = Some("open barley".into());
    let c = MemifPort::client(wrong, ClientConfig::new(&path)).unwrap();
    assert!(
        wait_until(T, || c
            .status()
            .last_disconnect
            .contains("incorrect secret")),
        "{:?}",
        c.status()
    );
    assert!(!s.link_up());
    assert!(s.counter("ctrl_errors") >= 1);
    drop(c);
    let c = MemifPort::client(MemifConfig::new("c0", 2), ClientConfig::new(&path)).unwrap();
    assert!(
        wait_until(T, || c.status().last_disconnect.contains("ID 2 not found")),
        "{:?}",
        c.status()
    );
    drop(c);
    let mut right = MemifConfig::new("c0", 1);
    right.secret = Some("open sesame".into());
    let c = MemifPort::client(right, ClientConfig::new(&path)).unwrap();
    assert!(wait_until(T, || s.link_up() && c.link_up()));
    assert!(server
        .counters()
        .iter()
        .any(|&(n, v)| n == "ctrl_errors" && v >= 1));
    assert!(
        server.add_interface(MemifConfig::new("dup", 1)).is_err(),
        "duplicate id accepted"
    );
    assert!(
        s.link_up(),
        "failed duplicate add disturbed the existing interface"
    );
}

#[test]
fn config_errors_name_the_field() {
    let mut c = MemifConfig::new("x", 0);
    c.log2_ring_size = 15;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("log2_ring_size"));
    let mut c = MemifConfig::new("x", 0);
    c.buffer_size = 256;
    c.log2_ring_size = 4;
    c.max_chain = 64;
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("max_frame_b"));
    let mut c = MemifConfig::new("x", 0);
    c.secret = Some("x".repeat(30));
    assert!(c.validate().unwrap_err().to_string().contains("secret"));
    let mut c = MemifConfig::new("x", 0);
    c.max_chain = 2;
    assert!(c.validate().unwrap_err().to_string().contains("max_chain"));
}

#[test]
fn a_dead_connection_stops_waking_the_worker() {
    let dir = TempDir::new("deadwake");
    let path = dir.path("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let s = server.add_interface(MemifConfig::new("s0", 0)).unwrap();
    let c = MemifPort::client(MemifConfig::new("c0", 0), ClientConfig::new(&path)).unwrap();
    assert!(wait_until(T, || s.link_up() && c.link_up()));
    let mut rx = s.take_rx(0).unwrap();
    let fd = rx.notify_fd().unwrap();
    let mut b = RxBatch::with_capacity(32);
    drop(b.receive(&mut *rx, 0, 0));
    assert!(send(&s, 0, &frame(64, 0))); // our transmit queue now pins this connection
    assert!(!rx.set_notify(true));
    assert!(send(&c, 0, &frame(64, 1)));
    assert!(wait_notify(fd, 1000), "no wake-up");
    drop(c); // the peer goes away with a kick pending
    assert!(wait_until(T, || !s.link_up()));
    assert!(
        !wait_notify(fd, 100),
        "the dead connection's pending kick still wakes the worker"
    );
}

#[test]
fn rx_frames_add_up_over_queues_owned_by_different_threads() {
    // Each receive queue counts its own frames (one writer: the queue's
    // owner, here a thread each, as two workers); `rx_frames` is their
    // sum.
    let mut sc = MemifConfig::new("s0", 0);
    sc.queues = 2;
    let mut cc = MemifConfig::new("c0", 0);
    cc.queues = 2;
    let p = pair("rxframes", sc, cc);
    const PER: usize = 5000;
    // Sends `want` 64 B frames to the server's queue `q` and receives them
    // on `rx`; returns how many arrived before the deadline.
    let run = |q: u16, rx: &mut dyn fabric::RxQueue, want: usize| -> usize {
        let f = frame(64, q as u32);
        let (mut sent, mut got) = (0usize, 0usize);
        let t0 = std::time::Instant::now();
        while got < want && t0.elapsed() < Duration::from_secs(30) {
            let chunk: Vec<&[u8]> = (0..(want - sent).min(64)).map(|_| &f[..]).collect();
            sent += send_batch(&p.c, q, &chunk);
            got += recv(rx, (sent - got).min(1), Duration::from_millis(100)).len();
        }
        got
    };
    std::thread::scope(|t| {
        let threads: Vec<_> = (0..2u16)
            .map(|q| {
                let run = &run;
                let s = &p.s;
                t.spawn(move || {
                    let mut rx = s.take_rx(q).unwrap();
                    run(q, rx.as_mut(), PER)
                })
            })
            .collect();
        for th in threads {
            assert_eq!(th.join().unwrap(), PER);
        }
    });
    assert_eq!(p.s.counter("rx_frames"), 2 * PER as u64);
    assert_eq!(p.s.counter("violations"), 0);
}

/// A template of `len` bytes for `Templates`.
fn template(len: usize) -> Vec<u8> {
    frame(len, 0)
}

#[test]
fn a_client_writes_frames_in_place_and_they_arrive_exactly() {
    // A 256-slot ring; four sizes per pattern: a slot gets the same
    // template on every lap (patched) unless a copied burst passed
    // through it since.
    let mut sc = MemifConfig::new("s0", 0);
    sc.log2_ring_size = 8;
    let mut cc = sc.clone();
    cc.name = "c0".into();
    let p = pair("inplace", sc, cc);
    assert!(p.c.tx(0).fills_in_place());
    assert!(!p.s.tx(0).fills_in_place(), "a server writes where offered");
    let mut rx = p.s.take_rx(0).unwrap();
    let mut t = Templates::new(&[64, 1518, 200, 64], template);
    assert_eq!(
        pump_in_place(p.c.tx(0), rx.as_mut(), &mut t, 20_000, 7),
        (20_000, 0)
    );
    assert!(
        t.patched > 10_000,
        "patched {} whole {}",
        t.patched,
        t.whole
    );
    assert!(t.whole > 1000, "patched {} whole {}", t.patched, t.whole);
    // Three sizes: a slot's template changes on every lap (256 = 1 mod
    // 3), so every frame is written whole, and still arrives exactly.
    // (The first lap may find the last pattern's templates.)
    t.sizes = vec![64, 1518, 200];
    assert_eq!(
        pump_in_place(p.c.tx(0), rx.as_mut(), &mut t, 256, 1000),
        (256, 0)
    );
    let patched = t.patched;
    assert_eq!(
        pump_in_place(p.c.tx(0), rx.as_mut(), &mut t, 5000, 1000),
        (5000, 0)
    );
    assert_eq!(t.patched, patched);
    // A frame longer than the buffer is not written: counted as refused,
    // published empty; the frames around it arrive exactly.
    t.sizes = vec![64];
    t.too_long = 10;
    let (got, refused) = pump_in_place(p.c.tx(0), rx.as_mut(), &mut t, 1000, 1000);
    assert_eq!((got, refused), (1000, 100));
    assert_eq!(t.skipped, 0);
    assert_eq!(p.s.counter("violations"), 0);
}

#[test]
fn a_reconnected_client_writes_its_fresh_buffers_whole() {
    // Fresh memory on each connection: what the last one's buffers held
    // is not assumed of the new one's.
    let dir = TempDir::new("inplrec");
    let path = dir.path("memif.sock");
    let server = MemifServer::bind(ServerConfig::new(&path)).unwrap();
    let mut sc = MemifConfig::new("s0", 3);
    sc.log2_ring_size = 6;
    let s = server.add_interface(sc.clone()).unwrap();
    let mut srx = s.take_rx(0).unwrap();
    let mut t = Templates::new(&[1518], template);
    for round in 0..2 {
        let mut cc = sc.clone();
        cc.name = "c0".into();
        let c = MemifPort::client(cc, ClientConfig::new(&path)).unwrap();
        assert!(
            wait_until(T, || s.link_up() && c.link_up()),
            "round {round}"
        );
        let whole = t.whole;
        assert_eq!(
            pump_in_place(c.tx(0), srx.as_mut(), &mut t, 640, 1000),
            (640, 0)
        );
        // the first lap of 64 slots whole, the nine after it patched
        assert_eq!(t.whole - whole, 64, "round {round}");
        drop(c);
        assert!(wait_until(T, || !s.link_up()), "round {round}");
    }
    assert_eq!(t.patched, 2 * 576);
}
