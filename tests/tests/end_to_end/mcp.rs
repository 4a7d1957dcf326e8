//! MCP tools from real npm servers (`server-everything` and
//! `server-filesystem`, installed by `.ci/run` into `.ci/cache/npm`)
//! through the agent loop, on the real store, the embedded ContinuityEngine
//! and the local wire-format server: an echo and a file write end to end,
//! the write's possible mutation committed before it runs (staling a
//! passed validation), and a server killed mid-session: its schemas stay,
//! the next request's tool prefix is byte-identical and the call fails
//! clearly. The agent runs in the default command sandbox
//! (`workspace-write`, network off) and the servers are confined in it by
//! their own `sandbox = "workspace-write"`, and the session's temp dir is
//! gone when the agent shuts down.

use latch::agent::extended::ExtendedTools;
use latch::agent::tools::StandardTools;
use latch::agent::{AgentOptions, Permissions};
use latch::cli::mcp_cmd::tool_tokens_by_server;
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, Store};
use latch_mcp::{McpConfig, McpServers, McpTools, ServerConfig};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_sandbox::{ApprovalMode, Sandbox, SandboxPolicy};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::common::scripted_agent;

/// The entry script of an npm MCP server package; a missing package fails
/// loudly (CI installs them with `.ci/run`).
pub(super) fn npm_server(package: &str) -> PathBuf {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../.ci/cache/npm/node_modules/@modelcontextprotocol")
        .join(package)
        .join("dist/index.js");
    assert!(
        script.is_file(),
        "the MCP test server {package} is not installed at {}: run `bash .ci/run` once, or \
         `npm install --prefix .ci/cache/npm @modelcontextprotocol/{package}@2026.8.31`",
        script.display()
    );
    script
}

pub(super) fn node(script: PathBuf, args: &[&str]) -> ServerConfig {
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    ServerConfig {
        command: Some("node".into()),
        args: all,
        enabled: true,
        ..Default::default()
    }
}

/// Both servers confined in the session's sandbox (`sandbox =
/// "workspace-write"`), so the filesystem server's write is a sandboxed
/// command that a non-interactive `on-request` run allows.
fn config(allowed: &Path) -> McpConfig {
    let confined = |mut s: ServerConfig| {
        s.sandbox = Some(latch_sandbox::SandboxMode::WorkspaceWrite);
        s
    };
    McpConfig {
        servers: [
            (
                "everything".to_string(),
                confined(node(npm_server("server-everything"), &["stdio"])),
            ),
            (
                "fs".to_string(),
                confined(node(
                    npm_server("server-filesystem"),
                    &[allowed.to_str().unwrap()],
                )),
            ),
        ]
        .into_iter()
        .collect(),
    }
}

#[test]
fn mcp_tools_run_through_the_loop_commit_mutations_first_and_survive_a_killed_server() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let allowed = ws.join("allowed");
    std::fs::create_dir_all(&allowed).unwrap();
    let target = allowed.join("note.txt");
    let write_args = serde_json::json!({"path": target, "content": "from MCP"}).to_string();
    let outside = tempfile::tempdir().unwrap();
    let escape = outside.path().join("escape.txt");
    let escape_args =
        serde_json::json!({"command": format!("echo x > {}", escape.display())}).to_string();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io
        .block_on(FakeServer::start(Script::new([
            // Turn 1: a shell write outside the workspace (refused by the
            // sandbox), a passed validation, an echo, then a write.
            ScriptedTurn::tool_call("shell", escape_args.clone()),
            ScriptedTurn::tool_call(
                "validate",
                r#"{"command":"true","requirement":"checks pass"}"#,
            ),
            ScriptedTurn::tool_call("mcp__everything__echo", r#"{"message":"ping"}"#),
            ScriptedTurn::tool_call("mcp__fs__write_file", write_args.clone()),
            ScriptedTurn::text("Wrote it."),
            // Turn 2, after the server was killed: the write again.
            ScriptedTurn::tool_call("mcp__fs__write_file", write_args.clone()),
            ScriptedTurn::text("The server is gone."),
        ])))
        .unwrap();
    let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
    let session = store
        .create_session(
            &ws.display().to_string(),
            None,
            &ModelProfile::with_defaults("anthropic", "test-model"),
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxPolicy::default(), &ws, &session.id).unwrap();
    let temp_dir = sandbox.temp_dir().unwrap().to_path_buf();
    let started = Instant::now();
    let servers = McpServers::start(&config(&allowed), &ws, &sandbox).unwrap();
    eprintln!(
        "per-session start-up of two stdio MCP servers: {} ms",
        started.elapsed().as_millis()
    );
    assert!(
        servers.start_failures().is_empty(),
        "{:?}",
        servers.start_failures()
    );
    let fs_pid = servers.pid("fs").unwrap();
    let mcp = McpTools::new(servers, store.clone(), session.id.clone()).unwrap();
    let ctx = latch_tools::ToolContext::new(store.clone(), session.id.clone(), &ws).unwrap();
    let tools = ExtendedTools::new(
        Box::new(StandardTools::new(ctx)),
        vec![],
        session.model.estimator,
        Some(mcp),
    );
    let mut agent = scripted_agent(
        &store,
        &session,
        &ws,
        &server,
        Box::new(tools),
        AgentOptions {
            mode: "run".into(),
            max_tokens: 4_096,
            permissions: Some(Permissions {
                approval: ApprovalMode::OnRequest,
                sandbox: SandboxPolicy::default(),
                port: None,
            }),
            ..AgentOptions::default()
        },
    );
    // `/context` prices the schemas per server.
    let by_server = tool_tokens_by_server(agent.tool_schemas(), session.model.estimator);
    let names: Vec<&str> = by_server.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["built-in", "everything", "fs"]);
    assert!(by_server.iter().all(|(_, t)| *t > 0));
    assert_eq!(
        by_server.iter().map(|(_, t)| t).sum::<u64>() > 0,
        agent.tools_tokens() > 0
    );

    agent.run_turn("write the note", &mut |_| {}).unwrap();
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "from MCP");
    assert!(
        !escape.exists(),
        "the built-in shell runs in the session's sandbox beside the MCP tools"
    );
    let events = store.events(&session.id, 0, u64::MAX, 10_000).unwrap();
    let seq_of = |pred: &dyn Fn(&EventKind) -> bool| {
        events
            .iter()
            .filter(|e| pred(&e.kind))
            .map(|e| e.seq)
            .collect::<Vec<u64>>()
    };
    let echo =
        seq_of(&|k| matches!(k, EventKind::ToolResult(r) if r.name == "mcp__everything__echo"));
    let write =
        seq_of(&|k| matches!(k, EventKind::ToolResult(r) if r.name == "mcp__fs__write_file"));
    let mutations = seq_of(
        &|k| matches!(k, EventKind::Mutation { source, .. } if source == "mcp__fs__write_file"),
    );
    let echo_mutations =
        seq_of(&|k| matches!(k, EventKind::Mutation { source, .. } if source.contains("echo")));
    assert_eq!((echo.len(), write.len(), mutations.len()), (1, 1, 1));
    assert!(
        mutations[0] < write[0],
        "the write's possible mutation is committed before its result"
    );
    assert!(
        echo_mutations.is_empty(),
        "the read-only echo commits no mutation"
    );
    let echoed = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolResult(r) if r.name == "mcp__everything__echo" => Some(r.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(echoed.content, "Echo: ping");
    let canonical = store.with_kernel(&session.id, |k| k.canonical()).unwrap();
    let evidence = canonical
        .evidence
        .iter()
        .find(|e| e.requirement == "checks pass")
        .unwrap();
    assert_eq!(evidence.outcome, ValidationOutcome::Passed);
    assert!(evidence.stale, "the MCP write staled the passed validation");

    // Kill the filesystem server and take its directory away, so it cannot
    // come back.
    std::fs::remove_dir_all(&allowed).unwrap();
    assert!(
        std::process::Command::new("kill")
            .args(["-9", &fs_pid.to_string()])
            .status()
            .unwrap()
            .success()
    );
    let t0 = Instant::now();
    while std::process::Command::new("kill")
        .args(["-0", &fs_pid.to_string()])
        .status()
        .unwrap()
        .success()
    {
        assert!(t0.elapsed() < Duration::from_secs(10));
        std::thread::sleep(Duration::from_millis(20));
    }
    let before = server.requests().len();
    agent.run_turn("write it again", &mut |_| {}).unwrap();
    let requests = server.requests();
    let tools_of = |i: usize| serde_json::to_string(&requests[i].body["tools"]).unwrap();
    let first = tools_of(0);
    eprintln!(
        "tool prefix: {} bytes before the disconnect, {} bytes after",
        tools_of(before - 1).len(),
        tools_of(requests.len() - 1).len()
    );
    for i in before..requests.len() {
        assert_eq!(
            tools_of(i),
            first,
            "request {i}'s tool prefix is byte-identical"
        );
    }
    let failed = store
        .events(&session.id, 0, u64::MAX, 10_000)
        .unwrap()
        .into_iter()
        .rev()
        .find_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == "mcp__fs__write_file" => Some(r),
            _ => None,
        })
        .unwrap();
    assert!(failed.is_error);
    assert!(
        failed.content.contains("MCP server `fs` is disconnected")
            && failed.content.contains("reconnect failed"),
        "{}",
        failed.content
    );
    assert!(
        temp_dir.is_dir(),
        "the session temp dir exists while it runs"
    );
    drop(agent);
    assert!(
        !temp_dir.exists(),
        "the session temp dir {} is removed when the agent shuts down",
        temp_dir.display()
    );
    io.block_on(server.shutdown());
}

/// An interrupt reaches a running MCP call: the agent stops waiting at
/// once, tells the server to cancel, answers the call as interrupted and
/// closes the run, so the next turn is a valid continuation.
#[test]
fn an_interrupt_ends_a_running_mcp_call_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let long = "mcp__everything__trigger-long-running-operation";
    let server = io
        .block_on(FakeServer::start(Script::new([
            ScriptedTurn::tool_call(long, r#"{"duration":30,"steps":30}"#),
            ScriptedTurn::text("Continued after the interrupt."),
        ])))
        .unwrap();
    let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
    let session = store
        .create_session(
            &ws.display().to_string(),
            None,
            &ModelProfile::with_defaults("anthropic", "test-model"),
        )
        .unwrap();
    let sandbox = Sandbox::new(SandboxPolicy::default(), &ws, &session.id).unwrap();
    let only_everything = McpConfig {
        servers: [(
            "everything".to_string(),
            node(npm_server("server-everything"), &["stdio"]),
        )]
        .into_iter()
        .collect(),
    };
    let servers = McpServers::start(&only_everything, &ws, &sandbox).unwrap();
    assert!(servers.start_failures().is_empty());
    let mcp = McpTools::new(servers, store.clone(), session.id.clone()).unwrap();
    let ctx = latch_tools::ToolContext::new(store.clone(), session.id.clone(), &ws).unwrap();
    let tools = ExtendedTools::new(
        Box::new(StandardTools::new(ctx)),
        vec![],
        session.model.estimator,
        Some(mcp),
    );
    let mut agent = scripted_agent(
        &store,
        &session,
        &ws,
        &server,
        Box::new(tools),
        AgentOptions::default(),
    );
    let control = agent.control();
    let interrupted_at = Arc::new(std::sync::Mutex::new(None::<Instant>));
    let at = interrupted_at.clone();
    let mut observer = move |e: latch::agent::AgentEvent| {
        if let latch::agent::AgentEvent::Committed {
            event: EventKind::AssistantMessage { .. },
            ..
        } = e
        {
            // The call is about to run: interrupt it once it is under way.
            let (control, at) = (control.clone(), at.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(500));
                *at.lock().unwrap() = Some(Instant::now());
                control.interrupt();
            });
        }
    };
    let result = agent.run_turn("run the long operation", &mut observer);
    let took = interrupted_at.lock().unwrap().unwrap().elapsed();
    assert!(
        matches!(result, Err(latch::agent::AgentError::Interrupted)),
        "{result:?}"
    );
    assert!(
        took < Duration::from_secs(3),
        "the MCP call ended {took:?} after the interrupt"
    );
    let answer = store
        .all_events(&session.id)
        .unwrap()
        .into_iter()
        .find_map(|e| match e.kind {
            EventKind::ToolResult(r) if r.name == long => Some(r),
            _ => None,
        })
        .unwrap();
    assert!(
        answer.is_error
            && answer.content.starts_with("interrupted:")
            && answer.content.contains("`everything`"),
        "{answer:?}"
    );
    let open = store
        .with_kernel(&session.id, |k| k.unfinished().clone())
        .unwrap();
    assert!(!open.open_run && open.open_calls.is_empty(), "{open:?}");
    // The next turn is a valid continuation (the server checks protocol).
    let outcome = agent.run_turn("go on", &mut |_| {}).unwrap();
    assert_eq!(outcome.final_text, "Continued after the interrupt.");
    assert_eq!(server.requests().len(), server.served().len());
}
