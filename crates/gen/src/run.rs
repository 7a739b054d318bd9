//! The roles: set up (validate, open ports, wait for peers, pin), run the
//! loop of the role, and build the document.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use clap::ValueEnum;
use fabric::{Port, RxBatch, RxQueue};
use serde_json::json;

use crate::cli::{FwdArgs, General, ReflectArgs, Role, RxArgs, Traffic, TxArgs, TxrxArgs};
use crate::engine::{forward_burst, FwdStats, Receiver, Rewrite, SendPlan, Sender};
use crate::frame::{FrameGen, FrameSpec};
use crate::ports::{open_all_and_wait, open_and_wait, OpenError};
use crate::report::{interval_line, Doc, FwdSection, PortSection, RxSection, TxSection, SCHEMA};
use crate::spec::PortSpec;
use crate::sys::{
    now_ns, pin_to_cpu, snapshot_requested, stop_requested, stops, thread_cpu_ns, wait_readable,
    OwnedTx, MAX_WAIT_FDS,
};
use wire::MacAddr;

/// Frames per receive burst.
pub const RX_BATCH: usize = 256;

/// A failure with its exit code.
#[derive(Debug)]
pub struct Failure {
    /// 1 (run time), 2 (bad option), 3 (peer never came up).
    pub code: i32,
    /// Message for stderr.
    pub msg: String,
}

impl Failure {
    fn usage(msg: impl Into<String>) -> Self {
        Failure {
            code: 2,
            msg: msg.into(),
        }
    }
    fn runtime(msg: impl Into<String>) -> Self {
        Failure {
            code: 1,
            msg: msg.into(),
        }
    }
}

impl From<OpenError> for Failure {
    fn from(e: OpenError) -> Self {
        let code = match e {
            OpenError::PeerAbsent(_) => 3,
            OpenError::Failed(_) => 1,
            OpenError::Unsupported(_) => 2,
        };
        Failure {
            code,
            msg: e.to_string(),
        }
    }
}

/// Watches a sender's progress: one that gets no frame accepted for
/// `--stall-s` (default 5 s) ends the run (`stopped_by: "stalled"`, exit
/// code 1): the peer stopped draining or went away.
struct Stall {
    last_packets: u64,
    since: u64,
    limit_ns: u64,
}

impl Stall {
    fn new(now: u64, g: &General) -> Self {
        Stall {
            last_packets: 0,
            since: now,
            limit_ns: (g.stall_s * 1e9) as u64,
        }
    }

    /// True when `packets` (all frames sent, warm-up included) did not move
    /// for the limit.
    #[inline]
    fn stalled(&mut self, now: u64, packets: u64) -> bool {
        if packets != self.last_packets {
            self.last_packets = packets;
            self.since = now;
            return false;
        }
        now - self.since > self.limit_ns
    }
}

fn stall_error(port: &dyn Port, g: &General) -> String {
    format!(
        "the port accepted no frame for {} s (link {}): the peer stopped draining its ring or went away",
        g.stall_s,
        if port.link_up() { "up" } else { "down" }
    )
}

/// Polls without frames before an interrupt-mode receiver sleeps.
const IDLE_POLLS: u32 = 256;
/// Longest sleep, so duration ends and signals are noticed promptly.
const SLEEP_MS: i32 = 10;
/// An interrupt-mode receiver that woke to a ring half full polls this
/// long before it sleeps again: six times what a default ring holds at
/// 1 Mpps, and never long enough to starve the other tasks of its CPU. A
/// SCHED_FIFO receiver that polled for a second left a normal task beside
/// it (its own sender) no CPU until the kernel's fair server took the CPU
/// from the receiver for 50 ms at once; the sender then sent its second of
/// backlog while the receiver could not run, and the switch dropped 91,471
/// of 10^6 frames toward it (`tx_full`) at 100 kpps.
const POLL_AFTER_LATE_WAKE_NS: u64 = 50_000_000;

/// Interrupt-mode idling of the receive queues of a role (`mode=interrupt`):
/// after [`IDLE_POLLS`] empty polls, enable notifications, re-check (no
/// lost wake-up), and sleep on the fds. A sleep must never cost a frame:
/// when the first poll after one finds a ring half full or more
/// ([`RxQueue::fill_level`]), waking up took longer here than the ring
/// lasts at this rate, and the receiver polls for
/// [`POLL_AFTER_LATE_WAKE_NS`] before it sleeps again (counted in
/// `late_wakes`). Poll mode keeps notifications off and never sleeps.
struct Idle {
    on: bool,
    empty: u32,
    /// The last poll ended a sleep.
    woke: bool,
    /// No sleep before this time (ns).
    poll_until_ns: u64,
    /// Sleeps after which a ring was half full.
    late_wakes: u64,
    /// Sleeps on the fds (each ended by a sender's kick unless it timed
    /// out).
    sleeps: u64,
}

impl Idle {
    /// `late_wakes` for the document (interrupt mode only).
    fn late_wakes(&self) -> Option<u64> {
        self.on.then_some(self.late_wakes)
    }

    /// `sleeps` for the document (interrupt mode only).
    fn sleeps(&self) -> Option<u64> {
        self.on.then_some(self.sleeps)
    }

    /// Writes the interrupt-mode counters into `d`.
    fn report(&self, d: &mut Doc) {
        d.late_wakes = self.late_wakes();
        d.sleeps = self.sleeps();
    }

    fn new(interrupt: bool, a: &mut [RxQ], b: &mut [RxQ]) -> Self {
        for q in a.iter_mut().chain(b.iter_mut()) {
            q.set_notify(false);
        }
        Idle {
            on: interrupt,
            empty: 0,
            woke: false,
            poll_until_ns: 0,
            late_wakes: 0,
            sleeps: 0,
        }
    }

    #[inline]
    fn after_poll(&mut self, got: usize, a: &mut [RxQ], b: &mut [RxQ]) {
        if self.woke {
            self.woke = false;
            let late = a
                .iter()
                .chain(b.iter())
                .filter_map(|q| q.fill_level())
                .any(|(filled, cap)| filled * 2 >= cap);
            if late {
                self.late_wakes += 1;
                self.poll_until_ns = now_ns() + POLL_AFTER_LATE_WAKE_NS;
            }
        }
        if got > 0 || !self.on {
            self.empty = 0;
            return;
        }
        self.empty += 1;
        if self.empty < IDLE_POLLS {
            return;
        }
        self.empty = 0;
        if self.poll_until_ns != 0 {
            if now_ns() < self.poll_until_ns {
                return;
            }
            self.poll_until_ns = 0;
        }
        let mut waiting = false;
        let mut fds = [0; MAX_WAIT_FDS];
        let mut n = 0;
        for q in a.iter_mut().chain(b.iter_mut()) {
            waiting |= q.set_notify(true);
            if let Some(fd) = q.notify_fd() {
                if n < fds.len() {
                    fds[n] = fd;
                    n += 1;
                }
            }
        }
        if !waiting && n > 0 {
            self.sleeps += 1;
            wait_readable(&fds[..n], SLEEP_MS);
            self.woke = true;
        }
        for q in a.iter_mut().chain(b.iter_mut()) {
            q.ack_notify();
            q.set_notify(false);
        }
    }
}

/// Runs the role and returns its document.
pub fn run(role: &Role) -> Result<Doc, Failure> {
    match role {
        Role::Tx(a) => run_tx(a),
        Role::Rx(a) => run_rx(a),
        Role::Txrx(a) => run_txrx(a),
        Role::Reflect(a) => run_reflect(a),
        Role::Fwd(a) => run_fwd(a),
    }
}

/// Per-interval JSON lines on stderr.
struct Interval {
    every_ns: u64,
    start: u64,
    next: u64,
    prev: u64,
    prev_tx: u64,
    prev_rx: u64,
    buf: String,
}

impl Interval {
    fn new(g: &General, start: u64) -> Option<Self> {
        let every_ns = (g.interval_s? * 1e9) as u64;
        Some(Interval {
            every_ns: every_ns.max(1_000_000),
            start,
            next: start + every_ns.max(1_000_000),
            prev: start,
            prev_tx: 0,
            prev_rx: 0,
            buf: String::with_capacity(256),
        })
    }

    #[inline]
    fn tick(&mut self, now: u64, tx: u64, rx: u64, lost: u64) {
        if now < self.next {
            return;
        }
        let dt = (now - self.prev) as f64 / 1e9;
        let t = (now - self.start) as f64 / 1e9;
        interval_line(
            &mut self.buf,
            t,
            dt,
            tx - self.prev_tx,
            rx - self.prev_rx,
            lost,
            tx,
            rx,
        );
        eprintln!("{}", self.buf);
        self.prev = now;
        self.prev_tx = tx;
        self.prev_rx = rx;
        while self.next <= now {
            self.next += self.every_ns;
        }
    }
}

fn tick(iv: &mut Option<Interval>, now: u64, tx: u64, rx: u64, lost: u64) {
    if let Some(i) = iv {
        i.tick(now, tx, rx, lost);
    }
}

fn pin(g: &General) -> Result<(), Failure> {
    if let Some(cpu) = g.cpu {
        pin_to_cpu(cpu)
            .map_err(|e| Failure::usage(format!("--cpu {cpu}: cannot pin to it: {e}")))?;
    }
    Ok(())
}

fn wait_of(g: &General) -> Duration {
    Duration::from_secs_f64(g.wait_peer_s)
}

/// An owned receive queue.
type RxQ = Box<dyn RxQueue>;

/// Every receive queue the role uses on `port` (all queue pairs of a
/// multi-queue vhost-user port, polled in turn: one burst each per round).
fn take_rx(port: &Arc<dyn Port>, spec: &PortSpec, what: &str) -> Result<Vec<RxQ>, Failure> {
    spec.queue_ids()
        .map(|q| {
            port.take_rx(q).ok_or_else(|| {
                Failure::runtime(format!("{what}: receive queue {q} is not available"))
            })
        })
        .collect()
}

/// Every transmit queue the role uses on `port`, in queue order.
///
/// # Safety
/// The calling thread must be the only sender on these queues for as long
/// as the result lives (turnout-gen's data path is one thread).
unsafe fn owned_txs<'a>(port: &'a Arc<dyn Port>, spec: &PortSpec) -> Vec<OwnedTx<'a>> {
    spec.queue_ids()
        // SAFETY: the caller's contract.
        .map(|q| unsafe { OwnedTx::new(port.tx(q)) })
        .collect()
}

/// One burst from each of `qs` (round robin over the queues, one burst
/// each per call); frames received.
#[inline]
fn poll_all(r: &mut Receiver, qs: &mut [RxQ], batch: &mut RxBatch) -> usize {
    let mut got = 0;
    for (i, q) in qs.iter_mut().enumerate() {
        got += r.poll_queue(i, q.as_mut(), batch);
    }
    got
}

/// Kicks out what the kernel left in these transmit rings (nothing new to
/// publish: the frames would otherwise wait for the next traffic, seconds
/// later, or a sleep's end). Called on a poll that found nothing.
fn kick_left(tx: &mut [OwnedTx<'_>]) {
    for t in tx {
        t.kick_if_pending();
    }
}

/// Forwards one burst from each receive queue `rx[q]` to transmit queue
/// `tx[q % tx.len()]`: a frame leaves on the queue pair it came in on
/// (reflect) or its counterpart on the other port (fwd).
#[inline]
fn forward_all(
    rx: &mut [RxQ],
    batch: &mut RxBatch,
    tx: &mut [OwnedTx<'_>],
    rewrite: Rewrite,
    touch: bool,
    st: &mut FwdStats,
) -> usize {
    let n = tx.len();
    let mut got = 0;
    for (q, rxq) in rx.iter_mut().enumerate() {
        got += forward_burst(rxq.as_mut(), batch, &mut tx[q % n], rewrite, touch, st);
    }
    got
}

fn frame_spec(t: &Traffic) -> Result<FrameSpec, Failure> {
    let (ds, dd): (IpAddr, IpAddr) = if t.ipv6 {
        ("fd00::1".parse().unwrap(), "fd00::2".parse().unwrap())
    } else {
        ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap())
    };
    let src_ip = t.src_ip.unwrap_or(ds);
    let dst_ip = t.dst_ip.unwrap_or(dd);
    for (name, ip) in [("--src-ip", src_ip), ("--dst-ip", dst_ip)] {
        if ip.is_ipv6() != t.ipv6 {
            return Err(Failure::usage(if t.ipv6 {
                format!("{name} {ip} is not an IPv6 address, but --ipv6 was given")
            } else {
                format!("{name} {ip} is an IPv6 address: add --ipv6")
            }));
        }
    }
    Ok(FrameSpec {
        src_mac: t.src_mac,
        dst_mac: t.dst_mac,
        src_ip,
        dst_ip,
        src_port: t.src_port,
        dst_port: t.dst_port,
        vlan: t.vlan,
        flows: t.flows,
        vary: t.vary.clone(),
    })
}

/// The largest frame a generator sends (bytes, without FCS).
fn largest(gen: &FrameGen) -> u32 {
    gen.template_sizes().into_iter().max().unwrap_or(0) as u32
}

/// The frame generator for the traffic options, and the frame sizes it
/// cycles through (bytes, without FCS; IMIX's smallest raised to fit the
/// payload header). A bad combination is a usage failure (exit 2).
pub fn frame_gen(t: &Traffic) -> Result<(FrameGen, Vec<u32>), Failure> {
    let spec = frame_spec(t)?;
    let mut sizes = t.size_pattern();
    if t.imix {
        // IMIX's 64 B frames become the smallest frame that carries the
        // payload header (docs/turnout-gen.md).
        let min = spec.min_size().map_err(|e| Failure::usage(e.to_string()))?;
        for s in &mut sizes {
            *s = (*s).max(min);
        }
    }
    let g = FrameGen::new(&spec, &sizes).map_err(|e| {
        let opt = if t.imix {
            "--imix"
        } else if t.sizes.is_empty() {
            "--size"
        } else {
            "--sizes"
        };
        Failure::usage(format!("{opt}: {e}"))
    })?;
    Ok((g, sizes))
}

fn plan(t: &Traffic) -> SendPlan {
    SendPlan {
        stream: t.stream,
        burst: t.burst,
        bunch: t.bunch,
        rate_pps: t.rate_pps,
        warmup_ns: (t.warmup_s * 1e9) as u64,
        duration_ns: (t.duration_s * 1e9) as u64,
        count: t.count,
    }
}

fn traffic_config(t: &Traffic, sizes: &[u32]) -> serde_json::Value {
    let mut c = json!({
        "rate_pps": t.rate_pps,
        "burst": t.burst,
        "flows": t.flows,
        "vary": t.vary.iter().filter_map(|v| v.to_possible_value()).map(|v| v.get_name().to_string()).collect::<Vec<_>>(),
        "stream": t.stream,
        "ipv6": t.ipv6,
        "warmup_s": t.warmup_s,
        "cooldown_s": t.cooldown_s,
        "src_mac": t.src_mac.to_string(),
        "dst_mac": t.dst_mac.to_string(),
    });
    let m = c.as_object_mut().unwrap();
    if sizes.len() == 1 {
        m.insert("size_b".into(), json!(sizes[0]));
    } else {
        m.insert("sizes_b".into(), json!(sizes));
    }
    match t.count {
        Some(n) => m.insert("count".into(), json!(n)),
        None => m.insert("duration_s".into(), json!(t.duration_s)),
    };
    if let Some(v) = t.vlan {
        m.insert("vlan".into(), json!(v));
    }
    c
}

fn general_config(c: &mut serde_json::Value, g: &General) {
    let m = c.as_object_mut().unwrap();
    if let Some(cpu) = g.cpu {
        m.insert("cpu".into(), json!(cpu));
    }
}

fn doc(role: &'static str, stopped_by: &'static str, config: serde_json::Value) -> Doc {
    Doc {
        schema: SCHEMA,
        role,
        version: env!("CARGO_PKG_VERSION"),
        stopped_by,
        config,
        tx: None,
        rx: None,
        fwd: None,
        ports: Vec::new(),
        error: None,
        thread_cpu_ns: None,
        late_wakes: None,
        sleeps: None,
    }
}

/// Prints `d` as one line on stdout now (a SIGUSR1 snapshot; the run goes on).
fn print_snapshot(d: &Doc) {
    use std::io::Write;
    if let Ok(line) = serde_json::to_string(d) {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    }
}

fn sender<'a>(
    port: &'a Arc<dyn Port>,
    spec: &PortSpec,
    gen: FrameGen,
    t: &Traffic,
    start: u64,
) -> Result<Sender<'a>, Failure> {
    // SAFETY: this thread is the only user of the port's transmit queues
    // for the whole run (turnout-gen is single-threaded on its data path).
    let txs = unsafe { owned_txs(port, spec) };
    let max = port.info().max_frame_b;
    Sender::multi(txs, gen, plan(t), start, max).map_err(|o| {
        Failure::usage(format!(
            "frame size {} B is larger than the port carries ({} B)",
            o.size, o.max_frame_b
        ))
    })
}

/// The cool-down after sending: `s` seconds, or until a signal that
/// arrives during it (one that ended the sending does not end it).
/// Frames the kernel left in the sender's rings are kicked out meanwhile.
fn cooldown_wait(s: f64, sender: &mut Sender<'_>) {
    let end = now_ns() + (s * 1e9) as u64;
    let at = stops();
    while now_ns() < end && stops() == at {
        sender.kick_pending();
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The sending loop of `tx` and `txrx`: sends until the plan is done, a
/// signal arrives or the port stalls; `each` runs once per round before
/// sending (txrx receives there) and returns (received, lost) for the
/// interval lines. Returns why it stopped and the stall error, if any.
fn send_until_done(
    s: &mut Sender<'_>,
    port: &dyn Port,
    t: &Traffic,
    g: &General,
    start: u64,
    mut each: impl FnMut() -> (u64, u64),
) -> (&'static str, Option<String>) {
    let mut iv = Interval::new(g, start);
    let mut stall = Stall::new(start, g);
    loop {
        // Receive first: `now` then stamps the burst sent right after it
        // (one clock read per round: `each` reads its own if it sends).
        let (rx, lost) = each();
        let now = now_ns();
        if stop_requested() {
            s.stop(now);
            return ("signal", None);
        }
        s.poll(now);
        if s.done() {
            return (
                if t.count.is_some() {
                    "count"
                } else {
                    "duration"
                },
                None,
            );
        }
        let sent = s.stats.packets + s.stats.warmup_packets;
        if stall.stalled(now, sent) {
            s.stop(now);
            return ("stalled", Some(stall_error(port, g)));
        }
        tick(&mut iv, now, sent, rx, lost);
    }
}

fn run_tx(a: &TxArgs) -> Result<Doc, Failure> {
    let (gen, sizes) = frame_gen(&a.traffic)?;
    let spec = a.port.sized_for(largest(&gen));
    let port = open_and_wait(&spec, "port", wait_of(&a.general))?;
    pin(&a.general)?;
    let start = now_ns();
    let mut s = sender(&port, &a.port, gen, &a.traffic, start)?;
    let (stopped_by, error) =
        send_until_done(&mut s, port.as_ref(), &a.traffic, &a.general, start, || {
            (0, 0)
        });
    let window = s.window(now_ns());
    cooldown_wait(a.traffic.cooldown_s, &mut s);
    let mut config = traffic_config(&a.traffic, &sizes);
    config["port"] = json!(a.port.to_string());
    general_config(&mut config, &a.general);
    let mut d = doc("tx", stopped_by, config);
    d.error = error;
    d.tx = Some(TxSection::new(&s.stats, window, s.requested_pps()));
    d.ports.push(PortSection::of("port", port.as_ref()));
    Ok(d)
}

/// The reverse of `t` (`--bidir`): stream + 1, addresses swapped, MACs
/// `src_mac2`/`dst_mac2` where given.
fn reverse_of(
    t: &Traffic,
    src_mac2: Option<MacAddr>,
    dst_mac2: Option<MacAddr>,
) -> Result<Traffic, Failure> {
    let mut r = t.clone();
    r.stream = t.stream + 1;
    r.src_mac = src_mac2.unwrap_or(t.dst_mac);
    r.dst_mac = dst_mac2.unwrap_or(t.src_mac);
    std::mem::swap(&mut r.src_ip, &mut r.dst_ip);
    std::mem::swap(&mut r.src_port, &mut r.dst_port);
    if r.stream > 0x7FFF {
        return Err(Failure::usage(format!(
            "--bidir uses stream {} + 1: the stream must be below 32767",
            t.stream
        )));
    }
    Ok(r)
}

/// One direction a `txrx` run sends: its traffic and the port it leaves
/// on (an index into the run's ports).
struct Flow {
    traffic: Traffic,
    tx: usize,
}

/// The ports of a `txrx` run, each once, and the flows sent on them:
/// --port/--rx-port first, then each --pair; with --bidir each pair's
/// reverse right after it.
struct TxrxPlan {
    specs: Vec<(PortSpec, String)>,
    /// (rx port, tx port) of each pair: where its frames and, with
    /// --bidir, its reverse's arrive.
    pairs: Vec<(usize, usize)>,
    flows: Vec<Flow>,
}

fn txrx_plan(a: &TxrxArgs, largest_b: u32) -> Result<TxrxPlan, Failure> {
    let mut specs: Vec<(PortSpec, String)> = Vec::new();
    let mut add = |spec: &PortSpec, name: String, sized: bool| -> Result<usize, Failure> {
        let text = spec.to_string();
        if specs.iter().any(|(s, _)| s.to_string() == text) {
            return Err(Failure::usage(format!(
                "{text} is named twice: each pair needs ports of its own"
            )));
        }
        let spec = if sized {
            spec.sized_for(largest_b)
        } else {
            spec.clone()
        };
        specs.push((spec, name));
        Ok(specs.len() - 1)
    };
    let mut flows = Vec::with_capacity(2 + 2 * a.pair.len());
    let mut pairs = Vec::with_capacity(1 + a.pair.len());
    // A pair's flow, with --bidir its reverse, and where they arrive.
    let mut push = |t: Traffic, tx, rx, src_mac2, dst_mac2| -> Result<(), Failure> {
        if a.bidir {
            let r = reverse_of(&t, src_mac2, dst_mac2)?;
            flows.push(Flow { traffic: t, tx });
            flows.push(Flow { traffic: r, tx: rx });
        } else {
            flows.push(Flow { traffic: t, tx });
        }
        pairs.push((rx, tx));
        Ok(())
    };
    let tx = add(&a.port, "port".into(), true)?;
    let rx = match &a.rx_port {
        Some(r) => add(r, "rx_port".into(), a.bidir)?,
        None => tx,
    };
    push(a.traffic.clone(), tx, rx, a.src_mac2, a.dst_mac2)?;
    for (i, p) in a.pair.iter().enumerate() {
        let n = i + 1;
        let tx = add(&p.port, format!("pair{n}.port"), true)?;
        let rx = match &p.rx_port {
            Some(r) => add(r, format!("pair{n}.rx_port"), a.bidir)?,
            None if a.bidir => {
                return Err(Failure::usage(format!(
                    "--pair {n}: --bidir needs its rx-port=SPEC"
                )))
            }
            None => tx,
        };
        let mut t = a.traffic.clone();
        t.stream = p.stream;
        t.src_mac = p.src_mac.unwrap_or(t.src_mac);
        t.dst_mac = p.dst_mac.unwrap_or(t.dst_mac);
        t.src_ip = p.src_ip.or(t.src_ip);
        t.dst_ip = p.dst_ip.or(t.dst_ip);
        push(t, tx, rx, p.src_mac2, p.dst_mac2)?;
    }
    let mut seen = std::collections::BTreeSet::new();
    for f in &flows {
        if !seen.insert(f.traffic.stream) {
            return Err(Failure::usage(format!(
                "stream {} is sent twice: each pair needs a stream of its own{}",
                f.traffic.stream,
                if a.bidir {
                    " (with --bidir, its reverse takes the next id)"
                } else {
                    ""
                }
            )));
        }
    }
    Ok(TxrxPlan {
        specs,
        pairs,
        flows,
    })
}

fn run_txrx(a: &TxrxArgs) -> Result<Doc, Failure> {
    let (gen, sizes) = frame_gen(&a.traffic)?;
    // Transmit buffers sized for the largest frame sent (every flow has
    // the same sizes).
    let tp = txrx_plan(a, largest(&gen))?;
    let named: Vec<(&PortSpec, &str)> = tp.specs.iter().map(|(s, n)| (s, n.as_str())).collect();
    let ports = open_all_and_wait(&named, wait_of(&a.general))?;
    let mut rxq = Vec::new();
    for &(rx, tx) in &tp.pairs {
        rxq.extend(take_rx(&ports[rx], &tp.specs[rx].0, &tp.specs[rx].1)?);
        if a.bidir {
            rxq.extend(take_rx(&ports[tx], &tp.specs[tx].0, &tp.specs[tx].1)?);
        }
    }
    pin(&a.general)?;
    let mut batch = RxBatch::with_capacity(RX_BATCH);
    let mut r = Receiver::new(a.touch);
    let start = now_ns();
    let mut senders = Vec::with_capacity(tp.flows.len());
    let mut first_gen = Some(gen);
    for f in &tp.flows {
        let g = match first_gen.take() {
            Some(g) => g,
            None => frame_gen(&f.traffic)?.0,
        };
        senders.push(sender(
            &ports[f.tx],
            &tp.specs[f.tx].0,
            g,
            &f.traffic,
            start,
        )?);
    }
    let main = &tp.flows[0];
    let (first, rest) = senders.split_first_mut().expect("one flow at least");
    // One round besides the first flow's sending: every receive queue,
    // then every other flow's sender.
    let mut round = |r: &mut Receiver, rest: &mut [Sender<'_>]| {
        poll_all(r, &mut rxq, &mut batch);
        for s in rest.iter_mut() {
            s.poll(now_ns());
        }
    };
    let (stopped_by, error) = send_until_done(
        first,
        ports[main.tx].as_ref(),
        &main.traffic,
        &a.general,
        start,
        || {
            round(&mut r, rest);
            (r.packets + r.warmup, r.lost())
        },
    );
    // The other flows finish their own count or duration (they run a
    // round behind the first), for at most a second more; a signal or a
    // stall ends them with the first.
    if matches!(stopped_by, "count" | "duration") {
        let end = now_ns() + 1_000_000_000;
        while rest.iter().any(|s| !s.done()) && !stop_requested() && now_ns() < end {
            round(&mut r, rest);
        }
    }
    let now = now_ns();
    for s in rest.iter_mut() {
        s.stop(now);
    }
    let window = first.window(now);
    // Cool-down: keep receiving the frames still in flight, also when a
    // signal ended the sending (a signal during the cool-down ends it), until
    // every frame sent has come back or the cool-down is over: a long one
    // costs only the runs that lose frames.
    let end = now_ns() + (a.traffic.cooldown_s * 1e9) as u64;
    let at = stops();
    while stops() == at {
        // What the kernel left in the transmit rings goes out now, not
        // with the next run's traffic.
        for s in senders.iter_mut() {
            s.kick_pending();
        }
        poll_all(&mut r, &mut rxq, &mut batch);
        let back = tp
            .flows
            .iter()
            .zip(&senders)
            .all(|(f, s)| r.all_in(f.traffic.stream, s.sent_seq()));
        if back || now_ns() >= end {
            break;
        }
    }
    let mut config = traffic_config(&a.traffic, &sizes);
    config["port"] = json!(a.port.to_string());
    config["rx_port"] = json!(a.rx_port.as_ref().unwrap_or(&a.port).to_string());
    config["touch"] = json!(a.touch);
    config["bidir"] = json!(a.bidir);
    if !a.pair.is_empty() {
        config["pairs"] = a
            .pair
            .iter()
            .zip(tp.flows.iter().step_by(if a.bidir { 2 } else { 1 }).skip(1))
            .map(|(p, f)| {
                json!({
                    "port": p.port.to_string(),
                    "rx_port": p.rx_port.as_ref().unwrap_or(&p.port).to_string(),
                    "stream": f.traffic.stream,
                    "src_mac": f.traffic.src_mac.to_string(),
                    "dst_mac": f.traffic.dst_mac.to_string(),
                })
            })
            .collect();
    }
    general_config(&mut config, &a.general);
    let mut d = doc("txrx", stopped_by, config);
    d.error = error;
    for (f, s) in tp.flows.iter().zip(&senders) {
        r.finish_stream(f.traffic.stream, s.sent_seq());
    }
    d.tx = Some(if senders.len() == 1 {
        TxSection::new(&senders[0].stats, window, senders[0].requested_pps())
    } else {
        TxSection::sum(
            tp.flows
                .iter()
                .zip(&senders)
                .enumerate()
                .map(|(i, (f, s))| {
                    let w = if i == 0 { window } else { s.window(now) };
                    let mut t = TxSection::new(&s.stats, w, s.requested_pps());
                    t.stream = Some(f.traffic.stream);
                    t
                })
                .collect(),
        )
    });
    d.rx = Some(RxSection::new(&r, a.touch));
    for ((_, name), p) in tp.specs.iter().zip(&ports) {
        d.ports.push(PortSection::of(name, p.as_ref()));
    }
    Ok(d)
}

fn run_rx(a: &RxArgs) -> Result<Doc, Failure> {
    let port = open_and_wait(&a.port, "port", wait_of(&a.general))?;
    let mut rxq = take_rx(&port, &a.port, "port")?;
    pin(&a.general)?;
    let mut batch = RxBatch::with_capacity(RX_BATCH);
    let mut r = Receiver::new(a.touch);
    let start = now_ns();
    let cpu0 = thread_cpu_ns();
    let end = a.duration_s.map(|d| start + (d * 1e9) as u64);
    let mut iv = Interval::new(&a.general, start);
    let mut idle = Idle::new(a.port.interrupt(), &mut rxq, &mut []);
    let stopped_by;
    loop {
        if stop_requested() {
            stopped_by = "signal";
            break;
        }
        let got = poll_all(&mut r, &mut rxq, &mut batch);
        idle.after_poll(got, &mut rxq, &mut []);
        let now = now_ns();
        if end.is_some_and(|e| now >= e) {
            stopped_by = "duration";
            break;
        }
        if snapshot_requested() {
            let mut d = doc("rx", "snapshot", json!({ "port": a.port.to_string() }));
            d.rx = Some(RxSection::new(&r, a.touch));
            d.thread_cpu_ns = Some(thread_cpu_ns().saturating_sub(cpu0));
            idle.report(&mut d);
            print_snapshot(&d);
        }
        tick(&mut iv, now, 0, r.packets + r.warmup, r.lost());
    }
    let mut config = json!({ "port": a.port.to_string(), "touch": a.touch });
    if let Some(d) = a.duration_s {
        config["duration_s"] = json!(d);
    }
    general_config(&mut config, &a.general);
    let mut d = doc("rx", stopped_by, config);
    d.rx = Some(RxSection::new(&r, a.touch));
    d.thread_cpu_ns = Some(thread_cpu_ns().saturating_sub(cpu0));
    idle.report(&mut d);
    d.ports.push(PortSection::of("port", port.as_ref()));
    Ok(d)
}

fn run_reflect(a: &ReflectArgs) -> Result<Doc, Failure> {
    let port = open_and_wait(&a.port, "port", wait_of(&a.general))?;
    let mut rxq = take_rx(&port, &a.port, "port")?;
    pin(&a.general)?;
    // SAFETY: this thread is the only sender on the port's queues.
    let mut tx = unsafe { owned_txs(&port, &a.port) };
    let mut batch = RxBatch::with_capacity(RX_BATCH);
    let mut st = FwdStats::default();
    let start = now_ns();
    let cpu0 = thread_cpu_ns();
    let end = a.duration_s.map(|d| start + (d * 1e9) as u64);
    let mut iv = Interval::new(&a.general, start);
    let mut idle = Idle::new(a.port.interrupt(), &mut rxq, &mut []);
    let stopped_by;
    loop {
        if stop_requested() {
            stopped_by = "signal";
            break;
        }
        let got = forward_all(
            &mut rxq,
            &mut batch,
            &mut tx,
            Rewrite::SwapMacs,
            false,
            &mut st,
        );
        if got == 0 {
            kick_left(&mut tx);
        }
        idle.after_poll(got, &mut rxq, &mut []);
        let now = now_ns();
        if end.is_some_and(|e| now >= e) {
            stopped_by = "duration";
            break;
        }
        if snapshot_requested() {
            let mut d = doc("reflect", "snapshot", json!({ "port": a.port.to_string() }));
            d.fwd = Some(FwdSection::new(
                vec![("reflect", st.clone())],
                (now - start) as f64 / 1e9,
            ));
            d.thread_cpu_ns = Some(thread_cpu_ns().saturating_sub(cpu0));
            idle.report(&mut d);
            print_snapshot(&d);
        }
        tick(&mut iv, now, st.packets, st.received, 0);
    }
    let dur = (now_ns() - start) as f64 / 1e9;
    let mut config = json!({ "port": a.port.to_string() });
    general_config(&mut config, &a.general);
    let mut d = doc("reflect", stopped_by, config);
    d.fwd = Some(FwdSection::new(vec![("reflect", st)], dur));
    d.thread_cpu_ns = Some(thread_cpu_ns().saturating_sub(cpu0));
    idle.report(&mut d);
    d.ports.push(PortSection::of("port", port.as_ref()));
    Ok(d)
}

fn fwd_doc(
    a: &FwdArgs,
    stopped_by: &'static str,
    ab: &FwdStats,
    ba: &FwdStats,
    dur: f64,
    cpu0: u64,
) -> Doc {
    let mut config = json!({
        "port": a.port.to_string(), "port2": a.port2.to_string(), "bidir": a.bidir, "touch": a.touch,
    });
    if let Some(m) = a.dst_mac {
        config["dst_mac"] = json!(m.to_string());
    }
    if let Some(m) = a.dst_mac2 {
        config["dst_mac2"] = json!(m.to_string());
    }
    general_config(&mut config, &a.general);
    let mut d = doc("fwd", stopped_by, config);
    let mut dirs = vec![("a_to_b", ab.clone())];
    if a.bidir {
        dirs.push(("b_to_a", ba.clone()));
    }
    d.fwd = Some(FwdSection::new(dirs, dur));
    d.thread_cpu_ns = Some(thread_cpu_ns().saturating_sub(cpu0));
    d
}

fn run_fwd(a: &FwdArgs) -> Result<Doc, Failure> {
    let mut both = open_all_and_wait(
        &[(&a.port, "port"), (&a.port2, "port2")],
        wait_of(&a.general),
    )?;
    let pb = both.pop().expect("two ports");
    let pa = both.pop().expect("two ports");
    let mut rx_a = take_rx(&pa, &a.port, "port")?;
    let mut rx_b = if a.bidir {
        take_rx(&pb, &a.port2, "port2")?
    } else {
        Vec::new()
    };
    pin(&a.general)?;
    // SAFETY: this thread is the only sender on the used queue of both
    // ports.
    let mut tx_b = unsafe { owned_txs(&pb, &a.port2) };
    // SAFETY: as above.
    let mut tx_a = unsafe { owned_txs(&pa, &a.port) };
    let mut batch = RxBatch::with_capacity(RX_BATCH);
    let (mut ab, mut ba) = (FwdStats::default(), FwdStats::default());
    let start = now_ns();
    let cpu0 = thread_cpu_ns();
    let end = a.duration_s.map(|d| start + (d * 1e9) as u64);
    let mut iv = Interval::new(&a.general, start);
    let interrupt = a.port.interrupt() && (!a.bidir || a.port2.interrupt());
    let mut idle = Idle::new(interrupt, &mut rx_a, &mut rx_b);
    let stopped_by;
    loop {
        if stop_requested() {
            stopped_by = "signal";
            break;
        }
        let mut got = forward_all(
            &mut rx_a,
            &mut batch,
            &mut tx_b,
            Rewrite::SetDst(a.dst_mac),
            a.touch,
            &mut ab,
        );
        // (rx_b is empty without --bidir)
        got += forward_all(
            &mut rx_b,
            &mut batch,
            &mut tx_a,
            Rewrite::SetDst(a.dst_mac2),
            a.touch,
            &mut ba,
        );
        if got == 0 {
            kick_left(&mut tx_b);
            kick_left(&mut tx_a);
        }
        idle.after_poll(got, &mut rx_a, &mut rx_b);
        let now = now_ns();
        if end.is_some_and(|e| now >= e) {
            stopped_by = "duration";
            break;
        }
        if snapshot_requested() {
            let mut d = fwd_doc(a, "snapshot", &ab, &ba, (now - start) as f64 / 1e9, cpu0);
            d.ports.push(PortSection::of("port", pa.as_ref()));
            d.ports.push(PortSection::of("port2", pb.as_ref()));
            idle.report(&mut d);
            print_snapshot(&d);
        }
        tick(
            &mut iv,
            now,
            ab.packets + ba.packets,
            ab.received + ba.received,
            0,
        );
    }
    let dur = (now_ns() - start) as f64 / 1e9;
    let mut d = fwd_doc(a, stopped_by, &ab, &ba, dur, cpu0);
    idle.report(&mut d);
    d.ports.push(PortSection::of("port", pa.as_ref()));
    d.ports.push(PortSection::of("port2", pb.as_ref()));
    Ok(d)
}
