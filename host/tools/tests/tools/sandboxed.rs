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

/// Whether the file `name` of the workspace stays the same size for
/// 600 ms (after a moment for a kill to land).
fn stopped_growing(e: &Env, name: &str) -> bool {
    let size = || std::fs::metadata(e.path(name)).map_or(0, |m| m.len());
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = size();
    std::thread::sleep(std::time::Duration::from_millis(600));
    before == size()
}

/// Wait until the file `name` of the workspace has grown past its first
/// line: its writer runs.
fn growing(e: &Env, name: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::metadata(e.path(name)).map_or(0, |m| m.len()) < 60 {
        assert!(
            std::time::Instant::now() < deadline,
            "{name} never grew: its writer did not run"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// A writer that leaves its command's session and process group.
fn detached_writer(name: &str) -> String {
    format!(
        "setsid sh -c 'while :; do date >> {name}; sleep 0.1; done' </dev/null >/dev/null 2>&1 &"
    )
}

#[test]
fn process_kill_and_a_timeout_end_what_the_command_detached_in_every_mode() {
    for mode in [SandboxMode::WorkspaceWrite, SandboxMode::FullAccess] {
        let (e, _outside) = sandboxed(mode);
        // A managed process whose `setsid` writer left its process group:
        // `process_kill` ends the writer too.
        let o = e.call(
            "shell",
            json!({"command": format!("{} exec sleep 60", detached_writer("g")), "background": true}),
        );
        assert_ok(&o);
        let id = o
            .result
            .content
            .split_whitespace()
            .nth(3)
            .unwrap()
            .to_string();
        growing(&e, "g");
        assert_ok(&e.call("process_kill", json!({"id": id})));
        assert!(
            stopped_growing(&e, "g"),
            "{mode}: the killed process's writer still writes"
        );
        // A foreground command stopped by its timeout: the same.
        let o = e.call(
            "shell",
            json!({"command": format!("{} sleep 30", detached_writer("t")), "timeout_ms": 1_500}),
        );
        assert_err(&o, "timed out");
        assert!(e.path("t").exists(), "{mode}: the writer never ran");
        assert!(
            stopped_growing(&e, "t"),
            "{mode}: the timed-out command's writer still writes"
        );
    }
}
