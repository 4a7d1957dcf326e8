//! The plain REPL's approval prompt: a [`DecisionPort`] that shows the
//! request on the terminal — the command, or the edit's unified diff, and
//! why it is asked — and reads `y` (yes), `n` (no, optionally with a reason
//! after it) or `a` (always, for this session) from standard input. End of
//! input denies. On a terminal only keys typed after the prompt was shown
//! answer it: what was typed (or pushed) before is discarded.

use crate::agent::{Decision, DecisionPort};
use latch_kernel::{PermissionKind, PermissionRequest};
use std::io::Write;
use std::sync::Mutex;

/// Asks on the terminal (stdin/stdout of the interactive session).
#[derive(Default)]
pub struct TerminalApprover {
    lock: Mutex<()>,
}

/// The text shown for `request` (pure, so it is tested without a terminal).
pub fn prompt_text(request: &PermissionRequest) -> String {
    let safe = |s: &str| super::render::terminal_safe(s, 16 * super::render::MAX_PRINTED_CHARS);
    let mut out = String::new();
    match request.kind {
        PermissionKind::Command => out.push_str(&format!(
            "\n  ? {} wants to run: {}\n",
            request.tool,
            safe(request.command.as_deref().unwrap_or(""))
        )),
        PermissionKind::Escalation => out.push_str(&format!(
            "\n  ? {} wants to run OUTSIDE the `{}` sandbox: {}\n",
            request.tool,
            request.sandbox,
            safe(request.command.as_deref().unwrap_or(""))
        )),
        PermissionKind::Edit => {
            out.push_str(&format!(
                "\n  ? {} wants to change {}\n",
                request.tool,
                safe(request.path.as_deref().unwrap_or(""))
            ));
            if let Some(diff) = &request.diff {
                for line in diff.lines() {
                    out.push_str(&format!("    {}\n", safe(line)));
                }
            }
        }
        PermissionKind::McpTool => {
            let (server, tool, args) = match &request.mcp {
                Some(m) => (m.server.as_str(), m.tool.as_str(), m.arguments.as_str()),
                None => ("?", request.tool.as_str(), ""),
            };
            out.push_str(&format!(
                "\n  ? the model wants to call MCP server `{}`'s tool `{}` with: {}\n",
                safe(server),
                safe(tool),
                safe(args)
            ));
        }
    }
    if let Some(why) = &request.model_reason {
        out.push_str(&format!("    the model says: {}\n", safe(why)));
    }
    out.push_str(&format!("    asked because {}\n", request.reason));
    out.push_str("    allow? [y]es / [n]o (a reason may follow) / [a]lways this session: ");
    out
}

/// Parse an answer; `None` asks again.
pub fn parse_answer(line: &str) -> Option<Decision> {
    let line = line.trim();
    let (word, rest) = line.split_once(char::is_whitespace).unwrap_or((line, ""));
    match word.to_ascii_lowercase().as_str() {
        "y" | "yes" => Some(Decision::Once),
        "a" | "always" => Some(Decision::Session),
        "n" | "no" => Some(Decision::Deny(
            Some(rest.trim().to_string()).filter(|r| !r.is_empty()),
        )),
        _ => None,
    }
}

impl DecisionPort for TerminalApprover {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        let _one_at_a_time = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            print!("{}", prompt_text(request));
            let _ = std::io::stdout().flush();
            // Only what is typed from now on answers (see `read_answer`).
            let line = match super::repl_input::read_answer() {
                Ok(Some(line)) => line,
                Ok(None) | Err(_) => {
                    println!();
                    return Decision::Deny(Some("no answer: the input ended".into()));
                }
            };
            if let Some(d) = parse_answer(&line) {
                return d;
            }
            println!("    answer y, n or a");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_parse() {
        assert_eq!(parse_answer("y\n"), Some(Decision::Once));
        assert_eq!(parse_answer(" A "), Some(Decision::Session));
        assert_eq!(parse_answer("n"), Some(Decision::Deny(None)));
        assert_eq!(
            parse_answer("no use the make target"),
            Some(Decision::Deny(Some("use the make target".into())))
        );
        assert_eq!(parse_answer("maybe"), None);
    }

    #[test]
    fn the_prompt_shows_the_command_or_the_diff_and_why() {
        let mut r = PermissionRequest {
            call_id: "c".into(),
            tool: "shell".into(),
            kind: PermissionKind::Command,
            command: Some("cargo build".into()),
            path: None,
            diff: None,
            reason: "approval mode `untrusted` asks".into(),
            model_reason: None,
            approval: "untrusted".into(),
            sandbox: "workspace-write".into(),
            mcp: None,
        };
        let t = prompt_text(&r);
        assert!(
            t.contains("wants to run: cargo build") && t.contains("untrusted"),
            "{t}"
        );
        r.kind = PermissionKind::Edit;
        r.command = None;
        r.path = Some("src/a.rs".into());
        r.diff = Some("--- a/src/a.rs\n+++ b/src/a.rs\n-x\n+y\n".into());
        let t = prompt_text(&r);
        assert!(t.contains("change src/a.rs") && t.contains("    +y"), "{t}");
        r.kind = PermissionKind::McpTool;
        r.path = None;
        r.diff = None;
        r.mcp = Some(latch_kernel::McpToolCall {
            server: "fs".into(),
            tool: "write_file".into(),
            arguments: r#"{"path":"a.txt"}"#.into(),
        });
        let t = prompt_text(&r);
        assert!(
            t.contains("MCP server `fs`'s tool `write_file` with: {\"path\":\"a.txt\"}"),
            "{t}"
        );
    }
}
