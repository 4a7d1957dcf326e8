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

/// A child an agent spawns runs the same `[hooks]` in its own session:
/// its session start, its user message (the delegation brief), its turn
/// end, and a `pre_tool` hook whose matcher
/// names `write_file` denies the child's write (durable `hook_ran` and
/// `tool_denied` events in the child's log; its model reads the reason).
#[test]
fn a_spawned_childs_tool_call_is_denied_by_a_pre_tool_hook() {
    use latch_provider::fake::{CapturedRequest, ScriptStep};
    const BRIEF: &str = "You are a child agent of session";
    let rt = runtime();
    let script = Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        let m = serde_json::to_string(&r.body["messages"]).unwrap();
        let answered = m.contains(r#""role":"tool""#);
        if m.contains(BRIEF) {
            return if answered {
                ScriptedTurn::text("child: the write was refused").into()
            } else {
                ScriptedTurn::tool_call("write_file", r#"{"path":"child.txt","content":"x"}"#)
                    .into()
            };
        }
        if !answered {
            return ScriptedTurn::tool_call("spawn_agent", r#"{"role":"writer","task":"write"}"#)
                .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":60}"#).into();
        }
        ScriptedTurn::text("all done").into()
    });
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        r#"[hooks]
session_start = ["true"]
user_message = ["case \"$LATCH_PROMPT\" in *'child agent'*) exit 0;; *) exit 3;; esac"]
turn_end = ["true"]

[[hooks.pre_tool]]
command = "echo no writes in this tree; exit 1"
matcher = "write_file"
"#,
    )
    .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["--trust-workspace", "run", "delegate"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open_existing(ws.path().join(".latch/latch.db")).unwrap();
    let key = std::fs::canonicalize(ws.path())
        .unwrap()
        .display()
        .to_string();
    let parent = store.latest_root_session(&key).unwrap().unwrap();
    let child = store
        .agent_tree(&parent.id)
        .unwrap()
        .children()
        .next()
        .expect("the parent spawned a child")
        .id
        .clone();
    let child_events: Vec<EventKind> = store
        .all_events(&child)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect();
    let hooks: Vec<EventKind> = child_events
        .iter()
        .filter(|k| matches!(k, EventKind::HookRan { .. }))
        .cloned()
        .collect();
    assert_eq!(
        summary(&hooks),
        vec![
            ("session_start".into(), None, Some(0), false),
            // On the delegation brief.
            ("user_message".into(), None, Some(0), false),
            ("pre_tool".into(), Some("write_file".into()), Some(1), true),
            ("turn_end".into(), None, Some(0), false),
        ],
        "{child_events:?}"
    );
    assert!(
        child_events.iter().any(|k| matches!(
            k,
            EventKind::ToolDenied { tool, reason, .. }
                if tool == "write_file" && reason.contains("no writes in this tree")
        )),
        "{child_events:?}"
    );
    assert!(
        !ws.path().join("child.txt").exists(),
        "the denied write ran"
    );
    // The parent's own calls (spawn_agent, wait_agents) are not matched.
    let parent_hooks = summary(&hook_events(ws.path()));
    assert!(
        parent_hooks.iter().all(|(h, ..)| h != "pre_tool"),
        "{parent_hooks:?}"
    );
    let child_second = server
        .requests()
        .into_iter()
        .filter(|r| r.body["messages"].to_string().contains(BRIEF))
        .nth(1)
        .expect("the child's second request");
    assert!(
        child_second.body["messages"]
            .to_string()
            .contains("no writes in this tree"),
        "{}",
        child_second.body
    );
}

#[test]
fn a_workspace_never_removes_the_users_own_hooks() {
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("shell", r#"{"command":"echo hi > made.txt"}"#),
            ScriptedTurn::text("Done."),
        ])))
        .unwrap();
    let ws = project();
    // The user's own guard, in the user's config.
    let user = ws.path().join(".test-home/config");
    std::fs::create_dir_all(&user).unwrap();
    std::fs::write(
        user.join("config.toml"),
        "[hooks]\npre_tool = [\"echo the guard of the user said no; exit 1\"]\n",
    )
    .unwrap();
    // A repository that empties the list: it starts nothing, so it needs
    // no trust — and it must not switch the guard off.
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[hooks]\npre_tool = []\n",
    )
    .unwrap();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "make the file"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !ws.path().join("made.txt").exists(),
        "the guard was removed"
    );
    let second = server.requests()[1].body.to_string();
    assert!(second.contains("the guard of the user said no"), "{second}");
    assert_eq!(
        summary(&hook_events(ws.path())),
        [(
            "pre_tool".to_string(),
            Some("shell".to_string()),
            Some(1),
            true
        )]
    );
}
