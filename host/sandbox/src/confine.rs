//! What the init of a confined command's namespaces does before it starts
//! the command, prepared in the parent ([`Confinement::new`]) and run in the
//! forked child ([`Confinement::enter`], async-signal-safe system calls
//! only):
//!
//! 1. mounts: the mount tree made private; the protected paths (all of
//!    `.git`, the repository directories a `.git` file names, `.latch`)
//!    bound read-only, so they cannot be written, renamed or removed; a fresh `/proc` of the
//!    command's own PID namespace (its processes only; kept as it was where
//!    the kernel refuses, e.g. inside a container whose `/proc` is
//!    partly masked); an empty read-only file system over `/dev/pts`, so
//!    no terminal of the user's (a shell's, another tab's) can be opened to
//!    read its keystrokes, and over Latch's config directory where it lies
//!    inside a writable hierarchy (elsewhere Landlock leaves it out);
//! 2. `no_new_privs`, and the Landlock ruleset built in the parent (with a
//!    read rule added for the fresh `/proc`);
//! 3. the seccomp filter ([`crate::seccomp`]) with a user-notification
//!    listener, handed to the supervisor ([`crate::supervise`]) over the
//!    spawn's channel with `SCM_RIGHTS`; the command starts only once the
//!    supervisor has taken it.
//!
//! The namespaces themselves are entered by the keeper
//! ([`crate::keeper`]) before it forks this init.

use crate::landlock;
use crate::mode::SandboxMode;
use crate::seccomp;
use std::ffi::{CStr, CString};
use std::os::fd::{AsRawFd, OwnedFd};

/// The steps of one confined command, prepared in the parent.
pub(crate) struct Confinement {
    ruleset: OwnedFd,
    /// The Landlock rights a read rule grants (for the fresh `/proc`).
    read_access: u64,
    pinned: Vec<CString>,
    protected: Vec<(CString, libc::c_ulong)>,
    /// Directories hidden under an empty read-only mount (secrets inside a
    /// writable hierarchy, where Landlock cannot leave them out).
    masked: Vec<CString>,
    /// The seccomp program ([`seccomp::program`]).
    filter: Vec<libc::sock_filter>,
    /// The child's end of the channel to the supervisor.
    channel: OwnedFd,
}

impl Confinement {
    pub(crate) fn new(
        mode: SandboxMode,
        abi: u32,
        ruleset: OwnedFd,
        pinned: Vec<CString>,
        protected: Vec<(CString, libc::c_ulong)>,
        masked: Vec<CString>,
        channel: OwnedFd,
    ) -> Confinement {
        Confinement {
            ruleset,
            read_access: landlock::read_access(abi),
            pinned,
            protected,
            masked,
            filter: seccomp::program(mode),
            channel,
        }
    }

    /// Run in the init of the command's namespaces: only async-signal-safe
    /// system calls on data prepared in the parent.
    pub(crate) fn enter(&self) -> std::io::Result<()> {
        // SAFETY: plain system calls on NUL-terminated strings and buffers
        // owned by `self`, which outlives every call.
        unsafe {
            self.mount_all()?;
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
            check(libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ))?;
            self.hand_over_listener()
        }
    }

    /// # Safety
    /// Runs in the forked child: async-signal-safe system calls only.
    unsafe fn mount_all(&self) -> std::io::Result<()> {
        let none = std::ptr::null::<libc::c_char>();
        // SAFETY: see the function's contract; every pointer is a valid C
        // string or null.
        unsafe {
            check(libc::mount(
                none,
                c"/".as_ptr(),
                none,
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            ) as libc::c_long)?;
            for p in &self.pinned {
                check(libc::mount(
                    p.as_ptr(),
                    p.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ) as libc::c_long)?;
            }
            for (p, flags) in &self.protected {
                check(libc::mount(
                    p.as_ptr(),
                    p.as_ptr(),
                    none,
                    libc::MS_BIND,
                    std::ptr::null(),
                ) as libc::c_long)?;
                check(libc::mount(
                    none,
                    p.as_ptr(),
                    none,
                    libc::MS_REMOUNT | libc::MS_BIND | libc::MS_RDONLY | flags,
                    std::ptr::null(),
                ) as libc::c_long)?;
            }
            for p in &self.masked {
                check(libc::mount(
                    c"tmpfs".as_ptr(),
                    p.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=4k,mode=000".as_ptr().cast(),
                ) as libc::c_long)?;
            }
            // The user's terminals: hidden under an empty read-only tmpfs.
            // No confined command can open a pseudo-terminal anyway (it may
            // not write `/dev/ptmx`), so nothing that worked is lost.
            check(libc::mount(
                c"tmpfs".as_ptr(),
                c"/dev/pts".as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                c"size=4k,mode=755".as_ptr().cast(),
            ) as libc::c_long)?;
            // The command's own processes in `/proc` (this process is the
            // PID namespace's init). Where the kernel refuses (a container
            // masking parts of its `/proc`), the old one stays: the PID
            // namespace still holds, only `ps` shows more than it could
            // signal.
            let proc_mounted = libc::mount(
                c"proc".as_ptr(),
                c"/proc".as_ptr(),
                c"proc".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                std::ptr::null(),
            ) == 0;
            if proc_mounted {
                self.allow_reading(c"/proc")?;
            }
        }
        Ok(())
    }

    /// Add a Landlock read rule for `path` to the ruleset (a file system
    /// mounted after the ruleset was built in the parent).
    ///
    /// # Safety
    /// Runs in the forked child: async-signal-safe system calls only.
    unsafe fn allow_reading(&self, path: &CStr) -> std::io::Result<()> {
        /// `struct landlock_path_beneath_attr` (packed, as the kernel has it).
        #[repr(C, packed)]
        struct PathBeneath {
            allowed_access: u64,
            parent_fd: i32,
        }
        // SAFETY: open and landlock_add_rule on a valid C string and the
        // attribute struct on this frame.
        unsafe {
            let fd = libc::open(path.as_ptr(), libc::O_PATH | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let attr = PathBeneath {
                allowed_access: self.read_access,
                parent_fd: fd,
            };
            let r = libc::syscall(
                libc::SYS_landlock_add_rule,
                self.ruleset.as_raw_fd(),
                1u32, // LANDLOCK_RULE_PATH_BENEATH
                &attr as *const PathBeneath,
                0u32,
            );
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if r < 0 {
                return Err(err);
            }
        }
        Ok(())
    }

    /// Install the seccomp filter with a listener, send the listener to the
    /// supervisor (`SCM_RIGHTS`: this init's pid means nothing outside its
    /// PID namespace) and wait until it has taken it.
    ///
    /// # Safety
    /// Runs in the forked child: async-signal-safe system calls only.
    unsafe fn hand_over_listener(&self) -> std::io::Result<()> {
        let refused = || std::io::Error::from_raw_os_error(libc::EPERM);
        let prog = libc::sock_fprog {
            len: self.filter.len() as libc::c_ushort,
            filter: self.filter.as_ptr().cast_mut(),
        };
        // SAFETY: plain system calls on memory owned by `self` and this frame.
        unsafe {
            let listener = libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                libc::SECCOMP_FILTER_FLAG_NEW_LISTENER,
                &prog as *const libc::sock_fprog,
            );
            if listener < 0 {
                return Err(std::io::Error::last_os_error());
            }
            let listener = listener as libc::c_int;
            let channel = self.channel.as_raw_fd();
            let sent = send_fd(channel, listener);
            libc::close(listener);
            if !sent {
                return Err(refused());
            }
            let mut ack = 0u8;
            let n = libc::read(channel, (&mut ack as *mut u8).cast(), 1);
            if n != 1 || ack != 1 {
                return Err(refused());
            }
        }
        Ok(())
    }
}

/// Send `fd` over the Unix socket `channel` with one byte of data.
///
/// # Safety
/// Async-signal-safe; `channel` and `fd` must be open.
unsafe fn send_fd(channel: libc::c_int, fd: libc::c_int) -> bool {
    // Room for one cmsghdr carrying one int (CMSG_SPACE(4) on 64-bit).
    #[repr(C, align(8))]
    struct Control([u8; 24]);
    let mut control = Control([0; 24]);
    let mut byte = 1u8;
    let mut iov = libc::iovec {
        iov_base: (&mut byte as *mut u8).cast(),
        iov_len: 1,
    };
    // SAFETY: the msghdr points at `iov` and `control` on this frame; the
    // CMSG macros stay inside `control`.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.0.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(4) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        if cmsg.is_null() {
            return false;
        }
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(4) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), fd);
        libc::sendmsg(channel, &msg, libc::MSG_NOSIGNAL) == 1
    }
}

fn check(r: libc::c_long) -> std::io::Result<()> {
    if r < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(())
    }
}
