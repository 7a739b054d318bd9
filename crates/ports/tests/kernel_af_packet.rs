//! AF_PACKET port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_af_packet -- --ignored`.

mod kernel_util;

use std::sync::Arc;
use std::time::Duration;

use fabric::Port;
use kernel_util::*;
use ports::af_packet::{AfPacketConfig, AfPacketPort};

fn open(sw: &Netns, ifname: &str, queues: u16) -> AfPacketPort {
    let ifname = ifname.to_string();
    sw.enter(move || {
        let mut cfg = AfPacketConfig::new(&ifname);
        cfg.queues = queues;
        AfPacketPort::open("p0", cfg).unwrap_or_else(|e| panic!("{e}"))
    })
}

fn opener(sw: &Netns, ifname: &str, queues: u16) -> Arc<dyn Port> {
    Arc::new(open(sw, ifname, queues))
}

kernel_port_tests!(opener);

#[test]
#[ignore = "system: root, veths in namespaces"]
fn jumbo_frames_with_9000_mtu() {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    v.set_mtu(&sw, &h, 9000);
    let port = open(&sw, &v.sw, 1);
    assert!(
        port.info().max_frame_b >= 9014,
        "max frame {}",
        port.info().max_frame_b
    );
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let frames = vec![test_frame(9014, 1), test_frame(4000, 2), test_frame(60, 3)];
    for f in &frames {
        sock.send(f);
    }
    assert_eq!(
        rx_collect(&mut *rx, 3, Duration::from_secs(3), is_test_frame),
        frames
    );
    assert_eq!(tx_send(&port, 0, &frames), 3);
    assert_eq!(
        sock.recv_matching(3, Duration::from_secs(3), is_test_frame),
        frames
    );
}

#[test]
#[ignore = "system: root, veths in namespaces"]
fn missing_interface_gives_clear_error() {
    if !require_root() {
        return;
    }
    let e = AfPacketPort::open("p0", AfPacketConfig::new("nosuch0"))
        .err()
        .expect("must fail");
    assert_eq!(
        e.to_string(),
        "af_packet on nosuch0: interface not found: no such device"
    );
    let mut cfg = AfPacketConfig::new("lo");
    cfg.tx_frames = 1000;
    let e = AfPacketPort::open("p0", cfg).err().expect("must fail");
    assert!(
        e.to_string()
            .starts_with("af_packet on lo: tx_frames: 1000 is not a power of two in 8..="),
        "{e}"
    );
}

#[test]
#[ignore = "system: root, veths in namespaces"]
fn forwards_9000_mtu_end_to_end() {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let t = TwoHosts::new(&sw, Some(9000));
    let a: Arc<dyn Port> = Arc::new(open(&sw, &t.va.sw, 1));
    let b: Arc<dyn Port> = Arc::new(open(&sw, &t.vb.sw, 1));
    let _fwd = Forwarder::start(a, b);
    t.ping_both(Some(8900));
}
