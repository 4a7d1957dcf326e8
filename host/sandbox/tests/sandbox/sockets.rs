//! Sockets, signals and metadata in the sandbox, on this machine's kernel:
//! a Unix-socket connect reaches the workspace, the session temp dir and
//! `allow_unix_sockets` only (a symlink out is followed and refused), bind
//! stays inside the writable roots, Unix datagram sockets and io_uring are
//! refused, abstract sockets and signals stay inside the sandbox, and
//! `read-only` writes no metadata.

use super::*;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram, UnixListener, UnixStream};

const EPERM: i32 = 1;
const ENOSYS: i32 = 38;
const ESRCH: i32 = 3;

/// The operations only these tests probe (run by [`super::probe_entry`]).
pub fn probe(op: &str, target: &str) -> std::io::Result<()> {
    let c = |p: &str| std::ffi::CString::new(p).unwrap();
    let ok = |r: libc::c_long| {
        if r < 0 {
            Err(std::io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    match op {
        "unix-bind" => UnixListener::bind(target).map(drop),
        "abstract-connect" => {
            UnixStream::connect_addr(&SocketAddr::from_abstract_name(target)?).map(drop)
        }
        "dgram" => UnixDatagram::unbound().map(drop),
        "dgram-pair" => UnixDatagram::pair().map(drop),
        "seqpacket-pair" => {
            let mut fds = [0; 2];
            // SAFETY: socketpair fills the array.
            ok(
                unsafe {
                    libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr())
                } as libc::c_long,
            )
        }
        "io-uring" => {
            let mut params = [0u8; 120];
            // SAFETY: io_uring_setup writes into the 120-byte params.
            ok(unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) })
        }
        "kill" => {
            // SAFETY: signal 0 only checks permission.
            ok(unsafe { libc::kill(target.parse().unwrap(), 0) } as libc::c_long)
        }
        "chmod" => {
            // SAFETY: a valid C string.
            ok(unsafe { libc::chmod(c(target).as_ptr(), 0o600) } as libc::c_long)
        }
        "chown" => {
            // SAFETY: a valid C string; -1 keeps both ids.
            ok(unsafe { libc::chown(c(target).as_ptr(), u32::MAX, u32::MAX) } as libc::c_long)
        }
        "utime" => {
            // SAFETY: a valid C string; NULL means now.
            ok(unsafe { libc::utimes(c(target).as_ptr(), std::ptr::null()) } as libc::c_long)
        }
        "truncate" => {
            // SAFETY: a valid C string.
            ok(unsafe { libc::truncate(c(target).as_ptr(), 0) } as libc::c_long)
        }
        "setxattr" => {
            // SAFETY: valid C strings and a 1-byte value.
            ok(unsafe {
                libc::setxattr(
                    c(target).as_ptr(),
                    c"user.latch".as_ptr(),
                    b"x".as_ptr().cast(),
                    1,
                    0,
                )
            } as libc::c_long)
        }
        other => panic!("unknown probe {other}"),
    }
}

/// Run probe `op target` under `sb`; the errno it met, or `None` when the
/// operation succeeded.
fn errno_of(sb: &Sandbox, op: &str, target: &str) -> Option<i32> {
    errno_in(sb, Path::new("/"), op, target)
}

/// [`errno_of`] with the probe's working directory at `dir`.
fn errno_in(sb: &Sandbox, dir: &Path, op: &str, target: &str) -> Option<i32> {
    let mut cmd = named_probe(op, target);
    cmd.current_dir(dir);
    let o = in_sandbox(sb, cmd);
    let out = String::from_utf8_lossy(&o.stdout);
    if out.contains("PROBE-OK") {
        return None;
    }
    let tail = out
        .split("PROBE-ERR ")
        .nth(1)
        .unwrap_or_else(|| panic!("{op} {target}: {}", text(&o)));
    Some(tail.split_whitespace().next().unwrap().parse().unwrap())
}

/// A listener at `path`, accepting nothing: a connect succeeds when allowed.
fn listen(path: &Path) -> UnixListener {
    let _ = std::fs::remove_file(path);
    UnixListener::bind(path).unwrap()
}

#[test]
fn unix_connects_reach_the_workspace_and_temp_dir_only() {
    let f = fixture();
    let outside = listen(&f.outside.path().join("bus.sock"));
    let inside = listen(&f.ws.path().join("app.sock"));
    std::os::unix::fs::symlink(
        f.outside.path().join("bus.sock"),
        f.ws.path().join("link.sock"),
    )
    .unwrap();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        for network in [false, true] {
            let sb = sandbox(&f, mode, network);
            let tmp = listen(
                &sb.temp_dir()
                    .unwrap()
                    .join(format!("t-{mode}-{network}.sock")),
            );
            let at = |l: &UnixListener| {
                l.local_addr()
                    .unwrap()
                    .as_pathname()
                    .unwrap()
                    .display()
                    .to_string()
            };
            let case = format!("{mode}, network {network}");
            assert_eq!(
                errno_of(&sb, "unix-connect", &at(&outside)),
                Some(EACCES),
                "{case}"
            );
            assert_eq!(
                errno_of(
                    &sb,
                    "unix-connect",
                    &f.ws.path().join("link.sock").display().to_string()
                ),
                Some(EACCES),
                "{case}: a link in the workspace to an outside socket"
            );
            assert_eq!(errno_of(&sb, "unix-connect", &at(&inside)), None, "{case}");
            assert_eq!(
                errno_in(&sb, f.ws.path(), "unix-connect", "app.sock"),
                None,
                "{case}: relative"
            );
            assert_eq!(
                errno_of(&sb, "unix-connect", &at(&tmp)),
                None,
                "{case}: $TMPDIR"
            );
        }
    }
    // A socket the user allows is reachable.
    let allowed = Sandbox::new(
        SandboxPolicy {
            allow_unix_sockets: vec![f.outside.path().join("bus.sock")],
            ..SandboxPolicy::default()
        },
        f.ws.path(),
        "test-session",
    )
    .unwrap();
    let bus = f.outside.path().join("bus.sock").display().to_string();
    assert_eq!(errno_of(&allowed, "unix-connect", &bus), None);
    // full-access is not confined.
    let free = sandbox(&f, SandboxMode::FullAccess, true);
    assert_eq!(errno_of(&free, "unix-connect", &bus), None);
}

#[test]
fn unix_binds_stay_inside_the_writable_roots() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    let out = f.outside.path().join("squat.sock").display().to_string();
    assert_eq!(errno_of(&sb, "unix-bind", &out), Some(EACCES));
    let inside = f.ws.path().join("srv.sock").display().to_string();
    assert_eq!(errno_of(&sb, "unix-bind", &inside), None);
    let ro = sandbox(&f, SandboxMode::ReadOnly, false);
    let inside = f.ws.path().join("ro.sock").display().to_string();
    assert_eq!(errno_of(&ro, "unix-bind", &inside), Some(EACCES));
}

#[test]
fn unix_datagram_sockets_and_io_uring_are_refused_stream_pairs_work() {
    let f = fixture();
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::ReadOnly] {
        let sb = sandbox(&f, mode, false);
        assert_eq!(errno_of(&sb, "dgram", "-"), Some(EACCES), "{mode}");
        assert_eq!(errno_of(&sb, "dgram-pair", "-"), Some(EACCES), "{mode}");
        assert_eq!(errno_of(&sb, "io-uring", "-"), Some(ENOSYS), "{mode}");
        assert_eq!(errno_of(&sb, "seqpacket-pair", "-"), None, "{mode}");
    }
    let free = sandbox(&f, SandboxMode::FullAccess, false);
    assert_eq!(errno_of(&free, "dgram-pair", "-"), None);
}

#[test]
fn abstract_sockets_of_the_host_are_refused() {
    let f = fixture();
    let name = format!("latch-test-{}", std::process::id());
    let _host = UnixListener::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
    // Network off: the command's own network namespace has no such name.
    let off = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    assert_eq!(errno_of(&off, "abstract-connect", &name), Some(111)); // ECONNREFUSED
    // Network on: the host's names are refused all the same.
    let on = sandbox(&f, SandboxMode::WorkspaceWrite, true);
    assert_eq!(errno_of(&on, "abstract-connect", &name), Some(EPERM));
    let free = sandbox(&f, SandboxMode::FullAccess, true);
    assert_eq!(errno_of(&free, "abstract-connect", &name), None);
}

#[test]
fn signals_reach_only_the_sandbox_own_processes() {
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    if sb.landlock_abi() < latch_sandbox::landlock::SCOPED_ABI {
        eprintln!("Landlock ABI {} does not scope signals", sb.landlock_abi());
        return;
    }
    let mut outside = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = outside.id().to_string();
    // In the command's own PID namespace an outside pid names no process
    // (ESRCH); one it could name would be refused by Landlock (EPERM).
    assert!(
        matches!(errno_of(&sb, "kill", &pid), Some(EPERM | ESRCH)),
        "{:?}",
        errno_of(&sb, "kill", &pid)
    );
    let o = sh(&sb, f.ws.path(), "sleep 30 & kill $! && wait $!; echo $?");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "143\n", "{}", text(&o));
    let free = sandbox(&f, SandboxMode::FullAccess, false);
    assert_eq!(errno_of(&free, "kill", &pid), None);
    outside.kill().unwrap();
    outside.wait().unwrap();
}

#[test]
fn read_only_changes_no_metadata() {
    let f = fixture();
    let file = f.ws.path().join("inside.txt");
    let target = file.display().to_string();
    let before = std::fs::metadata(&file).unwrap();
    let ro = sandbox(&f, SandboxMode::ReadOnly, false);
    for op in ["chmod", "chown", "utime", "truncate", "setxattr"] {
        assert_eq!(errno_of(&ro, op, &target), Some(EPERM), "{op}");
    }
    let after = std::fs::metadata(&file).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (after.mode(), after.mtime(), after.len()),
        (before.mode(), before.mtime(), before.len())
    );
    // workspace-write changes the workspace's metadata as before.
    let rw = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    for op in ["chmod", "utime", "truncate"] {
        assert_eq!(errno_of(&rw, op, &target), None, "{op}");
    }
}
