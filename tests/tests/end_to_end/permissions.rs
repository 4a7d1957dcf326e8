//! The approval flow end to end, in process against the real store, the
//! embedded ContinuityEngine component, the real tools in the real sandbox
//! and the local wire-format server: ask → grant → run; ask → deny → the
//! model sees the denial as the tool result; "always" replays after resume;
//! a request left waiting is answered as denied (protocol-safe) on resume;
//! nobody to ask denies without blocking; an escalation runs outside the
//! sandbox only when granted. (The terminal prompt, `latch run` with stdin
//! closed and a SIGKILL while waiting are pinned through the binary in
//! `host/tests/cli/permissions.rs`.)

use latch::agent::permissions::INTERRUPTED_DENIAL;
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions, Decision, DecisionPort, Permissions};
use latch_engine_sdk::types::*;
use latch_kernel::{DecidedBy, EventKind, GrantScope, PermissionKind, PermissionRequest, Store};
use latch_provider::fake::{Script, ScriptStep, ScriptedTurn};
use latch_sandbox::{ApprovalMode, SandboxMode, SandboxPolicy};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use super::common::SessionRig;

/// A decision port with scripted answers that records what it was asked
/// and checks, while it waits, that the request is already durable and the
/// store is free (it reads the log).
struct Scripted {
    store: Arc<Store>,
    session: String,
    answers: Mutex<VecDeque<Decision>>,
    seen: Mutex<Vec<PermissionRequest>>,
}

impl DecisionPort for Scripted {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        let durable = self
            .store
            .events(&self.session, 0, u64::MAX, 100_000)
            .unwrap()
            .into_iter()
            .any(|e| matches!(&e.kind, EventKind::PermissionRequested(r) if r == request));
        assert!(durable, "the request commits before the user is asked");
        self.seen.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .expect("the port was asked more often than scripted")
    }
}

/// The shared session rig, with this module's agent.
struct Rig(SessionRig);

impl std::ops::Deref for Rig {
    type Target = SessionRig;
    fn deref(&self) -> &SessionRig {
        &self.0
    }
}

fn rig(script: Script) -> Rig {
    Rig(SessionRig::new("alpha\nbeta\n", |_| script))
}

impl Rig {
    fn port(&self, answers: impl IntoIterator<Item = Decision>) -> Arc<Scripted> {
        Arc::new(Scripted {
            store: self.store.clone(),
            session: self.session.id.clone(),
            answers: Mutex::new(answers.into_iter().collect()),
            seen: Mutex::new(Vec::new()),
        })
    }

    fn agent(
        &self,
        approval: ApprovalMode,
        sandbox: SandboxMode,
        port: Option<Arc<Scripted>>,
    ) -> Agent {
        self.0.agent_with(
            Box::new(StandardTools::new(self.tool_context())),
            AgentOptions {
                mode: "interactive".into(),
                permissions: Some(Permissions {
                    approval,
                    sandbox: SandboxPolicy {
                        mode: sandbox,
                        ..SandboxPolicy::default()
                    },
                    port: port.map(|p| p as Arc<dyn DecisionPort>),
                }),
                ..AgentOptions::default()
            },
        )
    }

    /// The tool results the model was sent, as (content, is_error), from
    /// the captured request bodies (Anthropic wire format).
    fn results_sent(&self) -> Vec<String> {
        let mut out = Vec::new();
        for r in self.server.requests() {
            for m in r.body["messages"].as_array().unwrap() {
                if let Some(parts) = m["content"].as_array() {
                    for p in parts {
                        if p["type"] == "tool_result" {
                            out.push(p["content"].to_string());
                        }
                    }
                }
            }
        }
        out
    }
}

fn quiet() -> impl FnMut(latch::agent::AgentEvent) + Send {
    |_| {}
}

fn position(events: &[EventKind], pred: impl Fn(&EventKind) -> bool) -> usize {
    events
        .iter()
        .position(pred)
        .expect("the expected event was committed")
}

#[test]
fn ask_grant_run_in_untrusted_mode() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"echo made > made.txt"}"#),
        ScriptedTurn::text("Made it."),
    ]));
    let port = r.port([Decision::Once]);
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.run_turn("make the file", &mut quiet()).unwrap();
    assert_eq!(
        std::fs::read_to_string(r.ws.join("made.txt")).unwrap(),
        "made\n"
    );
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].kind, PermissionKind::Command);
    assert_eq!(seen[0].command.as_deref(), Some("echo made > made.txt"));
    assert_eq!(
        (seen[0].approval.as_str(), seen[0].sandbox.as_str()),
        ("untrusted", "workspace-write")
    );
    let ev = r.events();
    let asked = position(&ev, |e| matches!(e, EventKind::PermissionRequested(_)));
    let granted = position(&ev, |e| {
        matches!(
            e,
            EventKind::PermissionGranted {
                by: DecidedBy::User,
                scope: GrantScope::Once,
                ..
            }
        )
    });
    let ran = position(
        &ev,
        |e| matches!(e, EventKind::ToolResult(t) if !t.is_error),
    );
    assert!(
        asked < granted && granted < ran,
        "requested, granted, then run"
    );
}

#[test]
fn ask_deny_and_the_model_sees_the_denial_as_the_tool_result() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"rm notes.txt"}"#),
        ScriptedTurn::text("Understood."),
    ]));
    let port = r.port([Decision::Deny(Some("keep the notes".into()))]);
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        SandboxMode::WorkspaceWrite,
        Some(port),
    );
    agent.run_turn("clean up", &mut quiet()).unwrap();
    assert!(
        r.ws.join("notes.txt").exists(),
        "the denied command never ran"
    );
    let sent = r.results_sent();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(
        sent[0].contains("denied by the user") && sent[0].contains("keep the notes"),
        "{sent:?}"
    );
    let ev = r.events();
    let denied = position(
        &ev,
        |e| matches!(e, EventKind::PermissionDenied { by: DecidedBy::User, reason, .. } if reason == "keep the notes"),
    );
    assert!(matches!(&ev[denied + 1], EventKind::ToolResult(t) if t.is_error));
}

#[test]
fn always_for_this_session_replays_after_resume() {
    let call = ScriptedTurn::tool_call("shell", r#"{"command":"echo a >> log.txt"}"#);
    let r = rig(Script::new([
        call.clone(),
        ScriptedTurn::text("Once."),
        call,
        ScriptedTurn::text("Twice."),
    ]));
    let port = r.port([Decision::Session]);
    {
        let mut agent = r.agent(
            ApprovalMode::Untrusted,
            SandboxMode::WorkspaceWrite,
            Some(port.clone()),
        );
        agent.run_turn("log once", &mut quiet()).unwrap();
    }
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionGranted { scope: GrantScope::Session, key, .. } if key == "command:echo a >> log.txt"
    )));
    // A new process: a fresh agent on the same store, and a port with no
    // answers left (asking it again would panic).
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.resume(&mut quiet()).unwrap();
    agent.run_turn("log again", &mut quiet()).unwrap();
    assert_eq!(
        std::fs::read_to_string(r.ws.join("log.txt")).unwrap(),
        "a\na\n"
    );
    assert_eq!(
        port.seen.lock().unwrap().len(),
        1,
        "asked once, replayed once"
    );
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionGranted {
            by: DecidedBy::SessionGrant,
            ..
        }
    )));
}

#[test]
fn edits_show_their_diff_and_edits_mode_asks_only_for_commands() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#),
        ScriptedTurn::tool_call(
            "edit_file",
            r#"{"path":"notes.txt","old_string":"beta","new_string":"gamma"}"#,
        ),
        ScriptedTurn::tool_call("shell", r#"{"command":"touch x"}"#),
        ScriptedTurn::text("Done."),
        ScriptedTurn::tool_call(
            "edit_file",
            r#"{"path":"notes.txt","old_string":"alpha","new_string":"one"}"#,
        ),
        ScriptedTurn::text("Edited."),
    ]));
    let port = r.port([Decision::Once, Decision::Deny(None)]);
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.run_turn("edit", &mut quiet()).unwrap();
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen[0].kind, PermissionKind::Edit);
    assert_eq!(seen[0].path.as_deref(), Some("notes.txt"));
    let diff = seen[0].diff.as_deref().unwrap();
    assert!(diff.contains("-beta\n+gamma\n"), "{diff}");
    assert!(!r.ws.join("x").exists());
    // `edits`: the edit runs without asking.
    let mut agent = r.agent(
        ApprovalMode::Edits,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.run_turn("edit again", &mut quiet()).unwrap();
    assert_eq!(port.seen.lock().unwrap().len(), 2);
    assert_eq!(
        std::fs::read_to_string(r.ws.join("notes.txt")).unwrap(),
        "one\ngamma\n"
    );
}

#[test]
fn without_anyone_to_ask_what_needs_approval_is_denied_with_a_reason() {
    let r = rig(Script::new([
        ScriptedTurn::tool_call("shell", r#"{"command":"echo x > x.txt"}"#)
            .with_tool_call("shell", r#"{"command":"ls"}"#),
        ScriptedTurn::text("Ok."),
    ]));
    let mut agent = r.agent(ApprovalMode::Untrusted, SandboxMode::WorkspaceWrite, None);
    agent.run_turn("try", &mut quiet()).unwrap();
    assert!(!r.ws.join("x.txt").exists());
    let sent = r.results_sent();
    assert!(
        sent[0].contains("needs approval") && sent[0].contains("non-interactive"),
        "{sent:?}"
    );
    assert!(
        sent[1].contains("notes.txt"),
        "the read-only allowlist needs no approval: {sent:?}"
    );
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionDenied {
            by: DecidedBy::NonInteractive,
            ..
        }
    )));
}

#[test]
fn an_escalation_runs_outside_the_sandbox_only_when_granted() {
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("out.txt");
    let inside = format!(r#"{{"command":"echo in > {}"}}"#, target.display());
    let escalated = format!(
        r#"{{"command":"echo out > {}","escalate":true,"reason":"write the shared cache"}}"#,
        target.display()
    );
    let r = rig(Script::new([
        ScriptedTurn::tool_call("shell", inside),
        ScriptedTurn::tool_call("shell", escalated.clone()),
        ScriptedTurn::text("Done."),
        ScriptedTurn::tool_call("shell", escalated),
        ScriptedTurn::text("Refused."),
    ]));
    let port = r.port([Decision::Once]);
    let mut agent = r.agent(
        ApprovalMode::OnRequest,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.run_turn("write out", &mut quiet()).unwrap();
    let sent = r.results_sent();
    assert!(
        sent[0].contains("Permission denied"),
        "inside the sandbox: {sent:?}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "out\n");
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "the sandboxed command asked nobody");
    assert_eq!(seen[0].kind, PermissionKind::Escalation);
    assert_eq!(
        seen[0].model_reason.as_deref(),
        Some("write the shared cache")
    );
    // `never` refuses every escalation without asking.
    std::fs::remove_file(&target).unwrap();
    let mut agent = r.agent(
        ApprovalMode::Never,
        SandboxMode::WorkspaceWrite,
        Some(port.clone()),
    );
    agent.run_turn("again", &mut quiet()).unwrap();
    assert!(!target.exists());
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionDenied {
            by: DecidedBy::Mode,
            ..
        }
    )));
}

#[test]
fn a_request_left_waiting_is_answered_as_denied_on_resume() {
    let r = rig(Script::new([ScriptedTurn::text("Picking up.")])
        .with_responder(|_| ScriptStep::Turn(ScriptedTurn::text("More."))));
    // What a crash while waiting leaves: the run, the call, the request.
    let call = ToolCall {
        id: "call-9".into(),
        name: "shell".into(),
        arguments_json: r#"{"command":"make"}"#.into(),
    };
    let request = PermissionRequest {
        call_id: call.id.clone(),
        tool: "shell".into(),
        kind: PermissionKind::Command,
        command: Some("make".into()),
        path: None,
        diff: None,
        reason: "approval mode `untrusted` asks".into(),
        model_reason: None,
        approval: "untrusted".into(),
        sandbox: "workspace-write".into(),
        mcp: None,
        plan: None,
    };
    r.store
        .append_batch(
            &r.session.id,
            vec![
                EventKind::RunStarted {
                    mode: "interactive".into(),
                    context: None,
                },
                EventKind::user_text("build it"),
                EventKind::AssistantMessage {
                    parts: vec![Part::ToolCall(call)],
                },
                EventKind::PermissionRequested(request),
            ],
        )
        .unwrap();
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        SandboxMode::WorkspaceWrite,
        Some(r.port([])),
    );
    agent.resume(&mut quiet()).unwrap();
    let ev = r.events();
    let denied = position(
        &ev,
        |e| matches!(e, EventKind::PermissionDenied { by: DecidedBy::Interrupted, call_id, .. } if call_id == "call-9"),
    );
    assert!(matches!(&ev[denied + 1], EventKind::ToolResult(t)
        if t.call_id == "call-9" && t.is_error && t.content == INTERRUPTED_DENIAL));
    // The next request is protocol-valid (the server checks like the real
    // services) and carries the denial.
    agent.run_turn("go on", &mut quiet()).unwrap();
    assert!(
        r.results_sent()
            .iter()
            .any(|s| s.contains("when Latch stopped"))
    );
}
