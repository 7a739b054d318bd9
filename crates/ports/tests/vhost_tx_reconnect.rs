//! Several workers transmitting to one vhost-user destination while its
//! frontend keeps reconnecting (the session the transmit queue pins is
//! replaced under the writers): every lease writes into the session it was
//! reserved against (pinned by the lease, never re-read from the queue's
//! producer state), no frame arrives corrupted, and every frame the
//! switch received is transmitted or counted under one drop reason.
//!
//! `cargo test --release -p ports --test vhost_tx_reconnect`

mod fanin;
mod vhost_common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::{Port, RxBatch};
use ports::vhost_user::frontend::{FrontendConfig, VhostFrontendPort};
use ports::vhost_user::{VhostUserConfig, VhostUserPort};
use vhost_common::{wait_until, TempDir};

/// A frame whose payload is a function of (source, seq), so a receiver can
/// check it byte for byte.
fn frame(src: u8, seq: u32, len: usize) -> Vec<u8> {
    let mut f = vec![0u8; len];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, src]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14] = src;
    f[15..19].copy_from_slice(&seq.to_le_bytes());
    for (i, b) in f[19..].iter_mut().enumerate() {
        *b = (i as u32).wrapping_mul(7).wrapping_add(seq) as u8 ^ src;
    }
    f
}

fn check(data: &[u8]) {
    assert!(data.len() >= 64, "short frame of {} B", data.len());
    let src = data[14];
    let seq = u32::from_le_bytes(data[15..19].try_into().unwrap());
    assert_eq!(data, &frame(src, seq, data.len())[..], "corrupted frame");
}

fn front(sock: &std::path::Path) -> VhostFrontendPort {
    let mut fc = FrontendConfig::new(sock);
    fc.max_frame_b = 1518;
    fc.queue_size = 256;
    VhostFrontendPort::new("front", fc).unwrap()
}

#[test]
fn workers_transmit_to_one_vhost_port_while_its_session_is_replaced() {
    const WORKERS: usize = 3;
    let dir = TempDir::new("txlock-vhrc");
    let sock = dir.path("vu.sock");
    let mut bc = VhostUserConfig::new(&sock);
    bc.max_frame_b = 1518;
    let backend = Arc::new(VhostUserPort::new("backend", bc).unwrap());
    let sw = fanin::switch_to_zero(WORKERS);
    sw.add_port("vu", backend.clone(), Some(0)).unwrap();

    // One pipe per worker, each fed by its own thread.
    let feeders = fanin::Feeders::start(&sw, WORKERS, |w, seq| {
        frame(w as u8 + 1, seq, [64, 300, 1514][seq as usize % 3])
    });

    // The frontend drains and checks; it is dropped and recreated every
    // 200 ms, so the backend's session (what transmit leases pin) changes
    // while workers write.
    let mut got = 0u64;
    let mut connects = 0;
    let t0 = Instant::now();
    let mut batch = RxBatch::with_capacity(64);
    while t0.elapsed() < Duration::from_secs(4) {
        let f = front(&sock);
        if !wait_until(Duration::from_secs(10), || {
            f.link_up() && backend.wait_running(Duration::from_millis(1))
        }) {
            panic!("no link: {}", f.last_error());
        }
        connects += 1;
        let mut rx = f.take_rx(0).unwrap();
        let t1 = Instant::now();
        while t1.elapsed() < Duration::from_millis(200) {
            let b = batch.receive(rx.as_mut(), 0, 0);
            for p in b.pkts().iter() {
                check(p.data());
                got += 1;
            }
        }
        drop(rx);
        drop(f);
    }
    let sent = feeders.stop();
    assert!(connects >= 5, "only {connects} sessions");
    assert!(got > 0, "nothing crossed");

    // Conservation: everything the pipes delivered into the switch is
    // transmitted to the vhost-user port or dropped under a reason, and
    // the frontends received no more than was transmitted.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (rx, vu, drops) = fanin::totals(&sw, "vu");
        if rx == sent && rx == vu.tx_packets + drops {
            assert!(
                got <= vu.tx_packets,
                "received {got} > transmitted {}",
                vu.tx_packets
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not conserved: sent {sent} rx {rx} tx {} drops {drops}",
            vu.tx_packets
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    sw.shutdown();
}
