//! AF_XDP port against the real kernel stack (needs root):
//! `cargo test -p ports --test kernel_af_xdp -- --ignored`.

mod kernel_util;

use std::sync::Arc;
use std::time::Duration;

use fabric::Port;
use kernel_util::*;
use ports::af_xdp::{AfXdpConfig, AfXdpPort, XdpAttach, XdpBind, MAX_TX_FRAMES};

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
#[ignore = "system: root, veths in namespaces"]
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
#[ignore = "system: root, veths in namespaces"]
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
        // the tx ring's size with the default config (half the chunks,
        // at most MAX_TX_FRAMES)
        let tx = (AfXdpConfig::new(&v.sw).frames_per_queue / 2).min(MAX_TX_FRAMES);
        assert_eq!(budget, tx, "kernel {:?}", kernel_version());
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
#[ignore = "system: root, veths in namespaces"]
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

/// The pid of the kernel thread running `ifname`'s threaded NAPI (named
/// `napi/{ifname}-{id}`), once it exists.
fn napi_thread(ifname: &str) -> Option<i32> {
    let prefix = format!("napi/{ifname}-");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|e| {
        let pid: i32 = e.file_name().to_str()?.parse().ok()?;
        let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
        comm.trim().starts_with(&prefix).then_some(pid)
    })
}

/// Pins thread `pid` to `cpu`.
fn pin(pid: i32, cpu: usize) {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET and
    // sched_setaffinity get a valid set and its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        let r = libc::sched_setaffinity(pid, std::mem::size_of_val(&set), &set);
        assert_eq!(r, 0, "pin {pid}: {}", std::io::Error::last_os_error());
    }
}

/// A burst the kernel takes only in part (the veth peer's ring holds 256
/// frames and its queue stops until its NAPI thread, on the worker's CPU,
/// polls: the kick is refused with frames left in the transmit ring) and
/// then no more traffic: the worker kicks the ring again by itself, so
/// every frame of the last burst arrives. Without the retry the frames the
/// kernel refused stay in the ring until the next publish, which never
/// comes.
#[test]
#[ignore = "system: root, veths in namespaces"]
fn frames_a_refused_kick_left_leave_without_more_traffic() {
    use fabric::batch::MAX_BATCH;
    use fabric::pipe::{pipe, PipeConfig};
    use fabric::switch::{Switch, SwitchConfig};

    if !require_root() {
        return;
    }
    let sw = switch_ns();
    // No IPv6 on the receiving side either: a frame it sent would reach
    // the port's socket, and the kernel's poll of it (the worker's epoll)
    // transmits what is left in the ring too, hiding the stall.
    let h = switch_ns();
    let v = Veth::new(&sw, &h, 1);
    // The receiving end in NAPI mode (GRO on: veth then queues frames in
    // its 256-entry ring and stops the sender's queue when it is full),
    // polled by a kernel thread instead of the sender's softirq.
    h.exec(&["ethtool", "-K", &v.host, "gro", "on"]);
    h.exec(&[
        "sh",
        "-c",
        &format!("echo 1 > /sys/class/net/{}/threaded", v.host),
    ]);
    let port: Arc<dyn Port> = Arc::new(open_cfg(&sw, AfXdpConfig::new(&v.sw)));
    let sock = RawSock::open(&h, &v.host);
    // One worker on CPU 0 and the receiver's NAPI thread there too: the
    // NAPI thread cannot empty the veth ring while the worker's kick fills
    // it, so the kernel stops the queue and refuses the rest of the burst.
    let napi = napi_thread(&v.host).expect("threaded NAPI thread of the receiving veth");
    pin(napi, 0);
    let switch = Switch::new(
        SwitchConfig {
            batch: MAX_BATCH,
            workers: vec![Some(0)],
            ..SwitchConfig::default()
        },
        logic::build("patch", &serde_json::json!({"pairs": [[0, 1]]})).unwrap(),
    )
    .expect("switch");
    let (pp, mut peer) = pipe(
        "in",
        PipeConfig {
            ring_slots: MAX_BATCH,
            ..PipeConfig::default()
        },
    )
    .unwrap();
    assert_eq!(switch.add_port("in", Arc::new(pp), None).unwrap(), 0);
    assert_eq!(switch.add_port("x0", port.clone(), None).unwrap(), 1);
    // One burst of one batch (fits the transmit ring of 2048 at once),
    // then nothing. Repeated until the kernel refused a kick during one
    // (for 20 s at most): beside other work the NAPI thread often keeps up
    // (the kernel sends a kick's frames in runs of a few dozen, and the
    // worker can be preempted between them); beside a CPU hog on both
    // CPUs about one burst in two refused none, a few in a row none.
    let n = MAX_BATCH;
    let mut sent = 0u64;
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut rounds = 0u32;
    for round in 0u32.. {
        rounds = round + 1;
        let refused0 = counter(&*port, "tx_kicks_refused");
        let frames: Vec<Vec<u8>> = (0..n as u32)
            .map(|i| test_frame(64, round * 10_000 + i))
            .collect();
        let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
        // The pipe's ring holds one batch: the worker frees the last
        // round's slots when it next polls it, so this may wait a moment.
        let mut put = 0;
        let until = std::time::Instant::now() + Duration::from_secs(5);
        while put < n && std::time::Instant::now() < until {
            put += peer.send(0, &refs[put..]);
            if put < n {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
        assert_eq!(
            put, n,
            "round {round}: the pipe took {put} of {n} frames in 5 s"
        );
        sent += n as u64;
        let got = sock.recv_matching(n, Duration::from_secs(5), is_test_frame);
        let refused = counter(&*port, "tx_kicks_refused") - refused0;
        let st = switch.port_stats();
        let x0 = st.iter().find(|p| p.name == "x0").unwrap();
        assert_eq!(
            (got.len(), x0.tx_packets),
            (n, sent),
            "round {round}: received / sent; kicks refused {refused}, kicks {}",
            counter(&*port, "tx_kicks")
        );
        assert_eq!(got, frames, "in order and intact");
        if refused > 0 || std::time::Instant::now() >= deadline {
            break;
        }
    }
    // The case this test is about happened: the kernel refused a kick.
    assert!(
        counter(&*port, "tx_kicks_refused") > 0,
        "the kernel never refused a kick in {rounds} bursts (20 s): no stall to test"
    );
    switch.shutdown();
}
