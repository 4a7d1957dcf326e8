//! Golden request bodies: the exact JSON each adapter sends for a fixed
//! request, as the fake server captured it over HTTP.

use crate::common;

use common::*;
use latch_engine_sdk::types::{KernelContextKind, KernelTag, MediaRef, Message, Part, Role};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn};
use latch_provider::{CacheHints, ProviderKind, ProviderRequest};
use serde_json::{Value, json};

fn kernel(kind: KernelContextKind, revision: u64, text: &str) -> Message {
    Message {
        role: Role::User,
        parts: vec![Part::Text(text.into())],
        kernel: Some(KernelTag {
            generation: 1,
            revision,
            kind,
            seq: Some(revision + 2),
        }),
        source_seqs: vec![revision + 2],
    }
}

fn fixed_request() -> ProviderRequest {
    let messages = vec![
        user("Workspace: /repo\nMode: build"),
        kernel(KernelContextKind::Snapshot, 1, "Goal: make `adds` pass."),
        msg(
            Role::User,
            vec![
                Part::Text("Please fix the failing test.".into()),
                Part::Image(png("ab12")),
            ],
        ),
        msg(
            Role::Assistant,
            vec![
                Part::Text("Reading the code.".into()),
                call("toolu_1", "read_file", r#"{"path":"src/lib.rs"}"#),
                call("toolu_2", "shell", r#"{"cmd":"cargo test"}"#),
            ],
        ),
        msg(
            Role::User,
            vec![result(
                "toolu_1",
                "read_file",
                "pub fn add(a: i32, b: i32) -> i32 { a - b }",
                false,
            )],
        ),
        msg(
            Role::User,
            vec![result("toolu_2", "shell", "test adds ... FAILED", true)],
        ),
        kernel(
            KernelContextKind::StateUpdate,
            2,
            "Evidence: `cargo test` failed at generation 2.",
        ),
    ];
    let hints = CacheHints::for_messages(&messages);
    assert_eq!(
        hints,
        CacheHints {
            system: true,
            stable_prefix_end: Some(1),
            epoch_end: Some(6)
        }
    );
    ProviderRequest {
        model: "golden-model".into(),
        system: "You are Latch.".into(),
        tools: tools(),
        messages,
        max_tokens: 1024,
        cache_breakpoints: hints,
    }
}

fn resolver(m: &MediaRef) -> Result<Vec<u8>, String> {
    assert_eq!(m.sha256, "ab12");
    Ok(PNG_BYTES.to_vec())
}

async fn captured(
    kind: ProviderKind,
) -> (Value, std::collections::BTreeMap<String, String>, Value) {
    let server = FakeServer::start(Script::new([ScriptedTurn::text("ok")]))
        .await
        .unwrap();
    let provider = provider(kind, &server);
    let req = fixed_request();
    let turn = provider
        .complete(&req, &resolver, &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("{kind}: {e}"));
    assert_eq!(turn.text(), "ok");
    let reqs = server.requests();
    assert_eq!(reqs.len(), 1);
    let local = provider.request_body(&req, &resolver).unwrap();
    server.shutdown().await;
    (reqs[0].body.clone(), reqs[0].headers.clone(), local)
}

#[tokio::test]
async fn anthropic_golden_body() {
    let (body, headers, local) = captured(ProviderKind::Anthropic).await;
    let ephemeral = json!({"type": "ephemeral"});
    let expected = json!({
        "model": "golden-model",
        "max_tokens": 1024,
        "stream": true,
        "system": [{"type": "text", "text": "You are Latch.", "cache_control": ephemeral}],
        "tools": [
            {"name": "read_file", "description": "Read a workspace file.",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
            {"name": "shell", "description": "Run a shell command.",
             "input_schema": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
        ],
        "messages": [
            {"role": "user", "content": [
                {"type": "text", "text": "Workspace: /repo\nMode: build"},
                {"type": "text", "text": "Goal: make `adds` pass.", "cache_control": ephemeral},
                {"type": "text", "text": "Please fix the failing test."},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG_BASE64}},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Reading the code."},
                {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {"path": "src/lib.rs"}},
                {"type": "tool_use", "id": "toolu_2", "name": "shell", "input": {"cmd": "cargo test"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "toolu_1", "content": "pub fn add(a: i32, b: i32) -> i32 { a - b }"},
                {"type": "tool_result", "tool_use_id": "toolu_2", "content": "test adds ... FAILED", "is_error": true},
                {"type": "text", "text": "Evidence: `cargo test` failed at generation 2.", "cache_control": ephemeral},
            ]},
        ],
    });
    assert_eq!(
        body,
        expected,
        "{}",
        serde_json::to_string_pretty(&body).unwrap()
    );
    assert_eq!(local, expected, "request_body() is what goes on the wire");
    assert_eq!(headers["x-api-key"], "test-key");
    assert_eq!(headers["anthropic-version"], "2023-06-01");
    assert_eq!(headers["content-type"], "application/json");
}

#[tokio::test]
async fn openai_golden_body() {
    let (body, headers, local) = captured(ProviderKind::OpenAiCompatible).await;
    let expected = json!({
        "model": "golden-model",
        "max_tokens": 1024,
        "stream": true,
        "stream_options": {"include_usage": true},
        "tools": [
            {"type": "function", "function": {"name": "read_file", "description": "Read a workspace file.",
             "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}},
            {"type": "function", "function": {"name": "shell", "description": "Run a shell command.",
             "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}},
        ],
        "tool_choice": "auto",
        "messages": [
            {"role": "system", "content": "You are Latch."},
            {"role": "user", "content": "Workspace: /repo\nMode: build"},
            {"role": "user", "content": "Goal: make `adds` pass."},
            {"role": "user", "content": [
                {"type": "text", "text": "Please fix the failing test."},
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{PNG_BASE64}")}},
            ]},
            {"role": "assistant", "content": "Reading the code.", "tool_calls": [
                {"id": "toolu_1", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\":\"src/lib.rs\"}"}},
                {"id": "toolu_2", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\":\"cargo test\"}"}},
            ]},
            {"role": "tool", "tool_call_id": "toolu_1", "content": "pub fn add(a: i32, b: i32) -> i32 { a - b }"},
            {"role": "tool", "tool_call_id": "toolu_2", "content": "test adds ... FAILED"},
            {"role": "user", "content": "Evidence: `cargo test` failed at generation 2."},
        ],
    });
    assert_eq!(
        body,
        expected,
        "{}",
        serde_json::to_string_pretty(&body).unwrap()
    );
    assert_eq!(local, expected);
    assert_eq!(headers["authorization"], "Bearer test-key");
}

#[tokio::test]
async fn openai_proper_on_chat_uses_max_completion_tokens() {
    let server = FakeServer::start(Script::new([ScriptedTurn::text("ok")]))
        .await
        .unwrap();
    let provider = reasoning_provider(
        ProviderKind::OpenAi,
        &server,
        latch_provider::OpenAiWire::Chat,
        Default::default(),
    );
    provider
        .complete(&fixed_request(), &resolver, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(server.requests()[0].path, "/v1/chat/completions");
    let body = &server.requests()[0].body;
    assert_eq!(body["max_completion_tokens"], 1024);
    assert!(body.get("max_tokens").is_none());
}

#[tokio::test]
async fn without_cache_hints_no_breakpoint_is_sent() {
    let server = FakeServer::start(Script::new([ScriptedTurn::text("ok")]))
        .await
        .unwrap();
    let provider = provider(ProviderKind::Anthropic, &server);
    let mut req = fixed_request();
    req.cache_breakpoints = CacheHints::none();
    provider
        .complete(&req, &resolver, &mut |_| {})
        .await
        .unwrap();
    let body = server.requests()[0].body.to_string();
    assert!(!body.contains("cache_control"), "{body}");
}
