//! Encoding of the messages a switch sends.

use crate::consts::*;
use crate::decode::{Action, AsyncConfig, Instruction, Oxm};

/// Message builder: header first, length patched by [`Msg::finish`].
pub struct Msg(Vec<u8>);

impl Msg {
    /// A message of type `kind` with transaction id `xid`.
    pub fn new(kind: u8, xid: u32) -> Msg {
        let mut v = Vec::with_capacity(64);
        v.extend_from_slice(&[VERSION, kind, 0, 0]);
        v.extend_from_slice(&xid.to_be_bytes());
        Msg(v)
    }
    /// Appends one byte.
    pub fn u8(&mut self, x: u8) -> &mut Msg {
        self.0.push(x);
        self
    }
    /// Appends `x` in network byte order (2 bytes).
    pub fn u16(&mut self, x: u16) -> &mut Msg {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    /// Appends `x` in network byte order (4 bytes).
    pub fn u32(&mut self, x: u32) -> &mut Msg {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    /// Appends `x` in network byte order (8 bytes).
    pub fn u64(&mut self, x: u64) -> &mut Msg {
        self.0.extend_from_slice(&x.to_be_bytes());
        self
    }
    /// Appends `b` as is.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Msg {
        self.0.extend_from_slice(b);
        self
    }
    /// Appends `n` zero bytes (padding, reserved fields).
    pub fn zeros(&mut self, n: usize) -> &mut Msg {
        self.0.resize(self.0.len() + n, 0);
        self
    }
    /// `s` in a NUL-padded field of `n` bytes (cut to leave one NUL).
    pub fn str(&mut self, s: &str, n: usize) -> &mut Msg {
        let b = s.as_bytes();
        let k = b.len().min(n.saturating_sub(1));
        self.bytes(&b[..k]).zeros(n - k)
    }
    /// Bytes so far (header included).
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Nothing but the header.
    pub fn is_empty(&self) -> bool {
        self.0.len() <= HEADER_LEN
    }
    /// The message with its length set (callers keep messages under 64 KiB).
    pub fn finish(mut self) -> Vec<u8> {
        let n = self.0.len().min(MAX_LEN) as u16;
        self.0[2..4].copy_from_slice(&n.to_be_bytes());
        self.0
    }
}

/// `OFPT_HELLO` with a version bitmap element offering version 4 only.
pub fn hello(xid: u32) -> Vec<u8> {
    let mut m = Msg::new(t::HELLO, xid);
    m.u16(1).u16(8).u32(1 << VERSION);
    m.finish()
}

/// `OFPT_ERROR` answering the message `offending` (at least its first 64
/// bytes are echoed, as the spec asks).
pub fn error(xid: u32, kind: u16, code: u16, offending: &[u8]) -> Vec<u8> {
    let mut m = Msg::new(t::ERROR, xid);
    m.u16(kind).u16(code);
    m.bytes(&offending[..offending.len().min(64)]);
    m.finish()
}

/// `OFPT_ECHO_REPLY` carrying the request's data.
pub fn echo_reply(xid: u32, data: &[u8]) -> Vec<u8> {
    let mut m = Msg::new(t::ECHO_REPLY, xid);
    m.bytes(&data[..data.len().min(MAX_LEN - HEADER_LEN)]);
    m.finish()
}

/// `OFPT_ECHO_REQUEST` (keep-alive of the active side).
pub fn echo_request(xid: u32) -> Vec<u8> {
    Msg::new(t::ECHO_REQUEST, xid).finish()
}

/// `OFPT_BARRIER_REPLY`.
pub fn barrier_reply(xid: u32) -> Vec<u8> {
    Msg::new(t::BARRIER_REPLY, xid).finish()
}

/// Capability bits of the features reply (`enum ofp_capabilities`).
pub mod cap {
    /// `OFPC_FLOW_STATS`: flow statistics.
    pub const FLOW_STATS: u32 = 1 << 0;
    /// `OFPC_TABLE_STATS`: table statistics.
    pub const TABLE_STATS: u32 = 1 << 1;
    /// `OFPC_PORT_STATS`: port statistics.
    pub const PORT_STATS: u32 = 1 << 2;
    /// `OFPC_GROUP_STATS`: group statistics.
    pub const GROUP_STATS: u32 = 1 << 3;
}

/// `OFPT_FEATURES_REPLY`.
pub fn features_reply(xid: u32, dpid: u64, n_buffers: u32, n_tables: u8, caps: u32) -> Vec<u8> {
    let mut m = Msg::new(t::FEATURES_REPLY, xid);
    m.u64(dpid).u32(n_buffers).u8(n_tables).u8(0).zeros(2);
    m.u32(caps).u32(0);
    m.finish()
}

/// `OFPT_GET_CONFIG_REPLY`.
pub fn get_config_reply(xid: u32, flags: u16, miss_send_len: u16) -> Vec<u8> {
    let mut m = Msg::new(t::GET_CONFIG_REPLY, xid);
    m.u16(flags).u16(miss_send_len);
    m.finish()
}

/// `OFPT_ROLE_REPLY`.
pub fn role_reply(xid: u32, role: u32, generation_id: u64) -> Vec<u8> {
    let mut m = Msg::new(t::ROLE_REPLY, xid);
    m.u32(role).zeros(4).u64(generation_id);
    m.finish()
}

/// `OFPT_GET_ASYNC_REPLY`.
pub fn get_async_reply(xid: u32, c: &AsyncConfig) -> Vec<u8> {
    let mut m = Msg::new(t::GET_ASYNC_REPLY, xid);
    for v in [c.packet_in, c.port_status, c.flow_removed] {
        m.u32(v[0]).u32(v[1]);
    }
    m.finish()
}

/// Appends a `struct ofp_match` (OXM, padded to 8 bytes).
pub fn put_match(m: &mut Msg, fields: &[Oxm]) {
    let start = m.len();
    m.u16(1).u16(0);
    for o in fields {
        put_oxm(m, o);
    }
    let len = m.len() - start;
    m.0[start + 2..start + 4].copy_from_slice(&(len as u16).to_be_bytes());
    m.zeros(len.div_ceil(8) * 8 - len);
}

fn put_oxm(m: &mut Msg, o: &Oxm) {
    let size = oxm::shape(o.field).map_or(0, |s| s.0) as usize;
    m.u16(oxm::CLASS_BASIC);
    m.u8((o.field << 1) | o.mask.is_some() as u8);
    m.u8((size * if o.mask.is_some() { 2 } else { 1 }) as u8);
    m.bytes(&o.value.to_be_bytes()[16 - size..]);
    if let Some(k) = o.mask {
        m.bytes(&k.to_be_bytes()[16 - size..]);
    }
}

/// Appends an action list.
pub fn put_actions(m: &mut Msg, acts: &[Action]) {
    for a in acts {
        match *a {
            Action::Output { port, max_len } => {
                m.u16(at::OUTPUT).u16(16).u32(port).u16(max_len).zeros(6);
            }
            Action::Group(g) => {
                m.u16(at::GROUP).u16(8).u32(g);
            }
            Action::PushVlan(tpid) => {
                m.u16(at::PUSH_VLAN).u16(8).u16(tpid).zeros(2);
            }
            Action::PopVlan => {
                m.u16(at::POP_VLAN).u16(8).zeros(4);
            }
            Action::DecNwTtl => {
                m.u16(at::DEC_NW_TTL).u16(8).zeros(4);
            }
            Action::SetNwTtl(ttl) => {
                m.u16(at::SET_NW_TTL).u16(8).u8(ttl).zeros(3);
            }
            Action::PushMpls(t) => {
                m.u16(at::PUSH_MPLS).u16(8).u16(t).zeros(2);
            }
            Action::PopMpls(t) => {
                m.u16(at::POP_MPLS).u16(8).u16(t).zeros(2);
            }
            Action::SetMplsTtl(ttl) => {
                m.u16(at::SET_MPLS_TTL).u16(8).u8(ttl).zeros(3);
            }
            Action::DecMplsTtl => {
                m.u16(at::DEC_MPLS_TTL).u16(8).zeros(4);
            }
            Action::CopyTtlOut => {
                m.u16(at::COPY_TTL_OUT).u16(8).zeros(4);
            }
            Action::CopyTtlIn => {
                m.u16(at::COPY_TTL_IN).u16(8).zeros(4);
            }
            Action::SetField(o) => {
                let size = oxm::shape(o.field).map_or(0, |s| s.0) as usize;
                let len = (4 + 4 + size).div_ceil(8) * 8;
                m.u16(at::SET_FIELD).u16(len as u16);
                put_oxm(m, &Oxm { mask: None, ..o });
                m.zeros(len - 8 - size);
            }
        }
    }
}

/// Appends instructions.
pub fn put_instructions(m: &mut Msg, insts: &[Instruction]) {
    for i in insts {
        match i {
            Instruction::GotoTable(t) => {
                m.u16(it::GOTO_TABLE).u16(8).u8(*t).zeros(3);
            }
            Instruction::WriteMetadata(v, k) => {
                m.u16(it::WRITE_METADATA).u16(24).zeros(4).u64(*v).u64(*k);
            }
            Instruction::WriteActions(a) | Instruction::ApplyActions(a) => {
                let start = m.len();
                m.u16(i.kind()).u16(0).zeros(4);
                put_actions(m, a);
                let len = (m.len() - start) as u16;
                m.0[start + 2..start + 4].copy_from_slice(&len.to_be_bytes());
            }
            Instruction::ClearActions => {
                m.u16(it::CLEAR_ACTIONS).u16(8).zeros(4);
            }
            Instruction::Meter(id) => {
                m.u16(it::METER).u16(8).u32(*id);
            }
        }
    }
}

/// `struct ofp_meter_features`: `max_meter` meters (0: none), band types,
/// capabilities, bands and colours per meter.
pub fn meter_features_body(
    max_meter: u32,
    band_types: u32,
    capabilities: u32,
    max_bands: u8,
    max_color: u8,
) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(16));
    m.u32(max_meter)
        .u32(band_types)
        .u32(capabilities)
        .u8(max_bands)
        .u8(max_color)
        .zeros(2);
    m.0
}

/// Splits multipart reply bodies (`parts`, each one whole entry) into
/// `OFPT_MULTIPART_REPLY` messages of type `ty`, every one but the last
/// flagged `OFPMPF_REPLY_MORE`. An entry alone larger than a message is
/// left out (no entry built here comes near that).
pub fn multipart_reply(xid: u32, ty: u16, parts: &[Vec<u8>]) -> Vec<Vec<u8>> {
    const ROOM: usize = MAX_LEN - HEADER_LEN - 8;
    let mut msgs: Vec<Msg> = Vec::new();
    let mut cur = Msg::new(t::MULTIPART_REPLY, xid);
    cur.u16(ty).u16(0).zeros(4);
    let fresh = |ty: u16| {
        let mut m = Msg::new(t::MULTIPART_REPLY, xid);
        m.u16(ty).u16(0).zeros(4);
        m
    };
    for p in parts {
        if p.len() > ROOM {
            continue;
        }
        if cur.len() + p.len() > MAX_LEN {
            msgs.push(std::mem::replace(&mut cur, fresh(ty)));
        }
        cur.bytes(p);
    }
    msgs.push(cur);
    let n = msgs.len();
    msgs.into_iter()
        .enumerate()
        .map(|(i, mut m)| {
            if i + 1 < n {
                m.0[10..12].copy_from_slice(&mp::MORE.to_be_bytes());
            }
            m.finish()
        })
        .collect()
}

/// Body of a desc reply (`struct ofp_desc`).
pub fn desc_body(mfr: &str, hw: &str, sw: &str, serial: &str, dp: &str) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(1056));
    m.str(mfr, 256)
        .str(hw, 256)
        .str(sw, 256)
        .str(serial, 32)
        .str(dp, 256);
    m.0
}

/// One flow's statistics (`struct ofp_flow_stats`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FlowStats {
    /// Table the flow is in.
    pub table_id: u8,
    /// Whole seconds since the flow was installed.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
    /// The flow's priority.
    pub priority: u16,
    /// Idle timeout in seconds (0: none).
    pub idle_timeout: u16,
    /// Hard timeout in seconds (0: none).
    pub hard_timeout: u16,
    /// `OFPFF_*` the flow was added with.
    pub flags: u16,
    /// The controller's cookie of the flow.
    pub cookie: u64,
    /// Packets that matched the flow.
    pub packet_count: u64,
    /// Bytes of those packets.
    pub byte_count: u64,
    /// The flow's match (OXM fields).
    pub matches: Vec<Oxm>,
    /// The flow's instructions.
    pub instructions: Vec<Instruction>,
}

/// Body entry of a flow stats reply.
pub fn flow_stats_entry(f: &FlowStats) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(128));
    m.u16(0)
        .u8(f.table_id)
        .u8(0)
        .u32(f.duration_sec)
        .u32(f.duration_nsec);
    m.u16(f.priority)
        .u16(f.idle_timeout)
        .u16(f.hard_timeout)
        .u16(f.flags)
        .zeros(4);
    m.u64(f.cookie).u64(f.packet_count).u64(f.byte_count);
    put_match(&mut m, &f.matches);
    put_instructions(&mut m, &f.instructions);
    let n = m.len() as u16;
    m.0[0..2].copy_from_slice(&n.to_be_bytes());
    m.0
}

/// What one table supports, for a table features reply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TableFeatures {
    /// The table's number.
    pub table_id: u8,
    /// Its name (at most 31 bytes are sent).
    pub name: String,
    /// Most flows it holds.
    pub max_entries: u32,
    /// `OFPIT_*` the table takes.
    pub instructions: Vec<u16>,
    /// Tables a goto may name.
    pub next_tables: Vec<u8>,
    /// `OFPAT_*` of apply-actions.
    pub apply_actions: Vec<u16>,
    /// `OFPAT_*` of write-actions (the action set).
    pub write_actions: Vec<u16>,
    /// OXM fields the table matches (all may be wildcarded).
    pub matches: Vec<u8>,
    /// OXM fields set-field may write (apply-actions).
    pub set_fields: Vec<u8>,
    /// OXM fields set-field may write in write-actions.
    pub write_set_fields: Vec<u8>,
}

/// Body entry of a table features reply (`struct ofp_table_features` and
/// the eight properties a reply must have: instructions, next tables,
/// write actions, apply actions, match, wildcards, write and apply
/// set-field).
pub fn table_features_entry(f: &TableFeatures) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(512));
    m.u16(0).u8(f.table_id).zeros(5).str(&f.name, 32);
    m.u64(0).u64(0).u32(0).u32(f.max_entries);
    let prop = |m: &mut Msg, ty: u16, body: &dyn Fn(&mut Msg)| {
        let start = m.len();
        m.u16(ty).u16(0);
        body(m);
        let len = m.len() - start;
        m.0[start + 2..start + 4].copy_from_slice(&(len as u16).to_be_bytes());
        m.zeros(len.div_ceil(8) * 8 - len);
    };
    let oxms = |m: &mut Msg, fields: &[u8]| {
        for &x in fields {
            let size = oxm::shape(x).map_or(0, |s| s.0);
            m.u16(oxm::CLASS_BASIC).u8(x << 1).u8(size);
        }
    };
    prop(&mut m, 0, &|m| {
        for &i in &f.instructions {
            m.u16(i).u16(4);
        }
    });
    prop(&mut m, 2, &|m| {
        m.bytes(&f.next_tables);
    });
    prop(&mut m, 4, &|m| {
        for &a in &f.write_actions {
            m.u16(a).u16(4);
        }
    });
    prop(&mut m, 6, &|m| {
        for &a in &f.apply_actions {
            m.u16(a).u16(4);
        }
    });
    prop(&mut m, 8, &|m| oxms(m, &f.matches));
    prop(&mut m, 10, &|m| oxms(m, &f.matches));
    prop(&mut m, 12, &|m| oxms(m, &f.write_set_fields));
    prop(&mut m, 14, &|m| oxms(m, &f.set_fields));
    let n = m.len() as u16;
    m.0[0..2].copy_from_slice(&n.to_be_bytes());
    m.0
}

/// Body of an aggregate stats reply.
pub fn aggregate_body(packets: u64, bytes: u64, flows: u32) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(24));
    m.u64(packets).u64(bytes).u32(flows).zeros(4);
    m.0
}

/// Body entry of a table stats reply.
pub fn table_stats_entry(table: u8, active: u32, lookups: u64, matched: u64) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(24));
    m.u8(table).zeros(3).u32(active).u64(lookups).u64(matched);
    m.0
}

/// A port's counters (`struct ofp_port_stats`); unknown ones are all ones
/// on the wire as the spec asks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortStats {
    /// OpenFlow port number.
    pub port_no: u32,
    /// Frames received.
    pub rx_packets: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Received frames dropped.
    pub rx_dropped: u64,
    /// Frames dropped on their way out.
    pub tx_dropped: u64,
    /// Whole seconds the port has been alive.
    pub duration_sec: u32,
    /// Nanoseconds beyond `duration_sec`.
    pub duration_nsec: u32,
}

/// Body entry of a port stats reply.
pub fn port_stats_entry(p: &PortStats) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(112));
    m.u32(p.port_no).zeros(4);
    m.u64(p.rx_packets)
        .u64(p.tx_packets)
        .u64(p.rx_bytes)
        .u64(p.tx_bytes);
    m.u64(p.rx_dropped).u64(p.tx_dropped);
    for _ in 0..6 {
        m.u64(u64::MAX); // errors, frame, overrun, crc, collisions: not counted
    }
    m.u32(p.duration_sec).u32(p.duration_nsec);
    m.0
}

/// A port's description (`struct ofp_port`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PortDesc {
    /// OpenFlow port number.
    pub port_no: u32,
    /// The port's MAC address.
    pub hw_addr: [u8; 6],
    /// Its name (at most 15 bytes are sent).
    pub name: String,
    /// `OFPPC_*`.
    pub config: u32,
    /// `OFPPS_*` (`OFPPS_LINK_DOWN` = 1, `OFPPS_LIVE` = 4).
    pub state: u32,
    /// Speed in kbit/s, sent as both current and maximum speed.
    pub curr_speed_kbps: u32,
}

/// `struct ofp_port` (64 bytes).
pub fn port_entry(p: &PortDesc) -> Vec<u8> {
    let mut m = Msg(Vec::with_capacity(64));
    m.u32(p.port_no)
        .zeros(4)
        .bytes(&p.hw_addr)
        .zeros(2)
        .str(&p.name, 16);
    m.u32(p.config).u32(p.state);
    m.u32(0).u32(0).u32(0).u32(0); // curr, advertised, supported, peer features
    m.u32(p.curr_speed_kbps).u32(p.curr_speed_kbps);
    m.0
}

/// `OFPT_PORT_STATUS` (reason: 0 add, 1 delete, 2 modify).
pub fn port_status(xid: u32, reason: u8, p: &PortDesc) -> Vec<u8> {
    let mut m = Msg::new(t::PORT_STATUS, xid);
    m.u8(reason).zeros(7).bytes(&port_entry(p));
    m.finish()
}

/// `OFPT_PACKET_IN` (reason: 0 no match, 1 action, 2 invalid TTL); `data`
/// is cut to fit one message.
#[allow(clippy::too_many_arguments)]
pub fn packet_in(
    xid: u32,
    buffer_id: u32,
    total_len: u16,
    reason: u8,
    table_id: u8,
    cookie: u64,
    matches: &[Oxm],
    data: &[u8],
) -> Vec<u8> {
    let mut m = Msg::new(t::PACKET_IN, xid);
    m.u32(buffer_id)
        .u16(total_len)
        .u8(reason)
        .u8(table_id)
        .u64(cookie);
    put_match(&mut m, matches);
    m.zeros(2);
    let room = MAX_LEN.saturating_sub(m.len());
    m.bytes(&data[..data.len().min(room)]);
    m.finish()
}

/// `OFPT_FLOW_REMOVED` (reason: 0 idle timeout, 1 hard timeout, 2 delete,
/// 3 group delete).
pub fn flow_removed(xid: u32, f: &FlowStats, reason: u8) -> Vec<u8> {
    let mut m = Msg::new(t::FLOW_REMOVED, xid);
    m.u64(f.cookie).u16(f.priority).u8(reason).u8(f.table_id);
    m.u32(f.duration_sec).u32(f.duration_nsec);
    m.u16(f.idle_timeout).u16(f.hard_timeout);
    m.u64(f.packet_count).u64(f.byte_count);
    put_match(&mut m, &f.matches);
    m.finish()
}

/// Encodes a flow-mod (what a controller sends; for tests and tools).
pub fn flow_mod(xid: u32, f: &crate::decode::FlowMod) -> Vec<u8> {
    let mut m = Msg::new(t::FLOW_MOD, xid);
    m.u64(f.cookie)
        .u64(f.cookie_mask)
        .u8(f.table_id)
        .u8(f.command);
    m.u16(f.idle_timeout).u16(f.hard_timeout).u16(f.priority);
    m.u32(f.buffer_id)
        .u32(f.out_port)
        .u32(f.out_group)
        .u16(f.flags)
        .zeros(2);
    put_match(&mut m, &f.matches);
    put_instructions(&mut m, &f.instructions);
    m.finish()
}
