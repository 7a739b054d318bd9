//! Every logic's `classify` runs without allocating, once warmed up (the
//! first arc-swap load on a thread may register a per-thread slot).

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use logic::{Ctx, Pkt, Pkts, Verdict};
use wire::build::{write_udp_frame, IpPair, UdpFrameSpec};
use wire::MacAddr;

struct Counting;

thread_local! {
    /// Set on the thread under test only: the test runner's other threads
    /// (reporting a finished test) allocate meanwhile.
    static COUNTING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}
static ALLOCS: AtomicUsize = AtomicUsize::new(0);

fn counting() -> bool {
    COUNTING.try_with(|c| c.get()).unwrap_or(false)
}

// SAFETY: forwards to the system allocator unchanged; only counts calls.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        if counting() {
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
        if counting() {
            ALLOCS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// The tests count every thread's allocations: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[test]
fn classify_does_not_allocate() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = testpeers::TempDir::new("logic-noalloc");
    // Every logic of the table, built from its example configuration.
    let logics: Vec<_> = logic::LOGICS
        .iter()
        .map(|e| (e.new)(&(e.example)(&dir.0).unwrap()).unwrap().logic)
        .collect();
    assert_eq!(logics.len(), logic::LOGICS.len());
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
        // A worker's state (made when the logic is installed, may
        // allocate): its batches go through `classify_with`, which must
        // not; and through plain `classify` (no worker), which must not
        // either.
        let mut st = l.worker_state();
        let ctx0 = Ctx {
            now_ns: 0,
            worker: 0,
        };
        l.classify(&ctx0, 0, Pkts::new_mut(&mut pkts), &mut verdicts); // warm-up
        if let Some(st) = st.as_deref_mut() {
            l.classify_with(st, &ctx0, 0, Pkts::new_mut(&mut pkts), &mut verdicts);
        }
        COUNTING.with(|c| c.set(true));
        for round in 0..100u64 {
            let ctx = Ctx {
                now_ns: round * 700_000_000,
                worker: 0,
            };
            let ingress = (round % 2) as u16;
            match st.as_deref_mut() {
                Some(st) if round % 3 != 0 => {
                    l.classify_with(st, &ctx, ingress, Pkts::new_mut(&mut pkts), &mut verdicts)
                }
                _ => l.classify(&ctx, ingress, Pkts::new_mut(&mut pkts), &mut verdicts),
            }
        }
        COUNTING.with(|c| c.set(false));
        assert_eq!(
            ALLOCS.swap(0, Ordering::SeqCst),
            0,
            "{} allocated in classify",
            l.name()
        );
    }
}

/// A queue lending the same frames, zero-copy, on every burst.
struct Frames(Vec<Vec<u8>>);

impl fabric::RxQueue for Frames {
    fn burst(&mut self, rx: &mut fabric::RxFill<'_>) -> usize {
        for f in self.0.iter_mut() {
            // SAFETY: owned by the queue, which the burst borrows until
            // release; nobody else touches them meanwhile.
            unsafe { rx.push(f.as_mut_ptr(), f.len() as u32) };
        }
        rx.len()
    }
    fn release(&mut self) {}
}

#[test]
fn flows_pushing_vlan_tags_into_the_batch_scratch_does_not_allocate() {
    let _one = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let f = logic::flows::Flows::from_config(&serde_json::json!({"flows": [
        "in_port=0,actions=mod_vlan_vid:5,goto_table:1",
        "table=1,dl_vlan=5,actions=push_vlan:0x88a8,mod_vlan_pcp:3,output:1",
    ]}))
    .unwrap();
    let frames: Vec<Vec<u8>> = (0..256u32)
        .map(|i| {
            let spec = UdpFrameSpec::new(
                MacAddr([2, 0, 0, 0, (i >> 8) as u8, i as u8]),
                MacAddr([2, 1, 0, 0, 0, 1]),
                IpPair::V4([10, 0, 0, 1].into(), [10, 0, 0, 2].into()),
                40000,
                5001,
            );
            let mut f = vec![0u8; 64];
            write_udp_frame(&spec, &mut f, 64).unwrap();
            f
        })
        .collect();
    let mut q = Frames(frames);
    let mut batch = fabric::RxBatch::with_capacity(256);
    let mut verdicts = vec![Verdict::Flood; 256];
    let ctx = Ctx {
        now_ns: 0,
        worker: 0,
    };
    use logic::Logic;
    let mut st = f.worker_state().unwrap();
    {
        let mut rx = batch.receive(&mut q, 0, 0);
        f.classify_with(&mut *st, &ctx, 0, rx.pkts_mut(), &mut verdicts); // warm-up
    }
    COUNTING.with(|c| c.set(true));
    for _ in 0..100 {
        let mut rx = batch.receive(&mut q, 0, 0);
        f.classify_with(&mut *st, &ctx, 0, rx.pkts_mut(), &mut verdicts);
        assert_eq!(rx.pkts()[7].len(), 72, "two tags pushed");
    }
    COUNTING.with(|c| c.set(false));
    assert!(
        verdicts.iter().all(|v| *v == Verdict::Port(1)),
        "{verdicts:?}"
    );
    assert_eq!(
        ALLOCS.swap(0, Ordering::SeqCst),
        0,
        "flows allocated pushing tags"
    );
}
