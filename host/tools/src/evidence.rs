//! `validate` and `complete`.
//!
//! `validate` runs the proving command in the foreground and records one
//! validation set (an observation per exact requirement, all linked to the
//! command and the generation it checked) with the kernel's
//! [`record_validation`]. A command that may write (anything off the
//! read-only allowlist, as for `shell`) records its possible mutation with
//! [`run_possible_mutation`], so the evidence is recorded at the generation
//! that includes the command's own effects, never at one the command moved
//! past; in a git work tree the generation advances only when the command
//! really changed the workspace, so `cargo test` then `cargo clippy` can
//! prove two requirements that both stay fresh. Any later write stales them. `complete` asks the kernel to certify with
//! [`attempt_certification`].

use crate::args::Args;
use crate::error::ToolError;
use crate::policy::is_read_only;
use crate::run::{human_duration, run_foreground};
use crate::shell::check_denied;
use crate::{Reply, ToolContext};
use latch_kernel::{attempt_certification, record_validation, run_possible_mutation};

/// `validate {command, requirement?, requirements?, timeout_ms?}`.
pub(crate) fn validate(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let command = args.str("command");
    if command.trim().is_empty() {
        return Err(args.invalid("`command` must not be empty"));
    }
    let mut requirements: Vec<String> = Vec::new();
    let given = args
        .opt_str("requirement")
        .map(str::to_string)
        .into_iter()
        .chain(args.list("requirements"));
    for r in given {
        let r = r.trim().to_string();
        if !r.is_empty() && !requirements.contains(&r) {
            requirements.push(r);
        }
    }
    if requirements.is_empty() {
        return Err(
            args.invalid("name at least one requirement with `requirement` or `requirements`")
        );
    }
    check_denied(command)?;
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
    let (run, generation) = if is_read_only(command) {
        (execute(), ctx.store().generation_of(ctx.session())?)
    } else {
        let (run, receipt) = run_possible_mutation(
            ctx.store(),
            ctx.session(),
            "validate",
            Some(command.to_string()),
            ctx.workspace(),
            execute,
        )?;
        (run, receipt.generation)
    };
    let run = run.map_err(|e| ToolError::io(format!("sh -c {command:?}"), e))?;
    // Stopped by the user: no verdict, so no evidence either way.
    if let Some(answer) = run.interrupted_answer() {
        return Ok(Reply::error(answer));
    }
    let exit_code = if run.timed_out { None } else { run.exit_code };
    let mut output = run.output.clone();
    if run.timed_out {
        output.push_str(&format!(
            "\n[timed out after {} and was killed]",
            human_duration(timeout)
        ));
    }
    record_validation(
        ctx.store(),
        ctx.session(),
        requirements.clone(),
        command,
        exit_code,
        &output,
        generation,
    )?;
    let verdict = if run.success() { "PASSED" } else { "FAILED" };
    let mut out = format!(
        "validation {verdict} at workspace generation {generation}: {}\ncommand: {command} ({} after {})\n",
        requirements.join("; "),
        run.status_line(timeout),
        human_duration(run.elapsed),
    );
    out.push_str(if run.output.is_empty() {
        "(no output)"
    } else {
        &run.output
    });
    // A failed validation is evidence, not a failed tool call.
    Ok(Reply::ok(out))
}

/// `complete {summary}`.
pub(crate) fn complete(ctx: &ToolContext, args: &Args) -> Result<Reply, ToolError> {
    let summary = args.text("summary")?;
    let cert = attempt_certification(ctx.store(), ctx.session())?;
    let reply = if cert.is_certified() {
        Reply {
            content: format!(
                "certified at workspace generation {}: {summary}",
                cert.generation
            ),
            is_error: false,
            completion: None,
        }
    } else {
        let blockers: Vec<String> = cert.blockers.iter().map(|b| format!("- {b}")).collect();
        Reply {
            content: format!(
                "completion refused at workspace generation {}:\n{}\nWait for or stop running \
                 managed processes, run validate for every stale, failed or missing \
                 requirement, then call complete again.",
                cert.generation,
                blockers.join("\n")
            ),
            is_error: true,
            completion: None,
        }
    };
    Ok(Reply {
        completion: Some(cert),
        ..reply
    })
}
