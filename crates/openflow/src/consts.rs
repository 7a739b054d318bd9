//! Numbers of the OpenFlow 1.3 spec (`openflow.h`), grouped by enum: one
//! module per C enum, each member named as in the spec without the
//! enum's prefix (`t::HELLO` is `OFPT_HELLO`). The members carry no doc
//! comment of their own (each module allows `missing_docs`): their meaning
//! is the spec's, under the name the module's doc gives.

/// Wire version of OpenFlow 1.3.
pub const VERSION: u8 = 4;
/// `sizeof(struct ofp_header)`.
pub const HEADER_LEN: usize = 8;
/// Largest message (the length field is 16 bits).
pub const MAX_LEN: usize = 65535;
/// `OFP_NO_BUFFER`.
pub const NO_BUFFER: u32 = 0xffff_ffff;
/// `OFPTT_ALL` in flow-mod delete and stats requests.
pub const TABLE_ALL: u8 = 0xff;
/// Highest flow table number (`OFPTT_MAX`).
pub const TABLE_MAX: u8 = 0xfe;
/// `OFPG_ANY`.
pub const GROUP_ANY: u32 = 0xffff_ffff;

/// Message types (`enum ofp_type`); members `OFPT_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod t {
    pub const HELLO: u8 = 0;
    pub const ERROR: u8 = 1;
    pub const ECHO_REQUEST: u8 = 2;
    pub const ECHO_REPLY: u8 = 3;
    pub const EXPERIMENTER: u8 = 4;
    pub const FEATURES_REQUEST: u8 = 5;
    pub const FEATURES_REPLY: u8 = 6;
    pub const GET_CONFIG_REQUEST: u8 = 7;
    pub const GET_CONFIG_REPLY: u8 = 8;
    pub const SET_CONFIG: u8 = 9;
    pub const PACKET_IN: u8 = 10;
    pub const FLOW_REMOVED: u8 = 11;
    pub const PORT_STATUS: u8 = 12;
    pub const PACKET_OUT: u8 = 13;
    pub const FLOW_MOD: u8 = 14;
    pub const GROUP_MOD: u8 = 15;
    pub const PORT_MOD: u8 = 16;
    pub const TABLE_MOD: u8 = 17;
    pub const MULTIPART_REQUEST: u8 = 18;
    pub const MULTIPART_REPLY: u8 = 19;
    pub const BARRIER_REQUEST: u8 = 20;
    pub const BARRIER_REPLY: u8 = 21;
    pub const ROLE_REQUEST: u8 = 24;
    pub const ROLE_REPLY: u8 = 25;
    pub const GET_ASYNC_REQUEST: u8 = 26;
    pub const GET_ASYNC_REPLY: u8 = 27;
    pub const SET_ASYNC: u8 = 28;
    pub const METER_MOD: u8 = 29;
}

/// `enum ofp_controller_role`; members `OFPCR_ROLE_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod role {
    pub const NOCHANGE: u32 = 0;
    pub const EQUAL: u32 = 1;
    pub const MASTER: u32 = 2;
    pub const SLAVE: u32 = 3;
}

/// `OFPET_ROLE_REQUEST_FAILED` codes; members `OFPRRFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod rrfc {
    pub const STALE: u16 = 0;
    pub const BAD_ROLE: u16 = 2;
}

/// Error types (`enum ofp_error_type`); members `OFPET_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod et {
    pub const HELLO_FAILED: u16 = 0;
    pub const BAD_REQUEST: u16 = 1;
    pub const BAD_ACTION: u16 = 2;
    pub const BAD_INSTRUCTION: u16 = 3;
    pub const BAD_MATCH: u16 = 4;
    pub const FLOW_MOD_FAILED: u16 = 5;
    pub const GROUP_MOD_FAILED: u16 = 6;
    pub const PORT_MOD_FAILED: u16 = 7;
    pub const TABLE_MOD_FAILED: u16 = 8;
    pub const SWITCH_CONFIG_FAILED: u16 = 10;
    pub const ROLE_REQUEST_FAILED: u16 = 11;
    pub const METER_MOD_FAILED: u16 = 12;
    pub const TABLE_FEATURES_FAILED: u16 = 13;
}

/// `OFPET_PORT_MOD_FAILED` codes; members `OFPPMFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod pmfc {
    pub const BAD_PORT: u16 = 0;
    pub const BAD_CONFIG: u16 = 2;
    pub const EPERM: u16 = 4;
}

/// `OFPET_TABLE_MOD_FAILED` codes; members `OFPTMFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod tmfc {
    pub const BAD_TABLE: u16 = 0;
    pub const BAD_CONFIG: u16 = 1;
}

/// `OFPET_TABLE_FEATURES_FAILED` codes; members `OFPTFFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod tffc {
    pub const EPERM: u16 = 5;
}

/// `OFPET_METER_MOD_FAILED` codes; members `OFPMMFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod mmfc {
    pub const UNKNOWN: u16 = 0;
    pub const METER_EXISTS: u16 = 1;
    pub const INVALID_METER: u16 = 2;
    pub const UNKNOWN_METER: u16 = 3;
    pub const BAD_COMMAND: u16 = 4;
    pub const BAD_FLAGS: u16 = 5;
    pub const BAD_RATE: u16 = 6;
    pub const BAD_BURST: u16 = 7;
    pub const BAD_BAND: u16 = 8;
    pub const BAD_BAND_VALUE: u16 = 9;
    pub const OUT_OF_METERS: u16 = 10;
    pub const OUT_OF_BANDS: u16 = 11;
}

/// `enum ofp_meter_mod_command`; members `OFPMC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod mc {
    pub const ADD: u16 = 0;
    pub const MODIFY: u16 = 1;
    pub const DELETE: u16 = 2;
}

/// `OFPET_HELLO_FAILED` codes; members `OFPHFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod hfc {
    pub const INCOMPATIBLE: u16 = 0;
}

/// `OFPET_BAD_REQUEST` codes; members `OFPBRC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod brc {
    pub const BAD_VERSION: u16 = 0;
    pub const BAD_TYPE: u16 = 1;
    pub const BAD_MULTIPART: u16 = 2;
    pub const BAD_EXPERIMENTER: u16 = 3;
    pub const EPERM: u16 = 5;
    pub const BAD_LEN: u16 = 6;
    pub const BUFFER_UNKNOWN: u16 = 8;
    pub const BAD_TABLE_ID: u16 = 9;
    pub const IS_SLAVE: u16 = 10;
    pub const BAD_PORT: u16 = 11;
    pub const BAD_PACKET: u16 = 12;
}

/// `OFPET_BAD_ACTION` codes; members `OFPBAC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod bac {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_EXPERIMENTER: u16 = 2;
    pub const BAD_OUT_PORT: u16 = 4;
    pub const BAD_ARGUMENT: u16 = 5;
    pub const TOO_MANY: u16 = 7;
    pub const BAD_OUT_GROUP: u16 = 9;
    pub const MATCH_INCONSISTENT: u16 = 10;
    pub const UNSUPPORTED_ORDER: u16 = 11;
    pub const BAD_SET_TYPE: u16 = 13;
    pub const BAD_SET_LEN: u16 = 14;
    pub const BAD_SET_ARGUMENT: u16 = 15;
}

/// `OFPET_BAD_INSTRUCTION` codes; members `OFPBIC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod bic {
    pub const UNKNOWN_INST: u16 = 0;
    pub const UNSUP_INST: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const UNSUP_METADATA: u16 = 3;
    pub const BAD_EXPERIMENTER: u16 = 5;
    pub const BAD_LEN: u16 = 7;
}

/// `OFPET_BAD_MATCH` codes; members `OFPBMC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod bmc {
    pub const BAD_TYPE: u16 = 0;
    pub const BAD_LEN: u16 = 1;
    pub const BAD_WILDCARDS: u16 = 5;
    pub const BAD_FIELD: u16 = 6;
    pub const BAD_VALUE: u16 = 7;
    pub const BAD_MASK: u16 = 8;
    pub const BAD_PREREQ: u16 = 9;
    pub const DUP_FIELD: u16 = 10;
}

/// `OFPET_FLOW_MOD_FAILED` codes; members `OFPFMFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod fmfc {
    pub const UNKNOWN: u16 = 0;
    pub const TABLE_FULL: u16 = 1;
    pub const BAD_TABLE_ID: u16 = 2;
    pub const OVERLAP: u16 = 3;
    pub const BAD_TIMEOUT: u16 = 5;
    pub const BAD_COMMAND: u16 = 6;
    pub const BAD_FLAGS: u16 = 7;
}

/// `OFPET_SWITCH_CONFIG_FAILED` codes; members `OFPSCFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod scfc {
    pub const BAD_FLAGS: u16 = 0;
}

/// Flow-mod commands (`enum ofp_flow_mod_command`); members `OFPFC_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod fc {
    pub const ADD: u8 = 0;
    pub const MODIFY: u8 = 1;
    pub const MODIFY_STRICT: u8 = 2;
    pub const DELETE: u8 = 3;
    pub const DELETE_STRICT: u8 = 4;
}

/// Flow-mod flags (`enum ofp_flow_mod_flags`); members `OFPFF_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod ff {
    pub const SEND_FLOW_REM: u16 = 1 << 0;
    pub const CHECK_OVERLAP: u16 = 1 << 1;
    pub const RESET_COUNTS: u16 = 1 << 2;
    pub const NO_PKT_COUNTS: u16 = 1 << 3;
    pub const NO_BYT_COUNTS: u16 = 1 << 4;
    /// Not the spec's: every flag above; a flow-mod with a bit outside it
    /// is refused (`OFPFMFC_BAD_FLAGS`).
    pub const ALL: u16 = 0x1f;
}

/// Reserved port numbers (`enum ofp_port_no`); members `OFPP_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod port {
    pub const MAX: u32 = 0xffff_ff00;
    pub const IN_PORT: u32 = 0xffff_fff8;
    pub const TABLE: u32 = 0xffff_fff9;
    pub const NORMAL: u32 = 0xffff_fffa;
    pub const FLOOD: u32 = 0xffff_fffb;
    pub const ALL: u32 = 0xffff_fffc;
    pub const CONTROLLER: u32 = 0xffff_fffd;
    pub const LOCAL: u32 = 0xffff_fffe;
    pub const ANY: u32 = 0xffff_ffff;
}

/// Instruction types (`enum ofp_instruction_type`); members `OFPIT_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod it {
    pub const GOTO_TABLE: u16 = 1;
    pub const WRITE_METADATA: u16 = 2;
    pub const WRITE_ACTIONS: u16 = 3;
    pub const APPLY_ACTIONS: u16 = 4;
    pub const CLEAR_ACTIONS: u16 = 5;
    pub const METER: u16 = 6;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Action types (`enum ofp_action_type`); members `OFPAT_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod at {
    pub const OUTPUT: u16 = 0;
    pub const COPY_TTL_OUT: u16 = 11;
    pub const COPY_TTL_IN: u16 = 12;
    pub const SET_MPLS_TTL: u16 = 15;
    pub const DEC_MPLS_TTL: u16 = 16;
    pub const PUSH_VLAN: u16 = 17;
    pub const POP_VLAN: u16 = 18;
    pub const PUSH_MPLS: u16 = 19;
    pub const POP_MPLS: u16 = 20;
    pub const SET_QUEUE: u16 = 21;
    pub const GROUP: u16 = 22;
    pub const SET_NW_TTL: u16 = 23;
    pub const DEC_NW_TTL: u16 = 24;
    pub const SET_FIELD: u16 = 25;
    pub const EXPERIMENTER: u16 = 0xffff;
}

/// Multipart types (`enum ofp_multipart_type`); members `OFPMP_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod mp {
    pub const DESC: u16 = 0;
    pub const FLOW: u16 = 1;
    pub const AGGREGATE: u16 = 2;
    pub const TABLE: u16 = 3;
    pub const PORT_STATS: u16 = 4;
    pub const GROUP: u16 = 6;
    pub const GROUP_DESC: u16 = 7;
    pub const GROUP_FEATURES: u16 = 8;
    pub const METER: u16 = 9;
    pub const METER_CONFIG: u16 = 10;
    pub const METER_FEATURES: u16 = 11;
    pub const TABLE_FEATURES: u16 = 12;
    pub const PORT_DESC: u16 = 13;
    pub const EXPERIMENTER: u16 = 0xffff;
    /// `OFPMPF_REQ_MORE` / `OFPMPF_REPLY_MORE`.
    pub const MORE: u16 = 1;
}

/// OXM class `OFPXMC_OPENFLOW_BASIC` (`CLASS_BASIC`) and its fields
/// (`enum oxm_ofb_match_fields`); members `OFPXMT_OFB_*`.
#[allow(missing_docs)] // spec names, documented by the spec (module doc)
pub mod oxm {
    pub const CLASS_BASIC: u16 = 0x8000;
    pub const IN_PORT: u8 = 0;
    pub const IN_PHY_PORT: u8 = 1;
    pub const METADATA: u8 = 2;
    pub const ETH_DST: u8 = 3;
    pub const ETH_SRC: u8 = 4;
    pub const ETH_TYPE: u8 = 5;
    pub const VLAN_VID: u8 = 6;
    pub const VLAN_PCP: u8 = 7;
    pub const IP_DSCP: u8 = 8;
    pub const IP_ECN: u8 = 9;
    pub const IP_PROTO: u8 = 10;
    pub const IPV4_SRC: u8 = 11;
    pub const IPV4_DST: u8 = 12;
    pub const TCP_SRC: u8 = 13;
    pub const TCP_DST: u8 = 14;
    pub const UDP_SRC: u8 = 15;
    pub const UDP_DST: u8 = 16;
    pub const SCTP_SRC: u8 = 17;
    pub const SCTP_DST: u8 = 18;
    pub const ICMPV4_TYPE: u8 = 19;
    pub const ICMPV4_CODE: u8 = 20;
    pub const ARP_OP: u8 = 21;
    pub const ARP_SPA: u8 = 22;
    pub const ARP_TPA: u8 = 23;
    pub const ARP_SHA: u8 = 24;
    pub const ARP_THA: u8 = 25;
    pub const IPV6_SRC: u8 = 26;
    pub const IPV6_DST: u8 = 27;
    pub const IPV6_FLABEL: u8 = 28;
    pub const ICMPV6_TYPE: u8 = 29;
    pub const ICMPV6_CODE: u8 = 30;
    pub const IPV6_ND_TARGET: u8 = 31;
    pub const IPV6_ND_SLL: u8 = 32;
    pub const IPV6_ND_TLL: u8 = 33;
    pub const MPLS_LABEL: u8 = 34;
    pub const MPLS_TC: u8 = 35;
    pub const MPLS_BOS: u8 = 36;
    pub const PBB_ISID: u8 = 37;
    pub const TUNNEL_ID: u8 = 38;
    pub const IPV6_EXTHDR: u8 = 39;
    /// `OFPXMT_OFB_PACKET_TYPE` (OpenFlow 1.5; OVS sends it in 1.3 too,
    /// e.g. `packet_type=(0,0)`, Ethernet, after normalising a match).
    pub const PACKET_TYPE: u8 = 44;
    /// `OFPVID_PRESENT`: the VLAN_VID bit saying a tag is there.
    pub const VID_PRESENT: u16 = 0x1000;

    /// (value length in bytes, maskable) of basic field `f`; None if unknown.
    pub fn shape(f: u8) -> Option<(u8, bool)> {
        Some(match f {
            IN_PORT | IN_PHY_PORT => (4, false),
            METADATA | TUNNEL_ID => (8, true),
            ETH_DST | ETH_SRC | ARP_SHA | ARP_THA => (6, true),
            ETH_TYPE => (2, false),
            VLAN_VID => (2, true),
            VLAN_PCP | IP_DSCP | IP_ECN | IP_PROTO => (1, false),
            IPV4_SRC | IPV4_DST | ARP_SPA | ARP_TPA => (4, true),
            TCP_SRC | TCP_DST | UDP_SRC | UDP_DST | SCTP_SRC | SCTP_DST | ARP_OP => (2, false),
            ICMPV4_TYPE | ICMPV4_CODE | ICMPV6_TYPE | ICMPV6_CODE => (1, false),
            IPV6_SRC | IPV6_DST => (16, true),
            IPV6_FLABEL => (4, true),
            IPV6_ND_TARGET => (16, false),
            IPV6_ND_SLL | IPV6_ND_TLL => (6, false),
            MPLS_LABEL => (4, false),
            MPLS_TC | MPLS_BOS => (1, false),
            PBB_ISID => (3, true),
            IPV6_EXTHDR => (2, true),
            PACKET_TYPE => (4, false),
            _ => return None,
        })
    }
}
