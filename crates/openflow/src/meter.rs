//! The meter table's messages (section 7.3.4.4 and 7.3.5.12-14): meter-mod
//! decoding with its bands, and the meter config, meter stats and meter
//! features replies.

use crate::consts::*;
use crate::decode::Reader;
use crate::encode::Msg;
use crate::OfpError;

/// `enum ofp_meter_flags`.
pub mod mf {
    /// Rates in kb/s.
    pub const KBPS: u16 = 1 << 0;
    /// Rates in packets per second.
    pub const PKTPS: u16 = 1 << 1;
    /// The bands' burst sizes apply.
    pub const BURST: u16 = 1 << 2;
    /// Keep statistics.
    pub const STATS: u16 = 1 << 3;
}

/// `enum ofp_meter_band_type`.
pub mod mbt {
    /// Drop packets above the band's rate.
    pub const DROP: u16 = 1;
    /// Raise the drop precedence of the DSCP.
    pub const DSCP_REMARK: u16 = 2;
    /// An experimenter's band.
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// `OFPM_MAX`, the highest meter id a meter-mod may name; and the
/// virtual meters `OFPM_SLOWPATH`, `OFPM_CONTROLLER`, `OFPM_ALL`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod meter_id {
    pub const MAX: u32 = 0xffff_0000;
    pub const SLOWPATH: u32 = 0xffff_fffd;
    pub const CONTROLLER: u32 = 0xffff_fffe;
    pub const ALL: u32 = 0xffff_ffff;
}

/// Names of the `OFPMMFC_*` codes, by code.
pub const MMFC_NAMES: &[&str] = &[
    "UNKNOWN",
    "METER_EXISTS",
    "INVALID_METER",
    "UNKNOWN_METER",
    "BAD_COMMAND",
    "BAD_FLAGS",
    "BAD_RATE",
    "BAD_BURST",
    "BAD_BAND",
    "BAD_BAND_VALUE",
    "OUT_OF_METERS",
    "OUT_OF_BANDS",
];

/// One band (`struct ofp_meter_band_*`), as given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Band {
    /// `OFPMBT_*`.
    pub kind: u16,
    /// kb/s or packets/s (the meter's flags say which).
    pub rate: u32,
    /// kb or packets (with `OFPMF_BURST`).
    pub burst: u32,
    /// DSCP remark: the drop precedence to add.
    pub prec_level: u8,
    /// Experimenter band: the experimenter id.
    pub experimenter: u32,
}

/// `struct ofp_meter_mod`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MeterMod {
    /// `OFPMC_*`.
    pub command: u16,
    /// `OFPMF_*`.
    pub flags: u16,
    /// The meter (1 to `meter_id::MAX`; `meter_id::ALL` in a delete).
    pub meter_id: u32,
    /// Its bands, as given.
    pub bands: Vec<Band>,
}

/// Decodes a meter-mod body (after the header). A band's length must be
/// its type's (16 bytes for all three), else `OFPMMFC_BAD_BAND`; bytes
/// that do not make a whole band: `OFPBRC_BAD_LEN`.
pub fn decode_meter_mod(r: &mut Reader<'_>) -> Result<MeterMod, OfpError> {
    let e = OfpError::bad_len();
    let command = r.u16(e)?;
    let flags = r.u16(e)?;
    let meter_id = r.u32(e)?;
    let mut bands = Vec::new();
    while !r.is_empty() {
        let kind = r.u16(e)?;
        let len = r.u16(e)? as usize;
        if len < 16 || !len.is_multiple_of(8) {
            return Err(e);
        }
        let mut b = Reader::new(r.take(len - 4, e)?);
        let rate = b.u32(e)?;
        let burst = b.u32(e)?;
        let (mut prec_level, mut experimenter) = (0, 0);
        match kind {
            mbt::DSCP_REMARK => prec_level = b.u8(e)?,
            mbt::EXPERIMENTER => experimenter = b.u32(e)?,
            _ => {}
        }
        if len != 16 {
            return Err(OfpError::new(et::METER_MOD_FAILED, mmfc::BAD_BAND));
        }
        bands.push(Band {
            kind,
            rate,
            burst,
            prec_level,
            experimenter,
        });
    }
    Ok(MeterMod {
        command,
        flags,
        meter_id,
        bands,
    })
}

fn put_bands(m: &mut Msg, bands: &[Band]) {
    for b in bands {
        m.u16(b.kind).u16(16).u32(b.rate).u32(b.burst);
        match b.kind {
            mbt::DSCP_REMARK => {
                m.u8(b.prec_level).zeros(3);
            }
            mbt::EXPERIMENTER => {
                m.u32(b.experimenter);
            }
            _ => {
                m.zeros(4);
            }
        }
    }
}

/// Encodes a meter-mod (what a controller sends; for tests and tools).
pub fn meter_mod(xid: u32, g: &MeterMod) -> Vec<u8> {
    let mut m = Msg::new(t::METER_MOD, xid);
    m.u16(g.command).u16(g.flags).u32(g.meter_id);
    put_bands(&mut m, &g.bands);
    m.finish()
}

/// One `struct ofp_meter_config` (multipart `OFPMP_METER_CONFIG`).
pub fn meter_config_entry(flags: u16, meter_id: u32, bands: &[Band]) -> Vec<u8> {
    let mut m = Msg::new(0, 0);
    m.u16(8 + 16 * bands.len() as u16).u16(flags).u32(meter_id);
    put_bands(&mut m, bands);
    m.finish()[8..].to_vec()
}

/// One meter's statistics (`struct ofp_meter_stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MeterStats {
    /// The meter.
    pub meter_id: u32,
    /// Flows that use it.
    pub flow_count: u32,
    /// Packets that entered it.
    pub packet_in_count: u64,
    /// Bytes of those packets.
    pub byte_in_count: u64,
    /// Whole seconds since the meter was added.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// (packets, bytes) per band: what the band acted on.
    pub bands: Vec<(u64, u64)>,
}

/// One `struct ofp_meter_stats` (multipart `OFPMP_METER`).
pub fn meter_stats_entry(s: &MeterStats) -> Vec<u8> {
    let mut m = Msg::new(0, 0);
    m.u32(s.meter_id)
        .u16(40 + 16 * s.bands.len() as u16)
        .zeros(6)
        .u32(s.flow_count)
        .u64(s.packet_in_count)
        .u64(s.byte_in_count)
        .u32(s.duration_sec)
        .u32(s.duration_nsec);
    for &(p, b) in &s.bands {
        m.u64(p).u64(b);
    }
    m.finish()[8..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, Message};

    #[test]
    fn meter_mod_round_trips_and_replies_have_the_spec_layout() {
        let g = MeterMod {
            command: mc::ADD,
            flags: mf::KBPS | mf::BURST | mf::STATS,
            meter_id: 3,
            bands: vec![
                Band {
                    kind: mbt::DROP,
                    rate: 1000,
                    burst: 100,
                    prec_level: 0,
                    experimenter: 0,
                },
                Band {
                    kind: mbt::DSCP_REMARK,
                    rate: 500,
                    burst: 0,
                    prec_level: 1,
                    experimenter: 0,
                },
            ],
        };
        let b = meter_mod(7, &g);
        assert_eq!(b.len(), 16 + 32);
        let (h, m) = decode(&b).unwrap();
        assert_eq!(h.xid, 7);
        assert_eq!(m, Message::MeterMod(g.clone()));
        // A band of another length than its type's: OFPMMFC_BAD_BAND.
        let mut long = b.clone();
        long.extend_from_slice(&[
            0, 1, 0, 24, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
        ]);
        let n = long.len() as u16;
        long[2..4].copy_from_slice(&n.to_be_bytes());
        assert_eq!(
            decode(&long).map(|_| ()),
            Err(OfpError::new(et::METER_MOD_FAILED, mmfc::BAD_BAND))
        );
        let c = meter_config_entry(g.flags, 3, &g.bands);
        assert_eq!(c.len(), 8 + 32);
        assert_eq!(&c[0..2], &40u16.to_be_bytes());
        assert_eq!(&c[8..10], &mbt::DROP.to_be_bytes());
        assert_eq!(c[8 + 16 + 12], 1, "prec_level");
        let s = meter_stats_entry(&MeterStats {
            meter_id: 3,
            flow_count: 1,
            packet_in_count: 2,
            byte_in_count: 3,
            duration_sec: 4,
            duration_nsec: 5,
            bands: vec![(6, 7), (8, 9)],
        });
        assert_eq!(s.len(), 72);
        assert_eq!(&s[4..6], &72u16.to_be_bytes());
        assert_eq!(&s[40..48], &6u64.to_be_bytes());
    }
}
