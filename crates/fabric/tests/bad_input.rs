//! Bad input against the worker loop and its wake-up policy: a
//! peer that stops reading, a queue that never drains, a burst of ten
//! times a ring. The switch drops what cannot go with a reason and a
//! counter, never blocks another port, and goes back to its regime (and to
//! sleep) once the burst is over. Each test runs at the default latency
//! budget and at the power-saving one (1000 µs, where the worker may nap
//! between passes while the burst comes). One worker, the adaptive wake-up
//! (its prober measures this host), two independent pairs of pipe ports:
//! `a` (0) to `b` (1), `c` (2) to `d` (3); `d`'s ring holds every frame
//! the tests send it, so a slow receiving thread on a busy machine drops
//! nothing there and any loss on the c-d pair would be the switch's.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{fill, parse, FromFrame};
use fabric::{pipe, PipeConfig, PipePeer, Regime, Switch, SwitchConfig};

const RING: usize = 256;
/// `d`'s ring: more than any test sends it.
const BIG_RING: usize = 32_768;

/// The power-saving budget (docs/turnoutd.md, "Wake-up and the latency
/// budget").
const POWER_SAVING_US: u32 = 1000;

fn switch(latency_budget_us: u32) -> (Switch, Vec<PipePeer>) {
    let cfg = SwitchConfig {
        batch: 64,
        max_ports: 8,
        latency_budget_us,
        ..SwitchConfig::default()
    };
    let sw = Switch::new(cfg, Box::new(FromFrame { group7: vec![] })).unwrap();
    let mut peers = Vec::new();
    for name in ["a", "b", "c", "d"] {
        let (p, peer) = pipe(
            name,
            PipeConfig {
                ring_slots: if name == "d" { BIG_RING } else { RING },
                ..Default::default()
            },
        )
        .unwrap();
        sw.add_port(name, Arc::new(p), None).unwrap();
        peers.push(peer);
    }
    (sw, peers)
}

/// Sends `n` frames from port `src` to port `dst` through `peer`, as fast as
/// its ring takes them (a sender pushed back retries).
fn send(peer: &mut PipePeer, src: u16, dst: u16, first: u32, n: u32, deadline: Instant) {
    let mut seq = first;
    while seq < first + n {
        assert!(Instant::now() < deadline, "port {src}: stuck at {seq}");
        let k = peer.send_with(0, (first + n - seq).min(32) as usize, |i, buf| {
            fill(buf, 0, dst, src, seq + i as u32, 64)
        });
        seq += k as u32;
        if k == 0 {
            std::thread::yield_now();
        }
    }
}

/// Receives until `n` frames from `src` arrived in order on `peer`.
fn receive_all(peer: &mut PipePeer, src: u16, n: u32, deadline: Instant) {
    let mut next = 0u32;
    while next < n {
        assert!(
            Instant::now() < deadline,
            "from {src}: {next} of {n} arrived"
        );
        let k = peer.recv(0, usize::MAX, |f| {
            let (s, seq) = parse(f);
            assert_eq!((s, seq), (src, next), "out of order or lost");
            next += 1;
        });
        if k == 0 {
            std::thread::yield_now();
        }
    }
}

fn drops(sw: &Switch, port: usize, reason: &str) -> u64 {
    sw.port_stats()[port]
        .drops
        .iter()
        .filter(|d| d.0 == reason)
        .map(|d| d.1)
        .sum()
}

/// Every drop of the switch, by port and reason.
fn all_drops(sw: &Switch) -> Vec<(String, &'static str, u64)> {
    sw.port_stats()
        .into_iter()
        .flat_map(|p| {
            let name = p.name;
            p.drops.into_iter().map(move |(r, n)| (name.clone(), r, n))
        })
        .collect()
}

#[test]
fn a_peer_that_stops_reading_costs_only_its_own_frames() {
    stops_reading(fabric::wakeup::DEFAULT_BUDGET_US);
}

#[test]
fn a_peer_that_stops_reading_costs_only_its_own_frames_at_the_power_saving_budget() {
    stops_reading(POWER_SAVING_US);
}

fn stops_reading(budget_us: u32) {
    let (sw, mut peers) = switch(budget_us);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = peers.pop().unwrap();
    let mut c = peers.pop().unwrap();
    let _b = peers.pop().unwrap(); // never reads
    let mut a = peers.pop().unwrap();
    let n = 20_000u32;
    let other = std::thread::spawn(move || {
        let rx = std::thread::spawn(move || receive_all(&mut d, 2, n, deadline));
        send(&mut c, 2, 3, 0, n, deadline);
        rx.join().unwrap();
    });
    send(&mut a, 0, 1, 0, n, deadline);
    other.join().unwrap();
    // b's ring holds RING frames; the rest of a's were dropped as tx_full
    // on b, and nothing else was dropped anywhere.
    let settled = || {
        let st = sw.port_stats();
        st[0].rx_packets == n as u64 && st[1].tx_packets + drops(&sw, 1, "tx_full") == n as u64
    };
    while !settled() {
        assert!(Instant::now() < deadline, "{:?}", sw.port_stats());
        std::thread::sleep(Duration::from_millis(1));
    }
    let st = sw.port_stats();
    assert_eq!(st[1].tx_packets, RING as u64);
    assert_eq!(
        all_drops(&sw),
        vec![("b".to_string(), "tx_full", (n as usize - RING) as u64)]
    );
    assert_eq!(st[3].tx_packets, n as u64);
}

#[test]
fn a_queue_that_never_drains_leaves_the_others_their_turn() {
    never_drains(fabric::wakeup::DEFAULT_BUDGET_US);
}

#[test]
fn a_queue_that_never_drains_leaves_the_others_their_turn_at_the_power_saving_budget() {
    never_drains(POWER_SAVING_US);
}

fn never_drains(budget_us: u32) {
    // a's peer keeps a's ring full for the whole test (b reads all); c's
    // frames still all arrive, in order, and nothing is dropped.
    let (sw, mut peers) = switch(budget_us);
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut d = peers.pop().unwrap();
    let mut c = peers.pop().unwrap();
    let mut b = peers.pop().unwrap();
    let mut a = peers.pop().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (s1, s2) = (stop.clone(), stop.clone());
    let flood = std::thread::spawn(move || {
        let mut seq = 0u32;
        while !s1.load(std::sync::atomic::Ordering::Relaxed) {
            seq += a.send_with(0, 32, |i, buf| fill(buf, 0, 1, 0, seq + i as u32, 64)) as u32;
        }
        seq
    });
    let drain = std::thread::spawn(move || {
        let mut got = 0u64;
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            got += b.recv(0, usize::MAX, |_| {}) as u64;
        }
        (got, b)
    });
    let n = 20_000u32;
    let rx = std::thread::spawn(move || receive_all(&mut d, 2, n, deadline));
    send(&mut c, 2, 3, 0, n, deadline);
    rx.join().unwrap();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let sent = flood.join().unwrap();
    let (mut got, mut b) = drain.join().unwrap();
    // Whatever a's peer managed to send arrives too, or was counted.
    while got + drops(&sw, 1, "tx_full") < sent as u64 {
        assert!(Instant::now() < deadline, "b got {got} of {sent}");
        got += b.recv(0, usize::MAX, |_| {}) as u64;
    }
    let ring_full = sw.port_stats()[0].rx_ring_full;
    assert!(ring_full > 0, "a's ring was never seen full");
    assert_eq!(sw.port_stats()[3].tx_packets, n as u64);
    assert!(
        all_drops(&sw)
            .iter()
            .all(|(p, r, _)| p == "b" && *r == "tx_full"),
        "{:?}",
        all_drops(&sw)
    );
}

#[test]
fn a_burst_of_ten_rings_is_counted_and_the_regime_returns() {
    burst_of_ten_rings(fabric::wakeup::DEFAULT_BUDGET_US);
}

#[test]
fn a_burst_of_ten_rings_is_counted_and_the_regime_returns_at_the_power_saving_budget() {
    burst_of_ten_rings(POWER_SAVING_US);
}

fn burst_of_ten_rings(budget_us: u32) {
    let (sw, mut peers) = switch(budget_us);
    let deadline = Instant::now() + Duration::from_secs(60);
    // The prober measures this host's wake-ups first.
    let policy = |sw: &Switch| sw.worker_stats()[0].policy;
    while policy(&sw).wake_samples < 16 {
        assert!(Instant::now() < deadline, "no wake-up measured");
        std::thread::sleep(Duration::from_millis(5));
    }
    let before = policy(&sw);
    assert_eq!(before.budget_ns, u64::from(budget_us) * 1000);
    let mut d = peers.pop().unwrap();
    let mut c = peers.pop().unwrap();
    let mut b = peers.pop().unwrap();
    let mut a = peers.pop().unwrap();
    // Ten rings' worth into a (b does not read until it is over), while c
    // sends to d.
    let burst = 10 * RING as u32;
    let n = 5_000u32;
    let other = std::thread::spawn(move || {
        let rx = std::thread::spawn(move || receive_all(&mut d, 2, n, deadline));
        send(&mut c, 2, 3, 0, n, deadline);
        rx.join().unwrap();
    });
    send(&mut a, 0, 1, 0, burst, deadline);
    other.join().unwrap();
    while sw.port_stats()[0].rx_packets < burst as u64 {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(1));
    }
    let st = sw.port_stats();
    let got = b.recv(0, usize::MAX, |_| {}) as u64;
    assert_eq!(got, RING as u64);
    assert_eq!(st[1].tx_packets + drops(&sw, 1, "tx_full"), burst as u64);
    assert_eq!(st[3].tx_packets, n as u64);
    assert_eq!(drops(&sw, 3, "tx_full"), 0);
    // Afterwards, with nothing coming, the worker sleeps again (idle ports
    // cost nothing) and is in the regime its measured wake-ups allow, the
    // one it was in before if those still stand where they stood.
    let s0 = sw.worker_stats()[0].sleeps;
    while sw.worker_stats()[0].sleeps < s0 + 3 {
        assert!(Instant::now() < deadline, "the worker does not sleep again");
        std::thread::sleep(Duration::from_millis(5));
    }
    let after = policy(&sw);
    // What the policy decides on: whether a wake-up fits (with its margin)
    // and whether a nap and its overshoot do in the budget less the two
    // passes around the nap (`nap_pass_ns`: the budget times the worker's
    // busy share, all of it during the burst). The overshoot and the busy
    // share are measured anew by the burst, so they may not stand where
    // they stood; the regime is compared only where the inputs do, and
    // where they pick one regime (both fitting leaves it to CPU cost).
    let fits = |p: &fabric::PolicyView| {
        (
            p.wake_p99_ns * fabric::wakeup::WAKE_FIT_DIV <= p.budget_ns,
            p.budget_ns
                .saturating_sub(2 * p.nap_pass_ns)
                .saturating_sub(p.nap_overshoot_ns)
                >= fabric::wakeup::MIN_NAP_NS,
        )
    };
    let contended = |p: &fabric::PolicyView| p.why == fabric::wakeup::Why::Contended;
    if fits(&before) == fits(&after)
        && fits(&after) != (true, true)
        && !contended(&before)
        && !contended(&after)
    {
        assert_eq!(after.regime, before.regime, "{before:?} -> {after:?}");
    }
    if fits(&after) == (false, false) && !contended(&after) {
        assert_eq!(after.regime, Regime::Poll, "{after:?}");
    }
}
