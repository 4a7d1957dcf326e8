//! Anthropic extended thinking in a tool loop against the local server:
//! the thinking config and the interleaved-thinking beta are sent, signed
//! thinking comes back as opaque state, and the server refuses a
//! continuation that drops or alters the signed block while the exact
//! replay is accepted.

use crate::common;

use common::*;
use latch_engine_sdk::types::Role;
use latch_provider::fake::{FakeServer, REASONING_TEXT, Script, ScriptedTurn};
use latch_provider::{
    NoMedia, OpenAiWire, ProviderError, ProviderKind, ReasoningOptions, RequestContext, StreamEvent,
};
use serde_json::{Value, json};

#[tokio::test]
async fn signed_thinking_must_come_back_unchanged_in_a_tool_loop() {
    let server = FakeServer::start(Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/lib.rs"}"#).with_reasoning(),
        ScriptedTurn::text("Fixed.").with_reasoning(),
    ]))
    .await
    .unwrap();
    let provider = reasoning_provider(
        ProviderKind::Anthropic,
        &server,
        OpenAiWire::default(),
        ReasoningOptions {
            thinking_budget_tokens: Some(2048),
            reasoning_effort: None,
        },
    );
    let mut req = request(vec![user("Fix the failing test.")]);
    req.max_tokens = 4096;
    let mut events = Vec::new();
    let turn1 = provider
        .complete(&req, &NoMedia, &mut |e| events.push(e))
        .await
        .unwrap();
    let first = &server.requests()[0];
    assert_eq!(
        first.body["thinking"],
        json!({"type": "enabled", "budget_tokens": 2048})
    );
    assert_eq!(
        first.headers["anthropic-beta"],
        "interleaved-thinking-2025-05-14"
    );
    assert!(events.contains(&StreamEvent::ReasoningActivity));
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, StreamEvent::TextDelta(t) if t.contains(REASONING_TEXT))),
        "thinking never streams as text"
    );
    assert!(!turn1.text().contains(REASONING_TEXT));
    let state = turn1.provider_state.clone().expect("thinking kept");
    assert_eq!(state.wire, "anthropic");
    let block: Value = serde_json::from_str(&state.blocks[0].json).unwrap();
    assert_eq!(block["type"], "thinking");
    assert_eq!(block["thinking"], REASONING_TEXT);
    assert!(block["signature"].as_str().is_some_and(|s| s.len() > 20));

    let call = turn1.tool_calls().next().unwrap().clone();
    let mut next = req.clone();
    next.messages
        .push(msg(Role::Assistant, turn1.parts.clone()));
    next.messages.push(msg(
        Role::User,
        vec![result(&call.id, "read_file", "x", false)],
    ));
    next.cache_breakpoints = latch_provider::CacheHints::for_messages(&next.messages);
    let with = |s: Option<latch_provider::ProviderState>| RequestContext {
        replay: s.into_iter().map(|s| (1, s)).collect(),
        cache_key: None,
    };

    // Dropped.
    let e = provider
        .complete_with(&next, &with(None), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert!(
        matches!(e, ProviderError::Rejected { status: 400, .. }),
        "{e}"
    );
    assert!(
        e.to_string().contains("must start with a thinking block"),
        "{e}"
    );

    // Altered (one word of the thinking text).
    let mut altered = state.clone();
    altered.blocks[0].json = altered.blocks[0]
        .json
        .replace("Considering", "Reconsidering");
    let e = provider
        .complete_with(&next, &with(Some(altered)), &NoMedia, &mut |_| {})
        .await
        .unwrap_err();
    assert!(e.to_string().contains("Invalid `signature`"), "{e}");

    // Exact.
    let turn2 = provider
        .complete_with(&next, &with(Some(state.clone())), &NoMedia, &mut |_| {})
        .await
        .unwrap_or_else(|e| panic!("exact replay refused: {e}"));
    assert_eq!(turn2.text(), "Fixed.");
    let sent = server.requests().last().unwrap().body.clone();
    let assistant = &sent["messages"][1];
    assert_eq!(assistant["role"], "assistant");
    assert_eq!(
        serde_json::to_string(&assistant["content"][0]).unwrap(),
        state.blocks[0].json,
        "the thinking block opens the assistant turn, byte for byte"
    );
    assert_eq!(assistant["content"][1]["type"], "tool_use");
    server.shutdown().await;
}

#[tokio::test]
async fn a_thinking_budget_the_api_would_refuse_is_explained() {
    let server = FakeServer::start(Script::new([ScriptedTurn::text("ok")]))
        .await
        .unwrap();
    let provider = reasoning_provider(
        ProviderKind::Anthropic,
        &server,
        OpenAiWire::default(),
        ReasoningOptions {
            thinking_budget_tokens: Some(2048),
            reasoning_effort: None,
        },
    );
    // max_tokens 1024 is below the budget.
    let e = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("thinking_budget_tokens = 2048") && e.contains("max_tokens"),
        "{e}"
    );
    assert!(server.requests().is_empty(), "nothing was sent");
    server.shutdown().await;
}
