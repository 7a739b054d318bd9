//! The tunnel port's data path (decapsulation with learning and control
//! frames, encapsulation with unicast and head-end replication) does not
//! allocate: a counting allocator, armed on the test thread only (the
//! tunnel's control thread may allocate), sees nothing.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use fabric::{pipe, PipeConfig, Port, RxBatch};
use ports::tunnel::encap::{flow_sport, Outer, OuterSpec};
use ports::tunnel::{Kind, TunnelConfig, TunnelPort};
use wire::MacAddr;

struct Counting;
static ALLOCS: AtomicU64 = AtomicU64::new(0);
thread_local! {
    static ARMED: Cell<bool> = const { Cell::new(false) };
}

fn count() {
    if ARMED.with(|a| a.get()) {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
    }
}

// SAFETY: forwards to the system allocator, only counting.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        count();
        // SAFETY: our caller upholds `GlobalAlloc::alloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: our caller upholds `GlobalAlloc::dealloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        count();
        // SAFETY: our caller upholds `GlobalAlloc::realloc`'s contract,
        // which is the system allocator's too.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: Counting = Counting;

const LOCAL: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const R1: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const R2: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const R9: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 9);
const MAC: MacAddr = MacAddr([2, 0, 0, 0, 0, 1]);

fn inner(dst: [u8; 6], src: [u8; 6]) -> Vec<u8> {
    let mut f = vec![0u8; 100];
    f[0..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x08, 0x00]);
    f
}

fn from(src: Ipv4Addr, f: &[u8]) -> Vec<u8> {
    let o = Outer::new(&OuterSpec {
        kind: Kind::Vxlan,
        vni: 7,
        src_mac: MacAddr([2, 0, 0, 0, 0, 9]),
        dst_mac: MAC,
        src_ip: src.into(),
        dst_ip: LOCAL.into(),
        dst_port: 4789,
        mtu: 1500,
        ttl: 64,
    })
    .unwrap();
    let mut b = vec![0u8; o.len() + f.len()];
    b[o.len()..].copy_from_slice(f);
    let n = o.write(&mut b, f.len(), flow_sport(f)).unwrap();
    b.truncate(n);
    b
}

#[test]
fn the_tunnel_data_path_does_not_allocate() {
    let (port, mut peer) = pipe(
        "u",
        PipeConfig {
            queues: 1,
            ring_slots: 1024,
            slot_b: 2048,
        },
    )
    .unwrap();
    let mut cfg = TunnelConfig::new(Kind::Vxlan, 7, LOCAL.into());
    cfg.remotes = vec![R1.into(), R2.into()];
    cfg.neighbours = vec![
        (IpAddr::V4(R1), MacAddr([2, 0, 0, 0, 0, 2])),
        (IpAddr::V4(R2), MacAddr([2, 0, 0, 0, 0, 3])),
    ];
    let t = TunnelPort::open_parts("t", cfg, Arc::new(port), MAC, 1500, None).unwrap();
    let mut rx = t.take_rx(0).unwrap();
    // SAFETY: this test is the queue's only user.
    let mut tx = unsafe { fabric::OwnedTx::new(t.tx(0)) };
    let host = [2, 0, 0, 0, 7, 7];
    let mut arp = inner([0xff; 6], [2, 0, 0, 0, 0, 2]);
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    let mut foreign = from(R1, &inner([0xff; 6], host));
    foreign[36..38].copy_from_slice(&53u16.to_be_bytes());
    let in_frames = [
        from(R1, &inner([2, 0, 0, 0, 0, 0xaa], host)), // learned
        from(R9, &inner([0xff; 6], [2, 0, 0, 0, 9, 9])), // unknown endpoint
        arp,                                           // control
        foreign,                                       // dropped
    ];
    let refs: Vec<&[u8]> = in_frames.iter().map(|f| &f[..]).collect();
    let out_frames = [inner(host, [2, 0, 0, 0, 0, 0xaa]), inner([0xff; 6], [2; 6])];
    let mut batch = RxBatch::with_capacity(64);
    let mut round = || {
        assert_eq!(peer.send(0, &refs), refs.len());
        let n = batch.receive(&mut *rx, 0, 0).len();
        assert_eq!(n, 2);
        for f in &out_frames {
            let s = tx.reserve(1);
            tx.write(s, 1, f);
            tx.publish(s + 1);
        }
        let mut got = 0;
        peer.recv(0, usize::MAX, |_| got += 1);
        got
    };
    // Warm up (first learning, the endpoint table settles).
    for _ in 0..50 {
        round();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    ARMED.with(|a| a.set(true));
    let mut sent = 0;
    for _ in 0..5000 {
        sent += round();
    }
    ARMED.with(|a| a.set(false));
    assert_eq!(
        ALLOCS.load(Ordering::Relaxed),
        0,
        "allocations on the data path"
    );
    // Unicast to the learned host: 1 copy; broadcast: one per endpoint
    // (2 static, plus R9 once learned).
    assert!(sent >= 5000 * 3, "{sent}");
}
