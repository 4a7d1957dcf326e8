//! The tools that spawn processes run them in the context's sandbox:
//! `shell` in the foreground and in the background (and what those start),
//! and `validate`. And the preview the approval policy sees.

use crate::common::{Env, assert_err, assert_ok, env};
use latch_engine_sdk::types::ToolCall;
use latch_sandbox::{Action, Sandbox, SandboxMode, SandboxPolicy};
use latch_tools::preview;
use serde_json::json;
use std::sync::Arc;

fn sandboxed(mode: SandboxMode) -> (Env, tempfile::TempDir) {
    let mut e = env();
    let sandbox = Sandbox::new(
        SandboxPolicy {
            mode,
            ..SandboxPolicy::default()
        },
        &e.ws,
        &e.session,
    )
    .unwrap();
    e.ctx = e.ctx.clone().with_sandbox(Arc::new(sandbox));
    (e, tempfile::tempdir().unwrap())
}

#[test]
fn shell_and_validate_write_only_in_the_workspace_under_workspace_write() {
    let (e, outside) = sandboxed(SandboxMode::WorkspaceWrite);
    let target = outside.path().join("x.txt");
    let o = e.call(
        "shell",
        json!({"command": "echo in > in.txt && cat in.txt"}),
    );
    assert_ok(&o);
    let o = e.call(
        "shell",
        json!({"command": format!("echo out > {}", target.display())}),
    );
    assert_err(&o, "Permission denied");
    let o = e.call(
        "validate",
        json!({"requirement": "writes outside fail", "command": format!("touch {}", target.display())}),
    );
    assert!(o.result.content.contains("FAILED"), "{}", o.result.content);
    assert!(!target.exists() && e.path("in.txt").exists());
}

#[test]
fn a_background_process_and_what_it_spawns_stay_in_the_sandbox() {
    let (e, outside) = sandboxed(SandboxMode::WorkspaceWrite);
    let target = outside.path().join("bg.txt");
    let o = e.call(
        "shell",
        json!({"command": format!(
            "sh -c 'sleep 0.2; echo x > {} 2>&1 || echo refused > result.txt' &\nwait",
            target.display()
        ), "background": true}),
    );
    assert_ok(&o);
    e.wait_for("the process exit", |k| {
        matches!(k, latch_kernel::EventKind::ProcessExited { .. })
    });
    assert!(!target.exists());
    assert_eq!(
        std::fs::read_to_string(e.path("result.txt")).unwrap(),
        "refused\n"
    );
}

#[test]
fn read_only_refuses_shell_writes_even_in_the_workspace() {
    let (e, _outside) = sandboxed(SandboxMode::ReadOnly);
    e.write("a.txt", "a\n");
    let o = e.call("shell", json!({"command": "echo b > a.txt"}));
    assert_err(&o, "Permission denied");
    assert_eq!(std::fs::read_to_string(e.path("a.txt")).unwrap(), "a\n");
    assert_ok(&e.call("shell", json!({"command": "cat a.txt"})));
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: "c1".into(),
        name: name.into(),
        arguments_json: args.to_string(),
    }
}

#[test]
fn the_preview_classifies_commands_and_diffs_edits() {
    let e = env();
    e.write("src/a.txt", "one\ntwo\n");
    let p = preview(&e.ctx, &call("shell", json!({"command": "ls -la"})));
    assert_eq!(p.action, Action::ReadOnlyCommand);
    let p = preview(&e.ctx, &call("shell", json!({"command": "cargo build"})));
    assert_eq!(
        (p.action, p.command.as_deref()),
        (Action::Command, Some("cargo build"))
    );
    let p = preview(
        &e.ctx,
        &call(
            "shell",
            json!({"command": "curl x", "escalate": true, "reason": "fetch docs"}),
        ),
    );
    assert_eq!(
        (p.action, p.reason.as_deref()),
        (Action::Escalation, Some("fetch docs"))
    );
    // The hard-deny list refuses on its own; nobody is asked.
    let p = preview(&e.ctx, &call("shell", json!({"command": "rm -rf /"})));
    assert_eq!(p.action, Action::Other);
    let p = preview(
        &e.ctx,
        &call(
            "edit_file",
            json!({"path": "src/a.txt", "old_string": "two", "new_string": "2"}),
        ),
    );
    assert_eq!(p.action, Action::Edit);
    assert_eq!(p.path.as_deref(), Some("src/a.txt"));
    let diff = p.diff.unwrap();
    assert!(
        diff.contains("--- a/src/a.txt") && diff.contains("-two\n+2\n"),
        "{diff}"
    );
    let p = preview(
        &e.ctx,
        &call("write_file", json!({"path": "new.md", "content": "hi\n"})),
    );
    assert!(p.diff.unwrap().contains("+++ b/new.md"));
    let p = preview(&e.ctx, &call("read_file", json!({"path": "src/a.txt"})));
    assert_eq!(p.action, Action::Other);
    // Nothing was written by previewing.
    assert_eq!(
        std::fs::read_to_string(e.path("src/a.txt")).unwrap(),
        "one\ntwo\n"
    );
    assert!(!e.path("new.md").exists());
}
