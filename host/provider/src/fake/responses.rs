//! The fake server's OpenAI Responses wire: the `response.*` event stream of
//! a scripted turn and the request checks the real service makes, as
//! strictly: unknown parameters and item fields are refused, stored items
//! cannot be referenced when `store` is false, every function call needs
//! its output, and a function call the server issued together with a
//! reasoning item must come back with that reasoning item (and its
//! encrypted content, unaltered) before it.

use std::collections::{HashMap, HashSet};

use serde_json::{Value, json};

use super::script::{ScriptedTurn, WireUsage};
use super::wire::pieces;

/// Reasoning the server issued: what a later request must send back.
#[derive(Debug, Default)]
pub(crate) struct IssuedReasoning {
    /// Reasoning item id → its encrypted content.
    pub(crate) items: HashMap<String, String>,
    /// Function call id → the reasoning item issued with it.
    pub(crate) calls: HashMap<String, String>,
}

const TOP_LEVEL: &[&str] = &[
    "model",
    "input",
    "instructions",
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "store",
    "stream",
    "include",
    "prompt_cache_key",
    "reasoning",
    "max_output_tokens",
    "text",
    "temperature",
    "top_p",
    "metadata",
    "service_tier",
    "truncation",
    "user",
    "safety_identifier",
    "previous_response_id",
];
const INCLUDABLE: &[&str] = &[
    "reasoning.encrypted_content",
    "message.output_text.logprobs",
    "file_search_call.results",
    "web_search_call.action.sources",
];

fn unknown_keys(v: &Value, allowed: &[&str], at: &str) -> Result<(), String> {
    let Some(o) = v.as_object() else {
        return Err(format!("Invalid type for '{at}': expected an object."));
    };
    match o.keys().find(|k| !allowed.contains(&k.as_str())) {
        Some(k) if at.is_empty() => Err(format!("Unknown parameter: '{k}'.")),
        Some(k) => Err(format!("Unknown parameter: '{at}.{k}'.")),
        None => Ok(()),
    }
}

/// Checks a Responses request the way the service does.
pub(crate) fn check(body: &Value, issued: &IssuedReasoning) -> Result<(), String> {
    unknown_keys(body, TOP_LEVEL, "")?;
    if body["model"].as_str().is_none_or(|m| m.is_empty()) {
        return Err("Missing required parameter: 'model'.".into());
    }
    if body["stream"] != json!(true) {
        return Err("stream: this server only answers streaming requests".into());
    }
    let stateless = body["store"] == json!(false);
    if let Some(include) = body.get("include") {
        for v in include
            .as_array()
            .ok_or("Invalid type for 'include': expected an array.")?
        {
            let s = v.as_str().unwrap_or("");
            if !INCLUDABLE.contains(&s) {
                return Err(format!("Invalid value: '{s}' in 'include'."));
            }
        }
    }
    if let Some(r) = body.get("reasoning") {
        unknown_keys(r, &["effort", "summary"], "reasoning")?;
        if let Some(e) = r.get("effort")
            && !matches!(e.as_str(), Some("minimal" | "low" | "medium" | "high"))
        {
            return Err(format!(
                "Invalid value: {e} for 'reasoning.effort'. Supported values are: 'minimal', 'low', 'medium', and 'high'."
            ));
        }
    }
    for (i, t) in body["tools"].as_array().into_iter().flatten().enumerate() {
        unknown_keys(
            t,
            &["type", "name", "description", "parameters", "strict"],
            &format!("tools[{i}]"),
        )?;
        if t["type"] != "function" || t["name"].as_str().is_none_or(str::is_empty) {
            return Err(format!("Missing required parameter: 'tools[{i}].name'."));
        }
    }
    let Some(input) = body["input"].as_array().filter(|a| !a.is_empty()) else {
        return Err("Missing required parameter: 'input'.".into());
    };
    let mut calls: Vec<String> = Vec::new();
    let mut answered: HashSet<String> = HashSet::new();
    let mut reasoning_seen: HashSet<String> = HashSet::new();
    for (i, item) in input.iter().enumerate() {
        let at = format!("input[{i}]");
        let kind = item["type"].as_str().unwrap_or("message");
        match kind {
            "message" => {
                unknown_keys(item, &["type", "role", "content", "id", "status"], &at)?;
                if stateless && item.get("id").is_some() {
                    return Err(not_persisted(&item["id"]));
                }
                let role = item["role"].as_str().unwrap_or("");
                let allowed: &[&str] = match role {
                    "user" | "system" | "developer" => &["input_text", "input_image"],
                    "assistant" => &["output_text", "refusal"],
                    other => {
                        return Err(format!(
                            "Invalid value: '{other}'. Supported values are: 'assistant', 'system', 'developer', and 'user'."
                        ));
                    }
                };
                match &item["content"] {
                    Value::String(_) => {}
                    Value::Array(parts) => {
                        for (j, p) in parts.iter().enumerate() {
                            let t = p["type"].as_str().unwrap_or("");
                            if !allowed.contains(&t) {
                                return Err(format!(
                                    "Invalid value: '{t}' at '{at}.content[{j}]'. Supported values are: {}.",
                                    allowed
                                        .iter()
                                        .map(|a| format!("'{a}'"))
                                        .collect::<Vec<_>>()
                                        .join(" and ")
                                ));
                            }
                            let keys: &[&str] = match t {
                                "input_image" => &["type", "image_url", "detail", "file_id"],
                                "output_text" => &["type", "text", "annotations", "logprobs"],
                                "refusal" => &["type", "refusal"],
                                _ => &["type", "text"],
                            };
                            unknown_keys(p, keys, &format!("{at}.content[{j}]"))?;
                        }
                    }
                    _ => return Err(format!("Missing required parameter: '{at}.content'.")),
                }
            }
            "reasoning" => {
                unknown_keys(
                    item,
                    &[
                        "type",
                        "id",
                        "summary",
                        "encrypted_content",
                        "content",
                        "status",
                    ],
                    &at,
                )?;
                let id = item["id"].as_str().unwrap_or("");
                if !item["summary"].is_array() {
                    return Err(format!("Missing required parameter: '{at}.summary'."));
                }
                if stateless {
                    let Some(enc) = item["encrypted_content"].as_str() else {
                        return Err(not_persisted(&item["id"]));
                    };
                    if issued.items.get(id).map(String::as_str) != Some(enc) {
                        return Err(format!(
                            "The encrypted content for item {id} could not be verified."
                        ));
                    }
                }
                reasoning_seen.insert(id.to_string());
            }
            "function_call" => {
                unknown_keys(
                    item,
                    &["type", "call_id", "name", "arguments", "id", "status"],
                    &at,
                )?;
                if stateless && item.get("id").is_some() {
                    return Err(not_persisted(&item["id"]));
                }
                if !item["arguments"].is_string() || item["name"].as_str().is_none() {
                    return Err(format!("Missing required parameter: '{at}.arguments'."));
                }
                let call = item["call_id"].as_str().unwrap_or("").to_string();
                if call.is_empty() {
                    return Err(format!("Missing required parameter: '{at}.call_id'."));
                }
                if calls.contains(&call) {
                    return Err(format!(
                        "Duplicate value for '{at}.call_id': '{call}' is the call_id of an earlier function_call."
                    ));
                }
                if let Some(rs) = issued.calls.get(&call)
                    && !reasoning_seen.contains(rs)
                {
                    return Err(format!(
                        "Item '{call}' of type 'function_call' was provided without its required 'reasoning' item: '{rs}'."
                    ));
                }
                calls.push(call);
            }
            "function_call_output" => {
                unknown_keys(item, &["type", "call_id", "output", "id", "status"], &at)?;
                let call = item["call_id"].as_str().unwrap_or("");
                if !calls.iter().any(|c| c == call) {
                    return Err(format!(
                        "No tool call found for function call output with call_id {call}."
                    ));
                }
                if !item["output"].is_string() {
                    return Err(format!(
                        "Invalid type for '{at}.output': expected a string."
                    ));
                }
                answered.insert(call.to_string());
            }
            other => return Err(format!("Invalid value: '{other}' for '{at}.type'.")),
        }
    }
    if let Some(open) = calls.iter().find(|c| !answered.contains(*c)) {
        return Err(format!("No tool output found for function call {open}."));
    }
    Ok(())
}

fn not_persisted(id: &Value) -> String {
    format!(
        "Item with id {id} not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
    )
}

fn event(seq: &mut u64, data: Value) -> String {
    let mut data = data;
    data["sequence_number"] = json!(*seq);
    *seq += 1;
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or("")
    )
}

/// The `response.*` events of a scripted turn. With `reasoning`, a
/// reasoning item with id `reasoning_id` comes first, its encrypted content
/// `encrypted` when the request asked for it.
#[allow(clippy::too_many_arguments)]
pub(crate) fn events(
    turn: &ScriptedTurn,
    model: &str,
    response_id: &str,
    tool_ids: &[String],
    usage: WireUsage,
    reasoning: Option<(&str, Option<&str>)>,
) -> Vec<String> {
    let mut seq = 0;
    let mut out = Vec::new();
    let response = |status: &str, output: Vec<Value>| {
        json!({"id": response_id, "object": "response", "created_at": 0, "status": status,
               "model": model, "output": output, "usage": null})
    };
    out.push(event(
        &mut seq,
        json!({"type": "response.created", "response": response("in_progress", vec![])}),
    ));
    let mut output = Vec::new();
    if let Some((id, encrypted)) = reasoning {
        let summary = json!([{"type": "summary_text", "text": "Considering the request."}]);
        let index = output.len();
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.added", "output_index": index,
                   "item": {"id": id, "type": "reasoning", "summary": []}}),
        ));
        out.push(event(
            &mut seq,
            json!({"type": "response.reasoning_summary_text.delta", "item_id": id,
                   "output_index": index, "summary_index": 0, "delta": "Considering the request."}),
        ));
        let mut item = json!({"id": id, "type": "reasoning", "summary": summary});
        if let Some(e) = encrypted {
            item["encrypted_content"] = json!(e);
        }
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        output.push(item);
    }
    if let Some(text) = turn.text.as_deref().filter(|t| !t.is_empty()) {
        let index = output.len();
        let id = format!("msg_{response_id}");
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.added", "output_index": index,
                   "item": {"id": id, "type": "message", "status": "in_progress", "role": "assistant", "content": []}}),
        ));
        for p in pieces(text, 3) {
            out.push(event(
                &mut seq,
                json!({"type": "response.output_text.delta", "item_id": id, "output_index": index,
                       "content_index": 0, "delta": p}),
            ));
        }
        let item = json!({"id": id, "type": "message", "status": "completed", "role": "assistant",
                          "content": [{"type": "output_text", "text": text, "annotations": []}]});
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        output.push(item);
    }
    for ((name, args), call_id) in turn.tool_calls.iter().zip(tool_ids) {
        let index = output.len();
        let id = format!("fc_{call_id}");
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.added", "output_index": index,
                   "item": {"id": id, "type": "function_call", "status": "in_progress",
                            "call_id": call_id, "name": name, "arguments": ""}}),
        ));
        for p in pieces(args, 2) {
            out.push(event(
                &mut seq,
                json!({"type": "response.function_call_arguments.delta", "item_id": id,
                       "output_index": index, "delta": p}),
            ));
        }
        let item = json!({"id": id, "type": "function_call", "status": "completed",
                          "call_id": call_id, "name": name, "arguments": args});
        out.push(event(
            &mut seq,
            json!({"type": "response.output_item.done", "output_index": index, "item": item}),
        ));
        output.push(item);
    }
    let mut u = serde_json::Map::new();
    if let Some(v) = usage.input_tokens {
        u.insert("input_tokens".into(), json!(v));
    }
    if let Some(c) = usage.cache_read_tokens {
        u.insert("input_tokens_details".into(), json!({"cached_tokens": c}));
    }
    if let Some(v) = usage.output_tokens {
        u.insert("output_tokens".into(), json!(v));
    }
    if let Some(r) = usage.reasoning_tokens {
        u.insert(
            "output_tokens_details".into(),
            json!({"reasoning_tokens": r}),
        );
    }
    if let (Some(i), Some(o)) = (usage.input_tokens, usage.output_tokens) {
        u.insert("total_tokens".into(), json!(i + o));
    }
    let incomplete = turn
        .stop_reason
        .as_deref()
        .filter(|r| *r == "max_output_tokens");
    let mut done = response(
        if incomplete.is_some() {
            "incomplete"
        } else {
            "completed"
        },
        output,
    );
    done["usage"] = if u.is_empty() {
        Value::Null
    } else {
        Value::Object(u)
    };
    match incomplete {
        Some(reason) => {
            done["incomplete_details"] = json!({"reason": reason});
            out.push(event(
                &mut seq,
                json!({"type": "response.incomplete", "response": done}),
            ));
        }
        None => out.push(event(
            &mut seq,
            json!({"type": "response.completed", "response": done}),
        )),
    }
    out
}

/// The start of a Responses stream followed by `response.failed`.
pub(crate) fn error_events(
    model: &str,
    response_id: &str,
    code: &str,
    message: &str,
) -> Vec<String> {
    let mut seq = 0;
    vec![
        event(
            &mut seq,
            json!({"type": "response.created", "response": {"id": response_id, "object": "response",
                   "status": "in_progress", "model": model, "output": []}}),
        ),
        event(
            &mut seq,
            json!({"type": "response.failed", "response": {"id": response_id, "object": "response",
                   "status": "failed", "model": model, "output": [],
                   "error": {"code": code, "message": message}}}),
        ),
    ]
}
