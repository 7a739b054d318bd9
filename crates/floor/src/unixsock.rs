//! Listening unix-domain sockets that appear at their path already
//! listening and with their permissions set.
//!
//! [`listen_unix`] binds under a temporary name in the same directory,
//! sets the mode, listens, then links the socket at its path and removes
//! the temporary name. A client that waits for the file and then connects
//! never finds it there before it listens (binding at the path itself makes
//! the file a moment before `listen`, and a connection in that moment is
//! refused), nor with the umask's looser mode. The link fails where the
//! path exists by then (another process bound it since the check): its
//! socket is never taken over.
//!
//! A socket file nobody listens on (left by a process that ended) is
//! replaced; one somebody listens on is an [`io::ErrorKind::AddrInUse`]
//! error, any other kind of file an [`io::ErrorKind::AlreadyExists`] one.
//! Where the temporary name would be too long for a socket address, it
//! binds at the path directly.

use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// How many connections may wait for `accept`.
const BACKLOG: libc::c_int = 128;

fn cvt(r: libc::c_int) -> io::Result<libc::c_int> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// The address of `path`; `InvalidInput` when it does not fit.
fn sockaddr(path: &Path) -> io::Result<(libc::sockaddr_un, libc::socklen_t)> {
    // SAFETY: sockaddr_un is plain data; all-zero is a valid value.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let b = path.as_os_str().as_bytes();
    if b.is_empty() || b.len() >= a.sun_path.len() || b.contains(&0) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: a socket path is 1..{} bytes without NUL",
                path.display(),
                a.sun_path.len() - 1
            ),
        ));
    }
    for (d, s) in a.sun_path.iter_mut().zip(b) {
        *d = *s as libc::c_char;
    }
    Ok((
        a,
        std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t,
    ))
}

/// A new unix-domain socket of `ty` (`SOCK_STREAM`, `SOCK_SEQPACKET`, with
/// `SOCK_NONBLOCK` if wanted), close-on-exec.
fn socket(ty: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2); the descriptor is owned from here on.
    let fd = cvt(unsafe { libc::socket(libc::AF_UNIX, ty | libc::SOCK_CLOEXEC, 0) })?;
    // SAFETY: a descriptor we just created and nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn bind(fd: &OwnedFd, path: &Path) -> io::Result<()> {
    let (a, l) = sockaddr(path)?;
    // SAFETY: a valid socket and address of length `l`.
    cvt(unsafe { libc::bind(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, l) })?;
    Ok(())
}

/// Connects a unix-domain socket of type `ty` (`libc::SOCK_STREAM` or
/// `libc::SOCK_SEQPACKET`) to `path`, close-on-exec and non-blocking: it
/// never waits, a listener whose backlog is full (one that never accepts)
/// is an error (`EAGAIN`, `WouldBlock`). A path too long for a socket
/// address is `InvalidInput`.
pub fn connect_unix(path: &Path, ty: libc::c_int) -> io::Result<OwnedFd> {
    let (a, l) = sockaddr(path)?;
    let fd = socket((ty & !libc::SOCK_CLOEXEC) | libc::SOCK_NONBLOCK)?;
    // SAFETY: a valid socket and address. A unix-domain connect completes
    // at once or fails (EAGAIN when the backlog is full).
    cvt(unsafe { libc::connect(fd.as_raw_fd(), &a as *const _ as *const libc::sockaddr, l) })?;
    Ok(fd)
}

/// Whether a process listens on the socket file at `path` (a socket of the
/// same type connects, or its backlog is full).
fn live(path: &Path, ty: libc::c_int) -> bool {
    match connect_unix(path, ty & !libc::SOCK_NONBLOCK) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() == Some(libc::EAGAIN),
    }
}

fn in_use(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AddrInUse,
        format!("{} is in use by another process", path.display()),
    )
}

/// The temporary name beside `path`: `.NAME.PID.tmp` in its directory.
fn temporary(path: &Path) -> PathBuf {
    let mut name = OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{}.tmp", std::process::id()));
    path.with_file_name(name)
}

/// A socket of type `ty` (`libc::SOCK_STREAM` or `libc::SOCK_SEQPACKET`,
/// or-ed with `libc::SOCK_NONBLOCK` for a non-blocking one) listening at
/// `path` with permission bits `mode` (module doc). The parent directory
/// must exist.
pub fn listen_unix(path: &Path, ty: libc::c_int, mode: u32) -> io::Result<OwnedFd> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_socket() => {
            if live(path, ty) {
                return Err(in_use(path));
            }
            std::fs::remove_file(path)?;
        }
        Ok(_) => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{} exists and is not a socket", path.display()),
            ))
        }
        Err(_) => {}
    }
    let fd = socket(ty)?;
    let listen = |fd: &OwnedFd| {
        // SAFETY: a valid bound socket.
        cvt(unsafe { libc::listen(fd.as_raw_fd(), BACKLOG) }).map(drop)
    };
    let tmp = temporary(path);
    let _ = std::fs::remove_file(&tmp);
    match bind(&fd, &tmp) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::InvalidInput => {
            // too long beside it: in place, the mode set before it listens
            bind(&fd, path)?;
            let placed = std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
                .and_then(|()| listen(&fd));
            if let Err(e) = placed {
                let _ = std::fs::remove_file(path);
                return Err(e);
            }
            return Ok(fd);
        }
        Err(e) => return Err(e),
    }
    let placed = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
        .and_then(|()| listen(&fd))
        .and_then(|()| std::fs::hard_link(&tmp, path));
    let _ = std::fs::remove_file(&tmp);
    match placed {
        Ok(()) => Ok(fd),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Err(in_use(path)),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::{UnixListener, UnixStream};

    fn dir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("floor-unixsock-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn names(d: &Path) -> Vec<String> {
        let mut v: Vec<_> = std::fs::read_dir(d)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn appears_listening_with_its_mode_and_leaves_no_temporary_name() {
        let d = dir("appears");
        let p = d.join("s.sock");
        let l = UnixListener::from(listen_unix(&p, libc::SOCK_STREAM, 0o640).unwrap());
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o640
        );
        let c = UnixStream::connect(&p).expect("listening as soon as it is there");
        let (mut a, _) = l.accept().unwrap();
        (&c).write_all(b"x").unwrap();
        let mut b = [0u8; 1];
        a.read_exact(&mut b).unwrap();
        assert_eq!(names(&d), ["s.sock"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_stale_socket_is_replaced_a_live_one_and_other_files_are_not() {
        let d = dir("existing");
        let p = d.join("s.sock");
        for ty in [
            libc::SOCK_STREAM,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK,
        ] {
            let first = listen_unix(&p, ty, 0o600).unwrap();
            let e = listen_unix(&p, ty, 0o600).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::AddrInUse, "{e}");
            assert!(
                e.to_string().ends_with("is in use by another process"),
                "{e}"
            );
            // the live one still takes connections
            assert!(live(&p, ty));
            drop(first);
            let again = listen_unix(&p, ty, 0o600).expect("the stale file replaced");
            assert!(live(&p, ty));
            drop(again);
            std::fs::remove_file(&p).unwrap();
        }
        let f = d.join("file");
        std::fs::write(&f, b"keep").unwrap();
        let e = listen_unix(&f, libc::SOCK_STREAM, 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AlreadyExists);
        assert!(e.to_string().ends_with("exists and is not a socket"), "{e}");
        assert_eq!(std::fs::read(&f).unwrap(), b"keep");
        assert_eq!(names(&d), ["file"]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_path_too_long_for_a_temporary_name_beside_it_is_bound_in_place() {
        let d = dir("long");
        // 107 bytes: fits a socket address, its temporary name does not
        let n = 107 - d.as_os_str().len() - 1;
        let p = d.join("x".repeat(n));
        assert_eq!(p.as_os_str().len(), 107);
        let l = listen_unix(&p, libc::SOCK_STREAM, 0o600).unwrap();
        assert_eq!(
            std::fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            0o600
        );
        UnixStream::connect(&p).unwrap();
        drop(l);
        let too_long = d.join("y".repeat(n + 1));
        let e = listen_unix(&too_long, libc::SOCK_STREAM, 0o600).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput, "{e}");
        std::fs::remove_dir_all(&d).unwrap();
    }
}
