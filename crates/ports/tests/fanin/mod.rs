//! Several workers transmitting to one destination at once, the set-up
//! tap_tx_stress.rs and vhost_tx_reconnect.rs share: a switch whose logic
//! sends everything to port 0, one pipe per worker fed by its own thread
//! as fast as it goes (so the workers contend for the destination queue's
//! transmit lock), and the totals a conservation check needs.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use fabric::{
    pipe, Ctx, Logic, PipeConfig, Pkts, PortId, PortStats, Switch, SwitchConfig, Verdict,
};

/// Everything to port 0 (the destination under test).
struct ToZero;

impl Logic for ToZero {
    fn name(&self) -> &'static str {
        "to-zero"
    }
    fn classify(&self, _: &Ctx, _: PortId, _: &mut Pkts, v: &mut [Verdict]) {
        v.fill(Verdict::Port(0));
    }
}

/// A switch with `workers` workers that sends every frame to port 0.
pub fn switch_to_zero(workers: usize) -> Switch {
    Switch::new(
        SwitchConfig {
            workers: vec![None; workers],
            ..SwitchConfig::default()
        },
        Box::new(ToZero),
    )
    .unwrap()
}

/// The feeding threads, one pipe each.
pub struct Feeders {
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    threads: Vec<JoinHandle<()>>,
}

impl Feeders {
    /// Adds pipes `p0..` (pipe `w` polled by worker `w`) to `sw` and feeds
    /// each from its own thread, 32 frames at a time: `frame(w, seq)` is
    /// frame `seq` of pipe `w`.
    pub fn start(
        sw: &Switch,
        workers: usize,
        frame: impl Fn(usize, u32) -> Vec<u8> + Send + Sync + 'static,
    ) -> Feeders {
        let frame = Arc::new(frame);
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let mut threads = Vec::new();
        for w in 0..workers {
            let (p, mut pp) = pipe(&format!("p{w}"), PipeConfig::default()).unwrap();
            sw.add_port(&format!("p{w}"), Arc::new(p), Some(w)).unwrap();
            let (stop, sent, frame) = (stop.clone(), sent.clone(), frame.clone());
            threads.push(std::thread::spawn(move || {
                let mut seq = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let frames: Vec<Vec<u8>> = (0..32).map(|k| frame(w, seq + k)).collect();
                    let refs: Vec<&[u8]> = frames.iter().map(|f| f.as_slice()).collect();
                    let n = pp.send(0, &refs);
                    seq += n as u32;
                    sent.fetch_add(n as u64, Ordering::Relaxed);
                    if n < refs.len() {
                        std::thread::yield_now();
                    }
                    // The switch's outbound rings of the pipes are not used.
                    pp.recv(0, usize::MAX, |_| {});
                }
            }));
        }
        Feeders {
            stop,
            sent,
            threads,
        }
    }

    /// Stops and joins the feeders; returns how many frames the pipes took.
    pub fn stop(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        self.sent.load(Ordering::Relaxed)
    }
}

/// What the switch received on all ports, the stats of port `name`, and
/// the drops of all ports.
pub fn totals(sw: &Switch, name: &str) -> (u64, PortStats, u64) {
    let st = sw.port_stats();
    let rx: u64 = st.iter().map(|p| p.rx_packets).sum();
    let drops: u64 = st.iter().flat_map(|p| p.drops.iter().map(|d| d.1)).sum();
    let dst = st
        .into_iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no port {name}"));
    (rx, dst, drops)
}
