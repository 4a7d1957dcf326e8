//! OpenAI Chat Completions (`POST {base}/chat/completions`, streamed), for
//! OpenAI and any OpenAI-compatible server (Ollama, vLLM, llama.cpp server).
//!
//! Serialization: the system prompt is the first message; assistant tool
//! calls become `tool_calls` (with `content: ""`, never `null`, and
//! arguments that are always a JSON object: see `wire::tool_arguments`),
//! and `tool_choice: "auto"` goes with every list of tools; tool results become `tool` messages (leading
//! their user message, since they must follow the assistant's calls), and any
//! images a tool returned follow in one user message, because `tool`
//! messages carry text only. Images are `image_url` data URLs. Prefix caching
//! is automatic on these servers, so cache hints are not serialized.
//!
//! Tool-call ids are kept exactly as the server sent them, empty when it
//! sent none; some servers repeat `call_0` in every response. The host makes
//! them unique in the session and gives the server its own back.
//!
//! Usage: `prompt_tokens` is all input; `prompt_tokens_details.cached_tokens`
//! (or DeepSeek's `prompt_cache_hit_tokens`) is the cache read; the miss is
//! `prompt_tokens − cached_tokens` only when the cached count was reported.

use std::collections::BTreeMap;

use latch_engine_sdk::types::{Part, Role, ToolCall};
use serde_json::{Map, Value, json};

use crate::error::ProviderError;
use crate::request::{
    AssistantTurn, MediaResolver, ProviderRequest, StopReason, StreamEvent, Usage,
};
use crate::sse::SseEvent;
use crate::wire::{self, Failure, WireStream, encode_image, opt_u64, parse_json};

/// The default base URL of OpenAI's API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Which body field carries the output limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxTokensField {
    /// `max_completion_tokens`, which OpenAI's current models require.
    MaxCompletionTokens,
    /// `max_tokens`, which OpenAI-compatible servers understand.
    MaxTokens,
}

/// The exact JSON body Latch sends for `req`.
pub fn request_body(
    req: &ProviderRequest,
    media: &dyn MediaResolver,
    max_tokens_field: MaxTokensField,
) -> Result<Value, ProviderError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    let field = match max_tokens_field {
        MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        MaxTokensField::MaxTokens => "max_tokens",
    };
    body.insert(field.into(), json!(req.max_tokens));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.input_schema,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        // The API's default with tools, said out loud: llama-cpp-python's
        // server does not show the model its tools without it.
        body.insert("tool_choice".into(), json!("auto"));
    }

    let mut messages = Vec::new();
    if !req.system.is_empty() {
        messages.push(json!({"role": "system", "content": req.system}));
    }
    for m in &req.messages {
        match m.role {
            Role::User => user_messages(&m.parts, media, &mut messages)?,
            Role::Assistant => {
                let mut texts = Vec::new();
                let mut calls = Vec::new();
                for p in &m.parts {
                    match p {
                        Part::Text(t) if t.is_empty() => {}
                        Part::Text(t) => texts.push(t.clone()),
                        Part::ToolCall(c) => calls.push(json!({
                            "id": c.id,
                            "type": "function",
                            "function": {
                                "name": c.name,
                                "arguments": wire::tool_arguments_text(&c.arguments_json),
                            },
                        })),
                        other => texts.push(latch_engine_sdk::render_part_text(other)),
                    }
                }
                if texts.is_empty() && calls.is_empty() {
                    continue;
                }
                // Never `null`: OpenAI takes an empty string beside tool
                // calls, and llama-cpp-python's server refuses `null` (500).
                let msg_content = texts.join("\n\n");
                let mut msg = json!({"role": "assistant", "content": msg_content});
                if !calls.is_empty() {
                    msg["tool_calls"] = Value::Array(calls);
                }
                messages.push(msg);
            }
        }
    }
    body.insert("messages".into(), Value::Array(messages));
    Ok(Value::Object(body))
}

fn image_part(
    media: &dyn MediaResolver,
    m: &latch_engine_sdk::types::MediaRef,
) -> Result<Value, ProviderError> {
    let data = encode_image(media, m)?;
    Ok(json!({
        "type": "image_url",
        "image_url": {"url": format!("data:{};base64,{}", m.mime_type, data)},
    }))
}

fn user_messages(
    parts: &[Part],
    media: &dyn MediaResolver,
    out: &mut Vec<Value>,
) -> Result<(), ProviderError> {
    let mut content: Vec<Value> = Vec::new();
    let mut tool_images: Vec<Value> = Vec::new();
    for p in parts.iter().filter(|p| matches!(p, Part::ToolResult(_))) {
        let Part::ToolResult(r) = p else { continue };
        out.push(json!({"role": "tool", "tool_call_id": r.call_id, "content": r.content}));
        if !r.images.is_empty() {
            tool_images.push(json!({
                "type": "text",
                "text": format!("Images returned by tool call {} ({}):", r.call_id, r.name),
            }));
            for img in &r.images {
                tool_images.push(image_part(media, img)?);
            }
        }
    }
    content.extend(tool_images);
    for p in parts {
        match p {
            Part::ToolResult(_) => {}
            Part::Text(t) if t.is_empty() => {}
            Part::Text(t) => content.push(json!({"type": "text", "text": t})),
            Part::Image(img) => content.push(image_part(media, img)?),
            other => content.push(json!({
                "type": "text",
                "text": latch_engine_sdk::render_part_text(other),
            })),
        }
    }
    match content.as_slice() {
        [] => {}
        [one] if one["type"] == "text" => {
            out.push(json!({"role": "user", "content": one["text"]}));
        }
        _ => out.push(json!({"role": "user", "content": content})),
    }
    Ok(())
}

#[derive(Default)]
struct ToolAcc {
    id: String,
    name: String,
    args: String,
    started: bool,
}

/// Parsing state of one Chat Completions response stream.
pub(crate) struct OpenAiStream {
    provider: &'static str,
    text: String,
    tools: BTreeMap<u64, ToolAcc>,
    finish: Option<String>,
    usage: Option<Usage>,
    done: bool,
}

impl OpenAiStream {
    pub(crate) fn new(provider: &'static str) -> Self {
        OpenAiStream {
            provider,
            text: String::new(),
            tools: BTreeMap::new(),
            finish: None,
            usage: None,
            done: false,
        }
    }
}

/// Maps a Chat Completions `usage` object to [`Usage`].
pub fn map_usage(u: &Value) -> Usage {
    let prompt = opt_u64(u.get("prompt_tokens"));
    let cached = opt_u64(u.pointer("/prompt_tokens_details/cached_tokens"));
    let hit = opt_u64(u.get("prompt_cache_hit_tokens"));
    let miss = opt_u64(u.get("prompt_cache_miss_tokens"));
    let (cache_read, cache_miss) = match (cached, hit, miss) {
        (Some(c), _, _) => (Some(c), prompt.map(|p| p.saturating_sub(c))),
        (None, Some(h), Some(m)) => (Some(h), Some(m)),
        (None, Some(h), None) => (Some(h), prompt.map(|p| p.saturating_sub(h))),
        (None, None, _) => (None, None),
    };
    Usage {
        input_tokens: prompt,
        output_tokens: opt_u64(u.get("completion_tokens")),
        cache_read_tokens: cache_read,
        cache_creation_tokens: None,
        cache_miss_tokens: cache_miss,
        reasoning_tokens: opt_u64(u.pointer("/completion_tokens_details/reasoning_tokens")),
    }
}

impl WireStream for OpenAiStream {
    fn on_sse(
        &mut self,
        ev: &SseEvent,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), Failure> {
        let data = ev.data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(());
        }
        if data.is_empty() {
            return Ok(());
        }
        let chunk = parse_json(self.provider, data)?;
        if let Some(err) = chunk.get("error").filter(|e| !e.is_null()) {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| err.to_string());
            let kind = err
                .get("type")
                .or_else(|| err.get("code"))
                .map(|k| {
                    k.as_str()
                        .map(str::to_string)
                        .unwrap_or_else(|| k.to_string())
                })
                .unwrap_or_else(|| "error".to_string());
            return Err(Failure::Fatal(ProviderError::Stream {
                provider: self.provider,
                kind,
                message,
            }));
        }
        if let Some(choice) = chunk.pointer("/choices/0") {
            let delta = choice.get("delta").cloned().unwrap_or(Value::Null);
            for key in ["reasoning_content", "reasoning"] {
                if delta
                    .get(key)
                    .and_then(Value::as_str)
                    .is_some_and(|s| !s.is_empty())
                {
                    emit(StreamEvent::ReasoningActivity);
                }
            }
            if let Some(t) = delta.get("content").and_then(Value::as_str)
                && !t.is_empty()
            {
                self.text.push_str(t);
                emit(StreamEvent::TextDelta(t.to_string()));
            }
            if let Some(calls) = delta.get("tool_calls").and_then(Value::as_array) {
                for (pos, call) in calls.iter().enumerate() {
                    let index = call
                        .get("index")
                        .and_then(Value::as_u64)
                        .unwrap_or(pos as u64);
                    let acc = self.tools.entry(index).or_default();
                    if let Some(id) = call.get("id").and_then(Value::as_str)
                        && !id.is_empty()
                        && !acc.started
                    {
                        acc.id = id.to_string();
                    }
                    if let Some(name) = call.pointer("/function/name").and_then(Value::as_str)
                        && acc.name.is_empty()
                    {
                        acc.name = name.to_string();
                    }
                    let piece = call
                        .pointer("/function/arguments")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    acc.args.push_str(piece);
                    if !acc.started && !acc.name.is_empty() {
                        // A server that sends no id leaves it empty: the
                        // host gives the call a session-unique one.
                        acc.started = true;
                        emit(StreamEvent::ToolCallStarted {
                            id: acc.id.clone(),
                            name: acc.name.clone(),
                        });
                        if !acc.args.is_empty() {
                            emit(StreamEvent::ToolArgumentsDelta {
                                id: acc.id.clone(),
                                delta: acc.args.clone(),
                            });
                        }
                    } else if acc.started && !piece.is_empty() {
                        emit(StreamEvent::ToolArgumentsDelta {
                            id: acc.id.clone(),
                            delta: piece.to_string(),
                        });
                    }
                }
            }
            if let Some(f) = choice.get("finish_reason").and_then(Value::as_str) {
                self.finish = Some(f.to_string());
            }
        }
        if let Some(u) = chunk.get("usage").filter(|u| u.is_object()) {
            let usage = map_usage(u);
            self.usage = Some(usage);
            emit(StreamEvent::Usage(usage));
        }
        Ok(())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn may_end_without_terminal(&self) -> bool {
        self.finish.is_some()
    }

    fn into_turn(self: Box<Self>) -> Result<AssistantTurn, ProviderError> {
        let mut parts = Vec::new();
        if !self.text.is_empty() {
            parts.push(Part::Text(self.text));
        }
        for (index, acc) in self.tools {
            if acc.name.is_empty() {
                return Err(ProviderError::Protocol {
                    provider: self.provider,
                    message: format!("tool call {index} never named its function"),
                });
            }
            parts.push(Part::ToolCall(ToolCall {
                id: acc.id,
                name: acc.name,
                arguments_json: if acc.args.is_empty() {
                    "{}".to_string()
                } else {
                    acc.args
                },
            }));
        }
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        let stop_reason = match self.finish.as_deref() {
            // Some compatible servers say "stop" even when they called tools.
            Some("stop") if has_calls => StopReason::ToolUse,
            Some("stop") => StopReason::EndTurn,
            Some("tool_calls") | Some("function_call") => StopReason::ToolUse,
            Some("length") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None if has_calls => StopReason::ToolUse,
            None => StopReason::Other("unspecified".to_string()),
        };
        Ok(AssistantTurn {
            parts,
            stop_reason,
            usage: self.usage.unwrap_or_default(),
            provider_state: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_tokens_give_a_miss_only_when_reported() {
        let u = map_usage(
            &json!({"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 60}}),
        );
        assert_eq!(u.input_tokens, Some(100));
        assert_eq!(u.cache_read_tokens, Some(60));
        assert_eq!(u.cache_miss_tokens, Some(40));
        assert_eq!(u.cache_creation_tokens, None);
        let u = map_usage(&json!({"prompt_tokens": 100, "completion_tokens": 7}));
        assert_eq!(u.cache_read_tokens, None);
        assert_eq!(u.cache_miss_tokens, None);
        let u = map_usage(
            &json!({"prompt_tokens": 100, "prompt_cache_hit_tokens": 64, "prompt_cache_miss_tokens": 36}),
        );
        assert_eq!(
            (u.cache_read_tokens, u.cache_miss_tokens),
            (Some(64), Some(36))
        );
        let u = map_usage(&json!({}));
        assert_eq!(u, Usage::default());
    }
}
