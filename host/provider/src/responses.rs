//! The OpenAI Responses API (`POST {base}/responses`, streamed), what
//! `provider.kind = "openai"` speaks by default (`wire = "chat"` keeps Chat
//! Completions).
//!
//! Serialization: the system prompt is `instructions`; every message becomes
//! input items: user text and images as a `message` with `input_text` /
//! `input_image` parts, assistant text as a `message` with `output_text`,
//! tool calls as `function_call` items and their results as
//! `function_call_output` items (any images a tool returned follow in a user
//! message). Requests are stateless (`store: false`): nothing refers to a
//! stored item by id. With a reasoning effort configured for the model the
//! body asks for `include: ["reasoning.encrypted_content"]`, and the
//! `reasoning` items that come back are kept as opaque [`ProviderState`] and
//! sent back, exactly, before the calls they led to, as the API requires.
//! `prompt_cache_key` is the session's key, so a session's requests reach
//! the cache that holds its prefix.
//!
//! Streaming: `response.output_text.delta`,
//! `response.function_call_arguments.delta` and reasoning events are
//! transient; the turn is built from the `response.output_item.done` items
//! and committed on `response.completed` (or `response.incomplete`).
//!
//! Usage: `input_tokens` is all input, `input_tokens_details.cached_tokens`
//! the cache read (the miss is the difference), `output_tokens_details
//! .reasoning_tokens` the reasoning part of the output.

use std::collections::BTreeMap;

use latch_engine_sdk::types::{Message, Part, Role};
use serde_json::{Map, Value, json};

use crate::error::ProviderError;
use crate::request::{
    AssistantTurn, MediaResolver, OpaqueBlock, ProviderRequest, ProviderState, ReasoningOptions,
    RequestContext, StopReason, StreamEvent, Usage,
};
use crate::sse::SseEvent;
use crate::wire::{Failure, WireStream, encode_image, opt_u64, parse_json};

/// The provider name used in errors.
pub const PROVIDER: &str = "openai";
/// The wire name of the [`ProviderState`] this adapter writes and replays.
pub const WIRE: &str = "openai-responses";
/// What `include` asks for when the model reasons.
pub const INCLUDE_ENCRYPTED_REASONING: &str = "reasoning.encrypted_content";

/// The exact JSON body Latch sends for `req`.
pub fn request_body(
    req: &ProviderRequest,
    ctx: &RequestContext,
    reasoning: Option<&ReasoningOptions>,
    media: &dyn MediaResolver,
) -> Result<Value, ProviderError> {
    let mut body = Map::new();
    body.insert("model".into(), json!(req.model));
    if !req.system.is_empty() {
        body.insert("instructions".into(), json!(req.system));
    }
    let mut input = Vec::new();
    for (i, m) in req.messages.iter().enumerate() {
        match m.role {
            Role::User => user_items(m, media, &mut input)?,
            Role::Assistant => {
                let replay = ctx.replay.get(&i).filter(|s| s.wire == WIRE);
                assistant_items(m, replay, &mut input);
            }
        }
    }
    body.insert("input".into(), Value::Array(input));
    if !req.tools.is_empty() {
        let tools: Vec<Value> = req
            .tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "name": t.name,
                    "description": t.description,
                    "strict": false,
                    "parameters": t.input_schema,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
        body.insert("parallel_tool_calls".into(), json!(true));
    }
    if let Some(effort) = reasoning.and_then(|r| r.reasoning_effort.as_deref()) {
        body.insert("reasoning".into(), json!({"effort": effort}));
        body.insert("include".into(), json!([INCLUDE_ENCRYPTED_REASONING]));
    }
    body.insert("store".into(), json!(false));
    body.insert("stream".into(), json!(true));
    body.insert("max_output_tokens".into(), json!(req.max_tokens));
    if let Some(key) = &ctx.cache_key {
        body.insert("prompt_cache_key".into(), json!(key));
    }
    Ok(Value::Object(body))
}

fn image_part(
    media: &dyn MediaResolver,
    m: &latch_engine_sdk::types::MediaRef,
) -> Result<Value, ProviderError> {
    let data = encode_image(media, m)?;
    Ok(json!({
        "type": "input_image",
        "image_url": format!("data:{};base64,{}", m.mime_type, data),
    }))
}

fn user_items(
    m: &Message,
    media: &dyn MediaResolver,
    out: &mut Vec<Value>,
) -> Result<(), ProviderError> {
    let mut content = Vec::new();
    let mut tool_images = Vec::new();
    // Outputs answer the calls before them: they lead the message.
    for p in &m.parts {
        let Part::ToolResult(r) = p else { continue };
        out.push(
            json!({"type": "function_call_output", "call_id": r.call_id, "output": r.content}),
        );
        if !r.images.is_empty() {
            tool_images.push(json!({
                "type": "input_text",
                "text": format!("[images returned by tool call {}]", r.call_id),
            }));
            for img in &r.images {
                tool_images.push(image_part(media, img)?);
            }
        }
    }
    for p in &m.parts {
        match p {
            Part::ToolResult(_) => {}
            Part::Text(t) if t.is_empty() => {}
            Part::Text(t) => content.push(json!({"type": "input_text", "text": t})),
            Part::Image(img) => content.push(image_part(media, img)?),
            other => content.push(json!({
                "type": "input_text",
                "text": latch_engine_sdk::render_part_text(other),
            })),
        }
    }
    tool_images.extend(content);
    if !tool_images.is_empty() {
        out.push(json!({"type": "message", "role": "user", "content": tool_images}));
    }
    Ok(())
}

fn assistant_items(m: &Message, replay: Option<&ProviderState>, out: &mut Vec<Value>) {
    let mut opaque: Vec<(usize, Value)> = replay.map(|s| s.values().collect()).unwrap_or_default();
    opaque.reverse();
    let mut flush = |out: &mut Vec<Value>, upto: usize| {
        while opaque.last().is_some_and(|(at, _)| *at <= upto) {
            out.push(opaque.pop().expect("checked").1);
        }
    };
    for (index, p) in m.parts.iter().enumerate() {
        flush(out, index);
        match p {
            Part::Text(t) if t.is_empty() => {}
            Part::ToolCall(c) => out.push(json!({
                "type": "function_call",
                "call_id": c.id,
                "name": c.name,
                "arguments": crate::wire::tool_arguments_text(&c.arguments_json),
            })),
            other => {
                let text = match other {
                    Part::Text(t) => t.clone(),
                    other => latch_engine_sdk::render_part_text(other),
                };
                out.push(json!({
                    "type": "message",
                    "role": "assistant",
                    "content": [{"type": "output_text", "text": text}],
                }));
            }
        }
    }
    flush(out, usize::MAX);
}

/// Maps a Responses `usage` object to [`Usage`].
pub fn map_usage(u: &Value) -> Usage {
    let input = opt_u64(u.get("input_tokens"));
    let cached = opt_u64(u.pointer("/input_tokens_details/cached_tokens"));
    Usage {
        input_tokens: input,
        output_tokens: opt_u64(u.get("output_tokens")),
        cache_read_tokens: cached,
        cache_creation_tokens: None,
        cache_miss_tokens: match (input, cached) {
            (Some(i), Some(c)) => Some(i.saturating_sub(c)),
            _ => None,
        },
        reasoning_tokens: opt_u64(u.pointer("/output_tokens_details/reasoning_tokens")),
    }
}

/// Parsing state of one Responses stream.
#[derive(Default)]
pub(crate) struct ResponsesStream {
    /// Finished output items by `output_index`.
    items: BTreeMap<u64, Value>,
    /// `item_id` → `call_id` of the function calls in progress.
    calls: BTreeMap<String, String>,
    usage: Option<Usage>,
    incomplete: Option<String>,
    done: bool,
}

impl ResponsesStream {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    fn finish(&mut self, data: &Value, emit: &mut (dyn FnMut(StreamEvent) + Send)) {
        if let Some(u) = data.pointer("/response/usage").filter(|u| u.is_object()) {
            let usage = map_usage(u);
            emit(StreamEvent::Usage(usage));
            self.usage = Some(usage);
        }
        // Items the stream did not finish one by one.
        if self.items.is_empty()
            && let Some(output) = data.pointer("/response/output").and_then(Value::as_array)
        {
            for (i, item) in output.iter().enumerate() {
                self.items.insert(i as u64, item.clone());
            }
        }
        self.done = true;
    }
}

fn protocol(message: impl Into<String>) -> Failure {
    Failure::Fatal(ProviderError::Protocol {
        provider: PROVIDER,
        message: message.into(),
    })
}

/// How an error the API reports (in a stream or a body) ends the attempt.
pub(crate) fn stream_failure(code: &str, message: &str) -> Failure {
    match code {
        "server_error" | "rate_limit_exceeded" | "server_is_overloaded" | "slow_down" => {
            Failure::Retryable(format!("{code}: {message}"))
        }
        "context_length_exceeded" => Failure::Fatal(ProviderError::ContextTooLong {
            provider: PROVIDER,
            message: message.to_string(),
            reported_tokens: None,
            limit_tokens: None,
        }),
        _ => Failure::Fatal(ProviderError::Stream {
            provider: PROVIDER,
            kind: code.to_string(),
            message: message.to_string(),
        }),
    }
}

impl WireStream for ResponsesStream {
    fn on_sse(
        &mut self,
        ev: &SseEvent,
        emit: &mut (dyn FnMut(StreamEvent) + Send),
    ) -> Result<(), Failure> {
        let data = parse_json(PROVIDER, &ev.data)?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(ev.event.as_str());
        let text = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        match kind {
            "response.output_item.added" => {
                let item = data.get("item").cloned().unwrap_or(Value::Null);
                match item.get("type").and_then(Value::as_str) {
                    Some("function_call") => {
                        let (call_id, name) = (text(&item, "call_id"), text(&item, "name"));
                        if call_id.is_empty() || name.is_empty() {
                            return Err(protocol("function_call item without a call_id or a name"));
                        }
                        self.calls.insert(text(&item, "id"), call_id.clone());
                        emit(StreamEvent::ToolCallStarted { id: call_id, name });
                    }
                    Some("reasoning") => emit(StreamEvent::ReasoningActivity),
                    _ => {}
                }
            }
            "response.output_text.delta" => emit(StreamEvent::TextDelta(text(&data, "delta"))),
            "response.function_call_arguments.delta" => {
                let id = self
                    .calls
                    .get(&text(&data, "item_id"))
                    .cloned()
                    .ok_or_else(|| protocol("arguments delta for a call that never started"))?;
                emit(StreamEvent::ToolArgumentsDelta {
                    id,
                    delta: text(&data, "delta"),
                });
            }
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                emit(StreamEvent::ReasoningActivity)
            }
            "response.output_item.done" => {
                let index = data
                    .get("output_index")
                    .and_then(Value::as_u64)
                    .unwrap_or(self.items.len() as u64);
                let item = data
                    .get("item")
                    .cloned()
                    .ok_or_else(|| protocol("response.output_item.done without an item"))?;
                self.items.insert(index, item);
            }
            "response.completed" => self.finish(&data, emit),
            "response.incomplete" => {
                self.incomplete = Some(
                    data.pointer("/response/incomplete_details/reason")
                        .and_then(Value::as_str)
                        .unwrap_or("incomplete")
                        .to_string(),
                );
                self.finish(&data, emit);
            }
            "response.failed" => {
                let err = data
                    .pointer("/response/error")
                    .cloned()
                    .unwrap_or(Value::Null);
                return Err(stream_failure(&text(&err, "code"), &text(&err, "message")));
            }
            "error" => {
                let code = data
                    .get("code")
                    .and_then(Value::as_str)
                    .or_else(|| data.pointer("/error/code").and_then(Value::as_str))
                    .unwrap_or("error")
                    .to_string();
                let message = data
                    .get("message")
                    .and_then(Value::as_str)
                    .or_else(|| data.pointer("/error/message").and_then(Value::as_str))
                    .unwrap_or("(no message)")
                    .to_string();
                return Err(stream_failure(&code, &message));
            }
            // response.created, .in_progress, content parts, *.done events and
            // event types added later carry nothing the turn needs.
            _ => {}
        }
        Ok(())
    }

    fn is_complete(&self) -> bool {
        self.done
    }

    fn into_turn(self: Box<Self>) -> Result<AssistantTurn, ProviderError> {
        let mut parts = Vec::new();
        let mut opaque = Vec::new();
        for item in self.items.into_values() {
            match item.get("type").and_then(Value::as_str) {
                // Without its encrypted content a reasoning item cannot be
                // sent back statelessly; it is not kept.
                Some("reasoning")
                    if item
                        .get("encrypted_content")
                        .and_then(Value::as_str)
                        .is_some_and(|c| !c.is_empty()) =>
                {
                    let mut item = item;
                    if let Some(o) = item.as_object_mut() {
                        o.remove("status");
                    }
                    opaque.push(OpaqueBlock {
                        before_part: parts.len(),
                        json: item.to_string(),
                    });
                }
                Some("message") => {
                    let text: String = item
                        .get("content")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(|c| match c.get("type").and_then(Value::as_str) {
                            Some("output_text") => c.get("text").and_then(Value::as_str),
                            Some("refusal") => c.get("refusal").and_then(Value::as_str),
                            _ => None,
                        })
                        .collect();
                    if !text.is_empty() {
                        parts.push(Part::Text(text));
                    }
                }
                Some("function_call") => {
                    let get = |k: &str| item.get(k).and_then(Value::as_str).unwrap_or("");
                    if get("name").is_empty() {
                        // A call that names no tool cannot be run or answered.
                        return Err(ProviderError::Protocol {
                            provider: PROVIDER,
                            message: "a function_call item names no function".into(),
                        });
                    }
                    let arguments = get("arguments");
                    parts.push(Part::ToolCall(latch_engine_sdk::types::ToolCall {
                        id: get("call_id").to_string(),
                        name: get("name").to_string(),
                        arguments_json: if arguments.is_empty() {
                            "{}".to_string()
                        } else {
                            arguments.to_string()
                        },
                    }));
                }
                _ => {}
            }
        }
        let has_calls = parts.iter().any(|p| matches!(p, Part::ToolCall(_)));
        let stop_reason = match self.incomplete.as_deref() {
            Some("max_output_tokens") => StopReason::MaxTokens,
            Some(other) => StopReason::Other(other.to_string()),
            None if has_calls => StopReason::ToolUse,
            None => StopReason::EndTurn,
        };
        Ok(AssistantTurn {
            parts,
            stop_reason,
            usage: self.usage.unwrap_or_default(),
            provider_state: (!opaque.is_empty()).then(|| ProviderState {
                wire: WIRE.to_string(),
                blocks: opaque,
            }),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_keeps_unknown_categories_unknown() {
        let u = map_usage(&json!({
            "input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
            "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 20},
        }));
        assert_eq!(u.input_tokens, Some(100));
        assert_eq!(u.cache_read_tokens, Some(60));
        assert_eq!(u.cache_miss_tokens, Some(40));
        assert_eq!(u.reasoning_tokens, Some(20));
        let u = map_usage(&json!({"input_tokens": 100}));
        assert_eq!(u.output_tokens, None);
        assert_eq!(u.cache_read_tokens, None);
        assert_eq!(u.cache_miss_tokens, None);
        assert_eq!(u.reasoning_tokens, None);
    }
}
