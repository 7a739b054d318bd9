//! The `controller` action: verdicts, packet-in contents, counted refusals.

use super::*;
use crate::testutil::{classify1, udp_to};
use serde_json::json;

fn frame() -> Vec<u8> {
    udp_to(5001)
}

#[test]
fn controller_action_queues_a_packet_in_with_its_flow() {
    let f = Flows::from_config(&json!({"flows": [
        "priority=0,actions=controller",
        "table=0,priority=9,cookie=0x77,udp,tp_dst=5001,actions=mod_dl_src:02:00:00:00:00:09,controller:20",
    ]}))
    .unwrap();
    let q = Logic::punt(&f).unwrap();
    // Nobody listening: refused and counted.
    assert_eq!(
        classify1(&f, 1, 0, &frame()),
        Verdict::Drop(DropReason::NoController)
    );
    q.set_controllers(1);
    // Twice: the second goes through the exact-match cache, which must
    // still run the action.
    for _ in 0..2 {
        assert_eq!(
            classify1(&f, 1, 0, &frame()),
            Verdict::Drop(DropReason::ToController)
        );
        let p = q.pop().unwrap();
        assert_eq!((p.meta.ingress, p.meta.tag, p.meta.cookie), (1, 0, 0x77));
        assert_eq!(p.meta.reason, pktin::REASON_ACTION);
        assert_eq!((p.total_len as usize, p.data.len()), (frame().len(), 20));
        // The packet as rewritten so far.
        assert_eq!(&p.data[6..12], &[2, 0, 0, 0, 0, 9]);
    }
    // The table-miss flow reports OFPR_NO_MATCH and the whole frame.
    let mut arp = frame();
    arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
    assert_eq!(
        classify1(&f, 0, 0, &arp),
        Verdict::Drop(DropReason::ToController)
    );
    let p = q.pop().unwrap();
    assert_eq!(
        (p.meta.reason, p.data.len()),
        (pktin::REASON_NO_MATCH, arp.len())
    );
    assert!(q.pop().is_none());
    // dump carries the packet-in counters.
    let d = f.dump(None);
    assert_eq!(
        d["packet_ins"],
        json!({"to_controller": 3, "sent": 3, "controller_queue_full": 0,
               "controller_rate_limit": 0, "no_controller": 1, "controllers": 1})
    );
}

#[test]
fn rate_limit_and_queue_full_are_counted_verdicts() {
    let f = Flows::from_config(&json!({
        "flows": ["actions=controller"],
        "packet_in_rate": 1, "packet_in_burst": 3, "packet_in_queue": 2,
    }))
    .unwrap();
    Logic::punt(&f).unwrap().set_controllers(1);
    let got: Vec<Verdict> = (0..4).map(|_| classify1(&f, 0, 0, &frame())).collect();
    assert_eq!(
        got,
        vec![
            Verdict::Drop(DropReason::ToController),
            Verdict::Drop(DropReason::ToController),
            // Token taken, but the 2-slot queue is full.
            Verdict::Drop(DropReason::ControllerQueueFull),
            Verdict::Drop(DropReason::ControllerRateLimit),
        ]
    );
}

#[test]
fn controller_with_outputs_and_bad_settings() {
    // A packet-in and an output (Faucet's first frame of a new host: to
    // the controller and to the flood), and two packet-ins: taken.
    let f = Flows::from_config(&json!({
        "flows": ["in_port=0,actions=controller,output:1", "in_port=2,actions=controller,controller,goto_table:1", "table=1,actions=flood"],
    }))
    .unwrap();
    Logic::punt(&f).unwrap().set_controllers(1);
    assert_eq!(classify1(&f, 0, 0, &frame()), Verdict::Port(1));
    assert_eq!(classify1(&f, 2, 0, &frame()), Verdict::Flood);
    assert_eq!(Logic::punt(&f).unwrap().stats().queued, 3);
    for bad in [
        json!({"flows": ["actions=controller:70000"]}),
        json!({"packet_in_rate": 0}),
        json!({"packet_in_queue": 3}),
        json!({"packet_in_burst": 0}),
    ] {
        assert!(Flows::from_config(&bad).is_err(), "{bad}");
    }
    let f = Flows::from_config(&json!({"flows": ["actions=controller:128"]})).unwrap();
    let d = f.command("dump", &json!({})).unwrap();
    assert!(
        d["flows"][0]["flow"]
            .as_str()
            .unwrap()
            .ends_with("actions=CONTROLLER:128"),
        "{d}"
    );
}
