//! What the fake server puts on the wire: SSE streams and error bodies in
//! each provider's exact format, and the request checks the real services
//! also make (so a malformed request fails here as it would there).

use std::collections::HashSet;

/// Thinking blocks the server issued, as `(thinking, signature)`.
pub(crate) type IssuedThinking = HashSet<(String, String)>;

use serde_json::{Value, json};

use super::WireFormat;
use super::script::{ScriptedTurn, WireUsage};

/// One SSE event as text.
fn sse(event: Option<&str>, data: &Value) -> String {
    match event {
        Some(e) => format!("event: {e}\ndata: {data}\n\n"),
        None => format!("data: {data}\n\n"),
    }
}

/// Splits `s` into about `n` pieces on character boundaries.
pub(crate) fn pieces(s: &str, n: usize) -> Vec<String> {
    let chars: Vec<char> = s.chars().collect();
    if chars.is_empty() {
        return vec![];
    }
    let size = chars.len().div_ceil(n.max(1)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The Anthropic events of a scripted turn, through `message_stop`.
pub(crate) fn anthropic_events(
    turn: &ScriptedTurn,
    model: &str,
    message_id: &str,
    tool_ids: &[String],
    usage: WireUsage,
    thinking: Option<(&str, &str)>,
) -> Vec<String> {
    let mut start_usage = serde_json::Map::new();
    if let Some(v) = usage.input_tokens {
        start_usage.insert("input_tokens".into(), json!(v));
    }
    if let Some(v) = usage.cache_creation_tokens {
        start_usage.insert("cache_creation_input_tokens".into(), json!(v));
    }
    if let Some(v) = usage.cache_read_tokens {
        start_usage.insert("cache_read_input_tokens".into(), json!(v));
    }
    let mut out = vec![
        sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null,
                "usage": Value::Object(start_usage),
            }}),
        ),
        sse(Some("ping"), &json!({"type": "ping"})),
    ];
    let mut index = 0;
    if let Some((text, signature)) = thinking {
        out.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        ));
        for p in pieces(text, 2) {
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "thinking_delta", "thinking": p}}),
            ));
        }
        out.push(sse(
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": {"type": "signature_delta", "signature": signature}}),
        ));
        out.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    if let Some(text) = turn.text.as_deref().filter(|t| !t.is_empty()) {
        out.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        ));
        for p in pieces(text, 3) {
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "text_delta", "text": p}}),
            ));
        }
        out.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    for ((name, args), id) in turn.tool_calls.iter().zip(tool_ids) {
        out.push(sse(
            Some("content_block_start"),
            &json!({"type": "content_block_start", "index": index, "content_block": {"type": "tool_use", "id": id, "name": name, "input": {}}}),
        ));
        for p in pieces(args, 2) {
            out.push(sse(
                Some("content_block_delta"),
                &json!({"type": "content_block_delta", "index": index, "delta": {"type": "input_json_delta", "partial_json": p}}),
            ));
        }
        out.push(sse(
            Some("content_block_stop"),
            &json!({"type": "content_block_stop", "index": index}),
        ));
        index += 1;
    }
    let stop = turn.stop_reason.clone().unwrap_or_else(|| {
        if turn.tool_calls.is_empty() {
            "end_turn".into()
        } else {
            "tool_use".into()
        }
    });
    let mut delta =
        json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}});
    if let Some(o) = usage.output_tokens {
        delta["usage"] = json!({"output_tokens": o});
    }
    out.push(sse(Some("message_delta"), &delta));
    out.push(sse(Some("message_stop"), &json!({"type": "message_stop"})));
    out
}

/// The start of an Anthropic stream followed by an `error` event.
pub(crate) fn anthropic_error_events(
    model: &str,
    message_id: &str,
    kind: &str,
    message: &str,
) -> Vec<String> {
    vec![
        sse(
            Some("message_start"),
            &json!({"type": "message_start", "message": {
                "id": message_id, "type": "message", "role": "assistant", "model": model,
                "content": [], "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1},
            }}),
        ),
        sse(
            Some("error"),
            &json!({"type": "error", "error": {"type": kind, "message": message}}),
        ),
    ]
}

fn openai_chunk(id: &str, model: &str, delta: Value, finish: Option<&str>) -> Value {
    json!({
        "id": id, "object": "chat.completion.chunk", "created": 0, "model": model,
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    })
}

/// The OpenAI chunks of a scripted turn, through `data: [DONE]`.
pub(crate) fn openai_events(
    turn: &ScriptedTurn,
    model: &str,
    completion_id: &str,
    tool_ids: &[String],
    usage: WireUsage,
    include_usage: bool,
) -> Vec<String> {
    let id = completion_id;
    let mut out = vec![sse(
        None,
        &openai_chunk(id, model, json!({"role": "assistant", "content": ""}), None),
    )];
    if turn.reasoning {
        out.push(sse(
            None,
            &openai_chunk(
                id,
                model,
                json!({"reasoning_content": "Considering the request."}),
                None,
            ),
        ));
    }
    if let Some(text) = turn.text.as_deref() {
        for p in pieces(text, 3) {
            out.push(sse(
                None,
                &openai_chunk(id, model, json!({"content": p}), None),
            ));
        }
    }
    for (i, ((name, args), call_id)) in turn.tool_calls.iter().zip(tool_ids).enumerate() {
        let mut call = json!({"index": i, "id": call_id, "type": "function", "function": {"name": name, "arguments": ""}});
        if call_id.is_empty() {
            // A server that issues no ids leaves the key out.
            call.as_object_mut().map(|c| c.remove("id"));
        }
        out.push(sse(
            None,
            &openai_chunk(id, model, json!({"tool_calls": [call]}), None),
        ));
        for p in pieces(args, 2) {
            out.push(sse(
                None,
                &openai_chunk(
                    id,
                    model,
                    json!({"tool_calls": [{"index": i, "function": {"arguments": p}}]}),
                    None,
                ),
            ));
        }
    }
    let finish = turn.stop_reason.clone().unwrap_or_else(|| {
        if turn.tool_calls.is_empty() {
            "stop".into()
        } else {
            "tool_calls".into()
        }
    });
    out.push(sse(
        None,
        &openai_chunk(id, model, json!({}), Some(&finish)),
    ));
    let any_usage = usage.input_tokens.is_some()
        || usage.output_tokens.is_some()
        || usage.cache_read_tokens.is_some();
    if include_usage && any_usage {
        let mut u = serde_json::Map::new();
        if let Some(v) = usage.input_tokens {
            u.insert("prompt_tokens".into(), json!(v));
        }
        if let Some(v) = usage.output_tokens {
            u.insert("completion_tokens".into(), json!(v));
        }
        if let (Some(i), Some(o)) = (usage.input_tokens, usage.output_tokens) {
            u.insert("total_tokens".into(), json!(i + o));
        }
        if let Some(c) = usage.cache_read_tokens {
            u.insert("prompt_tokens_details".into(), json!({"cached_tokens": c}));
        }
        out.push(sse(
            None,
            &json!({"id": id, "object": "chat.completion.chunk", "created": 0, "model": model, "choices": [], "usage": Value::Object(u)}),
        ));
    }
    out.push("data: [DONE]\n\n".to_string());
    out
}

/// The start of an OpenAI stream followed by an error chunk.
pub(crate) fn openai_error_events(
    model: &str,
    completion_id: &str,
    kind: &str,
    message: &str,
) -> Vec<String> {
    vec![
        sse(
            None,
            &openai_chunk(
                completion_id,
                model,
                json!({"role": "assistant", "content": ""}),
                None,
            ),
        ),
        sse(
            None,
            &json!({"error": {"message": message, "type": kind, "param": null, "code": null}}),
        ),
    ]
}

/// An error body in the provider's format.
pub(crate) fn error_body(format: WireFormat, status: u16, message: &str) -> Value {
    match format {
        WireFormat::Anthropic => {
            let kind = match status {
                400 => "invalid_request_error",
                401 => "authentication_error",
                403 => "permission_error",
                404 => "not_found_error",
                413 => "request_too_large",
                429 => "rate_limit_error",
                529 => "overloaded_error",
                _ => "api_error",
            };
            json!({"type": "error", "error": {"type": kind, "message": message}})
        }
        WireFormat::OpenAi | WireFormat::Responses => {
            let (kind, code) = match status {
                401 => ("invalid_request_error", json!("invalid_api_key")),
                404 => ("invalid_request_error", json!("model_not_found")),
                429 => ("requests", json!("rate_limit_exceeded")),
                s if s >= 500 => ("server_error", Value::Null),
                _ => ("invalid_request_error", Value::Null),
            };
            json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
        }
    }
}

/// Checks an Anthropic Messages request the way the service does,
/// including extended thinking: a `thinking` block must carry a signature
/// this server issued for exactly its text, and with thinking enabled the
/// last assistant turn of a tool loop must open with its thinking.
pub(crate) fn check_anthropic(body: &Value, issued: &IssuedThinking) -> Result<(), String> {
    check_anthropic_messages(body, issued)?;
    check_thinking_config(body)
}

fn check_thinking_config(body: &Value) -> Result<(), String> {
    let Some(t) = body.get("thinking") else {
        return Ok(());
    };
    if t["type"] != "enabled" {
        return Ok(());
    }
    let budget = t["budget_tokens"].as_u64().unwrap_or(0);
    if budget < 1024 {
        return Err(
            "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024".into(),
        );
    }
    if budget >= body["max_tokens"].as_u64().unwrap_or(0) {
        return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    // The tool loop in progress: the last user message answers tool calls.
    let last_is_results = messages.last().is_some_and(|m| {
        m["role"] == "user"
            && m["content"]
                .as_array()
                .is_some_and(|c| c.iter().any(|b| b["type"] == "tool_result"))
    });
    if last_is_results && messages.len() >= 2 {
        let i = messages.len() - 2;
        let first = messages[i]["content"]
            .as_array()
            .and_then(|c| c.first())
            .and_then(|b| b["type"].as_str())
            .unwrap_or("");
        if first != "thinking" && first != "redacted_thinking" {
            return Err(format!(
                "messages.{i}.content.0.type: Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks). We recommend you include thinking blocks from previous turns."
            ));
        }
    }
    Ok(())
}

fn check_anthropic_messages(body: &Value, issued: &IssuedThinking) -> Result<(), String> {
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        return Err("model: Field required".into());
    }
    if !body["max_tokens"].is_u64() {
        return Err("max_tokens: Field required".into());
    }
    if body["stream"] != json!(true) {
        return Err("stream: this server only answers streaming requests".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("messages: at least one message is required".into());
    };
    let mut breakpoints = 0;
    let mut count_bp = |v: &Value| {
        if v.get("cache_control").is_some_and(|c| !c.is_null()) {
            breakpoints += 1;
        }
    };
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .for_each(&mut count_bp);
    body["system"]
        .as_array()
        .into_iter()
        .flatten()
        .for_each(&mut count_bp);
    let mut prev_role = "";
    let mut open_calls: Vec<String> = Vec::new();
    let mut tool_use_ids: HashSet<String> = HashSet::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role != "user" && role != "assistant" {
            return Err(format!(
                "messages.{i}.role: Input should be 'user' or 'assistant'"
            ));
        }
        if role == prev_role {
            return Err(format!(
                "messages.{i}: roles must alternate between \"user\" and \"assistant\""
            ));
        }
        let blocks: Vec<Value> = match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(a) if !a.is_empty() => a.clone(),
            _ => {
                return Err(format!(
                    "messages.{i}.content: must be a string or a non-empty list"
                ));
            }
        };
        let mut answered = HashSet::new();
        let mut seen_other = false;
        let mut calls = Vec::new();
        for (j, b) in blocks.iter().enumerate() {
            count_bp(b);
            match (b["type"].as_str().unwrap_or(""), role) {
                ("text", _) => {
                    if b["text"].as_str().is_none_or(|t| t.is_empty()) {
                        return Err(format!(
                            "messages.{i}.content.{j}.text: text content blocks must be non-empty"
                        ));
                    }
                    seen_other = true;
                }
                ("image", "user") => {
                    if b["source"]["type"] != "base64" || !b["source"]["data"].is_string() {
                        return Err(format!(
                            "messages.{i}.content.{j}.source: invalid image source"
                        ));
                    }
                    seen_other = true;
                }
                ("thinking", "assistant") => {
                    if b.as_object().is_some_and(|o| {
                        o.keys()
                            .any(|k| !matches!(k.as_str(), "type" | "thinking" | "signature"))
                    }) {
                        return Err(format!(
                            "messages.{i}.content.{j}.thinking: Extra inputs are not permitted"
                        ));
                    }
                    let text = b["thinking"].as_str().unwrap_or("").to_string();
                    let sig = b["signature"].as_str().unwrap_or("").to_string();
                    if !issued.contains(&(text, sig)) {
                        return Err(format!(
                            "messages.{i}.content.{j}: Invalid `signature` in `thinking` block"
                        ));
                    }
                }
                ("redacted_thinking", "assistant") => {
                    if !b["data"].is_string() {
                        return Err(format!("messages.{i}.content.{j}.data: Field required"));
                    }
                }
                ("tool_use", "assistant") => {
                    if !b["input"].is_object() {
                        return Err(format!(
                            "messages.{i}.content.{j}.input: Input should be an object"
                        ));
                    }
                    let id = b["id"].as_str().unwrap_or("").to_string();
                    if id.is_empty()
                        || !id
                            .bytes()
                            .all(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b'-')
                    {
                        return Err(format!(
                            "messages.{i}.content.{j}.id: String should match pattern '^[a-zA-Z0-9_-]+$'"
                        ));
                    }
                    if !tool_use_ids.insert(id.clone()) {
                        return Err(format!(
                            "messages.{i}.content.{j}: `tool_use` ids must be unique"
                        ));
                    }
                    calls.push(id);
                }
                ("tool_result", "user") => {
                    if seen_other {
                        return Err(format!(
                            "messages.{i}: tool_result blocks must come first in the user message"
                        ));
                    }
                    let id = b["tool_use_id"].as_str().unwrap_or("");
                    if !open_calls.iter().any(|c| c == id) {
                        return Err(format!(
                            "messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {id}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                        ));
                    }
                    answered.insert(id.to_string());
                }
                (other, _) => {
                    return Err(format!(
                        "messages.{i}.content.{j}: block type {other:?} is not allowed in a {role} message"
                    ));
                }
            }
        }
        if role == "user" {
            if let Some(missing) = open_calls.iter().find(|c| !answered.contains(*c)) {
                return Err(format!(
                    "messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {missing}"
                ));
            }
            open_calls.clear();
        } else {
            open_calls = calls;
        }
        prev_role = if role == "user" { "user" } else { "assistant" };
    }
    if breakpoints > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {breakpoints}."
        ));
    }
    Ok(())
}

/// Checks a Chat Completions request the way OpenAI does.
pub(crate) fn check_openai(body: &Value) -> Result<(), String> {
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        return Err("you must provide a model parameter".into());
    }
    if body["stream"] != json!(true) {
        return Err("stream: this server only answers streaming requests".into());
    }
    let Some(messages) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        return Err("'messages' must contain at least one message".into());
    };
    let mut open: Vec<String> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("");
        if role != "tool" && !open.is_empty() {
            return Err(format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                open.join(", ")
            ));
        }
        match role {
            "system" | "developer" | "user" => {
                if !(m["content"].is_string() || m["content"].is_array()) {
                    return Err(format!(
                        "messages[{i}].content: expected a string or an array"
                    ));
                }
            }
            "assistant" => {
                if let Some(calls) = m["tool_calls"].as_array() {
                    for c in calls {
                        if !c["function"]["arguments"].is_string() {
                            return Err(format!(
                                "messages[{i}].tool_calls: arguments must be a string"
                            ));
                        }
                        if c["id"].as_str().is_none_or(str::is_empty) {
                            return Err(format!(
                                "messages[{i}].tool_calls: Missing required parameter: 'id'."
                            ));
                        }
                        open.push(c["id"].as_str().unwrap_or("").to_string());
                    }
                } else if !m["content"].is_string() {
                    return Err(format!(
                        "messages[{i}]: an assistant message needs content or tool_calls"
                    ));
                }
            }
            "tool" => {
                let id = m["tool_call_id"].as_str().unwrap_or("");
                let Some(pos) = open.iter().position(|c| c == id) else {
                    return Err(format!(
                        "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' ({id})."
                    ));
                };
                open.remove(pos);
            }
            other => return Err(format!("messages[{i}].role: invalid role {other:?}")),
        }
    }
    if !open.is_empty() {
        return Err(format!(
            "The following tool_call_ids did not have response messages: {}",
            open.join(", ")
        ));
    }
    Ok(())
}
