//! Latch's agent tools.
//!
//! Each tool has a JSON schema ([`schemas`], in a fixed, byte-stable order:
//! the schemas are part of the cached prompt prefix) and an executor
//! ([`execute`]). Tools append their own kernel events to the store — a
//! possible mutation **before** it executes, file observations, validation
//! evidence, denials, managed-process starts and exits — and return the
//! bounded [`ToolResult`]; the agent loop commits that result itself.
//!
//! * `files` — `read_file`, `write_file`, `edit_file` (guarded, confined,
//!   never through a link).
//! * `artifacts` — `read_artifact`: a stored tool output (or other artifact
//!   of the session's tree), page by page like `read_file`.
//! * `search` — `list_files`, `grep` (respecting `.gitignore`).
//! * `shell` — `shell` and the managed-process tools.
//! * `evidence` — `validate` and `complete`.
//! * `task` — the task-state tools.
//! * [`skills`] — Agent Skills: discovery, the capped list, `load_skill`.
//! * [`policy`] — the hard-deny list and the read-only allowlist.
//! * [`process`] — the [`ProcessTable`] of managed background processes.
//! * [`preview`] — what a call is about to do (a command, an edit and its
//!   unified diff), for the approval policy.
//!
//! Every process the tools spawn (`shell`, `validate`, managed processes)
//! runs in the context's [`Sandbox`] (none unless one is set with
//! [`ToolContext::with_sandbox`]).

mod args;
mod artifacts;
mod error;
mod evidence;
mod files;
pub mod hook;
mod page;
mod paths;
pub mod policy;
pub mod preview;
pub mod process;
mod run;
mod search;
mod shell;
pub mod skills;
mod spec;
mod task;

pub use error::ToolError;
pub use hook::{HookRun, run_hook};
pub use latch_sandbox::Sandbox;
pub use policy::{DenyRule, hard_deny, is_read_only};
pub use preview::{Preview, preview};
pub use process::{ProcessExit, ProcessInfo, ProcessTable, StartError};
pub use run::Cancel;
pub use spec::{ToolSpec, schemas, spec_of};

use args::Args;
use latch_engine_sdk::types::{EstimatorProfile, ToolCall, ToolResult};
use latch_kernel::{Certification, EventKind, Store};
use paths::{Access, Resolved};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Default foreground timeout of `shell` and `validate`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest foreground timeout a call may ask for.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(60 * 60);

/// Everything a tool call runs against: the store, the session, its
/// workspace, the session's estimator profile and the managed processes.
#[derive(Clone, Debug)]
pub struct ToolContext {
    store: Arc<Store>,
    session: String,
    workspace: PathBuf,
    profile: EstimatorProfile,
    processes: ProcessTable,
    default_timeout: Duration,
    sandbox: Arc<Sandbox>,
    cancel: Cancel,
}

impl ToolContext {
    /// A context for `session` working in `workspace` (which must exist), with
    /// the session's estimator profile and a fresh [`ProcessTable`].
    pub fn new(
        store: Arc<Store>,
        session: impl Into<String>,
        workspace: impl AsRef<Path>,
    ) -> Result<ToolContext, ToolError> {
        let session = session.into();
        let profile = store.session(&session)?.model.estimator;
        let workspace = workspace.as_ref();
        let canonical =
            std::fs::canonicalize(workspace).map_err(|e| ToolError::io(workspace, e))?;
        if !canonical.is_dir() {
            return Err(ToolError::Failed(format!(
                "the workspace {} is not a directory",
                workspace.display()
            )));
        }
        Ok(ToolContext {
            store,
            session,
            workspace: canonical,
            profile,
            processes: ProcessTable::new(),
            default_timeout: DEFAULT_TIMEOUT,
            sandbox: Arc::new(Sandbox::full_access()),
            cancel: Cancel::new(),
        })
    }

    /// A context for `session` in the workspace recorded with the session.
    pub fn for_session(store: Arc<Store>, session: &str) -> Result<ToolContext, ToolError> {
        let workspace = PathBuf::from(store.session(session)?.workspace);
        ToolContext::new(store, session, workspace)
    }

    /// Use `table` for managed processes (share one table between the
    /// contexts of one Latch process).
    pub fn with_processes(mut self, table: ProcessTable) -> ToolContext {
        self.processes = table;
        self
    }

    /// Run every command in `sandbox` (the default is `full-access`: no
    /// sandbox).
    pub fn with_sandbox(mut self, sandbox: Arc<Sandbox>) -> ToolContext {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox commands run in.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Stop foreground commands when `cancel` is set (see [`Cancel`]).
    pub fn with_cancel(mut self, cancel: Cancel) -> ToolContext {
        self.cancel = cancel;
        self
    }

    /// The signal that stops foreground commands.
    pub fn cancel(&self) -> &Cancel {
        &self.cancel
    }

    /// Use `timeout` when a `shell` or `validate` call gives none.
    pub fn with_default_timeout(mut self, timeout: Duration) -> ToolContext {
        self.default_timeout = timeout;
        self
    }

    /// The store.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The session id.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The canonical workspace root.
    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// The session's estimator profile (for output bounds).
    pub fn profile(&self) -> EstimatorProfile {
        self.profile
    }

    /// The managed processes.
    pub fn processes(&self) -> &ProcessTable {
        &self.processes
    }

    /// The default foreground timeout.
    pub fn default_timeout(&self) -> Duration {
        self.default_timeout
    }

    pub(crate) fn resolve(&self, raw: &str, access: Access) -> Result<Resolved, ToolError> {
        let r = paths::resolve(&self.workspace, self.store.path(), raw, access)?;
        // The session's repository directories, wherever a `.git` file put
        // them, are git's like any `.git`.
        if access == Access::Write
            && let Some(repo) = self.store.session_repository(&self.session)?
            && (r.abs.starts_with(&repo.git_dir) || r.abs.starts_with(&repo.common_dir))
        {
            return Err(ToolError::Denied {
                reason: format!(
                    "`{raw}` is inside the repository directory {}, which belongs to git: the \
                     file tools never change a repository's config, hooks or objects",
                    repo.git_dir.display()
                ),
            });
        }
        Ok(r)
    }

    /// The workspace, opened for I/O beneath it (see
    /// [`latch_kernel::beneath`]).
    pub(crate) fn workspace_dir(&self) -> Result<std::os::fd::OwnedFd, ToolError> {
        latch_kernel::beneath::open_dir(&self.workspace).map_err(|e| {
            ToolError::Failed(format!("the workspace {} {e}", self.workspace.display()))
        })
    }

    pub(crate) fn append(&self, event: EventKind) -> Result<u64, ToolError> {
        Ok(self.store.append(&self.session, event)?)
    }

    /// The timeout a call asks for, within bounds.
    pub(crate) fn timeout(&self, args: &Args) -> Result<Duration, ToolError> {
        match args.opt_u64("timeout_ms") {
            None => Ok(self.default_timeout),
            Some(0) => Err(args.invalid("`timeout_ms` must be at least 1")),
            Some(ms) => Ok(Duration::from_millis(ms).min(MAX_TIMEOUT)),
        }
    }
}

/// What one tool call produced.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolOutcome {
    /// The bounded result for the model. The agent loop commits it as the
    /// call's `tool_result` event; the tool has not.
    pub result: ToolResult,
    /// For `complete`: the kernel's certification decision (certified or
    /// refused, with blockers). The loop may end the turn when certified.
    pub completion: Option<Certification>,
}

/// A tool's answer before it is bounded.
#[derive(Debug)]
pub(crate) struct Reply {
    pub(crate) content: String,
    pub(crate) is_error: bool,
    pub(crate) completion: Option<Certification>,
}

impl Reply {
    pub(crate) fn ok(content: impl Into<String>) -> Reply {
        Reply {
            content: content.into(),
            is_error: false,
            completion: None,
        }
    }

    pub(crate) fn error(content: impl Into<String>) -> Reply {
        Reply {
            content: content.into(),
            is_error: true,
            completion: None,
        }
    }
}

/// Execute one tool call. Never panics: unknown tools, malformed arguments,
/// denials and failures all come back as an `is_error` result that says what
/// was wrong. Denials are also recorded as `tool_denied` events.
pub fn execute(ctx: &ToolContext, call: &ToolCall) -> ToolOutcome {
    let outcome = catch_unwind(AssertUnwindSafe(|| dispatch(ctx, call)));
    let reply = match outcome {
        Ok(Ok(reply)) => reply,
        Ok(Err(ToolError::Denied { reason })) => {
            let recorded = ctx.append(EventKind::ToolDenied {
                tool: call.name.clone(),
                call_id: Some(call.id.clone()),
                reason: reason.clone(),
            });
            match recorded {
                Ok(_) => Reply::error(format!("denied: {reason}")),
                Err(e) => Reply::error(format!(
                    "denied: {reason} (and the denial could not be recorded: {e})"
                )),
            }
        }
        Ok(Err(e)) => Reply::error(e.to_string()),
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            Reply::error(format!("internal error in `{}`: {what}", call.name))
        }
    };
    ToolOutcome {
        result: ToolResult {
            call_id: call.id.clone(),
            name: call.name.clone(),
            content: ctx
                .store
                .bound_and_store_output(&reply.content, ctx.profile),
            is_error: reply.is_error,
            images: Vec::new(),
        },
        completion: reply.completion,
    }
}

fn dispatch(ctx: &ToolContext, call: &ToolCall) -> Result<Reply, ToolError> {
    let Some(spec) = spec_of(&call.name) else {
        return Err(ToolError::UnknownTool {
            name: call.name.clone(),
            available: spec::specs()
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    };
    let args = Args::parse(spec, &call.arguments_json)?;
    match spec.name.as_str() {
        "read_file" => files::read_file(ctx, &args),
        "read_artifact" => artifacts::read_artifact(ctx, &args),
        "write_file" => files::write_file(ctx, &args),
        "edit_file" => files::edit_file(ctx, &args),
        "list_files" => search::list_files(ctx, &args),
        "grep" => search::grep(ctx, &args),
        "shell" => shell::shell(ctx, &args),
        "process_status" => shell::process_status(ctx, &args),
        "process_output" => shell::process_output(ctx, &args),
        "process_kill" => shell::process_kill(ctx, &args),
        "validate" => evidence::validate(ctx, &args),
        "complete" => evidence::complete(ctx, &args),
        name => task::state_tool(ctx, name, &args),
    }
}
