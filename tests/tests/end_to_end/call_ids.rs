//! Tool-call ids from any provider are safe, end to end over real HTTP
//! against the wire-format server: a compatible server that issues `call_0`
//! in two consecutive responses and then a call with no id at all leaves a
//! session that goes on, whose `/context` works, and whose every request is
//! one the server accepts (each call's results go back under the id the
//! server issued); and a store an older Latch wrote with repeated ids opens
//! and continues, its history unchanged.

use crate::providers::{Setup, setup};
use latch_engine_sdk::types::{Part, ToolCall, ToolResult};
use latch_kernel::{EventKind, ProviderCallId};
use latch_provider::fake::{Script, ScriptedTurn, WireFormat};
use serde_json::Value;

fn read_notes() -> ScriptedTurn {
    ScriptedTurn::tool_call("read_file", r#"{"path":"notes.txt"}"#)
}

/// The call ids of the session's assistant messages and the ids its
/// results answer, in log order.
fn stored_ids(s: &Setup) -> (Vec<String>, Vec<String>) {
    let (mut calls, mut results) = (Vec::new(), Vec::new());
    for e in s.all_events() {
        match e.kind {
            EventKind::AssistantMessage { parts } => {
                calls.extend(parts.into_iter().filter_map(|p| match p {
                    Part::ToolCall(c) => Some(c.id),
                    _ => None,
                }))
            }
            EventKind::ToolResult(r) => results.push(r.call_id),
            _ => {}
        }
    }
    (calls, results)
}

/// The ids of the tool calls (and of the `tool` messages answering them) of
/// a captured Chat Completions request.
fn chat_wire_ids(body: &Value) -> (Vec<String>, Vec<String>) {
    let messages = body["messages"].as_array().unwrap();
    let calls = messages
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    let results = messages
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    (calls, results)
}

#[test]
fn a_server_that_repeats_or_omits_call_ids_leaves_a_usable_session() {
    let s = setup(
        WireFormat::OpenAi,
        Script::new([
            read_notes().with_call_ids([Some("call_0".to_string())]),
            read_notes().with_call_ids([Some("call_0".to_string())]),
            read_notes().with_call_ids([None]),
            ScriptedTurn::text("The notes list alpha and beta."),
        ]),
        false,
        |_| {},
    );
    let mut agent = s.agent();
    let outcome = agent
        .run_turn("Read notes.txt, three times.", &mut |_| {})
        .unwrap_or_else(|e| panic!("the session broke on the provider's ids: {e}"));
    assert_eq!(outcome.final_text, "The notes list alpha and beta.");

    // Stored: unique ids, each result answering its own call.
    let (calls, results) = stored_ids(&s);
    assert_eq!(calls, ["call_0", "call_latch_2", "call_latch_3"]);
    assert_eq!(results, calls);
    // The provider's own ids ride beside the messages that got another.
    let recorded: Vec<Vec<ProviderCallId>> = s
        .all_events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::ProviderState(state) => Some(state.call_ids),
            _ => None,
        })
        .collect();
    let id = |call: &str, provider: &str| ProviderCallId {
        call: call.into(),
        provider: provider.into(),
    };
    assert_eq!(
        recorded,
        [
            vec![id("call_latch_2", "call_0")],
            vec![id("call_latch_3", "")]
        ]
    );

    // On the wire: the server got back the ids it issued, every request was
    // accepted (the server refuses a continuation that does not echo its
    // ids), and the call it gave no id went out with Latch's.
    let requests = s.server.requests();
    assert_eq!(requests.len(), 4, "no request was refused and retried");
    assert_eq!(s.server.remaining(), 0);
    assert_eq!(
        chat_wire_ids(&requests[2].body),
        (
            vec!["call_0".into(), "call_0".into()],
            vec!["call_0".into(), "call_0".into()]
        )
    );
    assert_eq!(
        chat_wire_ids(&requests[3].body),
        (
            vec!["call_0".into(), "call_0".into(), "call_latch_3".into()],
            vec!["call_0".into(), "call_0".into(), "call_latch_3".into()]
        )
    );

    // `latch context` and a resumed session go on.
    drop(agent);
    let mut resumed = s.agent();
    resumed
        .context_report()
        .unwrap_or_else(|e| panic!("/context failed: {e}"));
    s.server
        .push(read_notes().with_call_ids([Some("call_0".to_string())]));
    s.server.push(ScriptedTurn::text("Still alpha and beta."));
    let again = resumed
        .run_turn("And once more.", &mut |_| {})
        .unwrap_or_else(|e| panic!("the resumed session broke: {e}"));
    assert_eq!(again.final_text, "Still alpha and beta.");
    assert_eq!(stored_ids(&s).0[3], "call_latch_4");
}

/// What an older Latch committed for a server that said `call_0` twice and
/// once nothing: the provider's ids, stored as sent.
fn legacy_turn(s: &Setup) {
    let call = |id: &str| {
        Part::ToolCall(ToolCall {
            id: id.into(),
            name: "read_file".into(),
            arguments_json: r#"{"path":"notes.txt"}"#.into(),
        })
    };
    let result = |id: &str| {
        EventKind::ToolResult(ToolResult {
            call_id: id.into(),
            name: "read_file".into(),
            content: "alpha\nbeta\n".into(),
            is_error: false,
            images: vec![],
        })
    };
    let assistant = |id: &str| EventKind::AssistantMessage {
        parts: vec![call(id)],
    };
    s.store
        .append_batch(
            &s.session.id,
            vec![
                EventKind::user_text("Read notes.txt, three times."),
                assistant("call_0"),
                result("call_0"),
                assistant("call_0"),
                result("call_0"),
                assistant(""),
                result(""),
                EventKind::assistant_text("The notes list alpha and beta."),
                EventKind::RunFinished {
                    outcome: "completed".into(),
                },
            ],
        )
        .unwrap();
}

#[test]
fn a_store_an_older_build_wrote_with_repeated_ids_opens_and_continues() {
    for format in [WireFormat::OpenAi, WireFormat::Anthropic] {
        let s = setup(
            format,
            Script::new([
                ScriptedTurn::text("Hello."),
                ScriptedTurn::text("Yes: alpha and beta."),
            ]),
            false,
            |_| {},
        );
        // A first run records the session context as a real session would;
        // then the older build's turn.
        s.agent().run_turn("Hello", &mut |_| {}).unwrap();
        legacy_turn(&s);
        let before = s.all_events();

        let mut agent = s.agent();
        agent
            .context_report()
            .unwrap_or_else(|e| panic!("{format:?}: /context failed on the older store: {e}"));
        let outcome = agent
            .run_turn("Did the notes change?", &mut |_| {})
            .unwrap_or_else(|e| panic!("{format:?}: the older session cannot continue: {e}"));
        assert_eq!(outcome.final_text, "Yes: alpha and beta.");

        // History is not rewritten: the older events read back as stored.
        let after = s.all_events();
        assert_eq!(after[..before.len()], before[..], "{format:?}");
        // The request was one the server accepts, with unique ids where the
        // API pairs across the request.
        let requests = s.server.requests();
        let last = &requests.last().unwrap().body;
        if format == WireFormat::Anthropic {
            let ids: Vec<String> = last["messages"]
                .as_array()
                .unwrap()
                .iter()
                .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap().to_string())
                .collect();
            assert_eq!(ids, ["call_0", "call_latch_2", "call_latch_3"]);
        } else {
            assert_eq!(
                chat_wire_ids(last).0,
                ["call_0", "call_0", "call_latch_3"],
                "each call goes back under the id the server issued"
            );
        }
    }
}
