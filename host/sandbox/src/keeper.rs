//! Every command runs under a *keeper*: the process Latch spawns (its pid
//! is the one the caller sees, its process group the command's), which
//! holds the command's whole process tree and ends it whole. In the forked
//! child, before `exec`, [`Plan::enter`]:
//!
//! * starts a new session (`setsid`): the keeper and everything under it
//!   have no controlling terminal, so `/dev/tty` cannot be opened, no
//!   terminal signal reaches them and `TIOCSTI` is refused by the kernel;
//!   a standard descriptor that is a terminal is replaced by `/dev/null`
//!   in the command, and every other inherited descriptor is closed at its
//!   `exec`;
//! * in a confined mode, enters new user, mount and PID namespaces (and a
//!   network namespace when the network is off) and forks the namespace's
//!   init, which confines itself ([`crate::confine`]) and forks the command
//!   (pid 2). When the command exits, the init exits and the kernel kills
//!   every process left in the namespace — a `setsid`, `setpgid` or
//!   double-forked child included: nothing can leave a PID namespace. The
//!   init dies with the keeper (`PR_SET_PDEATHSIG`), so a SIGKILL of the
//!   keeper's group kills the namespace too;
//! * under `full-access` (no namespaces: the command keeps the user's real
//!   ids, so `sudo` works), the keeper is a child subreaper: whatever the
//!   command leaves behind, however it detached, is re-parented to the
//!   keeper, which kills it when the command ends. This is not a kernel
//!   boundary: a `full-access` command can kill its keeper or hand work to
//!   a service (`systemd-run`, `at`, a container daemon).
//!
//! The keeper also watches the *lifeline*, a pipe whose only write end
//! Latch holds for its whole life and never writes: when Latch exits or
//! dies (SIGKILL included) the kernel closes that end and every keeper
//! kills its command's tree. [`stop`] asks a keeper to do the same at once
//! (then it dies by SIGKILL, so the caller sees a killed command).
//! SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to the keeper
//! are passed on to the command; its exit status is the command's (a
//! command killed by a signal makes the keeper die by the same signal,
//! without a core file).
//!
//! Everything here runs in forked children of a multi-threaded process:
//! async-signal-safe system calls only, on data prepared in the parent.

use crate::confine::Confinement;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};

/// Signals a keeper passes on to the command (and the namespace's init to
/// the command).
const FORWARDED: [libc::c_int; 6] = [
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

/// The signal [`stop`] sends: a real-time signal nothing else uses.
pub(crate) fn stop_signal() -> libc::c_int {
    libc::SIGRTMAX() - 2
}

/// Ask the keeper `pid` (a process spawned through a [`crate::Sandbox`])
/// to kill its command's whole tree at once; it then dies by SIGKILL.
pub fn stop(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours.
    unsafe {
        libc::kill(pid, stop_signal());
    }
}

/// The lifeline: its read end goes to every keeper; its write end lives in
/// this static until the process ends.
pub(crate) fn lifeline() -> std::io::Result<RawFd> {
    static LIFELINE: OnceLock<Option<(std::io::PipeReader, std::io::PipeWriter)>> = OnceLock::new();
    LIFELINE
        .get_or_init(|| std::io::pipe().ok())
        .as_ref()
        .map(|(read, _)| read.as_raw_fd())
        .ok_or_else(|| {
            std::io::Error::other("could not create the pipe that ties commands to Latch's life")
        })
}

/// How one command is kept, prepared in the parent.
pub(crate) struct Plan {
    /// Namespaces the keeper enters (none under `full-access`).
    pub(crate) unshare: libc::c_int,
    pub(crate) uid_map: Vec<u8>,
    pub(crate) gid_map: Vec<u8>,
    /// What the namespace's init does before it forks the command; `None`
    /// under `full-access`.
    pub(crate) confine: Option<Confinement>,
    /// The lifeline's read end ([`lifeline`]).
    pub(crate) lifeline: RawFd,
    /// The terminal rule for a `full-access` command ([`crate::seccomp`]).
    pub(crate) terminal_filter: Vec<libc::sock_filter>,
    pub(crate) stop_signal: libc::c_int,
}

/// The pid signals are passed on to (in each process, its own copy).
static FORWARD_TO: AtomicI32 = AtomicI32::new(0);
/// Set by [`stop`]'s signal.
static STOP: AtomicBool = AtomicBool::new(false);
/// Set by SIGCHLD.
static CHILD: AtomicBool = AtomicBool::new(false);

extern "C" fn forward(sig: libc::c_int) {
    let to = FORWARD_TO.load(Ordering::SeqCst);
    if to > 0 {
        // SAFETY: kill(2) is async-signal-safe.
        unsafe {
            libc::kill(to, sig);
        }
    }
}

extern "C" fn on_stop(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

extern "C" fn on_child(_: libc::c_int) {
    CHILD.store(true, Ordering::SeqCst);
}

/// What the namespace's init tells the keeper over their socket.
#[repr(u8)]
enum Report {
    /// Confined; the command was forked.
    Ready = 1,
    /// Confining failed with the errno that follows.
    Failed = 2,
    /// The command ended with the wait status that follows.
    Exited = 3,
}

impl Plan {
    /// Runs in the forked child. Returns `Ok` only in the command's
    /// process (which then `exec`s), or the error that makes the spawn fail.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        // SAFETY: async-signal-safe system calls on data owned by `self`
        // (see the module docs).
        unsafe {
            leave_terminal();
            self.handle_signals()?;
            match &self.confine {
                Some(confine) => self.keep_confined(confine),
                None => self.keep_full_access(),
            }
        }
    }

    /// Block the signals the keeper handles (they are taken in `ppoll`
    /// only) and install their handlers.
    ///
    /// # Safety
    /// Async-signal-safe system calls only.
    unsafe fn handle_signals(&self) -> std::io::Result<()> {
        // SAFETY: sigaction and sigprocmask on structs on this frame.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            let handlers: [(libc::c_int, extern "C" fn(libc::c_int)); 8] = [
                (FORWARDED[0], forward),
                (FORWARDED[1], forward),
                (FORWARDED[2], forward),
                (FORWARDED[3], forward),
                (FORWARDED[4], forward),
                (FORWARDED[5], forward),
                (self.stop_signal, on_stop),
                (libc::SIGCHLD, on_child),
            ];
            for (sig, _) in handlers {
                libc::sigaddset(&mut set, sig);
            }
            check(libc::sigprocmask(
                libc::SIG_BLOCK,
                &set,
                std::ptr::null_mut(),
            ))?;
            for (sig, handler) in handlers {
                let mut action: libc::sigaction = std::mem::zeroed();
                action.sa_sigaction = handler as usize;
                action.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut action.sa_mask);
                check(libc::sigaction(sig, &action, std::ptr::null_mut()))?;
            }
        }
        Ok(())
    }

    /// The keeper of a confined command: enter the namespaces, fork their
    /// init, report its setup failure as the spawn's, then keep it.
    ///
    /// # Safety
    /// Async-signal-safe system calls only.
    unsafe fn keep_confined(&self, confine: &Confinement) -> std::io::Result<()> {
        // SAFETY: plain system calls on data owned by `self` and this frame.
        unsafe {
            check(libc::unshare(self.unshare))?;
            write_proc(c"/proc/self/setgroups", b"deny")?;
            write_proc(c"/proc/self/uid_map", &self.uid_map)?;
            write_proc(c"/proc/self/gid_map", &self.gid_map)?;
            let mut pair = [0 as RawFd; 2];
            check(libc::socketpair(
                libc::AF_UNIX,
                libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
                0,
                pair.as_mut_ptr(),
            ))?;
            let [ours, theirs] = pair;
            let init = libc::fork();
            if init < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if init == 0 {
                libc::close(ours);
                return self.init(confine, theirs);
            }
            libc::close(theirs);
            FORWARD_TO.store(init, Ordering::SeqCst);
            match receive(ours) {
                Some((r, _)) if r == Report::Ready as u8 => {}
                Some((r, errno)) if r == Report::Failed as u8 => {
                    libc::waitpid(init, std::ptr::null_mut(), 0);
                    return Err(std::io::Error::from_raw_os_error(errno));
                }
                _ => {
                    libc::waitpid(init, std::ptr::null_mut(), 0);
                    return Err(std::io::Error::from_raw_os_error(libc::EIO));
                }
            }
            close_all_but(&[self.lifeline, ours]);
            let mut status = None;
            loop {
                if STOP.load(Ordering::SeqCst) {
                    libc::kill(init, libc::SIGKILL);
                    libc::waitpid(init, std::ptr::null_mut(), 0);
                    die_by(libc::SIGKILL);
                }
                let mut fds = [
                    libc::pollfd {
                        fd: self.lifeline,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                    libc::pollfd {
                        fd: ours,
                        events: libc::POLLIN,
                        revents: 0,
                    },
                ];
                wait_for(&mut fds);
                if fds[0].revents != 0 {
                    // Latch is gone.
                    STOP.store(true, Ordering::SeqCst);
                    continue;
                }
                if fds[1].revents & libc::POLLIN != 0
                    && let Some((r, st)) = receive(ours)
                    && r == Report::Exited as u8
                {
                    status = Some(st);
                }
                let mut st = 0;
                if fds[1].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                    // The init is gone or going: wait for it.
                    if libc::waitpid(init, &mut st, 0) == init {
                        finish(status.unwrap_or(st));
                    }
                    die_by(libc::SIGKILL);
                } else if CHILD.swap(false, Ordering::SeqCst)
                    && libc::waitpid(init, &mut st, libc::WNOHANG) == init
                {
                    finish(status.unwrap_or(st));
                }
            }
        }
    }

    /// The init of the command's namespaces (pid 1): confine, fork the
    /// command, then reap until the command ends — when it exits, so does
    /// the namespace.
    ///
    /// # Safety
    /// Async-signal-safe system calls only.
    unsafe fn init(&self, confine: &Confinement, keeper: RawFd) -> std::io::Result<()> {
        // SAFETY: plain system calls on data owned by `self` and this frame.
        unsafe {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
            // The keeper may have died before the line above: its end of
            // the socket is then closed.
            let mut alive = libc::pollfd {
                fd: keeper,
                events: 0,
                revents: 0,
            };
            if libc::poll(&mut alive, 1, 0) != 0 && alive.revents & libc::POLLHUP != 0 {
                libc::_exit(1);
            }
            if let Err(e) = confine.enter() {
                send(
                    keeper,
                    Report::Failed,
                    e.raw_os_error().unwrap_or(libc::EPERM),
                );
                libc::_exit(1);
            }
            let command = libc::fork();
            if command < 0 {
                send(keeper, Report::Failed, errno());
                libc::_exit(1);
            }
            if command == 0 {
                libc::close(keeper);
                return self.command(None);
            }
            FORWARD_TO.store(command, Ordering::SeqCst);
            send(keeper, Report::Ready, 0);
            close_all_but(&[keeper]);
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            loop {
                let mut st = 0;
                let pid = libc::waitpid(-1, &mut st, 0);
                if pid == command {
                    send(keeper, Report::Exited, st);
                    libc::_exit(0);
                }
                if pid < 0 && errno() != libc::EINTR {
                    libc::_exit(0);
                }
            }
        }
    }

    /// The keeper of a `full-access` command: a child subreaper that kills
    /// whatever the command leaves when it ends.
    ///
    /// # Safety
    /// Async-signal-safe system calls only.
    unsafe fn keep_full_access(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on data owned by `self` and this frame.
        unsafe {
            check(libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0))?;
            let keeper = libc::getpid();
            let command = libc::fork();
            if command < 0 {
                return Err(std::io::Error::last_os_error());
            }
            if command == 0 {
                return self.command(Some(keeper));
            }
            FORWARD_TO.store(command, Ordering::SeqCst);
            close_all_but(&[self.lifeline]);
            loop {
                if STOP.load(Ordering::SeqCst) {
                    libc::kill(command, libc::SIGKILL);
                    sweep();
                    die_by(libc::SIGKILL);
                }
                let mut fds = [libc::pollfd {
                    fd: self.lifeline,
                    events: libc::POLLIN,
                    revents: 0,
                }];
                wait_for(&mut fds);
                if fds[0].revents != 0 {
                    STOP.store(true, Ordering::SeqCst);
                    continue;
                }
                if CHILD.swap(false, Ordering::SeqCst) {
                    loop {
                        let mut st = 0;
                        let pid = libc::waitpid(-1, &mut st, libc::WNOHANG);
                        if pid == command {
                            sweep();
                            finish(st);
                        }
                        if pid <= 0 {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// The command's own steps, after the last fork: default signals, no
    /// terminal on its standard descriptors, nothing else inherited. Under
    /// `full-access`, `keeper` is the keeper's pid: the command dies with
    /// it.
    ///
    /// # Safety
    /// Async-signal-safe system calls only.
    unsafe fn command(&self, keeper: Option<libc::pid_t>) -> std::io::Result<()> {
        // SAFETY: plain system calls on data owned by `self` and this frame.
        unsafe {
            if let Some(keeper) = keeper {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                if libc::getppid() != keeper {
                    libc::_exit(1);
                }
                // Refused without CAP_SYS_ADMIN (no_new_privs would break
                // `sudo`): the kernel itself then refuses TIOCSTI to a
                // process without a controlling terminal.
                let prog = libc::sock_fprog {
                    len: self.terminal_filter.len() as libc::c_ushort,
                    filter: self.terminal_filter.as_ptr().cast_mut(),
                };
                libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0u32,
                    &prog as *const libc::sock_fprog,
                );
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = libc::SIG_DFL;
            for sig in FORWARDED
                .into_iter()
                .chain([self.stop_signal, libc::SIGCHLD])
            {
                libc::sigaction(sig, &action, std::ptr::null_mut());
            }
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut());
            for fd in 0..=2 {
                if libc::isatty(fd) == 1 {
                    let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
                    if null < 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    check(libc::dup2(null, fd))?;
                    libc::close(null);
                }
            }
            // Nothing Latch holds open reaches the command.
            libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            );
        }
        Ok(())
    }
}

/// Leave the caller's terminal: a new session (the usual case: the spawned
/// process leads no group yet), else, for a caller that made it a group
/// leader, drop the controlling terminal.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn leave_terminal() {
    // SAFETY: plain system calls on a valid C string.
    unsafe {
        if libc::setsid() >= 0 {
            return;
        }
        let tty = libc::open(c"/dev/tty".as_ptr(), libc::O_RDWR | libc::O_NOCTTY);
        if tty >= 0 {
            libc::ioctl(tty, libc::TIOCNOTTY);
            libc::close(tty);
        }
    }
}

/// Wait in `ppoll` with every handled signal open.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn wait_for(fds: &mut [libc::pollfd]) {
    // SAFETY: ppoll on the caller's pollfds with an empty mask on this
    // frame.
    unsafe {
        let mut open: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut open);
        libc::ppoll(
            fds.as_mut_ptr(),
            fds.len() as libc::nfds_t,
            std::ptr::null(),
            &open,
        );
    }
}

/// Kill every child of this process (a subreaper: whatever its command
/// left, however it detached), and their children as they are re-parented
/// here, until none is left.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn sweep() {
    // SAFETY: open/read/kill/waitpid on a buffer on this frame.
    unsafe {
        loop {
            let fd = libc::open(
                c"/proc/thread-self/children".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            );
            if fd >= 0 {
                let mut buf = [0u8; 4096];
                let mut pid: libc::pid_t = 0;
                loop {
                    let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                    if n <= 0 {
                        break;
                    }
                    for &b in &buf[..n as usize] {
                        if b.is_ascii_digit() {
                            pid = pid.saturating_mul(10).saturating_add((b - b'0') as i32);
                        } else {
                            if pid > 1 {
                                libc::kill(pid, libc::SIGKILL);
                            }
                            pid = 0;
                        }
                    }
                }
                if pid > 1 {
                    libc::kill(pid, libc::SIGKILL);
                }
                libc::close(fd);
            }
            if libc::waitpid(-1, std::ptr::null_mut(), 0) < 0 && errno() != libc::EINTR {
                return; // ECHILD: nothing is left.
            }
        }
    }
}

/// End the keeper as the command ended: its exit code, or death by its
/// signal (without a core file).
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn finish(status: libc::c_int) -> ! {
    if libc::WIFSIGNALED(status) {
        // SAFETY: see the function's contract.
        unsafe { die_by(libc::WTERMSIG(status)) }
    }
    // SAFETY: _exit ends the process.
    unsafe { libc::_exit(libc::WEXITSTATUS(status)) }
}

/// Die by `sig`; `128 + sig` when it cannot kill (an ignored-by-default
/// signal).
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn die_by(sig: libc::c_int) -> ! {
    // SAFETY: plain system calls on structs on this frame.
    unsafe {
        let no_core = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        libc::setrlimit(libc::RLIMIT_CORE, &no_core);
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &action, std::ptr::null_mut());
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, sig);
        libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut());
        libc::kill(libc::getpid(), sig);
        libc::_exit(128 + sig)
    }
}

/// Close every descriptor but `keep`.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn close_all_but(keep: &[RawFd]) {
    let mut sorted = [0 as RawFd; 4];
    let n = keep.len().min(sorted.len());
    sorted[..n].copy_from_slice(&keep[..n]);
    let sorted = &mut sorted[..n];
    sorted.sort_unstable();
    let mut from: u32 = 0;
    // SAFETY: close_range takes plain integers.
    unsafe {
        for &fd in sorted.iter() {
            let fd = fd as u32;
            if fd > from {
                libc::syscall(libc::SYS_close_range, from, fd - 1, 0u32);
            }
            from = fd + 1;
        }
        libc::syscall(libc::SYS_close_range, from, u32::MAX, 0u32);
    }
}

/// Send one report.
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn send(fd: RawFd, report: Report, value: libc::c_int) {
    let mut msg = [0u8; 5];
    msg[0] = report as u8;
    msg[1..].copy_from_slice(&value.to_ne_bytes());
    // SAFETY: send from the buffer on this frame.
    unsafe {
        libc::send(fd, msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL);
    }
}

/// Receive one report (`None` at end of file or on an error).
///
/// # Safety
/// Async-signal-safe system calls only.
unsafe fn receive(fd: RawFd) -> Option<(u8, libc::c_int)> {
    let mut msg = [0u8; 5];
    loop {
        // SAFETY: recv into the buffer on this frame.
        let n = unsafe { libc::recv(fd, msg.as_mut_ptr().cast(), msg.len(), 0) };
        if n < 0 && errno() == libc::EINTR {
            continue;
        }
        if n != 5 {
            return None;
        }
        let value = libc::c_int::from_ne_bytes([msg[1], msg[2], msg[3], msg[4]]);
        return Some((msg[0], value));
    }
}

/// Write `data` to a `/proc` file with raw system calls.
///
/// # Safety
/// Async-signal-safe; `path` and `data` must stay valid during the call.
pub(crate) unsafe fn write_proc(path: &std::ffi::CStr, data: &[u8]) -> std::io::Result<()> {
    // SAFETY: see the function's contract.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        let n = libc::write(fd, data.as_ptr().cast(), data.len());
        let err = std::io::Error::last_os_error();
        libc::close(fd);
        if n != data.len() as isize {
            return Err(err);
        }
    }
    Ok(())
}

fn errno() -> libc::c_int {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

fn check(r: libc::c_int) -> std::io::Result<()> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}
