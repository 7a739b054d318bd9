//! Property: for random verdicts, many ports and several worker threads,
//! every frame is either delivered or counted under one drop reason
//! (per copy, for flood and groups), nothing is delivered twice, and
//! nothing is delivered to its ingress port or anywhere it was not sent.

mod common;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fill, parse, FromFrame};
use fabric::{
    pipe, Ctx, DropReason, Logic, PipeConfig, Pkts, Port, PortId, Switch, SwitchConfig, Verdict,
    WakeupMode,
};
use proptest::prelude::*;

#[derive(Clone, Debug)]
struct Case {
    ports: usize,
    workers: usize,
    ring_slots: usize,
    /// Poll (None) or adaptive with this latency budget, µs.
    adaptive: Option<u32>,
    /// Per frame: (src port, kind, arg, len).
    frames: Vec<(u16, u8, u16, usize)>,
}

fn case() -> impl Strategy<Value = Case> {
    (
        2usize..10,
        1usize..4,
        prop_oneof![Just(16usize), Just(64), Just(1024)],
        prop_oneof![
            Just(None),
            Just(Some(0u32)),
            Just(Some(100)),
            Just(Some(2_000))
        ],
    )
        .prop_flat_map(|(ports, workers, ring_slots, adaptive)| {
            let frame = (
                0..ports as u16,
                0u8..4,
                0u16..(ports as u16 + 3),
                60usize..300,
            )
                .prop_map(|(s, k, a, l)| {
                    (
                        s,
                        k,
                        if k == 2 {
                            if a % 2 == 0 {
                                7
                            } else {
                                8
                            }
                        } else {
                            a
                        },
                        l,
                    )
                });
            prop::collection::vec(frame, 1..1500).prop_map(move |frames| Case {
                ports,
                workers,
                ring_slots,
                adaptive,
                frames,
            })
        })
}

/// Wraps a logic, counting classifications per frame sequence number.
struct Counted(FromFrame, Arc<Vec<AtomicU32>>);

impl Logic for Counted {
    fn name(&self) -> &'static str {
        "counted"
    }
    fn classify(&self, ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, v: &mut [Verdict]) {
        for p in pkts.iter() {
            let (_, seq) = parse(p.data());
            self.1[seq as usize].fetch_add(1, Ordering::Relaxed);
        }
        self.0.classify(ctx, ingress, pkts, v)
    }
    fn group_members(&self, g: u16) -> &[PortId] {
        self.0.group_members(g)
    }
}

fn run(c: &Case) {
    let group7: Vec<u16> = (0..c.ports as u16).step_by(2).chain([200]).collect();
    let cfg = SwitchConfig {
        batch: 32,
        max_ports: 256,
        workers: vec![None; c.workers],
        wakeup: if c.adaptive.is_some() {
            WakeupMode::Adaptive
        } else {
            WakeupMode::Poll
        },
        latency_budget_us: c.adaptive.unwrap_or(0),
        ..SwitchConfig::default()
    };
    // Count how often each frame is classified: exactly once, always.
    let classified: Arc<Vec<AtomicU32>> =
        Arc::new((0..c.frames.len()).map(|_| AtomicU32::new(0)).collect());
    let logic = Counted(
        FromFrame {
            group7: group7.clone(),
        },
        classified.clone(),
    );
    let sw = Switch::new(cfg, Box::new(logic)).unwrap();
    let mut peers = Vec::new();
    for i in 0..c.ports {
        let (port, peer) = pipe(
            &format!("p{i}"),
            PipeConfig {
                ring_slots: c.ring_slots,
                ..Default::default()
            },
        )
        .unwrap();
        let p: Arc<dyn Port> = Arc::new(port);
        assert_eq!(sw.add_port(&format!("p{i}"), p, None).unwrap() as usize, i);
        peers.push(peer);
    }
    // add_port returns once every worker sees the port: sending may start.

    // Expected attempts (copies handed to a destination) and ingress drops.
    let present = |p: u16| (p as usize) < c.ports;
    let mut attempts: u64 = 0;
    let mut rx_drops: HashMap<DropReason, u64> = HashMap::new();
    let mut allowed: Vec<Vec<u16>> = Vec::new();
    for &(src, kind, arg, _) in &c.frames {
        let mut dsts = Vec::new();
        match kind {
            0 if arg == src => *rx_drops.entry(DropReason::Hairpin).or_default() += 1,
            0 if !present(arg) => *rx_drops.entry(DropReason::NoPort).or_default() += 1,
            0 => dsts.push(arg),
            1 => dsts.extend((0..c.ports as u16).filter(|p| *p != src)),
            2 if arg == 7 => {
                for &m in &group7 {
                    if m == src {
                        continue;
                    }
                    if present(m) {
                        dsts.push(m)
                    } else {
                        *rx_drops.entry(DropReason::NoPort).or_default() += 1
                    }
                }
            }
            2 => *rx_drops.entry(DropReason::NoPort).or_default() += 1,
            _ => *rx_drops.entry(DropReason::Policy).or_default() += 1,
        }
        attempts += dsts.len() as u64;
        allowed.push(dsts);
    }

    // Send everything (retrying while inbound rings are full), draining
    // outbound rings all the while.
    let mut next = vec![0usize; c.ports];
    let per_src: Vec<Vec<usize>> = (0..c.ports)
        .map(|p| {
            (0..c.frames.len())
                .filter(|i| c.frames[*i].0 as usize == p)
                .collect()
        })
        .collect();
    let mut seen: HashSet<(u32, u16)> = HashSet::new();
    let mut delivered = 0u64;
    let drain =
        |peers: &mut Vec<fabric::PipePeer>, seen: &mut HashSet<(u32, u16)>, delivered: &mut u64| {
            for (dst, peer) in peers.iter_mut().enumerate() {
                peer.recv(0, usize::MAX, |f| {
                    let (src, seq) = parse(f);
                    let dst = dst as u16;
                    assert_ne!(src, dst, "frame {seq} delivered to its ingress");
                    assert!(
                        allowed[seq as usize].contains(&dst),
                        "frame {seq} delivered to {dst}, not a destination"
                    );
                    assert!(
                        seen.insert((seq, dst)),
                        "frame {seq} delivered twice to {dst}"
                    );
                    assert_eq!(f.len(), c.frames[seq as usize].3, "length changed");
                    *delivered += 1;
                });
            }
        };
    let deadline = Instant::now() + Duration::from_secs(30);
    while next.iter().enumerate().any(|(p, n)| *n < per_src[p].len()) {
        assert!(Instant::now() < deadline, "sending stalled");
        for p in 0..c.ports {
            let todo = &per_src[p][next[p]..];
            let sent = peers[p].send_with(0, todo.len().min(64), |i, buf| {
                let seq = todo[i];
                let (_, kind, arg, len) = c.frames[seq];
                fill(buf, kind, arg, p as u16, seq as u32, len)
            });
            next[p] += sent;
        }
        drain(&mut peers, &mut seen, &mut delivered);
    }
    // Wait until the switch has finished every frame (rx is counted after
    // a batch is forwarded), then until the last copies are drained.
    let total = c.frames.len() as u64;
    loop {
        assert!(Instant::now() < deadline, "forwarding stalled");
        drain(&mut peers, &mut seen, &mut delivered);
        let st = sw.port_stats();
        let rx: u64 = st.iter().map(|p| p.rx_packets).sum();
        let out: u64 = st.iter().map(|p| p.tx_packets).sum();
        if rx == total && out == delivered {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // port_stats reads port after port: the snapshot above may show every
    // batch received (so all forwarding is done) while a destination's
    // counter and ring still looked older. Drain once more, then account.
    drain(&mut peers, &mut seen, &mut delivered);
    for (seq, n) in classified.iter().enumerate() {
        assert_eq!(
            n.load(Ordering::Relaxed),
            1,
            "frame {seq} classified {} times",
            n.load(Ordering::Relaxed)
        );
    }
    let st = sw.port_stats();
    let drop_of = |r: DropReason| -> u64 {
        st.iter()
            .flat_map(|p| p.drops.iter())
            .filter(|(n, _)| *n == r.name())
            .map(|(_, v)| *v)
            .sum()
    };
    for r in [DropReason::Hairpin, DropReason::NoPort, DropReason::Policy] {
        assert_eq!(drop_of(r), rx_drops.get(&r).copied().unwrap_or(0), "{r:?}");
    }
    let tx_drops =
        drop_of(DropReason::TxFull) + drop_of(DropReason::Oversize) + drop_of(DropReason::LinkDown);
    assert_eq!(
        delivered + tx_drops,
        attempts,
        "delivered {delivered} + tx drops {tx_drops} != attempts"
    );
    assert_eq!(drop_of(DropReason::Runt), 0);
    sw.shutdown();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, .. ProptestConfig::default() })]
    #[test]
    fn every_frame_is_delivered_or_counted(c in case()) {
        run(&c);
    }
}

#[test]
fn runts_are_dropped_and_counted_before_the_logic() {
    let sw = Switch::new(
        SwitchConfig::default(),
        Box::new(FromFrame { group7: vec![] }),
    )
    .unwrap();
    let (a, mut pa) = pipe("a", PipeConfig::default()).unwrap();
    let (b, mut pb) = pipe("b", PipeConfig::default()).unwrap();
    sw.add_port("a", Arc::new(a), None).unwrap();
    sw.add_port("b", Arc::new(b), None).unwrap();
    let mut ok = vec![0u8; 64];
    fill(&mut ok, 1, 0, 0, 0, 64);
    let frames: [&[u8]; 4] = [&[1, 2, 3], &[0; 13], &ok, &[]];
    assert_eq!(pa.send(0, &frames), 4);
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut got = 0;
    while got == 0 && Instant::now() < deadline {
        got += pb.recv(0, 10, |f| assert_eq!(f, &ok[..]));
    }
    assert_eq!(got, 1);
    // The worker counts a batch after forwarding it: wait for the count.
    let mut st = sw.port_stats();
    while st[0].rx_packets < 4 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
        st = sw.port_stats();
    }
    assert_eq!(st[0].rx_packets, 4);
    assert_eq!(st[0].drops, vec![("runt", 3)]);
}
