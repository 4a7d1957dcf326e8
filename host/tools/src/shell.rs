//! `shell` and the managed-process tools (`process_status`,
//! `process_output`, `process_kill`).
//!
//! A command on the hard-deny list is refused and recorded as a denial.
//! Anything not on the read-only allowlist may write, so a `mutation` event
//! (source `shell`, with the command) is recorded even if the command then
//! fails; in a git work tree it advances the generation only when the
//! workspace fingerprint moved ([`run_possible_mutation`]). Background
//! commands always commit an advancing one before they start. A command
//! that leaves the workspace in a git repository Latch's own git does not
//! use (a `git init`, a planted `.git`) gets a note saying so: the
//! repository is used only once the user adopts it (`latch git --adopt`).

use crate::args::Args;
use crate::error::ToolError;
use crate::policy::{hard_deny, is_read_only};
use crate::process::{ProcessInfo, StartError};
use crate::run::{human_duration, run_foreground};
use crate::{Reply, ToolContext};
use latch_kernel::{RepositoryDrift, commit_mutation, run_possible_mutation};
use std::sync::Arc;
use std::time::Duration;

/// How long `process_kill` waits for the exit to be committed.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Refuse `command` when it matches the hard-deny list.
pub(crate) fn check_denied(command: &str) -> Result<(), ToolError> {
    match hard_deny(command) {
        Some(rule) => Err(ToolError::Denied {
            reason: format!(
                "the command matches the hard-deny rule `{}` ({}); Latch never runs it",
                rule.rule, rule.description
            ),
        }),
        None => Ok(()),
    }
}

/// `shell {command, timeout_ms?, background?}`.
pub(crate) fn shell(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let command = args.str("command");
    if command.trim().is_empty() {
        return Err(args.invalid("`command` must not be empty"));
    }
    check_denied(command)?;
    if args.flag("background") {
        return background(ctx, command);
    }
    let timeout = ctx.timeout(args)?;
    let execute = || {
        run_foreground(
            ctx.workspace(),
            command,
            timeout,
            ctx.sandbox(),
            ctx.cancel(),
        )
    };
    let mut appeared = None;
    let run = if is_read_only(command) {
        execute()
    } else {
        let drift_before = repository_drift(ctx);
        let run = run_possible_mutation(
            ctx.store(),
            ctx.session(),
            "shell",
            Some(command.to_string()),
            ctx.workspace(),
            execute,
        )?
        .0;
        appeared = repository_drift(ctx).filter(|d| Some(d) != drift_before.as_ref());
        run
    };
    let run = run.map_err(|e| ToolError::io(format!("sh -c {command:?}"), e))?;
    if let Some(answer) = run.interrupted_answer() {
        return Ok(Reply::error(answer));
    }
    let mut out = run.output.clone();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    if out.is_empty() {
        out.push_str("(no output)\n");
    }
    out.push_str(&format!(
        "[{} after {}]",
        run.status_line(timeout),
        human_duration(run.elapsed)
    ));
    if let Some(drift) = appeared {
        out.push_str(&format!("\n{}", repository_note(ctx.session(), &drift)));
    }
    Ok(Reply {
        content: out,
        is_error: !run.success(),
        completion: None,
    })
}

/// The repository that holds the workspace now, when Latch's own git does
/// not use it for the session (see [`latch_kernel::git`]).
fn repository_drift(ctx: &ToolContext) -> Option<RepositoryDrift> {
    ctx.store().repository_drift(ctx.session()).ok().flatten()
}

/// What the model and the user read after a command that left the
/// workspace in a repository Latch's own git does not use (a `git init`,
/// a planted `.git`): it stays unused until the user adopts it.
fn repository_note(session: &str, drift: &RepositoryDrift) -> String {
    let name = |r: &Option<latch_kernel::git::Repository>| match r {
        Some(r) => format!("the git repository {}", r.git_dir.display()),
        None => "no git repository".to_string(),
    };
    format!(
        "[note: the workspace is now in {}; Latch's own git keeps to {}, the one this session \
         started in, so commands are {}checkpointed as before. A repository a command creates \
         or plants is never used on its own: only the user can adopt it, with `latch git \
         {session} --adopt`]",
        name(&drift.found),
        name(&drift.used),
        if drift.used.is_none() { "not " } else { "" }
    )
}

fn background(ctx: &ToolContext, command: &str) -> Result<Reply, ToolError> {
    let receipt = commit_mutation(
        ctx.store(),
        ctx.session(),
        "shell",
        Vec::new(),
        Some(command.to_string()),
    )?;
    // The mutation's sequence number is unique in the store, so the id is too.
    let id = format!("p{}", receipt.seq);
    let info = ctx
        .processes()
        .start(
            Arc::clone(ctx.store()),
            ctx.session(),
            ctx.workspace(),
            &id,
            command,
            ctx.sandbox(),
        )
        .map_err(|e| match e {
            StartError::Store(s) => ToolError::Store(s),
            other => ToolError::Failed(other.to_string()),
        })?;
    Ok(Reply::ok(format!(
        "started managed process {} (pid {}): {command}\nIts exit is recorded when it \
         happens; use process_status / process_output to observe it and process_kill to \
         stop it. Completion is blocked while it runs.",
        info.id, info.pid
    )))
}

fn describe(p: &ProcessInfo) -> String {
    let state = match &p.exit {
        None => format!("running for {}", human_duration(p.runtime)),
        Some(e) => {
            let how = match (e.exit_code, e.signal) {
                (Some(c), _) => format!("exited with code {c}"),
                (None, Some(s)) => format!("ended by signal {s}"),
                (None, None) => "ended".to_string(),
            };
            let killed = if e.killed { " (killed on request)" } else { "" };
            format!("{how}{killed} after {}", human_duration(e.runtime))
        }
    };
    format!(
        "{} [{state}, {} bytes of output]: {}",
        p.id, p.output_bytes, p.command
    )
}

fn unknown(ctx: &ToolContext, id: &str) -> ToolError {
    let known: Vec<String> = ctx
        .processes()
        .list(ctx.session())
        .into_iter()
        .map(|p| p.id)
        .collect();
    let recorded = ctx
        .store()
        .with_kernel(ctx.session(), |k| k.running_processes())
        .unwrap_or_default()
        .into_iter()
        .any(|(pid, _)| pid == id);
    if recorded {
        ToolError::Failed(format!(
            "process `{id}` is recorded as running but is not managed by this Latch process \
             (it was started by an earlier run)"
        ))
    } else if ended_earlier(ctx, id) {
        ToolError::Failed(format!(
            "process `{id}` was started by an earlier Latch process and ended with it; \
             its output is no longer available"
        ))
    } else if known.is_empty() {
        ToolError::Failed(format!(
            "no managed process `{id}`; this session has started none"
        ))
    } else {
        ToolError::Failed(format!(
            "no managed process `{id}`; known ids: {}",
            known.join(", ")
        ))
    }
}

/// True when `id` is a process of this session that an earlier Latch
/// process started and whose end is recorded (on resume, or by its reaper).
fn ended_earlier(ctx: &ToolContext, id: &str) -> bool {
    ctx.store()
        .with_kernel(ctx.session(), |k| k.process_ended(id))
        .unwrap_or(false)
}

/// The answer about a process this Latch process does not manage: one an
/// earlier Latch process started. Still running in the log means its Latch
/// died without a resume: its exit is recorded now (its process group died
/// with that Latch).
fn earlier_process(ctx: &ToolContext, id: &str) -> Result<Option<String>, ToolError> {
    let running = ctx
        .store()
        .with_kernel(ctx.session(), |k| k.running_processes())?
        .into_iter()
        .any(|(pid, _)| pid == id);
    if running {
        ctx.processes().reconcile(ctx.store(), ctx.session())?;
    }
    Ok(ended_earlier(ctx, id).then(|| {
        format!(
            "already ended: {id} was started by an earlier Latch process and ended with it \
             (its exit is recorded; nothing is left to stop)"
        )
    }))
}

/// `process_status {id?}`.
pub(crate) fn process_status(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    match args.opt_str("id").map(str::trim).filter(|s| !s.is_empty()) {
        Some(id) => {
            let info = ctx
                .processes()
                .info(ctx.session(), id)
                .ok_or_else(|| unknown(ctx, id))?;
            Ok(Reply::ok(describe(&info)))
        }
        None => {
            let all = ctx.processes().list(ctx.session());
            if all.is_empty() {
                return Ok(Reply::ok("[no managed processes in this session]"));
            }
            Ok(Reply::ok(
                all.iter().map(describe).collect::<Vec<_>>().join("\n"),
            ))
        }
    }
}

/// `process_output {id}`.
pub(crate) fn process_output(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let id = args.str("id").trim();
    let info = ctx
        .processes()
        .info(ctx.session(), id)
        .ok_or_else(|| unknown(ctx, id))?;
    let output = ctx
        .processes()
        .output(ctx.session(), id)
        .unwrap_or_default();
    let body = if output.is_empty() {
        "(no output yet)".to_string()
    } else {
        output
    };
    Ok(Reply::ok(format!("{}\n{body}", describe(&info))))
}

/// `process_kill {id}`.
pub(crate) fn process_kill(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let id = args.str("id").trim();
    if ctx.processes().info(ctx.session(), id).is_none()
        && let Some(answer) = earlier_process(ctx, id)?
    {
        return Ok(Reply::ok(answer));
    }
    let before = ctx
        .processes()
        .info(ctx.session(), id)
        .ok_or_else(|| unknown(ctx, id))?;
    if before.exit.is_some() {
        return Ok(Reply::ok(format!("already ended: {}", describe(&before))));
    }
    let after = ctx
        .processes()
        .kill(ctx.session(), id, KILL_WAIT)
        .ok_or_else(|| unknown(ctx, id))?;
    if after.exit.is_none() {
        return Err(ToolError::Failed(format!(
            "sent SIGKILL to process `{id}`, but its exit was not recorded within {}",
            human_duration(KILL_WAIT)
        )));
    }
    Ok(Reply::ok(format!("stopped: {}", describe(&after))))
}
