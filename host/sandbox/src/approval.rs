//! The approval policy: given the approval mode, the sandbox mode and what
//! the agent is about to do, whether it runs, asks the user, or is denied.
//! Pure data in, a [`Verdict`] out; the host records the lifecycle events
//! and asks the user.

use crate::mode::{ApprovalMode, SandboxMode};

/// What a tool call is about to do, as the approval policy sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A command on the read-only allowlist.
    ReadOnlyCommand,
    /// Any other command, run inside the sandbox.
    Command,
    /// The model asks to run a command outside the sandbox (with a reason).
    Escalation,
    /// A file edit through the file tools.
    Edit,
    /// Anything else (reads, searches, task state): never asks.
    Other,
}

/// The policy's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Run it (inside the sandbox, unless it is a granted escalation).
    Allow,
    /// Ask the user; the reason says why the user is asked.
    Ask {
        /// Why approval is needed, e.g. "approval mode untrusted asks before
        /// every command off the read-only allowlist".
        reason: String,
    },
    /// Refuse without asking; the reason tells the model what to do instead.
    Deny {
        /// Why, and what would be allowed.
        reason: String,
    },
}

/// Decide `action` under `approval` with commands sandboxed by `sandbox`.
///
/// Under `full-access` an escalation is an ordinary command (there is
/// nothing to leave). Under `read-only` an edit leaves the sandbox, so it
/// is treated as an escalation.
pub fn decide(approval: ApprovalMode, sandbox: SandboxMode, action: Action) -> Verdict {
    let action = match (action, sandbox) {
        (Action::Escalation, SandboxMode::FullAccess) => Action::Command,
        (Action::Edit, SandboxMode::ReadOnly) => Action::Escalation,
        (a, _) => a,
    };
    let ask = |reason: String| Verdict::Ask { reason };
    match (approval, action) {
        (_, Action::Other | Action::ReadOnlyCommand) => Verdict::Allow,
        (ApprovalMode::Never, Action::Escalation) => Verdict::Deny {
            reason: format!(
                "approval mode `never` runs nothing outside the `{sandbox}` sandbox{}; \
                 do the work inside it instead",
                if sandbox == SandboxMode::ReadOnly {
                    " (and `read-only` allows no edits)"
                } else {
                    ""
                }
            ),
        },
        (_, Action::Escalation) => ask(if sandbox == SandboxMode::ReadOnly {
            format!(
                "the `read-only` sandbox allows no writes; approval mode `{approval}` asks the user for each one"
            )
        } else {
            format!("the model asks to run outside the `{sandbox}` sandbox")
        }),
        (ApprovalMode::Never | ApprovalMode::OnRequest, Action::Command | Action::Edit) => {
            Verdict::Allow
        }
        (ApprovalMode::Edits, Action::Edit) => Verdict::Allow,
        (ApprovalMode::Untrusted, Action::Edit) => {
            ask("approval mode `untrusted` asks before every edit".into())
        }
        (ApprovalMode::Untrusted | ApprovalMode::Edits, Action::Command) => ask(format!(
            "approval mode `{approval}` asks before every command off the read-only allowlist"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Action::*;
    use ApprovalMode::*;

    fn short(v: Verdict) -> &'static str {
        match v {
            Verdict::Allow => "allow",
            Verdict::Ask { .. } => "ask",
            Verdict::Deny { .. } => "deny",
        }
    }

    #[test]
    fn the_policy_table() {
        use SandboxMode::*;
        // (approval, sandbox, action, verdict)
        let table = [
            (Never, WorkspaceWrite, ReadOnlyCommand, "allow"),
            (Never, WorkspaceWrite, Command, "allow"),
            (Never, WorkspaceWrite, Edit, "allow"),
            (Never, WorkspaceWrite, Escalation, "deny"),
            (Never, ReadOnly, Edit, "deny"),
            (Never, FullAccess, Escalation, "allow"),
            (OnRequest, WorkspaceWrite, Command, "allow"),
            (OnRequest, WorkspaceWrite, Edit, "allow"),
            (OnRequest, WorkspaceWrite, Escalation, "ask"),
            (OnRequest, ReadOnly, Edit, "ask"),
            (OnRequest, FullAccess, Escalation, "allow"),
            (Untrusted, WorkspaceWrite, ReadOnlyCommand, "allow"),
            (Untrusted, WorkspaceWrite, Command, "ask"),
            (Untrusted, WorkspaceWrite, Edit, "ask"),
            (Untrusted, WorkspaceWrite, Escalation, "ask"),
            (Untrusted, FullAccess, Command, "ask"),
            (Untrusted, WorkspaceWrite, Other, "allow"),
            (Edits, WorkspaceWrite, Edit, "allow"),
            (Edits, WorkspaceWrite, Command, "ask"),
            (Edits, WorkspaceWrite, ReadOnlyCommand, "allow"),
            (Edits, ReadOnly, Edit, "ask"),
            (Edits, WorkspaceWrite, Escalation, "ask"),
        ];
        for (approval, sandbox, action, want) in table {
            assert_eq!(
                short(decide(approval, sandbox, action)),
                want,
                "{approval} / {sandbox} / {action:?}"
            );
        }
    }

    #[test]
    fn reasons_name_the_mode_and_the_way_out() {
        let Verdict::Deny { reason } = decide(Never, SandboxMode::WorkspaceWrite, Escalation)
        else {
            panic!("never denies escalations")
        };
        assert!(
            reason.contains("never") && reason.contains("inside it"),
            "{reason}"
        );
        let Verdict::Ask { reason } = decide(Untrusted, SandboxMode::WorkspaceWrite, Command)
        else {
            panic!("untrusted asks")
        };
        assert!(reason.contains("untrusted"), "{reason}");
    }
}
