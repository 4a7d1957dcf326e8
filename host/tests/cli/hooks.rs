//! Hooks end to end: the real binary against the scripted provider over
//! HTTP, with `[hooks]` in the workspace's `.latch/config.toml`. Every hook
//! point runs, each run is a durable `hook_ran` event the line interface
//! and the TUI show, a `pre_tool` hook that exits non-zero denies the call
//! with its output as the reason the model reads, hooks run in the
//! sandbox (a write outside the workspace is refused), a hook with a
//! `matcher` runs only for the tools it names, and a workspace's hooks
//! need workspace trust.

use super::tui::{Tmux, latch_line};
use super::{at, latch, project, runtime};
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use std::path::Path;

/// `[hooks]` for every point; `outside` is a file outside the workspace
/// the session-start hook tries to write (the sandbox refuses it).
fn hooks_config(outside: &Path) -> String {
    format!(
        r#"[hooks]
session_start = ["echo started > .hook-start", "echo escaped > {}"]
user_message = ["printf '%s' \"$LATCH_PROMPT\" > .hook-prompt"]
pre_tool = [
  "case \"$LATCH_TOOL_INPUT\" in *secret*) echo 'secrets stay private'; exit 2;; esac",
  {{ command = "echo no writes here; exit 1", matcher = "write_file|edit_file" }},
]
post_tool = ["echo \"$LATCH_TOOL $LATCH_TOOL_ERROR\" >> .hook-post"]
turn_end = ["printf '%s' \"$LATCH_FINAL_TEXT\" > .hook-end"]
"#,
        outside.display()
    )
}

fn script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"cat secret.txt"}"#),
        ScriptedTurn::tool_call("write_file", r#"{"path":"notes.txt","content":"x"}"#),
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("Read it."),
    ])
}

fn hook_events(ws: &Path) -> Vec<EventKind> {
    let store = Store::open_existing(ws.join(".latch/latch.db")).unwrap();
    let key = std::fs::canonicalize(ws).unwrap().display().to_string();
    let session = store.latest_root_session(&key).unwrap().unwrap();
    store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .filter(|k| matches!(k, EventKind::HookRan { .. }))
        .collect()
}

fn summary(events: &[EventKind]) -> Vec<(String, Option<String>, Option<i32>, bool)> {
    events
        .iter()
        .map(|k| match k {
            EventKind::HookRan {
                hook,
                tool,
                exit_code,
                denied,
                ..
            } => (hook.clone(), tool.clone(), *exit_code, *denied),
            _ => unreachable!(),
        })
        .collect()
}

#[test]
fn hooks_run_at_every_point_in_the_sandbox_and_a_pre_tool_hook_denies() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script())).unwrap();
    let ws = project();
    let outside = tempfile::tempdir().unwrap();
    let escaped = outside.path().join("escaped.txt");
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(ws.path().join("secret.txt"), "hunter2\n").unwrap();
    std::fs::write(ws.path().join(".latch/config.toml"), hooks_config(&escaped)).unwrap();

    let out = latch(ws.path())
        .args(at(&server))
        .args(["--trust-workspace", "run", "read the helper"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    // Durable, in order: both session-start hooks (the second refused by
    // the sandbox), the message, the denied call, the write the matched
    // hook denied, the allowed call (the matcher passes it by) with its
    // post hook, the end of the turn.
    let events = hook_events(ws.path());
    let seen = summary(&events);
    let s = |h: &str, t: Option<&str>, c: Option<i32>, d: bool| {
        (h.to_string(), t.map(str::to_string), c, d)
    };
    assert_eq!(seen[0], s("session_start", None, Some(0), false));
    assert_eq!(seen[1].0, "session_start");
    assert_ne!(
        seen[1].2,
        Some(0),
        "a write outside the workspace: {events:?}"
    );
    assert_eq!(
        seen[2..].to_vec(),
        vec![
            s("user_message", None, Some(0), false),
            s("pre_tool", Some("shell"), Some(2), true),
            s("pre_tool", Some("write_file"), Some(0), false),
            s("pre_tool", Some("write_file"), Some(1), true),
            s("pre_tool", Some("read_file"), Some(0), false),
            s("post_tool", Some("read_file"), Some(0), false),
            s("turn_end", None, Some(0), false),
        ],
        "{events:?}"
    );
    assert!(!escaped.exists(), "the hook ran outside the sandbox");
    assert!(
        !ws.path().join("notes.txt").exists(),
        "the denied write ran"
    );
    let read = |f: &str| std::fs::read_to_string(ws.path().join(f)).unwrap();
    assert_eq!(read(".hook-start"), "started\n");
    assert_eq!(read(".hook-prompt"), "read the helper");
    assert_eq!(read(".hook-post"), "read_file false\n");
    assert_eq!(read(".hook-end"), "Read it.");

    // The model read the hook's output as the reason of the denial, and
    // the command never ran.
    let second = server.requests()[1].body.to_string();
    assert!(
        second.contains("pre_tool hook") && second.contains("secrets stay private"),
        "{second}"
    );
    assert!(!second.contains("hunter2"), "{second}");
    let third = server.requests()[2].body.to_string();
    assert!(third.contains("no writes here"), "{third}");
    // The line interface shows each run.
    assert!(
        stdout.contains("◇ hook pre_tool (shell) `case")
            && stdout.contains("denied the call: secrets stay private"),
        "{stdout}"
    );
}

#[test]
fn a_workspaces_hooks_need_trust() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text("Hi.")])))
        .unwrap();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[hooks]\nturn_end = [\"touch .hook-ran\"]\npre_tool = []\ntimeout_ms = 5000\n",
    )
    .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "hello"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("hooks.turn_end = [\"touch .hook-ran\"]")
            && stderr.contains("starts a program")
            && stderr.contains("--trust-workspace"),
        "{stderr}"
    );
    // An empty list and a timeout start nothing.
    assert!(
        !stderr.contains("hooks.pre_tool") && !stderr.contains("timeout_ms"),
        "{stderr}"
    );
    assert!(!ws.path().join(".hook-ran").exists());
    assert!(server.requests().is_empty());
    // Trusted for this run, it runs.
    let out = latch(ws.path())
        .args(at(&server))
        .args(["--trust-workspace", "run", "hello"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(ws.path().join(".hook-ran").exists());
}

#[test]
fn the_tui_shows_a_hook_run() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([ScriptedTurn::text(
            "Hi there.",
        )])))
        .unwrap();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[hooks]\nturn_end = [\"echo checked the turn\"]\n",
    )
    .unwrap();
    let tmux = Tmux::new();
    tmux.start(
        "hook",
        &latch_line(ws.path(), &server, &["--trust-workspace"]),
    );
    tmux.wait_for("hook", &["message · /help", "ready"]);
    tmux.text("hook", "say hi");
    tmux.keys("hook", &["Enter"]);
    tmux.wait_for(
        "hook",
        &[
            "Hi there.",
            "turn_end `echo checked the turn`: ok: checked the turn",
        ],
    );
    tmux.text("hook", "/exit");
    tmux.keys("hook", &["Enter"]);
}
