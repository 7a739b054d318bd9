//! OpenFlow 1.3 (wire version 4) codec: the messages a switch receives,
//! decoded with every length checked, and the messages it sends, encoded.
//!
//! Pure: no I/O, no panics on any input (decoding answers
//! [`OfpError`], the error type and code the spec prescribes for the
//! offence, which the channel sends back in an `OFPT_ERROR`). Numbers are
//! big-endian on the wire. The spec is "OpenFlow Switch Specification
//! 1.3.x" (ONF TS-006 and later); section names below refer to it.
//!
//! What is decoded: hello (version bitmap), error, echo request/reply,
//! features request, get-config request, set-config, flow-mod (OXM match
//! with masks and prerequisites; instructions goto-table, apply-actions,
//! write-actions, clear-actions, write-metadata, meter; actions output,
//! group, set-field, push-vlan, pop-vlan, dec-nw-ttl, set-nw-ttl, push-mpls,
//! pop-mpls, set-mpls-ttl, dec-mpls-ttl, copy-ttl-out/in), meter-mod with
//! its bands, multipart requests
//! (desc, flow, aggregate, table, port stats, port desc, table features),
//! barrier request, packet-out. What is encoded: hello, error, echo reply,
//! features reply, get-config reply, multipart replies (split into several
//! messages with `OFPMPF_REPLY_MORE` past 64 KiB), barrier reply,
//! port-status, packet-in, flow-removed, the match/instruction/action
//! structures of flow stats, and the group and meter replies.
#![warn(missing_docs)]
#![deny(unsafe_code)]

pub mod consts;
mod decode;
mod encode;
mod group;
mod meter;

pub use consts::*;
pub use decode::*;
pub use encode::*;
pub use group::*;
pub use meter::*;

/// An error to answer with: `OFPT_ERROR` type and code (section 7.4.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OfpError {
    /// `OFPET_*`.
    pub kind: u16,
    /// The type's `OFPxxC_*` code.
    pub code: u16,
}

impl OfpError {
    /// Type `kind`, code `code`.
    pub const fn new(kind: u16, code: u16) -> OfpError {
        OfpError { kind, code }
    }

    /// `OFPET_BAD_REQUEST/OFPBRC_BAD_LEN`.
    pub const fn bad_len() -> OfpError {
        OfpError::new(et::BAD_REQUEST, brc::BAD_LEN)
    }

    /// Names as ovs-ofctl prints them (`OFPBAC_BAD_TYPE`), for logs.
    pub fn name(&self) -> String {
        let (t, codes): (&str, &[&str]) = match self.kind {
            et::HELLO_FAILED => ("OFPHFC", &["INCOMPATIBLE", "EPERM"]),
            et::BAD_REQUEST => (
                "OFPBRC",
                &[
                    "BAD_VERSION",
                    "BAD_TYPE",
                    "BAD_MULTIPART",
                    "BAD_EXPERIMENTER",
                    "BAD_EXP_TYPE",
                    "EPERM",
                    "BAD_LEN",
                    "BUFFER_EMPTY",
                    "BUFFER_UNKNOWN",
                    "BAD_TABLE_ID",
                    "IS_SLAVE",
                    "BAD_PORT",
                    "BAD_PACKET",
                    "MULTIPART_BUFFER_OVERFLOW",
                ],
            ),
            et::BAD_ACTION => (
                "OFPBAC",
                &[
                    "BAD_TYPE",
                    "BAD_LEN",
                    "BAD_EXPERIMENTER",
                    "BAD_EXP_TYPE",
                    "BAD_OUT_PORT",
                    "BAD_ARGUMENT",
                    "EPERM",
                    "TOO_MANY",
                    "BAD_QUEUE",
                    "BAD_OUT_GROUP",
                    "MATCH_INCONSISTENT",
                    "UNSUPPORTED_ORDER",
                    "BAD_TAG",
                    "BAD_SET_TYPE",
                    "BAD_SET_LEN",
                    "BAD_SET_ARGUMENT",
                ],
            ),
            et::BAD_INSTRUCTION => (
                "OFPBIC",
                &[
                    "UNKNOWN_INST",
                    "UNSUP_INST",
                    "BAD_TABLE_ID",
                    "UNSUP_METADATA",
                    "UNSUP_METADATA_MASK",
                    "BAD_EXPERIMENTER",
                    "BAD_EXP_TYPE",
                    "BAD_LEN",
                    "EPERM",
                ],
            ),
            et::BAD_MATCH => (
                "OFPBMC",
                &[
                    "BAD_TYPE",
                    "BAD_LEN",
                    "BAD_TAG",
                    "BAD_DL_ADDR_MASK",
                    "BAD_NW_ADDR_MASK",
                    "BAD_WILDCARDS",
                    "BAD_FIELD",
                    "BAD_VALUE",
                    "BAD_MASK",
                    "BAD_PREREQ",
                    "DUP_FIELD",
                    "EPERM",
                ],
            ),
            et::FLOW_MOD_FAILED => (
                "OFPFMFC",
                &[
                    "UNKNOWN",
                    "TABLE_FULL",
                    "BAD_TABLE_ID",
                    "OVERLAP",
                    "EPERM",
                    "BAD_TIMEOUT",
                    "BAD_COMMAND",
                    "BAD_FLAGS",
                ],
            ),
            et::GROUP_MOD_FAILED => ("OFPGMFC", group::GMFC_NAMES),
            et::METER_MOD_FAILED => ("OFPMMFC", meter::MMFC_NAMES),
            et::SWITCH_CONFIG_FAILED => ("OFPSCFC", &["BAD_FLAGS", "BAD_LEN", "EPERM"]),
            et::PORT_MOD_FAILED => (
                "OFPPMFC",
                &[
                    "BAD_PORT",
                    "BAD_HW_ADDR",
                    "BAD_CONFIG",
                    "BAD_ADVERTISE",
                    "EPERM",
                ],
            ),
            et::TABLE_MOD_FAILED => ("OFPTMFC", &["BAD_TABLE", "BAD_CONFIG", "EPERM"]),
            et::TABLE_FEATURES_FAILED => (
                "OFPTFFC",
                &[
                    "BAD_TABLE",
                    "BAD_METADATA",
                    "BAD_TYPE",
                    "BAD_LEN",
                    "BAD_ARGUMENT",
                    "EPERM",
                ],
            ),
            _ => ("OFPET", &[]),
        };
        match codes.get(self.code as usize) {
            Some(c) => format!("{t}_{c}"),
            None => format!("{t}({},{})", self.kind, self.code),
        }
    }
}

impl std::fmt::Display for OfpError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.name())
    }
}

impl std::error::Error for OfpError {}

#[cfg(test)]
mod tests;
