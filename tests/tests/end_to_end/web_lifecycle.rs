//! A session's driver from the web surface, over real HTTP against a
//! `latch serve` child process and the local wire-format server: an
//! interrupt that stops a parent blocked in `wait_agents` at once while its
//! child keeps running; a child the parent runs, and a session the
//! terminal drives, viewed read-only by the page (their messages refused
//! with who holds them) until the holder lets go — a SIGKILLed one at once.

use super::{Served, latch_command, project, runtime, serve};
use latch_kernel::{ChildState, EventKind};
use latch_provider::fake::{CapturedRequest, FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::{Value, json};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// The phrase only a child's brief carries.
const BRIEF: &str = "You are a child agent of session";

fn messages(r: &CapturedRequest) -> String {
    r.body["messages"].to_string()
}

/// A parent that spawns one child, then waits for it; the child sleeps
/// `sleep_s` in a shell command, then reports.
fn waiting_parent(sleep_s: u32) -> Script {
    Script::default().with_responder(move |r: &CapturedRequest| -> ScriptStep {
        let m = messages(r);
        if m.contains(BRIEF) {
            if !m.contains(r#""role":"tool""#) {
                return ScriptedTurn::tool_call(
                    "shell",
                    format!(r#"{{"command":"sleep {sleep_s}; echo slept > child.txt"}}"#),
                )
                .into();
            }
            return ScriptedTurn::text("CHILD-DONE: slept").into();
        }
        if !m.contains(r#""role":"tool""#) {
            return ScriptedTurn::tool_call(
                "spawn_agent",
                r#"{"role":"sleeper","task":"sleep a while"}"#,
            )
            .into();
        }
        ScriptedTurn::tool_call("wait_agents", r#"{"timeout_s":600}"#).into()
    })
}

/// Wait until the parent `id` blocks in `wait_agents` (its call committed
/// without a result); the child's id.
async fn parent_waiting(served: &Served, id: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(Instant::now() < deadline, "the parent never waited");
        let store = served.store();
        let open = store
            .with_kernel(id, |k| k.unfinished().open_calls.clone())
            .unwrap();
        let child = store.agent_tree(id).unwrap().children().next().cloned();
        if let Some(child) = child
            && open.iter().any(|c| c.name == "wait_agents")
        {
            return child.id;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn child_finished(served: &Served, parent: &str, child: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while served
        .store()
        .agent_tree(parent)
        .unwrap()
        .child(child)
        .unwrap()
        .state
        != ChildState::Finished
    {
        assert!(Instant::now() < deadline, "the child never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn get(served: &Served, path: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(served.api(path))
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

/// `POST …/interrupt` while the parent blocks in `wait_agents` answers at
/// once with the turn stopped; the call is answered as interrupted, the
/// child keeps running and reports.
#[test]
fn an_interrupt_over_http_stops_a_parent_in_wait_agents_and_the_child_keeps_running() {
    let rt = runtime();
    let io = runtime();
    let ws = project();
    let provider = io.block_on(FakeServer::start(waiting_parent(6))).unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "delegate and wait"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
        let child = parent_waiting(&served, &id).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        let asked = Instant::now();
        let (status, body) = served
            .post(&format!("/sessions/{id}/interrupt"), Value::Null)
            .await;
        let took = asked.elapsed();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["stopped"], true, "{body}");
        assert!(
            took < Duration::from_secs(3),
            "the interrupt took {took:?}: wait_agents did not see it"
        );
        let store = served.store();
        let answer = store
            .all_events(&id)
            .unwrap()
            .into_iter()
            .find_map(|e| match e.kind {
                EventKind::ToolResult(r) if r.name == "wait_agents" => Some(r),
                _ => None,
            })
            .unwrap();
        assert!(
            answer.content.starts_with("interrupted:") && answer.content.contains(&child),
            "{answer:?}"
        );
        assert_eq!(
            store.agent_tree(&id).unwrap().child(&child).unwrap().state,
            ChildState::Unfinished,
            "the child still runs"
        );
        // It finishes on its own.
        child_finished(&served, &id, &child).await;
        assert_eq!(
            std::fs::read_to_string(ws.path().join("child.txt")).unwrap(),
            "slept\n"
        );
    });
}

/// The page views a child its parent runs in this server, but cannot
/// drive it: its messages are refused (409) naming the parent that holds
/// it, while `GET` shows the child and who drives it, and `/context`
/// works read-only.
#[test]
fn the_page_views_a_child_its_parent_runs_and_cannot_post_to_it() {
    let rt = runtime();
    let io = runtime();
    let ws = project();
    let provider = io.block_on(FakeServer::start(waiting_parent(4))).unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let (status, _) = served
            .post(&format!("/sessions/{id}/messages"), json!({"text": "go"}))
            .await;
        assert_eq!(status, 202);
        let child = parent_waiting(&served, &id).await;
        let (status, shown) = get(&served, &format!("/sessions/{child}")).await;
        assert_eq!(status, 200, "{shown}");
        let driver = &shown["driver"];
        assert!(
            driver["surface"]
                .as_str()
                .unwrap()
                .contains(&format!("parent session {id}")),
            "{driver}"
        );
        assert_eq!(driver["this_server"], false, "{driver}");
        let (status, refused) = served
            .post(
                &format!("/sessions/{child}/messages"),
                json!({"text": "do something else"}),
            )
            .await;
        assert_eq!(status, 409, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("session {child} is in use"))
                && error.contains(&format!("parent session {id}")),
            "{error}"
        );
        // Read-only commands still work on it.
        let (status, ctx) = get(&served, &format!("/sessions/{child}/context")).await;
        assert_eq!(status, 200, "{ctx}");
        // Nothing the page sent reached the child.
        assert!(
            !provider
                .requests()
                .iter()
                .any(|r| messages(r).contains("do something else"))
        );
        child_finished(&served, &id, &child).await;
    });
}

/// A session the terminal drives (`latch resume` in another process) is
/// refused to the page with the terminal's pid and surface; `GET` shows
/// it as driven elsewhere. Once that process is SIGKILLed the page takes
/// the session over at once.
#[test]
fn a_session_the_terminal_drives_is_refused_to_the_page_until_it_dies() {
    let rt = runtime();
    let io = runtime();
    let ws = project();
    let provider = io
        .block_on(FakeServer::start(Script::default().with_responder(|_| {
            ScriptStep::Turn(ScriptedTurn::text("Answered from the page."))
        })))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        // The terminal resumes it (its recorded provider; no flags).
        let mut terminal = latch_command(
            ws.path(),
            &["-C", &ws.path().display().to_string(), "resume", &id].map(str::to_string),
        )
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let driver = loop {
            assert!(
                Instant::now() < deadline,
                "the terminal never took the session"
            );
            let (_, shown) = get(&served, &format!("/sessions/{id}")).await;
            if shown["driver"]["pid"] == terminal.id() {
                break shown["driver"].clone();
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert_eq!(driver["surface"], "`latch` (line interface)", "{driver}");
        assert_eq!(driver["this_server"], false);
        let (status, refused) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "hello"}),
            )
            .await;
        assert_eq!(status, 409, "{refused}");
        let error = refused["error"].as_str().unwrap();
        assert!(
            error.contains(&format!("pid {}", terminal.id()))
                && error.contains("`latch` (line interface)"),
            "{error}"
        );
        // Nor can the page rewind its files.
        let (status, refused) = served
            .post(&format!("/sessions/{id}/rewind/1"), Value::Null)
            .await;
        assert_eq!(status, 409, "{refused}");
        assert!(
            refused["error"]
                .as_str()
                .unwrap()
                .contains(&format!("pid {}", terminal.id())),
            "{refused}"
        );
        terminal.kill().unwrap(); // SIGKILL
        terminal.wait().unwrap();
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "hello"}),
            )
            .await;
        assert_eq!(status, 202, "taken over at once: {r}");
        let deadline = Instant::now() + Duration::from_secs(30);
        while !provider
            .requests()
            .iter()
            .any(|r| messages(r).contains("hello"))
        {
            assert!(Instant::now() < deadline, "the page's turn never ran");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // The lease is the server's only while its turn runs: given back
        // once the page's turn ends.
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let (_, shown) = get(&served, &format!("/sessions/{id}")).await;
            if shown["driver"].is_null() {
                break;
            }
            assert_eq!(shown["driver"]["this_server"], true, "{shown}");
            assert!(Instant::now() < deadline, "never given back: {shown}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
