//! The task-state tools: each emits one `state_update` event carrying a typed
//! [`StateOp`]; the kernel's reducer turns them into canonical task state.

use crate::args::Args;
use crate::error::ToolError;
use crate::{Reply, ToolContext};
use latch_kernel::{EventKind, StateOp};

/// The [`StateOp`] a task-state tool call asks for.
fn op_of(name: &str, args: &Args) -> Result<StateOp, ToolError> {
    let text = || args.text("text");
    let optional = |key: &str| {
        args.opt_str(key)
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    Ok(match name {
        "set_goal" => StateOp::SetGoal { text: text()? },
        "add_constraint" => StateOp::AddConstraint { text: text()? },
        "record_decision" => StateOp::RecordDecision { text: text()? },
        "revise_decision" => StateOp::ReviseDecision {
            previous: args.text("previous")?,
            text: text()?,
        },
        "add_hypothesis" => StateOp::AddHypothesis { text: text()? },
        "reject_hypothesis" => StateOp::RejectHypothesis {
            text: text()?,
            reason: args.text("reason")?,
        },
        "add_question" => StateOp::AddQuestion { text: text()? },
        "resolve_question" => StateOp::ResolveQuestion {
            text: text()?,
            answer: optional("answer"),
        },
        "add_action" => StateOp::AddAction { text: text()? },
        "complete_action" => StateOp::CompleteAction { text: text()? },
        "add_criterion" => StateOp::AddCriterion { text: text()? },
        "add_note" => StateOp::AddNote { text: text()? },
        "require_validation" => StateOp::RequireValidation {
            requirement: args.text("requirement")?,
        },
        "record_disproof" => StateOp::RecordDisproof {
            summary: args.text("summary")?,
            reason: args.text("reason")?,
            lineage: optional("lineage"),
        },
        other => {
            return Err(ToolError::Failed(format!(
                "`{other}` has a schema but no executor"
            )));
        }
    })
}

/// Any task-state tool.
pub(crate) fn state_tool(ctx: &ToolContext, name: &str, args: &Args) -> Result<Reply, ToolError> {
    let op = op_of(name, args)?;
    let summary = op.summary();
    ctx.append(EventKind::StateUpdate(op))?;
    Ok(Reply::ok(format!("recorded {summary}")))
}
