//! The tunnel port over an in-process pipe underlay: the test plays the
//! underlay network (reads what the tunnel sends, injects what remotes
//! send) and the fabric (drives the transmit protocol).

use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use fabric::{pipe, PipeConfig, PipePeer, Port, RxBatch};
use wire::MacAddr;

use super::decap::{decap, DecapCfg, Rx};
use super::encap::{flow_sport, Kind, Outer, OuterSpec};
use super::{TunnelConfig, TunnelPort};

const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 1);
const R1: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 2);
const R2: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 3);
const R3: Ipv4Addr = Ipv4Addr::new(10, 99, 0, 4);
const MY_MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);
const MTU: u32 = 1500;

fn nmac(i: u8) -> MacAddr {
    MacAddr([2, 0, 0, 0, 1, i])
}

fn setup(kind: Kind) -> (TunnelPort, PipePeer) {
    let (port, peer) = pipe(
        "u0",
        PipeConfig {
            queues: 1,
            ring_slots: 256,
            slot_b: 2048,
        },
    )
    .unwrap();
    let mut cfg = TunnelConfig::new(kind, 42, LOCAL.into());
    cfg.remotes = vec![R1.into(), R2.into()];
    cfg.neighbours = vec![
        (R1.into(), nmac(2)),
        (R2.into(), nmac(3)),
        (R3.into(), nmac(4)),
    ];
    let t =
        TunnelPort::open_parts("t0", cfg, std::sync::Arc::new(port), MY_MAC, MTU, None).unwrap();
    (t, peer)
}

fn inner(dst: [u8; 6], src: [u8; 6], len: usize, tag: u8) -> Vec<u8> {
    let mut f = vec![tag; len];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f
}

/// Sends frames through the tunnel as the fabric would.
fn send(t: &TunnelPort, frames: &[Vec<u8>]) -> usize {
    // SAFETY: single-threaded test: no other user of the queue.
    let mut tx = unsafe { fabric::OwnedTx::new(t.tx(0)) };
    let mut ok = 0;
    for f in frames {
        if tx.slots_for(f.len()) == 0 {
            continue;
        }
        if tx.free_slots() == 0 {
            continue;
        }
        let s = tx.reserve(1);
        tx.write(s, 1, f);
        tx.publish(s + 1);
        ok += 1;
    }
    ok
}

/// What the underlay carried: (outer destination IP, inner frame).
fn sent(peer: &mut PipePeer) -> Vec<(IpAddr, Vec<u8>)> {
    let mut out = Vec::new();
    peer.recv(0, 1024, |f| {
        let ip = IpAddr::V4(Ipv4Addr::new(f[30], f[31], f[32], f[33]));
        let any = DecapCfg {
            kind: Kind::Vxlan,
            vni: 42,
            local: ip,
            port: 4789,
        };
        let g = DecapCfg {
            kind: Kind::Geneve,
            port: 6081,
            ..any
        };
        let r = decap(&any, f).or_else(|_| decap(&g, f));
        match r {
            Ok(Rx::Frame { off, len, .. }) => out.push((ip, f[off..off + len].to_vec())),
            other => panic!("tunnel sent an undecodable frame: {other:?}"),
        }
    });
    out
}

/// An underlay frame from `src` (VTEP) to us.
fn from_remote(kind: Kind, src: Ipv4Addr, vni: u32, f: &[u8]) -> Vec<u8> {
    let o = Outer::new(&OuterSpec {
        kind,
        vni,
        src_mac: nmac(9),
        dst_mac: MY_MAC,
        src_ip: src.into(),
        dst_ip: LOCAL.into(),
        dst_port: kind.default_port(),
        mtu: 9000,
        ttl: 64,
    })
    .unwrap();
    let mut b = vec![0u8; o.len() + f.len()];
    b[o.len()..].copy_from_slice(f);
    let n = o.write(&mut b, f.len(), flow_sport(f)).unwrap();
    b.truncate(n);
    b
}

fn receive(
    t: &TunnelPort,
    rx: &mut Box<dyn fabric::RxQueue>,
    peer: &mut PipePeer,
    frames: &[Vec<u8>],
) -> Vec<Vec<u8>> {
    let _ = t;
    let refs: Vec<&[u8]> = frames.iter().map(|f| &f[..]).collect();
    assert_eq!(peer.send(0, &refs), frames.len());
    let mut b = RxBatch::with_capacity(64);
    let burst = b.receive(&mut **rx, 0, 0);
    let out = burst
        .pkts()
        .iter()
        .map(|p| p.data().to_vec())
        .collect::<Vec<_>>();
    assert_eq!(burst.received(), out.len());
    out
}

fn counter(t: &TunnelPort, name: &str) -> u64 {
    t.backend_counters()
        .into_iter()
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn wait(what: &str, mut cond: impl FnMut() -> bool) {
    let end = Instant::now() + Duration::from_secs(3);
    while !cond() {
        assert!(Instant::now() < end, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn flood_replicates_head_end_then_learned_unicast_goes_to_one_remote() {
    for kind in [Kind::Vxlan, Kind::Geneve] {
        let (t, mut peer) = setup(kind);
        wait("endpoint snapshot", || {
            t.remotes().iter().filter(|r| r.1).count() == 2
        });
        let mut rx = t.take_rx(0).unwrap();

        // Broadcast: one copy per static remote.
        let bc = inner([0xff; 6], [2, 0, 0, 0, 0, 0xaa], 100, 1);
        assert_eq!(send(&t, std::slice::from_ref(&bc)), 1);
        let got = sent(&mut peer);
        let mut dsts: Vec<_> = got.iter().map(|g| g.0).collect();
        dsts.sort();
        assert_eq!(dsts, vec![IpAddr::V4(R1), IpAddr::V4(R2)], "{kind:?}");
        assert!(got.iter().all(|g| g.1 == bc));

        // A frame from a host behind R2 is decapsulated in place and its MAC
        // learned; replies to it go to R2 only.
        let host = [2, 0, 0, 0, 0, 0xbb];
        let f = inner([2, 0, 0, 0, 0, 0xaa], host, 80, 2);
        let got = receive(&t, &mut rx, &mut peer, &[from_remote(kind, R2, 42, &f)]);
        assert_eq!(got, vec![f]);
        let reply = inner(host, [2, 0, 0, 0, 0, 0xaa], 90, 3);
        send(&t, std::slice::from_ref(&reply));
        assert_eq!(sent(&mut peer), vec![(IpAddr::V4(R2), reply)]);
        assert_eq!(counter(&t, "tx_encapsulated"), 3);
        assert_eq!(counter(&t, "tx_flooded"), 1);
        assert_eq!(counter(&t, "tx_flood_copies"), 2);
        assert_eq!(counter(&t, "rx_decapsulated"), 1);
    }
}

#[test]
fn bad_input_is_dropped_under_its_reason_and_good_traffic_passes() {
    let (t, mut peer) = setup(Kind::Vxlan);
    let mut rx = t.take_rx(0).unwrap();
    let good = inner([2, 0, 0, 0, 0, 0xaa], [2, 0, 0, 0, 0, 0xcc], 64, 7);
    let ok = from_remote(Kind::Vxlan, R1, 42, &good);
    let other_vni = from_remote(Kind::Vxlan, R1, 43, &good);
    let mut bad_flags = ok.clone();
    bad_flags[42] = 0;
    let mut foreign = ok.clone();
    foreign[36..38].copy_from_slice(&53u16.to_be_bytes());
    let truncated = ok[..40].to_vec();
    let geneve_here = from_remote(Kind::Geneve, R1, 42, &good);
    let got = receive(
        &t,
        &mut rx,
        &mut peer,
        &[
            other_vni.clone(),
            ok.clone(),
            bad_flags,
            foreign,
            truncated,
            ok.clone(),
            geneve_here,
            other_vni,
        ],
    );
    assert_eq!(got, vec![good.clone(), good]);
    assert_eq!(counter(&t, "rx_decapsulated"), 2);
    assert_eq!(counter(&t, "rx_drop_unknown_vni"), 2);
    assert_eq!(counter(&t, "rx_drop_bad_flags"), 1);
    assert_eq!(counter(&t, "rx_drop_foreign"), 2);
    assert_eq!(counter(&t, "rx_drop_truncated"), 1);
}

#[test]
fn frames_over_the_underlay_mtu_are_refused_not_fragmented() {
    let (t, mut peer) = setup(Kind::Vxlan);
    wait("endpoint snapshot", || {
        t.remotes().iter().filter(|r| r.1).count() == 2
    });
    let max = (MTU - 36) as usize;
    assert_eq!(t.info().max_frame_b as usize, max);
    let tx = t.tx(0);
    assert_eq!(tx.slots_for(max), 1);
    assert_eq!(tx.slots_for(max + 1), 0);
    assert_eq!(send(&t, &[inner([0xff; 6], [2; 6], max, 1)]), 1);
    let got = sent(&mut peer);
    assert_eq!(got.len(), 2);
    assert_eq!(got[0].1.len(), max);
    assert_eq!(send(&t, &[inner([0xff; 6], [2; 6], max + 1, 1)]), 0);
    assert!(sent(&mut peer).is_empty());
}

#[test]
fn endpoints_are_learned_from_traffic() {
    let (t, mut peer) = setup(Kind::Vxlan);
    let mut rx = t.take_rx(0).unwrap();
    let host = [2, 0, 0, 0, 0, 0xdd];
    let f = inner([0xff; 6], host, 64, 4);
    assert_eq!(
        receive(
            &t,
            &mut rx,
            &mut peer,
            &[from_remote(Kind::Vxlan, R3, 42, &f)]
        )
        .len(),
        1
    );
    assert_eq!(counter(&t, "rx_unknown_remote"), 1);
    wait("R3 learned", || {
        t.remotes()
            .iter()
            .any(|r| r.0 == IpAddr::V4(R3) && r.1 && r.2)
    });
    // The next frame from it teaches its MAC; unicast to it goes to R3 alone,
    // and floods now reach R3 too.
    receive(
        &t,
        &mut rx,
        &mut peer,
        &[from_remote(Kind::Vxlan, R3, 42, &f)],
    );
    let uc = inner(host, [2, 0, 0, 0, 0, 0xaa], 64, 5);
    send(&t, std::slice::from_ref(&uc));
    assert_eq!(sent(&mut peer), vec![(IpAddr::V4(R3), uc)]);
    send(&t, &[inner([0xff; 6], [2; 6], 64, 6)]);
    assert_eq!(sent(&mut peer).len(), 3);
    assert_eq!(counter(&t, "remotes_learned"), 1);
}

#[test]
fn unresolved_next_hop_is_a_counted_drop() {
    let (port, mut peer) = pipe("u1", PipeConfig::default()).unwrap();
    let mut cfg = TunnelConfig::new(Kind::Vxlan, 42, LOCAL.into());
    cfg.remotes = vec![R1.into()];
    let t =
        TunnelPort::open_parts("t1", cfg, std::sync::Arc::new(port), MY_MAC, MTU, None).unwrap();
    wait("snapshot", || t.remotes().len() == 1);
    send(&t, &[inner([0xff; 6], [2; 6], 64, 1)]);
    assert!(sent(&mut peer).is_empty());
    assert_eq!(counter(&t, "tx_drop_no_neighbour"), 1);
    // No remote at all: counted too.
    let (port, mut peer) = pipe("u2", PipeConfig::default()).unwrap();
    let t = TunnelPort::open_parts(
        "t2",
        TunnelConfig::new(Kind::Vxlan, 42, LOCAL.into()),
        std::sync::Arc::new(port),
        MY_MAC,
        MTU,
        None,
    )
    .unwrap();
    send(&t, &[inner([0xff; 6], [2; 6], 64, 1)]);
    assert!(sent(&mut peer).is_empty());
    assert_eq!(counter(&t, "tx_drop_no_remote"), 1);
}

#[test]
fn config_is_checked() {
    let (port, _peer) = pipe("u3", PipeConfig::default()).unwrap();
    let port: std::sync::Arc<dyn Port> = std::sync::Arc::new(port);
    let mut cfg = TunnelConfig::new(Kind::Vxlan, 1 << 24, LOCAL.into());
    assert!(TunnelPort::open_parts("x", cfg.clone(), port.clone(), MY_MAC, MTU, None).is_err());
    cfg.vni = 1;
    cfg.remotes = vec!["fd00::1".parse().unwrap()];
    assert!(TunnelPort::open_parts("x", cfg, port.clone(), MY_MAC, MTU, None).is_err());
    let cfg = TunnelConfig::new(Kind::Vxlan, 1, LOCAL.into());
    assert!(TunnelPort::open_parts("x", cfg, port, MY_MAC, 80, None).is_err());
}

#[test]
fn a_burst_of_only_dropped_frames_gives_its_buffers_back() {
    let (t, mut peer) = setup(Kind::Vxlan);
    let mut rx = t.take_rx(0).unwrap();
    let room = peer.send_room(0);
    let junk = [0u8; 60];
    assert_eq!(peer.send(0, &[&junk[..]; 10]), 10);
    let mut b = RxBatch::with_capacity(64);
    assert_eq!(b.receive(&mut *rx, 0, 0).received(), 0);
    // A worker does not release after an empty burst: the tunnel must have.
    assert_eq!(peer.send_room(0), room);
    assert_eq!(counter(&t, "rx_drop_foreign"), 10);
}

#[test]
fn learned_endpoints_age_out_static_ones_stay() {
    let (port, mut peer) = pipe("u4", PipeConfig::default()).unwrap();
    let mut cfg = TunnelConfig::new(Kind::Vxlan, 42, LOCAL.into());
    cfg.remotes = vec![R1.into()];
    cfg.neighbours = vec![(R1.into(), nmac(2)), (R3.into(), nmac(4))];
    cfg.aging_s = 1;
    let t =
        TunnelPort::open_parts("t4", cfg, std::sync::Arc::new(port), MY_MAC, MTU, None).unwrap();
    let mut rx = t.take_rx(0).unwrap();
    let f = inner([0xff; 6], [2, 0, 0, 0, 0, 0xee], 64, 1);
    receive(
        &t,
        &mut rx,
        &mut peer,
        &[from_remote(Kind::Vxlan, R3, 42, &f)],
    );
    wait("R3 learned", || t.remotes().len() == 2);
    receive(
        &t,
        &mut rx,
        &mut peer,
        &[from_remote(Kind::Vxlan, R3, 42, &f)],
    );
    assert_eq!(t.macs().len(), 1);
    wait("R3 aged out", || t.remotes().len() == 1);
    assert_eq!(t.remotes()[0].0, IpAddr::V4(R1));
    assert_eq!(counter(&t, "remotes_aged"), 1);
    assert!(t.macs().is_empty());
}
