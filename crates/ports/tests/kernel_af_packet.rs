//! AF_PACKET port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_af_packet -- --ignored`.

mod kernel_util;

use std::sync::Arc;
use std::time::{Duration, Instant};

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

/// 800 frames at 20 per millisecond for 40 ms into the port's receive
/// ring while nobody reads it (a reader that was not scheduled); then what
/// the ring holds, and the kernel's drops.
fn light_traffic_unread(cfg: impl FnOnce(&mut AfPacketConfig) + Send + 'static) -> (usize, u64) {
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let ifname = v.sw.clone();
    let port = sw.enter(move || {
        let mut c = AfPacketConfig::new(&ifname);
        cfg(&mut c);
        AfPacketPort::open("p0", c).unwrap_or_else(|e| panic!("{e}"))
    });
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let mut frames = Vec::new();
    let t0 = Instant::now();
    for ms in 0..40u32 {
        for k in 0..20 {
            let f = test_frame(60, ms * 20 + k);
            sock.send(&f);
            frames.push(f);
        }
        // On to the next millisecond (late after a preemption: the
        // frames of the missed ones then come at once, into fewer blocks).
        let next = t0 + Duration::from_millis(ms as u64 + 1);
        if let Some(d) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(d);
        }
    }
    let got = rx_collect(
        &mut *rx,
        frames.len(),
        Duration::from_secs(3),
        is_test_frame,
    );
    if got.len() == frames.len() {
        assert_eq!(got, frames, "the frames changed or came out of order");
    }
    (got.len(), counter(&port, "kernel_rx_drops"))
}

/// Under light load the kernel hands over a receive block per
/// millisecond: the default ring (64 blocks) holds 40 ms of traffic for a
/// reader that was not scheduled. (A ring of 16 blocks of 256 KiB, the
/// defaults before, held 320 of the 800 frames here: 16 ms.)
#[test]
#[ignore = "system: root, veths in namespaces"]
fn the_default_ring_holds_40_ms_of_light_traffic_nobody_read() {
    if !require_root() {
        return;
    }
    let (got, drops) = light_traffic_unread(|_| {});
    assert_eq!((got, drops), (800, 0), "(frames received, kernel drops)");
}

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
