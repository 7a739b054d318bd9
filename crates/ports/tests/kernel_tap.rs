//! TAP port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_tap -- --ignored`.
//!
//! The TAP port is the host-stack port: it is opened inside a namespace
//! standing for the host, whose stack then talks through it.

mod kernel_util;

use std::sync::Arc;
use std::time::Duration;

use fabric::Port;
use kernel_util::*;
use ports::tap::{TapConfig, TapPort};

fn open_in(ns: &Netns, ifname: &str, queues: u16) -> TapPort {
    let mut cfg = TapConfig::new(ifname);
    cfg.queues = queues;
    ns.enter(move || TapPort::open("t0", cfg).unwrap_or_else(|e| panic!("{e}")))
}

/// A host namespace with a TAP port `tap` that is up, IPv6 off (quiet).
fn host_with_tap(queues: u16) -> (Netns, TapPort, String) {
    let h = Netns::new();
    let name = unique("tt");
    let port = open_in(&h, &name, queues);
    h.exec(&[
        "sysctl",
        "-qw",
        &format!("net.ipv6.conf.{name}.disable_ipv6=1"),
    ]);
    h.exec(&["ip", "link", "set", &name, "up"]);
    assert!(
        wait_for(Duration::from_secs(3), || port.link_up()),
        "tap up"
    );
    (h, port, name)
}

#[test]
#[ignore = "system: root, TAP devices"]
fn rx_delivers_frames_from_the_host_stack_intact() {
    if !require_root() {
        return;
    }
    let (h, port, name) = host_with_tap(1);
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &name);
    let frames: Vec<Vec<u8>> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &s)| test_frame(s, i as u32))
        .collect();
    for f in &frames {
        sock.send(f);
    }
    assert_eq!(
        rx_collect(
            &mut *rx,
            frames.len(),
            Duration::from_secs(3),
            is_test_frame
        ),
        frames
    );
}

#[test]
#[ignore = "system: root, TAP devices"]
fn tx_frames_enter_the_host_stack() {
    if !require_root() {
        return;
    }
    let (h, port, name) = host_with_tap(1);
    let sock = RawSock::open(&h, &name);
    let frames: Vec<Vec<u8>> = SIZES
        .iter()
        .enumerate()
        .map(|(i, &s)| test_frame(s, 50 + i as u32))
        .collect();
    assert_eq!(tx_send(&port, 0, &frames), frames.len());
    assert_eq!(
        sock.recv_matching(frames.len(), Duration::from_secs(3), is_test_frame),
        frames
    );
    assert_eq!(port.tx(0).slots_for(1519), 0);
}

#[test]
#[ignore = "system: root, TAP devices"]
fn jumbo_frames_with_9000_mtu() {
    if !require_root() {
        return;
    }
    let (h, port, name) = host_with_tap(1);
    h.exec(&["ip", "link", "set", &name, "mtu", "9000"]);
    assert!(wait_for(Duration::from_secs(3), || port.info().max_frame_b == 9018));
    let mut rx = port.take_rx(0).unwrap();
    let sock = RawSock::open(&h, &name);
    let frames = vec![test_frame(9014, 1), test_frame(60, 2)];
    for f in &frames {
        sock.send(f);
    }
    assert_eq!(
        rx_collect(&mut *rx, 2, Duration::from_secs(3), is_test_frame),
        frames
    );
    assert_eq!(tx_send(&port, 0, &frames), 2);
    assert_eq!(
        sock.recv_matching(2, Duration::from_secs(3), is_test_frame),
        frames
    );
}

#[test]
#[ignore = "system: root, TAP devices"]
fn several_queues_share_the_traffic() {
    if !require_root() {
        return;
    }
    let (h, port, name) = host_with_tap(2);
    let mut q0 = port.take_rx(0).unwrap();
    let mut q1 = port.take_rx(1).unwrap();
    let sock = RawSock::open(&h, &name);
    let frames: Vec<Vec<u8>> = (0..64u16).map(|i| udp_frame(100, i, i as u32)).collect();
    for f in &frames {
        sock.send(f);
    }
    let a = rx_collect(&mut *q0, 64, Duration::from_millis(500), is_udp_test_frame);
    let b = rx_collect(
        &mut *q1,
        64 - a.len(),
        Duration::from_secs(2),
        is_udp_test_frame,
    );
    assert_eq!(
        a.len() + b.len(),
        64,
        "every frame arrives on one queue ({} / {})",
        a.len(),
        b.len()
    );
    assert!(
        !a.is_empty() && !b.is_empty(),
        "64 flows spread onto both queues ({} / {})",
        a.len(),
        b.len()
    );
    assert_eq!(tx_send(&port, 1, &frames[..8]), 8);
    assert_eq!(tx_send(&port, 0, &frames[8..16]), 8);
    assert_eq!(
        sock.recv_matching(16, Duration::from_secs(3), is_udp_test_frame)
            .len(),
        16
    );
}

#[test]
#[ignore = "system: root, TAP devices"]
fn link_down_up_and_removal_are_noticed() {
    if !require_root() {
        return;
    }
    let (h, port, name) = host_with_tap(1);
    let mut rx = port.take_rx(0).unwrap();
    h.exec(&["ip", "link", "set", &name, "down"]);
    assert!(wait_for(Duration::from_secs(3), || !port.link_up()));
    h.exec(&["ip", "link", "set", &name, "up"]);
    assert!(wait_for(Duration::from_secs(3), || port.link_up()));
    let sock = RawSock::open(&h, &name);
    let f = test_frame(300, 9);
    sock.send(&f);
    assert_eq!(
        rx_collect(&mut *rx, 1, Duration::from_secs(3), is_test_frame),
        vec![f.clone()]
    );
    h.exec(&["ip", "link", "del", &name]);
    assert!(
        wait_for(Duration::from_secs(3), || port.removed()),
        "removal noticed"
    );
    assert!(!port.link_up());
    assert!(rx_collect(&mut *rx, 1, Duration::from_millis(100), |_| true).is_empty());
    tx_send(&port, 0, std::slice::from_ref(&f));
    assert!(
        counter(&port, "tx_errors") >= 1,
        "writes into a removed tap fail and are counted"
    );
}

#[test]
#[ignore = "system: root, TAP devices"]
fn forwards_ping_and_tcp_between_two_host_stacks() {
    if !require_root() {
        return;
    }
    let a = Netns::new();
    let b = Netns::new();
    let (na, nb) = (unique("tt"), unique("tt"));
    let pa: Arc<dyn Port> = Arc::new(open_in(&a, &na, 1));
    let pb: Arc<dyn Port> = Arc::new(open_in(&b, &nb, 1));
    a.exec(&["ip", "addr", "add", "10.77.0.1/24", "dev", &na]);
    b.exec(&["ip", "addr", "add", "10.77.0.2/24", "dev", &nb]);
    a.exec(&["ip", "-6", "addr", "add", "fd77::1/64", "dev", &na, "nodad"]);
    b.exec(&["ip", "-6", "addr", "add", "fd77::2/64", "dev", &nb, "nodad"]);
    a.exec(&["ip", "link", "set", &na, "up"]);
    b.exec(&["ip", "link", "set", &nb, "up"]);
    let _fwd = Forwarder::start(pa, pb);
    for (dst, ns) in [("10.77.0.2", &a), ("fd77::2", &a)] {
        let out = ns.output(&["ping", "-c", "3", "-i", "0.2", "-w", "10", dst]);
        assert!(
            out.status.success(),
            "ping {dst}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
    let server = std::process::Command::new("ip")
        .args([
            "netns",
            "exec",
            &b.name,
            "iperf3",
            "-s",
            "-1",
            "-B",
            "10.77.0.2",
        ])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let _g = ChildGuard(server);
    std::thread::sleep(Duration::from_millis(300));
    let out = a.output(&["timeout", "20", "iperf3", "-c", "10.77.0.2", "-t", "3"]);
    assert!(
        out.status.success(),
        "iperf3: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
#[ignore = "system: root, TAP devices"]
fn missing_device_or_bad_name_gives_clear_error() {
    if !require_root() {
        return;
    }
    let mut cfg = TapConfig::new("tt0");
    cfg.dev_path = "/nonexistent/tun".into();
    let e = TapPort::open("t0", cfg).err().expect("must fail");
    assert_eq!(
        e.to_string(),
        "tap on tt0: open of the tun device failed: no such file or directory"
    );
    let e = TapPort::open("t0", TapConfig::new("a-name-that-is-too-long"))
        .err()
        .expect("must fail");
    assert!(
        e.to_string()
            .starts_with("tap on a-name-that-is-too-long: iface: \"a-name-that-is-too-long\" is not a valid interface name"),
        "{e}"
    );
}

/// Without CAP_NET_ADMIN the tun ioctl is refused: the error says so. Runs
/// itself again as user nobody.
#[test]
#[ignore = "system: root, TAP devices"]
fn without_permission_gives_clear_error() {
    if !require_root() {
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let ifname = unique("tt");
    // The helper test drops to user nobody in its own process and tries.
    let out = std::process::Command::new(exe)
        .args([
            "--exact",
            "unprivileged_open_helper",
            "--nocapture",
            "--include-ignored",
        ])
        .env("TURNOUT_TAP_IFNAME", &ifname)
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "helper failed: {text}");
    assert!(
        text.contains(&format!(
            "tap on {ifname}: ioctl(TUNSETIFF) failed: operation not permitted"
        )),
        "{text}"
    );
}

/// Helper of `without_permission_gives_clear_error` (only meaningful in its
/// unprivileged child).
#[test]
#[ignore]
fn unprivileged_open_helper() {
    let Some(ifname) = std::env::var_os("TURNOUT_TAP_IFNAME") else {
        return;
    };
    // SAFETY: dropping to nobody in this single-test child process.
    unsafe {
        assert_eq!(libc::setgroups(0, std::ptr::null()), 0);
        assert_eq!(libc::setgid(65534), 0);
        assert_eq!(libc::setuid(65534), 0);
    }
    let e = TapPort::open("t0", TapConfig::new(ifname.to_str().unwrap()))
        .err()
        .expect("must fail without privileges");
    println!("{e}");
}
