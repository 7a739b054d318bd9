//! The punt path: a fabric-owned bounded queue for frames a logic hands
//! from the data path to the control plane (`flows`' `controller` action:
//! OpenFlow packet-ins), without blocking or allocating.
//!
//! A logic that punts makes one [`Punt`] from a [`PuntSpec`] (its
//! configuration) and offers it to the fabric through [`crate::Logic::punt`]; the
//! control plane takes the running logic's from the switch
//! ([`crate::Switch::punt`]) and pops [`Punted`] frames, each with the
//! logic's [`PuntMeta`] (ingress port, a logic-defined reason code and u8
//! tag, a cookie).
//!
//! A bounded multi-producer queue of preallocated slots (D. Vyukov's
//! sequence-numbered ring): each worker claims a slot with one CAS, copies
//! the frame (cut to the logic's length and to [`SLOT_BYTES`]) and
//! publishes it with a release store; the control plane's consumer pops.
//! A full queue refuses at once (`controller_queue_full`). In front of it a
//! rate limit (a GCRA token bucket in one atomic: `rate` per second, bursts
//! of `burst`) refuses the excess (`controller_rate_limit`), and with no
//! consumer connected (a controller: [`Punt::set_controllers`]) the frame
//! is refused first (`no_controller`). A frame taken is counted as
//! `to_controller`. [`Punt::push`] returns that [`DropReason`], the
//! verdict's: so every frame punted is counted under exactly one reason, and
//! a flood of punts costs the workers one atomic load each beyond the limit.
//!
//! Waking the consumer (docs/flows.md, "Packet-in latency"): the queue
//! owns an eventfd. The consumer, finding the queue empty, raises
//! `asleep`, fences, looks once more, and only then sleeps in `poll` on the
//! eventfd ([`Punt::sleep_begin`], [`Punt::wake_fd`],
//! [`Punt::sleep_end`]). A producer, after publishing its slot,
//! fences and looks at `asleep`: only when it is raised does it take it
//! down (one swap, so one producer per sleep) and write the eventfd. Either
//! the consumer sees the slot or the producer sees the flag (both fence
//! between their store and their load), so no punted frame waits for a
//! timeout; a busy consumer costs the workers a fence and a load, no
//! syscall, and no producer ever waits for another.

use std::cell::UnsafeCell;
use std::os::fd::RawFd;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Instant;

use crate::sys::EventFd;
use crate::{DropReason, PortId};

/// Most bytes of a frame a punt carries (the rest is cut;
/// [`Punted::total_len`] tells how long the frame was).
pub const SLOT_BYTES: usize = 2048;
/// Default queue size (slots).
pub const DEFAULT_SLOTS: usize = 1024;
/// Largest queue size accepted.
pub const MAX_SLOTS: usize = 1 << 16;
/// Default rate limit, punts per second.
pub const DEFAULT_RATE: u64 = 1000;
/// Largest rate limit (and burst) accepted.
pub const MAX_RATE: u64 = 10_000_000;

/// A punt queue's configuration (the logic's; `flows`:
/// `packet_in_queue`, `packet_in_rate`, `packet_in_burst`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PuntSpec {
    /// Slots: a power of two in 1..=[`MAX_SLOTS`].
    pub slots: usize,
    /// Punts per second, 1..=[`MAX_RATE`].
    pub rate: u64,
    /// Burst, 1..=[`MAX_RATE`].
    pub burst: u64,
}

/// What a logic says of a frame it punts (the meaning of `reason`, `tag`
/// and `cookie` is the logic's; `flows`: the OpenFlow reason, the table
/// and the flow's cookie).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PuntMeta {
    /// Ingress port id.
    pub ingress: PortId,
    /// A logic-defined reason code.
    pub reason: u8,
    /// A logic-defined tag.
    pub tag: u8,
    /// A logic-defined cookie.
    pub cookie: u64,
}

/// One punted frame as the control plane receives it (owns its data).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Punted {
    /// What the logic said of it.
    pub meta: PuntMeta,
    /// Length of the whole frame (at most `u16::MAX`).
    pub total_len: u16,
    /// The frame, cut to the logic's length and [`SLOT_BYTES`].
    pub data: Vec<u8>,
}

#[derive(Clone, Copy, Default)]
struct Meta {
    meta: PuntMeta,
    total_len: u16,
    len: u16,
}

struct Slot {
    seq: AtomicUsize,
    meta: UnsafeCell<Meta>,
    data: UnsafeCell<[u8; SLOT_BYTES]>,
}

#[repr(align(64))]
struct Padded<T>(T);

/// Counters of a punt queue (its refusals are also the punted frames'
/// verdicts, counted per ingress port under their [`DropReason`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PuntStats {
    /// Taken into the queue (`to_controller`).
    pub queued: u64,
    /// Popped by the control plane.
    pub popped: u64,
    /// Refused: queue full (`controller_queue_full`).
    pub queue_full: u64,
    /// Refused: over the rate limit (`controller_rate_limit`).
    pub rate_limited: u64,
    /// Refused: no consumer connected (`no_controller`).
    pub no_controller: u64,
}

/// A punt queue with its rate limit, made by the logic that punts into it.
pub struct Punt {
    slots: Box<[Slot]>,
    mask: usize,
    head: Padded<AtomicUsize>,
    tail: Padded<AtomicUsize>,
    /// Connected consumers (set by the control plane).
    controllers: AtomicUsize,
    /// The consumer sleeps (or is about to) on `wake`.
    asleep: Padded<AtomicBool>,
    /// Written by a producer that found `asleep` raised.
    wake: EventFd,
    /// Eventfd writes by producers (consumer wake-ups).
    wakeups: AtomicU64,
    /// GCRA: theoretical arrival time of the next punt, ns since `epoch`.
    tat: Padded<AtomicU64>,
    interval_ns: u64,
    tau_ns: u64,
    rate: u64,
    burst: u64,
    epoch: Instant,
    queued: AtomicU64,
    popped: AtomicU64,
    queue_full: AtomicU64,
    rate_limited: AtomicU64,
    no_controller: AtomicU64,
}

// SAFETY: a slot's cells are written only by the producer that won its
// sequence number with the CAS on `head`, and read only by the consumer
// that won it on `tail`, each ordered by the slot's `seq` (release after
// writing, acquire before reading), as in Vyukov's bounded queue.
unsafe impl Sync for Punt {}
// SAFETY: the queue owns everything it holds (the slots' bytes, atomics,
// its eventfd); moving it to another thread moves no reference.
unsafe impl Send for Punt {}

impl Punt {
    /// A queue of `spec.slots` limited to `spec.rate` punts per second in
    /// bursts of `spec.burst`. (A logic checks its own settings first, with
    /// its own words; these errors are the fabric's.)
    pub fn new(spec: PuntSpec) -> Result<Punt, String> {
        let PuntSpec { slots, rate, burst } = spec;
        if slots == 0 || slots > MAX_SLOTS || !slots.is_power_of_two() {
            return Err(format!("slots must be a power of two in 1..={MAX_SLOTS}"));
        }
        if rate == 0 || rate > MAX_RATE {
            return Err(format!("rate must be in 1..={MAX_RATE}"));
        }
        if burst == 0 || burst > MAX_RATE {
            return Err(format!("burst must be in 1..={MAX_RATE}"));
        }
        let interval_ns = 1_000_000_000 / rate;
        let wake = EventFd::new().map_err(|e| format!("eventfd: {e}"))?;
        Ok(Punt {
            slots: (0..slots)
                .map(|i| Slot {
                    seq: AtomicUsize::new(i),
                    meta: UnsafeCell::new(Meta::default()),
                    data: UnsafeCell::new([0; SLOT_BYTES]),
                })
                .collect(),
            mask: slots - 1,
            head: Padded(AtomicUsize::new(0)),
            tail: Padded(AtomicUsize::new(0)),
            controllers: AtomicUsize::new(0),
            asleep: Padded(AtomicBool::new(false)),
            wake,
            wakeups: AtomicU64::new(0),
            tat: Padded(AtomicU64::new(0)),
            interval_ns,
            tau_ns: interval_ns * (burst - 1),
            rate,
            burst,
            epoch: Instant::now(),
            queued: AtomicU64::new(0),
            popped: AtomicU64::new(0),
            queue_full: AtomicU64::new(0),
            rate_limited: AtomicU64::new(0),
            no_controller: AtomicU64::new(0),
        })
    }

    /// Slots of the queue.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// (rate per second, burst).
    pub fn limit(&self) -> (u64, u64) {
        (self.rate, self.burst)
    }

    /// Tells the queue how many consumers (controllers) would receive
    /// punted frames; with none, every punt is refused (`no_controller`).
    pub fn set_controllers(&self, n: usize) {
        self.controllers.store(n, Ordering::Relaxed);
    }

    /// Connected consumers, as the control plane last said.
    pub fn controllers(&self) -> usize {
        self.controllers.load(Ordering::Relaxed)
    }

    /// Counters.
    pub fn stats(&self) -> PuntStats {
        let l = |a: &AtomicU64| a.load(Ordering::Relaxed);
        PuntStats {
            queued: l(&self.queued),
            popped: l(&self.popped),
            queue_full: l(&self.queue_full),
            rate_limited: l(&self.rate_limited),
            no_controller: l(&self.no_controller),
        }
    }

    /// One token of the rate limit, if there is one now.
    #[inline]
    fn admit(&self) -> bool {
        let now = self.epoch.elapsed().as_nanos() as u64;
        let mut tat = self.tat.0.load(Ordering::Relaxed);
        loop {
            let base = tat.max(now);
            if base - now > self.tau_ns {
                return false;
            }
            match self.tat.0.compare_exchange_weak(
                tat,
                base + self.interval_ns,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return true,
                Err(t) => tat = t,
            }
        }
    }

    /// Data path: queues `frame`, cut to `max_len` bytes (and to
    /// [`SLOT_BYTES`]), for the control plane; the verdict's reason
    /// (`ToController` when taken, else the refusal). Never blocks or
    /// allocates.
    #[inline]
    pub fn push(&self, meta: PuntMeta, max_len: usize, frame: &[u8]) -> DropReason {
        if self.controllers.load(Ordering::Relaxed) == 0 {
            self.no_controller.fetch_add(1, Ordering::Relaxed);
            return DropReason::NoController;
        }
        if !self.admit() {
            self.rate_limited.fetch_add(1, Ordering::Relaxed);
            return DropReason::ControllerRateLimit;
        }
        let Some((pos, slot)) = self.claim(&self.head.0, 0) else {
            self.queue_full.fetch_add(1, Ordering::Relaxed);
            return DropReason::ControllerQueueFull;
        };
        let n = frame.len().min(max_len).min(SLOT_BYTES);
        // SAFETY: we won slot `pos` (see the `Sync` impl); nobody reads it
        // until the release store below.
        unsafe {
            (&mut *slot.data.get())[..n].copy_from_slice(&frame[..n]);
            *slot.meta.get() = Meta {
                meta,
                total_len: frame.len().min(u16::MAX as usize) as u16,
                len: n as u16,
            };
        }
        slot.seq.store(pos + 1, Ordering::Release);
        self.queued.fetch_add(1, Ordering::Relaxed);
        // Pairs with the fence in `sleep_begin` (see the module's doc).
        fence(Ordering::SeqCst);
        if self.asleep.0.load(Ordering::Relaxed) && self.asleep.0.swap(false, Ordering::AcqRel) {
            self.wakeups.fetch_add(1, Ordering::Relaxed);
            self.wake.notify();
        }
        DropReason::ToController
    }

    /// Whether a punted frame is ready to pop (control path).
    fn ready(&self) -> bool {
        let pos = self.tail.0.load(Ordering::Relaxed);
        let seq = self.slots[pos & self.mask].seq.load(Ordering::Acquire);
        seq as isize - (pos + 1) as isize >= 0
    }

    /// Control path, the consumer only: about to sleep on [`wake_fd`]
    /// (`poll` for readable). False: a frame is ready, do not sleep.
    /// True: sleep, then call [`sleep_end`].
    ///
    /// [`wake_fd`]: Punt::wake_fd
    /// [`sleep_end`]: Punt::sleep_end
    pub fn sleep_begin(&self) -> bool {
        self.asleep.0.store(true, Ordering::Relaxed);
        fence(Ordering::SeqCst);
        if self.ready() {
            self.asleep.0.store(false, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Control path: after the sleep that [`Punt::sleep_begin`] allowed:
    /// lowers the flag and clears the eventfd.
    pub fn sleep_end(&self) {
        self.asleep.0.store(false, Ordering::Relaxed);
        self.wake.drain();
    }

    /// The eventfd a producer writes when the consumer sleeps.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.fd()
    }

    /// Times a producer woke the consumer (eventfd writes).
    pub fn wakeups(&self) -> u64 {
        self.wakeups.load(Ordering::Relaxed)
    }

    /// Wins the next position of `index` (`head` for a producer, `tail`
    /// for the consumer) and its slot: the slot is ready when its `seq` is
    /// the position plus `ready` (0: free to write, 1: written). None when
    /// it is not (the queue is full, or empty); another winner of the same
    /// position makes it try the next.
    #[inline]
    fn claim(&self, index: &AtomicUsize, ready: usize) -> Option<(usize, &Slot)> {
        let mut pos = index.load(Ordering::Relaxed);
        loop {
            let slot = &self.slots[pos & self.mask];
            let seq = slot.seq.load(Ordering::Acquire);
            let dif = seq as isize - (pos + ready) as isize;
            if dif == 0 {
                match index.compare_exchange_weak(
                    pos,
                    pos + 1,
                    Ordering::Relaxed,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some((pos, slot)),
                    Err(p) => pos = p,
                }
            } else if dif < 0 {
                return None;
            } else {
                pos = index.load(Ordering::Relaxed);
            }
        }
    }

    /// Control path: the oldest punted frame, if any.
    pub fn pop(&self) -> Option<Punted> {
        let (pos, slot) = self.claim(&self.tail.0, 1)?;
        // SAFETY: we won slot `pos` for reading; its producer published it
        // (acquire above) and no producer reuses it before the store below.
        let p = unsafe {
            let m = *slot.meta.get();
            Punted {
                meta: m.meta,
                total_len: m.total_len,
                data: (&*slot.data.get())[..m.len as usize].to_vec(),
            }
        };
        slot.seq.store(pos + self.mask + 1, Ordering::Release);
        self.popped.fetch_add(1, Ordering::Relaxed);
        Some(p)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// The whole frame (as `flows`' `OFPCML_NO_BUFFER`).
    const NO_BUFFER: usize = usize::MAX;
    /// A reason code (as `flows`' `OFPR_ACTION`).
    const REASON_ACTION: u8 = 1;

    fn new_q(slots: usize, rate: u64, burst: u64) -> Result<Punt, String> {
        Punt::new(PuntSpec { slots, rate, burst })
    }

    fn push(
        q: &Punt,
        ingress: PortId,
        tag: u8,
        reason: u8,
        cookie: u64,
        max_len: usize,
        frame: &[u8],
    ) -> DropReason {
        let meta = PuntMeta {
            ingress,
            reason,
            tag,
            cookie,
        };
        q.push(meta, max_len, frame)
    }

    #[test]
    fn no_controller_refuses_first() {
        let q = new_q(4, 1000, 10).unwrap();
        assert_eq!(
            push(&q, 0, 0, 0, 0, NO_BUFFER, &[1; 60]),
            DropReason::NoController
        );
        assert_eq!(q.pop(), None);
        assert_eq!(q.stats().no_controller, 1);
    }

    #[test]
    fn fifo_truncation_and_full() {
        let q = new_q(4, MAX_RATE, MAX_RATE).unwrap();
        q.set_controllers(1);
        for i in 0..4u8 {
            let f = vec![i; 100];
            assert_eq!(
                push(&q, i as u16, 3, REASON_ACTION, 7, 64, &f),
                DropReason::ToController
            );
        }
        assert_eq!(
            push(&q, 9, 0, 0, 0, NO_BUFFER, &[0; 60]),
            DropReason::ControllerQueueFull
        );
        for i in 0..4u8 {
            let p = q.pop().unwrap();
            assert_eq!(
                (p.meta.ingress, p.meta.tag, p.meta.reason, p.meta.cookie),
                (i as u16, 3, 1, 7)
            );
            assert_eq!(p.total_len, 100);
            assert_eq!(p.data, vec![i; 64]);
        }
        assert_eq!(q.pop(), None);
        // Slots are reused after a pop; a jumbo frame is cut to a slot.
        assert_eq!(
            push(&q, 1, 0, 0, 0, NO_BUFFER, &[5; 9000]),
            DropReason::ToController
        );
        let p = q.pop().unwrap();
        assert_eq!((p.total_len, p.data.len()), (9000, SLOT_BYTES));
        let s = q.stats();
        assert_eq!((s.queued, s.popped, s.queue_full), (5, 5, 1));
    }

    #[test]
    fn rate_limit_allows_the_burst_then_refuses() {
        // 1 per second, bursts of 5: five at once, then refused.
        let q = new_q(64, 1, 5).unwrap();
        q.set_controllers(1);
        let got: Vec<DropReason> = (0..8).map(|_| push(&q, 0, 0, 0, 0, 64, &[0; 64])).collect();
        assert_eq!(
            got.iter()
                .filter(|r| **r == DropReason::ToController)
                .count(),
            5
        );
        assert_eq!(
            got.iter()
                .filter(|r| **r == DropReason::ControllerRateLimit)
                .count(),
            3
        );
        assert_eq!(q.stats().rate_limited, 3);
    }

    fn poll_in(fd: RawFd, ms: i32) -> bool {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd that outlives the call.
        unsafe { libc::poll(&mut p, 1, ms) > 0 }
    }

    #[test]
    fn a_sleeping_consumer_is_woken_once_and_a_busy_one_never() {
        let q = new_q(8, MAX_RATE, MAX_RATE).unwrap();
        q.set_controllers(1);
        // Not asleep: a push writes nothing.
        push(&q, 0, 0, 0, 0, 64, &[0; 64]);
        assert_eq!(q.wakeups(), 0);
        assert!(!poll_in(q.wake_fd(), 0));
        // Something queued: no sleep.
        assert!(!q.sleep_begin());
        assert!(q.pop().is_some());
        // Empty: sleep; the first push wakes, the next ones do not write.
        assert!(q.sleep_begin());
        assert!(!poll_in(q.wake_fd(), 0));
        for _ in 0..3 {
            push(&q, 0, 0, 0, 0, 64, &[0; 64]);
        }
        assert!(poll_in(q.wake_fd(), 0));
        assert_eq!(q.wakeups(), 1);
        q.sleep_end();
        assert!(!poll_in(q.wake_fd(), 0), "sleep_end clears the eventfd");
        // A refused push (no controller) never wakes.
        while q.pop().is_some() {}
        q.set_controllers(0);
        assert!(q.sleep_begin());
        push(&q, 0, 0, 0, 0, 64, &[0; 64]);
        assert!(!poll_in(q.wake_fd(), 0));
        q.sleep_end();
    }

    #[test]
    fn no_packet_in_waits_for_the_timeout() {
        // The consumer sleeps with a 20 s timeout; producers push with
        // pauses so it is asleep for most pushes. A lost wake-up (the race
        // between its last look and a push) would hold a packet-in for the
        // timeout; the whole run must take far less. The queue holds every
        // push (a consumer descheduled on a busy machine must not make a
        // producer's push refused, which would stop that producer and
        // leave the consumer waiting for frames never sent).
        let q = Arc::new(new_q(4096, MAX_RATE, MAX_RATE).unwrap());
        q.set_controllers(1);
        const EACH: u64 = 2000;
        let t0 = Instant::now();
        let producers: Vec<_> = (0..2u16)
            .map(|w| {
                let q = q.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        assert_eq!(push(&q, w, 0, 0, i, 64, &[0; 64]), DropReason::ToController);
                        if i % 16 == 0 {
                            std::thread::sleep(std::time::Duration::from_micros(50));
                        }
                    }
                })
            })
            .collect();
        let mut got = 0;
        let mut slept = 0;
        while got < 2 * EACH {
            if let Some(_p) = q.pop() {
                got += 1;
                continue;
            }
            if q.sleep_begin() {
                slept += 1;
                let t = Instant::now();
                poll_in(q.wake_fd(), 20_000);
                assert!(
                    t.elapsed().as_secs() < 10,
                    "a packet-in waited for the timeout (lost wake-up)"
                );
                q.sleep_end();
            }
        }
        for p in producers {
            p.join().unwrap();
        }
        assert!(slept > 0 && q.wakeups() > 0, "never slept: not a test");
        assert!(t0.elapsed().as_secs() < 10);
    }

    #[test]
    fn bad_settings_are_refused() {
        assert!(new_q(3, 10, 1).is_err());
        assert!(new_q(0, 10, 1).is_err());
        assert!(new_q(MAX_SLOTS * 2, 10, 1).is_err());
        assert!(new_q(8, 0, 1).is_err());
        assert!(new_q(8, 10, 0).is_err());
    }

    #[test]
    fn many_producers_one_consumer_lose_nothing_they_were_told_was_taken() {
        let q = Arc::new(new_q(64, MAX_RATE, MAX_RATE).unwrap());
        q.set_controllers(1);
        let producers: Vec<_> = (0..4u16)
            .map(|w| {
                let q = q.clone();
                std::thread::spawn(move || {
                    let mut taken = 0u64;
                    for i in 0..20_000u32 {
                        let mut f = [0u8; 64];
                        f[..2].copy_from_slice(&w.to_be_bytes());
                        f[2..6].copy_from_slice(&i.to_be_bytes());
                        if push(&q, w, 0, 0, i as u64, NO_BUFFER, &f) == DropReason::ToController {
                            taken += 1;
                        }
                    }
                    taken
                })
            })
            .collect();
        let mut popped = 0u64;
        let mut last = [None::<u32>; 4];
        let mut done = false;
        while !done {
            done = producers.iter().all(|p| p.is_finished());
            while let Some(p) = q.pop() {
                let w = u16::from_be_bytes([p.data[0], p.data[1]]);
                let i = u32::from_be_bytes([p.data[2], p.data[3], p.data[4], p.data[5]]);
                assert_eq!((p.meta.ingress, p.meta.cookie), (w, i as u64), "slot torn");
                // Per producer, packet-ins come out in order.
                assert!(last[w as usize].is_none_or(|l| l < i));
                last[w as usize] = Some(i);
                popped += 1;
            }
        }
        let taken: u64 = producers.into_iter().map(|p| p.join().unwrap()).sum();
        assert_eq!(popped, taken);
        let s = q.stats();
        assert_eq!(s.queued + s.queue_full, 80_000);
    }

    #[test]
    fn a_logic_offers_its_queue_and_an_arc_of_the_logic_forwards_it() {
        struct L(Option<Arc<Punt>>);
        impl crate::Logic for L {
            fn name(&self) -> &'static str {
                "l"
            }
            fn classify(
                &self,
                _: &crate::Ctx,
                _: PortId,
                _: &mut crate::Pkts,
                _: &mut [crate::Verdict],
            ) {
            }
            fn punt(&self) -> Option<Arc<Punt>> {
                self.0.clone()
            }
        }
        let q = Arc::new(new_q(8, 10, 1).unwrap());
        let l: Arc<dyn crate::Logic> = Arc::new(L(Some(q.clone())));
        let got = crate::Logic::punt(&l).unwrap();
        assert!(Arc::ptr_eq(&got, &q));
        assert!(crate::Logic::punt(&L(None)).is_none());
    }
}
