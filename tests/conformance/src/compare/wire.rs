//! Reading captured provider requests: the text a model was shown, the
//! tool calls and results it carries, and its canonical segments (the units
//! a provider's prompt cache matches on).
//!
//! Both wire formats are understood: Anthropic Messages (`system`, content
//! blocks, `tool_use` / `tool_result`) and OpenAI Chat Completions (string
//! contents, `tool_calls`, `role: tool`).

use latch_engine_sdk::estimate;
use latch_engine_sdk::types::EstimatorProfile;
use serde_json::{Value, json};

/// One tool call of a request and, when the same request answers it, its
/// result.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolExchange {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments object.
    pub input: Value,
    /// The result text, when the request carries it.
    pub result: Option<String>,
}

fn block_text(block: &Value) -> String {
    match block["type"].as_str() {
        Some("text") => block["text"].as_str().unwrap_or("").to_string(),
        Some("tool_use") => format!("tool_use {} {}", str_of(&block["name"]), block["input"]),
        Some("tool_result") => content_text(&block["content"]),
        _ => String::new(),
    }
}

fn str_of(v: &Value) -> &str {
    v.as_str().unwrap_or("")
}

/// The text of a `content` field: a string, or blocks joined by newlines.
fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().map(block_text).collect::<Vec<_>>().join("\n"),
        _ => String::new(),
    }
}

/// Everything a request shows the model, one part per line group: the
/// system prompt, every text, every tool call as `tool_use NAME ARGS` on
/// one line, and every tool result. Tool schemas are left out.
pub fn request_text(body: &Value) -> String {
    let mut out: Vec<String> = Vec::new();
    match &body["system"] {
        Value::String(s) => out.push(s.clone()),
        Value::Array(blocks) => out.extend(blocks.iter().map(block_text)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        out.push(content_text(&m["content"]));
        for call in m["tool_calls"].as_array().into_iter().flatten() {
            out.push(format!(
                "tool_use {} {}",
                str_of(&call["function"]["name"]),
                str_of(&call["function"]["arguments"])
            ));
        }
    }
    out.join("\n")
}

/// The text of the last user message (its text blocks only).
pub fn last_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|ms| ms.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            Value::Array(blocks) => blocks
                .iter()
                .filter(|b| b["type"] == "text")
                .map(|b| str_of(&b["text"]).to_string())
                .collect::<Vec<_>>()
                .join("\n"),
            _ => String::new(),
        })
        .unwrap_or_default()
}

/// Every tool call in the request, in order, each with its result when the
/// request carries one.
pub fn tool_exchanges(body: &Value) -> Vec<ToolExchange> {
    let mut calls: Vec<ToolExchange> = Vec::new();
    let answer = |id: &str, text: String, calls: &mut Vec<ToolExchange>| {
        if let Some(c) = calls.iter_mut().find(|c| c.id == id) {
            c.result = Some(text);
        }
    };
    for m in body["messages"].as_array().into_iter().flatten() {
        for b in m["content"].as_array().into_iter().flatten() {
            match b["type"].as_str() {
                Some("tool_use") => calls.push(ToolExchange {
                    id: str_of(&b["id"]).to_string(),
                    name: str_of(&b["name"]).to_string(),
                    input: b["input"].clone(),
                    result: None,
                }),
                Some("tool_result") => answer(
                    str_of(&b["tool_use_id"]),
                    content_text(&b["content"]),
                    &mut calls,
                ),
                _ => {}
            }
        }
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            calls.push(ToolExchange {
                id: str_of(&c["id"]).to_string(),
                name: str_of(&c["function"]["name"]).to_string(),
                input: serde_json::from_str(str_of(&c["function"]["arguments"]))
                    .unwrap_or(Value::Null),
                result: None,
            });
        }
        if m["role"] == "tool" {
            answer(
                str_of(&m["tool_call_id"]),
                content_text(&m["content"]),
                &mut calls,
            );
        }
    }
    calls
}

fn strip(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("cache_control");
    }
    v
}

/// The request cut into the segments a prompt cache matches on, each with
/// its canonical price: every tool schema, every system block, and every
/// message content block (a whole message when its content is a string),
/// serialized without `cache_control`.
pub fn segments(profile: EstimatorProfile, body: &Value) -> Vec<(String, u64)> {
    let mut segs: Vec<String> = Vec::new();
    for t in body["tools"].as_array().into_iter().flatten() {
        segs.push(strip(t).to_string());
    }
    match &body["system"] {
        Value::String(s) => segs.push(json!({ "system": s }).to_string()),
        Value::Array(blocks) => segs.extend(blocks.iter().map(|b| strip(b).to_string())),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        match &m["content"] {
            Value::Array(blocks) => {
                for b in blocks {
                    segs.push(json!({ "role": m["role"], "block": strip(b) }).to_string());
                }
            }
            _ => segs.push(strip(m).to_string()),
        }
    }
    segs.into_iter()
        .map(|s| {
            let t = estimate(profile, &s) as u64;
            (s, t)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body() -> Value {
        json!({
            "system": [{"type": "text", "text": "You are Latch.", "cache_control": {"type": "ephemeral"}}],
            "tools": [{"name": "shell", "input_schema": {}}],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "fix it"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Looking."},
                    {"type": "tool_use", "id": "t1", "name": "recall", "input": {"query": "code word"}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "TANGERINE-7731"},
                    {"type": "text", "text": "and then?"}
                ]}
            ]
        })
    }

    #[test]
    fn text_shows_system_texts_calls_and_results_but_not_schemas() {
        let text = request_text(&body());
        assert!(text.contains("You are Latch."));
        assert!(text.contains("fix it"));
        assert!(text.contains(r#"tool_use recall {"query":"code word"}"#));
        assert!(text.contains("TANGERINE-7731"));
        assert!(!text.contains("input_schema"));
        assert_eq!(last_user_text(&body()), "and then?");
    }

    #[test]
    fn tool_calls_are_paired_with_their_results() {
        let ex = tool_exchanges(&body());
        assert_eq!(ex.len(), 1);
        assert_eq!(ex[0].name, "recall");
        assert_eq!(ex[0].input["query"], "code word");
        assert_eq!(ex[0].result.as_deref(), Some("TANGERINE-7731"));
        let openai = json!({"messages": [
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "recall", "arguments": "{\"query\":\"x\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "c1", "content": "found"}
        ]});
        let ex = tool_exchanges(&openai);
        assert_eq!(ex[0].input["query"], "x");
        assert_eq!(ex[0].result.as_deref(), Some("found"));
    }

    #[test]
    fn segments_ignore_cache_breakpoints() {
        let mut b = body();
        let with = segments(EstimatorProfile::Anthropic, &b);
        b["system"][0]
            .as_object_mut()
            .unwrap()
            .remove("cache_control");
        assert_eq!(with, segments(EstimatorProfile::Anthropic, &b));
        assert_eq!(with.len(), 1 + 1 + 1 + 2 + 2, "tool, system, five blocks");
    }
}
