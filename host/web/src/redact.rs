//! What of a committed event may leave the server: the one place events
//! are turned into JSON for the web (the event stream's `data`).
//!
//! Surfaces show that the provider reported reasoning, never its text.
//! `provider_state` events hold Anthropic thinking blocks (their text in
//! the clear) and OpenAI reasoning items (encrypted content, and summaries
//! in the clear) that only the host replays to the provider; the web gets
//! the event's kind, the wire and how many blocks there were. Every other
//! kind this build knows is listed in [`SENT_AS_STORED`] and goes out as
//! stored. A kind in neither list (added to the kernel later and not yet
//! judged here) goes out as its name alone, with `withheld: true`: nothing
//! new leaves the server until someone decides it may.

use latch_kernel::{EventKind, StoredEvent};
use serde_json::{Value, json};

/// The kinds whose data the web sends as stored: none carries reasoning.
pub const SENT_AS_STORED: &[&str] = &[
    // Provider, base URL (credentials stripped), model and modes: no key.
    "session_profile",
    "user_message",
    "assistant_message",
    "tool_result",
    "kernel_context",
    "notification_delivered",
    "manual_compact",
    "state_update",
    "mutation",
    "file_observed",
    "external_change",
    "validation",
    "process_started",
    "process_exited",
    "certification_attempt",
    // What repeats (a lineage summary the transcript already shows).
    "reground",
    "tool_denied",
    "hook_ran",
    "provider_usage",
    "child_spawned",
    "agent_resumed",
    "agent_report",
    "agent_notification_delivered",
    "agent_report_received",
    "agent_message_queued",
    "agent_message_delivered",
    "run_started",
    "run_finished",
    "run_interrupted",
    "tombstone",
    "permission_requested",
    "permission_granted",
    "permission_denied",
    "group",
    "group_message_delivered",
    // A path and the hash of the bytes a write replaced (never the bytes).
    "checkpoint",
    // The user message rewound before and the files restored or removed.
    "rewound",
    // A nested directory's instructions files (workspace text the model
    // reads, as a `read_file` result carries it).
    "instructions_loaded",
    // The source and command about to run, and a git tree id: like `mutation`.
    "mutation_pending",
];

/// The kinds the web sends without (all of) their data: reasoning only as
/// the fact that it was reported; a model request's record (the system
/// prompt and every tool schema, tens of kilobytes a request, there for
/// `latch engine replay`) as the engine asked and the budget.
pub const REDACTED: &[&str] = &["provider_state", "model_request"];

/// A committed event as the web sends it: `{seq, session, time_ms, event}`
/// with the event passed through [`event`].
pub fn stored(e: &StoredEvent) -> Value {
    json!({ "seq": e.seq, "session": e.session, "time_ms": e.time_ms, "event": event(&e.kind) })
}

/// An event kind as the web sends it (`{"kind": …, "data": …}`): reasoning
/// reduced to the fact that it was reported, unknown kinds withheld.
pub fn event(kind: &EventKind) -> Value {
    let name = kind.kind_name();
    match kind {
        EventKind::ProviderState(state) => json!({
            "kind": name,
            "data": {
                "wire": state.wire,
                "blocks": state.blocks.len(),
                "reasoning": "reported",
            },
        }),
        EventKind::ModelRequest(record) => json!({
            "kind": name,
            "data": { "engine": record.engine, "budget": record.budget },
        }),
        _ if SENT_AS_STORED.contains(&name) => {
            serde_json::to_value(kind).unwrap_or_else(|_| withheld(name))
        }
        _ => withheld(name),
    }
}

fn withheld(name: &str) -> Value {
    json!({ "kind": name, "data": null, "withheld": true })
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_kernel::event::KNOWN_KINDS;
    use latch_kernel::{OpaqueBlock, OpaqueState};

    #[test]
    fn every_known_kind_is_judged_once() {
        for kind in KNOWN_KINDS {
            let sent = SENT_AS_STORED.contains(kind);
            let redacted = REDACTED.contains(kind);
            assert!(
                sent ^ redacted,
                "event kind `{kind}` must be in exactly one of SENT_AS_STORED or REDACTED \
                 (host/web/src/redact.rs): decide whether the web may send its data"
            );
        }
        for kind in SENT_AS_STORED.iter().chain(REDACTED) {
            assert!(KNOWN_KINDS.contains(kind), "`{kind}` is not a known kind");
        }
    }

    #[test]
    fn a_model_request_reaches_the_page_without_its_prompt_or_schemas() {
        let record = latch_kernel::RequestRecord {
            engine: "builtin:continuity".into(),
            budget: latch_engine_sdk::types::ContextBudget {
                context_window_tokens: 32_000,
                reserve_tokens: 8_000,
                recent_tokens: 64_000,
                tools_tokens: 1_200,
                extension_tokens: 0,
            },
            query: Some("the user's words".into()),
            shape: Some(latch_kernel::RequestShape {
                system_prompt: "SYSTEM PROMPT TEXT".into(),
                tools: vec![json!({"name": "shell"})],
                extensions: vec![],
                model: "m".into(),
                wire: "anthropic".into(),
                max_tokens: 8_192,
            }),
        };
        let sent = event(&EventKind::ModelRequest(record)).to_string();
        assert!(sent.contains("builtin:continuity"), "{sent}");
        assert!(sent.contains("32000"), "{sent}");
        for secret in ["SYSTEM PROMPT TEXT", "\"shell\"", "the user's words"] {
            assert!(!sent.contains(secret), "{secret} sent to the page: {sent}");
        }
    }

    #[test]
    fn thinking_text_and_reasoning_items_never_leave() {
        let state = EventKind::ProviderState(OpaqueState {
            wire: "anthropic".into(),
            blocks: vec![
                OpaqueBlock {
                    before_part: 0,
                    json: r#"{"type":"thinking","thinking":"SECRET PLAN","signature":"c2ln"}"#
                        .into(),
                },
                OpaqueBlock {
                    before_part: 0,
                    json: r#"{"type":"reasoning","summary":[{"text":"SECRET SUMMARY"}],"encrypted_content":"ENCRYPTED"}"#
                        .into(),
                },
            ],
            call_ids: vec![],
        });
        let sent = event(&state).to_string();
        for secret in ["SECRET", "c2ln", "ENCRYPTED", "thinking\":"] {
            assert!(!sent.contains(secret), "{secret} in {sent}");
        }
        let value = event(&state);
        assert_eq!(value["kind"], "provider_state");
        assert_eq!(value["data"]["blocks"], 2);
        assert_eq!(value["data"]["reasoning"], "reported");
        // Other kinds go out as stored.
        let text = EventKind::assistant_text("visible answer");
        assert_eq!(event(&text), serde_json::to_value(&text).unwrap());
    }
}
