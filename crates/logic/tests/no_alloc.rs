//! Every logic's `classify` runs without allocating, once warmed up (the
//! first arc-swap load on a thread may register a per-thread slot).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use logic::{Ctx, Pkt, Pkts, Verdict};
use serde_json::json;
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::MacAddr;

struct Counting;

static COUNTING: AtomicBool = AtomicBool::new(false);
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        if COUNTING.load(Ordering::Relaxed) {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

#[test]
fn classify_does_not_allocate() {
    let dir = logic::plugin::build::TempDir::new("logic-noalloc");
    let so = logic::plugin::build::cc_shared(
        &logic::plugin::build::repo_dir("plugins/ip_low8.c"),
        &dir.0,
        "libip_low8.so",
    )
    .unwrap();
    let logics = [
        logic::build("patch", &json!({"pairs": [[0, 1]]})).unwrap(),
        logic::build("bridge", &json!({"table_size": 64})).unwrap(),
        logic::build("l4filter", &json!({"rules": [{"proto": "udp", "port": 5001, "to": 1}]})).unwrap(),
        logic::build("demux", &json!({"default": 1, "uplink": 0, "entries": [{"proto": "udp", "ip": "10.0.0.2", "port": 5001, "to": 3}]})).unwrap(),
        logic::build("flows", &json!({"flows": [
            "priority=5,udp,nw_dst=10.0.0.0/24,tp_dst=5001,actions=mod_dl_src:02:00:00:00:00:09,goto_table:1",
            "priority=4,dl_dst=02:01:00:00:00:03,actions=dec_ttl,output:1",
            "priority=1,actions=drop",
            "table=1,priority=1,actions=output:2,output:3",
        ]})).unwrap(),
        logic::build("plugin", &json!({"path": so.to_str().unwrap()})).unwrap(),
    ];
    // 256 frames, many source MACs (so the bridge learns and evicts), some
    // truncated (malformed paths).
    let mut frames: Vec<Vec<u8>> = (0..256u32)
        .map(|i| {
            let b = i.to_be_bytes();
            let spec = UdpFrameSpec::new(
                MacAddr([2, 0, b[0], b[1], b[2], b[3]]),
                MacAddr([2, 1, 0, 0, 0, (i % 7) as u8]),
                IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
                40000,
                5001,
            );
            let mut f = vec![0u8; 64];
            write_udp_frame(&spec, &mut f, 64).unwrap();
            if i % 5 == 0 {
                f.truncate(30);
            }
            f
        })
        .collect();
    let mut pkts: Vec<Pkt> = frames
        .iter_mut()
        // SAFETY: the frames outlive the views and are only used through them.
        .map(|f| unsafe { Pkt::new(f.as_mut_ptr(), f.len() as u32, 0, 0) })
        .collect();
    let mut verdicts = vec![Verdict::Flood; pkts.len()];
    for l in &logics {
        l.classify(
            &Ctx {
                now_ns: 0,
                worker: 0,
            },
            0,
            Pkts::new_mut(&mut pkts),
            &mut verdicts,
        ); // warm-up
        COUNTING.store(true, Ordering::SeqCst);
        for round in 0..100u64 {
            let ctx = Ctx {
                now_ns: round * 700_000_000,
                worker: 0,
            };
            l.classify(
                &ctx,
                (round % 2) as u16,
                Pkts::new_mut(&mut pkts),
                &mut verdicts,
            );
        }
        COUNTING.store(false, Ordering::SeqCst);
        assert_eq!(
            ALLOCS.swap(0, Ordering::SeqCst),
            0,
            "{} allocated in classify",
            l.name()
        );
    }
}
