//! Plan mode on the terminal: Shift+Tab enters it, the scripted model's
//! write_file, edit_file and `echo x > f` change nothing on disk, the plan
//! comes up as a modal to approve, `a` approves it into auto, and the same
//! calls succeed; the plan is the sidebar's checklist; `/agents` lists the
//! agents users defined. And `latch run
//! --plan` keeps the session in plan mode, which a resume stays in.

use super::acp::{PLAN, plan_script, untouched, written};
use super::tui::{Tmux, latch_line};
use super::{at, latch, project, runtime};
use latch_kernel::{EventKind, PermissionKind, SessionMode, Store};
use latch_provider::fake::FakeServer;

#[test]
fn shift_tab_enters_plan_mode_and_the_approved_plan_runs_in_the_terminal() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let server = rt.block_on(FakeServer::start(plan_script())).unwrap();
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch/agents")).unwrap();
    std::fs::write(
        ws.path().join(".latch/agents/reviewer.md"),
        "---\ndescription: Reviews changes.\ntools: Read, Grep\n---\nReview.\n",
    )
    .unwrap();
    let line = latch_line(ws.path(), &server, &["--approval", "on-request"]);
    let tmux = Tmux::new();
    tmux.start("plan", &line);
    tmux.wait_for("plan", &["ready", "⏵ auto"]);
    // auto → plan.
    tmux.keys("plan", &["BTab"]);
    tmux.wait_for("plan", &["⏵ plan"]);
    tmux.text("plan", "make add add");
    tmux.keys("plan", &["Enter"]);
    let screen = tmux.wait_for("plan", &["y approve · e approve", "2. Fix the operator"]);
    assert!(
        untouched(ws.path()),
        "plan mode let a write through; the screen:\n{}",
        screen.join("\n")
    );
    tmux.keys("plan", &["a"]);
    tmux.wait_for("plan", &["Done as planned.", "[x] Write new.txt", "⏵ auto"]);
    assert!(written(ws.path()), "the approved calls did not all run");
    // `/agents` lists the agents users defined, with where each came from.
    tmux.text("plan", "/agents");
    tmux.keys("plan", &["Enter"]);
    tmux.wait_for(
        "plan",
        &[
            "reviewer (workspace,",
            "tools: read_file, read_artifact, grep",
        ],
    );
    tmux.keys("plan", &["C-c"]);
}

#[test]
fn a_run_in_plan_mode_records_the_plan_and_a_resume_stays_in_plan_mode() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(plan_script())).unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["--plan", "run", "--json", "make add add"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Nobody can approve in `run`: every write was refused, twice over.
    assert!(untouched(ws.path()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("\"kind\":\"permission_requested\""),
        "{stdout}"
    );
    assert!(
        stdout.contains("Fix the operator"),
        "the plan is in the JSON: {stdout}"
    );
    let store = Store::open(latch_kernel::default_store_path(ws.path())).unwrap();
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let session = store.latest_root_session(&key).unwrap().unwrap();
    let plan = store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::PermissionRequested(r) if r.kind == PermissionKind::Plan => r.plan,
            _ => None,
        });
    assert_eq!(plan.as_deref(), Some(PLAN));
    let profile = store.session_profile(&session.id).unwrap().unwrap();
    assert_eq!(profile.mode, SessionMode::Plan);
    // Rewind changes the workspace: refused in plan mode.
    let first_message = store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .find(|e| matches!(e.kind, EventKind::UserMessage { .. }))
        .unwrap()
        .seq;
    drop(store);
    let rewind = latch(ws.path())
        .args(["rewind", &session.id, "--to", &first_message.to_string()])
        .output()
        .unwrap();
    assert!(!rewind.status.success());
    let err = String::from_utf8_lossy(&rewind.stderr);
    assert!(err.contains("the session is in plan mode"), "{err}");
    // The resume runs in plan mode: `/plan` leaves it.
    let mut resume = latch(ws.path());
    resume.args(at(&server));
    let out = super::resume_last(resume, b"/plan\n/exit\n");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("mode: auto"), "{stdout}");
}

#[test]
fn run_json_carries_the_plan_as_a_checklist() {
    use latch_provider::fake::{Script, ScriptedTurn};
    let rt = runtime();
    let server = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call("add_action", r#"{"text":"read the parser"}"#),
            ScriptedTurn::tool_call("add_action", r#"{"text":"fix the bug"}"#),
            ScriptedTurn::tool_call("complete_action", r#"{"text":"read the parser"}"#),
            ScriptedTurn::text("Halfway."),
        ])))
        .unwrap();
    let ws = project();
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "--json", "fix it"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let plans: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v.get("plan").is_some())
        .collect();
    assert_eq!(plans.len(), 3, "one plan line per change: {plans:?}");
    assert_eq!(
        plans[2]["plan"],
        serde_json::json!([
            {"text": "read the parser", "status": "completed"},
            {"text": "fix the bug", "status": "pending"}
        ])
    );
}
