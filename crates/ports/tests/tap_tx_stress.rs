//! Several workers transmitting to one TAP destination at once (needs
//! root): the producer state lives in the queue's transmit lock, each
//! worker copies its lease without it and whichever worker publishes writes
//! the frames to the device after dropping it. Every frame the switch
//! received is transmitted or counted under one drop reason, every
//! transmitted frame was written to the device (`tx_frames`), and the
//! kernel saw each write.
//!
//! `cargo test --release -p ports --test tap_tx_stress -- --ignored`

mod fanin;
mod kernel_util;

use std::sync::Arc;
use std::time::{Duration, Instant};

use fabric::Port;
use kernel_util::*;
use ports::tap::{TapConfig, TapPort};

/// `(rx_packets, rx_dropped)` of `ifname` as the kernel counts them (a
/// frame the stack then discards, e.g. one not for this host, counts in
/// both).
fn kernel_rx(ns: &Netns, ifname: &str) -> (u64, u64) {
    let out = ns.output(&["ip", "-s", "-o", "link", "show", "dev", ifname]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    // `... RX: bytes packets errors dropped ...\    <bytes> <packets> <errors> <dropped> ...`
    let after = text
        .split("RX:")
        .nth(1)
        .unwrap_or_else(|| panic!("no RX stats in {text:?}"));
    let nums: Vec<u64> = after
        .split('\\')
        .nth(1)
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    assert!(nums.len() >= 4, "cannot parse RX stats in {text:?}");
    (nums[1], nums[3])
}

#[test]
#[ignore = "system: root, TAP device in a namespace"]
fn workers_transmit_to_one_tap_and_every_frame_is_accounted_for() {
    if !require_root() {
        return;
    }
    const WORKERS: usize = 3;
    let h = Netns::new();
    let name = unique("txs");
    let tap = {
        let mut cfg = TapConfig::new(&name);
        cfg.queues = 1;
        h.enter(move || TapPort::open("tap", cfg).unwrap_or_else(|e| panic!("{e}")))
    };
    h.exec(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{name}.disable_ipv6=1"),
    ]);
    h.exec(&["ip", "link", "set", &name, "up"]);
    let tap = Arc::new(tap);
    assert!(wait_for(Duration::from_secs(3), || tap.link_up()), "tap up");
    let (k0, d0) = kernel_rx(&h, &name);

    let sw = fanin::switch_to_zero(WORKERS);
    assert_eq!(sw.add_port("tap", tap.clone(), Some(0)).unwrap(), 0);

    // One pipe per worker, each fed by its own thread as fast as it goes:
    // the workers contend for the TAP queue's lock and its flusher.
    let feeders = fanin::Feeders::start(&sw, WORKERS, |_, seq| {
        test_frame([60, 300, 1514][seq as usize % 3], seq)
    });
    std::thread::sleep(Duration::from_secs(3));
    let sent = feeders.stop();

    // Conservation at the switch: what the pipes delivered is transmitted
    // to the TAP port or dropped under a reason; at the backend: what was
    // counted transmitted was written (tx_frames), or refused (tx_error,
    // taken out of tx_packets); at the kernel: each write arrived
    // (`rx_packets`; the stack may then drop it, e.g. not for this host).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (rx, t, drops) = fanin::totals(&sw, "tap");
        let written = counter(&*tap, "tx_frames");
        let (k, d) = kernel_rx(&h, &name);
        // The TAP port's own receive side (the host stack is quiet, but
        // count it anyway) is part of `rx`.
        if rx == sent + counter(&*tap, "rx_frames")
            && rx == t.tx_packets + drops
            && t.tx_packets == written
            && k - k0 == written
        {
            assert!(t.tx_packets > 0, "nothing was transmitted");
            eprintln!(
                "sent {sent}, transmitted {}, dropped {drops} ({:?}), kernel rx {} dropped {}",
                t.tx_packets,
                t.drops,
                k - k0,
                d - d0
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not conserved: sent {sent} rx {rx} tx {} drops {drops} ({:?}) written {written} \
             kernel rx {} dropped {}",
            t.tx_packets,
            t.drops,
            k - k0,
            d - d0
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    sw.shutdown();
}
