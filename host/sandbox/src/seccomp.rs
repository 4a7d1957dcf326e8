//! The seccomp filter every confined command runs under, built in the
//! parent as classic BPF and installed in the child (after Landlock) with a
//! user-notification listener that [`crate::supervise`] answers.
//!
//! What it does, for the native architecture only (any other ABI — i386
//! through `int 0x80`, x32 numbers — is killed or refused):
//!
//! * `connect` is sent to the supervisor, which checks the address and
//!   performs the connect itself on the command's socket (so a thread that
//!   rewrites the address after the check changes nothing).
//! * Unix datagram sockets cannot be created (`socket`/`socketpair` with
//!   `AF_UNIX` and a type other than stream or seqpacket): a datagram names
//!   its destination in every `sendto`/`sendmsg`, beyond any check.
//! * `io_uring_setup`/`enter`/`register` fail with `ENOSYS` (io_uring
//!   connects and sends without passing through the filter) and
//!   `mount_setattr` with `EPERM`.
//! * Under `read-only`: chmod, chown, utime, truncate and xattr writes fail
//!   with `EPERM` (Landlock has no rights for file metadata).
//! * `ioctl` `TIOCSTI` (push bytes into a terminal's input, as if typed)
//!   and `TIOCLINUX` (the console's selection and paste) fail with `EPERM`,
//!   whatever the terminal: the command has none of its own, and this holds
//!   even where the kernel would allow it. The request is compared on its
//!   low 32 bits, as the kernel reads it, so high bits set in the 64-bit
//!   argument change nothing.
//!
//! Under `full-access` no filter confines the command; only the terminal
//! rule ([`terminal_program`]) is installed, where the kernel lets a
//! process without `no_new_privs` install one (a user with
//! `CAP_SYS_ADMIN`, such as root, who could otherwise inject into any
//! terminal; without that capability the kernel itself refuses `TIOCSTI`
//! to a process with no controlling terminal).

use crate::mode::SandboxMode;

/// `struct seccomp_data` offsets.
const NR: u32 = 0;
const ARCH: u32 = 4;
const fn arg_low(i: u32) -> u32 {
    16 + 8 * i
}

#[cfg(target_arch = "x86_64")]
const AUDIT_ARCH: u32 = 0xc000_003e;
#[cfg(target_arch = "aarch64")]
const AUDIT_ARCH: u32 = 0xc000_00b7;

/// Syscalls that write file metadata, refused under `read-only`.
fn metadata_writes() -> Vec<libc::c_long> {
    let mut v = vec![
        libc::SYS_fchmod,
        libc::SYS_fchmodat,
        452, // fchmodat2
        libc::SYS_fchown,
        libc::SYS_fchownat,
        libc::SYS_utimensat,
        libc::SYS_truncate,
        libc::SYS_setxattr,
        libc::SYS_lsetxattr,
        libc::SYS_fsetxattr,
        libc::SYS_removexattr,
        libc::SYS_lremovexattr,
        libc::SYS_fremovexattr,
        463, // setxattrat
        466, // removexattrat
    ];
    #[cfg(target_arch = "x86_64")]
    v.extend([
        libc::SYS_chmod,
        libc::SYS_chown,
        libc::SYS_lchown,
        libc::SYS_utime,
        libc::SYS_utimes,
        libc::SYS_futimesat,
    ]);
    v
}

fn stmt(code: u32, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt: 0,
        jf: 0,
        k,
    }
}

fn jump(code: u32, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    }
}

const LD_ABS: u32 = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
const JEQ: u32 = libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K;
const JGE: u32 = libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K;
const AND: u32 = libc::BPF_ALU | libc::BPF_AND | libc::BPF_K;
const RET: u32 = libc::BPF_RET | libc::BPF_K;

const ALLOW: u32 = libc::SECCOMP_RET_ALLOW;
const NOTIFY: u32 = libc::SECCOMP_RET_USER_NOTIF;
const fn errno(e: i32) -> u32 {
    libc::SECCOMP_RET_ERRNO | (e as u32 & libc::SECCOMP_RET_DATA)
}

/// `ioctl` requests no command may make, on any descriptor.
pub(crate) const TERMINAL_REQUESTS: [u32; 2] = [libc::TIOCSTI as u32, libc::TIOCLINUX as u32];

/// The start of every program: the native architecture only, the syscall
/// number loaded.
fn preamble() -> Vec<libc::sock_filter> {
    let mut p = vec![
        stmt(LD_ABS, ARCH),
        jump(JEQ, AUDIT_ARCH, 1, 0),
        stmt(RET, libc::SECCOMP_RET_KILL_PROCESS),
        stmt(LD_ABS, NR),
    ];
    #[cfg(target_arch = "x86_64")]
    p.extend([
        // x32 numbers reach the same kernel code under other numbers.
        jump(JGE, 0x4000_0000, 0, 1),
        stmt(RET, errno(libc::ENOSYS)),
    ]);
    p
}

/// `ioctl` with a [`TERMINAL_REQUESTS`] request fails with `EPERM`; any
/// other `ioctl` is allowed; other syscalls go on to the next rule.
fn terminal_rule() -> [libc::sock_filter; 6] {
    let [sti, linux] = TERMINAL_REQUESTS;
    [
        jump(JEQ, libc::SYS_ioctl as u32, 0, 5),
        // The low half of the request: the kernel takes an `unsigned int`.
        stmt(LD_ABS, arg_low(1)),
        jump(JEQ, sti, 2, 0),
        jump(JEQ, linux, 1, 0),
        stmt(RET, ALLOW),
        stmt(RET, errno(libc::EPERM)),
    ]
}

/// The program of a `full-access` command: the terminal rule only.
pub(crate) fn terminal_program() -> Vec<libc::sock_filter> {
    let mut p = preamble();
    p.extend(terminal_rule());
    p.push(stmt(RET, ALLOW));
    p
}

/// The filter program for `mode`.
pub(crate) fn program(mode: SandboxMode) -> Vec<libc::sock_filter> {
    let mut p = preamble();
    p.extend(terminal_rule());
    for nr in [libc::SYS_socket, libc::SYS_socketpair] {
        p.extend([
            jump(JEQ, nr as u32, 0, 8),
            stmt(LD_ABS, arg_low(0)),
            jump(JEQ, libc::AF_UNIX as u32, 0, 5),
            stmt(LD_ABS, arg_low(1)),
            stmt(AND, 0xf),
            jump(JEQ, libc::SOCK_STREAM as u32, 2, 0),
            jump(JEQ, libc::SOCK_SEQPACKET as u32, 1, 0),
            stmt(RET, errno(libc::EACCES)),
            stmt(RET, ALLOW),
        ]);
    }
    let mut rules: Vec<(libc::c_long, u32)> = vec![
        (libc::SYS_connect, NOTIFY),
        (libc::SYS_io_uring_setup, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_enter, errno(libc::ENOSYS)),
        (libc::SYS_io_uring_register, errno(libc::ENOSYS)),
        (442, errno(libc::EPERM)), // mount_setattr
    ];
    if mode == SandboxMode::ReadOnly {
        rules.extend(
            metadata_writes()
                .into_iter()
                .map(|nr| (nr, errno(libc::EPERM))),
        );
    }
    for (nr, action) in rules {
        p.extend([jump(JEQ, nr as u32, 0, 1), stmt(RET, action)]);
    }
    p.push(stmt(RET, ALLOW));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_jump_lands_inside_the_program_and_it_ends_allowing() {
        for mode in [SandboxMode::ReadOnly, SandboxMode::WorkspaceWrite] {
            let p = program(mode);
            assert!(p.len() < 256);
            for (i, ins) in p.iter().enumerate() {
                if u32::from(ins.code) & 0x07 == libc::BPF_JMP {
                    assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < p.len(), "{i}");
                }
            }
            let last = p.last().unwrap();
            assert_eq!((u32::from(last.code), last.k), (RET, ALLOW));
        }
        let t = terminal_program();
        for (i, ins) in t.iter().enumerate() {
            if u32::from(ins.code) & 0x07 == libc::BPF_JMP {
                assert!(i + 1 + (ins.jt.max(ins.jf) as usize) < t.len(), "{i}");
            }
        }
        assert!(program(SandboxMode::ReadOnly).len() > program(SandboxMode::WorkspaceWrite).len());
    }
}
