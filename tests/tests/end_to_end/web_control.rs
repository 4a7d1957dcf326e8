//! Acting on a running turn from the web surface, over real HTTP against a
//! `latch serve` child process and the local wire-format server: an
//! interrupt that drops the provider's stalled stream at once, permission
//! requests under `--approval untrusted` answered over HTTP (durable
//! grants and denials, an "always" grant that holds, an interrupt while a
//! request waits), and the group view `/group` prints.

use super::{Frame, Served, Sse, project, runtime, serve};
use latch_kernel::group::{GroupEvent, GroupPort, present};
use latch_kernel::{DecidedBy, EventKind, GrantScope, StoredEvent};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

/// Frames until one satisfies `pred`; returns that one.
async fn until_frame(sse: &mut Sse, what: &str, pred: impl Fn(&Frame) -> bool) -> Frame {
    loop {
        let f = sse
            .next(Duration::from_secs(60))
            .await
            .unwrap_or_else(|| panic!("the stream went silent before {what}"));
        if pred(&f) {
            return f;
        }
    }
}

/// True for a committed event of `kind` whose data mentions `text`.
fn committed(f: &Frame, kind: &str, text: &str) -> bool {
    f.event == "event" && f.json()["event"]["kind"] == kind && f.data.contains(text)
}

fn events(served: &Served, id: &str) -> Vec<StoredEvent> {
    served.store().events(id, 0, u64::MAX, 100_000).unwrap()
}

async fn status_of(served: &Served, path: &str) -> (u16, Value) {
    let r = reqwest::Client::new()
        .get(served.api(path))
        .bearer_auth(&served.token)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    (status, r.json().await.unwrap_or(Value::Null))
}

#[test]
fn an_interrupt_over_http_stops_the_running_turn_at_once() {
    let rt = runtime();
    // The provider runs on its own runtime: its stalled answer blocks a
    // worker thread for 30 s.
    let io = runtime();
    let ws = project();
    let provider = io
        .block_on(FakeServer::start(
            Script::new([ScriptedTurn::text("Reading first.")
                .with_tool_call("read_file", r#"{"path":"src/math.sh"}"#)])
            .with_responder(|_| {
                std::thread::sleep(Duration::from_secs(30));
                ScriptStep::Turn(ScriptedTurn::text("too late"))
            }),
        ))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let path = format!("/sessions/{id}/interrupt");
        let (status, body) = served.post(&path, Value::Null).await;
        assert_eq!(status, 409, "{body}");
        let error = body["error"].as_str().unwrap();
        assert!(error.contains("nothing runs"), "{error}");
        assert!(error.contains("/messages"), "{error}");
        let (status, _) = served.post("/sessions/nope/interrupt", Value::Null).await;
        assert_eq!(status, 404);

        let mut live = served.stream(&id, None, false).await;
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "what does math.sh do?"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
        let receipt = r["receipt"].as_str().unwrap().to_string();
        // The read's result is committed; the next request goes out and
        // stalls like a slow model.
        until_frame(&mut live, "the read's result", |f| {
            committed(f, "tool_result", "math.sh")
        })
        .await;
        let started = Instant::now();
        while provider.requests().len() < 2 {
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "no second request"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;

        // A rewind, and a message with an image (images are never queued),
        // wait for the turn: refused while it runs.
        let (status, body) = served
            .post(&format!("/sessions/{id}/rewind/1"), Value::Null)
            .await;
        assert_eq!(status, 409, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("is running a turn"),
            "{body}"
        );
        let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR".to_vec();
        png.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 4, 8, 6, 0, 0, 0]);
        let data = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &png);
        let (status, body) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "and this?", "images": [{"name": "shot.png", "data": data}]}),
            )
            .await;
        assert_eq!(status, 409, "{body}");

        let asked = Instant::now();
        let (status, body) = served.post(&path, Value::Null).await;
        let took = asked.elapsed();
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["stopped"], true, "{body}");
        assert_eq!(body["receipt"], receipt.as_str());
        assert!(
            took < Duration::from_secs(5),
            "the interrupt answered after {took:?}: the stalled stream was not dropped"
        );

        // The stream shows the durable interruption, then the turn's end.
        let frames = live.until_turn(&receipt).await;
        let end = frames.last().unwrap().json();
        assert_eq!(end["state"], "interrupted", "{end}");
        assert_eq!(end["reason"], "interrupted by the user", "{end}");
        let stop = frames
            .iter()
            .find(|f| committed(f, "run_interrupted", "interrupted by the user"))
            .expect("run_interrupted went out on the stream");
        assert!(stop.id.is_some());
        let log = events(&served, &id);
        assert!(
            matches!(&log.last().unwrap().kind,
                EventKind::RunInterrupted { reason } if reason == "interrupted by the user"),
            "{:?}",
            log.last()
        );
        assert!(
            !log.iter()
                .any(|e| format!("{:?}", e.kind).contains("too late")),
            "the stalled answer was committed"
        );
        let state = served.get(&format!("/sessions/{id}")).await;
        assert_eq!(state["state"]["activity"]["kind"], "interrupted", "{state}");
        let (status, _) = served.post(&path, Value::Null).await;
        assert_eq!(status, 409, "nothing runs after the interrupt");

        // The user continues in the same session.
        provider.push(ScriptedTurn::text("Back again."));
        let (status, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "go on"}),
            )
            .await;
        assert_eq!(status, 202, "{r}");
        let frames = live.until_turn(r["receipt"].as_str().unwrap()).await;
        assert_eq!(frames.last().unwrap().json()["state"], "finished");
    });
    drop(served);
    io.shutdown_background();
}

#[test]
fn a_permission_request_waits_for_the_page_and_is_answered_over_http() {
    let rt = runtime();
    let ws = project();
    let touch = r#"{"command":"touch made.txt"}"#;
    let provider = rt
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::text("Creating the file.").with_tool_call("shell", touch),
            ScriptedTurn::text("Once more.").with_tool_call("shell", touch),
            ScriptedTurn::text("Removing the script.")
                .with_tool_call("shell", r#"{"command":"rm src/math.sh"}"#),
            ScriptedTurn::text("Done; the script stays."),
            ScriptedTurn::text("Another file.")
                .with_tool_call("shell", r#"{"command":"touch other.txt"}"#),
        ])))
        .unwrap();
    let served = serve(ws.path(), &provider, &["--approval", "untrusted"]);
    rt.block_on(async {
        let id = served.new_session().await;
        let mut live = served.stream(&id, None, false).await;
        let (_, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "make the file"}),
            )
            .await;
        let receipt = r["receipt"].as_str().unwrap().to_string();

        // The request is durable before anyone is asked, and the page's
        // state shows it: the command, why, and the call id to answer.
        let asked = until_frame(&mut live, "the first request", |f| {
            committed(f, "permission_requested", "touch made.txt")
        })
        .await;
        assert!(asked.id.is_some());
        let state = served.get(&format!("/sessions/{id}")).await;
        let waiting = &state["state"]["permission"];
        assert_eq!(waiting["tool"], "shell", "{state}");
        assert_eq!(waiting["command"], "touch made.txt");
        assert!(waiting["reason"].as_str().unwrap().contains("untrusted"));
        let prompt = &state["state"]["durable"]["permission"];
        assert_eq!(prompt["subject"], "touch made.txt", "{state}");
        assert_eq!(prompt["action"], "shell wants to run:", "{state}");
        assert_eq!(prompt["call_id"], waiting["call_id"], "{state}");
        assert_eq!(state["state"]["activity"]["kind"], "permission");
        let call = waiting["call_id"].as_str().unwrap().to_string();
        assert!(!ws.path().join("made.txt").exists(), "it ran before the answer");

        // Wrong answers say what is wrong and change nothing.
        let answer = |call: &str| format!("/sessions/{id}/permissions/{call}");
        let (status, body) = served
            .post(&answer(&call), json!({"decision": "maybe"}))
            .await;
        assert_eq!(status, 400, "{body}");
        assert!(body["error"].as_str().unwrap().contains("`allow`, `deny`, `always` or `approve`"));
        let (status, body) = served.post(&answer(&call), json!({"yes": 1})).await;
        assert_eq!(status, 400, "{body}");
        let (status, body) = served
            .post(&answer("not-a-call"), json!({"decision": "allow"}))
            .await;
        assert_eq!(status, 409, "{body}");
        assert!(body["error"].as_str().unwrap().contains(&call), "{body}");
        let (status, _) = served
            .post("/sessions/nope/permissions/x", json!({"decision": "allow"}))
            .await;
        assert_eq!(status, 404);

        // Always: this call runs, and the same command later runs without
        // asking; then a denial with a reason the model reads.
        let (status, body) = served
            .post(&answer(&call), json!({"decision": "always"}))
            .await;
        assert_eq!(status, 200, "{body}");
        until_frame(&mut live, "the removal's request", |f| {
            committed(f, "permission_requested", "rm src/math.sh")
        })
        .await;
        assert!(ws.path().join("made.txt").exists());
        let state = served.get(&format!("/sessions/{id}")).await;
        let rm = state["state"]["permission"]["call_id"]
            .as_str()
            .unwrap()
            .to_string();
        let (status, body) = served
            .post(
                &answer(&rm),
                json!({"decision": "deny", "reason": "keep the script"}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
        let frames = live.until_turn(&receipt).await;
        assert_eq!(frames.last().unwrap().json()["state"], "finished");
        assert!(ws.path().join("src/math.sh").exists(), "the denied call ran");
        let (status, body) = served
            .post(&answer(&rm), json!({"decision": "allow"}))
            .await;
        assert_eq!(status, 409, "{body}");
        assert!(
            body["error"]
                .as_str()
                .unwrap()
                .contains("no permission request waits")
        );

        // What is durable: who decided, for how long, and the model's text.
        let log = events(&served, &id);
        let grants: Vec<(DecidedBy, GrantScope)> = log
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::PermissionGranted { by, scope, .. } => Some((*by, *scope)),
                _ => None,
            })
            .collect();
        assert_eq!(
            grants,
            [
                (DecidedBy::User, GrantScope::Session),
                (DecidedBy::SessionGrant, GrantScope::Once)
            ]
        );
        assert!(log.iter().any(|e| matches!(&e.kind,
            EventKind::PermissionDenied { by: DecidedBy::User, reason, call_id, .. }
                if reason == "keep the script" && *call_id == rm)));
        assert!(log.iter().any(|e| matches!(&e.kind,
            EventKind::ToolResult(r) if r.call_id == rm && r.is_error
                && r.content.contains("denied by the user") && r.content.contains("keep the script"))));

        // Interrupting while a request waits denies it and ends the turn.
        let (_, r) = served
            .post(
                &format!("/sessions/{id}/messages"),
                json!({"text": "one more file"}),
            )
            .await;
        let receipt = r["receipt"].as_str().unwrap().to_string();
        until_frame(&mut live, "the last request", |f| {
            committed(f, "permission_requested", "touch other.txt")
        })
        .await;
        let (status, body) = served
            .post(&format!("/sessions/{id}/interrupt"), Value::Null)
            .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["stopped"], true);
        let frames = live.until_turn(&receipt).await;
        assert_eq!(frames.last().unwrap().json()["state"], "interrupted");
        assert!(!ws.path().join("other.txt").exists());
        let log = events(&served, &id);
        assert!(log.iter().any(|e| matches!(&e.kind,
            EventKind::PermissionDenied { by: DecidedBy::User, reason, subject, .. }
                if reason == "the user interrupted the turn before answering"
                    && subject == "touch other.txt")));
        assert!(matches!(
            log.last().unwrap().kind,
            EventKind::RunInterrupted { .. }
        ));
        let state = served.get(&format!("/sessions/{id}")).await;
        assert!(state["state"]["permission"].is_null(), "{state}");
        assert!(state["state"]["durable"]["permission"].is_null(), "{state}");
    });
}

#[test]
fn the_group_view_is_what_group_prints() {
    let rt = runtime();
    let ws = project();
    let provider = rt
        .block_on(FakeServer::start(Script::new(Vec::<ScriptedTurn>::new())))
        .unwrap();
    let served = serve(ws.path(), &provider, &[]);
    rt.block_on(async {
        let id = served.new_session().await;
        let (status, g) = status_of(&served, &format!("/sessions/{id}/group")).await;
        assert_eq!(status, 200, "{g}");
        assert_eq!(g["exists"], false);
        assert_eq!(g["text"], "no agent group in this session yet\n");
        let (status, _) = status_of(&served, "/sessions/nope/group").await;
        assert_eq!(status, 404);

        // A group as the supervisor commits it.
        let store = served.store();
        store
            .commit(&id, GroupEvent::Created { lead: id.clone() })
            .unwrap();
        store
            .commit(
                &id,
                GroupEvent::MemberJoined {
                    member: id.clone(),
                    role: "lead".into(),
                },
            )
            .unwrap();
        let task = store
            .commit(
                &id,
                GroupEvent::TaskCreated {
                    title: "write the parser".into(),
                    description: String::new(),
                    depends_on: vec![],
                    key: None,
                    by: id.clone(),
                },
            )
            .unwrap()
            .seq;
        store
            .commit(
                &id,
                GroupEvent::TaskClaimed {
                    task,
                    by: id.clone(),
                    epoch: None,
                },
            )
            .unwrap();

        let (_, g) = status_of(&served, &format!("/sessions/{id}/group")).await;
        assert_eq!(g["exists"], true, "{g}");
        assert_eq!(g["lead"], id.as_str());
        assert_eq!(g["members"][0]["role"], "lead");
        assert_eq!(g["members"][0]["holding"], json!([task]));
        assert_eq!(g["tasks"][0]["title"], "write the parser");
        assert_eq!(g["tasks"][0]["status"], "claimed");
        assert_eq!(g["tasks"][0]["owner"], id.as_str());
        // Exactly what `/group` prints for the session.
        let printed = present::render(&store.replay(&id).unwrap());
        assert_eq!(g["text"], printed.as_str());

        // The sidebar's GROUP block carries the same text.
        let state = served.get(&format!("/sessions/{id}")).await;
        let block = &state["state"]["durable"]["group"];
        let mut lines = printed.lines();
        assert_eq!(block["title"], lines.next().unwrap(), "{state}");
        let rest: Vec<&str> = lines.collect();
        assert_eq!(block["lines"], json!(rest));
    });
}
