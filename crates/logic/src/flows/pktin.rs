//! Packet-ins: the `controller` action hands a packet from the data path to
//! the OpenFlow channel without blocking or allocating, through the
//! fabric's punt queue ([`fabric::punt`]: a bounded multi-producer ring,
//! a GCRA rate limit and an eventfd wake-up; its refusals are the frame's
//! verdict: `controller_queue_full`, `controller_rate_limit`,
//! `no_controller`; taken: `to_controller`). `flows` makes it from its
//! `packet_in_queue`, `packet_in_rate` and `packet_in_burst` settings
//! and offers it as [`fabric::Logic::punt`]; a packet-in is punted with
//! the OpenFlow reason ([`REASON_NO_MATCH`], [`REASON_ACTION`]) as the
//! reason code, the flow's table as the tag and its cookie as the cookie.
//! This file keeps what is OpenFlow's: those codes, `max_len`'s
//! [`NO_BUFFER`], and the packet-out's header changes ([`rewrite`]).

/// `max_len` meaning the whole frame (`OFPCML_NO_BUFFER`).
pub const NO_BUFFER: u16 = 0xffff;

/// `OFPR_NO_MATCH`: sent by a table-miss flow (priority 0, empty match).
pub const REASON_NO_MATCH: u8 = 0;
/// `OFPR_ACTION`: sent by a `controller` action of any other flow.
pub const REASON_ACTION: u8 = 1;

/// Control path (an OpenFlow packet-out): runs the header change `a` on
/// `frame` as a flow's action would (the same code). None: `a` is not a
/// header change (an output, a group, a register); Some(false): the packet
/// is to be dropped (`dec_ttl` of a TTL of 1 or 0, or of a non-IP packet,
/// `dec_mpls_ttl` likewise).
pub fn rewrite(frame: &mut Vec<u8>, a: &super::Action) -> Option<bool> {
    if !a.is_rewrite()
        || matches!(
            a,
            super::Action::WriteMetadata(..) | super::Action::SetTunnelId(_)
        )
    {
        return None;
    }
    let mut frames = [std::mem::take(frame)];
    let (ok, out) = fabric::with_frames(&mut frames, 0, 0, |pkts| {
        let Some(mut p) = pkts.get_mut(0) else {
            return (false, Vec::new());
        };
        let ok = super::exec::apply_change(&mut p, *a).is_ok();
        (ok, p.data().to_vec())
    });
    *frame = out;
    Some(ok)
}
