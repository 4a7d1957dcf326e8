//! `latch sandbox check`: what this machine can enforce, and a self-test
//! that runs seven probes inside a `workspace-write` sandbox — a write
//! outside the workspace, a read of `~/.ssh`, a TCP connect to 127.0.0.1,
//! a connect to a Unix socket outside the workspace (a listener the check
//! starts itself), `TIOCSTI` (pushing input into a terminal), opening the
//! controlling terminal, and a `setsid` child left writing after its
//! command returned — each of which must be refused (the last: stopped
//! with its command).
//!
//! A probe is a process the caller builds (the `latch` binary runs itself
//! as `latch sandbox probe OP TARGET`, which calls [`probe`]); it exits 0
//! when the operation succeeded and 1 with the error when it was refused.

use crate::exec::{Sandbox, namespaces_available};
use crate::landlock::abi_version;
use crate::mode::SandboxMode;
use crate::rules::SandboxPolicy;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// What the kernel offers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capabilities {
    /// The Landlock ABI (0: none), or why it could not be read.
    pub landlock_abi: Result<u32, String>,
    /// Whether unprivileged user + network namespaces work.
    pub namespaces: Result<(), String>,
}

/// Probe the kernel.
pub fn capabilities() -> Capabilities {
    Capabilities {
        landlock_abi: abi_version(),
        namespaces: namespaces_available(),
    }
}

/// The operations a probe can try.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeOp {
    /// Create (and remove) a file.
    Write,
    /// Read a file, or list a directory.
    Read,
    /// Open a TCP connection to `host:port`.
    Connect,
    /// Connect to the Unix socket at a path.
    UnixConnect,
    /// Push a byte into the input of the terminal on standard input
    /// (`TIOCSTI`, also with high bits set in the request). Refused when
    /// every attempt fails with `EPERM` — the seccomp filter's answer on
    /// any descriptor (the kernel alone would say `ENOTTY` on one that is
    /// no terminal).
    Tiocsti,
    /// Open the controlling terminal (`/dev/tty`).
    ControllingTerminal,
    /// Leave a `setsid` shell appending to the file at the target every
    /// 100 ms (for 5 s at most), and return once it has started. Refused
    /// when the file stops growing once the probe has returned.
    Survivor,
}

impl ProbeOp {
    /// Its name on the probe's command line.
    pub fn name(self) -> &'static str {
        match self {
            ProbeOp::Write => "write",
            ProbeOp::Read => "read",
            ProbeOp::Connect => "connect",
            ProbeOp::UnixConnect => "unix-connect",
            ProbeOp::Tiocsti => "tiocsti",
            ProbeOp::ControllingTerminal => "controlling-terminal",
            ProbeOp::Survivor => "survivor",
        }
    }

    /// Parse a name.
    pub fn parse(name: &str) -> Option<ProbeOp> {
        [
            ProbeOp::Write,
            ProbeOp::Read,
            ProbeOp::Connect,
            ProbeOp::UnixConnect,
            ProbeOp::Tiocsti,
            ProbeOp::ControllingTerminal,
            ProbeOp::Survivor,
        ]
        .into_iter()
        .find(|o| o.name() == name)
    }
}

/// Try `op` on `target` in this process (the probe's body).
pub fn probe(op: ProbeOp, target: &str) -> std::io::Result<()> {
    match op {
        ProbeOp::Write => {
            std::fs::write(target, b"latch sandbox probe\n")?;
            std::fs::remove_file(target)
        }
        ProbeOp::Read => {
            let path = Path::new(target);
            if path.is_dir() {
                std::fs::read_dir(path)?.count();
            } else {
                let mut s = Vec::new();
                std::fs::File::open(path)?.read_to_end(&mut s)?;
            }
            Ok(())
        }
        ProbeOp::Connect => {
            let addr = target
                .parse()
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
            TcpStream::connect_timeout(&addr, Duration::from_secs(2)).map(drop)
        }
        ProbeOp::UnixConnect => UnixStream::connect(target).map(drop),
        ProbeOp::Tiocsti => tiocsti(),
        ProbeOp::ControllingTerminal => std::fs::File::open("/dev/tty").map(drop),
        ProbeOp::Survivor => survivor(Path::new(target)),
    }
}

/// [`ProbeOp::Tiocsti`]: Ok when one push was not refused with `EPERM`.
fn tiocsti() -> std::io::Result<()> {
    let byte = b'x';
    let mut refused = None;
    let [sti, linux] = crate::seccomp::TERMINAL_REQUESTS.map(u64::from);
    for request in [sti, sti | (1 << 32), linux] {
        // SAFETY: TIOCSTI reads one byte at the pointer; TIOCLINUX reads
        // one byte (the subcode) there too.
        let r = unsafe { libc::ioctl(0, request as _, &byte as *const u8) };
        let e = std::io::Error::last_os_error();
        if r == 0 || e.raw_os_error() != Some(libc::EPERM) {
            println!(
                "request {request:#x} was not refused by the sandbox (the kernel answered: {})",
                if r == 0 {
                    "ok".to_string()
                } else {
                    e.to_string()
                }
            );
            return Ok(());
        }
        refused = Some(e);
    }
    Err(refused.unwrap_or_else(|| std::io::Error::from_raw_os_error(libc::EPERM)))
}

/// [`ProbeOp::Survivor`]: start the `setsid` writer and wait until it has
/// written once.
fn survivor(target: &Path) -> std::io::Result<()> {
    let mut writer = Command::new("sh");
    writer
        .args([
            "-c",
            "i=0; while [ $i -lt 50 ] && [ ! -e \"$1.stop\" ]; do echo x >> \"$1\"; \
             i=$((i+1)); sleep 0.1; done",
            "latch-survivor",
        ])
        .arg(target)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: setsid is async-signal-safe and touches no memory.
    unsafe {
        writer.pre_exec(|| {
            libc::setsid();
            Ok(())
        });
    }
    writer.spawn()?;
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while !target.exists() {
        if std::time::Instant::now() > deadline {
            return Err(std::io::Error::other("the writer never started"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("started a setsid writer on {}", target.display());
    Ok(())
}

/// One probe's outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeResult {
    /// What was tried, e.g. `write outside the workspace`.
    pub what: String,
    /// The target.
    pub target: String,
    /// True when the sandbox refused it (the pass condition).
    pub refused: bool,
    /// The probe's own words (the error it met) or why it could not run.
    pub detail: String,
}

/// Run the self-test in a `workspace-write` sandbox (network off) over
/// `workspace`, hiding the secrets under `home`. `probe_command(op,
/// target)` builds the process that tries one operation.
pub fn self_test(
    workspace: &Path,
    home: Option<&Path>,
    probe_command: &dyn Fn(ProbeOp, &str) -> Command,
) -> Result<Vec<ProbeResult>, crate::SandboxError> {
    let policy = SandboxPolicy {
        mode: SandboxMode::WorkspaceWrite,
        network: false,
        ..SandboxPolicy::default()
    };
    let mut sandbox = Sandbox::new(policy, workspace, &format!("check-{}", std::process::id()))?;
    if let Some(h) = home {
        sandbox = sandbox.with_home(h);
    }
    let outside: PathBuf =
        std::env::temp_dir().join(format!("latch-sandbox-check-{}", std::process::id()));
    let listener = TcpListener::bind("127.0.0.1:0").ok();
    let port = listener
        .as_ref()
        .and_then(|l| l.local_addr().ok())
        .map(|a| a.port())
        .unwrap_or(9);
    // A socket of this process outside the workspace and the session temp
    // dir, as the D-Bus session bus or an SSH agent would be.
    let socket =
        std::env::temp_dir().join(format!("latch-sandbox-check-{}.sock", std::process::id()));
    let _ = std::fs::remove_file(&socket);
    let unix_listener = UnixListener::bind(&socket).ok();
    let ssh = home
        .map(|h| h.join(".ssh"))
        .unwrap_or_else(|| PathBuf::from("~/.ssh"));
    let probes = [
        (
            "write outside the workspace",
            ProbeOp::Write,
            outside.display().to_string(),
        ),
        ("read ~/.ssh", ProbeOp::Read, ssh.display().to_string()),
        (
            "TCP connect to 127.0.0.1",
            ProbeOp::Connect,
            format!("127.0.0.1:{port}"),
        ),
        (
            "Unix socket connect outside the workspace",
            ProbeOp::UnixConnect,
            socket.display().to_string(),
        ),
        (
            "TIOCSTI (push input into a terminal)",
            ProbeOp::Tiocsti,
            "standard input".to_string(),
        ),
        (
            "open the controlling terminal",
            ProbeOp::ControllingTerminal,
            "/dev/tty".to_string(),
        ),
        (
            "a setsid child outliving its command",
            ProbeOp::Survivor,
            workspace.join("survivor.log").display().to_string(),
        ),
    ];
    let mut results = Vec::new();
    for (what, op, target) in probes {
        let mut result = run_probe(&sandbox, probe_command(op, &target), what, &target);
        if op == ProbeOp::Survivor {
            outlived(Path::new(&target), &mut result);
        }
        results.push(result);
    }
    let _ = std::fs::remove_file(&outside);
    drop(unix_listener);
    let _ = std::fs::remove_file(&socket);
    let _ = sandbox.remove_temp_dir();
    Ok(results)
}

/// After the survivor probe returned: refused when its writer's file
/// stopped growing (the writer died with its command).
fn outlived(target: &Path, result: &mut ProbeResult) {
    if !result.detail.contains("started a setsid writer") {
        result.refused = false;
        return;
    }
    let size = || std::fs::metadata(target).map(|m| m.len()).unwrap_or(0);
    std::thread::sleep(Duration::from_millis(300));
    let before = size();
    std::thread::sleep(Duration::from_millis(700));
    let after = size();
    let _ = std::fs::write(format!("{}.stop", target.display()), b"");
    result.refused = before == after;
    result.detail = if result.refused {
        "stopped with its command".to_string()
    } else {
        format!("still writing after its command returned ({before} → {after} bytes)")
    };
}

fn run_probe(sandbox: &Sandbox, mut cmd: Command, what: &str, target: &str) -> ProbeResult {
    let mut result = ProbeResult {
        what: what.to_string(),
        target: target.to_string(),
        refused: false,
        detail: String::new(),
    };
    if let Err(e) = sandbox.apply(&mut cmd) {
        result.detail = format!("could not prepare the sandbox: {e}");
        return result;
    }
    let out = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output();
    match out {
        Ok(out) => {
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            result.detail = text.trim().to_string();
            // Refused means: the probe ran and failed with a permission or
            // network error, not that it could not find its target.
            let lower = result.detail.to_lowercase();
            result.refused = !out.status.success()
                && [
                    "permission denied",
                    "network is unreachable",
                    "read-only file system",
                    "operation not permitted",
                    "no such device or address",
                ]
                .iter()
                .any(|w| lower.contains(w));
        }
        Err(e) => result.detail = format!("the probe did not start: {e}"),
    }
    result
}
