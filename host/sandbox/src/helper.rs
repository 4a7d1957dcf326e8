//! [`HelperJail`]: the confinement of the programs Latch runs for its own
//! bookkeeping (its git: the workspace fingerprint, snapshots and the
//! checkpoints read from them), never for the agent.
//!
//! Such a program must never act on what a repository or a command
//! planted, and the caller makes sure it runs nothing of the kind (see the
//! kernel's `git` module); the jail is the second wall, should anything
//! run anyway. Before `exec`, the child
//!
//! 1. leaves Latch's session and controlling terminal (`setsid`), so it
//!    can neither read nor push keys into the user's terminal;
//! 2. enters a fresh user and network namespace (only a down loopback:
//!    every connection fails);
//! 3. sets `no_new_privs` and restricts itself with Landlock: it may read
//!    what a `read-only` command may (everything but the credentials under
//!    the home directory, [`crate::rules::HOME_SECRETS`]) and write only
//!    the directories the caller names (Latch's own snapshot directory);
//!    from Landlock ABI 6 it may neither signal nor reach an abstract
//!    socket outside itself;
//! 4. installs a seccomp filter that refuses every socket (named Unix
//!    sockets, which Landlock does not cover, included), io_uring, and the
//!    terminal ioctls that inject input (`TIOCSTI`, `TIOCLINUX`).
//!
//! The ruleset and the filter are built once, in the parent, and shared by
//! every spawn: what a confined git costs over a plain one is the namespace
//! and the two system calls (`cargo bench -p latch-kernel --bench
//! fingerprint`).

use crate::landlock;
use crate::mode::SandboxMode;
use crate::rules::{DEVICES, HOME_SECRETS, Rules, readable_except};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

/// Why Latch's own programs cannot be confined on this machine.
#[derive(Debug, thiserror::Error)]
pub enum JailError {
    /// The kernel lacks what the jail needs (Landlock, unprivileged user
    /// namespaces).
    #[error(
        "Latch's own git cannot be confined on this machine: {0}. Latch then does not run it: \
         every command that may write counts as a change, and commands are not checkpointed. \
         Use a kernel with Landlock and unprivileged user namespaces (see `latch sandbox check`)"
    )]
    Unavailable(String),
    /// Preparing the jail failed.
    #[error("could not prepare the confinement of Latch's own git: {0}")]
    Setup(String),
}

impl JailError {
    /// A stable name for the kind of failure.
    pub fn kind(&self) -> &'static str {
        match self {
            JailError::Unavailable(_) => "jail-unavailable",
            JailError::Setup(_) => "jail-setup",
        }
    }
}

/// The confinement of Latch's own helper programs; cheap to clone.
#[derive(Clone, Debug)]
pub struct HelperJail {
    steps: Arc<Steps>,
    writable: Vec<PathBuf>,
}

#[derive(Debug)]
struct Steps {
    ruleset: OwnedFd,
    uid_map: Vec<u8>,
    gid_map: Vec<u8>,
    filter: Vec<libc::sock_filter>,
}

impl HelperJail {
    /// A jail in which a program may read what a `read-only` command may
    /// (hiding the credentials under `home`) and write only under
    /// `writable`, with no network.
    pub fn new(writable: &[PathBuf], home: Option<&Path>) -> Result<HelperJail, JailError> {
        let abi = landlock::abi_version().map_err(JailError::Unavailable)?;
        if abi == 0 {
            return Err(JailError::Unavailable(
                "the kernel offers no Landlock ABI".into(),
            ));
        }
        crate::exec::namespaces_available().map_err(|e| {
            JailError::Unavailable(format!("unprivileged user namespaces do not work ({e})"))
        })?;
        let rules = helper_rules(writable, home);
        let ruleset = landlock::ruleset(SandboxMode::ReadOnly, abi, &rules)
            .map_err(|e| JailError::Setup(e.to_string()))?;
        // SAFETY: geteuid/getegid cannot fail and touch no memory.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        Ok(HelperJail {
            steps: Arc::new(Steps {
                ruleset,
                uid_map: format!("{uid} {uid} 1\n").into_bytes(),
                gid_map: format!("{gid} {gid} 1\n").into_bytes(),
                filter: filter(),
            }),
            writable: writable.to_vec(),
        })
    }

    /// The directories a jailed program may write.
    pub fn writable(&self) -> &[PathBuf] {
        &self.writable
    }

    /// Confine `cmd`: the steps run in the forked child before `exec`; a
    /// failure of any makes the spawn fail with the kernel's error (the
    /// program never runs unconfined).
    pub fn confine(&self, cmd: &mut Command) {
        let steps = Arc::clone(&self.steps);
        // SAFETY: `enter` runs in the forked child before exec and makes only
        // async-signal-safe system calls on data prepared in the parent; it
        // allocates nothing and takes no lock.
        unsafe {
            cmd.pre_exec(move || steps.enter());
        }
    }
}

/// What a helper may read and write: [`HOME_SECRETS`] hidden, writes only
/// under `writable`, the harmless devices.
fn helper_rules(writable: &[PathBuf], home: Option<&Path>) -> Rules {
    let hidden: Vec<PathBuf> = home
        .filter(|h| h.parent().is_some())
        .map(|h| HOME_SECRETS.iter().map(|s| h.join(s)).collect())
        .unwrap_or_default();
    let mut read = Vec::new();
    readable_except(Path::new("/"), &hidden, &mut read);
    Rules {
        read,
        write: writable.to_vec(),
        devices: DEVICES.iter().map(PathBuf::from).collect(),
        ..Rules::default()
    }
}

impl Steps {
    /// Runs in the forked child: only async-signal-safe system calls.
    fn enter(&self) -> std::io::Result<()> {
        let check = |r: libc::c_long| {
            if r < 0 {
                Err(std::io::Error::last_os_error())
            } else {
                Ok(())
            }
        };
        // SAFETY: plain system calls on NUL-terminated strings and buffers
        // owned by `self`, which outlives every call.
        unsafe {
            check(libc::setsid() as libc::c_long)?;
            check(libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET) as libc::c_long)?;
            crate::keeper::write_proc(c"/proc/self/setgroups", b"deny")?;
            crate::keeper::write_proc(c"/proc/self/uid_map", &self.uid_map)?;
            crate::keeper::write_proc(c"/proc/self/gid_map", &self.gid_map)?;
            check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) as libc::c_long)?;
            check(libc::syscall(
                libc::SYS_landlock_restrict_self,
                self.ruleset.as_raw_fd(),
                0u32,
            ))?;
            let prog = libc::sock_fprog {
                len: self.filter.len() as libc::c_ushort,
                filter: self.filter.as_ptr().cast_mut(),
            };
            check(libc::syscall(
                libc::SYS_seccomp,
                libc::SECCOMP_SET_MODE_FILTER,
                0u32,
                &prog as *const libc::sock_fprog,
            ))?;
        }
        Ok(())
    }
}

/// `struct seccomp_data` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const ARG1_LOW: u32 = 24;

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

const LD_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;

fn ins(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// The helper's system-call filter (native ABI only; any other is killed
/// or refused): no socket of any family, no io_uring, no input injected
/// into a terminal.
fn filter() -> Vec<libc::sock_filter> {
    let mut p = vec![
        ins(LD_ABS, ARCH, 0, 0),
        ins(JEQ, AUDIT_ARCH, 1, 0),
        ins(RET, libc::SECCOMP_RET_KILL_PROCESS, 0, 0),
        ins(LD_ABS, NR, 0, 0),
    ];
    #[cfg(target_arch = "x86_64")]
    p.extend([
        // x32 numbers reach the same kernel code under other numbers.
        ins(JGE, 0x4000_0000, 0, 1),
        ins(RET, errno(libc::ENOSYS), 0, 0),
    ]);
    let refused: [(libc::c_long, u32); 6] = [
        (libc::SYS_socket, errno(libc::EACCES)),
        (libc::SYS_socketpair, errno(libc::EACCES)),
        (libc::SYS_connect, errno(libc::EACCES)),
        (libc::SYS_io_uring_setup, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_enter, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_register, errno(libc::ENOSYS)),
    ];
    for (nr, action) in refused {
        p.extend([ins(JEQ, nr as u32, 0, 1), ins(RET, action, 0, 0)]);
    }
    // ioctl(fd, TIOCSTI | TIOCLINUX, …): refused whatever the terminal.
    p.extend([
        ins(JEQ, libc::SYS_ioctl as u32, 0, 4),
        ins(LD_ABS, ARG1_LOW, 0, 0),
        ins(JEQ, libc::TIOCSTI as u32, 1, 0),
        ins(JEQ, libc::TIOCLINUX as u32, 0, 1),
        ins(RET, errno(libc::EPERM), 0, 0),
    ]);
    p.push(ins(RET, libc::SECCOMP_RET_ALLOW, 0, 0));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_of_the_filter_lands_inside_it_and_it_ends_allowing() {
        let p = filter();
        for (i, ins) in p.iter().enumerate() {
            if u32::from(ins.code) & 0x07 == libc::BPF_JMP {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(), "{i}");
            }
        }
        let last = p.last().unwrap();
        assert_eq!(
            (u32::from(last.code), last.k),
            (RET, libc::SECCOMP_RET_ALLOW)
        );
    }

    #[test]
    fn a_helper_reads_but_writes_only_where_it_is_told_and_never_the_secrets() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".ssh")).unwrap();
        let out = tempfile::tempdir().unwrap();
        let r = helper_rules(&[out.path().to_path_buf()], Some(home.path()));
        assert_eq!(r.write, vec![out.path().to_path_buf()]);
        let covered = |p: &Path| r.read.iter().any(|g| p.starts_with(g));
        assert!(covered(Path::new("/usr/bin/git")));
        assert!(!covered(&home.path().join(".ssh/id_ed25519")));
        assert!(r.protected.is_empty() && r.pinned.is_empty());
    }
}
