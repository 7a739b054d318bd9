//! The megaflow cache (megaflow.rs) changes nothing but the cost: same
//! verdicts, bytes and counters as the classifier alone, for random rule
//! sets (with ACL-like flows on the source address and port at random
//! priorities) and random packets; packets the flows do not tell apart
//! share a megaflow; no megaflow outlives the snapshot it came from.

use super::cache_tests::{add, agree, build, cached_and_plain, flow_gens, run, same_counters};
use super::*;
use crate::testutil::udp4;
use proptest::prelude::*;
use std::collections::HashMap;

/// A packet: in_port, source address, source port, destination address
/// byte, destination port, TTL, VLAN.
type MfPkt = (u16, u8, u8, u8, u8, u8, u8);

fn mf_packet(g: &MfPkt) -> (PortId, Vec<u8>) {
    let &(in_port, src, sport, d, dport, ttl, vlan) = g;
    let srcs = [[10, 0, 0, 1], [10, 9, 0, 1], [10, 9, 1, 1], [10, 9, 2, 1]];
    let mut f = udp4(
        [2, 0, 0, 0, 0, 9],
        [2, 0, 0, 0, 0, 1],
        srcs[src as usize % 4],
        [10, 0, d % 4, (d / 4) % 4],
        1000 + (sport % 6) as u16,
        (dport % 4) as u16,
    );
    f[22] = 1 + ttl % 3;
    if vlan % 4 == 0 {
        f.splice(12..12, [0x81, 0x00, 0x00, 1 + vlan % 2]);
    }
    (in_port % 3, f)
}

fn cache_stats(f: &Flows) -> (u64, u64, u64, u64) {
    let c = &f.dump(None)["cache"];
    let g = |k: &str| c[k].as_u64().unwrap();
    (
        g("hits"),
        g("misses"),
        g("megaflow_hits"),
        g("megaflow_misses"),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Megaflow hits give the classifier's verdicts, bytes and counters.
    #[test]
    fn megaflows_agree_with_the_classifier(
        flows in flow_gens(16),
        acl in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<bool>()), 0..12),
        pkts in proptest::collection::vec(
            (any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>()),
            1..80),
    ) {
        let (cached, plain) = cached_and_plain(&flows, |_| {})?;
        for &(t, p, s, port, dst) in &acl {
            let dst = if dst { ",nw_dst=10.0.1.0/24" } else { "" };
            let text = format!(
                "table={},priority={},udp,nw_src=10.9.{}.1{dst},tp_src={},actions=output:3",
                t % 2, p % 4, s % 3, 1000 + (port % 3) as u16
            );
            prop_assert!(add(&cached, &text));
            prop_assert!(add(&plain, &text));
        }
        let mut total = 0u64;
        for ingress in 0..3u16 {
            let frames: Vec<Vec<u8>> = pkts.iter().map(mf_packet)
                .filter(|(i, _)| *i == ingress).map(|(_, f)| f).collect();
            if !frames.is_empty() {
                agree(&cached, &plain, ingress, &frames, 2, &mut total)?;
            }
        }
        same_counters(&cached, &plain, total)?;
        // Every exact-match miss went to the megaflow cache.
        let (_, misses, mf_hits, mf_misses) = cache_stats(&cached);
        prop_assert_eq!(mf_hits + mf_misses, misses);
    }
}

/// Frames of `n` flows with distinct source ports from 10.0.0.1.
fn sports(n: u16, base: u16) -> Vec<Vec<u8>> {
    (0..n)
        .map(|i| {
            udp4(
                [2, 0, 0, 0, 0, 9],
                [2, 0, 0, 0, 0, 1],
                [10, 0, 0, 1],
                [10, 0, 0, 2],
                base + i,
                80,
            )
        })
        .collect()
}

/// An ACL on the source address and port below the flow the packets hit
/// puts those fields in use (every flow its own exact-match entry) but not
/// in the megaflow: after the first, every flow is a megaflow hit.
#[test]
fn flows_the_rules_tell_apart_below_the_hit_share_a_megaflow() {
    let f = build(64);
    assert!(add(&f, "priority=100,udp,actions=output:1"));
    for i in 0..50 {
        assert!(add(
            &f,
            &format!(
                "priority=10,udp,nw_src=172.16.0.{i},tp_src={},actions=drop",
                2000 + i
            )
        ));
    }
    let frames = sports(200, 3000);
    let (v, _) = run(&f, 0, &frames);
    assert!(v.iter().all(|v| *v == Verdict::Port(1)), "{v:?}");
    let (hits, misses, mf_hits, mf_misses) = cache_stats(&f);
    assert_eq!((hits, misses), (0, 200));
    assert_eq!((mf_hits, mf_misses), (199, 1));
    // Above the hit flow, the ACL's subtable is probed, but ruled out by
    // the top bits of the source address (prefix index, megaflow.rs): its
    // ports stay out of the megaflow.
    let f = build(64);
    assert!(add(&f, "priority=10,udp,actions=output:1"));
    assert!(add(
        &f,
        "priority=100,udp,nw_src=172.16.0.1,tp_src=5,actions=drop"
    ));
    let (v, _) = run(&f, 0, &frames);
    assert!(v.iter().all(|v| *v == Verdict::Port(1)));
    let (_, misses, mf_hits, mf_misses) = cache_stats(&f);
    assert_eq!(misses, 200);
    assert_eq!((mf_hits, mf_misses), (199, 1));
    // A flow with that source address and one of the ports above: the
    // staged probe passes L3, and the prefix index of the ports makes the
    // megaflows tell apart only as many top bits of the port as needed
    // (more than one megaflow, far fewer than one per port).
    assert!(add(
        &f,
        "priority=100,udp,nw_src=10.0.0.1,tp_src=3100,actions=drop"
    ));
    let (v, _) = run(&f, 0, &frames);
    for (i, v) in v.iter().enumerate() {
        let want = if i == 100 {
            Verdict::Drop(DropReason::Policy)
        } else {
            Verdict::Port(1)
        };
        assert_eq!(*v, want, "port {}", 3000 + i);
    }
    let (_, _, mf_hits2, mf_misses2) = cache_stats(&f);
    let new_misses = mf_misses2 - mf_misses;
    assert_eq!(mf_hits2 - mf_hits + new_misses, 200);
    assert!((2..=40).contains(&new_misses), "{new_misses} megaflows");
}

/// The staged probe's counts stay those of the buckets through adds,
/// replacing adds, modifies and deletes, strict or not.
#[test]
fn stage_counts_follow_every_change() {
    let f = build(64);
    let check = |what: &str| {
        let snap = f.snap.load();
        for t in snap.tables.iter() {
            for st in &t.subtables {
                for s in &st.stages {
                    let mut want: HashMap<Key, u32> = HashMap::new();
                    for k in st.map.keys() {
                        *want.entry(k.and(&s.mask)).or_insert(0) += 1;
                    }
                    let got: HashMap<Key, u32> =
                        s.keys.iter().map(|(k, n)| (k.widen(), *n)).collect();
                    assert_eq!(got, want, "{what}");
                }
                for p in &st.prefixes {
                    let mut want: std::collections::BTreeMap<u64, u32> = Default::default();
                    for k in st.map.keys() {
                        *want.entry(k.get(p.field) as u64).or_insert(0) += 1;
                    }
                    assert_eq!(p.values, want, "{what}");
                }
            }
        }
    };
    let c = |cmd: &str, args: serde_json::Value| f.command(cmd, &args).unwrap();
    for i in 0..40u32 {
        let t = format!(
            "table={},priority={},udp,nw_src=10.{}.0.{},tp_src={},actions=output:1",
            i % 2,
            i % 3,
            i % 4,
            i % 5,
            i % 7
        );
        c("add", serde_json::json!({ "flow": t }));
    }
    check("add");
    c(
        "add",
        serde_json::json!({"flow": "priority=1,udp,nw_src=10.1.0.1,tp_src=1,actions=drop"}),
    );
    check("replacing add");
    c(
        "modify",
        serde_json::json!({"flow": "udp,nw_src=10.2.0.0/16,actions=output:2"}),
    );
    check("modify");
    c(
        "delete",
        serde_json::json!({"flow": "udp,nw_src=10.3.0.0/16"}),
    );
    check("delete");
    c(
        "delete",
        serde_json::json!({"flow": "table=1,priority=2,udp,nw_src=10.1.0.1,tp_src=1", "strict": true}),
    );
    check("strict delete");
    c(
        "delete",
        serde_json::json!({"flow": "table=0,udp,tp_src=3"}),
    );
    check("delete by port");
    for i in 0..10u32 {
        c(
            "add",
            serde_json::json!({ "flow": format!("udp,nw_src=10.9.0.{i},tp_src=9,actions=drop") }),
        );
        check("add after deletes");
    }
    c("delete", serde_json::json!({}));
    check("delete all");
}

/// A command swaps in a new snapshot: no megaflow of the old one serves a
/// packet after it, also one that misses the exact-match cache.
#[test]
fn no_megaflow_survives_a_change() {
    let f = build(64);
    assert!(add(&f, "priority=100,udp,actions=output:1"));
    assert!(add(&f, "priority=10,udp,tp_src=7,actions=drop"));
    let (v, _) = run(&f, 0, &sports(10, 3000));
    assert!(v.iter().all(|v| *v == Verdict::Port(1)));
    assert_eq!(cache_stats(&f).2, 9);
    // New flows (exact-match misses) whose megaflow was filled before.
    assert!(add(&f, "priority=200,udp,actions=output:2"));
    let (v, _) = run(&f, 0, &sports(10, 4000));
    assert!(v.iter().all(|v| *v == Verdict::Port(2)), "{v:?}");
    assert!(f
        .command(
            "delete",
            &serde_json::json!({"flow": "priority=200,udp", "strict": true})
        )
        .is_ok());
    let (v, _) = run(&f, 0, &sports(10, 5000));
    assert!(v.iter().all(|v| *v == Verdict::Port(1)), "{v:?}");
}
