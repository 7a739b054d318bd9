//! Frame templates and the per-frame stamp, and the receiver's parse.
//!
//! At start one template per distinct frame size is built with
//! `wire::build::write_udp_frame` (Ethernet [+ 802.1Q] + IPv4/IPv6 + UDP +
//! the payload header, zero padding after it). Per frame only the variable
//! bytes are written in place: the payload header's stream id, sequence
//! number and timestamp, and the header fields the flow index varies. The
//! checksums are updated from precomputed sums: each template keeps the
//! ones'-complement sum of its UDP checksum coverage (pseudo-header
//! included) and of its IPv4 header with every variable byte range zeroed;
//! per frame the sums of the variable ranges (at most 20 + 4 + 32 bytes) are
//! added and folded. No allocation, no pass over the payload.
//!
//! The receiver's [`parse`] is bounds-checked all the way (`new_checked`
//! views of wire): anything that is not Ethernet[/VLAN]/IPv4|IPv6/UDP
//! carrying the magic is reported as foreign, never half-parsed.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use wire::build::{write_udp_frame, IpPair, Layout, UdpFrameSpec};
use wire::checksum;
use wire::ethernet::{self, parse_tags};
use wire::ipv4::proto;
use wire::payload::{self, Header};
use wire::{ipv4, ipv6, udp, EtherType, MacAddr};

use crate::cli::VaryField;

/// The 7:4:1 IMIX of 64/570/1518 B, interleaved so the mix holds over short
/// windows too.
pub const IMIX: [u32; 12] = [64, 570, 64, 1518, 64, 570, 64, 570, 64, 64, 570, 64];

/// Stream ids carried by measured frames are `0..=MAX_STREAM`; the high bit
/// of the 16-bit stream field marks warm-up frames (docs/turnout-gen.md).
pub const MAX_STREAM: u32 = payload::MAX_STREAM >> 1;
/// Bit of the stream field marking a warm-up frame.
pub const WARMUP_BIT: u32 = MAX_STREAM + 1;

/// Bytes of the payload header after the magic: stream id, sequence
/// number, timestamp (what changes per frame).
const VAR: std::ops::Range<usize> = 4..payload::HEADER_LEN;

/// What the frames look like.
#[derive(Clone, Debug)]
pub struct FrameSpec {
    /// Ethernet source of flow 0.
    pub src_mac: MacAddr,
    /// Ethernet destination of flow 0.
    pub dst_mac: MacAddr,
    /// IP source of flow 0 (the family selects IPv4/IPv6).
    pub src_ip: IpAddr,
    /// IP destination of flow 0.
    pub dst_ip: IpAddr,
    /// UDP source port of flow 0.
    pub src_port: u16,
    /// UDP destination port of flow 0.
    pub dst_port: u16,
    /// 802.1Q VLAN id.
    pub vlan: Option<u16>,
    /// Number of flows.
    pub flows: u32,
    /// Fields the flow index is added to.
    pub vary: Vec<VaryField>,
}

/// Why a template cannot be built.
#[derive(Debug, PartialEq, Eq)]
pub enum FrameError {
    /// IPv4 and IPv6 addresses mixed.
    MixedFamilies,
    /// The frame is smaller than its headers plus the payload header.
    TooSmall {
        /// Requested size.
        size: u32,
        /// Smallest size that holds the headers.
        min: u32,
    },
    /// wire refused the header (VLAN id 4095).
    Wire(wire::Error),
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::MixedFamilies => {
                write!(f, "source and destination IP must be of the same family (both IPv4, or both IPv6 with --ipv6)")
            }
            FrameError::TooSmall { size, min } => write!(
                f,
                "frame size {size} B cannot hold these headers and the {}-byte payload header: the minimum is {min} B",
                payload::HEADER_LEN
            ),
            FrameError::Wire(e) => write!(f, "cannot build the frame: {e}"),
        }
    }
}

impl FrameSpec {
    fn ip_pair(&self) -> Result<IpPair, FrameError> {
        match (self.src_ip, self.dst_ip) {
            (IpAddr::V4(s), IpAddr::V4(d)) => Ok(IpPair::V4(s, d)),
            (IpAddr::V6(s), IpAddr::V6(d)) => Ok(IpPair::V6(s, d)),
            _ => Err(FrameError::MixedFamilies),
        }
    }

    fn wire_spec(&self) -> Result<UdpFrameSpec, FrameError> {
        let mut s = UdpFrameSpec::new(
            self.src_mac,
            self.dst_mac,
            self.ip_pair()?,
            self.src_port,
            self.dst_port,
        );
        s.vlan = self.vlan;
        Ok(s)
    }

    /// Smallest frame that holds the headers and the payload header.
    pub fn min_size(&self) -> Result<u32, FrameError> {
        Ok((self.wire_spec()?.header_len() + payload::HEADER_LEN) as u32)
    }

    fn varies(&self, f: VaryField) -> bool {
        self.flows > 1 && self.vary.contains(&f)
    }
}

/// One pre-built frame of one size.
struct Template {
    buf: Box<[u8]>,
    layout: Layout,
    /// UDP coverage sum with variable ranges and the checksum zeroed.
    udp_base: u64,
    /// IPv4 header sum with the addresses and checksum zeroed (if IPs vary).
    ip_base: u64,
}

/// Stamps frames from templates: the sender's only per-frame work.
///
/// A frame is stamped either in the template's own buffer ([`FrameGen::next`],
/// then copied by the port) or in place, in a port's transmit buffer
/// ([`FrameGen::next_into`]): a buffer that still holds the template from
/// the last frame written into it gets only the variable bytes; any other
/// gets the whole template first. Either way the frame's bytes are the same:
/// every variable byte is rewritten for every frame.
pub struct FrameGen {
    templates: Vec<Template>,
    /// Template index per position of the size pattern.
    pattern: Vec<u8>,
    pos: usize,
    flow: u32,
    flows: u32,
    vary: Vary,
    /// Tag of template 0 in port buffers (`TxFill`); template `i` is
    /// `tag_base + i`. Unique per generator of this process, never 0.
    tag_base: u64,
}

/// Which fields vary with the flow index, and from what.
#[derive(Clone, Copy, Debug)]
struct Vary {
    ports: bool,
    ips: bool,
    macs: bool,
    base_ports: (u16, u16),
    step_ports: (u16, u16),
    base_ip: IpPair,
    step_ips: (bool, bool),
    base_macs: (u64, u64),
    step_macs: (bool, bool),
}

/// Tag bases handed out so far, in units of 256 (one per possible
/// template of a generator).
static TAGS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

impl FrameGen {
    /// Builds one template per distinct size in `sizes` (the pattern the
    /// generator cycles through).
    pub fn new(spec: &FrameSpec, sizes: &[u32]) -> Result<Self, FrameError> {
        let ws = spec.wire_spec()?;
        let min = spec.min_size()?;
        let mut distinct: Vec<u32> = Vec::new();
        let mut pattern = Vec::with_capacity(sizes.len());
        for &s in sizes {
            if s < min {
                return Err(FrameError::TooSmall { size: s, min });
            }
            let i = match distinct.iter().position(|&d| d == s) {
                Some(i) => i,
                None => {
                    distinct.push(s);
                    distinct.len() - 1
                }
            };
            pattern.push(i as u8);
        }
        assert!(distinct.len() <= 256, "at most 256 distinct sizes");
        let vary_ports = spec.varies(VaryField::SrcPort) || spec.varies(VaryField::DstPort);
        let vary_ips = spec.varies(VaryField::SrcIp) || spec.varies(VaryField::DstIp);
        let vary_macs = spec.varies(VaryField::SrcMac) || spec.varies(VaryField::DstMac);
        let mut templates = Vec::with_capacity(distinct.len());
        for &size in &distinct {
            let mut buf = vec![0u8; size as usize].into_boxed_slice();
            let layout = write_udp_frame(&ws, &mut buf, size as usize).map_err(FrameError::Wire)?;
            Header::new_unchecked(&mut buf[layout.payload_offset..]).init(0);
            let mut t = Template {
                buf,
                layout,
                udp_base: 0,
                ip_base: 0,
            };
            t.compute_bases(vary_ports, vary_ips);
            templates.push(t);
        }
        Ok(Self {
            templates,
            pattern,
            pos: 0,
            flow: 0,
            flows: spec.flows.max(1),
            vary: Vary {
                ports: vary_ports,
                ips: vary_ips,
                macs: vary_macs,
                base_ports: (spec.src_port, spec.dst_port),
                step_ports: (
                    spec.varies(VaryField::SrcPort) as u16,
                    spec.varies(VaryField::DstPort) as u16,
                ),
                base_ip: ws.ip,
                step_ips: (spec.varies(VaryField::SrcIp), spec.varies(VaryField::DstIp)),
                base_macs: (spec.src_mac.to_u64(), spec.dst_mac.to_u64()),
                step_macs: (
                    spec.varies(VaryField::SrcMac),
                    spec.varies(VaryField::DstMac),
                ),
            },
            tag_base: TAGS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) << 8,
        })
    }

    /// The distinct sizes, in the order templates were built.
    pub fn template_sizes(&self) -> Vec<usize> {
        self.templates.iter().map(|t| t.buf.len()).collect()
    }

    /// Template index of the next frame.
    #[inline]
    pub fn peek_template(&self, ahead: usize) -> usize {
        self.pattern[(self.pos + ahead) % self.pattern.len()] as usize
    }

    /// Flow index of the frame `ahead` frames from the next.
    #[inline]
    pub fn peek_flow(&self, ahead: usize) -> u32 {
        ((self.flow as usize + ahead) % self.flows as usize) as u32
    }

    /// Stamps the next frame (stream word, sequence number, timestamp, flow
    /// fields, checksums) and returns it, advancing the size pattern and the
    /// flow index.
    #[inline]
    pub fn next(&mut self, stream_word: u32, seq: u64, ts_ns: u64) -> &[u8] {
        let (ti, flow) = self.advance();
        let Self {
            templates, vary, ..
        } = self;
        let t = &mut templates[ti];
        let (l, udp_base, ip_base) = (t.layout, t.udp_base, t.ip_base);
        stamp(
            vary,
            &l,
            udp_base,
            ip_base,
            &mut t.buf,
            flow,
            stream_word,
            seq,
            ts_ns,
        );
        &t.buf[..]
    }

    /// Writes the next frame into `buf` in place and returns its length:
    /// as [`FrameGen::next`], but when `*tag` says `buf` already holds this
    /// frame's template (this generator wrote it there), only the variable
    /// bytes are written; otherwise the whole template first, and `*tag`
    /// is set. A frame longer than `buf` is not written (`buf` and `*tag`
    /// left alone); its length is returned all the same.
    #[inline]
    pub fn next_into(
        &mut self,
        buf: &mut [u8],
        tag: &mut u64,
        stream_word: u32,
        seq: u64,
        ts_ns: u64,
    ) -> usize {
        let (ti, flow) = self.advance();
        let t = &self.templates[ti];
        let len = t.buf.len();
        let Some(dst) = buf.get_mut(..len) else {
            return len;
        };
        let want = self.tag_base + ti as u64;
        if *tag != want {
            dst.copy_from_slice(&t.buf);
            *tag = want;
        }
        stamp(
            &self.vary,
            &t.layout,
            t.udp_base,
            t.ip_base,
            dst,
            flow,
            stream_word,
            seq,
            ts_ns,
        );
        len
    }

    /// Passes over the next frame (one that will not be sent): advances
    /// the size pattern and the flow index as [`FrameGen::next`] does and
    /// returns the frame's length.
    #[inline]
    pub fn skip(&mut self) -> usize {
        let (ti, _) = self.advance();
        self.templates[ti].buf.len()
    }

    /// The next frame's template and flow index; moves both on.
    #[inline]
    fn advance(&mut self) -> (usize, u32) {
        let ti = self.pattern[self.pos] as usize;
        self.pos += 1;
        if self.pos == self.pattern.len() {
            self.pos = 0;
        }
        let flow = self.flow;
        self.flow += 1;
        if self.flow == self.flows {
            self.flow = 0;
        }
        (ti, flow)
    }
}

/// Writes a frame's variable bytes into `buf`, which holds the template
/// laid out as `l` (any values in the variable bytes): payload header
/// (stream word, sequence number, timestamp), the flow's fields, the
/// checksums from the template's precomputed sums.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn stamp(
    v: &Vary,
    l: &Layout,
    udp_base: u64,
    ip_base: u64,
    buf: &mut [u8],
    flow: u32,
    stream_word: u32,
    seq: u64,
    ts_ns: u64,
) {
    let mut h = Header::new_unchecked(&mut buf[l.payload_offset..]);
    h.init(stream_word);
    h.set_seq(seq);
    h.set_timestamp_ns(ts_ns);
    // The sum of the fields just written, from their values: reading
    // them back would load across the fresh stores, which the CPU
    // cannot forward (a stall that was half the sender's time).
    let mut udp_sum = udp_base + var_sum(stream_word, seq, ts_ns);

    if v.macs {
        let mut eth = ethernet::Frame::new_unchecked(&mut *buf);
        if v.step_macs.0 {
            eth.set_src_addr(MacAddr::from_u64(v.base_macs.0.wrapping_add(flow as u64)));
        }
        if v.step_macs.1 {
            eth.set_dst_addr(MacAddr::from_u64(v.base_macs.1.wrapping_add(flow as u64)));
        }
    }
    if v.ports {
        let f = flow as u16;
        let mut u = udp::Packet::new_unchecked(&mut buf[l.l4_offset..]);
        u.set_src_port(v.base_ports.0.wrapping_add(f.wrapping_mul(v.step_ports.0)));
        u.set_dst_port(v.base_ports.1.wrapping_add(f.wrapping_mul(v.step_ports.1)));
        udp_sum += checksum::add(0, &buf[l.l4_offset..l.l4_offset + 4]);
    }
    if v.ips {
        let add = |on: bool| if on { flow } else { 0 };
        match v.base_ip {
            IpPair::V4(s, d) => {
                let mut ip = ipv4::Packet::new_unchecked(&mut buf[l.l3_offset..]);
                ip.set_src_addr(Ipv4Addr::from(u32::from(s).wrapping_add(add(v.step_ips.0))));
                ip.set_dst_addr(Ipv4Addr::from(u32::from(d).wrapping_add(add(v.step_ips.1))));
                let addr_sum = checksum::add(0, &buf[l.l3_offset + 12..l.l3_offset + 20]);
                ip_set_checksum(buf, l.l3_offset, !checksum::fold(ip_base + addr_sum));
                udp_sum += addr_sum;
            }
            IpPair::V6(s, d) => {
                let mut ip = ipv6::Packet::new_unchecked(&mut buf[l.l3_offset..]);
                ip.set_src_addr(&Ipv6Addr::from(
                    u128::from(s).wrapping_add(add(v.step_ips.0) as u128),
                ));
                ip.set_dst_addr(&Ipv6Addr::from(
                    u128::from(d).wrapping_add(add(v.step_ips.1) as u128),
                ));
                udp_sum += checksum::add(0, &buf[l.l3_offset + 8..l.l3_offset + 40]);
            }
        }
    }
    let mut c = !checksum::fold(udp_sum);
    if c == 0 {
        c = 0xffff; // RFC 768: a computed 0 is sent as all ones
    }
    udp::Packet::new_unchecked(&mut buf[l.l4_offset..]).set_checksum(c);
}

/// The ones' complement sum (unfolded) of the payload header's variable
/// range (`VAR`: stream id, sequence number, timestamp) as `init`,
/// `set_seq` and `set_timestamp_ns` write it: big-endian 16-bit words, so
/// the 32-bit halves of each u64 add up to the same folded sum.
#[inline]
fn var_sum(stream_word: u32, seq: u64, ts_ns: u64) -> u64 {
    let stream = stream_word.min(payload::MAX_STREAM) as u64;
    stream + (seq >> 32) + (seq & 0xffff_ffff) + (ts_ns >> 32) + (ts_ns & 0xffff_ffff)
}

fn ip_set_checksum(buf: &mut [u8], l3: usize, c: u16) {
    ipv4::Packet::new_unchecked(&mut buf[l3..]).set_checksum(c);
}

impl Template {
    /// Precomputes the checksum sums with every variable range zeroed.
    fn compute_bases(&mut self, vary_ports: bool, vary_ips: bool) {
        let l = self.layout;
        let mut seg = self.buf[l.l4_offset..].to_vec(); // init-time copy
        let p = l.payload_offset - l.l4_offset;
        seg[p + VAR.start..p + VAR.end].fill(0); // stream, seq, timestamp
        seg[6..8].fill(0); // UDP checksum
        if vary_ports {
            seg[0..4].fill(0);
        }
        let len = seg.len();
        let pseudo = match l.ip {
            IpPair::V4(s, d) => {
                let (s, d) = if vary_ips {
                    (Ipv4Addr::UNSPECIFIED, Ipv4Addr::UNSPECIFIED)
                } else {
                    (s, d)
                };
                checksum::pseudo_v4(s, d, proto::UDP, len as u16)
            }
            IpPair::V6(s, d) => {
                let (s, d) = if vary_ips {
                    (Ipv6Addr::UNSPECIFIED, Ipv6Addr::UNSPECIFIED)
                } else {
                    (s, d)
                };
                checksum::pseudo_v6(&s, &d, proto::UDP, len as u32)
            }
        };
        self.udp_base = checksum::add(pseudo, &seg);
        if let IpPair::V4(..) = l.ip {
            let mut h = self.buf[l.l3_offset..l.l3_offset + ipv4::HEADER_LEN].to_vec();
            h[10..12].fill(0);
            h[12..20].fill(0);
            self.ip_base = checksum::add(0, &h);
        }
    }
}

/// A received frame of ours: its payload header fields and where the UDP
/// payload starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ours {
    /// Stream word (with the warm-up bit).
    pub stream: u32,
    /// Sequence number.
    pub seq: u64,
    /// Send timestamp.
    pub ts_ns: u64,
    /// Offset of the UDP payload (the payload header) in the frame.
    pub payload_offset: usize,
    /// End of the UDP payload (the frame may carry padding after it).
    pub payload_end: usize,
}

/// Parses a received frame down to the payload header. `None` for anything
/// that is not a well-formed Ethernet[/VLAN]/IP/UDP frame with our magic.
#[inline]
pub fn parse(frame: &[u8]) -> Option<Ours> {
    let tags = parse_tags(frame).ok()?;
    let l3 = tags.l3_offset;
    let (l4, l4_end) = match tags.ethertype {
        EtherType::IPV4 => {
            let ip = ipv4::Packet::new_checked(&frame[l3..]).ok()?;
            if ip.protocol() != proto::UDP || ip.is_later_fragment() {
                return None;
            }
            (l3 + ip.header_len(), l3 + ip.total_len() as usize)
        }
        EtherType::IPV6 => {
            let ip = ipv6::Packet::new_checked(&frame[l3..]).ok()?;
            let (nh, off) = ip.upper_layer().ok()??;
            if nh != proto::UDP {
                return None;
            }
            (
                l3 + ipv6::HEADER_LEN + off,
                l3 + ipv6::HEADER_LEN + ip.payload_len() as usize,
            )
        }
        _ => return None,
    };
    let u = udp::Packet::new_checked(frame.get(l4..l4_end)?).ok()?;
    let payload_offset = l4 + udp::HEADER_LEN;
    let payload_end = l4 + u.len() as usize;
    let h = Header::new_checked(u.payload()).ok()?;
    Some(Ours {
        stream: h.stream(),
        seq: h.seq(),
        ts_ns: h.timestamp_ns(),
        payload_offset,
        payload_end,
    })
}

/// Sums `data` as little-endian u64 words (plus the tail), the "touch" of
/// every payload byte a real VNF would do. Returns the running sum.
#[inline]
pub fn touch(mut acc: u64, data: &[u8]) -> u64 {
    let mut chunks = data.chunks_exact(8);
    for c in &mut chunks {
        acc = acc.wrapping_add(u64::from_le_bytes([
            c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7],
        ]));
    }
    for &b in chunks.remainder() {
        acc = acc.wrapping_add(b as u64);
    }
    acc
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(v6: bool) -> FrameSpec {
        FrameSpec {
            src_mac: MacAddr([2, 0, 0, 0, 0, 1]),
            dst_mac: MacAddr([2, 0, 0, 0, 0, 2]),
            src_ip: if v6 {
                "fd00::1".parse().unwrap()
            } else {
                "10.0.0.1".parse().unwrap()
            },
            dst_ip: if v6 {
                "fd00::2".parse().unwrap()
            } else {
                "10.0.0.2".parse().unwrap()
            },
            src_port: 1024,
            dst_port: 5001,
            vlan: None,
            flows: 1,
            vary: vec![VaryField::SrcPort],
        }
    }

    /// Full, independent check of a frame: wire's checked views, both
    /// checksums recomputed from scratch.
    fn check_frame(f: &[u8]) -> (wire::L4Tuple, MacAddr, MacAddr, Ours) {
        let tup = wire::flow::parse_l4(f).unwrap().unwrap();
        let tags = parse_tags(f).unwrap();
        let l3 = &f[tags.l3_offset..];
        match tags.ethertype {
            EtherType::IPV4 => {
                let ip = ipv4::Packet::new_checked(l3).unwrap();
                assert!(ip.verify_checksum(), "IPv4 header checksum");
                let u = udp::Packet::new_checked(ip.payload()).unwrap();
                assert!(
                    u.verify_checksum_v4(ip.src_addr(), ip.dst_addr()),
                    "UDP checksum v4"
                );
            }
            EtherType::IPV6 => {
                let ip = ipv6::Packet::new_checked(l3).unwrap();
                let u = udp::Packet::new_checked(ip.payload()).unwrap();
                assert!(
                    u.verify_checksum_v6(&ip.src_addr(), &ip.dst_addr()),
                    "UDP checksum v6"
                );
            }
            e => panic!("ethertype {e:#x}"),
        }
        let eth = ethernet::Frame::new_checked(f).unwrap();
        (tup, eth.src_addr(), eth.dst_addr(), parse(f).unwrap())
    }

    #[test]
    fn payload_header_round_trip_through_a_frame() {
        for v6 in [false, true] {
            let s = spec(v6);
            let min = s.min_size().unwrap();
            let mut g = FrameGen::new(&s, &[min, 1518, 9000]).unwrap();
            for (i, want_len) in [min as usize, 1518, 9000, min as usize]
                .into_iter()
                .enumerate()
            {
                let seq = 0xfedc_ba98_7654_3210u64.wrapping_add(i as u64);
                let f = g
                    .next(7 | WARMUP_BIT, seq, 123_456_789_012 + i as u64)
                    .to_vec();
                assert_eq!(f.len(), want_len);
                let (_, _, _, o) = check_frame(&f);
                assert_eq!(
                    (o.stream, o.seq, o.ts_ns),
                    (7 | WARMUP_BIT, seq, 123_456_789_012 + i as u64)
                );
                assert_eq!(o.payload_end, f.len());
            }
        }
    }

    #[test]
    fn minimum_sizes_follow_the_headers() {
        let mut s = spec(false);
        assert_eq!(s.min_size().unwrap(), 64);
        s.vlan = Some(100);
        assert_eq!(s.min_size().unwrap(), 14 + 4 + 20 + 8 + 22);
        let s6 = spec(true);
        assert_eq!(s6.min_size().unwrap(), 14 + 40 + 8 + 22);
        let e = FrameGen::new(&s6, &[64]).err().unwrap();
        assert_eq!(e, FrameError::TooSmall { size: 64, min: 84 });
        assert!(e.to_string().contains("minimum is 84 B"));
        let mut mixed = spec(false);
        mixed.dst_ip = "fd00::1".parse().unwrap();
        assert_eq!(
            FrameGen::new(&mixed, &[128]).err().unwrap(),
            FrameError::MixedFamilies
        );
        let mut bad_vlan = spec(false);
        bad_vlan.vlan = Some(4095);
        assert!(matches!(
            FrameGen::new(&bad_vlan, &[128]),
            Err(FrameError::Wire(_))
        ));
    }

    /// Every field a generator can vary.
    fn every_field() -> Vec<VaryField> {
        vec![
            VaryField::SrcPort,
            VaryField::DstPort,
            VaryField::SrcIp,
            VaryField::DstIp,
            VaryField::SrcMac,
            VaryField::DstMac,
        ]
    }

    #[test]
    fn flows_vary_every_requested_field_with_valid_checksums() {
        for v6 in [false, true] {
            let mut s = spec(v6);
            s.flows = 5;
            s.vlan = Some(42);
            s.vary = every_field();
            let mut g = FrameGen::new(&s, &[128, 300]).unwrap();
            for i in 0..12u64 {
                let f = g.next(1, i, 1000 + i).to_vec();
                let (tup, smac, dmac, o) = check_frame(&f);
                let flow = (i % 5) as u16;
                assert_eq!(f.len(), if i % 2 == 0 { 128 } else { 300 });
                assert_eq!((tup.src_port, tup.dst_port), (1024 + flow, 5001 + flow));
                assert_eq!(smac.to_u64(), s.src_mac.to_u64() + flow as u64);
                assert_eq!(dmac.to_u64(), s.dst_mac.to_u64() + flow as u64);
                let want_src = match s.src_ip {
                    IpAddr::V4(a) => IpAddr::V4((u32::from(a) + flow as u32).into()),
                    IpAddr::V6(a) => IpAddr::V6((u128::from(a) + flow as u128).into()),
                };
                assert_eq!(tup.src_ip, want_src);
                assert_eq!((o.seq, o.ts_ns), (i, 1000 + i));
                assert_eq!(parse_tags(&f).unwrap().inner_vid(), Some(42));
            }
        }
    }

    #[test]
    fn frames_stamped_in_place_equal_the_copied_ones() {
        // Two generators of the same frames: one stamps its templates (the
        // copy path), the other stamps into a few reused buffers, as a port
        // lends them (in place). Sizes, flows and buffers out of step, so
        // a buffer holds another template, the same one, another
        // generator's frame or garbage.
        let all = every_field();
        for (v6, vlan, vary) in [
            (false, None, vec![]),
            (false, Some(7), all.clone()),
            (true, None, all.clone()),
            (true, Some(9), vec![VaryField::DstIp]),
        ] {
            let mut s = spec(v6);
            s.flows = 5;
            s.vlan = vlan;
            s.vary = vary;
            let sizes = [100, 1518, 100, 570, 200];
            let mut copy = FrameGen::new(&s, &sizes).unwrap();
            let mut inpl = FrameGen::new(&s, &sizes).unwrap();
            let mut other = FrameGen::new(&s, &sizes).unwrap();
            let mut bufs = vec![[0u8; 1518]; 7];
            let mut tags = [0u64; 7];
            let (mut whole, mut patched) = (0, 0);
            for i in 0..400u64 {
                let b = (i % 7) as usize;
                match i % 53 {
                    // Garbage the tag does not know of is the caller's
                    // business; a 0 tag says "unknown".
                    13 => {
                        bufs[b].fill(0xa5);
                        tags[b] = 0;
                    }
                    // Another generator's frame, with its own tag.
                    29 => {
                        other.next_into(&mut bufs[b], &mut tags[b], 3, i, 1);
                    }
                    _ => {}
                }
                let before = tags[b];
                let want = copy.next(2, i, 5000 + i).to_vec();
                let n = inpl.next_into(&mut bufs[b], &mut tags[b], 2, i, 5000 + i);
                assert_eq!(n, want.len());
                assert_eq!(&bufs[b][..n], &want[..], "frame {i} (v6 {v6})");
                check_frame(&bufs[b][..n]);
                if before == tags[b] {
                    patched += 1;
                } else {
                    whole += 1;
                }
            }
            assert!(
                patched > 20 && whole > 20,
                "patched {patched} whole {whole}"
            );
        }
        // A buffer too short for the frame: nothing written, length said.
        let mut g = FrameGen::new(&spec(false), &[300]).unwrap();
        let mut small = [0u8; 100];
        let mut tag = 0;
        assert_eq!(g.next_into(&mut small, &mut tag, 0, 0, 0), 300);
        assert_eq!((small, tag), ([0u8; 100], 0));
        // skip moves the pattern on like next.
        let mut g = FrameGen::new(&spec(false), &[100, 200]).unwrap();
        assert_eq!(g.skip(), 100);
        assert_eq!(g.next(0, 0, 0).len(), 200);
    }

    #[test]
    fn only_requested_fields_vary() {
        let mut s = spec(false);
        s.flows = 3;
        s.vary = vec![VaryField::DstIp];
        let mut g = FrameGen::new(&s, &[100]).unwrap();
        for i in 0..6u32 {
            let f = g.next(0, i as u64, 5).to_vec();
            let (tup, smac, _, _) = check_frame(&f);
            assert_eq!((tup.src_port, tup.dst_port), (1024, 5001));
            assert_eq!(tup.src_ip, s.src_ip);
            assert_eq!(
                tup.dst_ip,
                IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2 + (i % 3) as u8))
            );
            assert_eq!(smac, s.src_mac);
        }
    }

    #[test]
    fn foreign_frames_are_not_ours_and_never_panic() {
        let s = spec(false);
        let mut g = FrameGen::new(&s, &[100]).unwrap();
        let good = g.next(3, 9, 9).to_vec();
        assert!(parse(&good).is_some());
        // Every truncation of a good frame: either parsed consistently
        // (never here, the IP length no longer fits) or rejected.
        for n in 0..good.len() {
            assert_eq!(parse(&good[..n]), None, "truncated to {n}");
        }
        // Wrong magic, wrong protocol, ARP, garbage.
        let mut bad = good.clone();
        bad[42] ^= 1;
        assert_eq!(parse(&bad), None);
        let mut tcp = good.clone();
        tcp[23] = proto::TCP;
        assert_eq!(parse(&tcp), None);
        let mut arp = good.clone();
        arp[12..14].copy_from_slice(&EtherType::ARP.to_be_bytes());
        assert_eq!(parse(&arp), None);
        // A UDP length that lies beyond the IP datagram.
        let mut lying = good.clone();
        lying[38..40].copy_from_slice(&2000u16.to_be_bytes());
        assert_eq!(parse(&lying), None);
        // Random bytes and random mutations of a good frame.
        let mut x: u64 = 88172645463325252;
        for _ in 0..20_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let mut f = good.clone();
            let i = (x % f.len() as u64) as usize;
            f[i] = (x >> 32) as u8;
            let n = ((x >> 16) % (f.len() as u64 + 1)) as usize;
            let _ = parse(&f[..n]);
        }
    }

    #[test]
    fn touch_sums_every_byte() {
        let d: Vec<u8> = (0..=20u8).collect();
        let mut want = 0u64;
        for c in d.chunks(8) {
            if c.len() == 8 {
                want = want.wrapping_add(u64::from_le_bytes(c.try_into().unwrap()));
            } else {
                want += c.iter().map(|&b| b as u64).sum::<u64>();
            }
        }
        assert_eq!(touch(0, &d), want);
        let mut e = d.clone();
        e[20] ^= 1;
        assert_ne!(touch(0, &e), want);
    }
}
