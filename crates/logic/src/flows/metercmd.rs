//! Meters through the `flows` logic's commands (`logic.command` of the
//! JSON-RPC API, `turnout ctl logic cmd`): a meter in ovs-ofctl's syntax,
//! `meter=1,kbps,burst,stats,bands=type=drop,rate=1000,burst_size=100`,
//! run as the OpenFlow meter-mod it stands for ([`Flows::meter_mod`]), so
//! the checks, refusals and effects are those of a meter-mod, with the
//! `OFPMMFC_*` name and a sentence in the error (docs/flows.md,
//! "Meters").

use openflow::{et, mbt, mc, meter_id, mf, mmfc, Band, MeterMod, OfpError};
use serde_json::{json, Value};

use super::meters::{MAX_BANDS, MAX_BURST, MAX_METERS, MAX_METER_ID, MAX_RATE};
use super::text::{tokens, uint};
use super::Flows;
use crate::args::Args;

/// A meter as parsed from text: its id (`meter=all`: `OFPM_ALL`), flags
/// and bands.
#[derive(Debug, PartialEq)]
pub(super) struct MeterSpec {
    pub(super) id: Option<u32>,
    pub(super) flags: u16,
    pub(super) bands: Vec<Band>,
}

/// Parses `meter=N[,kbps|pktps][,burst][,stats][,bands=type=T,rate=R
/// [,burst_size=B][,prec_level=P][,type=...]]`.
pub(super) fn parse_meter(text: &str) -> Result<MeterSpec, String> {
    let mut spec = MeterSpec {
        id: None,
        flags: 0,
        bands: Vec::new(),
    };
    let mut in_bands = false;
    for t in tokens(text) {
        let (k, v) = t.split_once('=').unwrap_or((t, ""));
        let k = k.to_ascii_lowercase();
        if !in_bands {
            match k.as_str() {
                "meter" => {
                    if spec.id.is_some() {
                        return Err("meter given twice".into());
                    }
                    spec.id = Some(if v.eq_ignore_ascii_case("all") {
                        meter_id::ALL
                    } else {
                        uint("meter", v, MAX_METER_ID as u64)? as u32
                    });
                }
                "kbps" => spec.flags |= mf::KBPS,
                "pktps" => spec.flags |= mf::PKTPS,
                "burst" => spec.flags |= mf::BURST,
                "stats" => spec.flags |= mf::STATS,
                "bands" => {
                    in_bands = true;
                    // `bands=type=drop`: the rest is the first band's.
                    let (bk, bv) = v.split_once('=').unwrap_or((v, ""));
                    if !bk.is_empty() {
                        band_field(&mut spec.bands, bk, bv)?;
                    }
                }
                _ => {
                    return Err(format!(
                        "{t:?}: expected meter=N, kbps, pktps, burst, stats or bands=..."
                    ))
                }
            }
        } else {
            band_field(&mut spec.bands, &k, v)?;
        }
    }
    for (i, b) in spec.bands.iter().enumerate() {
        if b.kind == 0 {
            return Err(format!(
                "band {}: needs type=drop or type=dscp_remark",
                i + 1
            ));
        }
    }
    Ok(spec)
}

/// One `key=value` of a band: `type=` starts a new band.
fn band_field(bands: &mut Vec<Band>, k: &str, v: &str) -> Result<(), String> {
    let new = || Band {
        kind: 0,
        rate: 0,
        burst: 0,
        prec_level: 0,
        experimenter: 0,
    };
    if k == "type" {
        let kind = match v.to_ascii_lowercase().as_str() {
            "drop" => mbt::DROP,
            "dscp_remark" => mbt::DSCP_REMARK,
            _ => return Err(format!("band type={v:?}: must be drop or dscp_remark")),
        };
        bands.push(Band { kind, ..new() });
        return Ok(());
    }
    let b = bands
        .last_mut()
        .ok_or_else(|| format!("{k}={v}: a band starts with type="))?;
    match k {
        "rate" => b.rate = uint("rate", v, u32::MAX as u64)? as u32,
        "burst_size" => b.burst = uint("burst_size", v, u32::MAX as u64)? as u32,
        "prec_level" => b.prec_level = uint("prec_level", v, 255)? as u8,
        _ => {
            return Err(format!(
                "{k}={v}: a band has type, rate, burst_size, prec_level"
            ))
        }
    }
    Ok(())
}

/// The meter in the syntax [`parse_meter`] reads.
fn format_meter(flags: u16, id: u32, bands: &[Band]) -> String {
    let mut s = format!("meter={id}");
    for (f, n) in [
        (mf::KBPS, "kbps"),
        (mf::PKTPS, "pktps"),
        (mf::BURST, "burst"),
        (mf::STATS, "stats"),
    ] {
        if flags & f != 0 {
            s += ",";
            s += n;
        }
    }
    for (i, b) in bands.iter().enumerate() {
        s += if i == 0 { ",bands=" } else { "," };
        s += if b.kind == mbt::DSCP_REMARK {
            "type=dscp_remark"
        } else {
            "type=drop"
        };
        s += &format!(",rate={}", b.rate);
        if b.burst != 0 {
            s += &format!(",burst_size={}", b.burst);
        }
        if b.kind == mbt::DSCP_REMARK {
            s += &format!(",prec_level={}", b.prec_level);
        }
    }
    s
}

/// What a refused meter-mod means, for the command's error.
fn explain(e: OfpError, id: u32) -> String {
    let why = match (e.kind, e.code) {
        (et::METER_MOD_FAILED, mmfc::METER_EXISTS) => format!("meter {id} already exists"),
        (et::METER_MOD_FAILED, mmfc::UNKNOWN_METER) => format!("meter {id} does not exist"),
        (et::METER_MOD_FAILED, mmfc::INVALID_METER) => {
            format!("meter id {id} is out of range (1..={MAX_METER_ID})")
        }
        (et::METER_MOD_FAILED, mmfc::BAD_FLAGS) => {
            "kbps and pktps together, or an unknown flag".into()
        }
        (et::METER_MOD_FAILED, mmfc::BAD_RATE) => {
            format!("a band's rate must be 1..={MAX_RATE}")
        }
        (et::METER_MOD_FAILED, mmfc::BAD_BURST) => {
            format!("a band's burst_size must be at most {MAX_BURST}")
        }
        (et::METER_MOD_FAILED, mmfc::BAD_BAND_VALUE) => "prec_level must be 0..=3".into(),
        (et::METER_MOD_FAILED, mmfc::BAD_BAND) => "band types are drop and dscp_remark".into(),
        (et::METER_MOD_FAILED, mmfc::OUT_OF_BANDS) => format!("more than {MAX_BANDS} bands"),
        (et::METER_MOD_FAILED, mmfc::OUT_OF_METERS) => format!("more than {MAX_METERS} meters"),
        _ => "refused".into(),
    };
    format!("{why} ({})", e.name())
}

impl Flows {
    /// The `add_meter`, `mod_meter`, `del_meters` and `dump_meters`
    /// commands (`args`: `{"meter": text}`).
    pub(super) fn meter_command(
        &self,
        what: &str,
        cmd: &str,
        args: &Value,
    ) -> Result<Value, String> {
        let a = Args::new(what, args, &["meter"])?;
        let text = match a.get("meter") {
            Some(v) => Some(
                v.as_str()
                    .ok_or_else(|| a.err("meter", "must be a string in ovs-ofctl meter syntax"))?,
            ),
            None => None,
        };
        let bad = |e: String| format!("{what}: meter {:?}: {e}", text.unwrap_or(""));
        let spec = match text {
            Some(t) => parse_meter(t).map_err(bad)?,
            None if matches!(cmd, "del_meters" | "dump_meters") => MeterSpec {
                id: None,
                flags: 0,
                bands: Vec::new(),
            },
            None => return Err(a.err("meter", "is required (meter=N,kbps,bands=type=drop,rate=R)")),
        };
        let id = spec.id.unwrap_or(meter_id::ALL);
        if matches!(cmd, "del_meters" | "dump_meters") {
            if spec.flags != 0 || !spec.bands.is_empty() {
                return Err(bad("takes meter=N only".into()));
            }
            if cmd == "dump_meters" {
                return Ok(self.meters_json(id));
            }
            let m = MeterMod {
                command: mc::DELETE,
                flags: 0,
                meter_id: id,
                bands: Vec::new(),
            };
            let (meters, flows) = self
                .meter_mod_counted(&m)
                .map_err(|e| bad(explain(e, id)))?;
            return Ok(json!({"deleted": meters, "flows_deleted": flows}));
        }
        let id = spec.id.ok_or_else(|| bad("needs meter=N".into()))?;
        if id == meter_id::ALL {
            return Err(bad("meter=all only selects meters to delete or dump".into()));
        }
        let m = MeterMod {
            command: if cmd == "add_meter" {
                mc::ADD
            } else {
                mc::MODIFY
            },
            flags: spec.flags,
            meter_id: id,
            bands: spec.bands,
        };
        self.meter_mod_counted(&m)
            .map_err(|e| bad(explain(e, id)))?;
        Ok(if cmd == "add_meter" {
            json!({"added": 1})
        } else {
            json!({"modified": 1})
        })
    }

    /// Meters (`OFPM_ALL`: every one), by id, each with its text and
    /// statistics.
    fn meters_json(&self, id: u32) -> Value {
        let stats = self.meter_stats(id);
        let meters: Vec<Value> = self
            .meter_config(id)
            .into_iter()
            .zip(stats)
            .map(|((flags, mid, bands), st)| {
                let d = st.duration_sec as f64 + st.duration_nsec as f64 / 1e9;
                json!({
                    "meter": format_meter(flags, mid, &bands),
                    "meter_id": mid,
                    "flow_count": st.flow_count,
                    "n_packets": st.packet_in_count,
                    "n_bytes": st.byte_in_count,
                    "duration": (d * 1000.0).round() / 1000.0,
                    "bands": st.bands.iter()
                        .map(|(p, b)| json!({"n_packets": p, "n_bytes": b}))
                        .collect::<Vec<_>>(),
                })
            })
            .collect();
        json!({ "meters": meters })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{udp_to, Batch};
    use crate::{DropReason, Logic, Verdict};

    fn cmd(f: &Flows, c: &str, m: &str) -> Result<Value, String> {
        f.command(c, &json!({ "meter": m })).map_err(|e| e.0)
    }

    #[test]
    fn parse_reads_ovs_ofctl_syntax_and_prints_it_back() {
        let t = "meter=3,pktps,burst,stats,bands=type=drop,rate=100,burst_size=10,type=dscp_remark,rate=50,prec_level=1";
        let m = parse_meter(t).unwrap();
        assert_eq!(m.id, Some(3));
        assert_eq!(m.flags, mf::PKTPS | mf::BURST | mf::STATS);
        assert_eq!(m.bands.len(), 2);
        assert_eq!(
            (m.bands[0].kind, m.bands[0].rate, m.bands[0].burst),
            (mbt::DROP, 100, 10)
        );
        assert_eq!(
            (m.bands[1].kind, m.bands[1].prec_level),
            (mbt::DSCP_REMARK, 1)
        );
        assert_eq!(format_meter(m.flags, 3, &m.bands), t);
        for (t, want) in [
            ("meter=x", "meter"),
            ("meter=1,fast", "expected meter=N"),
            ("meter=1,bands=type=police,rate=1", "drop or dscp_remark"),
            ("meter=1,bands=rate=1", "starts with type"),
            ("meter=1,bands=type=drop,color=1", "a band has"),
        ] {
            let e = parse_meter(t).unwrap_err();
            assert!(e.contains(want), "{t}: {e}");
        }
    }

    #[test]
    fn commands_run_meter_mods_with_their_refusals_and_meter_flows() {
        let f = Flows::from_config(&json!(null)).unwrap();
        // 1 packet per second, a burst of 2: of a batch of 6 at one
        // instant, 2 pass (the burst), 4 are dropped.
        cmd(
            &f,
            "add_meter",
            "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=2",
        )
        .unwrap();
        for (c, t, want) in [
            (
                "add_meter",
                "meter=1,kbps,bands=type=drop,rate=1",
                "already exists (OFPMMFC_METER_EXISTS)",
            ),
            (
                "mod_meter",
                "meter=2,kbps,bands=type=drop,rate=1",
                "does not exist (OFPMMFC_UNKNOWN_METER)",
            ),
            (
                "add_meter",
                "meter=2,kbps,pktps,bands=type=drop,rate=1",
                "OFPMMFC_BAD_FLAGS",
            ),
            (
                "add_meter",
                "meter=2,kbps,bands=type=drop,rate=0",
                "OFPMMFC_BAD_RATE",
            ),
            (
                "add_meter",
                "meter=2,kbps,bands=type=drop,rate=4000000000",
                "OFPMMFC_BAD_RATE",
            ),
            (
                "add_meter",
                "meter=2,kbps,burst,bands=type=drop,rate=10,burst_size=4000000000",
                "OFPMMFC_BAD_BURST",
            ),
            (
                "add_meter",
                "meter=2,kbps,bands=type=dscp_remark,rate=10,prec_level=4",
                "OFPMMFC_BAD_BAND_VALUE",
            ),
            (
                "add_meter",
                "meter=0,kbps,bands=type=drop,rate=10",
                "OFPMMFC_INVALID_METER",
            ),
            ("add_meter", "meter=all,kbps", "only selects"),
        ] {
            let e = cmd(&f, c, t).unwrap_err();
            assert!(e.contains(want) && e.contains(t), "{c} {t}: {e}");
        }
        // A flow naming a meter that does not exist is refused.
        assert!(f
            .command("add", &json!({"flow": "actions=meter:2,output:1"}))
            .unwrap_err()
            .0
            .contains("meter 2 does not exist"));
        f.command(
            "add",
            &json!({"flow": "in_port=0,actions=meter:1,output:1"}),
        )
        .unwrap();
        let mut b = Batch::new(vec![udp_to(80); 6]);
        let v = b.classify(&f, 0, 1_000_000_000);
        let meter = Verdict::Drop(DropReason::Meter);
        assert_eq!(
            v,
            vec![
                Verdict::Port(1),
                Verdict::Port(1),
                meter,
                meter,
                meter,
                meter
            ]
        );
        // A second later, one more token.
        let v = Batch::new(vec![udp_to(80); 3]).classify(&f, 0, 2_000_000_000);
        assert_eq!(v, vec![Verdict::Port(1), meter, meter]);
        let d = f.command("dump_meters", &json!({})).unwrap();
        let m = &d["meters"][0];
        assert_eq!(
            m["meter"],
            "meter=1,pktps,burst,stats,bands=type=drop,rate=1,burst_size=2"
        );
        assert_eq!(
            (m["flow_count"].as_u64(), m["n_packets"].as_u64()),
            (Some(1), Some(9))
        );
        assert_eq!(m["bands"][0]["n_packets"], 6);
        // Deleting it deletes the flow using it.
        assert_eq!(
            f.command("del_meters", &json!({})).unwrap(),
            json!({"deleted": 1, "flows_deleted": 1})
        );
        assert_eq!(f.flow_count(), 0);
        assert_eq!(
            cmd(&f, "del_meters", "meter=9").unwrap(),
            json!({"deleted": 0, "flows_deleted": 0})
        );
    }
}
