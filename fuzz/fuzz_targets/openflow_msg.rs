//! A hostile OpenFlow peer's byte stream through the channel's decoding
//! (crates/openflow) and, for flow-mods, the flows logic's typed API: no
//! input may panic; a decoded flow-mod must encode and decode back to
//! itself (group-mods too); whatever the logic accepted must show up in its statistics,
//! whose entries must encode within their announced lengths.
#![no_main]

use libfuzzer_sys::fuzz_target;
use logic::flows::Flows;
use openflow::{decode, frame_len, Message, MultipartRequest};

thread_local! {
    static FLOWS: Flows = Flows::from_config(&serde_json::Value::Null).expect("empty flows");
}

fuzz_target!(|data: &[u8]| {
    FLOWS.with(|f| {
        let mut rest = data;
        let mut n = 0;
        while n < 64 {
            n += 1;
            let len = match frame_len(rest) {
                Ok(Some(l)) => l,
                Ok(None) | Err(_) => break,
            };
            let Some(msg) = rest.get(..len) else { break };
            rest = &rest[len..];
            let Ok((h, m)) = decode(msg) else { continue };
            assert_eq!(h.length as usize, msg.len());
            match m {
                Message::FlowMod(fm) => {
                    let again = openflow::flow_mod(h.xid, &fm);
                    if again.len() <= 65535 {
                        let (_, m2) = decode(&again).expect("an encoded flow-mod decodes");
                        assert_eq!(m2, Message::FlowMod(fm.clone()));
                    }
                    let _ = f.flow_mod(&fm);
                }
                Message::GroupMod(g) => {
                    let again = openflow::group_mod(h.xid, &g);
                    if again.len() <= 65535 {
                        let (_, m2) = decode(&again).expect("an encoded group-mod decodes");
                        assert_eq!(m2, Message::GroupMod(g.clone()));
                    }
                    let _ = f.group_mod(&g);
                    for (kind, id, b) in f.group_desc() {
                        let e = openflow::group_desc_entry(kind, id, &b);
                        assert_eq!(u16::from_be_bytes([e[0], e[1]]) as usize, e.len());
                    }
                }
                Message::Multipart {
                    req: MultipartRequest::Flow(r) | MultipartRequest::Aggregate(r),
                    ..
                } => {
                    if let Ok(st) = f.flow_stats(&r) {
                        for s in &st {
                            let e = openflow::flow_stats_entry(s);
                            assert_eq!(u16::from_be_bytes([e[0], e[1]]) as usize, e.len());
                        }
                        let (_, _, count) = f.aggregate_stats(&r).expect("same filter");
                        assert_eq!(count as usize, st.len());
                    }
                }
                _ => {}
            }
        }
        // Keep the group table small too (deleting groups deletes their flows).
        if f.group_desc().len() > 64 {
            let all = openflow::GroupMod {
                command: openflow::gc::DELETE,
                kind: 0,
                group_id: openflow::GROUP_ALL,
                buckets: vec![],
            };
            f.group_mod(&all).expect("delete all groups");
        }
        // Keep the tables small between inputs.
        if f.flow_count() > 256 {
            let mut del = openflow::FlowMod {
                cookie: 0,
                cookie_mask: 0,
                table_id: openflow::TABLE_ALL,
                command: openflow::fc::DELETE,
                idle_timeout: 0,
                hard_timeout: 0,
                priority: 0,
                buffer_id: openflow::NO_BUFFER,
                out_port: openflow::port::ANY,
                out_group: openflow::GROUP_ANY,
                flags: 0,
                matches: vec![],
                instructions: vec![],
            };
            del.priority = 0;
            f.flow_mod(&del).expect("delete all");
            assert_eq!(f.flow_count(), 0);
        }
    });
});
