//! Usage mapping: provider categories to Latch's, unknown categories stay
//! unknown, stop reasons, reasoning, and the simulated cache's honesty
//! (append-only requests hit, prefix rewrites miss).

use crate::common;

use common::*;
use latch_engine_sdk::types::Role;
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, ScriptedUsage, WireUsage};
use latch_provider::{NoMedia, ProviderKind, StopReason, StreamEvent, Usage};

async fn usage_of(kind: ProviderKind, reported: WireUsage) -> Usage {
    let server = FakeServer::start(Script::new([
        ScriptedTurn::text("ok").with_usage(ScriptedUsage::Reported(reported))
    ]))
    .await
    .unwrap();
    let provider = provider(kind, &server);
    let turn = provider
        .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
        .await
        .unwrap();
    server.shutdown().await;
    turn.usage
}

#[tokio::test]
async fn anthropic_categories_map_to_latch_usage() {
    let full = usage_of(
        ProviderKind::Anthropic,
        WireUsage {
            input_tokens: Some(10),
            output_tokens: Some(5),
            cache_read_tokens: Some(100),
            cache_creation_tokens: Some(20),
            reasoning_tokens: None,
        },
    )
    .await;
    assert_eq!(
        full,
        Usage {
            input_tokens: Some(130),
            output_tokens: Some(5),
            cache_read_tokens: Some(100),
            cache_creation_tokens: Some(20),
            cache_miss_tokens: Some(30),
            reasoning_tokens: None,
        }
    );
    // A compatible server that reports no cache categories.
    let partial = usage_of(
        ProviderKind::Anthropic,
        WireUsage {
            input_tokens: Some(12),
            output_tokens: Some(3),
            ..WireUsage::default()
        },
    )
    .await;
    assert_eq!(partial.cache_read_tokens, None);
    assert_eq!(partial.cache_creation_tokens, None);
    assert_eq!(partial.cache_miss_tokens, Some(12));
    assert_eq!(partial.cache_hit_rate(), None, "unknown, not zero");
    let none = usage_of(ProviderKind::Anthropic, WireUsage::default()).await;
    assert_eq!(none, Usage::default());
}

#[tokio::test]
async fn openai_categories_map_to_latch_usage() {
    let cached = usage_of(
        ProviderKind::OpenAiCompatible,
        WireUsage {
            input_tokens: Some(2000),
            output_tokens: Some(40),
            cache_read_tokens: Some(1536),
            cache_creation_tokens: None,
            reasoning_tokens: None,
        },
    )
    .await;
    assert_eq!(
        cached,
        Usage {
            input_tokens: Some(2000),
            output_tokens: Some(40),
            cache_read_tokens: Some(1536),
            cache_creation_tokens: None,
            cache_miss_tokens: Some(464),
            reasoning_tokens: None,
        }
    );
    // Servers such as llama.cpp report no cached count: the miss is unknown.
    let plain = usage_of(
        ProviderKind::OpenAiCompatible,
        WireUsage {
            input_tokens: Some(2000),
            output_tokens: Some(40),
            ..WireUsage::default()
        },
    )
    .await;
    assert_eq!(plain.input_tokens, Some(2000));
    assert_eq!(plain.cache_read_tokens, None);
    assert_eq!(plain.cache_miss_tokens, None);
    assert_eq!(plain.cache_creation_tokens, None);
    // No usage chunk at all.
    let none = usage_of(ProviderKind::OpenAiCompatible, WireUsage::default()).await;
    assert_eq!(none, Usage::default());
}

#[tokio::test]
async fn stop_reasons_and_reasoning() {
    for (kind, wire_stop) in [
        (ProviderKind::Anthropic, "max_tokens"),
        (ProviderKind::OpenAiCompatible, "length"),
    ] {
        let server = FakeServer::start(Script::new([
            ScriptedTurn::text("truncat")
                .with_stop_reason(wire_stop)
                .with_reasoning(),
            ScriptedTurn::text("odd").with_stop_reason("refusal"),
        ]))
        .await
        .unwrap();
        let provider = provider(kind, &server);
        let mut events = Events::default();
        let turn = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |e| {
                events.0.push(e)
            })
            .await
            .unwrap();
        assert_eq!(turn.stop_reason, StopReason::MaxTokens);
        assert_eq!(turn.text(), "truncat", "reasoning content is never text");
        let first_reasoning = events
            .0
            .iter()
            .position(|e| *e == StreamEvent::ReasoningActivity)
            .expect("reasoning reported");
        let first_text = events
            .0
            .iter()
            .position(|e| matches!(e, StreamEvent::TextDelta(_)))
            .unwrap();
        assert!(first_reasoning < first_text);
        let turn = provider
            .complete(&request(vec![user("hi")]), &NoMedia, &mut |_| {})
            .await
            .unwrap();
        assert_eq!(turn.stop_reason, StopReason::Other("refusal".into()));
        server.shutdown().await;
    }
}

/// Runs `turns` requests, each appending a tool round trip; with
/// `rewrite_prefix` the first message changes every time (as an engine that
/// rewrites its state in place would). Returns the mean measured hit rate
/// after the first request.
async fn session_hit_rate(kind: ProviderKind, turns: usize, rewrite_prefix: bool) -> f64 {
    let server = FakeServer::start(Script::default().with_responder(|_| {
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/lib.rs"}"#)
            .with_text("Reading.")
            .into()
    }))
    .await
    .unwrap();
    let provider = provider(kind, &server);
    let mut messages = vec![user("state revision 0"), user("Fix the failing test.")];
    let mut rates = Vec::new();
    for i in 0..turns {
        if rewrite_prefix {
            messages[0] = user(&format!("state revision {i}: files touched {}", i * 7));
        }
        let turn = provider
            .complete(&request(messages.clone()), &NoMedia, &mut |_| {})
            .await
            .unwrap();
        if i > 0 {
            rates.push(turn.usage.cache_hit_rate().unwrap());
        }
        let c = turn.tool_calls().next().unwrap().clone();
        messages.push(msg(Role::Assistant, turn.parts.clone()));
        messages.push(msg(
            Role::User,
            vec![result(
                &c.id,
                &c.name,
                &"fn add(a: i32, b: i32) -> i32 { a - b }\n".repeat(8),
                false,
            )],
        ));
    }
    server.shutdown().await;
    rates.iter().sum::<f64>() / rates.len() as f64
}

#[tokio::test]
async fn simulated_cache_rewards_append_only_requests() {
    for kind in KINDS {
        let friendly = session_hit_rate(kind, 12, false).await;
        let rewriting = session_hit_rate(kind, 12, true).await;
        assert!(friendly > 0.8, "{kind}: append-only hit rate {friendly}");
        assert!(
            rewriting < 0.3,
            "{kind}: prefix-rewriting hit rate {rewriting}"
        );
    }
}
