//! Running `sh -c` commands: output capture (head and tail of the combined
//! stdout and stderr), foreground runs with a timeout that kills the
//! command's whole tree, the [`Cancel`] signal that kills a foreground
//! run's tree at once when the user interrupts the turn, and the plumbing
//! managed processes share.
//!
//! Every command runs under its sandbox's keeper ([`latch_sandbox::stop`]):
//! its own session without a terminal, and a process tree that dies whole
//! when the command ends, is stopped, or Latch exits (even by SIGKILL).
//! The pid a caller sees is the keeper's, which leads the command's
//! process group and ends as the command ended.

use latch_sandbox::Sandbox;
use std::collections::VecDeque;
use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a stopped command's keeper has to end its tree before its
/// process group is killed outright.
const STOP_GRACE: Duration = Duration::from_secs(2);

/// The cancel signal of the commands tool calls run in the foreground
/// (`shell`, `validate`): once it is set, a running command's whole process
/// group is killed at once and the call answers as interrupted. A surface
/// sets it when the user interrupts the turn; the agent clears it when the
/// next turn starts. Clones share one signal. Background (managed)
/// processes are not affected: they are stopped with `process_kill`.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    /// A signal that is not set.
    pub fn new() -> Cancel {
        Cancel::default()
    }

    /// Set the signal: running foreground commands are killed.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// Clear the signal (a new turn starts).
    pub fn reset(&self) {
        self.0.store(false, Ordering::SeqCst);
    }

    /// True once the signal is set (until it is cleared).
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// How the answer of a foreground command the user interrupted begins (the
/// surfaces show such a call as interrupted).
pub(crate) const INTERRUPTED: &str = "interrupted: the user stopped the turn";

/// Bytes of the beginning of an output that a capture keeps.
const HEAD_BYTES: usize = 64 * 1024;
/// Bytes of the end of an output that a capture keeps.
const TAIL_BYTES: usize = 64 * 1024;

/// A bounded capture of a process's output: its first bytes, the last bytes
/// after those (disjoint from the head) and the total count.
#[derive(Debug, Default)]
pub(crate) struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    total: u64,
}

impl Capture {
    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.head.len() < HEAD_BYTES {
            let n = bytes.len().min(HEAD_BYTES - self.head.len());
            self.head.extend_from_slice(&bytes[..n]);
            bytes = &bytes[n..];
        }
        if bytes.len() >= TAIL_BYTES {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - TAIL_BYTES..]);
        } else {
            let overflow = (self.tail.len() + bytes.len()).saturating_sub(TAIL_BYTES);
            self.tail.drain(..overflow);
            self.tail.extend(bytes);
        }
    }

    /// Total bytes seen.
    pub(crate) fn total(&self) -> u64 {
        self.total
    }

    /// Everything kept, with a marker where bytes were dropped.
    pub(crate) fn text(&self) -> String {
        let kept = self.head.len() as u64 + self.tail.len() as u64;
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if kept >= self.total {
            // Head and tail are disjoint; nothing was dropped between them.
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        format!(
            "{}\n[... {} bytes of output omitted ...]\n{}",
            String::from_utf8_lossy(&self.head),
            self.total - kept,
            String::from_utf8_lossy(&tail)
        )
    }

    /// The last `max` bytes of the output (starting on a character boundary).
    pub(crate) fn tail_text(&self, max: usize) -> String {
        let text = self.text();
        let mut start = text.len().saturating_sub(max);
        while !text.is_char_boundary(start) {
            start += 1;
        }
        text[start..].to_string()
    }
}

/// A spawned `sh -c` command under its keeper, with a thread copying its
/// combined output into a [`Capture`].
pub(crate) struct Spawned {
    pub(crate) child: Child,
    pub(crate) capture: Arc<Mutex<Capture>>,
    /// Receives once the output pipe reached end of file.
    pub(crate) drained: Receiver<()>,
}

/// Spawn `sh -c command` in `dir`, with standard input closed and stdout
/// and stderr on one pipe, confined by `sandbox` (which every process the
/// command starts inherits) and under its keeper (its own session, its
/// tree killed whole).
pub(crate) fn spawn(dir: &Path, command: &str, sandbox: &Sandbox) -> std::io::Result<Spawned> {
    let (mut reader, writer) = std::io::pipe()?;
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .env("PAGER", "cat")
        .env("GIT_PAGER", "cat")
        .env("GIT_TERMINAL_PROMPT", "0");
    sandbox
        .apply(&mut cmd)
        .map_err(|e| std::io::Error::other(e.to_string()))?;
    let child = cmd.spawn().map_err(|e| {
        if sandbox.mode() == latch_sandbox::SandboxMode::FullAccess {
            e
        } else {
            std::io::Error::new(
                e.kind(),
                format!(
                    "could not start it in the `{}` sandbox: {e}",
                    sandbox.mode()
                ),
            )
        }
    })?;
    // The command holds the pipe's write ends; drop them so the reader sees
    // end of file when the process (group) closes its copies.
    drop(cmd);
    let capture = Arc::new(Mutex::new(Capture::default()));
    let (done, drained) = mpsc::channel();
    let sink = Arc::clone(&capture);
    std::thread::Builder::new()
        .name("latch-output".into())
        .spawn(move || {
            let mut buf = [0u8; 8192];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => lock(&sink).push(&buf[..n]),
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = done.send(());
        })?;
    Ok(Spawned {
        child,
        capture,
        drained,
    })
}

/// Lock a mutex, recovering from poisoning (the data is plain bytes).
pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Send SIGKILL to every process of the group `pgid` (the keeper's group:
/// the keeper and, in a confined mode, the namespace's init and the
/// command). A group that no longer exists is not an error.
pub(crate) fn kill_group(pgid: u32) {
    let Ok(pgid) = i32::try_from(pgid) else {
        return;
    };
    if pgid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours; a
    // negative pid addresses the process group the keeper leads.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Stop the running command `child` at once: its keeper kills the whole
/// tree and dies by SIGKILL; a keeper that has not ended after
/// [`STOP_GRACE`] has its group killed outright. Returns how it ended.
pub(crate) fn stop(child: &mut Child) -> std::io::Result<ExitStatus> {
    latch_sandbox::stop(child.id());
    let deadline = Instant::now() + STOP_GRACE;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait()? {
            return Ok(status);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    kill_group(child.id());
    child.wait()
}

/// After the keeper exited (its command's tree is gone with it): wait
/// briefly for the output to drain; a group member still holding the pipe
/// is killed, and the pipe waited for a little more.
pub(crate) fn finish_group(pgid: u32, drained: &Receiver<()>) {
    if drained.recv_timeout(Duration::from_millis(150)).is_err() {
        kill_group(pgid);
        let _ = drained.recv_timeout(Duration::from_secs(1));
    }
}

/// How a foreground run ended.
#[derive(Debug)]
pub(crate) struct RunOutput {
    /// The exit code, when the command exited normally.
    pub(crate) exit_code: Option<i32>,
    /// The signal that ended it, if any.
    pub(crate) signal: Option<i32>,
    /// True when the timeout killed it.
    pub(crate) timed_out: bool,
    /// True when the [`Cancel`] signal killed it.
    pub(crate) interrupted: bool,
    /// Combined stdout and stderr (head and tail when long).
    pub(crate) output: String,
    /// Wall-clock time.
    pub(crate) elapsed: Duration,
}

impl RunOutput {
    /// True when the command exited with status 0.
    pub(crate) fn success(&self) -> bool {
        self.exit_code == Some(0) && !self.timed_out && !self.interrupted
    }

    /// For a run the [`Cancel`] signal killed: the call's answer, which
    /// begins with [`INTERRUPTED`] and keeps the output captured so far.
    pub(crate) fn interrupted_answer(&self) -> Option<String> {
        self.interrupted.then(|| {
            let mut out = format!(
                "{INTERRUPTED} after {}, and the command's process group was killed. Any \
                 effect it had is in the workspace; check and re-run it if needed.",
                human_duration(self.elapsed)
            );
            if !self.output.is_empty() {
                out.push_str("\noutput so far:\n");
                out.push_str(&self.output);
            }
            out
        })
    }

    /// `exit code 0`, `timed out after 2.0s and was killed`, ...
    pub(crate) fn status_line(&self, timeout: Duration) -> String {
        if self.interrupted {
            "interrupted by the user and killed".to_string()
        } else if self.timed_out {
            format!("timed out after {} and was killed", human_duration(timeout))
        } else if let Some(c) = self.exit_code {
            format!("exit code {c}")
        } else if let Some(s) = self.signal {
            format!("killed by signal {s}")
        } else {
            "ended without an exit code".to_string()
        }
    }
}

/// `1.5s`, `120s`, `350ms`.
pub(crate) fn human_duration(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{}ms", d.as_millis())
    } else if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

fn exit_parts(status: ExitStatus) -> (Option<i32>, Option<i32>) {
    (status.code(), status.signal())
}

/// Run `command` in the foreground in `sandbox`; kill its whole tree
/// after `timeout`, or as soon as `cancel` is set. Processes it leaves
/// behind die when it exits.
pub(crate) fn run_foreground(
    dir: &Path,
    command: &str,
    timeout: Duration,
    sandbox: &Sandbox,
    cancel: &Cancel,
) -> std::io::Result<RunOutput> {
    let start = Instant::now();
    let Spawned {
        mut child,
        capture,
        drained,
    } = spawn(dir, command, sandbox)?;
    let pgid = child.id();
    let deadline = start + timeout;
    let mut nap = Duration::from_millis(2);
    let (status, timed_out, interrupted) = loop {
        if let Some(status) = child.try_wait()? {
            break (status, false, false);
        }
        if cancel.is_cancelled() {
            break (stop(&mut child)?, false, true);
        }
        let now = Instant::now();
        if now >= deadline {
            break (stop(&mut child)?, true, false);
        }
        std::thread::sleep(nap.min(deadline - now));
        nap = (nap * 2).min(Duration::from_millis(25));
    };
    finish_group(pgid, &drained);
    let (exit_code, signal) = exit_parts(status);
    let output = lock(&capture).text();
    Ok(RunOutput {
        exit_code: if timed_out || interrupted {
            None
        } else {
            exit_code
        },
        signal,
        timed_out,
        interrupted,
        output,
        elapsed: start.elapsed(),
    })
}
