//! System calls and mapped-ring access of the AF_PACKET backend: the
//! receive ring, TPACKET_V3 (blocks handed between kernel and user by a
//! status word) or TPACKET_V2 (frames handed over one status word each),
//! the TPACKET_V2 transmit ring (frames handed over one status word
//! each, sent by one `sendto()` per publish), and the socket options. Every
//! `unsafe` block of `af_packet` lives here.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use fabric::{DropReason, Lease, RxFill, RxQueue, TxDrops, TxFrames, TxLock, TxProducer, TxQueue};

use crate::netdev::LinkState;

pub const SOL_PACKET: i32 = 263;
pub const PACKET_RX_RING: i32 = 5;
pub const PACKET_STATISTICS: i32 = 6;
pub const PACKET_VERSION: i32 = 10;
pub const PACKET_TX_RING: i32 = 13;
pub const PACKET_LOSS: i32 = 14;
pub const PACKET_FANOUT: i32 = 18;
pub const PACKET_QDISC_BYPASS: i32 = 20;
pub const PACKET_IGNORE_OUTGOING: i32 = 23;
pub const TPACKET_V2: i32 = 1;
pub const TPACKET_V3: i32 = 2;
pub const ETH_P_ALL: u16 = 0x0003;

const TP_STATUS_KERNEL: u32 = 0;
const TP_STATUS_USER: u32 = 1;
const TP_STATUS_CSUMNOTREADY: u32 = 1 << 3;
const TP_STATUS_VLAN_VALID: u32 = 1 << 4;
const TP_STATUS_VLAN_TPID_VALID: u32 = 1 << 6;
const TP_STATUS_AVAILABLE: u32 = 0;
const TP_STATUS_SEND_REQUEST: u32 = 1;
const TP_STATUS_WRONG_FORMAT: u32 = 1 << 2;

/// Offset of the frame data in a TPACKET_V2 transmit frame:
/// `TPACKET_ALIGN(sizeof(struct tpacket2_hdr))`.
pub const TX_DATA_OFF: usize = 32;
/// Room before `tp_mac` that the kernel leaves free in a V3 receive frame:
/// `TPACKET_ALIGN(sizeof(struct tpacket3_hdr)) + sizeof(struct sockaddr_ll)`.
const RX_HDR_END: usize = 48 + 20;
/// The same in a V2 receive frame: `TPACKET2_HDRLEN`.
const RX2_HDR_END: usize = 32 + 20;
/// Bytes of a V2 receive frame before the network header at most: the
/// kernel puts it at `TPACKET_ALIGN(TPACKET2_HDRLEN + max(16, link
/// header))`, 80 for an Ethernet header with up to two VLAN tags.
pub const RX2_NET_OFF: usize = 80;

#[repr(C)]
struct TpacketReq3 {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
    retire_blk_tov: u32,
    sizeof_priv: u32,
    feature_req_word: u32,
}

#[repr(C)]
struct TpacketReq {
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    frame_nr: u32,
}

/// `struct tpacket_block_desc` with its `tpacket_hdr_v1`.
#[repr(C)]
struct BlockDesc {
    version: u32,
    offset_to_priv: u32,
    block_status: AtomicU32,
    num_pkts: u32,
    offset_to_first_pkt: u32,
    blk_len: u32,
    seq_num: u64,
    ts_first: [u32; 2],
    ts_last: [u32; 2],
}

/// `struct tpacket3_hdr`.
#[repr(C)]
struct Tpacket3Hdr {
    next_offset: u32,
    sec: u32,
    nsec: u32,
    snaplen: u32,
    len: u32,
    status: u32,
    mac: u16,
    net: u16,
    rxhash: u32,
    vlan_tci: u32,
    vlan_tpid: u16,
    padding: u16,
}

/// `struct tpacket2_hdr`.
#[repr(C)]
struct Tpacket2Hdr {
    status: AtomicU32,
    len: u32,
    snaplen: u32,
    mac: u16,
    net: u16,
    sec: u32,
    nsec: u32,
    vlan_tci: u16,
    vlan_tpid: u16,
    padding: [u8; 4],
}

/// `struct tpacket_stats_v3`.
#[repr(C)]
#[derive(Default)]
struct TpacketStatsV3 {
    packets: u32,
    drops: u32,
    freeze_q_cnt: u32,
}

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// A raw AF_PACKET socket that receives nothing until bound with a protocol.
pub fn packet_socket() -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = cvt(unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            0,
        )
    })?;
    // SAFETY: fd is a fresh descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn setsockopt_raw<T>(fd: RawFd, level: i32, opt: i32, val: &T) -> io::Result<()> {
    // SAFETY: `val` points to a live T of the given size.
    cvt(unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (val as *const T).cast(),
            std::mem::size_of::<T>() as u32,
        )
    })
    .map(|_| ())
}

/// `setsockopt(SOL_PACKET, opt, int)`.
pub fn set_int(fd: RawFd, opt: i32, val: i32) -> io::Result<()> {
    setsockopt_raw(fd, SOL_PACKET, opt, &val)
}

/// Binds to `ifindex`; `proto` 0 binds for sending only.
pub fn bind_ll(fd: RawFd, ifindex: u32, proto: u16) -> io::Result<()> {
    // SAFETY: sockaddr_ll is plain old data; all-zero is valid.
    let mut sa: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    sa.sll_family = libc::AF_PACKET as u16;
    sa.sll_protocol = proto.to_be();
    sa.sll_ifindex = ifindex as i32;
    // SAFETY: `sa` is a valid sockaddr_ll of the given length.
    cvt(unsafe {
        libc::bind(
            fd,
            &sa as *const libc::sockaddr_ll as *const libc::sockaddr,
            std::mem::size_of::<libc::sockaddr_ll>() as u32,
        )
    })
    .map(|_| ())
}

/// Reads and resets the socket's receive statistics:
/// (packets, drops, ring freezes).
pub fn take_stats(fd: RawFd) -> io::Result<(u64, u64, u64)> {
    let mut st = TpacketStatsV3::default();
    let mut len = std::mem::size_of::<TpacketStatsV3>() as u32;
    // SAFETY: `st` is writable for `len` bytes and `len` is updated by the kernel.
    cvt(unsafe {
        libc::getsockopt(
            fd,
            SOL_PACKET,
            PACKET_STATISTICS,
            (&mut st as *mut TpacketStatsV3).cast(),
            &mut len,
        )
    })?;
    Ok((st.packets as u64, st.drops as u64, st.freeze_q_cnt as u64))
}

/// Data-path counters of one receive queue.
#[derive(Default, Debug)]
pub struct RxStats {
    /// Frames handed to the fabric.
    pub frames: AtomicU64,
    /// Frames whose VLAN tag the kernel had stripped and we put back.
    pub vlan_restored: AtomicU64,
    /// Frames cut by the ring (snaplen < len): passed up as they are.
    pub truncated: AtomicU64,
    /// Frames with an unfinished checksum (peer's tx checksum offload on).
    pub csum_not_ready: AtomicU64,
    /// Frames whose ring header placed them outside their slot: given back
    /// unread (the kernel writes none such; counted should one appear).
    pub malformed: AtomicU64,
}

/// The receive ring of one queue, in the layout the port chose.
pub enum RxRing {
    /// TPACKET_V3: blocks of frames, each handed over whole when full or
    /// when its timeout expires.
    Blocks(BlockRing),
    /// TPACKET_V2: fixed slots, each frame handed over as it is written.
    Frames(FrameRing),
}

/// The TPACKET_V3 receive ring of one queue.
pub struct BlockRing {
    sock: Arc<OwnedFd>,
    /// The ring, shared with the kernel, which writes it at any time: status
    /// words are atomics, frame contents are touched only while the status
    /// hands them to us.
    map: floor::Mmap,
    block_size: usize,
    block_nr: u32,
    /// Block being read.
    cur: u32,
    /// Next frame in `cur`, or null when `cur` was not opened yet.
    next: *mut u8,
    /// Frames left in `cur`.
    left: u32,
    /// First fully read block not yet given back, and how many there are.
    done_from: u32,
    done_count: u32,
    stats: Arc<RxStats>,
}

// SAFETY: `next` points into `map`, which this value owns (and which is
// Send); the ring is used by one worker at a time (`&mut self`), so moving
// it to another thread moves every access with it.
unsafe impl Send for BlockRing {}

/// Configures a TPACKET_V3 receive ring on `sock` and maps it.
pub fn rx_ring(
    sock: Arc<OwnedFd>,
    block_size: u32,
    block_nr: u32,
    frame_size: u32,
    timeout_ms: u32,
    stats: Arc<RxStats>,
) -> io::Result<RxRing> {
    let req = TpacketReq3 {
        block_size,
        block_nr,
        frame_size,
        frame_nr: block_nr * (block_size / frame_size),
        retire_blk_tov: timeout_ms,
        sizeof_priv: 0,
        feature_req_word: 0,
    };
    setsockopt_raw(sock.as_raw_fd(), SOL_PACKET, PACKET_RX_RING, &req)?;
    let map = floor::Mmap::of_fd(sock.as_raw_fd(), block_size as usize * block_nr as usize)
        .populate()
        .map()?;
    Ok(RxRing::Blocks(BlockRing {
        sock,
        map,
        block_size: block_size as usize,
        block_nr,
        cur: 0,
        next: std::ptr::null_mut(),
        left: 0,
        done_from: 0,
        done_count: 0,
        stats,
    }))
}

impl BlockRing {
    fn block(&self, i: u32) -> *mut BlockDesc {
        // SAFETY: i < block_nr, so the block lies inside the mapping.
        unsafe { self.map.as_ptr().add(i as usize * self.block_size).cast() }
    }

    fn block_ready(&self, i: u32) -> bool {
        // SAFETY: the block descriptor is inside the mapping; its status is
        // the word the kernel and we hand the block over with.
        unsafe { (*self.block(i)).block_status.load(Ordering::Acquire) & TP_STATUS_USER != 0 }
    }

    fn finish_block(&mut self) {
        self.done_count += 1;
        self.cur = (self.cur + 1) % self.block_nr;
        self.next = std::ptr::null_mut();
        self.left = 0;
    }
}

impl BlockRing {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        let mut n = 0;
        let mut seen = Seen::default();
        while batch.room() > 0 {
            if self.next.is_null() {
                // Blocks read but not released are still marked USER: never
                // lap them.
                if self.done_count == self.block_nr || !self.block_ready(self.cur) {
                    break;
                }
                let bd = self.block(self.cur);
                // SAFETY: the block is ours (status USER); its header was
                // written by the kernel before the status (Acquire above).
                let (num, first) = unsafe { ((*bd).num_pkts, (*bd).offset_to_first_pkt as usize) };
                if num == 0 || first >= self.block_size {
                    self.finish_block();
                    continue;
                }
                // SAFETY: `first` was checked to be inside the block.
                self.next = unsafe { (bd as *mut u8).add(first) };
                self.left = num;
            }
            let h = self.next as *mut Tpacket3Hdr;
            // SAFETY: `h` points at a frame header inside our block (the
            // kernel's offsets are kept inside the block by construction;
            // `frame_bounds` re-checks them).
            let (status, mac, snaplen, len, next_off, tci, tpid) = unsafe {
                (
                    (*h).status,
                    (*h).mac as usize,
                    (*h).snaplen as usize,
                    (*h).len,
                    (*h).next_offset as usize,
                    (*h).vlan_tci,
                    (*h).vlan_tpid,
                )
            };
            let hdr_off = self.next as usize - self.block(self.cur) as usize;
            if hdr_off + mac + snaplen > self.block_size || mac < RX_HDR_END {
                // Inconsistent header: give the rest of the block back.
                self.stats
                    .malformed
                    .fetch_add(self.left as u64, Ordering::Relaxed);
                self.finish_block();
                continue;
            }
            let m = RxMeta {
                status,
                mac,
                snaplen,
                len,
                tci: tci as u16,
                tpid,
            };
            // SAFETY: [next, next + mac + snaplen) lies inside our block
            // (checked above), which stays ours until release().
            unsafe { push_frame(batch, self.next, &m, RX_HDR_END, &mut seen) };
            n += 1;
            self.left -= 1;
            if self.left == 0 || next_off == 0 || hdr_off + next_off >= self.block_size {
                self.finish_block();
            } else {
                // SAFETY: checked to stay inside the block.
                self.next = unsafe { self.next.add(next_off) };
            }
        }
        seen.add_to(&self.stats, n);
        n
    }

    fn release(&mut self) {
        for i in 0..self.done_count {
            let b = self.block((self.done_from + i) % self.block_nr);
            // SAFETY: the block is ours and no view into it is live any
            // more; the status store hands it back to the kernel.
            unsafe { (*b).block_status.store(TP_STATUS_KERNEL, Ordering::Release) };
        }
        self.done_from = (self.done_from + self.done_count) % self.block_nr;
        self.done_count = 0;
    }

    fn ready(&self) -> bool {
        // The socket is always readable when a block is ready (level
        // triggered); the re-check is whether one is ready now.
        !self.next.is_null() || (self.done_count < self.block_nr && self.block_ready(self.cur))
    }
}

/// What a ring header says of one received frame.
struct RxMeta {
    status: u32,
    /// Offset of the frame from its header.
    mac: usize,
    snaplen: usize,
    /// The frame's length on the wire.
    len: u32,
    tci: u16,
    tpid: u16,
}

/// Per-burst counts of what `push_frame` saw, added to [`RxStats`] once.
#[derive(Default)]
struct Seen {
    vlan: u64,
    trunc: u64,
    csum: u64,
}

impl Seen {
    #[inline]
    fn add_to(&self, stats: &RxStats, n: usize) {
        if n > 0 {
            stats.frames.fetch_add(n as u64, Ordering::Relaxed);
            if self.vlan | self.trunc | self.csum != 0 {
                stats.vlan_restored.fetch_add(self.vlan, Ordering::Relaxed);
                stats.truncated.fetch_add(self.trunc, Ordering::Relaxed);
                stats.csum_not_ready.fetch_add(self.csum, Ordering::Relaxed);
            }
        }
    }
}

/// Pushes the frame `m` describes, at `hdr + m.mac`, onto `batch`, with
/// the VLAN tag the kernel stripped put back in front of its payload.
///
/// # Safety
/// `[hdr, hdr + m.mac + m.snaplen)` lies in ring memory that is ours (the
/// kernel handed it over) until the burst's `release`, `m.mac >= hdr_end`,
/// and `batch` has room.
#[inline(always)]
unsafe fn push_frame(
    batch: &mut RxFill<'_>,
    hdr: *mut u8,
    m: &RxMeta,
    hdr_end: usize,
    seen: &mut Seen,
) {
    // SAFETY: inside the frame's slot (our caller's contract).
    let mut data = unsafe { hdr.add(m.mac) };
    let mut flen = m.snaplen;
    if (m.snaplen as u32) < m.len {
        seen.trunc += 1;
    }
    if m.status & TP_STATUS_CSUMNOTREADY != 0 {
        seen.csum += 1;
    }
    if m.status & TP_STATUS_VLAN_VALID != 0 && m.mac >= hdr_end + 4 && m.snaplen >= 12 {
        let tpid = if m.status & TP_STATUS_VLAN_TPID_VALID != 0 {
            m.tpid
        } else {
            0x8100
        };
        let tci = m.tci;
        // SAFETY: the 4 bytes before the frame are unused room of its slot
        // (mac >= header end + 4); the 12 address bytes move back into it
        // and the tag fills the gap.
        unsafe {
            let dst = data.sub(4);
            std::ptr::copy(data, dst, 12);
            let tag = [(tpid >> 8) as u8, tpid as u8, (tci >> 8) as u8, tci as u8];
            std::ptr::copy_nonoverlapping(tag.as_ptr(), dst.add(12), 4);
            data = dst;
        }
        flen += 4;
        seen.vlan += 1;
    }
    // SAFETY: data..data+flen lies in the slot, ours until release() gives
    // it back; the batch has room (our caller's contract).
    unsafe { batch.push(data, flen as u32) };
}

/// A TPACKET_V2 ring's layout: `frames` slots of `frame_size` bytes,
/// `per_block` to a block of `block_size` (slots do not cross blocks).
struct V2Layout {
    map: floor::Mmap,
    block_size: u32,
    per_block: u32,
    frames: u32,
}

/// Configures a TPACKET_V2 ring `opt` (`PACKET_RX_RING` or
/// `PACKET_TX_RING`) of at least `frame_nr` slots of `frame_size` bytes on
/// `fd` and maps it.
fn v2_ring(fd: RawFd, opt: i32, frame_size: u32, frame_nr: u32) -> io::Result<V2Layout> {
    let block_size = frame_size.max(page_size() as u32);
    let per_block = block_size / frame_size;
    let block_nr = frame_nr.div_ceil(per_block).max(1);
    let req = TpacketReq {
        block_size,
        block_nr,
        frame_size,
        frame_nr: block_nr * per_block,
    };
    setsockopt_raw(fd, SOL_PACKET, opt, &req)?;
    let map = floor::Mmap::of_fd(fd, block_size as usize * block_nr as usize)
        .populate()
        .map()?;
    Ok(V2Layout {
        map,
        block_size,
        per_block,
        frames: block_nr * per_block,
    })
}

/// The TPACKET_V2 receive ring of one queue: `nframes` slots of
/// `frame_size` bytes, `frames_per_block` to a block of `block_size`.
pub struct FrameRing {
    sock: Arc<OwnedFd>,
    /// The ring, shared with the kernel (as [`BlockRing::map`]): a slot's
    /// contents are touched only while its status hands it to us.
    map: floor::Mmap,
    frame_size: usize,
    frames_per_block: u32,
    block_size: usize,
    nframes: u32,
    /// Next slot to read.
    cur: u32,
    /// Slots read (up to `cur`) and not yet given back.
    taken: u32,
    stats: Arc<RxStats>,
}

/// Configures a TPACKET_V2 receive ring of at least `frame_nr` slots of
/// `frame_size` bytes (a power of two, ≥ 2048) on `sock` and maps it.
pub fn rx_frame_ring(
    sock: Arc<OwnedFd>,
    frame_size: u32,
    frame_nr: u32,
    stats: Arc<RxStats>,
) -> io::Result<RxRing> {
    let l = v2_ring(sock.as_raw_fd(), PACKET_RX_RING, frame_size, frame_nr)?;
    Ok(RxRing::Frames(FrameRing {
        sock,
        map: l.map,
        frame_size: frame_size as usize,
        frames_per_block: l.per_block,
        block_size: l.block_size as usize,
        nframes: l.frames,
        cur: 0,
        taken: 0,
        stats,
    }))
}

impl FrameRing {
    /// Slot `i` (< nframes): frames do not cross blocks.
    #[inline]
    fn slot(&self, i: u32) -> *mut u8 {
        let off = (i / self.frames_per_block) as usize * self.block_size
            + (i % self.frames_per_block) as usize * self.frame_size;
        // SAFETY: i < nframes, so the slot lies inside the mapping.
        unsafe { self.map.as_ptr().add(off) }
    }

    /// The status word of slot `i`.
    #[inline]
    fn status(&self, i: u32) -> &AtomicU32 {
        // SAFETY: the slot starts with its `tpacket2_hdr`, whose first word
        // is the status the kernel and we hand the slot over with; the
        // mapping lives as long as `self`.
        unsafe { &(*(self.slot(i) as *const Tpacket2Hdr)).status }
    }

    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        let mut n = 0;
        let mut seen = Seen::default();
        let mut bad = 0u64;
        while batch.room() > 0 && self.taken < self.nframes {
            let status = self.status(self.cur).load(Ordering::Acquire);
            if status & TP_STATUS_USER == 0 {
                break;
            }
            let h = self.slot(self.cur) as *const Tpacket2Hdr;
            // SAFETY: the slot is ours (status USER, read with Acquire: the
            // kernel wrote the header and frame before it).
            let (mac, snaplen, len, tci, tpid) = unsafe {
                (
                    (*h).mac as usize,
                    (*h).snaplen as usize,
                    (*h).len,
                    (*h).vlan_tci,
                    (*h).vlan_tpid,
                )
            };
            let slot = self.slot(self.cur);
            self.cur = if self.cur + 1 == self.nframes {
                0
            } else {
                self.cur + 1
            };
            self.taken += 1;
            if mac + snaplen > self.frame_size || mac < RX2_HDR_END {
                // Given back unread with the others at release.
                bad += 1;
                continue;
            }
            let m = RxMeta {
                status,
                mac,
                snaplen,
                len,
                tci,
                tpid,
            };
            // SAFETY: [slot, slot + mac + snaplen) lies inside the slot
            // (checked above), ours until release(); the batch has room.
            unsafe { push_frame(batch, slot, &m, RX2_HDR_END, &mut seen) };
            n += 1;
        }
        seen.add_to(&self.stats, n);
        if bad != 0 {
            self.stats.malformed.fetch_add(bad, Ordering::Relaxed);
            if n == 0 {
                // No release follows an empty burst: give them back now.
                self.release();
            }
        }
        n
    }

    fn release(&mut self) {
        let mut i = (self.cur + self.nframes - self.taken) % self.nframes;
        for _ in 0..self.taken {
            // No view into the slot is live any more; the status store
            // hands it back to the kernel.
            self.status(i).store(TP_STATUS_KERNEL, Ordering::Release);
            i = if i + 1 == self.nframes { 0 } else { i + 1 };
        }
        self.taken = 0;
    }

    fn ready(&self) -> bool {
        // The socket is readable while the slot before the kernel's next
        // is ours (level triggered); the re-check is whether ours is.
        self.taken < self.nframes
            && self.status(self.cur).load(Ordering::Acquire) & TP_STATUS_USER != 0
    }
}

impl RxRing {
    fn sock(&self) -> &Arc<OwnedFd> {
        match self {
            RxRing::Blocks(r) => &r.sock,
            RxRing::Frames(r) => &r.sock,
        }
    }

    /// Whether a frame (or a block) is ours to read now.
    fn ready(&self) -> bool {
        match self {
            RxRing::Blocks(r) => r.ready(),
            RxRing::Frames(r) => r.ready(),
        }
    }
}

impl RxQueue for RxRing {
    fn burst(&mut self, batch: &mut RxFill<'_>) -> usize {
        match self {
            RxRing::Blocks(r) => r.burst(batch),
            RxRing::Frames(r) => r.burst(batch),
        }
    }

    fn release(&mut self) {
        match self {
            RxRing::Blocks(r) => r.release(),
            RxRing::Frames(r) => r.release(),
        }
    }

    fn notify_fd(&self) -> Option<RawFd> {
        Some(self.sock().as_raw_fd())
    }

    fn set_notify(&mut self, _enabled: bool) -> bool {
        self.ready()
    }

    fn peek(&self) -> Option<bool> {
        // What the socket's readiness says, from the status words.
        Some(self.ready())
    }

    fn watch_only_asleep(&self) -> bool {
        // A frames ring calls the socket's wait queue for every frame the
        // kernel writes (sk_data_ready; a blocks ring once per block):
        // while the socket is in an epoll set, each is an epoll callback
        // on the receive path, on the CPU that delivers the frame.
        matches!(self, RxRing::Frames(_))
    }
}

/// Data-path counters of one transmit queue.
#[derive(Default, Debug)]
pub struct TxStats {
    /// Frames published to the kernel.
    pub frames: AtomicU64,
    /// `sendto()` kicks issued.
    pub kicks: AtomicU64,
    /// Kicks that failed (ENOBUFS, ENETDOWN...); the frames stay queued.
    pub kick_errors: AtomicU64,
    /// Frames the kernel rejected as malformed (discarded, PACKET_LOSS).
    pub rejected: AtomicU64,
}

/// The producer state of a transmit ring, inside its [`TxLock`].
struct TxProd {
    sh: Arc<TxShared>,
    reserved: u64,
    published: u64,
    completed: u64,
    /// Frames the kernel refused (WRONG_FORMAT), not yet reported to the
    /// fabric, and their bytes.
    refused: u32,
    refused_b: u64,
}

/// What the producer, the writers and the kick share: the socket and the
/// mapped ring (frames written by the lease's worker, statuses exchanged
/// with the kernel through atomics).
struct TxShared {
    sock: OwnedFd,
    map: floor::Mmap,
    frame_size: usize,
    block_size: usize,
    frames_per_block: usize,
    nframes: u64,
    /// The last kick failed: retry at the next publish, or when a sender
    /// finds the ring full (`kick_stalled`).
    kick_pending: AtomicBool,
    stats: Arc<TxStats>,
}

/// The TPACKET_V2 transmit ring of one queue.
pub struct TxRing {
    sh: Arc<TxShared>,
    lock: TxLock<TxProd>,
    link: Arc<LinkState>,
    /// Counters, shared with the port.
    pub stats: Arc<TxStats>,
}

/// Configures a TPACKET_V2 transmit ring of `frame_nr` frames on `sock`
/// (version, loss and bind already set) and maps it.
pub fn tx_ring(
    sock: OwnedFd,
    frame_size: u32,
    frame_nr: u32,
    link: Arc<LinkState>,
    stats: Arc<TxStats>,
) -> io::Result<TxRing> {
    let l = v2_ring(sock.as_raw_fd(), PACKET_TX_RING, frame_size, frame_nr)?;
    let sh = Arc::new(TxShared {
        sock,
        map: l.map,
        frame_size: frame_size as usize,
        block_size: l.block_size as usize,
        frames_per_block: l.per_block as usize,
        nframes: l.frames as u64,
        kick_pending: AtomicBool::new(false),
        stats: stats.clone(),
    });
    Ok(TxRing {
        lock: TxLock::new(TxProd {
            sh: sh.clone(),
            reserved: 0,
            published: 0,
            completed: 0,
            refused: 0,
            refused_b: 0,
        }),
        sh,
        link,
        stats,
    })
}

fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

impl TxShared {
    fn frame(&self, slot: u64) -> *mut u8 {
        let i = (slot % self.nframes) as usize;
        let off = (i / self.frames_per_block) * self.block_size
            + (i % self.frames_per_block) * self.frame_size;
        // SAFETY: i < nframes, so the frame lies inside the mapping.
        unsafe { self.map.as_ptr().add(off) }
    }

    fn status(&self, slot: u64) -> &AtomicU32 {
        // SAFETY: the frame header is inside the mapping, aligned (frames
        // are TPACKET_ALIGNMENT-aligned), and its first word is the status
        // the kernel and we exchange the frame with, always accessed
        // atomically on both sides.
        unsafe { &(*(self.frame(slot) as *const Tpacket2Hdr)).status }
    }

    fn capacity(&self) -> usize {
        self.frame_size - TX_DATA_OFF
    }

    /// One `sendto()`: asks the kernel to send every frame marked
    /// SEND_REQUEST. Never called under the transmit lock.
    fn send_kick(&self) {
        self.stats.kicks.fetch_add(1, Ordering::Relaxed);
        // SAFETY: a zero-length sendto with no buffer asks the kernel to
        // send the frames marked SEND_REQUEST in the mapped ring.
        let r = unsafe {
            libc::sendto(
                self.sock.as_raw_fd(),
                std::ptr::null(),
                0,
                libc::MSG_DONTWAIT,
                std::ptr::null(),
                0,
            )
        };
        self.kick_pending.store(r < 0, Ordering::Relaxed);
        if r < 0 {
            self.stats.kick_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl TxRing {
    /// Largest frame a slot holds.
    pub fn capacity(&self) -> usize {
        self.sh.capacity()
    }

    /// The transmit socket.
    pub fn fd(&self) -> RawFd {
        self.sh.sock.as_raw_fd()
    }
}

impl TxProducer for TxProd {
    fn free_slots(&mut self) -> u32 {
        let sh = &*self.sh;
        while self.completed < self.published {
            let s = sh.status(self.completed).load(Ordering::Acquire);
            if s == TP_STATUS_AVAILABLE {
                self.completed += 1;
            } else if s & TP_STATUS_WRONG_FORMAT != 0 {
                // SAFETY: the kernel is done with the frame (its status
                // says so, Acquire above); its header is inside the mapping.
                let len = unsafe { (*(sh.frame(self.completed) as *const Tpacket2Hdr)).len };
                sh.status(self.completed)
                    .store(TP_STATUS_AVAILABLE, Ordering::Relaxed);
                sh.stats.rejected.fetch_add(1, Ordering::Relaxed);
                self.refused += 1;
                self.refused_b += len as u64;
                self.completed += 1;
            } else {
                break;
            }
        }
        (sh.nframes - (self.reserved - self.completed)) as u32
    }

    fn reserve(&mut self, n: u32) -> Lease {
        let first = self.reserved;
        self.reserved += n as u64;
        Lease::at(first)
    }

    fn publish_deferred(&mut self, tail: u64, drops: &mut TxDrops) -> bool {
        if self.refused > 0 {
            drops.add_n(DropReason::TxError, self.refused, self.refused_b);
            self.refused = 0;
            self.refused_b = 0;
        }
        if tail <= self.published {
            return false;
        }
        for s in self.published..tail {
            self.sh
                .status(s)
                .store(TP_STATUS_SEND_REQUEST, Ordering::Release);
        }
        self.sh
            .stats
            .frames
            .fetch_add(tail - self.published, Ordering::Relaxed);
        self.published = tail;
        // The kick (also a retry of a failed one) is made after the lock.
        true
    }
}

impl TxQueue for TxRing {
    fn slots_for(&self, len: usize) -> u32 {
        // The kernel accepts up to MTU + Ethernet header (+ 4 for a tagged
        // frame).
        let mtu_max = self.link.mtu() as usize + 14 + 4;
        (len <= self.capacity() && len <= mtu_max) as u32
    }

    fn tx_lock(&self) -> &TxLock {
        &self.lock
    }

    unsafe fn write_burst(&self, lease: &Lease, frames: &TxFrames<'_>, _: &mut TxDrops) {
        let sh = &*self.sh;
        let first = lease.first;
        for (j, (frame, _)) in frames.iter().enumerate() {
            let len = frame.len().min(sh.capacity());
            let f = sh.frame(first + j as u64);
            // SAFETY: the slot was reserved to this caller (trait contract)
            // and is free: the kernel gave it back (status AVAILABLE seen
            // by the producer, completed > slot - nframes) and does not
            // look at it until publish marks it SEND_REQUEST; nobody else
            // writes it; len <= capacity keeps the copy inside the frame.
            unsafe {
                std::ptr::copy_nonoverlapping(frame.as_ptr(), f.add(TX_DATA_OFF), len);
                (*(f as *mut Tpacket2Hdr)).len = len as u32;
            }
        }
    }

    fn kick(&self, _: &mut TxDrops) {
        self.sh.send_kick();
    }

    fn kick_stalled(&self, _: &mut TxDrops) {
        // No publish follows (the ring is full, or the worker goes idle):
        // if the last kick failed, nothing else sends the frames waiting
        // in the ring.
        if self.kick_pending() {
            self.sh.send_kick();
        }
    }

    fn kick_pending(&self) -> bool {
        self.sh.kick_pending.load(Ordering::Relaxed)
    }
}
