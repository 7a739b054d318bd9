//! A memif server holds every descriptor it keeps by the time `bind`
//! returns: its control thread's epoll set is not created later, behind
//! the caller's back. The fuzz target `memif_msg` counts the process's open
//! descriptors before and after each connection; when the control thread
//! made its epoll set itself, the first count could come before it and the
//! second after, a "leak" of one descriptor in about half of single runs.
//! Its own test binary (one test, one thread): nothing else opens
//! descriptors meanwhile. `cargo test -p ports --test memif_server_fds`.

use std::time::Duration;

use ports::memif::{MemifServer, ServerConfig};

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn bind_returns_with_the_control_thread_set_up() {
    let dir = std::env::temp_dir().join(format!("fuzzfix-memif-fds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let before = open_fds();
    for round in 0..20 {
        let server = MemifServer::bind(ServerConfig::new(dir.join("memif.sock"))).unwrap();
        let at_bind = open_fds();
        // Long enough for any thread start-up, even on a loaded machine.
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(
            open_fds(),
            at_bind,
            "round {round}: descriptors opened after bind returned"
        );
        drop(server);
        assert_eq!(
            open_fds(),
            before,
            "round {round}: the server closed all it had"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
