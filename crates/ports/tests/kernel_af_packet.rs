//! AF_PACKET port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_af_packet`.

mod kernel_util;

use std::sync::Arc;
use std::time::Duration;

use fabric::Port;
use kernel_util::*;
use ports::af_packet::{AfPacketConfig, AfPacketPort};

const SIZES: [usize; 8] = [60, 61, 64, 128, 511, 1000, 1500, 1514];

fn open(sw: &Netns, ifname: &str, queues: u16) -> AfPacketPort {
    let ifname = ifname.to_string();
    sw.enter(move || {
        let mut cfg = AfPacketConfig::new(&ifname);
        cfg.queues = queues;
        AfPacketPort::open("p0", cfg).unwrap_or_else(|e| panic!("{e}"))
    })
}

#[test]
fn rx_delivers_frames_intact() {
    require_root();
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    assert!(port.take_rx(0).is_none(), "a queue is handed out once");
    let sock = RawSock::open(&h, &v.host);
    let frames: Vec<Vec<u8>> = SIZES.iter().enumerate().map(|(i, &s)| test_frame(s, i as u32)).collect();
    for f in &frames {
        sock.send(f);
    }
    let got = rx_collect(&mut *rx, frames.len(), Duration::from_secs(3), is_test_frame);
    assert_eq!(got, frames, "frames arrive intact and in order");
    assert!(counter(&port, "rx_frames") >= frames.len() as u64);
}

#[test]
fn tx_frames_arrive_in_namespace() {
    require_root();
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames: Vec<Vec<u8>> = SIZES.iter().enumerate().map(|(i, &s)| test_frame(s, 100 + i as u32)).collect();
    assert_eq!(tx_send(&port, 0, &frames), frames.len());
    let got = sock.recv_matching(frames.len(), Duration::from_secs(3), is_test_frame);
    assert_eq!(got, frames);
    // The port does not see its own transmits.
    let echo = rx_collect(&mut *rx, 1, Duration::from_millis(200), is_test_frame);
    assert!(echo.is_empty(), "own transmits must not be received");
    // Too large for the MTU: zero slots (the fabric drops it as oversize).
    assert_eq!(port.tx(0).slots_for(1519), 0);
    assert_eq!(port.tx(0).slots_for(1514), 1);
}

#[test]
fn jumbo_frames_with_9000_mtu() {
    require_root();
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    v.set_mtu(&sw, &h, 9000);
    let port = open(&sw, &v.sw, 1);
    assert!(port.info().max_frame_b >= 9014, "max frame {}", port.info().max_frame_b);
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames = vec![test_frame(9014, 1), test_frame(4000, 2), test_frame(60, 3)];
    for f in &frames {
        sock.send(f);
    }
    assert_eq!(rx_collect(&mut *rx, 3, Duration::from_secs(3), is_test_frame), frames);
    assert_eq!(tx_send(&port, 0, &frames), 3);
    assert_eq!(sock.recv_matching(3, Duration::from_secs(3), is_test_frame), frames);
}

#[test]
fn several_queues_share_the_traffic() {
    require_root();
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 2);
    let port = open(&sw, &v.sw, 2);
    let mut q0 = port.take_rx(0).unwrap();
    let mut q1 = port.take_rx(1).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames: Vec<Vec<u8>> = (0..64u16).map(|i| udp_frame(100, i, i as u32)).collect();
    for f in &frames {
        sock.send(f);
    }
    std::thread::sleep(Duration::from_millis(50));
    let a = rx_collect(&mut *q0, 64, Duration::from_millis(500), is_udp_test_frame);
    let b = rx_collect(&mut *q1, 64 - a.len(), Duration::from_secs(2), is_udp_test_frame);
    assert_eq!(a.len() + b.len(), 64, "every frame arrives on one queue");
    assert!(!a.is_empty() && !b.is_empty(), "64 flows hash onto both queues ({} / {})", a.len(), b.len());
    // Both transmit queues work.
    assert_eq!(tx_send(&port, 1, &frames[..8]), 8);
    assert_eq!(tx_send(&port, 0, &frames[8..16]), 8);
    assert_eq!(sock.recv_matching(16, Duration::from_secs(3), is_udp_test_frame).len(), 16);
}

#[test]
fn link_down_up_and_removal_are_noticed() {
    require_root();
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open(&sw, &v.sw, 1);
    let mut rx = port.take_rx(0).unwrap();
    assert!(port.link_up());
    h.exec(&["ip", "link", "set", &v.host, "down"]);
    assert!(wait_for(Duration::from_secs(3), || !port.link_up()), "peer down → link down");
    h.exec(&["ip", "link", "set", &v.host, "up"]);
    assert!(wait_for(Duration::from_secs(3), || port.link_up()), "peer up → link up");
    assert!(counter(&port, "link_changes") >= 2);
    // Traffic flows again after recovery.
    let sock = RawSock::open(&h, &v.host);
    let f = test_frame(200, 7);
    sock.send(&f);
    assert_eq!(rx_collect(&mut *rx, 1, Duration::from_secs(3), is_test_frame), vec![f.clone()]);
    assert_eq!(tx_send(&port, 0, std::slice::from_ref(&f)), 1);
    assert_eq!(sock.recv_matching(1, Duration::from_secs(3), is_test_frame), vec![f.clone()]);
    // MTU change is seen.
    sw.exec(&["ip", "link", "set", &v.sw, "mtu", "1400"]);
    assert!(wait_for(Duration::from_secs(3), || counter(&port, "mtu") == 1400));
    assert_eq!(port.tx(0).slots_for(1500), 0);
    // Removal: the port reports itself dead, nothing panics.
    sw.exec(&["ip", "link", "del", &v.sw]);
    assert!(wait_for(Duration::from_secs(3), || port.removed()), "removal noticed");
    assert!(!port.link_up());
    assert_eq!(counter(&port, "link_removed"), 1);
    assert!(rx_collect(&mut *rx, 1, Duration::from_millis(100), |_| true).is_empty());
    tx_send(&port, 0, std::slice::from_ref(&f));
}

#[test]
fn missing_interface_gives_clear_error() {
    require_root();
    let e = AfPacketPort::open("p0", AfPacketConfig::new("nosuch0")).err().expect("must fail");
    assert_eq!(e.to_string(), "af_packet on nosuch0: interface not found: no such device");
    let mut cfg = AfPacketConfig::new("lo");
    cfg.tx_frames = 1000;
    let e = AfPacketPort::open("p0", cfg).err().expect("must fail");
    assert!(e.to_string().starts_with("af_packet on lo: tx_frames must be a power of two"), "{e}");
}

#[test]
fn forwards_ping_and_tcp_between_namespaces() {
    require_root();
    let sw = switch_ns();
    let t = TwoHosts::new(&sw, None);
    let a: Arc<dyn Port> = Arc::new(open(&sw, &t.va.sw, 1));
    let b: Arc<dyn Port> = Arc::new(open(&sw, &t.vb.sw, 1));
    let fwd = Forwarder::start(a.clone(), b.clone());
    t.ping_both(None);
    let bps = t.iperf3(3);
    assert!(bps > 1e6, "iperf3 moved {bps} bit/s");
    assert_eq!(fwd.stats.dropped_size.load(std::sync::atomic::Ordering::Relaxed), 0);
    drop(fwd);
}

#[test]
fn forwards_9000_mtu_end_to_end() {
    require_root();
    let sw = switch_ns();
    let t = TwoHosts::new(&sw, Some(9000));
    let a: Arc<dyn Port> = Arc::new(open(&sw, &t.va.sw, 1));
    let b: Arc<dyn Port> = Arc::new(open(&sw, &t.vb.sw, 1));
    let _fwd = Forwarder::start(a, b);
    t.ping_both(Some(8900));
}
