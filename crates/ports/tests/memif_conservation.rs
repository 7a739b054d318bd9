//! Conservation at the port edge through real backends: frames sent into a
//! switch of two memif ports and a pipe, by their peers, with two workers.
//! Every frame the switch received is delivered to a peer or counted under
//! one drop reason (tx_full from rings the peers do not drain, oversize,
//! hairpin, no_port), and tx_packets is exactly what the peers received.
//! Each kind of drop is caused by the traffic itself, not by the timing of
//! the host: the peers drain only after the switch has forwarded or
//! dropped everything sent so far.

mod memif_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{
    pipe, Ctx, DropReason, Logic, PipeConfig, Pkts, Port, PortId, Switch, SwitchConfig, Verdict,
};
use memif_common::*;
use ports::memif::{ClientConfig, MemifConfig, MemifPort, MemifServer, ServerConfig};

const T: Duration = Duration::from_secs(10);

/// The destination port is byte 14 of the frame.
struct ToByte;

impl Logic for ToByte {
    fn name(&self) -> &'static str {
        "to-byte"
    }
    fn classify(&self, _: &Ctx, _: PortId, pkts: &mut Pkts, v: &mut [Verdict]) {
        for (p, v) in pkts.iter().zip(v.iter_mut()) {
            *v = Verdict::Port(p.data()[14] as PortId);
        }
    }
}

fn frame(to: u8, len: usize, seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f[14] = to;
    f[15..19].copy_from_slice(&seq.to_be_bytes());
    f
}

/// Drains every peer receive queue once; returns frames received.
fn drain(
    rxs: &mut [Box<dyn fabric::RxQueue>],
    pp: &mut fabric::PipePeer,
    batch: &mut fabric::RxBatch,
) -> u64 {
    let mut n = 0;
    for rx in rxs.iter_mut() {
        n += batch.receive(&mut **rx, 0, 0).received() as u64;
    }
    n + pp.recv(0, usize::MAX, |_| {}) as u64
}

/// The switch's totals over its ports: (received, transmitted, dropped for
/// any reason).
fn totals(sw: &Switch) -> (u64, u64, u64) {
    let st = sw.port_stats();
    let rx = st.iter().map(|p| p.rx_packets).sum::<u64>();
    let tx = st.iter().map(|p| p.tx_packets).sum::<u64>();
    let drops = st
        .iter()
        .flat_map(|p| p.drops.iter().map(|d| d.1))
        .sum::<u64>();
    (rx, tx, drops)
}

/// Waits (up to `T`) until the switch has received the `sent_in` frames and
/// transmitted or dropped each: its peers' rings then hold all they will.
fn settle(sw: &Switch, sent_in: u64) {
    let deadline = Instant::now() + T;
    while Instant::now() < deadline {
        let (rx, tx, drops) = totals(sw);
        if rx == sent_in && rx == tx + drops {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

#[test]
fn memif_and_pipe_ports_conserve_frames() {
    let dir = TempDir::new("conserve");
    let server = MemifServer::bind(ServerConfig::new(dir.path("memif.sock"))).unwrap();
    let mut peers = Vec::new();
    let sw = Switch::new(
        SwitchConfig {
            workers: vec![None, None],
            ..SwitchConfig::default()
        },
        Box::new(ToByte),
    )
    .unwrap();
    // Ports 0 and 1: memif (small rings, so an undrained peer fills up).
    for i in 0..2u32 {
        let mut scfg = MemifConfig::new(format!("s{i}"), i);
        scfg.log2_ring_size = 6;
        let s = server.add_interface(scfg).unwrap();
        let mut ccfg = MemifConfig::new(format!("c{i}"), i);
        ccfg.log2_ring_size = 6;
        let c = MemifPort::client(ccfg, ClientConfig::new(dir.path("memif.sock"))).unwrap();
        assert!(wait_until(T, || s.link_up() && c.link_up()), "no link {i}");
        sw.add_port(&format!("m{i}"), Arc::new(s), None).unwrap();
        peers.push(c);
    }
    // Port 2: a pipe of 2 KiB slots (jumbo frames to it are oversize).
    let (p, mut pp) = pipe(
        "p",
        PipeConfig {
            ring_slots: 64,
            ..PipeConfig::default()
        },
    )
    .unwrap();
    sw.add_port("p", Arc::new(p), None).unwrap();
    let mut rxs: Vec<_> = peers.iter().map(|c| c.take_rx(0).unwrap()).collect();
    let mut batch = fabric::RxBatch::with_capacity(256);

    // Frames: from each peer to every port id 0..4 (4 does not exist), of
    // 60..9000 bytes (memif chains above 2048, the pipe refuses them).
    let mut sent_in = 0u64;
    let mut got_out = 0u64;
    let mut seq = 0u32;
    for round in 0..40 {
        for from in 0..3usize {
            let mut frames = Vec::new();
            for k in 0..24usize {
                let to = ((k + round) % 5) as u8;
                let len = [60, 64, 300, 1514, 2100, 9000][(k + from + round) % 6];
                frames.push(frame(to, len, seq));
                seq += 1;
            }
            let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
            // Everything goes in (the switch drains the peers' rings).
            let mut off = 0;
            let t0 = Instant::now();
            while off < refs.len() && t0.elapsed() < T {
                off += match from {
                    0 | 1 => send_batch(&peers[from], 0, &refs[off..]),
                    _ => pp.send(0, &refs[off..]),
                };
            }
            assert_eq!(off, refs.len(), "the switch stopped taking frames");
            sent_in += off as u64;
        }
        // Drain only every eighth round: the rings fill in between (76 to
        // 80 frames to each memif ring of 64 per eight rounds), once the
        // switch has forwarded all it was sent: on a loaded host too, where
        // a switch lagging behind its senders would otherwise write part of
        // them after the drain, into emptied rings.
        if round % 8 == 7 {
            settle(&sw, sent_in);
            got_out += drain(&mut rxs, &mut pp, &mut batch);
        }
    }

    // Wait until every frame sent in is accounted for.
    let deadline = Instant::now() + T;
    let (mut rx, mut tx, mut drops);
    loop {
        got_out += drain(&mut rxs, &mut pp, &mut batch);
        (rx, tx, drops) = totals(&sw);
        if (rx == sent_in && rx == tx + drops && tx == got_out) || Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let st = sw.port_stats();
    let by = |r: DropReason| -> u64 {
        st.iter()
            .flat_map(|p| p.drops.iter())
            .filter(|d| d.0 == r.name())
            .map(|d| d.1)
            .sum()
    };
    assert_eq!(rx, sent_in, "received by the switch vs sent by the peers");
    assert_eq!(rx, tx + drops, "received = sent + drops ({:?})", st);
    assert_eq!(tx, got_out, "tx_packets vs frames the peers received");
    // Every kind of drop the traffic was built to cause happened.
    for r in [
        DropReason::Hairpin,
        DropReason::NoPort,
        DropReason::Oversize,
        DropReason::TxFull,
    ] {
        assert!(by(r) > 0, "no {} drop: {:?}", r.name(), st);
    }
    assert!(got_out > 0);
    sw.shutdown();
    drop(rxs);
    drop(peers);
}

/// A memif port removed from the switch and added again (the same port,
/// its connection up all along: its receive queue is taken again by a new
/// holder) delivers every frame once: those forwarded before, those its
/// peer sent while it was out of the switch (left in the ring), and those
/// after. The ring (16 slots) has wrapped before the port is removed.
#[test]
fn a_memif_port_added_again_delivers_each_frame_once() {
    let dir = TempDir::new("readd");
    let server = MemifServer::bind(ServerConfig::new(dir.path("memif.sock"))).unwrap();
    let sw = Switch::new(
        SwitchConfig {
            workers: vec![None],
            ..SwitchConfig::default()
        },
        Box::new(ToByte),
    )
    .unwrap();
    let (p, mut pp) = pipe("p", PipeConfig::default()).unwrap();
    let pid = sw.add_port("p", Arc::new(p), None).unwrap();
    let mut scfg = MemifConfig::new("readd-s", 0);
    scfg.log2_ring_size = 4;
    let s: Arc<dyn Port> = Arc::new(server.add_interface(scfg).unwrap());
    let mut ccfg = MemifConfig::new("readd-c", 0);
    ccfg.log2_ring_size = 4;
    let c = MemifPort::client(ccfg, ClientConfig::new(dir.path("memif.sock"))).unwrap();
    assert!(wait_until(T, || s.link_up() && c.link_up()), "no link");
    sw.add_port("m", s.clone(), None).unwrap();

    let mut got: Vec<u32> = Vec::new();
    let collect = |pp: &mut fabric::PipePeer, got: &mut Vec<u32>| {
        pp.recv(0, usize::MAX, |f| {
            got.push(u32::from_be_bytes(f[15..19].try_into().unwrap()))
        });
    };
    // Sends `seqs` to the pipe port through the switch (waiting for room
    // in the 16-slot ring while the switch drains it), collecting.
    let pass = |seqs: std::ops::Range<u32>, got: &mut Vec<u32>, pp: &mut fabric::PipePeer| {
        let deadline = Instant::now() + T;
        for seq in seqs {
            while !send(&c, 0, &frame(pid as u8, 64, seq)) {
                assert!(Instant::now() < deadline, "frame {seq} found no room");
                collect(pp, got);
                std::thread::sleep(Duration::from_micros(200));
            }
        }
    };
    pass(0..40, &mut got, &mut pp);
    assert!(wait_until(T, || {
        collect(&mut pp, &mut got);
        got.len() >= 40
    }));
    sw.remove_port("m").unwrap();
    // Out of the switch: these wait in the ring.
    pass(40..50, &mut got, &mut pp);
    sw.add_port("m", s.clone(), None).unwrap();
    pass(50..90, &mut got, &mut pp);
    let all = wait_until(T, || {
        collect(&mut pp, &mut got);
        got.len() >= 90
    });
    assert!(all, "delivered {} of 90: {got:?}", got.len());
    // Anything delivered twice would have come by now: the switch has
    // received exactly 90 on this port's connection.
    assert!(wait_until(T, || counter(&*s, "rx_frames") == 90));
    collect(&mut pp, &mut got);
    assert_eq!(got, (0..90).collect::<Vec<_>>());
    assert_eq!(counter(&*s, "violations"), 0);
    assert_eq!(counter(&*s, "disconnects"), 0);
}

/// Frames forwarded from one memif server interface to another arrive
/// byte for byte, in order: runs of large frames (streamed into the
/// client's buffers), large frames between small ones (each its own way),
/// lengths around the streaming threshold and the line size,
/// the largest that fit one buffer, and chained ones. Each burst goes in
/// with one publish (the ring has room for it), so the worker reads it
/// whole.
#[test]
fn frames_between_memif_servers_arrive_byte_for_byte() {
    let dir = TempDir::new("bytes");
    let server = MemifServer::bind(ServerConfig::new(dir.path("memif.sock"))).unwrap();
    let sw = Switch::new(SwitchConfig::default(), Box::new(ToByte)).unwrap();
    let mut peers = Vec::new();
    for i in 0..2u32 {
        let s = server
            .add_interface(MemifConfig::new(format!("s{i}"), i))
            .unwrap();
        let c = MemifPort::client(
            MemifConfig::new(format!("c{i}"), i),
            ClientConfig::new(dir.path("memif.sock")),
        )
        .unwrap();
        assert!(wait_until(T, || s.link_up() && c.link_up()), "no link {i}");
        sw.add_port(&format!("m{i}"), Arc::new(s), None).unwrap();
        peers.push(c);
    }
    let mut rx = peers[1].take_rx(0).unwrap();
    let lens = [
        1518, 1518, 1518, 1518, 1518, 1518, 1518, 64, 1518, 1518, 1518, 1518, 1024, 1023, 1088,
        1089, 2048, 1518, 60, 1518, 1518, 1518, 1518, 1518, 1518, 1518, 1518, 1517, 1100, 1900,
    ];
    let mut seq = 0u32;
    for burst in 0..60usize {
        let frames: Vec<Vec<u8>> = (0..32usize)
            .map(|k| {
                // every eighth burst has a frame over a buffer (chained):
                // the fabric hands that burst over as lists, not as a run
                let len = match (burst % 8, k) {
                    (7, 9) => 3000,
                    _ => lens[(burst * 7 + k) % lens.len()],
                };
                let mut f = frame(1, len, seq + k as u32);
                for (i, b) in f.iter_mut().enumerate().skip(19) {
                    *b = (i as u32).wrapping_mul(7).wrapping_add(seq + k as u32) as u8;
                }
                f
            })
            .collect();
        seq += 32;
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        let (mut off, t0) = (0, Instant::now());
        while off < refs.len() {
            assert!(t0.elapsed() < T, "the switch stopped taking frames");
            match send_batch(&peers[0], 0, &refs[off..]) {
                0 => std::thread::sleep(Duration::from_millis(1)),
                n => off += n,
            }
        }
        let got = recv(rx.as_mut(), frames.len(), T);
        assert_eq!(got.len(), frames.len(), "burst {burst}");
        for (k, (g, f)) in got.iter().zip(&frames).enumerate() {
            assert!(g == f, "burst {burst} frame {k} ({} B) differs", f.len());
        }
    }
    let st = sw.port_stats();
    assert_eq!(st[1].tx_packets, u64::from(seq), "{st:?}");
    sw.shutdown();
}
