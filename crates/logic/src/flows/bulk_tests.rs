//! Flow-mods in batches (`Flows::flow_mods`, one swap): each is atomic on
//! its own and sees the ones before it, refusals change nothing and keep
//! their slot, and a batch leaves exactly what applying the same flow-mods
//! one by one leaves (flows, results, flow-removed notices, verdicts, and
//! exact subtable ranks).

use std::time::Instant;

use super::classifier::Subtable;
use super::*;
use crate::testutil::{classify1, flows, fm, inp, out, udp4};
use openflow::{bic, et, fc, ff, fmfc, oxm, port, FlowMod, Instruction, OfpError, Oxm, TABLE_ALL};
use proptest::prelude::*;

/// Flow texts and cookies, in dump order.
fn dumped(f: &Flows) -> Vec<(String, u64)> {
    let d = f.dump(None);
    d["flows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| {
            (
                x["flow"].as_str().unwrap().to_string(),
                x["cookie"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Every bucket of the published snapshot: (table, mask, key, flows' seq).
fn buckets(f: &Flows) -> Vec<(usize, Key, Key, Vec<u64>)> {
    let snap = f.snap.load();
    let mut out = Vec::new();
    for (ti, t) in snap.tables.iter().enumerate() {
        for st in &t.subtables {
            for (k, v) in st.map.iter() {
                out.push((ti, st.mask, k, v.iter().map(|r| r.seq).collect()));
            }
        }
    }
    out.sort_by_key(|(t, m, k, _)| (*t, m.0, k.0));
    out
}

/// Every subtable of the published snapshot is non-empty, ranked by its
/// best flow exactly (not a stale bound), and the tables are in rank order.
fn assert_ranks_exact(f: &Flows) {
    let snap = f.snap.load();
    for (ti, t) in snap.tables.iter().enumerate() {
        for st in &t.subtables {
            assert!(!st.map.is_empty(), "table {ti}: an empty subtable");
            assert!(!st.stale, "table {ti}: a stale subtable published");
            let mut exact = Subtable::clone(st);
            exact.recompute();
            assert_eq!(
                (st.max_priority, st.first_seq),
                (exact.max_priority, exact.first_seq),
                "table {ti}: rank"
            );
        }
        let ranks: Vec<_> = t
            .subtables
            .iter()
            .map(|s| (std::cmp::Reverse(s.max_priority), s.first_seq))
            .collect();
        let mut sorted = ranks.clone();
        sorted.sort();
        assert_eq!(ranks, sorted, "table {ti}: subtable order");
    }
}

#[test]
fn a_refusal_in_the_middle_changes_nothing_and_the_rest_apply() {
    let f = flows();
    let mut goto_back = fm(fc::ADD, 0, 10, inp(2), vec![Instruction::GotoTable(0)]);
    goto_back.instructions.insert(0, out(1));
    let mut over_scan = fm(fc::ADD, 0, 10, vec![], vec![out(3)]);
    over_scan.flags = ff::CHECK_OVERLAP;
    // A mask covering in_port's: checked by one lookup.
    let mut over_lookup = fm(
        fc::ADD,
        0,
        10,
        vec![
            Oxm::exact(oxm::IN_PORT, 1),
            Oxm::exact(oxm::ETH_TYPE, 0x0800),
        ],
        vec![out(3)],
    );
    over_lookup.flags = ff::CHECK_OVERLAP;
    let batch = [
        fm(fc::ADD, 0, 10, inp(1), vec![out(2)]),
        goto_back,
        fm(fc::ADD, 0, 10, inp(2), vec![out(1)]),
        over_scan.clone(),
        over_lookup.clone(),
        fm(fc::ADD, 1, 5, vec![], vec![out(3)]),
        fm(9, 0, 0, vec![], vec![]),
        fm(fc::DELETE_STRICT, 0, 10, inp(1), vec![]),
        // in_port=1 is gone: no overlap any more.
        over_lookup,
    ];
    let refs: Vec<&FlowMod> = batch.iter().collect();
    let before = f.snap.load().gen;
    let res = f.flow_mods(&refs);
    assert_eq!(
        res,
        vec![
            Ok(1),
            Err(OfpError::new(et::BAD_INSTRUCTION, bic::BAD_TABLE_ID)),
            Ok(1),
            Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::OVERLAP)),
            Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::OVERLAP)),
            Ok(1),
            Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND)),
            Ok(1),
            Ok(1),
        ]
    );
    // One swap for the whole batch: built from the snapshot before it.
    assert_eq!(f.snap.load().parent, Some(before));
    // (The JSON dump shows switch port ids: OpenFlow port - 1.)
    assert_eq!(
        dumped(&f).into_iter().map(|(t, _)| t).collect::<Vec<_>>(),
        vec![
            "table=0,priority=10,in_port=1,actions=output:0".to_string(),
            "table=0,priority=10,in_port=0,ip,actions=output:2".to_string(),
            "table=1,priority=5,actions=output:2".to_string(),
        ],
        "{:#?}",
        dumped(&f)
    );
    assert_ranks_exact(&f);
    // A batch of refusals only: nothing swapped.
    let bad = fm(fc::ADD, 0, 1, vec![], vec![Instruction::GotoTable(0)]);
    let g = f.snap.load().gen;
    assert!(f.flow_mods(&[&bad, &bad])[1].is_err());
    assert_eq!(f.snap.load().gen, g);
}

#[test]
fn add_modify_delete_of_one_flow_in_one_batch() {
    let f = flows();
    let m = inp(1);
    let frame = udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1,
        2,
    );
    let mut add = fm(fc::ADD, 0, 7, m.clone(), vec![out(2)]);
    add.flags = ff::SEND_FLOW_REM;
    let modify = fm(fc::MODIFY, 0, 0, m.clone(), vec![out(3)]);
    let res = f.flow_mods(&[&add, &modify]);
    assert_eq!(res, vec![Ok(1), Ok(1)]);
    assert_eq!(classify1(&f, 0, 0, &frame), Verdict::Port(2));
    assert_eq!(f.flow_count(), 1);
    let (_, cursor) = f.flow_removed_since(0);
    // Replace, modify strictly and delete in one batch: the delete sees
    // the modified flow, and reports it (flow-removed) after the swap.
    let strict = fm(fc::MODIFY_STRICT, 0, 7, m.clone(), vec![out(1)]);
    let del = fm(fc::DELETE_STRICT, 0, 7, m.clone(), vec![]);
    let res = f.flow_mods(&[&add, &strict, &del, &del]);
    assert_eq!(res, vec![Ok(1), Ok(1), Ok(1), Ok(0)]);
    assert_eq!(f.flow_count(), 0);
    assert_eq!(
        classify1(&f, 0, 0, &frame),
        Verdict::Drop(DropReason::NoMatch)
    );
    let (gone, _) = f.flow_removed_since(cursor);
    assert_eq!(gone.len(), 1);
    assert_eq!(gone[0].1.instructions, vec![out(1)]);
    assert_ranks_exact(&f);
}

#[test]
fn deleting_the_best_flows_of_a_subtable_reranks_it() {
    // Two masks in table 0; deleting the best flow of the first in the
    // same batch as adds must leave exact ranks, so that lookups still
    // find the best match across subtables.
    let f = flows();
    let ip = |d: u128| {
        vec![
            Oxm::exact(oxm::ETH_TYPE, 0x0800),
            Oxm::exact(oxm::IPV4_DST, d),
        ]
    };
    let batch = [
        fm(fc::ADD, 0, 30, inp(1), vec![out(2)]),
        fm(fc::ADD, 0, 10, inp(2), vec![out(2)]),
        fm(fc::ADD, 0, 20, ip(0x0a00_0002), vec![out(3)]),
        fm(fc::DELETE_STRICT, 0, 30, inp(1), vec![]),
        fm(fc::ADD, 0, 10, inp(1), vec![out(4)]),
    ];
    let refs: Vec<&FlowMod> = batch.iter().collect();
    assert!(f.flow_mods(&refs).iter().all(|r| r.is_ok()));
    assert_ranks_exact(&f);
    let frame = udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1,
        2,
    );
    // in_port=1 (priority 10) loses to nw_dst (20) now.
    assert_eq!(classify1(&f, 0, 0, &frame), Verdict::Port(2));
}

#[test]
fn single_flow_mods_reuse_the_spare_copy() {
    // One flow-mod at a time (ovs-ofctl add-flows waits for a barrier
    // after each): from the second on, the spare is brought up to date and
    // edited in place, never a copy of the subtable.
    let f = flows();
    for i in 0..200u128 {
        let m = vec![
            Oxm::exact(oxm::ETH_TYPE, 0x0800),
            Oxm::exact(oxm::IPV4_DST, 0x0a01_0000 | i),
        ];
        f.flow_mod(&fm(fc::ADD, 0, 10, m, vec![out(2)])).unwrap();
        let spare = f.writer.lock().unwrap().spare.clone().unwrap();
        let cur = f.snap.load_full();
        // Left-right: the two copies share no subtable.
        for (a, b) in spare.tables.iter().zip(cur.tables.iter()) {
            assert!(!Arc::ptr_eq(a, b) || a.subtables.is_empty());
            for (x, y) in a.subtables.iter().zip(b.subtables.iter()) {
                assert!(!Arc::ptr_eq(x, y));
            }
        }
        if i > 0 {
            assert_eq!(cur.parent, Some(spare.gen));
            assert!(!cur.log_full);
        }
    }
    assert_eq!(f.flow_count(), 200);
    // A modify and a delete of one flow each: the replay follows too.
    let m = vec![
        Oxm::exact(oxm::ETH_TYPE, 0x0800),
        Oxm::exact(oxm::IPV4_DST, 0x0a01_0007),
    ];
    f.flow_mod(&fm(fc::MODIFY_STRICT, 0, 10, m.clone(), vec![out(3)]))
        .unwrap();
    f.flow_mod(&fm(fc::DELETE_STRICT, 0, 10, m, vec![]))
        .unwrap();
    f.flow_mod(&fm(fc::ADD, 0, 11, inp(1), vec![out(3)]))
        .unwrap();
    assert_eq!(f.flow_count(), 200);
    let replayed = buckets(&f);
    f.writer.lock().unwrap().spare = None;
    f.flow_mod(&fm(fc::DELETE_STRICT, 0, 99, inp(3), vec![]))
        .unwrap();
    assert_eq!(buckets(&f), replayed, "a deep copy holds the same");
    assert_ranks_exact(&f);
}

#[test]
fn non_strict_changes_over_several_subtables_keep_the_spare() {
    // Flows over three masks; a non-strict delete of `ip` passes over two
    // subtables (in_port+ip, ip+nw_dst) and must not make the next command
    // start from a full copy: the spare replays the subtables it changed.
    let f = flows();
    let ip = || Oxm::exact(oxm::ETH_TYPE, 0x0800);
    for p in 1..=3u128 {
        f.flow_mod(&fm(fc::ADD, 0, 10, inp(p), vec![out(2)]))
            .unwrap();
        f.flow_mod(&fm(
            fc::ADD,
            0,
            10,
            vec![Oxm::exact(oxm::IN_PORT, p), ip()],
            vec![out(3)],
        ))
        .unwrap();
        f.flow_mod(&fm(
            fc::ADD,
            0,
            10,
            vec![ip(), Oxm::exact(oxm::IPV4_DST, p)],
            vec![out(1)],
        ))
        .unwrap();
    }
    let spare_table = |f: &Flows| {
        let w = f.writer.lock().unwrap();
        Arc::as_ptr(&w.spare.as_ref().unwrap().tables[MAX_TABLE as usize]) as usize
    };
    for (cmd, want) in [(fc::MODIFY, 6), (fc::DELETE, 6)] {
        let n = f.flow_mods(&[&fm(cmd, 0, 0, vec![ip()], vec![out(1)])]);
        assert_eq!(n, vec![Ok(want)]);
        let cur = f.snap.load_full();
        assert!(!cur.log_full);
        let subtables = cur
            .log
            .iter()
            .filter(|c| matches!(c, Changed::Subtable(..)))
            .count();
        assert_eq!(subtables, 2, "{:?}", cur.log);
        drop(cur);
        // The next command edits that spare (replayed), not a deep copy:
        // a table neither touched is the spare's own.
        let before = spare_table(&f);
        f.flow_mod(&fm(fc::ADD, 1, 5, inp(1), vec![out(2)]))
            .unwrap();
        assert_eq!(
            Arc::as_ptr(&f.snap.load().tables[MAX_TABLE as usize]) as usize,
            before,
            "the spare was replayed, not replaced by a deep copy"
        );
        f.flow_mod(&fm(fc::DELETE_STRICT, 1, 5, inp(1), vec![]))
            .unwrap();
        let replayed = buckets(&f);
        f.writer.lock().unwrap().spare = None;
        f.flow_mod(&fm(fc::DELETE_STRICT, 0, 99, inp(3), vec![]))
            .unwrap();
        assert_eq!(buckets(&f), replayed, "a deep copy holds the same");
        assert_ranks_exact(&f);
    }
    assert_eq!(f.flow_count(), 3, "the in_port flows stay");
}

#[test]
fn strict_changes_and_expiry_change_one_bucket() {
    let f = flows();
    for p in 1..=3u128 {
        f.flow_mod(&fm(fc::ADD, 0, 10, inp(p), vec![out(2)]))
            .unwrap();
    }
    f.flow_mod(&fm(
        fc::ADD,
        0,
        10,
        vec![
            Oxm::exact(oxm::IN_PORT, 1),
            Oxm::exact(oxm::ETH_TYPE, 0x0800),
        ],
        vec![out(3)],
    ))
    .unwrap();
    // A strict delete of in_port=1 does not pass over the more specific
    // subtable (in_port+ip) the non-strict one would.
    f.flow_mod(&fm(fc::DELETE_STRICT, 0, 10, inp(1), vec![]))
        .unwrap();
    let log = f.snap.load().log.clone();
    assert_eq!(log.len(), 1);
    assert!(matches!(log[0], Changed::Bucket(0, ..)), "{log:?}");
    assert_eq!(f.flow_count(), 3);
    // An expiry removes its flows by their match too, on the spare.
    let mut m = fm(fc::ADD, 0, 7, inp(2), vec![out(3)]);
    m.hard_timeout = 1;
    f.flow_mod(&m).unwrap();
    let gen = f.snap.load().gen;
    assert_eq!(
        f.expire(Instant::now() + std::time::Duration::from_secs(2)),
        1
    );
    let cur = f.snap.load();
    assert_eq!(cur.parent, Some(gen));
    assert_eq!(cur.log.len(), 1);
    assert!(
        matches!(cur.log[0], Changed::Bucket(0, ..)),
        "{:?}",
        cur.log
    );
    assert_eq!(f.flow_count(), 3);
    assert_ranks_exact(&f);
}

/// One random flow-mod over a small space, so that flows collide, overlap,
/// replace and select each other.
fn arb_fm() -> impl Strategy<Value = FlowMod> {
    let matches = prop_oneof![
        Just(vec![]),
        (1u128..=3).prop_map(inp),
        Just(vec![Oxm::exact(oxm::ETH_TYPE, 0x0800)]),
        (1u128..=3).prop_map(|p| vec![
            Oxm::exact(oxm::IN_PORT, p),
            Oxm::exact(oxm::ETH_TYPE, 0x0800)
        ]),
        (1u128..=3, any::<bool>()).prop_map(|(d, wide)| vec![
            Oxm::exact(oxm::ETH_TYPE, 0x0800),
            Oxm {
                field: oxm::IPV4_DST,
                value: if wide { 0x0a00_0000 } else { 0x0a00_0000 | d },
                mask: wide.then_some(0xffff_ff00),
            }
        ]),
    ];
    let insts = prop_oneof![
        4 => (1u32..=3).prop_map(|p| vec![out(p)]),
        1 => Just(vec![]),
        1 => (0u8..=2).prop_map(|t| vec![out(1), Instruction::GotoTable(t)]),
        // The action set: written (an output, and a set-field of eth_dst),
        // cleared, then the next table.
        1 => (1u32..=3, any::<bool>(), 1u8..=2).prop_map(|(p, clear, t)| {
            let mut i = vec![out(p)];
            if clear {
                i.push(Instruction::ClearActions);
            }
            i.push(Instruction::WriteActions(vec![
                openflow::Action::SetField(Oxm::exact(oxm::ETH_DST, 0x0200_0000_0009)),
                openflow::Action::Output { port: 4 - p, max_len: 0 },
            ]));
            i.push(Instruction::GotoTable(t));
            i
        }),
        1 => Just(vec![Instruction::ClearActions]),
    ];
    (
        prop_oneof![10 => 0u8..=4, 1 => Just(7u8)],
        prop_oneof![8 => 0u8..=1, 1 => Just(TABLE_ALL)],
        1u16..=3,
        matches,
        insts,
        0u16..16,
        0u64..3,
        any::<bool>(),
        prop_oneof![Just(port::ANY), 1u32..=3],
    )
        .prop_map(
            |(command, table_id, priority, matches, instructions, flags, cookie, cm, out_port)| {
                FlowMod {
                    cookie,
                    cookie_mask: if cm { u64::MAX } else { 0 },
                    out_port,
                    // SEND_FLOW_REM, CHECK_OVERLAP, RESET_COUNTS, NO_PKT_COUNTS.
                    flags: flags & (ff::SEND_FLOW_REM | ff::CHECK_OVERLAP | ff::RESET_COUNTS),
                    ..fm(command, table_id, priority, matches, instructions)
                }
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn batches_equal_one_by_one(
        ms in prop::collection::vec(arb_fm(), 1..60),
        cuts in prop::collection::vec(1usize..20, 1..10),
    ) {
        let (batched, single) = (flows(), flows());
        let mut got = Vec::new();
        let mut rest: &[FlowMod] = &ms;
        let mut cuts = cuts.iter().cycle();
        while !rest.is_empty() {
            let n = (*cuts.next().unwrap()).min(rest.len());
            let refs: Vec<&FlowMod> = rest[..n].iter().collect();
            got.extend(batched.flow_mods(&refs));
            rest = &rest[n..];
        }
        // The oracle builds every snapshot by a deep copy of the published
        // one (no spare to replay): the replay must leave the same.
        let want: Vec<_> = ms
            .iter()
            .map(|m| {
                single.writer.lock().unwrap().spare = None;
                single.flow_mod(m)
            })
            .collect();
        prop_assert_eq!(got, want);
        prop_assert_eq!(buckets(&batched), buckets(&single));
        prop_assert_eq!(dumped(&batched), dumped(&single));
        // One command that removes several flows (a non-strict delete)
        // notifies them in an order OpenFlow leaves open, and the batched
        // replay walks its tables in another order than the deep copy: the
        // notices are compared as a multiset (each command's replies, in
        // order, are `got` against `want` above).
        let removed = |f: &Flows| {
            let mut v = f
                .flow_removed_since(0)
                .0
                .into_iter()
                .map(|(r, s)| (r, s.table_id, s.priority, s.cookie, s.matches))
                .collect::<Vec<_>>();
            v.sort_by_cached_key(|x| format!("{x:?}"));
            v
        };
        prop_assert_eq!(removed(&batched), removed(&single));
        assert_ranks_exact(&batched);
        assert_ranks_exact(&single);
        for port in 0..3u16 {
            for d in 1..=3u8 {
                let frame = udp4(
                    [2, 0, 0, 0, 0, 1],
                    [2, 0, 0, 0, 0, 2],
                    [10, 0, 0, 9],
                    [10, 0, 0, d],
                    1,
                    2,
                );
                prop_assert_eq!(
                    classify1(&batched, port, 0, &frame),
                    classify1(&single, port, 0, &frame)
                );
            }
        }
    }
}
