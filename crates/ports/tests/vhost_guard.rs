//! A guest cannot take the switch down: hostile vhost-user
//! frontends that shrink the memory they shared, hand over a call fd that
//! blocks, or stop in the middle of a control message, each on a port of
//! a running switch (one worker) beside a bystander pair on the same
//! worker.
//!
//! - memory: the guest truncates its memfd to zero, to the middle of a
//!   ring, under the receive buffers the switch writes into, and right
//!   after a new memory table (a remap): the port is disconnected
//!   (`disconnects_mem_fault`), no lie is counted, the process lives on;
//! - call fd: a full blocking pipe as the call fd of each virtqueue
//!   (refused when it arrives), an eventfd the guest makes blocking again
//!   and fills after handing it over (the stuck worker is interrupted,
//!   `disconnects_notify_fd`), an eventfd that is full but non-blocking
//!   (interrupts dropped and counted in `call_dropped`, nothing else);
//! - control socket: a message cut at every byte boundary of a header and
//!   of a body (with and without descriptors), and replies left unread:
//!   each port disconnects after the 2 s deadline (`disconnects_stall`);
//! - shutdown: switch and ports dropped while guests stall mid-message,
//!   block their call fd and shrink their memory: bounded.
//!
//! Throughout, frames stream from one bystander frontend to the other
//! through the same worker: every one arrives, in order. After each attack
//! an honest frontend gets its frames through the attacked port.
//!
//! `cargo test --release -p ports --test vhost_guard`

#[path = "vhost_common/liar.rs"]
mod liar;
mod vhost_common;

use std::os::fd::{AsRawFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fabric::{Ctx, Logic, Pkts, Port, PortId, RxBatch, Switch, SwitchConfig, Verdict};
use liar::{
    fill, full_blocking_pipe, message, set_nonblocking, Frontend, SET_VRING_CALL, SET_VRING_NUM,
};
use ports::vhost_user::frontend::{FrontendConfig, VhostFrontendPort};
use ports::vhost_user::{VhostUserConfig, VhostUserPort};
use vhost_common::{wait_until, TempDir};

/// The control deadline the backend promises (device::READ_DEADLINE).
const DEADLINE: Duration = Duration::from_secs(2);

/// a -> b (the bystander pair), b -> every hostile port (traffic the
/// worker writes into the hostile guests), the rest dropped.
struct Steer {
    a: PortId,
    b: PortId,
}

impl Logic for Steer {
    fn name(&self) -> &'static str {
        "steer"
    }

    fn classify(&self, _ctx: &Ctx, ingress: PortId, pkts: &mut Pkts, verdicts: &mut [Verdict]) {
        let v = if ingress == self.a {
            Verdict::Port(self.b)
        } else if ingress == self.b {
            Verdict::Flood
        } else {
            Verdict::Drop(fabric::DropReason::NoMatch)
        };
        for x in verdicts.iter_mut().take(pkts.len()) {
            *x = v;
        }
    }
}

fn frame(seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]);
    f[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[14..18].copy_from_slice(&seq.to_le_bytes());
    f
}

/// What the bystander stream saw.
#[derive(Debug)]
struct Stream {
    sent: u32,
    got: u32,
    /// Longest wait for the next frame while frames were outstanding.
    max_gap: Duration,
    error: Option<String>,
}

/// Streams frames from frontend `fa` (port a) to frontend `fb` (port b),
/// checking each arrives once and in order, and sends a trickle from `fb`
/// (towards the hostile ports), until stopped; then waits (10 s at most)
/// for what is still in flight.
fn stream(fa: Arc<VhostFrontendPort>, fb: Arc<VhostFrontendPort>, stop: Arc<AtomicBool>) -> Stream {
    // SAFETY: this thread is the only user of both transmit queues.
    let mut tx = unsafe { fabric::OwnedTx::new(fa.tx(0)) };
    // SAFETY: as above.
    let mut tx_b = unsafe { fabric::OwnedTx::new(fb.tx(0)) };
    let mut rx = fb.take_rx(0).unwrap();
    let mut batch = RxBatch::with_capacity(64);
    let mut s = Stream {
        sent: 0,
        got: 0,
        max_gap: Duration::ZERO,
        error: None,
    };
    let mut last = Instant::now();
    let mut stopped: Option<Instant> = None;
    let mut trickle = Instant::now();
    loop {
        if stopped.is_none() && stop.load(Ordering::Acquire) {
            stopped = Some(Instant::now());
        }
        if stopped.is_none() && s.sent - s.got < 128 {
            let n = tx.free_slots().min(16);
            if n > 0 {
                let first = tx.reserve(n);
                for k in 0..n {
                    tx.write(first + k as u64, 1, &frame(s.sent + k));
                }
                tx.publish(first + n as u64);
                s.sent += n;
            }
        }
        if stopped.is_none() && trickle.elapsed() >= Duration::from_millis(1) {
            trickle = Instant::now();
            if tx_b.free_slots() > 0 {
                let first = tx_b.reserve(1);
                tx_b.write(first, 1, &frame(u32::MAX));
                tx_b.publish(first + 1);
            }
        }
        let b = batch.receive(rx.as_mut(), 0, 0);
        let n = b.received();
        for p in b.pkts().iter() {
            let seq = u32::from_le_bytes(p.data()[14..18].try_into().unwrap());
            if seq != s.got && s.error.is_none() {
                s.error = Some(format!("frame {seq} where {} was due", s.got));
            }
            s.got += 1;
        }
        drop(b);
        if n > 0 || s.got == s.sent {
            last = Instant::now();
        } else {
            s.max_gap = s.max_gap.max(last.elapsed());
        }
        if let Some(t) = stopped {
            if s.got >= s.sent || t.elapsed() > Duration::from_secs(10) {
                return s;
            }
        }
        if n == 0 {
            std::thread::sleep(Duration::from_micros(100));
        }
    }
}

/// A switch of one worker with the bystander pair (a, b) and `hostile`
/// vhost-user ports, all on that worker.
struct Rig {
    dir: TempDir,
    sw: Option<Switch>,
    a: Option<Arc<VhostUserPort>>,
    b: Option<Arc<VhostUserPort>>,
    hostile: Vec<Arc<VhostUserPort>>,
    socks: Vec<PathBuf>,
    fronts: Option<(Arc<VhostFrontendPort>, Arc<VhostFrontendPort>)>,
    stop: Arc<AtomicBool>,
    pump: Option<JoinHandle<Stream>>,
}

fn front(sock: &std::path::Path, name: &str) -> Arc<VhostFrontendPort> {
    let mut fc = FrontendConfig::new(sock);
    fc.queue_size = 256;
    fc.max_frame_b = 1518;
    Arc::new(VhostFrontendPort::new(name, fc).unwrap())
}

impl Rig {
    fn new(tag: &str, hostile: usize) -> Rig {
        let dir = TempDir::new(tag);
        let port = |name: &str| {
            let mut c = VhostUserConfig::new(dir.path(&format!("{name}.sock")));
            c.max_frame_b = 1518;
            Arc::new(VhostUserPort::new(name, c).unwrap())
        };
        let (a, b) = (port("a"), port("b"));
        let hostile: Vec<_> = (0..hostile).map(|i| port(&format!("h{i}"))).collect();
        let socks = (0..hostile.len())
            .map(|i| dir.path(&format!("h{i}.sock")))
            .collect();
        let sw = Switch::new(SwitchConfig::default(), Box::new(Steer { a: 0, b: 1 })).unwrap();
        assert_eq!(sw.add_port("a", a.clone(), Some(0)).unwrap(), 0);
        assert_eq!(sw.add_port("b", b.clone(), Some(0)).unwrap(), 1);
        for (i, h) in hostile.iter().enumerate() {
            sw.add_port(&format!("h{i}"), h.clone(), Some(0)).unwrap();
        }
        let fa = front(&dir.path("a.sock"), "fa");
        let fb = front(&dir.path("b.sock"), "fb");
        assert!(
            wait_until(Duration::from_secs(10), || fa.link_up()
                && fb.link_up()
                && a.wait_running(Duration::from_millis(1))
                && b.wait_running(Duration::from_millis(1))),
            "bystanders never linked: {} / {}",
            fa.last_error(),
            fb.last_error()
        );
        let stop = Arc::new(AtomicBool::new(false));
        let (f1, f2, s2) = (fa.clone(), fb.clone(), stop.clone());
        let pump = std::thread::spawn(move || stream(f1, f2, s2));
        Rig {
            dir,
            sw: Some(sw),
            a: Some(a),
            b: Some(b),
            hostile,
            socks,
            fronts: Some((fa, fb)),
            stop,
            pump: Some(pump),
        }
    }

    fn h(&self, i: usize) -> &VhostUserPort {
        &self.hostile[i]
    }

    fn c(&self, i: usize, name: &str) -> u64 {
        self.h(i)
            .counter(name)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    fn connect(&self, i: usize) -> Frontend {
        Frontend::connect(&self.socks[i])
    }

    /// A hostile guest with running rings, receive buffers offered and
    /// frames flowing both ways through its port.
    fn running_guest(&self, i: usize) -> Frontend {
        let f = Frontend::running(&self.socks[i], true);
        assert!(
            self.h(i).wait_running(Duration::from_secs(1)),
            "h{i}: the guest's rings never ran"
        );
        f.unwrap_or_else(|| panic!("h{i}: the switch never wrote to the guest's receive ring"))
    }

    /// An honest guest gets `n` frames through port `i` (counted by the
    /// switch), then leaves.
    fn honest_again(&self, i: usize, n: usize) {
        assert!(
            wait_until(Duration::from_secs(5), || !self.h(i).connected()),
            "port h{i} still holds the last guest"
        );
        let name = format!("h{i}");
        let rx0 = self.port_rx(&name);
        let mut f = self.connect(i);
        f.setup_device();
        f.setup_rings();
        assert!(
            self.h(i).wait_running(Duration::from_secs(5)),
            "h{i}: an honest guest's rings never ran: {:?}",
            self.h(i).backend_counters()
        );
        f.send_frames(n, 60, 0x77);
        assert!(
            wait_until(Duration::from_secs(10), || self.port_rx(&name)
                >= rx0 + n as u64),
            "h{i}: an honest guest's frames did not arrive: {} of {n}",
            self.port_rx(&name) - rx0
        );
        drop(f);
        assert!(wait_until(Duration::from_secs(5), || !self
            .h(i)
            .connected()));
    }

    fn port_rx(&self, name: &str) -> u64 {
        self.sw
            .as_ref()
            .unwrap()
            .port_stats()
            .into_iter()
            .find(|p| p.name == name)
            .map_or(0, |p| p.rx_packets)
    }

    /// Stops the bystander stream and checks it lost nothing.
    fn bystanders_lost_nothing(&mut self) {
        self.stop.store(true, Ordering::Release);
        let s = self.pump.take().unwrap().join().unwrap();
        eprintln!("bystander stream: {s:?}");
        assert!(s.sent > 0, "the bystander stream sent nothing");
        assert_eq!(s.error, None, "bystander stream out of order");
        assert_eq!(s.got, s.sent, "the bystander pair lost frames: {s:?}");
        let b = self.port_stat("b");
        assert!(
            b.drops.is_empty(),
            "the bystander's port dropped: {:?}",
            b.drops
        );
    }

    fn port_stat(&self, name: &str) -> fabric::PortStats {
        self.sw
            .as_ref()
            .unwrap()
            .port_stats()
            .into_iter()
            .find(|p| p.name == name)
            .unwrap()
    }

    /// Shuts everything down; true if that took less than `limit`. Past
    /// it, whatever is stuck is left to a helper thread (the test fails
    /// instead of hanging).
    fn shut_down_within(&mut self, limit: Duration) -> bool {
        self.stop.store(true, Ordering::Release);
        let parts = (
            self.pump.take(),
            self.sw.take(),
            self.a.take(),
            self.b.take(),
            std::mem::take(&mut self.hostile),
            self.fronts.take(),
        );
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (pump, sw, a, b, hostile, fronts) = parts;
            if let Some(p) = pump {
                let _ = p.join();
            }
            drop(fronts);
            if let Some(sw) = sw {
                sw.shutdown();
            }
            drop((a, b, hostile));
            let _ = tx.send(());
        });
        rx.recv_timeout(limit).is_ok()
    }
}

impl Drop for Rig {
    fn drop(&mut self) {
        if !self.shut_down_within(Duration::from_secs(15)) {
            eprintln!(
                "rig {}: shutdown still stuck after 15 s",
                self.dir.0.display()
            );
        }
    }
}

fn waits_for(what: &str, t: Duration, f: impl FnMut() -> bool) {
    assert!(wait_until(t, f), "{what}");
}

#[test]
fn a_guest_that_shrinks_its_memory_is_disconnected_and_nobody_else_notices() {
    let mut rig = Rig::new("guard-mem", 1);
    let lies = |r: &Rig| -> u64 {
        r.h(0)
            .backend_counters()
            .iter()
            .filter(|(n, _)| n.starts_with("lie_"))
            .map(|(_, v)| v)
            .sum()
    };
    // (what, truncate to, how the guest then touches the switch)
    let cases: [(&str, u64); 3] = [
        ("truncated to zero", 0),
        ("truncated to the middle of a ring", liar::ring_gpa(1).1),
        ("truncated under the receive buffers", liar::RX_BUF),
    ];
    for (what, len) in cases {
        let before = rig.c(0, "disconnects_mem_fault");
        let lies0 = lies(&rig);
        let mut f = rig.running_guest(0);
        f.truncate(len);
        // Nothing of ours touches the file past `len` from now on: kicks
        // (eventfds), and receive buffers offered again when the rings are
        // still there. The worker reads the rings on a kick and writes the
        // bystander's trickle into the receive buffers.
        let t0 = Instant::now();
        waits_for(
            &format!(
                "{what}: not disconnected: {:?}",
                rig.h(0).backend_counters()
            ),
            Duration::from_secs(10),
            || {
                if len >= liar::RX_BUF {
                    f.refill_rx();
                }
                f.kick(1);
                rig.c(0, "disconnects_mem_fault") == before + 1
            },
        );
        eprintln!("{what}: disconnected after {:?}", t0.elapsed());
        assert_eq!(lies(&rig), lies0, "{what}: zeroes counted as lies");
        drop(f);
        rig.honest_again(0, 32);
    }
    // A remap: a new memory table (a copy of the memory) mid-traffic, the
    // rings restart on it, frames flow; then that one is truncated.
    {
        let before = rig.c(0, "disconnects_mem_fault");
        let mut f = rig.running_guest(0);
        f.remap();
        let rx0 = rig.port_rx("h0");
        f.send_frames(16, 60, 0x66);
        waits_for("frames after the remap", Duration::from_secs(10), || {
            rig.port_rx("h0") >= rx0 + 16
        });
        f.truncate(0);
        waits_for(
            &format!("remap: not disconnected: {:?}", rig.h(0).backend_counters()),
            Duration::from_secs(10),
            || {
                f.kick(1);
                rig.c(0, "disconnects_mem_fault") == before + 1
            },
        );
        drop(f);
        rig.honest_again(0, 32);
    }
    // Truncated while the new table is being mapped: refused (the file is
    // short when checked) or survived (it shrank after), never a crash.
    for _ in 0..3 {
        let ends = |r: &Rig| r.c(0, "disconnects_mem_fault") + r.c(0, "disconnects_protocol");
        let before = ends(&rig);
        let mut f = rig.running_guest(0);
        f.remap_then_truncate();
        waits_for(
            &format!(
                "remap race: not disconnected: {:?}",
                rig.h(0).backend_counters()
            ),
            Duration::from_secs(10),
            || {
                f.kick(1);
                ends(&rig) == before + 1
            },
        );
        drop(f);
        rig.honest_again(0, 32);
    }
    assert!(ports::guard::replaced() > 0);
    rig.bystanders_lost_nothing();
}

/// Threads blocked writing to the file `fd` refers to, through any
/// descriptor of this process (the port holds its own copy of the fd).
fn writers_blocked_on_file(fd: RawFd) -> Vec<(RawFd, Vec<libc::pid_t>)> {
    let link = |n: &str| std::fs::read_link(format!("/proc/self/fd/{n}")).ok();
    let want = link(&fd.to_string());
    std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .flatten()
        .filter_map(|e| {
            let n = e.file_name().into_string().ok()?;
            (link(&n) == want).then(|| n.parse().ok())?
        })
        .map(|n| (n, ports::guard::writers_blocked_on(n)))
        .filter(|(_, t)| !t.is_empty())
        .collect()
}

#[test]
fn a_call_fd_that_blocks_cannot_freeze_the_worker() {
    let mut rig = Rig::new("guard-call", 1);
    for q in [0u32, 1] {
        // A full blocking pipe as the call fd, once the rings run.
        let before = rig.c(0, "disconnects_protocol");
        let errors = rig.c(0, "protocol_errors");
        let f = rig.running_guest(0);
        let (_r, w) = full_blocking_pipe();
        let _ = f.send(SET_VRING_CALL, &(q as u64).to_le_bytes(), &[w.as_raw_fd()]);
        // Traffic both ways: the worker would signal that call fd.
        f.kick(1);
        let refused = wait_until(Duration::from_secs(10), || {
            rig.c(0, "disconnects_protocol") == before + 1
        });
        assert!(
            refused,
            "pipe on ring {q}: not refused; threads blocked writing to it: {:?}; {:?}",
            writers_blocked_on_file(w.as_raw_fd()),
            rig.h(0).backend_counters()
        );
        assert!(rig.c(0, "protocol_errors") > errors);
        drop(f);
        rig.honest_again(0, 32);

        // An eventfd (accepted, made non-blocking), which the guest makes
        // blocking again and fills: the worker's next interrupt blocks
        // until the control thread interrupts it.
        let before = rig.c(0, "disconnects_notify_fd");
        let dropped = rig.c(0, "call_dropped");
        let freed = ports::guard::interrupted();
        let mut f = rig.running_guest(0);
        let call = f.call_fd(q as usize);
        fill(call);
        set_nonblocking(call, false);
        // Frames from the guest: releasing them interrupts it on ring 1;
        // the bystander's trickle interrupts it on ring 0.
        f.send_frames(8, 60, 0x33);
        let t0 = Instant::now();
        waits_for(
            &format!(
                "blocking eventfd on ring {q}: not disconnected: {:?}",
                rig.h(0).backend_counters()
            ),
            Duration::from_secs(10),
            || {
                f.kick(1);
                rig.c(0, "disconnects_notify_fd") == before + 1
            },
        );
        eprintln!(
            "blocking eventfd on ring {q}: disconnected after {:?}",
            t0.elapsed()
        );
        waits_for(
            "no thread left writing to the call eventfd",
            Duration::from_secs(10),
            || writers_blocked_on_file(call).is_empty(),
        );
        // The worker was freed by the watchdog (not by the disconnect):
        // its write failed and the interrupt was counted as dropped.
        assert!(
            ports::guard::interrupted() > freed,
            "no write was interrupted"
        );
        assert!(rig.c(0, "call_dropped") > dropped);
        drop(f);
        rig.honest_again(0, 32);

        // Full but non-blocking: interrupts are dropped and counted, the
        // guest stays connected and its frames keep arriving.
        let dropped = rig.c(0, "call_dropped");
        let connects = rig.c(0, "connects");
        let mut f = rig.running_guest(0);
        fill(f.call_fd(q as usize));
        let rx0 = rig.port_rx("h0");
        waits_for(
            &format!("full eventfd on ring {q}: nothing dropped, or no frame arrived"),
            Duration::from_secs(10),
            || {
                f.send_frames(4, 60, 0x44);
                rig.c(0, "call_dropped") > dropped && rig.port_rx("h0") > rx0
            },
        );
        assert!(
            rig.h(0).connected(),
            "a full eventfd is no reason to disconnect"
        );
        assert_eq!(rig.c(0, "connects"), connects + 1);
        drop(f);
        rig.honest_again(0, 32);
    }
    rig.bystanders_lost_nothing();
}

#[test]
fn a_guest_that_stalls_mid_message_is_disconnected_in_time() {
    // A message cut at every byte boundary of a header and a body (with
    // its memfd attached to the first piece, too); a guest that never
    // reads our replies.
    let cuts = liar::stall_cuts();
    let unread = cuts.len();
    let mut rig = Rig::new("guard-stall", unread + 1);
    let mut guests = Vec::new();
    for (i, (_, piece, with_fd)) in cuts.iter().enumerate() {
        let f = rig.running_guest(i);
        assert!(liar::send_cut(&f, piece, *with_fd));
        f.kick(1);
        guests.push(f);
    }
    let f = rig.running_guest(unread);
    liar::flood_unread(&f, 3000);
    guests.push(f);
    let t0 = Instant::now();
    let all = cuts.len() + 1;
    waits_for(
        "every stalled guest disconnected",
        DEADLINE + Duration::from_secs(15),
        || (0..all).all(|i| rig.c(i, "disconnects_stall") == 1),
    );
    let took = t0.elapsed();
    eprintln!("{all} stalled guests disconnected within {took:?}");
    for i in 0..all {
        let what = cuts.get(i).map_or("replies left unread", |c| c.0.as_str());
        assert_eq!(rig.c(i, "disconnects_stall"), 1, "{what}");
        for other in [
            "disconnects_protocol",
            "disconnects_hangup",
            "disconnects_lie",
        ] {
            assert_eq!(rig.c(i, other), 0, "{what}: ended as {other}");
        }
    }
    // Not before the deadline (the first guest stalled first).
    assert!(took + Duration::from_millis(300) >= DEADLINE, "{took:?}");
    drop(guests);
    for i in [0, 11, 12, all - 1] {
        rig.honest_again(i, 16);
    }
    rig.bystanders_lost_nothing();
}

#[test]
fn shutdown_is_bounded_whatever_the_guests_do() {
    let mut rig = Rig::new("guard-shutdown", 4);
    // h0 stalls mid-header, h1 makes its call fd block, h2 shrinks its
    // memory, h3 leaves its replies unread.
    let mut guests = Vec::new();
    let f = rig.running_guest(0);
    assert!(f.send_raw(&message(SET_VRING_NUM, &liar::state(1, 256))[..8], &[]));
    guests.push(f);
    let f = rig.running_guest(1);
    fill(f.call_fd(0));
    set_nonblocking(f.call_fd(0), false);
    guests.push(f);
    let f = rig.running_guest(2);
    f.truncate(0);
    f.kick(1);
    guests.push(f);
    let f = rig.running_guest(3);
    liar::flood_unread(&f, 3000);
    guests.push(f);
    std::thread::sleep(Duration::from_millis(100));
    let t0 = Instant::now();
    assert!(
        rig.shut_down_within(Duration::from_secs(6)),
        "switch and ports not down 6 s after the shutdown began"
    );
    eprintln!("shut down in {:?}", t0.elapsed());
    drop(guests);
}
