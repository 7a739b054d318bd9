//! The switch: a fabric (port table + logic), its worker threads, and the
//! control-path operations on them. Everything here is control path: it may
//! allocate and take locks the workers never take.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::batch::{MAX_BATCH, MIN_BATCH};
use crate::counters::WorkerCounters;
use crate::drop::DropReason;
use crate::fabric::{Injector, PortEntry, PortTable, MAX_WORKERS};
use crate::logic::{Ctx, GroupId, Logic, Verdict};
use crate::port::{Port, PortId};
use crate::sys;
use crate::worker::{self, LogicSlot, Mailbox, WakeupMode, WorkerCmd, WorkerShared};

/// Worker index the control path classifies as ([`Switch::classify_one`]):
/// above every real worker's, so it shares no per-worker state with them.
pub const CONTROL_WORKER: u16 = MAX_WORKERS as u16;
/// How long a control operation waits for every worker to come round, by
/// default ([`SwitchConfig::control_timeout`]). A worker that is merely off
/// its CPU (a busy host, or a VM whose vCPU the hypervisor holds back) comes
/// round well within it; one stuck in a logic or a stopped process does not.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Switch::new`] waits for its worker threads to start.
pub const WORKER_START_TIMEOUT: Duration = SYNC_TIMEOUT;
/// How long `remove_port` waits for the workers to drop the port's queues,
/// by default ([`SwitchConfig::control_timeout`]).
pub const REMOVE_TIMEOUT: Duration = Duration::from_secs(5);

/// Errors of the switch's control operations.
#[derive(Debug, PartialEq, Eq)]
pub enum SwitchError {
    /// A setting is out of range.
    BadConfig(String),
    /// No port with that name or id.
    NoSuchPort(String),
    /// A port with that name exists.
    DuplicatePort(String),
    /// The port table is full.
    TableFull,
    /// No worker with that index.
    NoSuchWorker(usize),
    /// A system call failed.
    Os(String),
    /// A worker did not confirm a control operation in time (stuck in a
    /// logic, starved of CPU, stopped process). What happened to the
    /// operation is in the message and in the method's documentation.
    Timeout(String),
}

impl std::fmt::Display for SwitchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SwitchError::BadConfig(m) => write!(f, "bad switch config: {m}"),
            SwitchError::NoSuchPort(p) => write!(f, "no port {p:?}"),
            SwitchError::DuplicatePort(p) => write!(f, "a port named {p:?} exists"),
            SwitchError::TableFull => write!(f, "port table full"),
            SwitchError::NoSuchWorker(w) => write!(f, "no worker {w}"),
            SwitchError::Os(m) => write!(f, "system error: {m}"),
            SwitchError::Timeout(m) => write!(f, "timed out: {m}"),
        }
    }
}

impl std::error::Error for SwitchError {}

/// A logic taken out of service by [`Switch::park_logic`], kept whole,
/// and the stand-in that replaced it.
pub struct ParkedLogic {
    /// The logic (a restore puts it in a new slot, with new per-worker
    /// states: its workers dropped theirs when it was parked).
    parked: Arc<dyn Logic>,
    ours: Arc<LogicSlot>,
}

impl ParkedLogic {
    /// Name of the parked logic.
    pub fn name(&self) -> &'static str {
        self.parked.name()
    }
}

/// Switch settings.
#[derive(Clone, Debug)]
pub struct SwitchConfig {
    /// Frames per batch, `MIN_BATCH..=MAX_BATCH`.
    pub batch: usize,
    /// Size of the port table.
    pub max_ports: usize,
    /// One entry per worker: the CPU to pin it to, if any.
    pub workers: Vec<Option<usize>>,
    /// Wake-up model.
    pub wakeup: WakeupMode,
    /// Adaptive mode: the longest a worker may let frames wait to save CPU,
    /// µs (`crate::wakeup`; 0 = never sleep while frames arrive).
    pub latency_budget_us: u32,
    /// How long a control operation (adding or removing a port, replacing
    /// the logic, resetting counters) waits for every worker to come round
    /// before it answers `SwitchError::Timeout` naming the late ones
    /// ([`SYNC_TIMEOUT`] by default).
    pub control_timeout: Duration,
}

impl Default for SwitchConfig {
    fn default() -> Self {
        Self {
            batch: crate::batch::DEFAULT_BATCH,
            max_ports: 1024,
            workers: vec![None],
            wakeup: WakeupMode::Adaptive,
            latency_budget_us: crate::wakeup::DEFAULT_BUDGET_US,
            control_timeout: SYNC_TIMEOUT,
        }
    }
}

struct Worker {
    shared: Arc<WorkerShared>,
    cpu: Option<usize>,
    thread: Option<JoinHandle<()>>,
    /// Its wake-up prober (adaptive mode).
    prober: Option<JoinHandle<()>>,
}

/// A running switch.
pub struct Switch {
    cfg: SwitchConfig,
    table: Arc<ArcSwap<PortTable>>,
    logic: Arc<ArcSwap<LogicSlot>>,
    workers: Vec<Worker>,
    /// Which worker owns each port's receive queues.
    owners: Mutex<Vec<(PortId, usize)>>,
    control: Mutex<()>,
    next_worker: Mutex<usize>,
    cycles_hz: u64,
    /// The control path's sender (packet-out); workers never take it.
    injector: Mutex<Injector>,
}

/// Snapshot of one port's counters.
#[derive(Clone, Debug, serde::Serialize)]
pub struct PortStats {
    /// Port id.
    pub id: PortId,
    /// Port name.
    pub name: String,
    /// Backend kind.
    pub kind: &'static str,
    /// Peer attached.
    pub link_up: bool,
    /// Frames received.
    pub rx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Receive bursts that found a ring full (push-back), all queues.
    pub rx_ring_full: u64,
    /// Per queue: (rx_packets, rx_bytes, tx_packets, tx_bytes, rx_ring_full).
    pub queues: Vec<[u64; 5]>,
    /// Drops by reason name (only non-zero).
    pub drops: Vec<(&'static str, u64)>,
    /// Backend counters.
    pub backend: Vec<(&'static str, u64)>,
}

/// Snapshot of one worker's counters: also the worker part of turnoutd's
/// `stats` JSON (its keys are the field names; the fields marked default
/// were added later, so an older snapshot still reads).
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct WorkerStats {
    /// Worker index.
    pub id: usize,
    /// Pinned CPU.
    pub cpu: Option<usize>,
    /// Linux thread id.
    pub tid: i32,
    /// Receive queues it owns.
    pub rx_queues: u64,
    /// Frames received.
    pub packets: u64,
    /// Non-empty batches.
    pub batches: u64,
    /// Cycles in iterations that moved packets.
    pub busy_cycles: u64,
    /// Cycles idle (polling nothing or sleeping).
    pub idle_cycles: u64,
    /// Of `busy_cycles`, the cycles spent in kicks to peers (system calls:
    /// eventfd writes, AF_XDP `sendto`).
    #[serde(default)]
    pub kick_cycles: u64,
    /// Time spent moving packets, ns.
    pub busy_ns: u64,
    /// Time spent polling nothing or asleep, ns.
    pub idle_ns: u64,
    /// Times it went to sleep in epoll waiting for notifications.
    pub sleeps: u64,
    /// Sleeps ended by frames arriving on a queue.
    #[serde(default)]
    pub wakeups: u64,
    /// Armed queues found holding frames after a sleep no notification
    /// ended (timeout, wake probe, command): kicks the peer never sent.
    #[serde(default)]
    pub missed_kicks: u64,
    /// Naps after a batch (interrupt moderation under dense traffic).
    #[serde(default)]
    pub naps: u64,
    /// Gaps after a small batch of a dense flow (poll and interrupt
    /// regimes): spins before the next poll so that it finds a bigger
    /// batch (idle time, no system call).
    #[serde(default)]
    pub gaps: u64,
    /// Back-off sleeps between polls of idle queues without notifications
    /// (50 µs each, outside epoll; their time is in `asleep_ns`).
    #[serde(default)]
    pub backoffs: u64,
    /// Wall time asleep (sleeps and naps), ns.
    #[serde(default)]
    pub asleep_ns: u64,
    /// The thread's own CPU time inside sleeps and naps, ns: what its
    /// wake-ups cost.
    #[serde(default)]
    pub sleep_cpu_ns: u64,
    /// Of the time asleep, what the worker waited on a run queue for its
    /// CPU as a nap or a probed sleep ended (another thread held it), ns:
    /// left out of the nap overshoots and wake-up latencies the policy
    /// judges sleeping by (a polling worker waits for such a thread too).
    #[serde(default)]
    pub held_ns: u64,
    /// 1 while the worker copies frames of 1 KiB or more into memif
    /// buffers with non-temporal stores, 0 while it uses ordinary ones
    /// (`fabric::copymode`: the way that cost its whole path less when last
    /// probed).
    #[serde(default)]
    pub copy_stream_memif: u64,
    /// The same for vhost-user guests' buffers.
    #[serde(default)]
    pub copy_stream_vhost_user: u64,
    /// Probes of the other way of copying since the worker started.
    #[serde(default)]
    pub copy_probes: u64,
    /// Of those, the ones that changed the way.
    #[serde(default)]
    pub copy_switches: u64,
    /// The adaptive wake-up policy's state (`why` = `poll_mode` and zeros
    /// in poll mode): `regime` and `why`, `budget_ns`, `nap_ns`,
    /// `sleep_after_ns`, the wake-up latency it measured (`wake_p50_ns`,
    /// `wake_p99_ns`, `wake_samples`), the contention evidence
    /// (`poll_p99_ns`, `poll_slow_epochs`, `contention_signal`,
    /// `rq_wait_permille`), the timer overshoot (`timer_p50_ns`,
    /// `timer_p99_ns`), `ring_fill_ns`, and the CPU costs `sleep_cpu_ns`,
    /// `nap_cpu_ns` (docs/turnoutd.md).
    #[serde(default)]
    pub policy: crate::wakeup::PolicyView,
    /// busy_cycles / packets.
    pub cycles_per_packet: f64,
}

impl Switch {
    /// Starts the workers with `logic`.
    pub fn new(cfg: SwitchConfig, logic: Box<dyn Logic>) -> Result<Self, SwitchError> {
        if !(MIN_BATCH..=MAX_BATCH).contains(&cfg.batch) {
            return Err(SwitchError::BadConfig(format!(
                "batch {} not in {MIN_BATCH}..={MAX_BATCH}",
                cfg.batch
            )));
        }
        if cfg.workers.is_empty() || cfg.workers.len() > MAX_WORKERS {
            return Err(SwitchError::BadConfig(format!(
                "workers must be 1..={MAX_WORKERS}"
            )));
        }
        if cfg.latency_budget_us > crate::wakeup::MAX_BUDGET_US {
            return Err(SwitchError::BadConfig(format!(
                "latency_budget_us {} not in 0..={}",
                cfg.latency_budget_us,
                crate::wakeup::MAX_BUDGET_US
            )));
        }
        if cfg.max_ports < 2 || cfg.max_ports >= u16::MAX as usize {
            return Err(SwitchError::BadConfig(format!(
                "max_ports {} not in 2..65535",
                cfg.max_ports
            )));
        }
        if cfg.control_timeout.is_zero() {
            return Err(SwitchError::BadConfig(
                "control_timeout must be longer than 0".into(),
            ));
        }
        let ncpu = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1);
        for cpu in cfg.workers.iter().flatten() {
            if *cpu >= ncpu.max(libc_cpus()) {
                return Err(SwitchError::BadConfig(format!("cpu {cpu} does not exist")));
            }
        }
        let table = Arc::new(ArcSwap::from_pointee(PortTable::new(cfg.max_ports)));
        let logic = Arc::new(ArcSwap::from_pointee(LogicSlot::new(
            Arc::from(logic),
            cfg.workers.len(),
        )));
        let mut workers = Vec::new();
        // Each worker says when it has started (its descriptors opened).
        let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
        for (i, cpu) in cfg.workers.iter().enumerate() {
            let shared = Arc::new(WorkerShared {
                id: i as u16,
                counters: WorkerCounters::default(),
                mailbox: Mailbox::new().map_err(|e| SwitchError::Os(e.to_string()))?,
                tid: AtomicI32::new(0),
                epoch: AtomicU64::new(0),
                probe: worker::Probe::new().map_err(|e| SwitchError::Os(e.to_string()))?,
            });
            // Started from here, not from the worker: it runs where this
            // thread may (turnoutd keeps that off the workers' CPUs).
            let prober = if cfg.wakeup == WakeupMode::Adaptive {
                let s = shared.clone();
                Some(
                    std::thread::Builder::new()
                        .name(format!("turnout-p{i}"))
                        .spawn(move || worker::probe(s))
                        .map_err(|e| SwitchError::Os(e.to_string()))?,
                )
            } else {
                None
            };
            let (s, t, l, b, m, cpu) = (
                shared.clone(),
                table.clone(),
                logic.clone(),
                cfg.batch,
                cfg.wakeup,
                *cpu,
            );
            let budget = cfg.latency_budget_us;
            let started = started_tx.clone();
            let thread = std::thread::Builder::new()
                .name(format!("turnout-w{i}"))
                .spawn(move || {
                    if let Some(cpu) = cpu {
                        let _ = sys::pin_to_cpu(cpu);
                    }
                    let tid = sys::gettid();
                    s.tid.store(tid, Ordering::Relaxed);
                    if m == WakeupMode::Adaptive {
                        s.probe.open_sched(tid);
                    }
                    let _ = started.send(());
                    worker::run(s, t, l, b, m, budget)
                })
                .map_err(|e| SwitchError::Os(e.to_string()))?;
            workers.push(Worker {
                shared,
                cpu,
                thread: Some(thread),
                prober,
            });
        }
        // The workers' start: what they open is open when the switch is
        // (a worker slower than this, on a CPU taken by something else,
        // leaves its scheduler account to its prober).
        let deadline = Instant::now() + WORKER_START_TIMEOUT;
        for _ in &workers {
            let left = deadline.saturating_duration_since(Instant::now());
            if started_rx.recv_timeout(left).is_err() {
                break;
            }
        }
        Ok(Self {
            cfg,
            table,
            logic,
            workers,
            owners: Mutex::new(Vec::new()),
            control: Mutex::new(()),
            next_worker: Mutex::new(0),
            cycles_hz: sys::calibrate_cycles_hz(),
            injector: Mutex::new(Injector::new(0)),
        })
    }

    /// The settings the switch runs with.
    pub fn config(&self) -> &SwitchConfig {
        &self.cfg
    }

    /// Adds a port; its receive queues go to `worker` (default: round-robin
    /// over workers, one port at a time). Returns its id once every worker
    /// sees the port and its owner polls its queues. When a worker does not
    /// come round within the control timeout, the port is taken out again (its
    /// queues are dropped by their worker when it comes round) and
    /// `SwitchError::Timeout` is returned: nothing was added.
    pub fn add_port(
        &self,
        name: &str,
        port: Arc<dyn Port>,
        worker: Option<usize>,
    ) -> Result<PortId, SwitchError> {
        let _g = self.control.lock();
        let cur = self.table.load();
        if cur.by_name(name).is_some() {
            return Err(SwitchError::DuplicatePort(name.to_string()));
        }
        let id = cur.free_id().ok_or(SwitchError::TableFull)?;
        let w = match worker {
            Some(w) if w >= self.workers.len() => return Err(SwitchError::NoSuchWorker(w)),
            Some(w) => w,
            None => {
                let mut n = self.next_worker.lock();
                let w = *n % self.workers.len();
                *n += 1;
                w
            }
        };
        let entry = Arc::new(PortEntry::new(id, name, port.clone()));
        let queues = entry.queues();
        self.table.store(Arc::new(cur.with(entry)));
        for q in 0..queues {
            if let Some(rxq) = port.take_rx(q) {
                self.workers[w].shared.mailbox.post(WorkerCmd::AddRx {
                    port: id,
                    queue: q,
                    rxq,
                });
            }
        }
        if let Err(e) = self.sync_workers() {
            self.table.store(Arc::new(self.table.load().without(id)));
            // After its AddRx commands: the mailbox is in order.
            self.workers[w].shared.mailbox.post(WorkerCmd::RemovePort {
                port: id,
                done: Arc::new(AtomicBool::new(false)),
            });
            return Err(e);
        }
        self.owners.lock().push((id, w));
        Ok(id)
    }

    /// Waits until every worker has started a loop iteration after this
    /// call: from then on each sees the current port table, logic and
    /// commands posted before. A worker asleep in epoll is woken for it.
    /// Bounded: a worker that does not come round within the control
    /// timeout ([`SwitchConfig::control_timeout`]: stuck in a logic, starved
    /// of CPU, stopped process) is not waited
    /// for, and the answer is `SwitchError::Timeout` naming it.
    fn sync_workers(&self) -> Result<(), SwitchError> {
        let limit = self.cfg.control_timeout;
        let deadline = Instant::now() + limit;
        let mut late = Vec::new();
        for (i, w) in self.workers.iter().enumerate() {
            let e0 = w.shared.epoch.load(Ordering::SeqCst);
            w.shared.mailbox.kick();
            while w.shared.epoch.load(Ordering::SeqCst) <= e0 {
                if Instant::now() >= deadline {
                    late.push(i);
                    break;
                }
                std::thread::sleep(Duration::from_micros(20));
            }
        }
        if late.is_empty() {
            Ok(())
        } else {
            Err(SwitchError::Timeout(format!(
                "worker(s) {late:?} did not come round within {limit:?}"
            )))
        }
    }

    /// Removes a port under traffic: no new frames are sent to it, its
    /// receive queues are dropped by their worker, and frames in flight
    /// finish with the table snapshot they started with. When a worker does
    /// not confirm within the control timeout
    /// ([`SwitchConfig::control_timeout`]) the answer is
    /// `SwitchError::Timeout`: the port is out of the table all the same
    /// and that worker drops its queues when it comes round.
    pub fn remove_port(&self, name: &str) -> Result<(), SwitchError> {
        let _g = self.control.lock();
        let cur = self.table.load();
        let id = cur
            .by_name(name)
            .ok_or_else(|| SwitchError::NoSuchPort(name.to_string()))?
            .id;
        self.table.store(Arc::new(cur.without(id)));
        let mut waits = Vec::new();
        for w in &self.workers {
            let done = Arc::new(AtomicBool::new(false));
            w.shared.mailbox.post(WorkerCmd::RemovePort {
                port: id,
                done: done.clone(),
            });
            waits.push(done);
        }
        let limit = self.cfg.control_timeout;
        let deadline = Instant::now() + limit;
        while waits.iter().any(|d| !d.load(Ordering::Acquire)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
        self.owners.lock().retain(|(p, _)| *p != id);
        self.logic.load().logic().port_removed(id);
        let late: Vec<usize> = waits
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.load(Ordering::Acquire))
            .map(|(i, _)| i)
            .collect();
        if late.is_empty() {
            Ok(())
        } else {
            Err(SwitchError::Timeout(format!(
                "port {name:?} is out of the table but worker(s) {late:?} did not drop \
                 its queues within {limit:?}"
            )))
        }
    }

    /// Id of the port named `name`.
    pub fn port_id(&self, name: &str) -> Option<PortId> {
        self.table.load().by_name(name).map(|e| e.id)
    }

    /// The current port table snapshot.
    pub fn ports(&self) -> Arc<PortTable> {
        self.table.load_full()
    }

    /// Worker owning port `id`'s receive queues.
    pub fn port_worker(&self, id: PortId) -> Option<usize> {
        self.owners
            .lock()
            .iter()
            .find(|(p, _)| *p == id)
            .map(|(_, w)| *w)
    }

    /// Replaces the logic; takes effect at each worker's next batch. Batches
    /// in flight finish with the old logic, so nothing is lost or doubled.
    /// Returns once every worker classifies with the new logic. When a
    /// worker does not come round within the control timeout the answer is
    /// `SwitchError::Timeout`: the new logic is installed all the same and
    /// that worker takes it at its next batch.
    pub fn replace_logic(&self, logic: Box<dyn Logic>) -> Result<(), SwitchError> {
        let _g = self.control.lock();
        self.logic.store(Arc::new(self.slot(Arc::from(logic))));
        self.sync_workers()
    }

    /// Replaces the logic with `logic` but keeps the one it replaces, with
    /// all its state (flow tables, counters), in the returned
    /// [`ParkedLogic`] for [`Switch::restore_logic`]. For turnoutd's
    /// OpenFlow fail-standalone mode: a learning bridge stands in while no
    /// controller is connected. Synchronised with the workers as
    /// [`Switch::replace_logic`] (on a timeout the stand-in is installed
    /// all the same).
    pub fn park_logic(&self, logic: Box<dyn Logic>) -> (ParkedLogic, Result<(), SwitchError>) {
        let _g = self.control.lock();
        let ours = Arc::new(self.slot(Arc::from(logic)));
        let parked = self.logic.swap(ours.clone()).logic_arc().clone();
        (ParkedLogic { parked, ours }, self.sync_workers())
    }

    /// Puts back the logic [`Switch::park_logic`] parked, if the stand-in
    /// is still the running logic (Ok(false) if it was replaced since,
    /// e.g. by `logic.replace`: that one stays and the parked one is
    /// dropped).
    pub fn restore_logic(&self, p: ParkedLogic) -> Result<bool, SwitchError> {
        let _g = self.control.lock();
        let prev = self
            .logic
            .compare_and_swap(&p.ours, Arc::new(self.slot(p.parked)));
        if !Arc::ptr_eq(&*prev, &p.ours) {
            return Ok(false);
        }
        self.sync_workers().map(|()| true)
    }

    /// Runs `f` with the current logic (for its commands).
    pub fn with_logic<R>(&self, f: impl FnOnce(&dyn Logic) -> R) -> R {
        let g = self.logic.load();
        f(g.logic())
    }

    /// A slot for `logic` with its states for this switch's workers
    /// (control path).
    fn slot(&self, logic: Arc<dyn Logic>) -> LogicSlot {
        LogicSlot::new(logic, self.workers.len())
    }

    /// Sends `frame` from the control path (an OpenFlow packet-out) to
    /// port `dst`, as a worker would: under the destination's transmit
    /// lock, never waiting for room. Ok(true) if it reached the ring,
    /// Ok(false) if the destination dropped it (counted there under its
    /// reason: link_down, oversize, tx_full...), Err if there is no such
    /// port. Never stalls a worker: it holds a destination lock only as
    /// long as a worker's reservation does.
    pub fn inject(&self, dst: PortId, frame: &mut [u8]) -> Result<bool, SwitchError> {
        let t = self.table.load();
        let e = t
            .get(dst)
            .ok_or_else(|| SwitchError::NoSuchPort(dst.to_string()))?;
        Ok(self.injector.lock().send(e, frame))
    }

    /// Runs the logic on one frame from the control path, as if received
    /// on `ingress` (an OpenFlow packet-out to `OFPP_TABLE`); the frame is
    /// rewritten in place and may shrink (`pop_vlan`) or grow (`push_vlan`:
    /// `frame` is then replaced by the longer frame): what is left of it
    /// afterwards is `frame[range]`, returned with the verdict, and with
    /// the copies the logic made of it on the way (an output before a
    /// header change: [`crate::PktMut::copy_out`]), each with its verdict.
    /// Classified as worker [`CONTROL_WORKER`], which owns no per-worker
    /// state.
    pub fn classify_one(
        &self,
        ingress: PortId,
        frame: &mut Vec<u8>,
    ) -> (Verdict, std::ops::Range<usize>, Copies) {
        let ctx = Ctx {
            now_ns: sys::now_ns(),
            worker: CONTROL_WORKER,
        };
        let mut v = [Verdict::Drop(DropReason::NoDestination)];
        let mut frames = [std::mem::take(frame)];
        let base = frames[0].as_ptr() as usize;
        let cap = frames[0].len();
        // A view inside the buffer (rewritten, maybe narrowed) is returned
        // as a range of it; one the logic lengthened lives in the call's
        // scratch and is copied out.
        let (range, grown, copies) = crate::batch::with_frames(&mut frames, ingress, 0, |pkts| {
            self.with_logic(|l| l.classify(&ctx, ingress, pkts, &mut v));
            let d = pkts[0].data();
            let start = (d.as_ptr() as usize).wrapping_sub(base);
            let (cp, cv) = pkts.copies();
            let copies: Vec<(Verdict, Vec<u8>)> = cv
                .iter()
                .zip(cp)
                .map(|(v, p)| (*v, p.data().to_vec()))
                .collect();
            if start <= cap && d.len() <= cap - start {
                (start..start + d.len(), None, copies)
            } else {
                (0..d.len(), Some(d.to_vec()), copies)
            }
        });
        let [f] = frames;
        *frame = grown.unwrap_or(f);
        (v[0], range, copies)
    }

    /// The current logic's punt queue ([`Logic::punt`]), if it has one:
    /// what the control plane pops punted frames from.
    pub fn punt(&self) -> Option<Arc<crate::punt::Punt>> {
        self.with_logic(|l| l.punt())
    }

    /// Members of the current logic's group `g`.
    pub fn group_members(&self, g: GroupId) -> Vec<PortId> {
        self.with_logic(|l| l.group_members(g).to_vec())
    }

    /// Ids of the ports present.
    pub fn port_ids(&self) -> Vec<PortId> {
        self.table.load().present().to_vec()
    }

    /// Measured cycle-counter frequency.
    pub fn cycles_hz(&self) -> u64 {
        self.cycles_hz
    }

    /// Every port's id and whether its link is up (control path; lighter
    /// than [`Switch::port_stats`]).
    pub fn port_links(&self) -> Vec<(PortId, bool)> {
        let t = self.table.load();
        t.present()
            .iter()
            .filter_map(|id| t.get(*id))
            .map(|e| (e.id, e.port.link_up()))
            .collect()
    }

    /// Counters of every port.
    pub fn port_stats(&self) -> Vec<PortStats> {
        let t = self.table.load();
        t.present()
            .iter()
            .filter_map(|id| t.get(*id))
            .map(|e| {
                let c = &e.counters;
                PortStats {
                    id: e.id,
                    name: e.name.clone(),
                    kind: e.port.info().kind,
                    link_up: e.port.link_up(),
                    rx_packets: c.sum(|q| &q.rx_packets),
                    rx_bytes: c.sum(|q| &q.rx_bytes),
                    tx_packets: c.sum(|q| &q.tx_packets),
                    tx_bytes: c.sum(|q| &q.tx_bytes),
                    rx_ring_full: c.sum(|q| &q.rx_ring_full),
                    queues: c
                        .queues
                        .iter()
                        .map(|q| {
                            [
                                q.rx_packets.load(Ordering::Relaxed),
                                q.rx_bytes.load(Ordering::Relaxed),
                                q.tx_packets.load(Ordering::Relaxed),
                                q.tx_bytes.load(Ordering::Relaxed),
                                q.rx_ring_full.load(Ordering::Relaxed),
                            ]
                        })
                        .collect(),
                    drops: DropReason::ALL
                        .iter()
                        .map(|r| (r.name(), c.drops(*r)))
                        .filter(|(_, n)| *n != 0)
                        .collect(),
                    backend: e.port.backend_counters(),
                }
            })
            .collect()
    }

    /// Counters of every worker.
    pub fn worker_stats(&self) -> Vec<WorkerStats> {
        let hz = self.cycles_hz.max(1) as u128;
        self.workers
            .iter()
            .map(|w| {
                let c = &w.shared.counters;
                let (busy, idle, pk) = (
                    c.busy_cycles.load(Ordering::Relaxed),
                    c.idle_cycles.load(Ordering::Relaxed),
                    c.packets.load(Ordering::Relaxed),
                );
                WorkerStats {
                    id: w.shared.id as usize,
                    cpu: w.cpu,
                    tid: w.shared.tid.load(Ordering::Relaxed),
                    rx_queues: c.rx_queues.load(Ordering::Relaxed),
                    packets: pk,
                    batches: c.batches.load(Ordering::Relaxed),
                    busy_cycles: busy,
                    idle_cycles: idle,
                    kick_cycles: c.kick_cycles.load(Ordering::Relaxed),
                    busy_ns: (busy as u128 * 1_000_000_000 / hz) as u64,
                    idle_ns: (idle as u128 * 1_000_000_000 / hz) as u64,
                    sleeps: c.sleeps.load(Ordering::Relaxed),
                    wakeups: c.wakeups.load(Ordering::Relaxed),
                    missed_kicks: c.missed_kicks.load(Ordering::Relaxed),
                    naps: c.naps.load(Ordering::Relaxed),
                    gaps: c.gaps.load(Ordering::Relaxed),
                    backoffs: c.backoffs.load(Ordering::Relaxed),
                    asleep_ns: c.asleep_ns.load(Ordering::Relaxed),
                    sleep_cpu_ns: c.sleep_cpu_ns.load(Ordering::Relaxed),
                    held_ns: c.held_ns.load(Ordering::Relaxed),
                    copy_stream_memif: c.copy_stream_memif.load(Ordering::Relaxed),
                    copy_stream_vhost_user: c.copy_stream_vhost_user.load(Ordering::Relaxed),
                    copy_probes: c.copy_probes.load(Ordering::Relaxed),
                    copy_switches: c.copy_switches.load(Ordering::Relaxed),
                    policy: if self.cfg.wakeup == WakeupMode::Adaptive {
                        c.policy.view()
                    } else {
                        crate::wakeup::PolicyView {
                            why: crate::wakeup::Why::PollMode,
                            ..Default::default()
                        }
                    },
                    cycles_per_packet: if pk == 0 {
                        0.0
                    } else {
                        busy as f64 / pk as f64
                    },
                }
            })
            .collect()
    }

    /// Zeroes every counter.
    pub fn reset_stats(&self) {
        let t = self.table.load();
        for id in t.present() {
            if let Some(e) = t.get(*id) {
                e.counters.reset();
                // Again under each queue's transmit lock, which every
                // writer of those counters holds (a batch in flight would
                // otherwise store back what it read before).
                for q in 0..e.port.info().queues.min(e.counters.queues.len() as u16) {
                    let _l = e.port.tx(q).tx_lock().lock();
                    e.counters.reset_tx(q as usize);
                }
            }
        }
        // What a worker alone writes (its counters, its queues' receive
        // counters) it zeroes itself, after the stores above: a batch in
        // flight would otherwise store back what it read before.
        let mut waits = Vec::new();
        for w in &self.workers {
            w.shared.counters.reset();
            if w.thread.is_none() {
                continue;
            }
            let done = Arc::new(AtomicBool::new(false));
            w.shared
                .mailbox
                .post(WorkerCmd::ResetCounters { done: done.clone() });
            waits.push(done);
        }
        // Bounded, like a port's removal: a worker that does not come round
        // (stuck, stopped) zeroes them when it does.
        let deadline = Instant::now() + self.cfg.control_timeout;
        while waits.iter().any(|d| !d.load(Ordering::Acquire)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Stops the workers and waits for them.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        for w in &self.workers {
            w.shared.mailbox.post(WorkerCmd::Stop);
        }
        for w in &mut self.workers {
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
            w.shared.probe.stop();
            if let Some(t) = w.prober.take() {
                t.thread().unpark();
                let _ = t.join();
            }
        }
    }
}

impl Drop for Switch {
    fn drop(&mut self) {
        self.stop();
    }
}

fn libc_cpus() -> usize {
    // Pinning to a CPU outside our affinity mask but online is allowed.
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_CONF) };
    if n > 0 {
        n as usize
    } else {
        1
    }
}

/// Copies of a frame the logic made on the control path, each with its
/// verdict and its bytes ([`Switch::classify_one`]).
pub type Copies = Vec<(Verdict, Vec<u8>)>;
