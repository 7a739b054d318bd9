//! Decoding: every length is checked before it is used; nothing here can
//! panic or index out of bounds (all reads go through [`Reader`]).

use crate::consts::*;
use crate::OfpError;

/// Bounds-checked big-endian reader over a byte slice.
#[derive(Clone, Copy)]
pub struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Reads `b`.
    pub fn new(b: &'a [u8]) -> Reader<'a> {
        Reader { b }
    }
    /// Bytes left.
    pub fn len(&self) -> usize {
        self.b.len()
    }
    /// Nothing left.
    pub fn is_empty(&self) -> bool {
        self.b.is_empty()
    }
    /// The next `n` bytes, or `e` if fewer are left.
    pub fn take(&mut self, n: usize, e: OfpError) -> Result<&'a [u8], OfpError> {
        if n > self.b.len() {
            return Err(e);
        }
        let (h, t) = self.b.split_at(n);
        self.b = t;
        Ok(h)
    }
    fn arr<const N: usize>(&mut self, e: OfpError) -> Result<[u8; N], OfpError> {
        let s = self.take(N, e)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Ok(a)
    }
    /// One byte.
    pub fn u8(&mut self, e: OfpError) -> Result<u8, OfpError> {
        Ok(self.arr::<1>(e)?[0])
    }
    /// Big-endian u16.
    pub fn u16(&mut self, e: OfpError) -> Result<u16, OfpError> {
        Ok(u16::from_be_bytes(self.arr(e)?))
    }
    /// Big-endian u32.
    pub fn u32(&mut self, e: OfpError) -> Result<u32, OfpError> {
        Ok(u32::from_be_bytes(self.arr(e)?))
    }
    /// Big-endian u64.
    pub fn u64(&mut self, e: OfpError) -> Result<u64, OfpError> {
        Ok(u64::from_be_bytes(self.arr(e)?))
    }
    /// The rest.
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.b)
    }
}

/// `struct ofp_header`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Wire version.
    pub version: u8,
    /// `OFPT_*`.
    pub kind: u8,
    /// Whole message length, header included.
    pub length: u16,
    /// Transaction id.
    pub xid: u32,
}

impl Header {
    /// Reads a header from the first 8 bytes of `b` (None if shorter).
    pub fn peek(b: &[u8]) -> Option<Header> {
        let h = b.get(..HEADER_LEN)?;
        Some(Header {
            version: h[0],
            kind: h[1],
            length: u16::from_be_bytes([h[2], h[3]]),
            xid: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
        })
    }
}

/// Length of the first message in `buf`: `Ok(None)` while fewer than 8
/// bytes are there, `Err` if its length field is shorter than a header
/// (the stream cannot be framed any more: close the connection).
pub fn frame_len(buf: &[u8]) -> Result<Option<usize>, OfpError> {
    match Header::peek(buf) {
        None => Ok(None),
        Some(h) if (h.length as usize) < HEADER_LEN => Err(OfpError::bad_len()),
        Some(h) => Ok(Some(h.length as usize)),
    }
}

/// One OXM TLV of class `OFPXMC_OPENFLOW_BASIC` (values and masks up to
/// 128 bits, right-aligned).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Oxm {
    /// `OFPXMT_OFB_*`.
    pub field: u8,
    /// Value (with the mask applied when there is one).
    pub value: u128,
    /// Mask; None = exact match.
    pub mask: Option<u128>,
}

impl Oxm {
    /// Exact match of `field` on `value`.
    pub fn exact(field: u8, value: u128) -> Oxm {
        Oxm {
            field,
            value,
            mask: None,
        }
    }

    /// The value if the match is exact.
    pub fn exact_value(&self) -> Option<u128> {
        self.mask.is_none().then_some(self.value)
    }
}

fn be_uint(b: &[u8]) -> u128 {
    b.iter().fold(0u128, |a, &x| (a << 8) | x as u128)
}

fn bad_match(code: u16) -> OfpError {
    OfpError::new(et::BAD_MATCH, code)
}

/// Decodes one OXM TLV (header and payload) from `r`. `e_len` is the error
/// for a TLV that runs past its container.
fn oxm_tlv(r: &mut Reader<'_>, set_field: bool) -> Result<Oxm, OfpError> {
    let len_err = if set_field {
        OfpError::new(et::BAD_ACTION, bac::BAD_SET_LEN)
    } else {
        bad_match(bmc::BAD_LEN)
    };
    let class = r.u16(len_err)?;
    let fh = r.u8(len_err)?;
    let plen = r.u8(len_err)? as usize;
    let payload = r.take(plen, len_err)?;
    let (field, has_mask) = (fh >> 1, fh & 1 == 1);
    let bad_field = if set_field {
        OfpError::new(et::BAD_ACTION, bac::BAD_SET_TYPE)
    } else {
        bad_match(bmc::BAD_FIELD)
    };
    if class != oxm::CLASS_BASIC {
        return Err(bad_field);
    }
    let (size, maskable) = oxm::shape(field).ok_or(bad_field)?;
    let size = size as usize;
    if has_mask && set_field {
        return Err(OfpError::new(et::BAD_ACTION, bac::BAD_SET_ARGUMENT));
    }
    if plen != if has_mask { 2 * size } else { size } {
        return Err(len_err);
    }
    if has_mask && !maskable {
        return Err(bad_match(bmc::BAD_MASK));
    }
    let value = be_uint(&payload[..size]);
    let mask = if has_mask {
        let m = be_uint(&payload[size..]);
        if value & !m != 0 {
            return Err(bad_match(bmc::BAD_WILDCARDS));
        }
        Some(m)
    } else {
        None
    };
    // Fields narrower than their bytes (section 7.2.3.7).
    let bits: u32 = match field {
        oxm::VLAN_VID => 13,
        oxm::VLAN_PCP | oxm::MPLS_TC => 3,
        oxm::IP_DSCP => 6,
        oxm::IP_ECN => 2,
        oxm::IPV6_FLABEL => 20,
        oxm::MPLS_LABEL => 20,
        oxm::MPLS_BOS => 1,
        oxm::IPV6_EXTHDR => 9,
        _ => 128,
    };
    if bits < 128 && (value >> bits != 0 || mask.is_some_and(|m| m >> bits != 0)) {
        return Err(if set_field {
            OfpError::new(et::BAD_ACTION, bac::BAD_SET_ARGUMENT)
        } else {
            bad_match(bmc::BAD_VALUE)
        });
    }
    Ok(Oxm { field, value, mask })
}

/// `struct ofp_match` (type OXM), padding included; checks duplicates and
/// prerequisites.
pub fn decode_match(r: &mut Reader<'_>) -> Result<Vec<Oxm>, OfpError> {
    let start_len = r.len();
    let mtype = r.u16(OfpError::bad_len())?;
    let mlen = r.u16(OfpError::bad_len())? as usize;
    if mtype != 1 {
        return Err(bad_match(bmc::BAD_TYPE));
    }
    if mlen < 4 {
        return Err(bad_match(bmc::BAD_LEN));
    }
    let padded = mlen.div_ceil(8) * 8;
    if padded > start_len {
        return Err(OfpError::bad_len());
    }
    let mut body = Reader::new(r.take(mlen - 4, OfpError::bad_len())?);
    r.take(padded - mlen, OfpError::bad_len())?;
    let mut out: Vec<Oxm> = Vec::new();
    while !body.is_empty() {
        let o = oxm_tlv(&mut body, false)?;
        if out.iter().any(|x| x.field == o.field) {
            return Err(bad_match(bmc::DUP_FIELD));
        }
        out.push(o);
    }
    check_prereqs(&out)?;
    Ok(out)
}

/// Exact value of `f` in `m`.
pub fn exact(m: &[Oxm], f: u8) -> Option<u128> {
    m.iter()
        .find(|o| o.field == f)
        .and_then(|o| o.exact_value())
}

/// Prerequisites (section 7.2.3.6, table 12): a field may be matched only
/// when the fields it depends on are matched exactly on a fitting value.
pub fn check_prereqs(m: &[Oxm]) -> Result<(), OfpError> {
    let eth = exact(m, oxm::ETH_TYPE);
    let proto = exact(m, oxm::IP_PROTO);
    let is_eth = |v: &[u128]| eth.is_some_and(|e| v.contains(&e));
    let is_proto = |p: u128| proto == Some(p) && is_eth(&[0x0800, 0x86dd]);
    for o in m {
        let ok = match o.field {
            oxm::IN_PHY_PORT => exact(m, oxm::IN_PORT).is_some(),
            oxm::VLAN_PCP => m.iter().any(|v| {
                v.field == oxm::VLAN_VID
                    && v.value & oxm::VID_PRESENT as u128 != 0
                    && v.mask.is_none_or(|k| k & oxm::VID_PRESENT as u128 != 0)
            }),
            oxm::IP_DSCP | oxm::IP_ECN | oxm::IP_PROTO => is_eth(&[0x0800, 0x86dd]),
            oxm::IPV4_SRC | oxm::IPV4_DST => is_eth(&[0x0800]),
            oxm::TCP_SRC | oxm::TCP_DST => is_proto(6),
            oxm::UDP_SRC | oxm::UDP_DST => is_proto(17),
            oxm::SCTP_SRC | oxm::SCTP_DST => is_proto(132),
            oxm::ICMPV4_TYPE | oxm::ICMPV4_CODE => is_proto(1) && is_eth(&[0x0800]),
            oxm::ARP_OP | oxm::ARP_SPA | oxm::ARP_TPA | oxm::ARP_SHA | oxm::ARP_THA => {
                is_eth(&[0x0806])
            }
            oxm::IPV6_SRC | oxm::IPV6_DST | oxm::IPV6_FLABEL | oxm::IPV6_EXTHDR => {
                is_eth(&[0x86dd])
            }
            oxm::ICMPV6_TYPE | oxm::ICMPV6_CODE => is_proto(58) && is_eth(&[0x86dd]),
            oxm::IPV6_ND_TARGET => {
                is_proto(58) && matches!(exact(m, oxm::ICMPV6_TYPE), Some(135 | 136))
            }
            oxm::IPV6_ND_SLL => is_proto(58) && exact(m, oxm::ICMPV6_TYPE) == Some(135),
            oxm::IPV6_ND_TLL => is_proto(58) && exact(m, oxm::ICMPV6_TYPE) == Some(136),
            oxm::MPLS_LABEL | oxm::MPLS_TC | oxm::MPLS_BOS => is_eth(&[0x8847, 0x8848]),
            oxm::PBB_ISID => is_eth(&[0x88e7]),
            _ => true,
        };
        if !ok {
            return Err(bad_match(bmc::BAD_PREREQ));
        }
    }
    Ok(())
}

/// An action (section 7.2.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// `OFPAT_OUTPUT`: port (possibly reserved), `max_len` for the controller.
    Output {
        /// `OFPP_*` or a port number.
        port: u32,
        /// Bytes to send to the controller.
        max_len: u16,
    },
    /// `OFPAT_GROUP`.
    Group(u32),
    /// `OFPAT_SET_FIELD` (never masked).
    SetField(Oxm),
    /// `OFPAT_PUSH_VLAN` with its TPID.
    PushVlan(u16),
    /// `OFPAT_POP_VLAN`.
    PopVlan,
    /// `OFPAT_DEC_NW_TTL`.
    DecNwTtl,
    /// `OFPAT_SET_NW_TTL`.
    SetNwTtl(u8),
    /// `OFPAT_PUSH_MPLS` with its EtherType.
    PushMpls(u16),
    /// `OFPAT_POP_MPLS` with the EtherType the frame gets.
    PopMpls(u16),
    /// `OFPAT_SET_MPLS_TTL`.
    SetMplsTtl(u8),
    /// `OFPAT_DEC_MPLS_TTL`.
    DecMplsTtl,
    /// `OFPAT_COPY_TTL_OUT`.
    CopyTtlOut,
    /// `OFPAT_COPY_TTL_IN`.
    CopyTtlIn,
}

fn bad_action(code: u16) -> OfpError {
    OfpError::new(et::BAD_ACTION, code)
}

/// A list of actions filling `b` exactly.
pub fn decode_actions(b: &[u8]) -> Result<Vec<Action>, OfpError> {
    let mut r = Reader::new(b);
    let mut out = Vec::new();
    let e = bad_action(bac::BAD_LEN);
    while !r.is_empty() {
        let ty = r.u16(e)?;
        let len = r.u16(e)? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(e);
        }
        let mut a = Reader::new(r.take(len - 4, e)?);
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(e) };
        out.push(match ty {
            at::OUTPUT => {
                fixed(16)?;
                let port = a.u32(e)?;
                let max_len = a.u16(e)?;
                if port == 0 || port == port::ANY {
                    return Err(bad_action(bac::BAD_OUT_PORT));
                }
                Action::Output { port, max_len }
            }
            at::GROUP => {
                fixed(8)?;
                Action::Group(a.u32(e)?)
            }
            at::PUSH_VLAN => {
                fixed(8)?;
                let tpid = a.u16(e)?;
                if tpid != 0x8100 && tpid != 0x88a8 {
                    return Err(bad_action(bac::BAD_ARGUMENT));
                }
                Action::PushVlan(tpid)
            }
            at::POP_VLAN => {
                fixed(8)?;
                Action::PopVlan
            }
            at::DEC_NW_TTL => {
                fixed(8)?;
                Action::DecNwTtl
            }
            at::SET_NW_TTL => {
                fixed(8)?;
                Action::SetNwTtl(a.u8(e)?)
            }
            at::PUSH_MPLS => {
                fixed(8)?;
                let et = a.u16(e)?;
                if et != 0x8847 && et != 0x8848 {
                    return Err(bad_action(bac::BAD_ARGUMENT));
                }
                Action::PushMpls(et)
            }
            at::POP_MPLS => {
                fixed(8)?;
                Action::PopMpls(a.u16(e)?)
            }
            at::SET_MPLS_TTL => {
                fixed(8)?;
                Action::SetMplsTtl(a.u8(e)?)
            }
            at::DEC_MPLS_TTL => {
                fixed(8)?;
                Action::DecMplsTtl
            }
            at::COPY_TTL_OUT => {
                fixed(8)?;
                Action::CopyTtlOut
            }
            at::COPY_TTL_IN => {
                fixed(8)?;
                Action::CopyTtlIn
            }
            at::SET_FIELD => {
                let o = oxm_tlv(&mut a, true)?;
                // The rest is padding to 8 bytes: at most 7 zero bytes.
                let pad = a.rest();
                if pad.len() >= 8 {
                    return Err(bad_action(bac::BAD_SET_LEN));
                }
                Action::SetField(o)
            }
            // Experimenter actions (OVS's resubmit, learn, ...): turnoutd
            // knows no experimenter id, so the spec's code is "unknown
            // experimenter id" (OVS answers the same).
            at::EXPERIMENTER => return Err(bad_action(bac::BAD_EXPERIMENTER)),
            // PBB, set-queue, and types 1 to 10 (OpenFlow 1.0's): not
            // supported.
            _ => return Err(bad_action(bac::BAD_TYPE)),
        });
    }
    Ok(out)
}

/// An instruction (section 7.2.4).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// `OFPIT_GOTO_TABLE`.
    GotoTable(u8),
    /// `OFPIT_WRITE_METADATA` (value, mask).
    WriteMetadata(u64, u64),
    /// `OFPIT_WRITE_ACTIONS`.
    WriteActions(Vec<Action>),
    /// `OFPIT_APPLY_ACTIONS`.
    ApplyActions(Vec<Action>),
    /// `OFPIT_CLEAR_ACTIONS`.
    ClearActions,
    /// `OFPIT_METER`.
    Meter(u32),
}

impl Instruction {
    /// `OFPIT_*` of this instruction.
    pub fn kind(&self) -> u16 {
        match self {
            Instruction::GotoTable(_) => it::GOTO_TABLE,
            Instruction::WriteMetadata(..) => it::WRITE_METADATA,
            Instruction::WriteActions(_) => it::WRITE_ACTIONS,
            Instruction::ApplyActions(_) => it::APPLY_ACTIONS,
            Instruction::ClearActions => it::CLEAR_ACTIONS,
            Instruction::Meter(_) => it::METER,
        }
    }
}

fn bad_inst(code: u16) -> OfpError {
    OfpError::new(et::BAD_INSTRUCTION, code)
}

/// Instructions filling `b` exactly; at most one of each type.
pub fn decode_instructions(b: &[u8]) -> Result<Vec<Instruction>, OfpError> {
    let mut r = Reader::new(b);
    let mut out: Vec<Instruction> = Vec::new();
    let e = bad_inst(bic::BAD_LEN);
    while !r.is_empty() {
        let ty = r.u16(e)?;
        let len = r.u16(e)? as usize;
        if len < 8 || !len.is_multiple_of(8) {
            return Err(e);
        }
        let mut a = Reader::new(r.take(len - 4, e)?);
        let fixed = |want: usize| if len == want { Ok(()) } else { Err(e) };
        let i = match ty {
            it::GOTO_TABLE => {
                fixed(8)?;
                let t = a.u8(e)?;
                if t > TABLE_MAX {
                    return Err(bad_inst(bic::BAD_TABLE_ID));
                }
                Instruction::GotoTable(t)
            }
            it::WRITE_METADATA => {
                fixed(24)?;
                a.take(4, e)?;
                Instruction::WriteMetadata(a.u64(e)?, a.u64(e)?)
            }
            it::WRITE_ACTIONS | it::APPLY_ACTIONS => {
                a.take(4, e)?;
                let acts = decode_actions(a.rest())?;
                if ty == it::WRITE_ACTIONS {
                    Instruction::WriteActions(acts)
                } else {
                    Instruction::ApplyActions(acts)
                }
            }
            it::CLEAR_ACTIONS => {
                fixed(8)?;
                Instruction::ClearActions
            }
            it::METER => {
                fixed(8)?;
                Instruction::Meter(a.u32(e)?)
            }
            it::EXPERIMENTER => return Err(bad_inst(bic::BAD_EXPERIMENTER)),
            _ => return Err(bad_inst(bic::UNKNOWN_INST)),
        };
        if out.iter().any(|x| x.kind() == i.kind()) {
            return Err(bad_inst(bic::UNSUP_INST));
        }
        out.push(i);
    }
    Ok(out)
}

/// `struct ofp_flow_mod`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowMod {
    /// Opaque value the controller chose; stored with the flow and shown in
    /// its stats, flow-removed and packet-ins.
    pub cookie: u64,
    /// Modify and delete: the cookie bits a flow must match (`cookie &
    /// cookie_mask`); 0 matches any cookie.
    pub cookie_mask: u64,
    /// Table the flow goes into (add) or is looked up in; `TABLE_ALL`
    /// selects every table for a delete.
    pub table_id: u8,
    /// `OFPFC_*`.
    pub command: u8,
    /// Seconds without a matching packet before the flow is removed; 0:
    /// never.
    pub idle_timeout: u16,
    /// Seconds after installation before the flow is removed; 0: never.
    pub hard_timeout: u16,
    /// Among flows whose matches overlap, the higher priority wins; strict
    /// modify and delete compare it too.
    pub priority: u16,
    /// A packet buffered by the switch to run through the flow once added;
    /// `NO_BUFFER` for none.
    pub buffer_id: u32,
    /// Delete: only flows with an output to this port (`port::ANY`: no
    /// such condition).
    pub out_port: u32,
    /// Delete: only flows with an output to this group (`GROUP_ANY`: no
    /// such condition).
    pub out_group: u32,
    /// `OFPFF_*`.
    pub flags: u16,
    /// The match, as OXM fields in the order received.
    pub matches: Vec<Oxm>,
    /// Instructions, at most one of each kind.
    pub instructions: Vec<Instruction>,
}

impl FlowMod {
    /// The apply-actions list (empty if none).
    pub fn apply_actions(&self) -> &[Action] {
        self.instructions
            .iter()
            .find_map(|i| match i {
                Instruction::ApplyActions(a) => Some(a.as_slice()),
                _ => None,
            })
            .unwrap_or(&[])
    }

    /// The goto-table target, if any.
    pub fn goto(&self) -> Option<u8> {
        self.instructions.iter().find_map(|i| match i {
            Instruction::GotoTable(t) => Some(*t),
            _ => None,
        })
    }
}

fn decode_flow_mod(r: &mut Reader<'_>) -> Result<FlowMod, OfpError> {
    let e = OfpError::bad_len();
    let cookie = r.u64(e)?;
    let cookie_mask = r.u64(e)?;
    let table_id = r.u8(e)?;
    let command = r.u8(e)?;
    let idle_timeout = r.u16(e)?;
    let hard_timeout = r.u16(e)?;
    let priority = r.u16(e)?;
    let buffer_id = r.u32(e)?;
    let out_port = r.u32(e)?;
    let out_group = r.u32(e)?;
    let flags = r.u16(e)?;
    r.take(2, e)?;
    let matches = decode_match(r)?;
    let instructions = decode_instructions(r.rest())?;
    if command > fc::DELETE_STRICT {
        return Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::BAD_COMMAND));
    }
    let adds = command <= fc::MODIFY_STRICT;
    if adds && table_id > TABLE_MAX {
        return Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::BAD_TABLE_ID));
    }
    if flags & !ff::ALL != 0 {
        return Err(OfpError::new(et::FLOW_MOD_FAILED, fmfc::BAD_FLAGS));
    }
    let m = FlowMod {
        cookie,
        cookie_mask,
        table_id,
        command,
        idle_timeout,
        hard_timeout,
        priority,
        buffer_id,
        out_port,
        out_group,
        flags,
        matches,
        instructions,
    };
    if adds {
        if let Some(g) = m.goto() {
            if g <= table_id {
                return Err(bad_inst(bic::BAD_TABLE_ID));
            }
        }
    }
    Ok(m)
}

/// Body of a flow or aggregate stats request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlowStatsRequest {
    /// Table to report (`TABLE_ALL`: every table).
    pub table_id: u8,
    /// Only flows with an output to this port (`port::ANY`: any).
    pub out_port: u32,
    /// Only flows with an output to this group (`GROUP_ANY`: any).
    pub out_group: u32,
    /// Only flows whose cookie equals this under `cookie_mask`.
    pub cookie: u64,
    /// Cookie bits compared; 0 compares none.
    pub cookie_mask: u64,
    /// Only flows whose match is this one or narrower (non-strict).
    pub matches: Vec<Oxm>,
}

/// A multipart request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MultipartRequest {
    /// Switch description (`OFPMP_DESC`).
    Desc,
    /// Statistics of each flow selected (`OFPMP_FLOW`).
    Flow(FlowStatsRequest),
    /// Packet, byte and flow counts summed over the flows selected
    /// (`OFPMP_AGGREGATE`).
    Aggregate(FlowStatsRequest),
    /// Statistics of each table (`OFPMP_TABLE`).
    Table,
    /// Port stats of one port (`OFPP_ANY`: all).
    PortStats(u32),
    /// Description of every port (`OFPMP_PORT_DESC`).
    PortDesc,
    /// Table features (a request with a body, which would set features, is refused).
    TableFeatures,
    /// Group statistics of one group (`OFPG_ALL`: all).
    Group(u32),
    /// Buckets of every group (`OFPMP_GROUP_DESC`).
    GroupDesc,
    /// Group types and limits the switch supports (`OFPMP_GROUP_FEATURES`).
    GroupFeatures,
    /// Meter statistics of one meter (`OFPM_ALL`: all).
    Meter(u32),
    /// Meter configuration of one meter (`OFPM_ALL`: all).
    MeterConfig(u32),
    /// Meter band types and limits the switch supports
    /// (`OFPMP_METER_FEATURES`).
    MeterFeatures,
}

fn decode_multipart(r: &mut Reader<'_>) -> Result<(u16, MultipartRequest), OfpError> {
    let e = OfpError::bad_len();
    let ty = r.u16(e)?;
    let flags = r.u16(e)?;
    r.take(4, e)?;
    let empty = |r: &Reader<'_>| if r.is_empty() { Ok(()) } else { Err(e) };
    let req = match ty {
        mp::DESC => {
            empty(r)?;
            MultipartRequest::Desc
        }
        mp::TABLE => {
            empty(r)?;
            MultipartRequest::Table
        }
        mp::PORT_DESC => {
            empty(r)?;
            MultipartRequest::PortDesc
        }
        mp::TABLE_FEATURES => {
            // A body would set the tables' features: not allowed here
            // (OpenFlow 1.3, 7.3.5.18: OFPTFFC_EPERM).
            if !r.is_empty() {
                return Err(OfpError::new(et::TABLE_FEATURES_FAILED, tffc::EPERM));
            }
            MultipartRequest::TableFeatures
        }
        mp::GROUP => {
            let g = r.u32(e)?;
            r.take(4, e)?;
            empty(r)?;
            MultipartRequest::Group(g)
        }
        mp::GROUP_DESC => {
            empty(r)?;
            MultipartRequest::GroupDesc
        }
        mp::GROUP_FEATURES => {
            empty(r)?;
            MultipartRequest::GroupFeatures
        }
        mp::METER | mp::METER_CONFIG => {
            let m = r.u32(e)?;
            r.take(4, e)?;
            empty(r)?;
            if ty == mp::METER {
                MultipartRequest::Meter(m)
            } else {
                MultipartRequest::MeterConfig(m)
            }
        }
        mp::METER_FEATURES => {
            empty(r)?;
            MultipartRequest::MeterFeatures
        }
        mp::PORT_STATS => {
            let p = r.u32(e)?;
            r.take(4, e)?;
            empty(r)?;
            MultipartRequest::PortStats(p)
        }
        mp::FLOW | mp::AGGREGATE => {
            let table_id = r.u8(e)?;
            r.take(3, e)?;
            let out_port = r.u32(e)?;
            let out_group = r.u32(e)?;
            r.take(4, e)?;
            let cookie = r.u64(e)?;
            let cookie_mask = r.u64(e)?;
            let matches = decode_match(r)?;
            empty(r)?;
            let f = FlowStatsRequest {
                table_id,
                out_port,
                out_group,
                cookie,
                cookie_mask,
                matches,
            };
            if ty == mp::FLOW {
                MultipartRequest::Flow(f)
            } else {
                MultipartRequest::Aggregate(f)
            }
        }
        mp::EXPERIMENTER => return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_EXPERIMENTER)),
        _ => return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_MULTIPART)),
    };
    Ok((flags, req))
}

/// `struct ofp_packet_out`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOut {
    /// A packet buffered by the switch to send; `NO_BUFFER`: the packet is
    /// `data`.
    pub buffer_id: u32,
    /// Port the packet is taken to have come in on (`port::CONTROLLER`
    /// for none), for `IN_PORT` outputs and flooding.
    pub in_port: u32,
    /// Actions applied to the packet.
    pub actions: Vec<Action>,
    /// The frame, when `buffer_id` is `NO_BUFFER`.
    pub data: Vec<u8>,
}

/// `struct ofp_async_config`: per kind, the reasons (bit n = reason n)
/// sent to a connection in the master or equal role (`[0]`) and in the
/// slave role (`[1]`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AsyncConfig {
    /// Packet-in reasons (`OFPR_*`).
    pub packet_in: [u32; 2],
    /// Port-status reasons (`OFPPR_*`).
    pub port_status: [u32; 2],
    /// Flow-removed reasons (`OFPRR_*`).
    pub flow_removed: [u32; 2],
}

impl Default for AsyncConfig {
    /// OpenFlow 1.3's defaults (section 7.3.10 / 6.1.1): masters and
    /// equals get packet-ins of no-match and action, every port-status and
    /// flow-removed; slaves only port-status.
    fn default() -> AsyncConfig {
        AsyncConfig {
            packet_in: [0b011, 0],
            port_status: [0b111, 0b111],
            flow_removed: [0b1111, 0],
        }
    }
}

/// A message a switch receives (or, for hello/error/echo, either side).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Versions from the bitmap element, if the hello carried one (bit n =
    /// version n, versions 0..=31).
    Hello(Option<u32>),
    /// An error message (`OFPT_ERROR`).
    Error {
        /// Error type (`et::*`).
        kind: u16,
        /// Error code, per type (`brc::*`, `bac::*`, ...).
        code: u16,
        /// What the type says; for most, the start of the message that
        /// failed.
        data: Vec<u8>,
    },
    /// An echo request with its arbitrary payload.
    EchoRequest(Vec<u8>),
    /// An echo reply with the payload of the request.
    EchoReply(Vec<u8>),
    /// Asks for the datapath id, buffer and table counts and capabilities.
    FeaturesRequest,
    /// Asks for the switch configuration (flags, `miss_send_len`).
    GetConfigRequest,
    /// Sets the switch configuration.
    SetConfig {
        /// `OFPC_FRAG_*` (IP fragment handling); only bits 0 and 1 are accepted.
        flags: u16,
        /// Bytes of a frame sent in a packet-in (`OFPCML_NO_BUFFER`: the whole
        /// frame).
        miss_send_len: u16,
    },
    /// Adds, modifies or deletes flows.
    FlowMod(FlowMod),
    /// A multipart (statistics or description) request.
    Multipart {
        /// `OFPMPF_REQ_MORE` if more parts of the request follow.
        flags: u16,
        /// What is asked.
        req: MultipartRequest,
    },
    /// Asks for a reply once every earlier message is processed.
    BarrierRequest,
    /// Sends a frame through a list of actions.
    PacketOut(PacketOut),
    /// Adds, modifies or deletes a group.
    GroupMod(crate::group::GroupMod),
    /// `OFPT_ROLE_REQUEST` (`role::*`).
    RoleRequest {
        /// The role asked for (`role::*`).
        role: u32,
        /// The controllers' election generation; a master or slave request
        /// with an older one than seen before is refused as stale.
        generation_id: u64,
    },
    /// Asks for the connection's asynchronous message filter.
    GetAsyncRequest,
    /// Sets the connection's asynchronous message filter.
    SetAsync(AsyncConfig),
    /// `OFPT_METER_MOD`.
    MeterMod(crate::meter::MeterMod),
}

/// Decodes one whole message `b` (exactly its header's length). A hello is
/// accepted at any version (negotiation is [`negotiate`]'s); anything else
/// must be version 4.
pub fn decode(b: &[u8]) -> Result<(Header, Message), OfpError> {
    let h = Header::peek(b).ok_or(OfpError::bad_len())?;
    if h.length as usize != b.len() {
        return Err(OfpError::bad_len());
    }
    if h.kind != t::HELLO && h.version != VERSION {
        return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_VERSION));
    }
    let mut r = Reader::new(&b[HEADER_LEN..]);
    let e = OfpError::bad_len();
    let empty = |r: &Reader<'_>| if r.is_empty() { Ok(()) } else { Err(e) };
    let m = match h.kind {
        t::HELLO => {
            let mut bitmap = None;
            // Elements (section 7.5.1); unknown ones are ignored, and an
            // old-version hello may have any body.
            while r.len() >= 4 {
                let ty = r.u16(e)?;
                let len = r.u16(e)? as usize;
                if len < 4 {
                    break;
                }
                let Ok(body) = r.take(len - 4, e) else { break };
                if ty == 1 && body.len() >= 4 {
                    bitmap = Some(u32::from_be_bytes([body[0], body[1], body[2], body[3]]));
                }
                let pad = len.div_ceil(8) * 8 - len;
                if r.take(pad, e).is_err() {
                    break;
                }
            }
            Message::Hello(bitmap)
        }
        t::ERROR => Message::Error {
            kind: r.u16(e)?,
            code: r.u16(e)?,
            data: r.rest().to_vec(),
        },
        t::ECHO_REQUEST => Message::EchoRequest(r.rest().to_vec()),
        t::ECHO_REPLY => Message::EchoReply(r.rest().to_vec()),
        t::FEATURES_REQUEST => {
            empty(&r)?;
            Message::FeaturesRequest
        }
        t::GET_CONFIG_REQUEST => {
            empty(&r)?;
            Message::GetConfigRequest
        }
        t::SET_CONFIG => {
            let flags = r.u16(e)?;
            let miss_send_len = r.u16(e)?;
            empty(&r)?;
            if flags & !3 != 0 {
                return Err(OfpError::new(et::SWITCH_CONFIG_FAILED, scfc::BAD_FLAGS));
            }
            Message::SetConfig {
                flags,
                miss_send_len,
            }
        }
        t::FLOW_MOD => Message::FlowMod(decode_flow_mod(&mut r)?),
        t::GROUP_MOD => Message::GroupMod(crate::group::decode_group_mod(&mut r)?),
        t::ROLE_REQUEST => {
            let role = r.u32(e)?;
            r.take(4, e)?;
            let generation_id = r.u64(e)?;
            empty(&r)?;
            Message::RoleRequest {
                role,
                generation_id,
            }
        }
        t::GET_ASYNC_REQUEST => {
            empty(&r)?;
            Message::GetAsyncRequest
        }
        t::SET_ASYNC => {
            let mut m = [0u32; 6];
            for x in m.iter_mut() {
                *x = r.u32(e)?;
            }
            empty(&r)?;
            Message::SetAsync(AsyncConfig {
                packet_in: [m[0], m[1]],
                port_status: [m[2], m[3]],
                flow_removed: [m[4], m[5]],
            })
        }
        t::METER_MOD => Message::MeterMod(crate::meter::decode_meter_mod(&mut r)?),
        t::MULTIPART_REQUEST => {
            let (flags, req) = decode_multipart(&mut r)?;
            Message::Multipart { flags, req }
        }
        t::BARRIER_REQUEST => {
            empty(&r)?;
            Message::BarrierRequest
        }
        t::PACKET_OUT => {
            let buffer_id = r.u32(e)?;
            let in_port = r.u32(e)?;
            let alen = r.u16(e)? as usize;
            r.take(6, e)?;
            let actions = decode_actions(r.take(alen, e)?)?;
            Message::PacketOut(PacketOut {
                buffer_id,
                in_port,
                actions,
                data: r.rest().to_vec(),
            })
        }
        t::EXPERIMENTER => return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_EXPERIMENTER)),
        _ => return Err(OfpError::new(et::BAD_REQUEST, brc::BAD_TYPE)),
    };
    Ok((h, m))
}

/// The version to speak after the peer's hello (section 6.3.1): with a
/// bitmap, the highest version both have; without, the lower of the two
/// header versions. Only version 4 is spoken here.
pub fn negotiate(peer_version: u8, bitmap: Option<u32>) -> Result<u8, OfpError> {
    let ok = match bitmap {
        Some(b) => b & (1 << VERSION) != 0,
        None => peer_version >= VERSION,
    };
    if ok {
        Ok(VERSION)
    } else {
        Err(OfpError::new(et::HELLO_FAILED, hfc::INCOMPATIBLE))
    }
}
