//! A multi-step tool loop against the fake server, in both wire formats,
//! over real HTTP.

use crate::common;

use common::*;
use latch_engine_sdk::types::{Part, Role};
use latch_provider::fake::{FakeServer, Script, ScriptedTurn, WireFormat};
use latch_provider::{NoMedia, ProviderKind, StopReason, StreamEvent};

async fn tool_loop(kind: ProviderKind) {
    let server = FakeServer::start(Script::new([
        ScriptedTurn::tool_call("read_file", r#"{"path":"src/lib.rs"}"#)
            .with_text("Let me read the code first."),
        ScriptedTurn::tool_call("shell", r#"{"cmd":"sed -i s/a-b/a+b/ src/lib.rs"}"#)
            .with_tool_call("shell", r#"{"cmd":"cargo test"}"#)
            .with_reasoning(),
        ScriptedTurn::text("Fixed: `add` now adds, and `cargo test` passes."),
    ]))
    .await
    .unwrap();
    let provider = provider(kind, &server);
    let mut messages = vec![user("The test `adds` fails. Please fix it.")];
    let mut turns = Vec::new();
    for _ in 0..5 {
        let req = request(messages.clone());
        let mut events = Events::default();
        let turn = provider
            .complete(&req, &NoMedia, &mut |e| events.0.push(e))
            .await
            .unwrap_or_else(|e| panic!("{kind}: {e}"));
        // The transient deltas add up to the committed turn.
        assert_eq!(events.text_since_last_retry(), turn.text());
        let started: Vec<(String, String)> = events
            .0
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolCallStarted { id, name } => Some((id.clone(), name.clone())),
                _ => None,
            })
            .collect();
        let calls: Vec<(String, String)> = turn
            .tool_calls()
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect();
        assert_eq!(started, calls);
        for c in turn.tool_calls() {
            let args: String = events
                .0
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolArgumentsDelta { id, delta } if *id == c.id => {
                        Some(delta.as_str())
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(args, c.arguments_json);
            serde_json::from_str::<serde_json::Value>(&c.arguments_json).unwrap();
        }
        assert!(
            matches!(events.0.last(), Some(StreamEvent::Usage(_)))
                || turn.usage.input_tokens.is_some()
        );
        messages.push(msg(Role::Assistant, turn.parts.clone()));
        let stop = turn.stop_reason.clone();
        // Each result is its own message, as the store keeps them: the
        // Anthropic adapter merges them into one user message.
        for c in turn.tool_calls() {
            messages.push(msg(
                Role::User,
                vec![result(
                    &c.id,
                    &c.name,
                    &format!("ok: {} ran", c.name),
                    false,
                )],
            ));
        }
        turns.push((turn, events));
        if stop == StopReason::EndTurn {
            break;
        }
        assert_eq!(stop, StopReason::ToolUse);
    }
    assert_eq!(turns.len(), 3, "{kind}: read, fix + test, answer");
    assert_eq!(turns[0].0.parts.len(), 2, "text then the call");
    assert!(matches!(turns[0].0.parts[0], Part::Text(_)));
    assert_eq!(turns[1].0.tool_calls().count(), 2);
    assert!(turns[1].1.0.contains(&StreamEvent::ReasoningActivity));
    assert!(
        turns[1].0.parts.iter().all(|p| !matches!(p, Part::Text(_))),
        "reasoning never becomes text"
    );
    assert_eq!(
        turns[2].0.text(),
        "Fixed: `add` now adds, and `cargo test` passes."
    );

    let reqs = server.requests();
    assert_eq!(reqs.len(), 3);
    let format = match kind {
        ProviderKind::Anthropic => WireFormat::Anthropic,
        _ => WireFormat::OpenAi,
    };
    assert!(reqs.iter().all(|r| r.format == format));
    // The last request carries both results of the second turn, answering
    // the ids the server assigned.
    let last = &reqs[2].body;
    let text = last.to_string();
    for c in turns[1].0.tool_calls() {
        assert!(text.contains(&c.id), "{kind}: result for {} sent", c.id);
    }
    if kind == ProviderKind::Anthropic {
        let msgs = last["messages"].as_array().unwrap();
        let roles: Vec<&str> = msgs.iter().map(|m| m["role"].as_str().unwrap()).collect();
        assert_eq!(roles, ["user", "assistant", "user", "assistant", "user"]);
        assert_eq!(
            msgs[4]["content"].as_array().unwrap().len(),
            2,
            "results merged"
        );
    } else {
        let roles: Vec<&str> = last["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(
            roles,
            [
                "system",
                "user",
                "assistant",
                "tool",
                "assistant",
                "tool",
                "tool"
            ]
        );
    }
    // An append-only loop is cache friendly: by the last request most of the
    // prompt is read from the (simulated) cache.
    let rate = turns[2]
        .0
        .usage
        .cache_hit_rate()
        .expect("both categories reported");
    assert!(rate > 0.5, "{kind}: hit rate {rate}");
    server.shutdown().await;
}

#[tokio::test]
async fn anthropic_tool_loop() {
    tool_loop(ProviderKind::Anthropic).await;
}

#[tokio::test]
async fn openai_compatible_tool_loop() {
    tool_loop(ProviderKind::OpenAiCompatible).await;
}
