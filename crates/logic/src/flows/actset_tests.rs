//! The action set (OpenFlow 1.3, 5.9 and 5.10): `write_actions(...)`
//! merges into it (one action per type, one set-field per field, the last
//! written wins), `clear_actions` empties it, and when the pipeline ends
//! (a flow without `goto_table`) it runs in the spec's order: copy TTL
//! inwards, pop, push-MPLS, push-VLAN, copy TTL outwards, decrement TTL,
//! set, group, output (the output ignored when there is a group). A table
//! miss drops the packet with its set. Each rule is checked on the cached
//! logic (cold, then warm: the exact-match cache's replay) and on the
//! uncached one, byte by byte; then over OpenFlow (flow-mods, flow stats
//! echoing the instructions) and in the text syntax.

use super::cache_tests::{build, run_copies, Tf};
use super::*;
use crate::testutil::{fm, udp4};
use openflow::{bac, fc, Instruction, Oxm};
use serde_json::json;

const SRC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const DST: [u8; 6] = [2, 0, 0, 0, 0, 2];
const X: [u8; 6] = [2, 0, 0, 0, 0, 0x0a];
const Y: [u8; 6] = [2, 0, 0, 0, 0, 0x0b];

/// The UDP frame of the tests (IPv4 TTL 64, from port 0).
fn frame() -> Vec<u8> {
    udp4(SRC, DST, [10, 0, 0, 1], [10, 0, 0, 2], 1000, 80)
}

fn with_dst(mut f: Vec<u8>, m: [u8; 6]) -> Vec<u8> {
    f[0..6].copy_from_slice(&m);
    f
}

fn with_src(mut f: Vec<u8>, m: [u8; 6]) -> Vec<u8> {
    f[6..12].copy_from_slice(&m);
    f
}

/// A C-tag of VID `vid` (PCP 0) in front of `f`'s EtherType.
fn tagged(f: &[u8], vid: u16) -> Vec<u8> {
    let mut t = f[..12].to_vec();
    t.extend_from_slice(&0x8100u16.to_be_bytes());
    t.extend_from_slice(&vid.to_be_bytes());
    t.extend_from_slice(&f[12..]);
    t
}

/// Logics with `flows`: cached and uncached.
fn logics(flows: &[&str]) -> [Tf; 2] {
    let fs = [build(64), build(0)];
    for f in &fs {
        for t in flows {
            f.command("add", &json!({ "flow": t }))
                .unwrap_or_else(|e| panic!("{t}: {e:?}"));
        }
    }
    fs
}

/// What one frame from port 0 comes to: every (verdict, bytes) sent,
/// copies first, in the order made, then the frame's own; groups of the
/// logic as the ports they hold (`Port`s in order).
fn sent(f: &Tf, frame: &[u8]) -> Vec<(Verdict, Vec<u8>)> {
    let (v, after, copies) = run_copies(f, 0, &[frame.to_vec()]);
    let mut out = Vec::new();
    for (v, b) in copies.into_iter().chain([(v[0], after[0].clone())]) {
        match v {
            Verdict::Group(g) => {
                for &p in f.group_members(g) {
                    out.push((Verdict::Port(p), b.clone()));
                }
            }
            v => out.push((v, b)),
        }
    }
    out
}

/// Every logic of `flows`, twice each (the cached one cold and warm),
/// gives `want` for `frame`.
fn check(flows: &[&str], frame: &[u8], want: &[(Verdict, Vec<u8>)]) {
    for (i, f) in logics(flows).iter().enumerate() {
        for pass in 0..2 {
            assert_eq!(
                sent(f, frame),
                want,
                "logic {} (cached: {}), pass {pass}, flows {flows:?}",
                i,
                i == 0
            );
        }
    }
}

fn port(p: PortId, b: Vec<u8>) -> (Verdict, Vec<u8>) {
    (Verdict::Port(p), b)
}

#[test]
fn the_set_runs_when_the_pipeline_ends_after_later_tables_changes() {
    // The output written in table 0 sends the frame as table 1 left it.
    check(
        &[
            "table=0,actions=write_actions(output:2),goto_table:1",
            "table=1,actions=mod_dl_src:02:00:00:00:00:0a",
        ],
        &frame(),
        &[port(2, with_src(frame(), X))],
    );
    // A flow that only writes and ends the pipeline: its set runs.
    check(
        &["actions=write_actions(mod_dl_dst:02:00:00:00:00:0a,output:1)"],
        &frame(),
        &[port(1, with_dst(frame(), X))],
    );
    // Header changes after the last output of the flow that ends the
    // pipeline (which nothing sees without a set) are seen by the set's
    // output; the apply-action output got the frame before them.
    check(
        &[
            "table=0,actions=write_actions(output:2),goto_table:1",
            "table=1,actions=output:3,mod_dl_src:02:00:00:00:00:0a",
        ],
        &frame(),
        &[port(3, frame()), port(2, with_src(frame(), X))],
    );
}

#[test]
fn writes_merge_one_action_per_type_and_one_set_field_per_field() {
    // The later output replaces the earlier; the later eth_dst replaces
    // the earlier, the eth_src written before stays.
    check(
        &[
            "table=0,actions=write_actions(output:2,mod_dl_dst:02:00:00:00:00:0a,\
             mod_dl_src:02:00:00:00:00:0b),goto_table:1",
            "table=1,actions=write_actions(output:3,mod_dl_dst:02:00:00:00:00:01)",
        ],
        &frame(),
        &[port(3, with_src(with_dst(frame(), SRC), Y))],
    );
    // Twice the same type in one write_actions: the last.
    check(
        &["actions=write_actions(output:2,output:3)"],
        &frame(),
        &[port(3, frame())],
    );
}

#[test]
fn clear_actions_empties_the_set() {
    check(
        &[
            "table=0,actions=write_actions(mod_dl_dst:02:00:00:00:00:0a,output:2),goto_table:1",
            "table=1,actions=clear_actions",
        ],
        &frame(),
        &[(Verdict::Drop(DropReason::Policy), frame())],
    );
    // Cleared, then written in the same flow: only what it writes.
    check(
        &[
            "table=0,actions=write_actions(mod_dl_dst:02:00:00:00:00:0a,output:2),goto_table:1",
            "table=1,actions=clear_actions,write_actions(output:3)",
        ],
        &frame(),
        &[port(3, frame())],
    );
    // An apply-action output is not in the set: clear_actions leaves it.
    check(
        &[
            "table=0,actions=write_actions(output:2),goto_table:1",
            "table=1,actions=output:1,clear_actions",
        ],
        &frame(),
        &[port(1, frame())],
    );
}

#[test]
fn the_set_runs_in_the_specs_order_whatever_the_order_written() {
    // push-VLAN before the set-field of its VID, the output last.
    check(
        &["actions=write_actions(output:1,set_field:4101->vlan_vid,push_vlan:0x8100)"],
        &frame(),
        &[port(1, tagged(&frame(), 5))],
    );
    // Decrement TTL before set: the set TTL wins.
    let mut ttl9 = frame();
    rewrite::set_nw_ttl(&mut ttl9, 9);
    check(
        &["ip,actions=write_actions(set_nw_ttl:9,output:1,dec_ttl)"],
        &frame(),
        &[port(1, ttl9)],
    );
    // Pop before push: a tagged frame gets its tag replaced by an S-tag
    // of VID 0 (pushed onto the untagged frame), not a second tag.
    let mut s_tag = tagged(&frame(), 0);
    s_tag[12..14].copy_from_slice(&0x88a8u16.to_be_bytes());
    check(
        &["dl_vlan=7,actions=write_actions(push_vlan:0x88a8,output:1,strip_vlan)"],
        &tagged(&frame(), 7),
        &[port(1, s_tag)],
    );
}

#[test]
fn a_group_in_the_set_wins_over_its_output() {
    for f in logics(&[]) {
        f.command(
            "add_group",
            &json!({"group": "group_id=1,type=all,bucket=output:2,bucket=output:3"}),
        )
        .unwrap();
        f.command(
            "add",
            &json!({"flow": "actions=write_actions(output:1,group:1,mod_dl_dst:02:00:00:00:00:0a)"}),
        )
        .unwrap();
        for _ in 0..2 {
            let want = with_dst(frame(), X);
            assert_eq!(sent(&f, &frame()), [port(2, want.clone()), port(3, want)]);
        }
    }
}

#[test]
fn apply_outputs_get_the_frame_before_the_sets_changes() {
    check(
        &["actions=output:3,write_actions(mod_dl_dst:02:00:00:00:00:0a,output:2)"],
        &frame(),
        &[port(3, frame()), port(2, with_dst(frame(), X))],
    );
    // The same port by both, nothing changed between: one delivery.
    check(
        &["actions=output:2,write_actions(output:2)"],
        &frame(),
        &[port(2, frame())],
    );
}

#[test]
fn a_table_miss_or_a_drop_discards_the_set() {
    // No flow in table 1: dropped as a miss, the set not run.
    check(
        &["table=0,actions=write_actions(output:2),goto_table:1"],
        &frame(),
        &[(Verdict::Drop(DropReason::NoMatch), frame())],
    );
    // A TTL that expires in the set: dropped, the earlier apply output
    // sent.
    let mut ttl1 = frame();
    rewrite::set_nw_ttl(&mut ttl1, 1);
    let fs = logics(&["ip,actions=output:3,write_actions(dec_ttl,output:2)"]);
    for f in &fs {
        for _ in 0..2 {
            assert_eq!(sent(f, &ttl1), [port(3, ttl1.clone())]);
        }
    }
}

#[test]
fn flows_without_a_set_keep_their_verdicts() {
    // A plain flow after a table that wrote nothing takes its installed
    // verdict; after one that wrote, the set runs.
    check(
        &[
            "table=0,in_port=0,actions=goto_table:1",
            "table=1,actions=output:2",
        ],
        &frame(),
        &[port(2, frame())],
    );
    check(
        &[
            "table=0,actions=write_actions(mod_dl_dst:02:00:00:00:00:0a),goto_table:1",
            "table=1,actions=output:2",
        ],
        &frame(),
        &[port(2, frame())],
    );
    check(
        &[
            "table=0,actions=write_actions(output:3),goto_table:1",
            "table=1,actions=output:2",
        ],
        &frame(),
        &[port(2, frame()), port(3, frame())],
    );
}

#[test]
fn the_text_syntax_round_trips_and_refuses_out_of_order() {
    let f = build(0);
    let t = "table=0,priority=5,ip,actions=output:1,clear_actions,\
             write_actions(mod_nw_dst:10.0.0.9,output:2),write_metadata:0x1/0x1,goto_table:3";
    f.command("add", &json!({ "flow": t })).unwrap();
    let d = f.command("dump", &json!({})).unwrap();
    let shown = d["flows"][0]["flow"].as_str().unwrap().to_string();
    assert!(
        shown.ends_with(
            "actions=output:1,clear_actions,write_actions(mod_nw_dst:10.0.0.9,output:2),\
             write_metadata:0x1/0x1,goto_table:3"
        ),
        "{shown}"
    );
    // What dump prints, add takes back (the same flow, replaced).
    let r = f.command("add", &json!({ "flow": shown })).unwrap();
    assert_eq!(r["replaced"], 1);
    for (bad, why) in [
        (
            "actions=write_actions(output:1),output:2",
            "after clear_actions or write_actions",
        ),
        (
            "actions=clear_actions,output:2",
            "after clear_actions or write_actions",
        ),
        (
            "actions=write_actions(output:1),clear_actions",
            "clear_actions after",
        ),
        ("actions=write_actions(output:1", "no closing parenthesis"),
        ("actions=write_actions(meter:1)", "inside write_actions"),
        (
            "actions=write_actions(goto_table:1)",
            "inside write_actions",
        ),
        (
            "actions=write_actions(output:1),write_actions(output:2)",
            "twice",
        ),
        (
            "actions=write_metadata:1,write_actions(output:1)",
            "after write_metadata",
        ),
        // Prerequisites, in the set's order: the set-field of VID needs a
        // tag, which only a push in the set gives.
        (
            "actions=write_actions(set_field:4101->vlan_vid,output:1)",
            "missing prerequisite",
        ),
        (
            "actions=write_actions(mod_nw_dst:10.0.0.1)",
            "missing prerequisite",
        ),
    ] {
        let e = f.command("add", &json!({ "flow": bad })).unwrap_err();
        assert!(e.0.contains(why), "{bad}: {}", e.0);
    }
    // Nothing but the first flow.
    let d = f.command("dump", &json!({})).unwrap();
    assert_eq!(d["flows"].as_array().unwrap().len(), 1);
}

#[test]
fn openflow_write_and_clear_actions_install_run_and_echo() {
    let f = build(64);
    let out = |port, max_len| openflow::Action::Output { port, max_len };
    let set_dst = openflow::Action::SetField(Oxm::exact(openflow::oxm::ETH_DST, 0x02000000000a));
    let insts = vec![
        Instruction::ApplyActions(vec![out(4, 0xffe5)]),
        Instruction::ClearActions,
        Instruction::WriteActions(vec![set_dst, out(3, 0xffe5)]),
        Instruction::GotoTable(1),
    ];
    f.flow_mod(&fm(fc::ADD, 0, 1, vec![], insts.clone()))
        .unwrap();
    f.flow_mod(&fm(
        fc::ADD,
        1,
        1,
        vec![],
        vec![Instruction::WriteActions(vec![])],
    ))
    .unwrap();
    // OpenFlow port 4 is id 3, port 3 id 2.
    for _ in 0..2 {
        assert_eq!(
            sent(&f, &frame()),
            [port(3, frame()), port(2, with_dst(frame(), X))]
        );
    }
    // Flow stats echo the instructions as installed (max_len too).
    let req = openflow::FlowStatsRequest {
        table_id: 0,
        out_port: openflow::port::ANY,
        out_group: openflow::GROUP_ANY,
        cookie: 0,
        cookie_mask: 0,
        matches: vec![],
    };
    let st = f.flow_stats(&req).unwrap();
    assert_eq!(st.len(), 1);
    assert_eq!(st[0].instructions, insts);
    // The out_port filter sees a written output.
    let by_port = |p| {
        f.flow_stats(&openflow::FlowStatsRequest {
            out_port: p,
            ..req.clone()
        })
        .unwrap()
        .len()
    };
    assert_eq!((by_port(3), by_port(2)), (1, 0));
    // A write-actions whose set-field lacks its prerequisite: refused.
    let set_ip = openflow::Action::SetField(Oxm::exact(openflow::oxm::IPV4_DST, 1));
    assert_eq!(
        f.flow_mod(&fm(
            fc::ADD,
            0,
            2,
            vec![],
            vec![Instruction::WriteActions(vec![set_ip])]
        )),
        Err(openflow::OfpError::new(
            openflow::et::BAD_ACTION,
            bac::MATCH_INCONSISTENT
        ))
    );
}

#[test]
fn a_fast_failover_group_in_the_set_follows_the_links_cached_too() {
    // Bucket 1 watches port 1, bucket 2 port 2 and rewrites the
    // destination, bucket 3 watches nothing (always live).
    for f in logics(&[]) {
        f.command(
            "add_group",
            &json!({"group": "group_id=7,type=ff,bucket=watch_port:1,output:1,\
                     bucket=watch_port:2,mod_dl_dst:02:00:00:00:00:0a,output:2,\
                     bucket=output:3"}),
        )
        .unwrap();
        f.command(
            "add",
            &json!({"flow": "table=0,actions=write_actions(group:7),goto_table:1"}),
        )
        .unwrap();
        f.command(
            "add",
            &json!({"flow": "table=1,actions=write_actions(output:3)"}),
        )
        .unwrap();
        let twice = |want: &[(Verdict, Vec<u8>)]| {
            for _ in 0..2 {
                assert_eq!(sent(&f, &frame()), want);
            }
        };
        twice(&[port(1, frame())]);
        f.set_port_live(1, false);
        twice(&[port(2, with_dst(frame(), X))]);
        f.set_port_live(2, false);
        twice(&[port(3, frame())]);
        f.set_port_live(1, true);
        twice(&[port(1, frame())]);
        f.set_port_live(2, true);
    }
}
