//! `latch acp` driven by a scripted Agent Client Protocol client over
//! stdio, against the local provider server: an editor creates a session,
//! prompts it, sees the answer stream, the tool calls with the edit's diff
//! and files, answers permission requests (allow and deny), cancels a turn
//! waiting on one, is refused a session another driver holds, and after a
//! restart loads the session with its conversation replayed from the store.

use super::{at, latch, project, runtime};
use latch_kernel::{DecidedBy, EventKind, Store};
use latch_provider::fake::{FakeServer, Script, ScriptStep, ScriptedTurn};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

/// The editor's side of one `latch acp` process.
struct Editor {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Value>,
    next_id: u64,
    /// Every message received, in order.
    seen: Vec<Value>,
}

const WAIT: Duration = Duration::from_secs(60);

impl Editor {
    fn start(ws: &Path, server: &FakeServer) -> Editor {
        Editor::start_with(ws, server, "edits")
    }

    fn start_with(ws: &Path, server: &FakeServer, approval: &str) -> Editor {
        let mut child = latch(ws)
            .args(at(server))
            .args(["--approval", approval, "acp"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let value: Value = serde_json::from_str(&line).unwrap_or_else(|e| {
                    panic!("latch acp wrote a line that is not JSON ({e}): {line}")
                });
                if tx.send(value).is_err() {
                    break;
                }
            }
        });
        Editor {
            stdin: child.stdin.take(),
            child,
            lines,
            next_id: 1,
            seen: Vec::new(),
        }
    }

    fn send(&mut self, message: Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    fn request(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}));
        id
    }

    /// The next message matching `pred` (every message on the way is kept
    /// in `seen`).
    fn until(&mut self, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).unwrap_or_else(|_| {
                panic!(
                    "no {what} within {WAIT:?}; received:\n{}",
                    self.seen
                        .iter()
                        .map(|m| m.to_string())
                        .collect::<Vec<_>>()
                        .join("\n")
                )
            });
            self.seen.push(message.clone());
            if pred(&message) {
                return message;
            }
        }
    }

    fn response(&mut self, id: u64) -> Value {
        self.until(&format!("response to request {id}"), |m| {
            m["id"] == json!(id) && m.get("method").is_none()
        })
    }

    fn permission_request(&mut self) -> Value {
        self.until("session/request_permission", |m| {
            m["method"] == "session/request_permission"
        })
    }

    fn answer(&mut self, request: &Value, option: &str) {
        let id = request["id"].clone();
        self.send(json!({"jsonrpc":"2.0","id":id,
            "result":{"outcome":{"outcome":"selected","optionId":option}}}));
    }

    /// The `session/update`s seen so far, their `update` objects.
    fn updates(&self) -> Vec<Value> {
        self.seen
            .iter()
            .filter(|m| m["method"] == "session/update")
            .map(|m| m["params"]["update"].clone())
            .collect()
    }

    /// Close the connection; the process ends with status 0.
    fn close(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "latch acp exited with {status}");
                return;
            }
            assert!(Instant::now() < deadline, "latch acp did not exit at EOF");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Editor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/math.sh"}"#),
        ScriptedTurn::text("Fixing the operator.").with_tool_call(
            "edit_file",
            r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
        ),
        ScriptedTurn::tool_call("shell", r#"{"command":"sh test.sh > allowed.txt"}"#),
        ScriptedTurn::text("Fixed and checked."),
        // The second prompt: a command the user denies.
        ScriptedTurn::tool_call("shell", r#"{"command":"echo no > denied.txt"}"#),
        ScriptedTurn::text("Understood, not writing it."),
        // The third: a command whose request is still waiting when the
        // editor cancels the turn.
        ScriptedTurn::tool_call("shell", r#"{"command":"echo late > cancelled.txt"}"#),
        // After the restart: a plain answer, then (in mode `never`) a
        // command that runs unasked.
        ScriptedTurn::text("Nothing else."),
        ScriptedTurn::tool_call("shell", r#"{"command":"echo free > free.txt"}"#),
        ScriptedTurn::text("Written."),
    ])
    .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Nothing else.")))
}

fn text_prompt(session: &str, text: &str) -> Value {
    json!({"sessionId": session, "prompt": [{"type":"text","text": text}]})
}

fn events(ws: &Path, session: &str) -> Vec<EventKind> {
    let store = Store::open(latch_kernel::default_store_path(ws)).unwrap();
    store
        .events(session, 0, u64::MAX, 100_000)
        .unwrap()
        .into_iter()
        .map(|e| e.kind)
        .collect()
}

#[test]
fn an_editor_drives_a_durable_session_over_acp() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script())).unwrap();
    let ws = project();
    let cwd = ws.path().canonicalize().unwrap();
    let mut editor = Editor::start(ws.path(), &server);

    let init = editor.request(
        "initialize",
        json!({"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":false,"writeTextFile":false}}}),
    );
    let init = editor.response(init);
    assert_eq!(init["result"]["protocolVersion"], 1, "{init}");
    assert_eq!(init["result"]["agentCapabilities"]["loadSession"], true);

    let new = editor.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let new = editor.response(new);
    let session = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("no session id: {new}"))
        .to_string();
    // The approval modes are the session's modes, `--approval` the current.
    assert_eq!(new["result"]["modes"]["currentModeId"], "edits", "{new}");
    let offered: Vec<&str> = new["result"]["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(
        offered,
        ["never", "on-request", "untrusted", "edits", "plan"]
    );

    // 1. A turn with a read, an edit (allowed by `edits`) and a command the
    // editor's user allows.
    let prompt = editor.request("session/prompt", text_prompt(&session, "make add add"));
    let ask = editor.permission_request();
    assert_eq!(ask["params"]["sessionId"], json!(session));
    let title = ask["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.contains("sh test.sh > allowed.txt"), "{ask}");
    let kinds: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["allow_once", "allow_always", "reject_once"]);
    editor.answer(&ask, "allow_once");
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("allowed.txt")).unwrap(),
        "ok\n",
        "the allowed command ran after the fix"
    );

    let updates = editor.updates();
    let text: String = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap_or(""))
        .collect();
    assert!(text.contains("Fixing the operator."), "{text}");
    assert!(text.contains("Fixed and checked."), "{text}");
    let calls: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call")
        .collect();
    let edit = calls
        .iter()
        .find(|c| c["kind"] == "edit")
        .unwrap_or_else(|| panic!("no edit tool call in {updates:?}"));
    assert_eq!(edit["title"], "Edit src/math.sh");
    let math = cwd.join("src/math.sh");
    assert_eq!(
        edit["content"][0],
        json!({"type":"diff","path": math, "oldText":"$1 - $2","newText":"$1 + $2"})
    );
    assert_eq!(edit["locations"][0]["path"], json!(math));
    let read = calls.iter().find(|c| c["kind"] == "read").unwrap();
    assert_eq!(read["locations"][0]["path"], json!(math));
    let shell = calls.iter().find(|c| c["kind"] == "execute").unwrap();
    let finished = |id: &Value| {
        updates
            .iter()
            .filter(|u| u["sessionUpdate"] == "tool_call_update" && &u["toolCallId"] == id)
            .filter_map(|u| u["status"].as_str())
            .next_back()
            .map(str::to_string)
    };
    assert_eq!(finished(&edit["toolCallId"]).as_deref(), Some("completed"));
    assert_eq!(finished(&shell["toolCallId"]).as_deref(), Some("completed"));

    // 2. A command the user denies: it never runs, its call fails, the
    // model is told.
    let prompt = editor.request("session/prompt", text_prompt(&session, "now write no"));
    let ask = editor.permission_request();
    editor.answer(&ask, "reject_once");
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(!ws.path().join("denied.txt").exists());
    let denied_id = ask["params"]["toolCall"]["toolCallId"].clone();
    let status = editor
        .updates()
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["toolCallId"] == denied_id)
        .filter_map(|u| u["status"].as_str().map(str::to_string))
        .next_back();
    assert_eq!(status.as_deref(), Some("failed"));

    // 3. Cancelled while a request waits: the turn ends `cancelled` at
    // once, the command never runs.
    let prompt = editor.request("session/prompt", text_prompt(&session, "write late"));
    let _ask = editor.permission_request();
    let cancelled_at = Instant::now();
    editor.send(json!({"jsonrpc":"2.0","method":"session/cancel","params":{"sessionId": session}}));
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "cancelled", "{done}");
    assert!(cancelled_at.elapsed() < Duration::from_secs(10));
    assert!(!ws.path().join("cancelled.txt").exists());

    // One driver per session: a second editor process is refused with who
    // holds it.
    let mut second = Editor::start(ws.path(), &server);
    let load = second.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let refused = second.response(load);
    let message = refused["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("acp"), "{refused}");
    second.close();

    editor.close();

    // Durable: the decisions are in the store as the user's.
    let log = events(ws.path(), &session);
    assert!(log.iter().any(|e| matches!(
        e,
        EventKind::PermissionGranted {
            by: DecidedBy::User,
            ..
        }
    )));
    assert!(log.iter().any(|e| matches!(
        e,
        EventKind::PermissionDenied {
            by: DecidedBy::User,
            ..
        }
    )));

    // A restarted editor loads the session: the conversation is replayed.
    let mut editor = Editor::start(ws.path(), &server);
    let load = editor.request(
        "session/load",
        json!({"sessionId": session, "cwd": cwd, "mcpServers": []}),
    );
    let loaded = editor.response(load);
    assert!(loaded.get("error").is_none(), "{loaded}");
    let replay = editor.updates();
    let said: Vec<&str> = replay
        .iter()
        .filter(|u| u["sessionUpdate"] == "user_message_chunk")
        .map(|u| u["content"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(said, ["make add add", "now write no", "write late"]);
    let replayed_edit = replay
        .iter()
        .find(|u| u["sessionUpdate"] == "tool_call" && u["kind"] == "edit")
        .unwrap_or_else(|| panic!("the edit is not replayed: {replay:?}"));
    assert_eq!(replayed_edit["toolCallId"], edit["toolCallId"]);
    assert_eq!(replayed_edit["content"], edit["content"]);
    assert_eq!(loaded["result"]["modes"]["currentModeId"], "edits");
    // It can go on.
    let prompt = editor.request("session/prompt", text_prompt(&session, "anything else?"));
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");

    // The editor's mode picker: an unknown mode is refused, `never` runs
    // the command unasked, and the change is durable.
    let bad = editor.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "yolo"}),
    );
    let bad = editor.response(bad);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("yolo"),
        "{bad}"
    );
    let set = editor.request(
        "session/set_mode",
        json!({"sessionId": session, "modeId": "never"}),
    );
    let set = editor.response(set);
    assert!(set.get("error").is_none(), "{set}");
    let asked_before = editor
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count();
    let prompt = editor.request("session/prompt", text_prompt(&session, "write free"));
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let asked_after = editor
        .seen
        .iter()
        .filter(|m| m["method"] == "session/request_permission")
        .count();
    assert_eq!(asked_before, asked_after, "mode `never` asked");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("free.txt")).unwrap(),
        "free\n"
    );
    editor.close();
    let profile = Store::open(latch_kernel::default_store_path(ws.path()))
        .unwrap()
        .session_profile(&session)
        .unwrap()
        .unwrap();
    assert_eq!(profile.approval, "never");
    assert!(
        profile
            .changes
            .iter()
            .any(|c| c.setting == "approval" && c.by.contains("session/set_mode")),
        "{profile:?}"
    );
}

#[test]
fn protocol_mistakes_get_errors_that_say_what_to_do() {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(script())).unwrap();
    let ws = project();
    let mut editor = Editor::start(ws.path(), &server);
    editor.send(json!("not an object"));
    let bad = editor.until("an error for a non-object", |m| m.get("error").is_some());
    assert_eq!(bad["error"]["code"], -32600, "{bad}");
    let relative = editor.request("session/new", json!({"cwd": "repo", "mcpServers": []}));
    let relative = editor.response(relative);
    assert!(
        relative["error"]["message"]
            .as_str()
            .unwrap()
            .contains("absolute"),
        "{relative}"
    );
    let unknown = editor.request(
        "session/prompt",
        json!({"sessionId":"nope","prompt":[{"type":"text","text":"hi"}]}),
    );
    let unknown = editor.response(unknown);
    assert!(
        unknown["error"]["message"]
            .as_str()
            .unwrap()
            .contains("session/new"),
        "{unknown}"
    );
    let missing = editor.request(
        "session/load",
        json!({"sessionId":"zzzz","cwd": ws.path().canonicalize().unwrap(),"mcpServers":[]}),
    );
    let missing = editor.response(missing);
    assert_eq!(missing["error"]["code"], -32002, "{missing}");
    let nope = editor.request("session/set_model", json!({}));
    let nope = editor.response(nope);
    assert_eq!(nope["error"]["code"], -32601, "{nope}");
    editor.close();
}

#[test]
fn the_editors_mcp_servers_are_the_sessions_tools() {
    let rt = runtime();
    let script = Script::new([
        ScriptedTurn::tool_call("mcp__everything__echo", r#"{"message":"from the editor"}"#),
        ScriptedTurn::text("Echoed."),
    ]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let cwd = ws.path().canonicalize().unwrap();
    let mut editor = Editor::start_with(ws.path(), &server, "on-request");
    let everything = super::skills_mcp::npm_server("server-everything");
    let new = editor.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"name": "everything", "command": "node",
            "args": [everything, "stdio"], "env": [{"name": "LATCH_FROM", "value": "editor"}]}]}),
    );
    let new = editor.response(new);
    let session = new["result"]["sessionId"]
        .as_str()
        .unwrap_or_else(|| panic!("{new}"))
        .to_string();
    let prompt = editor.request("session/prompt", text_prompt(&session, "echo it"));
    // Whatever the approval mode asks about this tool is allowed.
    let done = loop {
        let m = editor.until("the turn's end or a permission request", |m| {
            m["id"] == json!(prompt) || m["method"] == "session/request_permission"
        });
        if m["method"] == "session/request_permission" {
            editor.answer(&m, "allow_once");
            continue;
        }
        break m;
    };
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let output: String = editor
        .updates()
        .iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "completed")
        .map(|u| u["content"].to_string())
        .collect();
    assert!(output.contains("Echo: from the editor"), "{output}");
    // The model was offered the editor's server's tools.
    let offered = server.requests().last().unwrap().body.to_string();
    assert!(offered.contains("mcp__everything__echo"), "{offered}");

    // A transport Latch does not speak is refused with the reason.
    let sse = editor.request(
        "session/new",
        json!({"cwd": cwd, "mcpServers": [{"name": "s", "type": "sse", "url": "http://127.0.0.1:9/sse", "headers": []}]}),
    );
    let sse = editor.response(sse);
    assert!(
        sse["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("sse"),
        "{sse}"
    );
    editor.close();
}

/// A PNG header as small as a model provider accepts in a test: the
/// signature and an IHDR chunk of a 2x1 image.
fn tiny_png() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    png.extend_from_slice(&13u32.to_be_bytes());
    png.extend_from_slice(b"IHDR");
    png.extend_from_slice(&2u32.to_be_bytes());
    png.extend_from_slice(&1u32.to_be_bytes());
    png.extend_from_slice(&[8, 6, 0, 0, 0, 0, 0, 0, 0]);
    png
}

#[test]
fn an_image_in_the_prompt_reaches_the_model_and_a_bad_one_is_refused() {
    use base64::Engine as _;
    let rt = runtime();
    let script = Script::new([ScriptedTurn::text("A tiny picture.")]);
    let server = rt.block_on(FakeServer::start(script)).unwrap();
    let ws = project();
    let cwd = ws.path().canonicalize().unwrap();
    let mut editor = Editor::start(ws.path(), &server);
    let init = editor.request("initialize", json!({"protocolVersion": 1}));
    let init = editor.response(init);
    assert_eq!(
        init["result"]["agentCapabilities"]["promptCapabilities"]["image"],
        true
    );
    let new = editor.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let session = editor.response(new)["result"]["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let data = base64::engine::general_purpose::STANDARD.encode(tiny_png());
    let bad = editor.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type":"text","text":"look"},
            {"type":"image","mimeType":"image/png","data": base64::engine::general_purpose::STANDARD.encode(b"not an image")}]}),
    );
    let bad = editor.response(bad);
    assert!(
        bad["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("not a PNG"),
        "{bad}"
    );
    assert!(
        server.requests().is_empty(),
        "a refused prompt reached the model"
    );
    let prompt = editor.request(
        "session/prompt",
        json!({"sessionId": session, "prompt": [{"type":"text","text":"what is this?"},
            {"type":"image","mimeType":"image/png","data": data}]}),
    );
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    let sent = server.requests().last().unwrap().body.to_string();
    assert!(
        sent.contains(&data),
        "the image's bytes were not sent: {sent}"
    );
    editor.close();
    // Durable: the user's message holds the image by reference.
    let log = events(ws.path(), &session);
    assert!(log.iter().any(|e| matches!(e, EventKind::UserMessage { parts }
        if parts.iter().any(|p| matches!(p, latch_engine_sdk::types::Part::Image(m) if m.width == Some(2))))));
}

/// The calls plan mode must refuse, then (after the plan is approved) run:
/// a new file, an edit and a command that writes.
pub(crate) const WRITES: [(&str, &str); 3] = [
    ("write_file", r#"{"path":"new.txt","content":"x\n"}"#),
    (
        "edit_file",
        r#"{"path":"src/math.sh","old_string":"$1 - $2","new_string":"$1 + $2"}"#,
    ),
    ("shell", r#"{"command":"echo x > f"}"#),
];

/// The plan the scripted model proposes.
pub(crate) const PLAN: &str =
    "Make add add.\n\n1. Write new.txt\n2. Fix the operator in src/math.sh\n3. Write f";

/// A model that reads, tries the three writes, proposes the plan and, once
/// it is approved, makes the same three calls and ticks the first step.
pub(crate) fn plan_script() -> Script {
    let mut turns = vec![ScriptedTurn::tool_call(
        "read_file",
        r#"{"path":"src/math.sh"}"#,
    )];
    turns.extend(WRITES.iter().map(|(t, a)| ScriptedTurn::tool_call(*t, *a)));
    turns.push(ScriptedTurn::tool_call(
        "propose_plan",
        json!({ "plan": PLAN }).to_string(),
    ));
    turns.extend(WRITES.iter().map(|(t, a)| ScriptedTurn::tool_call(*t, *a)));
    turns.push(ScriptedTurn::tool_call(
        "complete_action",
        r#"{"text":"Write new.txt"}"#,
    ));
    turns.push(ScriptedTurn::text("Done as planned."));
    Script::new(turns).with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("Nothing else.")))
}

/// True when the workspace is as `project()` made it (plus Latch's own
/// directory).
pub(crate) fn untouched(ws: &Path) -> bool {
    !ws.join("new.txt").exists()
        && !ws.join("f").exists()
        && std::fs::read_to_string(ws.join("src/math.sh")).unwrap()
            == "add() {\n  echo $(( $1 - $2 ))\n}\n"
}

/// True when the three writes happened.
pub(crate) fn written(ws: &Path) -> bool {
    std::fs::read_to_string(ws.join("new.txt")).ok().as_deref() == Some("x\n")
        && std::fs::read_to_string(ws.join("f")).ok().as_deref() == Some("x\n")
        && std::fs::read_to_string(ws.join("src/math.sh"))
            .unwrap()
            .contains("$1 + $2")
}

#[test]
fn plan_mode_over_acp_refuses_writes_until_the_plan_is_approved() {
    plan_mode_over_acp(false);
}

/// The same, with plan mode entered through the session's `mode` config
/// option (the protocol's preferred form), which an approved plan updates.
#[test]
fn plan_mode_over_acp_config_options() {
    plan_mode_over_acp(true);
}

fn plan_mode_over_acp(via_config_option: bool) {
    let rt = runtime();
    let server = rt.block_on(FakeServer::start(plan_script())).unwrap();
    let ws = project();
    let cwd = ws.path().canonicalize().unwrap();
    let mut editor = Editor::start_with(ws.path(), &server, "untrusted");
    let init = editor.request("initialize", json!({"protocolVersion":1}));
    editor.response(init);
    let new = editor.request("session/new", json!({"cwd": cwd, "mcpServers": []}));
    let new = editor.response(new);
    let session = new["result"]["sessionId"].as_str().unwrap().to_string();
    let offered: Vec<&str> = new["result"]["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert!(offered.contains(&"plan"), "{new}");

    let option = &new["result"]["configOptions"][0];
    assert_eq!(option["id"], "mode", "{new}");
    assert_eq!(option["currentValue"], "untrusted", "{new}");
    assert!(
        option["options"]
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["value"] == "plan"),
        "{new}"
    );
    // The editor's mode picker enters plan mode.
    if via_config_option {
        let set = editor.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "mode", "value": "plan"}),
        );
        let set = editor.response(set);
        assert_eq!(
            set["result"]["configOptions"][0]["currentValue"], "plan",
            "{set}"
        );
        let bad = editor.request(
            "session/set_config_option",
            json!({"sessionId": session, "configId": "model", "value": "x"}),
        );
        let bad = editor.response(bad);
        assert!(
            bad["error"]["message"]
                .as_str()
                .unwrap()
                .contains("no config option `model`"),
            "{bad}"
        );
    } else {
        let set = editor.request(
            "session/set_mode",
            json!({"sessionId": session, "modeId": "plan"}),
        );
        let set = editor.response(set);
        assert!(set.get("error").is_none(), "{set}");
    }

    let prompt = editor.request("session/prompt", text_prompt(&session, "make add add"));
    // `untrusted` still asks before the command; allowed, it runs in the
    // read-only sandbox and writes nothing.
    let ask = editor.permission_request();
    let title = ask["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.contains("echo x > f"), "{ask}");
    assert!(untouched(ws.path()));
    editor.answer(&ask, "allow_once");
    // The plan comes as a request to approve; nothing was written before.
    let ask = editor.permission_request();
    assert!(
        untouched(ws.path()),
        "plan mode let a write through before the plan was approved"
    );
    let title = ask["params"]["toolCall"]["title"].as_str().unwrap();
    assert!(title.contains("2. Fix the operator"), "{ask}");
    let options: Vec<&str> = ask["params"]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["optionId"].as_str().unwrap())
        .collect();
    assert_eq!(
        options,
        [
            "plan_edits",
            "plan_on-request",
            "plan_untrusted",
            "reject_once"
        ]
    );
    // The three refused calls failed, each telling the model why.
    let refused: Vec<Value> = editor
        .updates()
        .into_iter()
        .filter(|u| u["sessionUpdate"] == "tool_call_update" && u["status"] == "failed")
        .collect();
    assert_eq!(
        refused.len(),
        3,
        "write_file, edit_file and the command: {refused:?}"
    );
    editor.answer(&ask, "plan_on-request");
    let done = editor.response(prompt);
    assert_eq!(done["result"]["stopReason"], "end_turn", "{done}");
    assert!(written(ws.path()), "the approved calls did not all run");

    let updates = editor.updates();
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "current_mode_update"
                && u["currentModeId"] == "on-request"),
        "{updates:?}"
    );
    assert!(
        updates
            .iter()
            .any(|u| u["sessionUpdate"] == "config_option_update"
                && u["configOptions"][0]["currentValue"] == "on-request"),
        "{updates:?}"
    );
    let plans: Vec<&Value> = updates
        .iter()
        .filter(|u| u["sessionUpdate"] == "plan")
        .collect();
    let last = plans
        .last()
        .unwrap_or_else(|| panic!("no plan update: {updates:?}"));
    let entries: Vec<(&str, &str)> = last["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["content"].as_str().unwrap(),
                e["status"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        entries,
        [
            ("Write new.txt", "completed"),
            ("Fix the operator in src/math.sh", "pending"),
            ("Write f", "pending")
        ]
    );
    // What the model read: the refusals and the read-only note.
    let requests = server.requests();
    let seen = serde_json::to_string(&requests.last().unwrap().body).unwrap();
    assert!(
        seen.contains("[plan mode] `write_file` was not run"),
        "{seen}"
    );
    assert!(seen.contains("read-only sandbox"), "{seen}");
    assert!(seen.contains("The user approved the plan"), "{seen}");
    editor.close();
}
