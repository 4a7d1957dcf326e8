//! `latch sandbox check`: what this machine can enforce, and a self-test
//! that runs four probes inside a `workspace-write` sandbox — a write
//! outside the workspace, a read of `~/.ssh`, a TCP connect to 127.0.0.1,
//! a connect to a Unix socket outside the workspace (a listener the check
//! starts itself) — each of which must be refused.
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
}

impl ProbeOp {
    /// Its name on the probe's command line.
    pub fn name(self) -> &'static str {
        match self {
            ProbeOp::Write => "write",
            ProbeOp::Read => "read",
            ProbeOp::Connect => "connect",
            ProbeOp::UnixConnect => "unix-connect",
        }
    }

    /// Parse a name.
    pub fn parse(name: &str) -> Option<ProbeOp> {
        [
            ProbeOp::Write,
            ProbeOp::Read,
            ProbeOp::Connect,
            ProbeOp::UnixConnect,
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
    }
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
    ];
    let mut results = Vec::new();
    for (what, op, target) in probes {
        let result = run_probe(&sandbox, probe_command(op, &target), what, &target);
        results.push(result);
    }
    let _ = std::fs::remove_file(&outside);
    drop(unix_listener);
    let _ = std::fs::remove_file(&socket);
    let _ = sandbox.remove_temp_dir();
    Ok(results)
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
                ]
                .iter()
                .any(|w| lower.contains(w));
        }
        Err(e) => result.detail = format!("the probe did not start: {e}"),
    }
    result
}
