//! What a tool call is about to do, for the approval policy and for the
//! person asked: the command, or the edit's path and unified diff. Nothing
//! runs and nothing is written here; a call whose arguments are bad, or
//! whose command is on the hard-deny list, is [`Action::Other`], so the
//! tool itself refuses it with its own error.

use crate::ToolContext;
use crate::args::Args;
use crate::paths::Access;
use crate::policy::{hard_deny, is_read_only};
use crate::spec::spec_of;
use latch_engine_sdk::types::ToolCall;
use latch_kernel::beneath;
use latch_sandbox::Action;
use std::path::Path;

/// Bytes of a diff kept in a preview (the rest is cut with a marker).
pub const MAX_DIFF_BYTES: usize = 16 * 1024;

/// A tool call, described for approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Preview {
    /// How the approval policy classifies it.
    pub action: Action,
    /// The command line (`shell`, `validate`).
    pub command: Option<String>,
    /// The workspace-relative path an edit writes.
    pub path: Option<String>,
    /// The edit as a unified diff (bounded by [`MAX_DIFF_BYTES`]).
    pub diff: Option<String>,
    /// The model's reason for running outside the sandbox.
    pub reason: Option<String>,
}

impl Preview {
    fn other() -> Preview {
        Preview {
            action: Action::Other,
            command: None,
            path: None,
            diff: None,
            reason: None,
        }
    }
}

/// Describe `call` for approval.
pub fn preview(ctx: &ToolContext, call: &ToolCall) -> Preview {
    let Some(spec) = spec_of(&call.name) else {
        return Preview::other();
    };
    let Ok(args) = Args::parse(spec, &call.arguments_json) else {
        return Preview::other();
    };
    match spec.name.as_str() {
        "shell" | "validate" => {
            let command = args.str("command").to_string();
            if command.trim().is_empty() || hard_deny(&command).is_some() {
                return Preview::other();
            }
            let escalate = spec.name == "shell" && args.flag("escalate");
            let action = if escalate {
                Action::Escalation
            } else if is_read_only(&command) && !args.flag("background") {
                Action::ReadOnlyCommand
            } else {
                Action::Command
            };
            Preview {
                action,
                reason: escalate
                    .then(|| args.opt_str("reason").unwrap_or("").trim().to_string())
                    .filter(|r| !r.is_empty()),
                command: Some(command),
                ..Preview::other()
            }
        }
        "write_file" | "edit_file" => {
            let Ok(r) = ctx.resolve(args.str("path"), Access::Write) else {
                return Preview::other();
            };
            // Read beneath the workspace, never through a link (one swapped
            // in since the check would show a file outside in the diff).
            let before = ctx
                .workspace_dir()
                .ok()
                .and_then(|root| beneath::read(&root, Path::new(&r.rel)).ok().flatten())
                .map(|b| String::from_utf8_lossy(&b).into_owned());
            let after = if spec.name == "write_file" {
                Some(args.str("content").to_string())
            } else {
                before.as_deref().and_then(|text| {
                    let old = args.str("old_string");
                    (!old.is_empty() && text.contains(old)).then(|| {
                        if args.flag("replace_all") {
                            text.replace(old, args.str("new_string"))
                        } else {
                            text.replacen(old, args.str("new_string"), 1)
                        }
                    })
                })
            };
            let diff = after.map(|after| unified_diff(&r.rel, before.as_deref(), &after));
            Preview {
                action: Action::Edit,
                path: Some(r.rel),
                diff,
                ..Preview::other()
            }
        }
        _ => Preview::other(),
    }
}

/// The unified diff of `path` from `before` (none: a new file) to `after`,
/// cut at [`MAX_DIFF_BYTES`].
pub fn unified_diff(path: &str, before: Option<&str>, after: &str) -> String {
    let old_name = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_string()
    };
    let mut diff = similar::TextDiff::from_lines(before.unwrap_or(""), after)
        .unified_diff()
        .context_radius(3)
        .header(&old_name, &format!("b/{path}"))
        .to_string();
    if diff.len() > MAX_DIFF_BYTES {
        let mut cut = MAX_DIFF_BYTES;
        while !diff.is_char_boundary(cut) {
            cut -= 1;
        }
        let dropped = diff.len() - cut;
        diff.truncate(cut);
        diff.push_str(&format!("\n[... {dropped} more bytes of diff ...]\n"));
    }
    diff
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn diffs_are_unified_with_headers() {
        let d = unified_diff("src/a.rs", Some("one\ntwo\n"), "one\n2\n");
        assert!(d.starts_with("--- a/src/a.rs\n+++ b/src/a.rs\n"), "{d}");
        assert!(d.contains("-two\n+2\n"), "{d}");
        let d = unified_diff("new.txt", None, "hello\n");
        assert!(
            d.starts_with("--- /dev/null\n+++ b/new.txt\n") && d.contains("+hello"),
            "{d}"
        );
        let big = "x\n".repeat(MAX_DIFF_BYTES);
        let d = unified_diff("big", None, &big);
        assert!(d.len() < MAX_DIFF_BYTES + 100 && d.contains("more bytes of diff"));
    }
}
