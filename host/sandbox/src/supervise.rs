//! The supervisor that answers the seccomp filter's `connect`
//! notifications ([`crate::seccomp`]), in threads of the parent.
//!
//! Each confined spawn gets a socket pair: the child (the init of the
//! command's PID namespace), once its filter is installed, sends the
//! listener over it (`SCM_RIGHTS`) and waits; the parent acknowledges, and
//! a thread answers the listener's notifications until every process under
//! that filter has exited. No acknowledgement, no `exec`: a command never
//! runs unsupervised.
//!
//! A `connect` is never let through as asked (`SECCOMP_USER_NOTIF_FLAG_
//! CONTINUE` would re-read the address after the check): the supervisor
//! copies the address, takes the command's socket with `pidfd_getfd` and
//! connects it itself.
//!
//! * A named Unix socket is opened (`O_PATH`) as the command would resolve
//!   it, its real path checked against [`SocketRules`] (the workspace, the
//!   session temp dir, `[sandbox] allow_unix_sockets`), and the connect made
//!   through `/proc/self/fd/N` — the inode that was checked. Anything else
//!   is refused with `EACCES`.
//! * An abstract name is reached only inside the command's own network
//!   namespace (network off); with the network on it is refused (`EPERM`).
//! * Any other family is connected as asked (the socket lives in the
//!   command's network namespace, so the namespace still decides).

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Which named Unix sockets a confined command may connect to, and whether
/// abstract names are its own.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SocketRules {
    /// Sockets at or under these paths (real paths) may be connected to.
    pub allowed: Vec<PathBuf>,
    /// True when the command shares the host's network namespace.
    pub network: bool,
}

impl SocketRules {
    fn allows(&self, real: &Path) -> bool {
        self.allowed.iter().any(|root| real.starts_with(root))
    }
}

/// Start the thread that adopts the listeners of the children spawned with
/// the returned socket end, which the child steps own.
pub(crate) fn start(rules: SocketRules) -> io::Result<OwnedFd> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: socketpair fills the two-element array we own.
    let r = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: both fds were just created and are owned by nobody else.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    let rules = Arc::new(rules);
    std::thread::Builder::new()
        .name("latch-sandbox-adopt".into())
        .spawn(move || adopt_all(ours, rules))?;
    Ok(theirs)
}

/// Adopt each child's listener until every copy of the child end is closed.
fn adopt_all(channel: OwnedFd, rules: Arc<SocketRules>) {
    loop {
        let listener = match receive_fd(&channel) {
            Ok(Some(listener)) => listener,
            Ok(None) => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return,
        };
        let ok = match listener {
            Some(listener) => {
                let rules = rules.clone();
                std::thread::Builder::new()
                    .name("latch-sandbox-supervise".into())
                    .spawn(move || supervise(Arc::new(listener), rules))
                    .is_ok()
            }
            None => false,
        };
        let ack = [u8::from(ok)];
        // SAFETY: send from the 1-byte buffer we own.
        unsafe {
            libc::send(
                channel.as_raw_fd(),
                ack.as_ptr().cast(),
                1,
                libc::MSG_NOSIGNAL,
            );
        }
    }
}

fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_open takes plain integers.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0u32) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd owned by us.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn pidfd_getfd(pidfd: &OwnedFd, fd: i32) -> io::Result<OwnedFd> {
    // SAFETY: pidfd_getfd takes plain integers.
    let got = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0u32) };
    if got < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: a new fd owned by us.
    Ok(unsafe { OwnedFd::from_raw_fd(got as RawFd) })
}

/// One message of the channel: `Some` with the fd it carries
/// (`SCM_RIGHTS`; `None` for a message without one), or `None` once every
/// copy of the child end is closed.
fn receive_fd(channel: &OwnedFd) -> io::Result<Option<Option<OwnedFd>>> {
    #[repr(C, align(8))]
    struct Control([u8; 64]);
    let mut control = Control([0; 64]);
    let mut byte = 0u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: the msghdr points at `iov` and `control`, both owned here;
    // the CMSG macros stay inside `control`, and each fd a message carries
    // is new to this process and owned by us from here on.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = control.0.len() as _;
        let n = libc::recvmsg(channel.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC);
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        if n == 0 {
            return Ok(None);
        }
        let mut received = None;
        let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<libc::c_int>();
                let count = ((*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize)
                    / std::mem::size_of::<libc::c_int>();
                for i in 0..count {
                    let fd = OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i)));
                    // One listener per message; anything more is closed.
                    if received.is_none() {
                        received = Some(fd);
                    }
                }
            }
            cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
        }
        Ok(Some(received))
    }
}

/// Answer the notifications of one listener until no process is under it.
fn supervise(listener: Arc<OwnedFd>, rules: Arc<SocketRules>) {
    loop {
        let mut pfd = libc::pollfd {
            fd: listener.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll on one pollfd we own.
        let n = unsafe { libc::poll(&mut pfd, 1, -1) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if pfd.revents & libc::POLLIN == 0 {
            return; // POLLHUP: every process under the filter is gone.
        }
        // SAFETY: RECV needs a zeroed seccomp_notif, which it fills.
        let mut req: libc::seccomp_notif = unsafe { std::mem::zeroed() };
        let r = unsafe {
            libc::ioctl(
                listener.as_raw_fd(),
                libc::SECCOMP_IOCTL_NOTIF_RECV as _,
                &mut req,
            )
        };
        if r < 0 {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR | libc::ENOENT) => continue,
                _ => return,
            }
        }
        // A connect may block (a full backlog, a slow TCP handshake): each
        // is answered in its own thread so the others go on.
        let (l, r) = (listener.clone(), rules.clone());
        let spawned = std::thread::Builder::new()
            .name("latch-sandbox-connect".into())
            .spawn(move || answer(&l, &req, &r));
        if spawned.is_err() {
            answer(&listener, &req, &rules);
        }
    }
}

fn answer(listener: &OwnedFd, req: &libc::seccomp_notif, rules: &SocketRules) {
    let (val, error) = match handle(listener, req, rules) {
        Ok(v) => (v, 0),
        Err(e) => (0, -e),
    };
    let resp = libc::seccomp_notif_resp {
        id: req.id,
        val,
        error,
        flags: 0,
    };
    // SAFETY: SEND reads the response we own; ENOENT (the caller is gone)
    // needs no handling.
    unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_SEND as _,
            &resp,
        );
    }
}

fn errno(e: io::Error) -> i32 {
    e.raw_os_error().unwrap_or(libc::EPERM)
}

/// The connect's result: `Ok(0)`, or the errno the command sees.
fn handle(listener: &OwnedFd, req: &libc::seccomp_notif, rules: &SocketRules) -> Result<i64, i32> {
    if req.data.nr as libc::c_long != libc::SYS_connect {
        return Err(libc::ENOSYS);
    }
    let tid = req.pid as i32;
    let [fd, ptr, len, ..] = req.data.args;
    let len = len as u32 as usize;
    let mut addr = [0u8; std::mem::size_of::<libc::sockaddr_storage>()];
    if len > addr.len() {
        return Err(libc::EINVAL);
    }
    read_memory(tid, ptr, &mut addr[..len])?;
    let pidfd = pidfd_open(thread_group(tid)?).map_err(errno)?;
    // The pid could have been reused between the notification and
    // pidfd_open: the notification still being pending proves it was not.
    // SAFETY: ID_VALID reads the u64 we own.
    if unsafe {
        libc::ioctl(
            listener.as_raw_fd(),
            libc::SECCOMP_IOCTL_NOTIF_ID_VALID as _,
            &req.id,
        )
    } != 0
    {
        return Err(libc::ENOENT);
    }
    let sock = pidfd_getfd(&pidfd, fd as i32).map_err(errno)?;
    let family = sockopt(&sock, libc::SO_DOMAIN)?;
    let path_len = len.saturating_sub(2);
    if family != libc::AF_UNIX || path_len == 0 {
        return connect(&sock, &addr[..len]);
    }
    let path = &addr[2..len];
    if path[0] == 0 {
        if rules.network {
            return Err(libc::EPERM);
        }
        return connect(&sock, &addr[..len]);
    }
    let path = path.split(|b| *b == 0).next().unwrap_or(path);
    let target = open_socket(tid, path)?;
    let real =
        std::fs::read_link(format!("/proc/self/fd/{}", target.as_raw_fd())).map_err(errno)?;
    if !rules.allows(&real) {
        return Err(libc::EACCES);
    }
    let mut via = unix_addr(format!("/proc/self/fd/{}", target.as_raw_fd()).as_bytes());
    let via_len = std::mem::size_of::<libc::sockaddr_un>();
    // SAFETY: `via` is a sockaddr_un we own.
    let bytes = unsafe {
        std::slice::from_raw_parts((&mut via as *mut libc::sockaddr_un).cast::<u8>(), via_len)
    };
    connect(&sock, bytes)
}

/// Copy `out.len()` bytes at `ptr` in thread `tid`'s memory.
fn read_memory(tid: i32, ptr: u64, out: &mut [u8]) -> Result<(), i32> {
    if out.is_empty() {
        return Ok(());
    }
    let local = libc::iovec {
        iov_base: out.as_mut_ptr().cast(),
        iov_len: out.len(),
    };
    let remote = libc::iovec {
        iov_base: ptr as usize as *mut libc::c_void,
        iov_len: out.len(),
    };
    // SAFETY: writes at most `out.len()` bytes into `out`.
    let n = unsafe { libc::process_vm_readv(tid, &local, 1, &remote, 1, 0) };
    if n < 0 {
        let e = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EFAULT);
        return Err(if e == libc::ESRCH {
            libc::ENOENT
        } else {
            libc::EFAULT
        });
    }
    if n as usize != out.len() {
        return Err(libc::EFAULT);
    }
    Ok(())
}

/// The process (thread group) thread `tid` belongs to.
fn thread_group(tid: i32) -> Result<i32, i32> {
    let status =
        std::fs::read_to_string(format!("/proc/{tid}/status")).map_err(|_| libc::ENOENT)?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or(libc::ENOENT)
}

fn sockopt(sock: &OwnedFd, opt: libc::c_int) -> Result<libc::c_int, i32> {
    let mut v: libc::c_int = 0;
    let mut l = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt writes one c_int we own.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut l,
        )
    };
    if r != 0 {
        return Err(errno(io::Error::last_os_error()));
    }
    Ok(v)
}

/// Open (`O_PATH`) the socket file `path` names as thread `tid` would
/// resolve it (relative to its working directory).
fn open_socket(tid: i32, path: &[u8]) -> Result<OwnedFd, i32> {
    let path = Path::new(OsStr::from_bytes(path));
    let full = if path.is_absolute() {
        path.to_path_buf()
    } else {
        Path::new(&format!("/proc/{tid}/cwd")).join(path)
    };
    let c = std::ffi::CString::new(full.as_os_str().as_bytes()).map_err(|_| libc::EINVAL)?;
    // SAFETY: open with a valid C string.
    let fd = unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(errno(io::Error::last_os_error()));
    }
    // SAFETY: a new fd owned by us.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: fstat fills the zeroed struct we own.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstat(fd.as_raw_fd(), &mut st) } != 0 {
        return Err(errno(io::Error::last_os_error()));
    }
    if st.st_mode & libc::S_IFMT != libc::S_IFSOCK {
        return Err(libc::ECONNREFUSED);
    }
    Ok(fd)
}

fn unix_addr(path: &[u8]) -> libc::sockaddr_un {
    // SAFETY: sockaddr_un is plain data; all zeroes is valid.
    let mut a: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    a.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in a.sun_path.iter_mut().zip(path) {
        *d = *s as libc::c_char;
    }
    a
}

fn connect(sock: &OwnedFd, addr: &[u8]) -> Result<i64, i32> {
    // SAFETY: connect reads `addr.len()` bytes of `addr`.
    let r = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            addr.as_ptr().cast(),
            addr.len() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(errno(io::Error::last_os_error()));
    }
    Ok(0)
}
