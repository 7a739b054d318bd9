//! A hostile vhost-user frontend's messages against the real connection
//! handler (the `vhost` crate's framing and our `Device`): any bytes, split
//! into writes that carry memfds (of any size, including smaller than the
//! memory table claims) or eventfds. The handler must end the connection
//! with one counted reason, stop every virtqueue and close every
//! descriptor it was given; turnoutd must not crash (a SIGBUS from a
//! region larger than its file would).
#![no_main]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libfuzzer_sys::fuzz_target;
use ports::vhost_user::fuzzing::Backend;

mod common;
use common::Input;

thread_local! {
    static B: Backend = Backend::new(2).expect("backend");
}

fn counter(b: &Backend, name: &str) -> u64 {
    b.counters()
        .into_iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| v)
}

const ENDS: [&str; 3] = [
    "disconnects_hangup",
    "disconnects_lie",
    "disconnects_protocol",
];

fuzz_target!(|data: &[u8]| {
    B.with(|b| {
        let fds_before = common::open_fds();
        let ends_before: u64 = ENDS.iter().map(|n| counter(b, n)).sum();
        let (peer, ours) = common::pair(libc::SOCK_STREAM);
        let mut inp = Input(data);
        let mut n = 0;
        while !inp.is_empty() && n < 48 {
            n += 1;
            let Some(c) = inp.u8() else { break };
            let len = inp.u16().unwrap_or(0) as usize % 1024;
            let mut fds: Vec<OwnedFd> = Vec::new();
            for _ in 0..(c & 3) {
                if c & 4 != 0 {
                    let pages = inp.u8().unwrap_or(1) as u64;
                    fds.push(common::memfd(pages * 4096, c & 8 != 0));
                } else {
                    fds.push(common::eventfd());
                }
            }
            let msg = inp.bytes(len);
            if msg.is_empty() {
                break;
            }
            let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
            if !common::send(peer.as_raw_fd(), msg, &raw) {
                break;
            }
        }
        // End of input: the handler reads to EOF (its replies still fit in
        // our receive buffer: we only shut down our sending side).
        // SAFETY: plain syscall on our socket.
        unsafe { libc::shutdown(peer.as_raw_fd(), libc::SHUT_WR) };
        let stream = std::os::unix::net::UnixStream::from(ours);
        let running = std::cell::Cell::new(0);
        let end = b.serve(stream);
        if std::env::var_os("FUZZ_DEBUG").is_some() {
            eprintln!("end: {end}; counters {:?}", b.counters());
        }
        let _ = running;
        assert!(["hangup", "lie", "protocol"].contains(&end), "end {end}");
        assert_eq!(
            b.running(),
            0,
            "every virtqueue stopped after the connection"
        );
        assert!(!b.connected());
        let ends_after: u64 = ENDS.iter().map(|n| counter(b, n)).sum();
        assert_eq!(
            ends_after,
            ends_before + 1,
            "each end counted once under a reason"
        );
        drop(peer);
        assert_eq!(
            common::open_fds(),
            fds_before,
            "no descriptor leaked ({end})"
        );
    });
});
