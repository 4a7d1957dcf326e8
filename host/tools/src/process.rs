//! Managed background processes.
//!
//! `shell` with `background: true` commits `process_started` **before** it
//! spawns the process, then hands the child to a reaper thread that waits for
//! it and commits `process_exited` the moment it exits, without anyone
//! polling. The [`ProcessTable`] is shared between threads (and between the
//! tool contexts of one Latch process); each process is its sandbox's
//! keeper, whose whole tree (a `setsid` or double-forked child included)
//! dies when the command exits or is stopped.

use crate::run::{Capture, finish_group, kill_group, lock, spawn};
use latch_kernel::{EventKind, Store};
use latch_sandbox::Sandbox;
use latch_sandbox::stop;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Bytes of output kept in a `process_exited` event.
pub const EXIT_TAIL_BYTES: usize = 2048;

/// The managed background processes of one Latch process. Cheap to clone;
/// clones share the table.
#[derive(Clone, Debug, Default)]
pub struct ProcessTable {
    inner: Arc<Mutex<BTreeMap<String, Arc<Managed>>>>,
}

/// How a managed process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessExit {
    /// The exit code, or none when a signal ended it.
    pub exit_code: Option<i32>,
    /// The signal, when one ended it.
    pub signal: Option<i32>,
    /// True when `process_kill` (or [`ProcessTable::kill_all`]) stopped it.
    pub killed: bool,
    /// Sequence number of its `process_exited` event, when the append
    /// succeeded.
    pub seq: Option<u64>,
    /// How long it ran.
    pub runtime: Duration,
}

/// A snapshot of one managed process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessInfo {
    /// Its id (as in `process_started`).
    pub id: String,
    /// The session that started it.
    pub session: String,
    /// The command line.
    pub command: String,
    /// The operating system's process id: the command's keeper (also its
    /// process group id).
    pub pid: u32,
    /// Bytes of output so far.
    pub output_bytes: u64,
    /// How long it has run (or ran).
    pub runtime: Duration,
    /// How it ended; none while it runs.
    pub exit: Option<ProcessExit>,
}

#[derive(Debug)]
pub(crate) struct Managed {
    id: String,
    session: String,
    command: String,
    pid: u32,
    started: Instant,
    capture: Arc<Mutex<Capture>>,
    kill_requested: AtomicBool,
    exit: Mutex<Option<ProcessExit>>,
    exited: Condvar,
}

impl Managed {
    fn info(&self) -> ProcessInfo {
        let exit = lock(&self.exit).clone();
        ProcessInfo {
            id: self.id.clone(),
            session: self.session.clone(),
            command: self.command.clone(),
            pid: self.pid,
            output_bytes: lock(&self.capture).total(),
            runtime: exit
                .as_ref()
                .map(|e| e.runtime)
                .unwrap_or_else(|| self.started.elapsed()),
            exit,
        }
    }

    /// After [`stop`]: wait up to `timeout` for the exit; a keeper that did
    /// not end its tree within half of it has its group killed outright.
    fn stopped(&self, timeout: Duration) -> Option<ProcessExit> {
        if let Some(exit) = self.wait_exit(timeout / 2) {
            return Some(exit);
        }
        if lock(&self.exit).is_none() {
            kill_group(self.pid);
        }
        self.wait_exit(timeout / 2)
    }

    /// Wait until the reaper recorded the exit, at most `timeout`.
    fn wait_exit(&self, timeout: Duration) -> Option<ProcessExit> {
        let guard = lock(&self.exit);
        let (guard, _) = self
            .exited
            .wait_timeout_while(guard, timeout, |e| e.is_none())
            .unwrap_or_else(|p| p.into_inner());
        guard.clone()
    }
}

/// Why a managed process could not be started.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store refused the `process_started` event; nothing was spawned.
    #[error(transparent)]
    Store(#[from] latch_kernel::StoreError),
    /// Spawning failed; a `process_exited` event records it.
    #[error("could not start `{command}`: {source}")]
    Spawn {
        /// The command.
        command: String,
        /// The error.
        source: std::io::Error,
    },
}

impl ProcessTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// Snapshots of every process of `session` (running and exited), by id.
    pub fn list(&self, session: &str) -> Vec<ProcessInfo> {
        let procs: Vec<Arc<Managed>> = lock(&self.inner).values().cloned().collect();
        procs
            .iter()
            .filter(|m| m.session == session)
            .map(|m| m.info())
            .collect()
    }

    /// A snapshot of process `id` of `session`.
    pub fn info(&self, session: &str, id: &str) -> Option<ProcessInfo> {
        self.get(session, id).map(|m| m.info())
    }

    pub(crate) fn get(&self, session: &str, id: &str) -> Option<Arc<Managed>> {
        lock(&self.inner)
            .get(id)
            .filter(|m| m.session == session)
            .cloned()
    }

    /// The bounded captured output of process `id` of `session`.
    pub fn output(&self, session: &str, id: &str) -> Option<String> {
        self.get(session, id).map(|m| lock(&m.capture).text())
    }

    /// Start `command` as managed process `id` of `session` in `dir`,
    /// confined by `sandbox` (every process it starts inherits it).
    ///
    /// Commits `process_started` first; a reaper thread commits
    /// `process_exited` when the process exits.
    pub fn start(
        &self,
        store: Arc<Store>,
        session: &str,
        dir: &Path,
        id: &str,
        command: &str,
        sandbox: &Sandbox,
    ) -> Result<ProcessInfo, StartError> {
        store.append(
            session,
            EventKind::ProcessStarted {
                id: id.to_string(),
                command: command.to_string(),
            },
        )?;
        let started = Instant::now();
        let spawned = match spawn(dir, command, sandbox) {
            Ok(s) => s,
            Err(source) => {
                store.append(
                    session,
                    EventKind::ProcessExited {
                        id: id.to_string(),
                        exit_code: None,
                        output_tail: format!("could not start: {source}"),
                    },
                )?;
                return Err(StartError::Spawn {
                    command: command.to_string(),
                    source,
                });
            }
        };
        let managed = Arc::new(Managed {
            id: id.to_string(),
            session: session.to_string(),
            command: command.to_string(),
            pid: spawned.child.id(),
            started,
            capture: Arc::clone(&spawned.capture),
            kill_requested: AtomicBool::new(false),
            exit: Mutex::new(None),
            exited: Condvar::new(),
        });
        lock(&self.inner).insert(id.to_string(), Arc::clone(&managed));
        let reaped = Arc::clone(&managed);
        let mut child = spawned.child;
        let drained = spawned.drained;
        let reaper = move || {
            let status = child.wait();
            finish_group(reaped.pid, &drained);
            let (exit_code, signal) = match &status {
                Ok(s) => {
                    use std::os::unix::process::ExitStatusExt;
                    (s.code(), s.signal())
                }
                Err(_) => (None, None),
            };
            let tail = lock(&reaped.capture).tail_text(EXIT_TAIL_BYTES);
            // Held across the commit, so that whoever sees the exit in the
            // store also sees it here.
            let mut exit = lock(&reaped.exit);
            let seq = store
                .append(
                    &reaped.session,
                    EventKind::ProcessExited {
                        id: reaped.id.clone(),
                        exit_code,
                        output_tail: tail,
                    },
                )
                .ok();
            *exit = Some(ProcessExit {
                exit_code,
                signal,
                killed: reaped.kill_requested.load(Ordering::SeqCst),
                seq,
                runtime: reaped.started.elapsed(),
            });
            reaped.exited.notify_all();
        };
        if let Err(source) = std::thread::Builder::new()
            .name(format!("latch-reaper-{id}"))
            .spawn(reaper)
        {
            // Without a reaper nobody would record the exit: stop it now.
            stop(managed.pid);
            return Err(StartError::Spawn {
                command: command.to_string(),
                source,
            });
        }
        Ok(managed.info())
    }

    /// Stop process `id` of `session` (its whole tree) and wait up to
    /// `wait` for its exit to be committed. `None` when there is no such
    /// process.
    pub fn kill(&self, session: &str, id: &str, wait: Duration) -> Option<ProcessInfo> {
        let m = self.get(session, id)?;
        {
            let exit = lock(&m.exit);
            if exit.is_none() {
                m.kill_requested.store(true, Ordering::SeqCst);
                stop(m.pid);
            }
        }
        m.stopped(wait);
        Some(m.info())
    }

    /// Commit `process_exited` (no exit code) for every process the kernel
    /// records as running in `session` that this table does not manage:
    /// processes started by an earlier Latch process, whose exit nobody can
    /// observe any more. Call it when resuming a session so they do not block
    /// completion forever. Returns the ids it closed.
    pub fn reconcile(
        &self,
        store: &Store,
        session: &str,
    ) -> Result<Vec<String>, latch_kernel::StoreError> {
        let running = store.with_kernel(session, |k| k.running_processes())?;
        let mut closed = Vec::new();
        for (id, _command) in running {
            if self.get(session, &id).is_some() {
                continue;
            }
            store.append(
                session,
                EventKind::ProcessExited {
                    id: id.clone(),
                    exit_code: None,
                    output_tail: "no longer managed: the Latch process that started it ended"
                        .to_string(),
                },
            )?;
            closed.push(id);
        }
        Ok(closed)
    }

    /// Stop every running process of every session and wait up to `wait`
    /// for each exit to be committed (for shutting down).
    pub fn kill_all(&self, wait: Duration) {
        let procs: Vec<Arc<Managed>> = lock(&self.inner).values().cloned().collect();
        for m in &procs {
            let exit = lock(&m.exit);
            if exit.is_none() {
                m.kill_requested.store(true, Ordering::SeqCst);
                stop(m.pid);
            }
        }
        for m in &procs {
            m.stopped(wait);
        }
    }
}
