//! The group table's messages (section 7.3.4.2 and 7.3.5.9-11): group-mod
//! decoding, and the group stats, group desc and group features replies.

use crate::consts::*;
use crate::decode::{decode_actions, Action, Reader};
use crate::encode::{put_actions, Msg};
use crate::OfpError;

/// `OFPG_MAX`: the highest group id a group-mod may name.
pub const GROUP_MAX: u32 = 0xffff_ff00;
/// `OFPG_ALL`: every group (group-mod delete, group stats).
pub const GROUP_ALL: u32 = 0xffff_fffc;

/// `enum ofp_group_mod_command`; members `OFPGC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod gc {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `enum ofp_group_type`; members `OFPGT_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod gt {
    pub const ALL: u8 = 0;
    pub const SELECT: u8 = 1;
    pub const INDIRECT: u8 = 2;
    pub const FF: u8 = 3;
}

/// `OFPET_GROUP_MOD_FAILED` codes; members `OFPGMFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod gmfc {
    pub const GROUP_EXISTS: u16 = 0;
    pub const INVALID_GROUP: u16 = 1;
    pub const WEIGHT_UNSUPPORTED: u16 = 2;
    pub const OUT_OF_GROUPS: u16 = 3;
    pub const OUT_OF_BUCKETS: u16 = 4;
    pub const CHAINING_UNSUPPORTED: u16 = 5;
    pub const WATCH_UNSUPPORTED: u16 = 6;
    pub const LOOP: u16 = 7;
    pub const UNKNOWN_GROUP: u16 = 8;
    pub const CHAINED_GROUP: u16 = 9;
    pub const BAD_TYPE: u16 = 10;
    pub const BAD_COMMAND: u16 = 11;
    pub const BAD_BUCKET: u16 = 12;
    pub const BAD_WATCH: u16 = 13;
    pub const EPERM: u16 = 14;
}

/// Names of the `OFPGMFC_*` codes, by code.
pub const GMFC_NAMES: &[&str] = &[
    "GROUP_EXISTS",
    "INVALID_GROUP",
    "WEIGHT_UNSUPPORTED",
    "OUT_OF_GROUPS",
    "OUT_OF_BUCKETS",
    "CHAINING_UNSUPPORTED",
    "WATCH_UNSUPPORTED",
    "LOOP",
    "UNKNOWN_GROUP",
    "CHAINED_GROUP",
    "BAD_TYPE",
    "BAD_COMMAND",
    "BAD_BUCKET",
    "BAD_WATCH",
    "EPERM",
];

/// `struct ofp_bucket`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bucket {
    /// Select groups: the bucket's share of traffic, relative to the
    /// other buckets' weights (defined for select groups only).
    pub weight: u16,
    /// Fast-failover: the port whose liveness decides whether the bucket is
    /// used (`port::ANY`: none).
    pub watch_port: u32,
    /// Fast-failover: the group whose liveness decides whether the bucket
    /// is used (`GROUP_ANY`: none).
    pub watch_group: u32,
    /// Actions applied to the packet copy this bucket gets.
    pub actions: Vec<Action>,
}

/// `struct ofp_group_mod`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupMod {
    /// `OFPGC_*` (`gc::*`).
    pub command: u16,
    /// `OFPGT_*` (`gt::*`).
    pub kind: u8,
    /// The group (at most [`GROUP_MAX`]; [`GROUP_ALL`] in a delete).
    pub group_id: u32,
    /// The buckets, in order.
    pub buckets: Vec<Bucket>,
}

/// Decodes a group-mod body (after the header).
pub fn decode_group_mod(r: &mut Reader<'_>) -> Result<GroupMod, OfpError> {
    let e = OfpError::bad_len();
    let command = r.u16(e)?;
    let kind = r.u8(e)?;
    r.take(1, e)?;
    let group_id = r.u32(e)?;
    let mut buckets = Vec::new();
    let be = OfpError::new(et::GROUP_MOD_FAILED, gmfc::BAD_BUCKET);
    while !r.is_empty() {
        let len = r.u16(e)? as usize;
        if len < 16 || !len.is_multiple_of(8) {
            return Err(be);
        }
        let mut b = Reader::new(r.take(len - 2, e)?);
        let weight = b.u16(e)?;
        let watch_port = b.u32(e)?;
        let watch_group = b.u32(e)?;
        b.take(4, e)?;
        let actions = decode_actions(b.rest())?;
        buckets.push(Bucket {
            weight,
            watch_port,
            watch_group,
            actions,
        });
    }
    Ok(GroupMod {
        command,
        kind,
        group_id,
        buckets,
    })
}

/// Encodes a group-mod (what a controller sends; for tests and tools).
pub fn group_mod(xid: u32, g: &GroupMod) -> Vec<u8> {
    let mut m = Msg::new(t::GROUP_MOD, xid);
    m.u16(g.command).u8(g.kind).zeros(1).u32(g.group_id);
    put_buckets(&mut m, &g.buckets);
    m.finish()
}

fn put_buckets(m: &mut Msg, buckets: &[Bucket]) {
    for b in buckets {
        let mut a = Msg::new(0, 0);
        put_actions(&mut a, &b.actions);
        let acts = &a.finish()[8..];
        m.u16(16 + acts.len() as u16)
            .u16(b.weight)
            .u32(b.watch_port)
            .u32(b.watch_group)
            .zeros(4)
            .bytes(acts);
    }
}

/// One `struct ofp_group_desc` (multipart `OFPMP_GROUP_DESC`).
pub fn group_desc_entry(kind: u8, group_id: u32, buckets: &[Bucket]) -> Vec<u8> {
    let mut m = Msg::new(0, 0);
    put_buckets(&mut m, buckets);
    let b = &m.finish()[8..];
    let mut out = Vec::with_capacity(8 + b.len());
    out.extend_from_slice(&(8 + b.len() as u16).to_be_bytes());
    out.push(kind);
    out.push(0);
    out.extend_from_slice(&group_id.to_be_bytes());
    out.extend_from_slice(b);
    out
}

/// One group's statistics (`struct ofp_group_stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupStats {
    /// The group.
    pub group_id: u32,
    /// Flows and groups that forward to it.
    pub ref_count: u32,
    /// Packets it processed.
    pub packet_count: u64,
    /// Bytes of those packets.
    pub byte_count: u64,
    /// Whole seconds since the group was added.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// (packets, bytes) per bucket.
    pub buckets: Vec<(u64, u64)>,
}

/// One `struct ofp_group_stats` (multipart `OFPMP_GROUP`).
pub fn group_stats_entry(s: &GroupStats) -> Vec<u8> {
    let mut m = Msg::new(0, 0);
    m.u16(40 + 16 * s.buckets.len() as u16)
        .zeros(2)
        .u32(s.group_id);
    m.u32(s.ref_count)
        .zeros(4)
        .u64(s.packet_count)
        .u64(s.byte_count);
    m.u32(s.duration_sec).u32(s.duration_nsec);
    for &(p, b) in &s.buckets {
        m.u64(p).u64(b);
    }
    m.finish()[8..].to_vec()
}

/// `struct ofp_group_features` (multipart `OFPMP_GROUP_FEATURES`):
/// supported types (bit = type), capabilities, max groups per type and
/// the actions (bit = `OFPAT_*`) per type.
pub fn group_features_body(types: u32, caps: u32, max: [u32; 4], actions: [u32; 4]) -> Vec<u8> {
    let mut m = Msg::new(0, 0);
    m.u32(types).u32(caps);
    for x in max {
        m.u32(x);
    }
    for x in actions {
        m.u32(x);
    }
    m.finish()[8..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{decode, Message};

    #[test]
    fn group_mod_round_trips_and_bad_buckets_are_refused() {
        let g = GroupMod {
            command: gc::ADD,
            kind: gt::ALL,
            group_id: 7,
            buckets: vec![
                Bucket {
                    weight: 0,
                    watch_port: port::ANY,
                    watch_group: GROUP_ANY,
                    actions: vec![Action::Output {
                        port: 2,
                        max_len: 0,
                    }],
                },
                Bucket {
                    weight: 0,
                    watch_port: port::ANY,
                    watch_group: GROUP_ANY,
                    actions: vec![],
                },
            ],
        };
        let b = group_mod(3, &g);
        assert_eq!(b.len(), 16 + 32 + 16);
        let (h, m) = decode(&b).unwrap();
        assert_eq!(h.xid, 3);
        assert_eq!(m, Message::GroupMod(g));
        // A bucket length below its header.
        let mut bad = b.clone();
        bad[16..18].copy_from_slice(&8u16.to_be_bytes());
        assert_eq!(
            decode(&bad).map(|_| ()),
            Err(OfpError::new(et::GROUP_MOD_FAILED, gmfc::BAD_BUCKET))
        );
        // Cut short: the bucket claims more than there is.
        let mut short = b[..b.len() - 8].to_vec();
        short[2..4].copy_from_slice(&((b.len() - 8) as u16).to_be_bytes());
        assert!(decode(&short).is_err());
    }

    #[test]
    fn replies_have_the_spec_layout() {
        let s = group_stats_entry(&GroupStats {
            group_id: 1,
            ref_count: 2,
            packet_count: 3,
            byte_count: 4,
            duration_sec: 5,
            duration_nsec: 6,
            buckets: vec![(7, 8)],
        });
        assert_eq!(s.len(), 56);
        assert_eq!(&s[0..2], &56u16.to_be_bytes());
        assert_eq!(&s[8..12], &2u32.to_be_bytes());
        assert_eq!(&s[40..48], &7u64.to_be_bytes());
        let d = group_desc_entry(gt::INDIRECT, 9, &[]);
        assert_eq!(d, vec![0, 8, 2, 0, 0, 0, 0, 9]);
        assert_eq!(
            group_features_body(5, 0, [1, 0, 1, 0], [1, 0, 1, 0]).len(),
            40
        );
    }
}
