//! Test support: owned frames handed to a logic as a batch of `Pkt` views.

use std::any::Any;

use crate::{Ctx, Logic, PortId, Verdict};

/// Owns frame buffers and classifies them as one batch.
pub struct Batch {
    pub frames: Vec<Vec<u8>>,
    /// The frames as the views showed them after the last `classify` (a
    /// popped tag gone, a pushed one there: a lengthened frame lives in
    /// the batch's scratch, not in `frames`).
    pub views: Vec<Vec<u8>>,
    /// The copies the logic made of the frames in the last `classify`
    /// (an output before a header change...): verdict and bytes, in order.
    pub copies: Vec<(Verdict, Vec<u8>)>,
}

impl Batch {
    pub fn new(frames: Vec<Vec<u8>>) -> Self {
        Batch {
            frames,
            views: Vec::new(),
            copies: Vec::new(),
        }
    }

    /// Classifies every frame as received on `ingress` at `now_ns`, as
    /// worker 0 would with a new state of the logic, if it has one
    /// ([`Logic::worker_state`]: a cache that starts empty; a test that
    /// wants one kept across batches holds it, [`Batch::classify_with`]).
    pub fn classify(&mut self, logic: &dyn Logic, ingress: PortId, now_ns: u64) -> Vec<Verdict> {
        let mut st = logic.worker_state();
        self.classify_with(logic, st.as_deref_mut(), ingress, now_ns)
    }

    /// [`Batch::classify`] with the worker state `state` (None: through
    /// `classify`, as a caller without a worker).
    pub fn classify_with(
        &mut self,
        logic: &dyn Logic,
        state: Option<&mut (dyn Any + Send)>,
        ingress: PortId,
        now_ns: u64,
    ) -> Vec<Verdict> {
        let mut v = vec![Verdict::Drop(fabric::DropReason::NoDestination); self.frames.len()];
        (self.views, self.copies) = fabric::with_frames(&mut self.frames, ingress, 0, |pkts| {
            let ctx = Ctx { now_ns, worker: 0 };
            match state {
                Some(st) => logic.classify_with(st, &ctx, ingress, pkts, &mut v),
                None => logic.classify(&ctx, ingress, pkts, &mut v),
            }
            let (cp, cv) = pkts.copies();
            (
                pkts.iter().map(|p| p.data().to_vec()).collect(),
                cv.iter()
                    .zip(cp)
                    .map(|(v, p)| (*v, p.data().to_vec()))
                    .collect(),
            )
        });
        v
    }
}

/// Classifies one frame.
pub fn classify1(logic: &dyn Logic, ingress: PortId, now_ns: u64, frame: &[u8]) -> Verdict {
    Batch::new(vec![frame.to_vec()]).classify(logic, ingress, now_ns)[0]
}

/// Ethernet + IPv4 + UDP frame of 60 bytes.
pub fn udp4(
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: [u8; 4],
    dst: [u8; 4],
    sport: u16,
    dport: u16,
) -> Vec<u8> {
    use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
    let mut b = vec![0u8; 60];
    let spec = UdpFrameSpec::new(
        wire::MacAddr(src_mac),
        wire::MacAddr(dst_mac),
        IpPair::V4(src.into(), dst.into()),
        sport,
        dport,
    );
    write_udp_frame(&spec, &mut b, 60).unwrap();
    b
}

/// The UDP frame of 60 B from 02:00:00:00:00:01 / 10.0.0.1:1000 to
/// 02:00:00:00:00:02 / 10.0.0.2:`dport`.
pub fn udp_to(dport: u16) -> Vec<u8> {
    udp4(
        [2, 0, 0, 0, 0, 1],
        [2, 0, 0, 0, 0, 2],
        [10, 0, 0, 1],
        [10, 0, 0, 2],
        1000,
        dport,
    )
}

/// A minimal Ethernet frame (60 B) with the given addresses and EtherType.
pub fn eth(src_mac: [u8; 6], dst_mac: [u8; 6], ethertype: u16) -> Vec<u8> {
    let mut b = vec![0u8; 60];
    b[0..6].copy_from_slice(&dst_mac);
    b[6..12].copy_from_slice(&src_mac);
    b[12..14].copy_from_slice(&ethertype.to_be_bytes());
    b
}

/// proptest strategy: random frames of 14..=200 bytes, sometimes starting
/// with a plausible Ethernet/VLAN/IP prefix so deeper parsers are reached.
pub fn random_frames() -> impl proptest::strategy::Strategy<Value = Vec<Vec<u8>>> {
    use proptest::prelude::*;
    let frame =
        (0u8..6, proptest::collection::vec(any::<u8>(), 14..=200)).prop_map(|(shape, mut b)| {
            match shape {
                0 => b[12..14].copy_from_slice(&[0x08, 0x00]),
                1 => b[12..14].copy_from_slice(&[0x86, 0xdd]),
                2 if b.len() >= 18 => {
                    b[12..14].copy_from_slice(&[0x81, 0x00]);
                    b[16..18].copy_from_slice(&[0x08, 0x00]);
                }
                3 if b.len() >= 22 => {
                    b[12..14].copy_from_slice(&[0x88, 0xa8]);
                    b[16..18].copy_from_slice(&[0x81, 0x00]);
                    b[20..22].copy_from_slice(&[0x86, 0xdd]);
                }
                _ => {}
            }
            // Make an IP version nibble plausible when an IP EtherType is set.
            if let Ok(t) = wire::ethernet::parse_tags(&b) {
                if t.l3_offset < b.len() {
                    let v = if t.ethertype == 0x86dd { 0x60 } else { 0x40 };
                    b[t.l3_offset] = v | (b[t.l3_offset] & 0x0f);
                }
            }
            b
        });
    proptest::collection::vec(frame, 1..40)
}

/// An OpenFlow logic with no configuration (one empty table 0).
pub fn flows() -> crate::flows::Flows {
    crate::flows::Flows::from_config(&serde_json::json!(null)).unwrap()
}

/// A flow-mod with the given command, table, priority, match and
/// instructions, and the defaults of `ovs-ofctl` for the rest: no cookie, no
/// timeouts, no flags, no buffered packet, any out port and group.
pub fn fm(
    command: u8,
    table: u8,
    priority: u16,
    matches: Vec<openflow::Oxm>,
    insts: Vec<openflow::Instruction>,
) -> openflow::FlowMod {
    openflow::FlowMod {
        cookie: 0,
        cookie_mask: 0,
        table_id: table,
        command,
        idle_timeout: 0,
        hard_timeout: 0,
        priority,
        buffer_id: openflow::NO_BUFFER,
        out_port: openflow::port::ANY,
        out_group: openflow::GROUP_ANY,
        flags: 0,
        matches,
        instructions: insts,
    }
}

/// `apply_actions(output:p)`, the whole packet.
pub fn out(p: u32) -> openflow::Instruction {
    openflow::Instruction::ApplyActions(vec![openflow::Action::Output {
        port: p,
        max_len: 0,
    }])
}

/// The match `in_port=p`.
pub fn inp(p: u128) -> Vec<openflow::Oxm> {
    vec![openflow::Oxm::exact(openflow::oxm::IN_PORT, p)]
}
