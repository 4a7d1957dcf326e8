//! The model-callable `recall` tool.
//!
//! Rotation moves old conversation out of working memory, never out of the
//! session: the episode index tells the model what lies in the archive, and
//! this tool reads it back. The loop answers a `recall` call itself, through
//! the session's engine (`recall` of the port: the newest matches selected,
//! presented in chronological order, originals only), and commits the answer
//! as an ordinary bounded tool result, so it is durable and replays exactly.
//! The answer is not indexed for search (see
//! [`latch_engine_sdk::event_search_text`]): a later recall finds the
//! originals, not this copy of them.

use latch_engine_sdk::types::{EstimatorProfile, Event, ToolCall, ToolResult};
use latch_engine_sdk::{RECALL_TOOL, event_label, event_search_text, truncate_tokens};
use latch_kernel::bound_tool_output;
use latch_provider::ToolSchema;
use serde_json::{Value, json};

/// Events a call returns when it names no limit.
pub const DEFAULT_LIMIT: u32 = 8;
/// Most events one call may return.
pub const MAX_LIMIT: u32 = 20;
/// Longest query, in characters.
pub const MAX_QUERY_CHARS: usize = 500;
/// The bound of all recalled text of one answer, in tokens (the bound of
/// every tool result; see [`latch_kernel::bound_tool_output`]).
const ANSWER_TOKENS: u64 = 7_600;

/// The tool's schema (byte-stable: it is part of the cached prefix).
pub fn schema() -> ToolSchema {
    ToolSchema {
        name: RECALL_TOOL.to_string(),
        description: "Read original events back from this session's durable log: earlier user \
                      messages, tool output, diagnostics and decisions that have left your working \
                      memory (the episode index lists what lies in the archive). Searches by \
                      keywords (a command, a path, an error code, a name); returns the newest \
                      matching events, oldest first, verbatim."
            .to_string(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Plain keywords to search for; no operators."
                },
                "limit": {
                    "type": "integer",
                    "description": format!("Most events to return (default {DEFAULT_LIMIT}, at most {MAX_LIMIT}).")
                }
            },
            "required": ["query"],
            "additionalProperties": false
        }),
    }
}

/// The arguments of one call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecallArgs {
    /// The keywords.
    pub query: String,
    /// Most events to return.
    pub limit: u32,
}

/// Parse a call's arguments; the error is the tool result the model sees.
pub fn parse(call: &ToolCall) -> Result<RecallArgs, String> {
    let value: Value = serde_json::from_str(&call.arguments_json).map_err(|e| {
        format!(
            "recall: the arguments are not a JSON object ({e}); pass {{\"query\": \"keywords\"}}"
        )
    })?;
    let Some(obj) = value.as_object() else {
        return Err(
            "recall: the arguments must be a JSON object like {\"query\": \"keywords\"}".into(),
        );
    };
    if let Some(key) = obj.keys().find(|k| *k != "query" && *k != "limit") {
        return Err(format!(
            "recall: unknown argument `{key}`; it takes `query` and optionally `limit`"
        ));
    }
    let query = match obj.get("query") {
        Some(Value::String(q)) if !q.trim().is_empty() => q.trim().to_string(),
        Some(Value::String(_)) => return Err("recall: `query` is empty; give keywords".into()),
        Some(other) => return Err(format!("recall: `query` must be a string, got {other}")),
        None => return Err("recall: `query` is required".into()),
    };
    if query.chars().count() > MAX_QUERY_CHARS {
        return Err(format!(
            "recall: `query` is longer than {MAX_QUERY_CHARS} characters; use a few distinctive keywords"
        ));
    }
    let limit = match obj.get("limit") {
        None | Some(Value::Null) => DEFAULT_LIMIT,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=MAX_LIMIT as u64).contains(&n) => n as u32,
            _ => {
                return Err(format!(
                    "recall: `limit` must be an integer from 1 to {MAX_LIMIT}, got {v}"
                ));
            }
        },
    };
    Ok(RecallArgs { query, limit })
}

/// The tool result for recalled `events` (chronological, as the engine
/// returned them), bounded like every tool result.
pub fn answer(
    call: &ToolCall,
    query: &str,
    events: &[Event],
    profile: EstimatorProfile,
) -> ToolResult {
    let content = if events.is_empty() {
        format!(
            "No event of this session matches \"{query}\". Try other keywords: a command, a path, an error code."
        )
    } else {
        let each = (ANSWER_TOKENS / events.len() as u64).max(200);
        let mut text = format!(
            "{} original event{} matching \"{query}\" (newest matches, oldest first):",
            events.len(),
            if events.len() == 1 { "" } else { "s" }
        );
        for e in events {
            text.push_str(&format!(
                "\n\n--- event {} · {}\n{}",
                e.seq,
                event_label(&e.body),
                truncate_tokens(profile, &event_search_text(&e.body), each)
            ));
        }
        text
    };
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: bound_tool_output(&content, profile),
        is_error: false,
        images: vec![],
    }
}

/// A failed call's tool result: the model sees why and may try again.
pub fn failed(call: &ToolCall, message: String) -> ToolResult {
    ToolResult {
        call_id: call.id.clone(),
        name: call.name.clone(),
        content: message,
        is_error: true,
        images: vec![],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latch_engine_sdk::types::EventBody;

    fn call(args: &str) -> ToolCall {
        ToolCall {
            id: "c1".into(),
            name: RECALL_TOOL.into(),
            arguments_json: args.into(),
        }
    }

    #[test]
    fn arguments_are_checked_with_clear_errors() {
        assert_eq!(
            parse(&call(r#"{"query":" E0599 frobnicate "}"#)),
            Ok(RecallArgs {
                query: "E0599 frobnicate".into(),
                limit: DEFAULT_LIMIT
            })
        );
        assert_eq!(parse(&call(r#"{"query":"x","limit":3}"#)).unwrap().limit, 3);
        for (args, says) in [
            ("not json", "not a JSON object"),
            ("[1]", "must be a JSON object"),
            (r#"{"q":"x"}"#, "unknown argument `q`"),
            (r#"{"query":""}"#, "empty"),
            (r#"{"query":3}"#, "must be a string"),
            (r#"{"limit":3}"#, "`query` is required"),
            (r#"{"query":"x","limit":0}"#, "from 1 to 20"),
            (r#"{"query":"x","limit":21}"#, "from 1 to 20"),
        ] {
            let err = parse(&call(args)).unwrap_err();
            assert!(err.contains(says), "{args}: {err}");
        }
        let long = format!(r#"{{"query":"{}"}}"#, "w ".repeat(400));
        assert!(parse(&call(&long)).unwrap_err().contains("longer than"));
    }

    #[test]
    fn the_answer_lists_originals_in_order_within_the_bound() {
        let events: Vec<Event> = (0..20)
            .map(|i| Event {
                seq: 10 + i,
                time_ms: 0,
                body: EventBody::Notification(format!("note {i} {}", "x".repeat(9_000))),
            })
            .collect();
        let r = answer(&call("{}"), "note", &events, EstimatorProfile::Openai);
        assert!(!r.is_error);
        assert!(
            r.content
                .starts_with("20 original events matching \"note\"")
        );
        let first = r.content.find("--- event 10 ").expect("first event");
        let second = r.content.find("--- event 11 ").expect("second event");
        assert!(first < second, "chronological");
        assert!(r.content.len() <= latch_kernel::READ_MAX_BYTES);
        let none = answer(&call("{}"), "zzz", &[], EstimatorProfile::Openai);
        assert!(
            none.content
                .contains("No event of this session matches \"zzz\"")
        );
    }
}
