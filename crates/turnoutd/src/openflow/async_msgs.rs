//! The OpenFlow channel's asynchronous side (docs/flows.md, "Packet-in,
//! packet-out, port-status"): one dispatcher thread that carries the
//! `flows` logic's packet-ins (the running logic's punt queue,
//! [`fabric::Switch::punt`]; `logic::flows::pktin`) and port-status
//! messages to every connection, and the packet-out handler.
//!
//! Connections register their writer (a clone of the socket) with the
//! [`Hub`] once they said hello; the session's replies and the
//! dispatcher's messages go through the same mutex, so messages never
//! interleave. The workers never see any of this: they only push into the
//! logic's bounded queue (a `fabric::Punt`) and are refused (and count
//! why) when it is full.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fabric::sys::EventFd;
use fabric::{DropReason, PortId, PortStats, Punt, Verdict};
use logic::flows::ofp::{actions_from_of, of_port, packet_out_prereqs, port_id};
use logic::flows::{pktin, Action};
use openflow::{bac, brc, et, oxm, port, role, rrfc, AsyncConfig, OfpError, Oxm, PacketOut};

use crate::daemon::Daemon;
use crate::log::Level;

/// How often the dispatcher compares the ports with what it announced.
pub const PORT_POLL: Duration = Duration::from_millis(100);
/// Most packet-ins carried per round before looking at the ports again.
const BATCH: usize = 256;
/// `miss_send_len` until a set-config (`OFP_DEFAULT_MISS_SEND_LEN`).
pub const DEFAULT_MISS_SEND_LEN: u16 = 128;
/// How long the dispatcher naps when it cannot sleep until woken (no
/// eventfd for the hub, or `poll` failed).
pub const FALLBACK_NAP: Duration = Duration::from_millis(2);

/// `OFPPR_ADD`, `OFPPR_DELETE`, `OFPPR_MODIFY`.
pub const PPR_ADD: u8 = 0;
/// See [`PPR_ADD`].
pub const PPR_DELETE: u8 = 1;
/// See [`PPR_ADD`].
pub const PPR_MODIFY: u8 = 2;

/// A connection's writer, shared by its session and the dispatcher.
pub type Writer = Arc<Mutex<Box<dyn Write + Send>>>;

/// Kinds of asynchronous messages a connection can filter (set-async).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncKind {
    /// Packet-in messages (`OFPT_PACKET_IN`).
    PacketIn,
    /// Port-status messages (`OFPT_PORT_STATUS`).
    PortStatus,
    /// Flow-removed messages (`OFPT_FLOW_REMOVED`).
    FlowRemoved,
}

/// A connection's controller role and asynchronous configuration, shared
/// by its session (role requests, set-async) and the dispatcher.
pub struct ConnState {
    role: AtomicU32,
    config: Mutex<AsyncConfig>,
}

impl Default for ConnState {
    fn default() -> ConnState {
        ConnState {
            role: AtomicU32::new(role::EQUAL),
            config: Mutex::new(AsyncConfig::default()),
        }
    }
}

impl ConnState {
    /// `role::EQUAL`, `MASTER` or `SLAVE`.
    pub fn role(&self) -> u32 {
        self.role.load(Ordering::Acquire)
    }

    /// The asynchronous configuration (set-async).
    pub fn config(&self) -> AsyncConfig {
        *self.config.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Replaces the asynchronous configuration.
    pub fn set_config(&self, c: AsyncConfig) {
        *self.config.lock().unwrap_or_else(|p| p.into_inner()) = c;
    }

    /// Whether a message of `kind` and `reason` goes to this connection in
    /// its present role.
    pub fn wants(&self, kind: AsyncKind, reason: u8) -> bool {
        let c = self.config();
        let i = (self.role() == role::SLAVE) as usize;
        let mask = match kind {
            AsyncKind::PacketIn => c.packet_in[i],
            AsyncKind::PortStatus => c.port_status[i],
            AsyncKind::FlowRemoved => c.flow_removed[i],
        };
        reason < 32 && mask & (1 << reason) != 0
    }
}

/// The connections that receive asynchronous messages.
#[derive(Default)]
pub struct Hub {
    /// Wakes the dispatcher when the receivers change (a connection came
    /// or went, a role or set-async changed) or the channel stops; None if
    /// no eventfd could be made (the dispatcher then looks every
    /// [`FALLBACK_NAP`]).
    wake: Option<EventFd>,
    conns: Mutex<Vec<(u64, Writer, Arc<ConnState>)>>,
    next: AtomicU64,
    /// The last generation id of a master or slave role request.
    generation: Mutex<Option<u64>>,
    /// The switch configuration of set-config, (flags, miss_send_len),
    /// one for the switch (OpenFlow 1.3, 7.3.2: the
    /// configuration parameters "in the switch"), so every connection's
    /// get-config sees the last set-config of any; None: never set
    /// (flags 0, [`DEFAULT_MISS_SEND_LEN`]).
    switch_config: Mutex<Option<(u16, u16)>>,
    /// Packet-ins and port-status messages written.
    pub sent: AtomicU64,
    /// Asynchronous messages a connection did not take (write failed).
    pub failed: AtomicU64,
}

/// Removes a connection from the hub when dropped.
pub struct Registration {
    hub: Arc<Hub>,
    id: u64,
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.hub
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|(i, _, _)| *i != self.id);
        self.hub.changed();
    }
}

impl Hub {
    /// A hub with its wake-up eventfd (without one if it cannot be made:
    /// the dispatcher then naps instead of sleeping until woken).
    pub fn new() -> Hub {
        Hub {
            wake: EventFd::new().ok(),
            ..Hub::default()
        }
    }

    /// Wakes the dispatcher: the receivers of packet-ins changed, or the
    /// channel is stopping.
    pub fn changed(&self) {
        if let Some(w) = &self.wake {
            w.notify();
        }
    }

    /// Adds a connection; it receives messages until the registration drops.
    pub fn register(self: &Arc<Self>, w: Writer, state: Arc<ConnState>) -> Registration {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((id, w, state));
        self.changed();
        Registration {
            hub: self.clone(),
            id,
        }
    }

    /// The switch configuration (flags, miss_send_len).
    pub fn switch_config(&self) -> (u16, u16) {
        self.switch_config
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .unwrap_or((0, DEFAULT_MISS_SEND_LEN))
    }

    /// A set-config: replaces the switch configuration for every
    /// connection.
    pub fn set_switch_config(&self, flags: u16, miss_send_len: u16) {
        *self.switch_config.lock().unwrap_or_else(|p| p.into_inner()) =
            Some((flags, miss_send_len));
    }

    /// Connections registered.
    pub fn len(&self) -> usize {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// True with no connection.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Connections that take packet-ins of some reason in their role.
    pub fn packet_in_receivers(&self) -> usize {
        self.conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, _, s)| (0..3).any(|r| s.wants(AsyncKind::PacketIn, r)))
            .count()
    }

    /// An `OFPT_ROLE_REQUEST` from the connection of `state` (OpenFlow 1.3,
    /// 6.3.5): the role and generation id to reply with. Master and slave
    /// requests carry a generation id that must not be older than the last
    /// one seen (`OFPRRFC_STALE`); a new master turns the others' master
    /// role into slave.
    pub fn role_request(
        &self,
        state: &Arc<ConnState>,
        want: u32,
        generation_id: u64,
    ) -> Result<(u32, u64), OfpError> {
        let mut g = self.generation.lock().unwrap_or_else(|p| p.into_inner());
        match want {
            role::NOCHANGE => {}
            role::EQUAL => state.role.store(role::EQUAL, Ordering::Release),
            role::MASTER | role::SLAVE => {
                if let Some(cur) = *g {
                    if (generation_id.wrapping_sub(cur) as i64) < 0 {
                        return Err(OfpError::new(et::ROLE_REQUEST_FAILED, rrfc::STALE));
                    }
                }
                *g = Some(generation_id);
                if want == role::MASTER {
                    for (_, _, s) in self.conns.lock().unwrap_or_else(|p| p.into_inner()).iter() {
                        if !Arc::ptr_eq(s, state) && s.role() == role::MASTER {
                            s.role.store(role::SLAVE, Ordering::Release);
                        }
                    }
                }
                state.role.store(want, Ordering::Release);
            }
            _ => return Err(OfpError::new(et::ROLE_REQUEST_FAILED, rrfc::BAD_ROLE)),
        }
        self.changed();
        Ok((state.role(), g.unwrap_or(0)))
    }

    /// Writes `msg` to every connection that takes a message of `kind` and
    /// `reason` (its role and set-async). A connection that does not take
    /// it (its write timeout) is skipped; its session notices the broken
    /// socket on its own.
    fn broadcast(&self, msg: &[u8], kind: AsyncKind, reason: u8) {
        let conns: Vec<Writer> = self
            .conns
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter(|(_, _, s)| s.wants(kind, reason))
            .map(|(_, w, _)| w.clone())
            .collect();
        for w in conns {
            let ok = w
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .write_all(msg)
                .is_ok();
            if ok {
                self.sent.fetch_add(1, Ordering::Relaxed);
            } else {
                self.failed.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The running logic's punt queue (`flows`: its packet-ins), if it has
/// one ([`fabric::Switch::punt`]).
fn queue(daemon: &Daemon) -> Option<Arc<Punt>> {
    daemon.switch().punt()
}

/// Ports by id: name and link state.
pub type PortMap = BTreeMap<PortId, (String, bool)>;

/// An `ofp_port` of a switch port (`config`: `OFPPC_PORT_DOWN` for a port
/// that is gone).
pub fn port_desc(id: PortId, name: &str, up: bool, gone: bool) -> openflow::PortDesc {
    openflow::PortDesc {
        port_no: of_port(id),
        hw_addr: [0; 6],
        name: name.to_string(),
        config: gone as u32,
        // OFPPS_LINK_DOWN or OFPPS_LIVE.
        state: if up && !gone { 4 } else { 1 },
        curr_speed_kbps: 0,
    }
}

/// Port-status messages (reason, port) turning `before` into `now`: a
/// port that disappeared or changed its name is deleted (and the new one
/// added), a new one added, a link change is a modification.
pub fn port_changes(before: &PortMap, now: &PortMap) -> Vec<(u8, openflow::PortDesc)> {
    let mut out = Vec::new();
    for (id, (name, up)) in before {
        if now.get(id).is_none_or(|(n, _)| n != name) {
            out.push((PPR_DELETE, port_desc(*id, name, *up, true)));
        }
    }
    for (id, (name, up)) in now {
        match before.get(id) {
            Some((n, u)) if n == name => {
                if u != up {
                    out.push((PPR_MODIFY, port_desc(*id, name, *up, false)));
                }
            }
            _ => out.push((PPR_ADD, port_desc(*id, name, *up, false))),
        }
    }
    out
}

fn snapshot(ports: &[PortStats]) -> PortMap {
    ports
        .iter()
        .map(|s| (s.id, (s.name.clone(), s.link_up)))
        .collect()
}

/// The dispatcher: until `stop`, carries packet-ins and port changes to
/// every registered connection. Idle, it sleeps in `poll` on the packet-in
/// queue's eventfd (written by the worker that queues into an empty queue
/// while it sleeps: `fabric::Punt::sleep_begin`) and the hub's (a
/// connection came or went, a role or async config changed, the channel
/// stops), at most until the next port comparison ([`PORT_POLL`]).
pub fn dispatch(daemon: Arc<Daemon>, hub: Arc<Hub>, stop: Arc<AtomicBool>) {
    let mut ports = snapshot(&daemon.switch().port_stats());
    let mut polled = Instant::now();
    let mut q = queue(&daemon);
    while !stop.load(Ordering::Acquire) {
        let n = hub.packet_in_receivers();
        if let Some(q) = &q {
            q.set_controllers(n);
        }
        let mut moved = 0;
        if let Some(q) = &q {
            while moved < BATCH {
                let Some(p) = q.pop() else { break };
                moved += 1;
                // `flows` punts with the OpenFlow reason, the table as the
                // tag and the flow's cookie.
                let m = p.meta;
                let msg = openflow::packet_in(
                    0,
                    openflow::NO_BUFFER,
                    p.total_len,
                    m.reason,
                    m.tag,
                    m.cookie,
                    &[Oxm::exact(oxm::IN_PORT, of_port(m.ingress) as u128)],
                    &p.data,
                );
                hub.broadcast(&msg, AsyncKind::PacketIn, m.reason);
            }
        }
        if polled.elapsed() >= PORT_POLL {
            polled = Instant::now();
            // The logic may have been replaced (a new queue).
            let nq = queue(&daemon);
            if let (Some(old), Some(new)) = (&q, &nq) {
                if !Arc::ptr_eq(old, new) {
                    old.set_controllers(0);
                }
            }
            q = nq;
            let now = snapshot(&daemon.switch().port_stats());
            let changes = port_changes(&ports, &now);
            ports = now;
            for (reason, d) in changes {
                crate::log!(
                    Level::Debug,
                    "openflow",
                    "port status",
                    port = d.name,
                    reason = reason
                );
                hub.broadcast(
                    &openflow::port_status(0, reason, &d),
                    AsyncKind::PortStatus,
                    reason,
                );
            }
        }
        if moved == 0 && !stop.load(Ordering::Acquire) {
            idle(
                q.as_deref(),
                &hub,
                PORT_POLL.saturating_sub(polled.elapsed()),
            );
        }
    }
    if let Some(q) = &q {
        q.set_controllers(0);
    }
}

/// Sleeps until a packet-in is queued, the hub is woken, or `timeout`.
fn idle(q: Option<&Punt>, hub: &Hub, timeout: Duration) {
    let Some(hw) = &hub.wake else {
        std::thread::sleep(FALLBACK_NAP.min(timeout));
        return;
    };
    let mut fds = vec![hw.fd()];
    if let Some(q) = q {
        if !q.sleep_begin() {
            return;
        }
        fds.push(q.wake_fd());
    }
    // Rounded up: a 0 ms poll before the port comparison would spin.
    let ms = (timeout.as_micros().div_ceil(1000) as i32).max(1);
    if crate::sys::poll_any(&fds, ms).is_err() {
        std::thread::sleep(FALLBACK_NAP);
    }
    hw.drain();
    if let Some(q) = q {
        q.sleep_end();
    }
}

/// Where one output action of a packet-out sends the frame.
enum Out {
    Port(PortId),
    /// Every port but the ingress.
    Flood,
    /// Through the flow tables.
    Table,
    /// Where the `flows` logic's learning bridge says (`OFPP_NORMAL`).
    Normal,
}

/// Where a verdict of the tables sends a packet-out's frame (never back to
/// its ingress).
fn table_targets(sw: &fabric::Switch, v: Verdict, ingress: PortId) -> Vec<PortId> {
    let dsts: Vec<PortId> = match v {
        Verdict::Port(d) => vec![d],
        Verdict::Flood => sw.port_ids(),
        Verdict::Group(g) => sw.group_members(g),
        Verdict::Drop(r) => {
            if !matches!(r, DropReason::ToController) {
                crate::log!(
                    Level::Debug,
                    "openflow",
                    "packet-out to the tables dropped",
                    reason = r.name()
                );
            }
            vec![]
        }
    };
    dsts.into_iter().filter(|&d| d != ingress).collect()
}

/// Executes a packet-out: the frame (no buffering: `buffer_id` must be
/// `OFP_NO_BUFFER`) runs through the actions in order; each output sends
/// the frame as modified so far. Everything is checked before anything is
/// sent: a bad packet-out sends nothing.
pub fn packet_out(daemon: &Daemon, po: &PacketOut) -> Result<(), OfpError> {
    let bad_req = |c| OfpError::new(et::BAD_REQUEST, c);
    let bad_act = |c| OfpError::new(et::BAD_ACTION, c);
    if po.buffer_id != openflow::NO_BUFFER {
        return Err(bad_req(brc::BUFFER_UNKNOWN));
    }
    let sw = daemon.switch();
    // A frame from the controller has no ingress port: PortId::MAX, which
    // never exists.
    let ingress: PortId = match po.in_port {
        port::CONTROLLER | port::ANY => PortId::MAX,
        p => match port_id(p) {
            Some(id) if sw.port_ids().contains(&id) => id,
            _ => return Err(bad_req(brc::BAD_PORT)),
        },
    };
    if po.data.len() < 14 {
        return Err(bad_req(brc::BAD_PACKET));
    }
    let ports = sw.port_ids();
    let mut steps: Vec<Result<Out, Action>> = Vec::new();
    for a in &po.actions {
        if let openflow::Action::Output { port: p, .. } = *a {
            steps.push(Ok(match p {
                port::TABLE => Out::Table,
                port::IN_PORT if ingress != PortId::MAX => Out::Port(ingress),
                port::FLOOD | port::ALL => Out::Flood,
                // Only the flows logic has the learning bridge.
                port::NORMAL if queue(daemon).is_some() => Out::Normal,
                p => match port_id(p) {
                    Some(id) if ports.contains(&id) => Out::Port(id),
                    _ => return Err(bad_act(bac::BAD_OUT_PORT)),
                },
            }));
            continue;
        }
        let acts = actions_from_of(std::slice::from_ref(a))?;
        // (A group or a packet-in has no place in a packet-out.)
        if acts.iter().any(|x| !x.is_rewrite()) {
            return Err(bad_act(bac::BAD_TYPE));
        }
        steps.extend(acts.into_iter().map(Err));
    }
    // Set-fields are checked against the packet's own headers, in order
    // (a push_vlan before a VLAN set-field, ...).
    let rewrites: Vec<Action> = steps
        .iter()
        .filter_map(|s| s.as_ref().err().copied())
        .collect();
    packet_out_prereqs(&rewrites, &po.data, ingress)?;
    let mut frame = po.data.clone();
    for s in steps {
        match s {
            Err(a) => {
                if pktin::rewrite(&mut frame, &a) == Some(false) {
                    return Ok(());
                }
            }
            Ok(Out::Port(d)) => {
                let _ = sw.inject(d, &mut frame);
            }
            Ok(Out::Flood) => {
                for d in sw.port_ids() {
                    if d != ingress {
                        let _ = sw.inject(d, &mut frame);
                    }
                }
            }
            Ok(Out::Normal) => {
                let from = (ingress != PortId::MAX).then_some(ingress);
                let v = daemon
                    .openflow_tables()
                    .map(|f| f.normal_packet_out(&frame, from));
                let dsts: Vec<PortId> = match v {
                    Some(Verdict::Port(d)) => vec![d],
                    Some(Verdict::Flood) => sw.port_ids(),
                    _ => vec![],
                };
                for d in dsts {
                    if d != ingress {
                        let _ = sw.inject(d, &mut frame);
                    }
                }
            }
            Ok(Out::Table) => {
                let mut f = frame.clone();
                let (v, range, copies) = sw.classify_one(ingress, &mut f);
                // The copies made on the way (an output before a header
                // change), then the frame itself.
                for (cv, mut c) in copies {
                    for d in table_targets(sw, cv, ingress) {
                        let _ = sw.inject(d, &mut c);
                    }
                }
                for d in table_targets(sw, v, ingress) {
                    let _ = sw.inject(d, &mut f[range.clone()]);
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(ports: &[(PortId, &str, bool)]) -> PortMap {
        ports
            .iter()
            .map(|&(i, n, u)| (i, (n.to_string(), u)))
            .collect()
    }

    #[test]
    fn port_changes_add_delete_modify() {
        let a = m(&[(0, "a", true), (1, "b", true), (2, "c", true)]);
        let b = m(&[(0, "a", false), (2, "x", true), (3, "d", true)]);
        let got: Vec<(u8, u32, String, u32, u32)> = port_changes(&a, &b)
            .into_iter()
            .map(|(r, d)| (r, d.port_no, d.name, d.config, d.state))
            .collect();
        assert_eq!(
            got,
            vec![
                (PPR_DELETE, 2, "b".into(), 1, 1),
                (PPR_DELETE, 3, "c".into(), 1, 1),
                (PPR_MODIFY, 1, "a".into(), 0, 1),
                (PPR_ADD, 3, "x".into(), 0, 4),
                (PPR_ADD, 4, "d".into(), 0, 4),
            ]
        );
        assert!(port_changes(&b, &b).is_empty());
    }

    /// Runs `idle` (20 s timeout) on a thread, does `poke` 50 ms later,
    /// and returns how long `idle` slept.
    fn idle_until(hub: &Arc<Hub>, q: &Arc<Punt>, poke: impl FnOnce()) -> Duration {
        let (h, q2) = (hub.clone(), q.clone());
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            idle(Some(&q2), &h, Duration::from_secs(20));
            t0.elapsed()
        });
        std::thread::sleep(Duration::from_millis(50));
        poke();
        t.join().unwrap()
    }

    #[test]
    fn idle_wakes_on_a_packet_in_and_on_a_new_connection() {
        let hub = Arc::new(Hub::new());
        assert!(hub.wake.is_some());
        let q = Arc::new(
            Punt::new(fabric::PuntSpec {
                slots: 8,
                rate: 1000,
                burst: 10,
            })
            .unwrap(),
        );
        q.set_controllers(1);
        // A worker's packet-in wakes it (not the 20 s timeout).
        let slept = idle_until(&hub, &q, || {
            q.push(fabric::PuntMeta::default(), 64, &[0; 64]);
        });
        assert!(
            slept >= Duration::from_millis(40),
            "did not sleep: {slept:?}"
        );
        assert!(slept < Duration::from_secs(10), "{slept:?}");
        assert_eq!(q.wakeups(), 1);
        assert!(q.pop().is_some());
        // A connection registering wakes it (it must count the controller).
        let w: Writer = Arc::new(Mutex::new(Box::new(Vec::<u8>::new())));
        let mut reg = None;
        let slept = idle_until(&hub, &q, || {
            reg = Some(hub.register(w, Arc::new(ConnState::default())));
        });
        assert!(slept < Duration::from_secs(10), "{slept:?}");
        // So does its going away.
        let slept = idle_until(&hub, &q, || drop(reg.take()));
        assert!(slept < Duration::from_secs(10), "{slept:?}");
        // Something queued already: no sleep at all.
        q.push(fabric::PuntMeta::default(), 64, &[0; 64]);
        let t0 = Instant::now();
        idle(Some(&q), &hub, Duration::from_secs(20));
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn roles_generation_ids_and_async_masks() {
        let hub = Arc::new(Hub::new());
        let w = || -> Writer { Arc::new(Mutex::new(Box::new(Vec::<u8>::new()))) };
        let (a, b) = (
            Arc::new(ConnState::default()),
            Arc::new(ConnState::default()),
        );
        let _ra = hub.register(w(), a.clone());
        let _rb = hub.register(w(), b.clone());
        // Equals by default: both take packet-ins, port-status, flow-removed.
        assert_eq!(hub.packet_in_receivers(), 2);
        assert_eq!(
            hub.role_request(&a, role::NOCHANGE, 0).unwrap(),
            (role::EQUAL, 0)
        );
        assert_eq!(
            hub.role_request(&a, role::MASTER, 5).unwrap(),
            (role::MASTER, 5)
        );
        // An older generation is stale (signed distance, so it wraps).
        let stale = OfpError::new(et::ROLE_REQUEST_FAILED, rrfc::STALE);
        assert_eq!(hub.role_request(&b, role::MASTER, 4).unwrap_err(), stale);
        assert_eq!(
            hub.role_request(&b, role::SLAVE, 5).unwrap(),
            (role::SLAVE, 5)
        );
        assert_eq!(hub.packet_in_receivers(), 1, "a slave takes no packet-ins");
        assert!(b.wants(AsyncKind::PortStatus, 0) && !b.wants(AsyncKind::FlowRemoved, 0));
        // A new master demotes the old one.
        assert_eq!(
            hub.role_request(&b, role::MASTER, 6).unwrap(),
            (role::MASTER, 6)
        );
        assert_eq!(a.role(), role::SLAVE);
        assert_eq!(
            hub.role_request(&a, role::MASTER, u64::MAX).unwrap_err(),
            stale
        );
        assert_eq!(
            hub.role_request(&a, 7, 9).unwrap_err(),
            OfpError::new(et::ROLE_REQUEST_FAILED, rrfc::BAD_ROLE)
        );
        // set-async: the slave asks for no-match packet-ins after all.
        let mut c = a.config();
        c.packet_in[1] = 1 << pktin::REASON_NO_MATCH;
        a.set_config(c);
        assert!(a.wants(AsyncKind::PacketIn, pktin::REASON_NO_MATCH));
        assert!(!a.wants(AsyncKind::PacketIn, pktin::REASON_ACTION));
        assert_eq!(hub.packet_in_receivers(), 2);
        // Equal needs no generation id and leaves the others alone.
        assert_eq!(
            hub.role_request(&a, role::EQUAL, 0).unwrap(),
            (role::EQUAL, 6)
        );
        assert_eq!(b.role(), role::MASTER);
    }
}
