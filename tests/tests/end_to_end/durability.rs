//! Pins that only mean something across processes or on the real store:
//! deterministic serialization compared between separate processes, and the
//! stress tier's "no automatic compact" and "every raw event retained" on the
//! real SQLite store under the real agent loop.

use latch::agent::tools::StandardTools;
use latch::agent::{Agent, AgentEvent, AgentOptions};
use latch::engine::runtime::EngineSource;
use latch::engine::{ComponentEngine, EngineRuntime, SandboxLimits};
use latch_continuity::ContinuityEngine;
use latch_continuity::testkit::{self, Script};
use latch_engine_sdk::Engine;
use latch_engine_sdk::types::*;
use latch_kernel::{EventKind, Store};
use latch_provider::fake::{FakeServer, Script as WireScript, ScriptedTurn};
use latch_provider::{Provider, ProviderConfig, ProviderKind, RetryPolicy};
use std::collections::HashMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

/// Where a child process writes its bytes (set only for the child).
const OUT_VAR: &str = "LATCH_DETERMINISM_OUT";
/// What the child serializes: `view` (the pinned bytes) or `hashmap` (a
/// value whose order depends on the process, to show the harness can see a
/// difference).
const MODE_VAR: &str = "LATCH_DETERMINISM_MODE";

/// The bytes under test: a ContinuityEngine view of a generated session and
/// the provider bodies built from it in both wire formats.
fn view_bytes() -> Vec<u8> {
    let model = ModelProfile::with_defaults("anthropic", "test-model");
    let script = Script::new(4, 8);
    let mut host = testkit::EngineHost::new(ContinuityEngine::new(model));
    let session = testkit::run(&script, &mut host);
    let view = host
        .0
        .materialize(&session, &script.request(8, "parser"))
        .unwrap();
    let request = latch_provider::ProviderRequest {
        model: "test-model".into(),
        system: view.system.clone(),
        tools: vec![],
        messages: view.messages.clone(),
        max_tokens: 1024,
        cache_breakpoints: latch_provider::CacheHints::for_messages(&view.messages),
    };
    let media = |m: &MediaRef| Ok(m.sha256.as_bytes().to_vec());
    let mut out = serde_json::to_vec(&view).unwrap();
    out.extend(
        serde_json::to_vec(&latch_provider::anthropic::request_body(&request, &media).unwrap())
            .unwrap(),
    );
    out.extend(
        serde_json::to_vec(
            &latch_provider::openai::request_body(
                &request,
                &media,
                latch_provider::openai::MaxTokensField::MaxTokens,
            )
            .unwrap(),
        )
        .unwrap(),
    );
    out
}

fn hashmap_bytes() -> Vec<u8> {
    let map: HashMap<String, u32> = (0..64).map(|i| (format!("key{i}"), i)).collect();
    serde_json::to_vec(&map).unwrap()
}

/// The child side: runs only when the parent test starts this binary with
/// [`OUT_VAR`] set.
#[test]
#[ignore = "the child process of deterministic_serialization_across_processes"]
fn determinism_child() {
    let Some(out) = std::env::var_os(OUT_VAR) else {
        return;
    };
    let bytes = match std::env::var(MODE_VAR).as_deref() {
        Ok("hashmap") => hashmap_bytes(),
        _ => view_bytes(),
    };
    std::fs::write(out, bytes).unwrap();
}

/// Run [`determinism_child`] in a new process of this test binary.
fn child_bytes(dir: &Path, name: &str, mode: &str) -> Vec<u8> {
    let out = dir.join(name);
    let status = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "durability::determinism_child",
            "--ignored",
            "--test-threads",
            "1",
        ])
        .env(OUT_VAR, &out)
        .env(MODE_VAR, mode)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::read(&out).unwrap_or_else(|e| panic!("the child wrote no bytes: {e}"))
}

#[test]
fn deterministic_serialization_across_processes() {
    let dir = tempfile::tempdir().unwrap();
    let here = view_bytes();
    assert!(here.len() > 2_000, "{} bytes", here.len());
    let first = child_bytes(dir.path(), "a", "view");
    let second = child_bytes(dir.path(), "b", "view");
    assert!(first == here, "another process serialized other bytes");
    assert!(second == here, "a third process serialized other bytes");
    // The comparison can fail: a value whose order is per process (std's
    // seeded HashMap) differs between two processes.
    let a = child_bytes(dir.path(), "c", "hashmap");
    let b = child_bytes(dir.path(), "d", "hashmap");
    assert_ne!(a, b, "per-process randomness is visible across processes");
}

/// The text of the Anthropic `tool_result` block answering `id` anywhere in
/// a request body (its content as a string, or its text blocks joined).
fn tool_result_text(body: &serde_json::Value, id: &str) -> Option<String> {
    use serde_json::Value;
    match body {
        Value::Object(o) if o.get("tool_use_id").and_then(Value::as_str) == Some(id) => {
            match o.get("content")? {
                Value::String(s) => Some(s.clone()),
                Value::Array(blocks) => Some(
                    blocks
                        .iter()
                        .filter_map(|b| b.get("text").and_then(Value::as_str))
                        .collect(),
                ),
                _ => None,
            }
        }
        Value::Object(o) => o.values().find_map(|v| tool_result_text(v, id)),
        Value::Array(a) => a.iter().find_map(|v| tool_result_text(v, id)),
        _ => None,
    }
}

/// The stress tier on the real store: hundreds of model steps through the
/// real loop at a small working memory, so the engine rotates many times.
#[test]
#[ignore = "stress tier: hundreds of steps through the real loop (local only)"]
fn stress_real_store_keeps_every_event_and_never_compacts_by_itself() {
    const STEPS: usize = 400;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().canonicalize().unwrap();
    for i in 0..4 {
        let body: String = (0..40)
            .map(|l| format!("file {i} line {l}: {}\n", "lorem ipsum ".repeat(4)))
            .collect();
        std::fs::write(ws.join(format!("part{i}.txt")), body).unwrap();
    }
    std::fs::write(ws.join("early.txt"), "EARLY-MARKER-zq17 only here\n").unwrap();
    let mut turns = vec![ScriptedTurn::tool_call(
        "read_file",
        r#"{"path":"early.txt"}"#,
    )];
    for i in 0..STEPS {
        turns.push(ScriptedTurn::tool_call(
            "read_file",
            format!(r#"{{"path":"part{}.txt"}}"#, i % 4),
        ));
    }
    turns.push(ScriptedTurn::text("Read everything."));
    let io = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let server = io
        .block_on(FakeServer::start(WireScript::new(turns)))
        .unwrap();
    let store = Arc::new(Store::open(ws.join(".latch/latch.db")).unwrap());
    let model = ModelProfile::with_defaults("anthropic", "test-model");
    let session = store
        .create_session(&ws.display().to_string(), None, &model)
        .unwrap();
    let provider = Provider::new(ProviderConfig {
        base_url: Some(server.anthropic_base_url()),
        api_key: Some("k".into()),
        retry: RetryPolicy::none(),
        ..ProviderConfig::new(ProviderKind::Anthropic)
    })
    .unwrap();
    let loaded = EngineRuntime::new(None)
        .unwrap()
        .load(&EngineSource::Builtin("continuity".into()))
        .unwrap();
    let engine = ComponentEngine::new(loaded, SandboxLimits::default(), &session.id, model);
    let ctx = latch_tools::ToolContext::new(store.clone(), session.id.clone(), &ws).unwrap();
    let id = session.id.clone();
    let mut agent = Agent::new(
        store.clone(),
        session,
        ws.clone(),
        Box::new(engine),
        provider,
        Box::new(StandardTools::new(ctx)),
        AgentOptions {
            mode: "run".into(),
            recent_tokens: Some(8_000),
            ..AgentOptions::default()
        },
    )
    .unwrap();
    let mut committed: Vec<(u64, EventKind)> = Vec::new();
    let mut observe = |e: AgentEvent| {
        if let AgentEvent::Committed { seq, event } = e {
            committed.push((seq, event.clone()));
        }
    };
    agent
        .run_turn("read early.txt, then the parts many times", &mut observe)
        .unwrap();
    drop(agent);
    let last_request = server.requests().pop().expect("the model was asked");
    io.block_on(server.shutdown());

    // Recent verbatim text: the last request carried the newest tool
    // results and the model's newest calls exactly as they were logged.
    let body = &last_request.body;
    let newest: Vec<&EventKind> = committed
        .iter()
        .rev()
        .map(|(_, k)| k)
        .filter(|k| matches!(k, EventKind::ToolResult(_)))
        .take(6)
        .collect();
    assert_eq!(newest.len(), 6);
    for kind in newest {
        let EventKind::ToolResult(r) = kind else {
            unreachable!()
        };
        assert_eq!(
            tool_result_text(body, &r.call_id).as_deref(),
            Some(r.content.as_str()),
            "the newest result {} is not in the last request verbatim",
            r.call_id
        );
    }

    // Reopen the file as a new process would.
    let path = store.path().to_path_buf();
    drop(store);
    let store = Store::open(&path).unwrap();
    let stored = store.events(&id, 0, u64::MAX, 1_000_000).unwrap();
    let stored: Vec<(u64, EventKind)> = stored.into_iter().map(|e| (e.seq, e.kind)).collect();
    assert!(stored.len() > 3 * STEPS, "{} events", stored.len());
    // Every raw event retained: the only session's log is gap-free, and
    // each event the loop committed (the tools append their own too) is
    // there unchanged.
    let seqs: Vec<u64> = stored.iter().map(|(seq, _)| *seq).collect();
    assert!(
        seqs == (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "the log has gaps"
    );
    let by_seq: std::collections::BTreeMap<u64, &EventKind> =
        stored.iter().map(|(seq, k)| (*seq, k)).collect();
    for (seq, kind) in &committed {
        assert!(
            by_seq.get(seq) == Some(&kind),
            "event {seq} lost or changed"
        );
    }
    assert!(committed.len() > 2 * STEPS);
    assert!(
        !stored
            .iter()
            .any(|(_, k)| matches!(k, EventKind::ManualCompact)),
        "no automatic compact"
    );
    let generations: std::collections::BTreeSet<u64> = stored
        .iter()
        .filter_map(|(_, k)| match k {
            EventKind::KernelContext(e) => Some(e.generation),
            _ => None,
        })
        .collect();
    assert!(generations.len() > 10, "rotations: {}", generations.len());
    // The earliest output is still searchable after all of them.
    let hits = store
        .search_before(&id, "EARLY-MARKER-zq17", u64::MAX, 10)
        .unwrap();
    assert!(!hits.is_empty(), "the early output is recallable");
}
