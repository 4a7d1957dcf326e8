//! MCP tools obey the approval mode, end to end: the agent loop against
//! the local wire-format server over real HTTP, the real store, the
//! embedded ContinuityEngine and the real `server-filesystem` from npm.
//! A tool not annotated read-only is asked about under `untrusted` exactly
//! like a command (the request names the server, the tool and the
//! arguments); a read-only one never is; "always" covers that tool for the
//! session, also after a resume; `never` denies what would need asking
//! (a server running outside the sandbox); a user's denial runs nothing;
//! a server confined in the session's sandbox runs its tools under
//! `on-request` as a sandboxed command would.

use latch::agent::extended::ExtendedTools;
use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentOptions, Decision, DecisionPort, Permissions};
use latch_engine_sdk::types::*;
use latch_kernel::{DecidedBy, EventKind, PermissionKind, PermissionRequest};
use latch_mcp::{McpConfig, McpServers, McpTools};
use latch_provider::fake::{Script, ScriptedTurn};
use latch_sandbox::{ApprovalMode, Sandbox, SandboxMode, SandboxPolicy};
use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use super::common::SessionRig;
use super::mcp::{node, npm_server};

/// Answers in order and records what it was asked.
#[derive(Default)]
struct Answers {
    answers: Mutex<VecDeque<Decision>>,
    seen: Mutex<Vec<PermissionRequest>>,
}

impl DecisionPort for Answers {
    fn decide(&self, request: &PermissionRequest) -> Decision {
        self.seen.lock().unwrap().push(request.clone());
        self.answers
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or_else(|| panic!("asked more often than scripted: {request:?}"))
    }
}

fn answers(list: impl IntoIterator<Item = Decision>) -> Arc<Answers> {
    Arc::new(Answers {
        answers: Mutex::new(list.into_iter().collect()),
        seen: Mutex::default(),
    })
}

/// The shared session rig, with this module's agent.
struct Rig(SessionRig);

impl std::ops::Deref for Rig {
    type Target = SessionRig;
    fn deref(&self) -> &SessionRig {
        &self.0
    }
}

/// A workspace, the scripted model answering what `turns` makes of the
/// workspace's path, a session.
fn rig(turns: impl FnOnce(&Path) -> Vec<ScriptedTurn>) -> Rig {
    Rig(SessionRig::new("alpha\n", |ws| Script::new(turns(ws))))
}

impl Rig {
    /// An agent with the `fs` server (serving the workspace; confined in
    /// `server_sandbox` when given, else an ordinary program, the default).
    fn agent(
        &self,
        approval: ApprovalMode,
        server_sandbox: Option<SandboxMode>,
        port: Option<Arc<Answers>>,
    ) -> Agent {
        let mut fs = node(
            npm_server("server-filesystem"),
            &[self.ws.to_str().unwrap()],
        );
        fs.sandbox = server_sandbox;
        let config = McpConfig {
            servers: [("fs".to_string(), fs)].into_iter().collect(),
        };
        let session_sandbox = Sandbox::new(SandboxPolicy::default(), &self.ws, &self.session.id)
            .expect("this machine enforces the default sandbox");
        let servers = McpServers::start(&config, &self.ws, &session_sandbox).unwrap();
        assert!(
            servers.start_failures().is_empty(),
            "{:?}",
            servers.start_failures()
        );
        let mcp = McpTools::new(servers, self.store.clone(), self.session.id.clone()).unwrap();
        let tools = ExtendedTools::new(
            Box::new(StandardTools::new(self.tool_context())),
            vec![],
            self.session.model.estimator,
            Some(mcp),
        );
        self.0.agent_with(
            Box::new(tools),
            AgentOptions {
                mode: "interactive".into(),
                max_tokens: 4_096,
                permissions: Some(Permissions {
                    approval,
                    sandbox: SandboxPolicy::default(),
                    port: port.map(|p| p as Arc<dyn DecisionPort>),
                }),
                ..AgentOptions::default()
            },
        )
    }

    /// The result the model was sent for the call named `tool`, last first.
    fn last_result(&self, tool: &str) -> ToolResult {
        self.events()
            .into_iter()
            .rev()
            .find_map(|e| match e {
                EventKind::ToolResult(r) if r.name == tool => Some(r),
                _ => None,
            })
            .unwrap_or_else(|| panic!("no result of {tool}"))
    }
}

fn write(path: &std::path::Path, content: &str) -> ScriptedTurn {
    ScriptedTurn::tool_call(
        "mcp__fs__write_file",
        serde_json::json!({ "path": path, "content": content }).to_string(),
    )
}

#[test]
fn untrusted_asks_before_an_mcp_tool_with_its_server_tool_and_arguments_and_always_covers_it() {
    let r = rig(|ws| {
        vec![
            ScriptedTurn::tool_call(
                "mcp__fs__read_text_file",
                serde_json::json!({ "path": ws.join("notes.txt") }).to_string(),
            ),
            write(&ws.join("a.txt"), "first"),
            ScriptedTurn::text("Wrote a."),
            write(&ws.join("b.txt"), "second"),
            ScriptedTurn::text("Wrote b."),
            write(&ws.join("c.txt"), "third"),
            ScriptedTurn::text("Wrote c."),
        ]
    });
    let ws = &r.ws;
    // The server is confined in the session's sandbox: its write is a
    // command inside it, which `untrusted` asks about.
    let port = answers([Decision::Session]);
    let mut agent = r.agent(
        ApprovalMode::Untrusted,
        Some(SandboxMode::WorkspaceWrite),
        Some(port.clone()),
    );
    agent.run_turn("write a", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("a.txt")).unwrap(), "first");
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1, "only the write was asked about: {seen:?}");
    let asked = &seen[0];
    assert_eq!(asked.kind, PermissionKind::McpTool);
    let mcp = asked.mcp.as_ref().expect("the request names the MCP call");
    assert_eq!(
        (mcp.server.as_str(), mcp.tool.as_str()),
        ("fs", "write_file")
    );
    assert!(
        mcp.arguments.contains("a.txt") && mcp.arguments.contains("first"),
        "{}",
        mcp.arguments
    );
    assert!(asked.reason.contains("untrusted"), "{}", asked.reason);
    assert_eq!(asked.subject(), "fs/write_file");
    // The read-only tool ran without a request.
    let requests: Vec<String> = r
        .events()
        .iter()
        .filter_map(|e| match e {
            EventKind::PermissionRequested(p) => Some(p.tool.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(requests, ["mcp__fs__write_file"]);
    assert!(!r.last_result("mcp__fs__read_text_file").is_error);

    // "Always" covers the tool, with other arguments, without asking.
    agent.run_turn("write b", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("b.txt")).unwrap(), "second");
    assert_eq!(port.seen.lock().unwrap().len(), 1, "not asked again");
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionGranted { by: DecidedBy::SessionGrant, tool, .. }
            if tool == "mcp__fs__write_file"
    )));
    drop(agent);
    // ... and after a resume, by a new agent on the same session.
    let mut resumed = r.agent(
        ApprovalMode::Untrusted,
        Some(SandboxMode::WorkspaceWrite),
        Some(answers([])),
    );
    resumed.resume(&mut |_| {}).unwrap();
    resumed.run_turn("write c", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(ws.join("c.txt")).unwrap(), "third");
}

#[test]
fn never_denies_an_mcp_tool_that_needs_asking_and_a_denial_runs_nothing() {
    // `never`, the server an ordinary program (the default): its write
    // acts outside the sandbox, which would need asking: denied unasked.
    let r = rig(|ws| {
        vec![
            write(&ws.join("never.txt"), "x"),
            ScriptedTurn::text("Denied."),
        ]
    });
    let mut agent = r.agent(ApprovalMode::Never, None, Some(answers([])));
    agent.run_turn("write it", &mut |_| {}).unwrap();
    assert!(!r.ws.join("never.txt").exists(), "a denied call never runs");
    let result = r.last_result("mcp__fs__write_file");
    assert!(
        result.is_error
            && result.content.contains("approval mode `never`")
            && result.content.contains("MCP server `fs` runs outside")
            && result.content.contains("[mcp.servers.fs]"),
        "{}",
        result.content
    );
    assert!(r.events().iter().any(|e| matches!(
        e,
        EventKind::PermissionDenied { by: DecidedBy::Mode, tool, .. }
            if tool == "mcp__fs__write_file"
    )));
    drop(agent);

    // `on-request`, unconfined: asked; the user's denial runs nothing and
    // the model reads the reason.
    let r = rig(|ws| {
        vec![
            write(&ws.join("denied.txt"), "x"),
            ScriptedTurn::text("Understood."),
        ]
    });
    let port = answers([Decision::Deny(Some("not in this repo".into()))]);
    let mut agent = r.agent(ApprovalMode::OnRequest, None, Some(port.clone()));
    agent.run_turn("write it", &mut |_| {}).unwrap();
    let seen = port.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert!(
        seen[0]
            .reason
            .contains("runs outside the `workspace-write` sandbox"),
        "{}",
        seen[0].reason
    );
    assert!(
        !r.ws.join("denied.txt").exists(),
        "a denied call never runs"
    );
    let result = r.last_result("mcp__fs__write_file");
    assert!(
        result.is_error && result.content.contains("not in this repo"),
        "{}",
        result.content
    );
}

#[test]
fn a_server_confined_in_the_session_sandbox_runs_its_tools_as_commands_under_on_request() {
    let r = rig(|ws| {
        vec![
            write(&ws.join("confined.txt"), "inside"),
            ScriptedTurn::text("Wrote it."),
        ]
    });
    // Asking would panic: nothing is scripted.
    let mut agent = r.agent(
        ApprovalMode::OnRequest,
        Some(SandboxMode::WorkspaceWrite),
        Some(answers([])),
    );
    agent.run_turn("write it", &mut |_| {}).unwrap();
    assert_eq!(
        std::fs::read_to_string(r.ws.join("confined.txt")).unwrap(),
        "inside"
    );
}
