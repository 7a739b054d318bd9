//! OpenFlow meters (1.3, 5.7 and 7.3.4.4): a meter table of up to
//! [`MAX_METERS`] meters, programmed with `OFPT_METER_MOD` (and the logic's
//! `add_meter` / `mod_meter` / `del_meters` / `dump_meters` commands), used
//! by flows with the meter instruction (`meter:N`, first in the flow's
//! actions), with drop and DSCP-remark bands, rates in kb/s or packets per
//! second, bursts, and per-meter and per-band statistics.
//!
//! Data path: a meter's bands are token buckets kept as GCRA (the
//! generic cell rate algorithm: one "theoretical arrival time" per band in
//! an atomic, moved on by a compare-and-swap when a packet conforms), in
//! a fixed array of [`MAX_METERS`] slots allocated with the logic, shared
//! by every worker: no lock, no allocation, one CAS per band per packet.
//! A packet that conforms to every band passes; otherwise the band with
//! the highest rate it exceeds applies (OpenFlow 1.3, 5.7): a drop band
//! drops it (`meter` drop reason, counted on its ingress port, and in the
//! band's statistics), a DSCP-remark band raises its DSCP's drop
//! precedence by the band's `prec_level`. The configuration (rates,
//! bursts, band kinds) is immutable and lives in the flows' snapshot, so a
//! meter-mod is a snapshot swap like a flow-mod; a flow's meter
//! instruction is compiled into the meter's slot.

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use openflow::{et, mbt, mc, meter_id, mf, mmfc, Band, MeterMod, MeterStats, OfpError};

use super::{Action, Flows, Reason, Rule, Snapshot};

/// Most meters in the table.
pub const MAX_METERS: usize = 1024;
/// Most bands per meter.
pub const MAX_BANDS: usize = 8;
/// The highest meter id a meter-mod may name (`OFPM_MAX`).
pub const MAX_METER_ID: u32 = meter_id::MAX;
/// Highest rate accepted (kb/s: 1 Tb/s; or packets per second).
pub const MAX_RATE: u32 = 1_000_000_000;
/// Largest burst accepted (kb or packets).
pub const MAX_BURST: u32 = 1_000_000_000;
/// The meter flags turnoutd knows (`OFPMF_*`).
const FLAGS: u16 = mf::KBPS | mf::PKTPS | mf::BURST | mf::STATS;

/// What a meter makes of a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// Under every band's rate.
    Pass,
    /// Over a drop band's.
    Drop,
    /// Over a DSCP-remark band's: raise the drop precedence by this much.
    Remark(u8),
}

/// One band as configured, in GCRA form.
#[derive(Clone, Debug)]
struct Gcra {
    kind: u16,
    rate: u32,
    prec: u8,
    /// kb/s: picoseconds per byte; packets/s: nanoseconds per packet.
    per_unit: u64,
    /// The bucket (the burst) in nanoseconds of the rate.
    tau: u64,
}

/// One meter's configuration.
#[derive(Clone, Debug)]
pub(super) struct Cfg {
    pub(super) id: u32,
    pub(super) flags: u16,
    /// As given (meter config).
    pub(super) bands: Vec<Band>,
    gcra: Vec<Gcra>,
    installed: Instant,
}

/// The meter table's configuration: meters by slot, and their ids. In the
/// flows' snapshot (immutable; a meter-mod builds a new one).
#[derive(Clone, Default)]
pub(super) struct Table {
    slots: Vec<Option<Arc<Cfg>>>,
    by_id: BTreeMap<u32, u32>,
    /// Where the next free slot is looked for (slots are reused as late as
    /// possible: a worker on the previous snapshot may still meter a
    /// deleted meter's flows for a batch).
    next: usize,
}

impl Table {
    /// The slot of meter `id`, if it exists.
    pub(super) fn slot(&self, id: u32) -> Option<u32> {
        self.by_id.get(&id).copied()
    }

    #[inline]
    fn cfg(&self, slot: u32) -> Option<&Cfg> {
        self.slots.get(slot as usize)?.as_deref()
    }
}

/// One band's running state.
#[derive(Default)]
struct BandState {
    /// GCRA's theoretical arrival time (the data path's nanoseconds).
    tat: AtomicU64,
    packets: AtomicU64,
    bytes: AtomicU64,
}

/// One slot's running state.
#[derive(Default)]
#[repr(align(64))]
struct Slot {
    packets: AtomicU64,
    bytes: AtomicU64,
    bands: [BandState; MAX_BANDS],
}

impl Slot {
    fn reset(&self) {
        for a in [&self.packets, &self.bytes] {
            a.store(0, Relaxed);
        }
        for b in &self.bands {
            for a in [&b.tat, &b.packets, &b.bytes] {
                a.store(0, Relaxed);
            }
        }
    }
}

/// The meters' running state, every slot allocated with the logic.
pub(super) struct State {
    slots: Box<[Slot]>,
}

impl Default for State {
    fn default() -> State {
        State {
            slots: (0..MAX_METERS).map(|_| Slot::default()).collect(),
        }
    }
}

impl State {
    /// Meters a packet of `len` bytes by the meter in `slot` of `t` at
    /// `now_ns` (data path: atomics only).
    #[inline]
    pub(super) fn apply(&self, t: &Table, slot: u32, len: usize, now_ns: u64) -> Outcome {
        let (Some(cfg), Some(st)) = (t.cfg(slot), self.slots.get(slot as usize)) else {
            return Outcome::Pass;
        };
        st.packets.fetch_add(1, Relaxed);
        st.bytes.fetch_add(len as u64, Relaxed);
        let kbps = cfg.flags & mf::PKTPS == 0;
        // The band with the highest rate the packet exceeds.
        let mut hit: Option<usize> = None;
        for (i, g) in cfg.gcra.iter().enumerate() {
            let cost = if kbps {
                (len as u64).saturating_mul(g.per_unit) / 1000
            } else {
                g.per_unit
            };
            let b = &st.bands[i];
            let mut tat = b.tat.load(Relaxed);
            // Conforms if the bucket (the burst) holds the packet: its
            // cost on top of the debt not yet paid off.
            let conforms = loop {
                let base = tat.max(now_ns);
                if (base - now_ns).saturating_add(cost) > g.tau {
                    break false;
                }
                match b
                    .tat
                    .compare_exchange_weak(tat, base + cost, Relaxed, Relaxed)
                {
                    Ok(_) => break true,
                    Err(t) => tat = t,
                }
            };
            if !conforms && hit.is_none_or(|h| cfg.gcra[h].rate < g.rate) {
                hit = Some(i);
            }
        }
        let Some(i) = hit else {
            return Outcome::Pass;
        };
        let b = &st.bands[i];
        b.packets.fetch_add(1, Relaxed);
        b.bytes.fetch_add(len as u64, Relaxed);
        match cfg.gcra[i].kind {
            mbt::DSCP_REMARK => Outcome::Remark(cfg.gcra[i].prec),
            _ => Outcome::Drop,
        }
    }
}

fn mmf(code: u16) -> OfpError {
    OfpError::new(et::METER_MOD_FAILED, code)
}

/// Checks a meter-mod's flags and bands; the configuration of meter `id`.
fn configure(m: &MeterMod) -> Result<Cfg, OfpError> {
    if m.flags & !FLAGS != 0 || m.flags & mf::KBPS != 0 && m.flags & mf::PKTPS != 0 {
        return Err(mmf(mmfc::BAD_FLAGS));
    }
    if m.bands.len() > MAX_BANDS {
        return Err(mmf(mmfc::OUT_OF_BANDS));
    }
    let pktps = m.flags & mf::PKTPS != 0;
    let mut gcra = Vec::with_capacity(m.bands.len());
    for b in &m.bands {
        match b.kind {
            mbt::DROP => {}
            mbt::DSCP_REMARK if b.prec_level <= 3 => {}
            mbt::DSCP_REMARK => return Err(mmf(mmfc::BAD_BAND_VALUE)),
            _ => return Err(mmf(mmfc::BAD_BAND)),
        }
        if b.rate == 0 || b.rate > MAX_RATE {
            return Err(mmf(mmfc::BAD_RATE));
        }
        if b.burst > MAX_BURST {
            return Err(mmf(mmfc::BAD_BURST));
        }
        let rate = b.rate as u64;
        // Without OFPMF_BURST (or with a burst of 0): a tenth of a
        // second of the rate, at least one packet (or 2000 bytes).
        let burst = if m.flags & mf::BURST != 0 && b.burst != 0 {
            b.burst as u64
        } else if pktps {
            (rate / 10).max(1)
        } else {
            (rate / 10).max(16)
        };
        let (per_unit, tau) = if pktps {
            let per = 1_000_000_000 / rate;
            (per.max(1), burst.saturating_mul(1_000_000_000) / rate)
        } else {
            // 8 bits a byte at 1000 * rate bits a second: 8e9 / rate ps
            // per byte.
            (
                (8_000_000_000 / rate).max(1),
                burst.saturating_mul(1_000_000_000) / rate,
            )
        };
        gcra.push(Gcra {
            kind: b.kind,
            rate: b.rate,
            prec: b.prec_level,
            per_unit,
            tau,
        });
    }
    Ok(Cfg {
        id: m.meter_id,
        flags: m.flags,
        bands: m.bands.clone(),
        gcra,
        installed: Instant::now(),
    })
}

/// Flows of `snap` using a meter of `ids`.
fn users(snap: &Snapshot, ids: &HashSet<u32>) -> Vec<Arc<Rule>> {
    snap.tables
        .iter()
        .flat_map(|t| t.rules())
        .filter(|r| {
            r.shown
                .iter()
                .any(|a| matches!(a, Action::Meter(m) if ids.contains(m)))
        })
        .cloned()
        .collect()
}

impl Flows {
    /// Runs an OpenFlow 1.3 meter-mod (7.3.4.4): one snapshot swap, or
    /// nothing changed and the spec's error. DELETE of `OFPM_ALL` deletes
    /// every meter, of a meter that does not exist nothing (no error), and
    /// deletes the flows that use the meters (flow-removed reason
    /// `DELETE`). MODIFY keeps the flows and starts the meter's buckets
    /// and statistics over.
    pub fn meter_mod(&self, m: &MeterMod) -> Result<(), OfpError> {
        self.meter_mod_counted(m).map(|_| ())
    }

    /// [`Flows::meter_mod`], answering (meters added, modified or
    /// deleted; flows deleted with them).
    pub(super) fn meter_mod_counted(&self, m: &MeterMod) -> Result<(usize, usize), OfpError> {
        let id = m.meter_id;
        if m.command > mc::DELETE {
            return Err(mmf(mmfc::BAD_COMMAND));
        }
        let all = m.command == mc::DELETE && id == meter_id::ALL;
        if !all && (id == 0 || id > MAX_METER_ID) {
            return Err(mmf(mmfc::INVALID_METER));
        }
        let cfg = if m.command == mc::DELETE {
            None
        } else {
            Some(configure(m)?)
        };
        let mut w = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.snap.load_full();
        let mut t = Table::clone(&cur.meters);
        if t.slots.is_empty() {
            t.slots = vec![None; MAX_METERS];
        }
        let mut removed = Vec::new();
        let n = match (m.command, cfg) {
            (mc::ADD, Some(cfg)) => {
                if t.by_id.contains_key(&id) {
                    return Err(mmf(mmfc::METER_EXISTS));
                }
                let free = (0..MAX_METERS)
                    .map(|i| (t.next + i) % MAX_METERS)
                    .find(|&s| t.slots[s].is_none())
                    .ok_or(mmf(mmfc::OUT_OF_METERS))?;
                self.meter_state.slots[free].reset();
                t.slots[free] = Some(Arc::new(cfg));
                t.by_id.insert(id, free as u32);
                t.next = (free + 1) % MAX_METERS;
                let mut next = self.begin(&mut w);
                next.meters = Arc::new(t);
                self.commit(&mut w, next, true);
                (1, 0)
            }
            (mc::MODIFY, Some(cfg)) => {
                let slot = *t.by_id.get(&id).ok_or(mmf(mmfc::UNKNOWN_METER))?;
                self.meter_state.slots[slot as usize].reset();
                t.slots[slot as usize] = Some(Arc::new(cfg));
                let mut next = self.begin(&mut w);
                next.meters = Arc::new(t);
                self.commit(&mut w, next, true);
                (1, 0)
            }
            _ => {
                let ids: HashSet<u32> = if all {
                    t.by_id.keys().copied().collect()
                } else {
                    t.by_id.get(&id).map(|_| id).into_iter().collect()
                };
                if ids.is_empty() {
                    return Ok((0, 0));
                }
                for i in &ids {
                    if let Some(s) = t.by_id.remove(i) {
                        t.slots[s as usize] = None;
                    }
                }
                let gone = users(&cur, &ids);
                let mut next = self.begin(&mut w);
                next.update_rules(&gone, &|_| None, &mut removed);
                next.meters = Arc::new(t);
                self.commit(&mut w, next, true);
                (ids.len(), removed.len())
            }
        };
        drop(w);
        self.notify(&removed, Reason::Delete, Instant::now());
        Ok(n)
    }

    /// The configuration of meter `id` (`OFPM_ALL`: every meter, by id):
    /// (flags, id, bands as given). A meter that does not exist: none.
    pub fn meter_config(&self, id: u32) -> Vec<(u16, u32, Vec<Band>)> {
        let snap = self.snap.load();
        let t = &snap.meters;
        t.by_id
            .iter()
            .filter(|(m, _)| id == meter_id::ALL || **m == id)
            .filter_map(|(_, &s)| t.cfg(s))
            .map(|c| (c.flags, c.id, c.bands.clone()))
            .collect()
    }

    /// The statistics of meter `id` (`OFPM_ALL`: every meter, by id):
    /// the flows using it, the packets and bytes it saw, and per band
    /// those it acted on (dropped or remarked).
    pub fn meter_stats(&self, id: u32) -> Vec<MeterStats> {
        let snap = self.snap.load();
        let t = &snap.meters;
        let now = Instant::now();
        t.by_id
            .iter()
            .filter(|(m, _)| id == meter_id::ALL || **m == id)
            .filter_map(|(&m, &s)| Some((m, s, t.cfg(s)?)))
            .map(|(m, s, c)| {
                let st = &self.meter_state.slots[s as usize];
                let d = now.saturating_duration_since(c.installed);
                MeterStats {
                    meter_id: m,
                    flow_count: users(&snap, &HashSet::from([m])).len() as u32,
                    packet_in_count: st.packets.load(Relaxed),
                    byte_in_count: st.bytes.load(Relaxed),
                    duration_sec: d.as_secs() as u32,
                    duration_nsec: d.subsec_nanos(),
                    bands: st.bands[..c.bands.len()]
                        .iter()
                        .map(|b| (b.packets.load(Relaxed), b.bytes.load(Relaxed)))
                        .collect(),
                }
            })
            .collect()
    }

    /// `struct ofp_meter_features`: (max meters, band types, capabilities,
    /// max bands per meter, max colours).
    pub fn meter_features(&self) -> (u32, u32, u32, u8, u8) {
        (
            MAX_METERS as u32,
            (1 << mbt::DROP) | (1 << mbt::DSCP_REMARK),
            FLAGS as u32,
            MAX_BANDS as u8,
            0,
        )
    }
}
