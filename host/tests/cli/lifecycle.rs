//! A session's life across processes, through the real `latch` binary
//! against the scripted provider: resume remembers the provider, base URL,
//! model and the approval and sandbox modes (a looser one needs its flag
//! and shows in the transcript); one driver per session (two resumes race,
//! one is refused with who holds it; a SIGKILLed holder is taken over at
//! once); Esc in the terminal UI stops a parent blocked in `wait_agents`
//! while its child keeps running; and a child has the same tools whether
//! its parent spawned it or the user resumed it.

use super::tui::{Tmux, latch_line};
use super::{at, latch, project, runtime};
use latch_kernel::{EventKind, SessionRecord, Store, StoredEvent};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

fn store(ws: &Path) -> Store {
    Store::open(latch_kernel::default_store_path(ws)).unwrap()
}

fn latest_root(ws: &Path) -> SessionRecord {
    let key = ws.canonicalize().unwrap().display().to_string();
    store(ws).latest_root_session(&key).unwrap().unwrap()
}

fn events(ws: &Path, session: &str) -> Vec<StoredEvent> {
    store(ws).all_events(session).unwrap()
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `latch <args>` in `ws` with `input` on stdin; its output.
fn with_input(ws: &Path, args: &[&str], input: &[u8]) -> Output {
    let mut child = latch(ws)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(input).unwrap();
    child.wait_with_output().unwrap()
}

/// `latch resume <session>` holding the session open (stdin stays open).
fn holder(ws: &Path, session: &str) -> Child {
    latch(ws)
        .args(["resume", session])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// A session recorded by `latch run` with `flags`, against `server`.
fn recorded_session(ws: &Path, server: &FakeServer, flags: &[&str]) -> SessionRecord {
    let out = latch(ws)
        .args(at(server))
        .args(flags)
        .args(["run", "first task"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    latest_root(ws)
}

/// The first task ends at once; the second makes a file with `shell`.
fn shell_script() -> Script {
    Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains("second task") && !m.contains(r#""role":"tool""#) {
            return ScriptedTurn::tool_call("shell", r#"{"command":"echo hi > made.txt"}"#).into();
        }
        ScriptedTurn::text("Done.").into()
    })
}

fn profiles(evs: &[StoredEvent]) -> Vec<latch_kernel::SessionProfile> {
    evs.iter()
        .filter_map(|e| match &e.kind {
            EventKind::SessionProfile(p) => Some(p.clone()),
            _ => None,
        })
        .collect()
}

/// `latch resume --last` with no provider flags, no key and no base URL in
/// the environment talks to the same server with the same model, and asks
/// as the session's `untrusted` approval in its `read-only` sandbox asks —
/// even though the configuration now says something looser, which is
/// reported and not applied.
#[test]
fn resume_without_flags_keeps_provider_base_url_model_approval_and_sandbox() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(shell_script())).unwrap();
    let ws = project();
    let session = recorded_session(
        ws.path(),
        &server,
        &["--approval", "untrusted", "--sandbox", "read-only"],
    );
    // The user's own config (always trusted) says something looser.
    std::fs::create_dir_all(ws.path().join(".test-home/config")).unwrap();
    std::fs::write(
        ws.path().join(".test-home/config/config.toml"),
        "[provider]\nmodel = \"configured-model\"\n\n[permissions]\napproval = \"never\"\n\n\
         [sandbox]\nmode = \"full-access\"\n",
    )
    .unwrap();

    let out = with_input(ws.path(), &["resume", "--last"], b"second task\nn\n/exit\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        stderr.contains("the session ran with approval mode `untrusted`")
            && stderr.contains("--approval never"),
        "the looser configured mode is reported, not applied: {stderr}"
    );
    assert!(
        stderr.contains("the session ran with sandbox mode `read-only`"),
        "{stderr}"
    );
    // Same server, same model.
    let requests = server.requests();
    assert_eq!(
        requests.len(),
        3,
        "one request for `run`, two for the resume"
    );
    for r in &requests {
        assert_eq!(r.body["model"], "local", "{}", r.body["model"]);
    }
    // The recorded modes asked: the request names them, nothing ran.
    let evs = events(ws.path(), &session.id);
    let asked = evs
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::PermissionRequested(r) => Some(r.clone()),
            _ => None,
        })
        .expect("untrusted asks before the command");
    assert_eq!(
        (asked.approval.as_str(), asked.sandbox.as_str()),
        ("untrusted", "read-only")
    );
    assert!(
        stdout.contains("wants to run: echo hi > made.txt"),
        "{stdout}"
    );
    assert!(!ws.path().join("made.txt").exists());
    // Nothing changed, so nothing new was recorded.
    let recorded = profiles(&evs);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    assert_eq!(
        recorded[0].base_url.as_deref(),
        Some(server.openai_base_url().as_str())
    );
}

/// A looser approval or sandbox needs its flag; with it the session runs
/// looser, and the change is durable and shown: on the terminal, and in
/// the transcript every surface reduces from the log.
#[test]
fn a_looser_flag_applies_and_the_transcript_shows_the_change() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(shell_script())).unwrap();
    let ws = project();
    let session = recorded_session(
        ws.path(),
        &server,
        &["--approval", "untrusted", "--sandbox", "read-only"],
    );
    let out = with_input(
        ws.path(),
        &[
            "resume",
            "--last",
            "--approval",
            "never",
            "--sandbox",
            "workspace-write",
        ],
        b"second task\n/exit\n",
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = "! this run changes the session's settings: approval untrusted → never (LOOSER; by \
                --approval never); sandbox read-only → workspace-write (LOOSER; by --sandbox \
                workspace-write)";
    assert!(stderr.contains(line), "{stderr}");
    // It ran looser: nothing asked, the command wrote in the workspace.
    assert_eq!(
        std::fs::read_to_string(ws.path().join("made.txt")).unwrap(),
        "hi\n"
    );
    let evs = events(ws.path(), &session.id);
    assert!(
        !evs.iter()
            .any(|e| matches!(e.kind, EventKind::PermissionRequested(_)))
    );
    let recorded = profiles(&evs);
    assert_eq!(recorded.len(), 2);
    assert!(recorded[1].loosens());
    assert_eq!(
        (recorded[1].approval.as_str(), recorded[1].sandbox.as_str()),
        ("never", "workspace-write")
    );
    // The shared reducers show it in the transcript.
    let surface = latch_surface::Surface::replay(&session.id, &evs);
    let shown: Vec<String> = surface
        .durable()
        .transcript
        .items()
        .iter()
        .filter_map(|i| match i {
            latch_surface::Item::Notification { source, text, .. } if source == "session" => {
                Some(text.clone())
            }
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 1, "{shown:?}");
    assert!(
        shown[0].contains("approval untrusted → never (LOOSER"),
        "{shown:?}"
    );
}

/// Two `latch resume` of one session at once: one drives it, the other is
/// refused with who holds it (pid, surface, since when) and writes
/// nothing; once the first leaves, the session opens again.
#[test]
fn two_resumes_race_and_the_second_is_refused_with_the_holder() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(shell_script())).unwrap();
    let ws = project();
    let session = recorded_session(ws.path(), &server, &[]);
    let before = events(ws.path(), &session.id).len();
    let mut a = holder(ws.path(), &session.id);
    let mut b = holder(ws.path(), &session.id);
    // The loser exits; the winner keeps the session open.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut winner, loser) = loop {
        assert!(Instant::now() < deadline, "neither resume was refused");
        if a.try_wait().unwrap().is_some() {
            break (b, a);
        }
        if b.try_wait().unwrap().is_some() {
            break (a, b);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let refused = loser.wait_with_output().unwrap();
    let (_, stderr) = text(&refused);
    assert!(!refused.status.success());
    assert!(
        stderr.contains(&format!("session {} is in use", session.id))
            && stderr.contains("`latch` (line interface)")
            && stderr.contains(&format!("pid {}", winner.id()))
            && stderr.contains("since "),
        "{stderr}"
    );
    assert!(
        winner.try_wait().unwrap().is_none(),
        "the winner still drives it"
    );
    let holder_now = store(ws.path()).lease_holder(&session.id).unwrap().unwrap();
    assert_eq!(holder_now.pid, winner.id());
    // The refused process wrote nothing to the session.
    assert_eq!(events(ws.path(), &session.id).len(), before);
    // The winner leaves; the session is free again.
    drop(winner.stdin.take());
    assert!(winner.wait().unwrap().success());
    assert_eq!(store(ws.path()).lease_holder(&session.id).unwrap(), None);
    let out = with_input(ws.path(), &["resume", &session.id], b"/exit\n");
    assert!(out.status.success(), "{}", text(&out).1);
}

/// A holder killed with SIGKILL keeps nothing: its lease names a process
/// that is gone, so the next resume takes the session over at once, long
/// before the lease would expire.
#[test]
fn a_sigkilled_holder_is_taken_over_at_once() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(shell_script())).unwrap();
    let ws = project();
    let session = recorded_session(ws.path(), &server, &[]);
    let mut held = holder(ws.path(), &session.id);
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the holder never took the lease");
        if let Some(h) = store(ws.path()).lease_holder(&session.id).unwrap() {
            assert_eq!(h.pid, held.id());
            assert_eq!(h.surface, "`latch` (line interface)");
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    held.kill().unwrap(); // SIGKILL: no chance to release the lease
    held.wait().unwrap();
    let killed_at = Instant::now();
    let out = with_input(ws.path(), &["resume", &session.id], b"/exit\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(
        killed_at.elapsed() < latch_kernel::store::LEASE_TTL / 2,
        "taken over at once, not after the lease expired"
    );
}

fn write(path: PathBuf, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

fn npm_server(package: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/cache/npm/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "the MCP test server {package} is not installed at {}: run `bash .ci/run` once",
        script.display()
    );
    script
}

/// A child has the same tools however it is opened: the tool schemas of
/// the first request of a spawned child equal, byte for byte, those of
/// the request it makes after `latch resume <child-id>` — skills, MCP
/// server tools and group tools included.
#[test]
fn a_spawned_child_and_the_same_child_resumed_by_the_user_send_the_same_tools() {
    let rt = runtime();
    let script = Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains(BRIEF) {
            if m.contains("USER-AGAIN") {
                return ScriptedTurn::text("child: checked again").into();
            }
            return ScriptedTurn::text("child: looked around").into();
        }
        if !m.contains(r#""role":"tool""#) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"helper","task":"look around"}"#,
            )
            .into();
        }
        if !m.contains(r#""name":"wait_agents""#) {
            return ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":60}"#).into();
        }
        ScriptedTurn::text("all done").into()
    });
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    write(
        ws.path().join(".latch/skills/release/SKILL.md"),
        "---\nname: release\ndescription: Cut a release of this project.\n---\nSteps.\n",
    );
    // The user's config (trusted): a workspace's MCP server would need
    // workspace trust first.
    write(
        ws.path().join(".test-home/config/config.toml"),
        &format!(
            "[mcp.servers.everything]\ncommand = \"node\"\nargs = [\"{}\", \"stdio\"]\n",
            npm_server("server-everything").display()
        ),
    );
    let out = latch(ws.path())
        .args(at(&server))
        .args(["run", "delegate"])
        .output()
        .unwrap();
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let parent = latest_root(ws.path());
    let child = store(ws.path())
        .agent_tree(&parent.id)
        .unwrap()
        .children()
        .next()
        .unwrap()
        .id
        .clone();
    // The user opens the child directly, with no flags: it runs as
    // recorded.
    let out = with_input(ws.path(), &["resume", &child], b"USER-AGAIN check\n/exit\n");
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");

    let requests = server.requests();
    let spawned = requests
        .iter()
        .find(|r| messages(r).contains(BRIEF))
        .expect("the spawned child's first request");
    let resumed = requests
        .iter()
        .find(|r| messages(r).contains("USER-AGAIN"))
        .expect("the user-resumed child's request");
    let bytes = |r: &CapturedRequest| serde_json::to_string(&r.body["tools"]).unwrap();
    assert_eq!(bytes(spawned), bytes(resumed));
    let names: Vec<&str> = spawned.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for wanted in [
        "read_file",
        "load_skill",
        "mcp__everything__echo",
        "recall",
        "task_create",
        "group_message",
    ] {
        assert!(names.contains(&wanted), "{wanted} missing from {names:?}");
    }
}

/// Esc in the terminal UI while the parent blocks in `wait_agents` stops
/// the turn at once (the call answered as interrupted, the run closed);
/// the child keeps running and its report reaches the parent's next turn.
#[test]
fn esc_stops_a_parent_waiting_for_its_child_and_the_child_keeps_running() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let script = Script::default().with_responder(|r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains(BRIEF) {
            if !m.contains(r#""role":"tool""#) {
                return ScriptedTurn::tool_call(
                    "shell",
                    r#"{"command":"sleep 6; echo slept > child.txt"}"#,
                )
                .into();
            }
            return ScriptedTurn::text("CHILD-DONE: slept and wrote child.txt").into();
        }
        if m.contains("status?") {
            return ScriptedTurn::text(if m.contains("CHILD-DONE") {
                "Noted the child's report."
            } else {
                "No report yet."
            })
            .into();
        }
        if !m.contains(r#""role":"tool""#) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"sleeper","task":"sleep a while"}"#,
            )
            .into();
        }
        ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":600}"#).into()
    });
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let line = latch_line(ws.path(), &server, &[]);
    let tmux = Tmux::new();
    tmux.start("wait", &line);
    tmux.wait_for("wait", &["message · /help", "ready"]);
    tmux.text("wait", "delegate and wait");
    tmux.keys("wait", &["Enter"]);
    tmux.wait_for("wait", &["wait_agents"]);
    // The parent is inside wait_agents (its call committed, no result).
    let deadline = Instant::now() + Duration::from_secs(30);
    let parent = loop {
        assert!(Instant::now() < deadline, "the parent never waited");
        let p = latest_root(ws.path());
        let open = store(ws.path())
            .with_kernel(&p.id, |k| k.unfinished().open_calls.clone())
            .unwrap();
        if open.iter().any(|c| c.name == "wait_agents") {
            break p;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    std::thread::sleep(Duration::from_millis(200));
    let pressed = Instant::now();
    tmux.keys("wait", &["Escape"]);
    tmux.wait_for("wait", &["! run interrupted: interrupted by the user"]);
    let took = pressed.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "Esc took {took:?}: wait_agents did not see the interrupt"
    );
    let child = store(ws.path())
        .agent_tree(&parent.id)
        .unwrap()
        .children()
        .next()
        .unwrap()
        .clone();
    assert_eq!(
        child.state,
        latch_kernel::ChildState::Unfinished,
        "the child still runs"
    );
    // Every call of the parent is answered; wait_agents says why.
    let evs = events(ws.path(), &parent.id);
    let answer = evs
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "wait_agents" => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        answer.is_error
            && answer.content.starts_with("interrupted:")
            && answer.content.contains(&child.id),
        "{answer:?}"
    );
    let open = store(ws.path())
        .with_kernel(&parent.id, |k| k.unfinished().clone())
        .unwrap();
    assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
    // The child finishes on its own and reports; the parent's next turn
    // gets the report.
    let deadline = Instant::now() + Duration::from_secs(60);
    while store(ws.path())
        .agent_tree(&parent.id)
        .unwrap()
        .child(&child.id)
        .unwrap()
        .state
        != latch_kernel::ChildState::Finished
    {
        assert!(Instant::now() < deadline, "the child never finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(
        std::fs::read_to_string(ws.path().join("child.txt")).unwrap(),
        "slept\n"
    );
    tmux.text("wait", "status?");
    tmux.keys("wait", &["Enter"]);
    tmux.wait_for("wait", &["Noted the child's report."]);
    tmux.text("wait", "/exit");
    tmux.keys("wait", &["Enter"]);
}
