//! Commands isolated from the terminal and from each other, on this
//! machine's kernel and a real pseudo-terminal, in every mode: a command
//! has no controlling terminal and cannot push input into the terminal it
//! was started from (`TIOCSTI`), however it tries; the user's other
//! terminals cannot be opened by a confined command; a `setsid` or
//! double-forked child dies with its command, and with Latch (even by
//! SIGKILL); a writable descriptor cannot be relayed to a later command by
//! a child left behind.

use super::*;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

const ENXIO: i32 = 6;
/// `TIOCSTI`, as the 64-bit request argument.
const STI: u64 = 0x5412;

/// The operations only these tests probe (run by [`super::probe_entry`]);
/// `None` for an operation of another module.
pub fn probe(op: &str, target: &str) -> Option<std::io::Result<()>> {
    Some(match op {
        // Read only: Landlock lets every mode read `/dev`, so what answers
        // is the terminal layer (ENXIO: no controlling terminal).
        "tty" => std::fs::File::open("/dev/tty").map(drop),
        "inject" => inject(Path::new(target)),
        "survive" => survive(target),
        "relay-serve" => {
            let (file, sock) = target.split_once(' ').unwrap();
            relay_serve(file, sock)
        }
        "relay-daemon" => {
            let (file, sock) = target.split_once(' ').unwrap();
            relay_daemon(file, sock)
        }
        "relay-take" => relay_take(target),
        "ioctl" => {
            let request = u64::from_str_radix(target.trim_start_matches("0x"), 16).unwrap();
            let mut arg = [0u8; 8];
            // SAFETY: the request reads or writes at most 8 bytes of `arg`.
            let r = unsafe { libc::ioctl(0, request as _, arg.as_mut_ptr()) };
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        }
        _ => return None,
    })
}

/// Push `id\n` into a terminal every way a command could: its standard
/// descriptors, `/dev/tty`, the terminal's own path (`target`), with the
/// request's high bits set, and as a new session leader taking the
/// terminal. Ok when one push got through.
fn inject(target: &Path) -> std::io::Result<()> {
    let sti = |fd: RawFd, request: u64| -> std::io::Result<()> {
        for b in b"id\n" {
            // SAFETY: TIOCSTI reads one byte from the pointer.
            let r = unsafe { libc::ioctl(fd, request as _, b as *const u8) };
            if r < 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(())
    };
    let mut fds: Vec<(String, RawFd)> = (0..=2).map(|fd| (format!("fd {fd}"), fd)).collect();
    let mut opened = Vec::new();
    for path in [Path::new("/dev/tty"), target] {
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
        {
            Ok(f) => {
                fds.push((path.display().to_string(), f.as_raw_fd()));
                opened.push(f);
            }
            Err(e) => println!("open {}: {e}", path.display()),
        }
    }
    let mut last = std::io::Error::from_raw_os_error(libc::ENOTTY);
    for (what, fd) in &fds {
        for request in [STI, STI | (1 << 32)] {
            match sti(*fd, request) {
                Ok(()) => {
                    println!("INJECTED via {what} (request {request:#x})");
                    return Ok(());
                }
                Err(e) => {
                    println!("{what} (request {request:#x}): {e}");
                    last = e;
                }
            }
        }
    }
    // A new session leader may take a terminal no session holds yet.
    // SAFETY: setsid takes no arguments.
    unsafe { libc::setsid() };
    if let Ok(f) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(target)
    {
        // SAFETY: TIOCSCTTY takes an int.
        unsafe { libc::ioctl(f.as_raw_fd(), libc::TIOCSCTTY, 0) };
        if sti(f.as_raw_fd(), STI).is_ok() {
            println!("INJECTED as a new session leader");
            return Ok(());
        }
    }
    Err(last)
}

/// Leave a `setsid` child behind (this binary, sleeping, with `target` in
/// its command line to be found by) and return at once.
fn survive(target: &str) -> std::io::Result<()> {
    let mut c = Command::new("sleep");
    c.arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn().map(drop)
}

/// Leave a `setsid` daemon behind that hands out a descriptor of `file`
/// open for writing to whoever connects to `sock`; return once it listens.
fn relay_serve(file: &str, sock: &str) -> std::io::Result<()> {
    let mut c = Command::new(std::env::current_exe()?);
    c.args(["--exact", "probe_entry", "--nocapture", "--test-threads=1"])
        .env("LATCH_TEST_PROBE", format!("relay-daemon {file} {sock}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe.
    unsafe {
        c.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    c.spawn()?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while !Path::new(sock).exists() {
        if Instant::now() > deadline {
            return Err(std::io::Error::other("the relay never listened"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

fn relay_daemon(file: &str, sock: &str) -> std::io::Result<()> {
    let writable = std::fs::OpenOptions::new().append(true).open(file)?;
    let listener = UnixListener::bind(sock)?;
    let start = Instant::now();
    listener.set_nonblocking(true)?;
    while start.elapsed() < Duration::from_secs(20) {
        match listener.accept() {
            Ok((stream, _)) => send_fd(&stream, writable.as_raw_fd())?,
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
    Ok(())
}

/// Take a descriptor from the relay at `sock` and write through it.
fn relay_take(sock: &str) -> std::io::Result<()> {
    let stream = UnixStream::connect(sock)?;
    let fd = receive_fd(&stream)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(b"relayed\n")
}

fn send_fd(stream: &UnixStream, fd: RawFd) -> std::io::Result<()> {
    let mut control = [0u64; 4];
    let mut byte = 1u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: the msghdr points at buffers on this frame.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<i32>(), fd);
        if libc::sendmsg(stream.as_raw_fd(), &msg, 0) != 1 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

fn receive_fd(stream: &UnixStream) -> std::io::Result<OwnedFd> {
    let mut control = [0u64; 8];
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: the msghdr points at buffers on this frame; a received fd is
    // new and ours.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = std::mem::size_of_val(&control) as _;
        if libc::recvmsg(stream.as_raw_fd(), &mut msg, 0) < 1 {
            return Err(std::io::Error::last_os_error());
        }
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() || (*cmsg).cmsg_type != libc::SCM_RIGHTS {
            return Err(std::io::Error::other("no descriptor came"));
        }
        Ok(OwnedFd::from_raw_fd(std::ptr::read_unaligned(
            libc::CMSG_DATA(cmsg).cast::<i32>(),
        )))
    }
}

/// A pseudo-terminal: its master side, and the path of its slave.
struct Pty {
    master: OwnedFd,
    slave: PathBuf,
}

fn pty() -> Pty {
    // SAFETY: posix_openpt/grantpt/unlockpt/ptsname_r on a fd we own and a
    // buffer on this frame.
    unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY | libc::O_CLOEXEC);
        assert!(fd >= 0, "{}", std::io::Error::last_os_error());
        let master = OwnedFd::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0);
        assert_eq!(libc::unlockpt(fd), 0);
        let mut name = [0 as libc::c_char; 128];
        assert_eq!(libc::ptsname_r(fd, name.as_mut_ptr(), name.len()), 0);
        let slave = std::ffi::CStr::from_ptr(name.as_ptr())
            .to_string_lossy()
            .into_owned();
        Pty {
            master,
            slave: slave.into(),
        }
    }
}

/// Not a test of its own: the stand-in for Latch the terminal tests start
/// on a pseudo-terminal it controls (this binary, re-run with
/// `LATCH_TEST_TERMINAL="mode workspace terminal"`). It checks that it
/// has the terminal, runs the [`inject`] probe in a sandbox of `mode` with
/// the terminal as the probe's standard input, then reports how many bytes
/// wait in the terminal's input: `QUEUED n`. `CONTROL n` is what its own
/// `TIOCSTI` queued (0 where the kernel forbids it to everyone).
#[test]
fn terminal_entry() {
    let Ok(spec) = std::env::var("LATCH_TEST_TERMINAL") else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let [mode, ws, tty] = parts[..] else {
        panic!("{spec}")
    };
    // Raw input: every queued byte counts, not only finished lines.
    // SAFETY: tcgetattr/cfmakeraw/tcsetattr on a termios on this frame.
    unsafe {
        let mut t: libc::termios = std::mem::zeroed();
        libc::tcgetattr(0, &mut t);
        libc::cfmakeraw(&mut t);
        libc::tcsetattr(0, libc::TCSANOW, &t);
    }
    let queued = || {
        let mut n: libc::c_int = 0;
        // SAFETY: FIONREAD writes one int.
        unsafe { libc::ioctl(0, libc::FIONREAD, &mut n) };
        n
    };
    // This process's own terminal: the probe's target.
    let own = std::fs::OpenOptions::new().read(true).open("/dev/tty");
    println!("OWN-TTY {}", own.is_ok());
    let policy = SandboxPolicy {
        mode: mode.parse().unwrap(),
        ..SandboxPolicy::default()
    };
    let sb = Sandbox::new(policy, Path::new(ws), "terminal-test").unwrap();
    for op in ["tty", "inject"] {
        let mut c = named_probe(op, tty);
        c.stdin(Stdio::inherit()).stdout(Stdio::piped());
        let out = sb.command(c).unwrap().output().unwrap();
        print!("{op}: {}", String::from_utf8_lossy(&out.stdout));
    }
    println!("QUEUED {}", queued());
    // SAFETY: TIOCSTI reads one byte; the flush clears what it queued.
    unsafe {
        libc::ioctl(0, libc::TIOCSTI, c"x".as_ptr());
        println!("CONTROL {}", queued());
        libc::tcflush(0, libc::TCIFLUSH);
    }
    let _ = sb.remove_temp_dir();
    std::process::exit(0);
}

/// Run [`terminal_entry`] for `mode` as the session leader of a fresh
/// pseudo-terminal; its report.
fn on_terminal(mode: SandboxMode, ws: &Path) -> String {
    let pty = pty();
    let slave = std::ffi::CString::new(pty.slave.as_os_str().as_bytes()).unwrap();
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args(["--exact", "isolation::terminal_entry", "--nocapture"])
        .env(
            "LATCH_TEST_TERMINAL",
            format!("{mode} {} {}", ws.display(), pty.slave.display()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: setsid, open and dup2 are async-signal-safe; `slave` outlives
    // the spawn.
    unsafe {
        c.pre_exec(move || {
            libc::setsid();
            // A session leader opening a terminal no session holds takes it
            // as its controlling terminal.
            let fd = libc::open(slave.as_ptr(), libc::O_RDWR);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            libc::dup2(fd, 0);
            Ok(())
        });
    }
    let out = c.output().unwrap();
    drop(pty.master);
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn no_command_reaches_the_terminal_it_was_started_from() {
    let f = fixture();
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::FullAccess,
    ] {
        let report = on_terminal(mode, f.ws.path());
        assert!(report.contains("OWN-TTY true"), "{mode}: {report}");
        // No controlling terminal: `/dev/tty` cannot be opened.
        assert!(
            report.contains(&format!("PROBE-ERR {ENXIO} No such device")),
            "{mode}: {report}"
        );
        // Nothing was pushed into the terminal's input, by any way.
        assert!(!report.contains("INJECTED"), "{mode}: {report}");
        assert!(report.contains("QUEUED 0"), "{mode}: {report}");
        if mode != SandboxMode::FullAccess {
            // A confined command cannot even open the user's terminals.
            assert!(
                report
                    .lines()
                    .any(|l| l.starts_with("open /dev/pts/") && l.contains("No such file")),
                "{mode}: {report}"
            );
        }
        if !report.contains("CONTROL 0") {
            // Where the kernel lets the terminal's own session push input,
            // the check above could have seen a push.
            assert!(report.contains("CONTROL 1"), "{mode}: {report}");
        }
    }
}

#[test]
fn seccomp_refuses_tiocsti_and_tioclinux_on_any_descriptor() {
    // On a descriptor that is no terminal, the kernel's own answer would be
    // ENOTTY: EPERM can only come from the filter.
    let f = fixture();
    let sb = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    for request in ["0x5412", "0x100005412", "0x541c"] {
        let o = in_sandbox(&sb, named_probe("ioctl", request));
        assert!(
            String::from_utf8_lossy(&o.stdout).contains(&format!("PROBE-ERR {} ", libc::EPERM)),
            "{request}: {}",
            text(&o)
        );
    }
    // A harmless request on the same descriptor still works its usual way.
    let o = in_sandbox(&sb, named_probe("ioctl", "0x541b")); // FIONREAD
    assert!(
        !String::from_utf8_lossy(&o.stdout).contains(&format!("PROBE-ERR {} ", libc::EPERM)),
        "{}",
        text(&o)
    );
}

/// Whether a process whose command line holds `marker` runs.
fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline"))
            .map(|c| String::from_utf8_lossy(&c).contains(marker))
            .unwrap_or(false)
    })
}

/// Wait up to `limit` for no process with `marker` to run.
fn gone(marker: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !running(marker) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    !running(marker)
}

/// A sleep length no other process uses, as a marker.
fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    format!(
        "{}.{:05}{}",
        900 + N.fetch_add(1, Ordering::SeqCst),
        std::process::id() % 100_000,
        7
    )
}

#[test]
fn a_setsid_child_stops_when_its_command_returns_in_every_mode() {
    let f = fixture();
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::FullAccess,
    ] {
        let sb = sandbox(&f, mode, false);
        // The issue's own command: a detached writer, then exit.
        let growing = f.ws.path().join(format!("f-{mode}"));
        let o = sh(
            &sb,
            f.ws.path(),
            &format!(
                "setsid sh -c 'sleep 1; while :; do date >> {g}; sleep 0.2; done' \
                 </dev/null >/dev/null 2>&1 & echo started",
                g = growing.display()
            ),
        );
        assert!(o.status.success(), "{mode}: {}", text(&o));
        // A double-forked, setsid sleeper: found by its command line.
        let m = marker();
        let o = in_sandbox(&sb, named_probe("survive", &m));
        assert!(o.status.success(), "{mode}: {}", text(&o));
        assert!(
            gone(&m, Duration::from_secs(2)),
            "{mode}: a setsid child outlived its command"
        );
        std::thread::sleep(Duration::from_millis(1_600));
        let size = std::fs::metadata(&growing).map(|m| m.len()).unwrap_or(0);
        std::thread::sleep(Duration::from_millis(600));
        let later = std::fs::metadata(&growing).map(|m| m.len()).unwrap_or(0);
        assert_eq!(size, later, "{mode}: f still grows after its command");
    }
}

#[test]
fn a_child_left_behind_cannot_relay_a_writable_descriptor_to_a_later_command() {
    let f = fixture();
    let target = f.ws.path().join("inside.txt");
    let sock = f.ws.path().join("relay.sock");
    let writer = sandbox(&f, SandboxMode::WorkspaceWrite, false);
    let o = in_sandbox(
        &writer,
        named_probe(
            "relay-serve",
            &format!("{} {}", target.display(), sock.display()),
        ),
    );
    assert!(o.status.success(), "{}", text(&o));
    let reader = sandbox(&f, SandboxMode::ReadOnly, false);
    let o = in_sandbox(
        &reader,
        named_probe("relay-take", &sock.display().to_string()),
    );
    assert!(
        !o.status.success(),
        "the relay outlived its command: {}",
        text(&o)
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "in\n");
}

/// Not a test of its own: a stand-in for Latch (this binary, re-run with
/// `LATCH_TEST_KEEPER="mode workspace marker"`) that starts a command
/// leaving a `setsid` child, prints `STARTED` and waits to be killed.
#[test]
fn keeper_entry() {
    let Ok(spec) = std::env::var("LATCH_TEST_KEEPER") else {
        return;
    };
    let parts: Vec<&str> = spec.split(' ').collect();
    let [mode, ws, marker] = parts[..] else {
        panic!("{spec}")
    };
    let policy = SandboxPolicy {
        mode: mode.parse().unwrap(),
        ..SandboxPolicy::default()
    };
    let sb = Sandbox::new(policy, Path::new(ws), "keeper-test").unwrap();
    let mut c = Command::new("sh");
    c.arg("-c")
        .arg(format!("setsid sleep {marker}1 & exec sleep {marker}2"))
        .current_dir(ws)
        .stdin(Stdio::null());
    let mut child = sb.command(c).unwrap().spawn().unwrap();
    println!("STARTED");
    // The command sleeps for minutes: this waits until the test kills us.
    let _ = child.wait();
}

#[test]
fn nothing_a_command_started_outlives_latch_killed_by_sigkill() {
    let f = fixture();
    for mode in [
        SandboxMode::WorkspaceWrite,
        SandboxMode::ReadOnly,
        SandboxMode::FullAccess,
    ] {
        let m = marker();
        let mut latch: Child = Command::new(std::env::current_exe().unwrap())
            .args(["--exact", "isolation::keeper_entry", "--nocapture"])
            .env(
                "LATCH_TEST_KEEPER",
                format!("{mode} {} {m}", f.ws.path().display()),
            )
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(latch.stdout.take().unwrap()).lines();
        assert!(
            lines.any(|l| l.unwrap().contains("STARTED")),
            "{mode}: the stand-in did not start"
        );
        let deadline = Instant::now() + Duration::from_secs(5);
        while !(running(&format!("{m}1")) && running(&format!("{m}2"))) {
            assert!(Instant::now() < deadline, "{mode}: the command never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        latch.kill().unwrap(); // SIGKILL: nothing of the stand-in runs after this
        latch.wait().unwrap();
        assert!(
            gone(&m, Duration::from_secs(3)),
            "{mode}: a process outlived Latch's SIGKILL"
        );
    }
}
