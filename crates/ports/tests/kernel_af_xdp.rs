//! AF_XDP port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_af_xdp`.

mod kernel_util;

use std::sync::Arc;
use std::time::Duration;

use fabric::Port;
use kernel_util::*;
use ports::af_xdp::{AfXdpConfig, AfXdpPort, XdpAttach, XdpBind};

fn open_cfg(sw: &Netns, cfg: AfXdpConfig) -> AfXdpPort {
    sw.enter(move || AfXdpPort::open("x0", cfg).unwrap_or_else(|e| panic!("{e}")))
}

fn opener(sw: &Netns, ifname: &str, queues: u16) -> Arc<dyn Port> {
    let mut cfg = AfXdpConfig::new(ifname);
    cfg.queues = queues;
    Arc::new(open_cfg(sw, cfg))
}

kernel_port_tests!(opener);

#[test]
fn native_copy_mode_on_veth_and_detach_on_drop() {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open_cfg(&sw, AfXdpConfig::new(&v.sw));
    assert!(port.native(), "veth takes native XDP");
    assert!(!port.zero_copy(), "veth has no zero-copy");
    let shown = String::from_utf8(sw.output(&["ip", "link", "show", &v.sw]).stdout).unwrap();
    assert!(shown.contains("xdp"), "program attached: {shown}");
    // Zero-copy forced: a clear error.
    let mut cfg = AfXdpConfig::new(&v.sw);
    cfg.bind = XdpBind::ZeroCopy;
    let e = sw
        .enter(move || {
            AfXdpPort::open("x1", cfg)
                .err()
                .expect("zero-copy on veth must fail")
        })
        .to_string();
    assert!(
        e.starts_with(&format!(
            "af_xdp on {}: queue 0: bind(AF_XDP) in zero-copy mode failed: ",
            v.sw
        )),
        "{e}"
    );
    // A second port on the same interface: the first one's program is there.
    let mut cfg = AfXdpConfig::new(&v.sw);
    cfg.attach = XdpAttach::Native;
    let e = sw
        .enter(move || {
            AfXdpPort::open("x2", cfg)
                .err()
                .expect("second program must fail")
        })
        .to_string();
    assert!(
        e.contains("another XDP program is attached") || e.contains("bind(AF_XDP)"),
        "{e}"
    );
    drop(port);
    let shown = String::from_utf8(sw.output(&["ip", "link", "show", &v.sw]).stdout).unwrap();
    assert!(!shown.contains("xdp"), "program detached on drop: {shown}");
    // Generic mode works too.
    let mut cfg = AfXdpConfig::new(&v.sw);
    cfg.attach = XdpAttach::Generic;
    let port = open_cfg(&sw, cfg);
    assert!(!port.native());
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &v.host);
    let f = test_frame(1514, 5);
    sock.send(&f);
    assert_eq!(
        rx_collect(&mut *rx, 1, Duration::from_secs(3), is_test_frame),
        vec![f]
    );
}

/// The kernel's (major, minor) version, from uname.
fn kernel_version() -> (u32, u32) {
    let r = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let mut it = r
        .trim()
        .split(['.', '-'])
        .map(|x| x.parse::<u32>().unwrap_or(0));
    (it.next().unwrap_or(0), it.next().unwrap_or(0))
}

fn counter(port: &dyn Port, name: &str) -> u64 {
    port.backend_counters()
        .into_iter()
        .find(|(k, _)| *k == name)
        .unwrap_or_else(|| panic!("no counter {name}"))
        .1
}

/// Copy mode: one publish of a 200-frame burst is one sendto() where the
/// kernel takes a budget above its default 32 (XDP_MAX_TX_SKB_BUDGET,
/// Linux 6.17), else one per 32 frames; every frame arrives either way.
#[test]
fn copy_mode_sends_a_burst_per_kick() {
    if !require_root() {
        return;
    }
    let sw = switch_ns();
    let h = Netns::new();
    let v = Veth::new(&sw, &h, 1);
    let port = open_cfg(&sw, AfXdpConfig::new(&v.sw));
    assert!(!port.zero_copy());
    let budget = port.tx_budget();
    assert_eq!(counter(&port, "tx_budget"), budget as u64);
    if kernel_version() >= (6, 17) {
        // the tx ring's size with the default config (4096 chunks / 2)
        assert_eq!(budget, 2048, "kernel {:?}", kernel_version());
    } else {
        assert_eq!(budget, 32);
    }
    let sock = RawSock::open(&h, &v.host);
    let many: Vec<Vec<u8>> = (0..200).map(|i| test_frame(64, 2000 + i)).collect();
    let k0 = counter(&port, "tx_kicks");
    assert_eq!(tx_send(&port, 0, &many), 200);
    let got = sock.recv_matching(200, Duration::from_secs(3), is_test_frame);
    assert_eq!(got, many);
    let kicks = counter(&port, "tx_kicks") - k0;
    let want = 200u64.div_ceil(budget as u64);
    assert_eq!(kicks, want, "budget {budget}");
    assert_eq!(counter(&port, "tx_frames"), 200);
}

#[test]
fn wrong_interface_or_config_gives_clear_error() {
    if !require_root() {
        return;
    }
    let e = AfXdpPort::open("x0", AfXdpConfig::new("nosuch0"))
        .err()
        .expect("must fail");
    assert_eq!(
        e.to_string(),
        "af_xdp on nosuch0: interface not found: no such device"
    );
    let mut cfg = AfXdpConfig::new("lo");
    cfg.frame_size_b = 3000;
    let e = AfXdpPort::open("x0", cfg).err().expect("must fail");
    assert_eq!(
        e.to_string(),
        "af_xdp on lo: frame_size_b: 3000 is not 2048 or 4096"
    );
    let mut cfg = AfXdpConfig::new("lo");
    cfg.queues = 64;
    let e = AfXdpPort::open("x0", cfg).err().expect("must fail");
    assert!(
        e.to_string()
            .contains("receive queue(s), the port asks for 64"),
        "{e}"
    );
}
