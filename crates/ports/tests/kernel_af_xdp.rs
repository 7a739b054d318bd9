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
