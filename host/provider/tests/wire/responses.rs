//! The OpenAI Responses wire against the local server, which validates as
//! strictly as the service: golden request bodies (the first request, a
//! tool loop with encrypted reasoning carried forward, a resumed session
//! whose state went through storage), refusals of bodies that drop or alter
//! reasoning or carry unknown fields, and usage with cached and reasoning
//! tokens.

use crate::common;

use common::*;
use latch_engine_sdk::types::{Part, Role};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, WireFormat};
use latch_provider::{
    NoMedia, OpenAiWire, Provider, ProviderError, ProviderKind, ProviderState, ReasoningOptions,
    RequestContext, StopReason, StreamEvent,
};
use serde_json::{Value, json};

fn reasoning() -> ReasoningOptions {
    ReasoningOptions {
        thinking_budget_tokens: None,
        reasoning_effort: Some("medium".into()),
    }
}

fn responses(server: &FakeServer) -> Provider {
    reasoning_provider(
        ProviderKind::OpenAi,
        server,
        OpenAiWire::Responses,
        reasoning(),
    )
}

fn ctx(replay: Vec<(usize, ProviderState)>) -> RequestContext {
    RequestContext {
        replay: replay.into_iter().collect(),
        cache_key: Some("session-42".into()),
    }
}

fn tools_json() -> Value {
    json!([
        {"type": "function", "name": "read_file", "description": "Read a workspace file.", "strict": false,
         "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}},
        {"type": "function", "name": "shell", "description": "Run a shell command.", "strict": false,
         "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}},
    ])
}

fn expected_body(input: Value) -> Value {
    json!({
        "model": "test-model",
        "instructions": "You are Latch, a coding agent. Work carefully and verify your changes.",
        "input": input,
        "tools": tools_json(),
        "tool_choice": "auto",
        "parallel_tool_calls": true,
        "reasoning": {"effort": "medium"},
        "include": ["reasoning.encrypted_content"],
        "store": false,
        "stream": true,
        "max_output_tokens": 1024,
        "prompt_cache_key": "session-42",
    })
}

fn script() -> Script {
    Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/lib.rs"}"#)
            .with_text("Reading the code.")
            .with_reasoning(),
        ScriptedTurn::text("The bug is in `add`.").with_reasoning(),
        ScriptedTurn::text("Done."),
    ])
}

#[tokio::test]
async fn golden_bodies_first_request_tool_loop_and_resume() {
    let server = FakeServer::start(script()).await.unwrap();
    let provider = responses(&server);
    assert_eq!(
        provider.endpoint(),
        format!("{}/responses", server.openai_base_url())
    );

    // 1. The first request.
    let first = vec![user("Fix the failing test.")];
    let mut events = Vec::new();
    let turn1 = provider
        .complete_with(&request(first.clone()), &ctx(vec![]), &NoMedia, &mut |e| {
            events.push(e)
        })
        .await
        .unwrap();
    let reqs = server.requests();
    assert_eq!(reqs[0].format, WireFormat::Responses);
    assert_eq!(reqs[0].path, "/v1/responses");
    assert_eq!(reqs[0].headers["authorization"], "Bearer test-key");
    let user_item = json!({"type": "message", "role": "user",
                           "content": [{"type": "input_text", "text": "Fix the failing test."}]});
    assert_eq!(reqs[0].body, expected_body(json!([user_item])));

    // The turn: text and the call are conversation; the reasoning item is
    // opaque state, and only its activity was streamed.
    assert_eq!(turn1.stop_reason, StopReason::ToolUse);
    assert_eq!(turn1.text(), "Reading the code.");
    let call = turn1.tool_calls().next().unwrap().clone();
    assert_eq!(call.name, "read_file");
    assert!(events.contains(&StreamEvent::ReasoningActivity));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::TextDelta(t) if t.contains("Considering"))),
        "reasoning text never streams as text"
    );
    let state = turn1
        .provider_state
        .clone()
        .expect("encrypted reasoning kept");
    assert_eq!(state.wire, "openai-responses");
    assert_eq!(state.blocks.len(), 1);
    assert_eq!(state.blocks[0].before_part, 0);
    let reasoning_item: Value = serde_json::from_str(&state.blocks[0].json).unwrap();
    assert_eq!(reasoning_item["type"], "reasoning");
    let encrypted = reasoning_item["encrypted_content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(encrypted.starts_with("gAAAA"), "{encrypted}");
    assert!(turn1.usage.reasoning_tokens.is_some_and(|r| r > 0));

    // 2. The tool loop: the reasoning item goes back first, exactly.
    let mut second = first.clone();
    second.push(msg(Role::Assistant, turn1.parts.clone()));
    second.push(msg(
        Role::User,
        vec![result(
            &call.id,
            "read_file",
            "pub fn add(a: i32, b: i32) -> i32 { a - b }",
            false,
        )],
    ));
    let turn2 = provider
        .complete_with(
            &request(second.clone()),
            &ctx(vec![(1, state.clone())]),
            &NoMedia,
            &mut |_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("continuation refused: {e}"));
    assert_eq!(turn2.text(), "The bug is in `add`.");
    let loop_input = json!([
        user_item,
        reasoning_item,
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Reading the code."}]},
        {"type": "function_call", "call_id": call.id, "name": "read_file", "arguments": "{\"path\":\"src/lib.rs\"}"},
        {"type": "function_call_output", "call_id": call.id, "output": "pub fn add(a: i32, b: i32) -> i32 { a - b }"},
    ]);
    assert_eq!(server.requests()[1].body, expected_body(loop_input.clone()));

    // 3. A resumed session: the state went through storage (JSON text) and a
    // fresh client sends the next request; its bytes are unchanged.
    let stored = serde_json::to_string(&state).unwrap();
    let restored: ProviderState = serde_json::from_str(&stored).unwrap();
    let state2 = turn2.provider_state.clone().expect("second reasoning kept");
    let restored2: ProviderState =
        serde_json::from_str(&serde_json::to_string(&state2).unwrap()).unwrap();
    let fresh = responses(&server);
    let mut third = second.clone();
    third.push(msg(Role::Assistant, turn2.parts.clone()));
    third.push(user("Thanks, now run the tests."));
    fresh
        .complete_with(
            &request(third),
            &ctx(vec![(1, restored), (3, restored2.clone())]),
            &NoMedia,
            &mut |_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("resumed request refused: {e}"));
    let reasoning2: Value = serde_json::from_str(&restored2.blocks[0].json).unwrap();
    let mut resumed_input = loop_input.as_array().unwrap().clone();
    resumed_input.push(reasoning2);
    resumed_input.push(json!({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": "The bug is in `add`."}]}));
    resumed_input.push(json!({"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "Thanks, now run the tests."}]}));
    let sent = &server.requests()[2].body;
    assert_eq!(sent, &expected_body(Value::Array(resumed_input)));
    // Byte-exact: the reasoning item's text in the sent body is the stored text.
    let sent_item = serde_json::to_string(&sent["input"][1]).unwrap();
    assert_eq!(sent_item, state.blocks[0].json);
    server.shutdown().await;
}

#[tokio::test]
async fn the_server_refuses_dropped_or_altered_reasoning_and_unknown_fields() {
    let server = FakeServer::start(script()).await.unwrap();
    let provider = responses(&server);
    let first = vec![user("Fix the failing test.")];
    let turn1 = provider
        .complete_with(&request(first.clone()), &ctx(vec![]), &NoMedia, &mut |_| {})
        .await
        .unwrap();
    let call = turn1.tool_calls().next().unwrap().clone();
    let state = turn1.provider_state.clone().unwrap();
    let mut second = first;
    second.push(msg(Role::Assistant, turn1.parts.clone()));
    second.push(msg(
        Role::User,
        vec![result(&call.id, "read_file", "x", false)],
    ));

    // Dropped: the function call comes back without its reasoning item.
    let e = provider
        .complete_with(
            &request(second.clone()),
            &ctx(vec![]),
            &NoMedia,
            &mut |_| {},
        )
        .await
        .unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, ProviderError::Rejected { status: 400, .. }),
        "{e}"
    );
    assert!(
        text.contains("without its required 'reasoning' item"),
        "{text}"
    );

    // Altered: the encrypted content does not verify.
    let mut altered = state.clone();
    altered.blocks[0].json = altered.blocks[0].json.replace("gAAAA", "gAAAB");
    let e = provider
        .complete_with(
            &request(second.clone()),
            &ctx(vec![(1, altered)]),
            &NoMedia,
            &mut |_| {},
        )
        .await
        .unwrap_err();
    assert!(e.to_string().contains("could not be verified"), "{e}");

    // Unknown fields are refused, at the top level and in an item.
    let client = reqwest::Client::new();
    let url = format!("{}/responses", server.openai_base_url());
    let mut body = provider
        .request_body_with(&request(vec![user("hi")]), &ctx(vec![]), &NoMedia)
        .unwrap();
    body["temperature_mode"] = json!("hot");
    let resp = client
        .post(&url)
        .bearer_auth("test-key")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let message = resp.text().await.unwrap();
    assert!(
        message.contains("Unknown parameter: 'temperature_mode'."),
        "{message}"
    );
    let mut body = provider
        .request_body_with(&request(vec![user("hi")]), &ctx(vec![]), &NoMedia)
        .unwrap();
    body["input"][0]["name"] = json!("me");
    let resp = client
        .post(&url)
        .bearer_auth("test-key")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let message = resp.text().await.unwrap();
    assert!(
        message.contains("Unknown parameter: 'input[0].name'."),
        "{message}"
    );

    // The exact state is accepted, and nothing above consumed a scripted turn.
    provider
        .complete_with(
            &request(second),
            &ctx(vec![(1, state)]),
            &NoMedia,
            &mut |_| {},
        )
        .await
        .unwrap_or_else(|e| panic!("exact replay refused: {e}"));
    server.shutdown().await;
}

#[tokio::test]
async fn a_context_length_refusal_is_typed_quoted_and_not_retried() {
    use latch_provider::fake::ScriptedFailure;
    let server = FakeServer::start(Script::new([
        latch_provider::fake::ScriptStep::from(ScriptedFailure::Reject {
            status: 400,
            message: "prompt is too long: 208310 tokens > 200000 maximum".into(),
        }),
        ScriptedTurn::text("never reached").into(),
    ]))
    .await
    .unwrap();
    let provider = provider(ProviderKind::Anthropic, &server);
    let e = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    match &e {
        ProviderError::ContextTooLong {
            reported_tokens,
            limit_tokens,
            message,
            ..
        } => {
            assert_eq!(
                (*reported_tokens, *limit_tokens),
                (Some(208310), Some(200000))
            );
            assert!(message.contains("prompt is too long"));
        }
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
    assert!(e.to_string().contains("208310 tokens > 200000"), "{e}");
    assert_eq!(server.requests().len(), 1, "never retried");
    server.shutdown().await;
}

#[tokio::test]
async fn without_a_reasoning_effort_no_reasoning_settings_are_sent() {
    let server = FakeServer::start(Script::new([ScriptedTurn::text("ok")]))
        .await
        .unwrap();
    let provider = reasoning_provider(
        ProviderKind::OpenAi,
        &server,
        OpenAiWire::Responses,
        ReasoningOptions::default(),
    );
    let turn = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap();
    assert_eq!(turn.text(), "ok");
    let body = &server.requests()[0].body;
    assert!(body.get("reasoning").is_none() && body.get("include").is_none());
    assert!(
        body.get("prompt_cache_key").is_none(),
        "no key without a session"
    );
    assert_eq!(turn.usage.reasoning_tokens, Some(0));
    assert!(turn.usage.cache_read_tokens.is_some());
    assert!(matches!(turn.parts[..], [Part::Text(_)]));
    server.shutdown().await;
}
