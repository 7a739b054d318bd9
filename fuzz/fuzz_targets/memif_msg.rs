//! A hostile memif client's control messages against the server's real
//! handling (`server.rs`): any sequence of messages of any size, with
//! memfds (sealed or not, any size), eventfds or several descriptors
//! attached. The server must end every connection with a reason, leave
//! both interfaces free afterwards, and close every descriptor it was
//! given. Decoding itself must round-trip.
#![no_main]

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use libfuzzer_sys::fuzz_target;
use ports::memif::fuzzing::Control;
use ports::memif::proto::{check_ring_placement, Msg, COOKIE, MSG_SIZE};

mod common;
use common::Input;

thread_local! {
    static CTL: Control = Control::new().expect("memif server");
}

/// A memfd of `pages` pages with the ring cookie every 256 bytes, so
/// rings the fuzzer places at such offsets pass the cookie check.
fn region(pages: u8, seal: bool) -> OwnedFd {
    let len = pages as u64 * 4096;
    let fd = common::memfd(len, seal);
    let mut buf = vec![0u8; len.min(1 << 16) as usize];
    for c in buf.chunks_mut(256) {
        if c.len() >= 4 {
            c[..4].copy_from_slice(&COOKIE.to_le_bytes());
        }
    }
    // SAFETY: writes our buffer to our descriptor.
    unsafe { libc::pwrite(fd.as_raw_fd(), buf.as_ptr() as *const _, buf.len(), 0) };
    fd
}

fn decode_checks(b: &[u8]) {
    if let Ok(m) = Msg::decode(b) {
        assert_eq!(b.len(), MSG_SIZE);
        let e = m.encode();
        let again = Msg::decode(&e).expect("an encoded message decodes");
        // Strings are cut at NUL and made UTF-8 on decode; after that
        // the round trip is exact.
        assert_eq!(Msg::decode(&again.encode()).unwrap(), again);
        assert_eq!(again.name(), m.name());
        if let Msg::AddRing(r) = m {
            let _ = check_ring_placement(&r, u64::MAX);
            let _ = check_ring_placement(&r, 1 << 16);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    CTL.with(|ctl| {
        let fds_before = common::open_fds();
        let (peer, ours) = common::pair(libc::SOCK_SEQPACKET);
        let mut inp = Input(data);
        let mut n = 0;
        while !inp.is_empty() && n < 64 {
            n += 1;
            let Some(ctl_b) = inp.u8() else { break };
            let len = if ctl_b & 0x80 != 0 {
                inp.u8().unwrap_or(0) as usize
            } else {
                MSG_SIZE
            };
            let mut fds: Vec<OwnedFd> = Vec::new();
            let kind = ctl_b & 3;
            let count = if ctl_b & 4 != 0 { 2 } else { 1 };
            for _ in 0..count {
                match kind {
                    1 => fds.push(region(inp.u8().unwrap_or(1), true)),
                    2 => fds.push(region(inp.u8().unwrap_or(1), false)),
                    3 => fds.push(common::eventfd()),
                    _ => {}
                }
            }
            let mut msg = inp.bytes(len).to_vec();
            if ctl_b & 0x80 == 0 {
                msg.resize(MSG_SIZE, 0);
            }
            decode_checks(&msg);
            let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
            if !common::send(peer.as_raw_fd(), &msg, &raw) {
                break;
            }
        }
        // End of the peer's messages: the server reads them, then EOF.
        // SAFETY: plain syscall on our socket.
        unsafe { libc::shutdown(peer.as_raw_fd(), libc::SHUT_WR) };
        let why = ctl.serve(ours);
        if std::env::var_os("FUZZ_DEBUG").is_some() {
            eprintln!("end: {why}");
        }
        assert!(!why.is_empty(), "every end has a reason");
        for id in 0..2 {
            assert!(
                !ctl.busy(id),
                "interface {id} free after the connection ended ({why})"
            );
        }
        // What the server said: hello first; a disconnect carries a reason.
        let mut buf = [0u8; 256];
        let mut first = true;
        loop {
            // SAFETY: reads into our buffer.
            let r = unsafe {
                libc::recv(
                    peer.as_raw_fd(),
                    buf.as_mut_ptr() as *mut _,
                    buf.len(),
                    libc::MSG_DONTWAIT,
                )
            };
            if r <= 0 {
                break;
            }
            let m = Msg::decode(&buf[..r as usize]).expect("the server sends valid messages");
            if first {
                assert!(matches!(m, Msg::Hello(_)), "hello first");
                first = false;
            }
            if let Msg::Disconnect(d) = m {
                assert!(!d.reason.is_empty());
            }
        }
        drop(peer);
        assert_eq!(
            common::open_fds(),
            fds_before,
            "no descriptor leaked ({why})"
        );
    });
});
